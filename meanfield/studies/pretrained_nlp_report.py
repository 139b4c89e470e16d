"""Reports of the pretrained-model study (:mod:`meanfield.studies.pretrained_nlp`).

Reads the finished runs (``<out>/softmax/runs/*.nc`` and ``<out>/linearized/runs/*.nc``: a
partial study is reported as far as it goes) and writes ``<out>/report.md`` and
``<out>/results.csv``:

* the TF-IDF + logistic-regression sanity bar on the same training examples (scikit-learn,
  ``C`` by 5-fold CV on a grid whose edges are reported if chosen);
* per data set and variant, mean and 95 % t-interval over seeds of the clean accuracy, the
  noisy accuracy, ECE, the accuracy right after linearizing (before fine-tuning), and the
  fraction of the softmax model's accuracy recovered (paired by seed);
* what learning Omega changed, per learned variant: the attention's total variation to
  softmax and the deployed kernel's held-out centred alignment, before and after;
* paired differences Kernel − vanilla, Kernel − Hedgehog-loss (Ω only) per feature map, the
  controls, and Kernel (each feature map) − published Hedgehog where a data set runs it,
  with 95 % t-intervals and Holm-adjusted p-values over the whole planned family (every data
  set x comparison of the configuration; those without two paired seeds yet count as p = 1).

Earlier names are read as the current ones: a configuration's method ``hedgehog`` and a run's
variant ``hedgehog-<X>`` are the Ω-only Hedgehog, reported as ``hedgehog-loss-<X>``
(:func:`meanfield.studies.pretrained_nlp.canonical_variant`).

Examples
--------
>>> from meanfield.studies.pretrained_nlp_report import t_interval
>>> m, lo, hi = t_interval([1.0, 2.0, 3.0])
>>> m, round(lo, 3), round(hi, 3)
(2.0, -0.484, 4.484)
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import xarray as xr

from ..errors import InputError
from ..stats import holm, paired_family, t_interval  # defined in meanfield.stats, re-exported
from .pretrained_nlp import canonical_variant, dataset_methods, variants

__all__ = ["t_interval", "holm", "load_runs", "tfidf_bar", "write_report"]


def load_runs(out: Path) -> list[dict]:
    """One dict per finished run of the current configuration: the grid point and every
    scalar result.  ``<stage>/current.json`` (written by the study) names each data set's
    current configuration digest; runs of other settings in the same folder are left out.

    Examples
    --------
    >>> import tempfile
    >>> load_runs(Path(tempfile.mkdtemp()))  # nothing finished yet
    []
    """
    rows = []
    for stage in ("softmax", "linearized"):
        try:
            current = json.loads((out / stage / "current.json").read_text())
        except (OSError, ValueError):
            current = None  # a folder from before current.json: every run
        for path in sorted((out / stage / "runs").glob("*.nc")):
            try:
                with xr.open_dataset(path, engine="h5netcdf") as ds:
                    name = str(ds.attrs["sweep_dataset"])
                    if current is not None and ds.attrs.get("sweep_config_digest") != current.get(
                        name
                    ):
                        continue
                    row = {k: float(ds[k].values) for k in ds.data_vars}
                    variant = str(ds.attrs.get("sweep_variant", "softmax"))
                    row.update(
                        stage=stage,
                        dataset=str(ds.attrs["sweep_dataset"]),
                        seed=int(ds.attrs["sweep_seed"]),
                        # the current name of a variant recorded under an earlier one
                        variant=variant if variant == "softmax" else canonical_variant(variant),
                    )
            except (OSError, KeyError, ValueError, InputError):
                continue  # a run being written, or set aside; a variant of no known name
            rows.append(row)
    return rows


def tfidf_bar(cfg: dict, dataset: str, data_dir) -> dict:
    """TF-IDF (1-2-grams) + logistic regression on the study's training examples.

    Examples
    --------
    >>> import json
    >>> from meanfield.studies.pretrained_nlp import FIXTURES, TINY_CONFIG, check_config
    >>> cfg = check_config(json.load(open(TINY_CONFIG)))
    >>> bar = tfidf_bar(cfg, "rotten_tomatoes", FIXTURES)
    >>> 0.0 <= bar["accuracy"] <= 1.0, bar["n_train"]
    (True, 12)
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    from ..attention.baselines import logistic_by_cv
    from ..attention.data import load_split
    from ..attention.metrics import classification_metrics
    from ..attention.training import validation_indices

    ds = next(d for d in cfg["datasets"] if d["name"] == dataset)
    src = ds.get("source", "auto")
    tr = load_split(ds["task"], ds.get("train_split", "train"), data_dir, source=src)
    ev = load_split(ds["task"], ds.get("eval_split", "test"), data_dir, source=src)
    if ds.get("max_train") and len(tr) > ds["max_train"]:
        pick = np.random.default_rng(cfg["data_seed"]).permutation(len(tr))[: ds["max_train"]]
        tr = tr.subset(np.sort(pick))
    held = validation_indices(np.asarray(tr.labels), cfg["validation_fraction"], cfg["data_seed"])
    tr = tr.subset(np.setdiff1d(np.arange(len(tr)), held))  # what the networks train on
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True).fit(list(tr.text_a))
    Cs = [0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300]
    # C by 5-fold CV on the log loss, then refitted to convergence (see attention.baselines)
    clf, C, on_edge = logistic_by_cv(vec.transform(list(tr.text_a)), np.asarray(tr.labels), Cs)
    probs = clf.predict_proba(vec.transform(list(ev.text_a)))
    rec = classification_metrics(np.asarray(ev.labels), probs)
    rec.update(C=C, C_on_edge=on_edge, n_train=len(tr))
    return rec


def _fmt(m, lo, hi, d=4) -> str:
    if not np.isfinite(m):
        return "—"
    if not np.isfinite(lo):
        return f"{m:.{d}f}"
    return f"{m:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]"


def _paired(rows, dataset, a, b, metric="clean_accuracy"):
    """Per-seed differences a − b (seeds where both are done)."""
    va = {r["seed"]: r[metric] for r in rows if r["dataset"] == dataset and r["variant"] == a}
    vb = {r["seed"]: r[metric] for r in rows if r["dataset"] == dataset and r["variant"] == b}
    seeds = sorted(set(va) & set(vb))
    return np.array([va[s] - vb[s] for s in seeds])


def _comparisons(cfg, ds=None) -> list[tuple[str, str, str]]:
    """The planned paired comparisons ``(a, b, label)`` of data set ``ds``: per feature map
    Kernel − vanilla and Kernel − Hedgehog-loss, the controls, then (where the data set runs
    it) Kernel on each feature map − the published Hedgehog."""
    methods = dataset_methods(cfg, ds)
    out = []
    for f in cfg["features"]:
        if "kernel" in methods and "vanilla" in methods:
            out.append((f"kernel-{f}", f"vanilla-{f}", "Kernel − vanilla"))
        if "kernel" in methods and "hedgehog-loss" in methods:
            out.append((f"kernel-{f}", f"hedgehog-loss-{f}", "Kernel − Hedgehog-loss (Ω only)"))
    ctl = cfg.get("controls") or {}
    for k in ctl.get("kinds", []):
        out.append((f"kernel-{ctl['feature']}", f"{k}-{ctl['feature']}", f"Kernel − {k}"))
    if "kernel" in methods and "hedgehog-published" in methods:
        for f in cfg["features"]:
            out.append(
                (f"kernel-{f}", "hedgehog-published-hedgehog", "Kernel − published Hedgehog")
            )
    return out


def write_report(out, data_dir=None) -> dict:
    """Write ``report.md`` and ``results.csv`` under ``out``; returns the table rows.

    Examples
    --------
    >>> import json, tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> _ = (out / "config.json").write_text(json.dumps({"name": "x", "datasets": []}))
    >>> write_report(out)
    {'table': [], 'comparisons': 0, 'planned': 0}
    """
    out = Path(out)
    cfg = json.loads((out / "config.json").read_text())
    rows = load_runs(out)
    with open(out / "results.csv", "w", newline="") as fh:
        keys = sorted({k for r in rows for k in r})
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    lines = [f"# Pretrained-model study: {cfg['name']}", "", cfg.get("description", ""), ""]
    table = []
    for ds in cfg["datasets"]:
        name = ds["name"]
        mine = [r for r in rows if r["dataset"] == name]
        if not mine:
            continue
        lines += [f"## {name}", ""]
        if data_dir is not None:
            bar = tfidf_bar(cfg, name, data_dir)
            edge = " (C on the grid's edge)" if bar["C_on_edge"] else ""
            lines += [
                f"TF-IDF + LR bar (same {bar['n_train']} training examples, C = {bar['C']:g}"
                f"{edge}): accuracy {bar['accuracy']:.4f}, ECE {bar['ece']:.4f}.",
                "",
            ]
        soft = {r["seed"]: r["clean_accuracy"] for r in mine if r["variant"] == "softmax"}
        budget = float(cfg.get("train", {}).get("max_epochs", np.inf))
        lines += [
            "| variant | seeds | accuracy | noisy accuracy | ECE | after linearizing | "
            "recovered (of softmax) | best epoch at the budget's end |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for variant in ["softmax"] + variants(cfg, ds):
            rs = [r for r in mine if r["variant"] == variant]
            if not rs:
                continue
            acc = t_interval([r["clean_accuracy"] for r in rs])
            noisy = t_interval([r["noisy_accuracy"] for r in rs])
            ece = t_interval([r["clean_ece"] for r in rs])
            lin = t_interval([r.get("linearized_accuracy", np.nan) for r in rs])
            rec = t_interval(
                # a softmax run of accuracy 0 recovers nothing measurable: left out, not 1/0
                [r["clean_accuracy"] / soft[r["seed"]] for r in rs if soft.get(r["seed"], 0) > 0]
            )
            # a run whose best validation loss came at its last evaluation was stopped by the
            # epoch budget, not by early stopping: it may not have converged
            at_end = sum(float(r.get("best_epoch", np.nan)) >= budget for r in rs)
            lines.append(
                f"| {variant} | {len(rs)} | {_fmt(*acc)} | {_fmt(*noisy)} | {_fmt(*ece)} | "
                f"{_fmt(*lin)} | {_fmt(*rec, d=3)} | {at_end} of {len(rs)} |"
            )
            table.append({"dataset": name, "variant": variant, "n": len(rs), "accuracy": acc[0]})
        lines.append("")
        lines += _learning_lines(mine, variants(cfg, ds))
    # the family of paired comparisons, Holm-corrected over every *planned* comparison (every
    # data set x comparison of the configuration): one not yet computable (< 2 paired seeds)
    # counts as p = 1, so a partial study is never corrected for fewer claims than it makes
    comps, planned = {}, 0
    for ds in cfg["datasets"]:
        for a, b, label in _comparisons(cfg, ds):
            planned += 1
            d = _paired(rows, ds["name"], a, b)
            if len(d) >= 2:
                comps[(ds["name"], a, b, label)] = d
    if comps:
        family = paired_family(comps, planned=planned)
        lines += [
            "## Paired differences (accuracy, by seed)",
            "",
            f"95 % t-intervals; Holm-adjusted p and Bonferroni simultaneous 95 % intervals over "
            f"the {planned} planned comparisons ({planned - len(comps)} not yet computable, "
            "counted as p = 1).",
            "",
            "| data set | comparison | seeds | difference | Bonferroni interval | p | Holm p |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in family:
            name, a, b, label = r["label"]
            lines.append(
                f"| {name} | {a} − {b} ({label}) | {r['k']} | "
                f"{_fmt(r['mean'], r['lo'], r['hi'])} | [{r['lo_bonf']:.4f}, {r['hi_bonf']:.4f}] "
                f"| {r['p']:.3g} | {r['p_holm']:.3g} |"
            )
        lines.append("")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return {"table": table, "comparisons": len(comps), "planned": planned}


# what each way of learning Omega records about the feature map before and after learning it
# (before: the prior draw; measured on held-out sequences): (label, before key, after key)
_LEARNING = (
    ("TV to softmax attention", "phase_a_tv_to_softmax_before", "phase_a_tv_to_softmax_after"),
    ("TV to softmax attention", "hedgehog_tv_before", "hedgehog_tv_after"),
    ("centred alignment (held out)", "phase_a_align_heldout_before", "phase_a_align_heldout_after"),
)


def _learning_lines(rows, order) -> list[str]:
    """Markdown lines: per learned variant, mean and 95 % t-interval over seeds of what its
    learning step changed (attention's total variation to softmax, the deployed kernel's
    held-out centred alignment) and its wall time; descriptive, no claim (no correction)."""
    lines = []
    for variant in order:
        rs = [r for r in rows if r["variant"] == variant]
        for label, before, after in _LEARNING:
            if not rs or not all(before in r and after in r for r in rs):
                continue
            if not lines:
                lines = [
                    "What learning Omega did (held-out sequences; mean [95 % t-interval] over "
                    "seeds; before = the prior draw):",
                    "",
                    "| variant | seeds | measure | before | after | median learning s |",
                    "| --- | --- | --- | --- | --- | --- |",
                ]
            b = t_interval([r[before] for r in rs])
            a = t_interval([r[after] for r in rs])
            secs = np.median([r.get("learn_seconds", np.nan) for r in rs])
            lines.append(
                f"| {variant} | {len(rs)} | {label} | {_fmt(*b, d=3)} | {_fmt(*a, d=3)} | "
                f"{secs:.0f} |"
            )
    return lines + [""] if lines else []
