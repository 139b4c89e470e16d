"""Issue 10: every Coulomb variant against fixed and importance-sampled features, all CV-tuned.

    python paper_repro/synthetic/run_variants.py --config full     # the study (README)
    python paper_repro/synthetic/run_variants.py --config ci       # seconds, for CI
    python paper_repro/synthetic/run_variants.py --config full --report-only
    python paper_repro/synthetic/run_variants.py --config full --scheduler tcp://host:8786
    python paper_repro/synthetic/run_variants.py --config full --in-place   # results/variants_full

The study of :mod:`meanfield.studies.synthetic_variants` (the design is in its docstring): one
sweep of :func:`meanfield.workbench.sweeps.run_sweep` over (m, seed, task), every learner of a cell
on the same split and tuned by cross-validation on the training rows. Every cell is written to
``<out>/runs/<key>.nc`` when it finishes, keyed by the whole configuration: a rerun resumes, a rerun
with another configuration computes its own cells (the report shows those of the configuration last
run there), a corrupt run file is set aside into ``runs/set_aside/`` and recomputed, ``--fresh``
starts over. Cells run on a local cluster of ``--n-workers`` processes (default 1), on threads
(``--scheduler threads``) or on a dask cluster. The report (``report_variants.py``) writes the
tables and ``claims.md`` with paired 95 % intervals.

Where it writes (``paper_repro/study_folders.py``): ``--out``, by default
``runs/paper_repro/synthetic/variants_<config>`` (ignored by git), with ``--in-place`` the
committed ``results/variants_<config>``. ``--report-only`` reads the committed runs (or
``--out``) and writes only the reports; from committed runs, into ``--report-dir`` (default
``runs/paper_repro/synthetic/variants_<config>_report``) unless ``--in-place``.

Bad input ends with one line ``run_variants.py: error: ...`` (exit 2) before any work.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import study_folders  # noqa: E402

# benchmarks/bench_learners.py imports the variants from here
from meanfield.studies.synthetic_variants import (  # noqa: E402, F401
    BANDWIDTH_FACTORS,
    BASE,
    CONFIGS,
    RHO_FRACTIONS,
    VARIANTS,
    machine,
)
from meanfield.workbench._scripts import existing_dir, int_range, output_dir  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(prog="run_variants.py", description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=list(CONFIGS), default="full")
    ap.add_argument(
        "--out",
        type=output_dir,
        default=None,
        metavar="FOLDER",
        help="study folder, created if missing [default: runs/paper_repro/synthetic/"
        "variants_<config>; --report-only: the committed results/variants_<config>]",
    )
    ap.add_argument("--scheduler", default="local", help="local (default) | threads | tcp://...")
    ap.add_argument(
        "--n-workers", type=int_range(1), default=1, help="processes or threads (default 1)"
    )
    ap.add_argument("--fresh", action="store_true", help="discard runs on disk and start over")
    ap.add_argument(
        "--report-only", action="store_true", help="tables and claims from the runs on disk"
    )
    study_folders.add_flags(ap, "results/variants_<config>")
    a = ap.parse_args(argv)  # bad flags end here (exit 2), before any work
    name = f"variants_{a.config}"
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
        from meanfield.workbench.sweeps import check_scheduler

        try:
            check_scheduler(a.scheduler)
        except MeanfieldError as err:
            ap.error(f"argument --scheduler: {err}")
        from meanfield.studies.synthetic_variants import run_study

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
    from report_variants import report

    report(out)


if __name__ == "__main__":
    main()
