"""Speed of one full projected-Langevin step (issue: package foundation).

For N ∈ {10³, 10⁴}, p ∈ {1, 2, 16, 64}, float64/float32, exact pair sums and random batches
(B = 64): particle-steps per second (N / seconds per step, median of repeats) and the peak
resident memory of a process doing only that configuration.  The energy is linear alignment
(positive features, n = 1000 data points in R^p) + Riesz repulsion (s = p − 2, ε = 0.1).

Each configuration runs in its own subprocess so its peak memory is its own.

    python benchmarks/bench_particles.py            # full table (a few minutes)
    python benchmarks/bench_particles.py --quick    # N = 10³ only

Writes ``particles.json`` (``particles_quick.json`` with ``--quick``) into ``--out`` (by
default a folder outside the repository: ``--help``).

The pair forces side by side with their peers, and the step's scaling in N, are in
bench_pairs.py.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out, progress, say


def run_one(N: int, p: int, dtype: str, batch: int | None, n_data: int, repeats: int) -> dict:
    import numpy as np
    import torch

    from meanfield.domains import Ball
    from meanfield.dynamics.langevin import ProjectedLangevin
    from meanfield.energy import Energy, LinearAlignment, PairInteraction
    from meanfield.kernels import Riesz

    rng = np.random.default_rng(0)
    X = rng.normal(scale=1 / np.sqrt(p), size=(n_data, p))
    y = np.sign(X[:, 0] + 1e-12)
    dt = torch.float32 if dtype == "float32" else torch.float64
    E = Energy(
        [LinearAlignment(X, y, "positive"), PairInteraction(Riesz(p - 2.0, 0.1), 0.1)],
        Ball(p, 3.0),
        dtype=dt,
    )
    step = ProjectedLangevin(E, eta=1e-3, beta=100.0, interaction_batch=batch)
    state = step.init(
        torch.randn(N, p, dtype=torch.float64, generator=torch.Generator().manual_seed(0)),
        seed=1,
    )
    times = []
    with torch.no_grad():
        step.step(state)  # warm-up
        for _ in range(repeats):
            t0 = time.perf_counter()
            step.step(state)  # the same step each time: the state carries its stream
            times.append(time.perf_counter() - t0)
    sec = statistics.median(times)
    return {
        "N": N,
        "p": p,
        "dtype": dtype,
        "interaction": f"batch B={batch}" if batch else "exact",
        "sec_per_step": sec,
        "particle_steps_per_s": N / sec,
        "peak_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": torch.get_num_threads(),
    }


def interaction_only(repeats: int = 5, show: bool = True) -> list[dict]:
    """The pair term alone at N = 10⁴ (float32): exact chunked sums vs random batches B = 64."""
    import torch

    from meanfield.domains import Ball
    from meanfield.energy import Energy, PairInteraction
    from meanfield.kernels import Riesz

    rows = []
    for p in progress((1, 2, 16, 64), enabled=show, desc="interaction only, p"):
        E = Energy([PairInteraction(Riesz(p - 2.0, 0.1), 0.1)], Ball(p, 3.0), dtype=torch.float32)
        term = E.terms[0]
        # the particles of the full step: randn projected onto the ball of radius 3 (at p = 64
        # raw randn pairs have forces ~1e-59, outside float32: the pair sums refuse them)
        om = E.domain.project(torch.randn(10000, p, generator=torch.Generator().manual_seed(0)))
        gen = torch.Generator().manual_seed(1)
        out = {}
        for name, f in (
            ("exact", lambda term=term, om=om: term.grad(om)),
            ("batch", lambda term=term, om=om, gen=gen: term.grad_random_batch(om, 64, gen)),
        ):
            f()
            ts = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t0)
            out[name] = statistics.median(ts)
        rows.append({"p": p, **out, "speedup": out["exact"] / out["batch"]})
        say(
            f"interaction only, N=10000 p={p:>3} float32: exact {out['exact'] * 1e3:8.1f} ms, "
            f"batch B=64 {out['batch'] * 1e3:6.1f} ms, speed-up {rows[-1]['speedup']:6.1f}x"
        )
    return rows


#: The flags, declared once: their checks, help and docs come from these Params.
FLAGS = Contract(
    "benchmarks/bench_particles.py",
    [
        Param("quick", "flag", "N = 10^3 only", default=False),
        Param("repeats", "int", "timed steps per configuration", low=1, default=5),
        Param("progress", "flag", "show the progress bars", default=True),
    ],
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="A bad flag ends the script at once with one line and exit status 2.",
    )
    FLAGS.add_arguments(ap)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: one case, in a child process
    add_bench_out(ap, "particles.json, or particles_quick.json with --quick")
    args = FLAGS.parse_args(ap, argv)
    if args.one:
        N, p, dtype, batch = json.loads(args.one)
        print(json.dumps(run_one(N, p, dtype, batch, 1000, args.repeats)))
        return 0
    show = args.progress
    Ns = [1000] if args.quick else [1000, 10000]
    cases = [
        (N, p, dtype, batch)
        for N in Ns
        for p in (1, 2, 16, 64)
        for dtype in ("float64", "float32")
        for batch in (None, 64)
    ]
    rows = []
    for N, p, dtype, batch in progress(cases, enabled=show, desc="full step, cases"):
        cfg = json.dumps([N, p, dtype, batch])
        reps = str(3 if N >= 10000 and batch is None else args.repeats)
        out = subprocess.run(
            [sys.executable, __file__, "--one", cfg, "--repeats", reps],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        say(
            f"N={N:>6} p={p:>3} {dtype:8s} {r['interaction']:12s} "
            f"{r['sec_per_step'] * 1e3:9.1f} ms/step  "
            f"{r['particle_steps_per_s']:12.0f} particle-steps/s  "
            f"peak {r['peak_rss_MiB']:7.0f} MiB"
        )
    print("\nrandom-batch speed-up (exact time / batch time):")
    for N in Ns:
        for p in (1, 2, 16, 64):
            for dtype in ("float64", "float32"):
                ex = next(
                    r
                    for r in rows
                    if (r["N"], r["p"], r["dtype"], r["interaction"]) == (N, p, dtype, "exact")
                )
                rb = next(
                    r
                    for r in rows
                    if (r["N"], r["p"], r["dtype"]) == (N, p, dtype) and r["interaction"] != "exact"
                )
                print(
                    f"  N={N:>6} p={p:>3} {dtype}: {ex['sec_per_step'] / rb['sec_per_step']:6.1f}x"
                )
    print()
    inter = interaction_only(show=show)
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / ("particles_quick.json" if args.quick else "particles.json")
    out.write_text(json.dumps({"full_step": rows, "interaction_only": inter}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
