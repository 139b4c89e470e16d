"""The ``meanfield`` command line.

    meanfield simulate [--config run.toml] [--n-particles 512] [--beta 1e3] ... --out run.nc

Every flag of ``simulate`` is a field of :class:`meanfield.config.SimulationConfig`; a TOML
file sets any of them and flags override the file.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import MISSING, fields
from pathlib import Path

import numpy as np

from ._validation import check_int
from .config import SimulationConfig

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
    "s": "Riesz exponent s (any real; s < p unless --softening > 0)",
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
        typ = {"int": int, "float": float, "str": str}.get(str(f.type).split(" ")[0], None)
        if typ is None:  # "int | None" and friends
            typ = int if str(f.type).startswith("int") else str
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


def _min_pair_distance(omega: np.ndarray) -> float:
    d = np.linalg.norm(omega[:, None, :] - omega[None, :, :], axis=-1)
    d[np.diag_indices(len(d))] = np.inf
    return float(d.min()) if len(d) > 1 else float("nan")


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
        lines.append(f"  min pair distance      {_min_pair_distance(last):.4g}")
        lines.append(f"  mean |omega|           {np.linalg.norm(last, axis=1).mean():.4g}")
    return "\n".join(lines)


def cmd_simulate(args) -> int:
    from .results import save_dataset

    cfg = _config_from_args(args)
    if args.threads is not None:
        import torch

        torch.set_num_threads(check_int("threads", args.threads))
    out = Path(args.out)
    t0 = time.perf_counter()
    ds = cfg.run(progress=not args.no_progress)
    wall = time.perf_counter() - t0
    ds.attrs["wall_time_s"] = wall
    save_dataset(ds, out)
    print(summarise_run(ds))
    print(f"  wall time              {wall:.2f} s")
    print(f"wrote {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="meanfield",
        description="Random features as charged particles: simulate the Coulomb particle model "
        "of kernel learning (projected Langevin or an exact Gibbs sampler) and its "
        "mean-field limit.",
        epilog="Run 'meanfield simulate --help' for the flags of a run.",
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
    sim.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's choice; 1 is often fastest on a "
        "busy shared machine)",
    )
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
    cmp.add_argument("--dim", type=int, default=1, help="particle dimension p: 1 or 2")
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
    fig.add_argument("--size", default="full", help="full (committed figures) or small (quick)")
    fig.add_argument("--only", nargs="*", help="names of the figures to make (default: all)")
    fig.add_argument("--seed", type=int, default=0)
    fig.set_defaults(func=cmd_figures)

    st = sub.add_parser(
        "study",
        help="limit studies as resumable dask sweeps",
        description="N -> infinity study on a closed-form case of THEORY 5: "
        "particles relaxed at each (N, seed), W1/W2 to the exact "
        "equilibrium law, and the fitted rate in N with a "
        "bootstrap confidence interval over seeds. Finished runs "
        "are written as they finish; rerunning resumes.",
    )
    st.add_argument(
        "kind",
        choices=["equilibrium", "particles-vs-grid", "beta", "t-decay"],
        help="equilibrium: particles relaxed on a closed-form case, distance to the exact "
        "law against N; particles-vs-grid: W2(mu_N(t), rho_t) and the kernel gap against N at "
        "several times on the default side-by-side problem; beta: W2(rho_beta, mu*) on the "
        "grid and W2(mu_N, mu*) for particles in both regimes against beta; t-decay: the "
        "free-energy gap along the McKean-Vlasov flow and its exponential rate",
    )
    st.add_argument(
        "--betas",
        type=float,
        nargs="+",
        default=[1.0, 4.0, 16.0, 64.0],
        help="beta: inverse temperatures to sweep",
    )
    st.add_argument(
        "--t-final", type=float, default=1.0, help="particles-vs-grid: final time of each run"
    )
    st.add_argument("--case", default="uniform", help="semicircle, uniform or disk")
    st.add_argument(
        "--n", type=int, nargs="+", default=[16, 32, 64, 128], help="particle numbers N"
    )
    st.add_argument("--beta", type=float, default=4.0, help="inverse temperature")
    st.add_argument("--regime", default="coulomb-gas", help="mean-field or coulomb-gas")
    st.add_argument("--seeds", type=int, default=8, help="number of seeds per N")
    st.add_argument("--t-end", type=float, default=6.0, help="Langevin time per run")
    st.add_argument("--out", default="runs/study", help="output folder")
    st.add_argument(
        "--scheduler",
        default="local",
        help="'local' (LocalCluster, one worker per core), 'threads', or the "
        "address of a dask scheduler (tcp://host:8786)",
    )
    st.add_argument("--workers", type=int, default=None, help="local workers")
    st.set_defaults(func=cmd_study)
    return parser


def cmd_compare(args) -> int:
    from .compare import run_default_comparison

    keys = ("n_particles", "beta", "t_final", "eta", "grid_n", "lam", "n_data", "seed")
    overrides = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    t0 = time.perf_counter()
    ds = run_default_comparison(args.out, dim=args.dim, **overrides)
    print(summarise_comparison(ds))
    print(f"  wall time              {time.perf_counter() - t0:.2f} s")
    print(f"wrote {ds.attrs['dataset_path']} and {ds.attrs['figure_path']}")
    return 0


def summarise_comparison(ds) -> str:
    """Summary of a side-by-side run: each diagnostic at the first and the last time."""
    a = ds.attrs
    lines = [f"meanfield {a['meanfield_version']}: particles vs McKean-Vlasov grid"]
    t_end = float(ds["time"][-1])
    for k in ds.data_vars:
        if ds[k].dims == ("time",):
            v = ds[k].values
            lines.append(f"  {k:<26s} t=0: {v[0]:+.5g}   t={t_end:g}: {v[-1]:+.5g}")
    return "\n".join(lines)


def _study_particles_vs_grid(args) -> int:
    from .studies.limits import particles_vs_grid_in_n

    seeds = range(check_int("seeds", args.seeds, minimum=2))
    ds = particles_vs_grid_in_n(
        args.n,
        seeds,
        args.out,
        t_final=args.t_final,
        scheduler=args.scheduler,
        n_workers=args.workers,
        progress=True,
    )
    print("time    W2 ~ N^rate [95% CI]          kernel gap ~ N^rate [95% CI]")
    for i, t in enumerate(ds["time"].values):
        r = {
            k: [float(ds[f"rate_{k}{x}"][i]) for x in ("", "_low", "_high")]
            for k in ("w2", "kernel_gap")
        }
        print(
            f"{t:6.3g}  {r['w2'][0]:+.3f} [{r['w2'][1]:+.3f}, {r['w2'][2]:+.3f}]"
            f"        {r['kernel_gap'][0]:+.3f} [{r['kernel_gap'][1]:+.3f}, "
            f"{r['kernel_gap'][2]:+.3f}]"
        )
    print(f"wrote {args.out}/sweep.nc")
    return 0


def _study_beta(args) -> int:
    from pathlib import Path

    from .results import save_dataset
    from .studies.limits import beta_limit_grid, beta_limit_particles, fit_power_law

    seeds = range(check_int("seeds", args.seeds, minimum=2))
    N = args.n[0]
    if args.case != "disk":
        g = beta_limit_grid(args.case, args.betas)
        save_dataset(g, Path(args.out) / "grid.nc")
        fit = fit_power_law(g["beta"].values, g["w2_grid"].values, n_boot=10)
        print(
            f"grid, {args.case}: W2(rho_beta, mu*) = "
            + ", ".join(f"{w:.4g}" for w in g["w2_grid"].values)
            + f"  ~ beta^{fit['slope']:.3f}"
        )
    for regime in ("mean-field", "coulomb-gas"):
        ds = beta_limit_particles(
            args.case,
            args.betas,
            N,
            seeds,
            Path(args.out) / regime,
            regime=regime,
            scheduler=args.scheduler,
            n_workers=args.workers,
            t_end=args.t_end,
        )
        means = ds["w2"].mean(("seed", "replica")).values
        print(
            f"particles N={N}, {regime}: W2(mu_N, mu*) = "
            + ", ".join(f"{w:.4g}" for w in means)
            + f"  ~ beta^{ds.attrs['rate']:.3f} (95% bootstrap CI "
            f"[{ds.attrs['rate_ci_low']:.3f}, {ds.attrs['rate_ci_high']:.3f}])"
        )
    print(f"wrote {args.out}")
    return 0


def _study_t_decay(args) -> int:
    from pathlib import Path

    from .results import save_dataset
    from .studies.limits import closed_form_energy, free_energy_decay

    ds = free_energy_decay(closed_form_energy(args.case), args.beta, t_end=args.t_final)
    save_dataset(ds, Path(args.out) / "t_decay.nc")
    a = ds.attrs
    print(
        f"{args.case}, beta={args.beta:g}: F(rho_t) - F(rho_beta) ~ exp(-{a['rate']:.4f} t) "
        f"(95% bootstrap CI [{a['rate_ci_low']:.4f}, {a['rate_ci_high']:.4f}])"
    )
    print(f"wrote {args.out}/t_decay.nc")
    return 0


def cmd_figures(args) -> int:
    import matplotlib

    matplotlib.use("Agg")  # files only: no window, whatever the user's default backend
    from .figures import make_figures

    make_figures(args.out, size=args.size, only=args.only, seed=args.seed)
    return 0


def cmd_study(args) -> int:
    from .studies.limits import fit_power_law, particle_equilibrium_run
    from .sweeps import run_sweep

    if args.kind == "particles-vs-grid":
        return _study_particles_vs_grid(args)
    if args.kind == "beta":
        return _study_beta(args)
    if args.kind == "t-decay":
        return _study_t_decay(args)
    grid = {"N": list(args.n), "seed": list(range(check_int("seeds", args.seeds)))}
    fixed = {"beta": args.beta, "case": args.case, "regime": args.regime, "t_end": args.t_end}
    particle_equilibrium_run(2, **{**fixed, "t_end": 1e-3}, seed=0)  # validate before work
    ds = run_sweep(
        particle_equilibrium_run,
        grid,
        args.out,
        fixed=fixed,
        scheduler=args.scheduler,
        n_workers=args.workers,
    )
    print(f"{args.case}, {args.regime}, beta={args.beta:g}:  N -> W1, W2 (mean over seeds)")
    for N in ds["N"].values:
        sel = ds.sel(N=N)
        print(
            f"  N={int(N):>6d}  W1={float(sel['w1'].mean()):.4g}  W2={float(sel['w2'].mean()):.4g}"
        )
    for k in ("w1", "w2"):
        fit = fit_power_law(ds["N"].values, ds[k].isel(replica=0).values)
        print(
            f"  {k.upper()} ~ N^{fit['slope']:.3f}  (95% bootstrap CI "
            f"[{fit['ci_low']:.3f}, {fit['ci_high']:.3f}])"
        )
    print(f"wrote {args.out}/sweep.nc")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        print(f"meanfield: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
