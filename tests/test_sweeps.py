import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from meanfield.studies.limits import particle_equilibrium_run
from meanfield.sweeps import grid_points, run_key, run_sweep

GRID = {"N": [8, 16], "seed": [0, 1, 2]}
FIXED = {"beta": 2.0, "case": "uniform", "t_end": 2.0}


def test_grid_points_and_keys():
    pts = grid_points({"a": [1, 2], "b": ["x"]})
    assert pts == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]
    assert run_key(pts[0]) != run_key(pts[1])
    with pytest.raises(ValueError, match="non-empty list"):
        grid_points({"a": []})
    with pytest.raises(ValueError, match="repeated"):
        grid_points({"a": [1, 1]})


def test_sweep_gathers_a_labelled_dataset(tmp_path):
    ds = run_sweep(
        particle_equilibrium_run,
        GRID,
        tmp_path,
        fixed=FIXED,
        scheduler="threads",
        n_workers=2,
        progress=False,
    )
    assert ds["w1"].dims == ("N", "seed", "replica")
    assert list(ds["N"].values) == [8, 16]
    assert "sweep_grid" in ds.attrs and "meanfield_version" in ds.attrs
    assert (tmp_path / "sweep.nc").exists()
    # each run is exactly what a direct call gives (seeded through its parameters)
    one = particle_equilibrium_run(16, seed=2, **FIXED)
    assert np.array_equal(
        ds["omega_final"].sel(N=16, seed=2).values[..., :16, :], one["omega_final"].values
    )


def test_threads_and_local_cluster_give_identical_results(tmp_path):
    a = run_sweep(
        particle_equilibrium_run,
        GRID,
        tmp_path / "a",
        fixed=FIXED,
        scheduler="threads",
        progress=False,
    )
    b = run_sweep(
        particle_equilibrium_run,
        GRID,
        tmp_path / "b",
        fixed=FIXED,
        scheduler="local",
        n_workers=2,
        progress=False,
    )
    for k in ("omega_final", "w1", "w2"):
        assert np.array_equal(a[k].values, b[k].values, equal_nan=True)


SCRIPT = """
import sys, time
from meanfield.sweeps import run_sweep
from meanfield.studies.limits import particle_equilibrium_run
run_sweep(particle_equilibrium_run, {{"N": [8, 12, 16, 20, 24, 28]}}, {out!r},
          fixed={{"beta": 2.0, "case": "uniform", "t_end": 3.0, "seed": 0}},
          scheduler="threads", n_workers=1, progress=False)
"""


def test_killed_sweep_resumes_without_recomputing(tmp_path):
    out = tmp_path / "sweep"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT.format(out=str(out))], start_new_session=True
    )
    runs = out / "runs"
    deadline = time.time() + 120
    while time.time() < deadline:
        done = list(runs.glob("*.nc")) if runs.exists() else []
        if len(done) >= 2 or proc.poll() is not None:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {p.name: p.stat().st_mtime_ns for p in runs.glob("*.nc")}
    assert 2 <= len(finished) < 6, "the kill must land mid-sweep"
    assert not (out / "sweep.nc").exists()
    ds = run_sweep(
        particle_equilibrium_run,
        {"N": [8, 12, 16, 20, 24, 28]},
        out,
        fixed={"beta": 2.0, "case": "uniform", "t_end": 3.0, "seed": 0},
        scheduler="threads",
        progress=False,
    )
    after = {p.name: p.stat().st_mtime_ns for p in runs.glob("*.nc")}
    assert len(after) == 6 and ds.sizes["N"] == 6
    for name, mtime in finished.items():  # finished runs were not recomputed
        assert after[name] == mtime
    assert not list(runs.glob("*.part"))
