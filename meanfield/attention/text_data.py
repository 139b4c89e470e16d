"""The data a text-classification run sees: splits, subsamples, encodings, the noised copy.

Two preparations, both deterministic functions of their settings:

* :func:`tokenised_splits`: a tokenizer trained on the training split
  (:class:`~meanfield.attention.tokenizer.TextTokenizer`), the stratified validation split
  (:func:`~meanfield.attention.training.validation_indices`) held out of training, the
  evaluation split and its token-noised copy (:func:`~meanfield.attention.noise.perturb_tokens`);
  kept once per process and setting (the runs of one data set share it);
* :func:`encoded_splits`: the same with a pretrained model's tokenizer
  (:func:`~meanfield.attention.pretrained.encode_pretrained`).

A data set is given by its entry: ``task`` (a key of :data:`meanfield.attention.data.TASKS`),
``source``, ``train_split``, ``eval_split`` and the subsample sizes ``max_train``,
``max_eval`` (``None``: every example).

See Also
--------
meanfield.studies.nlp : the study whose runs these feed.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import numpy as np

__all__ = [
    "text_splits",
    "training_indices",
    "tokenised_splits",
    "encoded_splits",
    "input_fingerprints",
    "clear_caches",
]


def _entry(data: dict) -> dict:
    """A data set's entry with the defaults of its loading keys."""
    defaults = {"source": "auto", "train_split": "train", "eval_split": "test"}
    return {**defaults, "max_train": None, "max_eval": None, **data}


def _load(data: dict, split_key: str, data_dir):
    from .data import load_split

    return load_split(data["task"], data[split_key], data_dir, source=data["source"])


def text_splits(data_dir, data: dict, data_seed: int):
    """The training and evaluation splits of a data set, subsampled without replacement
    (in their file order) when ``max_train`` / ``max_eval`` are smaller.

    Parameters
    ----------
    data_dir : path
        The data folder (:func:`meanfield.attention.data.load_split`).
    data : dict
        The data set's entry (see the module notes).
    data_seed : int
        Seed of the subsamples.

    Returns
    -------
    (TextClassificationData, TextClassificationData)
        Training and evaluation examples.

    See Also
    --------
    meanfield.attention.data.load_split : one split of a task, unsubsampled.
    training_indices : the validation examples held out of the training split.
    tokenised_splits : the splits tokenised for a from-scratch model.
    meanfield.attention.text_baseline.tfidf_bar : the TF-IDF bar on the same examples.

    Examples
    --------
    >>> from meanfield.studies.nlp import FIXTURES
    >>> train, evaluation = text_splits(FIXTURES, {"task": "sst2", "max_train": 40}, data_seed=0)
    >>> len(train)
    40
    """
    key = json.dumps(_entry(data), sort_keys=True)
    return _text_splits(str(Path(data_dir).expanduser().resolve()), key, int(data_seed))


@functools.lru_cache(maxsize=4)
def _text_splits(data_dir: str, data_json: str, data_seed: int):
    d = json.loads(data_json)
    tr, ev = _load(d, "train_split", data_dir), _load(d, "eval_split", data_dir)
    rng = np.random.default_rng(data_seed)
    if d["max_train"] and len(tr) > d["max_train"]:
        tr = tr.subset(np.sort(rng.permutation(len(tr))[: d["max_train"]]))
    if d["max_eval"] and len(ev) > d["max_eval"]:
        ev = ev.subset(np.sort(rng.permutation(len(ev))[: d["max_eval"]]))
    return tr, ev


def training_indices(train, validation_fraction: float, data_seed: int):
    """(training, validation) indices into ``train``: the stratified validation split that
    every run and the TF-IDF bar hold out of training.

    See Also
    --------
    text_splits : the training split it indexes.
    meanfield.attention.training.validation_indices : the stratified draw.
    meanfield.attention.text_baseline.tfidf_bar : holds out the same examples.

    Examples
    --------
    >>> from meanfield.attention.data import TextClassificationData
    >>> data = TextClassificationData(["a", "b", "c", "d"] * 5, None, [0, 1] * 10)
    >>> train, val = training_indices(data, 0.2, data_seed=0)
    >>> len(train), len(val)
    (16, 4)
    """
    from .training import validation_indices

    val = validation_indices(train.labels, validation_fraction, data_seed)
    return np.setdiff1d(np.arange(len(train)), val), val


def tokenised_splits(
    data_dir, data: dict, *, validation_fraction, data_seed, tokenizer: dict, max_length, noise
) -> dict:
    """Tokenised splits of a data set (the tokenizer trained on its training split).

    Parameters
    ----------
    data_dir, data, data_seed
        As :func:`text_splits`.
    validation_fraction : float
        Share of the training split held out for early stopping, in (0, 1).
    tokenizer : dict
        :meth:`TextTokenizer.train <meanfield.attention.tokenizer.TextTokenizer.train>`'s
        settings (``vocab_size``, ``min_frequency``).
    max_length : int
        Tokens kept per example.
    noise : dict
        ``rate`` (share of tokens replaced, in [0, 1)) and ``seed`` of the noised copy.

    Returns
    -------
    dict
        ``train``, ``val``, ``eval``, ``eval_noisy``
        (:class:`~meanfield.attention.training.EncodedData`), ``eval_labels``, ``pair``,
        ``vocab_size``, ``n_train``, ``n_val``, ``n_eval`` and ``eval_truncated`` (share of
        evaluation examples cut at ``max_length``).

    See Also
    --------
    text_splits : the texts it tokenises.
    encoded_splits : the same with a pretrained model's tokenizer.
    meanfield.attention.tokenizer.TextTokenizer : the tokenizer trained here.
    meanfield.attention.noise.perturb_tokens : the noised evaluation copy.
    clear_caches : forgets what it keeps.

    Examples
    --------
    >>> from meanfield.studies.nlp import FIXTURES
    >>> prep = tokenised_splits(FIXTURES, {"task": "sst2", "source": "glue",
    ...     "eval_split": "validation"}, validation_fraction=0.2, data_seed=0,
    ...     tokenizer={"vocab_size": 100, "min_frequency": 1}, max_length=16,
    ...     noise={"rate": 0.1, "seed": 7})
    >>> prep["n_train"] + prep["n_val"] == len(text_splits(FIXTURES, {"task": "sst2",
    ...     "source": "glue", "eval_split": "validation"}, 0)[0])
    True
    """
    key = json.dumps(
        [_entry(data), validation_fraction, data_seed, tokenizer, max_length, noise],
        sort_keys=True,
    )
    return _tokenised(str(Path(data_dir).expanduser().resolve()), key)


@functools.lru_cache(maxsize=4)
def _tokenised(data_dir: str, key: str) -> dict:
    from .noise import perturb_tokens
    from .tokenizer import TextTokenizer
    from .training import encode

    data, fraction, data_seed, tok_settings, max_length, noise = json.loads(key)
    tr, ev = text_splits(data_dir, data, data_seed)
    tok = TextTokenizer.train(
        list(tr.text_a) + (list(tr.text_b) if tr.is_pair else []), **tok_settings
    )
    train_idx, val_idx = training_indices(tr, fraction, data_seed)
    full, evald = encode(tok, tr, max_length), encode(tok, ev, max_length)
    return {
        "train": full.subset(train_idx),
        "val": full.subset(val_idx),
        "eval": evald,
        "eval_noisy": perturb_tokens(evald, noise["rate"], tok.vocab_size, noise["seed"]),
        "eval_labels": np.asarray(ev.labels),
        "pair": tr.is_pair,
        "vocab_size": tok.vocab_size,
        "n_train": len(train_idx),
        "n_val": len(val_idx),
        "n_eval": len(evald),
        "eval_truncated": float(np.mean(evald.lengths.numpy() >= max_length)),
    }


def encoded_splits(
    data_dir, model_dir, data: dict, *, max_length, validation_fraction, data_seed, noise
) -> dict:
    """A data set encoded by a pretrained model's tokenizer (:func:`tokenised_splits`'s
    arguments; only ``max_train`` subsamples, the validation split is drawn from the encoded
    training split by :func:`~meanfield.attention.training.split_validation`).

    Returns
    -------
    dict
        ``train``, ``val``, ``eval``, ``eval_noisy`` (the special tokens never drawn as
        replacements) and ``tokenizer``.

    See Also
    --------
    tokenised_splits : the same with a tokenizer trained on the data.
    meanfield.attention.pretrained.encode_pretrained : the encoding.
    meanfield.attention.training.split_validation : the validation split.
    input_fingerprints : digests of the data and the model.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.pretrained import save_tiny_bert
    >>> from meanfield.studies.nlp import FIXTURES
    >>> model_dir = tempfile.mkdtemp()
    >>> save_tiny_bert(model_dir)
    >>> prep = encoded_splits(FIXTURES, model_dir, {"task": "rotten_tomatoes", "source": "hf"},
    ...     max_length=16, validation_fraction=0.2, data_seed=0, noise={"rate": 0.1, "seed": 7})
    >>> prep["eval"].input_ids.shape[1] <= 16
    True
    """
    from .noise import perturb_tokens
    from .pretrained import encode_pretrained, load_tokenizer
    from .training import split_validation

    d = _entry(data)
    tr, ev = _load(d, "train_split", data_dir), _load(d, "eval_split", data_dir)
    if d["max_train"] and len(tr) > d["max_train"]:
        pick = np.random.default_rng(data_seed).permutation(len(tr))[: d["max_train"]]
        tr = tr.subset(np.sort(pick))
    tok = load_tokenizer(model_dir)
    full = encode_pretrained(tok, tr.text_a, tr.text_b, tr.labels, max_length)
    train, val = split_validation(full, validation_fraction, data_seed)
    evald = encode_pretrained(tok, ev.text_a, ev.text_b, ev.labels, max_length)
    n_special = max(tok.all_special_ids) + 1
    noisy = perturb_tokens(evald, noise["rate"], tok.vocab_size, noise["seed"], n_special)
    return {"train": train, "val": val, "eval": evald, "eval_noisy": noisy, "tokenizer": tok}


def input_fingerprints(datasets: list, data_dir, model_dir) -> tuple[str, str]:
    """(data_id, model_id): SHA-1 digests of what runs compute from, not where it lies.

    ``data_id`` digests each data set's name, split names, texts and labels (every split
    loaded: a missing file is refused here); ``model_id`` the model folder's ``.json``,
    ``.safetensors``, ``.bin`` and ``.txt`` files.

    See Also
    --------
    text_splits : the splits whose texts are digested.
    encoded_splits : the runs of a pretrained model.
    meanfield.results.provenance : the software versions a result records.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.nlp import FIXTURES
    >>> model_dir = tempfile.mkdtemp()
    >>> entry = {"name": "rt", "task": "rotten_tomatoes", "source": "hf"}
    >>> data_id, model_id = input_fingerprints([entry], FIXTURES, model_dir)
    >>> len(data_id), model_id == input_fingerprints([], FIXTURES, model_dir)[1]
    (40, True)
    """
    h = hashlib.sha1()
    for ds in datasets:
        d = _entry(ds)
        for split_key in ("train_split", "eval_split"):
            sp = _load(d, split_key, data_dir)
            h.update(json.dumps([ds["name"], d[split_key], list(sp.text_a)]).encode())
            h.update(json.dumps(list(sp.text_b) if sp.text_b is not None else None).encode())
            h.update(np.asarray(sp.labels).tobytes())
    m = hashlib.sha1()
    for f in sorted(Path(model_dir).iterdir()):
        if f.is_file() and f.suffix in (".json", ".safetensors", ".bin", ".txt"):
            m.update(f.name.encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    m.update(block)
    return h.hexdigest(), m.hexdigest()


def clear_caches() -> None:
    """Forget the splits this process keeps (tests; memory).

    See Also
    --------
    tokenised_splits : keeps its splits once per setting.
    encoded_splits : keeps its encodings once per setting.
    text_splits : keeps its loaded splits.

    Examples
    --------
    >>> clear_caches()
    """
    _text_splits.cache_clear()
    _tokenised.cache_clear()
