import numpy as np
import pytest

from meanfield.stats import fit_power_law
from meanfield.studies.limits import particle_equilibrium_run
from meanfield.workbench.compare import beta_limit_grid


@pytest.mark.parametrize("case", ["semicircle", "uniform"])
def test_gibbs_state_tends_to_equilibrium_monotonically(case):
    """THEORY §6: W2(ρ_β, μ*) decreases monotonically in β on the closed-form cases."""
    ds = beta_limit_grid(case, [1, 4, 16, 64], cells=256)
    w = ds["w2_grid"].values
    assert np.all(np.diff(w) < 0)
    assert w[-1] < 0.05


def test_fit_power_law_recovers_a_known_slope():
    # y = 2 x^-0.5 times lognormal noise of 5 % over 20 seeds: the slope's SE is ~0.007
    rng = np.random.default_rng(0)
    x = np.array([10, 20, 40, 80.0])
    y = 2 * x[:, None] ** -0.5 * np.exp(rng.normal(0, 0.05, (4, 20)))
    fit = fit_power_law(x, y, n_boot=500)
    assert fit["ci_low"] < -0.5 < fit["ci_high"]
    assert fit["ci_high"] - fit["ci_low"] < 0.1
    with pytest.raises(ValueError, match="positive"):
        fit_power_law(x, -y)


def test_particle_run_record():
    ds = particle_equilibrium_run(12, 2.0, seed=0, case="uniform", t_end=1.0, n_replicas=2)
    assert ds["omega_final"].shape == (2, 12, 1)
    assert ds.attrs["case"] == "uniform" and ds.attrs["seed"] == 0
    assert np.all(ds["w1"].values <= ds["w2"].values + 1e-12)  # W1 <= W2
    with pytest.raises(ValueError, match="case"):
        particle_equilibrium_run(4, 1.0, 0, case="ring")


def test_free_energy_gap_decays_at_the_ou_rate():
    """OU (V = ω²/2, β = 1): F_β(ρ_t) − F_β(ρ_∞) = KL decays like e^(−2t) for a shifted
    Gaussian start.  The implicit Euler step dt = 0.0075 damps the rate to
    log(1 + 2dt)/dt = 1.985, so the fitted rate must lie in [1.97, 2.005]."""
    from meanfield.domains import Box
    from meanfield.energy import Energy, QuadraticPotential
    from meanfield.workbench.compare import free_energy_decay

    ds = free_energy_decay(Energy([QuadraticPotential()], Box(1, 6.0)), 1.0, cells=256)
    assert 1.97 < ds.attrs["rate"] < 2.005
    assert ds.attrs["rate_ci_low"] <= ds.attrs["rate"] <= ds.attrs["rate_ci_high"]
    assert np.all(np.diff(ds["free_energy"].values) <= 1e-12)  # the free energy never rises


def test_free_energy_decay_too_short_reports_an_undetermined_rate():
    """t_end = 0.3 leaves the OU gap (KL of a Gaussian shifted by 1, about 0.5 e^(-2t)) near
    0.3, far above the fit window's 1e-3: no record can enter the fit, so the rate must be
    undetermined (NaN with the reason), not a traceback nor a number fitted to the transient."""
    from meanfield.domains import Box
    from meanfield.energy import Energy, QuadraticPotential
    from meanfield.workbench.compare import free_energy_decay

    E = Energy([QuadraticPotential()], Box(1, 6.0))
    ds = free_energy_decay(E, 1.0, cells=64, t_end=0.3, n_records=20, n_boot=10)
    assert np.isnan(ds.attrs["rate"]) and np.isnan(ds.attrs["rate_ci_low"])
    assert ds.attrs["rate_status"].startswith("undetermined") and "t_end" in ds.attrs["rate_status"]
    assert np.all(ds["gap"].values > 1e-3)
