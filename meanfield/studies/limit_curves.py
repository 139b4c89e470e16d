"""The three limits of THEORY §5 as figure experiments: N → ∞, β → ∞ and t → ∞.

* :func:`n_limit_data`: W2(μ_N(t), ρ_t) and the kernel gap against N at several times
  (particles against the McKean–Vlasov grid on the default problem);
* :func:`beta_limit_data`: W2(ρ_β, μ*) on the grid and W2(μ_N, μ*) for particles against β;
* :func:`t_limit_data`: the free-energy gap F_β(ρ_t) − F_β(ρ_β) along the flow and its
  exponential rate.

Each takes ``size`` ("small" or "full") and ``seed`` and returns an ``xarray.Dataset`` with
the parameters, the seed and the package version in its attributes.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from ..results import provenance
from ._sizes import check_size

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
    :func:`meanfield.workbench.compare.default_problem`), with bootstrap intervals over seeds of the
    fitted rates (expected :math:`W_2(\\mu_N(t), \\rho_t) \\sim N^{-1/2}`).

    Parameters
    ----------
    size : {"small", "full"}
        Particle numbers, seeds and final time of :data:`N_LIMIT`.
    seed : int
        First seed; the runs use ``seed``, ``seed + 1``, ...

    Returns
    -------
    xarray.Dataset
        Output of :func:`meanfield.studies.limits.particles_vs_grid_in_n`: ``w2``,
        ``kernel_gap`` (N, seed, time), ``rate_*`` (time).

    Examples
    --------
    The size is checked before any work:

    >>> from meanfield.studies.limit_curves import n_limit_data
    >>> n_limit_data(size="tiny")
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown size 'tiny'; choose one of 'small', 'full'

    The small size takes seconds:

    >>> ds = n_limit_data(size="small")
    >>> sorted(k for k in ds.data_vars if not k.startswith('rate'))
    ['kernel_gap', 'w1', 'w2']
    """
    import tempfile

    import torch

    from .limits import particles_vs_grid_in_n

    check_size(size)
    torch.set_num_threads(1)
    cfg = N_LIMIT[size]
    seeds = [seed + s for s in range(cfg["n_seeds"])]
    with tempfile.TemporaryDirectory() as d:
        ds = particles_vs_grid_in_n(
            cfg["Ns"], seeds, d, t_final=cfg["t_final"], n_records=4, progress=True
        )
        ds = ds.load()
    ds.attrs = provenance(
        {
            "figure": "n_limit",
            "size": size,
            "t_final": cfg["t_final"],
            "problem": "meanfield.workbench.compare.default_problem(1)",
        },
        seed=seed,
    )
    return ds


def _w2_particles_in_beta(N: int, betas, seeds, t_final: float) -> np.ndarray:
    """W2(μ_N, μ*) of relaxed particles (uniform case), shape (regime, beta, seed)."""
    from .limits import particle_equilibrium_run

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

    Examples
    --------
    The size is checked before any work:

    >>> from meanfield.studies.limit_curves import beta_limit_data
    >>> beta_limit_data(size="tiny")
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown size 'tiny'; choose one of 'small', 'full'

    The small size takes seconds:

    >>> ds = beta_limit_data(size="small")
    >>> ds['w2_grid'].dims, ds['w2_particles'].dims
    (('case', 'beta_grid'), ('regime', 'beta_particles', 'seed'))
    """
    import torch

    from .limits import beta_limit_grid

    check_size(size)
    torch.set_num_threads(1)
    cfg = BETA_LIMIT[size]
    betas_grid = 2.0 ** np.arange(0, cfg["n_doublings"])
    grids = [beta_limit_grid(c, betas_grid, cells=cfg["cells"])["w2_grid"].values for c in CASES]
    seeds = range(cfg["n_seeds"])
    w2p = _w2_particles_in_beta(cfg["N"], cfg["betas"], [seed + s for s in seeds], 6.0)
    return xr.Dataset(
        {
            "w2_grid": (("case", "beta_grid"), np.stack(grids)),
            "w2_particles": (("regime", "beta_particles", "seed"), w2p),
        },
        coords={
            "case": list(CASES),
            "beta_grid": betas_grid,
            "regime": list(REGIMES),
            "beta_particles": cfg["betas"],
            "seed": list(seeds),
        },
        attrs=provenance(
            {
                "figure": "beta_limit",
                "size": size,
                "N_particles": cfg["N"],
                "model": "V=w^2/2, lambda=1/2, p=1 (THEORY 5)",
            },
            seed=seed,
        ),
    )


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

    Examples
    --------
    The size is checked before any work:

    >>> from meanfield.studies.limit_curves import t_limit_data
    >>> t_limit_data(size="tiny")
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown size 'tiny'; choose one of 'small', 'full'

    The small size takes seconds:

    >>> ds = t_limit_data(size="small")
    >>> ds['rate'].values.round(1).tolist()
    [2.0, 2.0]
    """
    from ..domains import Box
    from ..energy import Energy, QuadraticPotential
    from .limits import closed_form_energy, free_energy_decay

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
    return xr.Dataset(
        {
            "gap": (("model", "time"), gap),
            **{k: ("model", [r.attrs[k] for r in runs]) for k in _RATE_ATTRS},
        },
        coords={"model": list(models), "time": t},
        attrs=provenance({**attrs, "initial": "N(1, 0.3^2)"}, seed=seed),
    )


_RATE_ATTRS = ("rate", "rate_ci_low", "rate_ci_high")

__all__ = ["beta_limit_data", "n_limit_data", "t_limit_data"]
