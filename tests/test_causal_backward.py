"""The backward of causal kernel attention (meanfield.attention.causal): exact and linear in L.

Truths: the quadratic masked form (softmax-free kernel attention with an explicit
lower-triangular mask, dense, float64) differentiated by autograd; finite differences
(torch.autograd.gradcheck); and the recorded (autograd) path of the module against its
streamed path with the hand-written reverse scan.
"""

import math

import pytest
import torch

import meanfield.attention.causal as causal
from meanfield.attention.features import FEATURE_KINDS, make_feature_map
from meanfield.attention.linear import kernel_attention, linear_attention


@pytest.fixture(autouse=True)
def _one_thread():
    # small tensors: a second thread only adds synchronisation on the shared machine
    torch.set_num_threads(1)
    yield


def _qkv(b, L, h, d, dv, seed, scale=1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, L, h, d, generator=g, dtype=dtype) * scale
    k = torch.randn(b, L, h, d, generator=g, dtype=dtype) * scale
    v = torch.randn(b, L, h, dv, generator=g, dtype=dtype)
    return q, k, v


def _dense(q, k, v, fm, mask=None, eps=0.0):
    """The quadratic masked form in float64: ``A = tril(phi(Q) phi(K)^T)`` from the unshifted
    features, padding keys zeroed, ``out = A V / (A 1 + eps A_tt)``; differentiable."""
    q, k, v = q.double(), k.double(), v.double()
    A = torch.einsum("blhm,bshm->bhls", fm.raw_features(q), fm.raw_features(k))
    L = q.shape[1]
    A = A * torch.ones(L, L, dtype=A.dtype).tril()
    if mask is not None:
        A = A.masked_fill(mask[:, None, None, :], 0.0)
    self_k = torch.diagonal(A, dim1=-2, dim2=-1)  # 0 where the query's own key is padding
    den = A.sum(-1) + eps * self_k
    return torch.einsum("bhls,bshd->blhd", A, v) / den.transpose(1, 2)[..., None]


def _grads(fn, q, k, v, w):
    """Output and the gradients of ``sum(out * w)`` w.r.t. q, k, v (fresh leaves)."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = fn(*leaves)
    (out * w).sum().backward()
    return [out.detach()] + [t.grad for t in leaves]


class _Spy:
    """Counts the calls of the streamed path's forward (is it the path taken?)."""

    def __init__(self, monkeypatch):
        self.calls = 0
        orig = causal._StreamedPositive.forward

        def forward(ctx, *args):
            self.calls += 1
            return orig(ctx, *args)

        monkeypatch.setattr(causal._StreamedPositive, "forward", staticmethod(forward))


@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_gradients_match_the_dense_masked_form_for_every_chunk(kind, monkeypatch):
    """float64, L = 150, padding inside and at the end, eps > 0: values and gradients of the
    chunked form equal those of the dense masked form for chunk sizes 1, 4, 64 and L to
    float64 rounding (rtol 1e-9: the sums have ~L m terms of relative error 1e-16 each, and
    the gradient of a ratio roughly doubles it). Positive features take the streamed path."""
    spy = _Spy(monkeypatch)
    q, k, v = _qkv(2, 150, 2, 8, 5, seed=21)
    mask = torch.zeros(2, 150, dtype=torch.bool)
    mask[0, 40:47] = True
    mask[1, 120:] = True
    fm = make_feature_map(kind, 8, 12, seed=4).double()
    w = torch.randn(2, 150, 2, 5, generator=torch.Generator().manual_seed(0), dtype=q.dtype)
    eps = 1e-3
    if not fm.log_space:  # eps is absolute in the units of phi (porf-softplus: of softplus)
        eps = 0.0
    ref = _grads(lambda a, b, c: _dense(a, b, c, fm, mask, eps), q, k, v, w)
    for chunk in (1, 4, 64, 150):
        got = _grads(
            lambda a, b, c, chunk=chunk: kernel_attention(
                a, b, c, fm, key_padding_mask=mask, causal=True, eps=eps, chunk_size=chunk
            ),
            q, k, v, w,
        )  # fmt: skip
        for name, x, y in zip(("out", "dq", "dk", "dv"), got, ref, strict=True):
            torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12, msg=f"{kind} C={chunk} {name}")
    assert spy.calls == (4 if fm.log_space else 0)


@pytest.mark.parametrize("kind", ["favor", "porf"])
@pytest.mark.parametrize("chunk", [1, 4, 9])
def test_streamed_backward_passes_gradcheck(kind, chunk):
    """Finite differences (float64): q, k, v and Omega, with left, inner and right padding and a
    relative eps; chunk 9 = L (one chunk), 4 (a partial last chunk), 1."""
    q, k, v = _qkv(2, 9, 2, 4, 2, seed=22)
    pad = torch.tensor([[True, False, False, True] + [False] * 5, [False] * 7 + [True] * 2])
    fm = make_feature_map(kind, 4, 6, seed=0).double()
    om = fm.omega.clone().requires_grad_()

    def fn(a, b, c, o):
        fm.omega = o
        return kernel_attention(
            a, b, c, fm, causal=True, chunk_size=chunk, key_padding_mask=pad, eps=1e-3
        )

    args = tuple(t.clone().requires_grad_() for t in (q, k, v)) + (om,)
    assert torch.autograd.gradcheck(fn, args)


def test_streamed_backward_for_a_subset_of_the_inputs():
    """Gradients asked for some inputs only (values alone; Omega alone): finite differences,
    and the streamed path is the one taken."""
    q, k, v = _qkv(1, 10, 2, 4, 3, seed=29)
    fm = make_feature_map("favor", 4, 6, seed=0).double()
    om = fm.omega.clone().requires_grad_()

    def with_omega(o):
        fm.omega = o
        return kernel_attention(q, k, v, fm, causal=True, chunk_size=4, eps=1e-3)

    assert torch.autograd.gradcheck(with_omega, (om,))
    fm.omega = om.detach()
    vg = v.clone().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda c: kernel_attention(q, k, c, fm, causal=True, chunk_size=3), (vg,)
    )
    assert causal._streamed(q, k, vg, fm.omega)


def test_chunk_sizes_agree_in_float32_and_group_boundaries_do_not_matter(monkeypatch):
    """float32, L = 200: the gradients for chunks of 1, 4, 64 and L agree with the float64
    dense form within float32 rounding of O(m + C) terms (rtol 1e-4, atol 1e-5 on values and
    gradients of order 1), whatever the number of chunks per streamed group (1, 3, all)."""
    q, k, v = _qkv(1, 200, 2, 8, 4, seed=23, dtype=torch.float32)
    fm = make_feature_map("porf", 8, 16, seed=1)
    w = torch.randn(1, 200, 2, 4, generator=torch.Generator().manual_seed(1))
    ref = _grads(lambda a, b, c: _dense(a, b, c, fm, eps=1e-6), q, k, v, w.double())
    for elements in (1, 3 * 2 * 4 * 16, 1 << 30):  # B = 2, m = 16: 1 or 3 chunks of 4
        monkeypatch.setattr(causal, "_GROUP_ELEMENTS", elements)
        for chunk in (1, 4, 64, 200):
            got = _grads(
                lambda a, b, c, chunk=chunk: kernel_attention(
                    a, b, c, fm, causal=True, eps=1e-6, chunk_size=chunk
                ),
                q, k, v, w,
            )  # fmt: skip
            for x, y in zip(got, ref, strict=True):
                assert x.dtype == torch.float32
                torch.testing.assert_close(x, y.float(), rtol=1e-4, atol=1e-5)


def test_float32_gradients_at_large_logits_match_the_log_space_reference():
    """Inputs of norm ~ 8 sqrt(d): features span far more than float32's exponent range; the
    shifts keep every factor <= 1, and the gradients equal those of the float64 reference
    computed in log space (logsumexp kernel, masked softmax) -- tolerance from float32
    log-features of size ~scale^2 carrying absolute errors ~ scale^2 * 2^-24 each."""
    scale = 8.0
    q, k, v = _qkv(1, 130, 2, 8, 3, seed=24, scale=scale, dtype=torch.float32)
    fm = make_feature_map("favor", 8, 16, seed=2)
    w = torch.randn(1, 130, 2, 3, generator=torch.Generator().manual_seed(2))

    def reference(a, b, c):
        qf, kf = fm.transform(a.double()), fm.transform(b.double())
        logits = torch.logsumexp(qf[:, :, None] + kf[:, None], dim=-1).permute(0, 3, 1, 2)
        L = a.shape[1]
        logits = logits.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
        return torch.einsum("bhls,bshd->blhd", logits.softmax(-1), c.double())

    ref = _grads(reference, q.double(), k.double(), v.double(), w.double())
    got = _grads(lambda a, b, c: kernel_attention(a, b, c, fm, causal=True, eps=0.0), q, k, v, w)
    assert all(bool(torch.isfinite(x).all()) for x in got)
    for x, y in zip(got, ref, strict=True):
        torch.testing.assert_close(x, y.float(), rtol=1e-3, atol=1e-4 * scale**2)


def test_underflowing_chunk_falls_back_to_the_exact_recorded_path(monkeypatch):
    """A later key of a chunk dominating the visible terms by more than e^30: the streamed
    forward flags the chunk and the recorded path (with its exact log-space recomputation)
    gives the output and the gradients of the float64 log-space reference."""
    spy = _Spy(monkeypatch)
    exact = []
    orig = causal._exact_chunks
    monkeypatch.setattr(causal, "_exact_chunks", lambda *a: exact.append(1) or orig(*a))
    q, k, v = _qkv(1, 100, 2, 8, 3, seed=6)
    fm = make_feature_map("favor", 8, 16, seed=0).double()
    k = k * 12.0
    k[0, 10, :, :] = fm.omega[0] * 8**0.25  # dominates the keys 0..9 of its chunk
    w = torch.randn(1, 100, 2, 3, generator=torch.Generator().manual_seed(3), dtype=q.dtype)

    def reference(a, b, c):
        qf, kf = fm.transform(a), fm.transform(b)
        logits = torch.logsumexp(qf[:, :, None] + kf[:, None], dim=-1).permute(0, 3, 1, 2)
        logits = logits.masked_fill(torch.ones(100, 100, dtype=torch.bool).triu(1), -math.inf)
        return torch.einsum("bhls,bshd->blhd", logits.softmax(-1), c)

    ref = _grads(reference, q, k, v, w)
    got = _grads(lambda a, b, c: kernel_attention(a, b, c, fm, causal=True, eps=0.0), q, k, v, w)
    assert spy.calls == 1 and exact  # the streamed pass flagged it, the recorded path fixed it
    for x, y in zip(got, ref, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("with_decay", [False, True])
def test_prefix_scan_backward_is_the_reverse_scan(with_decay):
    """The prefix states' custom backward against finite differences (float64), with decays
    in (0, 1] and a first decay of 0 (no key seen yet), as the positive-feature path has."""
    g = torch.Generator().manual_seed(25)
    kv = torch.randn(2, 5, 3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    decay = None
    if with_decay:
        decay = torch.rand(2, 5, 3, 1, generator=g, dtype=torch.float64)
        decay[:, 0] = 0.0
    assert torch.autograd.gradcheck(lambda x: causal._PrefixScan.apply(x, decay), (kv,))
    # and the same values as the formula S_0 = 0, S_i = (S_(i-1) + kv_(i-1)) d_i
    S = causal._PrefixScan.apply(kv, decay)
    s = torch.zeros_like(kv[:, 0])
    for i in range(1, 5):
        s = s + kv[:, i - 1] if decay is None else (s + kv[:, i - 1]) * decay[:, i]
        torch.testing.assert_close(S[:, i], s, rtol=1e-14, atol=1e-14)


def test_precomputed_features_gradients_match_the_dense_form():
    """linear_attention's causal path (features given, the recorded path with the reverse
    scan): gradients w.r.t. the features and values equal the dense masked form's."""
    g = torch.Generator().manual_seed(26)
    qf = torch.rand(1, 70, 2, 6, generator=g, dtype=torch.float64)
    kf = torch.rand(1, 70, 2, 6, generator=g, dtype=torch.float64)
    v = torch.randn(1, 70, 2, 3, generator=g, dtype=torch.float64)
    w = torch.randn(1, 70, 2, 3, generator=g, dtype=torch.float64)

    def dense(a, b, c):
        A = torch.einsum("blhm,bshm->bhls", a, b).tril()
        return torch.einsum("bhls,bshd->blhd", A, c) / A.sum(-1).transpose(1, 2)[..., None]

    ref = _grads(dense, qf, kf, v, w)
    for chunk in (1, 4, 70):
        got = _grads(
            lambda a, b, c, chunk=chunk: linear_attention(
                a, b, c, causal=True, eps=0.0, chunk_size=chunk
            ),
            qf, kf, v, w,
        )  # fmt: skip
        for x, y in zip(got, ref, strict=True):
            torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-12)


def test_streamed_forward_keeps_only_the_inputs_for_the_backward():
    """What autograd keeps after the forward (saved-tensor hooks): the streamed path saves
    q, k, v and Omega only -- no features, no chunk states, nothing of size L m (its
    checkpoints are one (m, d_v + 1) state per group)."""
    q, k, v = (t.requires_grad_() for t in _qkv(1, 512, 2, 8, 4, seed=27, dtype=torch.float32))
    fm = make_feature_map("favor", 8, 64, seed=0)
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = kernel_attention(q, k, v, fm, causal=True)
    inputs = q.numel() + k.numel() + v.numel() + fm.omega.numel()
    kept = [n for n in saved if n > 1]  # (torch saves the scalar of Omega's scaling too)
    assert out.requires_grad and 0 < sum(kept) <= inputs
    assert max(saved) < 512 * 2 * 64  # below one (L, heads, m) feature tensor


@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_work_of_forward_and_backward_grows_linearly_in_length(kind):
    """Elements written by every operation of forward + backward (a dispatch-mode count,
    no clock): from L = 512 to 2048 (4x) the count grows by less than 4.4x. The recorded loop
    wrote a full (chunks, m, d_v + 1) zero gradient per chunk in the backward: n^2 growth,
    16x here, where it dominated."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Written(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.elements = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            res = func(*args, **(kwargs or {}))
            for t in res if isinstance(res, tuple | list) else (res,):
                if torch.is_tensor(t):
                    self.elements += t.numel()
            return res

    fm = make_feature_map(kind, 8, 32, seed=0)
    counts = []
    for L in (512, 2048):
        q, k, v = (t.requires_grad_() for t in _qkv(1, L, 2, 8, 8, seed=28, dtype=torch.float32))
        with Written() as rec:
            kernel_attention(q, k, v, fm, causal=True, chunk_size=16).sum().backward()
        counts.append(rec.elements)
    assert counts[1] < 4.4 * counts[0], counts


def test_benchmark_script_times_every_operation():
    """Smoke run of benchmarks/bench_causal_backward.py on tiny sizes (no memory children):
    every operation timed at every L, and its causal step computes a gradient."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_causal_backward.py"
    spec = importlib.util.spec_from_file_location("bench_causal_backward", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.time_lengths([64, 128], m=8, heads=1, repeats=1)
    assert [r["L"] for r in rows] == [64, 128]
    for r in rows:
        assert set(r["cpu_s"]) == set(bench.OPS) and all(t >= 0 for t in r["wall_s"].values())
    lines = []
    bench.table(rows, "wall_s", list(bench.OPS), out=lines.append)
    assert any(line.strip().startswith("t(128)/t(64)") for line in lines)
    step, fwd = bench.make_step("causal", 64, 8, 1)
    assert fwd().shape == (1, 64, 1, bench.HEAD_DIM)
    # the previous code path (timed on request) computes the same, and is undone after use
    _, previous = bench.make_step("previous", 64, 8, 1)
    torch.testing.assert_close(previous(), fwd())
    assert causal._streamed.__name__ == "_streamed"
    assert causal._PrefixScan.apply.__name__ == "apply"
