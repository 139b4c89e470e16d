"""Linearized MiniLM against the softmax MiniLM at long L: inference time and peak memory.

Issue #20: "inference time and memory of the linearized model vs the softmax one at
L = 512 ... 8192, so the linear-time claim is shown on the real model". The model is the
pretrained all-MiniLM-L6-v2 (6 BERT layers, width 384, 12 heads of d_h = 32) in float32,
``eval()`` and ``torch.inference_mode()``, one CPU thread by default.

The measurement is :func:`meanfield.attention.inference_cost.inference_cost` (its module
notes say what is timed and how; this script is its command line, prints its tables and
writes its result). In short: MiniLM's position embeddings stop at 512 tokens, so the
**encoder stack** -- the model's 6 transformer layers (attention + FFN, the real weights)
-- is timed on synthetic hidden states ``h ~ N(0, 1)`` of shape ``(1, L, 384)``; the models
are ``softmax`` (the model as loaded, ``transformers``' ``sdpa`` attention; ``--softmax-impl
eager`` for the eager one) and the same checkpoint after
:func:`meanfield.attention.linearize.linearize` with each of ``--maps`` (default ``favor:64``
and ``softmaxfeat:32``, seed 0); two sanity checks at L = 512 (the linearized ``softmax``
stack equals the original's; the stack on the embedding output equals the full model).

Time: per L, interleaved repeats, the median wall time and the median of the paired ratios
``t / t_softmax`` within a repeat, and the same by this process's CPU time; repeats: 5 at
L <= 1024, 3 up to 4096, 2 above (``--repeats``, ``--repeats-long``). Slopes: least-squares
slope of log t against log L over all lengths, and the local slopes between successive L.
Memory: the peak extra resident memory of one forward (MiB), each (model, L) in a fresh
subprocess (``--memory subprocess``, the default; ``inprocess`` for the tests, ``none``).

    python benchmarks/bench_pretrained_long.py                   # L = 512 ... 8192, ~5 min
    python benchmarks/bench_pretrained_long.py --lengths 512,1024 --memory none
    python benchmarks/bench_pretrained_long.py --tiny --lengths 32,64 --out /tmp/r  # smoke run

The pretrained study's per-variant table (its four feature maps, L = 128 ... 8192; ~25 min
on the shared 2-core machine):

    python benchmarks/bench_pretrained_long.py --lengths 128,256,512,1024,2048,4096,8192 \
        --maps favor:64,porf-softplus:64,softmaxfeat:32,hedgehog --out /tmp/bench \
        --dataset paper_repro/nlp_pretrained/results/inference_cost.nc

Results: ``OUT/bench_pretrained_long.json`` and the printed tables in ``.txt``, with the
machine, the thread count, the load average and the wall time; with ``--dataset PATH``
also the dataset (netCDF, written atomically) and its Markdown tables in ``PATH`` with the
suffix ``.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
from pathlib import Path

from meanfield.attention.inference_cost import (
    check_lengths,
    inference_cost,
    inference_cost_table,
    parse_maps,
)
from meanfield.contract import Contract, Param
from meanfield.errors import InputError, InputTypeError
from meanfield.workbench._scripts import add_bench_out, output_file

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"
NAME = "bench_pretrained_long"


# ---------------------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would add its usage)
        _fail(message)


def _fail(message: str):
    # as every script of benchmarks/: "<script>: error: ..." on one line
    print(f"{Path(__file__).name}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _declared(name: str, default=None) -> Param:
    """The Param that :func:`inference_cost` declares, with its default (or ``default``)."""
    contract = inference_cost.contract
    value = contract.defaults[name] if default is None else default
    return dataclasses.replace(contract.by_name[name], default=value)


#: The flags, declared once: the measurement's own Params (:func:`inference_cost`'s), with
#: its defaults but the lengths; the model folder, the output paths and the ``KIND:m`` list
#: of maps are checked by hand (the maps and lengths by the measurement's own checks).
FLAGS = Contract(
    "benchmarks/bench_pretrained_long.py",
    [
        Param("tiny", "flag", "a tiny random BERT (save_tiny_bert)", default=False),
        _declared("lengths", (512, 1024, 2048, 4096, 8192)),
        _declared("softmax_impl"),
        _declared("repeats"),
        _declared("repeats_long"),
        _declared("threads"),
        _declared("memory"),
    ],
)


def parse(argv):
    ap = _Parser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", default=str(DEFAULT_MODEL), help="HF-layout model folder")
    FLAGS.add_arguments(ap)
    ap.add_argument("--maps", default="favor:64,softmaxfeat:32", help="linearized KIND:m, ...")
    add_bench_out(ap, f"{NAME}.json and .txt")
    ap.add_argument(
        "--dataset",
        type=output_file,
        default=None,
        metavar="PATH",
        help="also write the result as a netCDF dataset (atomically) and its Markdown "
        "tables beside it (PATH with the suffix .md)",
    )
    ap.add_argument("--note", default="", help="a line of context written into the .txt")
    args = FLAGS.parse_args(ap, argv)
    try:
        args.length_list = check_lengths(sorted(set(args.lengths)))
    except (InputError, InputTypeError) as err:
        _fail(f"--lengths: {err}")
    try:
        args.map_list = [x for x in args.maps.split(",") if x.strip()]
        parse_maps(args.map_list)
    except (InputError, InputTypeError) as err:
        _fail(f"--maps: {err}")
    return args


# ---------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------
def _local_slopes(lengths, values) -> list[float]:
    """The slopes of log(value) against log(L) between successive lengths."""
    return [
        math.log(values[i + 1] / values[i]) / math.log(lengths[i + 1] / lengths[i])
        if values[i] > 0 and values[i + 1] > 0
        else None
        for i in range(len(lengths) - 1)
    ]


def _by_variant(da) -> dict:
    return {str(v): [float(x) for x in da.sel(variant=v).values] for v in da["variant"].values}


def _raw(ds, name: str) -> dict:
    """Each variant's per-L lists of the timed repeats (the NaN padding dropped)."""
    reps = [int(r) for r in ds["n_repeats"].values]
    return {
        str(v): [
            [float(x) for x in row[:n]]
            for row, n in zip(ds[name].sel(variant=v).values, reps, strict=True)
        ]
        for v in ds["variant"].values
    }


def as_json(ds, args, model_dir) -> dict:
    """The dataset as this script's JSON record (its keys as before the measurement moved
    into the package; memory in MiB under the keys ``*_MB``)."""
    lengths = [int(L) for L in ds["L"].values]
    a = ds.attrs
    res = {"lengths": lengths, "models": {}}
    for v in ds["variant"].values:
        row = ds.sel(variant=v)
        kind = str(row["feature_map"].values)
        m = int(row["n_features"].values)
        res["models"][str(v)] = {
            "kind": kind,
            "m": m or None,
            "attn_implementation": str(row["attn_implementation"].values),
        }
    res["sdpa_backend"] = a["sdpa_backend"]
    res["sanity"] = {
        "L": int(a["sanity_L"]),
        "linearized_softmax_vs_original_max_abs_diff": float(
            a["sanity_linearized_softmax_vs_original_max_abs_diff"]
        ),
        "stack_vs_full_model_max_abs_diff": float(a["sanity_stack_vs_full_model_max_abs_diff"]),
        "output_max_abs": float(a["sanity_output_max_abs"]),
        "attn_implementation": {
            "original": a["sanity_attn_implementation_original"],
            "linearized": a["sanity_attn_implementation_linearized"],
        },
    }
    res["repeats"] = [int(r) for r in ds["n_repeats"].values]
    for prefix in ("", "cpu_"):
        res[prefix + "times"] = _by_variant(ds[prefix + "seconds"])
        res[prefix + "ratio"] = _by_variant(ds[prefix + "ratio_to_softmax"])
        res[prefix + "raw"] = _raw(ds, prefix + "seconds_per_repeat")
        res[prefix + "slopes"] = {
            str(v): {
                "fit": float(ds["slope_" + prefix + "seconds"].sel(variant=v)),
                "local": _local_slopes(lengths, t),
            }
            for v, t in res[prefix + "times"].items()
        }
    if "peak_extra_mib" in ds:
        peak = _by_variant(ds["peak_extra_mib"])
        base = peak["softmax"]
        res["memory"] = {
            "peak_extra_MB": peak,
            "ratio": {
                n: [x / b if b > 0 else None for x, b in zip(v, base, strict=True)]
                for n, v in peak.items()
            },
            "slopes": {
                n: {
                    "fit": float(ds["slope_peak_extra_mib"].sel(variant=n)),
                    "local": _local_slopes(lengths, v),
                }
                if min(v) > 0
                else None
                for n, v in peak.items()
            },
            "methods": sorted({str(x) for x in ds["memory_method"].values.ravel()}),
            "method": (
                f"{args.memory}: after the model load, the input and a small warm-up call, "
                "the peak RSS VmHWM is reset (5 written to /proc/self/clear_refs); reported: "
                "VmHWM after one forward minus VmRSS before it (MiB, under the key "
                "peak_extra_MB; allocator caching included). 'ru_maxrss-lower-bound' marks "
                "runs without the reset: ru_maxrss after minus before."
            ),
        }
    res["scores_MB_per_layer"] = [float(x) for x in ds["scores_mib"].values]
    res["wall_seconds"] = float(a["wall_seconds"])
    res["config"] = {k: v for k, v in vars(args).items()}
    res["config"]["model_dir"] = "tiny" if args.tiny else str(model_dir)
    res["machine"] = {
        k: a[k]
        for k in (
            "machine",
            "platform",
            "processor",
            "cpu_count",
            "python_version",
            "torch_version",
            "transformers_version",
            "threads",
        )
    }
    for k in ("load_average_start", "load_average_end"):  # "1 5 15" min, as text
        res["machine"][k] = [float(x) for x in a[k].split()] if a[k] != "unknown" else None
    res["note"] = args.note
    return res


def run(args, model_dir, out):
    """Measure (:func:`inference_cost`), print the tables, return the dataset and the JSON."""
    ds = inference_cost(
        model_dir,
        args.map_list,
        args.length_list,
        repeats=args.repeats,
        repeats_long=args.repeats_long,
        threads=args.threads,
        memory=args.memory,
        softmax_impl=args.softmax_impl,
        note=args.note,
        log=out,
    )
    a = ds.attrs
    out(
        f"\n{NAME}: {'tiny random BERT' if args.tiny else model_dir}: {a['n_layers']} layers, "
        f"width {a['hidden_size']}, {a['num_heads']} heads of d_h = {a['head_dim']}; float32, "
        f"eval, inference_mode, batch 1, {a['threads']} thread(s). Timed: the ENCODER STACK "
        f"alone ({a['timed']}); softmax = the model as loaded, transformers' "
        f"'{a['softmax_impl']}' attention (torch's SDPA kernel here: {a['sdpa_backend']}). "
        f"Load average (1, 5, 15 min) at start {a['load_average_start']}, at the end "
        f"{a['load_average_end']}."
    )
    if args.note:
        out(f"note: {args.note}")
    out(
        f"sanity at L = {a['sanity_L']}: linearized 'softmax' encoder stack vs the original's: "
        f"max abs diff {a['sanity_linearized_softmax_vs_original_max_abs_diff']:.2e} (|output| "
        f"max {a['sanity_output_max_abs']:.1f}); encoder stack on the embedding output vs the "
        f"full model's last hidden state (random ids, all-ones mask): max abs diff "
        f"{a['sanity_stack_vs_full_model_max_abs_diff']:.2e}"
    )
    out("\n" + inference_cost_table(ds, clock="both"))
    res = as_json(ds, args, model_dir)
    out("local log-log slopes of time between successive L (wall; CPU)")
    for n in res["times"]:
        wall = " ".join(f"{x:.2f}" for x in res["slopes"][n]["local"])
        cpu = " ".join(f"{x:.2f}" for x in res["cpu_slopes"][n]["local"])
        out(f"  {n:>22}: {wall};  {cpu}")
    out(f"\nwall time {res['wall_seconds']:.0f} s")
    return ds, res


def _write_text_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.part")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv=None) -> dict:
    args = parse(argv)
    lines = []

    def out(s):
        print(s, flush=True)
        lines.append(s)

    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            import transformers

            from meanfield.attention.pretrained import save_tiny_bert

            transformers.utils.logging.disable_progress_bar()
            model_dir = Path(tmp) / "tiny-bert"
            save_tiny_bert(model_dir, seed=0)
        else:
            model_dir = Path(args.model_dir)
            if not (model_dir / "config.json").is_file():
                _fail(
                    f"--model-dir: no model at {str(model_dir)!r} (an HF-layout folder; "
                    "--tiny runs a tiny random BERT instead)"
                )
        ds, res = run(args, model_dir, out)
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{NAME}.json"
    path.write_text(json.dumps(res, indent=1, default=str))
    path.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {path} and its .txt", flush=True)
    if args.dataset is not None:
        from meanfield.results import save_dataset

        save_dataset(ds, args.dataset)
        _write_text_atomically(args.dataset.with_suffix(".md"), inference_cost_table(ds))
        print(f"wrote {args.dataset} and its .md", flush=True)
    return res


if __name__ == "__main__":
    main()
