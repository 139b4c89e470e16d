"""Linear (kernel) attention and a drop-in ``KernelAttention`` module.

Linear attention (THEORY.md §7) with feature maps ``phi`` from
:mod:`meanfield.attention.features`::

    out = phi(Q) (phi(K)^T V)  /  (phi(Q) (phi(K)^T 1) + eps)

Padding is masked by zeroing rows of ``phi(K)``. The bidirectional form costs
``O(L m d_h)`` time and ``O(L m)`` memory; the causal form replaces the two sums over keys by
prefix sums, computed chunk by chunk (exact: inside a chunk of ``C`` tokens the masked
``C x C`` kernel block is formed, across chunks a running ``(m, d_h)`` state is carried), so
it costs ``O(L m d_h + L C m)`` time and ``O(L m + C^2)`` memory.

Tensors use the ``(batch, length, heads, dim)`` layout (fast-transformers). All sums are
accumulated in float32 (float64 for float64 input) with autocast disabled; the output is cast
back to the dtype of ``v``.

The exact baseline is softmax attention through
:func:`torch.nn.functional.scaled_dot_product_attention`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .._validation import check_choice, check_int, check_positive
from .features import FEATURE_KINDS, FeatureMap, make_feature_map

__all__ = [
    "ATTENTION_KINDS",
    "kernel_attention",
    "linear_attention",
    "softmax_attention",
    "KernelAttention",
]

#: ``"softmax"`` (exact, SDPA) plus every feature-map kind.
ATTENTION_KINDS = ("softmax",) + FEATURE_KINDS


def _check_mask(mask, batch: int, length: int, name: str = "key_padding_mask"):
    """Return a bool mask (True = padding) of shape (batch, length) or None."""
    if mask is None:
        return None
    if not torch.is_tensor(mask):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(mask).__name__}")
    if tuple(mask.shape) != (batch, length):
        raise ValueError(
            f"{name} must have shape (batch, length) = ({batch}, {length}), got {tuple(mask.shape)}"
        )
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point():
        # additive float mask (MultiheadAttention): -inf = ignore, 0 = attend
        pad = torch.isneginf(mask)
        if not torch.all(pad | (mask == 0)):
            raise ValueError(
                f"a float {name} must contain only 0 (attend) and -inf (ignore); kernel "
                "attention cannot add arbitrary biases to attention logits"
            )
        return pad
    raise TypeError(f"{name} must be bool (True = padding) or float (0 / -inf), got {mask.dtype}")


def linear_attention(
    q_features: torch.Tensor,
    k_features: torch.Tensor,
    v: torch.Tensor,
    *,
    key_padding_mask: torch.Tensor | None = None,
    causal: bool = False,
    log_space: bool = False,
    eps: float = 1e-6,
    chunk_size: int = 64,
) -> torch.Tensor:
    """Normalised linear attention from precomputed (log-)features.

    Parameters
    ----------
    q_features : torch.Tensor, shape (batch, L, heads, m)
        Query features ``phi(Q) >= 0``, or their logarithms when ``log_space``.
    k_features : torch.Tensor, shape (batch, S, heads, m)
        Key features ``phi(K) >= 0``, or their logarithms when ``log_space``.
    v : torch.Tensor, shape (batch, S, heads, d_v)
    key_padding_mask : torch.Tensor of bool, shape (batch, S), optional
        True marks padding; those key rows are zeroed.
    causal : bool
        Query ``t`` attends to keys ``s <= t`` (requires ``L == S``).
    log_space : bool
        The features are logarithms (positive random features). They are exponentiated with
        the per-feature key shift ``M_j`` (maximum over the keys visible to the query: all
        real keys, or keys ``s <= t`` when causal) moved to the query side, and a per-query
        shift; both cancel exactly, every term is at most 1 and the dominant one is 1
        (see :mod:`meanfield.attention.features`).
    eps : float
        Added to the denominator (>= 0), in the units of the (shifted) features.
    chunk_size : int
        Block length of the causal prefix sums (>= 1). In log space the block costs
        ``O(chunk^2 m)`` memory per batch and head.

    Returns
    -------
    torch.Tensor, shape (batch, L, heads, d_v), dtype of ``v``
    """
    eps = check_positive("eps", eps, allow_zero=True)
    chunk_size = check_int("chunk_size", chunk_size)
    if q_features.ndim != 4 or k_features.ndim != 4 or v.ndim != 4:
        raise ValueError(
            "q_features, k_features and v must be 4-d (batch, length, heads, dim), got "
            f"{tuple(q_features.shape)}, {tuple(k_features.shape)}, {tuple(v.shape)}"
        )
    b, L, h, m = q_features.shape
    if k_features.shape[0] != b or k_features.shape[2:] != (h, m):
        raise ValueError(
            f"k_features must have shape (batch, S, heads, m) = ({b}, S, {h}, {m}), "
            f"got {tuple(k_features.shape)}"
        )
    S = k_features.shape[1]
    if v.shape[:3] != (b, S, h):
        raise ValueError(
            f"v must have shape (batch, S, heads, d_v) = ({b}, {S}, {h}, d_v), got {tuple(v.shape)}"
        )
    if causal and L != S:
        raise ValueError(f"causal attention needs equal query and key lengths, got {L} and {S}")
    mask = _check_mask(key_padding_mask, b, S)
    out_dtype = v.dtype
    dt = torch.float64 if torch.float64 in (q_features.dtype, v.dtype) else torch.float32
    with torch.autocast(device_type=v.device.type, enabled=False):
        qf = q_features.to(dt)
        kf = k_features.to(dt)
        vv = v.to(dt)
        if mask is not None:
            kf = kf.masked_fill(mask[:, :, None, None], float("-inf") if log_space else 0.0)
        if causal:
            chunk = _causal_log_chunked if log_space else _causal_chunked
            out = chunk(qf, kf, vv, eps, chunk_size)
        else:
            if log_space:
                qf, kf = _exp_bidirectional(qf, kf)
            kv = torch.einsum("bshm,bshd->bhmd", kf, vv)
            ksum = kf.sum(dim=1)  # (b, h, m)
            num = torch.einsum("blhm,bhmd->blhd", qf, kv)
            den = torch.einsum("blhm,bhm->blh", qf, ksum)
            out = num / (den + eps).unsqueeze(-1)
    return out.to(out_dtype)


def _finite_or_zero(x):
    return torch.where(torch.isfinite(x), x, torch.zeros_like(x))


def _exp_bidirectional(qa, ka):
    """Stabilised exponentials of log-features: per-feature key max moved to the queries."""
    M = ka.amax(dim=1, keepdim=True).detach()  # (b, 1, h, m), -inf if every key is padding
    has_key = torch.isfinite(M)
    M0 = _finite_or_zero(M)
    kf = torch.exp(ka - M0)
    qs = torch.where(has_key, qa + M0, torch.full_like(qa, float("-inf")))
    c = _finite_or_zero(qs.amax(dim=-1, keepdim=True).detach())
    return torch.exp(qs - c), kf


def _causal_chunked(qf, kf, v, eps, chunk):
    b, L, h, m = qf.shape
    d = v.shape[-1]
    state = qf.new_zeros(b, h, m, d)
    zstate = qf.new_zeros(b, h, m)
    outs = []
    tril = torch.ones(chunk, chunk, dtype=torch.bool, device=qf.device).tril()
    for start in range(0, L, chunk):
        stop = min(start + chunk, L)
        q = qf[:, start:stop]
        k = kf[:, start:stop]
        vc = v[:, start:stop]
        n = stop - start
        a = torch.einsum("blhm,bshm->bhls", q, k)
        a = a.masked_fill(~tril[:n, :n], 0.0)
        num = torch.einsum("bhls,bshd->blhd", a, vc) + torch.einsum("blhm,bhmd->blhd", q, state)
        den = a.sum(-1).transpose(1, 2) + torch.einsum("blhm,bhm->blh", q, zstate)
        outs.append(num / (den + eps).unsqueeze(-1))
        state = state + torch.einsum("bshm,bshd->bhmd", k, vc)
        zstate = zstate + k.sum(dim=1)
    return torch.cat(outs, dim=1)


def _causal_log_chunked(qa, ka, v, eps, chunk):
    """Causal attention from log-features with running (prefix) per-feature key maxima.

    For query t and feature j, ``M_j(t) = max_{s <= t} ka[s, j]``; the carried state holds
    ``sum_s exp(ka[s, j] - M_j) v_s`` for the keys before the chunk, rescaled whenever the
    running maximum grows. Nothing computed for query t depends on a key after t.
    """
    b, L, h, m = qa.shape
    d = v.shape[-1]
    state = qa.new_zeros(b, h, m, d)
    zstate = qa.new_zeros(b, h, m)
    m_prev = qa.new_full((b, h, m), float("-inf"))
    outs = []
    tril = torch.ones(chunk, chunk, dtype=torch.bool, device=qa.device).tril()
    for start in range(0, L, chunk):
        stop = min(start + chunk, L)
        n = stop - start
        ak = ka[:, start:stop]  # (b, n, h, m)
        vc = v[:, start:stop]
        run = torch.maximum(torch.cummax(ak, dim=1).values, m_prev[:, None]).detach()
        has_key = torch.isfinite(run)
        run0 = _finite_or_zero(run)
        qs = torch.where(has_key, qa[:, start:stop] + run0, torch.full_like(run, float("-inf")))
        c = _finite_or_zero(qs.amax(dim=-1, keepdim=True).detach())
        qf = torch.exp(qs - c)  # (b, n, h, m), <= 1
        # keys before the chunk: state is in units of exp(-m_prev); rescale to exp(-run(t))
        prev_ok = torch.isfinite(m_prev)[:, None]
        decay = torch.where(prev_ok, torch.exp(_finite_or_zero(m_prev)[:, None] - run0), 0.0)
        qd = qf * decay
        num = torch.einsum("bthm,bhmd->bthd", qd, state)
        den = torch.einsum("bthm,bhm->bth", qd, zstate)
        # keys inside the chunk, s <= t: weight exp(ak[s] - run(t)) <= 1
        logw = ak[:, None, :, :, :] - run0[:, :, None, :, :]  # (b, t, s, h, m)
        logw = logw.masked_fill(~tril[:n, :n][None, :, :, None, None], float("-inf"))
        a = torch.einsum("bthm,btshm->bhts", qf, torch.exp(logw))
        num = num + torch.einsum("bhts,bshd->bthd", a, vc)
        den = den + a.sum(-1).transpose(1, 2)
        outs.append(num / (den + eps).unsqueeze(-1))
        # carry the state to the end of the chunk
        m_new = run[:, -1]  # (b, h, m)
        new_ok = torch.isfinite(m_new)
        m_new0 = _finite_or_zero(m_new)
        keep = torch.where(
            torch.isfinite(m_prev) & new_ok, torch.exp(_finite_or_zero(m_prev) - m_new0), 0.0
        )
        wk = torch.exp(ak - m_new0[:, None])  # (b, n, h, m), padding -> 0
        state = state * keep[..., None] + torch.einsum("bshm,bshd->bhmd", wk, vc)
        zstate = zstate * keep + wk.sum(dim=1)
        m_prev = m_new
    return torch.cat(outs, dim=1)


def kernel_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    feature_map: FeatureMap,
    *,
    key_padding_mask: torch.Tensor | None = None,
    causal: bool = False,
    eps: float = 1e-6,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """Linear attention with a feature map: ``phi(Q) (phi(K)^T V) / (phi(Q) phi(K)^T 1 + eps)``.

    Parameters
    ----------
    q : torch.Tensor, shape (batch, L, heads, d_h)
    k : torch.Tensor, shape (batch, S, heads, d_h)
    v : torch.Tensor, shape (batch, S, heads, d_v)
    feature_map : FeatureMap
        Applied to queries and keys alike (one ``Omega``).
    key_padding_mask, causal, eps
        As in :func:`linear_attention`.
    chunk_size : int, optional
        Causal block length (default 16 for log-space features, 64 otherwise).

    Returns
    -------
    torch.Tensor, shape (batch, L, heads, d_v)
    """
    if chunk_size is None:
        chunk_size = 16 if feature_map.log_space else 64
    return linear_attention(
        feature_map.transform(q),
        feature_map.transform(k),
        v,
        key_padding_mask=key_padding_mask,
        causal=causal,
        log_space=feature_map.log_space,
        eps=eps,
        chunk_size=chunk_size,
    )


def softmax_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    key_padding_mask: torch.Tensor | None = None,
    causal: bool = False,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Exact softmax attention ``softmax(Q K^T / sqrt(d_h)) V`` via PyTorch's SDPA.

    Parameters
    ----------
    q : torch.Tensor, shape (batch, L, heads, d_h)
    k : torch.Tensor, shape (batch, S, heads, d_h)
    v : torch.Tensor, shape (batch, S, heads, d_v)
    key_padding_mask : torch.Tensor of bool, shape (batch, S), optional
        True marks padding.
    causal : bool
        Lower-triangular mask (``L == S``).
    dropout_p : float
        Dropout on the attention weights, in [0, 1).

    Returns
    -------
    torch.Tensor, shape (batch, L, heads, d_v)
    """
    if not 0.0 <= float(dropout_p) < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p!r}")
    b, L = q.shape[:2]
    S = k.shape[1]
    if causal and L != S:
        raise ValueError(f"causal attention needs equal query and key lengths, got {L} and {S}")
    mask = _check_mask(key_padding_mask, b, S)
    attn_mask = None
    if mask is not None:
        allowed = ~mask[:, None, None, :]  # (b, 1, 1, S), True = attend
        if causal:
            allowed = allowed & torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
            causal = False
        attn_mask = allowed
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        attn_mask=attn_mask,
        dropout_p=float(dropout_p),
        is_causal=causal,
    )
    return out.transpose(1, 2)


def _kernel_weights(fm, q, k, mask, causal, eps):
    """Explicit (batch, heads, L, S) weights of kernel attention (O(L S), for inspection)."""
    with torch.autocast(device_type=q.device.type, enabled=False):
        qa, ka = fm.transform(q), fm.transform(k)
        if fm.log_space:
            # log-space products with a per-query max: the same shift-cancelled weights
            logits = torch.logsumexp(qa[:, :, None] + ka[:, None], dim=-1)  # (b, L, S, h)
            logits = logits.permute(0, 3, 1, 2)
            if mask is not None:
                logits = logits.masked_fill(mask[:, None, None, :], float("-inf"))
            if causal:
                tri = torch.ones(logits.shape[-2:], dtype=torch.bool, device=q.device).tril()
                logits = logits.masked_fill(~tri, float("-inf"))
            c = _finite_or_zero(logits.amax(-1, keepdim=True))
            a = torch.exp(logits - c)
        else:
            a = torch.einsum("blhm,bshm->bhls", qa, ka)
            if mask is not None:
                a = a.masked_fill(mask[:, None, None, :], 0.0)
            if causal:
                tri = torch.ones(a.shape[-2:], dtype=torch.bool, device=a.device).tril()
                a = a.masked_fill(~tri, 0.0)
        return a / (a.sum(-1, keepdim=True) + eps)


class KernelAttention(nn.Module):
    """Multi-head attention with a kernel feature map, shaped like ``nn.MultiheadAttention``.

    ``forward(query, key, value, key_padding_mask=None, need_weights=False, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` returns ``(attn_output, attn_weights)`` as
    ``torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)`` does, so the module
    drops into existing models. Differences: ``need_weights`` defaults to False (forming the
    ``L x S`` weights would cost ``O(L S)``; pass True to get them for inspection), and
    ``attn_mask`` may only be None or the causal mask (use ``is_causal=True``).

    Parameters
    ----------
    embed_dim : int
        Model width ``E`` (divisible by ``num_heads``).
    num_heads : int
        Number of heads ``H``; ``d_h = E / H``.
    feature : {"softmax", "favor", "porf", "porf-softplus", "softmaxfeat"}
        ``"softmax"`` is exact attention (scaled_dot_product_attention); the others are linear
        attention with that feature map (:func:`make_feature_map`).
    n_features : int
        Number of random features ``m`` per head (ignored for softmax).
    tie_qk : bool
        Q = K: queries and keys share one projection.
    dropout : float
        Dropout on attention weights (softmax only; linear attention forms no weights), [0, 1).
    bias : bool
        Bias in the input and output projections.
    batch_first : bool
        Must be True (the only supported layout).
    eps : float
        Denominator epsilon of linear attention (>= 0).
    seed : int
        Seed of the feature map's initial Omega.
    redraw_every : int
        In training mode redraw Omega every this many forward calls (0 = never; the
        Performer trick). Never in eval mode, never once ``omega`` is learned.
    kdim, vdim : int, optional
        Input widths of keys and values (default ``embed_dim``).
    chunk_size : int, optional
        Block length of the causal prefix sums (default: 16 for positive features, 64 else).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        feature: str = "favor",
        n_features: int = 64,
        tie_qk: bool = False,
        dropout: float = 0.0,
        bias: bool = True,
        batch_first: bool = True,
        eps: float = 1e-6,
        seed: int = 0,
        redraw_every: int = 0,
        kdim: int | None = None,
        vdim: int | None = None,
        chunk_size: int | None = None,
    ):
        super().__init__()
        embed_dim = check_int("embed_dim", embed_dim)
        num_heads = check_int("num_heads", num_heads)
        if embed_dim % num_heads:
            raise ValueError(
                f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})"
            )
        check_choice("feature", feature, ATTENTION_KINDS)
        if not batch_first:
            raise ValueError("KernelAttention supports only batch_first=True")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        kdim = embed_dim if kdim is None else check_int("kdim", kdim)
        vdim = embed_dim if vdim is None else check_int("vdim", vdim)
        if tie_qk and kdim != embed_dim:
            raise ValueError(
                f"tie_qk needs kdim == embed_dim, got kdim={kdim}, embed_dim={embed_dim}"
            )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.feature = feature
        self.tie_qk = bool(tie_qk)
        self.dropout = float(dropout)
        self.batch_first = True
        self.eps = check_positive("eps", eps, allow_zero=True)
        self.redraw_every = check_int("redraw_every", redraw_every, minimum=0)
        self.chunk_size = None if chunk_size is None else check_int("chunk_size", chunk_size)
        self._calls = 0
        self._redraws = 0
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = None if self.tie_qk else nn.Linear(kdim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.feature_map: FeatureMap | None = None
        if feature != "softmax":
            n_features = check_int("n_features", n_features)
            self.feature_map = make_feature_map(feature, self.head_dim, n_features, seed=seed)

    # -- projections ----------------------------------------------------------------------
    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.reshape(b, n, self.num_heads, self.head_dim)

    def project_queries(self, query: torch.Tensor) -> torch.Tensor:
        """``(batch, L, E) -> (batch, L, heads, d_h)``."""
        return self._split(self.q_proj(query))

    def project_keys(self, key: torch.Tensor) -> torch.Tensor:
        """``(batch, S, kdim) -> (batch, S, heads, d_h)`` (the query projection if tie_qk)."""
        proj = self.q_proj if self.tie_qk else self.k_proj
        return self._split(proj(key))

    def _maybe_redraw(self):
        fm = self.feature_map
        if fm is None or not self.training or self.redraw_every == 0 or fm.learned:
            return
        if self._calls % self.redraw_every == 0 and self._calls > 0:
            self._redraws += 1
            fm.new_feature_map(fm.seed + 1 if fm.seed < 2**62 else 0)
        self._calls += 1

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        attn_mask: torch.Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ):
        """Attention of ``query`` over ``key``/``value``.

        Parameters
        ----------
        query : torch.Tensor, shape (batch, L, embed_dim)
        key : torch.Tensor, shape (batch, S, kdim)
        value : torch.Tensor, shape (batch, S, vdim)
        key_padding_mask : torch.Tensor, shape (batch, S), optional
            bool (True = padding) or float (0 / -inf).
        need_weights : bool
            Also return the ``(batch, [heads,] L, S)`` attention weights (O(L S) cost).
        attn_mask : torch.Tensor, optional
            Only None or a causal mask (then pass ``is_causal=True``).
        average_attn_weights : bool
            Average the returned weights over heads.
        is_causal : bool
            Causal attention (``L == S``).

        Returns
        -------
        attn_output : torch.Tensor, shape (batch, L, embed_dim)
        attn_weights : torch.Tensor or None
        """
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not torch.is_tensor(t) or t.ndim != 3:
                shape = tuple(t.shape) if torch.is_tensor(t) else type(t).__name__
                raise ValueError(f"{name} must be a 3-d tensor (batch, length, dim), got {shape}")
        if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise ValueError(
                "query, key and value must share the batch size and key/value the length, got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        if attn_mask is not None and not is_causal:
            raise ValueError(
                "KernelAttention accepts attn_mask only as the causal mask with is_causal=True; "
                "use key_padding_mask for padding"
            )
        b, L, _ = query.shape
        S = key.shape[1]
        mask = _check_mask(key_padding_mask, b, S)
        self._maybe_redraw()
        q = self.project_queries(query)
        k = self.project_keys(key)
        v = self._split(self.v_proj(value))
        weights = None
        if self.feature_map is None:
            out = softmax_attention(
                q,
                k,
                v,
                key_padding_mask=mask,
                causal=is_causal,
                dropout_p=self.dropout if self.training else 0.0,
            )
            if need_weights:
                logits = torch.einsum("blhd,bshd->bhls", q, k) / math.sqrt(self.head_dim)
                if mask is not None:
                    logits = logits.masked_fill(mask[:, None, None, :], float("-inf"))
                if is_causal:
                    tri = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
                    logits = logits.masked_fill(~tri, float("-inf"))
                weights = logits.softmax(-1)
        else:
            fm = self.feature_map
            out = kernel_attention(
                q,
                k,
                v,
                fm,
                key_padding_mask=mask,
                causal=is_causal,
                eps=self.eps,
                chunk_size=self.chunk_size,
            )
            if need_weights:
                weights = _kernel_weights(fm, q, k, mask, is_causal, self.eps)
        out = self.out_proj(out.reshape(b, L, self.embed_dim).to(query.dtype))
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)
        return out, weights

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, feature={self.feature!r}, "
            f"tie_qk={self.tie_qk}, eps={self.eps}"
        )
