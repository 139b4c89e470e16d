"""Classification metrics: accuracy, MCC, log loss, Brier score, expected calibration error.

Definitions (THEORY.md §7) follow scikit-learn where it has the metric:

* accuracy: fraction of ``argmax`` predictions equal to the label;
* MCC: Matthews correlation coefficient of the ``argmax`` predictions (multiclass form of
  Gorodkin 2004, as ``sklearn.metrics.matthews_corrcoef``; 0 when undefined);
* log loss: mean ``-log p[y]`` with probabilities clipped to ``[eps, 1 - eps]``,
  ``eps = finfo(float64).eps`` (scikit-learn's clipping), after renormalising rows;
* Brier score: binary ``mean (p1 - y)^2`` with ``p1`` the probability of class 1
  (``sklearn.metrics.brier_score_loss``); for more than two classes, the multiclass form
  ``mean sum_k (p_k - 1[y = k])^2`` (Brier 1950);
* ECE: 15 equal-width bins of the top-label confidence ``max_k p_k`` on ``[0, 1]`` (bin
  ``b`` holds confidences in ``(b/15, (b+1)/15]``, the first bin also holds 0),
  ``ECE = sum_b (n_b / n) |acc_b - conf_b|`` (Guo et al. 2017).

Every function takes the labels ``y_true`` (class ids, shape (n,)) and the predicted
probabilities ``probs``: shape (n,) for P(class 1) of a binary task, or (n, C) with rows
summing to 1. Bad input raises :class:`ValueError` naming the argument.

Examples
--------
>>> from meanfield.attention.metrics import classification_metrics
>>> m = classification_metrics([0, 1, 1, 0], [0.2, 0.4, 0.6, 0.4])
>>> {k: round(v, 4) for k, v in m.items()}
{'accuracy': 0.75, 'mcc': 0.5774, 'ece': 0.1, 'log_loss': 0.5403, 'brier': 0.18}
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "accuracy",
    "mcc",
    "log_loss",
    "brier",
    "ece",
    "classification_metrics",
    "METRIC_NAMES",
]

#: keys of :func:`classification_metrics`, in table order
METRIC_NAMES = ("accuracy", "mcc", "ece", "log_loss", "brier")


def _prepare(y_true, probs) -> tuple[np.ndarray, np.ndarray]:
    """Validate and return ``(y, P)`` with ``P`` of shape (n, C) whose rows sum to 1."""
    y = np.asarray(y_true)
    p = np.asarray(probs, dtype=float)
    if y.ndim != 1:
        raise ValueError(f"y_true must be 1-d (n,), got shape {y.shape}")
    if p.ndim == 1:  # binary: probability of class 1
        p = np.stack([1.0 - p, p], axis=1)
    if p.ndim != 2 or p.shape[0] != y.shape[0]:
        raise ValueError(
            f"probs must have shape (n,) or (n, n_classes) with n = len(y_true) = {y.shape[0]}, "
            f"got {np.shape(probs)}"
        )
    if y.shape[0] == 0:
        raise ValueError("y_true is empty; metrics need at least one sample")
    if p.shape[1] < 2:
        raise ValueError(f"probs needs at least 2 classes, got {p.shape[1]}")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError("probs must be finite probabilities in [0, 1]")
    if not np.allclose(p.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError("each row of probs must sum to 1 (within 1e-6)")
    if not np.issubdtype(y.dtype, np.integer):
        if not np.all(np.equal(np.mod(y, 1), 0)):
            raise ValueError("y_true must hold integer class ids")
        y = y.astype(int)
    if np.any(y < 0) or np.any(y >= p.shape[1]):
        raise ValueError(f"y_true must hold class ids in [0, {p.shape[1] - 1}]")
    return y, p


def accuracy(y_true, probs) -> float:
    r"""Fraction of correct ``argmax`` predictions.

    .. math::

        \mathrm{acc} = \frac1n \sum_{i=1}^n \mathbf 1\big[\arg\max_k p_{ik} = y_i\big].

    Parameters
    ----------
    y_true : array_like of int, shape (n,)
        Class ids in [0, C).
    probs : array_like, shape (n,) or (n, C)
        P(class 1) (binary) or class probabilities (rows sum to 1).

    Returns
    -------
    float
        In [0, 1].

    See Also
    --------
    mcc : the correlation of the same ``argmax`` predictions, 0 for chance.
    classification_metrics : all five metrics at once.

    Examples
    --------
    >>> from meanfield.attention.metrics import accuracy
    >>> accuracy([0, 1, 1], [0.3, 0.8, 0.4])
    0.6666666666666666
    """
    y, p = _prepare(y_true, probs)
    return float(np.mean(p.argmax(axis=1) == y))


def mcc(y_true, probs) -> float:
    r"""Matthews correlation coefficient of the ``argmax`` predictions (0 if undefined).

    Multiclass form (Gorodkin 2004), as ``sklearn.metrics.matthews_corrcoef``: with the
    confusion matrix C, true counts t_k, predicted counts q_k, c = tr C and n samples,

    .. math::

        \mathrm{MCC} = \frac{c\,n - t^\top q}
        {\sqrt{(n^2 - t^\top t)(n^2 - q^\top q)}}.

    Parameters
    ----------
    y_true : array_like of int, shape (n,)
        Class ids in [0, C).
    probs : array_like, shape (n,) or (n, C)
        P(class 1) (binary) or class probabilities (rows sum to 1).

    Returns
    -------
    float
        In [−1, 1]; 0 when a denominator factor vanishes (one class only).

    See Also
    --------
    accuracy : the fraction right of the same predictions.
    classification_metrics : all five metrics at once.

    References
    ----------
    .. [1] B. W. Matthews, "Comparison of the predicted and observed secondary structure of
       T4 phage lysozyme", Biochim. Biophys. Acta 405(2), 442–451, 1975.
    .. [2] J. Gorodkin, "Comparing two K-category assignments by a K-category correlation
       coefficient", Comput. Biol. Chem. 28(5–6), 367–374, 2004 (the multiclass form).

    Examples
    --------
    >>> from meanfield.attention.metrics import mcc
    >>> round(mcc([0, 1, 1, 0], [0.2, 0.4, 0.6, 0.4]), 6)  # 1/√3
    0.57735
    """
    y, p = _prepare(y_true, probs)
    c = p.shape[1]
    pred = p.argmax(axis=1)
    conf = np.zeros((c, c))
    np.add.at(conf, (y, pred), 1.0)
    t = conf.sum(axis=1)  # true counts per class
    q = conf.sum(axis=0)  # predicted counts per class
    n = conf.sum()
    correct = np.trace(conf)
    cov_yp = correct * n - t @ q
    cov_yy = n * n - t @ t
    cov_pp = n * n - q @ q
    den = np.sqrt(cov_yy * cov_pp)
    return float(cov_yp / den) if den > 0 else 0.0


def log_loss(y_true, probs) -> float:
    r"""Mean negative log-likelihood, probabilities clipped to ``[eps, 1 - eps]``.

    .. math::

        \ell = -\frac1n \sum_{i=1}^n \log \tilde p_{i y_i},

    with p̃ the probabilities clipped to [ε, 1 − ε], ε = float64 machine epsilon, and each
    row renormalised (scikit-learn's convention).

    Parameters
    ----------
    y_true : array_like of int, shape (n,)
        Class ids in [0, C).
    probs : array_like, shape (n,) or (n, C)
        P(class 1) (binary) or class probabilities (rows sum to 1).

    Returns
    -------
    float
        In nats, ≥ 0.

    See Also
    --------
    brier : the squared error of the same probabilities (bounded, unlike the log loss).
    ece : how far the confidences are from the accuracies.
    classification_metrics : all five metrics at once.

    Examples
    --------
    >>> import math
    >>> from meanfield.attention.metrics import log_loss
    >>> math.isclose(log_loss([1, 0], [0.5, 0.5]), math.log(2))
    True
    """
    y, p = _prepare(y_true, probs)
    eps = np.finfo(np.float64).eps
    p = np.clip(p, eps, 1 - eps)
    p = p / p.sum(axis=1, keepdims=True)
    return float(-np.mean(np.log(p[np.arange(len(y)), y])))


def brier(y_true, probs) -> float:
    r"""Brier score: binary ``mean (p1 - y)^2``; multiclass ``mean sum_k (p_k - 1[y=k])^2``.

    .. math::

        \mathrm{BS} = \frac1n \sum_i (p_{i1} - y_i)^2 \quad (C = 2), \qquad
        \mathrm{BS} = \frac1n \sum_i \sum_k (p_{ik} - \mathbf 1[y_i = k])^2 \quad (C > 2).

    Parameters
    ----------
    y_true : array_like of int, shape (n,)
        Class ids in [0, C).
    probs : array_like, shape (n,) or (n, C)
        P(class 1) (binary) or class probabilities (rows sum to 1).

    Returns
    -------
    float
        In [0, 1] for two classes, [0, 2] for more.

    See Also
    --------
    log_loss : the other proper scoring rule here.
    classification_metrics : all five metrics at once.

    References
    ----------
    .. [1] G. W. Brier, "Verification of forecasts expressed in terms of probability",
       Monthly Weather Review 78(1), 1–3, 1950.

    Examples
    --------
    >>> from meanfield.attention.metrics import brier
    >>> round(brier([0, 1, 1, 0], [0.2, 0.9, 0.6, 0.4]), 6)
    0.0925
    """
    y, p = _prepare(y_true, probs)
    if p.shape[1] == 2:
        return float(np.mean((p[:, 1] - y) ** 2))
    onehot = np.eye(p.shape[1])[y]
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def ece(y_true, probs, n_bins: int = 15) -> float:
    r"""Expected calibration error with ``n_bins`` equal-width top-label confidence bins.

    With confidence c_i = max_k p_ik and bin B_b = {i : c_i ∈ (b/M, (b+1)/M]} (the first bin
    also holds 0),

    .. math::

        \mathrm{ECE} = \sum_{b=0}^{M-1} \frac{|B_b|}{n}
        \Big| \frac{1}{|B_b|}\sum_{i \in B_b} \mathbf 1[\hat y_i = y_i]
        - \frac{1}{|B_b|}\sum_{i \in B_b} c_i \Big|.

    Parameters
    ----------
    y_true : array_like of int, shape (n,)
        Class ids in [0, C).
    probs : array_like, shape (n,) or (n, C)
        P(class 1) (binary) or class probabilities (rows sum to 1).
    n_bins : int
        Number of bins M (>= 1), 15 by default (Guo et al. 2017).

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    ValueError
        ``n_bins`` not an integer >= 1, or bad ``y_true`` / ``probs``.

    See Also
    --------
    brier, log_loss : scoring rules, which reward calibration and sharpness together.
    classification_metrics : all five metrics at once.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of modern neural
       networks", ICML 2017.

    Examples
    --------
    All four predictions are right, with confidences 0.8, 0.9, 0.6, 0.6 in three bins:
    ECE = (0.2 + 0.1 + 0.4 + 0.4) / 4.

    >>> from meanfield.attention.metrics import ece
    >>> round(ece([0, 1, 1, 0], [0.2, 0.9, 0.6, 0.4]), 6)
    0.275
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1, got {n_bins!r}")
    y, p = _prepare(y_true, probs)
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(float)
    # bin b holds conf in (edges[b], edges[b+1]]; conf = 0 goes to bin 0
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.searchsorted(edges[1:-1], conf, side="left")
    acc_sum = np.bincount(idx, weights=correct, minlength=n_bins)
    conf_sum = np.bincount(idx, weights=conf, minlength=n_bins)
    return float(np.sum(np.abs(acc_sum - conf_sum)) / len(y))


def classification_metrics(y_true, probs, n_bins: int = 15) -> dict[str, float]:
    """All five metrics in a dict keyed by :data:`METRIC_NAMES`.

    Parameters
    ----------
    y_true : array_like of int, shape (n,)
        Class ids in [0, C).
    probs : array_like, shape (n,) or (n, C)
        P(class 1) (binary) or class probabilities (rows sum to 1).
    n_bins : int, default 15
        Bins of the calibration error.

    Returns
    -------
    dict of str to float
        ``accuracy``, ``mcc``, ``ece``, ``log_loss``, ``brier``.

    See Also
    --------
    accuracy, mcc, ece, log_loss, brier : each metric, with its definition.
    meanfield.attention.training.predict_proba : the probabilities of a model.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.attention.metrics import classification_metrics
    >>> P = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    >>> round(classification_metrics([0, 1, 0], P)["brier"], 6)
    0.313333
    """
    return {
        "accuracy": accuracy(y_true, probs),
        "mcc": mcc(y_true, probs),
        "ece": ece(y_true, probs, n_bins=n_bins),
        "log_loss": log_loss(y_true, probs),
        "brier": brier(y_true, probs),
    }
