"""Pretrained encoders: loading, linearize, Hedgehog, Kernel Phase A, the study's runner.

Every test builds a tiny random BERT in the Hugging Face layout (no test needs real weights).
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from meanfield.attention.features import make_feature_map  # noqa: E402
from meanfield.attention.learn_features import (  # noqa: E402
    DeployedKernelAlignment,
    distil_feature_maps,
    phase_a_pretrained,
)
from meanfield.attention.linearize import feature_maps_of, linearize  # noqa: E402
from meanfield.attention.pretrained import (  # noqa: E402
    encode_pretrained,
    load_pretrained_classifier,
    save_tiny_bert,
)
from meanfield.errors import InputError  # noqa: E402

TEXTS = ["a good film", "a bad film", "great story", "awful plot", "very fine", "not good"]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    save_tiny_bert(folder, hidden_size=16, n_layers=2, n_heads=2, seed=0)
    return folder


@pytest.fixture(scope="module")
def data(bert_dir):
    _, tok = load_pretrained_classifier(bert_dir)
    labels = [1, 0, 1, 0, 1, 0] * 6
    return encode_pretrained(tok, TEXTS * 6, None, labels, max_length=10)


def test_load_refuses_a_folder_not_in_hf_layout(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_pretrained_classifier(tmp_path)


def test_softmax_linearization_equals_the_original_with_padding(bert_dir, data):
    model, _ = load_pretrained_classifier(bert_dir)
    model.eval()
    batch = data.subset(range(8))
    assert batch.padding_mask.any()  # the padded path is exercised
    with torch.no_grad():
        ref = model(batch.input_ids, batch.padding_mask, batch.segment_ids)
        out = linearize(model, "softmax")(batch.input_ids, batch.padding_mask, batch.segment_ids)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_softmax_linearization_of_torch_encoder_equals_the_original():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, 2).eval()
    x = torch.randn(3, 7, 16)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 4:] = True
    with torch.no_grad():
        ref = enc(x, src_key_padding_mask=pad)
        out = linearize(enc, "softmax")(x, src_key_padding_mask=pad)
    keep = ~pad
    torch.testing.assert_close(out[keep], ref[keep], atol=1e-5, rtol=1e-5)


def test_torch_encoder_with_kernel_attention_runs_in_eval_no_grad_with_padding():
    # the nested-tensor fast path, chosen at construction, used to crash after the swap
    layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True)
    enc = linearize(torch.nn.TransformerEncoder(layer, 2), "favor", n_features=8).eval()
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        out = enc(x, src_key_padding_mask=pad)
    assert out.shape == (2, 5, 16) and torch.isfinite(out[~pad]).all()


@pytest.mark.parametrize("kind", ["favor", "porf-softplus", "softmaxfeat"])
def test_every_linearized_model_trains_a_step_and_evaluates(bert_dir, data, kind):
    model, _ = load_pretrained_classifier(bert_dir)
    linearize(model, kind, n_features=8, seed=1)
    fms = feature_maps_of(model)
    assert len(fms) == 2 and all(fm.kind == kind and fm.num_heads == 2 for fm in fms)
    assert not torch.equal(fms[0].omega, fms[1].omega)  # each layer its own Omega
    batch = data.subset(range(8))
    model.train()
    state = {k: v for k, v in model.state_dict().items() if torch.is_tensor(v)}
    before = {k: v.clone() for k, v in state.items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(
        model(batch.input_ids, batch.padding_mask, batch.segment_ids), batch.labels
    )
    loss.backward()
    opt.step()
    changed = [
        k for k, v in model.state_dict().items() if k in before and not torch.equal(v, before[k])
    ]
    assert any("query" in k for k in changed) and not any("feature_map" in k for k in changed)
    model.eval()
    with torch.no_grad():
        a = model(batch.input_ids, batch.padding_mask, batch.segment_ids)
        # padding changes nothing: the first example alone, trimmed to its length
        n = int(batch.lengths[0])
        b = model(batch.input_ids[:1, :n], batch.padding_mask[:1, :n], batch.segment_ids[:1, :n])
    torch.testing.assert_close(a[:1], b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["favor", "softmaxfeat"])
def test_hedgehog_lowers_the_loss_and_approaches_softmax_on_held_out_tokens(bert_dir, data, kind):
    model, _ = load_pretrained_classifier(bert_dir)
    linearize(model, kind, n_features=8, seed=0)
    res = distil_feature_maps(model, data, n_sequences=24, n_heldout=12, steps=150, lr=0.05)
    # measured on held-out sequences: the cross-entropy and the TV distance both fall
    assert res["loss_after"] < res["loss_before"]
    assert res["tv_after"] < 0.8 * res["tv_before"], res
    assert all(fm.learned for fm in feature_maps_of(model))


def test_deployed_alignment_equals_the_centred_ridge_alignment_for_favor():
    # independent truth: the package's analytic CentredAlignment with positive features
    from meanfield.domains import Ball
    from meanfield.energy import CentredAlignment, Energy

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    y = np.sign(X[:, 0] + 0.3)
    fm = make_feature_map("favor", 4, 7)
    omega = torch.tensor(rng.normal(size=(7, 4)))
    ours = Energy([DeployedKernelAlignment(fm, X, y)], Ball(4, 20.0))
    ref = Energy([CentredAlignment(X * 4**-0.25, y, feature="positive")], Ball(4, 20.0))
    torch.testing.assert_close(ours.value(omega), ref.value(omega), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ours.grad(omega), ref.grad(omega), rtol=1e-8, atol=1e-12)


def test_deployed_alignment_gradient_of_softmaxfeat_matches_finite_differences():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(25, 3))
    term = DeployedKernelAlignment(make_feature_map("softmaxfeat", 3, 5), X, np.sign(X[:, 1]))
    term.bind(3, torch.float64, "cpu")
    om = torch.tensor(rng.normal(size=(5, 3)))
    g = term.grad(om)
    h = 1e-6
    for i, j in [(0, 0), (2, 1), (4, 2)]:
        e = torch.zeros_like(om)
        e[i, j] = h
        fd = (term.value(om + e) - term.value(om - e)) / (2 * h)
        assert abs(float(fd) - float(g[i, j])) < 1e-7  # central difference: O(h^2) + rounding


def test_kernel_phase_a_moves_every_head_and_raises_alignment(bert_dir, data):
    model, _ = load_pretrained_classifier(bert_dir)
    linearize(model, "softmaxfeat", n_features=6, seed=0)
    before = [fm.omega.clone() for fm in feature_maps_of(model)]
    res = phase_a_pretrained(model, data, n_align=24, n_heldout=8, n_steps=80, tilt=0.5)
    s = res.summary()
    assert len(res.lam) == 4 and s["frac_on_boundary"] == 0.0
    assert s["align_train_after"] > s["align_train_before"]
    for fm, b in zip(feature_maps_of(model), before, strict=True):
        assert fm.learned and (fm.omega - b).abs().amax(dim=(1, 2)).min() > 0  # every head


def test_linearize_refuses_a_model_without_attention():
    with pytest.raises(InputError, match="no self-attention"):
        linearize(torch.nn.Linear(3, 3), "favor")


def _tiny(bert_dir, **changes) -> dict:
    """The tiny pretrained preset on the fixtures and ``bert_dir``: one seed, FAVOR+, no
    controls, then ``changes``."""
    from meanfield.studies.nlp import FIXTURES, load_preset

    settings = load_preset("nlp_pretrained", "tiny")
    settings.update(data_dir=FIXTURES, model_dir=str(bert_dir), seeds=[0], features=["favor"])
    settings.update(controls={"kinds": []}, **changes)
    return settings


def _run(settings, out, **kw) -> None:
    from meanfield.studies.nlp import check_config, run_study

    run_study(check_config(settings), out, progress=False, **kw)


def _accuracy(out, stage="linearized") -> dict:
    """(data set, seed, variant) -> clean accuracy of the finished runs of ``stage``."""
    from meanfield.studies.nlp_report import load_pretrained_runs

    rows = [r for r in load_pretrained_runs(out) if r["stage"] == stage]
    return {(r["dataset"], r["seed"], r["variant"]): r["clean_accuracy"] for r in rows}


def test_study_config_refuses_unknown_keys_naming_the_nearest():
    from meanfield.studies.nlp import check_config

    where = {"encoder": "pretrained", "model_dir": "model"}
    with pytest.raises(InputError, match="did you mean 'validation_fraction'"):
        check_config({**where, "validation_fractoin": 0.1})
    with pytest.raises(InputError, match="'noise.rte' .did you mean 'noise.rate'"):
        check_config({**where, "noise": {"rte": 0.5}})


def test_tiny_study_resumes_and_recomputes_under_a_changed_configuration(bert_dir, tmp_path):
    cfg = _tiny(bert_dir, methods=["vanilla", "kernel"])
    _run(cfg, tmp_path)
    first = _accuracy(tmp_path)
    runs = sorted((tmp_path / "linearized" / "runs").glob("*.nc"))
    assert len(runs) == 2 and len(first) == 2
    runs[0].unlink()  # an interrupted study: one run lost
    _run(cfg, tmp_path)
    assert _accuracy(tmp_path) == first  # recomputed exactly
    # another training setting: new runs under new keys, the old ones kept beside them
    cfg["train"] = dict(cfg["train"], lr=5e-4)
    _run(cfg, tmp_path)
    assert len(list((tmp_path / "linearized" / "runs").glob("*.nc"))) == 4
    # the report shows the current setting's runs only, never the stale ones beside them
    assert len(_accuracy(tmp_path)) == 2


def test_report_during_a_running_sweep_shows_its_finished_runs(bert_dir, tmp_path, monkeypatch):
    """A sweep of a changed setting interrupted after its first run (as a report made while it
    runs sees it): the report holds that run, not the finished runs of the earlier setting,
    since the data set's configuration is noted before the sweep starts."""
    import meanfield.workbench.sweeps as sweeps

    real = sweeps.run_sweep

    def first_run_then_interrupt(func, grid, folder, **kw):
        if Path(folder).name != "linearized":
            return real(func, grid, folder, **kw)
        real(func, dict(grid, variant=grid["variant"][:1]), folder, **kw)
        raise KeyboardInterrupt

    cfg = _tiny(bert_dir, methods=["vanilla", "kernel"])
    _run(cfg, tmp_path)  # the earlier setting, both runs finished
    monkeypatch.setattr(sweeps, "run_sweep", first_run_then_interrupt)
    cfg["train"] = dict(cfg["train"], lr=5e-4)
    with pytest.raises(KeyboardInterrupt):
        _run(cfg, tmp_path)
    assert [v for _, _, v in _accuracy(tmp_path)] == ["vanilla-favor"]


def _mtimes(folder):
    """The run files' modification times (the gathered sweep.nc is rewritten by every call)."""
    return {p.name: p.stat().st_mtime_ns for p in folder.glob("*/runs/*.nc")}


def test_tiny_study_found_again_after_moving_its_folders(bert_dir, tmp_path):
    """Runs are keyed by what they compute from (configuration, data and weights
    fingerprints), not by where the folders lie: a moved results folder and a copied model
    folder find every run (0 recomputed); a lost checkpoint (not kept with the results)
    recomputes its stage-1 run, not a crash in stage 2."""
    import shutil

    cfg = _tiny(bert_dir, methods=["vanilla"])
    a, b = tmp_path / "a", tmp_path / "b"
    _run(cfg, a)
    first = {stage: _accuracy(a, stage) for stage in ("softmax", "linearized")}
    shutil.move(a, b)
    cfg["model_dir"] = str(shutil.copytree(bert_dir, tmp_path / "model-copy"))
    before = _mtimes(b)
    _run(cfg, b)
    assert _mtimes(b) == before and len(before) == 2  # no run recomputed
    assert _accuracy(b) == first["linearized"]
    for ckpt in (b / "checkpoints").rglob("*"):
        if ckpt.is_file():
            ckpt.unlink()
    _run(cfg, b)
    assert list((b / "softmax" / "runs" / "set_aside").iterdir())  # stage 1 recomputed
    assert _accuracy(b, "softmax") == first["softmax"]  # deterministic: the same numbers


def test_report_corrects_for_every_planned_comparison(tmp_path):
    """Holm is over the planned family (every data set x comparison of the configuration),
    not over the comparisons that happen to have runs: with one computable comparison out of
    the 2 data sets x 2 comparisons planned, its Holm p is min(1, 4 p)."""
    import xarray as xr
    from scipy import stats

    from meanfield.results import save_dataset
    from meanfield.stats import t_interval
    from meanfield.studies.nlp_report import write_report

    cfg = {
        "name": "t",
        "datasets": [{"name": "a", "task": "rotten_tomatoes"}, {"name": "b", "task": "sst2"}],
        "features": ["favor"],
        "methods": ["vanilla", "kernel"],
        "controls": {"feature": "favor", "kinds": ["lam0"]},
        "train": {"max_epochs": 3.0},
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    acc = {"vanilla-favor": [0.70, 0.72, 0.71], "kernel-favor": [0.71, 0.74, 0.72]}
    best_epoch = {"vanilla-favor": [1.5, 2.0, 2.5], "kernel-favor": [3.0, 2.0, 1.0]}
    runs = tmp_path / "linearized" / "runs"
    runs.mkdir(parents=True)
    for variant, values in acc.items():
        for seed, a in enumerate(values):
            ds = xr.Dataset({"clean_accuracy": ((), a), "noisy_accuracy": ((), a)})
            ds["clean_ece"] = ((), 0.0)
            ds["best_epoch"] = ((), best_epoch[variant][seed])
            ds.attrs.update(sweep_dataset="a", sweep_seed=seed, sweep_variant=variant)
            save_dataset(ds, runs / f"{variant}-{seed}.nc")
    rep = write_report(tmp_path)
    assert (rep["comparisons"], rep["planned"]) == (1, 4)
    d = np.array(acc["kernel-favor"]) - np.array(acc["vanilla-favor"])
    p = stats.ttest_1samp(d, 0.0).pvalue
    text = (tmp_path / "report.md").read_text()
    assert "over the 4 planned comparisons (3 not yet computable" in text
    assert f"| {p:.3g} | {min(1.0, 4 * p):.3g} |" in text
    # the simultaneous interval is the t-interval at level 1 - 0.05 / 4
    _, lo, hi = t_interval(d, 1 - 0.05 / 4)
    assert f"[{lo:.4f}, {hi:.4f}]" in text
    # runs whose best epoch is the budget's end are counted (stopped by the budget)
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()}
    assert rows["kernel-favor"].endswith("| 1 of 3 |")
    assert rows["vanilla-favor"].endswith("| 0 of 3 |")


def test_report_tables_what_learning_omega_changed(tmp_path):
    """The learning table holds each learned variant's before/after diagnostics as the mean
    and t-interval over its seeds (recomputed here from the same numbers)."""
    import xarray as xr

    from meanfield.results import save_dataset
    from meanfield.stats import t_interval
    from meanfield.studies.nlp_report import write_report

    cfg = {"name": "t", "datasets": [{"name": "a", "task": "rotten_tomatoes"}],
           "features": ["favor"], "methods": ["vanilla", "kernel", "hedgehog"]}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    runs = tmp_path / "linearized" / "runs"
    runs.mkdir(parents=True)
    tv_after = {"kernel-favor": [0.48, 0.49, 0.47], "hedgehog-favor": [0.18, 0.2, 0.19]}
    for variant in ("vanilla-favor", "kernel-favor", "hedgehog-favor"):
        for seed in range(3):
            ds = xr.Dataset({k: ((), 0.7) for k in ("clean_accuracy", "noisy_accuracy")})
            ds["clean_ece"] = ((), 0.0)
            ds["learn_seconds"] = ((), 10.0 * (seed + 1))
            if variant == "kernel-favor":
                ds["phase_a_tv_to_softmax_before"] = ((), 0.5)
                ds["phase_a_tv_to_softmax_after"] = ((), tv_after[variant][seed])
                ds["phase_a_align_heldout_before"] = ((), 0.01)
                ds["phase_a_align_heldout_after"] = ((), 0.06)
            if variant == "hedgehog-favor":
                ds["hedgehog_tv_before"] = ((), 0.5)
                ds["hedgehog_tv_after"] = ((), tv_after[variant][seed])
            ds.attrs.update(sweep_dataset="a", sweep_seed=seed, sweep_variant=variant)
            save_dataset(ds, runs / f"{variant}-{seed}.nc")
    write_report(tmp_path)
    text = (tmp_path / "report.md").read_text()
    learned = [line for line in text.splitlines() if "TV to softmax" in line or "alignment" in line]
    assert len(learned) == 3  # Kernel: TV and alignment; Hedgehog: TV; vanilla learns nothing
    for variant, values in tv_after.items():
        m, lo, hi = t_interval(values)
        # the same prior TV at every seed: no spread, so no interval (never the zero-width
        # "[0.500, 0.500]"); the mean alone, or with the words "no spread"
        before = r"0\.500(?: \[no spread\])?"
        after = re.escape(f"{m:.3f} [{lo:.3f}, {hi:.3f}]")
        # the Ω-only runs recorded as hedgehog-favor are reported by their current name
        shown = variant.replace("hedgehog-", "hedgehog-loss-")
        row = rf"\| {shown} \| 3 \| TV to softmax attention \| {before} \| {after} \| 20 \|"
        assert any(re.fullmatch(row, line) for line in learned), row
    assert "[0.500, 0.500]" not in text


def test_tiny_study_per_dataset_seeds_and_no_warning_about_other_datasets(bert_dir, tmp_path):
    """Two data sets share each stage folder as two sweeps: the second's runs must not warn
    that the folder "also holds runs of another configuration" (the first data set's); a
    data set's own ``seeds`` list replaces the configuration's, outside the run keys."""
    import warnings

    cfg = _tiny(bert_dir, methods=["vanilla"])
    qqp = {"name": "qqp", "task": "qqp", "source": "bimpm", "train_split": "validation",
           "eval_split": "test", "seeds": [1]}  # fmt: skip
    cfg["datasets"] = cfg["datasets"] + [qqp]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _run(cfg, tmp_path)
    notes = [str(w.message) for w in seen if "another configuration" in str(w.message)]
    assert not notes
    seeds = {(d, s) for d, s, _ in _accuracy(tmp_path, "softmax")}
    assert seeds == {("rotten_tomatoes", 0), ("qqp", 1)}
    # the recorded configuration is the whole study, each data set keyed without its seeds
    assert json.loads((tmp_path / "config.json").read_text())["datasets"][1]["seeds"] == [1]


@pytest.mark.skipif(torch.cuda.device_count() > 7, reason="this machine has a cuda:7")
def test_study_device_refused_before_any_work_and_not_in_the_runs_key(
    bert_dir, tmp_path, monkeypatch, capsys
):
    """``device``: an unknown or absent device is refused naming the parameter before
    anything is written; the device is recorded with each run but not keyed, so a finished
    study resumes on another device without recomputing."""
    import xarray as xr

    import meanfield._validation as validation
    from meanfield.cli import main
    from meanfield.errors import MeanfieldError
    from meanfield.studies.nlp import FIXTURES

    preset = Path(__file__).resolve().parents[1] / "paper_repro/nlp_pretrained/configs/tiny.toml"
    common = ["run", str(preset), "--out", str(tmp_path / "cli"), "--no-progress"]
    common += ["--set", f"data_dir='{FIXTURES}'", "--set", f"model_dir='{bert_dir}'"]
    for device in ("gpu", "cuda:7"):
        assert main([*common, "--set", f"device='{device}'"]) == 2
        assert "device" in capsys.readouterr().err
    assert not (tmp_path / "cli").exists()

    cfg = _tiny(bert_dir, methods=["vanilla"])
    with pytest.raises(MeanfieldError, match="device"):
        _run(dict(cfg, device="cuda:7"), tmp_path / "api")
    assert not (tmp_path / "api").exists()

    _run(dict(cfg, device="cpu"), tmp_path / "api")
    first = _accuracy(tmp_path / "api")
    files = sorted((tmp_path / "api").glob("*/runs/*.nc"))
    assert len(files) == 2  # the softmax run and the linearized one
    assert {xr.open_dataset(f).attrs["device"] for f in files} == {"cpu"}
    # the same study asked on another device: every run is found, none recomputed (a run
    # would fail here: the device accepted by the patched check does not exist)
    monkeypatch.setattr(validation, "check_device", lambda name, device: device)
    _run(dict(cfg, device="cuda:7"), tmp_path / "api")
    assert _accuracy(tmp_path / "api") == first


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tiny_study_runs_on_cuda_and_records_the_device(bert_dir, tmp_path):
    """The study on a GPU: both stages and Phase A (its pooled keys moved to the CPU) run and
    each run records the device. (Accuracy is not compared with the CPU study: float32
    reductions differ between devices and a few training steps can flip a tiny test set.)"""
    import xarray as xr

    from meanfield.studies.nlp_report import load_pretrained_runs

    _run(_tiny(bert_dir, methods=["kernel"], device="cuda"), tmp_path)
    files = sorted(tmp_path.glob("*/runs/*.nc"))
    assert len(files) == 2
    assert all(xr.open_dataset(f).attrs["device"].startswith("cuda") for f in files)
    lin = [r for r in load_pretrained_runs(tmp_path) if r["stage"] == "linearized"]
    assert len(lin) == 1 and np.isfinite(lin[0]["clean_accuracy"])
    assert np.isfinite(lin[0]["phase_a_align_heldout_after"])
