"""Round three of the synthetic kernel-learning study (issue 22): every learner tuned on grids
that widen until they contain their optimum, a Coulomb variant that learns without losing, and
the label-noise levels 0, 0.1 and 0.2, on the sweep runner.

The (m, noise) settings of the full configuration: m = 64 at noise 0, 0.1 and 0.2, and
m = 256 at noise 0.1 (the m = 256 cells cost four times as much; the claims about m compare
64 with 256 at noise 0.1). For every (seed, setting, task) cell -- one data split shared by all
learners, so every comparison is paired -- hyper-parameters are chosen by stratified 3-fold
cross-validation on the training rows only, with
:func:`meanfield.studies.synthetic_search.widen_search` (the window grows while the choice sits
on its edge; an end of the candidate list is reported):

- ``rff``: fixed random Fourier features, bandwidth σ = 2^k · median, k in [−8, 8], first
  window [−3, 3];
- ``sklearn_rff``: the sanity baseline from scikit-learn, ``RBFSampler`` + ``RidgeClassifierCV``
  at the bandwidth CV chose for ``rff`` (γ = 1/(2σ²)) -- the same model as ``rff`` with another
  code and another draw, so the two should tie;
- ``importance``: Sinha & Duchi's importance sampling, σ in the same list (first window: the
  RFF choice ± one step) × the χ² budget fraction ρ_f in [0, 1] (both ends natural bounds);
- ``coulomb_linear``: the first study's configuration (linear alignment, β = 10³, no
  confinement) from the CV-chosen RFF draw (the collapse end);
- ``coulomb_tempered``: the learning variant -- prior confinement (the RFF prior at every β),
  the Riesz repulsion of the particles and the frame repulsion of their directions
  (:class:`meanfield.learners.DirectionFrame`, λ_F = 1), at the inverse temperature β chosen by
  CV accuracy from the list 1, 10, 10², 10³, 10⁴ (first window 10-10³; η = min(1, β/20)); the
  β of largest held-out centred alignment is fitted and reported too
  (``coulomb_tempered_align``). (Prior confinement at β = 1 without the direction repulsion,
  the redraw of issue 10, is not rerun: :func:`moved` measures every learner against a redraw.)

Every learner's ridge penalty is chosen by exact leave-one-out over n · 10^[−12..1]
(:func:`~meanfield.studies.synthetic_search.ridge_alphas`); whether the choice is an end of
that grid is recorded. The Coulomb learners record how far their particles moved
(:func:`moved`). A run file holds the test errors along ``learner`` and the whole record as
the JSON attribute ``record``. Reports: :mod:`meanfield.studies.synthetic_round3_report`.

Examples
--------
>>> from meanfield.studies.synthetic_round3 import CONFIGS, check_config
>>> cfg = check_config(CONFIGS["ci"])
>>> cfg["settings"], cfg["betas"][cfg["beta_window"][0]]
([[8, 0.1]], 10.0)
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import numpy as np
import xarray as xr

from .synthetic_kernels import TASKS, _unknown
from .synthetic_search import ridge_alphas, widen_search
from .synthetic_variants import BASE, _floats, _ints, machine, record_dataset, run_record_sweep

__all__ = [
    "CONFIGS",
    "LEARNERS",
    "tempered_eta",
    "check_config",
    "moved",
    "cell_record",
    "run_cell",
    "sweep_spec",
    "load_records",
    "run_study",
]

#: The learners of a cell, in report order.
LEARNERS = (
    "rff_median",
    "rff",
    "sklearn_rff",
    "importance",
    "coulomb_linear",
    "coulomb_tempered",
    "coulomb_tempered_align",
)

CONFIGS: dict = {}
CONFIGS["full"] = dict(
    tasks=list(TASKS),
    settings=[[64, 0.0], [64, 0.1], [64, 0.2], [256, 0.1]],
    seeds=list(range(10)),
    n_train=1000,
    n_test=2000,
    cv=3,
    base=BASE,
    direction_repulsion=1.0,
    betas=[1.0, 10.0, 100.0, 1000.0, 1e4],
    beta_window=[1, 3],
    bandwidth_exponents=[-8, 8],
    bandwidth_window=[-3, 3],
    rho_fractions=[0.0, 1e-4, 1e-3, 1e-2, 0.03, 0.1, 0.3, 1.0],
    rho_window=[1, 3],
)
CONFIGS["ci"] = dict(
    tasks=["two_moons"],
    settings=[[8, 0.1]],
    seeds=[0, 1],
    n_train=90,
    n_test=60,
    cv=2,
    base={**BASE, "n_steps": 10, "data_batch": None},
    bandwidth_window=[-1, 1],
)


def tempered_eta(beta: float) -> float:
    """Step size of the tempered variant at inverse temperature β: min(1, β/20).

    With the prior confinement V = |w|²/(2β) the Ornstein-Uhlenbeck relaxation takes β/η
    steps; η/β ≤ 1/20 keeps the unadjusted Langevin bias on the prior's variance below 3 %
    (stationary variance 2/(2 − η/β)), and η ≤ 1 is the alignment's stable step.

    Parameters
    ----------
    beta : float > 0

    Returns
    -------
    float

    Examples
    --------
    >>> tempered_eta(1.0), tempered_eta(10.0), tempered_eta(1000.0)
    (0.05, 0.5, 1.0)
    """
    return float(min(1.0, beta / 20.0))


def check_config(cfg: dict) -> dict:
    """The round-three configuration with every default filled in (those of ``full``),
    checked before any work; an unknown key is refused naming the nearest.

    Examples
    --------
    >>> from meanfield.studies.synthetic_round3 import check_config
    >>> check_config({"settings": [[64, 0.5]]})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: settings must be distinct [m, noise] pairs, m an integer >= 1 \
and noise in [0, 0.5), got [[64, 0.5]]
    """
    from ..errors import InputError
    from .synthetic_kernels import _estimator_keys

    defaults = CONFIGS["full"]
    if not isinstance(cfg, dict):
        raise InputError(f"the configuration must be a mapping, got {cfg!r}")
    out = copy.deepcopy(defaults)
    for k, v in cfg.items():
        if k not in defaults:
            raise _unknown("", k, defaults)
        out[k] = copy.deepcopy(v)
    if not isinstance(out["base"], dict):
        raise InputError(f"base must be a mapping, got {out['base']!r}")
    allowed = _estimator_keys("coulomb")
    for kk in out["base"]:
        if kk not in allowed:
            raise _unknown("base.", kk, allowed)
    out["base"] = {**BASE, **out["base"]}
    if (
        not isinstance(out["tasks"], list)
        or not out["tasks"]
        or len(set(out["tasks"])) != len(out["tasks"])
    ):
        raise InputError(f"tasks must be a non-empty list of distinct names, got {out['tasks']!r}")
    for t in out["tasks"]:
        if t not in TASKS:
            raise InputError(f"unknown task {t!r}; choose from {list(TASKS)}")
    out["settings"] = _settings(out["settings"])
    out["seeds"] = _ints("seeds", out["seeds"], 0)
    for k, low in (("n_train", 2), ("n_test", 2), ("cv", 2)):
        if not isinstance(out[k], int) or isinstance(out[k], bool) or out[k] < low:
            raise InputError(f"{k} must be an integer >= {low}, got {out[k]!r}")
    out["direction_repulsion"] = _floats(
        "direction_repulsion", [out["direction_repulsion"]], low=0
    )[0]
    out["betas"] = _floats("betas", out["betas"], low=1e-12)
    out["rho_fractions"] = _floats("rho_fractions", out["rho_fractions"], low=0.0)
    if max(out["rho_fractions"]) > 1:
        raise InputError(f"rho_fractions must lie in [0, 1], got {out['rho_fractions']!r}")
    lo, hi = _window("bandwidth_exponents", out["bandwidth_exponents"], -64, 64)
    _window("bandwidth_window", out["bandwidth_window"], lo, hi)
    _window("beta_window", out["beta_window"], 0, len(out["betas"]) - 1)
    _window("rho_window", out["rho_window"], 0, len(out["rho_fractions"]) - 1)
    # derived, for the reports: the sizes and noise levels that occur
    out["m"] = sorted({m for m, _ in out["settings"]})
    out["noise"] = sorted({n for _, n in out["settings"]})
    return out


def _settings(pairs) -> list:
    from ..errors import InputError

    ok = isinstance(pairs, list) and bool(pairs)
    out = []
    for p in pairs if ok else []:
        if not (
            isinstance(p, (list, tuple))
            and len(p) == 2
            and isinstance(p[0], int)
            and not isinstance(p[0], bool)
            and p[0] >= 1
            and isinstance(p[1], (int, float))
            and not isinstance(p[1], bool)
            and 0 <= p[1] < 0.5
        ):
            ok = False
            break
        out.append([int(p[0]), float(p[1])])
    if not ok or len({tuple(p) for p in out}) != len(out):
        raise InputError(
            "settings must be distinct [m, noise] pairs, m an integer >= 1 and noise in "
            f"[0, 0.5), got {pairs!r}"
        )
    return out


def _window(name, w, lo, hi) -> tuple[int, int]:
    from ..errors import InputError

    if (
        not isinstance(w, list)
        or len(w) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in w)
        or not lo <= w[0] <= w[1] <= hi
    ):
        raise InputError(f"{name} must be [a, b], integers with {lo} <= a <= b <= {hi}, got {w!r}")
    return w[0], w[1]


def moved(est, sigma: float, X, y, X_test, y_test, redraw) -> dict:
    """How far a Coulomb learner moved its particles from the RFF draw it started from.

    In standardised frequencies (σ w, initially N(0, I)): the mean particle displacement
    ``disp`` and the energy distance ``ed`` between the final and the initial clouds, each
    beside the same quantity for an independent prior draw ``redraw`` (a redraw moves every
    particle as far, but leaves the law where it was: ``ed_redraw`` is the sampling noise);
    ``norm_ratio`` (median σ|w| final / initial); ``iso``/``iso_init``, d times the largest
    eigenvalue of the directions' second moment (1 isotropic, d one axis); the centred
    alignment of the initial and final features on the training and the test rows.

    Parameters
    ----------
    est : fitted CoulombFeatures
    sigma : float
        The bandwidth of the initial draw.
    X, y, X_test, y_test : arrays
        Training and test rows.
    redraw : array of shape (m, d + 1)
        An independent draw of the same prior, original units.

    Returns
    -------
    dict

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.learners import CoulombFeatures, RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> est = CoulombFeatures(8, n_steps=5, random_state=0).fit(X, y)
    >>> red = RandomFourierFeatures(8, random_state=9).fit(X).omega_
    >>> sorted(moved(est, 1.0, X, y, X, y, red))[:4]
    ['align_c_test', 'align_c_test_init', 'align_c_train', 'align_c_train_init']
    """
    from ..learners import fourier_features, kernel_alignment
    from .synthetic_search import energy_distance

    d = X.shape[1]
    w0, w1, wr = (np.asarray(o)[:, :d] * sigma for o in (est.omega_init_, est.omega_, redraw))

    def iso(w):
        u = w / np.linalg.norm(w, axis=1, keepdims=True)
        return float(d * np.linalg.eigvalsh(u.T @ u / len(u)).max())

    out = {
        "disp": float(np.linalg.norm(w1 - w0, axis=1).mean()),
        "disp_redraw": float(np.linalg.norm(wr - w0, axis=1).mean()),
        "ed": energy_distance(w1, w0),
        "ed_redraw": energy_distance(wr, w0),
        "norm_ratio": float(
            np.median(np.linalg.norm(w1, axis=1)) / np.median(np.linalg.norm(w0, axis=1))
        ),
        "iso": iso(w1),
        "iso_init": iso(w0),
    }
    for tag, om in (("_init", est.omega_init_), ("", est.omega_)):
        out[f"align_c_train{tag}"] = kernel_alignment(fourier_features(X, om), y, centred=True)
        out[f"align_c_test{tag}"] = kernel_alignment(
            fourier_features(X_test, om), y_test, centred=True
        )
    return out


def _score(out: dict, name: str, learner, split, alphas, **extra) -> dict:
    """Fit ``learner`` on the training rows, score the ridge on the test rows, store the row."""
    from ..learners import evaluate, kernel_alignment

    t0 = time.perf_counter()
    res = evaluate(learner, *split, classifiers=("ridge",), ridge_alpha=alphas)
    res["alpha_edge"] = bool(res["ridge_alpha"] in (alphas[0], alphas[-1]))
    res["align_c_test_final"] = kernel_alignment(
        learner.transform(split[2]), split[3], centred=True
    )
    for attr in ("alignment_init_", "alignment_", "min_distance_", "best_step_", "bandwidth_"):
        if hasattr(learner, attr):
            res[attr.rstrip("_")] = float(getattr(learner, attr))
    res["wall_s"] = time.perf_counter() - t0
    out["learners"][name] = {**res, **extra}
    return out["learners"][name]


def _cv_summary(res: dict, axes_values: dict) -> dict:
    """The record of a widened search: choice, edges, windows (as values), rounds, points."""
    windows = {
        name: [vals[a], vals[b]]
        for (name, vals), (a, b) in zip(axes_values.items(), res["windows"], strict=True)
    }
    return {
        "choice": res["best"],
        "edges": res["edges"],
        "windows": windows,
        "rounds": res["rounds"],
        "n_points": len(res["scores"]),
        "scores": res["scores"],
    }


def _rff(out, cfg, split, m, ls, seed, med, alphas):
    """Fixed RFF with the widened bandwidth search; returns the chosen σ and its exponent."""
    from ..learners import RandomFourierFeatures, feature_pipeline

    X, y = split[0], split[1]
    lo, hi = cfg["bandwidth_exponents"]
    ks = list(range(lo, hi + 1))
    w0, w1 = cfg["bandwidth_window"]
    axis = {
        "name": "bandwidth",
        "values": [{"features__bandwidth": float(med * 2.0**k)} for k in ks],
        "window": [ks.index(w0), ks.index(w1)],
    }
    pipe = feature_pipeline(
        RandomFourierFeatures(m, random_state=ls),
        ridge_alpha=alphas["fold"],
        n_train=alphas["n_fold"],
    )
    t0 = time.perf_counter()
    res = widen_search(pipe, [axis], X, y, cv=cfg["cv"], random_state=seed)
    k = ks[res["best_index"][0]]
    bw = float(med * 2.0**k)
    cv = {**_cv_summary(res, {"bandwidth_exponent": ks}), "wall_s": time.perf_counter() - t0}
    _score(
        out,
        "rff",
        RandomFourierFeatures(m, bandwidth=bw, random_state=ls),
        split,
        alphas["full"],
        cv=cv,
        bandwidth_exponent=k,
    )
    return bw, k


def _sklearn_rff(out, split, m, ls, bw, k):
    """The sanity baseline: scikit-learn's ``RBFSampler`` (γ = 1/(2σ²), another draw) and
    ``RidgeClassifierCV`` (efficient LOO over the same α) at the RFF's CV-chosen σ -- the
    same model as ``rff`` by another code, so the two should tie."""
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import RidgeClassifierCV
    from sklearn.pipeline import Pipeline

    X, y, Xt, yt = split[:4]
    t0 = time.perf_counter()
    alphas = ridge_alphas(len(X))
    est = Pipeline(
        [
            ("features", RBFSampler(gamma=0.5 / bw**2, n_components=m, random_state=ls)),
            ("ridge", RidgeClassifierCV(alphas=alphas)),
        ]
    ).fit(X, y)
    alpha = float(est.named_steps["ridge"].alpha_)
    out["learners"]["sklearn_rff"] = {
        "ridge_test_error": float(np.mean(est.predict(Xt) != yt)),
        "ridge_alpha": alpha,
        "alpha_edge": bool(alpha in (alphas[0], alphas[-1])),
        "bandwidth_exponent": k,
        "wall_s": time.perf_counter() - t0,
    }


def _importance(out, cfg, split, m, ls, seed, med, k_rff, alphas):
    """Importance sampling: widened search over σ (around the RFF choice) × ρ fraction."""
    from ..learners import ImportanceSampledFeatures, feature_pipeline

    X, y = split[0], split[1]
    lo, hi = cfg["bandwidth_exponents"]
    ks = list(range(lo, hi + 1))
    i = ks.index(k_rff)
    bw_axis = {
        "name": "bandwidth",
        "values": [{"features__bandwidth": float(med * 2.0**k)} for k in ks],
        "window": [max(0, i - 1), min(len(ks) - 1, i + 1)],
    }
    rhos = cfg["rho_fractions"]
    rho_axis = {
        "name": "rho_fraction",
        "values": [{"features__rho_fraction": r} for r in rhos],
        "window": list(cfg["rho_window"]),
    }
    pipe = feature_pipeline(
        ImportanceSampledFeatures(m, rho=None, rho_fraction=0.0, random_state=ls),
        ridge_alpha=alphas["fold"],
        n_train=alphas["n_fold"],
    )
    t0 = time.perf_counter()
    res = widen_search(pipe, [bw_axis, rho_axis], X, y, cv=cfg["cv"], random_state=seed)
    kb, kr = res["best_index"]
    learner = ImportanceSampledFeatures(
        m, rho=None, rho_fraction=rhos[kr], bandwidth=float(med * 2.0 ** ks[kb]), random_state=ls
    )
    cv = _cv_summary(res, {"bandwidth_exponent": ks, "rho_fraction": rhos})
    cv["wall_s"] = time.perf_counter() - t0
    _score(
        out,
        "importance",
        learner,
        split,
        alphas["full"],
        cv=cv,
        bandwidth_exponent=ks[kb],
        rho_fraction=rhos[kr],
    )


def _coulomb(out, cfg, split, m, ls, seed, bw, alphas):
    """The two reference Coulomb learners and the tempered variant (β by widened CV)."""
    from ..learners import CoulombFeatures, RandomFourierFeatures, feature_pipeline
    from .synthetic_search import centred_alignment_scorer

    X, y, Xt, yt = split[:4]
    base = cfg["base"]
    redraw = RandomFourierFeatures(m, bandwidth=bw, random_state=ls + 500_000).fit(X).omega_

    def fit_score(name, **kw):
        est = CoulombFeatures(m, bandwidth=bw, random_state=ls, **{**base, **kw})
        row = _score(out, name, est, split, alphas["full"])
        row.update(moved(est, bw, X, y, Xt, yt, redraw))
        return est, row

    fit_score("coulomb_linear")
    betas = cfg["betas"]
    temper = dict(confinement="prior", direction_repulsion=cfg["direction_repulsion"])
    axis = {
        "name": "beta",
        "values": [{"features__beta": b, "features__eta": tempered_eta(b)} for b in betas],
        "window": list(cfg["beta_window"]),
    }
    pipe = feature_pipeline(
        CoulombFeatures(m, bandwidth=bw, random_state=ls, **{**base, **temper}),
        ridge_alpha=alphas["fold"],
        n_train=alphas["n_fold"],
    )
    t0 = time.perf_counter()
    res = widen_search(
        pipe,
        [axis],
        X,
        y,
        cv=cfg["cv"],
        random_state=seed,
        scoring={"alignment": centred_alignment_scorer},
    )
    cv = {**_cv_summary(res, {"beta": betas}), "wall_s": time.perf_counter() - t0}
    lo, hi = res["windows"][0]
    scores = {tuple(p): s for p, s in res["scores"]}
    j_acc = res["best_index"][0]
    j_al = max(range(lo, hi + 1), key=lambda j: (scores[(j,)]["alignment"], -j))
    fitted = {}
    for name, j in (("coulomb_tempered", j_acc), ("coulomb_tempered_align", j_al)):
        if j not in fitted:
            b = betas[j]
            est, row = fit_score(name, beta=b, eta=tempered_eta(b), n_checkpoints=10, **temper)
            row["plateau"] = _plateau(est, X, y)
            fitted[j] = row
        out["learners"][name] = {**fitted[j], "beta": betas[j], "cv": cv}


def _plateau(est, X, y) -> float:
    """Relative change of the centred training alignment over the last 30 % of the run:
    |A(end) − A(70 %)| / |A(end) − A(0)| (small: the run has levelled off)."""
    from ..learners import fourier_features, kernel_alignment

    a = [kernel_alignment(fourier_features(X, om), y, centred=True) for om in est.checkpoints_]
    j = int(round(0.7 * (len(a) - 1)))
    return float(abs(a[-1] - a[j]) / max(abs(a[-1] - a[0]), 1e-12))


def cell_record(cfg: dict, task: str, seed: int, m: int, noise: float) -> dict:
    """Every learner on one split (module docstring); the cell's record, JSON-ready.

    ``cfg`` holds the settings of :func:`run_cell`.

    Examples
    --------
    >>> from meanfield.studies.synthetic_round3 import CONFIGS, check_config, cell_record
    >>> cfg = {**check_config(CONFIGS["ci"]), "task_settings": TASKS}
    >>> rec = cell_record(cfg, "two_moons", 0, 8, 0.1)
    >>> sorted(rec["learners"]) == sorted(LEARNERS)
    True
    """
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
    from .._version import __version__
    from ..learners import RandomFourierFeatures, median_bandwidth
    from ..learners.tasks import make_task

    t_cell = time.perf_counter()
    split = make_task(
        task, cfg["n_train"], cfg["n_test"], noise=noise, seed=seed, **cfg["task_settings"][task]
    )
    ls = 10_000 + seed  # learner seed, shared: every learner starts from the same draw
    med = median_bandwidth(split[0], rng=ls)
    n_fold = cfg["n_train"] * (cfg["cv"] - 1) // cfg["cv"]
    alphas = {"fold": ridge_alphas(n_fold), "n_fold": n_fold, "full": ridge_alphas(cfg["n_train"])}
    out = {
        "task": task,
        "seed": seed,
        "m": m,
        "noise": noise,
        "median_bandwidth": med,
        "learners": {},
    }
    _score(
        out,
        "rff_median",
        RandomFourierFeatures(m, bandwidth=med, random_state=ls),
        split,
        alphas["full"],
    )
    bw, k = _rff(out, cfg, split, m, ls, seed, med, alphas)
    _sklearn_rff(out, split, m, ls, bw, k)
    _importance(out, cfg, split, m, ls, seed, med, k, alphas)
    _coulomb(out, cfg, split, m, ls, seed, bw, alphas)
    out.update(
        wall_s=time.perf_counter() - t_cell, meanfield_version=__version__, machine=machine()
    )
    return out


def run_cell(task: str, seed: int, setting: str, **cfg) -> xr.Dataset:
    """One cell of the sweep: :func:`cell_record` as a dataset (``ridge_test_error`` along
    ``learner``, the record as the JSON attribute ``record``); ``setting`` is ``"m:noise"``.

    Examples
    --------
    >>> from meanfield.studies.synthetic_round3 import CONFIGS, check_config, run_cell
    >>> from meanfield.studies.synthetic_round3 import sweep_spec
    >>> fixed = sweep_spec(check_config(CONFIGS["ci"]))["fixed"]
    >>> ds = run_cell("two_moons", 0, "8:0.1", **fixed)
    >>> ds["ridge_test_error"].sizes["learner"]
    7
    """
    m, noise = setting.split(":")
    return record_dataset(cell_record(cfg, task, seed, int(m), float(noise)))


def sweep_spec(cfg: dict) -> dict:
    """The sweep: grid (seeds slowest, then the (m, noise) settings, then tasks: a partial
    run holds whole seeds), fixed parameters and configuration digest.

    Examples
    --------
    >>> from meanfield.studies.synthetic_round3 import CONFIGS, check_config, sweep_spec
    >>> spec = sweep_spec(check_config(CONFIGS["ci"]))
    >>> list(spec["grid"]), spec["grid"]["setting"]
    (['seed', 'setting', 'task'], ['8:0.1'])
    """
    from ..workbench.sweeps import configuration_digest, sweep_configuration

    grid = {
        "seed": list(cfg["seeds"]),
        "setting": [f"{m}:{n}" for m, n in cfg["settings"]],
        "task": list(cfg["tasks"]),
    }
    skip = ("m", "noise", "settings", "seeds", "tasks")
    fixed = {k: copy.deepcopy(cfg[k]) for k in cfg if k not in skip}
    fixed["task_settings"] = copy.deepcopy(TASKS)
    config = json.loads(json.dumps(sweep_configuration(run_cell, fixed)))
    return dict(grid=grid, fixed=fixed, digest=configuration_digest(config), configuration=config)


def load_records(out) -> tuple[dict, list[dict]]:
    """The configuration last run into ``out`` and the records of its cells on disk.

    Raises
    ------
    meanfield.errors.MissingFileError
        No ``config.json`` in ``out``.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_round3 import load_records
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
    """Run (or resume) the round-three study into ``out_dir``; as
    :func:`meanfield.studies.synthetic_variants.run_study`.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_round3 import CONFIGS, run_study
    >>> cfg = {**CONFIGS["ci"], "seeds": [0]}
    >>> out = tempfile.mkdtemp()
    >>> run_study(cfg, out, scheduler="threads", progress=False)["runs_done"]
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
