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
from .field import Density
from .flux import Scheme, make_scheme
from .grid import Grid
from .potential import GridEnergy


class McKeanVlasov:
    """∂_t ρ = ∇·(ρ∇U[ρ]) + β⁻¹Δρ with U = δE/δρ, on a grid with no-flux walls.

    Parameters
    ----------
    energy : Energy
        The model; its domain must be the grid's box.
    grid : Grid
        p ∈ {1, 2, 3}.
    beta : float
        Inverse temperature β > 0 (finite; use :func:`~meanfield.pde.stationary.equilibrium_measure`
        for β = inf).
    scheme : {"upwind", "sg", "sg-implicit", "chang-cooper"} or Scheme
        Flux scheme (see :mod:`meanfield.pde.flux`).
    order : {1, 2}
        Order of the upwind reconstruction.
    workers : int, optional
        Threads for the FFTs.
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

    # --- the right-hand side ------------------------------------------------------------------
    def _values(self, state) -> np.ndarray:
        if isinstance(state, Density):
            if state.grid != self.grid:
                raise ValueError(
                    f"the density lives on {state.grid!r}, the equation on {self.grid!r}"
                )
            return state.data
        return np.asarray(state, dtype=float)

    def potential(self, state) -> np.ndarray:
        """U = δE/δρ at the cell centres, shape ``grid.shape``."""
        return self.grid_energy.potential(self._values(state))

    def evolution_rate(self, state) -> np.ndarray:
        """dρ/dt of the semi-discrete scheme, shape ``grid.shape``."""
        rho = self._values(state)
        return self.scheme.rate(rho, self.grid_energy.potential(rho), self.grid, self.beta)

    def stable_dt(self, state) -> float:
        """The largest time step the scheme allows at this state (before the safety factor)."""
        rho = self._values(state)
        U = self.grid_energy.potential(rho)
        stiff = self.grid_energy.pair_stiffness * float(rho.max())
        return self.scheme.stable_dt(rho, U, self.grid, self.beta, None, stiff)

    def free_energy_terms(self, state) -> dict:
        """Discrete F_β and its parts (see :meth:`GridEnergy.free_energy_terms`)."""
        return self.grid_energy.free_energy_terms(self._values(state), self.beta)

    def free_energy(self, state) -> float:
        return self.free_energy_terms(state)["free_energy"]

    def solve(self, state: Density, t_range, **kwargs):
        """Evolve ``state`` over ``t_range``; see :func:`meanfield.pde.solver.solve`."""
        from .solver import solve

        return solve(self, state, t_range, **kwargs)

    def describe(self) -> dict:
        out = {"beta": self.beta, **self.scheme.describe(), **self.grid.describe()}
        out.update(self.energy.describe())
        return out

    def __repr__(self) -> str:
        b = "inf" if math.isinf(self.beta) else f"{self.beta:g}"
        return f"McKeanVlasov(grid={self.grid!r}, beta={b}, scheme={self.scheme.name!r})"
