"""Fast Coulomb sums at scale (meanfield.fastsums): the tolerance a Langevin step asks for,
checked against the direct sum on a random subsample; a cutoff and a mode count that follow N;
the compiled cell-list near field against a pair list of scipy; threads; named refusals.

Tolerance of the subsample checks: the requested eps bounds the relative ℓ² force error over
all particles (FMM3D's contract; for p = 2 each truncation of the Ewald split is
e^{−log(1/eps)} = eps times an O(1) factor).  The measured full-cloud errors are 0.01–0.3 eps
(tests/test_fastsums.py); the ratio ‖ΔF‖/‖F‖ over 300 random particles estimates the same ratio
with a relative spread of a few tens of per cent (300 squared errors of comparable size), so
a correct sum stays below eps itself, and a sum off by a truncation (≥ 10 eps) fails.
"""

import math

import numpy as np
import pytest
import torch
from scipy import special
from scipy.spatial import cKDTree

pytest.importorskip("finufft")
pytest.importorskip("fmm3dpy")

import meanfield._fastsums_ewald as ewald  # noqa: E402
import meanfield.fastsums as fs  # noqa: E402
from meanfield._fastsums_near import exp1, near_field  # noqa: E402
from meanfield.errors import InputError, InputTypeError  # noqa: E402
from meanfield.fastsums import DEFAULT_EPS, FastCoulombInteraction  # noqa: E402
from meanfield.kernels import Coulomb  # noqa: E402


def uniform_ball(p, N, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, p))
    return 2 * x / np.linalg.norm(x, axis=1, keepdims=True) * rng.random((N, 1)) ** (1 / p)


def direct_force(x, idx, p):
    """Σ_{j≠i} ∇k(x_i − x_j) at the particles idx, by brute force (independent of the package)."""
    z = x[idx, None, :] - x[None, :, :]
    r2 = (z * z).sum(-1)
    r2[np.arange(len(idx)), idx] = np.inf
    return -(z / (r2 if p == 2 else r2**1.5)[..., None]).sum(1)


def direct_log_potential(x, idx):
    """Σ_{j≠i} −log‖x_i − x_j‖ at the particles idx (p = 2), by brute force."""
    z = x[idx, None] - x[None]
    r = np.sqrt((z * z).sum(-1))
    r[np.arange(len(idx)), idx] = 1.0  # log 1 = 0: the particle itself adds nothing
    return -np.log(r).sum(1)


@pytest.mark.slow  # ~2 s quiet, up to 11 s on the loaded 2-core machine
@pytest.mark.parametrize("p", [2, 3])
def test_default_tolerance_force_error_on_a_random_subsample(p):
    N = 20_000
    x = uniform_ball(p, N, seed=40 + p)
    term = FastCoulombInteraction(Coulomb(p), lam=0.5, min_n=0)  # default eps
    assert term.eps == DEFAULT_EPS <= 1e-6
    g = term.grad(torch.from_numpy(x)).numpy() * N**2 / (2 * 0.5)  # Σ_j ∇k
    idx = np.random.default_rng(7).choice(N, 300, replace=False)
    want = direct_force(x, idx, p)
    err = np.linalg.norm(g[idx] - want) / np.linalg.norm(want)
    # observed (this seed, eps = 1e-6): 2.6e-8 (p = 2), 2.9e-8 (p = 3); see the docstring
    assert err <= DEFAULT_EPS


def test_cutoff_and_modes_follow_n():
    # on one cloud shape the cutoff holds ≈ NEAR_NEIGHBOURS neighbours at every N, so it
    # shrinks as N^(−1/2), and the modes (2M + 1)² grow as N (no fixed cap): a 10× larger
    # cloud gets r_c × 10^(−1/2) and modes × 10, up to the 2^(1/16) rounding of the plan
    # (≤ 4.4 % per axis) and the subsample estimate of the median spacing (a few per cent)
    plans = {}
    for N in (10_000, 100_000):
        x = uniform_ball(2, N, seed=1)
        r_c = ewald._cutoff(x, fs.NEAR_NEIGHBOURS)
        # the cutoff holds the requested median number of neighbours (independent count)
        counts = cKDTree(x).query_ball_point(x[:400], r_c, return_length=True) - 1
        assert abs(np.median(counts) / fs.NEAR_NEIGHBOURS - 1) < 0.15
        plan = ewald._plan(4.0, r_c, 1e-6, int(fs.MODES_PER_PARTICLE * N) + 4096, 4.0)[0]
        plans[N] = plan
        assert (2 * plan.M + 1) ** 2 <= fs.MODES_PER_PARTICLE * N + 4096
        assert plan.r_c >= r_c  # rounded up, never floored by the mode cap here
    ratio_rc = plans[100_000].r_c / plans[10_000].r_c
    assert abs(ratio_rc / 10**-0.5 - 1) < 0.12
    ratio_modes = ((2 * plans[100_000].M + 1) / (2 * plans[10_000].M + 1)) ** 2
    assert 7 < ratio_modes < 13


def test_a_far_outlier_keeps_the_modes_linear_and_the_sum_right():
    # one particle 1000 radii away stretches the box: the mode cap floors the cutoff
    # (more near pairs) instead of allocating (box / spacing)² modes
    N = 3000
    x = uniform_ball(2, N, seed=3)
    x[0] = [2000.0, 0.0]
    pot, grad = fs.coulomb2d_sums(x, 1e-8)
    idx = np.arange(0, N, 10)
    want = direct_force(x, idx, 2)
    assert np.linalg.norm(grad[idx] - want) / np.linalg.norm(want) <= 1e-8
    want_pot = direct_log_potential(x, idx)
    assert np.linalg.norm(pot[idx] - want_pot) <= 1e-8 * np.linalg.norm(want_pot)
    key = next(reversed(ewald._PLAN_CACHE))
    plan = ewald._PLAN_CACHE[key][0]
    assert (2 * plan.M + 1) ** 2 <= fs.MODES_PER_PARTICLE * N + 4096


def test_a_round_cloud_gets_the_shorter_period_and_stays_exact():
    # the kernel is truncated at the cloud's diameter bound 2 max‖x − centre‖ (here the
    # circle's diameter 4, with two antipodal points at exactly that distance) rather than
    # the box diagonal 4√2: the period drops from 2.41 s to 2 s, (2/2.41)² ≈ 0.69 of the
    # modes; the sums stay at their tolerance against the direct sum (measured ≈ 0.1 eps)
    N = 4000
    x = uniform_ball(2, N, seed=4)
    x[0], x[1] = [2.0, 0.0], [-2.0, 0.0]
    ewald._PLAN_CACHE.clear()
    pot, grad = fs.coulomb2d_sums(x, 1e-10)
    plan = next(reversed(ewald._PLAN_CACHE.values()))[0]
    square = ewald._EwaldPlan2D(plan.side, plan.r_c, 1e-10, 10**12)
    assert plan.diam < 1.05 * 4.0 < square.diam
    assert ((2 * plan.M + 1) / (2 * square.M + 1)) ** 2 < 0.75
    idx = np.arange(0, N, 7)
    want = direct_force(x, idx, 2)
    assert np.linalg.norm(grad[idx] - want) / np.linalg.norm(want) <= 1e-10
    want_pot = direct_log_potential(x, idx)
    assert np.linalg.norm(pot[idx] - want_pot) <= 1e-10 * np.linalg.norm(want_pot)


def test_a_shrinking_cloud_reuses_the_plan_and_a_growing_one_does_not():
    # a Langevin run's box jitters across the plan's 2^(1/16) quanta: a cached plan that
    # covers the cloud (side and diameter) with a cutoff within two quanta of the wanted one
    # serves it (no new multipliers), exactly as accurate; a larger cloud gets a new plan
    N = 3000
    x = uniform_ball(2, N, seed=5)
    ewald._PLAN_CACHE.clear()
    fs.coulomb2d_sums(x, 1e-10, want_value=False)
    first = next(iter(ewald._PLAN_CACHE.values()))[0]
    for scale in (0.98, 0.96, 1.0):
        _, grad = fs.coulomb2d_sums(scale * x, 1e-10, want_value=False)
        assert [hit[0] for hit in ewald._PLAN_CACHE.values()] == [first]
        idx = np.arange(0, N, 11)
        want = direct_force(scale * x, idx, 2)
        assert np.linalg.norm(grad[idx] - want) / np.linalg.norm(want) <= 1e-10
    fs.coulomb2d_sums(1.2 * x, 1e-10, want_value=False)
    assert len(ewald._PLAN_CACHE) == 2
    assert next(reversed(ewald._PLAN_CACHE.values()))[0].side >= 1.2 * first.side / 1.05


def test_the_spectrum_buffer_is_reused_and_never_shared_between_calls():
    # the smooth part writes its (1 or 2, 2M + 1, 2M + 1) spectra into one buffer kept
    # between calls (a fresh one cost 10 % of a step at N = 1e6 in page faults): same shape,
    # same buffer; every combination of wanted outputs and a change of shape give the sums a
    # fresh buffer would (exactly: the same arithmetic), and concurrent calls from two
    # threads (the second gets its own buffer) give what each gives alone
    from concurrent.futures import ThreadPoolExecutor

    # two clouds with one plan (the second inside the first's box): one spectrum shape, so
    # a buffer shared by concurrent calls would mix their spectra
    x = uniform_ball(2, 20000, seed=21)
    clouds = [x, 0.99 * x[::-1] + 0.001]
    ewald._SCRATCH.clear()
    ewald._PLAN_CACHE.clear()
    alone = [fs.coulomb2d_sums(x, 1e-8, n_threads=1) for x in clouds]
    buffer = ewald._SCRATCH._buffer
    assert buffer is not None and buffer.shape[0] == 2  # value and gradient: two spectra
    again = fs.coulomb2d_sums(clouds[1], 1e-8, n_threads=1)
    assert ewald._SCRATCH._buffer is buffer
    for got, want in zip(again, alone[1], strict=True):
        np.testing.assert_array_equal(got, want)
    _, grad = fs.coulomb2d_sums(clouds[0], 1e-8, want_value=False, n_threads=1)
    pot, _ = fs.coulomb2d_sums(clouds[0], 1e-8, want_grad=False, n_threads=1)
    assert ewald._SCRATCH._buffer is buffer  # one spectrum: a slot of the kept two
    np.testing.assert_array_equal(grad, alone[0][1])
    np.testing.assert_array_equal(pot, alone[0][0])
    with ThreadPoolExecutor(2) as pool:
        for _ in range(3):
            runs = [pool.submit(fs.coulomb2d_sums, x, 1e-8, n_threads=1) for x in clouds]
            for run, want in zip(runs, alone, strict=True):
                for got, expected in zip(run.result(), want, strict=True):
                    np.testing.assert_array_equal(got, expected)
    assert len({hit[0].M for hit in ewald._PLAN_CACHE.values()}) == 1
    idx = np.arange(0, 20000, 97)  # and the sums are right, not only repeatable
    want = direct_force(clouds[0], idx, 2)
    assert np.linalg.norm(alone[0][1][idx] - want) / np.linalg.norm(want) <= 1e-8


def test_exp1_against_scipy():
    # the polynomial tables (x ≤ 1, 1 < x < 65, every interval's ends included) and the
    # continued fraction (x ≥ 65) against cephes, 1e-13 relative (the tables reach 4e-14)
    ends = np.arange(1.0, 65.0 + 1e-9, 1 / 8)
    xs = np.concatenate(
        [np.logspace(-12, 0, 300), np.linspace(1.0, 700.0, 3000), ends, np.nextafter(ends, 0)]
    )
    got = np.array([exp1(v) for v in xs])
    assert np.max(np.abs(got / special.exp1(xs) - 1)) < 1e-13
    assert exp1(0.0) == np.inf


def test_cell_list_near_field_matches_a_scipy_pair_list():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4000, 2))
    x[11] = x[12]  # an exact twin pair: +inf value, zero subgradient
    r_c, sigma = 0.12, 0.12 / math.sqrt(math.log(1e8))
    i, j = cKDTree(x).query_pairs(r_c, output_type="ndarray").T
    d = x[i] - x[j]
    s2 = (d * d).sum(1) / sigma**2
    with np.errstate(divide="ignore", invalid="ignore"):
        v = 0.5 * special.exp1(s2)
        c = np.where(s2 > 0, -np.exp(-s2) / (s2 * sigma**2), 0.0)
    pot = np.bincount(i, v, 4000) + np.bincount(j, v, 4000)
    f = c[:, None] * d
    grad = np.stack([np.bincount(i, f[:, a], 4000) - np.bincount(j, f[:, a], 4000) for a in (0, 1)])
    got_pot, got_grad = near_field(x, x, np.ones(4000), r_c, sigma, True, True, same=True)
    assert np.isinf(got_pot[[11, 12]]).all() and np.isinf(pot[[11, 12]]).all()
    fin = np.isfinite(pot)
    assert np.allclose(got_pot[fin], pot[fin], rtol=1e-13, atol=1e-13)
    assert np.allclose(got_grad, grad.T, rtol=1e-12, atol=1e-9)
    # targets apart from the sources, some outside the sources' box, weights with a zero
    at = rng.normal(size=(300, 2)) * 3
    w = rng.random(4000)
    w[5] = 0.0
    rec = cKDTree(at).sparse_distance_matrix(cKDTree(x), r_c, output_type="ndarray")
    want = np.bincount(rec["i"], 0.5 * special.exp1((rec["v"] / sigma) ** 2) * w[rec["j"]], 300)
    got, _ = near_field(at, x, w, r_c, sigma, True, False)
    assert np.allclose(got, want, rtol=1e-13, atol=1e-15)


def pair_list_sums(x, w, r_c, sigma):
    """Σ_j over the pairs within r_c of ½E₁(r²/σ²) w_j and its gradient, from scipy's pair
    list (independent of the cell lists): +inf at a point on a charged twin, the zero
    subgradient there, nothing from an uncharged point."""
    n = len(x)
    i, j = cKDTree(x).query_pairs(r_c, output_type="ndarray").T
    d = x[i] - x[j]
    s2 = (d * d).sum(1) / sigma**2
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        v = 0.5 * special.exp1(s2)
        c = np.where(s2 > 0, -np.exp(-s2) / (s2 * sigma**2), 0.0)
        to_i = np.where(w[j] != 0, v * w[j], 0.0)
        to_j = np.where(w[i] != 0, v * w[i], 0.0)
    pot = np.bincount(i, to_i, n) + np.bincount(j, to_j, n)
    f = c[:, None] * d
    grad = np.stack(
        [np.bincount(i, f[:, a] * w[j], n) - np.bincount(j, f[:, a] * w[i], n) for a in (0, 1)]
    )
    return pot, grad.T


def symmetric_clouds():
    """Point clouds for the pairwise near field: name, points, weights, r_c, and the points
    whose value is +inf (on a charged twin)."""
    rng = np.random.default_rng(21)
    x = rng.normal(size=(3000, 2))
    w = rng.random(3000) * 2
    w[rng.choice(3000, 40, replace=False)] = 0.0
    x[11] = x[12]  # charged twins: +inf at both
    x[20] = x[21]  # a charged point on an uncharged one: +inf at the uncharged one only
    w[11], w[12], w[20], w[21] = 1.0, 0.5, 1.5, 0.0
    x[30] = x[31]  # two uncharged twins: nothing at either
    w[30] = w[31] = 0.0
    yield "gaussian, weighted, twins", x, w, 0.12, [11, 12, 21]
    yield "gaussian, unit weights", x, np.ones(3000), 0.12, [11, 12, 20, 21, 30, 31]
    far = x.copy()
    far[0] = [500.0, 3.0]  # stretches the box: cells larger than r_c, stencil of one cell
    yield "far outlier", far, w, 0.12, [11, 12, 21]
    small = rng.random((300, 2)) * 0.05
    yield "one cell", small, w[:300], 0.1, []
    line = np.stack([rng.random(500), np.zeros(500)], 1)
    line[7] = line[8]
    yield "one row of cells (collinear)", line, w[:500], 0.03, [7, 8]


@pytest.mark.parametrize(("name", "x", "w", "r_c", "infs"), list(symmetric_clouds()))
def test_pairwise_near_field_matches_a_scipy_pair_list(name, x, w, r_c, infs):
    sigma = r_c / math.sqrt(math.log(1e8))
    want_pot, want_grad = pair_list_sums(x, w, r_c, sigma)
    pot, grad = near_field(x, x, w, r_c, sigma, True, True, same=True)
    assert np.flatnonzero(np.isinf(want_pot)).tolist() == infs
    assert np.flatnonzero(np.isinf(pot)).tolist() == infs
    fin = np.isfinite(want_pot)
    # each sum is at most ~500 positive terms: round-off ≲ 1e-14 relative
    assert np.allclose(pot[fin], want_pot[fin], rtol=1e-13, atol=1e-13), name
    assert np.allclose(grad, want_grad, rtol=1e-12, atol=1e-9), name
    # value and gradient alone give the same sums as both together
    alone_pot, zero_grad = near_field(x, x, w, r_c, sigma, True, False, same=True)
    zero_pot, alone_grad = near_field(x, x, w, r_c, sigma, False, True, same=True)
    np.testing.assert_array_equal(alone_pot, pot)
    np.testing.assert_array_equal(alone_grad, grad)
    assert not zero_grad.any() and not zero_pot.any()


def package_cloud(N, seed):
    """A Gaussian cloud and the cutoff and width the package chooses for it at eps = 1e-6."""
    x = np.random.default_rng(seed).normal(size=(N, 2)) * 0.4
    cached, _ = ewald._ewald_setup(x, x, 1e-6, fs.NEAR_NEIGHBOURS, int(32 * N) + 4096)
    return x, cached[0].r_c, cached[0].sigma


def test_pairwise_near_field_is_the_same_on_one_and_two_threads():
    import numba

    import meanfield._fastsums_near as near

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread")
    x, r_c, sigma = package_cloud(20_000, 4)
    w = np.random.default_rng(5).random(20_000)
    # the blocks the rows split into (each ≥ reach rows), so that two threads do share work
    lo, h, ncx, ncy, reach = near._grid(x, r_c, near.SYMMETRIC_REACH)
    _, start = near.cell_sort(x[:, 0], x[:, 1], lo[0], lo[1], h, ncx, ncy)
    bounds = near._row_blocks(start, ncx, ncy, reach)
    assert bounds[0] == 0 and bounds[-1] == ncx
    assert 4 <= len(bounds) - 1 <= near.ROW_BLOCKS
    assert (np.diff(bounds) >= reach).all()
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = near_field(x, x, w, r_c, sigma, True, True, same=True)
        numba.set_num_threads(2)
        two = near_field(x, x, w, r_c, sigma, True, True, same=True)
    finally:
        numba.set_num_threads(threads)
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)


def _fewest_blocks_by_brute_force(work, reach, blocks):
    """The least cost of the costliest block over all splits into ≤ blocks blocks of ≥ reach
    consecutive items (dynamic programming over every block end and start)."""
    n, csum = len(work), np.concatenate([[0.0], np.cumsum(work)])
    best = np.full((n + 1, blocks + 1), np.inf)
    best[0, 0] = 0.0
    for i in range(1, n + 1):
        for k in range(1, blocks + 1):
            for j in range(0, i - reach + 1):
                best[i, k] = min(best[i, k], max(best[j, k - 1], csum[i] - csum[j]))
    return best[n, 1:].min()


def test_row_blocks_make_the_costliest_block_as_cheap_as_any_split_can():
    # the near field's rows are split into ≤ ROW_BLOCKS blocks of ≥ reach rows (blocks two
    # apart never write the same row) whose costliest block is the cheapest possible: on a
    # concentrated cloud equal shares are not possible, and the former equal-share split ran
    # 1.4x instead of 2x faster on two threads.  Against the exhaustive split on 300 random
    # instances, smooth and heavy-tailed costs (bisection to 2^-40: equal to 1e-9)
    import meanfield._fastsums_near as near

    rng = np.random.default_rng(0)
    for trial in range(300):
        n, reach, blocks = (
            int(rng.integers(2, 40)),
            int(rng.integers(1, 4)),
            int(rng.integers(1, 9)),
        )
        work = rng.random(n) ** 3 * 10 if trial % 2 else rng.random(n)
        bounds = near._min_max_blocks(work, reach, blocks)
        assert bounds[0] == 0 and bounds[-1] == n and 1 <= len(bounds) - 1 <= blocks
        if n < 2 * reach:
            continue
        assert (np.diff(bounds) >= reach).all()
        worst = np.add.reduceat(work, bounds[:-1]).max()
        assert worst <= _fewest_blocks_by_brute_force(work, reach, blocks) * (1 + 1e-9)


def test_row_work_counts_the_candidates_of_the_half_stencil():
    # the cost estimate of a cell row is its candidates (the rest of each point's cell, the
    # next reach cells of its row, the (2 reach + 1) cells of each of the next reach rows)
    # plus RUN_COST per run; counted here point by point, the estimate differs only by its
    # mean n_c/2 for the rest of a cell (the count is n_c (n_c − 1)/2 a cell)
    import meanfield._fastsums_near as near

    x, r_c, _ = package_cloud(5_000, 7)
    lo, h, ncx, ncy, reach = near._grid(x, r_c, near.SYMMETRIC_REACH)
    _, start = near.cell_sort(x[:, 0], x[:, 1], lo[0], lo[1], h, ncx, ncy)
    n = np.diff(start).reshape(ncx, ncy)
    padded = np.zeros((ncx + reach, ncy + 2 * reach), dtype=np.int64)
    padded[:ncx, reach : reach + ncy] = n
    counted = np.zeros(ncx)
    for cx in range(ncx):
        for cy in range(ncy):
            own = n[cx, cy] * (n[cx, cy] - 1) / 2 + n[cx, cy] * n[cx, cy + 1 : cy + reach + 1].sum()
            ahead = padded[cx + 1 : cx + reach + 1, cy : cy + 2 * reach + 1].sum()
            counted[cx] += own + n[cx, cy] * (ahead + near.RUN_COST * (1 + reach) + 0.5)
    np.testing.assert_allclose(near._row_work(start, ncx, ncy, reach), counted, rtol=1e-12)


def test_pairwise_near_field_matches_the_per_target_one():
    # the same sums in another order (each pair once, added to both ends, against each
    # target's own loop over its neighbours): ~256 positive terms per value, round-off
    # ~1e-15 relative; the gradient's terms cancel, so its scale is the largest component
    x, r_c, sigma = package_cloud(20_000, 6)
    x[100] = x[101]
    for w in (np.ones(20_000), np.random.default_rng(7).random(20_000)):
        pair = near_field(x, x, w, r_c, sigma, True, True, same=True)
        each = near_field(x, x, w, r_c, sigma, True, True, same=True, symmetric=False)
        fin = np.isfinite(each[0])
        assert (fin == np.isfinite(pair[0])).all() and fin.sum() == 20_000 - 2
        assert np.allclose(pair[0][fin], each[0][fin], rtol=1e-12, atol=0)
        assert np.allclose(pair[1], each[1], rtol=1e-12, atol=1e-12 * np.abs(each[1]).max())
    with pytest.raises(InputError, match="symmetric=True needs same=True"):
        near_field(x[:5], x, w, r_c, sigma, True, True, symmetric=True)


@pytest.mark.slow  # ~1 s quiet, 5 s loaded
def test_threads_give_the_same_sums():
    # each near sum runs in one order on any thread (tests above); FINUFFT's spreading order may
    # change with threads, a round-off difference far below eps
    x = uniform_ball(2, 20_000, seed=9)
    one = fs.coulomb2d_sums(x, 1e-6, n_threads=1)
    two = fs.coulomb2d_sums(x, 1e-6, n_threads=2)
    for a, b in zip(one, two, strict=True):
        assert np.linalg.norm(a - b) <= 1e-12 * np.linalg.norm(a)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"eps": 1e-1}, InputError, r"eps .*\[1e-14, 0.01\]"),
        ({"eps": 1e-16}, InputError, r"eps .*\[1e-14, 0.01\]"),
        ({"eps": float("nan")}, InputError, "eps"),
        ({"eps": "tight"}, InputTypeError, "eps"),
        ({"n_threads": 0}, InputError, "n_threads"),
        ({"n_threads": 1.5}, InputTypeError, "n_threads"),
    ],
)
def test_bad_tolerance_and_threads_are_refused_before_any_sum(kwargs, error, match):
    with pytest.raises(error, match=match):
        FastCoulombInteraction(Coulomb(2), **kwargs)


def test_benchmark_scaling_child_and_table(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_fastsums.py"
    spec = importlib.util.spec_from_file_location("bench_fastsums", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    threads = torch.get_num_threads()
    try:
        rows = [bench.scaling_child(p, N, 1e-6, 1, 1) for p in (2, 3) for N in (1000, 2000)]
    finally:
        torch.set_num_threads(threads)
    for r in rows:
        assert r["force_rel_err_subsample"] <= 1e-6
        assert r["peak_rss_bytes"] >= r["rss_before_sum_bytes"] > 0
        r["loadavg_before"] = [1.0, 1.0, 1.0]
    res = {"rows": rows, "ratios": {}, "eps": 1e-6, "threads": 1, "repeats": 1, "wall_s": 1.0}
    res["machine"] = {
        **bench.machine(torch),
        "loadavg_end": [1.0, 1.0, 1.0],
    }
    assert "| 3 | FMM (fmm3dpy) | 2e+03 |" in bench.scaling_markdown(res)


def test_the_near_field_leaves_torchs_thread_count_alone():
    # numba's OpenMP pool shares the OpenMP runtime with torch: starting it used to raise
    # torch's thread count to the CPU count for the rest of the process (every later matrix
    # product of a one-thread run then fought for a busy core).  A fresh process, since the
    # pool starts once per process.
    import subprocess
    import sys

    code = (
        "import numpy as np, torch\n"
        "torch.set_num_threads(1)\n"
        "from meanfield.fastsums import coulomb2d_sums\n"
        "x = np.random.default_rng(0).normal(size=(3000, 2))\n"
        "coulomb2d_sums(x, 1e-6)\n"
        "print(torch.get_num_threads())\n"
        "coulomb2d_sums(x, 1e-6, n_threads=2)\n"
        "print(torch.get_num_threads())\n"
    )
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1"]
