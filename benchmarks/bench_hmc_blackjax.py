"""HMC effective samples per second: meanfield's sample_hmc (eager and compiled) vs BlackJAX.

The same sampler on the same target, side by side in one run: the log gas of THEORY §5
(V = ω²/2, k = −log|z|, λ = 1/2, p = 1, box [−4, 4], Coulomb-gas regime β = 2, so the Gibbs
potential is U = β N² H_N), R chains from the same equilibrated start, the same leapfrog step ε
(adapted once by meanfield's warm-up to acceptance 0.65), the same number L = ⌈T/ε⌉ of
leapfrog steps (T = π/4, a quarter period of the breathing mode), the same mass (β_N, so the
flow is Ω'' = −N∇H_N) and no step jitter.  BlackJAX (``blackjax.hmc``, vmapped over chains,
the whole chain one ``jax.lax.scan`` under ``jax.jit``, float64) does not reflect at the box;
the log gas lives on [−√2, √2] and never reaches the walls at ±4 (checked: no particle beyond
3 in any run).  Observables: H_N and L_N = ∫ω² dμ_N; τ_int by Geyer's initial monotone
sequence pooled over chains (meanfield.dynamics.hmc.integrated_autocorr_time); ESS/s counts the
sampling phase only; compilation (torch.compile, jax.jit) is timed and reported apart.

    python benchmarks/bench_hmc_blackjax.py                 # N = 32 64 128, 8 chains
    python benchmarks/bench_hmc_blackjax.py --n 32 --budget 3
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time

from meanfield.workbench._scripts import (
    add_bench_out,
    file_stem,
    float_range,
    int_range,
    progress,
    say,
)

T = math.pi / 4
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


def bench_one(N, replicas, budget, seed=0):
    import numpy as np
    import torch

    from meanfield.dynamics.hmc import sample_hmc
    from meanfield.dynamics.langevin import gibbs_potential
    from meanfield.studies.limits import closed_form_energy

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

    # a pilot sets the iteration counts so each sampler runs about `budget` seconds
    pilot = run_meanfield(E, start, eps, 5, seed + 10, False)
    n_eager = max(50, int(budget / (pilot["wall_s"] / 5)))
    row = {"N": N, "replicas": replicas, "step_size": eps, "n_leapfrog": L, "tune_s": tune}
    row["target_rel_diff"] = u_err
    row["meanfield_eager"] = run_meanfield(E, start, eps, n_eager, seed + 20, False)
    pilot_c = run_meanfield(E, start, eps, 5, seed + 30, True)
    n_comp = max(50, int(budget / (pilot_c["wall_s"] / 5)))
    row["meanfield_compiled"] = run_meanfield(E, start, eps, n_comp, seed + 40, True)
    row["meanfield_compiled"]["compile_s"] = pilot_c["first_call_s"]
    # BlackJAX's pilot: one short compiled chain
    bj = run_blackjax(start[..., 0].numpy(), eps, L, 20, seed + 50)
    n_bj = max(50, int(budget / (bj["wall_s"] / 20)))
    row["blackjax"] = run_blackjax(start[..., 0].numpy(), eps, L, n_bj, seed + 60)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--n", type=int_range(2), nargs="+", default=[32, 64, 128], metavar="N",
        help="particles per chain (each >= 2) [default: 32 64 128]",
    )  # fmt: skip
    ap.add_argument("--replicas", type=int_range(1), default=8, help="chains >= 1 [default 8]")
    ap.add_argument(
        "--budget", type=float_range(0), default=6.0, help="sampling seconds per sampler (> 0)"
    )
    add_bench_out(ap, "NAME.json and NAME.md")
    ap.add_argument(
        "--name", type=file_stem, default="hmc_blackjax", help="file stem [default: hmc_blackjax]"
    )
    ap.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = ap.parse_args(argv)  # bad flags end here (exit 2), before torch and jax load
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
    for N in progress(args.n, enabled=not args.no_progress, desc="N"):
        r = bench_one(N, args.replicas, args.budget)
        rows.append(r)
        say(f"N={N:4d} eps={r['step_size']:.4f} L={r['n_leapfrog']} R={r['replicas']}")
        for key in ("meanfield_eager", "meanfield_compiled", "blackjax"):
            d = r[key]
            say(
                f"   {key:19s} {d['wall_s'] / d['iterations'] * 1e3:7.2f} ms/traj  acc "
                f"{d['acceptance']:.2f}  ESS/s H {d['energy']['ess_per_s']:8.1f}  "
                f"L_N {d['L_N']['ess_per_s']:8.1f}  (first call {d['first_call_s']:.1f} s)"
            )
    total = time.perf_counter() - t_all
    lines = [
        "| N | ε / L | ms per trajectory: eager / compiled / BlackJAX | ESS/s H_N: eager / "
        "compiled / BlackJAX | compiled ÷ BlackJAX (H_N, L_N) | compile s: torch / jax |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        e, c, b = r["meanfield_eager"], r["meanfield_compiled"], r["blackjax"]

        def ms(d):
            return f"{d['wall_s'] / d['iterations'] * 1e3:.2f}"

        def s(d, o="energy"):
            return f"{d[o]['ess_per_s']:.0f}{'' if d[o]['reliable'] else '*'}"

        ratio_h = c["energy"]["ess_per_s"] / b["energy"]["ess_per_s"]
        ratio_l = c["L_N"]["ess_per_s"] / b["L_N"]["ess_per_s"]
        lines.append(
            f"| {r['N']} | {r['step_size']:.3f} / {r['n_leapfrog']} | {ms(e)} / {ms(c)} / {ms(b)} "
            f"| {s(e)} / {s(c)} / {s(b)} | {ratio_h:.2f} / {ratio_l:.2f} "
            f"| {c['compile_s']:.0f} / {b['first_call_s']:.1f} |"
        )
    meta = {
        "budget_s": args.budget,
        "replicas": args.replicas,
        "torch_threads": 1,
        "total_wall_s": total,
        "machine": f"{platform.machine()} {platform.processor() or ''}, 2-core shared CPU",
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
