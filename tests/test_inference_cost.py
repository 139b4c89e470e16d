"""meanfield.attention.inference_cost: the measurement's dataset, its refusals and its tables.

On a tiny random BERT (save_tiny_bert): no wall-clock assertion anywhere; the times are
checked for being finite and positive, the ratios and slopes against their definitions
recomputed here from the stored repeats, the model against the original (the sanity checks),
the memory probe against an allocation of known size.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from meanfield.attention import inference_cost as ic  # noqa: E402
from meanfield.attention.inference_cost import (  # noqa: E402
    check_lengths,
    forward_peak,
    inference_cost,
    inference_cost_table,
    parse_maps,
    repeats_at,
)
from meanfield.errors import InputError, InputTypeError, MissingFileError  # noqa: E402

MAPS = ["favor:8", "porf-softplus:8", "softmaxfeat:4", "hedgehog"]
# 4100 > 4096: one repeat there (repeats_long=1) against 3 below, so the per-repeat array is
# padded at that length; the tiny model (width 16) runs it in a fraction of a second
LENGTHS = [16, 32, 4100]
VARIANTS = ["softmax", "favor m=8", "porf-softplus m=8", "softmaxfeat m=4", "hedgehog m=8"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from meanfield.attention.pretrained import save_tiny_bert

    folder = tmp_path_factory.mktemp("tiny-bert")
    save_tiny_bert(folder, seed=0)  # 2 layers, width 16, 2 heads of d_h = 8
    return folder


@pytest.fixture(scope="module")
def result(tiny):
    threads = torch.get_num_threads()
    lines = []
    ds = inference_cost(
        tiny, MAPS, LENGTHS, repeats=3, repeats_long=1, memory="inprocess", note="a test",
        log=lines.append,
    )  # fmt: skip
    return ds, lines, threads


@pytest.mark.slow  # the shared measurement: 5 tiny models timed at 3 lengths
def test_dimensions_variables_and_coordinates(result):
    ds, lines, _ = result
    assert list(ds["variant"].values) == VARIANTS
    assert ds["L"].values.tolist() == LENGTHS
    for name in ("seconds", "ratio_to_softmax", "cpu_seconds", "cpu_ratio_to_softmax"):
        assert ds[name].dims == ("variant", "L"), name
    for name in ("peak_extra_mib", "memory_method"):
        assert ds[name].dims == ("variant", "L"), name
    for name in ("slope_seconds", "slope_cpu_seconds", "slope_peak_extra_mib"):
        assert ds[name].dims == ("variant",), name
    assert ds["seconds_per_repeat"].dims == ("variant", "L", "repeat")
    assert ds["feature_map"].values.tolist() == [
        "softmax", "favor", "porf-softplus", "softmaxfeat", "hedgehog",
    ]  # fmt: skip
    # hedgehog without m: m = d_h = 16 / 2; softmaxfeat and hedgehog have 2 m outputs
    assert ds["n_features"].values.tolist() == [0, 8, 8, 4, 8]
    assert ds["n_outputs"].values.tolist() == [0, 8, 8, 8, 16]
    assert ds["attn_implementation"].values.tolist() == ["sdpa"] + ["meanfield"] * 4
    assert ds["n_repeats"].values.tolist() == [repeats_at(L, 3, 1) for L in LENGTHS] == [3, 3, 1]
    assert len(lines) == len(LENGTHS) + len(VARIANTS)  # a line per L, then per memory row
    # scores of an eager softmax layer: H L^2 float32 = 2 * L^2 * 4 bytes
    np.testing.assert_allclose(ds["scores_mib"], [2 * L * L * 4 / 2**20 for L in LENGTHS])


@pytest.mark.slow
def test_times_finite_positive_and_ratios_paired(result):
    ds, _, _ = result
    for clock in ("", "cpu_"):
        t = ds[f"{clock}seconds"].values
        assert np.all(np.isfinite(t)) and np.all(t > 0), clock
        raw = ds[f"{clock}seconds_per_repeat"].values
        for j, n in enumerate(ds["n_repeats"].values):
            # the repeats a length had are finite and positive; the padding past them is NaN
            assert np.all(np.isfinite(raw[:, j, :n])) and np.all(raw[:, j, :n] > 0)
            assert np.all(np.isnan(raw[:, j, n:]))
            # the median time, and the median of the PAIRED ratios (not a ratio of medians)
            np.testing.assert_array_equal(t[:, j], np.median(raw[:, j, :n], axis=1))
            paired = np.median(raw[:, j, :n] / raw[:1, j, :n], axis=1)
            np.testing.assert_array_equal(ds[f"{clock}ratio_to_softmax"].values[:, j], paired)
        # softmax against itself: every paired ratio is exactly 1
        assert ds[f"{clock}ratio_to_softmax"].sel(variant="softmax").values.tolist() == [1.0] * 3
        # the slope: least squares of log t on log L (numpy's lstsq, not polyfit)
        X = np.stack([np.log(LENGTHS), np.ones(3)], axis=1)
        for i in range(len(VARIANTS)):
            want = np.linalg.lstsq(X, np.log(t[i]), rcond=None)[0][0]
            assert math.isclose(float(ds[f"slope_{clock}seconds"][i]), want, rel_tol=1e-9)


@pytest.mark.slow
def test_memory_and_attributes(result):
    ds, _, threads_before = result
    peak = ds["peak_extra_mib"].values
    assert np.all(np.isfinite(peak)) and np.all(peak >= 0)
    assert set(ds["memory_method"].values.ravel()) <= {"VmHWM-reset", "ru_maxrss-lower-bound"}
    # the memory slope: least squares over the lengths with a resolved figure (NaN below two)
    for i, row in enumerate(peak):
        keep = row >= ic.RESOLVED_MIB
        got = float(ds["slope_peak_extra_mib"][i])
        if keep.sum() < 2:
            assert math.isnan(got)
        else:
            X = np.stack([np.log(np.asarray(LENGTHS)[keep]), np.ones(keep.sum())], axis=1)
            want = np.linalg.lstsq(X, np.log(row[keep]), rcond=None)[0][0]
            assert math.isclose(got, want, rel_tol=1e-9)
    a = ds.attrs
    assert a["threads"] == 1 and torch.get_num_threads() == threads_before  # restored
    assert a["torch_version"] == torch.__version__ and a["meanfield_version"] and a["created"]
    assert a["cpu_count"] >= 1 and a["machine"] and a["note"] == "a test"
    assert (a["n_layers"], a["hidden_size"], a["num_heads"], a["head_dim"]) == (2, 16, 2, 8)
    assert a["repeats"] == 3 and a["repeats_long"] == 1 and a["memory"] == "inprocess"
    # the sanity checks: linearize(model, "softmax") is the original to float rounding, and
    # the stack on the embedding output is the full model (float32 rounding, |output| ~ 3)
    assert a["sanity_L"] == 128  # the tiny model's position embeddings stop there
    assert a["sanity_linearized_softmax_vs_original_max_abs_diff"] < 1e-5
    assert a["sanity_stack_vs_full_model_max_abs_diff"] < 1e-5
    assert a["wall_seconds"] > 0


@pytest.mark.slow
def test_round_trip_through_netcdf_renders_the_same_tables(result, tmp_path):
    from meanfield.results import load_dataset, save_dataset

    ds, _, _ = result
    back = load_dataset(save_dataset(ds, tmp_path / "inference_cost.nc"))
    for clock in ("wall", "cpu", "both"):
        assert inference_cost_table(back, clock=clock) == inference_cost_table(ds, clock=clock)
    np.testing.assert_array_equal(back["seconds_per_repeat"], ds["seconds_per_repeat"])


@pytest.mark.slow
def test_table_shows_every_variant_and_length(result):
    ds, _, _ = result
    table = inference_cost_table(ds, clock="both")
    blocks = table.split("\n\n")
    # caption, then (heading, table) for CPU time, wall time and memory
    assert len(blocks) == 7 and "Note: a test" in blocks[0]
    assert blocks[1].startswith("CPU time") and blocks[3].startswith("Wall time")
    assert blocks[5].startswith("Peak extra resident memory")
    for block in (blocks[2], blocks[4], blocks[6]):
        rows = block.strip().splitlines()
        assert rows[0] == (
            "| variant | feature outputs | L = 16 | L = 32 | L = 4100 | log-log slope |"
        )
        assert [r.split(" | ")[0].lstrip("| ") for r in rows[2:]] == VARIANTS
        assert all(r.count("|") == len(LENGTHS) + 4 for r in rows)
    assert "| softmax | – | " in blocks[2] and "(×1.00)" in blocks[2]
    wall = inference_cost_table(ds)
    assert "Wall time" in wall and "CPU time" not in wall and "MiB" in wall
    no_memory = inference_cost_table(ds.drop_vars(["peak_extra_mib", "slope_peak_extra_mib"]))
    assert "MiB" not in no_memory


@pytest.mark.slow
def test_table_refusals(result):
    ds, _, _ = result
    with pytest.raises(InputTypeError, match="ds must be an xarray.Dataset"):
        inference_cost_table({"seconds": 1})
    with pytest.raises(InputError, match="cpu_seconds"):
        inference_cost_table(ds.drop_vars("cpu_seconds"), clock="cpu")
    with pytest.raises(InputError, match="clock"):
        inference_cost_table(ds, clock="gpu")


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"lengths": [32]}, "lengths"),
        ({"lengths": [32, 32]}, "lengths"),
        ({"lengths": [0, 32]}, "lengths"),
        ({"lengths": [32.0, 64]}, "lengths"),
        ({"lengths": []}, "lengths"),
        ({"maps": ["nope:8"]}, "maps"),
        ({"maps": ["favor:0"]}, "maps"),
        ({"maps": ["favor:x"]}, "maps"),
        ({"maps": ["favor", "favor:64"]}, "maps"),
        ({"maps": ["softmax:4"]}, "maps"),
        ({"maps": []}, "maps"),
        ({"maps": "favor:8"}, "maps"),
        ({"repeats": 0}, "repeats"),
        ({"repeats": True}, "repeats"),
        ({"repeats": 1.5}, "repeats"),
        ({"repeats_long": 0}, "repeats_long"),
        ({"threads": 0}, "threads"),
        ({"memory": "gpu"}, "memory"),
        ({"softmax_impl": "flash"}, "softmax_impl"),
        ({"note": 3}, "note"),
        ({"log": "print"}, "log"),
    ],
)
def test_refuses_bad_input_by_name_before_any_work(tiny, monkeypatch, kwargs, name):
    def reached(*args, **kw):
        raise AssertionError("a model was loaded: the check came after the work")

    monkeypatch.setattr(ic, "_load_encoder", reached)
    call = {"maps": ["favor:8"], "lengths": [32, 64], "memory": "none", **kwargs}
    with pytest.raises((InputError, InputTypeError), match=name):
        inference_cost(tiny, **call)


def test_refuses_a_folder_without_a_model(tmp_path, monkeypatch):
    monkeypatch.setattr(ic, "_load_encoder", None)  # never reached
    with pytest.raises(MissingFileError, match="model directory"):
        inference_cost(tmp_path / "missing", ["favor:8"], [32, 64])
    with pytest.raises(InputTypeError, match="model_dir"):
        inference_cost(3, ["favor:8"], [32, 64])


def test_parse_maps_and_check_lengths():
    assert parse_maps(["favor", "hedgehog", "softmax"], head_dim=32) == [
        ("favor", 64), ("hedgehog", 32), ("softmax", None),
    ]  # fmt: skip
    assert parse_maps(["hedgehog:16"]) == [("hedgehog", 16)]
    assert check_lengths((8192, 128)) == [128, 8192]
    assert [repeats_at(L, 5, 2) for L in (1024, 1025, 4096, 4097)] == [5, 3, 3, 2]
    assert [repeats_at(L, 2, 5) for L in (1024, 4096, 8192)] == [2, 2, 2]


def test_forward_peak_sees_a_known_allocation():
    # the forward allocates and fills 64 MiB (above glibc's largest mmap threshold, 32 MiB,
    # so fresh pages, all resident at once): the peak extra resident size is at least that,
    # and below twice that (no copy is made)
    mib = 64
    r = forward_peak(lambda h: torch.ones(mib * 2**18), 64, 8)  # float32: 2^18 per MiB
    assert r["seconds"] > 0
    if r["method"] == "VmHWM-reset":
        assert mib <= r["peak_extra_mib"] < 2 * mib, r
    else:  # no reset available: a lower bound only
        assert 0 <= r["peak_extra_mib"], r


@pytest.mark.slow  # a fresh interpreter imports torch and transformers (~5-15 s)
def test_memory_in_a_fresh_subprocess(tiny):
    r = ic._memory_subprocess(tiny, "sdpa", "hedgehog", None, 64, 1)
    assert r["peak_extra_mib"] >= 0 and r["seconds"] > 0
    assert r["method"] in ("VmHWM-reset", "ru_maxrss-lower-bound")


@pytest.mark.slow  # the benchmark's tiny run: 3 models loaded, timed at 2 lengths
def test_the_benchmark_writes_the_dataset_and_its_tables(tmp_path):
    import importlib.util
    from pathlib import Path

    from meanfield.results import load_dataset

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_pretrained_long.py"
    spec = importlib.util.spec_from_file_location("bench_pretrained_long", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    target = tmp_path / "cost" / "inference_cost.nc"
    argv = ["--tiny", "--lengths", "32,16", "--memory", "none", "--repeats", "1"]
    res = bench.main(
        argv + ["--maps", "hedgehog", "--out", str(tmp_path), "--dataset", str(target)]
    )
    ds = load_dataset(target)
    assert ds["variant"].values.tolist() == ["softmax", "hedgehog m=8"] == list(res["times"])
    assert ds["seconds"].sel(variant="hedgehog m=8").values.tolist() == res["times"]["hedgehog m=8"]
    assert target.with_suffix(".md").read_text() == inference_cost_table(ds)
    assert sorted(p.name for p in target.parent.iterdir()) == [
        "inference_cost.md",
        "inference_cost.nc",
    ]
