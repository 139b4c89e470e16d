"""HMC effective samples per second: meanfield's sample_hmc (eager and compiled) vs BlackJAX.

The same sampler on the same target, side by side in one run: the log gas of THEORY §5
(V = ω²/2, k = −log|z|, λ = 1/2, p = 1, box [−4, 4], Coulomb-gas regime β = 2, so the Gibbs
potential is U = β N² H_N), R chains from the same equilibrated start, the same leapfrog step ε
(adapted once by meanfield's warm-up to acceptance 0.65), the same number L = ⌈T/ε⌉ of
leapfrog steps (T = π/4, a quarter period of the breathing mode), the same mass (β_N, so the
flow is Ω'' = −N∇H_N) and no step jitter.  BlackJAX (``blackjax.hmc``, vmapped over the same
R chains, the whole chain one ``jax.lax.scan`` under ``jax.jit``, float64) does not reflect at
the box; the log gas lives on [−√2, √2] and never reaches the walls at ±4 (checked: the
largest |ω| of every run is in the output).  meanfield's ``compile=True`` runs each block of
up to 32 trajectories (their leapfrog steps and Metropolis decisions) as one compiled call.
Observables: H_N and L_N = ∫ω² dμ_N, recorded at every trajectory by both; τ_int by Geyer's
initial monotone sequence pooled over chains (meanfield.dynamics.hmc.integrated_autocorr_time);
ESS/s counts the sampling phase only; compilation (torch.compile, jax.jit) is timed and
reported apart.  The samplers run in ``--repeats`` interleaved rounds (eager, compiled,
BlackJAX, each for about ``--budget`` seconds), so a change of the machine's load hits all
three; the table gives medians over rounds, the compiled ÷ BlackJAX ESS/s ratio pooled over
the rounds (effective samples over total time) with each round's ratio (median [min, max]),
and the load average.  Both run one CPU thread (torch.set_num_threads(1); XLA's flags
``XLA_ONE_THREAD`` unless ``XLA_FLAGS`` is set).

    python benchmarks/bench_hmc_blackjax.py                 # N = 32 64 128, 8 chains
    python benchmarks/bench_hmc_blackjax.py --n 32 --budget 3 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out, file_stem, progress, say

T = math.pi / 4
#: XLA's flags for one CPU thread (as torch.set_num_threads(1)), unless XLA_FLAGS is set.
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
BETA = 2.0
LAM = 0.5


def jax_potential(N: int):
    """U(ω) = β N² H_N for one chain ω (N,), in jax (THEORY §5 with the Coulomb-gas β_N)."""
    import jax.numpy as jnp

    beta_N = BETA * N

    def U(w):
        d = w[:, None] - w[None, :]
        r2 = d * d + jnp.eye(N)  # the diagonal gets a harmless distance 1 (log 1 = 0)
        pair = -0.5 * jnp.log(r2)
        H = 0.5 * jnp.mean(w * w) + LAM * jnp.sum(pair) / N**2
        return beta_N * N * H

    return U


def observables_np(w, N):
    """(H_N, L_N) of chains w (..., N) in numpy, the same formulas as the torch energy."""
    import numpy as np

    d = w[..., :, None] - w[..., None, :]
    r2 = d * d + np.eye(N)
    H = 0.5 * (w * w).mean(-1) + LAM * (-0.5 * np.log(r2)).sum((-1, -2)) / N**2
    return H, (w * w).mean(-1)


def ess(x, wall):
    from meanfield.dynamics.hmc import integrated_autocorr_time

    tau = integrated_autocorr_time(x)
    n, R = x.shape
    return {"tau": tau, "ess_per_s": n * R / tau / wall, "reliable": bool(n >= 50 * tau)}


def run_meanfield(E, start, eps, n, seed, compile):
    from meanfield.dynamics.hmc import sample_hmc

    kw = dict(
        beta=BETA,
        regime="coulomb-gas",
        n_warmup=0,
        step_size=eps,
        trajectory_length=T,
        jitter=0.0,
        record_every=1,
        record_positions=False,
        compile=compile,
    )
    t0 = time.perf_counter()
    sample_hmc(E, start, n_samples=2, seed=seed, **kw)  # compiles (compile=True) and warms
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    ds = sample_hmc(E, start, n_samples=n, seed=seed + 1, **kw)
    wall = time.perf_counter() - t0
    H = ds["energy"].values[1:]
    L_N = 2 * ds["energy_confinement"].values[1:]
    return {
        "iterations": n,
        "wall_s": wall,
        "first_call_s": first,
        "acceptance": float(ds["acceptance_rate"].values[1:].mean()),
        "energy": ess(H, wall),
        "L_N": ess(L_N, wall),
    }


def run_blackjax(start, eps, L, n, seed):
    import blackjax
    import jax
    import jax.numpy as jnp
    import numpy as np

    R, N = start.shape
    hmc = blackjax.hmc(
        lambda w: -jax_potential(N)(w),
        step_size=eps,
        inverse_mass_matrix=jnp.full(N, 1.0 / (BETA * N)),  # mass β_N: Ω'' = −∇U/β_N
        num_integration_steps=L,
    )

    @jax.jit
    def chain(key, pos):
        states = jax.vmap(hmc.init)(pos)

        def one(states, k):
            states, info = jax.vmap(hmc.step)(jax.random.split(k, R), states)
            return states, (states.position, info.acceptance_rate)

        _, (ws, acc) = jax.lax.scan(one, states, jax.random.split(key, n))
        return ws, acc

    pos = jnp.asarray(start)
    t0 = time.perf_counter()
    jax.block_until_ready(chain(jax.random.PRNGKey(seed), pos))  # compile
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    ws, acc = jax.block_until_ready(chain(jax.random.PRNGKey(seed + 1), pos))
    wall = time.perf_counter() - t0
    ws = np.asarray(ws)  # (n, R, N)
    H, L_N = observables_np(ws, N)
    return {
        "iterations": n,
        "wall_s": wall,
        "first_call_s": first,
        "acceptance": float(np.asarray(acc).mean()),
        "max_abs_position": float(np.abs(ws).max()),
        "energy": ess(H, wall),
        "L_N": ess(L_N, wall),
    }


def bench_one(N, replicas, budget, repeats, seed=0):
    import numpy as np
    import torch

    from meanfield.closed_forms import closed_form_energy
    from meanfield.dynamics.hmc import sample_hmc
    from meanfield.dynamics.langevin import gibbs_potential

    load0 = os.getloadavg()[0]
    E = closed_form_energy("semicircle")
    om0 = torch.linspace(-1.2, 1.2, N, dtype=torch.float64)[None, :, None].repeat(replicas, 1, 1)
    t0 = time.perf_counter()
    warm = sample_hmc(
        E, om0, beta=BETA, regime="coulomb-gas", n_warmup=60, n_samples=10, record_every=10,
        trajectory_length=T, target_accept=0.65, jitter=0.0, seed=seed,
    )  # fmt: skip
    tune = time.perf_counter() - t0
    start = torch.as_tensor(warm["omega"].values[-1])  # (R, N, 1)
    eps, L = float(warm.attrs["step_size"]), int(warm.attrs["n_leapfrog"])
    # the two targets are the same function: U in jax against meanfield's gibbs_potential
    import jax

    jax.config.update("jax_enable_x64", True)
    u_torch = gibbs_potential(E, start, BETA * N)[0].numpy()
    u_jax = np.asarray(jax.vmap(jax_potential(N))(start[..., 0].numpy()))
    u_err = float(np.abs(u_jax - u_torch).max() / np.abs(u_torch).max())
    if u_err > 1e-12:
        raise RuntimeError(f"the jax and torch targets differ (relative {u_err:.1e})")

    # pilots (the compiled one compiles) set the iteration counts: about `budget` s each
    pilot = run_meanfield(E, start, eps, 5, seed + 10, False)
    n_eager = max(50, int(budget / (pilot["wall_s"] / 5)))
    pilot_c = run_meanfield(E, start, eps, 40, seed + 30, True)
    n_comp = max(50, int(budget / (pilot_c["wall_s"] / 40)))
    pilot_b = run_blackjax(start[..., 0].numpy(), eps, L, 40, seed + 50)
    n_bj = max(50, int(budget / (pilot_b["wall_s"] / 40)))
    row = {"N": N, "replicas": replicas, "step_size": eps, "n_leapfrog": L, "tune_s": tune}
    row.update(target_rel_diff=u_err, compile_s=pilot_c["first_call_s"])
    row["jax_compile_s"] = pilot_b["first_call_s"]
    rounds = {"meanfield_eager": [], "meanfield_compiled": [], "blackjax": []}
    for r in range(repeats):  # interleaved, so a change of the machine's load hits all three
        s = seed + 100 * (r + 1)
        rounds["meanfield_eager"].append(run_meanfield(E, start, eps, n_eager, s, False))
        rounds["meanfield_compiled"].append(run_meanfield(E, start, eps, n_comp, s + 1, True))
        rounds["blackjax"].append(run_blackjax(start[..., 0].numpy(), eps, L, n_bj, s + 2))
    row.update(rounds)
    row["ratio"] = {
        o: [c[o]["ess_per_s"] / b[o]["ess_per_s"] for c, b in zip(
            rounds["meanfield_compiled"], rounds["blackjax"], strict=True)]
        for o in ("energy", "L_N")
    }  # fmt: skip
    row["ratio_pooled"] = {
        o: _pooled(rounds["meanfield_compiled"], o) / _pooled(rounds["blackjax"], o)
        for o in ("energy", "L_N")
    }
    row["load_avg_1min"] = [load0, os.getloadavg()[0]]
    return row


def _pooled(rounds, o):
    """ESS/s over all rounds together: the rounds' effective samples over their total time."""
    ess = sum(d[o]["ess_per_s"] * d["wall_s"] for d in rounds)
    return ess / sum(d["wall_s"] for d in rounds)


def _median(rounds, f):
    import numpy as np

    return float(np.median([f(d) for d in rounds]))


def _table(rows) -> list[str]:
    """The markdown table: medians over the rounds, the ratio of each round."""
    import numpy as np

    lines = [
        "| N | ε / L | ms per trajectory: eager / compiled / BlackJAX | ESS/s H_N: eager / "
        "compiled / BlackJAX | ESS/s L_N: compiled / BlackJAX | compiled ÷ BlackJAX ESS/s, "
        "H_N; L_N: pooled (median [min, max] of rounds) | compile s: torch / jax | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        e, c, b = r["meanfield_eager"], r["meanfield_compiled"], r["blackjax"]

        def ms(d):
            return f"{_median(d, lambda x: x['wall_s'] / x['iterations'] * 1e3):.2f}"

        def s(d, o="energy"):
            star = "" if all(x[o]["reliable"] for x in d) else "*"
            return f"{_median(d, lambda x: x[o]['ess_per_s']):.0f}{star}"

        def ratio(o, r=r):
            x = np.asarray(r["ratio"][o])
            pooled = r["ratio_pooled"][o]
            return f"{pooled:.2f} ({np.median(x):.2f} [{x.min():.2f}, {x.max():.2f}])"

        lines.append(
            f"| {r['N']} | {r['step_size']:.3f} / {r['n_leapfrog']} | {ms(e)} / {ms(c)} / "
            f"{ms(b)} | {s(e)} / {s(c)} / {s(b)} | {s(c, 'L_N')} / {s(b, 'L_N')} | "
            f"{ratio('energy')}; {ratio('L_N')} | {r['compile_s']:.0f} / "
            f"{r['jax_compile_s']:.1f} | {r['load_avg_1min'][0]:.1f}–{r['load_avg_1min'][1]:.1f} |"
        )
    return lines


#: The flags, declared once: their checks, help and docs come from these Params.
FLAGS = Contract(
    "benchmarks/bench_hmc_blackjax.py",
    [
        Param("n", "int", "particles per chain", low=2, sequence=True, default=(32, 64, 128)),
        Param("replicas", "int", "chains", low=1, default=8),
        Param("budget", "real", "sampling seconds per sampler and round", low=0.0,
              low_open=True, units="s", default=4.0),
        Param("repeats", "int", "interleaved rounds of the three samplers", low=1, default=3),
        Param("progress", "flag", "show the progress bar", default=True),
    ],
)  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    FLAGS.add_arguments(ap)
    add_bench_out(ap, "NAME.json and NAME.md")
    ap.add_argument(
        "--name", type=file_stem, default="hmc_blackjax", help="file stem [default: hmc_blackjax]"
    )
    args = FLAGS.parse_args(ap, argv)  # bad flags end here (exit 2), before torch and jax load
    # one thread each: XLA's CPU client reads its flags when jax first loads
    os.environ.setdefault("XLA_FLAGS", XLA_ONE_THREAD)
    try:
        import blackjax  # noqa: F401
    except ImportError:
        ap.error("BlackJAX is not installed: pip install blackjax (it brings jax)")
    import jax
    import torch

    jax.config.update("jax_enable_x64", True)
    torch.set_num_threads(1)
    rows = []
    t_all = time.perf_counter()
    for N in progress(args.n, enabled=args.progress, desc="N"):
        r = bench_one(N, args.replicas, args.budget, args.repeats)
        rows.append(r)
        say(f"N={N:4d} eps={r['step_size']:.4f} L={r['n_leapfrog']} R={r['replicas']}")
        for key in ("meanfield_eager", "meanfield_compiled", "blackjax"):
            for d in r[key]:
                say(
                    f"   {key:19s} {d['wall_s'] / d['iterations'] * 1e3:7.2f} ms/traj  acc "
                    f"{d['acceptance']:.2f}  ESS/s H {d['energy']['ess_per_s']:8.1f}  "
                    f"L_N {d['L_N']['ess_per_s']:8.1f}"
                )
        per_round = ", ".join(f"{x:.2f}" for x in r["ratio"]["energy"])
        say(f"   ratio (H_N) per round: {per_round}; pooled {r['ratio_pooled']['energy']:.2f}")
    total = time.perf_counter() - t_all
    lines = _table(rows)
    meta = {
        "budget_s": args.budget,
        "repeats": args.repeats,
        "replicas": args.replicas,
        "torch_threads": 1,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "total_wall_s": total,
        "machine": f"{platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores",
        "torch": torch.__version__,
        "jax": jax.__version__,
        "blackjax": __import__("blackjax").__version__,
        "note": "* = run shorter than 50 tau (ESS/s an upper bound)",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / args.name
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"total {total:.0f} s; wrote {out.with_suffix('.json')} and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
