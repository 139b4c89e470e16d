"""The package's exceptions: one base class, so a caller (and the CLI) can tell a user error
from a bug.

Every exception raised on purpose by :mod:`meanfield` derives from :class:`MeanfieldError`.
Each also derives from the built-in exception it refines (``ValueError``, ``TypeError``,
``ImportError``, ``RuntimeError``…), so ``except ValueError`` keeps working.

The command line prints one line and exits with status 2 for every :class:`MeanfieldError`
(``meanfield --debug …`` shows the traceback instead).

Examples
--------
>>> from meanfield.errors import InputError, MeanfieldError
>>> try:
...     raise InputError("beta must be a finite number in (0, inf), got -1")
... except ValueError as err:  # the built-in base still catches it
...     isinstance(err, MeanfieldError)
True
"""

from __future__ import annotations


class MeanfieldError(Exception):
    """Base class of every error raised on purpose by :mod:`meanfield`.

    Catch it to tell a user error (a bad parameter, a missing file) from a bug.

    See Also
    --------
    InputError : a parameter outside its range.
    NumericalError : a computation that became non-finite.
    MeanfieldWarning : the base of the warnings.
    meanfield.cli.main : the command line, which reports these errors.

    Examples
    --------
    >>> from meanfield.errors import MeanfieldError, NumericalError
    >>> issubclass(NumericalError, MeanfieldError)
    True
    """


class InputError(MeanfieldError, ValueError):
    """A parameter outside its allowed range (the message names the parameter and the range).

    See Also
    --------
    InputTypeError : a parameter of the wrong type.
    SizeLimitError : a size beyond the machine's limits.
    OutputPathError : an output path that cannot be written.
    meanfield.dynamics.spec.RunSpec : a run whose parameters are checked when made.

    Examples
    --------
    >>> from meanfield._validation import check_positive
    >>> check_positive("beta", -1.0)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: beta must be a finite number in (0, inf), got -1.0
    """


class InputTypeError(MeanfieldError, TypeError):
    """A parameter of the wrong type (also a :class:`TypeError`).

    See Also
    --------
    InputError : a value of the right type out of range.
    meanfield.dynamics.chains.check_seed : a check that raises it.

    Examples
    --------
    >>> from meanfield._validation import check_int
    >>> check_int("n_steps", 2.5)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputTypeError: n_steps must be an integer >= 1, got 2.5
    """


class OutputPathError(InputError):
    """An output path that cannot be written (a directory for a file, a path under a file,
    a read-only folder); raised before any work.

    See Also
    --------
    OutputWriteError : a write that failed part-way.
    MissingFileError : an input file that does not exist.
    meanfield.results.save_dataset : an atomic write of a dataset.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield._validation import check_output_path
    >>> from meanfield.errors import OutputPathError
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     try:
    ...         check_output_path("out", folder, kind="file")
    ...     except OutputPathError as err:
    ...         print("refused")
    refused
    """


class SizeLimitError(InputError):
    """A size (grid cells, steps) whose estimated memory or step count exceeds what the
    machine has (or the step budget), refused before allocating; the message names the
    flag or parameter to change, the estimate and the limit.

    See Also
    --------
    StepBudgetError : a solve beyond its step budget.
    meanfield.dynamics.spec.check_work : the particles' work ceiling.
    meanfield.pde.grid.check_grid_size : the grid's memory ceiling.

    Examples
    --------
    >>> from meanfield.errors import InputError, SizeLimitError
    >>> issubclass(SizeLimitError, InputError)
    True
    """


class DependencyError(MeanfieldError, ImportError):
    """An optional dependency is missing; the message holds the install command.

    See Also
    --------
    ResourceError : a device or scheduler that is not available.
    MeanfieldError : the base class.

    Examples
    --------
    >>> from meanfield.errors import DependencyError
    >>> issubclass(DependencyError, ImportError)
    True
    """


class ResourceError(MeanfieldError, RuntimeError):
    """A requested resource is unavailable: a torch device, a dask scheduler.

    See Also
    --------
    DependencyError : a missing optional package.
    meanfield.workbench.sweeps.check_scheduler : the scheduler check that raises it.

    Examples
    --------
    >>> from meanfield.errors import ResourceError
    >>> issubclass(ResourceError, RuntimeError)
    True
    """


class DataFileError(MeanfieldError, ValueError):
    """A file that should hold a dataset is truncated, a folder, or not a netCDF file.

    See Also
    --------
    MissingFileError : a file that does not exist.
    RunFileMismatchWarning : a run file that holds another run.
    meanfield.results.load_dataset : the read that raises it.

    Examples
    --------
    >>> import os, tempfile
    >>> from meanfield.errors import DataFileError
    >>> from meanfield.results import load_dataset
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "run.nc")
    ...     with open(path, "w") as f:
    ...         _ = f.write("not netCDF")
    ...     try:
    ...         load_dataset(path)
    ...     except DataFileError:
    ...         print("refused")
    refused
    """


class MissingFileError(MeanfieldError, FileNotFoundError):
    """An input file that does not exist (also a :class:`FileNotFoundError`).

    See Also
    --------
    DataFileError : a file that exists but holds no dataset.
    meanfield.results.load_dataset : a read that raises it.

    Examples
    --------
    >>> from meanfield.errors import MissingFileError
    >>> from meanfield.results import load_dataset
    >>> try:
    ...     load_dataset("no/such/file.nc")
    ... except FileNotFoundError as err:
    ...     type(err).__name__
    'MissingFileError'
    """


class SweepConflictError(InputError):
    """A sweep folder holds runs made with other parameters (or another package version).

    See Also
    --------
    RunFileMismatchWarning : one run file that holds another run.
    meanfield.workbench.sweeps.run_sweep : the sweep that raises it.
    meanfield.workbench.sweeps.configuration_differences : what differs.

    Examples
    --------
    >>> from meanfield.errors import InputError, SweepConflictError
    >>> issubclass(SweepConflictError, InputError)
    True
    """


class StepBudgetError(MeanfieldError, RuntimeError):
    """A solve would need (or took) more steps than ``max_steps``.

    See Also
    --------
    SizeLimitError : a size refused before any work.
    meanfield.dynamics.spec.n_steps_for : the particles' step count.
    meanfield.pde.solver.check_step_budget : the grid's step estimate.

    Examples
    --------
    >>> from meanfield.errors import StepBudgetError
    >>> issubclass(StepBudgetError, RuntimeError)
    True
    """


class NumericalError(MeanfieldError, FloatingPointError):
    """A computation became non-finite (NaN or inf) part-way, usually from a step size or a
    temperature outside the range the scheme can follow; the message names the parameter to
    change.

    See Also
    --------
    ConvergenceError : an iteration that did not converge.
    PrecisionWarning : a result float64 cannot resolve.
    meanfield.pairsum.cast_checked : a cast that raises it.
    meanfield.pde.stepper.Stepper : grid steps that raise it.

    Examples
    --------
    >>> from meanfield.errors import NumericalError
    >>> issubclass(NumericalError, FloatingPointError)
    True
    """


class ConvergenceError(MeanfieldError, RuntimeError):
    """An iterative solve (a Gibbs state, a transport problem) did not converge.

    See Also
    --------
    ConvergenceWarning : a solve stopped at ``max_iter``, returned with a warning.
    NumericalError : a computation that became non-finite.
    meanfield.pde.stationary.second_variation_eigenvalue : an eigenvalue solve that raises it.
    meanfield.ot.sparse.w2_sparse : a transport solve.

    Examples
    --------
    >>> from meanfield.errors import ConvergenceError
    >>> issubclass(ConvergenceError, RuntimeError)
    True
    """


class MeanfieldWarning(UserWarning):
    """Base class of the warnings :mod:`meanfield` issues (a run that finished but may be
    silently wrong); the CLI prints each as one ``meanfield: warning:`` line.

    See Also
    --------
    MeanfieldError : the base of the errors.
    ConvergenceWarning : a solve that stopped above its tolerance.
    LowAcceptanceWarning : a chain that barely moved.

    Examples
    --------
    >>> import warnings
    >>> from meanfield.errors import MeanfieldWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", MeanfieldWarning)  # make them fatal in a script
    ...     try:
    ...         warnings.warn("check this run", MeanfieldWarning)
    ...     except MeanfieldWarning:
    ...         print("raised")
    raised
    """


class PinnedParticlesWarning(MeanfieldWarning):
    """Projected Langevin whose steps carry particles out of the domain, so that the
    projection pins them to its boundary instead of sampling.

    Issued by :func:`meanfield.dynamics.langevin.simulate` before a run whose noise step √(2η/β_N)
    is at least the domain's width, and after one that left half the particles or more on
    the boundary; lower ``eta`` (or raise β).

    See Also
    --------
    OvershootWarning : a drift step too large for the closest particles.
    meanfield.dynamics.langevin.pinning_step_warning : the check before a run.
    meanfield.dynamics.langevin.boundary_fraction : the check after a run.

    Examples
    --------
    >>> from meanfield.errors import MeanfieldWarning, PinnedParticlesWarning
    >>> issubclass(PinnedParticlesWarning, MeanfieldWarning)
    True
    """


class LowAcceptanceWarning(MeanfieldWarning):
    """A Metropolis chain (MALA, HMC) that accepted almost none of its proposals: below
    :data:`meanfield.dynamics.chains.LOW_ACCEPTANCE` of at least
    :data:`meanfield.dynamics.chains.LOW_ACCEPTANCE_MIN_PROPOSALS`, so its samples are (nearly)
    its start.  Usually a step too large for the closest particles (two nearly coincident
    particles under a singular kernel); lower ``eta`` (MALA) or ``step_size`` (HMC), or start
    from separated particles.

    See Also
    --------
    FrozenChainWarning : a chain that did not move across its law.
    meanfield.dynamics.chains.low_acceptance_warning : the check.
    meanfield.dynamics.chain_checks.check_start_spacing : a start refused before it.

    Examples
    --------
    >>> from meanfield.errors import LowAcceptanceWarning, MeanfieldWarning
    >>> issubclass(LowAcceptanceWarning, MeanfieldWarning)
    True
    """


class InaccurateStepWarning(MeanfieldWarning):
    """A fixed implicit step ``dt`` far beyond the accuracy its scheme can give: the state
    :func:`meanfield.pde.solve` labels t is not ρ(t).  Implicit steps stay positive for any
    Δt, so nothing else would show it.  The message gives the step-doubling error estimate
    and a ``dt`` (or number of sub-steps) that meets ``step_rtol``.

    See Also
    --------
    StepBudgetError : a solve beyond its step budget.
    meanfield.pde.solver.solve : the solve that issues it.
    meanfield.pde.stepper.Stepper : the fixed implicit steps.

    Examples
    --------
    >>> from meanfield.errors import InaccurateStepWarning, MeanfieldWarning
    >>> issubclass(InaccurateStepWarning, MeanfieldWarning)
    True
    """


class ConvergenceWarning(MeanfieldWarning):
    """An iterative stationary solve (:func:`meanfield.pde.gibbs_state`,
    :func:`meanfield.pde.equilibrium_measure`) stopped at ``max_iter`` above its tolerance;
    the density it returns is the last iterate, not the stationary state.  The message gives
    the residual and the options to change; ``report.converged`` is False.

    Make it fatal with ``warnings.simplefilter("error", ConvergenceWarning)``.

    See Also
    --------
    ConvergenceError : a solve that could not go on.
    MultipleStationaryStatesWarning : several stationary states found.
    meanfield.pde.stationary.gibbs_state : a solve that issues it.
    meanfield.pde.stationary.equilibrium_measure : a solve that issues it.

    Examples
    --------
    >>> from meanfield.errors import ConvergenceWarning, MeanfieldWarning
    >>> issubclass(ConvergenceWarning, MeanfieldWarning)
    True
    """


class TrajectoryCappedWarning(MeanfieldWarning):
    """HMC whose adapted leapfrog step ε would need more than ``max_leapfrog`` steps for the
    requested trajectory length T, so each trajectory ran only ``max_leapfrog`` · ε.

    Issued by :func:`meanfield.dynamics.hmc.sample_hmc` after the warm-up; the dataset's
    ``trajectory_length`` attribute then holds the length that ran (and
    ``trajectory_length_requested`` T).  Raise ``max_leapfrog`` or shorten T.

    See Also
    --------
    LowAcceptanceWarning : a chain that barely moved.
    meanfield.dynamics.hmc.sample_hmc : the sampler that issues it.
    meanfield.dynamics.hmc.warm_up : the adaptation of ε.

    Examples
    --------
    >>> from meanfield.errors import MeanfieldWarning, TrajectoryCappedWarning
    >>> issubclass(TrajectoryCappedWarning, MeanfieldWarning)
    True
    """


class MultipleStationaryStatesWarning(MeanfieldWarning):
    """A Gibbs-state search (:func:`meanfield.pde.gibbs_state`) that found several distinct
    stationary states of F_β (critical points: minimisers, metastable states, saddles), or a
    minimiser that is not unique (two states of equal free energy, as the ordered states ±m*
    of a symmetric model).  The density returned is the state of lowest free energy;
    ``report.states`` lists every state found with its free energy and stability.

    See Also
    --------
    NonUniqueMinimiserError : a computation that needs a unique minimiser.
    meanfield.pde.stationary.gibbs_state : the search that issues it.
    meanfield.pde.branches.follow_branches : every branch along β.

    Examples
    --------
    >>> from meanfield.errors import MeanfieldWarning, MultipleStationaryStatesWarning
    >>> issubclass(MultipleStationaryStatesWarning, MeanfieldWarning)
    True
    """


class NonUniqueMinimiserError(MeanfieldError, ValueError):
    """A computation that needs the unique minimiser of the free energy (a large-deviation
    rate or a concentration probability about the reference state ρ_β) on a model whose
    minimiser is not unique: the empirical measure then concentrates on the set of
    minimisers, not on one state, and the rate about one of them is not the rate of the model.

    See Also
    --------
    MultipleStationaryStatesWarning : several stationary states found.
    meanfield.pde.stationary.minimiser_is_unique : the check.
    meanfield.studies.large_deviations.scgf_on_grid : a rate about ρ_β.

    Examples
    --------
    >>> from meanfield.errors import MeanfieldError, NonUniqueMinimiserError
    >>> issubclass(NonUniqueMinimiserError, MeanfieldError)
    True
    """


__all__ = [
    "MeanfieldError",
    "InputError",
    "InputTypeError",
    "OutputPathError",
    "SizeLimitError",
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
    "ConvergenceWarning",
    "InaccurateStepWarning",
    "LowAcceptanceWarning",
    "TrajectoryCappedWarning",
    "MultipleStationaryStatesWarning",
    "NonUniqueMinimiserError",
]


class OutputWriteError(MeanfieldError, OSError):
    """An output file that could not be written to the end: the disk is full (ENOSPC), a
    quota is exceeded, an I/O error.  The message names the file and the cause; nothing
    partial is left (neither the target nor a temporary ``.part`` file).

    See Also
    --------
    OutputPathError : a path refused before any work.
    meanfield.results.save_dataset : the atomic write that raises it.

    Examples
    --------
    >>> from meanfield.errors import OutputWriteError
    >>> issubclass(OutputWriteError, OSError)
    True
    """


__all__.append("OutputWriteError")


class PrecisionWarning(MeanfieldWarning):
    """A result that float64 cannot resolve: its certified rounding bound exceeds the value
    (e.g. a Wasserstein distance far below the extent of the measures times √ε), so the value
    is returned uncertified (``certified=False``) with the honest interval ``[lower, upper]``.

    Issued by :func:`meanfield.ot.distance.wasserstein`; the message gives the value, the
    interval and the extent it is relative to.

    See Also
    --------
    meanfield.ot.distance.TransportResult : ``certified``, ``lower`` and ``upper``.
    meanfield.ot.precision.rounding_bound : the rounding bound.
    NumericalError : a computation that became non-finite.

    Examples
    --------
    >>> from meanfield.errors import MeanfieldWarning, PrecisionWarning
    >>> issubclass(PrecisionWarning, MeanfieldWarning)
    True
    """


__all__.append("PrecisionWarning")


class OvershootWarning(MeanfieldWarning):
    """Projected Langevin whose explicit drift step carried particles by more than their
    distance to their nearest neighbour (a near-collision under an unsoftened singular pair
    kernel: the kick grows like η·2λ/(N r)), so particles jump past each other and the
    stationary law is wrong.  The message counts the steps; the capped pair step
    (``pair_step="capped"``, the default for singular kernels), a smaller ``eta``, a softening,
    or MALA/HMC fix it.

    See Also
    --------
    CoincidentParticlesWarning : two particles that coincide.
    meanfield.dynamics.near_field.count_overshoot : the count.
    meanfield.dynamics.near_field.near_field : the capped pair step.
    meanfield.dynamics.langevin.MALA : an exact sampler of the same law.

    Examples
    --------
    >>> from meanfield.errors import MeanfieldWarning, OvershootWarning
    >>> issubclass(OvershootWarning, MeanfieldWarning)
    True
    """


class FrozenChainWarning(MeanfieldWarning):
    """A Metropolis chain that did not move across its law: its accumulated squared
    displacement per coordinate is below the squared spread of its particles (a random walk
    that short cannot have crossed the law once), whatever its acceptance rate.  Its records
    are (nearly) its start, not samples; lower the step or run longer.

    See Also
    --------
    LowAcceptanceWarning : a chain that accepted almost nothing.
    meanfield.dynamics.chain_checks.frozen_chain_warning : the check.
    meanfield.stats.effective_sample_size : the samples a chain is worth.

    Examples
    --------
    >>> from meanfield.errors import FrozenChainWarning, MeanfieldWarning
    >>> issubclass(FrozenChainWarning, MeanfieldWarning)
    True
    """


class CoincidentParticlesWarning(MeanfieldWarning):
    """A particle run that recorded the energy +inf: two particles coincide (e.g. pinned to
    the same boundary point by the projection) under an unsoftened singular pair kernel.

    See Also
    --------
    OvershootWarning : particles carried past each other.
    PinnedParticlesWarning : particles pinned to the boundary.
    meanfield.ot.spacing.min_pair_distance : the closest pair.
    meanfield.dynamics.langevin.simulate : the run that issues it.

    Examples
    --------
    >>> from meanfield.errors import CoincidentParticlesWarning, MeanfieldWarning
    >>> issubclass(CoincidentParticlesWarning, MeanfieldWarning)
    True
    """


__all__ += ["OvershootWarning", "FrozenChainWarning", "CoincidentParticlesWarning"]


class RunFileMismatchWarning(MeanfieldWarning):
    """A sweep's run file that is not the run its name says: it records another grid point
    (a run file copied or renamed under this run's name), another configuration, or it is
    unreadable or a partial write.  :func:`meanfield.workbench.sweeps.run_sweep` moves it to
    ``runs/set_aside/`` and recomputes the run; the message names the file and what it holds.

    See Also
    --------
    SweepConflictError : a whole sweep folder of other parameters.
    DataFileError : a file that holds no dataset.
    meanfield.workbench.sweeps.run_sweep : the sweep that issues it.

    Examples
    --------
    >>> from meanfield.errors import MeanfieldWarning, RunFileMismatchWarning
    >>> issubclass(RunFileMismatchWarning, MeanfieldWarning)
    True
    """


__all__.append("RunFileMismatchWarning")
