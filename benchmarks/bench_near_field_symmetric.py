"""Near field of the 2D spectral Ewald sum: each pair once (Newton's third law) against each
target's own sum.

The near field of :func:`meanfield.fastsums.coulomb2d_sums` sums ½E₁(r²/σ²) (value) or its
gradient over the pairs closer than the cutoff r_c with a cell list.  Two kernels of
:func:`meanfield._fastsums_near.near_field` with ``same=True`` (the targets are the sources,
as in a Langevin step):

- old, ``symmetric=False``: each target scans the 3 × 3 cells of side ≥ r_c around its own,
  in parallel over targets; each pair is evaluated twice, once from each end;
- new, ``symmetric=True`` (the default with ``same``): cells of side ≥ r_c / 2, each pair
  evaluated once over the 5 × 5 half stencil and added to both ends, in parallel over fixed
  blocks of cell rows (even blocks, then odd ones).

For each cloud (Gaussian N(0, 0.4² I), uniform disc of radius 2), N and thread count, each
repeat times old and new back to back (alternating which goes first), value and gradient
separately, CPU seconds (``time.process_time``, all threads) and wall seconds; the table gives
the medians and the ratio old/new of the median CPU seconds (> 1: the new kernel is faster).
The cutoff and width are those the package chooses at eps = 1e-6 (``_ewald_setup``, 256
neighbours median).  The largest relative difference between the two kernels' sums is
recorded (round-off of a different summation order).

    python benchmarks/bench_near_field_symmetric.py --out benchmarks/results   # ~6 min
    python benchmarks/bench_near_field_symmetric.py --sizes 20000 --repeats 3  # quick look

Writes near_field_symmetric.{json,md} into ``--out`` (by default a folder outside the
repository; the committed ones are in benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from meanfield.workbench._scripts import add_bench_out, int_list, int_range, say

CLOUDS = ("gaussian", "disc")
LARGE_N = 1_000_000


def cloud(name: str, N: int, seed: int = 0):
    """N points of a Gaussian N(0, 0.4² I) or uniform in the disc of radius 2 (fixed seed)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if name == "gaussian":
        return 0.4 * rng.normal(size=(N, 2))
    radius = 2.0 * np.sqrt(rng.random(N))
    angle = 2.0 * np.pi * rng.random(N)
    return np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1)


def cutoff(x):
    """r_c and σ the package chooses for the pair sums of x at eps = 1e-6."""
    from meanfield._fastsums_ewald import _ewald_setup
    from meanfield.fastsums import NEAR_NEIGHBOURS

    N = len(x)
    cached, _ = _ewald_setup(x, x, 1e-6, NEAR_NEIGHBOURS, int(32 * N) + 4096)
    return cached[0].r_c, cached[0].sigma


def _load():
    return [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None


def time_case(x, r_c, sigma, repeats: int) -> dict:
    """Median CPU and wall seconds of old and new, value and gradient, interleaved."""
    import numpy as np

    from meanfield._fastsums_near import near_field

    w = np.ones(len(x))
    times = {(k, q, c): [] for k in ("old", "new") for q in ("value", "grad") for c in "cw"}
    out = {}
    for rep in range(repeats):
        kernels = ("old", "new") if rep % 2 == 0 else ("new", "old")
        for kernel in kernels:
            for q in ("value", "grad"):
                c0, w0 = time.process_time(), time.perf_counter()
                value, grad = q == "value", q == "grad"
                res = near_field(
                    x, x, w, r_c, sigma, value, grad, same=True, symmetric=kernel == "new"
                )
                times[kernel, q, "w"].append(time.perf_counter() - w0)
                times[kernel, q, "c"].append(time.process_time() - c0)
                out[kernel, q] = res[0] if q == "value" else res[1]
    row = {}
    for q in ("value", "grad"):
        for k in ("old", "new"):
            row[f"{q}_{k}_cpu_s"] = statistics.median(times[k, q, "c"])
            row[f"{q}_{k}_wall_s"] = statistics.median(times[k, q, "w"])
        row[f"{q}_ratio_cpu"] = row[f"{q}_old_cpu_s"] / row[f"{q}_new_cpu_s"]
        row[f"{q}_ratio_wall"] = row[f"{q}_old_wall_s"] / row[f"{q}_new_wall_s"]
        a, b = out["new", q], out["old", q]
        row[f"{q}_max_rel_diff"] = float(np.abs(a - b).max() / np.abs(b).max())
    return row


def run(sizes, threads, repeats: int, repeats_large: int) -> list[dict]:
    import numba

    from meanfield._fastsums_near import near_field

    x = cloud("gaussian", 2000)
    for symmetric in (False, True):  # compile both kernels before any timing
        near_field(x, x, x[:, 0] * 0 + 1, 0.1, 0.05, True, True, same=True, symmetric=symmetric)
    rows = []
    before = numba.get_num_threads()
    try:
        for N in sizes:
            for name in CLOUDS:
                x = cloud(name, N)
                r_c, sigma = cutoff(x)
                for t in threads:
                    numba.set_num_threads(t)
                    load = _load()
                    reps = repeats_large if N >= LARGE_N else repeats
                    row = {"cloud": name, "N": N, "threads": t, "repeats": reps}
                    row.update(r_c=r_c, sigma=sigma, loadavg_before=load)
                    row.update(time_case(x, r_c, sigma, reps))
                    row["loadavg_after"] = _load()
                    rows.append(row)
                    say(
                        f"{name:8s} N={N:>8d} threads={t}: value {row['value_old_cpu_s']:.3f} -> "
                        f"{row['value_new_cpu_s']:.3f} CPU-s (x{row['value_ratio_cpu']:.2f}), "
                        f"grad {row['grad_old_cpu_s']:.3f} -> {row['grad_new_cpu_s']:.3f} "
                        f"(x{row['grad_ratio_cpu']:.2f}); load {load} -> {row['loadavg_after']}"
                    )
    finally:
        numba.set_num_threads(before)
    return rows


def markdown(res: dict) -> str:
    m = res["machine"]
    lines = [
        "# Near field of the 2D spectral Ewald sum: each pair once against each target's sum",
        "",
        "Seconds of one near-field pass over N particles (targets = sources, unit weights),",
        "median of the repeats; old = per-target kernel (each pair twice, 3 × 3 cells of side",
        "≥ r_c), new = pairwise kernel (each pair once, 5 × 5 half stencil of side ≥ r_c / 2);",
        "ratio = old / new of the median CPU seconds (wall in brackets).  r_c and σ as the",
        "package chooses them at eps = 1e-6 (256 neighbours median).",
        "",
        "| cloud | N | threads | repeats | value old CPU-s | value new CPU-s | value ratio "
        "| grad old CPU-s | grad new CPU-s | grad ratio | wall s value old/new, grad old/new "
        "| max rel diff | load before → after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        diff = max(r["value_max_rel_diff"], r["grad_max_rel_diff"])
        lines.append(
            f"| {r['cloud']} | {r['N']:.0e} | {r['threads']} | {r['repeats']} "
            f"| {r['value_old_cpu_s']:.3f} | {r['value_new_cpu_s']:.3f} "
            f"| {r['value_ratio_cpu']:.2f} ({r['value_ratio_wall']:.2f}) "
            f"| {r['grad_old_cpu_s']:.3f} | {r['grad_new_cpu_s']:.3f} "
            f"| {r['grad_ratio_cpu']:.2f} ({r['grad_ratio_wall']:.2f}) "
            f"| {r['value_old_wall_s']:.3g}/{r['value_new_wall_s']:.3g}, "
            f"{r['grad_old_wall_s']:.3g}/{r['grad_new_wall_s']:.3g} "
            f"| {diff:.1e} | {r['loadavg_before'][0]} → {r['loadavg_after'][0]} |"
        )
    lines += [
        "",
        f"{m['processor']}, {m['cpus']} CPUs, {m['platform']}; python {m['python']}, numba "
        f"{m['numba']} ({m['threading_layer']} threads); load average at start {m['loadavg']}, "
        f"at end {m['loadavg_end']}; {m['date_utc']} UTC; wall time {res['wall_s']:.0f} s.",
        "With two threads CPU seconds count both threads (and any spin-waiting of the pool);",
        "wall ≈ CPU / threads only on idle cores (compare the load average).",
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


def machine() -> dict:
    import numba

    return {
        "platform": platform.platform(),
        "processor": cpu_model(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "numba": numba.__version__,
        "loadavg": _load(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--sizes",
        type=int_list(1000),
        default=[100_000, LARGE_N],
        help="comma-separated N >= 1000 (default 100000,1000000)",
    )
    ap.add_argument(
        "--threads",
        type=int_list(1, os.cpu_count() or 1),
        default=[1, 2],
        help="comma-separated numba thread counts, at most the CPU count (default 1,2)",
    )
    ap.add_argument(
        "--repeats", type=int_range(1), default=7, help="timed repeats below N = 1e6 (default 7)"
    )
    ap.add_argument(
        "--repeats-large",
        type=int_range(1),
        default=3,
        help="timed repeats from N = 1e6 (default 3)",
    )
    add_bench_out(ap, "near_field_symmetric.json and near_field_symmetric.md")
    args = ap.parse_args(argv)  # bad flags end here (exit 2), before numba loads
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    t0 = time.time()
    info = machine()
    rows = run(args.sizes, args.threads, args.repeats, args.repeats_large)
    import numba

    # the thread pool starts at the first parallel call: ask for its layer after it
    info["threading_layer"] = numba.threading_layer()
    info["loadavg_end"] = _load()
    res = {"rows": rows, "wall_s": time.time() - t0, "machine": info}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "near_field_symmetric.json").write_text(json.dumps(res, indent=2))
    md = markdown(res)
    (args.out / "near_field_symmetric.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
