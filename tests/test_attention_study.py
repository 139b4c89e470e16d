"""The NLP study script (tiny CI configuration) and the attention benchmark (smoke run)."""

import csv
import importlib.util
import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "nlp"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny models: a second thread only adds synchronisation
    yield


def test_tiny_study_runs_resumes_and_reports(tmp_path):
    study = _load(ROOT / "paper_repro" / "nlp" / "run_study.py", "nlp_study")
    cfg_path = ROOT / "paper_repro" / "nlp" / "configs" / "tiny.json"
    cfg = json.loads(cfg_path.read_text())
    out = tmp_path / "tiny"
    args = ["--config", str(cfg_path), "--data-dir", str(FIX), "--out", str(out), "--quiet"]
    rep = study.main(args)
    n_variants = 1 + 2 * len(cfg["features"])
    expected = len(cfg["datasets"]) * n_variants * len(cfg["tie_qk"]) * len(cfg["seeds"])
    assert rep["runs_done"] == expected
    for name in (
        "results.csv",
        "table.md",
        "table.csv",
        "paired.md",
        "paired.csv",
        "phase_a.md",
        "config.json",
        "figures/metrics.png",
        "figures/alignment.png",
    ):
        assert (out / name).is_file(), name
    with open(out / "table.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(cfg["datasets"]) * n_variants * len(cfg["tie_qk"])
    assert all(int(r["seeds"]) == len(cfg["seeds"]) for r in rows)
    assert "±" in (out / "table.md").read_text()
    resolved = json.loads((out / "config.json").read_text())
    assert resolved["model"] == cfg["model"] and "torch" in resolved
    # resume: nothing left to do
    args.append("--no-figures")
    assert study.main(args)["runs_done"] == 0
    # an interrupted study resumes with only the missing run, and reproduces it exactly
    key = "rotten_tomatoes__kernel-favor__qk1__s1.json"
    before = json.loads((out / "runs" / key).read_text())
    (out / "runs" / key).unlink()
    assert study.main(args)["runs_done"] == 1
    after = json.loads((out / "runs" / key).read_text())
    for m in ("accuracy", "mcc", "ece", "log_loss", "brier", "align_heldout_after"):
        assert after[m] == pytest.approx(before[m], rel=1e-9, abs=1e-12), m
    # report-only rebuilds the tables from the run files
    assert study.main(args + ["--report-only"])["runs_done"] == 0


def test_study_config_errors(tmp_path):
    study = _load(ROOT / "paper_repro" / "nlp" / "run_study.py", "nlp_study2")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x"}))
    with pytest.raises(ValueError, match="missing config keys"):
        study.load_config(bad)
    with pytest.raises(FileNotFoundError, match="config file not found"):
        study.load_config(tmp_path / "none.json")


def test_benchmark_smoke():
    bench = _load(ROOT / "benchmarks" / "bench_attention.py", "bench_attention")
    res = bench.main(
        [
            "--max-len",
            "256",
            "--repeats",
            "1",
            "--threads",
            "1",
            "--embed-dim",
            "32",
            "--heads",
            "2",
            "--features",
            "8",
        ]
    )
    assert res["lengths"] == [128, 256]
    assert set(res["times"]) == {"softmax", "vanilla FAVOR", "Kernel-FAVOR"}
    assert all(t > 0 for ts in res["times"].values() for t in ts)
    assert bench.crossover([1, 2, 4], [5, 1, 1], [2, 2, 2]) == 2
    assert bench.crossover([1, 2, 4], [1, 3, 1], [2, 2, 2]) == 4
    assert bench.crossover([1, 2], [3, 3], [2, 2]) is None
    assert bench.fit_slope([1, 2, 4, 8], [3, 6, 12, 24]) == pytest.approx(1.0)
