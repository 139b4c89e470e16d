"""The JSON-lines checkpoint of ``sinha_duchi.py`` (and of the studies before issue 21).

Each finished cell is one JSON object a line of ``<out>/runs.jsonl``, appended and flushed; a
line cut off by an interruption is set aside into ``runs.jsonl.bad`` with a warning and its
cell recomputed. ``run_study.py`` and ``run_variants.py`` run on :mod:`meanfield.workbench.sweeps`
instead (one netCDF file per cell, keyed by the whole configuration); ``convert_results.py``
reads their old ``runs.jsonl`` folders with :func:`read_runs`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


class StudyInputError(ValueError):
    """The output folder holds something the study refuses (e.g. runs of another
    configuration): the command line ends with one line and exit status 2."""


def _warn(message: str) -> None:
    print(f"{Path(sys.argv[0]).name or 'run_study.py'}: warning: {message}", file=sys.stderr)


def read_runs(runs: Path, repair: bool = False) -> list[dict]:
    """The records of the checkpoint file ``runs`` (one JSON object a line; [] if absent).

    A line that is not a JSON object -- the last one cut off mid-write by an interruption, or
    a damaged one -- is reported on stderr and left out, never silently.  With ``repair``
    such lines are moved to ``runs.jsonl.bad`` (appended, with their line numbers) and
    ``runs`` is rewritten with the good lines only, each ending in a newline, so that the
    next appended record starts on a line of its own; the lost runs are then recomputed by
    the caller (their keys are missing).
    """
    if not runs.exists():
        return []
    text = runs.read_text(encoding="utf-8", errors="replace")
    good, bad = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            rec = None
        if isinstance(rec, dict):
            good.append((line, rec))
        else:
            bad.append((number, line))
    for number, line in bad:
        cut = number == len(text.splitlines()) and not text.endswith("\n")
        why = "cut off (an interrupted write?)" if cut else "not a JSON record"
        shown = line if len(line) <= 60 else line[:57] + "..."
        _warn(
            f"{runs} line {number} is {why}: {shown!r}; "
            + (f"set aside in {runs.name}.bad, its run will be recomputed" if repair else "skipped")
        )
    if repair and (bad or (text and not text.endswith("\n"))):
        if bad:
            with open(runs.with_name(runs.name + ".bad"), "a", encoding="utf-8") as fh:
                for number, line in bad:
                    fh.write(f"{number}\t{line}\n")
        tmp = runs.with_name(runs.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line, _ in good), encoding="utf-8")
        os.replace(tmp, runs)
    return [rec for _, rec in good]


def open_runs(out: Path, cfg: dict, fresh: bool, key) -> tuple[Path, dict]:
    """The checkpoint file ``out/runs.jsonl`` and its records keyed by ``key(record)``.

    ``fresh`` deletes it first; runs of another configuration (``out/config.json``) are refused
    rather than mixed. Writes the configuration. Unreadable lines (a last line cut off by an
    interruption) are set aside with a warning (:func:`read_runs`), so their runs are redone.
    """
    out.mkdir(parents=True, exist_ok=True)
    runs, cfg_file = out / "runs.jsonl", out / "config.json"
    if fresh:
        runs.unlink(missing_ok=True)
    plain = json.loads(json.dumps(cfg))  # tuples -> lists, as read back from disk
    if runs.exists() and cfg_file.exists():
        try:
            stored = json.loads(cfg_file.read_text())
        except json.JSONDecodeError:
            stored = None  # cut off by an interruption: rewritten below
            _warn(f"{cfg_file} is unreadable (an interrupted write?); it is written anew")
        if stored is not None and stored != plain:
            raise StudyInputError(
                f"{runs} holds runs of another configuration; pass --fresh to start over "
                "or choose another --out"
            )
    cfg_file.write_text(json.dumps(cfg, indent=1))
    done = {}
    for rec in read_runs(runs, repair=True):
        try:
            done[key(rec)] = rec
        except (KeyError, TypeError, ValueError):
            _warn(f"{runs}: a record without its keys is skipped: {str(rec)[:60]!r}")
    return runs, done
