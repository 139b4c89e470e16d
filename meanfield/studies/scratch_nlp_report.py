"""Reports of the from-scratch NLP study (:mod:`meanfield.studies.scratch_nlp`).

Reads the runs of the configuration recorded in ``<out>/config.json`` (the one last run into
the folder: runs of other configurations kept there are never shown; a partial study is
reported as far as it goes) and writes, in ``<out>``:

* ``results.csv``: one row per run;
* ``table.md`` / ``table.csv``: mean and 95 % t-interval over seeds of every metric, clean and
  noisy, with the TF-IDF + logistic-regression bar;
* ``paired.md`` / ``paired.csv``: each branch minus vanilla X, paired by seed (95 %
  t-interval; Holm-adjusted p-values of the accuracy differences over the whole family);
* ``claims.md``: each claim of the paper, yes / no / inconclusive, with the paired CIs;
* ``phase_a.md``: what Phase A did (per layer means); ``training.md``: epochs, steps, early
  stopping, wall time, machine; ``figures/*.png``.

The t-interval and Holm's adjustment are those of
:mod:`meanfield.studies.pretrained_nlp_report`.

Examples
--------
>>> from meanfield.studies.scratch_nlp_report import verdict_better
>>> verdict_better(0.02, 0.01, 0.03, "accuracy"), verdict_better(0.02, 0.01, 0.03, "ece")
('yes', 'no')
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import xarray as xr

from ..attention.metrics import METRIC_NAMES
from ..stats import holm, t_interval
from .scratch_nlp import FEATURE_LABEL, variant_label, variants

__all__ = [
    "LOWER_BETTER",
    "PAPER_CLAIMS",
    "read_study",
    "read_record",
    "load_runs",
    "load_baselines",
    "paired",
    "verdict_better",
    "claim_best",
    "write_report",
]

#: lower is better for these metrics
LOWER_BETTER = {"ece", "log_loss", "brier", "noisy_ece", "noisy_log_loss", "noisy_brier"}
REPORT_METRICS = list(METRIC_NAMES) + ["noisy_accuracy", "noisy_ece"]


def read_study(out) -> dict:
    """The record of ``<out>/config.json`` (:func:`meanfield.studies.scratch_nlp.study_record`).

    Parameters
    ----------
    out : path
        The study folder.

    Returns
    -------
    dict

    Raises
    ------
    FileNotFoundError
        No ``config.json`` in ``out``.

    Examples
    --------
    >>> import tempfile
    >>> read_study(tempfile.mkdtemp())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    FileNotFoundError: no study in ...: config.json is missing (run the study first)
    """
    path = Path(out) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no study in {Path(out)}: config.json is missing (run the study first)"
        )
    return json.loads(path.read_text())


def read_record(path) -> dict | None:
    """The record of one run file (its ``record`` attribute), or None if unreadable.

    Parameters
    ----------
    path : path
        A run file (``<data set>/runs/<key>.nc``).

    Returns
    -------
    dict or None
        None for a file being written or corrupt (a rerun sets it aside).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.results import save_dataset
    >>> from meanfield.studies.scratch_nlp import record_dataset
    >>> path = save_dataset(record_dataset({"accuracy": 0.5}), Path(tempfile.mkdtemp()) / "r.nc")
    >>> read_record(path), read_record(path.with_name("none.nc"))
    ({'accuracy': 0.5}, None)
    """
    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            return json.loads(ds.attrs["record"])
    except (OSError, KeyError, ValueError):
        return None  # a run being written, or unreadable (a rerun sets it aside)


def _expected(out: Path, spec: dict) -> list[Path]:
    from ..workbench.sweeps import grid_points, run_key

    runs = out / spec["folder"] / "runs"
    return [runs / f"{run_key(p, spec['digest'])}.nc" for p in grid_points(spec["grid"])]


def load_runs(out, study: dict | None = None) -> list[dict]:
    """The records of the finished runs of the study's configuration (grid order).

    Parameters
    ----------
    out : path
        The study folder.
    study : dict, optional
        :func:`read_study` of it (read if not given).

    Returns
    -------
    list of dict
        One record per finished run (runs of other configurations in the folder left out).

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from meanfield.studies.scratch_nlp import (FIXTURES, TINY_CONFIG, check_config,
    ...                                            study_record, sweep_specs)
    >>> cfg = check_config(json.load(open(TINY_CONFIG)))
    >>> out = Path(tempfile.mkdtemp())
    >>> record = study_record(cfg, sweep_specs(cfg, FIXTURES))
    >>> _ = (out / "config.json").write_text(json.dumps(record))
    >>> load_runs(out)  # nothing finished yet
    []
    """
    out = Path(out)
    study = read_study(out) if study is None else study
    rows = []
    for sweeps in study["sweeps"].values():
        for path in _expected(out, sweeps["variants"]):
            rec = read_record(path) if path.is_file() else None
            if rec is not None:
                rows.append(rec)
    return rows


def load_baselines(out, study: dict | None = None) -> dict:
    """The TF-IDF + LR records of the study's configuration, by data set.

    Parameters
    ----------
    out : path
        The study folder.
    study : dict, optional
        :func:`read_study` of it.

    Returns
    -------
    dict
        Data set name -> record (``accuracy``, ``C``...), for those finished.

    Examples
    --------
    >>> import tempfile
    >>> load_baselines(tempfile.mkdtemp(), {"sweeps": {}})
    {}
    """
    out = Path(out)
    study = read_study(out) if study is None else study
    found = {}
    for name, sweeps in study["sweeps"].items():
        (path,) = _expected(out, sweeps["baseline"])
        rec = read_record(path) if path.is_file() else None
        if rec is not None:
            found[name] = rec
    return found


def _label(feature: str | None, branch: str) -> str:
    return "softmax" if feature is None else variant_label(f"{branch}-{feature}")


def _branches(cfg: dict, dataset: str, feature: str) -> list[str]:
    """vanilla, kernel and the controls of ``feature`` on ``dataset``, in table order."""
    return [v.split("-", 1)[0] for v in variants(cfg, dataset) if v.split("-", 1)[-1] == feature]


def _dataset(cfg: dict, name: str) -> dict:
    return next(d for d in cfg["datasets"] if d["name"] == name)


def _fmt_ci(m, lo, hi, digits=4) -> str:
    if not math.isfinite(lo):
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {(hi - lo) / 2:.{digits}f}"


def _fmt_diff(m, lo, hi, digits=4) -> str:
    if not math.isfinite(lo):
        return f"{m:+.{digits}f}"
    return f"{m:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def paired(groups, a, b, metric):
    """Paired differences ``a - b`` over the seeds both have.

    Parameters
    ----------
    groups : dict
        ``(data set, variant label, Q = K) -> list of run records``.
    a, b : tuple
        Two keys of ``groups``.
    metric : str
        A metric of the records.

    Returns
    -------
    tuple or None
        ``(mean, lo, hi, n, wins of a, p)``: the 95 % t-interval of the mean difference, the
        number of seeds, the seeds where ``a`` is better, and the two-sided p-value of the
        one-sample t-test (1 when every difference is equal; NaN with one seed); None if no
        seed is shared.

    Examples
    --------
    >>> from meanfield.studies.scratch_nlp_report import paired
    >>> g = {"a": [{"seed": s, "accuracy": 0.8 + s / 100} for s in range(3)],
    ...      "b": [{"seed": s, "accuracy": 0.7} for s in range(3)]}
    >>> m, lo, hi, n, wins, p = paired(g, "a", "b", "accuracy")
    >>> round(m, 3), n, wins, p < 0.05
    (0.11, 3, 3, True)
    """
    from scipy import stats

    ra = {r["seed"]: r for r in groups.get(a, [])}
    rb = {r["seed"]: r for r in groups.get(b, [])}
    seeds = sorted(set(ra) & set(rb))
    if not seeds:
        return None
    d = np.array([ra[s][metric] - rb[s][metric] for s in seeds], dtype=float)
    wins = int(sum((x < 0) if metric in LOWER_BETTER else (x > 0) for x in d))
    m, lo, hi = t_interval(d)
    if len(d) < 2:
        p = float("nan")
    elif np.ptp(d) == 0:
        p = 1.0 if d[0] == 0 else 0.0
    else:
        p = float(stats.ttest_1samp(d, 0.0).pvalue)
    return m, lo, hi, len(seeds), wins, p


def verdict_better(m, lo, hi, metric) -> str:
    """'yes' if the CI excludes 0 in the favourable direction, 'no' if in the other one.

    Parameters
    ----------
    m, lo, hi : float
        A difference (target minus rival) and its confidence interval.
    metric : str
        The metric (lower is better for those of :data:`LOWER_BETTER`).

    Returns
    -------
    str
        ``yes``, ``no``, ``inconclusive`` or ``inconclusive (one seed)``.

    Examples
    --------
    >>> from meanfield.studies.scratch_nlp_report import verdict_better
    >>> verdict_better(0.02, -0.01, 0.05, "accuracy")
    'inconclusive'
    """
    if not math.isfinite(lo):
        return "inconclusive (one seed)"
    good = hi < 0 if metric in LOWER_BETTER else lo > 0
    bad = lo > 0 if metric in LOWER_BETTER else hi < 0
    return "yes" if good else ("no" if bad else "inconclusive")


def claim_best(groups, dataset, target, rivals, metric) -> tuple[str, list[str]]:
    """Is ``target`` the best of ``rivals`` in ``metric``? Paired CIs against each rival.

    yes: every paired difference favours the target with a CI excluding 0; no: some rival
    has a better mean, with a CI excluding 0; otherwise inconclusive.

    Parameters
    ----------
    groups : dict
        ``(data set, variant label, Q = K) -> list of run records``.
    dataset : str
        The data set.
    target : tuple
        ``(variant label, Q = K)``.
    rivals : list of tuple
        ``(variant label, Q = K)`` each.
    metric : str
        The metric.

    Returns
    -------
    tuple
        The verdict and one line per rival.

    Examples
    --------
    >>> from meanfield.studies.scratch_nlp_report import claim_best
    >>> g = {("d", "a", False): [{"seed": s, "ece": 0.01 * s} for s in range(3)],
    ...      ("d", "b", False): [{"seed": s, "ece": 0.01 * s + 0.02 + s / 1000} for s in range(3)]}
    >>> claim_best(g, "d", ("a", False), [("b", False)], "ece")[0]
    'yes'
    """
    lines, verdicts = [], []
    for rv in rivals:
        p = paired(groups, (dataset, *target), (dataset, *rv), metric)
        if p is None:
            continue
        m, lo, hi, n = p[:4]
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


def _group_runs(runs):
    groups = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["variant"], bool(r["tie_qk"])), []).append(r)
    return groups


def _variants(cfg, ds_cfg) -> list[tuple[str, bool, str | None, str]]:
    """(variant name, qk, feature, branch) for a data set, in table order."""
    out = []
    for qk in ds_cfg["tie_qk"]:
        out.append(("softmax", qk, None, "softmax"))
        for f in cfg["features"]:
            for b in _branches(cfg, ds_cfg["name"], f):
                out.append((_label(f, b), qk, f, b))
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


def write_report(out, figures: bool = True) -> dict:
    """Every report file, from the finished runs of the configuration in ``config.json``.

    Parameters
    ----------
    out : path
        The study folder.
    figures : bool
        Also draw ``figures/metrics.png`` and ``figures/alignment.png``.

    Returns
    -------
    dict
        ``rows`` (of ``table.csv``), ``paired`` (of ``paired.csv``), ``baselines`` and
        ``n_runs`` (the runs reported).

    Raises
    ------
    FileNotFoundError
        No ``config.json`` in ``out``.
    RuntimeError
        No run of the recorded configuration has finished.

    Examples
    --------
    >>> import json, tempfile
    >>> from meanfield.studies.scratch_nlp import FIXTURES, TINY_CONFIG, run_study
    >>> from meanfield.studies.scratch_nlp_report import write_report
    >>> cfg = json.load(open(TINY_CONFIG))
    >>> cfg.update(features=["favor"], seeds=[0], controls={"datasets": []})
    >>> out = tempfile.mkdtemp()
    >>> _ = run_study(cfg, data_dir=FIXTURES, out_dir=out, datasets=["sst2"], progress=False,
    ...               log=lambda line: None)
    >>> rep = write_report(out, figures=False)
    >>> rep["n_runs"], [r["variant"] for r in rep["rows"]]
    (3, ['softmax', 'vanilla FAVOR', 'Kernel-FAVOR'])
    """
    out = Path(out)
    study = read_study(out)
    cfg = study["config"]
    runs = load_runs(out, study)
    if not runs:
        raise RuntimeError(
            f"no finished runs of the configuration recorded in {out / 'config.json'}"
        )
    keys = sorted({k for r in runs for k in r if not isinstance(r[k], list | dict)})
    with open(out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(runs)
    groups = _group_runs(runs)
    baselines = load_baselines(out, study)
    rows, md = (
        [],
        [
            "Mean ± half-width of the 95 % t-interval over seeds, on the evaluation split (clean) "
            f"and on the same split with {100 * cfg['noise']['rate']:.0f} % token "
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
                mu, lo, hi = t_interval([r[m] for r in g])
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
    _training_report(cfg, groups, out, study.get("machine", "?"))
    if figures:
        _figures(cfg, rows, runs, out)
    return {"rows": rows, "paired": prow, "baselines": baselines, "n_runs": len(runs)}


def _paired_report(cfg, groups, out: Path) -> list[dict]:
    """Each branch minus vanilla X, paired by seed; Holm over the family of accuracy tests."""
    metrics = ("accuracy", "mcc", "ece", "log_loss", "brier", "noisy_accuracy")
    prow, bodies = [], {}
    for ds in cfg["datasets"]:
        d = ds["name"]
        for qk in ds["tie_qk"]:
            for f in cfg["features"]:
                base = (d, _label(f, "vanilla"), qk)
                for b in _branches(cfg, d, f)[1:]:
                    cells, row = [], None
                    for m in metrics:
                        p = paired(groups, (d, _label(f, b), qk), base, m)
                        if p is None:
                            break
                        mu, lo, hi, n, wins, pval = p
                        row = row or {"dataset": d, "feature": f, "branch": b, "Q=K": qk, "n": n}
                        row.update({m: mu, m + "_lo": lo, m + "_hi": hi, m + "_wins": wins})
                        if m == "accuracy":
                            row["accuracy_p"] = pval
                        cells.append(f"{_fmt_diff(mu, lo, hi)} ({wins}/{n})")
                    if row:
                        prow.append(row)
                        bodies.setdefault(d, []).append(
                            [_label(f, b), "on" if qk else "off", row["n"]] + cells
                        )
    tested = [i for i, r in enumerate(prow) if np.isfinite(r["accuracy_p"])]
    adjusted = holm([prow[i]["accuracy_p"] for i in tested]) if tested else []
    for r in prow:
        r["accuracy_p_holm"] = float("nan")
    for i, adj in zip(tested, adjusted, strict=True):
        prow[i]["accuracy_p_holm"] = float(adj)
    md = [
        "Each branch minus vanilla X, paired by seed (same warm-up, same Phase B data order): "
        "mean [95 % t-interval]; in brackets after it, the seeds where the branch is better. "
        f"Last column: Holm-adjusted p-value of Δaccuracy (one-sample t-test) over the "
        f"{len(tested)} comparisons of this file.\n"
    ]
    k = 0
    for d, body in bodies.items():
        for line in body:
            q = prow[k]["accuracy_p_holm"]
            line.append(f"{q:.3g}" if np.isfinite(q) else "—")
            k += 1
        md.append(f"\n## {d}\n")
        head = ["branch", "Q=K", "seeds"] + [f"Δ{m}" for m in metrics] + ["Holm p (Δaccuracy)"]
        md.append(_md_table(head, body))
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
        label = f"{d}: {_label(f, b)} (Q=K {'on' if qk else 'off'})"
        if d not in names or f not in cfg["features"]:
            md.append(f"\n### {label}: {kind} in {', '.join(metrics)}\nnot in this study\n")
            continue
        target = (_label(f, b), qk)
        if kind == "best":
            rivals = [
                (v, q)
                for v, q, _, br in _variants(cfg, names[d])
                if br in ("softmax", "vanilla", "kernel") and (v, q) != target
            ]
        else:
            rivals = [(_label(f, "vanilla"), qk)]
        md.append(f"\n### {label}: {kind} in {', '.join(metrics)}\n")
        for m in metrics:
            verdict, lines = claim_best(groups, d, target, rivals, m)
            md.append(f"- **{m}: {verdict}**" + ("".join(f"\n  - {x}" for x in lines)) + "\n")
    md.append("\n### Kernel-X vs vanilla X (the headline question), accuracy\n")
    for ds in cfg["datasets"]:
        for qk in ds["tie_qk"]:
            for f in cfg["features"]:
                p = paired(
                    groups,
                    (ds["name"], _label(f, "kernel"), qk),
                    (ds["name"], _label(f, "vanilla"), qk),
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
    ctl = cfg["controls"]
    f = ctl["feature"]
    md = []
    for d in ctl["datasets"]:
        for qk in _dataset(cfg, d)["tie_qk"]:
            kern = (d, _label(f, "kernel"), qk)
            lines = []
            for b in ctl["kinds"]:
                cells = []
                for m in ("accuracy", "log_loss"):
                    p = paired(groups, kern, (d, _label(f, b), qk), m)
                    if p:
                        v = verdict_better(*p[:3], m)
                        cells.append(f"Δ{m} {_fmt_diff(*p[:3])} (n={p[3]}, better: {v})")
                if cells:
                    lines.append(f"- minus {_label(f, b)}: " + "; ".join(cells) + "\n")
            if lines:
                md.append(
                    f"\n### {d}: {_label(f, 'kernel')} (Q=K {'on' if qk else 'off'}) minus "
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


def _training_report(cfg, groups, out: Path, machine: str) -> None:
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
