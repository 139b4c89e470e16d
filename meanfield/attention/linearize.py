r"""Linearize a Transformer: swap every softmax self-attention for kernel attention in place.

:func:`linearize` takes a loaded model and replaces the attention *computation* of each layer
while keeping its pretrained projections (the practice of Hedgehog, Zhang et al. 2024, and
LoLCATs, 2024): each layer gets its own feature map (one ``Omega`` per head, seeded
``seed * 1000 + layer``), and

.. math::

    \mathrm{softmax}\Big(\frac{q_t \cdot k_s}{\sqrt{d_h}}\Big)
    \;\longrightarrow\;
    \frac{\varphi_\ell(q_t) \cdot \varphi_\ell(k_s)}{\sum_{s'} \varphi_\ell(q_t) \cdot
    \varphi_\ell(k_{s'})}

costs ``O(L m d_h)`` instead of ``O(L^2 d_h)``. Two model kinds are handled:

* **Hugging Face BERT-family encoders** (``transformers``): the attention function is swapped
  through ``transformers``' own extension point, ``AttentionInterface`` (registered here as
  ``"meanfield"``, with a mask function that hands the attention the 2-d padding mask instead
  of an ``L x S`` additive mask, so the padding is applied in ``O(L)``). The model's
  ``query``/``key``/``value`` layers, its scaling and its code are unchanged; the feature map
  is the attribute ``feature_map`` of each self-attention module.
* **torch's own containers** (``nn.TransformerEncoder``/``Decoder``/``nn.Transformer`` and
  their layers): each layer's self-attention (``self_attn``; a decoder layer's
  cross-attention ``multihead_attn`` is kept as it is) is replaced by
  :meth:`KernelAttention.from_mha <meanfield.attention.mha.KernelAttention.from_mha>`, and
  the encoders' nested-tensor fast path is switched off, because torch decides on it when the
  container is built (it would otherwise hand the kernel attention a nested tensor in eval
  mode and fail with ``NestedTensorImpl doesn't support sizes``).

Attention dropout. Linear attention forms no weight matrix to drop from. In ``transformers``
models the attention dropout rate is applied to the *output* of each head's attention
instead; both are unbiased, ``E[drop(A) V] = A V = E[drop(A V)]``, so in expectation the layer
computes the same thing and only the noise differs. torch containers are converted the same
way: :meth:`KernelAttention.from_mha <meanfield.attention.mha.KernelAttention.from_mha>`
keeps the layer's rate, applied to the attention output (weight dropout for
``feature_map="softmax"``, as torch); the layers' other dropouts are kept. Each torch layer
has one ``Omega`` shared by its heads.

Self-attention only. A ``transformers`` model with cross-attention (a decoder,
``config.add_cross_attention=True``) is refused: ``transformers`` sets the attention function
for the whole model, so its cross-attention would change too.

Linearizing again replaces the kernel: a second call (any feature map, ``"softmax"``
included) gives every self-attention a new feature map drawn as a first call would, on the
same pretrained projections, so ``linearize(m, a)`` then ``linearize(m, b)`` equals
``linearize(m, b)`` alone (tested). A learned ``Omega`` is thereby replaced by a prior draw.

With ``feature_map="softmax"`` the attention is exact softmax attention through the package's
:func:`~meanfield.attention.linear.softmax_attention` with the same padding path, so the
linearized model equals the original to float rounding (tested for both kinds).

Examples
--------
>>> import torch
>>> from meanfield.attention.linearize import linearize
>>> layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True)
>>> enc = torch.nn.TransformerEncoder(layer, 2).eval()
>>> x = torch.randn(3, 7, 16)
>>> pad = torch.zeros(3, 7, dtype=torch.bool)
>>> pad[0, 5:] = True
>>> with torch.no_grad():
...     ref = enc(x, src_key_padding_mask=pad)
...     out = linearize(enc, "softmax")(x, src_key_padding_mask=pad)
>>> torch.allclose(out[:, :5], ref[:, :5], atol=1e-5)
True
>>> _ = linearize(enc, "favor", n_features=16)
>>> type(enc.layers[0].self_attn).__name__
'KernelAttention'
"""

from __future__ import annotations

import math

import torch.nn.functional as F
from torch import nn

from ..contract import Param, declare
from ..errors import InputError, InputTypeError
from .features import AttentionFeatureMap, make_feature_map
from .hedgehog import HedgehogFeatureMap
from .linear import ATTENTION_KINDS, kernel_attention, softmax_attention
from .mha import KernelAttention

__all__ = [
    "HF_ATTENTION_NAME",
    "linearize",
    "attention_modules",
    "feature_maps_of",
    "record_attention_inputs",
]

#: The name under which the kernel attention is registered with ``transformers``.
HF_ATTENTION_NAME = "meanfield"

_TORCH_LAYERS = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)


def _is_hf_attention(module: nn.Module) -> bool:
    """A ``transformers`` BERT-style attention: q/k/v linears and a config."""
    return (
        all(isinstance(getattr(module, n, None), nn.Linear) for n in ("query", "key", "value"))
        and hasattr(module, "config")
        and hasattr(module.config, "num_attention_heads")
    )


def _hf_cross_attention(model: nn.Module) -> list[nn.Module]:
    """The ``transformers`` cross-attention modules of ``model`` (a decoder's attention over
    an encoder's output): ``*CrossAttention`` classes, or q/k/v modules under a wrapper
    flagged ``is_cross_attention``."""
    found = {}
    for module in model.modules():
        if _is_hf_attention(module) and type(module).__name__.endswith("CrossAttention"):
            found[id(module)] = module
        if getattr(module, "is_cross_attention", False) is True:
            for sub in module.modules():
                if _is_hf_attention(sub):
                    found[id(sub)] = sub
    return list(found.values())


def _hf_self_attention(model: nn.Module) -> list[nn.Module]:
    """The ``transformers`` self-attention modules of ``model``, in layer order."""
    cross = {id(m) for m in _hf_cross_attention(model)}
    return [m for m in model.modules() if _is_hf_attention(m) and id(m) not in cross]


def _torch_layers(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, _TORCH_LAYERS)]


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules :func:`linearize` acts on, in layer order.

    Cross-attention (``multihead_attn`` of ``nn.TransformerDecoderLayer``, a ``transformers``
    cross-attention) is not listed: :func:`linearize` does not replace it.

    Parameters
    ----------
    model : torch.nn.Module

    Returns
    -------
    list of torch.nn.Module
        ``transformers`` self-attention modules; ``nn.MultiheadAttention`` and
        :class:`~meanfield.attention.mha.KernelAttention` modules other than the
        cross-attention of torch's decoder layers.

    See Also
    --------
    linearize : replaces these modules.
    feature_maps_of : the feature maps after the replacement.
    meanfield.attention.mha.KernelAttention : what they become.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.linearize import attention_modules
    >>> layer = torch.nn.TransformerEncoderLayer(8, 2, batch_first=True)
    >>> len(attention_modules(torch.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)))
    3
    >>> len(attention_modules(torch.nn.TransformerDecoderLayer(8, 2)))  # self-attention only
    1
    """
    cross = {id(m) for m in _hf_cross_attention(model)}
    cross |= {
        id(layer.multihead_attn)
        for layer in model.modules()
        if isinstance(layer, nn.TransformerDecoderLayer)
    }
    found = []
    for module in model.modules():
        if id(module) in cross:
            continue
        if _is_hf_attention(module) or isinstance(module, (nn.MultiheadAttention, KernelAttention)):
            found.append(module)
    return found


def feature_maps_of(model: nn.Module) -> list[AttentionFeatureMap | None]:
    """Each linearized layer's feature map (None for softmax), in layer order.

    See Also
    --------
    linearize : installs the maps.
    attention_modules : the layers they belong to.
    meanfield.attention.learn_features.distil_feature_maps : trains them on a teacher.
    meanfield.attention.features.AttentionFeatureMap : their base class.

    References
    ----------
    Zhang, M., Bhatia, K., Kumbong, H. and Ré, C. (2024). The Hedgehog & the Porcupine:
    expressive linear attentions with softmax mimicry. ICLR 2024, arXiv:2402.04347.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.linearize import feature_maps_of, linearize
    >>> layer = torch.nn.TransformerEncoderLayer(8, 2, dropout=0.0, batch_first=True)
    >>> enc = linearize(torch.nn.TransformerEncoder(layer, 2), "porf", n_features=4)
    >>> [tuple(fm.omega.shape) for fm in feature_maps_of(enc)]
    [(4, 4), (4, 4)]
    """
    return [getattr(m, "feature_map", None) for m in attention_modules(model)]


# ---------------------------------------------------------------------------------------
# transformers: the attention function and its mask
# ---------------------------------------------------------------------------------------
def _hf_kernel_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs
):
    """``transformers`` attention function: ``(N, H, L, d)`` in, ``(N, L, H, d)`` out.

    ``attention_mask`` is the 2-d keep-mask of the padding (True = real token) made by the
    registered mask function, or None.
    """
    if attention_mask is not None and attention_mask.ndim != 2:
        raise InputError(
            "kernel attention takes a 2-d padding mask (batch, S); got a "
            f"{attention_mask.ndim}-d attention_mask of shape {tuple(attention_mask.shape)} "
            "(a general mask cannot be applied in O(L))"
        )
    pad = None if attention_mask is None else ~attention_mask.bool()
    d = query.shape[-1]
    if scaling is not None and not math.isclose(scaling, d**-0.5):
        # the feature maps assume the 1/sqrt(d) scale: fold any other one into the queries
        query = query * (scaling * math.sqrt(d))
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # (N, L, H, d)
    causal = bool(getattr(module, "is_causal", False)) and q.shape[1] > 1
    record = getattr(module, "_meanfield_record", None)
    if record is not None:
        record.append((query.detach(), key.detach(), pad))
    fm = getattr(module, "feature_map", None)
    if fm is None:
        out = softmax_attention(q, k, v, key_padding_mask=pad, causal=causal)
    else:
        out = kernel_attention(q, k, v, fm, key_padding_mask=pad, causal=causal)
    if dropout > 0 and module.training:
        out = F.dropout(out, dropout, training=True)  # output dropout (module notes)
    return out, None


def _register_hf_attention():
    """Register the attention and its mask function with ``transformers`` (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register(HF_ATTENTION_NAME, _hf_kernel_attention)
    # the flash-attention mask function returns the 2-d padding mask (or None): what O(L)
    # attention consumes
    AttentionMaskInterface.register(HF_ATTENTION_NAME, flash_attention_mask)


def _layer_feature_map(kind, head_dim, num_heads, n_features, seed):
    """One layer's feature map: None for softmax; the published Hedgehog's trainable per-head
    map (identity start, ``m = n_features or d_h``); else a per-head random draw."""
    if kind == "softmax":
        return None
    if kind == "hedgehog":
        return HedgehogFeatureMap(head_dim, num_heads, n_features=n_features)
    return make_feature_map(kind, head_dim, n_features, seed=seed, num_heads=num_heads)


def _linearize_hf(model, modules, kind, n_features, seed):
    _register_hf_attention()
    for layer, module in enumerate(modules):
        H = module.config.num_attention_heads
        d = module.config.hidden_size // H
        fm = _layer_feature_map(kind, d, H, n_features, seed * 1000 + layer)
        if fm is not None:
            # a module attribute: registered as a submodule, so the published Hedgehog's
            # parameters are the model's parameters (trained by fine-tuning, saved with it)
            fm = fm.to(module.query.weight.device)
        module.feature_map = fm
    # one config is shared by every layer of the model; set it on the top-level model so
    # transformers validates the name (registered above)
    tops = {id(m): m for m in model.modules() if hasattr(m, "set_attn_implementation")}
    for top in tops.values():
        top.set_attn_implementation(HF_ATTENTION_NAME)
    for module in modules:
        module.config._attn_implementation = HF_ATTENTION_NAME


# ---------------------------------------------------------------------------------------
# torch containers
# ---------------------------------------------------------------------------------------
def _linearize_torch(model, kind, n_features, seed):
    layer = 0
    for module in model.modules():
        if isinstance(module, nn.TransformerEncoder):
            # decided at construction; the kernel attention must never see a nested tensor
            module.enable_nested_tensor = False
            module.use_nested_tensor = False
        if not isinstance(module, _TORCH_LAYERS):
            continue
        # self-attention only: a decoder layer's cross-attention (multihead_attn) is kept
        attn = module.self_attn
        if isinstance(attn, KernelAttention):
            # linearized before: a new kernel on the same projections and options
            options = dict(
                tie_qk=attn.tie_qk,
                eps=attn.eps,
                chunk_size=attn.chunk_size,
                redraw_every=attn.redraw_every,
            )
            attn = attn.to_mha()
        else:
            options = {}
        if isinstance(attn, nn.MultiheadAttention):
            if kind == "hedgehog" and n_features not in (None, attn.head_dim):
                # KernelAttention builds the paper's square map (m = head_dim) only
                raise InputError(
                    f"n_features must be the head dimension {attn.head_dim} (or None) for "
                    f"feature_map 'hedgehog' on torch's containers, got {n_features}"
                )
            # the layer's dropout rate: on the attention output for kernel features
            # (no weight matrix), as the transformers path above does
            module.self_attn = KernelAttention.from_mha(
                attn, kind, n_features=n_features or 64, seed=seed * 1000 + layer, **options
            )
        layer += 1


@declare(
    Param("feature_map", "choice", "the attention every self-attention layer gets",
          choices=ATTENTION_KINDS),
    Param("n_features", "int", "features m per head (None: 64, or d_h for hedgehog)", low=1,
          optional=True),
    # layer l draws with seed * 1000 + l, which must stay a seed (< 2^63) for 1000 layers
    Param("seed", "int", "layer l draws its Omega with seed * 1000 + l", low=0,
          high=(2**63 - 1) // 1000 - 1),
)  # fmt: skip
def linearize(
    model: nn.Module, feature_map: str = "favor", *, n_features: int | None = None, seed: int = 0
) -> nn.Module:
    """Replace every self-attention of ``model`` by kernel attention, in place.

    Only self-attention: the cross-attention of torch's decoder layers is kept, and a
    ``transformers`` model with cross-attention is refused. A model linearized before is
    linearized again: every self-attention gets the new feature map (module notes), on its
    pretrained projections.

    Parameters
    ----------
    model : torch.nn.Module
        A ``transformers`` BERT-family model (or a module holding one, such as
        :class:`~meanfield.attention.pretrained.PretrainedClassifier`), or a module built from
        torch's ``nn.Transformer*`` containers.
    feature_map : {"softmax", "favor", "porf", "porf-softplus", "softmaxfeat", "hedgehog"}
        ``"softmax"``: exact attention through the package's path (equal to the original);
        ``"hedgehog"``: the published Hedgehog map of every layer
        (:class:`~meanfield.attention.hedgehog.HedgehogFeatureMap`, per head, separate query
        and key maps, identity start: trainable parameters, distilled with
        :func:`meanfield.attention.learn_features.distil_feature_maps`); otherwise the random
        feature map of every layer (a prior draw: the *vanilla* map; learn its ``Omega`` with
        :func:`meanfield.attention.learn_features.distil_feature_maps` or
        :func:`meanfield.attention.learn_features.phase_a_pretrained`).
    n_features : int, optional
        Features ``m`` per head (softmaxfeat and hedgehog have ``2 m`` outputs); default 64
        for the random maps and ``d_h`` (the paper's square map) for hedgehog.
    seed : int
        Layer ``l`` draws its ``Omega`` with seed ``seed * 1000 + l`` (hedgehog draws
        nothing).

    Returns
    -------
    torch.nn.Module
        ``model`` itself, changed in place; its training mode is kept.

    Raises
    ------
    meanfield.errors.InputError
        An unknown feature map, a model with no self-attention it can replace, or a
        ``transformers`` model with cross-attention (before any change).
    meanfield.errors.InputTypeError
        ``model`` not a torch module; ``n_features`` or ``seed`` not an integer (a boolean
        included).

    See Also
    --------
    meanfield.attention.linear.kernel_attention : the attention the layers then call.
    meanfield.attention.learn_features.distil_feature_maps : learns the maps afterwards.
    meanfield.attention.pretrained.load_pretrained_classifier : loads a model to linearize.

    References
    ----------
    Zhang, M., Arora, S., Chalamala, R. et al. (2024). LoLCATs: on low-rank linearizing of
    large language models. arXiv:2410.10254.
    Choromanski, K. et al. (2021). Rethinking attention with Performers. ICLR 2021 (FAVOR+).

    Examples
    --------
    >>> import tempfile, torch
    >>> from meanfield.attention.linearize import feature_maps_of, linearize
    >>> from meanfield.attention.pretrained import load_pretrained_classifier, save_tiny_bert
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> model = load_pretrained_classifier(folder)[0].eval()
    >>> ids = torch.tensor([[2, 9, 10, 3], [2, 11, 3, 0]])
    >>> with torch.no_grad():
    ...     ref = model(ids, ids == 0)
    ...     same = linearize(model, "softmax")(ids, ids == 0)
    >>> torch.allclose(same, ref, atol=1e-5)
    True
    >>> _ = linearize(model, "softmaxfeat", n_features=8)
    >>> [fm.kind for fm in feature_maps_of(model)]
    ['softmaxfeat', 'softmaxfeat']
    >>> with torch.no_grad():  # linearized again: back to exact attention
    ...     back = linearize(model, "softmax")(ids, ids == 0)
    >>> torch.allclose(back, ref, atol=1e-5), feature_maps_of(model)
    (True, [None, None])
    >>> _ = linearize(model, "hedgehog")  # the published map: trainable, m = d_h = 8
    >>> [type(fm).__name__ for fm in feature_maps_of(model)]
    ['HedgehogFeatureMap', 'HedgehogFeatureMap']
    >>> sum(p.numel() for fm in feature_maps_of(model) for p in fm.parameters())
    576
    """
    if not isinstance(model, nn.Module):
        raise InputTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if n_features is None:
        n_features = None if feature_map == "hedgehog" else 64
    hf = _hf_self_attention(model)
    torch_layers = _torch_layers(model)
    cross = _hf_cross_attention(model)
    if cross:
        # transformers sets the attention function for the whole model: its cross-attention
        # would run through it too, which this function neither documents nor tests
        raise InputError(
            f"linearize handles encoders: {type(model).__name__} has {len(cross)} "
            f"transformers cross-attention module(s) ({type(cross[0]).__name__}; "
            "config.add_cross_attention=True), which it does not replace"
        )
    if not hf and not torch_layers:
        raise InputError(
            f"linearize found no self-attention to replace in {type(model).__name__}: it "
            "handles transformers BERT-family models and torch's nn.Transformer* containers"
        )
    if hf:
        _linearize_hf(model, hf, feature_map, n_features, seed)
    if torch_layers:
        _linearize_torch(model, feature_map, n_features, seed)
    if hasattr(model, "config") and isinstance(model.config, dict):
        model.config["attention"] = feature_map
    return model


class record_attention_inputs:
    """Context manager: collect each linearized HF layer's queries, keys and padding.

    Inside it, every call of a linearized ``transformers`` self-attention appends
    ``(query, key, pad)`` (``query``/``key`` of shape ``(N, H, L, d_h)``, detached; ``pad``
    ``(N, L)`` bool, True = padding, or None) to ``records[layer]``.

    Parameters
    ----------
    model : torch.nn.Module
        A model linearized by :func:`linearize` (any feature map, softmax included).
    softmax : bool
        Run the layers with exact softmax attention meanwhile (the *teacher*: the
        original model's attention), restoring the feature maps on exit.

    See Also
    --------
    linearize : makes the layers it records.
    feature_maps_of : the maps fitted to the recorded inputs.
    meanfield.attention.learn_features.record_inputs : batches of records over a data set.

    References
    ----------
    Zhang, M., Bhatia, K., Kumbong, H. and Ré, C. (2024). The Hedgehog & the Porcupine:
    expressive linear attentions with softmax mimicry. ICLR 2024, arXiv:2402.04347.

    Examples
    --------
    >>> import tempfile, torch
    >>> from meanfield.attention.linearize import linearize, record_attention_inputs
    >>> from meanfield.attention.pretrained import load_pretrained_classifier, save_tiny_bert
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> model = linearize(load_pretrained_classifier(folder)[0].eval(), "favor", n_features=8)
    >>> ids = torch.tensor([[2, 9, 10, 3]])
    >>> with torch.no_grad(), record_attention_inputs(model) as records:
    ...     _ = model(ids)
    >>> len(records), tuple(records[0][0][0].shape)
    (2, (1, 2, 4, 8))
    """

    def __init__(self, model: nn.Module, softmax: bool = False):
        self.modules = _hf_self_attention(model)
        if not self.modules:
            raise InputError("record_attention_inputs needs a linearized transformers model")
        self.softmax = bool(softmax)

    def __enter__(self):
        self.records = [[] for _ in self.modules]
        self.saved = []
        for module, rec in zip(self.modules, self.records, strict=True):
            module._meanfield_record = rec
            self.saved.append(getattr(module, "feature_map", None))
            if self.softmax:
                module.feature_map = None
        return self.records

    def __exit__(self, *exc):
        for module, fm in zip(self.modules, self.saved, strict=True):
            module._meanfield_record = None
            module.feature_map = fm
        return False
