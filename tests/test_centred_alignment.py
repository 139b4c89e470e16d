"""The centred alignment term (Cortes, Mohri & Rostamizadeh 2012) against independent truth.

- its value against the dense formula ⟨HKH, HTH⟩ / (‖HKH‖ ‖HTH‖) built from n × n matrices;
- its analytic gradient against torch autograd (float64: agreement to 1e-10, rounding only);
- its first variation: ∇ δE/δμ[μ_N](ω_i) is the particle force N ∇_i H_N (a ratio keeps the
  diagonal, as the normalised form);
- the learners' scale-free metric ``kernel_alignment(..., centred=True)`` against the term.
"""

import numpy as np
import pytest
import torch

from meanfield.domains import Ball
from meanfield.energy import CentredAlignment, Energy, target_matrix
from meanfield.features import get_feature_map
from meanfield.learners import fourier_features, kernel_alignment

FEATURES = ["positive", "fourier", "softplus"]


def _data(rng, n=12, classes=None):
    X = rng.normal(size=(n, 3))
    if classes is None:
        y = np.where(rng.random(n) < 0.3, 1.0, -1.0)  # unbalanced: the centring matters
    else:
        y = rng.integers(0, classes, n).astype(float)
        y[:classes] = np.arange(classes)
    return X, y


def _dense(X, y, om, feat):
    P = get_feature_map(feat).evaluate(torch.tensor(X), om).numpy()  # (N, n)
    n = P.shape[1]
    H = np.eye(n) - 1.0 / n
    Kc = H @ (P.T @ P / P.shape[0]) @ H
    Tc = H @ target_matrix(y) @ H
    return (Kc * Tc).sum() / (np.linalg.norm(Kc) * np.linalg.norm(Tc))


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("feat", FEATURES)
@pytest.mark.parametrize("classes", [None, 3])
def test_value_matches_dense_centred_formula(feat, classes, rng):
    X, y = _data(rng, classes=classes)
    p = get_feature_map(feat).particle_dim(3)
    E = Energy([CentredAlignment(X, y, feat)], Ball(p, 10.0))
    om = torch.tensor(rng.normal(size=(5, p)))
    assert E.value(om).item() == pytest.approx(-_dense(X, y, om, feat), rel=1e-10)


@pytest.mark.parametrize("feat", FEATURES)
@pytest.mark.parametrize("classes", [None, 3])
def test_gradient_equals_autograd(feat, classes, rng):
    X, y = _data(rng, classes=classes)
    p = get_feature_map(feat).particle_dim(3)
    E = Energy([CentredAlignment(X, y, feat)], Ball(p, 10.0))
    om = torch.tensor(rng.normal(size=(2, 7, p)), requires_grad=True)  # with a replica axis
    (auto,) = torch.autograd.grad(E.value(om).sum(), om)
    assert (auto - E.grad(om.detach())).abs().max().item() < 1e-10


def test_first_variation_is_the_particle_force(rng):
    X, y = _data(rng, n=10, classes=3)
    E = Energy([CentredAlignment(X, y, "softplus")], Ball(3, 10.0))
    om = torch.tensor(rng.normal(size=(5, 3)))
    at = om.clone().requires_grad_(True)
    fv = E.first_variation(at, om, np.full(5, 0.2))
    (g,) = torch.autograd.grad(fv.sum(), at)
    assert torch.allclose(g, E.drift(om), atol=1e-10)


def test_mini_batch_centres_on_the_batch(rng):
    X, y = _data(rng, n=16)
    idx = np.arange(3, 13)
    term = CentredAlignment(X, y, "fourier")
    E = Energy([term], Ball(4, 10.0))
    om = torch.tensor(rng.normal(size=(6, 4)))
    sub = E.terms[0].subset_data(idx)
    assert sub.value(om).item() == pytest.approx(-_dense(X[idx], y[idx], om, "fourier"), 1e-10)


def test_learner_metric_agrees_with_the_term(rng):
    X, y = _data(rng, n=30)
    om = rng.normal(size=(8, 4))
    E = Energy([CentredAlignment(X, y, "fourier")], Ball(4, 10.0))
    Phi = fourier_features(X, om)  # (n, m), K = Phi Phi^T
    assert kernel_alignment(Phi, y, centred=True) == pytest.approx(
        -E.value(torch.tensor(om)).item(), rel=1e-10
    )
    # centring changes the number on unbalanced labels
    assert abs(kernel_alignment(Phi, y) - kernel_alignment(Phi, y, centred=True)) > 1e-3


@pytest.mark.parametrize("N", [5, 40])  # particle Gram (N < n) and data Gram (N > n) sides
@pytest.mark.parametrize("centred", [False, True])
def test_shared_cristianini_alignment_matches_dense(N, centred, rng):
    """meanfield.alignment against <K, T>/(|K| |T|) built from dense n x n matrices.

    Both are float64 evaluations of the same ratio in different orders: agreement to 1e-12 is
    rounding only (n = 12, entries O(1)).
    """
    from meanfield.alignment import cristianini_alignment
    from meanfield.energy import target_factors

    X, y = _data(rng, classes=3)
    P = rng.normal(size=(N, len(y)))
    U, w = target_factors(y)
    n = len(y)
    H = np.eye(n) - 1.0 / n if centred else np.eye(n)
    K, T = H @ P.T @ P @ H, H @ target_matrix(y) @ H
    dense = (K * T).sum() / (np.linalg.norm(K) * np.linalg.norm(T))
    got = cristianini_alignment(torch.tensor(P), torch.tensor(U), torch.tensor(w), centred=centred)
    assert float(got) == pytest.approx(dense, abs=1e-12)
    zero = torch.zeros(N, n, dtype=torch.float64)
    zero = cristianini_alignment(zero, torch.tensor(U), torch.tensor(w))
    assert float(zero) == 0.0  # a zero kernel: 0, not NaN


def test_shared_alignment_names_the_misfit_argument():
    from meanfield.alignment import cristianini_alignment

    phi, U, w = torch.ones(3, 5, dtype=torch.float64), torch.ones(5, 2), torch.ones(2)
    assert torch.isfinite(cristianini_alignment(phi, U, w))  # float32 factors follow phi
    for args, match in [
        ((torch.ones(5, dtype=torch.float64), U, w), "phi must be"),
        ((torch.ones(3, 5, dtype=torch.long), U, w), "phi must be"),
        ((phi, torch.ones(4, 2), w), "U must have shape"),
        ((phi, U, torch.ones(3)), "w must have shape"),
    ]:
        with pytest.raises(ValueError, match=match):
            cristianini_alignment(*args)
