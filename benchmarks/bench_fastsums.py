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

``--scaling`` measures instead how the fast force scales to large N (p = 2 and 3 at the
``--sizes``, default 1e5 and 1e6, tolerance ``--eps``): each (p, N) runs in a fresh
subprocess, which reports the wall and CPU seconds of one force evaluation (``grad`` of
:class:`~meanfield.fastsums.FastCoulombInteraction`, what a Langevin step calls; the median
of ``--repeats`` after one untimed warm-up that compiles the near field and builds the plan
a Langevin run then reuses), the process's peak resident memory (``ru_maxrss``, imports
included, and the part added by the sum), and the relative ℓ² force error against the
direct sum at 200 random particles (fixed seed).  It writes fastsums_scaling.{json,md} with
the ratios t(N_max)/t(N_min) and the machine (CPU count, load average before and after).

    python benchmarks/bench_fastsums.py --scaling --eps 1e-6 --threads 2 --out benchmarks/results

``--step`` (with ``--scaling``) adds, at each of the ``--sizes``, a whole projected-Langevin
step of the default p = 2 problem (:class:`~meanfield.workbench.problems.ComparisonConfig`
with ``dim=2``: Gaussian cloud, alignment + confinement + the Coulomb term as
:class:`~meanfield.fastsums.FastCoulombInteraction` at ``--eps``, η = 0.005, β = 10, the
capped pair step and its near-field pass): wall and CPU seconds per step (median of
``--repeats`` steps after one untimed step that compiles and builds the plan) and the peak
resident memory, each N in a fresh subprocess.
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

from meanfield.workbench._scripts import (
    add_bench_out,
    float_range,
    int_list,
    int_range,
    progress,
    say,
)

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
    threads = torch.get_num_threads()
    fast = FastCoulombInteraction(Coulomb(p), 1.0, eps=eps, min_n=0, n_threads=threads)
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


# ----------------------------------------------------------------------------------------
# --scaling: large N, one subprocess per (p, N)
# ----------------------------------------------------------------------------------------
SUBSAMPLE = 200  # particles at which the fast force is checked against the direct sum


def ball(p: int, N: int, seed: int):
    """N points uniform in the ball of radius 2 of R^p (float64 numpy, fixed seed)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, p))
    return 2 * x / np.linalg.norm(x, axis=1, keepdims=True) * rng.random((N, 1)) ** (1 / p)


def direct_force(x, idx, p: int):
    """Σ_{j≠i} ∇k(x_i − x_j) at the particles ``idx`` by the direct sum (a few at a time)."""
    import numpy as np

    out = np.empty((len(idx), p))
    for a in range(0, len(idx), 4):
        rows = idx[a : a + 4]
        z = x[rows, None, :] - x[None, :, :]  # (4, N, p)
        r2 = (z * z).sum(-1)
        r2[np.arange(len(rows)), rows] = np.inf  # the particle itself
        # ∇(−log r) = −z/r²  (p = 2);  ∇(1/r) = −z/r³  (p = 3)
        scale = r2 if p == 2 else r2**1.5
        out[a : a + 4] = -(z / scale[..., None]).sum(1)
    return out


def _timings(wall: list, cpu: list, **fields) -> dict:
    """The record of one child: its fields, then the medians and every repeat's seconds."""
    return {
        **fields,
        "wall_s": statistics.median(wall),
        "cpu_s": statistics.median(cpu),
        "wall_all_s": wall,
        "cpu_all_s": cpu,
    }


def scaling_child(p: int, N: int, eps: float, threads: int, repeats: int) -> dict:
    """One (p, N): time, CPU time, peak memory and subsample force error (in this process)."""
    import resource

    import numpy as np
    import torch

    from meanfield.fastsums import FastCoulombInteraction
    from meanfield.kernels import Coulomb

    torch.set_num_threads(threads)
    om = torch.from_numpy(ball(p, N, seed=N + p))
    term = FastCoulombInteraction(Coulomb(p), 1.0, eps=eps, min_n=0, n_threads=threads)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # bytes (Linux: KiB)
    t0 = time.perf_counter()
    if p == 2:  # warm-up: JIT (cached on disk), plan and Fourier multiplier (FMM3D: none)
        term.grad(om)
    warm = time.perf_counter() - t0
    wall, cpu = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        g = term.grad(om)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # relative ℓ² error of Σ_j ∇k over a random subsample; grad = (2λ/N²) Σ_j ∇k
    idx = np.random.default_rng(0).choice(N, SUBSAMPLE, replace=False)
    x = om.numpy()
    want = direct_force(x, idx, p)
    got = g.numpy()[idx] * N**2 / 2
    err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    return _timings(
        wall,
        cpu,
        p=p,
        N=N,
        eps=eps,
        threads=threads,
        repeats=repeats,
        warmup_s=warm,
        peak_rss_bytes=peak,
        rss_before_sum_bytes=rss0,
        force_rel_err_subsample=err,
        subsample=SUBSAMPLE,
    )


def step_child(N: int, eps: float, threads: int, repeats: int) -> dict:
    """One N: seconds and peak memory of whole Langevin steps of the default p = 2 problem."""
    import resource

    import torch

    from meanfield.dynamics.langevin import make_integrator
    from meanfield.energy import Energy
    from meanfield.fastsums import FastCoulombInteraction
    from meanfield.kernels import Coulomb
    from meanfield.workbench.problems import ComparisonConfig

    torch.set_num_threads(threads)
    problem = ComparisonConfig(dim=2)
    E = problem.energy
    term = FastCoulombInteraction(Coulomb(2), problem.lam, eps=eps, min_n=0, n_threads=threads)
    spec = problem.spec().replace(energy=Energy([*E.terms[:2], term], E.domain), n_particles=N)
    stepper = make_integrator(spec.energy, eta=spec.eta, beta=spec.beta, regime=spec.regime)
    state = stepper.init(torch.as_tensor(spec.particles()), seed=spec.seed)
    t0 = time.perf_counter()
    with torch.no_grad():
        state = stepper.step(state)  # warm-up: JIT (cached on disk), plan, multipliers
        warm = time.perf_counter() - t0
        wall, cpu = [], []
        for _ in range(repeats):
            c0, t0 = time.process_time(), time.perf_counter()
            state = stepper.step(state)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return _timings(
        wall,
        cpu,
        p=2,
        N=N,
        what="step",
        eps=eps,
        threads=threads,
        repeats=repeats,
        warmup_s=warm,
        peak_rss_bytes=peak,
    )


def run_scaling(sizes, eps, threads, repeats, show=False, step=False) -> dict:
    import subprocess

    rows = []
    cases = [(p, N, "force") for p in (2, 3) for N in sizes]
    cases += [(2, N, "step") for N in sizes] if step else []
    for p, N, what in progress(cases, enabled=show, desc="(p, N)"):
        load = os.getloadavg() if hasattr(os, "getloadavg") else None
        flag = "--child" if what == "force" else "--step-child"
        cmd = [sys.executable, os.path.abspath(__file__), flag, f"{p},{N}"]
        cmd += ["--eps", repr(eps), "--threads", str(threads), "--repeats", str(repeats)]
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"child p={p} N={N} failed:\n{done.stderr[-3000:]}")
        row = json.loads(done.stdout.strip().splitlines()[-1])
        row["loadavg_before"] = [round(v, 2) for v in load] if load else None
        row.setdefault("what", "force")
        rows.append(row)
        err = row.get("force_rel_err_subsample")
        say(
            f"{what} p={p} N={N:>8}  wall {row['wall_s']:.3g} s  cpu {row['cpu_s']:.3g} s  "
            f"peak {row['peak_rss_bytes'] / 2**30:.2f} GiB"
            + (f"  force err {err:.2e}" if err is not None else "")
            + f"  load {row['loadavg_before']}"
        )
    ratios = {}
    for p in (2, 3):
        mine = sorted(
            (r for r in rows if r["p"] == p and r["what"] == "force"), key=lambda r: r["N"]
        )
        if len(mine) > 1:
            lo, hi = mine[0], mine[-1]
            ratios[p] = {
                "N": [lo["N"], hi["N"]],
                "wall_ratio": hi["wall_s"] / lo["wall_s"],
                "cpu_ratio": hi["cpu_s"] / lo["cpu_s"],
                "N_ratio": hi["N"] / lo["N"],
            }
    return {"rows": rows, "ratios": ratios}


def scaling_markdown(res: dict) -> str:
    m = res["machine"]
    lines = [
        "| p | fast path | N | wall (s) | CPU (s) | peak RSS (GiB) | added by the sum (GiB) "
        "| force rel. err (200 pts) | load avg before |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in res["rows"]:
        if r.get("what", "force") != "force":
            continue
        lines.append(
            f"| {r['p']} | {PATHS[r['p']]} | {r['N']:.0e} | {r['wall_s']:.3g} | {r['cpu_s']:.3g} "
            f"| {r['peak_rss_bytes'] / 2**30:.2f} "
            f"| {(r['peak_rss_bytes'] - r['rss_before_sum_bytes']) / 2**30:.2f} "
            f"| {r['force_rel_err_subsample']:.1e} | {r['loadavg_before'][0]} |"
        )
    steps = [r for r in res["rows"] if r.get("what") == "step"]
    if steps:
        lines += [
            "",
            "A whole projected-Langevin step of the default p = 2 problem (Gaussian cloud, "
            "`ComparisonConfig(dim=2)`, fast Coulomb term at the same eps):",
            "",
            "| N | wall per step (s) | CPU per step (s) | peak RSS (GiB) | load avg before |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in steps:
            lines.append(
                f"| {r['N']:.0e} | {r['wall_s']:.3g} | {r['cpu_s']:.3g} "
                f"| {r['peak_rss_bytes'] / 2**30:.2f} | {r['loadavg_before'][0]} |"
            )
    lines.append("")
    for p, q in res["ratios"].items():
        lines.append(
            f"- p = {p}: t({q['N'][1]:.0e}) / t({q['N'][0]:.0e}) = {q['wall_ratio']:.1f} (wall), "
            f"{q['cpu_ratio']:.1f} (CPU) for N × {q['N_ratio']:.0f}."
        )
    lines += [
        "",
        f"One force evaluation (``grad``), float64, uniform ball of radius 2, eps = "
        f"{res['eps']:g}, {res['threads']} thread(s) (numba near field and FINUFFT in p = 2; "
        "the fmm3dpy wheel is serial), median of "
        f"{res['repeats']} after one warm-up in p = 2; each (p, N) in its own process (peak RSS "
        "includes the imports).",
        f"Machine: {m['platform']}, {m['cpus']} CPUs ({m['processor'] or 'unknown CPU'}), "
        f"python {m['python']}, torch {m['torch']}; load average at start {m['loadavg']}, at "
        f"end {m['loadavg_end']}; {m['date_utc']} UTC; wall time {res['wall_s']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine(torch) -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "platform": platform.platform(),
        "processor": cpu_model(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "loadavg": [round(x, 2) for x in load] if load else None,
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


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
    ap.add_argument(
        "--scaling",
        action="store_true",
        help="measure p = 2, 3 at the --sizes instead of the crossover (one process each)",
    )
    ap.add_argument(
        "--sizes",
        type=int_list(1000),
        default=[100_000, 1_000_000],
        help="comma-separated N >= 1000 for --scaling (default 100000,1000000)",
    )
    ap.add_argument(
        "--repeats",
        type=int_range(1),
        default=3,
        help="timed force evaluations per (p, N) for --scaling (default 3)",
    )
    ap.add_argument(
        "--step",
        action="store_true",
        help="with --scaling: also whole Langevin steps of the default p = 2 problem",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)  # "p,N": one --scaling measurement
    ap.add_argument("--step-child", help=argparse.SUPPRESS)  # "2,N": one --step measurement
    add_bench_out(ap, "fastsums.json and fastsums.md (fastsums_scaling.* with --scaling)")
    ap.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = ap.parse_args(argv)  # bad flags end here (exit 2), before torch loads
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # read by OpenMP (FINUFFT) at load
    if args.child:
        p, N = (int(v) for v in args.child.split(","))
        print(json.dumps(scaling_child(p, N, args.eps, args.threads, args.repeats)))
        return 0
    if args.step_child:
        N = int(args.step_child.split(",")[1])
        print(json.dumps(step_child(N, args.eps, args.threads, args.repeats)))
        return 0
    import torch

    torch.set_num_threads(args.threads)
    t0 = time.time()
    info = machine(torch)
    if args.scaling:
        res = run_scaling(
            args.sizes, args.eps, args.threads, args.repeats, not args.no_progress, args.step
        )
        name = "fastsums_scaling"
    else:
        res = run(args.max_n, args.max_direct, args.eps, show=not args.no_progress)
        name = "fastsums"
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    info["loadavg_end"] = [round(x, 2) for x in load] if load else None
    res.update(
        eps=args.eps,
        threads=args.threads,
        repeats=args.repeats,
        wall_s=time.time() - t0,
        machine=info,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(res, indent=2))
    md = scaling_markdown(res) if args.scaling else markdown(res)
    (args.out / f"{name}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
