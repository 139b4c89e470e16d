"""The NLP study script (tiny CI configuration) and the attention benchmark (smoke run)."""

import csv
import importlib.util
import json
import math
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
    n_main = 1 + 2 * len(cfg["features"])  # softmax, vanilla X, Kernel-X
    n_ctl = len(cfg["controls"]["kinds"])
    per_seed = sum(
        (n_main + (n_ctl if d["name"] in cfg["controls"]["datasets"] else 0))
        * len(d.get("tie_qk", cfg["tie_qk"]))
        for d in cfg["datasets"]
    )
    assert rep["runs_done"] == per_seed * len(cfg["seeds"])
    for name in (
        "results.csv",
        "table.md",
        "table.csv",
        "paired.md",
        "paired.csv",
        "claims.md",
        "phase_a.md",
        "training.md",
        "config.json",
        "figures/metrics.png",
        "figures/alignment.png",
    ):
        assert (out / name).is_file(), name
    for d in cfg["datasets"]:
        base = json.loads((out / "runs" / f"baseline__{d['name']}.json").read_text())
        assert 0.0 <= base["accuracy"] <= 1.0 and base["C"] > 0
    with open(out / "table.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == per_seed
    assert all(int(r["seeds"]) == len(cfg["seeds"]) for r in rows)
    assert all(0.0 <= float(r["noisy_accuracy"]) <= 1.0 for r in rows)
    table = (out / "table.md").read_text()
    assert "±" in table and "TF-IDF + LR" in table and "Sanity bar" in table
    claims = (out / "claims.md").read_text()
    for head in (
        "sst2: Kernel-PORF-softplus",
        "sst2: Kernel-FAVOR",
        "qqp: Kernel-softmaxfeat",
        "rotten_tomatoes: Kernel-softmaxfeat",
        "headline",
    ):
        assert head in claims, head
    # Kernel-FAVOR against each control isolates what Phase A's particles add
    ctl = claims.split("minus each control")[1]
    kinds = ("redraw Ω", "Phase A directions", "Phase A, λ = 0", "Phase A at init")
    assert all(f"minus control: {k}" in ctl for k in kinds)
    with open(out / "paired.csv") as fh:
        branches = {r["branch"] for r in csv.DictReader(fh)}
    assert branches == {"kernel", "redraw", "priornorms", "lam0", "atinit"}
    resolved = json.loads((out / "config.json").read_text())
    assert resolved["model"] == cfg["model"] and "torch" in resolved and "machine" in resolved
    # resume: nothing left to do
    args.append("--no-figures")
    assert study.main(args)["runs_done"] == 0
    # an interrupted study resumes with only the missing run, and reproduces it exactly
    for key in ("rotten_tomatoes__kernel-favor__qk0__s1", "rotten_tomatoes__atinit-favor__qk0__s1"):
        before = json.loads((out / "runs" / f"{key}.json").read_text())
        (out / "runs" / f"{key}.json").unlink()
        assert study.main(args)["runs_done"] == 1
        after = json.loads((out / "runs" / f"{key}.json").read_text())
        for m in (
            "accuracy",
            "noisy_accuracy",
            "ece",
            "log_loss",
            "align_heldout_after",
            "row_norm_after",
        ):
            assert after[m] == pytest.approx(before[m], rel=1e-9, abs=1e-12), (key, m)
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
    good = json.loads((ROOT / "paper_repro" / "nlp" / "configs" / "tiny.json").read_text())
    for change, match in [
        ({"features": ["relu"]}, "unknown feature"),
        ({"seeds": [1, 1]}, "distinct"),
        ({"train": {"lr": 1e-3}}, "missing train keys"),
        ({"controls": {"feature": "porf", "datasets": []}}, "controls.feature"),
        ({"controls": {"feature": "favor", "datasets": ["imdb"]}}, "controls.datasets"),
        ({"controls": {"feature": "favor", "kinds": ["shuffle"]}}, "unknown controls"),
        ({"noise": {"rate": 1.5}}, "noise.rate"),
    ]:
        bad.write_text(json.dumps({**good, **change}))
        with pytest.raises(ValueError, match=match):
            study.load_config(bad)
    # the statistics the reports rest on: a t-interval and the claim verdicts
    m, lo, hi = study.mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and hi - m == pytest.approx(4.302652729911275 / math.sqrt(3))
    assert study.verdict_better(0.02, 0.01, 0.03, "accuracy") == "yes"
    assert study.verdict_better(0.02, 0.01, 0.03, "ece") == "no"
    assert study.verdict_better(0.02, -0.01, 0.05, "accuracy") == "inconclusive"


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
    assert set(res["times"]) == {"bidirectional", "causal"}
    layers = {"softmax", "favor", "porf", "porf-softplus", "softmaxfeat", "kernel-favor"}
    for mode, per_layer in res["times"].items():
        assert set(per_layer) == layers, mode
        assert all(len(ts) == 2 and all(t > 0 for t in ts) for ts in per_layer.values())
        assert set(res["ratio_to_sdpa"][mode]) == layers - {"softmax"}
    assert bench.crossover([1, 2, 4], [5, 1, 1], [2, 2, 2]) == 2
    assert bench.crossover([1, 2, 4], [1, 3, 1], [2, 2, 2]) == 4
    assert bench.crossover([1, 2], [3, 3], [2, 2]) is None
    assert bench.fit_slope([1, 2, 4, 8], [3, 6, 12, 24]) == pytest.approx(1.0)
