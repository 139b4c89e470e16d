"""The NLP studies' variants and reports: does learned kernel attention beat its prior draw?

The two studies of :mod:`meanfield.studies.nlp`: **from scratch** (softmax or linear attention [1]_
with a feature map X, FAVOR [2]_ ..., ``Omega`` from the prior, ``vanilla-X``, or learned by Phase
A, ``kernel-X``; controls ``redraw``, ``priornorms``, ``lam0``, ``atinit``) reported in
``results.csv``, ``table.md``/``.csv`` (95 % t-intervals, clean and noisy, the TF-IDF + LR bar),
``paired.md``/``.csv`` (each branch minus vanilla X, Holm [4]_), ``claims.md``, ``phase_a.md``,
``training.md``, ``figures/``; **pretrained** (MiniLM linearized with X, ``Omega`` by ``vanilla``,
``kernel``, ``hedgehog-loss``, ``coulomb-distilled`` or the published Hedgehog map [3]_,
``hedgehog-published-hedgehog``; controls ``redraw``, ``lam0``) reported in ``report.md``,
``results.csv``, ``readme_tables.md`` (Holm and Bonferroni over each *planned* family: Kernel's,
Coulomb-regularised distillation's; the inference cost per feature map). The earlier method name
``hedgehog`` (variants ``hedgehog-<X>``) reads as ``hedgehog-loss``.

References
----------
.. [1] Katharopoulos, Vyas, Pappas, Fleuret, "Transformers are RNNs: fast autoregressive
   Transformers with linear attention", ICML 2020.
.. [2] Choromanski et al., "Rethinking attention with Performers" (FAVOR+), ICLR 2021.
.. [3] Zhang, Bhatia, Kumbong, Ré, "The Hedgehog & the Porcupine: expressive linear attentions
   with softmax mimicry", ICLR 2024.
.. [4] Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist.
   6 (1979) 65-70.

Examples
--------
>>> from meanfield.studies.nlp_report import split_variant, variant_label
>>> variant_label("kernel-favor"), split_variant("hedgehog-softmaxfeat")
('Kernel-FAVOR', ('hedgehog-loss', 'softmaxfeat'))
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import xarray as xr

from ..attention.metrics import METRIC_NAMES
from ..errors import InputError
from ..stats import holm, paired_family, paired_test, t_interval
from ..workbench.report_tables import NO_SPREAD as _NO_SPREAD
from ..workbench.report_tables import markdown_row, markdown_table, marked_tables, write_csv

__all__ = ["FEATURE_LABEL", "CONTROLS", "METHODS", "scratch_variants", "variant_label",
           "pretrained_variants", "split_variant", "recorded_variant", "write_report",
           "readme_tables"]  # fmt: skip

# --- variants of the from-scratch study -----------------------------------------------------------
FEATURE_LABEL = {"favor": "FAVOR", "porf": "PORF", "porf-softplus": "PORF-softplus",
                 "softmaxfeat": "softmaxfeat"}  # fmt: skip
BRANCHES = ("vanilla", "kernel")
CONTROLS = ("redraw", "priornorms", "lam0", "atinit")
BRANCH_LABEL = {"vanilla": "vanilla {X}", "kernel": "Kernel-{X}",
                "redraw": "control: redraw Ω ({X})",
                "priornorms": "control: Phase A directions, prior norms ({X})",
                "lam0": "control: Phase A, λ = 0 ({X})",
                "atinit": "control: Phase A at initialisation ({X})"}  # fmt: skip


def scratch_variants(cfg: dict, dataset: str) -> list[str]:
    """A from-scratch data set's variants in table order: ``softmax``, then per feature map
    X ``vanilla-X``, ``kernel-X`` and X's controls there.

    See Also
    --------
    pretrained_variants : the variants of the pretrained study.

    Examples
    --------
    >>> cfg = {"features": ["favor"], "controls": {"feature": "favor", "datasets": ["rt"],
    ...        "kinds": ["lam0"]}}
    >>> scratch_variants(cfg, "rt"), scratch_variants(cfg, "sst2")
    (['softmax', 'vanilla-favor', 'kernel-favor', 'lam0-favor'], \
['softmax', 'vanilla-favor', 'kernel-favor'])
    """
    ctl = cfg["controls"]
    out = ["softmax"]
    for f in cfg["features"]:
        out += [f"{b}-{f}" for b in BRANCHES]
        if f == ctl["feature"] and dataset in ctl["datasets"]:
            out += [f"{k}-{f}" for k in ctl["kinds"]]
    return out


def split_scratch_variant(variant: str) -> tuple[str | None, str]:
    """``(feature, branch)`` of a from-scratch variant (``(None, "softmax")`` for softmax).

    See Also
    --------
    scratch_variants, variant_label : the variants it splits, and their report names.

    Examples
    --------
    >>> split_scratch_variant("kernel-favor"), split_scratch_variant("softmax")
    (('favor', 'kernel'), (None, 'softmax'))
    """
    if variant == "softmax":
        return None, "softmax"
    branch, _, feature = variant.partition("-")
    if branch not in BRANCHES + CONTROLS or feature not in FEATURE_LABEL:
        raise InputError(f"unknown variant {variant!r}")
    return feature, branch


def variant_label(variant: str) -> str:
    """The name the from-scratch report gives a variant.

    See Also
    --------
    scratch_variants, split_scratch_variant : the variants it names, and their parts.

    Examples
    --------
    >>> variant_label("lam0-favor")
    'control: Phase A, λ = 0 (FAVOR)'
    """
    return _label(*split_scratch_variant(variant))


# --- variants of the pretrained study -------------------------------------------------------------
#: the methods of stage 2 and the feature map each brings: None = crossed with every
#: configured feature map; a name = that map only (its variant is ``<method>-<map>``)
METHODS = {"vanilla": None, "kernel": None, "hedgehog-loss": None, "hedgehog-published": "hedgehog",
           "coulomb-distilled": None}  # fmt: skip
#: methods with their own settings table: it keys their runs alone, in a sweep of their own
#: (stage folder ``linearized-<method>``), so adding one recomputes no other method's runs
METHOD_SETTINGS = {"coulomb-distilled": "coulomb_distillation"}
PRETRAINED_CONTROLS = ("redraw", "lam0")
#: earlier names of methods, read as the current ones (configurations and run files)
_LEGACY_METHODS = {"hedgehog": "hedgehog-loss"}
_RECORDED_AS = {new: old for old, new in _LEGACY_METHODS.items()}


def _canonical_method(method: str) -> str:
    return _LEGACY_METHODS.get(method, method)


def split_variant(variant: str) -> tuple[str, str]:
    """``(method, feature map)`` of a pretrained variant, the method by its current name
    (``hedgehog-favor`` reads as ``hedgehog-loss-favor``); InputError if it is none.

    See Also
    --------
    recorded_variant : the name a variant's runs are keyed under.
    pretrained_variants : the variants it splits.

    Examples
    --------
    >>> split_variant("hedgehog-loss-porf-softplus"), split_variant("hedgehog-favor")
    (('hedgehog-loss', 'porf-softplus'), ('hedgehog-loss', 'favor'))
    """
    from ..attention.features import FEATURE_KINDS

    names = sorted([*METHODS, *PRETRAINED_CONTROLS, *_LEGACY_METHODS], key=len, reverse=True)
    for method in names:  # longest first: "hedgehog-loss-x" before the legacy "hedgehog-x"
        if variant.startswith(method + "-"):
            feature = variant[len(method) + 1 :]
            own = METHODS.get(_canonical_method(method))
            if (own is None and feature in FEATURE_KINDS) or feature == own:
                return _canonical_method(method), feature
    raise InputError(f"variant must be <method>-<feature map> with a method among "
                     f"{', '.join([*METHODS, *PRETRAINED_CONTROLS])}; got {variant!r}")  # fmt: skip


def _canonical_variant(variant: str) -> str:
    """A pretrained variant's current name (:func:`split_variant`)."""
    return "-".join(split_variant(variant))


def recorded_variant(variant: str) -> str:
    """The name a pretrained variant's runs are keyed under (``hedgehog-loss-<X>``: its
    earlier ``hedgehog-<X>``, so the runs recorded before the rename are found).

    See Also
    --------
    split_variant, load_pretrained_runs : its current name's parts; the runs read back.

    Examples
    --------
    >>> recorded_variant("hedgehog-loss-favor"), recorded_variant("kernel-favor")
    ('hedgehog-favor', 'kernel-favor')
    """
    method, feature = split_variant(variant)
    return f"{_RECORDED_AS.get(method, method)}-{feature}"


def _crossed(cfg: dict, method: str) -> list[str]:
    """The feature maps a crossed method runs on: ``method_features[method]``, else all."""
    return [f for f in cfg["features"] if f in cfg.get("method_features", {}).get(method, [f])]


def _methods(cfg: dict, ds: dict | None = None) -> list[str]:
    """The methods ``ds`` runs (current names): the study's, or those also in ``ds["methods"]``."""
    methods = [_canonical_method(m) for m in cfg["methods"]]
    if ds is not None and "methods" in ds:
        own = {_canonical_method(m) for m in ds["methods"]}
        methods = [m for m in methods if m in own]
    return methods


def pretrained_variants(cfg: dict, ds: dict | None = None) -> list[str]:
    """Data set ``ds``'s stage-2 variants ``<method>-<feature>``: methods x feature maps
    (those ``method_features`` restricts, on theirs), those bringing their own map, the controls.

    See Also
    --------
    scratch_variants : the variants of the from-scratch study.

    Examples
    --------
    >>> pretrained_variants({"features": ["favor"], "methods": ["kernel", "hedgehog-published"],
    ...                      "controls": {"feature": "favor", "kinds": ["lam0"]}})
    ['kernel-favor', 'hedgehog-published-hedgehog', 'lam0-favor']
    """
    methods = _methods(cfg, ds)
    out = [f"{m}-{f}" for f in cfg["features"] for m in methods
           if METHODS[m] is None and f in _crossed(cfg, m)]  # fmt: skip
    out += [f"{m}-{METHODS[m]}" for m in methods if METHODS[m] is not None]
    ctl = cfg.get("controls") or {}
    out += [f"{k}-{ctl['feature']}" for k in ctl.get("kinds", [])]
    return out


# --- shared: formatting, paired statistics --------------------------------------------------------
LOWER_BETTER = {"ece", "log_loss", "brier", "noisy_ece", "noisy_log_loss", "noisy_brier"}
REPORT_METRICS = list(METRIC_NAMES) + ["noisy_accuracy", "noisy_ece"]
_RULE = " --- |"  # the pretrained reports' tables: | --- | --- |


def _fmt(m, lo, hi, d=4, style="[]", k=1) -> str:
    """``m [lo, hi]`` (``"[]"``), ``m ± half-width`` (``"±"``) or ``+m [+lo, +hi]`` (``"+"``);
    without an interval the mean alone (``k`` < 2 values) or ``m [no spread]`` (k ≥ 2 equal)."""
    if style == "[]" and not np.isfinite(m):
        return "—"
    sign = "+" if style == "+" else ""
    if not math.isfinite(lo):
        flat = k >= 2 and math.isfinite(m)
        return f"{m:{sign}.{d}f}" + (f" {_NO_SPREAD}" if flat else "")
    if style == "±":
        return f"{m:.{d}f} ± {(hi - lo) / 2:.{d}f}"
    return f"{m:{sign}.{d}f} [{lo:{sign}.{d}f}, {hi:{sign}.{d}f}]"


def _paired(groups, a, b, metric):
    """``(mean, lo, hi, n, wins of a, p)`` of ``a − b`` (keys of ``groups``) over their shared
    seeds: :func:`~meanfield.stats.paired_test`'s interval and p, and the seeds where ``a`` is
    better (lower for ``LOWER_BETTER``); None without a shared seed."""
    ra, rb = ({r["seed"]: r for r in groups.get(x, [])} for x in (a, b))
    seeds = sorted(set(ra) & set(rb))
    if not seeds:
        return None
    va, vb = (np.array([r[s][metric] for s in seeds], dtype=float) for r in (ra, rb))
    wins = int(sum((x < 0) if metric in LOWER_BETTER else (x > 0) for x in va - vb))
    r = paired_test(va, vb)
    return r["mean"], r["lo"], r["hi"], len(seeds), wins, r["p"]


def _verdict(m, lo, hi, metric, k=1) -> str:
    """``yes`` if the interval excludes 0 in the favourable direction, ``no`` in the other, else
    ``inconclusive`` (without an interval: ``(one seed)``, or ``(no spread)`` over k ≥ 2)."""
    if not math.isfinite(lo):
        return "inconclusive (no spread)" if k >= 2 else "inconclusive (one seed)"
    good = hi < 0 if metric in LOWER_BETTER else lo > 0
    bad = lo > 0 if metric in LOWER_BETTER else hi < 0
    return "yes" if good else ("no" if bad else "inconclusive")


def write_report(out, report_dir=None, *, data_dir=None, figures: bool = True) -> dict:
    """Every report of the study ``out`` into ``report_dir``, from the finished runs of its
    ``config.json`` configuration (never rewritten; a partial study reported as far as it goes).

    Parameters
    ----------
    out : path
        The study folder. The pretrained report adds the section "Inference time and memory
        per feature map" (and the README table ``inference-cost``) where the folder's parent
        holds ``inference_cost.nc`` (:func:`meanfield.attention.inference_cost.inference_cost`).
    report_dir : path, optional
        Where the reports go (default ``out``).
    data_dir : path, optional
        The pretrained study's data folder, for its TF-IDF + LR bars (left out without it).
    figures : bool
        The from-scratch study's figures.

    Returns
    -------
    dict
        ``rows``, ``paired``, ``baselines``, ``n_runs`` (from scratch) or ``table``,
        ``comparisons``, ``planned``, ``readme_tables`` (pretrained).

    Raises
    ------
    FileNotFoundError
        No ``config.json`` in ``out`` (RuntimeError: no finished run, from scratch).

    See Also
    --------
    meanfield.studies.nlp.run_study : computes the runs, then calls this.
    readme_tables : the pretrained study's README tables.

    Examples
    --------
    >>> import json, tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> _ = (out / "config.json").write_text(json.dumps({"name": "x", "datasets": []}))
    >>> write_report(out)
    {'table': [], 'comparisons': 0, 'planned': 0, 'readme_tables': {}}
    """
    out = Path(out)
    path = out / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"no study in {out}: config.json is missing (run the study first)")
    study = json.loads(path.read_text())
    dest = Path(report_dir) if report_dir is not None else out
    dest.mkdir(parents=True, exist_ok=True)
    if "sweeps" in study:
        return _scratch_report(out, study, dest, figures)
    return _pretrained_report(out, study, dest, data_dir)


# --- the from-scratch study's report --------------------------------------------------------------
def _records(out: Path, spec: dict) -> list[dict]:
    """The ``record`` of each finished run of one sweep (grid order; unreadable skipped)."""
    from ..workbench.sweeps import grid_points, run_key

    found = []
    for p in grid_points(spec["grid"]):
        path = out / spec["folder"] / "runs" / f"{run_key(p, spec['digest'])}.nc"
        try:
            with xr.open_dataset(path, engine="h5netcdf") as ds:
                found.append(json.loads(ds.attrs["record"]))
        except (OSError, KeyError, ValueError):
            continue  # not run yet, being written, or unreadable (a rerun sets it aside)
    return found


def _on(qk: bool) -> str:
    return "on" if qk else "off"


def _label(feature: str | None, branch: str) -> str:
    return "softmax" if feature is None else BRANCH_LABEL[branch].format(X=FEATURE_LABEL[feature])


def _branches(cfg: dict, dataset: str, feature: str) -> list[str]:
    """vanilla, kernel and the controls of ``feature`` on ``dataset``, in table order."""
    return [v.split("-", 1)[0] for v in scratch_variants(cfg, dataset)
            if v.split("-", 1)[-1] == feature]  # fmt: skip


def _compared(groups, a, b, metric) -> tuple | None:
    """(``+m [+lo, +hi]``, seeds, verdict) of ``a − b`` paired by seed; None without seeds."""
    p = _paired(groups, a, b, metric)
    return p and (_fmt(*p[:3], style="+", k=p[3]), p[3], _verdict(*p[:3], metric, k=p[3]))


def _claim_best(groups, dataset, target, rivals, metric) -> tuple[str, list[str]]:
    """Is ``target`` the best of ``rivals``? yes: every paired difference favours it with an
    interval excluding 0; no: some rival is better so; otherwise inconclusive."""
    lines, verdicts = [], []
    for rv in rivals:
        if c := _compared(groups, (dataset, *target), (dataset, *rv), metric):
            verdicts.append(c[2])
            lines.append(f"vs {rv[0]} (Q=K {_on(rv[1])}): {c[0]}, n={c[1]}")
    best = "yes" if set(verdicts) == {"yes"} else "no" if "no" in verdicts else "inconclusive"
    return (best if verdicts else "not run"), lines


#: the paper's claims: (data set, target variant, Q=K, metrics, kind); "best" = best of all
#: main variants of the data set, "vs vanilla" = better than vanilla X paired by seed
PAPER_CLAIMS = [
    ("sst2", ("porf-softplus", "kernel"), False, ("accuracy", "mcc"), "best"),
    ("sst2", ("favor", "kernel"), False, ("ece",), "best"),
    ("qqp", ("softmaxfeat", "kernel"), True, ("log_loss", "brier"), "vs vanilla"),
    ("rotten_tomatoes", ("softmaxfeat", "kernel"), False,
     ("accuracy", "mcc", "log_loss", "brier"), "best"),
]  # fmt: skip


def _grid(cfg) -> list[tuple[str, bool, str]]:
    """(data set, Q = K, feature map) of the from-scratch study, in table order."""
    return [(d["name"], qk, f) for d in cfg["datasets"] for qk in d["tie_qk"]
            for f in cfg["features"]]  # fmt: skip


def _table_variants(cfg, ds_cfg) -> list[tuple[str, bool, str | None, str]]:
    """(variant label, qk, feature, branch) for a data set, in table order."""
    out = []
    for qk in ds_cfg["tie_qk"]:
        out.append(("softmax", qk, None, "softmax"))
        for f in cfg["features"]:
            out += [(_label(f, b), qk, f, b) for b in _branches(cfg, ds_cfg["name"], f)]
    return out


def _scratch_report(out: Path, study: dict, dest: Path, figures: bool) -> dict:
    cfg = study["config"]
    runs = [r for sw in study["sweeps"].values() for r in _records(out, sw["variants"])]
    if not runs:
        raise RuntimeError(f"no finished runs of the configuration recorded in {out}/config.json")
    keys = sorted({k for r in runs for k in r if not isinstance(r[k], list | dict)})
    write_csv(dest / "results.csv", runs, keys)
    groups: dict = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["variant"], bool(r["tie_qk"])), []).append(r)
    found = {name: _records(out, sw["baseline"]) for name, sw in study["sweeps"].items()}
    baselines = {name: recs[0] for name, recs in found.items() if recs}
    rows, md = [], [
        "Mean ± half-width of the 95 % t-interval over seeds, on the evaluation split (clean) "
        f"and on the same split with {100 * cfg['noise']['rate']:.0f} % token "
        "noise (drops/swaps). ↑ higher is better, ↓ lower is better.\n"
    ]  # fmt: skip
    head = ["variant", "Q=K", "seeds"]
    head += [f"{m} {'↓' if m in LOWER_BETTER else '↑'}" for m in REPORT_METRICS]
    for ds in cfg["datasets"]:
        d, body = ds["name"], []
        for v, qk, _, _ in _table_variants(cfg, ds):
            g = groups.get((d, v, qk))
            if not g:
                continue
            cis = {m: t_interval([r[m] for r in g]) for m in REPORT_METRICS}
            row = {"dataset": d, "variant": v, "Q=K": _on(qk), "seeds": len(g)}
            for m, (mu, lo, hi) in cis.items():
                row.update({m: mu, m + "_lo": lo, m + "_hi": hi})
            rows.append(row)
            body.append([v, row["Q=K"], len(g)]
                        + [_fmt(*ci, style="±", k=len(g)) for ci in cis.values()])  # fmt: skip
        if not body:
            continue
        md.append(f"\n## {d}\n")
        b = baselines.get(d)
        if b:
            bar = [f"{b[m]:.4f}" if m in b else "" for m in REPORT_METRICS]
            body.append([f"TF-IDF + LR (C = {b['C']:g})", "", "-"] + bar)
        md.append("\n".join(markdown_table(head, body)) + "\n")
        if b and (sm := groups.get((d, "softmax", False))):
            acc = float(np.mean([r["accuracy"] for r in sm]))
            gap = b["accuracy"] - acc
            ok = "meets" if gap <= 0.02 else "does NOT meet"
            md.append(f"\nSanity bar: softmax accuracy {acc:.4f} vs TF-IDF + LR "
                      f"{b['accuracy']:.4f} (gap {100 * gap:+.1f} points): the softmax model "
                      f"{ok} the bar of 2 points.\n")  # fmt: skip
    write_csv(dest / "table.csv", rows)
    (dest / "table.md").write_text("".join(md))
    prow = _paired_report(cfg, groups, dest)
    _claims_report(cfg, groups, dest)
    _phase_a_report(cfg, groups, dest)
    _training_report(cfg, groups, dest, study.get("machine", "?"))
    if figures:
        _figures(cfg, rows, runs, dest)
    return {"rows": rows, "paired": prow, "baselines": baselines, "n_runs": len(runs)}


def _paired_report(cfg, groups, dest: Path) -> list[dict]:
    """Each branch minus vanilla X, paired by seed; Holm over the family of accuracy tests."""
    metrics = ("accuracy", "mcc", "ece", "log_loss", "brier", "noisy_accuracy")
    prow, bodies = [], {}
    for d, qk, f in _grid(cfg):
        for b in _branches(cfg, d, f)[1:]:
            base = (d, _label(f, "vanilla"), qk)
            ps = [_paired(groups, (d, _label(f, b), qk), base, m) for m in metrics]
            ps = ps[: ps.index(None)] if None in ps else ps  # as far as the runs have them
            if not ps:
                continue
            row = {"dataset": d, "feature": f, "branch": b, "Q=K": qk, "n": ps[0][3]}
            for m, (mu, lo, hi, _, wins, pval) in zip(metrics, ps, strict=False):
                row.update({m: mu, m + "_lo": lo, m + "_hi": hi, m + "_wins": wins})
                row.update({"accuracy_p": pval} if m == "accuracy" else {})
            cells = [f"{_fmt(*p[:3], style='+', k=p[3])} ({p[4]}/{p[3]})" for p in ps]
            cells += ["—"] * (len(metrics) - len(ps))
            prow.append(row)
            bodies.setdefault(d, []).append((row, [_label(f, b), _on(qk), row["n"]] + cells))
    tested = [i for i, r in enumerate(prow) if np.isfinite(r["accuracy_p"])]
    adjusted = holm([prow[i]["accuracy_p"] for i in tested]) if tested else []
    adjusted = dict(zip(tested, adjusted, strict=True))
    for i, r in enumerate(prow):
        r["accuracy_p_holm"] = float(adjusted.get(i, np.nan))
    md = ["Each branch minus vanilla X, paired by seed (same warm-up, same Phase B data order): "
          "mean [95 % t-interval]; in brackets after it, the seeds where the branch is better. "
          f"Last column: Holm-adjusted p-value of Δaccuracy (one-sample t-test) over the "
          f"{len(tested)} comparisons of this file.\n"]  # fmt: skip
    head = ["branch", "Q=K", "seeds"] + [f"Δ{m}" for m in metrics] + ["Holm p (Δaccuracy)"]
    for d, body in bodies.items():
        holm_p = [r["accuracy_p_holm"] for r, _ in body]
        body = [line + [f"{q:.3g}" if np.isfinite(q) else "—"]
                for (_, line), q in zip(body, holm_p, strict=True)]  # fmt: skip
        md += [f"\n## {d}\n", "\n".join(markdown_table(head, body)) + "\n"]
    write_csv(dest / "paired.csv", prow)
    (dest / "paired.md").write_text("".join(md))
    return prow


def _claims_report(cfg, groups, dest: Path) -> None:
    md = ["Each claim of the paper, answered from this study's runs. 'best': paired difference "
          "(target minus rival, same seeds) against every other main variant of the data set; "
          "yes = every 95 % CI excludes 0 in the target's favour, no = some rival is better with "
          "a CI excluding 0, inconclusive otherwise.\n"]  # fmt: skip
    names = {d["name"]: d for d in cfg["datasets"]}
    for d, (f, b), qk, metrics, kind in PAPER_CLAIMS:
        label = f"{d}: {_label(f, b)} (Q=K {'on' if qk else 'off'})"
        md.append(f"\n### {label}: {kind} in {', '.join(metrics)}\n")
        if d not in names or f not in cfg["features"]:
            md.append("not in this study\n")
            continue
        target = (_label(f, b), qk)
        rivals = [(_label(f, "vanilla"), qk)]
        if kind == "best":
            main = [(v, q, br) for v, q, _, br in _table_variants(cfg, names[d])]
            rivals = [(v, q) for v, q, br in main if br in BRANCHES + ("softmax",)]
            rivals = [r for r in rivals if r != target]
        for m in metrics:
            verdict, lines = _claim_best(groups, d, target, rivals, m)
            md.append(f"- **{m}: {verdict}**" + ("".join(f"\n  - {x}" for x in lines)) + "\n")
    md.append("\n### Kernel-X vs vanilla X (the headline question), accuracy\n")
    for d, qk, f in _grid(cfg):
        kern, vanilla = (d, _label(f, "kernel"), qk), (d, _label(f, "vanilla"), qk)
        if c := _compared(groups, kern, vanilla, "accuracy"):
            md += [f"- {d}, {FEATURE_LABEL[f]}, Q=K {_on(qk)}: {c[0]}, n={c[1]}: **{c[2]}**\n"]
    # Kernel-X minus each control, paired by seed: a gain over vanilla X that a control
    # matches (a fresh draw of Ω at the same point) is not the learned particles' doing
    ctl = cfg["controls"]
    f = ctl["feature"]
    for d in ctl["datasets"]:
        for qk in names[d]["tie_qk"]:
            kern, lines = (d, _label(f, "kernel"), qk), []
            for b in ctl["kinds"]:
                ms = ("accuracy", "log_loss")
                cs = [(m, _compared(groups, kern, (d, _label(f, b), qk), m)) for m in ms]
                cells = [f"Δ{m} {c[0]} (n={c[1]}, better: {c[2]})" for m, c in cs if c]
                if cells:
                    lines.append(f"- minus {_label(f, b)}: " + "; ".join(cells) + "\n")
            if lines:
                on = _on(qk)
                md += [f"\n### {d}: {_label(f, 'kernel')} (Q=K {on}) minus each control, "]
                md += ["paired by seed\n", *lines]
    (dest / "claims.md").write_text("".join(md))


# (key, column, format) of phase_a.md and training.md: means over seeds
# fmt: off
PHASE_A_COLUMNS = tuple((k, c, ".4g") for k, c in (
    ("row_norm_before", "|ω| before"), ("row_norm_after", "|ω| after"),
    ("prior_row_norm", "prior E|ω|"), ("frac_on_boundary", "on boundary"),
    ("align_heldout_before", "held-out align before"),
    ("align_heldout_after", "held-out align after"),
    ("force_ratio_before", "|rep|/|align| before"), ("force_ratio_after", "|rep|/|align| after"),
    ("tv_to_softmax_before", "TV to softmax before"),
    ("tv_to_softmax_after", "TV to softmax after"), ("entropy_before", "entropy before"),
    ("entropy_after", "entropy after"), ("entropy_softmax", "entropy softmax"),
    ("phase_a_seconds", "Phase A s")))
_TRAINING_COLUMNS = (
    ("warmup_steps", "warm-up steps", ".0f"), ("phase_b_epochs", "Phase B epochs", ".2f"),
    ("phase_b_best_epoch", "best epoch", ".2f"), ("phase_b_steps", "Phase B steps", ".0f"),
    ("phase_b_stopped_early", "stopped early", ".2f"), ("wall_seconds", "wall s / run", ".0f"))
# fmt: on


def _means_table(cfg, groups, columns, branches=None) -> tuple[str, float]:
    """Means over seeds of ``columns`` per variant with runs (of ``branches``); wall time."""
    body, total = [], 0.0
    for ds in cfg["datasets"]:
        for v, qk, _, b in _table_variants(cfg, ds):
            g = groups.get((ds["name"], v, qk))
            if not g or (branches is not None and b not in branches):
                continue
            total += sum(r.get("wall_seconds", 0.0) for r in g)
            cells = [f"{np.mean([r[k] for r in g]):{f}}" for k, _, f in columns]
            body.append([ds["name"], v, _on(qk), len(g)] + cells)
    head = ["data set", "variant", "Q=K", "seeds"] + [c for _, c, _ in columns]
    return "\n".join(markdown_table(head, body)) + "\n", total


def _phase_a_report(cfg, groups, dest: Path) -> None:
    table, _ = _means_table(cfg, groups, PHASE_A_COLUMNS,
                            ("kernel", "priornorms", "lam0", "atinit"))  # fmt: skip
    (dest / "phase_a.md").write_text(
        "What Phase A did (means over seeds of the per-layer means; alignment = the configured "
        "form on held-out training sequences; TV = mean total-variation distance of the "
        "attention rows to softmax(qᵀk/√d) on held-out sequences).\n\n" + table)  # fmt: skip


def _training_report(cfg, groups, dest: Path, machine: str) -> None:
    tr = cfg["train"]
    table, total = _means_table(cfg, groups, _TRAINING_COLUMNS)
    (dest / "training.md").write_text(
        f"Training, per variant (means over seeds). Machine: {machine}. Warm-up: fixed "
        f"{tr['warmup_epochs']} epochs; Phase B: early stopping on the validation log loss "
        f"(patience {tr['patience']}, at most {tr['max_epochs']} epochs), best parameters "
        f"restored.\n\n{table}\nTotal wall time of the runs: {total / 3600:.2f} h.\n")  # fmt: skip


def _figures(cfg, rows, runs, dest: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figdir = dest / "figures"
    figdir.mkdir(exist_ok=True)
    datasets = [d["name"] for d in cfg["datasets"] if any(r["dataset"] == d["name"] for r in rows)]
    metrics = ("accuracy", "mcc", "ece", "log_loss", "noisy_accuracy")
    size = (3.4 * len(metrics), 0.5 + 3.2 * len(datasets))
    fig, axes = plt.subplots(len(datasets), len(metrics), figsize=size, squeeze=False)
    for i, d in enumerate(datasets):
        rs = [r for r in rows if r["dataset"] == d]
        labels = [f"{r['variant']}{' (Q=K)' if r['Q=K'] == 'on' else ''}" for r in rs]
        for j, m in enumerate(metrics):
            ax, y = axes[i, j], np.arange(len(rs))
            err = np.nan_to_num([(r[m + "_hi"] - r[m + "_lo"]) / 2 for r in rs])
            ax.errorbar([r[m] for r in rs], y, xerr=err, fmt="o", ms=3, capsize=2)
            ax.set_yticks(y, labels if j == 0 else [], fontsize=6)
            ax.invert_yaxis()
            ax.set_title(d, fontsize=9)
            better = "lower" if m in LOWER_BETTER else "higher"
            ax.set_xlabel(f"{m} ({better} is better)", fontsize=8)
    fig.suptitle("mean and 95 % CI over seeds", fontsize=9)
    _save(plt, fig, figdir / "metrics.png")
    kr = [r for r in runs if "align_heldout_before" in r]
    if kr:
        fig, ax = plt.subplots(figsize=(4.5, 4))
        for f in cfg["features"]:
            mine = [r for r in kr if r["feature"] == f]
            before, after = ([r[k] for r in mine]
                             for k in ("align_heldout_before", "align_heldout_after"))  # fmt: skip
            if mine:
                ax.scatter(before, after, s=12, label=FEATURE_LABEL[f])
        ends = [v for r in kr for v in (r["align_heldout_before"], r["align_heldout_after"])]
        ax.plot([min(ends), max(ends)], [min(ends), max(ends)], "k--", lw=0.8)
        ax.set_xlabel("held-out alignment before Phase A (vanilla Ω)")
        ax.set_ylabel("held-out alignment after Phase A")
        ax.legend(fontsize=8)
        _save(plt, fig, figdir / "alignment.png")


def _save(plt, fig, path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --- the pretrained study's report ----------------------------------------------------------------
def load_pretrained_runs(out: Path) -> list[dict]:
    """Per finished run of the configuration ``<stage>/current.json`` names (per data set),
    the grid point and every scalar result.

    See Also
    --------
    write_report : the reports made from these runs.
    meanfield.studies.nlp.run_study : computes the runs.

    Examples
    --------
    >>> import tempfile
    >>> load_pretrained_runs(Path(tempfile.mkdtemp()))  # nothing finished yet
    []
    """
    rows = []  # stage 2 also in each own-settings method's folder (METHOD_SETTINGS)
    for stage in ("softmax", "linearized", *(f"linearized-{m}" for m in METHOD_SETTINGS)):
        try:
            current = json.loads((Path(out) / stage / "current.json").read_text())
        except (OSError, ValueError):
            current = None  # a folder from before current.json: every run
        for path in sorted((Path(out) / stage / "runs").glob("*.nc")):
            try:
                with xr.open_dataset(path, engine="h5netcdf") as ds:
                    a, name = ds.attrs, str(ds.attrs["sweep_dataset"])
                    if current is not None and a.get("sweep_config_digest") != current.get(name):
                        continue
                    row = {k: float(ds[k].values) for k in ds.data_vars}
                    variant = str(a.get("sweep_variant", "softmax"))  # by its current name:
                    variant = variant if variant == "softmax" else _canonical_variant(variant)
                    row.update(stage=stage.split("-")[0], dataset=name, variant=variant,
                               seed=int(a["sweep_seed"]))  # fmt: skip
            except (OSError, KeyError, ValueError, InputError):
                continue  # a run being written, or set aside; a variant of no known name
            rows.append(row)
    return rows


def _paired_seeds(rows, dataset, a, b, metric="clean_accuracy"):
    """Per-seed differences a − b (seeds where both are done)."""
    va = {r["seed"]: r[metric] for r in rows if r["dataset"] == dataset and r["variant"] == a}
    vb = {r["seed"]: r[metric] for r in rows if r["dataset"] == dataset and r["variant"] == b}
    return np.array([va[s] - vb[s] for s in sorted(set(va) & set(vb))])


def _comparisons(cfg, ds=None) -> list[tuple[str, str, str]]:
    """The planned paired comparisons ``(a, b, label)`` of data set ``ds``: per feature map
    Kernel − vanilla and Kernel − Hedgehog-loss, the controls, then (where the data set runs
    it) Kernel on each feature map − the published Hedgehog."""
    ms, ctl = _methods(cfg, ds), cfg.get("controls") or {}
    ms = ms if "kernel" in ms else []  # every comparison is Kernel's
    rivals = [("vanilla", "Kernel − vanilla"), ("hedgehog-loss", "Kernel − Hedgehog-loss (Ω only)")]
    out = [(f"kernel-{f}", f"{m}-{f}", x) for f in cfg["features"] for m, x in rivals if m in ms]
    f = ctl.get("feature")
    out += [(f"kernel-{f}", f"{k}-{f}", f"Kernel − {k}") for k in ctl.get("kinds", [])]
    published = "hedgehog-published-hedgehog", "Kernel − published Hedgehog"
    return out + [(f"kernel-{f}", *published) for f in cfg["features"]
                  if "hedgehog-published" in ms]  # fmt: skip


def _coulomb_comparisons(cfg, ds=None) -> list[tuple[str, str, str]]:
    """The planned comparisons ``(a, b, label)`` of Coulomb-regularised distillation on data
    set ``ds``: per feature map it runs on, minus Hedgehog-loss (Ω only) there and minus the
    published Hedgehog, where ``ds`` runs them (the repulsion-regularised particle field
    against the loss alone, and against the published trainable map)."""
    runs = pretrained_variants(cfg, ds)
    rivals = (("hedgehog-loss-{}", "Hedgehog-loss (Ω only)"),
              ("hedgehog-published-hedgehog", "published Hedgehog"))  # fmt: skip
    return [(a, b.format(f), f"Coulomb-regularised − {x}") for f in cfg["features"]
            if (a := f"coulomb-distilled-{f}") in runs for b, x in rivals
            if b.format(f) in runs]  # fmt: skip


def _recovered(rs, soft) -> tuple:
    # a softmax run of accuracy 0 recovers nothing measurable: left out, not 1/0
    ratios = [r["clean_accuracy"] / soft[r["seed"]] for r in rs if soft.get(r["seed"], 0) > 0]
    return t_interval(ratios)


def _pretrained_report(out: Path, cfg: dict, dest: Path, data_dir) -> dict:
    rows = load_pretrained_runs(out)
    write_csv(dest / "results.csv", rows, sorted({k for r in rows for k in r}))
    lines = [f"# Pretrained-model study: {cfg['name']}", "", cfg.get("description", ""), ""]
    table = []
    for ds in cfg["datasets"]:
        name = ds["name"]
        mine = [r for r in rows if r["dataset"] == name]
        if not mine:
            continue
        lines += [f"## {name}", ""]
        if data_dir is not None:
            from ..attention.text_baseline import tfidf_bar

            # first text only, on the networks' training examples
            entry = {k: v for k, v in ds.items() if k not in ("name", "seeds", "methods")}
            Cs = [0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300]
            split = cfg["validation_fraction"], cfg["data_seed"]
            bar = tfidf_bar(data_dir, entry, *split, Cs, pairs=False)
            edge = " (C on the grid's edge)" if bar["C_on_edge"] else ""
            lines += [f"TF-IDF + LR bar (same {bar['n_train']} training examples, "
                      f"C = {bar['C']:g}{edge}): accuracy {bar['accuracy']:.4f}, "
                      f"ECE {bar['ece']:.4f}.", ""]  # fmt: skip
        soft = {r["seed"]: r["clean_accuracy"] for r in mine if r["variant"] == "softmax"}
        budget = float(cfg.get("train", {}).get("max_epochs", np.inf))
        head = ["variant", "seeds", "accuracy", "noisy accuracy", "ECE", "after linearizing"]
        head += ["recovered (of softmax)", "best epoch at the budget's end"]
        lines += markdown_table(head, rule=_RULE)
        for variant in ["softmax"] + pretrained_variants(cfg, ds):
            rs = [r for r in mine if r["variant"] == variant]
            if not rs:  # planned, not run yet: shown as missing, never as a number
                lines.append(markdown_row([variant, 0, "missing", *["—"] * 5]))
                continue
            keys = ("clean_accuracy", "noisy_accuracy", "clean_ece", "linearized_accuracy")
            values = [[r.get(k, np.nan) for r in rs] for k in keys]
            acc, noisy, ece, lin = cis = [t_interval(v) for v in values]
            # a run whose best validation loss came at its last evaluation was stopped by the
            # epoch budget, not by early stopping: it may not have converged
            at_end = sum(float(r.get("best_epoch", np.nan)) >= budget for r in rs)
            cells = [_fmt(*ci, k=np.isfinite(v).sum()) for ci, v in zip(cis, values, strict=True)]
            cells += [_fmt(*_recovered(rs, soft), d=3), f"{at_end} of {len(rs)}"]
            lines.append(markdown_row([variant, len(rs), *cells]))
            table.append({"dataset": name, "variant": variant, "n": len(rs), "accuracy": acc[0]})
        lines.append("")
        lines += _learning_lines(mine, pretrained_variants(cfg, ds))
    comps, planned, family = _family(cfg, rows, _comparisons)
    head = ["data set", "comparison", "seeds", "difference", "Bonferroni interval", "p", "Holm p"]
    if comps:
        lines += ["## Paired differences (accuracy, by seed)", "",
                  f"95 % t-intervals; Holm-adjusted p and Bonferroni simultaneous 95 % intervals "
                  f"over the {len(planned)} planned comparisons ({len(planned) - len(comps)} not "
                  "yet computable, counted as p = 1).", ""]  # fmt: skip
        body = [_family_row(r["label"], r, r["k"]) for r in family]
        lines += markdown_table(head, body, rule=_RULE) + [""]
    # its own family (its own question), every planned comparison shown, missing ones so
    c_comps, c_planned, c_family = _family(cfg, rows, _coulomb_comparisons)
    if c_planned:
        by_label = {r["label"]: r for r in c_family}
        lines += ["## Coulomb-regularised distillation, paired (accuracy, by seed)", "",
                  "Does the repulsion-regularised particle field help? Coulomb-regularised "
                  "distillation minus Hedgehog-loss (Ω only) and minus the published Hedgehog: "
                  "95 % t-intervals; Holm-adjusted p and Bonferroni simultaneous 95 % intervals "
                  f"over this family's {len(c_planned)} planned comparisons "
                  f"({len(c_planned) - len(c_comps)} missing: below 2 paired seeds, counted as "
                  "p = 1).", ""]  # fmt: skip
        body = [_family_row(key, by_label.get(key), len(_paired_seeds(rows, *key[:3])))
                for key in c_planned]  # fmt: skip
        lines += markdown_table(head, body, rule=_RULE) + [""]
    tables = readme_tables(cfg, rows, family + c_family)
    if (cost := _inference_cost_tables(out)) is not None:  # one table shared by every method
        lines += ["## Inference time and memory per feature map", "", cost]
        tables["inference-cost"] = cost.rstrip("\n")
    (dest / "report.md").write_text("\n".join(lines) + "\n")
    (dest / "readme_tables.md").write_text(marked_tables(tables))
    return {"table": table, "comparisons": len(comps), "planned": len(planned),
            "readme_tables": tables}  # fmt: skip


#: the file of :func:`meanfield.attention.inference_cost.inference_cost`'s result, beside the
#: study folder (``results/inference_cost.nc`` next to ``results/full``): the cost depends on
#: the feature map's kind and size only, so one measurement serves every preset of the study
INFERENCE_COST_FILE = "inference_cost.nc"


def _inference_cost_tables(out: Path) -> str | None:
    """:func:`~meanfield.attention.inference_cost.inference_cost_table` (CPU and wall time,
    memory) of ``<out>/../inference_cost.nc``; None where there is no such file."""
    path = Path(out).resolve().parent / INFERENCE_COST_FILE
    if not path.is_file():
        return None
    from ..attention.inference_cost import inference_cost_table
    from ..results import load_dataset

    return inference_cost_table(load_dataset(path), clock="both")


def _family(cfg, rows, comparisons) -> tuple[dict, list, list]:
    """A family of paired comparisons (``comparisons(cfg, ds)`` over the data sets): the computable
    ones' differences, every planned key, and :func:`~meanfield.stats.paired_family` over them:
    Holm and Bonferroni over every *planned* comparison, one not yet computable (< 2 paired seeds)
    as p = 1, so a partial study is never corrected for fewer claims than it makes."""
    comps, planned = {}, []
    for ds in cfg["datasets"]:
        for a, b, label in comparisons(cfg, ds):
            planned.append((ds["name"], a, b, label))
            if len(d := _paired_seeds(rows, ds["name"], a, b)) >= 2:
                comps[planned[-1]] = d
    return comps, planned, paired_family(comps, planned=len(planned)) if comps else []


def _family_row(key, r, k) -> list:
    """A report row of one comparison ``key``: its result ``r`` (None: missing), seeds ``k``."""
    cells = [key[0], f"{key[1]} − {key[2]} ({key[3]})", k]
    if r is None:
        return cells + ["missing", "—", "—", "—"]
    bonf = _NO_SPREAD if r["no_spread"] else f"[{r['lo_bonf']:.4f}, {r['hi_bonf']:.4f}]"
    return cells + [_fmt(r["mean"], r["lo"], r["hi"], k=r["k"]), bonf,
                    f"{r['p']:.3g}", f"{r['p_holm']:.3g}"]  # fmt: skip


# what each way of learning Omega records about the feature map before and after learning it
# (before: the prior draw; measured on held-out sequences): (label, before key, after key)
_LEARNING = (
    ("TV to softmax attention", "phase_a_tv_to_softmax_before", "phase_a_tv_to_softmax_after"),
    ("TV to softmax attention", "hedgehog_tv_before", "hedgehog_tv_after"),
    ("TV to softmax attention", "coulomb_tv_before", "coulomb_tv_after"),
    ("centred alignment (held out)", "phase_a_align_heldout_before", "phase_a_align_heldout_after"),
)


def _learning_lines(rows, order) -> list[str]:
    """Per learned variant, mean and 95 % t-interval over seeds of what its learning step
    changed and its wall time; descriptive, no claim (no correction)."""
    body = []
    for variant in order:
        rs = [r for r in rows if r["variant"] == variant]
        for label, before, after in _LEARNING:
            if rs and all(before in r and after in r for r in rs):
                b, a = (_fmt(*t_interval([r[k] for r in rs]), d=3, k=len(rs))
                        for k in (before, after))  # fmt: skip
                secs = np.median([r.get("learn_seconds", np.nan) for r in rs])
                body.append([variant, len(rs), label, b, a, f"{secs:.0f}"])
    if not body:
        return []
    head = ["variant", "seeds", "measure", "before", "after", "median learning s"]
    note = ("What learning Omega did (held-out sequences; mean [95 % t-interval] over seeds; "
            "before = the prior draw):")  # fmt: skip
    return [note, "", *markdown_table(head, body, rule=_RULE), ""]


# the README's tables (paper_repro/nlp_pretrained/README.md), rounded once from the unrounded
# results, included verbatim (meanfield.workbench.report_tables.update_readme_tables)
_DATASET_NAMES = {"rotten_tomatoes": "Rotten Tomatoes", "sst2": "SST-2", "qqp": "QQP"}
_FEATURE_NAMES = {"favor": "FAVOR+", "porf-softplus": "PORF-softplus"}
_METHOD_NAMES = {"vanilla": "vanilla", "kernel": "Kernel", "hedgehog-loss": "Hedgehog-loss",
                 "hedgehog-published": "published Hedgehog",
                 "coulomb-distilled": "Coulomb-regularised distillation"}  # fmt: skip
_CONTROL_NOTES = {"redraw": ("redraw", "another prior draw"),
                  "lam0": ("λ = 0", "Kernel without repulsion")}  # fmt: skip


def _cell(c, bonferroni: bool) -> str:
    """A paired difference in points: mean [t-interval], [Bonferroni interval], Holm p."""
    if c is None:
        return "—"
    text = f"{_points(c['mean'])} [{_points(c['lo'])}, {_points(c['hi'])}]"
    if c["no_spread"]:  # equal differences at every seed: no interval, Bonferroni or not
        text = f"{_points(c['mean'])} {_NO_SPREAD}"
    elif bonferroni:
        text += f", [{_points(c['lo_bonf'])}, {_points(c['hi_bonf'])}]"
    return f"{text}, Holm {_p_short(c['p_holm'])}"


def _readme_label(variant: str) -> str:
    """The README's name of a variant: ``vanilla FAVOR+``, ``control: λ = 0 FAVOR+ (...)``."""
    if variant == "softmax":
        return "softmax MiniLM"  # the study's encoder, fine-tuned with softmax attention
    method, feature = split_variant(variant)
    if method in _CONTROL_NOTES:
        name, note = _CONTROL_NOTES[method]
        return f"control: {name} {_FEATURE_NAMES.get(feature, feature)} ({note})"
    if method == "hedgehog-published":  # brings its own map: no feature map to name
        return _METHOD_NAMES[method]
    return f"{_METHOD_NAMES.get(method, method)} {_FEATURE_NAMES.get(feature, feature)}"


def _points(x: float) -> str:
    """An accuracy difference in points (x 100), signed, one decimal, typographic minus."""
    return f"{100 * x:+.1f}".replace("-", "−")


def _p_short(p: float) -> str:
    """A p-value to three decimals without trailing zeros (``1``, ``0.19``, ``0.033``)."""
    return "< 0.001" if p < 0.0005 else f"{p:.3f}".rstrip("0").rstrip(".")


def readme_tables(cfg: dict, rows: list[dict], family: list[dict]) -> dict[str, str]:
    """The README's tables of the pretrained study, each number rounded once.

    Per data set with runs: ``variants-<data set>`` (seeds, accuracy and 95 % t-interval,
    after linearizing, fraction of softmax recovered by seed; a planned variant without runs
    as ``missing``), ``paired-<data set>`` (Kernel minus vanilla, Hedgehog-loss, published
    Hedgehog per feature map, in points: mean, t-interval, Bonferroni interval, Holm p over the
    planned family; "—" below two paired seeds), ``paired-coulomb-<data set>`` (Coulomb-
    regularised distillation minus Hedgehog-loss and published Hedgehog, over its own family;
    once one is computable), each also ``-no-bonferroni``. Controls are not tabulated.

    Parameters
    ----------
    cfg : dict
        The study's configuration (``<out>/config.json``).
    rows : list of dict
        The finished runs (:func:`load_pretrained_runs`).
    family : list of dict
        :func:`meanfield.stats.paired_family` of differences keyed ``(data set, a, b, label)``.

    Returns
    -------
    dict
        Table name -> markdown (no trailing newline), in the configuration's order.

    See Also
    --------
    meanfield.workbench.report_tables.update_readme_tables : puts them into the README.

    Examples
    --------
    >>> cfg = {"datasets": [{"name": "sst2"}], "features": ["favor"], "methods": ["vanilla"]}
    >>> rows = [{"dataset": "sst2", "variant": v, "seed": s, "clean_accuracy": a,
    ...          "linearized_accuracy": 0.7} for v, s, a in [("softmax", 0, 0.8),
    ...          ("softmax", 1, 0.9), ("vanilla-favor", 0, 0.76), ("vanilla-favor", 1, 0.81)]]
    >>> print(readme_tables(cfg, rows, [])["variants-sst2"])
    | SST-2 variant | seeds | accuracy | after linearizing | recovered of softmax |
    | --- | --- | --- | --- | --- |
    | softmax MiniLM | 2 | 0.8500 [0.2147, 1.4853] | | 1.000 |
    | vanilla FAVOR+ | 2 | 0.7850 [0.4673, 1.1027] | 0.7000 | 0.925 [0.607, 1.243] |
    """
    by_label = {r["label"]: r for r in family}
    tables = {}
    for ds in cfg["datasets"]:
        name = ds["name"]
        mine = [r for r in rows if r["dataset"] == name]
        if not mine:
            continue
        title = _DATASET_NAMES.get(name, name)
        soft = {r["seed"]: r["clean_accuracy"] for r in mine if r["variant"] == "softmax"}
        head = ["seeds", "accuracy", "after linearizing", "recovered of softmax"]
        lines = markdown_table([f"{title} variant", *head], rule=_RULE)
        for variant in ["softmax"] + pretrained_variants(cfg, ds):
            if not (rs := [r for r in mine if r["variant"] == variant]):
                lines.append(f"| {_readme_label(variant)} | 0 | missing | | |")  # planned
            else:
                acc = _fmt(*t_interval([r["clean_accuracy"] for r in rs]), k=len(rs))
                lin = np.mean([r.get("linearized_accuracy", np.nan) for r in rs])
                rest = f"{_fmt(lin, np.nan, np.nan)} | {_fmt(*_recovered(rs, soft), d=3)}"
                rest = "| 1.000" if variant == "softmax" else rest  # never linearized
                lines.append(f"| {_readme_label(variant)} | {len(rs)} | {acc} | {rest} |")
        tables[f"variants-{name}"] = "\n".join(lines)
        for prefix, comparisons in (("paired", _comparisons),
                                    ("paired-coulomb", _coulomb_comparisons)):  # fmt: skip
            grid: dict[str, dict[str, dict]] = {}  # those with a feature map (no controls)
            for a, b, label in comparisons(cfg, ds):
                method_a, feature = split_variant(a)
                method_b, _ = split_variant(b)
                if method_b in _CONTROL_NOTES:
                    continue
                row = f"{_METHOD_NAMES[method_a]} − {_METHOD_NAMES.get(method_b, method_b)}"
                grid.setdefault(row, {})[feature] = by_label.get((name, a, b, label))
            grid = {k: v for k, v in grid.items() if any(c is not None for c in v.values())}
            feats = [f for f in cfg["features"] if any(f in c for c in grid.values())]
            head = [title] + [_FEATURE_NAMES.get(f, f) for f in feats]
            for bonf, key in ((True, f"{prefix}-{name}"),
                              (False, f"{prefix}-{name}-no-bonferroni")):  # fmt: skip
                body = [[row] + [_cell(c.get(f), bonf) for f in feats] for row, c in grid.items()]
                if grid:
                    tables[key] = "\n".join(markdown_table(head, body, rule=_RULE))
    return tables
