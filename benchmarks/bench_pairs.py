"""Pair forces (value and gradient together) side by side in one run, and the Langevin step's
scaling in N (issue 13, items 1 and 5).

Section ``pairs`` — Mpairs/s (N² / seconds, median over interleaved repeats) at N = 10⁴, p = 16,
float32 (``--dtype float64``), softened Riesz s = p − 2 (ε = 0.1), for

* ``meanfield``: :class:`meanfield.energy.PairInteraction` (the tiled symmetric sums of
  :mod:`meanfield.pairsum`);
* ``previous``: meanfield's implementation before issue 13 (row chunks of 2¹⁸ entries, a
  verbatim copy below), the reference of the ratio;
* ``torch_plain``: a plain torch matrix-product form, 256-row chunks, written for the comparison;
* ``torch_symmetric``: the plain (N, N) form a user would write (one matrix of u, κ and 2κ'
  elementwise, the force from the symmetric coefficient matrix as c.sum(1) ω − c @ ω; O(N²)
  memory, ≈ 2 GB at N = 10⁴ in float32), the reference of the ``× symmetric`` column;
* ``keops``: pykeops LazyTensors (skipped if pykeops is missing or does not compile);
* ``meanfield@FILE`` (with ``--compare-with FILE``): ``pair_sums`` of another copy of
  :mod:`meanfield.pairsum` (e.g. ``git show HEAD:meanfield/pairsum.py > /tmp/pairsum_head.py``),
  so a change is timed against its baseline in the same process;

``--peers`` picks the peer rows (meanfield is always timed).  The GEMM bound is timed in the
same interleaved repeats: a square (n × n) · (n × n) product (``--gemm-size``, default 2048) of
the dtype gives the GEMM rate R (GFLOP/s; sgemm in float32, dgemm in float64), and
R / (3p + 4) flops per ordered pair is the speed of a pair sum that did nothing but the two
products of the tiled symmetric form (N²/2 · 2(p + 2) flops for the distances, N² · 2(p + 1)
for Σ_j c_ij [ω_j, 1]), at that rate: the ``of GEMM bound`` column is Mpairs/s over it.
Then, unless ``--no-other-kernels``, meanfield against ``previous`` for the other kernels
(log, s = 1, s = −1, s = 2.5, Gaussian) at ``--N-other`` (default 3000).
Section ``tiles`` — meanfield's Mpairs/s for several tile sizes, and ``torch_symmetric``'s in
the same interleaved repeats (the ``× symmetric`` column).
Section ``scaling`` — one full projected-Langevin step (the energy of bench_particles.py:
linear alignment on n = 1000 points + Riesz s = p − 2, ε = 0.1, p = 16, float32) at
N = 10³, 3·10³, 10⁴, 3·10⁴: median seconds per step and the peak RSS of a process doing only
that N, with the fitted exponent of time ∝ N^a.

    python benchmarks/bench_pairs.py                     # pairs + tiles + scaling
    python benchmarks/bench_pairs.py --sections pairs    # just the side-by-side table
    python benchmarks/bench_pairs.py --device cuda       # on a GPU (pairs, scaling)
    python benchmarks/bench_pairs.py --sections pairs --p 64 --radius 1.5   # p = 64, float32
    python benchmarks/bench_pairs.py --sections pairs --peers torch_symmetric --no-other-kernels \
        --dtype float64 --compare-with /tmp/pairsum_head.py   # a change against its baseline

At p = 64 (s = 62, ε = 0.1) the range bound of :mod:`meanfield.pairsum` (terms ε^(−64) ≈
2^212) makes meanfield rescale its float32 sums; ``--radius 1.5`` keeps every actual term
u^(−32), u ∈ [0.01, 9], a normal float32 number, so the plain forms run at full speed too
(randn particles give terms ~1e-59, not float32 numbers: meanfield refuses them, the plain
forms compute denormals).

Results go to pairs.{json,md} in ``--out`` (by default a folder outside the repository;
``--name`` changes the stem), with the machine, thread count, load average and wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out, device_name, file_stem, progress, say

#: The peer rows of the pairs section (meanfield itself is always timed).
PEERS = ("previous", "torch_plain", "torch_symmetric", "keops")


# ---------------------------------------------------------------------------------------------
# the peers
# ---------------------------------------------------------------------------------------------
def previous_pair_pass(omega, kernel, want_value=True, want_grad=True, chunk_elements=1 << 18):
    """meanfield's PairInteraction._pair_pass before issue 13 (2-D omega, p ≥ 2), verbatim in
    its arithmetic: row chunks of 2¹⁸ / N rows, r² by addmm, value_sq then grad_coeff_sq_."""
    import torch

    N = omega.shape[-2]
    sq = (omega * omega).sum(-1)
    total = omega.new_zeros(()) if want_value else None
    grad = torch.empty_like(omega) if want_grad else None
    step = max(1, min(N, chunk_elements // N))
    for s in range(0, N, step):
        e = min(N, s + step)
        block = omega[s:e]
        base = sq[s:e].unsqueeze(-1) + sq.unsqueeze(-2)
        r2 = torch.addmm(base, block, omega.T, alpha=-2.0).clamp_min(0.0)
        r2.diagonal(offset=s).fill_(1.0)
        if want_value:
            k = kernel.value_sq(r2)
            total = total + k.sum() - k.diagonal(offset=s).sum()
        if want_grad:
            c = kernel.grad_coeff_sq_(r2.clone() if want_value else r2)
            c.diagonal(offset=s).zero_()
            grad[s:e] = c.sum(-1, keepdim=True) * block - c @ omega
    return total, grad


def torch_plain(omega, s, eps2, chunk=256):
    """A plain torch matrix-product form of the Riesz pair sum: value and Σ_j c_ij(ω_i − ω_j)."""
    import torch

    N = omega.shape[0]
    sq = (omega * omega).sum(1)
    grad = torch.empty_like(omega)
    total = 0.0
    for i in range(0, N, chunk):
        blk = omega[i : i + chunk]
        u = (sq[i : i + chunk, None] + sq[None, :] - 2 * blk @ omega.T).clamp_min_(0) + eps2
        u.diagonal(offset=i).fill_(1.0)
        k = u ** (-s / 2)
        c = (-s) * k / u
        k.diagonal(offset=i).zero_()
        c.diagonal(offset=i).zero_()
        total += float(k.sum())
        grad[i : i + chunk] = c.sum(1, keepdim=True) * blk - c @ omega
    return total, grad


def torch_symmetric(omega, s, eps2):
    """The plain (N, N) symmetric form: u as one matrix (|ω_i|² + |ω_j|² − 2 ω_i·ω_j + ε²),
    κ = u^(−s/2) and 2κ' = −s u^(−s/2 − 1) elementwise, value Σ_{i≠j} κ and force
    Σ_j c_ij (ω_i − ω_j) = c.sum(1) ω_i − (c @ ω)_i; the same dtype as ``omega``."""
    import torch

    sq = (omega * omega).sum(1)
    u = torch.addmm(sq[:, None] + sq[None, :], omega, omega.T, alpha=-2.0)
    u = u.clamp_min_(0.0).add_(eps2).fill_diagonal_(1.0)
    k = u ** (-s / 2)
    c = (-s) * k / u
    k.fill_diagonal_(0.0)
    c.fill_diagonal_(0.0)
    return k.sum(), c.sum(1, keepdim=True) * omega - c @ omega


def keops_pairs(omega, s, eps2):
    """pykeops LazyTensors: value and Σ_j c_ij (ω_i − ω_j) (the i = j terms: c·0 in the
    gradient, ε^(−s) each in the value, removed)."""
    from pykeops.torch import LazyTensor

    x = LazyTensor(omega[:, None, :])
    y = LazyTensor(omega[None, :, :])
    diff = x - y
    u = (diff**2).sum(-1) + eps2
    k = u ** (-s / 2) if float(s / 2).is_integer() else u.power(-s / 2)
    value = k.sum(dim=1).sum() - omega.shape[0] * eps2 ** (-s / 2)
    grad = ((-s) * (k / u) * diff).sum(dim=1)
    return value, grad


# ---------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------
def _sync(device):
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def interleaved_medians(fns: dict, repeats: int, device="cpu") -> dict:
    """Median seconds of each function, the repeats interleaved so load changes hit all."""
    times = {name: [] for name in fns}
    for f in fns.values():
        f()
        _sync(device)
    for _ in range(repeats):
        for name, f in fns.items():
            t0 = time.perf_counter()
            f()
            _sync(device)
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def _particles(N, p, dtype, device, seed=0, radius=None):
    """randn particles, or with ``radius`` their projections onto the sphere of that radius
    (at p = 64 raw randn pair terms ~1e-59 are not float32 numbers: the sums refuse them)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, p, generator=g, dtype=torch.float64)
    if radius is not None:
        x = radius * x / x.norm(dim=1, keepdim=True)
    return x.to(dtype=dtype, device=device)


def gemm_seconds_fn(n: int, dtype, device):
    """A function doing one (n × n) · (n × n) product of ``dtype`` (2 n³ flops): the GEMM rate
    of the machine in the same interleaved repeats as the pair sums."""
    import torch

    g = torch.Generator().manual_seed(1)
    a = torch.randn(n, n, generator=g).to(dtype=dtype, device=device)
    b = torch.randn(n, n, generator=g).to(dtype=dtype, device=device)
    out = torch.empty(n, n, dtype=dtype, device=device)
    return lambda: torch.mm(a, b, out=out)


def load_pairsum_copy(path):
    """Another copy of :mod:`meanfield.pairsum` loaded from ``path`` as a submodule of
    meanfield (its relative imports resolve to the installed package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("meanfield._pairsum_compared", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def section_pairs(
    N,
    p,
    repeats,
    device,
    keops: bool,
    n_other: int,
    radius=None,
    dtype_name="float32",
    peers=PEERS,
    other_kernels=True,
    compare_with=None,
    gemm_size=2048,
) -> dict:
    import torch

    from meanfield.energy import PairInteraction
    from meanfield.kernels import Gaussian, Riesz

    dtype = getattr(torch, dtype_name)
    om = _particles(N, p, dtype, device, radius=radius)
    s, eps = p - 2.0, 0.1
    kern = Riesz(s, eps)
    term = PairInteraction(kern, 1.0)
    all_peers = {
        "previous": lambda: previous_pair_pass(om, kern),
        "torch_plain": lambda: torch_plain(om, s, eps**2),
        "torch_symmetric": lambda: torch_symmetric(om, s, eps**2),
    }
    fns = {"meanfield": lambda: term.value_and_grad(om)}
    if compare_with is not None:
        other = load_pairsum_copy(compare_with)
        scales = {"value_scale": 1.0 / N**2, "grad_scale": 2.0 / N**2}  # as PairInteraction
        fns[f"meanfield@{Path(compare_with).name}"] = lambda: other.pair_sums(om, kern, **scales)
    fns.update({name: f for name, f in all_peers.items() if name in peers})
    fns["gemm"] = gemm_seconds_fn(gemm_size, dtype, device)
    notes = {}
    if keops and "keops" in peers:
        try:
            keops_pairs(om[:512], s, eps**2)  # compile once outside the timing
            fns["keops"] = lambda: keops_pairs(om, s, eps**2)
        except Exception as exc:  # noqa: BLE001  (any build failure: skip the peer, say why)
            notes["keops"] = f"skipped: {type(exc).__name__}: {str(exc)[:200]}"
    with torch.no_grad():
        med = interleaved_medians(fns, repeats, device)
        gemm_gflops = 2 * gemm_size**3 / med.pop("gemm") / 1e9
        bound = gemm_gflops * 1e9 / (3 * p + 4) / 1e6  # Mpairs/s of the products alone
        main = {}
        for name, t in med.items():
            r = {"sec": t, "Mpairs_per_s": N * N / t / 1e6}
            for ref, key in (("previous", "vs_previous"), ("torch_symmetric", "vs_symmetric")):
                if ref in med:
                    r[key] = med[ref] / t
            r["of_gemm_bound"] = r["Mpairs_per_s"] / bound
            main[name] = r
        others = []
        om = om[:n_other]
        kernels = (
            ("log (s = 0, ε = 0)", Riesz(0.0)),
            ("Riesz s = 1, ε = 0.1", Riesz(1.0, 0.1)),
            ("Riesz s = −1 (−|z|), ε = 0", Riesz(-1.0)),
            ("Riesz s = 2.5, ε = 0.3", Riesz(2.5, 0.3)),
            ("Gaussian width 1", Gaussian(1.0)),
        )
        for label, k in kernels if other_kernels else ():
            t2 = PairInteraction(k, 1.0)
            m2 = interleaved_medians(
                {
                    "meanfield": lambda t2=t2: t2.value_and_grad(om),
                    "previous": lambda k=k: previous_pair_pass(om, k),
                },
                max(3, repeats // 2),
                device,
            )
            others.append(
                {
                    "kernel": label,
                    "N": n_other,
                    "meanfield_Mpairs_per_s": n_other**2 / m2["meanfield"] / 1e6,
                    "previous_Mpairs_per_s": n_other**2 / m2["previous"] / 1e6,
                    "ratio": m2["previous"] / m2["meanfield"],
                }
            )
    for name, r in main.items():
        ratios = ", ".join(
            f"{r[key]:.2f}x {ref}"
            for key, ref in (("vs_previous", "previous"), ("vs_symmetric", "symmetric"))
            if key in r
        )
        print(
            f"pairs N={N} p={p} {dtype_name} Riesz s={s:g} eps={eps}: {name:15s} "
            f"{r['Mpairs_per_s']:8.0f} Mpairs/s  ({ratios}; {r['of_gemm_bound']:.0%} of the "
            f"GEMM bound {bound:.0f} Mpairs/s at {gemm_gflops:.0f} GFLOP/s)",
            flush=True,
        )
    for r in others:
        print(
            f"pairs {r['kernel']:28s} meanfield {r['meanfield_Mpairs_per_s']:7.0f}  "
            f"previous {r['previous_Mpairs_per_s']:7.0f} Mpairs/s  ({r['ratio']:.2f}x)",
            flush=True,
        )
    out = {"N": N, "p": p, "s": s, "eps": eps, "radius": radius, "dtype": dtype_name}
    out.update(gemm_size=gemm_size, gemm_gflops=gemm_gflops, gemm_bound_Mpairs=bound)
    out["main"] = main
    return {**out, "other_kernels": others, **notes}


def _tile_label(tile) -> str:
    return f"tile {tile}" if isinstance(tile, int) else str(tile)


def section_tiles(N, p, repeats, device, tiles, radius=None) -> list[dict]:
    import torch

    from meanfield import pairsum
    from meanfield.kernels import Riesz

    om = _particles(N, p, torch.float32, device, radius=radius)
    kern = Riesz(p - 2.0, 0.1)
    fns = {t: (lambda t=t: pairsum.pair_sums(om, kern, tile=t)) for t in tiles}
    fns["torch_symmetric"] = lambda: torch_symmetric(om, p - 2.0, 0.01)  # the reference
    with torch.no_grad():
        med = interleaved_medians(fns, repeats, device)
    rows = [
        {
            "tile": t,
            "Mpairs_per_s": N * N / med[t] / 1e6,
            "vs_symmetric": med["torch_symmetric"] / med[t],
        }
        for t in fns
    ]
    for r in rows:
        print(
            f"tiles N={N} p={p}: {_tile_label(r['tile']):>20}  {r['Mpairs_per_s']:7.0f} Mpairs/s  "
            f"({r['vs_symmetric']:.2f}x symmetric)"
        )
    return rows


def _vm(field: str) -> float:
    """A memory field of /proc/self/status in MiB (nan where there is no /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _reset_peak_rss() -> None:
    """Reset the kernel's peak-RSS mark (Linux: "5" to /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def scaling_one(N: int, p: int, repeats: int, device: str) -> dict:
    """One full projected-Langevin step at this N (run in its own process: its peak RSS)."""
    import numpy as np
    import torch

    from meanfield.domains import Ball
    from meanfield.dynamics.langevin import ProjectedLangevin
    from meanfield.energy import Energy, LinearAlignment, PairInteraction
    from meanfield.kernels import Riesz

    rng = np.random.default_rng(0)
    X = rng.normal(scale=1 / np.sqrt(p), size=(1000, p))
    y = np.sign(X[:, 0] + 1e-12)
    E = Energy(
        [LinearAlignment(X, y, "positive"), PairInteraction(Riesz(p - 2.0, 0.1), 0.1)],
        Ball(p, 3.0),
        dtype=torch.float32,
        device=device,
    )
    step = ProjectedLangevin(E, eta=1e-3, beta=100.0)
    state = step.init(_particles(N, p, torch.float64, "cpu"), seed=1)
    rss_setup = _vm("VmRSS")
    _reset_peak_rss()  # so the peak below is the steps', not the imports' transient one
    with torch.no_grad():
        sec = interleaved_medians({"step": lambda: step.step(state)}, repeats, device)
    out = {"N": N, "p": p, "sec_per_step": sec["step"], "device": device}
    out["threads"] = torch.get_num_threads()
    out["process_peak_rss_MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["rss_after_setup_MiB"] = rss_setup
    out["peak_rss_MiB"] = _vm("VmHWM")  # peak during the steps (after the reset)
    if device.startswith("cuda"):
        out["peak_gpu_MiB"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def section_scaling(Ns, p, repeats, device, show=False) -> dict:
    import numpy as np

    rows = []
    for N in progress(Ns, enabled=show, desc="scaling, N"):
        # small N: cheap steps, more repeats (one step is easily hit by a load spike)
        reps = max(7, repeats) if N <= 3000 else repeats if N < 30000 else max(2, repeats // 2)
        cfg = json.dumps([N, p, reps, device])
        threads = str(torch_threads())
        res = subprocess.run(
            [sys.executable, __file__, "--one", cfg, "--threads", threads],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        say(
            f"scaling p={p} float32 N={N:>6}: {r['sec_per_step'] * 1e3:9.1f} ms/step  "
            f"peak RSS {r['peak_rss_MiB']:7.0f} MiB"
        )
    logN = np.log([r["N"] for r in rows])
    logt = np.log([r["sec_per_step"] for r in rows])
    a_all = float(np.polyfit(logN, logt, 1)[0])
    a_top = float(np.polyfit(logN[-2:], logt[-2:], 1)[0])
    print(f"scaling: time ∝ N^{a_all:.2f} over all N, N^{a_top:.2f} over the two largest")
    return {"rows": rows, "exponent_all": a_all, "exponent_two_largest": a_top}


# ---------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------
def machine() -> dict:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    out = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def markdown(res: dict) -> str:
    lines = []
    if len(res.get("runs", [])) > 1:
        lines += ["Runs merged into this file (each section from the last run that made it):", ""]
    for run in res.get("runs", [res]):
        m = run["machine"]
        lines.append(
            f"Generated by `{run['command']}` on {m['cpu']} ({m['cores']} cores, "
            f"{m['threads']} torch threads, torch {m['torch']}, device {run['device']}), "
            f"load average {run['load_before']} before / {run['load_after']} after, "
            f"wall time {run['wall_s']:.0f} s.\n"
        )
    lines.append("")
    if "pairs" in res:
        P = res["pairs"]
        where = f"on the sphere of radius {P['radius']:g}" if P.get("radius") else "randn"
        dt = P.get("dtype", "float32")
        lines += [
            f"Pair force, value and gradient together: N = {P['N']}, p = {P['p']}, {dt}, "
            f"Riesz s = {P['s']:g}, ε = {P['eps']}, particles {where} "
            "(median of interleaved repeats):",
            "",
        ]
        if "gemm_gflops" in P:
            lines += [
                f"GEMM bound: {P['gemm_bound_Mpairs']:.0f} Mpairs/s = {P['gemm_gflops']:.0f} "
                f"GFLOP/s ({dt} {P['gemm_size']}³ product, same repeats) / (3p + 4) flops "
                "per ordered pair.",
                "",
            ]
        lines += [
            "| implementation | Mpairs/s | × previous | × symmetric | of GEMM bound |",
            "| --- | --- | --- | --- | --- |",
        ]

        def cell(r, key, fmt):
            return format(r[key], fmt) if key in r else ""

        for name, r in P["main"].items():
            lines.append(
                f"| {name} | {r['Mpairs_per_s']:.0f} | {cell(r, 'vs_previous', '.2f')} | "
                f"{cell(r, 'vs_symmetric', '.2f')} | {cell(r, 'of_gemm_bound', '.0%')} |"
            )
        if "keops" in P:
            lines.append(f"| keops | {P['keops']} | | | |")
        lines.append("")
    if "pairs" in res and res["pairs"]["other_kernels"]:
        P = res["pairs"]
        n_o = P["other_kernels"][0]["N"]
        lines += [f"Other kernels, N = {n_o}, p = {P['p']}, {P.get('dtype', 'float32')}:", ""]
        lines += ["| kernel | meanfield Mpairs/s | previous Mpairs/s | × |"]
        lines += ["| --- | --- | --- | --- |"]
        for r in P["other_kernels"]:
            lines.append(
                f"| {r['kernel']} | {r['meanfield_Mpairs_per_s']:.0f} | "
                f"{r['previous_Mpairs_per_s']:.0f} | {r['ratio']:.2f} |"
            )
        lines.append("")
    if "tiles" in res:
        lines += ["| tile rows | Mpairs/s | × symmetric |", "| --- | --- | --- |"]
        for r in res["tiles"]:
            sym = f"{r['vs_symmetric']:.2f}" if "vs_symmetric" in r else ""
            lines.append(f"| {r['tile']} | {r['Mpairs_per_s']:.0f} | {sym} |")
        lines.append("")
    if "scaling" in res:
        S = res["scaling"]
        lines += [
            "Full projected-Langevin step (alignment n = 1000 + Riesz s = p − 2, ε = 0.1), "
            "p = 16, float32:",
            "",
            "| N | ms / step | peak RSS during the steps (MiB) | RSS after set-up (MiB) |",
            "| --- | --- | --- | --- |",
        ]
        for r in S["rows"]:
            lines.append(
                f"| {r['N']} | {r['sec_per_step'] * 1e3:.1f} | {r['peak_rss_MiB']:.0f} | "
                f"{r.get('rss_after_setup_MiB', float('nan')):.0f} |"
            )
        lines += [
            "",
            f"Fitted exponent: time ∝ N^{S['exponent_all']:.2f} over all four N, "
            f"N^{S['exponent_two_largest']:.2f} over the two largest.",
            "",
        ]
    return "\n".join(lines)


_RUN_KEYS = ("command", "machine", "device", "load_before", "load_after", "wall_s")


#: The sections of the benchmark.
SECTIONS = ("pairs", "tiles", "scaling")

#: The flags, declared once: their checks, help and docs come from these Params (the device,
#: the output folder and the file stem are checked by their own argparse types).
FLAGS = Contract(
    "benchmarks/bench_pairs.py",
    [
        Param("sections", "choice", "sections to run", choices=SECTIONS, sequence=True,
              default=SECTIONS),
        Param("N", "int", "N of pairs and tiles", low=2, default=10000),
        Param("N_other", "int", "N of the other-kernel rows", low=2, default=3000),
        Param("p", "int", "particle dimension p", low=1, default=16),
        Param("radius", "real", "particles on the sphere of this radius (pairs and tiles; "
              "None: randn; p = 64 needs one, e.g. 1.5 or 3)", low=0.0, low_open=True,
              optional=True, default=None),
        Param("repeats", "int", "timed repeats", low=1, default=7),
        Param("threads", "int", "torch threads", low=1, default=2),
        Param("tiles", "int", "tile sizes", low=1, sequence=True,
              default=(512, 1024, 2048, 4096)),
        Param("scaling_N", "int", "N of the scaling section", low=2, sequence=True,
              default=(1000, 3000, 10000, 30000)),
        Param("keops", "flag", "time the KeOps rows (when pykeops is installed)", default=True),
        Param("dtype", "choice", "dtype of the pairs section", choices=("float32", "float64"),
              default="float32"),
        Param("peers", "choice", "peer rows of the pairs section", choices=PEERS,
              sequence=True, default=PEERS),
        Param("other_kernels", "flag", "time the other-kernel rows", default=True),
        Param("compare_with", "string", "another copy of meanfield/pairsum.py to time",
              optional=True, default=None, examples=("/tmp/pairsum_head.py",)),
        Param("gemm_size", "int", "n of the n×n GEMM of the bound", low=16, default=2048),
        Param("progress", "flag", "show the progress bar", default=True),
    ],
)  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    FLAGS.add_arguments(ap)
    ap.add_argument("--device", type=device_name, default="cpu", help="cpu, cuda or cuda:K")
    add_bench_out(ap, "NAME.json and NAME.md; sections not rerun are kept from NAME.json")
    ap.add_argument("--name", type=file_stem, default="pairs", help="file stem [default: pairs]")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = FLAGS.parse_args(ap, argv)  # bad flags end here (exit 2), before torch loads
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error(f"argument --device: {args.device}: no CUDA device is available to torch")
    torch.set_num_threads(args.threads)
    if args.one:
        N, p, repeats, device = json.loads(args.one)
        print(json.dumps(scaling_one(N, p, repeats, device)))
        return
    sections = args.sections
    t0 = time.time()
    given = sys.argv[1:] if argv is None else argv
    res = {
        "command": " ".join(["python benchmarks/bench_pairs.py", *given]),
        "machine": machine(),
        "device": args.device,
        "load_before": [round(x, 1) for x in os.getloadavg()],
    }
    if "pairs" in sections:
        res["pairs"] = section_pairs(
            args.N,
            args.p,
            args.repeats,
            args.device,
            args.keops,
            args.N_other,
            args.radius,
            dtype_name=args.dtype,
            peers=args.peers,
            other_kernels=args.other_kernels,
            compare_with=args.compare_with,
            gemm_size=args.gemm_size,
        )
    if "tiles" in sections:
        res["tiles"] = section_tiles(
            args.N, args.p, args.repeats, args.device, args.tiles, args.radius
        )
    if "scaling" in sections:
        res["scaling"] = section_scaling(
            args.scaling_N,
            args.p,
            max(3, args.repeats // 2),
            args.device,
            show=args.progress,
        )
    res["load_after"] = [round(x, 1) for x in os.getloadavg()]
    res["wall_s"] = time.time() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / args.name
    if out.with_suffix(".json").exists():  # keep the sections this run did not redo
        old = json.loads(out.with_suffix(".json").read_text())
        runs = old.get("runs", [{k: old[k] for k in _RUN_KEYS if k in old}])
        res = {**{k: v for k, v in old.items() if k not in (*_RUN_KEYS, "runs")}, **res}
        res["runs"] = [*runs, {k: res[k] for k in _RUN_KEYS}]
    out.with_suffix(".json").write_text(json.dumps(res, indent=1))
    out.with_suffix(".md").write_text(markdown(res))
    print(markdown(res))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
