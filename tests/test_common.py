"""Common checks over every kernel, energy term and PDE scheme (as scikit-learn's test_common).

The classes are discovered, not listed: every public :class:`~meanfield.kernels.PairKernel`
subclass of :mod:`meanfield.kernels`, every public :class:`~meanfield.energy.Term` subclass of
:mod:`meanfield.energy` and every name of :data:`meanfield.pde.schemes.SCHEMES`.  A new one without
an example instance below fails :func:`test_every_kernel_has_examples` or
:func:`test_every_energy_term_has_examples`, so nothing joins the package unchecked.

The shared contracts are the public checks of :mod:`meanfield.testing`, the very functions a
user runs on their own kernel, term or scheme (one implementation serves both):

* :func:`~meanfield.testing.check_kernel`: radial; κ' is the derivative of κ; the gradient is
  the autograd gradient of the value and its central finite difference; float32 in gives
  float32 out; numpy and torch agree; the in-place coefficient equals the plain one; a
  singular kernel has the zero subgradient at z = 0; ``describe()`` rebuilds a built-in
  through ``make_kernel``; a bad parameter raises :class:`meanfield.errors.InputError` (or
  :class:`InputTypeError`);
* :func:`~meanfield.testing.check_term`: ``grad`` is the autograd gradient of ``value`` (with
  and without replica axes); the value is finite; H_N is invariant under a permutation of the
  particles; the particle force is the gradient of the first variation; the first variation
  is the derivative of the value on a weighted measure; a pair term is invariant under a
  translation and is the pair sum of its kernel; a float32 energy computes in float32;
* :func:`~meanfield.testing.check_scheme`: mass conserved, density nonnegative and free energy
  non-increasing over a few steps of a 1D and a 2D grid.

Tolerances and inputs are those of the checks' docstrings (float64 round-off bounds).
"""

import inspect

import numpy as np
import pytest
import torch

import meanfield.energy as energy_mod
import meanfield.kernels as kernels_mod
from meanfield.domains import Torus
from meanfield.energy import (
    CallablePotential,
    CentredAlignment,
    DoubleWellPotential,
    LinearAlignment,
    NormalisedAlignment,
    PairInteraction,
    PeriodicPairInteraction,
    QuadraticPotential,
    RiskAlignment,
)
from meanfield.kernels import (
    CallableKernel,
    Cosine,
    Coulomb,
    Gaussian,
    PairKernel,
    Quadratic,
    Riesz,
)
from meanfield.pde.schemes import SCHEMES
from meanfield.testing import check_kernel, check_scheme, check_term


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
    Cosine: [Cosine(), Cosine(frequency=2.5)],
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
    Cosine: [{"frequency": 0.0}, {"frequency": float("inf")}],
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


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_kernel_keeps_the_contract(kernel):
    """Every check of :func:`meanfield.testing.check_kernel` in p = 1, 2, 3, with the bad
    constructor arguments of its class."""
    check_kernel(kernel, bad_parameters=KERNEL_BAD.get(type(kernel), ()))


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_kernel_describe_names_a_built_in_or_its_own_name(kernel):
    """check_kernel rebuilds a kernel whose describe() gives a built-in name; every built-in
    class gives one (so the rebuild is checked for it), and a kernel around a user function
    gives its own name, which make_kernel refuses rather than mistake for a built-in."""
    d = kernel.describe()
    if type(kernel) in NOT_REBUILT:
        assert d["kernel"] == kernel.name and d["kernel"] not in kernels_mod.KERNEL_NAMES
    else:
        assert d["kernel"] in kernels_mod.KERNEL_NAMES


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
    # on the torus: the circle's cosine coupling (exactly periodic) and a short-range kernel
    PeriodicPairInteraction: [
        (PeriodicPairInteraction(Cosine(), lam=0.7, domain=Torus(1)), 1),
        (PeriodicPairInteraction(Gaussian(width=0.4), lam=0.7, domain=Torus(2)), 2),
    ],
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


@pytest.mark.parametrize("term, p", _term_params())
def test_term_keeps_the_contract(term, p):
    """Every check of :func:`meanfield.testing.check_term` (the pair checks for pair terms,
    the derivative on measures for the others)."""
    check_term(term, p)


# ------------------------------------------------------------------------------------ schemes
@pytest.mark.parametrize("name", SCHEMES)
def test_scheme_keeps_the_contract(name):
    """Every scheme of the registry: :func:`meanfield.testing.check_scheme` on its 1D (32
    cells) and 2D (10 × 10 cells) problems: mass, positivity, free-energy decay."""
    check_scheme(name)
