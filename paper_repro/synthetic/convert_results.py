"""One-off: convert a study folder of the old engine (``runs.jsonl``) to the sweep layout.

Four studies used it: ``run_study.py`` (one record per learner and cell; converted as below),
``run_variants.py`` (one record per cell holding every learner, with the package version that
computed it; converted the same way into :mod:`meanfield.studies.synthetic_variants`'s layout,
each run file's ``record`` attribute holding the old record), and in the same way
``sinha_duchi.py`` (one record per seed, no ``config.json``: told apart by the ``protocol`` of
its records; :mod:`meanfield.studies.synthetic_sinha_duchi`) and ``diagnose.py`` (one record
per (task, seed); :mod:`meanfield.studies.synthetic_diagnosis`). :func:`read_runs` is the old
engine's reader, kept here for the migration only (the studies run on
:mod:`meanfield.workbench.sweeps`).

Before issue 21, ``run_study.py`` kept its own resume engine: a process pool appending one
JSON record per learner and (task, noise, seed, m) cell to ``<out>/runs.jsonl``, checked
against the ``config.json`` beside it. The study now runs on
:func:`meanfield.workbench.sweeps.run_sweep` (:mod:`meanfield.studies.synthetic_kernels`), where a
cell's key holds the whole configuration. This script moves the recorded cells of such a folder into
that layout (``runs/<key>.nc``, ``configurations.json``, ``config.json``), keyed by the
configuration they were computed with: the ``config.json`` stored beside them and the package
version recorded in ``results.nc`` (or ``--version``). Nothing is recomputed; every number is kept
(each run file's ``records`` attribute holds the old JSON records, checked to read back identical
before ``runs.jsonl`` is removed) and each file records that it was converted (``converted_from``,
``converted_by``). A cell some of whose learners are missing is not converted (its records are kept
in ``runs.jsonl.unconverted``); the run of the study recomputes it.

Usage::

    python paper_repro/synthetic/convert_results.py paper_repro/synthetic/results/full
    python paper_repro/synthetic/run_study.py --out paper_repro/synthetic/results/full --report-only
    python paper_repro/synthetic/convert_results.py paper_repro/synthetic/results/variants_full
    python paper_repro/synthetic/run_variants.py --config full --report-only
    python paper_repro/synthetic/convert_results.py paper_repro/synthetic/results/sinha_duchi
    python paper_repro/synthetic/sinha_duchi.py --report-only
    python paper_repro/synthetic/convert_results.py paper_repro/synthetic/results/diagnosis
    python paper_repro/synthetic/diagnose.py --report-only
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

SCRIPT = "paper_repro/synthetic/convert_results.py"


def read_runs(runs: Path) -> list[dict]:
    """The records of an old checkpoint file ``runs`` (one JSON object a line; [] if absent).

    A line that is not a JSON object (the last one cut off by an interruption, or a damaged
    one) is reported on stderr and left out, never silently; its cell is then missing from
    the converted folder and the study recomputes it.
    """
    if not runs.exists():
        return []
    lines = runs.read_text(encoding="utf-8", errors="replace").splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            rec = None
        if isinstance(rec, dict):
            records.append(rec)
        else:
            shown = line if len(line) <= 60 else line[:57] + "..."
            print(
                f"convert_results.py: warning: {runs} line {number} is not a JSON record: "
                f"{shown!r}; skipped",
                file=sys.stderr,
            )
    return records


def _canonical(recs) -> str:
    return json.dumps(json.loads(json.dumps(recs)), sort_keys=True)


def _recorded_version(folder: Path) -> str | None:
    path = folder / "results.nc"
    if not path.is_file():
        return None
    import xarray as xr

    with xr.open_dataset(path) as ds:
        v = ds.attrs.get("meanfield_version")
    return None if v is None else str(v)


def convert(folder, *, version: str | None = None, note: str = "") -> dict:
    """Convert ``folder`` in place (a study of ``run_study.py``, ``run_variants.py`` or
    ``diagnose.py``, told apart by its ``config.json``, or of ``sinha_duchi.py``, which has
    none); returns the counts (cells, records, incomplete cells, missing cells)."""
    folder = Path(folder)
    cfg_file, runs = folder / "config.json", folder / "runs.jsonl"
    old = json.loads(cfg_file.read_text()) if cfg_file.is_file() else None
    if old is not None and "sweep" in old:
        raise ValueError(f"{folder} is already in the sweep layout")
    if not runs.is_file():
        raise FileNotFoundError(f"no runs.jsonl in {str(folder)!r}")
    if old is None:
        records = read_runs(runs)
        if records and all("protocol" in r for r in records):
            return _convert_sinha_duchi(folder, records, version=version, note=note)
        raise FileNotFoundError(f"no config.json in {str(folder)!r}")
    if "variants" in old:
        return _convert_variants(folder, old, version=version, note=note)
    if "direction_repulsion" in old:
        return _convert_diagnosis(folder, old, version=version, note=note)
    return _convert_study(folder, old, version=version, note=note)


def _record_version(records, version):
    versions = {r.get("meanfield_version") for r in records} - {None}
    if version is None:
        if len(versions) != 1:
            raise ValueError(f"the runs record versions {sorted(versions)}: pass --version")
        (version,) = versions
    return version


def _convert_records(folder: Path, study, cfg: dict, records, key_of, what, version, note):
    """Write each record of ``records`` (one per grid point of ``study``'s sweep of the checked
    configuration ``cfg``, ``key_of(record)`` its grid point as a tuple in grid order) as the
    run file of that point, keyed by ``cfg`` and ``version``; check every file reads back as
    its record, then write the manifest and ``config.json`` and remove ``runs.jsonl``."""
    from meanfield.results import load_dataset, save_dataset
    from meanfield.studies.synthetic_kernels import study_record
    from meanfield.workbench.sweeps import grid_points, run_key

    spec = study.sweep_spec(cfg, version=version)
    points = grid_points(spec["grid"])
    index = {tuple(p.values()): p for p in points}
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    written, seen = [], set()
    for rec in records:
        key = key_of(rec)
        if key not in index:
            raise ValueError(f"a record off the configuration's grid: {key}")
        if key in seen:
            raise ValueError(f"two records of the same grid point: {key}")
        seen.add(key)
        ds = study.record_dataset(rec)
        ds.attrs.update({f"sweep_{k}": v for k, v in index[key].items()})
        ds.attrs.update(
            sweep_config_digest=spec["digest"],
            package_version=version,
            converted_from=f"runs.jsonl (the engine of {what} before issue 21)",
            converted_by=f"{SCRIPT} on {stamp}",
        )
        path = folder / "runs" / f"{run_key(index[key], spec['digest'])}.nc"
        save_dataset(ds, path)
        written.append((path, rec))
    for path, rec in written:  # every number reads back before runs.jsonl goes
        back = json.loads(load_dataset(path).attrs["record"])
        if _canonical(back) != _canonical(rec):
            raise RuntimeError(f"{path} does not read back as its record; nothing removed")
    (folder / "configurations.json").write_text(
        json.dumps({spec["digest"]: spec["configuration"]}, indent=1, sort_keys=True)
    )
    counts = {
        "cells": len(written),
        "records": len(written),
        "incomplete_cells": 0,
        "missing_cells": len(points) - len(written),
    }
    record = study_record(
        cfg, spec, name=folder.name, converted=_converted(version, note, stamp, counts, what)
    )
    record["meanfield_version"] = version
    (folder / "config.json").write_text(json.dumps(record, indent=1, default=float))
    (folder / "runs.jsonl").unlink()
    return counts


def _convert_sinha_duchi(folder: Path, records, *, version=None, note="") -> dict:
    """Sinha & Duchi's protocol: one record per seed, its settings inside (no config.json);
    keyed by the ``full`` configuration over the recorded seeds."""
    from meanfield.studies import synthetic_sinha_duchi as study

    version = _record_version(records, version)
    seeds = sorted({int(r["seed"]) for r in records})
    cfg = study.check_config({**study.CONFIGS["full"], "seeds": seeds})
    for rec in records:
        for k in ("protocol", "cv_rows", "ridges"):
            if _canonical(rec.get(k)) != _canonical(cfg[k]):
                raise ValueError(
                    f"seed {rec['seed']} was computed with another {k} ({rec.get(k)!r}) than "
                    f"the configuration 'full' ({cfg[k]!r}): nothing converted"
                )
    return _convert_records(
        folder, study, cfg, records, lambda r: (int(r["seed"]),), "sinha_duchi.py", version, note
    )


def _convert_diagnosis(folder: Path, old: dict, *, version=None, note="") -> dict:
    """The diagnosis: one record per (task, seed), the settings in config.json."""
    from meanfield.studies import synthetic_diagnosis as study

    records = read_runs(folder / "runs.jsonl")
    version = _record_version(records, version)
    seeds = sorted({int(r["seed"]) for r in records})
    cfg = study.check_config({**old, "seeds": seeds})
    frame = {**cfg["coulomb"], "direction_repulsion_frame": cfg["direction_repulsion"]}
    for rec in records:
        got = {k: rec.get(k) for k in ("m", "noise", "configuration")}
        want = {"m": cfg["m"], "noise": cfg["noise"], "configuration": frame}
        if _canonical(got) != _canonical(want):
            raise ValueError(
                f"the record of {rec.get('task')!r}, seed {rec.get('seed')} does not match "
                f"config.json ({got!r} != {want!r}): nothing converted"
            )
    return _convert_records(
        folder,
        study,
        cfg,
        records,
        lambda r: (int(r["seed"]), r["task"]),
        "diagnose.py",
        version,
        note,
    )


def _converted(version, note, stamp, counts, what) -> dict:
    return {
        "by": SCRIPT,
        "on": stamp,
        "from": f"runs.jsonl and config.json (the engine of {what} before issue 21)",
        "counts": counts,
        "keyed_by": "the config.json stored beside them and meanfield_version "
        f"{version} (the version that computed them)",
        "note": note,
    }


def _convert_variants(folder: Path, old: dict, *, version=None, note="") -> dict:
    """The variant study: one record per (task, seed, m) cell, its package version inside."""
    from meanfield.results import load_dataset, save_dataset
    from meanfield.studies import synthetic_kernels as kernels
    from meanfield.studies import synthetic_variants as study
    from meanfield.workbench.sweeps import grid_points, run_key

    records = read_runs(folder / "runs.jsonl")
    version = _record_version(records, version)
    cfg = study.check_config(old)
    spec = study.sweep_spec(cfg, version=version)
    points = grid_points(spec["grid"])
    index = {(p["task"], p["seed"], p["m"]): p for p in points}
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    written = []
    for rec in records:
        key = (rec["task"], int(rec["seed"]), int(rec["m"]))
        if key not in index:
            raise ValueError(f"a record off the configuration's grid: {key}")
        ds = study.record_dataset(rec)
        ds.attrs.update({f"sweep_{k}": v for k, v in index[key].items()})
        ds.attrs.update(
            sweep_config_digest=spec["digest"],
            package_version=version,
            converted_from="runs.jsonl (the engine of run_variants.py before issue 21)",
            converted_by=f"{SCRIPT} on {stamp}",
        )
        path = folder / "runs" / f"{run_key(index[key], spec['digest'])}.nc"
        save_dataset(ds, path)
        written.append((path, rec))
    for path, rec in written:  # every number reads back before runs.jsonl goes
        back = json.loads(load_dataset(path).attrs["record"])
        if _canonical(back) != _canonical(rec):
            raise RuntimeError(f"{path} does not read back as its record; nothing removed")
    (folder / "configurations.json").write_text(
        json.dumps({spec["digest"]: spec["configuration"]}, indent=1, sort_keys=True)
    )
    counts = {
        "cells": len(written),
        "records": len(written),
        "incomplete_cells": 0,
        "missing_cells": len(points)
        - len({r["task"] + str(r["seed"]) + str(r["m"]) for r in records}),
    }
    record = kernels.study_record(
        cfg,
        spec,
        name=folder.name,
        converted=_converted(version, note, stamp, counts, "run_variants.py"),
    )
    record["meanfield_version"] = version
    (folder / "config.json").write_text(json.dumps(record, indent=1, default=float))
    (folder / "runs.jsonl").unlink()
    return counts


def _convert_study(folder: Path, old: dict, *, version=None, note="") -> dict:
    """The first study: one record per learner and (task, noise, seed, m) cell."""
    from meanfield.results import load_dataset, save_dataset
    from meanfield.studies import synthetic_kernels as study
    from meanfield.workbench.sweeps import grid_points, run_key

    runs = folder / "runs.jsonl"
    version = version or _recorded_version(folder)
    if version is None:
        raise ValueError(
            f"{folder} records no package version (no results.nc): pass --version, the "
            "meanfield version that computed the runs"
        )
    cfg = study.check_config(old)
    spec = study.sweep_spec(cfg, version=version)
    points = grid_points(spec["grid"])
    index = {(p["task"], p["noise"], p["seed"], p["m"]): p for p in points}
    cells: dict = {}
    for rec in read_runs(runs):
        key = (rec["task"], float(rec["noise"]), int(rec["seed"]), int(rec["m"]))
        if key not in index:
            raise ValueError(f"a record off the configuration's grid: {str(rec)[:80]!r}")
        cells.setdefault(key, {})[rec["learner"]] = rec
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    written, incomplete = [], []
    for key, by_learner in cells.items():
        if set(by_learner) != set(cfg["learners"]):
            incomplete += list(by_learner.values())
            continue
        recs = [by_learner[ln] for ln in cfg["learners"]]
        point = index[key]
        ds = study.cell_dataset(recs)
        ds.attrs.update({f"sweep_{k}": v for k, v in point.items()})
        ds.attrs.update(
            sweep_config_digest=spec["digest"],
            package_version=version,
            converted_from="runs.jsonl (the engine of run_study.py before issue 21)",
            converted_by=f"{SCRIPT} on {stamp}",
        )
        path = folder / "runs" / f"{run_key(point, spec['digest'])}.nc"
        save_dataset(ds, path)
        written.append((path, recs))
    for path, recs in written:  # every number reads back before runs.jsonl goes
        back = study.cell_records(load_dataset(path))
        if _canonical(back) != _canonical(recs):
            raise RuntimeError(f"{path} does not read back as its records; nothing removed")
    (folder / "configurations.json").write_text(
        json.dumps({spec["digest"]: spec["configuration"]}, indent=1, sort_keys=True)
    )
    counts = {
        "cells": len(written),
        "records": sum(len(r) for _, r in written),
        "incomplete_cells": len(cells) - len(written),
        "missing_cells": len(points) - len({p for p, _ in written}),
    }
    record = study.study_record(
        cfg,
        spec,
        name=folder.name,
        converted=_converted(version, note, stamp, counts, "run_study.py"),
    )
    record["meanfield_version"] = version  # what computed the runs
    (folder / "config.json").write_text(json.dumps(record, indent=1, default=float))
    if incomplete:
        (folder / "runs.jsonl.unconverted").write_text(
            "".join(json.dumps(r) + "\n" for r in incomplete)
        )
    runs.unlink()
    return counts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="convert_results.py", description=__doc__.split("\n")[0])
    p.add_argument(
        "folder",
        type=Path,
        help="a study folder with runs.jsonl (and config.json but for sinha_duchi.py's)",
    )
    p.add_argument("--version", default=None, help="the meanfield version that computed them")
    p.add_argument("--note", default="", help="recorded in config.json's 'converted' entry")
    args = p.parse_args(argv)
    try:
        if not args.folder.is_dir():
            raise FileNotFoundError(f"no folder {str(args.folder)!r}")
        counts = convert(args.folder, version=args.version, note=args.note)
    except (OSError, ValueError) as exc:
        print(f"convert_results.py: error: folder: {exc}", file=sys.stderr)
        return 2
    print(
        f"{counts['cells']} cell(s) ({counts['records']} records) converted; "
        f"{counts['incomplete_cells']} incomplete, {counts['missing_cells']} missing"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
