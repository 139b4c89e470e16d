"""Causal linear attention by chunked prefix sums: exact, O(L) memory, no future leakage.

For a query ``t`` causal linear attention needs the prefix sums over keys ``s <= t``::

    num_t = phi(q_t) . sum_{s<=t} phi(k_s) v_s^T,      den_t = phi(q_t) . sum_{s<=t} phi(k_s)

The sequence is cut into chunks of ``C`` tokens and everything is a handful of batched
matrix products over *all* chunks at once (block matrix form of the prefix sums):

* inside chunk ``n``: the ``C x C`` block ``phi(Q_n) phi(K_n)^T``, lower triangle kept,
  times ``[V_n, 1]`` (a column of ones carries the denominator through the same product);
* across chunks: ``phi(Q_n) S_n`` with the running ``(m, d_v + 1)`` state
  ``S_n = sum_{i<n} phi(K_i)^T [V_i, 1]`` -- per-chunk products ``phi(K_i)^T [V_i, 1]`` and an
  exclusive cumulative sum over chunks: on an accelerator and under ``torch.compile`` one
  ``torch.cumsum`` (a log-depth scan of ``ceil(log2 n)`` batched steps for the rescaled
  states of positive features, below); on the CPU in eager mode a loop of one or two small
  operations per chunk, which is faster there (``torch.cumsum`` along the chunk axis runs
  3-7 times slower than the whole loop; ``benchmarks/bench_attention.py --section scan``).

Time ``L (2 m d_h + 2 m (d_v + 1) + C (m + d_v + 1))`` multiply-adds per head (features, state,
in-chunk block; causal SDPA does ``L^2 d_h`` in total), memory ``O(L (m + C + m d_v / C))``.

Positive random features (FAVOR+, PORF) are ``exp(a_j(x))`` and ``exp`` overflows float32 for
large inputs, so they are exponentiated with shifts that cancel exactly:

* keys of chunk ``n`` with ``P_nj``, the largest key log-feature ``a_j`` over chunks
  ``0..n``: ``exp(a_j(k_s) - P_nj) <= 1``;
* queries of chunk ``n`` with ``P_nj`` added back and their own ``c_t = max_j (u_j(q_t) +
  P_nj)`` subtracted: ``exp(u_j(q_t) + P_nj - c_t) <= 1`` (``u`` is ``a`` without the
  per-query constant ``-|q~|^2/2 - log(m)/2``, which cancels like ``c_t``);
* the state before chunk ``n`` in units of ``exp(-P_nj)``, rescaled per feature as the
  maxima grow, ``S_n = (S_(n-1) + phi(K_(n-1))^T [V_(n-1), 1]) exp(P_(n-1) - P_n)`` (online
  softmax, per feature). Batched, the same sum ``S_n = sum_(i<n) phi(K_i)^T [V_i, 1]
  exp(P_i - P_n)`` is a scan whose step of stride ``s`` adds the partial sum ending at chunk
  ``i - s`` times ``exp(P_(i-s) - P_i) <= 1``: every factor at most 1, as in the loop.

*Exactness (the shifts cancel).* Every term of query ``t`` is ``exp(u_j(q_t) + a_j(k_s) -
c_t)`` times ``v_s``: ``P_nj`` enters once with each sign, and the per-query ``c_t`` multiplies
numerator and denominator alike. *No overflow:* every factor is at most 1. *Underflow:* the
shifts are chunk-wide, so a later key of the same chunk can raise ``P_nj`` and make every
term that query ``t`` sees small (the only way a future token touches ``t``: through rounding).
The computed denominator ``D_t`` (in units of ``exp(c_t)``) is checked afterwards: where
``D_t >= exp(-30)`` a term lost to underflow (below ``exp(-87)`` in float32) is below
``exp(-57) D_t`` -- far under float32 resolution, even summed over ``L m`` terms. Chunks where a
query with a visible key has ``D_t < exp(-30)`` (rare: a later key of the chunk dominates by
more than ``e^30``) are recomputed exactly in log space, ``O(C^2 m)`` each. Nothing overflows
and the result does not depend on a later token beyond rounding.

*Host synchronisation.* Deciding which chunks to recompute needs the flags on the host: on
the CPU that read is free and only the flagged chunks are recomputed; under
``torch.compile`` a ``torch.cond`` takes the (rare) branch that recomputes every chunk, with
no graph break; on an accelerator in eager mode nothing is read back: a fixed share of the
chunks, the flagged ones first, is recomputed every call, and flagged chunks beyond it
give NaN (see :meth:`_LogFactors.fix_underflow`). Nothing else on the causal path reads a
tensor back; input checks are the caller's (:func:`meanfield.attention.linear.kernel_attention`).

``eps`` for positive features is taken relative to the query's kernel with its own key,
``eps K(q_t, k_t)`` (a causal scale that never depends on another token's shift): it changes
an output by a relative amount of at most ``eps``, and guards the rows with no visible key
(output ``0``). For other features ``eps`` is absolute, in the units of ``phi``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["causal_linear_attention", "causal_kernel_attention"]

#: log of the smallest denominator accepted from the fast path (module notes).
LOG_DEN_FLOOR = -30.0
#: Elements of the ``(chunks, C, C, m)`` log-space tensor formed at once by the fallback.
_FALLBACK_ELEMENTS = 1 << 22


def _grad_needed(*ts: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in ts)


def _padded(x: torch.Tensor, total: int) -> torch.Tensor:
    """``(b, h, L, f)`` -> contiguous ``(b, h, total, f)``, zero rows appended."""
    if x.shape[2] == total:
        return x.contiguous()
    return F.pad(x, (0, 0, 0, total - x.shape[2]))


def _values_with_ones(v, keep, total):
    """``[v, 1]`` padded to ``total`` rows, zero rows for padding (``keep``: (b, L) or None).

    A zero row removes its key from numerator and denominator alike, whatever its features.
    """
    b, h, L, d = v.shape
    vv = v.new_empty(b, h, total, d + 1)
    vv[:, :, L:] = 0.0
    if keep is None:
        vv[:, :, :L, :d] = v
        vv[:, :, :L, d] = 1.0
    else:
        w = keep[:, None, :, None].to(v.dtype)
        vv[:, :, :L, :d] = v * w
        vv[:, :, :L, d : d + 1] = w
    return vv


def _chunking(L: int, chunk_size: int) -> tuple[int, int]:
    c = max(1, min(int(chunk_size), L))
    return c, -(-L // c)


def _has_key(mask, b, total, device):
    """bool (b, total): query ``t`` sees at least one real key ``s <= t`` (None: all do)."""
    if mask is None:
        return None
    seen = (~mask).cumsum(-1) > 0
    # not F.pad of a bool tensor: torch.compile's CPU code generation miscompiles it (a C++
    # error in inductor, torch 2.13)
    return torch.cat([seen, seen.new_ones(seen.shape[0], total - mask.shape[1])], dim=1)


def causal_linear_attention(
    q_features: torch.Tensor,
    k_features: torch.Tensor,
    v: torch.Tensor,
    *,
    log_space: bool,
    eps: float,
    chunk_size: int,
    key_padding_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Causal normalised linear attention from (log-)features, head-major.

    Inputs are validated by the caller.

    Parameters
    ----------
    q_features, k_features : torch.Tensor, shape (batch, heads, L, m)
        Features ``phi >= 0``, or log-features when ``log_space``, in the compute dtype.
    v : torch.Tensor, shape (batch, heads, L, d_v)
    log_space : bool
        Inputs are log-features (shifted as in the module notes).
    eps : float
        Added to the denominator (>= 0): relative to ``K(q_t, k_t)`` for log-features,
        absolute otherwise (module notes).
    chunk_size : int
        Chunk length ``C`` (>= 1).
    key_padding_mask : torch.Tensor of bool, shape (batch, L), optional
        True marks padding keys.

    Returns
    -------
    torch.Tensor, shape (batch, heads, L, d_v)

    Notes
    -----
    .. math::

        \mathrm{out}_t = \frac{\varphi(q_t)^\top \sum_{s \le t} \varphi(k_s) v_s^\top}
        {\varphi(q_t)^\top \sum_{s \le t} \varphi(k_s) + \varepsilon}.

    Examples
    --------
    The chunked prefix sums equal the masked quadratic form, for every chunk length:

    >>> import torch
    >>> from meanfield.attention.causal import causal_linear_attention
    >>> _ = torch.manual_seed(0)
    >>> qf, kf = torch.rand(1, 1, 6, 3), torch.rand(1, 1, 6, 3)
    >>> v = torch.randn(1, 1, 6, 2)
    >>> out = causal_linear_attention(qf, kf, v, log_space=False, eps=0.0, chunk_size=4)
    >>> A = (qf[0, 0] @ kf[0, 0].T).tril()  # kernel of query t with keys s <= t
    >>> torch.allclose(out[0, 0], (A @ v[0, 0]) / A.sum(-1, keepdim=True), atol=1e-6)
    True
    >>> one = causal_linear_attention(qf, kf, v, log_space=False, eps=0.0, chunk_size=1)
    >>> torch.allclose(out, one, atol=1e-6)
    True
    """
    b, h, L, m = q_features.shape
    c, n = _chunking(L, chunk_size)
    total = n * c
    qf, kf = _padded(q_features, total), _padded(k_features, total)
    if log_space:
        pad = _key_padding(key_padding_mask, b, L, total, kf.device)
        kf = kf if pad is None else kf.masked_fill(pad[:, None, :, None], float("-inf"))
    vv = _values_with_ones(v, None if key_padding_mask is None else ~key_padding_mask, total)
    has = _has_key(key_padding_mask, b, total, v.device)
    out = _chunked(qf, kf, vv, c, n, log_space, eps, has)
    return out[:, :, :L]


def causal_kernel_attention(q, k, v, feature_map, *, key_padding_mask, eps, chunk_size):
    """Causal kernel attention from head-major queries, keys and values.

    The features are computed here, on the padded chunk layout, with every per-token constant
    that cancels left out (``-|q~|^2/2 - log(m)/2`` of positive features, the ``m^(-1/2)`` of
    PORF-softplus, whose ``eps`` is rescaled to match).

    Parameters
    ----------
    q, k : torch.Tensor, shape (batch, heads, L, d_h)
    v : torch.Tensor, shape (batch, heads, L, d_v)
        In the compute dtype (float32 or float64).
    feature_map : meanfield.attention.features.AttentionFeatureMap
    key_padding_mask : torch.Tensor of bool, shape (batch, L), or None
    eps, chunk_size
        As in :func:`causal_linear_attention`.

    Returns
    -------
    torch.Tensor, shape (batch, heads, L, d_v)

    Examples
    --------
    The same as :func:`~meanfield.attention.linear.kernel_attention` with ``causal=True``
    (which uses the ``(batch, L, heads, d)`` layout), and no future leakage:

    >>> import torch
    >>> from meanfield.attention.causal import causal_kernel_attention
    >>> from meanfield.attention.features import make_feature_map
    >>> from meanfield.attention.linear import kernel_attention
    >>> _ = torch.manual_seed(0)
    >>> q, k, v = (torch.randn(1, 1, 8, 4) for _ in range(3))
    >>> fm = make_feature_map("porf", 4, 16, seed=0)
    >>> out = causal_kernel_attention(q, k, v, fm, key_padding_mask=None, eps=1e-6, chunk_size=4)
    >>> ref = kernel_attention(*(x.transpose(1, 2) for x in (q, k, v)), fm, causal=True)
    >>> torch.allclose(out, ref.transpose(1, 2), atol=1e-6)
    True
    >>> v2 = v.clone()
    >>> v2[..., 5:, :] += 100.0  # change the values of tokens 5, 6, 7
    >>> out2 = causal_kernel_attention(q, k, v2, fm, key_padding_mask=None, eps=1e-6, chunk_size=4)
    >>> torch.allclose(out2[..., :5, :], out[..., :5, :])  # outputs 0-4 do not see them
    True
    """
    from .features import PositiveFeatures, SoftmaxFeatures, SoftplusFeatures

    b, h, L, d = q.shape
    c, n = _chunking(L, chunk_size)
    total = n * c
    fm = feature_map
    kind = type(fm)
    # per-head Omegas (num_heads set) take the generic path: features, then the prefix sums
    if kind not in (PositiveFeatures, SoftmaxFeatures, SoftplusFeatures) or fm.num_heads:
        return causal_linear_attention(
            fm.transform(q), fm.transform(k), v, log_space=fm.log_space, eps=eps,
            chunk_size=chunk_size, key_padding_mask=key_padding_mask,
        )  # fmt: skip
    qp, kp = _padded(q, total), _padded(k, total)
    om = fm.omega.to(q.dtype) * d ** (-0.25)  # x~ = x / d^(1/4) folded into Omega
    log_space = kind is PositiveFeatures
    relog = None
    if log_space:
        pad = _key_padding(key_padding_mask, b, L, total, q.device)
        qf, kf = _log_features(qp, kp, om, pad)
        if not _grad_needed(q, k, v, om):  # the fast path may then overwrite qf, kf

            def relog(idx):  # log-features of chunks idx, for the exact fallback
                qc, kc = (x.reshape(b * h, n, c, d)[idx] for x in (qp, kp))
                padc = None if pad is None else pad[:, None].expand(b, h, total)
                padc = None if padc is None else padc.reshape(b * h, n, c)[idx]
                return _log_features(qc, kc, om, padc)

    elif kind is SoftplusFeatures:
        qf, kf = F.softplus(qp @ om.T), F.softplus(kp @ om.T)
        eps = eps * fm.n_features  # phi = m^(-1/2) softplus: the m^(-1/2)s cancel, eps does not
    else:
        qf = _softmax_features(qp @ om.T, fm.symmetric)
        kf = _softmax_features(kp @ om.T, fm.symmetric)
    vv = _values_with_ones(v, None if key_padding_mask is None else ~key_padding_mask, total)
    has = _has_key(key_padding_mask, b, total, v.device)
    return _chunked(qf, kf, vv, c, n, log_space, eps, has, relog)[:, :, :L]


def _key_padding(mask, b, L, total, device):
    """bool (b, total), True for padding keys and the rows past ``L``; None if there are none."""
    if mask is None and total == L:
        return None
    full = torch.ones(b, total, dtype=torch.bool, device=device)
    full[:, :L] = False if mask is None else mask
    return full


def _log_features(qx, kx, om, pad):
    """``u = Omega x~`` of queries, ``a = u - |x~|^2 / 2`` of keys (``-inf`` where ``pad``).

    ``om`` is Omega already divided by ``d^(1/4)``; ``qx``/``kx`` (..., L, d), ``pad``
    broadcastable to (..., L) without the feature axis, or None.
    """
    d = qx.shape[-1]
    # per-head Omega broadcasts over heads; one view: torch.cond refuses two aliasing inputs
    om_t = om.transpose(-1, -2)
    uq = qx @ om_t
    half_sq = torch.linalg.vector_norm(kx, dim=-1, keepdim=True).square() * (0.5 / math.sqrt(d))
    ka = kx @ om_t
    ka = ka - half_sq if _grad_needed(kx, om) else ka.sub_(half_sq)
    if pad is not None:
        pad = pad[..., None] if pad.ndim == ka.ndim - 1 else pad[:, None, :, None]
        ka = ka.masked_fill(pad, float("-inf"))
    return uq, ka


def _softmax_features(u, symmetric):
    """``[softmax(u), softmax(-u)]`` (or ``softmax(u)``): two softmaxes on one ``(.., 2, m)``
    tensor, the ``-u`` half without a second matrix product."""
    if not symmetric:
        return u.softmax(-1)
    return torch.stack([u, -u], dim=-2).softmax(-1).flatten(-2)


def _chunked(qf, kf, vv, c, n, log_space, eps, has, relog=None):
    """The chunked prefix sums on padded ``(b, h, n c, .)`` tensors -> ``(b, h, n c, d_v)``.

    ``relog``: for log-features that this module made (see :class:`_LogFactors`), or None.
    """
    b, h, total, m = qf.shape
    e = vv.shape[-1]
    B = b * h
    qf, kf, vv = (t.reshape(B, n, c, t.shape[-1]) for t in (qf, kf, vv))
    grad = _grad_needed(qf, kf, vv)
    fac = _LogFactors(qf, kf, grad, relog) if log_space else None
    if fac is not None:
        qf, kf = fac.q, fac.k
    q3, k3, v3 = qf.reshape(B * n, c, m), kf.reshape(B * n, c, m), vv.reshape(B * n, c, e)
    block = torch.bmm(q3, k3.transpose(1, 2))
    block = block.tril() if grad else block.tril_()
    kv = torch.bmm(k3.transpose(1, 2), v3).reshape(B, n, m, e)  # per-chunk phi(K)^T [V, 1]
    if fac is None:
        state = _prefix_states(kv, grad)
    else:
        state = _prefix_states(kv, grad, fac.decay[..., None], (fac.P0, fac.seen))
    nd = torch.bmm(q3, state.reshape(B * n, m, e))
    nd = nd.baddbmm(block, v3) if grad else nd.baddbmm_(block, v3)
    nd = nd.reshape(B, n, c, e)
    has = None if has is None else has[:, None].expand(b, h, total).reshape(B, n, c)
    if fac is None:
        den = nd[..., -1] + eps
    else:
        # eps relative to K(q_t, k_t); 1 where no key is visible (the output is then 0)
        self_k = torch.diagonal(block, dim1=-2, dim2=-1).reshape(B, n, c)
        nd, self_k = fac.fix_underflow(nd, self_k, vv, has, kv, state)
        unit = self_k if has is None else torch.where(has, self_k, 1.0)
        den = nd[..., -1] + eps * unit
    num = nd[..., :-1]
    out = num / den[..., None] if grad else num.div_(den[..., None])
    return out.reshape(b, h, total, e - 1)


def _batched(t: torch.Tensor) -> bool:
    """Use the batched (loop-free) scans: on an accelerator and under ``torch.compile``.

    On the CPU in eager mode the per-chunk loop is faster: each step is one vectorised pass
    over a small ``(B, m, e)`` slice, while ``torch.cumsum`` along the chunk dimension runs
    3-7 times slower than the whole loop there (and the log-depth scan 10 times), measured
    in ``benchmarks/bench_attention.py --section scan``. ``_SCAN`` forces either ("loop" /
    "batched"; tests and the benchmark use it).
    """
    if _SCAN != "auto":
        return _SCAN == "batched"
    return t.device.type != "cpu" or torch.compiler.is_compiling()


#: "auto" (the rule of :func:`_batched`), "loop" or "batched".
_SCAN = "auto"


def _prefix_states(kv, grad, decay=None, levels=None):
    """State before each chunk: ``S_0 = 0``, ``S_i = (S_(i-1) + kv_(i-1)) decay_i``.

    ``kv`` (B, n, m, e); ``decay`` (B, n, m, 1) or None (1); ``levels``: the ``(P, seen)``
    of :class:`_LogFactors` with ``decay`` (``decay_i = exp(P_(i-1) - P_i)``), for the
    batched scan.

    Two formulations (:func:`_batched` picks one):

    * a loop of one or two small operations per chunk (the CPU in eager mode);
    * batched, no loop over chunks: without ``decay`` an exclusive ``torch.cumsum`` over
      chunks (of ``kv_0 .. kv_(n-2)``, shifted by one chunk: no inclusive-minus-own
      subtraction, which would cancel catastrophically); with ``decay`` a log-depth
      (Hillis-Steele) scan, ``ceil(log2 n)`` batched steps, combining the partial sum ending at
      ``i - s`` (in units of ``exp(-P_(i-s))``) into the one ending at ``i`` with the factor
      ``exp(P_(i-s) - P_i) <= 1`` -- every factor at most 1 as in the loop (the loop's
      product of decays telescopes to the same factor), so nothing overflows.
    """
    n = kv.shape[1]
    if _batched(kv):
        if decay is None:
            return F.pad(kv[:, :-1].cumsum(1), (0, 0, 0, 0, 1, 0))
        P, seen = levels
        inc = _level_scan(kv, P, seen)
        return F.pad(inc[:, :-1] * decay[:, 1:], (0, 0, 0, 0, 1, 0))
    if grad:  # out= is not differentiable
        s = torch.zeros_like(kv[:, 0])
        out = [s]
        for i in range(1, n):
            s = s + kv[:, i - 1] if decay is None else (s + kv[:, i - 1]) * decay[:, i]
            out.append(s)
        return torch.stack(out, dim=1)
    out = torch.empty_like(kv)
    out[:, 0] = 0.0
    for i in range(1, n):
        torch.add(out[:, i - 1], kv[:, i - 1], out=out[:, i])
        if decay is not None:
            out[:, i].mul_(decay[:, i])
    return out


def _level_scan(x, P, seen):
    """Inclusive scan ``I_i = sum_(j <= i) x_j exp(P_j - P_i)`` in ``ceil(log2 n)`` steps.

    ``x`` (B, n, m, e), each chunk's term in units of ``exp(-P_j)`` (zero where feature
    ``j`` has seen no real key); ``P`` (B, n, m) non-decreasing along chunks where ``seen``
    (B, n, m, bool). After the step of stride ``s`` entry ``i`` holds the terms of chunks
    ``i - 2s + 1 .. i``; the factor ``exp(P_(i-s) - P_i)`` is at most 1, and 0 where chunk
    ``i - s`` has seen no key (its partial sum is 0, and ``P`` there is only a stand-in).
    """
    n, s = x.shape[1], 1
    while s < n:
        w = torch.where(seen[:, :-s], P[:, :-s] - P[:, s:], float("-inf")).exp()
        x = torch.cat([x[:, :s], torch.addcmul(x[:, s:], x[:, :-s], w[..., None])], dim=1)
        s *= 2
    return x


class _LogFactors:
    """Shifted query/key factors of positive features (module notes); shifts are detached.

    ``qa`` (B, n, c, m): query log-features without per-query constants; ``ka``: key
    log-features, ``-inf`` for padding keys. With ``relog`` (a function of chunk indices
    returning their ``qa``, ``ka``) and no gradient to record, ``qa`` and ``ka`` are turned
    into the factors in place (two fewer ``(L, m)`` buffers to allocate) and the rare exact
    fallback recomputes its chunks' log-features; otherwise the shifted logs are kept.
    """

    def __init__(self, qa, ka, grad, relog=None):
        with torch.no_grad():
            P = torch.cummax(ka.amax(2), dim=1).values  # (B, n, m): maxima over chunks 0..n
            seen = torch.isfinite(P)  # a real key in chunks 0..n
            self.P0 = torch.where(seen, P, 0.0)
            prev = F.pad(self.P0[:, :-1], (0, 0, 1, 0))
            # (torch.cat, not F.pad of a bool tensor: see _has_key)
            prev_seen = torch.cat([torch.zeros_like(seen[:, :1]), seen[:, :-1]], dim=1)
            # exp(P_(n-1) - P_n) <= 1, 0 before the first real key
            self.decay = torch.where(prev_seen, torch.exp(prev - self.P0), 0.0)
            self.log_decay = torch.where(prev_seen, prev - self.P0, float("-inf"))
            self.seen = seen
        P0 = self.P0[:, :, None]
        self.relog = relog if not grad else None
        if self.relog is not None:
            zq = qa.add_(P0)
            self.shift = zq.amax(-1, keepdim=True)
            self.q = zq.sub_(self.shift).exp_()  # <= 1
            self.k = ka.sub_(P0).exp_()  # <= 1
            return
        zq = qa + P0
        self.shift = zq.detach().amax(-1, keepdim=True)
        self.zq = zq - self.shift if grad else zq.sub_(self.shift)  # c_t cancels in the ratio
        self.zk = ka - P0
        self.q = torch.exp(self.zq)  # <= 1
        self.k = torch.exp(self.zk)  # <= 1

    def _shifted_logs(self, idx):
        """``u + P_n - c_t`` and ``a - P_n`` of the chunks ``idx``: (k, c, m) each."""
        if self.relog is None:
            return self.zq[idx], self.zk[idx]
        qa, ka = self.relog(idx)
        P0 = self.P0[idx][:, None]
        return qa + P0 - self.shift[idx], ka - P0

    def fix_underflow(self, nd, self_k, vv, has, kv, state):
        """Recompute exactly the chunks where a query's denominator fell below the floor.

        Which chunks need it is known only on the device, so the way it is decided depends
        on where the call runs (the result is the same; module notes):

        * the CPU, eager: the flag is read and only those chunks are recomputed (a host read
          costs nothing there);
        * under ``torch.compile``: ``torch.cond`` on the flag, no graph break; the rare
          branch recomputes every chunk and keeps the flagged ones;
        * an accelerator, eager: no host synchronisation; a fixed number of chunks,
          ``1 / _REPAIR_SHARE`` of them but at least ``_REPAIR_MIN_CHUNKS``, the flagged ones
          first, are picked on the device (``topk``) and recomputed every call (a chunk in
          log space costs some 10-30 fast chunks: 5-10 % at long L, more in absolute
          launches than time at short L). More flagged chunks than that in one call (a later
          key dominating a query's visible terms by ``e^30`` in more than one chunk in 256:
          extreme logits) make the outputs of the rest NaN -- a loud failure instead of a
          silent loss of precision; set ``meanfield.attention.causal._REPAIR = "cpu"`` to
          read the flag instead (exact, one host synchronisation per call), or
          ``_REPAIR_SHARE = 1`` to recompute every chunk without one (the cost of the
          log-space path).
        """
        with torch.no_grad():
            low = nd[..., -1].detach() < math.exp(LOG_DEN_FLOOR)
            if has is not None:
                low &= has
            bad = low.any(-1)  # (B, n)
        B, n = bad.shape
        if torch.compiler.is_compiling():

            def repair_all(nd, self_k):
                idx = (
                    torch.arange(B, device=nd.device).repeat_interleave(n),
                    torch.arange(n, device=nd.device).repeat(B),
                )
                return self._repair(nd, self_k, vv, kv, state, idx, bad.reshape(-1))

            def keep(nd, self_k):
                return nd.clone(), self_k.clone()

            return torch.cond(bad.any(), repair_all, keep, (nd, self_k))
        if (_REPAIR if _REPAIR != "auto" else nd.device.type) == "cpu":
            if not bool(bad.any()):
                return nd, self_k
            return self._repair(nd, self_k, vv, kv, state, bad.nonzero(as_tuple=True), None)
        flat = bad.reshape(-1)
        K = min(flat.numel(), max(_REPAIR_MIN_CHUNKS, flat.numel() // max(1, _REPAIR_SHARE)))
        flagged, sel = flat.to(nd.dtype).topk(K)
        nd, self_k = self._repair(nd, self_k, vv, kv, state, (sel // n, sel % n), flagged > 0)
        if K < flat.numel():  # flagged chunks beyond the budget: NaN, not a silent error
            left = flat.index_fill(0, sel, False).reshape(B, n, 1, 1)
            nd = nd.masked_fill(left, float("nan"))
        return nd, self_k

    def _repair(self, nd, self_k, vv, kv, state, idx, keep):
        """``nd``, ``self_k`` with the chunks ``idx`` (a pair of index tensors) recomputed in
        log space; with ``keep`` (bool, one per index) only where it is True."""
        # the state before chunk i in units of exp(-P_(i-1)): S_(i-1) + kv_(i-1), 0 for i = 0
        first = idx[1] == 0
        prev = (idx[0], (idx[1] - 1).clamp_min(0))
        before = (state[prev] + kv[prev]).masked_fill(first[:, None, None], 0.0)
        zq, zk = self._shifted_logs(idx)
        new_nd, new_self = _exact_chunks(zq, zk, vv[idx], before, self.log_decay[idx])
        if keep is not None:
            new_nd = torch.where(keep[:, None, None], new_nd, nd[idx])
            new_self = torch.where(keep[:, None], new_self, self_k[idx])
        return nd.index_put(idx, new_nd), self_k.index_put(idx, new_self)


#: Share of the chunks recomputed per call on an accelerator in eager mode (one in this
#: many), and at least this many chunks (see :meth:`_LogFactors.fix_underflow`).
_REPAIR_SHARE = 256
_REPAIR_MIN_CHUNKS = 8  # one dominating token in up to 8 heads
#: "auto" (by device), "cpu" (read the flag) or "device" (no host read): tests force either.
_REPAIR = "auto"


def _exact_chunks(zq, zk, vv, before, log_decay):
    """Chunks recomputed in log space, each query shifted by its own largest visible term.

    Parameters
    ----------
    zq, zk : (k, c, m)
        Shifted query/key log-factors of the fast path (``u + P_n - c_t`` and ``a - P_n``).
    vv : (k, c, e)
        ``[v, 1]`` rows (zero for padding).
    before : (k, m, e)
        State before the chunk in units of ``exp(-P_(n-1))``.
    log_decay : (k, m)
        ``P_(n-1) - P_n`` (``-inf`` before the first key).

    Returns
    -------
    nd : (k, c, e)
        Numerator and denominator, and ``self_k`` (k, c) the kernel of each query with its
        own key, both in the units of the query's largest visible term.
    """
    c = zq.shape[1]
    # padding keys are -inf; a finite stand-in keeps logsumexp's gradient finite (its zero
    # [v, 1] rows keep them out of the sums)
    zk = zk.clamp_min(-1e30)
    per = max(1, _FALLBACK_ELEMENTS // (c * c * zq.shape[2]))
    tril = torch.ones(c, c, dtype=torch.bool, device=zq.device).tril()
    logits = torch.cat(
        [
            torch.logsumexp(zq[i : i + per, :, None, :] + zk[i : i + per, None, :, :], dim=-1)
            for i in range(0, zq.shape[0], per)
        ]
    ).masked_fill(~tril, float("-inf"))  # (k, c, c): log K(q_t, k_s) - c_t
    cross = zq + log_decay[:, None, :]  # against the state in units of exp(-P_(n-1))
    top = torch.maximum(logits.amax(-1), cross.amax(-1)).detach()[..., None]
    top = torch.where(torch.isfinite(top), top, 0.0)
    w = torch.exp(logits - top)
    nd = w @ vv + torch.exp(cross - top) @ before
    return nd, torch.diagonal(w, dim1=-2, dim2=-1)
