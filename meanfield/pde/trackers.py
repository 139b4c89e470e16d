"""Trackers: small objects the solver calls as time advances, in the manner of py-pde.

A tracker has an ``interval`` (model time between calls; 0 means every step, ``None`` only the
first and last state).  The solver shortens the time step so that every interval-based call
happens *exactly* at its time, so stored states line up with particle records.  A tracker may
stop the run by raising :class:`FinishedSimulation` (a steady state) or fail it by raising
:class:`DensityError` (the NaN/positivity guard), which carries the time and the cell.

Every recording tracker returns its records as an ``xarray.Dataset`` over ``time``.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from .._validation import check_positive
from ..errors import MeanfieldError


class FinishedSimulation(Exception):
    """Raised by a tracker to end the run early (not an error).

    See Also
    --------
    SteadyStateTracker : stops the run this way.
    meanfield.pde.solver.SolveResult.stop_reason : the message it carries.

    Examples
    --------
    The solver catches it and reports its message as the stop reason:

    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> box = Box(1, 3.0)
    >>> g = Grid(box, 32)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], box), g, 1.0, scheme="sg-implicit")
    >>> from meanfield.pde.trackers import FinishedSimulation, Tracker
    >>> class StopAtOne(Tracker):
    ...     def handle(self, state, t, equation):
    ...         if t >= 1.0:
    ...             raise FinishedSimulation(f"stopped at t={t:g}")
    >>> res = eq.solve(Density.uniform(g), 5.0, trackers=[StopAtOne(0.5)], dt=0.25)
    >>> res.stop_reason, res.t
    ('stopped at t=1', 1.0)
    """


class DensityError(MeanfieldError, FloatingPointError):
    """The density became non-finite, negative or lost mass: the run stops before storing it.

    See Also
    --------
    GuardTracker : raises it.
    meanfield.pde.field.check_density_values : the same checks on a density given.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.errors import MeanfieldError
    >>> from meanfield.pde import Density, Grid
    >>> from meanfield.pde.trackers import DensityError, GuardTracker
    >>> g = Grid(Box(1, 1.0), 4)
    >>> bad = Density(g, np.array([1.0, -0.5, 1.0, 1.0]), check=False)
    >>> try:
    ...     GuardTracker().initialize(bad, 0.0, None)
    ... except DensityError as err:
    ...     print(isinstance(err, MeanfieldError), str(err).split(" at ")[0])
    True the density became negative (-0.5)
    """


class Tracker:
    """Base class.

    Parameters
    ----------
    interval : float or None
        Model time between calls (> 0), 0 for every step, None for the start and end only.

    See Also
    --------
    meanfield.pde.solver.solve : calls the trackers.
    StorageTracker, FreeEnergyTracker, MassTracker : the recording trackers.
    SteadyStateTracker, GuardTracker, ProgressTracker : stop, check, show progress.

    Notes
    -----
    An interval tracker started at t₀ is called at the times t₀ + k · interval, k = 0, 1, …

    References
    ----------
    - D. Zwicker, "py-pde: A Python package for solving partial differential equations", J. Open
      Source Softw. 5 (2020) 2158.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.pde import Density, Grid
    >>> from meanfield.pde.trackers import Tracker
    >>> class Times(Tracker):
    ...     def __init__(self, interval):
    ...         super().__init__(interval)
    ...         self.seen = []
    ...     def handle(self, state, t, equation):
    ...         self.seen.append(t)
    >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
    >>> tr = Times(0.25)
    >>> tr.initialize(rho, 0.0, None)
    >>> tr.next_time
    0.25
    >>> for t in (0.1, 0.25, 0.3, 0.6):
    ...     tr.step(rho, t, None)
    >>> tr.seen, tr.next_time  # called when a scheduled time is reached or passed
    ([0.0, 0.25, 0.6], 0.75)
    """

    def __init__(self, interval: float | None = None):
        if interval is not None:
            interval = check_positive("interval", interval, allow_zero=True)
        self.interval = interval
        self._next = math.inf
        self.t_end = None  # set by the solver before ``initialize``

    # the solver's interface -------------------------------------------------------------------
    def initialize(self, state, t: float, equation) -> None:
        """Called once by the solver at the start: schedule the first call and handle ``state``.

        Parameters
        ----------
        state : Density
            The initial density.
        t : float
            The initial time t₀.
        equation : McKeanVlasov or None
            The equation being solved (trackers that do not read it accept None).

        See Also
        --------
        step, finalize

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde import Density, Grid
        >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
        >>> mt = MassTracker(0.5)
        >>> mt.initialize(rho, 0.0, None)  # records t = 0 and schedules t = 0.5
        >>> mt.times, mt.next_time
        ([0.0], 0.5)
        """
        self._t0 = t
        self._k = 0
        self._schedule(t)
        self.handle(state, t, equation)

    def _schedule(self, t):
        """Advance :attr:`next_time` to the next multiple of ``interval`` (inf without one)."""
        if self.interval is None or self.interval == 0:
            self._next = math.inf
        else:
            self._k += 1
            self._next = self._t0 + self._k * self.interval

    @property
    def next_time(self) -> float:
        """The next model time at which the tracker wants a call (inf: no fixed time).

        See Also
        --------
        due

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde import Density, Grid
        >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
        >>> tr, every_step = Tracker(0.25), Tracker(0)
        >>> tr.initialize(rho, 1.0, None)
        >>> every_step.initialize(rho, 1.0, None)
        >>> tr.next_time, every_step.next_time
        (1.25, inf)
        """
        return self._next

    def due(self, t: float, tol: float) -> bool:
        """Whether the tracker wants a call at time ``t``.

        Parameters
        ----------
        t : float
            The current time.
        tol : float
            Time tolerance: a call scheduled at most ``tol`` after ``t`` is due.

        Returns
        -------
        bool
            True every step for ``interval`` 0, else when ``t`` reached :attr:`next_time`.

        See Also
        --------
        next_time, step

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde import Density, Grid
        >>> tr = Tracker(0.5)
        >>> tr.initialize(Density.uniform(Grid(Box(1, 1.0), 4)), 0.0, None)
        >>> tr.due(0.4, 1e-9), tr.due(0.5 - 1e-12, 1e-9)
        (False, True)
        """
        return self.interval == 0 or t >= self._next - tol

    def step(self, state, t: float, equation) -> None:
        """Called by the solver after every step; calls :meth:`handle` when due.

        Parameters
        ----------
        state, t, equation
            As in :meth:`initialize`, at the end of the step.

        See Also
        --------
        handle, due

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde import Density, Grid
        >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
        >>> mt = MassTracker(0.5)
        >>> mt.initialize(rho, 0.0, None)
        >>> for t in (0.2, 0.5, 0.7):
        ...     mt.step(rho, t, None)
        >>> mt.times
        [0.0, 0.5]
        """
        tol = 1e-9 * max(1.0, abs(t))
        if self.due(t, tol):
            while self._next <= t + tol:
                self._schedule(t)
            self.handle(state, t, equation)

    def handle(self, state, t: float, equation) -> None:
        """Record or check ``state`` at time ``t`` (the base class does nothing).

        Parameters
        ----------
        state, t, equation
            As in :meth:`initialize`.

        Raises
        ------
        FinishedSimulation
            To end the run early (a steady state).
        DensityError
            When the state is invalid (the guard).

        See Also
        --------
        step : calls it when due.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde import Density, Grid
        >>> mt = MassTracker()
        >>> mt.handle(Density.uniform(Grid(Box(1, 1.0), 4)), 0.3, None)
        >>> mt.times, mt.mass
        ([0.3], [1.0])
        """

    def finalize(self, state, t: float, equation) -> None:
        """Called once at the end (also after an early stop); recorders record the last state.

        Parameters
        ----------
        state, t, equation
            As in :meth:`initialize`, at the final time.

        See Also
        --------
        initialize, to_dataset

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde import Density, Grid
        >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
        >>> mt = MassTracker(1.0)
        >>> mt.initialize(rho, 0.0, None)
        >>> mt.finalize(rho, 0.4, None)
        >>> mt.times
        [0.0, 0.4]
        """

    def to_dataset(self) -> xr.Dataset | None:
        """The records as a dataset over ``time`` (None for a tracker that records nothing).

        See Also
        --------
        meanfield.pde.solver.SolveResult.dataset : every tracker's merged.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde import Density, Grid
        >>> mt = MassTracker()
        >>> mt.handle(Density.uniform(Grid(Box(1, 1.0), 4)), 0.0, None)
        >>> Tracker().to_dataset() is None, mt.to_dataset()["mass"].values
        (True, array([1.]))
        """
        return None


class _Recorder(Tracker):
    """A tracker that records at its times and always records the last state."""

    def __init__(self, interval=None):
        super().__init__(interval)
        self.times: list = []

    def finalize(self, state, t, equation):
        # the last state is always recorded (once)
        if not self.times or abs(self.times[-1] - t) > 1e-12 * max(1.0, abs(t)):
            self.handle(state, t, equation)


class ProgressTracker(Tracker):
    """A tqdm progress bar over model time.

    Parameters
    ----------
    desc : str
        Label of the bar.

    See Also
    --------
    meanfield.pde.solver.solve : adds one with ``progress=True``.
    Tracker : the tracker protocol.

    Examples
    --------
    ``solve(..., progress=True)`` appends one; it is called every step (``interval`` 0) and
    writes the bar to standard error:

    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> box = Box(1, 3.0)
    >>> g = Grid(box, 32)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], box), g, 1.0, scheme="sg-implicit")
    >>> from meanfield.pde.trackers import ProgressTracker
    >>> ProgressTracker(desc="relax").interval
    0.0
    >>> res = eq.solve(Density.uniform(g), 1.0, dt=0.5, progress=True)
    >>> type(res.trackers[-1]).__name__
    'ProgressTracker'
    """

    def __init__(self, desc: str = "solve"):
        super().__init__(0)
        self.desc = desc

    def initialize(self, state, t, equation):
        super().initialize(state, t, equation)
        self._last = t

    def handle(self, state, t, equation):
        if not hasattr(self, "bar"):
            total = None if self.t_end is None else self.t_end - t
            self.bar = tqdm(
                total=total,
                desc=self.desc,
                unit="time",
                bar_format="{l_bar}{bar}| {n:.3g}/{total:.3g} [{elapsed}<{remaining}]",
            )
            return
        self.bar.update(t - self._last)
        self._last = t

    def finalize(self, state, t, equation):
        if hasattr(self, "bar"):
            self.bar.close()


class StorageTracker(_Recorder):
    """Stores copies of the density every ``interval`` (and the first and last state).

    Parameters
    ----------
    interval : float or None
        Model time between stored states.

    See Also
    --------
    meanfield.pde.solver.SolveResult.dataset : the stored states merged.
    meanfield.ot.measure.Measure.from_density : a stored state in the transport view.
    meanfield.dynamics.langevin.simulate : the particle view's records.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> box = Box(1, 3.0)
    >>> g = Grid(box, 32)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], box), g, 1.0, scheme="sg-implicit")
    >>> from meanfield.pde.trackers import StorageTracker
    >>> store = StorageTracker(0.5)
    >>> res = eq.solve(Density.gaussian(g, 1.0, 0.5), 1.2, trackers=[store], dt=0.1)
    >>> ds = store.to_dataset()
    >>> ds["rho"].dims, ds["time"].values.round(6).tolist()  # the last state is kept too
    (('time', 'x'), [0.0, 0.5, 1.0, 1.2])
    """

    def __init__(self, interval: float | None = None):
        super().__init__(interval)
        self.data: list = []
        self.grid = None

    def handle(self, state, t, equation):
        self.grid = state.grid
        self.times.append(float(t))
        self.data.append(state.data.copy())

    def to_dataset(self) -> xr.Dataset:
        g = self.grid
        da = xr.DataArray(
            np.stack(self.data),
            dims=("time", *g.axis_names),
            coords={"time": np.asarray(self.times), **g.coords},
            attrs={"long_name": "density rho (cell average)"},
        )
        return xr.Dataset({"rho": da})


class FreeEnergyTracker(_Recorder):
    r"""Records F_β = E + β⁻¹ ∫ρ log ρ, the entropy term and every energy term.

    .. math::

        F_\beta(\rho) = E_h(\rho) + \beta^{-1} \sum_i |C|\, \rho_i \log \rho_i.

    Parameters
    ----------
    interval : float or None
        Model time between records.

    See Also
    --------
    meanfield.pde.potential.GridEnergy.free_energy_terms : the values recorded.
    meanfield.pde.stationary.gibbs_state : the minimiser F_β decays to.
    meanfield.energy.Energy.term_values : the particle view's terms.

    References
    ----------
    - J. A. Carrillo, R. J. McCann, C. Villani, "Kinetic equilibration rates for granular media and
      related equations", Rev. Mat. Iberoamericana 19 (2003) 971–1018.
    - R. Jordan, D. Kinderlehrer, F. Otto, "The variational formulation of the Fokker–Planck
      equation", SIAM J. Math. Anal. 29 (1998) 1–17.
    - J. A. Carrillo, A. Chertock, Y. Huang, "A finite-volume method for nonlinear nonlocal
      equations with a gradient flow structure", Commun. Comput. Phys. 17 (2015) 233–258.

    Examples
    --------
    F_β decreases along the flow to its Gibbs value −log Z, Z = ∫ e^(−βV)
    (V = x²/2, β = 1 on [−3, 3]: Z = √(2π) erf(3/√2)):

    >>> import math
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> box = Box(1, 3.0)
    >>> g = Grid(box, 32)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], box), g, 1.0, scheme="sg-implicit")
    >>> from meanfield.pde.trackers import FreeEnergyTracker
    >>> fe = FreeEnergyTracker(1.0)
    >>> res = eq.solve(Density.gaussian(g, 1.0, 0.5), 20.0, trackers=[fe], dt=0.1)
    >>> F = fe.to_dataset()["free_energy"].values
    >>> bool(np.all(np.diff(F) <= 1e-12))
    True
    >>> Z = math.sqrt(2 * math.pi) * math.erf(3 / math.sqrt(2))
    >>> round(float(F[-1]), 3), round(-math.log(Z), 3)
    (-0.916, -0.916)
    """

    def __init__(self, interval: float | None = None):
        super().__init__(interval)
        self.records: dict = {}

    def handle(self, state, t, equation):
        self.times.append(float(t))
        for k, v in equation.free_energy_terms(state.data).items():
            self.records.setdefault(k, []).append(v)

    def to_dataset(self) -> xr.Dataset:
        out = {}
        for k, v in self.records.items():
            name = k if k in ("free_energy", "energy", "entropy") else f"energy_{k}"
            out[name] = ("time", np.asarray(v))
        ds = xr.Dataset(out, coords={"time": np.asarray(self.times)})
        ds["free_energy"].attrs["long_name"] = "discrete free energy F_beta = E + entropy/beta"
        ds["entropy"].attrs["long_name"] = "entropy term (1/beta) sum |C| rho log rho"
        return ds


class MassTracker(_Recorder):
    """Records the mass Σ ρ |C| and the minimum density.

    Parameters
    ----------
    interval : float or None
        Model time between records.

    See Also
    --------
    GuardTracker : refuses a mass drift instead of recording it.
    meanfield.pde.field.Density.mass : the mass recorded.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> box = Box(1, 3.0)
    >>> g = Grid(box, 32)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], box), g, 1.0, scheme="sg-implicit")
    >>> from meanfield.pde.trackers import MassTracker
    >>> mt = MassTracker(0.5)
    >>> res = eq.solve(Density.gaussian(g, 1.0, 0.5), 1.0, trackers=[mt], dt=0.1)
    >>> ds = mt.to_dataset()
    >>> ds["mass"].values.round(12).tolist(), bool((ds["min_density"] > 0).all())
    ([1.0, 1.0, 1.0], True)
    """

    def __init__(self, interval: float | None = None):
        super().__init__(interval)
        self.mass: list = []
        self.min_density: list = []

    def handle(self, state, t, equation):
        self.times.append(float(t))
        self.mass.append(state.mass)
        self.min_density.append(float(state.data.min()))

    def to_dataset(self) -> xr.Dataset:
        return xr.Dataset(
            {
                "mass": ("time", np.asarray(self.mass)),
                "min_density": ("time", np.asarray(self.min_density)),
            },
            coords={"time": np.asarray(self.times)},
        )


class SteadyStateTracker(Tracker):
    """Stops the run when max_i |ρ_i(t) − ρ_i(t − interval)| / interval ≤ atol + rtol max ρ.

    Parameters
    ----------
    interval : float
        Time between comparisons (> 0).
    atol, rtol : float
        Absolute (density / time) and relative (1 / time) tolerances on the rate of change.

    See Also
    --------
    FinishedSimulation : how it stops the run.
    meanfield.pde.stationary.gibbs_state : the stationary state directly, by fixed point.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> box = Box(1, 3.0)
    >>> g = Grid(box, 32)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], box), g, 1.0, scheme="sg-implicit")
    >>> from meanfield.pde.trackers import SteadyStateTracker
    >>> ss = SteadyStateTracker(1.0, atol=1e-6, rtol=0.0)
    >>> res = eq.solve(Density.gaussian(g, 1.0, 0.5), 50.0, trackers=[ss], dt=0.05)
    >>> res.stop_reason.startswith("steady state"), res.t == ss.reached_at < 50.0
    (True, True)
    >>> ss.last_rate <= 1e-6
    True
    """

    def __init__(self, interval: float = 1.0, atol: float = 1e-10, rtol: float = 1e-10):
        super().__init__(check_positive("interval", interval))
        self.atol = check_positive("atol", atol, allow_zero=True)
        self.rtol = check_positive("rtol", rtol, allow_zero=True)
        self._prev = None
        self.reached_at = None
        self.last_rate = math.inf

    def handle(self, state, t, equation):
        if self._prev is not None:
            t0, rho0 = self._prev
            self.last_rate = float(np.max(np.abs(state.data - rho0))) / (t - t0)
            if self.last_rate <= self.atol + self.rtol * float(state.data.max()):
                self.reached_at = t
                raise FinishedSimulation(
                    f"steady state at t={t:.6g} (max |d rho/dt| = {self.last_rate:.3g})"
                )
        self._prev = (t, state.data.copy())


class GuardTracker(Tracker):
    """Checks every step that ρ is finite, ≥ 0 and keeps its mass; raises DensityError if not.

    Parameters
    ----------
    mass_rtol : float
        Allowed relative drift of the mass from its initial value (the schemes conserve it to
        round-off, about 1e-15 per step).

    See Also
    --------
    DensityError : what it raises.
    MassTracker : records the mass instead.
    meanfield.pde.solver.solve : prepends one unless ``guard=False``.

    Examples
    --------
    :func:`~meanfield.pde.solver.solve` prepends one unless told not to (``guard=False``):

    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde import Density, Grid
    >>> from meanfield.pde.trackers import DensityError, GuardTracker
    >>> g = Grid(Box(1, 1.0), 4)
    >>> guard = GuardTracker(mass_rtol=1e-9)
    >>> guard.initialize(Density.uniform(g), 0.0, None)  # mass 1 recorded
    >>> half = Density(g, np.full(4, 0.25))
    >>> try:
    ...     guard.step(half, 0.1, None)
    ... except DensityError as err:
    ...     print(str(err)[:36])
    the mass drifted from 1 to 0.5 at t=
    """

    def __init__(self, mass_rtol: float = 1e-9):
        super().__init__(0)
        self.mass_rtol = check_positive("mass_rtol", mass_rtol)
        self._mass0 = None
        self._steps = 0

    def handle(self, state, t, equation):
        rho = state.data
        total = float(rho.sum())
        # one sum answers "all finite?" unless it overflowed or hit a NaN: then look cell by cell
        if not math.isfinite(total) and not np.all(np.isfinite(rho)):
            bad = np.argwhere(~np.isfinite(rho))[0]
            raise DensityError(
                f"the density became non-finite at t={t:.6g} (step {self._steps}), first in "
                f"cell {tuple(int(i) for i in bad)}: lower the safety factor, refine the grid, "
                "or soften the kernel"
            )
        if rho.min() < 0:
            bad = np.unravel_index(int(np.argmin(rho)), rho.shape)
            raise DensityError(
                f"the density became negative ({rho[bad]:.3g}) at t={t:.6g} (step {self._steps}) "
                f"in cell {bad}: the time step exceeded the positivity (CFL) bound"
            )
        m = total * state.grid.cell_volume
        if self._mass0 is None:
            self._mass0 = m
        elif abs(m - self._mass0) > self.mass_rtol * abs(self._mass0):
            raise DensityError(
                f"the mass drifted from {self._mass0:.15g} to {m:.15g} at t={t:.6g} "
                f"(step {self._steps}); relative tolerance {self.mass_rtol:g}"
            )
        self._steps += 1
