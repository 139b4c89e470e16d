"""The evaluation harness: build a learner by name, fit it, score downstream classifiers, select
by CV."""

from __future__ import annotations

import numpy as np

from meanfield._validation import check_choice, check_int

from ._common import _check_lengths
from .coulomb import CoulombFeatures
from .metric import kernel_alignment
from .random_features import ImportanceSampledFeatures, RandomFourierFeatures
from .ridge import RidgeFeatureClassifier

__all__ = ["LEARNER_NAMES", "evaluate", "feature_pipeline", "make_learner", "select_by_cv"]

#: The learners :func:`make_learner` builds, by name.
LEARNER_NAMES = ("rff", "importance", "coulomb", "langevin")


def evaluate(
    learner,
    X_train,
    y_train,
    X_test,
    y_test,
    *,
    classifiers=("ridge", "logistic"),
    ridge_alpha="loo",
    logistic_C: float = 100.0,
) -> dict:
    """Fit ``learner`` on the training split, then the downstream classifiers on its features.

    Parameters
    ----------
    learner : feature learner
        Unfitted (:class:`~meanfield.learners.RandomFourierFeatures`,
        :class:`~meanfield.learners.CoulombFeatures`, ...).
    X_train, y_train : arrays of shape (n_train, d) and (n_train,)
        Training split: the learner and the classifiers are fitted on it.
    X_test, y_test : arrays of shape (n_test, d) and (n_test,)
        Test split.
    classifiers : subset of {"ridge", "logistic"}
        Downstream classifiers to fit on the learned features.
    ridge_alpha : float, sequence of floats, or "loo"
        α of :class:`RidgeFeatureClassifier`; a sequence is chosen from by exact leave-one-out;
        "loo" means the candidates n_train · 10^k, k = −7, −6.5, …, 0 (the learned kernel
        matrix has trace about n_train, so this spans no to heavy shrinkage).
    logistic_C : float
        Inverse penalty of scikit-learn's ``LogisticRegression`` (lbfgs).

    Returns
    -------
    dict
        ``fit_time`` (kernel training, s), ``alignment_train``/``alignment_test`` (Cristianini),
        and for each classifier c: ``{c}_train_accuracy``, ``{c}_test_accuracy``,
        ``{c}_test_error``.

    See Also
    --------
    feature_pipeline : the learner and the ridge as one scikit-learn pipeline.
    select_by_cv : hyper-parameters by cross-validation before it.
    meanfield.learners.tasks.make_task : the splits it scores on.

    Examples
    --------
    >>> from meanfield.learners import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(60, 2))
    >>> y = np.where(X[:, 0] > 0, 1, -1)
    >>> rff = RandomFourierFeatures(32, random_state=0)
    >>> out = evaluate(rff, X[:40], y[:40], X[40:], y[40:], classifiers=("ridge",))
    >>> sorted(out)
    ['alignment_test', 'alignment_train', 'fit_time', 'ridge_alpha',
     'ridge_test_accuracy', 'ridge_test_error', 'ridge_train_accuracy']
    >>> out["ridge_test_accuracy"] >= 0.8
    True
    """
    from sklearn.linear_model import LogisticRegression

    for c in classifiers:
        check_choice("classifier", c, ("ridge", "logistic"))
    learner.fit(X_train, y_train)
    F_tr, F_te = learner.transform(X_train), learner.transform(X_test)
    out = {
        "fit_time": float(learner.fit_time_),
        "alignment_train": kernel_alignment(F_tr, y_train),
        "alignment_test": kernel_alignment(F_te, y_test),
    }
    for c in classifiers:
        if c == "ridge":
            clf = RidgeFeatureClassifier(alpha=_ridge_alphas(ridge_alpha, len(F_tr)))
        else:
            clf = LogisticRegression(C=logistic_C, max_iter=2000)
        acc_tr, acc_te = _fit_accuracies(clf, F_tr, y_train, F_te, y_test)
        out[f"{c}_train_accuracy"] = acc_tr
        out[f"{c}_test_accuracy"] = acc_te
        out[f"{c}_test_error"] = 1.0 - acc_te
        if c == "ridge":
            out["ridge_alpha"] = float(clf.alpha_)
    return out


def _fit_accuracies(clf, F_tr, y_train, F_te, y_test) -> tuple[float, float]:
    """Fit ``clf`` on the training features; its accuracy on the training and the test split."""
    clf.fit(F_tr, y_train)
    acc_tr = float(np.mean(clf.predict(F_tr) == np.asarray(y_train)))
    acc_te = float(np.mean(clf.predict(F_te) == np.asarray(y_test)))
    return acc_tr, acc_te


def _ridge_alphas(ridge_alpha, n: int):
    """α of :class:`RidgeFeatureClassifier`: "loo" means the candidates n · 10^k, k = −7 … 0."""
    if isinstance(ridge_alpha, str):
        check_choice("ridge_alpha", ridge_alpha, ("loo",))
        return n * np.logspace(-7, 0, 15)
    return ridge_alpha


def feature_pipeline(learner, *, ridge_alpha="loo", n_train: int = 1000, fit_intercept=True):
    """``Pipeline([("features", learner), ("ridge", RidgeFeatureClassifier)])``.

    Parameters
    ----------
    learner : feature learner
        The first step (unfitted; the pipeline fits it).
    ridge_alpha : float, sequence or "loo"
        As in :func:`evaluate` ("loo": n_train · 10^[−7..0], chosen by exact leave-one-out
        inside every fit).
    n_train : int
        Rows the ridge will see (sets the "loo" grid).
    fit_intercept : True, False or "label_mean"
        As in :class:`RidgeFeatureClassifier`.

    Returns
    -------
    sklearn.pipeline.Pipeline
        Steps ``"features"`` (the learner) and ``"ridge"``.

    See Also
    --------
    evaluate : fit and score on a split.
    select_by_cv : the pipeline tuned by cross-validation.

    Examples
    --------
    >>> from meanfield.learners import RandomFourierFeatures
    >>> pipe = feature_pipeline(RandomFourierFeatures(16, random_state=0), n_train=40)
    >>> [name for name, _ in pipe.steps]
    ['features', 'ridge']
    """
    from sklearn.pipeline import Pipeline

    ridge = RidgeFeatureClassifier(
        alpha=_ridge_alphas(ridge_alpha, n_train), fit_intercept=fit_intercept
    )
    return Pipeline([("features", learner), ("ridge", ridge)])


def select_by_cv(
    learner, param_grid, X, y, *, cv: int = 3, random_state: int = 0, ridge_alpha="loo"
) -> dict:
    """Choose ``learner``'s hyper-parameters by stratified k-fold CV on (X, y) only.

    scikit-learn's ``GridSearchCV`` on :func:`feature_pipeline` (accuracy of the ridge
    classifier on the held-out fold; ties go to the first candidate), without refitting: the
    caller refits the chosen learner on all of (X, y). The same rule serves every learner, so
    none is tuned on test data or left at a default while another is tuned.

    Parameters
    ----------
    learner : feature learner
        Unfitted; the parameters not in ``param_grid`` are kept.
    param_grid : dict or list of dicts
        Learner parameters (without the ``features__`` prefix), as for ``GridSearchCV``; a list
        of dicts compares variants with different parameter sets.
    X, y : arrays of shape (n, d) and (n,)
        The training data (the folds are drawn from it).
    cv : int >= 2
        Folds.
    random_state : int
        Seed of the fold shuffle.
    ridge_alpha : float, sequence or "loo"
        As in :func:`feature_pipeline` (the "loo" grid sized for one training fold).

    Returns
    -------
    dict
        ``best_params`` (learner parameters), ``best_score`` (mean CV accuracy), ``params``
        and ``mean_test_score`` (every candidate, in grid order), ``std_test_score``.

    See Also
    --------
    feature_pipeline : the pipeline it tunes.
    meanfield.learners.tuning.widen_search : the same search on grids that widen.

    Examples
    --------
    >>> from meanfield.learners import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(60, 2))
    >>> y = np.where(X[:, 0] > 0, 1, -1)
    >>> grid = {"bandwidth": [0.5, 2.0]}
    >>> res = select_by_cv(RandomFourierFeatures(16, random_state=0), grid, X, y)
    >>> res["best_params"]["bandwidth"] in (0.5, 2.0), len(res["mean_test_score"])
    (True, 2)
    """
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    cv = check_int("cv (folds)", cv, minimum=2)
    grids = [param_grid] if isinstance(param_grid, dict) else list(param_grid)
    if not grids or not all(isinstance(g, dict) for g in grids):
        raise ValueError("param_grid must be a dict or a non-empty list of dicts")
    _check_lengths(X, y)
    prefixed = [{f"features__{k}": list(v) for k, v in g.items()} for g in grids]
    n_fold = int(len(X) * (cv - 1) / cv)
    search = GridSearchCV(
        feature_pipeline(learner, ridge_alpha=ridge_alpha, n_train=n_fold),
        prefixed,
        cv=StratifiedKFold(cv, shuffle=True, random_state=random_state),
        scoring="accuracy",
        refit=False,
        error_score="raise",
    )
    search.fit(X, y)
    res = search.cv_results_
    strip = len("features__")
    params = [{k[strip:]: v for k, v in p.items()} for p in res["params"]]
    # the first best in grid order (GridSearchCV's rank breaks ties the same way)
    best = int(np.flatnonzero(res["rank_test_score"] == 1)[0])
    return {
        "best_params": params[best],
        "best_score": float(res["mean_test_score"][best]),
        "params": params,
        "mean_test_score": np.asarray(res["mean_test_score"], dtype=float),
        "std_test_score": np.asarray(res["std_test_score"], dtype=float),
    }


def make_learner(
    name: str, m: int, seed: int, coulomb: dict | None = None, importance: dict | None = None
):
    """The learner ``name`` of :data:`LEARNER_NAMES`, unfitted, with ``m`` features at the
    median bandwidth, seeded by ``seed``.

    ``"rff"``: :class:`~meanfield.learners.RandomFourierFeatures`; ``"importance"``:
    :class:`~meanfield.learners.ImportanceSampledFeatures` (options ``importance``);
    ``"coulomb"``: :class:`~meanfield.learners.CoulombFeatures` (options ``coulomb``);
    ``"langevin"``: the same with ``lam = 0`` (the Langevin dynamics without repulsion). One
    ``seed`` for every name gives paired learners: the Coulomb particles start from the RFF
    draw.

    Parameters
    ----------
    name : {"rff", "importance", "coulomb", "langevin"}
        The learner.
    m : int >= 1
        Features (particles).
    seed : int
        The learner's ``random_state``.
    coulomb : dict, optional
        Keywords of :class:`~meanfield.learners.CoulombFeatures` (default: its own).
    importance : dict, optional
        Keywords of :class:`~meanfield.learners.ImportanceSampledFeatures` (default: its own).

    Returns
    -------
    RandomFourierFeatures, ImportanceSampledFeatures or CoulombFeatures

    Raises
    ------
    meanfield.errors.InputError
        ``name`` not among :data:`LEARNER_NAMES` (checked before anything is built).

    See Also
    --------
    evaluate : fits the learner and scores the downstream classifiers.
    meanfield.studies.synthetic.run_grid_cell : fits each learner of the study's ``grid`` cell.

    References
    ----------
    - A. Rahimi, B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.
    - A. Sinha, J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.

    Examples
    --------
    >>> from meanfield.learners import make_learner
    >>> make_learner("langevin", 8, 0, {"lam": 0.3, "n_steps": 30}).lam
    0.0
    >>> make_learner("importance", 8, 0, importance={"rho": 0.5}).rho
    0.5
    """
    check_choice("name", name, LEARNER_NAMES)
    common = dict(bandwidth="median", random_state=seed)
    if name == "rff":
        return RandomFourierFeatures(m, **common)
    if name == "importance":
        return ImportanceSampledFeatures(m, **common, **(importance or {}))
    lam = {"lam": 0.0} if name == "langevin" else {}
    return CoulombFeatures(m, **common, **{**(coulomb or {}), **lam})
