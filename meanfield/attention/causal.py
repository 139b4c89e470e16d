"""Causal linear attention by chunked prefix sums: exact, O(L) memory, no future leakage.

For a query ``t`` causal linear attention needs the prefix sums over keys ``s <= t``::

    num_t = phi(q_t) . sum_{s<=t} phi(k_s) v_s^T,      den_t = phi(q_t) . sum_{s<=t} phi(k_s)

The sequence is cut into chunks of ``C`` tokens. Inside a chunk the masked ``C x C`` block
``phi(Q_c) phi(K_c)^T`` is formed by one batched matrix product over *all* chunks at once;
across chunks a running ``(m, d_v)`` state is carried (a cumulative sum, or a short Python
loop of two tensor operations per chunk when the state must be rescaled). Time
``O(L m (C + d_v))``, memory ``O(L (m + C + m d_v / C))``.

Positive random features (FAVOR+, PORF) arrive as log-features ``a_j(x)`` and cannot be
exponentiated as they are (``exp`` overflows float32 for large inputs). For chunk ``n`` and
feature ``j`` let ``M_nj`` be the largest key log-feature in chunks ``0..n`` and, for a
query ``t``, ``R_tj`` the largest over keys ``s <= t`` (a running maximum: causal). With the
per-query shift ``c_t = max_j (a_j(q_t) + R_tj)`` every exact kernel term is
``exp(a_j(q_t) + a_j(k_s) - c_t) <= 1`` and the dominant visible term is exactly 1. We factor
it as

* inside the chunk: ``exp(a_j(q_t) + M_nj - c_t) * exp(a_j(k_s) - M_nj)``: the key factor is
  at most 1, the query factor at most ``exp(g_t)`` with ``g_t = max_j(a_j(q_t) + M_nj) - c_t``;
* across chunks: ``exp(a_j(q_t) + M_(n-1)j - c_t) <= 1`` times a state kept in units of
  ``exp(-M_(n-1)j)`` (rescaled per feature when the maximum grows, as in online softmax).

``M_nj`` depends on keys later in the chunk than ``t`` but cancels exactly; it changes the
result for ``t`` only by rounding, and by the underflow of terms below
``exp(g_t - 87)`` relative to the dominant one. We therefore require ``g_t <= 30`` (terms
below ``e^-57`` can be lost, far under float32 resolution); the rare chunks where a later key
raises a feature's maximum by more are recomputed exactly in log space, each term shifted by
``c_t`` alone (``O(C^2 m)`` per chunk). Nothing overflows and no shift depends on a later
chunk.
"""

from __future__ import annotations

import torch

__all__ = ["causal_linear_attention"]

#: Largest query-side exponent accepted in the fast factorisation (see the module notes).
GAP_LIMIT = 30.0
#: Elements of the ``(chunks, C, C, m)`` log-space tensor formed at once by the fallback.
_FALLBACK_ELEMENTS = 1 << 22


def _finite_or(x: torch.Tensor, value: float) -> torch.Tensor:
    return torch.where(torch.isfinite(x), x, torch.full_like(x, value))


def _pad_length(x: torch.Tensor, total: int, value: float) -> torch.Tensor:
    """Pad dim 2 (length) of a ``(b, h, L, f)`` tensor to ``total`` with ``value``."""
    if x.shape[2] == total:
        return x
    pad = x.new_full((*x.shape[:2], total - x.shape[2], x.shape[3]), value)
    return torch.cat([x, pad], dim=2)


def _prefix_max(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Running maximum along ``dim`` in ``log2(n)`` elementwise passes (Hillis-Steele).

    (``torch.cummax`` is a scalar loop on CPU, tens of times slower at these sizes.)
    """
    n = x.shape[dim]
    if n == 1:
        return x
    bufs = (torch.empty_like(x), torch.empty_like(x))  # ping-pong; the input is not written
    src, s, i = x, 1, 0
    while s < n:
        dst = bufs[i]
        dst.narrow(dim, 0, s).copy_(src.narrow(dim, 0, s))
        torch.maximum(
            src.narrow(dim, s, n - s), src.narrow(dim, 0, n - s), out=dst.narrow(dim, s, n - s)
        )
        src, s, i = dst, 2 * s, 1 - i
    return src


def causal_linear_attention(
    q_features: torch.Tensor,
    k_features: torch.Tensor,
    v: torch.Tensor,
    *,
    log_space: bool,
    eps: float,
    chunk_size: int,
) -> torch.Tensor:
    """Causal normalised linear attention, head-major (inputs validated by the caller).

    Parameters
    ----------
    q_features, k_features : torch.Tensor, shape (batch, heads, L, m)
        Features ``phi >= 0`` (padding keys zeroed), or log-features when ``log_space``
        (padding keys ``-inf``), in the compute dtype.
    v : torch.Tensor, shape (batch, heads, L, d_v)
    log_space : bool
        Inputs are log-features (see the module notes for the shifts).
    eps : float
        Added to the denominator (>= 0); with log-features in the units where the dominant
        visible term is 1.
    chunk_size : int
        Chunk length ``C`` (>= 1).

    Returns
    -------
    torch.Tensor, shape (batch, heads, L, d_v)
    """
    b, h, L, m = q_features.shape
    c = max(1, min(int(chunk_size), L))
    n = -(-L // c)
    total = n * c
    # padded positions: keys that carry nothing, queries whose outputs are dropped
    qf = _pad_length(q_features, total, 0.0).reshape(b, h, n, c, m)
    kf = _pad_length(k_features, total, float("-inf") if log_space else 0.0)
    kf = kf.reshape(b, h, n, c, m)
    # a column of ones appended to v carries the denominator through the same products
    vv = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)
    vc = _pad_length(vv, total, 0.0).reshape(b, h, n, c, -1)
    tril = torch.ones(c, c, dtype=torch.bool, device=qf.device).tril()
    if log_space:
        fac = _LogFactors(qf, kf)
        q_in, kc = fac.q_in, fac.k
    else:
        q_in, kc = qf, kf
    block = (q_in @ kc.transpose(-1, -2)).masked_fill(~tril, 0.0)  # (b, h, n, c, c)
    kv = kc.transpose(-1, -2) @ vc  # per-chunk sums of k_s [v_s, 1]^T, (b, h, n, m, d + 1)
    if not log_space:
        # exclusive prefix sum over chunks, by shifting (not cumsum - kv: subtracting a
        # chunk's own sum would cancel catastrophically against large later values)
        state = torch.cat([torch.zeros_like(kv[:, :, :1]), kv[:, :, :-1].cumsum(2)], dim=2)
        nd = block @ vc + q_in @ state
    else:
        # the state before chunk i is kept in units of exp(-M_(i-1)) (per feature) and
        # rescaled as the maxima grow: S_(i+1) = S_i * decay_i + kv_i
        # kept per chunk in units of exp(-M_i) (M_i: feature maxima up to chunk i), rescaled
        # per feature as the maxima grow: S_i = (S_(i-1) + kv_(i-1)) * exp(M_(i-1) - M_i)
        bad_chunks = (
            set() if fac.bad is None else set(fac.bad.any(1).any(0).nonzero()[:, 0].tolist())
        )
        states, before = [], {}
        s = kv.new_zeros(kv[:, :, 0].shape)
        for i in range(n):
            if i in bad_chunks:
                before[i] = s  # units of exp(-M_(i-1)), for the exact recomputation
            s = s * fac.decay[:, :, i, :, None]
            states.append(s)
            s = s + kv[:, :, i]
        nd = block @ vc + q_in @ torch.stack(states, dim=2)
        if fac.bad is not None:
            nd = fac.fix_bad_chunks(nd, vc, before, tril)
    out = nd[..., :-1] / (nd[..., -1:] + eps)  # (b, h, n, c, d)
    return out.reshape(b, h, total, -1)[:, :, :L]


class _LogFactors:
    """Shifted query/key factors of positive features (module notes); shifts are detached."""

    def __init__(self, qa: torch.Tensor, ka: torch.Tensor):
        # qa, ka: (b, h, n, c, m) log-features; padding keys are -inf
        self.qa, self.ka = qa, ka
        with torch.no_grad():
            run = _prefix_max(ka, dim=3)  # running max inside each chunk
            chunk_max = _prefix_max(run[:, :, :, -1], dim=2)  # M_n (b, h, n, m)
            prev_max = torch.cat(
                [torch.full_like(chunk_max[:, :, :1], float("-inf")), chunk_max[:, :, :-1]], 2
            )
            run = torch.maximum(run, prev_max[:, :, :, None])  # R_tj, over all keys s <= t
            # c_t; +inf where no key is visible yet, so that the query factors vanish there
            self.shift = _finite_or((qa + run).amax(-1, keepdim=True), float("inf"))
            self.m_in = _finite_or(chunk_max, 0.0)[:, :, :, None]
            self.prev_max = prev_max[:, :, :, None]
            # rescaling from units of M_(n-1) to M_n; 0 when no key came before chunk n
            self.decay = torch.where(
                torch.isfinite(prev_max), torch.exp(prev_max - self.m_in[:, :, :, 0]), 0.0
            )
        z = qa + self.m_in
        z = z.sub_(self.shift) if not torch.is_grad_enabled() else z - self.shift
        with torch.no_grad():
            bad = z.detach().amax(dim=(-1, -2)) > GAP_LIMIT  # (b, h, n)
            self.bad = bad if bool(bad.any()) else None
        if self.bad is not None:
            # replaced below for the bad chunks; the clamp keeps values and gradients finite
            z = torch.clamp(z, max=GAP_LIMIT)
        # in place when no gradient is recorded: these are the largest tensors formed
        inplace = not torch.is_grad_enabled()
        self.q_in = z.exp_() if inplace else z.exp()  # <= exp(GAP_LIMIT)
        k = ka - self.m_in
        self.k = k.exp_() if inplace else k.exp()  # <= 1

    def fix_bad_chunks(self, nd, vc, before, tril):
        """Recompute, exactly, the chunks whose fast factorisation could lose terms.

        In-chunk terms ``exp(a(q_t) + a(k_s) - c_t)`` are formed in log space (``C^2 m`` per
        chunk), cross-chunk ones with the query factor ``exp(a(q_t) + M_(i-1) - c_t) <= 1``
        against the state in units of ``exp(-M_(i-1))``.
        """
        idx = self.bad.nonzero(as_tuple=True)
        qb, kb, sb = self.qa[idx], self.ka[idx], self.shift[idx]  # (k, c, m), (k, c, 1)
        c, m = qb.shape[1], qb.shape[2]
        per = max(1, _FALLBACK_ELEMENTS // (c * c * m))
        parts = []
        for i in range(0, qb.shape[0], per):
            sl = slice(i, i + per)
            logw = qb[sl, :, None, :] + kb[sl, None, :, :] - sb[sl, :, :, None]
            logw = logw.masked_fill(~tril[None, :, :, None], float("-inf"))
            parts.append(torch.exp(logw).sum(-1))
        block = torch.cat(parts)  # (k, c, c)
        prev = self.prev_max[idx]  # (k, 1, m)
        cross = torch.where(torch.isfinite(prev), torch.exp(qb + _finite_or(prev, 0.0) - sb), 0.0)
        b_i, h_i, n_i = (t.tolist() for t in idx)
        state = torch.stack([before[n][b, h] for b, h, n in zip(b_i, h_i, n_i, strict=True)])
        nd = nd.clone()
        nd[idx] = block @ vc[idx] + cross @ state
        return nd
