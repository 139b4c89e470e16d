import numpy as np
import pytest
import torch

from meanfield.kernels import Coulomb, Gaussian, Quadratic, Riesz, make_kernel


def test_riesz_sign_convention():
    z = torch.tensor([[2.0]], dtype=torch.float64)
    assert Riesz(1.0)(z).item() == pytest.approx(0.5)  # |z|^-s
    assert Riesz(0.0)(z).item() == pytest.approx(-np.log(2.0))  # −log|z|
    assert Riesz(-1.0)(z).item() == pytest.approx(-2.0)  # −|z|^-s
    assert Riesz(0.5, softening=1.0)(z).item() == pytest.approx(5**-0.25)


def test_coulomb_is_riesz_p_minus_2():
    assert Coulomb(1).s == -1 and Coulomb(2).s == 0 and Coulomb(3).s == 1


@pytest.mark.parametrize(
    "kernel",
    [
        Riesz(1.3),
        Riesz(0.0),
        Riesz(-1.0),
        Riesz(-0.5, 0.2),
        Riesz(2.5, 0.3),
        Quadratic(),
        Gaussian(0.7),
    ],
)
def test_gradient_matches_autograd(kernel):
    z = torch.randn(40, 3, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(kernel(z).sum(), z)
    assert torch.allclose(g, kernel.gradient(z.detach()), atol=1e-10, rtol=1e-10)


def test_coincident_points_give_zero_gradient_not_nan():
    z = torch.zeros(2, 1, dtype=torch.float64)
    for k in (Riesz(1.0), Riesz(0.0), Riesz(-1.0)):
        g = k.gradient(z)
        assert torch.equal(g, torch.zeros_like(g))
    assert torch.isinf(Riesz(1.0)(z)).all()


def test_integrability_check():
    Riesz(0.9).check_dimension(1)
    with pytest.raises(ValueError, match="s < p"):
        Riesz(1.0).check_dimension(1)
    Riesz(3.0, softening=0.1).check_dimension(2)  # softened: fine


def test_make_kernel_errors():
    with pytest.raises(ValueError, match="kernel"):
        make_kernel("yukawa")
    with pytest.raises(ValueError, match="exponent s"):
        make_kernel("riesz")
    with pytest.raises(ValueError, match="softening"):
        Riesz(1.0, softening=-1.0)
    assert make_kernel("coulomb", dim=2).s == 0.0


@pytest.mark.parametrize("e", [-8, -7.5, -3, -1.5, -1, -0.5, 0, 0.5, 1, 2.5, -0.25, 3.3])
def test_inplace_power_matches_pow(e):
    from meanfield.kernels import _pow_

    u = torch.rand(500, dtype=torch.float64) + 0.1
    assert torch.allclose(_pow_(u.clone(), e), u**e, rtol=1e-12)


@pytest.mark.parametrize("kernel", [Riesz(14.0, 0.1), Riesz(0.0, 0.1), Riesz(-1.0), Riesz(1.3)])
def test_inplace_grad_coefficients_match(kernel):
    r2 = torch.rand(300, dtype=torch.float64) + 0.01
    assert torch.allclose(kernel.grad_coeff_sq_(r2.clone()), kernel.grad_coeff_sq(r2), rtol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 13, 64])
def test_pairsum_repeated_squaring_matches_pow(k):
    from meanfield.pairsum import _power_

    w = torch.rand(300, dtype=torch.float64) + 0.5
    assert torch.allclose(_power_(w.clone(), k), w**k, rtol=1e-13)


@pytest.mark.parametrize("dim", [0, -1, 2.5, "3"])
def test_coulomb_refuses_a_bad_dimension_naming_it(dim):
    from meanfield.errors import InputError

    with pytest.raises((InputError, TypeError), match="dim must be an integer >= 1"):
        Coulomb(dim)


def test_coulomb_is_the_riesz_kernel_of_its_dimension():
    for p in (1, 2, 3, 5):
        k = Coulomb(p, softening=0.1)
        assert isinstance(k, Riesz) and k.s == p - 2 and k.dim == p
        assert k.describe() == Riesz(p - 2.0, softening=0.1).describe()


def test_riesz_radial_holds_at_every_finite_distance():
    # κ(r²) overflowed beyond r ≈ 1e154 (−log 1e200 was −inf, 1/r^1.5 at 1e-200 was inf) and
    # underflowed below 1e-154; the distance itself, d = hypot(r, ε), does neither
    r = np.array([1e-200, 0.3, 1e200])
    np.testing.assert_allclose(Riesz(0.0).radial(r), -np.log(r), rtol=1e-15)
    np.testing.assert_allclose(Riesz(1.5).radial(r), r**-1.5, rtol=1e-15)
    np.testing.assert_allclose(Riesz(-1.0).radial(r), -r, rtol=1e-15)
    soft = Riesz(0.5, softening=0.1)
    np.testing.assert_allclose(soft.radial(r), np.hypot(r, 0.1) ** -0.5, rtol=1e-15)
    assert Riesz(2.0).radial([0.0])[0] == np.inf and Riesz(-1.0).radial([0.0])[0] == 0.0
