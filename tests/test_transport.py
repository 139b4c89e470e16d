"""The sparse exact W2 (meanfield.ot.sparse.w2_sparse) against POT's dense network simplex."""

import numpy as np
import ot
import pytest

from meanfield.domains import Box
from meanfield.errors import InputError
from meanfield.ot import Measure, w2, wasserstein
from meanfield.ot.distance import resolve_w_method, w_name
from meanfield.ot.sparse import _violations, w2_sparse
from meanfield.pde import Density, Grid

P, D = Measure.from_particles, Measure.from_density


def _exact(xa, wa, xb, wb):
    wa, wb = wa / wa.sum(), wb / wb.sum()
    return float(np.sqrt(ot.emd2(wa, wb, ot.dist(xa, xb), numItermax=10**8)))


@pytest.mark.parametrize(
    "case",
    ["gaussian", "shifted", "bimodal_vs_uniform"],
)
def test_w2_sparse_equals_dense_emd(case):
    """Same optimum as ot.emd2 on particles vs a 2D grid, including a far shift and a
    bimodal cloud against a flat density, where the k-nearest support is far from enough
    and the dual check must add the missing pairs.

    Tolerance: both are network simplex solves in float64 of the same linear program, so
    they agree to rounding (≈ 1e-15 relative per operation, 1e-9 leaves room for the order of
    the sums); a wrong support or dual would miss by ≫ 1e-3.  The certificate's gap is the
    dual tolerance τ (< 1e-6 · W2² here) plus rounding.
    """
    rng = np.random.default_rng(7)
    g = Grid(Box(2, 2.0), 24)
    if case == "gaussian":
        rho, x = Density.gaussian(g, 0.0, 0.6), rng.normal(scale=0.6, size=(400, 2))
    elif case == "shifted":
        rho, x = Density.gaussian(g, 0.0, 0.5), rng.normal(0.8, 0.3, size=(300, 2))
    else:
        rho = Density.uniform(g)
        x = np.concatenate([rng.normal(-1, 0.2, (150, 2)), rng.normal(1, 0.2, (150, 2))])
    x = x.clip(-2, 2)
    w = rng.random(len(x)) + 0.5
    cells = rho.masses.ravel()
    got = w2_sparse(x, w, g.centers, cells, k=4)
    want = _exact(x, w, g.centers[cells > 0], cells[cells > 0])
    assert got["method"] == "sparse_exact"
    assert got["w2"] == pytest.approx(want, rel=1e-9)
    # the certificate brackets the exact value
    assert got["w2_lower"] <= want * (1 + 1e-12)
    assert got["w2"] ** 2 - got["w2_lower"] ** 2 <= 2 * got["tau"] + 1e-12
    assert got["tau"] < 1e-6 * want**2  # the certificate is tight to 1e-6 relative


def test_auto_never_returns_sliced_and_names_follow_method():
    assert resolve_w_method(2, 10, 10) == "exact"
    assert resolve_w_method(2, 10_000, 16_384) == "sparse_exact"
    assert resolve_w_method(2, 10_000, 16_384, order=1) == "exact"
    assert resolve_w_method(1, 10_000, 10_000) == "exact"
    assert resolve_w_method(2, 10, 10, "sliced") == "sliced"
    assert w_name("sliced") == "sliced_w2"
    assert w_name("sparse_exact") == w_name("exact") == "w2"


def test_particles_grid_sparse_exact_matches_exact():
    g = Grid(Box(2, 2.0), 20)
    rho = Density.gaussian(g, 0.3, 0.5)
    x = np.random.default_rng(3).normal(size=(250, 2)).clip(-2, 2)
    a = w2(P(x), D(rho), method="exact").distance
    b = w2(P(x), D(rho), method="sparse")
    assert b.distance == pytest.approx(a, rel=1e-9)  # same tolerance argument as above
    assert b.lower <= a * (1 + 1e-12) <= b.upper * (1 + 2e-12)  # the certificate brackets it
    with pytest.raises(ValueError, match="order"):
        wasserstein(P(x), D(rho), order=1, method="sparse_exact")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"xa": np.zeros((0, 2))}, "xa"),
        ({"wa": -np.ones(5)}, "weights of xa"),
        ({"xb": np.zeros((4, 3))}, "dimension"),
        ({"k": 0}, "k must"),
        ({"per_row": 1.5}, "per_row"),
        ({"pool": 0}, "pool must"),
        ({"max_rounds": -1}, "max_rounds must"),
        ({"wb": np.full(4, np.nan)}, "weights of xb"),
    ],
)
def test_w2_sparse_bad_input_named(kw, match):
    args = {"xa": np.zeros((5, 2)), "wa": np.ones(5), "xb": np.ones((4, 2)), "wb": np.ones(4)}
    args.update(kw)
    xa, wa, xb, wb = args.pop("xa"), args.pop("wa"), args.pop("xb"), args.pop("wb")
    with pytest.raises(InputError, match=match):
        w2_sparse(xa, wa, xb, wb, **args)


def test_w2_sparse_in_3d_equals_dense_emd():
    """p = 3 (the grid of issue 14): same optimum as ot.emd2 (tolerance as above)."""
    rng = np.random.default_rng(11)
    g = Grid(Box(3, 1.0), 8)
    rho = Density.gaussian(g, [0.2, 0.0, -0.1], 0.4)
    x = rng.normal(scale=0.4, size=(300, 3)).clip(-1, 1)
    cells = rho.masses.ravel()
    got = w2_sparse(x, np.ones(len(x)), g.centers, cells)
    want = _exact(x, np.ones(len(x)), g.centers[cells > 0], cells[cells > 0])
    assert got["w2"] == pytest.approx(want, rel=1e-9)
    assert got["w2_lower"] <= want * (1 + 1e-12)


def test_w2_sparse_in_1d_equals_quantile_formula():
    """p = 1: W2 between two weighted clouds is the L2 distance of their quantile functions
    (an independent closed form); the space-filling order is the sorted order there."""
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(300, 1)), rng.normal(0.4, 1.3, size=(200, 1))
    wx, wy = rng.random(300) + 0.1, rng.random(200) + 0.1
    want = w2(Measure(x, wx), Measure(y, wy), method="quantile").distance
    assert w2_sparse(x, wx, y, wy, k=1, pool=2)["w2"] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lifted_dual_check_finds_every_violation(seed):
    """The kd-tree check over all pairs against the dense matrix of reduced costs
    r_ij = |x_i − y_j|² − u_i − v_j, for potentials with a wide spread (so the groups of
    the lifted search matter): the same minimum, and exactly the violating rows."""
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(200, 2)), rng.uniform(-2, 2, size=(300, 2))
    u, v = rng.normal(0, 0.5, 200), rng.normal(0, 2.0, 300) - 1.0
    r = ((x[:, None, :] - y[None]) ** 2).sum(-1) - u[:, None] - v[None]
    tau = 1e-12
    bi, bj, best = _violations(x, y, u, v, tau, per_row=300)
    assert np.allclose(best, r.min(1), rtol=0, atol=1e-12)
    worst = best.min()
    assert worst == pytest.approx(r.min(), abs=1e-12)
    got = set(zip(bi.tolist(), bj.tolist(), strict=True))
    assert got == set(zip(*np.nonzero(r < -tau), strict=True))


# ----------------------------------------------------------------------------------------
# issue 23: the multiscale first support, pricing around the plan, tiny sides
# ----------------------------------------------------------------------------------------
EPS = np.finfo(np.float64).eps


def _panel_like(case, n_particles, rng):
    """Particles against N(0, 0.8² I) on a 32² grid of [−3, 3]², as in bench_w2.py --panel."""
    g = Grid(Box(2, 3.0), 32)
    cells = Density.gaussian(g, 0.0, 0.8).masses.ravel()
    if case == "scaled_shifted":  # a 5 % scale error plus a shift
        x = rng.normal(scale=0.8, size=(n_particles, 2)) * 1.05 + 0.05
    elif case == "mixture":  # two clusters against one mode
        x = rng.normal(scale=0.4, size=(n_particles, 2))
        x[:, 0] += np.where(np.arange(n_particles) % 2 == 0, -1.2, 1.2)
    elif case == "crowded":  # a tight cluster and three far outliers: few coarse grid cells
        x = rng.normal(scale=0.05, size=(n_particles, 2))
        x[:3] = [[2.9, 2.9], [-2.9, 2.9], [0.0, -2.9]]
    else:  # uniform against the Gaussian: non-local transport
        x = rng.uniform(-3.0, 3.0, size=(n_particles, 2))
    return x.clip(-3, 3), g.centers, cells


def _check_certificate(x, wa, y, wb, got):
    """The returned potentials and plan, checked against the dense reduced-cost matrix.

    Rounding: r_ij = |x_i − y_j|² − u_i − v_j is a handful of float64 operations on numbers
    ≤ S = D² + max|u| + max|v| (D the diameter), so it is exact to ≤ 4 ε S; the solver's τ
    is DUAL_TOL · S ≥ 100 · 4 ε S, so "r ≥ −τ" below tests the certificate, not rounding.
    """
    a, b = wa / wa.sum(), wb / wb.sum()
    u, v, (i, j, f) = got["u"], got["v"], got["plan"]
    live_a, live_b = a > 0, b > 0
    r = ((x[live_a, None, :] - y[None, live_b, :]) ** 2).sum(-1)
    r -= u[live_a, None] + v[None, live_b]
    slack = ((x[i] - y[j]) ** 2).sum(1) - u[i] - v[j]
    tau = got["tau"]
    assert r.min() >= -tau  # dual feasibility over every pair
    assert np.abs(slack).max() <= tau  # complementary slackness where π > 0
    assert (f > 0).all()
    # marginals: sums of ≤ N + M masses ≤ 1, rounding ≤ (N + M) ε
    assert np.abs(np.bincount(i, f, len(x)) - a).max() <= (len(x) + len(y)) * EPS
    assert np.abs(np.bincount(j, f, len(y)) - b).max() <= (len(x) + len(y)) * EPS
    assert np.isnan(u[~live_a]).all() and np.isnan(v[~live_b]).all()


@pytest.mark.parametrize("case", ["scaled_shifted", "mixture", "uniform", "crowded"])
def test_multiscale_equals_dense_emd_and_certificate_holds(case):
    """The multiscale path (first support refined from the coarsened problem, pricing around
    the plan) gives ot.emd2's value on the cases that defeated the nearest-pairs pool (and on
    a cloud too concentrated for the grid aggregation), and its potentials certify
    optimality over every pair.

    Tolerance: both are float64 values Σ π_ij c_ij of optimal plans of the same linear program
    (the optimal value is unique).  Each plan has ≤ N + M − 1 entries π ≤ 1 and costs
    c ≤ D²; rounding each entry, its cost and the sum is ≤ 4 (N + M) ε D² on W2², the bound
    asserted.  (A wrong support or dual would miss by ≫ 1e-4.)
    """
    rng = np.random.default_rng(23)
    x, y, cells = _panel_like(case, 1500, rng)
    w = rng.random(len(x)) + 0.5
    w[0] = 0.0  # a zero weight is dropped, its potential NaN, the plan's indices unshifted
    got = w2_sparse(x, w, y, cells, return_plan=True)
    assert len(got["levels"]) >= 2  # the coarse level ran: this is the multiscale path
    if case == "crowded":  # paired along the curve, not crowded into a few grid cells
        assert got["levels"][-2]["n_a"] == (len(x) - 1 + 1) // 2
    assert got["levels"][-1]["n_a"] == len(x) - 1
    want = _exact(x[1:], w[1:], y[cells > 0], cells[cells > 0])
    diam2 = float((np.ptp(np.vstack([x, y]), 0) ** 2).sum())
    assert abs(got["w2"] ** 2 - want**2) <= 4 * (len(x) + len(y)) * EPS * diam2
    assert got["w2_lower"] <= want * (1 + 1e-12)
    _check_certificate(x, w, y, cells, got)


def test_multiscale_off_gives_the_same_value():
    """multiscale=False (k-nearest / north-west-corner first support) reaches the same optimum
    (tolerance as above) on a shifted case."""
    rng = np.random.default_rng(5)
    x, y, cells = _panel_like("scaled_shifted", 800, rng)
    on = w2_sparse(x, np.ones(len(x)), y, cells)
    off = w2_sparse(x, np.ones(len(x)), y, cells, multiscale=False)
    assert len(off["levels"]) == 1 and len(on["levels"]) >= 2
    diam2 = float((np.ptp(np.vstack([x, y]), 0) ** 2).sum())
    assert abs(on["w2"] ** 2 - off["w2"] ** 2) <= 4 * (len(x) + len(y)) * EPS * diam2


def test_refined_support_holds_the_product_plan():
    """Every fine pair below a coarse transported pair is in the refined support, so the
    product plan Π_AB a_i b_j / (a_A b_B) is feasible on it: its marginals are a and b."""
    from meanfield.ot.sparse import _coarsen, _merged, _refine, _solve_level

    rng = np.random.default_rng(2)
    xa, xb = rng.normal(size=(700, 2)), rng.uniform(-2, 2, size=(900, 2))
    a, b = np.full(700, 1 / 700), rng.random(900)
    b /= b.sum()
    la, (ya, wa), lb, (yb, wb) = _coarsen(xa, a, xb, b)
    assert np.isclose(wa.sum(), 1) and np.isclose(wb.sum(), 1)
    # the barycentres: the coarse weights' first moments are the fine ones
    assert np.allclose(wa @ ya, a @ xa) and np.allclose(wb @ yb, b @ xb)
    sub = _solve_level(ya, wa, yb, wb, (6, 21, 4, 200, True), [])
    A, B, P = sub["flow"]
    keys = _refine(sub["flow"], la, lb, len(xb), 10**9)
    assert np.array_equal(keys, _merged(keys))  # sorted, distinct
    i, j = keys // len(xb), keys % len(xb)
    plan = np.zeros((len(ya), len(yb)))
    plan[A, B] = P
    prod = plan[la[i], lb[j]] * a[i] * b[j] / (wa[la[i]] * wb[lb[j]])
    assert np.allclose(np.bincount(i, prod, 700), a, rtol=0, atol=1e-15)
    assert np.allclose(np.bincount(j, prod, 900), b, rtol=0, atol=1e-15)


@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_w2_sparse_with_a_tiny_side_equals_dense_emd(m):
    """Fewer than 6 b-points raised a raw numpy ValueError (the k = 6 nearest-cell lists had
    fewer columns than assumed); sides under SMALL_SIDE points are now solved on every pair.
    Tolerance: as above (here every pair is in the support: one network simplex solve)."""
    rng = np.random.default_rng(m)
    x, y = rng.normal(size=(400, 2)), rng.normal(size=(m, 2))
    wb = rng.random(m) + 0.1
    for xa, wa, xb, wbb in ((x, np.ones(400), y, wb), (y, wb, x, np.ones(400))):
        got = w2_sparse(xa, wa, xb, wbb)
        want = _exact(xa, wa, xb, wbb)
        diam2 = float((np.ptp(np.vstack([x, y]), 0) ** 2).sum())
        assert abs(got["w2"] ** 2 - want**2) <= 4 * (400 + m) * EPS * diam2


def test_particles_grid_auto_with_four_cells(monkeypatch):
    """method="auto" on particles against a density with 4 non-empty cells: above
    EXACT_MAX_PAIRS it runs the sparse solver, which crashed with fewer than 6 cells (the
    issue's case is 300 000 particles × 4 cells; EXACT_MAX_PAIRS is lowered here so that the
    same path runs at 3000 particles).  Same value as the dense solver (tolerance as above)."""
    import meanfield.ot.distance as dist

    monkeypatch.setattr(dist, "EXACT_MAX_PAIRS", 1000)
    g = Grid(Box(2, 1.0), 4)
    data = np.zeros((4, 4))
    data[1:3, 1:3] = [[1.0, 2.0], [3.0, 4.0]]
    rho = Density(g, data)
    x = np.random.default_rng(0).uniform(-1, 1, size=(3000, 2))
    assert dist.resolve_w_method(2, 3000, 4) == "sparse_exact"
    auto = w2(P(x), D(rho))
    assert auto.method == "sparse"
    got, want = auto.distance, w2(P(x), D(rho), method="exact").distance
    assert abs(got**2 - want**2) <= 4 * 3004 * EPS * 8.0
