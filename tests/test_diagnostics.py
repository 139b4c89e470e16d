"""Every diagnostic against a second, independent computation (the distances through the one
entry point, meanfield.ot.wasserstein)."""

import math

import numpy as np
import ot
import pytest
import torch
from scipy.linalg import sqrtm
from scipy.optimize import linear_sum_assignment

from meanfield.domains import Box
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.features import get_feature_map
from meanfield.kernels import Quadratic
from meanfield.ot import Measure, w1, w2, wasserstein
from meanfield.ot.diagnostics import free_energy, grid_kernel, kernel_gap
from meanfield.pde import Density, Grid

P, D = Measure.from_particles, Measure.from_density


def _grids(a, b, **kw) -> float:
    return wasserstein(D(a), D(b), **kw).distance


def _subdivided_atoms(rho: Density, K: int):
    """The 1D piecewise-constant density as K equal atoms per cell (sub-cell midpoints).

    W2(cells, atoms) ≤ h / (K √12): every sub-cell's uniform mass moves to its midpoint.
    """
    g = rho.grid
    x = (g.edges[0][:-1, None] + (np.arange(K) + 0.5) / K * g.h[0]).ravel()
    w = np.repeat(rho.masses / rho.mass / K, K)
    return x, w


@pytest.mark.parametrize("order", [1, 2])
def test_1d_particles_vs_cells_matches_emd_on_refined_atoms(rng, order):
    g = Grid(Box(1, 4.0), 30)
    rho = Density.gaussian(g, 0.3, 0.7)
    x = rng.normal(size=(100, 1))
    exact = wasserstein(P(x), D(rho), order=order).distance
    metric = "sqeuclidean" if order == 2 else "euclidean"
    a = np.full(100, 1 / 100)
    for K, solver in ((20, "emd2"), (2000, "wasserstein_1d")):
        xs, ws = _subdivided_atoms(rho, K)
        if solver == "emd2":
            c = ot.emd2(a, ws, ot.dist(x, xs[:, None], metric=metric), numItermax=10**8)
        else:
            c = ot.wasserstein_1d(x[:, 0], xs, a, ws, p=order)
        ref = math.sqrt(c) if order == 2 else c
        # triangle inequality: |W(μ, cells) − W(μ, atoms)| ≤ W(cells, atoms) ≤ h/(K√12)
        assert abs(exact - ref) <= g.h[0] / (K * math.sqrt(12)) + 1e-12, (K, exact, ref)
    assert (w2 if order == 2 else w1)(P(x), D(rho)).distance == exact


def test_1d_centres_model_equals_emd_and_wasserstein_1d(rng):
    g = Grid(Box(1, 2.0), 25)
    rho = Density(g, rng.random(25) * (rng.random(25) > 0.2))
    x = rng.uniform(-2, 2, size=(40, 1))
    w = rng.random(40)
    ours = w2(P(x, w), D(rho).atoms()).distance  # the density read as atoms at centres
    a, b = w / w.sum(), rho.masses / rho.mass
    ref_emd = math.sqrt(ot.emd2(a, b, ot.dist(x, g.centers)))
    ref_1d = math.sqrt(ot.wasserstein_1d(x[:, 0], g.centers[:, 0], a, b, p=2))
    assert ours == pytest.approx(ref_emd, abs=1e-12)
    assert ours == pytest.approx(ref_1d, abs=1e-12)


def test_1d_grid_vs_grid_matches_refined_atoms():
    ga, gb = Grid(Box(1, 3.0), 40), Grid(Box(1, 3.0), 55)  # different grids
    a = Density.gaussian(ga, -0.5, 0.6)
    b = Density.gaussian(gb, 0.7, 0.4)
    for order in (1, 2):
        for K, solver in ((10, "emd2"), (1000, "wasserstein_1d")):
            xa, wa = _subdivided_atoms(a, K)
            xb, wb = _subdivided_atoms(b, K)
            if solver == "emd2":
                M = ot.dist(
                    xa[:, None], xb[:, None], metric="sqeuclidean" if order == 2 else "euclidean"
                )
                c = ot.emd2(wa, wb, M, numItermax=10**8)
            else:
                c = ot.wasserstein_1d(xa, xb, wa, wb, p=order)
            ref = math.sqrt(c) if order == 2 else c
            bound = (ga.h[0] + gb.h[0]) / (K * math.sqrt(12))
            assert abs(_grids(a, b, order=order) - ref) <= bound + 1e-12


def test_1d_gaussian_w2_closed_form():
    # W2(N(m1, s1²), N(m2, s2²)) = √((m1 − m2)² + (s1 − s2)²).  The cell-averaged Gaussians
    # differ from the exact laws by O(h²) in quantile (measured error 0.09 h² at n = 400),
    # the truncation at ±8 by < 1e-14: bound 0.5 h².
    (m1, s1), (m2, s2) = (-0.5, 0.6), (0.8, 1.1)
    exact = math.hypot(m1 - m2, s1 - s2)
    for n in (400, 800):
        g = Grid(Box(1, 8.0), n)
        d = _grids(Density.gaussian(g, m1, s1), Density.gaussian(g, m2, s2))
        assert abs(d - exact) <= 0.5 * g.h[0] ** 2


def test_2d_gaussian_w2_closed_form_with_centre_atoms():
    # Bures formula W2² = |Δm|² + tr(S1 + S2 − 2(S1^½ S2 S1^½)^½).  Each density's centre-atom
    # version is within h√(p/12) of its piecewise-constant version, itself within O(h²) of
    # the Gaussian: bound 2 h √(2/12) + h².
    g = Grid(Box(2, 4.0), 40)
    m1, s1 = np.array([0.5, -0.2]), np.array([0.6, 0.9])
    m2, s2 = np.array([-0.3, 0.4]), np.array([1.0, 0.5])
    a, b = Density.gaussian(g, m1, s1), Density.gaussian(g, m2, s2)
    S1, S2 = np.diag(s1**2), np.diag(s2**2)
    r = sqrtm(S1)
    exact = math.sqrt(np.sum((m1 - m2) ** 2) + np.trace(S1 + S2 - 2 * sqrtm(r @ S2 @ r)).real)
    h = g.h[0]
    r = w2(D(a), D(b))
    assert r.details["centre_bias"] == pytest.approx(2 * h * math.sqrt(2 / 12), rel=1e-12)
    assert abs(r.distance - exact) <= r.details["centre_bias"] + h**2


def test_2d_particles_vs_uniform_grid_equals_assignment(rng):
    # a uniform density on M cells vs M particles: the optimal plan is a permutation, found
    # independently by the Hungarian algorithm
    g = Grid(Box(2, 1.0), 8)
    x = rng.uniform(-1, 1, size=(64, 2))
    C = ((x[:, None, :] - g.centers[None, :, :]) ** 2).sum(-1)
    r, c = linear_sum_assignment(C)
    ref = math.sqrt(C[r, c].mean())
    ours = w2(P(x), D(Density.uniform(g)), method="exact").distance
    assert ours == pytest.approx(ref, abs=1e-12)
    C1 = np.sqrt(C)
    r1, c1 = linear_sum_assignment(C1)
    assert w1(P(x), D(Density.uniform(g))).distance == pytest.approx(C1[r1, c1].mean(), abs=1e-12)


def test_sliced_w2_isotropic_closed_form_and_bound(rng):
    # two clouds differing by a shift Δ: every projected pair differs by the shift θ·Δ, so
    # SW2² = E_θ (θ·Δ)² = |Δ|²/p exactly for the same cloud shifted; with 2000 directions
    # the Monte Carlo error on E(θ·Δ)² is ≈ |Δ|² √(Var/2000) ≈ 0.016 |Δ|² (p = 2)
    x = rng.normal(size=(500, 2))
    delta = np.array([1.0, 0.5])
    w = np.full(500, 1 / 500)
    sw = w2(Measure(x, w), Measure(x + delta, w), "sliced", n_projections=2000, seed=3).distance
    assert sw**2 == pytest.approx(np.sum(delta**2) / 2, rel=0.05)
    g = Grid(Box(2, 3.0), 16)
    rho = Density.gaussian(g, 0.2, 0.7)
    y = rng.normal(size=(200, 2)) * 0.7
    assert (
        w2(P(y), D(rho), "sliced", n_projections=500).distance
        <= w2(P(y), D(rho), "exact").distance + 1e-12
    )


def test_kernel_gap_matches_direct_computation_and_closed_form(rng):
    # positive features: E_{ω~N(0,1)} φ(x;ω)φ(x';ω) = exp(x x') (THEORY §1); the grid
    # kernel of a cell-averaged N(0,1) on [−8, 8] is the midpoint rule, error O(h²)
    g = Grid(Box(1, 8.0), 800)
    rho = Density.gaussian(g, 0.0, 1.0)
    X = np.linspace(-0.8, 0.8, 7)[:, None]
    K = grid_kernel("positive", X, rho)
    np.testing.assert_allclose(K, np.exp(X @ X.T), rtol=2 * g.h[0] ** 2)
    omega = rng.normal(size=(300, 1))
    fmap = get_feature_map("positive")
    phi = np.exp(omega @ X.T - 0.5 * (X**2).sum(1))  # (N, n), written out independently
    KN = phi.T @ phi / len(omega)
    assert kernel_gap(omega, rho, X, "positive") == pytest.approx(np.abs(KN - K).max(), rel=1e-12)
    # the feature map's own empirical kernel is the written-out one
    KN_map = fmap.empirical_kernel(torch.as_tensor(X), torch.as_tensor(omega)).numpy()
    np.testing.assert_allclose(KN_map, KN, rtol=1e-12)


def test_free_energy_of_gaussian_closed_form():
    # N(m, s²) with V = x²/2, λ ∬ |x−y|²/2: ∫V = (m² + s²)/2, pair = λ s², entropy term
    # −β⁻¹ ½ log(2πe s²); grid errors O(h²) plus the cell-averaged kernel's λ h²/12
    m, s, lam, beta = 0.4, 0.7, 0.3, 2.0
    dom = Box(1, 6.0)
    g = Grid(dom, 600)
    E = Energy([QuadraticPotential(1.0), PairInteraction(Quadratic(), lam)], dom)
    out = free_energy(E, Density.gaussian(g, m, s), beta)
    h = g.h[0]
    assert out["confinement"] == pytest.approx((m * m + s * s) / 2, abs=h**2)
    assert out["interaction"] == pytest.approx(lam * s * s, abs=h**2)
    assert out["entropy"] == pytest.approx(
        -0.5 * math.log(2 * math.pi * math.e * s * s) / beta, abs=h**2
    )
    assert out["free_energy"] == pytest.approx(out["energy"] + out["entropy"], abs=1e-15)
    assert free_energy(E, Density.gaussian(g, m, s), math.inf)["entropy"] == 0.0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda rho: w2(P(np.zeros((5, 2))), D(rho)), "same dimension p, got 2 and 1"),
        (lambda rho: wasserstein(P(np.zeros((5, 1))), D(rho), order=3), "order must"),
        (lambda rho: wasserstein(D(rho), D(rho), 1, "sliced"), "order=2"),
        (lambda rho: w2(P(np.full((5, 1), np.nan)), D(rho)), "non-finite"),
        (lambda rho: w2(P(np.zeros((5, 1))), D(rho), method="fast"), "unknown method"),
        (
            lambda rho: free_energy(Energy([QuadraticPotential()], Box(1, 3.0)), rho, 1.0),
            "incompatible domains",
        ),
        (lambda rho: kernel_gap(np.zeros((3, 1)), rho, np.zeros((4, 2))), "needs particles"),
    ],
)
def test_bad_input_errors(call, match):
    rho = Density.uniform(Grid(Box(1, 2.0), 16))
    with pytest.raises(ValueError, match=match):
        call(rho)


def test_2d_quantile_refused_and_matching_dims():
    g2 = Grid(Box(2, 1.0), 8)
    with pytest.raises(ValueError, match="'quantile' is exact in p = 1 only"):
        w2(P(np.zeros((4, 2))), D(Density.uniform(g2)), method="quantile")
    with pytest.raises(ValueError, match="same dimension"):
        _grids(Density.uniform(g2), Density.uniform(Grid(Box(1, 1.0), 8)))
    with pytest.raises(TypeError, match="must be a meanfield.pde.Density"):
        D(np.ones((8, 8)))
    with pytest.raises(TypeError, match="must be a meanfield.ot.Measure"):
        w2(np.zeros((4, 2)), D(Density.uniform(g2)))


def test_kernel_gap_of_no_data_points_is_refused_by_name():
    # a max over no entries was a numpy ValueError
    from meanfield.errors import InputError
    from meanfield.pde import Density, Grid

    rho = Density.uniform(Grid(Box(1, 1.0), 8))
    with pytest.raises(InputError, match="X must hold n >= 1"):
        kernel_gap(np.zeros((3, 1)), rho, np.zeros((0, 1)))
