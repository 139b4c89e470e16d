"""Common checks over every kernel, energy term and PDE scheme (as scikit-learn's test_common).

The classes are discovered, not listed: every public :class:`~meanfield.kernels.PairKernel`
subclass of :mod:`meanfield.kernels`, every public :class:`~meanfield.energy.Term` subclass of
:mod:`meanfield.energy` and every name of :data:`meanfield.pde.flux.SCHEMES`.  A new one without
an example instance below fails :func:`test_every_kernel_has_examples` or
:func:`test_every_energy_term_has_examples`, so nothing joins the package unchecked.

Shared contracts (float64 unless stated; tolerances are round-off bounds):

* kernels: k(z) depends on |z| only; the gradient is the autograd gradient of the value and
  its central finite difference; float32 in gives float32 out; numpy and torch agree; the
  in-place gradient coefficient equals the plain one; a singular kernel has the zero
  subgradient at z = 0; ``describe()`` rebuilds the kernel through ``make_kernel``; a bad
  parameter raises :class:`meanfield.errors.InputError` (or :class:`InputTypeError`);
* energy terms: ``grad`` is the autograd gradient of ``value`` (with and without replica
  axes); the value is finite; H_N is invariant under a permutation of the particles (and the
  gradient permutes with them); a pair term is invariant under a translation and is the pair
  sum of its kernel; the first variation is the derivative of the value on a weighted measure
  along zero-mass perturbations; a float32 energy computes in float32, close to float64;
* schemes: mass conserved, density nonnegative and free energy non-increasing over a few steps
  of a 1D and a 2D grid.
"""

import inspect
import math

import numpy as np
import pytest
import torch

import meanfield.energy as energy_mod
import meanfield.kernels as kernels_mod
from meanfield.domains import Box
from meanfield.energy import (
    CallablePotential,
    CentredAlignment,
    DoubleWellPotential,
    Energy,
    LinearAlignment,
    NormalisedAlignment,
    PairInteraction,
    QuadraticPotential,
    RiskAlignment,
)
from meanfield.errors import InputError, InputTypeError
from meanfield.kernels import (
    CallableKernel,
    Coulomb,
    Gaussian,
    PairKernel,
    Quadratic,
    Riesz,
    make_kernel,
)
from meanfield.pde import Density, FreeEnergyTracker, Grid, MassTracker, McKeanVlasov
from meanfield.pde.flux import SCHEMES


def _public_subclasses(module, base):
    """Public classes defined in ``module`` that subclass ``base`` (``base`` included)."""
    return {
        cls
        for name, cls in inspect.getmembers(module, inspect.isclass)
        if not name.startswith("_") and cls.__module__ == module.__name__ and issubclass(cls, base)
    }


# ------------------------------------------------------------------------------------ kernels
#: Example instances of each kernel class: exact and softened, every sign of the Riesz s.
KERNEL_EXAMPLES = {
    Riesz: [Riesz(0.0), Riesz(0.5), Riesz(1.0), Riesz(-1.0), Riesz(3.0, softening=0.5)],
    Coulomb: [Coulomb(1), Coulomb(2), Coulomb(3, softening=0.2)],
    Quadratic: [Quadratic()],
    Gaussian: [Gaussian(), Gaussian(width=0.4)],
    # κ only (κ' by autograd): smooth; singular (−log|z|); softened; and κ' given
    CallableKernel: [
        CallableKernel(lambda u: 1.0 / (1.0 + u), name="lorentzian"),
        CallableKernel(lambda u: -0.5 * torch.log(u), name="log-callable"),
        CallableKernel(lambda u: u / 2 - torch.sqrt(u), name="quadratic-minus-linear"),
        CallableKernel(lambda u: u**-0.25, name="riesz-half", softening=0.3),
        CallableKernel(torch.exp, dkappa=torch.exp, name="growing"),
    ],
}
#: Bad constructor arguments of each kernel class that takes parameters.
KERNEL_BAD = {
    Riesz: [{"s": float("nan")}, {"s": "one"}, {"s": 1.0, "softening": -0.1}],
    Coulomb: [{"dim": 0}, {"dim": 1.5}, {"dim": 2, "softening": float("inf")}],
    Gaussian: [{"width": 0.0}, {"width": -1.0}, {"width": float("nan")}],
    CallableKernel: [
        {"kappa": "u / 2"},
        {"kappa": torch.exp, "dkappa": 2.0},
        {"kappa": torch.exp, "name": "riesz"},
        {"kappa": torch.exp, "name": ""},
        {"kappa": torch.exp, "softening": -0.1},
    ],
}
#: Kernels whose describe() names a user function, which make_kernel cannot rebuild.
NOT_REBUILT = {CallableKernel}
ABSTRACT_KERNELS = {PairKernel}
KERNELS = [k for ks in KERNEL_EXAMPLES.values() for k in ks]


def test_every_kernel_has_examples():
    found = _public_subclasses(kernels_mod, PairKernel) - ABSTRACT_KERNELS
    assert found == set(KERNEL_EXAMPLES), "add the new kernel to KERNEL_EXAMPLES"
    for cls in found:
        takes_args = len(inspect.signature(cls).parameters) > 0
        assert takes_args == (cls in KERNEL_BAD), f"{cls.__name__}: bad parameters to test"


def _points(p, m=20, seed=0, scale=1.0):
    """m nonzero points in R^p, float64, |z| in about [0.1, 3] * scale."""
    z = torch.randn(m, p, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return scale * z / z.norm(dim=-1, keepdim=True) * torch.linspace(0.1, 3.0, m)[:, None]


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
@pytest.mark.parametrize("p", [1, 3])
def test_kernel_is_radial(kernel, p):
    """k(Rz) = k(z) for an orthogonal R (a sign flip in 1D), and k(z) = radial(|z|)."""
    z = _points(p)
    q, _ = torch.linalg.qr(torch.randn(p, p, generator=torch.Generator().manual_seed(1)).double())
    torch.testing.assert_close(kernel(z @ q.T), kernel(z), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(kernel(-z), kernel(z), rtol=0, atol=0)
    np.testing.assert_allclose(kernel.radial(z.norm(dim=-1).numpy()), kernel(z).numpy(), 1e-12)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
@pytest.mark.parametrize("p", [1, 2])
def test_kernel_gradient_matches_autograd_and_finite_differences(kernel, p):
    """∇k = autograd of k (round-off, 1e-12), and central differences with step 1e-6 (error
    O(h²) ~ 1e-12 times the third derivative, ≤ 1e3 for |z| ≥ 0.1 here, plus round-off
    1e-16 / h: 1e-7 relative allows both)."""
    z = _points(p).requires_grad_(True)
    (auto,) = torch.autograd.grad(kernel(z).sum(), z)
    g = kernel.gradient(z.detach())
    torch.testing.assert_close(g, auto, rtol=1e-12, atol=1e-12)
    h, zn = 1e-6, z.detach().numpy()
    fd = np.stack(
        [
            (
                kernel.value_sq(((zn + h * e) ** 2).sum(-1))
                - kernel.value_sq(((zn - h * e) ** 2).sum(-1))
            )
            / (2 * h)
            for e in np.eye(p)
        ],
        axis=-1,
    )
    np.testing.assert_allclose(kernel.gradient(zn), fd, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_kernel_dtypes_and_libraries(kernel):
    """float32 in -> float32 out (value, gradient, coefficient); numpy gives the same numbers
    as torch; the in-place coefficient (the pair sums' hot loop) equals the plain one."""
    z = _points(2)
    r2 = (z * z).sum(-1)
    for out in (kernel(z.float()), kernel.gradient(z.float()), kernel.grad_coeff_sq(r2.float())):
        assert out.dtype == torch.float32
    torch.testing.assert_close(kernel(z.float()).double(), kernel(z), rtol=1e-5, atol=1e-6)
    assert isinstance(kernel.value_sq(r2.numpy()), np.ndarray)
    np.testing.assert_allclose(kernel.value_sq(r2.numpy()), kernel.value_sq(r2).numpy(), 1e-14)
    np.testing.assert_allclose(kernel.gradient(z.numpy()), kernel.gradient(z).numpy(), 1e-14)
    torch.testing.assert_close(
        kernel.grad_coeff_sq_(r2.clone()), kernel.grad_coeff_sq(r2), rtol=1e-14, atol=0
    )


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_kernel_at_coincident_points(kernel):
    """z = 0: a finite (zero, for a singular kernel) gradient, never NaN."""
    zero = torch.zeros(3, 2, dtype=torch.float64)
    g = kernel.gradient(zero)
    assert torch.isfinite(g).all()
    if kernel.is_singular:
        assert (g == 0).all() and kernel.grad_coeff_sq(np.zeros(2)).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_kernel_describe_rebuilds_it(kernel):
    """describe() is plain data from which make_kernel builds a kernel with the same values."""
    d = kernel.describe()
    params = {k: v for k, v in d.items() if k != "kernel"}
    assert all(isinstance(v, (int, float, str)) for v in d.values())
    if type(kernel) in NOT_REBUILT:  # plain data naming the kernel, refused by make_kernel
        assert d["kernel"] == kernel.name and d["kernel"] not in kernels_mod.KERNEL_NAMES
        return
    twin = make_kernel(d["kernel"], **params)
    z = _points(2)
    torch.testing.assert_close(twin(z), kernel(z), rtol=0, atol=0)


@pytest.mark.parametrize(
    "cls, kwargs", [(cls, kw) for cls, kws in KERNEL_BAD.items() for kw in kws], ids=str
)
def test_kernel_bad_parameters_raise_a_named_error(cls, kwargs):
    with pytest.raises((InputError, InputTypeError)):
        cls(**kwargs)


# ------------------------------------------------------------------------------- energy terms
def _data(d, n=7, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0) if n_classes == 2 else np.arange(n) % 3
    return X, y


def _alignment_examples(cls):
    """One example per feature map (binary and 3-class labels), with its particle dimension."""
    terms = [
        cls(*_data(2), feature="positive"),
        cls(*_data(2), feature="fourier"),
        cls(*_data(2, n_classes=3), feature="softplus"),
    ]
    return [(t, t.feature.particle_dim(t.X_np.shape[1])) for t in terms]


#: Example instances of each term class with the particle dimension p they act on.
TERM_EXAMPLES = {
    QuadraticPotential: [(QuadraticPotential(), 2), (QuadraticPotential(2.0, center=0.5), 3)],
    DoubleWellPotential: [(DoubleWellPotential(1.5), 2)],
    CallablePotential: [(CallablePotential(lambda w: torch.cos(w).sum(-1) + (w**2).sum(-1)), 2)],
    LinearAlignment: [
        *_alignment_examples(LinearAlignment),
        (LinearAlignment(*_data(1), feature="softplus"), 1),
    ],
    RiskAlignment: [*_alignment_examples(RiskAlignment), (RiskAlignment(*_data(2), alpha=3.0), 2)],
    NormalisedAlignment: _alignment_examples(NormalisedAlignment),
    CentredAlignment: _alignment_examples(CentredAlignment),
    # every example kernel that is integrable in R^2 (the unsoftened Riesz s < 2)
    PairInteraction: [
        (PairInteraction(k, lam=0.7), 2)
        for k in KERNELS
        if not (isinstance(k, Riesz) and k.softening == 0 and k.s >= 2)
    ]
    # and in 1D (differences formed directly): the integrable unsoftened kernels, s < 1
    + [(PairInteraction(k, lam=0.7), 1) for k in (Riesz(0.0), Riesz(0.5), Coulomb(1))],
}
ABSTRACT_TERMS = {energy_mod.Term, energy_mod.Potential, energy_mod.AlignmentTerm}
TERMS = [ex for exs in TERM_EXAMPLES.values() for ex in exs]


def _term_params(keep=lambda term: True):
    """pytest params (term, p) named by class, feature or kernel, and p."""

    def name(t, p):
        if hasattr(t, "kernel"):
            extra = repr(t.kernel)
        else:
            extra = getattr(getattr(t, "feature", None), "name", "")
        return f"{type(t).__name__}-{extra}-p{p}" if extra else f"{type(t).__name__}-p{p}"

    return [pytest.param(t, p, id=name(t, p)) for t, p in TERMS if keep(t)]


def test_every_energy_term_has_examples():
    found = _public_subclasses(energy_mod, energy_mod.Term) - ABSTRACT_TERMS
    assert found == set(TERM_EXAMPLES), "add the new term to TERM_EXAMPLES"
    assert {t.kind for t, _ in TERMS} == set(energy_mod.TERM_KINDS)


def _energy(term, p, dtype=torch.float64):
    return Energy([term], Box(p, 3.0), dtype=dtype)


def _particles(p, shape=(), N=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 0.8 * torch.randn(*shape, N, p, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("term, p", _term_params())
@pytest.mark.parametrize("shape", [(), (3,)], ids=["single", "replicas"])
def test_term_grad_is_the_autograd_gradient_of_its_value(term, p, shape):
    """Energy.grad = ∇ Energy.value by autograd, to round-off (1e-10 relative to the largest
    component); the value is finite with one entry per replica."""
    E = _energy(term, p)
    omega = _particles(p, shape)
    value = E.value(omega)
    assert value.shape == shape and torch.isfinite(value).all()
    w = omega.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(E.value(w).sum(), w)
    grad = E.grad(omega)
    scale = float(auto.abs().max())
    torch.testing.assert_close(grad, auto, rtol=1e-10, atol=1e-10 * scale)
    v2, g2 = E.value_and_grad(omega)
    torch.testing.assert_close(v2, value, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(g2, grad, rtol=1e-10, atol=1e-12 * scale)


@pytest.mark.parametrize("term, p", _term_params())
def test_term_is_symmetric_in_the_particles(term, p):
    """H_N is a function of the empirical measure: permuting the particles leaves the value
    and permutes the gradient (round-off of a reordered sum)."""
    E = _energy(term, p)
    omega = _particles(p, (2,))
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    torch.testing.assert_close(E.value(omega[:, perm]), E.value(omega), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(
        E.grad(omega[:, perm]), E.grad(omega)[:, perm], rtol=1e-10, atol=1e-13
    )


@pytest.mark.parametrize("term, p", _term_params(lambda t: t.kind == "pair"))
def test_pair_term_is_translation_invariant_and_the_pair_sum_of_its_kernel(term, p):
    """A pair term sees differences only: H_N(Ω + c) = H_N(Ω) and
    H_N = (λ/N²) Σ_{i≠j} k(ω_i − ω_j); δE/δμ(x) = 2λ Σ_k w_k k(x − p_k)."""
    E = _energy(term, p)
    omega = _particles(p)
    shift = torch.tensor([0.3, -0.2], dtype=torch.float64)[:p]
    torch.testing.assert_close(E.value(omega + shift), E.value(omega), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(E.grad(omega + shift), E.grad(omega), rtol=1e-9, atol=1e-11)
    kernel, lam = term.pair_kernel()
    N = omega.shape[0]
    off = ~torch.eye(N, dtype=torch.bool)
    direct = lam / N**2 * kernel(omega[:, None] - omega[None])[off].sum()
    torch.testing.assert_close(E.value(omega), direct, rtol=1e-12, atol=1e-14)
    at, w = _particles(p, N=4, seed=3) + 0.05, torch.full((N,), 1.0 / N, dtype=torch.float64)
    fv = E.first_variation(at, omega, w)
    ref = 2 * lam * (w * kernel(at[:, None] - omega[None])).sum(-1)
    torch.testing.assert_close(fv, ref, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("term, p", _term_params(lambda t: t.kind != "pair"))
def test_first_variation_is_the_derivative_on_measures(term, p):
    """d/dε E(μ + εν) = ∫ δE/δμ dν for every ν of zero mass: the gradient of the value of a
    weighted measure with respect to its weights equals the first variation at its atoms, up
    to a constant (removed by centring; autograd, round-off 1e-10); a one-body term's H_N is
    the mean of its first variation over the particles."""
    E = _energy(term, p)
    t = E.terms[0]  # the bound copy
    points = _particles(p, N=9, seed=5)
    w = torch.rand(9, generator=torch.Generator().manual_seed(6), dtype=torch.float64) + 0.5
    w = (w / w.sum()).requires_grad_(True)
    (dw,) = torch.autograd.grad(t.measure_value(points, w), w)
    fv = E.first_variation(points, points, w.detach())
    assert fv.shape == (9,) and torch.isfinite(fv).all()
    scale = float(dw.abs().max()) + 1e-300
    torch.testing.assert_close(fv - fv.mean(), dw - dw.mean(), rtol=1e-10, atol=1e-10 * scale)
    if t.kind == "one-body":
        # measure_value is built from the first variation here, so tie both to H_N too: a
        # one-body H_N is exactly E(μ_N) = mean_i δE/δμ(ω_i) (no diagonal to leave out)
        fv_at = E.first_variation(points, points, w.detach())
        torch.testing.assert_close(E.value(points), fv_at.mean(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("term, p", _term_params())
def test_float32_energy_computes_in_float32(term, p):
    """dtype=float32: value and gradient in float32, within float32 round-off of float64
    (1e-4 relative to the largest entry: sums of a few hundred terms of ε = 1.2e-7)."""
    omega = _particles(p, (2,))
    E64, E32 = _energy(term, p), _energy(term, p, torch.float32)
    v32, g32 = E32.value(omega.float()), E32.grad(omega.float())
    assert v32.dtype == g32.dtype == torch.float32
    v64, g64 = E64.value(omega), E64.grad(omega)
    vs, gs = float(v64.abs().max()) + 1e-12, float(g64.abs().max()) + 1e-12
    torch.testing.assert_close(v32.double(), v64, rtol=1e-4, atol=1e-4 * vs)
    torch.testing.assert_close(g32.double(), g64, rtol=1e-4, atol=1e-4 * gs)


# ------------------------------------------------------------------------------------ schemes
@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("dim, cells", [(1, 32), (2, 10)])
def test_scheme_conserves_mass_keeps_positivity_and_dissipates(name, dim, cells):
    """Every scheme of the registry, at least 5 steps with a confinement and a smooth pair
    term: mass to round-off (1e-12: every face flux added and removed once), ρ ≥ 0 at every
    step, and the free energy non-increasing up to its round-off (1e-13)."""
    dom = Box(dim, 2.0)
    E = Energy([QuadraticPotential(), PairInteraction(Gaussian(0.5), 0.5)], dom)
    grid = Grid(dom, cells)
    eq = McKeanVlasov(E, grid, beta=2.0, scheme=name)
    rho0 = Density.gaussian(grid, 0.5, 0.4)
    mass, fe = MassTracker(0), FreeEnergyTracker(0)
    res = eq.solve(rho0, 0.05, trackers=[mass, fe], dt_max=0.01)
    assert res.n_steps >= 5 and res.t == pytest.approx(0.05)
    assert np.max(np.abs(np.asarray(mass.mass) - rho0.mass)) <= 1e-12
    assert min(mass.min_density) >= 0.0
    F = np.asarray(fe.records["free_energy"])
    assert np.all(np.diff(F) <= 1e-13) and F[-1] < F[0]
    assert math.isfinite(F[-1])
