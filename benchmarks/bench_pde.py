"""Speed of the McKean–Vlasov grid solver and of the particle-vs-grid distances.

Three measurements, printed side by side as medians over repeats:

1. grid steps per second for p = 1 (M = 256 … 4096 cells) and p = 2 (64² … 512²), with and
   without the nonlocal (FFT, log-kernel) term, and the fitted exponent b of
   time per step ∝ (M log M)^b (b ≈ 1 expected once the fixed per-step overhead is amortised);
2. time to accuracy on the Ornstein–Uhlenbeck Fokker–Planck problem (L1 error against the
   exact density at t = 1, targets 1e-3 … 1e-6): meanfield's explicit SG (compiled loop)
   and second-order implicit ``sg-mprk22`` swept over grids and steps, against py-pde's
   compiled explicit stepper (a benchmark-only dependency: ``pip install ".[bench]"``) swept
   over grids, both in this run; the fastest run meeting each target, the ratio, and the
   ratio interpolated on each solver's error–time Pareto front; plus the cost of one
   implicit step against a plain ``solve_banded`` (M = 1024 … 16384).  Writes
   ``pde_ou.{json,md}`` into ``--out`` (about 15 minutes, most of it py-pde's numba
   compilation, ≈ 25 s per grid size);
3. W2 between N particles and a 2D grid density: exact ``ot.emd2`` (time and peak memory, each
   case in a fresh subprocess) and sliced W2, including N = 10⁴ on a 128² grid; this
   measurement sets ``meanfield.ot.distance.EXACT_MAX_PAIRS``;
5. the grid in p = 3 on the Coulomb gas of R³ (V = |ω|²/2, cell-integrated k = 1/|z|, λ = 1/2,
   the model of ``meanfield.studies.coulomb3d``) for n³ = 32³ … 128³ cells, each size in a
   fresh one-thread subprocess: set-up (cell-integrated kernel and its FFT), the pair
   stiffness (power iteration, paid once before the first explicit step), one δE/δρ
   evaluation (the FFT convolution), one explicit step (medians over repeats) and peak
   resident memory (``ru_maxrss``); and the β = ∞ equilibrium solve at 32³ (48³ if it
   finishes within ``--stationary-timeout``).  Writes ``pde3d.{json,md}`` into ``--out``.

``--out`` is by default a folder outside the repository (``--help``); the committed results are
in ``benchmarks/results`` (``--out benchmarks/results`` refreshes them); ``--quick`` runs write
``pde_ou_quick`` and ``pde3d_quick``.

Run: ``python benchmarks/bench_pde.py`` (about 8 minutes on 2 cores, 4 of them the exact
N = 10⁴ transport); ``--quick`` for a smaller version, ``--skip-pypde`` without py-pde,
``--sections 1,2`` for a subset, ``--rate`` to add the W2-vs-N study; ``--sections 5`` for
the 3D grid (not in the default set; about 7 minutes, ``--quick``: 16³ and 32³, ~30 s).

Grids of ≥ 65536 cells run 3–5× faster per step when glibc keeps freed temporaries instead of
returning them to the system (every fresh 0.5 MB temporary otherwise costs page faults):
``MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=1000000000 python benchmarks/...``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out, int_range, progress, say

#: Progress bars over each section's cases (``main`` sets it; off when the functions are
#: called from Python, as the tests do).
PROGRESS = False

#: The smallest grid the solver takes (meanfield.pde.grid.MIN_CELLS, without importing torch).
MIN_CELLS = 4


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


# ------------------------------------------------------------------------------------------
# 1. steps per second
# ------------------------------------------------------------------------------------------
def step_rate(dim: int, n: int, nonlocal_term: bool, scheme: str, steps: int, repeats: int):
    """Median seconds per explicit step (potential + fluxes + CFL + update)."""
    from meanfield.domains import Box
    from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    from meanfield.kernels import Riesz
    from meanfield.pde import Density, Grid, McKeanVlasov

    dom = Box(dim, 2.0)
    terms = [QuadraticPotential(1.0)]
    if nonlocal_term:
        terms.append(PairInteraction(Riesz(0.0), 0.5))
    g = Grid(dom, n)
    t0 = time.perf_counter()
    eq = McKeanVlasov(Energy(terms, dom), g, 10.0, scheme=scheme)
    setup = time.perf_counter() - t0
    rho0 = Density.gaussian(g, 0.0, 0.5).data

    def run():
        rho = rho0
        for _ in range(steps):
            plan = eq.prepare_step(rho)  # potential, fluxes, CFL bound
            rho = eq.advance(rho, 0.5 * plan.dt_stable, plan)

    run()  # warm-up (allocations, FFT plans)
    per_step = _median_time(run, repeats) / steps
    return {
        "dim": dim,
        "n": n,
        "M": g.size,
        "nonlocal": nonlocal_term,
        "scheme": scheme,
        "s_per_step": per_step,
        "steps_per_s": 1.0 / per_step,
        "setup_s": setup,
    }


def fit_mlogm(rows):
    """Exponent b in time ∝ (M log M)^b over the rows (least squares in log–log)."""
    M = np.array([r["M"] for r in rows], dtype=float)
    t = np.array([r["s_per_step"] for r in rows])
    return float(np.polyfit(np.log(M * np.log(M)), np.log(t), 1)[0])


# ------------------------------------------------------------------------------------------
# 2. OU: time to accuracy, meanfield vs py-pde's compiled explicit stepper
# ------------------------------------------------------------------------------------------
OU = {"L": 5.0, "beta": 1.0, "m0": 1.0, "s0": 0.5, "T": 1.0}
#: L1 accuracies at which the solvers are compared (issue 13: every accuracy 1e-3 … 1e-6).
TARGETS = (1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6)


def _ou_moments(t):
    m = OU["m0"] * math.exp(-t)
    v = 1 / OU["beta"] + (OU["s0"] ** 2 - 1 / OU["beta"]) * math.exp(-2 * t)
    return m, v


def _adaptive_median(
    fn, budget: float = 2.0, least: int = 5, most: int = 15, sample: float = 2e-3
) -> float:
    """Median seconds per call of ``fn``, timed as :mod:`timeit` does.

    One timed call sizes the rest (and warms caches).  Each repeat is the mean over enough
    back-to-back calls to last ``sample`` seconds: a call of 20 µs timed alone is at the
    mercy of the timer's resolution and of one interruption by another process.  As many
    repeats as fit in ``budget`` seconds (``least`` to ``most``).  Both solvers of the
    OU comparison are timed by this function.
    """
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(sample / one))
    repeats = max(least, min(most, int(budget / (one * inner))))

    def batch():
        for _ in range(inner):
            fn()

    return _median_time(batch, repeats) / inner


def ou_meanfield(n: int, scheme: str, dt: float | None = None):
    """One meanfield run on the OU problem: L1 error at T and the time of a whole solve call.

    ``call_s`` is the median wall time of ``eq.solve`` (validation, guard, trackers, result);
    ``stepping_s`` subtracts the same call to T/1000 (the fixed cost); it is NaN when below
    5 % of the call, where the difference of two timings is noise.
    """
    from meanfield.domains import Box
    from meanfield.energy import Energy, QuadraticPotential
    from meanfield.pde import Density, Grid, McKeanVlasov

    dom = Box(1, OU["L"])
    g = Grid(dom, n)
    eq = McKeanVlasov(Energy([QuadraticPotential(1.0)], dom), g, OU["beta"], scheme=scheme)
    rho0 = Density.gaussian(g, OU["m0"], OU["s0"])
    kw = {"safety": 0.9} if dt is None else {"dt": dt}  # py-pde runs at 0.9 of its bound
    res = eq.solve(rho0, OU["T"], **kw)  # warm-up: compiled loops (disk cache), face rates
    m, v = _ou_moments(OU["T"])
    exact = Density.gaussian(g, m, math.sqrt(v), normalise=False).data
    err = float(np.abs(res.state.data - exact).sum() * g.h[0])
    call = _adaptive_median(lambda: eq.solve(rho0, OU["T"], **kw))
    tiny = _adaptive_median(lambda: eq.solve(rho0, OU["T"] / 1000, **kw))
    return {
        "solver": f"meanfield {scheme}",
        "n": n,
        "dt": dt if dt is not None else float(res.dt_max),
        "L1": err,
        "call_s": call,
        "stepping_s": call - tiny if call - tiny > 0.05 * call else math.nan,
        "steps": res.n_steps,
        "min_rho": float(res.state.data.min()),
    }


def ou_pypde(n: int):
    """py-pde's explicit Euler stepper (numba backend) at 0.9 × its stability limit h²β/2.

    The stepper is py-pde's compiled inner loop (``ExplicitSolver.make_stepper``), timed after
    its compilation (``compile_s``, paid once per grid size) and without py-pde's per-call
    set-up; the error is taken against the exact density at the time the stepper stopped.
    """
    import warnings

    import pde
    from pde.solvers import ExplicitSolver

    L = OU["L"]
    h = 2 * L / n
    grid = pde.CartesianGrid([[-L, L]], [n])
    x = grid.axes_coords[0]
    c0 = np.exp(-((x - OU["m0"]) ** 2) / (2 * OU["s0"] ** 2))
    state = pde.ScalarField(grid, c0 / (c0.sum() * h))
    # ∂_t c = β⁻¹ c'' + (x c)' with no flux through the walls, β⁻¹ c' + x c = 0 at x = ±L:
    # the Robin condition ∂_n c + Lβ c = 0 on both walls (at t = 1 the density at the walls
    # is ~1e-6, so a zero-derivative wall would inject ~5e-5 of mass and floor the error)
    eq = pde.PDE(
        {"c": f"{1 / OU['beta']} * laplace(c) + c + x * d_dx(c)"},
        bc={"mixed": L * OU["beta"]},
    )
    dt = 0.9 * h * h * OU["beta"] / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        stepper = ExplicitSolver(eq, backend="numba").make_stepper(state, dt=dt)
        field = state.copy()
        t_final = stepper(field, 0.0, OU["T"])  # first call: the rest of the compilation
        compile_s = time.perf_counter() - t0

        def run():
            stepper(state.copy(), 0.0, OU["T"])

        call = _adaptive_median(run)
    m, v = _ou_moments(t_final)
    exact = np.exp(-((x - m) ** 2) / (2 * v)) / math.sqrt(2 * math.pi * v)
    return {
        "solver": "py-pde explicit (numba)",
        "n": n,
        "dt": dt,
        "L1": float(np.abs(field.data - exact).sum() * h),
        "call_s": call,
        "stepping_s": call,
        "steps": int(round(t_final / dt)),
        "min_rho": float(field.data.min()),
        "compile_s": compile_s,
        "t_final": float(t_final),
    }


def pareto(rows, key="call_s") -> list:
    """Runs no other run beats in both error and time, sorted by error (time decreasing)."""
    front, best = [], math.inf
    for r in sorted(rows, key=lambda r: (r["L1"], r[key])):
        if r[key] < best:
            front.append(r)
            best = r[key]
    return front


def time_at_accuracy(rows, target: float, key: str = "call_s"):
    """(fastest run with L1 ≤ target or None, time interpolated on the Pareto front).

    The interpolation is linear in log(time) against log(L1) between the two front runs
    that bracket the target: the cost of a run of error exactly ``target``, which removes
    the bias of a coarse sweep (a run much more accurate than asked for).
    """
    ok = [r for r in rows if r["L1"] <= target]
    best = min(ok, key=lambda r: r[key]) if ok else None
    if best is None:
        return None, math.nan
    front = pareto(rows, key)
    for lo, hi in zip(front, front[1:], strict=False):
        if lo["L1"] <= target < hi["L1"]:
            slope = math.log(hi[key] / lo[key]) / math.log(hi["L1"] / lo["L1"])
            return best, lo[key] * (target / lo["L1"]) ** slope
    return best, best[key]


OU_SWEEPS = {
    # dense near L1 = 1e-3 (n ≈ 64-96), where the Pareto interpolation needs close neighbours
    "sg": [*range(48, 97, 8), 112, 128, 160, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072],
    "mprk": [64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096],
    "dts": [0.2, 0.1, 0.05, 0.025, 0.0125, 0.00625, 0.003125, 0.0015625],
    "pypde": [96, 128, 181, 256, 362, 512, 724, 1024, 1448, 2048, 2896, 4096, 5792],
    "implicit_step": [1024, 2048, 4096, 8192, 16384],
    "implicit_step_2d": [64, 128, 256],
}
OU_SWEEPS_QUICK = {
    "sg": [64, 128, 256],
    "mprk": [64, 128, 256],
    "dts": [0.1, 0.025],
    "pypde": [96, 181],
    "implicit_step": [1024, 4096],
    "implicit_step_2d": [64],
}


def _ou_sweeps(sweeps: dict, skip_pypde: bool):
    runs = [("sg", n, None) for n in sweeps["sg"]]
    runs += [("sg-mprk22", n, dt) for n in sweeps["mprk"] for dt in sweeps["dts"]]
    runs += [] if skip_pypde else [("py-pde", n, None) for n in sweeps["pypde"]]
    rows, pp = [], []
    for scheme, n, dt in progress(runs, enabled=PROGRESS, desc="OU runs"):
        if scheme == "py-pde":
            pp.append(ou_pypde(n))
        else:
            rows.append(ou_meanfield(n, scheme, dt) if dt else ou_meanfield(n, scheme))
    return rows, pp


def banded_step_scaling(sizes=(1024, 2048, 4096, 8192, 16384)) -> list:
    """Seconds per implicit-Euler SG step against a plain ``scipy.linalg.solve_banded`` step
    with precomputed coefficients (the reference of issue 13), and per MPRK22 step."""
    return [_implicit_step_times(M) for M in sizes]


def _implicit_step_times(M: int) -> dict:
    from scipy.linalg import solve_banded

    from meanfield.domains import Box
    from meanfield.pde import Density, Grid
    from meanfield.pde.schemes import ScharfetterGummel, ScharfetterGummelMPRK

    g = Grid(Box(1, OU["L"]), M)
    U = 0.5 * g.centers[:, 0] ** 2
    rho = Density.gaussian(g, OU["m0"], OU["s0"]).data
    sg = ScharfetterGummel(implicit=True).bind(g, OU["beta"])
    mp, dt = ScharfetterGummelMPRK().bind(g, OU["beta"]), 0.01
    ((c_lr, c_rl),) = sg.face_rates(U)
    ab = np.zeros((3, M))
    ab[1] = 1.0
    ab[1, :-1] += dt * c_lr
    ab[1, 1:] += dt * c_rl
    ab[0, 1:] = -dt * c_rl
    ab[2, :-1] = -dt * c_lr
    reps = 200 if M <= 4096 else 50
    t_ref = _median_time(lambda: [solve_banded((1, 1), ab, rho) for _ in range(reps)], 5)
    t_ie = _median_time(lambda: [sg.advance(rho, U, dt) for _ in range(reps)], 5)
    t_mp = _median_time(lambda: [mp.advance(rho, U, dt) for _ in range(reps)], 5)
    t_frozen = _median_time(lambda: sg.advance_frozen(rho, U, dt, reps), 5)
    return {
        "M": M,
        "solve_banded_s": t_ref / reps,
        "implicit_euler_s": t_ie / reps,
        "implicit_euler_batched_s": t_frozen / reps,
        "mprk22_s": t_mp / reps,
    }


def implicit_step_2d(n: int) -> dict:
    """Seconds per MPRK22 step on an n² grid: the sparse LU solve against the Strang split
    into tridiagonal lines (``sg-mprk22-split``), OU potential, Δt = 0.01."""
    from meanfield.domains import Box
    from meanfield.pde import Density, Grid
    from meanfield.pde.schemes import ScharfetterGummelMPRK

    g = Grid(Box(2, OU["L"]), n)
    U = 0.5 * (g.centers**2).sum(1).reshape(g.shape)
    rho = Density.gaussian(g, OU["m0"], OU["s0"]).data
    out = {"n": n, "M": g.size}
    for key, split in (("sparse_lu_s", False), ("split_s", True)):
        sch = ScharfetterGummelMPRK(split=split).bind(g, OU["beta"])
        out[key] = _adaptive_median(lambda sch=sch: sch.advance(rho, U, 0.01))
    return out


def ou_markdown(meta, table, scaling, scaling_2d=()) -> str:
    lines = [
        "OU Fokker–Planck to t = 1 on [−5, 5] (β = 1, ρ0 = N(1, 0.5²)); L1 error against the "
        "exact density. meanfield: whole `eq.solve` calls (validation, guard, result); py-pde: "
        "its compiled explicit stepper alone (numba, 0.9 × its stability limit, after "
        "compilation). Per-call times, both solvers alike: medians of repeats, each repeat the "
        f"mean of back-to-back calls lasting ≥ 2 ms; {meta['machine_note']}.",
        "",
        "| L1 target | meanfield fastest run | time | py-pde fastest run | time | ratio (runs) "
        "| ratio (Pareto interp.) | ratio (stepping) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['target']:.0e} | {r['mf_run']} | {r['mf_s']:.3g} s | {r['pp_run']} | "
            f"{r['pp_s']:.3g} s | {r['ratio_runs']:.1f} | {r['ratio_interp']:.1f} | "
            f"{r['ratio_stepping']:.1f} |"
        )
    lines += [
        "",
        "Ratio (stepping): against meanfield's call less its fixed cost (the same call to "
        "t = 10⁻³), over the runs where that difference exceeds 5 % of the call (the rest is "
        "timing noise).",
        "",
        "Implicit step cost (1D, one step; plain `solve_banded` with precomputed coefficients "
        "as the reference):",
        "",
        "| M | solve_banded | sg-implicit step | sg-implicit, batched | sg-mprk22 step |",
        "|---|---|---|---|---|",
    ]
    for r in scaling:
        lines.append(
            f"| {r['M']} | {r['solve_banded_s'] * 1e6:.1f} µs | "
            f"{r['implicit_euler_s'] * 1e6:.1f} µs | "
            f"{r['implicit_euler_batched_s'] * 1e6:.1f} µs | {r['mprk22_s'] * 1e6:.1f} µs |"
        )
    if scaling_2d:
        lines += [
            "",
            "One `sg-mprk22` step in 2D: sparse LU against the Strang split into lines:",
            "",
            "| grid | sparse LU | split (`sg-mprk22-split`) | ratio |",
            "|---|---|---|---|",
        ]
        for r in scaling_2d:
            lines.append(
                f"| {r['n']}² | {r['sparse_lu_s'] * 1e3:.2f} ms | {r['split_s'] * 1e3:.2f} ms | "
                f"{r['sparse_lu_s'] / r['split_s']:.0f}× |"
            )
    return "\n".join(lines) + "\n"


def _label(r) -> str:
    if r is None:
        return "not reached"
    name = r["solver"].replace("meanfield ", "").replace(" (numba)", "")
    extra = f", dt={r['dt']:.3g}" if "mprk" in name else ""
    return f"{name} n={r['n']}{extra}"


def section_ou(quick: bool, skip_pypde: bool = False, out=None, sweeps=None) -> dict:
    """Time to accuracy on the OU problem; prints the table, writes ``out``.{json,md}.

    ``sweeps`` overrides :data:`OU_SWEEPS` (grids, steps, py-pde grids, implicit-step sizes).
    """
    print("\n== 2. OU Fokker-Planck to t = 1: time to accuracy, meanfield vs py-pde ==")
    start = time.perf_counter()
    meta = machine_info()
    sweeps = sweeps or (OU_SWEEPS_QUICK if quick else OU_SWEEPS)
    rows, pp = _ou_sweeps(sweeps, skip_pypde)
    table = []
    timed = [r for r in rows if math.isfinite(r["stepping_s"])]  # stepping above the noise
    for target in TARGETS:
        a, ta = time_at_accuracy(rows, target)
        b, tb = time_at_accuracy(pp, target)
        a2, _ = time_at_accuracy(timed, target, "stepping_s")
        row = {
            "target": target,
            "mf_run": _label(a),
            "mf_s": a["call_s"] if a else math.nan,
            "pp_run": _label(b),
            "pp_s": b["call_s"] if b else math.nan,
            "ratio_runs": b["call_s"] / a["call_s"] if a and b else math.nan,
            "ratio_interp": tb / ta if a and b else math.nan,
            "ratio_stepping": b["stepping_s"] / a2["stepping_s"] if a2 and b else math.nan,
        }
        table.append(row)
    scaling = banded_step_scaling(sweeps["implicit_step"])
    scaling_2d = [implicit_step_2d(n) for n in sweeps.get("implicit_step_2d", ())]
    meta.update(
        wall_s=time.perf_counter() - start,
        loadavg_end=list(os.getloadavg()),
        machine_note=(
            f"{meta['cpu_count']} CPUs shared with other jobs (1-minute load average "
            f"{meta['loadavg_start'][0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end), "
            f"wall time {time.perf_counter() - start:.0f} s"
        ),
    )
    md = ou_markdown(meta, table, scaling, scaling_2d)
    print(md)
    payload = {"meta": meta, "table": table, "meanfield": rows, "pypde": pp}
    payload["implicit_step"] = scaling
    payload["implicit_step_2d"] = scaling_2d
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(payload, indent=1))
        out.with_suffix(".md").write_text(md)
    return payload


# ------------------------------------------------------------------------------------------
# 3. W2 particles vs 2D grid
# ------------------------------------------------------------------------------------------
_W2_CHILD = r"""
import json, resource, sys, time
import numpy as np
from meanfield.domains import Box
from meanfield.pde import Density, Grid
from meanfield.ot import Measure, w2
N, n, method = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
g = Grid(Box(2, 3.0), n)
rho = Density.gaussian(g, 0.0, 0.8)
x = np.random.default_rng(0).normal(scale=0.8, size=(N, 2)).clip(-3, 3)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
w = w2(Measure.from_particles(x), Measure.from_density(rho), method, n_projections=200).distance
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"N": N, "grid": n, "method": method, "w2": w, "s": dt,
                  "peak_MB": peak / 1024, "delta_MB": (peak - base) / 1024}))
"""


def w2_case(N: int, n: int, method: str, timeout: float):
    try:
        out = subprocess.run(
            [sys.executable, "-c", _W2_CHILD, str(N), str(n), method],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
    except subprocess.TimeoutExpired:
        return {
            "N": N,
            "grid": n,
            "method": method,
            "w2": math.nan,
            "s": math.inf,
            "peak_MB": math.nan,
            "delta_MB": math.nan,
            "note": f"> {timeout:.0f} s",
        }
    if out.returncode != 0:
        return {
            "N": N,
            "grid": n,
            "method": method,
            "w2": math.nan,
            "s": math.nan,
            "peak_MB": math.nan,
            "delta_MB": math.nan,
            "note": out.stderr.strip().splitlines()[-1][:60],
        }
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------
# 5. the grid in p = 3 (Coulomb gas of R³)
# ------------------------------------------------------------------------------------------

_GRID3D_CHILD = r"""
import json, resource, sys, time
import numpy as np
import torch
torch.set_num_threads(1)
from meanfield.pde import Density, Grid, McKeanVlasov
from meanfield.studies.coulomb3d import ball_energy
n, repeats = int(sys.argv[1]), int(sys.argv[2])
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux -> MiB
energy = ball_energy()
grid = Grid(energy.domain, n)
rho0 = Density.gaussian(grid, 0.0, 0.5).data
base = rss()
t0 = time.perf_counter()
eq = McKeanVlasov(energy, grid, 10.0)  # cell-integrated kernel + its real FFT
setup = time.perf_counter() - t0
peak_setup = rss()
ge, sch = eq.grid_energy, eq.scheme
t0 = time.perf_counter()
stiff = ge.pair_stiffness  # power iteration, paid once before the first explicit step
stiffness_s = time.perf_counter() - t0
def potential():
    return ge.potential(rho0)
def step():
    U = ge.potential(rho0)
    out, inn, dt = sch.prepare(rho0, U, stiff * rho0.max())
    return sch.advance(rho0, U, 0.5 * dt, out, inn)
def median(fn):
    fn()  # warm-up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))
pot_s, step_s = median(potential), median(step)
conv = next(iter(ge.pair.values()))[1]
print(json.dumps({"n": n, "cells": grid.size, "h": grid.h[0], "fft_shape": list(conv.padded),
                  "setup_s": setup, "stiffness_s": stiffness_s, "potential_s": pot_s,
                  "step_s": step_s, "repeats": repeats, "base_MB": base,
                  "peak_setup_MB": peak_setup, "peak_MB": rss(), "delta_MB": rss() - base,
                  "torch_threads": torch.get_num_threads()}))
"""

_STATIONARY3D_CHILD = r"""
import json, resource, sys, time
import torch
torch.set_num_threads(1)
from meanfield.studies.coulomb3d import grid_equilibrium
n = int(sys.argv[1])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
rho, report, info = grid_equilibrium(n)  # tol 1e-8 on the Frank-Wolfe gap, as the study
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"n": n, "cells": rho.grid.size, "h": info["h"], "wall_s": wall,
                  "converged": bool(report.converged), "iterations": int(report.iterations),
                  "gap": float(report.residual), "radius_error": info["radius_error"],
                  "flatness": info["flatness"], "peak_MB": peak, "delta_MB": peak - base}))
"""


def _child(code: str, args, timeout: float) -> dict:
    """Run ``code`` in a fresh one-thread interpreter; its last stdout line is JSON."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    try:
        out = subprocess.run(
            [sys.executable, "-c", code, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"note": f"> {timeout:.0f} s (stopped)"}
    if out.returncode != 0:
        return {"note": (out.stderr.strip().splitlines() or ["failed"])[-1][:80]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine_info() -> dict:
    import torch

    info = {
        "machine": platform.node(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": 1,
        "loadavg_start": list(os.getloadavg()),
    }
    try:
        import scipy

        info["scipy"] = scipy.__version__
    except ImportError:  # pragma: no cover - scipy is a dependency
        pass
    return info


def grid3d_markdown(meta: dict, rows: list, stationary: list) -> str:
    lines = [
        "Grid in p = 3, Coulomb gas of R³ (V = |ω|²/2, cell-integrated k = 1/|z|, λ = 1/2, "
        f"box [−{meta['box_half_width']}, {meta['box_half_width']}]³); one torch thread, each size "
        f"in a fresh process; medians of {meta['repeats']} repeats; {meta['machine_note']}.",
        "",
        "| cells | FFT shape | set-up s | stiffness s (once) | δE/δρ s | explicit step s "
        "| peak RSS MiB | + over the interpreter MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "note" in r:
            lines.append(f"| {r['n']}³ | | {r['note']} | | | | | |")
            continue
        fft = "×".join(str(k) for k in r["fft_shape"])
        lines.append(
            f"| {r['n']}³ | {fft} | {r['setup_s']:.2f} | {r['stiffness_s']:.2f} | "
            f"{r['potential_s']:.4f} | {r['step_s']:.4f} | {r['peak_MB']:.0f} | "
            f"{r['delta_MB']:.0f} |"
        )
    lines += [
        "",
        "β = ∞ equilibrium (`equilibrium_measure`, Frank–Wolfe gap ≤ 1e-8):",
        "",
        "| cells | wall s | converged | iterations | radius error | flatness | peak RSS MiB |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in stationary:
        if "note" in r:
            lines.append(f"| {r['n']}³ | {r['note']} | | | | | |")
            continue
        lines.append(
            f"| {r['n']}³ | {r['wall_s']:.1f} | {r['converged']} | {r['iterations']} | "
            f"{r['radius_error']:.2e} | {r['flatness']:.1e} | {r['peak_MB']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def section_grid3d(
    quick: bool,
    sizes=None,
    stationary=None,
    stationary_timeout: float = 200.0,
    out=None,
) -> dict:
    """Time and memory of the 3D grid; writes ``out``.json and ``out``.md (None: no files)."""
    print("\n== 5. grid in p = 3: Coulomb gas of R^3 (one thread, fresh process per size) ==")
    from meanfield.studies.coulomb3d import BOX_HALF_WIDTH

    if sizes is None:
        sizes = [16, 32] if quick else [32, 48, 64, 96, 128]
    if stationary is None:
        stationary = [16] if quick else [32, 48]
    t_start = time.perf_counter()
    meta = {
        **machine_info(),
        "box_half_width": BOX_HALF_WIDTH,
        "beta_steps": 10.0,
        "scheme": "upwind, order 2",
        "machine_note": "2-core shared CPU, other jobs running",
        "repeats": "9 (5 from 96³)",
    }
    print(
        f"{'cells':>6} {'FFT':>12} {'setup s':>8} {'stiff s':>8} {'dE/drho s':>10} "
        f"{'step s':>8} {'peak MiB':>9} {'+MiB':>6}"
    )
    rows = []
    for n in progress(sizes, enabled=PROGRESS, desc="3D grids"):
        repeats = 5 if n >= 96 else 9
        r = {"n": n, **_child(_GRID3D_CHILD, [n, repeats], 600)}
        rows.append(r)
        if "note" in r:
            say(f"{n:>4}^3 {r['note']}")
            continue
        fft = "x".join(str(k) for k in r["fft_shape"])
        say(
            f"{n:>4}^3 {fft:>12} {r['setup_s']:>8.2f} {r['stiffness_s']:>8.2f} "
            f"{r['potential_s']:>10.4f} {r['step_s']:>8.4f} {r['peak_MB']:>9.0f} "
            f"{r['delta_MB']:>6.0f}"
        )
    print("beta = inf equilibrium (Frank-Wolfe gap <= 1e-8):")
    st = []
    for n in progress(stationary, enabled=PROGRESS, desc="3D equilibria"):
        r = {"n": n, **_child(_STATIONARY3D_CHILD, [n], stationary_timeout)}
        st.append(r)
        if "note" in r:
            say(f"{n:>4}^3 {r['note']}")
            continue
        say(
            f"{n:>4}^3 {r['wall_s']:>8.1f} s, converged {r['converged']}, "
            f"{r['iterations']} iterations, radius error {r['radius_error']:.2e}, "
            f"peak {r['peak_MB']:.0f} MiB"
        )
    meta["total_wall_s"] = time.perf_counter() - t_start
    meta["loadavg_end"] = list(os.getloadavg())
    res = {"meta": meta, "rows": rows, "stationary": st}
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(res, indent=1))
        out.with_suffix(".md").write_text(grid3d_markdown(meta, rows, st))
        print(f"wrote {out.with_suffix('.json')} and .md ({meta['total_wall_s']:.0f} s)")
    return res


# ------------------------------------------------------------------------------------------
def section_steps(quick: bool, rep: int) -> None:
    print("\n== 1. grid steps per second (explicit upwind, order 2; median of", rep, "runs) ==")
    sizes = {1: [256, 512, 1024, 2048, 4096, 16384, 65536], 2: [64, 128, 256, 512]}
    if quick:
        sizes = {1: [256, 1024, 4096], 2: [64, 128, 256]}
    print(
        f"{'p':>2} {'cells':>9} {'M':>8} | {'local steps/s':>13} | {'+FFT steps/s':>12} "
        f"{'ratio':>6} | {'us/(M log M)':>12} | {'setup s':>7}"
    )
    rows_nl = {dim: [] for dim in sizes}
    cases = [(dim, n) for dim, ns in sizes.items() for n in ns]
    for dim, n in progress(cases, enabled=PROGRESS, desc="grids"):
        M = n**dim
        steps = max(3, min(200, int(2e6 / (M * math.log(M)))))
        loc = step_rate(dim, n, False, "upwind", steps, rep)
        nl = step_rate(dim, n, True, "upwind", steps, rep)
        rows_nl[dim].append(nl)
        cells = str(n) if dim == 1 else f"{n}^2"
        norm = nl["s_per_step"] / (M * math.log(M)) * 1e6
        say(
            f"{dim:>2} {cells:>9} {M:>8} | {loc['steps_per_s']:>13.1f} | "
            f"{nl['steps_per_s']:>12.1f} {loc['steps_per_s'] / nl['steps_per_s']:>6.2f} | "
            f"{norm:>12.4f} | {nl['setup_s']:>7.2f}"
        )
    fits = {dim: (fit_mlogm(rows), fit_mlogm(rows[-3:])) for dim, rows in rows_nl.items()}
    for dim, (b, b_top) in fits.items():
        print(
            f"p={dim}: time per step with the FFT term ∝ (M log M)^b: b = {b:.2f} over all "
            f"sizes, b = {b_top:.2f} over the three largest"
        )


def section_w2(quick: bool, emd_timeout: float) -> None:
    print("\n== 3. W2 particles vs 2D grid density (fresh process per case) ==")
    cases = [(1000, 32), (1000, 64), (2000, 64), (4000, 64)]
    if quick:
        cases = [(1000, 32), (1000, 64), (2000, 64)]
    runs = [(N, n, "exact", 600) for N, n in cases] + [(10_000, 128, "sliced", 600)]
    if not quick:
        runs.append((10_000, 128, "exact", emd_timeout))
    results = [w2_case(*r) for r in progress(runs, enabled=PROGRESS, desc="W2 cases")]
    print(
        f"{'N':>6} {'grid':>6} {'N*M':>10} {'method':>7} {'W2':>9} {'time s':>9} "
        f"{'peak MB':>9} {'+MB':>7} {'note':>10}"
    )
    for r in results:
        nm = r["N"] * r["grid"] ** 2
        print(
            f"{r['N']:>6} {r['grid']:>4}^2 {nm:>10.2e} {r['method']:>7} {r['w2']:>9.4f} "
            f"{r['s']:>9.2f} {r['peak_MB']:>9.0f} {r['delta_MB']:>7.0f} "
            f"{r.get('note', ''):>10}"
        )
    ex = [r for r in results if r["method"] == "exact" and math.isfinite(r["s"])]
    if len(ex) >= 2:
        nm = np.array([r["N"] * r["grid"] ** 2 for r in ex], dtype=float)
        s = np.array([r["s"] for r in ex])
        b = np.polyfit(np.log(nm), np.log(s), 1)[0]
        print(
            f"exact emd time ∝ (N M)^{b:.2f}; predicted for N=1e4, 128² "
            f"({1e4 * 128**2:.1e} pairs): {s[-1] * (1e4 * 128**2 / nm[-1]) ** b:.0f} s"
        )


def section_rate() -> None:
    """The full W2-vs-N study (the small version is tests/test_compare.py)."""
    from meanfield.workbench.compare import convergence_in_n
    from meanfield.workbench.problems import default_problem

    print("\n== 4. W2(mu_N(t), rho_t) vs N at t = 0.2 (default 1D problem, 8 seeds) ==")
    prob = default_problem(1, cells=256)
    ns = [100, 200, 400, 800, 1600, 3200]
    ds = convergence_in_n(
        prob.energy,
        prob.initial,
        n_values=ns,
        seeds=range(8),
        beta=prob.beta,
        t_final=0.2,
        eta=0.01,
    )
    for n, row in zip(ns, ds["w2"].values, strict=True):
        print(f"N={n:>5}: W2 median {np.median(row):.4f}  (seeds: {np.round(row, 4)})")
    a = ds.attrs
    print(
        f"rate: W2 ∝ N^{a['rate']:.3f}, 95% CI [{a['rate_ci_low']:.3f}, "
        f"{a['rate_ci_high']:.3f}] over seeds; pooled fit {a['rate_pooled']:.3f}"
    )


#: The flags, declared once: their checks, help and docs come from these Params.
FLAGS = Contract(
    "benchmarks/bench_pde.py",
    [
        Param("quick", "flag", "smaller sizes, fewer repeats", default=False),
        Param("skip_pypde", "flag", "leave out the py-pde comparison", default=False),
        Param("sections", "choice", "measurements to run (5: the 3D grid)",
              choices=("1", "2", "3", "5"), sequence=True, default=("1", "2", "3")),
        Param("emd_timeout", "real", "seconds allowed for the exact N=1e4, 128² emd", low=0.0,
              low_open=True, units="s", default=300.0),
        Param("sizes3d", "int", "section 5: cells per axis (None: 32 48 64 96 128; --quick: "
              "16 32)", low=MIN_CELLS, sequence=True, optional=True, default=None),
        Param("stationary_timeout", "real", "section 5: seconds allowed per beta = inf solve",
              low=0.0, low_open=True, units="s", default=200.0),
        Param("rate", "flag", "also run the W2-vs-N rate study (N = 100…3200, 8 seeds)",
              default=False),
        Param("progress", "flag", "show the progress bars", default=True),
    ],
)  # fmt: skip


def main(argv=None):
    global PROGRESS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    FLAGS.add_arguments(ap)
    # an empty list is meaningful here (no beta = inf solve): not a contract sequence
    ap.add_argument(
        "--stationary3d",
        type=int_range(MIN_CELLS),
        nargs="*",
        help=f"section 5: grids (>= {MIN_CELLS}) of the beta = inf solve (default 32 48; "
        "--quick: 16)",
    )
    add_bench_out(
        ap, "section 2: pde_ou.json and .md; section 5: pde3d.json and .md; _quick with --quick"
    )
    args = FLAGS.parse_args(ap, argv)  # bad flags end here (exit 2), before torch loads
    import torch

    PROGRESS = args.progress
    rep = 3 if args.quick else 5
    torch.set_num_threads(1)  # the particle runs of --rate: one thread on shared cores
    sections = {int(x) for x in args.sections}
    suffix = "_quick" if args.quick else ""
    if 2 in sections or 5 in sections:
        args.out.mkdir(parents=True, exist_ok=True)
    if 1 in sections:
        section_steps(args.quick, rep)
    if 2 in sections:
        section_ou(args.quick, args.skip_pypde, args.out / f"pde_ou{suffix}")
        print(f"wrote {args.out / f'pde_ou{suffix}.json'} and .md")
    if 3 in sections:
        section_w2(args.quick, args.emd_timeout)
    if 5 in sections:
        section_grid3d(
            args.quick,
            args.sizes3d,
            args.stationary3d,
            args.stationary_timeout,
            args.out / f"pde3d{suffix}",
        )
    if args.rate:
        section_rate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
