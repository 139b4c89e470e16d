"""Sinha & Duchi's radial experiment under their own protocol, with Coulomb particles (issue
10; the ridge conventions taken apart and the importance-sampling spread over candidate draws
in issue 22), on the sweep runner (issue 21).

Their published script (``learning-kernels``, example script for the radial task): x ~ N(0,
I_10), n = 10^4 training and 10^3 test points, y = sign(|x| - sqrt(10)); N_w = 2 * 10^4
Gaussian candidates with sigma = 1 (no median heuristic), chi-square budget rho = 0.005 N_w;
the optimised features are the *support* of q, unweighted (D = |support|); the fixed baseline
is D fresh Gaussian features; both go to ridge regression with penalty 0.05 on the *uncentred*
features and the mean-centred labels, the intercept being the label mean (not fitted). They
report test error 0.355 (RFF) and 0.143 (optimised), one run (rng seed 7117).

Here: ``ImportanceSampledFeatures(mode="support")`` and
``RidgeFeatureClassifier(alpha=0.05, fit_intercept="label_mean")`` reproduce that protocol
over several seeds. Every feature set is scored by four ridges (``ridges``), the 2 x 2 of the
two conventions that differ: the penalty (0.05, or chosen by exact leave-one-out over
n * 10^[-12..1]) and the intercept (the label mean on uncentred features, or centred features
with a fitted intercept) -- so the effect of centring is separated from that of the penalty.
Importance sampling is refitted on ``is_draws`` - 1 further candidate pools per seed (same
data, other candidate seeds): the spread of its error over candidate draws. Coulomb particles
get D particles from the sigma = 1 draw: every variant (``variants``: those of
:data:`meanfield.studies.synthetic_variants.VARIANTS`, and ``tempered``: the tempered variant
of round three at three temperatures) is fitted and scored, and the one chosen by 3-fold CV on
a ``cv_rows``-row subsample of the training data (CV on all 10^4 rows is the expensive part) is
reported as ``coulomb_cv`` (``coulomb_tempered_cv`` among the tempered ones).

One sweep of :func:`meanfield.workbench.sweeps.run_sweep` over the seeds, keyed by the whole
configuration: a seed's run file (:func:`run_seed`) holds the test errors along ``learner`` x
``ridge`` and the seed's whole record as the JSON attribute ``record``. :func:`table` puts the
published numbers beside ours, over every seed of the configuration on disk
(:func:`meanfield.studies.synthetic_variants.scan_records`). The command line is
``paper_repro/synthetic/sinha_duchi.py``.

Examples
--------
>>> from meanfield.studies.synthetic_sinha_duchi import CONFIGS, check_config, sweep_spec
>>> spec = sweep_spec(check_config(CONFIGS["full"]))
>>> spec["grid"], sorted(spec["fixed"])[:3]
({'seed': [0, 1, 2]}, ['base', 'cv_rows', 'is_draws'])
"""

from __future__ import annotations

import copy
import json
import logging
import time

import numpy as np
import xarray as xr

from .synthetic_variants import BASE, VARIANTS, machine, run_record_sweep

__all__ = [
    "PUBLISHED",
    "PROTOCOL",
    "CV_ROWS",
    "IS_DRAWS",
    "TEMPERED",
    "RIDGES",
    "CONFIGS",
    "check_config",
    "seed_record",
    "run_seed",
    "record_dataset",
    "sweep_spec",
    "run_study",
    "table",
]

_log = logging.getLogger(__name__)

#: The test errors of Sinha & Duchi's paper (one run).
PUBLISHED = {"rff": 0.355, "importance": 0.143}
#: Their protocol: data sizes, candidates, chi-square budget and ridge penalty.
PROTOCOL = dict(
    n_train=10_000, n_test=1_000, d=10, n_candidates=20_000, rho=0.005 * 20_000, ridge=0.05
)
#: Training rows of the CV subsample that chooses the Coulomb variant.
CV_ROWS = 2000
#: Candidate pools of importance sampling per seed (the first is the one of the main table).
IS_DRAWS = 5
#: The round-three variant (prior confinement + direction repulsion) at three temperatures.
TEMPERED = {
    f"tempered_b{b:g}": {
        "confinement": "prior",
        "direction_repulsion": 1.0,
        "beta": float(b),
        "eta": min(1.0, b / 20),
    }
    for b in (10, 100, 1000)
}
#: The four ridges: name -> (penalty, intercept convention); "loo": chosen by exact LOO.
RIDGES = {
    "published_ridge": (0.05, "label_mean"),
    "label_mean_loo_ridge": ("loo", "label_mean"),
    "centred_fixed_ridge": (0.05, True),
    "centred_loo_ridge": ("loo", True),
}

#: ``full``: the study of the README (seeds 0-2, ~10 min a seed on one core); ``ci``: seconds.
CONFIGS = {
    "full": dict(
        seeds=[0, 1, 2],
        protocol=PROTOCOL,
        cv_rows=CV_ROWS,
        is_draws=IS_DRAWS,
        base=BASE,
        variants=VARIANTS,
        tempered=TEMPERED,
        ridges={k: list(v) for k, v in RIDGES.items()},
    ),
    "ci": dict(
        seeds=[0, 1],
        protocol=dict(n_train=200, n_test=100, d=10, n_candidates=200, rho=1.0, ridge=0.05),
        cv_rows=60,
        is_draws=2,
        base={**BASE, "n_steps": 5, "data_batch": None},
        variants={"linear": {}},
        tempered={"tempered_b10": TEMPERED["tempered_b10"]},
        ridges={k: list(v) for k, v in RIDGES.items()},
    ),
}


def check_config(cfg: dict) -> dict:
    """The configuration with the defaults of ``full`` filled in, checked before any work
    (unknown keys refused naming the nearest; ``protocol`` merged key by key).

    Examples
    --------
    >>> from meanfield.studies.synthetic_sinha_duchi import check_config
    >>> check_config({"seeds": [4]})["protocol"]["n_train"]
    10000
    >>> check_config({"cv_row": 10})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'cv_row' (did you mean 'cv_rows'?)
    """
    from ..errors import InputError
    from .synthetic_kernels import _unknown
    from .synthetic_variants import _ints

    defaults = CONFIGS["full"]
    if not isinstance(cfg, dict):
        raise InputError(f"the configuration must be a mapping, got {cfg!r}")
    out = copy.deepcopy(defaults)
    for k, v in cfg.items():
        if k not in defaults:
            raise _unknown("", k, defaults)
        if k == "protocol":
            if not isinstance(v, dict):
                raise InputError(f"configuration key 'protocol' must be a mapping, got {v!r}")
            for kk in v:
                if kk not in PROTOCOL:
                    raise _unknown("protocol.", kk, PROTOCOL)
            v = {**defaults["protocol"], **v}
        out[k] = copy.deepcopy(v)
    out["seeds"] = _ints("seeds", out["seeds"], 0)
    for k, low in (("cv_rows", 6), ("is_draws", 1)):
        if not isinstance(out[k], int) or isinstance(out[k], bool) or out[k] < low:
            raise InputError(f"{k} must be an integer >= {low}, got {out[k]!r}")
    if out["cv_rows"] > out["protocol"]["n_train"]:
        raise InputError(f"cv_rows must be at most protocol.n_train, got {out['cv_rows']}")
    for k in ("variants", "tempered", "ridges"):
        if not isinstance(out[k], dict) or not out[k]:
            raise InputError(f"configuration key {k!r} must be a non-empty mapping")
    return json.loads(json.dumps(out))  # as it reads back from config.json


def _scorer(sp, rec, ridges):
    from ..learners import RidgeFeatureClassifier
    from .synthetic_search import ridge_alphas

    n = len(sp.X_train)
    clfs = {
        tag: RidgeFeatureClassifier(
            alpha=ridge_alphas(n) if a == "loo" else a, fit_intercept=intercept
        )
        for tag, (a, intercept) in ridges.items()
    }
    first, last = list(ridges)[0], list(ridges)[-1]

    def score(name, learner, **extra):
        t0 = time.perf_counter()
        learner.fit(sp.X_train, sp.y_train)
        Ftr, Fte = learner.transform(sp.X_train), learner.transform(sp.X_test)
        row = {"n_features": Ftr.shape[1], "fit_time": float(learner.fit_time_), **extra}
        for tag, clf in clfs.items():
            clf.fit(Ftr, sp.y_train)
            row[f"{tag}_train_error"] = float(np.mean(clf.predict(Ftr) != sp.y_train))
            row[f"{tag}_test_error"] = float(np.mean(clf.predict(Fte) != sp.y_test))
            row[f"{tag}_alpha"] = float(clf.alpha_)
        row["wall_s"] = time.perf_counter() - t0
        rec["learners"][name] = row
        _log.info(
            "  seed %s %s: %.4f / %.4f (%.0f s)",
            rec["seed"],
            name,
            row[f"{first}_test_error"],
            row[f"{last}_test_error"],
            row["wall_s"],
        )

    return score


def seed_record(
    seed: int,
    *,
    protocol: dict,
    cv_rows: int,
    is_draws: int,
    base: dict,
    variants: dict,
    tempered: dict,
    ridges: dict,
) -> dict:
    """One seed of the study (module docstring): every learner under every ridge; the
    seed's record (JSON-ready). Each learner's errors under the first and last ridge are
    logged (``logging``, level INFO) as it is scored.

    Examples
    --------
    >>> from meanfield.studies.synthetic_sinha_duchi import CONFIGS, check_config
    >>> from meanfield.studies.synthetic_sinha_duchi import seed_record, sweep_spec
    >>> rec = seed_record(0, **sweep_spec(check_config(CONFIGS["ci"]))["fixed"])
    >>> sorted(rec["learners"])[:4], rec["learners"]["coulomb_cv"]["variant"] in ("linear",
    ...                                                                         "tempered_b10")
    (['coulomb_cv', 'coulomb_linear', 'coulomb_tempered_b10', 'coulomb_tempered_cv'], True)
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
        imp = ImportanceSampledFeatures(
            10,
            n_candidates=P["n_candidates"],
            rho=P["rho"],
            mode="support",
            bandwidth=1.0,
            random_state=ls + 1000 * j,
        )
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
    rec["learners"]["coulomb_tempered_cv"] = {
        **rec["learners"][f"coulomb_{best_t}"],
        "variant": best_t,
    }
    rec.update(
        protocol=P,
        cv_rows=cv_rows,
        ridges={k: list(v) for k, v in ridges.items()},
        meanfield_version=__version__,
        wall_s=time.perf_counter() - t_seed,
        machine=machine(),
    )
    return rec


def run_seed(
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
    """The sweep's run function: :func:`seed_record` as a dataset (:func:`record_dataset`).

    Examples
    --------
    >>> from meanfield.studies.synthetic_sinha_duchi import CONFIGS, check_config
    >>> from meanfield.studies.synthetic_sinha_duchi import run_seed, sweep_spec
    >>> ds = run_seed(1, **sweep_spec(check_config(CONFIGS["ci"]))["fixed"])
    >>> ds["test_error"].dims, str(ds["ridge"].values[0])
    (('learner', 'ridge'), 'published_ridge')
    """
    return record_dataset(
        seed_record(
            seed,
            protocol=protocol,
            cv_rows=cv_rows,
            is_draws=is_draws,
            base=base,
            variants=variants,
            tempered=tempered,
            ridges=ridges,
        )
    )


def record_dataset(rec: dict) -> xr.Dataset:
    """A seed's record as the dataset a run file holds: ``test_error`` and ``train_error``
    along ``learner`` x ``ridge``, ``n_features`` along ``learner``, and the whole record as
    the JSON attribute ``record`` (what the table reads).

    Examples
    --------
    >>> from meanfield.studies.synthetic_sinha_duchi import record_dataset
    >>> rec = {"ridges": {"r": [0.05, True]}, "learners": {"rff": {"n_features": 3,
    ...        "r_test_error": 0.25, "r_train_error": 0.5}}}
    >>> ds = record_dataset(rec)
    >>> float(ds["test_error"].sel(learner="rff", ridge="r")), int(ds["n_features"][0])
    (0.25, 3)
    """
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


def sweep_spec(cfg: dict, *, version: str | None = None) -> dict:
    """The sweep: grid (the seeds), fixed parameters and configuration digest (``version``:
    the package version to key by, for converted runs).

    Examples
    --------
    >>> from meanfield.studies.synthetic_sinha_duchi import CONFIGS, check_config, sweep_spec
    >>> a = sweep_spec(check_config(CONFIGS["ci"]))
    >>> b = sweep_spec(check_config({**CONFIGS["ci"], "seeds": [5]}))
    >>> a["digest"] == b["digest"], b["grid"]
    (True, {'seed': [5]})
    """
    from ..workbench.sweeps import configuration_digest, sweep_configuration

    grid = {"seed": list(cfg["seeds"])}
    fixed = {k: copy.deepcopy(v) for k, v in cfg.items() if k != "seeds"}
    config = sweep_configuration(run_seed, fixed)
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
    """Run (or resume) the study into ``out_dir``: one run file per seed; as
    :func:`meanfield.studies.synthetic_variants.run_study` (``runs_done``, ``runs_total``,
    ``notes``, ``wall_s``, ``result``).

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_sinha_duchi import CONFIGS, run_study
    >>> cfg, out = {**CONFIGS["ci"], "seeds": [0]}, tempfile.mkdtemp()
    >>> kw = dict(scheduler="threads", n_workers=1, progress=False)
    >>> run_study(cfg, out, **kw)["runs_done"], run_study(cfg, out, **kw)["runs_done"]
    (1, 0)
    """
    cfg = check_config(cfg)
    return run_record_sweep(
        run_seed,
        cfg,
        sweep_spec(cfg),
        out_dir,
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
        log=log,
        name=name,
    )


def _mean_se(a) -> str:
    a = np.asarray(a, dtype=float)
    se = a.std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else float("nan")
    return f"{a.mean():.3f} ± {se:.3f}"


def table(records, cfg: dict | None = None) -> str:
    """The markdown table of the study (``table.md``) from the records of its seeds (in seed
    order) and its configuration (the variants and ridges; default ``full``).

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_sinha_duchi import CONFIGS, run_study, table
    >>> from meanfield.studies.synthetic_variants import scan_records
    >>> out = tempfile.mkdtemp()
    >>> _ = run_study({**CONFIGS["ci"], "seeds": [0, 1]}, out, scheduler="threads",
    ...               progress=False)
    >>> text = table(*scan_records(out)[::-1])
    >>> text.splitlines()[0][:49]
    'Radial task, Sinha & Duchi protocol, seeds [0, 1]'
    """
    cfg = check_config(cfg or {})
    records = sorted(records, key=lambda r: r["seed"])
    ridges = list(cfg["ridges"])
    rows = [
        ("rff", "fixed RFF (D features, sigma = 1)"),
        ("importance", "importance sampling, support of q (Sinha & Duchi)"),
        ("coulomb_cv", "Coulomb particles, CV-chosen variant"),
        ("coulomb_tempered_cv", "Coulomb, tempered + direction repulsion (β by CV)"),
    ] + [(f"coulomb_{v}", f"Coulomb: {v}") for v in {**cfg["variants"], **cfg["tempered"]}]
    seeds = sorted(r["seed"] for r in records)
    cols = [f"{t}_test_error" for t in ridges] + ["published_ridge_train_error"]
    sizes = ", ".join(str(r["learners"]["importance"]["n_features"]) for r in records)
    lines = [
        f"Radial task, Sinha & Duchi protocol, seeds {seeds} (mean ± standard error over seeds; "
        f"D = |support| = {sizes}).",
        "",
        "Test error under the four ridges: the penalty α = 0.05 (published) or by exact LOO over "
        "n · 10^[−12..1], and the intercept the label mean on uncentred features (published) or "
        "fitted on centred features.",
        "",
        "| features | published | α = 0.05, label mean (published) | α by LOO, label mean | "
        "α = 0.05, centred | α by LOO, centred | train error, published ridge |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, label in rows:
        vals = [r["learners"][key] for r in records if key in r["learners"]]
        if vals:
            pub = f"{PUBLISHED[key]:.3f}" if key in PUBLISHED else "—"
            cells = [_mean_se([v[c] for v in vals]) for c in cols]
            lines.append(f"| {label} | {pub} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Relative change of the test error from the published ridge (mean over seeds):",
        "",
    ]
    lines += ["| features | α by LOO only | centring only | both |", "|---|---|---|---|"]
    for key, label in rows[:4]:
        vals = [r["learners"][key] for r in records if key in r["learners"]]
        if vals:
            p = np.array([v["published_ridge_test_error"] for v in vals])
            ch = [
                np.mean(np.array([v[f"{t}_test_error"] for v in vals]) / p - 1)
                for t in ("label_mean_loo_ridge", "centred_fixed_ridge", "centred_loo_ridge")
            ]
            lines.append(f"| {label} | " + " | ".join(f"{c:+.0%}" for c in ch) + " |")
    draws = sorted(k for k in records[0]["learners"] if k.startswith("importance"))
    lines += [
        "",
        f"Importance sampling over {len(draws)} candidate pools per seed (same data): "
        "mean and standard deviation over the pools, per seed.",
        "",
        "| seed | published ridge: mean, sd | centred LOO ridge: mean, sd | D range |",
        "|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: r["seed"]):
        v = [r["learners"][k] for k in draws if k in r["learners"]]
        p = np.array([x["published_ridge_test_error"] for x in v])
        c = np.array([x["centred_loo_ridge_test_error"] for x in v])
        D = [x["n_features"] for x in v]
        lines.append(
            f"| {r['seed']} | {p.mean():.3f}, {p.std(ddof=1):.3f} | {c.mean():.3f}, "
            f"{c.std(ddof=1):.3f} | {min(D)}–{max(D)} |"
        )
    chosen = [r["learners"]["coulomb_cv"]["variant"] for r in records]
    chosen_t = [r["learners"]["coulomb_tempered_cv"]["variant"] for r in records]
    lines += [
        "",
        f"CV-chosen Coulomb variant per seed: {', '.join(chosen)}; tempered β: "
        f"{', '.join(chosen_t)}.",
    ]
    return "\n".join(lines) + "\n"
