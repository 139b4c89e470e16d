"""Classification metrics (meanfield.attention.metrics) against scikit-learn and by hand."""

import numpy as np
import pytest

from meanfield.attention import metrics as M

sk = pytest.importorskip("sklearn.metrics")


def _binary(n=500, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    p1 = np.clip(0.5 + 0.3 * (2 * y - 1) + 0.25 * rng.standard_normal(n), 0.0, 1.0)
    return y, p1


def _multiclass(n=400, c=4, seed=1):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    logits = rng.standard_normal((n, c)) + 1.5 * np.eye(c)[y]
    p = np.exp(logits)
    return y, p / p.sum(1, keepdims=True)


def test_binary_metrics_match_sklearn():
    y, p1 = _binary()
    pred = (p1 > 0.5).astype(int)
    assert M.accuracy(y, p1) == pytest.approx(sk.accuracy_score(y, pred), abs=1e-12)
    assert M.mcc(y, p1) == pytest.approx(sk.matthews_corrcoef(y, pred), abs=1e-12)
    assert M.log_loss(y, p1) == pytest.approx(sk.log_loss(y, np.stack([1 - p1, p1], 1)), rel=1e-9)
    assert M.brier(y, p1) == pytest.approx(sk.brier_score_loss(y, p1), abs=1e-12)
    # the (n, 2) form gives the same numbers
    P = np.stack([1 - p1, p1], 1)
    assert M.classification_metrics(y, P) == pytest.approx(M.classification_metrics(y, p1))


def test_multiclass_metrics_match_sklearn():
    y, P = _multiclass()
    pred = P.argmax(1)
    assert M.accuracy(y, P) == pytest.approx(sk.accuracy_score(y, pred), abs=1e-12)
    assert M.mcc(y, P) == pytest.approx(sk.matthews_corrcoef(y, pred), abs=1e-12)
    assert M.log_loss(y, P) == pytest.approx(sk.log_loss(y, P, labels=range(4)), rel=1e-9)
    onehot = np.eye(4)[y]
    assert M.brier(y, P) == pytest.approx(np.mean(np.sum((P - onehot) ** 2, 1)), abs=1e-12)


def test_log_loss_clips_like_sklearn():
    y = np.array([0, 1, 1, 0])
    p1 = np.array([0.0, 1.0, 0.0, 0.3])  # one confident mistake
    P = np.stack([1 - p1, p1], 1)
    assert M.log_loss(y, p1) == pytest.approx(sk.log_loss(y, P), rel=1e-9)


def test_mcc_degenerate_is_zero_like_sklearn():
    y = np.array([0, 1, 0, 1])
    p1 = np.full(4, 0.9)  # always predicts class 1
    assert M.mcc(y, p1) == sk.matthews_corrcoef(y, np.ones(4, int)) == 0.0


def _ece_direct(y, P, n_bins=15):
    """Guo et al. (2017): bins (b/B, (b+1)/B] of the top-label confidence, by a Python loop."""
    conf = P.max(1)
    correct = P.argmax(1) == y
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        inb = [(c > lo or (b == 0 and c == 0.0)) and c <= hi for c in conf]
        idx = np.flatnonzero(inb)
        if len(idx):
            total += len(idx) / len(y) * abs(correct[idx].mean() - conf[idx].mean())
    return total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ece_matches_direct_computation(seed):
    y, p1 = _binary(seed=seed)
    assert M.ece(y, p1) == pytest.approx(_ece_direct(y, np.stack([1 - p1, p1], 1)), abs=1e-12)
    y, P = _multiclass(seed=seed)
    assert M.ece(y, P) == pytest.approx(_ece_direct(y, P), abs=1e-12)


def test_ece_bin_edges_and_known_values():
    # confidences exactly on bin edges belong to the bin they close: (b/15, (b+1)/15]
    y = np.array([1, 1, 0])
    P = np.array([[1 / 3, 2 / 3], [0.0, 1.0], [0.5, 0.5]])  # 2/3 = 10/15: an edge
    assert M.ece(y, P) == pytest.approx(_ece_direct(y, P), abs=1e-12)
    # perfectly calibrated in each bin -> 0; always right at confidence 1 -> 0
    assert M.ece([1, 1], [1.0, 1.0]) == 0.0
    # one sample, wrong, confidence 0.8: |0 - 0.8| = 0.8
    assert M.ece([0], [0.8]) == pytest.approx(0.8)


def test_ece_agrees_with_calibration_curve_for_two_classes():
    """Top-label ECE of a binary model, rebuilt from scikit-learn's calibration_curve."""
    from sklearn.calibration import calibration_curve

    y, p1 = _binary(2000, seed=5)
    conf = np.maximum(p1, 1 - p1)
    correct = ((p1 > 0.5).astype(int) == y).astype(int)
    # uniform bins on [0, 1]: top-label confidences are >= 0.5, so only upper bins are used
    prob_true, prob_pred = calibration_curve(correct, conf, n_bins=15, strategy="uniform")
    edges = np.linspace(0, 1, 16)
    idx = np.searchsorted(edges[1:-1], conf, side="left")
    counts = np.bincount(idx, minlength=15)
    counts = counts[counts > 0]
    ref = np.sum(counts / len(y) * np.abs(prob_true - prob_pred))
    # calibration_curve bins [b/15, (b+1)/15) (left-closed); with continuous confidences no
    # sample sits on an edge, so the two agree
    assert M.ece(y, p1) == pytest.approx(ref, abs=1e-12)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="probs must have shape"):
        M.accuracy([0, 1], [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="sum to 1"):
        M.accuracy([0, 1], [[0.5, 0.6], [0.5, 0.5]])
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        M.brier([0, 1], [1.2, 0.1])
    with pytest.raises(ValueError, match="class ids in \\[0, 1\\]"):
        M.mcc([0, 2], [0.2, 0.3])
    with pytest.raises(ValueError, match="n_bins"):
        M.ece([0, 1], [0.2, 0.3], n_bins=0)
    with pytest.raises(ValueError, match="empty"):
        M.log_loss([], np.zeros((0, 2)))
