"""The stepper: chooses Δt and advances an equation, in the manner of a py-pde solver.

The three parts of a solve, as in py-pde:

* the **equation** gives its evolution step — :meth:`prepare_step` (the potential, the fluxes
  and the stable step at the current state) and :meth:`advance` (one explicit or implicit
  step), see :class:`EquationProtocol`;
* the **stepper** (this module) picks the step size under the positivity bound and the
  caller's limits, and advances to a target time;
* the **controller** (:func:`meanfield.pde.solver.solve`) runs the loop and the trackers.

A *linear* equation (the step map is the same linear map at every step: SG fluxes of a
potential that does not depend on ρ) may also offer
``advance_frozen(rho, dt, n, plan, last)`` (n steps of dt, then one of ``last`` if > 0);
the stepper then takes all the equal steps up to the next tracker time in one call (a
compiled loop in 1D).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from .._validation import check_positive
from ..errors import InputError, NumericalError, StepBudgetError


class StepPlan(NamedTuple):
    """What an equation computes once per step at the current state.

    Attributes
    ----------
    U : array of shape ``grid.shape`` or None
        The potential δE/δρ (energy units), if the equation has one.
    out, inn : arrays of shape ``grid.shape`` or None
        Out- and inflow of every cell (density / time) for an explicit step.
    dt_stable : float
        The largest step the scheme allows at this state, before the safety factor (time).

    See Also
    --------
    EquationProtocol.prepare_step : makes the plan.
    Stepper : sizes the step from it.
    meanfield.pde.schemes.Scheme.prepare : the flows and the stable step.

    Examples
    --------
    >>> from meanfield.pde.stepper import StepPlan
    >>> plan = StepPlan(U=None, out=None, inn=None, dt_stable=0.1)
    >>> plan.dt_stable, plan._replace(dt_stable=0.2).dt_stable
    (0.1, 0.2)
    """

    U: Any
    out: Any
    inn: Any
    dt_stable: float


@runtime_checkable
class EquationProtocol(Protocol):
    """The interface :func:`~meanfield.pde.solver.solve` needs from an equation.

    Attributes ``grid`` (a :class:`~meanfield.pde.grid.Grid`), ``implicit`` and ``linear``
    (bools); methods ``prepare_step(rho) -> StepPlan``, ``advance(rho, dt, plan) -> rho``
    and ``describe() -> dict``.  A linear equation may add
    ``advance_frozen(rho, dt, n_steps, plan, last=0.0) -> rho``.

    See Also
    --------
    meanfield.pde.equation.McKeanVlasov : the package's equation.
    meanfield.pde.solver.solve : solves any equation with this interface.

    Examples
    --------
    A minimal equation, dρ/dt = −ρ by explicit Euler with Δt_* = 1, satisfies the protocol:

    >>> import numpy as np
    >>> from meanfield.pde.stepper import EquationProtocol, StepPlan, Stepper
    >>> class Decay:
    ...     grid, implicit, linear = None, False, False
    ...     def prepare_step(self, rho):
    ...         return StepPlan(None, rho, 0 * rho, 1.0)
    ...     def advance(self, rho, dt, plan):
    ...         return rho - dt * plan.out
    ...     def describe(self):
    ...         return {}
    >>> isinstance(Decay(), EquationProtocol)
    True
    >>> rho, t, n = Stepper(Decay(), safety=0.5).advance(
    ...     np.ones(2), 0.0, 1.0, 1e-12, batch=False, budget=10
    ... )
    >>> rho, t, n  # one step of 0.5
    (array([0.5, 0.5]), 0.5, 1)
    """

    grid: Any
    implicit: bool
    linear: bool

    def prepare_step(self, rho: np.ndarray) -> StepPlan:
        """What one step from ρ needs: the potential, the flows and the stable step.

        Parameters
        ----------
        rho : array of shape ``grid.shape``
            The density at the current time.

        Returns
        -------
        StepPlan

        See Also
        --------
        meanfield.pde.equation.McKeanVlasov.prepare_step
        StepPlan

        Examples
        --------
        For dρ/dt = −ρ every cell's out-flow is ρ and forward Euler stays ≥ 0 for Δt ≤ 1:

        >>> import numpy as np
        >>> from meanfield.pde.stepper import StepPlan
        >>> class Decay:
        ...     def prepare_step(self, rho):
        ...         return StepPlan(U=None, out=rho, inn=0 * rho, dt_stable=1.0)
        >>> Decay().prepare_step(np.ones(2)).dt_stable
        1.0
        """
        ...

    def advance(self, rho: np.ndarray, dt: float, plan: StepPlan) -> np.ndarray:
        """One step of size ``dt`` from ρ with the plan :meth:`prepare_step` made at ρ.

        Parameters
        ----------
        rho : array of shape ``grid.shape``
        dt : float
            The step (time units); within the plan's stable step for an explicit scheme.
        plan : StepPlan

        Returns
        -------
        array of shape ``grid.shape``
            The density at t + dt.

        See Also
        --------
        meanfield.pde.equation.McKeanVlasov.advance

        Examples
        --------
        Forward Euler for dρ/dt = −ρ, (ρ − Δt · out) + Δt · in:

        >>> import numpy as np
        >>> from meanfield.pde.stepper import StepPlan
        >>> def advance(rho, dt, plan):
        ...     return (rho - dt * plan.out) + dt * plan.inn
        >>> rho = np.ones(2)
        >>> advance(rho, 0.5, StepPlan(None, rho, 0 * rho, 1.0))
        array([0.5, 0.5])
        """
        ...

    def describe(self) -> dict:
        """The equation's parameters as plain types (for the result's dataset attributes).

        See Also
        --------
        meanfield.pde.equation.McKeanVlasov.describe

        Examples
        --------
        >>> class Decay:
        ...     rate = 1.0
        ...     def describe(self):
        ...         return {"equation": "decay", "rate": self.rate}
        >>> Decay().describe()
        {'equation': 'decay', 'rate': 1.0}
        """
        ...


class Stepper:
    """Adaptive (explicit) or fixed (implicit) steps under the positivity bound.

    Each step takes

    .. math::

        \\Delta t = \\min(s\\,\\Delta t_*,\\ \\Delta t_{\\max},\\ t_{\\rm target} - t)

    with Δt_* the equation's stable step at the current state and s the safety factor; an
    implicit equation given a fixed ``dt`` uses it in place of s Δt_*.

    Parameters
    ----------
    equation : EquationProtocol
    safety : float in (0, 1]
    dt_max : float
        Upper bound on the step (time units; inf for none).
    dt : float, optional
        Fixed step of an implicit equation; for an explicit one an upper bound like
        ``dt_max``.

    See Also
    --------
    meanfield.pde.solver.solve : the controller that asks for the steps.
    meanfield.pde.schemes.Scheme.stable_dt : the positivity (CFL) bound.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> from meanfield.pde.stepper import Stepper
    >>> box = Box(1, 5.0)
    >>> g = Grid(box, 64)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], box), g, beta=2.0, scheme="sg")
    >>> rho = Density.uniform(g).data
    >>> stepper = Stepper(eq, safety=0.5)
    >>> plan = eq.prepare_step(rho)
    >>> bool(np.isclose(stepper.step_size(plan), 0.5 * plan.dt_stable))
    True
    >>> new, t, n = stepper.advance(rho, 0.0, 1.0, 1e-12, batch=False, budget=10)
    >>> n, bool(np.isclose(t, stepper.step_size(plan))), round(g.integrate(new), 12)
    (1, True, 1.0)
    >>> implicit = McKeanVlasov(Energy([QuadraticPotential()], box), g, 2.0, scheme="sg-implicit")
    >>> Stepper(implicit, dt=0.1).estimate_steps(rho, 1.0)  # a fixed step of 0.1
    10
    """

    def __init__(self, equation, *, safety: float = 0.5, dt_max: float = math.inf, dt=None):
        self.equation = equation
        self.safety = check_positive("safety", safety)
        if self.safety > 1:
            raise InputError(f"safety must be in (0, 1], got {safety}")
        self.dt_max = check_positive("dt_max", dt_max) if math.isfinite(dt_max) else math.inf
        self.fixed_dt = None
        if dt is not None:
            dt = check_positive("dt", dt)
            if equation.implicit:
                self.fixed_dt = dt
            else:
                self.dt_max = min(self.dt_max, dt)
        self.dt_min_taken, self.dt_max_taken = math.inf, -math.inf
        # (state before, size) of the last step of about the fixed dt: what step_error checks
        self._check_point = None
        self._plan = None
        # read once per solve: an equation is linear (or not) for the whole run
        self._linear = bool(equation.linear)
        self._batchable = self._linear and hasattr(equation, "advance_frozen")

    def _prepare(self, rho, t: float):
        if self._plan is not None:
            return self._plan  # a linear equation: the same map every step, computed once
        try:
            plan = self.equation.prepare_step(rho)
        except NumericalError as err:
            raise NumericalError(f"{err} at t={t:.6g}") from None
        if self._linear:
            # flows depend on ρ: a cached plan keeps only what is fixed (U, Δt_*)
            self._plan = plan = StepPlan(plan.U, None, None, plan.dt_stable)
        return plan

    def step_size(self, plan: StepPlan) -> float:
        """The unclipped step at this plan (may be inf when nothing limits it).

        Parameters
        ----------
        plan : StepPlan
            From the equation's ``prepare_step`` at the current state.

        Returns
        -------
        float
            ``min(safety · plan.dt_stable, dt_max)``, or ``min(dt, dt_max)`` for an implicit
            equation given a fixed ``dt`` (time units).

        See Also
        --------
        meanfield.pde.schemes.Scheme.stable_dt : the bound it scales.

        Examples
        --------
        >>> from meanfield.pde.stepper import StepPlan, Stepper
        >>> class Eq:
        ...     implicit, linear = False, False
        >>> plan = StepPlan(None, None, None, dt_stable=0.1)
        >>> Stepper(Eq(), safety=0.5).step_size(plan), Stepper(Eq(), dt_max=0.02).step_size(plan)
        (0.05, 0.02)
        """
        step = self.fixed_dt if self.fixed_dt is not None else self.safety * plan.dt_stable
        return min(step, self.dt_max)

    def estimate_steps(self, rho, duration: float) -> int:
        """Steps to cover ``duration`` at the step size of the initial state.

        Parameters
        ----------
        rho : array of shape ``grid.shape``
            The initial density.
        duration : float
            t1 − t0 (time units).

        Returns
        -------
        int
            ⌈duration / step⌉, or 1 when nothing limits the step.

        See Also
        --------
        meanfield.pde.solver.check_step_budget : the refusal it drives.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.pde.stepper import StepPlan, Stepper
        >>> class Eq:
        ...     implicit, linear = False, False
        ...     def prepare_step(self, rho):
        ...         return StepPlan(None, None, None, dt_stable=0.1)
        >>> Stepper(Eq(), safety=0.5).estimate_steps(np.ones(3), 1.0)  # steps of 0.05
        20
        """
        step = self.fixed_dt
        if step is None:
            step = self.step_size(self._prepare(rho, 0.0))
        return math.ceil(duration / step) if step > 0 and math.isfinite(step) else 1

    def _record(self, step: float) -> None:
        self.dt_min_taken = min(self.dt_min_taken, step)
        self.dt_max_taken = max(self.dt_max_taken, step)

    def advance(self, rho, t: float, target: float, tol: float, *, batch: bool, budget: int):
        """Advance from t toward ``target``: one step, or (``batch``, linear equation) every
        step up to ``target`` at once.

        Parameters
        ----------
        rho : array of shape ``grid.shape``
            The density at time ``t``.
        t, target : float
            The current time and the time to reach (a tracker time or the end).
        tol : float
            A step within ``tol`` of ``target`` is stretched to reach it exactly.
        batch : bool
            Allow the steps up to ``target`` in one call of ``advance_frozen``.
        budget : int
            The most steps this call may take.

        Returns
        -------
        rho : array of shape ``grid.shape``
        t : float
            The new time (``target`` exactly when the last step was shortened to reach it).
        n_steps : int
            Steps taken (≤ ``budget``; more needed raises :class:`StepBudgetError`).

        See Also
        --------
        meanfield.pde.solver.solve : the loop that calls it.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid, McKeanVlasov
        >>> from meanfield.pde.stepper import Stepper
        >>> g = Grid(Box(1, 5.0), 64)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], Box(1, 5.0)), g, 2.0, scheme="sg")
        >>> stepper = Stepper(eq, safety=0.5)
        >>> rho, t, n = stepper.advance(
        ...     Density.uniform(g).data, 0.0, 0.5, 1e-12, batch=True, budget=10_000
        ... )
        >>> t, n > 1, round(g.integrate(rho), 12)  # every step to 0.5 in one call
        (0.5, True, 1.0)
        """
        plan = self._prepare(rho, t)
        step = self.step_size(plan)
        if batch and self._batchable and math.isfinite(step):
            return self._advance_batch(rho, t, target, tol, budget, plan, step)
        if budget < 1:
            raise StepBudgetError(f"the step budget is exhausted at t={t:.6g}")
        clipped = not math.isfinite(step) or step >= target - t - tol
        if clipped:
            step = target - t
        if not step > 0:
            raise NumericalError(f"non-positive time step {step!r} at t={t:.6g}")
        self._keep(rho, step)
        rho = self.equation.advance(rho, step, plan)
        if not clipped:
            self._record(step)
        return rho, (target if clipped else t + step), 1

    def _keep(self, rho, step: float) -> None:
        """Remember the start of a step for :meth:`step_error` (fixed dt only): the latest
        step of at least half the fixed dt, or the only step there is."""
        if self.fixed_dt is not None and (self._check_point is None or step >= 0.5 * self.fixed_dt):
            self._check_point = (rho, step)

    def step_error(self) -> float | None:
        r"""Step-doubling estimate of the relative error of the last fixed step (implicit
        equations given ``dt``), or None when none was taken.

        From the state ρ before that step (size Δt), one step ρ_a and two of Δt/2, ρ_b:

        .. math::

            e = \frac{\lVert \rho_a - \rho_b \rVert_1}{(2^q - 1) \lVert \rho_a \rVert_1},

        q the scheme's order in time (Richardson: the error of ρ_b is about e; of ρ_a,
        2^q e).  It catches what the positivity of an implicit step hides: a step past the
        transient it should resolve, or (ρ-dependent potential, frozen over the step) a
        Picard lag, so the state labelled t is not ρ(t).  Costs three steps.

        Returns
        -------
        float or None

        See Also
        --------
        meanfield.errors.InaccurateStepWarning : warned when it is large.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid, McKeanVlasov
        >>> from meanfield.pde.stepper import Stepper
        >>> g = Grid(Box(1, 4.0), 64)
        >>> E = Energy([QuadraticPotential()], g.domain)
        >>> eq = McKeanVlasov(E, g, 1.0, scheme="sg-implicit")
        >>> rho = Density.gaussian(g, 1.0, 0.5).data
        >>> errors = []
        >>> for dt in (0.1, 0.05):
        ...     stepper = Stepper(eq, dt=dt)
        ...     _ = stepper.advance(rho, 0.0, 1.0, 1e-12, batch=False, budget=10)
        ...     errors.append(stepper.step_error())
        >>> [round(e, 4) for e in errors]  # a smaller step, a smaller error
        [0.017, 0.0075]
        """
        if self._check_point is None:
            return None
        rho, step = self._check_point
        eq = self.equation
        a = eq.advance(rho, step, self._prepare(rho, 0.0))
        b = eq.advance(rho, 0.5 * step, self._prepare(rho, 0.0))
        b = eq.advance(b, 0.5 * step, self._prepare(b, 0.0))
        q = getattr(getattr(eq, "scheme", None), "time_order", 1)
        grid = eq.grid
        return float(grid.integrate(np.abs(a - b)) / ((2**q - 1) * grid.integrate(np.abs(a))))

    def _advance_batch(self, rho, t, target, tol, budget, plan, step):
        """Every step of size ``step`` up to ``target`` in one ``advance_frozen`` call, the
        last one shortened to land on ``target``; returns (rho, target, steps taken)."""
        # the unclipped steps k = 1..n satisfy k step < target − t − tol, as in the loop
        n_full = max(0, math.ceil((target - t - tol) / step) - 1)
        if n_full + 1 > budget:
            raise StepBudgetError(f"the step budget is exhausted at t={t:.6g}")
        if n_full:
            self._record(step)
        last = max(target - (t + n_full * step), 0.0)
        if self.fixed_dt is not None and n_full:
            # stop before the last full step, for step_error (same steps, two calls)
            if n_full > 1:
                rho = self.equation.advance_frozen(rho, step, n_full - 1, plan, 0.0)
            self._keep(rho, step)
            rho = self.equation.advance_frozen(rho, step, 1, plan, last)
        else:
            if last > 0:
                self._keep(rho, last)
            rho = self.equation.advance_frozen(rho, step, n_full, plan, last)
        return rho, target, n_full + (last > 0)
