"""Theory figures: ``meanfield figures`` regenerates each one into ``figures/``.

Every figure is written as PNG and PDF next to a netCDF record of the numbers behind it (with
parameters, seeds and the package version in its attributes).  ``size="small"`` runs a quick
configuration of the same computation (CI and notebooks); ``size="full"`` is what is committed.
"""

from __future__ import annotations

import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from ._validation import check_choice, check_output_path
from .results import provenance, save_dataset

SIZES = ("small", "full")
#: Measured wall time (s) of each figure at full size on the 2-core development machine
#: (README, Performance): what the stage messages quote.
FULL_SIZE_SECONDS = {
    "n_limit": 101,
    "ldp_rate": 205,
    "beta_limit": 12,
    "t_limit": 4,
    "kernel_concentration": 28,
    "coulomb3d": 900,
}


def _save(fig, ds: xr.Dataset, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf", out_dir / f"{name}.nc"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    plt.close(fig)
    save_dataset(ds, paths[2])
    return paths


# ----------------------------------------------------------------------------------------
def _ldp_rate_regime(E, st, regime, factor, thetas, Ns, reps, steps, seed):
    """Monte Carlo rates against N and the grid rate J(a) for one temperature regime."""
    from .studies.ldp import rate_at, scgf_on_grid, tail_probability

    sc = scgf_on_grid(E, st, 1.0, thetas, cells=512, regime=regime)
    a = factor * float(sc["a"].sel(theta=0.0))
    J = rate_at(sc, a)
    theta = float(np.interp(a, sc["a"].values, sc["theta"].values))
    rows = [
        tail_probability(
            E,
            st,
            a,
            N,
            1.0,
            theta=theta,
            eta=0.3,
            n_replicas=reps,
            n_steps=steps,
            burn_in=steps // 4,
            seed=seed + N,
            regime=regime,
        )
        for N in tqdm(Ns, desc=f"ldp_rate, {regime}", unit="N", leave=False)
    ]
    speed = np.asarray([float(r.attrs["speed"]) for r in rows])
    return {
        "rate": np.array([float(r["rate"]) for r in rows]),
        "rate_se": np.array([float(r["rate_se"]) for r in rows]),
        "rate_quad_err": np.array([float(r["log_p_quad_err"]) for r in rows]) / speed,
        "log_p": np.array([float(r["log_p"]) for r in rows]),
        "J": J,
        "a": a,
        "theta_star": theta,
        "Lambda": sc["Lambda"].values,
        "tilted_mean": sc["a"].values,
        "theta": sc["theta"].values,
    }


def ldp_rate_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """−(1/s_N) log P(L_N ≥ a) against N in both regimes, with the grid rate J(a).

    Model: V = ω²/2, k = −|z|, λ = 1/2, β = 1, p = 1, statistic f = ω².  Mean-field regime
    (speed s_N = N, a = 1.6 × the equilibrium mean of f, J from tilted Gibbs states) and
    Coulomb-gas regime (speed N², a = 2.5 × the β = ∞ mean, J from tilted equilibrium
    measures).
    """
    import torch

    from .domains import Box
    from .energy import Energy, PairInteraction, QuadraticPotential
    from .kernels import Riesz
    from .studies.ldp import statistic

    check_choice("size", size, SIZES)
    torch.set_num_threads(1)
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], Box(1, 8.0))
    st = statistic("second_moment")
    small = size == "small"
    reps, steps = (16, 150) if small else (64, 400)
    Ns = {
        "mf": [6, 12] if small else [8, 16, 32, 64],
        "cg": [8, 16] if small else [16, 32, 64, 128],
    }
    ladder = {
        "mf": np.r_[np.linspace(-0.3, 0, 4), np.linspace(0.025, 0.3, 12)],
        "cg": np.r_[np.linspace(-0.3, 0, 4), np.linspace(0.025, 0.45, 18)],
    }
    mf, cg = (
        _ldp_rate_regime(E, st, regime, factor, ladder[tag], Ns[tag], reps, steps, seed)
        for tag, regime, factor in (("mf", "mean-field", 1.6), ("cg", "coulomb-gas", 2.5))
    )
    data, attrs = (
        {},
        {
            "figure": "ldp_rate",
            "size": size,
            "beta": 1.0,
            "statistic": "second_moment",
            "n_replicas": reps,
            "n_steps": steps,
            "model": "V=w^2/2, k=-|z|, lambda=1/2, p=1",
        },
    )
    for tag, res in (("mf", mf), ("cg", cg)):
        for k in ("rate", "rate_se", "rate_quad_err", "log_p"):
            data[f"{k}_{tag}"] = (f"N_{tag}", res[k])
        for k in ("Lambda", "tilted_mean"):
            data[f"{k}_{tag}"] = (f"theta_{tag}", res[k])
        data[f"J_{tag}"] = res["J"]
        attrs[f"a_{tag}"] = res["a"]
        attrs[f"theta_star_{tag}"] = res["theta_star"]
    coords = {"N_mf": Ns["mf"], "N_cg": Ns["cg"], "theta_mf": mf["theta"], "theta_cg": cg["theta"]}
    return xr.Dataset(data, coords=coords, attrs=provenance(attrs, seed=seed))


def plot_ldp_rate(ds: xr.Dataset):
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    titles = {"mf": "mean-field regime: speed N", "cg": "Coulomb-gas regime: speed N²"}
    for axis, tag in zip(ax, ("mf", "cg"), strict=True):
        N = ds[f"N_{tag}"].values
        err = np.hypot(ds[f"rate_se_{tag}"].values, ds[f"rate_quad_err_{tag}"].values)
        axis.errorbar(
            N,
            ds[f"rate_{tag}"],
            yerr=2 * err,
            fmt="o-",
            capsize=3,
            label=r"Monte Carlo $-\frac{1}{s_N}\log P(L_N\geq a)$ (±2 s.e.)",
        )
        axis.axhline(float(ds[f"J_{tag}"]), color="k", ls="--", label=r"grid rate $J(a)$")
        axis.set_xscale("log")
        axis.set_xlabel("number of particles N")
        axis.set_ylabel("rate")
        axis.set_title(f"{titles[tag]}; a = {ds.attrs[f'a_{tag}']:.3g}")
        axis.legend(fontsize=8)
    fig.suptitle(r"Tail of $L_N=\int\omega^2 d\mu_N$ (V = ω²/2, k = −|z|, β = 1)")
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------
def beta_limit_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """β → ∞: W2(ρ_β, μ*) on the grid (semicircle and uniform cases) and W2(μ_N, μ*) for
    particles in both temperature regimes (uniform case, whose force has no singularity)."""
    import torch

    from .studies.limits import beta_limit_grid, particle_equilibrium_run

    check_choice("size", size, SIZES)
    torch.set_num_threads(1)
    betas_grid = 2.0 ** np.arange(0, 9 if size == "full" else 5)
    grids = {
        c: beta_limit_grid(c, betas_grid, cells=512 if size == "full" else 256)
        for c in ("semicircle", "uniform")
    }
    N = 64 if size == "full" else 16
    betas_p = [1.0, 4.0, 16.0, 64.0] if size == "full" else [1.0, 8.0]
    seeds = range(4 if size == "full" else 2)
    w2p = np.zeros((2, len(betas_p), len(seeds)))
    bar = tqdm(total=w2p.size, desc="beta_limit, particles", unit="run", leave=False)
    for i, regime in enumerate(("mean-field", "coulomb-gas")):
        for j, beta in enumerate(betas_p):
            for k, s in enumerate(seeds):
                r = particle_equilibrium_run(
                    N, beta, seed + s, case="uniform", regime=regime, t_end=6.0
                )
                w2p[i, j, k] = float(r["w2"].values[0])
                bar.update(1)
    bar.close()
    return xr.Dataset(
        {
            "w2_grid": (
                ("case", "beta_grid"),
                np.stack([grids[c]["w2_grid"].values for c in ("semicircle", "uniform")]),
            ),
            "w2_particles": (("regime", "beta_particles", "seed"), w2p),
        },
        coords={
            "case": ["semicircle", "uniform"],
            "beta_grid": betas_grid,
            "regime": ["mean-field", "coulomb-gas"],
            "beta_particles": betas_p,
            "seed": list(seeds),
        },
        attrs=provenance(
            {
                "figure": "beta_limit",
                "size": size,
                "N_particles": N,
                "model": "V=w^2/2, lambda=1/2, p=1 (THEORY 5)",
            },
            seed=seed,
        ),
    )


def plot_beta_limit(ds: xr.Dataset):
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for c in ds["case"].values:
        ax[0].loglog(ds["beta_grid"], ds["w2_grid"].sel(case=c), "o-", label=f"{c} (grid)")
    b = ds["beta_grid"].values
    ax[0].loglog(b, ds["w2_grid"].values[0, 0] * b[0] / b, "k:", label=r"$\propto\beta^{-1}$")
    ax[0].set_xlabel(r"inverse temperature $\beta$")
    ax[0].set_ylabel(r"$W_2(\rho_\beta, \mu^*)$")
    ax[0].set_title("Mean-field Gibbs state → equilibrium measure")
    ax[0].legend(fontsize=8)
    for r in ds["regime"].values:
        w = ds["w2_particles"].sel(regime=r)
        m, s = w.mean("seed"), w.std("seed", ddof=1) / np.sqrt(w.sizes["seed"])
        ax[1].errorbar(ds["beta_particles"], m, yerr=2 * s, fmt="o-", capsize=3, label=r)
    ax[1].set_xscale("log")
    ax[1].set_yscale("log")
    ax[1].set_xlabel(r"inverse temperature $\beta$")
    ax[1].set_ylabel(r"$W_2(\mu_N, \mu^*)$ (mean ± 2 s.e. over seeds)")
    ax[1].set_title(f"Particles, N = {ds.attrs['N_particles']} (uniform case, k = −|z|)")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------
def t_limit_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """t → ∞: the free-energy gap along the McKean–Vlasov flow for OU and for the interacting
    uniform case (k = −|z|), with fitted exponential rates and bootstrap intervals."""
    from .domains import Box
    from .energy import Energy, QuadraticPotential
    from .studies.limits import closed_form_energy, free_energy_decay

    check_choice("size", size, SIZES)
    cells = 512 if size == "full" else 128
    models = {
        "OU (no interaction)": Energy([QuadraticPotential()], Box(1, 4.0)),
        "V = w^2/2, k = -|z|, lambda = 1/2": closed_form_energy("uniform"),
    }
    runs = [free_energy_decay(E, 1.0, cells=cells, seed=seed) for E in models.values()]
    t = runs[0]["time"].values
    gap = np.stack([np.interp(t, r["time"].values, r["gap"].values) for r in runs])
    return xr.Dataset(
        {
            "gap": (("model", "time"), gap),
            "rate": ("model", [r.attrs["rate"] for r in runs]),
            "rate_ci_low": ("model", [r.attrs["rate_ci_low"] for r in runs]),
            "rate_ci_high": ("model", [r.attrs["rate_ci_high"] for r in runs]),
        },
        coords={"model": list(models), "time": t},
        attrs=provenance(
            {
                "figure": "t_limit",
                "size": size,
                "beta": 1.0,
                "cells": cells,
                "initial": "N(1, 0.3^2)",
            },
            seed=seed,
        ),
    )


def plot_t_limit(ds: xr.Dataset):
    fig, ax = plt.subplots(figsize=(6, 4))
    for m in ds["model"].values:
        sel = ds.sel(model=m)
        g = np.where(sel["gap"].values > 0, sel["gap"].values, np.nan)
        ax.semilogy(
            ds["time"],
            g,
            label=f"{m}: rate {float(sel['rate']):.3f} "
            f"[{float(sel['rate_ci_low']):.3f}, {float(sel['rate_ci_high']):.3f}]",
        )
    ax.set_xlabel("time t")
    ax.set_ylabel(r"$F_\beta(\rho_t) - F_\beta(\rho_\beta)$")
    ax.set_title(r"Free-energy gap along the McKean–Vlasov flow ($\beta$ = 1)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------
def kernel_model(seed: int = 0):
    """The learned-kernel model of the concentration figure: 1D two-class data (n = 30),
    softplus features, V = ω²/2, linear alignment, k = −|z| with λ = 1/2, on [−4, 4]."""
    from .domains import Box
    from .energy import Energy, LinearAlignment, PairInteraction, QuadraticPotential
    from .kernels import Riesz

    rng = np.random.default_rng(seed)
    y = np.repeat([-1.0, 1.0], 15)
    X = (0.8 * y + 0.4 * rng.normal(size=30))[:, None]
    E = Energy(
        [
            QuadraticPotential(),
            LinearAlignment(X, y, "softplus"),
            PairInteraction(Riesz(-1.0), 0.5),
        ],
        Box(1, 4.0),
    )
    return E, X


def kernel_concentration_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """Exponential concentration of the learned kernel: P(max|K_{μ_N} − K_ref| > ε) against N
    (mean-field regime, β = 2, reference ρ_β) and against β (Coulomb-gas regime, N = 16,
    reference μ*).  Variables suffixed ``_N`` and ``_beta`` for the two sweeps."""
    import torch

    from .studies.ldp import kernel_concentration, kernel_concentration_in_beta

    check_choice("size", size, SIZES)
    torch.set_num_threads(1)
    E, X = kernel_model(seed)
    full = size == "full"
    reps = 200 if full else 40
    kw = {"n_replicas": reps, "n_steps": 300, "burn_in": 100, "seed": seed}
    in_n = kernel_concentration(
        E,
        X,
        "softplus",
        2.0,
        [8, 16, 32, 64] if full else [8, 24],
        [0.75, 1.0, 1.5],
        eps_w2=[0.3, 0.4, 0.5],
        **kw,
    )
    in_b = kernel_concentration_in_beta(
        E, X, "softplus", 16, [0.1, 0.2, 0.4, 0.8, 1.6] if full else [0.1, 0.4], [0.5, 1.0], **kw
    )
    w2 = in_n[["prob_w2", "prob_w2_se", "mean_w2"]]
    in_n = in_n.drop_vars(["prob_w2", "prob_w2_se", "mean_w2", "eps_w2"])
    in_n, in_b = in_n.rename(eps="eps_N"), in_b.rename(eps="eps_beta")
    out = xr.Dataset(
        {
            **{f"{k}_N": v for k, v in in_n.data_vars.items()},
            **{f"{k}_beta": v for k, v in in_b.data_vars.items()},
            **dict(w2.data_vars),
        }
    )
    out.attrs = provenance(
        {
            "figure": "kernel_concentration",
            "size": size,
            "n_replicas": reps,
            "beta_for_N_sweep": 2.0,
            "N_for_beta_sweep": 16,
            "model": "meanfield.figures.kernel_model",
        },
        seed=seed,
    )
    return out


def plot_kernel_concentration(ds: xr.Dataset):
    fig, ax = plt.subplots(1, 3, figsize=(16, 4))
    for e in ds["eps_w2"].values:
        p = ds["prob_w2"].sel(eps_w2=e)
        s = ds["prob_w2_se"].sel(eps_w2=e)
        ok = p.values > 0
        ax[2].errorbar(
            ds["N"].values[ok],
            p.values[ok],
            yerr=2 * s.values[ok],
            fmt="o-",
            capsize=3,
            label=f"ε = {e:g}",
        )
    ax[2].set_yscale("log")
    ax[2].set_xlabel("number of particles N")
    ax[2].set_ylabel(r"$P(W_2(\mu_N, \rho_\beta) > \varepsilon)$ (± 2 s.e.)")
    ax[2].set_title(r"the empirical measure, mean-field, β = 2")
    ax[2].legend(fontsize=8)
    for axis, x, unit in ((ax[0], "N", "/N"), (ax[1], "beta", "/β")):
        for e in ds[f"eps_{x}"].values:
            p = ds[f"prob_{x}"].sel({f"eps_{x}": e})
            s = ds[f"prob_se_{x}"].sel({f"eps_{x}": e})
            ok = p.values > 0
            rate = float(ds[f"decay_rate_{x}"].sel({f"eps_{x}": e}))
            axis.errorbar(
                ds[x].values[ok],
                p.values[ok],
                yerr=2 * s.values[ok],
                fmt="o-",
                capsize=3,
                label=f"ε = {e:g}: "
                + (f"rate {rate:.3f}{unit}" if np.isfinite(rate) else "rate undetermined"),
            )
        axis.set_yscale("log")
        axis.set_ylabel(r"$P(\max_{jk}|K_{\mu_N} - K_{ref}| > \varepsilon)$ (± 2 s.e.)")
        axis.legend(fontsize=8)
    ax[0].set_xlabel("number of particles N")
    ax[0].set_title(r"mean-field regime, β = 2: reference $\rho_\beta$")
    ax[1].set_xlabel(r"inverse temperature $\beta$")
    ax[1].set_title(r"Coulomb-gas regime, N = 16: reference $\mu^*$")
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------
def n_limit_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """N → ∞: W2(μ_N(t), ρ_t) and the kernel gap against N at several times, on the default
    side-by-side problem (p = 1, mean-field regime), with bootstrap intervals over seeds."""
    import tempfile

    import torch

    from .studies.limits import particles_vs_grid_in_n

    check_choice("size", size, SIZES)
    torch.set_num_threads(1)
    Ns = [100, 200, 400, 800, 1600, 3200] if size == "full" else [64, 256]
    seeds = [seed + s for s in range(8 if size == "full" else 3)]
    t_final = 1.0 if size == "full" else 0.5
    with tempfile.TemporaryDirectory() as d:
        ds = particles_vs_grid_in_n(Ns, seeds, d, t_final=t_final, n_records=4, progress=True)
    ds = ds.load()
    ds.attrs = provenance(
        {
            "figure": "n_limit",
            "size": size,
            "t_final": t_final,
            "problem": "meanfield.compare.default_problem(1)",
        },
        seed=seed,
    )
    return ds


def plot_n_limit(ds: xr.Dataset):
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    n = ds["N"].values
    for axis, k, label in (
        (ax[0], "w2", r"$W_2(\mu_N(t), \rho_t)$"),
        (ax[1], "kernel_gap", r"$\max_{jk}|K_{\mu_N(t)} - K_{\rho_t}|$"),
    ):
        for i in range(1, ds.sizes["time"]):
            sel = ds[k].isel(time=i)
            m = sel.mean("seed")
            s = sel.std("seed", ddof=1) / np.sqrt(sel.sizes["seed"])
            r, lo, hi = (float(ds[f"rate_{k}{x}"].isel(time=i)) for x in ("", "_low", "_high"))
            rate = f"N^{r:.2f} [{lo:.2f}, {hi:.2f}]" if np.isfinite(r) else "rate undetermined"
            axis.errorbar(
                n,
                m,
                yerr=2 * s,
                fmt="o-",
                capsize=3,
                label=f"t = {float(ds['time'][i]):.2g}: {rate}",
            )
        m0 = ds[k].isel(time=-1).mean("seed").values[0]
        axis.plot(n, m0 * np.sqrt(n[0] / n), "k:", label=r"$N^{-1/2}$")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("number of particles N")
        axis.set_ylabel(label + " (mean ± 2 s.e.)")
        axis.legend(fontsize=7)
    ax[0].set_title("Particles vs McKean–Vlasov density")
    ax[1].set_title("Kernel gap on the data")
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------
def coulomb3d_data(size: str = "full", seed: int = 0, cache_dir=None) -> xr.Dataset:
    """The Coulomb gas of R³ (V = |ω|²/2, k = 1/|z|, λ = 1/2): HMC particles in the Coulomb-gas
    regime (β = 2) against the β = ∞ grid equilibrium μ*_h and the uniform unit ball, for
    N = 100 … 3000 (small: N = 40, 80 on a 10³ grid); see :mod:`meanfield.studies.coulomb3d`.
    """
    import torch

    from .studies.coulomb3d import coulomb3d_study

    check_choice("size", size, SIZES)
    torch.set_num_threads(1)
    if size == "full":
        kw = dict(Ns=[100, 300, 1000, 3000], n_grid=32, n_grids=(8, 12, 16, 24, 32))
        kw.update(n_warmup=200, n_samples=60)
    else:
        kw = dict(Ns=[40, 80], n_grid=10, n_grids=(8, 10), n_warmup=25, n_samples=3)
    ds = coulomb3d_study(seed=seed, cache_dir=cache_dir, progress=True, **kw)
    ds.attrs.update({"figure": "coulomb3d", "size": size})
    return ds


def plot_coulomb3d(ds: xr.Dataset):
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    r = ds["r"].values
    n_grid = ds.attrs["n_grid"]
    ax[0].step(r, ds["profile_grid"], where="mid", label=f"grid μ*_h ({n_grid}³, β = ∞)")
    ax[0].step(
        r,
        ds["profile_particles"],
        where="mid",
        label=f"HMC particles, N = {ds.attrs['N_profile']} (β = {ds.attrs['beta']:g})",
    )
    ax[0].plot([0, 1, 1, r[-1]], [1, 1, 0, 0], "k--", label="uniform unit ball")
    ax[0].set_xlabel("|ω|")
    ax[0].set_ylabel("shell density / (3/4π)")
    ax[0].set_title("Radial profile")
    ax[0].legend(fontsize=8)
    N = ds["N"].values
    for k, label, fmt in (
        ("w2_grid", r"$W_2(\mu_N, \mu^*_h)$ HMC", "o-"),
        ("w2_grid_iid", r"$W_2(\mu_N, \mu^*_h)$ iid ball", "o:"),
        ("w2_radial", r"$W_2$ of $|\omega|$ vs ball, HMC", "s-"),
        ("w2_radial_iid", r"$W_2$ of $|\omega|$ vs ball, iid", "s:"),
    ):
        ax[1].plot(N, ds[k], fmt, label=label)
    ax[1].plot(N, np.abs(ds["radius"] - 1), "^-", label="|radius − 1|, HMC")
    ref = float(ds["w2_grid_iid"][0])
    ax[1].plot(N, ref * (N / N[0]) ** (-1 / 3), "k:", lw=0.8, label=r"$N^{-1/3}$")
    ax[1].set_xscale("log")
    ax[1].set_yscale("log")
    ax[1].set_xlabel("number of particles N")
    ax[1].set_ylabel("distance (units of ω)")
    ax[1].set_title("Particles vs grid and ball (exact W2)")
    ax[1].legend(fontsize=7)
    h = ds["grid_h"].values
    for k, label in (
        ("grid_radius_error", "|radius − 1|"),
        ("grid_flatness", "max |ρ/ρ_ball − 1|, |ω| < 0.6"),
        ("grid_energy_error", "|E_h(μ*_h) − 9/10|"),
    ):
        ax[2].plot(h, ds[k], "o-", label=label)
    e_last = float(ds["grid_energy_error"][-1])
    ax[2].plot(h, e_last * (h / h[-1]) ** 2, "k:", lw=0.8, label="h²")
    ax[2].set_xscale("log")
    ax[2].set_yscale("log")
    ax[2].set_xlabel("cell width h")
    ax[2].set_ylabel("error (radius, density ratio, energy)")
    ax[2].set_title("Grid μ*_h vs the uniform ball")
    ax[2].legend(fontsize=7)
    fig.suptitle("Coulomb gas in R³: V = |ω|²/2, k = 1/|z|, λ = 1/2 (μ* = uniform unit ball)")
    fig.tight_layout()
    return fig


FIGURES = {
    "n_limit": (n_limit_data, plot_n_limit),
    "ldp_rate": (ldp_rate_data, plot_ldp_rate),
    "beta_limit": (beta_limit_data, plot_beta_limit),
    "t_limit": (t_limit_data, plot_t_limit),
    "kernel_concentration": (kernel_concentration_data, plot_kernel_concentration),
    "coulomb3d": (coulomb3d_data, plot_coulomb3d),
}


def make_figures(
    out_dir="figures", *, size: str = "full", only=None, seed: int = 0, log=print
) -> dict:
    """Compute and draw the figures (all, or those named in ``only``); returns their paths.

    Parameters
    ----------
    out_dir : path
        Folder of the PNG, PDF and netCDF files (checked writable before any work).
    size : {"small", "full"}
    only : list of str, optional
        Names of :data:`FIGURES` to make (default: all).
    seed : int
    log : callable
        Receives a stage message before each figure (with its expected time) and one line
        after it; ``None`` for silence.
    """
    check_choice("size", size, SIZES)
    names = list(FIGURES) if not only else list(only)
    for n in names:
        check_choice("figure", n, FIGURES)
    out_dir = check_output_path("out_dir", out_dir, kind="dir")
    log = log or (lambda _msg: None)
    out = {}
    for i, name in enumerate(names, 1):
        expect = FULL_SIZE_SECONDS[name]
        hint = (
            f"about {expect} s" if size == "full" else f"a fraction of the {expect} s at full size"
        )
        log(f"[{i}/{len(names)}] {name}: computing ({hint} on 2 cores) ...")
        t0 = time.perf_counter()
        compute, plot = FIGURES[name]
        ds = compute(size=size, seed=seed)
        ds.attrs["wall_time_s"] = time.perf_counter() - t0
        out[name] = _save(plot(ds), ds, out_dir, name)
        log(
            f"[{i}/{len(names)}] {name}: {time.perf_counter() - t0:.1f} s -> "
            f"{', '.join(map(str, out[name]))}"
        )
    return out
