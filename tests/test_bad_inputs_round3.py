"""Bad inputs refused by name before any work, or answered right: sweep grids with values
equal as numbers, run files under another run's name, grids beyond the memory ceiling,
attention over no key or no query, and writers on a full disk (ENOSPC, by a monkeypatched
``os.write``) that leave nothing partial behind."""

from __future__ import annotations

import errno
import os
import re
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import xarray as xr

from meanfield.domains import Box
from meanfield.errors import (
    InputError,
    InputTypeError,
    MeanfieldWarning,
    OutputPathError,
    OutputWriteError,
    RunFileMismatchWarning,
    SizeLimitError,
)
from meanfield.pde import grid as grid_module
from meanfield.pde.grid import GRID_BYTES_ENV, Grid, check_grid_size, grid_memory_estimate
from meanfield.results import load_dataset, save_dataset
from meanfield.workbench import sweeps
from meanfield.workbench.sweeps import grid_points, run_key, run_sweep


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _files_under(folder) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs
    )


# -- sweeps: values equal as numbers are repeats ----------------------------------------------
CALLS: list = []


def _recording_run(N, seed=0):
    """A sweep's run function that records each call (threads scheduler: same process)."""
    CALLS.append((N, seed))
    return xr.Dataset({"x": ((), float(10 * N + seed))})


@pytest.mark.parametrize(
    "values",
    [
        [1, 1.0],
        [True, 1],
        [np.int64(2), 2.0],
        [np.float32(0.5), 0.5],
        [float("nan"), np.nan],
        [[1, 2], (1.0, 2)],
    ],
    ids=["int-float", "bool-int", "numpy-int-float", "float32-float", "nan-nan", "lists"],
)
def test_grid_values_equal_as_numbers_are_refused_by_name_before_any_work(tmp_path, values):
    out = tmp_path / "sweep"
    CALLS.clear()
    with pytest.raises(InputError, match=r"grid\['N'\] must hold distinct values"):
        run_sweep(_recording_run, {"N": values}, out, scheduler="threads", progress=False)
    assert CALLS == [] and not out.exists()  # no run, no folder


def test_distinct_grid_values_of_other_types_are_kept():
    # "1" is a string, not the number 1; 0.1 and float32(0.1) differ as numbers
    pts = grid_points({"N": [1, "1", 0.1, float(np.float32(0.1))]})
    assert [p["N"] for p in pts] == [1, "1", 0.1, float(np.float32(0.1))]
    with pytest.raises(InputTypeError, match=r"grid\['N'\] must be a non-empty list"):
        grid_points({"N": "12"})
    with pytest.raises(InputTypeError, match="grid must be a dict"):
        grid_points([("N", [1])])


# -- sweeps: a run file copied under another run's name is recomputed ------------------------
def _copy_run(out, src_point, dst_point):
    digest = sweeps.configuration_digest(sweeps.sweep_configuration(_recording_run, {}))
    runs = out / "runs"
    src, dst = (runs / f"{run_key(p, digest)}.nc" for p in (src_point, dst_point))
    shutil.copyfile(src, dst)
    return dst


def test_run_file_copied_under_another_runs_name_is_set_aside_and_recomputed(tmp_path):
    grid = {"N": [1, 2], "seed": [0]}
    first = run_sweep(_recording_run, grid, tmp_path, scheduler="threads", progress=False)
    assert first["x"].values.ravel().tolist() == [10.0, 20.0]
    dst = _copy_run(tmp_path, {"N": 2, "seed": 0}, {"N": 1, "seed": 0})
    assert load_dataset(dst)["x"].item() == 20.0  # the wrong run under N=1's name
    CALLS.clear()
    with pytest.warns(RunFileMismatchWarning, match=r"holds the run 'N=2_seed=0-"):
        again = run_sweep(_recording_run, grid, tmp_path, scheduler="threads", progress=False)
    assert CALLS == [(1, 0)]  # only the mismatched run recomputed
    assert again["x"].values.ravel().tolist() == [10.0, 20.0]  # right, not the copy's 20
    aside = list((tmp_path / "runs" / "set_aside").iterdir())
    assert len(aside) == 1 and aside[0].name.startswith(dst.name)


def test_run_file_without_a_recorded_key_is_checked_by_its_recorded_parameters(tmp_path):
    """A run file written before keys were recorded: its sweep_<name> values decide."""
    grid = {"N": [1, 2]}
    run_sweep(_recording_run, grid, tmp_path, scheduler="threads", progress=False)
    dst = _copy_run(tmp_path, {"N": 2}, {"N": 1})
    ds = load_dataset(dst)
    del ds.attrs["sweep_run_key"]
    save_dataset(ds, dst)
    notes = []
    again = run_sweep(
        _recording_run, grid, tmp_path, scheduler="threads", progress=False, log=notes.append
    )
    assert again["x"].values.tolist() == [10.0, 20.0]
    assert len(notes) == 1 and "records another grid point: N=2 (expected 1)" in notes[0]
    # the good file (N=2) was kept: a resumed sweep with nothing wrong notes nothing
    notes.clear()
    CALLS.clear()
    run_sweep(_recording_run, grid, tmp_path, scheduler="threads", progress=False, log=notes.append)
    assert notes == [] and CALLS == []


def test_notes_on_other_configurations_are_meanfield_warnings(tmp_path):
    run_sweep(_recording_run, {"N": [1]}, tmp_path, scheduler="threads", progress=False)
    with pytest.warns(MeanfieldWarning, match="another configuration"):
        run_sweep(
            _recording_run, {"N": [1]}, tmp_path, fixed={"seed": 3}, scheduler="threads",
            progress=False,
        )  # fmt: skip


# -- sizes: a grid beyond the memory ceiling ---------------------------------------------------
@pytest.mark.parametrize(
    "dim, n",
    [(3, 10**5), (2, 10**5), (1, 10**10), (3, (10**5, 10**5, 4))],
    ids=["3d", "2d", "1d", "3d-uneven"],
)
def test_huge_grids_are_refused_by_name_before_allocating(dim, n):
    # each would fail with a raw MemoryError at its first array (7 PiB for the 3D mesh)
    with pytest.raises(SizeLimitError, match=r"n \(cells per axis\): a grid of .* cells"):
        Grid(Box(dim, 1.0), n)


def test_grid_ceiling_is_the_estimate_and_follows_the_environment(monkeypatch):
    # the estimate is cells x 8 bytes x 64 arrays, computed here independently
    assert grid_memory_estimate((64, 64)) == 64 * 64 * 8 * 64
    monkeypatch.setenv(GRID_BYTES_ENV, str(64 * 64 * 8 * 64))
    assert Grid(Box(2, 1.0), 64).size == 4096  # exactly at the ceiling: accepted
    monkeypatch.setenv(GRID_BYTES_ENV, str(64 * 64 * 8 * 64 - 1))
    with pytest.raises(SizeLimitError) as err:
        Grid(Box(2, 1.0), 64)
    # the message's "at most k cells per axis" is the largest k that fits
    k = int(re.search(r"at most (\d+) cells per axis", str(err.value)).group(1))
    ceiling = 64 * 64 * 8 * 64 - 1
    assert k == 63 and k**2 * 512 <= ceiling < (k + 1) ** 2 * 512
    monkeypatch.setenv(GRID_BYTES_ENV, "inf")
    assert Grid(Box(3, 1.0), 10**5).size == 10**15  # no check; nothing allocated by a Grid
    for bad in ("-1", "zero", "nan"):
        monkeypatch.setenv(GRID_BYTES_ENV, bad)
        with pytest.raises(InputError, match=GRID_BYTES_ENV):
            Grid(Box(1, 1.0), 8)
    monkeypatch.delenv(GRID_BYTES_ENV)
    monkeypatch.setattr(grid_module, "MAX_GRID_BYTES", 10**6)
    with pytest.raises(SizeLimitError):
        check_grid_size((64, 64))
    assert check_grid_size((32, 32)) == 32 * 32 * 512


def test_grid_argument_errors_are_named():
    from meanfield.domains import Ball

    with pytest.raises(InputError, match="incompatible domain"):
        Grid(Ball(2, 1.0), 8)
    with pytest.raises(InputTypeError, match="domain must be"):
        Grid("box", 8)
    with pytest.raises(InputError, match="must give 2 cell count"):
        Grid(Box(2, 1.0), (8, 8, 8))
    with pytest.raises(InputError, match="shape"):
        Grid(Box(1, 1.0), 8).integrate(np.ones(3))


# -- attention: no key, no query ---------------------------------------------------------------
def _fm():
    from meanfield.attention.features import make_feature_map

    return make_feature_map("porf", 4, 8, seed=0)


def _attend(kind, q, k, v, **kw):
    from meanfield.attention.linear import kernel_attention, linear_attention, softmax_attention

    if kind == "linear":
        return linear_attention(q.exp(), k.exp(), v, **kw)  # features >= 0
    if kind == "kernel":
        return kernel_attention(q, k, v, _fm(), **kw)
    return softmax_attention(q, k, v, **kw)


KINDS = ["linear", "kernel", "softmax"]


@pytest.mark.parametrize("kind", KINDS)
def test_zero_keys_with_queries_are_refused_by_name(kind):
    # SDPA returns zeros here (an average over an empty set): refused in all three forms
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 1, 4, generator=g, dtype=torch.float64)
    k, v = (
        torch.zeros(2, 0, 1, 4, dtype=torch.float64),
        torch.zeros(2, 0, 1, 5, dtype=torch.float64),
    )
    with pytest.raises(InputError, match=r"no keys \(S = 0\): attention of 3 queries"):
        _attend(kind, q, k, v)
    with pytest.raises(InputError, match=r"no keys \(S = 0\)"):
        _attend(kind, q, k, v, key_padding_mask=torch.zeros(2, 0, dtype=torch.bool))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("causal, S", [(True, 0), (False, 0), (False, 3)])
def test_no_query_gives_the_empty_result_of_sdpa(kind, causal, S):
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 0, 3, 4, generator=g, dtype=torch.float64)
    k = torch.randn(2, S, 3, 4, generator=g, dtype=torch.float64)
    v = torch.randn(2, S, 3, 5, generator=g, dtype=torch.float64)
    out = _attend(kind, q, k, v, causal=causal)
    ref = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal
    ).transpose(1, 2)
    assert out.shape == ref.shape == (2, 0, 3, 5) and out.dtype == ref.dtype


def test_softmax_attention_argument_errors_are_named():
    from meanfield.attention.linear import softmax_attention

    x = torch.zeros(1, 3, 1, 4)
    with pytest.raises(InputError, match="q must be a 4-d tensor"):
        softmax_attention(torch.zeros(3, 1, 4), x, x)
    with pytest.raises(InputTypeError, match="k must be a 4-d torch.Tensor"):
        softmax_attention(x, [[0.0]], x)
    with pytest.raises(InputError, match="head dimension"):
        softmax_attention(torch.zeros(1, 3, 1, 2), x, x)
    with pytest.raises(InputError, match="causal attention needs equal"):
        softmax_attention(torch.zeros(1, 2, 1, 4), x, x, causal=True)
    with pytest.raises(InputError, match=r"dropout_p must be .*\[0, 1\)"):
        softmax_attention(x, x, x, dropout_p=1.0)
    with pytest.raises(InputTypeError, match="dropout_p must be a real number"):
        softmax_attention(x, x, x, dropout_p=True)
    with pytest.raises(InputError, match="key_padding_mask must have shape"):
        softmax_attention(x, x, x, key_padding_mask=torch.zeros(1, 2, dtype=torch.bool))


# -- writers: a full disk leaves nothing partial -----------------------------------------------
def _tiny_problem(**changes):
    from meanfield.workbench.problems import ComparisonConfig

    fields = dict(n_data=10, cells=16, n_particles=20, t_final=0.02)
    return ComparisonConfig(**(fields | changes))


def test_comparison_on_a_full_disk_leaves_no_folder(tmp_path, monkeypatch):
    from meanfield.workbench.problems import run_default_comparison

    out = tmp_path / "new" / "out"
    monkeypatch.setattr(os, "write", _no_space)
    with pytest.raises(OutputWriteError, match=r"comparison\.nc.*disk is full \(ENOSPC\)"):
        run_default_comparison(out, _tiny_problem(), n_records=1)
    assert os.listdir(tmp_path) == []  # neither out nor its parent, nor a .part


def test_comparison_whose_figure_hits_a_full_disk_keeps_the_complete_dataset(tmp_path, monkeypatch):
    from meanfield.workbench.problems import run_default_comparison

    real_write, written = os.write, []

    def write_dataset_only(fd, data):
        if written:  # the dataset went first; the figure finds the disk full
            _no_space()
        written.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write_dataset_only)
    with pytest.raises(OutputWriteError, match=r"comparison\.png.*ENOSPC"):
        run_default_comparison(tmp_path / "out", _tiny_problem(), n_records=1)
    monkeypatch.setattr(os, "write", real_write)
    assert _files_under(tmp_path) == [os.path.join("out", "comparison.nc")]
    assert load_dataset(tmp_path / "out" / "comparison.nc")["w2"].size == 2  # complete


def test_comparison_config_refuses_the_work_runspec_refuses(monkeypatch):
    """The estimate is RunSpec's own: a ceiling at the spec's work accepts the configuration,
    one evaluation less refuses it, before the data are drawn."""
    problem = _tiny_problem()
    work = problem.spec().work()
    monkeypatch.setenv("MEANFIELD_MAX_WORK", repr(work))
    assert _tiny_problem().spec().work() == work
    monkeypatch.setenv("MEANFIELD_MAX_WORK", repr(work - 1))
    with pytest.raises(SizeLimitError, match=r"n_steps, n_particles: the run would need"):
        _tiny_problem()
    monkeypatch.delenv("MEANFIELD_MAX_WORK")
    with pytest.raises(SizeLimitError, match="above the work ceiling 1e"):
        _tiny_problem(n_particles=10**6, t_final=100.0)  # 2e16 evaluations


def _comparison_dataset():
    t, x = [0.0, 1.0], np.linspace(-0.75, 0.75, 4)
    omega = np.linspace(-0.9, 0.9, 8).reshape(1, 8, 1).repeat(2, 0)
    return xr.Dataset(
        {
            "omega": (("time", "particle", "dim"), omega),
            "rho": (("time", "x"), np.full((2, 4), 0.5)),
            "w2": ("time", [0.3, 0.1]),
            "energy_grid": ("time", [1.0, 0.5]),
            "energy_particles": ("time", [1.1, 0.6]),
            "free_energy_grid": ("time", [0.8, 0.3]),
        },
        coords={"time": t, "x": x},
    )


def test_figure_on_a_full_disk_leaves_nothing(tmp_path, monkeypatch):
    from meanfield.workbench.plotting import plot_comparison

    monkeypatch.setattr(os, "write", _no_space)
    with pytest.raises(OutputWriteError, match=r"fig\.png.*ENOSPC"):
        plot_comparison(_comparison_dataset(), tmp_path / "a" / "fig.png")
    assert os.listdir(tmp_path) == []


def test_figure_is_written_whole_in_the_format_of_its_suffix(tmp_path):
    from meanfield.workbench.plotting import plot_comparison

    ds = _comparison_dataset()
    plot_comparison(ds, tmp_path / "a" / "fig.png")
    plot_comparison(ds, tmp_path / "fig.svg")
    assert (tmp_path / "a" / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (tmp_path / "fig.svg").read_bytes()[:1000]
    assert _files_under(tmp_path) == [os.path.join("a", "fig.png"), "fig.svg"]  # no .part


def test_figure_path_refused_before_drawing(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from meanfield.workbench.plotting import plot_comparison

    def no_drawing(*args, **kwargs):
        raise AssertionError("drawn before the path was checked")

    monkeypatch.setattr(Figure, "subplots", no_drawing)
    with pytest.raises(InputError, match=r"image format 'xyz'"):
        plot_comparison(_comparison_dataset(), tmp_path / "new" / "fig.xyz")
    with pytest.raises(OutputPathError):
        plot_comparison(_comparison_dataset(), tmp_path)  # a folder
    assert os.listdir(tmp_path) == []


def test_manifest_on_a_full_disk_leaves_no_folder_and_keeps_the_old_one(tmp_path, monkeypatch):
    out = tmp_path / "new" / "sweep"
    monkeypatch.setattr(os, "write", _no_space)
    CALLS.clear()
    with pytest.raises(OutputWriteError, match=r"configurations\.json.*ENOSPC"):
        run_sweep(_recording_run, {"N": [1]}, out, scheduler="threads", progress=False)
    assert CALLS == [] and os.listdir(tmp_path) == []
    monkeypatch.undo()
    run_sweep(_recording_run, {"N": [1]}, out, scheduler="threads", progress=False)
    before = (out / sweeps.MANIFEST).read_bytes()
    monkeypatch.setattr(os, "write", _no_space)
    with pytest.raises(OutputWriteError):
        run_sweep(
            _recording_run, {"N": [1]}, out, fixed={"seed": 1}, scheduler="threads",
            progress=False, log=lambda note: None,
        )  # fmt: skip
    monkeypatch.undo()
    assert (out / sweeps.MANIFEST).read_bytes() == before  # whole, unchanged
    assert not any(name.endswith(".part") for name in _files_under(out))
