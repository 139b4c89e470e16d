"""Pretrained encoders checked or refused by name: padding masks, checkpoints that do not
match their config, re-linearization, feature-map state dicts, and the pretrained study's
whole configuration (API and runner) before any work.

Every model is a tiny random BERT written by the test (no hub, no real weights).
"""

import copy
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("transformers")

from meanfield.attention.linearize import (  # noqa: E402
    attention_modules,
    feature_maps_of,
    linearize,
)
from meanfield.attention.mha import KernelAttention  # noqa: E402
from meanfield.attention.pretrained import (  # noqa: E402
    load_pretrained_classifier,
    save_tiny_bert,
)
from meanfield.errors import (  # noqa: E402
    InputError,
    InputTypeError,
    MeanfieldError,
    MissingFileError,
    NumericalError,
    OutputPathError,
)

IDS = torch.tensor([[2, 9, 10, 3, 0], [2, 11, 3, 0, 0]])


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    save_tiny_bert(folder, hidden_size=16, n_layers=2, n_heads=2, seed=0)
    return folder


def _copy_with_config(src, dst, **changes):
    """A copy of the model folder whose config.json declares ``changes``."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg.update(changes)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _copy_with_weights(src, dst, edit):
    """A copy of the model folder whose checkpoint tensors are changed by ``edit(dict)``."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    weights = load_file(dst / "model.safetensors")
    edit(weights)
    save_file(weights, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


# -- padding masks ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.float32, torch.float64])
def test_non_bool_padding_mask_is_refused_by_name(bert_dir, dtype):
    """``~`` of an integer mask gives -1/-2 (all "real"): refused, not guessed."""
    model = load_pretrained_classifier(bert_dir)[0].eval()
    with pytest.raises(InputTypeError, match=r"padding_mask must be a bool tensor.*mask.bool\(\)"):
        model(IDS, (IDS == 0).to(dtype))


def test_bool_padding_mask_means_padding_and_its_shape_is_checked(bert_dir):
    model = load_pretrained_classifier(bert_dir)[0].eval()
    with torch.no_grad():
        padded = model(IDS, IDS == 0)
        # independent truth: each sequence alone, trimmed to its real tokens (no padding)
        alone = torch.cat([model(IDS[:1, :4]), model(IDS[1:, :3])])
    torch.testing.assert_close(padded, alone, atol=1e-5, rtol=1e-5)
    with pytest.raises(InputError, match="padding_mask must have the shape of input_ids"):
        model(IDS, (IDS == 0)[:, :4])


def test_kernel_attention_refuses_an_integer_key_padding_mask_by_name():
    attn = KernelAttention(8, 2, batch_first=True, feature="favor", n_features=4)
    x = torch.randn(2, 3, 8)
    with pytest.raises(InputTypeError, match="key_padding_mask must be bool"):
        attn(x, x, x, key_padding_mask=torch.zeros(2, 3, dtype=torch.long))
    # torch refuses it as well (the same contract)
    with pytest.raises(Exception, match="bool and floating"):
        nn.MultiheadAttention(8, 2, batch_first=True)(
            x, x, x, key_padding_mask=torch.zeros(2, 3, dtype=torch.long)
        )


# -- checkpoints that do not match their config -----------------------------------------
@pytest.mark.parametrize("layers", [5, 1])
def test_config_layer_count_other_than_the_checkpoints_is_refused(bert_dir, tmp_path, layers):
    """5 declared over 2 stored would add 3 random layers; 1 would drop a stored one."""
    folder = _copy_with_config(bert_dir, tmp_path / "m", num_hidden_layers=layers)
    with pytest.raises(InputError, match=rf"num_hidden_layers={layers} but the checkpoint holds 2"):
        load_pretrained_classifier(folder)


def test_config_sizes_other_than_the_checkpoints_are_refused(bert_dir, tmp_path):
    folder = _copy_with_config(bert_dir, tmp_path / "m", intermediate_size=64)
    with pytest.raises(InputError, match=r"sizes do not match.*intermediate.dense"):
        load_pretrained_classifier(folder)


def test_missing_and_unexpected_checkpoint_tensors_are_refused_by_name(bert_dir, tmp_path):
    def drop(w):
        del w["encoder.layer.0.output.dense.bias"]

    folder = _copy_with_weights(bert_dir, tmp_path / "missing", drop)
    with pytest.raises(InputError, match=r"missing.*encoder.layer.0.output.dense.bias"):
        load_pretrained_classifier(folder)

    def add(w):
        w["encoder.adapter.weight"] = torch.zeros(2, 2)

    folder = _copy_with_weights(bert_dir, tmp_path / "unexpected", add)
    with pytest.raises(InputError, match=r"not used by the encoder.*encoder.adapter.weight"):
        load_pretrained_classifier(folder)

    def add_heads(w):  # a pretraining head: expected unused (the classifier has its own)
        w["cls.predictions.bias"] = torch.zeros(3)

    folder = _copy_with_weights(bert_dir, tmp_path / "head", add_heads)
    assert load_pretrained_classifier(folder)[0].config["n_layers"] == 2


def test_non_finite_checkpoint_weights_are_refused_by_name(bert_dir, tmp_path):
    key = "encoder.layer.1.attention.self.query.weight"

    def poison(w):
        w[key] = torch.full_like(w[key], float("nan"))

    folder = _copy_with_weights(bert_dir, tmp_path / "m", poison)
    with pytest.raises(NumericalError, match=key):
        load_pretrained_classifier(folder)


def test_empty_model_folder_is_refused_by_name(tmp_path):
    with pytest.raises(MissingFileError, match="config.json, tokenizer.json, model.safetensors"):
        load_pretrained_classifier(tmp_path)


# -- linearize: again, and self-attention only ------------------------------------------
def _encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


def test_torch_encoder_linearized_again_equals_one_linearization():
    x = torch.randn(3, 6, 16, generator=torch.Generator().manual_seed(1))
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[1, 4:] = True
    enc = _encoder()
    with torch.no_grad():
        ref = enc(x, src_key_padding_mask=pad)
        twice = linearize(linearize(copy.deepcopy(enc), "favor", n_features=8), "softmax")
        back = twice(x, src_key_padding_mask=pad)
        again = linearize(copy.deepcopy(enc), "favor", n_features=8)
        linearize(again, "porf", n_features=8, seed=3)
        once = linearize(copy.deepcopy(enc), "porf", n_features=8, seed=3)
        out_again = again(x, src_key_padding_mask=pad)
        out_once = once(x, src_key_padding_mask=pad)
    assert [m.feature for m in attention_modules(twice)] == ["softmax", "softmax"]
    keep = ~pad
    # back to softmax: the original encoder (nn.MultiheadAttention), to float32 rounding
    torch.testing.assert_close(back[keep], ref[keep], atol=1e-5, rtol=1e-5)
    # favor then porf: the same projections and the same Omega as porf alone, so equal
    assert all(
        torch.equal(a.omega, b.omega)
        for a, b in zip(feature_maps_of(again), feature_maps_of(once), strict=True)
    )
    torch.testing.assert_close(out_again[keep], out_once[keep], atol=0, rtol=0)


def test_relinearizing_keeps_tie_qk_and_the_options_of_kernel_attention():
    enc = _encoder()
    for layer in enc.layers:
        layer.self_attn = KernelAttention.from_mha(
            layer.self_attn, "favor", n_features=4, tie_qk=False, eps=1e-4, chunk_size=8
        )
    linearize(enc, "softmaxfeat", n_features=4)
    attn = enc.layers[0].self_attn
    assert (attn.feature, attn.eps, attn.chunk_size) == ("softmaxfeat", 1e-4, 8)


def test_hf_model_linearized_again_equals_one_linearization(bert_dir):
    base = load_pretrained_classifier(bert_dir)[0].eval()
    pad = IDS == 0
    with torch.no_grad():
        ref = base(IDS, pad)
        again = linearize(copy.deepcopy(base), "favor", n_features=8)
        linearize(again, "porf-softplus", n_features=8, seed=2)
        once = linearize(copy.deepcopy(base), "porf-softplus", n_features=8, seed=2)
        torch.testing.assert_close(again(IDS, pad), once(IDS, pad), atol=0, rtol=0)
        back = linearize(again, "softmax")(IDS, pad)
    torch.testing.assert_close(back, ref, atol=1e-5, rtol=1e-5)
    assert feature_maps_of(again) == [None, None] and again.config["attention"] == "softmax"


def test_decoder_cross_attention_is_not_replaced():
    torch.manual_seed(0)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 2, 32, batch_first=True), 2)
    linearize(dec, "favor", n_features=8)
    for layer in dec.layers:
        assert isinstance(layer.self_attn, KernelAttention)
        assert type(layer.multihead_attn) is nn.MultiheadAttention
    assert attention_modules(dec) == [layer.self_attn for layer in dec.layers]


def test_hf_model_with_cross_attention_is_refused_before_any_change():
    import transformers as tf

    cfg = tf.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, is_decoder=True,
                        add_cross_attention=True)  # fmt: skip
    model = tf.BertModel(cfg)
    with pytest.raises(InputError, match="cross-attention"):
        linearize(model, "favor", n_features=8)
    assert not any(hasattr(m, "feature_map") for m in model.modules())


# -- feature-map state dicts ------------------------------------------------------------
def test_kernel_attention_refuses_another_kinds_state_before_loading_anything():
    favor = KernelAttention(8, 2, feature="favor", n_features=4, seed=1)
    porf = KernelAttention(8, 2, feature="porf", n_features=4, seed=2)
    before = {k: v.clone() for k, v in porf.state_dict().items() if torch.is_tensor(v)}
    with pytest.raises(InputError, match="kind='favor', not the kind='porf'"):
        porf.load_state_dict(favor.state_dict())
    assert porf.feature_map.kind == "porf"
    assert all(torch.equal(porf.state_dict()[k], v) for k, v in before.items())  # untouched
    softmax = KernelAttention(8, 2, feature="softmax")
    with pytest.raises(RuntimeError, match="feature_map.omega"):  # torch's strict check
        softmax.load_state_dict(favor.state_dict())
    softmax.load_state_dict(favor.state_dict(), strict=False)  # the projections only
    assert torch.equal(softmax.in_proj_weight, favor.in_proj_weight)
    # a state saved before the kind was recorded loads as before
    old = favor.state_dict()
    old["feature_map._extra_state"] = {"learned": True, "seed": 1}
    other = KernelAttention(8, 2, feature="favor", n_features=4, seed=3)
    other.load_state_dict(old)
    assert other.feature_map.learned and torch.equal(
        other.feature_map.omega, favor.feature_map.omega
    )


def test_linearized_classifier_refuses_another_attentions_state(bert_dir):
    def model(kind):
        m = load_pretrained_classifier(bert_dir, seed=1)[0]
        return m if kind == "softmax" else linearize(m, kind, n_features=4)

    porf = model("porf")
    before = {k: v.clone() for k, v in porf.state_dict().items() if torch.is_tensor(v)}
    with pytest.raises(InputError, match="kind='favor', not the kind='porf'"):
        porf.load_state_dict(model("favor").state_dict())
    with pytest.raises(InputError, match="has no kernel feature maps.*'porf'"):
        porf.load_state_dict(model("softmax").state_dict())
    assert all(torch.equal(porf.state_dict()[k], v) for k, v in before.items())  # untouched
    with pytest.raises(InputError, match="holds kernel feature maps.*'softmax'"):
        model("softmax").load_state_dict(porf.state_dict())
    model("porf").load_state_dict(model("softmax").state_dict(), strict=False)  # projections
    twin = model("porf")
    twin.load_state_dict(porf.state_dict())  # its own kind: loads
    assert [fm.kind for fm in feature_maps_of(twin)] == ["porf", "porf"]


# -- the study: the whole configuration checked before any work --------------------------
def _tiny_cfg(model_dir):
    """The tiny pretrained preset's settings, cut to one seed, FAVOR+ and vanilla."""
    from meanfield.studies.nlp import FIXTURES, load_preset

    cfg = load_preset("nlp_pretrained", "tiny")
    cfg.update(data_dir=FIXTURES, model_dir=str(model_dir), seeds=[0], features=["favor"])
    cfg.update(methods=["vanilla"], controls={"kinds": []})
    return cfg


def _set(cfg, path, value):
    *head, last = path.split(".")
    node = cfg
    for key in head:
        node = node.setdefault(key, {})
    node[last] = value
    return cfg


BAD_CONFIGS = [
    ("train.lr", float("nan"), r"train.lr must be a finite number in \(0, inf\)"),
    ("train.batch_size", 0, "train.batch_size must be an integer >= 1"),
    ("validation_fraction", 1.5, r"validation_fraction must be a finite number in \(0, 0.5\]"),
    ("seeds", [-1], r"seeds must be an integer in \[0, "),
    ("n_features.favor", 0, "n_features.favor must be an integer >= 1"),
    ("train.max_epochs", 0.0, "train.max_epochs must be a finite number"),
    ("train.patience", 0, "train.patience must be an integer >= 1"),
    ("noise.rate", 1.0, r"noise.rate must be a finite number in \[0, 1\)"),
    ("hedgehog.lr", -1.0, "hedgehog.lr must be a finite number"),
    ("phase_a.n_align", 1, "phase_a.n_align must be an integer >= 2"),
    ("max_length", 2, "max_length must be an integer >= 4"),
    ("features", ["favour"], "features must be among"),
    ("datasets", [], "datasets must be a non-empty list"),
    ("only.stages", ["softmax", "phase-b"], r"only.stages: \['phase-b'\] not in"),
]


@pytest.mark.parametrize("path, value, message", BAD_CONFIGS)
def test_study_api_refuses_bad_values_before_any_work(bert_dir, tmp_path, path, value, message):
    from meanfield.studies.nlp import check_config, run_study

    out = tmp_path / "out"
    with pytest.raises(MeanfieldError, match=message):
        check_config(_set(_tiny_cfg(bert_dir), path, value))
    with pytest.raises(MeanfieldError, match=message):
        run_study(_set(_tiny_cfg(bert_dir), path, value), out, progress=False)
    assert not out.exists()


def test_study_api_refuses_bad_folders_scheduler_and_workers(bert_dir, tmp_path):
    from meanfield.studies.nlp import check_config, run_study

    out = tmp_path / "out"
    (tmp_path / "empty").mkdir()
    empty = check_config(dict(_tiny_cfg(bert_dir), model_dir=str(tmp_path / "empty")))
    cases = [
        (dict(scheduler="nowhere"), _tiny_cfg(bert_dir), InputError, "scheduler must be"),
        (dict(n_workers=0), _tiny_cfg(bert_dir), InputError, "n_workers must be an integer >= 1"),
        ({}, empty, MissingFileError, "model directory"),
    ]
    for extra, cfg, error, message in cases:
        with pytest.raises(error, match=message):
            run_study(cfg, out, progress=False, **extra)
        assert not out.exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputPathError, match="which is a file"):
        run_study(_tiny_cfg(bert_dir), tmp_path / "file" / "out", progress=False)


def _runner_argv(bert_dir, tmp_path, out, *settings) -> list[str]:
    """``meanfield run`` on a copy of the tiny preset, cut as :func:`_tiny_cfg` by ``--set``,
    then ``settings`` (``KEY=VALUE``, TOML values)."""
    from meanfield.studies.nlp import FIXTURES

    preset = Path(__file__).resolve().parents[1] / "paper_repro/nlp_pretrained/configs/tiny.toml"
    path = tmp_path / "tiny.toml"
    shutil.copy(preset, path)
    cut = [f"data_dir='{FIXTURES}'", f"model_dir='{bert_dir}'", "seeds=[0]", 'features=["favor"]']
    cut += ['methods=["vanilla"]', "controls.kinds=[]", *settings]
    sets = [a for kv in cut for a in ("--set", kv)]
    return ["run", str(path), "--out", str(out), "--no-progress", *sets]


def test_study_runner_refuses_each_bad_value_in_one_line_before_any_work(
    bert_dir, tmp_path, capsys
):
    """``meanfield run``: exit 2, one stderr line naming the parameter, nothing written."""
    from meanfield.cli import main

    (tmp_path / "empty-model").mkdir()
    five = _copy_with_config(bert_dir, tmp_path / "five-layers", num_hidden_layers=5)
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "out"

    def argv(*settings, out=out, extra=()):
        return _runner_argv(bert_dir, tmp_path, out, *settings) + list(extra)

    cases = [
        (argv("train.lr=nan"), "train.lr"),
        (argv("train.batch_size=0"), "train.batch_size"),
        (argv("validation_fraction=1.5"), "validation_fraction"),
        (argv("n_features.favor=0"), "n_features.favor"),
        (argv("seeds=[-1]"), "seeds"),
        (argv(extra=["--scheduler", "nowhere"]), "scheduler"),
        (argv(extra=["--n-workers", "0"]), "--n-workers"),
        (argv(f"model_dir='{tmp_path / 'empty-model'}'"), "model directory"),
        (argv(f"model_dir='{five}'"), "num_hidden_layers=5"),
        (argv(out=tmp_path / "a-file" / "out"), "out"),
    ]
    for args, name in cases:
        capsys.readouterr()
        try:
            code = main(args)
        except SystemExit as stop:  # a flag refused while parsing: the same one-line form
            code = stop.code
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and name in err[0] and err[0].startswith("meanfield: error:"), err
        assert code == 2, name
        assert not out.exists(), name


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a /proc file system")
def test_study_runner_refuses_an_out_folder_that_cannot_be_written(bert_dir, tmp_path, capsys):
    """A folder that refuses a new file (``/proc`` refuses it even to root, where permission
    bits would not tell) is refused before any work; a read-only folder too where the
    permission bits apply (not as root)."""
    from meanfield.cli import main

    assert main(_runner_argv(bert_dir, tmp_path, "/proc/meanfield-pretrained-study")) == 2
    err = capsys.readouterr().err
    assert "out" in err and "cannot be written" in err
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            assert main(_runner_argv(bert_dir, tmp_path, locked / "out")) == 2
            assert "out" in capsys.readouterr().err
        finally:
            locked.chmod(0o700)


def test_valid_tiny_study_still_runs_after_the_checks(bert_dir, tmp_path):
    from meanfield.studies.nlp import check_config, run_study
    from meanfield.studies.nlp_report import load_pretrained_runs

    cfg = check_config(_tiny_cfg(bert_dir))
    assert not (tmp_path / "out").exists()  # the checks write nothing
    run_study(cfg, tmp_path / "out", progress=False)
    rows = load_pretrained_runs(tmp_path / "out")
    assert len(rows) == 2 and all(np.isfinite(r["clean_accuracy"]) for r in rows)


def test_report_with_a_softmax_run_of_accuracy_zero_leaves_recovered_empty(tmp_path):
    """A softmax run of accuracy 0 (a diverged run) has no 'recovered' ratio: the report
    shows '—' for it instead of dividing by zero; the other cells are computed as usual."""
    import json

    import xarray as xr

    from meanfield.results import save_dataset
    from meanfield.studies.nlp_report import write_report

    cfg = {
        "name": "t",
        "datasets": [{"name": "a", "task": "rotten_tomatoes"}],
        "features": ["favor"],
        "methods": ["vanilla"],
        "train": {"max_epochs": 3.0},
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for folder, variant, acc in (("softmax", "softmax", 0.0), ("linearized", "vanilla-favor", 0.6)):
        runs = tmp_path / folder / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        ds = xr.Dataset({"clean_accuracy": ((), acc), "noisy_accuracy": ((), acc)})
        ds["clean_ece"] = ((), 0.0)
        ds["best_epoch"] = ((), 1.0)
        ds.attrs.update(sweep_dataset="a", sweep_seed=0, sweep_variant=variant)
        save_dataset(ds, runs / f"{variant}-0.nc")
    write_report(tmp_path)
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")
        for line in (tmp_path / "report.md").read_text().splitlines()
        if line.startswith("| ")
    }
    assert rows["vanilla-favor"][1].strip() == "1"  # one seed
    assert rows["vanilla-favor"][6].strip() == "—"  # recovered: not computable
