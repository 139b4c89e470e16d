"""Terms declare their kind (what the grid reads), and the Energy boundary of ``drift``."""

import numpy as np
import pytest
import torch

from meanfield.domains import Box
from meanfield.energy import (
    TERM_KINDS,
    CentredAlignment,
    DoubleWellPotential,
    Energy,
    LinearAlignment,
    NormalisedAlignment,
    PairInteraction,
    QuadraticPotential,
    RiskAlignment,
    UnboundTermError,
)
from meanfield.kernels import Gaussian, Riesz


def _data(rng, n=10):
    X = rng.normal(scale=0.5, size=(n, 1))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    y[:2] = [1.0, -1.0]
    return X, y


def test_every_builtin_term_declares_its_kind(rng):
    X, y = _data(rng)
    expected = {
        QuadraticPotential(): "one-body",
        DoubleWellPotential(): "one-body",
        LinearAlignment(X, y): "one-body",
        RiskAlignment(X, y): "measure",
        NormalisedAlignment(X, y): "measure",
        CentredAlignment(X, y): "measure",
        PairInteraction(Riesz(0.0), 0.3): "pair",
    }
    for term, kind in expected.items():
        assert term.kind == kind and kind in TERM_KINDS, type(term).__name__
    k, lam = PairInteraction(Gaussian(0.5), 0.3).pair_kernel()
    assert isinstance(k, Gaussian) and lam == 0.3
    with pytest.raises(TypeError, match="QuadraticPotential is a 'one-body' term, not a pair"):
        QuadraticPotential().pair_kernel()


def test_measure_value_of_a_one_body_term_is_its_integral():
    pts = torch.linspace(-1, 1, 7, dtype=torch.float64)[:, None]
    w = torch.full((7,), 1 / 7, dtype=torch.float64)
    v = QuadraticPotential(2.0).measure_value(pts, w)
    assert float(v) == pytest.approx(float((pts[:, 0] ** 2 * w).sum()), rel=1e-15)


def test_a_term_used_before_bind_says_so(rng):
    X, y = _data(rng)
    term = LinearAlignment(X, y)
    with pytest.raises(UnboundTermError, match="use the term inside an Energy"):
        term.value(torch.zeros(3, 1, dtype=torch.float64))
    assert isinstance(UnboundTermError("x"), AttributeError)  # hasattr() keeps working
    assert not hasattr(term, "Xt") and not hasattr(term, "no_such_attribute")
    # bound through an Energy it works
    E = Energy([term], Box(1, 2.0))
    assert torch.isfinite(E.value(np.zeros((3, 1)))).all()


def test_drift_converts_its_input_like_value_and_grad(rng):
    dom = Box(1, 2.0)
    terms = [QuadraticPotential(1.0), PairInteraction(Gaussian(0.5), 0.4)]
    omega = rng.uniform(-1, 1, size=(20, 1))
    E64 = Energy(terms, dom)
    d_np = E64.drift(omega)  # numpy in: converted, not a TypeError
    d_t = E64.drift(torch.as_tensor(omega))
    assert d_np.dtype == torch.float64
    torch.testing.assert_close(d_np, d_t, rtol=0, atol=0)
    torch.testing.assert_close(d_t, 20 * E64.grad(omega), rtol=1e-14, atol=1e-14)
    E32 = Energy(terms, dom, dtype=torch.float32)
    assert E32.drift(omega).dtype == torch.float32  # float64 in, the energy's dtype out
    with pytest.raises(ValueError, match=r"omega must have shape \(\.\.\., N, 1\)"):
        E64.drift(np.zeros((5, 2)))


def test_random_batch_drift_requires_a_generator(rng):
    E = Energy([PairInteraction(Gaussian(0.5), 0.4)], Box(1, 2.0))
    omega = rng.uniform(-1, 1, size=(12, 1))
    with pytest.raises(TypeError, match="needs generator=torch.Generator"):
        E.drift(omega, interaction_batch=4)
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    a = E.drift(omega, interaction_batch=4, generator=g1)
    b = E.drift(omega, interaction_batch=4, generator=g2)
    torch.testing.assert_close(a, b, rtol=0, atol=0)  # seeded: reproducible
