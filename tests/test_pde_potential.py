"""The energy on the grid reads the one Energy object: first variations and values."""

import numpy as np
import pytest

from meanfield.domains import Box
from meanfield.energy import (
    DoubleWellPotential,
    Energy,
    LinearAlignment,
    NormalisedAlignment,
    PairInteraction,
    QuadraticPotential,
    RiskAlignment,
    Term,
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
    assert ge.names == E.term_names == list(E.term_values(np.zeros((2, 1))))
    # independent closed forms at the cell centres: V = 1.3 x²/2 + 0.4 (x⁴/4 − x²/2) and the
    # linear alignment a(x) = Σ_{j≠k} T_jk φ_j φ_k / (n(n−1)), φ_j = exp(x X_j − X_j²/2)
    x = g.centers[:, 0]
    np.testing.assert_allclose(ge.local["confinement"], 1.3 * x**2 / 2, rtol=1e-14)
    np.testing.assert_allclose(ge.local["confinement_2"], 0.4 * (x**4 / 4 - x**2 / 2), rtol=1e-13)
    phi = np.exp(np.outer(x, X[:, 0]) - 0.5 * X[:, 0] ** 2)
    T = target_matrix(y)
    n = len(y)
    a = (np.einsum("ij,jk,ik->i", phi, T, phi) - (phi**2 * np.diag(T)).sum(1)) / (n * (n - 1))
    np.testing.assert_allclose(ge.local["alignment"], -a, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(
        ge.external, sum(ge.local[k] for k in ge.local), rtol=1e-15, atol=1e-15
    )


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


class _ThreeBody(Term):
    name, kind = "odd", "three-body"


class _Tilt(Term):
    """A user one-body term unknown to meanfield.pde: f(ω) = c ω."""

    name, kind = "tilt", "one-body"

    def __init__(self, c):
        self.c = c

    def first_variation(self, at, points=None, weights=None):
        return self.c * at[..., 0]


class _Pair(Term):
    """A user pair term unknown to meanfield.pde, declared through its kernel and λ."""

    name, kind = "mine", "pair"

    def pair_kernel(self):
        return Riesz(0.0), 0.25


def test_terms_are_read_through_their_declared_kind():
    dom = Box(1, 1.0)
    g = Grid(dom, 16)
    with pytest.raises(NotImplementedError, match="_ThreeBody: it declares kind='three-body'"):
        GridEnergy(Energy([QuadraticPotential(), _ThreeBody()], dom), g)
    # user terms of a declared kind need no change in meanfield.pde
    ge = GridEnergy(Energy([_Tilt(0.3), _Pair()], dom), g)
    rho = Density.gaussian(g, 0.1, 0.3).data
    np.testing.assert_allclose(ge.local["tilt"], 0.3 * g.centers[:, 0], rtol=1e-15)
    ref = GridEnergy(Energy([PairInteraction(Riesz(0.0), 0.25)], dom), g)
    np.testing.assert_allclose(ge.potentials(rho)["mine"], ref.potential(rho), rtol=1e-14)


def test_normalised_alignment_on_the_grid_matches_particles(rng):
    # −A(μ) on the grid (cell-centre quadrature) against H_N = −A(μ_N) of N exact samples of
    # the piecewise-constant density, N = 20000, 5 seeds.  Errors: Monte Carlo O(N^-1/2)
    # (estimated by the seeds' spread), ratio bias O(1/N), quadrature O(h²) (estimated by
    # halving h); the tolerance is 4 standard errors + 2 × the quadrature estimate + 10/N.
    X, _ = _data(rng)
    X[:2, 0] = [0.3, -0.3]
    y = np.where(X[:, 0] > 0, 1.0, -1.0)  # labels the features can align with
    dom = Box(1, 1.5)
    E = Energy([NormalisedAlignment(X, y)], dom)
    g, fine = Grid(dom, 60), Grid(dom, 120)
    rho = Density.gaussian(g, 0.2, 0.4)
    ge = GridEnergy(E, g)
    e_grid = ge.value(rho.data)
    e_fine = GridEnergy(E, fine).value(Density.gaussian(fine, 0.2, 0.4).data)
    N, seeds = 20_000, range(5)
    values, pots = [], []
    for s in seeds:
        omega = rho.sample(N, seed=s)
        values.append(float(E.value(omega)))
        pots.append(E.first_variation(g.centers, omega, np.full(N, 1.0 / N)).numpy())
    se = np.std(values, ddof=1) / np.sqrt(len(values))
    tol = 4 * se + 2 * abs(e_grid - e_fine) + 10 / N
    assert abs(np.mean(values) - e_grid) <= tol, (np.mean(values), e_grid, tol)
    assert e_grid < 0 and tol < 0.1 * abs(e_grid), (tol, e_grid)  # resolves the value
    pots = np.array(pots)
    pse = pots.std(0, ddof=1) / np.sqrt(len(pots))
    U = ge.potential(rho.data)
    U_fine = GridEnergy(E, fine).potential(Density.gaussian(fine, 0.2, 0.4).data)
    quad = np.abs(U - 0.5 * (U_fine[::2] + U_fine[1::2])).max()  # same-point h² estimate
    assert np.all(np.abs(pots.mean(0) - U) <= 4 * pse + 2 * quad + 10 / N)
    # the grid flow runs with it: positive, conservative, free energy decreasing
    eq = McKeanVlasov(Energy([QuadraticPotential(1.0), NormalisedAlignment(X, y)], dom), g, 5.0)
    res = eq.solve(rho, 0.05)
    assert res.state.data.min() >= 0 and abs(res.state.mass - 1) < 1e-12
    assert eq.free_energy(res.state) < eq.free_energy(rho)


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
