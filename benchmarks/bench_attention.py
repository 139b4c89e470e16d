"""Inference time of attention against sequence length: softmax (SDPA) vs linear attention.

Times one forward pass (eval mode, no autograd, batch 1) of a whole
:class:`meanfield.attention.KernelAttention` layer -- input projections, attention, output
projection -- for

* ``softmax``: exact attention, ``torch.nn.functional.scaled_dot_product_attention``;
* ``vanilla FAVOR``: linear attention with random positive features;
* ``Kernel-FAVOR``: the same layer with learned particles installed by ``set_omega`` (here
  from a short run of the package's projected Langevin on a Phase-A energy built from
  synthetic representations: the cost does not depend on the values of Omega, and this shows
  it does not).

For each L in 128 ... 16384 it prints the median over ``--repeats`` timings, the ratio to
softmax, the fitted log-log slope of time against L (all L, and L >= 1024), and the smallest L
from which linear attention stays faster than SDPA on this machine.

    python benchmarks/bench_attention.py                    # full sweep, ~1-3 minutes on 2 cores
    python benchmarks/bench_attention.py --max-len 1024 --repeats 2   # quick smoke run
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from meanfield.attention import KernelAttention


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


def time_layer(layer, x, repeats: int) -> float:
    """Median seconds of ``layer(x, x, x)`` over ``repeats`` calls (after one warm-up call)."""
    with torch.inference_mode():
        layer(x, x, x)
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            layer(x, x, x)
            ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


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


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-len", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=16384)
    ap.add_argument("--embed-dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--features", type=int, default=128, help="random features m per head")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    args = ap.parse_args(argv)
    for name in ("min_len", "max_len", "embed_dim", "heads", "features", "repeats", "threads"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1")
    if args.max_len < args.min_len:
        raise SystemExit("--max-len must be >= --min-len")
    torch.set_num_threads(args.threads)
    lengths = []
    L = args.min_len
    while L <= args.max_len:
        lengths.append(L)
        L *= 2
    E, H, m = args.embed_dim, args.heads, args.features
    layers = {
        "softmax": KernelAttention(E, H, feature="softmax", seed=0).eval(),
        "vanilla FAVOR": KernelAttention(E, H, feature="favor", n_features=m, seed=0).eval(),
        "Kernel-FAVOR": KernelAttention(E, H, feature="favor", n_features=m, seed=0).eval(),
    }
    layers["Kernel-FAVOR"].load_state_dict(layers["vanilla FAVOR"].state_dict())
    layers["Kernel-FAVOR"].feature_map.set_omega(learned_omega(m, E // H))
    gen = torch.Generator().manual_seed(0)
    times = {k: [] for k in layers}
    print(
        f"embed_dim={E} heads={H} d_h={E // H} m={m} batch=1 threads={args.threads} "
        f"repeats={args.repeats} (median seconds per forward pass)"
    )
    print(
        f"{'L':>6} "
        + " ".join(f"{k:>15}" for k in layers)
        + f" {'FAVOR/softmax':>14} {'Kernel/softmax':>15}"
    )
    for L in lengths:
        x = torch.randn(1, L, E, generator=gen)
        reps = args.repeats if L <= 4096 else max(2, args.repeats // 2)
        for k, layer in layers.items():
            times[k].append(time_layer(layer, x, reps))
        row = " ".join(f"{times[k][-1]:15.5f}" for k in layers)
        r1 = times["vanilla FAVOR"][-1] / times["softmax"][-1]
        r2 = times["Kernel-FAVOR"][-1] / times["softmax"][-1]
        print(f"{L:6d} {row} {r1:14.3f} {r2:15.3f}", flush=True)
    lengths_np = np.asarray(lengths, dtype=float)
    big = lengths_np >= 1024
    result = {
        "lengths": lengths,
        "times": times,
        "slopes": {},
        "slopes_L_ge_1024": {},
        "config": vars(args),
    }
    print("\nfitted log-log slope of time vs L:")
    for k in layers:
        s_all = fit_slope(lengths_np, times[k])
        s_big = fit_slope(lengths_np[big], np.asarray(times[k])[big]) if big.sum() >= 2 else None
        result["slopes"][k] = s_all
        result["slopes_L_ge_1024"][k] = s_big
        extra = f", L >= 1024: {s_big:.3f}" if s_big is not None else ""
        print(f"  {k:>15}: all L: {s_all:.3f}{extra}")
    for k in ("vanilla FAVOR", "Kernel-FAVOR"):
        c = crossover(lengths, times[k], times["softmax"])
        result[f"crossover_{k}"] = c
        print(
            f"  {k} is faster than SDPA from L = {c} on"
            if c
            else f"  {k} is not faster than SDPA at the largest L tested on",
            "this CPU",
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return result


if __name__ == "__main__":
    main()
