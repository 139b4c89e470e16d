"""The k-d tree path of the near-field pass (nearest neighbours and the pair-force cap of
projected Langevin) against the dense O(N²) block pass, the second method it must reproduce;
and, inside it, the nearest neighbours by the compiled cell grid (p = 2, 3) against those by
the tree query they replace (tests/test_nearest_grid.py checks the grid by itself).

Exact where the two compute the same numbers: the nearest distances and their indices (the
distances are recomputed as the dense pass computes them; continuous random points, so no
ties), the number of capped particles (the cap test abs(c) > limit is made on the same r²).
The correction sums the same terms in another order: equal to 1e-12 of its largest entry
(a particle has a few capped pairs, each summand rounded to ~1e-16 relative).  The closed
form of the cap radius is checked against a bisection on ``grad_coeff_sq`` itself.
"""

import math

import pytest
import torch

import meanfield.dynamics.near_field as near_field_module
from meanfield.domains import Ball
from meanfield.dynamics.langevin import ProjectedLangevin
from meanfield.dynamics.near_field import near_field
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.kernels import CallableKernel, Coulomb, Riesz

N = 3000
F64 = torch.float64


def _points(shape, seed, clustered):
    """Uniform points in [0, 1]^p; ``clustered``: every 40th point moved 1e-5 (a random
    offset) from its predecessor, so the log cap (r* ≈ 3.7e-3 here) fires on those pairs in
    every dimension."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64)
    if clustered:
        kick = torch.randn(x[..., 1::40, :].shape, generator=gen, dtype=torch.float64)
        x[..., 1::40, :] = x[..., 0::40, :][..., : kick.shape[-2], :] + 1e-5 * kick
    return x


def _terms(p):
    """Two singular terms: the log kernel and a Riesz kernel of the mean-field range."""
    s = {1: 0.5, 2: 1.0, 3: 1.0}[p]
    return [PairInteraction(Riesz(0.0), 0.5), PairInteraction(Riesz(s), 0.3)]


def _assert_same(tree, dense):
    corr_t, nearest_t, neighbour_t, n_t = tree
    corr_d, nearest_d, neighbour_d, n_d = dense
    assert torch.equal(nearest_t, nearest_d)
    assert torch.equal(neighbour_t, neighbour_d)
    assert n_t == n_d
    scale = float(corr_d.abs().max()) if n_d else 1.0
    torch.testing.assert_close(corr_t, corr_d, rtol=0.0, atol=1e-12 * scale)


def _both(omega, terms, eta, monkeypatch, *, cap=True):
    """near_field through the tree (threshold 2) and through the dense pass (threshold ∞)."""
    monkeypatch.setattr(near_field_module, "_NEAR_TREE_MIN_N", 2)
    tree = near_field(omega, terms, eta, cap=cap)
    monkeypatch.setattr(near_field_module, "_NEAR_TREE_MIN_N", math.inf)
    dense = near_field(omega, terms, eta, cap=cap)
    return tree, dense


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("clustered", [False, True])
def test_tree_equals_dense(p, clustered, monkeypatch):
    shape = (2, N, p) if clustered else (N, p)  # the clustered cases batched over 2 replicas
    omega = _points(shape, 10 * p + clustered, clustered)
    tree, dense = _both(omega, _terms(p), 0.01, monkeypatch)
    _assert_same(tree, dense)
    assert tree[0].shape == omega.shape and tree[1].shape == omega.shape[:-1]
    if clustered:  # the cap fired on every planted pair, in both replicas
        assert dense[3] >= 2 * 2 * (N // 40)


def test_tree_path_is_taken_from_the_threshold(monkeypatch):
    """Dispatch: N ≥ the threshold on CPU float64 goes to the tree, below it to the dense."""
    calls = []
    real = near_field_module._near_field_tree
    monkeypatch.setattr(
        near_field_module, "_near_field_tree", lambda *a: calls.append(a[0].shape[-2]) or real(*a)
    )
    n0 = near_field_module._NEAR_TREE_MIN_N
    terms = _terms(2)
    near_field(_points((n0, 2), 0, False), terms, 0.01, cap=True)
    near_field(_points((n0 - 1, 2), 0, False), terms, 0.01, cap=True)
    bad = _points((n0, 2), 0, False)
    bad[3, 0] = math.nan  # the tree refuses non-finite points: the dense pass takes them
    near_field(bad, terms, 0.01, cap=True)
    assert calls == [n0]


def test_cap_radius_matches_bisection_on_grad_coeff():
    """r*² in closed form against a bisection on abs(grad_coeff_sq) = limit (log r² scale),
    and abs(c) decreasing on a grid of r² (the assumption that makes r* bound the cap)."""
    r2_grid = torch.logspace(-12, 2, 2000, dtype=torch.float64)
    for kernel in [Riesz(0.0), Riesz(1.0), Riesz(-1.0), Riesz(0.5), Riesz(-1.5), Coulomb(3)]:
        for softening in (0.0, 1e-3):
            kernel.softening = softening
            c = kernel.grad_coeff_sq(r2_grid).abs()
            assert bool((c[1:] < c[:-1]).all())
            for limit in (10.0, 1e4, 1e8):
                exact = near_field_module._cap_radius_sq(kernel, limit)
                lo, hi = -200.0, 10.0  # ln r²: abs(c) > limit at lo, below it at hi
                for _ in range(200):
                    mid = (lo + hi) / 2
                    c_mid = abs(float(kernel.grad_coeff_sq(torch.tensor(math.exp(mid), dtype=F64))))
                    lo, hi = (mid, hi) if c_mid > limit else (lo, mid)
                bisected = math.exp(lo) if c_at_zero_exceeds(kernel, limit) else 0.0
                assert exact == pytest.approx(bisected, rel=1e-9, abs=1e-300)


def c_at_zero_exceeds(kernel, limit):
    """Whether abs(c) exceeds the limit at the smallest r² of the bisection (else r*² = 0)."""
    return abs(float(kernel.grad_coeff_sq(torch.tensor(math.exp(-200.0), dtype=F64)))) > limit


def test_cap_radius_refused_without_a_known_monotone_coefficient():
    log2 = CallableKernel(lambda u: -0.5 * torch.log(u), name="log2")  # a user's κ
    assert near_field_module._cap_radius_sq(log2, 10.0) is None
    assert near_field_module._cap_radius_sq(Riesz(-2.5), 10.0) is None  # abs(c) grows with r


def test_user_kernel_cap_falls_back_to_dense(monkeypatch):
    """A term without a closed-form radius has its cap taken by the dense pass (spied)."""
    log2 = CallableKernel(lambda u: -0.5 * torch.log(u), name="log2")
    terms = [PairInteraction(log2, 0.4), PairInteraction(Riesz(1.0), 0.3)]
    omega = _points((N, 2), 7, True)
    calls = []
    real = near_field_module._near_field_dense
    monkeypatch.setattr(
        near_field_module,
        "_near_field_dense",
        lambda o, t, *a: calls.append(len(t)) or real(o, t, *a),
    )
    tree, dense = _both(omega, terms, 0.01, monkeypatch)
    assert calls == [1, 2]  # the user term inside the tree pass, then the dense reference
    assert dense[3] > 0
    _assert_same(tree, dense)


def test_pair_overflow_and_chunks(monkeypatch):
    """Past the pair budget a replica's cap goes to the dense pass; the pairs are evaluated
    in chunks (here 97 at a time).  Both give the dense result."""
    n = N // 2
    omega = _points((2, n, 2), 3, True)
    terms = _terms(2)
    monkeypatch.setattr(near_field_module, "_NEAR_TREE_CHUNK", 97)
    _assert_same(*_both(omega, terms, 0.01, monkeypatch))
    monkeypatch.setattr(near_field_module, "_NEAR_TREE_PAIRS_PER_PARTICLE", 0)
    monkeypatch.setattr(near_field_module, "_NEAR_TREE_PAIR_FLOOR", 0)
    calls = []
    real = near_field_module._near_field_dense
    monkeypatch.setattr(
        near_field_module, "_near_field_dense", lambda o, *a: calls.append(o.shape) or real(o, *a)
    )
    tree, dense = _both(omega, terms, 0.01, monkeypatch)
    assert calls[:2] == [(1, n, 2), (1, n, 2)]  # each replica overflowed
    _assert_same(tree, dense)


def test_coincident_points(monkeypatch):
    """Exact duplicates: nearest 0, each the other's neighbour, no force (c = 0 there).  A
    particle whose nearest neighbour is one of a duplicated pair has two nearest neighbours:
    the paths may name either, at the same place."""
    omega = _points((N, 2), 5, False)
    omega[1::100] = omega[0::100][: omega[1::100].shape[0]]
    tree, dense = _both(omega, _terms(2), 0.01, monkeypatch)
    assert torch.equal(tree[1], dense[1]) and tree[3] == dense[3]
    torch.testing.assert_close(tree[0], dense[0], rtol=0, atol=1e-12 * float(dense[0].abs().max()))
    assert torch.equal(omega[tree[2]], omega[dense[2]])
    assert bool((tree[1][0::100] == 0).all())
    assert torch.equal(tree[2][0::100], torch.arange(1, N, 100))
    assert torch.equal(tree[2][1::100], torch.arange(0, N, 100))


def test_float32_and_no_cap(monkeypatch):
    """float32 points: the same nearest, neighbours and capped count; the correction to
    float32 summation rounding.  cap=False: nearest only, a zero correction."""
    omega = _points((N, 3), 4, True).float()
    (corr_t, *rest_t), (corr_d, *rest_d) = _both(omega, _terms(3), 0.01, monkeypatch)
    assert rest_d[2] > 0
    assert torch.equal(rest_t[0], rest_d[0]) and torch.equal(rest_t[1], rest_d[1])
    assert rest_t[2] == rest_d[2]
    torch.testing.assert_close(corr_t, corr_d, rtol=0, atol=1e-5 * float(corr_d.abs().max()))
    tree, dense = _both(omega.double(), _terms(3), 0.01, monkeypatch, cap=False)
    _assert_same(tree, dense)
    assert tree[3] == 0 and not bool(tree[0].any())


def test_langevin_steps_equal_with_either_path(monkeypatch):
    """ProjectedLangevin on the 2D log gas (planted near-collisions, so the cap acts): each of
    five steps, taken from the same state through the tree path and through the dense path,
    gives the same particles to rounding and the same capped and overshoot counts.

    Each step is compared from a common state: near a collision the chain amplifies a
    difference by η(2λ/N)/r² per step (≈ 50 at r = 4e-4), so whole chains drift apart from the
    rounding of the correction (1e-16, then 5e-15, 4e-12 after five steps here).  One step's
    difference is the rounding of η·(drift + correction), abs ≤ η·400 ≈ 4 here: a few ulp of 4,
    ≈ 1e-15; the tolerance is 1e-13."""
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Ball(2, 3.0))
    lang = ProjectedLangevin(E, eta=0.01, beta=2.0)
    state = lang.init(_points((1200, 2), 9, True) - 0.5, seed=1)
    for _ in range(5):
        monkeypatch.setattr(near_field_module, "_NEAR_TREE_MIN_N", 2)
        tree = lang.step(state)
        monkeypatch.setattr(near_field_module, "_NEAR_TREE_MIN_N", math.inf)
        dense = lang.step(state)
        assert tree.cache == dense.cache
        torch.testing.assert_close(tree.omega, dense.omega, rtol=0, atol=1e-13)
        state = dense
    assert state.cache["capped_steps"] == 5  # the cap acted in every step


def _grid_and_tree(omega, terms, eta, monkeypatch, *, cap=True):
    """near_field's tree path with the grid's nearest neighbours and with the tree's."""
    monkeypatch.setattr(near_field_module, "_NEAR_TREE_MIN_N", 2)
    grid = near_field(omega, terms, eta, cap=cap)
    monkeypatch.setattr(near_field_module, "_NEAR_GRID_DIMS", ())
    tree = near_field(omega, terms, eta, cap=cap)
    monkeypatch.setattr(near_field_module, "_NEAR_GRID_DIMS", (2, 3))
    return grid, tree


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("clustered", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_grid_equals_tree_query(p, clustered, dtype, monkeypatch):
    """The grid's nearest neighbours give what the k = 2 tree query gave: the same nearest,
    neighbour, capped count and correction, bit for bit (continuous points, no ties; the
    capped pairs are formed from the same float64 nearest distances)."""
    omega = _points((2, N, p), 100 + 10 * p + clustered, clustered).to(dtype)
    grid, tree = _grid_and_tree(omega, _terms(p), 0.01, monkeypatch)
    for a, b in zip(grid[:3], tree[:3], strict=True):
        assert torch.equal(a, b)
    assert grid[3] == tree[3]
    if clustered:  # the cap fired: the capped pairs were formed from these neighbours
        assert grid[3] > 0


@pytest.mark.parametrize("p", [2, 3])
def test_grid_ties_take_the_dense_index(p, monkeypatch):
    """Exact ties (an integer lattice: 2p neighbours at distance 1, shuffled) and coincident
    points: the grid takes the lowest index among equal distances, as the dense pass
    (torch.min) does, so the neighbours agree exactly, not only in place."""
    k = 40 if p == 2 else 12
    gen = torch.Generator().manual_seed(p)
    lattice = torch.stack(torch.meshgrid(*[torch.arange(k)] * p, indexing="ij"), -1)
    omega = lattice.reshape(-1, p).to(F64)[torch.randperm(k**p, generator=gen)] * 1e-2
    omega[1::50] = omega[0::50][: omega[1::50].shape[0]]  # coincident pairs
    tree, dense = _both(omega, _terms(p), 0.01, monkeypatch)
    assert torch.equal(tree[1], dense[1]) and torch.equal(tree[2], dense[2])
    assert tree[3] == dense[3] > 0
    scale = float(dense[0].abs().max())
    torch.testing.assert_close(tree[0], dense[0], rtol=0, atol=1e-12 * scale)


def test_grid_dispatch_and_threads(monkeypatch):
    """The grid serves p = 2 and 3; p = 1 and a crowded grid (a far outlier: all other
    points in a few cells) go to the tree query; torch's thread count is left as it was."""
    calls = []
    real = near_field_module._nearest_by_tree
    monkeypatch.setattr(
        near_field_module, "_nearest_by_tree", lambda x: calls.append(x.shape) or real(x)
    )
    threads = torch.get_num_threads()
    for p in (1, 2, 3):
        near_field(_points((N, p), p, False), _terms(p), 0.01, cap=True)
    assert calls == [(N, 1)]
    assert torch.get_num_threads() == threads
    crowded = _points((N, 2), 8, False)
    crowded[5] = 1e6
    tree, dense = _both(crowded, _terms(2), 0.01, monkeypatch)
    assert calls == [(N, 1), (N, 2)]
    _assert_same(tree, dense)
