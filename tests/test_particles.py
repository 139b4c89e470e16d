"""Particle dynamics against closed forms (THEORY §3, §5)."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from meanfield.domains import Ball, Box
from meanfield.dynamics.langevin import simulate
from meanfield.energy import (
    DoubleWellPotential,
    Energy,
    LinearAlignment,
    PairInteraction,
    QuadraticPotential,
)
from meanfield.kernels import Quadratic, Riesz
from meanfield.results import load_dataset, save_dataset

# Statistical tests: seeds are fixed, so each is deterministic; the stated level is the chance
# that a correct sampler would fail with a fresh seed.
KS_LEVEL = 1e-3


def w1_to_cdf(samples, cdf, lo, hi, m=40001):
    """W1 = ∫|F_N − F| between an empirical law and a law with CDF F (1D, trapezoid rule)."""
    g = np.linspace(lo, hi, m)
    Fn = np.searchsorted(np.sort(samples), g, side="right") / len(samples)
    return np.trapezoid(np.abs(Fn - cdf(g)), g)


def semicircle_cdf(x):
    x = np.clip(x, -math.sqrt(2), math.sqrt(2))
    root = np.sqrt(np.clip(2 - x**2, 0, None))
    return 0.5 + (x * root / 2 + np.arcsin(x / math.sqrt(2))) / math.pi


# ---------------------------------------------------------------------------------------
# exact sampler
# ---------------------------------------------------------------------------------------
def test_mala_one_particle_double_well_matches_quadrature():
    """4000 independent one-particle MALA chains vs the Gibbs law exp(−βV)/Z by quadrature."""
    beta, R = 2.0, 3.0
    E = Energy([DoubleWellPotential()], Box(1, R))
    gen = torch.Generator().manual_seed(0)
    om0 = (torch.rand(4000, 1, 1, generator=gen, dtype=torch.float64) * 2 - 1) * 2
    ds = simulate(E, om0, method="mala", eta=0.05, beta=beta, n_steps=600, seed=3, record_every=600)
    x = ds["omega"].isel(time=-1).values.ravel()
    V = lambda t: t**4 / 4 - t**2 / 2  # noqa: E731
    Z = integrate.quad(lambda t: np.exp(-beta * V(t)), -R, R)[0]
    cdf = np.vectorize(lambda t: integrate.quad(lambda s: np.exp(-beta * V(s)), -R, t)[0] / Z)
    assert stats.kstest(x, cdf).pvalue > KS_LEVEL
    assert 0.5 < float(ds["acceptance_rate"].isel(time=-1).mean()) <= 1.0


def test_mala_two_interacting_particles_match_exact_law():
    """N = 2 log gas, Coulomb-gas regime, β = 1, V = ω²/2, λ = 1/2.

    The Gibbs density ∝ |ω1 − ω2| exp(−(ω1² + ω2²)) factorises in u = (ω1 + ω2)/√2 ~ N(0, 1/2)
    and v = (ω1 − ω2)/√2 with v² ~ Exp(1): two exact KS tests on 3000 independent chains.
    """
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 4.0))
    gen = torch.Generator().manual_seed(1)
    # start well apart: MALA mixes slowly out of near-collisions of a singular kernel
    om0 = torch.tensor([-0.6, 0.6], dtype=torch.float64)[None, :, None]
    om0 = om0 + 0.1 * torch.randn(3000, 2, 1, generator=gen, dtype=torch.float64)
    ds = simulate(
        E,
        om0,
        method="mala",
        regime="coulomb-gas",
        eta=0.05,
        beta=1.0,
        n_steps=300,
        seed=4,
        record_every=300,
    )
    x = ds["omega"].isel(time=-1).values[..., 0]
    u = (x[:, 0] + x[:, 1]) / math.sqrt(2)
    v2 = (x[:, 0] - x[:, 1]) ** 2 / 2
    assert stats.kstest(v2, stats.expon().cdf).pvalue > KS_LEVEL
    assert stats.kstest(u, stats.norm(scale=math.sqrt(0.5)).cdf).pvalue > KS_LEVEL


def _quadratic_model(N, kappa, lam):
    terms = [QuadraticPotential(kappa), PairInteraction(Quadratic(), lam)]
    return Energy(terms, Box(1, 12.0))


def _variance_and_se(x):
    """Pooled variance of x (time, replica, particle) and its standard error by replica means."""
    per_rep = (x**2).mean(axis=(0, 2))  # mean is 0 by symmetry; each replica independent
    return per_rep.mean(), per_rep.std(ddof=1) / math.sqrt(len(per_rep))


def test_quadratic_interaction_stationary_variance_closed_form():
    """V = κω²/2, k = |z|²/2: N H_N = ½ ΩᵀAΩ with A = (κ+2λ)I − (2λ/N)11ᵀ.

    Eigenvalues κ (mean mode) and κ + 2λ (N − 1 modes), so one particle's stationary variance is
    Var = [1/(Nκ) + (1 − 1/N)/(κ + 2λ)] / β_N.  MALA must match it; unadjusted Langevin must
    match the exact variance of its own linear chain, 1/(β_N a (1 − ηa/2)) per mode a.
    """
    N, kappa, lam, beta, eta = 8, 1.0, 1.5, 2.0, 0.1
    E = _quadratic_model(N, kappa, lam)
    om0 = torch.zeros(200, N, 1, dtype=torch.float64)
    a1, a2 = kappa, kappa + 2 * lam
    for regime, beta_N in (("mean-field", beta), ("coulomb-gas", beta * N)):
        cont = (1 / (N * a1) + (1 - 1 / N) / a2) / beta_N
        disc = 1 / (N * a1 * (1 - eta * a1 / 2)) + (1 - 1 / N) / (a2 * (1 - eta * a2 / 2))
        disc /= beta_N
        for method, want in (("mala", cont), ("langevin", disc)):
            ds = simulate(
                E,
                om0,
                method=method,
                regime=regime,
                eta=eta,
                beta=beta,
                n_steps=800,
                record_every=10,
                seed=5,
            )
            x = ds["omega"].values[10:, ..., 0]  # drop a burn-in of 100 steps (t = 10)
            var, se = _variance_and_se(x)
            assert abs(var - want) < 5 * se, (regime, method, var, want, se)
        # the discrete chain is measurably hotter: the two targets differ by many SE
        assert (disc - cont) > 10 * se


def test_unadjusted_langevin_bias_is_order_eta():
    """OU (V = ω²/2, β = 1): the Euler chain's stationary variance is 1/(1 − η/2), so its bias
    ≈ η/2.  Over 20 000 independent chains × 20 snapshots the SE of each measured variance is
    ≈ 0.002 (computed below from replica means), so each bias (0.026 … 0.11) is > 10 SE from
    zero and must match the exact O(η) formula within 5 SE, shrinking as η shrinks."""
    E = Energy([QuadraticPotential()], Box(1, 10.0))
    biases = []
    for eta in (0.2, 0.1, 0.05):
        om0 = torch.zeros(20000, 1, 1, dtype=torch.float64)
        n = int(round(24 / eta))
        ds = simulate(
            E, om0, eta=eta, beta=1.0, n_steps=n, record_every=int(round(1 / eta)), seed=6
        )
        x = ds["omega"].values[4:, :, :, 0]  # t ≥ 4: stationary to e^-8
        var, se = _variance_and_se(x)
        exact = 1 / (1 - eta / 2)
        assert abs(var - exact) < 5 * se, (eta, var, exact, se)
        assert var - 1.0 > 10 * se  # the bias is really there
        biases.append(var - 1.0)
    assert biases[0] > biases[1] > biases[2]


# ---------------------------------------------------------------------------------------
# Coulomb-gas equilibria (THEORY §5)
# ---------------------------------------------------------------------------------------
def _coulomb_gas_1d(N, s, eta, t_end, seed=7):
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(s), 0.5)], Box(1, 4.0))
    # well-spaced start on [−1, 1] (not the answer): avoids near-collisions of singular kernels
    om0 = torch.linspace(-1, 1, N, dtype=torch.float64)[None, :, None].repeat(4, 1, 1)
    n = int(round(t_end / eta))
    ds = simulate(
        E, om0, eta=eta, beta=2.0, n_steps=n, regime="coulomb-gas", seed=seed, record_every=n
    )
    return ds["omega"].isel(time=-1).values[..., 0]  # (replica, N)


def test_log_gas_tends_to_semicircle():
    # In 1D the step must resolve the inter-particle gap ~1/N: η = 0.05/N.  W1 of a β-ensemble
    # to the semicircle is O(log N / N): 16 -> 48 particles should cut it by well over 40 %.
    w = {}
    for N in (16, 48):
        x = _coulomb_gas_1d(N, 0.0, 0.05 / N, 5.0)
        w[N] = np.mean([w1_to_cdf(r, semicircle_cdf, -3, 3) for r in x])
    assert w[48] < 0.045
    assert w[48] < 0.6 * w[16]


def test_minus_abs_kernel_tends_to_uniform():
    # k = −|z|: uniform on [−1, 1]; W1 = O(1/N): 16 -> 64 should cut it by well over half.
    w = {}
    for N in (16, 64):
        x = _coulomb_gas_1d(N, -1.0, 0.5 / N, 6.0)
        w[N] = np.mean([w1_to_cdf(r, lambda g: np.clip((g + 1) / 2, 0, 1), -3, 3) for r in x])
    assert w[64] < 0.04
    assert w[64] < 0.5 * w[16]


def test_2d_log_gas_tends_to_uniform_disk():
    # uniform unit disk: the radius has CDF r²; in 2D the gap is ~N^(−1/2), so η = 0.02 is stable
    w = {}
    for N in (30, 120):
        E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Ball(2, 3.0))
        gen = torch.Generator().manual_seed(N)
        om0 = (torch.rand(2, N, 2, generator=gen, dtype=torch.float64) - 0.5) * 1.2
        ds = simulate(
            E, om0, eta=0.02, beta=2.0, n_steps=300, regime="coulomb-gas", seed=8, record_every=300
        )
        r = np.linalg.norm(ds["omega"].isel(time=-1).values, axis=-1)
        w[N] = np.mean([w1_to_cdf(rr, lambda g: np.clip(g, 0, 1) ** 2, 0, 3) for rr in r])
        assert r.max() < 1.2
    assert w[120] < 0.03
    assert w[120] < 0.7 * w[30]


# ---------------------------------------------------------------------------------------
# invariants, options, reproducibility, output
# ---------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::meanfield.errors.PinnedParticlesWarning")  # on purpose
@pytest.mark.parametrize("domain", [Box(2, 0.5), Ball(2, 0.5)])
def test_particles_never_leave_the_domain(domain, rng):
    X = rng.normal(size=(20, 2))
    y = np.sign(X[:, 0])
    E = Energy([LinearAlignment(X, y), PairInteraction(Riesz(0.0, 0.05), 1.0)], domain)
    ds = simulate(
        E, rng.normal(scale=3, size=(40, 2)), eta=0.1, beta=0.5, n_steps=50, record_every=1, seed=0
    )
    assert bool(domain.contains(ds["omega"].values, atol=1e-12).all())


def _small_run(seed, eta=0.05, beta=50.0, n_steps=30, **kw):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)
    E = Energy(
        [LinearAlignment(X, y, "softplus"), PairInteraction(Riesz(1.0, 0.1), 0.1)], Ball(3, 4.0)
    )
    om0 = rng.normal(size=(25, 3))
    return simulate(E, om0, eta=eta, beta=beta, n_steps=n_steps, seed=seed, **kw)


def test_same_seed_same_bits():
    a, b, c = _small_run(1), _small_run(1), _small_run(2)
    assert np.array_equal(a["omega"].values, b["omega"].values)
    assert not np.array_equal(a["omega"].values, c["omega"].values)
    a, b = (
        _small_run(1, interaction_batch=5, data_batch=10),
        _small_run(1, interaction_batch=5, data_batch=10),
    )
    assert np.array_equal(a["omega"].values, b["omega"].values)


def _random_batch_variance(N, B, kappa, lam, eta, beta):
    """One particle's exact stationary variance of the random-batch Euler chain of the quadratic
    model (kappa, lam): Omega' = M Omega + sqrt(2 eta / beta) xi with M = (1 - eta kappa) I
    - eta c L, L the Laplacian of a fresh uniform partition into B-cliques, c = 2 lam (N - 1)
    / (N (B - 1)) (the batch rescaling). L1 = 0, L^2 = B L, E[L] = q (N I - 11^T) with
    q = (B - 1)/(N - 1): the stationary Sigma = E[M Sigma M] + (2 eta / beta) I stays in
    span{I, 11^T}, Sigma = a I + b 11^T, and Var = a + b."""
    c, m, s2 = 2 * lam * (N - 1) / (N * (B - 1)), 1 - eta * kappa, 2 * eta / beta
    g, q = eta**2 * c**2 * B - 2 * m * eta * c, (B - 1) / (N - 1)  # E[M^2] = m^2 I + g E[L]
    a = s2 / (1 - m**2 - g * q * N)
    return a - g * q * a / (1 - m**2)


def test_random_batch_dynamics_matches_exact_in_law():
    """Random pair batches (B = 2) add zero-mean noise to the drift: the chain stays linear,
    with a random matrix per step, and its exact stationary variance (0.38945 here) exceeds the
    full-batch Euler chain's (0.37699) and the continuous OU's (0.35) by O(eta).

    The pooled variance must match the exact random-batch value within 4 standard errors.  The
    SE (0.0010 at this seed) comes from 20 batch means of 100 steps over the time series of the
    mean of omega^2 across replicas and particles: that series carries the correlations between
    the particles and between replicas (one partition per step is shared by all replicas);
    100 steps are 5 integrated autocorrelation times of the slowest mode ((1 - eta kappa)^2 =
    0.90 per step: tau = 1.9 / 0.1 = 19.5 steps).  Over 16 fresh seeds the z-scores had
    spread 0.8 and the estimates 0.0007.  The design resolves the batch noise: the full-batch
    value lies more than 10 SE away (checked below)."""
    N, B, kappa, lam, eta, beta = 40, 2, 1.0, 1.0, 0.05, 1.0
    E = _quadratic_model(N, kappa, lam)
    om0 = torch.zeros(50, N, 1, dtype=torch.float64)
    ds = simulate(
        E, om0, eta=eta, beta=beta, n_steps=2200, interaction_batch=B, record_every=5, seed=9
    )
    # burn-in 200 steps: the slowest mode has forgotten the start to 0.9025^200 ~ 1e-9
    y = (ds["omega"].values[ds["step"].values > 200, ..., 0] ** 2).mean(axis=(1, 2))
    batches = y.reshape(20, -1).mean(axis=1)
    var, se = batches.mean(), batches.std(ddof=1) / math.sqrt(20)
    exact = _random_batch_variance(N, B, kappa, lam, eta, beta)
    full = 1 / (N * kappa * (1 - eta * kappa / 2)) + (1 - 1 / N) / (
        (kappa + 2 * lam) * (1 - eta * (kappa + 2 * lam) / 2)
    )
    assert abs(var - exact) < 4 * se, (var, exact, se)
    assert exact - full > 10 * se, (exact, full, se)
    # and B >= N is the full-batch chain, whose exact variance the formula then gives
    assert _random_batch_variance(N, N, kappa, lam, eta, beta) == pytest.approx(full, rel=1e-12)


def test_dataset_content_and_netcdf_roundtrip(tmp_path):
    ds = _small_run(3, record_every=10)
    assert ds["omega"].dims == ("time", "particle", "dim")
    assert ds.sizes["time"] == 4 and float(ds["time"][-1]) == pytest.approx(1.5)
    for k in ("energy", "energy_alignment", "energy_interaction"):
        assert k in ds
    total = ds["energy_alignment"] + ds["energy_interaction"]
    assert np.allclose(ds["energy"], total)
    for k in ("seed", "meanfield_version", "eta", "beta", "regime", "N", "term1_s"):
        assert k in ds.attrs
    back = load_dataset(save_dataset(ds, tmp_path / "run.nc"))
    assert np.array_equal(back["omega"].values, ds["omega"].values)
    assert back.attrs["seed"] == 3 and back.attrs["interaction_batch"] == "none"


def test_langevin_lowers_the_alignment_energy():
    ds = _small_run(0, record_every=30)
    assert ds["energy_alignment"].values[-1] < ds["energy_alignment"].values[0]


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"eta": 0.0}, "eta"),
        ({"eta": -1.0}, "eta"),
        ({"beta": 0.0}, "beta"),
        ({"beta": float("inf")}, "beta"),
        ({"n_steps": 0}, "n_steps"),
        ({"regime": "hot"}, "regime"),
        ({"method": "hmc2"}, "method"),
        ({"interaction_batch": 1}, "interaction_batch"),
        ({"data_batch": 1000}, "data_batch"),
        ({"method": "mala", "interaction_batch": 4}, "neither"),
    ],
)
def test_bad_arguments_raise_before_work(kw, match):
    args = {"eta": 0.1, "beta": 1.0, "n_steps": 5, **kw}
    with pytest.raises((ValueError, TypeError), match=match):
        _small_run(0, **args)


def test_bad_initial_particles():
    E = Energy([QuadraticPotential()], Box(2, 1.0))
    with pytest.raises(ValueError, match="N \\(number of particles"):
        simulate(E, np.zeros((0, 2)), eta=0.1, beta=1.0, n_steps=1)
    with pytest.raises(ValueError, match="omega0 must have shape"):
        simulate(E, np.zeros((4, 3)), eta=0.1, beta=1.0, n_steps=1)
    with pytest.raises(ValueError, match="non-finite"):
        simulate(E, np.full((4, 2), np.nan), eta=0.1, beta=1.0, n_steps=1)


@pytest.mark.filterwarnings("ignore::meanfield.errors.PinnedParticlesWarning")  # on purpose
def test_nan_drift_raises_instead_of_writing_garbage():
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.5), 1.0)], Box(1, 1.0))
    # all particles on the boundary corner: finite force (zero subgradient), no NaN
    ds = simulate(E, np.ones((3, 1)) * 5, eta=0.1, beta=1.0, n_steps=3, seed=0)
    assert np.isfinite(ds["omega"].values).all()
    E2 = Energy([DoubleWellPotential()], Box(1, 1e300))  # ω³ overflows: an infinite force
    with pytest.raises(FloatingPointError, match="eta"):
        simulate(E2, np.full((2, 1), 1e200), eta=0.1, beta=1.0, n_steps=3)


def test_pinned_particles_warn_from_the_python_api():
    """Issue 11: eta = 1e6 (one noise step sqrt(2e6) >> the box width 2) pins every particle
    to the corners; simulate warns before the run (the step) and after it (the boundary),
    while an ordinary run (noise step 0.01) stays silent."""
    import warnings

    from meanfield.errors import MeanfieldWarning, PinnedParticlesWarning

    E = Energy([QuadraticPotential()], Box(2, 1.0))
    omega0 = np.random.default_rng(0).uniform(-0.5, 0.5, size=(16, 2))
    with pytest.warns(PinnedParticlesWarning) as record:
        simulate(E, omega0, eta=1e6, beta=1.0, n_steps=3, seed=0)
    text = [str(w.message) for w in record]
    assert any("one noise step" in t and "lower eta (now 1e+06)" in t for t in text)
    assert any("100% of the particles ended on the boundary of the box" in t for t in text)
    assert all(issubclass(w.category, MeanfieldWarning) for w in record)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MeanfieldWarning)
        simulate(E, omega0, eta=0.05, beta=1e3, n_steps=20, seed=0)
        simulate(E, omega0, eta=1e6, beta=1.0, n_steps=3, method="mala", seed=0)  # no pinning


@pytest.mark.parametrize("method", ["langevin", "mala", "hmc"])
def test_integrator_state_is_immutable_a_new_state_per_step(method):
    """step(state) returns a new LangevinState and leaves the old one as it was (positions,
    counters and cache); the state itself refuses in-place changes."""
    import dataclasses

    from meanfield.dynamics.hmc import HMC
    from meanfield.dynamics.langevin import make_integrator

    E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], Box(1, 4.0))
    if method == "hmc":
        integrator = HMC(E, 2.0, step_size=0.1, trajectory_length=0.3)
    else:
        integrator = make_integrator(E, method=method, eta=0.05, beta=2.0)
    state = integrator.init(np.linspace(-1, 1, 6)[:, None], seed=0)
    before, rng = state.omega.clone(), state.rng.clone()
    cache = {k: v.clone() if torch.is_tensor(v) else v for k, v in state.cache.items()}
    new = integrator.step(state)
    assert new is not state and new.step == state.step + 1 == 1
    assert torch.equal(state.rng, rng) and not torch.equal(new.rng, rng)  # the stream moved on
    assert torch.equal(state.omega, before) and not torch.equal(new.omega, before)
    for k, v in cache.items():
        assert torch.equal(state.cache[k], v) if torch.is_tensor(v) else state.cache[k] == v
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.omega = before
    with pytest.raises(TypeError):
        state.cache["U"] = 0.0
    if method != "langevin":
        assert new.proposed == 1 and state.proposed == 0
