import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from meanfield.studies.limits import particle_equilibrium_run
from meanfield.workbench.sweeps import grid_points, run_key, run_sweep

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
from meanfield.workbench.sweeps import run_sweep
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


# ---- issue 11: runs keyed by the whole configuration; corrupt runs set aside ------------------
TINY = {"N": [4, 6], "seed": [0]}


def _tiny(out, fixed, **kw):
    kw.setdefault("scheduler", "threads")
    return run_sweep(particle_equilibrium_run, TINY, out, fixed=fixed, progress=False, **kw)


def test_rerun_with_other_parameters_never_reuses_stale_runs(tmp_path):
    """The issue's case: a folder holding a uniform/beta=4 sweep, rerun as semicircle/beta=50,
    must not print the old runs under the new labels."""
    from meanfield.errors import SweepConflictError

    old = _tiny(tmp_path, {"beta": 4.0, "case": "uniform", "t_end": 0.05})
    notes = []
    new = _tiny(tmp_path, {"beta": 50.0, "case": "semicircle", "t_end": 0.05}, log=notes.append)
    assert new.attrs["run_case"] == "semicircle" and new.attrs["run_beta"] == 50.0
    assert not np.array_equal(new["w2"].values, old["w2"].values)
    # each run equals a direct call with the new parameters
    direct = particle_equilibrium_run(6, 50.0, 0, case="semicircle", t_end=0.05)
    assert np.array_equal(new["w2"].sel(N=6, seed=0).values, direct["w2"].values)
    # the old runs are kept, and the differing parameters are named
    assert len(list((tmp_path / "runs").glob("*.nc"))) == 4
    assert len(notes) == 1 and "beta: 4.0 -> 50.0" in notes[0] and "case: 'uniform'" in notes[0]
    # refusing instead names them too, before any work
    before = sorted(p.name for p in (tmp_path / "runs").iterdir())
    with pytest.raises(SweepConflictError, match="beta: 50.0 -> 2.0"):
        _tiny(tmp_path, {"beta": 2.0, "case": "semicircle", "t_end": 0.05}, on_conflict="refuse")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == before


def test_the_key_holds_the_package_version(monkeypatch):
    from meanfield.workbench import sweeps

    fixed = {"beta": 1.0}
    a = sweeps.configuration_digest(sweeps.sweep_configuration(particle_equilibrium_run, fixed))
    monkeypatch.setattr(sweeps, "__version__", "999.0")
    b = sweeps.configuration_digest(sweeps.sweep_configuration(particle_equilibrium_run, fixed))
    assert a != b and run_key({"N": 4}, a) != run_key({"N": 4}, b)


def test_corrupt_and_partial_run_files_are_set_aside_and_recomputed(tmp_path):
    fixed = {"beta": 2.0, "case": "uniform", "t_end": 0.05}
    first = _tiny(tmp_path, fixed)
    runs = sorted((tmp_path / "runs").glob("*.nc"))
    data = runs[0].read_bytes()
    runs[0].write_bytes(data[: len(data) // 3])  # a truncated run file
    (tmp_path / "runs" / "N=9-deadbeef.nc.part").write_bytes(b"half a run")  # a killed write
    notes = []
    again = _tiny(tmp_path, fixed, log=notes.append)
    assert np.array_equal(again["w2"].values, first["w2"].values)  # recomputed, same result
    aside = sorted(p.name for p in (tmp_path / "runs" / "set_aside").iterdir())
    assert len(aside) == 2 and any(n.startswith(runs[0].name) for n in aside)
    assert len(notes) == 2 and any("unreadable" in n for n in notes)
    assert any("partial write" in n for n in notes)
    assert again.attrs["sweep_notes"] == notes


def test_unreachable_scheduler_fails_fast(tmp_path):
    from meanfield.errors import ResourceError

    with pytest.raises(ResourceError, match="not reachable"):
        _tiny(tmp_path, {"beta": 2.0}, scheduler="tcp://127.0.0.1:9")
    assert not (tmp_path / "runs").exists()


def _run_with_default(N, seed, *, scale=1.0):
    import xarray as xr

    return xr.Dataset({"x": ((), scale * N + seed)})


def test_the_key_holds_the_run_function_defaults(tmp_path, monkeypatch):
    """A run function whose default changes (same package version, parameter not fixed)
    must not reuse the runs made under the old default: the key holds the defaults too, and
    the note names the changed default."""
    from meanfield.workbench import sweeps

    def sweep(**kw):
        return run_sweep(
            _run_with_default,
            {"N": [1, 2]},
            tmp_path,
            fixed={"seed": 0},
            scheduler="threads",
            progress=False,
            **kw,
        )

    first = sweep()
    assert list(first["x"].values) == [1.0, 2.0]
    monkeypatch.setattr(_run_with_default, "__kwdefaults__", {"scale": 10.0})
    notes = []
    second = sweep(log=notes.append)
    assert list(second["x"].values) == [10.0, 20.0]  # recomputed under the new default
    assert len(notes) == 1 and "default scale: 1.0 -> 10.0" in notes[0]
    # an object default enters by its type, never by a repr holding a memory address
    f, o1, o2 = sweeps.sweep_configuration, object(), object()
    assert f(lambda a, b=o1: 0, {}) == f(lambda a, b=o2: 0, {})


def _run_reading_a_folder(N, *, offset, folder):
    import xarray as xr

    return xr.Dataset({"x": ((), N + offset + len(folder) * 0)})


def test_context_reaches_every_run_but_not_its_key(tmp_path):
    """``context`` (where inputs lie) is passed to each run like ``fixed`` but is not keyed:
    another folder finds the same runs; a changed fixed value computes new ones; a name both
    fixed and context is refused before any work."""
    from meanfield.errors import InputError

    def sweep(offset, folder):
        return run_sweep(
            _run_reading_a_folder,
            {"N": [1, 2]},
            tmp_path / "out",
            fixed={"offset": offset},
            context={"folder": folder},
            scheduler="threads",
            progress=False,
        )

    first = sweep(10, "/somewhere")
    names = sorted(p.name for p in (tmp_path / "out" / "runs").glob("*.nc"))
    again = sweep(10, "/elsewhere/entirely")
    assert sorted(p.name for p in (tmp_path / "out" / "runs").glob("*.nc")) == names
    assert again["x"].values.tolist() == first["x"].values.tolist() == [11, 12]
    assert sweep(20, "/somewhere")["x"].values.tolist() == [21, 22]
    assert len(list((tmp_path / "out" / "runs").glob("*.nc"))) == 4
    with pytest.raises(InputError, match="offset"):
        run_sweep(
            _run_reading_a_folder, {"N": [1]}, tmp_path / "x", fixed={"offset": 1},
            context={"offset": 2}, scheduler="threads", progress=False,
        )  # fmt: skip
    assert not (tmp_path / "x").exists()
