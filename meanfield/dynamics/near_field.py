r"""The near-field pass of projected Langevin: nearest neighbours and the pair-force cap.

With an unsoftened singular pair kernel (:func:`meanfield.dynamics.langevin.singular_pair_terms`)
each step of :class:`~meanfield.dynamics.langevin.ProjectedLangevin` makes one pass over the
close pairs.  :func:`near_field` gives each particle's nearest neighbour (distance and index)
and, for ``pair_step="capped"``, the change of the drift that caps every singular pair force;
:func:`count_overshoot` counts the particles one drift step carries past their neighbour.

The cap.  The pair term λ/N² Σ_{i≠j} k(ω_i − ω_j) gives particle i the drift (2λ/N) c(r_ij²)
z_ij, z_ij = ω_i − ω_j, c = 2κ' (``kernel.grad_coeff_sq``).  One step moves i through the force
of j by η (2λ/N) abs(c) r_ij; the cap bounds that by f r_ij, f = :data:`PAIR_STEP_FRACTION`:

.. math::

    c \;\to\; \operatorname{sgn}(c)\, \min\!\Big(|c|, \frac{f N}{2\lambda\eta}\Big),

so no close pair is flung apart by more than r_ij / 2, nor carried past each other, by one
drift step.  For the log kernel (c = −1/r²) the cap acts below r* = (2λη / (f N))^(1/2), a
length that vanishes like √η: the capped step is consistent with the SDE as η → 0.

Complexity.  On the CPU from N = 1024 particles (float32/float64) the pass is a search per
replica, O(N log N) time and O(N) memory.  The nearest neighbours come, in p = 2 and 3, from
a compiled cell grid (``meanfield.dynamics._nearest_grid``: a counting sort and a search of
the 3^p cells around each particle, O(N) for a smooth cloud; a crowded grid, e.g. a far
outlier stretching the box, is left to the tree), in other p from a k = 2 k-d tree query;
the capped pairs are those within the cap radius r*, which the Riesz kernels (Coulomb and
log included) give in closed form, found by a k-d tree over the few particles whose nearest
neighbour lies within r*.  Measured, one thread, CPU time on a loaded 2-core machine, p = 2,
Gaussian cloud N(0, 0.4² I), N = 10⁶: the nearest neighbours took 0.19 s (tree build) +
0.74 s (k = 2 query) and take 0.18 s by the grid (uniform disc: 0.19 + 0.73 → 0.19 s;
p = 3: 0.22 + 1.05 → 0.37 s; at 10⁴ and 10⁵ the grid is 3-4x faster than the query alone in
p = 2, 2-3x in p = 3); the whole pass (log kernel, cap on) went from 1.17 to 0.33 s.  Below
1024, on other devices, for other dtypes and for kernels without a closed-form radius it is
a dense pass over blocks of rows, O(N² p) time and O(256 N p) memory.
:func:`count_overshoot` is O(N p).

References
----------
- M. Hutzenthaler, A. Jentzen, P. E. Kloeden, "Strong convergence of an explicit numerical
  method for SDEs with nonglobally Lipschitz continuous coefficients", Ann. Appl. Probab. 22
  (2012) (taming the drift, of which the pair cap is a form).
- J. L. Bentley, "Multidimensional binary search trees used for associative searching",
  Commun. ACM 18 (1975) (the k-d tree).
- J. L. Bentley, B. W. Weide, A. C. Yao, "Optimal expected-time algorithms for closest point
  problems", ACM Trans. Math. Softw. 6 (1980) (the cell grid).

See Also
--------
meanfield.dynamics.langevin.ProjectedLangevin : the step that applies the cap.
meanfield.dynamics.langevin.singular_pair_terms : the terms whose forces are capped.
meanfield.errors.OvershootWarning : the warning the overshoot count leads to.
meanfield.pairsum.pair_sums : the uncapped pair sums.
"""

from __future__ import annotations

import math

import numpy as np
import torch

#: The capped pair step moves a particle by at most this fraction of its distance r_ij to
#: each other particle j through the pair force of j (so no close pair is even flung apart
#: by more than r_ij / 2, nor carried past each other, by one drift step).
PAIR_STEP_FRACTION = 0.25
#: Rows of the pair matrix the near-field pass holds at once (memory O(block · N · p)).
_NEAR_BLOCK = 256


#: Particles from which :func:`near_field` finds the close pairs with a k-d tree, O(N log N),
#: instead of the dense O(N²) block pass (CPU float32/float64 tensors only).  Measured on the
#: loaded 2-core machine, one thread, p = 2, log kernel: the two cost the same near N = 128
#: (0.5 ms); at 256, 512, 1024 the dense pass takes 3.5, 16, 56 ms and the tree 0.5, 0.7,
#: 1.0 ms.  Below 1024 the dense pass is kept: it costs little there, and the systems of
#: 1000 particles or fewer keep their chains bit for bit.
_NEAR_TREE_MIN_N = 1024
#: Candidate pairs per particle that one replica's tree path holds, beyond a floor of
#: _NEAR_TREE_PAIR_FLOOR (at N = 10⁶: 5·10⁶ pairs, 80 MB of indices): past it (a cap firing on
#: a large share of all pairs, e.g. a collapsed cluster) the cap of that replica is taken by the
#: dense block pass, whose memory is bounded.
_NEAR_TREE_PAIRS_PER_PARTICLE = 4
#: The pair budget's floor (see _NEAR_TREE_PAIRS_PER_PARTICLE).
_NEAR_TREE_PAIR_FLOOR = 1 << 20
#: Candidate pairs evaluated at once by the tree path (memory O(chunk · p)).
_NEAR_TREE_CHUNK = 1 << 20
#: Dimensions in which the tree path finds the nearest neighbours by a compiled cell grid
#: (:mod:`meanfield.dynamics._nearest_grid`) instead of the k = 2 tree query.  Measured on
#: the loaded 2-core machine, one thread, CPU time, tree build + query against the grid
#: (sort + search): faster from N = 128 up in p = 2 and 3 (Gaussian cloud and uniform disc;
#: at 1024: 0.45 → 0.10 ms, p = 3: 0.72 → 0.16 ms), so no crossover is kept below the tree
#: path's own threshold.
_NEAR_GRID_DIMS = (2, 3)
#: The grid's load Σ_c n_c² / N (points in a point's own cell, on average) above which the
#: tree path keeps the tree: a crowded grid costs O(load · N).  Measured at N = 1e5 on a dense
#: Gaussian inside a uniform background, the grid's time over the tree's: 0.27 at load 27,
#: 0.40 at 90, 0.74 at 290, 1.6 at 770 (p = 2); 0.44 at 46, 0.62 at 144, 3.0 at 1300
#: (p = 3).  A smooth cloud has a load of 2-22 (uniform disc, Gaussian in p = 2 and 3).
_NEAR_GRID_MAX_LOAD = 64.0


def _cap_radius_sq(kernel, limit: float) -> float | None:
    r"""r*², the squared distance below which the kernel's pair coefficient exceeds the cap:
    abs(c(r²)) > ``limit`` exactly when r² < r*², or None when that is not known in closed form.

    Riesz (and Coulomb), s > −2, softening ε: c(r²) = −a u^(−(s+2)/2), u = r² + ε², a = abs(s)
    (1 at s = 0), strictly decreasing in abs value, so r*² = (a/limit)^(2/(s+2)) − ε² (0 when
    negative).  Every other kernel (a user's κ may give a non-monotone abs(c), for which no
    radius bounds the capped pairs) is None: its cap is taken by the dense pass.
    """
    from ..kernels import Coulomb, Riesz  # the kernels sit below the dynamics

    if type(kernel) not in (Riesz, Coulomb) or not kernel.s > -2:
        return None
    a = abs(kernel.s) if kernel.s != 0 else 1.0
    log_u = math.log(a / limit) * 2 / (kernel.s + 2)
    if log_u > 700:  # r* beyond every float distance: each pair is capped
        return None
    return max(math.exp(log_u) - kernel.softening**2, 0.0)


def _cap_margin(dtype) -> float:
    """Relative margin by which the tree's candidate radius exceeds r*: far above the rounding
    of r² (a few ulp) and of r*² (closed form), so no pair the exact test caps is missed."""
    return 1e6 * torch.finfo(dtype).eps


def _add_cap(correction, capped, z, r2, i, j, terms, limits, N):
    """Add the cap corrections of the pairs (i, j), z = ω_i − ω_j, r2 = |z|², to both ends
    (antisymmetric: −z for j) and mark the particles of capped pairs; the test abs(c) > limit is
    the dense pass's, on the same r²."""
    for term, limit in zip(terms, limits, strict=True):
        c = term.kernel.grad_coeff_sq(r2)
        over = c.abs() > limit
        if not bool(over.any()):
            continue
        delta = torch.where(over, torch.sign(c) * limit - c, torch.zeros_like(c))
        push = (2 * term.lam / N) * (delta[:, None] * z)
        correction.index_add_(0, i, push)
        correction.index_add_(0, j, -push)
        capped[i[over]] = True
        capped[j[over]] = True


def _near_field_dense(omega, terms, eta, cap):
    """The dense block pass of :func:`near_field`: O(N² p) time, O(block · N · p) memory;
    returns (correction, nearest, neighbour, capped mask (..., N))."""
    N = omega.shape[-2]
    correction = torch.zeros_like(omega)
    nearest = omega.new_empty(omega.shape[:-1])
    neighbour = torch.empty(omega.shape[:-1], dtype=torch.long, device=omega.device)
    capped = torch.zeros(omega.shape[:-1], dtype=torch.bool, device=omega.device)
    for lo in range(0, N, _NEAR_BLOCK):
        hi = min(N, lo + _NEAR_BLOCK)
        z = omega[..., lo:hi, None, :] - omega[..., None, :, :]  # (..., b, N, p)
        r2 = (z * z).sum(-1)
        rows = torch.arange(hi - lo, device=omega.device)
        r2[..., rows, rows + lo] = math.inf  # no self-pair
        best = r2.min(-1)
        nearest[..., lo:hi], neighbour[..., lo:hi] = best.values.sqrt(), best.indices
        if not cap:
            continue
        for term in terms:
            limit = PAIR_STEP_FRACTION * N / (2 * term.lam * eta)
            c = term.kernel.grad_coeff_sq(r2)  # 0 at coincident points and at r2 = inf
            over = c.abs() > limit
            if not bool(over.any()):
                continue
            capped[..., lo:hi] |= over.any(-1)
            delta = torch.where(over, torch.sign(c) * limit - c, torch.zeros_like(c))
            correction[..., lo:hi, :] += (2 * term.lam / N) * (delta[..., None] * z).sum(-2)
    return correction, nearest, neighbour, capped


def _nearest_by_grid(points):
    """(distance, index) of each point's nearest other point by the compiled cell grid, on
    ``torch.get_num_threads()`` threads, or None where the grid declines (p not 2 or 3, a
    crowded grid: :data:`_NEAR_GRID_MAX_LOAD`)."""
    if points.shape[1] not in _NEAR_GRID_DIMS:
        return None
    from .._fastsums_ewald import _numba_threads  # restores torch's thread count after numba
    from ._nearest_grid import nearest_neighbours

    with _numba_threads(torch.get_num_threads()):
        return nearest_neighbours(points, max_load=_NEAR_GRID_MAX_LOAD)


def _nearest_by_tree(points):
    """(distance, index) of each point's nearest other point by ``cKDTree.query(k=2)``."""
    from scipy.spatial import cKDTree

    N = len(points)
    tree = cKDTree(points, balanced_tree=False, compact_nodes=False)
    order = tree.indices  # queried in the tree's order: a cache-friendly walk, ≈ 3× faster
    dist, found = tree.query(points[order], k=2, workers=torch.get_num_threads())
    first = found[:, 0] != order  # a coincident point may be listed before the point itself
    nb = np.empty(N, dtype=np.int64)
    nb[order] = np.where(first, found[:, 0], found[:, 1])
    d_nb = np.empty(N)
    d_nb[order] = np.where(first, dist[:, 0], dist[:, 1])
    return d_nb, nb


def _near_field_tree(omega, terms, eta, cap):
    """The k-d tree pass of :func:`near_field` (CPU): per replica, the nearest neighbours by
    a compiled cell grid (p = 2, 3; :mod:`meanfield.dynamics._nearest_grid`) or by
    ``cKDTree.query(k=2)``, and the capped pairs among the particles whose nearest neighbour
    lies within the largest cap radius; O(N log N + pairs) time, O(N + pairs) memory."""
    from scipy.spatial import cKDTree

    N, p = omega.shape[-2:]
    terms = list(terms) if cap else []
    flat = omega.reshape(-1, N, p)
    correction = torch.zeros_like(flat)
    nearest = flat.new_empty(flat.shape[:-1])
    neighbour = torch.empty(flat.shape[:-1], dtype=torch.long)
    capped = torch.zeros(flat.shape[:-1], dtype=torch.bool)
    limits = [PAIR_STEP_FRACTION * N / (2 * t.lam * eta) for t in terms]
    radii2 = [_cap_radius_sq(t.kernel, lim) for t, lim in zip(terms, limits, strict=True)]
    dense_terms = [t for t, r2 in zip(terms, radii2, strict=True) if r2 is None]
    tree_terms = [t for t, r2 in zip(terms, radii2, strict=True) if r2]  # r*² = 0: never capped
    tree_limits = [lim for lim, r2 in zip(limits, radii2, strict=True) if r2]
    reach = math.sqrt(max(r2 for r2 in radii2 if r2)) if tree_terms else 0.0
    reach *= 1 + _cap_margin(omega.dtype)
    budget = _NEAR_TREE_PAIRS_PER_PARTICLE * N + _NEAR_TREE_PAIR_FLOOR
    for b, x in enumerate(flat.detach()):
        points = x.numpy().astype(np.float64, copy=False)
        found = _nearest_by_grid(points)
        d_nb, nb = _nearest_by_tree(points) if found is None else found
        nb_t = torch.from_numpy(nb)
        z = flat[b] - flat[b][nb_t]
        nearest[b] = (z * z).sum(-1).sqrt()  # as the dense pass computes it
        neighbour[b] = nb_t
        dense_here = dense_terms
        # a pair within the reach joins two particles whose nearest neighbours lie within it
        close = np.flatnonzero(d_nb <= reach) if tree_terms else []
        if len(close) > 1:
            sub = cKDTree(points[close])
            if (sub.count_neighbors(sub, reach) - len(close)) // 2 > budget:
                dense_here = dense_terms + tree_terms  # too many pairs to hold: dense memory
            else:
                pairs = torch.from_numpy(close[sub.query_pairs(reach, output_type="ndarray")])
                for ij in pairs.split(_NEAR_TREE_CHUNK):
                    i, j = ij[:, 0], ij[:, 1]
                    zp = flat[b][i] - flat[b][j]
                    args = (zp, (zp * zp).sum(-1), i, j, tree_terms, tree_limits, N)
                    _add_cap(correction[b], capped[b], *args)
        if dense_here:
            extra, *_, mask = _near_field_dense(flat[b : b + 1], dense_here, eta, True)
            correction[b] += extra[0]
            capped[b] |= mask[0]
    shape = omega.shape[:-1]
    return correction.reshape(omega.shape), nearest.reshape(shape), neighbour.reshape(shape), capped


def near_field(omega: torch.Tensor, terms, eta: float, *, cap: bool):
    r"""One pass over the pairs: each particle's nearest neighbour and, with ``cap``, the
    change of the drift that caps every singular pair force.

    The pair term λ/N² Σ_{i≠j} k(ω_i − ω_j) gives particle i the drift (2λ/N) c(r_ij²) z_ij,
    z_ij = ω_i − ω_j, with c = 2κ' (``kernel.grad_coeff_sq``).  Its displacement over one
    step, η (2λ/N) abs(c) r_ij, is capped at f r_ij (f = :data:`PAIR_STEP_FRACTION`), i.e. abs(c) at
    f N / (2λη):

    .. math::

        c \;\to\; \operatorname{sgn}(c)\, \min\!\Big(|c|, \frac{f N}{2\lambda\eta}\Big)

    For the log kernel (c = −1/r²) the cap acts below r* = (2λη / (f N))^(1/2), a length that
    vanishes like √η: the step is consistent with the SDE as η → 0.

    Two paths give the same result (the correction up to the order of summation):

    * N ≥ 1024 on the CPU (float32 or float64): per replica, O(N log N) time and O(N)
      memory.  The nearest neighbours come from a compiled cell grid in p = 2 and 3 (exact:
      the float64 distances of the k-d tree, the lowest index among equal distances, as in
      the dense pass; a crowded grid falls back to the tree) and from a k = 2 query of a k-d
      tree (:class:`scipy.spatial.cKDTree`) in other p.  The capped pairs lie within the
      radius r* where abs(c) = f N/(2λη), which the Riesz kernels (Coulomb and log included:
      abs(c) = abs(s) (r² + ε²)^(−(s+2)/2), decreasing for s > −2) give in closed form, so
      only the pairs within r* (times 1 + 10⁶ ulp) are formed, by a k-d tree, and tested as
      in the dense pass.  A kernel without that closed form (a user's κ, whose abs(c) need
      not decrease) has its cap taken by the dense pass, O(N²).
      Measured (p = 2, Gaussian cloud, log kernel, λ = 1/2, η = 0.005, one thread, CPU
      time on a loaded 2-core machine): 0.004 s at N = 10⁴ (the dense pass: 4.1 s), 0.027 s
      at 10⁵, 0.33 s at 10⁶ (with the k = 2 tree query for the nearest neighbours: 0.009,
      0.10, 1.17 s).
    * otherwise (small N, other devices, other dtypes, non-finite points): dense blocks of
      rows, O(N² p) time, O(256 N p) memory.

    Parameters
    ----------
    omega : tensor (..., N, p)
    terms : list of PairInteraction
        :func:`~meanfield.dynamics.langevin.singular_pair_terms` of the energy.
    eta : float
        The step η.
    cap : bool
        Compute the capping correction (else it is zero).

    Returns
    -------
    correction : tensor (..., N, p)
        Add to the drift N∇H_N (zero for the pairs below the cap and for coincident points).
    nearest : tensor (..., N)
        Each particle's distance to its nearest neighbour (inf for N = 1).
    neighbour : long tensor (..., N)
        Its index.
    n_capped : int
        Particles (over all replicas) with at least one capped pair.

    See Also
    --------
    meanfield.dynamics.langevin.ProjectedLangevin : the step that applies the cap (``pair_step``).
    count_overshoot : the count of particles carried past a neighbour.
    meanfield.dynamics.langevin.singular_pair_terms : the terms whose forces are capped.
    meanfield.pairsum.pair_sums : the uncapped pair sums.

    References
    ----------
    - M. Hutzenthaler, A. Jentzen, P. E. Kloeden, "Strong convergence of an explicit numerical
      method for SDEs with nonglobally Lipschitz continuous coefficients", Ann. Appl. Probab. 22
      (2012) (taming the drift, of which the pair cap is a form).
    - J. L. Bentley, "Multidimensional binary search trees used for associative searching",
      Commun. ACM 18 (1975) (the k-d tree).

    Examples
    --------
    Two log-gas particles 1e-3 apart, N = 2, λ = 1/2, η = 0.01: the pair drift 1/(N r) = 500
    would move each by 5 = 5000 r; the cap leaves f r / η = 0.025, a displacement of r / 4.

    >>> import torch
    >>> from meanfield.energy import PairInteraction
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.dynamics.near_field import near_field
    >>> omega = torch.tensor([[0.0], [1e-3]], dtype=torch.float64)
    >>> term = PairInteraction(Riesz(0.0), 0.5)
    >>> corr, nearest, neighbour, n = near_field(omega, [term], 0.01, cap=True)
    >>> drift = 2 * term.grad(omega)  # N ∇H_N
    >>> [round(v, 6) for v in (drift + corr).flatten().tolist()], nearest.tolist(), n
    ([0.025, -0.025], [0.001, 0.001], 2)
    """
    N = omega.shape[-2]
    tree = (
        N >= _NEAR_TREE_MIN_N
        and omega.device.type == "cpu"
        and omega.dtype in (torch.float32, torch.float64)
        and bool(torch.isfinite(omega).all())  # the tree refuses non-finite points
    )
    run = _near_field_tree if tree else _near_field_dense
    correction, nearest, neighbour, capped = run(omega, terms, eta, cap)
    return correction, nearest, neighbour, int(capped.sum())


def count_overshoot(omega, drift, eta: float, nearest, neighbour) -> int:
    r"""Particles (over all replicas) that one drift step carries, relative to their nearest
    neighbour j, by more than their distance r_ij:

    .. math::

        \eta\, \|b_i - b_j\| > \|\omega_i - \omega_j\|, \qquad b = N \nabla H_N

    (a uniform drift moves neighbours together and carries nobody past anyone, so the drift
    is taken relative to the neighbour's).

    See Also
    --------
    near_field : the nearest neighbours it uses.
    meanfield.errors.OvershootWarning : the warning the count leads to.
    meanfield.dynamics.langevin.ProjectedLangevin : the explicit step it judges.

    Examples
    --------
    >>> import torch
    >>> from meanfield.dynamics.near_field import count_overshoot
    >>> omega = torch.tensor([[0.0], [0.01], [1.0]], dtype=torch.float64)
    >>> drift = torch.tensor([[1.0], [-1.0], [0.0]], dtype=torch.float64)
    >>> nearest = torch.tensor([0.01, 0.01, 0.99], dtype=torch.float64)
    >>> neighbour = torch.tensor([1, 0, 1])
    >>> count_overshoot(omega, drift, 0.1, nearest, neighbour)  # 0.1·2 > 0.01 twice
    2
    """
    other = torch.gather(drift, -2, neighbour[..., None].expand_as(drift))
    relative = eta * (drift - other).norm(dim=-1)
    return int((relative > nearest).sum())


__all__ = ["PAIR_STEP_FRACTION", "count_overshoot", "near_field"]
