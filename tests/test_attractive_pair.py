"""An attractive pair interaction: :class:`~meanfield.energy.PairInteraction` with λ < 0.

λ < 0 is allowed with a kernel that is not singular at coincident points (a softened Riesz or
log kernel, Gaussian, Quadratic) and refused by name with a singular one; the particle view
is the repulsive term's with the sign of λ turned (bit for bit), and the grid reads λk as
|λ|·(−k), so the solvers that take λ as a nonnegative strength keep valid bounds and the
convexity test does not call an attractive term convex. The Keller–Segel gallery files
(``tests/test_classic_models.py``) use it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import meanfield as mf
from meanfield.domains import Box
from meanfield.energy import Energy, PairInteraction
from meanfield.errors import InputError
from meanfield.kernels import Coulomb, Gaussian, Quadratic, Riesz
from meanfield.pde import Density, Grid
from meanfield.pde.potential import GridEnergy
from meanfield.pde.stationary import flat_convexity
from meanfield.testing import check_term

ATTRACTIVE_KERNELS = [Riesz(0.0, softening=0.05), Riesz(1.0, softening=0.2), Gaussian(0.7)]


def _particles(n=30, p=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, p, dtype=torch.float64, generator=gen)


@pytest.mark.parametrize("kernel", [Riesz(0.0), Riesz(1.0), Riesz(-1.0), Coulomb(2)], ids=repr)
def test_attraction_with_a_singular_kernel_is_refused_by_name(kernel):
    """λ < 0 with a kernel singular at coincident points (unsoftened Riesz, log, Coulomb):
    InputError naming lam and the remedy (a softening), before any work."""
    with pytest.raises(InputError, match=r"lam \(lambda\) < 0.*softening epsilon > 0"):
        PairInteraction(kernel, lam=-1.0)


@pytest.mark.parametrize("lam", [math.nan, math.inf, -math.inf])
def test_lam_must_be_finite(lam):
    with pytest.raises(InputError, match="lam"):
        PairInteraction(Gaussian(), lam=lam)


def test_fast_coulomb_still_refuses_attraction():
    """The fast Coulomb sums take only unsoftened kernels, so λ < 0 stays refused there."""
    from meanfield.fastsums import FastCoulombInteraction

    with pytest.raises(InputError, match="lam"):
        FastCoulombInteraction(Coulomb(2), lam=-1.0)


@pytest.mark.parametrize("kernel", ATTRACTIVE_KERNELS, ids=repr)
def test_attractive_term_is_the_repulsive_one_with_the_sign_turned(kernel):
    """Value, gradient and first variation at λ = −0.8 are exactly −1 times those at
    λ = +0.8 (the same sums, scaled by a negated factor: bit for bit), on one set of
    particles (tiled sums) and on replicas (row chunks)."""
    omega = _particles()
    replicas = torch.stack([_particles(seed=s) for s in range(3)])
    attract, repel = PairInteraction(kernel, -0.8), PairInteraction(kernel, 0.8)
    for x in (omega, replicas):
        assert torch.equal(attract.value(x), -repel.value(x))
        assert torch.equal(attract.grad(x), -repel.grad(x))
    w = torch.full((30,), 1 / 30, dtype=torch.float64)
    at = _particles(7, seed=5)
    assert torch.equal(attract.first_variation(at, omega, w), -repel.first_variation(at, omega, w))


@pytest.mark.parametrize("kernel", ATTRACTIVE_KERNELS, ids=repr)
def test_attractive_term_passes_the_term_contract(kernel):
    """:func:`meanfield.testing.check_term` (gradient = autograd, first variation =
    derivative of the energy, permutation invariance, dtypes) on the attractive term."""
    check_term(PairInteraction(kernel, lam=-0.8), dim=2)


def test_attractive_log_pulls_two_particles_together():
    """Two particles 2 apart, k = −½ log(r² + ε²), λ = −1: H_N = (λ/4)·2·k(2) and the force
    −∇H pulls them together with magnitude (2|λ|/N²)·r/(r² + ε²)."""
    eps = 0.05
    term = PairInteraction(Riesz(0.0, softening=eps), lam=-1.0)
    omega = torch.tensor([[-1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    k2 = -0.5 * math.log(4 + eps**2)
    assert math.isclose(float(term.value(omega)), -0.5 * k2, rel_tol=1e-14)
    force = -term.grad(omega)
    expected = 2 / 4 * 2 / (4 + eps**2)
    assert np.allclose(force[:, 0].tolist(), [expected, -expected], rtol=1e-14)
    assert float(force[0, 0]) > 0 > float(force[1, 0])  # towards each other


def test_repulsive_pair_kernel_is_unchanged():
    """λ ≥ 0: pair_kernel() gives the term's own kernel object and λ (the repulsive grid
    path is untouched)."""
    kernel = Riesz(0.0)
    for lam in (0.0, 0.5):
        k, lam_out = PairInteraction(kernel, lam).pair_kernel()
        assert k is kernel and lam_out == lam


def test_grid_reads_attraction_as_a_nonnegative_strength_of_the_negated_kernel():
    """λ < 0: the grid gets (−k, |λ|). Its potential 2λ k∗ρ equals −1 times the repulsive
    one (the cell integrals of −k by quadrature against those of k: 1e-12 relative), the
    pair stiffness that bounds the explicit step is positive (it would be negative with
    λ < 0 read as is), and the convexity test calls the attractive term non-convex
    (the repulsive log kernel is positive definite and convex)."""
    domain = Box(2, 3.0)
    grid = Grid(domain, [16, 16])
    kernel = Riesz(0.0, softening=0.05)
    attract = Energy([PairInteraction(kernel, -1.0)], domain)
    repel = Energy([PairInteraction(kernel, 1.0)], domain)
    k, lam = attract.terms[0].pair_kernel()
    assert lam == 1.0 and repr(k) == "-Riesz(s=0.0, softening=0.05)"
    rho = Density.uniform(grid).data
    ga, gr = GridEnergy(attract, grid), GridEnergy(repel, grid)
    pa, pr = ga.potential(rho), gr.potential(rho)
    assert np.allclose(pa, -pr, rtol=1e-12, atol=1e-12 * np.abs(pr).max())
    assert ga.pair_stiffness > 0 and math.isclose(
        ga.pair_stiffness, gr.pair_stiffness, rel_tol=1e-9
    )
    assert flat_convexity(repel, grid) == (True, "")
    convex, reason = flat_convexity(attract, grid)
    assert not convex and "not positive definite" in reason


def test_attractive_term_round_trips_through_the_description():
    """``mf.to_dict`` / ``mf.from_dict`` keep the term's own kernel and λ < 0."""
    term = PairInteraction(Riesz(0.0, softening=0.05), lam=-2.0)
    d = mf.to_dict(term)
    assert d == {
        "type": "PairInteraction",
        "kernel": {"type": "Riesz", "s": 0.0, "softening": 0.05},
        "lam": -2.0,
    }
    back = mf.from_dict(d)
    assert back.lam == -2.0 and mf.to_dict(back) == d


def test_quadratic_kernel_at_negative_lam_pushes_apart():
    """λ < 0 with a nonsingular kernel of the other sign: the quadratic k = |z|²/2 at
    λ = −1/2 is a repulsive harmonic interaction. Two particles at ±1 (N = 2):
    −N∇_i H = −(2λ/N) Σ_j (ω_i − ω_j) = ±1, away from the partner."""
    term = PairInteraction(Quadratic(), lam=-0.5)
    omega = torch.tensor([[-1.0], [1.0]], dtype=torch.float64)
    drift = -2 * term.grad(omega)  # −N∇H
    assert drift.ravel().tolist() == [-1.0, 1.0]


def test_the_beta_infinity_minimiser_of_an_attractive_energy_is_refused_by_name():
    # with λ < 0 the quadratic programme of equilibrium_measure is not convex, and the
    # Keller–Segel minimiser concentrates below the cell: refused before any work
    from meanfield.domains import Box
    from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    from meanfield.errors import InputError
    from meanfield.kernels import Riesz
    from meanfield.pde import Grid, equilibrium_measure

    g = Grid(Box(2, 4.0), 16)
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0, softening=0.05), -1.0)], g.domain)
    with pytest.raises(InputError, match=r"lam >= 0.*lam=-1"):
        equilibrium_measure(E, g)
