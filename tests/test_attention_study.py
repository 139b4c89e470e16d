"""The attention benchmark (smoke run). The NLP study's tests: tests/test_scratch_nlp.py."""

import importlib.util
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
