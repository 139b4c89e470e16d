"""The synthetic kernel-learning study [1]_: Coulomb particles against fixed random Fourier
features [2]_ and the importance sampling [3]_, on the tasks of :mod:`meanfield.learners.tasks`.

Five designs (``design``), each a sweep of :func:`meanfield.workbench.sweeps.run_sweep` (run
files keyed by the whole configuration, resumed, set aside when corrupt):

``grid``: every learner of ``learners`` (:data:`LEARNER_LABELS`) at the median bandwidth,
per (m, task, noise, seed) cell, all on one split and from one draw (paired).
``variants``: every Coulomb variant of ``variants`` against RFF and importance sampling, all
tuned by k-fold CV on fixed grids (:func:`meanfield.learners.tuning.fixed_grid_learners`).
``tuned``: every learner tuned on grids that widen until the choice is interior, and the
tempered Coulomb learner (:func:`meanfield.learners.tuning.tuned_learners`).
``diagnosis``: the learned particles recombined with their start
(:func:`meanfield.learners.diagnostics.counterfactual_scores`); per (seed, task).
``sinha_duchi``: Sinha & Duchi's radial protocol (:data:`PROTOCOL`) under four ridges
(:func:`meanfield.learners.tuning.ridge_errors`); per seed.

Settings (:func:`check_config`) are those of :data:`DEFAULTS` for the design; the presets are
``paper_repro/synthetic/configs/*.toml``, run by ``meanfield run`` (:func:`run_study`,
:func:`write_report`; reports in :mod:`meanfield.studies.synthetic_report`). The learner seed
is 10 000 + seed for every learner of a cell, so the Coulomb particles start from the RFF draw.

References
----------
.. [1] The paper: learning the random-feature distribution by Langevin dynamics of interacting
   particles (Khuzani et al., arXiv:1909.11820; summary in ``seeds/``).
.. [2] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.
.. [3] A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.

See Also
--------
meanfield.learners.CoulombFeatures, meanfield.learners.ImportanceSampledFeatures
meanfield.studies.synthetic_report : the tables, claims and figures.

Examples
--------
>>> from meanfield.studies.synthetic import check_config
>>> cfg = check_config({"tasks": ["two_moons"], "coulomb": {"n_steps": 30}})
>>> cfg["design"], cfg["coulomb"]["n_steps"], cfg["coulomb"]["lam"]
('grid', 30, 0.3)
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import logging
import time

import numpy as np
import xarray as xr

from ..contract import RUN_REGIMES, Param
from ..errors import InputError
from ..learners.coulomb import ALIGNMENTS, CoulombFeatures
from ..learners.diagnostics import counterfactual_scores
from ..learners.tuning import fixed_grid_learners, ridge_errors, tuned_learners
from ..workbench.study_settings import (
    KeyedAs,
    check_section,
    declare_settings,
    machine,
    run_recorded_sweep,
    unknown_key,
)
from .synthetic_report import LEARNER_LABELS, PUBLISHED, SETS, TASKS, load_study, report

__all__ = [
    "TASKS", "LEARNER_LABELS", "COULOMB", "VARIANTS", "PROTOCOL", "PUBLISHED", "SETS", "DEFAULTS",
    "SETTINGS", "COULOMB_KEYS", "COULOMB_SECTION", "check_config", "run_grid_cell",
    "run_variants_cell", "run_tuned_cell", "run_diagnosis_cell", "run_sinha_duchi_cell",
    "sweep_spec", "load_study", "run_study", "write_report"
]  # fmt: skip

_log = logging.getLogger(__name__)
#: The first configuration of the Coulomb particles (standardised units, CoulombFeatures), the
#: base of every variant. Chosen on development seeds 100-101 (never the study seeds) at noise
#: 0.1, m = 64 (and 256) over eta in {1, 5, 20}, lam in {0, 0.01, 0.03, 0.1, 0.3, 1}, s in
#: {0, 1}; mini-batches of 250 rows changed the dev errors by < 0.01 (paper_repro NOTES.md).
COULOMB = dict(eta=1.0, lam=0.3, s=1.0, softening=0.1, beta=1e3, n_steps=300, data_batch=250)
#: The Coulomb variants (CoulombFeatures options on top of COULOMB). eta = 1 for every form
#: (10 was worse on dev seed 100); the prior confinement at beta = 1 needs eta << beta: 0.05.
VARIANTS = {
    "linear": {},
    "risk": {"alignment": "risk"},
    "normalised": {"alignment": "normalised"},
    "centred": {"alignment": "centred"},
    "linear_es": {"early_stopping": True},
    "centred_es": {"alignment": "centred", "early_stopping": True},
    "prior_b1": {"confinement": "prior", "beta": 1.0, "eta": 0.05},
    "prior_b100": {"confinement": "prior", "beta": 100.0},
    "coulomb_gas": {"regime": "coulomb-gas", "beta": 10.0},
}
#: The tempered variant (prior confinement + direction repulsion) at three temperatures.
TEMPERED = {
    f"tempered_b{b:g}": {
        "confinement": "prior",
        "direction_repulsion": 1.0,
        "beta": float(b),
        "eta": min(1.0, b / 20),
    }
    for b in (10, 100, 1000)
}
PROTOCOL = dict(
    n_train=10_000, n_test=1_000, d=10, n_candidates=20_000, rho=0.005 * 20_000, ridge=0.05
)
#: The numbers of one learner in a grid run file (NaN where a learner has none).
FIELDS = tuple(
    "fit_time alignment_train alignment_test ridge_train_accuracy ridge_test_accuracy "
    "ridge_test_error ridge_alpha logistic_train_accuracy logistic_test_accuracy "
    "logistic_test_error alignment_init alignment min_distance_init min_distance".split()
)
_TEN = list(range(10))
#: Every design's settings and their defaults (those of its full preset).
DEFAULTS = {
    "grid": dict(
        learners=list(LEARNER_LABELS),
        tasks=list(TASKS),
        noise=[0.0, 0.1, 0.2],
        m=[16, 32, 64, 128, 256],
        seeds=_TEN,
        n_train=1000,
        n_test=2000,
        coulomb=COULOMB,
        importance=dict(rho=1.0),  # chi2 budget; small budgets won on the dev seeds
    ),
    "variants": dict(
        tasks=list(TASKS),
        noise=0.1,
        m=[64, 256],
        seeds=_TEN,
        n_train=1000,
        n_test=2000,
        cv=3,
        base=COULOMB,
        variants=VARIANTS,
        bandwidth_factors=[0.25, 0.5, 1.0, 2.0],
        rho_fractions=[0.0, 1e-3, 1e-2, 0.05],
    ),
    "tuned": dict(
        tasks=list(TASKS),
        settings=[[64, 0.0], [64, 0.1], [64, 0.2], [256, 0.1]],
        seeds=_TEN,
        n_train=1000,
        n_test=2000,
        cv=3,
        base=COULOMB,
        direction_repulsion=1.0,
        betas=[1.0, 10.0, 100.0, 1000.0, 1e4],
        beta_window=[1, 3],
        bandwidth_exponents=[-8, 8],
        bandwidth_window=[-3, 3],
        rho_fractions=[0.0, 1e-4, 1e-3, 1e-2, 0.03, 0.1, 0.3, 1.0],
        rho_window=[1, 3],
    ),
    "diagnosis": dict(
        tasks=["radial", "gaussian_mixture", "checkerboard"],
        seeds=_TEN,
        m=256,
        noise=0.1,
        n_train=1000,
        n_test=2000,
        n_checkpoints=10,
        coulomb=COULOMB,
        direction_repulsion=1.0,
    ),
    "sinha_duchi": dict(
        seeds=[0, 1, 2],
        protocol=PROTOCOL,
        cv_rows=2000,  # CV of the Coulomb variant on a subsample (CV on 10^4 rows is costly)
        is_draws=5,
        base=COULOMB,
        variants=VARIANTS,
        tempered=TEMPERED,
        # name -> (penalty or "loo", intercept: the label mean or fitted on centred features)
        ridges={
            "published_ridge": [0.05, "label_mean"],
            "label_mean_loo_ridge": ["loo", "label_mean"],
            "centred_fixed_ridge": [0.05, True],
            "centred_loo_ridge": ["loo", True],
        },
    ),
}


def _real(name, doc, low=None, high=None, *, low_open=False, high_open=False, **kw) -> Param:
    return Param(name, "real", doc, low, high, low_open, high_open, **kw)


def _ints(name, doc, low, **kw) -> Param:
    return Param(name, "int", doc, low=low, sequence=True, **kw)


#: The keys of a Coulomb section (``coulomb``, ``base``, each named variant): the keywords of
#: :class:`meanfield.learners.CoulombFeatures` but those set per run (``n_features``,
#: ``bandwidth``, ``random_state``), declared with the ranges its checks apply.
COULOMB_KEYS = (
    _real("lam", "repulsion strength lambda", 0.0),
    _real("s", "Riesz exponent s (None: the Coulomb exponent p - 2)", optional=True),
    _real("softening", "softening epsilon of the repulsion", 0.0),
    _real("beta", "inverse temperature beta", 0.0, low_open=True),
    _real("eta", "step size of the particles", 0.0, low_open=True),
    Param("n_steps", "int", "Langevin steps", low=1),
    _real("radius", "radius R of the frequency ball (None: the learner's)", 0.0, low_open=True,
          optional=True),
    Param("regime", "choice", "mean-field or coulomb-gas scaling", choices=RUN_REGIMES),
    Param("data_batch", "int", "rows per alignment mini-batch (None: all)", low=2, optional=True),
    Param("alignment", "choice", "alignment energy", choices=tuple(ALIGNMENTS)),
    Param("confinement", "choice", "confinement (None: the ball)", choices=("prior",),
          optional=True),
    _real("direction_repulsion", "repulsion of directions lambda_F", 0.0),
    Param("early_stopping", "flag", "stop at the best held-out alignment"),
    Param("validation_fraction", "level", "held-out share for early stopping"),
    Param("n_checkpoints", "int", "recorded checkpoints (None: none)", low=1, optional=True),
)  # fmt: skip
#: The Coulomb section's contract, declared once (its defaults are CoulombFeatures' own):
#: ``coulomb``, ``base`` and each named variant are checked by it, each refusal naming the
#: full key (``variants.linear.beta``).
COULOMB_SECTION = declare_settings(
    f"{__name__}:COULOMB_SECTION",
    COULOMB_KEYS,
    {p.name: inspect.signature(CoulombFeatures).parameters[p.name].default for p in COULOMB_KEYS},
)
_IMPORTANCE_KEYS = (
    Param("n_candidates", "int", "candidate draws N_w (None: the learner's)", low=1,
          optional=True),
    _real("rho", "chi-square budget rho", 0.0, optional=True),
    _real("rho_fraction", "budget as a fraction of N_w", 0.0, 1.0, optional=True),
    Param("mode", "choice", "use of the weights", choices=("sample", "weight", "support")),
)  # fmt: skip
_PROTOCOL_KEYS = (
    Param("n_train", "int", "training rows", low=2),
    Param("n_test", "int", "test rows", low=1),
    Param("d", "int", "dimension", low=1),
    Param("n_candidates", "int", "candidate features N_w", low=1),
    _real("rho", "chi-square budget rho", 0.0),
    _real("ridge", "ridge penalty", 0.0, low_open=True),
)
_COMMON = (
    Param("tasks", "choice", "tasks", choices=tuple(TASKS), sequence=True),
    Param("seeds", "seed", "data seeds (learner seed 10 000 + seed)", sequence=True),
    Param("n_train", "int", "training rows", low=2),
    Param("n_test", "int", "test rows", low=2),
    Param("cv", "int", "cross-validation folds", low=2),
    _real("direction_repulsion", "direction repulsion of the tempered variant", 0.0),
    _real("noise", "label-noise rate", 0.0, 0.5, high_open=True),
    _real("noise", "label-noise rates", 0.0, 0.5, high_open=True, sequence=True),
    Param("m", "int", "features m", low=1),
    _ints("m", "features m", 1),
)


def _table(name, keys) -> list:
    return [dataclasses.replace(p, name=f"{name}.{p.name}") for p in keys]


def _pick(*names, lists=()) -> list:
    """The common settings ``names`` (``noise`` and ``m``: lists if in ``lists``)."""
    two = ("noise", "m")
    return [
        p for n in names for p in _COMMON
        if p.name == n and (n not in two or p.sequence == (n in lists))
    ]  # fmt: skip


#: Each design's declared settings (a table's keys by dotted name; :data:`DEFAULTS` gives
#: the defaults, and its other keys are checked by :func:`_resolved`).
_DECLARED = {
    "grid": [
        Param("learners", "choice", "learners", choices=tuple(LEARNER_LABELS), sequence=True),
        *_pick("tasks", "noise", "m", "seeds", "n_train", "n_test", lists=("noise", "m")),
        *_table("importance", _IMPORTANCE_KEYS),
    ],
    "variants": [
        *_pick("tasks", "noise", "m", "seeds", "n_train", "n_test", "cv", lists=("m",)),
        _real("bandwidth_factors", "bandwidths, times the median", 0.0, low_open=True,
              sequence=True),
        _real("rho_fractions", "importance budgets rho / N_w", 0.0, sequence=True),
    ],
    "tuned": [
        *_pick("tasks", "seeds", "n_train", "n_test", "cv", "direction_repulsion"),
        _real("betas", "inverse temperatures of the tempered grid", 0.0, low_open=True,
              sequence=True),
        _ints("beta_window", "[a, b]: first grid of betas, indices", 0),
        _ints("bandwidth_exponents", "[a, b]: bandwidths median * 2^k, k in [a, b]", -64),
        _ints("bandwidth_window", "[a, b]: first grid of bandwidth exponents", -64),
        _real("rho_fractions", "importance budgets rho / N_w", 0.0, 1.0, sequence=True),
        _ints("rho_window", "[a, b]: first grid of budgets, indices", 0),
    ],
    "diagnosis": [
        *_pick("tasks", "seeds", "m", "noise", "n_train", "n_test", "direction_repulsion"),
        Param("n_checkpoints", "int", "checkpoints recombined", low=1),
    ],
    "sinha_duchi": [
        *_pick("seeds"),
        *_table("protocol", _PROTOCOL_KEYS),
        Param("cv_rows", "int", "rows of the CV of the Coulomb variant", low=6),
        Param("is_draws", "int", "draws of importance sampling", low=1),
    ],
}  # fmt: skip


def _distinct(cfg: dict, *names) -> None:
    for k in names:
        v = cfg.get(k)
        if isinstance(v, list) and len({json.dumps(x) for x in v}) != len(v):
            raise InputError(f"{k} must hold distinct values, got {v!r}")


def _sections(cfg: dict, key: str) -> None:
    """A free mapping of named Coulomb sections (``variants``, ``tempered``), checked."""
    v = cfg.get(key)
    if key in cfg and (not isinstance(v, dict) or not v):
        raise InputError(f"configuration key {key!r} must be a non-empty mapping, got {v!r}")
    for name, sub in (v or {}).items():
        v[name] = check_section(f"{key}.{name}", sub, COULOMB_SECTION, {})


def _resolved(design: str):
    def resolved(**cfg) -> dict:
        """What the declared settings cannot say: distinct values, values that depend on
        each other, the free keys (named sections, [m, noise] pairs, ridges)."""
        _distinct(cfg, "tasks", "learners", "seeds", "noise", "m")
        _sections(cfg, "variants")
        _sections(cfg, "tempered")
        if design == "tuned":
            cfg["settings"] = _settings(cfg["settings"])
            lo, hi = _window("bandwidth_exponents", cfg["bandwidth_exponents"], -64, 64)
            _window("bandwidth_window", cfg["bandwidth_window"], lo, hi)
            _window("beta_window", cfg["beta_window"], 0, len(cfg["betas"]) - 1)
            _window("rho_window", cfg["rho_window"], 0, len(cfg["rho_fractions"]) - 1)
        if design == "sinha_duchi":
            if cfg["cv_rows"] > cfg["protocol"]["n_train"]:
                raise InputError(f"cv_rows must be at most protocol.n_train, got {cfg['cv_rows']}")
            r = cfg["ridges"]
            if (
                not isinstance(r, dict)
                or not r
                or not all(isinstance(v, list) and len(v) == 2 for v in r.values())
            ):
                raise InputError(
                    f"ridges must map names to [penalty or 'loo', intercept], got {r!r}"
                )
        return {"design": design, **json.loads(json.dumps(cfg))}

    return resolved


#: Each design's settings contract (:func:`meanfield.workbench.study_settings.declare_settings`):
#: ``SETTINGS[design].wrapper(**settings)`` is :func:`check_config` for that design; each is
#: registered, so the generated fuzzing covers every declared setting and the docs print
#: its table.
SETTINGS = {
    design: declare_settings(
        f"{__name__}:SETTINGS.{design}", _DECLARED[design], DEFAULTS[design],
        check=_resolved(design),
        sections={k: COULOMB_SECTION for k in ("coulomb", "base") if k in DEFAULTS[design]},
    )
    for design in DEFAULTS
}  # fmt: skip


def check_config(settings: dict) -> dict:
    """The study's complete settings, every default filled in and every value checked first.

    ``design`` (default ``"grid"``) selects the design and its settings, :data:`DEFAULTS`
    ``[design]``, declared by its contract :data:`SETTINGS` ``[design]`` (each value's type,
    range and one line of doc; the docs print the tables). Unknown keys, at any depth, are
    refused naming the nearest; a learner section (``coulomb``, ``base``, ``importance``,
    ``protocol``) is merged key by key into its default (any estimator keyword but
    ``n_features``, ``bandwidth``, ``random_state``); ``variants``, ``tempered`` and
    ``ridges`` replace their default sets.

    Parameters
    ----------
    settings : dict
        The settings of a preset (a TOML file's keys besides ``type`` and ``study``).

    Returns
    -------
    dict
        The resolved settings (JSON-plain: as they read back from ``config.json``).

    Raises
    ------
    meanfield.errors.InputError, meanfield.errors.InputTypeError
        An unknown key, or a value of the wrong type or out of range (the message names it
        and the range).

    See Also
    --------
    run_study : runs checked settings.
    SETTINGS : the declared settings of each design.
    meanfield.workbench.study_settings.declare_settings : the configuration engine.

    Examples
    --------
    >>> from meanfield.studies.synthetic import check_config
    >>> check_config({"n_trian": 10})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'n_trian' (did you mean 'n_train'?)
    >>> check_config({"design": "variants", "variants": {"linear": {"n_step": 5}}})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'variants.linear.n_step' (did you \
mean 'variants.linear.n_steps'?)
    >>> check_config({"design": "tuned"})["betas"]
    [1.0, 10.0, 100.0, 1000.0, 10000.0]
    >>> check_config({"coulomb": {"lam": -1}})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: coulomb.lam must be a finite number in [0, inf), got -1
    """
    if not isinstance(settings, dict):
        raise InputError(f"the settings must be a mapping, got {settings!r}")
    rest = dict(settings)
    design = rest.pop("design", "grid")
    if not isinstance(design, str) or design not in DEFAULTS:
        raise InputError(f"design must be one of {list(DEFAULTS)}, got {design!r}")
    top = [*DEFAULTS[design], "design"]
    unknown = next((k for k in rest if k not in top), None)
    if unknown is not None:  # named with "design" among the keys it may be near
        raise unknown_key("", unknown, top)
    return SETTINGS[design].wrapper(**rest)


def _settings(pairs) -> list:
    def valid(p):
        pair = isinstance(p, (list, tuple)) and len(p) == 2
        ok = pair and isinstance(p[0], int) and not isinstance(p[0], bool) and p[0] >= 1
        return (
            ok
            and isinstance(p[1], (int, float))
            and not isinstance(p[1], bool)
            and (0 <= p[1] < 0.5)
        )

    ok = isinstance(pairs, list) and bool(pairs) and all(map(valid, pairs))
    out = [[int(p[0]), float(p[1])] for p in pairs] if ok else []
    if not ok or len({tuple(p) for p in out}) != len(out):
        raise InputError(
            "settings must be distinct [m, noise] pairs, m an integer >= 1 and noise in "
            f"[0, 0.5), got {pairs!r}"
        )
    return out


def _window(name, w, lo, hi) -> tuple[int, int]:
    if len(w) != 2 or not lo <= w[0] <= w[1] <= hi:
        raise InputError(f"{name} must be [a, b], integers with {lo} <= a <= b <= {hi}, got {w!r}")
    return w[0], w[1]


def _threads_one() -> None:
    # One run per core; the matrices are small. Without the BLAS limit, numpy's SVD in the
    # ridge fit slows down ~50x on a loaded machine (threads contending for 2 cores).
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)


def cell_dataset(records: list[dict]) -> xr.Dataset:
    """One cell's records (one per learner) as a run file's dataset: ``metrics`` (learner x
    metric, :data:`FIELDS`, NaN where a learner has none; one variable keeps a run file at 9 KB)
    and the records as the JSON attribute ``records``.

    See Also
    --------
    run_grid_cell : the run that writes it.
    meanfield.studies.synthetic_report.cell_records : reads the records back.

    Examples
    --------
    >>> from meanfield.studies.synthetic import cell_dataset
    >>> from meanfield.studies.synthetic_report import cell_records
    >>> recs = [{"learner": "rff", "task": "radial", "noise": 0.1, "seed": 0, "m": 8,
    ...          "ridge_test_error": 0.25}]
    >>> ds = cell_dataset(recs)
    >>> float(ds["metrics"].sel(learner="rff", metric="ridge_test_error")), cell_records(ds) == recs
    (0.25, True)
    """
    learners = [r["learner"] for r in records]
    values = np.array([[float(r.get(k, np.nan)) for k in FIELDS] for r in records])
    ds = xr.Dataset(
        {"metrics": (("learner", "metric"), values)},
        coords={"learner": learners, "metric": list(FIELDS)},
    )
    ds.attrs["records"] = json.dumps(records)
    return ds


def run_grid_cell(
    task: str,
    noise: float,
    seed: int,
    m: int,
    *,
    learners: list,
    n_train: int,
    n_test: int,
    coulomb: dict,
    importance: dict,
    task_settings: dict,
) -> xr.Dataset:
    """The ``grid`` design's run: every learner on one (task, noise, seed) split, ``m`` features.

    Data seed ``seed``; learner seed ``10000 + seed`` (shared): Coulomb starts from the RFF draw.

    Returns
    -------
    xarray.Dataset
        :func:`cell_dataset` of the records, one per learner.

    See Also
    --------
    meanfield.learners.make_learner : builds each learner.
    sweep_spec : the grid of cells and their fixed settings.

    Examples
    --------
    >>> from meanfield.studies.synthetic import COULOMB, TASKS, run_grid_cell
    >>> ds = run_grid_cell("two_moons", 0.1, 0, 8, learners=["rff", "importance"], n_train=40,
    ...     n_test=20, coulomb=COULOMB, importance={"rho": 1.0}, task_settings=TASKS)
    >>> ds["metrics"].sel(metric="ridge_test_error").learner.values.tolist()
    ['rff', 'importance']
    """
    from ..learners import evaluate, make_learner
    from ..learners.tasks import make_task

    _threads_one()
    split = make_task(task, n_train, n_test, noise=noise, seed=seed, **task_settings[task])
    out = []
    for name in learners:
        learner = make_learner(name, m, 10_000 + seed, coulomb, importance)
        res = evaluate(learner, *split)
        rec = {"learner": name, "task": task, "noise": noise, "seed": seed, "m": m, **res}
        for attr in ("alignment_init_", "alignment_", "min_distance_init_", "min_distance_"):
            if hasattr(learner, attr):
                rec[attr.rstrip("_")] = float(getattr(learner, attr))
        out.append(rec)
    return cell_dataset(out)


def _variants_record(cfg: dict, task: str, seed: int, m: int) -> dict:
    """Every learner of a ``variants`` cell: CV on the training rows, one fit, the test scores."""
    _threads_one()
    from .._version import __version__
    from ..learners.tasks import make_task

    t_cell = time.perf_counter()
    noise, settings = cfg["noise"], cfg["task_settings"][task]
    split = make_task(task, cfg["n_train"], cfg["n_test"], noise=noise, seed=seed, **settings)
    out = {"task": task, "seed": seed, "m": m}
    # learner seed, shared: the Coulomb particles start from the RFF draw
    out.update(
        fixed_grid_learners(split, m, learner_seed=10_000 + seed, cv_seed=seed, settings=cfg)
    )
    out.update(wall_s=time.perf_counter() - t_cell, meanfield_version=__version__)
    out.update(machine=machine(), noise=noise)
    return out


def run_variants_cell(
    task: str,
    seed: int,
    m: int,
    *,
    noise: float,
    n_train: int,
    n_test: int,
    cv: int,
    base: dict,
    variants: dict,
    bandwidth_factors: list,
    rho_fractions: list,
    task_settings: dict,
) -> xr.Dataset:
    """The ``variants`` design's run: every learner on one (task, seed) split, ``m`` features,
    tuned by CV on the training rows; the CV-chosen Coulomb variant is ``coulomb_cv``.

    See Also
    --------
    run_tuned_cell : the same learners on grids that widen.
    meanfield.learners.tuning.fixed_grid_learners : the CV on fixed grids.

    Examples
    --------
    >>> from meanfield.studies.synthetic import check_config, run_variants_cell, sweep_spec
    >>> cfg = check_config({"design": "variants", "n_train": 60, "n_test": 40, "cv": 2,
    ...                     "variants": {"linear": {}}, "base": {"n_steps": 5},
    ...                     "bandwidth_factors": [1.0], "rho_fractions": [0.0]})
    >>> ds = run_variants_cell("two_moons", 0, 8, **sweep_spec(cfg)["fixed"])
    >>> ds["ridge_test_error"].learner.values.tolist()
    ['rff_median', 'rff', 'importance', 'coulomb_linear', 'coulomb_cv']
    """
    cfg = {k: v for k, v in locals().items() if k not in ("task", "seed", "m")}  # the settings
    return record_dataset(_variants_record(cfg, task, seed, m))


def record_dataset(rec: dict) -> xr.Dataset:
    """A cell's record as the dataset a run file holds: ``ridge_test_error`` along
    ``learner`` and the whole record as the JSON attribute ``record``.

    See Also
    --------
    run_variants_cell : writes it for a ``variants`` cell.
    run_tuned_cell : writes it for a ``tuned`` cell.

    Examples
    --------
    >>> from meanfield.studies.synthetic import record_dataset
    >>> ds = record_dataset({"learners": {"rff": {"ridge_test_error": 0.1}}})
    >>> float(ds["ridge_test_error"].sel(learner="rff")), ds.attrs["record"][:12]
    (0.1, '{"learners":')
    """
    names = list(rec["learners"])
    err = [float(rec["learners"][n].get("ridge_test_error", np.nan)) for n in names]
    ds = xr.Dataset({"ridge_test_error": ("learner", np.array(err))}, coords={"learner": names})
    ds.attrs["record"] = json.dumps(rec)
    return ds


def _tuned_record(cfg: dict, task: str, seed: int, m: int, noise: float) -> dict:
    """Every learner of a ``tuned`` cell (module docstring); the cell's record, JSON-ready."""
    _threads_one()
    from .._version import __version__
    from ..learners.tasks import make_task

    t_cell = time.perf_counter()
    settings = cfg["task_settings"][task]
    split = make_task(task, cfg["n_train"], cfg["n_test"], noise=noise, seed=seed, **settings)
    out = {"task": task, "seed": seed, "m": m, "noise": noise}
    # learner seed, shared: every learner starts from the same draw
    out.update(tuned_learners(split, m, learner_seed=10_000 + seed, cv_seed=seed, settings=cfg))
    t = time.perf_counter() - t_cell
    return {**out, "wall_s": t, "meanfield_version": __version__, "machine": machine()}


def run_tuned_cell(task: str, seed: int, setting: str, **cfg) -> xr.Dataset:
    """The ``tuned`` design's run: every learner on one split (``setting`` is ``"m:noise"``),
    tuned by widened CV, as :func:`record_dataset` of the cell's record.

    See Also
    --------
    run_variants_cell : the same learners on fixed grids.
    meanfield.learners.tuning.tuned_learners : the widened CV.

    Examples
    --------
    >>> from meanfield.studies.synthetic import check_config, run_tuned_cell, sweep_spec
    >>> cfg = check_config({"design": "tuned", "tasks": ["two_moons"], "n_train": 90,
    ...     "n_test": 60, "cv": 2, "base": {"n_steps": 10}, "bandwidth_window": [-1, 1]})
    >>> ds = run_tuned_cell("two_moons", 0, "8:0.1", **sweep_spec(cfg)["fixed"])
    >>> ds["ridge_test_error"].sizes["learner"]
    7
    """
    m, noise = setting.split(":")
    return record_dataset(_tuned_record(cfg, task, seed, int(m), float(noise)))


def run_diagnosis_cell(
    seed: int,
    task: str,
    *,
    m: int,
    noise: float,
    n_train: int,
    n_test: int,
    n_checkpoints: int,
    coulomb: dict,
    direction_repulsion: float,
):
    """The ``diagnosis`` design's run: one (task, seed) as a dataset (``test_error`` along
    ``set``, the ``narrowing`` factor, the record as the JSON attribute ``record``).

    See Also
    --------
    meanfield.learners.diagnostics.counterfactual_scores : the recombined feature sets.
    meanfield.studies.synthetic_report.SETS : those sets, in report order.

    Examples
    --------
    >>> from meanfield.studies.synthetic import check_config, run_diagnosis_cell, sweep_spec
    >>> cfg = check_config({"design": "diagnosis", "m": 8, "n_train": 60, "n_test": 40,
    ...                     "n_checkpoints": 2, "coulomb": {"n_steps": 4}})
    >>> ds = run_diagnosis_cell(0, "radial", **sweep_spec(cfg)["fixed"])
    >>> ds["test_error"].dims, ds["test_error"].sizes["set"]
    (('set',), 7)
    """
    from .._version import __version__
    from ..learners.tasks import make_task

    _threads_one()
    t0 = time.perf_counter()
    split = make_task(task, n_train, n_test, noise=noise, seed=seed, **TASKS[task])
    cfg = {**COULOMB, **(coulomb or {})}
    out = {"task": task, "seed": seed, "m": m, "noise": noise}
    kw = dict(n_checkpoints=n_checkpoints, direction_repulsion=direction_repulsion)
    out.update(counterfactual_scores(split, m, seed=10_000 + seed, coulomb=cfg, **kw))
    out.update(
        configuration={**cfg, "direction_repulsion_frame": direction_repulsion},
        meanfield_version=__version__,
        wall_s=time.perf_counter() - t0,
        machine=machine(),
    )
    return _diagnosis_dataset(out)


def _diagnosis_dataset(rec: dict):
    names = list(rec["sets"])
    err = [float(rec["sets"][n]["test_error"]) for n in names]
    ds = xr.Dataset(
        {"test_error": ("set", np.array(err)), "narrowing": ((), float(rec["narrowing"]))},
        coords={"set": names},
    )
    ds.attrs["record"] = json.dumps(rec)
    return ds


def _scorer(sp, rec, ridges):
    first, last = list(ridges)[0], list(ridges)[-1]

    def score(name, learner, **extra):
        row = ridge_errors(learner, sp, ridges)
        rec["learners"][name] = {k: row[k] for k in ("n_features", "fit_time")} | extra | row
        errors = row[f"{first}_test_error"], row[f"{last}_test_error"]
        _log.info("  seed %s %s: %.4f / %.4f (%.0f s)", rec["seed"], name, *errors, row["wall_s"])

    return score


def run_sinha_duchi_cell(
    seed: int,
    *,
    protocol: dict,
    cv_rows: int,
    is_draws: int,
    base: dict,
    variants: dict,
    tempered: dict,
    ridges: dict,
) -> xr.Dataset:
    """The ``sinha_duchi`` design's run: one seed as a dataset (``test_error`` and
    ``train_error`` along learner × ridge, ``n_features``, the record as the JSON attribute
    ``record``). Each learner's errors are logged (``logging``, INFO) as it is scored.

    See Also
    --------
    meanfield.learners.tuning.ridge_errors : each learner's errors under the ridges.
    meanfield.learners.tasks.radial : the protocol's task.

    References
    ----------
    - A. Sinha, J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.

    Examples
    --------
    >>> from meanfield.studies.synthetic import check_config, run_sinha_duchi_cell, sweep_spec
    >>> cfg = check_config({"design": "sinha_duchi", "protocol": {"n_train": 200,
    ...     "n_test": 100, "n_candidates": 200, "rho": 1.0}, "cv_rows": 60, "is_draws": 2,
    ...     "base": {"n_steps": 3}, "variants": {"linear": {}},
    ...     "tempered": {"tempered_b10": {"beta": 10.0, "eta": 0.5}}})
    >>> ds = run_sinha_duchi_cell(1, **sweep_spec(cfg)["fixed"])
    >>> ds["test_error"].dims, str(ds["ridge"].values[0])
    (('learner', 'ridge'), 'published_ridge')
    """
    _threads_one()
    from .._version import __version__
    from ..learners import (
        CoulombFeatures,
        ImportanceSampledFeatures,
        RandomFourierFeatures,
        select_by_cv,
    )
    from ..learners.tasks import radial

    P = protocol
    t_seed = time.perf_counter()
    sp = radial(P["n_train"], P["n_test"], d=P["d"], seed=seed)
    ls = 10_000 + seed
    rec = {"seed": seed, "learners": {}}
    score = _scorer(sp, rec, ridges)
    for j in range(is_draws):
        kw = dict(n_candidates=P["n_candidates"], rho=P["rho"], mode="support", bandwidth=1.0)
        imp = ImportanceSampledFeatures(10, **kw, random_state=ls + 1000 * j)
        score("importance" if j == 0 else f"importance_draw{j}", imp)
        if j == 0:
            D = int(imp.omega_.shape[0])
    score("rff", RandomFourierFeatures(D, bandwidth=1.0, random_state=ls))
    every = {**variants, **tempered}
    proto = CoulombFeatures(D, bandwidth=1.0, random_state=ls, **base)
    grid = [{k: [v] for k, v in var.items()} or {"lam": [base["lam"]]} for var in every.values()]
    sub = np.random.default_rng(seed).choice(P["n_train"], cv_rows, replace=False)
    ccv = select_by_cv(proto, grid, sp.X_train[sub], sp.y_train[sub], cv=3, random_state=seed)
    names = list(every)
    best = names[int(np.argmax(ccv["mean_test_score"]))]
    for name, var in every.items():
        est = CoulombFeatures(D, bandwidth=1.0, random_state=ls, **{**base, **var})
        score(f"coulomb_{name}", est, cv_score=float(ccv["mean_test_score"][names.index(name)]))
    rec["learners"]["coulomb_cv"] = {**rec["learners"][f"coulomb_{best}"], "variant": best}
    tb = list(tempered)
    best_t = max(tb, key=lambda n: (ccv["mean_test_score"][names.index(n)], -tb.index(n)))
    best_t_row = rec["learners"][f"coulomb_{best_t}"]
    rec["learners"]["coulomb_tempered_cv"] = {**best_t_row, "variant": best_t}
    rec.update(
        protocol=P,
        cv_rows=cv_rows,
        ridges={k: list(v) for k, v in ridges.items()},
        meanfield_version=__version__,
        wall_s=time.perf_counter() - t_seed,
        machine=machine(),
    )
    return _sinha_duchi_dataset(rec)


def _sinha_duchi_dataset(rec: dict) -> xr.Dataset:
    names, ridges = list(rec["learners"]), list(rec["ridges"])
    learners = rec["learners"]

    def err(which):
        return np.array(
            [[float(learners[n].get(f"{r}_{which}_error", np.nan)) for r in ridges] for n in names]
        )

    ds = xr.Dataset(
        {
            "test_error": (("learner", "ridge"), err("test")),
            "train_error": (("learner", "ridge"), err("train")),
            "n_features": ("learner", np.array([int(learners[n]["n_features"]) for n in names])),
        },
        coords={"learner": names, "ridge": ridges},
    )
    ds.attrs["record"] = json.dumps(rec)
    return ds


#: Each design's run function, keyed under the name its committed runs have, and its grid:
#: (setting, grid axis) in grid order.
_SWEEPS = {
    "grid": (
        KeyedAs(run_grid_cell, "meanfield.studies.synthetic_kernels.run_cell"),
        (("m", "m"), ("tasks", "task"), ("noise", "noise"), ("seeds", "seed")),
    ),
    "variants": (
        KeyedAs(run_variants_cell, "meanfield.studies.synthetic_variants.run_cell"),
        (("m", "m"), ("seeds", "seed"), ("tasks", "task")),
    ),
    "tuned": (
        KeyedAs(run_tuned_cell, "meanfield.studies.synthetic_round3.run_cell"),
        (("seeds", "seed"), ("settings", "setting"), ("tasks", "task")),
    ),
    "diagnosis": (
        KeyedAs(run_diagnosis_cell, "meanfield.studies.synthetic_diagnosis.run_diagnosis"),
        (("seeds", "seed"), ("tasks", "task")),
    ),
    "sinha_duchi": (
        KeyedAs(run_sinha_duchi_cell, "meanfield.studies.synthetic_sinha_duchi.run_seed"),
        (("seeds", "seed"),),
    ),
}


def sweep_spec(cfg: dict) -> dict:
    """The sweep of checked settings: grid, fixed parameters and configuration digest.

    ``grid``: largest m first (the slowest cells start first); ``variants``: m, seed, task;
    ``tuned``: seed, "m:noise" setting, task; ``diagnosis``: seed, task; ``sinha_duchi``: seed
    (the earlier axes vary slowest, so a partial run holds whole seeds).

    See Also
    --------
    run_study : runs the sweep.
    meanfield.workbench.sweeps.run_sweep : the sweep runner.

    Examples
    --------
    >>> from meanfield.studies.synthetic import check_config, sweep_spec
    >>> a = sweep_spec(check_config({"m": [16, 32], "seeds": [0]}))
    >>> b = sweep_spec(check_config({"m": [16, 32], "seeds": [0], "n_train": 300}))
    >>> list(a["grid"]), a["grid"]["m"], a["digest"] != b["digest"]
    (['m', 'task', 'noise', 'seed'], [32, 16], True)
    """
    from ..workbench.sweeps import configuration_digest, sweep_configuration

    func, axes = _SWEEPS[cfg["design"]]
    grid = {axis: list(cfg[key]) for key, axis in axes}
    if cfg["design"] == "grid":
        grid["m"] = sorted(grid["m"], reverse=True)
    elif cfg["design"] == "variants":
        grid["m"] = sorted(grid["m"])
    elif cfg["design"] == "tuned":
        grid["setting"] = [f"{m}:{n}" for m, n in cfg["settings"]]
    keys = {key for key, _ in axes} | {"design"}
    fixed = {k: copy.deepcopy(v) for k, v in cfg.items() if k not in keys}
    if cfg["design"] == "grid":
        fixed["learners"] = fixed.pop("learners")
    if cfg["design"] in ("grid", "variants", "tuned"):
        fixed["task_settings"] = copy.deepcopy(TASKS)
    config = json.loads(json.dumps(sweep_configuration(func, fixed)))
    return dict(grid=grid, fixed=fixed, digest=configuration_digest(config), configuration=config)


def run_study(
    settings: dict,
    out,
    *,
    n_workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
) -> None:
    """Run (or resume) the study into the folder ``out``, then write its reports there.

    Writes ``config.json`` (the settings, the sweep's grid and digest: the reports read those
    runs only), ``runs/*.nc`` (one per run; another setting computes its own runs and never
    reuses a stale one; a corrupt run file is set aside into ``runs/set_aside/`` and
    recomputed), ``run.json`` (this call: runs computed, wall time, machine) and the reports
    (:func:`write_report`).

    Parameters
    ----------
    settings : dict
        Settings that passed :func:`check_config`.
    out : path
        The study folder (created if missing).
    n_workers : int, optional
        Processes or threads (default: one per core).
    scheduler : str, optional
        ``"local"`` (default: a ``LocalCluster`` of ``n_workers`` processes), ``"threads"`` or a
        dask scheduler's address.
    progress : bool
        A progress bar.

    See Also
    --------
    check_config, write_report
    meanfield.workbench.sweeps.run_sweep : the runner underneath.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.studies.synthetic import check_config, load_study, run_study
    >>> cfg = check_config(dict(learners=["rff"], tasks=["two_moons"], noise=[0.1], m=[8],
    ...                         seeds=[0], n_train=40, n_test=20))
    >>> out = Path(tempfile.mkdtemp())
    >>> run_study(cfg, out, scheduler="threads", n_workers=1, progress=False)
    >>> len(load_study(out)[1]), (out / "table.md").is_file()
    (1, True)
    """
    from .._validation import check_output_path
    from ..workbench.sweeps import check_scheduler

    cfg = check_config(settings)
    out = check_output_path("out", out, kind="dir")
    scheduler = scheduler or "local"
    check_scheduler(scheduler)
    spec = sweep_spec(cfg)
    recorded = {k: v for k, v in cfg.items() if k != "design" or cfg["design"] != "grid"}
    run_recorded_sweep(
        _SWEEPS[cfg["design"]][0], spec["grid"], spec["fixed"], out, config=recorded,
        scheduler=scheduler, n_workers=n_workers, progress=progress,
    )  # fmt: skip
    write_report(out, out)


def write_report(out, report_dir) -> None:
    """Every report of the study folder ``out`` from its runs, written into ``report_dir``.

    Reads ``out`` only (never rewrites run files, ``config.json`` or ``run.json``); the reports
    of each design are those of :func:`meanfield.studies.synthetic_report.report`.

    See Also
    --------
    run_study, meanfield.studies.synthetic_report.report

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.studies.synthetic import check_config, run_study, write_report
    >>> cfg = check_config(dict(learners=["rff"], tasks=["two_moons"], noise=[0.1], m=[8],
    ...                         seeds=[0], n_train=40, n_test=20))
    >>> out, dest = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> run_study(cfg, out, scheduler="threads", n_workers=1, progress=False)
    >>> write_report(out, dest)
    >>> (dest / "claims.md").is_file()
    True
    """
    report(out, report_dir)
