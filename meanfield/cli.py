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
    "init": "initial particles: gaussian or orthogonal (blocks of orthogonal rows); with "
    "--softening 0 and a singular kernel they are drawn >= 0.5 N^(-1/p) / bandwidth apart",
    "bandwidth": "initial particles omega ~ N(0, bandwidth^-2 I) (> 0)",
    "method": "langevin (Algorithm 1, projected), mala (exact Gibbs sampler) or hmc (exact, "
    "Hamiltonian Monte Carlo with reflection: --trajectory-length, --n-warmup, "
    "--target-accept, --step-size)",
    "regime": "mean-field (beta_N = beta) or coulomb-gas (beta_N = beta N)",
    "eta": "step size eta > 0 of langevin and mala; time t = eta * steps",
    "beta": "inverse temperature beta > 0",
    "n_steps": "number of steps >= 1 (hmc: recorded trajectories, after the warm-up)",
    "trajectory_length": "hmc only: Hamiltonian time T > 0 of one trajectory (default 1)",
    "n_warmup": "hmc only: warm-up trajectories >= 0 adapting the leapfrog step (default 200; "
    "0 needs --step-size)",
    "target_accept": "hmc only: target mean acceptance probability in (0, 1) of the warm-up "
    "(default 0.8)",
    "step_size": "hmc only: initial (fixed with --n-warmup 0) leapfrog step > 0 (default: "
    "Hoffman-Gelman heuristic)",
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

    Pinned particles are warned about by :func:`meanfield.particles.simulate` itself.

    Parameters
    ----------
    ds : xarray.Dataset
        A run of :func:`meanfield.particles.simulate` (``omega`` of shape (time, particle,
        dim)); replica runs (4-d ``omega``) and runs without positions give no warning.

    Returns
    -------
    list of str
        One line per warning (empty when the last positions are pairwise distinct).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from meanfield.cli import coincidence_warnings
    >>> omega = np.array([[[0.0], [1.0]], [[0.5], [0.5]]])  # two particles meet at t = 1
    >>> coincidence_warnings(xr.Dataset({"omega": (("time", "particle", "dim"), omega)}))
    ['some particles coincide (minimum pair distance 0)']
    """
    if "omega" not in ds or ds["omega"].ndim != 3:
        return []
    last = ds["omega"].isel(time=-1).values
    if len(last) > 1 and min_pair_distance(last) == 0.0:
        return ["some particles coincide (minimum pair distance 0)"]
    return []


def summarise_run(ds) -> str:
    """A short human-readable summary of a simulation dataset.

    Parameters
    ----------
    ds : xarray.Dataset
        A run of :func:`meanfield.particles.simulate` (its provenance attributes and energies).

    Returns
    -------
    str
        A header line (method, regime, N, p, β, η, steps, seed), each energy at the first and
        last record, and (with positions) the minimum pair distance and mean |ω|.

    Examples
    --------
    >>> import torch
    >>> from meanfield.cli import summarise_run
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.particles import simulate
    >>> E = Energy([QuadraticPotential()], Box(1, 3.0))
    >>> ds = simulate(E, torch.zeros(4, 1), eta=0.01, beta=10.0, n_steps=3, seed=0)
    >>> summarise_run(ds).splitlines()[0].split(": ")[1]
    'langevin (mean-field), N=4, p=1, beta=10, eta=0.01, 3 steps (t = 0.03), seed=0'
    """
    a = ds.attrs
    if a["method"] == "hmc":  # trajectories of L leapfrog steps of epsilon, not eta-steps
        run = (
            f"step_size={a['step_size']:.3g}, L={a['n_leapfrog']}, {a['n_samples']} "
            f"trajectories after {a['n_warmup']} warm-up (T = {a['trajectory_length']:.3g} each)"
        )
    else:
        run = f"eta={a['eta']:g}, {a['n_steps']} steps (t = {float(ds['time'][-1]):g})"
    lines = [
        f"meanfield {a['meanfield_version']}: {a['method']} ({a['regime']}), N={a['N']}, "
        f"p={a['p']}, beta={a['beta']:g}, {run}, seed={a['seed']}",
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
    """``meanfield simulate``: run the configured particle dynamics, save and summarise it.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by :func:`build_parser` (``simulate`` and its flags or ``--config`` file).

    Returns
    -------
    int
        0; the dataset is written to ``--out`` and its summary printed.

    Examples
    --------
    >>> import contextlib, io
    >>> from meanfield.cli import build_parser, cmd_simulate
    >>> args = build_parser().parse_args(
    ...     ["simulate", "--n-particles", "8", "--n-steps", "5", "--no-progress", "--out", "run.nc"]
    ... )
    >>> printed = io.StringIO()
    >>> with contextlib.redirect_stdout(printed):
    ...     status = cmd_simulate(args)
    >>> status, printed.getvalue().splitlines()[-1]
    (0, 'wrote run.nc')
    """
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


class _DeprecatedFlag(argparse.Action):
    """A deprecated spelling of a flag, kept for one version: stores into the new flag's
    destination, warns (``FutureWarning``) and records the spelling, so that an error about
    the value names the flag the user typed (:func:`_flag`)."""

    def __init__(self, option_strings, dest, *, new: str, **kwargs):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        warnings.warn(
            f"{option_string} is deprecated and will be removed in the next version; "
            f"use {self.new}",
            FutureWarning,
            stacklevel=2,
        )
        setattr(namespace, self.dest, values)
        spelled = dict(getattr(namespace, "_spelled", {}))
        spelled[self.dest] = option_string
        namespace._spelled = spelled


def _add_deprecated(parser, old: str, new: str, dest: str, **kwargs) -> None:
    """``old`` as a hidden deprecated alias of ``new`` (same ``dest``, type and nargs)."""
    parser.add_argument(
        old,
        dest=dest,
        action=_DeprecatedFlag,
        new=new,
        help=argparse.SUPPRESS,
        default=argparse.SUPPRESS,
        **kwargs,
    )


def _flag(args, dest: str, name: str) -> str:
    """The flag as the user spelled it: ``name``, or the deprecated alias that set ``dest``."""
    return getattr(args, "_spelled", {}).get(dest, name)


def _add_simulate_flags(sim) -> None:
    """The flags of ``meanfield simulate``: ``--config``, output, and every config field."""
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


#: The ``compare`` flags that override the default problem: (name, type, help).
COMPARE_FLAGS = (
    ("n_particles", int, "number of particles N"),
    ("beta", float, "inverse temperature beta > 0 (mean-field regime)"),
    ("t_final", float, "final time > 0"),
    ("eta", float, "particle step size eta > 0"),
    ("cells", int, "grid cells per axis (>= 4, the grid's minimum)"),
    ("lam", float, "Coulomb interaction strength lambda >= 0"),
    ("n_data", int, "number of data points"),
    ("seed", int, "seed of the particle sample and noise"),
)


def _add_compare_flags(cmp) -> None:
    """The flags of ``meanfield compare``: dimension, output, overrides of the problem."""
    cmp.add_argument("--out", default="runs/compare", help="output folder [default: runs/compare]")
    cmp.add_argument(
        "--dim", type=int, default=1, choices=(1, 2), help="particle dimension p: 1 or 2"
    )
    cmp.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    cmp.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    for name, typ, text in COMPARE_FLAGS:
        cmp.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=typ,
            default=None,
            help=f"{text} [default: the problem's]",
        )
    _add_deprecated(cmp, "--grid-n", "--cells", "cells", type=int)


def _add_figures_flags(fig) -> None:
    """The flags of ``meanfield figures``."""
    fig.add_argument("--out", default="figures", help="output folder [default: figures]")
    from .studies._sizes import FULL_SIZE_SECONDS

    total = sum(FULL_SIZE_SECONDS.values())  # the per-figure estimates the stages announce
    fig.add_argument(
        "--size",
        default="full",
        choices=("full", "small"),
        help=f"full (committed figures, ~{round(total / 60)} min on 2 cores: the sum of the "
        "per-figure estimates) or small (quick) [default: full]",
    )
    fig.add_argument("--only", nargs="*", help="names of the figures to make (default: all)")
    fig.add_argument("--seed", type=int, default=0)
    fig.add_argument("--threads", type=int, default=None, help=THREADS_HELP)


def _add_sweep_flags(k, out: str, scheduler: bool = True) -> None:
    """Flags every study shares: the output folder, the dask scheduler, the progress bars."""
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


def _add_n_particles(k, default, *, many: bool) -> None:
    """``--n-particles`` (one N, or a list for a sweep) and its deprecated alias ``--n``."""
    nargs = "+" if many else None
    text = "particle numbers N" if many else "number of particles N"
    k.add_argument(
        "--n-particles", dest="n_particles", type=int, nargs=nargs, default=default, help=text
    )
    _add_deprecated(k, "--n", "--n-particles", "n_particles", type=int, nargs=nargs)


def _add_t_final(k, default: float, text: str, *, deprecated_t_end: bool = False) -> None:
    """``--t-final`` (and, where it was spelled so before, the deprecated ``--t-end``)."""
    k.add_argument("--t-final", dest="t_final", type=float, default=default, help=text)
    if deprecated_t_end:
        _add_deprecated(k, "--t-end", "--t-final", "t_final", type=float)


def _add_equilibrium_flags(eq) -> None:
    """The flags of ``meanfield study equilibrium``."""
    eq.add_argument("--case", default="uniform", choices=CASES, help="closed-form case")
    _add_n_particles(eq, [16, 32, 64, 128], many=True)
    eq.add_argument("--beta", type=float, default=4.0, help="inverse temperature beta > 0")
    eq.add_argument("--regime", default="coulomb-gas", choices=("mean-field", "coulomb-gas"))
    eq.add_argument("--seeds", type=int, default=8, help="number of seeds per N (>= 2)")
    _add_t_final(eq, 6.0, "Langevin time per run (> 0)", deprecated_t_end=True)
    _add_sweep_flags(eq, "runs/nlimit")


def _add_particles_vs_grid_flags(pg) -> None:
    """The flags of ``meanfield study particles-vs-grid``."""
    _add_n_particles(pg, [100, 400, 1600], many=True)
    pg.add_argument("--seeds", type=int, default=8, help="number of seeds per N (>= 2)")
    _add_t_final(pg, 1.0, "final time of each run (> 0)")
    _add_sweep_flags(pg, "runs/pvg")


def _add_beta_flags(bt) -> None:
    """The flags of ``meanfield study beta``."""
    bt.add_argument("--case", default="uniform", choices=CASES, help="closed-form case")
    bt.add_argument(
        "--betas", type=float, nargs="+", default=[1.0, 4.0, 16.0, 64.0], help="betas to sweep"
    )
    _add_n_particles(bt, 64, many=False)
    bt.add_argument("--seeds", type=int, default=4, help="number of seeds per beta (>= 2)")
    _add_t_final(bt, 6.0, "Langevin time per run (> 0)", deprecated_t_end=True)
    _add_sweep_flags(bt, "runs/beta")


def _add_t_decay_flags(td) -> None:
    """The flags of ``meanfield study t-decay``."""
    td.add_argument(
        "--case", default="uniform", choices=("semicircle", "uniform"), help="closed-form case"
    )
    td.add_argument("--beta", type=float, default=1.0, help="inverse temperature beta > 0")
    _add_t_final(td, 6.0, "final time of the flow (> 0)")
    _add_sweep_flags(td, "runs/tdecay", scheduler=False)


def _add_study_kinds(st) -> None:
    """The kinds of ``meanfield study``, each a sub-parser with its own flags."""
    kinds = st.add_subparsers(dest="kind", required=True, metavar="KIND")
    fmt = argparse.ArgumentDefaultsHelpFormatter
    for name, (summary, description, add_flags, _) in _STUDY_KINDS.items():
        kind = kinds.add_parser(name, formatter_class=fmt, help=summary, description=description)
        add_flags(kind)


def build_parser() -> argparse.ArgumentParser:
    """The ``meanfield`` argument parser: ``simulate``, ``compare``, ``figures``, ``study``.

    Flag names (one per concept): ``--n-particles`` for a number of particles N (a list in
    the N sweeps), ``--t-final`` for a final time, ``--cells`` for grid cells per axis.  The
    former spellings ``--n``, ``--t-end`` and ``--grid-n`` still work for one version: hidden
    from the help, they warn (FutureWarning) and errors name them as typed.

    Returns
    -------
    argparse.ArgumentParser
        With one sub-command per ``cmd_*`` function (``args.func``).

    Examples
    --------
    >>> from meanfield.cli import build_parser
    >>> args = build_parser().parse_args(["simulate", "--n-particles", "50", "--beta", "2"])
    >>> args.command, args.n_particles, args.beta
    ('simulate', 50, 2.0)
    """
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
    for name, (summary, description, add_flags, run) in _COMMANDS.items():
        cmd = sub.add_parser(name, help=summary, description=description)
        add_flags(cmd)
        cmd.set_defaults(func=run)
    return parser


def cmd_compare(args) -> int:
    """``meanfield compare``: particles vs the McKean–Vlasov grid on the default problem.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by :func:`build_parser` (``compare``: ``--dim``, overrides of the default
        problem, ``--out``).

    Returns
    -------
    int
        0; ``comparison.nc`` and ``comparison.png`` are written to ``--out`` and the
        diagnostics printed. Flags are checked before any work.

    Examples
    --------
    A refusal comes before any work (here a grid of one cell):

    >>> from meanfield.cli import build_parser, cmd_compare
    >>> cmd_compare(build_parser().parse_args(["compare", "--cells", "1", "--out", "cmp"]))
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: --cells ...
    """
    from .compare import DEFAULTS, run_default_comparison

    keys = [name for name, _, _ in COMPARE_FLAGS]
    overrides = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    _check_compare_flags(overrides, args)
    out = check_output_path("--out", args.out, kind="dir")
    _set_threads(args)
    # the default problem may still call the grid size grid_n (its former name)
    grid_key = "cells" if "cells" in DEFAULTS[args.dim] else "grid_n"
    if "cells" in overrides:
        overrides[grid_key] = overrides.pop("cells")
    cfg = {**DEFAULTS[args.dim], **overrides}
    _preflight_compare(cfg, args.dim, grid_key, args)
    progress = not args.no_progress
    if progress:
        print(
            f"particles vs McKean-Vlasov grid, p = {args.dim}: N = {cfg['n_particles']}, "
            f"beta = {cfg['beta']:g}, grid {cfg[grid_key]}^{args.dim}, t = {cfg['t_final']:g}; "
            "stages: particles, grid, distances, figure",
            file=sys.stderr,
        )
    t0 = time.perf_counter()
    ds = run_default_comparison(out, dim=args.dim, progress=progress, **overrides)
    print(summarise_comparison(ds))
    print(f"  wall time {time.perf_counter() - t0:.2f} s")
    print(f"wrote {ds.attrs['dataset_path']} and {ds.attrs['figure_path']}")
    return 0


def _check_compare_flags(overrides: dict, args=None) -> None:
    """The compare flags, checked before any work (names as on the command line)."""
    from .pde.grid import MIN_CELLS

    minimum = {"n_particles": 1, "cells": MIN_CELLS, "n_data": 2}  # as COMPARE_FLAGS says
    for k in ("n_particles", "cells", "n_data"):
        if k in overrides:
            name = _flag(args, k, "--" + k.replace("_", "-"))
            check_int(name, overrides[k], minimum=minimum[k])
    for k in ("beta", "t_final", "eta"):
        if k in overrides:
            check_positive("--" + k.replace("_", "-"), overrides[k])
    if "lam" in overrides:
        check_positive("--lam", overrides["lam"], allow_zero=True)
    if "seed" in overrides:
        check_int("--seed", overrides["seed"], minimum=0)


def _preflight_compare(cfg: dict, dim: int, grid_key: str, args=None) -> None:
    """Sizes of ``compare`` checked before any work, naming the flag to change: the grid's
    estimated memory against the memory available (``--cells``) and the particles' number of
    steps t_final / eta against the step budget (``--t-final``, ``--eta``)."""
    from ._resources import check_grid_memory
    from .compare import MAX_STEPS
    from .errors import StepBudgetError

    cells = _flag(args, "cells", "--cells")
    check_grid_memory(cells, (cfg[grid_key],) * dim, pair_terms=int(cfg["lam"] > 0))
    n_steps = round(cfg["t_final"] / cfg["eta"])
    if n_steps > MAX_STEPS:
        t_final = _flag(args, "t_final", "--t-final")
        raise StepBudgetError(
            f"{t_final} / --eta = {cfg['t_final']:g} / {cfg['eta']:g} gives {n_steps:.3g} "
            f"particle steps, above the budget of {MAX_STEPS} (allowed: {t_final} / --eta "
            f"<= {MAX_STEPS}); lower {t_final} or raise --eta"
        )


def summarise_comparison(ds) -> str:
    """Summary of a side-by-side run: a header and each diagnostic at the first and last time.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`meanfield.compare.compare` (provenance attributes and the
        diagnostics over ``time``).

    Returns
    -------
    str
        A header (N, p, β, regime, grid, times, W method, seed) and an aligned table.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from meanfield.cli import summarise_comparison
    >>> ds = xr.Dataset({"w2": ("time", [0.3, 0.1])}, coords={"time": [0.0, 2.0]},
    ...                 attrs={"meanfield_version": "0", "N": 10, "p": 1, "beta": 10.0,
    ...                        "eta": 0.05, "seed": 0})
    >>> print(summarise_comparison(ds).splitlines()[-1])
      w2                 +0.3           +0.1

    A quantity the run did not compute reads n/a, with the reason (not ``+nan``):

    >>> ds["w1"] = ("time", [np.nan, np.nan])
    >>> ds.attrs["w_method"] = "sparse_exact"
    >>> for line in summarise_comparison(ds).splitlines()[-2:]:
    ...     print(line)
      w1                  n/a            n/a
      n/a: w1 is computed only by the dense exact solver (W method exact; this run used
      sparse_exact, chosen for its size)
    """
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
    not_computed = []
    for k, v in rows:
        if np.isnan(v).all():  # a quantity this run did not compute: say so, not "+nan"
            not_computed.append(k)
            lines.append(f"  {k:<{width}}  {'n/a':>13}  {'n/a':>13}")
        else:
            lines.append(f"  {k:<{width}}  {v[0]:>+13.5g}  {v[-1]:>+13.5g}")
    for k in not_computed:
        why = (
            f"computed only by the dense exact solver (W method exact; this run used "
            f"{a.get('w_method', '?')}, chosen for its size)"
            if k == "w1"
            else "not computed in this run"
        )
        lines.append(f"  n/a: {k} is {why}")
    return "\n".join(lines)


def _study_preflight(args, *, sizes=None) -> range:
    """Checks shared by the sweep studies, before any work: output folder, scheduler (and
    dask), seeds and sizes (named as the user spelled the flag).  Returns the seeds."""
    from .sweeps import check_scheduler

    check_output_path("--out", args.out, kind="dir")
    check_scheduler(args.scheduler)
    if args.workers is not None:
        check_int("--workers", args.workers)
    for n in sizes or ():
        check_int(_flag(args, "n_particles", "--n-particles"), n)
    return range(check_int("--seeds", args.seeds, minimum=2))


def _check_t_final(args) -> float:
    return check_positive(_flag(args, "t_final", "--t-final"), args.t_final)


def _note(message: str) -> None:
    print(f"meanfield: note: {message}", file=sys.stderr)


def _notes(ds) -> None:
    for note in ds.attrs.get("sweep_notes", []):
        _note(note)


_RATE_KEYS = (("slope", ""), ("ci_low", "_low"), ("ci_high", "_high"))


def format_rate(fit: dict) -> str:
    """A fitted rate with its 95 % interval, or the reason it is undetermined (one string).

    Parameters
    ----------
    fit : dict
        The output of :func:`meanfield.stats.fit_power_law`.

    Returns
    -------
    str
        ``"rate [low, high]"`` to three decimals.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.cli import format_rate
    >>> from meanfield.stats import fit_power_law
    >>> n = np.array([100, 400, 1600])
    >>> format_rate(fit_power_law(n, 3 * n**-0.5))  # exact N^(-1/2) data
    '-0.500 [-0.500, -0.500]'
    """
    from .stats import format_rate as _fmt  # numpy: imported when a study prints

    return _fmt(fit)


def _study_particles_vs_grid(args) -> int:
    from .studies.limits import particles_vs_grid_in_n

    seeds = _study_preflight(args, sizes=args.n_particles)
    t_final = _check_t_final(args)
    ds = particles_vs_grid_in_n(
        args.n_particles,
        seeds,
        args.out,
        t_final=t_final,
        scheduler=args.scheduler,
        n_workers=args.workers,
        progress=not args.no_progress,
    )
    _notes(ds)
    if str(ds.attrs.get("rate_status", "fitted")) != "fitted":
        print(f"rates in N: {ds.attrs['rate_status']} (N = {sorted(set(args.n_particles))})")
    print(f"{'time':>6}  {'W2 ~ N^rate [95% CI]':<30}  kernel gap ~ N^rate [95% CI]")
    for i, t in enumerate(ds["time"].values):
        r = {
            k: {x: float(ds[f"rate_{k}{y}"][i]) for x, y in _RATE_KEYS}
            for k in ("w2", "kernel_gap")
        }
        print(f"{t:6.3g}  {format_rate(r['w2']):<30}  {format_rate(r['kernel_gap'])}")
    print(f"wrote {args.out}/sweep.nc")
    return 0


def _study_beta(args) -> int:
    from .studies.limit_sweeps import beta_limit_on_grid
    from .studies.limits import beta_limit_particles

    seeds = _study_preflight(args, sizes=[args.n_particles])
    for b in args.betas:
        check_positive("--betas", b)
    t_final = _check_t_final(args)
    progress = not args.no_progress
    if args.case != "disk":
        g, fit = beta_limit_on_grid(args.case, args.betas, args.out, progress=progress)
        w2 = ", ".join(f"{w:.4g}" for w in g["w2_grid"].values)
        print(f"grid, {args.case}: W2(rho_beta, mu*) = {w2}  ~ beta^rate, rate {format_rate(fit)}")
    for regime in ("mean-field", "coulomb-gas"):
        ds = beta_limit_particles(
            args.case,
            args.betas,
            args.n_particles,
            seeds,
            Path(args.out) / regime,
            regime=regime,
            scheduler=args.scheduler,
            n_workers=args.workers,
            t_end=t_final,
            progress=progress,
        )
        _notes(ds)
        w2 = ", ".join(f"{w:.4g}" for w in ds["w2"].mean(("seed", "replica")).values)
        fit = {"slope": ds.attrs["rate"], "ci_low": ds.attrs["rate_ci_low"]}
        fit["ci_high"] = ds.attrs["rate_ci_high"]
        print(
            f"particles N={args.n_particles}, {regime}: W2(mu_N, mu*) = {w2}"
            f"  ~ beta^rate, rate {format_rate(fit)} (95% bootstrap CI)"
        )
    print(f"wrote {args.out}")
    return 0


def _study_t_decay(args) -> int:
    from .studies.limit_sweeps import t_decay

    out = check_output_path("--out", args.out, kind="dir")
    beta = check_positive("--beta", args.beta)
    t_final = _check_t_final(args)
    if not args.no_progress:
        print(
            f"{args.case}: Gibbs state, then the McKean-Vlasov flow to t = {t_final:g} ...",
            file=sys.stderr,
        )
    a = t_decay(args.case, beta, t_final, out, progress=not args.no_progress).attrs
    head = f"{args.case}, beta={beta:g}: F(rho_t) - F(rho_beta) ~ "
    if a["rate_status"] == "fitted":
        print(
            f"{head}exp(-{a['rate']:.4f} t) "
            f"(95% bootstrap CI [{a['rate_ci_low']:.4f}, {a['rate_ci_high']:.4f}])"
        )
    else:
        print(f"{head}exp(-rate t), rate {a['rate_status'].replace('t_end', '--t-final')}")
    print(f"wrote {out}/t_decay.nc")
    return 0


def cmd_figures(args) -> int:
    """``meanfield figures``: compute and draw the theory figures (:mod:`meanfield.figures`).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by :func:`build_parser` (``figures``: ``--size``, ``--only``, ``--seed``,
        ``--out``).

    Returns
    -------
    int
        0; each figure's data (.nc) and drawing (.png, .pdf) are written to ``--out``.

    Examples
    --------
    An unknown figure is refused before any work:

    >>> from meanfield.cli import build_parser, cmd_figures
    >>> cmd_figures(build_parser().parse_args(["figures", "--only", "nope", "--out", "f"]))
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown figure 'nope'; ...
    """
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
    from .studies.limit_sweeps import equilibrium_in_n

    seeds = _study_preflight(args, sizes=args.n_particles)
    check_positive("--beta", args.beta)
    t_final = _check_t_final(args)
    ds, fits = equilibrium_in_n(
        args.case,
        args.n_particles,
        seeds,
        args.out,
        beta=args.beta,
        regime=args.regime,
        t_final=t_final,
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
    for k, fit in fits.items():
        print(f"  {k.upper()} ~ N^rate, rate {format_rate(fit)} (95% bootstrap CI)")
    print(f"wrote {args.out}/sweep.nc")
    return 0


#: The ``meanfield study`` kinds, in the order of the help: name -> (one-line help,
#: description, the function adding its flags, the function running it).
_STUDY_KINDS = {
    "equilibrium": (
        "particles relaxed on a closed-form case: W1/W2 to the exact law against N",
        "N -> infinity on a closed-form case of THEORY 5: particles relaxed by "
        "Langevin at each (N, seed), W1/W2 to the exact equilibrium law, and the fitted rate "
        "in N with a bootstrap 95% interval over seeds (needs >= 3 distinct N).",
        _add_equilibrium_flags,
        _study_equilibrium,
    ),
    "particles-vs-grid": (
        "W2(mu_N(t), rho_t) and the kernel gap against N on the default problem",
        "N -> infinity at several times on the default side-by-side problem "
        "(p = 1): W2 between the particles and the McKean-Vlasov density and the kernel gap, "
        "with fitted rates in N (needs >= 3 distinct N).",
        _add_particles_vs_grid_flags,
        _study_particles_vs_grid,
    ),
    "beta": (
        "W2(rho_beta, mu*) on the grid and W2(mu_N, mu*) for particles against beta",
        "beta -> infinity: the grid Gibbs state rho_beta against the exact law "
        "mu* (p = 1 cases), and particles in both regimes, with fitted rates in beta (needs "
        ">= 3 distinct beta).",
        _add_beta_flags,
        _study_beta,
    ),
    "t-decay": (
        "the free-energy gap along the McKean-Vlasov flow and its exponential rate",
        "t -> infinity: F(rho_t) - F(rho_beta) along the McKean-Vlasov flow from "
        "a Gaussian (p = 1 cases) and its fitted exponential rate.",
        _add_t_decay_flags,
        _study_t_decay,
    ),
}


def cmd_study(args) -> int:
    """``meanfield study KIND``: the limit studies (equilibrium, particles-vs-grid, beta, t-decay).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by :func:`build_parser` (``study`` with its kind and flags).

    Returns
    -------
    int
        0; the study's runs and gathered dataset are written to ``--out`` (resumable) and its
        fitted rates printed.

    Examples
    --------
    Bad input is refused before any run starts:

    >>> from meanfield.cli import build_parser, cmd_study
    >>> args = build_parser().parse_args(
    ...     ["study", "t-decay", "--no-progress", "--t-final", "0", "--out", "td"]
    ... )
    >>> cmd_study(args)
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: ...t-final...
    """
    return _STUDY_KINDS[args.kind][3](args)


#: The sub-commands, in the order of the help: name -> (one-line help, description, the
#: function adding its flags, the ``cmd_*`` function running it).
_COMMANDS = {
    "simulate": (
        "run the particle dynamics and write an xarray dataset (netCDF)",
        "Evolve N particles (random features) under alignment + Riesz repulsion "
        "by projected Langevin dynamics (Algorithm 1) or MALA, and write positions, "
        "energies and every parameter to a netCDF file. Flags override --config.",
        _add_simulate_flags,
        cmd_simulate,
    ),
    "compare": (
        "particles and the McKean-Vlasov grid density side by side (the main job)",
        "Evolve N particles (projected Langevin) and the grid density "
        "(finite-volume McKean-Vlasov) from the same initial law under the same energy and "
        "beta, on the embedded default problem: positive random features on Sinha-Duchi "
        "radial two-class data, V = |w|^2/2 + linear alignment + Coulomb repulsion. Writes "
        "comparison.nc (both views and W1/W2, free energies, mass over time) and "
        "comparison.png.",
        _add_compare_flags,
        cmd_compare,
    ),
    "figures": (
        "regenerate the theory figures (PNG, PDF + netCDF)",
        "Recompute and draw every theory figure into --out, each "
        "next to a netCDF record of its numbers and parameters.",
        _add_figures_flags,
        cmd_figures,
    ),
    "study": (
        "limit studies as resumable dask sweeps",
        "Limit studies (THEORY 5). Each kind has its own flags and defaults: "
        "'meanfield study KIND --help'. Sweep runs are written as they finish, keyed by "
        "their whole configuration; rerunning the same command resumes.",
        _add_study_kinds,
        cmd_study,
    ),
}


#: Errors that mean "the input was wrong" (one line, exit 2), not "meanfield has a bug".
USER_ERRORS = (MeanfieldError, ValueError, TypeError, OSError, ImportError)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 done, 2 bad input, 130 interrupted).

    Every user error (a :class:`~meanfield.errors.MeanfieldError`, a bad value, a missing
    file or dependency) prints one line on stderr and returns 2; ``--debug`` raises it with
    its traceback instead.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status.

    Examples
    --------
    >>> from meanfield.cli import main
    >>> main(["simulate", "--n-particles", "0", "--out", "x.nc", "--no-progress"])
    2
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
