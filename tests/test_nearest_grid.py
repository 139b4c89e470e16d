"""The compiled cell-grid nearest neighbours (meanfield.dynamics._nearest_grid) against two
independent truths: a brute-force O(N²) search (the distances, and the index under the rule
"lowest index among equal squared distances", numpy's argmin) and scipy's cKDTree (the
distances).

Exact comparisons throughout: the grid and the brute force compute r² = (dx² + dy²) + dz² in
float64 in the same order, and cKDTree's distances agree with them bit for bit on these
clouds.  The clouds are the adversarial ones of a grid: a far outlier (the box stretched, the
points in a few cells, a neighbour many cells away), collinear points (one cell across),
coincident points and exact ties on lattices (points on cell edges and corners), a dense
cluster inside a sparse background, N = 2, all points identical, a cloud far from the origin
(rounding of the cell coordinates).
"""

import math

import numba
import numpy as np
import pytest
from scipy.spatial import cKDTree

from meanfield.dynamics import _nearest_grid as grid
from meanfield.dynamics._nearest_grid import grid_shape, nearest_neighbours
from meanfield.errors import InputError


def _brute(x):
    """(distance, index) of each point's nearest other point, the lowest index among equal
    r² (np.argmin takes the first), in row blocks (memory O(256 N))."""
    x = np.asarray(x, dtype=np.float64)
    n, p = x.shape
    dist = np.empty(n)
    index = np.empty(n, dtype=np.int64)
    for lo in range(0, n, 256):
        z = x[lo : lo + 256, None, :] - x[None, :, :]
        r2 = z[..., 0] * z[..., 0] + z[..., 1] * z[..., 1]
        if p == 3:
            r2 = r2 + z[..., 2] * z[..., 2]
        rows = np.arange(r2.shape[0])
        r2[rows, rows + lo] = np.inf  # no self-pair
        j = r2.argmin(1)
        index[lo : lo + 256] = j
        dist[lo : lo + 256] = np.sqrt(r2[rows, j])
    return dist, index


def _lattice(k, p):
    """The k^p integer points (float64), shuffled so the lowest-index rule is not the
    lattice order."""
    pts = np.indices((k,) * p).reshape(p, -1).T.astype(np.float64)
    return pts[np.random.default_rng(k + p).permutation(len(pts))]


def _cloud(name, p, rng):
    n = 3000
    if name == "gaussian":
        return 0.4 * rng.normal(size=(n, p))
    if name == "uniform ball":  # the uniform disc in p = 2
        x = rng.normal(size=(n, p))
        return x / np.linalg.norm(x, axis=1, keepdims=True) * rng.random((n, 1)) ** (1 / p)
    if name == "far outlier":
        x = rng.normal(size=(n, p))
        x[17] = 1e6
        return x
    if name == "collinear":  # on a line through the origin, an irrational direction
        return np.outer(rng.normal(size=n), [1.0, math.sqrt(2), math.pi][:p])
    if name == "axis line":  # extent 0 on p − 1 axes: one cell across them
        x = np.zeros((n, p))
        x[:, 0] = rng.normal(size=n)
        return x
    if name == "coincident":  # 500 sites, each held by 1 to 11 points
        sites = rng.normal(size=(500, p))
        return sites[rng.integers(0, 500, size=n)]
    if name == "cluster in background":  # density ratio ≈ 10⁷
        x = rng.uniform(-10.0, 10.0, size=(n, p))
        x[: n // 2] = 1e-3 * rng.normal(size=(n // 2, p))
        return x[rng.permutation(n)]
    if name == "lattice":  # exact ties: 4 (p = 2) or 6 (p = 3) neighbours at distance 1
        return _lattice(40 if p == 2 else 12, p)
    if name == "snapped":  # random points on a coarse lattice: ties and coincidences
        return np.round(rng.normal(size=(n, p)) * 4) / 4
    if name == "far from the origin":
        return 1e7 + 1e-3 * rng.normal(size=(n, p))
    raise ValueError(name)


CLOUDS = [
    "gaussian",
    "uniform ball",
    "far outlier",
    "collinear",
    "axis line",
    "coincident",
    "cluster in background",
    "lattice",
    "snapped",
    "far from the origin",
]


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name", CLOUDS)
def test_grid_equals_brute_force_and_tree(name, p):
    x = _cloud(name, p, np.random.default_rng(CLOUDS.index(name) + 10 * p))
    dist, index = nearest_neighbours(x)
    d_brute, i_brute = _brute(x)
    assert np.array_equal(dist, d_brute)
    assert np.array_equal(index, i_brute)
    d_tree, _ = cKDTree(x).query(x, k=2)
    assert np.array_equal(dist, d_tree[:, 1])
    assert dist.dtype == np.float64 and index.dtype == np.int64


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name", ["gaussian", "snapped", "far outlier"])
def test_float32_points_searched_in_float64(name, p):
    """float32 points: the result is that of their (exact) float64 values."""
    x = _cloud(name, p, np.random.default_rng(7 + p)).astype(np.float32)
    dist, index = nearest_neighbours(x)
    d_brute, i_brute = _brute(x.astype(np.float64))
    assert np.array_equal(dist, d_brute) and np.array_equal(index, i_brute)


@pytest.mark.parametrize("p", [2, 3])
def test_points_on_cell_faces_and_corners(p):
    """A lattice of spacing 1 with the grid's cell side exactly 1: every point lies on the
    corner of its cell (u an integer), the faces the bound is measured from; each point has
    2p neighbours at distance exactly 1, and the lowest index wins."""
    k = 30 if p == 2 else 10
    x = _lattice(k, p)
    cpp = ((k - 1) / k) ** p  # h = (ext^p / (cpp N))^(1/p) = 1 with ext = k − 1, N = k^p
    h, nc = grid_shape(x.min(0), x.max(0), len(x), cpp)
    assert h == 1.0 and nc.tolist() == [k] * p
    for shift in (0.0, 0.5):  # corners, then cell centres (gap 1/2 to every face)
        dist, index = nearest_neighbours(x + shift, cells_per_point=cpp)
        d_brute, i_brute = _brute(x + shift)
        assert np.array_equal(dist, d_brute) and np.array_equal(index, i_brute)
        assert bool((dist == 1.0).all())


@pytest.mark.parametrize("p", [2, 3])
def test_neighbours_many_cells_away(p):
    """The ring search: two tight clusters at opposite corners of a box of 4 cells per point
    (each cluster's far points: no neighbour in the 3^p cells around), and 30 isolated
    points each ~1/30 of the box from anything (dozens of empty rings)."""
    rng = np.random.default_rng(3 + p)
    x = np.concatenate(
        [rng.random((500, p)), 1000.0 + rng.random((500, p)), rng.uniform(100, 900, (30, p))]
    )
    x = x[rng.permutation(len(x))]
    dist, index = nearest_neighbours(x, cells_per_point=grid.MAX_CELLS_PER_POINT)
    d_brute, i_brute = _brute(x)
    assert np.array_equal(dist, d_brute) and np.array_equal(index, i_brute)


@pytest.mark.parametrize("p", [2, 3])
def test_ring_search_alone_is_exact(p):
    """The fallback search of the kernels, from no best, for every point of a Gaussian cloud
    with a sparse tail (a second method inside the module, checked on its own)."""
    rng = np.random.default_rng(11 + p)
    x = np.concatenate([0.4 * rng.normal(size=(1500, p)), rng.uniform(-20, 20, (20, p))])
    lo, hi, _ = grid._bounds(x)
    h, nc = grid_shape(lo, hi, len(x))
    order, start, xs, _ = grid._cell_sort(x, lo, h, nc)
    d_brute, i_brute = _brute(x)
    for s in range(len(x)):
        u = tuple((xs[d, s] - lo[d]) / h for d in range(p))
        c = tuple(min(max(math.floor(u[d]), 0), nc[d] - 1) for d in range(p))
        tol = tuple(grid._MARGIN * (nc[d] + abs(u[d]) + 2.0) for d in range(p))
        if p == 2:
            args = (s, u, c, xs[0], xs[1], order, start, h, nc, tol, np.inf, -1)
            best, at = grid._ring_search_2d(*args)
        else:
            args = (s, u, c, xs[0], xs[1], xs[2], order, start, h, nc, tol, np.inf, -1)
            best, at = grid._ring_search_3d(*args)
        assert math.sqrt(best) == d_brute[order[s]]
        assert order[at] == i_brute[order[s]]


@pytest.mark.parametrize("p", [2, 3])
def test_small_and_degenerate_clouds(p):
    """N = 2, all points identical (distance 0, the lowest other index), two points
    identical among distinct ones."""
    rng = np.random.default_rng(5)
    two = rng.normal(size=(2, p))
    dist, index = nearest_neighbours(two)
    assert index.tolist() == [1, 0]
    assert dist[0] == dist[1] == _brute(two)[0][0]
    same = np.full((7, p), 0.3)
    dist, index = nearest_neighbours(same)
    assert dist.tolist() == [0.0] * 7 and index.tolist() == [1, 0, 0, 0, 0, 0, 0]
    x = rng.normal(size=(50, p))
    x[40] = x[9]
    dist, index = nearest_neighbours(x)
    assert dist[9] == dist[40] == 0.0 and index[9] == 40 and index[40] == 9
    assert np.array_equal(index, _brute(x)[1])


@pytest.mark.parametrize(
    "shape_lo_hi",
    [
        ((1.0, 1.0), 10**4),  # square
        ((1.0, 1e-9), 10**4),  # a sliver: one cell across
        ((1e-300, 1.0), 10**3),  # a sliver of subnormal width (the volume in logs)
        ((0.0, 0.0), 10**3),  # all points identical
        ((1.0, 1.0, 1e-12), 10**4),
        ((1e6, 1.0, 1.0), 10**4),  # elongated: cells rounded up along the short axes
        ((3.0, 0.0, 1.0), 10**4),
    ],
)
def test_grid_cells_are_bounded(shape_lo_hi):
    """At most MAX_CELLS_PER_POINT · N + 2^p cells, whatever the box: memory O(N)."""
    ext, n = shape_lo_hi
    lo = np.zeros(len(ext))
    h, nc = grid_shape(lo, np.array(ext), n)
    cells = float(np.prod(nc.astype(np.float64)))
    assert h > 0 and bool((nc >= 1).all())
    assert cells <= grid.MAX_CELLS_PER_POINT * n + 2 ** len(ext)
    assert bool((np.floor(np.array(ext) / h) < nc).all())  # every point has a cell


def test_crowded_grid_is_declined():
    """The load Σ n_c² / N over max_load: None (the caller's tree takes it); the same cloud
    is searched right when allowed."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2000, 2))
    x[0] = 1e6  # the box stretched: all other points in one or two cells, load ≈ N
    assert nearest_neighbours(x, max_load=64.0) is None
    dist, index = nearest_neighbours(x)
    assert np.array_equal(index, _brute(x)[1])
    assert nearest_neighbours(np.array([[0.0, 0.0], [1e151, 0.0]])) is None  # r² overflows


def test_result_independent_of_thread_count():
    """Every point's search is its own: the same result on 1 and 2 threads, bit for bit."""
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread here")
    x = _cloud("snapped", 2, np.random.default_rng(4))
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = nearest_neighbours(x)
        numba.set_num_threads(2)
        two = nearest_neighbours(x)
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])


def test_bad_input_is_refused():
    with pytest.raises(InputError, match="shape"):
        nearest_neighbours(np.zeros((5, 1)))
    with pytest.raises(InputError, match="shape"):
        nearest_neighbours(np.zeros((5, 4)))
    with pytest.raises(InputError, match="N >= 2"):
        nearest_neighbours(np.zeros((1, 2)))
    with pytest.raises(InputError, match="cells_per_point"):
        nearest_neighbours(np.zeros((5, 2)), cells_per_point=5.0)
    bad = np.zeros((5, 3))
    bad[3, 1] = math.nan  # not the first point: the box pass itself must see it
    with pytest.raises(InputError, match="finite"):
        nearest_neighbours(bad)
    bad[3, 1] = math.inf
    with pytest.raises(InputError, match="finite"):
        nearest_neighbours(bad)
