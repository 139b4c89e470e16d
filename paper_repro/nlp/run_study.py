"""The kernel-attention study: does Kernel-X beat vanilla X? Resumable, paired, with controls.

The study of README.md in this directory, on :mod:`meanfield.studies.scratch_nlp` (one sweep
of :func:`meanfield.workbench.sweeps.run_sweep` per data set over seed x Q = K x variant, and one
for the TF-IDF bar; the design is in that module's docstring) with its reports from
:mod:`meanfield.studies.scratch_nlp_report`. Usage::

    python paper_repro/nlp/run_study.py --config paper_repro/nlp/configs/tiny.json \\
        --data-dir tests/fixtures/nlp --out /tmp/nlp_tiny
    python paper_repro/nlp/run_study.py --config paper_repro/nlp/configs/full.json \\
        --data-dir ../shared/data --in-place [--device cuda] \\
        [--datasets rotten_tomatoes] [--scheduler local --n-workers 2 | --scheduler tcp://host:8786]
    python paper_repro/nlp/run_study.py --report-only

Where it writes (``paper_repro/study_folders.py``): ``--out``, by default
``runs/paper_repro/nlp/<config file stem>`` of the checkout (ignored by git), with
``--in-place`` the committed ``results/full`` (the maintainers' command; an ``--out`` inside
``results/`` needs it too). ``--report-only`` reads the committed ``results/full`` (or
``--out``) and writes only the reports (their wall times are the recorded runs'); from
committed runs, into ``--report-dir`` (default ``runs/paper_repro/nlp/full_report``, a copy of
the record with the reports) unless ``--in-place``.

Every run is keyed by the whole configuration that computes it: a rerun into the same
``--out`` skips the runs of its configuration (it resumes), computes the others (another
``lr``, ``d_model``, vocabulary... never reuses a run), and the reports show the runs of the
configuration last run there only. ``--report-only`` rebuilds them (with ``--config``, it
first checks that this is the configuration recorded in ``--out``).

Outputs in ``--out``: ``results.csv``, ``table.md``/``table.csv``, ``paired.md``/
``paired.csv``, ``claims.md``, ``phase_a.md``, ``training.md``, ``figures/*.png``,
``config.json`` (the configuration, versions, machine, and each sweep's digest), and per data
set ``<name>/runs/*.nc`` (one file per run) and ``<name>/baseline/``.

Bad input ends with one line ``run_study: error: ...`` (exit 2) before any work.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import study_folders  # noqa: E402


def parse(argv):
    p = argparse.ArgumentParser(prog="run_study", description=__doc__.split("\n")[0])
    p.add_argument("--config", type=Path, help="JSON configuration (optional with --report-only)")
    p.add_argument(
        "--data-dir",
        default=None,
        help="root of sst2/, rotten_tomatoes/, qqp/ (default $MEANFIELD_DATA_DIR)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="study folder, resumed if it exists [default: runs/paper_repro/nlp/<config stem>; "
        "--report-only: the committed results/full]",
    )
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    p.add_argument("--datasets", nargs="+", default=None, help="only these data sets")
    p.add_argument("--report-only", action="store_true", help="only rebuild the reports")
    p.add_argument("--no-figures", action="store_true", help="skip the figures")
    p.add_argument("--scheduler", default="threads", help="threads | local | tcp://address")
    p.add_argument("--n-workers", type=int, default=1, help="threads or processes")
    p.add_argument("--quiet", action="store_true")
    study_folders.add_flags(p, "results/full")
    return p.parse_args(argv)


class _Refuse:
    """``study_folders``' ``ap.error`` as this script reports bad input: a ValueError, printed
    as one ``run_study: error:`` line by :func:`main`."""

    @staticmethod
    def error(message):
        raise ValueError(message)


def _folders(args) -> None:
    """``args.out`` (the study folder) and ``args.dest`` (where the reports go) resolved and
    checked (``paper_repro/study_folders.py``)."""
    name = args.config.stem if args.config is not None else "full"
    kw = dict(results=HERE / "results", name=name)
    args.out = study_folders.study_folder(_Refuse, args, **kw)
    args.dest = study_folders.report_folder(_Refuse, args, args.out, **kw)


def _checked(args):
    """Every input checked before any work: the configuration (or, with --report-only, the
    recorded one), the data, the device, the scheduler. Returns (cfg, data_dir)."""
    import torch

    from meanfield.attention.data import resolve_data_dir
    from meanfield.errors import ResourceError
    from meanfield.studies import scratch_nlp as study
    from meanfield.studies.scratch_nlp_report import read_study
    from meanfield.workbench.sweeps import check_scheduler

    _folders(args)
    if args.out.exists() and not args.out.is_dir():
        raise FileExistsError(f"--out: {str(args.out)!r} is a file, not a folder")
    if args.n_workers < 1:
        raise ValueError(f"--n-workers must be >= 1, got {args.n_workers}")
    cfg = None
    if args.config is not None:
        if not args.config.is_file():
            raise FileNotFoundError(f"--config: no such file {str(args.config)!r}")
        cfg = study.check_config(json.loads(args.config.read_text()))
    if args.report_only:
        recorded = read_study(args.out)["config"]
        if cfg is not None and (diff := study.config_differences(recorded, cfg)):
            raise ValueError(
                f"--config differs from the configuration last run into {str(args.out)!r} "
                f"({'; '.join(diff[:5])}{'; ...' if len(diff) > 5 else ''}); run without "
                "--report-only to compute it"
            )
        return recorded, None
    if cfg is None:
        raise ValueError("--config is required (unless --report-only)")
    names = [d["name"] for d in cfg["datasets"]]
    if args.datasets and (bad := [d for d in args.datasets if d not in names]):
        raise ValueError(f"--datasets {bad}: not in the configuration {names}")
    try:
        device = torch.device(args.device)
    except RuntimeError as err:
        raise ValueError(f"--device {args.device!r}: {err}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ResourceError(f"--device {args.device}: no CUDA device is available")
    data_dir = resolve_data_dir(args.data_dir)
    check_scheduler(args.scheduler)
    study.check_data(cfg, data_dir, args.datasets)
    return cfg, data_dir


def main(argv=None) -> int:
    args = parse(argv)
    from meanfield.errors import MeanfieldError

    try:
        cfg, data_dir = _checked(args)
    except (MeanfieldError, OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
        print(f"run_study: error: {exc}", file=sys.stderr)
        return 2
    from meanfield.studies.scratch_nlp import run_study
    from meanfield.studies.scratch_nlp_report import write_report

    def log(line):
        if not args.quiet:
            print(line, flush=True)

    if not args.report_only:
        t0 = time.perf_counter()
        res = run_study(
            cfg,
            data_dir=data_dir,
            out_dir=args.out,
            device=args.device,
            datasets=args.datasets,
            scheduler=args.scheduler,
            n_workers=args.n_workers,
            progress=not args.quiet,
            log=log,
            config_file=str(args.config),
        )
        print(
            f"{res['runs_done']} run(s) done in {time.perf_counter() - t0:.1f}s "
            f"({res['runs_total'] - res['runs_done']} of {res['runs_total']} already there)",
            flush=True,
        )
    if args.dest != args.out:
        log(f"committed runs, read only; the reports go to {args.dest}")
        study_folders.stage_report(args.out, args.dest)
    rep = write_report(args.dest, figures=not args.no_figures)
    log(f"report of {rep['n_runs']} run(s) written to {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
