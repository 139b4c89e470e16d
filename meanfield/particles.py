"""Particle dynamics: projected Langevin (Algorithm 1) and a Metropolis-adjusted sampler.

Algorithm 1 (THEORY §3), for every particle at once:

    ω_i ← Π_𝒲( ω_i − η N ∇_{ω_i} H_N(Ω) + √(2η / β_N) ξ_i ),   ξ_i ~ N(0, I_p),

with β_N = β (``regime="mean-field"``, stationary law ∝ exp(−β N H_N)) or β_N = β N
(``regime="coulomb-gas"``, stationary law ∝ exp(−β N² H_N)).  Time is t = η · steps.

The integrators are small objects in the JAX-MD manner: ``init(Ω)`` gives a state and
``step(state, generator)`` returns the next one (:class:`LangevinState` is immutable: a step
never changes the state it is given); :func:`simulate` runs one and records an
``xarray.Dataset``.  Particles may carry leading replica axes, shape (..., N, p): replicas are
independent chains that share the step (how ensembles and Monte Carlo studies batch).

Random numbers come from a seeded CPU ``torch.Generator`` and are moved to the device, so a
seed fixes the noise on every device and the same seed gives the same bits on the CPU.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from ._validation import check_choice, check_int, check_positive
from .energy import Energy
from .errors import InputError, LowAcceptanceWarning, NumericalError, PinnedParticlesWarning
from .results import provenance

REGIMES = ("mean-field", "coulomb-gas")
METHODS = ("langevin", "mala")
#: A Metropolis chain whose acceptance rate over the run is below this warns
#: (:class:`~meanfield.errors.LowAcceptanceWarning`): a well-tuned MALA or HMC accepts
#: 50-90 %, so 1 % means a step far too large for the closest particles.
LOW_ACCEPTANCE = 0.01
#: ... once it has made at least this many proposals (fewer say too little).
LOW_ACCEPTANCE_MIN_PROPOSALS = 10


def effective_beta(beta: float, n_particles: int, regime: str) -> float:
    r"""β_N: β in the mean-field regime, β N in the Coulomb-gas regime.

    .. math::

        \beta_N = \begin{cases} \beta & \text{mean-field} \\
        \beta N & \text{Coulomb gas} \end{cases}

    Parameters
    ----------
    beta : float
        Inverse temperature β > 0.
    n_particles : int
        Number of particles N.
    regime : {"mean-field", "coulomb-gas"}

    Returns
    -------
    float

    Examples
    --------
    >>> from meanfield.particles import effective_beta
    >>> effective_beta(2.0, 10, "mean-field"), effective_beta(2.0, 10, "coulomb-gas")
    (2.0, 20.0)
    """
    check_choice("regime", regime, REGIMES)
    return beta if regime == "mean-field" else beta * n_particles


def _noise(shape, generator, like: torch.Tensor) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(like)


def _check_finite(x: torch.Tensor, what: str, step: int):
    if not torch.isfinite(x).all():
        raise NumericalError(
            f"{what} became non-finite at step {step}: lower the step size eta, soften the "
            "kernel (softening > 0) or check the data scale"
        )


def _frozen(cache: Mapping) -> Mapping:
    return MappingProxyType(dict(cache))


@dataclass(frozen=True)
class LangevinState:
    """The state of a chain, immutable: every step returns a new one (JAX-MD style).

    Parameters
    ----------
    omega : tensor (..., N, p)
        Particle positions (leading axes: independent replicas).
    step : int
        Steps taken since :meth:`init`.
    accepted : tensor (...), optional
        Metropolis samplers only: accepted moves per replica since the last reset.
    proposed : int
        Metropolis samplers only: proposals since the last reset.
    cache : mapping
        Read-only values carried between steps (U and ∇U for the Metropolis samplers);
        replaced, never mutated, through :meth:`evolve`.

    Examples
    --------
    >>> import torch
    >>> from meanfield.particles import LangevinState
    >>> s = LangevinState(torch.zeros(3, 1))
    >>> s2 = s.evolve(step=1, cache={"U": 0.0})
    >>> s.step, s2.step, dict(s2.cache), dict(s.cache)
    (0, 1, {'U': 0.0}, {})
    """

    omega: torch.Tensor
    step: int = 0
    accepted: torch.Tensor | None = None
    proposed: int = 0
    cache: Mapping = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self):
        if not isinstance(self.cache, MappingProxyType):
            object.__setattr__(self, "cache", _frozen(self.cache))

    def evolve(self, **changes) -> LangevinState:
        """A new state with ``changes``; ``cache`` entries given as a dict are merged into
        (a copy of) the current cache.

        Parameters
        ----------
        **changes
            New values of the fields (``omega``, ``step``, ``accepted``, ``proposed``,
            ``cache``).

        Returns
        -------
        LangevinState
            ``self`` is left as it was.

        Examples
        --------
        >>> import torch
        >>> from meanfield.particles import LangevinState
        >>> s = LangevinState(torch.zeros(2, 1), cache={"U": 1.0})
        >>> s2 = s.evolve(step=3, cache={"gradU": 0.0})
        >>> s2.step, sorted(s2.cache), s.step, sorted(s.cache)
        (3, ['U', 'gradU'], 0, ['U'])
        """
        if "cache" in changes:
            changes["cache"] = _frozen({**self.cache, **changes["cache"]})
        return replace(self, **changes)


def gibbs_potential(energy: Energy, omega: torch.Tensor, beta_N: float):
    r"""U = β_N N H_N(Ω), shape (...), and ∇U = β_N N ∇H_N, shape (..., N, p): the potential of
    the Gibbs law ∝ exp(−U) that the Metropolis samplers target (one pass over the pairs).

    .. math::

        U(\Omega) = \beta_N\, N\, H_N(\Omega), \qquad
        \nabla U(\Omega) = \beta_N\, N\, \nabla H_N(\Omega)

    Parameters
    ----------
    energy : Energy
    omega : tensor (..., N, p)
    beta_N : float
        The effective inverse temperature (:func:`effective_beta`).

    Returns
    -------
    U : tensor (...)
    gradU : tensor (..., N, p)

    Examples
    --------
    With V(ω) = ω²/2, Ω = (1, 0): H_N = (1/2 + 0)/2 = 1/4, so U = 2 · 2 · 1/4 = 1 and
    ∇U = 2 · 2 · Ω/N = (2, 0).

    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.particles import gibbs_potential
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> U, gradU = gibbs_potential(E, torch.tensor([[1.0], [0.0]], dtype=torch.float64), 2.0)
    >>> float(U), gradU.flatten().tolist()
    (1.0, [2.0, 0.0])
    """
    N = omega.shape[-2]
    H, gradH = energy.value_and_grad(omega)
    return beta_N * N * H, beta_N * N * gradH


def metropolis_init(energy: Energy, omega, beta: float, regime: str) -> LangevinState:
    """Initial state of a Metropolis sampler: Ω projected onto 𝒲, U and ∇U cached, no
    accepted moves yet (one counter per replica).

    Parameters
    ----------
    energy : Energy
    omega : array (..., N, p)
        Initial particles (projected onto the domain).
    beta : float
    regime : {"mean-field", "coulomb-gas"}

    Returns
    -------
    LangevinState

    Examples
    --------
    The particle at 3 is projected to the wall of the box [−2, 2]; then U = 1 · 2 · (4/2)/2 = 2.

    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.particles import metropolis_init
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> s = metropolis_init(E, [[3.0], [0.0]], 1.0, "mean-field")
    >>> s.omega.flatten().tolist(), float(s.cache["U"]), float(s.accepted)
    ([2.0, 0.0], 2.0, 0.0)
    """
    omega = energy.domain.project(energy.as_tensor(omega, name="omega0"))
    beta_N = effective_beta(beta, omega.shape[-2], regime)
    U, gradU = gibbs_potential(energy, omega, beta_N)
    check_finite_start(energy, omega, U, gradU)
    return LangevinState(
        omega=omega, accepted=torch.zeros(omega.shape[:-2]), cache={"U": U, "gradU": gradU}
    )


def check_finite_start(energy: Energy, omega: torch.Tensor, U, gradU) -> None:
    """Refuse a Metropolis start whose energy or force is not finite, before any step.

    From U(Ω₀) = +∞ the acceptance ratio e^(U₀ − U') is meaningless (∞ − ∞ once a proposal
    is also infinite), and HMC's step search then drives ε to ~1e7 and L to its cap with every
    trajectory rejected: the chain never moves, silently.  The usual cause is two coincident
    particles under an unsoftened singular kernel; the message names them.

    Parameters
    ----------
    energy : Energy
    omega : tensor (..., N, p)
        The projected start.
    U : tensor (...)
        β_N N H_N at ``omega``.
    gradU : tensor (..., N, p)

    Raises
    ------
    meanfield.errors.InputError
        Some replica's U or ∇U is NaN or infinite.

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, PairInteraction
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.particles import metropolis_init
    >>> E = Energy([PairInteraction(Riesz(0.0))], Box(1, 2.0))
    >>> metropolis_init(E, [[0.5], [0.0], [0.5]], 1.0, "mean-field")
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: omega0 must have a finite energy H_N and force for a Metropolis ...
    >>> try:
    ...     metropolis_init(E, [[0.5], [0.0], [0.5]], 1.0, "mean-field")
    ... except ValueError as err:
    ...     print(str(err).split(": ")[1].split(";")[0])
    particles 0 and 2 coincide under the unsoftened singular kernel riesz
    """
    bad = ~(torch.isfinite(U) & torch.isfinite(gradU).all(-1).all(-1))
    if not bool(bad.any()):
        return
    r = tuple(int(i) for i in bad.nonzero()[0])  # the first bad replica's index
    H = float(U[r]) if U.ndim else float(U)
    where = f" (replica {r[0] if len(r) == 1 else r})" if r else ""
    msg = (
        "omega0 must have a finite energy H_N and force for a Metropolis sampler, got "
        f"H_N = {H:g}{where}"
    )
    pair = _coincident_pair(omega[r] if r else omega)
    for term in energy.terms:
        kernel = getattr(term, "kernel", None)
        if pair and kernel is not None and kernel.is_singular:
            msg += (
                f": particles {pair[0]} and {pair[1]} coincide under the unsoftened singular "
                f"kernel {kernel.name}; move them apart or give the kernel a softening > 0"
            )
            break
    raise InputError(msg)


def _coincident_pair(omega: torch.Tensor) -> tuple[int, int] | None:
    """The first two indices of identical rows of ``omega`` (N, p), or None (a sort, O(N log N))."""
    _, inverse, counts = np.unique(
        omega.detach().cpu().numpy(), axis=0, return_inverse=True, return_counts=True
    )
    twins = np.flatnonzero(counts[inverse.ravel()] > 1)
    if twins.size == 0:
        return None
    first = twins[0]
    second = twins[1:][inverse.ravel()[twins[1:]] == inverse.ravel()[first]][0]
    return int(first), int(second)


def metropolis(log_alpha: torch.Tensor, generator: torch.Generator, valid=None) -> torch.Tensor:
    r"""Metropolis decisions, one per replica: accept with probability min(1, exp(log_alpha)).

    .. math::

        \text{accept} \iff \log u < \log\alpha, \qquad u \sim \mathcal U(0, 1)

    Parameters
    ----------
    log_alpha : tensor (...)
        Log acceptance ratio of each replica's proposal.
    generator : torch.Generator
        One uniform per replica is drawn from it (on the CPU, in float64, as all noise).
    valid : bool tensor (...), optional
        Proposals that may be accepted at all (e.g. inside the domain); the others are rejected.

    Returns
    -------
    bool tensor (...)

    Examples
    --------
    log α = 0 is always accepted, log α = −∞ never; an invalid proposal is rejected.

    >>> import torch
    >>> from meanfield.particles import metropolis
    >>> g = torch.Generator().manual_seed(0)
    >>> metropolis(torch.tensor([0.0, -float("inf")]), g).tolist()
    [True, False]
    >>> metropolis(torch.zeros(2), g, valid=torch.tensor([True, False])).tolist()
    [True, False]
    """
    u = torch.rand(log_alpha.shape, generator=generator, dtype=torch.float64).to(log_alpha)
    accept = torch.log(u) < log_alpha
    return accept if valid is None else accept & valid


def accept_or_keep(state: LangevinState, accept, omega, U, gradU) -> LangevinState:
    """The state after one Metropolis decision: accepted replicas at the proposal (Ω', U',
    ∇U'), rejected ones where they were; the step and the acceptances counted.

    ``accept`` has shape (...) (one decision per replica); Ω', ∇U' have shape (..., N, p) and U'
    shape (...).  ``state`` is left as it was: a new state is returned.

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.particles import accept_or_keep, metropolis_init
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> s = metropolis_init(E, torch.zeros(2, 3, 1), 1.0, "mean-field")  # 2 replicas
    >>> ones = torch.ones(2, 3, 1, dtype=torch.float64)
    >>> new = accept_or_keep(s, torch.tensor([True, False]), ones, torch.ones(2), ones)
    >>> new.omega[:, 0, 0].tolist(), new.accepted.tolist(), new.proposed, new.step, s.step
    ([1.0, 0.0], [1.0, 0.0], 1, 1, 0)
    """
    a = accept[..., None, None]
    return state.evolve(
        omega=torch.where(a, omega, state.omega),
        cache={
            "U": torch.where(accept, U, state.cache["U"]),
            "gradU": torch.where(a, gradU, state.cache["gradU"]),
        },
        accepted=state.accepted + accept.to(state.accepted.dtype).cpu(),
        proposed=state.proposed + 1,
        step=state.step + 1,
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

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.particles import ProjectedLangevin
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> lang = ProjectedLangevin(E, eta=0.01, beta=1.0)
    >>> s = lang.step(lang.init(torch.zeros(4, 1)), torch.Generator().manual_seed(0))
    >>> s.step, tuple(s.omega.shape), bool((s.omega.abs() <= 2).all())
    (1, (4, 1), True)
    """

    energy: Energy
    eta: float
    beta: float
    regime: str = "mean-field"
    interaction_batch: int | None = None
    data_batch: int | None = None

    def __post_init__(self):
        self.eta = check_positive("eta (step size)", self.eta)
        self.beta = check_positive("beta (inverse temperature)", self.beta)
        check_choice("regime", self.regime, REGIMES)
        if self.interaction_batch is not None:
            self.interaction_batch = check_int(
                "interaction_batch (B)", self.interaction_batch, minimum=2
            )
        if self.data_batch is not None:
            self.data_batch = check_int("data_batch", self.data_batch, minimum=2)
            n = self.energy.n_data()
            if n is None:
                raise ValueError("data_batch needs an energy with an alignment (data) term")
            if self.data_batch > n:
                raise ValueError(f"data_batch must be in [2, n={n}], got {self.data_batch}")

    def init(self, omega) -> LangevinState:
        """The state at step 0: ``omega`` (..., N, p) as a tensor of the energy's dtype,
        projected onto 𝒲.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.particles import ProjectedLangevin
        >>> lang = ProjectedLangevin(Energy([QuadraticPotential()], Box(1, 2.0)), 0.01, 1.0)
        >>> s = lang.init([[3.0], [0.5]])  # 3 lies outside [−2, 2]
        >>> s.omega.flatten().tolist(), s.step
        ([2.0, 0.5], 0)
        """
        omega = self.energy.domain.project(self.energy.as_tensor(omega, name="omega0"))
        return LangevinState(omega=omega)

    def step(self, state: LangevinState, generator: torch.Generator) -> LangevinState:
        """One step of Algorithm 1 from ``state``, returned as a new state.

        Parameters
        ----------
        state : LangevinState
            Left as it was.
        generator : torch.Generator
            Draws the noise ξ and, when set, the random pair batches and the data rows.

        Returns
        -------
        LangevinState
            Ω moved and projected onto 𝒲, ``step`` + 1.

        Raises
        ------
        meanfield.errors.NumericalError
            The drift N∇H_N is not finite.

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.particles import ProjectedLangevin
        >>> lang = ProjectedLangevin(Energy([QuadraticPotential()], Box(1, 2.0)), 0.01, 1.0)
        >>> s0 = lang.init(torch.zeros(3, 1))
        >>> s1 = lang.step(s0, torch.Generator().manual_seed(0))
        >>> s0.step, s1.step, bool((s1.omega != 0).all()), bool((s0.omega == 0).all())
        (0, 1, True, True)
        """
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
        noise = _noise(omega.shape, generator, omega)
        new = omega - self.eta * drift + np.sqrt(2 * self.eta / beta_N) * noise
        return state.evolve(omega=self.energy.domain.project(new), step=state.step + 1)


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

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.particles import MALA
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> mala = MALA(E, eta=0.01, beta=1.0)
    >>> s = mala.step(mala.init(torch.zeros(4, 1)), torch.Generator().manual_seed(0))
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

    def _potential(self, omega, beta_N):
        return gibbs_potential(self.energy, omega, beta_N)

    def init(self, omega) -> LangevinState:
        """The state at step 0 (:func:`metropolis_init`): Ω projected onto 𝒲, U and ∇U cached,
        no acceptances yet.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.particles import MALA
        >>> mala = MALA(Energy([QuadraticPotential()], Box(1, 2.0)), eta=0.01, beta=1.0)
        >>> s = mala.init([[3.0], [0.0]])  # U = β N H_N = 2 · (4/2 + 0)/2
        >>> s.omega.flatten().tolist(), float(s.cache["U"]), s.proposed
        ([2.0, 0.0], 2.0, 0)
        """
        return metropolis_init(self.energy, omega, self.beta, self.regime)

    def step(self, state: LangevinState, generator: torch.Generator) -> LangevinState:
        """One MALA proposal and Metropolis decision per replica, returned as a new state.

        Parameters
        ----------
        state : LangevinState
            As :meth:`init` gives it (U and ∇U cached); left as it was.
        generator : torch.Generator
            Draws the proposal noise and the uniforms of the decisions.

        Returns
        -------
        LangevinState
            Accepted replicas at the proposal, the others where they were; ``step``,
            ``proposed`` and the replicas' ``accepted`` counted.

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
        >>> from meanfield.particles import MALA
        >>> mala = MALA(Energy([QuadraticPotential()], Box(1, 2.0)), eta=1e-4, beta=1.0)
        >>> s = mala.init(torch.zeros(5, 4, 1))  # 5 replicas
        >>> g = torch.Generator().manual_seed(0)
        >>> for _ in range(10):
        ...     s = mala.step(s, g)
        >>> s.step, s.proposed, s.accepted.tolist()
        (10, 10, [10.0, 10.0, 10.0, 10.0, 10.0])
        """
        omega, U, gradU = state.omega, state.cache["U"], state.cache["gradU"]
        beta_N = effective_beta(self.beta, omega.shape[-2], self.regime)
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
        return accept_or_keep(state, accept, prop, U2, gradU2)


def initial_particles(energy: Energy, omega0) -> torch.Tensor:
    """``omega0`` as a tensor of the energy's dtype, checked: shape (N, p) or (R, N, p), N ≥ 1,
    finite.  Raises before any work with the allowed shapes in the message.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.particles import initial_particles
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> x = initial_particles(E, [[0.5], [1.0]])
    >>> tuple(x.shape), x.dtype
    ((2, 1), torch.float64)
    >>> initial_particles(E, [[[[0.5]]]])
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: omega0 must have shape (N, p) or (R, N, p), got (1, 1, 1, 1)
    """
    omega0 = energy.as_tensor(omega0, name="omega0")
    if omega0.ndim not in (2, 3):
        raise InputError(f"omega0 must have shape (N, p) or (R, N, p), got {tuple(omega0.shape)}")
    N = omega0.shape[-2]
    if N < 1:
        raise InputError(f"N (number of particles, omega0.shape[-2]) must be >= 1, got {N}")
    if not torch.isfinite(omega0).all():
        raise InputError("omega0 contains non-finite values (NaN or inf); all must be finite")
    return omega0


def chain_setup(energy: Energy, omega0, n_steps: int, record_every, seed):
    """What every chain runner needs first: the checked initial particles, the recording stride
    (default: about 100 records over ``n_steps``) and a CPU generator seeded with ``seed``.

    Returns
    -------
    omega0 : tensor (N, p) or (R, N, p)
    record_every : int
    seed : int
    generator : torch.Generator

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.particles import chain_setup
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> omega0, record_every, seed, gen = chain_setup(E, [[0.5]], 1000, None, 3)
    >>> record_every, seed, gen.initial_seed()
    (10, 3, 3)
    """
    omega0 = initial_particles(energy, omega0)
    if record_every is None:
        record_every = max(1, n_steps // 100)
    record_every = check_int("record_every", record_every)
    seed = int(seed)
    return omega0, record_every, seed, torch.Generator().manual_seed(seed)


class _Recorder:
    """Snapshots of a chain (positions, energy terms, acceptance) and the dataset they make.

    Every sampler records through this class, so their datasets share one layout: ``omega``
    (time, [replica,] particle, dim), ``energy`` and ``energy_<term>`` (time, [replica]),
    ``acceptance_rate`` (time, [replica]) for Metropolis samplers, coordinate ``step``.
    """

    def __init__(self, energy: Energy, *, record_positions: bool, acceptance: bool):
        self.energy, self.record_positions, self.acceptance = energy, record_positions, acceptance
        self.steps, self.positions, self.energies, self.rates = [], [], {}, []
        self._last = None  # (step, accepted) at the previous record

    def record(self, state: LangevinState):
        self.steps.append(state.step)
        if self.record_positions:
            self.positions.append(state.omega.detach().cpu().numpy().copy())
        for k, v in self.energy.term_values(state.omega).items():
            self.energies.setdefault(k, []).append(v.detach().cpu().numpy().copy())
        if self.acceptance:
            # the acceptance rate over the preceding record interval; 0 at the first record
            if self._last is None:
                rate = state.accepted * 0
            else:
                step0, acc0 = self._last
                rate = (state.accepted - acc0) / max(1, state.step - step0)
            self.rates.append(rate.numpy().copy())
            self._last = (state.step, state.accepted.clone())

    def run(self, integrator, state, generator, n_steps, record_every, progress, desc):
        """Record ``state``, then advance it ``n_steps`` times recording every ``record_every``
        steps and at the last one; returns the final state."""
        self.record(state)
        with torch.no_grad():
            for k in tqdm(range(1, n_steps + 1), disable=not progress, desc=desc, unit="step"):
                state = integrator.step(state, generator)
                if k % record_every == 0 or k == n_steps:
                    self.record(state)
        return state

    def dataset(self, state, *, time_per_step, params, seed, time_name) -> xr.Dataset:
        """The records as an ``xarray.Dataset`` with time = ``time_per_step`` · step and
        ``params``, the seed and the package version in its attributes."""
        omega = state.omega
        replica = ("replica",) if omega.ndim == 3 else ()
        data_vars = {}
        if self.record_positions:
            data_vars["omega"] = (("time", *replica, "particle", "dim"), np.stack(self.positions))
        else:
            data_vars["omega_final"] = (
                (*replica, "particle", "dim"),
                omega.detach().cpu().numpy(),
            )
        total = sum(np.stack(v) for v in self.energies.values())
        data_vars["energy"] = (("time", *replica), total)
        for k, v in self.energies.items():
            data_vars[f"energy_{k}"] = (("time", *replica), np.stack(v))
        if self.acceptance:
            data_vars["acceptance_rate"] = (("time", *replica), np.stack(self.rates))
        coords = {
            "time": np.asarray(self.steps) * time_per_step,
            "step": ("time", np.asarray(self.steps)),
            "particle": np.arange(omega.shape[-2]),
            "dim": np.arange(self.energy.dim),
        }
        if replica:
            coords["replica"] = np.arange(omega.shape[0])
        ds = xr.Dataset(data_vars, coords=coords, attrs=provenance(params, seed=seed))
        ds["time"].attrs["long_name"] = f"time t = {time_name}"
        ds["energy"].attrs["long_name"] = "H_N(Omega)"
        return ds


def make_integrator(
    energy: Energy,
    *,
    method: str = "langevin",
    eta: float,
    beta: float,
    regime: str = "mean-field",
    interaction_batch: int | None = None,
    data_batch: int | None = None,
):
    """Build :class:`ProjectedLangevin` or :class:`MALA` from plain parameters.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.particles import make_integrator
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> type(make_integrator(E, eta=0.1, beta=1.0)).__name__
    'ProjectedLangevin'
    >>> type(make_integrator(E, method="mala", eta=0.1, beta=1.0)).__name__
    'MALA'
    """
    check_choice("method", method, METHODS)
    if method == "mala":
        if interaction_batch is not None or data_batch is not None:
            raise ValueError(
                "method 'mala' samples the exact Gibbs law: it takes neither "
                "interaction_batch nor data_batch"
            )
        return MALA(energy, eta, beta, regime)
    return ProjectedLangevin(energy, eta, beta, regime, interaction_batch, data_batch)


def boundary_fraction(omega, domain) -> float:
    """Fraction of the points ``omega`` (..., N, p) on the boundary of ``domain`` (a box or a
    ball, to a relative 1e-9): particles the projection has pinned there.

    Examples
    --------
    >>> from meanfield.domains import Ball, Box
    >>> from meanfield.particles import boundary_fraction
    >>> boundary_fraction([[2.0], [0.0], [-2.0], [1.0]], Box(1, 2.0))
    0.5
    >>> boundary_fraction([[0.6, 0.8], [0.0, 0.0]], Ball(2, 1.0))
    0.5
    """
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

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.particles import pinning_step_warning
    >>> pinning_step_warning(Box(1, 2.0), 0.01, 1.0, 1.0) is None
    True
    >>> pinning_step_warning(Box(1, 1.0), 8.0, 1.0, 1.0)
    'one noise step sqrt(2 eta / beta_N) = 4 is wider than the domain (2R = 2): ...'
    """
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
            stacklevel=3,
        )


def simulate(
    energy: Energy,
    omega0,
    *,
    eta: float,
    beta: float,
    n_steps: int,
    regime: str = "mean-field",
    method: str = "langevin",
    record_every: int | None = None,
    interaction_batch: int | None = None,
    data_batch: int | None = None,
    seed: int = 0,
    record_positions: bool = True,
    progress: bool = False,
    extra_attrs: dict | None = None,
) -> xr.Dataset:
    """Run the particle dynamics and return the trajectory as a labelled dataset.

    Parameters
    ----------
    energy : Energy
    omega0 : array (N, p) or (R, N, p)
        Initial particles, projected onto 𝒲; a leading axis runs R independent replicas.
    eta, beta : float
        Step size η > 0 and inverse temperature β > 0.
    n_steps : int
        Number of steps ≥ 1; the final time is η · n_steps.
    regime : {"mean-field", "coulomb-gas"}
    method : {"langevin", "mala"}
    record_every : int, optional
        Record every this many steps (default: ~100 records) and always at the first and last.
    interaction_batch, data_batch : int, optional
        Random-batch size for the pair term, mini-batch size for the data (Langevin only).
    seed : int
        Seeds every random number of the run.
    record_positions, progress : bool
        Store every record's positions (else the last only, as ``omega_final``); a progress bar.
    extra_attrs : dict, optional
        More attributes for the dataset.

    Returns
    -------
    xarray.Dataset
        ``omega`` (time, [replica,] particle, dim), ``energy``, ``energy_<term>`` and, for
        MALA, ``acceptance_rate`` over the preceding record interval (time, [replica]);
        coordinate ``step``; attributes: every parameter, the seed and the package version.

    Raises
    ------
    meanfield.errors.InputError
        A bad argument, or (MALA) a start with infinite energy or force
        (:func:`check_finite_start`).

    Warns
    -----
    meanfield.errors.PinnedParticlesWarning
        Projected Langevin only: one noise step sqrt(2 η / β_N) spans the domain (before the
        run), or half the particles or more end on the boundary, pinned by the projection.
    meanfield.errors.LowAcceptanceWarning
        MALA only: some replica accepted under :data:`LOW_ACCEPTANCE` of its proposals.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.particles import simulate
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))  # V(ω) = ω²/2 on [−2, 2]
    >>> ds = simulate(E, [[0.0]] * 5, eta=0.01, beta=1.0, n_steps=10, record_every=5)
    >>> dict(ds["omega"].sizes), ds["step"].values.tolist(), ds["time"].values.round(2).tolist()
    ({'time': 3, 'particle': 5, 'dim': 1}, [0, 5, 10], [0.0, 0.05, 0.1])
    >>> float(ds["energy"][0]), bool((ds["energy"] >= 0).all()), ds.attrs["method"]
    (0.0, True, 'langevin')
    """
    n_steps = check_int("n_steps", n_steps)
    kw = dict(method=method, eta=eta, beta=beta, regime=regime, interaction_batch=interaction_batch)
    integrator = make_integrator(energy, data_batch=data_batch, **kw)
    omega0, record_every, seed, generator = chain_setup(energy, omega0, n_steps, record_every, seed)
    _warn_if_step_pins(integrator, omega0.shape[-2])
    recorder = _Recorder(energy, record_positions=record_positions, acceptance=method == "mala")
    start = integrator.init(omega0)
    state = recorder.run(integrator, start, generator, n_steps, record_every, progress, "simulate")
    params = _run_params(integrator, method, omega0.shape[-2], n_steps, record_every, extra_attrs)
    ds = recorder.dataset(
        state, time_per_step=integrator.eta, params=params, seed=seed, time_name="eta * step"
    )
    _warn_if_pinned(ds, integrator)
    if isinstance(integrator, MALA):
        note = low_acceptance_warning(state, "eta", integrator.eta)
        if note:
            warnings.warn(note, LowAcceptanceWarning, stacklevel=2)
    return ds


def low_acceptance_warning(state: LangevinState, step_name: str, step: float) -> str | None:
    """The warning after a Metropolis run whose acceptance rate over the run (the worst
    replica's) is below :data:`LOW_ACCEPTANCE` after at least
    :data:`LOW_ACCEPTANCE_MIN_PROPOSALS` proposals; else None.

    Parameters
    ----------
    state : LangevinState
        The chain's last state (``accepted`` per replica, ``proposed``).
    step_name : str
        The step parameter to lower ("eta", "step_size").
    step : float
        Its value.

    Returns
    -------
    str or None

    Examples
    --------
    >>> import torch
    >>> from meanfield.particles import LangevinState, low_acceptance_warning
    >>> s = LangevinState(torch.zeros(3, 1), accepted=torch.tensor(0.0), proposed=5000)
    >>> low_acceptance_warning(s, "eta", 0.001)[:48]
    'the chain accepted 0 of 5000 proposals (0.000 < '
    >>> low_acceptance_warning(s.evolve(accepted=torch.tensor(2500.0)), "eta", 0.001) is None
    True
    """
    if state.accepted is None or state.proposed < LOW_ACCEPTANCE_MIN_PROPOSALS:
        return None
    worst = float(state.accepted.min())
    rate = worst / state.proposed
    if rate >= LOW_ACCEPTANCE:
        return None
    which = " (worst replica)" if state.accepted.ndim else ""
    return (
        f"the chain accepted {worst:.0f} of {state.proposed} proposals{which} ({rate:.3f} < "
        f"{LOW_ACCEPTANCE:g}): it barely moved from its start, so its records are not samples; "
        f"lower {step_name} (now {step:g}), or start from separated particles if two are "
        "nearly coincident under a singular kernel"
    )


def _warn_if_step_pins(integrator, N: int) -> None:
    """Before a projected-Langevin run of N particles: warn when one noise step spans the
    domain (``pinning_step_warning``).  MALA rejects the moves that leave it instead."""
    if not isinstance(integrator, ProjectedLangevin):
        return
    beta_N = effective_beta(integrator.beta, N, integrator.regime)
    note = pinning_step_warning(integrator.energy.domain, integrator.eta, integrator.beta, beta_N)
    if note:
        warnings.warn(note, PinnedParticlesWarning, stacklevel=3)


def _run_params(integrator, method: str, N: int, n_steps, record_every, extra_attrs) -> dict:
    """The attributes of a :func:`simulate` dataset: the run's parameters, then the energy's
    description, then ``extra_attrs``."""
    return {
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
        **(extra_attrs or {}),
    }


def __getattr__(name):
    # HMC lives in meanfield.samplers, which builds on this module; re-exported here beside
    # MALA, lazily, so that importing either module first works
    if name in ("HMC", "sample_hmc"):
        from . import samplers

        return getattr(samplers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
