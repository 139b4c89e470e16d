"""Smoke run of the 3D-grid section of benchmarks/bench_pde.py (tiny grids, ~10 s)."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_grid3d_section_measures_and_writes(tmp_path):
    bench = _load(ROOT / "benchmarks" / "bench_pde.py", "bench_pde")
    out = tmp_path / "pde3d"
    res = bench.section_grid3d(True, sizes=[8], stationary=[8], out=out)
    (row,) = res["rows"]
    assert "note" not in row, row
    assert row["cells"] == 8**3 and row["torch_threads"] == 1
    assert row["fft_shape"] == [15, 15, 15]  # zero-padded to 2n − 1 (15 = 3·5 is fast)
    for key in ("setup_s", "stiffness_s", "potential_s", "step_s"):
        assert row[key] > 0, key
    assert row["peak_MB"] >= row["peak_setup_MB"] >= row["base_MB"] > 0
    (st,) = res["stationary"]
    assert st["converged"] and st["gap"] <= 1e-8 and st["wall_s"] > 0
    assert res["meta"]["torch_threads"] == 1 and res["meta"]["cpu_count"] >= 1
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["rows"][0]["n"] == 8
    md = out.with_suffix(".md").read_text()
    assert "| 8³ | 15×15×15 |" in md and "β = ∞ equilibrium" in md


def test_time_to_accuracy_interpolates_on_the_pareto_front():
    bench = _load(ROOT / "benchmarks" / "bench_pde.py", "bench_pde")
    # a solver whose time is exactly t = e^(-1.5): the interpolation must recover it
    rows = [{"L1": e, "call_s": e**-1.5} for e in (1e-2, 1e-3, 1e-4)]
    rows.append({"L1": 5e-3, "call_s": 1e6})  # dominated: not on the front
    assert [r["L1"] for r in bench.pareto(rows)] == [1e-4, 1e-3, 1e-2]
    best, t = bench.time_at_accuracy(rows, 3e-4)
    assert best["L1"] == 1e-4 and abs(t - 3e-4**-1.5) < 1e-9 * t
    assert bench.time_at_accuracy(rows, 1e-5)[0] is None  # no run reaches it


def test_ou_section_measures_both_solvers(tmp_path):
    bench = _load(ROOT / "benchmarks" / "bench_pde.py", "bench_pde")
    sweeps = {"sg": [48, 96], "mprk": [64], "dts": [0.1], "pypde": [], "implicit_step": [256]}
    res = bench.section_ou(False, skip_pypde=True, out=tmp_path / "ou", sweeps=sweeps)
    by = {(r["solver"], r["n"]): r for r in res["meanfield"]}
    # the exact-OU L1 error of SG is second order in h: 48 -> 96 cells gains about 4x
    ratio = by[("meanfield sg", 48)]["L1"] / by[("meanfield sg", 96)]["L1"]
    assert 3.0 < ratio < 5.0, ratio
    assert all(r["min_rho"] >= 0 and r["call_s"] > 0 for r in res["meanfield"])
    (step,) = res["implicit_step"]
    assert step["M"] == 256 and step["implicit_euler_batched_s"] > 0
    assert (tmp_path / "ou.md").read_text().count("| 1e-0") >= 3
