"""Where the study scripts of ``paper_repro/`` read and write: the committed results of the
repository are written only when the user asks for it (``--in-place``).

Every study script has a *study folder* (its runs and, beside them, its reports):

* ``--out FOLDER`` names it.  Without ``--out``, the study folder is the scratch folder
  ``runs/paper_repro/<study>/<name>`` of the checkout (``runs/`` is ignored by git), or, with
  ``--in-place``, the committed ``paper_repro/<study>/results/<name>`` (the maintainers'
  command for extending or refreshing the recorded study).  ``--report-only`` without ``--out``
  reads the committed folder where the repository holds one (else the scratch folder).
* Computing into a committed folder needs ``--in-place``: an ``--out`` inside
  ``paper_repro/<study>/results/`` is refused without it, before any work.
* ``--report-only`` reads the run files and writes only reports, never the recorded data (run
  files, ``config.json``, run records with wall times).  Its reports go beside the runs, except
  for committed runs without ``--in-place``: the record of the study (``config.json`` and every
  ``runs/`` folder) is then copied into the *report folder* (``--report-dir``, default
  ``runs/paper_repro/<study>/<name>_report``) and the reports are written there, so the
  committed files are only read.

Paths are found from this file's location, not from the working directory: the scripts run
from anywhere.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

#: The checkout holding ``paper_repro/``.
REPO = Path(__file__).resolve().parent.parent
#: Scratch root of the scripts' default outputs (``runs/`` is ignored by git).
SCRATCH = REPO / "runs" / "paper_repro"
#: The file that marks a report folder made by :func:`stage_report`.
MARKER = "report_of.json"


def add_flags(ap: argparse.ArgumentParser, committed: str) -> None:
    """Add ``--in-place`` and ``--report-dir`` to a study script's parser.

    ``committed`` names the committed folder in the help text (``results/round3_<config>``).
    """
    ap.add_argument(
        "--in-place",
        action="store_true",
        help=f"write into the committed {committed} (without --out; the maintainers' command): "
        "without it, runs go to runs/paper_repro/ (ignored by git) and --report-only on "
        "committed runs writes its reports to --report-dir",
    )
    ap.add_argument(
        "--report-dir",
        type=Path,
        default=None,
        metavar="FOLDER",
        help="with --report-only on committed runs: the folder of the reports [default: "
        "runs/paper_repro/<study>/<name>_report]",
    )


def is_committed(folder, results) -> bool:
    """Whether ``folder`` is inside ``results`` (a study's committed ``results/`` folder)."""
    return Path(folder).resolve().is_relative_to(Path(results).resolve())


def study_folder(ap, args, *, results: Path, name: str) -> Path:
    """The study folder of ``args`` (``out``, ``in_place``, ``report_only``, ``report_dir``),
    checked before any work (``ap.error``: one line, exit 2).

    ``results`` is the study's committed ``results/`` folder and ``name`` the configuration's
    folder name in it (``round3_full``).
    """
    if args.report_dir is not None:
        if not args.report_only:
            ap.error("argument --report-dir: only with --report-only")
        if args.in_place:
            ap.error("argument --report-dir: not allowed with --in-place (reports beside the runs)")
    committed = results / name
    if args.out is not None:
        out = Path(args.out).expanduser()
        if not (args.report_only or args.in_place) and is_committed(out, results):
            ap.error(
                f"argument --out: {str(out)!r} is in the committed results "
                f"({results.relative_to(REPO)}); add --in-place to write there, or choose "
                "another folder"
            )
        return out
    if args.in_place or (args.report_only and committed.is_dir()):
        return committed
    return SCRATCH / results.parent.name / name


def report_folder(
    ap, args, out: Path, *, results: Path, name: str, default: str | None = None, staged=True
) -> Path:
    """Where the reports of ``args`` go: beside the runs in ``out``, except with
    ``--report-only`` on committed runs without ``--in-place``: then ``--report-dir``, by
    default ``runs/paper_repro/<study>/<default>`` (``<name>_report``).  ``staged``: the
    record will be copied there by :func:`stage_report` (so the folder must be new, empty or
    an earlier report folder)."""
    if not args.report_only or args.in_place or not is_committed(out, results):
        return out
    dest = args.report_dir or SCRATCH / results.parent.name / (default or f"{name}_report")
    dest = Path(dest).expanduser()
    if dest.exists() and not dest.is_dir():
        ap.error(f"argument --report-dir: {str(dest)!r} is a file, not a folder")
    if dest.resolve() == out.resolve() or is_committed(dest, results):
        ap.error(
            f"argument --report-dir: {str(dest)!r} is in the committed results; choose "
            "another folder, or --in-place to rewrite the committed reports"
        )
    if staged and dest.is_dir() and any(dest.iterdir()) and not (dest / MARKER).is_file():
        ap.error(
            f"argument --report-dir: {str(dest)!r} is neither empty nor a report folder "
            f"(no {MARKER}); choose another folder"
        )
    return dest


def stage_report(src: Path, dest: Path) -> Path:
    """Copy the record of the study in ``src`` -- its ``config.json`` and every ``runs/``
    folder, at any depth (``<data set>/baseline/runs/`` too) -- into ``dest`` (a new or
    earlier report folder) and return ``dest``: the report functions, which write beside
    what they read, then write there.  ``src`` is only read.  An earlier copy in ``dest`` is
    replaced, and ``dest/report_of.json`` names the source."""
    src = Path(src)
    dest.mkdir(parents=True, exist_ok=True)
    marker = dest / MARKER
    if marker.is_file():  # an earlier report folder: drop its copy of the record
        for rel in json.loads(marker.read_text()).get("copied", []):
            p = dest / rel
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    copied = []
    if (src / "config.json").is_file():
        shutil.copy2(src / "config.json", dest / "config.json")
        copied.append("config.json")
    for runs in sorted(src.rglob("runs")):
        rel = runs.relative_to(src)
        if runs.is_dir() and "runs" not in rel.parts[:-1]:  # the top-most runs/ folders only
            shutil.copytree(runs, dest / rel)
            copied.append(str(rel))
    marker.write_text(json.dumps({"source": str(src.resolve()), "copied": copied}, indent=1))
    return dest
