"""The merged NLP study (meanfield.studies.nlp): its presets key runs exactly as the
committed studies were keyed (so they resume), and its settings are checked before work."""

import json
from pathlib import Path

import pytest

from meanfield.errors import InputError, InputTypeError
from meanfield.studies import nlp
from meanfield.workbench.sweeps import configuration_digest, sweep_configuration

ROOT = Path(__file__).resolve().parents[1]


def test_scratch_preset_finds_the_committed_runs():
    # the digests recorded in config.json when the runs were computed: equal, so a rerun of
    # the preset reuses all 250 runs and 3 baselines instead of recomputing them
    cfg, _ = nlp._split(nlp.check_config(nlp.load_preset("nlp", "full")))
    specs = nlp._sweep_specs(cfg, "/work/shared/data", "cpu")
    record = json.loads((ROOT / "paper_repro/nlp/results/full/config.json").read_text())
    for name, sweeps in record["sweeps"].items():
        for part in ("variants", "baseline"):
            assert specs[name][part]["digest"] == sweeps[part]["digest"]
            assert specs[name][part]["grid"] == sweeps[part]["grid"]


@pytest.mark.parametrize("stage", ["softmax", "linearized"])
def test_pretrained_preset_finds_the_committed_runs(stage):
    # the data and model fingerprints are read from the manifest (the data and weights are
    # not in the repository); everything else comes from the preset
    cfg, _ = nlp._split(nlp.check_config(nlp.load_preset("nlp_pretrained", "full")))
    base = {k: v for k, v in cfg.items() if k not in nlp._GRID_ONLY}
    folder = ROOT / "paper_repro/nlp_pretrained/results/full" / stage
    current = json.loads((folder / "current.json").read_text())
    manifest = json.loads((folder / "configurations.json").read_text())
    func = {"softmax": nlp.run_softmax, "linearized": nlp.run_linearized}[stage]
    for ds in cfg["datasets"]:
        entry = {k: v for k, v in ds.items() if k not in nlp._DATASET_GRID_ONLY}
        recorded = manifest[current[ds["name"]]]["fixed"]
        fixed = {
            "config": json.dumps(dict(base, datasets=[entry]), sort_keys=True),
            "data_id": recorded["data_id"],
            "model_id": recorded["model_id"],
        }
        assert configuration_digest(sweep_configuration(func, fixed)) == current[ds["name"]]


def test_settings_refused_before_work():
    s = nlp.load_preset("nlp_pretrained", "tiny")
    with pytest.raises(InputError, match="only.method"):
        nlp.check_config(dict(s, only={"method": ["kernel"]}))
    with pytest.raises(InputError, match=r"only.methods: \['lam0'\]"):
        nlp.check_config(dict(s, only={"methods": ["lam0"]}))
    with pytest.raises(InputError, match="encoder"):
        nlp.check_config(dict(s, encoder="bert"))
    with pytest.raises(InputError, match="model_dir"):
        nlp.check_config({k: v for k, v in s.items() if k != "model_dir"})


# -- Coulomb-regularised distillation as a method of the pretrained study -----------------------
@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    pytest.importorskip("transformers")
    from meanfield.attention.pretrained import save_tiny_bert

    folder = tmp_path_factory.mktemp("bert")
    save_tiny_bert(folder, hidden_size=16, n_layers=2, n_heads=2, seed=0)  # d_h = 8
    return folder


def _tiny(bert_dir, **changes) -> dict:
    """The tiny pretrained preset (it restricts coulomb-distilled to FAVOR+) on the fixtures,
    one seed, no controls, then ``changes``."""
    s = nlp.load_preset("nlp_pretrained", "tiny")
    s.update(data_dir=nlp.FIXTURES, model_dir=str(bert_dir), seeds=[0], controls={"kinds": []})
    return dict(s, **changes)


def _linearized_rows(out) -> dict:
    from meanfield.studies.nlp_report import load_pretrained_runs

    return {r["variant"]: r for r in load_pretrained_runs(out) if r["stage"] == "linearized"}


def _mtimes(out) -> dict:
    return {p.name: p.stat().st_mtime_ns for p in Path(out).glob("*/runs/*.nc")}


@pytest.mark.slow
def test_coulomb_distilled_runs_end_to_end_keyed_apart_and_reported(bert_dir, tmp_path):
    import numpy as np
    import torch

    torch.set_num_threads(1)
    first = _tiny(bert_dir, methods=["hedgehog-loss"])
    nlp.run_study(nlp.check_config(first), tmp_path, progress=False)
    before = _mtimes(tmp_path)
    # adding the method recomputes nothing: its runs go to their own sweep and folder
    both = _tiny(bert_dir, methods=["hedgehog-loss", "coulomb-distilled"])
    nlp.run_study(nlp.check_config(both), tmp_path, progress=False)
    after = _mtimes(tmp_path)
    assert {k: after[k] for k in before} == before
    new = sorted(set(after) - set(before))
    assert len(new) == 1 and new[0].startswith("dataset=rotten_tomatoes_seed=0_variant=coulomb")
    assert len(list((tmp_path / "linearized-coulomb-distilled" / "runs").glob("*.nc"))) == 1
    rows = _linearized_rows(tmp_path)
    # method_features: FAVOR+ only (the preset's features are FAVOR+ and softmaxfeat)
    assert sorted(rows) == [
        "coulomb-distilled-favor",
        "hedgehog-loss-favor",
        "hedgehog-loss-softmaxfeat",
    ]
    c, h = rows["coulomb-distilled-favor"], rows["hedgehog-loss-favor"]
    keys = [k for k in c if k.startswith("coulomb_")]
    assert all(np.isfinite(c[k]) for k in keys) and np.isfinite(c["clean_accuracy"])
    lams = [c[f"coulomb_lam_{i}"] for i in range(2)]
    tvs = [c[f"coulomb_tv_validation_{i}"] for i in range(2)]
    assert lams == [0.0, 0.5] and c["coulomb_lam_selected"] == lams[int(np.argmin(tvs))]
    assert 0 < c["coulomb_relative_move_median"] <= c["coulomb_relative_move_max"]
    # the same held-out sequences and prior draw as Hedgehog-loss (same seed, n_sequences,
    # n_heldout, batch size): the same TV before learning, up to float32 summation order
    assert c["coulomb_tv_before"] == pytest.approx(h["hedgehog_tv_before"], rel=1e-5)
    # its own table keys its own runs only: a changed budget recomputes them alone
    table = dict(both["coulomb_distillation"], n_steps=3)
    with pytest.warns(UserWarning, match="another configuration"):  # the stale one, kept
        nlp.run_study(nlp.check_config(dict(both, coulomb_distillation=table)), tmp_path,
                      progress=False)  # fmt: skip
    again = _mtimes(tmp_path)
    assert {k: again[k] for k in after} == after and len(again) == len(after) + 1
    text = (tmp_path / "report.md").read_text()
    assert "| coulomb-distilled-favor | 1 | TV to softmax attention |" in text
    # one seed: the planned comparison is shown as missing, never as a number
    pair = "coulomb-distilled-favor − hedgehog-loss-favor (Coulomb-regularised − Hedgehog-loss"
    row = next(line for line in text.splitlines() if pair in line)
    assert row.endswith("| 1 | missing | — | — | — |")
    readme = (tmp_path / "readme_tables.md").read_text()
    assert "| Coulomb-regularised distillation FAVOR+ | 1 |" in readme


@pytest.mark.parametrize(
    "table, value, message",
    [
        ("beta", 0.0, r"coulomb_distillation.beta must be a finite number in \(0, inf\)"),
        ("lam", [0.0, -0.5], r"coulomb_distillation.lam must be a finite number in \[0, inf\)"),
        ("lam", [0.25, 0.25], "coulomb_distillation.lam must hold distinct values"),
        ("lam", [], "coulomb_distillation.lam must be a non-empty list"),
        ("lam_scale", "ratio", "coulomb_distillation.lam_scale"),
        ("prior", "yes", "coulomb_distillation.prior must be True or False"),
        ("riesz_s", -1.0, r"coulomb_distillation.riesz_s must be a finite number in \(-1, inf\)"),
        ("n_steps", 0, "coulomb_distillation.n_steps"),
        ("n_validation", 1.5, "coulomb_distillation.n_validation"),
        ("softening", -0.1, "coulomb_distillation.softening"),
        ("etaa", 0.1, "did you mean 'coulomb_distillation.eta'"),
    ],
)
def test_a_bad_coulomb_distillation_value_is_refused_by_name(table, value, message):
    s = nlp.load_preset("nlp_pretrained", "tiny")
    s["coulomb_distillation"] = dict(s["coulomb_distillation"], **{table: value})
    with pytest.raises((InputError, InputTypeError), match=message):
        nlp.check_config(s)


def test_a_bad_method_feature_list_is_refused_by_name():
    s = nlp.load_preset("nlp_pretrained", "tiny")
    with pytest.raises(InputError, match="method_features must be among"):
        nlp.check_config(dict(s, method_features={"hedgehog-published": ["favor"]}))
    with pytest.raises(InputError, match="method_features.coulomb-distilled must be among"):
        nlp.check_config(dict(s, method_features={"coulomb-distilled": ["favour"]}))


def test_a_riesz_exponent_past_the_head_dimension_is_refused_before_any_work(bert_dir, tmp_path):
    s = _tiny(bert_dir)
    s["coulomb_distillation"] = dict(s["coulomb_distillation"], riesz_s=8.0)  # d_h = 8
    with pytest.raises(
        InputError, match=r"coulomb_distillation.riesz_s must be in \(-1, d_h = 8\)"
    ):
        nlp.run_study(nlp.check_config(s), tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()  # nothing written, stage 1 never started


def test_the_settings_are_declared_and_the_coulomb_table_is_the_functions_own():
    # declared (registered: tests/test_contract_fuzz.py feeds each its invalid values); the
    # coulomb_distillation keys are coulomb_distil_feature_maps' declarations, renamed only
    import dataclasses

    from meanfield.attention.coulomb_distillation import coulomb_distil_feature_maps
    from meanfield.contract import contract_of, registered

    entries = registered()
    for name in ("PRETRAINED_SETTINGS", "SCRATCH_SETTINGS"):
        assert f"meanfield.studies.nlp:{name}" in entries
    own = contract_of(coulomb_distil_feature_maps).by_name
    declared = nlp.PRETRAINED_SETTINGS.by_name
    for key in nlp.PRETRAINED_DEFAULTS["coulomb_distillation"]:
        p = declared[f"coulomb_distillation.{key}"]
        assert dataclasses.replace(p, name=key) == own[key]
    assert "coulomb_distillation.seed" not in declared  # each run's own seed
    s = nlp.load_preset("nlp_pretrained", "tiny")
    s["coulomb_distillation"] = dict(s["coulomb_distillation"], seed=3)
    with pytest.raises(InputError, match="unknown configuration key 'coulomb_distillation.seed'"):
        nlp.check_config(s)
    # a scratch setting refused by its declaration, named by its dotted key
    s = nlp.load_preset("nlp", "tiny")
    with pytest.raises(InputError, match=r"tokenizer.vocab_size must be an integer >= 10"):
        nlp.check_config(dict(s, tokenizer={"vocab_size": 9}))
