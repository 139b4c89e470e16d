"""Linearized MiniLM against the softmax MiniLM at long L: inference time and peak memory.

Issue #20: "inference time and memory of the linearized model vs the softmax one at
L = 512 ... 8192, so the linear-time claim is shown on the real model". The model is the
pretrained all-MiniLM-L6-v2 (6 BERT layers, width 384, 12 heads of d_h = 32), loaded by
:func:`meanfield.attention.pretrained.load_pretrained_classifier`, in float32, ``eval()`` and
``torch.inference_mode()``, one CPU thread by default.

What is timed. MiniLM's position embeddings stop at 512 tokens, so the script times the
**encoder stack** -- the model's 6 transformer layers (attention + FFN, the real weights),
``model.encoder.encoder(h, attention_mask=None)`` -- on synthetic hidden states
``h ~ N(0, 1)`` of shape ``(1, L, 384)``, bypassing the embedding layer (and the pooling
head). ``attention_mask=None`` is what the full model passes its layers for an all-ones mask
(checked at L = 512, below). Three models, each loaded separately:

* ``softmax``: the model as loaded, with ``transformers``' ``sdpa`` attention (``--softmax-impl
  eager`` for the eager one);
* ``favor m=64`` and ``softmaxfeat m=32`` (``2 m`` features): the same checkpoint after
  :func:`meanfield.attention.linearize.linearize` (the vanilla random-feature maps, seed 0;
  ``--maps`` for others), whose layers call the package's kernel attention through
  ``transformers``' ``AttentionInterface``; the projections and FFNs are untouched.

Sanity checks (printed, once): at L = 512 the encoder stack of ``linearize(model,
"softmax")`` equals the original's on the same hidden states (max abs diff), and the encoder
stack on the embedding output equals the full model's last hidden state on random token ids
(so the bypass times what the model runs).

Time: per L, interleaved repeats (each repeat times every model once, in turn; one untimed
warm-up call each at L <= 4096), the median wall time, and the median of the paired ratios
``t / t_softmax`` within a repeat (robust to the load of a shared machine), and the same by
this process's CPU time (with one thread: the arithmetic, without the waits); repeats: 5 at
L <= 1024, 3 up to 4096, 2 above (``--repeats``, ``--repeats-long``). Slopes: least-squares
slope of log t against log L over all lengths, and the local slopes between successive L
(softmax tends to 2 as the L^2 attention overtakes the FFN, linear stays near 1).

Memory: each (model, L) in a fresh subprocess (``--memory subprocess``, the default): load
the model, build the input, one small warm-up call, reset the peak RSS (``5`` written to
``/proc/self/clear_refs`` resets ``VmHWM``), run the forward, and report ``VmHWM`` after it
minus ``VmRSS`` before it (``/proc/self/status``): the peak extra resident memory of one
forward, allocator caching included. ``ru_maxrss`` is the fallback off Linux (after minus
before: a lower bound); it is not used on Linux because the kernel keeps in it the peak of
exited threads (the loader's), which the reset does not clear. ``--memory inprocess``
measures the same way in this process (fast, for the tests); ``none`` skips it. Small
allocations are served from memory the allocator already holds, so the figures resolve
only the large buffers (MB and up: the real model at L >= 512, not the tiny one).

    python benchmarks/bench_pretrained_long.py                   # L = 512 ... 8192, ~5 min
    python benchmarks/bench_pretrained_long.py --lengths 512,1024 --memory none
    python benchmarks/bench_pretrained_long.py --tiny --lengths 32,64 --out /tmp/r  # smoke run

Results: ``OUT/bench_pretrained_long.json`` and the printed tables in ``.txt``, with the
machine, the thread count, the load average and the wall time.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_attention import fit_slope  # noqa: E402  (the shared log-log slope helper)

from meanfield.attention.linear import ATTENTION_KINDS  # noqa: E402
from meanfield.contract import Contract, Param  # noqa: E402
from meanfield.workbench._scripts import add_bench_out  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"
NAME = "bench_pretrained_long"
SANITY_L = 512


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


def _maps(text: str) -> list[tuple[str, int]]:
    out = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        kind, _, m = item.partition(":")
        if kind not in ATTENTION_KINDS:
            _fail(f"--maps: unknown feature map {kind!r} (one of {', '.join(ATTENTION_KINDS)})")
        try:
            m = int(m) if m else 64
        except ValueError:
            m = 0
        if m < 1:
            _fail(f"--maps: the features of {kind!r} must be a positive integer, got {item!r}")
        out.append((kind, m))
    if not out:
        _fail(f"--maps must name at least one feature map, got {text!r}")
    return out


#: The flags, declared once: their checks, help and docs come from these Params (the model
#: folder, the output folder and the ``KIND:m`` list of maps are checked by hand).
FLAGS = Contract(
    "benchmarks/bench_pretrained_long.py",
    [
        Param("tiny", "flag", "a tiny random BERT (save_tiny_bert)", default=False),
        Param("lengths", "int", "sequence lengths L", low=1, sequence=True,
              default=(512, 1024, 2048, 4096, 8192)),
        Param("softmax_impl", "choice", "transformers' attention of the softmax model",
              choices=("sdpa", "eager"), default="sdpa"),
        Param("repeats", "int", "timed repeats at L <= 1024", low=1, default=5),
        Param("repeats_long", "int", "timed repeats at L > 4096", low=1, default=2),
        Param("threads", "int", "torch CPU threads", low=1, default=1),
        Param("memory", "choice", "where the peak memory is measured",
              choices=("subprocess", "inprocess", "none"), default="subprocess"),
    ],
)  # fmt: skip


def parse(argv):
    ap = _Parser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", default=str(DEFAULT_MODEL), help="HF-layout model folder")
    FLAGS.add_arguments(ap)
    ap.add_argument("--maps", default="favor:64,softmaxfeat:32", help="linearized KIND:m, ...")
    add_bench_out(ap, f"{NAME}.json and .txt")
    ap.add_argument("--note", default="", help="a line of context written into the .txt")
    ap.add_argument("--child-memory", default=None, help=argparse.SUPPRESS)
    args = FLAGS.parse_args(ap, argv)
    if args.child_memory is not None:
        return args
    args.length_list = sorted(set(args.lengths))
    args.map_list = _maps(args.maps)
    return args


def repeats_at(L: int, args) -> int:
    """5 (``--repeats``) at L <= 1024, at most 3 up to 4096, ``--repeats-long`` above."""
    if L <= 1024:
        return args.repeats
    if L <= 4096:
        return min(args.repeats, 3)
    return min(args.repeats, args.repeats_long)


def model_name(kind: str, m: int | None) -> str:
    if kind == "softmax" and m is None:
        return "softmax"
    if kind == "softmax":
        return "linearized softmax"
    return f"{kind} m={m}"


# ---------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------
def load_encoder(model_dir, impl: str, kind: str | None = None, m: int = 64):
    """The BERT encoder (``AutoModel``) of ``model_dir`` in eval mode, linearized with
    ``kind`` (m features, seed 0) unless None."""
    from meanfield.attention.linearize import linearize
    from meanfield.attention.pretrained import load_pretrained_classifier

    model = load_pretrained_classifier(model_dir, attn_implementation=impl)[0].eval()
    if kind is not None:
        linearize(model, kind, n_features=m, seed=0)
    return model.encoder


def stack_of(encoder):
    """``h -> encoder stack(h)``: the transformer layers alone, no mask (all tokens real)."""
    layers = encoder.encoder

    def run(h):
        return layers(h, attention_mask=None).last_hidden_state

    return run


def sanity_checks(model_dir, impl, softmax_enc, out) -> dict:
    """Linearized softmax == original encoder stack, and the stack == the full model."""
    cfg = softmax_enc.config
    L = min(SANITY_L, cfg.max_position_embeddings)
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(1, L, cfg.hidden_size, generator=gen)
    lin = load_encoder(model_dir, impl, "softmax")
    ids = torch.randint(1, cfg.vocab_size, (1, L), generator=gen)
    with torch.inference_mode():
        ref = stack_of(softmax_enc)(h)
        diff_lin = float((stack_of(lin)(h) - ref).abs().max())
        full = softmax_enc(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
        emb = softmax_enc.embeddings(input_ids=ids)
        diff_stack = float((stack_of(softmax_enc)(emb) - full).abs().max())
    impls = {"original": softmax_enc.config._attn_implementation}
    impls["linearized"] = lin.config._attn_implementation
    del lin
    gc.collect()
    out(
        f"sanity at L = {L}: linearized 'softmax' encoder stack vs the original's: max abs diff "
        f"{diff_lin:.2e} (|output| max {float(ref.abs().max()):.1f}); encoder stack on the "
        f"embedding output vs the full model's last hidden state (random ids, all-ones mask): "
        f"max abs diff {diff_stack:.2e}; attention implementations {impls}"
    )
    return {
        "L": L,
        "linearized_softmax_vs_original_max_abs_diff": diff_lin,
        "stack_vs_full_model_max_abs_diff": diff_stack,
        "output_max_abs": float(ref.abs().max()),
        "attn_implementation": impls,
    }


# ---------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------
def _status_kb(field: str) -> int | None:
    """``VmRSS`` / ``VmHWM`` of ``/proc/self/status`` in kB (None off Linux)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset this process's peak RSS ``VmHWM`` (Linux >= 4.0: ``clear_refs`` 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _maxrss_kb() -> int:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb // 1024 if sys.platform == "darwin" else kb  # bytes on macOS


def forward_peak(run, L: int, hidden: int) -> dict:
    """Peak extra resident memory (MB) of one forward ``run(h)`` at ``h ~ (1, L, hidden)``.

    With the reset (Linux): ``VmHWM`` after the forward minus ``VmRSS`` before it, the peak
    reset just before. ``ru_maxrss`` is not used there: the kernel keeps in it the peak of
    any thread that exited (the loader's), which the reset does not clear. Without the reset:
    ``ru_maxrss`` after minus before, a lower bound (0 if loading peaked higher).
    """
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(1, L, hidden, generator=gen)
    with torch.inference_mode():
        run(torch.randn(1, 16, hidden, generator=gen))  # lazy initialisations
        gc.collect()
        maxrss_before = _maxrss_kb()
        reset = _reset_peak()
        base = _status_kb("VmRSS") if reset else None
        reset = reset and base is not None
        t0 = time.perf_counter()
        y = run(h)
        seconds = time.perf_counter() - t0
        hwm = _status_kb("VmHWM") if reset else None
        maxrss = _maxrss_kb()
    del y
    if reset and hwm is not None:
        extra, method = hwm - base, "VmHWM-reset"
    else:
        extra, method = maxrss - maxrss_before, "ru_maxrss-lower-bound"
    return {
        "peak_extra_MB": max(extra, 0) / 1024,
        "rss_before_MB": None if base is None else base / 1024,
        "ru_maxrss_MB": maxrss / 1024,
        "method": method,
        "seconds": seconds,
    }


def _child_main(spec: dict) -> None:
    torch.set_num_threads(spec["threads"])
    enc = load_encoder(spec["model_dir"], spec["impl"], spec["kind"], spec["m"])
    res = forward_peak(stack_of(enc), spec["L"], enc.config.hidden_size)
    print(json.dumps(res), flush=True)


def memory_subprocess(model_dir, impl, kind, m, L, threads) -> dict:
    """:func:`forward_peak` of one (model, L) in a fresh Python process."""
    spec = {"model_dir": str(model_dir), "impl": impl, "kind": kind, "m": m, "L": L}
    spec["threads"] = threads
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child-memory", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"memory subprocess for {kind} m={m} L={L} failed ({proc.returncode}): "
            f"{proc.stderr.strip()[-2000:]}"
        )
    return json.loads(lines[-1])


# ---------------------------------------------------------------------------------------
# the benchmark
# ---------------------------------------------------------------------------------------
def time_lengths(runs: dict, lengths, hidden: int, args, out) -> dict:
    """Interleaved repeats per L: median times and median paired ratios to softmax, by the
    wall clock (``times``, ``ratio``) and by this process's CPU time (``cpu_times``,
    ``cpu_ratio``: with one thread, the arithmetic without the waits of a loaded machine)."""
    gen = torch.Generator().manual_seed(0)
    names = list(runs)
    res = {"repeats": []}
    for key in ("times", "ratio", "raw", "cpu_times", "cpu_ratio", "cpu_raw"):
        res[key] = {n: [] for n in names}
    head = " ".join(f"{n + ' s':>24}" for n in names)
    out(f"\ntime: median wall s over repeats (median paired t / t_softmax)\n{'L':>6} reps {head}")
    cpu_rows = []
    for L in lengths:
        h = torch.randn(1, L, hidden, generator=gen)
        reps = repeats_at(L, args)
        raw = {n: [] for n in names}
        cpu = {n: [] for n in names}
        with torch.inference_mode():
            if L <= 4096:
                for run in runs.values():
                    run(h)
            for _ in range(reps):
                for n, run in runs.items():
                    c0, t0 = time.process_time(), time.perf_counter()
                    run(h)
                    raw[n].append(time.perf_counter() - t0)
                    cpu[n].append(time.process_time() - c0)
        for suffix, got in (("", raw), ("cpu_", cpu)):
            base = np.asarray(got["softmax"])
            for n in names:
                res[suffix + "times"][n].append(float(np.median(got[n])))
                res[suffix + "ratio"][n].append(float(np.median(np.asarray(got[n]) / base)))
                res[suffix + "raw"][n].append(got[n])
        res["repeats"].append(reps)
        for suffix, rows in (("", None), ("cpu_", cpu_rows)):
            t, r = res[suffix + "times"], res[suffix + "ratio"]
            row = " ".join(f"{t[n][-1]:>16.4f} ({r[n][-1]:5.2f})" for n in names)
            if rows is None:
                out(f"{L:6d} {reps:4d} {row}")
            else:
                rows.append(f"{L:6d} {reps:4d} {row}")
    out("\nthe same repeats by CPU time of this process (s; one thread: no waits for the cores)")
    out(f"{'L':>6} reps {head}")
    for row in cpu_rows:
        out(row)
    return res


def slopes(lengths, times) -> dict:
    """Fitted log-log slope over all L and the local slopes between successive L."""
    if len(lengths) < 2:
        return {"fit": None, "local": []}
    local = [
        math.log(times[i + 1] / times[i]) / math.log(lengths[i + 1] / lengths[i])
        for i in range(len(lengths) - 1)
    ]
    return {"fit": fit_slope(lengths, times), "local": local}


def measure_memory(specs: dict, lengths, model_dir, args, runs, hidden, H, out) -> dict:
    """Peak extra RSS per (model, L): fresh subprocesses, or in this process (``runs``)."""
    names = list(specs)
    mem = {n: [] for n in names}
    detail = {n: [] for n in names}
    where = "a fresh subprocess per (model, L)" if args.memory == "subprocess" else "this process"
    out(
        f"\nmemory: peak extra resident MB of one forward, {where} (ratio to softmax); "
        f"'scores' = the {H} L x L float32 score matrices of one layer an eager softmax holds"
    )
    head = " ".join(f"{n + ' MB':>24}" for n in names)
    out(f"{'L':>6} {'scores MB':>10} {head}")
    for L in lengths:
        for n in names:
            kind, m = specs[n]
            if args.memory == "subprocess":
                r = memory_subprocess(model_dir, args.softmax_impl, kind, m, L, args.threads)
            else:
                r = forward_peak(runs[n], L, hidden)
            mem[n].append(r["peak_extra_MB"])
            detail[n].append(r)
        base = mem["softmax"][-1]
        row = " ".join(
            f"{mem[n][-1]:>16.1f} ({mem[n][-1] / base if base > 0 else float('nan'):5.2f})"
            for n in names
        )
        out(f"{L:6d} {H * L * L * 4 / 2**20:10.1f} {row}")
    methods = {r["method"] for rs in detail.values() for r in rs}
    return {"peak_extra_MB": mem, "detail": detail, "methods": sorted(methods)}


def sdpa_backend(H: int, d: int) -> str | None:
    """The kernel torch's CPU SDPA picks for unmasked float32 ``(1, H, L, d)`` inputs."""
    try:
        from torch.nn.attention import SDPBackend

        q = torch.zeros(1, H, 64, d)
        return SDPBackend(torch._fused_sdp_choice(q, q, q)).name
    except Exception:  # a private torch API: absent or changed
        return None


def machine_info(args) -> dict:
    import transformers

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": args.threads,
        "load_average_1_5_15": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def run(args, model_dir, out) -> dict:
    t_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    lengths = args.length_list
    specs = {"softmax": (None, None)}
    for kind, m in args.map_list:
        specs[model_name(kind, m)] = (kind, m)
    encoders = {
        n: load_encoder(model_dir, args.softmax_impl, kind, m or 64)
        for n, (kind, m) in specs.items()
    }
    cfg = encoders["softmax"].config
    hidden, H = cfg.hidden_size, cfg.num_attention_heads
    res = {"lengths": lengths, "models": {}}
    for n, (kind, m) in specs.items():
        impl = encoders[n].config._attn_implementation
        res["models"][n] = {"kind": kind or "softmax", "m": m, "attn_implementation": impl}
    machine = machine_info(args)
    out(
        f"{NAME}: {'tiny random BERT' if args.tiny else model_dir}: {cfg.num_hidden_layers} "
        f"layers, width {hidden}, {H} heads of d_h = {hidden // H}; float32, eval, "
        f"inference_mode, batch 1, {args.threads} thread(s). Timed: the ENCODER STACK alone "
        f"(all {cfg.num_hidden_layers} transformer layers, attention + FFN, real weights) on "
        f"synthetic hidden states N(0, 1) of shape (1, L, {hidden}), bypassing the embedding "
        f"layer (its position embeddings stop at {cfg.max_position_embeddings}); "
        f"attention_mask=None. softmax = the model as loaded, transformers' "
        f"'{args.softmax_impl}' attention; the others: linearize(model, KIND, n_features=m, "
        f"seed=0) (softmaxfeat has 2 m features). Load average (1, 5, 15 min) at start: "
        f"{machine['load_average_1_5_15']}."
    )
    if args.softmax_impl == "sdpa":
        backend = sdpa_backend(H, hidden // H)
        res["sdpa_backend"] = backend
        out(
            f"torch's SDPA kernel here: {backend}"
            + (
                " (blocked: it never holds the L x L scores, so the softmax model's memory "
                "grows ~linearly too and only its time is quadratic; --softmax-impl eager "
                "materialises them, the 'scores' column below)"
                if backend == "FLASH_ATTENTION"
                else ""
            )
        )
    if args.note:
        out(f"note: {args.note}")
    res["sanity"] = sanity_checks(model_dir, args.softmax_impl, encoders["softmax"], out)
    runs = {n: stack_of(e) for n, e in encoders.items()}
    timing = time_lengths(runs, lengths, hidden, args, out)
    res.update(timing)
    res["slopes"] = {n: slopes(lengths, t) for n, t in timing["times"].items()}
    res["cpu_slopes"] = {n: slopes(lengths, t) for n, t in timing["cpu_times"].items()}
    out("\nlog-log slope of time vs L: fit over all L; local slopes between successive L")
    for clock in ("slopes", "cpu_slopes"):
        for n, s in res[clock].items():
            fit = "-" if s["fit"] is None else f"{s['fit']:.2f}"
            label = f"{n} ({'wall' if clock == 'slopes' else 'CPU'})"
            out(f"  {label:>30}: {fit:>5}   local " + " ".join(f"{x:.2f}" for x in s["local"]))
    if args.memory != "inprocess":
        del encoders, runs
        gc.collect()
    if args.memory != "none":
        mem_runs = runs if args.memory == "inprocess" else None
        mem = measure_memory(specs, lengths, model_dir, args, mem_runs, hidden, H, out)
        base = mem["peak_extra_MB"]["softmax"]
        mem["ratio"] = {
            n: [a / b if b > 0 else None for a, b in zip(v, base, strict=True)]
            for n, v in mem["peak_extra_MB"].items()
        }
        mem["slopes"] = {
            n: slopes(lengths, v) if min(v) > 0 else None for n, v in mem["peak_extra_MB"].items()
        }
        mem["method"] = (
            f"{args.memory}: after the model load, the input and a small warm-up call, the "
            "peak RSS VmHWM is reset (5 written to /proc/self/clear_refs); reported: VmHWM "
            "after one forward minus VmRSS before it (MB; allocator caching included). "
            "'ru_maxrss-lower-bound' marks runs without the reset: ru_maxrss after minus before "
            "(ru_maxrss also keeps exited threads' peaks, which the reset does not clear)."
        )
        res["memory"] = mem
        if "ru_maxrss-lower-bound" in mem["methods"]:
            out("  (no peak reset available here: memory figures are lower bounds)")
    res["scores_MB_per_layer"] = [H * L * L * 4 / 2**20 for L in lengths]
    res["wall_seconds"] = time.perf_counter() - t_start
    res["config"] = {k: v for k, v in vars(args).items() if k != "child_memory"}
    res["config"]["model_dir"] = "tiny" if args.tiny else str(model_dir)
    res["machine"] = machine
    res["machine"]["load_average_end"] = (
        list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    )
    res["note"] = args.note
    out(
        f"\nwall time {res['wall_seconds']:.0f} s; load average (1, 5, 15 min) at the end "
        f"{res['machine']['load_average_end']}"
    )
    return res


def main(argv=None) -> dict:
    args = parse(argv)
    if args.child_memory is not None:
        _child_main(json.loads(args.child_memory))
        return {}
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
        res = run(args, model_dir, out)
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{NAME}.json"
    path.write_text(json.dumps(res, indent=1, default=str))
    path.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {path} and its .txt", flush=True)
    return res


if __name__ == "__main__":
    main()
