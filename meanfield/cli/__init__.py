"""The ``meanfield`` command line.

    meanfield simulate [--config run.toml] [--n-particles 512] [--beta 1e3] ... --out run.nc

Every flag of ``simulate`` is a field of :class:`meanfield.workbench.config.SimulationConfig`; a
TOML file sets any of them and flags override the file.

The package: :mod:`~meanfield.cli.parser` (the flags), :mod:`~meanfield.cli.commands` (the
sub-commands) and :mod:`~meanfield.cli.output` (what is printed); this module builds the
parser from the commands and runs it (:func:`main`, the ``meanfield`` entry point).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import MeanfieldError
from .commands import COMMANDS

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``meanfield`` argument parser: simulate, compare, figures, study and run.

    Flag names (one per concept): ``--n-particles`` for a number of particles N (a list in
    the N sweeps), ``--t-final`` for a final time, ``--cells`` for grid cells per axis.

    Returns
    -------
    argparse.ArgumentParser
        With one sub-command per ``cmd_*`` function (``args.func``).

    See Also
    --------
    main : parse and run.
    meanfield.cli.commands.COMMANDS : the sub-commands, their flags and their functions.

    Examples
    --------
    >>> from meanfield.cli import build_parser
    >>> args = build_parser().parse_args(["simulate", "--n-particles", "50", "--beta", "2"])
    >>> args.command, args.n_particles, args.beta
    ('simulate', 50, 2.0)
    """
    parser = _OneLineParser(
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
    for name, (summary, description, add_flags, run) in COMMANDS.items():
        cmd = sub.add_parser(name, help=summary, description=description)
        add_flags(cmd)
        cmd.set_defaults(func=run)
    return parser


class _OneLineParser(argparse.ArgumentParser):
    """argparse whose refusal of a flag is one line on stderr and exit status 2, as every other
    bad input of the command line (argparse would print the whole usage block first); the
    sub-commands' parsers are of this class too (``add_subparsers`` uses the parent's)."""

    def error(self, message: str):
        print(f"meanfield: error: {message} ({self.prog} --help for the flags)", file=sys.stderr)
        raise SystemExit(2)


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

    See Also
    --------
    build_parser : the flags of every sub-command.

    Examples
    --------
    >>> from meanfield.cli import main
    >>> main(["simulate", "--n-particles", "0", "--out", "x.nc", "--no-progress"])
    2
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:
        if stop.code == 0:  # --help: argparse's own exit, as a program's
            raise
        return 2  # a flag refused while parsing: its one line is printed
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
