"""Large deviations of linear statistics L_N = ∫ f dμ_N (THEORY §6), mean-field regime.

Two independent routes to the same rate:

* **theory on the grid**: the scaled cumulant generating function
  Λ(θ) = lim (1/N) log E exp(N θ L_N) = β (min F_β − min F_β^θ),  F_β^θ = F_β − (θ/β)∫f dρ,
  from tilted Gibbs states of :func:`meanfield.pde.gibbs_state`, and the rate
  J(a) = sup_θ (θ a − Λ(θ)), evaluated parametrically: a(θ) = Λ'(θ) = ∫ f dρ_θ,
  J(a(θ)) = θ a(θ) − Λ(θ);
* **Monte Carlo at finite N**: P(L_N ≥ a) by exponential tilting.  Sampling the tilted Gibbs
  law π_θ ∝ exp(−βN H_N + θ N L_N) (exact MALA on the energy plus the potential −(θ/β) f),

      P(L_N ≥ a) = (Z_θ/Z_0) · E_θ[ 1{L_N ≥ a} exp(−θ N L_N) ],
      log(Z_θ/Z_0) = N ∫_0^θ E_θ'[L_N] dθ'   (thermodynamic integration on a ladder of θ'),

  so probabilities far below 1/(number of samples) — 1e-8 and less — come with error bars
  (statistical, from independent replicas, plus the quadrature error of the θ ladder).

The tilt is an ordinary :class:`~meanfield.energy.Potential` term, so both routes consume the
same :class:`~meanfield.energy.Energy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import xarray as xr

from .._validation import check_choice, check_int, check_positive
from ..dynamics.langevin import sample_hmc, simulate
from ..energy import Energy, Potential
from ..errors import ConvergenceError, NonUniqueMinimiserError
from ..results import provenance
from ._deprecation import renamed_keywords


@dataclass(frozen=True)
class Statistic:
    r"""A one-body observable f(ω) with its gradient; L_N = (1/N) Σ_i f(ω_i).

    .. math::

        L_N = \frac1N \sum_{i=1}^N f(\omega_i), \qquad
        f(\omega) = \omega_1 \ (\text{"mean"}) \ \text{or}\ |\omega|^2
        \ (\text{"second_moment"})

    Parameters
    ----------
    name : {"mean", "second_moment"}

    Examples
    --------
    >>> import torch
    >>> from meanfield.studies.ldp import Statistic
    >>> omega = torch.tensor([[1.0, 2.0]])
    >>> stat = Statistic("second_moment")
    >>> stat.f(omega).tolist(), stat.grad(omega).tolist()
    ([5.0], [[2.0, 4.0]])
    """

    name: str

    def f(self, omega):
        """f(ω) at each point: shape (..., p) -> (...).

        Examples
        --------
        >>> import torch
        >>> from meanfield.studies.ldp import Statistic
        >>> Statistic("mean").f(torch.tensor([[1.0, 2.0], [3.0, 4.0]])).tolist()
        [1.0, 3.0]
        """
        if self.name == "mean":
            return omega[..., 0]
        return (omega * omega).sum(-1)

    def grad(self, omega):
        """∇f(ω) at each point: shape (..., p) -> (..., p).

        Examples
        --------
        >>> import torch
        >>> from meanfield.studies.ldp import Statistic
        >>> Statistic("mean").grad(torch.tensor([[1.0, 2.0]])).tolist()
        [[1.0, 0.0]]
        """
        if self.name == "mean":
            g = torch.zeros_like(omega)
            g[..., 0] = 1.0
            return g
        return 2 * omega


def statistic(name: str) -> Statistic:
    """``"mean"`` (f = ω₁, the first coordinate) or ``"second_moment"`` (f = |ω|²).

    Examples
    --------
    >>> import torch
    >>> from meanfield.studies.ldp import statistic
    >>> statistic("mean"), statistic("mean").f(torch.tensor([[1.0, 2.0]])).tolist()
    (Statistic(name='mean'), [1.0])
    """
    check_choice("statistic", name, ("mean", "second_moment"))
    return Statistic(name)


class TiltPotential(Potential):
    r"""V(ω) = −c f(ω): the exponential tilt by θ = cβ of a linear statistic.

    .. math::

        V(\omega) = -c\, f(\omega), \qquad c = \theta / \beta

    Parameters
    ----------
    stat : Statistic
    coeff : float
        The coefficient c.

    Examples
    --------
    >>> import torch
    >>> from meanfield.studies.ldp import TiltPotential, statistic
    >>> tilt = TiltPotential(statistic("mean"), 0.5)
    >>> tilt.V(torch.tensor([[2.0]])).tolist(), tilt.describe()
    ([-1.0], {'tilt_statistic': 'mean', 'tilt_coeff': 0.5})
    """

    name = "tilt"

    def __init__(self, stat: Statistic, coeff: float):
        self.stat, self.coeff = stat, float(coeff)

    def V(self, omega):
        """V(ω) = −c f(ω): shape (..., p) -> (...).

        Examples
        --------
        >>> import torch
        >>> from meanfield.studies.ldp import TiltPotential, statistic
        >>> TiltPotential(statistic("second_moment"), 2.0).V(torch.tensor([[1.0, 1.0]])).tolist()
        [-4.0]
        """
        return -self.coeff * self.stat.f(omega)

    def gradV(self, omega):
        """∇V(ω) = −c ∇f(ω): shape (..., p) -> (..., p).

        Examples
        --------
        >>> import torch
        >>> from meanfield.studies.ldp import TiltPotential, statistic
        >>> tilt = TiltPotential(statistic("second_moment"), 2.0)
        >>> tilt.gradV(torch.tensor([[1.0, -1.0]])).tolist()
        [[-4.0, 4.0]]
        """
        return -self.coeff * self.stat.grad(omega)

    def describe(self):
        """The tilt's statistic and coefficient c, for dataset attributes.

        Examples
        --------
        >>> from meanfield.studies.ldp import TiltPotential, statistic
        >>> TiltPotential(statistic("mean"), 0.25).describe()
        {'tilt_statistic': 'mean', 'tilt_coeff': 0.25}
        """
        return {"tilt_statistic": self.stat.name, "tilt_coeff": self.coeff}


def tilted_energy(energy: Energy, stat: Statistic, theta: float, beta: float) -> Energy:
    r"""E − (θ/β) ∫ f dμ on the same domain: its Gibbs law is π_θ.

    .. math::

        E^\theta(\mu) = E(\mu) - \frac{\theta}{\beta} \int f\, d\mu

    Examples
    --------
    V = ω²/2 tilted by θ/β = 1/2 with f = ω: at ω = 1, 1/2 − 1/2 = 0.

    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.studies.ldp import statistic, tilted_energy
    >>> E = Energy([QuadraticPotential()], Box(1, 4.0))
    >>> Et = tilted_energy(E, statistic("mean"), 1.0, 2.0)
    >>> Et.term_names, float(Et.value(torch.tensor([[1.0]], dtype=torch.float64)))
    (['confinement', 'tilt'], 0.0)
    """
    return Energy(
        [*energy.terms, TiltPotential(stat, theta / beta)],
        energy.domain,
        dtype=energy.dtype,
        device=energy.device,
    )


def _require_unique_minimiser(report, beta: float, what: str) -> None:
    """Raise :class:`~meanfield.errors.NonUniqueMinimiserError` when the reference Gibbs
    state's search (``report.states`` of :func:`meanfield.pde.gibbs_state`) found several
    states sharing the lowest free energy: the rates and concentration probabilities here are
    about one minimiser ρ_β, which then does not exist."""
    from ..pde.stationary import minimiser_is_unique

    states = getattr(report, "states", ())
    if minimiser_is_unique(states):
        return
    F = min(st.free_energy for st in states)
    tied = [st for st in states if st.free_energy <= F + 1e-9 * (1 + abs(F))]
    means = ", ".join(np.array2string(st.mean, precision=4) for st in tied)
    raise NonUniqueMinimiserError(
        f"{what}: at beta={beta:g} the free energy F_beta has {len(tied)} minimisers of equal "
        f"free energy {F:.10g} (means {means}): the N-particle Gibbs law concentrates on the "
        "set of minimisers, not on one reference state, so no rate about a single reference "
        "is reported (the Legendre transform of the cumulant generating function would give "
        "only the convex hull of the rate); choose a beta where the minimiser is unique, or "
        "break the symmetry (e.g. a tilt), see meanfield.pde.branches.follow_branches"
    )


# ----------------------------------------------------------------------------------------
# theory: Λ and J from tilted grid Gibbs states
# ----------------------------------------------------------------------------------------
def scgf_on_grid(
    energy: Energy,
    stat: Statistic,
    beta: float,
    thetas,
    *,
    cells: int = 512,
    method: str = "newton",
    regime: str = "mean-field",
) -> xr.Dataset:
    r"""Λ(θ), a(θ) = ∫ f dρ_θ and J(a(θ)) on a θ grid (must contain 0).

    .. math::

        \Lambda(\theta) = \beta\big(\min F_\beta - \min F_\beta^\theta\big), \qquad
        a(\theta) = \int f\, d\rho_\theta, \qquad
        J(a(\theta)) = \theta\, a(\theta) - \Lambda(\theta)

    Returns
    -------
    xarray.Dataset over ``theta`` with ``Lambda``, ``a`` and ``J``.

    Raises
    ------
    meanfield.errors.NonUniqueMinimiserError
        (mean-field regime) the untilted free energy has several minimisers of equal free
        energy (e.g. the ordered states ±m* of a symmetric model above a phase transition):
        min F_β is then not attained at one state and a(θ) jumps at θ = 0, so the parametric
        rate would be only the convex hull of the true one.  The Gibbs states come from
        :func:`meanfield.pde.gibbs_state`'s multi-start search when F_β is not convex.

    Examples
    --------
    Without interaction (V = ω²/2, β = 1) and f = ω, ρ_θ = N(θ, 1): Λ(θ) = θ²/2, a(θ) = θ and
    J(a) = a²/2.

    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.studies.ldp import scgf_on_grid, statistic
    >>> E = Energy([QuadraticPotential()], Box(1, 4.0))
    >>> ds = scgf_on_grid(E, statistic("mean"), 1.0, [0.0, 0.5, 1.0], cells=64)
    >>> ds["Lambda"].values.round(2).tolist(), ds["a"].values.round(2).tolist()
    ([0.0, 0.12, 0.5], [0.0, 0.5, 1.0])
    """
    from ..pde import Grid, equilibrium_measure, gibbs_state
    from ..pde.field import Density

    beta = check_positive("beta", beta)
    check_choice("regime", regime, ("mean-field", "coulomb-gas"))
    thetas = np.asarray(thetas, dtype=float)
    if not np.any(thetas == 0):
        raise ValueError("thetas must contain 0 (the untilted reference state)")
    grid = Grid(energy.domain, cells)
    centres = torch.as_tensor(grid.centers, dtype=torch.float64)
    f_cells = stat.f(centres).numpy().reshape(grid.shape)
    F, a = [], []
    rho = None
    for th in thetas:
        tilted = tilted_energy(energy, stat, th, beta)
        if regime == "mean-field":
            rho_th, report = gibbs_state(tilted, grid, beta, method=method, rho0=rho)
        else:  # Coulomb-gas regime: the limit is the β = ∞ minimiser of E − (θ/β)∫f
            rho_th, report = equilibrium_measure(tilted, grid)
        if not report.converged:
            raise ConvergenceError(f"tilted Gibbs state at theta={th} did not converge: {report}")
        if th == 0 and regime == "mean-field":
            _require_unique_minimiser(report, beta, "scgf_on_grid")
        rho = Density(grid, rho_th.data) if isinstance(rho_th, Density) else rho_th
        F.append(report.free_energy)
        a.append(float((rho_th.data * f_cells).sum() * grid.cell_volume))
    F, a = np.asarray(F), np.asarray(a)
    Lam = beta * (F[thetas == 0][0] - F)
    return xr.Dataset(
        {"Lambda": ("theta", Lam), "a": ("theta", a), "J": ("theta", thetas * a - Lam)},
        coords={"theta": thetas},
        attrs=provenance(
            {"statistic": stat.name, "beta": beta, "cells": cells, **energy.describe()}, seed=None
        ),
    )


def rate_at(scgf: xr.Dataset, a: float) -> float:
    """J(a) by interpolating the parametric curve (a(θ), J(θ)) (a(θ) is increasing).

    Examples
    --------
    The Gaussian case of :func:`scgf_on_grid`, J(a) = a²/2:

    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.studies.ldp import rate_at, scgf_on_grid, statistic
    >>> E = Energy([QuadraticPotential()], Box(1, 4.0))
    >>> ds = scgf_on_grid(E, statistic("mean"), 1.0, [0.0, 0.25, 0.5, 0.75, 1.0], cells=64)
    >>> round(rate_at(ds, 0.75), 2), 0.75**2 / 2
    (0.28, 0.28125)
    """
    av, Jv = scgf["a"].values, scgf["J"].values
    order = np.argsort(av)
    if not av.min() <= a <= av.max():
        raise ValueError(
            f"a={a} is outside the tilted means [{av.min():.4g}, {av.max():.4g}]: "
            "widen the theta grid"
        )
    return float(np.interp(a, av[order], Jv[order]))


# ----------------------------------------------------------------------------------------
# Monte Carlo: importance sampling + thermodynamic integration
# ----------------------------------------------------------------------------------------
def _tilted_samples(
    energy, stat, theta, beta, omega0, *, eta, n_steps, burn_in, thin, seed, regime, sampler,
    continued=False,
):  # fmt: skip
    """Samples of L_N under π_θ, shape (snapshots, replicas), and the final state.

    ``continued``: ``omega0`` is the end of the previous rung's chain, a sample of a Gibbs law
    whose close pairs are part of the law, so MALA's start-spacing guard is not applied."""
    tilted = tilted_energy(energy, stat, theta, beta)
    if sampler == "hmc":
        # the burn-in is HMC's warm-up (step adapted, then frozen); its first leapfrog step
        # √(2η) matches MALA's η (one leapfrog step is MALA with η = ε²/2)
        ds = sample_hmc(
            tilted,
            omega0,
            beta=beta,
            n_samples=n_steps - burn_in,
            n_warmup=burn_in,
            step_size=math.sqrt(2 * eta),
            record_every=thin,
            seed=seed,
            regime=regime,
        )
    else:
        ds = simulate(
            tilted,
            omega0,
            method="mala",
            eta=eta,
            beta=beta,
            n_steps=n_steps,
            record_every=thin,
            seed=seed,
            regime=regime,
            check_start=not continued,
        )
    om = torch.as_tensor(ds["omega"].values)
    L = stat.f(om).mean(-1).numpy()  # (time, replica)
    keep = ds["step"].values >= burn_in
    acc = float(ds["acceptance_rate"].values[1:].mean())
    return L[keep], om[-1], acc


@renamed_keywords(N="n_particles")
def tail_probability(
    energy: Energy,
    stat: Statistic,
    a: float,
    n_particles: int,
    beta: float,
    *,
    theta: float,
    n_ladder: int = 12,
    n_replicas: int = 64,
    n_steps: int = 600,
    burn_in: int = 200,
    thin: int = 5,
    eta: float = 0.05,
    seed: int = 0,
    omega0=None,
    regime: str = "mean-field",
    sampler: str = "mala",
) -> xr.Dataset:
    r"""Estimate log P(L_N ≥ a) under the Gibbs law ∝ exp(−β_N N H_N) with an error bar.

    The tilt by θ adds −(θ/β) f to the energy, i.e. multiplies the law by exp(s θ L_N) with
    the speed s = β_N N/β (N in the mean-field regime, N² in the Coulomb-gas regime).
    ``rate`` = −log P / s tends to the J(a) of :func:`scgf_on_grid` with the same ``regime``
    (THEORY §6: speed N and rate β(F_β − min F_β); speed βN² and rate E − E(μ*)):

    .. math::

        P(L_N \ge a) = \frac{Z_\theta}{Z_0}\, E_\theta\big[1\{L_N \ge a\}\, e^{-\theta s L_N}\big],
        \qquad \log\frac{Z_\theta}{Z_0} = s \int_0^\theta E_{\theta'}[L_N]\, d\theta'.

    Parameters
    ----------
    energy, stat, a, n_particles, beta : Energy, Statistic, float, int, float
        The model, the linear statistic, the threshold of the upper tail, the number of
        particles N (formerly ``N``) and the inverse temperature β.
    theta, n_ladder : float, int
        Tilt of the indicator (best where the tilted mean of L_N is ≈ a, see
        :func:`scgf_on_grid`); θ points (uniform on [0, theta]) of the thermodynamic integration.
    n_replicas, n_steps, burn_in, thin, eta, seed : int, int, int, int, float, int
        Chains per θ (independent replicas), steps (HMC: whole trajectories), discarded steps,
        recording stride, step size (MALA's η; HMC adapts its step from √(2η)) and seed.
    omega0 : array (N, p), optional
        Starting configuration (default: N points spread on [−1, 1] in every coordinate).
    regime, sampler : {"mean-field", "coulomb-gas"}, {"mala", "hmc"}
        The temperature regime, and the exact sampler of the tilted laws
        (:class:`~meanfield.dynamics.langevin.MALA` or :func:`~meanfield.dynamics.hmc.sample_hmc`).

    Returns
    -------
    xarray.Dataset
        ``log_p``, ``log_p_se``, ``log_p_quad_err`` (trapezoid vs Simpson), ``rate`` = −log_p/s,
        ``rate_se``; over ``theta_ladder``: ``mean_L``, ``mean_L_se``, ``acceptance_rate``.

    Examples
    --------
    Without interaction, L_N (the mean of N = 4 standard normals at β = 1) is N(0, 1/4), so
    log P(L_N ≥ 1) = log P(Z ≥ 2) ≈ −3.78, and the rate is −log P / 4 (speed N):

    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.studies.ldp import statistic, tail_probability
    >>> E = Energy([QuadraticPotential()], Box(1, 4.0))
    >>> ds = tail_probability(E, statistic("mean"), 1.0, 4, 1.0, theta=1.0, n_ladder=3,
    ...                       n_replicas=4, n_steps=40, burn_in=10, thin=5, eta=0.1)
    >>> round(float(ds["log_p"]), 1), bool(ds["rate"] == -ds["log_p"] / 4)
    (-3.8, True)
    """
    N, beta, n_ladder, n_replicas = _check_tail_args(
        n_particles, beta, theta, n_ladder, n_replicas, n_steps, burn_in, regime, sampler
    )
    speed = N if regime == "mean-field" else N * N  # β_N N / β
    state = _replicated_start(omega0, N, energy.dim, n_replicas, seed)
    ladder = np.linspace(0.0, float(theta), n_ladder)
    chain = dict(regime=regime, n_steps=n_steps, burn_in=burn_in, thin=thin, eta=eta)
    data = _tail_estimate(energy, stat, a, beta, state, ladder, speed, seed, sampler, chain)
    attrs = {"statistic": stat.name, "a": a, "N": N, "beta": beta, "theta": theta, **chain}
    attrs |= {"sampler": sampler, "speed": speed, "n_ladder": n_ladder, "n_replicas": n_replicas}
    attrs = provenance({**attrs, **energy.describe()}, seed=seed)
    return xr.Dataset(data, coords={"theta_ladder": ladder}, attrs=attrs)


def _tail_estimate(energy, stat, a, beta, state, ladder, speed, seed, sampler, chain) -> dict:
    """The estimate of :func:`tail_probability` from chains up the θ ladder (the last θ is
    the tilt of the indicator), as its dataset's variables."""
    means, ses, accs, last_L = _ladder_means(
        energy, stat, ladder, beta, state, seed=seed, sampler=sampler, **chain
    )
    log_ratio, log_ratio_se, quad_err = _log_partition_ratio(ladder, means, ses, speed)
    log_ind, log_ind_se = _log_tilted_indicator(last_L, a, float(ladder[-1]), speed)
    log_p, se = log_ratio + log_ind, math.hypot(log_ratio_se, log_ind_se)
    data = {"log_p": log_p, "log_p_se": se, "log_p_quad_err": quad_err}
    data |= {"rate": -log_p / speed, "rate_se": se / speed}
    data |= {"mean_L": ("theta_ladder", means), "mean_L_se": ("theta_ladder", ses)}
    data["acceptance_rate"] = ("theta_ladder", np.asarray(accs))
    return data


def _check_tail_args(N, beta, theta, n_ladder, n_replicas, n_steps, burn_in, regime, sampler):
    """:func:`tail_probability`'s arguments checked before any work; returns N, β, the
    ladder size and the number of replicas as checked."""
    N = check_int("n_particles (N)", N)
    check_choice("regime", regime, ("mean-field", "coulomb-gas"))
    check_choice("sampler", sampler, ("mala", "hmc"))
    if sampler == "hmc" and not 0 <= burn_in < n_steps:
        raise ValueError(f"burn_in must be in [0, n_steps={n_steps}) for HMC, got {burn_in}")
    beta = check_positive("beta", beta)
    n_ladder = check_int("n_ladder", n_ladder, minimum=3)
    n_replicas = check_int("n_replicas", n_replicas, minimum=4)
    if theta < 0:
        raise ValueError(f"theta must be >= 0 for an upper tail, got {theta}")
    return N, beta, n_ladder, n_replicas


def _replicated_start(omega0, N: int, p: int, n_replicas: int, seed: int) -> torch.Tensor:
    """The chains' start, shape (n_replicas, N, p): ``omega0`` in every replica, or by
    default :func:`_spread_start`."""
    if omega0 is None:
        omega0 = _spread_start(N, p, seed)
    return torch.as_tensor(omega0, dtype=torch.float64)[None].repeat(n_replicas, 1, 1)


def _spread_start(N: int, p: int, seed: int) -> torch.Tensor:
    """N points evenly on [−1, 1] in every coordinate, shape (N, p); for p > 1 the rows are
    permuted (seeded) so the coordinates are not all equal."""
    base = torch.linspace(-1, 1, N, dtype=torch.float64)[:, None].repeat(1, p)
    if p == 1:
        return base
    return base[torch.randperm(N, generator=torch.Generator().manual_seed(seed))]


def _ladder_means(energy, stat, ladder, beta, state, *, seed, sampler, **chain):
    """Run the tilted chains up the θ ladder, each starting where the last ended.

    Returns
    -------
    (ndarray, ndarray, list, ndarray)
        Mean of L_N at each θ (n_ladder,), its standard error over replicas, the acceptance
        rates, and the samples of L_N at the last θ (snapshots, replicas).
    """
    means, ses, accs = [], [], []
    L = None
    for k, th in enumerate(ladder):
        L, state, acc = _tilted_samples(
            energy, stat, th, beta, state, seed=seed * 1000 + k, sampler=sampler,
            continued=k > 0, **chain,
        )  # fmt: skip
        rep_means = L.mean(0)
        means.append(rep_means.mean())
        ses.append(rep_means.std(ddof=1) / math.sqrt(L.shape[1]))
        accs.append(acc)
    return np.asarray(means), np.asarray(ses), accs, L


def _log_partition_ratio(ladder, means, ses, speed: float) -> tuple[float, float, float]:
    """log(Z_θ/Z_0) = s ∫_0^θ E_θ'[L_N] dθ' by the trapezoid rule, its statistical error and
    the quadrature error (trapezoid against Simpson)."""
    h = ladder[1] - ladder[0]
    w = np.full(len(ladder), h)
    w[0] = w[-1] = h / 2
    integral = float(w @ means)
    se = speed * float(np.sqrt(((w * ses) ** 2).sum()))
    return speed * integral, se, speed * abs(integral - _simpson(ladder, means))


def _log_tilted_indicator(L, a: float, theta: float, speed: float) -> tuple[float, float]:
    """log E_θ[1{L_N ≥ a} e^{−θ s L_N}] from the samples L (snapshots, replicas), and its
    standard error over replicas (delta method)."""
    weights = np.where(L >= a, np.exp(-theta * speed * (L - a)), 0.0)  # × e^{θsa}
    rep = weights.mean(0)
    m = rep.mean()
    if m <= 0:
        raise ConvergenceError(
            f"no tilted sample reached L_N >= {a}: increase theta or the samples"
        )
    return math.log(m) - theta * speed * a, rep.std(ddof=1) / math.sqrt(len(rep)) / m


def _simpson(x, y):
    from scipy.integrate import simpson

    return float(simpson(y, x=x))


# ----------------------------------------------------------------------------------------
# concentration of the learned kernel
# ----------------------------------------------------------------------------------------
@renamed_keywords(Ns="n_particles")
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
        Inverse temperature β > 0; particle numbers N (formerly ``Ns``).
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

    Examples
    --------
    The model of the kernel figure, two N (too few for a decay rate), four short chains each:

    >>> from meanfield.studies.kernel_figure import kernel_model
    >>> from meanfield.studies.ldp import kernel_concentration
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
    from ..ot.diagnostics import kernel_gap
    from ..ot.distance import w2
    from ..ot.measure import Measure

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
    from ..pde import Grid, equilibrium_measure, gibbs_state

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


@renamed_keywords(N="n_particles")
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
        The fixed number of particles N (formerly ``N``).
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

    Examples
    --------
    >>> from meanfield.studies.kernel_figure import kernel_model
    >>> from meanfield.studies.ldp import kernel_concentration_in_beta
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
