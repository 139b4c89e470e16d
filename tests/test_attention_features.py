"""Feature maps of kernel attention (meanfield.attention.features)."""

import math

import numpy as np
import pytest
import torch

from meanfield.attention.features import (
    FEATURE_KINDS,
    PositiveFeatures,
    SoftmaxFeatures,
    chi_mean,
    make_feature_map,
)
from meanfield.attention.linear import kernel_attention


@pytest.fixture(autouse=True)
def _one_thread():
    # these tensors are tiny: a second thread only adds synchronisation, which on the shared
    # 2-core machine (and under load) costs more than it saves
    torch.set_num_threads(1)
    yield


def _qk_pairs(d, n_pairs, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_pairs, d, generator=g, dtype=torch.float64)
    k = torch.randn(n_pairs, d, generator=g, dtype=torch.float64)
    # norms ~ 1.2 so that exp(q.k/sqrt(d)) and the estimator variance stay moderate
    return 1.2 * q / q.norm(dim=1, keepdim=True), 1.2 * k / k.norm(dim=1, keepdim=True)


@pytest.mark.parametrize("kind", ["favor", "porf"])
def test_positive_features_unbiased_for_softmax_kernel(kind):
    """E[phi(q).phi(k)] = exp(q^T k / sqrt(d)) (Monte Carlo over independent draws of Omega).

    Tolerance: the mean of S independent draw-level estimates has standard error
    SE = sd / sqrt(S). For iid rows sd^2 is known exactly: one feature gives
    Y = exp(w.z - (|q~|^2 + |k~|^2)/2), z = q~ + k~, with E[Y] = exp(q~.k~) and
    E[Y^2] = exp(2|z|^2 - |q~|^2 - |k~|^2), so a draw of m rows has variance Var(Y)/m.
    Orthogonal rows are not independent, so for PORF sd is the sample standard deviation of
    the S draws (S = 48). We accept |mean - target| <= 5 SE: a false failure has probability
    about 6e-7 per pair under the normal approximation (and the seeds are fixed).
    """
    d, m, S = 8, 4096, 48
    q, k = _qk_pairs(d, 4, seed=3)
    target = torch.exp((q * k).sum(1) / math.sqrt(d))
    fm = make_feature_map(kind, d, m, seed=0)
    est = []
    for s in range(S):
        fm.new_feature_map(1000 + s)
        est.append((fm.raw_features(q) * fm.raw_features(k)).sum(1))
    est = torch.stack(est)  # (S, pairs)
    mean = est.mean(0)
    if kind == "favor":
        qs, ks = q / d**0.25, k / d**0.25
        z = qs + ks
        ey2 = torch.exp(2 * (z * z).sum(1) - (qs * qs).sum(1) - (ks * ks).sum(1))
        var_y = ey2 - torch.exp(2 * (qs * ks).sum(1))
        se = torch.sqrt(var_y / (m * S))
        # the exact variance agrees with the spread seen across draws (within 35%)
        assert torch.allclose(est.std(0), torch.sqrt(var_y / m), rtol=0.35)
    else:
        se = est.std(0) / math.sqrt(S)
    assert torch.all((mean - target).abs() <= 5 * se), (mean, target, se)
    # and the test has power: a 5% bias would be more than 5 standard errors away
    assert torch.all(0.05 * target > 5 * se)


def test_orthogonal_rows_and_chi_norms():
    d, m = 16, 64
    fm = make_feature_map("porf", d, m, seed=5)
    om = fm.omega.double()
    for b in range(m // d):
        block = om[b * d : (b + 1) * d]
        dirs = block / block.norm(dim=1, keepdim=True)
        assert torch.allclose(dirs @ dirs.T, torch.eye(d, dtype=torch.float64), atol=1e-5)
    # row norms are chi_d: mean sqrt(2) Gamma((d+1)/2) / Gamma(d/2), sd about 0.7; over 64 * 20
    # rows the mean's standard error is < 0.02
    norms = []
    for s in range(20):
        fm.new_feature_map(s)
        norms.append(fm.omega.double().norm(dim=1))
    assert abs(torch.cat(norms).mean().item() - chi_mean(d)) < 5 * 0.71 / math.sqrt(64 * 20)


def test_partial_orthogonal_block():
    fm = make_feature_map("porf", 8, 13, seed=1)
    assert fm.omega.shape == (13, 8)
    dirs = fm.omega[8:].double()
    dirs = dirs / dirs.norm(dim=1, keepdim=True)
    assert torch.allclose(dirs @ dirs.T, torch.eye(5, dtype=torch.float64), atol=1e-5)


@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_randomness_in_one_place_and_deterministic(kind):
    a = make_feature_map(kind, 8, 16, seed=7)
    b = make_feature_map(kind, 8, 16, seed=7)
    c = make_feature_map(kind, 8, 16, seed=8)
    assert torch.equal(a.omega, b.omega)
    assert not torch.equal(a.omega, c.omega)
    # forward never draws: repeated calls (train or eval mode) give identical bits
    x = torch.randn(2, 5, 3, 8)
    for mode in (True, False):
        a.train(mode)
        assert torch.equal(a.transform(x), a.transform(x))
        assert torch.equal(a.raw_features(x), a.raw_features(x))
    # new_feature_map(seed) is the draw: the same seed gives the same Omega again
    a.new_feature_map(8)
    assert torch.equal(a.omega, c.omega)
    # one Omega, a buffer (never an optimiser parameter), shared by queries and keys
    assert [n for n, _ in a.named_buffers()] == ["omega"]
    assert list(a.parameters()) == []


def test_set_omega_validates_and_marks_learned():
    fm = make_feature_map("favor", 4, 6, seed=0)
    new = np.arange(24, dtype=float).reshape(6, 4) / 10
    fm.set_omega(new)
    assert fm.learned
    assert np.allclose(fm.omega.numpy(), new)
    with pytest.raises(ValueError, match=r"omega must have shape \(n_features, head_dim\)"):
        fm.set_omega(np.zeros((5, 4)))
    bad = new.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        fm.set_omega(bad)
    # the learned flag survives a state_dict round trip
    other = make_feature_map("favor", 4, 6, seed=1)
    other.load_state_dict(fm.state_dict())
    assert other.learned and torch.equal(other.omega, fm.omega)


def test_bad_arguments_raise_before_work():
    with pytest.raises(ValueError, match="feature kind"):
        make_feature_map("relu", 4, 4)
    with pytest.raises(ValueError, match="head_dim"):
        make_feature_map("favor", 0, 4)
    with pytest.raises(ValueError, match="n_features"):
        make_feature_map("favor", 4, 0)
    with pytest.raises(ValueError, match="seed"):
        make_feature_map("favor", 4, 4, seed=-1)
    fm = make_feature_map("favor", 4, 4)
    with pytest.raises(ValueError, match="last dimension head_dim = 4"):
        fm.transform(torch.zeros(1, 2, 1, 5))
    with pytest.raises(TypeError, match="floating"):
        fm.raw_features(torch.zeros(1, 2, 1, 4, dtype=torch.long))


def test_softmaxfeat_halves_each_sum_to_one():
    fm = SoftmaxFeatures(8, 10, seed=0)
    assert fm.n_outputs == 20
    x = torch.randn(3, 4, 2, 8) * 30
    f = fm.transform(x)
    assert torch.allclose(f[..., :10].sum(-1), torch.ones(3, 4, 2))
    assert torch.allclose(f[..., 10:].sum(-1), torch.ones(3, 4, 2))
    one = SoftmaxFeatures(8, 10, seed=0, symmetric=False)
    assert one.n_outputs == 10
    assert torch.allclose(one.raw_features(x), f[..., :10])


@pytest.mark.parametrize("kind", FEATURE_KINDS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scale", [30.0, 1e3, 1e5])
def test_no_nan_or_inf_for_large_norm_float32(kind, causal, scale):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 40, 2, 16, generator=g) * scale
    k = torch.randn(2, 40, 2, 16, generator=g) * scale
    v = torch.randn(2, 40, 2, 8, generator=g)
    mask = torch.zeros(2, 40, dtype=torch.bool)
    mask[1, 30:] = True
    fm = make_feature_map(kind, 16, 32, seed=0)
    feats = fm.transform(q)
    assert feats.dtype == torch.float32 and torch.isfinite(feats).all()
    out = kernel_attention(q, k, v, fm, key_padding_mask=mask, causal=causal, chunk_size=8)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()


def test_large_norm_positive_features_still_attend():
    """With huge logits the stabilised features reduce to the dominant (feature, key) pairs
    instead of under- or overflowing: the output is a convex combination of values."""
    g = torch.Generator().manual_seed(2)
    fm = PositiveFeatures(16, 32, seed=0)
    q = torch.randn(1, 20, 1, 16, generator=g) * 200
    k = torch.randn(1, 20, 1, 16, generator=g) * 200
    v = torch.randn(1, 20, 1, 3, generator=g, dtype=torch.float32)
    for causal in (False, True):
        out = kernel_attention(q, k, v, fm, causal=causal, eps=1e-6)
        lo = v.amin(dim=1, keepdim=True) - 1e-4
        hi = v.amax(dim=1, keepdim=True) + 1e-4
        assert torch.all((out >= lo) & (out <= hi))


def test_positive_shift_cancels_and_matches_unshifted_kernel():
    """The shifted features give the same attention as the unshifted kernel (float64)."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 12, 1, 8, generator=g, dtype=torch.float64)
    k = torch.randn(1, 12, 1, 8, generator=g, dtype=torch.float64)
    v = torch.randn(1, 12, 1, 3, generator=g, dtype=torch.float64)
    fm = PositiveFeatures(8, 64, seed=2)
    raw_q, raw_k = fm.raw_features(q), fm.raw_features(k)
    A = torch.einsum("blhm,bshm->bhls", raw_q, raw_k)[0, 0]
    for causal in (False, True):
        W = A.tril() if causal else A
        ref = (W @ v[0, :, 0]) / W.sum(1, keepdim=True)
        out = kernel_attention(q, k, v, fm, causal=causal, eps=0.0, chunk_size=5)[0, :, 0]
        assert torch.allclose(out, ref, rtol=1e-10, atol=1e-12)


def _global_shift_causal(q, k, v, fm):
    """The leaky recipe: one key shift = max over *all* positions (future included)."""
    qa, ka = fm.transform(q), fm.transform(k)
    qf = torch.exp(qa - qa.amax(-1, keepdim=True))
    kf = torch.exp(ka - ka.amax(dim=(1, 3), keepdim=True))
    A = torch.einsum("blhm,bshm->bhls", qf, kf).tril()
    return torch.einsum("bhls,bshd->blhd", A, v) / (A.sum(-1).transpose(1, 2)[..., None] + 1e-6)


def test_causal_shift_has_no_future_leakage():
    """Changing future keys must not change earlier outputs (float32), even when a future
    key dominates every logit. The same check fails for a global key maximum used causally,
    which shows the test detects leakage."""
    g = torch.Generator().manual_seed(4)
    L, t0, d = 48, 30, 16
    fm = PositiveFeatures(d, 32, seed=0)
    om = fm.omega.clone()
    om[0] = 0.0
    om[0, 0] = 20.0  # a large particle (Phase A may learn such)
    fm.set_omega(om)
    q = torch.randn(1, L, 1, d, generator=g)
    k = torch.randn(1, L, 1, d, generator=g)
    v = torch.randn(1, L, 1, 4, generator=g)
    k2 = k.clone()
    k2[:, t0:] = 0.0
    k2[:, t0:, :, 0] = 20.0 * d**0.25  # future keys with k~ = omega_0: logit 200
    v2 = v.clone()
    v2[:, t0:] = 100.0
    a = kernel_attention(q, k, v, fm, causal=True, chunk_size=8)
    b = kernel_attention(q, k2, v2, fm, causal=True, chunk_size=8)
    assert torch.isfinite(b).all()
    assert torch.allclose(a[:, :t0], b[:, :t0], rtol=1e-5, atol=1e-6)
    leaky_a, leaky_b = _global_shift_causal(q, k, v, fm), _global_shift_causal(q, k2, v2, fm)
    assert not torch.allclose(leaky_a[:, :t0], leaky_b[:, :t0], rtol=1e-2, atol=1e-2)


def test_features_accumulate_in_fp32_under_autocast():
    fm = make_feature_map("favor", 16, 32, seed=0)
    x = torch.randn(2, 10, 2, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        feats = fm.transform(x.bfloat16())
        out = kernel_attention(x.bfloat16(), x.bfloat16(), x.bfloat16()[..., :8], fm)
    assert feats.dtype == torch.float32
    assert out.dtype == torch.bfloat16
    ref = kernel_attention(x, x, x[..., :8], fm)
    # the only bf16 rounding left is of the inputs and the output (relative 2^-8 each)
    assert torch.allclose(out.float(), ref, rtol=2e-2, atol=2e-2)


def test_phase_a_alignment_names_map_through_the_learners_mapping():
    """Phase A's alignment forms are a subset of the one name -> energy-term mapping."""
    from meanfield.attention.phases import ALIGNMENTS
    from meanfield.energy import CentredAlignment
    from meanfield.learners import ALIGNMENTS as TERMS

    assert set(ALIGNMENTS) <= set(TERMS) and TERMS["centred"] is CentredAlignment
