r"""The embedded default problem of the README: its configuration, its run specification and
its one-call run (data, energy, I/O).

:class:`ComparisonConfig` holds every parameter of ``meanfield compare`` in plain names and
numbers (the flags and the TOML keys of the command): the problem (a synthetic two-class data
set, so the particles are the model's random features and the energy contains the alignment
term) and the run (β, N, η, t, the seed and the grid's scheme).  It builds the energy and the
initial law, and its :meth:`~ComparisonConfig.spec` is the typed run specification
(:class:`~meanfield.dynamics.spec.RunSpec`) that :func:`meanfield.workbench.compare.compare`
reads.  :func:`default_problem` makes one; :func:`run_default_comparison` runs it and writes
the dataset (netCDF) and a figure.

The module imports nothing heavy until a problem is built, so the command line's help reads
the fields without loading torch.

Examples
--------
>>> from meanfield.workbench.problems import ComparisonConfig
>>> problem = ComparisonConfig(dim=2, n_data=20)
>>> problem.cells, problem.n_particles, problem.spec().n_steps  # p = 2 defaults; t = 1
(48, 1000, 200)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, fields, replace

from .._validation import check_choice, check_output_path
from ..contract import RUN_PARAMS, Param, check_declared, declare_fields
from ..errors import InputError
from .toml_config import (
    MODEL_EXAMPLE,
    TomlConfig,
    check_menu_left_alone,
    config_field,
    model_energy,
    model_text,
)

#: The parameters whose default depends on the dimension p = 1, 2 (None in a configuration).
PER_DIMENSION = {
    "cells": (128, 48),
    "n_particles": (500, 1000),
    "t_final": (2.0, 1.0),
    "init_std": (0.3, 0.4),
}

#: The fields of :class:`ComparisonConfig` that build the README's energy: a ``model``
#: replaces them, so a value other than the default beside it is refused.
MENU_FIELDS = ("radius", "n_data", "lam")

#: The grid's fewest cells per axis, :data:`meanfield.pde.grid.MIN_CELLS` (that module imports
#: torch, which ``meanfield compare --help`` must not; tests/test_cli.py checks that the help
#: states the grid's own minimum).
_MIN_CELLS = 4


def _by_dimension(name: str) -> str:
    """The default of a per-dimension field in words, for its declaration's doc.

    Examples
    --------
    >>> _by_dimension("t_final")
    'default 2 in p = 1, 1 in p = 2'
    """
    one, two = PER_DIMENSION[name]
    return f"default {one:g} in p = 1, {two:g} in p = 2"


def _comparison_example(name, value) -> dict:
    """The fields a valid :class:`ComparisonConfig` needs beside ``name = value`` (for the
    contract's generated tests): an edge value of ``eta`` or ``t_final`` (5e-324, 1e300) with
    the other equal to it, so that the run has round(t_final / eta) = 1 particle step, not
    none or 10^300 (refused by the cross-field step check, not by the field's range)."""
    usable = isinstance(value, float) and math.isfinite(value) and value > 0
    if usable and name in ("eta", "t_final"):
        return {"t_final" if name == "eta" else "eta": value}
    return {}


@declare_fields(example=_comparison_example)
@dataclass(frozen=True)
class ComparisonConfig(TomlConfig):
    r"""The README's problem and its side-by-side run, in plain parameters (checked when made).

    Data: the radial task of Sinha & Duchi in d = ``dim`` (x ~ N(0, I_d),
    y = sign(|x| − √d), ``n_data`` points, seed 0).  Particles: positive (FAVOR+) features
    ω ∈ R^d, so p = d.  Energy on the box [−R, R]^p:

    .. math::

        E(\mu) = \int \frac{|\omega|^2}{2}\, d\mu - \int a\, d\mu
        + \lambda \iint k(\omega - \omega')\, d\mu(\omega)\, d\mu(\omega'),

    with the linear (U-statistic) alignment a and the Coulomb kernel of R^p (k = −|z| in
    p = 1, −log|z| in p = 2).  Initial law: N(init_mean, init_std² I) on the grid.  Every
    field is a ``meanfield compare`` flag and a key of its TOML file (a ``[compare]`` table),
    declared by a :class:`~meanfield.contract.Param` in its metadata: its check, its flag's help
    (:data:`meanfield.cli.parser.COMPARE_HELP`) and its row in the docs' tables come from it
    (β, N, η and the seed are the run parameters of :data:`meanfield.contract.registry.RUN_PARAMS`).

    Parameters
    ----------
    dim : {1, 2}, default 1
        Particle dimension p.
    radius : float, default 2
        R > 0 of the box.
    cells : int, optional
        Grid cells per axis (≥ 4; default 128 in p = 1, 48 in p = 2).
    n_data : int, default 200
        Data points (≥ 2).
    lam : float, default 0.5
        Coulomb interaction strength λ ≥ 0.
    init_mean, init_std : float, optional
        Mean and standard deviation (> 0; default 0.3 in p = 1, 0.4 in p = 2) of the initial
        law.
    beta : float, default 10
        Inverse temperature β > 0 (mean-field regime).
    n_particles : int, optional
        N ≥ 1 (default 500 in p = 1, 1000 in p = 2).
    eta : float, default 0.005
        Langevin step η > 0.
    t_final : float, optional
        Final time > 0 (default 2 in p = 1, 1 in p = 2); round(t_final/η) particle steps, at
        most :data:`~meanfield.dynamics.spec.MAX_STEPS`.
    seed : int, default 0
        Seeds the particles' sample and noise.
    scheme : str, default "upwind"
        Grid flux scheme (:data:`meanfield.pde.schemes.SCHEMES`).
    order : {1, 2}, default 2
        Order of the upwind reconstruction.
    safety : float in (0, 1], default 0.5
        Fraction of the stable grid step taken.
    model : str or dict, optional
        Any energy instead of the README's: its description (:func:`meanfield.to_dict`
        form; built-in names, a user's class as ``"module:Class"``) as a TOML table
        (``[compare.model]``), the path of a TOML or JSON file holding one, or its JSON text
        (stored as JSON text, keys sorted).  Its domain must be a box or a torus of
        dimension ``dim``; ``radius``, ``n_data`` and ``lam``, which build the README's
        energy, are then refused at other values than their defaults.

    Raises
    ------
    meanfield.errors.InputError
        A value out of range or an unknown scheme (the message names the parameter and the
        range; on the command line, the flag as typed), or t_final / η below one step; with
        a ``model``, a description that cannot be read (named), a domain of another
        dimension than ``dim``, or a menu field set.
    meanfield.errors.InputTypeError
        A value of the wrong type: a boolean for a number, a float for a count (``dim = 1.0``).
    meanfield.errors.SizeLimitError
        A grid too large for the memory available, or a run whose estimated work
        (:func:`meanfield.dynamics.spec.estimate_work`: steps × (N × (N + n_data) + the fixed
        cost of a step + the grid cells), as :class:`~meanfield.dynamics.spec.RunSpec` counts
        it) exceeds the ceiling :data:`meanfield.dynamics.spec.MAX_WORK` (the environment
        variable ``MEANFIELD_MAX_WORK`` raises it); both before anything is built.
    meanfield.errors.StepBudgetError
        More particle steps than :data:`~meanfield.dynamics.spec.MAX_STEPS`.

    See Also
    --------
    default_problem : the README's problem with some fields changed.
    run_default_comparison : run it and write the dataset and the figure.
    meanfield.workbench.compare.compare : both views of a run specification side by side.
    meanfield.workbench.config.SimulationConfig : the configuration of a particle run alone.

    References
    ----------
    .. [1] A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016 (the
       radial task).

    Examples
    --------
    >>> from meanfield.workbench.problems import ComparisonConfig
    >>> problem = ComparisonConfig(n_data=20, cells=32)
    >>> problem.energy.term_names, problem.n_particles, problem.data[0].shape
    (['confinement', 'alignment', 'interaction'], 500, (20, 1))
    >>> problem.energy.terms[2].kernel  # the Coulomb kernel of R^1: k(z) = −|z|
    Coulomb(dim=1, softening=0.0)
    >>> ComparisonConfig(cells=3)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: cells (grid cells per axis) must be an integer >= 4, got 3
    """

    TABLE = "compare"

    dim: int = config_field(
        1,
        Param("dim", "int", "particle dimension p", low=1, high=2, choices=(1, 2)),
    )
    radius: float = config_field(
        2.0,
        Param(
            "radius",
            "real",
            "half-width R of the box [-R, R]^p",
            low=0.0,
            low_open=True,
            label="radius (R)",
        ),
    )
    cells: int | None = config_field(
        None,
        Param(
            "cells",
            "int",
            f"grid cells per axis (>= {_MIN_CELLS}, the grid's minimum; {_by_dimension('cells')})",
            low=_MIN_CELLS,
            optional=True,
            label="cells (grid cells per axis)",
        ),
    )
    n_data: int = config_field(
        200, Param("n_data", "int", "number of data points of the radial task", low=2)
    )
    lam: float = config_field(
        0.5,
        Param("lam", "real", "Coulomb interaction strength lambda", low=0.0, label="lam (lambda)"),
    )
    init_mean: float = config_field(
        0.0, Param("init_mean", "real", "mean of the Gaussian initial law")
    )
    init_std: float | None = config_field(
        None,
        Param(
            "init_std",
            "real",
            f"standard deviation of the Gaussian initial law ({_by_dimension('init_std')})",
            low=0.0,
            low_open=True,
            optional=True,
        ),
    )
    beta: float = config_field(
        10.0, replace(RUN_PARAMS["beta"], doc="inverse temperature beta (mean-field regime)")
    )
    n_particles: int | None = config_field(
        None,
        replace(
            RUN_PARAMS["n_particles"],
            doc=f"number of particles N ({_by_dimension('n_particles')})",
            optional=True,
        ),
    )
    eta: float = config_field(0.005, replace(RUN_PARAMS["eta"], doc="particle step size eta"))
    t_final: float | None = config_field(
        None,
        Param(
            "t_final",
            "real",
            f"final time (t_final / eta particle steps; {_by_dimension('t_final')})",
            low=0.0,
            low_open=True,
            optional=True,
            units="time",
        ),
    )
    seed: int = config_field(
        0, replace(RUN_PARAMS["seed"], doc="seed of the particle sample and noise")
    )
    scheme: str = config_field(
        "upwind",
        Param(
            "scheme",
            "string",
            "grid flux scheme: upwind, sg, sg-implicit, chang-cooper, sg-mprk22, sg-mprk22-split",
            examples=("upwind", "sg"),
        ),
    )
    order: int = config_field(
        2,
        Param(
            "order",
            "int",
            "order of the upwind reconstruction",
            low=1,
            high=2,
            choices=(1, 2),
            label="order (upwind reconstruction)",
        ),
    )
    safety: float = config_field(
        0.5,
        Param(
            "safety",
            "real",
            "fraction of the stable grid step taken",
            low=0.0,
            low_open=True,
            high=1.0,
        ),
    )

    model: str | None = config_field(
        None,
        Param(
            "model",
            "string",
            "the energy as a description (meanfield.to_dict form: built-in names, user "
            "classes as 'module:Class'): a TOML or JSON file of one, its JSON text, or a "
            "[compare.model] table; replaces the README's energy (radius, n_data, lam), its "
            "domain a box or torus of dimension --dim",
            optional=True,
            examples=(MODEL_EXAMPLE,),
        ),
    )

    TABLE_FIELDS = ("model",)

    def __post_init__(self):
        # a TOML table (a dict) is stored as its JSON text: the field is a string throughout
        object.__setattr__(self, "model", model_text(self.model))
        # every field by its declaration (the run parameters a RunSpec shares are declared
        # once, meanfield.contract.registry.RUN_PARAMS), before anything heavy is imported; None
        # leaves a per-dimension field at its default for this dim
        check_declared(self)
        for name, values in PER_DIMENSION.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, values[self.dim - 1])

        from .._resources import check_grid_memory
        from ..dynamics.spec import MAX_STEPS, check_work, estimate_work, n_steps_for
        from ..pde.schemes import SCHEMES

        # declared as a string: the schemes are the flux module's, which imports torch
        check_choice("scheme", self.scheme, SCHEMES)
        n_steps = n_steps_for(self.t_final, self.eta, max_steps=MAX_STEPS)
        # the README's energy holds one pair term (of strength lam: every particle has
        # N - 1 partners) and the alignment term's n_data points; a model, its own terms
        pair_terms, n_data = int(self.lam > 0), self.n_data
        if self.model is not None:
            energy = self._check_model()
            pair_terms = sum(hasattr(t, "kernel") for t in energy.terms)
            n_data = energy.n_data() or 0
        # before anything is allocated (a 100000² grid: 80 GB for the density alone)
        cells = (self.cells,) * self.dim
        check_grid_memory("cells (grid cells per axis)", cells, pair_terms=pair_terms)
        # the work RunSpec would refuse, refused here from the fields alone (before the data
        # is drawn and the grid made)
        N, M = self.n_particles, self.cells**self.dim
        partners = N - 1 if (self.model is None or pair_terms) else 0
        work = estimate_work(
            n_steps=n_steps, n_particles=N, partners=partners, n_data=n_data, cells=M
        )
        check_work(
            work,
            detail=f"{n_steps} steps = round(t_final / eta) x ({N} particles x (1 + "
            f"{partners} pair partners + {n_data} data points) + the fixed cost of a step + "
            f"{M} grid cells)",
        )

    def _check_model(self):
        """The model's energy, built once (kept as :attr:`energy`): the menu fields at their
        defaults, the domain of dimension ``dim``."""
        check_menu_left_alone(self, MENU_FIELDS)
        energy = model_energy(self.model)
        if energy.domain.dim != self.dim:
            raise InputError(
                f"model: its domain {energy.domain!r} has dimension {energy.domain.dim}, but "
                f"dim (--dim) = {self.dim}; set dim = {energy.domain.dim}"
            )
        self.__dict__["energy"] = energy  # the cached property's value: built once
        return energy

    @functools.cached_property
    def data(self):
        """The training data (X, y) of the radial task: ``n_data`` points in d = ``dim``.

        Examples
        --------
        >>> from meanfield.workbench.problems import ComparisonConfig
        >>> X, y = ComparisonConfig(dim=2, n_data=10).data
        >>> X.shape, sorted({float(v) for v in y})  # labels ±1
        ((10, 2), [-1.0, 1.0])
        """
        from ..learners.tasks import radial

        if self.model is not None:  # the data of the model's first alignment term, if any
            for term in self.energy.terms:
                if hasattr(term, "X_np"):
                    return term.X_np, term.y_np
            return None, None
        split = radial(self.n_data, 1, d=self.dim, seed=0)
        return split.X_train, split.y_train

    @functools.cached_property
    def energy(self):
        """The :class:`~meanfield.energy.Energy`: confinement, linear alignment on
        :attr:`data`, Coulomb repulsion of strength λ, on the box [−R, R]^p; or the one
        ``model`` describes.

        Examples
        --------
        >>> from meanfield.workbench.problems import ComparisonConfig
        >>> ComparisonConfig(n_data=10, radius=3.0).energy.domain
        Box(dim=1, half_width=3.0)
        """
        from ..domains import Box
        from ..energy import Energy, LinearAlignment, PairInteraction, QuadraticPotential
        from ..kernels import Coulomb

        if self.model is not None:
            return model_energy(self.model)
        X, y = self.data
        terms = [
            QuadraticPotential(1.0),
            LinearAlignment(X, y, "positive"),
            PairInteraction(Coulomb(self.dim), self.lam),
        ]
        return Energy(terms, Box(self.dim, self.radius))

    @functools.cached_property
    def initial(self):
        """The initial law: a Gaussian N(init_mean, init_std² I) on the grid of ``cells``
        cells per axis over the energy's box (:class:`~meanfield.pde.Density`).

        Examples
        --------
        >>> from meanfield.workbench.problems import ComparisonConfig
        >>> rho0 = ComparisonConfig(n_data=10, cells=32).initial
        >>> rho0.grid.n, round(rho0.mass, 12)
        ((32,), 1.0)
        """
        from ..pde import Density, Grid

        return Density.gaussian(Grid(self.energy.domain, self.cells), self.init_mean, self.init_std)

    def spec(self):
        """The run specification of this problem, what :func:`~meanfield.workbench.compare.compare`
        reads (round(t_final/η) particle steps).

        Returns
        -------
        meanfield.dynamics.spec.RunSpec

        Examples
        --------
        >>> from meanfield.workbench.problems import ComparisonConfig
        >>> spec = ComparisonConfig(n_data=10, cells=32).spec()
        >>> spec.n_particles, spec.n_steps, spec.grid.n, spec.scheme
        (500, 400, (32,), 'upwind')
        """
        from ..dynamics.spec import RunSpec, n_steps_for

        return RunSpec(
            energy=self.energy,
            initial=self.initial,
            beta=self.beta,
            eta=self.eta,
            n_steps=n_steps_for(self.t_final, self.eta),
            n_particles=self.n_particles,
            seed=self.seed,
            scheme=self.scheme,
            order=self.order,
            safety=self.safety,
        )

    def replace(self, **changes) -> ComparisonConfig:
        """A new configuration with ``changes`` (checked as a new one is; a parameter whose
        default depends on the dimension keeps its value unless changed).

        Parameters
        ----------
        **changes
            Field values.

        Returns
        -------
        ComparisonConfig

        Examples
        --------
        >>> from meanfield.workbench.problems import ComparisonConfig
        >>> ComparisonConfig(n_data=10).replace(seed=4).seed
        4
        """
        return dataclasses.replace(self, **changes)


def default_problem(dim: int = 1, **overrides) -> ComparisonConfig:
    r"""The README's problem: random features on a synthetic two-class data set.

    Parameters
    ----------
    dim : {1, 2}
    **overrides
        Any field of :class:`ComparisonConfig` (``radius``, ``cells``, ``n_data``, ``lam``,
        ``init_mean``, ``init_std``, ``beta``, ``n_particles``, ``eta``, ``t_final``,
        ``seed``, ``scheme``, ``order``, ``safety``).

    Returns
    -------
    ComparisonConfig
        The problem: ``.energy``, ``.initial``, ``.data`` = (X, y), the run parameters, and
        ``.spec()`` for :func:`~meanfield.workbench.compare.compare`.

    Raises
    ------
    ValueError
        An unknown parameter (the message lists the allowed ones), or one out of range.

    See Also
    --------
    ComparisonConfig : the configuration made, with every field.
    run_default_comparison : run it.

    Examples
    --------
    >>> from meanfield.workbench.problems import default_problem
    >>> prob = default_problem(1, n_data=20, cells=32)
    >>> prob.energy.term_names, prob.n_particles, prob.data[0].shape
    (['confinement', 'alignment', 'interaction'], 500, (20, 1))
    """
    known = {f.name for f in fields(ComparisonConfig)} - {"dim"}
    unknown = set(overrides) - known
    if unknown:
        raise ValueError(
            f"unknown default-problem parameter(s) {sorted(unknown)}; choose from {sorted(known)}"
        )
    return ComparisonConfig(dim=dim, **overrides)


def run_default_comparison(
    out_dir,
    problem: ComparisonConfig | None = None,
    *,
    dim: int = 1,
    n_records: int = 20,
    w_method: str = "auto",
    progress: bool = False,
    **overrides,
):
    """Run the default problem, write ``comparison.nc`` and ``comparison.png`` to ``out_dir``.

    Parameters
    ----------
    out_dir : path
        Created if missing, when the dataset is written (not before the run): a write that
        fails (a full disk) leaves neither a partial file nor a folder this call created.
        A dataset written whose figure then fails to write is kept (it is complete).
    problem : ComparisonConfig, optional
        The problem and its run (default: :func:`default_problem` of ``dim`` and
        ``overrides``; given, ``overrides`` replace its fields).
    dim : {1, 2}
        Particle dimension of the default problem.
    n_records, w_method, progress :
        As :func:`~meanfield.workbench.compare.compare`.
    **overrides
        Fields of :class:`ComparisonConfig`.

    Returns
    -------
    xarray.Dataset
        As :func:`compare`, with every field of the problem as a ``problem_<name>``
        attribute; ``attrs["dataset_path"]`` and ``attrs["figure_path"]`` say where the files
        went.

    Raises
    ------
    meanfield.errors.OutputPathError
        ``out_dir`` or a file in it cannot be written (before any work).
    meanfield.errors.OutputWriteError
        A file could not be written to the end (a full disk); nothing partial is left.

    See Also
    --------
    meanfield.workbench.compare.compare : the run itself (no files).
    meanfield.workbench.plotting.plot_comparison : the figure written.
    meanfield.results.save_dataset : how the dataset is written.

    Examples
    --------
    A very short run (writes into ``out/``; the figure takes most of the second it needs):

    >>> from meanfield.workbench.problems import run_default_comparison
    >>> ds = run_default_comparison(
    ...     "out", n_data=10, cells=16, n_particles=20, t_final=0.02, n_records=1
    ... )
    >>> dict(ds.sizes), ds.attrs["figure_path"], int(ds.attrs["problem_cells"])
    ({'time': 2, 'particle': 20, 'dim': 1, 'x': 16}, 'out/comparison.png', 16)
    """
    from ..results import save_dataset
    from .compare import compare
    from .plotting import plot_comparison

    out_dir = check_output_path("out (folder)", out_dir, kind="dir")
    for name in ("comparison.nc", "comparison.png"):
        check_output_path("out (folder)", out_dir / name, kind="file")
    if problem is None:
        problem = default_problem(dim, **overrides)
    elif overrides:
        problem = problem.replace(**overrides)
    extra = {"problem": "default", "task": "radial"}
    extra |= {f"problem_{k}": v for k, v in problem.as_dict().items()}
    ds = compare(
        problem.spec(), n_records=n_records, w_method=w_method, progress=progress, extra_attrs=extra
    )
    # save_dataset makes out_dir (and removes what it made if the write fails)
    nc = save_dataset(ds, out_dir / "comparison.nc")
    png = out_dir / "comparison.png"
    # the figure reads "w2"; a sliced run keeps its own name and long_name in the dataset
    plot_comparison(ds, png)
    ds.attrs["dataset_path"] = str(nc)
    ds.attrs["figure_path"] = str(png)
    return ds


def particles_vs_grid_run(
    N: int,
    seed: int,
    *,
    t_final: float = 1.0,
    n_records: int = 4,
    grid_n: int = 128,
    n_data: int = 200,
):
    """One (N, seed) run of the default side-by-side problem
    (:class:`ComparisonConfig` with ``cells = grid_n``, compared by
    :func:`~meanfield.workbench.compare.compare`), reduced to its diagnostics over time: ``w2``,
    ``w1`` and ``kernel_gap`` (time).

    See Also
    --------
    meanfield.studies.limits.particles_vs_grid_in_n : the sweep over N and seeds.
    meanfield.studies.limits.n_limit_data : the figure's experiment.
    meanfield.workbench.compare.compare : the side-by-side run.
    ComparisonConfig : the problem.

    References
    ----------
    - A.-S. Sznitman, *Topics in propagation of chaos*, École d'Été de Probabilités de
      Saint-Flour XIX (1989), Lecture Notes in Math. 1464, Springer, 1991 (μ_N(t) → ρ_t).

    Examples
    --------
    >>> from meanfield.workbench.problems import particles_vs_grid_run
    >>> ds = particles_vs_grid_run(8, 0, t_final=0.05, n_records=1, grid_n=16, n_data=10)
    >>> sorted(ds.data_vars), ds["time"].values.tolist()
    (['kernel_gap', 'w1', 'w2'], [0.0, 0.05])
    >>> bool((ds["w1"] <= ds["w2"] + 1e-12).all())  # W1 ≤ W2
    True
    """
    from .compare import compare

    problem = ComparisonConfig(
        dim=1, cells=grid_n, n_data=n_data, n_particles=N, t_final=t_final, seed=seed
    )
    ds = compare(problem.spec(), n_records=n_records)
    return ds[["w2", "w1", "kernel_gap"]]


@functools.lru_cache(maxsize=4)
def grid_solution(dim: int, cells: int, t_final: float, eta: float, n_data: int = 200):
    """ρ_t of the default problem in dimension ``dim`` (:class:`ComparisonConfig` with these
    fields) at the particles' final time: solved once per process, cached.

    Returns
    -------
    meanfield.pde.Density

    See Also
    --------
    grid_refinement_w2 : its error between two resolutions.
    meanfield.studies.limits.particles_vs_grid_2d_run : particles against it.

    Examples
    --------
    >>> from meanfield.workbench.problems import grid_solution
    >>> rho = grid_solution(2, 8, 0.01, 0.005, n_data=10)
    >>> rho.data.shape, round(float(rho.mass), 9)
    ((8, 8), 1.0)
    """
    spec = ComparisonConfig(dim=dim, cells=cells, n_data=n_data, t_final=t_final, eta=eta).spec()
    return spec.equation().solve(spec.law, spec.t_final, safety=spec.safety).state


def grid_refinement_w2(cells, *, t_final: float, eta: float, refine: int) -> list[dict]:
    """W₂ between the p = 2 grid solutions at successive resolutions ``cells``, both read as
    atoms on the sub-cells of the finer one (:func:`meanfield.ot.binned.refined_atoms`: the
    coarse density split exactly), certified to within the two shifts (``bracket``).

    Returns
    -------
    list of dict
        Per pair: ``cells``, ``w2``, ``bracket``, ``t_final``, ``eta``, ``refine``.

    See Also
    --------
    grid_solution : the densities compared.

    Examples
    --------
    >>> from meanfield.workbench.problems import grid_refinement_w2
    >>> [r] = grid_refinement_w2([8, 16], t_final=0.01, eta=0.005, refine=1)
    >>> r["cells"], round(r["bracket"], 4)  # 2 × (h/√12)·√2, both on the 16² cells (h = 1/4)
    ([8, 16], 0.2041)
    """
    from .._validation import check_int as _check_int
    from ..ot.binned import refined_atoms
    from ..ot.distance import w2

    cells = sorted(_check_int("grid_check.cells", c, minimum=4) for c in cells)
    rhos = {c: grid_solution(2, c, t_final, eta) for c in cells}
    out = []
    for a, b in zip(cells[:-1], cells[1:], strict=True):
        (na, da), (nb, db) = (refined_atoms(rhos[c], b * refine // c) for c in (a, b))
        record = {"cells": [a, b], "w2": w2(na, nb).distance, "bracket": da + db}
        out.append(record | {"t_final": t_final, "eta": eta, "refine": refine})
    return out


__all__ = [
    "PER_DIMENSION",
    "ComparisonConfig",
    "default_problem",
    "grid_refinement_w2",
    "grid_solution",
    "particles_vs_grid_run",
    "run_default_comparison",
]
