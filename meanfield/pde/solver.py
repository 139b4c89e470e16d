"""Adaptive time stepping for :class:`~meanfield.pde.equation.McKeanVlasov`.

Each step recomputes U = δE/δρ[ρ], the scheme's positivity (CFL) bound Δt_* at the current
state, and takes

    Δt = min(safety · Δt_*, dt_max, time to the end, time to the next tracker call),

so the step is as large as positivity allows and tracker records fall on exact times.  With
``safety`` < 1 every cell keeps at least a fraction 1 − safety of its own mass in one step
(:mod:`meanfield.pde.flux`), so ρ > 0 stays > 0.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from .._validation import check_int, check_positive
from ..errors import InputError, NumericalError, StepBudgetError
from ..results import provenance
from .field import Density
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
        """Every tracker's records merged on ``time``, with provenance attributes."""
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
    if np.ndim(t_range) == 0:
        t0, t1 = 0.0, check_positive("t_range", t_range)
    else:
        if len(t_range) != 2:
            raise ValueError(
                f"t_range must be a duration T > 0 or a pair (t0, t1), got {t_range!r}"
            )
        t0, t1 = float(t_range[0]), float(t_range[1])
        if not (math.isfinite(t0) and math.isfinite(t1) and t1 > t0):
            raise ValueError(f"t_range must satisfy t0 < t1, both finite, got {t_range!r}")
    return t0, t1


def _light_state(grid, data) -> Density:
    """A Density view without re-validation (the guard tracker validates every step)."""
    s = Density.__new__(Density)
    s.grid, s.data = grid, data
    return s


def _check_step_budget(equation, rho, duration, safety, dt_max, fixed_dt, max_steps) -> int:
    """Estimate the number of steps from the stable step at the initial state; refuse a run
    that would exceed ``max_steps`` before it starts.  Returns the estimate."""
    if fixed_dt is not None:
        step = fixed_dt
    else:
        U = equation.grid_energy.potential(rho)
        if not np.all(np.isfinite(U)):
            raise NumericalError("the potential dE/drho is non-finite at the initial state")
        stiff = equation.grid_energy.pair_stiffness * float(rho.max())
        dt_stable = equation.scheme.prepare(rho, U, equation.grid, equation.beta, stiff)[2]
        step = min(safety * dt_stable, dt_max)
    estimate = math.ceil(duration / step) if step > 0 and math.isfinite(step) else 1
    if estimate > max_steps:
        raise StepBudgetError(
            f"the solve would take about {estimate:.3g} steps (stable step {step:.3g} at the "
            f"initial state over t = {duration:.6g}), above max_steps={max_steps}; the "
            "problem is stiff: use scheme='sg-implicit' with dt=..., a coarser grid, a "
            "shorter t_range, or raise max_steps"
        )
    return estimate


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
) -> SolveResult:
    """Evolve a density under a McKean–Vlasov equation.

    Parameters
    ----------
    equation : McKeanVlasov
    state : Density
        Initial density on ``equation.grid`` (checked finite and ≥ 0).
    t_range : float or (float, float)
        Final time T (from 0) or the interval (t0, t1).
    trackers : sequence of Tracker
        Called as in py-pde (see :mod:`meanfield.pde.trackers`).
    safety : float in (0, 1]
        Fraction of the positivity bound used as the time step (explicit schemes) or of the
        drift CFL bound (implicit scheme).
    dt_max : float
        Upper bound on the step (time units).
    dt : float, optional
        Fixed step for the implicit scheme (positive for every Δt); for explicit schemes it is
        an upper bound like ``dt_max`` and the CFL bound still applies.
    guard : bool
        Prepend a :class:`GuardTracker` (finite, ≥ 0, mass) unless one is given.
    progress : bool
        Append a :class:`ProgressTracker`.
    max_steps : int
        The step budget.  The number of steps is estimated from the stable step at the
        initial state before the solve starts, and a run that would need more is refused at
        once; a run that reaches the budget anyway stops with the same error.

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
    """
    from .equation import McKeanVlasov

    if not isinstance(equation, McKeanVlasov):
        raise TypeError(f"equation must be a McKeanVlasov, got {equation!r}")
    if not isinstance(state, Density):
        raise TypeError(f"state must be a meanfield.pde.Density, got {state!r}")
    if state.grid != equation.grid:
        raise ValueError(f"the density lives on {state.grid!r}, the equation on {equation.grid!r}")
    t0, t1 = _t_range(t_range)
    safety = check_positive("safety", safety)
    if safety > 1:
        raise ValueError(f"safety must be in (0, 1], got {safety}")
    dt_max = check_positive("dt_max", dt_max) if math.isfinite(dt_max) else math.inf
    fixed_dt = None
    if dt is not None:
        dt = check_positive("dt", dt)
        if equation.scheme.implicit:
            fixed_dt = dt
        else:
            dt_max = min(dt_max, dt)
    max_steps = check_int("max_steps", max_steps)
    if not state.mass > 0:
        raise InputError(
            "state (initial density) has zero mass; the McKean-Vlasov flow needs a density of "
            "mass > 0 (e.g. Density.uniform(grid) or Density.gaussian(grid, ...))"
        )
    _check_step_budget(equation, state.data, t1 - t0, safety, dt_max, fixed_dt, max_steps)
    trackers = list(trackers)
    for tr in trackers:
        if not isinstance(tr, Tracker):
            raise TypeError(f"every tracker must be a meanfield.pde.trackers.Tracker, got {tr!r}")
    if guard and not any(isinstance(tr, GuardTracker) for tr in trackers):
        trackers.insert(0, GuardTracker())
    if progress:
        trackers.append(ProgressTracker())

    grid, beta, scheme = equation.grid, equation.beta, equation.scheme
    rho = state.data.copy()
    t = t0
    tol = 1e-12 * max(1.0, abs(t1))
    start = time.perf_counter()
    for tr in trackers:
        tr.t_end = t1
        tr.initialize(_light_state(grid, rho), t, equation)
    n_steps, stop, U = 0, "t_end", None
    dts = []
    try:
        while t < t1 - tol:
            if n_steps >= max_steps:
                raise StepBudgetError(
                    f"max_steps={max_steps} reached at t={t:.6g} < {t1:.6g}: "
                    "the CFL step is too small; try scheme='sg-implicit' or raise max_steps"
                )
            if U is None or equation.grid_energy.depends_on_density:
                U = equation.grid_energy.potential(rho)
                if not np.all(np.isfinite(U)):
                    raise NumericalError(f"the potential dE/drho became non-finite at t={t:.6g}")
            stiff = equation.grid_energy.pair_stiffness * float(rho.max())
            out, inn, dt_stable = scheme.prepare(rho, U, grid, beta, stiff)
            step = fixed_dt if fixed_dt is not None else safety * dt_stable
            step = min(step, dt_max)
            target = min([t1] + [tr.next_time for tr in trackers])
            clipped = step >= target - t - tol
            if clipped:
                step = target - t
            elif not math.isfinite(step):
                step = target - t
                clipped = True
            if not step > 0:
                raise NumericalError(f"non-positive time step {step!r} at t={t:.6g}")
            rho = scheme.advance(rho, U, grid, beta, step, out, inn)
            t = target if clipped else t + step
            n_steps += 1
            if not clipped:
                dts.append(step)
            current = _light_state(grid, rho)
            for tr in trackers:
                tr.step(current, t, equation)
    except FinishedSimulation as done:
        stop = str(done)
    final = _light_state(grid, rho)
    for tr in trackers:
        tr.finalize(final, t, equation)
    wall = time.perf_counter() - start
    attrs = {**equation.describe(), "safety": safety, "t_start": t0}
    return SolveResult(
        state=Density(grid, rho),
        t=t,
        n_steps=n_steps,
        stop_reason=stop,
        dt_min=float(min(dts)) if dts else math.nan,
        dt_max=float(max(dts)) if dts else math.nan,
        wall_time=wall,
        trackers=trackers,
        attrs=attrs,
    )
