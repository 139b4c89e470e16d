"""One-off: convert a study folder of the old engine (``runs/<key>.json``) to the sweep layout.

Before issue 24, ``run_study.py`` kept its own resume engine: one JSON per run under
``<out>/runs/`` named by data set, variant, Q = K and seed only, so a rerun with another
configuration found them and reported "0 run(s) done". The study now runs on
:func:`meanfield.workbench.sweeps.run_sweep` (:mod:`meanfield.studies.scratch_nlp`), where a run's
key holds the whole configuration. This script moves the recorded runs of such a folder into that
layout, keyed by the configuration they were computed with: the ``config.json`` stored beside them
(its settings, its data folder, its package version, the runs' device). Nothing is recomputed; every
number is kept (each run file's ``record`` attribute holds the old JSON record, checked to read back
identical before the JSON is removed), and each file records that it was converted
(``converted_from``, ``converted_by``). The tokenizers the runs used are kept as ``<data
set>/tokenizer_recorded.json``; ``config.json`` is rewritten in the new format with a ``converted``
entry.

Usage::

    python paper_repro/nlp/convert_results.py paper_repro/nlp/results/full
    python paper_repro/nlp/run_study.py --out paper_repro/nlp/results/full --report-only

The recorded study (``results/full``) was converted in issue 24; its runs were computed at
commit cde990d with the tokenizers of that time (before issue 12 made ``TextTokenizer.train``
reproducible), so recomputing one today would not give the recorded number.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
from pathlib import Path

SCRIPT = "paper_repro/nlp/convert_results.py"


def _canonical(rec: dict) -> str:
    return json.dumps(json.loads(json.dumps(rec, default=float)), sort_keys=True)


def convert(folder, *, note: str = "") -> dict:
    """Convert ``folder`` in place; returns counts by data set (runs, baseline, missing)."""
    from meanfield.results import save_dataset
    from meanfield.studies import scratch_nlp as study
    from meanfield.studies.scratch_nlp_report import read_record
    from meanfield.workbench.sweeps import grid_points, run_key

    folder = Path(folder)
    old = json.loads((folder / "config.json").read_text())
    if "sweeps" in old:
        raise ValueError(f"{folder} is already in the sweep layout")
    extras = {k: v for k, v in old.items() if k not in study.study_config_defaults}
    cfg = study.check_config({k: v for k, v in old.items() if k in study.study_config_defaults})
    runs_dir = folder / "runs"
    run_files = sorted(runs_dir.glob("*__qk*__s*.json"))
    records = [(p, json.loads(p.read_text())) for p in run_files]
    devices = {r["device"] for _, r in records} or {"cpu"}
    if len(devices) != 1:
        raise ValueError(f"runs of several devices {sorted(devices)}: convert them apart")
    (device,) = devices
    version = extras["meanfield_version"]
    specs = study.sweep_specs(cfg, extras["data_dir"], device, version=version)
    written, counts = [], {}
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def save(rec, source: Path, spec: dict, point: dict):
        ds = study.record_dataset(rec)
        ds.attrs.update({f"sweep_{k}": v for k, v in point.items()})
        ds.attrs.update(
            sweep_config_digest=spec["digest"],
            package_version=version,
            torch_version=extras.get("torch", "?"),
            converted_from=f"{source.relative_to(folder)} (the engine of run_study.py before "
            "issue 24)",
            converted_by=f"{SCRIPT} on {stamp}",
        )
        path = folder / spec["folder"] / "runs" / f"{run_key(point, spec['digest'])}.nc"
        save_dataset(ds, path)
        written.append((path, rec, source))

    for source, rec in records:
        spec = specs[rec["dataset"]]["variants"]
        feature, branch = rec["feature"], rec["branch"]
        variant = "softmax" if feature == "softmax" else f"{branch}-{feature}"
        point = {"seed": int(rec["seed"]), "tie_qk": bool(rec["tie_qk"]), "variant": variant}
        if point not in grid_points(spec["grid"]):
            raise ValueError(f"{source.name}: {point} is not on the configuration's grid")
        save(rec, source, spec, point)
        counts.setdefault(rec["dataset"], {"runs": 0, "baseline": 0})["runs"] += 1
    for name, spec in specs.items():
        source = runs_dir / f"baseline__{name}.json"
        if source.is_file():
            rec = {"dataset": name, **json.loads(source.read_text())}
            save(rec, source, spec["baseline"], {"dataset": name})
            counts.setdefault(name, {"runs": 0, "baseline": 0})["baseline"] = 1
        done = {
            (r["seed"], bool(r["tie_qk"]), r["variant"]) for _, r in records if r["dataset"] == name
        }
        grid = spec["variants"]["grid"]
        counts.setdefault(name, {"runs": 0, "baseline": 0})["missing"] = sum(
            (p["seed"], p["tie_qk"], study.variant_label(p["variant"])) not in done
            for p in grid_points(grid)
        )
        for part in ("variants", "baseline"):
            manifest = folder / spec[part]["folder"] / "configurations.json"
            manifest.parent.mkdir(parents=True, exist_ok=True)
            manifest.write_text(
                json.dumps({spec[part]["digest"]: spec[part]["configuration"]}, indent=1)
            )
    for path, rec, source in written:  # every number reads back before the JSON goes
        back = read_record(path)
        if back is None or _canonical(back) != _canonical(rec):
            raise RuntimeError(f"{path} does not read back as {source}; nothing removed")
    record = study.study_record(
        cfg,
        specs,
        config_file=extras.get("config_file"),
        data_dir=extras.get("data_dir"),
        device=device,
        machine=extras.get("machine", "?"),
        converted={
            "by": SCRIPT,
            "on": stamp,
            "from": "runs/<data set>__<variant>__qk<0|1>__s<seed>.json and "
            "runs/baseline__<data set>.json (the engine of run_study.py before issue 24)",
            "runs": {k: v for k, v in counts.items()},
            "keyed_by": "the config.json stored beside them: its settings, data_dir, "
            f"meanfield_version {version} and the runs' device {device!r}",
            "note": note,
        },
    )
    for k in ("meanfield_version", "torch", "numpy", "python"):  # what computed the runs
        if k in extras:
            record[k] = extras[k]
    (folder / "config.json").write_text(json.dumps(record, indent=1, default=float))
    for name in specs:
        tok = runs_dir / "tokenizers" / f"{name}.json"
        if tok.is_file():
            shutil.move(tok, folder / name / "tokenizer_recorded.json")
    for _, _, source in written:
        source.unlink()
    for leftover in (runs_dir / "tokenizers", runs_dir):
        if leftover.is_dir() and not any(leftover.iterdir()):
            leftover.rmdir()
    return counts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="convert_results", description=__doc__.split("\n")[0])
    p.add_argument("folder", type=Path, help="a study folder with runs/*.json and config.json")
    p.add_argument("--note", default="", help="recorded in config.json's 'converted' entry")
    args = p.parse_args(argv)
    try:
        if not (args.folder / "config.json").is_file():
            raise FileNotFoundError(f"no config.json in {str(args.folder)!r}")
        counts = convert(args.folder, note=args.note)
    except (OSError, ValueError) as exc:
        print(f"convert_results: error: {exc}", file=sys.stderr)
        return 2
    for name, c in counts.items():
        print(f"{name}: {c['runs']} run(s), baseline {c['baseline']}, {c['missing']} missing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
