"""Issue 22: round three of the synthetic study -- widened CV grids for every learner, the
tempered Coulomb variant with direction repulsion, label noise 0, 0.1 and 0.2.

    python paper_repro/synthetic/run_round3.py --config full --n-workers 2   # the study (README)
    python paper_repro/synthetic/run_round3.py --config ci                   # seconds
    python paper_repro/synthetic/run_round3.py --config full --report-only
    python paper_repro/synthetic/run_round3.py --config full --n-workers 2 --in-place  # results/

Where it writes (``paper_repro/study_folders.py``): ``--out``, by default
``runs/paper_repro/synthetic/round3_<config>`` (ignored by git), with ``--in-place`` the
committed ``results/round3_<config>``. ``--report-only`` reads the committed runs (or ``--out``)
and writes only the reports; from committed runs, into ``--report-dir`` (default
``runs/paper_repro/synthetic/round3_<config>_report``) unless ``--in-place``.

The study of :mod:`meanfield.studies.synthetic_round3` (the design is in its docstring): one
sweep of :func:`meanfield.workbench.sweeps.run_sweep` over (seed, (m, noise) setting, task),
every learner of a cell on the same split, tuned by cross-validation on the training rows.
Every cell is written to ``<out>/runs/<key>.nc`` when it finishes, keyed by the whole
configuration: a rerun resumes, another configuration computes its own cells, a corrupt run
file is set aside and recomputed, ``--fresh`` starts over. Reports
(:mod:`meanfield.studies.synthetic_round3_report`): ``table.md``, ``cv_choices.md``,
``claims.md``, ``moved.md``, ``beta_curve.md``, ``table.csv``, ``error_vs_noise.png``.

Bad input ends with one line ``run_round3.py: error: ...`` (exit 2) before any work.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import study_folders  # noqa: E402

from meanfield.workbench._scripts import existing_dir, int_range, output_dir  # noqa: E402

NAMES = ("full", "ci")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="run_round3.py", description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=NAMES, default="full")
    ap.add_argument(
        "--out",
        type=output_dir,
        default=None,
        metavar="FOLDER",
        help="study folder, created if missing [default: runs/paper_repro/synthetic/"
        "round3_<config>; --report-only: the committed results/round3_<config>]",
    )
    ap.add_argument("--scheduler", default="local", help="local (default) | threads | tcp://...")
    ap.add_argument(
        "--n-workers", type=int_range(1), default=1, help="processes or threads (default 1)"
    )
    ap.add_argument("--fresh", action="store_true", help="discard runs on disk and start over")
    ap.add_argument("--report-only", action="store_true", help="reports from the runs on disk")
    study_folders.add_flags(ap, "results/round3_<config>")
    a = ap.parse_args(argv)  # bad flags end here (exit 2), before any work
    name = f"round3_{a.config}"
    out = study_folders.study_folder(ap, a, results=HERE / "results", name=name)
    if a.report_only:
        if a.fresh:
            ap.error("argument --fresh: not allowed with --report-only (it would discard the runs)")
        try:
            existing_dir(str(out))
        except argparse.ArgumentTypeError as err:
            ap.error(f"argument --out: --report-only reads the runs there: {err}")
        if not (out / "config.json").is_file():
            ap.error(f"argument --out: --report-only: no config.json in {str(out)!r}")
        dest = study_folders.report_folder(ap, a, out, results=HERE / "results", name=name)
        if dest != out:
            print(f"note: committed runs, read only; the reports go to {dest}", file=sys.stderr)
            out = study_folders.stage_report(out, dest)
    else:
        from meanfield.errors import MeanfieldError
        from meanfield.studies.synthetic_round3 import CONFIGS, run_study
        from meanfield.workbench.sweeps import check_scheduler

        try:
            check_scheduler(a.scheduler)
        except MeanfieldError as err:
            ap.error(f"argument --scheduler: {err}")
        if a.fresh:
            for part in ("runs", "configurations.json", "sweep.nc", "config.json"):
                p = out / part
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        res = run_study(
            CONFIGS[a.config],
            out,
            scheduler=a.scheduler,
            n_workers=a.n_workers,
            log=lambda line: print(f"note: {line}", file=sys.stderr),
            name=a.config,
        )
        print(
            f"{res['runs_done']} cell(s) computed in {res['wall_s']:.0f} s "
            f"({res['runs_total'] - res['runs_done']} of {res['runs_total']} already there)",
            flush=True,
        )
    from meanfield.studies.synthetic_round3_report import report

    report(out)


if __name__ == "__main__":
    main()
