"""W2 between N particles and a 2D grid density: sparse exact vs POT's dense ``ot.emd2`` (issue 13).

The case of ``benchmarks/bench_pde.py`` (and of issue 13): particles x ~ N(0, 0.8² I) clipped
to the box [−3, 3]², the grid density the same Gaussian on n² cells, W2 between the particles
and the cell-centre atoms.  Both solvers compute the same exact value; the sparse one
(:func:`meanfield.ot.sparse.w2_sparse`, method "sparse_exact", the one ``method="auto"`` uses
above ``EXACT_MAX_PAIRS``) is timed against ``ot.emd2`` in the same run, medians over repeats,
and the ratio reported.  The issue's case, N = 10⁴ against 128², runs the dense solver only
with ``--exact-large`` (minutes, 6.8 GB); otherwise its exact value is the one stored in
``EXACT_LARGE`` below with how it was computed.

    python benchmarks/bench_w2.py                  # small cases + the sparse solve at 1e4 / 128²
    python benchmarks/bench_w2.py --repeats 1 --exact-large

Writes w2.{json,md} into ``--out`` (by default a folder outside the repository; the committed
ones are in benchmarks/results/).

``--panel`` (issue 23): four cases at N = 10⁴ against the same Gaussian on 128² — matched,
5 % scaled and shifted, a two-cluster mixture, uniform particles — each with the sparse value,
the dense ``ot.emd2`` value (computed once, minutes and ≈ 7 GB each, and cached in
``--cache``/dense.json, by default outside the repository), the difference, the median time,
rounds, support, the ratio to the matched case and an independent check of the certificate
(dual feasibility over every pair by a chunked dense scan, complementary slackness,
marginals, duality gap); then the same four at N = 3·10⁴ against 256² (sparse and
certificate only: the dense solve would need 2·10⁹ entries).  Writes w2_panel.{json,md}
into ``--out``.

    python benchmarks/bench_w2.py --panel --repeats 5 --large-repeats 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import time
from pathlib import Path

import numpy as np

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out, output_dir, progress, say

#: The dense exact value at N = 1e4, 128²: ``ot.emd2`` (numItermax 1e8) in the
#: ``--exact-large`` run of 2026-12-01 on this 2-core machine, 135.6 s (issue 13: 0.04634,
#: 258 s, 6.8 GB; its independent sparse network simplex gave 0.04633807).
EXACT_LARGE = {
    "w2": 0.04633805822336043,
    "how": "ot.emd2 dense network simplex, bench_w2.py --exact-large, 135.6 s (2026-12-01)",
}


def case(N: int, n: int):
    from meanfield.domains import Box
    from meanfield.pde import Density, Grid

    g = Grid(Box(2, 3.0), n)
    rho = Density.gaussian(g, 0.0, 0.8)
    x = np.random.default_rng(0).normal(scale=0.8, size=(N, 2)).clip(-3, 3)
    m = rho.masses.ravel()
    keep = m > 0
    return x, g.centers[keep], m[keep] / m[keep].sum()


def dense(x, y, b) -> float:
    import ot

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
    from meanfield.ot.sparse import w2_sparse

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
    say(json.dumps(row))
    return row


# ---------------------------------------------------------------------------------------
# --panel (issue 23): four 2D cases, N = 1e4 particles against the σ = 0.8 Gaussian on 128²
# ---------------------------------------------------------------------------------------
#: The panel's cases: particles (a function of the generator and N) against the same grid
#: density N(0, 0.8² I) on [−3, 3]².  "matched" is the case the solver was first tuned on;
#: the others move the optimal pairs away from each particle's nearest cells.
PANEL_CASES = {
    "matched": lambda rng, N: rng.normal(scale=0.8, size=(N, 2)),
    # a 5 % scale error plus a shift: every particle's partners sit 1–3 cells away
    "scaled_shifted": lambda rng, N: rng.normal(scale=0.8, size=(N, 2)) * 1.05 + 0.05,
    # two clusters against one mode: the middle cells are split between far clusters
    "mixture": lambda rng, N: (
        rng.normal(scale=0.4, size=(N, 2))
        + np.where(np.arange(N) % 2 == 0, -1.2, 1.2)[:, None] * np.array([1.0, 0.0])
    ),
    # flat against peaked: non-local transport, the corners go to the far tails
    "uniform": lambda rng, N: rng.uniform(-3.0, 3.0, size=(N, 2)),
}
#: Default folder of the cached dense values: outside the repository (minutes per value).
PANEL_CACHE = Path.home() / ".cache" / "meanfield" / "bench_w2_panel"


def panel_case(name: str, N: int, n: int):
    """Particles (N, 2), cell centres (M, 2) and cell masses (M,) of one panel case."""
    from meanfield.domains import Box
    from meanfield.pde import Density, Grid

    g = Grid(Box(2, 3.0), n)
    rho = Density.gaussian(g, 0.0, 0.8)
    x = PANEL_CASES[name](np.random.default_rng(0), N).clip(-3, 3)
    m = rho.masses.ravel()
    keep = m > 0
    return x, g.centers[keep], m[keep] / m[keep].sum()


def _case_key(name, x, y, b) -> str:
    """Cache key: the case's name and a hash of its data (a changed case misses the cache)."""
    h = hashlib.sha256()
    for arr in (x, y, b):
        h.update(np.ascontiguousarray(arr).tobytes())
    return f"{name}/N={len(x)}/M={len(y)}/{h.hexdigest()[:16]}"


def cached_dense(name, x, y, b, folder: Path) -> dict:
    """ot.emd2 of one case: from ``folder/dense.json`` if there, else computed once and stored."""
    path = folder / "dense.json"
    cache = json.loads(path.read_text()) if path.exists() else {}
    key = _case_key(name, x, y, b)
    if key not in cache:
        say(f"  [{name}] dense ot.emd2, N × M = {len(x) * len(y):.2e} entries (minutes) ...")
        t0, c0 = time.perf_counter(), time.process_time()
        w = dense(x, y, b)
        cache[key] = {
            "w2": w,
            "s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - c0,
            "when": time.strftime("%Y-%m-%d %H:%M"),
            "load": os.getloadavg(),
        }
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cache, indent=1))
    return cache[key]


def certificate(x, y, b, res, chunk: int = 2**23) -> dict:
    """Independent check of the returned optimality certificate, without the kd-trees.

    Dual feasibility over *every* pair (a chunked scan of r_ij = |x_i − y_j|² − u_i − v_j),
    complementary slackness on the plan's pairs (r = 0 where π > 0), the plan's marginals
    and the duality gap Σ π c − (Σ a u + Σ b v).  ``valid``: min r ≥ −τ, |r| ≤ τ on the plan,
    marginals to 1e-12 (float64 sums of ≤ 10⁵ masses ≤ 1: rounding ≈ 1e-14) and a gap ≤ 2τ
    (the certificate's own claim: W2² ∈ [Σ a u + Σ b v − τ, Σ π c]).
    """
    a = np.full(len(x), 1.0 / len(x))
    u, v, tau = res["u"], res["v"], res["tau"]
    i, j, f = res["plan"]
    rows, rmin = max(1, chunk // len(y)), np.inf
    for s in range(0, len(x), rows):
        xs = x[s : s + rows]
        r = (xs[:, None, 0] - y[None, :, 0]) ** 2
        for d in range(1, x.shape[1]):
            r += (xs[:, None, d] - y[None, :, d]) ** 2
        r -= u[s : s + rows, None]
        r -= v[None, :]
        rmin = min(rmin, float(r.min()))
    c = ((x[i] - y[j]) ** 2).sum(1)
    slack = float(np.abs(c - u[i] - v[j]).max())
    marg = max(
        float(np.abs(np.bincount(i, f, len(x)) - a).max()),
        float(np.abs(np.bincount(j, f, len(y)) - b).max()),
    )
    gap = float(f @ c - (a @ u + b @ v))
    valid = rmin >= -tau and slack <= tau and marg <= 1e-12 and (f >= 0).all() and gap <= 2 * tau
    return {
        "min_r": rmin,
        "max_slack": slack,
        "marginal_err": marg,
        "gap": gap,
        "tau": tau,
        "valid": bool(valid),
    }


def panel_row(name, N, n, repeats, folder, with_dense=True, check=True) -> dict:
    """One panel case: sparse (median of ``repeats``), cached dense value, certificate."""
    from meanfield.ot.sparse import w2_sparse

    x, y, b = panel_case(name, N, n)
    walls, cpus, res = [], [], None
    for rep in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        res = w2_sparse(x, np.ones(N), y, b, return_plan=True)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        say(
            f"  [{name} N={N} {n}²] repeat {rep + 1}/{repeats}: {walls[-1]:.2f} s "
            f"(CPU {cpus[-1]:.2f} s), {res['rounds']} rounds, {res['pairs']} pairs"
        )
    row = {
        "case": name,
        "N": N,
        "grid": f"{n}^2",
        "pairs_dense": N * len(y),
        "w2_sparse": res["w2"],
        "w2_lower": res["w2_lower"],
        "rounds": res["rounds"],
        "support": res["pairs"],
        "levels": res["levels"],
        "s_sparse": statistics.median(walls),
        "s_all": walls,
        "cpu_s": statistics.median(cpus),
    }
    if with_dense:
        d = cached_dense(name, x, y, b, folder)
        row.update(
            w2_dense=d["w2"],
            abs_diff=abs(res["w2"] - d["w2"]),
            rel_diff=abs(res["w2"] - d["w2"]) / d["w2"],
            dense_how=d.get(
                "how", f"ot.emd2 cached, {d.get('s', float('nan')):.0f} s ({d.get('when', '?')})"
            ),
        )
    if check:
        say(f"  [{name}] certificate: dense scan of r over {N * len(y):.1e} pairs ...")
        row["certificate"] = certificate(x, y, b, res)
    say("  " + json.dumps({k: v for k, v in row.items() if k != "levels"}))
    return row


def panel(args) -> None:
    """The --panel run: the four cases at 1e4 / 128², then the 3e4 / 256² ones (sparse only)."""
    folder = args.cache
    t0 = time.perf_counter()
    cases = [(name, 10_000, 128, args.repeats, True) for name in PANEL_CASES]
    if not args.skip_large:  # sparse + certificate only
        cases += [(name, 30_000, 256, args.large_repeats, False) for name in PANEL_CASES]
    rows = []
    for name, N, n, repeats, with_dense in progress(
        cases, enabled=args.progress, desc="panel cases"
    ):
        say(f"[panel] {name}: N = {N} vs {n}²" + ("" if with_dense else " (sparse + certificate)"))
        rows.append(panel_row(name, N, n, repeats, folder, with_dense=with_dense))
    for r in rows:
        base = next(q for q in rows if q["case"] == "matched" and q["N"] == r["N"])
        r["ratio_to_matched"] = r["s_sparse"] / base["s_sparse"]
    meta = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "uptime_at_start": args.uptime_start,
        "uptime_at_end": os.popen("uptime").read().strip(),
        "wall_s": time.perf_counter() - t0,
        "repeats": args.repeats,
        "large_repeats": args.large_repeats,
        "dense_cache": str(folder / "dense.json"),
    }
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "w2_panel.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "`python benchmarks/bench_w2.py --panel` — exact W2 between N particles and the "
        "N(0, 0.8² I) density on a grid of [−3, 3]² (w2_sparse, wall-clock median of "
        f"{args.repeats} repeats at 1e4 and {args.large_repeats} at 3e4, in one run so the "
        "ratios share the machine's load), against ot.emd2 (cached, computed once per case: "
        "see dense.json). Certificate: a dense scan of r = |x − y|² − u − v over every pair "
        "(min r ≥ −τ), |r| ≤ τ on the plan, marginals, gap = Σπc − (Σau + Σbv).",
        "",
        f"Machine: {meta['machine']}; `uptime` at start: {meta['uptime_at_start']}; at end: "
        f"{meta['uptime_at_end']}.",
        "",
        "| case | N | grid | W2 sparse | W2 dense (ot.emd2) | abs. diff | s (median) | CPU s | "
        "÷ matched | rounds | support | certificate (min r, gap, τ) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cert = r.get("certificate")
        cert_s = (
            f"{'valid' if cert['valid'] else 'INVALID'} ({cert['min_r']:.1e}, "
            f"{cert['gap']:.1e}, {cert['tau']:.1e})"
            if cert
            else "—"
        )
        dense_s = f"{r['w2_dense']:.10f}" if "w2_dense" in r else "—"
        diff_s = f"{r['abs_diff']:.1e}" if "abs_diff" in r else "—"
        lines.append(
            f"| {r['case']} | {r['N']} | {r['grid']} | {r['w2_sparse']:.10f} | {dense_s} | "
            f"{diff_s} | {r['s_sparse']:.2f} | {r['cpu_s']:.2f} | {r['ratio_to_matched']:.2f} | "
            f"{r['rounds']} | {r['support']} | {cert_s} |"
        )
    lines.append(f"\n{meta}")
    (out / "w2_panel.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {out / 'w2_panel.json'} and .md")


#: The flags, declared once: their checks, help and docs come from these Params.
FLAGS = Contract(
    "benchmarks/bench_w2.py",
    [
        Param("repeats", "int", "timed repeats per small case", low=1, default=3),
        Param("threads", "int", "torch threads", low=1, default=2),
        Param("exact_large", "flag", "also run ot.emd2 at 1e4 / 128²", default=False),
        Param("skip_large", "flag", "small cases only", default=False),
        Param("panel", "flag", "the panel of four cases (w2_panel.json)", default=False),
        Param("large_repeats", "int", "repeats at 3e4 / 256²", low=1, default=1),
        Param("progress", "flag", "show the progress bar", default=True),
    ],
)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    FLAGS.add_arguments(ap)
    add_bench_out(ap, "w2.json and w2.md, or w2_panel.json and w2_panel.md with --panel")
    ap.add_argument(
        "--cache",
        type=output_dir,
        default=str(PANEL_CACHE),
        metavar="FOLDER",
        help="--panel: folder of the cached dense values (dense.json) [default: %(default)s]",
    )
    args = FLAGS.parse_args(ap, argv)  # bad flags end here (exit 2), before torch loads
    import torch

    torch.set_num_threads(args.threads)
    if args.panel:
        args.uptime_start = os.popen("uptime").read().strip()
        print(f"[panel] {args.uptime_start}", flush=True)
        return panel(args)
    t0 = time.perf_counter()
    cases = [] if args.skip_large else [(10_000, 128, False)]
    cases += [(N, n, True) for N, n in [(1000, 32), (2000, 48), (3000, 64)]]
    rows = []
    for N, n, with_dense in progress(cases, enabled=args.progress, desc="(N, grid)"):
        rows.append(run(N, n, args.repeats, with_dense))
        if not with_dense:
            # first, so the peak RSS of the process is the sparse solve's (and the data's); the
            # sparse solve is timed over the repeats, the dense one (minutes, GBs) once and last
            rows[-1]["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.exact_large and not args.skip_large:
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
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "w2.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
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
    (out / "w2.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {out / 'w2.json'} and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
