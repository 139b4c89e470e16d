"""Why the first Coulomb configuration loses on the radial and mixture tasks: the diagnosis
over many seeds, with its counterfactuals (issue 22, item 2).

    python paper_repro/synthetic/diagnose.py                        # seeds 0-9 (~15 min, 1 core)
    python paper_repro/synthetic/diagnose.py --seeds 0 1 --out /tmp/d
    python paper_repro/synthetic/diagnose.py --report-only          # the reports from the runs
    python paper_repro/synthetic/diagnose.py --in-place             # into results/diagnosis

For the radial and mixture tasks, and the checkerboard as the control where learning helps,
one split per seed (noise 0.1, n_train = 1000, n_test = 2000), m = 256 particles from the
median-bandwidth RFF draw: the first study's configuration is rerun, and the learned particles
are recombined with the prior draw -- learned norms with prior directions, learned directions
with prior norms, learned frequencies with prior phases, the RFF draw narrowed as much as the
learned kernel -- and the same run with the frame repulsion of the directions; every set is
scored by the same ridge (:mod:`meanfield.studies.synthetic_diagnosis`). The study is one
sweep of :func:`meanfield.workbench.sweeps.run_sweep` over (seed, task): every (task, seed) is
written to ``<out>/runs/<key>.nc`` when it finishes, keyed by the whole configuration: a rerun
resumes, another configuration computes its own runs, a corrupt run file is set aside into
``runs/set_aside/`` and recomputed, ``--fresh`` starts over. Runs go one after the other in
this process by default (``--scheduler threads``), or to a local cluster of ``--n-workers``
processes (``--scheduler local``) or a dask cluster. The reports cover every seed of the
configuration in the folder (those of earlier calls too); ``--report-only`` rebuilds them.

Where it writes (``paper_repro/study_folders.py``): ``--out``, by default
``runs/paper_repro/synthetic/diagnosis`` (``diagnosis_ci`` for ``--config ci``; ``runs/`` is
ignored by git), with ``--in-place`` the committed ``results/diagnosis``. ``--report-only``
reads the committed runs (or ``--out``) and writes only the reports, never ``run.json`` (the
record of the computing call: its wall time is that call's); from committed runs, into
``--report-dir`` (default ``runs/paper_repro/synthetic/diagnosis_report``) unless ``--in-place``.

Writes, in the study folder: ``runs/``, ``summary.md`` (mean ±
SE over seeds of every set, and the paired differences with 95 % t-intervals, Holm-adjusted
p-values and Bonferroni intervals over the family), ``diagnosis.csv`` (one row per task, seed,
set), ``curves.csv`` (the linear run), ``diagnosis.png`` and ``run.json`` (settings, version,
wall time, machine).

Bad input ends with one line ``diagnose.py: error: ...`` (exit 2) before any work.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import study_folders  # noqa: E402

from meanfield.workbench._scripts import existing_dir, int_range, output_dir  # noqa: E402

SHOW = ["radial", "gaussian_mixture", "checkerboard"]
NAMES = ("full", "ci")
LABELS = {
    "rff": "RFF draw (start)",
    "learned": "learned (first configuration)",
    "learned_w_prior_b": "learned frequencies, prior phases",
    "norms_only": "learned norms, prior directions",
    "directions_only": "prior norms, learned directions",
    "narrowed": "RFF narrowed as much as the learned kernel",
    "frame": "learned with the direction repulsion (λ_F = 1)",
}
#: The paired comparisons of the summary (a − b), one family over every task.
COMPARISONS = [
    ("learned", "rff"),
    ("narrowed", "rff"),
    ("norms_only", "rff"),
    ("directions_only", "rff"),
    ("learned_w_prior_b", "learned"),
    ("frame", "rff"),
    ("frame", "learned"),
]


def summary(records) -> str:
    """The summary table and the family of paired differences (Holm over all of it)."""
    from meanfield.studies.synthetic_diagnosis import SETS
    from meanfield.studies.synthetic_search import paired_family

    by = {}
    for r in records:
        by.setdefault(r["task"], {})[r["seed"]] = r
    tasks = [t for t in SHOW if t in by] + [t for t in by if t not in SHOW]
    lines = [
        "Test error (ridge, α by LOO over n · 10^[−12..1]), centred test alignment, direction "
        "isotropy d·λ_max (1 isotropic, d one axis) and median σ|w|: mean ± SE over the seeds "
        "(k). Noise 0.1, m = 256, median bandwidth, n_train = 1000, n_test = 2000.",
        "",
    ]
    for t in tasks:
        seeds = sorted(by[t])
        lines += [f"### {t} (k = {len(seeds)}; seeds {seeds[0]}–{seeds[-1]})", ""]
        lines += ["| set | test error | centred test alignment | isotropy | median σ|w| |"]
        lines += ["|---|---|---|---|---|"]
        for s in SETS:
            cells = []
            for key, fmt in (
                ("test_error", ".4f"),
                ("align_c_test", ".3f"),
                ("isotropy", ".2f"),
                ("median_norm", ".2f"),
            ):
                v = np.array([by[t][k]["sets"][s][key] for k in seeds])
                se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.nan
                cells.append(f"{v.mean():{fmt}} ± {se:{fmt}}")
            lines.append(f"| {LABELS[s]} | " + " | ".join(cells) + " |")
        c = np.array([by[t][k]["narrowing"] for k in seeds])
        lines += [
            "",
            f"Narrowing factor median|w¹|/median|w⁰|: {c.mean():.2f} ± "
            f"{c.std(ddof=1) / np.sqrt(len(c)) if len(c) > 1 else np.nan:.2f}.",
            "",
        ]
    fam = {}
    for t in tasks:
        seeds = sorted(by[t])
        for a, b in COMPARISONS:
            ea = [by[t][k]["sets"][a]["test_error"] for k in seeds]
            eb = [by[t][k]["sets"][b]["test_error"] for k in seeds]
            fam[(t, a, b)] = (np.array(ea), np.array(eb))
    rows = paired_family(fam)
    lines += [
        f"### Paired differences of test error (a − b), one family of {rows[0]['K']} tests "
        "(Holm-adjusted p; Bonferroni intervals at family-wise 95 %)"
        if rows
        else "",
        "",
        "| task | a | b | a − b [95 % CI] | Bonferroni CI | p | Holm p |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t, a, b = r["label"]
        lines.append(
            f"| {t} | {LABELS[a]} | {LABELS[b]} | {r['mean']:+.4f} [{r['lo']:+.4f}, "
            f"{r['hi']:+.4f}] | [{r['lo_bonf']:+.4f}, {r['hi_bonf']:+.4f}] | {r['p']:.2g} | "
            f"{r['p_holm']:.2g} |"
        )
    return "\n".join(lines) + "\n"


def figure(records, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import chi

    from meanfield.studies.synthetic_diagnosis import SETS

    tasks = [t for t in SHOW if any(r["task"] == t for r in records)]
    fig, axes = plt.subplots(len(tasks), 3, figsize=(16, 3.8 * len(tasks)), squeeze=False)
    for i, t in enumerate(tasks):
        recs = sorted((r for r in records if r["task"] == t), key=lambda r: r["seed"])
        d = {"radial": 10, "gaussian_mixture": 5}.get(t, 2)
        ax = axes[i, 0]
        n0 = np.concatenate([r["norms_init"] for r in recs])
        n1 = np.concatenate([r["norms_learned"] for r in recs])
        bins = np.linspace(0, max(n1.max(), n0.max()) * 1.02, 40)
        ax.hist(n0, bins=bins, density=True, histtype="step", label="start (RFF draw)")
        ax.hist(n1, bins=bins, density=True, alpha=0.5, label="learned (first configuration)")
        ax.plot(bins, chi(d).pdf(bins), "k--", lw=1, label=f"prior χ_{d}")
        ax.set(title=f"{t}: σ|w| pooled over {len(recs)} seeds", xlabel="σ |w|")
        ax.legend(fontsize=7)
        ax = axes[i, 1]
        for j, s in enumerate(SETS):
            v = np.array([r["sets"][s]["test_error"] for r in recs])
            ax.errorbar(v.mean(), j, xerr=2 * v.std(ddof=1) / np.sqrt(len(v)), fmt="o")
            ax.plot(v, np.full(len(v), j) + 0.15, ".", color="0.6", ms=3)
        ax.set_yticks(range(len(SETS)), [LABELS[s] for s in SETS], fontsize=7)
        ax.invert_yaxis()
        ax.set(title="test error: mean ± 2 SE (grey: seeds)", xlabel="test error")
        ax = axes[i, 2]
        steps = [c["step"] for c in recs[0]["curve"]]
        err = np.array([[c["test_error"] for c in r["curve"]] for r in recs])
        al = np.array([[c["align_c_test"] for c in r["curve"]] for r in recs])
        ax.plot(steps, err.mean(0), "C1-o", ms=3, label="test error (mean)")
        ax.fill_between(
            steps,
            *(err.mean(0) + s * err.std(0, ddof=1) / np.sqrt(len(err)) for s in (-2, 2)),
            color="C1",
            alpha=0.2,
        )
        ax.set(title="linear run: error and alignment", xlabel="Langevin step", ylabel="error")
        ax2 = ax.twinx()
        ax2.plot(steps, al.mean(0), "C2--", label="centred test alignment (mean)")
        ax2.set_ylabel("centred test alignment")
        ax.legend(fontsize=7, loc="upper left")
        ax2.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "diagnosis.png", dpi=100)
    plt.close(fig)


def write_tables(records, out: Path) -> None:
    rows, curves = [], []
    for r in records:
        for s, v in r["sets"].items():
            rows.append({"task": r["task"], "seed": r["seed"], "set": s, **v})
        for c in r["curve"]:
            curves.append({"task": r["task"], "seed": r["seed"], **c})
    for name, data in (("diagnosis.csv", rows), ("curves.csv", curves)):
        with open(out / name, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(data[0]))
            w.writeheader()
            w.writerows(data)
    (out / "summary.md").write_text(summary(records))


def _check_out(ap, out: Path, report_only: bool) -> None:
    """``--out`` must hold a study of the sweep layout for ``--report-only``, and never an
    unconverted ``runs.jsonl`` of the engine before issue 21."""
    if (out / "runs.jsonl").is_file():
        ap.error(
            f"argument --out: {str(out)!r} holds runs.jsonl of the old engine: convert it first "
            "(python paper_repro/synthetic/convert_results.py FOLDER)"
        )
    if report_only:
        try:
            existing_dir(str(out))
        except argparse.ArgumentTypeError as err:
            ap.error(f"argument --out: --report-only reads the runs there: {err}")
        if not (out / "config.json").is_file():
            ap.error(f"argument --out: --report-only: no config.json in {str(out)!r}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="diagnose.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--config", choices=NAMES, default="full")
    ap.add_argument(
        "--seeds",
        type=int_range(0),
        nargs="+",
        default=None,
        help="seeds (>= 0) [default: 0-9; the ci configuration: 0 1]",
    )
    ap.add_argument(
        "--out",
        type=output_dir,
        default=None,
        metavar="FOLDER",
        help="study folder [default: runs/paper_repro/synthetic/diagnosis (diagnosis_ci for ci); "
        "--report-only: the committed results/diagnosis]",
    )
    ap.add_argument("--scheduler", default="threads", help="threads (default) | local | tcp://...")
    ap.add_argument(
        "--n-workers", type=int_range(1), default=1, help="processes or threads (default 1)"
    )
    ap.add_argument("--fresh", action="store_true", help="discard runs on disk and start over")
    ap.add_argument("--report-only", action="store_true", help="tables and figure from the runs")
    study_folders.add_flags(ap, "results/diagnosis")
    a = ap.parse_args(argv)  # bad flags end here (exit 2), before any work
    name = "diagnosis" if a.config == "full" else "diagnosis_ci"
    out = study_folders.study_folder(ap, a, results=HERE / "results", name=name)
    if a.report_only and a.fresh:
        ap.error("argument --fresh: not allowed with --report-only (it would discard the runs)")
    _check_out(ap, out, a.report_only)
    dest = study_folders.report_folder(ap, a, out, results=HERE / "results", name=name)
    from meanfield.errors import MeanfieldError
    from meanfield.studies import synthetic_diagnosis as study
    from meanfield.studies.synthetic_variants import machine, scan_records

    t0 = time.perf_counter()
    if not a.report_only:
        from meanfield.workbench.sweeps import check_scheduler

        try:
            check_scheduler(a.scheduler)
        except MeanfieldError as err:
            ap.error(f"argument --scheduler: {err}")
        if a.fresh:
            for part in ("runs", "configurations.json", "sweep.nc", "config.json"):
                p = out / part
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        cfg = dict(study.CONFIGS[a.config])
        if a.seeds is not None:
            cfg["seeds"] = list(dict.fromkeys(a.seeds))  # in the order given, once each
        res = study.run_study(
            cfg,
            out,
            scheduler=a.scheduler,
            n_workers=a.n_workers,
            log=lambda line: print(f"note: {line}", file=sys.stderr),
            name=a.config,
        )
        print(
            f"{res['runs_done']} run(s) computed in {res['wall_s']:.0f} s "
            f"({res['runs_total'] - res['runs_done']} of {res['runs_total']} already there)",
            flush=True,
        )
    try:
        cfg, records = scan_records(out)
    except MeanfieldError as err:
        ap.error(f"argument --out: {err}")
    records = sorted(records, key=lambda r: (r["task"], r["seed"]))
    if not records:
        print("no runs yet")
        return 0
    if dest != out:
        print(f"note: committed runs, read only; the reports go to {dest}", file=sys.stderr)
        study_folders.stage_report(out, dest)
    write_tables(records, dest)
    figure(records, dest)
    if not a.report_only:  # the record of this computing call; --report-only never rewrites it
        settings = {k: v for k, v in cfg.items() if k != "seeds"}
        (out / "run.json").write_text(
            json.dumps(
                {
                    **settings,
                    "seeds_done": sorted({r["seed"] for r in records}),
                    "wall_s_this_call": time.perf_counter() - t0,
                    "wall_s_runs": sum(r["wall_s"] for r in records),
                    "machine": machine(),
                },
                indent=1,
            )
        )
    print((dest / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
