"""Large deviations: tilted Monte Carlo and grid rate functions against exact Gaussian tails."""

import math

import numpy as np
import pytest
from scipy import stats

from meanfield.domains import Box
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.kernels import Riesz
from meanfield.studies.large_deviations import rate_at, scgf_on_grid, statistic, tail_probability


def _model(lam):
    terms = [QuadraticPotential()] + ([PairInteraction(Riesz(-1.0), lam)] if lam else [])
    return Energy(terms, Box(1, 8.0))


@pytest.mark.slow  # Monte Carlo
@pytest.mark.parametrize("lam, N, a", [(0.0, 20, 1.0), (0.5, 30, 1.1)])
def test_tilted_mc_matches_exact_gaussian_tail(lam, N, a):
    """V = ω²/2 and a translation-invariant pair kernel (−|z|): the mean L_N = (1/N)Σω_i
    decouples from the differences, so L_N ~ N(0, 1/(βN)) exactly, interacting or not, and
    P(L_N ≥ a) = Φ̄(a√(βN)) (here 3.9e-6 and 8.6e-10).  The estimate must lie within 4 of its
    own error bars (statistical ⊕ quadrature) of the exact log-probability."""
    r = tail_probability(
        _model(lam),
        statistic("mean"),
        a,
        N,
        1.0,
        theta=a,
        eta=0.3,
        n_replicas=64,
        n_steps=400,
        burn_in=100,
        seed=1,
    )
    exact = stats.norm.logsf(a * math.sqrt(N))
    err = math.hypot(float(r["log_p_se"]), float(r["log_p_quad_err"]))
    assert abs(float(r["log_p"]) - exact) < 4 * err
    assert err < 0.1  # and the error bar itself is tight: P known to ~10 %
    assert (r["acceptance_rate"] > 0.5).all()


@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_grid_scgf_and_rate_match_closed_form(lam):
    """Same model: Λ(θ) = θ²/(2β) and J(a) = βa²/2 (the mean mode is Gaussian for every N)."""
    beta = 1.0
    sc = scgf_on_grid(_model(lam), statistic("mean"), beta, np.linspace(-1, 2, 7), cells=256)
    th = sc["theta"].values
    np.testing.assert_allclose(sc["Lambda"].values, th**2 / (2 * beta), atol=1e-6)
    np.testing.assert_allclose(sc["a"].values, th / beta, atol=1e-6)
    assert rate_at(sc, 1.0) == pytest.approx(0.5, abs=1e-6)
    with pytest.raises(ValueError, match="widen"):
        rate_at(sc, 5.0)


@pytest.mark.slow  # Monte Carlo
def test_rate_approaches_grid_rate_for_a_nonlinear_statistic():
    """f = ω² with −|z| repulsion: no closed form.  −(1/N) log P(L_N ≥ a) must decrease towards
    the grid J(a) as N grows, staying above it (the finite-N prefactor makes P smaller)."""
    E = _model(0.5)
    st = statistic("second_moment")
    sc = scgf_on_grid(
        E, st, 1.0, np.r_[np.linspace(-0.3, 0, 4), np.linspace(0.05, 0.3, 6)], cells=256
    )
    a = 1.6 * float(sc["a"].sel(theta=0.0))
    J = rate_at(sc, a)
    theta = float(np.interp(a, sc["a"].values, sc["theta"].values))
    rates = []
    for N in (8, 24):
        r = tail_probability(
            E, st, a, N, 1.0, theta=theta, eta=0.3, n_replicas=48, n_steps=300, burn_in=100, seed=2
        )
        rates.append((float(r["rate"]), float(r["rate_se"])))
    (r8, s8), (r24, s24) = rates
    assert r24 < r8 - 4 * math.hypot(s8, s24)
    assert r24 > J
    assert (r24 - J) < 0.6 * (r8 - J)


def test_bad_inputs():
    with pytest.raises(ValueError, match="statistic"):
        statistic("variance")
    with pytest.raises(ValueError, match="contain 0"):
        scgf_on_grid(_model(0.0), statistic("mean"), 1.0, [0.5, 1.0])
    with pytest.raises(ValueError, match="theta"):
        tail_probability(_model(0.0), statistic("mean"), 1.0, 10, 1.0, theta=-1.0)


@pytest.mark.slow  # Monte Carlo
def test_coulomb_gas_regime_tail_and_rate():
    """Coulomb-gas regime, law ∝ exp(−βN²H_N): the mean is exactly N(0, 1/(βN²)), so
    P(L_N ≥ a) = Φ̄(aN√β) (here 2.9e-7 at N = 10) and, on the grid with the β = ∞ solver,
    Λ(θ) = θ²/(2β), J(a) = βa²/2.  Same 4-error-bar criterion as the mean-field test."""
    E = _model(0.5)
    r = tail_probability(
        E,
        statistic("mean"),
        0.5,
        10,
        1.0,
        theta=0.5,
        eta=0.3,
        n_replicas=64,
        n_steps=400,
        burn_in=100,
        seed=1,
        regime="coulomb-gas",
    )
    exact = stats.norm.logsf(0.5 * 10)
    err = math.hypot(float(r["log_p_se"]), float(r["log_p_quad_err"]))
    assert abs(float(r["log_p"]) - exact) < 4 * err and err < 0.1
    assert r.attrs["speed"] == 100
    sc = scgf_on_grid(
        E, statistic("mean"), 1.0, np.linspace(-1, 1, 5), cells=256, regime="coulomb-gas"
    )
    np.testing.assert_allclose(sc["Lambda"].values, sc["theta"].values ** 2 / 2, atol=1e-6)
    assert rate_at(sc, 0.5) == pytest.approx(0.125, abs=1e-6)
