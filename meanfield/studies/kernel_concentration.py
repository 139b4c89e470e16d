"""Exponential concentration of the learned kernel K_{μ_N} around that of the limit law.

P(max_jk |K_{μ_N}(x_j, x_k) − K_ref(x_j, x_k)| > ε) for μ_N drawn from the exact N-particle
Gibbs law (MALA, independent replicas), against N in the mean-field regime (reference ρ_β,
:func:`kernel_concentration`) and against β in the Coulomb-gas regime at fixed N (reference
μ*, :func:`kernel_concentration_in_beta`); THEORY §6 predicts exponential decay in N (speed
N) and in β (speed βN²).  :func:`kernel_model` is the learned-kernel model of the
``kernel_concentration`` figure and :func:`kernel_concentration_data` its experiment.

References
----------
- A. Dembo, O. Zeitouni, *Large Deviations Techniques and Applications*, 2nd ed., Springer,
  1998 (the contraction principle: the kernel gap is a continuous function of μ_N).
- D. Chafaï, N. Gozlan, P.-A. Zitt, "First-order global asymptotics for confined particles
  with singular pair repulsion", Ann. Appl. Probab. 24 (2014) 2371–2413 (speed βN²).
- S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
  Mathematics, EMS, 2015.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import xarray as xr

from .._validation import check_choice, check_int, check_positive
from ..domains import Box
from ..dynamics.langevin import simulate
from ..energy import Energy, LinearAlignment, PairInteraction, QuadraticPotential
from ..errors import ConvergenceError
from ..kernels import Riesz
from ..ot.diagnostics import kernel_gap
from ..ot.distance import w2
from ..ot.measure import Measure
from ..pde import Grid, equilibrium_measure, gibbs_state
from ..results import provenance
from .large_deviations import _require_unique_minimiser
from .limits import check_size

#: Replicas, particle numbers (N sweep) and inverse temperatures (β sweep) of each size.
CONFIG = {
    "small": {"reps": 40, "Ns": [8, 24], "betas": [0.1, 0.4]},
    "full": {"reps": 200, "Ns": [8, 16, 32, 64], "betas": [0.1, 0.2, 0.4, 0.8, 1.6]},
}


def kernel_model(seed: int = 0):
    """The learned-kernel model of the concentration figure.

    1D two-class data (n = 30, x = 0.8 y + 0.4 ξ, y = ±1), softplus features, V = ω²/2,
    linear alignment, k = −|z| with λ = 1/2, on [−4, 4]:

    .. math::

        E(\\mu) = \\int \\frac{\\omega^2}{2} d\\mu - \\text{alignment}(\\mu)
        - \\frac{1}{4}\\iint |\\omega - \\omega'|\\, d\\mu\\, d\\mu'.

    Parameters
    ----------
    seed : int
        Seed of the data draw.

    Returns
    -------
    (Energy, ndarray (30, 1))
        The energy and the data inputs X.

    See Also
    --------
    kernel_concentration_data : the experiment on this model.
    kernel_concentration : the gap's concentration against N.
    kernel_concentration_in_beta : the same against β.

    References
    ----------
    - A. Dembo, O. Zeitouni, *Large Deviations Techniques and Applications*, Springer, 1998
      (the contraction principle: the kernel gap is a continuous function of μ_N).

    Examples
    --------
    >>> from meanfield.studies.kernel_concentration import kernel_model
    >>> energy, X = kernel_model(seed=0)
    >>> X.shape, energy.term_names, energy.domain
    ((30, 1), ['confinement', 'alignment', 'interaction'], Box(dim=1, half_width=4.0))
    """
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


def kernel_concentration(
    energy: Energy,
    X,
    feature: str,
    beta: float,
    n_particles,
    eps,
    *,
    cells: int = 512,
    n_replicas: int = 200,
    n_steps: int = 400,
    burn_in: int = 200,
    thin: int = 20,
    eta: float = 0.05,
    regime: str = "mean-field",
    eps_w2=None,
    seed: int = 0,
) -> xr.Dataset:
    r"""P(max_jk |K_{μ_N}(x_j, x_k) − K_ref(x_j, x_k)| > ε) against N.

    μ_N is drawn from the exact Gibbs law ∝ exp(−β_N N H_N) (MALA, independent replicas).  The
    reference is that law's limit: the grid Gibbs state ρ_β (mean-field regime) or the β = ∞
    equilibrium measure μ* (Coulomb-gas regime, β_N = βN); the gap is
    :func:`meanfield.ot.diagnostics.kernel_gap`.  Each replica contributes the fraction of its
    post-burn-in snapshots above ε (standard errors from the spread over replicas):

    .. math::

        P\Big(\max_{jk}|K_{\mu_N}(x_j, x_k) - K_{\mathrm{ref}}(x_j, x_k)| > \varepsilon
        \Big) \approx e^{-N\, \mathrm{rate}(\varepsilon)}.

    Parameters
    ----------
    energy, X, feature : Energy (p = 1), array (n, d), str
        The model, the data inputs where the kernels are compared, the kernel's feature map.
    beta, n_particles : float, sequence of int
        Inverse temperature β > 0; particle numbers N.
    eps, eps_w2 : sequence of float
        Thresholds ε of the kernel gap and (optional) of W2(μ_N, ref): the same samples then
        also give P(W2(μ_N, ref) > ε) (exact 1D quantile W2).
    cells, n_replicas, n_steps, burn_in, thin, eta, seed :
        Grid cells of the reference; MALA chains per N, steps, discarded steps, recording
        stride, step size; seed.
    regime : {"mean-field", "coulomb-gas"}

    Returns
    -------
    xarray.Dataset
        ``prob``, ``prob_se`` (N, eps); ``mean_gap``, ``mean_gap_se`` (N); ``decay_rate``
        (eps): the slope of −log P against N, NaN (undetermined) where fewer than 3 sizes have
        P > 0.  With ``eps_w2``: ``prob_w2``, ``prob_w2_se`` (N, eps_w2) and ``mean_w2``,
        ``mean_w2_se`` (N).  Standard errors are over the independent replicas.

    Raises
    ------
    meanfield.errors.NonUniqueMinimiserError
        (mean-field regime) ρ_β is not unique: several states share the lowest free energy,
        μ_N concentrates on their set and not on one reference, so the probabilities would
        not decay.

    See Also
    --------
    kernel_concentration_in_beta : the Coulomb-gas regime against β.
    meanfield.ot.diagnostics.kernel_gap : the gap of one configuration.
    meanfield.studies.large_deviations.tail_probability : large deviations of a linear statistic.

    References
    ----------
    - A. Dembo, O. Zeitouni, *Large Deviations Techniques and Applications*, Springer, 1998,
      §4.2 (the contraction principle).

    Examples
    --------
    The model of the kernel figure, two N (too few for a decay rate), four short chains each:

    >>> from meanfield.studies.kernel_concentration import kernel_concentration, kernel_model
    >>> E, X = kernel_model()
    >>> ds = kernel_concentration(E, X, "softplus", 2.0, [4, 8], [0.1, 1.0], cells=32,
    ...                           n_replicas=4, n_steps=20, burn_in=10, thin=5)
    >>> dict(ds["prob"].sizes), bool(((ds["prob"] >= 0) & (ds["prob"] <= 1)).all())
    ({'N': 2, 'eps': 2}, True)
    >>> p = ds["prob"]  # P falls with ε; the decay rate is undetermined (NaN)
    >>> bool((p.sel(eps=0.1) >= p.sel(eps=1.0)).all()), bool(ds["decay_rate"].isnull().all())
    (True, True)
    """
    beta, Ns, eps, eps_w2 = _check_concentration_args(beta, regime, n_particles, eps, eps_w2)
    grid, rho = _reference_density(energy, beta, regime, cells)
    gen = torch.Generator().manual_seed(seed)
    chain = dict(eta=eta, beta=beta, n_steps=n_steps, record_every=thin, regime=regime)
    rows = []
    for N in Ns:
        om = _mala_snapshots(energy, rho, grid, N, n_replicas, gen, burn_in, seed + N, chain)
        rows.append(_gap_and_w2(om, rho, X, feature, with_w2=eps_w2 is not None))
    data, coords = _concentration_table(rows, Ns, eps, eps_w2)
    attrs = {"beta": beta, "regime": regime, "feature": feature, "cells": cells}
    attrs |= {"n_replicas": n_replicas, "n_steps": n_steps, "burn_in": burn_in, "thin": thin}
    attrs = provenance({**attrs, "eta": eta, **energy.describe()}, seed=seed)
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _check_concentration_args(beta, regime, n_particles, eps, eps_w2):
    """:func:`kernel_concentration`'s arguments checked before any work: β, the particle
    numbers as ints and the thresholds as 1D float arrays (``eps_w2`` may stay None)."""
    beta = check_positive("beta", beta)
    check_choice("regime", regime, ("mean-field", "coulomb-gas"))
    eps, eps_w2 = _thresholds(eps), _thresholds(eps_w2)
    Ns = [check_int("n_particles (N)", int(n)) for n in n_particles]
    return beta, Ns, eps, eps_w2


def _concentration_table(rows, Ns, eps, eps_w2) -> tuple[dict, dict]:
    """:func:`kernel_concentration`'s variables and coordinates from the per-N samples
    ``rows`` (pairs of (T, R) arrays: kernel gaps and W2 or None), with the decay rate of
    P(gap > ε) in N."""
    data = _tail_table([r[0] for r in rows], eps, "eps", "prob", "mean_gap")
    coords = {"N": Ns, "eps": eps}
    if eps_w2 is not None:
        data |= _tail_table([r[1] for r in rows], eps_w2, "eps_w2", "prob_w2", "mean_w2")
        coords["eps_w2"] = eps_w2
    data["decay_rate"] = ("eps", _decay_rates(Ns, data["prob"][1]))
    return data, coords


def _thresholds(eps):
    """Thresholds as a 1D float array (None stays None)."""
    return None if eps is None else np.atleast_1d(np.asarray(eps, dtype=float))


def _gap_and_w2(om: np.ndarray, rho, X, feature: str, *, with_w2: bool):
    """The kernel gap and (or None) W2(μ_N, ρ) of each snapshot of ``om`` (T, R, N, p),
    each of shape (T, R)."""
    gaps = _over_snapshots(om, lambda x: kernel_gap(x, rho, X, feature))
    if not with_w2:
        return gaps, None
    target = Measure.from_density(rho)
    return gaps, _over_snapshots(om, lambda x: w2(Measure.from_particles(x), target).distance)


def _mala_snapshots(energy, rho, grid, N, n_replicas, gen, burn_in, seed, chain) -> np.ndarray:
    """Post-burn-in snapshots (T, n_replicas, N, p) of exact MALA chains started from the
    reference itself (inverse-CDF draws), so a short burn-in suffices."""
    omega0 = _draw_from_density(rho, grid, energy.domain, n_replicas, N, gen)
    # iid draws of ρ may hold a close pair that a Gibbs sample would not; the burn-in removes
    # it, and a chain that stays stuck there is caught by the frozen-chain warning instead
    ds = simulate(energy, omega0, method="mala", seed=seed, check_start=False, **chain)
    return ds["omega"].values[ds["step"].values >= burn_in]


def _tail_table(values, eps, dim: str, prob: str, mean: str) -> dict:
    """Dataset variables from per-N samples ``values`` (list of (T, R) arrays): ``prob`` and
    ``prob`` + ``_se`` over (N, ``dim``) (:func:`_tail_fractions`), ``mean`` and ``mean`` +
    ``_se`` over N (the standard error from the spread of the replicas' own means: replicas are
    independent, the snapshots of one replica are not)."""
    fractions = [_tail_fractions(v, eps) for v in values]
    per_replica = [v.mean(0) for v in values]
    return {
        prob: (("N", dim), np.array([f[0] for f in fractions])),
        f"{prob}_se": (("N", dim), np.array([f[1] for f in fractions])),
        mean: ("N", np.array([v.mean() for v in values])),
        f"{mean}_se": ("N", np.array([m.std(ddof=1) / math.sqrt(len(m)) for m in per_replica])),
    }


def _reference_density(energy: Energy, beta: float, regime: str, cells: int):
    """The grid on the energy's domain and the limit of the Gibbs law on it: ρ_β
    (mean-field regime) or μ* (Coulomb-gas regime)."""
    grid = Grid(energy.domain, cells)

    if regime == "mean-field":
        rho, report = gibbs_state(energy, grid, beta, method="newton")
    else:
        rho, report = equilibrium_measure(energy, grid)
    if not report.converged:
        raise ConvergenceError(f"the reference density did not converge: {report}")
    if regime == "mean-field":
        _require_unique_minimiser(report, beta, "kernel_concentration")
    return grid, rho


def _draw_from_density(rho, grid, domain, n_replicas: int, N: int, gen) -> np.ndarray:
    """``n_replicas`` × N iid draws from a 1D grid density by its inverse CDF at the cell
    centres, shape (n_replicas, N, 1), clipped to ``domain``."""
    lo, hi = domain.bounding_box
    cdf = np.cumsum(rho.masses.ravel())
    cdf /= cdf[-1]
    u = torch.rand(n_replicas, N, generator=gen, dtype=torch.float64).numpy()
    return np.interp(u, cdf, grid.centers[:, 0])[..., None].clip(lo, hi)


def _over_snapshots(om: np.ndarray, f) -> np.ndarray:
    """f applied to each (snapshot, replica) configuration of ``om`` (T, R, N, p): (T, R)."""
    return np.array([[f(om[t, r]) for r in range(om.shape[1])] for t in range(om.shape[0])])


def _tail_fractions(values: np.ndarray, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(value > ε) for each ε, as the mean over replicas of each replica's fraction of
    snapshots above ε, and its standard error over replicas; ``values`` (T, R)."""
    frac = (values[..., None] > eps).mean(0)  # (replica, eps)
    return frac.mean(0), frac.std(0, ddof=1) / math.sqrt(values.shape[1])


def _decay_rates(x, prob: np.ndarray) -> np.ndarray:
    """Slope of −log P against x for each column of ``prob`` (len(x), n_eps); NaN
    (undetermined) where fewer than 3 points have P > 0."""
    x = np.asarray(x, dtype=float)
    rates = []
    for p in prob.T:
        ok = p > 0
        rates.append(-np.polyfit(x[ok], np.log(p[ok]), 1)[0] if ok.sum() >= 3 else np.nan)
    return np.asarray(rates)


def kernel_concentration_in_beta(
    energy: Energy, X, feature: str, n_particles: int, betas, eps, **kwargs
) -> xr.Dataset:
    """Coulomb-gas regime at fixed N: P(max|K_{μ_N} − K_{μ*}| > ε) against β.

    THEORY §6: the speed is βN², so at fixed N the decay is exponential in β:

    .. math::

        P\\big(\\max_{jk}|K_{\\mu_N} - K_{\\mu^*}| > \\varepsilon\\big)
        \\approx e^{-\\beta\\, \\mathrm{rate}(\\varepsilon)}.

    Parameters
    ----------
    energy, X, feature, eps :
        As :func:`kernel_concentration`.
    n_particles : int
        The fixed number of particles N.
    betas : sequence of float
        Inverse temperatures β > 0.
    **kwargs :
        Further keyword arguments of :func:`kernel_concentration`.

    Returns
    -------
    xarray.Dataset
        Over (``beta``, ``eps``): ``prob``, ``prob_se``; over ``beta``: ``mean_gap``,
        ``mean_gap_se``;
        ``decay_rate`` (eps): the slope of −log P against β (NaN, undetermined, where fewer
        than 3 β have P > 0).

    See Also
    --------
    kernel_concentration : against N, and the parameters.
    kernel_concentration_data : the figure's experiment.
    meanfield.ot.diagnostics.kernel_gap : the gap of one configuration.

    References
    ----------
    - D. Chafaï, N. Gozlan, P.-A. Zitt, Ann. Appl. Probab. 24 (2014) 2371–2413 (speed βN²).

    Examples
    --------
    >>> from meanfield.studies.kernel_concentration import (
    ...     kernel_concentration_in_beta,
    ...     kernel_model,
    ... )
    >>> E, X = kernel_model()
    >>> ds = kernel_concentration_in_beta(
    ...     E, X, "softplus", 4, [0.5, 1.0], [0.1], cells=32, n_replicas=4, n_steps=20,
    ...     burn_in=10, thin=5,
    ... )
    >>> dict(ds["prob"].sizes), ds.attrs["regime"], ds.attrs["N"]
    ({'beta': 2, 'eps': 1}, 'coulomb-gas', 4)
    """
    N = check_int("n_particles (N)", n_particles)
    runs = [
        kernel_concentration(
            energy, X, feature, float(b), [N], eps, regime="coulomb-gas", **kwargs
        ).isel(N=0, drop=True)
        for b in betas
    ]
    ds = xr.concat([r.drop_vars("decay_rate") for r in runs], dim="beta")
    ds = ds.assign_coords(beta=np.asarray(betas, dtype=float))
    ds["decay_rate"] = ("eps", _decay_rates(ds["beta"].values, ds["prob"].values))
    ds.attrs = {**runs[0].attrs, "N": int(N), "beta": "swept"}
    return ds


def kernel_concentration_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """P(max|K_{μ_N} − K_ref| > ε) against N and against β, and P(W2(μ_N, ρ_β) > ε).

    Against N: mean-field regime, β = 2, reference ρ_β.  Against β: Coulomb-gas regime,
    N = 16, reference μ*.  Variables suffixed ``_N`` and ``_beta`` for the two sweeps:

    .. math::

        P\\Big(\\max_{jk} |K_{\\mu_N}(x_j, x_k) - K_{\\mathrm{ref}}(x_j, x_k)| > \\varepsilon\\Big)
        \\approx e^{-N I(\\varepsilon)}.

    Parameters
    ----------
    size : {"small", "full"}
        Replicas and sweeps of :data:`CONFIG`.
    seed : int

    Returns
    -------
    xarray.Dataset
        ``prob_N``, ``prob_se_N`` (N, eps_N), ``mean_gap_N``, ``mean_gap_se_N`` (N),
        ``decay_rate_N`` (eps_N); the same with ``_beta`` over (beta, eps_beta); ``prob_w2``,
        ``prob_w2_se`` (N, eps_w2) and ``mean_w2``, ``mean_w2_se`` (N).

    See Also
    --------
    kernel_concentration, kernel_concentration_in_beta : what it runs.
    meanfield.cli.figures.make_figures : computes and draws every figure.

    References
    ----------
    - A. Dembo, O. Zeitouni, *Large Deviations Techniques and Applications*, Springer, 1998
      (the contraction principle: the kernel gap is a continuous function of μ_N).
    - D. Chafaï, N. Gozlan, P.-A. Zitt, Ann. Appl. Probab. 24 (2014) 2371–2413 (speed βN²).

    Examples
    --------
    The small size takes seconds:

    >>> from meanfield.studies.kernel_concentration import kernel_concentration_data
    >>> ds = kernel_concentration_data(size="small")
    >>> dict(ds["prob_N"].sizes)
    {'N': 2, 'eps_N': 3}
    """
    check_size(size)
    torch.set_num_threads(1)
    E, X = kernel_model(seed)
    cfg = CONFIG[size]
    kw = {"n_replicas": cfg["reps"], "n_steps": 300, "burn_in": 100, "seed": seed}
    in_n = kernel_concentration(
        E, X, "softplus", 2.0, cfg["Ns"], [0.75, 1.0, 1.5], eps_w2=[0.3, 0.4, 0.5], **kw
    )
    in_b = kernel_concentration_in_beta(E, X, "softplus", 16, cfg["betas"], [0.5, 1.0], **kw)
    w2_vars = ["prob_w2", "prob_w2_se", "mean_w2", "mean_w2_se"]
    w2 = in_n[w2_vars]
    in_n = in_n.drop_vars([*w2_vars, "eps_w2"])
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
            "n_replicas": cfg["reps"],
            "beta_for_N_sweep": 2.0,
            "N_for_beta_sweep": 16,
            "model": "meanfield.studies.kernel_concentration.kernel_model",
        },
        seed=seed,
    )
    return out
