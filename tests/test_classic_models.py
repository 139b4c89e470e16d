"""Classic mean-field models as run files (``paper_repro/gallery/*.toml``), each checked
against its known answer: the particles read from the file (``RunSpec.from_toml`` +
``simulate``, small N, fixed seeds) and, where the model has one, the grid's stationary state.

The mapping of each model to the package's conventions (THEORY §8) is derived in the header
of its TOML file and in ``docs/classic_models.rst``.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq

import meanfield as mf
from meanfield.dynamics.spec import RunSpec
from meanfield.errors import MultipleStationaryStatesWarning
from meanfield.pde import Density, Grid

GALLERY = Path(__file__).resolve().parents[1] / "paper_repro" / "gallery"
MODELS = ("dyson", "granular_media", "aggregation_disk")


def _spec(name: str) -> RunSpec:
    return RunSpec.from_toml(GALLERY / f"{name}.toml")


def _seed_runs(spec: RunSpec, seeds, record_every: int):
    """Positions (seed, time, N, p) and record times of one run per seed."""
    runs = [mf.simulate(spec, seed=s, record_every=record_every) for s in seeds]
    return np.stack([ds["omega"].values for ds in runs]), runs[0]["time"].values


@pytest.mark.parametrize("name", MODELS)
def test_gallery_file_reads_back_and_names_its_command(name, tmp_path):
    """Each file is a valid run (``from_toml``), equal to its own ``to_toml`` round trip, and
    its header says how to run it and which known answer it is checked against."""
    path = GALLERY / f"{name}.toml"
    spec = RunSpec.from_toml(path)
    text = path.read_text(encoding="utf-8")
    assert f"meanfield run paper_repro/gallery/{name}.toml" in text
    assert "Known answer" in text and "Mapping to the package" in text
    again = RunSpec.from_toml(spec.to_toml(tmp_path / f"{name}.toml"))
    assert again.describe() == spec.describe()


# --- Dyson Brownian motion: the free Ornstein–Uhlenbeck flow -------------------------------


DYSON_SEEDS = range(8)


@pytest.fixture(scope="module")
def dyson_runs():
    spec = _spec("dyson")
    omega, t = _seed_runs(spec, DYSON_SEEDS, record_every=100)
    return spec, omega[..., 0], t  # (seed, time, N)


def _dyson_mean_second_moment(S0, t, N, beta, rate=2.0):
    """E[S](t) = S∞ + (S0 − S∞) e^{−rate·t}, S∞ = (N − 1)/(2N) + 1/(βN) (rate 2 is exact)."""
    s_inf = (N - 1) / (2 * N) + 1 / (beta * N)
    return s_inf + (S0 - s_inf) * np.exp(-rate * t)


def test_dyson_second_moment_relaxes_at_rate_two(dyson_runs):
    """Dyson Brownian motion with the OU drift, dx_i = (−x_i + (1/N) Σ_{j≠i} 1/(x_i − x_j)) dt
    + sqrt(2/(βN)) dW_i (the file: V = x²/2, λ = 1/2, k = −log|z|, Coulomb-gas regime).
    Itô on S = (1/N) Σ x_i² with Σ_{i≠j} x_i/(x_i − x_j) = N(N − 1)/2 gives, at every N,
    d E[S]/dt = −2 E[S] + (N − 1)/N + 2/(βN): the variance of the limiting semicircle relaxes
    as 1/2 + (v0 − 1/2) e^{−2t}, the free Ornstein–Uhlenbeck flow (Biane 1997,
    Voiculescu 1991), to the equilibrium semicircle on [−√2, √2].

    Residual r_s(t) = S_s(t) − E[S](t | S_s(0)) per seed (8 seeds, N = 100, η = 0.002):
    expected 0 up to the O(η) Euler bias (≈ η·(v0 − 1/2)·2t e^{−2t} ≤ 4e-4); the tolerance is
    4 standard errors over the seeds plus that bias (SE 2.5e-3 to 5e-3 observed, mean
    residuals ≤ 1.4e-3, max |mean r|/SE = 0.44). The rate 1 (a time scale off by a factor 2,
    as in the convention dx = −x/2 dt + ...) is rejected: its residual at t = 0.6 is 31 SE
    (> 10 asked).
    """
    spec, x, t = dyson_runs
    S = (x**2).mean(-1)  # (seed, time)
    N, beta = spec.n_particles, spec.beta
    assert math.isclose((N - 1) / (2 * N) + 1 / (beta * N), 0.5)  # β = 2: S∞ = 1/2 at every N
    resid = S - _dyson_mean_second_moment(S[:, :1], t, N, beta)
    se = resid.std(0, ddof=1) / math.sqrt(len(DYSON_SEEDS))
    later = t > 0
    assert np.all(np.abs(resid.mean(0)[later]) <= 4 * se[later] + 4e-4), (resid.mean(0), se)
    wrong = S - _dyson_mean_second_moment(S[:, :1], t, N, beta, rate=1.0)
    i = np.argmin(np.abs(t - 0.6))
    assert abs(wrong.mean(0)[i]) > 10 * se[i]
    assert np.abs(x).max() < spec.energy.domain.half_width  # the projection never acted


def test_dyson_stays_a_semicircle(dyson_runs):
    """A semicircle of variance v has fourth moment 2v²: the empirical law at t = 1 has
    m4/(2 m2²) = 1 up to O(1/N) and sampling (8 seeds: mean ratio observed 1.0002, SE
    0.0046); a Gaussian of the same variance would give 3/2. Tolerance: 4 SE + 2/N."""
    _, x, _ = dyson_runs
    final = x[:, -1]
    ratio = (final**4).mean(-1) / (2 * (final**2).mean(-1) ** 2)
    se = ratio.std(ddof=1) / math.sqrt(len(ratio))
    assert abs(ratio.mean() - 1.0) <= 4 * se + 2 / x.shape[-1], (ratio.mean(), se)


def test_dyson_equilibrium_on_the_grid_is_the_semicircle():
    """The β = ∞ limit on the grid (``equilibrium_measure``, the file's energy, 256 cells of
    [−4, 4]): the semicircle on [−√2, √2], variance 1/2, E = 1/4 + (1/2)(1/4 + log 2 / 2)
    = 3/8 + log 2 / 4 (the log energy of a semicircle of radius R is 1/4 − log(R/2)).
    Tolerance h²/12 in the variance (the cell scale; observed 6e-5 at h = 1/32) and h² in E."""
    spec = _spec("dyson")
    grid = Grid(spec.energy.domain, 256)
    rho, report = mf.equilibrium_measure(spec.energy, grid)
    h = 8.0 / 256
    assert report.converged
    assert abs(float(rho.covariance()[0, 0]) - 0.5) <= h**2 / 12
    assert abs(report.free_energy - (3 / 8 + math.log(2) / 4)) <= h**2


# --- Granular media / Curie–Weiss in a double well -----------------------------------------

THETA = 1.0


def _boltzmann_moment(beta, m, power):
    """∫ x^power e^{−β(V + θ(x − m)²/2)} dx / Z, V = x⁴/4 − x²/2 (scipy quad)."""
    w = lambda x: math.exp(-beta * (x**4 / 4 - x**2 / 2 + THETA * (x - m) ** 2 / 2))  # noqa: E731
    z = quad(w, -np.inf, np.inf, epsabs=0, epsrel=1e-13)[0]
    return quad(lambda x: x**power * w(x), -np.inf, np.inf, epsabs=0, epsrel=1e-13)[0] / z


def _critical_beta():
    """β_c: βθ Var₀(x) = 1, the slope at m = 0 of the self-consistency map."""
    return brentq(lambda b: b * THETA * _boltzmann_moment(b, 0.0, 2) - 1, 1.0, 4.0, xtol=1e-13)


def _ordered_mean(beta):
    """m* > 0 solving m = ∫ x ρ_m (above β_c)."""
    return brentq(lambda m: _boltzmann_moment(beta, m, 1) - m, 0.05, 2.0, xtol=1e-13)


def test_granular_critical_beta_by_quadrature():
    """The self-consistency m = ∫ x e^{−β(V + θ(x − m)²/2)} dx / Z (Dawson 1983; Tugaut 2014)
    has slope βθ Var₀(x) at m = 0; β_c = 2.18844 at θ = 1, and m*(β = 3) = 0.637324 (the value
    the grid gives in ``gibbs_state``'s example); below β_c no m > 0 solves it."""
    assert abs(_critical_beta() - 2.18844) < 5e-6
    assert abs(_ordered_mean(3.0) - 0.637324) < 5e-7
    m = np.linspace(0.02, 2.0, 100)
    assert np.all([_boltzmann_moment(2.0, mi, 1) < mi for mi in m])


def test_granular_grid_states_ordered_above_symmetric_below():
    """``gibbs_state`` on the file's energy (128 cells of [−3, 3]): at β = 2.0 < β_c one
    symmetric state; at β = 3 (the file's β) the ordered minimisers ±m* (stable) and the
    symmetric saddle, m* against quadrature within 1e-5 (observed < 1e-6)."""
    spec = _spec("granular_media")
    grid = Grid(spec.energy.domain, 128)
    _, below = mf.gibbs_state(spec.energy, grid, 2.0)
    assert len(below.states) == 1 and abs(float(below.states[0].mean[0])) < 1e-10
    with pytest.warns(MultipleStationaryStatesWarning):
        _, above = mf.gibbs_state(spec.energy, grid, spec.beta)
    means = sorted(float(s.mean[0]) for s in above.states)
    m_star = _ordered_mean(spec.beta)
    assert np.allclose(means, [-m_star, 0.0, m_star], atol=1e-5)
    stability = {round(float(s.mean[0]), 3): s.stability for s in above.states}
    assert stability[0.0] == "unstable" and stability[round(m_star, 3)] == "stable"


def _granular_grid_flow(spec: RunSpec, n_cells: int, times):
    """The grid's McKean–Vlasov flow of the file's model from its initial law (uniform on
    [0, 1.5]) on ``n_cells`` cells: the mean of ρ_t at each of ``times`` (increasing)."""
    grid = Grid(spec.energy.domain, n_cells)
    x = np.asarray(grid.centers).ravel()
    rho = Density(grid, ((x > 0) & (x < 1.5)).astype(float)).normalised()
    equation = spec.replace(initial=rho).equation()
    means, t = [], 0.0
    for t_next in times:
        rho = mf.pde.solve(equation, rho, (t, float(t_next))).state
        means.append(float(rho.mean()[0]))
        t = float(t_next)
    return np.array(means)


def test_granular_grid_flow_relaxes_to_the_ordered_state():
    """The grid's flow (``spec.equation()`` + ``mf.pde.solve``, 64 cells) from the file's
    initial law ends at +m* of the quadrature: slowly (the mean is 0.6418 at t = 10, 0.63755
    at t = 20) and within 1e-5 at t = 40 (observed 6e-7; 64 and 128 cells agree to 2e-4 at
    t = 10)."""
    spec = _spec("granular_media")
    m = _granular_grid_flow(spec, 64, [10.0, 40.0])
    m_star = _ordered_mean(spec.beta)
    assert m[0] > m[1] > m_star - 1e-5
    assert abs(m[1] - m_star) < 1e-5


def test_granular_particles_follow_the_grid_to_the_ordered_state():
    """The file's run (β = 3 > β_c, N = 200, started on [0, 1.5]) goes to the ordered state
    +m* = 0.637324, not to the symmetric m = 0, along the grid's flow of the same law.

    Per seed the particles' mean is averaged over t ∈ {4, 4.5, …, 10}; 6 seeds. The
    mean-field limit of that average is the grid flow's (64 cells): 0.6503, still above m*
    (the relaxation is slow near β_c). Expected equal up to an O(1/N) finite-N shift
    (the fluctuations of the mean, large near β_c, feed back through the nonlinear
    self-consistency) and the O(η) Euler bias (η = 0.005 and 0.0025 moved the average by
    about one SE of those runs, with no trend in η). Observed 0.6675, SE 0.0063 over the
    seeds (+0.017, i.e. ≈ 3.5/N; at N = 400 separately 0.650 ± 0.011). Tolerance
    4 SE + 4/N (the shift bound); m = 0 is rejected by > 20 SE (observed 106)."""
    spec = _spec("granular_media")
    omega, t = _seed_runs(spec, range(6), record_every=50)
    window = t[t >= 4 - 1e-9]
    late = omega[..., 0].mean(-1)[:, t >= 4 - 1e-9].mean(-1)
    se = late.std(ddof=1) / math.sqrt(len(late))
    grid_late = _granular_grid_flow(spec, 64, window).mean()
    assert abs(grid_late - 0.6503) < 1e-3  # above m* = 0.6373: the flow is not yet at rest
    assert abs(late.mean() - grid_late) <= 4 * se + 4 / spec.n_particles, (late, se)
    assert late.mean() > 20 * se


# --- Aggregation |x|²/2 − log|x| in R²: the uniform disk --------------------------------


AGG_SEEDS = range(6)


@pytest.fixture(scope="module")
def aggregation_runs():
    spec = _spec("aggregation_disk")
    omega, t = _seed_runs(spec, AGG_SEEDS, record_every=30)
    centred = omega - omega.mean(-2, keepdims=True)
    return spec, centred, t  # (seed, time, N, 2)


def test_aggregation_variance_follows_the_virial_identity(aggregation_runs):
    """W(z) = |z|²/2 − log|z| in R², Coulomb-gas regime (the file: two pair terms, λ = 1/2).
    Itô on Var_N = (1/N) Σ |x_i − x̄|² (the attraction contributes −2 Var_N, the log
    repulsion (N − 1)/N, the noise 4/(βN) less the centre of mass's 4/(βN²)) gives exactly
    d E[Var_N]/dt = −2 E[Var_N] + (N − 1)/N + 4(N − 1)/(βN²), whose limit 1/2 is the second
    moment of the uniform unit disk (Fetecau–Huang–Kolokolnikov 2011).

    Residual per seed against E[Var_N](t | Var_N(0)) (6 seeds, N = 100, η = 0.01): expected 0
    up to the O(η) Euler bias (≤ 2e-3 at η = 0.01 on an O(0.2) relaxation); tolerance 4 SE
    plus that bias (SE 1e-3 to 4.4e-3 observed, mean residuals ≤ 5e-3, max |mean|/SE = 2.1;
    final E[Var_N] 0.5050 against v_inf = 0.5049)."""
    spec, x, t = aggregation_runs
    N, beta = spec.n_particles, spec.beta
    var = (x**2).sum(-1).mean(-1)  # (seed, time)
    v_inf = (N - 1) / (2 * N) * (1 + 4 / (beta * N))
    resid = var - (v_inf + (var[:, :1] - v_inf) * np.exp(-2 * t))
    se = resid.std(0, ddof=1) / math.sqrt(len(AGG_SEEDS))
    assert np.all(np.abs(resid.mean(0)[1:]) <= 4 * se[1:] + 2e-3), (resid.mean(0), se)
    assert abs(var[:, -1].mean() - 0.5) < 0.02  # the disk's 1/2 (finite N: v_inf = 0.5049)


def test_aggregation_file_runs_through_the_command_line(aggregation_runs, tmp_path):
    """``meanfield run paper_repro/gallery/aggregation_disk.toml`` writes the run that
    ``simulate(RunSpec.from_toml(...))`` gives (seed 0): the same final positions, bit for
    bit, so the statistical checks above hold for the command's output."""
    import xarray as xr

    from meanfield.cli import main

    out = tmp_path / "disk.nc"
    assert (
        main(["run", str(GALLERY / "aggregation_disk.toml"), "--out", str(out), "--no-progress"])
        == 0
    )
    with xr.open_dataset(out) as ds:
        final = ds["omega"].values[-1]
    _, centred, _ = aggregation_runs
    assert np.array_equal(final - final.mean(0), centred[0, -1])


def _radial_w1(radii: np.ndarray) -> float:
    """W₁ between the empirical law of the radii and the disk's radial law F(r) = r² on
    [0, 1]: ∫ |F_N − F| dr, by quantiles (exact: ∫₀¹ |Q_N(u) − √u| du, Q_N piecewise
    constant on [k/N, (k+1)/N] with ∫ √u = (2/3)u^{3/2})."""
    r = np.sort(radii)
    n = len(r)
    u = np.linspace(0.0, 1.0, 40 * n + 1)  # √u is monotone: fine quadrature of |Q_N − √u|
    q = r[np.minimum((u * n).astype(int), n - 1)]
    return float(np.trapezoid(np.abs(q - np.sqrt(u)), u))


def test_aggregation_radial_law_is_the_unit_disk(aggregation_runs):
    """The radii |x_i − x̄| at t = 3 against the uniform unit disk's radial law r²: the
    Coulomb gas is more regular than independent points, so its W₁ to the disk lies below
    that of N iid draws from the disk (mean over 200 draws 0.0268 at N = 100; the gas's
    mean over 6 seeds observed 0.0144). A Gaussian of the same second moment (radial law
    1 − e^{−2r²}) is rejected: its W₁ to the disk is ≈ 0.11 ≫ 0.027."""
    spec, x, _ = aggregation_runs
    radii = np.sqrt((x[:, -1] ** 2).sum(-1))  # (seed, N)
    gas = np.mean([_radial_w1(r) for r in radii])
    rng = np.random.default_rng(12345)
    n = spec.n_particles
    iid = np.mean([_radial_w1(np.sqrt(rng.random(n))) for _ in range(200)])
    gaussian = _radial_w1(np.sqrt(-np.log1p(-(np.arange(n) + 0.5) / n) / 2))
    assert gas < iid < gaussian, (gas, iid, gaussian)


def test_aggregation_grid_equilibrium_is_the_unit_disk():
    """The β = ∞ minimiser on the grid (``equilibrium_measure``, the file's energy, 32 × 32
    cells of [−2, 2]²): trace of the covariance 1/2 within h²/6 (two coordinates of the cell
    scale h²/12; observed 1.9e-3 at h = 1/8, 3.4e-3 at h = 1/6) and E = 1/4 + (1/2)(1/4) = 3/8
    (½∬|x − y|²/2 = 1/4, the log energy of the unit disk 1/4) within h²/8 (observed 3e-5)."""
    spec = _spec("aggregation_disk")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rho, report = mf.equilibrium_measure(spec.energy, Grid(spec.energy.domain, [32, 32]))
    h = 4.0 / 32
    assert report.converged
    assert abs(float(np.trace(rho.covariance())) - 0.5) <= h**2 / 6
    assert abs(report.free_energy - 3 / 8) <= h**2 / 8
