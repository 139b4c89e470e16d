"""The one measure type and the one distance of meanfield.ot (issue 21).

Against independent truths: POT's exact solvers (``ot.emd2``, ``ot.wasserstein_1d``) on random
weighted clouds, the 1-D quantile formula in closed form, two Gaussians' W₂; the result
type's fields; bad input.
"""

import math

import numpy as np
import ot
import pytest

import meanfield as mf
from meanfield.domains import Box
from meanfield.errors import InputError, InputTypeError, PrecisionWarning
from meanfield.ot import Measure, TransportResult, w1, w2, wasserstein
from meanfield.pde import Density, Grid

P, D = Measure.from_particles, Measure.from_density


def _emd(xa, wa, xb, wb, order):
    """W_order by POT's dense network simplex, written out here."""
    metric = "sqeuclidean" if order == 2 else "euclidean"
    cost = ot.emd2(wa / wa.sum(), wb / wb.sum(), ot.dist(xa, xb, metric=metric), numItermax=10**8)
    return math.sqrt(cost) if order == 2 else cost


def _cloud(rng, n, p, zeros=True):
    x = rng.normal(size=(n, p)) * rng.uniform(0.5, 2.0, size=p) + rng.normal(size=p)
    w = rng.random(n) + 0.05
    if zeros:
        w[rng.random(n) < 0.1] = 0.0  # points of zero weight are dropped by every method
    return x, w


# ---- against POT's exact solvers ---------------------------------------------------------
@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_equals_emd2_on_random_weighted_clouds(p, seed):
    """Both a network simplex in float64 (p ≥ 2) or the exact quantile formula (p = 1) against
    POT's network simplex: the same linear program, so agreement to rounding; 1e-10 relative
    leaves room for the order of the sums, a wrong weight normalisation or a dropped point
    would miss by ≫ 1e-3."""
    rng = np.random.default_rng(seed)
    (xa, wa), (xb, wb) = _cloud(rng, 60, p), _cloud(rng, 45, p)
    a, b = Measure(xa, wa), Measure(xb, wb)
    for order in (1, 2):
        want = _emd(xa, wa, xb, wb, order)
        got = wasserstein(a, b, order)
        assert got.method == ("quantile" if p == 1 else "exact")
        assert got.distance == pytest.approx(want, rel=1e-10)
        if p == 1:  # POT's own 1-D solver, a third computation
            ref = ot.wasserstein_1d(xa[:, 0], xb[:, 0], wa / wa.sum(), wb / wb.sum(), p=order)
            assert got.distance == pytest.approx(ref ** (1 / order), rel=1e-10)
    sparse = w2(a, b, method="sparse")
    want = _emd(xa, wa, xb, wb, 2)
    assert sparse.distance == pytest.approx(want, rel=1e-9)
    # the certificate brackets the dense value (its rounding bound included, so upper > value)
    assert sparse.lower <= want * (1 + 1e-12) and sparse.distance <= sparse.upper
    assert want <= sparse.upper * (1 + 1e-12)


def test_weights_are_normalised_and_scaled_weights_give_the_same_distance():
    rng = np.random.default_rng(3)
    (xa, wa), (xb, wb) = _cloud(rng, 40, 2, zeros=False), _cloud(rng, 30, 2, zeros=False)
    ref = w2(Measure(xa, wa), Measure(xb, wb)).distance
    assert w2(Measure(xa, 7.0 * wa), Measure(xb, wb / 3.0)).distance == pytest.approx(ref, 1e-12)
    assert w2(P(xa, wa), Measure(xb, wb)).distance == pytest.approx(ref, rel=1e-12)
    assert P(xa, wa).mass == pytest.approx(1.0, rel=1e-15)


# ---- closed forms ------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, c, d", [(0.0, 1.0, 2.0, 3.0), (-1.0, 1.0, 0.0, 1.0), (0, 4, 1, 2)])
def test_1d_uniform_laws_closed_form(a, b, c, d):
    """U(a, b) against U(c, d), each one cell of a histogram: Q(u) = a + (b − a)u, so with
    e = a − c and f = (b − a) − (d − c), W2² = e² + e f + f²/3 and W1 = ∫_0^1 |e + f u| du."""
    ma, mb = Measure.from_histogram([1.0], [a, b]), Measure.from_histogram([2.0], [c, d])
    e, f = a - c, (b - a) - (d - c)
    assert w2(ma, mb).distance == pytest.approx(math.sqrt(e * e + e * f + f * f / 3), rel=1e-13)
    u = np.linspace(0.0, 1.0, 200_001)  # |e + f u| is piecewise linear: the trapezoid rule on
    g = np.abs(e + f * u)  # a fine mesh is exact up to the one kink (error ≤ |f| du² / 4)
    w1_ref = float(np.sum((g[1:] + g[:-1]) / 2) * (u[1] - u[0]))
    assert w1(ma, mb).distance == pytest.approx(w1_ref, abs=1e-10)
    assert w1(ma, mb).method == "quantile"


def test_1d_density_is_read_on_its_cells_and_atoms_at_the_centres():
    """A density on cells against the same masses as atoms at the centres: the quantile ramps
    across each cell of width h against steps, W2 = h/√12 for equal masses (each cell's uniform
    law against its centre), and the atoms reading equals ot.emd2 on the centres."""
    g = Grid(Box(1, 1.0), 8)
    rho = D(Density.uniform(g))
    h = g.h[0]
    assert w2(rho, rho.atoms()).distance == pytest.approx(h / math.sqrt(12), rel=1e-12)
    x = np.random.default_rng(4).uniform(-1, 1, size=(30, 1))
    got = w2(P(x), rho.atoms()).distance
    assert got == pytest.approx(_emd(x, np.ones(30), g.centers, rho.weights, 2), rel=1e-10)


def test_two_gaussians_w2_closed_form():
    """W2(N(m1, s1²), N(m2, s2²)) = √((m1 − m2)² + (s1 − s2)²) in 1D, from two cell-averaged
    densities (O(h²) from the laws, bound 0.5 h² as in test_diagnostics); and for the two
    samples at the same normal quantiles q_k = Φ⁻¹((k + ½)/n), m + s q_k, whose optimal
    coupling pairs equal ranks: W2² = (m1 − m2)² + (s1 − s2)² mean(q²) exactly (mean q = 0)."""
    from scipy.stats import norm

    (m1, s1), (m2, s2) = (-0.5, 0.6), (0.8, 1.1)
    exact = math.hypot(m1 - m2, s1 - s2)
    g = Grid(Box(1, 8.0), 800)
    d = w2(D(Density.gaussian(g, m1, s1)), D(Density.gaussian(g, m2, s2))).distance
    assert abs(d - exact) <= 0.5 * g.h[0] ** 2
    q = norm.ppf((np.arange(2000) + 0.5) / 2000)
    e = w2(Measure(m1 + s1 * q), Measure(m2 + s2 * q)).distance
    want = math.sqrt((m1 - m2) ** 2 + (s1 - s2) ** 2 * np.mean(q * q))
    assert e == pytest.approx(want, rel=1e-12)
    # in p = 2, two shifted copies of one cloud: W2 = |shift| (the identity coupling is optimal)
    x = np.random.default_rng(8).normal(size=(300, 2))
    r = w2(Measure(x), Measure(x + [0.6, -0.8]))
    assert r.distance == pytest.approx(1.0, rel=1e-12)


# ---- the result type ---------------------------------------------------------------------
def test_result_fields_by_method(monkeypatch):
    rng = np.random.default_rng(5)
    (xa, wa), (xb, wb) = _cloud(rng, 80, 2), _cloud(rng, 70, 2)
    a, b = Measure(xa, wa), Measure(xb, wb)
    exact = w2(a, b, "exact")
    assert isinstance(exact, TransportResult) and exact.order == 2 and exact.name == "w2"
    assert exact.distance == float(exact) and exact.certified
    # lower < upper: the certificate counts the rounding of the float64 costs (about 1e-14)
    assert exact.lower <= exact.distance <= exact.upper
    assert 0 < exact.upper - exact.lower < 1e-10 * exact.distance
    assert exact.details["support"] == (np.count_nonzero(wa), np.count_nonzero(wb))
    sparse = w2(a, b, "sparse_exact", return_plan=True)  # the old name of "sparse"
    assert sparse.method == "sparse" and sparse.certified and sparse.distance <= sparse.upper
    assert sparse.lower <= sparse.distance and sparse.distance**2 - sparse.lower**2 < 1e-6
    i, j, mass = sparse.details["plan"]
    cost = float(np.sum(mass * ((xa[i] - xb[j]) ** 2).sum(1)))
    assert math.sqrt(cost) == pytest.approx(sparse.distance, rel=1e-12)
    assert {"rounds", "pairs", "tau", "levels", "u", "v"} <= set(sparse.details)
    sliced = w2(a, b, "sliced", n_projections=300, seed=4)
    assert sliced.name == "sliced_w2" and not sliced.certified and sliced.upper == math.inf
    assert sliced.lower == sliced.distance <= exact.distance  # SW2 ≤ W2 for any directions
    assert sliced.details["n_projections"] == 300 and sliced.details["seed"] == 4
    one = wasserstein(a, b, order=1)
    assert one.name == "w1" and one.order == 1 and one.method == "exact"
    # "auto": exact up to EXACT_MAX_PAIRS cost entries, then the sparse solver (W2 only)
    import meanfield.ot.distance as dist

    monkeypatch.setattr(dist, "EXACT_MAX_PAIRS", 100)
    assert w2(a, b).method == "sparse" and w1(a, b).method == "exact"
    assert w2(a, b).distance == pytest.approx(exact.distance, rel=1e-9)


def test_front_door_and_density_bias_detail():
    assert mf.ot.w2 is w2 and mf.wasserstein is wasserstein and mf.Measure is Measure
    g = Grid(Box(2, 1.0), (4, 8))
    r = w2(D(Density.uniform(g)), P(np.zeros((3, 2))))
    assert r.details["centre_bias"] == pytest.approx(math.sqrt((0.5**2 + 0.25**2) / 12))
    assert "centre_bias" not in w2(D(Density.uniform(Grid(Box(1, 1.0), 4))), Measure([0.0])).details


# ---- the measure type --------------------------------------------------------------------
def test_measure_is_validated_once_and_read_only():
    x = np.zeros((3, 2))
    m = Measure(x)
    assert m.weights.tolist() == [1 / 3] * 3 and not m.is_density
    with pytest.raises(ValueError):
        m.points[0, 0] = 1.0  # the measure's arrays are read-only copies ...
    x[0, 0] = np.nan  # ... of the caller's array, which stays writable and apart
    assert np.isfinite(m.points).all()
    with pytest.raises(AttributeError):
        m.weights = np.ones(3)  # frozen
    assert Measure([1.0, 2.0]).points.shape == (2, 1)  # a 1-d array: points on the line
    rho = Density.gaussian(Grid(Box(2, 1.0), (4, 6)), 0.1, 0.5)
    hist = Measure.from_histogram(rho.masses, rho.grid.edges)
    np.testing.assert_allclose(hist.points, D(rho).points, rtol=0, atol=1e-15)
    # the two differ by rounding only (1e-16): below what float64 resolves for W2 at this extent,
    # so the value comes uncertified, with a PrecisionWarning and an interval that says so
    with pytest.warns(PrecisionWarning, match="not resolved"):
        r = w2(hist, D(rho))
    assert r.distance < 1e-7 and not r.certified and r.lower == 0.0 < r.upper < 1e-6
    counts, edges = np.histogramdd(np.random.default_rng(6).normal(size=(50, 2)), bins=(3, 5))
    assert Measure.from_histogram(counts, edges).size == 15


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: Measure(np.zeros((2, 2, 2))), InputError, r"points must have shape \(n, p\)"),
        (lambda: Measure(np.zeros((0, 2))), InputError, "points is empty"),
        (lambda: Measure([[np.nan, 0.0]]), InputError, "points contains 1 non-finite"),
        (lambda: Measure([[0.0], [1.0]], [1.0]), InputError, r"weights must be .* \(2,\)"),
        (lambda: Measure([[0.0], [1.0]], [1.0, -1.0]), InputError, "weights must be .* >= 0"),
        (lambda: Measure([[0.0], [1.0]], [0.0, 0.0]), InputError, "not all zero"),
        (lambda: Measure([[0.0], [1.0]], [1.0, np.inf]), InputError, "weights contains"),
        (lambda: Measure([[0.5]], edges=([1.0, 0.0],)), InputError, "strictly increasing"),
        (lambda: Measure([[0.5]], edges=([0.0, 1.0, 2.0],)), InputError, "2 cells for 1"),
        (lambda: Measure([[5.0]], edges=([0.0, 1.0],)), InputError, "lie in their cells"),
        (lambda: Measure.from_histogram([1.0, 2.0], [0.0, 1.0]), InputError, "masses must"),
        (lambda: P(np.zeros((0, 1))), InputError, r"omega \(particles\) is empty"),
        (lambda: D(np.ones(4)), InputTypeError, "must be a meanfield.pde.Density"),
    ],
)
def test_measure_bad_input_names_the_argument(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda a, b: w2(a.points, b), InputTypeError, "a must be a meanfield.ot.Measure"),
        (lambda a, b: w2(a, Measure([0.0])), InputError, "same dimension p, got 2 and 1"),
        (lambda a, b: wasserstein(a, b, order=3), InputError, "order must be 1 or 2"),
        (lambda a, b: wasserstein(a, b, order=True), InputTypeError, "order must be 1 or 2"),
        (lambda a, b: w2(a, b, method="fast"), InputError, "unknown method 'fast'"),
        (lambda a, b: w2(a, b, method="quantile"), InputError, "p = 1 only"),
        (lambda a, b: w1(a, b, method="sparse"), InputError, "W2 .* only"),
        (lambda a, b: w1(a, b, method="sliced"), InputError, "sliced W2 only"),
        (lambda a, b: w2(a, b, n_proj=3), InputError, r"unknown option\(s\) \['n_proj'\]"),
        (lambda a, b: w2(a, b, "sliced", n_projections=0), InputError, "n_projections must"),
        (lambda a, b: w2(a, b, "sliced", seed=-1), InputError, "seed must"),
        (lambda a, b: w2(a, b, "sparse", k=1.5), InputTypeError, "k must be an integer"),
        (lambda a, b: w2(a, b, "sparse", return_plan="yes"), InputTypeError, "return_plan"),
    ],
)
def test_distance_bad_input_raises_before_any_work(call, error, match, monkeypatch):
    import meanfield.ot.distance as dist

    def no_work(*args, **kwargs):
        raise AssertionError("a solver ran on bad input")

    monkeypatch.setattr(dist, "_compute", no_work)
    a, b = Measure(np.zeros((3, 2))), Measure(np.ones((2, 2)))
    with pytest.raises(error, match=match):
        call(a, b)


def test_weights_near_the_float64_maximum_are_normalised_without_overflow():
    # two weights of 1e308 summed to inf and normalised to 0: POT's AssertionError, the sparse
    # route's "network simplex failed", from_particles' "not all zero"; W₂ is that of [½, ½]
    import warnings

    from meanfield.ot import Measure, w2
    from meanfield.ot.sparse import w2_sparse

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = Measure([[0.0, 0.0], [1.0, 0.0]], [1e308, 1e308]), Measure([[0.0, 0.0]])
        assert w2(a, b).distance == pytest.approx(math.sqrt(0.5), rel=1e-15)
        assert w2(a, b, method="sparse").distance == pytest.approx(math.sqrt(0.5), rel=1e-15)
        xa, xb = np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0]])
        got = w2_sparse(xa, np.array([1e308, 1e308]), xb, np.array([1.0]))["w2"]
        assert got == pytest.approx(math.sqrt(0.5), rel=1e-15)
        weights = Measure.from_particles([[0.0], [1.0]], weights=[1e308, 1e308]).weights
        assert weights.tolist() == [0.5, 0.5]
