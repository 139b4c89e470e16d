"""Data loaders (meanfield.attention.data) on the tiny fixtures, and their error messages."""

import os
from pathlib import Path

import numpy as np
import pytest

from meanfield.attention import data as D

FIX = Path(__file__).parent / "fixtures" / "nlp"


def test_sst2_glue_and_stsa():
    tr = D.load_split("sst2", "train", FIX)
    va = D.load_split("sst2", "validation", FIX)
    assert (len(tr), len(va)) == (48, 16)
    assert tr.text_b is None and set(np.unique(tr.labels)) == {0, 1}
    assert tr.text_a[0] == "a funny and moving script ."  # trailing space stripped
    assert tr.source.endswith("train.tsv")
    st = D.load_split("sst2", "test", FIX, source="stsa")
    assert len(st) == 16
    with pytest.raises(FileNotFoundError, match="glue: no labelled test split"):
        D.load_split("sst2", "test", FIX, source="glue")


def test_rotten_tomatoes_two_sources_agree():
    for split, n in (("train", 16), ("validation", 2), ("test", 2)):
        hf = D.load_split("rotten_tomatoes", split, FIX, source="hf")
        rt = D.load_split("rotten_tomatoes", split, FIX, source="rt")
        assert len(hf) == n
        assert hf.text_a == rt.text_a
        assert np.array_equal(hf.labels, rt.labels)
    tr = D.load_split("rotten_tomatoes", "train", FIX, source="rt")
    assert "caf\xe9" in tr.text_a[2] and "\x97" in tr.text_a[2]  # Latin-1 decoded


def test_qqp_bimpm_and_glue():
    dev = D.load_split("qqp", "validation", FIX, source="bimpm")
    assert len(dev) == 48 and dev.is_pair and len(dev.text_b) == 48
    glue = D.load_split("qqp", "train", FIX, source="glue")
    assert len(glue) == 24 and glue.is_pair
    with pytest.raises(FileNotFoundError, match="bimpm: .*train.tsv"):
        D.load_split("qqp", "train", FIX, source="bimpm")


def test_data_dir_from_environment(monkeypatch):
    monkeypatch.setenv(D.DATA_DIR_ENV, str(FIX))
    assert len(D.load_split("sst2", "validation")) == 16
    monkeypatch.delenv(D.DATA_DIR_ENV)
    with pytest.raises(FileNotFoundError, match="--data-dir.*MEANFIELD_DATA_DIR"):
        D.load_split("sst2", "validation")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        D.load_split("sst2", "validation", FIX / "nowhere")


def test_bad_task_split_source():
    with pytest.raises(ValueError, match="unknown task 'mnli'"):
        D.load_split("mnli", "train", FIX)
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        D.load_split("sst2", "dev", FIX)
    with pytest.raises(ValueError, match="source for sst2"):
        D.load_split("sst2", "train", FIX, source="hf")


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_malformed_lines_name_file_and_line(tmp_path):
    p = _write(tmp_path / "sst.tsv", b"sentence\tlabel\ngood film \t1\nno label here\n")
    with pytest.raises(D.DataFormatError, match=r"sst.tsv, line 3: expected 2 tab-separated"):
        D.read_glue_sst2(p)
    p = _write(tmp_path / "sst2.tsv", b"sentence\tlabel\ngood film \t1\nbad film \t2\n")
    with pytest.raises(D.DataFormatError, match=r"line 3: label must be one of 0, 1, got '2'"):
        D.read_glue_sst2(p)
    p = _write(tmp_path / "hdr.tsv", b"text\tlabel\ngood \t1\n")
    with pytest.raises(D.DataFormatError, match="line 1: expected the header"):
        D.read_glue_sst2(p)
    p = _write(tmp_path / "empty.tsv", b"sentence\tlabel\n \t1\n")
    with pytest.raises(D.DataFormatError, match="line 2: empty sentence"):
        D.read_glue_sst2(p)
    p = _write(tmp_path / "q.tsv", b"1\ta ?\tb ?\t7\n0\ta ?\tb ?\n")
    with pytest.raises(D.DataFormatError, match=r"q.tsv, line 2: expected 4 tab-separated"):
        D.read_qqp_bimpm(p)
    p = _write(tmp_path / "q2.tsv", b"1\ta ?\tb ?\tx7\n")
    with pytest.raises(D.DataFormatError, match="line 1: pair_id must be an integer"):
        D.read_qqp_bimpm(p)
    p = _write(tmp_path / "r.jsonl", b'{"text": "ok", "label": 1}\n{"text": "ok", "label": 1\n')
    with pytest.raises(D.DataFormatError, match=r"r.jsonl, line 2: invalid JSON"):
        D.read_rt_jsonl(p)
    p = _write(tmp_path / "r2.jsonl", b'{"text": "ok", "label": "1"}\n')
    with pytest.raises(D.DataFormatError, match="line 1: 'label' must be 0 or 1"):
        D.read_rt_jsonl(p)
    p = _write(tmp_path / "s.txt", b"1 fine\n0\n")
    with pytest.raises(D.DataFormatError, match="line 2: expected '<label> <sentence>'"):
        D.read_stsa_binary(p)
    p = _write(tmp_path / "none.tsv", b"sentence\tlabel\n")
    with pytest.raises(D.DataFormatError, match="no examples"):
        D.read_glue_sst2(p)


def test_bad_encoding_names_file_line_and_byte(tmp_path):
    # a Latin-1 file given to a UTF-8 reader (the classic rt-polarity mistake)
    p = _write(tmp_path / "latin.tsv", "sentence\tlabel\nok \t1\ncaf\xe9 \t1\n".encode("latin-1"))
    with pytest.raises(
        D.DataFormatError,
        match=r"latin.tsv, line 3: cannot decode byte 0xe9 at "
        r"column 4 as utf-8",
    ):
        D.read_glue_sst2(p)
    pos = _write(tmp_path / "p.pos", "fine\n".encode("latin-1"))
    neg = _write(tmp_path / "p.neg", "ok\nna\xefve\n".encode("latin-1"))
    with pytest.raises(D.DataFormatError, match=r"p.neg, line 2: cannot decode byte 0xef"):
        D.read_rt_polarity(pos, neg, "train", encoding="ascii")


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="data file not found: .*nothing.tsv"):
        D.read_glue_sst2(tmp_path / "nothing.tsv")
    with pytest.raises(FileNotFoundError, match=r"no 'train' split of 'sst2' found under"):
        D.load_split("sst2", "train", tmp_path)


def test_glue_qqp_skip_malformed(tmp_path):
    head = b"id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
    body = b"1\t2\t3\ta ?\tb ?\t0\n4\t5\t6\tbroken row\n7\t8\t9\tc ?\td ?\t1\n"
    p = _write(tmp_path / "qqp.tsv", head + body)
    with pytest.raises(D.DataFormatError, match=r"qqp.tsv, line 3: expected 6 tab-separated"):
        D.read_glue_qqp(p)
    with pytest.warns(UserWarning, match="skipped 1 malformed line"):
        d = D.read_glue_qqp(p, skip_malformed=True)
    assert len(d) == 2 and list(d.labels) == [0, 1]


def test_subset_and_crlf(tmp_path):
    p = _write(tmp_path / "crlf.tsv", b"sentence\tlabel\r\ngood \t1\r\nbad \t0\r\n")
    d = D.read_glue_sst2(p)
    assert d.text_a == ["good", "bad"]
    s = d.subset([1])
    assert s.text_a == ["bad"] and list(s.labels) == [0]


REAL = os.environ.get(D.DATA_DIR_ENV)


@pytest.mark.skipif(not REAL, reason=f"{D.DATA_DIR_ENV} not set (real data are optional)")
def test_real_data_counts_match_their_readmes():
    root = Path(REAL)
    if not (root / "sst2").is_dir():
        pytest.skip("no sst2/ under the data directory")
    assert len(D.load_split("sst2", "train", root)) == 67349
    assert len(D.load_split("sst2", "validation", root)) == 872
    for split, n in (("train", 8530), ("validation", 1066), ("test", 1066)):
        hf = D.load_split("rotten_tomatoes", split, root, source="hf")
        rt = D.load_split("rotten_tomatoes", split, root, source="rt")
        assert len(hf) == n and hf.text_a == rt.text_a
    q = D.load_split("qqp", "test", root, source="bimpm")
    assert len(q) == 10000 and int(q.labels.sum()) == 5000
