"""The McKean–Vlasov equation of an :class:`~meanfield.energy.Energy` on a grid (THEORY §4).

    ∂_t ρ = ∇·( ρ ∇ δE/δρ[ρ] ) + β⁻¹ Δρ   on the box, no flux through its faces.

:class:`McKeanVlasov` ties together the energy on the grid
(:class:`~meanfield.pde.potential.GridEnergy`), a flux scheme (:mod:`meanfield.pde.flux`) and
the solver (:func:`meanfield.pde.solver.solve`), in the manner of a py-pde ``PDE`` object::

    eq = McKeanVlasov(energy, grid, beta=10.0)
    result = eq.solve(Density.gaussian(grid, 0.0, 0.5), t_range=2.0,
                      trackers=[StorageTracker(0.1), FreeEnergyTracker(0.1)])
    ds = result.dataset()

Time is the particles' time t = η · steps (THEORY §3), so a grid solution at time t is compared
with the particles after t/η Langevin steps in the mean-field regime (β_N = β).
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_positive
from ..energy import Energy
from ..errors import NumericalError
from .field import Density
from .flux import Scheme, make_scheme
from .grid import Grid
from .potential import GridEnergy
from .solver import solve
from .stepper import StepPlan


class McKeanVlasov:
    r"""∂_t ρ = ∇·(ρ∇U[ρ]) + β⁻¹Δρ with U = δE/δρ, on a grid with no-flux walls.

    Parameters
    ----------
    energy : Energy
        The model; its domain must be the grid's box.
    grid : Grid
        p ∈ {1, 2, 3}.
    beta : float
        Inverse temperature β > 0 (finite; use :func:`~meanfield.pde.stationary.equilibrium_measure`
        for β = inf).
    scheme : {"upwind", "sg", "sg-implicit", "chang-cooper", "sg-mprk22"} or Scheme
        Flux scheme (see :mod:`meanfield.pde.flux`); ``sg-mprk22`` is the implicit scheme
        of second order in time.
    order : {1, 2}
        Order of the upwind reconstruction.
    workers : int, optional
        Threads for the FFTs.

    Notes
    -----
    .. math::

        \partial_t \rho = \nabla \cdot \left(\rho\, \nabla \frac{\delta E}{\delta \rho}[\rho]\right)
        + \beta^{-1} \Delta \rho, \qquad
        \rho_\infty \propto e^{-\beta V} \text{ for } E(\rho) = \int V\, d\rho.

    Examples
    --------
    For V = x²/2 (an Ornstein–Uhlenbeck process) the discrete Gibbs state ρ ∝ e^(−βV) is
    steady under the SG scheme, and the mean decays as e^(−t):

    >>> import math
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid, McKeanVlasov
    >>> box = Box(1, 5.0)
    >>> g = Grid(box, 64)
    >>> eq = McKeanVlasov(Energy([QuadraticPotential()], box), g, beta=2.0, scheme="sg")
    >>> eq.linear, eq.implicit
    (True, False)
    >>> gibbs = Density.from_function(g, lambda x: np.exp(-(x[:, 0] ** 2)))  # e^(-beta x^2/2)
    >>> bool(np.abs(eq.evolution_rate(gibbs)).max() < 1e-12)
    True
    >>> eq.operator(gibbs).shape
    (64, 64)
    >>> res = eq.solve(Density.gaussian(g, 1.0, 0.5), 1.0)
    >>> round(float(res.state.mean()[0]), 2), round(math.exp(-1), 2)
    (0.37, 0.37)
    """

    def __init__(
        self,
        energy: Energy,
        grid: Grid,
        beta: float,
        *,
        scheme="upwind",
        order: int = 2,
        workers: int | None = None,
    ):
        self.beta = check_positive("beta (inverse temperature)", beta)
        self.grid_energy = GridEnergy(energy, grid, workers=workers)
        self.energy, self.grid = energy, grid
        self.scheme: Scheme = (
            scheme if isinstance(scheme, Scheme) else make_scheme(scheme, order=order)
        )
        self._fixed_potential = None
        self._linear = hasattr(self.scheme, "advance_frozen") and not (
            self.grid_energy.depends_on_density
        )

    # --- the right-hand side ------------------------------------------------------------------
    def _values(self, state) -> np.ndarray:
        if isinstance(state, Density):
            if state.grid != self.grid:
                raise ValueError(
                    f"the density lives on {state.grid!r}, the equation on {self.grid!r}"
                )
            return state.data
        return np.asarray(state, dtype=float)

    @property
    def implicit(self) -> bool:
        """True if the scheme's step is implicit (positive for every Δt)."""
        return self.scheme.implicit

    @property
    def linear(self) -> bool:
        """True if every step is the same linear map of ρ: SG fluxes (linear in ρ) of a
        potential that does not depend on ρ (one-body terms only)."""
        return self._linear

    def potential(self, state) -> np.ndarray:
        """U = δE/δρ at the cell centres, shape ``grid.shape`` (a new array)."""
        U = self._potential(self._values(state))
        return U.copy() if U is self._fixed_potential else U

    def _potential(self, rho) -> np.ndarray:
        if not self.grid_energy.depends_on_density:
            # one read-only object for every step: the schemes cache their face rates per U
            if self._fixed_potential is None:
                self._fixed_potential = self.grid_energy.potential(rho)
                self._fixed_potential.flags.writeable = False
            return self._fixed_potential
        return self.grid_energy.potential(rho)

    def evolution_rate(self, state) -> np.ndarray:
        """dρ/dt of the semi-discrete scheme, shape ``grid.shape``."""
        rho = self._values(state)
        return self.scheme.rate(rho, self._potential(rho), self.grid, self.beta)

    def operator(self, state):
        """The generator A at ρ (sparse CSC, M × M; C-order cells): dρ/dt = A ρ with U frozen
        at ρ, and the implicit schemes solve (I − Δt A) ρⁿ⁺¹ = ρⁿ.

        Raises
        ------
        TypeError
            The upwind scheme, whose flux depends on log ρ, has no such linear operator.
        """
        if not hasattr(self.scheme, "matrix"):
            raise TypeError(
                f"the {self.scheme.name!r} scheme has no linear operator (its flux depends on "
                "log rho); use scheme='sg', 'sg-implicit' or 'sg-mprk22'"
            )
        rho = self._values(state)
        return self.scheme.matrix(self._potential(rho), self.grid, self.beta)

    def prepare_step(self, rho) -> StepPlan:
        """U, the explicit fluxes and the stable step at ρ (what one step needs).

        Raises
        ------
        NumericalError
            U is NaN or infinite somewhere.
        """
        rho = self._values(rho)
        U = self._potential(rho)
        # one sum answers "all finite?" unless it overflowed: then look cell by cell
        if not math.isfinite(float(U.sum())) and not np.all(np.isfinite(U)):
            raise NumericalError("the potential dE/drho became non-finite")
        if self.linear:  # no pair term (stiffness 0); the flows are recomputed per step
            return StepPlan(U, None, None, self.scheme.stable_dt(rho, U, self.grid, self.beta))
        stiff = self.grid_energy.pair_stiffness * float(rho.max())
        out, inn, dt_stable = self.scheme.prepare(rho, U, self.grid, self.beta, stiff)
        return StepPlan(U, out, inn, dt_stable)

    def advance(self, rho, dt: float, plan: StepPlan) -> np.ndarray:
        """One step of size ``dt`` from ρ with the plan of :meth:`prepare_step` at ρ."""
        if self.scheme.needs_potential and self.grid_energy.depends_on_density:
            return self.scheme.advance(
                rho, plan.U, self.grid, self.beta, dt, plan.out, plan.inn, potential=self._potential
            )
        return self.scheme.advance(rho, plan.U, self.grid, self.beta, dt, plan.out, plan.inn)

    def advance_frozen(
        self, rho, dt: float, n_steps: int, plan: StepPlan, last: float = 0.0
    ) -> np.ndarray:
        """``n_steps`` steps of size ``dt`` of a :attr:`linear` equation, then one of size
        ``last`` if > 0 (one call)."""
        if not self.linear:
            raise ValueError("advance_frozen needs a linear equation (see McKeanVlasov.linear)")
        return self.scheme.advance_frozen(rho, plan.U, self.grid, self.beta, dt, n_steps, last)

    def stable_dt(self, state) -> float:
        """The largest time step the scheme allows at this state (before the safety factor)."""
        return self.prepare_step(self._values(state)).dt_stable

    def free_energy_terms(self, state) -> dict:
        """Discrete F_β and its parts (see :meth:`GridEnergy.free_energy_terms`)."""
        return self.grid_energy.free_energy_terms(self._values(state), self.beta)

    def free_energy(self, state) -> float:
        return self.free_energy_terms(state)["free_energy"]

    def solve(self, state: Density, t_range, **kwargs):
        """Evolve ``state`` over ``t_range``; see :func:`meanfield.pde.solver.solve`."""
        return solve(self, state, t_range, **kwargs)

    def describe(self) -> dict:
        """Every parameter as plain types (for dataset attributes)."""
        out = {"beta": self.beta, **self.scheme.describe(), **self.grid.describe()}
        out.update(self.energy.describe())
        return out

    def __repr__(self) -> str:
        b = "inf" if math.isinf(self.beta) else f"{self.beta:g}"
        return f"McKeanVlasov(grid={self.grid!r}, beta={b}, scheme={self.scheme.name!r})"
