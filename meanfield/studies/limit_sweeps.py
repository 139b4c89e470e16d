"""The ``meanfield study`` computations: limit studies as resumable sweeps, with their fits.

The command line (:mod:`meanfield.cli`) only parses, calls these and prints.  Each sweep is
written as its runs finish, keyed by the whole configuration
(:func:`meanfield.workbench.sweeps.run_sweep`), so rerunning the same call resumes.

Names: ``n_particles`` is a number of particles N (a list of them for a sweep), ``t_final``
the final time of each run; datasets keep the mathematical names (coordinates ``N``,
``beta``, ``seed``).
"""

from __future__ import annotations

from pathlib import Path

import xarray as xr

from ..results import save_dataset
from . import limits  # looked up at call time, so a patched run function is the one used


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
    case : {"semicircle", "uniform", "disk"}
        Closed-form case of THEORY §5.
    n_particles : sequence of int
        Particle numbers N of the sweep.
    seeds : sequence of int
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

    Examples
    --------
    Two N (too few for a rate), one seed, a short run, into ``eq/`` in the current folder:

    >>> from meanfield.studies.limit_sweeps import equilibrium_in_n
    >>> ds, fits = equilibrium_in_n(
    ...     "uniform", [4, 8], [0], "eq", beta=1.0, regime="coulomb-gas", t_final=0.1, n_workers=1
    ... )
    >>> ds["w2"].dims, fits["w2"]["status"]
    (('N', 'seed', 'replica'), 'undetermined: fewer than 3 distinct sizes')
    """
    from ..workbench.sweeps import run_sweep

    grid = {"N": list(n_particles), "seed": list(seeds)}
    fixed = {"beta": beta, "case": case, "regime": regime, "t_end": t_final}
    # a 1e-3 time run of N = 2 validates every parameter before the sweep starts
    limits.particle_equilibrium_run(2, **{**fixed, "t_end": 1e-3}, seed=0)
    ds = run_sweep(
        limits.particle_equilibrium_run,
        grid,
        out_dir,
        fixed=fixed,
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
        log=log,
    )
    fits = {
        k: limits.fit_power_law_or_undetermined(ds["N"].values, ds[k].isel(replica=0).values)
        for k in ("w1", "w2")
    }
    return ds, fits


def beta_limit_on_grid(case: str, betas, out_dir, *, progress: bool = False):
    """β → ∞ on the grid: W2(ρ_β, μ*) for each β, saved as ``out_dir/grid.nc``, and its
    power-law fit in β (10 bootstrap draws: the grid values carry no seed noise).

    Returns
    -------
    (xarray.Dataset, dict)
        :func:`~meanfield.studies.limits.beta_limit_grid`'s dataset and the fit.

    .. math::

        W_2(\\rho_\\beta, \\mu^*) \\approx C \\beta^{\\text{rate}}

    Examples
    --------
    >>> from pathlib import Path
    >>> from meanfield.studies.limit_sweeps import beta_limit_on_grid
    >>> g, fit = beta_limit_on_grid("uniform", [2.0, 4.0, 8.0], "grid_sweep")
    >>> fit["status"], bool(fit["slope"] < 0), Path("grid_sweep/grid.nc").exists()
    ('fitted', True, True)
    """
    g = limits.beta_limit_grid(case, betas, progress=progress)
    save_dataset(g, Path(out_dir) / "grid.nc")
    fit = limits.fit_power_law_or_undetermined(g["beta"].values, g["w2_grid"].values, n_boot=10)
    return g, fit


def t_decay(case: str, beta: float, t_final: float, out_dir, *, progress: bool = False):
    """t → ∞: the free-energy gap along the McKean–Vlasov flow of a closed-form case from a
    Gaussian, with its exponential rate; saved as ``out_dir/t_decay.nc``.

    .. math::

        F_\\beta(\\rho_t) - F_\\beta(\\rho_\\beta) \\sim C e^{-\\text{rate}\\, t}.

    Returns
    -------
    xarray.Dataset
        :func:`~meanfield.studies.limits.free_energy_decay`'s dataset (``rate``,
        ``rate_ci_low``, ``rate_ci_high``, ``rate_status`` in its attributes).

    Examples
    --------
    V = ω²/2, k = −|z| at β = 1: the gap decays at rate 2 (the mean relaxes at rate 1).

    >>> from pathlib import Path
    >>> from meanfield.studies.limit_sweeps import t_decay
    >>> ds = t_decay("uniform", 1.0, 6.0, "decay")
    >>> ds.attrs["rate_status"], round(float(ds.attrs["rate"]), 1)
    ('fitted', 2.0)
    >>> Path("decay/t_decay.nc").exists()
    True
    """
    energy = limits.closed_form_energy(case)
    ds = limits.free_energy_decay(energy, beta, t_end=t_final, progress=progress)
    save_dataset(ds, Path(out_dir) / "t_decay.nc")
    return ds


__all__ = ["beta_limit_on_grid", "equilibrium_in_n", "t_decay"]
