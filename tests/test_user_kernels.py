"""User kernels: a PairKernel subclass or a CallableKernel that gives κ only.

κ' comes from autograd and is checked against its closed form; whether the kernel is singular
at coincident points is derived from κ' (checked against the known answer of each kernel);
forces and a short Langevin run are checked against the built-in kernels with the same κ
(Riesz(0) is −½ log u; Quadratic + Riesz(−1) is u/2 − √u), coincident particles included.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import meanfield as mf
from meanfield.domains import Box
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.errors import InputError, InputTypeError
from meanfield.kernels import CallableKernel, PairKernel, Quadratic, Riesz


class _Named(PairKernel):
    """Test kernels named by their class in test ids."""

    def __repr__(self):
        return f"{type(self).__name__}(softening={self.softening})"


class QuadraticMinusLinear(_Named):
    """k(z) = |z|²/2 − |z|: κ(u) = u/2 − √u, κ'(u) = 1/2 − 1/(2√u) (blows up at u = 0)."""

    name = "quadratic-minus-linear"

    def kappa(self, u):
        return u / 2 - u**0.5


class Log(_Named):
    """k(z) = −log|z| (softened): κ(u) = −½ log u, κ'(u) = −1/(2u)."""

    name = "log-user"

    def __init__(self, softening=0.0):
        self.softening = softening

    def kappa(self, u):
        return -0.5 * (u.log() if isinstance(u, torch.Tensor) else np.log(u))


class Cubic(_Named):
    """k(z) = |z|³: κ(u) = u^(3/2), κ'(u) = (3/2) √u → 0 at u = 0 (smooth enough: finite)."""

    def kappa(self, u):
        return u**1.5


class GuardedLog(Log):
    """κ' given, set to 0 at exactly u = 0 but −1/(2u) next to it: singular all the same."""

    def dkappa(self, u):
        lib = torch if isinstance(u, torch.Tensor) else np
        return lib.where(u > 0, -0.5 / lib.where(u > 0, u, 1.0), 0.0)


class DeclaredSingular(Cubic):
    """A declared value overrides the derived one."""

    is_singular = True


def _u(dtype=torch.float64, shape=(3, 7)):
    """Positive squared distances of shape (..., N) in [0.01, 9]."""
    g = torch.Generator().manual_seed(0)
    return (0.1 + 2.9 * torch.rand(shape, generator=g, dtype=torch.float64)).square().to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_autograd_kappa_prime_is_the_closed_form_with_shapes_and_dtypes(dtype):
    """κ' by autograd against 1/2 − 1/(2√u) and −1/(2u): round-off only (rtol 1e-12 in
    float64, 1e-5 in float32), the (..., N) shape and the dtype kept; numpy in, numpy out."""
    u = _u(dtype)
    rtol = 1e-12 if dtype == torch.float64 else 1e-5
    cases = [
        (QuadraticMinusLinear(), 0.5 - 0.5 / u.sqrt()),
        (Log(), -0.5 / u),
        (Cubic(), 1.5 * u.sqrt()),
        (CallableKernel(lambda v: v / 2 - torch.sqrt(v), name="qml"), 0.5 - 0.5 / u.sqrt()),
    ]
    for kernel, exact in cases:
        d = kernel.dkappa(u)
        assert d.shape == u.shape and d.dtype == dtype, kernel
        torch.testing.assert_close(d, exact, rtol=rtol, atol=0)
        d_np = kernel.dkappa(u.double().numpy())
        assert isinstance(d_np, np.ndarray) and d_np.shape == tuple(u.shape)
        np.testing.assert_allclose(d_np, exact.double().numpy(), rtol=rtol)
    # a batch axis in front, and the gradient in z = 2κ'(|z|²) z against autograd of k
    z = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    z.requires_grad_(True)
    (auto,) = torch.autograd.grad(QuadraticMinusLinear()(z).sum(), z)
    torch.testing.assert_close(
        QuadraticMinusLinear().gradient(z.detach()), auto, rtol=1e-12, atol=0
    )


def test_autograd_kappa_prime_is_differentiable_again():
    """κ'' through the autograd κ' (an outer graph is kept): for −½ log u, κ'' = 1/(2u²)."""
    u = _u(shape=(6,)).requires_grad_(True)
    (second,) = torch.autograd.grad(Log().dkappa(u).sum(), u)
    torch.testing.assert_close(second, 0.5 / u.detach() ** 2, rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    "kernel, singular",
    [
        (QuadraticMinusLinear(), True),  # κ'(0) = −inf: the kink of −|z|
        (Log(), True),  # κ'(0) = −inf
        (Log(softening=0.1), False),  # κ'(ε²) = −50: finite
        (GuardedLog(), True),  # finite at exactly 0, −1/(2u) growing by 1e100 next to it
        (Cubic(), False),  # κ'(0) = 0
        (DeclaredSingular(), True),  # declared
        (CallableKernel(lambda u: 1 / (1 + u), name="lorentzian"), False),
        (CallableKernel(lambda u: torch.exp(-u), name="gauss"), False),
        (CallableKernel(lambda u: u**-0.25, name="riesz-half"), True),  # Riesz s = 1/2
        (CallableKernel(lambda u: u**-0.25, name="riesz-half", softening=0.2), False),
        # sin(r)/r: smooth, but 0/0 = NaN at u = 0, so it takes the zero subgradient too
        (CallableKernel(lambda u: torch.sin(u.sqrt()) / u.sqrt(), name="sinc"), True),
    ],
    ids=repr,
)
def test_is_singular_is_derived_from_kappa_prime(kernel, singular):
    """The derived flag against the known behaviour of κ' at u = ε²; whatever the flag, the
    gradient at coincident points is finite (0: ∇k(0) = 2κ'(ε²)·0 for a finite κ')."""
    assert kernel.is_singular is singular
    g = kernel.gradient(torch.zeros(4, 2, dtype=torch.float64))
    assert torch.equal(g, torch.zeros_like(g))
    assert (kernel.grad_coeff_sq(np.zeros(3)) == 0).all() or not singular


def test_is_singular_follows_the_softening():
    """Derived once per softening: a kernel softened after construction is re-derived."""
    k = Log()
    assert k.is_singular
    k.softening = 0.5
    assert not k.is_singular
    torch.testing.assert_close(
        k.gradient(torch.tensor([[0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)),
        Riesz(0.0, softening=0.5).gradient(torch.tensor([[0.0, 0.0], [1.0, 0.0]]).double()),
        rtol=1e-14,
        atol=0,
    )


def _coincident_start(p=2):
    """Eight particles in R^p, the first two on top of each other (an exact coincidence)."""
    om = torch.randn(8, p, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    om[1] = om[0]
    return om


@pytest.mark.parametrize("p", [1, 2])
def test_forces_at_coincident_points_are_those_of_the_built_in_kernels(p):
    """The pair-term gradient of the user kernels at a configuration with a coincident pair:
    finite, and equal (1e-12 relative: round-off of a different evaluation order) to the
    built-in kernels with the same κ, which give coincident pairs the zero subgradient."""
    om = _coincident_start(p)
    user = PairInteraction(QuadraticMinusLinear(), 0.7).grad(om)
    built = PairInteraction(Quadratic(), 0.7).grad(om) + PairInteraction(Riesz(-1.0), 0.7).grad(om)
    assert torch.isfinite(user).all()
    torch.testing.assert_close(user, built, rtol=1e-12, atol=1e-12)
    user = PairInteraction(Log(), 0.7).grad(om)
    assert torch.isfinite(user).all()
    torch.testing.assert_close(user, PairInteraction(Riesz(0.0), 0.7).grad(om), rtol=1e-12, atol=0)


def test_a_user_kernel_runs_in_simulate_as_the_built_in_one():
    """mf.simulate, 20 projected Langevin steps from a start with a coincident pair: the user
    kernel κ = u/2 − √u gives a finite trajectory, the one of Quadratic + Riesz(−1) with the
    same seed (the same noise; forces equal to round-off, 1e-10 over 20 steps)."""
    om = _coincident_start(2)
    box = Box(2, 3.0)
    user = Energy([QuadraticPotential(), PairInteraction(QuadraticMinusLinear(), 0.5)], box)
    pair = [PairInteraction(Quadratic(), 0.5), PairInteraction(Riesz(-1.0), 0.5)]
    built = Energy([QuadraticPotential(), *pair], box)
    kw = dict(eta=0.01, beta=4.0, n_steps=20, seed=7, record_every=1)
    a = mf.simulate(user, om, **kw)
    b = mf.simulate(built, om, **kw)
    assert np.isfinite(a["omega"].values).all() and np.isfinite(a["energy"].values).all()
    np.testing.assert_allclose(a["omega"].values, b["omega"].values, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a["energy"].values, b["energy"].values, rtol=1e-10, atol=1e-10)
    assert float(np.abs(a["omega"].values[-1] - a["omega"].values[0]).max()) > 0.05  # it moved


def test_a_subclass_without_kappa_fails_at_instantiation():
    """abc: the class is abstract until it defines κ, and instantiating it says so."""

    class NoKappa(PairKernel):
        def dkappa(self, u):
            return 0.0 * u

    with pytest.raises(TypeError, match="abstract.*kappa"):
        NoKappa()
    with pytest.raises(TypeError, match="abstract.*kappa"):
        PairKernel()


def test_a_wrapper_on_r_squared_needs_no_kappa():
    """A kernel that overrides value_sq (the value on r²) gets κ(u) = value_sq(u − ε²)."""

    class Shifted(PairKernel):
        softening = 0.5

        def value_sq(self, r2):
            return Riesz(0.0, softening=0.5).value_sq(r2)

    u = _u()
    torch.testing.assert_close(Shifted().kappa(u), Riesz(0.0).kappa(u), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(Shifted().dkappa(u), -0.5 / u, rtol=1e-12, atol=0)
    assert not Shifted().is_singular  # softened


def test_callable_kernel_uses_the_given_derivative_and_converts_numpy():
    """A given κ' is the one used (here deliberately twice the truth, to see it); numpy input
    goes through torch float64 and comes back as numpy; a constant κ' is broadcast."""
    k = CallableKernel(lambda u: u / 2, dkappa=lambda u: torch.ones_like(u), name="twice")
    assert torch.equal(k.dkappa(_u()), torch.ones(3, 7, dtype=torch.float64))
    const = CallableKernel(lambda u: u / 2, dkappa=lambda u: 0.5, name="half")
    assert const.dkappa(_u()).shape == (3, 7)
    np.testing.assert_array_equal(const.radial(np.array([0.0, 2.0])), [0.0, 2.0])
    assert k.describe() == {"kernel": "twice", "softening": 0.0}
    assert repr(k) == "CallableKernel(name='twice', softening=0.0)"


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"kappa": 1.0}, InputTypeError, "kappa must be a callable"),
        ({"kappa": torch.exp, "dkappa": "exp"}, InputTypeError, "dkappa must be None"),
        ({"kappa": torch.exp, "name": 3}, InputTypeError, "name must be a string"),
        ({"kappa": torch.exp, "name": "coulomb"}, InputError, "built-in kernel names"),
        ({"kappa": torch.exp, "softening": -1.0}, InputError, "softening"),
    ],
)
def test_callable_kernel_refuses_bad_arguments_naming_them(kwargs, error, match):
    with pytest.raises(error, match=match):
        CallableKernel(**kwargs)


def test_a_kappa_written_in_torch_serves_the_grid_and_the_plots():
    """κ written with torch functions (torch.sqrt refuses numpy arrays): radial, value_sq
    and the grid's Gibbs state take numpy through float64 torch, and agree with the same
    kernel written in numpy-compatible operations."""
    import numpy as np
    import torch

    import meanfield as mf
    from meanfield.kernels import PairKernel

    class TorchKink(PairKernel):
        name = "torch-kink"

        def kappa(self, u):
            return u / 2 - torch.sqrt(u)

    class PowerKink(PairKernel):
        name = "power-kink"

        def kappa(self, u):
            return u / 2 - u**0.5

    r = np.array([0.0, 0.5, 1.0, 2.0])
    np.testing.assert_allclose(TorchKink().radial(r), r**2 / 2 - r, rtol=1e-15)
    box = mf.Box(1, 3.0)
    states = [
        mf.gibbs_state(
            mf.Energy([mf.QuadraticPotential(), mf.PairInteraction(k, lam=0.5)], box),
            mf.Grid(box, 64),
            2.0,
        )[0].data
        for k in (TorchKink(), PowerKink())
    ]
    np.testing.assert_allclose(states[0], states[1], rtol=1e-12, atol=1e-15)
