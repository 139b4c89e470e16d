"""The pretrained-model kernel-attention study: linearize MiniLM, ways to get the feature maps.

One study, two stages, both on :func:`meanfield.workbench.sweeps.run_sweep` (each run keyed by the
whole configuration, written when it finishes, resumed after an interruption, corrupt runs
set aside; threads locally, or a dask cluster with ``scheduler``):

1. ``softmax`` (grid: data set x seed): the pretrained encoder with a new head, fine-tuned
   to convergence (early stopping on the validation log loss of a stratified split carved
   from the training data; best parameters restored). Its checkpoint is saved for stage 2.
2. ``linearized`` (grid: data set x seed x variant): from the seed's fine-tuned softmax
   checkpoint, every attention linearized with a feature map X (FAVOR+, PORF-softplus,
   softmaxfeat; per head, seeded by the run's seed), ``Omega`` obtained by a method
   (``vanilla``: the prior draw; ``kernel``: Phase A on the deployed kernel;
   ``hedgehog-loss``: *Hedgehog-loss (Ω only)*, ``Omega`` of the deployed map trained with the
   Hedgehog loss, the distillation of the softmax attention), then fine-tuned with the same
   budget and early stopping as stage 1 (``Omega`` frozen). Controls (on one feature map):
   ``redraw`` (vanilla with another prior draw, the draw-to-draw spread), ``lam0`` (Kernel
   without repulsion). The *published Hedgehog* (``hedgehog-published``, variant
   ``hedgehog-published-hedgehog``: Zhang et al., ICLR 2024) brings its own feature map, so it
   is not crossed with X: every attention gets the trainable per-head map of
   :class:`~meanfield.attention.hedgehog.HedgehogFeatureMap` (``m = d_h`` unless
   ``n_features`` names ``"hedgehog"``), distilled with the same loss and budget (the
   ``hedgehog`` settings), then fine-tuned with the same budget, the maps trainable.

Names. The Ω-only method was called ``hedgehog`` before; that name is still read (a
configuration's ``methods``, a run file's variant ``hedgehog-<X>``) as ``hedgehog-loss``, and
its runs keep their recorded variant ``hedgehog-<X>`` on the sweep's grid
(:func:`recorded_variant`), so a study begun under the old name resumes without recomputing
them. A data set may list the ``methods`` it runs (a subset of the configuration's; not part
of a run's key, like its ``seeds``).

Pairing: within a data set and seed every variant starts from the same fine-tuned softmax
model and sees the same fine-tuning data order, so differences are paired by seed.

Examples
--------
>>> from meanfield.studies.pretrained_nlp import variants
>>> variants({"features": ["favor"], "methods": ["vanilla", "kernel"],
...           "controls": {"feature": "favor", "kinds": ["lam0"]}})
['vanilla-favor', 'kernel-favor', 'lam0-favor']
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
import xarray as xr

from .._version import __version__

__all__ = [
    "METHODS",
    "canonical_variant",
    "check_config",
    "dataset_methods",
    "recorded_variant",
    "split_variant",
    "check_study_inputs",
    "dataset_seeds",
    "variants",
    "run_softmax",
    "run_linearized",
    "run_study",
    "study_config_defaults",
]

#: the settings a configuration may give, with their defaults (unknown keys are refused)
study_config_defaults = {
    "name": "study",
    "description": "",
    "datasets": [],
    "seeds": [0],
    "features": ["favor", "porf-softplus", "softmaxfeat"],
    "methods": ["vanilla", "kernel", "hedgehog-loss"],
    "controls": {"feature": "favor", "kinds": ["redraw", "lam0"]},
    "n_features": {"favor": 64, "porf-softplus": 64, "softmaxfeat": 32},
    "max_length": 64,
    "validation_fraction": 0.1,
    "data_seed": 12345,
    "noise": {"rate": 0.1, "seed": 777},
    "freeze_embeddings": True,
    "train": {
        "batch_size": 32,
        "lr": 3e-5,
        "max_epochs": 3.0,
        "patience": 2,
        "eval_every": 0.5,
        "warmup_steps": 50,
        "weight_decay": 0.01,
    },
    "hedgehog": {"n_sequences": 1024, "n_heldout": 256, "steps": 300, "lr": 0.01},
    "phase_a": {"n_align": 4096, "n_heldout": 512, "n_steps": 300, "tilt": 0.15},
}
#: the repository's fixture data and the tiny configuration (used by the examples and tests)
FIXTURES = str(Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "nlp")
TINY_CONFIG = str(
    Path(__file__).resolve().parents[2] / "paper_repro" / "nlp_pretrained" / "configs" / "tiny.json"
)
_GRID_ONLY = ("name", "description", "seeds", "features", "methods", "controls")
#: a data set's grid lists: left out of its runs' key (extending them recomputes nothing)
_DATASET_GRID_ONLY = ("seeds", "methods")
_DATASET_KEYS = (
    "name", "task", "source", "train_split", "eval_split", "max_train", "seeds", "methods",
)  # fmt: skip
#: the methods of stage 2 and the feature map each brings: None = crossed with every
#: configured feature map; a name = that map only (its variant is ``<method>-<map>``)
METHODS = {
    "vanilla": None,
    "kernel": None,
    "hedgehog-loss": None,
    "hedgehog-published": "hedgehog",
}
_CONTROLS = ("redraw", "lam0")
#: earlier names of methods, read as the current ones (configurations and run files)
_LEGACY_METHODS = {"hedgehog": "hedgehog-loss"}
#: the current method whose runs are recorded (keyed) under its earlier name
_RECORDED_AS = {new: old for old, new in _LEGACY_METHODS.items()}


def _canonical_method(method: str) -> str:
    return _LEGACY_METHODS.get(method, method)


def split_variant(variant: str) -> tuple[str, str]:
    """``(method, feature map)`` of a stage-2 variant name, the method by its current name.

    Earlier names are read as the current ones (``hedgehog-favor``, the Ω-only Hedgehog
    before it was named ``hedgehog-loss``).

    Raises
    ------
    meanfield.errors.InputError
        A name that is no ``<method>-<feature map>`` of the study.

    Examples
    --------
    >>> split_variant("hedgehog-loss-porf-softplus"), split_variant("hedgehog-favor")
    (('hedgehog-loss', 'porf-softplus'), ('hedgehog-loss', 'favor'))
    >>> split_variant("hedgehog-published-hedgehog")
    ('hedgehog-published', 'hedgehog')
    """
    from ..attention.features import FEATURE_KINDS
    from ..errors import InputError

    names = sorted([*METHODS, *_CONTROLS, *_LEGACY_METHODS], key=len, reverse=True)
    for method in names:  # longest first: "hedgehog-loss-x" before the legacy "hedgehog-x"
        if variant.startswith(method + "-"):
            feature = variant[len(method) + 1 :]
            own = METHODS.get(_canonical_method(method))
            if (own is None and feature in FEATURE_KINDS) or feature == own:
                return _canonical_method(method), feature
    raise InputError(
        f"variant must be <method>-<feature map> with a method among "
        f"{', '.join([*METHODS, *_CONTROLS])}; got {variant!r}"
    )


def canonical_variant(variant: str) -> str:
    """A variant's current name (earlier names mapped; see :func:`split_variant`).

    Examples
    --------
    >>> canonical_variant("hedgehog-softmaxfeat"), canonical_variant("kernel-favor")
    ('hedgehog-loss-softmaxfeat', 'kernel-favor')
    """
    return "-".join(split_variant(variant))


def recorded_variant(variant: str) -> str:
    """The name a variant's runs are keyed and recorded under (the sweep's grid value).

    ``hedgehog-loss-<X>`` keeps its earlier name ``hedgehog-<X>``, so that the runs recorded
    before the rename are found (module notes); every other variant is its own name.

    Examples
    --------
    >>> recorded_variant("hedgehog-loss-favor"), recorded_variant("hedgehog-published-hedgehog")
    ('hedgehog-favor', 'hedgehog-published-hedgehog')
    """
    method, feature = split_variant(variant)
    return f"{_RECORDED_AS.get(method, method)}-{feature}"


def dataset_methods(cfg: dict, ds: dict | None = None) -> list[str]:
    """The methods a data set runs, by their current names, in the configuration's order:
    the configuration's, or those of them the data set lists under ``methods``.

    Examples
    --------
    >>> cfg = {"methods": ["vanilla", "kernel", "hedgehog", "hedgehog-published"]}
    >>> dataset_methods(cfg)
    ['vanilla', 'kernel', 'hedgehog-loss', 'hedgehog-published']
    >>> dataset_methods(cfg, {"name": "qqp", "methods": ["kernel", "vanilla"]})
    ['vanilla', 'kernel']
    """
    methods = [_canonical_method(m) for m in cfg["methods"]]
    if ds is not None and "methods" in ds:
        own = {_canonical_method(m) for m in ds["methods"]}
        methods = [m for m in methods if m in own]
    return methods


def _nearest(key, allowed) -> str:
    import difflib

    near = difflib.get_close_matches(key, list(allowed), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def check_config(cfg: dict) -> dict:
    """The configuration with defaults filled in; unknown keys refused, naming the nearest.

    Examples
    --------
    >>> check_config({"datasets": [], "seedz": [0]})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'seedz' (did you mean 'seeds'?)
    """
    from ..errors import InputError

    def merge(given, defaults, where):
        out = dict(defaults)
        for k, v in given.items():
            if k not in defaults:
                raise InputError(f"unknown configuration key {where}{k!r}{_nearest(k, defaults)}")
            if isinstance(defaults[k], dict) and isinstance(v, dict) and k != "n_features":
                v = merge(v, defaults[k], f"{where}{k}.")
            out[k] = v
        return out

    out = merge(cfg, study_config_defaults, "")
    out["datasets"] = [dict(ds) if isinstance(ds, dict) else ds for ds in out["datasets"]]
    for ds in out["datasets"]:
        for k in ds:
            if k not in _DATASET_KEYS:
                raise InputError(f"unknown dataset key {k!r}{_nearest(k, _DATASET_KEYS)}")
        if "name" not in ds or "task" not in ds:
            raise InputError(f"each dataset needs 'name' and 'task', got {ds}")
        if "seeds" in ds and (
            not isinstance(ds["seeds"], list)
            or not ds["seeds"]
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in ds["seeds"])
        ):
            raise InputError(
                f"dataset {ds['name']!r}: 'seeds' must be a non-empty list of integers, "
                f"got {ds['seeds']!r}"
            )
    allowed = ", ".join(METHODS)
    for where, holder in [("", out)] + [(f"dataset {d['name']!r}: ", d) for d in out["datasets"]]:
        if "methods" not in holder:
            continue
        if not isinstance(holder["methods"], list) or (where and not holder["methods"]):
            raise InputError(f"{where}methods must be a list of methods, got {holder['methods']!r}")
        for m in holder["methods"]:
            if not isinstance(m, str) or _canonical_method(m) not in METHODS:
                raise InputError(f"{where}methods must be among {allowed}; got {m!r}")
        # earlier names (hedgehog) read as the current ones (hedgehog-loss)
        holder["methods"] = [_canonical_method(m) for m in holder["methods"]]
    _check_values(out)
    return out


def _check_list(name: str, value, allowed=None, *, empty: bool = False) -> list:
    from ..errors import InputError

    if not isinstance(value, list) or (not value and not empty):
        need = "a list" if empty else "a non-empty list"
        raise InputError(f"{name} must be {need}, got {value!r}")
    if allowed is not None:
        for v in value:
            if v not in allowed:
                raise InputError(f"{name} must be among {', '.join(allowed)}; got {v!r}")
    return value


def _check_seeds(name: str, seeds) -> None:
    from .._validation import check_int

    for s in _check_list(name, seeds):
        check_int(f"{name} entries", s, minimum=0)


def _check_values(cfg: dict) -> None:
    """Every value of a filled-in configuration in its range, before any work: the message
    names the key (``train.lr``) and the range (:func:`check_config`)."""
    from .._validation import check_int, check_positive
    from ..attention.data import TASKS
    from ..attention.features import FEATURE_KINDS
    from ..errors import InputError

    for key in ("name", "description"):
        if not isinstance(cfg[key], str):
            raise InputError(f"{key} must be a string, got {cfg[key]!r}")
    names = [ds["name"] for ds in _check_list("datasets", cfg["datasets"], empty=True)]
    if len(set(names)) != len(names):
        raise InputError(f"datasets must have distinct names, got {names}")
    for ds in cfg["datasets"]:
        where = f"dataset {ds['name']!r}"
        if ds["task"] not in TASKS:
            raise InputError(f"{where}: task must be among {', '.join(TASKS)}; got {ds['task']!r}")
        if ds.get("max_train") is not None:
            check_int(f"{where}: max_train", ds["max_train"], minimum=2)
        if "seeds" in ds:
            _check_seeds(f"{where}: seeds", ds["seeds"])
    _check_seeds("seeds", cfg["seeds"])
    _check_list("features", cfg["features"], FEATURE_KINDS, empty=True)
    _check_list("methods", cfg["methods"], tuple(METHODS), empty=True)
    ctl = cfg["controls"] if cfg["controls"] is not None else {}
    if not isinstance(ctl, dict):
        raise InputError(f"controls must be a mapping, got {ctl!r}")
    for k in ctl:
        if k not in ("feature", "kinds"):
            raise InputError(f"unknown configuration key controls.{k!r}")
    kinds = _check_list("controls.kinds", ctl.get("kinds", []), ("redraw", "lam0"), empty=True)
    used = list(cfg["features"])
    if kinds:
        if ctl.get("feature") not in FEATURE_KINDS:
            raise InputError(
                f"controls.feature must be among {', '.join(FEATURE_KINDS)}; got "
                f"{ctl.get('feature')!r}"
            )
        used.append(ctl["feature"])
    if not isinstance(cfg["n_features"], dict):
        raise InputError(f"n_features must be a mapping feature -> int, got {cfg['n_features']!r}")
    for feature in used:
        if feature not in cfg["n_features"]:
            raise InputError(f"n_features has no entry for the feature map {feature!r}")
        check_int(f"n_features.{feature}", cfg["n_features"][feature], minimum=1)
    if "hedgehog" in cfg["n_features"]:  # optional: the published map is square (m = d_h)
        check_int("n_features.hedgehog", cfg["n_features"]["hedgehog"], minimum=1)
    check_int("max_length", cfg["max_length"], minimum=4)
    fraction = check_positive("validation_fraction", cfg["validation_fraction"])
    if fraction > 0.5:
        raise InputError(f"validation_fraction must be in (0, 0.5], got {fraction}")
    check_int("data_seed", cfg["data_seed"], minimum=0)
    rate = check_positive("noise.rate", cfg["noise"]["rate"], allow_zero=True)
    if rate >= 1:
        raise InputError(f"noise.rate must be in [0, 1), got {rate}")
    check_int("noise.seed", cfg["noise"]["seed"], minimum=0)
    if not isinstance(cfg["freeze_embeddings"], bool):
        raise InputError(
            f"freeze_embeddings must be true or false, got {cfg['freeze_embeddings']!r}"
        )
    tr = cfg["train"]
    check_int("train.batch_size", tr["batch_size"], minimum=1)
    check_positive("train.lr", tr["lr"])
    check_positive("train.max_epochs", tr["max_epochs"])
    check_int("train.patience", tr["patience"], minimum=1)
    check_positive("train.eval_every", tr["eval_every"])
    check_int("train.warmup_steps", tr["warmup_steps"], minimum=0)
    check_positive("train.weight_decay", tr["weight_decay"], allow_zero=True)
    hh = cfg["hedgehog"]
    check_int("hedgehog.n_sequences", hh["n_sequences"], minimum=1)
    check_int("hedgehog.n_heldout", hh["n_heldout"], minimum=1)
    check_int("hedgehog.steps", hh["steps"], minimum=1)
    check_positive("hedgehog.lr", hh["lr"])
    pa = cfg["phase_a"]
    check_int("phase_a.n_align", pa["n_align"], minimum=2)
    check_int("phase_a.n_heldout", pa["n_heldout"], minimum=2)
    check_int("phase_a.n_steps", pa["n_steps"], minimum=1)
    check_positive("phase_a.tilt", pa["tilt"])


def check_study_inputs(
    cfg: dict,
    *,
    data_dir,
    model_dir,
    out_dir,
    scheduler: str = "threads",
    n_workers: int | None = 1,
    stages=("softmax", "linearized"),
    device: str = "cpu",
) -> dict:
    """Check everything :func:`run_study` needs, before any work; nothing is written.

    The configuration (:func:`check_config`, every value in its range, at least one data
    set), the stages, the device, the scheduler and ``n_workers``, that ``out_dir`` can be
    written (a file is created and removed there, so a read-only folder is found even where
    permission bits do not tell), that ``model_dir`` holds a checkpoint that loads exactly
    (:func:`~meanfield.attention.pretrained.load_pretrained_classifier`: layer count, sizes,
    every tensor present and used, finite) and that every data set's splits load.

    Returns
    -------
    dict
        The configuration with defaults filled in.

    Raises
    ------
    meanfield.errors.MeanfieldError
        The first problem found, naming the parameter and its allowed range
        (:class:`~meanfield.errors.InputError`, :class:`~meanfield.errors.OutputPathError`,
        :class:`~meanfield.errors.MissingFileError`, :class:`~meanfield.errors.ResourceError`,
        :class:`~meanfield.errors.NumericalError`, ...).

    Examples
    --------
    >>> import json, tempfile
    >>> from meanfield.attention.pretrained import save_tiny_bert
    >>> model_dir = tempfile.mkdtemp(); save_tiny_bert(model_dir)
    >>> cfg = json.load(open(TINY_CONFIG))
    >>> cfg["train"]["batch_size"] = 0
    >>> check_study_inputs(cfg, data_dir=FIXTURES, model_dir=model_dir, out_dir=tempfile.mkdtemp())
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: train.batch_size must be an integer >= 1, got 0
    """
    from .._validation import check_device, check_int
    from ..attention.pretrained import load_pretrained_classifier
    from ..errors import InputError
    from ..workbench.sweeps import check_scheduler

    cfg = check_config(cfg)
    if not cfg["datasets"]:
        raise InputError("datasets must be a non-empty list of data sets to run")
    stages = tuple(stages) if not isinstance(stages, str) else (stages,)
    if not stages or any(st not in ("softmax", "linearized") for st in stages):
        raise InputError(f"stages must be among 'softmax', 'linearized'; got {stages!r}")
    device = check_device("device", device)
    if n_workers is not None:
        check_int("n_workers", n_workers, minimum=1)
    check_scheduler(scheduler)
    _check_writable("out_dir", out_dir)
    load_pretrained_classifier(model_dir)  # refuses a folder that does not load exactly
    _load_every_split(cfg, data_dir)
    return cfg


def _check_writable(name: str, folder) -> None:
    """Refuse a folder that cannot be written (see :func:`check_study_inputs`)."""
    import os
    import tempfile

    from .._validation import check_output_path, shown
    from ..errors import OutputPathError

    name = shown(name)
    path = check_output_path(name, folder, kind="dir")
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".write-check-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise OutputPathError(
            f"{name} {str(path)!r} cannot be written: the folder {str(probe)!r} refuses a "
            f"new file ({exc.strerror or exc})"
        ) from None


def _load_every_split(cfg: dict, data_dir) -> None:
    """Load every data set's splits once (a missing file is refused before any work)."""
    from ..attention.data import load_split

    for ds in cfg["datasets"]:
        src = ds.get("source", "auto")
        for split in (ds.get("train_split", "train"), ds.get("eval_split", "test")):
            load_split(ds["task"], split, data_dir, source=src)


def dataset_seeds(cfg: dict, ds: dict) -> list[int]:
    """The seeds of one data set: its own ``seeds`` entry if it has one (e.g. fewer seeds
    for a costly data set), else the configuration's.

    Examples
    --------
    >>> cfg = {"seeds": [0, 1, 2, 3, 4]}
    >>> dataset_seeds(cfg, {"name": "qqp", "seeds": [0, 1, 2]}), dataset_seeds(cfg, {"name": "rt"})
    ([0, 1, 2], [0, 1, 2, 3, 4])
    """
    return list(ds.get("seeds", cfg["seeds"]))


def variants(cfg: dict, ds: dict | None = None) -> list[str]:
    """Variant names ``<method>-<feature>`` of stage 2 (of data set ``ds``: its ``methods``),
    by their current names: the methods crossed with the feature maps, then the methods that
    bring their own map, controls last.

    Examples
    --------
    >>> variants({"features": ["favor", "softmaxfeat"], "methods": ["vanilla"], "controls": {}})
    ['vanilla-favor', 'vanilla-softmaxfeat']
    >>> variants({"features": ["favor"], "methods": ["hedgehog", "hedgehog-published"]})
    ['hedgehog-loss-favor', 'hedgehog-published-hedgehog']
    """
    methods = dataset_methods(cfg, ds)
    out = [f"{m}-{f}" for f in cfg["features"] for m in methods if METHODS[m] is None]
    out += [f"{m}-{METHODS[m]}" for m in methods if METHODS[m] is not None]
    ctl = cfg.get("controls") or {}
    out += [f"{k}-{ctl['feature']}" for k in ctl.get("kinds", [])]
    return out


# ---------------------------------------------------------------------------------------
# data and models
# ---------------------------------------------------------------------------------------
def _prepare(cfg: dict, dataset: str, data_dir: str, model_dir: str):
    """Encoded training / validation / evaluation splits of one data set (deterministic)."""
    from ..attention.data import load_split
    from ..attention.pretrained import encode_pretrained, load_tokenizer
    from ..attention.training import split_validation

    ds = next(d for d in cfg["datasets"] if d["name"] == dataset)
    src = ds.get("source", "auto")
    tr = load_split(ds["task"], ds.get("train_split", "train"), data_dir, source=src)
    ev = load_split(ds["task"], ds.get("eval_split", "test"), data_dir, source=src)
    if ds.get("max_train") and len(tr) > ds["max_train"]:
        pick = np.random.default_rng(cfg["data_seed"]).permutation(len(tr))[: ds["max_train"]]
        tr = tr.subset(np.sort(pick))
    tok = load_tokenizer(model_dir)
    L = cfg["max_length"]
    full = encode_pretrained(tok, tr.text_a, tr.text_b, tr.labels, L)
    train, val = split_validation(full, cfg["validation_fraction"], cfg["data_seed"])
    evald = encode_pretrained(tok, ev.text_a, ev.text_b, ev.labels, L)
    return {"train": train, "val": val, "eval": evald, "tokenizer": tok}


def _noisy(cfg, prep):
    from ..attention.noise import perturb_tokens

    tok = prep["tokenizer"]
    n_special = max(tok.all_special_ids) + 1
    return perturb_tokens(
        prep["eval"], cfg["noise"]["rate"], tok.vocab_size, cfg["noise"]["seed"], n_special
    )


def _evaluate(model, data) -> dict:
    from ..attention.metrics import classification_metrics
    from ..attention.training import predict_proba

    return classification_metrics(data.labels.numpy(), predict_proba(model, data, 64))


def _train(model, prep, cfg, seed, log=None) -> dict:
    from ..attention.training import train

    if cfg["freeze_embeddings"]:
        for p in model.encoder.embeddings.parameters():
            p.requires_grad_(False)
    st = dict(cfg["train"])
    return train(model, prep["train"], validation=prep["val"], seed=seed, log=log, **st)


def _record(kind: str, metrics: dict, extra: dict, device: str) -> xr.Dataset:
    data = {f"{split}_{k}": ((), float(v)) for split, m in metrics.items() for k, v in m.items()}
    for k, v in extra.items():
        if isinstance(v, (int, float, np.floating, np.integer, bool)):
            data[k] = ((), float(v))
    ds = xr.Dataset(data)
    ds.attrs.update(
        stage=kind,
        package_version=__version__,
        torch_version=torch.__version__,
        machine=f"{platform.node()} {platform.processor() or platform.machine()}",
        device=_device_label(device),
        details=json.dumps({k: v for k, v in extra.items()}, default=float),
    )
    return ds


def _device_label(device: str) -> str:
    """``device`` with the accelerator's name where it is one (recorded with each run)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(dev)})"
    return device


def _checkpoint(out_dir: str, dataset: str, seed: int) -> Path:
    return Path(out_dir) / "checkpoints" / f"softmax_{dataset}_seed{seed}.pt"


def input_fingerprints(cfg: dict, data_dir, model_dir) -> tuple[str, str]:
    """(data_id, model_id): SHA-1 digests of what the runs compute from, not where it lies.

    ``data_id`` covers the texts and labels of every data set's training and evaluation split
    as loaded; ``model_id`` the weights, configuration and tokenizer files of ``model_dir``.
    Runs are keyed by them, so a moved or copied data or model folder finds its runs.

    Examples
    --------
    >>> import json, tempfile
    >>> from meanfield.attention.pretrained import save_tiny_bert
    >>> model_dir = tempfile.mkdtemp(); save_tiny_bert(model_dir)
    >>> cfg = check_config(json.load(open(TINY_CONFIG)))
    >>> a = input_fingerprints(cfg, FIXTURES, model_dir)
    >>> a == input_fingerprints(cfg, FIXTURES, model_dir), [len(x) for x in a]
    (True, [40, 40])
    """
    from ..attention.data import load_split

    h = hashlib.sha1()
    for ds in cfg["datasets"]:
        src = ds.get("source", "auto")
        for split in (ds.get("train_split", "train"), ds.get("eval_split", "test")):
            sp = load_split(ds["task"], split, data_dir, source=src)
            h.update(json.dumps([ds["name"], split, list(sp.text_a)]).encode())
            h.update(json.dumps(list(sp.text_b) if sp.text_b is not None else None).encode())
            h.update(np.asarray(sp.labels).tobytes())
    m = hashlib.sha1()
    for f in sorted(Path(model_dir).iterdir()):
        if f.is_file() and (f.suffix in (".json", ".safetensors", ".bin", ".txt")):
            m.update(f.name.encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    m.update(block)
    return h.hexdigest(), m.hexdigest()


def _rekey_location_runs(func, stage_dir: Path, dataset: str, legacy: dict, fixed: dict) -> None:
    """Runs of ``dataset`` keyed by the earlier scheme (the configuration and the resolved
    folders) are given the current keys (the configuration and the inputs' fingerprints):
    the same computation, so nothing is recomputed after the change of scheme.  Every such
    run file is found (its grid point read from its attributes), whatever the grid now."""
    from ..results import save_dataset
    from ..workbench.sweeps import configuration_digest, run_key, sweep_configuration

    runs = stage_dir / "runs"
    if not runs.is_dir():
        return
    old = configuration_digest(sweep_configuration(func, legacy))
    new = configuration_digest(sweep_configuration(func, fixed))
    for src in sorted(runs.glob("*.nc")):
        try:
            with xr.open_dataset(src, engine="h5netcdf") as ds:
                if ds.attrs.get("sweep_config_digest") != old:
                    continue
                if str(ds.attrs.get("sweep_dataset")) != dataset:
                    continue
                ds = ds.load()
        except (OSError, ValueError):
            continue  # unreadable: the sweep sets it aside itself
        point = {"dataset": dataset, "seed": int(ds.attrs["sweep_seed"])}
        if "sweep_variant" in ds.attrs:
            point["variant"] = str(ds.attrs["sweep_variant"])
        dst = runs / f"{run_key(point, new)}.nc"
        if not dst.exists():
            ds.attrs["sweep_config_digest"] = new
            ds.attrs["sweep_rekeyed_from"] = src.name
            save_dataset(ds, dst)
        src.unlink()


def _record_current(stage_dir: Path, dataset: str, func, fixed: dict) -> None:
    """Note in ``<stage>/current.json`` the configuration digest of ``dataset``'s sweep, as it
    starts: the report shows those runs only (never stale runs of another setting)."""
    from ..workbench.sweeps import configuration_digest, sweep_configuration

    digest = configuration_digest(sweep_configuration(func, fixed))
    path = stage_dir / "current.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        current = {}
    current[dataset] = digest
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(current, indent=1, sort_keys=True))
    tmp.replace(path)


def _notes_of_dataset(stage_dir: Path, dataset: str):
    """A ``log`` for :func:`~meanfield.workbench.sweeps.run_sweep` that warns of the sweep's
    notes except "also holds runs of another configuration" where that configuration is
    another data set's: every data set is its own sweep in the same stage folder, so those
    configurations are expected there (a stale setting of the *same* data set still warns)."""
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


def _set_aside_run(func, point: dict, stage_dir: Path, fixed: dict) -> None:
    """Move one finished run out of the way (to ``runs/set_aside/``) so it is recomputed."""
    from ..workbench.sweeps import configuration_digest, run_key, sweep_configuration

    digest = configuration_digest(sweep_configuration(func, fixed))
    path = stage_dir / "runs" / f"{run_key(point, digest)}.nc"
    if path.is_file():
        aside = path.parent / "set_aside"
        aside.mkdir(exist_ok=True)
        path.replace(aside / f"{path.name}.no-checkpoint")


def run_softmax(
    dataset: str,
    seed: int,
    *,
    config: str,
    data_id: str,
    model_id: str,
    data_dir: str,
    model_dir: str,
    out_dir: str,
    device: str,
) -> xr.Dataset:
    """Stage 1: fine-tune the softmax encoder; save its checkpoint; clean and noisy metrics.

    ``config`` is the study configuration as JSON, ``data_id`` and ``model_id`` the
    fingerprints of the data and weights (:func:`input_fingerprints`): the run's key covers
    what it computes from; the folders are where they are found and ``device`` the torch
    device it runs on (neither keyed: the same run on another device is the same run).

    Examples
    --------
    :func:`run_study` maps it over data sets and seeds.

    >>> run_softmax.__name__ in __all__
    True
    """
    from ..attention.pretrained import load_pretrained_classifier

    cfg = json.loads(config)
    prep = _prepare(cfg, dataset, data_dir, model_dir)
    t0 = time.perf_counter()
    model, _ = load_pretrained_classifier(model_dir, seed=seed)
    model.to(device)
    info = _train(model, prep, cfg, seed)
    path = _checkpoint(out_dir, dataset, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(model.state_dict(), tmp)
    tmp.replace(path)
    metrics = {
        "clean": _evaluate(model, prep["eval"]),
        "noisy": _evaluate(model, _noisy(cfg, prep)),
    }
    extra = {k: info[k] for k in ("steps", "epochs", "best_epoch", "best_val_loss")}
    extra.update(seconds=time.perf_counter() - t0, n_train=len(prep["train"]))
    return _record("softmax", metrics, extra, device)


def run_linearized(
    dataset: str,
    seed: int,
    variant: str,
    *,
    config: str,
    data_id: str,
    model_id: str,
    data_dir: str,
    model_dir: str,
    out_dir: str,
    device: str,
) -> xr.Dataset:
    """Stage 2: linearize the seed's softmax checkpoint, get the feature maps by the variant's
    method, fine-tune (Omega frozen; the published Hedgehog's maps trained with the model),
    evaluate; also the accuracy right after linearizing.

    ``variant`` is ``<method>-<feature map>`` by its current or recorded name
    (:func:`split_variant`).

    Examples
    --------
    :func:`run_study` maps it over data sets, seeds and variants.

    >>> "kernel-favor" in variants({"features": ["favor"], "methods": ["kernel"]})
    True
    """
    from ..attention.learn_features import distil_feature_maps, phase_a_pretrained
    from ..attention.linearize import feature_maps_of, linearize
    from ..attention.pretrained import load_pretrained_classifier

    cfg = json.loads(config)
    method, feature = split_variant(variant)
    prep = _prepare(cfg, dataset, data_dir, model_dir)
    t0 = time.perf_counter()
    model, _ = load_pretrained_classifier(model_dir, seed=seed)
    ckpt = _checkpoint(out_dir, dataset, seed)
    if not ckpt.is_file():  # run_study recomputes stage 1 first; a direct caller is told
        raise FileNotFoundError(
            f"no softmax checkpoint {str(ckpt)!r} for {dataset} seed {seed}: run stage 1 "
            "(run_softmax, or run_study with stages including 'softmax') first"
        )
    # the checkpoint may come from another device: read it onto the CPU, then move the model
    model.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True))
    omega_seed = seed + 500 if method == "redraw" else seed
    # the published Hedgehog map is square (m = d_h) unless n_features names it
    linearize(model, feature, n_features=cfg["n_features"].get(feature), seed=omega_seed)
    model.to(device)  # Omega is drawn on the CPU, so the draw is the same on every device
    extra: dict = {}
    if method in ("hedgehog-loss", "hedgehog-published"):
        # the same loss, data and budget; the published map's W, b stay trainable after
        h = distil_feature_maps(model, prep["train"], seed=seed, **cfg["hedgehog"])
        extra.update({f"hedgehog_{k}": v for k, v in h.items() if k != "layers"})
        if method == "hedgehog-published":
            fms = feature_maps_of(model)
            extra["feature_map_parameters"] = sum(p.numel() for f in fms for p in f.parameters())
    elif method in ("kernel", "lam0"):
        st = dict(cfg["phase_a"], seed=seed)
        if method == "lam0":
            st["repulsion_ratio"] = 0.0
        res = phase_a_pretrained(model, prep["train"], **st)
        s = res.summary()
        extra.update({f"phase_a_{k}": v for k, v in s.items() if k != "layers"})
    learn_s = time.perf_counter() - t0
    metrics = {"linearized": _evaluate(model, prep["eval"])}
    info = _train(model, prep, cfg, seed)
    metrics["clean"] = _evaluate(model, prep["eval"])
    metrics["noisy"] = _evaluate(model, _noisy(cfg, prep))
    extra.update({k: info[k] for k in ("steps", "epochs", "best_epoch", "best_val_loss")})
    extra.update(learn_seconds=learn_s, seconds=time.perf_counter() - t0)
    return _record("linearized", metrics, extra, device)


def run_study(
    cfg: dict,
    *,
    data_dir,
    model_dir,
    out_dir,
    scheduler: str = "threads",
    n_workers: int | None = 1,
    stages=("softmax", "linearized"),
    progress: bool = True,
    record: dict | None = None,
    device: str = "cpu",
) -> dict:
    """Run (or resume) both stages; returns the gathered datasets by stage.

    ``device`` is the torch device the runs train and evaluate on (``"cpu"``, ``"cuda"``,
    ``"cuda:K"``); it is recorded with each run (attribute ``device``) but not in its key,
    so a study begun on one device resumes on another. Phase A's particle dynamics run on
    the CPU in float64 on every device (the pooled keys are moved there).

    ``record`` is the configuration written to ``<out_dir>/config.json`` for the report
    (default ``cfg``): a run of a subset (some data sets, seeds or variants) records the
    whole study it belongs to, so the report keeps every variant and comparison.

    Everything is checked before any work (:func:`check_study_inputs`): a bad value, folder,
    checkpoint, device or scheduler raises a :class:`~meanfield.errors.MeanfieldError`
    naming it, and nothing is written.

    Examples
    --------
    >>> import json, tempfile
    >>> from meanfield.attention.pretrained import save_tiny_bert
    >>> from meanfield.studies.pretrained_nlp import run_study
    >>> model_dir, out = tempfile.mkdtemp(), tempfile.mkdtemp()
    >>> save_tiny_bert(model_dir)
    >>> cfg = json.load(open(TINY_CONFIG))
    >>> cfg.update(seeds=[0], features=["favor"], methods=["vanilla"], controls={"kinds": []})
    >>> res = run_study(cfg, data_dir=FIXTURES, model_dir=model_dir, out_dir=out, progress=False)
    >>> res["linearized"]["clean_accuracy"].shape  # (dataset, seed, variant)
    (1, 1, 1)
    """
    from .._validation import check_device
    from ..workbench.sweeps import grid_points, run_sweep

    # everything checked before any work: nothing is written or trained on a bad input
    record = check_config(record or cfg)
    cfg = check_study_inputs(
        cfg,
        data_dir=data_dir,
        model_dir=model_dir,
        out_dir=out_dir,
        scheduler=scheduler,
        n_workers=n_workers,
        stages=stages,
        device=device,
    )
    device = check_device("device", device)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(record, indent=1))
    # what a run computes from: the grid's own lists (seeds, features, methods, controls) and
    # the labels stay out, so extending a grid never recomputes the runs already done; each
    # data set is its own sweep, keyed by its own entry, so adding a data set changes nothing
    base = {k: v for k, v in cfg.items() if k not in _GRID_ONLY}
    context = {
        "data_dir": str(Path(data_dir).resolve()),
        "model_dir": str(Path(model_dir).resolve()),
        "out_dir": str(out.resolve()),
    }
    funcs = {"softmax": run_softmax, "linearized": run_linearized}
    kw = dict(
        context=dict(context, device=device),
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
    )
    parts: dict = {"softmax": [], "linearized": []}
    for ds in cfg["datasets"]:
        seeds = dataset_seeds(cfg, ds)
        # the data set's own seed list is a grid list too: out of the key
        one = dict(base, datasets=[{k: v for k, v in ds.items() if k not in _DATASET_GRID_ONLY}])
        data_id, model_id = input_fingerprints(one, data_dir, model_dir)
        fixed = {
            "config": json.dumps(one, sort_keys=True),
            "data_id": data_id,
            "model_id": model_id,
        }
        grids = {
            "softmax": {"dataset": [ds["name"]], "seed": seeds},
            "linearized": {
                "dataset": [ds["name"]],
                "seed": seeds,
                # recorded names: the runs of hedgehog-loss keep their earlier key
                "variant": [recorded_variant(v) for v in variants(cfg, ds)],
            },
        }
        for stage, func in funcs.items():
            # the earlier scheme keyed runs by the folders and the whole data set list
            for datasets in (one["datasets"], cfg["datasets"]):
                legacy = {"config": json.dumps(dict(base, datasets=datasets), sort_keys=True)}
                old = {**legacy, **context}
                _rekey_location_runs(func, out / stage, ds["name"], old, fixed)
        # a finished stage-1 run whose checkpoint is gone (a clone: checkpoints are not kept
        # with the results) is recomputed, so that stage 2 finds its starting point
        for point in grid_points(grids["softmax"]) if "linearized" in stages else []:
            if not _checkpoint(out, point["dataset"], point["seed"]).is_file():
                _set_aside_run(run_softmax, point, out / "softmax", fixed)
        # stage 2 starts from stage 1's checkpoints: stage 1 is always brought up to date
        todo = ("softmax", "linearized") if "linearized" in stages else ("softmax",)
        if not grids["linearized"]["variant"]:  # this data set runs none of the methods
            todo = ("softmax",)
        for stage in todo:
            # recorded before the sweep runs, so that a report made while it runs shows the
            # runs it has finished (the digest depends on the function and fixed inputs only)
            _record_current(out / stage, ds["name"], funcs[stage], fixed)
            log = _notes_of_dataset(out / stage, ds["name"])
            res = run_sweep(funcs[stage], grids[stage], out / stage, fixed=fixed, log=log, **kw)
            parts[stage].append(res)
    results = {k: xr.concat(v, dim="dataset") for k, v in parts.items() if v}
    return results
