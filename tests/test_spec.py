"""The typed run specification (issue 21): one object, checked once, read by every view."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from meanfield.domains import Box
from meanfield.dynamics.langevin import simulate
from meanfield.dynamics.spec import RunSpec, as_spec, n_steps_for
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.errors import InputError, InputTypeError, StepBudgetError
from meanfield.kernels import Gaussian
from meanfield.pde import Density, Grid
from meanfield.workbench.config import SimulationConfig


def _energy():
    return Energy([QuadraticPotential(), PairInteraction(Gaussian(0.5), 0.2)], Box(1, 2.0))


def _law(n=16):
    return Density.gaussian(Grid(Box(1, 2.0), n), 0.2, 0.4)


def test_simulate_of_a_spec_is_the_keyword_run_to_the_last_bit():
    """simulate(spec) and simulate(energy, omega0, ...) are the same run; keywords given with
    a spec replace its fields (a new seed: new noise)."""
    E, omega0 = _energy(), torch.linspace(-1, 1, 12, dtype=torch.float64)[:, None]
    spec = RunSpec(energy=E, initial=omega0, beta=5.0, eta=0.01, n_steps=20, method="mala")
    a = simulate(spec, record_every=5)
    b = simulate(E, omega0, eta=0.01, beta=5.0, n_steps=20, method="mala", record_every=5)
    np.testing.assert_array_equal(a["omega"].values, b["omega"].values)
    np.testing.assert_array_equal(a["acceptance_rate"].values, b["acceptance_rate"].values)
    assert a.attrs["N"] == 12 and spec.n_particles == 12 and spec.t_final == 0.2
    other = simulate(spec, seed=1, record_every=5)
    assert other.attrs["seed"] == 1 and not np.array_equal(other["omega"], a["omega"])


def test_a_spec_from_a_law_samples_it_and_makes_the_grid_equation():
    """An initial law (a Density): the particles are N iid samples of it (normalised), the
    grid equation lives on its grid with the scheme bound to (grid, beta)."""
    rho = Density(_law().grid, 3.0 * _law().data)  # mass 3: normalised for both views
    spec = RunSpec(
        energy=_energy(), initial=rho, n_particles=40, beta=2.0, eta=0.01, n_steps=3, seed=5,
        scheme="sg", order=1,
    )  # fmt: skip
    assert spec.law.mass == pytest.approx(1.0, abs=1e-15) and spec.grid is rho.grid
    np.testing.assert_array_equal(spec.particles(), spec.law.sample(40, 5))
    eq = spec.equation()
    assert eq.scheme.name == "sg" and eq.scheme.grid is rho.grid and eq.beta == 2.0
    ds = simulate(spec)
    np.testing.assert_array_equal(ds["omega"].values[0], spec.law.sample(40, 5))
    assert "RunSpec(energy=['confinement', 'interaction'], initial=Density on" in repr(spec)


@pytest.mark.parametrize(
    "change, error, name",
    [
        ({"beta": 0.0}, InputError, "beta (inverse temperature)"),
        ({"eta": float("nan")}, InputError, "eta (step size)"),
        ({"n_steps": 2.5}, InputTypeError, "n_steps"),
        ({"n_particles": 0}, InputError, "n_particles (N)"),
        ({"regime": "hot"}, InputError, "regime"),
        ({"method": "hmc"}, InputError, "method"),
        ({"seed": -1}, InputError, "seed"),
        ({"scheme": "central"}, InputError, "scheme"),
        ({"order": 3}, InputError, "order"),
        ({"safety": 1.5}, InputError, "safety"),
        ({"interaction_batch": 1}, InputError, "interaction_batch"),
        ({"data_batch": 4}, ValueError, "data_batch"),
        ({"method": "mala", "interaction_batch": 4}, ValueError, "interaction_batch"),
        ({"energy": "E"}, InputTypeError, "energy"),
        ({"initial": None}, InputTypeError, "initial"),
        ({"n_particles": None}, InputError, "n_particles (N) is needed"),
        ({"initial": Density.uniform(Grid(Box(1, 3.0), 8))}, ValueError, "incompatible"),
    ],
)
def test_every_field_is_checked_once_when_the_spec_is_made(change, error, name):
    fields = dict(energy=_energy(), initial=_law(), n_particles=8, beta=1.0, eta=0.1, n_steps=2)
    with pytest.raises(error) as info:
        RunSpec(**{**fields, **change})
    assert name in str(info.value)


def test_particles_and_n_particles_must_agree():
    with pytest.raises(InputError, match=r"n_particles \(N\) = 4, but the initial particles are 3"):
        RunSpec(energy=_energy(), initial=np.zeros((3, 1)), n_particles=4, beta=1, eta=1, n_steps=1)
    spec = RunSpec(energy=_energy(), initial=np.zeros((2, 3, 1)), beta=1, eta=1, n_steps=1)
    assert spec.n_particles == 3 and spec.grid is None and spec.law is None  # 2 replicas
    with pytest.raises(InputError, match="the grid view needs an initial law"):
        spec.equation()


def test_a_time_becomes_steps_once_with_the_budget_named():
    assert n_steps_for(1.0, 0.3) == 3  # round(3.33)
    with pytest.raises(InputError, match="at least one step"):
        n_steps_for(0.01, 0.1)
    with pytest.raises(StepBudgetError, match=r"t_final / eta = 1 / 1e-06 .* max_steps = 1000"):
        n_steps_for(1.0, 1e-6, max_steps=1000)
    spec = as_spec(_energy(), _law(), n_particles=4, beta=1.0, eta=0.05, t_final=0.5)
    assert spec.n_steps == 10 and as_spec(spec, t_final=1.0).n_steps == 20


def test_simulation_config_builds_its_spec_and_round_trips_through_toml(tmp_path):
    """``meanfield simulate``'s configuration: frozen, read back from its own TOML, and the
    run it makes is simulate(config.spec())."""
    cfg = SimulationConfig(n_particles=8, n_data=20, n_steps=4, beta=50.0, method="mala", seed=2)
    with pytest.raises(AttributeError):
        cfg.beta = 1.0  # frozen
    path = tmp_path / "run.toml"
    cfg.to_toml(path)
    assert SimulationConfig.from_toml(path) == cfg
    spec = cfg.spec()
    assert (spec.method, spec.beta, spec.n_steps, spec.seed) == ("mala", 50.0, 4, 2)
    np.testing.assert_array_equal(cfg.run()["omega"].values, simulate(spec)["omega"].values)
    with pytest.raises(InputError, match="sample_hmc"):
        SimulationConfig(method="hmc").spec()
