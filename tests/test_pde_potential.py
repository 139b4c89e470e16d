"""The energy on the grid reads the one Energy object: first variations and values."""

import numpy as np
import pytest
import torch

from meanfield.domains import Box
from meanfield.energy import (
    DoubleWellPotential,
    Energy,
    LinearAlignment,
    NormalisedAlignment,
    PairInteraction,
    QuadraticPotential,
    RiskAlignment,
    target_matrix,
)
from meanfield.kernels import Riesz
from meanfield.pde import Density, FFTConvolution, Grid, GridEnergy, McKeanVlasov


def _data(rng, n=12):
    X = rng.normal(scale=0.5, size=(n, 1))
    y = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    y[:2] = [1.0, -1.0]
    return X, y


def test_local_terms_are_the_energy_first_variation(rng):
    X, y = _data(rng)
    dom = Box(1, 2.0)
    g = Grid(dom, 50)
    E = Energy(
        [
            QuadraticPotential(1.3),
            DoubleWellPotential(0.4),
            LinearAlignment(X, y),
            PairInteraction(Riesz(0.0), 0.5),
        ],
        dom,
    )
    ge = GridEnergy(E, g)
    assert ge.names == ["confinement", "confinement_2", "alignment", "interaction"]
    local = E.terms[0].first_variation(torch.as_tensor(g.centers))
    np.testing.assert_array_equal(ge.local["confinement"], local.numpy())
    expect = sum(t.first_variation(torch.as_tensor(g.centers)).numpy() for t in E.terms[:3])
    np.testing.assert_allclose(ge.external, expect, rtol=1e-15)


def test_pair_energy_is_the_double_sum_of_cell_integrated_kernel(rng):
    dom = Box(2, 1.0)
    g = Grid(dom, 10)
    lam = 0.7
    E = Energy([PairInteraction(Riesz(1.0), lam)], dom)
    rho = Density(g, rng.random(g.shape))
    W = FFTConvolution(Riesz(1.0), g).weights
    w = rho.masses
    n = g.n
    direct = 0.0
    for i in np.ndindex(*n):
        for j in np.ndindex(*n):
            direct += w[i] * rho.data[j] * W[n[0] - 1 + i[0] - j[0], n[1] - 1 + i[1] - j[1]]
    assert GridEnergy(E, g).value(rho.data) == pytest.approx(lam * direct, rel=1e-12)


def test_risk_term_value_matches_its_definition(rng):
    # R(μ) = (1/(2n²)) Σ_jk (α T_jk − K_μ(x_j, x_k))², K_μ = Σ_i w_i φ(x_j; c_i) φ(x_k; c_i),
    # written out here from the definition (THEORY §2, form 2)
    X, y = _data(rng)
    alpha = 0.8
    dom = Box(1, 1.5)
    g = Grid(dom, 30)
    E = Energy([RiskAlignment(X, y, "positive", alpha=alpha)], dom)
    rho = Density.gaussian(g, 0.2, 0.5)
    phi = np.exp(g.centers @ X.T - 0.5 * (X**2).sum(1))  # (M, n)
    K = (phi * rho.masses.ravel()[:, None]).T @ phi
    T = target_matrix(y)
    n = len(y)
    direct = ((alpha * T - K) ** 2).sum() / (2 * n**2)
    ge = GridEnergy(E, g)
    assert ge.value(rho.data) == pytest.approx(direct, rel=1e-12)
    # the grid potential is the Energy's own first variation for the weighted measure
    fv = E.first_variation(g.centers, g.centers, rho.masses.ravel()).numpy()
    np.testing.assert_allclose(ge.potential(rho.data), fv, rtol=1e-14)
    # and the PDE runs with it, decreasing the free energy
    eq = McKeanVlasov(E, g, 20.0, scheme="sg")
    res = eq.solve(rho, 0.05)
    assert eq.free_energy(res.state) < eq.free_energy(rho)


def test_unsupported_term_is_named(rng):
    X, y = _data(rng)
    dom = Box(1, 1.0)
    E = Energy([NormalisedAlignment(X, y)], dom)
    with pytest.raises(NotImplementedError, match="NormalisedAlignment.*supported terms"):
        GridEnergy(E, Grid(dom, 16))


def test_chunked_evaluation_equals_one_shot(rng, monkeypatch):
    import meanfield.pde.potential as potential_mod

    X, y = _data(rng)
    dom = Box(1, 1.5)
    g = Grid(dom, 40)
    E = Energy([LinearAlignment(X, y), RiskAlignment(X, y, alpha=0.5)], dom)
    rho = Density.gaussian(g, 0.1, 0.4).data
    whole = GridEnergy(E, g).potentials(rho)
    monkeypatch.setattr(potential_mod, "CHUNK_ELEMENTS", 50)  # 1–4 centres per call
    chunked = GridEnergy(E, g).potentials(rho)
    for k in whole:
        np.testing.assert_allclose(chunked[k], whole[k], rtol=1e-14, atol=1e-15)
