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

*Backward, linear in L.* The gradient of a prefix sum is a suffix sum: with ``G_t`` the
gradient of query ``t``'s ``[numerator, denominator]``, the keys and values of chunk ``n``
receive theirs through ``R_n = sum_(j > n) phi(Q_j)^T G_j`` (in the units of chunk ``n``:
``R_(n-1) = (R_n + phi(Q_n)^T G_n) exp(P_(n-1) - P_n)``, every factor at most 1), computed
in reverse with one running ``(m, d_v + 1)`` state. Two forms, both ``O(L)`` in time:

* positive features with a gradient to record, on the CPU in eager mode: the streamed path
  (:class:`_StreamedPositive`), forward and backward by groups of chunks with a hand-written
  backward that recomputes each group's features from the inputs and one checkpointed state
  per group; autograd keeps the inputs only (no ``L x m`` features, no per-chunk states), so
  the memory a training step holds beyond the output is ``O(L / G)`` states. A chunk whose
  denominator falls below the floor sends the call to the recorded path below (which
  recomputes it exactly);
* otherwise the operations are recorded by autograd, and the loop over chunks is one node
  (:class:`_PrefixScan`) whose backward is the reverse scan, in place. (Recording the loop
  itself made autograd zero-fill a full-size copy of the per-chunk states for every chunk it
  read: ``n`` fills of ``n m (d_v + 1)``, quadratic in ``L``.) The batched scans
  (accelerators, ``torch.compile``) are ``O(n log n)`` by construction.

``benchmarks/bench_causal_backward.py`` times forward + backward against the bidirectional
form and causal SDPA, and measures the memory.

``eps`` for positive features is taken relative to the query's kernel with its own key,
``eps K(q_t, k_t)`` (a causal scale that never depends on another token's shift): it changes
an output by a relative amount of at most ``eps``, and guards the rows with no visible key
(output ``0``). For other features ``eps`` is absolute, in the units of ``phi``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..contract import Param, declare

__all__ = ["ATTENTION_PARAMS", "causal_linear_attention", "causal_kernel_attention"]

#: The scalar parameters of the linear-attention functions (here and in
#: :mod:`meanfield.attention.linear`), declared once.
ATTENTION_PARAMS: dict[str, Param] = {
    p.name: p
    for p in (
        Param("causal", "flag", "query t attends to keys s <= t (needs L == S)"),
        Param("log_space", "flag", "the features are logarithms (positive random features)"),
        Param("eps", "real", "added to the denominator, in the units of the (shifted) "
              "features", low=0.0),
        Param("chunk_size", "int", "chunk length C of the causal prefix sums", low=1),
        Param("check_inputs", "flag", "check the values before any work (None: on the CPU "
              "only, outside torch.compile)", optional=True),
        Param("dropout_p", "real", "probability of dropping an attention weight (training)",
              low=0.0, high=1.0, high_open=True),
    )
}  # fmt: skip

#: log of the smallest denominator accepted from the fast path (module notes).
LOG_DEN_FLOOR = -30.0
#: Elements of the ``(chunks, C, C, m)`` log-space tensor formed at once by the fallback.
_FALLBACK_ELEMENTS = 1 << 22


def _grad_needed(*ts: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in ts)


def _padded(x: torch.Tensor, total: int, value: float = 0.0) -> torch.Tensor:
    """``(b, h, L, f)`` -> contiguous ``(b, h, total, f)``, rows of ``value`` appended."""
    if x.shape[2] == total:
        return x.contiguous()
    return F.pad(x, (0, 0, 0, total - x.shape[2]), value=value)


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


@declare(*(ATTENTION_PARAMS[n] for n in ("log_space", "eps", "chunk_size")))
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

    The scalar parameters are checked by the contract (:data:`ATTENTION_PARAMS`); the
    tensors' shapes and values by the caller (:func:`~meanfield.attention.linear.linear_attention`).

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

    See Also
    --------
    meanfield.attention.linear.linear_attention : the checked public form (causal=True).
    causal_kernel_attention : from queries, keys and a feature map.

    Notes
    -----
    .. math::

        \mathrm{out}_t = \frac{\varphi(q_t)^\top \sum_{s \le t} \varphi(k_s) v_s^\top}
        {\varphi(q_t)^\top \sum_{s \le t} \varphi(k_s) + \varepsilon}.

    References
    ----------
    Katharopoulos, A., Vyas, A., Pappas, N. and Fleuret, F. (2020). Transformers are RNNs:
    fast autoregressive transformers with linear attention. ICML 2020, arXiv:2006.16236.

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
    # queries past L (cut off below) get features 1, not 0: a zero row has the denominator
    # 0 + eps, and with eps = 0 its 0 / 0 made every key and value gradient NaN through the
    # backward of the division, though the row itself is discarded
    qf = _padded(q_features, total, 0.0 if log_space else 1.0)
    kf = _padded(k_features, total)
    if log_space:
        pad = _key_padding(key_padding_mask, b, L, total, kf.device)
        kf = kf if pad is None else kf.masked_fill(pad[:, None, :, None], float("-inf"))
    vv = _values_with_ones(v, None if key_padding_mask is None else ~key_padding_mask, total)
    has = _has_key(key_padding_mask, b, total, v.device)
    out = _chunked(qf, kf, vv, c, n, log_space, eps, has)
    return out[:, :, :L]


@declare(ATTENTION_PARAMS["eps"], ATTENTION_PARAMS["chunk_size"])
def causal_kernel_attention(q, k, v, feature_map, *, key_padding_mask, eps, chunk_size):
    """Causal kernel attention from head-major queries, keys and values.

    The features are computed here, on the padded chunk layout, with every per-token constant
    that cancels left out (``-|q~|^2/2 - log(m)/2`` of positive features, the ``m^(-1/2)`` of
    PORF-softplus, whose ``eps`` is rescaled to match). Positive features with a gradient to
    record take the streamed path on the CPU (module notes: the backward recomputes the
    features, autograd keeps only the inputs).

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

    See Also
    --------
    meanfield.attention.linear.kernel_attention : the checked public form (causal=True).
    causal_linear_attention : from precomputed features.

    References
    ----------
    Katharopoulos, A., Vyas, A., Pappas, N. and Fleuret, F. (2020). Transformers are RNNs:
    fast autoregressive transformers with linear attention. ICML 2020, arXiv:2006.16236.
    Choromanski, K. et al. (2021). Rethinking attention with Performers. ICLR 2021,
    arXiv:2009.14794.

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
            fm.transform_queries(q), fm.transform_keys(k), v, log_space=fm.log_space, eps=eps,
            chunk_size=chunk_size, key_padding_mask=key_padding_mask,
        )  # fmt: skip
    om = fm.omega.to(q.dtype) * d ** (-0.25)  # x~ = x / d^(1/4) folded into Omega
    log_space = kind is PositiveFeatures
    if log_space and _streamed(q, k, v, om):
        out = _streamed_positive(q, k, v, om, key_padding_mask, eps, c, n)
        if out is not None:  # None: a chunk needs the exact recomputation (below)
            return out[:, :, :L]
    qp, kp = _padded(q, total), _padded(k, total)
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

    * a loop of one or two small operations per chunk (the CPU in eager mode), in place;
    * batched, no loop over chunks: without ``decay`` an exclusive ``torch.cumsum`` over
      chunks (of ``kv_0 .. kv_(n-2)``, shifted by one chunk: no inclusive-minus-own
      subtraction, which would cancel catastrophically); with ``decay`` a log-depth
      (Hillis-Steele) scan, ``ceil(log2 n)`` batched steps, combining the partial sum ending at
      ``i - s`` (in units of ``exp(-P_(i-s))``) into the one ending at ``i`` with the factor
      ``exp(P_(i-s) - P_i) <= 1`` -- every factor at most 1 as in the loop (the loop's
      product of decays telescopes to the same factor), so nothing overflows.

    With a gradient to record, the loop is one autograd node (:class:`_PrefixScan`) whose
    backward is the reverse scan: linear in ``L`` forward and backward.
    """
    if _batched(kv):
        if decay is None:
            return F.pad(kv[:, :-1].cumsum(1), (0, 0, 0, 0, 1, 0))
        P, seen = levels
        inc = _level_scan(kv, P, seen)
        return F.pad(inc[:, :-1] * decay[:, 1:], (0, 0, 0, 0, 1, 0))
    if grad:  # the loop as one autograd node whose backward is the reverse scan
        return _PrefixScan.apply(kv, decay)
    return _scan_loop(kv, decay)


def _scan_loop(kv, decay):
    """The loop of :func:`_prefix_states`, in place into one ``(B, n, m, e)`` buffer."""
    n = kv.shape[1]
    out = torch.empty(kv.shape, dtype=kv.dtype, device=kv.device)
    out[:, 0] = 0.0
    for i in range(1, n):
        torch.add(out[:, i - 1], kv[:, i - 1], out=out[:, i])
        if decay is not None:
            out[:, i].mul_(decay[:, i])
    return out


class _PrefixScan(torch.autograd.Function):
    """The prefix states of :func:`_scan_loop` with the reverse scan as their backward.

    Forward ``S_0 = 0``, ``S_i = (S_(i-1) + kv_(i-1)) d_i``; with ``G_i`` the gradient of
    ``S_i`` the gradient of ``kv_(i-1)`` is ``A_i = (G_i + A_(i+1)) d_i`` (``A_n = 0``; the
    last chunk's ``kv`` enters no state): a suffix sum, computed in reverse with one running
    state, in place, ``O(n m e)`` -- as the forward. Recording the loop instead made autograd
    zero-fill a full-size ``(B, n, m, e)`` gradient for every ``kv[:, i]`` it read: ``n``
    fills, quadratic in ``L``. ``d`` (the decays ``exp(P_(i-1) - P_i) <= 1`` of positive
    features, or None for 1) is a detached shift ratio (the shifts cancel exactly; module
    notes): no gradient flows to it, and every factor of the reverse scan is at most 1 too.
    """

    @staticmethod
    def forward(ctx, kv, decay):
        ctx.save_for_backward(decay)
        ctx.has_decay = decay is not None
        return _scan_loop(kv, decay)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_state):
        (decay,) = ctx.saved_tensors if ctx.has_decay else (None,)
        g = grad_state
        n = g.shape[1]
        dkv = torch.empty(g.shape, dtype=g.dtype, device=g.device)
        dkv[:, n - 1] = 0.0
        for i in range(n - 1, 0, -1):
            torch.add(g[:, i], dkv[:, i], out=dkv[:, i - 1])
            if decay is not None:
                dkv[:, i - 1].mul_(decay[:, i])
        return dkv, None


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


# -- positive features with a gradient: streamed over groups of chunks, reverse-scan backward


#: Elements of one ``(b h, G, C, m)`` feature tensor of a group of chunks in the streamed
#: path (the working set: a few of these; G chunks per group, at least one).
_GROUP_ELEMENTS = 1 << 18


def _streamed(q, k, v, om) -> bool:
    """Take the streamed path (:class:`_StreamedPositive`): a gradient is to be recorded, on
    the CPU in eager mode (the loop formulation; :func:`_batched`), where the underflow flag
    is read on the host (the fallback to the recorded path below needs that read)."""
    repair = _REPAIR if _REPAIR != "auto" else q.device.type
    return _grad_needed(q, k, v, om) and not _batched(q) and repair == "cpu"


def _streamed_positive(q, k, v, om, key_padding_mask, eps, c, n):
    """Causal positive-feature attention ``(b, h, n c, d_v)`` by :class:`_StreamedPositive`,
    or None where a chunk's denominator falls below the floor (the caller then takes the
    recorded path, which recomputes that chunk exactly; module notes)."""
    b, h, L, _ = q.shape
    total = n * c
    if total != L:  # zero rows: padding keys (masked below), queries cut off by the caller
        q, k, v = (F.pad(x, (0, 0, 0, total - L)) for x in (q, k, v))
    pad = _key_padding(key_padding_mask, b, L, total, q.device)
    has = _has_key(key_padding_mask, b, total, q.device)
    flag = []
    out = _StreamedPositive.apply(q, k, v, om, pad, has, float(eps), c, flag)
    return None if flag else out


class _StreamedPositive(torch.autograd.Function):
    """Causal attention of positive features, streamed over groups of chunks, with a
    hand-written backward: memory and time linear in ``L``, nothing of size ``L m`` kept.

    The forward is :func:`_chunked`'s fast path (the same chunk-wide shifts ``P_n``, per-query
    shifts ``c_t``, decays ``exp(P_(n-1) - P_n) <= 1`` and relative ``eps``), computed for
    ``G`` chunks at a time (:func:`_positive_group`) with the running state carried between
    groups. Kept for the backward: the inputs, and per group the running state and shifts
    entering it (``(b h, m, d_v + 1)`` each) -- no features, no per-chunk states.

    The backward visits the groups in reverse, recomputes each group's features, states and
    outputs from its checkpoint (the same operations on the same operands: the same values),
    and propagates with ``[V, 1]`` rows ``vv``, ``G_t = [dout_t / den_t, -dout_t . out_t /
    den_t]`` and the chunk's masked block ``A = tril(phi(Q) phi(K)^T)``::

        dA        = tril(G vv^T) + eps diag(dden)    (eps relative to K(q_t, k_t))
        dphi(Q)   = G S_n^T + dA phi(K)
        dphi(K)   = dA^T phi(Q) + vv R_n^T,         dvv = A^T G + phi(K) R_n

    where ``R_n = sum_(j > n) phi(Q_j)^T G_j exp(P_n - P_j)`` is the suffix state of the later
    chunks (the gradient of a prefix sum is a suffix sum): ``R_(n-1) = (R_n + phi(Q_n)^T G_n)
    exp(P_(n-1) - P_n)``, one running ``(m, d_v + 1)`` state, every factor at most 1. Through
    ``phi = exp(z)``: ``dz = phi dphi``; the shifts are constants (they cancel exactly in the
    output, so treating them as constants is exact), and ``z`` is linear in ``q``, ``k`` and
    ``Omega`` up to the keys' ``-|k~|^2 / 2``.

    A chunk whose denominator falls below ``exp(LOG_DEN_FLOOR)`` appends to ``flag`` (the
    last argument): the caller then discards this result and takes the recorded path, which
    recomputes such chunks in log space (rare; module notes).
    """

    @staticmethod
    def forward(ctx, q, k, v, om, pad, has, eps, c, flag):
        b, h, total, _ = q.shape
        e = v.shape[-1] + 1
        B, m = b * h, om.shape[0]
        per = max(1, _GROUP_ELEMENTS // (B * c * m))  # chunks per group
        out = q.new_empty(b, h, total, e - 1)
        carry = q.new_zeros(B, m, e)  # S_(n-1) + kv_(n-1) in units of exp(-P_(n-1))
        P = q.new_zeros(B, m)  # P of the chunk before the group (0 before any key)
        seen = torch.zeros(B, m, dtype=torch.bool, device=q.device)
        checkpoints = []
        for t0 in range(0, total, per * c):
            checkpoints.append((carry, P, seen))
            g = _positive_group(q, k, v, om, pad, has, eps, c, t0, per * c, carry, P, seen)
            if g["low"]:
                flag.append(True)
                return out
            carry, P, seen = g["carry"], g["P"], g["seen"]
            out[:, :, t0 : t0 + g["T"]] = g["out"].reshape(b, h, g["T"], e - 1)
        ctx.save_for_backward(q, k, v, om)
        ctx.setup = (pad, has, eps, c, per, checkpoints)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        q, k, v, om = ctx.saved_tensors
        pad, has, eps, c, per, checkpoints = ctx.setup
        b, h, total, d = q.shape
        need_q, need_k, need_v, need_om = ctx.needs_input_grad[:4]
        dq = torch.empty_like(q) if need_q else None
        dk = torch.empty_like(k) if need_k else None
        dv = torch.empty_like(v) if need_v else None
        dom = torch.zeros_like(om) if need_om else None
        R = None  # R_n of the group's last chunk (0 after the last chunk)
        for gi in range(len(checkpoints) - 1, -1, -1):
            t0 = gi * per * c
            carry, P, seen = checkpoints[gi]
            g = _positive_group(q, k, v, om, pad, has, eps, c, t0, per * c, carry, P, seen)
            T, B, G = g["T"], b * h, g["T"] // c
            do = dout[:, :, t0 : t0 + T].reshape(B, G, c, -1)
            den = g["den"]
            dden = -(do * g["out"]).sum(-1) / den
            grad_nd = torch.cat([do / den[..., None], dden[..., None]], dim=-1)  # (B, G, c, e)
            fq, fk, vv, A, S = g["fq"], g["fk"], g["vv"], g["A"], g["S"]
            dA = (grad_nd @ vv.transpose(-1, -2)).tril_()
            if eps:  # den = nd + eps K(q_t, k_t) where a key is visible
                dself = dden * eps if g["has"] is None else torch.where(g["has"], dden * eps, 0.0)
                dA.diagonal(dim1=-2, dim2=-1).add_(dself)
            dS = fq.transpose(-1, -2) @ grad_nd  # (B, G, m, e)
            Rs = torch.empty_like(dS)  # R_n for the chunks of the group
            Rn = dS.new_zeros(dS[:, 0].shape) if R is None else R
            for i in range(G - 1, -1, -1):
                Rs[:, i] = Rn
                Rn = (Rn + dS[:, i]) * g["decay"][:, i, :, None]
            R = Rn
            xq, xk = g["xq"], g["xk"]
            if need_q or need_om:
                dzq = torch.matmul(grad_nd, S.transpose(-1, -2)).add_(dA @ fk).mul_(fq)
                if need_q:
                    dq[:, :, t0 : t0 + T] = (dzq @ om).reshape(b, h, T, d)
                if need_om:
                    dom.addmm_(dzq.reshape(-1, dzq.shape[-1]).T, xq.reshape(-1, d))
            if need_k or need_om:  # dz = phi dphi (phi = exp(z)); -|k~|^2 / 2 of the keys
                dzk = torch.matmul(dA.transpose(-1, -2), fq).add_(vv @ Rs.transpose(-1, -2))
                dzk.mul_(fk)
                if need_k:
                    gk = (dzk @ om).sub_(dzk.sum(-1, keepdim=True) * xk * d**-0.5)
                    dk[:, :, t0 : t0 + T] = gk.reshape(b, h, T, d)
                if need_om:
                    dom.addmm_(dzk.reshape(-1, dzk.shape[-1]).T, xk.reshape(-1, d))
            if need_v:
                dvv = torch.matmul(A.transpose(-1, -2), grad_nd).add_(fk @ Rs)
                gv = dvv[..., :-1] if g["keep"] is None else dvv[..., :-1] * g["keep"]
                dv[:, :, t0 : t0 + T] = gv.reshape(b, h, T, -1)
        return dq, dk, dv, dom, None, None, None, None, None


def _positive_group(q, k, v, om, pad, has, eps, c, t0, span, carry, P_in, seen_in):
    """The fast path of :func:`_chunked` for the chunks of tokens ``t0 .. t0 + span`` (or the
    end), given the state ``carry`` entering them (``S + kv`` of the chunk before, in units of
    ``exp(-P_in)``), ``P_in`` and ``seen_in`` (the shifts of that chunk, :class:`_LogFactors`).

    Returns a dict of the group's tensors, ``(b h, G, C, .)``: inputs ``xq``, ``xk``, ``vv``
    (``[v, 1]``, zero rows for padding) and ``keep`` (the padding weights, or None); factors
    ``fq``, ``fk``; the masked blocks ``A``; the states ``S`` before each chunk and the
    ``decay``; ``out`` and ``den``; ``has``; and ``carry``, ``P``, ``seen`` for the next
    group, ``T`` (tokens in the group) and ``low`` (a denominator below the floor).
    """
    b, h, total, d = q.shape
    B = b * h
    T = min(span, total - t0)
    G = T // c
    sl = slice(t0, t0 + T)
    xq, xk = (x[:, :, sl].reshape(B, G, c, d) for x in (q, k))
    dv = v.shape[-1]
    e = dv + 1
    vv = v.new_empty(B, G, c, e)
    vv[..., :dv] = v[:, :, sl].reshape(B, G, c, dv)
    padg = None if pad is None else pad[:, None, sl].expand(b, h, T).reshape(B, G, c)
    keep = None
    if padg is None:
        vv[..., dv] = 1.0
    else:
        keep = (~padg)[..., None].to(v.dtype)
        vv[..., :dv] *= keep
        vv[..., dv:] = keep
    hasg = None if has is None else has[:, None, sl].expand(b, h, T).reshape(B, G, c)
    om_t = om.T
    uq = xq @ om_t  # (B, G, c, m)
    ka = (xk @ om_t).sub_(xk.square().sum(-1, keepdim=True) * (0.5 / math.sqrt(d)))
    if padg is not None:
        ka.masked_fill_(padg[..., None], float("-inf"))
    # P_n: largest key log-feature over chunks 0..n, carried in from the previous group
    start = torch.where(seen_in, P_in, float("-inf"))[:, None]
    Pn = torch.cummax(torch.cat([start, ka.amax(2)], dim=1), dim=1).values[:, 1:]
    seen = torch.isfinite(Pn)
    P0 = torch.where(seen, Pn, 0.0)  # (B, G, m)
    prev = torch.cat([P_in[:, None], P0[:, :-1]], dim=1)
    prev_seen = torch.cat([seen_in[:, None], seen[:, :-1]], dim=1)
    decay = torch.where(prev_seen, torch.exp(prev - P0), 0.0)  # (B, G, m), <= 1
    zq = uq.add_(P0[:, :, None])
    fq = zq.sub_(zq.amax(-1, keepdim=True)).exp_()  # <= 1; c_t cancels in the ratio
    fk = ka.sub_(P0[:, :, None]).exp_()  # <= 1, 0 for padding keys
    kv = fk.transpose(-1, -2) @ vv  # (B, G, m, e)
    A = (fq @ fk.transpose(-1, -2)).tril_()
    S = torch.empty_like(kv)
    for i in range(G):
        S[:, i] = carry * decay[:, i, :, None]
        carry = S[:, i] + kv[:, i]
    nd = torch.matmul(fq, S).add_(A @ vv)
    self_k = torch.diagonal(A, dim1=-2, dim2=-1)
    low = nd[..., -1] < math.exp(LOG_DEN_FLOOR)
    if hasg is not None:
        low &= hasg
    unit = self_k if hasg is None else torch.where(hasg, self_k, 1.0)
    den = nd[..., -1] + eps * unit
    out = nd[..., :-1] / den[..., None]
    return {
        "xq": xq, "xk": xk, "vv": vv, "keep": keep, "fq": fq, "fk": fk, "A": A, "S": S,
        "decay": decay, "out": out, "den": den, "has": hasg, "carry": carry,
        "P": P0[:, -1], "seen": seen[:, -1], "T": T, "low": bool(low.any()),
    }  # fmt: skip
