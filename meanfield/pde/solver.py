"""The controller: runs the time loop and the trackers (py-pde's ``Controller``).

:func:`solve` validates the run, asks a :class:`~meanfield.pde.stepper.Stepper` to advance
the equation to the next tracker time, and calls the trackers.  Each step recomputes
U = δE/δρ[ρ] and the scheme's positivity (CFL) bound Δt_* at the current state, and takes

    Δt = min(safety · Δt_*, dt_max, time to the end, time to the next tracker call),

so the step is as large as positivity allows and tracker records fall on exact times.  With
``safety`` < 1 every cell keeps at least a fraction 1 − safety of its own mass in one step
(:mod:`meanfield.pde.schemes`), so ρ > 0 stays > 0.

Any equation with the interface of :class:`~meanfield.pde.stepper.EquationProtocol` can be
solved; :class:`~meanfield.pde.equation.McKeanVlasov` is the one of this package.  When the
equation is linear and no tracker needs every step (the guard is content with the state at
tracker times: positivity and mass hold by construction), the steps between tracker times
run in one call of the equation's ``advance_frozen``.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from .._validation import check_positive
from ..contract import Param, declare
from ..errors import InaccurateStepWarning, InputError, InputTypeError, StepBudgetError
from ..results import provenance
from .field import Density
from .stepper import Stepper
from .trackers import FinishedSimulation, GuardTracker, ProgressTracker, Tracker


@dataclass
class SolveResult:
    """What :func:`solve` returns.

    Attributes
    ----------
    state : Density
        The final density.
    t : float
        The final time.
    n_steps : int
    stop_reason : str
        ``"t_end"`` or the message of the tracker that stopped the run (e.g. a steady state).
    dt_min, dt_max : float
        Smallest and largest step taken (steps shortened to hit tracker times excluded).
    wall_time : float
        Seconds.
    trackers : list of Tracker
    attrs : dict
        Parameters of the run (for dataset attributes).

    See Also
    --------
    solve : returns it.
    meanfield.pde.trackers.Tracker : the records merged into :attr:`SolveResult.dataset`.
    meanfield.dynamics.langevin.simulate : the particle view's run.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> from meanfield.pde.solver import SolveResult, solve
    >>> from meanfield.pde.trackers import MassTracker
    >>> g = Grid(Box(1, 3.0), 32)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], Box(1, 3.0)), g, 1.0, scheme="sg")
    >>> res = solve(eq, Density.uniform(g), 0.5, trackers=[MassTracker(0.25)])
    >>> isinstance(res, SolveResult), res.t, res.stop_reason
    (True, 0.5, 't_end')
    >>> ds = res.dataset()
    >>> ds["time"].values.tolist()
    [0.0, 0.25, 0.5]
    """

    state: Density
    t: float
    n_steps: int
    stop_reason: str
    dt_min: float
    dt_max: float
    wall_time: float
    trackers: list = field(default_factory=list)
    attrs: dict = field(default_factory=dict)

    def dataset(self) -> xr.Dataset:
        """Every tracker's records merged on ``time``, with provenance attributes.

        Returns
        -------
        xarray.Dataset
            The trackers' variables on a common ``time`` coordinate (outer join); attributes:
            the equation's parameters, the run's (``n_steps``, ``t_final``, ``stop_reason``,
            ``dt_min``, ``dt_max``, ...) and provenance.

        See Also
        --------
        meanfield.pde.trackers.Tracker.to_dataset : each tracker's part.
        meanfield.results.provenance : the provenance attributes.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid, MassTracker, McKeanVlasov
        >>> g = Grid(Box(1, 3.0), 16)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], Box(1, 3.0)), g, 1.0, scheme="sg")
        >>> ds = eq.solve(Density.uniform(g), 0.2, trackers=[MassTracker(0.1)]).dataset()
        >>> ds.sizes["time"], ds.attrs["stop_reason"], ds.attrs["scheme"]
        (3, 't_end', 'sg')
        """
        parts = [ds for tr in self.trackers if (ds := tr.to_dataset()) is not None]
        ds = xr.merge(parts, join="outer", compat="override") if parts else xr.Dataset()
        ds.attrs = provenance(
            {
                **self.attrs,
                "n_steps": self.n_steps,
                "t_final": self.t,
                "stop_reason": self.stop_reason,
                "dt_min": self.dt_min,
                "dt_max": self.dt_max,
            },
            seed=None,
        )
        if "time" in ds.coords:
            ds["time"].attrs["long_name"] = "time t (particle time eta * steps)"
        return ds


def _t_range(t_range) -> tuple:
    """(t0, t1) from a duration T > 0 (then t0 = 0) or a pair, checked finite with t0 < t1."""
    if isinstance(t_range, (int, float)) or np.ndim(t_range) == 0:
        return 0.0, check_positive("t_range", t_range)
    if len(t_range) != 2:
        raise InputError(f"t_range must be a duration T > 0 or a pair (t0, t1), got {t_range!r}")
    t0, t1 = float(t_range[0]), float(t_range[1])
    if not (math.isfinite(t0) and math.isfinite(t1) and t1 > t0):
        raise InputError(f"t_range must satisfy t0 < t1, both finite, got {t_range!r}")
    return t0, t1


def check_step_budget(stepper: Stepper, rho, duration, max_steps) -> int:
    """Estimate the number of steps from the stable step at the initial state; refuse a run
    that would exceed ``max_steps`` before it starts.

    Parameters
    ----------
    stepper : Stepper
    rho : array of shape ``grid.shape``
        The initial density.
    duration : float
        t1 − t0.
    max_steps : int

    Returns
    -------
    int
        The estimate.

    Raises
    ------
    meanfield.errors.StepBudgetError
        The estimate exceeds ``max_steps``.

    See Also
    --------
    solve : runs this check before the first step.
    meanfield.pde.stepper.Stepper.estimate_steps : the estimate it checks.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.errors import StepBudgetError
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> from meanfield.pde.solver import check_step_budget
    >>> from meanfield.pde.stepper import Stepper
    >>> g = Grid(Box(1, 3.0), 32)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
    >>> rho = Density.uniform(g).data
    >>> n = check_step_budget(Stepper(eq), rho, 1.0, 10_000)
    >>> try:
    ...     check_step_budget(Stepper(eq), rho, 1e9, 10_000)
    ... except StepBudgetError:
    ...     print("refused")
    refused
    """
    estimate = stepper.estimate_steps(rho, duration)
    if estimate > max_steps:
        step = duration / estimate
        raise StepBudgetError(
            f"the solve would take about {estimate:.3g} steps (stable step {step:.3g} at the "
            f"initial state over t = {duration:.6g}), above max_steps={max_steps}; the "
            "problem is stiff: use scheme='sg-implicit' with dt=..., a coarser grid, a "
            "shorter t_range, or raise max_steps"
        )
    return estimate


#: What :func:`solve` needs from an equation (see :class:`~meanfield.pde.stepper.EquationProtocol`).
_INTERFACE = ("grid", "implicit", "linear", "prepare_step", "advance", "describe")


def _check_equation(equation, state) -> None:
    """Refuse an equation without the solver's interface (naming what it lacks), and a state
    that is not a :class:`Density` of positive mass on the equation's grid."""
    missing = [m for m in _INTERFACE if not hasattr(equation, m)]
    if missing:
        raise InputTypeError(
            f"equation must provide grid, implicit, linear, prepare_step, advance and describe "
            f"(e.g. a McKeanVlasov); {equation!r} lacks {', '.join(missing)}"
        )
    if not isinstance(state, Density):
        raise InputTypeError(f"state must be a meanfield.pde.Density, got {state!r}")
    # identity first: the usual case, and a grid comparison costs a microsecond per solve
    if state.grid is not equation.grid and state.grid != equation.grid:
        raise InputError(f"the density lives on {state.grid!r}, the equation on {equation.grid!r}")
    if not state.mass > 0:
        raise InputError(
            "state (initial density) has zero mass; the McKean-Vlasov flow needs a density of "
            "mass > 0 (e.g. Density.uniform(grid) or Density.gaussian(grid, ...))"
        )


def _prepare_trackers(trackers, guard: bool, progress: bool) -> tuple[list, bool]:
    """The trackers of the run, checked, with a guard prepended (``guard``, unless one is
    given) and a progress bar appended (``progress``); and whether a guard is among them."""
    trackers = list(trackers)
    for tr in trackers:
        if not isinstance(tr, Tracker):
            raise InputTypeError(
                f"every tracker must be a meanfield.pde.trackers.Tracker, got {tr!r}"
            )
    guarded = any(isinstance(tr, GuardTracker) for tr in trackers)
    if guard and not guarded:
        trackers.insert(0, GuardTracker())
        guarded = True
    if progress:
        trackers.append(ProgressTracker())
    return trackers, guarded


def _start_trackers(trackers, equation, rho, t0: float, t1: float) -> Density:
    """Tell every tracker the end time and show it the initial state (one view of ``rho``,
    shared by all of them, returned)."""
    current = Density(equation.grid, rho, check=False)
    for tr in trackers:
        tr.t_end = t1
        tr.initialize(current, t0, equation)
    return current


def _run(equation, stepper: Stepper, rho, t0, t1, trackers, max_steps):
    """The loop: advance to the next tracker time, call the trackers.  Returns
    (the final state as a view :class:`Density`, t, n_steps, stop reason)."""
    grid, t, n_steps, stop = equation.grid, t0, 0, "t_end"
    tol = 1e-12 * max(1.0, abs(t1))
    # the guard checks the state it is handed; every other every-step tracker needs each step
    batch = all(tr.interval != 0 or isinstance(tr, GuardTracker) for tr in trackers)
    current = _start_trackers(trackers, equation, rho, t, t1)
    try:
        while t < t1 - tol:
            target = min([t1] + [tr.next_time for tr in trackers])
            try:
                rho, t, k = stepper.advance(
                    rho, t, target, tol, batch=batch, budget=max_steps - n_steps
                )
            except StepBudgetError:
                raise StepBudgetError(
                    f"max_steps={max_steps} reached at t={t:.6g} < {t1:.6g}: "
                    "the CFL step is too small; try scheme='sg-implicit' or raise max_steps"
                ) from None
            n_steps += k
            current = Density(grid, rho, check=False)
            for tr in trackers:
                tr.step(current, t, equation)
    except FinishedSimulation as done:
        stop = str(done)
    return current, t, n_steps, stop


def _finish(equation, stepper: Stepper, trackers, guarded: bool, run, start, attrs):
    """Finalise the trackers on the state ``run`` ended with and build the
    :class:`SolveResult` (``attrs``: the run's parameters beside ``equation.describe()``)."""
    final, t, n_steps, stop = run
    for tr in trackers:
        tr.finalize(final, t, equation)
    taken = stepper.dt_min_taken <= stepper.dt_max_taken
    return SolveResult(
        # a guard checked this state; without one it is checked here
        state=final if guarded else Density(equation.grid, final.data),
        t=t,
        n_steps=n_steps,
        stop_reason=stop,
        dt_min=float(stepper.dt_min_taken) if taken else math.nan,
        dt_max=float(stepper.dt_max_taken) if taken else math.nan,
        wall_time=time.perf_counter() - start,
        trackers=trackers,
        attrs={**equation.describe(), **attrs},
    )


#: Default ``step_rtol`` of :func:`solve`: the step-doubling relative L1 error of a fixed
#: implicit step above which it warns.  5 % per step flags a step far beyond the scheme's
#: accuracy (one step of 1e4 with a pair term: 0.3-1.0), not the demonstration steps of
#: 0.1-0.5 on an O(1) relaxation (0.001-0.02); pass a smaller one for quantitative transients.
STEP_RTOL = 0.05


def _check_fixed_step(stepper: Stepper, equation, step_rtol, duration: float) -> float | None:
    """After a run with a fixed implicit ``dt``: the step-doubling error of its last step
    (:meth:`Stepper.step_error`), with an :class:`InaccurateStepWarning` above ``step_rtol``
    naming a dt that meets it (local error ∝ Δt^(q+1), at most half the step)."""
    if stepper.fixed_dt is None or step_rtol is None:
        return None
    error = stepper.step_error()
    if error is None or error <= step_rtol:
        return error
    q = getattr(getattr(equation, "scheme", None), "time_order", 1)
    dt = stepper.fixed_dt
    suggest = dt * min(0.5, (step_rtol / error) ** (1.0 / (q + 1)))
    scheme = equation.describe().get("scheme", type(equation).__name__)
    warnings.warn(
        f"the fixed dt = {dt:g} of the implicit scheme {scheme!r} is beyond the accuracy it "
        f"can give here: a step-doubling estimate of its relative L1 error per step is "
        f"{error:.2g} > step_rtol = {step_rtol:g}, so the state labelled t is not rho(t); "
        f"use dt <= about {suggest:.3g} (about {math.ceil(duration / suggest)} sub-steps "
        "over the run), or pass step_rtol=None if only the stationary limit matters",
        InaccurateStepWarning,
        stacklevel=4,  # the caller of solve (past its contract's checking wrapper)
    )
    return error


@declare(
    Param("safety", "real", "fraction of the stable step used", low=0.0, high=1.0, low_open=True),
    Param(
        "dt_max", "real", "upper bound on the step", low=0.0, low_open=True, finite=False,
        units="time",
    ),
    Param(
        "dt", "real", "fixed step of the implicit schemes (an upper bound for explicit ones)",
        low=0.0, low_open=True, optional=True, units="time",
    ),
    Param("guard", "flag", "prepend a GuardTracker (finite, >= 0, mass)"),
    Param("progress", "flag", "append a progress bar"),
    Param("max_steps", "int", "the step budget, checked before the solve", low=1),
    Param(
        "step_rtol", "real", "relative L1 error per fixed implicit step above which it warns",
        low=0.0, low_open=True, optional=True,
    ),
)  # fmt: skip
def solve(
    equation,
    state: Density,
    t_range,
    *,
    trackers=(),
    safety: float = 0.5,
    dt_max: float = math.inf,
    dt: float | None = None,
    guard: bool = True,
    progress: bool = False,
    max_steps: int = 10_000_000,
    step_rtol: float | None = STEP_RTOL,
) -> SolveResult:
    """Evolve a density under a McKean–Vlasov equation (or any equation with its interface).

    Parameters
    ----------
    equation : McKeanVlasov or EquationProtocol
    state : Density
        Initial density on ``equation.grid`` (checked finite and ≥ 0).
    t_range : float or (float, float)
        Final time T (from 0) or the interval (t0, t1).
    trackers : sequence of Tracker
        Called as in py-pde (see :mod:`meanfield.pde.trackers`).
    safety : float in (0, 1]
        Fraction of the positivity bound used as the time step (explicit schemes) or of the
        drift CFL bound (implicit schemes).
    dt_max : float
        Upper bound on the step (time units).
    dt : float, optional
        Fixed step for the implicit schemes (positive for every Δt); for explicit schemes it
        is an upper bound like ``dt_max`` and the CFL bound still applies.
    guard : bool
        Prepend a :class:`GuardTracker` (finite, ≥ 0, mass) unless one is given.
    progress : bool
        Append a :class:`ProgressTracker`.
    max_steps : int
        The step budget.  The number of steps is estimated from the stable step at the
        initial state before the solve starts, and a run that would need more is refused at
        once; a run that reaches the budget anyway stops with the same error.
    step_rtol : float or None
        With a fixed ``dt`` of an implicit scheme: after the run, the last step of about
        ``dt`` is redone as two half steps (step doubling,
        :meth:`~meanfield.pde.stepper.Stepper.step_error`; three extra steps) and an
        estimated relative L1 error per step above ``step_rtol`` warns.  An implicit step is
        positive for any Δt, so a step far past the transient (or, with a ρ-dependent
        potential, frozen over the step) returns a state that is not ρ(t) without any other
        sign.  The estimate is the attribute ``step_error``.  None: no check.

    Returns
    -------
    SolveResult

    Raises
    ------
    meanfield.errors.InputError
        An initial density of zero mass, or a parameter out of range.
    meanfield.errors.StepBudgetError
        The estimated (or actual) number of steps exceeds ``max_steps``; raised before the
        solve when estimated.

    Warns
    -----
    meanfield.errors.InaccurateStepWarning
        A fixed implicit ``dt`` whose step-doubling error exceeds ``step_rtol``.

    See Also
    --------
    meanfield.pde.equation.McKeanVlasov.solve : the same from the equation.
    meanfield.pde.stationary.gibbs_state : the state the flow relaxes to, directly.
    meanfield.pde.trackers : what a run records.
    meanfield.dynamics.langevin.simulate : the particle view (projected Langevin on H_N).
    meanfield.ot.distance.wasserstein : the transport view (particles against grid densities).

    References
    ----------
    - D. Zwicker, "py-pde: A Python package for solving partial differential equations", J. Open
      Source Softw. 5 (2020) 2158.
    - J. A. Carrillo, A. Chertock, Y. Huang, "A finite-volume method for nonlinear nonlocal
      equations with a gradient flow structure", Commun. Comput. Phys. 17 (2015) 233–258.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> g = Grid(Box(1, 5.0), 128)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], Box(1, 5.0)), g, 1.0, scheme="sg")
    >>> res = solve(eq, Density.gaussian(g, 1.0, 0.5), 1.0)
    >>> round(float(res.state.mean[0]), 2)  # e^(-1) = 0.368
    0.37
    """
    _check_equation(equation, state)
    t0, t1 = _t_range(t_range)
    stepper = Stepper(equation, safety=safety, dt_max=dt_max, dt=dt)
    check_step_budget(stepper, state.data, t1 - t0, max_steps)
    trackers, guarded = _prepare_trackers(trackers, guard, progress)
    start = time.perf_counter()
    run = _run(equation, stepper, state.data.copy(), t0, t1, trackers, max_steps)
    attrs = {"safety": safety, "t_start": t0}
    error = _check_fixed_step(stepper, equation, step_rtol, t1 - t0)
    if error is not None:
        attrs["step_error"] = error
    return _finish(equation, stepper, trackers, guarded, run, start, attrs)
