"""The public contract checks of :mod:`meanfield.testing` on user-defined objects.

A user's kernel given by κ alone passes :func:`~meanfield.testing.check_kernel` and runs in
the particle dynamics and the grid solver like the built-ins with the same κ; each check can
fail: a broken kernel, term or scheme of this module (one defect each, a factor 2 or a leak)
fails the check that names the defect, with the input and the observed and expected numbers
in the message; bad arguments to the checks are refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import meanfield as mf
from meanfield.domains import Box
from meanfield.energy import Energy, PairInteraction, Potential, QuadraticPotential
from meanfield.errors import InputError, InputTypeError
from meanfield.kernels import PairKernel, Quadratic, Riesz
from meanfield.pde import Grid
from meanfield.pde.schemes import UpwindScheme
from meanfield.testing import check_kernel, check_scheme, check_term


# --------------------------------------------------------------------- user objects
class Kink(PairKernel):
    """k(z) = |z|²/2 − |z|: κ(u) = u/2 − √u only (κ' by autograd, is_singular derived)."""

    name = "kink"

    def kappa(self, u):
        return u / 2 - u**0.5  # valid for torch and numpy: the grid solver passes numpy


class TorchOnlyKink(PairKernel):
    """The same κ written with torch.sqrt, which numpy input (the grid solver's) breaks."""

    name = "kink-torch"

    def kappa(self, u):
        return u / 2 - torch.sqrt(u)


class KinkWithWrongDerivative(Kink):
    """κ' given by hand at twice the truth 1/2 − 1/(2√u)."""

    def dkappa(self, u):
        return 2 * (0.5 - 0.5 * u**-0.5)


class LogDeclaredSmooth(PairKernel):
    """−log|z| declared not singular: its gradient at coincident points is NaN."""

    is_singular = False

    def kappa(self, u):
        return -0.5 * (u.log() if isinstance(u, torch.Tensor) else np.log(u))


class Float64Only(Kink):
    """κ computed in float64 whatever the input: float32 in, float64 out."""

    def kappa(self, u):
        return super().kappa(u.double() if isinstance(u, torch.Tensor) else u)


class NaNBeyondTwo(PairKernel):
    """κ(u) = √(4 − u): NaN beyond |z| = 2, never silently compared equal."""

    def kappa(self, u):
        if isinstance(u, torch.Tensor):
            return (4 - u) ** 0.5
        with np.errstate(invalid="ignore"):  # the NaN is the defect under test
            return np.sqrt(4 - u)


class Width(PairKernel):
    """A Gaussian of width w that takes any width, negative and NaN included."""

    def __init__(self, width=1.0):
        self.width = width

    def kappa(self, u):
        return (-u / (2 * self.width**2)).exp() if isinstance(u, torch.Tensor) else np.exp(-u / 2)


class Quartic(Potential):
    """V(ω) = |ω|⁴/4, ∇V = |ω|² ω."""

    def V(self, omega):
        return (omega**2).sum(-1) ** 2 / 4

    def gradV(self, omega):
        return (omega**2).sum(-1, keepdim=True) * omega


class QuarticWrongGradient(Quartic):
    """∇V at twice the truth."""

    def gradV(self, omega):
        return 2 * super().gradV(omega)


class QuarticWrongFirstVariation(Quartic):
    """value and grad right, δE/δμ = 2V: the grid would see another energy."""

    def first_variation(self, at, points=None, weights=None):
        return 2 * self.V(at)


class LeakyUpwind(UpwindScheme):
    """The upwind scheme losing a fraction ``leak`` of the mass at every step."""

    def __init__(self, leak):
        super().__init__(order=1)
        self.leak = leak

    def advance(self, rho, U, dt, out=None, inn=None):
        return (1.0 - self.leak) * super().advance(rho, U, dt, out, inn)


# --------------------------------------------------------------------- a user's kernel
def test_a_kernel_given_by_kappa_alone_passes_check_kernel():
    check_kernel(Kink())
    assert Kink().is_singular  # derived: κ'(u) = 1/2 − 1/(2√u) blows up at u = 0


def _kink_energy(kernel_terms, dim=1):
    return Energy([QuadraticPotential(), *kernel_terms], Box(dim, 3.0))


def test_a_user_kernel_runs_in_simulate_as_the_built_ins_with_its_kappa():
    """|z|²/2 − |z| is Quadratic + Riesz(−1) (k = −|z|): the same Langevin run, step for step
    and seed for seed (round-off 1e-12: the same forces summed in another order)."""
    omega0 = np.random.default_rng(0).normal(size=(8, 2))
    runs = [
        mf.simulate(_kink_energy(terms, 2), omega0, eta=0.01, beta=2.0, n_steps=5, seed=3)
        for terms in (
            [PairInteraction(Kink(), 0.5)],
            [PairInteraction(Quadratic(), 0.5), PairInteraction(Riesz(-1.0), 0.5)],
        )
    ]
    user, builtin = (r["omega"].values for r in runs)
    assert user.shape == (6, 8, 2) and np.isfinite(user).all()
    np.testing.assert_allclose(user, builtin, rtol=1e-12, atol=1e-12)
    assert not np.allclose(user[-1], user[0])  # the particles moved


def test_a_user_kernel_runs_in_gibbs_state_as_the_built_ins_with_its_kappa():
    """The self-consistent Gibbs state of V + |z|²/2 − |z| on a 1D grid of 32 cells: the user
    kernel's and the built-ins' (Quadratic + Riesz(−1)) agree to the solver's tolerance
    (tol 1e-10 on the relative fixed-point residual; the potentials agree to round-off, so
    the iterates do too: observed 5e-15 relative)."""
    grid = Grid(Box(1, 3.0), 32)
    states = [
        mf.gibbs_state(_kink_energy(terms), grid, 2.0, tol=1e-10, search="single")
        for terms in (
            [PairInteraction(Kink(), 0.5)],
            [PairInteraction(Quadratic(), 0.5), PairInteraction(Riesz(-1.0), 0.5)],
        )
    ]
    (user, _), (builtin, _) = states
    assert abs(user.mass - 1.0) < 1e-12
    np.testing.assert_allclose(user.data, builtin.data, rtol=1e-10, atol=0)


def test_check_kernel_refuses_a_kernel_exactly_when_the_grid_solver_cannot_run_it():
    """κ written with torch.sqrt runs in the particle code but gets numpy from the grid
    solver: check_kernel's 'numpy' check says so, and gibbs_state fails the same way (if
    numpy input is ever converted for every kernel, both pass together)."""
    kernel = TorchOnlyKink()
    try:
        mf.gibbs_state(_kink_energy([PairInteraction(kernel, 0.5)]), Grid(Box(1, 3.0), 16), 2.0)
        runs_on_the_grid = True
    except TypeError:
        runs_on_the_grid = False
    if runs_on_the_grid:
        check_kernel(kernel)
    else:
        with pytest.raises(AssertionError, match=r"failed the 'numpy' check: .*TypeError"):
            check_kernel(kernel)


# --------------------------------------------------------------------- each check can fail
def test_a_wrong_kappa_prime_fails_the_derivative_check_with_the_numbers():
    """κ' = 2 × (1/2 − 1/(2√u)): the message names the check, the u and both numbers."""
    with pytest.raises(AssertionError) as info:
        check_kernel(KinkWithWrongDerivative())
    msg = str(info.value)
    assert "failed the 'dkappa' check" in msg and "κ'(u) vs dκ/du by autograd" in msg
    # the worst entry: observed 2 κ'(u), expected κ'(u), at the u named
    u = float(msg.split("at u = ")[1].split(":")[0])
    observed = float(msg.split("observed ")[1].split(",")[0])
    expected = float(msg.split("expected ")[1].split(" ")[0])
    exact = 0.5 - 0.5 / np.sqrt(u)
    assert observed == pytest.approx(2 * exact, rel=1e-5)  # u printed to 6 digits
    assert expected == pytest.approx(exact, rel=1e-5)


@pytest.mark.parametrize(
    "kernel, check",
    [
        (LogDeclaredSmooth(), "coincident points"),  # NaN gradient at z = 0
        (Float64Only(), "float32"),  # float32 in, float64 out
        (NaNBeyondTwo(), "radial"),  # NaN = NaN is no agreement
    ],
    ids=["declared-smooth-log", "float64-only", "nan-beyond-two"],
)
def test_a_broken_kernel_fails_the_check_that_names_its_defect(kernel, check):
    with pytest.raises(AssertionError, match=f"failed the '{check}' check"):
        check_kernel(kernel)


def test_a_kernel_that_accepts_bad_parameters_fails_the_bad_parameters_check():
    check_kernel(Width(1.0), dims=[2])  # the values are right
    with pytest.raises(AssertionError, match=r"'bad parameters' check: Width\(\*\*\{'width'"):
        check_kernel(Width(1.0), dims=[2], bad_parameters=[{"width": -1.0}])


def test_a_term_with_a_wrong_gradient_fails_the_gradient_check():
    check_term(Quartic(), 2)
    with pytest.raises(AssertionError) as info:
        check_term(QuarticWrongGradient(), 2)
    msg = str(info.value)
    assert "failed the 'gradient' check: grad(Ω) vs ∇H_N by autograd" in msg
    observed = float(msg.split("observed ")[1].split(",")[0])
    expected = float(msg.split("expected ")[1].split(" ")[0])
    assert observed == pytest.approx(2 * expected, rel=1e-12)


def test_a_term_whose_first_variation_is_not_its_force_fails_the_force_check():
    """value and grad agree (the gradient check passes); δE/δμ = 2V gives twice the force."""
    with pytest.raises(AssertionError, match=r"failed the 'force' check: N ∇_\{ω_i\} H_N"):
        check_term(QuarticWrongFirstVariation(), 2)


def test_a_leaky_scheme_fails_the_mass_check():
    """A leak of 1e-11 per step passes the solver's own guard (relative drift 1e-9) and fails
    the check (1e-12: round-off of the face fluxes); a leak of 1e-3 the solver itself refuses,
    and the check names the solve."""
    check_scheme(UpwindScheme(order=1), problems=[(1, 16)])
    with pytest.raises(AssertionError, match=r"failed the 'mass' check: .*p = 1, 16 cells"):
        check_scheme(LeakyUpwind(1e-11), problems=[(1, 16)])
    with pytest.raises(AssertionError, match=r"failed the 'solve' check: .*mass drifted"):
        check_scheme(LeakyUpwind(1e-3), problems=[(1, 16)])


# --------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: check_kernel(Riesz), InputTypeError),  # the class, not an instance
        (lambda: check_kernel(Kink(), dims=[0]), InputError),
        (lambda: check_kernel(Kink(), dims=[]), InputError),
        (lambda: check_kernel(Kink(), bad_parameters=["width"]), InputTypeError),
        (lambda: check_term(Kink(), 2), InputTypeError),
        (lambda: check_term(Quartic(), 0), InputError),
        (lambda: check_scheme("euler"), InputError),
        (lambda: check_scheme(3), InputTypeError),
        (lambda: check_scheme("sg", problems=[(1, 2)]), InputError),
        (lambda: check_scheme("sg", t_end=-1.0), InputError),
        (lambda: check_scheme("sg", t_end=0.05, dt_max=0.02), InputError),
    ],
)
def test_bad_arguments_to_the_checks_raise_a_named_error(call, error):
    with pytest.raises(error):
        call()
