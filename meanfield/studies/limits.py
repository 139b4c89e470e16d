"""Run functions for limit studies (N → ∞, β → ∞) on the closed-form cases of THEORY §5.

Each function is a module-level ``f(**params) -> xarray.Dataset`` so that
:func:`meanfield.sweeps.run_sweep` can map it over a grid on any dask scheduler.
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

from .._validation import check_choice, check_int, check_positive
from ..closed_forms import equilibrium_case, wasserstein_to_law_1d
from ..domains import Ball, Box
from ..energy import Energy, PairInteraction, QuadraticPotential
from ..kernels import Riesz
from ..particles import simulate
from ..results import provenance


def closed_form_energy(case: str) -> Energy:
    """E = ∫|ω|²/2 dμ + ½∬k_s dμdμ on a domain wide enough never to bind (THEORY §5)."""
    s, p, _ = equilibrium_case(case)
    domain = Box(1, 4.0) if p == 1 else Ball(p, 3.0)
    return Energy([QuadraticPotential(), PairInteraction(Riesz(s), 0.5)], domain)


def default_step(case: str, N: int) -> float:
    """A stable step: in 1D η must resolve the neighbour gap ~1/N (stiff singular kernels)."""
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
    """
    N = check_int("N", N)
    beta = check_positive("beta", beta)
    check_choice("case", case, ("semicircle", "uniform", "disk"))
    n_replicas = check_int("n_replicas", n_replicas)
    s, p, law = equilibrium_case(case)
    energy = closed_form_energy(case)
    eta = default_step(case, N) if eta is None else check_positive("eta", eta)
    gen = torch.Generator().manual_seed(int(seed))
    if p == 1:  # evenly spread start, randomly jittered: no near-collisions
        base = torch.linspace(-1, 1, N, dtype=torch.float64)
        jitter = (torch.rand(n_replicas, N, generator=gen, dtype=torch.float64) - 0.5) / N
        omega0 = (base + jitter)[..., None]
    else:
        omega0 = (torch.rand(n_replicas, N, p, generator=gen, dtype=torch.float64) - 0.5) * 1.2
    n_steps = max(1, int(round(t_end / eta)))
    ds = simulate(
        energy,
        omega0,
        eta=eta,
        beta=beta,
        n_steps=n_steps,
        regime=regime,
        seed=seed,
        record_positions=False,
    )
    final = ds["omega_final"].values
    samples = final[..., 0] if p == 1 else np.linalg.norm(final, axis=-1)
    w1 = [wasserstein_to_law_1d(x, law, order=1) for x in samples]
    w2 = [wasserstein_to_law_1d(x, law, order=2) for x in samples]
    out = xr.Dataset(
        {
            "omega_final": (("replica", "particle", "dim"), final),
            "w1": (("replica",), np.asarray(w1)),
            "w2": (("replica",), np.asarray(w2)),
            "energy_final": (("replica",), ds["energy"].isel(time=-1).values),
        },
        coords={"replica": np.arange(n_replicas), "particle": np.arange(N), "dim": np.arange(p)},
        attrs=provenance(
            {
                "case": case,
                "s": s,
                "p": p,
                "N": N,
                "beta": beta,
                "regime": regime,
                "eta": eta,
                "t_end": t_end,
                "n_steps": n_steps,
                "n_replicas": n_replicas,
            },
            seed=seed,
        ),
    )
    out["w1"].attrs["long_name"] = "W1(mu_N, mu*)"
    out["w2"].attrs["long_name"] = "W2(mu_N, mu*)"
    return out
