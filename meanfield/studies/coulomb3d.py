"""The Coulomb gas of R³ in a quadratic confinement: particles, the grid and the uniform ball.

Model (THEORY §5): V = |ω|²/2, k(z) = 1/|z| (Riesz s = 1 = p − 2, the package's Coulomb kernel
of R³; the Newtonian kernel 1/(4π|z|) is the same up to the factor 4π, absorbed in λ),
λ = 1/2, on the box [−R, R]³ (R > 1, so the box never touches the support).  Its β = ∞
equilibrium μ* = argmin E is uniform on the unit ball, density 3/(4π), with

    E(μ*) = ∫|ω|²/2 dμ* + ½ ∬ dμ* dμ* / |ω − ω'| = 3/10 + 3/5 = 9/10.

Three views of μ* are compared:

* the grid equilibrium μ*_h (:func:`meanfield.pde.stationary.equilibrium_measure` on an n³
  grid), read through :func:`ball_diagnostics` (second-moment radius, flatness inside the
  ball, mass outside it);
* N particles sampled by HMC (:func:`meanfield.dynamics.hmc.sample_hmc`) in the Coulomb-gas
  regime β_N = βN, whose empirical measure tends to μ* as N → ∞ (:func:`particle_run`);
* N iid uniform points in the unit ball, the Monte Carlo reference at equal N.

Distances: W2(μ_N, μ*_h) exact (``ot.emd2`` between the particles and the cell-centre atoms
of μ*_h, :func:`meanfield.ot.distance.w2` with ``method="exact"``),
and the exact 1D W2 between the law of |ω| under μ_N and under the unit ball (CDF r³,
:class:`~meanfield.closed_forms.BallRadius`).

References
----------
- S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
  Mathematics, EMS, 2015 (the equilibrium measure of a Coulomb gas, its N → ∞ limit).
- D. Chafaï, N. Gozlan, P.-A. Zitt, "First-order global asymptotics for confined particles
  with singular pair repulsion", Ann. Appl. Probab. 24 (2014) 2371–2413 (the quadratic
  confinement's equilibrium is the uniform ball).
- M. D. Hoffman, A. Gelman, "The No-U-Turn sampler", JMLR 15 (2014) 1593–1623 (the step-size
  adaptation of the HMC warm-up).
"""

from __future__ import annotations

import math
import os
import platform
import time
from pathlib import Path

import numpy as np
import xarray as xr

from .._validation import check_int, check_positive
from ..closed_forms import BallRadius, wasserstein_to_law_1d
from ..domains import Box
from ..energy import Energy, PairInteraction, QuadraticPotential
from ..kernels import Coulomb
from ..pde import Density, Grid, equilibrium_measure
from ..results import provenance
from .limits import check_size

#: E(μ*) of the uniform unit ball: 3/10 (confinement) + 3/5 (half the Coulomb self-energy 6/5).
BALL_ENERGY = 0.9
#: Density of the uniform unit ball, 3/(4π).
BALL_DENSITY = 3.0 / (4.0 * math.pi)
#: Box half-width R of the study, box [−R, R]³ (the unit ball fits with a margin of 0.25).
BOX_HALF_WIDTH = 1.25


def ball_energy(half_width: float = BOX_HALF_WIDTH, softening: float = 0.0) -> Energy:
    """E = ∫|ω|²/2 dμ + ½ ∬ k dμ dμ with k = 1/|z| (Coulomb in R³), on [−R, R]³.

    .. math::

        E(\\mu) = \\int \\frac{|\\omega|^2}{2} d\\mu
        + \\frac{1}{2}\\iint \\frac{d\\mu(\\omega)\\, d\\mu(\\omega')}
        {\\sqrt{|\\omega - \\omega'|^2 + \\varepsilon^2}}.

    Parameters
    ----------
    half_width : float
        R > 1 (the support, the unit ball, must fit inside the box).
    softening : float
        ε ≥ 0 of the kernel (|z|² + ε²)^(−1/2); 0 for the exact Coulomb kernel.

    See Also
    --------
    grid_equilibrium : its β = ∞ equilibrium on a grid.
    meanfield.closed_forms.closed_form_energy : the p = 1, 2 cases of THEORY §5.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* of a Coulomb gas).

    Examples
    --------
    >>> from meanfield.studies.coulomb3d import BALL_ENERGY, ball_energy
    >>> E = ball_energy()
    >>> E.domain, E.term_names
    (Box(dim=3, half_width=1.25), ['confinement', 'interaction'])
    >>> BALL_ENERGY  # E(μ*) of the uniform unit ball: 3/10 + 3/5
    0.9
    """
    half_width = check_positive("half_width", half_width)
    if half_width <= 1.0:
        raise ValueError(
            f"half_width must be > 1 (the equilibrium is the unit ball), got {half_width}"
        )
    return Energy(
        [QuadraticPotential(), PairInteraction(Coulomb(3, softening=softening), 0.5)],
        Box(3, half_width),
    )


def ball_diagnostics(rho: Density, inner: float = 0.6) -> dict:
    """How far a 3D grid density is from the uniform unit ball.

    The uniform ball of radius r has ∫|ω|² dμ = 3r²/5, hence the radius estimate

    .. math::

        r(\\rho) = \\sqrt{\\tfrac{5}{3} \\int |\\omega|^2\\, d\\rho}, \\qquad
        \\text{flatness} = \\max_{|\\omega_i| < r_{\\mathrm{inner}}}
        \\Big|\\frac{\\rho_i}{3/(4\\pi)} - 1\\Big|.

    Parameters
    ----------
    rho : Density
        On a p = 3 grid centred at 0.
    inner : float
        Radius (< 1) of the region where flatness is measured.

    Returns
    -------
    dict
        ``mass``; ``radius`` = √(5/3 · ∫|ω|² dρ) (exact for a uniform ball, from the exact
        second moment of the piecewise-constant density); ``radius_error`` = |radius − 1|;
        ``flatness`` = max |ρ_i / (3/(4π)) − 1| over cells lying inside the ball of radius
        ``inner``; ``mass_outside``: the mass of cells whose centre lies farther than
        1 + h√3/2 from 0 (cells the unit ball does not reach).

    See Also
    --------
    grid_equilibrium : returns these diagnostics of μ*_h.
    ball_energy : the energy whose minimiser is the unit ball.
    coulomb3d_study : the diagnostics against h.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* of a Coulomb gas).

    Examples
    --------
    The grid equilibrium on 6³ cells is already close to the unit ball:

    >>> from meanfield.studies.coulomb3d import ball_diagnostics, grid_equilibrium
    >>> rho = grid_equilibrium(6)[0]
    >>> d = ball_diagnostics(rho)
    >>> round(d["mass"], 9), d["radius_error"] < 0.05, d["mass_outside"]
    (1.0, True, 0.0)
    """
    g = rho.grid
    if g.dim != 3:
        raise ValueError(f"ball_diagnostics needs a p = 3 grid, got p={g.dim}")
    if not 0 < inner < 1:
        raise ValueError(f"inner must be in (0, 1), got {inner}")
    r = np.linalg.norm(g.centers, axis=1)
    half_diag = 0.5 * math.sqrt(sum(h * h for h in g.h))
    mass = rho.mass
    second = float(np.trace(rho.covariance) + rho.mean @ rho.mean)
    radius = math.sqrt(5.0 / 3.0 * second)
    core = r + half_diag <= inner
    dev = np.abs(rho.data.ravel()[core] / (mass * BALL_DENSITY) - 1.0)
    return {
        "mass": mass,
        "radius": radius,
        "radius_error": abs(radius - 1.0),
        "flatness": float(dev.max()) if dev.size else math.nan,
        "mass_outside": float(rho.masses.ravel()[r > 1.0 + half_diag].sum()),
    }


def grid_equilibrium(cells: int, half_width: float = BOX_HALF_WIDTH, tol: float = 1e-8) -> tuple:
    """μ*_h on a grid of ``cells``³ cells, its report, diagnostics and wall time.

    Parameters
    ----------
    cells : int
        Cells per axis (≥ 4).
    half_width : float
        R of the box [−R, R]³ (> 1).
    tol : float
        Tolerance of :func:`meanfield.pde.stationary.equilibrium_measure`.

    Returns
    -------
    (Density, StationaryReport, dict)
        The dict holds :func:`ball_diagnostics`, ``energy`` E_h(μ*_h), ``h`` and ``wall_s``.

    See Also
    --------
    meanfield.pde.stationary.equilibrium_measure : the solver.
    coulomb3d_study : this equilibrium against h and against particles.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* of a Coulomb gas).

    Examples
    --------
    On 6³ cells, E_h(μ*_h) is within 0.01 of E(μ*) = 9/10:

    >>> from meanfield.studies.coulomb3d import BALL_ENERGY, grid_equilibrium
    >>> rho, report, info = grid_equilibrium(6)
    >>> report.converged, abs(info["energy"] - BALL_ENERGY) < 0.01, round(info["h"], 4)
    (True, True, 0.4167)
    """
    cells = check_int("cells (per axis)", cells, minimum=4)
    grid = Grid(Box(3, half_width), cells)
    t0 = time.perf_counter()
    rho, report = equilibrium_measure(ball_energy(half_width), grid, tol=tol, warm_tol=1e-2)
    wall = time.perf_counter() - t0
    info = {
        **ball_diagnostics(rho),
        "energy": report.free_energy,
        "h": grid.h[0],
        "wall_s": wall,
        "converged": report.converged,
    }
    return rho, report, info


def machine() -> dict:
    """The machine a timing was taken on (for dataset attributes).

    Returns
    -------
    dict
        ``machine`` (host name), ``processor``, ``cpu_count``, ``torch_threads``.

    See Also
    --------
    particle_run : the timings it labels.
    coulomb3d_study : records it in the dataset's attributes.
    meanfield.results.provenance : the software versions of a dataset.

    Examples
    --------
    >>> from meanfield.studies.coulomb3d import machine
    >>> sorted(machine())
    ['cpu_count', 'machine', 'processor', 'torch_threads']
    """
    import torch

    return {
        "machine": platform.node(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }


def particle_run(
    n_particles: int,
    grid_rho: Density,
    *,
    beta: float = 2.0,
    seed: int = 0,
    n_warmup: int = 200,
    n_samples: int = 60,
    n_keep: int = 3,
    trajectory_length: float = 1.0,
) -> dict:
    """N particles by HMC in the Coulomb-gas regime, measured against μ*_h and the ball.

    Parameters
    ----------
    n_particles : int
        Number of particles N (≥ 2).
    grid_rho : Density
        The grid equilibrium μ*_h (p = 3); its box is the particles' domain.
    beta : float
        β > 0; the chain samples ∝ exp(−β N² H_N) (β_N = βN).
    seed : int
        Seeds the initial particles (iid N(0, 0.4² I), clipped to the box), the chain and the
        iid reference sample.
    n_warmup, n_samples : int
        HMC warm-up (step size adapted to acceptance 0.65) and recorded trajectories.
    n_keep : int
        Distances are averaged over the last ``n_keep`` recorded states (spaced
        n_samples / n_keep trajectories apart).
    trajectory_length : float
        HMC time T per trajectory (local vibrations of this gas have frequency O(1)).

    Returns
    -------
    dict
        ``w2_grid`` W2(μ_N, μ*_h) (exact, ``ot.emd2``), ``w2_radial`` W2 of |ω| against the
        ball's radial law (exact 1D), ``radius`` √(5/3 · mean |ω|²), ``energy`` H_N (mean
        over the kept states), the same two distances for N iid uniform points in the ball
        (``w2_grid_iid``, ``w2_radial_iid``), the HMC ``step_size``, ``n_leapfrog``,
        ``acceptance``, the positions of the last state (``omega``, (N, 3)) and ``wall_s``.

    See Also
    --------
    meanfield.dynamics.hmc.sample_hmc : the sampler.
    coulomb3d_study : this run over several N.

    References
    ----------
    - S. Duane, A. D. Kennedy, B. J. Pendleton, D. Roweth, Phys. Lett. B 195 (1987) 216–222
      (hybrid Monte Carlo).
    - M. D. Hoffman, A. Gelman, JMLR 15 (2014) 1593–1623 (the step-size adaptation).

    Examples
    --------
    Four particles, a few HMC trajectories, against the 6³ grid equilibrium:

    >>> from meanfield.studies.coulomb3d import grid_equilibrium, particle_run
    >>> rho = grid_equilibrium(6)[0]
    >>> out = particle_run(4, rho, n_warmup=3, n_samples=3, n_keep=1)
    >>> out["omega"].shape, 0 <= out["acceptance"] <= 1, out["w2_grid"] > 0
    ((4, 3), True, True)
    """
    from ..dynamics.langevin import sample_hmc

    N = check_int("n_particles (N)", n_particles, minimum=2)
    n_keep = check_int("n_keep", n_keep)
    n_samples = check_int("n_samples", n_samples, minimum=n_keep)
    if grid_rho.grid.dim != 3:
        raise ValueError(f"grid_rho must live on a p = 3 grid, got p={grid_rho.grid.dim}")
    R = grid_rho.grid.half_width
    rng = np.random.default_rng(seed)
    omega0 = np.clip(0.4 * rng.standard_normal((N, 3)), -R, R)
    t0 = time.perf_counter()
    chain = dict(n_warmup=n_warmup, n_samples=n_samples, trajectory_length=trajectory_length)
    chain |= dict(target_accept=0.65, record_every=max(1, n_samples // n_keep), seed=seed)
    ds = sample_hmc(ball_energy(R), omega0, beta=beta, regime="coulomb-gas", **chain)
    t_hmc = time.perf_counter() - t0
    out = _chain_summary(ds, grid_rho, n_keep, _uniform_ball(N, rng))
    return {**out, "hmc_wall_s": t_hmc, "wall_s": time.perf_counter() - t0}


def _chain_summary(ds: xr.Dataset, grid_rho: Density, n_keep: int, iid: np.ndarray) -> dict:
    """:func:`particle_run`'s measurements of an HMC run ``ds``: distances, radius and energy
    averaged over the last ``n_keep`` recorded states, the same distances for the iid points
    ``iid`` (N, 3), the chain's step size, leapfrog count and acceptance, the last state."""
    states = ds["omega"].values[-n_keep:]
    d = np.array([_ball_distances(x, grid_rho) for x in states])
    d_iid = _ball_distances(iid, grid_rho)
    r2 = (states**2).sum(-1).mean()
    return {
        "w2_grid": float(d[:, 0].mean()),
        "w2_radial": float(d[:, 1].mean()),
        "w2_grid_iid": float(d_iid[0]),
        "w2_radial_iid": float(d_iid[1]),
        "radius": math.sqrt(5.0 / 3.0 * float(r2)),
        "energy": float(ds["energy"].values[-n_keep:].mean()),
        "step_size": float(ds.attrs["step_size"]),
        "n_leapfrog": int(ds.attrs["n_leapfrog"]),
        "acceptance": float(ds["acceptance_rate"].values[-1]),
        "omega": states[-1],
    }


def _ball_distances(x: np.ndarray, grid_rho: Density) -> tuple[float, float]:
    """Exact W2 of the points x (N, 3) to μ*_h, and of their radii to the ball's radial law."""
    from ..ot.distance import w2
    from ..ot.measure import Measure

    return (
        w2(Measure.from_particles(x), Measure.from_density(grid_rho), method="exact").distance,
        wasserstein_to_law_1d(np.linalg.norm(x, axis=1), BallRadius(3), order=2, n_quad=16),
    )


def _uniform_ball(N: int, rng: np.random.Generator) -> np.ndarray:
    """N iid uniform points in the unit ball (N, 3): direction × radius U^(1/3)."""
    g = rng.standard_normal((N, 3))
    return g / np.linalg.norm(g, axis=1, keepdims=True) * rng.random((N, 1)) ** (1 / 3)


def _radial_profile(r, masses, edges):
    """Mass per shell / (shell volume × 3/(4π)): 1 inside a uniform unit ball."""
    m, _ = np.histogram(r, bins=edges, weights=masses)
    vol = 4.0 / 3.0 * math.pi * np.diff(edges**3)
    return m / (vol * BALL_DENSITY)


def coulomb3d_study(
    n_particles,
    *,
    cells: int = 32,
    cells_sweep=(8, 12, 16, 24, 32),
    beta: float = 2.0,
    seed: int = 0,
    n_warmup: int = 200,
    n_samples: int = 60,
    cache_dir=None,
    progress: bool = False,
) -> xr.Dataset:
    """Particles (HMC) vs μ*_h vs the uniform ball for several N, and μ*_h against h.

    Parameters
    ----------
    n_particles : sequence of int
        Particle numbers N.
    cells : int
        Cells per axis of the grid μ*_h the particles are compared with.
    cells_sweep : sequence of int
        Grids of the convergence-in-h record, ``cells`` added.
    beta, seed, n_warmup, n_samples :
        As :func:`particle_run` (seed + N seeds each N).
    cache_dir : path, optional
        Each N's result is written there as it finishes (``N<N>.nc``) and read back instead
        of recomputed when its parameters match: a long study survives interruption.
    progress : bool
        A tqdm bar over N.

    Returns
    -------
    xarray.Dataset
        Over ``N``: ``w2_grid``, ``w2_radial``, their iid references, ``radius``, ``energy``,
        ``step_size``, ``n_leapfrog``, ``acceptance``, ``wall_s``; over ``n`` (cells per
        axis): the grid diagnostics (``grid_radius_error``, ``grid_flatness``,
        ``grid_energy_error``, ``grid_wall_s``, ``grid_h``); over ``r``: radial profiles of
        μ*_h and of the largest N's last state.  Attributes: parameters (``cells``,
        ``box_half_width``, ...), machine, seed, version.

    See Also
    --------
    particle_run, grid_equilibrium : one N, one grid.
    coulomb3d_data : this study at a named size.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* of a Coulomb gas).

    Examples
    --------
    Two tiny N and two tiny grids:

    >>> from meanfield.studies.coulomb3d import coulomb3d_study
    >>> ds = coulomb3d_study([4, 6], cells=6, cells_sweep=(4, 6), n_warmup=3, n_samples=3)
    >>> ds["N"].values.tolist(), ds["n"].values.tolist(), ds.attrs["cells"]
    ([4, 6], [4, 6], 6)
    >>> bool(ds["grid_h"][1] < ds["grid_h"][0])
    True
    """
    Ns = [check_int("n_particles (N)", N, minimum=2) for N in n_particles]
    sweep = sorted({check_int("cells_sweep", n, minimum=4) for n in cells_sweep} | {int(cells)})
    grids = {n: grid_equilibrium(n)[::2] for n in sweep}  # (rho, info)
    rho = grids[cells][0]
    params = {"beta": beta, "n_warmup": n_warmup, "n_samples": n_samples, "cells": cells}
    rows = _particle_rows(Ns, rho, params, seed, cache_dir, progress)
    keys = [k for k in rows[Ns[0]].data_vars if k != "omega"]
    data = {k: ("N", np.array([float(rows[N][k]) for N in Ns])) for k in keys}
    edges = np.linspace(0, 1.2, 25)
    data |= _profiles(rho, rows[Ns[-1]]["omega"].values, edges)
    data |= _grid_records([grids[n][1] for n in sweep])
    ds = xr.Dataset(
        data,
        coords={"N": Ns, "n": sweep, "r": 0.5 * (edges[1:] + edges[:-1])},
        attrs=_study_attrs(params, rho.grid.half_width, Ns[-1], seed),
    )
    ds["w2_grid"].attrs["long_name"] = "W2(mu_N, mu*_h), exact"
    ds["w2_radial"].attrs["long_name"] = "W2(|w| under mu_N, |w| under the unit ball), exact 1D"
    return ds


def _study_attrs(params: dict, half_width: float, n_profile: int, seed: int) -> dict:
    """:func:`coulomb3d_study`'s attributes: the parameters, the model and the methods of its
    distances, the N of the particle profile, the machine and the provenance."""
    return provenance(
        {
            **params,
            "box_half_width": half_width,
            "regime": "coulomb-gas",
            "sampler": "hmc",
            "model": "V=|w|^2/2, k=1/|z| (Coulomb, p=3), lambda=1/2",
            "w2_grid_method": "exact (ot.emd2, particles vs cell-centre atoms of mu*_h)",
            "w2_radial_method": "exact 1D quantile W2 of |w| vs CDF r^3",
            "N_profile": n_profile,
            **machine(),
        },
        seed=seed,
    )


def _particle_rows(Ns, rho, params: dict, seed: int, cache_dir, progress: bool) -> dict:
    """:func:`particle_run` at each N (seed + N) as a one-row dataset, read from
    ``cache_dir/N<N>.nc`` when one with the same parameters is there, written there when not."""
    from tqdm.auto import tqdm

    rows = {}
    for N in tqdm(Ns, desc="coulomb3d, particles", unit="N", disable=not progress):
        path = Path(cache_dir) / f"N{N}.nc" if cache_dir is not None else None
        if path is not None and path.exists():
            old = xr.open_dataset(path).load()
            if all(old.attrs.get(k) == v for k, v in {**params, "seed": seed + N}.items()):
                rows[N] = old
                continue
        res = particle_run(
            N,
            rho,
            beta=params["beta"],
            seed=seed + N,
            n_warmup=params["n_warmup"],
            n_samples=params["n_samples"],
        )
        omega = res.pop("omega")
        row = xr.Dataset(dict(res), attrs={**params, "seed": seed + N, **machine()})
        row["omega"] = (("particle", "dim"), omega)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            row.to_netcdf(path)
        rows[N] = row
    return rows


def _profiles(rho: Density, last: np.ndarray, edges: np.ndarray) -> dict:
    """Radial profiles (over ``r``) of μ*_h and of the particles ``last`` (N, 3)."""
    centres_r = np.linalg.norm(rho.grid.centers, axis=1)
    weights = np.full(len(last), 1 / len(last))
    return {
        "profile_grid": ("r", _radial_profile(centres_r, rho.masses.ravel(), edges)),
        "profile_particles": (
            "r",
            _radial_profile(np.linalg.norm(last, axis=1), weights, edges),
        ),
    }


def _grid_records(info: list) -> dict:
    """The convergence-in-h record (over ``n``) from :func:`grid_equilibrium`'s diagnostics."""
    return {
        "grid_h": ("n", np.array([i["h"] for i in info])),
        "grid_radius_error": ("n", np.array([i["radius_error"] for i in info])),
        "grid_flatness": ("n", np.array([i["flatness"] for i in info])),
        "grid_energy_error": ("n", np.array([abs(i["energy"] - BALL_ENERGY) for i in info])),
        "grid_wall_s": ("n", np.array([i["wall_s"] for i in info])),
    }


#: Configuration of the figure at each size (keyword arguments of :func:`coulomb3d_study`).
FIGURE_CONFIG = {
    "small": dict(n_particles=[40, 80], cells=10, cells_sweep=(8, 10), n_warmup=25, n_samples=3),
    "full": dict(
        n_particles=[100, 300, 1000, 3000],
        cells=32,
        cells_sweep=(8, 12, 16, 24, 32),
        n_warmup=200,
        n_samples=60,
    ),
}


def coulomb3d_data(size: str = "full", seed: int = 0, cache_dir=None) -> xr.Dataset:
    """The ``coulomb3d`` figure's experiment: :func:`coulomb3d_study` at a named size.

    The Coulomb gas of R³ (V = |ω|²/2, k = 1/|z|, λ = 1/2): HMC particles in the Coulomb-gas
    regime (β = 2) against the β = ∞ grid equilibrium μ*_h and the uniform unit ball, for
    N = 100 … 3000 on a 32³ grid (small: N = 40, 80 on a 10³ grid).

    Parameters
    ----------
    size : {"small", "full"}
        Configuration of :data:`FIGURE_CONFIG`.
    seed : int
    cache_dir : path, optional
        As :func:`coulomb3d_study`.

    Returns
    -------
    xarray.Dataset
        That of :func:`coulomb3d_study`, with ``figure`` and ``size`` attributes.

    See Also
    --------
    coulomb3d_study : the study.
    meanfield.cli.figures.make_figures : computes and draws every figure.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* of a Coulomb gas).

    Examples
    --------
    The small size takes seconds (N = 40, 80 on a 10³ grid):

    >>> from meanfield.studies.coulomb3d import coulomb3d_data
    >>> ds = coulomb3d_data(size="small")
    >>> ds["N"].values.tolist(), ds.attrs["size"]
    ([40, 80], 'small')
    """
    import torch

    check_size(size)
    torch.set_num_threads(1)
    ds = coulomb3d_study(seed=seed, cache_dir=cache_dir, progress=True, **FIGURE_CONFIG[size])
    ds.attrs.update({"figure": "coulomb3d", "size": size})
    return ds
