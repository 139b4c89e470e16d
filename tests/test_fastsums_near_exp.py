"""The vectorised gradient of the symmetric p = 2 near field (:mod:`meanfield._fastsums_near`).

Its e^{−u} (:func:`~meanfield._fastsums_near.exp_neg`, a polynomial instead of libm) against
``math.exp``; the gradient against a brute-force float64 pair sum on adversarial clouds
(twins, uncharged points, points on the cell boundaries and pairs exactly at the cutoff);
the kernel's own e^{−u} at large u; the same bits on one and two threads.
"""

import math

import numpy as np
import pytest

pytest.importorskip("numba")

from numba import njit  # noqa: E402

import meanfield._fastsums_near as near  # noqa: E402
from meanfield._fastsums_near import exp_neg, near_field  # noqa: E402

# the flags of the near-field kernels: exp_neg must keep its accuracy inside them (numba
# would otherwise compile it with its caller's "reassoc")
_KERNEL_FLAGS = {"nsz", "arcp", "contract", "afn", "reassoc"}


@njit(fastmath=_KERNEL_FLAGS)
def _exp_neg_loop(u):
    out = np.empty_like(u)
    for i in range(u.shape[0]):
        out[i] = exp_neg(u[i])
    return out


def test_exp_neg_within_one_ulp_of_math_exp():
    rng = np.random.default_rng(0)
    ln2 = math.log(2.0)
    k = np.arange(1, 1022)
    u = np.concatenate(
        [
            # the near field's range, u = r²/σ² < L = log(1/eps) ≤ 32.3 for eps ≥ 1e-14, densely
            np.linspace(0.0, 40.0, 200_001),
            rng.uniform(0.0, 708.0, 100_000),  # every result a normal number
            # the ends of the reduction's intervals, |u − k ln 2| ≈ ln 2 / 2, and its centres
            (k + 0.5) * ln2,
            (k - 0.5) * ln2,
            k * ln2,
            [0.0, 5e-324, 1e-300, 1e-17, 1e-8],
        ]
    )
    got = _exp_neg_loop(u)
    want = np.array([math.exp(-v) for v in u])
    normal = want >= np.finfo(float).tiny
    assert normal.all()
    ulps = np.abs(got - want) / np.spacing(want)
    # the Chebyshev polynomial is exact to 0.06 ulp; Horner's roundings add < 1 ulp
    # (observed maximum: 1 ulp, i.e. relative 2.2e-16)
    assert ulps.max() <= 1.0, float(ulps.max())
    assert np.abs(got - want).max() <= 2.3e-16 * want.max()


def test_exp_neg_subnormal_results_and_underflow_as_math_exp():
    u = np.concatenate([np.linspace(708.0, 745.2, 50_001), [745.13, 745.14, 746.0, 800.0, 1e300]])
    u = np.concatenate([u, [np.inf]])
    got = _exp_neg_loop(u)
    want = np.array([math.exp(-v) for v in u])
    # one rounding in the subnormal range: within one ulp of the smallest subnormal
    assert np.abs(got - want).max() <= 5e-324
    assert (got[want == 0.0] == 0.0).all() and got[-1] == 0.0


def test_the_kernel_exp_is_accurate_at_large_exponents():
    # isolated pairs at distance d = j/64 (d² exact), σ = 1: u = d² exactly up to 690 (where
    # e^{−u}/u is still a normal number), so the only errors are exp_neg's (≤ 1 ulp) and the
    # roundings of e/d² and of · d (≤ 1 ulp each) against one of e^{−u}/d: within 4 ulp.
    # A reduction (u − k ln2_hi) − k ln2_lo folded by "reassoc" errs by 2e-14 at u = 690.
    j = np.arange(1, 1682)
    d = j / 64.0
    m = len(d)
    x = np.zeros((2 * m, 2))
    x[:m, 1] = x[m:, 1] = 100.0 * np.arange(m)  # the pairs 100 apart, r_c = 27
    x[m:, 0] = d
    pot, grad = near_field(x, x, np.ones(2 * m), 27.0, 1.0, False, True, same=True)
    want = np.array([math.exp(-v * v) / v for v in d])
    np.testing.assert_allclose(grad[:m, 0], want, rtol=4 * 2.2e-16, atol=0)
    np.testing.assert_array_equal(grad[m:, 0], -grad[:m, 0])
    assert not grad[:, 1].any() and not pot.any()


def adversarial_cloud(seed):
    """Lattice points on the cell boundaries, random points, a dense cluster, twins, zero
    weights; r_c = 1/4 on [0, 1]², so the cells are 1/8 wide and lattice pairs lie exactly
    at r_c."""
    rng = np.random.default_rng(seed)
    g = np.arange(17) / 16.0
    lattice = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)  # includes (0, 0) and (1, 1)
    rand = rng.uniform(0.0, 1.0, (700, 2))
    cluster = 0.5 + 0.01 * rng.normal(size=(200, 2))
    x = np.concatenate([lattice, rand, cluster])
    # twins and a triplet: on the lattice, among the random points, in the cluster
    x = np.concatenate([x, x[[20, 300, 301, 301, 1100]]])
    n = len(x)
    w = rng.uniform(0.1, 2.0, n)
    w[rng.random(n) < 0.15] = 0.0
    w[-1] = 0.0  # a twin in the cluster without charge, its partner charged
    w[1100] = 1.5
    return x, w, n - 5  # the twins are the last five


def brute_force_gradient(x, w, r_c, sigma):
    """Σ_j w_j · (−e^{−r²/σ²}/r²)(x_i − x_j) over 0 < r_ij < r_c, and Σ of the terms' sizes."""
    d = x[:, None, :] - x[None, :, :]
    r2 = (d * d).sum(-1)
    near_pair = (r2 < r_c * r_c) & (r2 > 0.0)
    safe = np.where(near_pair, r2, 1.0)
    f = np.where(near_pair, -np.exp(-safe / sigma**2) / safe, 0.0) * w[None, :]
    terms = f[..., None] * d
    return terms.sum(1), np.abs(terms).sum(1), near_pair.sum(1), r2


@pytest.mark.parametrize("eps", [1e-6, 1e-14])
def test_gradient_matches_a_brute_force_pair_sum(eps):
    x, w, n_plain = adversarial_cloud(1)
    r_c = 0.25
    L = math.log(1.0 / eps)
    sigma = r_c / math.sqrt(L)
    lo, h, ncx, ncy, reach = near._grid(x, r_c, near.SYMMETRIC_REACH)
    # the lattice lies on the cell boundaries: cells of side r_c / 2 = 1/8 from (0, 0)
    assert lo.tolist() == [0.0, 0.0] and h == 0.125 and (ncx, ncy, reach) == (8, 8, 2)
    want, size, count, r2 = brute_force_gradient(x, w, r_c, sigma)
    # every pair the two computations of r² could place on opposite sides of r_c is a lattice
    # pair with r² = r_c² exactly (excluded by both): no other pair within 1e-9 of it
    close = np.abs(r2 - r_c * r_c) <= 1e-9 * r_c * r_c
    on_lattice = np.zeros(len(x), bool)
    on_lattice[:289] = True
    on_lattice[n_plain] = True  # the twin of lattice point 20
    assert close.any() and (on_lattice[:, None] & on_lattice[None, :])[close].all()
    assert (r2[close] == r_c * r_c).all()
    _, got = near_field(x, x, w, r_c, sigma, False, True, same=True)
    # per term: u = r²/σ² rounded differently (≲ 4 ulp relative of u, times u ≤ L in the
    # term) plus exp_neg's ulp and ~4 roundings; the sums: ≤ n_i ulp of Σ|terms| (worst case;
    # observed: 11 ulp of Σ|terms| against a bound of up to ~450, n_i ≤ 403)
    tol = (4 * L + 8 + count)[:, None] * 2.2e-16 * size
    assert (np.abs(got - want) <= tol).all(), float((np.abs(got - want) / size.clip(1e-300)).max())
    # twins feel each other not at all (the zero subgradient), the rest as their partner
    for a, b in [(20, n_plain), (300, n_plain + 1), (301, n_plain + 2), (1100, n_plain + 4)]:
        assert np.all(np.abs(got[a] - got[b]) <= tol[a] + tol[b])
    # an uncharged point still feels the others; a cloud of uncharged points feels nothing
    assert np.isfinite(got).all() and np.abs(got[w == 0.0]).max() > 0.0
    _, none = near_field(x, x, np.zeros(len(x)), r_c, sigma, False, True, same=True)
    assert not none.any()


def test_gradient_alone_is_the_same_on_one_and_two_threads():
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread")
    rng = np.random.default_rng(3)
    x = 0.4 * rng.normal(size=(30_000, 2))
    x[:50] = x[50:100]  # twins
    w = rng.random(30_000)
    w[::7] = 0.0
    r_c = 0.05  # ~120 neighbours a point at the centre, > 4 row blocks
    sigma = r_c / math.sqrt(math.log(1e6))
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = near_field(x, x, w, r_c, sigma, False, True, same=True)[1]
        numba.set_num_threads(2)
        two = near_field(x, x, w, r_c, sigma, False, True, same=True)[1]
    finally:
        numba.set_num_threads(threads)
    np.testing.assert_array_equal(one, two)
    assert np.abs(one).max() > 0.0
