"""Cross-validation on grids that widen until they contain their optimum, and the paired
statistics of the round-three synthetic study (issue 22).

:func:`widen_search` is a grid search whose grid grows: each axis is an ordered list of
candidate values of which a contiguous *window* is searched; while the cross-validated best
sits on a window edge that the list can extend, the window grows by one value on that side and
the new points are scored (the folds never change, so scores are comparable across rounds).
The search ends with the best point interior to its window on every axis, or on an end of a
list, which is then reported as the edge it is (a natural bound such as ρ = 0, or the limit of
the search).

:func:`paired_family` (defined in :mod:`meanfield.stats`, re-exported here) turns a family of
paired differences into the report's rows: mean, 95 % t-interval, two-sided p-value of the
one-sample t-test, Holm's adjusted p over the family and the Bonferroni-corrected
(simultaneous) interval at family-wise level 95 %.

Examples
--------
>>> from meanfield.studies.synthetic_search import paired_family
>>> rows = paired_family({"a": [0.1, 0.2, 0.15, 0.12], "b": [0.0, 0.01, -0.01, 0.0]})
>>> [r["label"] for r in rows], rows[0]["k"]
(['a', 'b'], 4)
"""

from __future__ import annotations

import itertools

import numpy as np

from ..stats import paired_family, paired_test  # defined once, in meanfield.stats

__all__ = [
    "ridge_alphas",
    "widen_search",
    "centred_alignment_scorer",
    "paired_test",
    "paired_family",
    "energy_distance",
]


def ridge_alphas(n: int) -> np.ndarray:
    """The ridge penalties of the round-three study: n · 10^k, k = −12, −11.5, …, 1.

    Wider than the first study's n · 10^[−7..0]: with a wide Gaussian kernel the features are
    nearly collinear and the leave-one-out choice went to the old grid's lowest value.

    Parameters
    ----------
    n : int >= 1
        Rows the ridge sees.

    Returns
    -------
    ndarray of shape (27,)

    Examples
    --------
    >>> a = ridge_alphas(1000)
    >>> len(a), float(a[0]), float(a[-1])
    (27, 1e-09, 10000.0)
    """
    return n * 10.0 ** np.arange(-12.0, 1.25, 0.5)


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

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.learners import RandomFourierFeatures, feature_pipeline
    >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> pipe = feature_pipeline(RandomFourierFeatures(16, random_state=0), n_train=60).fit(X, y)
    >>> 0 < centred_alignment_scorer(pipe, X, y) < 1
    True
    """
    from ..learners import kernel_alignment

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


def energy_distance(a, b) -> float:
    """Energy distance between two point clouds: 2 E|A − B| − E|A − A'| − E|B − B'| (V-statistics).

    Zero iff the two empirical laws are equal; between two independent draws of one law it is
    of the order of the sampling noise, which is the yardstick the study compares with.

    Parameters
    ----------
    a : array of shape (m, p)
    b : array of shape (k, p)

    Returns
    -------
    float >= 0

    Examples
    --------
    >>> import numpy as np
    >>> a = np.random.default_rng(0).normal(size=(200, 3))
    >>> energy_distance(a, a), energy_distance(a, a + 3.0) > 1.0
    (0.0, True)
    """
    from scipy.spatial.distance import cdist

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(max(0.0, 2 * cdist(a, b).mean() - cdist(a, a).mean() - cdist(b, b).mean()))
