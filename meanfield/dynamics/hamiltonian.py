r"""The Hamiltonian flow of HMC: leapfrog steps with reflection at ∂𝒲, one trajectory with
its Metropolis decision, run eagerly or compiled in blocks of trajectories.

One leapfrog step of size ε (mass β_N, force N∇H_N, the O(1) drift of Algorithm 1):

.. math::

    v \leftarrow v - \tfrac{\varepsilon}{2} N\nabla H_N(\Omega), \quad
    (\Omega, v) \leftarrow B_\varepsilon(\Omega, v), \quad
    v \leftarrow v - \tfrac{\varepsilon}{2} N\nabla H_N(\Omega),

with B_ε the free flight with specular reflection (:func:`meanfield.domains.billiard`).  Each
piece has a single definition, run by :class:`~meanfield.dynamics.hmc.HMC` either with a
Python loop or traced into one :func:`torch.compile` call per block of trajectories
(:data:`FUSED_BLOCK`), where the leapfrog steps are a :func:`torch.while_loop`; the two paths
draw the same random numbers in the same order and agree to round-off.

References
----------
R. M. Neal, "MCMC using Hamiltonian dynamics", Handbook of MCMC, 2011.
"""

from __future__ import annotations

import functools
import math
import warnings
import weakref
from dataclasses import dataclass

import torch

from ..domains import billiard
from ..energy import Energy
from .chains import _noise, gibbs_potential, metropolis_decision


def _frozen_where_divergent(force: torch.Tensor):
    """(force with non-finite replicas zeroed, finite (...)): a non-finite force would send
    positions to inf/NaN, so those replicas are frozen (and rejected by the decision; the
    reverse trajectory would be rejected just the same)."""
    finite = torch.isfinite(force).all(-1).all(-1)
    return torch.where(finite[..., None, None], force, torch.zeros_like(force)), finite


def _leapfrog(energy: Energy, omega, v, force, eps, N: int):
    """One kick–drift–kick step with reflection: (Ω, v, N∇H_N(Ω), finite) after it.

    ``force`` is N∇H_N at ``omega``; shapes (..., N, p), ``finite`` (...).  The single
    definition of the step, run eagerly or traced into the compiled trajectory."""
    v = v - 0.5 * eps * force
    omega, v = billiard(energy.domain, omega, v, eps)
    force, finite = _frozen_where_divergent(N * energy.grad(omega))
    v = v - 0.5 * eps * force
    return omega, v, force, finite


def _trajectory(energy: Energy, omega, v, gradU, eps, n_inner, beta_N: float, loop):
    """L = n_inner + 1 leapfrog steps from (Ω, v), ∇U(Ω) given: (Ω, v, U, ∇U, term values
    (..., n_terms), finite (...)) at the end.

    The single definition of the flow, eager or compiled: ``loop(n, body, carry)`` runs the
    n_inner inner steps (:func:`_python_loop`, or :func:`_while_loop` when traced); the last
    step also gives U and each term's value (one pass over the pairs), which the decision
    and the records need."""
    N = omega.shape[-2]
    finite = torch.ones(omega.shape[:-2], dtype=torch.bool, device=omega.device)
    force = gradU / beta_N  # N ∇H_N: the O(1) drift

    def inner(omega, v, force, finite):
        omega, v, force, ok = _leapfrog(energy, omega, v, force, eps, N)
        return omega, v, force, finite & ok

    omega, v, force, finite = loop(n_inner, inner, (omega, v, force, finite))
    v = v - 0.5 * eps * force
    omega, v = billiard(energy.domain, omega, v, eps)
    U, gradU, terms = gibbs_potential(energy, omega, beta_N, terms=True)
    force, ok = _frozen_where_divergent(gradU / beta_N)
    v = v - 0.5 * eps * force
    return omega, v, U, gradU, terms, finite & ok & torch.isfinite(U)


def _transition(
    energy: Energy, omega, U, gradU, terms, uj, z, u, step, n_inner, *, beta_N, jitter, loop
):
    """One trajectory from (Ω, U, ∇U, term values) and its Metropolis decision per replica,
    given the draws of :meth:`HMC._draws` (jitter uniforms ``uj`` or None, normals ``z``,
    uniforms ``u``) and the step ε (a tensor (1,)): (Ω, U, ∇U, term values) after the decision,
    accept (...), min(1, exp(−ΔĤ)) (...) and the number of divergent trajectories (0-d).
    The single definition of HMC's step (eager, or compiled in blocks by
    :func:`_fused_block`)."""
    eps = step[0].expand(omega.shape[:-2])
    if uj is not None:
        eps = eps * (1 + jitter * (2 * uj - 1))
    eps = eps.to(omega)[..., None, None]
    v = z / math.sqrt(beta_N)  # v ~ N(0, I / β_N), as _velocities
    kinetic0 = _kinetic(v, beta_N)
    flow = _trajectory(energy, omega, v, gradU, eps, n_inner, beta_N, loop)
    new, v, U2, gradU2, terms2, finite = flow
    log_alpha = (U - U2) + (kinetic0 - _kinetic(v, beta_N))
    # a divergent trajectory (non-finite force, U or kinetic energy) has acceptance
    # probability 0 (−inf), never NaN
    finite = finite & torch.isfinite(log_alpha)
    log_alpha = torch.where(finite, log_alpha, torch.full_like(log_alpha, -math.inf))
    accept = metropolis_decision(log_alpha, u)
    # rejected replicas never read the proposal (torch.where), so its NaNs stay unseen
    a = accept[..., None, None]
    return (
        torch.where(a, new, omega),
        torch.where(accept, U2, U),
        torch.where(a, gradU2, gradU),
        torch.where(accept[..., None], terms2, terms),
        accept,
        torch.exp(log_alpha.clamp(max=0.0)),
        (~finite).sum(),
    )


def _python_loop(n: int, body, carry):
    """carry ← body(*carry), n times (the eager trajectory)."""
    for _ in range(n):
        carry = body(*carry)
    return carry


def _while_loop(n: torch.Tensor, body, carry, *, indexed: bool = False):
    """carry ← body(*carry) (``indexed``: body(i, *carry), i = 0 … n − 1 a 0-d tensor), n (a
    0-d integer tensor) times, as one :func:`torch.while_loop`: traced once, so the compiled
    trajectory's size and compilation do not grow with L."""

    def cond(i, *carry):
        return i < n

    def step(i, *carry):
        return (i + 1, *(body(i, *carry) if indexed else body(*carry)))

    return tuple(torch.while_loop(cond, step, (torch.zeros_like(n), *carry))[1:])


@dataclass(frozen=True)
class _Constants:
    """The floats a compiled HMC block is specialised on (an object's attributes are compiled
    in as constants; float arguments would be traced as symbols first, then specialised by a
    second trace)."""

    beta_N: float
    jitter: float


def _fused_block(
    energy: Energy, const: _Constants, omega, U, gradU, terms, uj, z, u, step, n_inner, n_traj
):
    """``n_traj`` ≤ K trajectories, each :func:`_transition` with the draws ``uj[k]``,
    ``z[k]``, ``u[k]`` (buffers of K) and its leapfrog steps a :func:`torch.while_loop`, the
    trajectories one more: (Ω, U, ∇U, term values, the last acceptance probability, the
    divergent trajectories, then per trajectory Ω (K, ..., N, p), term values (K, ...,
    n_terms) and accept (K, ...), the first ``n_traj`` set).  What :func:`_run_compiled`
    compiles."""
    K = z.shape[0]
    records = (
        omega.new_zeros((K, *omega.shape)),
        terms.new_zeros((K, *terms.shape)),
        torch.zeros((K, *U.shape), dtype=torch.bool, device=U.device),
    )
    kw = {"beta_N": const.beta_N, "jitter": const.jitter, "loop": _while_loop}

    def one(k, omega, U, gradU, terms, prob, n_div, r_omega, r_terms, r_accept):
        i = k.view(1)
        uj_k = None if uj is None else uj.index_select(0, i)[0]
        draws = (uj_k, z.index_select(0, i)[0], u.index_select(0, i)[0])
        out = _transition(energy, omega, U, gradU, terms, *draws, step, n_inner, **kw)
        omega, U, gradU, terms, accept, prob, nd = out
        r_omega = r_omega.index_copy(0, i, omega[None])
        r_terms = r_terms.index_copy(0, i, terms[None])
        r_accept = r_accept.index_copy(0, i, accept[None])
        return omega, U, gradU, terms, prob, n_div + nd, r_omega, r_terms, r_accept

    n_div = torch.zeros((), dtype=torch.int64, device=U.device)
    carry = (omega, U, gradU, terms, torch.zeros_like(U), n_div, *records)
    return _while_loop(n_traj, one, carry, indexed=True)


#: Most trajectories per call of the compiled HMC block (fewer when a block's buffers would
#: exceed 2^18 numbers); the per-call cost is shared by them.
FUSED_BLOCK = 32
_COMPILED = None
#: The energies whose trajectory did not compile as one graph (they run eagerly).
_NOT_FUSED: weakref.WeakSet = weakref.WeakSet()


def _block_size(omega: torch.Tensor) -> int:
    """Trajectories per compiled block for particles ``omega`` (a function of the shape only,
    so every block of a chain, the warm-up's single trajectories included, shares one
    compilation)."""
    return max(1, min(FUSED_BLOCK, 2**18 // max(1, omega.numel())))


def _run_compiled(energy: Energy, const: _Constants, args):
    """:func:`_fused_block` compiled (Inductor with its C++ wrapper; once per energy, shape,
    dtype, β_N and jitter: ε, L and the block's length are tensors), or None after a
    warning when this energy's trajectory does not trace as one graph (it runs eagerly from
    then on)."""
    global _COMPILED
    if _COMPILED is None:
        options = {"cpp_wrapper": True}
        _COMPILED = torch.compile(_fused_block, dynamic=False, fullgraph=True, options=options)
    args = tuple(a if a is None else a.contiguous() for a in args)
    for term in energy.terms:
        # a kernel's derived is_singular reads tensors into a Python bool, which the traced
        # graph cannot: derive it here, eagerly (it is then remembered)
        kernel = getattr(term, "kernel", None)
        if kernel is not None:
            kernel.is_singular  # noqa: B018
    try:
        with torch.no_grad():
            return _COMPILED(energy, const, *args)
    except _compile_errors() as err:
        _NOT_FUSED.add(energy)
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
        warnings.warn(
            "HMC(compile=True): this energy's trajectory does not compile as one graph "
            f"({type(err).__name__}: {reason}); it runs eagerly",
            UserWarning,
            stacklevel=5,
        )
        return None


@functools.lru_cache(maxsize=64)
def _int_tensor(n: int, device) -> torch.Tensor:
    """n as a 0-d int64 tensor on ``device`` (cached: an input of the compiled trajectory,
    never written)."""
    return torch.tensor(n, device=device)


def _step_tensor(step_size: float, like: torch.Tensor) -> torch.Tensor:
    """ε as a tensor (1,) of ``like``'s dtype and device: an input, so that a new ε during
    the warm-up does not recompile the fused trajectory (not 0-d: Dynamo reads a 0-d input
    as a Python float, then specialises on it and traces again)."""
    return torch.tensor([step_size], dtype=like.dtype, device=like.device)


def _compile_errors() -> tuple:
    """The exceptions of a trajectory that Dynamo cannot trace as one graph or Inductor
    cannot build (a user's error inside the energy is none of these and propagates)."""
    from torch._dynamo.exc import TorchDynamoException
    from torch._inductor.exc import InductorError

    return (TorchDynamoException, InductorError)


def _stacked_term_values(energy: Energy, omega) -> torch.Tensor:
    """Each term's value at ``omega``, stacked on a last axis (..., n_terms) in the order of
    ``energy.term_names`` (the ``term_values`` an HMC state carries)."""
    return torch.stack(list(energy.term_values(omega).values()), -1)


def _velocities(omega: torch.Tensor, generator: torch.Generator, beta_N: float) -> torch.Tensor:
    """Fresh velocities v ~ N(0, I / β_N), shape of ``omega`` (the mass is β_N)."""
    return _noise(omega.shape, generator, omega) / math.sqrt(beta_N)


def _kinetic(v: torch.Tensor, beta_N: float) -> torch.Tensor:
    """The kinetic energy β_N |v|² / 2 of each replica, shape (...)."""
    return 0.5 * beta_N * (v * v).sum((-1, -2))
