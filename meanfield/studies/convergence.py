"""The rate in N of W2(μ_N(t), ρ_t) → 0: particles against the grid over several N and seeds.

(Moved out of :mod:`meanfield.workbench.compare`, which re-exports :func:`convergence_in_n`.)
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .._validation import check_fit_sizes, check_int
from ..dynamics.langevin import simulate
from ..dynamics.spec import RunSpec, as_spec
from ..energy import Energy
from ..ot.distance import w2 as _w2
from ..ot.measure import Measure
from ..pde import Density
from ..results import provenance
from ..stats import fit_power_law


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

    Examples
    --------
    Three small N, two seeds, five steps (far too few for a sharp rate: the interval is wide):

    >>> from meanfield.pde import Density, Grid
    >>> from meanfield.studies.convergence import convergence_in_n
    >>> from meanfield.studies.limits import closed_form_energy
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
    spec = as_spec(
        energy,
        initial,
        beta=beta,
        t_final=t_final,
        eta=eta,
        n_particles=n_values[0],
        scheme=scheme,
        safety=safety,
    )
    eq = spec.equation()
    res = eq.solve(spec.law, spec.t_final, safety=spec.safety)
    w2, w2_0 = _particle_distances(spec, res.state, n_values, seeds)
    fit = fit_power_law(n_values, w2, level=confidence, interval="t")
    out = xr.Dataset(
        {"w2": (("N", "seed"), w2), "w2_initial": (("N", "seed"), w2_0)},
        coords={"N": n_values, "seed": seeds},
    )
    out.attrs = provenance(
        {
            "beta": spec.beta,
            "t_final": spec.t_final,
            "eta": spec.eta,
            "grid_scheme": eq.scheme.name,
            "rate": fit["slope"],
            "rate_ci_low": fit["ci_low"],
            "rate_ci_high": fit["ci_high"],
            "rate_confidence": confidence,
            "rate_pooled": fit["pooled_slope"],
            **spec.grid.describe(),
            **energy.describe(),
        },
        seed=None,
    )
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


__all__ = ["convergence_in_n"]
