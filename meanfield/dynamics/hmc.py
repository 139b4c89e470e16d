"""Hybrid (Hamiltonian) Monte Carlo for the exact Gibbs law, and the chain statistics used to
compare samplers (integrated autocorrelation time, effective sample size).

Target (THEORY §3): π(Ω) ∝ exp(−U(Ω)) on 𝒲^N, U = β_N N H_N, with β_N = β (mean-field) or
β N (Coulomb-gas), exactly as :class:`~meanfield.dynamics.langevin.MALA`.

**Dynamics.**  Velocities v ∈ R^{N×p} with mass β_N: the extended Hamiltonian is

    Ĥ(Ω, v) = U(Ω) + β_N |v|² / 2,     so  Ω'' = −N ∇H_N(Ω)   and   v ~ N(0, I / β_N).

The force is the O(1) drift of Algorithm 1, so the Hamiltonian time has the units of the
Langevin time t and does not depend on the temperature: a trajectory length T ≈ 1 moves the
slow (confinement) modes by O(1) in every regime.  One leapfrog step of size ε is

    v ← v − (ε/2) N∇H_N(Ω);   (Ω, v) ← B_ε(Ω, v);   v ← v − (ε/2) N∇H_N(Ω),

where B_ε is free flight for time ε with *specular reflection* at ∂𝒲, each particle in its own
copy of 𝒲: in a box each coordinate folds back at ±R (position mirrored, that velocity
component negated); in a ball the velocity is mirrored about the normal at the hitting point
(v ← v − 2(v·n)n), as often as the flight needs.  B_ε is volume-preserving and reversible
(B_ε(Ω', −v') = (Ω, −v)), the kicks are symplectic, so the L-step map Φ is volume-preserving
and reversible, and accepting Φ(Ω, v) with probability min(1, exp(−ΔĤ)) leaves π invariant
exactly; the trajectory never leaves 𝒲^N, where U is defined (Neal 2011, §5.1; Chafaï & Ferré
2018).  With L = 1 and no wall hit this is MALA with η = ε²/2.

**Tuning.**  L = ⌈T/ε⌉ leapfrog steps for a trajectory length T (a parameter).  The step size
ε is adapted during a warm-up by dual averaging (Hoffman & Gelman 2014, Alg. 5) on the
replica-mean acceptance probability, then frozen, so the recorded chain is a fixed Markov
kernel.  Optional jitter draws each replica's step uniformly in ε(1 ± j) per trajectory
(independent of the state, so exactness is kept); it breaks the periodic orbits of
near-harmonic modes (Neal 2011, §3.2).

Chains are batched on the leading axes (shape (..., N, p)), each accepting on its own, with one
step size shared by the ensemble.  Random numbers come from a seeded CPU ``torch.Generator``
whose state the chain state carries (``HMC.init(omega, seed)``; ``step(state)`` and
``advance(state, n)`` draw from it and return it advanced), so a saved state resumes the chain
bit for bit.  The chain state, the Metropolis decision and the records are those of MALA
(:mod:`meanfield.dynamics.chains`); :mod:`meanfield.dynamics.langevin` re-exports :class:`HMC` and
:func:`sample_hmc` beside MALA.

The pieces live beside their kin: the reflection B_ε with the domains
(:func:`meanfield.domains.billiard`), the leapfrog flow and its compiled blocks in
:mod:`meanfield.dynamics.hamiltonian`, the step-size adaptation in
:mod:`meanfield.dynamics.adaptation`; this module is the sampler.

References
----------
R. M. Neal, "MCMC using Hamiltonian dynamics", Handbook of MCMC, 2011.
M. D. Hoffman, A. Gelman, "The No-U-Turn sampler", JMLR 15, 2014.
D. Chafaï, G. Ferré, "Simulating Coulomb and log-gases with hybrid Monte Carlo algorithms",
J. Stat. Phys. 174, 2019 (arXiv:1806.05985).
C. J. Geyer, "Practical Markov chain Monte Carlo", Statist. Sci. 7, 1992.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import xarray as xr

from .._validation import check_int
from ..contract import RUN_PARAMS, Param, check_declared, declare, declare_fields
from ..domains import Box
from ..energy import Energy, check_periodic_terms
from ..errors import (
    InputError,
    InputTypeError,
    LowAcceptanceWarning,
    TrajectoryCappedWarning,
)
from ..results import check_extra_attrs, merge_attrs
from ..stats import effective_sample_size, integrated_autocorr_time  # re-exported
from .adaptation import DualAveraging, find_reasonable_step_size
from .chains import (
    LangevinState,
    _noise,
    _Recorder,
    chain_setup,
    effective_beta,
    low_acceptance_warning,
    metropolis_init,
    with_potential,
)
from .hamiltonian import (
    _NOT_FUSED,
    _block_size,
    _Constants,
    _int_tensor,
    _python_loop,
    _run_compiled,
    _stacked_term_values,
    _step_tensor,
    _trajectory,
    _transition,
)
from .spec import RunSpec, as_spec

# ----------------------------------------------------------------------------------------
# the sampler
# ----------------------------------------------------------------------------------------
#: The largest ``max_leapfrog`` accepted (100 times the default): a bound of 10**12 would let
#: a warm-up with a tiny ε run one trajectory for days.  Raise it explicitly
#: (``meanfield.dynamics.hmc.MAX_LEAPFROG_CEILING = ...``) for longer trajectories; it is read
#: when an :class:`HMC` is built.
MAX_LEAPFROG_CEILING = 100_000


#: The parameters of an HMC kernel, declared once for :class:`HMC` and :func:`sample_hmc`.
HMC_PARAMS = {
    p.name: p
    for p in (
        Param(
            "step_size", "real", "leapfrog step epsilon (in the time of Omega'' = -N grad H_N; "
            "None: set later, sample_hmc adapts it)", low=0.0, low_open=True, optional=True,
            label="step_size (leapfrog step epsilon)",
        ),
        Param(
            "trajectory_length", "real", "Hamiltonian time T of one trajectory "
            "(L = ceil(T / epsilon) leapfrog steps)", low=0.0, low_open=True,
            label="trajectory_length (T)",
        ),
        Param(
            "jitter", "real", "each replica's step is epsilon (1 + j (2u - 1)), u ~ U(0, 1), "
            "per trajectory", low=0.0, high=1.0, high_open=True,
        ),
        Param(
            "max_leapfrog", "int", "upper bound on the leapfrog steps L of one trajectory "
            "(at most MAX_LEAPFROG_CEILING = 100000, a module constant)", low=1,
        ),
        Param("compile", "flag", "run blocks of trajectories as one torch.compile'd call"),
    )
}  # fmt: skip


def _hmc_example(name, value) -> dict:
    """A cheap valid :class:`HMC` beside ``name = value`` (for the contract's tests)."""
    from ..energy import QuadraticPotential

    return {"energy": Energy([QuadraticPotential()], Box(1, 2.0)), "beta": 1.0}


@declare_fields(example=_hmc_example)
@dataclass
class HMC:
    r"""Hybrid Monte Carlo with reflection: exact Gibbs law ∝ exp(−β_N N H_N) on 𝒲^N.

    One :meth:`step` is one trajectory of L = ⌈T/ε⌉ leapfrog steps (mass β_N, reflection at
    ∂𝒲, see the module docstring) followed by a Metropolis decision per replica.  The state is
    a :class:`~meanfield.dynamics.chains.LangevinState` as for MALA; ``state.cache["accept_prob"]``
    holds each replica's min(1, exp(−ΔĤ)) of the last step and ``state.cache["divergent"]``
    counts trajectories rejected for a non-finite energy or force.

    .. math::

        \hat H(\Omega, v) = U(\Omega) + \frac{\beta_N |v|^2}{2}, \qquad
        \text{accept with probability } \min\big(1, e^{-\Delta \hat H}\big)

    Parameters
    ----------
    energy : Energy
    beta : float
        Inverse temperature β > 0.
    step_size : float, optional
        Leapfrog step ε > 0 (in the time of Ω'' = −N∇H_N); must be set before :meth:`step`
        and :meth:`advance`, which otherwise raise :class:`~meanfield.errors.InputError`
        (:func:`sample_hmc` adapts it).
    trajectory_length : float
        T > 0; L = min(max_leapfrog, max(1, ⌈T/ε⌉)).
    regime : {"mean-field", "coulomb-gas"}
    jitter : float
        j ∈ [0, 1): each replica's step is ε(1 + j(2u − 1)), u ~ U(0, 1), per trajectory.
    max_leapfrog : int
        Upper bound on L (guards the cost when ε is tiny early in the warm-up), an integer in
        [1, :data:`MAX_LEAPFROG_CEILING`] (100 000; raise that module constant explicitly for
        more).
    compile : bool
        Run blocks of up to :data:`~meanfield.dynamics.hamiltonian.FUSED_BLOCK` = 32
        trajectories (:meth:`advance`; :meth:`step` is a block of one) as one call compiled by
        :func:`torch.compile` (Inductor with its
        C++ wrapper): each trajectory's L leapfrog steps a :func:`torch.while_loop`, its
        Metropolis decision and its records inside, instead of ~30 small torch calls per
        leapfrog step.  It pays for small systems, where the eager step is bound by per-call
        overhead (``benchmarks/bench_hmc_blackjax.py``: faster than BlackJAX on the log gas),
        after a one-off compilation of 30–90 s per (energy, shape, dtype, β_N, jitter); ε, L
        and the block's length are inputs, so the warm-up does not recompile.  The chain is
        the same Markov chain: the same random numbers drawn in the same order, the same
        functions traced (the pair sums with their i = j entries masked and, in p ≥ 2,
        explicit differences), so it agrees with the eager chain to round-off (~1e-14 per
        step in float64).  One difference: a particle still in flight after the ball's
        bounce budget makes its trajectory divergent (rejected) instead of raising
        :class:`~meanfield.errors.StepBudgetError`.  The chains agree through the warm-up
        of :func:`sample_hmc` too: its dual averaging would amplify the round-off in the
        acceptance probabilities about ×3 per trajectory into different step sizes, so the
        step sizes it hands out are rounded to a grid in log ε
        (:class:`~meanfield.dynamics.adaptation.DualAveraging`) and are bit-identical on both
        paths.  An energy that does not trace as one
        graph (a potential differentiated by autograd, data-dependent branches) warns once
        and runs eagerly.

    See Also
    --------
    sample_hmc : the sampler run end to end (warm-up, records).
    meanfield.dynamics.langevin.MALA : the one-step Metropolis sampler of the same law.
    meanfield.pde.equation.McKeanVlasov : the grid view, the N → ∞ limit of the same energy.
    meanfield.pde.stationary.gibbs_state : its stationary state ρ_β, which a long chain samples.
    meanfield.ot.distance.wasserstein : the transport view (a chain's particles against ρ_β).

    References
    ----------
    - M. D. Hoffman, A. Gelman, "The No-U-Turn sampler: adaptively setting path lengths in
      Hamiltonian Monte Carlo", JMLR 15 (2014) 1593–1623 (the step-size adaptation).
    - D. Chafaï, G. Ferré, "Simulating Coulomb and log-gases with hybrid Monte Carlo
      algorithms", J. Stat. Phys. 174 (2019) 692–714.

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.hmc import HMC
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> hmc = HMC(E, beta=1.0, step_size=0.25)
    >>> hmc.n_leapfrog  # ⌈1 / 0.25⌉
    4
    >>> s = hmc.step(hmc.init(torch.zeros(2, 3, 1), seed=0))
    >>> s.step, tuple(s.cache["accept_prob"].shape), s.cache["divergent"]
    (1, (2,), 0)
    """

    energy: Energy
    beta: float = field(metadata={"param": RUN_PARAMS["beta"]})
    step_size: float | None = field(default=None, metadata={"param": HMC_PARAMS["step_size"]})
    trajectory_length: float = field(
        default=1.0, metadata={"param": HMC_PARAMS["trajectory_length"]}
    )
    regime: str = field(default="mean-field", metadata={"param": RUN_PARAMS["regime"]})
    jitter: float = field(default=0.0, metadata={"param": HMC_PARAMS["jitter"]})
    max_leapfrog: int = field(default=1000, metadata={"param": HMC_PARAMS["max_leapfrog"]})
    compile: bool = field(default=False, metadata={"param": HMC_PARAMS["compile"]})

    def __post_init__(self):
        check_declared(self)  # the contract of the fields; then the ceiling, read now
        # pair terms must read minimum images on a torus, and only there
        check_periodic_terms(self.energy)
        if self.max_leapfrog > MAX_LEAPFROG_CEILING:
            raise InputError(
                f"max_leapfrog must be an integer in [1, {MAX_LEAPFROG_CEILING}] (a bound on the "
                f"leapfrog steps of one trajectory), got {self.max_leapfrog}; for more, raise "
                "meanfield.dynamics.hmc.MAX_LEAPFROG_CEILING explicitly"
            )

    @property
    def n_leapfrog(self) -> int:
        """L = min(max_leapfrog, max(1, ⌈T/ε⌉)), the leapfrog steps of one trajectory.

        Raises
        ------
        meanfield.errors.InputError
            ``step_size`` is not set.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.dynamics.hmc import HMC
        >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
        >>> HMC(E, 1.0, step_size=0.3).n_leapfrog, HMC(E, 1.0, 1e-6, max_leapfrog=50).n_leapfrog
        (4, 50)
        """
        self._check_step_size("HMC.n_leapfrog")
        n = math.ceil(self.trajectory_length / self.step_size - 1e-9)
        return int(min(self.max_leapfrog, max(1, n)))

    def _check_step_size(self, where: str) -> None:
        """Refuse to run without a step size, naming what to pass."""
        if self.step_size is None:
            raise InputError(
                f"{where} needs the leapfrog step size: build HMC(..., step_size=eps) with "
                "eps > 0 (or dataclasses.replace(hmc, step_size=eps)); sample_hmc finds and "
                "adapts it"
            )

    def init(self, omega, seed: int = 0) -> LangevinState:
        """The state at step 0, as :func:`~meanfield.dynamics.chains.metropolis_init` gives it (Ω
        projected onto 𝒲, U and ∇U cached, the random stream started from ``seed``), with no
        divergent trajectory counted.

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.dynamics.hmc import HMC
        >>> hmc = HMC(Energy([QuadraticPotential()], Box(1, 2.0)), beta=1.0)
        >>> s = hmc.init(torch.zeros(2, 3, 1))  # 2 replicas
        >>> s.step, s.cache["divergent"], tuple(s.cache["U"].shape), s.accepted.tolist()
        (0, 0, (2,), [0.0, 0.0])
        """
        state = metropolis_init(self.energy, omega, self.beta, self.regime, seed=seed)
        terms = _stacked_term_values(self.energy, state.omega)
        return state.evolve(cache={"divergent": 0, "term_values": terms})

    def flow(self, omega, v, eps, n_steps: int, gradU, beta_N: float):
        """L leapfrog steps with reflection from (Ω, v), ∇U(Ω) given.

        Parameters
        ----------
        omega, v : tensor (..., N, p)
        eps : float or tensor (..., 1, 1)
            Step size (per replica with jitter).
        n_steps : int
            L ≥ 1.
        gradU : tensor (..., N, p)
            ∇U at ``omega`` (U = β_N N H_N).
        beta_N : float

        Returns
        -------
        (omega, v, U, gradU, finite) : the end point, U and ∇U there, shape (...) and
        (..., N, p), and a bool (...) that is False where a force or U was not finite.

        Examples
        --------
        The flow nearly conserves Ĥ = U + β_N |v|²/2 (here V(ω) = ω²/2, β_N = 1, N = 1, so
        U = ω²/2 and the motion is a rotation in the phase plane):

        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.dynamics.hmc import HMC
        >>> hmc = HMC(Energy([QuadraticPotential()], Box(1, 5.0)), beta=1.0)
        >>> s = hmc.init([[1.0]])
        >>> v = torch.zeros(1, 1, dtype=torch.float64)
        >>> omega, v, U, gradU, ok = hmc.flow(s.omega, v, 0.01, 157, s.cache["gradU"], 1.0)
        >>> round(float(omega), 2), round(float(U + 0.5 * v.square().sum()), 4), bool(ok)
        (0.0, 0.5, True)
        """
        flow = _trajectory(self.energy, omega, v, gradU, eps, n_steps - 1, beta_N, _python_loop)
        omega, v, U, gradU, _, finite = flow
        return omega, v, U, gradU, finite

    def step(self, state: LangevinState) -> LangevinState:
        """One trajectory (fresh velocities, :meth:`flow`) and a Metropolis decision per
        replica, returned as a new state.

        The jitter, the velocities and the uniforms of the decisions are drawn from the
        state's random stream, in this order.

        Parameters
        ----------
        state : LangevinState
            As :meth:`init` gives it; left as it was.

        Returns
        -------
        LangevinState
            Accepted replicas at the trajectory's end, the others where they were; ``step``,
            ``proposed`` and ``accepted`` counted, ``cache["accept_prob"]`` (...) set,
            ``cache["divergent"]`` increased by the trajectories rejected as non-finite and
            the stream advanced.

        Raises
        ------
        meanfield.errors.InputError
            ``step_size`` is not set (before anything is drawn).

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.dynamics.hmc import HMC
        >>> hmc = HMC(Energy([QuadraticPotential()], Box(1, 2.0)), beta=1.0, step_size=0.1)
        >>> s0 = hmc.init(torch.zeros(3, 4, 1), seed=0)  # 3 replicas
        >>> s1 = hmc.step(s0)
        >>> s1.step, s1.proposed, bool((s1.cache["accept_prob"] > 0.9).all()), s0.step
        (1, 1, True, 0)
        """
        self._check_step_size("HMC.step")
        state = with_potential(state, self.energy, self._beta_N(state.omega))  # after evolve
        generator = state.generator()
        return self._step(state, generator).evolve(rng=generator.get_state())

    def _step(self, state: LangevinState, generator: torch.Generator) -> LangevinState:
        """:meth:`step` drawing from ``generator`` (the state's ``rng`` is left as it was)."""
        if self._fuses():
            fused = self._advance_fused(state, generator, 1, positions=False)
            if fused is not None:
                return fused[0]
        return self._step_eager(state, generator)

    def advance(self, state: LangevinState, n_steps: int, *, positions: bool = True):
        """``n_steps`` trajectories (:meth:`step` after :meth:`step`), with what each left for
        the records.  With ``compile=True`` they run in blocks of up to ``FUSED_BLOCK``
        trajectories per compiled call (the random numbers drawn in the same order, so the
        chain is the one of single steps).

        Parameters
        ----------
        state : LangevinState
            As :meth:`init` gives it; left as it was.  Its random stream is drawn from.
        n_steps : int
            Trajectories ≥ 1.
        positions : bool
            Keep each trajectory's positions (else ``records["omega"]`` is None).

        Returns
        -------
        (LangevinState, dict)
            The state after the last trajectory (its stream advanced), and per trajectory
            (leading axis n_steps): ``omega`` (n, ..., N, p) or None, ``term_values`` (n, ...,
            n_terms) (each term's value, in the order of ``Energy.term_names``) and
            ``accepted`` (n, ...), the accepted moves so far.

        Raises
        ------
        meanfield.errors.InputError
            ``n_steps`` < 1, or ``step_size`` is not set (before anything is drawn).

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.dynamics.hmc import HMC
        >>> hmc = HMC(Energy([QuadraticPotential()], Box(1, 2.0)), beta=1.0, step_size=0.1)
        >>> s0 = hmc.init(torch.zeros(3, 4, 1), seed=0)  # 3 replicas of 4 particles
        >>> s5, records = hmc.advance(s0, 5)
        >>> s5.step, tuple(records["omega"].shape), tuple(records["term_values"].shape)
        (5, (5, 3, 4, 1), (5, 3, 1))
        >>> bool(torch.equal(records["omega"][-1], s5.omega))
        True

        Five trajectories after two are the seven of one run (the state carries the stream):

        >>> s2, _ = hmc.advance(s0, 2)
        >>> torch.equal(hmc.advance(s2, 5)[0].omega, hmc.advance(s0, 7)[0].omega)
        True
        """
        n_steps = check_int("n_steps", n_steps)
        self._check_step_size("HMC.advance")
        state = with_potential(state, self.energy, self._beta_N(state.omega))  # after evolve
        generator = state.generator()
        state, records = self._advance(state, generator, n_steps, positions)
        return state.evolve(rng=generator.get_state()), records

    def _advance(self, state, generator, n_steps: int, positions: bool):
        """:meth:`advance` drawing from ``generator`` (the state's ``rng`` is left as it was)."""
        if self._fuses():
            fused = self._advance_fused(state, generator, n_steps, positions=positions)
            if fused is not None:
                return fused
        records = []
        for _ in range(n_steps):
            state = self._step_eager(state, generator)
            omega = state.omega[None] if positions else None
            terms, accepted = state.cache["term_values"][None], state.accepted[None]
            records.append({"omega": omega, "term_values": terms, "accepted": accepted})
        return state, _joined(records)

    def _fuses(self) -> bool:
        """Whether trajectories run through the compiled block: ``compile=True``, an energy
        that traces, and at least two leapfrog steps (a one-step trajectory, ε ≥ T, has an
        empty inner ``torch.while_loop``, which the compiled graph did not reproduce: the
        eager chain, the reference, runs it)."""
        return self.compile and self.energy not in _NOT_FUSED and self.n_leapfrog > 1

    def _step_eager(self, state: LangevinState, generator: torch.Generator) -> LangevinState:
        """:meth:`step` run eagerly: :func:`_transition` with a Python loop."""
        omega = state.omega
        args = (omega, state.cache["U"], state.cache["gradU"], _terms_of(self.energy, state))
        args += (*self._draws(omega, generator), _step_tensor(self.step_size, omega))
        kw = {"beta_N": self._beta_N(omega), "jitter": self.jitter, "loop": _python_loop}
        out = _transition(self.energy, *args, self.n_leapfrog - 1, **kw)
        omega, U, gradU, terms, accept, accept_prob, n_divergent = out
        accepted = state.accepted + accept.to(state.accepted.dtype).cpu()
        return _moved(state, 1, omega, U, gradU, terms, accept_prob, n_divergent, accepted)

    def _advance_fused(self, state, generator, n_steps: int, *, positions: bool):
        """:meth:`advance` through the compiled
        :func:`~meanfield.dynamics.hamiltonian._fused_block`, in blocks; None (the generator as it
        was, a warning, the energy marked to run eagerly from now on) when
        the trajectory does not compile as one graph."""
        K, records, done = _block_size(state.omega), [], 0
        while done < n_steps:
            m = min(K, n_steps - done)
            block = self._block(state, generator, K, m)
            if block is None:
                if not done:
                    return None
                rest = self._advance(state, generator, n_steps - done, positions)
                state = rest[0]
                records.append(rest[1])
                break
            state, record = block
            records.append({**record, "omega": record["omega"] if positions else None})
            done += m
        return state, _joined(records)

    def _block(self, state, generator, K: int, m: int):
        """m ≤ K trajectories from ``state`` in one call of the compiled
        :func:`~meanfield.dynamics.hamiltonian._fused_block`: (the state after them, their
        records), or None when it does not compile."""
        omega, device = state.omega, state.omega.device
        carry = (omega, state.cache["U"], state.cache["gradU"], _terms_of(self.energy, state))
        rng = generator.get_state()
        args = (*carry, *self._draws_block(omega, generator, K, m))
        args += (_step_tensor(self.step_size, omega), _int_tensor(self.n_leapfrog - 1, device))
        args += (_int_tensor(m, device),)
        out = _run_compiled(self.energy, _Constants(self._beta_N(omega), self.jitter), args)
        if out is None:
            generator.set_state(rng)
            return None
        omega, U, gradU, terms, accept_prob, n_divergent, r_omega, r_terms, r_accept = out
        accepted = state.accepted + r_accept[:m].to(state.accepted.dtype).cpu().cumsum(0)
        state = _moved(state, m, omega, U, gradU, terms, accept_prob, n_divergent, accepted[-1])
        return state, {"omega": r_omega[:m], "term_values": r_terms[:m], "accepted": accepted}

    def _draws(self, omega, generator):
        """A trajectory's random numbers in the chain's fixed order: the jitter's uniforms (...)
        (None without jitter), standard normals (..., N, p) for the velocities and the
        uniforms (...) of the Metropolis decisions.  The flow draws nothing, so drawing the
        decisions' uniforms before it leaves the stream as when they followed it."""
        batch = omega.shape[:-2]
        uj = torch.rand(batch, generator=generator, dtype=torch.float64) if self.jitter else None
        z = _noise(omega.shape, generator, omega)
        u = torch.rand(batch, generator=generator, dtype=torch.float64).to(omega)
        return uj, z, u

    def _draws_block(self, omega, generator, K: int, m: int):
        """:meth:`_draws` of m ≤ K trajectories into buffers of K (the rest zero), the numbers
        and their order those of m single steps (each slice is filled in place as ``torch.rand``
        and ``torch.randn`` fill a new tensor)."""
        batch, f64 = omega.shape[:-2], torch.float64
        uj = torch.zeros((K, *batch), dtype=f64) if self.jitter else None
        z = torch.zeros((K, *omega.shape), dtype=f64)
        u = torch.zeros((K, *batch), dtype=f64)
        for k in range(m):
            if uj is not None:
                uj[k].uniform_(generator=generator)
            z[k].normal_(generator=generator)
            u[k].uniform_(generator=generator)
        return uj, z.to(omega), u.to(omega)

    def _beta_N(self, omega) -> float:
        """β_N for particles ``omega`` (..., N, p)."""
        return effective_beta(self.beta, omega.shape[-2], self.regime)


def _moved(state, n: int, omega, U, gradU, terms, accept_prob, n_divergent, accepted):
    """``state`` after n more trajectories ending at (Ω, U, ∇U, term values), the last one's
    acceptance probabilities, ``n_divergent`` more divergent ones and ``accepted`` moves."""
    return state.evolve(
        omega=omega,
        cache={
            "U": U,
            "gradU": gradU,
            "term_values": terms,
            "accept_prob": accept_prob,
            "divergent": state.cache["divergent"] + int(n_divergent),
        },
        accepted=accepted,
        proposed=state.proposed + n,
        step=state.step + n,
    )


def _joined(records: list) -> dict:
    """Blocks of records (dicts of tensors with a leading trajectory axis, or None) joined."""
    return {
        k: None if records[0][k] is None else torch.cat([r[k] for r in records]) for k in records[0]
    }


def _terms_of(energy: Energy, state: LangevinState) -> torch.Tensor:
    """The state's term values (..., n_terms), computed for a state another sampler started."""
    terms = state.cache.get("term_values")
    return _stacked_term_values(energy, state.omega) if terms is None else terms


@declare(
    dataclasses.replace(RUN_PARAMS["beta"], optional=True),
    Param("n_samples", "int", "recorded trajectories, after the warm-up", low=1),
    Param("n_warmup", "int", "warm-up trajectories adapting epsilon (0 needs step_size)", low=0),
    HMC_PARAMS["trajectory_length"],
    HMC_PARAMS["step_size"],
    Param("target_accept", "level", "target mean acceptance probability of the warm-up"),
    dataclasses.replace(RUN_PARAMS["regime"], optional=True),
    HMC_PARAMS["jitter"],
    HMC_PARAMS["max_leapfrog"],
    RUN_PARAMS["record_every"],
    dataclasses.replace(RUN_PARAMS["seed"], optional=True),
    RUN_PARAMS["record_positions"],
    RUN_PARAMS["progress"],
    HMC_PARAMS["compile"],
)
def sample_hmc(
    spec,
    omega0=None,
    *,
    beta: float | None = None,
    n_samples: int,
    n_warmup: int = 200,
    trajectory_length: float = 1.0,
    step_size: float | None = None,
    target_accept: float = 0.8,
    regime: str | None = None,
    jitter: float = 0.1,
    max_leapfrog: int = 1000,
    record_every: int | None = None,
    seed: int | None = None,
    record_positions: bool = True,
    progress: bool = False,
    extra_attrs: dict | None = None,
    compile: bool = False,
) -> xr.Dataset:
    """Sample the Gibbs law ∝ exp(−β_N N H_N) on 𝒲^N by HMC: warm-up, then a frozen kernel.

    Two forms, the same run, as :func:`~meanfield.dynamics.langevin.simulate`:
    ``sample_hmc(spec, n_samples=...)`` with a :class:`~meanfield.dynamics.spec.RunSpec`,
    which gives the energy, the initial particles (N samples of its initial law, or its
    particles), β, the regime and the seed (``beta``, ``regime`` and ``seed`` given, not None,
    replace its fields), or the keyword form ``sample_hmc(energy, omega0, beta=..., ...)``.
    HMC's own knobs are keywords in both; a spec's ``eta``, ``n_steps`` and ``method`` (those
    of :func:`~meanfield.dynamics.langevin.simulate`) are not read.

    Parameters
    ----------
    spec : RunSpec or Energy
        The run; or the energy, in the keyword form.  Exact pair sums and full data are used
        (stochastic gradients would break exactness): a spec with a random batch is refused.
    omega0 : array (N, p) or (R, N, p), optional
        Keyword form: the initial particles, projected onto 𝒲; a leading axis runs R chains
        sharing the step.
    beta : float
        Inverse temperature β > 0 (β_N = β or β N by ``regime``); required in the keyword
        form.
    n_samples, n_warmup : int
        Recorded trajectories ≥ 1, after ``n_warmup`` ≥ 0 unrecorded ones that adapt ε by dual
        averaging (``n_warmup = 0`` requires ``step_size``, then used as is).
    trajectory_length : float
        Hamiltonian time T > 0 of one trajectory (L = ⌈T/ε⌉ leapfrog steps).  L is never
        silently capped: with a fixed step (``n_warmup = 0``) ⌈T/ε⌉ > ``max_leapfrog`` is
        refused before any work; when the adapted ε needs more, L = ``max_leapfrog`` runs,
        a :class:`~meanfield.errors.TrajectoryCappedWarning` says so and the attribute
        ``trajectory_length`` holds the shorter L ε (the warm-up's own trajectories are
        capped quietly: there ε is still moving).
    step_size : float, optional
        Initial (or, with ``n_warmup = 0``, fixed) ε > 0; default: Hoffman–Gelman's heuristic.
    target_accept : float
        Target mean acceptance probability δ ∈ (0, 1) of the adaptation.
    regime : {"mean-field", "coulomb-gas"}, default "mean-field"
    jitter : float
        j ∈ [0, 1): per-trajectory step ε(1 ± j) uniformly, per replica.
    max_leapfrog : int
        Upper bound on L, in [1, :data:`MAX_LEAPFROG_CEILING`] (100 000; raise that
        constant explicitly for more).
    record_every : int, optional
        Trajectories between records (default: ~100 records); the first and last are recorded.
    seed : int, default 0
        Seeds every random number (warm-up included): the chain's random stream
        (``HMC.init(omega0, seed)``).
    record_positions, progress, extra_attrs :
        As :func:`meanfield.dynamics.langevin.simulate`.
    compile : bool
        Run blocks of trajectories with their decisions as one compiled call (:class:`HMC`'s
        ``compile``): the same chain to round-off, warm-up included (the adapted step sizes
        are bit-identical, see :class:`~meanfield.dynamics.adaptation.DualAveraging`), faster
        for small systems after a one-off compilation.

    Returns
    -------
    xarray.Dataset
        As :func:`~meanfield.dynamics.langevin.simulate`, with ``acceptance_rate``; ``step`` counts
        trajectories from the warm-up's start (records start at ``n_warmup``) and ``time`` =
        L ε · step is Hamiltonian time.  Attributes: every parameter, the frozen ``step_size``,
        ``n_leapfrog``, ``trajectory_length`` = L ε (the time each trajectory ran) and
        ``trajectory_length_requested`` = T, ``warmup_accept_prob``, ``n_divergent``, the seed
        and the version.

    Raises
    ------
    meanfield.errors.InputError
        A bad argument (``max_leapfrog`` above :data:`MAX_LEAPFROG_CEILING` included), a
        fixed step with ⌈T/ε⌉ > ``max_leapfrog``, a spec with an
        ``interaction_batch`` or ``data_batch``, or a start with infinite energy or force
        (:func:`~meanfield.dynamics.chains.check_finite_start`).
    meanfield.errors.InputTypeError
        A spec and ``omega0`` both (the spec holds its initial state), or the keyword form
        without ``omega0``.

    Warns
    -----
    meanfield.errors.TrajectoryCappedWarning
        The adapted ε needs more than ``max_leapfrog`` leapfrog steps for T.
    meanfield.errors.LowAcceptanceWarning
        Some chain accepted under :data:`~meanfield.dynamics.chains.LOW_ACCEPTANCE` of its recorded
        trajectories.

    See Also
    --------
    HMC : the kernel, one trajectory at a time.
    meanfield.dynamics.langevin.simulate : projected Langevin and MALA on the same spec.
    meanfield.pde.equation.McKeanVlasov : the grid view, the N → ∞ limit of the same energy.
    meanfield.pde.stationary.gibbs_state : its stationary state ρ_β, which a long chain samples.
    meanfield.ot.distance.wasserstein : the transport view (a chain's particles against ρ_β).

    References
    ----------
    - M. D. Hoffman, A. Gelman, "The No-U-Turn sampler: adaptively setting path lengths in
      Hamiltonian Monte Carlo", JMLR 15 (2014) 1593–1623 (the step-size adaptation).
    - D. Chafaï, G. Ferré, "Simulating Coulomb and log-gases with hybrid Monte Carlo
      algorithms", J. Stat. Phys. 174 (2019) 692–714.
    - I. Dumitriu, A. Edelman, "Matrix models for beta ensembles", J. Math. Phys. 43 (2002)
      5830–5847 (the exact β-ensemble laws the sampler is tested against).

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.hmc import sample_hmc
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))  # V(ω) = ω²/2 on [−2, 2]
    >>> ds = sample_hmc(E, [[0.0]] * 4, beta=1.0, n_samples=5, n_warmup=5, seed=0)
    >>> ds["step"].values.tolist(), dict(ds["omega"].sizes), ds.attrs["method"]
    ([5, 6, 7, 8, 9, 10], {'time': 6, 'particle': 4, 'dim': 1}, 'hmc')

    The same run from a spec (its ``eta`` and ``n_steps`` are Langevin's, not read here):

    >>> from meanfield.dynamics.spec import RunSpec
    >>> spec = RunSpec(energy=E, initial=[[0.0]] * 4, beta=1.0, eta=0.01, n_steps=1)
    >>> bool((sample_hmc(spec, n_samples=5, n_warmup=5)["omega"] == ds["omega"]).all())
    True
    """
    energy, omega0, beta, regime, seed = _hmc_run(spec, omega0, beta, regime, seed)
    if n_warmup == 0 and step_size is None:
        raise InputError("n_warmup = 0 needs a step_size (nothing would adapt it)")
    integrator = HMC(
        energy, beta, step_size, trajectory_length, regime, jitter, max_leapfrog, compile
    )
    if n_warmup == 0:  # the step is fixed: a capped trajectory is known before any work
        _check_not_capped(integrator)
    # extra attributes that would overwrite a recorded one: refused before any work
    check_extra_attrs(extra_attrs, (*HMC_ATTRS, *energy.describe()))
    omega0, record_every, seed = chain_setup(energy, omega0, n_samples, record_every, seed)
    with torch.no_grad():
        state = integrator.init(omega0, seed=seed)
        integrator, state, step_size0, probs = warm_up(integrator, state, n_warmup, target_accept)
    _warn_if_capped(integrator)
    recorder = _Recorder(energy, record_positions=record_positions, acceptance=True)
    state = recorder.run(integrator, state, n_samples, record_every, progress, "hmc")
    run = {"n_warmup": n_warmup, "n_samples": n_samples, "target_accept": target_accept}
    params = _hmc_params(integrator, state, step_size0, probs, run, record_every, extra_attrs)
    dt = integrator.n_leapfrog * integrator.step_size
    note = low_acceptance_warning(state, "step_size", integrator.step_size)
    if note:
        warnings.warn(
            note, LowAcceptanceWarning, stacklevel=3
        )  # the caller, past the contract wrapper
    return recorder.dataset(state, time_per_step=dt, params=params, seed=seed, time_name=_HMC_TIME)


def _hmc_run(spec, omega0, beta, regime, seed):
    """(energy, initial particles, β, regime, seed) of :func:`sample_hmc`'s two forms: a
    :class:`RunSpec` (the keywords given, not None, replace its fields, as in
    :func:`~meanfield.dynamics.langevin.simulate`), or the energy and the keywords."""
    if isinstance(spec, RunSpec):
        spec = as_spec(spec, omega0, beta=beta, regime=regime, seed=seed)
        for name in ("interaction_batch", "data_batch"):
            if getattr(spec, name) is not None:
                raise InputError(
                    f"sample_hmc samples the exact Gibbs law: it takes no {name}, but the spec "
                    f"sets {name} = {getattr(spec, name)}; use spec.replace({name}=None)"
                )
        return spec.energy, spec.particles(), spec.beta, spec.regime, spec.seed
    if omega0 is None:
        raise InputTypeError(
            "sample_hmc(energy, omega0, beta=..., n_samples=...) needs the initial particles "
            "omega0, shape (N, p) or (R, N, p); or give a RunSpec, which holds them"
        )
    if beta is None:
        raise InputError("sample_hmc(energy, omega0, ...) needs beta (inverse temperature) > 0")
    regime = "mean-field" if regime is None else regime
    return spec, omega0, beta, regime, 0 if seed is None else seed


def _leapfrog_needed(integrator: HMC) -> int:
    """⌈T/ε⌉, the leapfrog steps the requested trajectory length needs (before the cap)."""
    return max(1, math.ceil(integrator.trajectory_length / integrator.step_size - 1e-9))


def _check_not_capped(integrator: HMC) -> None:
    """Refuse a fixed step ε for which T/ε exceeds ``max_leapfrog`` (the trajectory would be
    silently shortened to max_leapfrog · ε)."""
    need = _leapfrog_needed(integrator)
    if need > integrator.max_leapfrog:
        raise InputError(
            f"trajectory_length / step_size = {integrator.trajectory_length:g} / "
            f"{integrator.step_size:g} needs {need} leapfrog steps, more than max_leapfrog = "
            f"{integrator.max_leapfrog} (allowed: <= max_leapfrog): raise max_leapfrog, "
            "shorten trajectory_length or lengthen step_size"
        )


def _warn_if_capped(integrator: HMC) -> None:
    """After the warm-up: warn when the adapted ε makes T/ε exceed ``max_leapfrog``."""
    need = _leapfrog_needed(integrator)
    if need > integrator.max_leapfrog:
        ran = integrator.n_leapfrog * integrator.step_size
        warnings.warn(
            f"the adapted step_size {integrator.step_size:.3g} needs {need} leapfrog steps for "
            f"trajectory_length = {integrator.trajectory_length:g}, more than max_leapfrog = "
            f"{integrator.max_leapfrog}: each trajectory runs only {ran:.3g} (recorded as the "
            "dataset's trajectory_length); raise max_leapfrog or shorten trajectory_length",
            TrajectoryCappedWarning,
            stacklevel=4,
        )


#: How the ``time`` coordinate of an HMC dataset is defined.
_HMC_TIME = "n_leapfrog * step_size * step (Hamiltonian time)"


def warm_up(integrator: HMC, state: LangevinState, n_warmup: int, target: float):
    """HMC's warm-up from ``state`` (as ``integrator.init`` gives it): the first ε (given, or
    Hoffman–Gelman's heuristic), then ``n_warmup`` trajectories adapting ε by dual averaging
    towards acceptance ``target``; ε frozen at the averaged value.  The heuristic's and the
    adapted ε are capped at the trajectory length T (one leapfrog step is then the whole
    trajectory): on a flat target, where every proposal is accepted, they would grow without
    bound.  Every random number is
    drawn from the state's stream, in that order.

    Returns
    -------
    (HMC, LangevinState, float, list of float)
        A new integrator with the frozen ε, the state after the warm-up (its stream advanced)
        with its acceptance and divergence counters reset (the recorded chain counts its
        own), the initial ε and the replica-mean acceptance probability of each warm-up
        trajectory.

    See Also
    --------
    HMC : the kernel it tunes.
    sample_hmc : the sampler that runs it first.
    meanfield.dynamics.adaptation.DualAveraging : the adaptation of ε.
    meanfield.dynamics.adaptation.find_reasonable_step_size : the first ε.

    References
    ----------
    - M. D. Hoffman, A. Gelman, "The No-U-Turn sampler: adaptively setting path lengths in
      Hamiltonian Monte Carlo", JMLR 15 (2014) 1593–1623.

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.hmc import HMC, warm_up
    >>> E = Energy([QuadraticPotential()], Box(1, 2.0))
    >>> hmc0 = HMC(E, 1.0, step_size=0.5)
    >>> hmc, state, eps0, probs = warm_up(hmc0, hmc0.init(torch.zeros(4, 1), seed=0), 5, 0.8)
    >>> eps0, len(probs), state.step, state.proposed, hmc.step_size > 0
    (0.5, 5, 5, 0, True)
    """
    # one generator for the whole warm-up (the heuristic's draws, then the trajectories'),
    # carried back into the state at the end
    generator = state.generator()
    # ε at most T: one leapfrog step is then the whole trajectory.  Without the cap a flat
    # target (every proposal accepted: a torus with no potential, a lone particle) grows ε
    # without bound (to 1e38 and beyond), the trajectories run far longer than T and a
    # torus's wrap of q + ε v keeps none of q's digits
    cap = integrator.trajectory_length
    if integrator.step_size is None:
        step = find_reasonable_step_size(integrator, state, generator)
        integrator = replace(integrator, step_size=min(step, cap))
    step_size0 = integrator.step_size
    probs = []
    if n_warmup:
        adapt = DualAveraging(min(step_size0, cap), target)
        for _ in range(n_warmup):
            state = integrator._step(state, generator)
            probs.append(float(state.cache["accept_prob"].mean()))
            integrator = replace(integrator, step_size=min(adapt.update(probs[-1]), cap))
        integrator = replace(integrator, step_size=min(adapt.final_step_size, cap))
    state = state.evolve(
        accepted=torch.zeros_like(state.accepted),
        proposed=0,
        cache={"divergent": 0},
        rng=generator.get_state(),
    )
    return integrator, state, step_size0, probs


#: The attributes :func:`sample_hmc` records besides the energy's description and provenance.
HMC_ATTRS = (
    "method", "regime", "N", "p", "beta", "beta_N", "step_size", "step_size_initial",
    "n_leapfrog", "trajectory_length", "trajectory_length_requested", "jitter", "max_leapfrog",
    "compile", "n_warmup", "n_samples", "target_accept", "warmup_accept_prob", "n_divergent",
    "record_every",
)  # fmt: skip


def _hmc_params(integrator: HMC, state, step_size0, probs, run, record_every, extra) -> dict:
    """The attributes of a :func:`sample_hmc` dataset, in this order: the kernel, ``run`` (the
    chain's sizes and target), the warm-up's mean acceptance probability ``probs``, the
    divergent trajectories since the warm-up, ``record_every``, the energy's description and
    ``extra`` (the caller's ``extra_attrs``)."""
    N = state.omega.shape[-2]
    params = {
        "method": "hmc",
        "regime": integrator.regime,
        "N": N,
        "p": integrator.energy.dim,
        "beta": integrator.beta,
        "beta_N": effective_beta(integrator.beta, N, integrator.regime),
        "step_size": integrator.step_size,
        "step_size_initial": step_size0,
        "n_leapfrog": integrator.n_leapfrog,
        # the Hamiltonian time each trajectory ran (L ε: ≥ T, or less where L hit the cap)
        "trajectory_length": integrator.n_leapfrog * integrator.step_size,
        "trajectory_length_requested": integrator.trajectory_length,
        "jitter": integrator.jitter,
        "max_leapfrog": integrator.max_leapfrog,
        "compile": int(integrator.compile),
        **run,
        "warmup_accept_prob": float(np.mean(probs)) if probs else "none",
        "n_divergent": int(state.cache["divergent"]),
        "record_every": record_every,
        **integrator.energy.describe(),
    }
    return merge_attrs(params, extra)


__all__ = [
    "HMC",
    "MAX_LEAPFROG_CEILING",
    "effective_sample_size",
    "integrated_autocorr_time",
    "sample_hmc",
]
