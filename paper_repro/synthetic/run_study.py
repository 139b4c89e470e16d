"""The synthetic kernel-learning study: learner x task x noise x m x seed, on the sweep runner.

The study of README.md in this directory, on :mod:`meanfield.studies.synthetic_kernels` (one
sweep of :func:`meanfield.workbench.sweeps.run_sweep` over m x task x noise x seed; each cell runs
every learner on the same data split, so the comparisons are paired) with its reports from
:mod:`meanfield.studies.synthetic_kernels_report`. Usage::

    python paper_repro/synthetic/run_study.py --config full      # the study (see README)
    python paper_repro/synthetic/run_study.py --config ci        # seconds, for CI
    python paper_repro/synthetic/run_study.py --config full --n-workers 2
    python paper_repro/synthetic/run_study.py --config full --scheduler tcp://host:8786
    python paper_repro/synthetic/run_study.py --config my.json --out /tmp/mine
    python paper_repro/synthetic/run_study.py --out paper_repro/synthetic/results/full --report-only
    python paper_repro/synthetic/run_study.py --config full --n-workers 2 --in-place  # results/full

``--config`` is a named configuration (``full``, ``ci``) or a JSON file of settings (missing
ones take the full configuration's; unknown keys are refused naming the nearest). Every cell
is keyed by the whole configuration that computes it: a rerun into the same ``--out`` skips
the cells of its configuration (it resumes), computes the others (another ``n_train``,
``coulomb.lam``... never reuses a cell), and the reports show the cells of the configuration
last run there only. A corrupt or partial run file is set aside into ``runs/set_aside/`` and
recomputed. Runs execute on a local cluster of ``--n-workers`` processes (default: one per
core), on threads (``--scheduler threads``) or on a dask cluster (``--scheduler tcp://...``).

Where it writes (``paper_repro/study_folders.py``): ``--out``, by default
``runs/paper_repro/synthetic/<config>`` of the checkout (ignored by git), with ``--in-place``
the committed ``results/<config>`` next to this file. ``--report-only`` reads the committed runs
(or ``--out``) and writes only the reports (never ``wall_time.json``, the record of the
computing call); from committed runs, into ``--report-dir`` (default
``runs/paper_repro/synthetic/<config>_report``) unless ``--in-place``.

Outputs in the study folder: ``runs/*.nc`` (one file
per cell), ``config.json``, ``results.nc`` (dims learner, task, noise, m, seed),
``table.csv`` / ``table.md`` (mean ± standard error over seeds), ``claims.md`` (the paper's
claims checked with paired differences), ``error_vs_m.png``, ``error_vs_noise.png`` and
``wall_time.json``.

Bad input ends with one line ``run_study.py: error: ...`` (exit 2) before any work.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

# benchmarks/bench_learners.py imports the learners and their settings from here
from meanfield.studies.synthetic_kernels import (  # noqa: F401
    CONFIGS,
    COULOMB,
    IMPORTANCE,
    LEARNER_LABELS,
    TASKS,
    make_learner,
)
from meanfield.workbench._scripts import int_range, output_dir

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import study_folders  # noqa: E402

NAMES = ("ci", "full")


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="run_study.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--config",
        default=None,
        metavar="{ci,full} | FILE.json",
        help="a named configuration or a JSON file of settings (default: full)",
    )
    ap.add_argument(
        "--out",
        type=output_dir,
        default=None,
        metavar="FOLDER",
        help="study folder, created if missing [default: runs/paper_repro/synthetic/<config>; "
        "--report-only: the committed results/<config>]",
    )
    ap.add_argument(
        "--scheduler", default="local", help="local (processes, default) | threads | tcp://address"
    )
    ap.add_argument(
        "--n-workers",
        "--workers",
        dest="n_workers",
        type=int_range(1),
        default=None,
        help="processes or threads >= 1 (default: one per core)",
    )
    ap.add_argument("--fresh", action="store_true", help="discard the runs on disk and start over")
    ap.add_argument(
        "--report-only", action="store_true", help="only rebuild the reports from the runs on disk"
    )
    ap.add_argument("--no-figures", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    study_folders.add_flags(ap, "results/<config>")
    return ap, ap.parse_args(argv)  # bad flags end here (exit 2), before any work


def _configuration(ap, args):
    """The checked configuration and its name (the --config name or file stem)."""
    from meanfield.errors import MeanfieldError
    from meanfield.studies import synthetic_kernels as study

    if args.config is None or args.config in NAMES:
        name = args.config or "full"
        return study.check_config(CONFIGS[name]), name
    path = Path(args.config).expanduser()
    if not path.is_file():
        ap.error(
            f"argument --config: {args.config!r} is neither {' nor '.join(NAMES)} nor a JSON file"
        )
    try:
        return study.check_config(json.loads(path.read_text())), path.stem
    except (ValueError, MeanfieldError) as err:  # JSONDecodeError is a ValueError
        ap.error(f"argument --config: {path}: {err}")


def main(argv=None) -> int:
    ap, args = parse(argv)
    cfg, name = _configuration(ap, args)
    out = study_folders.study_folder(ap, args, results=HERE / "results", name=name)
    if args.report_only:
        if args.fresh:
            ap.error("argument --fresh: not allowed with --report-only (it would discard the runs)")
        if not (out / "config.json").is_file():
            ap.error(f"argument --out: --report-only: no config.json in {str(out)!r}")
        if args.config is not None:
            from meanfield.studies.synthetic_kernels import config_differences

            try:
                recorded = json.loads((out / "config.json").read_text())["config"]
            except (ValueError, KeyError, TypeError):
                ap.error(f"argument --out: {out / 'config.json'} is not a study record")
            if diff := config_differences(recorded, cfg):
                ap.error(
                    f"argument --config: differs from the configuration last run into "
                    f"{str(out)!r} ({'; '.join(diff[:5])}{'; ...' if len(diff) > 5 else ''}); "
                    "run without --report-only to compute it"
                )
        dest = study_folders.report_folder(ap, args, out, results=HERE / "results", name=name)
        if dest != out:
            print(f"note: committed runs, read only; the reports go to {dest}", file=sys.stderr)
            out = study_folders.stage_report(out, dest)
    else:
        from meanfield.errors import MeanfieldError
        from meanfield.workbench.sweeps import check_scheduler

        try:
            check_scheduler(args.scheduler)
        except MeanfieldError as err:
            ap.error(f"argument --scheduler: {err}")
    from meanfield.studies.synthetic_kernels import run_study
    from meanfield.studies.synthetic_kernels_report import report

    t0 = time.perf_counter()
    if not args.report_only:
        if args.fresh:
            for part in ("runs", "configurations.json", "sweep.nc", "config.json"):
                p = out / part
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        res = run_study(
            cfg,
            out,
            scheduler=args.scheduler,
            n_workers=args.n_workers,
            progress=not args.quiet,
            log=lambda line: print(f"note: {line}", file=sys.stderr),
            name=name,
        )
        (out / "wall_time.json").write_text(
            json.dumps(
                {
                    "config": name,
                    "cells_run_now": res["runs_done"],
                    "wall_s": res["wall_s"],
                    "scheduler": args.scheduler,
                    "n_workers": args.n_workers,
                }
            )
        )
        if not args.quiet:
            print(
                f"{res['runs_done']} cell(s) computed in {res['wall_s']:.1f} s "
                f"({res['runs_total'] - res['runs_done']} of {res['runs_total']} already there)",
                flush=True,
            )
    ds = report(out, figures=not args.no_figures)
    if not args.quiet:
        missing = ds.attrs.get("cells_missing", 0)
        print(
            f"done in {time.perf_counter() - t0:.1f} s; results in {out}"
            + (f" ({missing} cell(s) of the grid not on disk)" if missing else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
