r"""Loaders for the sentence(-pair) classification data sets: SST-2, Rotten Tomatoes, QQP.

Data are never shipped with the package: every loader reads from a directory the user names,
either the ``data_dir`` argument (``--data-dir`` on the command line) or the environment
variable ``MEANFIELD_DATA_DIR``. The expected layout under that directory is::

    sst2/glue/train.tsv, sst2/glue/dev.tsv              GLUE SST-2 ("sentence<TAB>label", header)
    sst2/stsa_binary/stsa.binary.{train,dev,test}       "<label> <sentence>" (Kim 2014 split)
    rotten_tomatoes/hf_split_derived/{train,validation,test}.jsonl   {"text": ..., "label": 0|1}
    rotten_tomatoes/rt-polaritydata/rt-polarity.{pos,neg}           Latin-1, one snippet a line
    qqp/bimpm_quora_question_pair_partition/{train,dev,test}.tsv     "label<TAB>q1<TAB>q2<TAB>id"
    qqp/glue/{train,dev}.tsv                             GLUE QQP (header, 6 columns)

Split names map onto files as follows (``source="auto"`` picks the first that exists):

========================  =====================  =====================  ===================
task / source             ``train``              ``validation``         ``test``
========================  =====================  =====================  ===================
sst2 / glue               glue/train.tsv         glue/dev.tsv           (not public)
sst2 / stsa               stsa.binary.train      stsa.binary.dev        stsa.binary.test
rotten_tomatoes / hf      train.jsonl            validation.jsonl       test.jsonl
rotten_tomatoes / rt      first 80 % (below)     next 10 %              last 10 %
qqp / bimpm               train.tsv (not here)   dev.tsv                test.tsv
qqp / glue                glue/train.tsv         glue/dev.tsv           (not public)
========================  =====================  =====================  ===================

The Hugging Face rule for the original rt-polarity files: read as Latin-1, strip each line;
with ``i1 = int(0.8 n + 0.5)`` and ``i2 = int(0.9 n + 0.5)`` (n = 5331 lines per class),
train = ``pos[:i1] + neg[:i1]``, validation = ``pos[i1:i2] + neg[i1:i2]``,
test = ``pos[i2:] + neg[i2:]``; label 1 = pos, 0 = neg.

Every problem in a file raises :class:`DataFormatError` naming the file and the 1-based line:
a wrong number of fields, a bad label, an empty text, bytes that are not valid in the file's
encoding, invalid JSON. Missing files raise :class:`FileNotFoundError` naming the path and how
to point the loader elsewhere.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from meanfield.attention.data import load_split
>>> root = Path(tempfile.mkdtemp())
>>> (root / "sst2" / "glue").mkdir(parents=True)
>>> _ = (root / "sst2" / "glue" / "dev.tsv").write_text(
...     "sentence\tlabel\na gripping film\t1\nflat and dull\t0\n")
>>> data = load_split("sst2", "validation", root)
>>> data.text_a, data.labels.tolist(), data.is_pair
(['a gripping film', 'flat and dull'], [1, 0], False)
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._validation import check_choice

__all__ = [
    "DATA_DIR_ENV",
    "TASKS",
    "DataFormatError",
    "TextClassificationData",
    "resolve_data_dir",
    "load_split",
    "read_glue_sst2",
    "read_stsa_binary",
    "read_rt_jsonl",
    "read_rt_polarity",
    "read_qqp_bimpm",
    "read_glue_qqp",
]

#: environment variable holding the default data directory
DATA_DIR_ENV = "MEANFIELD_DATA_DIR"
#: task names accepted by :func:`load_split`
TASKS = ("sst2", "rotten_tomatoes", "qqp")
SPLITS = ("train", "validation", "test")
_SOURCES = {
    "sst2": ("glue", "stsa"),
    "rotten_tomatoes": ("hf", "rt"),
    "qqp": ("bimpm", "glue"),
}


class DataFormatError(ValueError):
    r"""A data file is malformed; the message names the file and the line.

    See Also
    --------
    load_split : the task-level loader that raises it.
    read_glue_sst2, read_stsa_binary, read_rt_jsonl : per-format readers.
    read_rt_polarity, read_qqp_bimpm, read_glue_qqp : per-format readers.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.attention.data import DataFormatError, read_stsa_binary
    >>> path = Path(tempfile.mkdtemp()) / "stsa.binary.dev"
    >>> _ = path.write_text("1 a fine film\n2 a label out of range\n")
    >>> try:
    ...     read_stsa_binary(path)
    ... except DataFormatError as err:
    ...     print(str(err).split(", ")[1][:6])
    line 2
    """


@dataclass
class TextClassificationData:
    """Texts (single sentences or pairs) with integer labels.

    Parameters
    ----------
    text_a : list of str, length n
        First (or only) sentence of each example.
    text_b : list of str of length n, or None for single-sentence tasks
        Second sentence of each pair.
    labels : array_like of int, shape (n,)
        Class ids (stored as int64).
    source : str
        The file(s) the examples came from.

    Raises
    ------
    ValueError
        ``labels`` or ``text_b`` of another length than ``text_a``.

    See Also
    --------
    load_split : one split of a task from the data directory.
    meanfield.attention.text_data.text_splits : a study's subsampled splits.
    meanfield.attention.tokenizer.TextTokenizer : WordPiece ids of the texts.
    meanfield.attention.training.encode : the texts as tensors for training.

    Examples
    --------
    >>> from meanfield.attention.data import TextClassificationData
    >>> data = TextClassificationData(["q1", "q2", "q3"], ["p1", "p2", "p3"], [0, 1, 1])
    >>> len(data), data.is_pair, data.subset([2, 0]).text_b
    (3, True, ['p3', 'p1'])
    """

    text_a: list[str]
    text_b: list[str] | None
    labels: np.ndarray
    source: str = ""

    def __post_init__(self):
        self.labels = np.asarray(self.labels, dtype=np.int64)
        n = len(self.text_a)
        if self.labels.shape != (n,):
            raise ValueError(f"labels must have shape ({n},), got {self.labels.shape}")
        if self.text_b is not None and len(self.text_b) != n:
            raise ValueError(f"text_b must have length {n}, got {len(self.text_b)}")

    def __len__(self) -> int:
        return len(self.text_a)

    @property
    def is_pair(self) -> bool:
        """True for sentence-pair tasks (``text_b`` is set).

        Examples
        --------
        >>> from meanfield.attention.data import TextClassificationData
        >>> TextClassificationData(["a film"], None, [1]).is_pair
        False
        """
        return self.text_b is not None

    def subset(self, index) -> TextClassificationData:
        """The examples at ``index``, in that order.

        Parameters
        ----------
        index : array_like of int or slice
            Positions of the examples.

        Returns
        -------
        TextClassificationData
            A new object with the same ``source``.

        Examples
        --------
        >>> from meanfield.attention.data import TextClassificationData
        >>> data = TextClassificationData(["a", "b", "c"], None, [0, 1, 0], "toy.tsv")
        >>> data.subset(slice(1, None)).text_a, data.subset([0]).source
        (['b', 'c'], 'toy.tsv')
        """
        idx = np.arange(len(self))[index]
        return TextClassificationData(
            [self.text_a[i] for i in idx],
            None if self.text_b is None else [self.text_b[i] for i in idx],
            self.labels[idx],
            self.source,
        )


# ---------------------------------------------------------------------------------------
# low-level line reader
# ---------------------------------------------------------------------------------------
def _lines(path: Path, encoding: str, hint: str = "") -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` without the line ending; bad bytes raise with the line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            raw = raw.rstrip(b"\n")
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError as err:
                bad = raw[err.start]
                raise DataFormatError(
                    f"{path}, line {lineno}: cannot decode byte 0x{bad:02x} at column "
                    f"{err.start + 1} as {encoding}" + (f"; {hint}" if hint else "")
                ) from None
            yield lineno, text


def _label(path, lineno, value: str, allowed=("0", "1")) -> int:
    v = value.strip()
    if v not in allowed:
        raise DataFormatError(
            f"{path}, line {lineno}: label must be one of {', '.join(allowed)}, got {value!r}"
        )
    return int(v)


def _nonempty(path, lineno, text: str, what: str = "text") -> str:
    t = text.strip()
    if not t:
        raise DataFormatError(f"{path}, line {lineno}: empty {what}")
    return t


def _fields(path, lineno, line: str, n: int, layout: str) -> list[str]:
    parts = line.split("\t")
    if len(parts) != n:
        raise DataFormatError(
            f"{path}, line {lineno}: expected {n} tab-separated fields ({layout}), got {len(parts)}"
        )
    return parts


def _finish(path, texts_a, texts_b, labels) -> TextClassificationData:
    if not labels:
        raise DataFormatError(f"{path}: no examples found")
    return TextClassificationData(texts_a, texts_b, np.asarray(labels), str(path))


# ---------------------------------------------------------------------------------------
# one reader per file format
# ---------------------------------------------------------------------------------------
def read_glue_sst2(path) -> TextClassificationData:
    r"""GLUE SST-2 TSV: header ``sentence<TAB>label``, then one sentence and 0/1 label a line.

    Parameters
    ----------
    path : path-like
        A UTF-8 file (``train.tsv`` or ``dev.tsv``).

    Returns
    -------
    TextClassificationData

    Raises
    ------
    DataFormatError
        A wrong header, field count, label or empty sentence (file and line named).

    See Also
    --------
    load_split : picks this reader for ``source="glue"``.
    read_stsa_binary : the same sentences in the ``stsa.binary`` split.
    DataFormatError : what a malformed line raises.

    References
    ----------
    Socher, R., Perelygin, A., Wu, J., Chuang, J., Manning, C. D., Ng, A. and Potts, C.
    (2013). Recursive deep models for semantic compositionality over a sentiment treebank.
    EMNLP 2013 (SST).

    Wang, A., Singh, A., Michael, J., Hill, F., Levy, O. and Bowman, S. R. (2019). GLUE: a
    multi-task benchmark and analysis platform for natural language understanding. ICLR 2019.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.attention.data import read_glue_sst2
    >>> path = Path(tempfile.mkdtemp()) / "dev.tsv"
    >>> _ = path.write_text("sentence\tlabel\nwarm and funny\t1\n")
    >>> read_glue_sst2(path).labels.tolist()
    [1]
    """
    texts, labels = [], []
    for lineno, line in _lines(path, "utf-8", "GLUE files are UTF-8"):
        if lineno == 1:
            if line.split("\t") != ["sentence", "label"]:
                raise DataFormatError(
                    f"{path}, line 1: expected the header 'sentence<TAB>label', got {line[:60]!r}"
                )
            continue
        sent, lab = _fields(path, lineno, line, 2, "sentence, label")
        labels.append(_label(path, lineno, lab))
        texts.append(_nonempty(path, lineno, sent, "sentence"))
    return _finish(path, texts, None, labels)


def read_stsa_binary(path) -> TextClassificationData:
    r"""``stsa.binary.*``: ``<label> <sentence>`` a line, label 0/1, UTF-8, no header.

    Parameters
    ----------
    path : path-like
        The file.

    Returns
    -------
    TextClassificationData

    Raises
    ------
    DataFormatError
        A line without a space, a label other than 0/1, an empty sentence.

    See Also
    --------
    load_split : picks this reader for ``source="stsa"``.
    read_glue_sst2 : the GLUE release of SST-2.
    DataFormatError : what a malformed line raises.

    References
    ----------
    Socher, R., Perelygin, A., Wu, J., Chuang, J., Manning, C. D., Ng, A. and Potts, C.
    (2013). Recursive deep models for semantic compositionality over a sentiment treebank.
    EMNLP 2013 (SST).

    Kim, Y. (2014). Convolutional neural networks for sentence classification. EMNLP 2014
    (the ``stsa.binary`` split).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.attention.data import read_stsa_binary
    >>> path = Path(tempfile.mkdtemp()) / "stsa.binary.test"
    >>> _ = path.write_text("0 tedious\n1 a small gem\n")
    >>> read_stsa_binary(path).text_a
    ['tedious', 'a small gem']
    """
    texts, labels = [], []
    for lineno, line in _lines(path, "utf-8"):
        lab, sep, sent = line.partition(" ")
        if not sep:
            raise DataFormatError(f"{path}, line {lineno}: expected '<label> <sentence>'")
        labels.append(_label(path, lineno, lab))
        texts.append(_nonempty(path, lineno, sent, "sentence"))
    return _finish(path, texts, None, labels)


def read_rt_jsonl(path) -> TextClassificationData:
    r"""Rotten Tomatoes Hugging Face split as JSON lines ``{"text": str, "label": 0|1}``.

    Parameters
    ----------
    path : path-like
        A ``.jsonl`` file.

    Returns
    -------
    TextClassificationData

    Raises
    ------
    DataFormatError
        Invalid JSON, missing keys, a non-string text, a label other than 0/1.

    See Also
    --------
    load_split : picks this reader for ``source="hf"``.
    read_rt_polarity : the original files, split by the same rule.
    DataFormatError : what a malformed line raises.

    References
    ----------
    Pang, B. and Lee, L. (2005). Seeing stars: exploiting class relationships for sentiment
    categorization with respect to rating scales. ACL 2005 (sentence polarity v1.0).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.attention.data import read_rt_jsonl
    >>> path = Path(tempfile.mkdtemp()) / "test.jsonl"
    >>> _ = path.write_text('{"text": "smart", "label": 1}\n{"text": "inert", "label": 0}\n')
    >>> read_rt_jsonl(path).labels.tolist()
    [1, 0]
    """
    texts, labels = [], []
    for lineno, line in _lines(path, "utf-8", "the hf_split_derived files are ASCII JSON"):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataFormatError(f"{path}, line {lineno}: invalid JSON ({err.msg})") from None
        if not isinstance(obj, dict) or "text" not in obj or "label" not in obj:
            raise DataFormatError(
                f"{path}, line {lineno}: expected an object with keys 'text' and 'label'"
            )
        if not isinstance(obj["text"], str):
            raise DataFormatError(f"{path}, line {lineno}: 'text' must be a string")
        if obj["label"] not in (0, 1) or isinstance(obj["label"], bool):
            raise DataFormatError(
                f"{path}, line {lineno}: 'label' must be 0 or 1, got {obj['label']!r}"
            )
        texts.append(_nonempty(path, lineno, obj["text"]))
        labels.append(int(obj["label"]))
    return _finish(path, texts, None, labels)


def read_rt_polarity(pos_path, neg_path, split: str, encoding: str = "latin-1"):
    r"""Original ``rt-polarity.pos``/``.neg`` files, split by the Hugging Face rule.

    Parameters
    ----------
    pos_path, neg_path : path-like
        The two files (Latin-1 by default, as the Hugging Face loader reads them).
    split : {"train", "validation", "test"}
    encoding : str
        Text encoding; a byte invalid in it raises :class:`DataFormatError`.

    Returns
    -------
    TextClassificationData
        The split's positive snippets (label 1) then its negative ones (label 0). With
        n = the smaller file's line count, i₁ = ⌊0.8n + 0.5⌋ and i₂ = ⌊0.9n + 0.5⌋, train is
        lines [0, i₁), validation [i₁, i₂) and test [i₂, n) of each file.

    See Also
    --------
    load_split : picks this reader for ``source="rt"``.
    read_rt_jsonl : the Hugging Face split as JSON lines.
    DataFormatError : what a malformed line raises.

    References
    ----------
    Pang, B. and Lee, L. (2005). Seeing stars: exploiting class relationships for sentiment
    categorization with respect to rating scales. ACL 2005 (sentence polarity v1.0).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.attention.data import read_rt_polarity
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "rt-polarity.pos").write_text("".join(f"good {i}\n" for i in range(10)))
    >>> _ = (folder / "rt-polarity.neg").write_text("".join(f"bad {i}\n" for i in range(10)))
    >>> test = read_rt_polarity(folder / "rt-polarity.pos", folder / "rt-polarity.neg", "test")
    >>> test.text_a, test.labels.tolist()
    (['good 9', 'bad 9'], [1, 0])
    """
    check_choice("split", split, SPLITS)
    per_class = []
    for path in (pos_path, neg_path):
        lines = []
        for lineno, line in _lines(path, encoding, "rt-polarity files are Latin-1 / cp1252"):
            lines.append(_nonempty(path, lineno, line, "snippet"))
        per_class.append(lines)
    pos, neg = per_class
    n = min(len(pos), len(neg))
    i1, i2 = int(n * 0.8 + 0.5), int(n * 0.9 + 0.5)
    sl = {"train": slice(0, i1), "validation": slice(i1, i2), "test": slice(i2, None)}[split]
    texts = pos[sl] + neg[sl]
    labels = [1] * len(pos[sl]) + [0] * len(neg[sl])
    return _finish(f"{pos_path} + {neg_path} [{split}]", texts, None, labels)


def read_qqp_bimpm(path) -> TextClassificationData:
    r"""BiMPM Quora partition: ``label<TAB>question1<TAB>question2<TAB>pair_id``, no header.

    Parameters
    ----------
    path : path-like
        A UTF-8 TSV file.

    Returns
    -------
    TextClassificationData
        Question pairs (``text_b`` set); label 1 = duplicate.

    Raises
    ------
    DataFormatError
        A wrong field count, a label other than 0/1, a non-integer pair id.

    See Also
    --------
    load_split : picks this reader for ``source="bimpm"``.
    read_glue_qqp : the GLUE release of QQP.
    DataFormatError : what a malformed line raises.

    References
    ----------
    Wang, Z., Hamza, W. and Florian, R. (2017). Bilateral multi-perspective matching for
    natural language sentences. IJCAI 2017 (the Quora partition).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.attention.data import read_qqp_bimpm
    >>> path = Path(tempfile.mkdtemp()) / "dev.tsv"
    >>> _ = path.write_text("1\tHow old is it?\tWhat is its age?\t7\n")
    >>> pair = read_qqp_bimpm(path)
    >>> pair.text_a, pair.text_b, pair.labels.tolist()
    (['How old is it?'], ['What is its age?'], [1])
    """
    a, b, labels = [], [], []
    for lineno, line in _lines(path, "utf-8"):
        lab, q1, q2, pid = _fields(path, lineno, line, 4, "label, question1, question2, pair_id")
        labels.append(_label(path, lineno, lab))
        if not pid.strip().isdigit():
            raise DataFormatError(f"{path}, line {lineno}: pair_id must be an integer, got {pid!r}")
        a.append(q1.strip())
        b.append(q2.strip())
    return _finish(path, a, b, labels)


def read_glue_qqp(path, *, skip_malformed: bool = False) -> TextClassificationData:
    r"""GLUE QQP TSV: header ``id qid1 qid2 question1 question2 is_duplicate``.

    Parameters
    ----------
    path : path-like
        A UTF-8 TSV file with the GLUE header.
    skip_malformed : bool
        GLUE's ``train.tsv`` is known to hold a few rows with missing fields. By default they
        raise :class:`DataFormatError`; with True they are skipped with a warning that counts
        them and names the first.

    Returns
    -------
    TextClassificationData
        Question pairs (``text_b`` set); label 1 = duplicate.

    See Also
    --------
    load_split : picks this reader for ``source="glue"``.
    read_qqp_bimpm : the BiMPM partition (with a labelled test split).
    DataFormatError : what a malformed line raises.

    References
    ----------
    Wang, A., Singh, A., Michael, J., Hill, F., Levy, O. and Bowman, S. R. (2019). GLUE: a
    multi-task benchmark and analysis platform for natural language understanding. ICLR 2019.

    Examples
    --------
    >>> import tempfile, warnings
    >>> from pathlib import Path
    >>> from meanfield.attention.data import read_glue_qqp
    >>> path = Path(tempfile.mkdtemp()) / "dev.tsv"
    >>> _ = path.write_text("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
    ...                     "0\t1\t2\tWhy?\tHow come?\t1\n3\t4\t5\ttruncated row\n")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     data = read_glue_qqp(path, skip_malformed=True)
    >>> len(data), len(caught)
    (1, 1)
    """
    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    a, b, labels, skipped = [], [], [], []
    for lineno, line in _lines(path, "utf-8", "GLUE files are UTF-8"):
        if lineno == 1:
            if line.split("\t") != header:
                raise DataFormatError(
                    f"{path}, line 1: expected the GLUE QQP header {'<TAB>'.join(header)!r}"
                )
            continue
        try:
            _, _, _, q1, q2, lab = _fields(path, lineno, line, 6, "<TAB>".join(header))
            y = _label(path, lineno, lab)
        except DataFormatError as err:
            if not skip_malformed:
                raise
            skipped.append(str(err))
            continue
        a.append(q1.strip())
        b.append(q2.strip())
        labels.append(y)
    if skipped:
        warnings.warn(
            f"skipped {len(skipped)} malformed line(s) of {path}; first: {skipped[0]}",
            stacklevel=2,
        )
    return _finish(path, a, b, labels)


# ---------------------------------------------------------------------------------------
# task-level entry point
# ---------------------------------------------------------------------------------------
def resolve_data_dir(data_dir=None) -> Path:
    """The data directory: ``data_dir`` if given, else ``$MEANFIELD_DATA_DIR``.

    Parameters
    ----------
    data_dir : path-like, optional
        The directory (``~`` is expanded).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    FileNotFoundError
        If neither is set, or the directory does not exist.

    See Also
    --------
    load_split : reads a split under this directory.
    meanfield.attention.text_data.text_splits : a study's splits from it.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.data import resolve_data_dir
    >>> folder = tempfile.mkdtemp()
    >>> str(resolve_data_dir(folder)) == folder
    True
    """
    if data_dir is None:
        env = os.environ.get(DATA_DIR_ENV)
        if not env:
            raise FileNotFoundError(
                f"no data directory given: pass data_dir (--data-dir) or set {DATA_DIR_ENV} to "
                "the folder holding sst2/, rotten_tomatoes/ and qqp/"
            )
        data_dir = env
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"data directory does not exist: {path}")
    return path


def _candidates(task: str, source: str, split: str, root: Path):
    """(reader, paths) for one source; paths relative to the data directory."""
    if task == "sst2" and source == "glue":
        name = {"train": "train.tsv", "validation": "dev.tsv", "test": None}[split]
        return read_glue_sst2, [root / "sst2" / "glue" / name] if name else None
    if task == "sst2" and source == "stsa":
        name = {"train": "train", "validation": "dev", "test": "test"}[split]
        return read_stsa_binary, [root / "sst2" / "stsa_binary" / f"stsa.binary.{name}"]
    if task == "rotten_tomatoes" and source == "hf":
        return read_rt_jsonl, [root / "rotten_tomatoes" / "hf_split_derived" / f"{split}.jsonl"]
    if task == "rotten_tomatoes" and source == "rt":
        d = root / "rotten_tomatoes" / "rt-polaritydata"
        return read_rt_polarity, [d / "rt-polarity.pos", d / "rt-polarity.neg"]
    if task == "qqp" and source == "bimpm":
        name = {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}[split]
        return read_qqp_bimpm, [root / "qqp" / "bimpm_quora_question_pair_partition" / name]
    if task == "qqp" and source == "glue":
        name = {"train": "train.tsv", "validation": "dev.tsv", "test": None}[split]
        return read_glue_qqp, [root / "qqp" / "glue" / name] if name else None
    raise AssertionError((task, source))  # pragma: no cover


def load_split(
    task: str, split: str, data_dir=None, *, source: str = "auto"
) -> TextClassificationData:
    r"""Load one split of one task from the user's data directory.

    Parameters
    ----------
    task : {"sst2", "rotten_tomatoes", "qqp"}
    split : {"train", "validation", "test"}
    data_dir : path-like, optional
        Root of the data (default ``$MEANFIELD_DATA_DIR``); layout in the module notes.
    source : str
        ``"auto"`` (first source whose files exist), or for sst2 ``"glue"``/``"stsa"``, for
        rotten_tomatoes ``"hf"``/``"rt"``, for qqp ``"bimpm"``/``"glue"``.

    Returns
    -------
    TextClassificationData
        ``text_b`` is set for qqp (question pairs).

    Raises
    ------
    meanfield.errors.InputError
        An unknown task, split or source.
    FileNotFoundError
        No data directory, or none of the sources has the split's files (the message lists
        what is missing).
    DataFormatError
        A malformed file.

    See Also
    --------
    resolve_data_dir : where the files are looked for.
    TextClassificationData : what it returns.
    meanfield.attention.text_data.text_splits : a study's subsampled splits.
    meanfield.attention.text_baseline.tfidf_logistic : the TF-IDF bar on a split.

    References
    ----------
    Socher, R., Perelygin, A., Wu, J., Chuang, J., Manning, C. D., Ng, A. and Potts, C.
    (2013). Recursive deep models for semantic compositionality over a sentiment treebank.
    EMNLP 2013 (SST).

    Pang, B. and Lee, L. (2005). Seeing stars: exploiting class relationships for sentiment
    categorization with respect to rating scales. ACL 2005 (sentence polarity v1.0).

    Wang, A., Singh, A., Michael, J., Hill, F., Levy, O. and Bowman, S. R. (2019). GLUE: a
    multi-task benchmark and analysis platform for natural language understanding. ICLR 2019.

    Examples
    --------
    The GLUE test splits carry no labels, so ``"auto"`` falls back to the next source:

    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.attention.data import load_split
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "sst2" / "stsa_binary").mkdir(parents=True)
    >>> _ = (root / "sst2" / "stsa_binary" / "stsa.binary.test").write_text("1 superb\n")
    >>> load_split("sst2", "test", root).source.endswith("stsa.binary.test")
    True
    """
    check_choice("task", task, TASKS)
    check_choice("split", split, SPLITS)
    sources = _SOURCES[task]
    if source != "auto":
        check_choice(f"source for {task}", source, sources)
        sources = (source,)
    root = resolve_data_dir(data_dir)
    tried = []
    for src in sources:
        reader, paths = _candidates(task, src, split, root)
        if paths is None:
            tried.append(f"{src}: no labelled {split} split exists")
            continue
        if all(p.is_file() for p in paths):
            if reader is read_rt_polarity:
                return reader(paths[0], paths[1], split)
            return reader(paths[0])
        tried.append(f"{src}: " + ", ".join(str(p) for p in paths if not p.is_file()))
    raise FileNotFoundError(
        f"no {split!r} split of {task!r} found under {root} (missing: {'; '.join(tried)}); "
        f"pass --data-dir / set {DATA_DIR_ENV}, or choose another split or source"
    )
