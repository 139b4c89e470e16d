r"""Compiled (numba) nearest neighbours of a point cloud in p = 2 or 3 by a cell grid.

Each point's nearest other point (distance and index), what the k = 2 query of a k-d tree
gives, by a uniform cell grid: the points are counting-sorted into cells of side h, O(N), and
each point searches the cells around its own.  Used by the near-field pass of projected
Langevin (:func:`meanfield.dynamics.near_field.near_field`) for p = 2 and 3, where it is
3.8-4.2x faster than the tree query it replaced at N = 10⁶ (p = 2; 2.8x in p = 3).

The grid.  The box [lo, hi] of the points is cut into cells of side h, chosen so that the
grid has about :data:`CELLS_PER_POINT` cells per point and never more than
:data:`MAX_CELLS_PER_POINT` (plus a few), whatever the shape of the box: an axis of extent
below h (a flat or collinear cloud) gets one cell, and the volume is shared among the others.
A point's cell coordinate on axis d is u_d = (x_d − lo_d) / h (computed as written, in
float64, by the sort and by the search alike) and its cell c_d = ⌊u_d⌋ clipped to
[0, n_d − 1]; a clipped edge cell stands for the half-line beyond it.

The ring bound.  Cell c' holds only points x with, on each axis, u_d(x) ∈ [c'_d, c'_d + 1)
(the edge cells open outwards), so the distance from the query q to any of them is at least

.. math::

    \mathrm{LB}(c')^2 = h^2 \sum_d g_d^2, \qquad
    g_d = \begin{cases} c'_d - u_d(q) & c'_d > c_d(q) \\ u_d(q) - c'_d - 1 & c'_d < c_d(q)
    \\ 0 & c'_d = c_d(q) \end{cases}

(g_d ≥ k − 1 on an axis where the cells are k apart).  The search keeps the best
(squared distance, index) found so far and never reads a cell whose LB exceeds it.

1. The usual case: the query's own cell, then each of the 3^p − 1 cells around it unless its
   LB exceeds the best.  Every cell two or more indices away on some axis d has
   LB ≥ h · min over those axes and sides of (c_d + 2 − u_d, u_d − c_d + 1) ≥ h; when that
   bound exceeds the best, the search is over (98.5 % of a Gaussian cloud at one cell per
   point; the others lie in its sparse tail).
2. Otherwise the ring search: the rings k = 0, 1, 2, … of cells at Chebyshev index distance
   k from the query's cell, each restricted to the window of cells whose per-axis gap alone
   does not exceed the best distance (a box of cells, recomputed at each ring).  It stops
   at the first ring that lies outside the window: every cell beyond has LB > best.  A
   point whose nearest neighbour is many cells away (a sparse region, an isolated point)
   walks as many rings as it needs, and an elongated window (a point far beside the cloud)
   is walked along its few columns only.

Rounding.  The computed u is within 2 ulp of (x − lo)/h, so a computed gap is within
≈ 4.4·10⁻¹⁶ (n_d + abs(u_d(q))) of the exact one (abs(u) < n_d inside the box); each gap is
lowered by a margin 10⁻¹² (n_d + abs(u_d(q)) + 2) (cell units, > 10³ times that), and LB² is
compared with the best r² after a relative margin 10⁻¹² (r² and LB² are rounded by a few
ulp): no point at a computed r² ≤ the best is ever skipped, so the result is exact, ties
included.

Ties.  The distances are float64 (float32 points are converted, exactly), r² =
(dx² + dy²) + dz² in that order; among the points at the smallest r² the lowest index is
taken, whatever the order of the search (the order of the dense pass,
:func:`torch.min`).  A coincident point is a neighbour at distance 0.

Cost.  O(N) time and memory for the sort; the search costs each point the 3^p cells
around it for a smooth density, and their points.  The ring searches walk O(N) cells in
all: a point at distance d from its nearest neighbour walks O((d/h + 1)^p) cells (at most
the grid's), and the balls of radius d/2 about the points are disjoint, so Σ (d/h)^p is of
the order of the number of cells.  A cloud whose points crowd into few
cells (a far outlier stretching the box, a dense cluster inside a sparse background) makes
that quadratic: :func:`nearest_neighbours` measures the load Σ_c n_c² / N (the mean number
of points in a point's own cell) after the sort and declines above ``max_load`` (it returns
None), so that the caller can use a tree.  Every point's search is independent and writes
only its own outputs, so the result does not depend on the number of threads.

References
----------
- J. L. Bentley, B. W. Weide, A. C. Yao, "Optimal expected-time algorithms for closest point
  problems", ACM Trans. Math. Softw. 6 (1980) (cell grids, expected O(N) for smooth densities).

See Also
--------
meanfield.dynamics.near_field.near_field : the near-field pass that uses it.
meanfield._fastsums_near.cell_sort : the same counting sort, p = 2, for the Ewald near field.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..errors import InputError

#: Cells per point the grid aims at.  Measured at N = 1e6, one thread, sort + search, CPU s,
#: for 0.5 / 1 / 2 cells per point: Gaussian p = 2 0.230 / 0.221 / 0.232, uniform disc
#: 0.172 / 0.182 / 0.224, Gaussian p = 3 0.446 / 0.404 / 0.401: 1 is within 6 % of the best
#: everywhere (more cells cost the sort its cache, fewer cost the search more points).
CELLS_PER_POINT = 1.0
#: The most cells per point the grid may have (an elongated box can round the cells up).
MAX_CELLS_PER_POINT = 4.0
#: Relative rounding margin of the bounds (see the module docstring).
_MARGIN = 1e-12
#: Largest coordinate magnitude searched (beyond it r² could overflow to inf).
_MAX_ABS = 1e150


@njit(cache=True)
def _bounds(points):
    """The box [lo, hi] of the points and whether they are all finite (one pass: numpy's
    min(0) on an (N, p) array strides, ≈ 15x slower at N = 1e6)."""
    n, p = points.shape
    lo = points[0].copy()
    hi = points[0].copy()
    finite = True
    for i in range(n):
        for d in range(p):
            v = points[i, d]
            finite &= math.isfinite(v)
            if v < lo[d]:
                lo[d] = v
            elif v > hi[d]:
                hi[d] = v
    return lo, hi, finite


@njit(cache=True)
def _cell_sort(points, lo, h, nc):
    """Counting sort of the points into the cells of the grid (row-major cell numbers).

    Parameters
    ----------
    points : float64 (N, p)
    lo : float64 (p,)
        The grid's origin.
    h : float
        The cell side.
    nc : int64 (p,)
        Cells per axis.

    Returns
    -------
    order : int64 (N,)
        Point indices, grouped cell after cell.
    start : int64 (Π nc + 1,)
        The points of cell c are ``order[start[c]:start[c + 1]]``.
    sorted_points : float64 (p, N)
        ``points[order].T``, each axis contiguous for the search.
    load : float
        Σ_c n_c², n_c the points of cell c.
    """
    n, p = points.shape
    ncell = 1
    for d in range(p):
        ncell *= nc[d]
    cell = np.empty(n, np.int64)
    start = np.zeros(ncell + 1, np.int64)
    for i in range(n):
        c = 0
        for d in range(p):
            k = int(math.floor((points[i, d] - lo[d]) / h))  # as the search computes it
            c = c * nc[d] + min(max(k, 0), nc[d] - 1)
        cell[i] = c
        start[c + 1] += 1
    load = 0.0
    for c in range(ncell):
        load += float(start[c + 1]) * float(start[c + 1])
        start[c + 1] += start[c]
    fill = start[:-1].copy()
    order = np.empty(n, np.int64)
    sorted_points = np.empty((p, n))
    for i in range(n):
        t = fill[cell[i]]
        order[t] = i
        for d in range(p):
            sorted_points[d, t] = points[i, d]
        fill[cell[i]] += 1
    return order, start, sorted_points, load


@njit(cache=True, inline="always")
def _window(u, c, n, r, tol):
    """Cells [first, last] on one axis whose gap to the query (cell units) is ≤ r + tol."""
    first = max(0, min(c, int(math.ceil(u - 1.0 - r - tol))))
    last = min(n - 1, max(c, int(math.floor(u + r + tol))))
    return first, last


@njit(cache=True, inline="always")
def _gap(u, c, k, tol):
    """The query's gap (cell units, lowered by the rounding margin) to cell k on one axis."""
    if k > c:
        g = k - u
    elif k < c:
        g = u - k - 1.0
    else:
        return 0.0
    return max(g - tol, 0.0)


@njit(cache=True, inline="always")
def _outside_gap(u, c, n, tol):
    """The query's least gap (cell units, lowered by the margin) on one axis to the cells two
    or more from its own, inf when there are none."""
    g = np.inf
    if c + 2 <= n - 1:
        g = c + 2.0 - u
    if c - 2 >= 0:
        g = min(g, u - c + 1.0)
    return g - tol


@njit(cache=True, inline="always")
def _closer(r2, t, best, bt, order):
    """Whether the candidate at sorted position t, r2 away, beats the best (r2, lowest index)."""
    return r2 < best or (r2 == best and (bt < 0 or order[t] < order[bt]))


@njit(cache=True)
def _ring_search_2d(s, u, c, xs, ys, order, start, h, nc, tol, best, bt):
    """The nearest other point of the sorted point s by the ring search, p = 2, from a best
    (r², sorted position) already found (np.inf, −1 for none; every point at that r² is
    met again, so the lowest index among ties is taken whatever the start).

    Returns (best r², its sorted position).
    """
    qx = xs[s]
    qy = ys[s]
    ux, uy = u
    cx, cy = c
    ncx, ncy = nc[0], nc[1]
    tx, ty = tol
    h2 = h * h
    k = 0
    while True:
        if best < np.inf:
            r = math.sqrt(best) / h * (1.0 + _MARGIN)
            xlo, xhi = _window(ux, cx, ncx, r, tx)
            ylo, yhi = _window(uy, cy, ncy, r, ty)
        else:
            xlo, xhi, ylo, yhi = 0, ncx - 1, 0, ncy - 1
        if k > max(cx - xlo, xhi - cx, cy - ylo, yhi - cy):
            return best, bt  # every cell left has a gap beyond the best distance
        for ix in range(max(cx - k, xlo), min(cx + k, xhi) + 1):
            gx = _gap(ux, cx, ix, tx)
            if ix == cx - k or ix == cx + k:  # a side of the ring: all its cells
                y0, y1, step = max(cy - k, ylo), min(cy + k, yhi), 1
            else:  # inside the ring's columns: its top and bottom cells only
                y0, y1, step = cy - k, cy + k, 2 * k
            for iy in range(y0, y1 + 1, step):
                if iy < ylo or iy > yhi:
                    continue
                gy = _gap(uy, cy, iy, ty)
                if (gx * gx + gy * gy) * h2 * (1.0 - _MARGIN) > best:
                    continue  # the whole cell lies beyond the best distance
                cell = ix * ncy + iy
                for t in range(start[cell], start[cell + 1]):
                    if t == s:
                        continue
                    dx = xs[t] - qx
                    dy = ys[t] - qy
                    r2 = dx * dx + dy * dy
                    if _closer(r2, t, best, bt, order):
                        best = r2
                        bt = t
        k += 1


@njit(parallel=True, cache=True)
def _nearest_2d(xs, ys, order, start, lo, h, nc):
    """The nearest other point of each point, p = 2 (see the module docstring).

    A point's own cell is read first, then each of the 8 cells around it unless its bound
    LB exceeds the best found; when the best is not closer than every cell beyond those,
    the point is searched on by the ring search (:func:`_ring_search_2d`), which is exact
    by itself (rare: 1.5 % of a Gaussian cloud at one cell per point, in its sparse tail).

    Parameters
    ----------
    xs, ys : float64 (N,)
        The points sorted by cell.
    order, start : int64
        From :func:`_cell_sort`.
    lo, h, nc :
        The grid (as for :func:`_cell_sort`).

    Returns
    -------
    r2 : float64 (N,)
        Squared distance to the nearest other point, in the sorted order.
    at : int64 (N,)
        Its sorted position (the lowest original index among equal r2).
    """
    n = xs.shape[0]
    ncx = nc[0]
    ncy = nc[1]
    h2m = h * h * (1.0 - _MARGIN)
    # written in the sorted order (scattered after, by _unsort): scattering them here, in the
    # search, made it ≈ 1.4x slower at N = 1e6
    out_r2 = np.empty(n)
    out_t = np.empty(n, np.int64)
    for s in prange(n):
        qx = xs[s]
        qy = ys[s]
        ux = (qx - lo[0]) / h
        uy = (qy - lo[1]) / h
        cx = min(max(int(math.floor(ux)), 0), ncx - 1)
        cy = min(max(int(math.floor(uy)), 0), ncy - 1)
        tx = _MARGIN * (ncx + abs(ux) + 2.0)
        ty = _MARGIN * (ncy + abs(uy) + 2.0)
        # gaps (cell units, lowered by the margin) to the next cells below and above
        gx0 = max(ux - cx - tx, 0.0)
        gx1 = max(cx + 1.0 - ux - tx, 0.0)
        gy0 = max(uy - cy - ty, 0.0)
        gy1 = max(cy + 1.0 - uy - ty, 0.0)
        best = np.inf
        bt = -1
        own = cx * ncy + cy
        for t in range(start[own], start[own + 1]):
            dx = xs[t] - qx
            dy = ys[t] - qy
            r2 = dx * dx + dy * dy
            if t != s and _closer(r2, t, best, bt, order):
                best = r2
                bt = t
        for ix in range(max(cx - 1, 0), min(cx + 1, ncx - 1) + 1):
            gx = gx0 if ix < cx else (gx1 if ix > cx else 0.0)
            for iy in range(max(cy - 1, 0), min(cy + 1, ncy - 1) + 1):
                gy = gy0 if iy < cy else (gy1 if iy > cy else 0.0)
                if (ix == cx and iy == cy) or (gx * gx + gy * gy) * h2m > best:
                    continue  # its own cell is read; this one lies beyond the best distance
                c = ix * ncy + iy
                for t in range(start[c], start[c + 1]):
                    dx = xs[t] - qx
                    dy = ys[t] - qy
                    r2 = dx * dx + dy * dy
                    if _closer(r2, t, best, bt, order):
                        best = r2
                        bt = t
        g = min(_outside_gap(ux, cx, ncx, tx), _outside_gap(uy, cy, ncy, ty))
        if not g * g * h2m > best:  # a cell beyond may hold a point as close
            best, bt = _ring_search_2d(
                s, (ux, uy), (cx, cy), xs, ys, order, start, h, nc, (tx, ty), best, bt
            )
        out_r2[s] = best
        out_t[s] = bt
    return out_r2, out_t


@njit(cache=True)
def _ring_search_3d(s, u, c, xs, ys, zs, order, start, h, nc, tol, best, bt):
    """:func:`_ring_search_2d` with a third axis (a ring's cells: all of its two faces in x,
    of its faces in y between them, and its top and bottom cells in z elsewhere)."""
    qx = xs[s]
    qy = ys[s]
    qz = zs[s]
    ux, uy, uz = u
    cx, cy, cz = c
    ncx, ncy, ncz = nc[0], nc[1], nc[2]
    tx, ty, tz = tol
    h2 = h * h
    k = 0
    while True:
        if best < np.inf:
            r = math.sqrt(best) / h * (1.0 + _MARGIN)
            xlo, xhi = _window(ux, cx, ncx, r, tx)
            ylo, yhi = _window(uy, cy, ncy, r, ty)
            zlo, zhi = _window(uz, cz, ncz, r, tz)
        else:
            xlo, xhi, ylo, yhi, zlo, zhi = 0, ncx - 1, 0, ncy - 1, 0, ncz - 1
        if k > max(cx - xlo, xhi - cx, cy - ylo, yhi - cy, cz - zlo, zhi - cz):
            return best, bt  # every cell left has a gap beyond the best distance
        for ix in range(max(cx - k, xlo), min(cx + k, xhi) + 1):
            gx = _gap(ux, cx, ix, tx)
            face_x = ix == cx - k or ix == cx + k
            for iy in range(max(cy - k, ylo), min(cy + k, yhi) + 1):
                gy = _gap(uy, cy, iy, ty)
                gxy = gx * gx + gy * gy
                if gxy * h2 * (1.0 - _MARGIN) > best:
                    continue  # the whole column of cells lies beyond the best distance
                if face_x or iy == cy - k or iy == cy + k:  # a face: all its cells
                    z0, z1, step = max(cz - k, zlo), min(cz + k, zhi), 1
                else:  # inside: the ring's top and bottom cells only
                    z0, z1, step = cz - k, cz + k, 2 * k
                for iz in range(z0, z1 + 1, step):
                    if iz < zlo or iz > zhi:
                        continue
                    gz = _gap(uz, cz, iz, tz)
                    if (gxy + gz * gz) * h2 * (1.0 - _MARGIN) > best:
                        continue
                    cell = (ix * ncy + iy) * ncz + iz
                    for t in range(start[cell], start[cell + 1]):
                        if t == s:
                            continue
                        dx = xs[t] - qx
                        dy = ys[t] - qy
                        dz = zs[t] - qz
                        r2 = (dx * dx + dy * dy) + dz * dz
                        if _closer(r2, t, best, bt, order):
                            best = r2
                            bt = t
        k += 1


@njit(parallel=True, cache=True)
def _nearest_3d(xs, ys, zs, order, start, lo, h, nc):
    """The nearest other point of each point, p = 3: :func:`_nearest_2d` with a third axis
    (own cell, then the 26 around it unless their bound exceeds the best, then the ring
    search :func:`_ring_search_3d` where those cells do not settle it)."""
    n = xs.shape[0]
    ncx = nc[0]
    ncy = nc[1]
    ncz = nc[2]
    h2m = h * h * (1.0 - _MARGIN)
    out_r2 = np.empty(n)
    out_t = np.empty(n, np.int64)
    for s in prange(n):
        qx = xs[s]
        qy = ys[s]
        qz = zs[s]
        ux = (qx - lo[0]) / h
        uy = (qy - lo[1]) / h
        uz = (qz - lo[2]) / h
        cx = min(max(int(math.floor(ux)), 0), ncx - 1)
        cy = min(max(int(math.floor(uy)), 0), ncy - 1)
        cz = min(max(int(math.floor(uz)), 0), ncz - 1)
        tx = _MARGIN * (ncx + abs(ux) + 2.0)
        ty = _MARGIN * (ncy + abs(uy) + 2.0)
        tz = _MARGIN * (ncz + abs(uz) + 2.0)
        gx0 = max(ux - cx - tx, 0.0)
        gx1 = max(cx + 1.0 - ux - tx, 0.0)
        gy0 = max(uy - cy - ty, 0.0)
        gy1 = max(cy + 1.0 - uy - ty, 0.0)
        gz0 = max(uz - cz - tz, 0.0)
        gz1 = max(cz + 1.0 - uz - tz, 0.0)
        best = np.inf
        bt = -1
        own = (cx * ncy + cy) * ncz + cz
        for t in range(start[own], start[own + 1]):
            dx = xs[t] - qx
            dy = ys[t] - qy
            dz = zs[t] - qz
            r2 = (dx * dx + dy * dy) + dz * dz
            if t != s and _closer(r2, t, best, bt, order):
                best = r2
                bt = t
        for ix in range(max(cx - 1, 0), min(cx + 1, ncx - 1) + 1):
            gx = gx0 if ix < cx else (gx1 if ix > cx else 0.0)
            for iy in range(max(cy - 1, 0), min(cy + 1, ncy - 1) + 1):
                gy = gy0 if iy < cy else (gy1 if iy > cy else 0.0)
                gxy = gx * gx + gy * gy
                if gxy * h2m > best:
                    continue  # the column of 3 cells lies beyond the best distance
                for iz in range(max(cz - 1, 0), min(cz + 1, ncz - 1) + 1):
                    gz = gz0 if iz < cz else (gz1 if iz > cz else 0.0)
                    if (ix == cx and iy == cy and iz == cz) or (gxy + gz * gz) * h2m > best:
                        continue
                    c = (ix * ncy + iy) * ncz + iz
                    for t in range(start[c], start[c + 1]):
                        dx = xs[t] - qx
                        dy = ys[t] - qy
                        dz = zs[t] - qz
                        r2 = (dx * dx + dy * dy) + dz * dz
                        if _closer(r2, t, best, bt, order):
                            best = r2
                            bt = t
        g = min(
            _outside_gap(ux, cx, ncx, tx),
            _outside_gap(uy, cy, ncy, ty),
            _outside_gap(uz, cz, ncz, tz),
        )
        if not g * g * h2m > best:  # a cell beyond may hold a point as close
            best, bt = _ring_search_3d(
                s,
                (ux, uy, uz),
                (cx, cy, cz),
                xs,
                ys,
                zs,
                order,
                start,
                h,
                nc,
                (tx, ty, tz),
                best,
                bt,
            )
        out_r2[s] = best
        out_t[s] = bt
    return out_r2, out_t


@njit(cache=True)
def _unsort(order, r2, at):
    """The search's results (sorted order, sorted positions) in the original order and
    indices: a scatter, one pass."""
    n = order.shape[0]
    out_r2 = np.empty(n)
    out_j = np.empty(n, np.int64)
    for s in range(n):
        out_r2[order[s]] = r2[s]
        out_j[order[s]] = order[at[s]]
    return out_r2, out_j


def grid_shape(lo, hi, n, cells_per_point=CELLS_PER_POINT):
    """The cell side h and the cells per axis of the grid over the box [lo, hi] for n points.

    h = (Π ext_d / (cells_per_point · n))^(1/a) over the a axes of extent ≥ h (an axis of
    extent below h gets one cell and drops out of the product: the fixed point of that rule
    is reached in at most p rounds); then h grows by 5 % steps while the cells
    Π (⌊ext_d / h⌋ + 1) exceed MAX_CELLS_PER_POINT · n + 2^p.

    Parameters
    ----------
    lo, hi : float64 (p,)
        The box.
    n : int
        The points.
    cells_per_point : float
        Cells per point aimed at.

    Returns
    -------
    h : float
        The cell side (> 0; 1.0 when all points coincide).
    nc : int64 (p,)
        Cells per axis.

    See Also
    --------
    nearest_neighbours : the search on that grid.

    Examples
    --------
    A 4 × 1 box, 100 points: h = (4 / 100)^(1/2) = 0.2, 21 × 6 cells; a collinear cloud
    (extent 0 in y) puts all 100 cells along x.

    >>> from meanfield.dynamics._nearest_grid import grid_shape
    >>> h, nc = grid_shape([0.0, 0.0], [4.0, 1.0], 100)
    >>> round(h, 12), nc.tolist()
    (0.2, [21, 6])
    >>> h, nc = grid_shape([0.0, 0.0], [4.0, 0.0], 100)
    >>> round(h, 12), nc.tolist()
    (0.04, [101, 1])
    """
    ext = np.asarray(hi, dtype=np.float64) - np.asarray(lo, dtype=np.float64)
    active = ext > 0
    h = 1.0
    for _ in range(len(ext)):
        if not active.any():
            break
        # in logs: a product of tiny extents would underflow
        h = math.exp((np.log(ext[active]).sum() - math.log(cells_per_point * n)) / active.sum())
        thin = active & (ext < h)
        if not thin.any():
            break
        active &= ~thin
    cap = MAX_CELLS_PER_POINT * n + 2 ** len(ext)
    while True:
        nc = np.floor(ext / h).astype(np.int64) + 1
        if float(np.prod(nc.astype(np.float64))) <= cap:
            return h, nc
        h *= 1.05


def nearest_neighbours(points, *, max_load=math.inf, cells_per_point=CELLS_PER_POINT):
    r"""Each point's nearest other point in p = 2 or 3, by a cell grid (see the module).

    Parameters
    ----------
    points : array (N, p), float64 or float32, p ∈ {2, 3}, N ≥ 2, finite
        The points (float32 ones are converted to float64, exactly).
    max_load : float
        Decline (return None) when the grid's load Σ_c n_c² / N, the mean number of points
        in a point's own cell, exceeds it: a crowded grid costs O(load · N), where a k-d
        tree stays O(N log N).
    cells_per_point : float
        Cells per point the grid aims at (at most :data:`MAX_CELLS_PER_POINT`).

    Returns
    -------
    (distance, index) or None
        distance : float64 (N,), the Euclidean distance √((dx² + dy²) + dz²) to the nearest
        other point; index : int64 (N,), its index, the lowest among equal distances (a
        coincident point is at distance 0).  None when declined (load above ``max_load``,
        or a coordinate beyond 1e150 in magnitude, where r² could overflow).

    Raises
    ------
    InputError
        p not 2 or 3, N < 2, a non-finite point, or ``cells_per_point`` not in
        (0, MAX_CELLS_PER_POINT].

    See Also
    --------
    grid_shape : the grid.
    meanfield.dynamics.near_field.near_field : the near-field pass that uses it.
    scipy.spatial.cKDTree : the k-d tree it replaces there (``query(k=2)``).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.dynamics._nearest_grid import nearest_neighbours
    >>> x = np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0], [0.0, 2.0]])
    >>> distance, index = nearest_neighbours(x)
    >>> distance.tolist(), index.tolist()  # point 2 has two neighbours at 1: the lower index
    ([1.0, 3.605551275463989, 1.0, 1.0], [2, 3, 0, 2])
    """
    x = np.asarray(points)
    if x.ndim != 2 or x.shape[1] not in (2, 3):
        raise InputError(
            f"nearest_neighbours: points must have shape (N, 2) or (N, 3), got {x.shape}"
        )
    if x.shape[0] < 2:
        raise InputError(f"nearest_neighbours: needs N >= 2 points, got N = {x.shape[0]}")
    if not 0 < cells_per_point <= MAX_CELLS_PER_POINT:
        raise InputError(
            f"nearest_neighbours: cells_per_point must lie in (0, {MAX_CELLS_PER_POINT}], "
            f"got {cells_per_point}"
        )
    x = np.ascontiguousarray(x, dtype=np.float64)
    lo, hi, finite = _bounds(x)
    if not finite:
        raise InputError("nearest_neighbours: points must be finite")
    if max(float(np.abs(lo).max()), float(np.abs(hi).max())) > _MAX_ABS:
        return None
    n = x.shape[0]
    h, nc = grid_shape(lo, hi, n, cells_per_point)
    order, start, xs, load = _cell_sort(x, lo, h, nc)
    if load > max_load * n:
        return None
    if x.shape[1] == 2:
        r2, at = _nearest_2d(xs[0], xs[1], order, start, lo, h, nc)
    else:
        r2, at = _nearest_3d(xs[0], xs[1], xs[2], order, start, lo, h, nc)
    r2, index = _unsort(order, r2, at)
    return np.sqrt(r2), index


__all__ = ["CELLS_PER_POINT", "MAX_CELLS_PER_POINT", "grid_shape", "nearest_neighbours"]
