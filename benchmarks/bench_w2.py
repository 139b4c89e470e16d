"""W2 between N particles and a 2D grid density: sparse exact vs POT's dense ``ot.emd2`` (issue 13).

The case of ``benchmarks/bench_pde.py`` (and of issue 13): particles x ~ N(0, 0.8² I) clipped
to the box [−3, 3]², the grid density the same Gaussian on n² cells, W2 between the particles
and the cell-centre atoms.  Both solvers compute the same exact value; the sparse one
(:func:`meanfield.transport.w2_sparse`, method "sparse_exact", the one ``method="auto"`` uses
above ``EXACT_MAX_PAIRS``) is timed against ``ot.emd2`` in the same run, medians over repeats,
and the ratio reported.  The issue's case, N = 10⁴ against 128², runs the dense solver only
with ``--exact-large`` (minutes, 6.8 GB); otherwise its exact value is the one stored in
``EXACT_LARGE`` below with how it was computed.

    python benchmarks/bench_w2.py                  # small cases + the sparse solve at 1e4 / 128²
    python benchmarks/bench_w2.py --repeats 1 --exact-large

Writes benchmarks/results/w2.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import time
from pathlib import Path

import numpy as np
import ot
import torch

from meanfield.domains import Box
from meanfield.pde import Density, Grid
from meanfield.transport import w2_sparse

OUT = Path(__file__).parent / "results"
#: The dense exact value at N = 1e4, 128²: ``ot.emd2`` (numItermax 1e8) in the
#: ``--exact-large`` run of 2026-12-01 on this 2-core machine, 135.6 s (issue 13: 0.04634,
#: 258 s, 6.8 GB; its independent sparse network simplex gave 0.04633807).
EXACT_LARGE = {
    "w2": 0.04633805822336043,
    "how": "ot.emd2 dense network simplex, bench_w2.py --exact-large, 135.6 s (2026-12-01)",
}


def case(N: int, n: int):
    g = Grid(Box(2, 3.0), n)
    rho = Density.gaussian(g, 0.0, 0.8)
    x = np.random.default_rng(0).normal(scale=0.8, size=(N, 2)).clip(-3, 3)
    m = rho.masses.ravel()
    keep = m > 0
    return x, g.centers[keep], m[keep] / m[keep].sum()


def dense(x, y, b) -> float:
    a = np.full(len(x), 1.0 / len(x))
    return float(np.sqrt(ot.emd2(a, b, ot.dist(x, y), numItermax=10**8)))


def timed(fn, repeats: int):
    times, val = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        val = fn()
        times.append(time.perf_counter() - t0)
    return val, statistics.median(times)


def run(N: int, n: int, repeats: int, with_dense: bool, dense_repeats: int | None = None) -> dict:
    x, y, b = case(N, n)
    res, t_sparse = timed(lambda: w2_sparse(x, np.ones(N), y, b), repeats)
    row = {
        "N": N,
        "grid": f"{n}^2",
        "pairs_dense": N * len(y),
        "w2_sparse": res["w2"],
        "w2_lower": res["w2_lower"],
        "rounds": res["rounds"],
        "support": res["pairs"],
        "s_sparse": t_sparse,
    }
    if with_dense:
        w, t_dense = timed(lambda: dense(x, y, b), dense_repeats or repeats)
        row.update(
            w2_dense=w, s_dense=t_dense, speedup=t_dense / t_sparse, rel_err=abs(res["w2"] - w) / w
        )
    else:
        row.update(
            w2_dense=EXACT_LARGE["w2"],
            dense_how=EXACT_LARGE["how"],
            rel_err=abs(res["w2"] - EXACT_LARGE["w2"]) / EXACT_LARGE["w2"],
        )
    print(json.dumps(row), flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats per small case")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--exact-large", action="store_true", help="also run ot.emd2 at 1e4 / 128²")
    ap.add_argument("--skip-large", action="store_true", help="small cases only")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    rows = []
    if not args.skip_large:
        # first, so the peak RSS of the process is the sparse solve's (and the data's); the
        # sparse solve is timed over the repeats, the dense one (minutes, GBs) once and last
        rows.append(run(10_000, 128, args.repeats, False))
        rows[-1]["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows += [run(N, n, args.repeats, True) for N, n in [(1000, 32), (2000, 48), (3000, 64)]]
    if args.exact_large:
        w, t_dense = timed(lambda: dense(*case(10_000, 128)), 1)
        big = rows[0]
        big.update(w2_dense=w, s_dense=t_dense, speedup=t_dense / big["s_sparse"])
        big.update(rel_err=abs(big["w2_sparse"] - w) / w, dense_how="measured in this run")
    meta = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "load_average_at_end": os.getloadavg(),
        "torch_threads": args.threads,
        "wall_s": time.perf_counter() - t0,
        "repeats": args.repeats,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "w2.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "| N | grid | W2 sparse | W2 dense (ot.emd2) | rel. err | sparse s | dense s | "
        "dense / sparse | rounds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['N']} | {r['grid']} | {r['w2_sparse']:.8f} | {r['w2_dense']:.8g} | "
            f"{r['rel_err']:.1e} | {r['s_sparse']:.1f} | {r.get('s_dense', float('nan')):.1f} | "
            f"{r.get('speedup', float('nan')):.1f} | {r['rounds']} |"
        )
    lines.append(f"\n{meta}")
    (OUT / "w2.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
