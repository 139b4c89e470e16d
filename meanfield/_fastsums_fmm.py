"""The p = 3 Coulomb sums by FMM3D, with the close pairs summed exactly (private to
:mod:`meanfield.fastsums`, whose :func:`~meanfield.fastsums.coulomb3d_sums` and
:func:`~meanfield.fastsums.coulomb3d_field` delegate here).

Why: FMM3D (``fmm3dpy.lfmm3d``) does not evaluate a close pair from the exact difference of
the given coordinates (which float64 holds exactly for nearby points, Sterbenz): the pair's
term carries a rounding error of the coordinates' *magnitude*, and below about 2⁻⁵¹ × the
box size the pair is dropped altogether.  A close pair dominates ‖pot‖, so the promised
relative ℓ² accuracy ``eps`` fails.

Error model (measured with ``fmm3dpy`` 2.1.0 against the direct float64 sum on the same
coordinates: a Gaussian cloud of 200–300 points with one particle moved to the centre, a
corner, a random place, or the whole cloud shifted by 1e3 / 1e4 / 1e6; the partner at
d = 1e-15 … 1e-6 of the box along an axis or a random direction; eps = 1e-4, 1e-6, 1e-10;
370 pairs): the relative error of the pair's term is

    |err| / |term| ≤ c · 2⁻⁵² · S / d,   S = max |coordinate| over all sources and targets,

with c ≤ 0.70 for the potential 1/d (median 0.12), c ≤ 1.46 for the gradient 1/d² (median
0.37), c ≤ 0.59 for a target near a source; independent of eps and of the direction.  S,
not the box, is the scale: the cloud shifted by 1e3 (box ≈ 6) has errors ≈ 150 × those of
the unshifted cloud (c ≈ 100–300 against the box, ≈ 2 against S).  So a pair closer than

    τ = CLOSE_FACTOR · 2⁻⁵² · S / eps,   CLOSE_FACTOR = 80 = 10 (eps/10) × 8 (margin),

is summed here exactly; a pair at d ≥ τ has a term error ≤ 1.46/80 · eps ≈ eps/55 (the
gradient, the worse of the two), a margin of 5.5 over the eps/10 aimed at.  τ ≥ 8·10³ ·
2⁻⁵² · S at eps ≤ 1e-2, far above FMM3D's drop threshold (2⁻⁵¹ × box ≤ 2⁻⁵⁰ S).

How: the close set (the particles, or charged atoms, with a partner within τ) gets charge 0
in the FMM (its members still receive the others' fields as targets); every nonzero charge
of the FMM is then more than τ from every target.  The close set's contributions to every
target are added by direct float64 sums in chunks, K × N pair evaluations (the pairs inside
the close set among them).  Exact twins keep the direct sum's conventions: +inf potential,
the zero subgradient of the pair.  With no close pair the FMM is called exactly as before
(bit-identical results); the only extra work is the search for close pairs.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ._fastsums_ewald import _import
from .errors import NumericalError

#: τ = CLOSE_FACTOR · 2⁻⁵² · max|coordinate| / eps: pairs closer than τ are summed exactly
#: (10 for an error ≤ eps/10, times a margin 8 over the measured worst c = 1.46; module doc)
CLOSE_FACTOR = 80.0

#: most exact pair evaluations K × N (close set × targets) allowed before refusing: 8–15 ns
#: each (one thread, measured at N = 10⁶, K = 2 … 5000), so ≤ 16–30 CPU-s, below one FMM at
#: N = 10⁶ (≈ 38 CPU-s at eps = 1e-6): the correction at most about doubles the fast sum
CLOSE_PAIR_BUDGET = 2e9

#: pair evaluations per chunk of the exact sums: ≈ 10 temporaries of 0.5 MB stay in cache
#: (2^21 per chunk was 5-10x slower, page faults of fresh 16 MB arrays)
_CHUNK = 1 << 16

#: candidate pairs of the 1D sweep below which the pairs are listed (query_pairs, bounded
#: memory); above, a 2-nearest-neighbour query finds the close set in O(N log N)
_PAIR_LIST_CAP = 1 << 22


def _close_radius(scale: float, eps: float) -> float:
    """τ: the distance below which FMM3D's rounding of a pair exceeds eps/55 of its term."""
    return CLOSE_FACTOR * 2.0**-52 * scale / eps


def _close_among(x: np.ndarray, tau: float) -> np.ndarray:
    """Mask (N,) of the points with another point within τ (exact twins included)."""
    N = len(x)
    # a sweep along the first axis bounds the number of pairs within τ, so that listing
    # them (the fast way) never allocates more than _PAIR_LIST_CAP pairs
    c = np.sort(x[:, 0])
    candidates = int((np.searchsorted(c, c + tau, side="right") - np.arange(1, N + 1)).sum())
    tree = cKDTree(x, balanced_tree=False, compact_nodes=False)
    close = np.zeros(N, dtype=bool)
    if candidates <= _PAIR_LIST_CAP:
        pairs = tree.query_pairs(tau, output_type="ndarray")
        close[pairs.ravel()] = True
    else:
        dist, _ = tree.query(x, k=2, distance_upper_bound=tau)
        close = dist[:, 1] <= tau
    return close


def _near(sources: np.ndarray, targets: np.ndarray, tau: float) -> np.ndarray:
    """Mask (K,) of the sources with a target within τ."""
    if len(targets) == 0 or len(sources) == 0:
        return np.zeros(len(sources), dtype=bool)
    dist, _ = cKDTree(targets).query(sources, k=1, distance_upper_bound=tau)
    return dist <= tau


def _refuse_large(K: int, n_targets: int, tau: float, eps: float, what: str) -> None:
    if K * n_targets > CLOSE_PAIR_BUDGET:
        raise NumericalError(
            f"{what}: {K} of the points have a partner closer than tau = {tau:.3g} (below tau "
            f"FMM3D's rounding exceeds eps/10 of a pair's term, tau = {CLOSE_FACTOR:g} * 2^-52 "
            f"* max|coordinate| / eps), and summing them exactly would take {K} x {n_targets} "
            f"pair evaluations, over the budget of {CLOSE_PAIR_BUDGET:.3g}: use a larger eps "
            f"(got {eps:g}; tau is proportional to 1/eps) or the direct sum "
            "(FastCoulombInteraction(min_n=...) above N, or meanfield.pairsum.pair_sums)"
        )


def _exact(targets, sources, charges, pot, grad, in_sources):
    """Add Σ_s q_s/‖t − s‖ (and −Σ_s q_s (t − s)/‖t − s‖³ if ``grad`` is not None) to
    ``pot``/``grad`` in place, by direct float64 sums over target chunks; exact coincidences
    add nothing (the zero subgradient).  ``in_sources`` (M,) marks the targets that are
    themselves among the sources (one exact coincidence with itself each).  Returns the mask
    of the targets with a charged exact twin (+inf in the direct sum)."""
    K = len(sources)
    B = max(1, _CHUNK // K)
    twin = np.zeros(len(targets), dtype=bool)
    charged = charges > 0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        for lo in range(0, len(targets), B):
            hi = min(lo + B, len(targets))
            # per axis (K, B), targets along the fast axis (the sums over the sources are
            # then matrix-vector products); the differences are exact when close (Sterbenz)
            z = [targets[None, lo:hi, k] - sources[:, k, None] for k in range(3)]
            r2 = z[0] * z[0] + z[1] * z[1] + z[2] * z[2]
            inv = 1.0 / np.sqrt(r2)
            zero = (z[0] == 0.0) & (z[1] == 0.0) & (z[2] == 0.0)
            sub = r2 < np.finfo(float).tiny  # r < 1.5e-154: r² lost bits or underflowed
            if sub.any():  # rare: rescale before squaring there
                s, b = np.nonzero(sub & ~zero)
                d = np.stack([c[s, b] for c in z], axis=1)
                a = np.abs(d).max(1)
                inv[s, b] = 1.0 / (a * np.sqrt(((d / a[:, None]) ** 2).sum(1)))
            inv[zero] = 0.0
            pot[lo:hi] += charges @ inv
            if grad is not None:  # q/r² · unit vector: inf only below r ≈ 1e-154 (refused)
                w = inv * inv
                for k in range(3):
                    grad[lo:hi, k] -= charges @ (w * (z[k] * inv))
            twin[lo:hi] = zero[charged].sum(0) > in_sources[lo:hi]
    return twin


def _refuse_nonfinite(pot, grad, twin, what):
    bad = ~np.isfinite(pot) & ~twin
    if grad is not None:
        bad |= ~np.isfinite(grad).all(1)
    if bad.any():
        raise NumericalError(
            f"{what}: {int(bad.sum())} point(s) have a distinct partner so close (under ~1e-154) "
            "that 1/r^2 or 1/r overflows float64; the sum is not representable there: merge "
            "such points into exact twins (the zero subgradient) or move them apart"
        )


def _fmm_sums(x: np.ndarray, eps: float, want_grad: bool):
    """Σ_{j≠i} 1/‖x_i − x_j‖ (N,) and its gradient (N, 3) or None; see the module doc."""
    fmm3dpy = _import("fmm3dpy")
    N = len(x)
    tau = _close_radius(float(np.abs(x).max()), eps)
    close = _close_among(x, tau)
    K = int(close.sum())
    _refuse_large(K, N, tau, eps, "coulomb3d_sums")
    charges = np.ones(N)
    charges[close] = 0.0
    if K == N:  # nothing left for the FMM
        pot, grad = np.zeros(N), (np.zeros((N, 3)) if want_grad else None)
    else:
        out = fmm3dpy.lfmm3d(
            eps=eps, sources=np.asfortranarray(x.T), charges=charges, pg=2 if want_grad else 1
        )
        pot = 4 * np.pi * out.pot  # FMM3D's kernel is 1/(4π r)
        grad = 4 * np.pi * out.grad.T if want_grad else None
    if K == 0:
        return pot, grad
    grad = None if grad is None else np.ascontiguousarray(grad)
    twin = _exact(x, x[close], np.ones(K), pot, grad, close)
    _refuse_nonfinite(pot, grad, twin, "coulomb3d_sums")
    pot[twin] = np.inf
    return pot, grad


def _fmm_field(at: np.ndarray, points: np.ndarray, weights: np.ndarray, eps: float):
    """Σ_k w_k / ‖a_m − y_k‖ (M,) at the targets; see the module doc."""
    fmm3dpy = _import("fmm3dpy")
    if (at == points[0]).all() and (points == points[0]).all():
        # targets and atoms at one place: FMM3D has no box there (it returned NaN); Σ_k w_k/0
        return np.full(len(at), np.inf if (weights > 0).any() else 0.0)
    scale = max(float(np.abs(at).max(initial=0.0)), float(np.abs(points).max(initial=0.0)))
    tau = _close_radius(scale, eps)
    close = _near(points, at, tau) & (weights > 0)  # an uncharged atom adds nothing
    K = int(close.sum())
    _refuse_large(K, len(at), tau, eps, "coulomb3d_field")
    charges = np.ascontiguousarray(weights)
    if K:
        charges = charges.copy()
        charges[close] = 0.0
    out = fmm3dpy.lfmm3d(
        eps=eps,
        sources=np.asfortranarray(points.T),
        charges=charges,
        targets=np.asfortranarray(at.T),
        pgt=1,
    )
    pot = 4 * np.pi * out.pottarg
    if K == 0:
        return pot
    twin = _exact(at, points[close], weights[close], pot, None, np.zeros(len(at), dtype=int))
    _refuse_nonfinite(pot, None, twin, "coulomb3d_field")
    pot[twin] = np.inf
    return pot
