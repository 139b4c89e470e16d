"""The ``meanfield`` command line.

    meanfield simulate [--config run.toml] [--n-particles 512] [--beta 1e3] ... --out run.nc

Every flag of ``simulate`` is a field of :class:`meanfield.config.SimulationConfig`; a TOML
file sets any of them and flags override the file.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from dataclasses import MISSING, fields
from pathlib import Path

import numpy as np

from ._validation import check_int, check_output_path, check_positive
from .config import SimulationConfig
from .errors import MeanfieldError
from .spacing import min_pair_distance  # NaN for < 2 points (documented there)

CASES = ("semicircle", "uniform", "disk")

HELP = {
    "data": "synthetic task for the alignment data: two_moons, xor, checkerboard, radial, "
    "gaussian_mixture (default two_moons)",
    "data_file": "read the data from a .npz (arrays X, y) or .csv (label last) instead",
    "n_data": "number of data points drawn from the synthetic task (>= 2)",
    "data_dim": "input dimension d of the synthetic task",
    "feature": "feature map phi(x; omega): fourier (sqrt2 cos(w.x + b), p = d + 1), positive "
    "(exp(w.x - |x|^2/2), p = d) or softplus (p = d)",
    "alignment": "alignment form: linear (U-statistic), risk (with --alpha), normalised "
    "(Cristianini) or none",
    "alpha": "scale of the ideal kernel alpha*T in the risk form (> 0)",
    "kernel": "pair kernel: coulomb (Riesz s = p - 2), riesz (needs --s), log, gaussian, quadratic",
    "s": "Riesz exponent s of --kernel riesz, required with it (any real; s < p unless "
    "--softening > 0)",
    "softening": "softening length epsilon >= 0 of the pair kernel",
    "width": "width of the gaussian pair kernel (> 0)",
    "lam": "interaction strength lambda >= 0 (0 switches the pair term off)",
    "confinement": "strength of the confining potential |omega|^2/2 (>= 0; 0 = none)",
    "domain": "particle domain: box [-R, R]^p or ball B(0, R)",
    "radius": "R > 0, half-width of the box or radius of the ball",
    "n_particles": "number of particles N >= 1",
    "init": "initial particles: gaussian or orthogonal (blocks of orthogonal rows)",
    "bandwidth": "initial particles omega ~ N(0, bandwidth^-2 I) (> 0)",
    "method": "langevin (Algorithm 1, projected) or mala (exact Gibbs sampler)",
    "regime": "mean-field (beta_N = beta) or coulomb-gas (beta_N = beta N)",
    "eta": "step size eta > 0; time t = eta * steps",
    "beta": "inverse temperature beta > 0",
    "n_steps": "number of steps >= 1",
    "record_every": "record positions and energies every this many steps (default ~100 records)",
    "interaction_batch": "random-batch size B >= 2 for the pair term (O(N B) per step)",
    "data_batch": "mini-batch size of data rows per step for the alignment",
    "dtype": "float64 (default, for the science) or float32 (speed)",
    "device": "torch device: cpu or cuda",
    "seed": "seed of every random number (data, initial particles, noise)",
}


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    for f in fields(SimulationConfig):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not MISSING else None
        # "int", "float | None", ...: the first type named is the flag's type
        typ = {"int": int, "float": float}.get(str(f.type).split(" ")[0], str)
        parser.add_argument(
            flag,
            dest=f.name,
            type=typ,
            default=None,
            help=f"{HELP.get(f.name, '')} [default: {default}]",
        )


def _config_from_args(args) -> SimulationConfig:
    overrides = {f.name: getattr(args, f.name) for f in fields(SimulationConfig)}
    if args.config:
        return SimulationConfig.from_toml(args.config, **overrides)
    return SimulationConfig(**{k: v for k, v in overrides.items() if v is not None})


def coincidence_warnings(ds) -> list[str]:
    """After a run: warn when particles ended on top of each other (minimum pair distance 0).
    Pinned particles are warned about by :func:`meanfield.particles.simulate` itself."""
    if "omega" not in ds or ds["omega"].ndim != 3:
        return []
    last = ds["omega"].isel(time=-1).values
    if len(last) > 1 and min_pair_distance(last) == 0.0:
        return ["some particles coincide (minimum pair distance 0)"]
    return []


def summarise_run(ds) -> str:
    """A short human-readable summary of a simulation dataset."""
    a = ds.attrs
    lines = [
        f"meanfield {a['meanfield_version']}: {a['method']} ({a['regime']}), N={a['N']}, "
        f"p={a['p']}, beta={a['beta']:g}, eta={a['eta']:g}, {a['n_steps']} steps "
        f"(t = {float(ds['time'][-1]):g}), seed={a['seed']}",
    ]
    for k in [v for v in ds.data_vars if str(v).startswith("energy")]:
        first, last = ds[k].isel(time=0).values, ds[k].isel(time=-1).values
        lines.append(f"  {k:<22s} {np.mean(first):+.6g} -> {np.mean(last):+.6g}")
    if "acceptance_rate" in ds:
        lines.append(f"  acceptance rate        {float(ds['acceptance_rate'][1:].mean()):.3f}")
    if "omega" in ds and ds["omega"].ndim == 3:
        last = ds["omega"].isel(time=-1).values
        lines.append(f"  min pair distance      {min_pair_distance(last):.4g}")
        lines.append(f"  mean |omega|           {np.linalg.norm(last, axis=1).mean():.4g}")
    return "\n".join(lines)


THREADS_HELP = (
    "torch CPU threads (default: torch's choice, one per core; 1 is often several times "
    "faster on a busy shared machine)"
)


def _set_threads(args) -> None:
    """``--threads``: checked (before any work) and applied to torch."""
    if getattr(args, "threads", None) is not None:
        import torch

        torch.set_num_threads(check_int("--threads", args.threads))


def _warn(message: str) -> None:
    print(f"meanfield: warning: {message}", file=sys.stderr)


@contextlib.contextmanager
def _package_warnings_as_lines():
    """Inside: every :class:`~meanfield.errors.MeanfieldWarning` is printed at once as one
    ``meanfield: warning:`` line on stderr (each time; other warnings as Python shows them)."""
    from .errors import MeanfieldWarning

    with warnings.catch_warnings():
        warnings.simplefilter("always", MeanfieldWarning)
        default = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, MeanfieldWarning):
                _warn(str(message))
            else:
                default(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def cmd_simulate(args) -> int:
    from .results import save_dataset

    cfg = _config_from_args(args)
    out = check_output_path("--out", args.out, kind="file")
    _set_threads(args)
    t0 = time.perf_counter()
    with _package_warnings_as_lines():
        ds = cfg.run(progress=not args.no_progress)
    wall = time.perf_counter() - t0
    ds.attrs["wall_time_s"] = wall
    save_dataset(ds, out)
    print(summarise_run(ds))
    print(f"  wall time              {wall:.2f} s")
    print(f"wrote {out}")
    for w in coincidence_warnings(ds):
        _warn(w)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="meanfield",
        description="Random features as charged particles: simulate the Coulomb particle model "
        "of kernel learning (projected Langevin or an exact Gibbs sampler) and its "
        "mean-field limit.",
        epilog="Run 'meanfield simulate --help' for the flags of a run. A bad input ends with "
        "one line on stderr and exit status 2; --debug shows the traceback instead.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the full traceback of an error (for bugs)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser(
        "simulate",
        help="run the particle dynamics and write an xarray dataset (netCDF)",
        description="Evolve N particles (random features) under alignment + Riesz repulsion "
        "by projected Langevin dynamics (Algorithm 1) or MALA, and write positions, "
        "energies and every parameter to a netCDF file. Flags override --config.",
    )
    sim.add_argument(
        "--config",
        help="TOML file with any of the flags below (underscored "
        "names, top level or a [simulate] table)",
    )
    sim.add_argument(
        "--out", default="runs/simulate.nc", help="output netCDF file [default: runs/simulate.nc]"
    )
    sim.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    sim.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    _add_config_flags(sim)
    sim.set_defaults(func=cmd_simulate)

    cmp = sub.add_parser(
        "compare",
        help="particles and the McKean-Vlasov grid density side by side (the main job)",
        description="Evolve N particles (projected Langevin) and the grid density "
        "(finite-volume McKean-Vlasov) from the same initial law under the same energy and "
        "beta, on the embedded default problem: positive random features on Sinha-Duchi "
        "radial two-class data, V = |w|^2/2 + linear alignment + Coulomb repulsion. Writes "
        "comparison.nc (both views and W1/W2, free energies, mass over time) and "
        "comparison.png.",
    )
    cmp.add_argument("--out", default="runs/compare", help="output folder [default: runs/compare]")
    cmp.add_argument(
        "--dim", type=int, default=1, choices=(1, 2), help="particle dimension p: 1 or 2"
    )
    cmp.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    cmp.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    for name, typ, text in (
        ("n_particles", int, "number of particles N"),
        ("beta", float, "inverse temperature beta > 0 (mean-field regime)"),
        ("t_final", float, "final time > 0"),
        ("eta", float, "particle step size eta > 0"),
        ("grid_n", int, "grid cells per axis"),
        ("lam", float, "Coulomb interaction strength lambda >= 0"),
        ("n_data", int, "number of data points"),
        ("seed", int, "seed of the particle sample and noise"),
    ):
        cmp.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=typ,
            default=None,
            help=f"{text} [default: the problem's]",
        )
    cmp.set_defaults(func=cmd_compare)

    fig = sub.add_parser(
        "figures",
        help="regenerate the theory figures (PNG, PDF + netCDF)",
        description="Recompute and draw every theory figure into --out, each "
        "next to a netCDF record of its numbers and parameters.",
    )
    fig.add_argument("--out", default="figures", help="output folder [default: figures]")
    fig.add_argument(
        "--size",
        default="full",
        choices=("full", "small"),
        help="full (committed figures, ~6 min on 2 cores) or small (quick) [default: full]",
    )
    fig.add_argument("--only", nargs="*", help="names of the figures to make (default: all)")
    fig.add_argument("--seed", type=int, default=0)
    fig.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    fig.set_defaults(func=cmd_figures)

    st = sub.add_parser(
        "study",
        help="limit studies as resumable dask sweeps",
        description="Limit studies (THEORY 5). Each kind has its own flags and defaults: "
        "'meanfield study KIND --help'. Sweep runs are written as they finish, keyed by "
        "their whole configuration; rerunning the same command resumes.",
    )
    kinds = st.add_subparsers(dest="kind", required=True, metavar="KIND")
    fmt = argparse.ArgumentDefaultsHelpFormatter

    def _common(k, out, scheduler=True):
        k.add_argument("--out", default=out, help="output folder")
        if scheduler:
            k.add_argument(
                "--scheduler",
                default="local",
                help="'local' (LocalCluster, one worker per core), 'threads', or the "
                "address of a running dask scheduler (tcp://host:8786)",
            )
            k.add_argument(
                "--workers",
                type=int,
                default=None,
                help="local workers (%(default)s: one per core)",
            )
        k.add_argument("--no-progress", action="store_true", help="hide the progress bars")

    eq = kinds.add_parser(
        "equilibrium",
        formatter_class=fmt,
        help="particles relaxed on a closed-form case: W1/W2 to the exact law against N",
        description="N -> infinity on a closed-form case of THEORY 5: particles relaxed by "
        "Langevin at each (N, seed), W1/W2 to the exact equilibrium law, and the fitted rate "
        "in N with a bootstrap 95% interval over seeds (needs >= 3 distinct N).",
    )
    eq.add_argument("--case", default="uniform", choices=CASES, help="closed-form case")
    eq.add_argument(
        "--n", type=int, nargs="+", default=[16, 32, 64, 128], help="particle numbers N"
    )
    eq.add_argument("--beta", type=float, default=4.0, help="inverse temperature beta > 0")
    eq.add_argument("--regime", default="coulomb-gas", choices=("mean-field", "coulomb-gas"))
    eq.add_argument("--seeds", type=int, default=8, help="number of seeds per N (>= 2)")
    eq.add_argument("--t-end", type=float, default=6.0, help="Langevin time per run (> 0)")
    _common(eq, "runs/nlimit")

    pg = kinds.add_parser(
        "particles-vs-grid",
        formatter_class=fmt,
        help="W2(mu_N(t), rho_t) and the kernel gap against N on the default problem",
        description="N -> infinity at several times on the default side-by-side problem "
        "(p = 1): W2 between the particles and the McKean-Vlasov density and the kernel gap, "
        "with fitted rates in N (needs >= 3 distinct N).",
    )
    pg.add_argument("--n", type=int, nargs="+", default=[100, 400, 1600], help="particle numbers")
    pg.add_argument("--seeds", type=int, default=8, help="number of seeds per N (>= 2)")
    pg.add_argument("--t-final", type=float, default=1.0, help="final time of each run (> 0)")
    _common(pg, "runs/pvg")

    bt = kinds.add_parser(
        "beta",
        formatter_class=fmt,
        help="W2(rho_beta, mu*) on the grid and W2(mu_N, mu*) for particles against beta",
        description="beta -> infinity: the grid Gibbs state rho_beta against the exact law "
        "mu* (p = 1 cases), and particles in both regimes, with fitted rates in beta (needs "
        ">= 3 distinct beta).",
    )
    bt.add_argument("--case", default="uniform", choices=CASES, help="closed-form case")
    bt.add_argument(
        "--betas", type=float, nargs="+", default=[1.0, 4.0, 16.0, 64.0], help="betas to sweep"
    )
    bt.add_argument("--n", type=int, default=64, help="number of particles N")
    bt.add_argument("--seeds", type=int, default=4, help="number of seeds per beta (>= 2)")
    bt.add_argument("--t-end", type=float, default=6.0, help="Langevin time per run (> 0)")
    _common(bt, "runs/beta")

    td = kinds.add_parser(
        "t-decay",
        formatter_class=fmt,
        help="the free-energy gap along the McKean-Vlasov flow and its exponential rate",
        description="t -> infinity: F(rho_t) - F(rho_beta) along the McKean-Vlasov flow from "
        "a Gaussian (p = 1 cases) and its fitted exponential rate.",
    )
    td.add_argument(
        "--case", default="uniform", choices=("semicircle", "uniform"), help="closed-form case"
    )
    td.add_argument("--beta", type=float, default=1.0, help="inverse temperature beta > 0")
    td.add_argument("--t-final", type=float, default=6.0, help="final time of the flow (> 0)")
    _common(td, "runs/tdecay", scheduler=False)
    st.set_defaults(func=cmd_study)
    return parser


def cmd_compare(args) -> int:
    from .compare import DEFAULTS, run_default_comparison

    keys = ("n_particles", "beta", "t_final", "eta", "grid_n", "lam", "n_data", "seed")
    overrides = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    _check_compare_flags(overrides)
    out = check_output_path("--out", args.out, kind="dir")
    _set_threads(args)
    cfg = {**DEFAULTS[args.dim], **overrides}
    progress = not args.no_progress
    if progress:
        print(
            f"particles vs McKean-Vlasov grid, p = {args.dim}: N = {cfg['n_particles']}, "
            f"beta = {cfg['beta']:g}, grid {cfg['grid_n']}^{args.dim}, t = {cfg['t_final']:g}; "
            "stages: particles, grid, distances, figure",
            file=sys.stderr,
        )
    t0 = time.perf_counter()
    ds = run_default_comparison(out, dim=args.dim, progress=progress, **overrides)
    print(summarise_comparison(ds))
    print(f"  wall time {time.perf_counter() - t0:.2f} s")
    print(f"wrote {ds.attrs['dataset_path']} and {ds.attrs['figure_path']}")
    return 0


def _check_compare_flags(overrides: dict) -> None:
    """The compare flags, checked before any work (names as on the command line)."""
    for k in ("n_particles", "grid_n", "n_data"):
        if k in overrides:
            check_int(
                "--" + k.replace("_", "-"), overrides[k], minimum=2 if k != "n_particles" else 1
            )
    for k in ("beta", "t_final", "eta"):
        if k in overrides:
            check_positive("--" + k.replace("_", "-"), overrides[k])
    if "lam" in overrides:
        check_positive("--lam", overrides["lam"], allow_zero=True)
    if "seed" in overrides:
        check_int("--seed", overrides["seed"], minimum=0)


def summarise_comparison(ds) -> str:
    """Summary of a side-by-side run: a header (N, p, beta, regime, grid, times) and each
    diagnostic at the first and the last time, as an aligned table."""
    a = ds.attrs
    t_end = float(ds["time"][-1])
    grid = "x".join(str(ds.sizes[d]) for d in ("x", "y") if d in ds.sizes)
    lines = [
        f"meanfield {a['meanfield_version']}: particles vs McKean-Vlasov grid",
        f"  N = {a['N']} particles, p = {a['p']}, beta = {float(a['beta']):g} "
        f"({a.get('regime', 'mean-field')} regime), eta = {float(a['eta']):g}, "
        f"grid {grid} cells ({a.get('grid_scheme', '?')}), t = 0 .. {t_end:g}, "
        f"W method {a.get('w_method', '?')}, seed {a['seed']}",
    ]
    rows = [(str(k), ds[k].values) for k in ds.data_vars if ds[k].dims == ("time",)]
    width = max([len("quantity")] + [len(k) for k, _ in rows])
    head0, head1 = "t = 0", f"t = {t_end:g}"
    lines.append(f"  {'quantity':<{width}}  {head0:>13}  {head1:>13}")
    lines.append(f"  {'-' * width}  {'-' * 13}  {'-' * 13}")
    for k, v in rows:
        lines.append(f"  {k:<{width}}  {v[0]:>+13.5g}  {v[-1]:>+13.5g}")
    return "\n".join(lines)


def _study_preflight(args, *, sizes=None, size_name="--n") -> range:
    """Checks shared by the sweep studies, before any work: output folder, scheduler (and
    dask), seeds and sizes.  Returns the seeds."""
    from .sweeps import check_scheduler

    check_output_path("--out", args.out, kind="dir")
    check_scheduler(args.scheduler)
    if args.workers is not None:
        check_int("--workers", args.workers)
    for n in sizes or ():
        check_int(size_name, n)
    return range(check_int("--seeds", args.seeds, minimum=2))


def _note(message: str) -> None:
    print(f"meanfield: note: {message}", file=sys.stderr)


def _study_particles_vs_grid(args) -> int:
    from .studies.limits import particles_vs_grid_in_n

    seeds = _study_preflight(args, sizes=args.n)
    check_positive("--t-final", args.t_final)
    ds = particles_vs_grid_in_n(
        args.n,
        seeds,
        args.out,
        t_final=args.t_final,
        scheduler=args.scheduler,
        n_workers=args.workers,
        progress=not args.no_progress,
    )
    for note in ds.attrs.get("sweep_notes", []):
        _note(note)
    if str(ds.attrs.get("rate_status", "fitted")) != "fitted":
        print(f"rates in N: {ds.attrs['rate_status']} (N = {sorted(set(args.n))})")
    print(f"{'time':>6}  {'W2 ~ N^rate [95% CI]':<30}  kernel gap ~ N^rate [95% CI]")
    for i, t in enumerate(ds["time"].values):
        r = {
            k: {x: float(ds[f"rate_{k}{y}"][i]) for x, y in _RATE_KEYS}
            for k in ("w2", "kernel_gap")
        }
        print(f"{t:6.3g}  {format_rate(r['w2']):<30}  {format_rate(r['kernel_gap'])}")
    print(f"wrote {args.out}/sweep.nc")
    return 0


_RATE_KEYS = (("slope", ""), ("ci_low", "_low"), ("ci_high", "_high"))


def format_rate(fit: dict) -> str:
    from .studies.limits import format_rate as _fmt

    return _fmt(fit)


def _study_beta(args) -> int:
    from .results import save_dataset
    from .studies.limits import (
        beta_limit_grid,
        beta_limit_particles,
        fit_power_law_or_undetermined,
    )

    seeds = _study_preflight(args, sizes=[args.n])
    for b in args.betas:
        check_positive("--betas", b)
    check_positive("--t-end", args.t_end)
    out = Path(args.out)
    if args.case != "disk":
        g = beta_limit_grid(args.case, args.betas, progress=not args.no_progress)
        save_dataset(g, out / "grid.nc")
        fit = fit_power_law_or_undetermined(g["beta"].values, g["w2_grid"].values, n_boot=10)
        print(
            f"grid, {args.case}: W2(rho_beta, mu*) = "
            + ", ".join(f"{w:.4g}" for w in g["w2_grid"].values)
            + f"  ~ beta^rate, rate {format_rate(fit)}"
        )
    for regime in ("mean-field", "coulomb-gas"):
        ds = beta_limit_particles(
            args.case,
            args.betas,
            args.n,
            seeds,
            out / regime,
            regime=regime,
            scheduler=args.scheduler,
            n_workers=args.workers,
            t_end=args.t_end,
            progress=not args.no_progress,
        )
        for note in ds.attrs.get("sweep_notes", []):
            _note(note)
        means = ds["w2"].mean(("seed", "replica")).values
        fit = {"slope": ds.attrs["rate"], "ci_low": ds.attrs["rate_ci_low"]}
        fit["ci_high"] = ds.attrs["rate_ci_high"]
        print(
            f"particles N={args.n}, {regime}: W2(mu_N, mu*) = "
            + ", ".join(f"{w:.4g}" for w in means)
            + f"  ~ beta^rate, rate {format_rate(fit)} (95% bootstrap CI)"
        )
    print(f"wrote {args.out}")
    return 0


def _study_t_decay(args) -> int:
    from .results import save_dataset
    from .studies.limits import closed_form_energy, free_energy_decay

    out = check_output_path("--out", args.out, kind="dir")
    beta = check_positive("--beta", args.beta)
    t_final = check_positive("--t-final", args.t_final)
    energy = closed_form_energy(args.case)
    if not args.no_progress:
        print(
            f"{args.case}: Gibbs state, then the McKean-Vlasov flow to t = {t_final:g} ...",
            file=sys.stderr,
        )
    ds = free_energy_decay(energy, beta, t_end=t_final, progress=not args.no_progress)
    save_dataset(ds, out / "t_decay.nc")
    a = ds.attrs
    if a["rate_status"] == "fitted":
        print(
            f"{args.case}, beta={beta:g}: F(rho_t) - F(rho_beta) ~ exp(-{a['rate']:.4f} t) "
            f"(95% bootstrap CI [{a['rate_ci_low']:.4f}, {a['rate_ci_high']:.4f}])"
        )
    else:
        print(
            f"{args.case}, beta={beta:g}: F(rho_t) - F(rho_beta) ~ exp(-rate t), rate "
            f"{a['rate_status'].replace('t_end', '--t-final')}"
        )
    print(f"wrote {out}/t_decay.nc")
    return 0


def cmd_figures(args) -> int:
    import matplotlib

    matplotlib.use("Agg")  # files only: no window, whatever the user's default backend
    from .figures import make_figures

    check_int("--seed", args.seed, minimum=0)
    _set_threads(args)
    make_figures(
        args.out,
        size=args.size,
        only=args.only,
        seed=args.seed,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    return 0


def _study_equilibrium(args) -> int:
    from .studies.limits import fit_power_law_or_undetermined, particle_equilibrium_run
    from .sweeps import run_sweep

    seeds = _study_preflight(args, sizes=args.n)
    check_positive("--beta", args.beta)
    check_positive("--t-end", args.t_end)
    grid = {"N": list(args.n), "seed": list(seeds)}
    fixed = {"beta": args.beta, "case": args.case, "regime": args.regime, "t_end": args.t_end}
    particle_equilibrium_run(2, **{**fixed, "t_end": 1e-3}, seed=0)  # validate before work
    ds = run_sweep(
        particle_equilibrium_run,
        grid,
        args.out,
        fixed=fixed,
        scheduler=args.scheduler,
        n_workers=args.workers,
        progress=not args.no_progress,
        log=_note,
    )
    print(f"{args.case}, {args.regime}, beta={args.beta:g}:  N -> W1, W2 (mean over seeds)")
    for N in ds["N"].values:
        sel = ds.sel(N=N)
        print(
            f"  N={int(N):>6d}  W1={float(sel['w1'].mean()):.4g}  W2={float(sel['w2'].mean()):.4g}"
        )
    for k in ("w1", "w2"):
        fit = fit_power_law_or_undetermined(ds["N"].values, ds[k].isel(replica=0).values)
        print(f"  {k.upper()} ~ N^rate, rate {format_rate(fit)} (95% bootstrap CI)")
    print(f"wrote {args.out}/sweep.nc")
    return 0


def cmd_study(args) -> int:
    return {
        "equilibrium": _study_equilibrium,
        "particles-vs-grid": _study_particles_vs_grid,
        "beta": _study_beta,
        "t-decay": _study_t_decay,
    }[args.kind](args)


#: Errors that mean "the input was wrong" (one line, exit 2), not "meanfield has a bug".
USER_ERRORS = (MeanfieldError, ValueError, TypeError, OSError, ImportError)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 done, 2 bad input, 130 interrupted).

    Every user error (a :class:`~meanfield.errors.MeanfieldError`, a bad value, a missing
    file or dependency) prints one line on stderr and returns 2; ``--debug`` raises it with
    its traceback instead.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(
            "meanfield: interrupted; finished sweep runs are kept and a rerun resumes",
            file=sys.stderr,
        )
        return 130
    except USER_ERRORS as err:
        if args.debug:
            raise
        kind = type(err).__name__
        text = str(err).strip().splitlines()[0] if str(err).strip() else kind
        print(f"meanfield: error: {text} ({kind}; --debug for the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
