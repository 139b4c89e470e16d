"""Tables and claims of the issue-10 variant study (``run_variants.py``), from its run files.

Writes, next to the runs: ``table.csv`` (one row per learner x task x m x seed), ``table.md``
(every learner x task at each m: mean test error +- standard error, and the paired differences
against fixed RFF and against importance sampling with 95 % t-intervals), ``claims.md`` (the
paper's three claims with paired 95 % intervals) and ``cv_choices.md`` (which variant CV picked).

Paired intervals: every learner of a cell sees the same split and the Coulomb particles start
from the fixed-RFF draw, so differences are taken seed by seed and the interval is
mean +- t_{0.975, k-1} * sd / sqrt(k) over the k seeds present for both learners.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np

LABELS = {
    "rff_median": "fixed RFF, median bandwidth (no CV)",
    "rff": "fixed RFF (CV bandwidth)",
    "importance": "importance sampling (CV bandwidth, rho)",
    "coulomb_cv": "**Coulomb, CV-chosen variant**",
}


def load(out: Path) -> tuple[dict, list[dict]]:
    """The configuration last run into ``out`` and the records of its cells on disk
    (:func:`meanfield.studies.synthetic_variants.load_records`)."""
    from meanfield.studies.synthetic_variants import load_records

    return load_records(out)


def paired_ci(a, b=None):
    """Mean of a - b (seed by seed) with its 95 % t-interval and the number of pairs
    (:func:`meanfield.stats.t_interval`, the package's one t-interval)."""
    from meanfield.stats import t_interval

    a = np.asarray(a, dtype=float)
    d = a if b is None else a - np.asarray(b, dtype=float)
    d = d[np.isfinite(d)]
    return (*t_interval(d, 0.95), len(d))


def _fmt_ci(mean, lo, hi, k=None):
    s = f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]"
    return s + ("" if k is None else f" (k={k})")


def errors(records, metric="ridge_test_error"):
    """{(learner, task, m): {seed: value}}."""
    out: dict = {}
    for r in records:
        for name, res in r["learners"].items():
            out.setdefault((name, r["task"], r["m"]), {})[r["seed"]] = res[metric]
    return out


def _pair(E, a, b, task, m, m2=None):
    """Seed-aligned arrays of E[a, task, m] and E[b, task, m2 or m]."""
    xa, xb = E.get((a, task, m), {}), E.get((b, task, m2 or m), {})
    seeds = sorted(set(xa) & set(xb))
    return np.array([xa[s] for s in seeds]), np.array([xb[s] for s in seeds])


def write_csv(records, out: Path):
    rows = []
    for r in records:
        for name, res in r["learners"].items():
            row = {"learner": name, "task": r["task"], "m": r["m"], "seed": r["seed"]}
            for k in (
                "ridge_test_error",
                "alignment_train",
                "alignment_test",
                "fit_time",
                "cv_score",
                "bandwidth_factor",
                "best_step",
                "variant",
            ):
                row[k] = res.get(k, "")
            rows.append(row)
    if rows:
        with open(out / "table.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


def write_table(records, cfg, out: Path):
    E = errors(records)
    learners = ["rff_median", "rff", "importance"]
    learners += [f"coulomb_{v}" for v in cfg["variants"]] + ["coulomb_cv"]
    tasks = cfg["tasks"]
    lines = [
        f"Test error (ridge, α by LOO) at noise {cfg['noise']}, n_train = {cfg['n_train']}, "
        f"n_test = {cfg['n_test']}; mean ± standard error over the seeds present (k). "
        "Paired differences are learner − reference (negative: the learner is better), "
        "with 95 % t-intervals.",
        "",
    ]
    for m in cfg["m"]:
        ks = {t: len(E.get(("rff", t, m), {})) for t in tasks}
        lines += [
            f"### m = {m}",
            "",
            "Seeds per task: " + ", ".join(f"{t} {k}" for t, k in ks.items()),
            "",
        ]
        lines += ["| learner | " + " | ".join(tasks) + " |", "|---" * (len(tasks) + 1) + "|"]
        for ln in learners:
            cells = []
            for t in tasks:
                v = np.array(list(E.get((ln, t, m), {}).values()))
                if len(v) == 0:
                    cells.append("—")
                    continue
                se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")
                cells.append(f"{v.mean():.3f} ± {se:.3f}")
            lines.append(f"| {LABELS.get(ln, ln)} | " + " | ".join(cells) + " |")
        for ref in ("rff", "importance"):
            lines += [
                "",
                f"Paired difference against {LABELS[ref]} at m = {m}:",
                "",
                "| learner | " + " | ".join(tasks) + " |",
                "|---" * (len(tasks) + 1) + "|",
            ]
            for ln in learners:
                if ln == ref:
                    continue
                cells = []
                for t in tasks:
                    a, b = _pair(E, ln, ref, t, m)
                    if len(a) < 2:
                        cells.append("—")
                        continue
                    mean, lo, hi, _ = paired_ci(a, b)
                    star = " *" if (hi < 0 or lo > 0) else ""
                    cells.append(f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]{star}")
                lines.append(f"| {LABELS.get(ln, ln)} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("`*`: the 95 % interval excludes 0.")
    (out / "table.md").write_text("\n".join(lines) + "\n")


def write_cv_choices(records, cfg, out: Path):
    lines = [
        "| task | m | Coulomb variants chosen by 3-fold CV (count over seeds) | RFF bandwidth "
        "factor (× median) | IS bandwidth factor, ρ fraction |",
        "|---|---|---|---|---|",
    ]
    for m in cfg["m"]:
        for t in cfg["tasks"]:
            cell = [r for r in records if r["task"] == t and r["m"] == m]
            if not cell:
                continue
            c = Counter(r["learners"]["coulomb_cv"]["variant"] for r in cell)
            bw = Counter(round(r["learners"]["rff"]["bandwidth_factor"], 3) for r in cell)
            imp = Counter(
                (
                    round(r["learners"]["importance"]["bandwidth_factor"], 3),
                    r["learners"]["importance"]["params"]["rho_fraction"],
                )
                for r in cell
            )
            lines.append(
                f"| {t} | {m} | "
                + ", ".join(f"{k} {v}" for k, v in c.most_common())
                + " | "
                + ", ".join(f"{k}: {v}" for k, v in sorted(bw.items()))
                + " | "
                + ", ".join(f"{a}, {b}: {v}" for (a, b), v in sorted(imp.items()))
                + " |"
            )
    (out / "cv_choices.md").write_text("\n".join(lines) + "\n")


def write_claims(records, cfg, out: Path):
    E = errors(records)
    A = {k: {s: 1 - v for s, v in d.items()} for k, d in errors(records).items()}
    tasks, ms = cfg["tasks"], sorted(cfg["m"])
    lo_m, hi_m = ms[0], ms[-1]
    lines = [
        "# The paper's claims, rechecked with CV-tuned learners (issue 10)",
        "",
        f"Noise {cfg['noise']} (moderate), m ∈ {ms}; paired over seeds, 95 % t-intervals "
        "[lo, hi], k = number of seeds. 'Coulomb' is the variant chosen by 3-fold CV on the "
        "training data in each cell; RFF and importance sampling are CV-tuned too.",
        "",
        "## Claim 1: learned particles beat fixed features and importance sampling",
        "",
        "Error of the reference minus error of Coulomb (positive: Coulomb better).",
        "",
        "| task | m | RFF − Coulomb | IS − Coulomb | verdict |",
        "|---|---|---|---|---|",
    ]
    for t in tasks:
        for m in ms:
            r1 = paired_ci(*_pair(E, "rff", "coulomb_cv", t, m))
            r2 = paired_ci(*_pair(E, "importance", "coulomb_cv", t, m))
            if r1[3] < 2:
                continue
            if r1[1] > 0 and r2[1] > 0:
                verdict = "holds"
            elif r1[2] < 0 or r2[2] < 0:
                verdict = (
                    "fails (Coulomb significantly worse than "
                    + ("RFF" if r1[2] < 0 else "IS")
                    + ")"
                )
            else:
                verdict = "not shown (interval contains 0)"
            lines.append(f"| {t} | {m} | {_fmt_ci(*r1[:3])} | {_fmt_ci(*r2[:3])} | {verdict} |")
    lines += [
        "",
        f"## Claim 2: the gap grows with m (gap at m = {hi_m} minus gap at m = {lo_m})",
        "",
        "gap = RFF error − Coulomb error (same seed); positive change: the gap grows.",
        "",
        f"| task | gap at m = {lo_m} | gap at m = {hi_m} | change | verdict |",
        "|---|---|---|---|---|",
    ]
    for t in tasks:
        g = {}
        for m in (lo_m, hi_m):
            a, b = E.get(("rff", t, m), {}), E.get(("coulomb_cv", t, m), {})
            g[m] = {s: a[s] - b[s] for s in set(a) & set(b)}
        seeds = sorted(set(g[lo_m]) & set(g[hi_m]))
        if len(seeds) < 2:
            continue
        lo = paired_ci([g[lo_m][s] for s in seeds])
        hi = paired_ci([g[hi_m][s] for s in seeds])
        ch = paired_ci([g[hi_m][s] - g[lo_m][s] for s in seeds])
        verdict = "holds" if ch[1] > 0 else ("fails (shrinks)" if ch[2] < 0 else "not shown")
        lines.append(
            f"| {t} | {_fmt_ci(*lo[:3])} | {_fmt_ci(*hi[:3])} | {_fmt_ci(*ch)} | {verdict} |"
        )
    lines += [
        "",
        f"## Claim 3: {lo_m} learned features keep ≈ 90 % of the {hi_m}-feature accuracy, "
        "fixed features degrade more",
        "",
        f"ratio = accuracy at m = {lo_m} / accuracy at m = {hi_m}, per seed.",
        "",
        "| task | Coulomb ratio | RFF ratio | IS ratio | Coulomb − RFF ratio | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for t in tasks:
        rat = {}
        for ln in ("coulomb_cv", "rff", "importance"):
            a, b = A.get((ln, t, lo_m), {}), A.get((ln, t, hi_m), {})
            rat[ln] = {s: a[s] / b[s] for s in set(a) & set(b)}
        seeds = sorted(set(rat["coulomb_cv"]) & set(rat["rff"]))
        if len(seeds) < 2:
            continue
        rc = paired_ci([rat["coulomb_cv"][s] for s in seeds])
        rr = paired_ci([rat["rff"][s] for s in seeds])
        ri = paired_ci([rat["importance"][s] for s in seeds if s in rat["importance"]])
        d = paired_ci([rat["coulomb_cv"][s] - rat["rff"][s] for s in seeds])
        keeps = rc[1] >= 0.9
        degrade = d[1] > 0
        verdict = (
            "holds"
            if keeps and degrade
            else f"first half {'holds' if keeps else 'not shown'}, fixed features "
            + ("degrade more" if degrade else "do not degrade significantly more")
        )
        lines.append(
            f"| {t} | {rc[0]:.3f} [{rc[1]:.3f}, {rc[2]:.3f}] | {rr[0]:.3f} [{rr[1]:.3f}, "
            f"{rr[2]:.3f}] | {ri[0]:.3f} [{ri[1]:.3f}, {ri[2]:.3f}] | {_fmt_ci(*d)} | {verdict} |"
        )
    (out / "claims.md").write_text("\n".join(lines) + "\n")


def report(out, cfg=None):
    """Every report of the variant study folder ``out``, from the cells of the configuration
    last run there (``cfg``, if given, must be that configuration)."""
    from meanfield.studies.synthetic_variants import check_config, config_differences

    out = Path(out)
    recorded, records = load(out)
    if cfg is not None and (diff := config_differences(recorded, check_config(cfg))):
        raise ValueError(f"{out} holds another configuration: {'; '.join(diff[:5])}")
    cfg = recorded
    if not records:
        print("no runs yet")
        return
    write_csv(records, out)
    write_table(records, cfg, out)
    write_cv_choices(records, cfg, out)
    write_claims(records, cfg, out)
    print(f"report: {len(records)} cells -> {out}/table.md, claims.md, cv_choices.md")
