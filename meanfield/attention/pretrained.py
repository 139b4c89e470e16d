r"""A pretrained BERT-family encoder from a local directory, as a sentence classifier.

The encoder and its tokenizer are loaded by Hugging Face ``transformers`` (the optional extra
``pip install "meanfield[hf]"``), from a directory in the HF layout (``config.json``,
``model.safetensors``, ``tokenizer.json``), never from the hub: ``local_files_only=True``.
We use the ecosystem's own loader rather than a weight mapper of our own, so every BERT-family
checkpoint (BERT, MiniLM, RoBERTa, ...) loads with its own configuration and its own
attention code; :func:`meanfield.attention.linearize.linearize` then swaps the attention
function through ``transformers``' attention interface.

The classifier is the encoder, masked **mean pooling** over real tokens (the pooling the
sentence-transformers checkpoints such as all-MiniLM-L6-v2 were trained with), dropout and a
linear head:

.. math::

    \mathrm{logits} = W\, \mathrm{drop}\Big(\frac{1}{|S|} \sum_{t \in S} h_t\Big) + b,

with :math:`h_t` the last hidden states and :math:`S` the non-padding tokens. Its ``forward``
takes ``(input_ids, padding_mask, segment_ids)`` like
:class:`~meanfield.attention.model.TransformerClassifier`, so the package's training loop,
metrics and early stopping (:mod:`meanfield.attention.training`) apply unchanged.

Examples
--------
A tiny random BERT saved in the HF layout and loaded back (what the tests do):

>>> import tempfile
>>> from meanfield.attention.pretrained import load_pretrained_classifier, save_tiny_bert
>>> folder = tempfile.mkdtemp()
>>> save_tiny_bert(folder, seed=0)
>>> model, tokenizer = load_pretrained_classifier(folder, n_classes=2, seed=0)
>>> enc = encode_pretrained(tokenizer, ["a fine film", "dull"], None, [1, 0], max_length=8)
>>> model(enc.input_ids, enc.padding_mask, enc.segment_ids).shape
torch.Size([2, 2])
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..contract import Param, declare
from ..errors import DependencyError, InputError, InputTypeError, MissingFileError, NumericalError
from .training import EncodedData

__all__ = [
    "UNUSED_CHECKPOINT_PREFIXES",
    "PretrainedClassifier",
    "load_pretrained_classifier",
    "load_tokenizer",
    "encode_pretrained",
    "save_tiny_bert",
]


#: The parameters of the classification head and the loader, declared once for
#: :class:`PretrainedClassifier` and :func:`load_pretrained_classifier`.
HEAD_PARAMS: dict[str, Param] = {
    p.name: p
    for p in (
        Param("n_classes", "int", "classes of the new head", low=2),
        Param("dropout", "real", "dropout probability before the head", low=0.0, high=1.0,
              high_open=True),
        Param("seed", "seed", "seed of the head's initial weights"),
        Param("attn_implementation", "choice", "transformers' attention of the softmax model",
              choices=("sdpa", "eager")),
    )
}  # fmt: skip


def _transformers():
    """The ``transformers`` module, or a DependencyError with the install command."""
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        raise DependencyError(
            "loading a pretrained encoder needs transformers: pip install 'meanfield[hf]'"
        ) from exc
    return transformers


def _check_model_dir(path) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise MissingFileError(f"model directory {str(path)!r} does not exist")
    missing = [n for n in ("config.json", "tokenizer.json") if not (path / n).is_file()]
    if not any((path / n).is_file() for n in ("model.safetensors", "pytorch_model.bin")):
        missing.append("model.safetensors")
    if missing:
        raise MissingFileError(
            f"model directory {str(path)!r} is not in the Hugging Face layout: missing "
            f"{', '.join(missing)}"
        )
    return path


#: checkpoint keys the encoder does not use, by prefix: the pooler (the classifier pools by
#: the mean instead) and the heads of pretraining or fine-tuning (replaced by a new head)
UNUSED_CHECKPOINT_PREFIXES = ("pooler.", "cls.", "lm_head.", "classifier.", "qa_outputs.")


def _layer_numbers(keys) -> list[int]:
    """The layer indices ``i`` named by keys ``...layer.<i>....``."""
    import re

    found = {int(m.group(1)) for k in keys if (m := re.search(r"\blayer\.(\d+)\.", k))}
    return sorted(found)


def _summarise(keys, n: int = 4) -> str:
    keys = sorted(keys)
    more = f" and {len(keys) - n} more" if len(keys) > n else ""
    return ", ".join(keys[:n]) + more


def _check_loaded_encoder(path: Path, encoder, info: dict) -> None:
    """Refuse an encoder that ``transformers`` loaded with random, dropped or non-finite
    weights: every tensor must come from the checkpoint, every checkpoint tensor must be
    used (but the pooler and task heads, :data:`UNUSED_CHECKPOINT_PREFIXES`), with its
    declared shape, and every weight must be finite."""
    cfg = encoder.config
    missing = sorted(info.get("missing_keys") or [])
    unexpected = sorted(
        k
        for k in info.get("unexpected_keys") or []
        if not any(k.startswith(u) or f".{u}" in k for u in UNUSED_CHECKPOINT_PREFIXES)
    )
    mismatched = list(info.get("mismatched_keys") or [])
    where = f"model directory {str(path)!r}"
    if mismatched:
        shown = ", ".join(f"{k} {tuple(a)} in the checkpoint, {tuple(b)} in config.json"
                          for k, a, b in sorted(mismatched)[:3])  # fmt: skip
        raise InputError(
            f"{where}: config.json's sizes do not match the checkpoint's weights "
            f"({len(mismatched)} tensors: {shown}); config.json declares hidden_size="
            f"{cfg.hidden_size}, intermediate_size={getattr(cfg, 'intermediate_size', '?')}, "
            f"num_attention_heads={cfg.num_attention_heads}"
        )
    # layer count: layers wholly absent from the checkpoint, or present beyond the config's
    state_keys = list(encoder.state_dict())
    model_layers = _layer_numbers(state_keys)
    gone = set(missing)
    absent = [i for i in model_layers if all(k in gone for k in state_keys if f"layer.{i}." in k)]
    extra = _layer_numbers(unexpected)
    if absent or (extra and max(extra) >= cfg.num_hidden_layers):
        held = sorted((set(model_layers) - set(absent)) | set(extra))
        raise InputError(
            f"{where}: config.json declares num_hidden_layers={cfg.num_hidden_layers} but the "
            f"checkpoint holds {len(held)} layers (indices {held}); make them agree"
        )
    if missing:
        raise InputError(
            f"{where}: {len(missing)} tensors of the encoder are missing from the checkpoint "
            f"(they would be random): {_summarise(missing)}"
        )
    if unexpected:
        raise InputError(
            f"{where}: {len(unexpected)} checkpoint tensors are not used by the encoder "
            f"config.json describes: {_summarise(unexpected)}"
        )
    bad = [
        name
        for name, t in list(encoder.named_parameters()) + list(encoder.named_buffers())
        if t.is_floating_point() and not torch.isfinite(t).all()
    ]
    if bad:
        raise NumericalError(
            f"{where}: the checkpoint holds non-finite (NaN or inf) weights in {len(bad)} "
            f"tensors: {_summarise(bad)}"
        )


def load_tokenizer(path):
    """The fast tokenizer of a local model directory (its ``tokenizer.json``).

    Parameters
    ----------
    path : path-like
        A directory in the Hugging Face layout.

    Returns
    -------
    transformers.PreTrainedTokenizerFast

    See Also
    --------
    load_pretrained_classifier : loads the model and its tokenizer together.
    encode_pretrained : tokenises with it.

    References
    ----------
    Wolf, T. et al. (2020). Transformers: state-of-the-art natural language processing.
    EMNLP 2020 (System Demonstrations), 38–45.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.pretrained import load_tokenizer, save_tiny_bert
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> load_tokenizer(folder)("a film")["input_ids"][0] == load_tokenizer(folder).cls_token_id
    True
    """
    tf = _transformers()
    path = _check_model_dir(path)
    return tf.AutoTokenizer.from_pretrained(str(path), local_files_only=True)


class PretrainedClassifier(nn.Module):
    """A pretrained encoder with masked mean pooling and a linear head.

    Parameters
    ----------
    encoder : transformers.PreTrainedModel
        A BERT-family encoder (``AutoModel``) returning ``last_hidden_state``.
    n_classes : int
        Number of classes (>= 2).
    dropout : float
        Dropout before the head, in [0, 1).
    seed : int
        Seeds the head's initialisation.

    Attributes
    ----------
    encoder, head, config
        ``config`` records what the model is (for provenance).

    See Also
    --------
    load_pretrained_classifier : builds one from a model folder.
    meanfield.attention.linearize.linearize : kernel attention in its encoder.

    References
    ----------
    Devlin, J., Chang, M.-W., Lee, K. and Toutanova, K. (2019). BERT: pre-training of deep
    bidirectional transformers for language understanding. NAACL 2019.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.pretrained import load_pretrained_classifier, save_tiny_bert
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> model, _ = load_pretrained_classifier(folder)
    >>> model.config["n_layers"], model.config["n_heads"], model.head_dim
    (2, 2, 8)
    """

    @declare(*(HEAD_PARAMS[n] for n in ("n_classes", "dropout", "seed")))
    def __init__(self, encoder, n_classes: int = 2, dropout: float = 0.1, seed: int = 0):
        super().__init__()
        self.encoder = encoder
        cfg = encoder.config
        self.dropout = nn.Dropout(dropout)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.head = nn.Linear(cfg.hidden_size, n_classes)
        self.config = {
            "model_type": cfg.model_type,
            "n_layers": cfg.num_hidden_layers,
            "n_heads": cfg.num_attention_heads,
            "hidden_size": cfg.hidden_size,
            "n_classes": n_classes,
            "dropout": dropout,
            "attention": "softmax",
        }

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """torch's ``load_state_dict``, refusing a state of other attention first.

        Before any tensor is overwritten: a state whose feature maps are of another kind
        (:func:`~meanfield.attention.features.check_feature_states`) is refused, and, when
        ``strict``, a state with kernel feature maps for a softmax model or without them for
        a linearized one (linearize the model as the state was saved first).

        Raises
        ------
        meanfield.errors.InputError
            The state's attention is not the model's.

        Examples
        --------
        >>> import tempfile
        >>> from meanfield.attention.linearize import linearize
        >>> from meanfield.attention.pretrained import load_pretrained_classifier, save_tiny_bert
        >>> folder = tempfile.mkdtemp()
        >>> save_tiny_bert(folder)
        >>> favor = linearize(load_pretrained_classifier(folder)[0], "favor", n_features=4)
        >>> twin = linearize(load_pretrained_classifier(folder)[0], "favor", n_features=4)
        >>> twin.load_state_dict(favor.state_dict())
        <All keys matched successfully>
        """
        from .features import check_feature_states

        check_feature_states(self, state_dict)
        if strict:
            has = any(".feature_map." in k for k in self.state_dict())
            given = any(".feature_map." in k for k in state_dict)
            if has != given:
                raise InputError(
                    f"state_dict {'holds' if given else 'has no'} kernel feature maps but the "
                    f"model's attention is {self.config.get('attention', 'softmax')!r}: "
                    "linearize the model as the state was saved (linearize(model, <feature "
                    "map>)) before loading it, or load with strict=False"
                )
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    @property
    def head_dim(self) -> int:
        """Per-head width ``d_h`` of the encoder's attention.

        Examples
        --------
        >>> import tempfile
        >>> from meanfield.attention.pretrained import load_pretrained_classifier, save_tiny_bert
        >>> folder = tempfile.mkdtemp()
        >>> save_tiny_bert(folder)
        >>> load_pretrained_classifier(folder)[0].head_dim
        8
        """
        return self.config["hidden_size"] // self.config["n_heads"]

    def forward(self, input_ids, padding_mask=None, segment_ids=None):
        """Logits ``(batch, n_classes)`` of token ids ``(batch, L)``.

        Parameters
        ----------
        input_ids : torch.LongTensor, shape (batch, L)
        padding_mask : torch.BoolTensor, shape (batch, L), optional
            True = padding (default: no padding): the meaning of a bool
            ``key_padding_mask`` of :class:`torch.nn.MultiheadAttention`. Only bool is
            accepted: an integer or float 0/1 mask is ambiguous (torch *adds* a float mask to
            the logits; ``transformers``' ``attention_mask`` has 1 = real token) and is
            refused by name; pass ``mask.bool()`` when 1 marks padding, ``mask == 0`` when it
            is an ``attention_mask``.
        segment_ids : torch.LongTensor, shape (batch, L), optional
            Token type ids (0/1 sentence of each token).

        Returns
        -------
        torch.Tensor, shape (batch, n_classes)

        Raises
        ------
        meanfield.errors.InputTypeError
            ``padding_mask`` is not a bool tensor.
        meanfield.errors.InputError
            ``padding_mask`` does not have the shape of ``input_ids``.

        Examples
        --------
        >>> import tempfile, torch
        >>> from meanfield.attention.pretrained import load_pretrained_classifier, save_tiny_bert
        >>> folder = tempfile.mkdtemp()
        >>> save_tiny_bert(folder)
        >>> model = load_pretrained_classifier(folder)[0].eval()
        >>> ids = torch.tensor([[2, 9, 10, 3, 0], [2, 11, 3, 0, 0]])
        >>> a = model(ids, ids == 0)
        >>> b = model(ids[1:, :3], ids[1:, :3] == 0)  # padding changes nothing
        >>> torch.allclose(a[1:], b, atol=1e-5)
        True
        """
        keep = None if padding_mask is None else ~_check_padding_mask(padding_mask, input_ids)
        h = self.encoder(
            input_ids=input_ids,
            attention_mask=None if keep is None else keep.long(),
            token_type_ids=segment_ids,
        ).last_hidden_state
        if keep is None:
            pooled = h.mean(1)
        else:
            w = keep.to(h.dtype).unsqueeze(-1)
            pooled = (h * w).sum(1) / w.sum(1).clamp_min(1.0)
        return self.head(self.dropout(pooled))


def _check_padding_mask(mask, input_ids) -> torch.Tensor:
    """The bool padding mask, or a named error (never ``~`` of an integer mask: -1/-2)."""
    if not torch.is_tensor(mask) or mask.dtype != torch.bool:
        got = f"dtype {mask.dtype}" if torch.is_tensor(mask) else type(mask).__name__
        raise InputTypeError(
            f"padding_mask must be a bool tensor (True = padding, as the key_padding_mask of "
            f"torch.nn.MultiheadAttention), got {got}; pass mask.bool() if 1 marks padding, "
            "or mask == 0 if it is a transformers attention_mask (1 = real token)"
        )
    if torch.is_tensor(input_ids) and mask.shape != input_ids.shape:
        raise InputError(
            f"padding_mask must have the shape of input_ids {tuple(input_ids.shape)}, got "
            f"{tuple(mask.shape)}"
        )
    return mask


@declare(*HEAD_PARAMS.values())
def load_pretrained_classifier(
    path, n_classes: int = 2, *, dropout: float = 0.1, seed: int = 0, attn_implementation="sdpa"
):
    """Load a local BERT-family encoder as a :class:`PretrainedClassifier`, with its tokenizer.

    Parameters
    ----------
    path : path-like
        Directory in the Hugging Face layout (``config.json``, ``model.safetensors``,
        ``tokenizer.json``); nothing is downloaded.
    n_classes : int
        Classes of the new head (>= 2).
    dropout : float
        Dropout before the head.
    seed : int
        Seeds the head (the encoder's weights are the checkpoint's).
    attn_implementation : str
        ``transformers``' attention implementation of the softmax model (``"sdpa"`` or
        ``"eager"``).

    Returns
    -------
    model : PretrainedClassifier
        In float32, training mode.
    tokenizer : transformers.PreTrainedTokenizerFast

    Raises
    ------
    meanfield.errors.MissingFileError
        The directory is missing or not in the HF layout (before loading anything); also a
        :class:`FileNotFoundError`.
    meanfield.errors.InputError
        The checkpoint does not match ``config.json``: a layer count, a size (hidden,
        intermediate, heads) or a tensor name that disagree, so that ``transformers`` would
        have left random weights in the encoder or dropped some of the checkpoint's (the
        pooler and task heads, :data:`UNUSED_CHECKPOINT_PREFIXES`, are expected unused); or a
        ``config.json`` that ``transformers`` cannot read.
    meanfield.errors.NumericalError
        A weight of the checkpoint is NaN or infinite (the message names the tensors).
    meanfield.errors.DependencyError
        ``transformers`` is not installed.

    See Also
    --------
    save_tiny_bert : a tiny random checkpoint in the same layout.
    meanfield.attention.linearize.linearize : kernel attention in every layer.
    encode_pretrained : the tokenised inputs.

    References
    ----------
    Wolf, T. et al. (2020). Transformers: state-of-the-art natural language processing.
    EMNLP 2020 (System Demonstrations), 38–45.
    Devlin, J., Chang, M.-W., Lee, K. and Toutanova, K. (2019). BERT: pre-training of deep
    bidirectional transformers for language understanding. NAACL 2019.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.pretrained import load_pretrained_classifier, save_tiny_bert
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> model, tok = load_pretrained_classifier(folder, n_classes=3)
    >>> model.head.out_features, tok.is_fast
    (3, True)
    """
    tf = _transformers()
    path = _check_model_dir(path)
    tf.logging.set_verbosity_error()  # the loading report is checked below instead
    tf.utils.logging.disable_progress_bar()
    try:
        encoder, info = tf.AutoModel.from_pretrained(
            str(path),
            local_files_only=True,
            add_pooling_layer=False,
            attn_implementation=attn_implementation,
            dtype=torch.float32,
            output_loading_info=True,
            # shapes that disagree are reported in `info` and refused below, by name
            ignore_mismatched_sizes=True,
        )
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(
            f"model directory {str(path)!r}: transformers cannot load it ({exc})"
        ) from exc
    _check_loaded_encoder(path, encoder, info)
    model = PretrainedClassifier(encoder, n_classes, dropout=dropout, seed=seed)
    model.config["source"] = str(path)
    return model.train(), load_tokenizer(path)


@declare(Param("max_length", "int", "tokens per sequence, [CLS] and [SEP] included", low=4))
def encode_pretrained(tokenizer, text_a, text_b, labels, max_length: int) -> EncodedData:
    """Tokenise sentences (or pairs) with a pretrained tokenizer into :class:`~.EncodedData`.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerFast
    text_a : list of str
    text_b : list of str or None
        Second sentences of pairs (truncated together with ``text_a``, longest first).
    labels : array_like of int, shape (n,)
    max_length : int
        Width of the id arrays, special tokens included (>= 4).

    Returns
    -------
    EncodedData
        Right-padded with the tokenizer's pad id; ``segment_ids`` are the token type ids.

    See Also
    --------
    load_tokenizer : the tokenizer of a model folder.
    load_pretrained_classifier : the model the encodings feed.

    References
    ----------
    Devlin, J., Chang, M.-W., Lee, K. and Toutanova, K. (2019). BERT: pre-training of deep
    bidirectional transformers for language understanding. NAACL 2019.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.pretrained import load_tokenizer, save_tiny_bert
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> enc = encode_pretrained(load_tokenizer(folder), ["a film"], ["fine"], [1], 8)
    >>> enc.input_ids.shape, enc.lengths.tolist(), enc.segment_ids[0, :5].tolist()
    (torch.Size([1, 8]), [6], [0, 0, 0, 0, 1])
    """
    if text_b is not None and len(text_b) != len(text_a):
        raise InputError(f"text_b must have len(text_a) = {len(text_a)} entries, got {len(text_b)}")
    enc = tokenizer(
        list(text_a),
        None if text_b is None else list(text_b),
        padding="max_length",
        truncation="longest_first" if text_b is not None else True,
        max_length=max_length,
        return_tensors="pt",
        return_token_type_ids=True,
    )
    keep = enc["attention_mask"].bool()
    return EncodedData(
        enc["input_ids"],
        enc["token_type_ids"],
        ~keep,
        keep.sum(1),
        torch.as_tensor(np.asarray(labels), dtype=torch.long),
    )


@declare(
    Param("hidden_size", "int", "the encoder's width (a multiple of n_heads)", low=1),
    Param("n_layers", "int", "the encoder's depth", low=1),
    Param("n_heads", "int", "attention heads per layer", low=1),
    Param("seed", "seed", "seed of the random weights"),
)
def save_tiny_bert(
    path, *, hidden_size: int = 16, n_layers: int = 2, n_heads: int = 2, seed: int = 0
) -> None:
    """Write a tiny random BERT and a WordPiece tokenizer in the Hugging Face layout.

    For tests and examples: the real checkpoints cannot be downloaded here, and no test may
    need them. The vocabulary is the special tokens, the letters and a few words.

    Parameters
    ----------
    path : path-like
        Directory to create (or reuse).
    hidden_size, n_layers, n_heads : int
        The encoder's width, depth and heads.
    seed : int
        Seeds the random weights.

    See Also
    --------
    load_pretrained_classifier : loads what it writes.
    load_tokenizer : loads its tokenizer.
    meanfield.attention.linearize.linearize : linearizes the loaded model.

    References
    ----------
    Wolf, T. et al. (2020). Transformers: state-of-the-art natural language processing.
    EMNLP 2020 (System Demonstrations), 38–45.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.attention.pretrained import save_tiny_bert
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> names = {p.name for p in Path(folder).iterdir()}
    >>> {"config.json", "model.safetensors", "tokenizer.json"} <= names
    True
    """
    if hidden_size % n_heads:
        raise InputError(
            f"hidden_size must be a multiple of n_heads, got {hidden_size} and {n_heads}"
        )
    tf = _transformers()
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    words = "a an the film movie fine dull good bad great awful plot story is was not very".split()
    letters = list("abcdefghijklmnopqrstuvwxyz")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + letters
    vocab += ["##" + c for c in letters]
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    fast = tf.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(str(path))
    config = tf.BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=128,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tf.BertModel(config).save_pretrained(str(path))
