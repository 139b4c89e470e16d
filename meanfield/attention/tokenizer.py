"""A WordPiece tokenizer trained offline on the training split (Hugging Face ``tokenizers``).

Nothing is downloaded: the vocabulary is learned from the training texts only, so the test
split never influences it. BERT conventions: lower-casing, accent stripping and removal of
control characters (``BertNormalizer``; this also drops the C1 characters of the Latin-1
Rotten Tomatoes files), BERT pre-tokenisation (whitespace and punctuation), special tokens
``[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3``, single sentences as ``[CLS] a [SEP]`` and pairs as
``[CLS] a [SEP] b [SEP]`` with segment ids 0 then 1, truncation longest-first to
``max_length``.

``tokenizers`` is an optional dependency (``pip install meanfield[nlp]``).

Examples
--------
>>> from meanfield.attention.tokenizer import TextTokenizer
>>> tok = TextTokenizer.train(["a fine film", "a dull film", "fine acting"], vocab_size=40,
...                           min_frequency=1)
>>> enc = tok.encode(["a fine film"], ["dull acting"], max_length=8)
>>> enc["segment_ids"]
array([[0, 0, 0, 0, 0, 1, 1, 1]])
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._validation import check_int

__all__ = ["SPECIAL_TOKENS", "PAD_ID", "TextTokenizer", "EncodedBatch"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
PAD_ID = 0


def _tokenizers():
    try:
        import tokenizers  # noqa: F401
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "meanfield.attention.tokenizer needs the 'tokenizers' package: "
            "pip install tokenizers (or pip install meanfield[nlp])"
        ) from err
    import tokenizers

    return tokenizers


def _continuation_pieces(texts, normalizer, pre_tokenizer) -> list[str]:
    """ "##c" for every character c that follows another inside a word of ``texts`` (sorted)."""
    chars = set()
    for text in texts:
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)):
            chars.update(word[1:])
    return ["##" + c for c in sorted(chars)]


def _wordpiece_tokenizer(tk, vocab: dict, normalizer, pre_tokenizer):
    """A BERT-style WordPiece tokenizer on ``vocab`` with [CLS] a [SEP] (b [SEP]) templates."""
    from tokenizers import models, processors

    tok = tk.Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = normalizer, pre_tokenizer
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return tok


class EncodedBatch(dict):
    """Token ids as arrays: ``input_ids``, ``segment_ids`` (int64, shape (n, max_length)),
    ``padding_mask`` (bool, True = padding) and ``lengths`` (int64, shape (n,)).

    A plain ``dict`` subclass, returned by :meth:`TextTokenizer.encode`.

    See Also
    --------
    TextTokenizer : its ``encode`` returns one.
    meanfield.attention.training.EncodedData : the same as tensors, with labels.
    meanfield.attention.training.encode : from texts to tensors.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.attention.tokenizer import EncodedBatch
    >>> batch = EncodedBatch(input_ids=np.array([[2, 7, 3, 0]]), lengths=np.array([3]))
    >>> sorted(batch)
    ['input_ids', 'lengths']
    """


class TextTokenizer:
    """WordPiece tokenizer: train on texts, encode single sentences or pairs.

    Use :meth:`train` or :meth:`load` to build one.

    Parameters
    ----------
    tokenizer : tokenizers.Tokenizer
        A Hugging Face tokenizer with the BERT conventions of this module (what
        :meth:`train` and :meth:`load` pass).

    See Also
    --------
    EncodedBatch : what ``encode`` returns.
    meanfield.attention.training.encode : tokenises a data set.
    meanfield.attention.text_data.tokenised_splits : trains one per data set.
    meanfield.attention.pretrained.load_tokenizer : a pretrained model's tokenizer.

    References
    ----------
    Wu, Y. et al. (2016). Google's neural machine translation system: bridging the gap
    between human and machine translation. arXiv:1609.08144 (WordPiece).

    Devlin, J., Chang, M.-W., Lee, K. and Toutanova, K. (2019). BERT: pre-training of deep
    bidirectional transformers for language understanding. NAACL 2019.

    Examples
    --------
    >>> from meanfield.attention.tokenizer import TextTokenizer
    >>> tok = TextTokenizer.train(["a fine film", "a dull film"], vocab_size=40,
    ...                           min_frequency=1)
    >>> enc = tok.encode(["A fine film!"], max_length=6)
    >>> int(enc["input_ids"][0, 0]), enc["lengths"].tolist()  # [CLS] a fine film ! [SEP]
    (2, [6])
    """

    def __init__(self, tokenizer):
        self._tok = tokenizer

    @classmethod
    def train(
        cls, texts: Sequence[str], vocab_size: int = 8000, min_frequency: int = 2
    ) -> TextTokenizer:
        """Learn a WordPiece vocabulary from ``texts``.

        Parameters
        ----------
        texts : sequence of str
            Training-split texts (for pairs, both sides).
        vocab_size : int
            Upper bound on the vocabulary size (>= 10, special tokens included).
        min_frequency : int
            Minimum count of a merged piece (>= 1).

        Returns
        -------
        TextTokenizer

        Raises
        ------
        meanfield.errors.InputError
            ``vocab_size`` < 10 or ``min_frequency`` < 1.
        ValueError
            ``texts`` is empty.
        ImportError
            ``tokenizers`` is not installed.

        Examples
        --------
        >>> from meanfield.attention.tokenizer import TextTokenizer
        >>> TextTokenizer.train(["a fine film"] * 3, vocab_size=30).vocab_size <= 30
        True
        """
        vocab_size = check_int("vocab_size", vocab_size, minimum=10)
        min_frequency = check_int("min_frequency", min_frequency, minimum=1)
        if len(texts) == 0:
            raise ValueError("texts is empty; the tokenizer needs training texts")
        tk = _tokenizers()
        from tokenizers import models, normalizers, pre_tokenizers, trainers

        normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True
        )
        pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok = tk.Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer, tok.pre_tokenizer = normalizer, pre_tokenizer
        # The trainer creates the "##c" tokens in hash-map order, so their ids, the ties
        # between merges and the vocabulary changed from run to run (huggingface/tokenizers
        # #1794).  Declared up front, in sorted order, they get fixed ids and training is
        # reproducible; the tokenizer is then rebuilt with them as ordinary pieces.
        pieces = _continuation_pieces(texts, normalizer, pre_tokenizer)
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS) + pieces,
            show_progress=False,
        )
        tok.train_from_iterator(list(texts), trainer=trainer)
        tok = _wordpiece_tokenizer(tk, tok.get_vocab(), normalizer, pre_tokenizer)
        assert tok.token_to_id("[PAD]") == PAD_ID
        return cls(tok)

    @classmethod
    def load(cls, path) -> TextTokenizer:
        """Load a tokenizer saved by :meth:`save` (a ``tokenizers`` JSON file).

        Parameters
        ----------
        path : str or os.PathLike
            The JSON file.

        Returns
        -------
        TextTokenizer

        Raises
        ------
        FileNotFoundError
            ``path`` is not a file.

        Examples
        --------
        >>> import os, tempfile
        >>> from meanfield.attention.tokenizer import TextTokenizer
        >>> tok = TextTokenizer.train(["a fine film"], vocab_size=30, min_frequency=1)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "tok.json")
        ...     tok.save(path)
        ...     TextTokenizer.load(path).vocab_size == tok.vocab_size
        True
        """
        tk = _tokenizers()
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"tokenizer file not found: {path}")
        return cls(tk.Tokenizer.from_file(str(path)))

    def save(self, path) -> None:
        """Write the tokenizer as JSON to ``path`` (parent folders are created).

        Parameters
        ----------
        path : str or os.PathLike
            Destination file (read back by :meth:`load`).

        Examples
        --------
        >>> import json, pathlib, tempfile
        >>> from meanfield.attention.tokenizer import TextTokenizer
        >>> tok = TextTokenizer.train(["a fine film"], vocab_size=30, min_frequency=1)
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "new" / "tok.json"  # "new" is created
        >>> tok.save(path)
        >>> len(json.loads(path.read_text())["model"]["vocab"]) == tok.vocab_size
        True
        """
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._tok.save(str(path))

    @property
    def vocab_size(self) -> int:
        """Number of token ids, special tokens included.

        Examples
        --------
        >>> from meanfield.attention.tokenizer import SPECIAL_TOKENS, TextTokenizer
        >>> tok = TextTokenizer.train(["a b c"], vocab_size=30, min_frequency=1)
        >>> tok.vocab_size >= len(SPECIAL_TOKENS) + 3
        True
        """
        return self._tok.get_vocab_size()

    def encode(
        self, text_a: Sequence[str], text_b: Sequence[str] | None = None, max_length: int = 64
    ) -> EncodedBatch:
        """Encode sentences (or sentence pairs) to fixed-width id arrays.

        Parameters
        ----------
        text_a : sequence of str, length n
            First (or only) sentences.
        text_b : sequence of str of length n, optional
            Second sentences of pairs.
        max_length : int
            Width of the arrays, special tokens included (>= 3 for single, >= 5 for pairs).

        Returns
        -------
        EncodedBatch
            ``input_ids``, ``segment_ids`` of shape (n, max_length); ``padding_mask`` (True =
            padding) and ``lengths`` (n,).

        Raises
        ------
        meanfield.errors.InputError
            ``max_length`` below the minimum.
        ValueError
            ``text_b`` of another length than ``text_a``.

        Examples
        --------
        Pairs are ``[CLS] a [SEP] b [SEP]``, truncated longest-first:

        >>> from meanfield.attention.tokenizer import TextTokenizer
        >>> tok = TextTokenizer.train(["a fine film", "a dull film"], vocab_size=40,
        ...                           min_frequency=1)
        >>> enc = tok.encode(["a fine film", "a film"], ["dull", "fine"], max_length=6)
        >>> enc["lengths"], enc["padding_mask"][1]
        (array([6, 6]), array([False, False, False, False, False, False]))
        """
        minimum = 5 if text_b is not None else 3
        max_length = check_int("max_length", max_length, minimum=minimum)
        if text_b is not None and len(text_b) != len(text_a):
            raise ValueError(f"text_b must have length {len(text_a)}, got {len(text_b)}")
        self._tok.enable_truncation(max_length=max_length, strategy="longest_first")
        self._tok.no_padding()
        if text_b is None:
            encs = self._tok.encode_batch(list(text_a))
        else:
            encs = self._tok.encode_batch(list(zip(text_a, text_b, strict=True)))
        n = len(encs)
        ids = np.full((n, max_length), PAD_ID, dtype=np.int64)
        seg = np.zeros((n, max_length), dtype=np.int64)
        lengths = np.zeros(n, dtype=np.int64)
        for i, e in enumerate(encs):
            k = len(e.ids)
            ids[i, :k] = e.ids
            seg[i, :k] = e.type_ids
            lengths[i] = k
        mask = np.arange(max_length)[None, :] >= lengths[:, None]
        return EncodedBatch(input_ids=ids, segment_ids=seg, padding_mask=mask, lengths=lengths)
