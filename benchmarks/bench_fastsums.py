"""Fast Coulomb pair sums (meanfield.fastsums) against the direct pair sum: the crossover N.

For p = 1 (k = −|z|, ranks), p = 2 (k = −log|z|, NUFFT spectral Ewald) and p = 3 (k = 1/|z|,
FMM3D), N from 10² upward: seconds of one force evaluation (``grad``, what a Langevin step
calls) of the fast term and of meanfield's direct ``PairInteraction`` (float64, particles
uniform in the ball of radius 2: the equilibrium shape of a Coulomb gas in a quadratic
confinement for p = 2, 3), each repeat timing the two back to back so load on the machine
hits both; the ratio is the median over repeats of direct/fast (> 1: the fast sum wins).
The direct sum is timed up to ``--max-direct``; above it its time is extrapolated as
t(N) = t(N₀) (N/N₀)² from the largest timed N₀ (marked in the table).  The relative ℓ² error
of the fast force against the direct one is recorded where both ran.  The crossover N is
interpolated log-log between the grid points where the ratio passes 1.

    python benchmarks/bench_fastsums.py               # N = 1e2 … 1e5, a few minutes
    python benchmarks/bench_fastsums.py --max-n 3000  # quick look

Writes fastsums.{json,md} into ``--out`` (by default a folder outside the repository; the
committed ones are in benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

from meanfield.workbench._scripts import add_bench_out, float_range, int_range, progress, say

GRID = [100, 300, 1000, 3000, 10_000, 30_000, 100_000]
PATHS = {1: "ranks (exact)", 2: "NUFFT spectral Ewald (finufft)", 3: "FMM (fmm3dpy)"}


def _repeats(N: int) -> int:
    return 15 if N <= 1000 else 5 if N <= 10_000 else 3


def time_pair(p: int, N: int, eps: float, with_direct: bool) -> dict:
    """Median seconds of the fast and the direct force at one (p, N), interleaved."""
    import torch

    from meanfield.energy import PairInteraction
    from meanfield.fastsums import FastCoulombInteraction
    from meanfield.kernels import Coulomb

    g = torch.Generator().manual_seed(N + p)
    om = torch.randn(N, p, dtype=torch.float64, generator=g)
    radius = 2 * torch.rand(N, 1, dtype=torch.float64, generator=g) ** (1 / p)
    om = radius * om / om.norm(dim=1, keepdim=True)  # uniform in the ball of radius 2
    fast = FastCoulombInteraction(Coulomb(p), 1.0, eps=eps, min_n=0)  # never the direct
    direct = PairInteraction(Coulomb(p), 1.0)
    fast.grad(om)  # warm-up: imports, plans, caches
    t_fast, t_direct, ratios, err = [], [], [], None
    for _ in range(_repeats(N)):
        t0 = time.perf_counter()
        g_fast = fast.grad(om)
        t_fast.append(time.perf_counter() - t0)
        if with_direct:
            t0 = time.perf_counter()
            g_direct = direct.grad(om)
            t_direct.append(time.perf_counter() - t0)
            ratios.append(t_direct[-1] / t_fast[-1])
            err = float((g_fast - g_direct).norm() / g_direct.norm())
    return {
        "p": p,
        "N": N,
        "fast_s": statistics.median(t_fast),
        "direct_s": statistics.median(t_direct) if with_direct else None,
        "ratio": statistics.median(ratios) if with_direct else None,
        "direct_extrapolated": not with_direct,
        "grad_rel_err": err,
        "repeats": _repeats(N),
    }


def crossover(rows: list[dict]) -> float | None:
    """N where direct/fast first reaches 1, interpolated log-log (None if it never does)."""
    prev = None
    for r in rows:
        if r["ratio"] >= 1:
            if prev is None:
                return float(r["N"])
            a, b = math.log(prev["ratio"]), math.log(r["ratio"])
            t = -a / (b - a)
            return float(math.exp(math.log(prev["N"]) + t * math.log(r["N"] / prev["N"])))
        prev = r
    return None


def run(max_n: int, max_direct: int, eps: float, show: bool = False) -> dict:
    import torch

    out = {"rows": [], "crossover_N": {}}
    cases = [(p, N) for p in (1, 2, 3) for N in GRID if N <= max_n]
    by_p = {1: [], 2: [], 3: []}
    for p, N in progress(cases, enabled=show, desc="(p, N)"):
        rows = by_p[p]
        row = time_pair(p, N, eps, with_direct=N <= max_direct)
        if row["direct_extrapolated"]:
            base = max((r for r in rows if not r["direct_extrapolated"]), key=lambda r: r["N"])
            row["direct_s"] = base["direct_s"] * (N / base["N"]) ** 2
            row["ratio"] = row["direct_s"] / row["fast_s"]
        rows.append(row)
        say(
            f"p={p} N={N:>6}  fast {row['fast_s']:.4g} s  direct {row['direct_s']:.4g} s"
            f"{' (extrapolated N^2)' if row['direct_extrapolated'] else ''}"
            f"  direct/fast {row['ratio']:.3g}  grad rel err {row['grad_rel_err']}"
        )
    for p, rows in by_p.items():
        out["rows"] += rows
        out["crossover_N"][p] = crossover(rows)
    out["torch_threads"] = torch.get_num_threads()
    return out


def markdown(res: dict) -> str:
    lines = [
        "| p | kernel, fast path | N | fast (s) | direct (s) | direct / fast | grad rel. err |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    kernels = {1: "−\\|z\\|", 2: "−log\\|z\\|", 3: "1/\\|z\\|"}
    for r in res["rows"]:
        d = f"{r['direct_s']:.3g}" + ("*" if r["direct_extrapolated"] else "")
        e = "–" if r["grad_rel_err"] is None else f"{r['grad_rel_err']:.1e}"
        lines.append(
            f"| {r['p']} | {kernels[r['p']]}, {PATHS[r['p']]} | {r['N']} | {r['fast_s']:.3g} "
            f"| {d} | {r['ratio']:.3g}× | {e} |"
        )
    first = min(r["N"] for r in res["rows"])

    def say(c):
        if c is None:
            return "not reached"
        return f"N ≤ {first} (faster at every N measured)" if c <= first else f"N ≈ {c:.0f}"

    cross = ", ".join(f"p = {p}: {say(c)}" for p, c in res["crossover_N"].items())
    m = res["machine"]
    lines += [
        "",
        f"Crossover (direct/fast = 1, log-log interpolation): {cross}.",
        f"Force (grad) only, float64, uniform ball of radius 2, eps = {res['eps']:g}; medians "
        "over repeats that time fast and direct back to back; * = direct time extrapolated as "
        "N² from the largest timed N.",
        f"Machine: {m['platform']}, {m['cpus']} CPUs, torch {m['torch']}; "
        f"{res['torch_threads']} thread(s) for torch (direct), FINUFFT and FMM3D alike; "
        f"load average at start {m['loadavg']}; wall time {res['wall_s']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--max-n", type=int_range(100), default=100_000, help="largest N >= 100 (default 1e5)"
    )
    ap.add_argument(
        "--max-direct",
        type=int_range(100),
        default=10_000,
        help="largest N >= 100 timed directly (default 1e4)",
    )
    ap.add_argument(
        "--eps",
        type=float_range(1e-14, 1e-2, lo_open=False),
        default=1e-8,
        help="fast-sum tolerance in [1e-14, 1e-2] (default 1e-8)",
    )
    ap.add_argument(
        "--threads",
        type=int_range(1),
        default=1,
        help="threads for torch (direct), FINUFFT and FMM3D alike (default 1: on a shared "
        "machine OpenMP regions stall under load and the ratio measures the scheduler)",
    )
    add_bench_out(ap, "fastsums.json and fastsums.md")
    ap.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = ap.parse_args(argv)  # bad flags end here (exit 2), before torch loads
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # read by FMM3D's OpenMP at load
    import torch

    import meanfield.fastsums as fastsums

    torch.set_num_threads(args.threads)
    fastsums.FINUFFT_THREADS = args.threads

    t0 = time.time()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    res = run(args.max_n, args.max_direct, args.eps, show=not args.no_progress)
    res.update(
        eps=args.eps,
        wall_s=time.time() - t0,
        machine={
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "loadavg": [round(x, 2) for x in load] if load else None,
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        },
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fastsums.json").write_text(json.dumps(res, indent=2))
    md = markdown(res)
    (args.out / "fastsums.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
