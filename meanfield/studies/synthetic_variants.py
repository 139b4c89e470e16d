"""The issue-10 variant study (every Coulomb variant against fixed and importance-sampled
features, all tuned by cross-validation) on the sweep runner.

For every (m, seed, task) cell -- one data split shared by all learners, so every comparison is
paired -- hyper-parameters are chosen by stratified k-fold cross-validation on the *training*
rows only (``meanfield.learners.select_by_cv``: GridSearchCV on features + ridge), for every
learner:

- fixed RFF: the bandwidth sigma = f * median, f in ``bandwidth_factors``;
- importance sampling (iid resampling of m features from q): sigma (same grid) x budget rho;
- Coulomb particles: the variant (``variants``: alignment form, confinement, regime, early
  stopping), starting from the CV-chosen RFF draw (same sigma, same seed) so the comparison with
  fixed RFF stays paired. ``coulomb_cv`` is the variant CV picked; every variant is also fitted
  and scored on the test set for the variant table.

The cells are one sweep of :func:`meanfield.workbench.sweeps.run_sweep` over (m, seed, task), keyed
by the whole configuration (a rerun resumes; another setting computes new cells; a corrupt run file
is set aside and recomputed). A run file (:func:`run_cell`) holds the test errors along ``learner``
and the cell's whole record (parameters, seeds, CV scores, package version, wall time and machine)
as the JSON attribute ``record``. The report is ``paper_repro/synthetic/report_variants.py``.

Examples
--------
>>> from meanfield.studies.synthetic_variants import check_config
>>> check_config({"variants": {"linear": {"n_step": 5}}})
Traceback (most recent call last):
    ...
meanfield.errors.InputError: unknown configuration key 'variants.linear.n_step' (did you mean \
'variants.linear.n_steps'?)
"""

from __future__ import annotations

import copy
import json
import os
import platform
import socket
import time
from pathlib import Path

import numpy as np
import xarray as xr

from .synthetic_kernels import TASKS, _estimator_keys, _unknown, _write_json, config_differences

__all__ = [
    "BASE",
    "VARIANTS",
    "CONFIGS",
    "check_config",
    "config_differences",
    "cell_record",
    "run_cell",
    "record_dataset",
    "sweep_spec",
    "load_records",
    "scan_records",
    "run_record_sweep",
    "run_study",
]

#: Settings shared by every Coulomb variant (the first study's, chosen there on dev seeds).
BASE = dict(lam=0.3, s=1.0, softening=0.1, beta=1e3, eta=1.0, n_steps=300, data_batch=250)

#: The variants of issue 10 (each a CoulombFeatures option set on top of BASE). Step sizes:
#: eta = 1 for every form (eta = 10 was worse for risk/normalised/centred on the radial and
#: mixture tasks, dev seed 100, m = 64); the prior confinement at beta = 1 needs eta << beta_N
#: (OU relaxation time beta_N): eta = 0.05, 300 steps = 15 relaxation times.
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

BANDWIDTH_FACTORS = [0.25, 0.5, 1.0, 2.0]
RHO_FRACTIONS = [0.0, 1e-3, 1e-2, 0.05]

#: The named configurations (``full``: the study of the README; ``ci``: seconds).
CONFIGS: dict = {}


def machine() -> dict:
    """Where a cell ran: host, platform, Python, cores (recorded, not part of the key).

    Examples
    --------
    >>> from meanfield.studies.synthetic_variants import machine
    >>> sorted(machine())
    ['cpu_count', 'host', 'platform', 'python']
    """
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }


def cell_record(cfg: dict, task: str, seed: int, m: int) -> dict:
    """Every learner on one split: CV on the training rows, then one fit and the test scores.

    ``cfg`` holds the settings of :func:`run_cell` (``noise``, ``n_train``, ``n_test``,
    ``cv``, ``base``, ``variants``, ``bandwidth_factors``, ``rho_fractions``,
    ``task_settings``); returns the cell's record (JSON-ready).

    Examples
    --------
    >>> from meanfield.studies.synthetic_variants import CONFIGS, TASKS, cell_record
    >>> from meanfield.studies.synthetic_variants import check_config
    >>> cfg = {**check_config(CONFIGS["ci"]), "task_settings": TASKS, "n_train": 60}
    >>> cfg["variants"] = {"linear": {}}
    >>> rec = cell_record(cfg, "two_moons", 0, 8)
    >>> sorted(rec["learners"]), rec["learners"]["coulomb_cv"]["variant"]
    (['coulomb_cv', 'coulomb_linear', 'importance', 'rff', 'rff_median'], 'linear')
    """
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
    from .._version import __version__
    from ..learners import (
        CoulombFeatures,
        ImportanceSampledFeatures,
        RandomFourierFeatures,
        evaluate,
        median_bandwidth,
        select_by_cv,
    )
    from ..learners.tasks import make_task

    t_cell = time.perf_counter()
    split = make_task(
        task,
        cfg["n_train"],
        cfg["n_test"],
        noise=cfg["noise"],
        seed=seed,
        **cfg["task_settings"][task],
    )
    X, y = split[0], split[1]
    ls = 10_000 + seed  # learner seed, shared: Coulomb starts from the RFF draw
    cv = dict(cv=cfg["cv"], random_state=seed)
    med = median_bandwidth(X, rng=ls)
    bws = [float(f * med) for f in cfg["bandwidth_factors"]]
    out = {"task": task, "seed": seed, "m": m, "median_bandwidth": med, "learners": {}}

    def score(name, learner, cv_res=None, extra=None):
        t0 = time.perf_counter()
        res = evaluate(learner, *split, classifiers=("ridge",))
        res["wall_s"] = time.perf_counter() - t0
        for attr in ("alignment_init_", "alignment_", "min_distance_", "best_step_"):
            if hasattr(learner, attr):
                res[attr.rstrip("_")] = float(getattr(learner, attr))
        res["params"] = {k: v for k, v in learner.get_params().items() if _jsonable(v)}
        if cv_res is not None:
            res["cv_score"] = cv_res
        out["learners"][name] = {**res, **(extra or {})}

    score("rff_median", RandomFourierFeatures(m, bandwidth=med, random_state=ls))
    rcv = select_by_cv(RandomFourierFeatures(m, random_state=ls), {"bandwidth": bws}, X, y, **cv)
    bw = rcv["best_params"]["bandwidth"]
    score(
        "rff",
        RandomFourierFeatures(m, bandwidth=bw, random_state=ls),
        rcv["best_score"],
        {"bandwidth_factor": bw / med},
    )
    icv = select_by_cv(
        ImportanceSampledFeatures(m, rho=None, random_state=ls),
        {"bandwidth": bws, "rho_fraction": cfg["rho_fractions"]},
        X,
        y,
        **cv,
    )
    score(
        "importance",
        ImportanceSampledFeatures(m, rho=None, random_state=ls, **icv["best_params"]),
        icv["best_score"],
        {"bandwidth_factor": icv["best_params"]["bandwidth"] / med},
    )
    proto = CoulombFeatures(m, bandwidth=bw, random_state=ls, **cfg["base"])
    grid = [
        {k: [v] for k, v in var.items()} or {"lam": [cfg["base"]["lam"]]}
        for var in cfg["variants"].values()
    ]
    ccv = select_by_cv(proto, grid, X, y, **cv)
    names = list(cfg["variants"])
    cv_scores = dict(zip(names, map(float, ccv["mean_test_score"]), strict=True))
    best = names[int(np.argmax(ccv["mean_test_score"]))]  # first best, in VARIANTS order
    for name, var in cfg["variants"].items():
        learner = CoulombFeatures(m, bandwidth=bw, random_state=ls, **{**cfg["base"], **var})
        score(f"coulomb_{name}", learner, cv_scores[name])
    out["learners"]["coulomb_cv"] = {**out["learners"][f"coulomb_{best}"], "variant": best}
    out["wall_s"] = time.perf_counter() - t_cell
    out["meanfield_version"] = __version__
    out["machine"] = machine()
    out["noise"] = cfg["noise"]
    return out


def _jsonable(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


CONFIGS["full"] = dict(
    tasks=list(TASKS),
    noise=0.1,
    m=[64, 256],
    seeds=list(range(10)),
    n_train=1000,
    n_test=2000,
    cv=3,
    base=BASE,
    variants=VARIANTS,
    bandwidth_factors=BANDWIDTH_FACTORS,
    rho_fractions=RHO_FRACTIONS,
)
CONFIGS["ci"] = dict(
    tasks=["two_moons"],
    noise=0.1,
    m=[8],
    seeds=[0, 1],
    n_train=120,
    n_test=100,
    cv=2,
    base={**BASE, "n_steps": 20, "data_batch": None},
    variants={k: VARIANTS[k] for k in ("linear", "centred_es", "prior_b1")},
    bandwidth_factors=[0.5, 1.0],
    rho_fractions=[0.0, 1e-2],
)


def _floats(name, values, *, low=None) -> list:
    from ..errors import InputError

    if (
        not isinstance(values, list)
        or not values
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    ):
        raise InputError(f"{name} must be a non-empty list of numbers, got {values!r}")
    if low is not None and any(v < low for v in values):
        raise InputError(f"{name} must hold values >= {low}, got {values!r}")
    return [float(v) for v in values]


def _ints(name, values, low) -> list:
    from ..errors import InputError

    if (
        not isinstance(values, list)
        or not values
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= low for v in values)
        or len(set(values)) != len(values)
    ):
        raise InputError(f"{name} must be a non-empty list of distinct integers >= {low}")
    return list(values)


def check_config(cfg: dict) -> dict:
    """The variant study's configuration with every default filled in (those of ``full``),
    checked before any work; unknown keys, at any depth (``base.n_step``,
    ``variants.linear.alignmnet``), are refused naming the nearest.

    ``base`` is merged key by key into the default; ``variants``, when given, replaces the
    default set (name -> CoulombFeatures settings on top of ``base``).

    Examples
    --------
    >>> from meanfield.studies.synthetic_variants import CONFIGS, check_config
    >>> check_config(CONFIGS["ci"])["base"]["data_batch"] is None
    True
    """
    from ..errors import InputError

    defaults = CONFIGS["full"]
    if not isinstance(cfg, dict):
        raise InputError(f"the configuration must be a mapping, got {cfg!r}")
    out = copy.deepcopy(defaults)
    allowed = _estimator_keys("coulomb")
    for k, v in cfg.items():
        if k not in defaults:
            raise _unknown("", k, defaults)
        if k in ("base", "variants"):
            if not isinstance(v, dict) or (k == "variants" and not v):
                raise InputError(f"configuration key {k!r} must be a non-empty mapping, got {v!r}")
            subs = {"": v} if k == "base" else v
            for name, sub in subs.items():
                where = f"{k}." if k == "base" else f"{k}.{name}."
                if not isinstance(sub, dict):
                    raise InputError(f"configuration key {where[:-1]!r} must be a mapping")
                for kk in sub:
                    if kk not in allowed:
                        raise _unknown(where, kk, allowed)
            v = {**defaults["base"], **v} if k == "base" else v
        out[k] = copy.deepcopy(v)
    for t in out["tasks"] if isinstance(out["tasks"], list) else [None]:
        if t not in TASKS:
            raise InputError(f"unknown task {t!r}; choose from {list(TASKS)}")
    if len(set(out["tasks"])) != len(out["tasks"]):
        raise InputError(f"tasks must be distinct, got {out['tasks']!r}")
    noise = out["noise"]
    if not isinstance(noise, (int, float)) or isinstance(noise, bool) or not 0 <= noise < 0.5:
        raise InputError(f"noise must be a number in [0, 0.5), got {noise!r}")
    out["noise"] = float(noise)
    out["m"] = _ints("m", out["m"], 1)
    out["seeds"] = _ints("seeds", out["seeds"], 0)
    for k, low in (("n_train", 2), ("n_test", 2), ("cv", 2)):
        if not isinstance(out[k], int) or isinstance(out[k], bool) or out[k] < low:
            raise InputError(f"{k} must be an integer >= {low}, got {out[k]!r}")
    out["bandwidth_factors"] = _floats("bandwidth_factors", out["bandwidth_factors"], low=0.0)
    out["rho_fractions"] = _floats("rho_fractions", out["rho_fractions"], low=0.0)
    return out


def run_cell(
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
    """One cell of the sweep: :func:`cell_record` as a dataset (:func:`record_dataset`).

    Examples
    --------
    >>> from meanfield.studies.synthetic_variants import CONFIGS, check_config, run_cell
    >>> from meanfield.studies.synthetic_variants import sweep_spec
    >>> cfg = check_config({**CONFIGS["ci"], "n_train": 60, "variants": {"linear": {}}})
    >>> ds = run_cell("two_moons", 0, 8, **sweep_spec(cfg)["fixed"])
    >>> ds["ridge_test_error"].sizes["learner"]
    5
    """
    cfg = dict(
        noise=noise,
        n_train=n_train,
        n_test=n_test,
        cv=cv,
        base=base,
        variants=variants,
        bandwidth_factors=bandwidth_factors,
        rho_fractions=rho_fractions,
        task_settings=task_settings,
    )
    return record_dataset(cell_record(cfg, task, seed, m))


def record_dataset(rec: dict) -> xr.Dataset:
    """A cell's record as the dataset a run file holds: ``ridge_test_error`` along
    ``learner`` and the whole record as the JSON attribute ``record``.

    Examples
    --------
    >>> from meanfield.studies.synthetic_variants import record_dataset
    >>> ds = record_dataset({"learners": {"rff": {"ridge_test_error": 0.1}}})
    >>> float(ds["ridge_test_error"].sel(learner="rff")), ds.attrs["record"][:12]
    (0.1, '{"learners":')
    """
    names = list(rec["learners"])
    err = [float(rec["learners"][n].get("ridge_test_error", np.nan)) for n in names]
    ds = xr.Dataset({"ridge_test_error": ("learner", np.array(err))}, coords={"learner": names})
    ds.attrs["record"] = json.dumps(rec)
    return ds


def sweep_spec(cfg: dict, *, version: str | None = None) -> dict:
    """The sweep: grid (m ascending, then seeds, then tasks: a partial run has every task for
    its seeds), fixed parameters and configuration digest (``version``: the package version
    to key by, for converted runs).

    Examples
    --------
    >>> from meanfield.studies.synthetic_variants import CONFIGS, check_config, sweep_spec
    >>> list(sweep_spec(check_config(CONFIGS["ci"]))["grid"])
    ['m', 'seed', 'task']
    """
    from ..workbench.sweeps import configuration_digest, sweep_configuration

    grid = {"m": sorted(cfg["m"]), "seed": list(cfg["seeds"]), "task": list(cfg["tasks"])}
    fixed = {k: copy.deepcopy(cfg[k]) for k in cfg if k not in ("m", "seeds", "tasks")}
    fixed["task_settings"] = copy.deepcopy(TASKS)
    config = sweep_configuration(run_cell, fixed)
    if version is not None:
        config["meanfield_version"] = version
    config = json.loads(json.dumps(config))
    return dict(grid=grid, fixed=fixed, digest=configuration_digest(config), configuration=config)


def load_records(out) -> tuple[dict, list[dict]]:
    """The configuration last run into ``out`` and the records of its cells on disk, in grid
    order.

    Raises
    ------
    meanfield.errors.MissingFileError
        No ``config.json`` in ``out``.
    meanfield.errors.DataFileError
        ``config.json`` is not a study record of the sweep layout.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_variants import load_records
    >>> load_records(tempfile.mkdtemp())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    meanfield.errors.MissingFileError: no config.json in ...
    """
    from ..workbench.sweeps import grid_points, run_key
    from .synthetic_kernels import read_study_record

    out = Path(out)
    sweep, cfg = read_study_record(out)
    records = []
    for p in grid_points(sweep["grid"]):
        run = out / "runs" / f"{run_key(p, sweep['digest'])}.nc"
        try:
            with xr.open_dataset(run, engine="h5netcdf") as ds:
                records.append(json.loads(ds.attrs["record"]))
        except (OSError, ValueError, KeyError):
            pass
    return cfg, records


def scan_records(out) -> tuple[dict, list[dict]]:
    """The configuration last run into ``out`` and the ``record`` of *every* run file of that
    configuration there, whatever its grid point (the seeds of earlier calls too), in file
    name order; unreadable files and files of other configurations are left out.

    For the studies whose report covers every seed computed so far (``sinha_duchi.py``,
    ``diagnose.py``), not only the grid of the last call.

    Raises
    ------
    meanfield.errors.MissingFileError, meanfield.errors.DataFileError
        As :func:`load_records`.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_variants import CONFIGS, run_study, scan_records
    >>> cfg = {**CONFIGS["ci"], "seeds": [0], "n_train": 60, "variants": {"linear": {}}}
    >>> out = tempfile.mkdtemp()
    >>> _ = run_study(cfg, out, scheduler="threads", progress=False)
    >>> [r["seed"] for r in scan_records(out)[1]]
    [0]
    """
    from .synthetic_kernels import read_study_record

    out = Path(out)
    sweep, cfg = read_study_record(out)
    records = []
    for run in sorted((out / "runs").glob("*.nc")):
        try:
            with xr.open_dataset(run, engine="h5netcdf") as ds:
                if ds.attrs.get("sweep_config_digest") == sweep["digest"]:
                    records.append(json.loads(ds.attrs["record"]))
        except (OSError, ValueError, KeyError):
            pass
    return cfg, records


def run_record_sweep(
    func,
    cfg: dict,
    spec: dict,
    out,
    *,
    scheduler: str = "local",
    n_workers: int | None = None,
    progress: bool = True,
    log=None,
    name: str | None = None,
) -> dict:
    """Run (or resume) the sweep ``spec`` (``grid``, ``fixed``, ``digest``) of the run
    function ``func`` into ``out``, after writing ``out/config.json`` (the study record of the
    checked configuration ``cfg``): the runner of the studies of this family.

    Returns
    -------
    dict
        ``runs_done`` (cells computed now), ``runs_total``, ``notes``, ``wall_s``, ``result``.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_variants import CONFIGS, check_config, run_cell
    >>> from meanfield.studies.synthetic_variants import run_record_sweep, sweep_spec
    >>> cfg = check_config({**CONFIGS["ci"], "seeds": [0], "n_train": 60,
    ...                     "variants": {"linear": {}}})
    >>> res = run_record_sweep(run_cell, cfg, sweep_spec(cfg), tempfile.mkdtemp(),
    ...                        scheduler="threads", progress=False)
    >>> res["runs_done"], res["runs_total"]
    (1, 1)
    """
    from .._validation import check_output_path
    from ..workbench.sweeps import check_scheduler, run_sweep
    from .synthetic_kernels import _written_since, study_record

    out = check_output_path("out_dir", out, kind="dir")
    check_scheduler(scheduler)
    notes = []

    def note(line):
        notes.append(line)
        if log is not None:
            log(line)

    _write_json(
        out / "config.json",
        study_record(cfg, spec, name=name, scheduler=scheduler, n_workers=n_workers),
    )
    t0_ns, t0 = time.time_ns(), time.perf_counter()
    result = run_sweep(
        func,
        spec["grid"],
        out,
        fixed=spec["fixed"],
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
        log=note,
    )
    return {
        "runs_done": _written_since(out, spec, t0_ns),
        "runs_total": int(np.prod([len(v) for v in spec["grid"].values()])),
        "notes": notes,
        "wall_s": time.perf_counter() - t0,
        "result": result,
    }


def run_study(
    cfg: dict,
    out_dir,
    *,
    scheduler: str = "local",
    n_workers: int | None = None,
    progress: bool = True,
    log=None,
    name: str | None = None,
) -> dict:
    """Run (or resume) the variant study into ``out_dir``; as
    :func:`meanfield.studies.synthetic_kernels.run_study` (``runs_done``, ``runs_total``,
    ``notes``, ``wall_s``, ``result``).

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_variants import CONFIGS, load_records, run_study
    >>> cfg = {**CONFIGS["ci"], "seeds": [0], "n_train": 60, "variants": {"linear": {}}}
    >>> out = tempfile.mkdtemp()
    >>> kw = dict(scheduler="threads", progress=False)
    >>> run_study(cfg, out, **kw)["runs_done"], run_study(cfg, out, **kw)["runs_done"]
    (1, 0)
    >>> len(load_records(out)[1])
    1
    """
    cfg = check_config(cfg)
    return run_record_sweep(
        run_cell,
        cfg,
        sweep_spec(cfg),
        out_dir,
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
        log=log,
        name=name,
    )
