"""Inference time of attention against sequence length: SDPA vs linear attention, both modes.

Times one forward pass (eval mode, no autograd, batch 1) of a whole
:class:`meanfield.attention.KernelAttention` layer -- input projections, attention, output
projection -- in the **bidirectional** and the **causal** (``is_causal=True``) form, for

* ``softmax``: exact attention, ``torch.nn.functional.scaled_dot_product_attention``;
* every feature map: ``favor``, ``porf``, ``porf-softplus``, ``softmaxfeat``;
* ``kernel-favor``: FAVOR+ with learned particles installed by ``set_omega`` (a short run of
  the package's projected Langevin on a Phase-A energy built from synthetic representations;
  the cost must not depend on the values of Omega, and this checks that it does not, also in
  the causal form, whose exact fallback depends on the data).

The machine is shared and timings are noisy, so each repeat times every layer once, in turn
(interleaved), and the ratio to SDPA is taken *within* a repeat; the tables print the median
time of each layer and the median of those paired ratios. For each mode and layer it prints
the smallest L from which the layer stays faster than SDPA (the crossover) and the speed-up at
the largest L, and writes everything to a JSON file.

    python benchmarks/bench_attention.py                        # 128 ... 16384, a few minutes
    python benchmarks/bench_attention.py --max-len 2048 --repeats 3   # quick run
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from meanfield.attention import KernelAttention
from meanfield.attention.features import FEATURE_KINDS

DEFAULT_JSON = Path(__file__).parent / "results" / "bench_attention.json"


def learned_omega(n_features: int, head_dim: int, seed: int = 0) -> np.ndarray:
    """Particles from a short projected-Langevin run on a Phase-A energy (synthetic data)."""
    from meanfield.attention.features import orthogonal_omega
    from meanfield.domains import Ball
    from meanfield.energy import Energy, NormalisedAlignment, PairInteraction
    from meanfield.kernels import Riesz
    from meanfield.particles import simulate

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


def time_once(layer, x, causal: bool) -> float:
    t0 = time.perf_counter()
    layer(x, x, x, is_causal=causal)
    return time.perf_counter() - t0


def fit_slope(lengths, times) -> float:
    """Least-squares slope of log(time) against log(L)."""
    return float(np.polyfit(np.log(lengths), np.log(times), 1)[0])


def crossover(lengths, linear, softmax):
    """Smallest L from which linear attention is faster than softmax at every larger L."""
    faster = [lin < sm for lin, sm in zip(linear, softmax, strict=True)]
    for i in range(len(lengths)):
        if all(faster[i:]):
            return int(lengths[i])
    return None


def build_layers(E: int, H: int, m: int, chunk: int, learned: bool) -> dict:
    layers = {"softmax": KernelAttention(E, H, feature="softmax", seed=0)}
    for kind in FEATURE_KINDS:
        layers[kind] = KernelAttention(E, H, feature=kind, n_features=m, seed=0, chunk_size=chunk)
    if learned:
        layer = KernelAttention(E, H, feature="favor", n_features=m, seed=0, chunk_size=chunk)
        layer.load_state_dict(layers["favor"].state_dict())
        layer.feature_map.set_omega(learned_omega(m, E // H))
        layers["kernel-favor"] = layer
    return {k: v.eval() for k, v in layers.items()}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-len", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=16384)
    ap.add_argument("--embed-dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--features", type=int, default=128, help="random features m per head")
    ap.add_argument("--chunk-size", type=int, default=64, help="causal chunk length")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats (L <= 4096)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-learned", action="store_true", help="skip the learned-Omega layer")
    ap.add_argument(
        "--json",
        default=str(DEFAULT_JSON) if argv is None else None,
        help=f"where to write the numbers (command line default: {DEFAULT_JSON.name} in "
        "benchmarks/results; calls from Python write only when given)",
    )
    args = ap.parse_args(argv)
    for name in ("min_len", "max_len", "embed_dim", "heads", "features", "repeats", "threads"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1")
    if args.chunk_size < 1:
        raise SystemExit("--chunk-size must be >= 1")
    if args.max_len < args.min_len:
        raise SystemExit("--max-len must be >= --min-len")
    if args.embed_dim % args.heads:
        raise SystemExit("--embed-dim must be divisible by --heads")
    torch.set_num_threads(args.threads)
    lengths = []
    L = args.min_len
    while L <= args.max_len:
        lengths.append(L)
        L *= 2
    E, H, m = args.embed_dim, args.heads, args.features
    layers = build_layers(E, H, m, args.chunk_size, not args.no_learned)
    names = list(layers)
    modes = ("bidirectional", "causal")
    times = {mode: {k: [] for k in names} for mode in modes}
    ratios = {mode: {k: [] for k in names if k != "softmax"} for mode in modes}
    print(
        f"embed_dim={E} heads={H} d_h={E // H} m={m} chunk={args.chunk_size} batch=1 "
        f"threads={args.threads}; median seconds per forward pass, and the median over "
        "repeats of (layer time / SDPA time) measured in the same repeat"
    )
    gen = torch.Generator().manual_seed(0)
    header = f"{'L':>6} {'mode':>13} " + " ".join(f"{k:>13}" for k in names)
    with torch.inference_mode():
        for L in lengths:
            x = torch.randn(1, L, E, generator=gen)
            reps = args.repeats if L <= 4096 else max(2, args.repeats // 2)
            for mode in modes:
                causal = mode == "causal"
                for layer in layers.values():  # warm-up
                    layer(x, x, x, is_causal=causal)
                raw = {k: [] for k in names}
                for _ in range(reps):
                    for k, layer in layers.items():
                        raw[k].append(time_once(layer, x, causal))
                for k in names:
                    times[mode][k].append(float(np.median(raw[k])))
                    if k != "softmax":
                        paired = np.asarray(raw[k]) / np.asarray(raw["softmax"])
                        ratios[mode][k].append(float(np.median(paired)))
            if L == lengths[0]:
                print(header)
            for mode in modes:
                row = " ".join(f"{times[mode][k][-1]:13.5f}" for k in names)
                rat = " ".join(
                    f"{'':>13}" if k == "softmax" else f"{ratios[mode][k][-1]:13.3f}" for k in names
                )
                print(f"{L:6d} {mode:>13} {row}", flush=True)
                print(f"{'':6} {'  ratio':>13} {rat}", flush=True)
    lengths_np = np.asarray(lengths, dtype=float)
    result = {
        "lengths": lengths,
        "times": times,
        "ratio_to_sdpa": ratios,
        "crossover": {mode: {} for mode in modes},
        "speedup_at_max_len": {mode: {} for mode in modes},
        "slopes": {mode: {} for mode in modes},
        "config": vars(args),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "torch": torch.__version__,
            "threads": args.threads,
        },
    }
    print(
        "\ncrossover vs SDPA (smallest L from which the layer stays faster), speed-up at "
        f"L = {lengths[-1]}, log-log slope of time vs L:"
    )
    for mode in modes:
        for k in names:
            slope = fit_slope(lengths_np, times[mode][k]) if len(lengths) > 1 else None
            result["slopes"][mode][k] = slope
            if k == "softmax":
                continue
            c = crossover(lengths, ratios[mode][k], [1.0] * len(lengths))
            speed = 1.0 / ratios[mode][k][-1]
            result["crossover"][mode][k] = c
            result["speedup_at_max_len"][mode][k] = speed
            cs = f"L = {c}" if c else f"not faster at L <= {lengths[-1]}"
            sl = f"{slope:.2f}" if slope is not None else "-"
            print(f"  {mode:>13} {k:>13}: {cs:>24}; x{speed:.2f} at {lengths[-1]}; slope {sl}")
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))
        print(f"\nwrote {path}")
    return result


if __name__ == "__main__":
    main()
