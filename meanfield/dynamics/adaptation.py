"""Step-size adaptation for HMC: the first step by Hoffman–Gelman's heuristic, then dual
averaging of log ε towards a target acceptance during the warm-up (Hoffman & Gelman 2014,
Algorithms 4 and 5), frozen afterwards so the recorded chain is a fixed Markov kernel.

References
----------
M. D. Hoffman, A. Gelman, "The No-U-Turn sampler: adaptively setting path lengths in
Hamiltonian Monte Carlo", JMLR 15 (2014) 1593–1623.
Y. Nesterov, "Primal-dual subgradient methods for convex problems", Math. Program. 120
(2009) 221–259.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .chains import LangevinState, effective_beta
from .hamiltonian import _kinetic, _velocities


@dataclass
class DualAveraging:
    r"""Nesterov dual averaging of log ε towards a target acceptance (Hoffman & Gelman 2014,
    Alg. 5, with their constants γ = 0.05, t₀ = 10, κ = 0.75 and μ = log(10 ε₀)).

    After m updates with acceptance statistics α_1 … α_m:

    .. math::

        \bar H_m = \Big(1 - \frac{1}{m + t_0}\Big) \bar H_{m-1} + \frac{\delta - \alpha_m}{m + t_0},
        \qquad \log \varepsilon_m = \mu - \frac{\sqrt m}{\gamma} \bar H_m,

        \log \bar\varepsilon_m = m^{-\kappa} \log \varepsilon_m
        + (1 - m^{-\kappa}) \log \bar\varepsilon_{m-1}.

    ``step_size`` is ε_m (used during warm-up), ``final_step_size`` is ε̄_m (frozen afterwards),
    each with its logarithm rounded to the nearest multiple of ``log_step_grid`` (the
    recursion itself runs unrounded):

    .. math::

        \varepsilon_m = \exp\big(g \cdot \operatorname{round}(\log \varepsilon_m / g)\big),
        \qquad g = 2^{-10}\ \text{(a relative step of 0.1 \%)}.

    Why: the recursion is unstable to perturbations of the acceptances.  A change δα in one
    α_m moves log ε by √m/(γ (m + t₀)) δα (1.4–3.2 δα for m ≤ 200), the next trajectory's
    acceptance by about as much, and so on: a round-off difference (~1e-14) between two
    computations of the same chain (HMC's compiled and eager paths) grows about ×3 per
    warm-up trajectory, until after ~40 trajectories the two step sizes differ in the second
    digit.  Rounded, the step sizes both paths use are bit-identical unless an unrounded
    log ε falls within its round-off (≤ √m/γ · 1e-14 ≈ 3e-12) of a grid midpoint, a
    probability ~1e-8 per update, so the perturbation never enters a trajectory.  The grid
    changes ε by at most 0.05 %, far below what the adaptation resolves;
    ``log_step_grid = 0`` turns it off.

    Parameters
    ----------
    step_size0 : float
        The initial step ε₀ > 0.
    target : float
        Target acceptance δ ∈ (0, 1).
    gamma, t0, kappa : float
        The constants γ, t₀, κ.
    log_step_grid : float
        The grid g ≥ 0 of log ε (2^-10: exact in binary); 0 for no rounding.

    See Also
    --------
    find_reasonable_step_size : the first ε the averaging starts from.
    meanfield.dynamics.hmc.warm_up : the HMC warm-up that runs it.
    meanfield.dynamics.hmc.sample_hmc : the sampler end to end (warm-up, then a frozen ε).
    meanfield.stats.effective_sample_size : what a tuned chain yields per trajectory.

    References
    ----------
    - M. D. Hoffman, A. Gelman, "The No-U-Turn sampler: adaptively setting path lengths in
      Hamiltonian Monte Carlo", JMLR 15 (2014) 1593–1623 (Alg. 5, its constants).
    - Y. Nesterov, "Primal-dual subgradient methods for convex problems", Math. Program. 120 (2009)
      221–259 (dual averaging).

    Examples
    --------
    Acceptances above the target lengthen the step:

    >>> from meanfield.dynamics.adaptation import DualAveraging
    >>> adapt = DualAveraging(0.1)
    >>> adapt.final_step_size  # before any update: ε₀
    0.1
    >>> for _ in range(3):
    ...     eps = adapt.update(1.0)
    >>> eps > 0.1, adapt.final_step_size > 0.1
    (True, True)
    """

    step_size0: float
    target: float = 0.8
    gamma: float = 0.05
    t0: float = 10.0
    kappa: float = 0.75
    log_step_grid: float = 2.0**-10

    def __post_init__(self):
        self.mu = math.log(10 * self.step_size0)
        self.m, self.h_bar, self.log_eps, self.log_eps_bar = 0, 0.0, math.log(self.step_size0), 0.0

    def _on_grid(self, log_eps: float) -> float:
        """exp of ``log_eps`` rounded to the nearest multiple of ``log_step_grid``."""
        g = self.log_step_grid
        return math.exp(round(log_eps / g) * g if g else log_eps)

    def update(self, accept_prob: float) -> float:
        """Feed one acceptance statistic α_m in [0, 1]; returns the next step size ε_m.

        Parameters
        ----------
        accept_prob : float
            The acceptance probability of the last trajectory (mean over replicas).

        Returns
        -------
        float
            ε_m, to use for the next trajectory of the warm-up.

        Examples
        --------
        Acceptances below the target shrink the step, after a first move towards 10 ε₀ (the
        centre μ of the averaging):

        >>> from meanfield.dynamics.adaptation import DualAveraging
        >>> adapt = DualAveraging(0.1, target=0.8)
        >>> [round(adapt.update(0.0), 4) for _ in range(3)], adapt.m
        ([0.2336, 0.023, 0.0017], 3)
        """
        self.m += 1
        m, w = self.m, 1.0 / (self.m + self.t0)
        self.h_bar = (1 - w) * self.h_bar + w * (self.target - accept_prob)
        self.log_eps = self.mu - math.sqrt(m) / self.gamma * self.h_bar
        eta = m ** (-self.kappa)
        self.log_eps_bar = eta * self.log_eps + (1 - eta) * self.log_eps_bar
        return self.step_size

    @property
    def step_size(self) -> float:
        """ε_m, the step of the warm-up after m updates, on the grid of ``log_step_grid`` (ε₀
        itself before any).

        Examples
        --------
        >>> import math
        >>> from meanfield.dynamics.adaptation import DualAveraging
        >>> adapt = DualAveraging(0.1)
        >>> adapt.step_size, adapt.update(0.5) == adapt.step_size
        (0.1, True)
        >>> k = math.log(adapt.step_size) * 1024  # log ε on the grid 2^-10
        >>> abs(k - round(k)) < 1e-9
        True
        """
        return self._on_grid(self.log_eps) if self.m else self.step_size0

    @property
    def final_step_size(self) -> float:
        """ε̄_m, the averaged step frozen after the warm-up (ε₀ before any update).

        Examples
        --------
        The average lags behind the step itself:

        >>> from meanfield.dynamics.adaptation import DualAveraging
        >>> adapt = DualAveraging(0.1)
        >>> steps = [adapt.update(1.0) for _ in range(5)]
        >>> round(steps[-1], 2), round(adapt.final_step_size, 2)
        (19.72, 7.07)
        """
        return self._on_grid(self.log_eps_bar) if self.m else self.step_size0


def find_reasonable_step_size(
    integrator, state: LangevinState, generator: torch.Generator, *, max_doublings=60
) -> float:
    """A first ε (Hoffman & Gelman 2014, Alg. 4): from ε = 0.1, double (or halve) until the
    replica-mean acceptance probability of one leapfrog step crosses 1/2.

    Parameters
    ----------
    integrator : HMC
    state : LangevinState
        Where the trial steps start (left as it was).
    generator : torch.Generator
        Draws the trial velocities: the run's stream, which :func:`warm_up` opens from the
        state (:meth:`~meanfield.dynamics.chains.LangevinState.generator`) and carries on.
    max_doublings : int
        Most doublings (or halvings) tried.

    Returns
    -------
    float
        ε, 0.1 times a power of two.

    See Also
    --------
    DualAveraging : the adaptation started from this ε.
    meanfield.dynamics.hmc.warm_up : the HMC warm-up that calls it.
    meanfield.dynamics.hmc.HMC : the kernel whose leapfrog step is probed.

    References
    ----------
    - M. D. Hoffman, A. Gelman, "The No-U-Turn sampler: adaptively setting path lengths in
      Hamiltonian Monte Carlo", JMLR 15 (2014) 1593–1623 (Alg. 4).

    Examples
    --------
    >>> import math
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.adaptation import find_reasonable_step_size
    >>> from meanfield.dynamics.hmc import HMC
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> hmc = HMC(E, beta=1.0)
    >>> s = hmc.init(torch.zeros(4, 1), seed=0)
    >>> eps = find_reasonable_step_size(hmc, s, s.generator())
    >>> eps > 0, math.log2(eps / 0.1).is_integer()  # 0.1 times a power of two
    (True, True)
    """
    omega, U, gradU = state.omega, state.cache["U"], state.cache["gradU"]
    beta_N = effective_beta(integrator.beta, omega.shape[-2], integrator.regime)

    def accept_prob(eps):
        v = _velocities(omega, generator, beta_N)
        k0 = _kinetic(v, beta_N)
        _, v2, U2, _, finite = integrator.flow(omega, v, eps, 1, gradU, beta_N)
        d = (U - U2) + k0 - _kinetic(v2, beta_N)
        d = torch.where(finite, d, torch.full_like(d, -math.inf))
        return float(torch.exp(d.clamp(max=0.0)).mean())

    eps = 0.1
    direction = 1 if accept_prob(eps) > 0.5 else -1
    for _ in range(max_doublings):
        new = eps * 2.0**direction
        if (accept_prob(new) > 0.5) != (direction == 1):
            # the new step crossed the threshold: keep the last step on the good side
            return eps if direction == 1 else new
        eps = new
    return eps


__all__ = ["DualAveraging", "find_reasonable_step_size"]
