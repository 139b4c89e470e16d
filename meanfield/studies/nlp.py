"""The NLP studies: learned kernel attention from scratch and in a pretrained Transformer.

One study (``study = "nlp"`` of :data:`meanfield.studies.STUDIES`), two encoders (the
``encoder`` setting; presets ``paper_repro/nlp/configs/*.toml`` and
``paper_repro/nlp_pretrained/configs/*.toml``, run by ``meanfield run``):

* ``"scratch"``: a small Transformer trained from scratch with softmax attention or a feature
  map X (FAVOR+ [2]_, PORF-softplus, softmaxfeat) in linear attention [1]_, ``Omega`` from the
  prior (vanilla X) or learned by Phase A (Kernel-X), and controls. Per data set one sweep over
  (seed, Q = K, variant): warm-up, the variant's branch, Phase B to early stopping, evaluation
  clean and token-noised; a TF-IDF + LR bar (:mod:`meanfield.attention.text_baseline`).
* ``"pretrained"``: MiniLM fine-tuned with softmax (stage ``softmax``), every attention then
  linearized with X, ``Omega`` by a method (``vanilla``; ``kernel``: Phase A;
  ``hedgehog-loss``: the Hedgehog loss; ``coulomb-distilled``: Langevin in its field with
  repulsion) or the published Hedgehog map [3]_, fine-tuned with the same budget (stage
  ``linearized``; a method with its own settings table in a sweep of its own).

Every run is one of :func:`meanfield.workbench.sweeps.run_sweep` (keyed by the digest of what
computes it, reused on a rerun) on data from :mod:`meanfield.attention.text_data`. The run
functions keep the names their recorded runs were keyed under
(``meanfield.studies.pretrained_nlp.run_linearized`` ...; the NOTES.md files). Never keyed:
``data_dir``, ``model_dir`` (pretrained), ``device`` and ``only`` (the part to compute now:
``datasets``, ``seeds``, ``features``, ``methods``, ``controls``, ``stages``; ``config.json``
records the whole study, so the report keeps every variant and comparison).

References
----------
.. [1] Katharopoulos, Vyas, Pappas, Fleuret, "Transformers are RNNs: fast autoregressive
   Transformers with linear attention", ICML 2020.
.. [2] Choromanski et al., "Rethinking attention with Performers" (FAVOR+), ICLR 2021.
.. [3] Zhang, Bhatia, Kumbong, Ré, "The Hedgehog & the Porcupine: expressive linear
   attentions with softmax mimicry", ICLR 2024.

Examples
--------
>>> from meanfield.studies.nlp import check_config, load_preset
>>> cfg = check_config(load_preset("nlp", "tiny"))
>>> cfg["encoder"], [d["name"] for d in cfg["datasets"]]
('scratch', ['sst2', 'rotten_tomatoes', 'qqp'])
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import platform
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
import xarray as xr

from .._version import __version__
from ..attention import text_data
from ..attention.coulomb_distillation import coulomb_distil_feature_maps
from ..contract import Param, contract_of
from ..errors import InputError
from ..workbench.study_settings import (
    KeyedAs,
    check_list,
    declare_settings,
    flatten_settings,
    merge_settings,
    settings_digest,
    unflatten_settings,
    unknown_key,
    writable_folder,
    write_json,
)
from . import nlp_report as vocab  # the variants' names

__all__ = ["check_config", "run_study", "write_report", "load_preset", "FIXTURES"]

_ROOT = Path(__file__).resolve().parents[2]
#: the repository's fixture data (the tiny presets' ``data_dir``; examples and tests)
FIXTURES = str(_ROOT / "tests" / "fixtures" / "nlp")
_QUESTION = {"scratch": "nlp", "pretrained": "nlp_pretrained"}  # its presets' folder


def load_preset(question: str, preset: str) -> dict:
    """The settings of ``paper_repro/<question>/configs/<preset>.toml`` (``type`` and
    ``study`` left out), as ``meanfield run`` passes them to :func:`check_config`.

    See Also
    --------
    check_config : checks the settings it returns.
    meanfield.workbench.study_files.read_study_file : reads the preset file.

    Examples
    --------
    >>> load_preset("nlp_pretrained", "tiny")["encoder"]
    'pretrained'
    """
    from ..workbench.study_files import read_study_file

    return read_study_file(_ROOT / "paper_repro" / question / "configs" / f"{preset}.toml").settings


# --- from scratch: settings -----------------------------------------------------------------------
def _phase_a_defaults() -> dict:
    from ..attention.phases import PhaseASettings

    fields = dataclasses.fields(PhaseASettings)
    return {f.name: f.default for f in fields if f.name != "seed"}  # each run's seed


#: the settings a configuration may give, with their defaults (unknown keys are refused);
#: ``phase_a``: every field of :class:`meanfield.attention.phases.PhaseASettings` but ``seed``
# fmt: off
SCRATCH_DEFAULTS = {
    "name": "study", "description": "", "datasets": [],
    "features": ["favor", "porf-softplus", "softmaxfeat"], "tie_qk": [False], "seeds": [0],
    "controls": {"feature": "favor", "datasets": [], "kinds": list(vocab.CONTROLS)},
    "noise": {"rate": 0.1, "seed": 777}, "validation_fraction": 0.1, "data_seed": 12345,
    "threads": 1, "baseline": True, "tokenizer": {"vocab_size": 8000, "min_frequency": 2},
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2, "d_ff": 128, "max_length": 64,
              "dropout": 0.1, "n_features": 32, "eps": 1e-6},
    "train": {"batch_size": 32, "lr": 2e-3, "weight_decay": 0.01, "warmup_epochs": 1.0,
              "max_epochs": 10.0, "patience": 3, "eval_every": 0.5},
    "phase_a": _phase_a_defaults(),
}
#: the keys of one entry of ``datasets`` with their defaults (``name`` and ``task`` required;
#: ``seeds`` and ``tie_qk`` default to the study's)
_DATASET_DEFAULTS = {"name": None, "task": None, "source": "auto", "train_split": "train",
                     "eval_split": "test", "max_train": None, "max_eval": None, "seeds": None,
                     "tie_qk": None}
# fmt: on
#: keys that only shape the grid or the report: they stay out of the runs' keys, so extending
#: seeds, features or controls never recomputes the runs already done
_NOT_IN_KEY = ("name", "description", "datasets", "features", "tie_qk", "seeds", "controls")
_NOT_IN_KEY += ("threads", "baseline")  # one torch thread per run; whether to run the bar


def _built(where: str, make, *args, **kwargs) -> None:
    try:
        make(*args, **kwargs)
    except (TypeError, ValueError) as err:
        raise InputError(f"{where}: {err}") from None


#: the declared settings (each checked and named by its key before the cross-checks), those
#: of the scratch study; the pretrained study shares those it has
# fmt: off
_SCRATCH_KEYS = [
    Param("seeds", "seed", "seeds of the runs (a data set may list its own)", sequence=True),
    Param("validation_fraction", "real", "share of the training examples held out", low=0.0,
          low_open=True, high=1.0, high_open=True),
    Param("data_seed", "seed", "seed of the examples drawn and the validation split"),
    Param("threads", "int", "torch threads per run", low=1),
    Param("baseline", "flag", "compute the TF-IDF + LR bar"),
    Param("noise.rate", "real", "token-noise rate of the noisy evaluation", low=0.0, high=1.0,
          high_open=True),
    Param("noise.seed", "seed", "seed of the token noise"),
    Param("tokenizer.vocab_size", "int", "vocabulary size of the tokenizer", low=10),
    Param("tokenizer.min_frequency", "int", "least count of a vocabulary entry", low=1),
    Param("train.batch_size", "int", "sequences per step", low=1),
    Param("train.lr", "real", "learning rate", low=0.0, low_open=True),
    Param("train.weight_decay", "real", "weight decay", low=0.0),
    Param("train.warmup_epochs", "real", "epochs of the warm-up", low=0.0, low_open=True),
    Param("train.max_epochs", "real", "epoch budget", low=0.0, low_open=True),
    Param("train.patience", "int", "validations without improvement before stopping", low=1),
    Param("train.eval_every", "real", "epochs between validations", low=0.0, low_open=True),
]
# fmt: on
_DECLARED = {p.name: p for p in _SCRATCH_KEYS}


def _scratch_cross_checked(**out) -> dict:
    """What the declared settings (``train`` among them) cannot say: the data sets, the free tables
    (``controls``; ``model``, ``phase_a``: checked by what they configure), distinct values."""
    from ..attention.data import TASKS
    from ..attention.model import TransformerClassifier
    from ..attention.phases import PhaseASettings

    for key in ("controls", "model", "phase_a"):  # merged key by key into their defaults
        out[key] = merge_settings(out[key], SCRATCH_DEFAULTS[key], f"{key}.")
    check_list("features", out["features"], list(vocab.FEATURE_LABEL), kind=str, distinct=True)
    check_list("seeds", out["seeds"], kind=int, distinct=True)
    check_list("tie_qk", out["tie_qk"], kind=bool, distinct=True)  # a list of flags
    if not isinstance(out["datasets"], list) or not out["datasets"]:
        raise InputError("datasets must list at least one data set")
    datasets = []
    for i, ds in enumerate(out["datasets"]):
        ds = merge_settings(ds, _DATASET_DEFAULTS, f"datasets[{i}].")
        if not ds["name"] or not ds["task"]:
            raise InputError(f"datasets[{i}] needs a 'name' and a 'task', got {ds}")
        if ds["task"] not in TASKS:
            raise InputError(f"datasets: unknown task {ds['task']!r}; choose from {list(TASKS)}")
        for key, kind in (("seeds", int), ("tie_qk", bool)):
            ds[key] = list(
                check_list(f"datasets[{i}].{key}", ds[key] or out[key], kind=kind, distinct=True)
            )
        datasets.append(ds)
    out["datasets"] = datasets
    names = check_list("datasets' names", [d["name"] for d in datasets], distinct=True)
    ctl = out["controls"]
    check_list("controls.kinds", ctl["kinds"], vocab.CONTROLS, empty=True)
    check_list("controls.datasets", ctl["datasets"], names, empty=True)
    if ctl["datasets"] and ctl["kinds"] and ctl["feature"] not in out["features"]:
        raise InputError(
            f"controls.feature must be among {', '.join(out['features'])}; got {ctl['feature']!r}"
        )
    for f in ["softmax"] + out["features"]:  # checked by the objects they configure
        _built("model", TransformerClassifier, 16, attention=f, **out["model"])
    _built("phase_a", PhaseASettings, **out["phase_a"])
    return out


#: the scratch study's settings contract (as :data:`PRETRAINED_SETTINGS`)
SCRATCH_SETTINGS = declare_settings(
    f"{__name__}:SCRATCH_SETTINGS", _SCRATCH_KEYS, SCRATCH_DEFAULTS, check=_scratch_cross_checked
)


def _data_settings(cfg: dict, dataset: str) -> dict:
    """What the data a run sees is made of: the data set's entry (its grid lists left out),
    the validation split and the noise."""
    ds = next(d for d in cfg["datasets"] if d["name"] == dataset)
    data = {k: v for k, v in ds.items() if k not in ("name", "seeds", "tie_qk")}
    keys = ("validation_fraction", "data_seed")
    return {"data": data, **{k: cfg[k] for k in keys}}


def _sweep_specs(cfg: dict, data_dir, device: str = "cpu") -> dict:
    """Each data set's two sweeps: folder, grid, fixed parameters and configuration digest."""
    data_dir = str(Path(data_dir).expanduser().resolve())
    rest = {k: v for k, v in cfg.items() if k not in _NOT_IN_KEY}
    out = {}
    for ds in cfg["datasets"]:
        name = ds["name"]
        # a run's settings, flattened (train.lr ...): each a fixed parameter of the sweep, so
        # a rerun's notes name the ones that changed
        fixed = {"dataset": name, "data_dir": data_dir, "device": str(device)}
        fixed.update(flatten_settings({**rest, **_data_settings(cfg, name)}))
        grid = dict(
            seed=ds["seeds"], tie_qk=ds["tie_qk"], variant=vocab.scratch_variants(cfg, name)
        )
        bfixed = {"data_dir": data_dir, **flatten_settings(_data_settings(cfg, name))}
        out[name] = {}
        for part, func, folder, g, fix in (
            ("variants", run_variant, name, grid, fixed),
            ("baseline", run_baseline, f"{name}/baseline", {"dataset": [name]}, bfixed),
        ):
            out[name][part] = dict(
                folder=folder, grid=g, fixed=fix, digest=settings_digest(func, fix)
            )
    return out


def _prepare_scratch(data_dir: str, s: dict) -> dict:
    kw = {k: s[k] for k in ("validation_fraction", "data_seed", "tokenizer", "noise")}
    kw["max_length"] = s["model"]["max_length"]
    return text_data.tokenised_splits(data_dir, s["data"], **kw)


# --- from scratch: one run ------------------------------------------------------------------------
#: the metrics stored as data variables of each run file (everything is in its ``record``)
_METRICS = ("accuracy", "mcc", "ece", "log_loss", "brier")
RUN_METRICS = _METRICS + tuple(f"noisy_{m}" for m in _METRICS) + ("wall_seconds",)


def _record_dataset(rec: dict) -> xr.Dataset:
    """One run's record as the dataset a run file holds."""
    ds = xr.Dataset({k: ((), float(rec[k])) for k in RUN_METRICS if k in rec})
    keys = ("dataset", "variant", "feature", "branch", "device")
    ds.attrs.update({k: str(rec[k]) for k in keys if k in rec})
    ds.attrs.update(record=json.dumps(rec, default=float), package_version=__version__)
    ds.attrs["torch_version"] = torch.__version__
    return ds


def _train_info(prefix: str, info: dict) -> dict:
    keys = ("steps", "epochs", "best_epoch", "best_val_loss", "stopped_early", "seconds")
    history = {f"{prefix}_history": [list(h) for h in info["history"]]}
    return {**{f"{prefix}_{k}": info[k] for k in keys}, **history}


def _new_model(prep, s, feature, qk, seed, device):
    from ..attention.model import TransformerClassifier

    kw = dict(attention=feature or "softmax", tie_qk=qk, pair=prep["pair"], seed=seed)
    return TransformerClassifier(prep["vocab_size"], **kw, **s["model"]).to(device)


#: warmed-up states kept by this process (key -> (state, training flag, info)): the variants
#: of one (data set, seed, Q = K, X) share one warm-up when one process runs them
_WARM: OrderedDict = OrderedDict()
_WARM_LOCK = threading.Lock()
_WARM_KEEP = 4


def _warm_up(model, prep, s, seed) -> dict:
    from ..attention.training import train

    kw = {k: s["train"][k] for k in ("batch_size", "lr", "weight_decay")}
    return train(model, prep["train"], epochs=s["train"]["warmup_epochs"], seed=seed, **kw)


def _warmed_up(prep, s, key: str, feature, qk, seed, device):
    """The seed's model after the warm-up, and the warm-up's record (computed, or the copy
    this process kept from a variant that computed it: the warm-up is deterministic)."""
    with _WARM_LOCK:
        hit = _WARM.get(key)
        if hit is not None:
            _WARM.move_to_end(key)
    model = _new_model(prep, s, feature, qk, seed, device)
    if hit is not None:
        state, training, info = hit
        model.load_state_dict(state)
        model.train(training)
        return model, copy.deepcopy(info)
    info = _warm_up(model, prep, s, seed)
    state = copy.deepcopy(model.state_dict())
    with _WARM_LOCK:
        _WARM[key] = (state, model.training, copy.deepcopy(info))
        while len(_WARM) > _WARM_KEEP:
            _WARM.popitem(last=False)
    return model, info


def _clear_caches() -> None:
    """Forget the data and warm-ups this process keeps (tests; memory)."""
    text_data.clear_caches()
    with _WARM_LOCK:
        _WARM.clear()


def _run_variant(
    seed: int,
    tie_qk: bool,
    variant: str,
    *,
    dataset: str,
    data_dir: str,
    device: str = "cpu",
    **settings,
) -> xr.Dataset:
    """One run of the study: warm-up, the variant's branch, Phase B, evaluation."""
    from ..attention.metrics import classification_metrics
    from ..attention.phases import phase_a, phase_b
    from ..attention.training import predict_proba

    s = unflatten_settings(settings)
    feature, branch = vocab.split_scratch_variant(variant)
    dev = torch.device(device)
    prep = _prepare_scratch(data_dir, s)
    pa_cfg = dict(s["phase_a"])
    res = None
    t0 = time.perf_counter()
    if branch == "atinit":
        model = _new_model(prep, s, feature, tie_qk, seed, dev)
        res = phase_a(model, prep["train"], seed=seed, **pa_cfg)
        info_w = _warm_up(model, prep, s, seed)
        shared = 0.0
    else:
        key = [dataset, data_dir, device, seed, tie_qk, feature, settings]
        key = json.dumps(key, sort_keys=True, default=str)
        model, info_w = _warmed_up(prep, s, key, feature, tie_qk, seed, dev)
        shared = info_w["seconds"]  # the (shared) warm-up counts in each run's wall time
        t0 = time.perf_counter()
        if branch == "redraw":
            for layer, fm in enumerate(model.feature_maps()):
                fm.new_feature_map(10_000 + 97 * seed + layer)  # never an init seed
        elif branch in ("kernel", "priornorms", "lam0"):
            if branch == "priornorms":
                pa_cfg["norms"] = "prior"
            if branch == "lam0":
                pa_cfg.update(repulsion_ratio=0.0, lam=None)
            res = phase_a(model, prep["train"], seed=seed, **pa_cfg)
    rec = dict(dataset=dataset, variant=vocab.variant_label(variant), feature=feature or "softmax")
    rec.update(branch=branch, tie_qk=bool(tie_qk), seed=int(seed))
    rec.update({k: prep[k] for k in ("n_train", "n_val", "n_eval", "eval_truncated")})
    rec["device"] = str(dev)
    rec.update(_train_info("warmup", info_w))
    if res is not None:
        rec.update(res.summary())
    keys = ("batch_size", "lr", "weight_decay", "max_epochs", "patience", "eval_every")
    kw = {k: s["train"][k] for k in keys}
    pb = phase_b(model, prep["train"], seed=seed + 7919, validation=prep["val"], **kw)
    rec.update(_train_info("phase_b", pb))
    labels = prep["eval_labels"]
    rec.update(classification_metrics(labels, predict_proba(model, prep["eval"])))
    noisy = classification_metrics(labels, predict_proba(model, prep["eval_noisy"]))
    rec.update({f"noisy_{k}": v for k, v in noisy.items()})
    rec["wall_seconds"] = time.perf_counter() - t0 + shared
    return _record_dataset(rec)


def _run_baseline(dataset: str, *, data_dir: str, **settings) -> xr.Dataset:
    """TF-IDF (1-2-grams) + logistic regression on the study's training examples
    (:func:`meanfield.attention.text_baseline.tfidf_bar`)."""
    from ..attention.text_baseline import tfidf_bar

    s, t0 = unflatten_settings(settings), time.perf_counter()
    keys = ("validation_fraction", "data_seed")
    rec = tfidf_bar(data_dir, s["data"], *(s[k] for k in keys), [0.1, 0.3, 1, 3, 10, 30])
    del rec["C_on_edge"]  # the recorded runs have none
    rec.update(dataset=dataset, seconds=time.perf_counter() - t0)
    return _record_dataset(rec)


# --- from scratch: the study ----------------------------------------------------------------------
def _run_scratch(cfg: dict, place: dict, out: Path, **kw) -> None:
    """Run (or resume) per data set the baseline and the variant sweeps."""
    from ..workbench.sweeps import run_sweep

    chosen = [d["name"] for d in cfg["datasets"]]
    chosen = [n for n in chosen if n in place["only"].get("datasets", chosen)]
    data_dir, device = place["data_dir"], place["device"]
    for name in chosen:  # every split loaded before any work (a missing file refused)
        text_data.text_splits(data_dir, _data_settings(cfg, name)["data"], cfg["data_seed"])
    specs = _sweep_specs(cfg, data_dir, device)
    # config.json: the configuration, where and how it ran, the versions, and each sweep's
    # folder, grid and digest (the report reads these runs only)
    record = dict(config=cfg, config_file=None, data_dir=data_dir, device=device)
    record["machine"] = f"{platform.machine()} {platform.processor()} {os.cpu_count()} cpus, "
    record["machine"] += f"1 torch thread per run, device {device}"
    record.update(scheduler=kw["scheduler"], meanfield_version=__version__, torch=torch.__version__)
    record.update(numpy=np.__version__, python=sys.version.split()[0])
    record["sweeps"] = {
        name: {p: {k: spec[p][k] for k in ("folder", "grid", "digest")} for p in spec}
        for name, spec in specs.items()
    }
    write_json(out / "config.json", record)
    say = print if kw["progress"] else (lambda line: None)
    log = print if kw["progress"] else None  # quiet: the sweeps' notes come as warnings
    for name in chosen:
        s = unflatten_settings(specs[name]["variants"]["fixed"])
        prep = _prepare_scratch(data_dir, s)
        say(
            f"{name}: {prep['n_train']} train / {prep['n_val']} validation / {prep['n_eval']} "
            f"eval examples ({100 * prep['eval_truncated']:.1f} % of eval at the "
            f"{s['model']['max_length']}-token cut), vocabulary {prep['vocab_size']}"
        )
        for part in ("baseline", "variants") if cfg["baseline"] else ("variants",):
            spec = specs[name][part]
            func = run_baseline if part == "baseline" else run_variant
            run_sweep(func, spec["grid"], out / spec["folder"], fixed=spec["fixed"], log=log, **kw)


# --- pretrained: settings -------------------------------------------------------------------------
# fmt: off
#: the settings a configuration may give, with their defaults (unknown keys are refused)
PRETRAINED_DEFAULTS = {
    "name": "study", "description": "", "datasets": [], "seeds": [0],
    "features": ["favor", "porf-softplus", "softmaxfeat"],
    "methods": ["vanilla", "kernel", "hedgehog-loss"],
    "controls": {"feature": "favor", "kinds": ["redraw", "lam0"]},
    "n_features": {"favor": 64, "porf-softplus": 64, "softmaxfeat": 32}, "max_length": 64,
    "validation_fraction": 0.1, "data_seed": 12345, "noise": {"rate": 0.1, "seed": 777},
    "freeze_embeddings": True,
    "train": {"batch_size": 32, "lr": 3e-5, "max_epochs": 3.0, "patience": 2,
              "eval_every": 0.5, "warmup_steps": 50, "weight_decay": 0.01},
    "hedgehog": {"n_sequences": 1024, "n_heldout": 256, "steps": 300, "lr": 0.01},
    "phase_a": {"n_align": 4096, "n_heldout": 512, "n_steps": 300, "tilt": 0.15},
    "method_features": {},  # method -> the feature maps it runs on (default: every one)
    # coulomb_distil_feature_maps' keyword arguments (the method coulomb-distilled)
    "coulomb_distillation": {"lam": [0.0, 0.25, 1.0], "lam_scale": "force-ratio", "beta": 1e4,
                             "eta": 0.01, "n_steps": 300, "gamma": 1.0, "prior": True,
                             "riesz_s": 1.0, "softening": 0.1, "n_sequences": 1024,
                             "n_heldout": 256, "n_validation": 256, "batch_size": 16},
}
# fmt: on
#: out of the shared key: the grid's lists, labels, and each method's own settings table
#: (vocab.METHOD_SETTINGS: it keys that method's own sweep alone)
_GRID_ONLY = ("name", "description", "seeds", "features", "methods", "controls")
_GRID_ONLY += ("method_features", *vocab.METHOD_SETTINGS.values())
_COULOMB = vocab.METHOD_SETTINGS["coulomb-distilled"]  # its table
#: a data set's grid lists: left out of its runs' key (extending them recomputes nothing)
_DATASET_GRID_ONLY = ("seeds", "methods")
_DATASET_KEYS = tuple("name task source train_split eval_split max_train seeds methods".split())
#: the declared settings: those the scratch study has, and the pretrained study's own
# fmt: off
_PRETRAINED_KEYS = [
    *(_DECLARED[k] for k in ("seeds", "data_seed", "noise.rate", "noise.seed")),
    Param("max_length", "int", "tokens kept per sequence", low=4),
    Param("validation_fraction", "real", "share of the training examples held out", low=0.0,
          low_open=True, high=0.5),
    Param("freeze_embeddings", "flag", "word and position embeddings frozen in fine-tuning"),
    *(_DECLARED[f"train.{k}"] for k in ("batch_size", "lr", "weight_decay", "max_epochs",
                                        "patience", "eval_every")),
    Param("train.warmup_steps", "int", "learning-rate warm-up steps", low=0),
    Param("hedgehog.n_sequences", "int", "training sequences of the Hedgehog loss", low=1),
    Param("hedgehog.n_heldout", "int", "held-out sequences of the Hedgehog loss", low=1),
    Param("hedgehog.steps", "int", "steps of the Hedgehog loss", low=1),
    Param("hedgehog.lr", "real", "learning rate of the Hedgehog loss", low=0.0, low_open=True),
    Param("phase_a.n_align", "int", "alignment sequences of Phase A", low=2),
    Param("phase_a.n_heldout", "int", "held-out sequences of Phase A", low=2),
    Param("phase_a.n_steps", "int", "particle steps of Phase A", low=1),
    Param("phase_a.tilt", "real", "tilt of Phase A's alignment", low=0.0, low_open=True),
]
# fmt: on


#: ``coulomb_distillation``'s keys: coulomb_distil_feature_maps' own declarations (one source)
_COULOMB_KEYS = [dataclasses.replace(p, name=f"{_COULOMB}.{p.name}")
                 for p in contract_of(coulomb_distil_feature_maps).params
                 if p.name in PRETRAINED_DEFAULTS[_COULOMB]]  # fmt: skip


def _cross_checked(**out) -> dict:
    """What the declared settings cannot say: the data sets, the free tables (``n_features``,
    ``method_features``, ``controls``), the methods (earlier names read as the current
    ones), distinct values."""
    from .._validation import check_int
    from ..attention.data import TASKS
    from ..attention.features import FEATURE_KINDS

    for key in ("name", "description"):
        if not isinstance(out[key], str):
            raise InputError(f"{key} must be a string, got {out[key]!r}")
    out["datasets"] = [dict(ds) for ds in check_list("datasets", out["datasets"], empty=True)]
    names = [ds.get("name") for ds in out["datasets"]]
    check_list("datasets' names", names, distinct=True, empty=True)
    holders = [("", out)]
    for ds in out["datasets"]:
        where = f"dataset {ds.get('name')!r}: "
        if bad := [k for k in ds if k not in _DATASET_KEYS]:
            raise unknown_key(f"datasets[{names.index(ds.get('name'))}].", bad[0], _DATASET_KEYS)
        if "name" not in ds or "task" not in ds:
            raise InputError(f"each dataset needs 'name' and 'task', got {ds}")
        if ds["task"] not in TASKS:
            raise InputError(f"{where}task must be among {', '.join(TASKS)}; got {ds['task']!r}")
        if ds.get("max_train") is not None:
            check_int(f"{where}max_train", ds["max_train"], minimum=2)
        if "seeds" in ds:  # checked as the study's (declared) seeds, named by the data set
            seeds = dataclasses.replace(_DECLARED["seeds"], label=f"{where}seeds")
            ds["seeds"] = seeds.check(ds["seeds"])
        holders.append((where, ds))
    for where, holder in holders:
        if "methods" in holder:
            # earlier names (hedgehog) read as the current ones (hedgehog-loss)
            methods = check_list(f"{where}methods", holder["methods"], empty=not where)
            canonical = vocab._canonical_method
            holder["methods"] = [canonical(m) if isinstance(m, str) else m for m in methods]
            check_list(f"{where}methods", holder["methods"], tuple(vocab.METHODS), empty=True)
    check_list("features", out["features"], FEATURE_KINDS, empty=True)
    if not isinstance(out["method_features"], dict):
        raise InputError(f"method_features must be a mapping method -> list of feature maps, "
                         f"got {out['method_features']!r}")  # fmt: skip
    crossed = [m for m, own in vocab.METHODS.items() if own is None]
    for method, features in out["method_features"].items():
        check_list("method_features", [method], crossed)
        check_list(f"method_features.{method}", features, FEATURE_KINDS, distinct=True)
    # riesz_s < d_h: checked where the model is loaded, before any work
    check_list(f"{_COULOMB}.lam", out[_COULOMB]["lam"], distinct=True)
    if out["controls"] is not None:  # a table given is merged key by key (None: no controls)
        out["controls"] = merge_settings(
            out["controls"], PRETRAINED_DEFAULTS["controls"], "controls."
        )
    ctl = out["controls"] or {"feature": None, "kinds": []}
    used = list(out["features"])
    if check_list("controls.kinds", ctl["kinds"], vocab.PRETRAINED_CONTROLS, empty=True):
        used += check_list("controls.feature", [ctl["feature"]], FEATURE_KINDS)
    if not isinstance(out["n_features"], dict):
        raise InputError(f"n_features must be a mapping feature -> int, got {out['n_features']!r}")
    for feature in used + (["hedgehog"] if "hedgehog" in out["n_features"] else []):
        # the published Hedgehog map is square (m = d_h) unless n_features names it
        if feature not in out["n_features"]:
            raise InputError(f"n_features has no entry for the feature map {feature!r}")
        check_int(f"n_features.{feature}", out["n_features"][feature], minimum=1)
    return out


#: the pretrained study's settings contract: ``wrapper(**settings)`` fills the defaults, refuses an
#: unknown key naming the nearest, checks every declared value, then :func:`_cross_checked`
PRETRAINED_SETTINGS = declare_settings(
    f"{__name__}:PRETRAINED_SETTINGS", [*_PRETRAINED_KEYS, *_COULOMB_KEYS], PRETRAINED_DEFAULTS,
    check=_cross_checked,
)  # fmt: skip


# --- pretrained: the two stages' runs -------------------------------------------------------------
def _prepare_pretrained(cfg: dict, dataset: str, data_dir: str, model_dir: str) -> dict:
    ds = next(d for d in cfg["datasets"] if d["name"] == dataset)
    keys = ("max_length", "validation_fraction", "data_seed", "noise")
    return text_data.encoded_splits(data_dir, model_dir, ds, **{k: cfg[k] for k in keys})


def _fine_tune(model, prep, cfg, seed, stage: str, extra: dict, t0: float, device, metrics=None):
    """Fine-tune ``model`` to early stopping, evaluate it clean and token-noised: the run's
    dataset (metrics as ``<split>_<metric>``, the rest in ``details``)."""
    from ..attention.metrics import classification_metrics
    from ..attention.training import predict_proba, train

    if cfg["freeze_embeddings"]:
        for p in model.encoder.embeddings.parameters():
            p.requires_grad_(False)
    info = train(model, prep["train"], validation=prep["val"], seed=seed, **cfg["train"])
    metrics = dict(metrics or {})
    for split, data in (("clean", prep["eval"]), ("noisy", prep["eval_noisy"])):
        metrics[split] = classification_metrics(data.labels.numpy(), predict_proba(model, data, 64))
    extra.update({k: info[k] for k in ("steps", "epochs", "best_epoch", "best_val_loss")})
    extra["seconds"] = time.perf_counter() - t0
    data = {f"{split}_{k}": ((), float(v)) for split, m in metrics.items() for k, v in m.items()}
    for k, v in extra.items():
        if isinstance(v, (int, float, np.floating, np.integer, bool)):
            data[k] = ((), float(v))
    dev = torch.device(device)  # recorded with the accelerator's name where it is one
    label = f"{device} ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else device
    ds = xr.Dataset(data)
    ds.attrs.update(stage=stage, package_version=__version__, torch_version=torch.__version__)
    ds.attrs["machine"] = f"{platform.node()} {platform.processor() or platform.machine()}"
    ds.attrs.update(device=label, details=json.dumps(extra, default=float))
    return ds


def _checkpoint(out_dir, dataset: str, seed: int) -> Path:
    return Path(out_dir) / "checkpoints" / f"softmax_{dataset}_seed{seed}.pt"


def _run_softmax(dataset: str, seed: int, *, config: str, **where) -> xr.Dataset:
    """Stage 1: fine-tune the softmax encoder, save its checkpoint; clean and noisy metrics.
    ``where``: ``data_id``, ``model_id`` (keyed: what the runs compute from), ``data_dir``,
    ``model_dir``, ``out_dir``, ``device`` (the sweep's context)."""
    from ..attention.pretrained import load_pretrained_classifier

    cfg = json.loads(config)
    device, out_dir = where["device"], where["out_dir"]
    prep = _prepare_pretrained(cfg, dataset, where["data_dir"], where["model_dir"])
    t0 = time.perf_counter()
    model, _ = load_pretrained_classifier(where["model_dir"], seed=seed)
    model.to(device)
    extra = {"n_train": len(prep["train"])}
    ds = _fine_tune(model, prep, cfg, seed, "softmax", extra, t0, device)
    path = _checkpoint(out_dir, dataset, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(model.state_dict(), tmp)
    tmp.replace(path)
    return ds


def _run_linearized(dataset: str, seed: int, variant: str, *, config: str, **where) -> xr.Dataset:
    """Stage 2: linearize the seed's softmax checkpoint, get the feature maps by the variant's
    method, fine-tune (Omega frozen; the published Hedgehog's maps trained with the model),
    evaluate; also the accuracy right after linearizing (``where``: as :func:`_run_softmax`)."""
    from ..attention.coulomb_distillation import coulomb_distil_feature_maps
    from ..attention.learn_features import distil_feature_maps, phase_a_pretrained
    from ..attention.linearize import feature_maps_of, linearize
    from ..attention.metrics import classification_metrics
    from ..attention.pretrained import load_pretrained_classifier
    from ..attention.training import predict_proba

    cfg = json.loads(config)
    method, feature = vocab.split_variant(variant)
    device, out_dir = where["device"], where["out_dir"]
    prep = _prepare_pretrained(cfg, dataset, where["data_dir"], where["model_dir"])
    t0 = time.perf_counter()
    model, _ = load_pretrained_classifier(where["model_dir"], seed=seed)
    ckpt = _checkpoint(out_dir, dataset, seed)
    if not ckpt.is_file():  # run_study recomputes stage 1 first; a direct caller is told
        why = f"{dataset} seed {seed}: run stage 1 (the stage 'softmax') first"
        raise FileNotFoundError(f"no softmax checkpoint {str(ckpt)!r} for {why}")
    # the checkpoint may come from another device: read it onto the CPU, then move the model
    model.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True))
    omega_seed = seed + 500 if method == "redraw" else seed
    # the published Hedgehog map is square (m = d_h) unless n_features names it
    linearize(model, feature, n_features=cfg["n_features"].get(feature), seed=omega_seed)
    model.to(device)  # Omega is drawn on the CPU, so the draw is the same on every device
    extra: dict = {}  # what learning the feature maps recorded
    if method in ("hedgehog-loss", "hedgehog-published"):
        # the same loss, data and budget; the published map's W, b stay trainable after
        h = distil_feature_maps(model, prep["train"], seed=seed, **cfg["hedgehog"])
        extra.update({f"hedgehog_{k}": v for k, v in h.items() if k != "layers"})
        if method == "hedgehog-published":
            fms = feature_maps_of(model)
            extra["feature_map_parameters"] = sum(p.numel() for f in fms for p in f.parameters())
    elif method in ("kernel", "lam0"):  # lam0: without repulsion
        st = dict(
            cfg["phase_a"], seed=seed, **({"repulsion_ratio": 0.0} if method == "lam0" else {})
        )
        s = phase_a_pretrained(model, prep["train"], **st).summary()
        extra.update({f"phase_a_{k}": v for k, v in s.items() if k != "layers"})
    elif method == "coulomb-distilled":  # its own sweep's config holds its table
        c = coulomb_distil_feature_maps(model, prep["train"], seed=seed, **cfg[_COULOMB])
        extra.update(_coulomb_record(c))
    extra["learn_seconds"] = time.perf_counter() - t0
    at_once = predict_proba(model, prep["eval"], 64)
    linearized = {"linearized": classification_metrics(prep["eval"].labels.numpy(), at_once)}
    return _fine_tune(model, prep, cfg, seed, "linearized", extra, t0, device, linearized)


def _coulomb_record(c: dict) -> dict:
    """Flat numbers of a ``coulomb_distil_feature_maps`` record: the lam grid and validation
    TV (``_<i>``: the grid's i-th), held-out TV and loss, median and max over heads of
    ``||Omega_T - Omega_0||_F / ||Omega_0||_F``."""
    keys = ("lam_selected", "noise_scale", "seconds", "tv_before", "tv_after", "loss_before",
            "loss_after")  # fmt: skip
    out, sel = {f"coulomb_{k}": c[k] for k in keys}, c["selection"]
    for i, (lam, tv) in enumerate(zip(sel["lam"], sel["tv_validation"], strict=True)):
        out.update({f"coulomb_lam_{i}": lam, f"coulomb_tv_validation_{i}": tv})
    moves = [h["relative_move"] for h in c["heads"]]
    med, top = float(np.median(moves)), float(np.max(moves))
    return dict(out, coulomb_relative_move_median=med, coulomb_relative_move_max=top)


# --- pretrained: the study ------------------------------------------------------------------------
def _record_current(stage_dir: Path, dataset: str, func, fixed: dict) -> None:
    """Note in ``<stage>/current.json`` the configuration digest of ``dataset``'s sweep, as it
    starts: the report shows those runs only (never stale runs of another setting)."""
    path = stage_dir / "current.json"
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        current = {}
    current[dataset] = settings_digest(func, fixed)
    write_json(path, current, sort_keys=True)


def _notes_of_dataset(stage_dir: Path, dataset: str):
    """A ``log`` for :func:`~meanfield.workbench.sweeps.run_sweep` warning of its notes but
    "also holds runs of another configuration" of another data set (each data set is its own
    sweep in the stage folder; a stale setting of the *same* data set still warns)."""
    import re
    import warnings

    from ..workbench.sweeps import MANIFEST

    def log(note: str) -> None:
        other = re.search(r"another configuration \((\w+)\)", note)
        if other:
            try:
                manifest = json.loads((stage_dir / MANIFEST).read_text())
                cfg = json.loads(manifest[other.group(1)]["fixed"]["config"])
                if [d["name"] for d in cfg["datasets"]] != [dataset]:
                    return
            except (OSError, ValueError, KeyError, TypeError):
                pass  # unreadable: the note is shown
        warnings.warn(note, stacklevel=2)

    return log


def _only(cfg: dict, only: dict) -> dict:
    """The part of the study ``only`` selects (its data sets, seeds, features, methods and
    controls; earlier method names read as the current ones)."""
    cfg = copy.deepcopy(cfg)
    if "seeds" in only:  # every data set's seeds, its own list included
        cfg["seeds"] = list(only["seeds"])
        cfg["datasets"] = [{k: v for k, v in d.items() if k != "seeds"} for d in cfg["datasets"]]
    if "datasets" in only:
        cfg["datasets"] = [d for d in cfg["datasets"] if d["name"] in only["datasets"]]
    for key in ("features", "methods"):
        if key in only:
            chosen = {vocab._canonical_method(m) for m in only[key]}
            cfg[key] = [v for v in cfg[key] if v in chosen]
    if "controls" in only:
        cfg["controls"] = dict(cfg["controls"] or {})
        kinds = cfg["controls"].get("kinds", [])
        cfg["controls"]["kinds"] = [k for k in kinds if k in only["controls"]]
    return cfg


def _run_pretrained(cfg: dict, place: dict, out: Path, **kw) -> None:
    """Run (or resume) both stages of the part of the study that ``only`` selects."""
    from ..attention.pretrained import load_pretrained_classifier
    from ..workbench.sweeps import grid_points, run_key, run_sweep

    data_dir, model_dir = place["data_dir"], str(Path(place["model_dir"]).resolve())
    stages = tuple(place["only"].get("stages", ("softmax", "linearized")))
    record, cfg = cfg, _only(cfg, place["only"])
    enc = load_pretrained_classifier(model_dir)[0].encoder.config  # refuses a bad folder
    d_h, riesz = enc.hidden_size // enc.num_attention_heads, cfg[_COULOMB]["riesz_s"]
    if "coulomb-distilled" in cfg["methods"] and riesz >= d_h:  # integrable in d_h dimensions
        raise InputError(f"{_COULOMB}.riesz_s must be in (-1, d_h = {d_h}), got {riesz!r}")
    # what a run computes from: the grid's own lists (seeds, features, methods, controls) and
    # the labels stay out, so extending a grid never recomputes the runs already done; each
    # data set is its own sweep, keyed by its own entry, so adding a data set changes nothing
    base = {k: v for k, v in cfg.items() if k not in _GRID_ONLY}
    fixed, ones = {}, {}
    for ds in cfg["datasets"]:  # every split loaded here: a missing file refused before work
        one = dict(base, datasets=[{k: v for k, v in ds.items() if k not in _DATASET_GRID_ONLY}])
        data_id, model_id = text_data.input_fingerprints(one["datasets"], data_dir, model_dir)
        fixed[ds["name"]] = dict(
            config=json.dumps(one, sort_keys=True), data_id=data_id, model_id=model_id
        )
        ones[ds["name"]] = one
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(record, indent=1))
    context = dict(data_dir=str(Path(data_dir).resolve()), model_dir=model_dir)
    context.update(out_dir=str(out.resolve()), device=place["device"])
    funcs = {"softmax": run_softmax, "linearized": run_linearized}
    for ds in cfg["datasets"]:
        seeds = list(ds.get("seeds", cfg["seeds"]))  # its own (fewer: a costly one)
        # recorded names: the runs of hedgehog-loss keep their earlier key; a method with its
        # own settings table runs in its own sweep (folder linearized-<method>), keyed by the
        # shared configuration and that table
        own = {m: [] for m in vocab.METHOD_SETTINGS}
        variants = []
        for v in vocab.pretrained_variants(cfg, ds):
            own.get(vocab.split_variant(v)[0], variants).append(vocab.recorded_variant(v))
        grids = {"softmax": {"dataset": [ds["name"]], "seed": seeds}}
        grids["linearized"] = dict(grids["softmax"], variant=variants)
        sweeps = {"softmax": fixed[ds["name"]], "linearized": fixed[ds["name"]]}
        for m, table in vocab.METHOD_SETTINGS.items():
            one = json.dumps(dict(ones[ds["name"]], **{table: cfg[table]}), sort_keys=True)
            sweeps[f"linearized-{m}"] = dict(fixed[ds["name"]], config=one)
            grids[f"linearized-{m}"] = dict(grids["softmax"], variant=own[m])
        # a finished stage-1 run whose checkpoint is gone (a clone: checkpoints are not kept
        # with the results) is set aside and recomputed, so that stage 2 finds its start
        for point in grid_points(grids["softmax"]) if "linearized" in stages else []:
            path = out / "softmax" / "runs"
            path /= f"{run_key(point, settings_digest(run_softmax, fixed[ds['name']]))}.nc"
            if not _checkpoint(out, point["dataset"], point["seed"]).is_file() and path.is_file():
                (path.parent / "set_aside").mkdir(exist_ok=True)
                path.replace(path.parent / "set_aside" / f"{path.name}.no-checkpoint")
        # stage 2 starts from stage 1's checkpoints: stage 1 is always brought up to date
        stage2 = [s for s in sweeps if s != "softmax" and grids[s]["variant"]]
        for stage in ["softmax"] + (stage2 if "linearized" in stages else []):
            func = funcs[stage.split("-")[0]]
            # recorded before the sweep runs, so that a report made while it runs shows the
            # runs it has finished (the digest depends on the function and fixed inputs only)
            _record_current(out / stage, ds["name"], func, sweeps[stage])
            log = _notes_of_dataset(out / stage, ds["name"])
            kw.update(fixed=sweeps[stage], log=log, context=context)
            run_sweep(func, grids[stage], out / stage, **kw)


# --- the run functions, keyed under the names their recorded runs have ----------------------------
run_variant = KeyedAs(_run_variant, "meanfield.studies.scratch_nlp.run_variant")
run_baseline = KeyedAs(_run_baseline, "meanfield.studies.scratch_nlp.run_baseline")
run_softmax = KeyedAs(_run_softmax, "meanfield.studies.pretrained_nlp.run_softmax")
run_linearized = KeyedAs(_run_linearized, "meanfield.studies.pretrained_nlp.run_linearized")

# --- the runner's interface -----------------------------------------------------------------------
#: the settings that say where and what part, never part of a run's key
_PLACE = {"encoder": "scratch", "data_dir": None, "model_dir": None, "device": "cpu"}
_ONLY = ("datasets", "seeds", "features", "methods", "controls", "stages")


def _split(settings: dict) -> tuple[dict, dict]:
    cfg = {k: v for k, v in settings.items() if k not in _PLACE and k != "only"}
    place = {k: settings.get(k, v) for k, v in _PLACE.items()}
    place["only"] = settings.get("only") or {}
    return copy.deepcopy(cfg), place


def check_config(settings: dict) -> dict:
    """The complete, checked settings of an NLP study before any work: unknown keys refused
    naming the nearest, every value checked (model, training, Phase A by what they configure).

    Parameters
    ----------
    settings : dict
        A preset's settings less ``type`` and ``study``: ``encoder`` (``"scratch"``, the
        default, or ``"pretrained"``), its study's settings, ``data_dir``, ``model_dir``,
        ``device``, ``only`` (module notes).

    Returns
    -------
    dict
        Every setting with its default filled in.

    Raises
    ------
    meanfield.errors.InputError
        An unknown key or a value out of range, named.

    See Also
    --------
    run_study : computes the study these settings describe.
    PRETRAINED_SETTINGS, SCRATCH_SETTINGS : the declared settings (names, types, ranges).

    Examples
    --------
    >>> check_config({"datasets": [{"name": "rt", "task": "sst2"}], "noise": {"rte": 0.5}})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'noise.rte' (did you mean 'noise.rate'?)
    """
    from .._validation import check_choice, check_device

    if not isinstance(settings, dict):
        raise InputError(f"settings must be a mapping, got {settings!r}")
    cfg, place = _split(settings)
    check_choice("encoder", place["encoder"], tuple(_QUESTION))
    pretrained = place["encoder"] == "pretrained"
    cfg = (PRETRAINED_SETTINGS if pretrained else SCRATCH_SETTINGS).wrapper(**cfg)
    if not cfg["datasets"]:
        raise InputError("datasets must be a non-empty list of data sets to run")
    for key in ("data_dir", "model_dir"):
        if place[key] is not None and not isinstance(place[key], str):
            raise InputError(f"{key} must be a folder's path (a string), got {place[key]!r}")
    if pretrained and place["model_dir"] is None:
        raise InputError("model_dir must name the pretrained model's folder (--set model_dir=...)")
    place["device"] = check_device("device", place["device"])
    only = place["only"]
    if not isinstance(only, dict):
        raise InputError(f"only must be a table of {', '.join(_ONLY)}, got {only!r}")
    allowed = _ONLY if pretrained else ("datasets",)
    for k, v in only.items():
        if k not in allowed:
            raise unknown_key("only.", k, allowed)
        if not isinstance(v, list):
            raise InputError(f"only.{k} must be a list, got {v!r}")
    seeds = sorted({s for d in cfg["datasets"] for s in d.get("seeds", cfg["seeds"])})
    full = dict(datasets=[d["name"] for d in cfg["datasets"]], seeds=seeds,
                features=cfg["features"], methods=cfg.get("methods", []),
                controls=(cfg.get("controls") or {}).get("kinds", []),
                stages=["softmax", "linearized"])  # fmt: skip
    for k, v in only.items():
        if bad := [x for x in v if vocab._canonical_method(x) not in full[k]]:
            raise InputError(f"only.{k}: {bad} not in the configuration's {full[k]}")
    return {**cfg, **place}


def run_study(
    settings: dict,
    out,
    *,
    n_workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
) -> None:
    """Compute or resume (finished runs reused) the NLP study in ``out``, then write its reports.

    Parameters
    ----------
    settings : dict
        Settings that passed :func:`check_config`.
    out : path
        The study folder.
    n_workers : int, optional
        Threads or processes (default 1).
    scheduler : str, optional
        ``"threads"`` (default), ``"local"`` or a dask scheduler's address.
    progress : bool
        Progress bars (else the sweeps' notes come as warnings).

    Raises
    ------
    meanfield.errors.MeanfieldError
        A missing data set or model, a folder that cannot be written, a bad scheduler or
        ``n_workers``, before any work.

    See Also
    --------
    write_report : the reports alone, from the runs in a folder.
    meanfield.workbench.sweeps.run_sweep : the runner of each sweep.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.nlp import FIXTURES, check_config, load_preset, run_study
    >>> s = load_preset("nlp", "tiny")  # its data_dir is relative to the repository's root
    >>> s.update(data_dir=FIXTURES, features=["favor"], seeds=[0], baseline=False)
    >>> s["only"] = {"datasets": ["sst2"]}
    >>> out = tempfile.mkdtemp()
    >>> run_study(check_config(s), out, progress=False)
    >>> sorted(p.name for p in Path(out).glob("*.md"))[:2]
    ['claims.md', 'paired.md']
    """
    from .._validation import check_int
    from ..attention.data import resolve_data_dir
    from ..workbench.sweeps import check_scheduler

    cfg, place = _split(check_config(settings))
    place["data_dir"] = str(resolve_data_dir(place["data_dir"]))
    kw = dict(scheduler=check_scheduler(scheduler or "threads"), progress=progress)
    kw["n_workers"] = check_int("n_workers", 1 if n_workers is None else n_workers, minimum=1)
    out = writable_folder(out)
    if place["encoder"] == "scratch":
        _run_scratch(cfg, place, out, **kw)
        write_report(out, out)
    else:
        from .nlp_report import write_report as _write

        _run_pretrained(cfg, place, out, **kw)
        _write(out, out, data_dir=place["data_dir"])


def write_report(out, report_dir) -> None:
    """The reports alone of the runs in the study folder ``out``, into ``report_dir`` (run files,
    ``config.json`` never rewritten; the pretrained study's TF-IDF bars where the data is in
    ``$MEANFIELD_DATA_DIR``).

    See Also
    --------
    meanfield.studies.nlp_report.write_report : the reports, with their options.

    Examples
    --------
    >>> import json, tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> _ = (out / "config.json").write_text(json.dumps({"name": "x", "datasets": []}))
    >>> write_report(out, out / "report")
    >>> sorted(p.name for p in (out / "report").iterdir())
    ['readme_tables.md', 'report.md', 'results.csv']
    """
    from .nlp_report import write_report as _write

    data_dir = os.environ.get("MEANFIELD_DATA_DIR")
    _write(out, report_dir, data_dir=data_dir if data_dir and Path(data_dir).is_dir() else None)
