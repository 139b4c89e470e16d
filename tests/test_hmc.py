"""HMC with reflection (meanfield.dynamics.hmc) against exact Gibbs laws, and its building blocks.

Statistical tests use fixed seeds, so each is deterministic; the stated level (or the number of
standard errors) is the chance that a correct sampler would fail with a fresh seed.
"""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from meanfield.domains import Ball, Box, billiard
from meanfield.dynamics.adaptation import DualAveraging
from meanfield.dynamics.hmc import effective_sample_size, integrated_autocorr_time
from meanfield.dynamics.langevin import HMC, gibbs_potential, sample_hmc, simulate
from meanfield.energy import (
    CallablePotential,
    DoubleWellPotential,
    Energy,
    LinearAlignment,
    PairInteraction,
    QuadraticPotential,
)
from meanfield.errors import InputError, InputTypeError
from meanfield.kernels import Quadratic, Riesz
from meanfield.studies.large_deviations import TiltPotential, statistic, tail_probability

KS_LEVEL = 1e-3


# ---------------------------------------------------------------------------------------
# exact Gibbs laws (the cases MALA is tested on, same truths)
# ---------------------------------------------------------------------------------------
def test_hmc_one_particle_double_well_matches_quadrature():
    """4000 independent one-particle chains vs exp(−βV)/Z by quadrature (KS)."""
    beta, R = 2.0, 3.0
    E = Energy([DoubleWellPotential()], Box(1, R))
    gen = torch.Generator().manual_seed(0)
    om0 = (torch.rand(4000, 1, 1, generator=gen, dtype=torch.float64) * 2 - 1) * 2
    ds = sample_hmc(E, om0, beta=beta, n_samples=60, n_warmup=60, seed=3, record_every=60)
    x = ds["omega"].isel(time=-1).values.ravel()
    V = lambda t: t**4 / 4 - t**2 / 2  # noqa: E731
    Z = integrate.quad(lambda t: np.exp(-beta * V(t)), -R, R)[0]
    cdf = np.vectorize(lambda t: integrate.quad(lambda s: np.exp(-beta * V(s)), -R, t)[0] / Z)
    assert stats.kstest(x, cdf).pvalue > KS_LEVEL


def test_hmc_two_interacting_log_gas_particles_match_exact_law():
    """N = 2 log gas, Coulomb-gas regime, β = 1, V = ω²/2, λ = 1/2: density
    ∝ |ω1 − ω2| exp(−(ω1² + ω2²)), so u = (ω1 + ω2)/√2 ~ N(0, 1/2) and v² ~ Exp(1) with
    v = (ω1 − ω2)/√2 (the MALA test's truths): two KS tests on 3000 independent chains."""
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 4.0))
    gen = torch.Generator().manual_seed(1)
    om0 = torch.tensor([-0.6, 0.6], dtype=torch.float64)[None, :, None]
    om0 = om0 + 0.1 * torch.randn(3000, 2, 1, generator=gen, dtype=torch.float64)
    ds = sample_hmc(
        E, om0, beta=1.0, regime="coulomb-gas", n_samples=60, n_warmup=60, seed=4, record_every=60
    )
    x = ds["omega"].isel(time=-1).values[..., 0]
    u = (x[:, 0] + x[:, 1]) / math.sqrt(2)
    v2 = (x[:, 0] - x[:, 1]) ** 2 / 2
    assert stats.kstest(v2, stats.expon().cdf).pvalue > KS_LEVEL
    assert stats.kstest(u, stats.norm(scale=math.sqrt(0.5)).cdf).pvalue > KS_LEVEL


def test_hmc_reflection_box_truncated_gaussian():
    """V = (ω − 2)²/2 on [−1, 1]: the law is N(2, 1) truncated to [−1, 1], its mass piled at the
    wall ω = 1, so most trajectories reflect.  KS against scipy's truncated normal."""
    E = Energy([QuadraticPotential(1.0, center=2.0)], Box(1, 1.0))
    om0 = torch.zeros(3000, 1, 1, dtype=torch.float64)
    ds = sample_hmc(E, om0, beta=1.0, n_samples=40, n_warmup=40, seed=5, record_every=40)
    x = ds["omega"].isel(time=-1).values.ravel()
    assert np.abs(x).max() <= 1.0
    assert stats.kstest(x, stats.truncnorm(-3.0, -1.0, loc=2.0).cdf).pvalue > KS_LEVEL


def test_hmc_reflection_ball_outward_potential():
    """V = −|ω|² in the unit disk, β = 1: density ∝ exp(|ω|²), pushed onto the circle.
    u = |ω|² has density ∝ e^u on [0, 1] (CDF (e^u − 1)/(e − 1)) and the angle is uniform."""
    E = Energy([TiltPotential(statistic("second_moment"), 1.0)], Ball(2, 1.0))
    gen = torch.Generator().manual_seed(6)
    om0 = 0.3 * torch.randn(3000, 1, 2, generator=gen, dtype=torch.float64)
    ds = sample_hmc(E, om0, beta=1.0, n_samples=40, n_warmup=40, seed=6, record_every=40)
    w = ds["omega"].isel(time=-1).values[:, 0, :]
    u = (w**2).sum(-1)
    assert u.max() <= 1.0 + 1e-12
    assert stats.kstest(u, lambda t: np.expm1(np.clip(t, 0, 1)) / math.expm1(1.0)).pvalue > (
        KS_LEVEL
    )
    angle = np.arctan2(w[:, 1], w[:, 0])
    assert stats.kstest(angle, stats.uniform(-math.pi, 2 * math.pi).cdf).pvalue > KS_LEVEL


def test_hmc_quadratic_interaction_variance_both_regimes():
    """V = κω²/2, k = |z|²/2 (the MALA test's closed form): one particle's stationary variance
    is [1/(Nκ) + (1 − 1/N)/(κ + 2λ)]/β_N with β_N = β or βN.  Pooled over 200 chains × 40
    records after warm-up; within 5 standard errors (replica means are independent)."""
    N, kappa, lam, beta = 8, 1.0, 1.5, 2.0
    E = Energy([QuadraticPotential(kappa), PairInteraction(Quadratic(), lam)], Box(1, 12.0))
    om0 = torch.zeros(200, N, 1, dtype=torch.float64)
    for regime, beta_N in (("mean-field", beta), ("coulomb-gas", beta * N)):
        want = (1 / (N * kappa) + (1 - 1 / N) / (kappa + 2 * lam)) / beta_N
        ds = sample_hmc(
            E, om0, beta=beta, regime=regime, n_samples=80, n_warmup=40, record_every=2, seed=7
        )
        per_rep = (ds["omega"].values[1:, ..., 0] ** 2).mean(axis=(0, 2))
        var, se = per_rep.mean(), per_rep.std(ddof=1) / math.sqrt(len(per_rep))
        assert abs(var - want) < 5 * se, (regime, var, want, se)
        assert ds.attrs["beta_N"] == beta_N


# ---------------------------------------------------------------------------------------
# the integrator: reversibility, volume, acceptance identity
# ---------------------------------------------------------------------------------------
def _interacting_energy(domain):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(15, domain.dim))
    y = np.sign(X[:, 0])
    terms = [
        QuadraticPotential(0.5),
        LinearAlignment(X, y, "softplus"),
        PairInteraction(Riesz(0.0, 0.05), 0.5),
    ]
    return Energy(terms, domain)


@pytest.mark.parametrize("domain", [Box(2, 0.5), Ball(2, 0.5), Ball(3, 0.5)])
def test_leapfrog_with_reflection_is_reversible(domain):
    """Φ(Φ(Ω, v) with v negated) = (Ω, −v) to 1e-12, for a trajectory with many wall hits."""
    E = _interacting_energy(domain)
    hmc = HMC(E, beta=1.0, step_size=0.05, trajectory_length=1.0)
    gen = torch.Generator().manual_seed(8)
    # start strictly inside: on the wall itself the flight's direction is ambiguous (a set of
    # measure zero that the chain leaves at once)
    inner = type(domain)(domain.dim, 0.45)
    om = inner.project(0.4 * torch.randn(3, 4, domain.dim, generator=gen, dtype=torch.float64))
    v = 3.0 * torch.randn(om.shape, generator=gen, dtype=torch.float64)  # ≈ 6 walls per unit t
    beta_N = 1.0
    _, g0 = gibbs_potential(E, om, beta_N)
    om1, v1, _, g1, ok = hmc.flow(om, v, 0.05, 20, g0, beta_N)
    assert bool(ok.all())
    assert bool(domain.contains(om1, atol=1e-12).all())
    moved = (om1 - om).abs().max()
    assert moved > 0.1  # the test is not vacuous
    # straight flight would have left the domain: reflections really happened
    assert not bool(domain.contains(om + v, atol=0).all())
    om2, v2, _, _, _ = hmc.flow(om1, -v1, 0.05, 20, g1, beta_N)
    assert torch.allclose(om2, om, atol=1e-12, rtol=0)
    assert torch.allclose(v2, -v, atol=1e-12, rtol=0)


@pytest.mark.parametrize("domain", [Box(2, 0.5), Ball(2, 0.5)])
def test_leapfrog_with_reflection_preserves_volume(domain):
    """det ∂Φ/∂(Ω, v) = 1 by central differences (h = 1e-6: truncation ~h² and rounding
    ~1e-16/h, so the determinant is good to ~1e-8; tolerance 1e-6)."""
    E = _interacting_energy(domain)
    hmc = HMC(E, beta=1.0)
    gen = torch.Generator().manual_seed(9)
    inner = type(domain)(domain.dim, 0.45)  # strictly inside, as above
    om = inner.project(0.4 * torch.randn(2, domain.dim, generator=gen, dtype=torch.float64))
    v = 2.0 * torch.randn(om.shape, generator=gen, dtype=torch.float64)

    def phi(z):
        o, w = z[: om.numel()].reshape(om.shape), z[om.numel() :].reshape(om.shape)
        _, g = gibbs_potential(E, o, 1.0)
        o1, w1, *_ = hmc.flow(o, w, 0.1, 8, g, 1.0)
        return torch.cat([o1.ravel(), w1.ravel()])

    z0 = torch.cat([om.ravel(), v.ravel()])
    h, d = 1e-6, z0.numel()
    J = torch.stack([(phi(z0 + h * e) - phi(z0 - h * e)) / (2 * h) for e in torch.eye(d)], 1)
    o_straight = om + 0.8 * v
    assert not bool(domain.contains(o_straight).all())  # at least one wall hit
    assert abs(float(torch.linalg.det(J)) - 1) < 1e-6


def test_acceptance_identity_with_reflection():
    """From exact draws of π (iid truncated normals N(2, 1) on [−1, 1], N = 5, mean-field β = 1)
    and fresh velocities, a reversible volume-preserving Φ gives E[exp(−ΔĤ)] = 1 exactly
    (Jarzynski-type identity).  20 000 draws; within 5 standard errors (SE from the draws)."""
    E = Energy([QuadraticPotential(1.0, center=2.0)], Box(1, 1.0))
    x = stats.truncnorm(-3.0, -1.0, loc=2.0).rvs(size=(20000, 5, 1), random_state=10)
    om = torch.as_tensor(x)
    gen = torch.Generator().manual_seed(10)
    v = torch.randn(om.shape, generator=gen, dtype=torch.float64)
    hmc = HMC(E, beta=1.0)
    U0, g0 = gibbs_potential(E, om, 1.0)
    _, v1, U1, _, ok = hmc.flow(om, v, 0.6, 4, g0, 1.0)
    dH = (U1 - U0) + 0.5 * ((v1**2).sum((-1, -2)) - (v**2).sum((-1, -2)))
    w = torch.exp(-dH).numpy()
    se = w.std(ddof=1) / math.sqrt(len(w))
    assert bool(ok.all())
    assert dH.abs().mean() > 0.1  # a real energy error, so the identity is not trivial
    assert abs(w.mean() - 1) < 5 * se, (w.mean(), se)


def test_billiard_box_folds_many_walls():
    """Flight over several box widths: the folded position equals the reflected path."""
    om = torch.tensor([[0.2]], dtype=torch.float64)
    v = torch.tensor([[1.0]], dtype=torch.float64)
    # from 0.2 at speed 1 for t = 3.1 on [−0.5, 0.5]: walls at t = 0.3, 1.3, 2.3 → at t = 3.1,
    # moving left after 3 reflections from x = 0.5 at t = 2.3: x = 0.5 − 0.8 = −0.3, v = −1
    o, w = billiard(Box(1, 0.5), om, v, 3.1)
    assert float(o) == pytest.approx(-0.3, abs=1e-14) and float(w) == -1.0


def test_billiard_ball_specular_reflection():
    """A chord that hits the unit circle at (1, 0) moving along (1, 1)/√2 at t = 1: the
    reflected velocity is (−1, 1)/√2 (mirrored about the normal (1, 0))."""
    om = torch.tensor([[1 - 1 / math.sqrt(2), -1 / math.sqrt(2)]], dtype=torch.float64)
    v = torch.tensor([[1.0, 1.0]], dtype=torch.float64) / math.sqrt(2)
    o, w = billiard(Ball(2, 1.0), om, v, 1.0)  # hits (1, 0) at t = 1
    assert torch.allclose(o, torch.tensor([[1.0, 0.0]], dtype=torch.float64), atol=1e-12)
    o, w = billiard(Ball(2, 1.0), om, v, 1.5)
    assert torch.allclose(w, torch.tensor([[-1.0, 1.0]], dtype=torch.float64) / math.sqrt(2))
    assert torch.allclose(o, torch.tensor([[1.0, 0.0]]) + 0.5 * w, atol=1e-12)


# ---------------------------------------------------------------------------------------
# adaptation
# ---------------------------------------------------------------------------------------
def test_dual_averaging_converges_on_a_known_curve():
    """Noise-free feedback α(ε) = exp(−ε): the fixed point is ε* = −log δ.  The iterate is
    shrunk towards μ = log(10 ε₀) by H̄_m = γ(μ − log ε_m)/√m, so ε̄ converges like m^(−1/2):
    within 3 % after 2000 updates, the error halving (±10 %) from m = 500 to 2000."""
    for target in (0.6, 0.8, 0.9):
        da = DualAveraging(1.0, target)
        eps, errors = da.step_size, {}
        for m in range(1, 2001):
            eps = da.update(math.exp(-eps))
            errors[m] = abs(da.final_step_size / -math.log(target) - 1)
        assert errors[2000] < 0.03
        assert errors[2000] / errors[500] == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize("target", [0.65, 0.9])
def test_warmup_reaches_the_target_acceptance(target):
    """Log gas N = 16 (Coulomb-gas regime, β = 2): after 150 warm-up trajectories the frozen step
    gives a mean acceptance within 0.06 of the target over 32 chains × 100 trajectories (the SE
    of that mean is ≈ 0.01; the rest of the band is the adaptation's own error at 150 steps)."""
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 4.0))
    om0 = torch.linspace(-1, 1, 16, dtype=torch.float64)[None, :, None].repeat(32, 1, 1)
    ds = sample_hmc(
        E,
        om0,
        beta=2.0,
        regime="coulomb-gas",
        n_samples=100,
        n_warmup=150,
        target_accept=target,
        trajectory_length=0.5,
        seed=11,
        record_every=100,
    )
    acc = float(ds["acceptance_rate"].isel(time=-1).mean())
    assert abs(acc - target) < 0.06, (acc, ds.attrs["step_size"])
    assert ds.attrs["step_size"] > 0 and ds.attrs["n_leapfrog"] >= 1


# ---------------------------------------------------------------------------------------
# output, reproducibility, errors
# ---------------------------------------------------------------------------------------
def _small(seed, **kw):
    E = _interacting_energy(Ball(2, 1.0))
    om0 = np.random.default_rng(0).normal(scale=0.5, size=(3, 6, 2))
    args = {"beta": 2.0, "n_samples": 6, "n_warmup": 5, "record_every": 2, "seed": seed, **kw}
    return sample_hmc(E, om0, **args)


def test_hmc_dataset_layout_provenance_and_reproducibility():
    a, b, c = _small(1), _small(1), _small(2)
    assert np.array_equal(a["omega"].values, b["omega"].values)
    assert not np.array_equal(a["omega"].values, c["omega"].values)
    assert a["omega"].dims == ("time", "replica", "particle", "dim")
    assert list(a["step"].values) == [5, 7, 9, 11]  # numbered from the start of the warm-up
    ref = simulate(
        _interacting_energy(Ball(2, 1.0)),
        np.zeros((3, 6, 2)),
        method="mala",
        eta=0.01,
        beta=2.0,
        n_steps=2,
        record_every=1,
    )
    assert set(ref.data_vars) == set(a.data_vars)  # one layout for every sampler
    for k in (
        "seed",
        "meanfield_version",
        "step_size",
        "n_leapfrog",
        "trajectory_length",
        "n_warmup",
        "target_accept",
        "regime",
        "beta_N",
        "n_divergent",
    ):
        assert k in a.attrs, k
    assert a.attrs["method"] == "hmc" and a.attrs["seed"] == 1
    L, eps = a.attrs["n_leapfrog"], a.attrs["step_size"]
    assert float(a["time"][0]) == pytest.approx(5 * L * eps)


def test_fixed_step_without_warmup_is_used_as_given():
    ds = _small(0, n_warmup=0, step_size=0.05, trajectory_length=0.3)
    assert ds.attrs["step_size"] == 0.05 and ds.attrs["n_leapfrog"] == 6


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"beta": 0.0}, "beta"),
        ({"n_samples": 0}, "n_samples"),
        ({"n_warmup": -1}, "n_warmup"),
        ({"n_warmup": 0}, "step_size"),
        ({"step_size": -0.1}, "step_size"),
        ({"trajectory_length": 0.0}, "trajectory_length"),
        ({"target_accept": 1.0}, "target_accept"),
        ({"jitter": 1.0}, "jitter"),
        ({"regime": "hot"}, "regime"),
        ({"max_leapfrog": 0}, "max_leapfrog"),
        ({"record_every": 0}, "record_every"),
    ],
)
def test_bad_arguments_raise_before_work(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        _small(0, **kw)


def test_divergent_trajectories_are_rejected_not_nan():
    """Double well far out (ω = 1e70 in a huge box): the first kick gives velocities ~ 1e210,
    whose kinetic energy overflows to inf.  Every such trajectory must be
    rejected and counted as divergent, and every recorded value stay finite."""
    E = Energy([DoubleWellPotential()], Box(1, 1e300))
    om0 = torch.full((4, 2, 1), 1e70, dtype=torch.float64)
    ds = sample_hmc(
        E, om0, beta=1.0, n_samples=5, n_warmup=0, step_size=1.0, seed=0, record_every=1
    )
    assert ds.attrs["n_divergent"] == 4 * 5
    assert float(ds["acceptance_rate"].max()) == 0.0
    assert np.isfinite(ds["energy"].values).all() and np.isfinite(ds["omega"].values).all()


def test_a_fixed_step_that_would_cap_the_trajectory_is_refused():
    """Issue 24: step_size 1e-5 with T = 1 ran L = 1000 steps (length 0.01) while the
    attributes said 1.0; now refused before any work, naming both limits."""
    E = Energy([QuadraticPotential()], Box(1, 2.0))
    with pytest.raises(InputError, match=r"100000 leapfrog steps.*max_leapfrog = 1000"):
        sample_hmc(E, torch.zeros(4, 1), beta=1.0, n_samples=3, n_warmup=0, step_size=1e-5)


def test_an_adapted_step_that_caps_the_trajectory_warns_and_records_the_true_length():
    from meanfield.errors import TrajectoryCappedWarning

    E = Energy([QuadraticPotential()], Box(1, 4.0))
    kw = dict(beta=1.0, n_samples=3, n_warmup=20, seed=0, trajectory_length=50.0)
    with pytest.warns(TrajectoryCappedWarning, match="max_leapfrog = 8"):
        ds = sample_hmc(E, torch.zeros(4, 1), max_leapfrog=8, **kw)
    a = ds.attrs
    assert a["n_leapfrog"] == 8 and a["trajectory_length_requested"] == 50.0
    assert a["trajectory_length"] == pytest.approx(8 * a["step_size"])
    assert a["trajectory_length"] < 50.0
    assert float(ds["time"][-1] - ds["time"][-2]) == pytest.approx(a["trajectory_length"])
    ds = sample_hmc(E, torch.zeros(4, 1), **{**kw, "trajectory_length": 1.0})  # no warning
    L, eps = ds.attrs["n_leapfrog"], ds.attrs["step_size"]
    assert ds.attrs["trajectory_length"] == pytest.approx(L * eps) and 1.0 <= L * eps < 1 + eps


def test_a_chain_that_accepts_nothing_warns():
    """Issue 24: a frozen chain (acceptance 0.000) finished silently."""
    from meanfield.errors import LowAcceptanceWarning

    E = Energy([QuadraticPotential()], Box(1, 1.0))
    om = torch.zeros(2, 6, 1, dtype=torch.float64)
    with pytest.warns(LowAcceptanceWarning, match=r"accepted 0 of 30 proposals.*lower eta"):
        simulate(E, om, eta=100.0, beta=1.0, n_steps=30, method="mala")  # every move leaves
    E = Energy([QuadraticPotential(1e4)], Box(1, 1.0))  # a step 30x too large for ω'' = −1e4ω
    with pytest.warns(LowAcceptanceWarning, match="lower step_size"):
        sample_hmc(E, om + 0.5, beta=1.0, n_samples=30, n_warmup=0, step_size=0.3, jitter=0.0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", LowAcceptanceWarning)
        simulate(E, om, eta=1e-4, beta=1.0, n_steps=30, method="mala")  # a fine step: quiet


def _twin_start(R=None):
    """A Coulomb-gas start in 2D with particle 5 a copy of particle 2: H_N = +inf."""
    g = torch.Generator().manual_seed(0)
    om = torch.rand(*(() if R is None else (R,)), 12, 2, generator=g, dtype=torch.float64)
    om[..., 5, :] = om[..., 2, :]
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(2, 2.0))
    return E, om


@pytest.mark.parametrize("R", [None, 3])
def test_infinite_start_energy_is_refused_before_any_trajectory(R):
    """Issue 24: from H_N = +inf the step search picked ε = 1.3e7, every trajectory was
    rejected and the warm-up drove L to 1000 (97 s) with no warning; now refused at once,
    naming the twin particles (MALA's start-spacing guard names them first)."""
    E, om = _twin_start(R)
    with pytest.raises(InputError, match=r"omega0 must have a finite energy.*particles 2 and 5"):
        sample_hmc(E, om, beta=1.0, n_samples=5, n_warmup=20, seed=0)
    with pytest.raises(InputError, match=r"omega0.* particles 2 and 5 are 0 apart"):
        simulate(E, om, eta=1e-3, beta=1.0, n_steps=5, method="mala")
    om[..., 5, 0] += 1e-3  # separated: runs
    sample_hmc(E, om, beta=1.0, n_samples=2, n_warmup=2, seed=0)


# ---------------------------------------------------------------------------------------
# chain statistics and the large-deviation estimator
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("phi", [0.5, 0.9])
def test_autocorr_time_matches_ar1(phi):
    """AR(1) x_t = φ x_{t−1} + ξ_t started in its stationary law: τ = (1 + φ)/(1 − φ).  8 chains ×
    20 000 draws: the estimator's relative SD is ≈ √(2(2M + 1)/n) with window M ≈ 3τ (Sokal),
    ≤ 0.06 here; tolerance 4 SD = 0.2 relative (0.1 for φ = 0.5)."""
    rng = np.random.default_rng(12)
    n, m = 20000, 8
    x = np.empty((n, m))
    x[0] = rng.normal(size=m) / math.sqrt(1 - phi**2)
    xi = rng.normal(size=(n, m))
    for t in range(1, n):
        x[t] = phi * x[t - 1] + xi[t]
    tau = (1 + phi) / (1 - phi)
    assert integrated_autocorr_time(x) == pytest.approx(tau, rel=0.2 if phi > 0.6 else 0.1)
    assert effective_sample_size(x) == pytest.approx(n * m / tau, rel=0.2)
    # iid draws: τ ≈ 1
    assert integrated_autocorr_time(rng.normal(size=(4000, 4))) == pytest.approx(1.0, abs=0.15)
    with pytest.raises(ValueError, match="n >= 4"):
        integrated_autocorr_time(np.zeros((3, 2)))


def test_tail_probability_with_hmc_matches_exact_gaussian_tail():
    """The LDP estimator with sampler="hmc": V = ω²/2, k = −|z| (λ = 1/2), N = 30, β = 1:
    L_N = mean ω ~ N(0, 1/(βN)) exactly, P(L_N ≥ 1.1) = Φ̄(1.1√30) ≈ 8.6e-10.  Within 4 error
    bars (statistical ⊕ quadrature), as the MALA test."""
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], Box(1, 8.0))
    a, N = 1.1, 30
    r = tail_probability(
        E,
        statistic("mean"),
        a,
        N,
        1.0,
        theta=a,
        n_replicas=32,
        n_steps=90,
        burn_in=30,
        thin=2,
        seed=1,
        sampler="hmc",
    )
    exact = stats.norm.logsf(a * math.sqrt(N))
    err = math.hypot(float(r["log_p_se"]), float(r["log_p_quad_err"]))
    assert abs(float(r["log_p"]) - exact) < 4 * err
    assert err < 0.15
    assert r.attrs["sampler"] == "hmc"


_NEEDS_CXX = pytest.mark.skipif(
    not any(__import__("shutil").which(cc) for cc in ("g++", "c++", "clang++")),
    reason="inductor on the CPU needs a C++ compiler",
)


def _log_gas(n=6):
    """The 1D log gas in the Coulomb-gas regime (the benchmark's target) and a start."""
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 4.0))
    return E, torch.linspace(-1.0, 1.0, n, dtype=torch.float64)[:, None]


@pytest.mark.slow
@_NEEDS_CXX
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")
def test_compiled_chain_is_the_eager_chain():
    # The compiled blocks trace the same functions (_transition, _leapfrog, the energy's
    # terms) and draw the same random numbers in the same order, so with the same seed the
    # chains make the same Metropolis decisions and agree to round-off: ~1e-14 relative per
    # leapfrog step in float64, 1e-11 leaves room for 45 trajectories x 8 steps of it; a wrong
    # step, draw or decision is O(eps) = 0.1.  45 trajectories cross a block boundary
    # (FUSED_BLOCK = 32), and the jitter and the records of every trajectory are exercised.
    E, om = _log_gas()
    om0 = om[None].repeat(2, 1, 1)
    kw = dict(beta=2.0, regime="coulomb-gas", n_samples=45, n_warmup=0, step_size=0.1)
    kw.update(trajectory_length=0.8, seed=3, record_every=1, jitter=0.1)
    eager = sample_hmc(E, om0, **kw)
    compiled = sample_hmc(E, om0, compile=True, **kw)
    assert compiled.attrs["compile"] == 1 and eager.attrs["compile"] == 0
    np.testing.assert_array_equal(compiled["acceptance_rate"], eager["acceptance_rate"])
    for k in ("omega", "energy", "energy_confinement", "energy_interaction"):
        np.testing.assert_allclose(compiled[k], eager[k], rtol=0, atol=1e-11, err_msg=k)
    rates = eager["acceptance_rate"].values[1:]
    assert 0.2 < rates.mean() < 1.0  # decisions of both kinds: a real comparison
    assert float(np.abs(eager["omega"][-1] - eager["omega"][0]).max()) > 0.05


@pytest.mark.slow
@_NEEDS_CXX
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")
def test_compiled_advance_matches_eager_positions_forces_and_energies():
    """HMC.advance compiled against eager from the same state and seed (the same compiled
    shapes as the test above): every trajectory's positions and term values, and the final
    U and ∇U, agree to 1e-11 (round-off, as above); the cached ∇U and term values are those
    of gibbs_potential at the final positions (1e-12 relative)."""
    E, om = _log_gas()
    om0 = om[None].repeat(2, 1, 1)
    runs = {}
    for compile in (False, True):
        hmc = HMC(E, 2.0, 0.1, 0.8, "coulomb-gas", jitter=0.1, compile=compile)
        state = hmc.init(om0, seed=11)
        runs[compile] = hmc.advance(state, 40)
    (s_e, r_e), (s_c, r_c) = runs[False], runs[True]
    assert s_c.step == s_e.step == 40 and s_c.proposed == 40
    assert torch.equal(s_c.accepted, s_e.accepted) and 0 < float(s_e.accepted.min()) < 40
    for k in ("omega", "term_values", "accepted"):
        torch.testing.assert_close(r_c[k], r_e[k], rtol=0, atol=1e-11, msg=k)
    for k in ("U", "gradU", "accept_prob"):
        torch.testing.assert_close(s_c.cache[k], s_e.cache[k], rtol=0, atol=1e-11, msg=k)
    U, gradU, terms = gibbs_potential(E, s_c.omega, 2.0 * 6, terms=True)
    torch.testing.assert_close(s_c.cache["gradU"], gradU, rtol=1e-12, atol=0)
    torch.testing.assert_close(s_c.cache["U"], U, rtol=1e-12, atol=0)
    torch.testing.assert_close(s_c.cache["term_values"], terms, rtol=1e-12, atol=0)


@pytest.mark.slow
@_NEEDS_CXX
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")
def test_compiled_single_chain_is_the_eager_chain():
    """One chain (N, p) compiled takes the row-chunk pair sums, where eager takes the tiled
    ones (equal to round-off).  With a fixed step, tolerance as above.  With a warm-up
    through the compiled single trajectories, dual averaging reads each acceptance
    probability (round-off ~1e-13 here, |U| ~ 1e2), but the step sizes it hands out are on a
    grid of log ε (DualAveraging), so both paths use the same ε: the same frozen step, and
    the positions to round-off as with a fixed step (tests/test_hmc_warmup.py has the
    default 200-trajectory warm-up)."""
    E, om = _log_gas(8)
    kw = dict(beta=2.0, regime="coulomb-gas", n_samples=35, seed=4, record_every=1)
    kw.update(jitter=0.0, trajectory_length=0.5)
    for warm, atol in (({"n_warmup": 0, "step_size": 0.09}, 1e-11), ({"n_warmup": 10}, 1e-11)):
        eager = sample_hmc(E, om, **kw, **warm)
        compiled = sample_hmc(E, om, compile=True, **kw, **warm)
        assert compiled["omega"].dims == ("time", "particle", "dim")
        assert compiled.attrs["step_size"] == eager.attrs["step_size"]
        np.testing.assert_array_equal(compiled["acceptance_rate"], eager["acceptance_rate"])
        for k in ("omega", "energy", "energy_interaction"):
            np.testing.assert_allclose(compiled[k], eager[k], rtol=0, atol=atol, err_msg=k)
        assert 0.2 < eager["acceptance_rate"].values[1:].mean() < 1.0


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")
def test_an_energy_that_does_not_trace_warns_and_runs_the_eager_chain():
    """A user potential differentiated by autograd (CallablePotential) does not trace as one
    graph: compile=True warns once and runs eagerly, the very chain of compile=False (bit for
    bit: the generator is rewound)."""
    E = Energy([CallablePotential(lambda w: (w**2).sum(-1) / 2)], Box(1, 3.0))
    om0 = np.random.default_rng(0).normal(scale=0.3, size=(2, 5, 1))
    kw = dict(beta=2.0, n_samples=6, n_warmup=3, seed=1, record_every=1)
    eager = sample_hmc(E, om0, **kw)
    with pytest.warns(UserWarning, match="does not compile as one graph.*runs eagerly"):
        compiled = sample_hmc(E, om0, compile=True, **kw)
    for k in ("omega", "energy", "acceptance_rate"):
        np.testing.assert_array_equal(compiled[k], eager[k], err_msg=k)
    assert float(eager["acceptance_rate"].values[1:].mean()) > 0  # the chain moved


@pytest.mark.slow
@_NEEDS_CXX
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")
def test_compiled_ball_chain_is_the_eager_chain():
    """In a ball the reflections are a loop until no flight time is left, compiled as a
    torch.while_loop: with a fixed step the chain is the eager one (tolerance as above: 40
    trajectories of 8 steps, each with wall hits, round-off ~1e-13 measured)."""
    E = Energy([DoubleWellPotential(), PairInteraction(Riesz(0.0, 0.05), 0.5)], Ball(2, 1.0))
    om0 = np.random.default_rng(0).normal(scale=0.3, size=(2, 5, 2))
    kw = dict(beta=2.0, regime="coulomb-gas", n_samples=40, n_warmup=0, step_size=0.1)
    kw.update(trajectory_length=0.8, seed=5, record_every=1, jitter=0.0)
    eager = sample_hmc(E, om0, **kw)
    compiled = sample_hmc(E, om0, compile=True, **kw)
    np.testing.assert_array_equal(compiled["acceptance_rate"], eager["acceptance_rate"])
    for k in ("omega", "energy"):
        np.testing.assert_allclose(compiled[k], eager[k], rtol=0, atol=1e-11, err_msg=k)
    assert 0.2 < eager["acceptance_rate"].values[1:].mean() < 1.0
    # the particles reached the wall: reflections happened
    assert np.linalg.norm(eager["omega"].values, axis=-1).max() > 0.9


def test_advance_is_steps_one_after_another():
    """HMC.advance (eager) makes the steps of HMC.step from the same state (its random stream
    included), bit for bit, and its records are the states along the way; the cached term
    values are each term's value at the state's positions."""
    E = _interacting_energy(Box(2, 1.0))
    hmc = HMC(E, beta=1.0, step_size=0.5, trajectory_length=1.0, jitter=0.2)
    om0 = 0.3 * torch.randn(3, 5, 2, generator=torch.Generator().manual_seed(0))
    s0 = hmc.init(om0, seed=2)
    states = [s0]
    for _ in range(4):
        states.append(hmc.step(states[-1]))
    s4, rec = hmc.advance(s0, 4)
    assert torch.equal(s4.rng, states[-1].rng)
    assert torch.equal(s4.omega, states[-1].omega) and torch.equal(
        s4.cache["U"], states[-1].cache["U"]
    )
    assert s4.step == 4 and s4.proposed == 4 and torch.equal(s4.accepted, states[-1].accepted)
    assert torch.equal(rec["omega"], torch.stack([s.omega for s in states[1:]]))
    assert torch.equal(rec["accepted"], torch.stack([s.accepted for s in states[1:]]))
    assert 0 < float(s4.accepted.sum()) < 12  # some moves accepted, some not
    for s, terms in zip(states[1:], rec["term_values"], strict=True):
        exact = torch.stack(list(E.term_values(s.omega).values()), -1)
        torch.testing.assert_close(terms, exact, rtol=1e-13, atol=1e-15)
    assert hmc.advance(s0, 2, positions=False)[1]["omega"] is None
    with pytest.raises(InputError, match="n_steps"):
        hmc.advance(s0, 0)


def test_compile_flag_must_be_a_bool():
    E = Energy([QuadraticPotential()], Box(1, 2.0))
    with pytest.raises(InputTypeError, match="compile"):
        HMC(E, 1.0, step_size=0.1, compile="yes")


def test_a_one_step_trajectory_compiled_is_the_eager_chain():
    """ε = T: one leapfrog step, an empty inner loop.  The compiled block did not reproduce
    the eager chain there (positions apart by 0.38 after 10 trajectories), so such chains run
    eagerly; with compile=True they are the eager chain bit for bit."""
    E, om = _log_gas(8)
    kw = dict(beta=2.0, regime="coulomb-gas", n_samples=10, seed=4, record_every=1, jitter=0.0)
    kw.update(trajectory_length=0.5, step_size=0.5, n_warmup=0)
    eager = sample_hmc(E, om, **kw)
    compiled = sample_hmc(E, om, compile=True, **kw)
    assert eager.attrs["n_leapfrog"] == 1
    np.testing.assert_array_equal(compiled["omega"], eager["omega"])
