"""The from-scratch kernel-attention study: does Kernel-X beat vanilla X? On the sweep runner.

The study of ``paper_repro/nlp/README.md``: a small Transformer trained from scratch on
Rotten Tomatoes, SST-2 and QQP, with softmax attention or a random-feature map X (FAVOR,
PORF-softplus, softmaxfeat), the feature matrix ``Omega`` drawn from the prior (vanilla X) or
learned by Phase A (Kernel-X), and controls. Each data set is one sweep of
:func:`meanfield.workbench.sweeps.run_sweep` over (seed, Q = K, variant), so every run

* is keyed by the whole configuration that computes it (data, tokenizer, model, training,
  Phase A, noise, device, data folder, package version): a rerun with another setting computes
  new runs under new keys and never reports stale ones;
* is written when it finishes; a rerun resumes; a corrupt run file is set aside and recomputed;
* runs on dask: threads in this process, a ``LocalCluster`` (``scheduler="local"``) or a
  cluster's address.

One run (:func:`run_variant`, one data set, seed, Q = K setting and variant):

1. **warm-up**: ``train.warmup_epochs`` epochs of cross-entropy training from the seed's
   initialisation (vanilla random ``Omega``). It is a deterministic function of the run's
   configuration, so every variant of a (data set, seed, Q = K, X) starts from the same
   warmed-up weights (a process computing several keeps the last few in memory);
2. the variant's **branch**: ``softmax`` / ``vanilla``: nothing; ``kernel``: Phase A
   (:func:`meanfield.attention.phases.phase_a`, settings ``phase_a``); controls: ``redraw``
   (a fresh prior ``Omega``), ``priornorms`` (Phase A's directions with the prior row norms),
   ``lam0`` (Phase A without repulsion), ``atinit`` (Phase A on the *initial* model, then the
   warm-up);
3. **Phase B**: every parameter but ``Omega`` trained to early stopping on the validation log
   loss (a stratified split of the training data, shared by all runs of a data set), at most
   ``train.max_epochs``, best parameters restored;

then evaluated on the clean evaluation split and on a token-noised copy of it. A TF-IDF +
logistic-regression baseline (:func:`run_baseline`, one sweep per data set) trains on the same
examples. Reports: :mod:`meanfield.studies.scratch_nlp_report`.

Output folder: ``config.json`` (the configuration last run, with each sweep's digest and
grid: the report shows only those runs), ``<data set>/runs/*.nc`` (one file per run; its
``record`` attribute holds every number of the run as JSON), ``<data set>/baseline/``.

Examples
--------
>>> import json
>>> from meanfield.studies.scratch_nlp import TINY_CONFIG, check_config, variants
>>> cfg = check_config(json.load(open(TINY_CONFIG)))
>>> variants(cfg, "sst2")
['softmax', 'vanilla-favor', 'kernel-favor', 'vanilla-porf-softplus', 'kernel-porf-softplus', \
'vanilla-softmaxfeat', 'kernel-softmaxfeat']
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
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

__all__ = [
    "FEATURE_LABEL",
    "CONTROLS",
    "check_config",
    "variants",
    "variant_label",
    "sweep_specs",
    "check_data",
    "record_dataset",
    "run_variant",
    "run_baseline",
    "run_study",
    "config_differences",
    "study_record",
    "clear_caches",
    "study_config_defaults",
]

FEATURE_LABEL = {
    "favor": "FAVOR",
    "porf": "PORF",
    "porf-softplus": "PORF-softplus",
    "softmaxfeat": "softmaxfeat",
}
BRANCHES = ("vanilla", "kernel")
CONTROLS = ("redraw", "priornorms", "lam0", "atinit")
BRANCH_LABEL = {
    "vanilla": "vanilla {X}",
    "kernel": "Kernel-{X}",
    "redraw": "control: redraw Ω ({X})",
    "priornorms": "control: Phase A directions, prior norms ({X})",
    "lam0": "control: Phase A, λ = 0 ({X})",
    "atinit": "control: Phase A at initialisation ({X})",
}
#: the metrics stored as data variables of each run file (everything is in its ``record``)
RUN_METRICS = (
    "accuracy",
    "mcc",
    "ece",
    "log_loss",
    "brier",
    "noisy_accuracy",
    "noisy_mcc",
    "noisy_ece",
    "noisy_log_loss",
    "noisy_brier",
    "wall_seconds",
)


def _phase_a_defaults() -> dict:
    from ..attention.phases import PhaseASettings

    return {
        f.name: f.default
        for f in dataclasses.fields(PhaseASettings)
        if f.name != "seed"  # each run's seed
    }


#: the settings a configuration may give, with their defaults (unknown keys are refused);
#: ``phase_a`` takes every field of :class:`meanfield.attention.phases.PhaseASettings` but
#: ``seed``, with its defaults
study_config_defaults = {
    "name": "study",
    "description": "",
    "datasets": [],
    "features": ["favor", "porf-softplus", "softmaxfeat"],
    "tie_qk": [False],
    "seeds": [0],
    "controls": {"feature": "favor", "datasets": [], "kinds": list(CONTROLS)},
    "noise": {"rate": 0.1, "seed": 777},
    "validation_fraction": 0.1,
    "data_seed": 12345,
    "threads": 1,
    "baseline": True,
    "tokenizer": {"vocab_size": 8000, "min_frequency": 2},
    "model": {
        "d_model": 64,
        "n_heads": 4,
        "n_layers": 2,
        "d_ff": 128,
        "max_length": 64,
        "dropout": 0.1,
        "n_features": 32,
        "eps": 1e-6,
    },
    "train": {
        "batch_size": 32,
        "lr": 2e-3,
        "weight_decay": 0.01,
        "warmup_epochs": 1.0,
        "max_epochs": 10.0,
        "patience": 3,
        "eval_every": 0.5,
    },
    "phase_a": _phase_a_defaults(),
}
#: the keys of one entry of ``datasets`` with their defaults (``name`` and ``task`` required;
#: ``seeds`` and ``tie_qk`` default to the study's)
_DATASET_DEFAULTS = {
    "name": None,
    "task": None,
    "source": "auto",
    "train_split": "train",
    "eval_split": "test",
    "max_train": None,
    "max_eval": None,
    "seeds": None,
    "tie_qk": None,
}
#: keys that only shape the grid or the report: they stay out of the runs' keys, so extending
#: seeds, features or controls never recomputes the runs already done
_NOT_IN_KEY = ("name", "description", "datasets", "features", "tie_qk", "seeds", "controls")
_NOT_IN_KEY += ("threads", "baseline")  # one torch thread per run; whether to run the bar
_ROOT = Path(__file__).resolve().parents[2]
#: the repository's fixture data and the tiny configuration (used by the examples and tests)
FIXTURES = str(_ROOT / "tests" / "fixtures" / "nlp")
TINY_CONFIG = str(_ROOT / "paper_repro" / "nlp" / "configs" / "tiny.json")


# ---------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------
def _unknown(where: str, key, allowed) -> Exception:
    from ..errors import InputError

    near = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
    hint = f" (did you mean {where + near[0]!r}?)" if near else ""
    return InputError(f"unknown configuration key {where + str(key)!r}{hint}")


def _merge(given, defaults: dict, where: str) -> dict:
    """``defaults`` updated by ``given``, recursively; unknown keys refused naming the
    nearest (with its full dotted path)."""
    from ..errors import InputError

    if not isinstance(given, dict):
        raise InputError(f"configuration key {where[:-1]!r} must be a mapping, got {given!r}")
    out = copy.deepcopy(defaults)
    for k, v in given.items():
        if k not in defaults:
            raise _unknown(where, k, defaults)
        if isinstance(defaults[k], dict):
            v = _merge(v, defaults[k], f"{where}{k}.")
        out[k] = v
    return out


def _check_list(name, values, kind, *, distinct=True) -> list:
    from ..errors import InputError

    if not isinstance(values, list) or not values:
        raise InputError(f"{name} must be a non-empty list, got {values!r}")
    if not all(isinstance(v, kind) and not (kind is int and isinstance(v, bool)) for v in values):
        raise InputError(f"{name} must hold {kind.__name__} values, got {values!r}")
    if distinct and len(set(values)) != len(values):
        raise InputError(f"{name} must hold distinct values, got {values!r}")
    return values


def check_config(cfg: dict) -> dict:
    """The study configuration with every default filled in, checked before any work.

    Unknown keys, at any depth (``noise.rte``, ``datasets[0].max_trian``), are refused with
    the nearest known key; the model, training and Phase A settings are checked by the
    objects they configure.

    Parameters
    ----------
    cfg : dict
        The JSON configuration (see ``paper_repro/nlp/configs/``).

    Returns
    -------
    dict
        The resolved configuration: every key of :data:`study_config_defaults`, each data set
        with its ``seeds`` and ``tie_qk`` resolved.

    Raises
    ------
    meanfield.errors.InputError
        An unknown key, or a value out of range (the message names it).

    Examples
    --------
    >>> from meanfield.studies.scratch_nlp import check_config
    >>> ds = {"name": "rt", "task": "rotten_tomatoes"}
    >>> check_config({"datasets": [ds], "validation_fractoin": 0.2})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'validation_fractoin' (did you mean \
'validation_fraction'?)
    >>> check_config({"datasets": [ds], "noise": {"rte": 0.5}})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'noise.rte' (did you mean 'noise.rate'?)
    >>> check_config({"datasets": [ds]})["datasets"][0]["seeds"]
    [0]
    """
    from ..errors import InputError

    out = _merge(cfg, study_config_defaults, "")
    _check_list("features", out["features"], str)
    for f in out["features"]:
        if f not in FEATURE_LABEL:
            raise InputError(f"unknown feature {f!r}; choose from {list(FEATURE_LABEL)}")
    _check_list("seeds", out["seeds"], int)
    _check_list("tie_qk", out["tie_qk"], bool)
    if not isinstance(out["datasets"], list) or not out["datasets"]:
        raise InputError("datasets must list at least one data set")
    datasets = []
    for i, ds in enumerate(out["datasets"]):
        ds = _merge(ds, _DATASET_DEFAULTS, f"datasets[{i}].")
        if not ds["name"] or not ds["task"]:
            raise InputError(f"datasets[{i}] needs a 'name' and a 'task', got {ds}")
        ds["seeds"] = list(_check_list(f"datasets[{i}].seeds", ds["seeds"] or out["seeds"], int))
        ds["tie_qk"] = list(
            _check_list(f"datasets[{i}].tie_qk", ds["tie_qk"] or out["tie_qk"], bool)
        )
        datasets.append(ds)
    out["datasets"] = datasets
    names = [d["name"] for d in datasets]
    if len(set(names)) != len(names):
        raise InputError(f"datasets must have distinct names, got {names}")
    _check_controls(out["controls"], out["features"], names)
    _check_settings(out)
    return out


def _check_controls(ctl: dict, features: list, names: list) -> None:
    from ..errors import InputError

    bad = [k for k in ctl["kinds"] if k not in CONTROLS]
    if bad:
        raise InputError(f"unknown controls {bad}; choose from {list(CONTROLS)}")
    bad = [d for d in ctl["datasets"] if d not in names]
    if bad:
        raise InputError(f"controls.datasets {bad} not among the data sets {names}")
    if ctl["datasets"] and ctl["kinds"] and ctl["feature"] not in features:
        raise InputError(f"controls.feature must be one of {features}, got {ctl['feature']!r}")


def _check_settings(cfg: dict) -> None:
    """The values each run would refuse, refused now (before any work)."""
    from .._validation import check_int, check_positive
    from ..attention.data import TASKS
    from ..attention.model import TransformerClassifier
    from ..attention.phases import PhaseASettings
    from ..attention.training import TrainSettings
    from ..errors import InputError

    for ds in cfg["datasets"]:
        if ds["task"] not in TASKS:
            raise InputError(f"datasets: unknown task {ds['task']!r}; choose from {list(TASKS)}")
    rate = cfg["noise"]["rate"]
    if not isinstance(rate, int | float) or not 0.0 <= rate < 1.0:
        raise InputError(f"noise.rate must be in [0, 1), got {rate!r}")
    frac = cfg["validation_fraction"]
    if not isinstance(frac, int | float) or not 0.0 < frac < 1.0:
        raise InputError(f"validation_fraction must be in (0, 1), got {frac!r}")
    check_int("tokenizer.vocab_size", cfg["tokenizer"]["vocab_size"], minimum=10)
    check_int("tokenizer.min_frequency", cfg["tokenizer"]["min_frequency"])
    try:
        for f in ["softmax"] + cfg["features"]:
            TransformerClassifier(16, attention=f, **cfg["model"])
    except (TypeError, ValueError) as err:
        raise InputError(f"model: {err}") from None
    tr = cfg["train"]
    check_positive("train.warmup_epochs", tr["warmup_epochs"])
    check_positive("train.max_epochs", tr["max_epochs"])
    check_int("train.patience", tr["patience"])
    check_positive("train.eval_every", tr["eval_every"])
    try:
        TrainSettings(**{k: tr[k] for k in ("batch_size", "lr", "weight_decay")})
    except (TypeError, ValueError) as err:
        raise InputError(f"train: {err}") from None
    try:
        PhaseASettings(**cfg["phase_a"])
    except (TypeError, ValueError) as err:
        raise InputError(f"phase_a: {err}") from None


def variants(cfg: dict, dataset: str) -> list[str]:
    """The variants of one data set, in table order: ``softmax``, then per feature map X
    ``vanilla-X``, ``kernel-X`` and the controls of X on this data set.

    Parameters
    ----------
    cfg : dict
        A configuration from :func:`check_config`.
    dataset : str
        A data set's name.

    Returns
    -------
    list of str

    Examples
    --------
    >>> import json
    >>> from meanfield.studies.scratch_nlp import TINY_CONFIG, check_config, variants
    >>> cfg = check_config(json.load(open(TINY_CONFIG)))
    >>> variants(cfg, "rotten_tomatoes")[:5]
    ['softmax', 'vanilla-favor', 'kernel-favor', 'redraw-favor', 'priornorms-favor']
    """
    ctl = cfg["controls"]
    out = ["softmax"]
    for f in cfg["features"]:
        out += [f"{b}-{f}" for b in BRANCHES]
        if f == ctl["feature"] and dataset in ctl["datasets"]:
            out += [f"{k}-{f}" for k in ctl["kinds"]]
    return out


def _split_variant(variant: str) -> tuple[str | None, str]:
    """``(feature, branch)`` of a variant name (``(None, "softmax")`` for softmax)."""
    from ..errors import InputError

    if variant == "softmax":
        return None, "softmax"
    branch, _, feature = variant.partition("-")
    if branch not in BRANCHES + CONTROLS or feature not in FEATURE_LABEL:
        raise InputError(f"unknown variant {variant!r}")
    return feature, branch


def variant_label(variant: str) -> str:
    """The name a report gives a variant.

    Parameters
    ----------
    variant : str
        A name of :func:`variants`.

    Returns
    -------
    str

    Examples
    --------
    >>> from meanfield.studies.scratch_nlp import variant_label
    >>> variant_label("kernel-favor"), variant_label("lam0-favor")
    ('Kernel-FAVOR', 'control: Phase A, λ = 0 (FAVOR)')
    """
    feature, branch = _split_variant(variant)
    if feature is None:
        return "softmax"
    return BRANCH_LABEL[branch].format(X=FEATURE_LABEL[feature])


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _unflatten(flat: dict) -> dict:
    out: dict = {}
    for k, v in flat.items():
        node = out
        *head, last = k.split(".")
        for h in head:
            node = node.setdefault(h, {})
        node[last] = v
    return out


def _data_settings(cfg: dict, dataset: str) -> dict:
    """What the data a run sees is made of: the data set's entry (its grid lists left out),
    the validation split and the noise."""
    ds = next(d for d in cfg["datasets"] if d["name"] == dataset)
    data = {k: v for k, v in ds.items() if k not in ("name", "seeds", "tie_qk")}
    return {
        "data": data,
        "validation_fraction": cfg["validation_fraction"],
        "data_seed": cfg["data_seed"],
    }


def _run_settings(cfg: dict, dataset: str) -> dict:
    """A run's settings, flattened (``train.lr``...): so each is a fixed parameter of the
    sweep, and a rerun's notes name the ones that changed."""
    rest = {k: v for k, v in cfg.items() if k not in _NOT_IN_KEY}
    return _flatten({**rest, **_data_settings(cfg, dataset)})


def config_differences(old: dict, new: dict) -> list[str]:
    """``key: old -> new`` for every setting where two configurations differ (dotted keys).

    Parameters
    ----------
    old, new : dict
        Two configurations from :func:`check_config`.

    Returns
    -------
    list of str

    Examples
    --------
    >>> from meanfield.studies.scratch_nlp import config_differences
    >>> config_differences({"train": {"lr": 0.002}}, {"train": {"lr": 0.003}})
    ['train.lr: 0.002 -> 0.003']
    """

    def flat(c):
        c = dict(c)
        ds = c.pop("datasets", [])
        out = _flatten(c)
        for d in ds:
            out.update(_flatten(d, f"datasets[{d.get('name')}]."))
        return out

    a, b = flat(old), flat(new)
    return [
        f"{k}: {a.get(k, '<unset>')!r} -> {b.get(k, '<unset>')!r}"
        for k in sorted(set(a) | set(b))
        if a.get(k, "<unset>") != b.get(k, "<unset>")
    ]


def _digest(func, fixed: dict, version: str | None = None) -> tuple[str, dict]:
    from ..workbench.sweeps import configuration_digest, sweep_configuration

    config = sweep_configuration(func, fixed)
    if version is not None:  # the version a converted run was computed with
        config["meanfield_version"] = version
    return configuration_digest(config), config


def sweep_specs(cfg: dict, data_dir, device: str = "cpu", *, version: str | None = None) -> dict:
    """Each data set's two sweeps: folder, grid, fixed parameters and configuration digest.

    What :func:`run_study` runs and what the report reads (the runs of these digests only).

    Parameters
    ----------
    cfg : dict
        A configuration from :func:`check_config`.
    data_dir : path
        The data folder (its resolved path is part of the key, as in
        :mod:`meanfield.studies.pretrained_nlp`).
    device : str
        The torch device (part of the key).
    version : str, optional
        The package version to key by (default the installed one; the converter of recorded
        results passes the version they were computed with).

    Returns
    -------
    dict
        Data set name -> ``{"variants": spec, "baseline": spec}``, each spec a dict with
        ``folder`` (relative to the study folder), ``grid``, ``fixed``, ``digest`` and
        ``configuration`` (:func:`meanfield.workbench.sweeps.sweep_configuration`).

    Examples
    --------
    >>> import json
    >>> from meanfield.studies.scratch_nlp import FIXTURES, TINY_CONFIG, check_config, sweep_specs
    >>> cfg = check_config(json.load(open(TINY_CONFIG)))
    >>> a = sweep_specs(cfg, FIXTURES)["sst2"]["variants"]
    >>> cfg["train"]["lr"] *= 2
    >>> b = sweep_specs(cfg, FIXTURES)["sst2"]["variants"]
    >>> a["folder"], list(a["grid"]), a["digest"] != b["digest"]
    ('sst2', ['seed', 'tie_qk', 'variant'], True)
    """
    data_dir = str(Path(data_dir).expanduser().resolve())
    out = {}
    for ds in cfg["datasets"]:
        name = ds["name"]
        fixed = {"dataset": name, "data_dir": data_dir, "device": str(device)}
        fixed.update(_run_settings(cfg, name))
        grid = {
            "seed": list(ds["seeds"]),
            "tie_qk": list(ds["tie_qk"]),
            "variant": variants(cfg, name),
        }
        digest, config = _digest(run_variant, fixed, version)
        bfixed = {"data_dir": data_dir, **_flatten(_data_settings(cfg, name))}
        bdigest, bconfig = _digest(run_baseline, bfixed, version)
        out[name] = {
            "variants": dict(
                folder=name, grid=grid, fixed=fixed, digest=digest, configuration=config
            ),
            "baseline": dict(
                folder=f"{name}/baseline",
                grid={"dataset": [name]},
                fixed=bfixed,
                digest=bdigest,
                configuration=bconfig,
            ),
        }
    return out


# ---------------------------------------------------------------------------------------
# data (prepared once per process and data set)
# ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4)
def _raw_splits(data_dir: str, data_json: str):
    """The training and evaluation splits of a data set, subsampled (deterministic)."""
    from ..attention.data import load_split

    s = json.loads(data_json)
    d = s["data"]
    tr = load_split(d["task"], d["train_split"], data_dir, source=d["source"])
    ev = load_split(d["task"], d["eval_split"], data_dir, source=d["source"])
    rng = np.random.default_rng(s["data_seed"])
    if d["max_train"] and len(tr) > d["max_train"]:
        tr = tr.subset(np.sort(rng.permutation(len(tr))[: d["max_train"]]))
    if d["max_eval"] and len(ev) > d["max_eval"]:
        ev = ev.subset(np.sort(rng.permutation(len(ev))[: d["max_eval"]]))
    return tr, ev


def _train_indices(tr, s: dict) -> np.ndarray:
    """The training examples (the stratified validation split, shared by every run and the
    baseline, left out)."""
    from ..attention.training import validation_indices

    val_idx = validation_indices(tr.labels, s["validation_fraction"], s["data_seed"])
    return np.setdiff1d(np.arange(len(tr)), val_idx), val_idx


@functools.lru_cache(maxsize=4)
def _prepared(
    data_dir: str, data_json: str, tokenizer_json: str, max_length: int, noise_json: str
) -> dict:
    """Tokenised splits of one data set (tokenizer trained on its training split)."""
    from ..attention.noise import perturb_tokens
    from ..attention.tokenizer import TextTokenizer
    from ..attention.training import encode

    s = json.loads(data_json)
    tr, ev = _raw_splits(data_dir, data_json)
    texts = list(tr.text_a) + (list(tr.text_b) if tr.is_pair else [])
    tok = TextTokenizer.train(texts, **json.loads(tokenizer_json))
    train_idx, val_idx = _train_indices(tr, s)
    full = encode(tok, tr, max_length)
    evald = encode(tok, ev, max_length)
    noise = json.loads(noise_json)
    return {
        "train": full.subset(train_idx),
        "val": full.subset(val_idx),
        "eval": evald,
        "eval_noisy": perturb_tokens(evald, noise["rate"], tok.vocab_size, noise["seed"]),
        "eval_labels": np.asarray(ev.labels),
        "pair": tr.is_pair,
        "vocab_size": tok.vocab_size,
        "n_train": len(train_idx),
        "n_val": len(val_idx),
        "n_eval": len(evald),
        "eval_truncated": float(np.mean(evald.lengths.numpy() >= max_length)),
    }


def _prepare(data_dir: str, s: dict) -> dict:
    return _prepared(
        data_dir,
        json.dumps({k: s[k] for k in ("data", "validation_fraction", "data_seed")}, sort_keys=True),
        json.dumps(s["tokenizer"], sort_keys=True),
        int(s["model"]["max_length"]),
        json.dumps(s["noise"], sort_keys=True),
    )


def check_data(cfg: dict, data_dir, datasets=None) -> dict:
    """Load the splits of each data set (before any work); their sizes.

    Parameters
    ----------
    cfg : dict
        A configuration from :func:`check_config`.
    data_dir : path
        The data folder.
    datasets : list of str, optional
        Only these data sets (default all).

    Returns
    -------
    dict
        Name -> ``(n_train, n_eval)`` after subsampling (the validation split included).

    Raises
    ------
    FileNotFoundError, meanfield.errors.DataFileError
        A split is missing or unreadable.

    Examples
    --------
    >>> import json
    >>> from meanfield.studies.scratch_nlp import FIXTURES, TINY_CONFIG, check_config, check_data
    >>> check_data(check_config(json.load(open(TINY_CONFIG))), FIXTURES, ["rotten_tomatoes"])
    {'rotten_tomatoes': (16, 2)}
    """
    data_dir = str(Path(data_dir).expanduser().resolve())
    out = {}
    for ds in cfg["datasets"]:
        if datasets is None or ds["name"] in datasets:
            s = _data_settings(cfg, ds["name"])
            tr, ev = _raw_splits(data_dir, json.dumps(s, sort_keys=True))
            out[ds["name"]] = (len(tr), len(ev))
    return out


# ---------------------------------------------------------------------------------------
# one run
# ---------------------------------------------------------------------------------------
def record_dataset(rec: dict) -> xr.Dataset:
    """One run's record as the dataset a run file holds.

    The metrics of :data:`RUN_METRICS` (those present) are scalar data variables; the whole
    record (training histories and Phase A's per-layer diagnostics included) is the JSON
    attribute ``record``.

    Parameters
    ----------
    rec : dict
        The run's numbers and labels.

    Returns
    -------
    xarray.Dataset

    Examples
    --------
    >>> import json
    >>> from meanfield.studies.scratch_nlp import record_dataset
    >>> ds = record_dataset({"accuracy": 0.75, "variant": "softmax", "history": [[1, 0.5]]})
    >>> float(ds["accuracy"]), json.loads(ds.attrs["record"])["history"]
    (0.75, [[1, 0.5]])
    """
    data = {k: ((), float(rec[k])) for k in RUN_METRICS if k in rec}
    ds = xr.Dataset(data)
    ds.attrs.update(
        {k: str(rec[k]) for k in ("dataset", "variant", "feature", "branch", "device") if k in rec}
    )
    ds.attrs.update(
        record=json.dumps(rec, default=float),
        package_version=__version__,
        torch_version=torch.__version__,
    )
    return ds


def _train_info(prefix: str, info: dict) -> dict:
    keys = ("steps", "epochs", "best_epoch", "best_val_loss", "stopped_early", "seconds")
    out = {f"{prefix}_{k}": info[k] for k in keys}
    out[f"{prefix}_history"] = [list(h) for h in info["history"]]
    return out


def _evaluate(model, prep) -> dict:
    from ..attention.metrics import classification_metrics
    from ..attention.training import predict_proba

    rec = classification_metrics(prep["eval_labels"], predict_proba(model, prep["eval"]))
    noisy = classification_metrics(prep["eval_labels"], predict_proba(model, prep["eval_noisy"]))
    rec.update({f"noisy_{k}": v for k, v in noisy.items()})
    return rec


def _new_model(prep, s, feature, qk, seed, device):
    from ..attention.model import TransformerClassifier

    return TransformerClassifier(
        prep["vocab_size"],
        attention="softmax" if feature is None else feature,
        tie_qk=qk,
        pair=prep["pair"],
        seed=seed,
        **s["model"],
    ).to(device)


#: warmed-up states kept by this process (key -> (state, training flag, info)): the variants
#: of one (data set, seed, Q = K, X) share one warm-up when one process runs them
_WARM: OrderedDict = OrderedDict()
_WARM_LOCK = threading.Lock()
_WARM_KEEP = 4


def _warm_up(model, prep, s, seed) -> dict:
    from ..attention.training import train

    tr = s["train"]
    return train(
        model,
        prep["train"],
        epochs=tr["warmup_epochs"],
        seed=seed,
        batch_size=tr["batch_size"],
        lr=tr["lr"],
        weight_decay=tr["weight_decay"],
    )


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


def clear_caches() -> None:
    """Forget the data and warm-ups this process keeps (tests; memory).

    Examples
    --------
    >>> from meanfield.studies.scratch_nlp import clear_caches
    >>> clear_caches()
    """
    _raw_splits.cache_clear()
    _prepared.cache_clear()
    with _WARM_LOCK:
        _WARM.clear()


def run_variant(
    seed: int,
    tie_qk: bool,
    variant: str,
    *,
    dataset: str,
    data_dir: str,
    device: str = "cpu",
    **settings,
) -> xr.Dataset:
    """One run of the study: warm-up, the variant's branch, Phase B, evaluation.

    Parameters
    ----------
    seed : int
        Seeds the initialisation, the warm-up and Phase A; Phase B's data order is seeded by
        ``seed + 7919`` (the same for every variant: differences are paired by seed).
    tie_qk : bool
        Queries equal keys.
    variant : str
        A name of :func:`variants`.
    dataset : str
        The data set's name (recorded).
    data_dir : str
        The data folder.
    device : str
        The torch device.
    **settings
        The flattened configuration of the run (``model.d_model``, ``train.lr``,
        ``phase_a.tilt``, ``data.task``...), as :func:`sweep_specs` gives them.

    Returns
    -------
    xarray.Dataset
        :func:`record_dataset` of the run's record.

    Examples
    --------
    :func:`run_study` maps it over seeds, Q = K settings and variants (each keyed by the whole
    configuration):

    >>> from meanfield.studies.scratch_nlp import run_variant, variants
    >>> callable(run_variant)
    True
    """
    from ..attention.phases import phase_a, phase_b

    s = _unflatten(settings)
    feature, branch = _split_variant(variant)
    dev = torch.device(device)
    prep = _prepare(data_dir, s)
    tr = s["train"]
    common = dict(batch_size=tr["batch_size"], lr=tr["lr"], weight_decay=tr["weight_decay"])
    stop = dict(
        validation=prep["val"],
        max_epochs=tr["max_epochs"],
        patience=tr["patience"],
        eval_every=tr["eval_every"],
    )
    pa_cfg = dict(s["phase_a"])
    res = None
    t0 = time.perf_counter()
    if branch == "atinit":
        model = _new_model(prep, s, feature, tie_qk, seed, dev)
        res = phase_a(model, prep["train"], seed=seed, **pa_cfg)
        info_w = _warm_up(model, prep, s, seed)
        shared = 0.0
    else:
        key = json.dumps(
            [dataset, data_dir, device, seed, tie_qk, feature, settings],
            sort_keys=True,
            default=str,
        )
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
    rec = {
        "dataset": dataset,
        "variant": variant_label(variant),
        "feature": feature or "softmax",
        "branch": branch,
        "tie_qk": bool(tie_qk),
        "seed": int(seed),
        "n_train": prep["n_train"],
        "n_val": prep["n_val"],
        "n_eval": prep["n_eval"],
        "eval_truncated": prep["eval_truncated"],
        "device": str(dev),
    }
    rec.update(_train_info("warmup", info_w))
    if res is not None:
        rec.update(res.summary())
    pb = phase_b(model, prep["train"], seed=seed + 7919, **common, **stop)
    rec.update(_train_info("phase_b", pb))
    rec.update(_evaluate(model, prep))
    rec["wall_seconds"] = time.perf_counter() - t0 + shared
    return record_dataset(rec)


def run_baseline(dataset: str, *, data_dir: str, **settings) -> xr.Dataset:
    """TF-IDF (1-2-grams) + logistic regression on the study's training examples.

    ``C`` by 5-fold cross-validation on the log loss, the classifier then refitted at that ``C``
    to convergence (:func:`meanfield.attention.baselines.logistic_by_cv`); pairs are represented by
    ``[|a - b|, a * b]`` of the two TF-IDF vectors (symmetric in the two questions).

    Parameters
    ----------
    dataset : str
        The data set's name (recorded).
    data_dir : str
        The data folder.
    **settings
        ``data.*``, ``validation_fraction``, ``data_seed`` (flattened, see :func:`sweep_specs`).

    Returns
    -------
    xarray.Dataset
        :func:`record_dataset` of the clean metrics, ``C``, ``n_train`` and ``seconds``.

    Examples
    --------
    >>> import json
    >>> from meanfield.studies.scratch_nlp import (FIXTURES, TINY_CONFIG, check_config,
    ...                                            run_baseline, sweep_specs)
    >>> spec = sweep_specs(check_config(json.load(open(TINY_CONFIG))), FIXTURES)
    >>> ds = run_baseline("sst2", **spec["sst2"]["baseline"]["fixed"])
    >>> 0 <= float(ds["accuracy"]) <= 1
    True
    """
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    from ..attention.baselines import logistic_by_cv
    from ..attention.metrics import classification_metrics

    s = _unflatten(settings)
    t0 = time.perf_counter()
    tr_raw, ev_raw = _raw_splits(data_dir, json.dumps(s, sort_keys=True))
    tr = tr_raw.subset(_train_indices(tr_raw, s)[0])  # the networks' training examples
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    if tr.is_pair:
        vec.fit(list(tr.text_a) + list(tr.text_b))

        def feats(d):
            a, b = vec.transform(list(d.text_a)), vec.transform(list(d.text_b))
            return sparse.hstack([abs(a - b), a.multiply(b)]).tocsr()
    else:
        vec.fit(list(tr.text_a))

        def feats(d):
            return vec.transform(list(d.text_a))

    # C by 5-fold CV on the log loss, then refitted to convergence (see attention.baselines)
    clf, C, _ = logistic_by_cv(feats(tr), np.asarray(tr.labels), [0.1, 0.3, 1, 3, 10, 30])
    rec = classification_metrics(np.asarray(ev_raw.labels), clf.predict_proba(feats(ev_raw)))
    rec.update(dataset=dataset, C=C, n_train=len(tr))
    rec["seconds"] = time.perf_counter() - t0
    return record_dataset(rec)


# ---------------------------------------------------------------------------------------
# the study
# ---------------------------------------------------------------------------------------
def _machine(device) -> str:
    return (
        f"{platform.machine()} {platform.processor()} {os.cpu_count()} cpus, "
        f"1 torch thread per run, device {device}"
    )


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(obj, indent=1, default=float))
    os.replace(tmp, path)


def study_record(cfg: dict, specs: dict, **extra) -> dict:
    """What ``config.json`` of a study folder holds: the configuration, the versions, and each
    sweep's folder, grid and digest (the report reads these runs only).

    Parameters
    ----------
    cfg : dict
        A configuration from :func:`check_config`.
    specs : dict
        :func:`sweep_specs` of it.
    **extra
        More entries (``config_file``, ``data_dir``, ``device``, ``machine``...).

    Returns
    -------
    dict

    Examples
    --------
    >>> import json
    >>> from meanfield.studies.scratch_nlp import (FIXTURES, TINY_CONFIG, check_config,
    ...                                            study_record, sweep_specs)
    >>> cfg = check_config(json.load(open(TINY_CONFIG)))
    >>> rec = study_record(cfg, sweep_specs(cfg, FIXTURES))
    >>> sorted(rec["sweeps"]["qqp"]), rec["sweeps"]["qqp"]["variants"]["grid"]["tie_qk"]
    (['baseline', 'variants'], [False, True])
    """
    sweeps = {
        name: {
            part: {k: spec[part][k] for k in ("folder", "grid", "digest")}
            for part in ("variants", "baseline")
        }
        for name, spec in specs.items()
    }
    return {
        "config": cfg,
        **extra,
        "meanfield_version": __version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "sweeps": sweeps,
    }


def _written_since(folder: Path, spec: dict, t0_ns: int) -> tuple[int, int]:
    """(runs of ``spec`` written since ``t0_ns``, runs of ``spec`` in all)."""
    from ..workbench.sweeps import grid_points, run_key

    paths = [
        folder / "runs" / f"{run_key(p, spec['digest'])}.nc" for p in grid_points(spec["grid"])
    ]
    return sum(p.is_file() and p.stat().st_mtime_ns >= t0_ns for p in paths), len(paths)


def run_study(
    cfg: dict,
    *,
    data_dir,
    out_dir,
    device: str = "cpu",
    datasets=None,
    scheduler: str = "threads",
    n_workers: int | None = 1,
    progress: bool = True,
    log=None,
    config_file: str | None = None,
) -> dict:
    """Run (or resume) the study: per data set the baseline and the variant sweeps.

    Parameters
    ----------
    cfg : dict
        The configuration (checked by :func:`check_config`).
    data_dir : path
        The data folder (``sst2/``, ``rotten_tomatoes/``, ``qqp/``).
    out_dir : path
        The study folder (resumed if it holds runs of this configuration).
    device : str
        The torch device of every run.
    datasets : list of str, optional
        Only these data sets (default all; ``config.json`` still records all of them).
    scheduler : str
        ``"threads"``, ``"local"`` (a ``LocalCluster`` of ``n_workers`` processes) or a dask
        scheduler's address.
    n_workers : int, optional
        Threads or processes.
    progress : bool
        Progress bars.
    log : callable, optional
        Receives one line per data set and every note of the sweeps (default: print).
    config_file : str, optional
        Recorded in ``config.json``.

    Returns
    -------
    dict
        ``runs_done`` (computed now), ``runs_total`` (of the data sets run), ``notes`` and
        ``results`` (data set -> the gathered :class:`xarray.Dataset`).

    Examples
    --------
    >>> import json, tempfile
    >>> from meanfield.studies.scratch_nlp import FIXTURES, TINY_CONFIG, run_study
    >>> cfg = json.load(open(TINY_CONFIG))
    >>> cfg.update(features=["favor"], seeds=[0], baseline=False)
    >>> out = tempfile.mkdtemp()
    >>> kw = dict(data_dir=FIXTURES, out_dir=out, datasets=["sst2"], progress=False,
    ...           log=lambda line: None)
    >>> run_study(cfg, **kw)["runs_done"], run_study(cfg, **kw)["runs_done"]
    (3, 0)
    """
    from .._validation import check_output_path
    from ..errors import InputError, ResourceError
    from ..workbench.sweeps import check_scheduler, run_sweep

    log = print if log is None else log
    cfg = check_config(cfg)
    names = [d["name"] for d in cfg["datasets"]]
    if datasets is not None and (bad := [d for d in datasets if d not in names]):
        raise InputError(f"datasets {bad} are not in the configuration {names}")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ResourceError(f"device {device!r}: no CUDA device is available")
    data_dir = str(Path(data_dir).expanduser().resolve())
    out = check_output_path("out_dir", out_dir, kind="dir")
    check_scheduler(scheduler)
    chosen = [n for n in names if datasets is None or n in datasets]
    check_data(cfg, data_dir, chosen)
    specs = sweep_specs(cfg, data_dir, str(dev))
    record = study_record(
        cfg,
        specs,
        config_file=None if config_file is None else str(config_file),
        data_dir=data_dir,
        device=str(dev),
        machine=_machine(dev),
        scheduler=scheduler,
    )
    _write_json(out / "config.json", record)
    notes, results, done, total = [], {}, 0, 0
    t0_ns = time.time_ns()

    def note(line):
        notes.append(line)
        log(line)

    kw = dict(scheduler=scheduler, n_workers=n_workers, progress=progress, log=note)
    for name in chosen:
        s = _unflatten(specs[name]["variants"]["fixed"])
        prep = _prepare(data_dir, s)
        log(
            f"{name}: {prep['n_train']} train / {prep['n_val']} validation / {prep['n_eval']} "
            f"eval examples ({100 * prep['eval_truncated']:.1f} % of eval at the "
            f"{s['model']['max_length']}-token cut), vocabulary {prep['vocab_size']}"
        )
        parts = ("baseline", "variants") if cfg["baseline"] else ("variants",)
        for part in parts:
            spec = specs[name][part]
            func = run_baseline if part == "baseline" else run_variant
            folder = out / spec["folder"]
            results[spec["folder"]] = run_sweep(
                func, spec["grid"], folder, fixed=spec["fixed"], **kw
            )
            if part == "variants":
                d, n = _written_since(folder, spec, t0_ns)
                done, total = done + d, total + n
    return {"runs_done": done, "runs_total": total, "notes": notes, "results": results}
