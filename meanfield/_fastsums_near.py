"""Compiled (numba) near field of the 2D spectral Ewald sum in :mod:`meanfield.fastsums`.

The short-range part of the Gaussian split of −log r,

.. math::

    \\tfrac12 E_1(r^2/\\sigma^2), \\qquad
    \\nabla_{a}\\, \\tfrac12 E_1(|a - y|^2/\\sigma^2) = -e^{-|a - y|^2/\\sigma^2}
    \\frac{a - y}{|a - y|^2},

is summed over the pairs closer than the cutoff r_c with a cell list: the sources are sorted
into square cells of side h ≥ r_c (a counting sort, O(N)), and each target scans the 3 × 3
cells around its own.  No pair list is ever stored, so memory is O(N) however many pairs there
are; the loop over targets runs in parallel (``numba.prange``), each target writing only its
own outputs, so the result does not depend on the number of threads (each target's sum runs in
the same order).

Conventions shared with the direct sum: a target on a charged source at distance exactly 0
(another particle, or the target itself when ``self_index`` is given, which is skipped) gets
E₁(0) = +inf in its value and the zero subgradient in its gradient; an uncharged source
(weight 0) contributes nothing, not inf · 0.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

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


def near_field(targets, sources, weights, r_c, sigma, want_value, want_grad, *, same=False):
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

    Returns
    -------
    pot : (M,), grad : (M, 2)

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
    lo = sources.min(0)
    hi = sources.max(0)
    side = np.maximum(hi - lo, 0.0)
    n = len(sources)
    # cells of side ≥ r_c; at most ~4 per source, so a far outlier stretching the box does
    # not allocate a huge empty grid (larger cells only mean more distance checks)
    h = max(r_c, math.sqrt(max(float(side[0] * side[1]), 0.0) / (4.0 * n + 16.0)))
    h = max(h, float(side.max()) / 4096.0, 1e-300)
    ncx = max(1, min(int(side[0] / h), 4096))
    ncy = max(1, min(int(side[1] / h), 4096))
    h = max(h, float(side[0]) / ncx, float(side[1]) / ncy)
    order, start = cell_sort(sources[:, 0], sources[:, 1], lo[0], lo[1], h, ncx, ncy)
    sx = np.ascontiguousarray(sources[order, 0])
    sy = np.ascontiguousarray(sources[order, 1])
    sw = np.ascontiguousarray(weights[order])
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
