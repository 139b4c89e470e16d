"""The grid in p = 3: cell-integrated Coulomb/Riesz kernels, the uniform-ball equilibrium of the
Coulomb gas (THEORY §5), mass and positivity along a solve, and W2 in 3D."""

import math

import numpy as np
import pytest
import xarray as xr
from scipy.integrate import tplquad

from meanfield.domains import Box
from meanfield.kernels import Coulomb, Gaussian, Riesz
from meanfield.ot import Measure, w2
from meanfield.ot.distance import resolve_w_method
from meanfield.pde import (
    Density,
    FFTConvolution,
    FreeEnergyTracker,
    Grid,
    MassTracker,
    McKeanVlasov,
    cell_integrated_kernel,
)
from meanfield.studies.coulomb3d import BALL_ENERGY, ball_energy, grid_equilibrium

# the quadratures err below 1e-14 relative (convolution module docstring); scipy's tplquad
# reaches ~1e-11 at the tolerances below, so 1e-9 leaves margin
QUAD_RTOL = 1e-9


def test_central_cell_of_the_coulomb_kernel_matches_the_closed_form():
    # ∫_{[-1/2, 1/2]^3} dz/|z| = 3 log(2 + √3) − π/2 (the potential at the centre of a unit
    # cube), and the weight scales as h^(p − s) = h² for the homogeneous kernel 1/|z|
    exact = 3 * math.log(2 + math.sqrt(3)) - math.pi / 2
    for h in (1.0, 0.1):
        W = cell_integrated_kernel(Coulomb(3), (h,) * 3, (2, 2, 2))
        assert W[1, 1, 1] == pytest.approx(exact * h**2, rel=1e-14)


@pytest.mark.parametrize("kernel", [Riesz(1.0), Riesz(-1.0), Riesz(1.0, softening=0.05)])
def test_3d_cell_integrals_match_tplquad(kernel):
    h = (1.0, 0.5, 0.75)  # anisotropic cells
    W = cell_integrated_kernel(kernel, h, (3, 3, 3))

    def f(z, y, x):
        return float(kernel.radial(math.sqrt(x * x + y * y + z * z)))

    for m in [(0, 0, 0), (1, 0, 0), (2, 1, 0)]:
        if m == (0, 0, 0):  # eight octants with the singularity at a corner
            ref = 8 * tplquad(f, 0, 0.5, 0, 0.25, 0, 0.375, epsabs=1e-13, epsrel=1e-11)[0]
        else:
            lo = [mm * hh - hh / 2 for mm, hh in zip(m, h, strict=True)]
            ref = tplquad(
                f, lo[0], lo[0] + h[0], lo[1], lo[1] + h[1], lo[2], lo[2] + h[2], epsrel=1e-11
            )[0]
        assert W[tuple(2 + mm for mm in m)] == pytest.approx(ref, rel=QUAD_RTOL)


@pytest.mark.parametrize("kernel", [Coulomb(3), Gaussian(0.5)])
def test_3d_fft_convolution_equals_the_direct_sum(kernel):
    grid = Grid(Box(3, 1.0), (4, 5, 6))
    conv = FFTConvolution(kernel, grid)
    rho = np.random.default_rng(0).random(grid.shape)
    np.testing.assert_allclose(conv(rho), conv.direct(rho), rtol=1e-12, atol=1e-13)


def test_3d_gaussian_density_is_a_product_of_1d_laws():
    grid = Grid(Box(3, 2.0), (8, 10, 12))
    rho = Density.gaussian(grid, mean=[0.1, -0.2, 0.0], std=[0.5, 0.4, 0.3])
    assert rho.mass == pytest.approx(1.0, abs=1e-14)
    m1 = [
        Density.gaussian(Grid(Box(1, 2.0), k), mean=c, std=s).data
        for k, c, s in zip((8, 10, 12), (0.1, -0.2, 0.0), (0.5, 0.4, 0.3), strict=True)
    ]
    np.testing.assert_allclose(rho.data, np.einsum("i,j,k->ijk", *m1), rtol=1e-13)
    assert rho.to_xarray().dims == ("x", "y", "z")


def test_uniform_ball_radius_and_flatness_converge_with_h():
    """μ* of V = |ω|²/2, k = 1/|z|, λ = 1/2 is uniform on the unit ball (THEORY §5)."""
    rows = []
    for n in (8, 16, 24):
        rho, report, d = grid_equilibrium(n, half_width=1.25, tol=1e-8)
        assert report.converged, str(report)
        # the mass constraint is met to the MINRES residual of the KKT solve (~1e-12)
        assert d["mass"] == pytest.approx(1.0, abs=1e-9) and rho.data.min() >= 0
        rows.append((d["h"], d["radius_error"], d["flatness"], abs(d["energy"] - BALL_ENERGY)))
    h, rad, flat, en = (np.array(c) for c in zip(*rows, strict=True))
    # every error decreases as the grid is refined ...
    for err in (rad, flat, en):
        assert np.all(np.diff(err) < 0), (h, err)
    # ... at least at first order in h (measured slopes: radius 1.9, flatness 2.5, energy 2)
    for err in (rad, flat, en):
        assert np.polyfit(np.log(h), np.log(err), 1)[0] > 1.0
    assert rad[-1] < 2e-3 and flat[-1] < 2e-3  # measured 9.5e-4 and 5.0e-4 at n = 24
    # no mass beyond one cell outside the unit ball
    assert d["mass_outside"] == 0.0


def test_3d_solve_keeps_mass_and_positivity_and_dissipates_free_energy():
    grid = Grid(Box(3, 1.25), 12)
    eq = McKeanVlasov(ball_energy(1.25), grid, beta=20.0)
    init = Density.gaussian(grid, mean=[0.2, 0.0, -0.1], std=0.35)
    res = eq.solve(init, 0.3, trackers=[MassTracker(0.05), FreeEnergyTracker(0.05)])
    ds = res.dataset()
    assert res.t == pytest.approx(0.3)
    np.testing.assert_allclose(ds["mass"], 1.0, rtol=1e-12)
    assert float(ds["min_density"].min()) > 0  # a positive density stays positive
    assert np.all(np.diff(ds["free_energy"].values) <= 1e-12)
    # the repulsion spreads the mass: the second moment grows from 3 × 0.35² ≈ 0.37 (to 0.61
    # at t = 0.3; the β = ∞ ball has 3/5, entropy at β = 20 adds a little)
    r2 = lambda d: float(np.trace(d.covariance) + d.mean @ d.mean)  # noqa: E731
    assert r2(init) + 0.1 < r2(res.state) < 0.7


def test_3d_w2_is_exact_on_small_grids_and_sparse_exact_otherwise():
    grid = Grid(Box(3, 1.0), 6)
    rho = Density.gaussian(grid, std=0.4)
    # the cell-centre atoms with the cell masses are the grid measure: exact W2 = 0
    atoms = Measure.from_particles(grid.centers, weights=rho.masses.ravel())
    assert w2(atoms, Measure.from_density(rho), "exact").distance == pytest.approx(0.0, abs=1e-7)
    shifted = Density.gaussian(grid, mean=[1 / 3, 0, 0], std=0.4)  # one cell along x
    a, b = Measure.from_density(rho), Measure.from_density(shifted)
    exact = w2(a, b, "exact").distance
    sw2 = w2(a, b, "sliced", n_projections=500).distance
    assert 0 < sw2 < exact <= 1 / 3 + 1e-12
    assert resolve_w_method(3, 10, 10) == "exact"
    # above EXACT_MAX_PAIRS "auto" stays exact on a sparse support, never sliced (issue 13)
    assert resolve_w_method(3, 10_000, 10_000) == "sparse_exact"
    assert resolve_w_method(1, 10_000, 10_000) == "exact"
    assert resolve_w_method(3, 10_000, 10_000, method="sliced") == "sliced"  # only on request


def test_coulomb3d_figure_small(tmp_path):
    """Smoke test of the registered figure at its small size (N = 40, 80 on a 10³ grid)."""
    from meanfield.cli.figures import FIGURES, make_figures

    assert "coulomb3d" in FIGURES
    paths = make_figures(tmp_path, size="small", only=["coulomb3d"], log=None)["coulomb3d"]
    assert all(p.exists() for p in paths)
    ds = xr.open_dataset(paths[-1])
    assert list(ds["N"].values) == [40, 80] and ds.attrs["sampler"] == "hmc"
    assert "exact" in ds.attrs["w2_grid_method"]
    # HMC in the Coulomb-gas regime is closer to mu*_h than iid points of the ball at equal N
    # (measured 0.19 vs 0.24 at N = 100); the radius is within 5 % of 1
    assert float(ds["w2_grid"][-1]) < float(ds["w2_grid_iid"][-1])
    assert abs(float(ds["radius"][-1]) - 1) < 0.05
    assert 0.3 < float(ds["acceptance"][-1]) <= 1
