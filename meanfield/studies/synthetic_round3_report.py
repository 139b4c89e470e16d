"""Reports of the round-three synthetic study (:mod:`meanfield.studies.synthetic_round3`).

:func:`report` writes, next to the runs: ``table.csv`` (one row per learner × cell),
``table.md`` (test error, mean ± SE over seeds, every learner × task at each noise and m),
``cv_choices.md`` (the CV-chosen values with the edges of their grids), ``claims.md`` (every
family of claims with paired 95 % t-intervals, Holm-adjusted p-values and Bonferroni
intervals), ``moved.md`` (how far the Coulomb learners moved their particles) and
``beta_curve.md`` (the tempered variant's cross-validated accuracy at each β searched) and
``error_vs_noise.png``.

Paired differences: every learner of a cell sees the same split and every Coulomb learner
starts from the CV-chosen RFF draw, so differences are taken seed by seed
(:func:`meanfield.stats.paired_family`).

Examples
--------
>>> from meanfield.studies.synthetic_round3_report import LABELS
>>> LABELS["coulomb_tempered"]
'Coulomb, tempered + direction repulsion (β by CV)'
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np

from ..stats import paired_family

__all__ = ["LABELS", "errors", "report"]

LABELS = {
    "rff_median": "RFF, median bandwidth (no CV)",
    "rff": "RFF (CV bandwidth)",
    "sklearn_rff": "scikit-learn RBFSampler + RidgeClassifierCV (CV bandwidth)",
    "importance": "importance sampling (CV bandwidth, ρ)",
    "coulomb_linear": "Coulomb, first configuration (linear, β = 10³)",
    "coulomb_tempered": "Coulomb, tempered + direction repulsion (β by CV)",
    "coulomb_tempered_align": "Coulomb, tempered + direction repulsion (β by held-out alignment)",
    "coulomb_learn_or_stay": "Coulomb, tempered where CV prefers it to the RFF draw, else the draw",
}
COULOMB = ("coulomb_linear", "coulomb_tempered", "coulomb_tempered_align", "coulomb_learn_or_stay")


def _best_cv(row) -> float:
    """The largest mean CV accuracy of a widened search (every point scored lies in its final
    window, so this is the accuracy of the choice)."""
    return max(s["accuracy"] for _, s in row["cv"]["scores"])


def add_learn_or_stay(records) -> list[dict]:
    """Add the derived learner ``coulomb_learn_or_stay`` to every record: the tempered particles
    where their CV accuracy beats that of the RFF draw they start from, else that draw.

    Exact, without refitting: the tempered search and the RFF search use the same folds and the
    same pipeline, and in every fold the tempered learner starts from the RFF draw at the RFF's
    chosen bandwidth -- so "stay" is the RFF point of the RFF search. Ties stay. A stay row
    has the RFF's test error and zero displacement.

    Examples
    --------
    >>> def row(acc, err):
    ...     return {"ridge_test_error": err, "cv": {"scores": [[[0], {"accuracy": acc}]]}}
    >>> rec = {"learners": {"rff": row(0.9, 0.1), "coulomb_tempered": row(0.9, 0.2)}}
    >>> add_learn_or_stay([rec])[0]["learners"]["coulomb_learn_or_stay"]["learned"]
    False
    """
    for r in records:
        L = r["learners"]
        t, f = L["coulomb_tempered"], L["rff"]
        learn = _best_cv(t) > _best_cv(f)
        if learn:
            row = {**t, "learned": True}
        else:
            row = {
                **{k: v for k, v in t.items() if k not in ("ridge_test_error",)},
                "learned": False,
            }
            row["ridge_test_error"] = f["ridge_test_error"]
            for k in ("disp", "ed", "iso", "align_c_train", "align_c_test", "norm_ratio"):
                if k in t:
                    row[k] = {"disp": 0.0, "ed": 0.0, "norm_ratio": 1.0}.get(
                        k, t.get(f"{k}_init", np.nan)
                    )
        L["coulomb_learn_or_stay"] = row
    return records


def errors(records, metric: str = "ridge_test_error") -> dict:
    """{(learner, task, m, noise): {seed: value}} of one metric.

    Examples
    --------
    >>> rec = {"task": "radial", "m": 8, "noise": 0.1, "seed": 0,
    ...        "learners": {"rff": {"ridge_test_error": 0.2}}}
    >>> errors([rec])
    {('rff', 'radial', 8, 0.1): {0: 0.2}}
    """
    out: dict = {}
    for r in records:
        for name, res in r["learners"].items():
            if metric in res:
                out.setdefault((name, r["task"], r["m"], r["noise"]), {})[r["seed"]] = res[metric]
    return out


def _present(records) -> list[tuple]:
    """The (m, noise) settings that have records, noise first then m."""
    return sorted({(r["m"], r["noise"]) for r in records}, key=lambda p: (p[1], p[0]))


def _pair(E, a, b, key_a, key_b=None):
    xa, xb = E.get((a, *key_a), {}), E.get((b, *(key_b or key_a)), {})
    seeds = sorted(set(xa) & set(xb))
    return np.array([xa[s] for s in seeds]), np.array([xb[s] for s in seeds])


def _ci(r, digits=3) -> str:
    f = f"+.{digits}f"
    return f"{r['mean']:{f}} [{r['lo']:{f}}, {r['hi']:{f}}]"


def _holm_cells(r, digits=3) -> str:
    f = f"+.{digits}f"
    return f"[{r['lo_bonf']:{f}}, {r['hi_bonf']:{f}}] | {r['p']:.2g} | {r['p_holm']:.2g}"


def _write_table(records, cfg, out: Path) -> None:
    E = errors(records)
    learners = [n for n in LABELS if any(n in r["learners"] for r in records)]
    lines = [
        f"Test error (ridge, α by LOO over n · 10^[−12..1]), n_train = {cfg['n_train']}, "
        f"n_test = {cfg['n_test']}; mean ± standard error over the seeds present (k). Label "
        "noise on the training labels only.",
        "",
    ]
    for m, noise in _present(records):
        ks = {t: len(E.get(("rff", t, m, noise), {})) for t in cfg["tasks"]}
        lines += [
            f"### noise {noise}, m = {m}",
            "",
            "Seeds: " + ", ".join(f"{t} {k}" for t, k in ks.items()),
            "",
        ]
        lines += ["| learner | " + " | ".join(cfg["tasks"]) + " |"]
        lines += ["|---" * (len(cfg["tasks"]) + 1) + "|"]
        for ln in learners:
            cells = []
            for t in cfg["tasks"]:
                v = np.array(list(E.get((ln, t, m, noise), {}).values()))
                se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.nan
                cells.append(f"{v.mean():.3f} ± {se:.3f}" if len(v) else "—")
            lines.append(f"| {LABELS[ln]} | " + " | ".join(cells) + " |")
        lines.append("")
    (out / "table.md").write_text("\n".join(lines) + "\n")


def _counts(values) -> str:
    return ", ".join(
        f"{k}: {v}" for k, v in sorted(Counter(values).items(), key=lambda kv: str(kv[0]))
    )


def _write_cv_choices(records, cfg, out: Path) -> None:
    lines = [
        "CV-chosen values (count over seeds) and where they sit in their searched lists "
        "(`interior`; `low end`/`high end`: an end of the candidate list, i.e. the search could "
        "not widen further). RFF/IS bandwidth as k in σ = 2^k · median (list k ∈ "
        f"[{cfg['bandwidth_exponents'][0]}, {cfg['bandwidth_exponents'][1]}]); ρ_f ∈ "
        f"{cfg['rho_fractions']} (both ends natural bounds); β ∈ {cfg['betas']}. Ridge α: "
        "cells whose LOO choice is an end of n · 10^[−12..1], per learner.",
        "",
        "| noise | m | task | RFF k | RFF edge | sklearn k | IS k | IS ρ_f | IS edges | "
        "tempered β | β edge | β by alignment | α at a grid end |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m, noise in _present(records):
        for t in cfg["tasks"]:
            cell = [r for r in records if (r["task"], r["m"], r["noise"]) == (t, m, noise)]
            if not cell:
                continue
            L = [r["learners"] for r in cell]
            alpha_edges = Counter(n for x in L for n, v in x.items() if v.get("alpha_edge"))
            lines.append(
                f"| {noise} | {m} | {t} | "
                + _counts(x["rff"]["bandwidth_exponent"] for x in L)
                + " | "
                + _counts(x["rff"]["cv"]["edges"]["bandwidth"] for x in L)
                + " | "
                + _counts(x["sklearn_rff"]["bandwidth_exponent"] for x in L)
                + " | "
                + _counts(x["importance"]["bandwidth_exponent"] for x in L)
                + " | "
                + _counts(x["importance"]["rho_fraction"] for x in L)
                + " | "
                + _counts("/".join(x["importance"]["cv"]["edges"].values()) for x in L)
                + " | "
                + _counts(x["coulomb_tempered"]["beta"] for x in L)
                + " | "
                + _counts(x["coulomb_tempered"]["cv"]["edges"]["beta"] for x in L)
                + " | "
                + _counts(x["coulomb_tempered_align"]["beta"] for x in L)
                + " | "
                + (_counts(alpha_edges.elements()) or "none")
                + " |"
            )
    (out / "cv_choices.md").write_text("\n".join(lines) + "\n")


def _family_table(title, note, rows, labels) -> list[str]:
    lines = [
        f"## {title}",
        "",
        note,
        "",
        f"One family of K = {rows[0]['K'] if rows else 0} tests: p from the paired t-test, "
        "Holm-adjusted p over the family, Bonferroni (simultaneous, family-wise 95 %) "
        "interval.",
        "",
        "| " + " | ".join(labels) + " | mean [95 % CI] | Bonferroni CI | p | Holm p |",
        "|---" * (len(labels) + 4) + "|",
    ]
    for r in rows:
        lab = r["label"] if isinstance(r["label"], tuple) else (r["label"],)
        lines.append("| " + " | ".join(str(x) for x in lab) + f" | {_ci(r)} | {_holm_cells(r)} |")
    return lines + [""]


def _claims_lines(records, cfg) -> list[str]:
    """Every family of claims (one Holm correction per family)."""
    E = errors(records)
    ms, tasks, noises = sorted(cfg["m"]), cfg["tasks"], cfg["noise"]
    cells = [(t, m, n) for m, n in _present(records) for t in tasks]
    lines = ["# Claims, round three (every learner tuned on widened grids)", ""]
    fam = {}
    for t, m, n in cells:
        for ref in ("rff", "importance"):
            fam[(t, m, n, ref)] = _pair(E, ref, "coulomb_tempered", (t, m, n))
    lines += _family_table(
        "Claim 1: learned particles (tempered variant) beat fixed features and importance sampling",
        "Error of the reference minus error of Coulomb (positive: Coulomb better).",
        paired_family(fam),
        ["task", "m", "noise", "reference"],
    )
    for ln in ("coulomb_tempered", "coulomb_learn_or_stay", "coulomb_linear", "importance"):
        fam = {(t, m, n): _pair(E, ln, "rff", (t, m, n)) for t, m, n in cells}
        lines += _family_table(
            f"Against RFF: {LABELS[ln]} minus RFF, every cell",
            "Positive: worse than RFF. 'Not worse' is read from the Bonferroni upper bound; a "
            "significant loss is a positive mean with Holm p < 0.05.",
            paired_family(fam),
            ["task", "m", "noise"],
        )
    lo, hi = ms[0], ms[-1]
    present = _present(records)
    both = [n for n in noises if lo != hi and (lo, n) in present and (hi, n) in present]
    fam = {}
    for t in tasks:
        for n in both:
            a = E.get(("rff", t, lo, n), {})
            b = E.get(("coulomb_tempered", t, lo, n), {})
            c = E.get(("rff", t, hi, n), {})
            e = E.get(("coulomb_tempered", t, hi, n), {})
            seeds = sorted(set(a) & set(b) & set(c) & set(e))
            fam[(t, n)] = np.array([(c[s] - e[s]) - (a[s] - b[s]) for s in seeds])
    lines += _family_table(
        f"Claim 2: the gap RFF − Coulomb grows from m = {lo} to m = {hi}",
        "Change of the gap (positive: it grows).",
        paired_family(fam),
        ["task", "noise"],
    )
    fam = {}
    for t in tasks:
        for n in both:
            rat = {}
            for ln in ("coulomb_tempered", "rff"):
                a, b = E.get((ln, t, lo, n), {}), E.get((ln, t, hi, n), {})
                rat[ln] = {s: (1 - a[s]) / (1 - b[s]) for s in set(a) & set(b)}
            seeds = sorted(set(rat["coulomb_tempered"]) & set(rat["rff"]))
            fam[(t, n)] = np.array([rat["coulomb_tempered"][s] - rat["rff"][s] for s in seeds])
    lines += _family_table(
        f"Claim 3: fixed features lose more accuracy from m = {hi} to m = {lo}",
        "Accuracy ratio (m = lo / m = hi) of Coulomb minus that of RFF (positive: fixed features "
        "degrade more).",
        paired_family(fam),
        ["task", "noise"],
    )
    fam = {(t, m, n): _pair(E, "sklearn_rff", "rff", (t, m, n)) for t, m, n in cells}
    lines += _family_table(
        "Sanity: scikit-learn's RBFSampler pipeline minus ours (same model, another draw)",
        "Expected: no difference.",
        paired_family(fam),
        ["task", "m", "noise"],
    )
    return lines


def _moved_lines(records, cfg) -> list[str]:
    """How far each Coulomb learner moved, with the family 'the centred training alignment
    rose' and 'the law moved more than a redraw' (energy distance) for the tempered one."""
    lines = [
        "# Did the particles move?",
        "",
        "Per cell, means over seeds of: the centred training alignment at the start → end "
        "(Δ test alignment), the mean particle displacement and the energy distance of the "
        "final from the initial cloud (standardised frequencies), each divided by the same "
        "quantity for an independent prior draw (a redraw: displacement ratio ≈ 1, "
        "energy-distance ratio ≈ 1), the median-norm ratio and the direction isotropy "
        "d·λ_max (start → end).",
        "",
        "| noise | m | task | learner | align. train | Δ align. test | disp / redraw | "
        "ED / redraw | norm ratio | isotropy |",
        "|---" * 10 + "|",
    ]
    for m, n in _present(records):
        for t in cfg["tasks"]:
            cell = [r for r in records if (r["task"], r["m"], r["noise"]) == (t, m, n)]
            for ln in COULOMB:
                rows = [r["learners"][ln] for r in cell if ln in r["learners"]]
                if not rows:
                    continue

                def mean(key, rows=rows):
                    return float(np.mean([x[key] for x in rows]))

                dte = np.mean([x["align_c_test"] - x["align_c_test_init"] for x in rows])
                name = ln.replace("coulomb_", "")
                if ln == "coulomb_learn_or_stay":
                    name += f" (learned {sum(x['learned'] for x in rows)}/{len(rows)})"
                lines.append(
                    f"| {n} | {m} | {t} | {name} | "
                    f"{mean('align_c_train_init'):.3f} → {mean('align_c_train'):.3f} | "
                    f"{dte:+.3f} | {mean('disp') / mean('disp_redraw'):.2f} | "
                    f"{mean('ed') / mean('ed_redraw'):.1f} | {mean('norm_ratio'):.2f} | "
                    f"{mean('iso_init'):.2f} → {mean('iso'):.2f} |"
                )
    fam_a, fam_e = {}, {}
    for m, n in _present(records):
        for t in cfg["tasks"]:
            rows = [
                r["learners"]["coulomb_tempered"]
                for r in records
                if (r["task"], r["m"], r["noise"]) == (t, m, n)
            ]
            fam_a[(t, m, n)] = np.array(
                [x["align_c_train"] - x["align_c_train_init"] for x in rows]
            )
            fam_e[(t, m, n)] = np.log(np.array([x["ed"] / x["ed_redraw"] for x in rows]))
    lines += [""] + _family_table(
        "Tempered variant: the centred training alignment rose (end − start)",
        "Positive: it rose.",
        paired_family(fam_a),
        ["task", "m", "noise"],
    )
    lines += _family_table(
        "Tempered variant: the law moved more than a redraw (log of ED / ED of a redraw)",
        "Positive: the final cloud is further from the start than an independent prior draw is.",
        paired_family(fam_e),
        ["task", "m", "noise"],
    )
    return lines


def _beta_lines(records, cfg) -> list[str]:
    """The tempered variant's CV error (1 − mean held-out accuracy) at each β searched, mean
    over the seeds whose search reached it (k in brackets): the curve CV chose from."""
    lines = [
        "# The tempered variant's cross-validated error at each β (training folds only; "
        "mean over the seeds whose widened search scored it, k in brackets)",
        "",
        "| noise | m | task | " + " | ".join(f"β = {b:g}" for b in cfg["betas"]) + " |",
        "|---" * (len(cfg["betas"]) + 3) + "|",
    ]
    for m, n in _present(records):
        for t in cfg["tasks"]:
            cell = [r for r in records if (r["task"], r["m"], r["noise"]) == (t, m, n)]
            if not cell:
                continue
            cells = []
            for j in range(len(cfg["betas"])):
                v = [
                    1 - s["accuracy"]
                    for r in cell
                    for p, s in r["learners"]["coulomb_tempered"]["cv"]["scores"]
                    if p == [j]
                ]
                cells.append(f"{np.mean(v):.3f} ({len(v)})" if v else "—")
            lines.append(f"| {n} | {m} | {t} | " + " | ".join(cells) + " |")
    return lines


def _write_figure(records, cfg, out: Path) -> None:
    """``error_vs_noise.png``: test error (mean ± 2 SE over seeds) against the label noise,
    one panel per task and m, for RFF, importance sampling and the Coulomb learners."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    E = errors(records)
    show = ["rff", "sklearn_rff", "importance", "coulomb_linear", "coulomb_tempered"]
    ms, tasks = sorted(cfg["m"]), cfg["tasks"]
    fig, axes = plt.subplots(
        len(ms), len(tasks), figsize=(4 * len(tasks), 3.3 * len(ms)), squeeze=False
    )
    for i, m in enumerate(ms):
        for j, t in enumerate(tasks):
            ax = axes[i, j]
            for k, ln in enumerate(show):
                xs, mu, se = [], [], []
                for n in cfg["noise"]:
                    v = np.array(list(E.get((ln, t, m, n), {}).values()))
                    if len(v) > 1:
                        xs.append(n + 0.004 * (k - 2))
                        mu.append(v.mean())
                        se.append(2 * v.std(ddof=1) / np.sqrt(len(v)))
                if xs:
                    ax.errorbar(xs, mu, yerr=se, marker="o", ms=3, capsize=2, label=LABELS[ln])
            ax.set(title=f"{t}, m = {m}", xlabel="label noise", ylabel="test error")
    axes[0, 0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "error_vs_noise.png", dpi=100)
    plt.close(fig)


def _write_csv(records, out: Path) -> None:
    keys = (
        "ridge_test_error",
        "ridge_alpha",
        "alpha_edge",
        "alignment_test",
        "align_c_test_final",
        "fit_time",
        "bandwidth_exponent",
        "rho_fraction",
        "beta",
        "disp",
        "disp_redraw",
        "ed",
        "ed_redraw",
        "norm_ratio",
        "iso",
        "iso_init",
        "align_c_train_init",
        "align_c_train",
        "plateau",
    )
    rows = []
    for r in records:
        for name, res in r["learners"].items():
            row = {
                "learner": name,
                "task": r["task"],
                "m": r["m"],
                "noise": r["noise"],
                "seed": r["seed"],
            }
            row.update({k: res.get(k, "") for k in keys})
            rows.append(row)
    with open(out / "table.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def report(out, cfg=None) -> None:
    """Every report of the round-three folder ``out`` (module docstring), from the cells of the
    configuration last run there (``cfg``, if given, must be that configuration).

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_round3 import CONFIGS, run_study
    >>> from meanfield.studies.synthetic_round3_report import report
    >>> out = tempfile.mkdtemp()
    >>> _ = run_study({**CONFIGS["ci"], "seeds": [0]}, out, scheduler="threads", progress=False)
    >>> report(out)
    report: 1 cells -> table.md, cv_choices.md, claims.md, moved.md, beta_curve.md, table.csv
    """
    from .synthetic_kernels import config_differences
    from .synthetic_round3 import check_config, load_records

    out = Path(out)
    recorded, records = load_records(out)
    if cfg is not None and (diff := config_differences(recorded, check_config(cfg))):
        raise ValueError(f"{out} holds another configuration: {'; '.join(diff[:5])}")
    cfg = recorded
    if not records:
        print("no runs yet")
        return
    records = add_learn_or_stay(records)
    _write_csv(records, out)
    _write_table(records, cfg, out)
    _write_cv_choices(records, cfg, out)
    (out / "claims.md").write_text("\n".join(_claims_lines(records, cfg)) + "\n")
    (out / "moved.md").write_text("\n".join(_moved_lines(records, cfg)) + "\n")
    (out / "beta_curve.md").write_text("\n".join(_beta_lines(records, cfg)) + "\n")
    _write_figure(records, cfg, out)
    print(
        f"report: {len(records)} cells -> table.md, cv_choices.md, claims.md, moved.md, "
        "beta_curve.md, table.csv"
    )
