"""The energy E(μ) = ∫V dμ − A(μ) + λ ∬ k(ω − ω') μ(dω) μ(dω'), defined once (THEORY §2).

An :class:`Energy` is a sum of terms.  Each term gives, for particles Ω of shape (..., N, p)
(leading axes are independent replicas):

* ``value(Ω)``  the finite-N energy H_N(Ω) = E(μ_N) with the diagonal i = j left out of every
  pair sum, shape (...);
* ``grad(Ω)``   its analytic gradient ∇_Ω H_N, shape (..., N, p);
* ``first_variation(at, points, weights)``  δE/δμ evaluated at arbitrary points ``at`` (M, p)
  for a measure μ = Σ_k w_k δ_{points_k}: what the grid solver consumes, with the grid cells as
  the weighted points.

So the particle dynamics (:mod:`meanfield.dynamics.langevin`) and the McKean–Vlasov solver
(:mod:`meanfield.pde`) read the same object.  Everything is batched torch, float64 by default,
on CPU or CUDA; pair sums are chunked so memory stays O(N · chunk).

Conventions (also in the README):

* finite-N pair sums exclude i = j, so E[H_N] = E(μ) for iid particles (U-statistics);
* the *normalised* (Cristianini) alignment is a ratio, not a sum of pair energies, so it uses
  the full empirical kernel K_Ω = ΦᵀΦ/N, diagonal included: H_N = −A(μ_N) exactly;
* targets: binary labels ±1 give T = y yᵀ; C ≥ 2 class ids give T_jk = 1 if y_j = y_k else
  −1/(C − 1).  Both are stored in the low-rank form T = U diag(w) Uᵀ, so nothing n × n is
  built for the linear form.

Layout, one concept per module; every public name is imported from here, its public home
(``meanfield.energy.Energy``, and so in descriptions, pickles and the API reference):

* :mod:`meanfield.energy.protocol`: the term protocol (:class:`Term`, :data:`TERM_KINDS`,
  binding a term to the particles' dimension, dtype and device);
* :mod:`meanfield.energy.potentials`: the one-body potentials V;
* :mod:`meanfield.energy.alignment`: the targets and the four kernel–target alignments;
* :mod:`meanfield.energy.pair`: the pair interaction and its chunked pair sums;
* :mod:`meanfield.energy.model`: :class:`Energy`, the sum of the terms on a domain.
"""

from __future__ import annotations

import inspect as _inspect

from .alignment import (
    AlignmentTerm,
    CentredAlignment,
    LinearAlignment,
    NormalisedAlignment,
    RiskAlignment,
    target_factors,
    target_matrix,
)
from .model import Energy, check_n_particles
from .pair import (
    PAIR_CHUNK_ELEMENTS,
    PairInteraction,
    PeriodicPairInteraction,
    check_periodic_terms,
)
from .potentials import CallablePotential, DoubleWellPotential, Potential, QuadraticPotential
from .protocol import TERM_KINDS, Term, UnboundTermError


def _publish(*objects) -> None:
    """Give each object (and its methods) this package as its module, as numpy's
    ``set_module`` does: ``meanfield.energy`` is the one address of every public name (the
    front door's home, the plain-data descriptions ``meanfield.energy:QuadraticPotential``,
    the API reference and the doctest collection), whichever file defines it."""
    for obj in objects:
        obj.__module__ = __name__
        if not isinstance(obj, type):
            continue
        for attr in vars(obj).values():
            fn = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            if _inspect.isfunction(fn) and fn.__module__ != __name__:
                fn.__module__ = __name__


_publish(
    PeriodicPairInteraction,
    check_periodic_terms,
    Term,
    UnboundTermError,
    Potential,
    QuadraticPotential,
    DoubleWellPotential,
    CallablePotential,
    AlignmentTerm,
    LinearAlignment,
    RiskAlignment,
    NormalisedAlignment,
    CentredAlignment,
    PairInteraction,
    Energy,
    target_factors,
    target_matrix,
    check_n_particles,
)

__all__ = [
    "Energy",
    "Term",
    "AlignmentTerm",
    "Potential",
    "QuadraticPotential",
    "DoubleWellPotential",
    "CallablePotential",
    "LinearAlignment",
    "RiskAlignment",
    "NormalisedAlignment",
    "CentredAlignment",
    "PairInteraction",
    "PeriodicPairInteraction",
    "check_periodic_terms",
    "target_factors",
    "target_matrix",
    "PAIR_CHUNK_ELEMENTS",
    "TERM_KINDS",
    "UnboundTermError",
    "check_n_particles",
]
