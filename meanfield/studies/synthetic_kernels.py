"""The synthetic kernel-learning study (learner x task x noise x m x seed) on the sweep runner.

The study of ``paper_repro/synthetic/README.md``: fixed random Fourier features, importance
sampling (Sinha & Duchi 2016), Coulomb particles and the same Langevin dynamics without
repulsion, on the tasks of :mod:`meanfield.learners.tasks`, across label noise and feature budgets
m. One grid point (:func:`run_cell`) is a (m, task, noise, seed) cell: every learner on the
same data split and from the same initial draw, so the comparisons are paired. The cells are
one sweep of :func:`meanfield.workbench.sweeps.run_sweep`, so every cell

* is keyed by the whole configuration that computes it (learners, sizes, the Coulomb and
  importance-sampling settings, the task settings, the package version): a rerun with another
  setting computes new cells under new keys and never reuses a stale one;
* is written when it finishes; a rerun resumes; a corrupt run file is set aside and recomputed;
* runs on dask: threads in this process, a ``LocalCluster`` (``scheduler="local"``) or a
  cluster's address.

Output folder: ``config.json`` (the configuration last run there, with its sweep's grid and
digest: the report shows only those cells), ``runs/*.nc`` (one file per cell; its
``records`` attribute holds every learner's numbers as JSON), ``configurations.json`` and
``sweep.nc`` (the sweep runner's). Reports: :mod:`meanfield.studies.synthetic_kernels_report`.

Examples
--------
>>> from meanfield.studies.synthetic_kernels import CONFIGS, check_config
>>> cfg = check_config({"tasks": ["two_moons"], "coulomb": {"n_steps": 30}})
>>> cfg["coulomb"]["n_steps"], cfg["coulomb"]["lam"], cfg["learners"] == CONFIGS["full"]["learners"]
(30, 0.3, True)
"""

from __future__ import annotations

import copy
import difflib
import inspect
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import xarray as xr

__all__ = [
    "COULOMB",
    "IMPORTANCE",
    "TASKS",
    "read_study_record",
    "CONFIGS",
    "LEARNER_LABELS",
    "FIELDS",
    "check_config",
    "config_differences",
    "make_learner",
    "run_cell",
    "cell_dataset",
    "cell_records",
    "sweep_spec",
    "study_record",
    "run_study",
]

#: Coulomb-particle hyper-parameters (standardised units, see CoulombFeatures). Chosen on
#: development seeds 100-101 (never the study seeds 0-9) at noise 0.1, m = 64 (and 256) over
#: eta in {1, 5, 20}, lam in {0, 0.01, 0.03, 0.1, 0.3, 1}, s in {0, 1}; data mini-batches of
#: 250 rows (of 1000) halve the cost and changed the dev errors by < 0.01. See the README.
COULOMB = dict(eta=1.0, lam=0.3, s=1.0, softening=0.1, beta=1e3, n_steps=300, data_batch=250)

#: Importance sampling: chi-square budget rho (D_chi2(q || uniform) <= rho). Chosen on the same
#: development seeds over rho = rho_fraction * (N_w - 1), rho_fraction in {0, 1e-3, 1e-2, 0.05,
#: 0.2, 0.5}: small budgets win (0.5 was at chance on the checkerboard); rho = 1 is fixed in m.
IMPORTANCE = dict(rho=1.0)

#: Each task's settings (:func:`meanfield.learners.tasks.make_task` keywords); part of every key.
TASKS = {
    "radial": dict(d=10),
    "gaussian_mixture": dict(d=5),
    "checkerboard": dict(n_cells=4, d=2),
    "two_moons": dict(jitter=0.3, d=2),
}

LEARNER_LABELS = {
    "rff": "fixed RFF",
    "importance": "importance sampling",
    "coulomb": "Coulomb particles",
    "langevin": "Langevin, lambda=0",
}

#: The study's settings and their defaults (those of the full configuration).
study_config_defaults = dict(
    learners=list(LEARNER_LABELS),
    tasks=list(TASKS),
    noise=[0.0, 0.1, 0.2],
    m=[16, 32, 64, 128, 256],
    seeds=list(range(10)),
    n_train=1000,
    n_test=2000,
    coulomb=COULOMB,
    importance=IMPORTANCE,
)

#: The named configurations of ``paper_repro/synthetic/run_study.py --config``.
CONFIGS = {
    "full": copy.deepcopy(study_config_defaults),
    "ci": dict(
        learners=list(LEARNER_LABELS),
        tasks=["checkerboard", "two_moons"],
        noise=[0.1],
        m=[16, 32],
        seeds=[0, 1],
        n_train=200,
        n_test=200,
        coulomb={**COULOMB, "n_steps": 30},
        importance=IMPORTANCE,
    ),
}

#: The numbers of one learner's run (a data variable each in a run file; NaN where a learner
#: has none, e.g. the particle diagnostics of fixed RFF).
FIELDS = (
    "fit_time",
    "alignment_train",
    "alignment_test",
    "ridge_train_accuracy",
    "ridge_test_accuracy",
    "ridge_test_error",
    "ridge_alpha",
    "logistic_train_accuracy",
    "logistic_test_accuracy",
    "logistic_test_error",
    "alignment_init",
    "alignment",
    "min_distance_init",
    "min_distance",
)
_LABELS = ("learner", "task", "noise", "seed", "m")


# ---------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------
def _unknown(where: str, key, allowed) -> Exception:
    from ..errors import InputError

    near = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
    hint = f" (did you mean {where + near[0]!r}?)" if near else ""
    return InputError(f"unknown configuration key {where + str(key)!r}{hint}")


def _estimator_keys(name: str) -> list[str]:
    """The settings a learner's section may hold: its estimator's constructor keywords, less
    those the study sets per run (``n_features``, ``bandwidth``, ``random_state``)."""
    from ..learners import CoulombFeatures, ImportanceSampledFeatures

    cls = CoulombFeatures if name == "coulomb" else ImportanceSampledFeatures
    skip = {"self", "n_features", "bandwidth", "random_state"}
    return [p for p in inspect.signature(cls.__init__).parameters if p not in skip]


def _check_list(name, values, kind, *, low=None) -> list:
    from ..errors import InputError

    if not isinstance(values, list) or not values:
        raise InputError(f"{name} must be a non-empty list, got {values!r}")
    if kind is float:
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    else:
        ok = all(isinstance(v, kind) and not isinstance(v, bool) for v in values)
    if not ok:
        raise InputError(f"{name} must hold {kind.__name__} values, got {values!r}")
    values = [kind(v) for v in values]
    if len(set(values)) != len(values):
        raise InputError(f"{name} must hold distinct values, got {values!r}")
    if low is not None and any(v < low for v in values):
        raise InputError(f"{name} must hold values >= {low}, got {values!r}")
    return values


def check_config(cfg: dict) -> dict:
    """The study configuration with every default filled in, checked before any work.

    Unknown keys, at any depth (``n_trian``, ``coulomb.n_step``), are refused naming the
    nearest known key; a learner section (``coulomb``, ``importance``) may set any keyword of
    its estimator but those the study sets per run.

    Parameters
    ----------
    cfg : dict
        Settings of :data:`study_config_defaults` (missing ones take its values; the
        ``coulomb`` and ``importance`` sections are merged key by key into theirs).

    Returns
    -------
    dict
        The resolved configuration (noise levels as floats).

    Raises
    ------
    meanfield.errors.InputError
        An unknown key, or a value out of range (the message names it).

    Examples
    --------
    >>> from meanfield.studies.synthetic_kernels import check_config
    >>> check_config({"n_trian": 10})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'n_trian' (did you mean 'n_train'?)
    >>> check_config({"coulomb": {"n_step": 10}})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'coulomb.n_step' (did you mean \
'coulomb.n_steps'?)
    """
    from ..errors import InputError

    if not isinstance(cfg, dict):
        raise InputError(f"the configuration must be a mapping, got {cfg!r}")
    out = copy.deepcopy(study_config_defaults)
    for k, v in cfg.items():
        if k not in study_config_defaults:
            raise _unknown("", k, study_config_defaults)
        if k in ("coulomb", "importance"):
            if not isinstance(v, dict):
                raise InputError(f"configuration key {k!r} must be a mapping, got {v!r}")
            allowed = _estimator_keys(k)
            for kk in v:
                if kk not in allowed:
                    raise _unknown(f"{k}.", kk, allowed)
            v = {**study_config_defaults[k], **v}
        out[k] = copy.deepcopy(v)
    for name in ("learners", "tasks"):
        _check_list(name, out[name], str)
        known = LEARNER_LABELS if name == "learners" else TASKS
        for x in out[name]:
            if x not in known:
                raise InputError(f"unknown {name[:-1]} {x!r}; choose from {list(known)}")
    out["noise"] = _check_list("noise", out["noise"], float, low=0.0)
    if any(v >= 0.5 for v in out["noise"]):
        raise InputError(f"noise must hold values in [0, 0.5), got {out['noise']!r}")
    out["m"] = _check_list("m", out["m"], int, low=1)
    out["seeds"] = _check_list("seeds", out["seeds"], int, low=0)
    for k in ("n_train", "n_test"):
        if not isinstance(out[k], int) or isinstance(out[k], bool) or out[k] < 2:
            raise InputError(f"{k} must be an integer >= 2, got {out[k]!r}")
    return out


def config_differences(old: dict, new: dict) -> list[str]:
    """``key: old -> new`` for every setting where two configurations differ (dotted keys).

    Examples
    --------
    >>> from meanfield.studies.synthetic_kernels import config_differences
    >>> config_differences({"coulomb": {"lam": 0.3}}, {"coulomb": {"lam": 0.1}})
    ['coulomb.lam: 0.3 -> 0.1']
    """

    def flat(c, prefix=""):
        out = {}
        for k, v in c.items():
            if isinstance(v, dict):
                out.update(flat(v, f"{prefix}{k}."))
            else:
                out[prefix + k] = v
        return out

    a, b = flat(old), flat(new)
    return [
        f"{k}: {a.get(k, '<unset>')!r} -> {b.get(k, '<unset>')!r}"
        for k in sorted(set(a) | set(b))
        if a.get(k, "<unset>") != b.get(k, "<unset>")
    ]


# ---------------------------------------------------------------------------------------
# one cell
# ---------------------------------------------------------------------------------------
def make_learner(name: str, m: int, seed: int, coulomb: dict, importance: dict | None = None):
    """The study's learner ``name`` with ``m`` features, seeded by ``seed``.

    Examples
    --------
    >>> from meanfield.studies.synthetic_kernels import COULOMB, make_learner
    >>> make_learner("langevin", 8, 0, COULOMB).lam
    0.0
    """
    from ..learners import CoulombFeatures, ImportanceSampledFeatures, RandomFourierFeatures

    common = dict(bandwidth="median", random_state=seed)
    if name == "rff":
        return RandomFourierFeatures(m, **common)
    if name == "importance":
        return ImportanceSampledFeatures(m, **common, **(importance or IMPORTANCE))
    if name == "coulomb":
        return CoulombFeatures(m, **common, **coulomb)
    if name == "langevin":
        return CoulombFeatures(m, **common, **{**coulomb, "lam": 0.0})
    raise ValueError(f"unknown learner {name!r}; choose one of {', '.join(LEARNER_LABELS)}")


def cell_dataset(records: list[dict]) -> xr.Dataset:
    """One cell's records (one per learner) as the dataset a run file holds.

    One data variable ``metrics`` (learner x metric, the numbers of :data:`FIELDS`; NaN where
    a learner has none) -- one variable rather than one per metric keeps a run file at 9 KB,
    not 24 -- and the records themselves, every key, as the JSON attribute ``records``.

    Examples
    --------
    >>> from meanfield.studies.synthetic_kernels import cell_dataset, cell_records
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


def cell_records(ds: xr.Dataset) -> list[dict]:
    """The records a run file holds (:func:`cell_dataset`'s ``records``).

    Examples
    --------
    >>> from meanfield.studies.synthetic_kernels import cell_dataset, cell_records
    >>> cell_records(cell_dataset([{"learner": "rff", "m": 8}]))
    [{'learner': 'rff', 'm': 8}]
    """
    return json.loads(ds.attrs["records"])


def run_cell(
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
    """Every learner on one (task, noise, seed) split with ``m`` features: one run of the sweep.

    The data seed is ``seed``; the learner seed ``10000 + seed`` is shared by all learners, so
    the Coulomb particles start from exactly the fixed-RFF draw.

    Returns
    -------
    xarray.Dataset
        :func:`cell_dataset` of the records, one per learner.

    Examples
    --------
    >>> from meanfield.studies.synthetic_kernels import COULOMB, IMPORTANCE, TASKS, run_cell
    >>> ds = run_cell("two_moons", 0.1, 0, 8, learners=["rff", "importance"], n_train=40,
    ...               n_test=20, coulomb=COULOMB, importance=IMPORTANCE, task_settings=TASKS)
    >>> ds["metrics"].sel(metric="ridge_test_error").learner.values.tolist()
    ['rff', 'importance']
    """
    import torch
    from threadpoolctl import threadpool_limits

    # One run per core; the matrices are small. Without the BLAS limit, numpy's SVD in the
    # ridge fit slows down ~50x on a loaded machine (threads contending for 2 cores).
    torch.set_num_threads(1)
    from ..learners import evaluate
    from ..learners.tasks import make_task

    threadpool_limits(1)
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


# ---------------------------------------------------------------------------------------
# the sweep
# ---------------------------------------------------------------------------------------
def sweep_spec(cfg: dict, *, version: str | None = None) -> dict:
    """The study's sweep: grid, fixed parameters and configuration digest.

    What :func:`run_study` runs and what the report reads (the runs of this digest only).
    The grid puts the largest m first (the slowest cells start first).

    Parameters
    ----------
    cfg : dict
        A configuration from :func:`check_config`.
    version : str, optional
        The package version to key by (default the installed one; the converter of recorded
        results passes the version they were computed with).

    Returns
    -------
    dict
        ``grid``, ``fixed``, ``digest`` and ``configuration``
        (:func:`meanfield.workbench.sweeps.sweep_configuration`).

    Examples
    --------
    >>> from meanfield.studies.synthetic_kernels import CONFIGS, check_config, sweep_spec
    >>> a = sweep_spec(check_config(CONFIGS["ci"]))
    >>> b = sweep_spec(check_config({**CONFIGS["ci"], "n_train": 300}))
    >>> list(a["grid"]), a["grid"]["m"], a["digest"] != b["digest"]
    (['m', 'task', 'noise', 'seed'], [32, 16], True)
    """
    from ..workbench.sweeps import configuration_digest, sweep_configuration

    grid = {
        "m": sorted(cfg["m"], reverse=True),
        "task": list(cfg["tasks"]),
        "noise": [float(x) for x in cfg["noise"]],
        "seed": list(cfg["seeds"]),
    }
    fixed = {
        "learners": list(cfg["learners"]),
        "n_train": cfg["n_train"],
        "n_test": cfg["n_test"],
        "coulomb": dict(cfg["coulomb"]),
        "importance": dict(cfg["importance"]),
        "task_settings": copy.deepcopy(TASKS),
    }
    config = sweep_configuration(run_cell, fixed)
    if version is not None:
        config["meanfield_version"] = version
    config = json.loads(json.dumps(config))  # as the manifest reads back (tuples -> lists)
    return dict(grid=grid, fixed=fixed, digest=configuration_digest(config), configuration=config)


def study_record(cfg: dict, spec: dict, **extra) -> dict:
    """What ``config.json`` of a study folder holds: the configuration, its sweep's grid and
    digest (the report reads these runs only), the versions and ``extra``.

    Examples
    --------
    >>> from meanfield.studies.synthetic_kernels import CONFIGS, check_config, study_record
    >>> from meanfield.studies.synthetic_kernels import sweep_spec
    >>> cfg = check_config(CONFIGS["ci"])
    >>> sorted(study_record(cfg, sweep_spec(cfg))["sweep"])
    ['digest', 'grid']
    """
    import sys

    from .._version import __version__

    return {
        "config": cfg,
        **extra,
        "meanfield_version": __version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "sweep": {"grid": spec["grid"], "digest": spec["digest"]},
    }


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(obj, indent=1, default=float))
    os.replace(tmp, path)


def _written_since(out: Path, spec: dict, t0_ns: int) -> int:
    from ..workbench.sweeps import grid_points, run_key

    paths = [out / "runs" / f"{run_key(p, spec['digest'])}.nc" for p in grid_points(spec["grid"])]
    return sum(p.is_file() and p.stat().st_mtime_ns >= t0_ns for p in paths)


def read_study_record(out) -> tuple[dict, dict]:
    """(sweep, configuration) of a study folder's ``config.json`` (the sweep layout).

    Raises
    ------
    meanfield.errors.MissingFileError
        No ``config.json``: nothing was run in ``out``.
    meanfield.errors.DataFileError
        ``config.json`` is not a study record of the sweep layout.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_kernels import read_study_record
    >>> read_study_record(tempfile.mkdtemp())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    meanfield.errors.MissingFileError: no config.json in ...
    """
    from ..errors import DataFileError, MissingFileError

    out = Path(out)
    path = out / "config.json"
    if not path.is_file():
        raise MissingFileError(f"no config.json in {str(out)!r}: nothing was run there")
    try:
        study = json.loads(path.read_text())
        sweep, cfg = study["sweep"], study["config"]
    except (ValueError, KeyError, TypeError):
        raise DataFileError(
            f"{path} is not a study record of the sweep layout (an old runs.jsonl folder? "
            "convert it with paper_repro/synthetic/convert_results.py)"
        ) from None
    return sweep, cfg


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
    """Run (or resume) the study into ``out_dir``: one sweep over (m, task, noise, seed).

    Parameters
    ----------
    cfg : dict
        The configuration (checked by :func:`check_config`).
    out_dir : path
        The study folder (resumed if it holds runs of this configuration; runs of others are
        kept, not reused, and noted).
    scheduler : str
        ``"local"`` (a ``LocalCluster`` of ``n_workers`` processes), ``"threads"`` or a dask
        scheduler's address.
    n_workers : int, optional
        Processes or threads (default one per core).
    progress : bool
        A progress bar.
    log : callable, optional
        Receives the sweep's notes (other configurations, run files set aside).
    name : str, optional
        The configuration's name, recorded in ``config.json``.

    Returns
    -------
    dict
        ``runs_done`` (cells computed now), ``runs_total``, ``notes``, ``wall_s`` and
        ``result`` (the gathered :class:`xarray.Dataset`).

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_kernels import run_study
    >>> cfg = dict(learners=["rff"], tasks=["two_moons"], noise=[0.1], m=[8], seeds=[0],
    ...            n_train=40, n_test=20)
    >>> out = tempfile.mkdtemp()
    >>> kw = dict(scheduler="threads", n_workers=1, progress=False)
    >>> run_study(cfg, out, **kw)["runs_done"], run_study(cfg, out, **kw)["runs_done"]
    (1, 0)
    """
    from .._validation import check_output_path
    from ..workbench.sweeps import check_scheduler, run_sweep

    cfg = check_config(cfg)
    out = check_output_path("out_dir", out_dir, kind="dir")
    check_scheduler(scheduler)
    spec = sweep_spec(cfg)
    notes = []

    def note(line):
        notes.append(line)
        if log is not None:
            log(line)

    _write_json(
        out / "config.json",
        study_record(
            cfg,
            spec,
            name=name,
            scheduler=scheduler,
            n_workers=n_workers,
            machine=f"{platform.machine()} {os.cpu_count()} cpus, 1 thread per run",
        ),
    )
    t0_ns, t0 = time.time_ns(), time.perf_counter()
    result = run_sweep(
        run_cell,
        spec["grid"],
        out,
        fixed=spec["fixed"],
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
        log=note,
    )
    total = int(np.prod([len(v) for v in spec["grid"].values()]))
    return {
        "runs_done": _written_since(out, spec, t0_ns),
        "runs_total": total,
        "notes": notes,
        "wall_s": time.perf_counter() - t0,
        "result": result,
    }
