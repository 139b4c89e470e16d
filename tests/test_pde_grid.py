"""Grids and densities: geometry, validation, exact sampling, clear errors."""

import math

import numpy as np
import pytest
from scipy import stats

from meanfield.domains import Ball, Box
from meanfield.energy import Energy, QuadraticPotential
from meanfield.pde import Density, Grid, McKeanVlasov


def test_grid_geometry_1d_and_2d():
    g = Grid(Box(1, 2.0), 8)
    assert g.shape == (8,) and g.size == 8 and g.h == (0.5,)
    np.testing.assert_allclose(g.axes[0], -1.75 + 0.5 * np.arange(8))
    np.testing.assert_allclose(g.edges[0], np.linspace(-2, 2, 9))
    assert g.integrate(np.ones(8)) == pytest.approx(4.0, abs=1e-15)
    g2 = Grid(Box(2, 1.0), (4, 5))
    assert g2.shape == (4, 5) and g2.centers.shape == (20, 2)
    assert g2.cell_volume == pytest.approx(0.5 * 0.4, abs=1e-15)
    # C order: the second coordinate runs fastest
    np.testing.assert_allclose(g2.centers[:5, 0], -0.75)
    np.testing.assert_allclose(g2.centers[:5, 1], g2.axes[1])
    assert g2 == Grid(Box(2, 1.0), (4, 5)) and g2 != Grid(Box(2, 1.0), 4)


def test_cell_index_inverts_centres():
    g = Grid(Box(2, 1.0), (6, 7))
    idx = g.cell_index(g.centers)
    np.testing.assert_array_equal(idx, np.arange(g.size))
    # boundary points belong to the boundary cells
    assert g.cell_index(np.array([[1.0, 1.0]]))[0] == g.size - 1
    with pytest.raises(ValueError, match="must lie in the grid's box"):
        g.cell_index(np.array([[1.5, 0.0]]))


@pytest.mark.parametrize(
    "domain, n, match",
    [
        (Box(4, 1.0), 8, r"p in \{1, 2, 3\}, got p=4"),
        (Ball(2, 1.0), 8, "incompatible domain"),
        (Box(1, 1.0), 3, r"n \(cells per axis\) must be an integer >= 4"),
        (Box(2, 1.0), (8, 8, 8), "must give 2 cell count"),
    ],
)
def test_grid_rejects_bad_input(domain, n, match):
    with pytest.raises(ValueError, match=match):
        Grid(domain, n)


def test_density_validation_names_the_problem():
    g = Grid(Box(1, 1.0), 8)
    bad = np.ones(8)
    bad[3] = -1e-3
    with pytest.raises(ValueError, match="negative value"):
        Density(g, bad)
    bad[3] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        Density(g, bad)
    with pytest.raises(ValueError, match=r"grid's shape \(8,\)"):
        Density(g, np.ones(9))


def test_incompatible_domains_rejected_by_equation():
    g = Grid(Box(1, 2.0), 16)
    with pytest.raises(ValueError, match="incompatible domains"):
        McKeanVlasov(Energy([QuadraticPotential()], Box(1, 3.0)), g, beta=1.0)
    with pytest.raises(ValueError, match="incompatible domains"):
        McKeanVlasov(Energy([QuadraticPotential()], Ball(1, 2.0)), g, beta=1.0)


def test_gaussian_cell_averages_are_exact():
    # erf differences are the exact cell masses: compare with scipy's normal cdf
    g = Grid(Box(1, 3.0), 30)
    rho = Density.gaussian(g, 0.4, 0.7, normalise=False)
    cdf = stats.norm(0.4, 0.7).cdf(g.edges[0])
    np.testing.assert_allclose(rho.masses, np.diff(cdf), rtol=0, atol=1e-15)


def test_moments_of_piecewise_constant_density():
    # uniform density on [-R, R]: mean 0, variance R²/3 exactly (the h²/12 term matters)
    g = Grid(Box(1, 1.5), 6)
    rho = Density.uniform(g)
    assert rho.mass == pytest.approx(1.0, abs=1e-15)
    assert rho.covariance[0, 0] == pytest.approx(1.5**2 / 3, abs=1e-14)


def test_sampling_is_exact_for_piecewise_constant_law():
    # the sample mean and variance match the density's exact moments within 4 standard errors
    g = Grid(Box(2, 2.0), (10, 12))
    rho = Density.gaussian(g, [0.3, -0.2], [0.5, 0.8])
    n = 40_000
    x = rho.sample(n, seed=7)
    assert np.all(np.abs(x) <= 2.0)
    cov = rho.covariance
    se = np.sqrt(np.diag(cov) / n)
    assert np.all(np.abs(x.mean(0) - rho.mean) < 4 * se)
    # variance of the sample variance ≈ 2σ⁴/n for near-Gaussian laws (bounded law: smaller)
    se_var = np.sqrt(2 * np.diag(cov) ** 2 / n)
    assert np.all(np.abs(x.var(0) - np.diag(cov)) < 4 * se_var)
    # same seed, same bits
    np.testing.assert_array_equal(x, rho.sample(n, seed=7))
    assert not math.isclose(rho.sample(5, 1)[0, 0], rho.sample(5, 2)[0, 0])


def test_gaussian_cell_masses_without_cancellation():
    # 0.5 (1 + erf) rounded cells narrower than 1e-16 standard deviations away (std 1e16 on
    # four cells of [−2, 2] gave [0, 1/3, 0, 2/3]; 1e200 a "zero mass" refusal) and lost the
    # tails' digits; the cell masses are now erf or erfc differences, as fits the cell
    from scipy.stats import norm

    for std in (1e12, 1e16, 1e200):
        rho = Density.gaussian(Grid(Box(1, 2.0), 4), 0.0, std)
        np.testing.assert_allclose(rho.data, 0.25, rtol=1e-9)
    grid = Grid(Box(1, 10.0), 40)
    rho = Density.gaussian(grid, 0.0, 0.3, normalise=False)
    edges = grid.edges[0]
    right = edges[:-1] >= 0.3  # the right tail: survival differences are exact references
    want = (norm.sf(edges[:-1] / 0.3) - norm.sf(edges[1:] / 0.3))[right] / grid.h[0]
    np.testing.assert_allclose(rho.data[right], want, rtol=1e-12)
    np.testing.assert_array_equal(rho.data, rho.data[::-1])  # and symmetric, cell for cell


def test_a_grid_whose_densities_float64_cannot_hold_is_refused_by_name():
    # a uniform density on Box(2, 1e170) had mass NaN (1/volume underflows), on Box(2, 1e-170)
    # a ZeroDivisionError (the cell area underflows); both volumes are outside the normal range
    from meanfield.errors import InputError

    for half in (1e170, 1e-170):
        with pytest.raises(InputError, match="volume of this grid"):
            Grid(Box(2, half), 4)
    assert Density.uniform(Grid(Box(2, 1e150), 4)).mass == pytest.approx(1.0, rel=1e-15)
