"""meanfield: random features as charged particles.

The same model seen as N particles (projected Langevin dynamics, :mod:`meanfield.dynamics`)
and as its N -> infinity limit (a McKean-Vlasov equation on a grid, :mod:`meanfield.pde`),
with one definition of the energy (:mod:`meanfield.energy`) consumed by both.

The front door
--------------
``import meanfield as mf`` gives the main entry points of every part under one name
(:data:`__all__`, grouped by part: model, dynamics, PDE, transport and diagnostics,
attention, learners and data, workbench, errors), and every module of the package as an
attribute (``mf.pde``, ``mf.attention``, ``mf.workbench.sweeps``, ...).  Each name is the
object of its home module (``mf.Energy is meanfield.energy.Energy``); the API reference
lists them at their homes.

Nothing is imported before it is used: ``import meanfield`` loads neither torch nor any other
heavy dependency, and a name or a module is imported on first access (PEP 562), so
``mf.Box`` costs the domains module and torch, ``mf.solve`` the grid solver.

Examples
--------
>>> import meanfield as mf
>>> energy = mf.Energy([mf.QuadraticPotential()], mf.Box(1, 2.0))
>>> ds = mf.simulate(energy, [[0.5], [-0.5]], eta=0.01, beta=1.0, n_steps=10, seed=0)
>>> ds["omega"].dims
('time', 'particle', 'dim')
>>> mf.pde.solve is mf.solve, mf.sample_hmc is mf.dynamics.langevin.sample_hmc
(True, True)
>>> r = mf.ot.w2(mf.Measure.from_particles(ds["omega"][-1]), mf.Measure([[0.0]]))
>>> r.method, r.certified
('quantile', True)
"""

from __future__ import annotations

import importlib

from ._version import __version__

__all__ = [
    "__version__",
    # model: the energy and its terms, pair kernels, domains, initial laws, closed forms
    "Energy",
    "QuadraticPotential",
    "LinearAlignment",
    "PairInteraction",
    "Riesz",
    "Coulomb",
    "Box",
    "Ball",
    "sample_initial_particles",
    "equilibrium_case",
    # dynamics: the run specification and its plain-data description, projected Langevin,
    # MALA, HMC and chain statistics
    "RunSpec",
    "to_dict",
    "from_dict",
    "simulate",
    "ProjectedLangevin",
    "MALA",
    "HMC",
    "sample_hmc",
    "effective_sample_size",
    # PDE: the McKean-Vlasov equation on a grid, its Gibbs state and beta = inf equilibrium
    "Grid",
    "Density",
    "McKeanVlasov",
    "solve",
    "gibbs_state",
    "equilibrium_measure",
    # transport and diagnostics: one measure type, one distance (mf.ot.w1, mf.ot.w2), the
    # certified sparse W2, the kernel gap, the free energy, spacing
    "Measure",
    "wasserstein",
    "w2_sparse",
    "kernel_gap",
    "free_energy",
    "min_pair_distance",
    # attention: the drop-in for torch.nn.MultiheadAttention, linearizing a Transformer
    "KernelAttention",
    "linearize",
    # learners and data: the synthetic tasks (the learners: mf.learners)
    "make_task",
    # workbench: the default problem, sweeps, configurations, results, figures
    "default_problem",
    "ComparisonConfig",
    "run_default_comparison",
    "run_sweep",
    "SimulationConfig",
    "save_dataset",
    "load_dataset",
    "make_figures",
    # errors: every error of the package is a MeanfieldError; bad input is an InputError
    "MeanfieldError",
    "InputError",
    # the wing packages (every module of the package is an attribute too, imported on first
    # access: mf.energy, mf.kernels, ...)
    "dynamics",
    "pde",
    "ot",
    "attention",
    "learners",
    "workbench",
    "studies",
    "cli",
]

#: The home module of each front-door name (where it is defined, not a re-export).
_HOMES = {
    "meanfield.energy": ("Energy", "QuadraticPotential", "LinearAlignment", "PairInteraction"),
    "meanfield.kernels": ("Riesz", "Coulomb"),
    "meanfield.domains": ("Box", "Ball"),
    "meanfield.features": ("sample_initial_particles",),
    "meanfield.closed_forms": ("equilibrium_case",),
    "meanfield.dynamics.spec": ("RunSpec",),
    "meanfield.dynamics.description": ("to_dict", "from_dict"),
    "meanfield.dynamics.langevin": ("simulate", "ProjectedLangevin", "MALA"),
    "meanfield.dynamics.hmc": ("HMC", "sample_hmc"),
    "meanfield.stats": ("effective_sample_size",),
    "meanfield.pde.grid": ("Grid",),
    "meanfield.pde.field": ("Density",),
    "meanfield.pde.equation": ("McKeanVlasov",),
    "meanfield.pde.solver": ("solve",),
    "meanfield.pde.stationary": ("gibbs_state", "equilibrium_measure"),
    "meanfield.ot.measure": ("Measure",),
    "meanfield.ot.distance": ("wasserstein",),
    "meanfield.ot.sparse": ("w2_sparse",),
    "meanfield.ot.diagnostics": ("kernel_gap", "free_energy"),
    "meanfield.ot.spacing": ("min_pair_distance",),
    "meanfield.attention.mha": ("KernelAttention",),
    "meanfield.attention.linearize": ("linearize",),
    "meanfield.learners.tasks": ("make_task",),
    "meanfield.workbench.problems": (
        "default_problem",
        "ComparisonConfig",
        "run_default_comparison",
    ),
    "meanfield.workbench.sweeps": ("run_sweep",),
    "meanfield.workbench.config": ("SimulationConfig",),
    "meanfield.results": ("save_dataset", "load_dataset"),
    "meanfield.cli.figures": ("make_figures",),
    "meanfield.errors": ("MeanfieldError", "InputError"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}
_submodules: frozenset[str] | None = None


def _public_submodules() -> frozenset[str]:
    """The names of the package's public modules and subpackages (found once, not imported)."""
    global _submodules
    if _submodules is None:
        import pkgutil

        found = (m.name for m in pkgutil.iter_modules(__path__))
        _submodules = frozenset(n for n in found if not n.startswith("_"))
    return _submodules


def __getattr__(name: str):
    """A front-door name or a module of the package, imported on first access (PEP 562)."""
    home = _HOME_OF.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # the next access finds it without this function
        return value
    if not name.startswith("_") and name in _public_submodules():
        return importlib.import_module(f"{__name__}.{name}")  # which sets the attribute
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # the front door and the modules, not this file's own imports (importlib, annotations)
    return sorted(set(__all__) | _public_submodules())
