"""The p = 3 FMM sums with close pairs, against the direct float64 sum on the same coordinates.

FMM3D rounds a close pair's separation at the scale of the coordinates (relative error of the
pair's term ≈ c · 2⁻⁵² · max|x| / d, c ≤ 1.5, :mod:`meanfield._fastsums_fmm`) and drops pairs
below ≈ 2⁻⁵¹ × the box.  A close pair dominates ‖pot‖ and ‖grad‖, so without the exact
correction the relative ℓ² error is that of the pair (1e-4 at d = 1e-13 in the reproducer),
not eps.  With it, the close pairs are exact (difference of nearby floats is exact, Sterbenz;
round-off ~1e-16) and the remaining far sum carries the FMM's own error ≤ eps (measured
0.01–0.3 eps in tests/test_fastsums.py): so the relative ℓ² error must be ≤ eps.
Also: the p = 2 sums refuse a non-finite gradient (r² underflow below ~1.5e-154).
"""

from __future__ import annotations

import numpy as np
import pytest

from meanfield import _fastsums_fmm
from meanfield.errors import NumericalError
from meanfield.fastsums import coulomb2d_field, coulomb2d_sums, coulomb3d_field, coulomb3d_sums

fmm3dpy = pytest.importorskip("fmm3dpy")

EPS = 1e-6


def _direct(targets, sources, q, same):
    """Σ q/r and −Σ q (t − s)/r³, float64, exact coincidences: +inf potential and zero
    subgradient (the direct sum's conventions, meanfield.pairsum.pair_sums)."""
    z = targets[:, None, :] - sources[None, :, :]
    r = np.sqrt((z * z).sum(-1))
    zero = r == 0.0
    if same:
        np.fill_diagonal(zero, False)
        np.fill_diagonal(r, np.inf)
    with np.errstate(divide="ignore"):
        inv = np.where(r == 0.0, 0.0, 1.0 / r)
    pot = (q * inv).sum(1)
    grad = -np.einsum("mk,mkj->mj", q * inv**3, z)
    pot[(zero & (q > 0)).any(1)] = np.inf
    return pot, grad


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _cloud(n=200, shift=0.0, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 3)) + shift


def _check_sums(x, eps=EPS):
    pot, grad = coulomb3d_sums(x, eps)
    want_pot, want_grad = _direct(x, x, np.ones(len(x)), True)
    fin = np.isfinite(want_pot)
    assert np.array_equal(np.isfinite(pot), fin)  # +inf exactly at the exact twins
    assert _rel(pot[fin], want_pot[fin]) <= eps
    assert _rel(grad, want_grad) <= eps
    return pot, grad


@pytest.mark.parametrize("rel_d", [1e-8, 1e-10, 1e-12, 1e-13, 1e-14, 1e-15, 1e-16])
@pytest.mark.parametrize("where", ["centre", "corner", "shifted"])
@pytest.mark.parametrize("direction", ["axis", "random"])
def test_close_pair_matches_the_direct_sum(rel_d, where, direction):
    rng = np.random.default_rng(1)
    x = _cloud(shift=1e3 if where == "shifted" else 0.0)
    box = np.ptp(x, axis=0).max()
    lo, hi = x.min(0), x.max(0)
    x[0] = (lo + hi) / 2 if where != "corner" else lo + 1e-3 * box
    u = np.array([0.0, 0.0, 1.0]) if direction == "axis" else rng.normal(size=3)
    x[1] = x[0] + rel_d * box * u / np.linalg.norm(u)
    # the rounded partner may land on x[0] (an exact twin): the conventions are then checked
    _check_sums(x)


def test_plain_fmm_fails_where_the_corrected_sum_holds():
    # the reproducer: plain FMM3D errs by 1.1e-4 at d = 1e-13, far above eps = 1e-6
    x = np.random.default_rng(0).normal(size=(50, 3))
    x[1] = x[0] + [0, 0, 1e-13]
    out = fmm3dpy.lfmm3d(eps=EPS, sources=np.asfortranarray(x.T), charges=np.ones(50), pg=2)
    want_pot, want_grad = _direct(x, x, np.ones(50), True)
    assert _rel(4 * np.pi * out.pot, want_pot) > 10 * EPS
    assert _rel(4 * np.pi * out.grad.T, want_grad) > 10 * EPS
    _check_sums(x)


def test_close_triplet_and_twin_with_close_neighbour():
    x = _cloud(shift=np.array([30.0, -5.0, 2.0]))
    x[1] = x[0] + [1e-12, 0.0, 0.0]
    x[2] = x[0] + [0.0, 3e-13, -2e-13]  # a triplet, all within 1e-11 of each other
    x[4] = x[3]  # an exact twin
    x[5] = x[3] + [0.0, 5e-12, 0.0]  # and a close neighbour of both
    pot, grad = _check_sums(x)
    assert np.isinf(pot[[3, 4]]).all() and np.isfinite(pot[5]) and np.isfinite(grad).all()


def test_field_with_close_targets_matches_the_direct_sum():
    rng = np.random.default_rng(2)
    pts = _cloud(150, shift=1e3, seed=3)
    w = rng.random(150)
    w[7] = 0.0  # an uncharged atom adds nothing, even under a target
    at = _cloud(40, shift=1e3, seed=4)
    at[0] = pts[0] + [0.0, 0.0, 2e-10]
    at[1] = pts[1] + 1e-12 * rng.normal(size=3)
    at[2] = pts[2]  # on a charged atom: +inf
    at[3] = pts[7]  # on the uncharged atom: finite
    at[4] = pts[3] + [3e-11, 0.0, 0.0]
    at[5] = pts[3] + [0.0, -4e-11, 0.0]
    pot = coulomb3d_field(at, pts, w, EPS)
    want, _ = _direct(at, pts, w, False)
    fin = np.isfinite(want)
    assert np.array_equal(np.isfinite(pot), fin) and not fin[2] and fin[3]
    assert _rel(pot[fin], want[fin]) <= EPS


def test_no_close_pair_is_bit_identical_to_the_plain_fmm():
    x = _cloud(300)
    out = fmm3dpy.lfmm3d(eps=EPS, sources=np.asfortranarray(x.T), charges=np.ones(300), pg=2)
    pot, grad = coulomb3d_sums(x, EPS)
    assert np.array_equal(pot, 4 * np.pi * out.pot)
    assert np.array_equal(grad, 4 * np.pi * out.grad.T)
    at, w = _cloud(50, seed=5), np.random.default_rng(6).random(300)
    out = fmm3dpy.lfmm3d(
        eps=EPS, sources=np.asfortranarray(x.T), charges=w, targets=np.asfortranarray(at.T), pgt=1
    )
    assert np.array_equal(coulomb3d_field(at, x, w, EPS), 4 * np.pi * out.pottarg)


def test_too_large_a_close_set_is_refused(monkeypatch):
    monkeypatch.setattr(_fastsums_fmm, "CLOSE_PAIR_BUDGET", 50)
    x = _cloud(50)
    x[1] = x[0] + [0.0, 0.0, 1e-13]  # K = 2, K·N = 100 > 50
    with pytest.raises(NumericalError, match=r"2 of the points .* tau = .*larger eps.*direct"):
        coulomb3d_sums(x, EPS)
    with pytest.raises(NumericalError, match=r"larger eps"):
        coulomb3d_field(x[:30], x, np.ones(50), EPS)  # K = 30 x M = 30 > 50
    x[1] = x[0] + [0.0, 0.0, 1e-3]  # no close pair: nothing to refuse
    coulomb3d_sums(x, EPS)


def test_p3_underflowing_pair_refused_or_right():
    x = _cloud(20)
    x[1] = x[0] + [0.0, 0.0, 1e-160]  # 1/r² = 1e320 overflows; 1/r = 1e160 does not
    if np.array_equal(x[1], x[0]):
        x[0] = 0.0
        x[1] = [0.0, 0.0, 1e-160]
    with pytest.raises(NumericalError, match="overflows float64"):
        coulomb3d_sums(x, EPS)
    # the potential 1/r = 1e160 is representable and right (the rest, ~10, is below its ulp)
    pot, _ = coulomb3d_sums(x, EPS, want_grad=False)
    assert np.allclose(pot[:2], 1e160, rtol=1e-15, atol=0)
    with np.errstate(over="ignore"):  # the direct gradient of rows 0, 1 overflows; unused
        want, _ = _direct(x, x, np.ones(20), True)
    assert _rel(pot[2:], want[2:]) <= EPS


def test_p2_underflowing_pair_is_refused():
    # a pair alone is scaled to extent ≈ 1 first (the sums are scale-covariant): exact there
    pot, grad = coulomb2d_sums(np.array([[0.0, 0.0], [0.0, 1e-160]]), EPS)
    np.testing.assert_allclose(pot, 160 * np.log(10.0), rtol=EPS)
    np.testing.assert_allclose(grad[:, 1], [1e160, -1e160], rtol=EPS)
    x = np.array([[0.0, 0.0], [0.0, 1e-170], [1.0, 1.0]])  # r² = 0 exactly: pot +inf off a twin
    with pytest.raises(NumericalError, match="1.5e-154"):
        coulomb2d_sums(x, EPS, want_grad=False)
    with pytest.raises(NumericalError, match="1.5e-154"):
        coulomb2d_field(x[1:2], x[[0, 2]], np.ones(2), EPS)
    # the gradient alone of that pair (r² = 0 exactly, yet no twin): refused, not a silent 0
    with pytest.raises(NumericalError, match="1.5e-154"):
        coulomb2d_sums(x, EPS, want_value=False)
    # exact twins stay legitimate: +inf potential, finite (zero-subgradient) gradient
    pot, grad = coulomb2d_sums(np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), EPS)
    assert np.isinf(pot[:2]).all() and np.isfinite(pot[2]) and np.isfinite(grad).all()
