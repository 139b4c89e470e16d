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

In the symmetric kernel a point's candidates are 1 + reach runs of consecutive sorted sources,
so its gradient is one streaming loop per run over every candidate, with no branch, no
gather and no scatter: the pair force −e^{−r²/σ²}/r² (zero past r_c, and the zero
subgradient of a twin, dx = dy = 0, by a select), added to the point's own sum and subtracted from
the run's contiguous slice of the x and y outputs (two arrays, not the strided (N, 2) one).
LLVM vectorises it (8 doubles a vector with AVX-512) because e^{−u} is :func:`exp_neg`, a
polynomial rather than a libm call (numba without SVML does not vectorise ``math.exp``).  It
evaluates every candidate, about twice the pairs within r_c, and is still faster than the
compaction followed by a scalar loop over the pairs that it replaced: the whole
gradient-only pass at N = 1e6 (Gaussian cloud, eps = 1e-6, one thread) 2.9 → 1.1 CPU-s.
The potential keeps the compaction: E₁ is a branchy table (:func:`exp1`) that does not
vectorise, so skipping the far half pays there.

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
from numba.core import types as _nbtypes
from numba.extending import intrinsic

from ._arrays import _column_bounds
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


@intrinsic
def _reinterpret(typingctx, x):
    """The same 64 bits read as the other type, float64 <-> int64 (an LLVM bitcast: free, and
    it vectorises)."""
    other = {_nbtypes.float64: _nbtypes.int64, _nbtypes.int64: _nbtypes.float64}.get(x)
    if other is None:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(other))

    return other(x), codegen


# ln 2 in two parts (fdlibm's): _LN2_HI has 32 significant bits, so k · _LN2_HI is exact for
# every k ≤ 1077, and r = u − k ln 2 is formed to ~1e-22 absolute, far below an ulp of
# e^{−r} (Cody & Waite's reduction)
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.4426950408889634
_TWO52 = 4503599627370496.0  # 2^52: kf + 2^52 holds the integer kf in its low mantissa bits


@njit(cache=True, fastmath={"contract"})
def exp_neg(u):
    """e^{−u} for u ≥ 0 (+inf gives 0), float64, without a libm call, so that loops over it
    vectorise.

    u = k ln 2 + r with k = round(u / ln 2) and |r| ≤ ln 2 / 2 (Cody–Waite); e^{−r} is a
    polynomial of degree 11, e^{−u} = 2^{−k} e^{−r}, the power of two built from its bits in two
    factors (each a normal number, so that results down to the subnormals round once).
    Accuracy (tested against ``math.exp``): within 1 ulp of it on [0, 708], where the results
    are normal numbers; subnormal results within one smallest subnormal of it; 0 from
    u ≈ 745.13 on, as ``math.exp``.

    The polynomial is the Chebyshev interpolant of degree 11 of e^{−r} on
    [−1.001 ln 2 / 2, 1.001 ln 2 / 2] (mpmath's ``chebyfit`` at 50 digits, coefficients rounded
    to float64): relative error 1.4e-17 over the interval, 0.06 ulp, against 6e-15 for the
    Taylor polynomial of the same degree.

    The fastmath flags are set here on purpose: without them numba compiles a callee with
    its caller's flags, and "reassoc" would fold the two-part reduction (u − k ln2_hi) − k ln2_lo
    into one product, 2e-14 relative at u = 700.
    """
    u = min(u, 746.0)  # e^{−746} rounds to 0; the clamp keeps k ≤ 1077 (the scale's range)
    kf = math.floor(u * _INV_LN2 + 0.5)
    r = (u - kf * _LN2_HI) - kf * _LN2_LO
    p = -2.511015364692893e-08
    p = p * r + 2.763279054211718e-07
    p = p * r + -2.7557240604663896e-06
    p = p * r + 2.4801485074105115e-05
    p = p * r + -0.00019841269890340666
    p = p * r + 0.0013888888952696516
    p = p * r + -0.00833333333331949
    p = p * r + 0.04166666666648666
    p = p * r + -0.1666666666666668
    p = p * r + 0.5000000000000019
    p = p * r + -1.0
    p = p * r + 1.0
    k = _reinterpret(kf + _TWO52) - _reinterpret(_TWO52)
    k1 = k >> 1  # 2^{−k} = 2^{−k1} · 2^{−(k − k1)}, both ≥ 2^{−539}: normal
    return p * _reinterpret((1023 - k1) << 52) * _reinterpret((1023 - (k - k1)) << 52)


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
                    if want_grad and (dx != 0.0 or dy != 0.0):  # not a twin
                        f = -math.exp(-r2 / sigma2) / r2 * w
                        gx += f * dx
                        gy += f * dy
        pot[t] = v
        grad[t, 0] = gx
        grad[t, 1] = gy
    return pot, grad


@njit(cache=True, error_model="numpy", fastmath={"nsz", "arcp", "contract", "afn", "reassoc"})
def _gradient_of_run(ax, ay, wi, sx, sy, sw, rc2, inv_sigma2, gx_out, gy_out):
    """The gradient of the pairs of the point (ax, ay) of weight wi with a run of sources.

    ``sx, sy, sw`` are the run's sources (consecutive in the sorted order), ``gx_out, gy_out``
    the same slice of the outputs: each source within r_c gets −w_i times the pair force
    (in place), the point's own sum Σ w_j · force is returned.

    Every source of the run is evaluated, with the force selected to 0 past r_c and at a twin
    (dx = dy = 0: the zero subgradient), so that the loop has no branch, reads and writes only
    consecutive elements, and calls no libm function (:func:`exp_neg`): LLVM vectorises it.
    The force is finite for r > 1e-154 (r² a normal number), so an uncharged end gets
    0 · force = 0, never inf · 0; a distinct pair closer than that (r² subnormal or 0) gives
    a non-finite force, which :func:`meanfield.fastsums.coulomb2d_sums` refuses by name.  The
    "numpy" error model keeps the division free of numba's zero check (its inf at a twin is
    discarded by the select); "reassoc" lets the two sums be vectorised, in an order fixed by
    the run alone.
    """
    gx = 0.0
    gy = 0.0
    for j in range(sx.shape[0]):  # a loop from 0 over slices: no negative-index wraparound
        dx = ax - sx[j]
        dy = ay - sy[j]
        r2 = dx * dx + dy * dy
        e = exp_neg(r2 * inv_sigma2)
        # a twin is dx = dy = 0 (its zero subgradient), not r² = 0: a distinct pair whose r²
        # underflows to 0 must give a non-finite force, refused downstream, not a silent 0
        f = -e / r2 if (r2 < rc2) & ((dx != 0.0) | (dy != 0.0)) else 0.0
        fx = f * dx
        fy = f * dy
        wj = sw[j]
        gx += fx * wj
        gy += fy * wj
        gx_out[j] -= fx * wi
        gy_out[j] -= fy * wi
    return gx, gy


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
    grad_x,
    grad_y,
    capacity,
):
    """Add the pairs of the cells in rows [row_lo, row_hi) to ``pot``, ``grad_x`` and ``grad_y``
    (in place).

    Half stencil: a cell (cx, cy) meets itself (pairs i < j) and its forward neighbours, the
    cells (cx, cy + 1 … cy + reach) and (cx + 1 … cx + reach, cy − reach … cy + reach), so
    every unordered pair of cells at most ``reach`` apart per axis meets exactly once.  In the
    sorted sources these are 1 + reach contiguous runs per point: its own row from the
    next point to the end of cell cy + reach, and each forward row from cy − reach to
    cy + reach.  Each pair within r_c is evaluated once and added to both ends (Newton's
    third law: the same value, opposite gradients); the writes reach rows up to
    row_hi + reach − 1, never below row_lo.

    The gradient streams over each run (:func:`_gradient_of_run`, vectorised).  For the
    value, the candidates of a point are first compacted, without a branch, into the pairs
    within r_c (``capacity`` ≥ the candidates of any point), then evaluated: about half the
    candidates lie outside r_c, and a branch on it is mispredicted so often that the
    compaction makes the pass about 15 % faster (N = 1e6, one thread).
    """
    near_j = np.empty(capacity if want_value else 0, np.int64)
    near_r2 = np.empty(capacity if want_value else 0)
    inv_sigma2 = 1.0 / sigma2
    for cx in range(row_lo, row_hi):
        for cy in range(ncy):
            c = cx * ncy + cy
            own_end = start[cx * ncy + min(cy + reach, ncy - 1) + 1]
            for i in range(start[c], start[c + 1]):
                ax = sx[i]
                ay = sy[i]
                wi = sw[i]
                m = 0
                gx = 0.0
                gy = 0.0
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
                    if want_value:
                        for j in range(j_lo, j_hi):
                            dx = ax - sx[j]
                            dy = ay - sy[j]
                            r2 = dx * dx + dy * dy
                            near_j[m] = j
                            near_r2[m] = r2
                            m += r2 < rc2
                    if want_grad and j_hi > j_lo:  # an empty run: nothing to add
                        run_x, run_y = _gradient_of_run(
                            ax,
                            ay,
                            wi,
                            sx[j_lo:j_hi],
                            sy[j_lo:j_hi],
                            sw[j_lo:j_hi],
                            rc2,
                            inv_sigma2,
                            grad_x[j_lo:j_hi],
                            grad_y[j_lo:j_hi],
                        )
                        gx += run_x
                        gy += run_y
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
                pot[i] += v
                grad_x[i] += gx
                grad_y[i] += gy


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
    The gradient is summed into separate x and y arrays (contiguous slices for the
    vectorised run loop) and interleaved at the end.
    """
    n = sx.shape[0]
    pot = np.zeros(n)
    grad_x = np.zeros(n)
    grad_y = np.zeros(n)
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
                grad_x,
                grad_y,
                capacity,
            )
    grad = np.empty((n, 2))
    grad[:, 0] = grad_x
    grad[:, 1] = grad_y
    return pot, grad


#: at most this many cell-row blocks in the symmetric near field (they depend on the points
#: only, so that the summation order, hence the result, does not depend on the number of
#: threads; half run at once, so up to 32 threads have work)
ROW_BLOCKS = 64

#: cells per cutoff of the symmetric near field: cells of side r_c / 2 scanned over the
#: 5 × 5 half stencil check ≈ 2.0 candidates per pair within r_c instead of ≈ 2.9 with side r_c
#: (area (2.5 r_c)² or (3 r_c)² against π r_c²)
SYMMETRIC_REACH = 2


#: cost of one run of candidates (a call of :func:`_gradient_of_run`: slices, the vector
#: loop's set-up and tail) in candidate evaluations, fitted to the blocks of a Gaussian cloud
#: at N = 1e6 (≈ 66 ns a run against ≈ 1.4 ns a candidate, one thread): it dominates in the
#: cloud's sparse tails, where runs are short
RUN_COST = 46.0


def _row_work(start, ncx, ncy, reach):
    """Estimated cost of each cell row in :func:`_pairs_of_rows`: candidates + RUN_COST · runs.

    A point of cell (cx, cy) checks the rest of its own cell and the cells cy + 1 … cy + reach
    of its row, and the cells cy − reach … cy + reach of the rows cx + 1 … cx + reach, in
    1 + reach runs.  Returns float64 (ncx,).
    """
    n = np.diff(start).reshape(ncx, ncy).astype(np.float64)
    pad = np.zeros((ncx + reach, ncy + 2 * reach))
    pad[:ncx, reach : reach + ncy] = n
    candidates = 0.5 * n + RUN_COST * (1 + reach)
    for d in range(1, reach + 1):
        candidates += pad[:ncx, reach + d : reach + d + ncy]
    for k in range(1, reach + 1):
        for d in range(-reach, reach + 1):
            candidates += pad[k : k + ncx, reach + d : reach + d + ncy]
    return (n * candidates).sum(1)


@njit(cache=True)
def _fewest_blocks(work, reach, limit):
    """Bounds (B + 1,) of the fewest blocks of ≥ ``reach`` consecutive items of costs ``work``
    (n,), each costing at most ``limit``; an empty array where there is none.

    Dynamic programming over the block ends: f(i), the fewest blocks covering items [0, i), is
    1 + the least f(j) over the starts j ≤ i − reach whose block [j, i) fits the limit.  The
    fitting starts form a window that only moves right as i grows, so a monotone queue gives
    each minimum in O(1) amortised: O(n) in all.
    """
    n = work.shape[0]
    csum = np.zeros(n + 1)
    for i in range(n):
        csum[i + 1] = csum[i] + work[i]
    big = n + 1
    f = np.full(n + 1, big, np.int64)
    back = np.zeros(n + 1, np.int64)
    f[0] = 0
    queue = np.empty(n + 1, np.int64)  # starts j in the window, f increasing
    head = 0
    tail = 0
    left = 0  # the first start whose block to i fits the limit
    for i in range(reach, n + 1):
        j = i - reach  # the newest start that leaves ≥ reach items
        if f[j] < big:
            while tail > head and f[queue[tail - 1]] >= f[j]:
                tail -= 1
            queue[tail] = j
            tail += 1
        while csum[i] - csum[left] > limit:
            left += 1
        while tail > head and queue[head] < left:
            head += 1
        if tail > head:
            f[i] = f[queue[head]] + 1
            back[i] = queue[head]
    if f[n] >= big:
        return np.empty(0, np.int64)
    bounds = np.empty(f[n] + 1, np.int64)
    i = n
    for b in range(f[n], -1, -1):
        bounds[b] = i
        i = back[i]
    return bounds


def _row_blocks(start, ncx, ncy, reach, blocks=ROW_BLOCKS):
    """Split the ncx cell rows into at most ``blocks`` blocks of ≥ ``reach`` rows, the
    costliest (:func:`_row_work`) as cheap as :func:`_min_max_blocks` makes it.

    Blocks of at least ``reach`` rows: blocks two apart never write the same row
    (:func:`near_ewald_symmetric`).  Equal blocks are often not possible: on a concentrated
    cloud a block of ``reach`` central rows costs more than the average, and splitting into
    equal shares left the tails in a few long blocks, which ran 1.4x, not 2x, faster on two
    threads (each thread takes a contiguous half of a parity's blocks).

    Returns
    -------
    bounds : int64 (B + 1,)
        Block b is rows [bounds[b], bounds[b + 1]); bounds[0] = 0, bounds[B] = ncx, B ≤ blocks.
    """
    return _min_max_blocks(_row_work(start, ncx, ncy, reach), reach, blocks)


def _min_max_blocks(work, reach, blocks):
    """Bounds (B + 1,) of at most ``blocks`` blocks of ≥ ``reach`` consecutive items of costs
    ``work`` (n,) whose costliest block is as cheap as possible (to 2⁻⁴⁰ of the range).

    The bound on a block's cost is bisected between the costliest item or the mean share
    (no partition does better) and the total: the smallest bound for which
    :func:`_fewest_blocks` needs at most ``blocks`` blocks.
    """
    n = len(work)
    if n < 2 * reach or blocks <= 1:
        return np.array([0, n], np.int64)
    work = np.asarray(work, dtype=np.float64)
    hi = float(work.sum())
    lo = max(float(work.max()), hi / blocks)
    best = np.array([0, n], np.int64)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        bounds = _fewest_blocks(work, reach, mid)
        if 0 < len(bounds) - 1 <= blocks:
            hi, best = mid, bounds
        else:
            lo = mid
    return best


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
    lo, hi = _column_bounds(sources)
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
