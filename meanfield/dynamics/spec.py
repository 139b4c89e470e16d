r"""One run of the model, for both views: the typed run specification.

A :class:`RunSpec` holds everything that fixes a run: the energy, the initial law (or the
initial particles), β, the regime, the particles' step η and number of steps (so the time
t = η · steps), N, the seed, and the grid's scheme.  It is checked once, when it is made
(every message names the parameter and its allowed range), and then read by

* :func:`meanfield.dynamics.langevin.simulate` (the particles: ``simulate(spec)``),
* :func:`meanfield.workbench.compare.compare` (particles and grid side by side),
* :meth:`RunSpec.equation` (the grid: the McKean–Vlasov equation, its scheme bound to the
  grid and β), and the studies, which make one spec per run.

Making a spec also estimates the run's work (:func:`estimate_work`: steps × N × pair
partners and data points, plus the grid's cells; N − 1 partners for an exact pair sum,
c log₂ N for a fast one) and refuses one above the ceiling
:data:`MAX_WORK` (10¹³ evaluations; the environment variable ``MEANFIELD_MAX_WORK`` raises
it) with a :class:`~meanfield.errors.SizeLimitError`, so a run that would never end
(``n_steps = 10**12``) is refused before it starts.

The configurations that the command line and TOML files fill, in plain names and numbers
(:class:`~meanfield.workbench.config.SimulationConfig` for ``meanfield simulate``,
:class:`~meanfield.workbench.problems.ComparisonConfig` for ``meanfield compare``), build
their energy and initial law and return a spec from ``.spec()``.  The checks of the
parameters they share with a spec are written once, in :data:`RUN_CHECKS`.

Examples
--------
>>> from meanfield.domains import Box
>>> from meanfield.dynamics.spec import RunSpec
>>> from meanfield.energy import Energy, QuadraticPotential
>>> from meanfield.pde import Density, Grid
>>> box = Box(1, 2.0)
>>> spec = RunSpec(
...     energy=Energy([QuadraticPotential()], box),
...     initial=Density.gaussian(Grid(box, 16), 0.0, 0.5),
...     n_particles=20, beta=10.0, eta=0.01, n_steps=5,
... )
>>> spec.t_final, spec.particles().shape, spec.equation().scheme.beta
(0.05, (20, 1), 10.0)
>>> RunSpec(energy=spec.energy, initial=spec.initial, beta=-1.0, eta=0.01, n_steps=5)
Traceback (most recent call last):
    ...
meanfield.errors.InputError: beta (inverse temperature) must be a finite number in (0, inf), ...
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import (
    check_array,
    check_choice,
    check_output_path,
    check_positive,
    env_ceiling,
    shown,
)
from ..contract import RUN_METHODS, RUN_PARAMS
from ..energy import Energy, PairInteraction
from ..errors import (
    InputError,
    InputTypeError,
    MissingFileError,
    SizeLimitError,
    StepBudgetError,
)
from ..pde.field import Density
from ..pde.schemes import SCHEMES, Scheme

#: The integrators of :func:`~meanfield.dynamics.langevin.simulate` (HMC runs through
#: :func:`~meanfield.dynamics.hmc.sample_hmc`); declared with the run parameters
#: (:data:`meanfield.contract.registry.RUN_METHODS`).
METHODS = RUN_METHODS
#: Default step budget of a side-by-side run (:func:`meanfield.workbench.compare.compare`),
#: for the particles and the grid alike (the default ``max_steps`` of
#: :func:`meanfield.pde.solve`).
MAX_STEPS = 10_000_000

#: The work ceiling of one run, in evaluations (:func:`estimate_work`): 10¹³, about 70 hours
#: of one CPU thread at the 4·10⁷ pair evaluations a second measured for float64 Coulomb
#: forces (N = 1024), minutes to hours on a GPU.  It is there to refuse a run that would
#: never end (``n_steps = 10**12``), before it starts, not to plan one: every configuration
#: and study of the package lies far below it.  Raise it by the environment variable
#: :data:`WORK_ENV` (``MEANFIELD_MAX_WORK=1e15``; ``inf`` turns the check off) or by
#: assigning this constant.
MAX_WORK = 1e13
#: The environment variable that replaces :data:`MAX_WORK` when set.
WORK_ENV = "MEANFIELD_MAX_WORK"
#: The fixed cost of one step, in evaluations: a step costs at least ~0.1 ms of Python and
#: torch dispatch whatever N (measured 80 µs at N = 2), the time of ~10⁴ pair evaluations.
STEP_COST = 1e4
#: The pair partners a fast pair sum (:class:`meanfield.fastsums.FastCoulombInteraction`)
#: counts per particle, per log₂ N: its force is O(N log N), so a step costs c N log₂ N pair
#: evaluations, c = 100.  Measured at N = 10⁶ (``docs/performance.rst``, one thread of a loaded
#: 2-core machine, at the 4·10⁷ evaluations a second of :data:`MAX_WORK`): the p = 3 FMM 40 CPU-s
#: a force (81 N log₂ N), the p = 2 Ewald sum 7.9 s (16), a whole p = 2 Langevin step with its
#: O(N log N) near-field pass (:mod:`meanfield.dynamics.near_field`) 34 s (68); 100 bounds them.
FAST_SUM_PARTNERS_PER_LOG2N = 100.0


def _check_scheme(value):
    return value if isinstance(value, Scheme) else check_choice("scheme", value, SCHEMES)


def _check_order(value):
    if value not in (1, 2) or isinstance(value, bool):
        raise InputError(f"{shown('order')} must be 1 or 2 (upwind reconstruction), got {value!r}")
    return int(value)


def _check_safety(value):
    value = check_positive("safety", value)
    if value > 1:
        raise InputError(f"{shown('safety')} must be in (0, 1], got {value}")
    return value


#: The check of every run parameter a :class:`RunSpec` shares with the plain configurations:
#: name -> function(value) -> the checked value (raising with the parameter's name and range).
#: The particle parameters are those the contract declares
#: (:data:`meanfield.contract.registry.RUN_PARAMS`), the grid's are checked here.
RUN_CHECKS = {
    **{
        name: RUN_PARAMS[name].check
        for name in ("beta", "eta", "n_steps", "n_particles", "regime", "method", "seed")
    },
    "scheme": _check_scheme,
    "order": _check_order,
    "safety": _check_safety,
}


def check_fields(obj, names, *, store: bool = False) -> None:
    """Check the fields ``names`` of the dataclass ``obj`` by :data:`RUN_CHECKS` (None: unset).

    Parameters
    ----------
    obj : dataclass instance
        A spec or a configuration (frozen or not).
    names : iterable of str
        Keys of :data:`RUN_CHECKS`, checked in this order.
    store : bool, default False
        Write the checked values back (floats for the real parameters, ints for the counts).

    See Also
    --------
    RunSpec : the dataclass whose fields it checks.
    check_batches : the random batches, checked.
    meanfield.contract : the parameter contract behind the checks.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from meanfield.dynamics.spec import check_fields
    >>> check_fields(SimpleNamespace(beta=2, seed=None), ["beta", "seed"])  # fine
    >>> check_fields(SimpleNamespace(seed=-1), ["seed"])
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: seed must be an integer in [0, 9223372036854775807], got -1
    """
    for name in names:
        value = getattr(obj, name)
        if value is not None:
            checked = RUN_CHECKS[name](value)
            if store:
                object.__setattr__(obj, name, checked)


def check_batches(method: str, energy: Energy, interaction_batch, data_batch):
    """The random batches of a particle run, checked: ``(interaction_batch, data_batch)``.

    Projected Langevin only (MALA samples the exact Gibbs law); B ≥ 2 for the pair term,
    2 ≤ ``data_batch`` ≤ the energy's number of data points for the alignment.

    Parameters
    ----------
    method : {"langevin", "mala"}
    energy : Energy
    interaction_batch, data_batch : int or None

    Returns
    -------
    (int or None, int or None)

    See Also
    --------
    RunSpec : ``interaction_batch`` and ``data_batch`` of a run.
    meanfield.dynamics.langevin.ProjectedLangevin : the step that draws the batches.
    estimate_work : the work, which the batches lower.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.dynamics.spec import check_batches
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> E = Energy([QuadraticPotential()], Box(1, 1.0))
    >>> check_batches("langevin", E, 4, None)
    (4, None)
    >>> check_batches("langevin", E, None, 4)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: data_batch needs an energy with an alignment (data) term
    """
    if method == "mala" and (interaction_batch is not None or data_batch is not None):
        raise InputError(
            "method 'mala' samples the exact Gibbs law: it takes neither "
            "interaction_batch nor data_batch"
        )
    interaction_batch = RUN_PARAMS["interaction_batch"].check(interaction_batch)
    if data_batch is not None:
        data_batch = RUN_PARAMS["data_batch"].check(data_batch)
        n = energy.n_data()
        if n is None:
            raise InputError("data_batch needs an energy with an alignment (data) term")
        if data_batch > n:
            raise InputError(f"data_batch must be in [2, n={n}], got {data_batch}")
    return interaction_batch, data_batch


def n_steps_for(t_final: float, eta: float, *, max_steps: int | None = None) -> int:
    """The particle steps round(t_final / η) of a run to time ``t_final``, checked.

    Parameters
    ----------
    t_final, eta : float
        Final time and step, both > 0.
    max_steps : int, optional
        The most steps allowed (a run budget); None for no limit.

    Returns
    -------
    int
        ≥ 1.

    Raises
    ------
    meanfield.errors.InputError
        A bad time or step, or fewer than one step.
    meanfield.errors.StepBudgetError
        More than ``max_steps`` steps.

    See Also
    --------
    as_spec : where ``t_final`` becomes ``n_steps``.
    check_work : the ceiling on the work of those steps.
    meanfield.pde.solver.check_step_budget : the grid's own step budget.

    Examples
    --------
    >>> from meanfield.dynamics.spec import n_steps_for
    >>> n_steps_for(2.0, 0.005)
    400
    >>> n_steps_for(1e9, 0.005, max_steps=10_000_000)
    Traceback (most recent call last):
        ...
    meanfield.errors.StepBudgetError: t_final / eta = 1e+09 / 0.005 gives 2e+11 particle steps, ...
    """
    t_final = check_positive("t_final", t_final)
    eta = RUN_CHECKS["eta"](eta)
    T, E = shown("t_final"), shown("eta")
    n_steps = int(round(t_final / eta))
    if n_steps < 1:
        raise InputError(f"{T} / {E} must give at least one step, got {t_final:g} / {eta:g}")
    if max_steps is not None and n_steps > max_steps:
        raise StepBudgetError(
            f"{T} / {E} = {t_final:g} / {eta:g} gives {n_steps:.3g} particle steps, above "
            f"max_steps = {max_steps} (allowed: {T} / {E} <= {max_steps}); lower {T} or "
            f"raise {E}"
        )
    return n_steps


def estimate_work(
    *,
    n_steps: int,
    n_particles: int,
    replicas: int = 1,
    partners: float = 0,
    n_data: int = 0,
    cells: int = 0,
    evaluations: int = 1,
) -> float:
    r"""The work of a run, in evaluations (pair-kernel or feature evaluations, or their
    equivalent), estimated before it starts.

    .. math::

        W = \text{steps} \cdot \Big( e \, \big(R N (1 + P + n) + c_{\text{step}}\big)
        + M \Big)

    with e the energy evaluations per step (1 for Langevin, 2 for MALA: the proposal's
    energy and force), R replicas of N particles, P pair partners per particle (N − 1 for the
    full pair sum, c log₂ N for a fast sum (:data:`FAST_SUM_PARTNERS_PER_LOG2N`), B − 1 in
    random batches of B, 0 without a pair term), n data points per
    particle for an alignment term (or the data batch), :data:`STEP_COST` the fixed cost of a
    step, and M grid cells updated per step (the grid view, with as many steps as the
    particles: a lower bound, as its stable step is often smaller).

    Parameters
    ----------
    n_steps, n_particles : int
        Steps and particles N.
    replicas, n_data, cells, evaluations : int
        R, n, M and e above.
    partners : float
        P above.

    Returns
    -------
    float

    See Also
    --------
    check_work : refuse a run above the ceiling.

    Examples
    --------
    >>> from meanfield.dynamics.spec import estimate_work
    >>> estimate_work(n_steps=400, n_particles=256, partners=255)  # 400 (256 * 256 + 1e4)
    30214400.0
    """
    per_step = evaluations * (replicas * n_particles * (1 + partners + n_data) + STEP_COST)
    return float(n_steps) * (per_step + cells)


def work_ceiling() -> float:
    """The work ceiling in force: the environment variable :data:`WORK_ENV` if set, else
    :data:`MAX_WORK`.

    Returns
    -------
    float
        > 0 (``inf``: no ceiling).

    Raises
    ------
    meanfield.errors.InputError
        The environment variable is not a number > 0.

    See Also
    --------
    check_work : the check against the ceiling.
    estimate_work : the work compared with it.
    meanfield.pde.grid.grid_bytes_ceiling : the grid's memory ceiling.

    Examples
    --------
    >>> from meanfield.dynamics.spec import work_ceiling
    >>> work_ceiling() > 0
    True
    """
    return env_ceiling(WORK_ENV, MAX_WORK, "the work ceiling in evaluations")


def check_work(work: float, *, detail: str = "") -> float:
    """Refuse a run whose estimated work (:func:`estimate_work`) exceeds the ceiling
    (:func:`work_ceiling`), before it starts.

    Parameters
    ----------
    work : float
        The estimate, in evaluations.
    detail : str, optional
        How it was computed, for the message.

    Returns
    -------
    float
        ``work``.

    Raises
    ------
    meanfield.errors.SizeLimitError
        ``work`` > the ceiling; the message names ``n_steps`` and ``n_particles`` and says
        how to raise the ceiling.

    See Also
    --------
    estimate_work : the work it checks.
    work_ceiling : the ceiling in force.
    meanfield.errors.SizeLimitError : what it raises.
    meanfield.pde.grid.check_grid_size : the grid's memory check.

    Examples
    --------
    >>> from meanfield.dynamics.spec import check_work, estimate_work
    >>> check_work(estimate_work(n_steps=10**12, n_particles=256, partners=255))
    Traceback (most recent call last):
        ...
    meanfield.errors.SizeLimitError: n_steps, n_particles: the run would need about 7.55e+16 ...
    """
    ceiling = work_ceiling()
    if work > ceiling:
        steps, n = shown("n_steps"), shown("n_particles")
        raise SizeLimitError(
            f"{steps}, {n}: the run would need about {work:.3g} evaluations"
            f"{f' ({detail})' if detail else ''}, above the work ceiling {ceiling:.3g}; lower "
            f"{steps} or {n} (or use random batches), or raise the ceiling: set the "
            f"environment variable {WORK_ENV} (e.g. {WORK_ENV}=1e15; inf turns the check off) "
            "or meanfield.dynamics.spec.MAX_WORK"
        )
    return work


def _work_detail(n_steps, N, replicas, partners, n_data, cells, evaluations) -> str:
    """The terms of :func:`estimate_work`, in words, for a refusal."""
    parts = [f"{N} particles" if replicas == 1 else f"{replicas} x {N} particles"]
    parts.append(f"x (1 + {partners:.6g} pair partners + {n_data} data points)")
    text = f"{n_steps} steps x ({evaluations} x ({' '.join(parts)} + {STEP_COST:g} per step)"
    return text + (f" + {cells} grid cells)" if cells else ")")


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)
class RunSpec:
    r"""Every parameter of one run, both views, checked once when made.

    The particles follow projected Langevin (or MALA) from N samples of the initial law (or
    from the given particles) for ``n_steps`` steps of size η; the grid follows the
    McKean–Vlasov equation from the initial law to the same time t = η · n_steps:

    .. math::

        d\omega_i = -N \nabla_{\omega_i} H_N(\Omega)\, dt + \sqrt{2/\beta_N}\, dW_i, \qquad
        \partial_t \rho = \nabla \cdot \Big(\rho\, \nabla \frac{\delta E}{\delta \rho}\Big)
        + \beta^{-1} \Delta \rho.

    Parameters
    ----------
    energy : Energy
        The model.
    initial : Density or array_like
        The initial law on a grid of the energy's box (the particles sample it iid; the grid
        starts from it, normalised to mass 1), or the initial particles, shape (N, p) or
        (R, N, p) for R replicas (a particle run only).
    beta : float
        Inverse temperature β > 0.
    eta : float
        Langevin step η > 0.
    n_steps : int
        Particle steps ≥ 1; the final time is t = η · n_steps (:attr:`t_final`;
        :func:`n_steps_for` converts a time).
    n_particles : int, optional
        N ≥ 1: needed with an initial law; with particles, their number (checked if given).
    regime : {"mean-field", "coulomb-gas"}, default "mean-field"
        β_N = β or β_N = βN (the grid is the mean-field limit).
    method : {"langevin", "mala"}, default "langevin"
        Projected Langevin (Algorithm 1) or the Metropolis-adjusted sampler.
    interaction_batch, data_batch : int, optional
        Random-batch size B ≥ 2 of the pair force, mini-batch of data rows (Langevin only).
    seed : int, default 0
        Seeds the sample of the initial law and the noise; in [0, 2⁶³ − 1].
    scheme : str or Scheme, default "upwind"
        Grid flux scheme (:data:`meanfield.pde.schemes.SCHEMES`).
    order : {1, 2}, default 2
        Order of the upwind reconstruction.
    safety : float in (0, 1], default 0.5
        Fraction of the stable grid step taken.

    Raises
    ------
    meanfield.errors.InputError
        A value out of range (the message names the parameter and the range), an initial law
        on another box, or no ``n_particles`` with an initial law.
    meanfield.errors.InputTypeError
        ``energy`` is not an Energy, or a parameter of the wrong type (a boolean for a
        number).
    meanfield.errors.SizeLimitError
        The estimated work (:meth:`RunSpec.work`) exceeds the ceiling (:func:`work_ceiling`).

    See Also
    --------
    as_spec : a spec from either form.
    meanfield.dynamics.langevin.simulate : the particle view of a spec.
    meanfield.pde.solver.solve : the grid view (the McKean–Vlasov equation).
    meanfield.dynamics.description.to_dict : a spec as plain data and TOML.
    meanfield.workbench.compare.compare : particles against grid over time.

    References
    ----------
    - A.-S. Sznitman, "Topics in propagation of chaos", École d'Été de Probabilités de Saint-Flour
      XIX — 1989, Lecture Notes in Math. 1464, Springer, 1991, 165–251 (the N → ∞ limit the two
      views share).

    Examples
    --------
    Particles given directly (N comes from their shape), and a field changed:

    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.dynamics.spec import RunSpec
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> spec = RunSpec(energy=Energy([QuadraticPotential()], Box(1, 2.0)),
    ...                initial=np.zeros((5, 1)), beta=1.0, eta=0.01, n_steps=10)
    >>> spec.n_particles, spec.replace(seed=3).seed, spec.law is None
    (5, 3, True)
    >>> spec.replace(regime="hot")
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown regime 'hot'; choose one of 'mean-field', 'coulomb-gas'
    """

    energy: Energy
    initial: Any
    beta: float
    eta: float
    n_steps: int
    n_particles: int | None = None
    regime: str = "mean-field"
    method: str = "langevin"
    interaction_batch: int | None = None
    data_batch: int | None = None
    seed: int = 0
    scheme: Any = "upwind"
    order: int = 2
    safety: float = 0.5

    def __post_init__(self):
        if not isinstance(self.energy, Energy):
            raise InputTypeError(f"energy must be a meanfield.energy.Energy, got {self.energy!r}")
        check_fields(self, RUN_CHECKS, store=True)
        batches = check_batches(self.method, self.energy, self.interaction_batch, self.data_batch)
        object.__setattr__(self, "interaction_batch", batches[0])
        object.__setattr__(self, "data_batch", batches[1])
        self._check_initial()
        check_work(self.work(), detail=_work_detail(**self._work_terms()))

    def _work_terms(self) -> dict:
        """The terms of :func:`estimate_work` for this spec."""
        shape = tuple(getattr(self.initial, "shape", None) or np.shape(self.initial))
        replicas = int(shape[0]) if len(shape) == 3 else 1
        N = int(self.n_particles or 1)
        pairs = [t for t in self.energy.terms if isinstance(t, PairInteraction)]
        partners = max((self._pair_partners(t, N) for t in pairs), default=0)
        n_data = self.data_batch or self.energy.n_data() or 0
        cells = int(np.prod(self.grid.n)) if self.grid is not None else 0
        evaluations = 2 if self.method == "mala" else 1
        return dict(
            n_steps=self.n_steps,
            N=N,
            replicas=replicas,
            partners=partners,
            n_data=n_data,
            cells=cells,
            evaluations=evaluations,
        )

    def _pair_partners(self, term, N: int) -> float:
        """Pair partners per particle of one pair term in a step: B − 1 in random batches of
        B (direct within a batch, fast sum or not), c log₂ N for a fast sum where the step is
        O(N log N), N − 1 for the exact sum."""
        if self.interaction_batch:
            return self.interaction_batch - 1
        from ..fastsums import DIRECT_BELOW, FastCoulombInteraction
        from .near_field import _NEAR_TREE_MIN_N

        if isinstance(term, FastCoulombInteraction):
            direct_below = DIRECT_BELOW.get(self.energy.domain.dim, 0)
            direct_below = direct_below if term.min_n is None else term.min_n
            # below both thresholds the step is O(N²): the fast sum's direct sum, and the dense
            # near-field pass of its singular kernel (the k-d tree from _NEAR_TREE_MIN_N, CPU)
            if N >= max(direct_below, _NEAR_TREE_MIN_N):
                return FAST_SUM_PARTNERS_PER_LOG2N * math.log2(N)
        return N - 1

    def work(self) -> float:
        """The run's estimated work in evaluations (:func:`estimate_work`), checked against
        the ceiling (:data:`MAX_WORK`) when the spec is made.

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> E = Energy([QuadraticPotential()], Box(1, 1.0))
        >>> RunSpec(energy=E, initial=np.zeros((3, 1)), beta=1.0, eta=0.1, n_steps=2).work()
        20006.0
        """
        t = self._work_terms()
        return estimate_work(n_particles=t.pop("N"), **t)

    def _check_initial(self) -> None:
        """The initial law lies on the energy's box and has an N; particles agree with N."""
        initial = self.initial
        if isinstance(initial, Density):
            from ..pde.potential import check_same_domain

            check_same_domain(self.energy, initial.grid)
            if self.n_particles is None:
                raise InputError(
                    "n_particles (N) is needed with an initial law (a Density): the particles "
                    "are N iid samples of it"
                )
            return
        if initial is None:
            raise InputTypeError(
                "initial must be a meanfield.pde.Density (the initial law) or the initial "
                "particles, shape (N, p) or (R, N, p); got None"
            )
        shape = tuple(getattr(initial, "shape", None) or np.shape(initial))
        if len(shape) < 2:
            return  # the chain's own check names the array (omega0) and the shapes it takes
        check_array("initial (omega0, the initial particles)", initial)  # real, finite, named
        if self.n_particles is None:
            object.__setattr__(self, "n_particles", int(shape[-2]))
        elif self.n_particles != shape[-2]:
            raise InputError(
                f"n_particles (N) = {self.n_particles}, but the initial particles are "
                f"{shape[-2]} (shape {shape}); drop n_particles or make them agree"
            )

    @property
    def t_final(self) -> float:
        """The final time t = η · n_steps (the particles' time; the grid's end time).

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> E = Energy([QuadraticPotential()], Box(1, 1.0))
        >>> RunSpec(energy=E, initial=np.zeros((3, 1)), beta=1.0, eta=0.25, n_steps=6).t_final
        1.5
        """
        return self.eta * self.n_steps

    @property
    def grid(self):
        """The grid of the initial law (:class:`~meanfield.pde.grid.Grid`), None for particles.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> box = Box(1, 1.0)
        >>> rho = Density.uniform(Grid(box, 8))
        >>> E = Energy([QuadraticPotential()], box)
        >>> RunSpec(energy=E, initial=rho, n_particles=4, beta=1.0, eta=0.1, n_steps=1).grid.n
        (8,)
        """
        return self.initial.grid if isinstance(self.initial, Density) else None

    @functools.cached_property
    def law(self) -> Density | None:
        """The initial law normalised to mass 1, what both views start from (None for particles).

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> box = Box(1, 1.0)
        >>> rho = Density(Grid(box, 4), [2.0, 2.0, 0.0, 0.0])
        >>> E = Energy([QuadraticPotential()], box)
        >>> RunSpec(energy=E, initial=rho, n_particles=4, beta=1.0, eta=0.1, n_steps=1).law.mass
        1.0
        """
        return self.initial.normalised() if isinstance(self.initial, Density) else None

    def particles(self):
        """The initial particles: N iid samples of :attr:`law` (seeded by ``seed``), or the
        particles given as ``initial``.

        Returns
        -------
        numpy.ndarray of shape (N, p), or what ``initial`` holds

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> box = Box(1, 1.0)
        >>> rho = Density(Grid(box, 4), [0.0, 0.0, 0.0, 1.0])  # all mass in [0.5, 1]
        >>> E = Energy([QuadraticPotential()], box)
        >>> spec = RunSpec(energy=E, initial=rho, n_particles=6, beta=1.0, eta=0.1, n_steps=1)
        >>> x = spec.particles()
        >>> x.shape, bool((x >= 0.5).all())
        ((6, 1), True)
        """
        if self.law is None:
            return self.initial
        return self.law.sample(self.n_particles, self.seed)

    def equation(self, *, workers: int | None = None):
        """The grid view: the McKean–Vlasov equation of this energy on the initial law's grid,
        its scheme bound to that grid and β.

        Parameters
        ----------
        workers : int, optional
            Threads for the FFTs.

        Returns
        -------
        meanfield.pde.McKeanVlasov

        Raises
        ------
        meanfield.errors.InputError
            The initial state is particles: there is no grid.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Density, Grid
        >>> box = Box(1, 1.0)
        >>> E, rho = Energy([QuadraticPotential()], box), Density.uniform(Grid(box, 8))
        >>> spec = RunSpec(energy=E, initial=rho, n_particles=4, beta=2.0, eta=0.1, n_steps=1,
        ...                scheme="sg")
        >>> spec.equation()
        McKeanVlasov(grid=Grid(domain=Box(dim=1, half_width=1.0), n=(8,)), beta=2, scheme='sg')
        """
        if self.law is None:
            raise InputError(
                "the grid view needs an initial law on a grid (a meanfield.pde.Density); "
                "this spec starts from particles"
            )
        from ..pde.equation import McKeanVlasov

        return McKeanVlasov(
            self.energy, self.grid, self.beta, scheme=self.scheme, order=self.order, workers=workers
        )

    def replace(self, **changes) -> RunSpec:
        """A new spec with ``changes`` (checked as a new spec is).

        Parameters
        ----------
        **changes
            Field values.

        Returns
        -------
        RunSpec

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> E = Energy([QuadraticPotential()], Box(1, 1.0))
        >>> spec = RunSpec(energy=E, initial=np.zeros((3, 1)), beta=1.0, eta=0.1, n_steps=2)
        >>> spec.replace(n_steps=5).t_final
        0.5
        """
        return dataclasses.replace(self, **changes)

    def describe(self) -> dict:
        """The plain parameters (everything but the energy and the initial state).

        Returns
        -------
        dict
            Field name -> value, with ``t_final``; a Scheme object is given by its name.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> E = Energy([QuadraticPotential()], Box(1, 1.0))
        >>> d = RunSpec(energy=E, initial=np.zeros((3, 1)), beta=1.0, eta=0.1, n_steps=2).describe()
        >>> d["n_particles"], d["regime"], d["t_final"]
        (3, 'mean-field', 0.2)
        """
        out = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("energy", "initial")
        }
        if isinstance(self.scheme, Scheme):
            out["scheme"] = self.scheme.name
        return {**out, "t_final": self.t_final}

    def to_toml(self, path) -> Path:
        """Write the whole run (:func:`~meanfield.dynamics.description.to_dict`) as a TOML
        file that :meth:`from_toml` reads back to an equal spec; ``meanfield run FILE`` runs it.

        The text is read back and compared before it is written, so a file that would not
        rebuild this spec is never written.

        Parameters
        ----------
        path : str or path-like
            The file, created or replaced (a regular file; its missing folders are made).

        Returns
        -------
        pathlib.Path

        Raises
        ------
        meanfield.errors.InputTypeError
            A part that cannot be described (a kernel or potential around a Python
            function, a class defined inside a function), named in the message.
        meanfield.errors.SizeLimitError
            Initial particles (or data) above
            :data:`~meanfield.dynamics.description.MAX_ARRAY_ELEMENTS` numbers.
        meanfield.errors.OutputPathError
            ``path`` names a folder, a device or a FIFO, or lies under a file.

        Examples
        --------
        >>> import numpy as np, pathlib, tempfile
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> E = Energy([QuadraticPotential()], Box(1, 1.0))
        >>> spec = RunSpec(energy=E, initial=np.zeros((3, 1)), beta=1.0, eta=0.1, n_steps=2)
        >>> path = spec.to_toml(pathlib.Path(tempfile.mkdtemp()) / "run.toml")
        >>> RunSpec.from_toml(path).describe() == spec.describe()
        True
        """
        import tomllib

        from .description import _same, from_dict, to_dict, toml_text

        d = to_dict(self)
        text = toml_text(d)
        if not _same(to_dict(from_dict(tomllib.loads(text))), d):  # None left out: defaults
            raise InputTypeError(
                "this spec does not survive its TOML file (a field set to None whose default "
                "is not None); RunSpec.to_toml refuses it"
            )
        path = check_output_path("path", path, kind="file")  # no device, FIFO or folder
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    @classmethod
    def from_toml(cls, path) -> RunSpec:
        """The spec a TOML file describes (written by :meth:`to_toml`, or by hand: see
        ``docs/cli.rst``, "meanfield run").

        Parameters
        ----------
        path : str or path-like
            A UTF-8 TOML file whose top level is a RunSpec description (``type =
            "RunSpec"``).  Its ``"module:Class"`` names are imported: read only files you
            trust.

        Returns
        -------
        RunSpec

        Raises
        ------
        meanfield.errors.MissingFileError
            No such file.
        meanfield.errors.InputError
            Not a file, not TOML, not a RunSpec, or a part refused by
            :func:`~meanfield.dynamics.description.from_dict` (the message names it).

        Examples
        --------
        >>> RunSpec.from_toml("no-such-run.toml")
        Traceback (most recent call last):
            ...
        meanfield.errors.MissingFileError: run file no-such-run.toml does not exist
        """
        import tomllib

        from .description import from_dict

        path = Path(path)
        if not path.exists():
            raise MissingFileError(f"run file {path} does not exist")
        if not path.is_file():
            raise InputError(f"run file {path} is not a file (a TOML file is expected)")
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise InputError(f"run file {path} is not valid TOML: {err}") from None
        if raw.get("type") != "RunSpec":
            raise InputError(
                f'run file {path}: its top level must describe a RunSpec (type = "RunSpec"), '
                f"got type = {raw.get('type')!r}"
            )
        return from_dict(raw)

    def __repr__(self) -> str:
        if isinstance(self.initial, Density):
            start = f"Density on {self.initial.grid!r}"
        else:
            start = f"particles {tuple(np.shape(self.initial))}"
        plain = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if v is not None)
        return f"RunSpec(energy={self.energy.term_names}, initial={start}, {plain})"


def as_spec(spec, initial=None, *, max_steps: int | None = None, **fields) -> RunSpec:
    """The spec of a run given in either form: a :class:`RunSpec` (the ``fields`` given,
    not None, replace its own), or the keyword form (an Energy, the initial state and the
    fields).  ``t_final`` stands for ``n_steps`` = :func:`n_steps_for` (t_final, eta,
    max_steps).

    Parameters
    ----------
    spec : RunSpec or Energy
    initial : Density or array_like, optional
        The keyword form's initial state (refused with a spec, which holds its own).
    max_steps : int, optional
        Step budget applied to ``t_final``.
    **fields
        Fields of :class:`RunSpec` (None: not given), and ``t_final``.

    Returns
    -------
    RunSpec

    See Also
    --------
    RunSpec : the specification it returns.
    n_steps_for : ``t_final`` as a number of steps.
    meanfield.dynamics.langevin.simulate : a runner that takes either form.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.dynamics.spec import as_spec
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> E = Energy([QuadraticPotential()], Box(1, 1.0))
    >>> spec = as_spec(E, np.zeros((3, 1)), beta=1.0, eta=0.1, t_final=0.5, seed=None)
    >>> spec.n_steps, as_spec(spec, seed=4).seed
    (5, 4)
    """
    given = {k: v for k, v in fields.items() if v is not None}
    if isinstance(spec, RunSpec):
        if initial is not None:
            raise InputTypeError(
                "a RunSpec holds its initial state (spec.initial): give no second argument, "
                "or replace it with initial=..."
            )
        if "t_final" in given:
            eta = given.get("eta", spec.eta)
            given["n_steps"] = n_steps_for(given.pop("t_final"), eta, max_steps=max_steps)
        return spec.replace(**given) if given else spec
    if "t_final" in given:
        given["n_steps"] = n_steps_for(given.pop("t_final"), given.get("eta"), max_steps=max_steps)
    given.setdefault("energy", spec)
    return RunSpec(initial=initial, **given)


__all__ = [
    "MAX_STEPS",
    "MAX_WORK",
    "METHODS",
    "RUN_CHECKS",
    "STEP_COST",
    "WORK_ENV",
    "RunSpec",
    "as_spec",
    "check_batches",
    "check_fields",
    "check_work",
    "estimate_work",
    "FAST_SUM_PARTNERS_PER_LOG2N",
    "n_steps_for",
    "work_ceiling",
]
