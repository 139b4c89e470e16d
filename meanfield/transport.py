"""Exact W2 between two weighted point clouds on a sparse support, certified over all pairs.

The dense network simplex (``ot.emd2``) needs the whole N × M cost matrix: at N = 10⁴
particles against a 128² grid that is 1.6·10⁸ entries, minutes and gigabytes.  But the optimal
plan of the squared distance between two nearby measures only uses pairs of nearby points.
:func:`w2_sparse` therefore solves the transport problem exactly on a *sparse* set of pairs
and proves afterwards that no other pair could lower the cost (column generation):

1. A first support: the k nearest b-points of each a-point, the nearest a-point of each
   b-point, and the ≤ N + M − 1 pairs of the north-west-corner plan along a space-filling curve
   through both clouds, so the restricted problem always has a feasible plan.
2. Exact transport on the support: POT's network simplex on a sparse cost matrix
   (``ot.lp.emd_wrap.emd_c_sparse``, the LEMON solver of ``ot.emd``), warm-started from the
   previous round's dual potentials u (a-points) and v (b-points).
3. Pricing: the reduced costs

   .. math::

       r_{ij} = |x_i - y_j|^2 - u_i - v_j

   on a fixed *pool* of near pairs (more neighbours than the support) are cheap; pairs with
   r_ij < −τ join the support and step 2 runs again.
4. When the pool has no such pair, the check over *every* pair: min_j r_ij is a nearest-
   neighbour query after lifting each b-point to (y_j, √(V − v_j)), V ≥ max v, since
   |(x_i, 0) − (y_j, √(V − v_j))|² = r_ij + u_i + V (and the same from the b side).  A kd-tree
   per group of b-points with similar v (so the heights stay small) answers it exactly in
   O((N + M) log(N + M)), without the dense matrix.  Violating pairs join the support; if
   there are none, the plan is optimal for the full problem.

At the end weak duality bounds the result from below,

.. math::

    W_2^2 \\ge \\sum_i a_i u_i + \\sum_j b_j v_j - \\tau ,

so every value carries its own certificate (``w2_lower``).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.spatial import cKDTree

from .errors import ConvergenceError, InputError

#: Relative tolerance of the dual check: τ = DUAL_TOL · (1 + the largest cost + max|u| + max|v|),
#: far above the rounding of a float64 reduced cost, far below any cost that matters (raised to
#: twice the largest violation on the support, the network simplex's own tolerance, if larger).
DUAL_TOL = 1e-13


def _check_cloud(name: str, x, w):
    """Validated float64 points (n, p) and weights normalised to 1, zero weights dropped."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    if x.ndim != 2 or len(x) == 0 or not np.isfinite(x).all():
        raise InputError(f"{name} must be a finite array of shape (n, p) with n ≥ 1, got {x.shape}")
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (len(x),) or not np.isfinite(w).all() or (w < 0).any() or not w.sum() > 0:
        raise InputError(
            f"weights of {name} must be {len(x)} finite numbers ≥ 0, not all zero; got {w.shape}"
        )
    keep = w > 0
    return x[keep], w[keep] / w[keep].sum()


def _hilbert_key(q: np.ndarray, bits: int) -> np.ndarray:
    """Index along the Hilbert curve of integer points q (n, 2) in [0, 2**bits)²."""
    x, y = q[:, 0].copy(), q[:, 1].copy()
    key = np.zeros(len(q), dtype=np.int64)
    s = 1 << (bits - 1)
    while s > 0:
        rx, ry = (x & s) > 0, (y & s) > 0
        key += s * s * ((3 * rx) ^ ry)
        flip = ~ry & rx  # rotate the quadrant so the curve stays continuous
        x, y = np.where(flip, s - 1 - x, x), np.where(flip, s - 1 - y, y)
        x, y = np.where(~ry, y, x), np.where(~ry, x, y)
        s >>= 1
    return key


def _curve_order(z: np.ndarray) -> np.ndarray:
    """Key of each point (n, p) along a space-filling curve through their bounding box.

    The Hilbert curve in p = 2 (no long jumps, so the north-west-corner plan along it stays
    local), the Z-order (Morton) curve otherwise (in p = 1 both are the sorted order).
    """
    p = z.shape[1]
    bits = 16 if p == 2 else max(1, 62 // p)
    lo, hi = z.min(0), z.max(0)
    q = ((z - lo) / np.where(hi > lo, hi - lo, 1.0) * (2**bits - 1)).astype(np.int64)
    if p == 2:
        return _hilbert_key(q, bits)
    key = np.zeros(len(z), dtype=np.int64)
    for bit in range(bits - 1, -1, -1):  # interleave the bits, most significant first
        for d in range(p):
            key = (key << 1) | ((q[:, d] >> bit) & 1)
    return key


def _northwest_corner(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (i, j) of the north-west-corner plan of a and b in their given order.

    The plan sends the masses in order, like merging the two cumulative sums, so it is
    feasible and uses at most len(a) + len(b) − 1 pairs.
    """
    ca, cb = np.cumsum(a), np.cumsum(b)
    ca[-1] = cb[-1] = 1.0  # both normalised: the last breakpoints are the total mass
    cuts = np.unique(np.concatenate([[0.0], ca, cb]))
    mid = (cuts[:-1] + cuts[1:]) / 2  # one point inside each piece of the merged masses
    i = np.minimum(np.searchsorted(ca, mid), len(a) - 1)
    j = np.minimum(np.searchsorted(cb, mid), len(b) - 1)
    return i, j


def _first_support(xa, a, xb, b, k: int, near_b: np.ndarray, near_a: np.ndarray) -> np.ndarray:
    """Keys i·M + j of the k nearest b-points of each a-point, the nearest a-point of each
    b-point and the north-west-corner plan along a curve through both clouds (feasible)."""
    n, m = len(xa), len(xb)
    key = _curve_order(np.vstack([xa, xb]))
    oa, ob = np.argsort(key[:n], kind="stable"), np.argsort(key[n:], kind="stable")
    i, j = _northwest_corner(a[oa], b[ob])
    return _merged(
        np.repeat(np.arange(n, dtype=np.int64), k) * m + near_b[:, :k].ravel(),
        near_a[:, 0].astype(np.int64) * m + np.arange(m),
        oa[i].astype(np.int64) * m + ob[j],
    )


def _merged(*parts: np.ndarray) -> np.ndarray:
    """Sorted distinct keys of the concatenated parts (a sort, not numpy's hashing unique,
    which is several times slower on these 10⁵-long int64 arrays)."""
    keys = np.concatenate(parts)
    keys.sort()
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])]


def _pool(near_b: np.ndarray, near_a: np.ndarray, m: int) -> np.ndarray:
    """Keys of the priced pool: every a-point with its near b-points and the reverse."""
    n, ka = near_b.shape
    kb = near_a.shape[1]
    rows = np.repeat(np.arange(n, dtype=np.int64), ka) * m + near_b.ravel()
    cols = near_a.ravel().astype(np.int64) * m + np.repeat(np.arange(m, dtype=np.int64), kb)
    return _merged(rows, cols)


def _solve_restricted(a, b, I, J, c, init):
    """Optimal plan on the pairs (I, J) with costs c: (cost, u, v), by POT's network simplex.

    ``init`` = (u, v) of the previous round, or None; the warm start matters: a cold solve
    returns an arbitrary one of the many optimal duals and the rounds need not settle.
    """
    try:  # POT ≥ 0.9.7: the sparse LEMON network simplex
        from ot.lp.emd_wrap import emd_c_sparse
    except ImportError as err:  # pragma: no cover - depends on the installed POT
        raise ImportError(
            "meanfield.transport.w2_sparse needs POT >= 0.9.7 (its sparse network simplex): "
            "pip install 'pot>=0.9.7'"
        ) from err

    args = (a, b, I.astype(np.uint64), J.astype(np.uint64), c, 10**9)
    *_, cost, u, v, code = emd_c_sparse(*args, *init) if init else emd_c_sparse(*args)
    if code != 1:  # LEMON's OPTIMAL; the north-west-corner pairs rule out infeasibility
        raise ConvergenceError(f"network simplex on the sparse support failed (code {code})")
    return float(cost), u, v


#: Quantiles of v that split the b-points into groups for the lifted search: within a group
#: the lifted heights √(V_g − v_j) stay small, so each kd-tree query visits few nodes.
GROUP_QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)


def _violations(x, y, u, v, tau: float, per_row: int):
    """Pairs (i, j) with r_ij = |x_i − y_j|² − u_i − v_j < −τ, over all j, and min r.

    Exact: within a group of b-points with v ≤ V_g, the nearest lifted point
    (y_j, √(V_g − v_j)) to (x_i, 0) minimises r_ij + u_i + V_g (module docstring).  One
    neighbour per group settles the check; up to ``per_row`` per group are fetched only for
    the points that violate it.
    """
    edges = np.quantile(v, GROUP_QUANTILES)
    groups = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, len(edges) - 2)
    q = np.hstack([x, np.zeros((len(x), 1))])
    searches, best = [], np.full(len(x), np.inf)
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        tree = cKDTree(np.hstack([y[idx], np.sqrt(v[idx].max() - v[idx])[:, None]]))
        j = idx[tree.query(q, k=1, workers=-1)[1]]
        best = np.minimum(best, ((x - y[j]) ** 2).sum(1) - u - v[j])
        searches.append((idx, tree))
    rows = np.flatnonzero(best < -tau)
    bad_i, bad_j = [rows[:0]], [rows[:0]]
    for idx, tree in searches if len(rows) else ():
        jk = idx[
            tree.query(q[rows], k=min(per_row, len(idx)), workers=-1)[1].reshape(len(rows), -1)
        ]
        bad = ((x[rows, None, :] - y[jk]) ** 2).sum(-1) - u[rows, None] - v[jk] < -tau
        bad_i.append(np.repeat(rows, bad.sum(1)))
        bad_j.append(jk[bad])
    return np.concatenate(bad_i), np.concatenate(bad_j), float(best.min())


def _check_options(k, pool, per_row, max_rounds):
    for name, val in (("k", k), ("pool", pool), ("per_row", per_row), ("max_rounds", max_rounds)):
        if not (isinstance(val, int | np.integer) and val >= 1):
            raise InputError(f"{name} must be an integer ≥ 1, got {val!r}")


def w2_sparse(
    xa, wa, xb, wb, *, k: int = 6, pool: int = 24, per_row: int = 16, max_rounds: int = 200
) -> dict:
    r"""Exact W2 between Σ a_i δ_{x_i} and Σ b_j δ_{y_j}, solved on a sparse support.

    .. math::

        W_2^2 = \min_{\pi \ge 0,\ \pi \mathbf 1 = a,\ \pi^\top \mathbf 1 = b}
        \sum_{i,j} \pi_{ij} |x_i - y_j|^2
        \ \ge\ \sum_i a_i u_i + \sum_j b_j v_j - \tau
        \quad \text{when } |x_i - y_j|^2 - u_i - v_j \ge -\tau \text{ for all } i, j.

    Parameters
    ----------
    xa, xb : array (N, p), (M, p)
        The two clouds (e.g. particles and cell centres), same unit and dimension.
    wa, wb : array (N,), (M,)
        Their weights ≥ 0 (normalised here; zero weights dropped).
    k : int
        Nearest b-points per a-point in the first support (≥ 1).  Any k gives the exact
        value; it only moves work between the first solve and the later rounds.
    pool : int
        Nearest b-points per a-point priced at every round (and pool // 4 nearest a-points
        per b-point) before the check over all pairs (≥ 1).
    per_row : int
        Most violating pairs per point added after a check over all pairs (≥ 1).
    max_rounds : int
        Most rounds of (solve, pricing) before :class:`~meanfield.errors.ConvergenceError`.

    Returns
    -------
    dict
        ``w2``: √(cost of the optimal plan), in the unit of the points; ``w2_lower``: the
        certified lower bound √(Σ a u + Σ b v − τ); ``method``: "sparse_exact"; ``rounds``,
        ``pairs`` (support size at the end), ``tau`` (dual tolerance, squared units),
        ``seconds``.

    Examples
    --------
    A cloud against its translate by v = (0.3, 0.4): W2 = |v| = 0.5.

    >>> import numpy as np
    >>> from meanfield.transport import w2_sparse
    >>> x = np.random.default_rng(0).normal(size=(30, 2))
    >>> w = np.ones(30)
    >>> r = w2_sparse(x, w, x + np.array([0.3, 0.4]), w, k=2)
    >>> round(r["w2"], 6), bool(0.4999 < r["w2_lower"] <= r["w2"]), r["method"]
    (0.5, True, 'sparse_exact')

    The same value as the dense network simplex (``ot.emd2``) for unequal weights:

    >>> import math
    >>> import ot
    >>> rng = np.random.default_rng(1)
    >>> z, wz = rng.normal(size=(40, 2)), rng.random(40)
    >>> dense = math.sqrt(ot.emd2(w / 30, wz / wz.sum(), ot.dist(x, z)))
    >>> math.isclose(w2_sparse(x, w, z, wz, k=2)["w2"], dense, rel_tol=1e-9)
    True
    """
    t0 = time.perf_counter()
    _check_options(k, pool, per_row, max_rounds)
    xa, a = _check_cloud("xa", xa, wa)
    xb, b = _check_cloud("xb", xb, wb)
    if xa.shape[1] != xb.shape[1]:
        raise InputError(
            f"xa and xb must have the same dimension, got {xa.shape[1]} and {xb.shape[1]}"
        )
    out = _column_generation(xa, a, xb, b, k, pool, per_row, max_rounds)
    return {"method": "sparse_exact", **out, "seconds": time.perf_counter() - t0}


def _column_generation(xa, a, xb, b, k, pool, per_row, max_rounds) -> dict:
    """Rounds of (exact solve on the support, pricing) until no pair has r_ij < −τ.

    Returns ``w2``, ``w2_lower``, ``rounds``, ``pairs`` and ``tau`` (see :func:`w2_sparse`).
    """
    m = len(xb)
    near_b = cKDTree(xb).query(xa, k=min(max(k, pool), m), workers=-1)[1].reshape(len(xa), -1)
    near_a = cKDTree(xa).query(xb, k=min(max(1, pool // 4), len(xa)), workers=-1)[1]
    near_a = near_a.reshape(m, -1)
    keys, priced = _first_support(xa, a, xb, b, k, near_b, near_a), _pool(near_b, near_a, m)
    pi, pj = priced // m, priced % m
    pc = ((xa[pi] - xb[pj]) ** 2).sum(1)
    both = np.vstack([xa, xb])
    diam2 = float(((both.max(0) - both.min(0)) ** 2).sum())
    init = None
    for rnd in range(1, max_rounds + 1):
        I, J = keys // m, keys % m
        c = ((xa[I] - xb[J]) ** 2).sum(1)
        cost, u, v = _solve_restricted(a, b, I, J, c, init)
        init = (u, v)  # as returned: shifting them by a constant unsettles LEMON's warm start
        # τ covers the rounding of r and the solver's own tolerance, seen on the support
        # (where an optimal dual has r ≥ 0 exactly): a pair is only added for a real gain
        tau = DUAL_TOL * (1.0 + diam2 + float(np.abs(u).max() + np.abs(v).max()))
        tau = max(tau, -2.0 * float((c - u[I] - v[J]).min()))
        new = priced[pc - u[pi] - v[pj] < -tau]
        if len(new) == 0:  # the pool is clean: check every pair
            ia, ja, _ = _violations(xa, xb, u, v, tau, per_row)
            jb, ib, _ = _violations(xb, xa, v, u, tau, per_row)
            if len(ia) == 0 and len(jb) == 0:
                lower = float(a @ u + b @ v) - tau  # weak duality with (u − τ, v) feasible
                return {
                    "w2": math.sqrt(max(cost, 0.0)),
                    "w2_lower": math.sqrt(max(lower, 0.0)),
                    "rounds": rnd,
                    "pairs": int(len(keys)),
                    "tau": tau,
                }
            new = np.concatenate([ia * m + ja, ib * m + jb])
        keys = _merged(keys, new)
    raise ConvergenceError(f"w2_sparse: the dual check still fails after {max_rounds} rounds")


__all__ = ["w2_sparse", "DUAL_TOL"]
