"""Cost per effective sample: projected Langevin, MALA and HMC on the singular log gas.

Cases (V = |ω|²/2, λ = 1/2, the unsoftened log kernel ``Riesz(0.0)``):

* ``1d``: p = 1, ``Box(1, 4)``, mean-field regime β = 4, N = 100 (the capped pair step's case
  of ``docs/sampling.rst``).  References: the mean-field Gibbs state's variance
  (``meanfield.pde.gibbs_state`` on 3200 cells: 0.75000, = 1/2 + 1/β by the virial) and the
  finite-N law's, which the exact samplers target: β-Hermite with Dyson index β/N scaled by
  1/√β (Dumitriu–Edelman), centred variance (1 + (β/N)(N − 1)/2)/β − 1/(βN) = 0.7425.
* ``2d``: p = 2, ``Ball(2, 3)``, Coulomb-gas regime β = 2, N = 30: the Ginibre ensemble scaled
  by 1/√N, centred variance (N + 1)/(2N) − 1/N² = 0.5156.

Samplers, each started from spread particles (evenly spaced in 1D, a sunflower spiral in 2D:
MALA refuses closer starts):

* ``langevin``: ``simulate(..., method="langevin")``, the default capped pair step, step η;
* ``mala``: ``simulate(..., method="mala")``, fixed η;
* ``hmc``: ``sample_hmc``, either a fixed leapfrog step ε and L steps (``n_warmup = 0``), or
  ε adapted by dual averaging over a warm-up with trajectory length T (per case, below).

The statistic is the centred particle variance of each recorded snapshot, (1/N) Σ_i |ω_i −
ω̄|². Each replica is one chain, run alone (fixed seed ``seed + r``), one torch thread. After
the first quarter of the records (burn-in) each replica gives its time-averaged variance, its
effective sample size (Geyer's initial monotone sequence,
:func:`meanfield.stats.effective_sample_size`) and ESS/s = ESS / (wall time of the kept part:
the run's wall time × the kept fraction of its steps), and ESS per CPU second likewise (the
process CPU time: with one thread, the work done, less sensitive to a loaded machine). The
table prints the replica mean of the variance ± its standard error over replicas, its bias
against both references, and the medians over replicas of τ_int (in records), ESS/s, ESS per
CPU second and wall time. A chain shorter than 50 τ_int is flagged ``*`` (τ likely
underestimated); a chain accepting under 5 % of its proposals, or warned with a
``FrozenChainWarning``, is named ``FROZEN`` (it repeats its start, so its records look
independent and its ESS means nothing). The machine is shared: the load average is printed and
stored.

    python benchmarks/bench_samplers_ess.py                  # 1d, 4 replicas (~3 min)
    python benchmarks/bench_samplers_ess.py --cases 1d,2d
    python benchmarks/bench_samplers_ess.py --quick          # seconds (smoke test)

Results go to ``<out>/bench_samplers_ess.json`` (``--out``, default outside the repository:
:func:`meanfield.workbench._scripts.bench_out_default`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out

SAMPLERS = ("langevin", "mala", "hmc")

#: Per case: the model, and each sampler's settings.  The exact samplers' settings come from
#: pilots on this machine (1d): HMC with T = π/4 (or T = 0.01) and ε adapted to acceptance 0.65
#: drove ε to 5e-6 (L capped at 1000, 0.2-0.4 s per trajectory): at Dyson index β/N = 0.04 the
#: gas has pairs at distance 1e-4 and closer, whose force 2λ/(N r) a leapfrog or MALA step
#: does not resolve.  So 1d HMC runs a fixed kernel, L = 2, ε = 0.01 (acceptance 0.28; 0.0075:
#: 0.31-0.43, 0.005: 0.48), and MALA η = 2e-4 (acceptance 0.27; 5e-5: 0.49, 1e-4: 0.36,
#: 5e-4: 0.16): of those tried, the largest mean squared move per iteration, (L ε)² × acceptance
#: and η × acceptance.
CASES = {
    "1d": {
        "p": 1,
        "N": 100,
        "beta": 4.0,
        "regime": "mean-field",
        "radius": 4.0,
        "langevin": {"eta": 2e-3, "n_steps": 16000, "record_every": 10},
        "mala": {"eta": 2e-4, "n_steps": 32000, "record_every": 20},
        "hmc": {"step_size": 1e-2, "n_leapfrog": 2, "n_samples": 8000, "record_every": 4},
    },
    "2d": {
        "p": 2,
        "N": 30,
        "beta": 2.0,
        "regime": "coulomb-gas",
        "radius": 3.0,
        "langevin": {"eta": 5e-3, "n_steps": 6000, "record_every": 5},
        # η = 0.05 accepts about 0.8 (0.04: 0.86, 0.02: 0.94 in pilots)
        "mala": {"eta": 5e-2, "n_steps": 8000, "record_every": 5},
        # T = π/4: a quarter period of the breathing mode (frequency 2) that moves the variance
        "hmc": {
            "trajectory_length": math.pi / 4,
            "n_warmup": 100,
            "n_samples": 400,
            "record_every": 1,
        },
    },
}

#: Below this acceptance (or with a FrozenChainWarning) a chain is reported as frozen.
FROZEN_ACCEPTANCE = 0.05

#: --quick: the same models at small N and few steps (a smoke run, seconds; no accuracy).
QUICK = {"N": {"1d": 12, "2d": 8}, "scale": 1 / 40, "replicas": 2}


def exact_variance(case: dict) -> float:
    """Centred variance E (1/N) Σ|ω_i − ω̄|² of the finite-N Gibbs law (module notes)."""
    N, beta, p = case["N"], case["beta"], case["p"]
    if p == 1:  # β-Hermite, Dyson index β/N (mean-field regime), scaled by 1/√β
        return (1 + (beta / N) * (N - 1) / 2) / beta - 1 / (beta * N)
    # Ginibre (Coulomb-gas regime, β = 2), scaled by 1/√N: virial (N + 1)/(2N), minus p/(β_N N)
    return (N + 1) / (2 * N) - 1 / N**2


def mean_field_variance(energy, case: dict, cells: int = 3200) -> float:
    """Variance of the mean-field Gibbs state ρ_β on a fine grid (1d; the 2d Coulomb-gas limit
    is the uniform disk, variance 1/2).  Grid error O(h²): 0.7500015 at 1600 cells."""
    from meanfield.domains import Box
    from meanfield.pde import Grid, gibbs_state

    if case["p"] != 1:
        return 0.5
    rho, _ = gibbs_state(energy, Grid(Box(1, case["radius"]), cells), case["beta"])
    return float(np.asarray(rho.covariance).ravel()[0])


def spread_start(case: dict) -> np.ndarray:
    """(1, N, p) spread particles of about the equilibrium's width."""
    N = case["N"]
    if case["p"] == 1:
        return np.linspace(-1.5, 1.5, N)[None, :, None]
    k = np.arange(N) + 0.5  # sunflower spiral: evenly spread in the unit disk
    r, a = np.sqrt(k / N), k * math.pi * (3 - math.sqrt(5))
    return np.stack([r * np.cos(a), r * np.sin(a)], -1)[None]


def centred_variance(omega: np.ndarray) -> np.ndarray:
    """(time,) centred variance per snapshot of one chain; omega (time, 1, N, p)."""
    x = omega[:, 0]
    return ((x - x.mean(-2, keepdims=True)) ** 2).sum(-1).mean(-1)


def run_one(name: str, energy, case: dict, settings: dict, seed: int) -> dict:
    """One chain of sampler ``name``: the statistic's records and the wall time."""
    from meanfield.dynamics.langevin import sample_hmc, simulate

    om0 = spread_start(case)
    common = {"beta": case["beta"], "regime": case["regime"], "seed": seed}
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if name in ("langevin", "mala"):
            ds = simulate(energy, om0, method=name, **common, **settings)
            steps = settings["n_steps"]
        else:
            hmc = dict(settings)
            if "n_leapfrog" in hmc:  # a fixed kernel: ε and L given, no warm-up
                eps, L = hmc.pop("step_size"), hmc.pop("n_leapfrog")
                # L ε slightly shortened: ⌈T/ε⌉ = L exactly despite round-off
                hmc.update(step_size=eps, n_warmup=0, trajectory_length=L * eps * (1 - 1e-9))
            ds = sample_hmc(energy, om0, **common, **hmc)
            steps = hmc["n_samples"]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    v = centred_variance(ds["omega"].values)
    keep = v[len(v) // 4 :]
    # the wall time of the kept records' steps (HMC's warm-up trajectories are not recorded)
    warmup = settings.get("n_warmup", 0) if name == "hmc" else 0
    kept = (len(keep) / len(v)) * steps / (steps + warmup)
    from meanfield.stats import effective_sample_size, integrated_autocorr_time

    tau = integrated_autocorr_time(keep)
    ess = effective_sample_size(keep)
    acc = ds["acceptance_rate"].values[1:].mean() if "acceptance_rate" in ds else math.nan
    out = {
        "seed": seed,
        "steps": steps,
        "records_kept": len(keep),
        "wall_s": wall,
        "cpu_s": cpu,
        "variance": float(keep.mean()),
        "tau_records": tau,
        "ess": ess,
        "ess_per_s": ess / (wall * kept),
        "ess_per_cpu_s": ess / (cpu * kept),
        "reliable": bool(len(keep) >= 50 * tau),
        "acceptance": float(acc),
        "warnings": sorted({type(w.message).__name__ for w in caught}),
    }
    # a chain that rejects nearly everything repeats its start: its records look independent
    # (τ ≈ 1) and its ESS/s is meaningless, so it is named rather than ranked
    out["frozen"] = bool("FrozenChainWarning" in out["warnings"] or acc < FROZEN_ACCEPTANCE)
    if name == "hmc":
        out["step_size"] = float(ds.attrs["step_size"])
        out["n_leapfrog"] = int(ds.attrs["n_leapfrog"])
    return out


def summarise(runs: list, exact: float, mean_field: float) -> dict:
    v = np.array([r["variance"] for r in runs])
    se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan
    return {
        "variance": float(v.mean()),
        "se": se,
        "bias_exact": float(v.mean() - exact),
        "bias_mean_field": float(v.mean() - mean_field),
        "tau_records_median": float(np.median([r["tau_records"] for r in runs])),
        "ess_per_s_median": float(np.median([r["ess_per_s"] for r in runs])),
        "ess_per_cpu_s_median": float(np.median([r["ess_per_cpu_s"] for r in runs])),
        "wall_s_median": float(np.median([r["wall_s"] for r in runs])),
        "acceptance_median": float(np.median([r["acceptance"] for r in runs])),
        "all_reliable": all(r["reliable"] for r in runs),
        "frozen_replicas": sum(r["frozen"] for r in runs),
    }


def describe(name: str, settings: dict) -> str:
    if name == "hmc" and "n_leapfrog" in settings:
        return f"eps={settings['step_size']:g} L={settings['n_leapfrog']}"
    if name == "hmc":
        return f"T={settings['trajectory_length']:.3f}, eps adapted"
    return f"eta={settings['eta']:g}"


#: The flags, declared once: their checks, help and docs come from these Params.
FLAGS = Contract(
    "benchmarks/bench_samplers_ess.py",
    [
        Param("cases", "choice", "models to sample", choices=tuple(CASES), sequence=True,
              default=("1d",)),
        Param("samplers", "choice", "samplers to compare", choices=SAMPLERS, sequence=True,
              default=SAMPLERS),
        Param("replicas", "int", "chains per sampler (None: 4, or the quick run's)", low=2,
              optional=True, default=None),
        Param("seed", "int", "first seed (replica r uses seed + r)", low=0, high=2**31,
              default=0),
        Param("threads", "int", "torch threads", low=1, default=1),
        Param("quick", "flag", "small N, few steps: a smoke run", default=False),
    ],
)  # fmt: skip


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    FLAGS.add_arguments(ap)
    add_bench_out(ap, "bench_samplers_ess.json")
    return FLAGS.parse_args(ap, argv)


def case_settings(name: str, quick: bool) -> dict:
    """The case's model and sampler settings (shrunk by --quick)."""
    case = {k: (dict(v) if isinstance(v, dict) else v) for k, v in CASES[name].items()}
    if quick:
        case["N"] = QUICK["N"][name]
        for s in SAMPLERS:
            for key in ("n_steps", "n_samples"):
                if key in case[s]:
                    case[s][key] = max(80, int(case[s][key] * QUICK["scale"]))
            if "n_warmup" in case[s]:
                case[s]["n_warmup"] = 10
            if "record_every" in case[s]:
                case[s]["record_every"] = 1
    return case


def main(argv=None) -> dict:
    args = parse(argv)  # bad flags end here (exit 2), before torch loads
    import torch

    from meanfield.domains import Ball, Box
    from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    from meanfield.kernels import Riesz

    torch.set_num_threads(args.threads)
    replicas = args.replicas or (QUICK["replicas"] if args.quick else 4)
    load = os.getloadavg()
    print(
        f"samplers on the log gas: {replicas} replicas (one chain each, medians), "
        f"threads={args.threads}, load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} "
        f"on {os.cpu_count()} cores, torch {torch.__version__}"
    )
    result = {
        "meta": {
            "machine": platform.node(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "threads": args.threads,
            "torch": torch.__version__,
            "load_before": load,
            "replicas": replicas,
            "seed": args.seed,
            "quick": args.quick,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        },
        "cases": {},
    }
    t_all = time.perf_counter()
    for cname in args.cases:
        case = case_settings(cname, args.quick)
        domain = Box(1, case["radius"]) if case["p"] == 1 else Ball(2, case["radius"])
        energy = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], domain)
        exact, mf_var = exact_variance(case), mean_field_variance(energy, case)
        print(
            f"\n{cname}: N={case['N']} beta={case['beta']} {case['regime']}; variance: exact "
            f"finite-N {exact:.4f}, mean-field {mf_var:.5f}"
        )
        print(
            "  sampler   settings                 variance (± se)    bias vs exact  vs MF  "
            "  tau[rec]   ESS/s  ESS/cpu-s  wall s  accept"
        )
        rows = {}
        for name in args.samplers:
            runs = [run_one(name, energy, case, case[name], args.seed + r) for r in range(replicas)]
            s = summarise(runs, exact, mf_var)
            rows[name] = {"settings": case[name], "summary": s, "runs": runs}
            print(
                f"  {name:9s} {describe(name, case[name]):24s} {s['variance']:.4f} ± "
                f"{s['se']:.4f}   {s['bias_exact']:+.4f}      {s['bias_mean_field']:+.4f}  "
                f"{s['tau_records_median']:8.1f}{'' if s['all_reliable'] else '*'} "
                f"{s['ess_per_s_median']:7.2f} {s['ess_per_cpu_s_median']:9.2f} "
                f"{s['wall_s_median']:8.1f}  "
                f"{s['acceptance_median']:.3f}"
                + (
                    f"  FROZEN in {s['frozen_replicas']}/{replicas}" if s["frozen_replicas"] else ""
                ),
                flush=True,
            )
        result["cases"][cname] = {
            "model": {k: case[k] for k in ("p", "N", "beta", "regime", "radius")},
            "exact_variance": exact,
            "mean_field_variance": mf_var,
            "samplers": rows,
        }
    result["meta"]["wall_s"] = time.perf_counter() - t_all
    result["meta"]["load_after"] = os.getloadavg()
    print(f"\ntotal {result['meta']['wall_s']:.0f} s, load average after "
          f"{result['meta']['load_after'][0]:.2f}")  # fmt: skip
    path = Path(args.out) / "bench_samplers_ess.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
