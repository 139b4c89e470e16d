"""The chain machinery shared by every sampler: state, Metropolis step, set-up and records.

:mod:`meanfield.dynamics.langevin` (projected Langevin, MALA) and :mod:`meanfield.dynamics.hmc`
(HMC) both build on this module and neither imports the other's internals, so the import graph has
no cycle: ``chains`` <- ``hmc`` <- ``langevin`` (which re-exports HMC beside MALA, and every
name below, ``meanfield.dynamics.langevin.<name>``).

* :class:`LangevinState`, the immutable state of a chain (JAX-MD style), its random stream
  included (:func:`new_stream`), so that a state alone fixes the rest of the chain;
* :func:`effective_beta` (β_N of the two temperature regimes, THEORY §3) and
  :func:`gibbs_potential`, U = β_N N H_N of the Gibbs law the Metropolis samplers target;
* :func:`metropolis_init`, :func:`check_finite_start`, :func:`metropolis` (with its rule
  :func:`metropolis_decision`) and :func:`accept_or_keep`: a Metropolis chain's start,
  decision and update;
* :func:`initial_particles` and :func:`chain_setup`: what every chain runner checks first;
* the records every sampler writes (one dataset layout), and :func:`low_acceptance_warning`
  with its thresholds :data:`LOW_ACCEPTANCE` and :data:`LOW_ACCEPTANCE_MIN_PROPOSALS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from .._validation import check_choice, check_int
from ..energy import Energy
from ..errors import InputError
from ..results import provenance

#: The temperature regimes of :func:`effective_beta`.
REGIMES = ("mean-field", "coulomb-gas")
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

    See Also
    --------
    gibbs_potential : the potential U = β_N N H_N it scales.
    meanfield.dynamics.spec.RunSpec : where β and the regime are given.
    meanfield.pde.stationary.gibbs_state : ρ_β, the mean-field limit at fixed β.
    meanfield.pde.stationary.equilibrium_measure : μ*, the Coulomb-gas limit (β N → ∞).

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
      Mathematics, EMS, 2015 (the temperature scalings β and β N).

    Examples
    --------
    >>> from meanfield.dynamics.chains import effective_beta
    >>> effective_beta(2.0, 10, "mean-field"), effective_beta(2.0, 10, "coulomb-gas")
    (2.0, 20.0)
    """
    check_choice("regime", regime, REGIMES)
    return beta if regime == "mean-field" else beta * n_particles


#: Steps a chain runner asks of an integrator with an ``advance`` method at a time (HMC: the
#: trajectories of one compiled call, so the per-call cost is shared; the records are the same).
RECORD_BLOCK = 32


def _numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a NumPy array (detached, on the CPU; may share memory)."""
    return t.detach().cpu().numpy()


def _noise(shape, generator, like: torch.Tensor) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(like)


#: The cached values of a chain state that are functions of its positions (U = β_N N H_N, ∇U,
#: each term's value): :meth:`LangevinState.evolve` drops them when the positions change.
POSITION_CACHE = ("U", "gradU", "term_values")


def _frozen(cache: Mapping) -> Mapping:
    return MappingProxyType(dict(cache))


def new_stream(seed: int) -> torch.Tensor:
    """The random stream of a chain started with ``seed``: the state of a CPU
    ``torch.Generator`` seeded with it (a uint8 tensor, as ``Generator.get_state`` gives).

    Every chain draws its noise on the CPU in float64 and moves it to the device, so a seed
    fixes the noise on every device.

    Raises
    ------
    meanfield.errors.InputTypeError
        ``seed`` is not an integer (a float such as 1.5 or 1.0, a bool, a string).
    meanfield.errors.InputError
        ``seed`` is outside [0, :data:`SEED_MAX`].

    See Also
    --------
    check_seed : the seed it accepts.
    LangevinState : the state that carries the stream.
    metropolis : a draw from the stream.

    Examples
    --------
    >>> import torch
    >>> from meanfield.dynamics.chains import new_stream
    >>> g = torch.Generator().set_state(new_stream(3))
    >>> seeded = torch.Generator().manual_seed(3)
    >>> torch.equal(torch.rand(2, generator=g), torch.rand(2, generator=seeded))
    True

    A seed that is not an integer in [0, 2⁶³ − 1] is refused, not rounded:

    >>> new_stream(1.5)
    Traceback (most recent call last):
    ...
    meanfield.errors.InputTypeError: seed must be an integer >= 0, got 1.5
    """
    return torch.Generator().manual_seed(check_seed(seed)).get_state()


#: The largest seed a chain accepts, 2⁶³ − 1: torch and NumPy both take it, and it is stored
#: as a dataset attribute (a signed 64-bit integer in netCDF).
SEED_MAX = 2**63 - 1


def check_seed(seed) -> int:
    """``seed`` as an int if it is an integer in [0, :data:`SEED_MAX`] (bool and floats are
    refused, not rounded).

    Raises
    ------
    meanfield.errors.InputTypeError
        Not an integer.
    meanfield.errors.InputError
        Negative or above :data:`SEED_MAX`.

    See Also
    --------
    new_stream : the random stream started from the seed.
    chain_setup : where a runner checks its seed.
    meanfield.dynamics.spec.RunSpec : the seed of a run specification.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.dynamics.chains import check_seed
    >>> check_seed(np.int64(7))
    7
    >>> check_seed(2**64)
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: seed must be an integer in [0, 9223372036854775807], got 1844...
    """
    seed = check_int("seed", seed, minimum=0)
    if seed > SEED_MAX:
        raise InputError(f"seed must be an integer in [0, {SEED_MAX}], got {seed}")
    return seed


@dataclass(frozen=True)
class LangevinState:
    """The state of a chain, immutable: every step returns a new one (JAX-MD style).

    The state carries the chain's random stream (``rng``), as JAX-MD's carries its key: a step
    draws from it and returns the advanced stream in the new state, so a state alone fixes the
    rest of the chain, and a saved state (``copy.deepcopy``, ``pickle``, ``torch.save``; read
    back with ``torch.load(..., weights_only=False)``) resumes it bit for bit.

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
        Read-only values carried between steps (U and ∇U for the Metropolis samplers; HMC
        adds ``term_values``, each term's value (..., n_terms) in the order of
        ``Energy.term_names``, which the records then read instead of recomputing them);
        replaced, never mutated, through :meth:`evolve`.
    rng : uint8 tensor, optional
        The random stream: the state of a CPU ``torch.Generator`` (:func:`new_stream`; an
        integrator's ``init(omega, seed)`` sets it), read by :meth:`generator`.  None: a state
        made by hand, which an integrator refuses to step until it is given one.

    See Also
    --------
    metropolis_init : the initial state of a Metropolis sampler.
    accept_or_keep : the state after a Metropolis decision.
    meanfield.dynamics.langevin.ProjectedLangevin : an integrator stepping it.
    meanfield.dynamics.hmc.HMC : an integrator stepping it.

    References
    ----------
    - S. S. Schoenholz, E. D. Cubuk, "JAX M.D.: a framework for differentiable physics", NeurIPS
      2020 (the immutable state with its random key).

    Examples
    --------
    >>> import torch
    >>> from meanfield.dynamics.chains import LangevinState
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
    rng: torch.Tensor | None = None

    def __post_init__(self):
        if not isinstance(self.cache, MappingProxyType):
            object.__setattr__(self, "cache", _frozen(self.cache))

    def __reduce__(self):
        # a mappingproxy does not pickle: the cache travels as a dict, frozen again on load
        fields = (self.omega, self.step, self.accepted, self.proposed, dict(self.cache), self.rng)
        return type(self), fields

    def generator(self) -> torch.Generator:
        """A new CPU ``torch.Generator`` at this state's random stream (the state is left as
        it was: drawing from the generator does not advance ``rng``).

        Returns
        -------
        torch.Generator

        Raises
        ------
        meanfield.errors.InputError
            The state carries no stream (``rng`` is None).

        Examples
        --------
        >>> import torch
        >>> from meanfield.dynamics.chains import LangevinState, new_stream
        >>> s = LangevinState(torch.zeros(3, 1), rng=new_stream(0))
        >>> a, b = torch.rand(2, generator=s.generator()), torch.rand(2, generator=s.generator())
        >>> torch.equal(a, b)  # the same stream twice: the state did not move
        True
        """
        if self.rng is None:
            raise InputError(
                "this chain state carries no random stream (rng is None): make it with the "
                "integrator's init(omega, seed=...), or give it one, "
                "state.evolve(rng=new_stream(seed))"
            )
        generator = torch.Generator()
        generator.set_state(self.rng)
        return generator

    def evolve(self, **changes) -> LangevinState:
        """A new state with ``changes``; ``cache`` entries given as a dict are merged into
        (a copy of) the current cache.

        Parameters
        ----------
        **changes
            New values of the fields (``omega``, ``step``, ``accepted``, ``proposed``,
            ``cache``, ``rng``).

        Returns
        -------
        LangevinState
            ``self`` is left as it was.  New positions ``omega`` drop the cached values that
            depend on them (:data:`POSITION_CACHE`: U, ∇U, the term values) unless the same
            call gives them anew, so no sampler steps from a stale energy.

        Examples
        --------
        >>> import torch
        >>> from meanfield.dynamics.chains import LangevinState
        >>> s = LangevinState(torch.zeros(2, 1), cache={"U": 1.0})
        >>> s2 = s.evolve(step=3, cache={"gradU": 0.0})
        >>> s2.step, sorted(s2.cache), s.step, sorted(s.cache)
        (3, ['U', 'gradU'], 0, ['U'])
        >>> sorted(s2.evolve(omega=torch.ones(2, 1)).cache)  # U, ∇U of the old positions
        []
        """
        cache = dict(self.cache)
        if "omega" in changes:
            for key in POSITION_CACHE:
                cache.pop(key, None)
        changes["cache"] = _frozen({**cache, **changes.get("cache", {})})
        return replace(self, **changes)


def gibbs_potential(energy: Energy, omega: torch.Tensor, beta_N: float, *, terms: bool = False):
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
    terms : bool
        Also return each term's value H_N^k (the terms of ``energy.term_names``), from the
        same pass.

    Returns
    -------
    U : tensor (...)
    gradU : tensor (..., N, p)
    term_values : tensor (..., n_terms)
        Only with ``terms=True``: the values H_N^k (not scaled), summing to H_N.

    See Also
    --------
    effective_beta : β_N.
    meanfield.energy.Energy : H_N, the energy it scales.
    meanfield.dynamics.langevin.MALA : a sampler of exp(−U).
    meanfield.dynamics.hmc.HMC : a sampler of exp(−U).
    meanfield.pde.stationary.gibbs_state : the N → ∞ limit of the law, on a grid.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
      Mathematics, EMS, 2015.

    Examples
    --------
    With V(ω) = ω²/2, Ω = (1, 0): H_N = (1/2 + 0)/2 = 1/4, so U = 2 · 2 · 1/4 = 1 and
    ∇U = 2 · 2 · Ω/N = (2, 0).

    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.chains import gibbs_potential
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> U, gradU = gibbs_potential(E, torch.tensor([[1.0], [0.0]], dtype=torch.float64), 2.0)
    >>> float(U), gradU.flatten().tolist()
    (1.0, [2.0, 0.0])
    >>> gibbs_potential(E, torch.tensor([[1.0], [0.0]], dtype=torch.float64), 2.0, terms=True)[2]
    tensor([0.2500], dtype=torch.float64)
    """
    N = omega.shape[-2]
    values, gradH = energy.term_values_and_grad(omega)
    U, gradU = beta_N * N * sum(values.values()), beta_N * N * gradH
    if terms:
        return U, gradU, torch.stack(list(values.values()), -1)
    return U, gradU


def metropolis_init(
    energy: Energy, omega, beta: float, regime: str, *, seed: int = 0
) -> LangevinState:
    """Initial state of a Metropolis sampler: Ω projected onto 𝒲, U and ∇U cached, no
    accepted moves yet (one counter per replica), the random stream started from ``seed``.

    Parameters
    ----------
    energy : Energy
    omega : array (..., N, p)
        Initial particles (projected onto the domain).
    beta : float
    regime : {"mean-field", "coulomb-gas"}
    seed : int, default 0
        Starts the chain's random stream (:func:`new_stream`).

    Returns
    -------
    LangevinState

    See Also
    --------
    LangevinState : the state it returns.
    start_positions : the checked, projected start.
    gibbs_potential : U and ∇U it caches.
    check_finite_start : the check it makes before any step.

    Examples
    --------
    The particle at 3 is projected to the wall of the box [−2, 2]; then U = 1 · 2 · (4/2)/2 = 2.

    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.chains import metropolis_init
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> s = metropolis_init(E, [[3.0], [0.0]], 1.0, "mean-field")
    >>> s.omega.flatten().tolist(), float(s.cache["U"]), float(s.accepted)
    ([2.0, 0.0], 2.0, 0.0)
    """
    omega = start_positions(energy, omega)
    rng = new_stream(seed)
    beta_N = effective_beta(beta, omega.shape[-2], regime)
    U, gradU = gibbs_potential(energy, omega, beta_N)
    check_finite_start(energy, omega, U, gradU)
    return LangevinState(
        omega=omega,
        accepted=torch.zeros(omega.shape[:-2]),
        cache={"U": U, "gradU": gradU, "travel": torch.zeros(omega.shape[:-2])},
        rng=rng,
    )


def start_positions(energy: Energy, omega) -> torch.Tensor:
    """The positions an integrator's ``init`` starts from: ``omega`` (..., N, p) as a tensor of
    the energy's dtype, checked finite, projected onto 𝒲.

    Raises
    ------
    meanfield.errors.InputError
        A position is NaN or infinite (a projection would hide it).

    See Also
    --------
    initial_particles : the checks on shape and dtype of a runner's start.
    metropolis_init : the state built from these positions.
    meanfield.domains.Domain : the projection onto 𝒲.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.chains import start_positions
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> start_positions(E, [[3.0], [0.5]]).flatten().tolist()
    [2.0, 0.5]
    >>> start_positions(E, [[float("nan")], [0.5]])
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: omega0 contains 1 non-finite value(s) (NaN or inf); all must be ...
    """
    omega = energy.as_tensor(omega, name="omega0")
    bad = ~torch.isfinite(omega)
    if bool(bad.any()):
        where = tuple(int(i) for i in bad.nonzero()[0])
        raise InputError(
            "omega0 contains non-finite values (NaN or inf) at particle "
            f"{where[-2] if len(where) >= 2 else where[0]}; all must be finite"
        )
    return energy.domain.project(omega)


def with_potential(state: LangevinState, energy: Energy, beta_N: float) -> LangevinState:
    """``state`` with U and ∇U at its positions in its cache: as it is when they are there,
    else computed (a state whose positions were replaced by ``evolve(omega=...)``, which
    drops them), and checked finite as at a start (:func:`check_finite_start`).

    See Also
    --------
    gibbs_potential : U and ∇U it computes.
    check_finite_start : the check it applies.
    LangevinState : the state and its cache.

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.chains import metropolis_init, with_potential
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> s = metropolis_init(E, [[0.0], [0.0]], 1.0, "mean-field")
    >>> moved = s.evolve(omega=torch.tensor([[2.0], [0.0]], dtype=torch.float64))
    >>> "U" in moved.cache, float(with_potential(moved, E, 1.0).cache["U"])  # 2·(2 + 0)/2
    (False, 2.0)
    """
    if "U" in state.cache and "gradU" in state.cache:
        return state
    U, gradU = gibbs_potential(energy, state.omega, beta_N)
    check_finite_start(energy, state.omega, U, gradU)
    return state.evolve(cache={"U": U, "gradU": gradU})


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

    See Also
    --------
    meanfield.dynamics.chain_checks.check_start_spacing : the spacing check before it.
    gibbs_potential : U and ∇U it checks.
    meanfield.ot.spacing.min_pair_distance : the closest pair of a start.
    meanfield.errors.InputError : what it raises.

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, PairInteraction
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.dynamics.chains import metropolis_init
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
        One uniform per replica is drawn from it (on the CPU, in float64, as all noise): the
        stream the step opened from its state (:meth:`LangevinState.generator`).
    valid : bool tensor (...), optional
        Proposals that may be accepted at all (e.g. inside the domain); the others are rejected.

    Returns
    -------
    bool tensor (...)

    See Also
    --------
    metropolis_decision : the same rule with given uniforms.
    accept_or_keep : the state after the decisions.
    meanfield.dynamics.langevin.MALA : a sampler it decides for.

    References
    ----------
    - N. Metropolis, A. W. Rosenbluth, M. N. Rosenbluth, A. H. Teller, E. Teller, "Equation of state
      calculations by fast computing machines", J. Chem. Phys. 21 (1953) 1087–1092.
    - W. K. Hastings, "Monte Carlo sampling methods using Markov chains and their applications",
      Biometrika 57 (1970) 97–109.

    Examples
    --------
    log α = 0 is always accepted, log α = −∞ never; an invalid proposal is rejected.

    >>> import torch
    >>> from meanfield.dynamics.chains import metropolis
    >>> g = torch.Generator().manual_seed(0)
    >>> metropolis(torch.tensor([0.0, -float("inf")]), g).tolist()
    [True, False]
    >>> metropolis(torch.zeros(2), g, valid=torch.tensor([True, False])).tolist()
    [True, False]
    """
    u = torch.rand(log_alpha.shape, generator=generator, dtype=torch.float64).to(log_alpha)
    accept = metropolis_decision(log_alpha, u)
    return accept if valid is None else accept & valid


def metropolis_decision(log_alpha: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""The Metropolis rule given the uniforms: accept where log u < log α.

    :func:`metropolis` draws u and applies it; a sampler that draws its uniforms ahead (HMC's
    fused trajectory, :mod:`meanfield.dynamics.hmc`) applies it alone.

    .. math::

        \text{accept} \iff \log u < \log\alpha

    Parameters
    ----------
    log_alpha : tensor (...)
        Log acceptance ratio of each replica's proposal (−inf: never accepted).
    u : tensor (...)
        Uniforms on [0, 1), one per replica.

    Returns
    -------
    bool tensor (...)

    See Also
    --------
    metropolis : the rule with its own uniforms.
    accept_or_keep : the state after the decisions.
    meanfield.dynamics.hmc.HMC : the sampler that draws its uniforms ahead.

    References
    ----------
    - N. Metropolis, A. W. Rosenbluth, M. N. Rosenbluth, A. H. Teller, E. Teller, "Equation of state
      calculations by fast computing machines", J. Chem. Phys. 21 (1953) 1087–1092.
    - W. K. Hastings, "Monte Carlo sampling methods using Markov chains and their applications",
      Biometrika 57 (1970) 97–109.

    Examples
    --------
    >>> import math
    >>> import torch
    >>> from meanfield.dynamics.chains import metropolis_decision
    >>> log_alpha = torch.tensor([math.log(0.5), math.log(0.5), -math.inf])
    >>> metropolis_decision(log_alpha, torch.tensor([0.4, 0.6, 0.0])).tolist()
    [True, False, False]
    """
    return torch.log(u) < log_alpha


def accept_or_keep(state: LangevinState, accept, omega, U, gradU) -> LangevinState:
    """The state after one Metropolis decision: accepted replicas at the proposal (Ω', U',
    ∇U'), rejected ones where they were; the step and the acceptances counted.

    ``accept`` has shape (...) (one decision per replica); Ω', ∇U' have shape (..., N, p) and U'
    shape (...).  ``state`` is left as it was: a new state is returned.

    See Also
    --------
    metropolis : the decisions it applies.
    LangevinState : the state it returns.
    low_acceptance_warning : the check on the counted acceptances.

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.chains import accept_or_keep, metropolis_init
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> s = metropolis_init(E, torch.zeros(2, 3, 1), 1.0, "mean-field")  # 2 replicas
    >>> ones = torch.ones(2, 3, 1, dtype=torch.float64)
    >>> new = accept_or_keep(s, torch.tensor([True, False]), ones, torch.ones(2), ones)
    >>> new.omega[:, 0, 0].tolist(), new.accepted.tolist(), new.proposed, new.step, s.step
    ([1.0, 0.0], [1.0, 0.0], 1, 1, 0)
    """
    a = accept[..., None, None]
    new = torch.where(a, omega, state.omega)
    # the chain's travel: squared displacement per coordinate, summed over the steps (what
    # frozen_chain_warning weighs against the spread of the particles)
    moved = ((new - state.omega) ** 2).mean((-1, -2)).detach().cpu()
    travel = state.cache.get("travel")
    return state.evolve(
        omega=new,
        cache={
            "U": torch.where(accept, U, state.cache["U"]),
            "gradU": torch.where(a, gradU, state.cache["gradU"]),
            "travel": moved if travel is None else travel + moved,
        },
        accepted=state.accepted + accept.to(state.accepted.dtype).cpu(),
        proposed=state.proposed + 1,
        step=state.step + 1,
    )


def initial_particles(energy: Energy, omega0) -> torch.Tensor:
    """``omega0`` as a tensor of the energy's dtype, checked: shape (N, p) or (R, N, p), N ≥ 1,
    finite.  Raises before any work with the allowed shapes in the message.

    See Also
    --------
    chain_setup : the runner set-up that calls it.
    start_positions : the checks at an integrator's ``init``.
    meanfield.features.sample_initial_particles : a seeded draw of initial particles.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.chains import initial_particles
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
    (default: about 100 records over ``n_steps``) and the seed as an int (the integrator's
    ``init(omega0, seed)`` starts the chain's random stream from it).

    Returns
    -------
    omega0 : tensor (N, p) or (R, N, p)
    record_every : int
    seed : int

    See Also
    --------
    initial_particles : the checked initial particles.
    check_seed : the checked seed.
    meanfield.dynamics.langevin.simulate : a runner that starts with it.
    meanfield.dynamics.hmc.sample_hmc : a runner that starts with it.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.chains import chain_setup
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> omega0, record_every, seed = chain_setup(E, [[0.5]], 1000, None, 3)
    >>> record_every, seed
    (10, 3)
    """
    omega0 = initial_particles(energy, omega0)
    if record_every is None:
        record_every = max(1, n_steps // 100)
    record_every = check_int("record_every", record_every)
    return omega0, record_every, int(seed)


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
        terms = state.cache.get("term_values")  # (..., n_terms), kept by HMC at each step
        if terms is None:
            terms = torch.stack(list(self.energy.term_values(state.omega).values()), -1)
        omega = _numpy(state.omega) if self.record_positions else None
        accepted = _numpy(state.accepted) if self.acceptance else None
        self._append(state.step, omega, _numpy(terms), accepted)

    def _append(self, step: int, omega, terms, accepted):
        """One record from arrays: the positions (..., N, p) (None when not recorded), each
        term's value (..., n_terms) in the order of ``energy.term_names`` and the accepted
        moves so far (...) (None without acceptance)."""
        self.steps.append(step)
        if self.record_positions:
            self.positions.append(np.array(omega))
        for i, k in enumerate(self.energy.term_names):
            self.energies.setdefault(k, []).append(np.array(terms[..., i]))
        if self.acceptance:
            # the acceptance rate over the preceding record interval; 0 at the first record
            accepted = np.array(accepted)
            if self._last is None:
                rate = accepted * 0
            else:
                step0, acc0 = self._last
                rate = (accepted - acc0) / max(1, step - step0)
            self.rates.append(rate)
            self._last = (step, accepted)

    def run(self, integrator, state, n_steps, record_every, progress, desc):
        """Record ``state``, then advance it ``n_steps`` times recording every ``record_every``
        steps and at the last one; returns the final state (its random stream advanced).

        ``integrator.step(state)`` draws from the state's own stream.  An integrator with an
        ``advance(state, n, positions=...)`` method (HMC) moves :data:`RECORD_BLOCK` steps at
        a time and returns what each step left for the records (stacked ``omega``,
        ``term_values`` and cumulative ``accepted``); the records are those of single steps."""
        self.record(state)
        advance = getattr(integrator, "advance", None)
        done = 0
        bar = tqdm(total=n_steps, disable=not progress, desc=desc, unit="step")
        with torch.no_grad(), bar:
            while done < n_steps:
                if advance is None:
                    state, block, m = integrator.step(state), None, 1
                else:
                    m = min(RECORD_BLOCK, n_steps - done)
                    state, block = advance(state, m, positions=self.record_positions)
                    block = {k: None if v is None else _numpy(v) for k, v in block.items()}
                for i in range(m):
                    k = done + i + 1
                    if not (k % record_every == 0 or k == n_steps):
                        continue
                    if block is None:
                        self.record(state)
                    else:
                        at = {key: None if v is None else v[i] for key, v in block.items()}
                        step = state.step - m + i + 1
                        self._append(step, at["omega"], at["term_values"], at["accepted"])
                done += m
                bar.update(m)
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

    See Also
    --------
    meanfield.dynamics.chain_checks.frozen_chain_warning : the check on the distance travelled.
    meanfield.errors.LowAcceptanceWarning : the warning it returns the text of.
    accept_or_keep : where acceptances are counted.

    Examples
    --------
    >>> import torch
    >>> from meanfield.dynamics.chains import LangevinState, low_acceptance_warning
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


__all__ = [
    "LOW_ACCEPTANCE",
    "LOW_ACCEPTANCE_MIN_PROPOSALS",
    "POSITION_CACHE",
    "REGIMES",
    "SEED_MAX",
    "LangevinState",
    "accept_or_keep",
    "chain_setup",
    "check_finite_start",
    "check_seed",
    "effective_beta",
    "gibbs_potential",
    "initial_particles",
    "low_acceptance_warning",
    "metropolis",
    "metropolis_decision",
    "metropolis_init",
    "new_stream",
    "start_positions",
    "with_potential",
]
