"""Sinha & Duchi's radial experiment under their own protocol, with Coulomb (issue 10; rerun
with the current code, the ridge conventions taken apart and the importance-sampling spread
over candidate draws in issue 22; on the sweep runner in issue 21).

    python paper_repro/synthetic/sinha_duchi.py --seeds 0 1 2     # ~10 min per seed, one core
    python paper_repro/synthetic/sinha_duchi.py --report-only     # table.md from the runs
    python paper_repro/synthetic/sinha_duchi.py --config ci       # seconds
    python paper_repro/synthetic/sinha_duchi.py --seeds 3 --in-place   # into results/sinha_duchi

The study of :mod:`meanfield.studies.synthetic_sinha_duchi` (the protocol and the design are
in its docstring): one sweep of :func:`meanfield.workbench.sweeps.run_sweep` over the seeds.
Every seed is written to ``<out>/runs/<key>.nc`` when it finishes, keyed by the whole
configuration: a rerun resumes, another configuration computes its own seeds, a corrupt run
file is set aside into ``runs/set_aside/`` and recomputed, ``--fresh`` starts over. Seeds run
one after the other in this process by default (``--scheduler threads``, each learner's errors
printed as it is scored), or on a local cluster (``--scheduler local``) or a dask cluster.
``table.md`` puts the published numbers beside ours, over every seed of the configuration in
the folder (those of earlier calls too).

Where it writes (``paper_repro/study_folders.py``): ``--out``, by default
``runs/paper_repro/synthetic/sinha_duchi`` (``sinha_duchi_ci`` for ``--config ci``; ignored by
git), with ``--in-place`` the committed ``results/sinha_duchi``. ``--report-only`` reads the
committed runs (or ``--out``) and writes only ``table.md``; from committed runs, into
``--report-dir`` (default ``runs/paper_repro/synthetic/sinha_duchi_report``) unless
``--in-place``.

Bad input ends with one line ``sinha_duchi.py: error: ...`` (exit 2) before any work.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import study_folders  # noqa: E402

from meanfield.workbench._scripts import existing_dir, int_range, output_dir  # noqa: E402

NAMES = ("full", "ci")


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


def main(argv=None):
    ap = argparse.ArgumentParser(prog="sinha_duchi.py", description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=NAMES, default="full")
    ap.add_argument(
        "--seeds",
        type=int_range(0),
        nargs="+",
        default=None,
        help="seeds (>= 0) [default: 0 1 2; the ci configuration: 0 1]",
    )
    ap.add_argument(
        "--out",
        type=output_dir,
        default=None,
        metavar="FOLDER",
        help="study folder, created if missing [default: runs/paper_repro/synthetic/sinha_duchi "
        "(sinha_duchi_ci for --config ci); --report-only: the committed results/sinha_duchi]",
    )
    ap.add_argument("--scheduler", default="threads", help="threads (default) | local | tcp://...")
    ap.add_argument(
        "--n-workers", type=int_range(1), default=1, help="processes or threads (default 1)"
    )
    ap.add_argument("--fresh", action="store_true", help="discard runs on disk and start over")
    ap.add_argument("--report-only", action="store_true", help="table.md from the runs on disk")
    study_folders.add_flags(ap, "results/sinha_duchi")
    a = ap.parse_args(argv)  # bad flags end here (exit 2), before any work
    name = "sinha_duchi" if a.config == "full" else "sinha_duchi_ci"
    out = study_folders.study_folder(ap, a, results=HERE / "results", name=name)
    if a.report_only and a.fresh:
        ap.error("argument --fresh: not allowed with --report-only (it would discard the runs)")
    _check_out(ap, out, a.report_only)
    dest = study_folders.report_folder(ap, a, out, results=HERE / "results", name=name)
    from meanfield.errors import MeanfieldError
    from meanfield.studies import synthetic_sinha_duchi as study
    from meanfield.studies.synthetic_variants import scan_records

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
        logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stdout)
        logging.getLogger(study.__name__).setLevel(logging.INFO)
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
            f"{res['runs_done']} seed(s) computed in {res['wall_s']:.0f} s "
            f"({res['runs_total'] - res['runs_done']} of {res['runs_total']} already there)",
            flush=True,
        )
    try:
        cfg, records = scan_records(out)
    except MeanfieldError as err:
        ap.error(f"argument --out: {err}")
    if not records:
        print("no runs yet")
        return
    if dest != out:
        print(f"note: committed runs, read only; the report goes to {dest}", file=sys.stderr)
        study_folders.stage_report(out, dest)
    text = study.table(records, cfg)
    (dest / "table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
