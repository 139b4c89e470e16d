"""The large-deviation rate of L_N = ∫ω² dμ_N against N, next to the grid rate J(a).

What the ``ldp_rate`` figure computes (:func:`ldp_rate_data`): Monte Carlo estimates of
−(1/s_N) log P(L_N ≥ a) (:func:`meanfield.studies.ldp.tail_probability`) at several N, in the
mean-field regime (speed s_N = N) and the Coulomb-gas regime (speed N²), with the rate J(a) of
the tilted grid states (:func:`meanfield.studies.ldp.scgf_on_grid`) that they tend to.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from ..results import provenance
from ._sizes import check_size

#: Replicas, steps and particle numbers of each size (mean-field "mf", Coulomb-gas "cg").
CONFIG = {
    "small": {"reps": 16, "steps": 150, "mf": [6, 12], "cg": [8, 16]},
    "full": {"reps": 64, "steps": 400, "mf": [8, 16, 32, 64], "cg": [16, 32, 64, 128]},
}
#: θ ladders of the grid SCGF (both contain 0) and the thresholds a as multiples of the mean.
LADDER = {
    "mf": np.r_[np.linspace(-0.3, 0, 4), np.linspace(0.025, 0.3, 12)],
    "cg": np.r_[np.linspace(-0.3, 0, 4), np.linspace(0.025, 0.45, 18)],
}
FACTOR = {"mf": 1.6, "cg": 2.5}
REGIME = {"mf": "mean-field", "cg": "coulomb-gas"}


def ldp_model():
    """V = ω²/2, k = −|z|, λ = 1/2 on [−8, 8] (p = 1), and the statistic f = ω².

    Returns
    -------
    (Energy, Statistic)

    Examples
    --------
    >>> import torch
    >>> from meanfield.studies.ldp_rate import ldp_model
    >>> energy, stat = ldp_model()
    >>> energy.domain, energy.term_names, stat.name
    (Box(dim=1, half_width=8.0), ['confinement', 'interaction'], 'second_moment')
    >>> stat.f(torch.tensor([[3.0]])).tolist()  # f(ω) = ω²
    [9.0]
    """
    from ..domains import Box
    from ..energy import Energy, PairInteraction, QuadraticPotential
    from ..kernels import Riesz
    from .ldp import statistic

    energy = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], Box(1, 8.0))
    return energy, statistic("second_moment")


def rate_in_n(energy, stat, regime, factor, thetas, Ns, reps, steps, seed) -> dict:
    """Monte Carlo rates against N and the grid rate J(a) for one temperature regime.

    The threshold is a = ``factor`` × the untilted mean a(0) of the grid state, and the tilt
    θ* of the Monte Carlo indicator is where the grid's tilted mean a(θ) equals a:

    .. math::

        a = \\text{factor} \\cdot a(0), \\qquad a(\\theta^*) = a, \\qquad
        \\text{rate}_N = -\\frac{1}{s_N} \\log P(L_N \\ge a) \\to J(a).

    Parameters
    ----------
    energy, stat : Energy, Statistic
        The model and the linear statistic.
    regime : {"mean-field", "coulomb-gas"}
    factor : float
        a / a(0) (> 1 for an upper tail).
    thetas : array (n_theta,)
        θ ladder of the grid SCGF; contains 0.
    Ns : list of int
        Particle numbers.
    reps, steps : int
        Replicas and MALA steps of each θ of :func:`~meanfield.studies.ldp.tail_probability`.
    seed : int
        Run at N is seeded with ``seed + N``.

    Returns
    -------
    dict
        ``rate``, ``rate_se``, ``rate_quad_err``, ``log_p`` (len(Ns),); ``J``, ``a``,
        ``theta_star`` (floats); ``Lambda``, ``tilted_mean``, ``theta`` (n_theta,).

    Examples
    --------
    One N = 4, four replicas of 20 steps, a three-point θ ladder (a rough estimate):

    >>> from meanfield.studies.ldp_rate import ldp_model, rate_in_n
    >>> energy, stat = ldp_model()
    >>> r = rate_in_n(energy, stat, "mean-field", 1.6, [0.0, 0.5, 1.0], [4], 4, 20, seed=0)
    >>> r["rate"].shape, round(float(r["a"] / r["tilted_mean"][0]), 6), r["J"] > 0
    ((1,), 1.6, True)
    """
    from .ldp import rate_at, scgf_on_grid, tail_probability

    sc = scgf_on_grid(energy, stat, 1.0, thetas, cells=512, regime=regime)
    a = factor * float(sc["a"].sel(theta=0.0))
    theta = float(np.interp(a, sc["a"].values, sc["theta"].values))
    kw = dict(theta=theta, eta=0.3, n_replicas=reps, n_steps=steps, burn_in=steps // 4)
    rows = [
        tail_probability(energy, stat, a, N, 1.0, seed=seed + N, regime=regime, **kw)
        for N in tqdm(Ns, desc=f"ldp_rate, {regime}", unit="N", leave=False)
    ]
    speed = np.asarray([float(r.attrs["speed"]) for r in rows])
    return {
        "rate": np.array([float(r["rate"]) for r in rows]),
        "rate_se": np.array([float(r["rate_se"]) for r in rows]),
        "rate_quad_err": np.array([float(r["log_p_quad_err"]) for r in rows]) / speed,
        "log_p": np.array([float(r["log_p"]) for r in rows]),
        "J": rate_at(sc, a),
        "a": a,
        "theta_star": theta,
        "Lambda": sc["Lambda"].values,
        "tilted_mean": sc["a"].values,
        "theta": sc["theta"].values,
    }


def ldp_rate_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """−(1/s_N) log P(L_N ≥ a) against N in both regimes, with the grid rate J(a).

    Model (:func:`ldp_model`): V = ω²/2, k = −|z|, λ = 1/2, β = 1, p = 1, statistic f = ω².
    Mean-field regime (speed s_N = N, a = 1.6 × the equilibrium mean of f, J from tilted Gibbs
    states) and Coulomb-gas regime (speed N², a = 2.5 × the β = ∞ mean, J from tilted
    equilibrium measures):

    .. math::

        J(a) = \\sup_\\theta\\,(\\theta a - \\Lambda(\\theta)), \\qquad
        -\\frac{1}{s_N}\\log P(L_N \\ge a) \\to J(a).

    Parameters
    ----------
    size : {"small", "full"}
        Replicas, steps and N of :data:`CONFIG`.
    seed : int

    Returns
    -------
    xarray.Dataset
        Suffix ``_mf`` / ``_cg`` for the two regimes: ``rate``, ``rate_se``,
        ``rate_quad_err``, ``log_p`` over ``N_mf`` / ``N_cg``; ``Lambda``, ``tilted_mean``
        over ``theta_mf`` / ``theta_cg``; scalar ``J``; attributes ``a_*``, ``theta_star_*``.

    Examples
    --------
    The size is checked before any work:

    >>> from meanfield.studies.ldp_rate import ldp_rate_data
    >>> ldp_rate_data(size="tiny")
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown size 'tiny'; choose one of 'small', 'full'

    The small size takes seconds:

    >>> ds = ldp_rate_data(size="small")
    >>> sorted(k for k in ds.data_vars if k.startswith("J"))
    ['J_cg', 'J_mf']
    """
    import torch

    check_size(size)
    torch.set_num_threads(1)
    energy, stat = ldp_model()
    cfg = CONFIG[size]
    res = {
        tag: rate_in_n(
            energy,
            stat,
            REGIME[tag],
            FACTOR[tag],
            LADDER[tag],
            cfg[tag],
            cfg["reps"],
            cfg["steps"],
            seed,
        )
        for tag in ("mf", "cg")
    }
    attrs = {
        "figure": "ldp_rate",
        "size": size,
        "beta": 1.0,
        "statistic": "second_moment",
        "n_replicas": cfg["reps"],
        "n_steps": cfg["steps"],
        "model": "V=w^2/2, k=-|z|, lambda=1/2, p=1",
    }
    data, regime_attrs = _regime_variables(res)
    coords = {f"N_{t}": cfg[t] for t in res} | {f"theta_{t}": res[t]["theta"] for t in res}
    return xr.Dataset(data, coords=coords, attrs=provenance(attrs | regime_attrs, seed=seed))


def _regime_variables(res: dict) -> tuple[dict, dict]:
    """:func:`ldp_rate_data`'s variables and attributes from the :func:`rate_in_n` result of
    each regime (``res`` keyed by the tag "mf" or "cg"), every name suffixed ``_<tag>``."""
    data, attrs = {}, {}
    for tag, r in res.items():
        for k in ("rate", "rate_se", "rate_quad_err", "log_p"):
            data[f"{k}_{tag}"] = (f"N_{tag}", r[k])
        for k in ("Lambda", "tilted_mean"):
            data[f"{k}_{tag}"] = (f"theta_{tag}", r[k])
        data[f"J_{tag}"] = r["J"]
        attrs[f"a_{tag}"] = r["a"]
        attrs[f"theta_star_{tag}"] = r["theta_star"]
    return data, attrs


__all__ = ["CONFIG", "ldp_model", "ldp_rate_data", "rate_in_n"]
