"""Choosing the hyper-parameters of the kernel learners (random Fourier features [1]_, their
importance sampling [2]_, the Coulomb particles): ridge penalties, held-out scores and
cross-validation on grids that widen until they contain their optimum.

:func:`widen_search` is a grid search whose grid grows: each axis is an ordered list of
candidate values of which a contiguous *window* is searched; while the cross-validated best
sits on a window edge that the list can extend, the window grows by one value on that side and
the new points are scored (the folds never change, so scores are comparable across rounds).
The search ends with the best point interior to its window on every axis, or on an end of a
list, which is then reported as the edge it is (a natural bound such as ρ = 0, or the limit of
the search). :func:`centred_alignment_scorer` is a held-out scorer, :func:`tempered_eta` the
step size of the tempered Coulomb learner at an inverse temperature, and :func:`tuned_learners`
tunes and scores every learner of the synthetic study's ``tuned`` design on one split, with the
measurements of :mod:`meanfield.learners.diagnostics` (how far the particles moved; the
leave-one-out ridge over :func:`~meanfield.learners.diagnostics.ridge_alphas`);
:func:`learn_or_stay` keeps its tempered particles only where cross-validation prefers them to
the draw they start from.

See Also
--------
meanfield.learners.select_by_cv : the fixed-grid search.
meanfield.learners.diagnostics : what the learned particles changed, the ridge penalty grid.
meanfield.studies.synthetic : the study that uses them.

References
----------
.. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.
.. [2] A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.

Examples
--------
>>> from meanfield.learners.tuning import tempered_eta
>>> tempered_eta(1.0), tempered_eta(10.0)
(0.05, 0.5)
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from .diagnostics import alignment_plateau, moved, ridge_alphas

__all__ = [
    "widen_search",
    "centred_alignment_scorer",
    "tempered_eta",
    "tuned_learners",
    "learn_or_stay",
    "fixed_grid_learners",
    "ridge_errors",
]


def tempered_eta(beta: float) -> float:
    """Step size of the tempered Coulomb learner at inverse temperature β: min(1, β/20).

    With the prior confinement V = |w|²/(2β) the Ornstein-Uhlenbeck relaxation takes β/η
    steps; η/β ≤ 1/20 keeps the unadjusted Langevin bias on the prior's variance below 3 %
    (stationary variance 2/(2 − η/β)), and η ≤ 1 is the alignment's stable step.

    Parameters
    ----------
    beta : float > 0

    Returns
    -------
    float

    See Also
    --------
    meanfield.learners.CoulombFeatures : its ``eta`` and ``beta``.

    Examples
    --------
    >>> tempered_eta(1.0), tempered_eta(10.0), tempered_eta(1000.0)
    (0.05, 0.5, 1.0)
    """
    return float(min(1.0, beta / 20.0))


def centred_alignment_scorer(pipe, X, y) -> float:
    """Held-out centred alignment of a fitted ``Pipeline([("features", ...), ...])``.

    A scikit-learn scorer (``scoring={"alignment": centred_alignment_scorer}``): the centred
    Cristianini alignment (:func:`meanfield.learners.kernel_alignment`) of the features on the
    held-out rows.

    Parameters
    ----------
    pipe : fitted Pipeline with a ``"features"`` step
    X, y : arrays
        Held-out rows.

    Returns
    -------
    float

    See Also
    --------
    widen_search : its ``scoring``.
    meanfield.learners.kernel_alignment : the alignment it computes.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.learners import RandomFourierFeatures, feature_pipeline
    >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> pipe = feature_pipeline(RandomFourierFeatures(16, random_state=0), n_train=60).fit(X, y)
    >>> 0 < centred_alignment_scorer(pipe, X, y) < 1
    True
    """
    from .metric import kernel_alignment

    return kernel_alignment(pipe.named_steps["features"].transform(X), y, centred=True)


def _check_axes(axes) -> list[dict]:
    from ..errors import InputError

    if not isinstance(axes, list) or not axes:
        raise InputError(f"axes must be a non-empty list of axis mappings, got {axes!r}")
    out = []
    for ax in axes:
        vals, win = ax.get("values"), ax.get("window")
        if not isinstance(vals, list) or not vals or not all(isinstance(v, dict) for v in vals):
            raise InputError(f"axis {ax.get('name')!r}: values must be a list of parameter dicts")
        if (
            not isinstance(win, (list, tuple))
            or len(win) != 2
            or not 0 <= win[0] <= win[1] < len(vals)
        ):
            raise InputError(
                f"axis {ax.get('name')!r}: window must be [lo, hi] with 0 <= lo <= hi < "
                f"{len(vals)}, got {win!r}"
            )
        out.append({"name": str(ax["name"]), "values": vals, "window": [int(win[0]), int(win[1])]})
    return out


def _score_points(pipe, axes, points, X, y, cv, random_state, scoring) -> list[dict]:
    """Mean CV scores of the grid points ``points`` (index tuples), one GridSearchCV."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    grid = []
    for idx in points:
        merged = {}
        for ax, i in zip(axes, idx, strict=True):
            merged.update(ax["values"][i])
        grid.append({k: [v] for k, v in merged.items()})
    metrics = {"accuracy": "accuracy", **(scoring or {})}
    search = GridSearchCV(
        pipe,
        grid,
        cv=StratifiedKFold(cv, shuffle=True, random_state=random_state),
        scoring=metrics,
        refit=False,
        error_score="raise",
    )
    search.fit(X, y)
    res = search.cv_results_
    return [
        {name: float(res[f"mean_test_{name}"][j]) for name in metrics} for j in range(len(points))
    ]


def _grow(axes, best) -> bool:
    """Widen, by one value, every window whose edge holds the best point and can extend."""
    grew = False
    for a, i in zip(axes, best, strict=True):
        lo, hi = a["window"]
        if i == lo and lo > 0:
            a["window"][0], grew = lo - 1, True
        elif i == hi and hi < len(a["values"]) - 1:
            a["window"][1], grew = hi + 1, True
    return grew


def _edges(axes, best) -> dict:
    """Where the best point sits on each axis: an end of its list, the edge of a window that
    stopped growing (max_rounds), or inside."""
    edges = {}
    for a, i in zip(axes, best, strict=True):
        if i == 0:
            edges[a["name"]] = "low end"
        elif i == len(a["values"]) - 1:
            edges[a["name"]] = "high end"
        elif i in a["window"]:
            edges[a["name"]] = "window edge (max_rounds)"
        else:
            edges[a["name"]] = "interior"
    return edges


def widen_search(
    pipe, axes, X, y, *, cv: int = 3, random_state: int = 0, scoring=None, max_rounds: int = 20
) -> dict:
    """Grid search by stratified k-fold CV whose windows widen until the best is interior.

    Parameters
    ----------
    pipe : scikit-learn estimator
        Scored by accuracy on the held-out folds (e.g. a
        :func:`~meanfield.learners.feature_pipeline`).
    axes : list of dict
        One per hyper-parameter: ``name``; ``values``, the ordered candidates, each a dict of
        ``pipe`` parameters (several parameters may move together, e.g. β and η); ``window``,
        [lo, hi], the indices searched first.
    X, y : arrays
        Training rows only.
    cv : int >= 2
        Folds (``StratifiedKFold(cv, shuffle=True, random_state=random_state)``).
    random_state : int
        Seed of the folds.
    scoring : dict name -> scorer, optional
        Further metrics recorded for every point (the choice is by accuracy).
    max_rounds : int
        At most this many widenings.

    Returns
    -------
    dict
        ``best`` (parameter dict), ``best_index`` (one index per axis), ``scores`` (list of
        [index, {metric: mean}] for every point scored, in the order scored), ``windows``
        (final), ``edges`` (axis name -> ``"interior"``; ``"low end"`` or ``"high end"``: the
        best is on an end of its list; ``"window edge (max_rounds)"``: the widening stopped
        at ``max_rounds``), ``rounds``.

    See Also
    --------
    meanfield.learners.select_by_cv : the same search on a fixed grid.
    centred_alignment_scorer : a held-out scorer for it.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.learners import RandomFourierFeatures, feature_pipeline
    >>> X = np.random.default_rng(0).normal(size=(90, 2)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> vals = [{"features__bandwidth": 2.0**k} for k in range(-6, 7)]
    >>> pipe = feature_pipeline(RandomFourierFeatures(16, random_state=0), n_train=60)
    >>> res = widen_search(pipe, [{"name": "bw", "values": vals, "window": [0, 1]}], X, y)
    >>> res["windows"][0][0], res["edges"]["bw"] in ("interior", "high end"), res["rounds"] > 0
    (0, True, True)
    """
    from ..errors import InputError

    axes = _check_axes(axes)
    if not isinstance(max_rounds, int) or max_rounds < 0:
        raise InputError(f"max_rounds must be an integer >= 0, got {max_rounds!r}")
    scores: dict = {}
    rounds = 0
    while True:
        window = [range(a["window"][0], a["window"][1] + 1) for a in axes]
        todo = [p for p in itertools.product(*window) if p not in scores]
        if todo:
            for p, s in zip(
                todo, _score_points(pipe, axes, todo, X, y, cv, random_state, scoring), strict=True
            ):
                scores[p] = s
        inside = sorted(itertools.product(*window))
        best = max(inside, key=lambda p: (scores[p]["accuracy"], [-i for i in p]))
        if rounds >= max_rounds or not _grow(axes, best):
            break
        rounds += 1
    params = {}
    for a, i in zip(axes, best, strict=True):
        params.update(a["values"][i])
    return {
        "best": params,
        "best_index": list(best),
        "scores": [[list(p), s] for p, s in scores.items()],
        "windows": [list(a["window"]) for a in axes],
        "edges": _edges(axes, best),
        "rounds": rounds,
    }


def tuned_learners(split, m: int, *, learner_seed: int, cv_seed: int, settings: dict) -> dict:
    """Every learner of the synthetic study's ``tuned`` design, tuned by :func:`widen_search`
    on the training rows of ``split`` and scored by the leave-one-out ridge on its test rows.

    The learners (keys of ``learners``): ``rff_median`` (RFF at the median bandwidth, no CV);
    ``rff`` (σ = 2^k · median, k by widened CV); ``sklearn_rff`` (scikit-learn's
    ``RBFSampler`` + ``RidgeClassifierCV`` at the RFF's σ: the same model by another code);
    ``importance`` (σ around the RFF's choice × ρ fraction); ``coulomb_linear`` (``base``
    at the RFF's σ); ``coulomb_tempered`` and ``coulomb_tempered_align`` (prior confinement and
    direction repulsion, β by widened CV on accuracy, resp. by held-out centred alignment; with
    :func:`meanfield.learners.diagnostics.moved` and the alignment plateau). Every learner is
    seeded by ``learner_seed`` (the Coulomb particles start from the RFF draw); the folds by
    ``cv_seed``.

    Parameters
    ----------
    split : tuple
        ``(X_train, y_train, X_test, y_test, ...)``, X of shape (n, d), y in {−1, +1}.
    m : int
        Number of features.
    learner_seed, cv_seed : int
    settings : dict
        ``n_train``, ``cv``, ``base`` (CoulombFeatures keywords), ``betas``, ``beta_window``,
        ``bandwidth_exponents``, ``bandwidth_window``, ``rho_fractions``, ``rho_window``,
        ``direction_repulsion`` (the ``tuned`` design's settings,
        :func:`meanfield.studies.synthetic.check_config`).

    Returns
    -------
    dict
        ``median_bandwidth`` and ``learners`` (name -> test error, α, CV record, ...).

    See Also
    --------
    meanfield.studies.synthetic : the study whose ``tuned`` cells call it.

    Examples
    --------
    >>> from meanfield.learners.tasks import make_task
    >>> from meanfield.studies.synthetic import check_config
    >>> cfg = check_config({"design": "tuned", "n_train": 60, "cv": 2,
    ...                     "base": {"n_steps": 10}, "bandwidth_window": [-1, 1]})
    >>> split = make_task("two_moons", 60, 40, noise=0.1, seed=0)
    >>> res = tuned_learners(split, 8, learner_seed=1, cv_seed=0, settings=cfg)
    >>> sorted(res["learners"])[:3]
    ['coulomb_linear', 'coulomb_tempered', 'coulomb_tempered_align']
    """
    from . import RandomFourierFeatures, median_bandwidth

    n_train, cv = settings["n_train"], settings["cv"]
    ls, seed = learner_seed, cv_seed
    med = median_bandwidth(split[0], rng=ls)
    n_fold = n_train * (cv - 1) // cv
    alphas = {"fold": ridge_alphas(n_fold), "n_fold": n_fold, "full": ridge_alphas(n_train)}
    out = {"median_bandwidth": med, "learners": {}}
    rff = RandomFourierFeatures(m, bandwidth=med, random_state=ls)
    _score(out, "rff_median", rff, split, alphas["full"])
    bw, k = _rff(out, settings, split, m, ls, seed, med, alphas)
    _sklearn_rff(out, split, m, ls, bw, k)
    _importance(out, settings, split, m, ls, seed, med, k, alphas)
    _coulomb(out, settings, split, m, ls, seed, bw, alphas)
    return out


def _score(out: dict, name: str, learner, split, alphas, **extra) -> dict:
    """Fit ``learner`` on the training rows, score the ridge on the test rows, store the row."""
    from . import evaluate, kernel_alignment

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
    from . import RandomFourierFeatures, feature_pipeline

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
    from . import ImportanceSampledFeatures, feature_pipeline

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
    from . import CoulombFeatures, RandomFourierFeatures, feature_pipeline

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
            row["plateau"] = alignment_plateau(est, X, y)
            fitted[j] = row
        out["learners"][name] = {**fitted[j], "beta": betas[j], "cv": cv}


def learn_or_stay(learners: dict) -> dict:
    """The derived learner ``coulomb_learn_or_stay`` of the ``tuned`` design: the tempered
    particles where cross-validation prefers them to the RFF draw they start from, else that
    draw, unmoved.

    The rule compares the best mean CV accuracy of the two widened searches of
    :func:`tuned_learners` (every point a search scored lies in its final window, so the best
    is the accuracy of its choice): ``coulomb_tempered``'s over β, ``rff``'s over σ. The
    particles start from the RFF draw at the RFF's σ and seed, so "stay" is the ``rff``
    learner itself: its test error, and the measurements of a cloud that did not move
    (displacement and energy distance 0, norm ratio 1, isotropy and centred alignments those
    of the start). The choice uses the training folds only, never the test rows.

    Parameters
    ----------
    learners : dict
        One split's ``learners`` of :func:`tuned_learners`: the rows ``coulomb_tempered`` and
        ``rff``, each with its ``cv`` record (``scores``: [index, {"accuracy": ...}] pairs).

    Returns
    -------
    dict
        The tempered row with ``learned=True``, or with ``learned=False``, the ``rff`` row's
        ``ridge_test_error`` and the start's measurements.

    Raises
    ------
    meanfield.errors.InputError
        A missing row or CV record, or a measurement without its value at the start
        (``iso`` without ``iso_init``, ...).

    See Also
    --------
    meanfield.studies.synthetic_report : adds it to every record of the ``tuned`` design.

    Examples
    --------
    >>> cv = lambda *acc: {"scores": [[[j], {"accuracy": a}] for j, a in enumerate(acc)]}
    >>> learners = {
    ...     "rff": {"ridge_test_error": 0.2, "cv": cv(0.7, 0.8)},
    ...     "coulomb_tempered": {"ridge_test_error": 0.15, "cv": cv(0.75), "disp": 0.4,
    ...                          "iso": 1.3, "iso_init": 1.1},
    ... }
    >>> row = learn_or_stay(learners)  # CV prefers the draw (0.8 > 0.75): stay
    >>> row["learned"], row["ridge_test_error"], row["disp"], row["iso"]
    (False, 0.2, 0.0, 1.1)
    >>> learners["coulomb_tempered"]["cv"] = cv(0.85)
    >>> learn_or_stay(learners)["learned"], learn_or_stay(learners)["ridge_test_error"]
    (True, 0.15)
    """
    from ..errors import InputError

    try:
        t, f = learners["coulomb_tempered"], learners["rff"]
        best_t, best_f = (max(s["accuracy"] for _, s in x["cv"]["scores"]) for x in (t, f))
    except (KeyError, TypeError, ValueError):
        raise InputError(
            "learners must hold the rows 'coulomb_tempered' and 'rff' of tuned_learners, each "
            "with its cv record of scores"
        ) from None
    stay = {"disp": 0.0, "ed": 0.0, "norm_ratio": 1.0}  # the draw did not move
    moved_keys = ("disp", "ed", "iso", "align_c_train", "align_c_test", "norm_ratio")
    if bad := [k for k in moved_keys if k in t and k not in stay and f"{k}_init" not in t]:
        raise InputError(f"coulomb_tempered holds {bad} without their values at the start")
    if best_t > best_f:
        return {**t, "learned": True}
    row = {**{k: v for k, v in t.items() if k != "ridge_test_error"}, "learned": False}
    row["ridge_test_error"] = f["ridge_test_error"]
    for k in moved_keys:
        if k in t:
            row[k] = stay[k] if k in stay else t[f"{k}_init"]
    return row


def fixed_grid_learners(split, m: int, *, learner_seed: int, cv_seed: int, settings: dict) -> dict:
    """Every learner of the synthetic study's ``variants`` design, tuned by k-fold CV on fixed
    grids (:func:`meanfield.learners.select_by_cv`) on the training rows of ``split`` and
    scored by the leave-one-out ridge on its test rows.

    The learners: ``rff_median`` (no CV); ``rff`` (σ = f · median, f in
    ``bandwidth_factors``); ``importance`` (σ × ``rho_fractions``); ``coulomb_<name>`` for
    every Coulomb variant of ``variants`` (``base`` keywords updated by the variant's, at the
    RFF's σ) and ``coulomb_cv``, the variant of best CV accuracy (the first in order on ties).

    Parameters
    ----------
    split : tuple
        ``(X_train, y_train, X_test, y_test, ...)``, X of shape (n, d), y in {−1, +1}.
    m : int
        Number of features.
    learner_seed, cv_seed : int
        Seeds of every learner (the Coulomb particles start from the RFF draw) and of the folds.
    settings : dict
        ``cv``, ``base``, ``variants``, ``bandwidth_factors``, ``rho_fractions`` (the
        ``variants`` design's settings, :func:`meanfield.studies.synthetic.check_config`).

    Returns
    -------
    dict
        ``median_bandwidth`` and ``learners`` (name -> test error, CV score, parameters, ...).

    See Also
    --------
    meanfield.learners.select_by_cv : the search of each learner.
    ridge_errors : the test errors it reports.
    meanfield.studies.synthetic : the study that runs it.

    Examples
    --------
    >>> from meanfield.learners.tasks import make_task
    >>> split = make_task("two_moons", 60, 40, noise=0.1, seed=0)
    >>> cfg = dict(cv=2, base={"n_steps": 5, "lam": 0.3}, variants={"linear": {}},
    ...            bandwidth_factors=[1.0], rho_fractions=[0.0])
    >>> list(fixed_grid_learners(split, 8, learner_seed=1, cv_seed=0, settings=cfg)["learners"])
    ['rff_median', 'rff', 'importance', 'coulomb_linear', 'coulomb_cv']
    """
    from . import (
        CoulombFeatures,
        ImportanceSampledFeatures,
        RandomFourierFeatures,
        evaluate,
        median_bandwidth,
        select_by_cv,
    )

    X, y = split[0], split[1]
    ls, cv = learner_seed, dict(cv=settings["cv"], random_state=cv_seed)
    med = median_bandwidth(X, rng=ls)
    bws = [float(f * med) for f in settings["bandwidth_factors"]]
    out = {"median_bandwidth": med, "learners": {}}

    def score(name, learner, cv_res=None, extra=None):
        t0 = time.perf_counter()
        res = evaluate(learner, *split, classifiers=("ridge",))
        res["wall_s"] = time.perf_counter() - t0
        for attr in ("alignment_init_", "alignment_", "min_distance_", "best_step_"):
            if hasattr(learner, attr):
                res[attr.rstrip("_")] = float(getattr(learner, attr))
        plain = (type(None), bool, int, float, str)
        res["params"] = {k: v for k, v in learner.get_params().items() if isinstance(v, plain)}
        if cv_res is not None:
            res["cv_score"] = cv_res
        out["learners"][name] = {**res, **(extra or {})}

    score("rff_median", RandomFourierFeatures(m, bandwidth=med, random_state=ls))
    rcv = select_by_cv(RandomFourierFeatures(m, random_state=ls), {"bandwidth": bws}, X, y, **cv)
    bw = rcv["best_params"]["bandwidth"]
    rff = RandomFourierFeatures(m, bandwidth=bw, random_state=ls)
    score("rff", rff, rcv["best_score"], {"bandwidth_factor": bw / med})
    grid = {"bandwidth": bws, "rho_fraction": settings["rho_fractions"]}
    icv = select_by_cv(ImportanceSampledFeatures(m, rho=None, random_state=ls), grid, X, y, **cv)
    imp = ImportanceSampledFeatures(m, rho=None, random_state=ls, **icv["best_params"])
    extra = {"bandwidth_factor": icv["best_params"]["bandwidth"] / med}
    score("importance", imp, icv["best_score"], extra)
    base, variants = settings["base"], settings["variants"]
    proto = CoulombFeatures(m, bandwidth=bw, random_state=ls, **base)
    grid = [{k: [v] for k, v in var.items()} or {"lam": [base["lam"]]} for var in variants.values()]
    ccv = select_by_cv(proto, grid, X, y, **cv)
    names = list(variants)
    cv_scores = dict(zip(names, map(float, ccv["mean_test_score"]), strict=True))
    best = names[int(np.argmax(ccv["mean_test_score"]))]  # the first best, in order
    for name, var in variants.items():
        learner = CoulombFeatures(m, bandwidth=bw, random_state=ls, **{**base, **var})
        score(f"coulomb_{name}", learner, cv_scores[name])
    out["learners"]["coulomb_cv"] = {**out["learners"][f"coulomb_{best}"], "variant": best}
    return out


def ridge_errors(learner, split, ridges: dict) -> dict:
    """Fit ``learner`` on the training rows of ``split`` and score its features under every
    ridge of ``ridges``: name -> [penalty α or ``"loo"``
    (:func:`~meanfield.learners.diagnostics.ridge_alphas`), intercept (``True``: fitted on
    centred features; ``"label_mean"``: the label mean, uncentred)].

    Returns
    -------
    dict
        ``n_features``, ``fit_time`` and, per ridge ``r``, ``r_train_error``,
        ``r_test_error``, ``r_alpha``; ``wall_s``.

    See Also
    --------
    meanfield.learners.diagnostics.ridge_alphas : the penalties it scores over.
    meanfield.learners.RidgeFeatureClassifier : the ridge it fits.

    Examples
    --------
    >>> from meanfield.learners import RandomFourierFeatures
    >>> from meanfield.learners.tasks import make_task
    >>> split = make_task("two_moons", 60, 40, noise=0.1, seed=0)
    >>> row = ridge_errors(RandomFourierFeatures(8, random_state=0), split,
    ...                    {"fixed": [0.05, "label_mean"], "loo": ["loo", True]})
    >>> row["n_features"], sorted(row)[:3]
    (8, ['fit_time', 'fixed_alpha', 'fixed_test_error'])
    """
    from . import RidgeFeatureClassifier

    X, y, Xt, yt = split[:4]
    t0 = time.perf_counter()
    learner.fit(X, y)
    F, Ft = learner.transform(X), learner.transform(Xt)
    row = {"n_features": F.shape[1], "fit_time": float(learner.fit_time_)}
    for tag, (a, intercept) in ridges.items():
        alpha = ridge_alphas(len(X)) if a == "loo" else a
        clf = RidgeFeatureClassifier(alpha=alpha, fit_intercept=intercept).fit(F, y)
        row[f"{tag}_train_error"] = float(np.mean(clf.predict(F) != y))
        row[f"{tag}_test_error"] = float(np.mean(clf.predict(Ft) != yt))
        row[f"{tag}_alpha"] = float(clf.alpha_)
    row["wall_s"] = time.perf_counter() - t0
    return row
