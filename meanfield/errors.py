"""The package's exceptions: one base class, so a caller (and the CLI) can tell a user error
from a bug.

Every exception raised on purpose by :mod:`meanfield` derives from :class:`MeanfieldError`.
Each also derives from the built-in exception it refines (``ValueError``, ``TypeError``,
``ImportError``, ``RuntimeError``…), so ``except ValueError`` keeps working.

The command line prints one line and exits with status 2 for every :class:`MeanfieldError`
(``meanfield --debug …`` shows the traceback instead).
"""

from __future__ import annotations


class MeanfieldError(Exception):
    """Base class of every error raised on purpose by :mod:`meanfield`."""


class InputError(MeanfieldError, ValueError):
    """A parameter outside its allowed range (the message names the parameter and the range)."""


class InputTypeError(MeanfieldError, TypeError):
    """A parameter of the wrong type."""


class OutputPathError(InputError):
    """An output path that cannot be written (a directory for a file, a path under a file,
    a read-only folder); raised before any work."""


class DependencyError(MeanfieldError, ImportError):
    """An optional dependency is missing; the message holds the install command."""


class ResourceError(MeanfieldError, RuntimeError):
    """A requested resource is unavailable: a torch device, a dask scheduler."""


class DataFileError(MeanfieldError, ValueError):
    """A file that should hold a dataset is missing, truncated or not a netCDF file."""


class MissingFileError(MeanfieldError, FileNotFoundError):
    """An input file that does not exist."""


class SweepConflictError(InputError):
    """A sweep folder holds runs made with other parameters (or another package version)."""


class StepBudgetError(MeanfieldError, RuntimeError):
    """A solve would need (or took) more steps than ``max_steps``."""


class NumericalError(MeanfieldError, FloatingPointError):
    """A computation became non-finite (NaN or inf) part-way, usually from a step size or a
    temperature outside the range the scheme can follow; the message names the parameter to
    change."""


class ConvergenceError(MeanfieldError, RuntimeError):
    """An iterative solve (a Gibbs state, a transport problem) did not converge."""


class MeanfieldWarning(UserWarning):
    """Base class of the warnings :mod:`meanfield` issues (a run that finished but may be
    silently wrong); the CLI prints each as one ``meanfield: warning:`` line."""


class PinnedParticlesWarning(MeanfieldWarning):
    """Projected Langevin whose steps carry particles out of the domain, so that the
    projection pins them to its boundary instead of sampling."""


__all__ = [
    "MeanfieldError",
    "InputError",
    "InputTypeError",
    "OutputPathError",
    "DependencyError",
    "ResourceError",
    "DataFileError",
    "MissingFileError",
    "SweepConflictError",
    "StepBudgetError",
    "NumericalError",
    "ConvergenceError",
    "MeanfieldWarning",
    "PinnedParticlesWarning",
]
