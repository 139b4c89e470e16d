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
