"""The merged NLP study (meanfield.studies.nlp): its presets key runs exactly as the
committed studies were keyed (so they resume), and its settings are checked before work."""

import json
from pathlib import Path

import pytest

from meanfield.errors import InputError
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
    cfg = nlp._check_pretrained(cfg)
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
