"""The kernel-attention study: every variant x data set x seed, resumable, with tables and figures.

Variants (THEORY.md §7): softmax; vanilla X and Kernel-X for X in {FAVOR, PORF-softplus,
softmaxfeat}; each with Q = K off and on. Every model follows the same schedule:

1. warm-up: ``train.warmup_epochs`` of cross-entropy training (vanilla random Omega);
2. Kernel-X only: Phase A (:func:`meanfield.attention.phases.phase_a`) on the pooled per-head
   keys of the warmed-up model;
3. Phase B: ``train.phase_b_epochs`` more epochs with Omega frozen (fresh optimiser).

Vanilla X and Kernel-X of one seed share the warm-up (computed once) and the Phase B data
order, so they differ only by Phase A. Softmax follows the same two-stage schedule.

Each finished run is written to ``<out>/runs/<key>.json`` (atomically); a rerun skips finished
runs, so an interrupted study resumes. ``--report-only`` rebuilds the tables and figures. The
tokenizer of each data set (trained on its training split only) is cached in
``<out>/runs/tokenizers/``.

Outputs in ``<out>``: ``results.csv`` (one row per run), ``table.md`` / ``table.csv`` (mean +-
std over seeds), ``paired.md`` / ``paired.csv`` (Kernel-X minus vanilla X, paired by seed),
``phase_a.md`` (held-out alignment and Phase A cost), ``figures/*.png``, ``config.json``
(the exact configuration, resolved, with versions and the machine).

Usage::

    python paper_repro/nlp/run_study.py --config paper_repro/nlp/configs/tiny.json \\
        --data-dir tests/fixtures/nlp --out /tmp/nlp_tiny
    MEANFIELD_DATA_DIR=/path/to/data python paper_repro/nlp/run_study.py \\
        --config paper_repro/nlp/configs/modest.json --out paper_repro/nlp/results/modest
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from meanfield import __version__
from meanfield.attention.data import load_split, resolve_data_dir
from meanfield.attention.metrics import METRIC_NAMES, classification_metrics
from meanfield.attention.model import TransformerClassifier
from meanfield.attention.phases import encode, phase_a, phase_b, predict_proba, train
from meanfield.attention.tokenizer import TextTokenizer

FEATURE_LABEL = {"favor": "FAVOR", "porf-softplus": "PORF-softplus", "softmaxfeat": "softmaxfeat"}
#: lower is better for these metrics
LOWER_BETTER = {"ece", "log_loss", "brier"}


# ---------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------
REQUIRED = (
    "name",
    "datasets",
    "features",
    "tie_qk",
    "seeds",
    "tokenizer",
    "model",
    "train",
    "phase_a",
)


def load_config(path) -> dict:
    """Read and check a JSON study configuration."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    cfg = json.loads(path.read_text())
    missing = [k for k in REQUIRED if k not in cfg]
    if missing:
        raise ValueError(f"{path}: missing config keys {missing}")
    for f in cfg["features"]:
        if f not in FEATURE_LABEL:
            raise ValueError(f"{path}: unknown feature {f!r}; choose from {list(FEATURE_LABEL)}")
    if not cfg["seeds"]:
        raise ValueError(f"{path}: seeds must not be empty")
    return cfg


def variant_name(feature: str | None, kernel: bool) -> str:
    if feature is None:
        return "softmax"
    return ("Kernel-" if kernel else "vanilla ") + FEATURE_LABEL[feature]


def run_key(dataset: str, feature: str | None, kernel: bool, qk: bool, seed: int) -> str:
    v = "softmax" if feature is None else f"{'kernel' if kernel else 'vanilla'}-{feature}"
    return f"{dataset}__{v}__qk{int(qk)}__s{seed}"


# ---------------------------------------------------------------------------------------
# data preparation (cached per data set)
# ---------------------------------------------------------------------------------------
def prepare_dataset(ds_cfg: dict, cfg: dict, data_dir, out: Path) -> dict:
    """Load, subsample and tokenise one data set; the tokenizer is trained on its train split."""
    task, source = ds_cfg["task"], ds_cfg.get("source", "auto")
    train_data = load_split(task, ds_cfg["train_split"], data_dir, source=source)
    eval_data = load_split(task, ds_cfg["eval_split"], data_dir, source=source)
    rng = np.random.default_rng(cfg.get("data_seed", 12345))
    if ds_cfg.get("max_train") and len(train_data) > ds_cfg["max_train"]:
        train_data = train_data.subset(rng.permutation(len(train_data))[: ds_cfg["max_train"]])
    if ds_cfg.get("max_eval") and len(eval_data) > ds_cfg["max_eval"]:
        eval_data = eval_data.subset(rng.permutation(len(eval_data))[: ds_cfg["max_eval"]])
    # caches live under runs/ (git-ignored): the per-run records and the tokenizers
    tok_path = out / "runs" / "tokenizers" / f"{ds_cfg['name']}.json"
    if tok_path.is_file():
        tok = TextTokenizer.load(tok_path)
    else:
        texts = list(train_data.text_a) + (list(train_data.text_b) if train_data.is_pair else [])
        tok = TextTokenizer.train(texts, **cfg["tokenizer"])
        tok.save(tok_path)
    L = cfg["model"]["max_length"]
    return {
        "train": encode(tok, train_data, L),
        "eval": encode(tok, eval_data, L),
        "eval_labels": np.asarray(eval_data.labels),
        "pair": train_data.is_pair,
        "vocab_size": tok.vocab_size,
        "n_train": len(train_data),
        "n_eval": len(eval_data),
        "train_source": train_data.source,
        "eval_source": eval_data.source,
    }


# ---------------------------------------------------------------------------------------
# one group of runs
# ---------------------------------------------------------------------------------------
def _write_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(obj, indent=1, default=float))
    os.replace(tmp, path)


def _evaluate(model, prep) -> dict:
    probs = predict_proba(model, prep["eval"])
    return classification_metrics(prep["eval_labels"], probs)


def run_group(ds_cfg, cfg, prep, feature, qk, seed, runs_dir: Path, log) -> int:
    """Warm-up once, then the vanilla (and, for kernels, Kernel-) Phase B. Returns #runs done."""
    name = ds_cfg["name"]
    members = [False] if feature is None else [False, True]
    todo = [
        k
        for k in members
        if not (runs_dir / (run_key(name, feature, k, qk, seed) + ".json")).is_file()
    ]
    if not todo:
        return 0
    tr = cfg["train"]
    model = TransformerClassifier(
        prep["vocab_size"],
        attention="softmax" if feature is None else feature,
        tie_qk=qk,
        pair=prep["pair"],
        seed=seed,
        **cfg["model"],
    )
    common = dict(batch_size=tr["batch_size"], lr=tr["lr"], weight_decay=tr["weight_decay"])
    warm = train(model, prep["train"], epochs=tr["warmup_epochs"], seed=seed, **common)
    warm_state = copy.deepcopy(model.state_dict())
    done = 0
    for kernel in todo:
        key = run_key(name, feature, kernel, qk, seed)
        t0 = time.perf_counter()
        model.load_state_dict(warm_state)
        rec = {
            "dataset": name,
            "variant": variant_name(feature, kernel),
            "feature": feature or "softmax",
            "kernel": kernel,
            "tie_qk": qk,
            "seed": seed,
            "n_train": prep["n_train"],
            "n_eval": prep["n_eval"],
            "warmup_seconds": warm["seconds"],
            "warmup_steps": warm["steps"],
        }
        if kernel:
            pa_cfg = dict(cfg["phase_a"])
            res = phase_a(model, prep["train"], seed=seed, **pa_cfg)
            rec.update(res.summary())
            rec["phase_a_eta"] = res.eta
            rec["align_heldout_before_layers"] = res.align_heldout_before
            rec["align_heldout_after_layers"] = res.align_heldout_after
        pb = phase_b(model, prep["train"], epochs=tr["phase_b_epochs"], seed=seed + 7919, **common)
        rec["phase_b_seconds"] = pb["seconds"]
        rec["phase_b_steps"] = pb["steps"]
        rec["final_train_loss"] = pb["final_loss"]
        rec.update(_evaluate(model, prep))
        rec["wall_seconds"] = time.perf_counter() - t0
        _write_json(runs_dir / f"{key}.json", rec)
        log(
            f"{key}: acc={rec['accuracy']:.4f} mcc={rec['mcc']:.3f} ece={rec['ece']:.4f} "
            f"({rec['wall_seconds']:.1f}s)"
        )
        done += 1
    return done


# ---------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------
def _mean_std(vals):
    vals = np.asarray(vals, dtype=float)
    sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else float("nan")
    return float(np.mean(vals)), sd


def _fmt(m, s, digits=4):
    return f"{m:.{digits}f} ± {s:.{digits}f}" if math.isfinite(s) else f"{m:.{digits}f}"


def load_runs(runs_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(runs_dir.glob("*.json"))]


def variant_order(cfg) -> list[str]:
    order = ["softmax"]
    for f in cfg["features"]:
        order += [variant_name(f, False), variant_name(f, True)]
    return order


def write_report(cfg: dict, out: Path, figures: bool = True) -> dict:
    """results.csv, table.md/csv, paired.md/csv, phase_a.md and figures from the run files."""
    runs = load_runs(out / "runs")
    if not runs:
        raise RuntimeError(f"no finished runs under {out / 'runs'}")
    scalar_keys = [k for k in runs[0] if not isinstance(runs[0][k], list)]
    all_keys = sorted(
        {k for r in runs for k in r if not isinstance(r[k], list)},
        key=lambda k: (k not in scalar_keys, k),
    )
    with open(out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=all_keys, extrasaction="ignore")
        w.writeheader()
        for r in runs:
            w.writerow(r)
    datasets = [d["name"] for d in cfg["datasets"]]
    order = variant_order(cfg)
    groups = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["variant"], bool(r["tie_qk"])), []).append(r)
    # main table
    rows = []
    for d in datasets:
        for v in order:
            for qk in cfg["tie_qk"]:
                g = groups.get((d, v, bool(qk)))
                if not g:
                    continue
                row = {"dataset": d, "variant": v, "Q=K": "on" if qk else "off", "seeds": len(g)}
                for m in METRIC_NAMES:
                    row[m], row[m + "_std"] = _mean_std([r[m] for r in g])
                rows.append(row)
    with open(out / "table.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    head = (
        "| data set | variant | Q=K | seeds | "
        + " | ".join(f"{m} {'↓' if m in LOWER_BETTER else '↑'}" for m in METRIC_NAMES)
        + " |"
    )
    lines = [head, "|" + "---|" * (4 + len(METRIC_NAMES))]
    for row in rows:
        cells = [_fmt(row[m], row[m + "_std"]) for m in METRIC_NAMES]
        lines.append(
            f"| {row['dataset']} | {row['variant']} | {row['Q=K']} | {row['seeds']} | "
            + " | ".join(cells)
            + " |"
        )
    (out / "table.md").write_text(
        "Mean ± sample standard deviation over seeds (evaluation split of each data set).\n\n"
        + "\n".join(lines)
        + "\n"
    )
    # paired differences Kernel-X - vanilla X
    prow = []
    for d in datasets:
        for f in cfg["features"]:
            for qk in cfg["tie_qk"]:
                van = {r["seed"]: r for r in groups.get((d, variant_name(f, False), bool(qk)), [])}
                ker = {r["seed"]: r for r in groups.get((d, variant_name(f, True), bool(qk)), [])}
                seeds = sorted(set(van) & set(ker))
                if not seeds:
                    continue
                row = {
                    "dataset": d,
                    "feature": FEATURE_LABEL[f],
                    "Q=K": "on" if qk else "off",
                    "seeds": len(seeds),
                }
                for m in METRIC_NAMES:
                    diff = [ker[s][m] - van[s][m] for s in seeds]
                    better = sum((x < 0) if m in LOWER_BETTER else (x > 0) for x in diff)
                    row[m], row[m + "_std"] = _mean_std(diff)
                    row[m + "_wins"] = better
                prow.append(row)
    if prow:
        with open(out / "paired.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(prow[0]))
            w.writeheader()
            w.writerows(prow)
        lines = [
            "| data set | X | Q=K | seeds | " + " | ".join(f"Δ{m}" for m in METRIC_NAMES) + " |",
            "|" + "---|" * (4 + len(METRIC_NAMES)),
        ]
        for row in prow:
            cells = [
                f"{_fmt(row[m], row[m + '_std'])} ({row[m + '_wins']}/{row['seeds']})"
                for m in METRIC_NAMES
            ]
            lines.append(
                f"| {row['dataset']} | {row['feature']} | {row['Q=K']} | {row['seeds']} | "
                + " | ".join(cells)
                + " |"
            )
        (out / "paired.md").write_text(
            "Kernel-X minus vanilla X, paired by seed (same warm-up and data order): mean ± "
            "sample std; in brackets the number of seeds where Kernel-X is better (higher "
            "accuracy/MCC, lower ECE/log loss/Brier).\n\n" + "\n".join(lines) + "\n"
        )
    # Phase A diagnostics and cost
    plines = [
        "| data set | X | Q=K | held-out alignment vanilla | held-out alignment learned | "
        "Phase A s | Phase B s | Phase A / Phase B |",
        "|---|---|---|---|---|---|---|---|",
    ]
    cost = []
    for d in datasets:
        for f in cfg["features"]:
            for qk in cfg["tie_qk"]:
                g = groups.get((d, variant_name(f, True), bool(qk)))
                if not g:
                    continue
                hb = _mean_std([r["align_heldout_before"] for r in g])
                ha = _mean_std([r["align_heldout_after"] for r in g])
                sa = _mean_std([r["phase_a_seconds"] for r in g])
                sb = _mean_std([r["phase_b_seconds"] for r in g])
                ratio = _mean_std([r["phase_a_seconds"] / r["phase_b_seconds"] for r in g])
                cost.append(ratio[0])
                plines.append(
                    f"| {d} | {FEATURE_LABEL[f]} | {'on' if qk else 'off'} | "
                    f"{_fmt(*hb)} | {_fmt(*ha)} | {_fmt(*sa, 2)} | {_fmt(*sb, 2)} | "
                    f"{_fmt(*ratio, 3)} |"
                )
    (out / "phase_a.md").write_text(
        "Normalised (Cristianini) alignment of the attention kernel with the labels on held-out "
        "training sequences (pooled per-head keys, mean over layers), before (vanilla Omega) and "
        "after Phase A; Phase A time (representations + Langevin) against Phase B time.\n\n"
        + "\n".join(plines)
        + "\n"
    )
    if figures:
        _figures(cfg, rows, runs, out)
    return {"rows": rows, "paired": prow, "phase_a_over_b": float(np.mean(cost)) if cost else None}


def _figures(cfg, rows, runs, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figdir = out / "figures"
    figdir.mkdir(exist_ok=True)
    datasets = [d["name"] for d in cfg["datasets"]]
    order = variant_order(cfg)
    fig, axes = plt.subplots(
        len(datasets),
        len(METRIC_NAMES),
        figsize=(3.2 * len(METRIC_NAMES), 2.6 * len(datasets)),
        squeeze=False,
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, d in enumerate(datasets):
        for j, m in enumerate(METRIC_NAMES):
            ax = axes[i, j]
            for q, qk in enumerate(cfg["tie_qk"]):
                xs, ys, es = [], [], []
                for k, v in enumerate(order):
                    r = next(
                        (
                            r
                            for r in rows
                            if r["dataset"] == d
                            and r["variant"] == v
                            and r["Q=K"] == ("on" if qk else "off")
                        ),
                        None,
                    )
                    if r is None:
                        continue
                    xs.append(k + 0.38 * (q - 0.5 * (len(cfg["tie_qk"]) - 1)))
                    ys.append(r[m])
                    es.append(0.0 if not math.isfinite(r[m + "_std"]) else r[m + "_std"])
                ax.bar(
                    xs,
                    ys,
                    width=0.36,
                    yerr=es,
                    color=colors[q],
                    capsize=2,
                    label=f"Q=K {'on' if qk else 'off'}",
                )
            ax.set_xticks(range(len(order)))
            ax.set_xticklabels(order, rotation=60, ha="right", fontsize=7)
            ax.set_title(f"{d}: {m}", fontsize=9)
            lo = (
                min(
                    (r[m] - (r[m + "_std"] if math.isfinite(r[m + "_std"]) else 0))
                    for r in rows
                    if r["dataset"] == d
                )
                if rows
                else 0
            )
            if m in ("accuracy", "log_loss", "brier"):  # small differences on a large offset
                hi = max(
                    r[m] + (r[m + "_std"] if math.isfinite(r[m + "_std"]) else 0)
                    for r in rows
                    if r["dataset"] == d
                )
                pad = 0.15 * (hi - lo) + 1e-3
                ax.set_ylim(max(0.0, lo - pad), hi + pad)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(figdir / "metrics.png", dpi=120)
    plt.close(fig)
    # held-out alignment before/after Phase A, per kernel run
    kr = [r for r in runs if r.get("kernel")]
    if kr:
        fig, ax = plt.subplots(figsize=(5, 4))
        for k, f in enumerate(cfg["features"]):
            pts = [
                (r["align_heldout_before"], r["align_heldout_after"])
                for r in kr
                if r["feature"] == f
            ]
            if pts:
                a, b = zip(*pts, strict=True)
                ax.scatter(a, b, s=14, color=colors[k], label=FEATURE_LABEL[f])
        lim = max(max(r["align_heldout_before"], r["align_heldout_after"]) for r in kr) * 1.1
        ax.plot([0, lim], [0, lim], "k--", lw=0.8)
        ax.set_xlabel("held-out alignment, vanilla Ω")
        ax.set_ylabel("held-out alignment, Phase-A Ω")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(figdir / "alignment.png", dpi=120)
        plt.close(fig)


# ---------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------
def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="JSON configuration file")
    ap.add_argument(
        "--data-dir",
        default=None,
        help="root of sst2/, rotten_tomatoes/, qqp/ (default $MEANFIELD_DATA_DIR)",
    )
    ap.add_argument("--out", required=True, help="output directory (resumed if it exists)")
    ap.add_argument("--report-only", action="store_true", help="only rebuild tables/figures")
    ap.add_argument("--no-figures", action="store_true", help="skip the figures")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    out = Path(args.out)
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)

    def log(msg):
        if not args.quiet:
            print(msg, flush=True)

    done = 0
    if not args.report_only:
        data_dir = resolve_data_dir(args.data_dir)
        torch.set_num_threads(int(cfg.get("threads", 1)))
        resolved = {
            **cfg,
            "config_file": str(args.config),
            "data_dir": str(data_dir),
            "meanfield_version": __version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": sys.version.split()[0],
            "machine": f"{platform.machine()} {platform.processor()} {os.cpu_count()} cpus",
            "torch_threads": torch.get_num_threads(),
        }
        _write_json(out / "config.json", resolved)
        t_start = time.perf_counter()
        for ds_cfg in cfg["datasets"]:
            prep = None
            for seed in cfg["seeds"]:
                for qk in cfg["tie_qk"]:
                    for feature in [None] + list(cfg["features"]):
                        members = [False] if feature is None else [False, True]
                        keys = [run_key(ds_cfg["name"], feature, k, qk, seed) for k in members]
                        if all((runs_dir / f"{k}.json").is_file() for k in keys):
                            continue
                        if prep is None:
                            prep = prepare_dataset(ds_cfg, cfg, data_dir, out)
                            log(
                                f"{ds_cfg['name']}: {prep['n_train']} train / {prep['n_eval']} "
                                f"eval examples, vocabulary {prep['vocab_size']}"
                            )
                        done += run_group(ds_cfg, cfg, prep, feature, qk, seed, runs_dir, log)
        log(f"{done} run(s) done in {time.perf_counter() - t_start:.1f}s")
    report = write_report(cfg, out, figures=not args.no_figures)
    report["runs_done"] = done
    return report


if __name__ == "__main__":
    main()
