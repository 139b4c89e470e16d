"""Writers that cannot destroy: :func:`meanfield.results.save_dataset` and the ``--out`` of
every command refuse a target that exists and is not a regular file (a FIFO stands in for a
device such as ``/dev/null``), refuse a path that names a folder (a trailing separator), and
turn a failed write (a full disk) into :class:`~meanfield.errors.OutputWriteError`, leaving
nothing behind; each refusal comes before any work.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from meanfield.cli import main
from meanfield.errors import OutputPathError, OutputWriteError
from meanfield.results import load_dataset, save_dataset

fifo_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")


def _files(root: Path) -> dict:
    """Every path under ``root`` with its kind and (for a file) its bytes."""
    out = {}
    for p in sorted(root.rglob("*")):
        mode = p.lstat().st_mode
        out[p.relative_to(root)] = p.read_bytes() if stat.S_ISREG(mode) else stat.S_IFMT(mode)
    return out


def _dataset() -> xr.Dataset:
    rng = np.random.default_rng(0)
    return xr.Dataset(
        {"w2": (("N", "seed"), rng.random((3, 4)))},
        coords={"N": [10, 20, 40]},
        attrs={"beta": 2.0, "regime": "mean-field", "exact": True, "batch": None},
    )


def _never(*args, **kwargs):
    raise AssertionError("the work started: the refusal must come before it")


# ----------------------------------------------------------------------------------------
# save_dataset: what it writes, and what it refuses
# ----------------------------------------------------------------------------------------
def test_save_dataset_writes_what_xarray_writes(tmp_path):
    """The in-memory serialisation reads back identical to xarray's own file write."""
    ds = _dataset()
    reference = tmp_path / "direct.nc"
    clean = ds.copy()
    clean.attrs = {"beta": 2.0, "regime": "mean-field", "exact": 1, "batch": "none"}
    clean.to_netcdf(reference, engine="h5netcdf")
    path = save_dataset(ds, tmp_path / "sub" / "run.nc")
    xr.testing.assert_identical(load_dataset(path), load_dataset(reference))
    assert sorted(os.listdir(tmp_path / "sub")) == ["run.nc"]  # no .part left
    assert ds.attrs["exact"] is True  # the input is not modified


def test_save_dataset_replaces_a_regular_file(tmp_path):
    target = tmp_path / "run.nc"
    target.write_bytes(b"an old result")
    save_dataset(_dataset(), target)
    assert load_dataset(target)["w2"].shape == (3, 4)
    assert sorted(os.listdir(tmp_path)) == ["run.nc"]


@fifo_only
def test_save_dataset_refuses_a_fifo_and_a_link_to_one(tmp_path):
    """A FIFO (as /dev/null, not a regular file) is neither replaced nor opened: opening it
    to write would block this test for ever."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link.nc"
    link.symlink_to(fifo)
    before = _files(tmp_path)
    for target in (fifo, link):
        with pytest.raises(OutputPathError, match=r"path .*FIFO.*not a regular file"):
            save_dataset(_dataset(), target)
    assert _files(tmp_path) == before
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and link.is_symlink()


def test_save_dataset_refuses_a_directory(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(OutputPathError, match="path .* is an existing directory"):
        save_dataset(_dataset(), tmp_path / "d")


@pytest.mark.parametrize("tail", ["newdir/", "newdir" + os.sep, "newdir/.", "newdir/.."])
def test_save_dataset_refuses_a_path_that_names_a_folder(tmp_path, tail):
    """A trailing separator names a folder: refused (never a file named ``newdir``, never a
    guessed file name inside it), and nothing is created."""
    with pytest.raises(OutputPathError, match="path .*names a folder"):
        save_dataset(_dataset(), str(tmp_path) + os.sep + tail)
    assert os.listdir(tmp_path) == []


def test_save_dataset_refuses_a_path_under_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputPathError, match="which is a file, not a folder"):
        save_dataset(_dataset(), tmp_path / "f" / "run.nc")


# ----------------------------------------------------------------------------------------
# a failed write: nothing left behind
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_failed_write_leaves_nothing_and_keeps_the_old_file(tmp_path, monkeypatch, code):
    """The disk fills after 100 bytes: OutputWriteError naming the file and the cause; the
    temporary file and the folders this call created are removed, and an existing result at
    another path is untouched."""
    real_write = os.write
    calls = []

    def write(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:100]))  # a partial write, as a filling disk
        raise OSError(code, os.strerror(code))

    (tmp_path / "old.nc").write_bytes(b"a finished result")
    before = _files(tmp_path)
    monkeypatch.setattr(os, "write", write)
    with pytest.raises(OutputWriteError, match=r"cannot write .*run\.nc") as err:
        save_dataset(_dataset(), tmp_path / "new" / "deeper" / "run.nc")
    monkeypatch.undo()
    assert err.value.errno == code and isinstance(err.value, OSError)
    if code == errno.ENOSPC:
        assert "disk is full (ENOSPC)" in str(err.value)
    assert len(calls) == 2  # the loop went on after the partial write
    assert _files(tmp_path) == before


def test_failed_write_keeps_an_existing_target(tmp_path, monkeypatch):
    target = tmp_path / "run.nc"
    target.write_bytes(b"the previous result")

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OutputWriteError):
        save_dataset(_dataset(), target)
    monkeypatch.undo()
    assert target.read_bytes() == b"the previous result"
    assert os.listdir(tmp_path) == ["run.nc"]


_FSIZE_LIMIT = 16384  # bytes: below the ~50 kB dataset of the run, above everything else


def _limited():  # pragma: no cover - runs in the child
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (_FSIZE_LIMIT, resource.RLIM_INFINITY))


@pytest.mark.slow  # a fresh interpreter importing torch: ~15 s on the 2-core machine
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ as on Linux")
def test_cli_simulate_on_a_write_that_fails_exits_2_without_a_crash(tmp_path):
    """A real failed write, from the kernel: a file-size limit (RLIMIT_FSIZE) makes the
    write fail with EFBIG as a full disk fails with ENOSPC.  Written through HDF5 this
    crashed the interpreter at exit (segmentation fault, status 139) and left ``run.nc.part``;
    now the command ends with one error line, status 2, and nothing written."""
    argv = ["simulate", "--n-particles", "64", "--n-steps", "20", "--n-data", "40"]
    argv += ["--no-progress", "--out", "out/run.nc"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "meanfield", *argv],
        cwd=tmp_path,
        env=env,
        preexec_fn=_limited,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "OutputWriteError" in err[0] and "out/run.nc" in err[0], err
    assert "EFBIG" in err[0]
    assert list(tmp_path.iterdir()) == []  # neither the file, nor .part, nor out/


# ----------------------------------------------------------------------------------------
# the commands: --out checked before any work, by the flag's name
# ----------------------------------------------------------------------------------------
def _refused(argv, capsys, root, before) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("meanfield: error:"), err
    assert "--out" in err[0]
    assert _files(root) == before, "nothing may be written"
    return err[0]


SIM = ["simulate", "--n-particles", "8", "--n-steps", "2", "--no-progress", "--out"]


@fifo_only
def test_simulate_refuses_a_fifo_out_before_running(tmp_path, capsys, monkeypatch):
    from meanfield.workbench.config import SimulationConfig

    monkeypatch.setattr(SimulationConfig, "run", _never)
    os.mkfifo(tmp_path / "pipe")
    before = _files(tmp_path)
    line = _refused(SIM + [str(tmp_path / "pipe")], capsys, tmp_path, before)
    assert "FIFO" in line and "OutputPathError" in line


def test_simulate_refuses_a_trailing_separator(tmp_path, capsys, monkeypatch):
    """``--out newdir/`` wrote a *file* named ``newdir``; now it is refused (give the file
    name), and neither a file nor a folder ``newdir`` appears."""
    from meanfield.workbench.config import SimulationConfig

    monkeypatch.setattr(SimulationConfig, "run", _never)
    line = _refused(SIM + [str(tmp_path / "newdir") + "/"], capsys, tmp_path, {})
    assert "names a folder" in line


@fifo_only
def test_compare_refuses_a_fifo_where_its_dataset_goes(tmp_path, capsys, monkeypatch):
    import meanfield.workbench.problems as problems

    monkeypatch.setattr(problems, "run_default_comparison", _never)
    out = tmp_path / "cmp"
    out.mkdir()
    os.mkfifo(out / "comparison.nc")
    before = _files(tmp_path)
    line = _refused(["compare", "--no-progress", "--out", str(out)], capsys, tmp_path, before)
    assert "comparison.nc" in line and "FIFO" in line


@fifo_only
def test_study_t_decay_refuses_a_fifo_where_its_dataset_goes(tmp_path, capsys, monkeypatch):
    from meanfield.studies import limits

    monkeypatch.setattr(limits, "t_decay", _never)
    os.mkfifo(tmp_path / "t_decay.nc")
    before = _files(tmp_path)
    argv = ["study", "t-decay", "--no-progress", "--out", str(tmp_path)]
    assert "t_decay.nc" in _refused(argv, capsys, tmp_path, before)


def test_study_equilibrium_refuses_a_folder_where_its_dataset_goes(tmp_path, capsys):
    (tmp_path / "sweep.nc").mkdir()
    before = _files(tmp_path)
    argv = ["study", "equilibrium", "--no-progress", "--scheduler", "threads"]
    argv += ["--out", str(tmp_path)]
    assert "sweep.nc" in _refused(argv, capsys, tmp_path, before)


def test_study_beta_refuses_a_file_where_a_regime_folder_goes(tmp_path, capsys):
    (tmp_path / "mean-field").write_text("not a folder")
    before = _files(tmp_path)
    argv = ["study", "beta", "--no-progress", "--scheduler", "threads", "--out", str(tmp_path)]
    assert "mean-field" in _refused(argv, capsys, tmp_path, before)


def test_figures_refuses_an_out_that_is_a_file(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    before = _files(tmp_path)
    _refused(
        ["figures", "--only", "t_limit", "--out", str(tmp_path / "f")], capsys, tmp_path, before
    )
