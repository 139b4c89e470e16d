"""The kernel-attention study: does Kernel-X beat vanilla X? Resumable, paired, with controls.

Design (README.md in this directory gives the reasoning)
--------------------------------------------------------
For every data set, seed, Q = K setting and attention kind (softmax, or a feature map X) one
*group* of runs shares a warm-up:

1. **warm-up**: ``train.warmup_epochs`` epochs of cross-entropy training from the seed's
   initialisation (vanilla random ``Omega``);
2. a **branch** per variant, each from the warmed-up weights:

   * ``softmax`` / ``vanilla``: nothing;
   * ``kernel``: Phase A (:func:`meanfield.attention.phases.phase_a`, settings ``phase_a``);
   * controls (``controls``, one feature map on chosen data sets): ``redraw`` (a fresh
     prior ``Omega`` at the same point), ``priornorms`` (Phase A's directions with the prior
     row norms), ``lam0`` (Phase A without repulsion), ``atinit`` (Phase A on the *initial*
     model, then the same warm-up; it does not share the warm-up);

3. **Phase B**: every parameter but ``Omega`` trained to convergence: early stopping on the
   validation log loss (a stratified split carved from the training data, shared by all
   runs of a data set), at most ``train.max_epochs``; the best parameters are restored.

Vanilla and every branch of a group share the warm-up and the Phase B data order, so their
differences are paired by seed. Every run is evaluated on the clean evaluation split and on
a token-noised copy of it (:func:`meanfield.attention.noise.perturb_tokens`, the same noise
for every variant). A TF-IDF + logistic-regression baseline (scikit-learn, ``C`` by 5-fold
CV) is trained on the same training examples as the sanity bar for the softmax model.

Each finished run is written at once to ``<out>/runs/<key>.json`` (atomically); a rerun skips
finished runs, so an interrupted study resumes (seed-major order within a data set, so a
partial study has whole seeds). ``--report-only`` rebuilds the reports.

Outputs in ``<out>``: ``results.csv`` (one row per run), ``table.md``/``table.csv`` (mean and
95 % t-interval over seeds, clean and noisy; the TF-IDF bar), ``paired.md``/``paired.csv``
(each branch minus vanilla, paired by seed, 95 % CI), ``claims.md`` (each claim of the paper:
yes / no / inconclusive, with CIs), ``phase_a.md`` (what Phase A did, per layer means),
``training.md`` (epochs, steps, early stopping, wall time, machine), ``figures/*.png``,
``config.json`` (resolved configuration, versions, machine).

Usage::

    python paper_repro/nlp/run_study.py --config paper_repro/nlp/configs/tiny.json \\
        --data-dir tests/fixtures/nlp --out /tmp/nlp_tiny
    python paper_repro/nlp/run_study.py --config paper_repro/nlp/configs/full.json \\
        --data-dir ../shared/data --out paper_repro/nlp/results/full [--device cuda]
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
import warnings
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from meanfield import __version__
from meanfield.attention.data import load_split, resolve_data_dir
from meanfield.attention.metrics import METRIC_NAMES, classification_metrics
from meanfield.attention.model import TransformerClassifier
from meanfield.attention.noise import perturb_tokens
from meanfield.attention.phases import encode, phase_a, phase_b, predict_proba
from meanfield.attention.tokenizer import TextTokenizer
from meanfield.attention.training import train, validation_indices

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
#: lower is better for these metrics
LOWER_BETTER = {"ece", "log_loss", "brier", "noisy_ece", "noisy_log_loss", "noisy_brier"}
REPORT_METRICS = list(METRIC_NAMES) + ["noisy_accuracy", "noisy_ece"]

REQUIRED = ("name", "datasets", "features", "seeds", "tokenizer", "model", "train", "phase_a")
TRAIN_KEYS = ("batch_size", "lr", "weight_decay", "warmup_epochs", "max_epochs", "patience")


# ---------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------
def load_config(path) -> dict:
    """Read and check a JSON study configuration (every check before any work)."""
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
    if not cfg["seeds"] or len(set(cfg["seeds"])) != len(cfg["seeds"]):
        raise ValueError(f"{path}: seeds must be a non-empty list of distinct integers")
    missing = [k for k in TRAIN_KEYS if k not in cfg["train"]]
    if missing:
        raise ValueError(f"{path}: missing train keys {missing}")
    names = [d["name"] for d in cfg["datasets"]]
    ctl = cfg.get("controls")
    if ctl:
        if ctl.get("feature") not in cfg["features"]:
            raise ValueError(f"{path}: controls.feature must be one of {cfg['features']}")
        bad = [k for k in ctl.get("kinds", []) if k not in CONTROLS]
        if bad:
            raise ValueError(f"{path}: unknown controls {bad}; choose from {list(CONTROLS)}")
        bad = [d for d in ctl.get("datasets", []) if d not in names]
        if bad:
            raise ValueError(f"{path}: controls.datasets {bad} not among the data sets {names}")
    rate = cfg.get("noise", {}).get("rate", 0.1)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"{path}: noise.rate must be in [0, 1), got {rate}")
    return cfg


def tie_settings(ds_cfg: dict, cfg: dict) -> list[bool]:
    return [bool(q) for q in ds_cfg.get("tie_qk", cfg.get("tie_qk", [False]))]


def branches_for(ds_name: str, feature: str | None, cfg: dict) -> list[str]:
    if feature is None:
        return ["softmax"]
    out = list(BRANCHES)
    ctl = cfg.get("controls") or {}
    if feature == ctl.get("feature") and ds_name in ctl.get("datasets", []):
        out += list(ctl.get("kinds", CONTROLS))
    return out


def variant_name(feature: str | None, branch: str) -> str:
    if feature is None:
        return "softmax"
    return BRANCH_LABEL[branch].format(X=FEATURE_LABEL[feature])


def run_key(dataset: str, feature: str | None, branch: str, qk: bool, seed: int) -> str:
    v = "softmax" if feature is None else f"{branch}-{feature}"
    return f"{dataset}__{v}__qk{int(qk)}__s{seed}"


# ---------------------------------------------------------------------------------------
# data (prepared once per data set)
# ---------------------------------------------------------------------------------------
def prepare_dataset(ds_cfg: dict, cfg: dict, data_dir, out: Path) -> dict:
    """Load, subsample, split and tokenise one data set (tokenizer from its train split)."""
    task, source = ds_cfg["task"], ds_cfg.get("source", "auto")
    train_raw = load_split(task, ds_cfg["train_split"], data_dir, source=source)
    eval_raw = load_split(task, ds_cfg["eval_split"], data_dir, source=source)
    rng = np.random.default_rng(cfg.get("data_seed", 12345))
    if ds_cfg.get("max_train") and len(train_raw) > ds_cfg["max_train"]:
        train_raw = train_raw.subset(
            np.sort(rng.permutation(len(train_raw))[: ds_cfg["max_train"]])
        )
    if ds_cfg.get("max_eval") and len(eval_raw) > ds_cfg["max_eval"]:
        eval_raw = eval_raw.subset(np.sort(rng.permutation(len(eval_raw))[: ds_cfg["max_eval"]]))
    tok_path = out / "runs" / "tokenizers" / f"{ds_cfg['name']}.json"
    if tok_path.is_file():
        tok = TextTokenizer.load(tok_path)
    else:
        texts = list(train_raw.text_a) + (list(train_raw.text_b) if train_raw.is_pair else [])
        tok = TextTokenizer.train(texts, **cfg["tokenizer"])
        tok.save(tok_path)
    L = cfg["model"]["max_length"]
    # one stratified validation split per data set, shared by every run and by the baseline
    frac = cfg.get("validation_fraction", 0.1)
    val_idx = validation_indices(train_raw.labels, frac, cfg.get("data_seed", 12345))
    train_idx = np.setdiff1d(np.arange(len(train_raw)), val_idx)
    full = encode(tok, train_raw, L)
    train, val = full.subset(train_idx), full.subset(val_idx)
    ev = encode(tok, eval_raw, L)
    noise = cfg.get("noise", {})
    noisy = perturb_tokens(ev, noise.get("rate", 0.1), tok.vocab_size, noise.get("seed", 777))
    eval_lengths = ev.lengths.numpy()
    return {
        "train": train,
        "val": val,
        "eval": ev,
        "eval_noisy": noisy,
        "eval_labels": np.asarray(eval_raw.labels),
        "train_raw": train_raw,
        "eval_raw": eval_raw,
        "train_idx": train_idx,
        "pair": train_raw.is_pair,
        "vocab_size": tok.vocab_size,
        "n_train": len(train),
        "n_val": len(val),
        "n_eval": len(ev),
        "eval_truncated": float(np.mean(eval_lengths >= L)),
        "train_source": train_raw.source,
        "eval_source": eval_raw.source,
    }


def tfidf_baseline(prep: dict) -> dict:
    """TF-IDF (1-2-grams) + logistic regression on the same training examples (C by 5-fold CV).

    Pairs are represented by ``[|a - b|, a * b]`` of the two TF-IDF vectors (symmetric in the
    two questions), single sentences by their TF-IDF vector.
    """
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegressionCV

    t0 = time.perf_counter()
    tr_raw, ev_raw = prep["train_raw"], prep["eval_raw"]
    # the same examples the networks train on: the validation split is left out
    tr = tr_raw.subset(prep["train_idx"])
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

    clf = LogisticRegressionCV(
        Cs=[0.1, 0.3, 1, 3, 10, 30], cv=5, scoring="neg_log_loss", max_iter=2000
    )
    with warnings.catch_warnings():  # scikit-learn's notices of future default changes
        warnings.simplefilter("ignore", FutureWarning)
        clf.fit(feats(tr), np.asarray(tr.labels))
    probs = clf.predict_proba(feats(ev_raw))
    rec = classification_metrics(prep["eval_labels"], probs)
    rec.update({"C": float(clf.C_[0]), "n_train": len(tr), "seconds": time.perf_counter() - t0})
    return rec


# ---------------------------------------------------------------------------------------
# one group of runs
# ---------------------------------------------------------------------------------------
def _write_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(obj, indent=1, default=float))
    os.replace(tmp, path)


def _evaluate(model, prep) -> dict:
    rec = classification_metrics(prep["eval_labels"], predict_proba(model, prep["eval"]))
    noisy = classification_metrics(prep["eval_labels"], predict_proba(model, prep["eval_noisy"]))
    rec.update({f"noisy_{k}": v for k, v in noisy.items()})
    return rec


def _train_info(prefix: str, info: dict) -> dict:
    keys = ("steps", "epochs", "best_epoch", "best_val_loss", "stopped_early", "seconds")
    out = {f"{prefix}_{k}": info[k] for k in keys}
    out[f"{prefix}_history"] = [list(h) for h in info["history"]]
    return out


def _new_model(prep, cfg, feature, qk, seed, device):
    return TransformerClassifier(
        prep["vocab_size"],
        attention="softmax" if feature is None else feature,
        tie_qk=qk,
        pair=prep["pair"],
        seed=seed,
        **cfg["model"],
    ).to(device)


def run_group(ds_cfg, cfg, prep, feature, qk, seed, runs_dir: Path, device, log) -> int:
    """Warm-up once, then every branch of the group that has no run file. Returns #runs."""
    name = ds_cfg["name"]
    todo = [
        b
        for b in branches_for(name, feature, cfg)
        if not (runs_dir / (run_key(name, feature, b, qk, seed) + ".json")).is_file()
    ]
    if not todo:
        return 0
    tr = cfg["train"]
    common = dict(batch_size=tr["batch_size"], lr=tr["lr"], weight_decay=tr["weight_decay"])
    stop = dict(
        validation=prep["val"],
        max_epochs=tr["max_epochs"],
        patience=tr["patience"],
        eval_every=tr.get("eval_every", 0.5),
    )

    def warm_up(model):
        return train(model, prep["train"], epochs=tr["warmup_epochs"], seed=seed, **common)

    model = _new_model(prep, cfg, feature, qk, seed, device)
    warm = None
    if any(b != "atinit" for b in todo):
        warm = warm_up(model)
        warm_state = copy.deepcopy(model.state_dict())
    done = 0
    for branch in todo:
        key = run_key(name, feature, branch, qk, seed)
        t0 = time.perf_counter()
        rec = {
            "dataset": name,
            "variant": variant_name(feature, branch),
            "feature": feature or "softmax",
            "branch": branch,
            "tie_qk": qk,
            "seed": seed,
            "n_train": prep["n_train"],
            "n_val": prep["n_val"],
            "n_eval": prep["n_eval"],
            "device": str(device),
        }
        pa_cfg = dict(cfg["phase_a"])
        if branch == "atinit":
            model = _new_model(prep, cfg, feature, qk, seed, device)
            res = phase_a(model, prep["train"], seed=seed, **pa_cfg)
            info_w = warm_up(model)
        else:
            model.load_state_dict(warm_state)
            info_w = warm
            res = None
            if branch == "redraw":
                for layer, fm in enumerate(model.feature_maps()):
                    fm.new_feature_map(10_000 + 97 * seed + layer)  # never an init seed
            elif branch in ("kernel", "priornorms", "lam0"):
                if branch == "priornorms":
                    pa_cfg["norms"] = "prior"
                if branch == "lam0":
                    pa_cfg.update(repulsion_ratio=0.0, lam=None)
                res = phase_a(model, prep["train"], seed=seed, **pa_cfg)
        rec.update(_train_info("warmup", info_w))
        if res is not None:
            rec.update(res.summary())
        pb = phase_b(model, prep["train"], seed=seed + 7919, **common, **stop)
        rec.update(_train_info("phase_b", pb))
        rec.update(_evaluate(model, prep))
        shared = warm["seconds"] if branch != "atinit" else 0.0  # the shared warm-up
        rec["wall_seconds"] = time.perf_counter() - t0 + shared
        _write_json(runs_dir / f"{key}.json", rec)
        log(
            f"{key}: acc={rec['accuracy']:.4f} noisy={rec['noisy_accuracy']:.4f} "
            f"ece={rec['ece']:.4f} phase B {pb['epochs']:.1f} ep (best {pb['best_epoch']:.1f}) "
            f"{time.perf_counter() - t0:.0f}s"
        )
        done += 1
    return done


# ---------------------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------------------
def mean_ci(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and the two-sided Student-t confidence interval (nan bounds with one value)."""
    v = np.asarray(values, dtype=float)
    m = float(v.mean())
    if len(v) < 2:
        return m, float("nan"), float("nan")
    half = float(stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return m, m - half, m + half


def _fmt_ci(m, lo, hi, digits=4) -> str:
    if not math.isfinite(lo):
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {(hi - lo) / 2:.{digits}f}"


def _fmt_diff(m, lo, hi, digits=4) -> str:
    if not math.isfinite(lo):
        return f"{m:+.{digits}f}"
    return f"{m:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def paired(groups, a, b, metric):
    """Paired differences a - b over common seeds: (mean, lo, hi, n, wins of a)."""
    ra = {r["seed"]: r for r in groups.get(a, [])}
    rb = {r["seed"]: r for r in groups.get(b, [])}
    seeds = sorted(set(ra) & set(rb))
    if not seeds:
        return None
    d = [ra[s][metric] - rb[s][metric] for s in seeds]
    wins = sum((x < 0) if metric in LOWER_BETTER else (x > 0) for x in d)
    m, lo, hi = mean_ci(d)
    return m, lo, hi, len(seeds), wins


def verdict_better(m, lo, hi, metric) -> str:
    """'yes' if the CI excludes 0 in the favourable direction, 'no' if in the other one."""
    if not math.isfinite(lo):
        return "inconclusive (one seed)"
    good = hi < 0 if metric in LOWER_BETTER else lo > 0
    bad = lo > 0 if metric in LOWER_BETTER else hi < 0
    return "yes" if good else ("no" if bad else "inconclusive")


def claim_best(groups, dataset, target, rivals, metric) -> tuple[str, list[str]]:
    """Is ``target`` the best of ``rivals`` in ``metric``? Paired CIs against each rival.

    yes: every paired difference favours the target with a CI excluding 0; no: some rival
    has a better mean, with a CI excluding 0; otherwise inconclusive.
    """
    lines, verdicts = [], []
    for rv in rivals:
        p = paired(groups, (dataset, *target), (dataset, *rv), metric)
        if p is None:
            continue
        m, lo, hi, n, _ = p
        v = verdict_better(m, lo, hi, metric)
        verdicts.append(v)
        lines.append(f"vs {rv[0]} (Q=K {'on' if rv[1] else 'off'}): {_fmt_diff(m, lo, hi)}, n={n}")
    if not verdicts:
        return "not run", lines
    if all(v == "yes" for v in verdicts):
        return "yes", lines
    if any(v == "no" for v in verdicts):
        return "no", lines
    return "inconclusive", lines


# ---------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------
#: the paper's claims: (data set, target variant, Q=K, metrics, kind); "best" = best of all
#: main variants of the data set, "vs vanilla" = better than vanilla X paired by seed
PAPER_CLAIMS = [
    ("sst2", ("porf-softplus", "kernel"), False, ("accuracy", "mcc"), "best"),
    ("sst2", ("favor", "kernel"), False, ("ece",), "best"),
    ("qqp", ("softmaxfeat", "kernel"), True, ("log_loss", "brier"), "vs vanilla"),
    (
        "rotten_tomatoes",
        ("softmaxfeat", "kernel"),
        False,
        ("accuracy", "mcc", "log_loss", "brier"),
        "best",
    ),
]


def load_runs(runs_dir: Path) -> list[dict]:
    paths = sorted(runs_dir.glob("*__qk*__s*.json"))  # not the baseline__<data set> files
    return [json.loads(p.read_text()) for p in paths]


def _group_runs(runs):
    groups = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["variant"], bool(r["tie_qk"])), []).append(r)
    return groups


def _variants(cfg, ds_cfg) -> list[tuple[str, bool, str | None, str]]:
    """(variant name, qk, feature, branch) for a data set, in table order."""
    out = []
    for qk in tie_settings(ds_cfg, cfg):
        out.append(("softmax", qk, None, "softmax"))
        for f in cfg["features"]:
            for b in branches_for(ds_cfg["name"], f, cfg):
                out.append((variant_name(f, b), qk, f, b))
    return out


def _md_table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _write_csv(path, rows):
    if not rows:
        return
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_report(cfg: dict, out: Path, figures: bool = True) -> dict:
    """Every report file from the run files (and the baselines) under ``out/runs``."""
    runs = load_runs(out / "runs")
    if not runs:
        raise RuntimeError(f"no finished runs under {out / 'runs'}")
    keys = sorted({k for r in runs for k in r if not isinstance(r[k], list | dict)})
    with open(out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(runs)
    groups = _group_runs(runs)
    baselines = {
        d["name"]: json.loads(p.read_text())
        for d in cfg["datasets"]
        if (p := out / "runs" / f"baseline__{d['name']}.json").is_file()
    }
    rows, md = (
        [],
        [
            "Mean ± half-width of the 95 % t-interval over seeds, on the evaluation split (clean) "
            f"and on the same split with {100 * cfg.get('noise', {}).get('rate', 0.1):.0f} % token "
            "noise (drops/swaps). ↑ higher is better, ↓ lower is better.\n"
        ],
    )
    head = ["variant", "Q=K", "seeds"] + [
        f"{m} {'↓' if m in LOWER_BETTER else '↑'}" for m in REPORT_METRICS
    ]
    for ds in cfg["datasets"]:
        d = ds["name"]
        body = []
        for v, qk, _, _ in _variants(cfg, ds):
            g = groups.get((d, v, qk))
            if not g:
                continue
            row = {"dataset": d, "variant": v, "Q=K": "on" if qk else "off", "seeds": len(g)}
            cells = []
            for m in REPORT_METRICS:
                mu, lo, hi = mean_ci([r[m] for r in g])
                row.update({m: mu, m + "_lo": lo, m + "_hi": hi})
                cells.append(_fmt_ci(mu, lo, hi))
            rows.append(row)
            body.append([v, row["Q=K"], len(g)] + cells)
        if not body:
            continue
        md.append(f"\n## {d}\n")
        b = baselines.get(d)
        if b:
            body.append(
                [f"TF-IDF + LR (C = {b['C']:g})", "", "-"]
                + [f"{b[m]:.4f}" if m in b else "" for m in REPORT_METRICS]
            )
        md.append(_md_table(head, body))
        sm = groups.get((d, "softmax", False))
        if b and sm:
            acc = float(np.mean([r["accuracy"] for r in sm]))
            gap = b["accuracy"] - acc
            ok = "meets" if gap <= 0.02 else "does NOT meet"
            md.append(
                f"\nSanity bar: softmax accuracy {acc:.4f} vs TF-IDF + LR {b['accuracy']:.4f} "
                f"(gap {100 * gap:+.1f} points): the softmax model {ok} the bar of 2 points.\n"
            )
    _write_csv(out / "table.csv", rows)
    (out / "table.md").write_text("".join(md))
    prow = _paired_report(cfg, groups, out)
    _claims_report(cfg, groups, out)
    _phase_a_report(cfg, groups, out)
    _training_report(cfg, groups, out)
    if figures:
        _figures(cfg, rows, runs, out)
    return {"rows": rows, "paired": prow, "baselines": baselines}


def _paired_report(cfg, groups, out: Path) -> list[dict]:
    prow, md = (
        [],
        [
            "Each branch minus vanilla X, paired by seed (same warm-up, same Phase B data order): "
            "mean [95 % t-interval]; in brackets after it, the seeds where the branch is better.\n"
        ],
    )
    metrics = ("accuracy", "mcc", "ece", "log_loss", "brier", "noisy_accuracy")
    for ds in cfg["datasets"]:
        d, body = ds["name"], []
        for qk in tie_settings(ds, cfg):
            for f in cfg["features"]:
                base = (d, variant_name(f, "vanilla"), qk)
                for b in branches_for(d, f, cfg)[1:]:
                    cells, row = [], None
                    for m in metrics:
                        p = paired(groups, (d, variant_name(f, b), qk), base, m)
                        if p is None:
                            break
                        mu, lo, hi, n, wins = p
                        row = row or {"dataset": d, "feature": f, "branch": b, "Q=K": qk, "n": n}
                        row.update({m: mu, m + "_lo": lo, m + "_hi": hi, m + "_wins": wins})
                        cells.append(f"{_fmt_diff(mu, lo, hi)} ({wins}/{n})")
                    if row:
                        prow.append(row)
                        body.append([variant_name(f, b), "on" if qk else "off", row["n"]] + cells)
        if body:
            md.append(f"\n## {d}\n")
            md.append(_md_table(["branch", "Q=K", "seeds"] + [f"Δ{m}" for m in metrics], body))
    _write_csv(out / "paired.csv", prow)
    (out / "paired.md").write_text("".join(md))
    return prow


def _claims_report(cfg, groups, out: Path) -> None:
    md = [
        "Each claim of the paper, answered from this study's runs. 'best': paired difference "
        "(target minus rival, same seeds) against every other main variant of the data set; "
        "yes = every 95 % CI excludes 0 in the target's favour, no = some rival is better with "
        "a CI excluding 0, inconclusive otherwise.\n"
    ]
    names = {d["name"]: d for d in cfg["datasets"]}
    for d, (f, b), qk, metrics, kind in PAPER_CLAIMS:
        label = f"{d}: {variant_name(f, b)} (Q=K {'on' if qk else 'off'})"
        if d not in names or f not in cfg["features"]:
            md.append(f"\n### {label}: {kind} in {', '.join(metrics)}\nnot in this study\n")
            continue
        target = (variant_name(f, b), qk)
        if kind == "best":
            rivals = [
                (v, q)
                for v, q, _, br in _variants(cfg, names[d])
                if br in ("softmax", "vanilla", "kernel") and (v, q) != target
            ]
        else:
            rivals = [(variant_name(f, "vanilla"), qk)]
        md.append(f"\n### {label}: {kind} in {', '.join(metrics)}\n")
        for m in metrics:
            verdict, lines = claim_best(groups, d, target, rivals, m)
            md.append(f"- **{m}: {verdict}**" + ("".join(f"\n  - {x}" for x in lines)) + "\n")
    md.append("\n### Kernel-X vs vanilla X (the headline question), accuracy\n")
    for ds in cfg["datasets"]:
        for qk in tie_settings(ds, cfg):
            for f in cfg["features"]:
                p = paired(
                    groups,
                    (ds["name"], variant_name(f, "kernel"), qk),
                    (ds["name"], variant_name(f, "vanilla"), qk),
                    "accuracy",
                )
                if p:
                    v = verdict_better(*p[:3], "accuracy")
                    md.append(
                        f"- {ds['name']}, {FEATURE_LABEL[f]}, Q=K {'on' if qk else 'off'}: "
                        f"{_fmt_diff(*p[:3])}, n={p[3]}: **{v}**\n"
                    )
    md.extend(_kernel_vs_controls(cfg, groups))
    (out / "claims.md").write_text("".join(md))


def _kernel_vs_controls(cfg, groups) -> list[str]:
    """Kernel-X minus each control, paired by seed: what of Kernel-X's effect Phase A owns.

    A gain over vanilla X that a control matches (e.g. a fresh draw of Ω at the same point)
    is not the learned particles' doing; only a difference to the controls is.
    """
    ctl = cfg.get("controls") or {}
    f = ctl.get("feature")
    md = []
    for d in ctl.get("datasets", []):
        for qk in tie_settings(next(x for x in cfg["datasets"] if x["name"] == d), cfg):
            kern = (d, variant_name(f, "kernel"), qk)
            lines = []
            for b in ctl.get("kinds", []):
                cells = []
                for m in ("accuracy", "log_loss"):
                    p = paired(groups, kern, (d, variant_name(f, b), qk), m)
                    if p:
                        v = verdict_better(*p[:3], m)
                        cells.append(f"Δ{m} {_fmt_diff(*p[:3])} (n={p[3]}, better: {v})")
                if cells:
                    lines.append(f"- minus {variant_name(f, b)}: " + "; ".join(cells) + "\n")
            if lines:
                md.append(
                    f"\n### {d}: {variant_name(f, 'kernel')} (Q=K {'on' if qk else 'off'}) minus "
                    "each control, paired by seed\n"
                )
                md.extend(lines)
    return md


PHASE_A_COLUMNS = (
    ("row_norm_before", "|ω| before"),
    ("row_norm_after", "|ω| after"),
    ("prior_row_norm", "prior E|ω|"),
    ("frac_on_boundary", "on boundary"),
    ("align_heldout_before", "held-out align before"),
    ("align_heldout_after", "held-out align after"),
    ("force_ratio_before", "|rep|/|align| before"),
    ("force_ratio_after", "|rep|/|align| after"),
    ("tv_to_softmax_before", "TV to softmax before"),
    ("tv_to_softmax_after", "TV to softmax after"),
    ("entropy_before", "entropy before"),
    ("entropy_after", "entropy after"),
    ("entropy_softmax", "entropy softmax"),
    ("phase_a_seconds", "Phase A s"),
)


def _phase_a_report(cfg, groups, out: Path) -> None:
    md = [
        "What Phase A did (means over seeds of the per-layer means; alignment = the configured "
        "form on held-out training sequences; TV = mean total-variation distance of the "
        "attention rows to softmax(qᵀk/√d) on held-out sequences).\n\n"
    ]
    body = []
    for ds in cfg["datasets"]:
        for v, qk, _, b in _variants(cfg, ds):
            g = groups.get((ds["name"], v, qk))
            if not g or b not in ("kernel", "priornorms", "lam0", "atinit"):
                continue
            cells = [f"{np.mean([r[k] for r in g]):.4g}" for k, _ in PHASE_A_COLUMNS]
            body.append([ds["name"], v, "on" if qk else "off", len(g)] + cells)
    md.append(
        _md_table(["data set", "variant", "Q=K", "seeds"] + [c for _, c in PHASE_A_COLUMNS], body)
    )
    (out / "phase_a.md").write_text("".join(md))


def _training_report(cfg, groups, out: Path) -> None:
    resolved = out / "config.json"
    machine = json.loads(resolved.read_text()).get("machine", "?") if resolved.is_file() else "?"
    md = [
        f"Training, per variant (means over seeds). Machine: {machine}. Warm-up: fixed "
        f"{cfg['train']['warmup_epochs']} epochs; Phase B: early stopping on the validation "
        f"log loss (patience {cfg['train']['patience']}, at most {cfg['train']['max_epochs']} "
        "epochs), best parameters restored.\n\n"
    ]
    body, total = [], 0.0
    for ds in cfg["datasets"]:
        for v, qk, _, _ in _variants(cfg, ds):
            g = groups.get((ds["name"], v, qk))
            if not g:
                continue
            total += sum(r["wall_seconds"] for r in g)
            body.append(
                [
                    ds["name"],
                    v,
                    "on" if qk else "off",
                    len(g),
                    f"{np.mean([r['warmup_steps'] for r in g]):.0f}",
                    f"{np.mean([r['phase_b_epochs'] for r in g]):.2f}",
                    f"{np.mean([r['phase_b_best_epoch'] for r in g]):.2f}",
                    f"{np.mean([r['phase_b_steps'] for r in g]):.0f}",
                    f"{np.mean([r['phase_b_stopped_early'] for r in g]):.2f}",
                    f"{np.mean([r['wall_seconds'] for r in g]):.0f}",
                ]
            )
    md.append(
        _md_table(
            [
                "data set",
                "variant",
                "Q=K",
                "seeds",
                "warm-up steps",
                "Phase B epochs",
                "best epoch",
                "Phase B steps",
                "stopped early",
                "wall s / run",
            ],
            body,
        )
    )
    md.append(f"\nTotal wall time of the runs: {total / 3600:.2f} h.\n")
    (out / "training.md").write_text("".join(md))


def _figures(cfg, rows, runs, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figdir = out / "figures"
    figdir.mkdir(exist_ok=True)
    datasets = [d["name"] for d in cfg["datasets"] if any(r["dataset"] == d["name"] for r in rows)]
    metrics = ("accuracy", "mcc", "ece", "log_loss", "noisy_accuracy")
    fig, axes = plt.subplots(
        len(datasets),
        len(metrics),
        figsize=(3.4 * len(metrics), 0.5 + 3.2 * len(datasets)),
        squeeze=False,
    )
    for i, d in enumerate(datasets):
        rs = [r for r in rows if r["dataset"] == d]
        labels = [f"{r['variant']}{' (Q=K)' if r['Q=K'] == 'on' else ''}" for r in rs]
        for j, m in enumerate(metrics):
            ax = axes[i, j]
            y = np.arange(len(rs))
            mu = np.array([r[m] for r in rs])
            err = np.array([(r[m + "_hi"] - r[m + "_lo"]) / 2 for r in rs])
            ax.errorbar(mu, y, xerr=np.nan_to_num(err), fmt="o", ms=3, capsize=2)
            ax.set_yticks(y)
            ax.set_yticklabels(labels if j == 0 else [], fontsize=6)
            ax.invert_yaxis()
            ax.set_xlabel(
                f"{m} ({'lower' if m in LOWER_BETTER else 'higher'} is better)", fontsize=8
            )
            ax.set_title(d, fontsize=9)
    fig.suptitle("mean and 95 % CI over seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(figdir / "metrics.png", dpi=120)
    plt.close(fig)
    kr = [r for r in runs if "align_heldout_before" in r]
    if kr:
        fig, ax = plt.subplots(figsize=(4.5, 4))
        for f in cfg["features"]:
            pts = [
                (r["align_heldout_before"], r["align_heldout_after"])
                for r in kr
                if r["feature"] == f
            ]
            if pts:
                a, b = zip(*pts, strict=True)
                ax.scatter(a, b, s=12, label=FEATURE_LABEL[f])
        lo = min(min(r["align_heldout_before"], r["align_heldout_after"]) for r in kr)
        hi = max(max(r["align_heldout_before"], r["align_heldout_after"]) for r in kr)
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xlabel("held-out alignment before Phase A (vanilla Ω)")
        ax.set_ylabel("held-out alignment after Phase A")
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
    ap.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    ap.add_argument("--datasets", nargs="*", default=None, help="only these data sets")
    ap.add_argument("--report-only", action="store_true", help="only rebuild the reports")
    ap.add_argument("--no-figures", action="store_true", help="skip the figures")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available")
    names = [d["name"] for d in cfg["datasets"]]
    if args.datasets and (bad := [d for d in args.datasets if d not in names]):
        raise SystemExit(f"--datasets {bad}: not in the configuration {names}")
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
            "machine": f"{platform.machine()} {platform.processor()} {os.cpu_count()} cpus, "
            f"{torch.get_num_threads()} torch thread(s), device {device}",
        }
        _write_json(out / "config.json", resolved)
        t_start = time.perf_counter()
        for ds_cfg in cfg["datasets"]:
            if args.datasets and ds_cfg["name"] not in args.datasets:
                continue
            prep = prepare_dataset(ds_cfg, cfg, data_dir, out)
            log(
                f"{ds_cfg['name']}: {prep['n_train']} train / {prep['n_val']} validation / "
                f"{prep['n_eval']} eval examples ({100 * prep['eval_truncated']:.1f} % of eval "
                f"at the {cfg['model']['max_length']}-token cut), vocabulary {prep['vocab_size']}"
            )
            bpath = runs_dir / f"baseline__{ds_cfg['name']}.json"
            if cfg.get("baseline", True) and not bpath.is_file():
                b = tfidf_baseline(prep)
                b["eval_truncated"] = prep["eval_truncated"]
                _write_json(bpath, b)
                log(f"  TF-IDF + LR: acc={b['accuracy']:.4f} (C={b['C']:g})")
            # seed-major: a partial study has whole seeds
            for seed in ds_cfg.get("seeds", cfg["seeds"]):
                for qk in tie_settings(ds_cfg, cfg):
                    for feature in [None] + list(cfg["features"]):
                        done += run_group(
                            ds_cfg, cfg, prep, feature, qk, seed, runs_dir, device, log
                        )
        log(f"{done} run(s) done in {time.perf_counter() - t_start:.1f}s")
    report = write_report(cfg, out, figures=not args.no_figures)
    report["runs_done"] = done
    return report


if __name__ == "__main__":
    main()
