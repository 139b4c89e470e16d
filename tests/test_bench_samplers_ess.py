"""Smoke run of benchmarks/bench_samplers_ess.py (``--quick``: small N, few steps) and the
closed forms it compares the samplers against."""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    path = ROOT / "benchmarks" / "bench_samplers_ess.py"
    spec = importlib.util.spec_from_file_location("bench_samplers_ess", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exact_variances_are_the_closed_forms_of_the_docs():
    """The 1d finite-N value (β-Hermite) and the 2d one (Ginibre) of docs/sampling.rst; the
    β-Hermite value checked against Dumitriu–Edelman tridiagonal draws (4000 draws: the
    standard error of the mean is 0.0012, tolerance 4 SE)."""
    bench = _bench()
    one = bench.CASES["1d"]
    exact = bench.exact_variance(one)
    assert exact == pytest.approx(0.7425, abs=1e-12)
    assert bench.exact_variance(bench.CASES["2d"]) == pytest.approx(31 / 60 - 1 / 900, abs=1e-12)
    N, beta = 20, one["beta"]
    rng = np.random.default_rng(0)
    draws = np.empty((4000, N))
    for r in range(len(draws)):
        diag = rng.normal(0.0, math.sqrt(2.0), N)
        off = np.sqrt(rng.chisquare((beta / N) * np.arange(N - 1, 0, -1)))
        H = (np.diag(diag) + np.diag(off, 1) + np.diag(off, -1)) / math.sqrt(2.0)
        draws[r] = np.linalg.eigvalsh(H) / math.sqrt(beta)
    cv = draws.var(1)
    small = bench.exact_variance({**one, "N": N})
    assert abs(cv.mean() - small) < 4 * cv.std() / math.sqrt(len(cv)), (cv.mean(), small)


@pytest.mark.slow  # ~10 s (20 s on the loaded 2-core machine)
def test_quick_run_writes_every_sampler_of_both_cases(tmp_path):
    bench = _bench()
    res = bench.main(["--quick", "--cases", "1d,2d", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "bench_samplers_ess.json").read_text())
    assert saved["meta"]["quick"] and len(saved["meta"]["load_before"]) == 3
    for cname in ("1d", "2d"):
        case = res["cases"][cname]
        assert set(case["samplers"]) == {"langevin", "mala", "hmc"}
        for row in case["samplers"].values():
            s = row["summary"]
            assert len(row["runs"]) == 2 and all(r["wall_s"] > 0 for r in row["runs"])
            assert math.isfinite(s["variance"]) and s["ess_per_s_median"] > 0
            # a variance of the gas, not of something else: within a factor 2 of the truth
            assert 0.5 * case["exact_variance"] < s["variance"] < 2 * case["exact_variance"]
    # the 1d mean-field reference is the Gibbs state's variance 1/2 + 1/β on 3200 cells
    assert res["cases"]["1d"]["mean_field_variance"] == pytest.approx(0.75, abs=1e-5)
