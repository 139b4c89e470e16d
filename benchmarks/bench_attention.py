"""Linear (kernel) attention against SDPA, bidirectional and causal, every feature map.

Times the attention operation alone (issue #13's "linear attention vs SDPA"): head-major
queries, keys and values ``(B, H, L, d_h)`` in float32, batch 1, 4 heads, ``d_h = 64``, no
projections (they are the same for both and would only dilute the ratio), for

* ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` (``is_causal`` in the
  causal mode), the peer every ratio is taken against;
* every feature map of :func:`meanfield.attention.kernel_attention`: ``favor``, ``porf``,
  ``porf-softplus``, ``softmaxfeat`` (``2 m`` features), at each ``m``;
* ``kernel-favor``: FAVOR+ with particles from a short projected-Langevin run (Phase-A
  energy on synthetic data, :func:`learned_omega`): the cost must not depend on Omega;
* ``plain-favor`` (causal only): a plain chunked-cumsum causal FAVOR+ written the way a
  reviewer would (performer-pytorch stabilisers, masked in-chunk block, ``torch.cumsum`` of
  the per-chunk states; chunks of 64), the second peer of issue #13.

The machine is shared and timings are noisy: each repeat times every operation once, in
turn (interleaved), the ratio to SDPA is taken *within* the repeat, and the tables print the
median of those paired ratios as a **speed-up** ``t_SDPA / t`` (above 1: faster than SDPA),
plus the median SDPA time. For each (m, mode, operation) it reports the crossover (smallest L
from which the speed-up stays >= 1). Results go to ``benchmarks/results/bench_attention.json``
(and, from the command line, the printed tables to ``bench_attention.txt``), with the
machine, the thread count, the load average and the wall time.

    python benchmarks/bench_attention.py                   # m = 64, 256; L = 256 ... 4096
    python benchmarks/bench_attention.py --long            # ... up to L = 16384 (minutes)
    python benchmarks/bench_attention.py --device cuda --quick   # GPU check, ~1 minute

Two more sections (``--section``), each timing old and new code side by side in one run:

* ``guards`` (issue #23 item 4): bidirectional FAVOR+ through :func:`kernel_attention`
  against a plain few-line FAVOR+ (:func:`plain_favor`), and the previous implementation
  (:func:`legacy_bidirectional_favor`: three input passes for the finiteness check, the
  feature map's log-features, and a full-size max-shift with ``torch.where``), at
  ``L = 256 ... 8192``, ``m = 64, 128``; the table prints ``t / t_plain`` per L;
* ``scan`` (issues #20, #23 item 2): causal :func:`kernel_attention` with the prefix states
  by the per-chunk loop (``_SCAN = "loop"``, the CPU default, and the previous code path with
  its input checks) against the batched scans (``_SCAN = "batched"``: exclusive cumsum,
  log-depth level scan; the accelerator and ``torch.compile`` default), and causal SDPA.

    python benchmarks/bench_attention.py --section guards --max-len 8192
    python benchmarks/bench_attention.py --section scan --features 64 --max-len 8192
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import (
    BENCH_OUT_ENV,
    bench_out_default,
    device_name,
    output_dir,
    output_file,
)

PEER = "plain-favor"


def learned_omega(n_features: int, head_dim: int, seed: int = 0) -> np.ndarray:
    """Particles from a short projected-Langevin run on a Phase-A energy (synthetic data)."""
    import torch

    from meanfield.attention.features import orthogonal_omega
    from meanfield.domains import Ball
    from meanfield.dynamics.langevin import simulate
    from meanfield.energy import Energy, NormalisedAlignment, PairInteraction
    from meanfield.kernels import Riesz

    rng = np.random.default_rng(seed)
    y = np.where(rng.random(256) < 0.5, -1.0, 1.0)
    X = 0.3 * rng.standard_normal((256, head_dim)) + 0.2 * y[:, None] * np.eye(head_dim)[0]
    X = X / head_dim**0.25
    radius = 2.0 * np.sqrt(head_dim)
    energy = Energy(
        [
            NormalisedAlignment(X, y, feature="positive"),
            PairInteraction(Riesz(head_dim - 2.0, softening=0.5), lam=0.1),
        ],
        domain=Ball(head_dim, radius),
    )
    gen = torch.Generator().manual_seed(seed)
    omega0 = orthogonal_omega(n_features, head_dim, gen, dtype=torch.float64)
    ds = simulate(energy, omega0, eta=0.5, beta=1e4, n_steps=20, seed=seed, record_every=20)
    return ds["omega"].isel(time=-1).values


def plain_chunked_favor(q, k, v, omega, chunk: int = 64, eps: float = 1e-6):
    """Causal FAVOR+ as a reviewer writes it plainly (the peer; head-major, L % chunk == 0).

    Features ``exp(Omega x~ - |x~|^2/2 - stabiliser)`` with performer-pytorch's stabilisers
    (per-query max for queries, the global max over all keys -- future ones included -- for
    keys), the masked ``C x C`` block inside each chunk, and ``torch.cumsum`` over chunks of
    the per-chunk ``phi(K)^T V`` and ``phi(K)^T 1`` for the rest.
    """
    import torch

    d = q.shape[-1]
    s = d**-0.25
    om = omega.to(q)

    def feats(x, query):
        xs = x * s
        u = xs @ om.T - 0.5 * (xs * xs).sum(-1, keepdim=True)
        top = u.amax(-1, keepdim=True) if query else u.amax(dim=(-1, -2), keepdim=True)
        return torch.exp(u - top)

    qf, kf = feats(q, True), feats(k, False)
    b, h, L, m = qf.shape
    n = L // chunk
    qc, kc = qf.reshape(b, h, n, chunk, m), kf.reshape(b, h, n, chunk, m)
    vc = v.reshape(b, h, n, chunk, -1)
    kv = kc.transpose(-1, -2) @ vc
    ks = kc.sum(3)
    state, zs = kv.cumsum(2) - kv, ks.cumsum(2) - ks  # exclusive prefix over chunks
    blk = (qc @ kc.transpose(-1, -2)).tril()
    num = blk @ vc + qc @ state
    den = blk.sum(-1) + (qc @ zs[..., None])[..., 0]
    return (num / (den[..., None] + eps)).reshape(b, h, L, -1)


def plain_favor(q, k, v, omega, eps: float = 1e-6):
    """Bidirectional FAVOR+ in ten lines (the peer of the ``guards`` section; head-major).

    ``phi(x) = exp(Omega^T x~ - |x~|^2 / 2 - max) / sqrt(m)``, the max per query for queries
    and over all keys and features for keys (performer-pytorch), no checks, no masks.
    """
    import torch

    d, m = q.shape[-1], omega.shape[0]
    om = omega.to(q) * d**-0.25

    def feats(x, query):
        u = x @ om.T - 0.5 * d**-0.5 * (x * x).sum(-1, keepdim=True)
        top = u.amax(-1, keepdim=True) if query else u.amax(dim=(-1, -2), keepdim=True)
        return torch.exp(u - top) * m**-0.5

    qf, kf = feats(q, True), feats(k, False)
    return (qf @ (kf.transpose(-1, -2) @ v)) / (qf @ kf.sum(2)[..., None] + eps)


def legacy_bidirectional_favor(q, k, v, fm, eps: float = 1e-6):
    """The previous bidirectional path of :func:`kernel_attention` (before issue #23 item 4),
    kept here only to time it beside the new one: head-major ``q``, ``k``, ``v``."""
    import torch

    def finite_or_zero(x):
        return torch.where(torch.isfinite(x), x, torch.zeros_like(x))

    if q.device.type == "cpu":  # the input checks (CPU only): one sum per tensor
        for t in (q, k, v):
            assert bool(torch.isfinite(t.sum()))
    qa, ka = fm.transform(q.contiguous()), fm.transform(k.contiguous())
    M = ka.amax(dim=2, keepdim=True).detach()
    has_key = torch.isfinite(M)
    M0 = finite_or_zero(M)
    kf = torch.exp(ka - M0)
    qs = torch.where(has_key, qa + M0, torch.full_like(qa, float("-inf")))
    c = finite_or_zero(qs.amax(dim=-1, keepdim=True).detach())
    qf = torch.exp(qs - c)
    kv = kf.transpose(-1, -2) @ v
    return (qf @ kv) / (qf @ kf.sum(dim=2).unsqueeze(-1) + eps)


def load_previous(tree):
    """``kernel_attention`` of another checkout (``tree/meanfield``), imported as the package
    ``meanfield_previous`` so that both run in one process, side by side (``--previous``;
    e.g. ``git archive <commit> meanfield | tar -x -C /tmp/prev``).

    Returns ``op(q, k, v, fm, **kw)`` that calls it with that checkout's own feature map
    (same kind, same ``omega``): the causal path dispatches on the map's class, and a map
    of the other package would take its generic (slower) path.
    """
    import importlib
    import importlib.util
    import sys

    init = Path(tree) / "meanfield" / "__init__.py"
    if not init.is_file():
        raise SystemExit(f"--previous: no meanfield/__init__.py under {tree}")
    if "meanfield_previous" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "meanfield_previous", init, submodule_search_locations=[str(init.parent)]
        )
        mod = importlib.util.module_from_spec(spec)
        sys.modules["meanfield_previous"] = mod
        spec.loader.exec_module(mod)
    attn = importlib.import_module("meanfield_previous.attention.linear").kernel_attention
    make = importlib.import_module("meanfield_previous.attention.features").make_feature_map
    maps = {}

    def op(q, k, v, fm, **kw):
        key = id(fm)
        if key not in maps:
            own = make(fm.kind, fm.head_dim, fm.n_features, seed=0).to(fm.omega.device)
            own.omega.copy_(fm.omega)
            maps[key] = (fm, own)  # keeps fm alive, so the id stays its own
        return attn(q, k, v, maps[key][1], **kw)

    return op


def flop_ratio(name: str, m: int, L: int, causal: bool, chunk: int = 64, d: int = 64) -> float:
    """Multiply-adds of ours over SDPA's, per head (the arithmetic bound on the speed-up).

    Ours: features ``2 d m`` per token (``d m`` for each of q, k; softmaxfeat computes ``m``
    products and uses ``2 m`` features), state ``2 m' (d + 1)`` (``phi(K)^T [V, 1]`` and
    ``phi(Q) S``), causal in-chunk block ``C (m' + d + 1)``. SDPA: ``L^2 d`` causal (lower
    triangle of ``Q K^T`` and of ``P V``), ``2 L^2 d`` bidirectional.
    """
    if name == "softmax":
        return 1.0
    m_eff = 2 * m if name == "softmaxfeat" else m
    ours = 2 * d * m + 2 * m_eff * (d + 1) + (chunk * (m_eff + d + 1) if causal else 0)
    sdpa = L * d * (1 if causal else 2)
    return ours / sdpa


def _sync(device) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def build_ops(m: int, d: int, causal: bool, device, learned, chunk):
    """name -> callable(q, k, v) on head-major tensors: 'softmax' (SDPA) first, the peer last."""
    import torch.nn.functional as F

    from meanfield.attention.features import FEATURE_KINDS, make_feature_map
    from meanfield.attention.linear import kernel_attention

    ops = {"softmax": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)}
    maps = {kind: make_feature_map(kind, d, m, seed=0).to(device) for kind in FEATURE_KINDS}
    if learned is not None:
        fm = make_feature_map("favor", d, m, seed=0)
        fm.set_omega(learned)
        maps["kernel-favor"] = fm.to(device)
    for name, fm in maps.items():

        def op(q, k, v, fm=fm):
            t = (x.transpose(1, 2) for x in (q, k, v))  # views: (B, L, H, d) for the public API
            return kernel_attention(*t, fm, causal=causal, chunk_size=chunk)

        ops[name] = op
    if causal:
        om = maps["favor"].omega
        ops[PEER] = lambda q, k, v: plain_chunked_favor(q, k, v, om)
    return ops


def check_peer(device, d: int = 64) -> float:
    """The plain peer computes causal FAVOR+: max relative deviation from ours (float64)."""
    import torch

    from meanfield.attention.features import make_feature_map
    from meanfield.attention.linear import kernel_attention

    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 128, d, generator=g, dtype=torch.float64) for _ in "qkv")
    fm = make_feature_map("favor", d, 32, seed=0).double()
    ref = kernel_attention(*(x.transpose(1, 2) for x in (q, k, v)), fm, causal=True, eps=0.0)
    out = plain_chunked_favor(q, k, v, fm.omega.double(), eps=0.0)
    return float(((out - ref.transpose(1, 2)).abs().max() / ref.abs().max()).item())


def time_config(ops, L, H, d, device, repeats, gen, clock=time.perf_counter):
    """Interleaved repeats; returns per op the median time, the median paired speed-up
    ``t_SDPA / t`` and the best-of speed-up ``min t_SDPA / min t`` (robust to preemption)."""
    import torch

    q, k, v = (torch.randn(1, H, L, d, generator=gen).to(device) for _ in "qkv")
    raw = {name: [] for name in ops}
    with torch.inference_mode():
        for op in ops.values():  # warm-up
            op(q, k, v)
        _sync(device)
        for _ in range(repeats):
            for name, op in ops.items():
                t0 = clock()
                op(q, k, v)
                _sync(device)
                raw[name].append(clock() - t0)
    base = np.asarray(raw["softmax"])
    times = {name: float(np.median(r)) for name, r in raw.items()}
    speedup = {name: float(np.median(base / np.asarray(r))) for name, r in raw.items()}
    best = {name: float(base.min() / min(r)) for name, r in raw.items()}
    return times, speedup, best


def crossover(lengths, linear, softmax):
    """Smallest L from which ``linear < softmax`` at every larger L measured (None: never)."""
    faster = [a < b for a, b in zip(linear, softmax, strict=True)]
    for i in range(len(lengths)):
        if all(faster[i:]):
            return int(lengths[i])
    return None


def fit_slope(lengths, times) -> float:
    """Least-squares slope of log(time) against log(L)."""
    return float(np.polyfit(np.log(lengths), np.log(times), 1)[0])


#: The flags, declared once: their checks, help and docs come from these Params (the device,
#: the folders and files are checked by their own argparse types).
FLAGS = Contract(
    "benchmarks/bench_attention.py",
    [
        Param("features", "int", "feature counts m", low=1, sequence=True, default=(64, 256)),
        Param("min_len", "int", "smallest L", low=1, default=128),
        Param("embed_dim", "int", "E; d_h = E / heads", low=1, default=256),
        Param("heads", "int", "heads (dividing --embed-dim)", low=1, default=4),
        Param("max_len", "int", "largest L (>= --min-len)", low=1, default=4096),
        Param("long", "flag", "extend to L = 16384 (minutes on CPU)", default=False),
        Param("quick", "flag", "m = 64, L = 256/1024/4096, 3 repeats", default=False),
        Param("repeats", "int", "timed repeats (halved above 4096)", low=1, default=5),
        Param("threads", "int", "CPU threads", low=1, default=2),
        Param("chunk_size", "int", "causal chunk length", low=1, default=64),
        Param("clock", "choice", "wall time, or this process's CPU time (CPU only: with "
              "--threads 1 it counts the arithmetic alone, not the waits of a loaded, shared "
              "machine)", choices=("wall", "cpu"), default="wall"),
        Param("learned", "flag", "time the kernel-favor layer", default=True),
        Param("dtype", "choice", "guards/scan: input dtype (bfloat16 on a GPU: SDPA takes its "
              "flash kernel; kernel attention still accumulates in float32)",
              choices=("float32", "bfloat16", "float16"), default="float32"),
        Param("section", "choice", "main: every map against SDPA; guards: bidirectional "
              "FAVOR+ against a plain FAVOR+ and the previous code; scan: causal loop vs "
              "batched prefix states", choices=("main", "guards", "scan"), default="main"),
    ],
)  # fmt: skip


def parse(argv):
    """The flags, checked before torch loads: a bad value ends with one line and exit 2."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    FLAGS.add_arguments(ap)
    ap.add_argument("--device", type=device_name, default="cpu", help="cpu or cuda (default cpu)")
    ap.add_argument(
        "--previous",
        default=None,
        metavar="TREE",
        help="guards/scan: also time kernel_attention of the checkout TREE (its meanfield/)",
    )
    ap.add_argument(
        "--out",
        type=output_dir,
        default=None,
        metavar="FOLDER",
        help="folder of the results bench_attention[_SECTION][_DEVICE][_quick].json (+ .txt, "
        f".md), created if missing [default from the command line: ${BENCH_OUT_ENV} if set, "
        "else ~/.cache/meanfield/bench-results, outside the repository; from Python: no "
        "files]; --out benchmarks/results refreshes the committed ones",
    )
    ap.add_argument(
        "--json", type=output_file, default=None, help="output JSON file (instead of --out)"
    )
    args = FLAGS.parse_args(ap, argv)
    args.ms = args.features
    if args.embed_dim % args.heads:
        ap.error(
            f"argument --embed-dim: must be divisible by --heads, got {args.embed_dim} and "
            f"{args.heads}"
        )
    if args.long:
        args.max_len = max(args.max_len, 16384)
    if args.max_len < args.min_len:
        ap.error(f"argument --max-len: must be >= --min-len ({args.min_len}), got {args.max_len}")
    if args.quick:
        args.ms, args.repeats = args.ms[:1], min(args.repeats, 3)
    if args.clock == "cpu" and args.device != "cpu":
        ap.error("argument --clock: cpu times the CPU only; use --clock wall with --device cuda")
    if args.previous is not None and not (Path(args.previous) / "meanfield/__init__.py").is_file():
        ap.error(f"argument --previous: no meanfield/__init__.py under {args.previous!r}")
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            ap.error(f"argument --device: {args.device}: no CUDA device is available to torch")
    args.features = ",".join(map(str, args.features))  # as typed (run_guards reads it)
    return args


def lengths_of(args):
    if args.quick:
        return [L for L in (256, 1024, 4096) if args.min_len <= L <= args.max_len] or [256]
    out, L = [], args.min_len
    while L <= args.max_len:
        out.append(L)
        L *= 2
    return out


def _paired(ops, args, L, H, d, gen, reps, raw_out=None):
    """Interleaved repeats of ``ops`` on one (q, k, v); median time and median paired ratio
    ``t / t_first`` per op (the first op is the reference); ``raw_out``: a dict to receive
    every op's list of times. Inputs in ``args.dtype`` (float32 unless given)."""
    import torch

    device = torch.device(args.device)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    dtype = getattr(torch, getattr(args, "dtype", "float32"))
    q, k, v = (torch.randn(1, H, L, d, generator=gen).to(device, dtype) for _ in "qkv")
    raw = {name: [] for name in ops}
    with torch.inference_mode():
        for op in ops.values():
            op(q, k, v)
        _sync(device)
        for _ in range(reps):
            for name, op in ops.items():
                t0 = clock()
                op(q, k, v)
                _sync(device)
                raw[name].append(clock() - t0)
    if raw_out is not None:
        raw_out.update(raw)
    first = np.asarray(next(iter(raw.values())))
    times = {n: float(np.median(r)) for n, r in raw.items()}
    ratio = {n: float(np.median(np.asarray(r) / first)) for n, r in raw.items()}
    return times, ratio


def run_guards(args, out=print) -> dict:
    """Section ``guards``: bidirectional FAVOR+, ours and the previous code over plain."""
    import torch

    from meanfield.attention.features import make_feature_map
    from meanfield.attention.linear import kernel_attention

    torch.set_num_threads(args.threads)
    H, d = args.heads, args.embed_dim // args.heads
    lengths = [L for L in (256, 512, 1024, 2048, 4096, 8192) if L <= max(args.max_len, 256)]
    ms = [int(x) for x in args.features.split(",")] if args.features != "64,256" else [64, 128]
    gen = torch.Generator().manual_seed(0)
    prev = load_previous(args.previous) if args.previous else None
    out(
        f"guards: bidirectional FAVOR+, device={args.device} threads={args.threads} B=1 H={H} "
        f"d_h={d} {args.dtype}; t / t_plain (median of paired ratios; < 1: faster than the plain "
        f"FAVOR+); previous: the old path kept in this script"
        + (f"; tree: kernel_attention of {args.previous}" if prev is not None else "")
    )
    res = {"lengths": lengths, "tables": {}}
    for m in ms:
        fm = make_feature_map("favor", d, m, seed=0).to(args.device)
        ops = {
            "plain": lambda q, k, v, fm=fm: plain_favor(q, k, v, fm.omega),
            "ours": lambda q, k, v, fm=fm: kernel_attention(
                *(x.transpose(1, 2) for x in (q, k, v)), fm
            ),
            "previous": lambda q, k, v, fm=fm: legacy_bidirectional_favor(q, k, v, fm),
        }
        if prev is not None:
            ops["tree"] = lambda q, k, v, fm=fm: prev(*(x.transpose(1, 2) for x in (q, k, v)), fm)
        tb = {n: [] for n in ops}
        tt = {n: [] for n in ops}
        extra = f" {'tree':>8}" if prev is not None else ""
        out(f"\nm={m}\n{'L':>6} {'plain s':>9} {'ours':>8} {'previous':>9}{extra}")
        for L in lengths:
            reps = args.repeats if L <= 4096 else max(3, args.repeats // 2)
            times, ratio = _paired(ops, args, L, H, d, gen, reps)
            for n in ops:
                tb[n].append(ratio[n])
                tt[n].append(times[n])
            extra = f" {ratio['tree']:8.2f}" if prev is not None else ""
            row = f"{L:6d} {times['plain']:9.5f} {ratio['ours']:8.2f} {ratio['previous']:9.2f}"
            out(row + extra)
        res["tables"][f"m={m}"] = {"ratio_to_plain": tb, "times": tt}
    return res


def run_scan(args, out=print) -> dict:
    """Section ``scan``: causal prefix states by the loop and batched, and causal SDPA."""
    import torch
    import torch.nn.functional as F

    import meanfield.attention.causal as causal_mod
    from meanfield.attention.features import make_feature_map
    from meanfield.attention.linear import _check_finite_input, _kernel_core, kernel_attention

    torch.set_num_threads(args.threads)
    H, d = args.heads, args.embed_dim // args.heads
    lengths = lengths_of(args)
    gen = torch.Generator().manual_seed(0)
    res = {"lengths": lengths, "tables": {}}
    prev = load_previous(args.previous) if args.previous else None

    def with_scan(mode, fm, repair="auto"):
        def op(q, k, v):
            saved = causal_mod._SCAN, causal_mod._REPAIR
            causal_mod._SCAN, causal_mod._REPAIR = mode, repair
            try:
                t = (x.transpose(1, 2) for x in (q, k, v))
                return kernel_attention(*t, fm, causal=True, chunk_size=args.chunk_size)
            finally:
                causal_mod._SCAN, causal_mod._REPAIR = saved

        return op

    def previous(fm):  # the old code path: three input checks, the loop, no result check
        def op(q, k, v):
            saved, causal_mod._SCAN = causal_mod._SCAN, "loop"
            try:
                for name, t in (("q", q), ("k", k), ("v", v)):
                    _check_finite_input(name, t)
                return _kernel_core(q, k, v, fm, None, True, 1e-6, args.chunk_size)
            finally:
                causal_mod._SCAN = saved

        return op

    out(
        f"scan: causal, device={args.device} threads={args.threads} B=1 H={H} d_h={d} "
        f"{args.dtype} chunk={args.chunk_size}; t / t_loop (median of paired ratios), loop = "
        f"the per-chunk loop (the CPU default); previous: its old input checks; batched: the "
        f"loop-free scans, the underflow repair reading its flag (a host read); device: "
        f"batched with the device-side repair (an accelerator's default); sdpa = causal SDPA"
        + (f"; tree: kernel_attention of {args.previous}" if prev is not None else "")
    )
    for m in args.ms:
        for kind in ("favor", "porf-softplus"):
            fm = make_feature_map(kind, d, m, seed=0).to(args.device)
            ops = {
                "loop": with_scan("loop", fm),
                "previous": previous(fm),
                "batched": with_scan("batched", fm, "cpu"),  # the repair reads its flag
                "device": with_scan("batched", fm, "device"),
                "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            }
            if prev is not None:
                ops["tree"] = lambda q, k, v, fm=fm: prev(
                    *(x.transpose(1, 2) for x in (q, k, v)), fm, causal=True,
                    chunk_size=args.chunk_size,
                )  # fmt: skip
            key = f"m={m} {kind}"
            tb = {n: [] for n in ops}
            tt = {n: [] for n in ops}
            extra = f" {'tree':>8}" if prev is not None else ""
            out(
                f"\n{key}\n{'L':>6} {'loop s':>9} {'previous':>9} {'batched':>8} "
                f"{'device':>8} {'sdpa':>8}" + extra
            )
            to_sdpa = {n: [] for n in ("loop", "batched", "device")}
            for L in lengths:
                reps = args.repeats if L <= 4096 else max(3, args.repeats // 2)
                raw = {}
                times, ratio = _paired(ops, args, L, H, d, gen, reps, raw)
                for n in ops:
                    tb[n].append(ratio[n])
                    tt[n].append(times[n])
                base = np.asarray(raw["sdpa"])
                for n in to_sdpa:  # paired t / t_SDPA
                    to_sdpa[n].append(float(np.median(np.asarray(raw[n]) / base)))
                out(
                    f"{L:6d} {times['loop']:9.5f} {ratio['previous']:9.2f} "
                    f"{ratio['batched']:8.2f} {ratio['device']:8.2f} {ratio['sdpa']:8.2f}"
                    + (f" {ratio['tree']:8.2f}" if prev is not None else "")
                )
            ones = [1.0] * len(lengths)
            cross = {n: crossover(lengths, r, ones) for n, r in to_sdpa.items()}
            out(
                "  t / t_SDPA: "
                + "; ".join(f"{n} " + " ".join(f"{x:.2f}" for x in r) for n, r in to_sdpa.items())
            )
            out(f"  crossover vs causal SDPA (faster from there on): {cross}")
            res["tables"][key] = {
                "ratio_to_loop": tb,
                "times": tt,
                "ratio_to_sdpa": to_sdpa,
                "crossover_sdpa": cross,
            }
    return res


def run(args, out=print) -> dict:
    """Time every configuration; the result's ``times`` / ``ratio_to_sdpa`` / ``crossover``
    / ``slopes`` are those of the first m (the peer's numbers are under ``peer``), and
    ``tables`` holds every m."""
    import torch

    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    lengths = lengths_of(args)
    H, d = args.heads, args.embed_dim // args.heads
    gen = torch.Generator().manual_seed(0)
    deviation = check_peer(torch.device("cpu"), d)
    out(
        f"device={device} threads={args.threads} clock={args.clock} B=1 H={H} d_h={d} "
        f"float32, chunk="
        f"{args.chunk_size}, attention alone (no projections). Speed-up = t_SDPA / t, median "
        f"over interleaved repeats of the ratio within a repeat (> 1: faster than SDPA); in "
        f"brackets the best-of ratio min t_SDPA / min t. Peer {PEER} vs ours: max relative "
        f"deviation {deviation:.1e} (float64)"
    )
    res = {"lengths": lengths, "tables": {}, "peer_deviation": deviation}
    for m in args.ms:
        learned = learned_omega(m, d) if args.learned else None
        for mode in ("bidirectional", "causal"):
            key = f"m={m} {mode}"
            res["tables"][key] = _run_table(args, m, d, H, mode, learned, lengths, gen, out)
    first = {mo: res["tables"][f"m={args.ms[0]} {mo}"] for mo in ("bidirectional", "causal")}

    def without_peer(field):
        return {mo: {n: x for n, x in tb[field].items() if n != PEER} for mo, tb in first.items()}

    res["times"] = without_peer("times")
    res["ratio_to_sdpa"] = {
        mo: {n: [1 / x for x in sp] for n, sp in per.items()}
        for mo, per in without_peer("speedup").items()
    }
    res["crossover"] = without_peer("crossover")
    res["slopes"] = without_peer("slopes")
    res["peer"] = {f: first["causal"][f][PEER] for f in ("times", "speedup", "speedup_best")}
    res["wall_seconds"] = time.perf_counter() - t_start
    res["config"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    res["machine"] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "threads": args.threads,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "load_average_1_5_15": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    load = res["machine"]["load_average_1_5_15"]
    out(f"\nwall time {res['wall_seconds']:.0f} s; load average (1, 5, 15 min) {load}")
    return res


def _run_table(args, m, d, H, mode, learned, lengths, gen, out) -> dict:
    """One (m, mode): times, speed-ups, crossovers, slopes and multiply-add ratios per L."""
    import torch

    causal = mode == "causal"
    ops = build_ops(m, d, causal, torch.device(args.device), learned, args.chunk_size)
    names = [n for n in ops if n != "softmax"]
    tb = {
        "times": {n: [] for n in ops},
        "speedup": {n: [] for n in names},
        "speedup_best": {n: [] for n in names},
    }
    cols = " ".join(f"{n:>16}" for n in names)
    out(f"\nm={m} {mode}\n{'L':>6} {'SDPA s':>9} {cols}")
    for L in lengths:
        reps = args.repeats if L <= 4096 else max(2, args.repeats // 2)
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        times, speed, best = time_config(ops, L, H, d, args.device, reps, gen, clock)
        for n in ops:
            tb["times"][n].append(times[n])
        for n in names:
            tb["speedup"][n].append(speed[n])
            tb["speedup_best"][n].append(best[n])
        row = " ".join(f"{speed[n]:8.2f} ({best[n]:5.2f})" for n in names)
        out(f"{L:6d} {times['softmax']:9.4f} {row}")
    ones = [1.0] * len(lengths)
    tb["crossover"] = {
        n: crossover(lengths, [1 / x for x in tb["speedup"][n]], ones) for n in names
    }
    tb["slopes"] = {
        n: fit_slope(lengths, t) if len(lengths) > 1 else None for n, t in tb["times"].items()
    }
    tb["flop_ratio"] = {
        n: [flop_ratio(n, m, L, causal, args.chunk_size, d) for L in lengths]
        for n in ("favor", "porf-softplus", "softmaxfeat")
    }
    fr = "; ".join(f"{n} " + " ".join(f"{r:.2f}" for r in v) for n, v in tb["flop_ratio"].items())
    out(f"  multiply-adds ours / SDPA at each L: {fr}")
    cross = ", ".join(f"{n} {c}" for n, c in tb["crossover"].items())
    out(f"  crossover L (faster than SDPA from there on, medians): {cross}")
    return tb


def markdown(res) -> str:
    """Speed-up tables (median paired t_SDPA / t) per (m, mode), with the multiply-add ratio."""
    lengths = res["lengths"]
    cfg, mach = res["config"], res["machine"]
    lines = [
        f"Speed-up t_SDPA / t (median of paired ratios), {cfg['device']}, {cfg['threads']} "
        f"thread(s), clock {cfg.get('clock', 'wall')}, B = 1, H = {cfg['heads']}, d_h = "
        f"{cfg['embed_dim'] // cfg['heads']}, float32, chunk {cfg['chunk_size']}; load average "
        f"{mach['load_average_1_5_15']}; wall time {res['wall_seconds']:.0f} s.",
    ]
    for key, tb in res["tables"].items():
        lines += ["", f"**{key}**", "", "| L | " + " | ".join(str(L) for L in lengths) + " |"]
        lines.append("|---" * (len(lengths) + 1) + "|")
        for n, sp in tb["speedup"].items():
            lines.append(f"| {n} | " + " | ".join(f"{x:.2f}" for x in sp) + " |")
        for n in ("favor", "softmaxfeat"):
            fr = " | ".join(f"{x:.2f}" for x in tb["flop_ratio"][n])
            lines.append(f"| multiply-adds {n} / SDPA | {fr} |")
    return "\n".join(lines) + "\n"


def _result_path(args, argv, name: str):
    """--json, else --out / name, else (from the command line) the default folder / name;
    None from Python without either (no files)."""
    if args.json is not None:
        return args.json
    if args.out is not None:
        return args.out / name
    return bench_out_default() / name if argv is None else None


def main(argv=None) -> dict:
    args = parse(argv)
    lines = []

    def out(s):
        print(s, flush=True)
        lines.append(s)

    if args.section != "main":
        t0 = time.perf_counter()
        res = (run_guards if args.section == "guards" else run_scan)(args, out)
        res["wall_seconds"] = time.perf_counter() - t0
        res["config"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        res["load_average_1_5_15"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        out(f"\nwall time {res['wall_seconds']:.0f} s; load average {res['load_average_1_5_15']}")
        suffix = "" if args.device == "cpu" else "_" + args.device.split(":")[0]
        path = _result_path(args, argv, f"bench_attention_{args.section}{suffix}.json")
        if path:
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(res, indent=1))
            path.with_suffix(".txt").write_text("\n".join(lines) + "\n")
            out(f"wrote {path} and its .txt")
        return res
    res = run(args, out)
    suffix = "" if args.device == "cpu" else "_" + args.device.split(":")[0]
    suffix += "_quick" if args.quick else ""
    path = _result_path(args, argv, f"bench_attention{suffix}.json")
    if path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res, indent=1))
        path.with_suffix(".txt").write_text("\n".join(lines) + "\n")
        path.with_suffix(".md").write_text(markdown(res))
        out(f"wrote {path} and its .txt and .md")
    return res


if __name__ == "__main__":
    main()
