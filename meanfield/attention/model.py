r"""A small Transformer encoder classifier for sentences and sentence pairs.

Token + learned position (+ segment, for pairs) embeddings, ``n_layers`` pre-LayerNorm
encoder blocks whose self-attention is :class:`~meanfield.attention.mha.KernelAttention`
(softmax or any feature map), a final LayerNorm, masked mean pooling over real tokens, and a
linear head. Each layer has its own feature matrix ``Omega`` (shared by its heads, and by
its queries and keys), seeded ``seed * 1000 + layer``.

Per block, with pre-LayerNorm residual branches,

.. math::

    x \leftarrow x + \mathrm{drop}\big(\mathrm{attn}(\mathrm{LN}_1(x))\big), \qquad
    x \leftarrow x + \mathrm{drop}\big(\mathrm{FFN}(\mathrm{LN}_2(x))\big),

and the logits are ``head(mean over real tokens of LN_f(x))``.

Examples
--------
>>> import torch
>>> from meanfield.attention.model import TransformerClassifier
>>> model = TransformerClassifier(50, d_model=16, n_heads=2, n_layers=1, d_ff=32,
...                               max_length=8, n_features=8, seed=0)
>>> ids = torch.tensor([[2, 7, 9, 3, 0, 0], [2, 5, 3, 0, 0, 0]])
>>> model(ids).shape
torch.Size([2, 2])
"""

from __future__ import annotations

import torch
from torch import nn

from .._validation import check_int
from ..errors import InputError
from .features import AttentionFeatureMap
from .linear import ATTENTION_KINDS
from .mha import KernelAttention
from .tokenizer import PAD_ID

__all__ = ["EncoderBlock", "TransformerClassifier"]


class EncoderBlock(nn.Module):
    """Pre-LN encoder block: ``x + drop(attn(LN(x)))``, then ``x + drop(FFN(LN(x)))``.

    Parameters
    ----------
    d_model : int
        Width of the token representations.
    n_heads : int
        Attention heads (``d_model % n_heads == 0``).
    d_ff : int
        Hidden width of the feed-forward network (GELU).
    dropout : float
        Dropout in [0, 1) on the residual branches and inside the FFN.
    attn_kwargs : dict
        Keyword arguments of :class:`~meanfield.attention.mha.KernelAttention`
        (``feature``, ``n_features``, ``tie_qk``, ``eps``, ``seed``).

    See Also
    --------
    TransformerClassifier : a stack of these blocks.
    meanfield.attention.mha.KernelAttention : its attention.
    meanfield.attention.linearize.linearize : kernel attention in torch's own encoder layers.

    References
    ----------
    Vaswani, A. et al. (2017). Attention is all you need. NeurIPS 2017, arXiv:1706.03762.

    Xiong, R. et al. (2020). On layer normalization in the Transformer architecture.
    ICML 2020, arXiv:2002.04745 (the pre-LN block).

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.model import EncoderBlock
    >>> blk = EncoderBlock(16, 2, 32, 0.0, dict(feature="favor", n_features=8, seed=0))
    >>> blk(torch.zeros(1, 5, 16)).shape
    torch.Size([1, 5, 16])
    """

    def __init__(self, d_model, n_heads, d_ff, dropout, attn_kwargs):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        # (batch, L, d_model) blocks; torch's defaults are (L, batch, d_model)
        self.attn = KernelAttention(d_model, n_heads, batch_first=True, **attn_kwargs)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.GELU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model)
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, x, padding_mask=None):
        """Apply the block.

        Parameters
        ----------
        x : torch.Tensor, shape (batch, L, d_model)
            Token representations.
        padding_mask : torch.BoolTensor, shape (batch, L), optional
            True = padding (those keys are masked out of the attention).

        Returns
        -------
        torch.Tensor, shape (batch, L, d_model)

        Examples
        --------
        A padded key changes no output (the second sequence is the first with one pad):

        >>> import torch
        >>> from meanfield.attention.model import EncoderBlock
        >>> _ = torch.manual_seed(0)
        >>> blk = EncoderBlock(8, 2, 16, 0.0, dict(feature="porf", n_features=8))
        >>> x = torch.randn(1, 4, 8)
        >>> pad = torch.tensor([[False, False, False, True]])
        >>> out = blk(x, pad)
        >>> torch.allclose(out[:, :3], blk(x[:, :3])[:, :3], atol=1e-6)
        True
        """
        h = self.ln1(x)
        # the weights are not used: need_weights=False keeps linear attention O(L)
        a, _ = self.attn(h, h, h, key_padding_mask=padding_mask, need_weights=False)
        x = x + self.drop(a)
        return x + self.drop(self.ff(self.ln2(x)))


class TransformerClassifier(nn.Module):
    """Transformer encoder classifier.

    Parameters
    ----------
    vocab_size : int
        Number of token ids (>= 4; id 0 is padding).
    n_classes : int
        Number of classes (>= 2).
    d_model, n_heads, n_layers, d_ff : int
        Width, heads (``d_model % n_heads == 0``), depth and feed-forward width.
    max_length : int
        Longest input (positions embedded).
    dropout : float
        Dropout in [0, 1) on embeddings, residual branches and the FFN.
    attention : {"softmax", "favor", "porf", "porf-softplus", "softmaxfeat"}
        Attention kind of every layer.
    n_features : int
        Random features per layer (linear attention only).
    tie_qk : bool
        Q = K in every layer.
    pair : bool
        Add segment embeddings (sentence pairs).
    eps : float
        Linear-attention denominator epsilon.
    seed : int
        Seeds the parameter initialisation and the feature maps.

    Attributes
    ----------
    config : dict
        The constructor's arguments, validated (to rebuild the model).

    Raises
    ------
    meanfield.errors.InputError
        An integer argument below its minimum.
    ValueError
        ``d_model`` not divisible by ``n_heads``, an unknown ``attention``, or ``dropout``
        outside [0, 1).

    See Also
    --------
    EncoderBlock : one layer.
    meanfield.attention.training.train : fits it.
    meanfield.attention.pretrained.PretrainedClassifier : the pretrained counterpart.
    meanfield.attention.phases.phase_a : aligns its feature maps.

    References
    ----------
    Vaswani, A. et al. (2017). Attention is all you need. NeurIPS 2017, arXiv:1706.03762.

    Katharopoulos, A., Vyas, A., Pappas, N. and Fleuret, F. (2020). Transformers are RNNs:
    fast autoregressive transformers with linear attention. ICML 2020, arXiv:2006.16236.

    Choromanski, K. et al. (2021). Rethinking attention with Performers. ICLR 2021,
    arXiv:2009.14794.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.model import TransformerClassifier
    >>> model = TransformerClassifier(50, d_model=16, n_heads=2, n_layers=2, d_ff=32,
    ...                               max_length=8, attention="softmax", pair=True)
    >>> ids = torch.tensor([[2, 7, 3, 9, 3, 0]])
    >>> seg = torch.tensor([[0, 0, 0, 1, 1, 0]])
    >>> model(ids, segment_ids=seg).shape, model.head_dim
    (torch.Size([1, 2]), 8)
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        n_classes: int = 2,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 128,
        max_length: int = 64,
        dropout: float = 0.1,
        attention: str = "favor",
        n_features: int = 32,
        tie_qk: bool = False,
        pair: bool = False,
        eps: float = 1e-6,
        seed: int = 0,
    ):
        super().__init__()
        vocab_size = check_int("vocab_size", vocab_size, minimum=4)
        n_classes = check_int("n_classes", n_classes, minimum=2)
        n_layers = check_int("n_layers", n_layers)
        max_length = check_int("max_length", max_length)
        d_model = check_int("d_model", d_model)
        n_heads = check_int("n_heads", n_heads)
        d_ff = check_int("d_ff", d_ff)
        if d_model % n_heads:
            raise InputError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        if attention != "softmax":
            n_features = check_int("n_features", n_features)
        if attention not in ATTENTION_KINDS:
            raise InputError(
                f"unknown attention {attention!r}; choose one of {', '.join(ATTENTION_KINDS)}"
            )
        if not 0.0 <= float(dropout) < 1.0:
            raise InputError(f"dropout must be in [0, 1), got {dropout!r}")
        seed = check_int("seed", seed, minimum=0)
        self.config = dict(
            vocab_size=vocab_size,
            n_classes=n_classes,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            d_ff=d_ff,
            max_length=max_length,
            dropout=dropout,
            attention=attention,
            n_features=n_features,
            tie_qk=tie_qk,
            pair=pair,
            eps=eps,
            seed=seed,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.tok_emb = nn.Embedding(vocab_size, d_model, padding_idx=PAD_ID)
            self.pos_emb = nn.Embedding(max_length, d_model)
            self.seg_emb = nn.Embedding(2, d_model) if pair else None
            self.emb_drop = nn.Dropout(dropout)
            self.blocks = nn.ModuleList(
                EncoderBlock(
                    d_model,
                    n_heads,
                    d_ff,
                    dropout,
                    dict(
                        feature=attention,
                        n_features=n_features,
                        tie_qk=tie_qk,
                        eps=eps,
                        seed=seed * 1000 + i,
                    ),
                )
                for i in range(n_layers)
            )
            self.ln_f = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, n_classes)

    @property
    def head_dim(self) -> int:
        """Width d_h = d_model / n_heads of one attention head.

        Examples
        --------
        >>> from meanfield.attention.model import TransformerClassifier
        >>> TransformerClassifier(50, d_model=16, n_heads=4, n_features=8).head_dim
        4
        """
        return self.config["d_model"] // self.config["n_heads"]

    def feature_maps(self) -> list[AttentionFeatureMap | None]:
        """Each layer's feature map (None for softmax layers).

        Returns
        -------
        list of (AttentionFeatureMap or None), one per layer
            The modules holding each layer's feature matrix ``Omega`` (m × d_h).

        Examples
        --------
        >>> from meanfield.attention.model import TransformerClassifier
        >>> model = TransformerClassifier(50, d_model=16, n_heads=2, n_layers=2,
        ...                               attention="softmax")
        >>> model.feature_maps()
        [None, None]
        """
        return [blk.attn.feature_map for blk in self.blocks]

    def _embed(self, input_ids, segment_ids):
        if input_ids.ndim != 2:
            raise InputError(f"input_ids must be (batch, length), got {tuple(input_ids.shape)}")
        L = input_ids.shape[1]
        if L > self.config["max_length"]:
            raise InputError(
                f"input length {L} exceeds max_length = {self.config['max_length']} of the model"
            )
        pos = torch.arange(L, device=input_ids.device)
        x = self.tok_emb(input_ids) + self.pos_emb(pos)[None]
        if self.seg_emb is not None:
            if segment_ids is None:
                segment_ids = torch.zeros_like(input_ids)
            x = x + self.seg_emb(segment_ids)
        return self.emb_drop(x)

    def _mask(self, input_ids, padding_mask):
        if padding_mask is None:
            return input_ids == PAD_ID
        if padding_mask.shape != input_ids.shape:
            raise InputError(
                f"padding_mask must have the shape of input_ids {tuple(input_ids.shape)}, "
                f"got {tuple(padding_mask.shape)}"
            )
        return padding_mask.bool()

    def forward(self, input_ids, padding_mask=None, segment_ids=None):
        """Class logits.

        Parameters
        ----------
        input_ids : torch.LongTensor, shape (batch, L)
            Token ids, L ≤ ``max_length``.
        padding_mask : torch.BoolTensor, shape (batch, L), optional
            True = padding (default: ``input_ids == 0``).
        segment_ids : torch.LongTensor, shape (batch, L), optional
            0/1 sentence of each token (pairs).

        Returns
        -------
        torch.Tensor, shape (batch, n_classes)
            Unnormalised class scores (apply a softmax for probabilities).

        Raises
        ------
        ValueError
            ``input_ids`` is not 2-D, is longer than ``max_length``, or ``padding_mask`` has
            another shape.

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.model import TransformerClassifier
        >>> model = TransformerClassifier(50, n_classes=3, d_model=16, n_heads=2, n_features=8)
        >>> logits = model(torch.tensor([[2, 7, 9, 3, 0], [2, 11, 3, 0, 0]]))
        >>> logits.shape
        torch.Size([2, 3])
        """
        mask = self._mask(input_ids, padding_mask)
        x = self._embed(input_ids, segment_ids)
        for blk in self.blocks:
            x = blk(x, mask)
        x = self.ln_f(x)
        keep = (~mask).unsqueeze(-1).to(x.dtype)
        pooled = (x * keep).sum(1) / keep.sum(1).clamp_min(1.0)
        return self.head(pooled)

    @torch.no_grad()
    def layer_projections(self, input_ids, padding_mask=None, segment_ids=None, layer: int = 0):
        """Token queries and keys of one layer, as its attention projects them.

        The input of Phase A (:mod:`meanfield.attention.phases`): exactly what the layer's
        feature map receives (before its ``d_h^(-1/4)`` scaling). Runs in the module's
        current mode.

        Parameters
        ----------
        input_ids : torch.LongTensor, shape (batch, L)
            Token ids.
        padding_mask : torch.BoolTensor, shape (batch, L), optional
            True = padding (default: ``input_ids == 0``).
        segment_ids : torch.LongTensor, shape (batch, L), optional
            0/1 sentence of each token (pairs).
        layer : int, default 0
            Which layer, in [0, n_layers).

        Returns
        -------
        q, k : torch.Tensor, each of shape (batch, L, heads, d_h)

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.model import TransformerClassifier
        >>> model = TransformerClassifier(50, d_model=16, n_heads=2, n_layers=2, n_features=8)
        >>> q, k = model.layer_projections(torch.tensor([[2, 7, 9, 3]]), layer=1)
        >>> q.shape
        torch.Size([1, 4, 2, 8])
        """
        layer = check_int("layer", layer, minimum=0)
        if layer >= len(self.blocks):
            raise InputError(f"layer must be in [0, {len(self.blocks) - 1}], got {layer}")
        mask = self._mask(input_ids, padding_mask)
        x = self._embed(input_ids, segment_ids)
        for blk in self.blocks[:layer]:
            x = blk(x, mask)
        h = self.blocks[layer].ln1(x)
        attn = self.blocks[layer].attn
        return attn.project_queries(h), attn.project_keys(h)

    @torch.no_grad()
    def pooled_keys(self, input_ids, padding_mask=None, segment_ids=None) -> list[torch.Tensor]:
        r"""Per-layer, per-head keys averaged over the real tokens of each sequence.

        These are the sequence representations of Phase A (before the ``d_h^(-1/4)``
        scaling, which the caller applies). Runs in the module's current mode.

        .. math::

            \bar k_{b,h} = \frac{1}{L_b} \sum_{t \le L_b} k_{b,t,h}.

        Parameters
        ----------
        input_ids : torch.LongTensor, shape (batch, L)
            Token ids.
        padding_mask : torch.BoolTensor, shape (batch, L), optional
            True = padding (default: ``input_ids == 0``).
        segment_ids : torch.LongTensor, shape (batch, L), optional
            0/1 sentence of each token (pairs).

        Returns
        -------
        list of torch.Tensor, one per layer, shape (batch, heads, d_h)

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.model import TransformerClassifier
        >>> model = TransformerClassifier(50, d_model=16, n_heads=2, n_layers=2, n_features=8)
        >>> [k.shape for k in model.pooled_keys(torch.tensor([[2, 7, 9, 3, 0]]))]
        [torch.Size([1, 2, 8]), torch.Size([1, 2, 8])]
        """
        mask = self._mask(input_ids, padding_mask)
        x = self._embed(input_ids, segment_ids)
        keep = (~mask).to(x.dtype)[:, :, None, None]
        out = []
        for blk in self.blocks:
            k = blk.attn.project_keys(blk.ln1(x))  # (B, L, H, d_h)
            out.append((k * keep).sum(1) / keep.sum(1).clamp_min(1.0))
            x = blk(x, mask)
        return out
