"""Compiled (numba) near field of the 2D spectral Ewald sum in :mod:`meanfield.fastsums`.

The short-range part of the Gaussian split of −log r,

.. math::

    \\tfrac12 E_1(r^2/\\sigma^2), \\qquad
    \\nabla_{a}\\, \\tfrac12 E_1(|a - y|^2/\\sigma^2) = -e^{-|a - y|^2/\\sigma^2}
    \\frac{a - y}{|a - y|^2},

is summed over the pairs closer than the cutoff r_c with a cell list: the sources are sorted
into square cells (a counting sort, O(N)).  No pair list is ever stored, so memory is O(N)
however many pairs there are.  Two kernels:

- targets apart from the sources (:func:`near_ewald`): cells of side h ≥ r_c, each target
  scans the 3 × 3 cells around its own, in parallel over targets (``numba.prange``), each
  target writing only its own outputs;
- the sources themselves (:func:`near_ewald_symmetric`, ``same=True``, what a Langevin step
  asks for): each pair within r_c is evaluated once and added to both ends, the value alike,
  the gradient with opposite signs (Newton's third law), over a half stencil of cells of
  side h ≥ r_c / 2 (5 × 5 cells hold (2.5 r_c)² against (3 r_c)² for 3 × 3 cells of side
  r_c: ≈ 2.0 candidates per pair within r_c instead of ≈ 2.9).  It runs in parallel over a
  fixed number of blocks of cell rows, the even blocks at once, then the odd ones, so that
  no two running blocks write the same output.  Half the pair evaluations and fewer
  candidates: 2.2–2.7x fewer CPU seconds than the per-target kernel at N = 1e5 and 1e6
  (Gaussian and uniform disc, one and two threads; benchmarks/results/near_field_symmetric.md).

Either way every sum runs in one order whatever the number of threads (a target's own loop;
the serial loop of a block of rows, the blocks fixed by the points alone), so the result
does not depend on the number of threads, bit for bit.

Conventions shared with the direct sum: a target on a charged source at distance exactly 0
(another particle, or the target itself when ``self_index`` is given, which is skipped) gets
E₁(0) = +inf in its value and the zero subgradient in its gradient; an uncharged source
(weight 0) contributes nothing, not inf · 0.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .errors import InputError

_EULER_GAMMA = 0.5772156649015329


def _exp1_tables():
    """Polynomial tables of E₁ for :func:`exp1` (built once at import, from scipy's cephes E₁).

    On x ∈ [0, 1]: Ein(x) = E₁(x) + log x + γ, an entire function, one polynomial of degree 16
    in t = 2x − 1.  On x ∈ [1, 65): h(x) = x eˣ E₁(x), smooth and between 0.59 and 1, one
    polynomial of degree 10 per interval of width 1/8 in its local t ∈ [−1, 1] (Chebyshev
    interpolation converted to Horner form; both converge to rounding at these degrees, the
    interval width is what keeps them short).  Rows are highest power first.
    """
    from numpy.polynomial import chebyshev
    from scipy import special

    def ein(t):
        x = (t + 1.0) / 2.0
        return special.exp1(x) + np.log(x) + _EULER_GAMMA

    small = chebyshev.cheb2poly(chebyshev.chebinterpolate(ein, 16))[::-1]
    rows = []
    for i in range(round((_E1_TABLE_END - 1.0) * _E1_PER_UNIT)):
        a = 1.0 + i / _E1_PER_UNIT

        def h(t, a=a):
            x = a + (t + 1.0) / (2.0 * _E1_PER_UNIT)
            return x * np.exp(x) * special.exp1(x)

        rows.append(chebyshev.cheb2poly(chebyshev.chebinterpolate(h, 10))[::-1])
    return np.ascontiguousarray(small), np.ascontiguousarray(np.array(rows))


_E1_PER_UNIT = 8  # intervals per unit of x in the table of h
_E1_TABLE_END = 65.0  # past it the continued fraction converges in a few steps
_E1_SMALL, _E1_ROWS = _exp1_tables()


@njit(cache=True)
def _exp1_continued_fraction(x):
    """E₁(x) for x > 1 by its continued fraction (modified Lentz; Numerical Recipes §6.3)."""
    b = x + 1.0
    c = 1e300
    d = 1.0 / b
    h = d
    for i in range(1, 500):
        an = -float(i * i)
        b += 2.0
        d = 1.0 / (an * d + b)
        c = b + an / c
        delta = c * d
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return h * math.exp(-x)


@njit(cache=True)
def exp1(x):
    """The exponential integral E₁(x) = ∫_x^∞ e^{−t}/t dt for x ≥ 0 (+inf at 0), float64.

    A polynomial table (:func:`_exp1_tables`): E₁ = Ein(x) − log x − γ on (0, 1],
    E₁ = h(x) e^{−x}/x on (1, 65), the continued fraction above.  The near field evaluates it
    once per close pair, so it is a Horner pass of 11–17 terms, not an iteration (9x faster
    than the series / continued fraction it replaced).  Tested against ``scipy.special.exp1``
    to 1e-13 relative on [1e-12, 700] (the largest error, 4e-14, is at x = 1, where
    Ein − log x − γ cancels to a quarter of Ein).
    """
    if x == 0.0:
        return np.inf
    if x <= 1.0:
        t = 2.0 * x - 1.0
        e = _E1_SMALL[0]
        for k in range(1, _E1_SMALL.shape[0]):
            e = e * t + _E1_SMALL[k]
        return e - math.log(x) - _EULER_GAMMA
    if x < _E1_TABLE_END:
        u = (x - 1.0) * _E1_PER_UNIT
        i = int(u)
        t = 2.0 * (u - i) - 1.0
        h = _E1_ROWS[i, 0]
        for k in range(1, _E1_ROWS.shape[1]):
            h = h * t + _E1_ROWS[i, k]
        return h * math.exp(-x) / x
    return _exp1_continued_fraction(x)


@njit(cache=True)
def cell_sort(x, y, x0, y0, h, ncx, ncy):
    """Counting sort of the points into ncx × ncy cells of side h from (x0, y0).

    Returns
    -------
    order : int64 (N,)
        Point indices, grouped cell after cell (row-major: cell = cx · ncy + cy).
    start : int64 (ncx · ncy + 1,)
        The points of cell c are ``order[start[c]:start[c + 1]]``.
    """
    n = x.shape[0]
    cell = np.empty(n, np.int64)
    start = np.zeros(ncx * ncy + 1, np.int64)
    for i in range(n):
        cx = min(max(int((x[i] - x0) / h), 0), ncx - 1)
        cy = min(max(int((y[i] - y0) / h), 0), ncy - 1)
        cell[i] = cx * ncy + cy
        start[cell[i] + 1] += 1
    for c in range(ncx * ncy):
        start[c + 1] += start[c]
    fill = start[:-1].copy()
    order = np.empty(n, np.int64)
    for i in range(n):
        order[fill[cell[i]]] = i
        fill[cell[i]] += 1
    return order, start


@njit(parallel=True, cache=True, fastmath={"nsz", "arcp", "contract", "afn", "reassoc"})
def near_ewald(
    tx, ty, self_index, sx, sy, sw, start, x0, y0, h, ncx, ncy, rc2, sigma2, want_value, want_grad
):
    """Σ over sources within r_c of each target of ½E₁(r²/σ²) w and its target gradient.

    Parameters
    ----------
    tx, ty : float64 (M,)
        Targets.
    self_index : int64 (M,)
        Position of each target among the sorted sources (its own term is skipped), or −1.
    sx, sy, sw : float64 (K,)
        Sources and their weights, sorted by cell (see :func:`cell_sort`).
    start : int64 (ncx · ncy + 1,)
        Cell boundaries in the sorted sources.
    x0, y0, h : float
        Cell grid origin and side (h ≥ r_c, so the 3 × 3 block holds every near source).
    ncx, ncy : int
        Cells per axis.
    rc2, sigma2 : float
        r_c² and σ².
    want_value, want_grad : bool
        Which sums to form (the others stay zero).

    Returns
    -------
    pot : float64 (M,)
    grad : float64 (M, 2)
    """
    m = tx.shape[0]
    pot = np.zeros(m)
    grad = np.zeros((m, 2))
    for t in prange(m):
        ax = tx[t]
        ay = ty[t]
        me = self_index[t]
        # a target outside the grid is clipped to the edge cell: its near sources are
        # still inside the 3 × 3 block around the clipped cell
        cx = min(max(int((ax - x0) / h), 0), ncx - 1)
        cy = min(max(int((ay - y0) / h), 0), ncy - 1)
        v = 0.0
        gx = 0.0
        gy = 0.0
        for ix in range(max(cx - 1, 0), min(cx + 2, ncx)):
            for iy in range(max(cy - 1, 0), min(cy + 2, ncy)):
                c = ix * ncy + iy
                for j in range(start[c], start[c + 1]):
                    if j == me:
                        continue
                    dx = ax - sx[j]
                    dy = ay - sy[j]
                    r2 = dx * dx + dy * dy
                    if r2 >= rc2:
                        continue
                    w = sw[j]
                    if w == 0.0:
                        continue
                    if want_value:
                        v += 0.5 * exp1(r2 / sigma2) * w
                    if want_grad and r2 > 0.0:
                        f = -math.exp(-r2 / sigma2) / r2 * w
                        gx += f * dx
                        gy += f * dy
        pot[t] = v
        grad[t, 0] = gx
        grad[t, 1] = gy
    return pot, grad


@njit(cache=True, fastmath={"nsz", "arcp", "contract", "afn", "reassoc"})
def _pairs_of_rows(
    row_lo,
    row_hi,
    reach,
    sx,
    sy,
    sw,
    start,
    ncy,
    ncx,
    rc2,
    sigma2,
    want_value,
    want_grad,
    pot,
    grad,
    capacity,
):
    """Add the pairs of the cells in rows [row_lo, row_hi) to ``pot`` and ``grad`` (in place).

    Half stencil: a cell (cx, cy) meets itself (pairs i < j) and its forward neighbours, the
    cells (cx, cy + 1 … cy + reach) and (cx + 1 … cx + reach, cy − reach … cy + reach), so
    every unordered pair of cells at most ``reach`` apart per axis meets exactly once.  In the
    sorted sources these are 1 + reach contiguous ranges per point: its own row from the
    next point to the end of cell cy + reach, and each forward row from cy − reach to
    cy + reach.  Each pair within r_c is evaluated once and added to both ends (Newton's
    third law: the same value, opposite gradients); the writes reach rows up to
    row_hi + reach − 1, never below row_lo.

    The candidates of a point are first compacted, without a branch, into the pairs within
    r_c (``capacity`` ≥ the candidates of any point), then evaluated: about half the
    candidates lie outside r_c, and a branch on it is mispredicted so often that the
    compaction makes the pass about 15 % faster (N = 1e6, one thread).
    """
    near_j = np.empty(capacity, np.int64)
    near_r2 = np.empty(capacity)
    for cx in range(row_lo, row_hi):
        for cy in range(ncy):
            c = cx * ncy + cy
            own_end = start[cx * ncy + min(cy + reach, ncy - 1) + 1]
            for i in range(start[c], start[c + 1]):
                ax = sx[i]
                ay = sy[i]
                wi = sw[i]
                m = 0
                for k in range(reach + 1):
                    if k == 0:
                        j_lo = i + 1
                        j_hi = own_end
                    else:
                        row = cx + k
                        if row >= ncx:
                            break
                        j_lo = start[row * ncy + max(cy - reach, 0)]
                        j_hi = start[row * ncy + min(cy + reach, ncy - 1) + 1]
                    for j in range(j_lo, j_hi):
                        dx = ax - sx[j]
                        dy = ay - sy[j]
                        r2 = dx * dx + dy * dy
                        near_j[m] = j
                        near_r2[m] = r2
                        m += r2 < rc2
                v = 0.0
                if want_value:
                    for q in range(m):
                        j = near_j[q]
                        e = 0.5 * exp1(near_r2[q] / sigma2)
                        # an uncharged end receives nothing from the other, not inf · 0
                        wj = sw[j]
                        if wj != 0.0:
                            v += e * wj
                        if wi != 0.0:
                            pot[j] += e * wi
                gx = 0.0
                gy = 0.0
                if want_grad:
                    for q in range(m):
                        r2 = near_r2[q]
                        if r2 > 0.0:  # a twin: the zero subgradient
                            j = near_j[q]
                            f = -math.exp(-r2 / sigma2) / r2
                            fx = f * (ax - sx[j])
                            fy = f * (ay - sy[j])
                            wj = sw[j]
                            gx += fx * wj
                            gy += fy * wj
                            grad[j, 0] -= fx * wi
                            grad[j, 1] -= fy * wi
                pot[i] += v
                grad[i, 0] += gx
                grad[i, 1] += gy


@njit(parallel=True, cache=True)
def near_ewald_symmetric(
    sx, sy, sw, start, ncx, ncy, reach, bounds, rc2, sigma2, want_value, want_grad, capacity
):
    """Σ over the other sources within r_c of each source of ½E₁(r²/σ²) w and its gradient,
    each pair evaluated once (the sources are the targets).

    Parameters
    ----------
    sx, sy, sw : float64 (N,)
        Sources and their weights, sorted by cell (see :func:`cell_sort`).
    start : int64 (ncx · ncy + 1,)
        Cell boundaries in the sorted sources.
    ncx, ncy : int
        Cells per axis.
    reach : int
        Cells per axis the stencil spans on each side (reach · h ≥ r_c).
    bounds : int64 (B + 1,)
        Cell-row blocks: block b is rows [bounds[b], bounds[b + 1]), each at least ``reach``
        rows (:func:`_row_blocks`).
    rc2, sigma2 : float
        r_c² and σ².
    want_value, want_grad : bool
        Which sums to form (the others stay zero).
    capacity : int
        At least the candidates of any point (:func:`_candidate_capacity`).

    Returns
    -------
    pot : float64 (N,)
    grad : float64 (N, 2)
        In the sorted order.

    Notes
    -----
    Block b writes rows [bounds[b], bounds[b + 1] + reach − 1], so blocks of the same parity
    never share an output row: the even blocks run in parallel, then the odd ones.  Each
    block is serial and the blocks depend on the points only, so every sum runs in one order
    whatever the number of threads: the result is bit-identical on any thread count.
    """
    n = sx.shape[0]
    pot = np.zeros(n)
    grad = np.zeros((n, 2))
    nb = bounds.shape[0] - 1
    for parity in range(2):
        for k in prange((nb - parity + 1) // 2):
            b = 2 * k + parity
            _pairs_of_rows(
                bounds[b],
                bounds[b + 1],
                reach,
                sx,
                sy,
                sw,
                start,
                ncy,
                ncx,
                rc2,
                sigma2,
                want_value,
                want_grad,
                pot,
                grad,
                capacity,
            )
    return pot, grad


#: cell-row blocks of the symmetric near field (fixed, so that the summation order, hence the
#: result, does not depend on the number of threads; half run at once, so 64 keeps up to 32
#: threads busy, and each block is still tens of rows at N = 1e5)
ROW_BLOCKS = 64

#: cells per cutoff of the symmetric near field: cells of side r_c / 2 scanned over the
#: 5 × 5 half stencil check ≈ 2.0 candidates per pair within r_c instead of ≈ 2.9 with side r_c
#: (area (2.5 r_c)² or (3 r_c)² against π r_c²)
SYMMETRIC_REACH = 2


def _row_blocks(start, ncx, ncy, reach, blocks=ROW_BLOCKS):
    """Split the ncx cell rows into at most ``blocks`` blocks of about equal pair work.

    The work of a row is estimated as Σ_cells n_c² + n_c (candidates checked ∝ a cell's points
    times its neighbours', ∝ n_c² for a smooth density).  Every block gets at least ``reach``
    rows, so that blocks two apart never write the same row (:func:`near_ewald_symmetric`).

    Returns
    -------
    bounds : int64 (B + 1,)
        Block b is rows [bounds[b], bounds[b + 1]); bounds[0] = 0, bounds[B] = ncx.
    """
    counts = np.diff(start).reshape(ncx, ncy).astype(np.float64)
    work = np.cumsum((counts * (counts + 1.0)).sum(1))
    nb = max(1, min(blocks, ncx // reach))
    bounds = np.empty(nb + 1, np.int64)
    bounds[0] = 0
    bounds[nb] = ncx
    bounds[1:nb] = np.searchsorted(work, work[-1] * np.arange(1, nb) / nb) + 1
    for b in range(1, nb):  # at least `reach` rows per block: forward, then backward
        bounds[b] = max(bounds[b], bounds[b - 1] + reach)
    for b in range(nb - 1, 0, -1):
        bounds[b] = min(bounds[b], bounds[b + 1] - reach)
    return bounds


def _candidate_capacity(start, reach):
    """An upper bound on the candidates of one point in the half stencil of ``reach``.

    A point's candidates lie in 1 + reach runs of at most 2 reach + 1 consecutive cells of
    the sorted order (:func:`_pairs_of_rows`): (1 + reach) times the most points in any
    2 reach + 1 consecutive cells.
    """
    span = min(2 * reach + 1, len(start) - 1)
    return (reach + 1) * int((start[span:] - start[:-span]).max()) + 1


def _grid(sources, r_c, reach):
    """Cell grid over the sources' box: origin, side h ≥ r_c / reach, cells per axis, reach.

    The returned reach (≤ the one asked) is the number of cells per axis that covers r_c.
    """
    lo = sources.min(0)
    hi = sources.max(0)
    side = np.maximum(hi - lo, 0.0)
    n = len(sources)
    # cells of side ≥ r_c / reach; at most ~4 per source, so a far outlier stretching the box
    # does not allocate a huge empty grid (larger cells only mean more distance checks)
    h = max(r_c / reach, math.sqrt(max(float(side[0] * side[1]), 0.0) / (4.0 * n + 16.0)))
    h = max(h, float(side.max()) / 4096.0, 1e-300)
    ncx = max(1, min(int(side[0] / h), 4096))
    ncy = max(1, min(int(side[1] / h), 4096))
    h = max(h, float(side[0]) / ncx, float(side[1]) / ncy)
    reach = 1 if h >= r_c else reach  # h = r_c / 2 exactly gives 2 h = r_c exactly
    return lo, h, ncx, ncy, reach


def near_field(
    targets, sources, weights, r_c, sigma, want_value, want_grad, *, same=False, symmetric=None
):
    """Near part of the Ewald split at the targets (numpy in, numpy out).

    Parameters
    ----------
    targets : float64 (M, 2)
    sources : float64 (K, 2)
    weights : float64 (K,)
    r_c, sigma : float
        Cutoff and Gaussian width of the split.
    want_value, want_grad : bool
    same : bool
        The targets are the sources (each skips itself).
    symmetric : bool or None
        Evaluate each pair once and add it to both ends (:func:`near_ewald_symmetric`, half
        the pair work; only with ``same``), or each target's sum by itself
        (:func:`near_ewald`).  None: symmetric exactly when ``same``.

    Returns
    -------
    pot : (M,), grad : (M, 2)
        The same on any number of threads, bit for bit.

    Examples
    --------
    Two unit charges 0.1 apart, cutoff 0.5, σ = 0.2: ½E₁(0.25) each, gradients ∓ e^{−0.25}/0.1.

    >>> import numpy as np
    >>> from scipy.special import exp1
    >>> from meanfield._fastsums_near import near_field
    >>> x = np.array([[0.0, 0.0], [0.1, 0.0]])
    >>> pot, grad = near_field(x, x, np.ones(2), 0.5, 0.2, True, True, same=True)
    >>> bool(np.allclose(pot, 0.5 * exp1(0.25)))
    True
    >>> bool(np.allclose(grad[:, 0], [np.exp(-0.25) / 0.1, -np.exp(-0.25) / 0.1]))
    True
    """
    if symmetric is None:
        symmetric = same
    if symmetric and not same:
        raise InputError("near_field: symmetric=True needs same=True (targets = sources)")
    lo, h, ncx, ncy, reach = _grid(sources, r_c, SYMMETRIC_REACH if symmetric else 1)
    order, start = cell_sort(sources[:, 0], sources[:, 1], lo[0], lo[1], h, ncx, ncy)
    sx = np.ascontiguousarray(sources[order, 0])
    sy = np.ascontiguousarray(sources[order, 1])
    sw = np.ascontiguousarray(weights[order], dtype=np.float64)
    n = len(sources)
    if symmetric:
        pot, grad = near_ewald_symmetric(
            sx,
            sy,
            sw,
            start,
            ncx,
            ncy,
            reach,
            _row_blocks(start, ncx, ncy, reach),
            float(r_c) ** 2,
            float(sigma) ** 2,
            bool(want_value),
            bool(want_grad),
            _candidate_capacity(start, reach),
        )
    else:
        if same:
            # run the targets in cell order too (cache locality), then scatter back
            tx, ty = sx, sy
            self_index = np.arange(n, dtype=np.int64)
        else:
            tx = np.ascontiguousarray(targets[:, 0])
            ty = np.ascontiguousarray(targets[:, 1])
            self_index = np.full(len(targets), -1, dtype=np.int64)
        pot, grad = near_ewald(
            tx,
            ty,
            self_index,
            sx,
            sy,
            sw,
            start,
            float(lo[0]),
            float(lo[1]),
            float(h),
            ncx,
            ncy,
            float(r_c) ** 2,
            float(sigma) ** 2,
            bool(want_value),
            bool(want_grad),
        )
    if same:
        out_pot = np.empty_like(pot)
        out_pot[order] = pot
        out_grad = np.empty_like(grad)
        out_grad[order] = grad
        return out_pot, out_grad
    return pot, grad
