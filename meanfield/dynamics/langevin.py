"""Particle dynamics: projected Langevin (Algorithm 1) and a Metropolis-adjusted sampler.

Algorithm 1 (THEORY §3), for every particle at once:

    ω_i ← Π_𝒲( ω_i − η N ∇_{ω_i} H_N(Ω) + √(2η / β_N) ξ_i ),   ξ_i ~ N(0, I_p),

with β_N = β (``regime="mean-field"``, stationary law ∝ exp(−β N H_N)) or β_N = β N
(``regime="coulomb-gas"``, stationary law ∝ exp(−β N² H_N)).  Time is t = η · steps.

The integrators are small objects in the JAX-MD manner: ``init(Ω, seed)`` gives a state and
``step(state)`` returns the next one (:class:`LangevinState` is immutable: a step never
changes the state it is given).  The state carries the chain's random stream, as JAX-MD's
carries its key: a step draws from it and returns the advanced stream, so a state alone fixes
the rest of the chain and a saved state resumes it bit for bit.  :func:`simulate` runs one
and records an ``xarray.Dataset``.  Particles may carry leading replica axes, shape
(..., N, p): replicas are independent chains that share the step (how ensembles and Monte
Carlo studies batch).

Random numbers come from a seeded CPU ``torch.Generator`` (its state is the stream the chain
state carries) and are moved to the device, so a seed fixes the noise on every device and the
same seed gives the same bits on the CPU.  A step takes the state alone (``step(state)``):
it draws from the state's stream and returns the stream advanced in the new state.

The chain state, the Metropolis step and the records that MALA shares with HMC live in
:mod:`meanfield.dynamics.chains`, HMC itself in :mod:`meanfield.dynamics.hmc`; both are re-exported
here (``from meanfield.dynamics.langevin import HMC, LangevinState`` works as it always did).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch
import xarray as xr

from .._validation import check_choice, check_positive
from ..contract import RUN_PARAMS, Param, declare
from ..domains import Torus
from ..energy import Energy, check_periodic_terms
from ..errors import (
    CoincidentParticlesWarning,
    FrozenChainWarning,
    InputError,
    LowAcceptanceWarning,
    NumericalError,
    OvershootWarning,
    PinnedParticlesWarning,
)
from ..results import merge_attrs
from .chain_checks import check_start_spacing, frozen_chain_warning
from .chains import (
    LOW_ACCEPTANCE,
    LOW_ACCEPTANCE_MIN_PROPOSALS,
    REGIMES,
    LangevinState,
    _noise,
    _Recorder,
    accept_or_keep,
    chain_setup,
    check_finite_start,
    effective_beta,
    gibbs_potential,
    initial_particles,
    low_acceptance_warning,
    metropolis,
    metropolis_init,
    new_stream,
    start_positions,
    with_potential,
)
from .hmc import HMC, sample_hmc
from .near_field import count_overshoot, near_field
from .spec import METHODS, RunSpec, as_spec, check_batches


def _check_finite(x: torch.Tensor, what: str, step: int):
    if not torch.isfinite(x).all():
        raise NumericalError(
            f"{what} became non-finite at step {step}: lower the step size eta, soften the "
            "kernel (softening > 0) or check the data scale"
        )


#: The pair steps of :class:`ProjectedLangevin`: ``"capped"`` caps each singular pair's drift
#: displacement (the default with an unsoftened singular kernel), ``"explicit"`` is the plain
#: Euler step of Algorithm 1 (the default otherwise, and the only step of a smooth energy).
PAIR_STEPS = ("capped", "explicit")


def singular_pair_terms(energy: Energy) -> list:
    """The pair terms of ``energy`` whose kernel is singular (unsoftened) with λ > 0: the
    terms whose drift the explicit Langevin step cannot integrate near a collision.

    See Also
    --------
    meanfield.dynamics.near_field.near_field : the cap of those terms' forces.
    meanfield.dynamics.chain_checks.check_start_spacing : the start check they trigger.
    meanfield.kernels.PairKernel : ``is_singular``.
    meanfield.energy.PairInteraction : the pair term.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.dynamics.langevin import singular_pair_terms
    >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 4.0))
    >>> len(singular_pair_terms(E))
    1
    >>> soft = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0, 0.05), 0.5)], Box(1, 4.0))
    >>> singular_pair_terms(soft)
    []
    """
    return [
        t
        for t in energy.terms
        if getattr(t, "kind", None) == "pair" and t.kernel.is_singular and t.lam > 0
    ]


def _check_torus(energy, singular) -> None:
    """On a :class:`~meanfield.domains.Torus`: the pair terms must read minimum images
    (:func:`~meanfield.energy.check_periodic_terms`), and an unsoftened singular pair
    kernel is refused (the near-field step reads free-space distances, blind to pairs
    across the seam).  On a Box or a Ball: no PeriodicPairInteraction (a minimum image on a
    cell the particles do not live on)."""
    check_periodic_terms(energy)
    if not isinstance(energy.domain, Torus):
        return
    if singular:
        raise InputError(
            f"an unsoftened singular pair kernel ({singular[0].kernel!r}) on the torus "
            f"{energy.domain!r}: the near-field step does not read minimum images; give the "
            "kernel a softening > 0"
        )


@dataclass
class ProjectedLangevin:
    r"""Unadjusted projected Langevin (Algorithm 1), with random-batch and data mini-batches.

    .. math::

        \omega_i \leftarrow \Pi_{\mathcal W}\Big(\omega_i - \eta N \nabla_{\omega_i} H_N(\Omega)
        + \sqrt{2\eta/\beta_N}\, \xi_i\Big), \qquad \xi_i \sim \mathcal N(0, I_p)

    Parameters
    ----------
    energy : Energy
    eta : float
        Step size η > 0.
    beta : float
        Inverse temperature β > 0.
    regime : {"mean-field", "coulomb-gas"}
    interaction_batch : int, optional
        Random-batch size B ≥ 2 for the pair interaction (Jin–Li–Liu 2020).
    data_batch : int, optional
        Mini-batch size (≥ 2) of data rows for the alignment terms.
    pair_step : {"capped", "explicit"}, optional
        How the force of an unsoftened singular pair kernel is stepped.  ``"capped"`` (the
        default for such a kernel, without ``interaction_batch``: a random batch hides which
        pairs are close, so its default is ``"explicit"``) caps each pair's drift
        displacement at :data:`~meanfield.dynamics.near_field.PAIR_STEP_FRACTION` of the
        pair's distance (:func:`~meanfield.dynamics.near_field.near_field`), so a
        near-collision (kick η·2λ/(N r) for the log gas) cannot fling particles past each
        other; ``"explicit"`` is the plain Euler step.  Energies without a singular pair
        kernel always take the explicit step (bit for bit as before).

    See Also
    --------
    MALA, meanfield.dynamics.hmc.HMC : exact samplers of the same Gibbs law.

    Notes
    -----
    With a singular pair kernel every step also finds each particle's nearest neighbour and
    counts the particles the drift actually used carries past their neighbour's distance
    (:func:`~meanfield.dynamics.near_field.count_overshoot`); the state's cache holds the
    running totals ``overshoot_steps`` (steps with at least one) and ``capped_steps`` (steps
    in which the cap acted), which :func:`simulate` reports.  Its near-field pass
    (:func:`~meanfield.dynamics.near_field.near_field`) is a cell-grid search (p = 2, 3) or
    a k-d tree search, O(N log N), on the CPU from N = 1024 (a dense O(N² p) pass below
    that, on other devices and for kernels without a closed-form cap radius); it is refused
    with ``interaction_batch`` (the random batch hides which pairs it holds).

    References
    ----------
    .. [1] M. Hutzenthaler, A. Jentzen, P. E. Kloeden, "Strong convergence of an explicit
       numerical method for SDEs with nonglobally Lipschitz continuous coefficients",
       Ann. Appl. Probab. 22 (2012) — the tamed Euler step this cap is a pairwise form of.
    .. [2] I. Dumitriu, A. Edelman, "Matrix models for beta ensembles", J. Math. Phys. 43
       (2002) — the exact law the capped step is tested against.

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.langevin import ProjectedLangevin
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> lang = ProjectedLangevin(E, eta=0.01, beta=1.0)
    >>> s = lang.step(lang.init(torch.zeros(4, 1), seed=0))
    >>> s.step, tuple(s.omega.shape), bool((s.omega.abs() <= 2).all())
    (1, (4, 1), True)

    The state carries the random stream: a saved state resumes the chain bit for bit.

    >>> import copy
    >>> saved = copy.deepcopy(s)
    >>> torch.equal(lang.step(s).omega, lang.step(saved).omega)
    True

    The log gas takes the capped pair step by default:

    >>> from meanfield.energy import PairInteraction
    >>> from meanfield.kernels import Riesz
    >>> gas = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 4.0))
    >>> ProjectedLangevin(gas, eta=0.002, beta=4.0).pair_step
    'capped'
    """

    energy: Energy
    eta: float
    beta: float
    regime: str = "mean-field"
    interaction_batch: int | None = None
    data_batch: int | None = None
    pair_step: str | None = None

    def __post_init__(self):
        self.eta = check_positive("eta (step size)", self.eta)
        self.beta = check_positive("beta (inverse temperature)", self.beta)
        check_choice("regime", self.regime, REGIMES)
        self.interaction_batch, self.data_batch = check_batches(
            "langevin", self.energy, self.interaction_batch, self.data_batch
        )
        self._singular = singular_pair_terms(self.energy)
        _check_torus(self.energy, self._singular)
        if self.pair_step is None:
            # random batches hide which pairs are close: their default is the explicit step,
            # whose overshoots are counted and warned (OvershootWarning), not refused
            capped = self._singular and self.interaction_batch is None
            self.pair_step = "capped" if capped else "explicit"
        check_choice("pair_step", self.pair_step, PAIR_STEPS)
        if self.pair_step == "capped" and not self._singular:
            self.pair_step = "explicit"  # nothing to cap: the plain step, bit for bit
        if self.pair_step == "capped" and self.interaction_batch is not None:
            raise InputError(
                "interaction_batch cannot be used with pair_step='capped' for the unsoftened "
                f"singular kernel {self._singular[0].kernel.name} (the random batch hides "
                "which pairs are close): give the kernel a softening > 0, drop "
                "interaction_batch, or leave pair_step to its default 'explicit' with random "
                "batches (overshoots are counted and warned)"
            )

    def init(self, omega, seed: int = 0) -> LangevinState:
        """The state at step 0: ``omega`` (..., N, p) as a tensor of the energy's dtype,
        projected onto 𝒲, and the random stream started from ``seed``
        (:func:`~meanfield.dynamics.chains.new_stream`).

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.dynamics.langevin import ProjectedLangevin
        >>> lang = ProjectedLangevin(Energy([QuadraticPotential()], Box(1, 2.0)), 0.01, 1.0)
        >>> s = lang.init([[3.0], [0.5]])  # 3 lies outside [−2, 2]
        >>> s.omega.flatten().tolist(), s.step
        ([2.0, 0.5], 0)
        """
        omega = start_positions(self.energy, omega)
        cache = {"overshoot_steps": 0, "capped_steps": 0} if self._singular else {}
        return LangevinState(omega=omega, rng=new_stream(seed), cache=cache)

    def step(self, state: LangevinState) -> LangevinState:
        """One step of Algorithm 1 from ``state``, returned as a new state.

        The noise ξ and, when set, the random pair batches and the data rows are drawn from
        the state's random stream, in this order: data rows, pair batches, noise.

        Parameters
        ----------
        state : LangevinState
            Left as it was.

        Returns
        -------
        LangevinState
            Ω moved and projected onto 𝒲, ``step`` + 1, the stream advanced; with a singular
            pair kernel, the cache's ``overshoot_steps`` and ``capped_steps`` counted.

        Raises
        ------
        meanfield.errors.NumericalError
            The drift N∇H_N is not finite.

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.dynamics.langevin import ProjectedLangevin
        >>> lang = ProjectedLangevin(Energy([QuadraticPotential()], Box(1, 2.0)), 0.01, 1.0)
        >>> s0 = lang.init(torch.zeros(3, 1), seed=0)
        >>> s1 = lang.step(s0)
        >>> s0.step, s1.step, bool((s1.omega != 0).all()), bool((s0.omega == 0).all())
        (0, 1, True, True)
        >>> torch.equal(lang.step(s0).omega, s1.omega)  # s0 still holds its stream
        True
        """
        generator = state.generator()
        omega = state.omega
        N = omega.shape[-2]
        beta_N = effective_beta(self.beta, N, self.regime)
        data_index = None
        if self.data_batch is not None:
            data_index = torch.randperm(self.energy.n_data(), generator=generator)[
                : self.data_batch
            ]
            data_index = data_index.numpy()
        drift = self.energy.drift(
            omega,
            interaction_batch=self.interaction_batch,
            generator=generator,
            data_index=data_index,
        )
        _check_finite(drift, "the drift N grad H_N", state.step)
        counts = {}
        if self._singular:
            cap = self.pair_step == "capped"
            correction, nearest, neighbour, n_capped = near_field(
                omega, self._singular, self.eta, cap=cap
            )
            if cap:
                drift = drift + correction
            over = count_overshoot(omega, drift, self.eta, nearest, neighbour)
            counts = {
                "overshoot_steps": state.cache.get("overshoot_steps", 0) + int(over > 0),
                "capped_steps": state.cache.get("capped_steps", 0) + int(n_capped > 0),
            }
        noise = _noise(omega.shape, generator, omega)
        new = omega - self.eta * drift + np.sqrt(2 * self.eta / beta_N) * noise
        return state.evolve(
            omega=self.energy.domain.project(new),
            step=state.step + 1,
            rng=generator.get_state(),
            cache=counts,
        )


@dataclass
class MALA:
    r"""Metropolis-adjusted Langevin: exact Gibbs law ∝ exp(−β_N N H_N) on 𝒲^N.

    The proposal is the unprojected Langevin move Ω' = Ω − η N∇H_N + √(2η/β_N) ξ, i.e. MALA for
    U = β_N N H_N with step h = η/β_N; proposals leaving the domain are rejected (the target
    vanishes there), so the chain is reversible for the Gibbs law restricted to 𝒲^N.  The full
    configuration (all N particles) moves at once; each replica accepts or rejects on its own.
    Exact pair sums and the full data are used: stochastic gradients would break exactness.

    .. math::

        \Omega' = \Omega - h \nabla U(\Omega) + \sqrt{2h}\, \xi, \qquad
        \alpha = \frac{e^{-U(\Omega')}\, q(\Omega \mid \Omega')}
        {e^{-U(\Omega)}\, q(\Omega' \mid \Omega)}, \qquad
        q(y \mid x) \propto e^{-|y - x + h\nabla U(x)|^2 / 4h}

    Parameters
    ----------
    energy : Energy
    eta : float
        Step size η > 0.
    beta : float
        Inverse temperature β > 0.
    regime : {"mean-field", "coulomb-gas"}

    See Also
    --------
    ProjectedLangevin : the unadjusted step (Algorithm 1).
    simulate : the runner of a run specification.
    meanfield.dynamics.hmc.HMC : the other exact sampler of the same law.
    meanfield.pde.stationary.gibbs_state : ρ_β, the N → ∞ limit of its law.
    meanfield.ot.distance.wasserstein : the distance of its particles to ρ_β.

    References
    ----------
    - G. O. Roberts, R. L. Tweedie, "Exponential convergence of Langevin distributions and their
      discrete approximations", Bernoulli 2 (1996) 341–363.
    - G. O. Roberts, J. S. Rosenthal, "Optimal scaling of discrete approximations to Langevin
      diffusions", J. R. Stat. Soc. B 60 (1998) 255–268.

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.langevin import MALA
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> mala = MALA(E, eta=0.01, beta=1.0)
    >>> s = mala.step(mala.init(torch.zeros(4, 1), seed=0))
    >>> s.step, s.proposed, float(s.accepted) in (0.0, 1.0)
    (1, 1, True)
    """

    energy: Energy
    eta: float
    beta: float
    regime: str = "mean-field"

    def __post_init__(self):
        self.eta = check_positive("eta (step size)", self.eta)
        self.beta = check_positive("beta (inverse temperature)", self.beta)
        check_choice("regime", self.regime, REGIMES)
        _check_torus(self.energy, ())

    def _potential(self, omega, beta_N):
        return gibbs_potential(self.energy, omega, beta_N)

    def init(self, omega, seed: int = 0) -> LangevinState:
        """The state at step 0 (:func:`metropolis_init`): Ω projected onto 𝒲, U and ∇U cached,
        no acceptances yet, the random stream started from ``seed``.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.dynamics.langevin import MALA
        >>> mala = MALA(Energy([QuadraticPotential()], Box(1, 2.0)), eta=0.01, beta=1.0)
        >>> s = mala.init([[3.0], [0.0]])  # U = β N H_N = 2 · (4/2 + 0)/2
        >>> s.omega.flatten().tolist(), float(s.cache["U"]), s.proposed
        ([2.0, 0.0], 2.0, 0)
        """
        return metropolis_init(self.energy, omega, self.beta, self.regime, seed=seed)

    def step(self, state: LangevinState) -> LangevinState:
        """One MALA proposal and Metropolis decision per replica, returned as a new state.

        The proposal noise, then the uniforms of the decisions, are drawn from the state's
        random stream.

        Parameters
        ----------
        state : LangevinState
            As :meth:`init` gives it (U and ∇U cached; a state whose positions were replaced
            by ``evolve(omega=...)`` has them recomputed, never stale); left as it was.

        Returns
        -------
        LangevinState
            Accepted replicas at the proposal, the others where they were; ``step``,
            ``proposed`` and the replicas' ``accepted`` counted; the stream advanced.

        Raises
        ------
        meanfield.errors.NumericalError
            The log acceptance ratio is NaN.

        Examples
        --------
        A small step is almost always accepted:

        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.dynamics.langevin import MALA
        >>> mala = MALA(Energy([QuadraticPotential()], Box(1, 2.0)), eta=1e-4, beta=1.0)
        >>> s = mala.init(torch.zeros(5, 4, 1), seed=0)  # 5 replicas
        >>> for _ in range(10):
        ...     s = mala.step(s)
        >>> s.step, s.proposed, s.accepted.tolist()
        (10, 10, [10.0, 10.0, 10.0, 10.0, 10.0])
        """
        generator = state.generator()
        beta_N = effective_beta(self.beta, state.omega.shape[-2], self.regime)
        state = with_potential(state, self.energy, beta_N)  # U, ∇U dropped by evolve(omega=)
        omega, U, gradU = state.omega, state.cache["U"], state.cache["gradU"]
        h = self.eta / beta_N
        noise = _noise(omega.shape, generator, omega)
        prop = omega - h * gradU + np.sqrt(2 * h) * noise
        inside = self.energy.domain.contains(prop).all(-1)
        # evaluate at a safe point where the proposal left the domain (it is rejected anyway)
        prop_eval = torch.where(inside[..., None, None], prop, omega)
        U2, gradU2 = self._potential(prop_eval, beta_N)
        log_fwd = -((prop - omega + h * gradU) ** 2).sum((-1, -2)) / (4 * h)
        log_bwd = -((omega - prop + h * gradU2) ** 2).sum((-1, -2)) / (4 * h)
        log_alpha = -U2 + U + log_bwd - log_fwd
        if torch.isnan(log_alpha).any():
            raise NumericalError(f"MALA acceptance ratio is NaN at step {state.step}")
        accept = metropolis(log_alpha, generator, valid=inside)
        return accept_or_keep(state, accept, prop, U2, gradU2).evolve(rng=generator.get_state())


def make_integrator(
    energy: Energy,
    *,
    method: str = "langevin",
    eta: float,
    beta: float,
    regime: str = "mean-field",
    interaction_batch: int | None = None,
    data_batch: int | None = None,
    pair_step: str | None = None,
):
    """Build :class:`ProjectedLangevin` or :class:`MALA` from plain parameters
    (``pair_step``: Langevin's, see :class:`ProjectedLangevin`).

    See Also
    --------
    ProjectedLangevin : one of the two integrators.
    MALA : the other.
    simulate : the runner that builds it.
    meanfield.dynamics.hmc.HMC : the Hamiltonian sampler.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.langevin import make_integrator
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> type(make_integrator(E, eta=0.1, beta=1.0)).__name__
    'ProjectedLangevin'
    >>> type(make_integrator(E, method="mala", eta=0.1, beta=1.0)).__name__
    'MALA'
    """
    check_choice("method", method, METHODS)
    if method == "mala":
        check_batches(method, energy, interaction_batch, data_batch)
        if pair_step is not None:
            raise InputError("pair_step is a projected-Langevin option; MALA takes none")
        return MALA(energy, eta, beta, regime)
    return ProjectedLangevin(energy, eta, beta, regime, interaction_batch, data_batch, pair_step)


def boundary_fraction(omega, domain) -> float:
    """Fraction of the points ``omega`` (..., N, p) on the boundary of ``domain`` (a box or a
    ball, to a relative 1e-9): particles the projection has pinned there.

    See Also
    --------
    pinning_step_warning : the check made before a run.
    meanfield.errors.PinnedParticlesWarning : the warning a high fraction leads to.
    meanfield.domains.Domain : the projection that pins particles.

    Examples
    --------
    >>> from meanfield.domains import Ball, Box
    >>> from meanfield.dynamics.langevin import boundary_fraction
    >>> boundary_fraction([[2.0], [0.0], [-2.0], [1.0]], Box(1, 2.0))
    0.5
    >>> boundary_fraction([[0.6, 0.8], [0.0, 0.0]], Ball(2, 1.0))
    0.5
    """
    if isinstance(domain, Torus):
        return 0.0  # no boundary: the wrap pins nothing
    x = np.asarray(omega, dtype=float)
    lo, hi = domain.bounding_box
    R = (hi - lo) / 2
    tol = 1e-9 * R
    if hasattr(domain, "half_width"):
        on = np.any(np.abs(x) >= R - tol, axis=-1)
    else:
        on = np.linalg.norm(x, axis=-1) >= R - tol
    return float(on.mean()) if on.size else 0.0


def pinning_step_warning(domain, eta: float, beta: float, beta_N: float) -> str | None:
    r"""The warning, before a projected-Langevin run, when one noise step sqrt(2 eta / beta_N)
    is at least the width of ``domain``: the projection would pin particles to the boundary
    instead of sampling.  None when the step is narrower.

    .. math::

        \sqrt{2\eta/\beta_N} \ge \operatorname{width}(\mathcal W)

    See Also
    --------
    boundary_fraction : the check made after a run.
    meanfield.errors.PinnedParticlesWarning : the warning it returns the text of.
    meanfield.dynamics.chains.effective_beta : β_N.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.dynamics.langevin import pinning_step_warning
    >>> pinning_step_warning(Box(1, 2.0), 0.01, 1.0, 1.0) is None
    True
    >>> pinning_step_warning(Box(1, 1.0), 8.0, 1.0, 1.0)
    'one noise step sqrt(2 eta / beta_N) = 4 is wider than the domain (2R = 2): ...'
    """
    if isinstance(domain, Torus):
        return None  # no boundary: the wrap pins nothing
    lo, hi = domain.bounding_box
    noise = math.sqrt(2 * eta / beta_N) if beta_N > 0 else math.inf
    if noise < hi - lo:
        return None
    return (
        f"one noise step sqrt(2 eta / beta_N) = {noise:.3g} is wider than the domain "
        f"(2R = {hi - lo:g}): particles will be pinned to the boundary; lower eta "
        f"(now {eta:g}) or raise beta (now {beta:g})"
    )


def _warn_if_pinned(ds: xr.Dataset, integrator) -> None:
    """After a projected-Langevin run: warn when half the particles or more of the last record
    of ``ds`` lie on the boundary (pinned there by the projection, not sampled)."""
    if not isinstance(integrator, ProjectedLangevin):
        return
    domain, eta, beta = integrator.energy.domain, integrator.eta, integrator.beta
    last = ds["omega"].isel(time=-1).values if "omega" in ds else ds["omega_final"].values
    frac = boundary_fraction(last, domain)
    if frac >= 0.5:
        kind = "box" if hasattr(domain, "half_width") else "ball"
        R = (domain.bounding_box[1] - domain.bounding_box[0]) / 2
        warnings.warn(
            f"{100 * frac:.0f}% of the particles ended on the boundary of the {kind} "
            f"(R = {R:g}): the step eta = {eta:g} at beta = {beta:g} carries them out of the "
            "domain and the projection pins them; lower eta",
            PinnedParticlesWarning,
            stacklevel=5,
        )


#: The run parameters :func:`simulate` takes, None meaning "the spec's" (the keyword form's
#: defaults are those of :class:`~meanfield.dynamics.spec.RunSpec`).
_SPEC_KEYWORDS = (
    "eta", "beta", "n_steps", "regime", "method", "interaction_batch", "data_batch", "seed",
)  # fmt: skip


@declare(
    *(dataclasses.replace(RUN_PARAMS[name], optional=True) for name in _SPEC_KEYWORDS),
    *(RUN_PARAMS[name] for name in ("record_every", "record_positions", "progress")),
    Param(
        "pair_step", "choice", "Langevin's step of an unsoftened singular pair kernel "
        "(None: capped for such a kernel, explicit otherwise)", choices=PAIR_STEPS,
        optional=True,
    ),
    Param("check_start", "flag", "MALA: refuse a start with two particles too close"),
)  # fmt: skip
def simulate(
    spec,
    omega0=None,
    *,
    eta: float | None = None,
    beta: float | None = None,
    n_steps: int | None = None,
    regime: str | None = None,
    method: str | None = None,
    record_every: int | None = None,
    interaction_batch: int | None = None,
    data_batch: int | None = None,
    seed: int | None = None,
    record_positions: bool = True,
    progress: bool = False,
    extra_attrs: dict | None = None,
    pair_step: str | None = None,
    check_start: bool = True,
) -> xr.Dataset:
    """Run the particle dynamics of a run specification and return the trajectory as a
    labelled dataset.

    Two forms, the same run: ``simulate(spec)`` with a :class:`~meanfield.dynamics.spec.RunSpec`
    (keywords given, not None, replace its fields), or the keyword form
    ``simulate(energy, omega0, eta=..., beta=..., n_steps=..., ...)``, which builds the spec.

    Parameters
    ----------
    spec : RunSpec or Energy
        The run; or the energy, in the keyword form.
    omega0 : array (N, p) or (R, N, p), optional
        Keyword form: the initial particles, projected onto 𝒲; a leading axis runs R
        independent replicas (a :class:`~meanfield.pde.Density` is sampled, as a spec's
        initial law is).
    eta, beta : float
        Step size η > 0 and inverse temperature β > 0.
    n_steps : int
        Number of steps ≥ 1; the final time is η · n_steps.
    regime : {"mean-field", "coulomb-gas"}, default "mean-field"
    method : {"langevin", "mala"}, default "langevin"
    record_every : int, optional
        Record every this many steps (default: ~100 records) and always at the first and last.
    interaction_batch, data_batch : int, optional
        Random-batch size for the pair term, mini-batch size for the data (Langevin only).
    seed : int, default 0
        Seeds every random number of the run.
    record_positions, progress : bool
        Store every record's positions (else the last only, as ``omega_final``); a progress bar.
    extra_attrs : dict, optional
        More attributes for the dataset.
    pair_step : {"capped", "explicit"}, optional
        Langevin's step of an unsoftened singular pair kernel (:class:`ProjectedLangevin`;
        default ``"capped"`` for such a kernel, ``"explicit"`` otherwise).
    check_start : bool, default True
        MALA only: refuse a start with two particles closer than START_SPACING · N^(−1/p)
        under an unsoftened singular kernel
        (:func:`~meanfield.dynamics.chain_checks.check_start_spacing`). Pass False to
        continue a chain from its own samples: close pairs of a Gibbs sample are part of the
        law, not a bad start.

    Returns
    -------
    xarray.Dataset
        ``omega`` (time, [replica,] particle, dim), ``energy``, ``energy_<term>`` and, for
        MALA, ``acceptance_rate`` over the preceding record interval (time, [replica]);
        coordinate ``step``; attributes: every parameter, the seed and the package version.
        Projected Langevin with a singular pair kernel adds ``pair_step``,
        ``n_overshoot_steps`` (steps in which the drift used carried a particle, relative to
        its nearest neighbour, further than their distance) and ``n_capped_steps``.

    Raises
    ------
    meanfield.errors.InputError
        A bad argument (checked when the spec is made); (MALA) a start with infinite energy
        or force (:func:`check_finite_start`), or with two particles closer than
        START_SPACING · N^(−1/p) under an unsoftened singular kernel
        (:func:`~meanfield.dynamics.chain_checks.check_start_spacing`).

    Warns
    -----
    meanfield.errors.PinnedParticlesWarning
        Projected Langevin only: one noise step sqrt(2 η / β_N) spans the domain (before the
        run), or half the particles or more end on the boundary, pinned by the projection.
    meanfield.errors.OvershootWarning
        Projected Langevin with ``pair_step="explicit"`` and a singular pair kernel: the count
        of steps that overshot (the stationary law is then wrong).
    meanfield.errors.CoincidentParticlesWarning
        Projected Langevin recorded the energy +inf (coincident particles).
    meanfield.errors.LowAcceptanceWarning
        MALA only: some replica accepted under :data:`LOW_ACCEPTANCE` of its proposals.
    meanfield.errors.FrozenChainWarning
        MALA only: some replica's travel is below the spread of its particles
        (:func:`~meanfield.dynamics.chain_checks.frozen_chain_warning`).

    See Also
    --------
    meanfield.dynamics.hmc.sample_hmc : HMC for the exact Gibbs law of the same spec.
    meanfield.pde.equation.McKeanVlasov : the grid view, the N → ∞ limit of the same energy.
    meanfield.pde.stationary.gibbs_state : its stationary state ρ_β, which a long chain samples.
    meanfield.ot.distance.wasserstein : the transport view (a chain's particles against ρ_β).

    References
    ----------
    - J. A. Carrillo, R. J. McCann, C. Villani, "Kinetic equilibration rates for granular media
      and related equations", Rev. Mat. Iberoamericana 19 (2003) 971–1018.
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
      Mathematics, EMS, 2015.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.langevin import simulate
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))  # V(ω) = ω²/2 on [−2, 2]
    >>> ds = simulate(E, [[0.0]] * 5, eta=0.01, beta=1.0, n_steps=10, record_every=5)
    >>> dict(ds["omega"].sizes), ds["step"].values.tolist(), ds["time"].values.round(2).tolist()
    ({'time': 3, 'particle': 5, 'dim': 1}, [0, 5, 10], [0.0, 0.05, 0.1])
    >>> float(ds["energy"][0]), bool((ds["energy"] >= 0).all()), ds.attrs["method"]
    (0.0, True, 'langevin')

    The same run from a spec, and the spec with another seed:

    >>> from meanfield.dynamics.spec import RunSpec
    >>> spec = RunSpec(energy=E, initial=[[0.0]] * 5, eta=0.01, beta=1.0, n_steps=10)
    >>> bool((simulate(spec, record_every=5)["omega"] == ds["omega"]).all())
    True
    >>> simulate(spec, seed=1).attrs["seed"]
    1
    """
    spec = as_spec(
        spec,
        omega0,
        eta=eta,
        beta=beta,
        n_steps=n_steps,
        regime=regime,
        method=method,
        interaction_batch=interaction_batch,
        data_batch=data_batch,
        seed=seed,
    )
    return _simulate(
        spec, record_every, record_positions, progress, extra_attrs, pair_step, check_start
    )


def _simulate(
    spec: RunSpec, record_every, record_positions, progress, extra_attrs, pair_step,
    check_start=True,
):  # fmt: skip
    """:func:`simulate` of a checked spec.  Its warnings point at the caller of
    :func:`simulate`: their stack levels count this function, :func:`simulate` and the
    contract's checking wrapper (:func:`meanfield.contract.declare`)."""
    energy, n_steps, method = spec.energy, spec.n_steps, spec.method
    kw = dict(method=method, eta=spec.eta, beta=spec.beta, regime=spec.regime)
    integrator = make_integrator(
        energy,
        interaction_batch=spec.interaction_batch,
        data_batch=spec.data_batch,
        pair_step=pair_step,
        **kw,
    )
    omega0, record_every, seed = chain_setup(
        energy, spec.particles(), n_steps, record_every, spec.seed
    )
    if isinstance(integrator, MALA) and check_start:
        check_start_spacing(energy, energy.domain.project(omega0), method)
    # the attributes before any step: extra_attrs that would overwrite a parameter are refused
    params = _run_params(integrator, method, omega0.shape[-2], n_steps, record_every, extra_attrs)
    _warn_if_step_pins(integrator, omega0.shape[-2])
    recorder = _Recorder(energy, record_positions=record_positions, acceptance=method == "mala")
    start = integrator.init(omega0, seed=seed)
    state = recorder.run(integrator, start, n_steps, record_every, progress, "simulate")
    ds = recorder.dataset(
        state, time_per_step=integrator.eta, params=params, seed=seed, time_name="eta * step"
    )
    _warn_if_pinned(ds, integrator)
    if isinstance(integrator, ProjectedLangevin):
        _report_pair_step(ds, integrator, state)
    if isinstance(integrator, MALA):
        note = low_acceptance_warning(state, "eta", integrator.eta)
        if note:
            warnings.warn(note, LowAcceptanceWarning, stacklevel=4)
        note = frozen_chain_warning(state, "eta", integrator.eta)
        if note:
            warnings.warn(note, FrozenChainWarning, stacklevel=4)
    return ds


def _report_pair_step(ds: xr.Dataset, integrator: ProjectedLangevin, state) -> None:
    """After a projected-Langevin run: the pair step and its counts as attributes of ``ds``;
    an :class:`OvershootWarning` for an explicit step that overshot, a
    :class:`CoincidentParticlesWarning` for a recorded energy +inf."""
    if integrator._singular:
        n_over = int(state.cache.get("overshoot_steps", 0))
        ds.attrs.update(
            pair_step=integrator.pair_step,
            n_overshoot_steps=n_over,
            n_capped_steps=int(state.cache.get("capped_steps", 0)),
        )
        if integrator.pair_step == "explicit" and n_over > 0:
            warnings.warn(
                f"the explicit Langevin step overshot in {n_over} of {state.step} steps: the "
                "drift carried a particle, relative to its nearest neighbour, further than "
                f"their distance (the singular kernel {integrator._singular[0].kernel.name} "
                f"kicks like eta/r near a collision, eta = {integrator.eta:g}), so the law is "
                "wrong; use pair_step='capped' (the default), a smaller eta, a softening > 0, "
                "or method='mala' / sample_hmc",
                OvershootWarning,
                stacklevel=5,
            )
    energy = ds["energy"]
    if bool(np.isposinf(energy.values).any()):
        at_start = bool(np.isposinf(energy.isel({energy.dims[0]: 0}).values).any())
        cause = (
            "the start omega0 has coinciding particles (spread them apart)"
            if at_start
            else "pinned to the same boundary point by the projection: lower eta or enlarge "
            "the domain"
        )
        warnings.warn(
            "the run recorded the energy H_N = +inf: two particles coincide under an "
            f"unsoftened singular pair kernel; {cause}, or give the kernel a softening > 0",
            CoincidentParticlesWarning,
            stacklevel=5,
        )


def _warn_if_step_pins(integrator, N: int) -> None:
    """Before a projected-Langevin run of N particles: warn when one noise step spans the
    domain (``pinning_step_warning``).  MALA rejects the moves that leave it instead."""
    if not isinstance(integrator, ProjectedLangevin):
        return
    beta_N = effective_beta(integrator.beta, N, integrator.regime)
    note = pinning_step_warning(integrator.energy.domain, integrator.eta, integrator.beta, beta_N)
    if note:
        warnings.warn(note, PinnedParticlesWarning, stacklevel=5)


def _run_params(integrator, method: str, N: int, n_steps, record_every, extra_attrs) -> dict:
    """The attributes of a :func:`simulate` dataset: the run's parameters, then the energy's
    description, then ``extra_attrs`` (none of which may overwrite them,
    :func:`~meanfield.results.merge_attrs`)."""
    params = {
        "method": method,
        "regime": integrator.regime,
        "N": N,
        "p": integrator.energy.dim,
        "eta": integrator.eta,
        "beta": integrator.beta,
        "beta_N": effective_beta(integrator.beta, N, integrator.regime),
        "n_steps": n_steps,
        "record_every": record_every,
        "interaction_batch": getattr(integrator, "interaction_batch", None),
        "data_batch": getattr(integrator, "data_batch", None),
        **integrator.energy.describe(),
    }
    return merge_attrs(params, extra_attrs)


#: The public names of this module: its own, then those defined in :mod:`meanfield.dynamics.chains`
#: (the chain state and Metropolis machinery it shares with :mod:`meanfield.dynamics.hmc`) and
#: HMC from :mod:`meanfield.dynamics.hmc`, re-exported under their former addresses.
__all__ = [
    "METHODS",
    "MALA",
    "PAIR_STEPS",
    "ProjectedLangevin",
    "boundary_fraction",
    "make_integrator",
    "singular_pair_terms",
    "pinning_step_warning",
    "simulate",
    # from meanfield.dynamics.chains
    "LOW_ACCEPTANCE",
    "LOW_ACCEPTANCE_MIN_PROPOSALS",
    "REGIMES",
    "LangevinState",
    "accept_or_keep",
    "chain_setup",
    "check_finite_start",
    "effective_beta",
    "gibbs_potential",
    "initial_particles",
    "low_acceptance_warning",
    "metropolis",
    "metropolis_init",
    "new_stream",
    # from meanfield.dynamics.hmc
    "HMC",
    "sample_hmc",
]
