"""Transport distances that float64 resolves, or refuses: translation, scale and the certificate.

W_q(a + c, b + c) = W_q(a, b) and W_q(s a, s b) = |s| W_q(a, b), so every method computes in
an exact centred and power-of-two-scaled frame (meanfield.ot.precision) and certifies
lower ≤ W_q ≤ upper with the rounding of the float64 costs counted.  The truths here are
independent of that code: POT's dense network simplex on the exactly translated clouds (where
the offset costs nothing), the 1-D quantile formula in exact rational arithmetic
(``fractions``) on the very float64 points, the Gaussian and translate closed forms.
"""

import math
import warnings
from fractions import Fraction

import numpy as np
import ot
import pytest

from meanfield.errors import NumericalError, PrecisionWarning
from meanfield.ot import Measure, wasserstein
from meanfield.ot.sparse import w2_sparse

OFFSETS = (0.0, 1e7, 1e8, 1e12)


def _clouds(p: int, seed: int = 0):
    """The issue's case: two Gaussian clouds of 60 and 50 points, the second shifted by 0.5."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(60, p)), rng.normal(size=(50, p)) + 0.5


def _pot(xa, xb, order):
    """W_order by ot.emd2 with ot.dist, uniform weights: trustworthy on coordinates O(1)."""
    metric = "sqeuclidean" if order == 2 else "euclidean"
    M = ot.dist(xa, xb, metric=metric)
    cost = ot.emd2(np.full(len(xa), 1 / len(xa)), np.full(len(xb), 1 / len(xb)), M)
    return math.sqrt(cost) if order == 2 else cost


def _exact_1d_power(x, y, order) -> Fraction:
    """∫_0^1 |Q_x − Q_y|^q du for uniform atoms, in exact rational arithmetic on the floats."""
    x, y = sorted(Fraction(float(t)) for t in x), sorted(Fraction(float(t)) for t in y)
    n, m = len(x), len(y)
    cuts = sorted({Fraction(i, n) for i in range(n + 1)} | {Fraction(j, m) for j in range(m + 1)})
    total = Fraction(0)
    for u0, u1 in zip(cuts[:-1], cuts[1:], strict=True):
        mid = (u0 + u1) / 2
        d = abs(x[math.floor(mid * n)] - y[math.floor(mid * m)])
        total += (u1 - u0) * d**order
    return total


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("offset", OFFSETS)
def test_offset_clouds_equal_the_translated_computation(p, order, offset):
    """The clouds at an offset c against POT on the same float64 points translated back by c.

    (x + c) − c is exact here (Sterbenz: every coordinate within a factor 2 of c), so the
    reference solves the very same measures at magnitude O(1), where ot.dist's expansion is
    accurate (≈ 1e-15 relative).  Before the fix the default method gave W2 = W1 = 0.0
    certified at c = 1e8 and 1e12 in 2-D; now it agrees to 1e-12 relative (far inside the
    issue's 1e-6) and its certificate brackets the reference.
    """
    xa, xb = _clouds(p)
    ya, yb = xa + offset, xb + offset
    ca, cb = ya - offset, yb - offset  # exact
    np.testing.assert_array_equal(ca + offset, ya)
    want = _pot(ca, cb, order)
    methods = ("auto", "sparse") if order == 2 else ("auto",)
    for method in methods:
        r = wasserstein(Measure(ya), Measure(yb), order, method)
        assert r.certified
        assert r.distance == pytest.approx(want, rel=1e-12)
        assert r.lower <= want * (1 + 1e-14) and want <= r.upper * (1 + 1e-14)
        assert 0 < r.upper - r.lower < 1e-10 * want  # digits lost are counted, few are lost


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("offset", OFFSETS)
def test_1d_certificate_brackets_the_exact_rational_value(order, offset):
    """The 1-D quantile formula in fractions on the float64 points themselves: the exact W_q^q
    of the given measures; lower^q ≤ it ≤ upper^q, compared exactly (no tolerance)."""
    xa, xb = _clouds(1, seed=3)
    ya, yb = xa[:, 0] + offset, xb[:, 0] + offset
    exact = _exact_1d_power(ya, yb, order)
    r = wasserstein(Measure(ya), Measure(yb), order)
    assert r.certified and r.method == "quantile"
    assert Fraction(r.lower) ** order <= exact <= Fraction(r.upper) ** order
    assert r.distance == pytest.approx(float(exact) ** (1 / order), rel=1e-13)


@pytest.mark.parametrize("scale", [1e-200, 1e150, 1e300])
@pytest.mark.parametrize("p, order, method", [(1, 2, "auto"), (1, 1, "auto"), (2, 2, "auto"),
                                              (2, 1, "auto"), (2, 2, "sparse")])  # fmt: skip
def test_scaled_clouds_give_the_scaled_distance(scale, p, order, method):
    """W_q(s a, s b) = s W_q(a, b): s x rounds each coordinate (relative u), so 1e-12 relative.
    Before the fix W2 at s = 1e-200 was a certified 0.0 (squares underflow), at 1e300 an error."""
    xa, xb = _clouds(p, seed=1)
    want = wasserstein(Measure(xa), Measure(xb), order, method).distance
    r = wasserstein(Measure(scale * xa), Measure(scale * xb), order, method)
    assert r.certified and r.distance == pytest.approx(scale * want, rel=1e-12)
    assert r.lower <= r.distance <= r.upper and r.upper - r.lower < 1e-10 * r.distance


@pytest.mark.parametrize("order", [1, 2])
def test_density_on_cells_at_an_offset(order):
    """A 1-D density on cells (quantile function linear on each cell) at the offset 1e8 against
    the same at 0: the cell edges move with the points (integers + 1e8 are exact floats, so
    the two are the same measures translated; 1e-12 relative)."""
    rng = np.random.default_rng(9)
    edges = np.arange(-10.0, 11.0)
    ma, mb = rng.random(20), rng.random(20)
    want = wasserstein(Measure.from_histogram(ma, edges), Measure.from_histogram(mb, edges), order)
    r = wasserstein(
        Measure.from_histogram(ma, edges + 1e8), Measure.from_histogram(mb, edges + 1e8), order
    )
    assert r.certified and r.distance == pytest.approx(want.distance, rel=1e-12)


def test_sliced_estimate_is_translation_equivariant():
    """The sliced estimate runs in the same frame: the same directions (seed) at an offset give
    the same estimate; before, the projections of points at 1e8 kept 8 fewer digits."""
    xa, xb = _clouds(2)
    want = wasserstein(Measure(xa), Measure(xb), 2, "sliced", seed=3).distance
    got = wasserstein(Measure(xa + 1e8), Measure(xb + 1e8), 2, "sliced", seed=3).distance
    assert got == pytest.approx(want, rel=1e-6)


def test_w2_sparse_solver_is_translation_and_scale_equivariant():
    """The solver behind method="sparse", called directly: the same frame inside."""
    xa, xb = _clouds(2, seed=2)
    w = np.ones(60), np.ones(50)
    ref = w2_sparse(xa, w[0], xb, w[1])
    for s, c in ((1e-200, 0.0), (1e150, 0.0), (1.0, 1e12)):
        got = w2_sparse(s * xa + c, w[0], s * xb + c, w[1])
        want = s * (_pot((xa + c) - c, (xb + c) - c, 2) if c else ref["w2"])
        assert got["w2"] == pytest.approx(want, rel=1e-12)
        assert got["w2_lower"] <= got["w2"] and got["w2_lower"] == pytest.approx(want, rel=1e-8)


def test_gaussians_at_an_offset_closed_form():
    """W2(N(m1, s1²), N(m2, s2²)) = √((m1 − m2)² + (s1 − s2)²): the samples m + s q_k at the
    same normal quantiles, coupled rank to rank, give (m1 − m2)² + (s1 − s2)² mean(q²) exactly;
    at the offset 1e8 each point rounds by ≤ ulp/2 = 7.5e-9, so W2 is within 1.5e-8 absolute
    (1e-8 relative here) of the closed form: 1e-6 relative is the issue's requirement.  In 2-D,
    a cloud against its translate by v at the offset: W2 = |v| (the identity coupling is
    optimal for a translation), up to the same rounding."""
    from scipy.stats import norm

    (m1, s1), (m2, s2) = (-0.5, 0.6), (0.8, 1.1)
    q = norm.ppf((np.arange(500) + 0.5) / 500)
    want = math.sqrt((m1 - m2) ** 2 + (s1 - s2) ** 2 * np.mean(q * q))
    r = wasserstein(Measure(1e8 + m1 + s1 * q), Measure(1e8 + m2 + s2 * q))
    assert r.certified and r.distance == pytest.approx(want, rel=1e-6)
    x = np.random.default_rng(4).normal(size=(80, 2))
    v = np.array([0.3, -0.4])
    for method in ("exact", "sparse"):
        r = wasserstein(Measure(x + 1e8), Measure(x + v + 1e8), 2, method)
        assert r.certified and r.distance == pytest.approx(0.5, rel=1e-6)


@pytest.mark.parametrize("order, method", [(1, "exact"), (2, "exact"), (2, "sparse")])
def test_unresolvable_distance_is_refused_with_an_honest_interval(order, method):
    """Two clouds that differ by 1e-13 (relative to their extent ≈ 6): W2 cannot be certified
    from below at that size in float64 (the dual's rounding is ~1e-14 in W2², ~1e-7 in W2), so
    the result carries a PrecisionWarning, certified=False and the interval [0, upper] that
    holds the truth: W_q ≤ the identity coupling's cost, max|noise|√2 ≈ 1.4e-13."""
    x = np.random.default_rng(5).normal(size=(40, 2))
    y = x + 1e-13 * np.random.default_rng(6).uniform(-1, 1, size=x.shape)
    with pytest.warns(PrecisionWarning, match="not resolved by float64"):
        r = wasserstein(Measure(x), Measure(y), order, method)
    assert not r.certified and r.lower <= r.distance <= r.upper
    assert r.lower == 0.0 and r.upper >= 1.5e-13  # holds every value ≤ the identity's cost


def test_identical_measures_give_a_certified_zero():
    """A zero computed cost pairs only coinciding points: W = 0, certified, no warning."""
    x = np.random.default_rng(7).normal(size=(30, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        for order in (1, 2):
            r = wasserstein(Measure(x + 1e9), Measure(x + 1e9), order)
            assert r.distance == 0.0 and r.lower == 0.0 and r.certified


@pytest.mark.parametrize("p", [1, 2])
def test_distance_beyond_float64_is_refused(p):
    """Points at ±1.5e308 are finite, their distance 3e308 is not: a NumericalError naming the
    remedy, not inf or a solver failure."""
    a, b = np.full((3, p), -1.5e308), np.full((2, p), 1.5e308)
    for order in (1, 2):
        with pytest.raises(NumericalError, match="exceeds the float64 range"):
            wasserstein(Measure(a), Measure(b), order)


def test_a_loose_dual_bound_is_named_as_such_not_blamed_on_float64():
    """An interval widened by the solver's own primal − dual gap (far above float64's
    rounding of the sums) says so: the warning names the loose dual bound and the gap."""
    from meanfield.ot.distance import _certified
    from meanfield.ot.precision import common_frame

    x = np.random.default_rng(8).normal(size=(20, 2))
    frame = common_frame([x, x + 0.1])
    a = Measure(x)
    # W2² = 0.01 from the plan, a dual objective of −0.01: the interval [0, 0.1] is as wide
    # as the value, and the gap 0.02 is ≫ float64's rounding bound of the sums (~1e-14)
    with pytest.warns(PrecisionWarning, match=r"dual bound is loose \(primal - dual = 0\.02 "):
        r = _certified(0.01, -0.01, 2, "sparse", frame, 40, 0.0, 0.0, a, {})
    assert not r.certified and r.lower == 0.0 and r.upper >= 0.1
