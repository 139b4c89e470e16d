"""Run functions for limit studies (N → ∞, β → ∞) on the closed-form cases of THEORY §5.

Each function is a module-level ``f(**params) -> xarray.Dataset`` so that
:func:`meanfield.workbench.sweeps.run_sweep` can map it over a grid on any dask scheduler.
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from .._validation import check_choice, check_int, check_positive
from ..closed_forms import equilibrium_case, wasserstein_to_law_1d
from ..domains import Ball, Box
from ..dynamics.langevin import simulate
from ..dynamics.spec import RunSpec
from ..energy import Energy, PairInteraction, QuadraticPotential
from ..errors import ConvergenceError
from ..kernels import Riesz
from ..results import provenance

# the power-law fit and its printing live in meanfield.stats (one definition for the package);
# re-exported here, their former address
from ..stats import fit_power_law, fit_power_law_or_undetermined, format_rate  # noqa: F401


def closed_form_energy(case: str) -> Energy:
    r"""E = ∫|ω|²/2 dμ + ½∬k_s dμdμ on a domain wide enough never to bind (THEORY §5).

    .. math::

        E(\mu) = \int \frac{|\omega|^2}{2}\, d\mu(\omega)
        + \frac12 \iint k_s(\omega - \omega')\, d\mu(\omega)\, d\mu(\omega')

    Parameters
    ----------
    case : {"semicircle", "uniform", "disk"}

    Returns
    -------
    Energy
        On the box [−4, 4] (p = 1) or the ball of radius 3 (p = 2).

    Examples
    --------
    >>> from meanfield.studies.limits import closed_form_energy
    >>> E = closed_form_energy("uniform")  # k = −|z| (Riesz s = −1) in p = 1
    >>> E.domain, E.describe()["term1_s"], E.describe()["term1_lam"]
    (Box(dim=1, half_width=4.0), -1.0, 0.5)
    >>> closed_form_energy("disk").domain
    Ball(dim=2, radius=3.0)
    """
    s, p, _ = equilibrium_case(case)
    domain = Box(1, 4.0) if p == 1 else Ball(p, 3.0)
    return Energy([QuadraticPotential(), PairInteraction(Riesz(s), 0.5)], domain)


def default_step(case: str, N: int) -> float:
    r"""A stable step: in 1D η must resolve the neighbour gap ~1/N (stiff singular kernels).

    .. math::

        \eta = \begin{cases} 0.05 / N & p = 1,\ s = 0 \text{ (log gas)} \\
        0.5 / N & p = 1,\ s \ne 0 \\ 0.02 & p = 2 \end{cases}

    Examples
    --------
    >>> from meanfield.studies.limits import default_step
    >>> default_step("semicircle", 10), default_step("uniform", 10), default_step("disk", 10)
    (0.005, 0.05, 0.02)
    """
    s, p, _ = equilibrium_case(case)
    if p == 1:
        return (0.05 if s == 0 else 0.5) / N
    return 0.02


def particle_equilibrium_run(
    N: int,
    beta: float,
    seed: int,
    *,
    case: str = "semicircle",
    regime: str = "coulomb-gas",
    t_end: float = 5.0,
    eta: float | None = None,
    n_replicas: int = 1,
) -> xr.Dataset:
    """Relax N particles of a closed-form case to stationarity and measure W1, W2 to μ*.

    Parameters
    ----------
    N : int
        Number of particles.
    beta : float
        Inverse temperature (β_N = β or βN by ``regime``).
    seed : int
    case : {"semicircle", "uniform", "disk"}
        THEORY §5: p = 1 log-gas, p = 1 with k = −|z|, p = 2 log-gas.
    t_end : float
        Time of the Langevin run from a well-spread start (uniform on [−1, 1]^p).
    eta : float, optional
        Step; default :func:`default_step`.
    n_replicas : int
        Independent replicas run side by side.

    Returns
    -------
    xarray.Dataset
        ``omega_final`` (replica, particle, dim); ``w1``, ``w2`` (replica): distance of the
        empirical measure to μ* (in p = 2, of the radii to the radial law), by exact quantile
        integrals.

    Examples
    --------
    Eight particles of the uniform case (k = −|z|) at β = 4, a short run:

    >>> from meanfield.studies.limits import particle_equilibrium_run
    >>> ds = particle_equilibrium_run(8, 4.0, 0, case="uniform", t_end=0.5)
    >>> dict(ds["omega_final"].sizes), ds.attrs["eta"], ds.attrs["n_steps"]
    ({'replica': 1, 'particle': 8, 'dim': 1}, 0.0625, 8)
    >>> bool((ds["w1"] <= ds["w2"]).all())  # W1 ≤ W2
    True
    """
    N = check_int("N", N)
    beta = check_positive("beta", beta)
    check_choice("case", case, ("semicircle", "uniform", "disk"))
    n_replicas = check_int("n_replicas", n_replicas)
    s, p, law = equilibrium_case(case)
    eta = default_step(case, N) if eta is None else check_positive("eta", eta)
    n_steps = max(1, int(round(t_end / eta)))
    run = dict(eta=eta, beta=beta, n_steps=n_steps, regime=regime, seed=seed)
    final, energy_final = _relax_replicas(closed_form_energy(case), N, p, n_replicas, run)
    params = {"case": case, "s": s, "p": p, "N": N, "beta": beta, "regime": regime}
    params |= {"eta": eta, "t_end": t_end, "n_steps": n_steps, "n_replicas": n_replicas}
    return _equilibrium_dataset(final, energy_final, law, params, seed)


def _relax_replicas(energy: Energy, N: int, p: int, n_replicas: int, run: dict):
    """Langevin runs of ``n_replicas`` replicas of N particles from a well-spread start.

    The start is evenly spread on [−1, 1] with a random jitter below the spacing (p = 1: no
    near-collisions for the stiff singular kernels), or uniform on [−0.6, 0.6]^p (p = 2);
    ``run`` holds the run's fields of a :class:`~meanfield.dynamics.spec.RunSpec`: ``eta``,
    ``beta``, ``n_steps``, ``regime`` and ``seed`` (which also seeds the start).  Returns the
    final positions
    (replica, particle, dim) and the final energies (replica,).
    """
    gen = torch.Generator().manual_seed(int(run["seed"]))
    if p == 1:  # evenly spread start, randomly jittered: no near-collisions
        base = torch.linspace(-1, 1, N, dtype=torch.float64)
        jitter = (torch.rand(n_replicas, N, generator=gen, dtype=torch.float64) - 0.5) / N
        omega0 = (base + jitter)[..., None]
    else:
        omega0 = (torch.rand(n_replicas, N, p, generator=gen, dtype=torch.float64) - 0.5) * 1.2
    ds = simulate(RunSpec(energy=energy, initial=omega0, **run), record_positions=False)
    return ds["omega_final"].values, ds["energy"].isel(time=-1).values


def _equilibrium_dataset(final, energy_final, law, params: dict, seed) -> xr.Dataset:
    """:func:`particle_equilibrium_run`'s dataset: the final positions ``final`` (replica,
    particle, dim), their W1 and W2 to μ* (in p = 2, of the radii to the radial law ``law``)
    by exact quantile integrals, the final energies, and ``params`` as provenance."""
    p, N, n_replicas = params["p"], params["N"], params["n_replicas"]
    samples = final[..., 0] if p == 1 else np.linalg.norm(final, axis=-1)
    w1 = [wasserstein_to_law_1d(x, law, order=1) for x in samples]
    w2 = [wasserstein_to_law_1d(x, law, order=2) for x in samples]
    out = xr.Dataset(
        {
            "omega_final": (("replica", "particle", "dim"), final),
            "w1": (("replica",), np.asarray(w1)),
            "w2": (("replica",), np.asarray(w2)),
            "energy_final": (("replica",), energy_final),
        },
        coords={"replica": np.arange(n_replicas), "particle": np.arange(N), "dim": np.arange(p)},
        attrs=provenance(params, seed=seed),
    )
    out["w1"].attrs["long_name"] = "W1(mu_N, mu*)"
    out["w2"].attrs["long_name"] = "W2(mu_N, mu*)"
    return out


def exact_cell_density(case: str, grid):
    r"""μ* of a closed-form case as cell averages on ``grid`` (exact CDF differences; p = 1).

    .. math::

        \rho_j = \frac{F(x_{j+1/2}) - F(x_{j-1/2})}{h}

    Examples
    --------
    The uniform law on [−1, 1] has density 1/2, on 16 cells of width 1/2 of [−4, 4]:

    >>> from meanfield.pde import Grid
    >>> from meanfield.studies.limits import closed_form_energy, exact_cell_density
    >>> grid = Grid(closed_form_energy("uniform").domain, 16)
    >>> rho = exact_cell_density("uniform", grid)
    >>> rho.data.round(3).tolist(), float(rho.mass)
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 1.0)
    """
    from ..pde.field import Density

    _, p, law = equilibrium_case(case)
    if p != 1:
        raise ValueError(f"exact_cell_density is for the p = 1 cases, not {case!r}")
    edges = grid.edges[0]
    return Density(grid, np.diff(law.cdf(edges)) / grid.cell_volume)


def beta_limit_grid(case: str, betas, *, cells: int = 512, progress: bool = False) -> xr.Dataset:
    r"""W2(ρ_β, μ*) on a grid: the mean-field Gibbs state against the exact β = ∞ law.

    ρ_β solves ρ = Z⁻¹ exp(−β δE/δρ[ρ]) (Newton–Krylov, warm-started along increasing β);
    μ* is the closed form of THEORY §5 averaged over the same cells.

    .. math::

        \rho_\beta = Z^{-1} \exp\Big(-\beta \frac{\delta E}{\delta \rho}[\rho_\beta]\Big),
        \qquad W_2(\rho_\beta, \mu^*) \to 0 \quad (\beta \to \infty)

    Returns
    -------
    xarray.Dataset
        ``w2_grid`` over ``beta`` (sorted).

    Examples
    --------
    >>> from meanfield.studies.limits import beta_limit_grid
    >>> ds = beta_limit_grid("uniform", [8.0, 2.0], cells=16)
    >>> ds["beta"].values.tolist(), bool(ds["w2_grid"][1] < ds["w2_grid"][0])
    ([2.0, 8.0], True)
    """
    from ..ot.distance import w2
    from ..ot.measure import Measure
    from ..pde import Grid, gibbs_state

    betas = np.sort(np.asarray(betas, dtype=float))
    energy = closed_form_energy(case)
    grid = Grid(energy.domain, cells)
    mstar = exact_cell_density(case, grid)
    dist, rho = [], None
    for beta in tqdm(betas, desc="grid Gibbs states", unit="beta", disable=not progress):
        rho, report = gibbs_state(energy, grid, float(beta), method="newton", rho0=rho)
        if not report.converged:
            raise ConvergenceError(f"Gibbs state at beta={beta} did not converge: {report}")
        dist.append(w2(Measure.from_density(rho), Measure.from_density(mstar)).distance)
    return xr.Dataset(
        {"w2_grid": ("beta", np.asarray(dist))},
        coords={"beta": betas},
        attrs=provenance({"case": case, "cells": cells}, seed=None),
    )


def free_energy_decay(
    energy: Energy,
    beta: float,
    *,
    cells: int = 256,
    t_end: float = 6.0,
    mean0: float = 1.0,
    std0: float = 0.3,
    n_records: int = 200,
    fit_window=(1e-9, 1e-3),
    n_boot: int = 1000,
    seed: int = 0,
    progress: bool = False,
) -> xr.Dataset:
    """t → ∞: the free-energy gap F_β(ρ_t) − F_β(ρ_β) along the McKean–Vlasov flow (p = 1).

    The flow starts from a Gaussian N(mean0, std0²) on the grid; ρ_β is the grid Gibbs state.
    The exponential rate is the slope of log(gap) against t over the times where the gap lies
    in ``fit_window`` (above round-off, past the initial transient), with a residual-bootstrap
    95 % interval.  Fewer than 5 records in the window (``t_end`` too short for the gap to
    fall below ``fit_window[1]``) leave the rate undetermined: NaN, with ``rate_status``
    saying why, never a number fitted to the transient.

    Returns
    -------
    xarray.Dataset over ``time``: ``free_energy``, ``gap``; attributes ``rate``,
    ``rate_ci_low``, ``rate_ci_high``, ``rate_status`` (``"fitted"`` or why not),
    ``F_beta_min``.

    .. math::

        F_\\beta(\\rho_t) - F_\\beta(\\rho_\\beta) \\approx C e^{-\\text{rate} \\cdot t}

    Examples
    --------
    V = ω²/2 with k = −|z|: the mean relaxes at rate 1, so the gap (∝ m_t²) decays at rate 2.

    >>> from meanfield.studies.limits import closed_form_energy, free_energy_decay
    >>> E = closed_form_energy("uniform")
    >>> ds = free_energy_decay(E, 1.0, cells=16, t_end=6.0, n_records=30, n_boot=20)
    >>> ds.attrs["rate_status"], round(float(ds.attrs["rate"]), 1)
    ('fitted', 2.0)
    """
    beta = check_positive("beta", beta)
    t_end = check_positive("t_end", t_end)
    if energy.dim != 1:
        raise ValueError(f"free_energy_decay is written for p = 1, got p = {energy.dim}")
    t, F, F_min = _free_energy_trace(energy, beta, cells, t_end, mean0, std0, n_records, progress)
    gap = F - F_min
    slope, lo, hi, status = _log_linear_rate(t, gap, fit_window, n_boot, seed, t_end)
    return xr.Dataset(
        {"free_energy": ("time", F), "gap": ("time", gap)},
        coords={"time": t},
        attrs=provenance(
            {
                "beta": beta,
                "cells": cells,
                "t_end": t_end,
                "mean0": mean0,
                "std0": std0,
                "rate": -slope,
                "rate_ci_low": -hi,
                "rate_ci_high": -lo,
                "rate_status": status,
                "F_beta_min": F_min,
                **energy.describe(),
            },
            seed=seed,
        ),
    )


def _free_energy_trace(energy, beta, cells, t_end, mean0, std0, n_records, progress):
    """F_β(ρ_t) along the McKean–Vlasov flow (SG-implicit) from N(mean0, std0²) on the grid,
    recorded ``n_records`` times up to ``t_end``: (times, free energies, min F_β), where
    min F_β is that of the grid Gibbs state ρ_β (Newton)."""
    from ..pde import FreeEnergyTracker, Grid, McKeanVlasov, gibbs_state, solve
    from ..pde.field import Density

    grid = Grid(energy.domain, cells)
    _, report = gibbs_state(energy, grid, beta, method="newton")
    eq = McKeanVlasov(energy, grid, beta, scheme="sg-implicit")
    tracker = FreeEnergyTracker(interval=t_end / n_records)
    rho0 = Density.gaussian(grid, mean=mean0, std=std0)
    solve(eq, rho0, t_end, trackers=[tracker], dt=t_end / (4 * n_records), progress=progress)
    fe = tracker.to_dataset()
    return fe["time"].values, fe["free_energy"].values, report.free_energy


def _log_linear_rate(t, gap, fit_window, n_boot: int, seed: int, t_end: float):
    """The slope of log(gap) against t over the records with the gap inside ``fit_window``,
    its residual-bootstrap 95 % interval, and a status: (slope, low, high, status).

    Fewer than 5 records in the window leave the slope undetermined (NaN), with a status
    saying why (``t_end`` is named as what to lengthen)."""
    sel = (gap > fit_window[0]) & (gap < fit_window[1])
    if sel.sum() < 5:
        status = (
            f"undetermined: {int(sel.sum())} of {len(gap)} records have the gap in "
            f"[{fit_window[0]:g}, {fit_window[1]:g}] (at least 5 needed; the gap is "
            f"{gap[-1]:.3g} at t_end = {t_end:g}): lengthen t_end"
        )
        return np.nan, np.nan, np.nan, status
    tt, lg = t[sel], np.log(gap[sel])
    slope, icpt = np.polyfit(tt, lg, 1)
    resid = lg - (slope * tt + icpt)
    rng = np.random.default_rng(seed)
    boots = [
        np.polyfit(tt, slope * tt + icpt + rng.choice(resid, len(resid)), 1)[0]
        for _ in range(n_boot)
    ]
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return slope, lo, hi, "fitted"


def particles_vs_grid_run(
    N: int,
    seed: int,
    *,
    t_final: float = 1.0,
    n_records: int = 4,
    grid_n: int = 128,
    n_data: int = 200,
) -> xr.Dataset:
    """One (N, seed) run of the default side-by-side problem
    (:class:`~meanfield.workbench.problems.ComparisonConfig` with ``cells = grid_n``, compared by
    :func:`~meanfield.workbench.compare.compare`), reduced to its diagnostics over time: ``w2``,
    ``w1`` and ``kernel_gap`` (time).

    Examples
    --------
    >>> from meanfield.studies.limits import particles_vs_grid_run
    >>> ds = particles_vs_grid_run(8, 0, t_final=0.05, n_records=1, grid_n=16, n_data=10)
    >>> sorted(ds.data_vars), ds["time"].values.tolist()
    (['kernel_gap', 'w1', 'w2'], [0.0, 0.05])
    >>> bool((ds["w1"] <= ds["w2"] + 1e-12).all())  # W1 ≤ W2
    True
    """
    from ..workbench.compare import compare
    from ..workbench.problems import ComparisonConfig

    problem = ComparisonConfig(
        dim=1, cells=grid_n, n_data=n_data, n_particles=N, t_final=t_final, seed=seed
    )
    ds = compare(problem.spec(), n_records=n_records)
    return ds[["w2", "w1", "kernel_gap"]]


def particles_vs_grid_in_n(
    Ns,
    seeds,
    out_dir,
    *,
    t_final: float = 1.0,
    n_records: int = 4,
    scheduler: str = "threads",
    n_workers: int | None = None,
    progress: bool = False,
) -> xr.Dataset:
    r"""N → ∞ at several times: W2(μ_N(t), ρ_t) and the kernel gap against N, as a resumable
    sweep over (N, seed), with the fitted power-law rate and its bootstrap 95 % interval at
    every recorded time (variables ``rate_<metric>``, ``rate_<metric>_low/high`` over time;
    NaN, with ``attrs["rate_status"]`` "undetermined…", for fewer than 3 distinct N).

    .. math::

        W_2(\mu_N(t), \rho_t) \approx C(t)\, N^{\text{rate}(t)}

    Examples
    --------
    Two sizes only (the rate is then undetermined), into ``sweep_n/`` in the current folder:

    >>> from meanfield.studies.limits import particles_vs_grid_in_n
    >>> ds = particles_vs_grid_in_n([4, 8], [0], "sweep_n", t_final=0.05, n_records=1, n_workers=1)
    >>> dict(ds["w2"].sizes), ds.attrs["rate_status"]
    ({'N': 2, 'seed': 1, 'time': 2}, 'undetermined: fewer than 3 distinct sizes')
    """
    from ..workbench.sweeps import run_sweep

    ds = run_sweep(
        particles_vs_grid_run,
        {"N": list(Ns), "seed": list(seeds)},
        out_dir,
        fixed={"t_final": t_final, "n_records": n_records},
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
    )
    for k in ("w2", "kernel_gap"):
        fits = [
            fit_power_law_or_undetermined(ds["N"].values, ds[k].isel(time=i).values, n_boot=1000)
            for i in range(ds.sizes["time"])
        ]
        ds[f"rate_{k}"] = ("time", [f["slope"] for f in fits])
        ds[f"rate_{k}_low"] = ("time", [f["ci_low"] for f in fits])
        ds[f"rate_{k}_high"] = ("time", [f["ci_high"] for f in fits])
        ds.attrs["rate_status"] = fits[0]["status"]
    return ds


def beta_limit_particles(
    case: str,
    betas,
    N: int,
    seeds,
    out_dir,
    *,
    regime: str = "coulomb-gas",
    t_end: float = 6.0,
    scheduler: str = "threads",
    n_workers: int | None = None,
    progress: bool = False,
) -> xr.Dataset:
    r"""β → ∞ for particles: W2(μ_N, μ*) over a (β, seed) sweep, with the fitted power law in β
    and its bootstrap 95 % interval over seeds (attributes ``rate``, ``rate_ci_low/high``;
    NaN with ``rate_status`` "undetermined…" for fewer than 3 distinct β).

    .. math::

        W_2(\mu_N, \mu^*) \approx C \beta^{\text{rate}}

    Examples
    --------
    Four particles, two β, one seed, a short run, into ``sweep_beta/`` in the current folder:

    >>> from meanfield.studies.limits import beta_limit_particles
    >>> betas, N, seeds = [1.0, 2.0], 4, [0]
    >>> ds = beta_limit_particles("uniform", betas, N, seeds, "sweep_beta", t_end=0.1, n_workers=1)
    >>> ds["w2"].dims, ds.attrs["rate_status"]
    (('beta', 'seed', 'replica'), 'undetermined: fewer than 3 distinct sizes')
    """
    from ..workbench.sweeps import run_sweep

    ds = run_sweep(
        particle_equilibrium_run,
        {"beta": [float(b) for b in betas], "seed": list(seeds)},
        out_dir,
        fixed={"N": int(N), "case": case, "regime": regime, "t_end": t_end},
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
    )
    fit = fit_power_law_or_undetermined(ds["beta"].values, ds["w2"].isel(replica=0).values)
    ds.attrs.update(
        {
            "rate": fit["slope"],
            "rate_ci_low": fit["ci_low"],
            "rate_ci_high": fit["ci_high"],
            "rate_status": fit["status"],
        }
    )
    return ds
