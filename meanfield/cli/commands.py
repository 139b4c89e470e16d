"""The sub-commands of ``meanfield``: ``simulate``, ``compare``, ``figures``, ``study``.

Each ``cmd_*`` function checks its flags (before any work), runs the package's functions
and prints through :mod:`meanfield.cli.output`; :data:`COMMANDS` is the table the parser
is built from (name -> help, description, flag adder, command).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import fields
from pathlib import Path

from .._validation import (
    check_int,
    check_output_path,
    check_positive,
    check_seed,
    spelled_as,
)
from ..errors import InputError
from ..workbench.config import SimulationConfig
from .output import (
    _RATE_KEYS,
    _note,
    _notes,
    _package_warnings_as_lines,
    _warn,
    coincidence_warnings,
    format_rate,
    summarise_comparison,
    summarise_run,
)
from .parser import (
    _add_beta_flags,
    _add_compare_flags,
    _add_equilibrium_flags,
    _add_figures_flags,
    _add_particles_vs_grid_flags,
    _add_run_flags,
    _add_simulate_flags,
    _add_t_decay_flags,
)


def _config_from_args(args) -> SimulationConfig:
    overrides = {f.name: getattr(args, f.name) for f in fields(SimulationConfig)}
    if args.config:
        return SimulationConfig.from_toml(args.config, **overrides)
    return SimulationConfig(**{k: v for k, v in overrides.items() if v is not None})


def _set_threads(args) -> None:
    """``--threads``: checked (before any work) and applied to torch."""
    if getattr(args, "threads", None) is not None:
        import torch

        torch.set_num_threads(check_int("--threads", args.threads))


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

    See Also
    --------
    meanfield.workbench.config.SimulationConfig : its flags' fields.
    cmd_run : a run from a file.

    Notes
    -----
    ``--out`` is checked before the run (:func:`~meanfield._validation.check_output_path`):
    a path ending in a separator (``runs/``) names a folder and is refused (give the file
    name, ``runs/simulate.nc``), and so is an existing directory, device (``/dev/null``),
    FIFO or socket: only a new or regular file is written, atomically
    (:func:`~meanfield.results.save_dataset`).  A full disk ends the command with one
    ``OutputWriteError`` line and status 2, leaving nothing behind.

    Examples
    --------
    >>> import contextlib, io
    >>> from meanfield.cli import build_parser
    >>> from meanfield.cli.commands import cmd_simulate
    >>> args = build_parser().parse_args(
    ...     ["simulate", "--n-particles", "8", "--n-steps", "5", "--no-progress", "--out", "run.nc"]
    ... )
    >>> printed = io.StringIO()
    >>> with contextlib.redirect_stdout(printed):
    ...     status = cmd_simulate(args)
    >>> status, printed.getvalue().splitlines()[-1]
    (0, 'wrote run.nc')
    """
    from ..results import save_dataset

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


def _add_study_kinds(st) -> None:
    """The kinds of ``meanfield study``, each a sub-parser with its own flags."""
    kinds = st.add_subparsers(dest="kind", required=True, metavar="KIND")
    fmt = argparse.ArgumentDefaultsHelpFormatter
    for name, (summary, description, add_flags, _) in STUDY_KINDS.items():
        kind = kinds.add_parser(name, formatter_class=fmt, help=summary, description=description)
        add_flags(kind)


def cmd_compare(args) -> int:
    """``meanfield compare``: particles vs the McKean–Vlasov grid on the default problem.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by :func:`build_parser` (``compare``: ``--config``, the fields of
        :class:`~meanfield.workbench.problems.ComparisonConfig`, ``--out``).

    Returns
    -------
    int
        0; ``comparison.nc`` and ``comparison.png`` are written to ``--out`` and the
        diagnostics printed. Flags are checked before any work.

    See Also
    --------
    meanfield.workbench.problems.ComparisonConfig : its flags' fields.
    meanfield.workbench.compare.compare : the comparison.

    Examples
    --------
    A refusal comes before any work (here a grid of one cell):

    >>> from meanfield.cli import build_parser
    >>> from meanfield.cli.commands import cmd_compare
    >>> cmd_compare(build_parser().parse_args(["compare", "--cells", "1", "--out", "cmp"]))
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: --cells ...
    """
    from ..workbench.problems import run_default_comparison

    problem = _comparison_from_args(args)
    out = _check_out_folder(args.out, ("comparison.nc", "comparison.png"))
    _set_threads(args)
    progress = not args.no_progress
    if progress:
        print(
            f"particles vs McKean-Vlasov grid, p = {problem.dim}: N = {problem.n_particles}, "
            f"beta = {problem.beta:g}, grid {problem.cells}^{problem.dim}, "
            f"t = {problem.t_final:g}; stages: particles, grid, distances, figure",
            file=sys.stderr,
        )
    t0 = time.perf_counter()
    ds = run_default_comparison(out, problem, progress=progress)
    print(summarise_comparison(ds))
    print(f"  wall time {time.perf_counter() - t0:.2f} s")
    print(f"wrote {ds.attrs['dataset_path']} and {ds.attrs['figure_path']}")
    return 0


def cmd_run(args) -> int:
    """``meanfield run FILE``: the run a TOML file describes, saved and summarised.

    The file is a :class:`~meanfield.dynamics.spec.RunSpec` written by
    :meth:`~meanfield.dynamics.spec.RunSpec.to_toml` (or by hand, docs/cli.rst); the dataset
    written is what :func:`meanfield.simulate` returns for that spec, unchanged (the same
    numbers bit for bit and the same attributes; the wall time is printed, not stored).
    A sweep file (``type = "Sweep"``: a ``[spec]`` and an ``[axes]`` table,
    :func:`meanfield.workbench.spec_sweeps.read_sweep_file`) runs
    :func:`~meanfield.workbench.spec_sweeps.run_spec_sweep` into the folder ``--out`` (default
    ``runs/sweep``; ``--scheduler`` and ``--n-workers`` replace the file's); a study file
    (``type = "Study"``) runs :func:`meanfield.studies.run_study_file`.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by :func:`build_parser` (``run FILE [--out x.nc] [--no-progress]``).

    Returns
    -------
    int
        0; the dataset is written to ``--out`` and its summary printed.

    See Also
    --------
    meanfield.cli.parser.RUN_FLAGS : its flags, declared.
    meanfield.studies.run_study_file : a study file.
    meanfield.workbench.spec_sweeps.run_sweep_file : a sweep file.

    Notes
    -----
    The file is read and the spec checked, and ``--out`` is checked
    (:func:`~meanfield._validation.check_output_path`, as for ``simulate``), before the run.
    The file's ``"module:Class"`` names are imported: run only files you trust.

    Examples
    --------
    >>> import contextlib, io
    >>> import numpy as np
    >>> from meanfield.cli import build_parser
    >>> from meanfield.cli.commands import cmd_run
    >>> from meanfield.domains import Box
    >>> from meanfield.dynamics.spec import RunSpec
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> E = Energy([QuadraticPotential()], Box(1, 1.0))
    >>> path = RunSpec(energy=E, initial=np.zeros((4, 1)), beta=1.0, eta=0.1, n_steps=3).to_toml(
    ...     "run.toml"
    ... )
    >>> args = build_parser().parse_args(["run", "run.toml", "--no-progress", "--out", "run.nc"])
    >>> printed = io.StringIO()
    >>> with contextlib.redirect_stdout(printed):
    ...     status = cmd_run(args)
    >>> status, printed.getvalue().splitlines()[-1]
    (0, 'wrote run.nc')
    """
    from ..dynamics.langevin import simulate
    from ..dynamics.spec import RunSpec
    from ..results import save_dataset

    if not Path(args.file).is_file():
        raise InputError(f"FILE: {args.file!r} is not a file")
    kind = _file_type(args.file)
    if kind == "Study":
        return _run_study_file(args)
    if kind == "Sweep":
        return _run_sweep_file(args)
    _refuse_study_flags(args)
    spec = RunSpec.from_toml(args.file)
    out = check_output_path("--out", args.out or "runs/run.nc", kind="file")
    t0 = time.perf_counter()
    with _package_warnings_as_lines():
        ds = simulate(spec, progress=args.progress)
    wall = time.perf_counter() - t0
    save_dataset(ds, out)
    print(summarise_run(ds))
    print(f"  wall time              {wall:.2f} s")
    print(f"wrote {out}")
    for w in coincidence_warnings(ds):
        _warn(w)
    return 0


def _file_type(path) -> str | None:
    """The ``type`` key of a TOML run file (None when absent or unreadable: the reader says why)."""
    from ..workbench.study_files import tomllib

    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8")).get("type")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


#: The flags of ``meanfield run`` that only a study file takes: dest -> flag.
_STUDY_FLAGS = {
    "set": "--set",
    "in_place": "--in-place",
    "report_only": "--report-only",
    "report_dir": "--report-dir",
    "n_workers": "--n-workers",
    "scheduler": "--scheduler",
}


#: The flags of ``meanfield run`` that a sweep file (type = "Sweep") takes besides --out.
_SWEEP_RUN_FLAGS = ("n_workers", "scheduler")


def _refuse_study_flags(args, *, kind: str = "RunSpec", allowed=()) -> None:
    for dest, flag in _STUDY_FLAGS.items():
        if dest not in allowed and getattr(args, dest) not in (None, False, []):
            raise InputError(f'{flag}: only for a study file (type = "Study"), not a {kind}')


def _run_sweep_file(args) -> int:
    """``meanfield run`` on a sweep file: :func:`meanfield.workbench.spec_sweeps.run_sweep_file`
    into the folder ``--out`` (every flag, the file and the folder checked before any run)."""
    from ..workbench.spec_sweeps import read_sweep_file, run_sweep_file
    from ..workbench.sweeps import check_scheduler

    _refuse_study_flags(args, kind="sweep file", allowed=_SWEEP_RUN_FLAGS)
    if args.scheduler is not None:
        check_scheduler(args.scheduler)
    read_sweep_file(args.file)  # the spec and the axes, refused by name before the folder
    out = _check_out_folder(args.out or "runs/sweep", ("sweep.nc",), ("runs",))
    t0 = time.perf_counter()
    with _package_warnings_as_lines():
        ds = run_sweep_file(
            args.file,
            out,
            scheduler=args.scheduler,
            n_workers=args.n_workers,
            progress=args.progress,
            log=_note,
        )
    sizes = {k: ds.sizes[k] for k in json.loads(ds.attrs["sweep_grid"])}  # JSON in the attrs
    axes = ", ".join(f"{k} ({n})" for k, n in sizes.items())
    print(f"sweep over {axes}: {math.prod(sizes.values())} runs")
    print(f"  wall time              {time.perf_counter() - t0:.2f} s")
    print(f"wrote {out / 'sweep.nc'}")
    return 0


def _run_study_file(args) -> int:
    """``meanfield run`` on a study file: :func:`meanfield.studies.run_study_file`."""
    from ..studies import run_study_file

    t0 = time.perf_counter()
    with _package_warnings_as_lines():
        folder = run_study_file(
            args.file,
            out=args.out,
            in_place=args.in_place,
            report_only=args.report_only,
            report_dir=args.report_dir,
            overrides=args.set or (),
            n_workers=args.n_workers,
            scheduler=args.scheduler,
            progress=args.progress,
        )
    print(f"  wall time              {time.perf_counter() - t0:.2f} s")
    print(f"wrote {folder}")
    return 0


#: What a sweep study writes in its folder (:func:`meanfield.workbench.sweeps.run_sweep`).
_SWEEP_FILES, _SWEEP_FOLDERS = ("sweep.nc", "configurations.json"), ("runs",)


def _check_out_folder(out, files=(), folders=()) -> Path:
    """``--out`` as a folder, and the ``files`` and ``folders`` a command writes in it, checked
    before any work (:func:`~meanfield._validation.check_output_path`): an existing device,
    FIFO or folder where a result file goes (or a file where a folder goes) is refused by
    the flag's name, so a long run never ends at a write that cannot happen."""
    out = check_output_path("--out", out, kind="dir")
    for name in files:
        check_output_path("--out", out / name, kind="file")
    for name in folders:
        check_output_path("--out", out / name, kind="dir")
    return out


def _comparison_from_args(args):
    """The problem's configuration from ``--config`` and the flags (flags win), checked once;
    an error names each parameter by its flag."""
    from ..workbench.problems import ComparisonConfig

    given = {f.name: getattr(args, f.name) for f in fields(ComparisonConfig)}
    spelled = {k: "--" + k.replace("_", "-") for k in given}
    with spelled_as(spelled):
        if args.config:
            return ComparisonConfig.from_toml(args.config, **given)
        return ComparisonConfig(**{k: v for k, v in given.items() if v is not None})


def _study_preflight(args, *, sizes=None, files=_SWEEP_FILES, folders=_SWEEP_FOLDERS) -> range:
    """Checks shared by the sweep studies, before any work: output folder (and the ``files``
    and ``folders`` written in it), scheduler (and dask), seeds and sizes (named as the user
    spelled the flag).  Returns the seeds."""
    from ..workbench.sweeps import check_scheduler

    _check_out_folder(args.out, files, folders)
    check_scheduler(args.scheduler)
    if args.workers is not None:
        check_int("--workers", args.workers)
    for n in sizes or ():
        check_int("--n-particles", n)
    return range(check_int("--seeds", args.seeds, minimum=2))


def _check_t_final(args) -> float:
    return check_positive("--t-final", args.t_final)


def _study_particles_vs_grid(args) -> int:
    from ..studies.limits import particles_vs_grid_in_n

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
    from ..studies.limits import beta_limit_on_grid, beta_limit_particles

    regimes = ("mean-field", "coulomb-gas")
    written = () if args.case == "disk" else ("grid.nc",)
    seeds = _study_preflight(args, sizes=[args.n_particles], files=written, folders=())
    for regime in regimes:  # each regime's folder is a sweep of its own
        _check_out_folder(Path(args.out) / regime, _SWEEP_FILES, _SWEEP_FOLDERS)
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
    from ..studies.limits import t_decay

    out = _check_out_folder(args.out, ("t_decay.nc",))
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
    """``meanfield figures``: compute and draw the theory figures
    (:mod:`meanfield.cli.figures`).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by :func:`build_parser` (``figures``: ``--size``, ``--only``, ``--seed``,
        ``--out``).

    Returns
    -------
    int
        0; each figure's data (.nc) and drawing (.png, .pdf) are written to ``--out``.

    See Also
    --------
    meanfield.cli.figures : the figures it makes.

    Examples
    --------
    An unknown figure is refused before any work:

    >>> from meanfield.cli import build_parser
    >>> from meanfield.cli.commands import cmd_figures
    >>> cmd_figures(build_parser().parse_args(["figures", "--only", "nope", "--out", "f"]))
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown figure 'nope'; ...
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no window, whatever the user's default backend
    from .figures import make_figures

    check_seed("--seed", args.seed)
    check_output_path("--out", args.out, kind="dir")
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
    from ..studies.limits import equilibrium_in_n

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
STUDY_KINDS = {
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

    See Also
    --------
    cmd_run : studies from configuration files.

    Examples
    --------
    Bad input is refused before any run starts:

    >>> from meanfield.cli import build_parser
    >>> from meanfield.cli.commands import cmd_study
    >>> args = build_parser().parse_args(
    ...     ["study", "t-decay", "--no-progress", "--t-final", "0", "--out", "td"]
    ... )
    >>> cmd_study(args)
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: ...t-final...
    """
    return STUDY_KINDS[args.kind][3](args)


#: The sub-commands, in the order of the help: name -> (one-line help, description, the
#: function adding its flags, the ``cmd_*`` function running it).
COMMANDS = {
    "simulate": (
        "run the particle dynamics and write an xarray dataset (netCDF)",
        "Evolve N particles (random features) under alignment + Riesz repulsion "
        "by projected Langevin dynamics (Algorithm 1) or MALA, and write positions, "
        "energies and every parameter to a netCDF file. Flags override --config.",
        _add_simulate_flags,
        cmd_simulate,
    ),
    "run": (
        "run the particle dynamics a TOML run file describes (RunSpec.to_toml)",
        "Read one run specification (energy, initial law or particles, beta, eta, steps, N, "
        "seed, ...) from a TOML file and write what meanfield.simulate(spec) returns to a "
        "netCDF file. Built-in classes go by name, user classes by 'module:Class' (imported: "
        "run only files you trust).",
        _add_run_flags,
        cmd_run,
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
