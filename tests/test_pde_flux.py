"""Invariants of the finite-volume schemes: positivity, mass, free-energy decay, Gibbs states."""

import math

import numpy as np
import pytest

from meanfield.domains import Box
from meanfield.energy import DoubleWellPotential, Energy, PairInteraction, QuadraticPotential
from meanfield.kernels import Gaussian, Riesz
from meanfield.pde import (
    Density,
    FreeEnergyTracker,
    Grid,
    MassTracker,
    McKeanVlasov,
    ScharfetterGummel,
    UpwindScheme,
)
from meanfield.pde.schemes import ScharfetterGummelMPRK, bernoulli, minmod3, reconstruct, solve_raw

SCHEMES = [
    ("upwind", 1),
    ("upwind", 2),
    ("sg", 2),
    ("sg-implicit", 2),
    ("sg-mprk22", 2),
    ("sg-mprk22-split", 2),
]


def test_bernoulli_function():
    z = np.array([-800.0, -30.0, -1e-8, 0.0, 1e-8, 1.0, 30.0, 800.0])
    B = bernoulli(z)
    ref = np.array(
        [800.0, 30 / (1 - math.exp(-30)), 1.0, 1.0, 1.0, 1 / (math.e - 1), 30 / math.expm1(30), 0.0]
    )
    np.testing.assert_allclose(B, ref, rtol=1e-8, atol=1e-300)
    # B(−z) = z + B(z): the identity that makes the SG flux vanish at ρ ∝ e^(−βU)
    zz = np.linspace(-40, 40, 81)
    np.testing.assert_allclose(bernoulli(-zz), zz + bernoulli(zz), rtol=1e-12, atol=1e-12)


def test_minmod_matches_its_definition(rng):
    a, b, c = rng.normal(size=(3, 10_000))
    a[:10] = 0.0  # ties at zero
    same = ((a > 0) & (b > 0) & (c > 0)) | ((a < 0) & (b < 0) & (c < 0))
    least = np.minimum(np.minimum(np.abs(a), np.abs(b)), np.abs(c))
    np.testing.assert_array_equal(minmod3(a, b, c), np.where(same, np.sign(a) * least, 0.0))


def test_reconstruction_stays_in_zero_two_rho(rng):
    rho = rng.random(200) * (rng.random(200) > 0.3)
    rE, rW = reconstruct(rho, 0, theta=2.0)
    assert np.all(rE >= 0) and np.all(rW >= 0)
    assert np.all(rE <= 2 * rho + 1e-300) and np.all(rW <= 2 * rho + 1e-300)
    # linear data is reproduced exactly in the interior (second order)
    lin = np.linspace(1, 2, 50)
    rE, _ = reconstruct(lin, 0)
    np.testing.assert_allclose(rE[1:-1], lin[1:-1] + 0.5 * (lin[1] - lin[0]), rtol=1e-14)


def _model(dim, n, kernel="log", lam=0.5, potential=None):
    dom = Box(dim, 2.0)
    kernel = Riesz(0.0) if kernel == "log" else kernel
    terms = [potential or QuadraticPotential(1.0)]
    if kernel is not None:
        terms.append(PairInteraction(kernel, lam))
    return Energy(terms, dom), Grid(dom, n)


@pytest.mark.parametrize("scheme, order", SCHEMES)
@pytest.mark.parametrize("dim, n", [(1, 64), (2, 24)])
def test_mass_positivity_and_free_energy_decay(scheme, order, dim, n):
    # THEORY §4: mass conserved, ρ ≥ 0, F_β non-increasing; here for the discrete scheme,
    # checked at every step (FreeEnergyTracker(0)), with a singular nonlocal term.
    E, g = _model(dim, n)
    eq = McKeanVlasov(E, g, beta=5.0, scheme=scheme, order=order)
    rho0 = Density.gaussian(g, 0.5, 0.4)
    fe, mt = FreeEnergyTracker(0), MassTracker(0)
    res = eq.solve(rho0, 0.3, trackers=[fe, mt])
    assert res.n_steps > 10
    mass = np.asarray(mt.mass)
    # each step adds and removes every face flux once: round-off ~ M ε per step
    assert np.max(np.abs(mass - rho0.mass)) <= 1e-12
    assert np.min(mt.min_density) >= 0.0
    F = np.asarray(fe.records["free_energy"])
    # round-off of F: sums of M terms of size ≤ 10 → 1e-13 absolute
    assert np.all(np.diff(F) <= 1e-13), np.diff(F).max()
    assert F[-1] < F[0] - 1e-3


@pytest.mark.parametrize("scheme", [UpwindScheme(1), UpwindScheme(2), ScharfetterGummel()])
def test_positivity_in_floating_point_with_vacuum(rng, scheme):
    # a density with empty cells next to full ones, and contrasts of 1e300: the split
    # out/in update keeps every cell ≥ 0 exactly, every step
    E, g = _model(1, 60, kernel=Gaussian(0.2))
    data = rng.random(60) * (rng.random(60) > 0.4)
    data[10] = 1e-300
    eq = McKeanVlasov(E, g, beta=2.0, scheme=scheme)
    mt = MassTracker(0)
    eq.solve(Density(g, data), 2e-3, trackers=[mt], safety=0.9)
    assert min(mt.min_density) >= 0.0
    assert max(abs(m - mt.mass[0]) for m in mt.mass) <= 1e-12 * mt.mass[0]


@pytest.mark.parametrize("dim, n", [(1, 64), (2, 16)])
def test_implicit_step_positive_for_huge_time_steps(rng, dim, n):
    # the raw M-matrix solve, before any check or correction (nothing clamps it any more):
    # positive for every Δt, with vacuum cells and a 1e-300 cell in the data
    E, g = _model(dim, n, kernel=None, potential=DoubleWellPotential(3.0))
    rho = Density.gaussian(g, 0.3, 0.2).data * (rng.random(g.shape) > 0.3)
    rho.flat[3] = 1e-300
    U = E.first_variation(g.centers, g.centers[:1], np.zeros(1)).numpy().reshape(g.shape)
    sg = ScharfetterGummel(implicit=True).bind(g, 4.0)
    coeffs = sg.face_rates(U)
    max_rate = float(np.max(sg._exit_rates(U, drift_only=False)))
    for dt in (1e-3, 1.0, 1e6):
        raw = solve_raw(coeffs, g, dt, rho)
        assert raw.min() >= 0.0, (dt, raw.min())
        drift = abs(raw.sum() - rho.sum()) / rho.sum()
        if dim == 1:
            # subtraction-free Thomas: O(M ε) relative for every Δt (measured ≤ 1e-15)
            assert drift <= g.size * 1e-15, (dt, drift)
        else:
            # LU pivots formed by subtractions: ε · cond(I − Δt A) ≤ ε (1 + 2 Δt max rate)
            assert drift <= 1e-15 * (1 + 2 * dt * max_rate), (dt, drift)
        # what the schemes return: the same up to that mass correction, positive, conservative
        for scheme in (sg, ScharfetterGummelMPRK().bind(g, 4.0)):
            new = scheme.advance(rho, U, dt)
            assert new.min() >= 0 and abs(new.sum() - rho.sum()) <= 1e-13 * rho.sum()


def test_implicit_solve_reports_a_broken_potential():
    # the positivity check after the solve can fire: a NaN potential gives NaN rates
    E, g = _model(1, 32, kernel=None)
    U = np.zeros(g.shape)
    U[7] = np.nan
    with pytest.raises(FloatingPointError, match="negative or non-finite"):
        ScharfetterGummel(implicit=True).bind(g, 1.0).advance(Density.uniform(g).data, U, 0.1)


@pytest.mark.parametrize("scheme, order", SCHEMES)
@pytest.mark.parametrize("dim", [1, 2])
def test_gibbs_state_is_an_exact_steady_state(scheme, order, dim):
    # ρ ∝ exp(−βU) has zero flux through every face (SG: B(−a) = e^a B(a); upwind: ξ const),
    # so the semi-discrete rate vanishes to round-off: |dρ/dt| ≤ 1e-12 (max ρ) × (D/h²)
    E, g = _model(dim, 40 if dim == 1 else 16, kernel=None, potential=DoubleWellPotential(2.0))
    beta = 3.0
    eq = McKeanVlasov(E, g, beta, scheme=scheme, order=order)
    U = eq.potential(Density.uniform(g))
    gibbs = np.exp(-beta * (U - U.min()))
    gibbs /= gibbs.sum() * g.cell_volume
    rate = eq.evolution_rate(gibbs)
    scale = gibbs.max() / (beta * min(g.h) ** 2)
    assert np.abs(rate).max() <= 1e-12 * scale


# ---- schemes are bound once to (grid, beta) ------------------------------------------------
def test_a_scheme_is_bound_once_and_the_bound_copy_takes_the_state_alone(rng):
    """Issue 21: (grid, beta) are fixed by ``bind`` (as py-pde's ``make_stepper`` fixes the
    state's grid), not passed through every method; the unbound scheme refuses to step."""
    from meanfield.errors import InputTypeError

    g = Grid(Box(2, 2.0), 8)
    U = (g.centers**2).sum(1).reshape(g.shape)
    rho = rng.random(g.shape)
    for name in ("upwind", "sg", "sg-implicit", "sg-mprk22", "sg-mprk22-split"):
        eq = McKeanVlasov(Energy([QuadraticPotential()], g.domain), g, 3.0, scheme=name)
        assert eq.scheme.grid is g and eq.scheme.beta == 3.0
        unbound = type(eq.scheme)(**({"order": 2} if name == "upwind" else {}))
        with pytest.raises(InputTypeError, match="not bound .* scheme.bind"):
            unbound.stable_dt(rho, U)
    sg = ScharfetterGummel().bind(g, 3.0)
    assert sg.bind(g, 5.0).beta == 5.0 and sg.beta == 3.0  # a new copy each time
    with pytest.raises(TypeError, match="grid must be a meanfield.pde.Grid"):
        ScharfetterGummel().bind("grid", 1.0)
