"""The McKean–Vlasov equation of an :class:`~meanfield.energy.Energy` on a grid (THEORY §4).

    ∂_t ρ = ∇·( ρ ∇ δE/δρ[ρ] ) + β⁻¹ Δρ   on the box, no flux through its faces.

:class:`McKeanVlasov` ties together the energy on the grid
(:class:`~meanfield.pde.potential.GridEnergy`), a flux scheme (:mod:`meanfield.pde.schemes`) and
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

from .._resources import check_grid_memory
from .._validation import check_positive
from ..energy import Energy
from ..errors import InputError, InputTypeError, NumericalError
from .field import Density
from .grid import Grid
from .potential import GridEnergy
from .schemes import Scheme, make_scheme
from .solver import solve
from .stepper import StepPlan


def _count_pair_terms(energy) -> int:
    """Pair terms of ``energy`` (each costs an FFT convolution on the grid)."""
    return sum(getattr(t, "kind", None) == "pair" for t in getattr(energy, "terms", ()))


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
    scheme : str or Scheme
        Flux scheme, a name of :data:`~meanfield.pde.schemes.SCHEMES` ("upwind", "sg",
        "sg-implicit", "chang-cooper", "sg-mprk22", "sg-mprk22-split") or a Scheme object
        (see :mod:`meanfield.pde.schemes`); ``sg-mprk22`` is the implicit scheme
        of second order in time.  Bound here, once, to ``grid`` and ``beta``
        (:meth:`~meanfield.pde.schemes.Scheme.bind`: a bound copy, :attr:`scheme`; a given
        Scheme object is left unbound).
    order : {1, 2}
        Order of the upwind reconstruction.
    workers : int, optional
        Threads for the FFTs.

    Raises
    ------
    meanfield.errors.SizeLimitError
        The grid's estimated memory (:func:`meanfield._resources.grid_bytes`) exceeds the
        memory available, checked before anything is allocated.

    See Also
    --------
    meanfield.pde.solver.solve : the time loop and the trackers.
    meanfield.pde.stationary.gibbs_state : the stationary state ρ_β the flow relaxes to.
    meanfield.pde.schemes.make_scheme : the flux schemes.
    meanfield.dynamics.langevin.simulate : the particle view (projected Langevin on H_N).
    meanfield.ot.distance.wasserstein : the transport view (particles against grid densities).
    meanfield.energy.Energy : the one definition of the model the views read.

    Notes
    -----
    .. math::

        \partial_t \rho = \nabla \cdot \left(\rho\, \nabla \frac{\delta E}{\delta \rho}[\rho]\right)
        + \beta^{-1} \Delta \rho, \qquad
        \rho_\infty \propto e^{-\beta V} \text{ for } E(\rho) = \int V\, d\rho.

    References
    ----------
    - H. P. McKean, "A class of Markov processes associated with nonlinear parabolic equations",
      Proc. Natl. Acad. Sci. USA 56 (1966) 1907–1911.
    - R. Jordan, D. Kinderlehrer, F. Otto, "The variational formulation of the Fokker–Planck
      equation", SIAM J. Math. Anal. 29 (1998) 1–17.
    - J. A. Carrillo, R. J. McCann, C. Villani, "Kinetic equilibration rates for granular media and
      related equations", Rev. Mat. Iberoamericana 19 (2003) 971–1018.
    - J. A. Carrillo, A. Chertock, Y. Huang, "A finite-volume method for nonlinear nonlocal
      equations with a gradient flow structure", Commun. Comput. Phys. 17 (2015) 233–258.
    - D. L. Scharfetter, H. K. Gummel, "Large-signal analysis of a silicon Read diode oscillator",
      IEEE Trans. Electron Devices 16 (1969) 64–77.

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
    >>> round(float(res.state.mean[0]), 2), round(math.exp(-1), 2)
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
        if isinstance(grid, Grid):  # a size far out of reach: refused before allocating
            check_grid_memory(
                "grid (cells per axis n)",
                grid.n,
                pair_terms=_count_pair_terms(energy),
                scheme=scheme.name if isinstance(scheme, Scheme) else str(scheme),
            )
        self.grid_energy = GridEnergy(energy, grid, workers=workers)
        self.energy, self.grid = energy, grid
        if not isinstance(scheme, Scheme):
            scheme = make_scheme(scheme, order=order)
        # bound once to (grid, beta): every step below passes the state alone
        self.scheme: Scheme = scheme.bind(grid, self.beta)
        self._fixed_potential = None
        self._linear = hasattr(self.scheme, "advance_frozen") and not (
            self.grid_energy.depends_on_density
        )

    # --- the right-hand side ------------------------------------------------------------------
    def _values(self, state) -> np.ndarray:
        """The cell values of ``state`` (a Density on this grid, or an array) as floats."""
        if isinstance(state, Density):
            if state.grid != self.grid:
                raise InputError(
                    f"the density lives on {state.grid!r}, the equation on {self.grid!r}"
                )
            return state.data
        return np.asarray(state, dtype=float)

    @property
    def implicit(self) -> bool:
        """True if the scheme's step is implicit (positive for every Δt).

        See Also
        --------
        meanfield.pde.schemes.Scheme.implicit : the scheme's flag.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> energy = Energy([QuadraticPotential()], g.domain)
        >>> [McKeanVlasov(energy, g, 1.0, scheme=s).implicit for s in ("sg", "sg-implicit")]
        [False, True]
        """
        return self.scheme.implicit

    @property
    def linear(self) -> bool:
        """True if every step is the same linear map of ρ.

        That holds for SG fluxes (linear in ρ) of a potential that does not depend on ρ
        (one-body terms only); :meth:`advance_frozen` then takes many steps in one call.

        See Also
        --------
        advance_frozen : the batched steps a linear equation allows.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> energy = Energy([QuadraticPotential()], g.domain)
        >>> [McKeanVlasov(energy, g, 1.0, scheme=s).linear for s in ("upwind", "sg")]
        [False, True]
        """
        return self._linear

    def potential(self, state) -> np.ndarray:
        """U = δE/δρ at the cell centres (a new array).

        Parameters
        ----------
        state : Density or array_like, shape ``grid.shape``
            The density ρ.

        Returns
        -------
        numpy.ndarray, shape ``grid.shape``

        See Also
        --------
        meanfield.pde.potential.GridEnergy.potential : the computation.
        meanfield.energy.Energy.first_variation : the particle view's δE/δμ.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> eq.potential(Density.uniform(g))  # x²/2 at the centres
        array([1.53125, 0.78125, 0.28125, 0.03125, 0.03125, 0.28125, 0.78125, 1.53125])
        """
        U = self._potential(self._values(state))
        return U.copy() if U is self._fixed_potential else U

    def _potential(self, rho) -> np.ndarray:
        """U at ρ; for a ρ-independent energy, one cached read-only array."""
        if not self.grid_energy.depends_on_density:
            # one read-only object for every step: the schemes cache their face rates per U
            if self._fixed_potential is None:
                self._fixed_potential = self.grid_energy.potential(rho)
                self._fixed_potential.flags.writeable = False
            return self._fixed_potential
        return self.grid_energy.potential(rho)

    def evolution_rate(self, state) -> np.ndarray:
        r"""dρ/dt of the semi-discrete scheme.

        .. math::

            \frac{d\rho_i}{dt} = -\frac{1}{|C|}\sum_{\text{faces } f \text{ of } C_i} |f|\, F_f,

        with F_f the scheme's flux through face f (zero on the walls).

        Parameters
        ----------
        state : Density or array_like, shape ``grid.shape``

        Returns
        -------
        numpy.ndarray, shape ``grid.shape``
            It sums to zero (mass is conserved).

        See Also
        --------
        meanfield.pde.schemes.Scheme.rate : the scheme's rate at a given U.
        operator : the same as a matrix.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> rate = eq.evolution_rate(Density.uniform(g))  # mass moves inward from the walls
        >>> rate, abs(float(rate.sum())) < 1e-12
        (array([-0.75,  0.25,  0.25,  0.25,  0.25,  0.25,  0.25, -0.75]), True)
        """
        rho = self._values(state)
        return self.scheme.rate(rho, self._potential(rho))

    def operator(self, state):
        """The generator A at ρ, with U frozen at ρ: dρ/dt = A ρ.

        The implicit schemes solve (I − Δt A) ρⁿ⁺¹ = ρⁿ with it.

        Parameters
        ----------
        state : Density or array_like, shape ``grid.shape``

        Returns
        -------
        scipy.sparse.csc_matrix, shape (M, M)
            Cells in C order; its columns sum to zero.

        Raises
        ------
        TypeError
            The upwind scheme, whose flux depends on log ρ, has no such linear operator.

        See Also
        --------
        meanfield.pde.schemes.generator_matrix : the generator of face rates.
        evolution_rate : A ρ without the matrix.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> rho = Density.uniform(g)
        >>> A = eq.operator(rho)
        >>> A.shape, bool(np.allclose(A @ rho.data, eq.evolution_rate(rho)))
        ((8, 8), True)
        """
        if not hasattr(self.scheme, "matrix"):
            raise InputTypeError(
                f"the {self.scheme.name!r} scheme has no linear operator (its flux depends on "
                "log rho); use scheme='sg', 'sg-implicit' or 'sg-mprk22'"
            )
        rho = self._values(state)
        return self.scheme.matrix(self._potential(rho))

    def prepare_step(self, rho) -> StepPlan:
        """U, the explicit fluxes and the stable step at ρ (what one step needs).

        Parameters
        ----------
        rho : Density or array_like, shape ``grid.shape``

        Returns
        -------
        StepPlan
            ``U``, the outgoing and incoming flows (None when the step recomputes them) and
            ``dt_stable``, the largest step the scheme allows (before the safety factor).

        Raises
        ------
        NumericalError
            U is NaN or infinite somewhere.

        See Also
        --------
        advance : takes the step.
        meanfield.pde.stepper.StepPlan : what it returns.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> plan = eq.prepare_step(Density.uniform(g))
        >>> plan.U.shape, round(plan.dt_stable, 4)
        ((8,), 0.1287)
        """
        rho = self._values(rho)
        U = self._potential(rho)
        # one sum answers "all finite?" unless it overflowed: then look cell by cell
        if not math.isfinite(float(U.sum())) and not np.all(np.isfinite(U)):
            raise NumericalError("the potential dE/drho became non-finite")
        if self.linear:  # no pair term (stiffness 0); the flows are recomputed per step
            return StepPlan(U, None, None, self.scheme.stable_dt(rho, U))
        stiff = self.grid_energy.pair_stiffness * float(rho.max())
        out, inn, dt_stable = self.scheme.prepare(rho, U, stiff)
        return StepPlan(U, out, inn, dt_stable)

    def advance(self, rho, dt: float, plan: StepPlan) -> np.ndarray:
        """One step of size ``dt`` from ρ with the plan of :meth:`prepare_step` at ρ.

        Parameters
        ----------
        rho : numpy.ndarray, shape ``grid.shape``
            The density at the start of the step.
        dt : float
            Step size (≤ ``plan.dt_stable`` for an explicit scheme).
        plan : StepPlan
            :meth:`prepare_step` at ``rho``.

        Returns
        -------
        numpy.ndarray, shape ``grid.shape``
            The density after the step.

        See Also
        --------
        prepare_step : the plan it needs.
        meanfield.pde.stepper.Stepper.advance : the adaptive steps.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> rho = Density.uniform(g).data
        >>> new = eq.advance(rho, 0.01, eq.prepare_step(rho))  # explicit SG: forward Euler
        >>> bool(np.allclose(new, rho + 0.01 * eq.evolution_rate(rho)))
        True
        """
        if self.scheme.needs_potential and self.grid_energy.depends_on_density:
            return self.scheme.advance(
                rho, plan.U, dt, plan.out, plan.inn, potential=self._potential
            )
        return self.scheme.advance(rho, plan.U, dt, plan.out, plan.inn)

    def advance_frozen(
        self, rho, dt: float, n_steps: int, plan: StepPlan, last: float = 0.0
    ) -> np.ndarray:
        """``n_steps`` steps of size ``dt`` of a :attr:`linear` equation, then one of ``last``.

        Parameters
        ----------
        rho : numpy.ndarray, shape ``grid.shape``
            The density at the start.
        dt : float
            Step size.
        n_steps : int
            Number of steps of size ``dt``.
        plan : StepPlan
            :meth:`prepare_step` at ``rho`` (its U serves every step).
        last : float, default 0.0
            Size of a final shorter step, skipped if 0.

        Returns
        -------
        numpy.ndarray, shape ``grid.shape``

        See Also
        --------
        linear : when this applies.
        meanfield.pde.schemes.ScharfetterGummel.advance_frozen

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> rho = Density.uniform(g).data
        >>> plan = eq.prepare_step(rho)
        >>> one_by_one = eq.advance(eq.advance(rho, 0.01, plan), 0.005, plan)
        >>> bool(np.allclose(eq.advance_frozen(rho, 0.01, 1, plan, last=0.005), one_by_one))
        True
        """
        if not self.linear:
            raise InputError("advance_frozen needs a linear equation (see McKeanVlasov.linear)")
        return self.scheme.advance_frozen(rho, plan.U, dt, n_steps, last)

    def stable_dt(self, state) -> float:
        """The largest time step the scheme allows at this state (before the safety factor).

        Parameters
        ----------
        state : Density or array_like, shape ``grid.shape``

        Returns
        -------
        float
            ``prepare_step(state).dt_stable``; for an implicit scheme the drift's CFL bound.

        See Also
        --------
        meanfield.pde.schemes.Scheme.stable_dt : the scheme's bound.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> round(eq.stable_dt(Density.uniform(g)), 4)
        0.1287
        """
        return self.prepare_step(self._values(state)).dt_stable

    def free_energy_terms(self, state) -> dict:
        """Discrete F_β and its parts (see :meth:`GridEnergy.free_energy_terms`).

        Parameters
        ----------
        state : Density or array_like, shape ``grid.shape``

        Returns
        -------
        dict of str to float
            One entry per energy term, then ``energy``, ``entropy`` and ``free_energy``.

        See Also
        --------
        free_energy : the total alone.
        meanfield.energy.Energy.term_values : the particle view's terms.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> {k: round(v, 4) for k, v in eq.free_energy_terms(Density.uniform(g)).items()}
        {'confinement': 0.6562, 'entropy': -1.3863, 'energy': 0.6562, 'free_energy': -0.73}
        """
        return self.grid_energy.free_energy_terms(self._values(state), self.beta)

    def free_energy(self, state) -> float:
        """The discrete free energy F_β = E + β⁻¹ Σ |C| ρ log ρ.

        Parameters
        ----------
        state : Density or array_like, shape ``grid.shape``

        Returns
        -------
        float

        See Also
        --------
        meanfield.pde.trackers.FreeEnergyTracker : records it along a solve.
        meanfield.ot.diagnostics.free_energy : the same for a density given alone.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> round(eq.free_energy(Density.uniform(g)), 4)  # E = 21/32, entropy -log 4
        -0.73
        """
        return self.free_energy_terms(state)["free_energy"]

    def solve(self, state: Density, t_range, **kwargs):
        """Evolve ``state`` over ``t_range``; see :func:`meanfield.pde.solver.solve`.

        Parameters
        ----------
        state : Density
            The initial density.
        t_range : float or (float, float)
            Final time, or (start, end).
        **kwargs
            Passed to :func:`~meanfield.pde.solver.solve` (trackers, dt, ...).

        Returns
        -------
        SolveResult

        See Also
        --------
        meanfield.pde.solver.solve : the controller.
        meanfield.dynamics.langevin.simulate : the particle view's run.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> res = eq.solve(Density.uniform(g), 0.5)
        >>> res.t, round(res.state.mass, 12)
        (0.5, 1.0)
        """
        return solve(self, state, t_range, **kwargs)

    def describe(self) -> dict:
        """Every parameter as plain types (for dataset attributes).

        See Also
        --------
        meanfield.energy.Energy.describe : the energy's part.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Grid
        >>> g = Grid(Box(1, 2.0), 8)
        >>> eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 1.0, scheme="sg")
        >>> d = eq.describe()
        >>> d["beta"], d["scheme"], d["grid_n"], d["term0"]
        (1.0, 'sg', [8], 'QuadraticPotential')
        """
        out = {"beta": self.beta, **self.scheme.describe(), **self.grid.describe()}
        out.update(self.energy.describe())
        return out

    def __repr__(self) -> str:
        b = "inf" if math.isinf(self.beta) else f"{self.beta:g}"
        return f"McKeanVlasov(grid={self.grid!r}, beta={b}, scheme={self.scheme.name!r})"
