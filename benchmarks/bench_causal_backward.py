"""Causal kernel attention, forward + backward: time and memory against L, beside its peers.

Times one training step of the attention operation alone (forward, then backward of
``sum(out * w)`` for a fixed random ``w``; float32, batch 1, 4 heads, ``d_h = 64``, no
projections, FAVOR+ features with ``m`` random features, chunks of 64) for

* ``causal``: :func:`meanfield.attention.linear.kernel_attention` with ``causal=True``;
* ``bidir``: the same with ``causal=False`` (bidirectional FAVOR+ of the package);
* ``plain-bidir``: a plain ten-line bidirectional FAVOR+ (``plain_favor`` of
  ``benchmarks/bench_attention.py``), the reference speed a causal form would like to reach;
* ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention(..., is_causal=True)``.

The machine is shared and noisy: each repeat times every operation once, in turn
(interleaved), and the tables print medians over the repeats, of the wall time and of the
process CPU time (less sensitive to preemption; with one thread it is the work done), the
growth ``t(L) / t(L_prev)`` from each L to the next (4 for a linear cost at 4x the length,
16 for a quadratic one), and the ratio to causal SDPA.

Memory (skipped with ``--no-memory``): each (operation, L, m) in a fresh process, with
glibc's mmap threshold fixed at 64 KiB (``MALLOC_MMAP_THRESHOLD_``) so that a freed tensor
leaves the resident set; after the inputs exist the peak resident set (``VmHWM``) is reset
(``/proc/self/clear_refs``) and the step runs: ``retained`` is the resident growth after the
forward with its graph alive (output included; what autograd keeps), ``peak`` the largest
growth during forward + backward (the input gradients, ``3 x`` an input, included for every
operation).

    python benchmarks/bench_causal_backward.py                       # L = 1024, 4096, 16384
    python benchmarks/bench_causal_backward.py --lengths 1024,4096 --repeats 3 --no-memory
    python benchmarks/bench_causal_backward.py --ops causal,previous,sdpa --features 128

Results go to ``<out>/bench_causal_backward.json`` (``--out``, default outside the
repository: :func:`meanfield.workbench._scripts.bench_out_default`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out

OPS = ("causal", "bidir", "plain-bidir", "sdpa")
#: also timed on request: ``previous``, the causal code before the streamed path and the
#: reverse-scan backward (the per-chunk loop recorded by autograd; :func:`previous_code`).
EXTRA_OPS = ("previous",)
HEAD_DIM = 64


@contextlib.contextmanager
def previous_code():
    """Causal attention as it was before the linear backward: no streamed path, and the
    per-chunk loop of the prefix states recorded by autograd (whose backward zero-fills a
    full-size gradient for every chunk it reads)."""
    import torch

    import meanfield.attention.causal as causal

    def recorded_loop(kv, decay):
        s = torch.zeros_like(kv[:, 0])
        out = [s]
        for i in range(1, kv.shape[1]):
            s = s + kv[:, i - 1] if decay is None else (s + kv[:, i - 1]) * decay[:, i]
            out.append(s)
        return torch.stack(out, dim=1)

    saved = causal._streamed, causal._PrefixScan.apply
    causal._streamed = lambda *args: False
    causal._PrefixScan.apply = recorded_loop
    try:
        yield
    finally:
        causal._streamed, causal._PrefixScan.apply = saved


def _plain_favor():
    """``plain_favor`` of ``bench_attention.py`` (imported by path: benchmarks/ is no package)."""
    import importlib.util

    path = Path(__file__).resolve().parent / "bench_attention.py"
    spec = importlib.util.spec_from_file_location("bench_attention", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.plain_favor


def make_step(name: str, L: int, m: int, heads: int, seed: int = 0):
    """A closure running one forward + backward of operation ``name`` on fresh leaves, and
    a closure running the forward only (returning its output, graph alive)."""
    import torch
    import torch.nn.functional as F

    from meanfield.attention.features import make_feature_map
    from meanfield.attention.linear import kernel_attention

    g = torch.Generator().manual_seed(seed)
    head_major = name in ("plain-bidir", "sdpa")
    shape = (1, heads, L, HEAD_DIM) if head_major else (1, L, heads, HEAD_DIM)
    q, k, v, w = (torch.randn(shape, generator=g) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_()
    fm = make_feature_map("favor", HEAD_DIM, m, seed=seed)
    if name == "causal":

        def fwd():
            return kernel_attention(q, k, v, fm, causal=True, chunk_size=64)
    elif name == "previous":

        def fwd():
            with previous_code():
                return kernel_attention(q, k, v, fm, causal=True, chunk_size=64)
    elif name == "bidir":

        def fwd():
            return kernel_attention(q, k, v, fm, causal=False)
    elif name == "plain-bidir":
        plain, omega = _plain_favor(), fm.omega.float()

        def fwd():
            return plain(q, k, v, omega)
    else:

        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def step():
        for t in (q, k, v):
            t.grad = None
        (fwd() * w).sum().backward()

    return step, fwd


def time_lengths(lengths, m, heads, repeats, ops=OPS):
    """Interleaved repeats at each L: per op the medians of wall and CPU seconds."""
    rows = []
    for L in lengths:
        steps = {name: make_step(name, L, m, heads)[0] for name in ops}
        wall = {n: [] for n in ops}
        cpu = {n: [] for n in ops}
        for step in steps.values():  # warm-up
            step()
        for _ in range(repeats):
            for name, step in steps.items():
                w0, c0 = time.perf_counter(), time.process_time()
                step()
                cpu[name].append(time.process_time() - c0)
                wall[name].append(time.perf_counter() - w0)
        rows.append(
            {
                "L": L,
                "m": m,
                "wall_s": {n: float(np.median(wall[n])) for n in ops},
                "cpu_s": {n: float(np.median(cpu[n])) for n in ops},
                "wall_raw": wall,
                "cpu_raw": cpu,
            }
        )
        del steps
    return rows


_MEMORY_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from bench_causal_backward import make_step

def rss_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

name, L, m, heads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
small, _ = make_step(name, 256, m, heads, seed=1)
small()  # warm the allocator and the lazy imports
step, fwd = make_step(name, L, m, heads)
open("/proc/self/clear_refs", "w").write("5")  # VmHWM := current resident set
base = rss_kib("VmRSS")
out = fwd()
retained = rss_kib("VmRSS") - base
out.sum().backward()
del out
print(retained, rss_kib("VmHWM") - base)
"""


def memory_mib(name, L, m, heads):
    """(retained, peak) resident growth in MiB of one forward + backward (module notes)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536"}
    here = str(Path(__file__).resolve().parent)
    res = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD, here, name, str(L), str(m), str(heads)],
        capture_output=True, text=True, timeout=600, check=True, env=env,
    )  # fmt: skip
    retained, peak = (int(x) / 1024 for x in res.stdout.split()[-2:])
    return retained, peak


def table(rows, key, ops, out=print):
    """Median seconds, the growth from each L to the next, the ratio to SDPA."""
    out(f"  {key} (median s)".ljust(24) + "".join(f"{n:>13}" for n in ops))
    for r in rows:
        out(f"  L = {r['L']}".ljust(24) + "".join(f"{r[key][n]:13.3f}" for n in ops))
    for prev, r in zip(rows[:-1], rows[1:], strict=True):
        growth = "".join(f"{r[key][n] / prev[key][n]:13.2f}" for n in ops)
        out(f"  t({r['L']})/t({prev['L']})".ljust(24) + growth)
    if "sdpa" in ops:
        for r in rows:
            ratio = "".join(f"{r[key][n] / r[key]['sdpa']:13.2f}" for n in ops)
            out(f"  t/t_SDPA at {r['L']}".ljust(24) + ratio)


#: The flags, declared once: their checks, help and docs come from these Params.
FLAGS = Contract(
    "benchmarks/bench_causal_backward.py",
    [
        Param("lengths", "int", "sequence lengths L", low=1, sequence=True,
              default=(1024, 4096, 16384)),
        Param("features", "int", "feature counts m", low=1, sequence=True, default=(128, 256)),
        Param("heads", "int", "attention heads", low=1, default=4),
        Param("repeats", "int", "timed repeats", low=1, default=5),
        Param("threads", "int", "torch threads", low=1, default=1),
        Param("ops", "choice", "operations to time (previous: the former code path)",
              choices=OPS + EXTRA_OPS, sequence=True, default=OPS),
        Param("memory", "flag", "measure the peak memory (in child processes)", default=True),
    ],
)  # fmt: skip


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    FLAGS.add_arguments(ap)
    add_bench_out(ap, "bench_causal_backward.json")
    return FLAGS.parse_args(ap, argv)


def main(argv=None) -> dict:
    args = parse(argv)
    import torch

    torch.set_num_threads(args.threads)
    lengths, ops = sorted(args.lengths), list(args.ops)
    load = os.getloadavg()
    print(
        f"causal forward+backward: B=1 H={args.heads} d_h={HEAD_DIM} float32, FAVOR+, C=64, "
        f"threads={args.threads}, {args.repeats} interleaved repeats (medians), "
        f"load average {load[0]:.1f} on {os.cpu_count()} cores, torch {torch.__version__}"
    )
    result = {
        "meta": {
            "machine": platform.node(),
            "cpu_count": os.cpu_count(),
            "threads": args.threads,
            "torch": torch.__version__,
            "load_before": load,
            "repeats": args.repeats,
            "heads": args.heads,
            "head_dim": HEAD_DIM,
        },
        "rows": [],
        "memory": [],
    }
    t0 = time.perf_counter()
    for m in args.features:
        rows = time_lengths(lengths, m, args.heads, args.repeats, ops)
        result["rows"] += rows
        print(f"m = {m}")
        table(rows, "wall_s", ops)
        table(rows, "cpu_s", ops)
        if args.memory:
            print("  memory (MiB, retained after forward / peak over forward+backward)")
            for L in lengths:
                cells = []
                for name in ops:
                    ret, peak = memory_mib(name, L, m, args.heads)
                    result["memory"].append(
                        {"op": name, "L": L, "m": m, "retained_MiB": ret, "peak_MiB": peak}
                    )
                    cells.append(f"{ret:6.0f}/{peak:<6.0f}")
                print(f"  L = {L}".ljust(24) + "".join(f"{c:>13}" for c in cells))
    result["meta"]["wall_s"] = time.perf_counter() - t0
    result["meta"]["load_after"] = os.getloadavg()
    path = Path(args.out) / "bench_causal_backward.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
