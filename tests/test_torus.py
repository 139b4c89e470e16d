"""The periodic domain (Torus) in the three views: particles (wrap, minimum-image pair sums,
HMC's free flight), grid (periodic faces, circular FFT convolution) and transport (exact W on
the circle, the network simplex on the torus)."""

from __future__ import annotations

import math

import numpy as np
import ot
import pytest
import torch

from meanfield.domains import Box, Torus, billiard
from meanfield.dynamics.description import from_dict, to_dict
from meanfield.energy import Energy, PairInteraction, PeriodicPairInteraction
from meanfield.errors import InputError, InputTypeError, SizeLimitError
from meanfield.kernels import Cosine, Gaussian
from meanfield.ot.circle import MAX_TORUS_PAIRS, wasserstein_circle, wasserstein_torus
from meanfield.pde import Density, Grid, McKeanVlasov
from meanfield.pde.convolution import FFTConvolution
from meanfield.testing import check_kernel


def test_torus_wraps_and_refuses_bad_sizes():
    T = Torus(2, 1.5)
    x = torch.tensor([[1.5, -1.5], [4.0, -3.1], [-1.5000001, 0.0]], dtype=torch.float64)
    w = T.project(x)
    assert bool(T.contains(w).all())
    # the wrap moves each coordinate by a whole number of periods
    k = (x - w) / T.period
    assert torch.allclose(k, k.round(), atol=1e-12)
    assert T.volume == 9.0 and T.bounding_box == (-1.5, 1.5)
    with pytest.raises(InputError, match="half_width"):
        Torus(1, 0.0)
    with pytest.raises(InputError, match="dim"):
        Torus(0, 1.0)


def test_cosine_kernel_contract():
    check_kernel(Cosine(), bad_parameters=({"frequency": 0.0}, {"frequency": -1.0}))
    check_kernel(Cosine(2.5))


def _periodic_energy_brute(omega, kernel, lam, L, images=2):
    """(λ/N²) Σ_{i≠j} k over the minimum image, by trying every image shift explicitly."""
    N, p = omega.shape
    total = 0.0
    for i in range(N):
        for j in range(N):
            if i == j:
                continue
            best = None
            for shift in np.ndindex(*(2 * images + 1,) * p):
                z = omega[i] - omega[j] + 2 * L * (np.array(shift) - images)
                if np.all(z >= -L) and np.all(z < L):
                    best = z
            total += float(kernel(torch.tensor(best[None, :]))[0])
    return lam * total / N**2


@pytest.mark.parametrize("p", [1, 2])
def test_minimum_image_pair_sums_match_brute_force_and_autograd(p):
    T = Torus(p, 1.0)
    kernel = Gaussian(0.2)  # not periodic: the minimum image is the definition tested here
    term = PeriodicPairInteraction(kernel, lam=0.7, domain=T)
    omega = T.project(
        torch.rand(7, p, generator=torch.Generator().manual_seed(p), dtype=torch.float64) * 2 - 1
    )
    value = float(term.value(omega))
    assert math.isclose(
        value, _periodic_energy_brute(omega.numpy(), kernel, 0.7, 1.0), rel_tol=1e-12
    )
    x = omega.clone().requires_grad_(True)
    auto = torch.autograd.grad(term.value(x), x)[0]
    assert torch.allclose(term.grad(omega), auto, rtol=1e-10, atol=1e-14)
    # replicas and float32 give the same sums
    both = torch.stack([omega, omega.flip(0)])
    assert torch.allclose(term.value(both), torch.full((2,), value, dtype=torch.float64))
    # the first variation is the derivative of E along a point mass (2λ k∗μ)
    fv = term.first_variation(omega[:1], omega[1:], torch.full((6,), 1 / 6, dtype=torch.float64))
    direct = (
        2
        * 0.7
        * sum(float(kernel(T.minimum_image(omega[:1] - omega[j : j + 1]))[0]) for j in range(1, 7))
        / 6
    )
    assert math.isclose(float(fv[0]), direct, rel_tol=1e-12)


def test_cosine_is_exactly_periodic_on_the_circle():
    """On the circle the min-image cosine sum equals the closed form −λ/N² Σ cos(θ_i − θ_j)
    computed without any wrap (cos is 2π-periodic), so no approximation is made."""
    T = Torus(1)
    theta = (
        torch.rand(50, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        * 2
        * math.pi
        - math.pi
    )
    term = PeriodicPairInteraction(Cosine(), lam=1.3, domain=T)
    d = theta - theta.T
    exact = -1.3 * (torch.cos(d).sum() - 50) / 50**2
    assert math.isclose(float(term.value(theta)), float(exact), rel_tol=1e-13)
    grad_exact = 2 * 1.3 / 50**2 * torch.sin(d).sum(1, keepdim=True)
    assert torch.allclose(term.grad(theta), grad_exact, atol=1e-15)


def test_box_pair_term_on_a_torus_is_refused_by_the_integrator():
    import meanfield as mf

    T = Torus(1)
    E = Energy([PairInteraction(Cosine(), lam=1.0)], T)
    with pytest.raises(InputError, match="PeriodicPairInteraction"):
        mf.simulate(E, np.zeros((4, 1)), eta=0.01, beta=1.0, n_steps=2)
    with pytest.raises(InputTypeError, match="Torus"):
        PeriodicPairInteraction(Cosine(), domain=Box(1))
    with pytest.raises(InputError, match="dimension"):
        Energy([PeriodicPairInteraction(Cosine(), domain=Torus(2))], Torus(1))


def test_langevin_wraps_positions_and_hmc_flies_around():
    import meanfield as mf

    T = Torus(1)
    E = Energy([PeriodicPairInteraction(Cosine(), lam=0.5, domain=T)], T)
    ds = mf.simulate(E, np.full((20, 1), 3.1), eta=0.05, beta=0.5, n_steps=50, seed=0)
    om = ds["omega"].values
    assert om.min() >= -math.pi and om.max() < math.pi
    # free flight on the circle: from 3.0 at speed 1 for time 0.5 comes back at 3.5 − 2π
    q, v = billiard(
        T,
        torch.tensor([[3.0]], dtype=torch.float64),
        torch.tensor([[1.0]], dtype=torch.float64),
        0.5,
    )
    assert math.isclose(float(q), 3.5 - 2 * math.pi, rel_tol=1e-15) and float(v) == 1.0


def test_description_round_trip_of_the_torus_energy():
    T = Torus(2, 1.25)
    E = Energy([PeriodicPairInteraction(Cosine(2.0), lam=0.25, domain=T)], T)
    d = to_dict(E)
    assert d["domain"] == {"type": "Torus", "dim": 2, "half_width": 1.25}
    assert to_dict(from_dict(d)) == d


# --- grid ---------------------------------------------------------------------------------


@pytest.mark.parametrize("p,n", [(1, 12), (2, 8)])
def test_circular_convolution_equals_the_direct_periodic_sum(p, n):
    g = Grid(Torus(p, 1.0), n)
    conv = FFTConvolution(Gaussian(0.3), g)
    rho = np.random.default_rng(p).random(g.shape)
    assert np.allclose(conv(rho), conv.direct(rho), rtol=1e-12, atol=1e-14)


def test_cosine_convolution_on_the_circle_is_exact():
    """Cell integrals of −cos on the periodic lattice: (W ∗ ρ)_i = ∫ −cos(x_i − y) ρ(y) dy
    exactly for ρ piecewise constant; for ρ = cos, that is −(sin(h/2)/(h/2)) · π cos x_i."""
    n = 16
    g = Grid(Torus(1), n)
    h = g.h[0]
    x = g.axes[0]
    # the cell average of cos over each cell is sinc(h/2) cos x_i; then ∫ −cos(x − y) cos y dy
    # over cells with that average is −π sinc(h/2)² cos x (the first Fourier mode, twice)
    s = math.sin(h / 2) / (h / 2)
    out = FFTConvolution(Cosine(), g)(s * np.cos(x))
    assert np.allclose(out, -math.pi * s * s * np.cos(x), atol=1e-13)


@pytest.mark.parametrize("scheme", ["upwind", "sg"])
@pytest.mark.parametrize("p,n", [(1, 32), (2, 10)])
def test_periodic_schemes_conserve_mass_and_decrease_free_energy(scheme, p, n):
    T = Torus(p, 2.0)
    E = Energy([PeriodicPairInteraction(Gaussian(0.5), lam=0.5, domain=T)], T)
    g = Grid(T, n)
    eq = McKeanVlasov(E, g, beta=2.0, scheme=scheme)
    # a bump centred on the seam at ±2: mass must cross it
    rho = Density.from_function(
        g,
        lambda x: np.exp(
            -np.sum(np.minimum(np.abs(x - 2.0), 4 - np.abs(x - 2.0)) ** 2, axis=1) / 0.3
        ),
    )
    F = [eq.free_energy(rho)]
    state = rho
    for _ in range(8):
        state = eq.solve(state, 0.01).state
        F.append(eq.free_energy(state))
        assert abs(state.mass - 1.0) < 1e-12
        assert state.data.min() >= 0
    assert all(b <= a + 1e-13 for a, b in zip(F[:-1], F[1:], strict=True))
    assert F[-1] < F[0]
    # the bump sits on the seam ±2, symmetric about it on the torus, so its circular mean
    # stays there (walls at ±2 would split it in two): flux crosses the seam as any face
    for a in range(p):
        x = g.mesh[a] if p > 1 else g.axes[0]
        angle = np.angle(np.sum(state.data * np.exp(1j * np.pi * x / 2)))
        assert abs(abs(angle) - np.pi) < 1e-12


@pytest.mark.parametrize("scheme", ["sg-implicit", "sg-mprk22"])
def test_implicit_schemes_refuse_a_periodic_grid(scheme):
    T = Torus(1)
    E = Energy([PeriodicPairInteraction(Cosine(), lam=1.0, domain=T)], T)
    with pytest.raises(InputError, match="periodic"):
        McKeanVlasov(E, Grid(T, 16), beta=1.0, scheme=scheme)


# --- transport ----------------------------------------------------------------------------


def _circle_emd(x, y, a, b, P, order):
    d = np.abs(np.mod(x, P)[:, None] - np.mod(y, P)[None, :])
    d = np.minimum(d, P - d)
    return ot.emd2(a, b, d**order) ** (1 / order)


@pytest.mark.parametrize("order", [1, 2])
def test_circle_distances_match_pot_and_the_network_simplex(order):
    rng = np.random.default_rng(order)
    T = Torus(1)
    for _ in range(10):
        n, m = rng.integers(2, 40, 2)
        x, y = rng.uniform(-math.pi, math.pi, n), rng.uniform(-math.pi, math.pi, m)
        a, b = rng.random(n), rng.random(m)
        a, b = a / a.sum(), b / b.sum()
        mine = wasserstein_circle(x, y, a, b, domain=T, order=order)
        # the assignment on the full cost matrix: exact (round-off)
        assert math.isclose(mine, _circle_emd(x, y, a, b, 2 * math.pi, order), rel_tol=1e-10)
        # POT's circle solver, on [0, 1): W₁ exact, W₂² by a binary search to eps = 1e-6
        u, v = (x + math.pi) / (2 * math.pi), (y + math.pi) / (2 * math.pi)
        ref = float(np.ravel(ot.wasserstein_circle(u, v, a, b, p=order))[0])
        ref = 2 * math.pi * (ref if order == 1 else math.sqrt(ref))
        assert math.isclose(mine, ref, rel_tol=1e-5 if order == 2 else 1e-12)


def test_torus_distance_by_minimum_image_and_refusal():
    T = Torus(2, 1.0)
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, (6, 2)), rng.uniform(-1, 1, (6, 2))
    # with n = m and uniform weights the optimum is a permutation: brute force over all 720
    import itertools

    z = T.minimum_image(x[:, None, :] - y[None, :, :])
    c = (z**2).sum(-1)
    best = min(sum(c[i, s[i]] for i in range(6)) for s in itertools.permutations(range(6))) / 6
    assert math.isclose(wasserstein_torus(x, y, domain=T), math.sqrt(best), rel_tol=1e-12)
    big = int(math.isqrt(MAX_TORUS_PAIRS)) + 1
    with pytest.raises(SizeLimitError, match="MAX_TORUS_PAIRS"):
        wasserstein_torus(np.zeros((big, 2)), np.zeros((big, 2)), domain=T)
    with pytest.raises(InputTypeError, match="Torus"):
        wasserstein_circle([0.0], [1.0], domain=Box(1))


def test_hmc_on_a_torus_refuses_pair_terms_without_minimum_images():
    # a plain PairInteraction on a torus would read free-space differences across the seam:
    # HMC refuses it by name, as the Langevin and MALA chains do
    from meanfield.dynamics.hmc import HMC
    from meanfield.energy import Energy, PairInteraction
    from meanfield.errors import InputError

    torus = Torus(1)
    with pytest.raises(InputError):
        HMC(Energy([PairInteraction(Cosine(), lam=0.5)], torus), beta=1.0, step_size=0.1)
    HMC(
        Energy([PeriodicPairInteraction(Cosine(), lam=0.5, domain=torus)], torus),
        beta=1.0,
        step_size=0.1,
    )


def test_compare_on_a_torus_measures_the_geodesic_distance():
    # particles and grid on the circle: the distances recorded are the circle's own (the
    # quantile coupling minimised over the shift), not the free-space W between the two
    # unrolled measures; a sliced distance is refused there
    import dataclasses
    from pathlib import Path

    from meanfield.dynamics.spec import RunSpec
    from meanfield.errors import InputError
    from meanfield.ot.circle import wasserstein_circle
    from meanfield.pde import Density
    from meanfield.workbench.compare import compare

    spec = RunSpec.from_toml(Path(__file__).parents[1] / "paper_repro/gallery/kuramoto.toml")
    spec = dataclasses.replace(spec, n_steps=40, n_particles=60)
    ds = compare(spec, n_records=2, seed=0)
    assert ds.attrs["w_method"] == "exact"
    rho = Density(spec.grid, ds["rho"].values[-1])
    x = ds["omega"].values[-1]
    b = rho.masses.ravel()
    for order, name in ((2, "w2"), (1, "w1")):
        want = wasserstein_circle(x, spec.grid.centers, None, b, domain=Torus(1), order=order)
        assert ds[name].values[-1] == want
    with pytest.raises(InputError, match="sliced"):
        compare(spec, n_records=2, w_method="sliced")


def test_the_same_point_written_at_both_ends_of_the_circle_is_silent():
    # π and −π are one point of the circle of half-width π: W = 0 exactly, which the rounding
    # check took for an unresolved distance (a PrecisionWarning); a distance truly below the
    # rounding bound still warns
    import warnings

    from meanfield.errors import PrecisionWarning
    from meanfield.ot.circle import wasserstein_circle

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wasserstein_circle([math.pi], [-math.pi], domain=Torus(1)) == 0.0
    with pytest.warns(PrecisionWarning):
        wasserstein_circle([1.0], [1.0 + 1e-13], domain=Torus(1, 1e3))


def test_the_torus_distance_at_extreme_periods():
    # one point moved by a quarter period: W = that move, whatever the unit (the squared
    # differences underflowed to W = 0 at period 2e-200 and overflowed to inf at 2e200)
    from meanfield.ot.circle import wasserstein_torus

    for half in (1e-200, 1.0, 1e200):
        got = wasserstein_torus([[0.0, 0.0]], [[half / 2, 0.0]], domain=Torus(2, half))
        assert got == pytest.approx(half / 2, rel=1e-15)
