"""Exact W2 between two weighted point clouds on a sparse support, certified over all pairs.

The dense network simplex (``ot.emd2``) needs the whole N × M cost matrix: at N = 10⁴
particles against a 128² grid that is 1.6·10⁸ entries, minutes and gigabytes.  But the optimal
plan of the squared distance between two nearby measures only uses pairs of nearby points.
:func:`w2_sparse` therefore solves the transport problem exactly on a *sparse* set of pairs
and proves afterwards that no other pair could lower the cost (column generation):

1. A first support from the coarser problem (multiscale, after Mérigot 2011 and Schmitzer
   2016, "A sparse multiscale algorithm for dense optimal transport"): both clouds are
   aggregated on a grid with about 1/``COARSEN`` as many cells as the larger cloud has
   points (each occupied cell one atom at its barycentre, with its total weight), that
   problem is solved the same way (recursively, down to ≤ ``ALL_PAIRS_MAX`` pairs, solved
   on every pair), and every fine pair (i, j) whose cells (A, B) the coarse optimal plan
   links joins the support.  The product plan
   π_ij = Π_AB a_i b_j / (a_A b_B) lives on these pairs, so the first restricted problem is
   feasible; and it already holds most of the optimal pairs, also when the transport is far
   from the identity (a shift, a split, a flat against a peaked law), where the nearest
   pairs of each point do not.  (Without ``multiscale``, or where a level cannot be
   coarsened: the k nearest b-points of each a-point, the nearest a-point of each b-point and
   the north-west-corner plan along a space-filling curve.)
2. Exact transport on the support: POT's network simplex on a sparse cost matrix
   (``ot.lp.emd_wrap.emd_c_sparse``, the LEMON solver of ``ot.emd``), warm-started from the
   previous round's dual potentials u (a-points) and v (b-points).
3. Pricing around the current plan: the reduced costs

   .. math::

       r_{ij} = |x_i - y_j|^2 - u_i - v_j

   of the pairs next to the transported ones — for each (i, j) with π_ij > 0, i against the
   ``pool`` nearest b-points of y_j, j against the ``pool`` nearest a-points of x_i — are
   cheap; where the plan moves mass far, the improving pairs sit there, not around the point
   itself.  The ≤ ``per_row`` most violated pairs (r_ij < −τ) of each point join the support
   and step 2 runs again.
4. When the pool has no such pair, the check over *every* pair: min_j r_ij is a nearest-
   neighbour query after lifting each b-point to (y_j, √(V − v_j)), V ≥ max v, since
   |(x_i, 0) − (y_j, √(V − v_j))|² = r_ij + u_i + V.  A kd-tree per group of b-points with
   similar v (so the heights stay small) answers it exactly in O((N + M) log(N + M)),
   without the dense matrix.  If no pair violates, the plan is optimal for the full problem;
   else the most violated pairs of each row (and, by the same search from the b side, of
   each column) join the support.

At the end weak duality bounds the result from below: with u = v^c, the c-transform
u_i = min_j (|x_i − y_j|² − v_j) over *every* pair (the lifted search of step 4), and then
v ← u^c ≥ v the same way from the b side, (u, v) is feasible up to the rounding τ₀ of a
reduced cost, so

.. math::

    W_2^2 \\ge \\sum_i a_i u_i + \\sum_j b_j v_j - \\tau_0 ,

and every value carries its own certificate (``w2_lower``).  The network simplex's
potentials carry a common offset of once or twice its artificial arc cost (max c + 1) ×
(number of nodes) (3·10⁵ at 2 × 16 384 atoms against costs ≤ 8); r is blind to it, but τ₀
and the rounding bound of the certificate grow with max|u| + max|v|, which made the
interval of a W₂ of 0.0033 between two grid densities on 256² sub-cells [0, 0.020].  The
potentials are therefore centred (u − s, v + s, median u = median v) before any use.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.spatial import cKDTree

from ..errors import ConvergenceError, InputError, NumericalError
from .precision import _probabilities, common_frame

#: Relative tolerance of the dual check: τ₀ = DUAL_TOL · (1 + the largest cost + max|u| + max|v|)
#: with u, v centred (:func:`_centred`), far above the rounding of a float64 reduced cost, far
#: below any cost that matters (the check uses τ = twice the largest violation on the support,
#: the network simplex's own tolerance, if larger; the certificate loses τ₀ only).
DUAL_TOL = 1e-13


def _check_cloud(name: str, x, w):
    """Validated float64 points (n, p); those of weight > 0, their weights normalised to 1, and
    their indices."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    if x.ndim != 2 or len(x) == 0 or not np.isfinite(x).all():
        raise InputError(f"{name} must be a finite array of shape (n, p) with n ≥ 1, got {x.shape}")
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (len(x),) or not np.isfinite(w).all() or (w < 0).any() or not w.max() > 0:
        raise InputError(
            f"weights of {name} must be {len(x)} finite numbers ≥ 0, not all zero; got {w.shape}"
        )
    keep = np.flatnonzero(w > 0)
    return x, x[keep], _probabilities(w[keep]), keep


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
    """Optimal plan on the pairs (I, J) with costs c, by POT's network simplex.

    Returns (cost, u, v, flow) with flow = (i, j, mass) of the plan's positive entries.

    ``init`` = (u, v) of the previous round, or None; the warm start matters: a cold solve
    returns an arbitrary one of the many optimal duals and the rounds need not settle.
    """
    try:  # POT ≥ 0.9.7: the sparse LEMON network simplex
        from ot.lp.emd_wrap import emd_c_sparse
    except ImportError as err:  # pragma: no cover - depends on the installed POT
        raise ImportError(
            "meanfield.ot.sparse.w2_sparse needs POT >= 0.9.7 (its sparse network simplex): "
            "pip install 'pot>=0.9.7'"
        ) from err

    args = (a, b, I.astype(np.uint64), J.astype(np.uint64), c, 10**9)
    fi, fj, fx, cost, u, v, code = emd_c_sparse(*args, *init) if init else emd_c_sparse(*args)
    if code != 1:  # LEMON's OPTIMAL; every first support holds a feasible plan
        raise ConvergenceError(f"network simplex on the sparse support failed (code {code})")
    return float(cost), u, v, (fi.astype(np.int64), fj.astype(np.int64), fx)


#: Quantiles of v that split the b-points into groups for the lifted search: within a group
#: the lifted heights √(V_g − v_j) stay small, so each kd-tree query visits few nodes.
GROUP_QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)


def _violations(x, y, u, v, tau: float, per_row: int):
    """The ≤ ``per_row`` most violated pairs of each row: r_ij = |x_i − y_j|² − u_i − v_j < −τ,
    over all j, and min_j r_ij of each row (n,).

    Exact: within a group of b-points with v ≤ V_g, the nearest lifted point
    (y_j, √(V_g − v_j)) to (x_i, 0) minimises r_ij + u_i + V_g (module docstring).  One
    neighbour per group settles the check; ``per_row`` per group are fetched only for the rows
    that fail it, and of those the ``per_row`` most negative r over all groups are kept (a row
    that wants more gets them in a later round, after the solve has moved its potentials).
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
    bad_i, bad_j, bad_r = [rows[:0]], [rows[:0]], [np.zeros(0)]
    for idx, tree in searches if len(rows) else ():
        jk = idx[
            tree.query(q[rows], k=min(per_row, len(idx)), workers=-1)[1].reshape(len(rows), -1)
        ]
        r = ((x[rows, None, :] - y[jk]) ** 2).sum(-1) - u[rows, None] - v[jk]
        bad = r < -tau
        bad_i.append(np.repeat(rows, bad.sum(1)))
        bad_j.append(jk[bad])
        bad_r.append(r[bad])
    i, j = _most_negative(
        np.concatenate(bad_i), np.concatenate(bad_j), np.concatenate(bad_r), per_row
    )
    return i, j, best


def _most_negative(i: np.ndarray, j: np.ndarray, r: np.ndarray, cap: int):
    """The ≤ cap pairs of smallest r for each distinct i (pairs given once each)."""
    order = np.lexsort((r, i))
    i, j = i[order], j[order]
    first = np.concatenate([[True], i[1:] != i[:-1]])
    start = np.maximum.accumulate(np.where(first, np.arange(len(i)), 0))
    keep = np.arange(len(i)) - start < cap
    return i[keep], j[keep]


def _distinct(i: np.ndarray, j: np.ndarray, r: np.ndarray, m: int):
    """The pairs (i, j) with their r, each pair once."""
    key = i * m + j
    key, first = np.unique(key, return_index=True)
    return key // m, key % m, r[first]


#: Largest n_a × n_b solved on every pair at once (one network simplex; its optimum is the
#: full problem's, no check needed): the coarsest level of the multiscale scheme, and any
#: problem with a side of fewer than ``SMALL_SIDE`` points (too few for neighbour lists).
ALL_PAIRS_MAX = 2**18
SMALL_SIDE = 16
#: Each coarser level has about 1/COARSEN of the larger cloud's points, so n_a × n_b shrinks
#: ≈ COARSEN² per level in every dimension (√2 coarser per axis in 2D).  Gentle steps keep the
#: refined support thin: few fine points below each coarse pair (bench_w2.py --panel: 4,
#: i.e. 2× per axis in 2D, gave the same times at 10⁴ particles but supports 1.4× larger and
#: 1.2–1.5× longer solves at 3·10⁴ on the shifted and mixture cases).
COARSEN = 2
#: A cloud whose points fall ≥ CROWDED per occupied coarse cell on average is instead
#: coarsened 2 by 2 along its own space-filling curve (see :func:`_coarsen`).
CROWDED = 8
#: Largest first support of a level refined from the coarser plan, in pairs per point
#: (n_a + n_b): beyond it (clouds so uneven that a coarse cell holds most points) the level
#: starts from the k-nearest / north-west-corner support instead.
REFINE_MAX_PER_POINT = 64


def _check_options(k, pool, per_row, max_rounds):
    for name, val in (("k", k), ("pool", pool), ("per_row", per_row), ("max_rounds", max_rounds)):
        if not (isinstance(val, int | np.integer) and val >= 1):
            raise InputError(f"{name} must be an integer ≥ 1, got {val!r}")


def w2_sparse(
    xa,
    wa,
    xb,
    wb,
    *,
    k: int = 6,
    pool: int = 21,
    per_row: int = 4,
    max_rounds: int = 200,
    multiscale: bool = True,
    return_plan: bool = False,
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
        Nearest b-points per a-point in the k-nearest first support (≥ 1), used with
        ``multiscale=False`` or where a level cannot be coarsened.  Any k gives the exact
        value; it only moves work between the first solve and the later rounds.
    pool : int
        Pricing around the current plan (≥ 1): for each pair (i, j) it transports, the pairs
        of i with the ``pool`` nearest b-points of y_j and of j with the ``pool`` nearest
        a-points of x_i are priced at every round, before the check over all pairs.
    per_row : int
        Most violating pairs added per point and round (≥ 1), the most negative ones.
    max_rounds : int
        Most rounds of (solve, pricing) per level before
        :class:`~meanfield.errors.ConvergenceError`.
    multiscale : bool
        Start from the plan of the coarsened problem (both clouds aggregated on a grid
        with about half as many cells as the larger cloud has points, solved the same way,
        recursively) instead of the k-nearest /
        north-west-corner support.  The value is the same; the first support is then close
        to the optimal one, also when the transport is far from the identity.
    return_plan : bool
        Also return the potentials and the optimal plan (for an independent check).

    Returns
    -------
    dict
        ``w2``: √(cost of the optimal plan), in the unit of the points; ``w2_lower``: the
        certified lower bound √(Σ a u + Σ b v − τ₀), with u = v^c and then v ← u^c, both
        c-transforms over *all* pairs (module docstring), and τ₀ the rounding tolerance of
        r; ``method``: "sparse_exact"; ``rounds``, ``pairs`` (support size at
        the end, finest level); ``tau`` (squared units): the network simplex's tolerance
        seen on the support, so that r ≥ −τ on every pair and |r| ≤ τ where the plan is
        positive (w2² − w2_lower² ≲ τ); ``levels`` (n_a, n_b, rounds, pairs of each level,
        coarsest first); ``seconds``.  With ``return_plan``: ``u`` (N,), ``v`` (M,) (NaN at
        zero weights; the certificate's pair, centred: |u|, |v| ≲ the largest cost, not the
        solver's offset) and ``plan`` = (i, j, mass), the positive entries of the optimal plan
        (masses summing to 1), indices into the given clouds.

    Raises
    ------
    InputError
        Before any work, for a bad cloud, weight or option.
    ConvergenceError
        When a level's dual check still fails after ``max_rounds`` rounds.

    See Also
    --------
    meanfield.ot.distance.wasserstein : the distance that calls it (``"sparse"``).
    meanfield.ot.precision.common_frame : the frame it solves in.
    meanfield.ot.circle.wasserstein_torus : the exact distance on a torus.

    Notes
    -----
    The clouds are solved in their common exact frame
    (:func:`meanfield.ot.precision.common_frame`: translated where Sterbenz's lemma makes it
    exact, scaled by a power of two), so clouds at an offset (1e12) or a scale (1e-200, 1e150)
    keep their digits; ``w2``, ``w2_lower``, ``tau``, ``u`` and ``v`` are mapped back.
    ``w2_lower`` is the solver's dual bound; :func:`meanfield.ot.distance.wasserstein` adds
    the rounding bound of the float64 costs to both sides.

    Problems of ≤ ``ALL_PAIRS_MAX`` pairs, or with a side of fewer than ``SMALL_SIDE``
    points (too few for the neighbour lists; fewer than 6 raised a numpy ValueError before),
    are solved on every pair in one network simplex, as ``ot.emd2`` would.  That is exact
    but not fast for a very unbalanced problem: the simplex takes O(n) pivots of O(n) each,
    about 4 s at 60 000 × 4 points on a 2-core CPU and minutes at 300 000 × 4 (the same for
    ``ot.emd2``).

    References
    ----------
    - Q. Mérigot, "A multiscale approach to optimal transport", Comput. Graph. Forum 30 (2011)
      1583–1592.
    - B. Schmitzer, "A sparse multiscale algorithm for dense optimal transport", J. Math. Imaging
      Vis. 56 (2016) 238–259.
    - R. Flamary et al., "POT: Python Optimal Transport", JMLR 22 (2021) 1–8 (the network simplex).

    Examples
    --------
    A cloud against its translate by v = (0.3, 0.4): W2 = |v| = 0.5.

    >>> import numpy as np
    >>> from meanfield.ot.sparse import w2_sparse
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
    xa_all, xa, a, keep_a = _check_cloud("xa", xa, wa)
    xb_all, xb, b, keep_b = _check_cloud("xb", xb, wb)
    if xa.shape[1] != xb.shape[1]:
        raise InputError(
            f"xa and xb must have the same dimension, got {xa.shape[1]} and {xb.shape[1]}"
        )
    # solve in the exact frame where float64 resolves the costs (centred where an offset
    # would cancel their digits, scaled by 2^−e so that squares neither under- nor overflow)
    frame = common_frame([xa, xb])
    xa, xb = frame.to_frame(xa), frame.to_frame(xb)
    levels: list[dict] = []
    sol = _solve_level(xa, a, xb, b, (k, pool, per_row, max_rounds, multiscale), levels)
    sol["lower"], sol["u"], sol["v"] = _certificate(xa, a, xb, b, sol["u"], sol["v"], per_row)
    w2 = frame.length(math.sqrt(max(sol["cost"], 0.0)))
    if not math.isfinite(w2):
        raise NumericalError(
            "W2 of these clouds exceeds the float64 range; rescale the points by a factor s "
            "(W2(s a, s b) = |s| W2(a, b)) so that their extent is below 1e300"
        )
    out = {
        "method": "sparse_exact",
        "w2": w2,
        "w2_lower": frame.length(math.sqrt(max(sol["lower"], 0.0)), rounding="down"),
        "rounds": levels[-1]["rounds"],
        "pairs": levels[-1]["pairs"],
        "tau": frame.length(sol["tau"], 2),
        "levels": levels,
    }
    if return_plan:
        u, v = np.full(len(xa_all), np.nan), np.full(len(xb_all), np.nan)
        u[keep_a] = np.ldexp(sol["u"], 2 * frame.exponent)
        v[keep_b] = np.ldexp(sol["v"], 2 * frame.exponent)
        fi, fj, fx = sol["flow"]
        out.update(u=u, v=v, plan=(keep_a[fi], keep_b[fj], fx))
    return {**out, "seconds": time.perf_counter() - t0}


def _solve_level(xa, a, xb, b, opts, levels: list) -> dict:
    """Optimal plan and potentials of one level: on every pair if small, else by column
    generation from the refined plan of the coarsened problem (solved first, recursively).

    Appends this level's sizes, rounds and support to ``levels`` (after the coarser ones').
    """
    k, pool, per_row, max_rounds, multiscale = opts
    n, m = len(xa), len(xb)
    if n * m <= ALL_PAIRS_MAX or min(n, m) < SMALL_SIDE:
        # every pair: the restricted optimum is the full one (u_i + v_j ≤ c_ij on all pairs)
        keys = np.arange(n * m, dtype=np.int64)
        return _column_generation(xa, a, xb, b, keys, pool, per_row, max_rounds, levels)
    keys = None
    coarse = _coarsen(xa, a, xb, b) if multiscale else None
    if coarse is not None:
        la, (ya, wa), lb, (yb, wb) = coarse
        sub = _solve_level(ya, wa, yb, wb, opts, levels)
        keys = _refine(sub["flow"], la, lb, m, REFINE_MAX_PER_POINT * (n + m))
    if keys is None:
        ka = min(k, m)  # k may exceed the number of b-points
        near_b = cKDTree(xb).query(xa, k=ka, workers=-1)[1].reshape(n, -1)
        near_a = cKDTree(xa).query(xb, k=1, workers=-1)[1].reshape(m, -1)
        keys = _first_support(xa, a, xb, b, ka, near_b, near_a)
    return _column_generation(xa, a, xb, b, keys, pool, per_row, max_rounds, levels)


def _coarsen(xa, a, xb, b):
    """Both clouds aggregated on one grid about COARSEN times coarser than the larger cloud.

    The grid spans the joint bounding box with s = ⌈(max(n_a, n_b) / COARSEN)^{1/p}⌉ cells per
    axis; each occupied cell becomes one atom: the total weight of its points at their
    weighted barycentre (so the coarse costs are the fine ones up to a constant per atom,
    which does not move the optimal plan's cell pairs).  A cloud that would crowd ≥
    ``CROWDED`` points per occupied cell is instead grouped 2 by 2 along its own
    space-filling curve.

    Returns
    -------
    tuple or None
        (labels_a (n_a,), (points, weights) of the coarse a-cloud, labels_b, (points,
        weights) of the coarse b-cloud); None when that does not shrink the problem at
        least 2-fold (no coarser level to gain from).
    """
    p = xa.shape[1]
    both = np.vstack([xa, xb])
    lo, hi = both.min(0), both.max(0)
    side = max(1, math.ceil((max(len(xa), len(xb)) / COARSEN) ** (1.0 / p)))
    width = np.where(hi > lo, (hi - lo) / side, 1.0)

    def aggregate(x, w):
        q = np.minimum(((x - lo) / width).astype(np.int64), side - 1)
        _, label = np.unique(np.ravel_multi_index(q.T, (side,) * p), return_inverse=True)
        if label.max() + 1 < len(x) / CROWDED:
            # a cloud much more concentrated than the other (or a few outliers stretching the
            # box): its points would crowd into a few cells, each paired with many, and the
            # refined support would be dense; pair them along its own curve instead
            label = np.empty(len(x), dtype=np.int64)
            label[np.argsort(_curve_order(x), kind="stable")] = np.arange(len(x)) // 2
        wc = np.bincount(label, w)
        xc = np.stack([np.bincount(label, w * x[:, d]) for d in range(p)], 1) / wc[:, None]
        return label, (xc, wc)

    la, ca = aggregate(xa, a)
    lb, cb = aggregate(xb, b)
    if 2 * len(ca[1]) * len(cb[1]) > len(xa) * len(xb):
        return None
    return la, ca, lb, cb


def _refine(flow, la: np.ndarray, lb: np.ndarray, m: int, max_pairs: int):
    """Keys i·m + j of the fine pairs below the coarse plan: every (i, j) with (label_a[i],
    label_b[j]) transported by it; None if more than ``max_pairs``.

    Feasible: π_ij = Π_AB a_i b_j / (a_A b_B) on these pairs has the fine marginals.
    """
    A, B, _ = flow
    oa, ob = np.argsort(la, kind="stable"), np.argsort(lb, kind="stable")
    na, nb = np.bincount(la), np.bincount(lb)
    sa, sb = np.cumsum(na) - na, np.cumsum(nb) - nb  # first point of each cell in oa, ob
    size = na[A] * nb[B]
    if int(size.sum()) > max_pairs:
        return None
    pair = np.repeat(np.arange(len(A)), size)
    t = np.arange(len(pair)) - np.repeat(np.cumsum(size) - size, size)  # rank within its pair
    width = nb[B][pair]
    i = oa[sa[A][pair] + t // width]
    j = ob[sb[B][pair] + t % width]
    return _merged(i.astype(np.int64) * m + j)


def _near_plan(xa, xb, u, v, flow, nb_a, nb_b, tau: float, per_row: int) -> np.ndarray:
    """Keys of the violating pairs next to the current plan, ≤ per_row per point.

    For each transported pair (i, j): i against the near b-points of y_j, j against the
    near a-points of x_i.  The pool follows the plan, not the points: where the transport
    moves mass far (a shift, a split), the pairs that could improve it sit around its
    partners, not around the point itself.
    """
    m = len(xb)
    fi, fj, _ = flow
    parts = []
    for rows, cols, by_row in (
        (np.repeat(fi, nb_b.shape[1]), nb_b[fj].ravel(), True),
        (nb_a[fi].ravel(), np.repeat(fj, nb_a.shape[1]), False),
    ):
        r = ((xa[rows] - xb[cols]) ** 2).sum(1) - u[rows] - v[cols]
        bad = r < -tau
        i, j, r = _distinct(rows[bad], cols[bad], r[bad], m)
        if by_row:
            i, j = _most_negative(i, j, r, per_row)
        else:
            j, i = _most_negative(j, i, r, per_row)
        parts.append(i * m + j)
    return np.concatenate(parts)


def _covering(keys: np.ndarray, xa, xb, tree_a, tree_b) -> np.ndarray:
    """The support ``keys`` with a pair (its nearest partner) for every point that has none.

    The refined support drops the cells of a coarse atom whose flow the network simplex left
    out (masses of 1e-16 in a grid density's tail: below its tolerance); a point without any
    pair keeps the solver's initial potential, off by its artificial arc cost, and the check
    over every pair then adds one far pair per row against it (16 384 pairs of the largest
    cost on 128² sub-cells).
    """
    n, m = len(xa), len(xb)
    lone_a = np.flatnonzero(np.bincount(keys // m, minlength=n) == 0)
    lone_b = np.flatnonzero(np.bincount(keys % m, minlength=m) == 0)
    if len(lone_a) == 0 and len(lone_b) == 0:
        return keys
    ja = tree_b.query(xa[lone_a], k=1)[1].astype(np.int64)
    ib = tree_a.query(xb[lone_b], k=1)[1].astype(np.int64)
    return _merged(keys, lone_a.astype(np.int64) * m + ja, ib * m + lone_b)


def _centred(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same dual (u − s, v + s), with s = (median u − median v) / 2.

    For probability weights Σ a u + Σ b v and every r_ij = c_ij − u_i − v_j are unchanged;
    the potentials come back to the size of the costs (the median ignores a few nodes the
    solver left at another offset: they show as violations and are priced as such).
    """
    s = 0.5 * (float(np.median(u)) - float(np.median(v)))
    return u - s, v + s


def _rounding_tolerance(u: np.ndarray, v: np.ndarray, diam2: float) -> float:
    """τ₀ = DUAL_TOL · (1 + D² + max|u| + max|v|): a bound, with a wide margin, of the
    rounding of a reduced cost r_ij = |x_i − y_j|² − u_i − v_j computed in float64 (a few
    units of 2⁻⁵³ of the largest term)."""
    return DUAL_TOL * (1.0 + diam2 + float(np.abs(u).max() + np.abs(v).max()))


def _certificate(xa, a, xb, b, u, v, per_row: int) -> tuple[float, np.ndarray, np.ndarray]:
    """The weak-duality lower bound of W₂² from u = v^c (the c-transform of v), raised once
    more by v ← u^c (n, m) ≥ v, with the tolerance τ₀ of its rounding.

    Any v gives the feasible pair (v^c, v) and Σ a v^c + Σ b v ≤ W₂²; replacing v by
    (v^c)^c ≥ v keeps it feasible and can only raise the bound (back to the optimum where
    the solver left a node's potential below its tight value).  Both transforms are exact
    searches over every pair (:func:`_violations`), so the bound holds up to the rounding
    of r, which τ₀ covers: (u − τ₀, v) is then feasible, and Σ a = 1.
    """
    both = np.vstack([xa, xb])
    diam2 = float(((both.max(0) - both.min(0)) ** 2).sum())
    _, _, best = _violations(xb, xa, v, u, math.inf, per_row)  # min_i r_ij, no pairs
    v = v + best
    tau0 = _rounding_tolerance(u, v, diam2)
    return float(a @ u + b @ v) - tau0, u, v


def _column_generation(xa, a, xb, b, keys, pool, per_row, max_rounds, levels) -> dict:
    """Rounds of (exact solve on the support, pricing) from the support ``keys`` until no
    pair has r_ij < −τ.

    Returns ``cost``, ``tau``, ``u`` (= v^c over every pair), ``v`` (centred) and ``flow``;
    appends the level's n_a, n_b, rounds and final support size to ``levels``.
    """
    n, m = len(xa), len(xb)
    complete = len(keys) == n * m
    if not complete:
        tree_a, tree_b = cKDTree(xa), cKDTree(xb)
        nb_b = tree_b.query(xb, k=min(pool, m), workers=-1)[1].reshape(m, -1)
        nb_a = tree_a.query(xa, k=min(pool, n), workers=-1)[1].reshape(n, -1)
        keys = _covering(keys, xa, xb, tree_a, tree_b)
    both = np.vstack([xa, xb])
    diam2 = float(((both.max(0) - both.min(0)) ** 2).sum())
    init = None
    for rnd in range(1, max_rounds + 1):
        I, J = keys // m, keys % m
        c = ((xa[I] - xb[J]) ** 2).sum(1)
        cost, u_raw, v_raw, flow = _solve_restricted(a, b, I, J, c, init)
        init = (u_raw, v_raw)  # as returned: LEMON's warm start reads its own convention
        # LEMON's potentials carry a common offset of once or twice its artificial arc cost,
        # (max c + 1) × the number of nodes (3·10⁵ at 2 × 16 384 atoms against costs ≤ 8):
        # τ₀ below, the rounding bound of the certificate and the rounding of every reduced
        # cost would grow with it
        u, v = _centred(u_raw, v_raw)
        # τ covers the rounding of r and the solver's own tolerance, seen on the support
        # (where an optimal dual has r ≥ 0 exactly): a pair is only added for a real gain
        tau0 = _rounding_tolerance(u, v, diam2)
        tau = max(tau0, -2.0 * float((c - u[I] - v[J]).min()))
        if complete:
            new = keys[:0]
        else:
            new = _near_plan(xa, xb, u, v, flow, nb_a, nb_b, tau, per_row)
        if len(new) == 0 and complete:  # every pair is in the support: r over all of them
            best = np.full(n, np.inf)
            np.minimum.at(best, I, c - u[I] - v[J])
        elif len(new) == 0:  # the pool is clean: check every pair
            ia, ja, best = _violations(xa, xb, u, v, tau, per_row)
            if len(ia):  # the same pairs seen from the b side add columns the rows missed
                jb, ib, _ = _violations(xb, xa, v, u, tau, per_row)
                new = np.concatenate([ia * m + ja, ib * m + jb])
        if len(new) == 0:
            levels.append({"n_a": n, "n_b": m, "rounds": rnd, "pairs": int(len(keys))})
            # u_i + min_j r_ij = min_j (c_ij − v_j), the c-transform of v over every pair:
            # feasible up to the rounding of r, whatever the simplex's tolerance left on v
            return {"cost": cost, "tau": tau, "u": u + best, "v": v, "flow": flow}
        keys = _merged(keys, new)
    raise ConvergenceError(f"w2_sparse: the dual check still fails after {max_rounds} rounds")


__all__ = ["w2_sparse", "DUAL_TOL"]
