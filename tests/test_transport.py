"""The sparse exact W2 (meanfield.transport.w2_sparse) against POT's dense network simplex."""

import numpy as np
import ot
import pytest

from meanfield.diagnostics import resolve_w_method, w_name, wasserstein_particles_grid
from meanfield.domains import Box
from meanfield.errors import InputError
from meanfield.pde import Density, Grid
from meanfield.transport import _violations, w2_sparse


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
    a = wasserstein_particles_grid(x, rho, method="exact")
    b = wasserstein_particles_grid(x, rho, method="sparse_exact")
    assert b == pytest.approx(a, rel=1e-9)  # same tolerance argument as above
    with pytest.raises(ValueError, match="order"):
        wasserstein_particles_grid(x, rho, order=1, method="sparse_exact")


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
    from meanfield.diagnostics import _quantile_distance, _segments_atoms

    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(300, 1)), rng.normal(0.4, 1.3, size=(200, 1))
    wx, wy = rng.random(300) + 0.1, rng.random(200) + 0.1
    want = _quantile_distance(
        _segments_atoms(x[:, 0], wx / wx.sum()), _segments_atoms(y[:, 0], wy / wy.sum()), 2
    )
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
    bi, bj, worst = _violations(x, y, u, v, tau, per_row=300)
    assert worst == pytest.approx(r.min(), abs=1e-12)
    got = set(zip(bi.tolist(), bj.tolist(), strict=True))
    assert got == set(zip(*np.nonzero(r < -tau), strict=True))
