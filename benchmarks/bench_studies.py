"""Speed of the study machinery (issue: limit studies).

1. dask sweep speed-up: the same 16-run N → ∞ sweep on a LocalCluster of 1 and of 2 workers
   (medians of repeats, fresh output folder each time so nothing is resumed).
2. The exact sampler: effective samples per second of MALA at N = 100 (p = 1 Coulomb gas of
   THEORY §5, uniform case, mean-field regime β = 1), for the energy and for the linear
   statistic L_N = ∫ω² dμ_N.  ESS from the integrated autocorrelation time with Sokal's
   self-consistent window (c = 5), pooled over independent replicas.

    python benchmarks/bench_studies.py [--out FOLDER] [--no-progress]

Writes ``studies.json`` into ``--out`` (by default a folder outside the repository: ``--help``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import numpy as np

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out, progress, say


def integrated_autocorr_time(x: np.ndarray, c: float = 5.0) -> float:
    """τ_int of a chain (time, replica) by FFT autocorrelation and Sokal's window."""
    x = x - x.mean(0)
    n = x.shape[0]
    f = np.fft.rfft(x, n=2 * n, axis=0)
    acf = np.fft.irfft(f * np.conj(f), axis=0)[:n].mean(1)
    acf /= acf[0]
    tau = 1.0
    for m in range(1, n):
        tau = 1 + 2 * acf[1 : m + 1].sum()
        if m >= c * tau:
            break
    return float(tau)


def bench_sweep(show: bool = True) -> dict:
    from meanfield.studies.limits import particle_equilibrium_run
    from meanfield.workbench.sweeps import run_sweep

    grid = {"N": [32, 48, 64, 96], "seed": [0, 1, 2, 3]}
    fixed = {"beta": 4.0, "case": "uniform", "t_end": 30.0}
    times = {1: [], 2: []}
    for workers in progress([1, 1, 2, 2], enabled=show, desc="sweeps (1, then 2 workers)"):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            run_sweep(
                particle_equilibrium_run,
                grid,
                d,
                fixed=fixed,
                scheduler="local",
                n_workers=workers,
                progress=False,
            )
            times[workers].append(time.perf_counter() - t0)
    out = {w: statistics.median(t) for w, t in times.items()}
    for w, t in times.items():
        say(
            f"sweep of 16 runs, {w} worker(s): median {out[w]:.1f} s "
            f"(runs {', '.join(f'{x:.1f}' for x in t)})"
        )
    say(f"speed-up 2 workers / 1 worker: {out[1] / out[2]:.2f}x")
    return {"median_s": out, "runs_s": times, "speedup": out[1] / out[2]}


def bench_sampler(show: bool = True) -> list[dict]:
    import torch

    from meanfield.closed_forms import closed_form_energy
    from meanfield.dynamics.langevin import simulate

    torch.set_num_threads(1)
    E = closed_form_energy("uniform")
    N, R, steps = 100, 16, 3000
    om0 = torch.linspace(-1, 1, N, dtype=torch.float64)[None, :, None].repeat(R, 1, 1)
    rows = []
    for eta in progress((0.01, 0.02, 0.05), enabled=show, desc="MALA step sizes"):
        t0 = time.perf_counter()
        ds = simulate(
            E,
            om0,
            method="mala",
            eta=eta,
            beta=1.0,
            n_steps=steps,
            record_every=1,
            seed=0,
            regime="mean-field",
        )
        wall = time.perf_counter() - t0
        keep = slice(steps // 3, None)
        energy = ds["energy"].values[keep]
        L = (ds["omega"].values[keep, ..., 0] ** 2).mean(-1)
        acc = float(ds["acceptance_rate"].values[1:].mean())
        for name, x in (("energy", energy), ("L_N = mean w^2", L)):
            tau = integrated_autocorr_time(x)
            ess = x.shape[0] * x.shape[1] / tau
            rows.append(
                {
                    "eta": eta,
                    "observable": name,
                    "acceptance": acc,
                    "tau_int": tau,
                    "ess_per_s": ess / wall,
                    "replicas": R,
                    "steps": steps,
                    "wall_s": wall,
                }
            )
            say(
                f"MALA N={N}, eta={eta}: acceptance {acc:.2f}, {name}: tau_int {tau:.1f} "
                f"steps, ESS/s {ess / wall:.1f} (R={R} replicas, {steps} steps, "
                f"{wall:.1f} s)"
            )
    return rows


#: The flags, declared once: their checks, help and docs come from these Params.
FLAGS = Contract(
    "benchmarks/bench_studies.py",
    [Param("progress", "flag", "show the progress bars", default=True)],
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_bench_out(ap, "studies.json")
    FLAGS.add_arguments(ap)
    args = FLAGS.parse_args(ap, argv)  # bad flags end here (exit 2), before torch loads
    show = args.progress
    res = {"sampler": bench_sampler(show), "sweep": bench_sweep(show)}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "studies.json"
    path.write_text(json.dumps(res, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
