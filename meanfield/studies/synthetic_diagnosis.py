"""Why the first Coulomb configuration loses on the radial and mixture tasks, over many seeds,
with counterfactual feature sets that separate the norms, the directions and the phases of
the learned frequencies (issue 22, item 2).

For one (task, seed) split (noise 0.1, n_train = 1000, n_test = 2000) and m = 256 particles
from the median-bandwidth RFF draw ω⁰ = (w⁰, b⁰), the first study's configuration (linear
alignment, β = 10³, λ = 0.3, 300 steps) is run to ω¹ = (w¹, b¹), and the same run with the
frame repulsion of the directions (``direction_repulsion`` = 1) to ω^F. With u = w/|w| (one
particle each, matched by index; standardised units), the feature sets scored by the same
ridge (α by exact leave-one-out over n · 10^[−12..1]):

=====================  =========================================  ==========================
set                    frequencies, phase                          isolates
=====================  =========================================  ==========================
``rff``                w⁰, b⁰                                       the start
``learned``            w¹, b¹                                       the learned particles
``learned_w_prior_b``  w¹, b⁰                                       the learned phases
``norms_only``         |w¹| u⁰, b⁰ (learned norms, prior directions)  the norms
``directions_only``    |w⁰| u¹, b⁰ (prior norms, learned directions)  the directions
``narrowed``           c w⁰, b⁰, c = median|w¹| / median|w⁰|        a kernel narrowed as much
``frame``              ω^F (learned with the frame repulsion)        stopping the collapse
=====================  =========================================  ==========================

and, along the linear run (``n_checkpoints`` records), the test error and the centred test
alignment. :func:`diagnose_seed` returns one JSON-ready record. The study is one sweep of
:func:`meanfield.workbench.sweeps.run_sweep` over (seed, task) (:func:`run_study`), keyed by
the whole configuration (:data:`CONFIGS`): a run file (:func:`run_diagnosis`) holds the test
error of every set and the whole record as the JSON attribute ``record``. The CLI, the
summary and the figure are ``paper_repro/synthetic/diagnose.py``.

Examples
--------
>>> import numpy as np
>>> from meanfield.studies.synthetic_diagnosis import counterfactuals
>>> w0 = np.array([[3.0, 4.0, 0.1]]); w1 = np.array([[0.0, 10.0, 0.2]])
>>> cf = counterfactuals(w0, w1, d=2)
>>> cf["norms_only"].tolist(), cf["directions_only"].tolist()
([[6.0, 8.0, 0.1]], [[0.0, 5.0, 0.1]])
"""

from __future__ import annotations

import time

import numpy as np

__all__ = [
    "SETS",
    "FIRST",
    "CONFIGS",
    "counterfactuals",
    "isotropy",
    "diagnose_seed",
    "check_config",
    "run_diagnosis",
    "record_dataset",
    "sweep_spec",
    "run_study",
]

#: The feature sets of a record, in report order.
SETS = (
    "rff",
    "learned",
    "learned_w_prior_b",
    "norms_only",
    "directions_only",
    "narrowed",
    "frame",
)

#: The first study's configuration (``synthetic_kernels.COULOMB``).
FIRST = dict(lam=0.3, s=1.0, softening=0.1, beta=1e3, eta=1.0, n_steps=300, data_batch=250)

#: ``full``: the diagnosis of the README (seeds 0-9, ~2 min a (task, seed) on one core);
#: ``ci``: seconds.
CONFIGS = {
    "full": dict(
        tasks=["radial", "gaussian_mixture", "checkerboard"],
        seeds=list(range(10)),
        m=256,
        noise=0.1,
        n_train=1000,
        n_test=2000,
        n_checkpoints=10,
        coulomb=FIRST,
        direction_repulsion=1.0,
    ),
    "ci": dict(
        tasks=["radial", "checkerboard"],
        seeds=[0, 1],
        m=8,
        noise=0.1,
        n_train=60,
        n_test=40,
        n_checkpoints=2,
        coulomb={**FIRST, "n_steps": 4, "data_batch": None},
        direction_repulsion=1.0,
    ),
}


def counterfactuals(omega0, omega1, d: int) -> dict:
    """The recombined particle sets of the module docstring (frequencies in any units: the
    construction is scale-equivariant), from the start ``omega0`` and the learned ``omega1``.

    Parameters
    ----------
    omega0, omega1 : arrays of shape (m, d + 1)
        Initial and learned particles (frequencies, then the phase), matched by row.
    d : int
        Input dimension.

    Returns
    -------
    dict
        ``rff``, ``learned``, ``learned_w_prior_b``, ``norms_only``, ``directions_only``,
        ``narrowed`` (arrays of shape (m, d + 1)) and the narrowing factor ``c``.

    Examples
    --------
    >>> import numpy as np
    >>> w0 = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 1.0]]); w1 = 3 * w0
    >>> float(counterfactuals(w0, w1, 2)["c"])
    3.0
    """
    w0, b0 = np.asarray(omega0)[:, :d], np.asarray(omega0)[:, d:]
    w1, b1 = np.asarray(omega1)[:, :d], np.asarray(omega1)[:, d:]
    n0 = np.linalg.norm(w0, axis=1, keepdims=True)
    n1 = np.linalg.norm(w1, axis=1, keepdims=True)
    u0, u1 = w0 / n0, w1 / n1
    c = float(np.median(n1) / np.median(n0))
    return {
        "rff": np.c_[w0, b0],
        "learned": np.c_[w1, b1],
        "learned_w_prior_b": np.c_[w1, b0],
        "norms_only": np.c_[n1 * u0, b0],
        "directions_only": np.c_[n0 * u1, b0],
        "narrowed": np.c_[c * w0, b0],
        "c": c,
    }


def isotropy(omega, d: int) -> float:
    """d times the largest eigenvalue of the directions' second moment (1/m) Σ u uᵀ: 1 for an
    isotropic law, d when every direction lies on one axis.

    Parameters
    ----------
    omega : array of shape (m, >= d)
    d : int

    Returns
    -------
    float in [1, d]

    Examples
    --------
    >>> import numpy as np
    >>> isotropy(np.array([[1.0, 0.0], [-2.0, 0.0]]), 2), isotropy(np.eye(2), 2)
    (2.0, 1.0)
    """
    w = np.asarray(omega, dtype=float)[:, :d]
    u = w / np.linalg.norm(w, axis=1, keepdims=True)
    return float(d * np.linalg.eigvalsh(u.T @ u / len(u)).max())


def _ridge_row(omega, split, alphas) -> dict:
    from ..learners import RidgeFeatureClassifier, fourier_features, kernel_alignment

    Xtr, ytr, Xte, yte = split[:4]
    Ftr, Fte = fourier_features(Xtr, omega), fourier_features(Xte, omega)
    clf = RidgeFeatureClassifier(alpha=alphas).fit(Ftr, ytr)
    return {
        "test_error": float(np.mean(clf.predict(Fte) != yte)),
        "align_c_test": kernel_alignment(Fte, yte, centred=True),
        "align_c_train": kernel_alignment(Ftr, ytr, centred=True),
        "alpha": float(clf.alpha_),
    }


def diagnose_seed(
    task: str,
    seed: int,
    *,
    m: int = 256,
    noise: float = 0.1,
    n_train: int = 1000,
    n_test: int = 2000,
    n_checkpoints: int = 10,
    coulomb: dict | None = None,
    direction_repulsion: float = 1.0,
) -> dict:
    """One (task, seed) record of the diagnosis (module docstring): every feature set's test
    error, alignments, isotropy and median standardised norm, and the linear run's curve.

    Examples
    --------
    >>> from meanfield.studies.synthetic_diagnosis import diagnose_seed
    >>> rec = diagnose_seed("two_moons", 0, m=8, n_train=60, n_test=40, n_checkpoints=2,
    ...                     coulomb={"n_steps": 4, "data_batch": None})
    >>> sorted(rec["sets"]) == sorted(SETS), [c["step"] for c in rec["curve"]]
    (True, [0, 2, 4])
    """
    import torch
    from threadpoolctl import threadpool_limits

    from .._version import __version__
    from ..learners import CoulombFeatures, median_bandwidth
    from ..learners.tasks import make_task
    from .synthetic_kernels import TASKS
    from .synthetic_search import ridge_alphas
    from .synthetic_variants import machine

    torch.set_num_threads(1)
    threadpool_limits(1)
    t0 = time.perf_counter()
    split = make_task(task, n_train, n_test, noise=noise, seed=seed, **TASKS[task])
    ls = 10_000 + seed
    sigma = median_bandwidth(split[0], rng=ls)
    cfg = {**FIRST, **(coulomb or {})}
    lin = CoulombFeatures(m, bandwidth=sigma, random_state=ls, n_checkpoints=n_checkpoints, **cfg)
    lin.fit(split[0], split[1])
    fr = CoulombFeatures(
        m, bandwidth=sigma, random_state=ls, direction_repulsion=direction_repulsion, **cfg
    )
    fr.fit(split[0], split[1])
    d = split[0].shape[1]
    alphas = ridge_alphas(n_train)
    sets = counterfactuals(lin.omega_init_, lin.omega_, d)
    c = sets.pop("c")
    sets["frame"] = fr.omega_
    out = {
        "task": task,
        "seed": seed,
        "m": m,
        "noise": noise,
        "sigma": sigma,
        "narrowing": c,
        "sets": {},
    }
    for name, om in sets.items():
        row = _ridge_row(om, split, alphas)
        row["isotropy"] = isotropy(om, d)
        row["median_norm"] = float(np.median(np.linalg.norm(om[:, :d], axis=1)) * sigma)
        out["sets"][name] = row
    out["curve"] = [
        {"step": int(s), **_ridge_row(om, split, alphas)}
        for s, om in zip(lin.checkpoint_steps_, lin.checkpoints_, strict=True)
    ]
    out.update(
        norms_init=(np.linalg.norm(lin.omega_init_[:, :d], axis=1) * sigma).tolist(),
        norms_learned=(np.linalg.norm(lin.omega_[:, :d], axis=1) * sigma).tolist(),
        configuration={**cfg, "direction_repulsion_frame": direction_repulsion},
        meanfield_version=__version__,
        wall_s=time.perf_counter() - t0,
        machine=machine(),
    )
    return out


def check_config(cfg: dict) -> dict:
    """The diagnosis configuration with the defaults of ``full`` filled in, checked before
    any work (unknown keys refused naming the nearest; ``coulomb`` merged into :data:`FIRST`).

    Examples
    --------
    >>> from meanfield.studies.synthetic_diagnosis import check_config
    >>> check_config({"seeds": [3]})["tasks"]
    ['radial', 'gaussian_mixture', 'checkerboard']
    >>> check_config({"n_checkpoint": 3})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'n_checkpoint' (did you mean \
'n_checkpoints'?)
    """
    import copy
    import json

    from ..errors import InputError
    from .synthetic_kernels import TASKS, _estimator_keys, _unknown
    from .synthetic_variants import _ints

    defaults = CONFIGS["full"]
    if not isinstance(cfg, dict):
        raise InputError(f"the configuration must be a mapping, got {cfg!r}")
    out = copy.deepcopy(defaults)
    for k, v in cfg.items():
        if k not in defaults:
            raise _unknown("", k, defaults)
        if k == "coulomb":
            if not isinstance(v, dict):
                raise InputError(f"configuration key 'coulomb' must be a mapping, got {v!r}")
            allowed = _estimator_keys("coulomb")
            for kk in v:
                if kk not in allowed:
                    raise _unknown("coulomb.", kk, allowed)
            v = {**FIRST, **v}
        out[k] = copy.deepcopy(v)
    tasks = out["tasks"]
    if not isinstance(tasks, list) or not tasks or len(set(tasks)) != len(tasks):
        raise InputError(f"tasks must be a non-empty list of distinct tasks, got {tasks!r}")
    for t in tasks:
        if t not in TASKS:
            raise InputError(f"unknown task {t!r}; choose from {list(TASKS)}")
    out["seeds"] = _ints("seeds", out["seeds"], 0)
    for k, low in (("m", 1), ("n_train", 2), ("n_test", 2), ("n_checkpoints", 1)):
        if not isinstance(out[k], int) or isinstance(out[k], bool) or out[k] < low:
            raise InputError(f"{k} must be an integer >= {low}, got {out[k]!r}")
    return json.loads(json.dumps(out))  # as it reads back from config.json


def run_diagnosis(
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
    """The sweep's run function: :func:`diagnose_seed` as a dataset (:func:`record_dataset`).

    Examples
    --------
    >>> from meanfield.studies.synthetic_diagnosis import CONFIGS, check_config
    >>> from meanfield.studies.synthetic_diagnosis import run_diagnosis, sweep_spec
    >>> ds = run_diagnosis(0, "radial", **sweep_spec(check_config(CONFIGS["ci"]))["fixed"])
    >>> ds["test_error"].dims, ds["test_error"].sizes["set"]
    (('set',), 7)
    """
    return record_dataset(
        diagnose_seed(
            task,
            seed,
            m=m,
            noise=noise,
            n_train=n_train,
            n_test=n_test,
            n_checkpoints=n_checkpoints,
            coulomb=coulomb,
            direction_repulsion=direction_repulsion,
        )
    )


def record_dataset(rec: dict):
    """A (task, seed) record as the dataset a run file holds: ``test_error`` along ``set``,
    the ``narrowing`` factor, and the whole record as the JSON attribute ``record`` (what the
    summary, the tables and the figure read).

    Examples
    --------
    >>> from meanfield.studies.synthetic_diagnosis import record_dataset
    >>> ds = record_dataset({"narrowing": 0.5, "sets": {"rff": {"test_error": 0.25}}})
    >>> float(ds["test_error"].sel(set="rff")), ds.attrs["record"][:14]
    (0.25, '{"narrowing": ')
    """
    import json

    import xarray as xr

    names = list(rec["sets"])
    err = [float(rec["sets"][n]["test_error"]) for n in names]
    ds = xr.Dataset(
        {"test_error": ("set", np.array(err)), "narrowing": ((), float(rec["narrowing"]))},
        coords={"set": names},
    )
    ds.attrs["record"] = json.dumps(rec)
    return ds


def sweep_spec(cfg: dict, *, version: str | None = None) -> dict:
    """The sweep: grid (seed, then task: a partial run has every task for its seeds), fixed
    parameters and configuration digest (``version``: the package version to key by, for
    converted runs).

    Examples
    --------
    >>> from meanfield.studies.synthetic_diagnosis import CONFIGS, check_config, sweep_spec
    >>> spec = sweep_spec(check_config(CONFIGS["ci"]))
    >>> spec["grid"], spec["fixed"]["m"]
    ({'seed': [0, 1], 'task': ['radial', 'checkerboard']}, 8)
    """
    import copy
    import json

    from ..workbench.sweeps import configuration_digest, sweep_configuration

    grid = {"seed": list(cfg["seeds"]), "task": list(cfg["tasks"])}
    fixed = {k: copy.deepcopy(v) for k, v in cfg.items() if k not in ("seeds", "tasks")}
    config = sweep_configuration(run_diagnosis, fixed)
    if version is not None:
        config["meanfield_version"] = version
    config = json.loads(json.dumps(config))
    return dict(grid=grid, fixed=fixed, digest=configuration_digest(config), configuration=config)


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
    """Run (or resume) the diagnosis into ``out_dir``: one run file per (seed, task); as
    :func:`meanfield.studies.synthetic_variants.run_study` (``runs_done``, ``runs_total``,
    ``notes``, ``wall_s``, ``result``).

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_diagnosis import CONFIGS, run_study
    >>> cfg, out = {**CONFIGS["ci"], "seeds": [0]}, tempfile.mkdtemp()
    >>> kw = dict(scheduler="threads", n_workers=1, progress=False)
    >>> run_study(cfg, out, **kw)["runs_done"], run_study(cfg, out, **kw)["runs_done"]
    (2, 0)
    """
    from .synthetic_variants import run_record_sweep

    cfg = check_config(cfg)
    return run_record_sweep(
        run_diagnosis,
        cfg,
        sweep_spec(cfg),
        out_dir,
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
        log=log,
        name=name,
    )
