"""The McKean–Vlasov view of the model: densities on a grid (THEORY §4).

Pieces, each in its own module, in the manner of py-pde:

* :mod:`~meanfield.pde.grid`: :class:`Grid`, a cell-centred grid on a box (p = 1, 2, 3);
* :mod:`~meanfield.pde.field`: :class:`Density`, the state (cell averages, validated);
* :mod:`~meanfield.pde.convolution`: pair potentials by zero-padded FFT with cell-integrated
  (singular) kernels;
* :mod:`~meanfield.pde.potential`: :class:`GridEnergy`, δE/δρ and the discrete free energy
  read from the one :class:`~meanfield.energy.Energy`;
* :mod:`~meanfield.pde.schemes`: positivity-preserving, free-energy-dissipating fluxes
  (Carrillo–Chertock–Huang upwind; Scharfetter–Gummel / Chang–Cooper, explicit, implicit
  Euler, or the second-order positive implicit MPRK22 step ``sg-mprk22``), with compiled 1D
  loops in :mod:`~meanfield.pde._kernels`;
* :mod:`~meanfield.pde.equation`: :class:`McKeanVlasov`, the equation: its evolution step
  (``prepare_step``: potential, fluxes, stable step; ``advance``: one explicit or implicit step);
* :mod:`~meanfield.pde.stepper`: :class:`Stepper`, the step size under the CFL positivity
  bound, and the interface an equation needs (:class:`EquationProtocol`);
* :mod:`~meanfield.pde.solver`: :func:`solve`, the controller: the time loop and the trackers;
* :mod:`~meanfield.pde.trackers`: progress, storage, free energy, mass, steady state, guard;
* :mod:`~meanfield.pde.stationary`: the Gibbs state ρ_β and the β = ∞ equilibrium measure.
"""

from .convolution import FFTConvolution, cell_integrated_kernel
from .equation import McKeanVlasov
from .field import Density
from .grid import Grid
from .potential import GridEnergy
from .schemes import ScharfetterGummel, ScharfetterGummelMPRK, UpwindScheme, make_scheme
from .solver import SolveResult, solve
from .stationary import StationaryReport, equilibrium_measure, gibbs_state
from .stepper import EquationProtocol, Stepper, StepPlan
from .trackers import (
    DensityError,
    FinishedSimulation,
    FreeEnergyTracker,
    GuardTracker,
    MassTracker,
    ProgressTracker,
    SteadyStateTracker,
    StorageTracker,
    Tracker,
)

__all__ = [
    "Grid",
    "Density",
    "FFTConvolution",
    "cell_integrated_kernel",
    "GridEnergy",
    "UpwindScheme",
    "ScharfetterGummel",
    "ScharfetterGummelMPRK",
    "make_scheme",
    "McKeanVlasov",
    "solve",
    "SolveResult",
    "Stepper",
    "StepPlan",
    "EquationProtocol",
    "Tracker",
    "ProgressTracker",
    "StorageTracker",
    "FreeEnergyTracker",
    "MassTracker",
    "SteadyStateTracker",
    "GuardTracker",
    "DensityError",
    "FinishedSimulation",
    "gibbs_state",
    "equilibrium_measure",
    "StationaryReport",
]
