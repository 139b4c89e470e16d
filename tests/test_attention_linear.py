"""Linear attention and KernelAttention (meanfield.attention.linear)."""

import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from meanfield.attention.features import FEATURE_KINDS, make_feature_map
from meanfield.attention.linear import (
    ATTENTION_KINDS,
    kernel_attention,
    linear_attention,
    softmax_attention,
)
from meanfield.attention.mha import KernelAttention


@pytest.fixture(autouse=True)
def _one_thread():
    # these tensors are tiny: a second thread only adds synchronisation, which on the shared
    # 2-core machine (and under load) costs more than it saves
    torch.set_num_threads(1)
    yield


def _direct(q, k, v, fm, mask=None, causal=False):
    """O(L^2) reference from the *unshifted* kernel phi(q).phi(k), float64, no epsilon."""
    A = torch.einsum("blhm,bshm->bhls", fm.raw_features(q), fm.raw_features(k))
    if mask is not None:
        A = A.masked_fill(mask[:, None, None, :], 0.0)
    if causal:
        A = A * torch.ones(A.shape[-2:], dtype=A.dtype).tril()
    return torch.einsum("bhls,bshd->blhd", A, v) / A.sum(-1).transpose(1, 2)[..., None]


def _qkv(b, L, h, d, dv, seed, scale=1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, L, h, d, generator=g, dtype=dtype) * scale
    k = torch.randn(b, L, h, d, generator=g, dtype=dtype) * scale
    v = torch.randn(b, L, h, dv, generator=g, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("kind", FEATURE_KINDS)
@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_matches_direct_quadratic(kind, causal):
    q, k, v = _qkv(2, 23, 2, 8, 5, seed=0)
    mask = torch.zeros(2, 23, dtype=torch.bool)
    mask[1, 17:] = True  # right padding in the second sequence
    fm = make_feature_map(kind, 8, 24, seed=3)
    ref = _direct(q, k, v, fm, mask, causal)
    for chunk in (1, 5, 64):
        out = kernel_attention(
            q, k, v, fm, key_padding_mask=mask, causal=causal, eps=0.0, chunk_size=chunk
        )
        assert torch.allclose(out, ref, rtol=1e-10, atol=1e-12)


def test_causal_agrees_with_bidirectional_at_last_position():
    q, k, v = _qkv(1, 16, 1, 8, 3, seed=1)
    fm = make_feature_map("porf", 8, 16, seed=0)
    bi = kernel_attention(q, k, v, fm, causal=False, eps=0.0)
    ca = kernel_attention(q, k, v, fm, causal=True, eps=0.0)
    assert torch.allclose(bi[:, -1], ca[:, -1], rtol=1e-10)


def test_many_features_approach_softmax_attention():
    """Positive-feature attention converges to softmax(QK^T/sqrt(d)) V as m grows.

    The kernel estimate has Monte Carlo error O(m^(-1/2)), so the log-log slope of the output
    error against m = 64 ... 4096 (averaged over 3 draws) must be about -1/2 (accepted:
    [-0.7, -0.3]), and at m = 16384 the error must be small. Here |q~ + k~|^2 <= 2.5, so one
    feature's relative sd is at most sqrt(e^2.5 - 1) = 3.3 and at m = 16384 the kernel's
    relative sd is <= 0.026; the output error is a weighted mean of such errors times
    |v| <= 3, so we require < 0.05.
    """
    q, k, v = _qkv(1, 20, 1, 16, 4, seed=2)
    q = 1.5 * q / q.norm(dim=-1, keepdim=True)  # |q~| = |k~| = 0.75, so |q~ + k~|^2 <= 2.25
    k = 1.5 * k / k.norm(dim=-1, keepdim=True)
    v = v.clamp(-3, 3)
    qs, ks = q / 2.0, k / 2.0  # d^(1/4) = 2
    z2 = ((qs[0, :, 0, None] + ks[0, None, :, 0]) ** 2).sum(-1)
    assert z2.max() <= 2.5 and v.abs().max() <= 3
    ref = softmax_attention(q, k, v)
    ms = [64, 256, 1024, 4096]
    for kind in ("favor", "porf"):
        errs = []
        for m in ms:
            e = [
                (kernel_attention(q, k, v, make_feature_map(kind, 16, m, seed=s), eps=0.0) - ref)
                .abs()
                .mean()
                .item()
                for s in range(3)
            ]
            errs.append(sum(e) / 3)
        slope = np.polyfit(np.log(ms), np.log(errs), 1)[0]
        assert -0.7 <= slope <= -0.3, (kind, errs, slope)
        fm = make_feature_map(kind, 16, 16384, seed=0)
        assert (kernel_attention(q, k, v, fm, eps=0.0) - ref).abs().max() < 0.05


@pytest.mark.parametrize("feature", ATTENTION_KINDS)
@pytest.mark.parametrize("causal", [False, True])
def test_padding_does_not_change_real_tokens(feature, causal):
    torch.manual_seed(0)
    attn = KernelAttention(16, 2, batch_first=True, feature=feature, n_features=16, seed=1).eval()
    x = torch.randn(1, 7, 16)
    garbage = torch.randn(1, 5, 16) * 1e4  # padded positions hold huge values
    xp = torch.cat([x, garbage], dim=1)
    mask = torch.zeros(1, 12, dtype=torch.bool)
    mask[0, 7:] = True
    with torch.no_grad():
        out, _ = attn(x, x, x, is_causal=causal)
        outp, _ = attn(xp, xp, xp, key_padding_mask=mask, is_causal=causal)
    assert torch.isfinite(outp).all()
    assert torch.allclose(out, outp[:, :7], rtol=1e-5, atol=1e-6)


def test_softmax_mode_equals_multiheadattention():
    torch.manual_seed(0)
    E, H = 16, 4
    mha = nn.MultiheadAttention(E, H, batch_first=True).eval()
    ka = KernelAttention(E, H, batch_first=True, feature="softmax").eval()
    with torch.no_grad():  # torch's parameter names: copied one to one
        ka.in_proj_weight.copy_(mha.in_proj_weight)
        ka.in_proj_bias.copy_(mha.in_proj_bias)
        ka.out_proj.weight.copy_(mha.out_proj.weight)
        ka.out_proj.bias.copy_(mha.out_proj.bias)
    q, kv = torch.randn(2, 5, E), torch.randn(2, 9, E)
    mask = torch.zeros(2, 9, dtype=torch.bool)
    mask[0, 6:] = True
    with torch.no_grad():
        o1, w1 = mha(q, kv, kv, key_padding_mask=mask, need_weights=True)
        o2, w2 = ka(q, kv, kv, key_padding_mask=mask, need_weights=True)
        fmask = torch.zeros(2, 9).masked_fill(mask, float("-inf"))
        o3, _ = ka(q, kv, kv, key_padding_mask=fmask)
    assert torch.allclose(o1, o2, atol=1e-6)
    assert torch.allclose(w1, w2, atol=1e-6)
    assert torch.allclose(o1, o3, atol=1e-6)


@pytest.mark.parametrize("feature", FEATURE_KINDS)
def test_explicit_weights_reproduce_the_output(feature):
    torch.manual_seed(1)
    attn = KernelAttention(12, 3, batch_first=True, feature=feature, n_features=8).eval()
    x = torch.randn(2, 6, 12)
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[1, 4:] = True
    for causal in (False, True):
        with torch.no_grad():
            out, w = attn(
                x,
                x,
                x,
                key_padding_mask=mask,
                need_weights=True,
                average_attn_weights=False,
                is_causal=causal,
            )
            v = attn.project_values(x)  # (b, S, h, d)
            rebuilt = attn.out_proj(torch.einsum("bhls,bshd->blhd", w, v).reshape(2, 6, 12))
        assert w.shape == (2, 3, 6, 6)
        assert torch.allclose(w.sum(-1), torch.ones(2, 3, 6), atol=1e-5)
        assert torch.all(w[1, :, :, 4:] == 0)
        if causal:
            assert torch.all(w.triu(1) == 0)
        assert torch.allclose(out, rebuilt, atol=1e-5)


def test_tie_qk_shares_the_projection():
    torch.manual_seed(0)
    tied = KernelAttention(16, 2, feature="favor", tie_qk=True)
    free = KernelAttention(16, 2, feature="favor")
    # one (E, E) block and its bias for Q and K (no torch equivalent: see the class notes)
    assert tied.k_proj_weight is None
    # torch's containers read in_proj_weight: the packed [QK; QK; V] blocks, not a parameter
    assert "in_proj_weight" not in dict(tied.named_parameters())
    assert torch.equal(tied.in_proj_weight[16:32], tied.qk_proj_weight)
    assert tied.qk_proj_weight.shape == (16, 16) and free.in_proj_weight.shape == (48, 16)
    n_tied = sum(p.numel() for p in tied.parameters())
    n_free = sum(p.numel() for p in free.parameters())
    assert n_free - n_tied == 16 * 16 + 16
    x = torch.randn(2, 5, 16)
    assert torch.equal(tied.project_keys(x), tied.project_queries(x))
    # with Q = K the unnormalised self-attention kernel is symmetric
    fm = tied.feature_map
    phi = fm.raw_features(tied.project_queries(x).double())
    A = torch.einsum("blhm,bshm->bhls", phi, phi)
    assert torch.allclose(A, A.transpose(-1, -2))


def test_causal_module_ignores_future_inputs():
    torch.manual_seed(0)
    attn = KernelAttention(16, 2, batch_first=True, feature="favor").eval()
    x = torch.randn(1, 10, 16)
    y = x.clone()
    y[:, 6:] = torch.randn(1, 4, 16) * 50
    with torch.no_grad():
        a, _ = attn(x, x, x, is_causal=True)
        b, _ = attn(y, y, y, is_causal=True)
    assert torch.allclose(a[:, :6], b[:, :6], atol=1e-6)


def test_autocast_bf16_module_is_finite_and_close():
    torch.manual_seed(0)
    attn = KernelAttention(32, 2, batch_first=True, feature="favor", n_features=32).eval()
    x = torch.randn(2, 20, 32) * 10
    with torch.no_grad():
        ref, _ = attn(x, x, x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, _ = attn(x, x, x)
    assert torch.isfinite(out).all()
    # bf16 projections: relative error about 2^-8 per operation
    assert (out.float() - ref).abs().max() < 0.05 * ref.abs().max() + 0.05


def test_redraw_only_in_training_and_never_for_learned():
    attn = KernelAttention(8, 2, feature="favor", n_features=4, redraw_every=2, seed=3)
    x = torch.randn(1, 3, 8)
    w0 = attn.feature_map.omega.clone()
    attn.eval()
    for _ in range(5):
        attn(x, x, x)
    assert torch.equal(attn.feature_map.omega, w0)
    attn.train()
    attn(x, x, x)
    attn(x, x, x)
    assert torch.equal(attn.feature_map.omega, w0)
    attn(x, x, x)  # third call: redraw
    assert not torch.equal(attn.feature_map.omega, w0)
    attn.feature_map.set_omega(w0)
    for _ in range(5):
        attn(x, x, x)
    assert torch.equal(attn.feature_map.omega, w0)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="divisible by num_heads"):
        KernelAttention(10, 3)
    with pytest.raises(ValueError, match="unknown feature"):
        KernelAttention(8, 2, feature="cosine")
    assert KernelAttention(8, 2, dropout=0.1).dropout == 0.1  # on the output (class notes)
    with pytest.raises(ValueError, match="dropout"):
        KernelAttention(8, 2, dropout=1.5)
    with pytest.raises(ValueError, match="eps"):
        KernelAttention(8, 2, eps=-1.0)
    with pytest.raises(ValueError, match="tie_qk needs kdim"):
        KernelAttention(8, 2, tie_qk=True, kdim=4)
    attn = KernelAttention(8, 2, batch_first=True)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match="is_causal=True but attn_mask is not the causal mask"):
        attn(x, x, x, attn_mask=torch.zeros(5, 5), is_causal=True)
    with pytest.raises(ValueError, match=r"2-d attn_mask must have shape \(L, S\)"):
        attn(x, x, x, attn_mask=torch.zeros(4, 5))
    with pytest.raises(TypeError, match="attn_mask must be bool .*or floating"):
        attn(x, x, x, attn_mask=torch.zeros(5, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(batch, S\)"):
        attn(x, x, x, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="must not contain NaN"):
        attn(x, x, x, key_padding_mask=torch.full((2, 5), float("nan")))
    with pytest.raises(ValueError, match="3-d .batched. or 2-d .unbatched. tensor"):
        attn(x[0, 0], x[0, 0], x[0, 0])
    with pytest.raises(ValueError, match="last dimension 8"):
        attn(x[..., :4], x, x)
    with pytest.raises(ValueError, match="equal query and key lengths"):
        attn(x, x[:, :3], x[:, :3], is_causal=True)
    q, k, v = _qkv(1, 4, 1, 4, 2, seed=0)
    with pytest.raises(ValueError, match="eps"):
        linear_attention(q, k, v, eps=-1)
    with pytest.raises(ValueError, match="chunk_size"):
        linear_attention(q, k, v, chunk_size=0)


def test_softmax_attention_scale_is_one_over_sqrt_d():
    q, k, v = _qkv(1, 5, 1, 9, 2, seed=4)
    w = torch.softmax(q[0, :, 0] @ k[0, :, 0].T / math.sqrt(9), dim=-1)
    assert torch.allclose(softmax_attention(q, k, v)[0, :, 0], w @ v[0, :, 0])


# -- the causal path (meanfield.attention.causal) -------------------------------------------


def _causal_reference(q, k, v, fm, mask=None):
    """float64 O(L^2) causal reference: log-kernel by logsumexp (no shift, no chunk, no
    overflow at any magnitude) for positive features, the plain kernel otherwise."""
    q, k, v = q.double(), k.double(), v.double()
    qf, kf = fm.transform(q), fm.transform(k)
    if fm.log_space:
        logits = torch.logsumexp(qf[:, :, None] + kf[:, None], dim=-1).permute(0, 3, 1, 2)
    else:
        logits = torch.einsum("blhm,bshm->bhls", qf, kf).log()
    L = q.shape[1]
    logits = logits.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
    if mask is not None:
        logits = logits.masked_fill(mask[:, None, None, :], float("-inf"))
    return torch.einsum("bhls,bshd->blhd", logits.softmax(-1), v)


@pytest.mark.parametrize("kind", FEATURE_KINDS)
@pytest.mark.parametrize("scale", [1.0, 8.0, 40.0])
def test_causal_float32_matches_reference_at_any_scale(kind, scale):
    """fp32 inputs of any magnitude: no overflow, no NaN, and the float64 reference values."""
    q, k, v = _qkv(2, 150, 2, 8, 4, seed=5, scale=scale, dtype=torch.float32)
    mask = torch.zeros(2, 150, dtype=torch.bool)
    mask[1, 120:] = True
    fm = make_feature_map(kind, 8, 16, seed=2)
    out = kernel_attention(q, k, v, fm, key_padding_mask=mask, causal=True, eps=0.0)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    ref = _causal_reference(q, k, v, fm, mask).float()
    # float32 log-features of size ~ scale carry absolute errors ~ scale * 2^-24 each
    torch.testing.assert_close(out, ref, atol=1e-5 * (1 + scale), rtol=1e-4)


@pytest.mark.parametrize("kind", ["favor", "porf"])
def test_causal_exact_fallback_agrees_with_the_fast_factorisation(kind, monkeypatch):
    """Chunks where a later key of the chunk dominates a query's visible terms by more than
    e^30 are recomputed in log space; forcing that path everywhere gives the same result,
    and extreme keys do trigger it."""
    import meanfield.attention.causal as causal

    q, k, v = _qkv(1, 100, 2, 8, 3, seed=6, dtype=torch.float32)
    fm = make_feature_map(kind, 8, 16, seed=0)
    calls = []
    orig = causal._exact_chunks

    def spy(zq, *a):
        calls.append(zq.shape[0])
        return orig(zq, *a)

    monkeypatch.setattr(causal, "_exact_chunks", spy)
    fast = kernel_attention(q, k, v, fm, causal=True, eps=0.0)
    assert calls == []  # ordinary inputs stay on the fast path
    monkeypatch.setattr(causal, "LOG_DEN_FLOOR", 80.0)  # every denominator is "too small"
    slow = kernel_attention(q, k, v, fm, causal=True, eps=0.0)
    assert calls[0] == 2 * 2  # both heads, both chunks of 64
    torch.testing.assert_close(slow, fast, atol=1e-6, rtol=1e-5)
    # the same through precomputed log-features (the fallback then keeps the shifted logs)
    via_features = linear_attention(
        fm.transform(q), fm.transform(k), v, causal=True, log_space=True, eps=0.0
    )
    torch.testing.assert_close(via_features, fast, atol=1e-6, rtol=1e-5)
    # and gradients through the fallback (float64, small)
    qd, kd, vd = (t[:, :9, :1, :4].double().requires_grad_() for t in (q, k, v))
    fm4 = make_feature_map(kind, 4, 6, seed=0).double()
    assert torch.autograd.gradcheck(
        lambda a, b, c: kernel_attention(a, b, c, fm4, causal=True, chunk_size=4), (qd, kd, vd)
    )
    monkeypatch.setattr(causal, "LOG_DEN_FLOOR", -30.0)
    calls.clear()
    # large-norm keys (tiny features) followed, in the same chunk, by a key on omega_0
    k2 = k * 12.0
    k2[0, 10, :, :] = fm.omega[0] * 8**0.25
    out = kernel_attention(q, k2, v, fm, causal=True, eps=0.0)
    assert calls and sum(calls) < 4  # only the affected chunk(s)
    torch.testing.assert_close(out, _causal_reference(q, k2, v, fm).float(), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_causal_outputs_do_not_depend_on_future_tokens(kind):
    """Perturbing tokens t+1.. (huge values, keys aligned with omega that raise every
    per-feature maximum) leaves outputs <= t unchanged to float32 rounding."""
    q, k, v = _qkv(1, 200, 2, 8, 4, seed=7, dtype=torch.float32)
    fm = make_feature_map(kind, 8, 16, seed=1)
    base = kernel_attention(q, k, v, fm, causal=True, chunk_size=64)
    for t in (0, 37, 63, 64, 130):
        q2, k2, v2 = q.clone(), k.clone(), v.clone()
        g = torch.Generator().manual_seed(t)
        q2[:, t + 1 :] = 1e3 * torch.randn(q2[:, t + 1 :].shape, generator=g)
        # a key at omega_j * d^(1/4) maximises feature j: a_j = |omega_j|^2 / 2
        rows = torch.arange(200 - t - 1) % fm.n_features
        k2[:, t + 1 :] = (8**0.25 * fm.omega[rows])[None, :, None, :]
        v2[:, t + 1 :] = 1e6
        out = kernel_attention(q2, k2, v2, fm, causal=True, chunk_size=64)
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out[:, : t + 1], base[:, : t + 1], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kind", ["favor", "porf-softplus", "softmaxfeat"])
def test_causal_gradients_match_finite_differences(kind):
    q, k, v = _qkv(1, 9, 1, 4, 2, seed=8)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    fm = make_feature_map(kind, 4, 6, seed=0).double()
    assert torch.autograd.gradcheck(
        lambda a, b, c: kernel_attention(a, b, c, fm, causal=True, chunk_size=4), (q, k, v)
    )


_PEAK_MEMORY_CHILD = """
import sys, torch
from meanfield.attention.features import make_feature_map
from meanfield.attention.linear import kernel_attention

def hwm():  # peak resident set (kB) since the last reset
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

kind, L = sys.argv[1], int(sys.argv[2])
g = torch.Generator().manual_seed(9)
q, k, v = (torch.randn(1, L, 1, n, generator=g) for n in (4, 4, 2))
fm = make_feature_map(kind, 4, 4, seed=0)
kernel_attention(q[:, :256], k[:, :256], v[:, :256], fm, causal=True)  # warm the allocator
open("/proc/self/clear_refs", "w").write("5")  # reset VmHWM to the current resident set
base = hwm()
out = kernel_attention(q, k, v, fm, causal=True)
assert out.shape == (1, L, 1, 2) and bool(torch.isfinite(out).all())
print(hwm() - base)
"""


@pytest.mark.slow
@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="peak-RSS reset needs Linux /proc"
)
def test_causal_memory_is_linear_in_length():
    """The peak memory of causal attention grows linearly in L, measured: L = 2^16, d = 4,
    m = 4, one head in float32, each call in a fresh process with its peak RSS reset just
    before it.  An L x L score matrix would be 16 GiB; the linear path holds O(L (m + d)) floats
    plus one C x C chunk block (C = 64) at a time: q, k, v, the features and the output are
    ~40 floats per token = 10 MiB at 2^16 (measured: 20 MiB).
    The budget, 64 MiB, is 6x that (allocator
    slack, the prefix-sum buffers) and 1/256 of the quadratic cost; from L = 2^12 to 2^16
    (16x) the growth must stay under 40x (quadratic: 256x), with 2 MiB of noise floor."""
    import subprocess
    import sys

    def peak_kib(kind, L):
        out = subprocess.run(
            [sys.executable, "-c", _PEAK_MEMORY_CHILD, kind, str(L)],
            capture_output=True, text=True, timeout=120, check=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )  # fmt: skip
        return int(out.stdout.split()[-1])

    for kind in ("favor", "softmaxfeat"):
        small, big = peak_kib(kind, 1 << 12), peak_kib(kind, 1 << 16)
        assert big < 64 * 1024, (kind, big)
        assert big < 40 * max(small, 2048), (kind, small, big)


def test_input_dtype_must_match_the_parameters_outside_autocast():
    """float16 / float64 input to a float32 module is refused with the dtypes named (it was a
    raw matmul traceback); under torch.autocast a bfloat16 input is what autocast expects."""
    from meanfield.errors import InputTypeError

    attn = KernelAttention(8, 2, feature="porf", n_features=8)
    x = torch.randn(2, 5, 8)
    for dt in (torch.float16, torch.float64):
        with pytest.raises(InputTypeError, match=f"query has dtype {dt}"):
            attn(x.to(dt), x.to(dt), x.to(dt))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        xb = x.bfloat16()
        out, _ = attn(xb, xb, xb)
    assert torch.isfinite(out).all()


# -- the chunked causal path against the direct masked O(L^2) computation ------------------


@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_causal_matches_masked_quadratic_for_any_chunk(kind):
    """float64, several chunks, chunk sizes that do not divide L (and one longer than L),
    padding inside and at the end: the chunked prefix sums equal the direct masked sum over
    the L x L kernel to float64 rounding (rtol 1e-10: a few hundred roundings of 1.1e-16)."""
    q, k, v = _qkv(2, 150, 3, 8, 5, seed=11)
    mask = torch.zeros(2, 150, dtype=torch.bool)
    mask[0, 40:47] = True  # padding inside a chunk
    mask[1, 120:] = True  # right padding
    fm = make_feature_map(kind, 8, 12, seed=4)
    ref = _direct(q, k, v, fm, mask, causal=True)
    for chunk in (1, 7, 13, 64, 149, 400):
        out = kernel_attention(
            q, k, v, fm, key_padding_mask=mask, causal=True, eps=0.0, chunk_size=chunk
        )
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
        # the same through precomputed features (linear_attention's own chunked path)
        lin = linear_attention(
            fm.transform(q), fm.transform(k), v, key_padding_mask=mask, causal=True,
            log_space=fm.log_space, eps=0.0, chunk_size=chunk,
        )  # fmt: skip
        torch.testing.assert_close(lin, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_causal_float32_close_to_float64(kind):
    """float32 against the float64 direct computation, L = 300 with chunks of 64: the error is
    rounding of O(m + C) float32 terms per output (2^-24 each, relative), so rtol 1e-4 with
    atol 1e-5 on values of order 1 holds with margin."""
    q, k, v = _qkv(1, 300, 2, 16, 4, seed=12)
    fm = make_feature_map(kind, 16, 32, seed=1)
    ref = _direct(q, k, v, fm, causal=True)
    out = kernel_attention(q.float(), k.float(), v.float(), fm, causal=True, eps=0.0)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref.float(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["favor", "porf"])
def test_causal_eps_is_relative_and_rows_without_keys_are_zero(kind):
    """For positive features eps is relative to K(q_t, k_t) <= the denominator, so it moves an
    output by a relative amount <= eps (here 1e-3), and a query that sees no real key (left
    padding) gets 0 instead of NaN."""
    q, k, v = _qkv(1, 90, 2, 8, 3, seed=13)
    mask = torch.zeros(1, 90, dtype=torch.bool)
    mask[0, :5] = True
    fm = make_feature_map(kind, 8, 16, seed=2)
    ref = kernel_attention(q, k, v, fm, key_padding_mask=mask, causal=True, eps=0.0)
    out = kernel_attention(q, k, v, fm, key_padding_mask=mask, causal=True, eps=1e-3)
    assert torch.equal(out[:, :5], torch.zeros_like(out[:, :5]))
    assert ref[:, :5].isnan().all()  # 0 / 0 without eps, as for a fully padded sequence
    rel = ((out[:, 5:] - ref[:, 5:]).abs() / ref[:, 5:].abs().clamp_min(1e-12)).max()
    assert 0 < rel <= 1e-3 * (1 + 1e-9)
    torch.testing.assert_close(out[:, 5:], _direct(q, k, v, fm, mask, True)[:, 5:], rtol=1e-3,
                               atol=0)  # fmt: skip


def test_causal_never_forms_a_length_by_length_tensor():
    """Record the shape of every tensor the causal path creates (a dispatch-mode hook): none
    has two dimensions of size >= L, and the largest grows linearly with L."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Shapes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.shapes = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            res = func(*args, **(kwargs or {}))
            for t in res if isinstance(res, tuple | list) else (res,):
                if torch.is_tensor(t):
                    self.shapes.append(tuple(t.shape))
            return res

    largest = {}
    for L in (1024, 2048):
        q, k, v = _qkv(1, L, 2, 8, 4, seed=14, dtype=torch.float32)
        for kind in FEATURE_KINDS:
            fm = make_feature_map(kind, 8, 8, seed=0)
            with torch.no_grad(), Shapes() as rec:
                kernel_attention(q, k, v, fm, causal=True, chunk_size=64)
            assert rec.shapes
            for shape in rec.shapes:
                assert sum(s >= L for s in shape) <= 1, (kind, L, shape)
            largest[kind, L] = max(math.prod(s) for s in rec.shapes)
    for kind in FEATURE_KINDS:
        assert largest[kind, 2048] <= 2 * largest[kind, 1024], kind


def test_bench_attention_peer_is_causal_favor():
    """The benchmark's plain chunked-cumsum peer computes the same causal FAVOR+ as ours (so
    the speed comparison is like for like), and the crossover rule is 'from there on'."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_attention.py"
    spec = importlib.util.spec_from_file_location("bench_attention", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.check_peer(torch.device("cpu")) < 1e-12
    assert bench.crossover([256, 512, 1024, 2048], [2.0, 0.8, 1.1, 0.7], [1] * 4) == 2048
    assert bench.crossover([256, 512], [2.0, 1.1], [1, 1]) is None
    assert bench.flop_ratio("favor", 64, 1024, causal=True) == pytest.approx(
        (2 * 64 * 64 + 2 * 64 * 65 + 64 * (64 + 65)) / (1024 * 64)
    )


# -- issue 24 item 9: the phi >= 0 precondition, zero keys, empty sequences ------------------


def test_linear_attention_refuses_negative_features_by_name():
    """phi >= 0 is checked (it was not: negative features gave outputs outside the range of
    the values); log-features may be negative; check_inputs=False skips the check."""
    from meanfield.errors import InputError

    g = torch.Generator().manual_seed(0)
    qf, kf = torch.rand(1, 5, 1, 3, generator=g), torch.rand(1, 5, 1, 3, generator=g)
    v = torch.rand(1, 5, 1, 2, generator=g)
    for name in ("q_features", "k_features"):
        args = {"q_features": qf, "k_features": kf, "v": v}
        args[name] = args[name].clone()
        args[name][0, 2, 0, 1] = -0.5
        for causal in (False, True):
            with pytest.raises(InputError, match=f"{name} has 1 negative entry .min -0.5."):
                linear_attention(**args, causal=causal)
        out = linear_attention(**args, check_inputs=False)  # the caller's responsibility
        assert out.shape == (1, 5, 1, 2)
    logs = -torch.rand(1, 5, 1, 3, generator=g)  # log-features: any sign
    out = linear_attention(logs, logs, v, log_space=True)
    assert bool((out >= v.min() - 1e-6).all() and (out <= v.max() + 1e-6).all())
    # -inf is a zero log-feature, +inf is refused
    klog = logs.clone()
    klog[0, 1, 0, :] = float("-inf")
    assert torch.isfinite(linear_attention(logs, klog, v, log_space=True, causal=True)).all()
    klog[0, 1, 0, 0] = float("inf")
    with pytest.raises(InputError, match="k_features has 1 non-finite entry"):
        linear_attention(logs, klog, v, log_space=True)
    with pytest.raises(TypeError, match="check_inputs must be True, False or None"):
        linear_attention(qf, kf, v, check_inputs=1)


def test_zero_keys_are_refused_and_empty_sequences_give_empty_results():
    """S = 0 with queries: a named error (was an IndexError); L = 0 (also the zero-length
    causal sequence): the empty (batch, 0, heads, d_v) result; m = 0: a named error."""
    from meanfield.errors import InputError, MeanfieldError

    fm = make_feature_map("favor", 4, 8, seed=0)
    r = torch.rand
    with pytest.raises(InputError, match=r"k_features has no keys \(S = 0\)"):
        linear_attention(r(1, 4, 1, 3), r(1, 0, 1, 3), r(1, 0, 1, 2))
    with pytest.raises(InputError, match=r"k has no keys \(S = 0\): attention of 3 queries"):
        kernel_attention(r(1, 3, 1, 4), r(1, 0, 1, 4), r(1, 0, 1, 2), fm)
    with pytest.raises(MeanfieldError, match=r"at least one feature \(m >= 1\)"):
        linear_attention(r(1, 2, 1, 0), r(1, 3, 1, 0), r(1, 3, 1, 2))
    for causal in (False, True):
        for log_space in (False, True):
            out = linear_attention(
                r(2, 0, 3, 5), r(2, 0, 3, 5), r(2, 0, 3, 4), causal=causal, log_space=log_space
            )
            assert out.shape == (2, 0, 3, 4)
        out = kernel_attention(r(2, 0, 3, 4), r(2, 0, 3, 4), r(2, 0, 3, 6).double(), fm,
                               causal=causal)  # fmt: skip
        assert out.shape == (2, 0, 3, 6) and out.dtype == torch.float64
    assert linear_attention(r(1, 0, 1, 3), r(1, 4, 1, 3), r(1, 4, 1, 2)).shape == (1, 0, 1, 2)


@pytest.mark.parametrize("causal", [False, True])
def test_kernel_attention_names_a_non_finite_input_checked_on_the_result(causal):
    """On the CPU the finiteness check of kernel_attention is made on the result (its small
    state and denominators); a NaN or inf in any input still reaches it and is named."""
    from meanfield.errors import InputError

    fm = make_feature_map("porf", 8, 16, seed=0)
    for kind in ("porf", "porf-softplus", "softmaxfeat"):
        fm = make_feature_map(kind, 8, 16, seed=0)
        for name, bad in (("q", float("nan")), ("k", float("inf")), ("v", float("-inf"))):
            x = dict(zip("qkv", _qkv(2, 70, 2, 8, 8, seed=3, dtype=torch.float32), strict=True))
            x[name][1, 66, 1, 3] = bad
            with pytest.raises(InputError, match=f"^{name} has 1 non-finite entry"):
                kernel_attention(x["q"], x["k"], x["v"], fm, causal=causal)
            with pytest.raises(InputError, match=f"^{name} has 1 non-finite entry"):
                kernel_attention(x["q"], x["k"], x["v"], fm, causal=causal, check_inputs=True)
            out = kernel_attention(x["q"], x["k"], x["v"], fm, causal=causal, check_inputs=False)
            assert not torch.isfinite(out).all()


def test_value_checks_run_where_they_are_cheap():
    """On the CPU by default, never under check_inputs=False; elsewhere only when asked
    (an accelerator would synchronise: here a meta tensor stands in for one)."""
    from meanfield.attention.linear import _checks_on

    cpu, meta = torch.zeros(1), torch.zeros(1, device="meta")
    assert _checks_on(cpu, None) and _checks_on(cpu, True) and not _checks_on(cpu, False)
    assert not _checks_on(meta, None) and _checks_on(meta, True)


# -- issue 23 item 4: the bidirectional positive-feature path ---------------------------------


@pytest.mark.parametrize("kind", ["favor", "porf"])
@pytest.mark.parametrize("scale", [1.0, 40.0])
def test_bidirectional_positive_features_match_log_space_reference(kind, scale):
    """float32 inputs of any magnitude: no overflow and the float64 logsumexp reference
    (the in-place path without the constants that cancel), with padding."""
    q, k, v = _qkv(2, 90, 2, 8, 4, seed=15, scale=scale, dtype=torch.float32)
    mask = torch.zeros(2, 90, dtype=torch.bool)
    mask[1, 60:] = True
    fm = make_feature_map(kind, 8, 16, seed=2)
    out = kernel_attention(q, k, v, fm, key_padding_mask=mask, eps=0.0)
    qf, kf = fm.transform(q.double()), fm.transform(k.double())
    logits = torch.logsumexp(qf[:, :, None] + kf[:, None], dim=-1).permute(0, 3, 1, 2)
    logits = logits.masked_fill(mask[:, None, None, :], float("-inf"))
    ref = torch.einsum("bhls,bshd->blhd", logits.softmax(-1), v.double()).float()
    torch.testing.assert_close(out, ref, atol=1e-5 * (1 + scale), rtol=1e-4)


@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_bidirectional_gradients_match_finite_differences(kind):
    q, k, v = _qkv(1, 7, 1, 4, 2, seed=16)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    mask = torch.tensor([[False] * 5 + [True] * 2])
    fm = make_feature_map(kind, 4, 6, seed=0).double()
    assert torch.autograd.gradcheck(
        lambda a, b, c: kernel_attention(a, b, c, fm, key_padding_mask=mask), (q, k, v)
    )


# -- issues 20, 23 item 2: batched prefix states, device-side repair, torch.compile -----------


@pytest.fixture(params=["loop", "batched"])
def scan(request, monkeypatch):
    """Both formulations of the causal prefix states on the CPU (batched is the accelerator
    and torch.compile default), with the device-side underflow repair for "batched"."""
    import meanfield.attention.causal as causal

    monkeypatch.setattr(causal, "_SCAN", request.param)
    if request.param == "batched":  # every flagged chunk repaired, as the host read does
        monkeypatch.setattr(causal, "_REPAIR", "device")
        monkeypatch.setattr(causal, "_REPAIR_SHARE", 1)
    return request.param


@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_batched_scan_matches_masked_quadratic(kind, scan):
    """The chunked scan (cumsum over chunks; the log-depth level scan for positive
    features) equals the direct masked O(L^2) sum to 1e-10 in float64, every chunk size."""
    q, k, v = _qkv(2, 150, 3, 8, 5, seed=11)
    mask = torch.zeros(2, 150, dtype=torch.bool)
    mask[0, 40:47] = True
    mask[1, 120:] = True
    mask[1, :3] = True  # left padding: features that have seen no key yet
    fm = make_feature_map(kind, 8, 12, seed=4)
    ref = _direct(q, k, v, fm, mask, causal=True)
    for chunk in (1, 2, 7, 13, 64, 149, 400):
        out = kernel_attention(
            q, k, v, fm, key_padding_mask=mask, causal=True, eps=0.0, chunk_size=chunk
        )
        torch.testing.assert_close(out[1, 3:], ref[1, 3:], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(out[0], ref[0], rtol=1e-10, atol=1e-12)
        lin = linear_attention(
            fm.transform(q), fm.transform(k), v, key_padding_mask=mask, causal=True,
            log_space=fm.log_space, eps=0.0, chunk_size=chunk,
        )  # fmt: skip
        torch.testing.assert_close(lin[0], ref[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("scale", [1.0, 40.0])
def test_batched_scan_float32_at_any_scale_and_without_future_leakage(scale, scan):
    """float32, keys of any magnitude (per-feature maxima that grow over the chunks by far
    more than float32's exponent range): finite, the float64 reference, no future leakage."""
    q, k, v = _qkv(1, 300, 2, 8, 4, seed=5, scale=scale, dtype=torch.float32)
    for kind in ("favor", "softmaxfeat"):
        fm = make_feature_map(kind, 8, 16, seed=2)
        out = kernel_attention(q, k, v, fm, causal=True, eps=0.0, chunk_size=16)
        ref = _causal_reference(q, k, v, fm).float()
        torch.testing.assert_close(out, ref, atol=1e-5 * (1 + scale), rtol=1e-4)
        k2, v2 = k.clone(), v.clone()
        k2[:, 101:] = 8**0.25 * fm.omega[0]  # raises every later maximum of feature 0
        v2[:, 101:] = 1e6
        out2 = kernel_attention(q, k2, v2, fm, causal=True, eps=0.0, chunk_size=16)
        torch.testing.assert_close(out2[:, :101], out[:, :101], atol=1e-6, rtol=1e-5)


def test_batched_scan_gradients_match_finite_differences(scan):
    q, k, v = _qkv(1, 9, 1, 4, 2, seed=8)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    for kind in ("favor", "porf-softplus"):
        fm = make_feature_map(kind, 4, 6, seed=0).double()
        assert torch.autograd.gradcheck(
            lambda a, b, c, fm=fm: kernel_attention(a, b, c, fm, causal=True, chunk_size=2),
            (q, k, v),
        )


def test_device_side_repair_needs_no_host_read(monkeypatch):
    """The accelerator's underflow repair (forced here on the CPU) picks its chunks on the
    device: with a share of every chunk it equals the host-read repair when every chunk is
    flagged, and the float64 reference where a later key of a chunk dominates; flagged
    chunks beyond the share come out NaN (loud), not silently imprecise."""
    import meanfield.attention.causal as causal

    q, k, v = _qkv(1, 100, 2, 8, 3, seed=6, dtype=torch.float32)
    fm = make_feature_map("favor", 8, 16, seed=0)
    k2 = k * 12.0
    k2[0, 10, :, :] = fm.omega[0] * 8**0.25  # one chunk needs the exact recomputation

    def no_host_read(self):
        raise AssertionError("host read in the device-side repair")

    def run(keys, **settings):
        with monkeypatch.context() as mp:
            mp.setattr(causal, "_REPAIR", "device")
            for name, value in settings.items():
                mp.setattr(causal, name, value)
            mp.setattr(torch.Tensor, "__bool__", no_host_read)
            mp.setattr(torch.Tensor, "item", no_host_read)
            return kernel_attention(q, keys, v, fm, causal=True, eps=0.0, check_inputs=False)

    fast = kernel_attention(q, k, v, fm, causal=True, eps=0.0)
    every = run(k, LOG_DEN_FLOOR=80.0, _REPAIR_SHARE=1)  # every chunk flagged and repaired
    torch.testing.assert_close(every, fast, atol=1e-6, rtol=1e-5)
    out = run(k2, _REPAIR_SHARE=1)
    torch.testing.assert_close(out, _causal_reference(q, k2, v, fm).float(), atol=2e-5, rtol=1e-4)
    partly = run(k, LOG_DEN_FLOOR=80.0, _REPAIR_SHARE=2, _REPAIR_MIN_CHUNKS=1)  # 2 of 4
    rows = partly.isnan().all(-1)  # (1, L, heads)
    assert 0 < int(rows.sum()) < rows.numel()
    torch.testing.assert_close(partly[~rows], fast[~rows], atol=1e-6, rtol=1e-5)
    # gradients through the device-side repair (float64, every chunk flagged, with padding)
    qd, kd, vd = (t[:, :9, :1, :4].double().requires_grad_() for t in (q, k, v))
    fm4 = make_feature_map("favor", 4, 6, seed=0).double()
    pad = torch.tensor([[True] + [False] * 7 + [True]])
    with monkeypatch.context() as mp:
        mp.setattr(causal, "_REPAIR", "device")
        mp.setattr(causal, "LOG_DEN_FLOOR", 80.0)
        mp.setattr(causal, "_REPAIR_SHARE", 1)
        assert torch.autograd.gradcheck(
            lambda a, b, c: kernel_attention(
                a, b, c, fm4, causal=True, chunk_size=4, key_padding_mask=pad, eps=1e-3
            ),
            (qd, kd, vd),
        )


def test_causal_path_compiles_without_graph_breaks():
    """torch.compile(fullgraph=False) of the causal path: zero graph breaks (dynamo's
    explain; it broke 6-9 times on 4 chunks: out= on chunk views, the host read of the
    underflow flag), for linear_attention (features, log-features, padding) and
    kernel_attention (every map); and the aot_eager compile gives the eager result, also
    where the underflow repair (torch.cond) is taken."""
    import torch._dynamo as dynamo

    q, k, v = _qkv(1, 16, 2, 8, 3, seed=17, dtype=torch.float32)
    mask = torch.zeros(1, 16, dtype=torch.bool)
    mask[0, 12:] = True
    fms = {kind: make_feature_map(kind, 8, 8, seed=0) for kind in FEATURE_KINDS}
    calls = {
        "linear": lambda a, b, c: linear_attention(a.exp(), b.exp(), c, causal=True, chunk_size=4),
        "linear-log": lambda a, b, c: linear_attention(
            a, b, c, causal=True, log_space=True, chunk_size=4, key_padding_mask=mask
        ),
    }
    for kind, fm in fms.items():
        calls[kind] = lambda a, b, c, fm=fm: kernel_attention(
            a, b, c, fm, causal=True, chunk_size=4, key_padding_mask=mask
        )
    for name, fn in calls.items():
        dynamo.reset()
        assert dynamo.explain(fn)(q, k, v).graph_break_count == 0, name
    dynamo.reset()
    fm = fms["favor"]
    compiled = torch.compile(calls["favor"], backend="aot_eager")
    k2 = k * 12.0
    k2[0, 5, :, :] = fm.omega[0] * 8**0.25  # a chunk that needs the exact recomputation
    for keys in (k, k2):
        torch.testing.assert_close(compiled(q, keys, v), calls["favor"](q, keys, v))
    dynamo.reset()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning")  # inductor's own deprecations
@pytest.mark.skipif(
    not any(__import__("shutil").which(cc) for cc in ("g++", "c++", "clang++")),
    reason="inductor on the CPU needs a C++ compiler",
)
def test_causal_path_compiles_with_inductor():
    """torch.compile (inductor) of causal FAVOR+ with padding gives the eager result, also
    where the underflow repair (torch.cond) is taken (about 15 s of compilation). It failed
    before on any causal positive-feature call: inductor's CPU code for F.pad of a bool
    tensor does not compile (torch 2.13)."""
    import torch._dynamo as dynamo

    q, k, v = _qkv(1, 100, 2, 8, 3, seed=6, dtype=torch.float32)
    mask = torch.zeros(1, 100, dtype=torch.bool)
    mask[0, :3] = True
    mask[0, 90:] = True
    fm = make_feature_map("favor", 8, 16, seed=0)
    k2 = k * 12.0
    k2[0, 10, :, :] = fm.omega[0] * 8**0.25  # a chunk that needs the exact recomputation

    def fn(a, b, c):
        return kernel_attention(a, b, c, fm, causal=True, key_padding_mask=mask)

    dynamo.reset()
    compiled = torch.compile(fn)
    for keys in (k, k2):
        torch.testing.assert_close(compiled(q, keys, v), fn(q, keys, v), atol=1e-6, rtol=1e-5)
    dynamo.reset()


# -- on a CUDA device (benchmarks/gpu_check.sh runs these; skipped without one) ---------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_cuda_attention_matches_cpu_without_host_synchronisation(kind, monkeypatch):
    """Causal and bidirectional kernel_attention (and linear_attention) on CUDA: no host
    synchronisation (torch's sync debug mode turns one into an error) and the CPU result,
    also with padding and where the underflow repair is needed (device-side, every flagged
    chunk: share 1)."""
    import meanfield.attention.causal as causal_mod

    monkeypatch.setattr(causal_mod, "_REPAIR_SHARE", 1)
    q, k, v = _qkv(2, 300, 2, 8, 4, seed=18, dtype=torch.float32)
    mask = torch.zeros(2, 300, dtype=torch.bool)
    mask[1, 250:] = True
    fm = make_feature_map(kind, 8, 16, seed=0)
    k2 = k * 12.0
    k2[0, 70] = fm.omega[0] * 8**0.25  # a later key that dominates its chunk
    fmc = make_feature_map(kind, 8, 16, seed=0).cuda()
    for keys in (k, k2):
        for causal in (False, True):
            ref = kernel_attention(q, keys, v, fm, key_padding_mask=mask, causal=causal)
            args = [t.cuda() for t in (q, keys, v)]
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                out = kernel_attention(*args, fmc, key_padding_mask=mask.cuda(), causal=causal)
                lin = linear_attention(
                    fmc.transform(args[0]), fmc.transform(args[1]), args[2], causal=causal,
                    log_space=fmc.log_space, key_padding_mask=mask.cuda(),
                )  # fmt: skip
            finally:
                torch.cuda.set_sync_debug_mode("default")
            torch.testing.assert_close(out.cpu(), ref, atol=2e-5, rtol=1e-4)
            torch.testing.assert_close(lin.cpu(), ref, atol=2e-5, rtol=1e-4)


@pytest.mark.cuda
@needs_cuda
def test_cuda_causal_path_compiles_without_graph_breaks():
    import torch._dynamo as dynamo

    q, k, v = (t.cuda() for t in _qkv(1, 256, 2, 8, 4, seed=19, dtype=torch.float32))
    for kind in FEATURE_KINDS:
        fm = make_feature_map(kind, 8, 16, seed=0).cuda()
        dynamo.reset()
        fn = lambda a, b, c, fm=fm: kernel_attention(a, b, c, fm, causal=True)  # noqa: E731
        assert dynamo.explain(fn)(q, k, v).graph_break_count == 0, kind
    dynamo.reset()
