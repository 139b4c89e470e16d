"""Closed-form ridge classification on given features, α chosen by exact leave-one-out."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, column_or_1d

from meanfield._validation import check_positive

from ._common import _check_lengths, _encode_labels, _validate_data

__all__ = ["RidgeFeatureClassifier"]


class RidgeFeatureClassifier(ClassifierMixin, BaseEstimator):
    r"""Ridge classification in closed form on given features, α fixed or chosen by exact LOO.

    Targets are ±1 (binary: the larger label is +1; C ≥ 3: one-vs-all columns). With the
    features and targets centred (when ``fit_intercept=True``), the coefficients minimise
    ‖Φ W − Y‖²_F + α ‖W‖²_F. With the thin SVD Φ_c = U diag(s) Vᵀ,

    .. math::

        W = V \operatorname{diag}\Big(\frac{s}{s^2 + \alpha}\Big) U^\top Y_c ,

    the same objective as scikit-learn's ``RidgeClassifier``. When ``alpha`` is a sequence,
    each candidate is scored by the exact leave-one-out squared error of the ±1 targets,

    .. math::

        \sum_j \Big(\frac{y_j - \hat y_j}{1 - h_{jj}}\Big)^2, \qquad
        h_{jj} = \sum_k U_{jk}^2 \frac{s_k^2}{s_k^2 + \alpha} + \frac1n

    (the hat matrix of the centred fit plus the intercept), and the best is refitted: no data
    are held out, and every learner gets the same selection rule.

    Parameters
    ----------
    alpha : float >= 0, or sequence of floats >= 0
        Ridge penalty α, or candidates for the leave-one-out choice.
    fit_intercept : True, False or "label_mean"
        True: centre features and targets and fit the intercept (scikit-learn's convention).
        False: no centring, no intercept. "label_mean": Sinha & Duchi's published convention —
        the features are *not* centred, the targets are centred by their mean ȳ, and the
        intercept is ȳ (not fitted): W = (ΦᵀΦ + α I)⁻¹ Φᵀ(Y − ȳ), scores ΦW + ȳ.

    Attributes
    ----------
    coef_ : ndarray of shape (1, m) (binary) or (C, m)
    intercept_ : ndarray of shape (1,) or (C,)
    alpha_ : float
        The penalty used.
    loo_errors_ : ndarray of shape (n_alphas,)
        Mean leave-one-out squared error per candidate (only when ``alpha`` is a sequence).
    classes_ : ndarray of shape (C,)
    n_features_in_ : int

    See Also
    --------
    feature_pipeline : a learner followed by this classifier.
    meanfield.learners.diagnostics.ridge_alphas : a grid of penalties for ``alpha="loo"``.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> clf = RidgeFeatureClassifier(alpha=1e-6).fit(X, [0, 0, 1, 1])
    >>> clf.predict(X).tolist(), clf.coef_.shape
    ([0, 0, 1, 1], (1, 1))
    """

    def __init__(self, alpha=1.0, *, fit_intercept=True):
        self.alpha = alpha
        self.fit_intercept = fit_intercept

    def fit(self, X, y):
        """Fit the coefficients.

        Parameters
        ----------
        X : array of shape (n, m)
            Features.
        y : array of shape (n,)
            Class labels (two or more classes).

        Returns
        -------
        self
            Fitted: ``coef_``, ``intercept_``, ``alpha_`` (and ``loo_errors_`` for a sequence).

        Examples
        --------
        Three candidate penalties, the one of least leave-one-out error kept:

        >>> import numpy as np
        >>> from meanfield.learners import RidgeFeatureClassifier
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> clf = RidgeFeatureClassifier(alpha=[1e-3, 1.0, 100.0]).fit(X, [0, 0, 1, 1])
        >>> clf.loo_errors_.round(3), clf.alpha_
        (array([0.589, 0.443, 1.698]), 1.0)
        """
        _check_lengths(X, y)
        alphas = _check_alphas(self.alpha)
        intercept = _check_intercept(self.fit_intercept)
        classes, _ = _encode_labels(y, type(self).__name__)
        X = _validate_data(self, X, reset=True, dtype=np.float64)
        Y = _pm1_targets(classes, column_or_1d(y))
        xm, ym = np.zeros(X.shape[1]), np.zeros(Y.shape[1])
        if intercept is True:
            xm, ym = X.mean(0), Y.mean(0)
        elif intercept == "label_mean":
            ym = Y.mean(0)
        Xc, Yc = X - xm, Y - ym
        U, sv, Vt = _thin_svd(Xc)
        UtY = U.T @ Yc
        if alphas.size > 1:
            # the hat matrix of the fitted intercept adds 1/n to every leverage
            errs = _loo_errors(U, sv, UtY, Yc, alphas, 1.0 / len(X) if intercept is True else 0.0)
            self.loo_errors_ = errs
            alpha = float(alphas[int(np.argmin(errs))])
        else:
            alpha = float(alphas[0])
        W = Vt.T @ ((sv / (sv**2 + alpha))[:, None] * UtY)
        self.alpha_ = alpha
        self.classes_ = classes
        self.coef_ = W.T
        self.intercept_ = ym - xm @ W
        return self

    def decision_function(self, X):
        """Scores, shape (n,) for two classes (positive means ``classes_[1]``), else (n, C).

        Parameters
        ----------
        X : array of shape (n, m)
            Features.

        Returns
        -------
        ndarray of shape (n,) or (n, C)
            Φ W + intercept: the ±1 target (binary) or each one-vs-all column.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.learners import RidgeFeatureClassifier
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> RidgeFeatureClassifier(alpha=1.0).fit(X, [0, 0, 1, 1]).decision_function(X).round(3)
        array([-1.   , -0.333,  0.333,  1.   ])
        >>> RidgeFeatureClassifier(alpha=1e-9).fit(np.eye(3), [0, 1, 2]).decision_function(
        ...     np.eye(3)).round(3)
        array([[ 1., -1., -1.],
               [-1.,  1., -1.],
               [-1., -1.,  1.]])
        """
        check_is_fitted(self, "coef_")
        X = _validate_data(self, X, reset=False, dtype=np.float64)
        s = X @ self.coef_.T + self.intercept_
        return s[:, 0] if s.shape[1] == 1 else s

    def predict(self, X):
        """Predicted labels, shape (n,).

        Parameters
        ----------
        X : array of shape (n, m)
            Features.

        Returns
        -------
        ndarray of shape (n,)
            The class of largest score (binary: ``classes_[1]`` where the score is positive).

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.learners import RidgeFeatureClassifier
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> clf = RidgeFeatureClassifier(alpha=1.0).fit(X, ["no", "no", "yes", "yes"])
        >>> clf.predict([[0.5], [2.5]]).tolist()
        ['no', 'yes']
        """
        s = self.decision_function(X)
        if s.ndim == 1:
            return self.classes_[(s > 0).astype(int)]
        return self.classes_[np.argmax(s, axis=1)]


def _check_alphas(alpha) -> np.ndarray:
    """The penalty candidates as a non-empty 1-d float array, each checked to be >= 0."""
    alphas = np.atleast_1d(np.asarray(alpha, dtype=float))
    if alphas.ndim != 1 or alphas.size == 0:
        raise ValueError(f"alpha must be a number >= 0 or a 1-d sequence of them, got {alpha!r}")
    for a in alphas:
        check_positive("alpha", a, allow_zero=True)
    return alphas


def _check_intercept(fit_intercept):
    """``fit_intercept`` as a plain bool, or ``"label_mean"``; anything else is an error."""
    if isinstance(fit_intercept, (bool, np.bool_)):
        return bool(fit_intercept)
    if fit_intercept != "label_mean":
        raise ValueError(
            f"fit_intercept must be True, False or 'label_mean', got {fit_intercept!r}"
        )
    return fit_intercept


def _pm1_targets(classes, y) -> np.ndarray:
    """±1 targets, shape (n, 1) for two classes (+1: ``classes[1]``), else one-vs-all (n, C)."""
    ids = np.searchsorted(classes, y)
    if len(classes) == 2:
        return np.where(ids == 1, 1.0, -1.0)[:, None]
    return np.where(ids[:, None] == np.arange(len(classes))[None, :], 1.0, -1.0)


def _thin_svd(Xc):
    """Thin SVD U diag(s) Vᵀ of ``Xc`` without the singular values at round-off level.

    LAPACK's divide-and-conquer driver (``gesdd``, numpy's) can fail to converge on
    rank-deficient matrices with many repeated columns (importance-sampled features with a
    large χ² budget repeat a few candidates); the QR-iteration driver ``gesvd`` is then used.
    """
    try:
        U, sv, Vt = np.linalg.svd(Xc, full_matrices=False)
    except np.linalg.LinAlgError:
        from scipy.linalg import svd

        U, sv, Vt = svd(Xc, full_matrices=False, lapack_driver="gesvd")
    keep = sv > sv.max(initial=0.0) * max(Xc.shape) * np.finfo(float).eps
    return U[:, keep], sv[keep], Vt[keep]


def _loo_errors(U, sv, UtY, Yc, alphas, h0: float) -> np.ndarray:
    r"""Mean exact leave-one-out squared error of the ridge fit, one per penalty in ``alphas``.

    .. math::

        \mathrm{LOO}(\alpha) = \frac1{nC} \sum_{j,c}
        \Big(\frac{Y_{jc} - \hat Y_{jc}}{1 - h_{jj}}\Big)^2, \qquad
        h_{jj} = \sum_k U_{jk}^2 \frac{s_k^2}{s_k^2 + \alpha} + h_0,

    with ``h0`` the leverage the intercept adds (1/n when it is fitted, else 0).
    """
    errs = np.empty(alphas.size)
    for i, a in enumerate(alphas):
        f = sv**2 / (sv**2 + a)
        resid = Yc - U @ (f[:, None] * UtY)
        h = (U * U) @ f + h0
        errs[i] = np.mean((resid / np.maximum(1.0 - h, 1e-12)[:, None]) ** 2)
    return errs
