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
import difflib
import functools
import inspect
import json
import logging
import os
import platform
import socket
import time
from pathlib import Path

import numpy as np
import xarray as xr

from ..learners.diagnostics import counterfactual_scores
from ..learners.tuning import fixed_grid_learners, ridge_errors, tuned_learners
from .synthetic_report import LEARNER_LABELS, PUBLISHED, SETS, TASKS, load_study, report

__all__ = [
    "TASKS",
    "LEARNER_LABELS",
    "COULOMB",
    "VARIANTS",
    "PROTOCOL",
    "PUBLISHED",
    "SETS",
    "DEFAULTS",
    "check_config",
    "make_learner",
    "run_grid_cell",
    "run_variants_cell",
    "run_tuned_cell",
    "run_diagnosis_cell",
    "run_sinha_duchi_cell",
    "sweep_spec",
    "load_study",
    "run_study",
    "write_report",
]

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
#: The sections of settings that are CoulombFeatures / ImportanceSampledFeatures keywords
#: (merged key by key into the default), and those that map names to such sections.
_ESTIMATOR_SECTIONS = {"coulomb": "coulomb", "base": "coulomb", "importance": "importance"}
_NAMED_SECTIONS = ("variants", "tempered")


def _fail(message):
    from ..errors import InputError

    return InputError(message)


def _unknown(where: str, key, allowed) -> Exception:
    near = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
    hint = f" (did you mean {where + near[0]!r}?)" if near else ""
    return _fail(f"unknown configuration key {where + str(key)!r}{hint}")


def _estimator_keys(name: str) -> list[str]:
    """A learner section's keys: its estimator's keywords less those set per run."""
    from ..learners import CoulombFeatures, ImportanceSampledFeatures

    cls = CoulombFeatures if name == "coulomb" else ImportanceSampledFeatures
    skip = {"self", "n_features", "bandwidth", "random_state"}
    return [p for p in inspect.signature(cls.__init__).parameters if p not in skip]


def _is_int(v, low) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v))


def _numbers(name, values, kind, low=None, high=None, distinct=False) -> list:
    ok = isinstance(values, list) and bool(values)
    ok = ok and all(_is_int(v, -(2**62)) if kind is int else _is_num(v) for v in values)
    ok = ok and (low is None or min(values) >= low) and (high is None or max(values) < high)
    if not ok or (distinct and len(set(values)) != len(values)):
        rng = f" >= {low}" if high is None else f" in [{low}, {high})"
        what = (
            ("distinct " if distinct else "") + kind.__name__ + "s" + ("" if low is None else rng)
        )
        raise _fail(f"{name} must be a non-empty list of {what}, got {values!r}")
    return [kind(v) for v in values]


def _names(name, values, known) -> list:
    if not isinstance(values, list) or not values or len(set(map(str, values))) != len(values):
        raise _fail(f"{name} must be a non-empty list of distinct names, got {values!r}")
    for v in values:
        if v not in known:
            raise _fail(f"unknown {name[:-1]} {v!r}; choose from {list(known)}")
    return list(values)


def _section(where: str, value, allowed, default) -> dict:
    if not isinstance(value, dict):
        raise _fail(f"configuration key {where!r} must be a mapping, got {value!r}")
    for k in value:
        if k not in allowed:
            raise _unknown(f"{where}.", k, allowed)
    return {**default, **value}


def check_config(settings: dict) -> dict:
    """The study's complete settings, every default filled in and every value checked first.

    ``design`` (default ``"grid"``) selects the design and its settings, :data:`DEFAULTS`
    ``[design]``. Unknown keys, at any depth, are refused naming the nearest; a learner section
    (``coulomb``, ``base``, ``importance``, ``protocol``) is merged key by key into its default
    (any estimator keyword but ``n_features``, ``bandwidth``, ``random_state``); ``variants``,
    ``tempered`` and ``ridges`` replace their default sets.

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
    meanfield.errors.InputError
        An unknown key, or a value out of range (the message names it and the range).

    See Also
    --------
    run_study : runs checked settings.

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
    """
    if not isinstance(settings, dict):
        raise _fail(f"the settings must be a mapping, got {settings!r}")
    design = settings.get("design", "grid")
    if design not in DEFAULTS:
        raise _fail(f"design must be one of {list(DEFAULTS)}, got {design!r}")
    defaults = DEFAULTS[design]
    out = copy.deepcopy(defaults)
    coulomb_keys = _estimator_keys("coulomb")
    for k, v in settings.items():
        if k == "design":
            continue
        if k not in defaults:
            raise _unknown("", k, [*defaults, "design"])
        if k in _ESTIMATOR_SECTIONS:
            v = _section(k, v, _estimator_keys(_ESTIMATOR_SECTIONS[k]), defaults[k])
        elif k == "protocol":
            v = _section(k, v, PROTOCOL, defaults[k])
        elif k in _NAMED_SECTIONS:
            if not isinstance(v, dict) or not v:
                raise _fail(f"configuration key {k!r} must be a non-empty mapping, got {v!r}")
            v = {name: _section(f"{k}.{name}", sub, coulomb_keys, {}) for name, sub in v.items()}
        out[k] = copy.deepcopy(v)
    _check_values(design, out)
    return {"design": design, **json.loads(json.dumps(out))}


def _check_values(design: str, out: dict) -> None:
    """The ranges of every setting of ``design`` (in place: numbers as floats where real)."""
    if "tasks" in out:
        _names("tasks", out["tasks"], TASKS)
    if "learners" in out:
        _names("learners", out["learners"], LEARNER_LABELS)
    out["seeds"] = _numbers("seeds", out["seeds"], int, low=0, distinct=True)
    if isinstance(out.get("noise"), list):
        out["noise"] = _numbers("noise", out["noise"], float, 0.0, 0.5, distinct=True)
    elif "noise" in out:
        if not _is_num(out["noise"]) or not 0 <= out["noise"] < 0.5:
            raise _fail(f"noise must be a number in [0, 0.5), got {out['noise']!r}")
        out["noise"] = float(out["noise"])
    if isinstance(out.get("m"), list):
        out["m"] = _numbers("m", out["m"], int, low=1, distinct=True)
    lows = dict(m=1, n_train=2, n_test=2, cv=2, n_checkpoints=1, cv_rows=6, is_draws=1)
    for k, low in lows.items():
        if k in out and not isinstance(out[k], list) and not _is_int(out[k], low):
            raise _fail(f"{k} must be an integer >= {low}, got {out[k]!r}")
    for k, low, high in (("bandwidth_factors", 1e-300, None), ("betas", 1e-12, None)):
        if k in out:
            out[k] = _numbers(k, out[k], float, low=low, high=high)
    if "rho_fractions" in out:
        high = 1.0 + 1e-12 if design == "tuned" else None
        out["rho_fractions"] = _numbers("rho_fractions", out["rho_fractions"], float, 0.0, high)
    if "direction_repulsion" in out:
        if not _is_num(out["direction_repulsion"]) or out["direction_repulsion"] < 0:
            raise _fail(
                f"direction_repulsion must be a number >= 0, got {out['direction_repulsion']!r}"
            )
        out["direction_repulsion"] = float(out["direction_repulsion"])
    if design == "tuned":
        out["settings"] = _settings(out["settings"])
        lo, hi = _window("bandwidth_exponents", out["bandwidth_exponents"], -64, 64)
        _window("bandwidth_window", out["bandwidth_window"], lo, hi)
        _window("beta_window", out["beta_window"], 0, len(out["betas"]) - 1)
        _window("rho_window", out["rho_window"], 0, len(out["rho_fractions"]) - 1)
    if design == "sinha_duchi":
        if out["cv_rows"] > out["protocol"]["n_train"]:
            raise _fail(f"cv_rows must be at most protocol.n_train, got {out['cv_rows']}")
        r = out["ridges"]
        if (
            not isinstance(r, dict)
            or not r
            or not all(isinstance(v, list) and len(v) == 2 for v in r.values())
        ):
            raise _fail(f"ridges must map names to [penalty or 'loo', intercept], got {r!r}")


def _settings(pairs) -> list:
    def valid(p):
        pair = isinstance(p, (list, tuple)) and len(p) == 2
        return pair and _is_int(p[0], 1) and _is_num(p[1]) and 0 <= p[1] < 0.5

    ok = isinstance(pairs, list) and bool(pairs) and all(map(valid, pairs))
    out = [[int(p[0]), float(p[1])] for p in pairs] if ok else []
    if not ok or len({tuple(p) for p in out}) != len(out):
        raise _fail(
            "settings must be distinct [m, noise] pairs, m an integer >= 1 and noise in "
            f"[0, 0.5), got {pairs!r}"
        )
    return out


def _window(name, w, lo, hi) -> tuple[int, int]:
    if (
        not isinstance(w, list)
        or len(w) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in w)
        or not lo <= w[0] <= w[1] <= hi
    ):
        raise _fail(f"{name} must be [a, b], integers with {lo} <= a <= b <= {hi}, got {w!r}")
    return w[0], w[1]


def machine() -> dict:
    """Where a cell ran: host, platform, Python, cores (recorded, not part of the key).

    Examples
    --------
    >>> from meanfield.studies.synthetic import machine
    >>> sorted(machine())
    ['cpu_count', 'host', 'platform', 'python']
    """
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }


def _threads_one() -> None:
    # One run per core; the matrices are small. Without the BLAS limit, numpy's SVD in the
    # ridge fit slows down ~50x on a loaded machine (threads contending for 2 cores).
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)


def make_learner(name: str, m: int, seed: int, coulomb: dict, importance: dict | None = None):
    """The study's learner ``name`` with ``m`` features, seeded by ``seed``.

    Examples
    --------
    >>> from meanfield.studies.synthetic import COULOMB, make_learner
    >>> make_learner("langevin", 8, 0, COULOMB).lam
    0.0
    """
    from ..learners import CoulombFeatures, ImportanceSampledFeatures, RandomFourierFeatures

    common = dict(bandwidth="median", random_state=seed)
    if name == "rff":
        return RandomFourierFeatures(m, **common)
    if name == "importance":
        return ImportanceSampledFeatures(
            m, **common, **(importance or DEFAULTS["grid"]["importance"])
        )
    if name == "coulomb":
        return CoulombFeatures(m, **common, **coulomb)
    if name == "langevin":
        return CoulombFeatures(m, **common, **{**coulomb, "lam": 0.0})
    raise ValueError(f"unknown learner {name!r}; choose one of {', '.join(LEARNER_LABELS)}")


def cell_dataset(records: list[dict]) -> xr.Dataset:
    """One cell's records (one per learner) as the dataset a run file holds.

    One variable ``metrics`` (learner x metric, :data:`FIELDS`, NaN where a learner has none;
    one variable keeps a run file at 9 KB) and the records as the JSON attribute ``records``.

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

    The data seed is ``seed``; the learner seed ``10000 + seed`` is shared by all learners, so
    the Coulomb particles start from exactly the fixed-RFF draw.

    Returns
    -------
    xarray.Dataset
        :func:`cell_dataset` of the records, one per learner.

    Examples
    --------
    >>> from meanfield.studies.synthetic import COULOMB, TASKS, run_grid_cell
    >>> ds = run_grid_cell("two_moons", 0.1, 0, 8, learners=["rff", "importance"], n_train=40,
    ...                    n_test=20, coulomb=COULOMB, importance={"rho": 1.0},
    ...                    task_settings=TASKS)
    >>> ds["metrics"].sel(metric="ridge_test_error").learner.values.tolist()
    ['rff', 'importance']
    """
    from ..learners import evaluate
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
    tuned by widened CV, as a dataset (``ridge_test_error`` along ``learner``, the record as the
    JSON attribute ``record``).

    Examples
    --------
    >>> from meanfield.studies.synthetic import check_config, run_tuned_cell, sweep_spec
    >>> cfg = check_config({"design": "tuned", "tasks": ["two_moons"], "n_train": 90,
    ...                     "n_test": 60, "cv": 2, "base": {"n_steps": 10},
    ...                     "bandwidth_window": [-1, 1]})
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


class _KeyedAs:
    """A run function under the ``module.qualname`` its committed runs were keyed by (a sweep
    is keyed by that name, so a resume into a committed folder computes nothing); signature and
    defaults, also in the key, are the wrapped function's; it pickles by reference."""

    def __init__(self, func, name: str):
        functools.update_wrapper(self, func)
        self.__module__, _, self.__qualname__ = name.rpartition(".")
        self.__name__ = self.__qualname__

    def __call__(self, *args, **kwargs):
        return self.__wrapped__(*args, **kwargs)


def _keyed(func, old_module: str, old_name: str):
    return _KeyedAs(func, f"meanfield.studies.{old_module}.{old_name}")


#: Each design's run function, keyed under the name its committed runs have, and its grid:
#: (setting, grid axis) in grid order.
_SWEEPS = {
    "grid": (
        _keyed(run_grid_cell, "synthetic_kernels", "run_cell"),
        (("m", "m"), ("tasks", "task"), ("noise", "noise"), ("seeds", "seed")),
    ),
    "variants": (
        _keyed(run_variants_cell, "synthetic_variants", "run_cell"),
        (("m", "m"), ("seeds", "seed"), ("tasks", "task")),
    ),
    "tuned": (
        _keyed(run_tuned_cell, "synthetic_round3", "run_cell"),
        (("seeds", "seed"), ("settings", "setting"), ("tasks", "task")),
    ),
    "diagnosis": (
        _keyed(run_diagnosis_cell, "synthetic_diagnosis", "run_diagnosis"),
        (("seeds", "seed"), ("tasks", "task")),
    ),
    "sinha_duchi": (
        _keyed(run_sinha_duchi_cell, "synthetic_sinha_duchi", "run_seed"),
        (("seeds", "seed"),),
    ),
}


def sweep_spec(cfg: dict) -> dict:
    """The sweep of checked settings: grid, fixed parameters and configuration digest.

    ``grid``: largest m first (the slowest cells start first); ``variants``: m, seed, task;
    ``tuned``: seed, "m:noise" setting, task; ``diagnosis``: seed, task; ``sinha_duchi``: seed
    (the earlier axes vary slowest, so a partial run holds whole seeds).

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


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(obj, indent=1, default=float))
    os.replace(tmp, path)


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
    from .._version import __version__
    from ..workbench.sweeps import check_scheduler, grid_points, run_key, run_sweep

    cfg = check_config(settings)
    out = check_output_path("out", out, kind="dir")
    scheduler = scheduler or "local"
    check_scheduler(scheduler)
    spec = sweep_spec(cfg)
    recorded = {k: v for k, v in cfg.items() if k != "design" or cfg["design"] != "grid"}
    _write_json(
        out / "config.json",
        {
            "config": recorded,
            "meanfield_version": __version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "sweep": {"grid": spec["grid"], "digest": spec["digest"]},
        },
    )
    t0_ns, t0 = time.time_ns(), time.perf_counter()
    run_sweep(
        _SWEEPS[cfg["design"]][0],
        spec["grid"],
        out,
        fixed=spec["fixed"],
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
    )
    paths = [out / "runs" / f"{run_key(p, spec['digest'])}.nc" for p in grid_points(spec["grid"])]
    done = sum(p.is_file() and p.stat().st_mtime_ns >= t0_ns for p in paths)
    _write_json(
        out / "run.json",
        {
            "runs_computed": done,
            "runs_total": len(paths),
            "wall_s": time.perf_counter() - t0,
            "scheduler": scheduler,
            "n_workers": n_workers,
            "machine": machine(),
        },
    )
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
