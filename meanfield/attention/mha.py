"""``KernelAttention``: kernel attention as a drop-in for ``torch.nn.MultiheadAttention``.

The module form of :mod:`meanfield.attention.linear` (which keeps the functional API and
re-exports :class:`KernelAttention` and :func:`is_causal_mask`). The masks are planned here
(what runs in ``O(L)``, what needs the explicit ``(N, H, L, S)`` weights); the attention
itself is the head-major core of :mod:`meanfield.attention.linear`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .._validation import check_choice, check_int, check_positive
from ..errors import InputTypeError
from .features import AttentionFeatureMap, autocast_off, make_feature_map
from .linear import (
    ATTENTION_KINDS,
    _check_causal_lengths,
    _check_finite_input,
    _finite_or_zero,
    _kernel_core,
)

__all__ = ["KernelAttention", "is_causal_mask"]


def _mask_tensor(mask, name: str):
    """Validate the dtype of a mask (bool or floating) and return it, or None."""
    if mask is None:
        return None
    if not torch.is_tensor(mask):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(f"{name} must be bool or floating (additive), got dtype {mask.dtype}")
    if mask.is_floating_point() and mask.device.type != "meta":
        if torch.isnan(mask).any() or torch.isposinf(mask).any():
            raise ValueError(f"a float {name} must not contain NaN or +inf")
    return mask


def _future(L: int, S: int, device) -> torch.Tensor:
    """bool (L, S), True strictly above the diagonal: the keys a causal query may not see."""
    return torch.ones(L, S, dtype=torch.bool, device=device).triu(1)


def is_causal_mask(attn_mask: torch.Tensor) -> bool:
    """True when ``attn_mask`` (shape (..., L, L)) is exactly the causal mask.

    Accepted forms are those of :class:`torch.nn.MultiheadAttention`: bool with True above the
    diagonal (True = not allowed), or float with ``-inf`` above the diagonal and 0 on and
    below it (:meth:`torch.nn.Transformer.generate_square_subsequent_mask`); a 3-d mask must
    have every slice causal.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.mha import is_causal_mask
    >>> is_causal_mask(torch.nn.Transformer.generate_square_subsequent_mask(3))
    True
    >>> is_causal_mask(torch.ones(3, 3, dtype=torch.bool).triu(1))
    True
    >>> is_causal_mask(torch.zeros(3, 3))  # no masking at all
    False
    """
    L, S = attn_mask.shape[-2:]
    if L != S:
        return False
    future = _future(L, S, attn_mask.device)
    if attn_mask.dtype == torch.bool:
        return bool(torch.equal(attn_mask, future.expand_as(attn_mask)))
    return bool(torch.where(future, torch.isneginf(attn_mask), attn_mask == 0).all())


def _kernel_weights(fm: AttentionFeatureMap, q, k, bias, eps):
    """Explicit kernel-attention weights, head-major; O(L S) memory (O(L S m) time, log space).

    Parameters
    ----------
    q : (b, h, L, d); k : (b, h, S, d)
    bias : float tensor broadcastable to (b, h, L, S), or None
        Additive mask: the kernel is multiplied by ``exp(bias)`` (``-inf`` = not allowed);
        for softmax attention that is the additive logit mask of ``nn.MultiheadAttention``.
    eps : float
        Denominator epsilon, in units where the largest weight of a row is at most 1.

    Returns
    -------
    torch.Tensor, shape (b, h, L, S), rows summing to 1 (0 where no key is allowed)
    """
    dt = torch.float64 if q.dtype == torch.float64 else torch.float32
    with autocast_off(q.device):
        qf, kf = fm.transform(q.to(dt)), fm.transform(k.to(dt))
        if bias is not None:
            bias = bias.to(dt)
        if fm.log_space:
            # log K(q_l, k_s) = logsumexp_j (a_j(q_l) + a_j(k_s)): exact for any magnitude,
            # in row blocks that bound the (rows, S, m) temporary
            b, h, L, m = qf.shape
            rows = max(1, (1 << 24) // max(1, b * h * kf.shape[2] * m))
            logits = torch.cat(
                [
                    torch.logsumexp(qf[:, :, i : i + rows, None, :] + kf[:, :, None], dim=-1)
                    for i in range(0, L, rows)
                ],
                dim=2,
            )
            if bias is not None:
                logits = logits + bias
            a = torch.exp(logits - _finite_or_zero(logits.amax(-1, keepdim=True)).detach())
        else:
            a = qf @ kf.transpose(-1, -2)
            if bias is not None:
                # shift positive biases down per row so that exp(bias) cannot overflow
                top = _finite_or_zero(bias.amax(-1, keepdim=True)).clamp(min=0).detach()
                a = a * torch.exp(bias - top)
        return a / (a.sum(-1, keepdim=True) + eps)


class KernelAttention(nn.Module):
    """Multi-head attention with a kernel feature map, a drop-in for ``nn.MultiheadAttention``.

    Same constructor arguments, ``forward`` signature and return values as
    :class:`torch.nn.MultiheadAttention` (batched ``(N, L, E)`` / ``(L, N, E)`` and unbatched
    ``(L, E)`` inputs, ``key_padding_mask``, ``attn_mask``, ``is_causal``,
    ``average_attn_weights``), plus the feature-map options. It works inside
    ``nn.TransformerEncoderLayer``, ``nn.TransformerEncoder`` and ``nn.TransformerDecoderLayer``
    (assign it to ``layer.self_attn`` / ``layer.multihead_attn``, e.g. with
    :meth:`from_mha`), loads an ``nn.MultiheadAttention`` state_dict, and with
    ``feature="softmax"`` reproduces ``nn.MultiheadAttention`` to float rounding.

    Deliberate differences (all documented choices):

    * ``batch_first`` defaults to **True** (``nn.MultiheadAttention``: False), as the package
      has always used it; pass ``batch_first=False`` for ``(L, N, E)``. :meth:`from_mha`
      copies the source module's layout.
    * ``need_weights`` defaults to **False**: kernel attention never forms the ``L x S``
      weights unless asked (they cost ``O(L S)``); code that uses the weights without asking
      gets ``None`` (a loud failure) rather than a silent quadratic cost.
    * ``is_causal=True`` without ``attn_mask`` is accepted (``nn.MultiheadAttention`` requires
      the mask as well); with ``attn_mask`` the mask must be the causal mask (checked).
    * ``dropout`` (on attention weights) must be 0 for kernel features: linear attention forms
      no weight matrix to drop from. Put dropout around the layer instead.
    * Parameters are stored as ``q_proj``/``k_proj``/``v_proj``/``out_proj`` linear layers
      (initialised as ``nn.Linear``); ``in_proj_weight``/``in_proj_bias`` are read-only
      concatenated views, and an ``nn.MultiheadAttention`` state_dict is converted on load.

    Masks. Linear attention computes ``phi(Q) (phi(K)^T V)`` in ``O(L)``; only masks that
    factor through that form run in ``O(L)``: key padding (bool, or float 0/-inf) and the
    causal mask (``is_causal=True``, or an ``attn_mask`` recognised as exactly causal), alone
    or together. Any other mask (a general ``attn_mask``, a float ``key_padding_mask`` with
    other values) is applied **exactly** by forming the ``(N, H, L, S)`` weights, at
    ``O(L S)`` memory and ``O(L S m)`` time for positive features (``O(L S (m + d))``
    otherwise): the kernel is multiplied by ``exp(mask)`` (bool masks: by 0 where True), which
    for ``feature="softmax"`` is exactly the additive logit mask. No mask is ever dropped or
    replaced.

    Parameters
    ----------
    embed_dim : int
        Model width ``E`` (divisible by ``num_heads``).
    num_heads : int
        Number of heads ``H``; ``d_h = E / H``.
    dropout : float
        Dropout on attention weights in [0, 1); softmax only (0 for kernel features).
    bias : bool
        Bias in the input and output projections.
    add_bias_kv : bool
        Append a learned key and value (``bias_k``, ``bias_v``, shape (1, 1, E)) to every
        sequence, visible to every query (also in causal attention), as
        ``nn.MultiheadAttention`` does.
    add_zero_attn : bool
        Append a zero key and value (after ``add_bias_kv``), visible to every query.
    kdim, vdim : int, optional
        Input widths of keys and values (default ``embed_dim``).
    batch_first : bool
        ``(N, L, E)`` inputs and outputs when True (the default here), ``(L, N, E)`` when False.
    device, dtype
        Factory arguments of the parameters (the feature matrix ``omega`` stays float32).
    feature : {"softmax", "favor", "porf", "porf-softplus", "softmaxfeat"}
        ``"softmax"`` is exact attention (scaled_dot_product_attention); the others are linear
        attention with that feature map (:func:`make_feature_map`).
    n_features : int
        Number of random features ``m`` per head (ignored for softmax).
    tie_qk : bool
        Q = K: queries and keys share one projection (needs ``kdim == embed_dim``).
    eps : float
        Denominator epsilon of linear attention (>= 0).
    seed : int
        Seed of the feature map's initial ``omega``.
    redraw_every : int
        In training mode redraw ``omega`` every this many forward calls (0 = never; the
        Performer trick). Never in eval mode, never once ``omega`` is learned.
    chunk_size : int
        Chunk length of the causal prefix sums (default 64).

    Examples
    --------
    With ``feature="softmax"`` and the weights of an ``nn.MultiheadAttention`` it gives the
    same output; with kernel features the weights are not formed:

    >>> import torch
    >>> from meanfield.attention.mha import KernelAttention
    >>> _ = torch.manual_seed(0)
    >>> mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = torch.randn(2, 5, 8)
    >>> ref, _ = mha(x, x, x, need_weights=False)
    >>> out, _ = KernelAttention.from_mha(mha, "softmax")(x, x, x)
    >>> torch.allclose(out, ref, atol=1e-6)
    True
    >>> attn = KernelAttention(8, 2, feature="favor", n_features=16, seed=0)
    >>> out, weights = attn(x, x, x, is_causal=True)
    >>> out.shape, weights
    (torch.Size([2, 5, 8]), None)
    """

    # torch's fused encoder fast paths (nn.TransformerEncoderLayer in eval mode, and the
    # nested-tensor path of nn.TransformerEncoder) compute *softmax* attention directly from
    # in_proj_weight, bypassing forward. They are only taken when this flag is True, so
    # reporting False (as nn.MultiheadAttention does for kdim/vdim != embed_dim) keeps every
    # container on the regular path, which calls our forward.
    _qkv_same_embed_dim = False

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = True,
        device=None,
        dtype=None,
        *,
        feature: str = "favor",
        n_features: int = 64,
        tie_qk: bool = False,
        eps: float = 1e-6,
        seed: int = 0,
        redraw_every: int = 0,
        chunk_size: int = 64,
    ):
        super().__init__()
        embed_dim = check_int("embed_dim", embed_dim)
        num_heads = check_int("num_heads", num_heads)
        if embed_dim % num_heads:
            raise ValueError(
                f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})"
            )
        check_choice("feature", feature, ATTENTION_KINDS)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if feature != "softmax" and float(dropout) > 0:
            raise ValueError(
                f"dropout must be 0 for feature={feature!r}, got {dropout!r}: linear attention "
                "forms no attention-weight matrix to drop from (apply dropout around the layer)"
            )
        kdim = embed_dim if kdim is None else check_int("kdim", kdim)
        vdim = embed_dim if vdim is None else check_int("vdim", vdim)
        if tie_qk and kdim != embed_dim:
            raise ValueError(
                f"tie_qk needs kdim == embed_dim, got kdim={kdim}, embed_dim={embed_dim}"
            )
        factory = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = kdim
        self.vdim = vdim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.feature = feature
        self.tie_qk = bool(tie_qk)
        self.dropout = float(dropout)
        self.batch_first = bool(batch_first)
        self.add_zero_attn = bool(add_zero_attn)
        self.eps = check_positive("eps", eps, allow_zero=True)
        self.redraw_every = check_int("redraw_every", redraw_every, minimum=0)
        self.chunk_size = check_int("chunk_size", chunk_size)
        self._calls = 0
        self._redraws = 0
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.k_proj = None if self.tie_qk else nn.Linear(kdim, embed_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(vdim, embed_dim, bias=bias, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, embed_dim, **factory))
            self.bias_v = nn.Parameter(torch.empty(1, 1, embed_dim, **factory))
            nn.init.xavier_normal_(self.bias_k)
            nn.init.xavier_normal_(self.bias_v)
        else:
            self.bias_k = self.bias_v = None
        self.feature_map: AttentionFeatureMap | None = None
        if feature != "softmax":
            n_features = check_int("n_features", n_features)
            fm = make_feature_map(feature, self.head_dim, n_features, seed=seed)
            self.feature_map = fm.to(device) if device is not None else fm
        self.register_load_state_dict_pre_hook(_convert_mha_state)

    # -- nn.MultiheadAttention compatibility ----------------------------------------------
    @property
    def in_proj_weight(self) -> torch.Tensor | None:
        """``(3E, E)`` concatenated Q/K/V projection weights (a copy; None if kdim/vdim != E).

        Examples
        --------
        >>> from meanfield.attention.mha import KernelAttention
        >>> KernelAttention(8, 2).in_proj_weight.shape, KernelAttention(8, 2, kdim=4).in_proj_weight
        (torch.Size([24, 8]), None)
        """
        if self.kdim != self.embed_dim or self.vdim != self.embed_dim:
            return None
        k = self.q_proj if self.tie_qk else self.k_proj
        return torch.cat([self.q_proj.weight, k.weight, self.v_proj.weight])

    @property
    def in_proj_bias(self) -> torch.Tensor | None:
        """``(3E,)`` concatenated Q/K/V projection biases (a copy; None if ``bias=False``).

        Examples
        --------
        >>> from meanfield.attention.mha import KernelAttention
        >>> KernelAttention(8, 2).in_proj_bias.shape, KernelAttention(8, 2, bias=False).in_proj_bias
        (torch.Size([24]), None)
        """
        if self.q_proj.bias is None:
            return None
        k = self.q_proj if self.tie_qk else self.k_proj
        return torch.cat([self.q_proj.bias, k.bias, self.v_proj.bias])

    def reset_parameters(self) -> None:
        """Re-initialise the projections and ``bias_k``/``bias_v``, and redraw ``omega`` from
        its seed (e.g. after ``to_empty`` of a module built on the meta device).

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.mha import KernelAttention
        >>> attn = KernelAttention(8, 2, feature="porf", n_features=4, seed=3)
        >>> omega = attn.feature_map.omega.clone()
        >>> with torch.no_grad():
        ...     _ = attn.feature_map.omega.zero_()
        >>> attn.reset_parameters()
        >>> torch.equal(attn.feature_map.omega, omega)  # the same seed, the same omega
        True
        """
        for lin in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if lin is not None:
                lin.reset_parameters()
        if self.bias_k is not None:
            nn.init.xavier_normal_(self.bias_k)
            nn.init.xavier_normal_(self.bias_v)
        if self.feature_map is not None:
            self.feature_map.new_feature_map(self.feature_map.seed)

    @classmethod
    def from_mha(
        cls,
        mha: nn.MultiheadAttention,
        feature_map: str = "favor",
        *,
        n_features: int = 64,
        seed: int = 0,
        dropout: float | None = None,
        **kwargs,
    ) -> KernelAttention:
        """A ``KernelAttention`` with the projection weights of a (trained) softmax module.

        Parameters
        ----------
        mha : torch.nn.MultiheadAttention
            Source module; its embed_dim, num_heads, bias, add_bias_kv, add_zero_attn, kdim,
            vdim, batch_first, device and dtype are copied, and its weights loaded.
        feature_map : {"softmax", "favor", "porf", "porf-softplus", "softmaxfeat"}
            Attention kind of the new module (``"softmax"`` reproduces ``mha``).
        n_features, seed
            Feature-map size and seed (ignored for softmax).
        dropout : float, optional
            Attention-weight dropout; default ``mha.dropout`` for softmax, and for kernel
            features ``mha.dropout`` only if it is 0 (otherwise pass ``dropout=0.0``
            explicitly: kernel attention has no weight dropout).
        **kwargs
            Other :class:`KernelAttention` options (``tie_qk``, ``eps``, ``chunk_size``,
            ``redraw_every``).

        Returns
        -------
        KernelAttention
            In the training mode of ``mha``.

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.mha import KernelAttention
        >>> mha = torch.nn.MultiheadAttention(8, 2, batch_first=False)
        >>> attn = KernelAttention.from_mha(mha, "porf", n_features=16)
        >>> attn.batch_first, torch.equal(attn.in_proj_weight, mha.in_proj_weight)
        (False, True)
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"mha must be an nn.MultiheadAttention, got {type(mha).__name__}")
        if dropout is None:
            dropout = mha.dropout
            if feature_map != "softmax" and dropout > 0:
                raise ValueError(
                    f"mha has attention dropout {dropout}, which kernel attention cannot apply "
                    "(no weight matrix); pass dropout=0.0 to from_mha to convert without it"
                )
        ref = mha.out_proj.weight
        new = cls(
            mha.embed_dim,
            mha.num_heads,
            dropout=dropout,
            bias=mha.in_proj_bias is not None,
            add_bias_kv=mha.bias_k is not None,
            add_zero_attn=mha.add_zero_attn,
            kdim=mha.kdim,
            vdim=mha.vdim,
            batch_first=mha.batch_first,
            device=ref.device,
            dtype=ref.dtype,
            feature=feature_map,
            n_features=n_features,
            seed=seed,
            **kwargs,
        )
        new.load_state_dict(mha.state_dict())
        return new.train(mha.training)

    # -- projections ----------------------------------------------------------------------
    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.reshape(b, n, self.num_heads, self.head_dim)

    def project_queries(self, query: torch.Tensor) -> torch.Tensor:
        """``(batch, L, E) -> (batch, L, heads, d_h)`` (batch-first, whatever ``batch_first``).

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.mha import KernelAttention
        >>> KernelAttention(8, 2).project_queries(torch.zeros(3, 5, 8)).shape
        torch.Size([3, 5, 2, 4])
        """
        return self._split(self.q_proj(query))

    def project_keys(self, key: torch.Tensor) -> torch.Tensor:
        """``(batch, S, kdim) -> (batch, S, heads, d_h)`` (the query projection if tie_qk).

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.mha import KernelAttention
        >>> attn = KernelAttention(8, 2, tie_qk=True)
        >>> x = torch.randn(1, 5, 8)
        >>> torch.equal(attn.project_keys(x), attn.project_queries(x))
        True
        """
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

    # -- masks ----------------------------------------------------------------------------
    def _plan_masks(self, key_padding_mask, attn_mask, is_causal, N, L, S):
        """Split the masks into what runs in O(L) and what needs the weights.

        Returns ``(pad, causal, bias)``: ``pad`` (N, S) bool (True = ignore) or None;
        ``causal`` bool; ``bias`` None or an additive float mask broadcastable to
        (N, H, L, S) that forces the O(L S) path (it then includes ``pad`` and ``causal``).
        """
        kpm = _mask_tensor(key_padding_mask, "key_padding_mask")
        am = _mask_tensor(attn_mask, "attn_mask")
        pad = bias = None
        if kpm is not None:
            if tuple(kpm.shape) != (N, S):
                raise ValueError(
                    f"key_padding_mask must have shape (batch, S) = ({N}, {S}), "
                    f"got {tuple(kpm.shape)}"
                )
            if kpm.dtype == torch.bool:
                pad = kpm
            elif bool((torch.isneginf(kpm) | (kpm == 0)).all()):
                pad = torch.isneginf(kpm)
            else:  # other additive values cannot be applied in O(L)
                bias = kpm[:, None, None, :]
        causal = False
        if am is not None:
            H = self.num_heads
            if am.ndim == 2 and tuple(am.shape) != (L, S):
                raise ValueError(
                    f"a 2-d attn_mask must have shape (L, S) = ({L}, {S}), got {tuple(am.shape)}"
                )
            if am.ndim == 3 and tuple(am.shape) != (N * H, L, S):
                raise ValueError(
                    f"a 3-d attn_mask must have shape (batch * num_heads, L, S) = "
                    f"({N * H}, {L}, {S}), got {tuple(am.shape)}"
                )
            if am.ndim not in (2, 3):
                raise ValueError(f"attn_mask must be 2-d or 3-d, got shape {tuple(am.shape)}")
            if is_causal_mask(am):
                causal = True
            elif is_causal:
                raise ValueError(
                    "is_causal=True but attn_mask is not the causal mask (True / -inf exactly "
                    "above the diagonal); pass attn_mask=None with is_causal=True, or the "
                    "general mask with is_causal=False"
                )
            else:
                add = am if am.is_floating_point() else torch.zeros(am.shape, device=am.device)
                if not am.is_floating_point():
                    add = add.masked_fill(am, float("-inf"))
                add = add.reshape(1, 1, L, S) if am.ndim == 2 else add.reshape(N, H, L, S)
                bias = add if bias is None else bias + add
        elif is_causal:
            causal = True
        _check_causal_lengths(causal, L, S)
        if bias is not None:  # one additive mask holds everything
            if pad is not None:
                bias = bias.masked_fill(pad[:, None, None, :], float("-inf"))
            if causal:
                bias = bias.masked_fill(_future(L, S, bias.device), float("-inf"))
            pad, causal = None, False
        return pad, causal, bias

    @staticmethod
    def _full_bias(pad, causal, L, St, n_extra, device):
        """The additive (.., L, St) mask of padding and causality; appended keys stay open."""
        full = torch.zeros(1, 1, L, St, device=device)
        if causal:
            fut = F.pad(_future(L, St - n_extra, device), (0, n_extra), value=False)
            full = full.masked_fill(fut, float("-inf"))
        if pad is not None:
            full = full.masked_fill(pad[:, None, None, :], float("-inf"))
        return full

    # -- forward --------------------------------------------------------------------------
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
        """Attention of ``query`` over ``key``/``value`` (``nn.MultiheadAttention.forward``).

        Parameters
        ----------
        query : torch.Tensor, shape (N, L, E) if batch_first else (L, N, E), or (L, E)
        key : torch.Tensor, shape (N, S, kdim) if batch_first else (S, N, kdim), or (S, kdim)
        value : torch.Tensor, shape (N, S, vdim) if batch_first else (S, N, vdim), or (S, vdim)
        key_padding_mask : torch.Tensor, shape (N, S) or (S,), optional
            bool (True = ignore) or float (added to the attention logits).
        need_weights : bool
            Also return the attention weights (``O(L S)`` cost; default False, see class notes).
        attn_mask : torch.Tensor, shape (L, S) or (N * num_heads, L, S), optional
            bool (True = not allowed) or float (added to the logits). The exact causal mask
            runs in O(L); any other mask through the explicit weights (class notes).
        average_attn_weights : bool
            Average the returned weights over heads.
        is_causal : bool
            Causal attention (``L == S``); ``attn_mask``, if given, must be the causal mask.

        Returns
        -------
        attn_output : torch.Tensor, shape (N, L, E) if batch_first else (L, N, E), or (L, E)
        attn_weights : torch.Tensor or None
            (N, L, S') averaged or (N, num_heads, L, S') (no N for unbatched input), where
            ``S'`` counts the ``add_bias_kv``/``add_zero_attn`` keys; None unless asked.

        Raises
        ------
        meanfield.errors.InputTypeError
            A non-floating input, or one whose dtype differs from the parameters' outside
            ``torch.autocast``.
        meanfield.errors.InputError
            NaN or inf in a CPU input (checked on the CPU only: elsewhere the check would
            synchronise with the host on every call).

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.mha import KernelAttention
        >>> _ = torch.manual_seed(0)
        >>> attn = KernelAttention(8, 2, feature="porf", n_features=16)
        >>> x = torch.randn(5, 8)  # unbatched (L, E)
        >>> out, w = attn(x, x, x, need_weights=True)
        >>> out.shape, w.shape, torch.allclose(w.sum(-1), torch.ones(5))
        (torch.Size([5, 8]), torch.Size([5, 5]), True)
        """
        query, key, value, key_padding_mask, unbatched = self._batched(
            query, key, value, key_padding_mask
        )
        N, L, _ = query.shape
        pad, causal, bias = self._plan_masks(
            key_padding_mask, attn_mask, is_causal, N, L, key.shape[1]
        )
        self._maybe_redraw()
        k = (self.q_proj if self.tie_qk else self.k_proj)(key)
        k, v, pad, bias, n_extra = self._append_extra_keys(k, self.v_proj(value), pad, bias)
        # head-major (N, H, length, d)
        q, k, v = (self._split(t).transpose(1, 2) for t in (self.q_proj(query), k, v))
        attend = self._softmax if self.feature_map is None else self._kernel
        out, weights = attend(q, k, v, pad, causal, bias, n_extra, need_weights)
        out = self.out_proj(out.transpose(1, 2).reshape(N, L, self.embed_dim).to(query.dtype))
        if weights is not None:
            # averaged in the compute dtype, returned in the input's, as nn.MultiheadAttention
            weights = (weights.mean(dim=1) if average_attn_weights else weights).to(query.dtype)
        return self._caller_layout(out, weights, unbatched)

    def _append_extra_keys(self, k, v, pad, bias):
        """Append the keys/values every query sees, as ``nn.MultiheadAttention`` does.

        ``bias_k``/``bias_v`` (``add_bias_kv``), then a zero key and value
        (``add_zero_attn``); the padding and additive masks are widened to leave them open.
        Returns ``(k, v, pad, bias, n_extra)``.
        """
        N = k.shape[0]
        extra = []
        if self.bias_k is not None:
            extra.append((self.bias_k.expand(N, 1, -1), self.bias_v.expand(N, 1, -1)))
        if self.add_zero_attn:
            extra.append((k.new_zeros(N, 1, self.embed_dim), v.new_zeros(N, 1, self.embed_dim)))
        n_extra = len(extra)
        if n_extra:
            k = torch.cat([k] + [e[0].to(k.dtype) for e in extra], dim=1)
            v = torch.cat([v] + [e[1].to(v.dtype) for e in extra], dim=1)
            if pad is not None:
                pad = F.pad(pad, (0, n_extra), value=False)
            if bias is not None:
                bias = F.pad(bias, (0, n_extra), value=0.0)
        return k, v, pad, bias, n_extra

    def _caller_layout(self, out, weights, unbatched: bool):
        """Batch-first results back in the caller's layout (unbatched, or sequence-first)."""
        if unbatched:
            return out.squeeze(0), (None if weights is None else weights.squeeze(0))
        if not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _batched(self, query, key, value, key_padding_mask):
        """Inputs as batch-first 3-d tensors; checks shapes against the constructor."""
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not torch.is_tensor(t) or t.ndim not in (2, 3):
                shape = tuple(t.shape) if torch.is_tensor(t) else type(t).__name__
                raise ValueError(
                    f"{name} must be a 3-d (batched) or 2-d (unbatched) tensor, got {shape}"
                )
        if not query.ndim == key.ndim == value.ndim:
            raise ValueError(
                "query, key and value must all be batched (3-d) or all unbatched (2-d), got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query[None], key[None], value[None]
            if torch.is_tensor(key_padding_mask) and key_padding_mask.ndim == 1:
                key_padding_mask = key_padding_mask[None]
        elif not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        for name, t, width in (
            ("query", query, self.embed_dim),
            ("key", key, self.kdim),
            ("value", value, self.vdim),
        ):
            if t.shape[-1] != width:
                raise ValueError(
                    f"{name} must have last dimension {width}, got shape {tuple(t.shape)}"
                )
        if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise ValueError(
                "query, key and value must share the batch size and key/value the length, got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)} (batch first)"
            )
        wdtype = self.q_proj.weight.dtype
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not t.is_floating_point():
                raise InputTypeError(f"{name} must be a floating-point tensor, got {t.dtype}")
            if t.dtype != wdtype and not torch.is_autocast_enabled(t.device.type):
                raise InputTypeError(
                    f"{name} has dtype {t.dtype} but the module's parameters are {wdtype}: "
                    f"convert the input (x.to({wdtype})) or the module (.to({t.dtype})), or "
                    "run under torch.autocast"
                )
            _check_finite_input(name, t)
        return query, key, value, key_padding_mask, unbatched

    def _softmax(self, q, k, v, pad, causal, bias, n_extra, need_weights):
        """Exact attention (SDPA); masks merged into one additive mask as MHA does."""
        N, _, L, _ = q.shape
        St = k.shape[2]
        p = self.dropout if self.training else 0.0
        plain_causal = causal and pad is None and bias is None and n_extra == 0
        full = None
        if bias is not None:
            full = bias.to(q.dtype)
        elif not plain_causal and (causal or pad is not None):
            full = self._full_bias(pad, causal, L, St, n_extra, q.device).to(q.dtype)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=full, dropout_p=p, is_causal=plain_causal
        )
        weights = None
        if need_weights:
            logits = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            if plain_causal:
                logits = logits.masked_fill(_future(L, St, q.device), float("-inf"))
            elif full is not None:
                logits = logits + full
            weights = logits.softmax(-1)
        return out, weights

    def _kernel(self, q, k, v, pad, causal, bias, n_extra, need_weights):
        """Linear attention in O(L), or through the explicit weights for a general mask."""
        fm = self.feature_map
        N, _, L, _ = q.shape
        St = k.shape[2]
        if bias is not None:
            w = _kernel_weights(fm, q, k, bias, self.eps)
            return (w @ v.to(w.dtype)), (w if need_weights else None)
        if causal and n_extra:
            # the appended keys are visible to every query: put them first, behind dummy
            # queries whose outputs are dropped, and run the causal prefix sums
            order = torch.cat([torch.arange(St - n_extra, St), torch.arange(St - n_extra)]).to(
                k.device
            )
            qx = torch.cat([q.new_zeros(N, q.shape[1], n_extra, q.shape[3]), q], dim=2)
            padx = None if pad is None else pad[:, order]
            out = _kernel_core(
                qx, k[:, :, order], v[:, :, order], fm, padx, True, self.eps, self.chunk_size
            )[:, :, n_extra:]
        else:
            out = _kernel_core(q, k, v, fm, pad, causal, self.eps, self.chunk_size)
        weights = None
        if need_weights:
            full = self._full_bias(pad, causal, L, St, n_extra, q.device)
            weights = _kernel_weights(fm, q, k, full, self.eps)
        return out, weights

    def extra_repr(self) -> str:
        """The settings shown by ``repr`` (torch's hook).

        Examples
        --------
        >>> from meanfield.attention.mha import KernelAttention
        >>> KernelAttention(8, 2).extra_repr()
        "embed_dim=8, num_heads=2, feature='favor', tie_qk=False, batch_first=True, eps=1e-06"
        """
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, feature={self.feature!r}, "
            f"tie_qk={self.tie_qk}, batch_first={self.batch_first}, eps={self.eps}"
        )


def _convert_mha_state(
    module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors
):
    """load_state_dict pre-hook: accept an ``nn.MultiheadAttention`` state_dict.

    ``in_proj_weight`` / ``in_proj_bias`` (packed) or ``q_proj_weight``/``k_proj_weight``/
    ``v_proj_weight`` (kdim/vdim != embed_dim) become ``q_proj``/``k_proj``/``v_proj``;
    ``out_proj.*``, ``bias_k`` and ``bias_v`` have the same names. A softmax module has no
    feature map, so the module's current ``omega`` is kept.
    """
    E = module.embed_dim
    packed_w = state_dict.pop(prefix + "in_proj_weight", None)
    packed_b = state_dict.pop(prefix + "in_proj_bias", None)
    sep = [state_dict.pop(prefix + f"{n}_proj_weight", None) for n in ("q", "k", "v")]
    if packed_w is None and packed_b is None and all(w is None for w in sep):
        return  # a KernelAttention state_dict
    weights = list(packed_w.split(E)) if packed_w is not None else sep
    biases = list(packed_b.split(E)) if packed_b is not None else [None] * 3
    if module.tie_qk:
        for name, pair in (("weight", weights[:2]), ("bias", biases[:2])):
            if pair[0] is not None and not torch.equal(pair[0], pair[1]):
                raise ValueError(
                    f"cannot load an nn.MultiheadAttention state_dict into tie_qk=True: its "
                    f"query and key projection {name}s differ"
                )
    for n, w, b in zip(("q", "k", "v"), weights, biases, strict=True):
        if n == "k" and module.tie_qk:
            continue
        if w is not None:
            state_dict[prefix + f"{n}_proj.weight"] = w
        if b is not None:
            state_dict[prefix + f"{n}_proj.bias"] = b
    if module.feature_map is not None:
        for key, value in module.feature_map.state_dict(prefix=prefix + "feature_map.").items():
            state_dict.setdefault(key, value)
