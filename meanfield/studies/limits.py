"""The limits of THEORY §5–6 on the closed-form cases: N → ∞, β → ∞ and t → ∞.

* N → ∞: W1, W2 of relaxed particles to the equilibrium μ* (:func:`equilibrium_in_n`), and
  W2(μ_N(t), ρ_t) against the McKean–Vlasov grid (:func:`convergence_in_n`,
  :func:`particles_vs_grid_in_n`), with fitted power laws in N;
* β → ∞: W2(ρ_β, μ*) of the grid Gibbs state and W2(μ_N, μ*) of particles
  (:func:`beta_limit_grid`, :func:`beta_limit_particles`);
* t → ∞: the free-energy gap F_β(ρ_t) − F_β(ρ_β) along the flow and its exponential rate
  (:func:`free_energy_decay`).

Run functions are module-level ``f(**params) -> xarray.Dataset``, mapped by
:func:`meanfield.workbench.sweeps.run_sweep` into resumable sweeps; the ``*_data`` functions
are the experiments of ``meanfield figures`` at a named size (:data:`SIZES`).

References
----------
- S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
  Mathematics, EMS, 2015 (the equilibria μ* and the N → ∞ limit of Coulomb and Riesz gases).
- I. Dumitriu, A. Edelman, "Matrix models for β-ensembles", J. Math. Phys. 43 (2002)
  5830–5847 (the log gas of the semicircle case as a β-ensemble).
- J. A. Carrillo, R. J. McCann, C. Villani, "Kinetic equilibration rates for granular media
  and related equations", Rev. Mat. Iberoamericana 19 (2003) 971–1018 (the t → ∞ decay).
- N. Fournier, A. Guillin, "On the rate of convergence in Wasserstein distance of the
  empirical measure", Probab. Theory Relat. Fields 162 (2015) 707–738 (the N^(−1/2) rate).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from .._validation import check_choice, check_fit_sizes, check_int, check_positive
from ..closed_forms import equilibrium_case, wasserstein_to_law_1d
from ..domains import Ball, Box
from ..dynamics.langevin import simulate
from ..dynamics.spec import RunSpec, as_spec
from ..energy import Energy, PairInteraction, QuadraticPotential
from ..errors import ConvergenceError
from ..kernels import Riesz
from ..ot.distance import w2 as _w2
from ..ot.measure import Measure
from ..pde import Density, FreeEnergyTracker, Grid, McKeanVlasov, gibbs_state, solve
from ..results import provenance, save_dataset
from ..stats import fit_power_law, fit_power_law_or_undetermined
from ..workbench.compare import compare
from ..workbench.problems import ComparisonConfig
from ..workbench.sweeps import run_sweep

#: ``"full"``: the committed figures; ``"small"``: a quick run of the same computation (tests,
#: CI, notebooks: seconds each on two cores).
SIZES = ("small", "full")


def check_size(size: str) -> str:
    """``size`` checked against :data:`SIZES` (ValueError naming the allowed values).

    Examples
    --------
    >>> from meanfield.studies.limits import check_size
    >>> check_size("tiny")
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown size 'tiny'; choose one of 'small', 'full'
    """
    return check_choice("size", size, SIZES)


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

    See Also
    --------
    equilibrium_in_n : this run swept over (N, seed), with the rate in N.
    beta_limit_particles : this run swept over (β, seed), with the rate in β.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* as N → ∞).
    - I. Dumitriu, A. Edelman, J. Math. Phys. 43 (2002) 5830–5847 (the log gas as β-ensemble).

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
    final positions (replica, particle, dim) and the final energies (replica,)."""
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

    See Also
    --------
    beta_limit_particles : the same limit for particles.
    beta_limit_on_grid : this computation saved, with its power law in β.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* as N → ∞).

    Examples
    --------
    >>> from meanfield.studies.limits import beta_limit_grid
    >>> ds = beta_limit_grid("uniform", [8.0, 2.0], cells=16)
    >>> ds["beta"].values.tolist(), bool(ds["w2_grid"][1] < ds["w2_grid"][0])
    ([2.0, 8.0], True)
    """
    betas = np.sort(np.asarray(betas, dtype=float))
    energy = closed_form_energy(case)
    grid = Grid(energy.domain, cells)
    mstar = exact_cell_density(case, grid)
    dist, rho = [], None
    for beta in tqdm(betas, desc="grid Gibbs states", unit="beta", disable=not progress):
        rho, report = gibbs_state(energy, grid, float(beta), method="newton", rho0=rho)
        if not report.converged:
            raise ConvergenceError(f"Gibbs state at beta={beta} did not converge: {report}")
        dist.append(_w2(Measure.from_density(rho), Measure.from_density(mstar)).distance)
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

    See Also
    --------
    t_decay : this computation on a closed-form case, saved.
    t_limit_data : the ``t_limit`` figure's experiment.

    References
    ----------
    - J. A. Carrillo, R. J. McCann, C. Villani, Rev. Mat. Iberoamericana 19 (2003) 971–1018.

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
    attrs = {"beta": beta, "cells": cells, "t_end": t_end, "mean0": mean0, "std0": std0}
    attrs |= {"rate": -slope, "rate_ci_low": -hi, "rate_ci_high": -lo, "rate_status": status}
    attrs = provenance({**attrs, "F_beta_min": F_min, **energy.describe()}, seed=seed)
    data = {"free_energy": ("time", F), "gap": ("time", gap)}
    return xr.Dataset(data, coords={"time": t}, attrs=attrs)


def _free_energy_trace(energy, beta, cells, t_end, mean0, std0, n_records, progress):
    """F_β(ρ_t) along the McKean–Vlasov flow (SG-implicit) from N(mean0, std0²) on the grid,
    recorded ``n_records`` times up to ``t_end``: (times, free energies, min F_β), where
    min F_β is that of the grid Gibbs state ρ_β (Newton)."""
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


def convergence_in_n(
    energy: Energy,
    initial: Density,
    *,
    n_values,
    seeds,
    beta: float,
    t_final: float,
    eta: float,
    scheme: str = "upwind",
    safety: float = 0.5,
    confidence: float = 0.95,
) -> xr.Dataset:
    r"""W2(μ_N(t), ρ_t) at t = t_final for several N and seeds, and the fitted rate.

    The grid solution is computed once; each (N, seed) runs the particles from an iid sample
    of ``initial``.  Expected rate about N^(−1/2) in p = 1 (THEORY §6) until the Langevin bias
    O(η) and the grid error take over:

    .. math::

        W_2(\mu_N(t), \rho_t) \approx C N^{\text{rate}}, \qquad \text{rate} \approx -\tfrac12.

    Returns
    -------
    xarray.Dataset
        ``w2`` (N, seed), ``w2_initial`` (N, seed) (the t = 0 sampling error); attributes
        ``rate``, ``rate_ci_low``, ``rate_ci_high``, ``rate_confidence``, ``rate_pooled`` and
        all parameters.

    See Also
    --------
    particles_vs_grid_in_n : the same distance at several times, as a resumable sweep.
    meanfield.workbench.compare.compare : one side-by-side run.

    References
    ----------
    - N. Fournier, A. Guillin, Probab. Theory Relat. Fields 162 (2015) 707–738 (iid rates).

    Examples
    --------
    Three small N, two seeds, five steps (far too few for a sharp rate: the interval is wide):

    >>> from meanfield.pde import Density, Grid
    >>> from meanfield.studies.limits import closed_form_energy, convergence_in_n
    >>> E = closed_form_energy("uniform")
    >>> initial = Density.gaussian(Grid(E.domain, 32), mean=0.0, std=0.5)
    >>> ds = convergence_in_n(
    ...     E, initial, n_values=[4, 8, 16], seeds=[0, 1], beta=1.0, t_final=0.05, eta=0.01
    ... )
    >>> low, rate, high = (float(ds.attrs[k]) for k in ("rate_ci_low", "rate", "rate_ci_high"))
    >>> dict(ds["w2"].sizes), low <= rate <= high
    ({'N': 3, 'seed': 2}, True)
    """
    n_values = [check_int("N", n) for n in n_values]
    check_fit_sizes("n_values (N)", n_values)
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2:
        raise ValueError(f"seeds: need at least 2 seeds to fit a rate with a CI, got {len(seeds)}")
    run = dict(beta=beta, t_final=t_final, eta=eta, scheme=scheme, safety=safety)
    spec = as_spec(energy, initial, n_particles=n_values[0], **run)
    eq = spec.equation()
    res = eq.solve(spec.law, spec.t_final, safety=spec.safety)
    w2, w2_0 = _particle_distances(spec, res.state, n_values, seeds)
    fit = fit_power_law(n_values, w2, level=confidence, interval="t")
    out = xr.Dataset(
        {"w2": (("N", "seed"), w2), "w2_initial": (("N", "seed"), w2_0)},
        coords={"N": n_values, "seed": seeds},
    )
    attrs = {"beta": spec.beta, "t_final": spec.t_final, "eta": spec.eta}
    attrs |= {"grid_scheme": eq.scheme.name, **_rate_attrs(fit)}
    attrs |= {"rate_confidence": confidence, "rate_pooled": fit["pooled_slope"]}
    out.attrs = provenance({**attrs, **spec.grid.describe(), **energy.describe()}, seed=None)
    return out


def _particle_distances(spec: RunSpec, rho_t, n_values, seeds):
    """W2(μ_N(t), ρ_t) and W2(μ_N(0), ρ_0) for each N and seed, each of shape
    (len(n_values), len(seeds)).

    Each (N, seed) runs ``spec`` with N particles and that seed (mean-field regime, an iid
    sample of the initial law seeded by the seed); the t = 0 distance is the sampling error
    alone.
    """
    w2 = np.empty((len(n_values), len(seeds)))
    w2_0 = np.empty_like(w2)
    for i, N in enumerate(n_values):
        for j, s in enumerate(seeds):
            run = spec.replace(n_particles=N, seed=s)
            omega0 = run.particles()
            ds = simulate(run.replace(initial=omega0), record_every=run.n_steps)
            final = Measure.from_particles(ds["omega"].values[-1])
            w2[i, j] = _w2(final, Measure.from_density(rho_t)).distance
            w2_0[i, j] = _w2(
                Measure.from_particles(omega0), Measure.from_density(spec.law)
            ).distance
    return w2, w2_0


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

    See Also
    --------
    particles_vs_grid_run : one run of the sweep.
    convergence_in_n : the rate at one time, from one grid solution.
    n_limit_data : the ``n_limit`` figure's experiment.

    References
    ----------
    - N. Fournier, A. Guillin, Probab. Theory Relat. Fields 162 (2015) 707–738 (iid rates).

    Examples
    --------
    Two sizes only (the rate is then undetermined), into ``sweep_n/`` in the current folder:

    >>> from meanfield.studies.limits import particles_vs_grid_in_n
    >>> ds = particles_vs_grid_in_n([4, 8], [0], "sweep_n", t_final=0.05, n_records=1, n_workers=1)
    >>> dict(ds["w2"].sizes), ds.attrs["rate_status"]
    ({'N': 2, 'seed': 1, 'time': 2}, 'undetermined: fewer than 3 distinct sizes')
    """
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

    See Also
    --------
    particle_equilibrium_run : one run of the sweep.
    beta_limit_grid : the same limit on the grid.

    Examples
    --------
    Four particles, two β, one seed, a short run, into ``sweep_beta/`` in the current folder:

    >>> from meanfield.studies.limits import beta_limit_particles
    >>> betas, N, seeds = [1.0, 2.0], 4, [0]
    >>> ds = beta_limit_particles("uniform", betas, N, seeds, "sweep_beta", t_end=0.1, n_workers=1)
    >>> ds["w2"].dims, ds.attrs["rate_status"]
    (('beta', 'seed', 'replica'), 'undetermined: fewer than 3 distinct sizes')
    """
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
    ds.attrs.update({**_rate_attrs(fit), "rate_status": fit["status"]})
    return ds


def _rate_attrs(fit: dict) -> dict:
    """The fitted power law ``fit`` (:func:`~meanfield.stats.fit_power_law`) as the
    attributes ``rate``, ``rate_ci_low``, ``rate_ci_high``."""
    return {"rate": fit["slope"], "rate_ci_low": fit["ci_low"], "rate_ci_high": fit["ci_high"]}


def equilibrium_in_n(
    case: str,
    n_particles,
    seeds,
    out_dir,
    *,
    beta: float,
    regime: str,
    t_final: float,
    scheduler: str = "threads",
    n_workers: int | None = None,
    progress: bool = False,
    log=None,
) -> tuple[xr.Dataset, dict]:
    """N → ∞ on a closed-form case: particles relaxed at each (N, seed), W1 and W2 to μ*.

    .. math::

        W_q(\\mu_N, \\mu^*) \\sim N^{\\text{rate}}, \\quad q = 1, 2.

    Parameters
    ----------
    case, n_particles, seeds : {"semicircle", "uniform", "disk"}, list of int, list of int
        Closed-form case of THEORY §5, particle numbers N and seeds of the sweep.
    out_dir : path
        Sweep folder (``sweep.nc`` and one file per run).
    beta, regime, t_final :
        Inverse temperature, temperature regime and Langevin time of each run
        (:func:`~meanfield.studies.limits.particle_equilibrium_run`).
    scheduler, n_workers, progress, log :
        As :func:`meanfield.workbench.sweeps.run_sweep`.

    Returns
    -------
    (xarray.Dataset, dict)
        The sweep (``w1``, ``w2`` over N, seed, replica) and the power-law fits in N of
        ``w1`` and ``w2`` (:func:`~meanfield.stats.fit_power_law_or_undetermined`).

    See Also
    --------
    particle_equilibrium_run : one run of the sweep.
    particles_vs_grid_in_n : N → ∞ at finite times, against the grid.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* as N → ∞).

    Examples
    --------
    Two N (too few for a rate), one seed, a short run, into ``eq/`` in the current folder:

    >>> from meanfield.studies.limits import equilibrium_in_n
    >>> ds, fits = equilibrium_in_n(
    ...     "uniform", [4, 8], [0], "eq", beta=1.0, regime="coulomb-gas", t_final=0.1, n_workers=1
    ... )
    >>> ds["w2"].dims, fits["w2"]["status"]
    (('N', 'seed', 'replica'), 'undetermined: fewer than 3 distinct sizes')
    """
    grid = {"N": list(n_particles), "seed": list(seeds)}
    fixed = {"beta": beta, "case": case, "regime": regime, "t_end": t_final}
    # a 1e-3 time run of N = 2 validates every parameter before the sweep starts
    particle_equilibrium_run(2, **{**fixed, "t_end": 1e-3}, seed=0)
    ds = run_sweep(
        particle_equilibrium_run,
        grid,
        out_dir,
        fixed=fixed,
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
        log=log,
    )
    fits = {
        k: fit_power_law_or_undetermined(ds["N"].values, ds[k].isel(replica=0).values)
        for k in ("w1", "w2")
    }
    return ds, fits


def beta_limit_on_grid(case: str, betas, out_dir, *, progress: bool = False):
    """β → ∞ on the grid: W2(ρ_β, μ*) for each β, saved as ``out_dir/grid.nc``, and its
    power-law fit in β (10 bootstrap draws: the grid values carry no seed noise).

    .. math::

        W_2(\\rho_\\beta, \\mu^*) \\approx C \\beta^{\\text{rate}}

    Returns
    -------
    (xarray.Dataset, dict)
        The dataset of :func:`beta_limit_grid` (which computes it) and the fit.

    Examples
    --------
    >>> from pathlib import Path
    >>> from meanfield.studies.limits import beta_limit_on_grid
    >>> g, fit = beta_limit_on_grid("uniform", [2.0, 4.0, 8.0], "grid_sweep")
    >>> fit["status"], bool(fit["slope"] < 0), Path("grid_sweep/grid.nc").exists()
    ('fitted', True, True)
    """
    g = beta_limit_grid(case, betas, progress=progress)
    save_dataset(g, Path(out_dir) / "grid.nc")
    fit = fit_power_law_or_undetermined(g["beta"].values, g["w2_grid"].values, n_boot=10)
    return g, fit


def t_decay(case: str, beta: float, t_final: float, out_dir, *, progress: bool = False):
    """t → ∞: the free-energy gap along the McKean–Vlasov flow of a closed-form case from a
    Gaussian, with its exponential rate; saved as ``out_dir/t_decay.nc``.

    .. math::

        F_\\beta(\\rho_t) - F_\\beta(\\rho_\\beta) \\sim C e^{-\\text{rate}\\, t}.

    Returns
    -------
    xarray.Dataset
        The dataset of :func:`free_energy_decay` (which computes it).

    Examples
    --------
    V = ω²/2, k = −|z| at β = 1: the gap decays at rate 2 (the mean relaxes at rate 1).

    >>> from pathlib import Path
    >>> from meanfield.studies.limits import t_decay
    >>> ds = t_decay("uniform", 1.0, 6.0, "decay")
    >>> ds.attrs["rate_status"], round(float(ds.attrs["rate"]), 1)
    ('fitted', 2.0)
    >>> Path("decay/t_decay.nc").exists()
    True
    """
    energy = closed_form_energy(case)
    ds = free_energy_decay(energy, beta, t_end=t_final, progress=progress)
    save_dataset(ds, Path(out_dir) / "t_decay.nc")
    return ds


# ---- the experiments of ``meanfield figures`` at a named size ----------------------------
#: Configuration of each size: particle numbers, seeds, grid cells, inverse temperatures.
N_LIMIT = {
    "small": {"Ns": [64, 256], "n_seeds": 3, "t_final": 0.5},
    "full": {"Ns": [100, 200, 400, 800, 1600, 3200], "n_seeds": 8, "t_final": 1.0},
}

BETA_LIMIT = {
    "small": {"n_doublings": 5, "cells": 256, "N": 16, "betas": [1.0, 8.0], "n_seeds": 2},
    "full": {
        "n_doublings": 9,
        "cells": 512,
        "N": 64,
        "betas": [1.0, 4.0, 16.0, 64.0],
        "n_seeds": 4,
    },
}

T_LIMIT_CELLS = {"small": 128, "full": 512}

REGIMES = ("mean-field", "coulomb-gas")

CASES = ("semicircle", "uniform")


def n_limit_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """N → ∞: W2(μ_N(t), ρ_t) and the kernel gap against N at several times.

    On the default side-by-side problem (p = 1, mean-field regime,
    :func:`meanfield.workbench.problems.default_problem`), with bootstrap intervals over seeds of
    the fitted rates (expected :math:`W_2(\\mu_N(t), \\rho_t) \\sim N^{-1/2}`).

    Parameters
    ----------
    size : {"small", "full"}
        Particle numbers, seeds and final time of :data:`N_LIMIT`.
    seed : int
        First seed; the runs use ``seed``, ``seed + 1``, ...

    Returns
    -------
    xarray.Dataset
        ``w2``, ``kernel_gap`` (N, seed, time), ``rate_*`` (time).

    See Also
    --------
    particles_vs_grid_in_n : the sweep it runs.
    meanfield.cli.figures.make_figures : computes and draws every figure.

    Examples
    --------
    The small size takes seconds:

    >>> from meanfield.studies.limits import n_limit_data
    >>> ds = n_limit_data(size="small")
    >>> sorted(k for k in ds.data_vars if not k.startswith('rate'))
    ['kernel_gap', 'w1', 'w2']
    """
    check_size(size)
    torch.set_num_threads(1)
    cfg = N_LIMIT[size]
    seeds = [seed + s for s in range(cfg["n_seeds"])]
    with tempfile.TemporaryDirectory() as d:
        ds = particles_vs_grid_in_n(
            cfg["Ns"], seeds, d, t_final=cfg["t_final"], n_records=4, progress=True
        )
        ds = ds.load()
    attrs = {"figure": "n_limit", "size": size, "t_final": cfg["t_final"]}
    attrs["problem"] = "meanfield.workbench.problems.default_problem(1)"
    ds.attrs = provenance(attrs, seed=seed)
    return ds


def _w2_particles_in_beta(N: int, betas, seeds, t_final: float) -> np.ndarray:
    """W2(μ_N, μ*) of relaxed particles (uniform case), shape (regime, beta, seed)."""
    w2 = np.zeros((len(REGIMES), len(betas), len(seeds)))
    bar = tqdm(total=w2.size, desc="beta_limit, particles", unit="run", leave=False)
    for i, regime in enumerate(REGIMES):
        for j, beta in enumerate(betas):
            for k, s in enumerate(seeds):
                r = particle_equilibrium_run(
                    N, beta, s, case="uniform", regime=regime, t_end=t_final
                )
                w2[i, j, k] = float(r["w2"].values[0])
                bar.update(1)
    bar.close()
    return w2


def beta_limit_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """β → ∞: W2(ρ_β, μ*) on the grid and W2(μ_N, μ*) for particles.

    Grid: the semicircle and uniform cases of THEORY §5 at β = 1, 2, 4, ...  Particles: the
    uniform case (whose force has no singularity) in both temperature regimes, relaxed by
    Langevin to t = 6.  Both distances vanish as β → ∞, the grid one like β⁻¹:

    .. math::

        W_2(\\rho_\\beta, \\mu^*) = O(\\beta^{-1}), \\qquad
        W_2(\\mu_N, \\mu^*) \\to 0 \\quad (\\beta \\to \\infty).

    Parameters
    ----------
    size : {"small", "full"}
        Grid and particle configuration of :data:`BETA_LIMIT`.
    seed : int
        First seed of the particle runs.

    Returns
    -------
    xarray.Dataset
        ``w2_grid`` (case, beta_grid) and ``w2_particles`` (regime, beta_particles, seed).

    See Also
    --------
    beta_limit_grid, particle_equilibrium_run : what it runs.
    meanfield.cli.figures.make_figures : computes and draws every figure.

    Examples
    --------
    The small size takes seconds:

    >>> from meanfield.studies.limits import beta_limit_data
    >>> ds = beta_limit_data(size="small")
    >>> ds['w2_grid'].dims, ds['w2_particles'].dims
    (('case', 'beta_grid'), ('regime', 'beta_particles', 'seed'))
    """
    check_size(size)
    torch.set_num_threads(1)
    cfg = BETA_LIMIT[size]
    betas_grid = 2.0 ** np.arange(0, cfg["n_doublings"])
    grids = [beta_limit_grid(c, betas_grid, cells=cfg["cells"])["w2_grid"].values for c in CASES]
    seeds = range(cfg["n_seeds"])
    w2p = _w2_particles_in_beta(cfg["N"], cfg["betas"], [seed + s for s in seeds], 6.0)
    data = {"w2_grid": (("case", "beta_grid"), np.stack(grids))}
    data["w2_particles"] = (("regime", "beta_particles", "seed"), w2p)
    coords = {"case": list(CASES), "beta_grid": betas_grid, "regime": list(REGIMES)}
    coords |= {"beta_particles": cfg["betas"], "seed": list(seeds)}
    attrs = {"figure": "beta_limit", "size": size, "N_particles": cfg["N"]}
    attrs["model"] = "V=w^2/2, lambda=1/2, p=1 (THEORY 5)"
    return xr.Dataset(data, coords=coords, attrs=provenance(attrs, seed=seed))


def t_limit_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """t → ∞: the free-energy gap along the McKean–Vlasov flow and its exponential rate.

    For OU (no interaction) and the interacting uniform case (k = −|z|), from N(1, 0.3²) at
    β = 1, with fitted rates and bootstrap intervals.  In both models the mean obeys
    dm/dt = −m (the pair forces cancel), so the gap decays as

    .. math::

        F_\\beta(\\rho_t) - F_\\beta(\\rho_\\beta) \\sim C e^{-2t}.

    Parameters
    ----------
    size : {"small", "full"}
        Grid cells of :data:`T_LIMIT_CELLS`.
    seed : int

    Returns
    -------
    xarray.Dataset
        ``gap`` (model, time), ``rate``, ``rate_ci_low``, ``rate_ci_high`` (model).

    See Also
    --------
    free_energy_decay : what it runs.
    meanfield.cli.figures.make_figures : computes and draws every figure.

    References
    ----------
    - J. A. Carrillo, R. J. McCann, C. Villani, Rev. Mat. Iberoamericana 19 (2003) 971–1018.

    Examples
    --------
    The small size takes seconds:

    >>> from meanfield.studies.limits import t_limit_data
    >>> ds = t_limit_data(size="small")
    >>> ds['rate'].values.round(1).tolist()
    [2.0, 2.0]
    """
    check_size(size)
    cells = T_LIMIT_CELLS[size]
    models = {
        "OU (no interaction)": Energy([QuadraticPotential()], Box(1, 4.0)),
        "V = w^2/2, k = -|z|, lambda = 1/2": closed_form_energy("uniform"),
    }
    runs = [free_energy_decay(E, 1.0, cells=cells, seed=seed) for E in models.values()]
    t = runs[0]["time"].values
    gap = np.stack([np.interp(t, r["time"].values, r["gap"].values) for r in runs])
    attrs = {"figure": "t_limit", "size": size, "beta": 1.0, "cells": cells}
    data = {"gap": (("model", "time"), gap)}
    data |= {
        k: ("model", [r.attrs[k] for r in runs]) for k in ("rate", "rate_ci_low", "rate_ci_high")
    }
    attrs = provenance({**attrs, "initial": "N(1, 0.3^2)"}, seed=seed)
    return xr.Dataset(data, coords={"model": list(models), "time": t}, attrs=attrs)
