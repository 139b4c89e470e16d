"""Stationary states: Gibbs states and the β = ∞ equilibria of THEORY §5."""

import math
import warnings

import numpy as np
import pytest

from meanfield.domains import Box
from meanfield.energy import DoubleWellPotential, Energy, PairInteraction, QuadraticPotential
from meanfield.errors import ConvergenceWarning
from meanfield.kernels import Riesz
from meanfield.ot import Measure, w2
from meanfield.pde import (
    Density,
    Grid,
    McKeanVlasov,
    SteadyStateTracker,
    equilibrium_measure,
    gibbs_state,
)


def _coulomb_gas(dim, R, n, s):
    """V = |ω|²/2, λ = 1/2 (E = ∫V + ½∬k), the setting of THEORY §5."""
    dom = Box(dim, R)
    return Energy([QuadraticPotential(1.0), PairInteraction(Riesz(s), 0.5)], dom), Grid(dom, n)


def semicircle_cells(g):
    """Exact cell averages of (1/π)√(2 − x²) on [−√2, √2]."""
    R = math.sqrt(2)
    x = np.clip(g.edges[0], -R, R)
    F = (x * np.sqrt(np.maximum(2 - x * x, 0)) + 2 * np.arcsin(x / R)) / (2 * math.pi)
    return np.diff(F) / g.h[0]


def uniform_cells(g):
    """Exact cell averages of 1/2 on [−1, 1]."""
    e = g.edges[0]
    return np.clip(np.minimum(e[1:], 1) - np.maximum(e[:-1], -1), 0, None) / g.h[0] / 2


def disk_cells(g, sub=16):
    """Cell averages of 1/π on the unit disk (sub × sub midpoint samples per cell)."""
    X, Y = g.mesh
    off = (np.arange(sub) + 0.5) / sub - 0.5
    frac = sum((np.hypot(X + a * g.h[0], Y + b * g.h[1]) < 1) for a in off for b in off)
    return frac / sub**2 / math.pi


# --- no interaction: the Gibbs state is exp(−βV)/Z to round-off --------------------------
@pytest.mark.parametrize("method", ["picard", "newton"])
def test_gibbs_without_interaction_is_boltzmann(method):
    dom = Box(1, 2.0)
    g = Grid(dom, 64)
    beta = 3.0
    E = Energy([DoubleWellPotential(2.0)], dom)
    rho, rep = gibbs_state(E, g, beta, method=method)
    x = g.axes[0]
    boltz = np.exp(-beta * 2.0 * (x**4 / 4 - x**2 / 2))
    boltz /= boltz.sum() * g.h[0]
    assert rep.converged
    np.testing.assert_allclose(rho.data, boltz, rtol=1e-13)


def test_implicit_pde_reaches_boltzmann_to_round_off():
    # implicit SG with Δt = 1e6: each step contracts the distance to the kernel of the
    # generator by 1/(1 + Δt·gap); the kernel is the discrete Gibbs state exactly
    dom = Box(2, 2.0)
    g = Grid(dom, 20)
    beta = 2.0
    E = Energy([DoubleWellPotential(1.0)], dom)
    eq = McKeanVlasov(E, g, beta, scheme="sg-implicit")
    res = eq.solve(Density.gaussian(g, 0.5, 0.3), 4e6, dt=1e6)
    X, Y = g.mesh
    boltz = np.exp(-beta * (X**4 / 4 - X**2 / 2 + Y**4 / 4 - Y**2 / 2))
    boltz /= boltz.sum() * g.cell_volume
    np.testing.assert_allclose(res.state.data, boltz, rtol=1e-11)


def test_picard_and_newton_agree_with_interaction():
    E, g = _coulomb_gas(1, 2.0, 100, 0.0)
    a, ra = gibbs_state(E, g, 10.0, method="picard")
    b, rb = gibbs_state(E, g, 10.0, method="newton")
    assert ra.converged and rb.converged
    assert ra.residual <= 1e-12 and len(ra.history) == ra.iterations
    np.testing.assert_allclose(a.data, b.data, rtol=0, atol=1e-10 * b.data.max())
    assert ra.free_energy == pytest.approx(rb.free_energy, abs=1e-12)
    assert "converged" in str(ra)
    # the Gibbs state is a steady state of the PDE (the SG flux vanishes there)
    eq = McKeanVlasov(E, g, 10.0, scheme="sg")
    assert np.abs(eq.evolution_rate(b)).max() <= 1e-8


def test_non_convergence_is_reported():
    E, g = _coulomb_gas(1, 2.0, 64, 0.0)
    with pytest.warns(ConvergenceWarning):
        _, rep = gibbs_state(E, g, 50.0, method="picard", max_iter=3)
    assert not rep.converged and rep.iterations == 3 and "NOT converged" in str(rep)


@pytest.mark.parametrize("method", ["picard", "newton"])
def test_an_unconverged_gibbs_state_warns(method):
    """Issue 24: an unconverged density (residual 4.9e-2) came back with no warning; only
    report.converged was False.  Now a ConvergenceWarning names the residual and the fix."""
    E, g = _coulomb_gas(1, 2.0, 64, 0.0)
    with pytest.warns(ConvergenceWarning, match=r"gibbs_state did not converge.*max_iter"):
        _, rep = gibbs_state(E, g, 50.0, method=method, max_iter=2)
    assert not rep.converged
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # a converged solve stays quiet
        gibbs_state(E, g, 1.0, method="newton")


def test_an_unconverged_equilibrium_measure_warns():
    E, g = _coulomb_gas(1, 2.0, 40, -1.0)
    with pytest.warns(ConvergenceWarning, match=r"equilibrium_measure did not converge"):
        _, rep = equilibrium_measure(E, g, max_iter=3, max_active_set=0)
    assert not rep.converged


# --- β = ∞: the equilibrium measures of THEORY §5 -------------------------------------------
@pytest.mark.parametrize("n", [100, 200])
def test_equilibrium_semicircle(n):
    E, g = _coulomb_gas(1, 2.0, n, 0.0)
    mu, rep = equilibrium_measure(E, g)
    assert rep.converged and rep.residual <= 1e-10
    h = g.h[0]
    err = np.abs(mu.data - semicircle_cells(g))
    # the density vanishes like √dist at ±√2: the edge cell carries mass O(h^{3/2}), and
    # the L1 error is of that order (measured 0.24 h^1.5 at n=100, 0.07 h^1.5 at n=200)
    assert err.sum() * h <= h**1.5
    inner = np.abs(g.axes[0]) < 1.2
    assert err[inner].max() <= 0.1 * h
    assert mu.mass == pytest.approx(1.0, abs=1e-13)
    # E(semicircle) = 1/4 + ½(−log(√2/2) + 1/4) for V = x²/2, λ = 1/2
    assert rep.free_energy == pytest.approx(
        0.25 + 0.5 * (-math.log(math.sqrt(2) / 2) + 0.25), abs=h
    )


def test_equilibrium_uniform_for_minus_abs_kernel():
    # k = −|z| (Coulomb in 1D): E-L gives 1 − 2ρ = 0 on the support, ρ = 1/2 on [−1, 1];
    # the cell-integrated −|z| is exact for piecewise-linear potentials, and the discrete
    # minimiser matches to the solver's tolerance
    E, g = _coulomb_gas(1, 2.0, 200, -1.0)
    mu, rep = equilibrium_measure(E, g)
    assert rep.converged
    np.testing.assert_allclose(mu.data, uniform_cells(g), atol=1e-7)


def test_equilibrium_uniform_disk():
    # p = 2, log kernel: ΔV = 2 = 2π ρ on the support, ρ = 1/π on the unit disk
    errs = []
    for n in (20, 40):
        E, g = _coulomb_gas(2, 1.5, n, 0.0)
        mu, rep = equilibrium_measure(E, g)
        assert rep.converged
        X, Y = g.mesh
        deep = np.hypot(X, Y) < 0.5
        assert np.abs(mu.data[deep] - 1 / math.pi).max() <= 1e-3
        errs.append(np.abs(mu.data - disk_cells(g)).sum() * g.cell_volume)
        # boundary cells of the disk: L1 error O(h) (measured 0.54 h and 0.74 h)
        assert errs[-1] <= 1.5 * g.h[0]
        assert mu.data[np.hypot(X, Y) > 1 + g.h[0]].max() == 0.0
    assert errs[1] < errs[0]


# --- large β: the PDE relaxes to the same laws -----------------------------------------------
def _relax(E, g, beta, scheme, t=40.0):
    eq = McKeanVlasov(E, g, beta, scheme=scheme)
    ss = SteadyStateTracker(0.5, atol=1e-7, rtol=0)
    res = eq.solve(Density.gaussian(g, 0.3, 0.5), t, trackers=[ss])
    assert res.stop_reason.startswith("steady state")
    return res.state


@pytest.mark.parametrize("scheme", ["sg", "upwind"])
def test_large_beta_pde_semicircle(scheme):
    beta = 1000.0
    E, g = _coulomb_gas(1, 2.0, 200, 0.0)
    rho = _relax(E, g, beta, scheme)
    gibbs, rep = gibbs_state(E, g, beta, method="newton")
    assert rep.converged
    # the PDE's steady state is the Gibbs state (stop criterion |dρ/dt| ≤ 1e-7)
    assert np.abs(rho.data - gibbs.data).sum() * g.h[0] <= 1e-6
    # ρ_β → semicircle as β → ∞: measured L1 = 1.5/β; bound 3/β
    assert np.abs(rho.data - semicircle_cells(g)).sum() * g.h[0] <= 3 / beta


def test_large_beta_pde_uniform():
    E, g = _coulomb_gas(1, 2.0, 200, -1.0)
    errs = []
    for beta in (300.0, 1000.0):
        rho = _relax(E, g, beta, "sg")
        errs.append(np.abs(rho.data - uniform_cells(g)).sum() * g.h[0])
    # the jump of the uniform law at ±1 is smoothed over a width ∝ β^(−1/2):
    # measured L1 = 1.09 β^(−1/2) at both β
    assert errs[0] <= 1.5 / math.sqrt(300) and errs[1] <= 1.5 / math.sqrt(1000)
    assert errs[0] / errs[1] == pytest.approx(math.sqrt(1000 / 300), rel=0.15)


def test_large_beta_pde_uniform_disk():
    E, g = _coulomb_gas(2, 1.5, 40, 0.0)
    rho = _relax(E, g, 200.0, "sg", t=30.0)
    mu, _ = equilibrium_measure(E, g)
    # W2 between the β = 200 steady state and μ* (exact emd on 1600 × 1600 atoms):
    # measured 0.022, of order the edge width β^(−1/2) ≈ 0.07
    assert w2(Measure.from_density(rho), Measure.from_density(mu)).distance <= 0.05
    X, Y = g.mesh
    assert np.abs(rho.data[np.hypot(X, Y) < 0.5] - 1 / math.pi).max() <= 0.02
