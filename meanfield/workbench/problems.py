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
import warnings
from dataclasses import dataclass, fields, replace

from .._validation import check_choice, check_output_path, spelled_as
from ..contract import RUN_PARAMS, Param, check_declared, declare_fields
from .config import _field, _TomlConfig

#: The parameters whose default depends on the dimension p = 1, 2 (None in a configuration).
PER_DIMENSION = {
    "cells": (128, 48),
    "n_particles": (500, 1000),
    "t_final": (2.0, 1.0),
    "init_std": (0.3, 0.4),
}

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


class _DeprecatedProblemDict:
    """The dict that :func:`default_problem` returned before it returned a configuration:
    ``problem["energy"]``, ``problem.pop("config")`` and ``compare(**problem)`` keep working
    for one release, with a DeprecationWarning."""

    _KEYS = ("energy", "initial", "n_particles", "beta", "t_final", "eta")

    def _warn(self) -> None:
        warnings.warn(
            "default_problem() returns a ComparisonConfig, not a dict: read its attributes "
            "(problem.energy, problem.initial, problem.data, problem.beta, ...) and run "
            "compare(problem.spec()); dict access will be removed in the next version",
            DeprecationWarning,
            stacklevel=3,
        )

    def __getitem__(self, key):
        self._warn()
        if key == "config":
            return self.as_dict()
        if key == "data" or key in self._KEYS:
            return getattr(self, key)
        raise KeyError(key)

    def keys(self):
        self._warn()
        return self._KEYS

    def pop(self, key, *default):
        self._warn()
        return self[key] if key in (*self._KEYS, "data", "config") or not default else default[0]


@declare_fields(example=_comparison_example)
@dataclass(frozen=True)
class ComparisonConfig(_DeprecatedProblemDict, _TomlConfig):
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
    (β, N, η and the seed are the run parameters of :data:`meanfield.contract.RUN_PARAMS`).

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
        Grid flux scheme (:data:`meanfield.pde.flux.SCHEMES`).
    order : {1, 2}, default 2
        Order of the upwind reconstruction.
    safety : float in (0, 1], default 0.5
        Fraction of the stable grid step taken.

    Raises
    ------
    meanfield.errors.InputError
        A value out of range or an unknown scheme (the message names the parameter and the
        range; on the command line, the flag as typed), or t_final / η below one step.
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

    dim: int = _field(
        1,
        Param("dim", "int", "particle dimension p", low=1, high=2, choices=(1, 2)),
    )
    radius: float = _field(
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
    cells: int | None = _field(
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
    n_data: int = _field(
        200, Param("n_data", "int", "number of data points of the radial task", low=2)
    )
    lam: float = _field(
        0.5,
        Param("lam", "real", "Coulomb interaction strength lambda", low=0.0, label="lam (lambda)"),
    )
    init_mean: float = _field(0.0, Param("init_mean", "real", "mean of the Gaussian initial law"))
    init_std: float | None = _field(
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
    beta: float = _field(
        10.0, replace(RUN_PARAMS["beta"], doc="inverse temperature beta (mean-field regime)")
    )
    n_particles: int | None = _field(
        None,
        replace(
            RUN_PARAMS["n_particles"],
            doc=f"number of particles N ({_by_dimension('n_particles')})",
            optional=True,
        ),
    )
    eta: float = _field(0.005, replace(RUN_PARAMS["eta"], doc="particle step size eta"))
    t_final: float | None = _field(
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
    seed: int = _field(0, replace(RUN_PARAMS["seed"], doc="seed of the particle sample and noise"))
    scheme: str = _field(
        "upwind",
        Param(
            "scheme",
            "string",
            "grid flux scheme: upwind, sg, sg-implicit, chang-cooper, sg-mprk22, sg-mprk22-split",
            examples=("upwind", "sg"),
        ),
    )
    order: int = _field(
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
    safety: float = _field(
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

    def __post_init__(self):
        # every field by its declaration (the run parameters a RunSpec shares are declared
        # once, meanfield.contract.RUN_PARAMS), before anything heavy is imported; None
        # leaves a per-dimension field at its default for this dim
        check_declared(self)
        for name, values in PER_DIMENSION.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, values[self.dim - 1])

        from .._resources import check_grid_memory
        from ..dynamics.spec import MAX_STEPS, check_work, estimate_work, n_steps_for
        from ..pde.flux import SCHEMES

        # declared as a string: the schemes are the flux module's, which imports torch
        check_choice("scheme", self.scheme, SCHEMES)
        n_steps = n_steps_for(self.t_final, self.eta, max_steps=MAX_STEPS)
        # before anything is allocated (a 100000² grid: 80 GB for the density alone)
        cells = (self.cells,) * self.dim
        check_grid_memory("cells (grid cells per axis)", cells, pair_terms=int(self.lam > 0))
        # the work RunSpec would refuse, refused here from the fields alone (before the data
        # is drawn and the energy built): the energy always holds the pair term (of strength
        # lam), so every particle has N - 1 partners, and the alignment term n_data points
        N, M = self.n_particles, self.cells**self.dim
        work = estimate_work(
            n_steps=n_steps, n_particles=N, partners=N - 1, n_data=self.n_data, cells=M
        )
        check_work(
            work,
            detail=f"{n_steps} steps = round(t_final / eta) x ({N} particles x (1 + {N - 1} "
            f"pair partners + {self.n_data} data points) + the fixed cost of a step + {M} grid "
            "cells)",
        )

    @functools.cached_property
    def data(self):
        """The training data (X, y) of the radial task: ``n_data`` points in d = ``dim``.

        Examples
        --------
        >>> from meanfield.workbench.problems import ComparisonConfig
        >>> X, y = ComparisonConfig(dim=2, n_data=10).data
        >>> X.shape, sorted(set(y.tolist()))
        ((10, 2), [-1.0, 1.0])
        """
        from ..learners.tasks import radial

        split = radial(self.n_data, 1, d=self.dim, seed=0)
        return split.X_train, split.y_train

    @functools.cached_property
    def energy(self):
        """The :class:`~meanfield.energy.Energy`: confinement, linear alignment on
        :attr:`data`, Coulomb repulsion of strength λ, on the box [−R, R]^p.

        Examples
        --------
        >>> from meanfield.workbench.problems import ComparisonConfig
        >>> ComparisonConfig(n_data=10, radius=3.0).energy.domain
        Box(dim=1, half_width=3.0)
        """
        from ..domains import Box
        from ..energy import Energy, LinearAlignment, PairInteraction, QuadraticPotential
        from ..kernels import Coulomb

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
        ``seed``, ``scheme``, ``order``, ``safety``); ``grid_n``, the former name of
        ``cells``, works for one release with a DeprecationWarning.

    Returns
    -------
    ComparisonConfig
        The problem: ``.energy``, ``.initial``, ``.data`` = (X, y), the run parameters, and
        ``.spec()`` for :func:`~meanfield.workbench.compare.compare`.  (Reading it as the
        dict of the previous version warns.)

    Raises
    ------
    ValueError
        An unknown parameter (the message lists the allowed ones), or one out of range.

    Examples
    --------
    >>> from meanfield.workbench.problems import default_problem
    >>> prob = default_problem(1, n_data=20, cells=32)
    >>> prob.energy.term_names, prob.n_particles, prob.data[0].shape
    (['confinement', 'alignment', 'interaction'], 500, (20, 1))
    """
    spelled = {}
    if "grid_n" in overrides:
        warnings.warn(
            "default_problem(grid_n=...) is deprecated and will be removed in the next "
            "version; use cells=...",
            DeprecationWarning,
            stacklevel=2,
        )
        overrides["cells"] = overrides.pop("grid_n")
        spelled["cells"] = "grid_n"
    known = {f.name for f in fields(ComparisonConfig)} - {"dim"}
    unknown = set(overrides) - known
    if unknown:
        raise ValueError(
            f"unknown default-problem parameter(s) {sorted(unknown)}; choose from {sorted(known)}"
        )
    with spelled_as(spelled):
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


def __getattr__(name: str):
    """``DEFAULTS``, the dicts of the previous version (p -> parameter -> value), for one
    release with a DeprecationWarning: the defaults are :class:`ComparisonConfig`'s."""
    if name == "DEFAULTS":
        warnings.warn(
            "meanfield.workbench.problems.DEFAULTS is deprecated and will be removed in the "
            "next version: the defaults are those of ComparisonConfig(dim=p)",
            DeprecationWarning,
            stacklevel=2,
        )
        keep = ("radius", "cells", "n_data", "lam", "beta", "n_particles", "eta", "t_final")
        out = {}
        for p in (1, 2):
            values = {f.name: f.default for f in fields(ComparisonConfig)}
            values.update({k: v[p - 1] for k, v in PER_DIMENSION.items()})
            out[p] = {("grid_n" if k == "cells" else k): values[k] for k in keep}
            out[p] |= {"init_mean": values["init_mean"], "init_std": values["init_std"]}
        return out
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PER_DIMENSION", "ComparisonConfig", "default_problem", "run_default_comparison"]
