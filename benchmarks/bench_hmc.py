"""Effective samples per second: HMC (meanfield.dynamics.hmc) against MALA (issue 14).

Two models of THEORY §5 (V = ω²/2, λ = 1/2, p = 1, box [−4, 4]):

* ``log-gas``: k = −log|z|, Coulomb-gas regime β = 2 (the β-ensemble; stiff: the neighbour gap
  is ~1/N, so both samplers must shrink their step with N);
* ``uniform``: k = −|z|, mean-field regime β = 1 (the large-deviation study's model).

For each N both samplers start from the same equilibrated configurations (an HMC warm-up) and
are tuned by the same dual averaging (meanfield.dynamics.adaptation.DualAveraging): HMC's
leapfrog step to acceptance 0.65 with trajectory length T, MALA's η to acceptance 0.574 (the
optimal scalings of Beskos et al. 2013 and Roberts & Rosenthal 1998).
Then each runs with the step frozen for a fixed wall-clock budget.  Observables: the energy
H_N and L_N = ∫ω² dμ_N (= 2 × the confinement term, recorded at every step).  τ_int by Geyer's
initial monotone sequence pooled over R chains (meanfield.dynamics.hmc.integrated_autocorr_time,
tested against AR(1)); ESS = n R / τ; ESS/s counts the sampling phase only (tuning is reported
separately).  A run shorter than 50 τ is flagged: its τ is then likely underestimated and its
ESS/s an upper bound.

    python benchmarks/bench_hmc.py          # log-gas N = 32 64 128, uniform N = 32 … 1024
    python benchmarks/bench_hmc.py --n 32 64 --budget 3

Writes ``hmc.json`` and ``hmc.md`` (``--name`` changes the stem) into ``--out`` (by default a
folder outside the repository: ``--help``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out, file_stem, progress, say

CASES = {
    # name: (closed-form case, regime, beta, trajectory length T)
    # T is a quarter period of the slowest mode that moves the observables, so that one
    # trajectory maps a displacement x to an independent one (x cos ωT + (v/ω) sin ωT): the
    # breathing mode of the log gas has ω = 2 (scale invariance of the log: T = π/4), the
    # modes of V = ω²/2 with the piecewise-linear −|z| all have ω = 1 (T = π/2).  A half period
    # would send x to −x, which leaves the energy (even in x) unchanged.
    "log-gas": ("semicircle", "coulomb-gas", 2.0, math.pi / 4),
    "uniform": ("uniform", "mean-field", 1.0, math.pi / 2),
}


def observables(ds):
    """(energy, L_N) as (time, replica) arrays; L_N = 2 × confinement energy since V = ω²/2."""
    return {"energy": ds["energy"].values, "L_N": 2 * ds["energy_confinement"].values}


def ess_row(ds, wall):
    from meanfield.dynamics.hmc import integrated_autocorr_time

    out = {}
    for name, x in observables(ds).items():
        x = x[1:]  # the first record is the starting state
        tau = integrated_autocorr_time(x)
        n, R = x.shape
        out[name] = {
            "tau": tau,
            "ess_per_s": n * R / tau / wall,
            "reliable": bool(n >= 50 * tau),
        }
    return out


def tune_mala(E, start, beta, regime, n_tune, seed):
    """η by dual averaging to acceptance 0.574 on the replica-mean accept indicator."""
    import torch

    from meanfield.dynamics.adaptation import DualAveraging
    from meanfield.dynamics.langevin import MALA

    N = start.shape[-2]
    mala = MALA(E, 0.05 / N, beta, regime)
    state = mala.init(start, seed=seed)
    adapt = DualAveraging(mala.eta, 0.574)
    with torch.no_grad():
        for _ in range(n_tune):
            before = state.accepted.clone()
            state = mala.step(state)
            mala.eta = adapt.update(float((state.accepted - before).mean()))
    return adapt.final_step_size, state.omega


def bench_one(case, N, *, replicas, budget, trajectory_length, target, n_warmup, seed=0):
    import torch

    from meanfield.closed_forms import closed_form_energy
    from meanfield.dynamics.langevin import sample_hmc, simulate

    cf_case, regime, beta, T = CASES[case]
    trajectory_length = trajectory_length or T
    E = closed_form_energy(cf_case)
    # a spread, well-separated start (singular kernels mix slowly out of near-collisions)
    om0 = torch.linspace(-1.2, 1.2, N, dtype=torch.float64)[None, :, None].repeat(replicas, 1, 1)
    t0 = time.perf_counter()
    warm = sample_hmc(
        E,
        om0,
        beta=beta,
        regime=regime,
        n_warmup=n_warmup,
        n_samples=10,
        record_every=10,
        trajectory_length=trajectory_length,
        target_accept=target,
        seed=seed,
    )
    hmc_tune_wall = time.perf_counter() - t0
    start = torch.as_tensor(warm["omega"].values[-1])
    eps = float(warm.attrs["step_size"])

    # --- HMC, frozen step, timed pilot then the budget ----------------------------------
    kw = dict(
        beta=beta,
        regime=regime,
        n_warmup=0,
        step_size=eps,
        record_positions=False,
        trajectory_length=trajectory_length,
        record_every=1,
    )
    t0 = time.perf_counter()
    sample_hmc(E, start, n_samples=3, seed=seed + 1, **kw)
    per_step = (time.perf_counter() - t0) / 3
    n_hmc = max(20, int(budget / per_step))
    t0 = time.perf_counter()
    ds_h = sample_hmc(E, start, n_samples=n_hmc, seed=seed + 2, **kw)
    wall_h = time.perf_counter() - t0

    # --- MALA, tuned from the same equilibrated start ------------------------------------
    t0 = time.perf_counter()
    eta, start_m = tune_mala(E, start, beta, regime, n_tune=200, seed=seed + 3)
    mala_tune_wall = time.perf_counter() - t0
    mkw = dict(
        method="mala", eta=eta, beta=beta, regime=regime, record_positions=False, record_every=1
    )
    t0 = time.perf_counter()
    simulate(E, start_m, n_steps=20, seed=seed + 4, **mkw)
    per_step_m = (time.perf_counter() - t0) / 20
    n_mala = max(200, int(budget / per_step_m))
    t0 = time.perf_counter()
    ds_m = simulate(E, start_m, n_steps=n_mala, seed=seed + 5, **mkw)
    wall_m = time.perf_counter() - t0

    row = {
        "case": case,
        "N": N,
        "regime": regime,
        "beta": beta,
        "replicas": replicas,
        "hmc": {
            "step_size": eps,
            "n_leapfrog": int(ds_h.attrs["n_leapfrog"]),
            "trajectory_length": trajectory_length,
            "iterations": n_hmc,
            "wall_s": wall_h,
            "tune_wall_s": hmc_tune_wall,
            "acceptance": float(ds_h["acceptance_rate"].values[1:].mean()),
            **ess_row(ds_h, wall_h),
        },
        "mala": {
            "eta": eta,
            "iterations": n_mala,
            "wall_s": wall_m,
            "tune_wall_s": mala_tune_wall,
            "acceptance": float(ds_m["acceptance_rate"].values[1:].mean()),
            **ess_row(ds_m, wall_m),
        },
    }
    return row


def flag(d):
    """'*' where the run was shorter than 50 τ (τ likely underestimated)."""
    return "" if d["reliable"] else "*"


def fmt(r, obs):
    h, m = r["hmc"][obs], r["mala"][obs]
    return (
        f"{h['ess_per_s']:8.1f}{flag(h):1s} {m['ess_per_s']:8.1f}{flag(m):1s} "
        f"{h['ess_per_s'] / m['ess_per_s']:7.1f}x   tau {h['tau']:6.2f} / {m['tau']:8.1f}"
    )


def write_table(rows, path):
    """The markdown table of the README (ESS/s of both samplers and their ratio per N)."""
    lines = [
        "| model | N | chains | HMC ε / L / acc | MALA η / acc | ESS/s energy: HMC / MALA (×) "
        "| ESS/s L_N: HMC / MALA (×) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        h, m = r["hmc"], r["mala"]
        cells = []
        for obs in ("energy", "L_N"):
            a, b = h[obs], m[obs]
            cells.append(
                f"{a['ess_per_s']:.0f}{flag(a)} / {b['ess_per_s']:.1f}{flag(b)} "
                f"({a['ess_per_s'] / b['ess_per_s']:.1f}×)"
            )
        lines.append(
            f"| {r['case']} | {r['N']} | {r['replicas']} | {h['step_size']:.3f} / "
            f"{h['n_leapfrog']} / {h['acceptance']:.2f} | {m['eta']:.1e} / {m['acceptance']:.2f} | "
            f"{cells[0]} | {cells[1]} |"
        )
    Path(path).write_text("\n".join(lines) + "\n")


#: The flags, declared once: their checks, help and docs come from these Params.
FLAGS = Contract(
    "benchmarks/bench_hmc.py",
    [
        Param("n", "int", "particle numbers N of both models (None: the lists below)", low=2,
              sequence=True, optional=True, default=None),
        Param("n_log_gas", "int", "N of the log gas", low=2, sequence=True,
              default=(32, 64, 128)),
        Param("n_uniform", "int", "N of the uniform case", low=2, sequence=True,
              default=(32, 128, 512, 1024)),
        Param("cases", "choice", "models to sample", choices=tuple(CASES), sequence=True,
              default=tuple(CASES)),
        Param("budget", "real", "sampling seconds per run", low=0.0, low_open=True, units="s",
              default=8.0),
        Param("replicas", "int", "chains (None: 8, 4 from N = 256, 2 from 1024)", low=1,
              optional=True, default=None),
        Param("trajectory_length", "real", "HMC trajectory length T (None: per model, above)",
              low=0.0, low_open=True, units="time", optional=True, default=None),
        # 0.65: the asymptotically optimal HMC acceptance (Beskos et al. 2013); MALA's 0.574
        Param("target_accept", "level", "HMC's adaptation target of the acceptance rate",
              default=0.65),
        Param("n_warmup", "int", "HMC warm-up trajectories", low=1, default=60),
        Param("progress", "flag", "show the progress bar", default=True),
    ],
)  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    FLAGS.add_arguments(ap)
    add_bench_out(ap, "NAME.json and NAME.md")
    ap.add_argument("--name", type=file_stem, default="hmc", help="file stem [default: hmc]")
    args = FLAGS.parse_args(ap, argv)  # bad flags end here (exit 2), before torch loads
    import torch

    torch.set_num_threads(1)
    rows = []
    t_all = time.perf_counter()
    print(
        "ESS/s: HMC  MALA  ratio;  tau_int: HMC (trajectories) / MALA (steps);  "
        "* = run shorter than 50 tau (ESS/s an upper bound)"
    )
    runs = [
        (case, N)
        for case in args.cases
        for N in args.n or (args.n_log_gas if case == "log-gas" else args.n_uniform)
    ]
    for case, N in progress(runs, enabled=args.progress, desc="(model, N)"):
        replicas = args.replicas or (8 if N < 256 else 4 if N < 1024 else 2)
        r = bench_one(
            case,
            N,
            replicas=replicas,
            budget=args.budget,
            trajectory_length=args.trajectory_length,
            target=args.target_accept,
            n_warmup=args.n_warmup,
        )
        rows.append(r)
        h, m = r["hmc"], r["mala"]
        say(
            f"{case:8s} N={N:5d}  HMC eps={h['step_size']:.4f} L={h['n_leapfrog']} "
            f"acc={h['acceptance']:.2f} | MALA eta={m['eta']:.2e} acc={m['acceptance']:.2f}"
        )
        for obs in ("energy", "L_N"):
            say(f"    {obs:7s} {fmt(r, obs)}")
    total = time.perf_counter() - t_all
    meta = {
        "budget_s": args.budget,
        "torch_threads": 1,
        "trajectory_length": args.trajectory_length,
        "target_accept": args.target_accept,
        "n_warmup": args.n_warmup,
        "total_wall_s": total,
        "machine": "2-core shared CPU, other jobs running",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / args.name
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    write_table(rows, out.with_suffix(".md"))
    print(f"total {total:.0f} s; wrote {out.with_suffix('.json')} and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
