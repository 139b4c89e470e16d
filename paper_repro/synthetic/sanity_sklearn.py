"""The scikit-learn sanity baseline of the tuned preset without selection: RBFSampler +
RidgeClassifierCV at the *median* bandwidth, against our RFF at the same bandwidth.

    python paper_repro/synthetic/sanity_sklearn.py      # after the tuned preset (~10 min, 1 core)
    python paper_repro/synthetic/sanity_sklearn.py --in-place   # into results/tuned_learners

In the cells of the tuned preset (``configs/tuned_learners.toml``, design ``tuned``) the
scikit-learn pipeline is fitted at the bandwidth that CV chose for *our* RFF draw; that choice
is tuned to that draw (where a draw happens to do well), so another draw at the same bandwidth
is worse on average -- a selection effect, not a difference of implementation. Here both are
fitted at the median bandwidth, which no draw chose: the same Gaussian kernel, the same m, the
same ridge penalties (n · 10^[−12..1], leave-one-out), another random draw (scikit-learn's).
Every cell of the tuned study folder is refitted (same split, same learner seed) and compared
with its recorded ``rff_median``; the differences form one family (Holm-adjusted p, Bonferroni
intervals). Writes ``sanity_sklearn.md`` and ``sanity_sklearn.json`` (the refitted errors, this
call's wall time and machine).

The folders follow the rules of ``meanfield run --report-only`` on the tuned preset
(:func:`meanfield.workbench.study_files.study_folders`): the study folder is ``--out``, else the
committed ``results/tuned_learners`` (else the scratch ``runs/synthetic/tuned_learners``); the
results go beside the runs, except for the committed runs: there only with ``--in-place`` (the
maintainers' command), else into ``--report-dir`` (default ``runs/synthetic/tuned_learners_report``
under the current directory, ignored by git). The run files are only read. The flags are
generated from :data:`FLAGS` (:class:`meanfield.contract.Contract`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from meanfield.contract import Contract, Param
from meanfield.errors import InputError
from meanfield.workbench.study_files import MARKER, read_study_file, study_folders

HERE = Path(__file__).resolve().parent
#: The preset whose runs are refitted: its committed folder and report folder are found from it.
PRESET = HERE / "configs" / "tuned_learners.toml"

#: The flags of the script, declared once (help, check and refusal from each Param).
FLAGS = Contract(
    "paper_repro/synthetic/sanity_sklearn.py",
    [
        Param(
            "out", "string", "the study folder of the tuned preset (None: the committed "
            "results/tuned_learners)", optional=True, default=None,
        ),
        Param(
            "in_place", "flag", "write beside the committed runs (results/tuned_learners; the "
            "maintainers' command)", default=False,
        ),
        Param(
            "report_dir", "string", "where the results go for committed runs without "
            "--in-place (None: runs/synthetic/tuned_learners_report)", optional=True,
            default=None,
        ),
    ],
)  # fmt: skip


def parse(argv=None) -> tuple[argparse.Namespace, Path, Path]:
    """The flags, the study folder (read) and the folder the results go to, checked before
    any work (a refusal: one line naming the flag, exit status 2)."""
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    FLAGS.add_arguments(ap, metavars={"out": "FOLDER", "report_dir": "FOLDER"})
    a = FLAGS.parse_args(ap, argv)
    try:
        out, dest = study_folders(
            read_study_file(PRESET),
            out=a.out,
            in_place=a.in_place,
            report_only=True,  # reads the runs, writes only its own files: a report's rules
            report_dir=a.report_dir,
        )
    except InputError as err:
        flag, _, why = str(err).partition(": ")
        ap.error(f"argument {flag}: {why}" if flag.startswith("--") else str(err))
    if not (out / "config.json").is_file():
        ap.error(f"argument --out: no config.json in {str(out)!r}")
    return a, out, dest


def refit(rec: dict, cfg: dict) -> float:
    """Test error of RBFSampler + RidgeClassifierCV at the cell's median bandwidth."""
    import numpy as np
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import RidgeClassifierCV
    from sklearn.pipeline import Pipeline

    from meanfield.learners.diagnostics import ridge_alphas
    from meanfield.learners.tasks import make_task
    from meanfield.studies.synthetic_report import TASKS

    sp = make_task(
        rec["task"],
        cfg["n_train"],
        cfg["n_test"],
        noise=rec["noise"],
        seed=rec["seed"],
        **TASKS[rec["task"]],
    )
    med = rec["median_bandwidth"]
    pipe = Pipeline(
        [
            (
                "features",
                RBFSampler(
                    gamma=0.5 / med**2, n_components=rec["m"], random_state=10_000 + rec["seed"]
                ),
            ),
            ("ridge", RidgeClassifierCV(alphas=ridge_alphas(cfg["n_train"]))),
        ]
    ).fit(sp.X_train, sp.y_train)
    return float(np.mean(pipe.predict(sp.X_test) != sp.y_test))


def main(argv=None) -> int:
    """Refit every cell of the tuned study at the median bandwidth; write and print the table."""
    _, out, dest = parse(argv)
    import numpy as np
    from threadpoolctl import threadpool_limits

    from meanfield.stats import paired_family
    from meanfield.studies.synthetic_report import load_study
    from meanfield.workbench.study_settings import machine

    threadpool_limits(1)
    cfg, records = load_study(out)
    t0 = time.perf_counter()
    rows = []
    for r in records:
        rows.append(
            {k: r[k] for k in ("task", "m", "noise", "seed")}
            | {"ours": r["learners"]["rff_median"]["ridge_test_error"], "sklearn": refit(r, cfg)}
        )
    cells = sorted(
        {(x["task"], x["m"], x["noise"]) for x in rows}, key=lambda c: (c[2], c[1], c[0])
    )
    fam = {}
    for c in cells:
        sel = [x for x in rows if (x["task"], x["m"], x["noise"]) == c]
        fam[c] = (np.array([x["sklearn"] for x in sel]), np.array([x["ours"] for x in sel]))
    res = paired_family(fam)
    lines = [
        "scikit-learn RBFSampler + RidgeClassifierCV minus our RFF + ridge (LOO), both at the "
        "median bandwidth (no selection), paired by seed (same split; another draw). One family "
        f"of K = {res[0]['K']} tests: Holm-adjusted p, Bonferroni intervals at family-wise 95 %.",
        "",
        "| task | m | noise | seeds | sklearn | ours | sklearn − ours [95 % CI] | Bonferroni CI | "
        "Holm p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row, c in zip(res, cells, strict=True):
        a, b = fam[c]
        lines.append(
            f"| {c[0]} | {c[1]} | {c[2]} | {row['k']} | {a.mean():.4f} | {b.mean():.4f} | "
            f"{row['mean']:+.4f} [{row['lo']:+.4f}, {row['hi']:+.4f}] | "
            f"[{row['lo_bonf']:+.4f}, {row['hi_bonf']:+.4f}] | {row['p_holm']:.2g} |"
        )
    dest.mkdir(parents=True, exist_ok=True)
    if dest != out and not (dest / MARKER).is_file():  # a report folder: a rerun may reuse it
        (dest / MARKER).write_text(json.dumps({"source": str(out.resolve()), "copied": []}))
    (dest / "sanity_sklearn.md").write_text("\n".join(lines) + "\n")
    (dest / "sanity_sklearn.json").write_text(
        json.dumps(
            {"rows": rows, "wall_s": time.perf_counter() - t0, "machine": machine()}, indent=1
        )
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
