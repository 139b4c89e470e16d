import math

import numpy as np
import pytest
import torch

from meanfield.features import (
    get_feature_map,
    sample_gaussian,
    sample_initial_particles,
    sample_orthogonal,
)


def test_positive_features_estimate_exp_kernel(rng):
    # E_{ω~N(0,I)} φ(x)φ(x') = exp(xᵀx'); the Monte Carlo mean of M draws has standard error
    # sd/√M, with sd estimated from the same draws: assert within 5 standard errors
    X = torch.tensor(rng.normal(scale=0.4, size=(3, 4)))
    f = get_feature_map("positive")
    om = sample_gaussian(200_000, 4, seed=1)
    P = f.evaluate(X, om)  # (M, n)
    prods = P[:, 0] * P[:, 1]
    se = prods.std() / math.sqrt(len(prods))
    assert abs(prods.mean() - torch.exp(X[0] @ X[1])) < 5 * se


def test_fourier_features_estimate_gaussian_kernel(rng):
    # ω ~ N(0, σ⁻²I), b ~ U[−π, π): E φ(x)φ(x') = exp(−|x − x'|²/(2σ²)); bound 5 standard errors
    X = torch.tensor(rng.normal(size=(2, 3)))
    f = get_feature_map("fourier")
    om = sample_initial_particles("fourier", 200_000, 3, bandwidth=1.3, seed=2)
    assert om.shape == (200_000, 4)
    prods = f.evaluate(X, om)[:, 0] * f.evaluate(X, om)[:, 1]
    se = prods.std() / math.sqrt(len(prods))
    want = torch.exp(-((X[0] - X[1]) ** 2).sum() / (2 * 1.3**2))
    assert abs(prods.mean() - want) < 5 * se


def test_softplus_matches_torch():
    X = torch.randn(5, 3, dtype=torch.float64)
    om = torch.randn(4, 3, dtype=torch.float64)
    P = get_feature_map("softplus").evaluate(X, om)
    assert torch.allclose(P, torch.log1p(torch.exp(om @ X.T)))


@pytest.mark.parametrize("name", ["positive", "fourier", "softplus"])
def test_dg_is_derivative_of_g(name):
    f = get_feature_map(name)
    z = torch.linspace(-3, 3, 50, dtype=torch.float64, requires_grad=True)
    (d,) = torch.autograd.grad(f.g(z).sum(), z)
    assert torch.allclose(d, f.dg(z.detach()), atol=1e-12)


def test_orthogonal_blocks():
    W = sample_orthogonal(10, 4, seed=3)
    assert W.shape == (10, 4)
    for s in (0, 4):
        B = W[s : s + 4]
        G = B @ B.T
        assert torch.allclose(
            G - torch.diag(torch.diagonal(G)), torch.zeros(4, 4, dtype=G.dtype), atol=1e-12
        )
    # row norms² are χ²_p: mean p; over 20 000 rows the SE of the mean is √(2p/20000)
    norms2 = (sample_orthogonal(20_000, 4, seed=4) ** 2).sum(1)
    assert abs(norms2.mean().item() - 4) < 5 * math.sqrt(8 / 20_000)


def test_samplers_reproducible_and_validated():
    assert torch.equal(sample_gaussian(5, 2, seed=7), sample_gaussian(5, 2, seed=7))
    assert not torch.equal(sample_gaussian(5, 2, seed=7), sample_gaussian(5, 2, seed=8))
    with pytest.raises(ValueError, match="n_particles"):
        sample_gaussian(0, 2)
    with pytest.raises(ValueError, match="feature"):
        get_feature_map("cosine")
    with pytest.raises(ValueError, match="bandwidth"):
        sample_initial_particles("positive", 3, 2, bandwidth=-1.0)


def test_empirical_kernel_shape():
    X = np.random.default_rng(0).normal(size=(6, 2))
    om = sample_gaussian(50, 2, seed=0)
    K = get_feature_map("positive").empirical_kernel(X, om)
    assert K.shape == (6, 6) and torch.allclose(K, K.T)


def test_one_sampler_for_particles_and_attention():
    """The seeded particle samplers and the attention's Omega draw through the same code."""
    from meanfield.attention.features import gaussian_omega, orthogonal_omega

    for ours, theirs in ((sample_gaussian, gaussian_omega), (sample_orthogonal, orthogonal_omega)):
        gen = torch.Generator().manual_seed(9)
        want = theirs(13, 4, gen, dtype=torch.float64) * 2.0
        assert torch.equal(ours(13, 4, scale=2.0, seed=9), want)
    with pytest.raises(ValueError, match="dim"):
        sample_orthogonal(3, 0)
