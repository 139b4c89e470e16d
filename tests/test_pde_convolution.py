"""Cell-integrated kernels and the FFT convolution, against independent computations."""

import math

import numpy as np
import pytest
import torch
from scipy.integrate import dblquad, quad

from meanfield.domains import Box
from meanfield.energy import Energy, PairInteraction
from meanfield.errors import InputError
from meanfield.kernels import CallableKernel, Gaussian, Quadratic, Riesz
from meanfield.pde import Density, FFTConvolution, Grid, GridEnergy, cell_integrated_kernel
from meanfield.pde.convolution import neg_laplacian

# Every W_m is a quadrature whose error bound is below 1e-14 relative (module docstring);
# scipy's adaptive quad/dblquad reach ~1e-13 on these integrands, so 1e-11 leaves margin.
QUAD_RTOL = 1e-11


def _antiderivative(s):
    """∫ k_s(z) dz in 1D, exact (z ≠ 0)."""
    if s == 0:
        return lambda z: -(z * math.log(abs(z)) - z) if z else 0.0
    return lambda z: math.copysign(1.0, s) * math.copysign(abs(z) ** (1 - s) / (1 - s), z)


@pytest.mark.parametrize("s", [-1.0, -0.5, 0.0, 0.5, 0.9, 0.99])
def test_1d_cell_integrals_match_antiderivative(s):
    h, n = 0.1, 6
    W = cell_integrated_kernel(Riesz(s), (h,), (n,))
    F = _antiderivative(s)
    for m in range(-(n - 1), n):
        a, b = m * h - h / 2, m * h + h / 2
        exact = F(b) - F(a)
        assert W[n - 1 + m] == pytest.approx(exact, rel=QUAD_RTOL, abs=1e-15)


@pytest.mark.parametrize(
    "kernel",
    [
        Riesz(0.0),
        Riesz(1.0),
        Riesz(1.7),
        Riesz(-1.0),
        Riesz(1.0, softening=0.02),
        Riesz(2.5, softening=0.3),
        Gaussian(0.4),
    ],
)
def test_2d_cell_integrals_match_dblquad(kernel):
    # anisotropic cells, the singular cell and its neighbours
    h = (1.0, 0.5)
    W = cell_integrated_kernel(kernel, h, (4, 4))

    def f(y, x):
        return float(kernel.radial(math.hypot(x, y)))

    for m in [(0, 0), (1, 0), (0, 1), (1, 1), (3, 2)]:
        if m == (0, 0):  # four quadrants with the singularity at a corner
            ref = 4 * dblquad(f, 0, 0.5, 0, 0.25, epsabs=1e-14, epsrel=1e-13)[0]
        else:
            ref = dblquad(
                f,
                m[0] - 0.5,
                m[0] + 0.5,
                0.5 * m[1] - 0.25,
                0.5 * m[1] + 0.25,
                epsabs=1e-14,
                epsrel=1e-13,
            )[0]
        assert W[3 + m[0], 3 + m[1]] == pytest.approx(ref, rel=1e-10)
        # the kernel is radial: W is even in each axis
        assert W[3 - m[0], 3 - m[1]] == W[3 + m[0], 3 + m[1]]


def test_softened_1d_central_cell_matches_quad():
    k = Riesz(0.99, softening=1e-4)  # nearly singular: the tanh-sinh substitution handles it
    W = cell_integrated_kernel(k, (0.1,), (4,))
    ref = quad(
        lambda x: float(k.radial(abs(x))),
        -0.05,
        0.05,
        points=[0],
        epsabs=1e-15,
        epsrel=1e-13,
        limit=200,
    )[0]
    assert W[3] == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("dim, n", [(1, 37), (2, (9, 12))])
def test_fft_equals_direct_toeplitz_sum(rng, dim, n):
    g = Grid(Box(dim, 1.3), n)
    conv = FFTConvolution(Riesz(0.0), g)
    rho = rng.random(g.shape)
    fast, slow = conv(rho), conv.direct(rho)
    # FFT round-off: a few ulp times Σ|W||ρ|
    scale = conv.row_sum_bound() * np.abs(rho).max()
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-13 * scale)


def test_grid_potential_matches_energy_first_variation_for_smooth_kernel():
    # For a smooth kernel the cell average and the point value at the centre differ by
    # O(h²) (midpoint rule): the FFT potential must approach the O(M²) Energy view at that
    # rate.  This checks that kernel and lam are read from the term (nothing written twice).
    errs = []
    for n in (32, 64, 128):
        dom = Box(1, 2.0)
        g = Grid(dom, n)
        E = Energy([PairInteraction(Gaussian(0.5), lam=0.7)], dom)
        rho = Density.gaussian(g, 0.2, 0.6)
        U_grid = GridEnergy(E, g).potential(rho.data)
        w = rho.masses.ravel()
        U_direct = E.first_variation(g.centers, g.centers, w).numpy()
        errs.append(np.abs(U_grid - U_direct).max())
    orders = np.diff(np.log(errs)) / np.log(0.5)
    assert np.all(orders > 1.9), (errs, orders)


def test_quadratic_kernel_cell_average_is_shifted_by_h2_over_24():
    # k = |z|²/2 is a polynomial: its cell average is |z_c|²/2 + h²/24 exactly, and
    # Gauss-Legendre integrates it exactly
    h = 0.3
    W = cell_integrated_kernel(Quadratic(), (h,), (5,))
    m = np.arange(-4, 5)
    np.testing.assert_allclose(W / h, (m * h) ** 2 / 2 + h**2 / 24, rtol=1e-13)


@pytest.mark.parametrize(
    "kernel, n, match",
    [
        (Gaussian(0.05), 20, r"grid too coarse for the kernel: cell width h=0.1 .* use n >= 40"),
        (Riesz(1.5, softening=0.01), 20, r"softening epsilon=0.01 .* use n >= 200"),
    ],
)
def test_grid_too_coarse_for_kernel(kernel, n, match):
    g = Grid(Box(1, 1.0), n)
    with pytest.raises(ValueError, match=match):
        FFTConvolution(kernel, g)


def test_a_user_kernel_declares_the_length_the_grid_must_resolve():
    # the same Gaussian written by a user: without a declared length the grid takes it as it
    # is; with resolution_length (or a length_scale method) a coarse grid is refused by name
    def kappa(u):
        return torch.exp(-u / (2 * 0.05**2))

    g = Grid(Box(1, 1.0), 20)
    FFTConvolution(CallableKernel(kappa, name="narrow"), g)  # no length declared: no check
    with pytest.raises(ValueError, match=r"length scale 0.05 .* use n >= 40"):
        FFTConvolution(CallableKernel(kappa, name="narrow", resolution_length=0.05), g)
    FFTConvolution(
        CallableKernel(kappa, name="narrow", resolution_length=0.05), Grid(Box(1, 1.0), 40)
    )

    class Ranged(Quadratic):
        def length_scale(self, dim):
            return float("nan")

    with pytest.raises(InputError, match=r"length_scale\(1\) must be None or a finite length"):
        FFTConvolution(Ranged(), g)
    with pytest.raises(InputError, match="resolution_length"):
        CallableKernel(kappa, name="narrow", resolution_length=0.0)


def test_nonintegrable_kernel_rejected():
    with pytest.raises(ValueError, match="not integrable"):
        FFTConvolution(Riesz(1.0), Grid(Box(1, 1.0), 16))


@pytest.mark.parametrize(
    "kernel, dim",
    [(Riesz(0.0), 1), (Riesz(-1.0), 1), (Quadratic(), 1), (Riesz(0.0), 2), (Gaussian(0.3), 2)],
)
def test_stiffness_is_a_tight_upper_bound_of_the_spectral_radius(kernel, dim):
    # dense eigenvalues of v ↦ −Δ_h (W ∗ v) on a small grid: the power-iteration estimate
    # (×1.25 safety) must lie in [1, 1.5] times the true spectral radius
    g = Grid(Box(dim, 1.0), 40 if dim == 1 else 9)
    conv = FFTConvolution(kernel, g)
    A = np.stack(
        [neg_laplacian(conv(e.reshape(g.shape)), g.h).ravel() for e in np.eye(g.size)], axis=1
    )
    radius = np.abs(np.linalg.eigvals(A)).max()
    assert radius <= conv.stiffness() <= 1.5 * radius
