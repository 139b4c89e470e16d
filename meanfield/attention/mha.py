"""``KernelAttention``: kernel attention as a drop-in for ``torch.nn.MultiheadAttention``.

The module form of the functional API of :mod:`meanfield.attention.linear`:
``nn.MultiheadAttention``'s constructor, defaults, ``forward`` signature, return values,
parameter names and ``state_dict`` keys, with the attention computed by a kernel feature map
in ``O(L)`` (or exactly, ``feature="softmax"``). The masks are checked and planned by
:mod:`meanfield.attention.masks` (what runs in ``O(L)``, what needs the explicit
``(N, H, L, S)`` weights), torch's ``state_dict`` layouts are read and written by
:mod:`meanfield.attention.state_layout`, and the attention itself is the head-major core of
:mod:`meanfield.attention.linear`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .._validation import check_choice, check_int, check_positive
from ..contract import Param, declare
from ..errors import InputError, InputTypeError
from .features import AttentionFeatureMap, make_feature_map
from .hedgehog import HedgehogFeatureMap
from .linear import ATTENTION_KINDS, _check_finite_input, _kernel_core
from .masks import _full_bias, _future, _kernel_weights, _open_columns, plan_masks
from .state_layout import _load_state_pre_hook, _tied_state_as_mha

__all__ = ["KernelAttention"]


def _linear_init(weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    """``nn.Linear``'s initialisation of one projection block (in place, views allowed).

    Kaiming-uniform weight (``a = sqrt(5)``), bias uniform in ``+-1/sqrt(fan_in)``: the draws
    of one ``nn.Linear`` layer per block, in the order Q, K, V.
    """
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in = weight.shape[1]
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        nn.init.uniform_(bias, -bound, bound)


class KernelAttention(nn.Module):
    """Multi-head attention with a kernel feature map, a drop-in for ``nn.MultiheadAttention``.

    Same constructor arguments **and defaults**, ``forward`` signature and defaults, return
    values, parameter names and ``state_dict`` keys as :class:`torch.nn.MultiheadAttention`,
    plus the feature-map options: ``batch_first=False`` reads ``(L, N, E)``,
    ``need_weights=True`` returns the head-averaged weights (``average_attn_weights``), and
    unbatched ``(L, E)`` inputs, ``key_padding_mask``, ``attn_mask`` and ``is_causal`` are
    accepted. It works inside ``nn.TransformerEncoderLayer``, ``nn.TransformerEncoder``
    (also when the encoder was built for ``nn.MultiheadAttention`` and hands it nested
    tensors) and ``nn.TransformerDecoderLayer`` (assign it to ``layer.self_attn`` /
    ``layer.multihead_attn``, e.g. with :meth:`from_mha`), and with ``feature="softmax"``
    reproduces ``nn.MultiheadAttention`` to float rounding.

    Kernel attention never forms the ``L x S`` weights unless asked; ``need_weights=True``
    (the default, as torch's) asks, at ``O(L S)`` memory: pass ``need_weights=False`` when
    the weights are not used (torch's Transformer layers do).

    Parameters and state_dict (``nn.MultiheadAttention``'s layout). ``in_proj_weight``
    ``(3E, E)`` (rows Q, K, V) when ``kdim == vdim == embed_dim``, otherwise
    ``q_proj_weight`` ``(E, E)``, ``k_proj_weight`` ``(E, kdim)``, ``v_proj_weight``
    ``(E, vdim)`` (the others registered as None, as torch does); ``in_proj_bias`` ``(3E,)``
    (None with ``bias=False``); ``out_proj`` (an ``nn.Linear``); ``bias_k``, ``bias_v``
    ``(1, 1, E)`` with ``add_bias_kv``. They are the tensors ``forward`` uses, so writing to
    them changes the module. Kernel features add ``feature_map.omega`` and
    ``feature_map._extra_state`` (``Omega`` is learned by Phase A, so it stays persistent):

    * ``ka.load_state_dict(mha.state_dict())`` is strict: a state_dict without
      ``feature_map.*`` keys (``nn.MultiheadAttention``'s, or a softmax module's) keeps the
      module's own ``Omega``.
    * ``mha.load_state_dict(ka.state_dict())`` is strict for ``feature="softmax"``; for kernel
      features pass ``strict=False`` (only the ``feature_map.*`` keys are unexpected), or
      use :meth:`to_mha`.
    * ``tie_qk=True`` (queries and keys share one projection, no torch equivalent) holds
      ``qk_proj_weight``, ``v_proj_weight``, ``qk_proj_bias``, ``v_proj_bias``; its state_dict
      is still torch's (the shared block written as both Q and K), and loading checks that
      Q and K are equal.
    * A state_dict of another feature map (``feature_map._extra_state`` records its
      ``kind``: a FAVOR+ state into a PORF module, whose ``Omega`` has the same shape) is
      refused with :class:`~meanfield.errors.InputError` before any tensor is overwritten.

    Initialisation: each Q, K, V block and ``out_proj`` as an ``nn.Linear``, not torch's
    Xavier-uniform with zero biases (the draws of one ``nn.Linear`` per block, in the order
    Q, K, V). ``bias_k``/``bias_v``: Xavier normal, as torch.

    Dropout (train mode only). ``feature="softmax"``: on the attention weights, as
    ``nn.MultiheadAttention``. Kernel features form no weight matrix, so the dropout is on
    the attention output (the concatenated head outputs, before ``out_proj``), as
    :func:`meanfield.attention.linearize.linearize` does for ``transformers`` models: both
    are unbiased, ``E[drop(A) V] = A V = E[drop(A V)]``; the returned weights are then the
    undropped kernel weights.

    Other differences from ``nn.MultiheadAttention`` (documented choices):

    * ``is_causal=True`` without ``attn_mask`` is accepted (torch requires the mask as well);
      with ``attn_mask`` the mask must be the causal mask (checked).
    * NaN or inf in ``query``, ``key`` or ``value`` is refused on the CPU with
      :class:`~meanfield.errors.InputError` (torch returns NaN): the package's rule that
      finite input never gives a silent NaN and non-finite input a named error. Not checked
      on an accelerator (each check would synchronise with the host), where it passes through.
    * A query that sees no key (every key padded or masked) gets attention 0, so the module
      returns ``out_proj.bias`` there, with zero weights and finite gradients, in every path
      and for every feature (``eps = 0`` included). torch 2.13 gives that on its
      ``scaled_dot_product_attention`` path (``need_weights=False``), but NaN with
      ``need_weights=True`` and on its eval/no-grad fast path.
    * ``torch.jit.script`` is not supported (nested tensors, mask planning and the
      feature-map objects are outside TorchScript); ``torch.compile`` compiles the module.
    * ``_reset_parameters`` (torch's private name) and ``reset_parameters`` initialise as
      ``nn.Linear`` (below), not with torch's Xavier-uniform and zero biases.
      ``merge_masks`` is torch's own method.
    * It reports ``_qkv_same_embed_dim = False``: torch's fused fast paths
      (``nn.TransformerEncoderLayer`` in eval mode, the nested-tensor path of
      ``nn.TransformerEncoder``) would compute *softmax* attention straight from
      ``in_proj_weight``, bypassing ``forward``; the flag keeps every container on the regular
      path. A nested-tensor input (``batch_first``, no masks: the nested sizes are the padding)
      is padded, attended with the matching padding mask and returned nested; its weights
      are not returned (None).

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
        Dropout probability in [0, 1), train mode only: on the attention weights for
        softmax, on the attention output (before ``out_proj``) for kernel features.
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
        ``(N, L, E)`` inputs and outputs when True, ``(L, N, E)`` when False (the default,
        as torch's).
    device, dtype
        Factory arguments of the parameters (the feature matrix ``omega`` stays float32).
    feature : {"softmax", "favor", "porf", "porf-softplus", "softmaxfeat", "hedgehog"}
        ``"softmax"`` is exact attention (scaled_dot_product_attention); ``"hedgehog"`` is
        linear attention with the published Hedgehog map, trained per head
        (:class:`~meanfield.attention.hedgehog.HedgehogFeatureMap`, ``m = head_dim``); the
        others are linear attention with that random feature map
        (:func:`~meanfield.attention.features.make_feature_map`).
    n_features : int
        Number of random features ``m`` per head (ignored for softmax and hedgehog).
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

    See Also
    --------
    meanfield.attention.linear.kernel_attention : the functional form (one call, no module).
    meanfield.attention.masks.plan_masks : which masks run in O(L).
    meanfield.attention.linearize.linearize : swap the attention of a pretrained Transformer.
    meanfield.attention.model.EncoderBlock : an encoder block built on it.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention is all you need", NeurIPS 2017.
    .. [2] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021 (FAVOR+ and
       the positive orthogonal random features, the redraw of ``omega``).
    .. [3] A. Katharopoulos, A. Vyas, N. Pappas and F. Fleuret, "Transformers are RNNs: fast
       autoregressive transformers with linear attention", ICML 2020.
    .. [4] M. Zhang, K. Bhatia, H. Kumbong and C. Ré, "The Hedgehog & the Porcupine: expressive
       linear attentions with softmax mimicry", ICLR 2024 (``feature="hedgehog"``).

    Examples
    --------
    With ``feature="softmax"`` and the weights of an ``nn.MultiheadAttention`` it gives the
    same output and weights; the layout is torch's ``(L, N, E)`` unless ``batch_first``:

    >>> import torch
    >>> from meanfield.attention.mha import KernelAttention
    >>> _ = torch.manual_seed(0)
    >>> mha = torch.nn.MultiheadAttention(8, 2)
    >>> x = torch.randn(5, 2, 8)  # (L, N, E)
    >>> ref, ref_w = mha(x, x, x)
    >>> out, w = KernelAttention.from_mha(mha, "softmax")(x, x, x)
    >>> torch.allclose(out, ref, atol=1e-6), torch.allclose(w, ref_w, atol=1e-6)
    (True, True)
    >>> attn = KernelAttention(8, 2, batch_first=True, feature="favor", n_features=16, seed=0)
    >>> out, weights = attn(x, x, x, is_causal=True, need_weights=False)  # O(L)
    >>> out.shape, weights
    (torch.Size([5, 2, 8]), None)
    """

    # see the class notes: reporting False keeps torch's containers off their fused softmax
    # fast paths, which would bypass forward (nn.MultiheadAttention reports False for
    # kdim/vdim != embed_dim, so the containers handle it)
    _qkv_same_embed_dim = False

    @declare(
        Param("embed_dim", "int", "model dimension E (a multiple of num_heads)", low=1),
        Param("num_heads", "int", "number of heads", low=1),
        Param("dropout", "real", "dropout probability (as nn.MultiheadAttention's)", low=0.0,
              high=1.0, high_open=True),
        Param("bias", "flag", "biases of the input and output projections"),
        Param("add_bias_kv", "flag", "append a learnt bias row to the keys and values"),
        Param("add_zero_attn", "flag", "append a zero row to the keys and values"),
        Param("kdim", "int", "key dimension (None: embed_dim)", low=1, optional=True),
        Param("vdim", "int", "value dimension (None: embed_dim)", low=1, optional=True),
        Param("batch_first", "flag", "inputs (N, L, E) instead of (L, N, E)"),
        Param("feature", "choice", "feature map of the kernel", choices=ATTENTION_KINDS),
        Param("n_features", "int", "random features m per head (ignored for softmax, hedgehog)",
              low=1),
        Param("tie_qk", "flag", "one projection for the queries and the keys"),
        Param("eps", "real", "denominator epsilon of linear attention", low=0.0),
        Param("seed", "seed", "seed of the feature map's initial omega"),
        Param("redraw_every", "int", "in training, redraw omega every this many calls (0: never)",
              low=0),
        Param("chunk_size", "int", "chunk length of the causal prefix sums", low=1),
    )  # fmt: skip
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
        batch_first: bool = False,
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
            raise InputError(
                f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})"
            )
        check_choice("feature", feature, ATTENTION_KINDS)
        if not 0.0 <= float(dropout) < 1.0:
            raise InputError(f"dropout must be in [0, 1), got {dropout!r}")
        kdim = embed_dim if kdim is None else check_int("kdim", kdim)
        vdim = embed_dim if vdim is None else check_int("vdim", vdim)
        if tie_qk and kdim != embed_dim:
            raise InputError(
                f"tie_qk needs kdim == embed_dim, got kdim={kdim}, embed_dim={embed_dim}"
            )
        factory = {"device": device, "dtype": dtype}
        E = embed_dim
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

        def param(*shape):
            return nn.Parameter(torch.empty(*shape, **factory))

        # torch's names; the unused ones registered as None, as nn.MultiheadAttention does
        for name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"):
            self.register_parameter(name, None)
        self.register_parameter("in_proj_bias", None)
        if self.tie_qk:
            self.qk_proj_weight = param(E, E)
            self.v_proj_weight = param(E, vdim)
            self.qk_proj_bias = param(E) if bias else None
            self.v_proj_bias = param(E) if bias else None
        elif kdim == E and vdim == E:
            self.in_proj_weight = param(3 * E, E)
        else:
            self.q_proj_weight = param(E, E)
            self.k_proj_weight = param(E, kdim)
            self.v_proj_weight = param(E, vdim)
        if bias and not self.tie_qk:
            self.in_proj_bias = param(3 * E)
        # the Q, K, V draws come before out_proj's (the order of the earlier nn.Linear layers)
        with torch.no_grad():
            for w, b in self._blocks():
                _linear_init(w, b)
        self.out_proj = nn.Linear(E, E, bias=bias, **factory)
        if add_bias_kv:
            self.bias_k = param(1, 1, E)
            self.bias_v = param(1, 1, E)
            nn.init.xavier_normal_(self.bias_k)
            nn.init.xavier_normal_(self.bias_v)
        else:
            self.bias_k = self.bias_v = None
        self.feature_map: AttentionFeatureMap | HedgehogFeatureMap | None = None
        if feature == "hedgehog":
            # the published Hedgehog: trained per-head maps (m = head_dim), nothing drawn
            if self.redraw_every:
                raise InputError(
                    "redraw_every must be 0 with feature 'hedgehog': its maps are trained, "
                    f"not drawn at random; got {self.redraw_every}"
                )
            fm = HedgehogFeatureMap(self.head_dim, num_heads)
            self.feature_map = fm.to(**{k: v for k, v in factory.items() if v is not None})
        elif feature != "softmax":
            n_features = check_int("n_features", n_features)
            fm = make_feature_map(feature, self.head_dim, n_features, seed=seed)
            self.feature_map = fm.to(device) if device is not None else fm
        self.register_load_state_dict_pre_hook(_load_state_pre_hook)
        self.register_state_dict_post_hook(_tied_state_as_mha)

    # -- parameters -----------------------------------------------------------------------
    def __getattr__(self, name: str):
        # tie_qk has no packed parameter, but torch's containers read in_proj_weight /
        # in_proj_bias in their fast-path checks (``.requires_grad`` of each): give them the
        # packed blocks [QK; QK; V] (a new tensor: write to qk_proj_* / v_proj_* instead)
        if name in ("in_proj_weight", "in_proj_bias") and self.__dict__.get("tie_qk"):
            # (AttributeError while __init__ has not made the blocks yet)
            qk = nn.Module.__getattr__(self, "qk_proj_" + name[8:])
            v = nn.Module.__getattr__(self, "v_proj_" + name[8:])
            if qk is None or v is None or qk.shape[-1:] != v.shape[-1:]:
                return None
            return torch.cat([qk, qk, v])
        return nn.Module.__getattr__(self, name)

    def _blocks(self) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """The distinct ``(weight, bias)`` projection blocks (Q, K, V; QK, V if tied)."""
        if self.tie_qk:
            return [
                (self.qk_proj_weight, self.qk_proj_bias),
                (self.v_proj_weight, self.v_proj_bias),
            ]
        return self._projections()

    def _projections(self) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """``[(w_q, b_q), (w_k, b_k), (w_v, b_v)]``: the parameters or views of them.

        Views (``chunk``), not copies, so a write to ``in_proj_weight`` / ``in_proj_bias``
        is what the next forward uses, and gradients reach the parameters.
        """
        if self.tie_qk:
            qk, v = self._blocks()
            return [qk, qk, v]
        if self.in_proj_weight is not None:
            ws = self.in_proj_weight.chunk(3)
        else:
            ws = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        bs = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        return list(zip(ws, bs, strict=True))

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
        with torch.no_grad():
            for w, b in self._blocks():
                _linear_init(w, b)
        self.out_proj.reset_parameters()
        if self.bias_k is not None:
            nn.init.xavier_normal_(self.bias_k)
            nn.init.xavier_normal_(self.bias_v)
        if isinstance(self.feature_map, HedgehogFeatureMap):
            self.feature_map.reset_parameters()  # the identity start
        elif self.feature_map is not None:
            self.feature_map.new_feature_map(self.feature_map.seed)

    def _reset_parameters(self) -> None:
        """``nn.MultiheadAttention``'s private name of :meth:`reset_parameters` (the same
        initialisation: ``nn.Linear``'s, see the class notes; code written for torch's module
        calls this one).

        Examples
        --------
        >>> from meanfield.attention.mha import KernelAttention
        >>> attn = KernelAttention(8, 2, feature="softmax")
        >>> attn._reset_parameters()
        """
        self.reset_parameters()

    def merge_masks(
        self,
        attn_mask: torch.Tensor | None,
        key_padding_mask: torch.Tensor | None,
        query: torch.Tensor,
    ) -> tuple[torch.Tensor | None, int | None]:
        """``nn.MultiheadAttention.merge_masks``: the mask type, and both masks combined.

        torch's method itself, applied to this module (``num_heads``), so the semantics are
        torch's in every version: only ``key_padding_mask`` gives type 1 and that mask; an
        ``attn_mask`` gives type 2 and it expanded to ``(N, num_heads, L, L)``, plus the
        padding mask broadcast over heads and queries when both are given (``+``: logical
        *or* for bool masks, the sum of additive float masks); neither gives ``(None,
        None)``. Self-attention shapes only (``S = L``), as torch's.

        Parameters
        ----------
        attn_mask : torch.Tensor, shape (L, L) or (N * num_heads, L, L), optional
        key_padding_mask : torch.Tensor, shape (N, L), optional
        query : torch.Tensor, shape (N, L, E)
            Batch-first; only its shape is read.

        Returns
        -------
        merged_mask : torch.Tensor or None
            ``key_padding_mask`` (type 1) or shape ``(N, num_heads, L, L)`` (type 2).
        mask_type : int or None
            1, 2, or None without masks.

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.mha import KernelAttention
        >>> attn = KernelAttention(8, 2, batch_first=True)
        >>> pad = torch.tensor([[False, False, True]])
        >>> causal = torch.ones(3, 3, dtype=torch.bool).triu(1)
        >>> merged, kind = attn.merge_masks(causal, pad, torch.zeros(1, 3, 8))
        >>> kind, merged.shape, merged[0, 0].int().tolist()
        (2, torch.Size([1, 2, 3, 3]), [[0, 1, 1], [0, 0, 1], [0, 0, 1]])
        """
        return nn.MultiheadAttention.merge_masks(self, attn_mask, key_padding_mask, query)

    # -- nn.MultiheadAttention conversions ------------------------------------------------
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
            Source module; its embed_dim, num_heads, dropout, bias, add_bias_kv,
            add_zero_attn, kdim, vdim, batch_first, device and dtype are copied, and its
            weights loaded.
        feature_map : {"softmax", "favor", "porf", "porf-softplus", "softmaxfeat"}
            Attention kind of the new module (``"softmax"`` reproduces ``mha``).
        n_features, seed
            Feature-map size and seed (ignored for softmax).
        dropout : float, optional
            Dropout probability (default ``mha.dropout``): on the attention weights for
            softmax, on the attention output for kernel features (class notes).
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
        >>> mha = torch.nn.MultiheadAttention(8, 2, dropout=0.1)  # as in torch's layers
        >>> attn = KernelAttention.from_mha(mha, "porf", n_features=16)
        >>> attn.batch_first, torch.equal(attn.in_proj_weight, mha.in_proj_weight)
        (False, True)
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise InputTypeError(f"mha must be an nn.MultiheadAttention, got {type(mha).__name__}")
        ref = mha.out_proj.weight
        new = cls(
            mha.embed_dim,
            mha.num_heads,
            dropout=mha.dropout if dropout is None else dropout,
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

    def to_mha(self) -> nn.MultiheadAttention:
        """The ``nn.MultiheadAttention`` with this module's projections (softmax attention).

        The same constructor options (``dropout`` included, with torch's meaning: on the
        attention weights), weights, device, dtype and training mode; the feature map is left
        out. For ``feature="softmax"`` it is this module; for kernel features it is the
        softmax attention the kernel approximates. ``tie_qk``: the shared projection becomes
        equal Q and K blocks.

        Returns
        -------
        torch.nn.MultiheadAttention

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.mha import KernelAttention
        >>> ka = KernelAttention(8, 2, feature="softmax").eval()
        >>> mha = ka.to_mha()
        >>> x = torch.randn(5, 2, 8)
        >>> torch.allclose(mha(x, x, x)[0], ka(x, x, x)[0], atol=1e-6)
        True
        >>> torch.equal(mha.in_proj_weight, ka.in_proj_weight)
        True
        """
        ref = self.out_proj.weight
        mha = nn.MultiheadAttention(
            self.embed_dim,
            self.num_heads,
            dropout=self.dropout,
            bias=self.out_proj.bias is not None,
            add_bias_kv=self.bias_k is not None,
            add_zero_attn=self.add_zero_attn,
            kdim=self.kdim,
            vdim=self.vdim,
            batch_first=self.batch_first,
            device=ref.device,
            dtype=ref.dtype,
        )
        result = mha.load_state_dict(self.state_dict(), strict=False)
        # every projection key must have been taken: only the feature map's may be left over
        stray = [k for k in result.unexpected_keys if not k.startswith("feature_map.")]
        if result.missing_keys or stray:  # pragma: no cover - the layouts are kept in step
            raise RuntimeError(
                f"to_mha: state_dict layouts differ (missing {result.missing_keys}, "
                f"unexpected {stray})"
            )
        return mha.train(self.training)

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
        w, b = self._projections()[0]
        return self._split(F.linear(query, w, b))

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
        w, b = self._projections()[1]
        return self._split(F.linear(key, w, b))

    def project_values(self, value: torch.Tensor) -> torch.Tensor:
        """``(batch, S, vdim) -> (batch, S, heads, d_h)`` (batch-first, whatever ``batch_first``).

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.mha import KernelAttention
        >>> attn = KernelAttention(8, 2, vdim=6)
        >>> x = torch.randn(1, 5, 6)
        >>> torch.allclose(attn.project_values(x).reshape(1, 5, 8), x @ attn.v_proj_weight.T
        ...                + attn.in_proj_bias[16:])
        True
        """
        w, b = self._projections()[2]
        return self._split(F.linear(value, w, b))

    def _maybe_redraw(self):
        fm = self.feature_map
        if fm is None or not self.training or self.redraw_every == 0 or fm.learned:
            return
        if self._calls % self.redraw_every == 0 and self._calls > 0:
            self._redraws += 1
            fm.new_feature_map(fm.seed + 1 if fm.seed < 2**62 else 0)
        self._calls += 1

    # -- forward --------------------------------------------------------------------------
    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = True,
        attn_mask: torch.Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ):
        """Attention of ``query`` over ``key``/``value`` (``nn.MultiheadAttention.forward``).

        Parameters
        ----------
        query : torch.Tensor, shape (L, N, E), or (N, L, E) if batch_first, or (L, E)
        key : torch.Tensor, shape (S, N, kdim), or (N, S, kdim) if batch_first, or (S, kdim)
        value : torch.Tensor, shape (S, N, vdim), or (N, S, vdim) if batch_first, or (S, vdim)
            Nested tensors (``batch_first`` only, without masks) are accepted too.
        key_padding_mask : torch.Tensor, shape (N, S) or (S,), optional
            bool (True = ignore) or float (added to the attention logits).
        need_weights : bool
            Also return the attention weights (default True, as torch; ``O(L S)`` memory:
            pass False for the ``O(L)`` path).
        attn_mask : torch.Tensor, shape (L, S) or (N * num_heads, L, S), optional
            bool (True = not allowed) or float (added to the logits). The exact causal mask
            runs in O(L); any other mask through the explicit weights (class notes).
        average_attn_weights : bool
            Average the returned weights over heads (default True, as torch).
        is_causal : bool
            Causal attention (``L == S``); ``attn_mask``, if given, must be the causal mask.

        Returns
        -------
        attn_output : torch.Tensor, shape (L, N, E), or (N, L, E) if batch_first, or (L, E)
        attn_weights : torch.Tensor or None
            (N, L, S') averaged or (N, num_heads, L, S') (no N for unbatched input), where
            ``S'`` counts the ``add_bias_kv``/``add_zero_attn`` keys; None unless
            ``need_weights`` (and for nested input). In the output's dtype (the autocast
            dtype under ``torch.autocast``, as torch); a row of zeros for a query that sees
            no key (its output is then ``out_proj.bias``).

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
        >>> out, w = attn(x, x, x)
        >>> out.shape, w.shape, torch.allclose(w.sum(-1), torch.ones(5))
        (torch.Size([5, 8]), torch.Size([5, 5]), True)
        """
        nested = self._unnest(query, key, value, key_padding_mask, attn_mask)
        if nested is not None:
            layout, q_lengths, query, key, value, key_padding_mask = nested
        query, key, value, key_padding_mask, unbatched = self._batched(
            query, key, value, key_padding_mask
        )
        N, L, _ = query.shape
        pad, causal, bias = plan_masks(
            key_padding_mask, attn_mask, is_causal, N, self.num_heads, L, key.shape[1]
        )
        self._maybe_redraw()
        (wq, bq), (wk, bk), (wv, bv) = self._projections()
        k, v, pad, bias, n_extra = self._append_extra_keys(
            F.linear(key, wk, bk), F.linear(value, wv, bv), pad, bias
        )
        # head-major (N, H, length, d)
        q, k, v = (self._split(t).transpose(1, 2) for t in (F.linear(query, wq, bq), k, v))
        attend = self._softmax if self.feature_map is None else self._kernel
        out, weights = attend(q, k, v, pad, causal, bias, n_extra, need_weights)
        out = out.transpose(1, 2).reshape(N, L, self.embed_dim).to(query.dtype)
        if self.feature_map is not None and self.training and self.dropout > 0:
            # no weight matrix to drop from: dropout on the attention output (class notes)
            out = F.dropout(out, self.dropout, training=True)
        out = self.out_proj(out)
        if nested is not None:
            rows = [out[i, :n] for i, n in enumerate(q_lengths)]
            return torch.nested.as_nested_tensor(rows, layout=layout), None
        if weights is not None:
            # averaged in the compute dtype, returned in the output's: the input's, or under
            # torch.autocast the autocast dtype, as nn.MultiheadAttention (float64 is never cast)
            weights = (weights.mean(dim=1) if average_attn_weights else weights).to(out.dtype)
        return self._caller_layout(out, weights, unbatched)

    def _unnest(self, query, key, value, key_padding_mask, attn_mask):
        """Nested-tensor inputs as padded tensors with their padding mask, or None.

        ``nn.TransformerEncoder`` decides at construction to pass nested tensors (in eval
        mode, without gradient, with a padding mask), judging by the layers it was built with:
        an encoder built for ``nn.MultiheadAttention`` keeps doing so after the swap. Returns
        ``(layout, query_lengths, query, key, value, key_padding_mask)``.
        """
        flags = [torch.is_tensor(t) and t.is_nested for t in (query, key, value)]
        if not any(flags):
            return None
        if not all(flags):
            raise InputError("query, key and value must be all nested tensors or all regular ones")
        if not self.batch_first:
            raise InputError(
                "nested-tensor input needs batch_first=True (as nn.MultiheadAttention), got "
                "batch_first=False"
            )
        if key_padding_mask is not None or attn_mask is not None:
            raise InputError(
                "key_padding_mask and attn_mask must be None with nested-tensor input (the "
                "nested lengths are the padding)"
            )
        if query.dim() != 3:
            raise InputError(f"nested query must be 3-d (batch, L, E), got {query.dim()}-d")
        q_lengths = [t.shape[0] for t in query.unbind()]
        k_lengths = [t.shape[0] for t in key.unbind()]
        if k_lengths != [t.shape[0] for t in value.unbind()]:
            raise InputError("nested key and value must have the same lengths")
        S = max(k_lengths, default=0)
        lengths = torch.tensor(k_lengths, device=key.device)
        kpm = torch.arange(S, device=key.device)[None, :] >= lengths[:, None]
        padded = [torch.nested.to_padded_tensor(t, 0.0) for t in (query, key, value)]
        return (query.layout, q_lengths, *padded, kpm)

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
                pad = _open_columns(pad, n_extra)
            if bias is not None:
                bias = F.pad(bias, (0, n_extra), value=0.0)  # float: F.pad compiles fine
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
                raise InputError(
                    f"{name} must be a 3-d (batched) or 2-d (unbatched) tensor, got {shape}"
                )
        if not query.ndim == key.ndim == value.ndim:
            raise InputError(
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
                raise InputError(
                    f"{name} must have last dimension {width}, got shape {tuple(t.shape)}"
                )
        if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise InputError(
                "query, key and value must share the batch size and key/value the length, got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)} (batch first)"
            )
        wdtype = self.out_proj.weight.dtype
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
            full = _full_bias(pad, causal, L, St, n_extra, q.device).to(q.dtype)
        if not need_weights:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=full, dropout_p=p, is_causal=plain_causal
            )
            return out, None
        logits = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        dead = None
        if plain_causal:
            logits = logits.masked_fill(_future(L, St, q.device), float("-inf"))
        elif full is not None:
            logits = logits + full
            # a query that sees no key: weights 0 and output 0, finite, as torch's SDPA path
            # (nn.MultiheadAttention with need_weights=False) gives, not the NaN of a softmax
            # over -inf only; its logits are zeroed first so the gradient stays finite too
            dead = torch.isneginf(logits).all(-1, keepdim=True)
            logits = logits.masked_fill(dead, 0.0)
        weights = logits.softmax(-1)
        if dead is not None:
            weights = weights.masked_fill(dead, 0.0)
        if p > 0:
            # as nn.MultiheadAttention: the dropped weights make the output and are returned
            weights = F.dropout(weights, p, training=True)
        return weights @ v, weights

    def _kernel(self, q, k, v, pad, causal, bias, n_extra, need_weights):
        """Linear attention in O(L), or through the explicit weights for a general mask."""
        fm = self.feature_map
        N, _, L, _ = q.shape
        St = k.shape[2]
        if bias is None and self.eps == 0 and pad is not None and n_extra == 0:
            # eps = 0: a query that sees no key would be 0 / 0 in the O(L) form; then (only
            # then: one host read, and only for eps = 0) take the exact weights, where it is 0
            blind = pad.all(-1) if not causal else pad.int().cummin(-1).values.bool().any(-1)
            if bool(blind.any()):
                bias = _full_bias(pad, causal, L, St, n_extra, q.device)
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
            full = _full_bias(pad, causal, L, St, n_extra, q.device)
            weights = _kernel_weights(fm, q, k, full, self.eps)
        return out, weights

    def extra_repr(self) -> str:
        """The settings shown by ``repr`` (torch's hook).

        Examples
        --------
        >>> from meanfield.attention.mha import KernelAttention
        >>> KernelAttention(8, 2).extra_repr()
        "embed_dim=8, num_heads=2, feature='favor', tie_qk=False, batch_first=False, eps=1e-06"
        """
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, feature={self.feature!r}, "
            f"tie_qk={self.tie_qk}, batch_first={self.batch_first}, eps={self.eps}"
        )
