"""The flags of the ``meanfield`` command: help texts and the argparse flags of each
sub-command (one spelling per flag).

Every flag of ``simulate`` is a field of :class:`meanfield.workbench.config.SimulationConfig`,
every problem flag of ``compare`` a field of
:class:`meanfield.workbench.problems.ComparisonConfig` (read from the dataclasses, so flags,
TOML keys and the run specification cannot drift); ``figures`` and the ``study`` kinds add
their own.
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING, fields

from ..contract import Contract, Param, contract_of
from ..workbench.config import SimulationConfig
from ..workbench.problems import PER_DIMENSION, ComparisonConfig

CASES = ("semicircle", "uniform", "disk")


#: Help texts of the ``simulate`` flags, generated from the declarations of the fields of
#: SimulationConfig (``field(metadata={"param": Param(...)})``): the flag, the TOML key, the
#: check and the docs' table come from one ``Param``; a number's range, as the check words it,
#: follows the text (a choice's values are in the text).
HELP = {
    p.name: f"{p.doc}; {p.allowed()}" if p.kind in ("real", "int", "seed", "level") else p.doc
    for p in contract_of(SimulationConfig).params
}


#: Help texts of the ``compare`` flags, generated in the same way from the declarations of
#: the fields of ComparisonConfig.
COMPARE_HELP = {
    p.name: f"{p.doc}; {p.allowed()}" if p.kind in ("real", "int", "seed", "level") else p.doc
    for p in contract_of(ComparisonConfig).params
}


def _add_config_flags(parser: argparse.ArgumentParser, cls, helps: dict) -> None:
    """One flag per field of the configuration dataclass ``cls`` (``--n-particles`` for
    ``n_particles``), unset (None) unless given, so a TOML file's value stands."""
    for f in fields(cls):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not MISSING else None
        if default is None and f.name in PER_DIMENSION:  # ComparisonConfig's, by p
            default = " in p = 1, ".join(str(v) for v in PER_DIMENSION[f.name]) + " in p = 2"
        # "int", "float | None", ...: the first type named is the flag's type
        typ = {"int": int, "float": float}.get(str(f.type).split(" ")[0], str)
        parser.add_argument(
            flag,
            dest=f.name,
            type=typ,
            default=None,
            help=f"{helps.get(f.name, '')} [default: {default}]",
        )


THREADS_HELP = (
    "torch CPU threads (default: torch's choice, one per core; 1 is often several times "
    "faster on a busy shared machine)"
)


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
    _add_config_flags(sim, SimulationConfig, HELP)


#: The flags of ``meanfield run``, declared once: each flag, its help (the doc, what it
#: allows, the default) and its check come from its :class:`~meanfield.contract.Param`
#: (:meth:`~meanfield.contract.Contract.add_arguments`), so a bad value ends the command in
#: argparse, by the flag's name, before the file is read. ``file`` is the positional argument.
RUN_FLAGS = Contract(
    "meanfield run",
    [
        Param(
            "file", "string", 'TOML file of one run (type = "RunSpec", RunSpec.to_toml), of a '
            'sweep (type = "Sweep": a [spec] table and an [axes] table) or of a study '
            '(type = "Study", study = NAME, then its settings)',
        ),
        Param(
            "out", "string", "a run: the output netCDF file [runs/run.nc]; a sweep: its folder "
            "[runs/sweep]; a study: its folder [runs/<question>/<preset>, or the committed "
            "results with --in-place] (None: those)", optional=True, default=None,
        ),
        Param("progress", "flag", "show the progress bar", default=True),
        Param(
            "set", "string", "override one setting of a study, VALUE in TOML syntax "
            "(--set 'seeds=[3]', --set data_dir='\"../data\"', --set coulomb.lam=0.5); "
            "repeatable", sequence=True, repeated=True, optional=True, default=None,
        ),
        Param(
            "in_place", "flag", "a study: write into the committed <question>/results/<preset> "
            "(the maintainers' command)", default=False,
        ),
        Param(
            "report_only", "flag", "a study: only write the reports from the runs in the study "
            "folder (never the runs)", default=False,
        ),
        Param(
            "report_dir", "string", "a study, with --report-only on committed runs: the report "
            "folder (None: runs/<question>/<preset>_report)", optional=True, default=None,
        ),
        Param(
            "n_workers", "int", "a study or a sweep: worker processes (None: the study's or "
            "the file's)", low=1, optional=True, default=None,
        ),
        Param(
            "scheduler", "string", "a study or a sweep: 'local' (a local cluster of "
            "--n-workers processes), 'threads' or a dask scheduler address "
            "(tcp://host:8786) (None: the study's or the file's)", optional=True, default=None,
        ),
    ],
)  # fmt: skip


def _add_run_flags(run) -> None:
    """The flags of ``meanfield run``, generated from :data:`RUN_FLAGS`: the file, the output,
    the progress bar, and a study's settings, folders and workers."""
    RUN_FLAGS.add_arguments(
        run, positional=["file"], metavars={"set": "KEY=VALUE", "report_dir": "FOLDER"}
    )


def _add_compare_flags(cmp) -> None:
    """The flags of ``meanfield compare``: ``--config``, output, and every field of the
    problem's configuration."""
    cmp.add_argument(
        "--config",
        help="TOML file with any of the problem flags below (underscored names, top level or "
        "a [compare] table)",
    )
    cmp.add_argument("--out", default="runs/compare", help="output folder [default: runs/compare]")
    cmp.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    cmp.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    _add_config_flags(cmp, ComparisonConfig, COMPARE_HELP)


class _CommittedFigures(argparse.Action):
    """``--in-place``: ``--out`` becomes the checkout's committed ``figures/`` folder, found
    from the package's location (not the working directory); refused outside a checkout."""

    def __call__(self, parser, namespace, values, option_string=None):
        from ..errors import MissingFileError
        from .figures import committed_figures_dir

        try:
            setattr(namespace, self.dest, str(committed_figures_dir()))
        except MissingFileError as err:
            raise argparse.ArgumentError(self, str(err)) from None


def _add_figures_flags(fig) -> None:
    """The flags of ``meanfield figures``."""
    where = fig.add_mutually_exclusive_group()
    where.add_argument(
        "--out",
        default="runs/figures",
        help="output folder [default: runs/figures, ignored by git]",
    )
    where.add_argument(
        "--in-place",
        dest="out",
        action=_CommittedFigures,
        nargs=0,
        default=argparse.SUPPRESS,
        help="write into the committed figures/ of the source checkout (the maintainers' "
        "command for refreshing the README's image and the gallery's data)",
    )
    from .figures import FULL_SIZE_SECONDS

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
    """``--n-particles``: one N, or a list for a sweep."""
    nargs = "+" if many else None
    text = "particle numbers N" if many else "number of particles N"
    k.add_argument(
        "--n-particles", dest="n_particles", type=int, nargs=nargs, default=default, help=text
    )


def _add_t_final(k, default: float, text: str) -> None:
    """``--t-final``: the final time of a run."""
    k.add_argument("--t-final", dest="t_final", type=float, default=default, help=text)


def _add_equilibrium_flags(eq) -> None:
    """The flags of ``meanfield study equilibrium``."""
    eq.add_argument("--case", default="uniform", choices=CASES, help="closed-form case")
    _add_n_particles(eq, [16, 32, 64, 128], many=True)
    eq.add_argument("--beta", type=float, default=4.0, help="inverse temperature beta > 0")
    eq.add_argument("--regime", default="coulomb-gas", choices=("mean-field", "coulomb-gas"))
    eq.add_argument("--seeds", type=int, default=8, help="number of seeds per N (>= 2)")
    _add_t_final(eq, 6.0, "Langevin time per run (> 0)")
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
    _add_t_final(bt, 6.0, "Langevin time per run (> 0)")
    _add_sweep_flags(bt, "runs/beta")


def _add_t_decay_flags(td) -> None:
    """The flags of ``meanfield study t-decay``."""
    td.add_argument(
        "--case", default="uniform", choices=("semicircle", "uniform"), help="closed-form case"
    )
    td.add_argument("--beta", type=float, default=1.0, help="inverse temperature beta > 0")
    _add_t_final(td, 6.0, "final time of the flow (> 0)")
    _add_sweep_flags(td, "runs/tdecay", scheduler=False)
