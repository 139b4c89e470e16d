"""Smoke run of benchmarks/bench_pretrained_long.py on the tiny random BERT (a few seconds)."""

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]


def _load():
    path = ROOT / "benchmarks" / "bench_pretrained_long.py"
    spec = importlib.util.spec_from_file_location("bench_pretrained_long", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_tiny_run_writes_every_field(tmp_path):
    bench = _load()
    argv = ["--tiny", "--lengths", "64,32", "--out", str(tmp_path), "--memory", "inprocess"]
    res = bench.main(argv + ["--repeats", "2", "--note", "test run"])
    saved = json.loads((tmp_path / "bench_pretrained_long.json").read_text())
    names = ["softmax", "favor m=64", "softmaxfeat m=32"]
    assert saved["lengths"] == res["lengths"] == [32, 64]
    assert list(saved["models"]) == names
    assert saved["models"]["softmax"]["attn_implementation"] == "sdpa"
    assert saved["models"]["favor m=64"]["attn_implementation"] == "meanfield"
    assert saved["repeats"] == [2, 2]
    for key in ("times", "ratio", "cpu_times", "cpu_ratio"):
        assert list(saved[key]) == names
        assert all(len(v) == 2 and min(v) > 0 for v in saved[key].values()), key
    assert saved["ratio"]["softmax"] == [1.0, 1.0]
    for key in ("slopes", "cpu_slopes"):
        for s in saved[key].values():
            assert isinstance(s["fit"], float) and len(s["local"]) == 1, key
    mem = saved["memory"]
    assert all(len(v) == 2 and min(v) >= 0 for v in mem["peak_extra_MB"].values())
    assert set(mem["methods"]) <= {"VmHWM-reset", "ru_maxrss-lower-bound"} and mem["method"]
    sanity = saved["sanity"]
    assert sanity["L"] == 128  # the tiny model's position embeddings stop there
    assert sanity["linearized_softmax_vs_original_max_abs_diff"] < 1e-5
    assert sanity["stack_vs_full_model_max_abs_diff"] < 1e-5
    assert saved["machine"]["threads"] == 1 and saved["wall_seconds"] > 0
    txt = (tmp_path / "bench_pretrained_long.txt").read_text()
    assert "ENCODER STACK" in txt and "note: test run" in txt and "sanity at L = 128" in txt


@pytest.mark.parametrize(
    "argv",
    [
        ["--lengths", "0"],
        ["--lengths", "32,x"],
        ["--maps", "nope:8"],
        ["--maps", "favor:0"],
        ["--repeats", "0"],
        ["--model-dir", "/nonexistent/model"],
    ],
)
def test_bad_input_exits_2_with_one_line(argv, capsys):
    bench = _load()
    with pytest.raises(SystemExit) as exc:
        bench.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench_pretrained_long.py: error: "), err
    assert argv[0] in err[0]
