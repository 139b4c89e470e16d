"""Kernel attention in a pretrained Transformer: linearize MiniLM; vanilla, Kernel, Hedgehogs.

The study of README.md in this directory, on :mod:`meanfield.studies.pretrained_nlp` (two
resumable sweeps on :func:`meanfield.workbench.sweeps.run_sweep`). Usage::

    python paper_repro/nlp_pretrained/run_study.py \\
        --config paper_repro/nlp_pretrained/configs/full.json \\
        --data-dir ../shared/data --model-dir ../shared/models/all-MiniLM-L6-v2 \\
        --out paper_repro/nlp_pretrained/results/full [--seeds 0 1] [--datasets rotten_tomatoes] \\
        [--features favor] [--methods vanilla hedgehog-loss] [--controls redraw] \\
        [--scheduler local --n-workers 2 | --scheduler tcp://host:8786] [--device cuda]
    python paper_repro/nlp_pretrained/run_study.py ... --report-only

Methods: vanilla, kernel, hedgehog-loss (Hedgehog-loss, Omega only; ``hedgehog`` is read as
it), hedgehog-published (the published Hedgehog map, trained). A rerun skips finished runs
(keyed by the configuration that computes them: changing a setting computes new runs,
extending ``seeds`` or the variants does not recompute old ones).
Bad input ends with one line naming the parameter (exit 2) before any work.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: the Python names of the checks, as the flags that set them
FLAGS = {
    "out_dir": "--out",
    "data_dir": "--data-dir",
    "model_dir": "--model-dir",
    "n_workers": "--n-workers",
    "scheduler": "--scheduler",
    "device": "--device",
}


def parse(argv):
    from meanfield.workbench._scripts import device_name

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, type=Path)
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--model-dir", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument(
        "--seeds", type=int, nargs="+", help="only these seeds (every data set's own list too)"
    )
    p.add_argument("--datasets", nargs="+", help="only these data sets (names)")
    p.add_argument("--features", nargs="+", help="only these feature maps (of the configuration's)")
    p.add_argument("--methods", nargs="+", help="only these methods (of the configuration's)")
    p.add_argument("--controls", nargs="*", help="only these control kinds (none: no controls)")
    p.add_argument("--stage", choices=("softmax", "linearized", "both"), default="both")
    p.add_argument("--scheduler", default="threads", help="threads | local | tcp://address")
    p.add_argument("--n-workers", type=int, default=1)
    p.add_argument(
        "--device",
        type=device_name,
        default="cpu",
        help="torch device the runs train on: cpu, cuda or cuda:K (recorded, not keyed)",
    )
    p.add_argument("--report-only", action="store_true")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    from meanfield._validation import check_device, spelled_as
    from meanfield.errors import MeanfieldError
    from meanfield.studies import pretrained_nlp as study
    from meanfield.studies.pretrained_nlp_report import write_report

    try:
        if not args.config.is_file():
            raise FileNotFoundError(f"--config: no such file {str(args.config)!r}")
        for flag, path in (("--data-dir", args.data_dir), ("--model-dir", args.model_dir)):
            if not path.is_dir():
                raise FileNotFoundError(f"{flag}: no such directory {str(path)!r}")
        if args.out.exists() and not args.out.is_dir():
            raise FileExistsError(f"--out: {str(args.out)!r} is a file, not a directory")
        if args.n_workers < 1:
            raise ValueError(f"--n-workers must be >= 1, got {args.n_workers}")
        if not args.report_only:
            check_device("--device", args.device)
        cfg = study.check_config(json.loads(args.config.read_text()))
        record = json.loads(json.dumps(cfg))  # the whole study, for config.json and the report
        if args.seeds:  # every data set's seeds, its own list included
            cfg["seeds"] = args.seeds
            cfg["datasets"] = [
                {k: v for k, v in d.items() if k != "seeds"} for d in cfg["datasets"]
            ]
        if args.datasets:
            unknown = set(args.datasets) - {d["name"] for d in cfg["datasets"]}
            if unknown:
                raise ValueError(f"--datasets: unknown names {sorted(unknown)}")
            cfg["datasets"] = [d for d in cfg["datasets"] if d["name"] in args.datasets]
        for key in ("features", "methods"):
            chosen = getattr(args, key)
            if chosen and key == "methods":
                chosen = study.dataset_methods({"methods": chosen})  # earlier names read too
            if chosen:
                unknown = set(chosen) - set(cfg[key])
                if unknown:
                    raise ValueError(
                        f"--{key}: {sorted(unknown)} not in the configuration's {cfg[key]}"
                    )
                cfg[key] = [v for v in cfg[key] if v in chosen]
        if args.controls is not None:
            ctl = dict(cfg.get("controls") or {})
            kinds = ctl.get("kinds", [])
            unknown = set(args.controls) - set(kinds)
            if unknown:
                raise ValueError(
                    f"--controls: {sorted(unknown)} not in the configuration's {kinds}"
                )
            ctl["kinds"] = [k for k in kinds if k in args.controls]
            cfg["controls"] = ctl
        stages = ("softmax", "linearized") if args.stage == "both" else (args.stage,)
        if args.report_only:
            if not (args.out / "config.json").is_file():
                raise FileNotFoundError(
                    f"--out: {str(args.out)!r} holds no study (no config.json) to report on"
                )
        else:
            # the whole configuration, the folders, the checkpoint, the data, the device and
            # the scheduler: checked before anything is trained or written
            with spelled_as(FLAGS):
                study.check_study_inputs(
                    cfg,
                    data_dir=args.data_dir,
                    model_dir=args.model_dir,
                    out_dir=args.out,
                    scheduler=args.scheduler,
                    n_workers=args.n_workers,
                    stages=stages,
                    device=args.device,
                )
    except (MeanfieldError, OSError, ValueError, json.JSONDecodeError) as exc:
        print(f"run_study: error: {exc}", file=sys.stderr)
        return 2
    if not args.report_only:
        study.run_study(
            cfg,
            data_dir=args.data_dir,
            model_dir=args.model_dir,
            out_dir=args.out,
            scheduler=args.scheduler,
            n_workers=args.n_workers,
            stages=stages,
            record=record,
            device=args.device,
        )
    write_report(args.out, data_dir=args.data_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
