"""Configuration refused by name before any work: booleans for numbers (TOML, the command
line and the Python API), seeds outside [0, 2⁶³ − 1], runs whose estimated work exceeds the
ceiling, and extra attributes that would overwrite a recorded parameter."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import meanfield.dynamics.spec as spec_module
from meanfield.cli import main
from meanfield.domains import Box
from meanfield.dynamics.langevin import simulate
from meanfield.dynamics.spec import RunSpec, estimate_work
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.errors import InputError, InputTypeError, SizeLimitError
from meanfield.kernels import Riesz
from meanfield.results import check_extra_attrs, merge_attrs
from meanfield.workbench.config import SimulationConfig

SMALL = {"n_particles": 8, "n_data": 20, "n_steps": 3}
#: float fields of SimulationConfig, with what else they need to be read
FLOATS = [
    ("beta", {}),
    ("eta", {}),
    ("alpha", {}),
    ("softening", {}),
    ("width", {}),
    ("lam", {}),
    ("confinement", {}),
    ("radius", {}),
    ("bandwidth", {}),
    ("s", {"kernel": "riesz"}),
    ("trajectory_length", {"method": "hmc"}),
    ("step_size", {"method": "hmc"}),
    ("target_accept", {"method": "hmc"}),
]
INTS = ["n_particles", "n_steps", "n_data", "data_dim", "seed", "record_every"]


def _energy():
    return Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], Box(1, 2.0))


@pytest.fixture(autouse=True)
def _default_ceiling(monkeypatch):
    """Every test sees the documented ceiling, whatever the environment sets."""
    monkeypatch.delenv(spec_module.WORK_ENV, raising=False)


# ----------------------------------------------------------------------------------------
# booleans are not numbers
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,extra", FLOATS, ids=[n for n, _ in FLOATS])
@pytest.mark.parametrize("flag", [True, False, np.True_])
def test_a_boolean_for_a_real_parameter_is_refused(name, extra, flag):
    with pytest.raises(InputTypeError, match=name):
        SimulationConfig(**{**SMALL, **extra, name: flag})


@pytest.mark.parametrize("name", INTS)
def test_a_boolean_for_a_count_is_refused(name):
    with pytest.raises(InputTypeError, match=name):
        SimulationConfig(**{**SMALL, name: True})


def test_toml_beta_true_is_refused_not_beta_1(tmp_path, capsys):
    (tmp_path / "run.toml").write_text("[simulate]\nbeta = true\nn_particles = 8\n")
    with pytest.raises(InputTypeError, match="beta .*boolean"):
        SimulationConfig.from_toml(tmp_path / "run.toml")
    argv = ["simulate", "--config", str(tmp_path / "run.toml"), "--no-progress"]
    assert main(argv + ["--out", str(tmp_path / "out.nc")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "beta" in err[0] and "InputTypeError" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.toml"]


def test_python_api_refuses_booleans():
    E = _energy()
    with pytest.raises(InputTypeError, match="beta"):
        RunSpec(energy=E, initial=np.zeros((4, 1)), beta=True, eta=0.01, n_steps=2)
    with pytest.raises(InputTypeError, match="eta"):
        simulate(E, np.zeros((4, 1)), eta=True, beta=1.0, n_steps=2)


# ----------------------------------------------------------------------------------------
# seeds numpy and torch both accept, and a netCDF attribute holds
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [2**63, 2**70, -1])
def test_seed_outside_the_int64_range_is_refused(tmp_path, capsys, seed):
    with pytest.raises(InputError, match=r"seed must be an integer in \[0, 9223372036854775807\]"):
        SimulationConfig(**SMALL, seed=seed)
    with pytest.raises(InputError, match="seed"):
        RunSpec(energy=_energy(), initial=np.zeros((4, 1)), beta=1.0, eta=0.1, n_steps=1, seed=seed)
    (tmp_path / "run.toml").write_text(f"[simulate]\nseed = {seed}\n")
    out = tmp_path / "x.nc"
    assert main(["simulate", "--config", str(tmp_path / "run.toml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed" in err[0] and not out.exists()


def test_the_largest_seed_runs_and_is_recorded(tmp_path):
    """2⁶³ − 1 seeds torch and numpy and is saved and read back exactly."""
    from meanfield.results import load_dataset, save_dataset

    ds = SimulationConfig(**SMALL, seed=2**63 - 1).run()
    back = load_dataset(save_dataset(ds, tmp_path / "run.nc"))
    assert int(back.attrs["seed"]) == 2**63 - 1 and np.isfinite(back["omega"].values).all()


# ----------------------------------------------------------------------------------------
# the work budget
# ----------------------------------------------------------------------------------------
def test_estimate_work_by_hand():
    # 3 steps x 2 evaluations (MALA) x (2 replicas x 4 particles x (1 + 3 + 5) + STEP_COST)
    # + 3 steps x 16 cells
    w = estimate_work(
        n_steps=3, n_particles=4, replicas=2, partners=3, n_data=5, cells=16, evaluations=2
    )
    assert w == 3 * (2 * (2 * 4 * 9 + spec_module.STEP_COST) + 16)


def test_spec_work_counts_its_terms():
    """The spec's estimate: full pair sum N − 1 partners, a batch B − 1, replicas, MALA."""
    E, omega = _energy(), np.zeros((2, 6, 1))  # 2 replicas of 6 particles
    base = dict(energy=E, initial=omega, beta=1.0, eta=0.01, n_steps=10)
    c = spec_module.STEP_COST
    assert RunSpec(**base).work() == 10 * (2 * 6 * (1 + 5) + c)
    assert RunSpec(**base, interaction_batch=3).work() == 10 * (2 * 6 * (1 + 2) + c)
    assert RunSpec(**base, method="mala").work() == 10 * 2 * (2 * 6 * (1 + 5) + c)


@pytest.mark.parametrize("n_steps", [10**12, 2**63 - 1])
def test_endless_runs_are_refused_before_any_work(tmp_path, capsys, monkeypatch, n_steps):
    def never(*args, **kwargs):
        raise AssertionError("the work started")

    monkeypatch.setattr(SimulationConfig, "load_data", never)
    with pytest.raises(SizeLimitError, match="n_steps") as err:
        SimulationConfig(n_steps=n_steps)
    assert "MEANFIELD_MAX_WORK" in str(err.value) and "1e+13" in str(err.value)
    (tmp_path / "run.toml").write_text(f"[simulate]\nn_steps = {n_steps}\n")
    with pytest.raises(SizeLimitError, match="n_steps"):
        SimulationConfig.from_toml(tmp_path / "run.toml")
    out = tmp_path / "run.nc"
    assert main(["simulate", "--config", str(tmp_path / "run.toml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "n_steps" in err[0] and "SizeLimitError" in err[0]
    assert not out.exists()
    with pytest.raises(SizeLimitError, match="n_steps"):  # the Python API, by the spec
        simulate(_energy(), np.zeros((4, 1)), eta=0.01, beta=1.0, n_steps=n_steps)
    with pytest.raises(SizeLimitError, match="n_steps"):  # HMC's warm-up counts too
        SimulationConfig(**{**SMALL, "method": "hmc", "n_steps": 3, "n_warmup": n_steps})


def test_the_ceiling_is_raised_by_the_environment_or_the_constant(monkeypatch):
    E, omega = _energy(), np.zeros((4, 1))
    big = dict(energy=E, initial=omega, beta=1.0, eta=0.01, n_steps=10**12)
    monkeypatch.setenv("MEANFIELD_MAX_WORK", "inf")
    assert RunSpec(**big).n_steps == 10**12  # made, not run
    assert SimulationConfig(n_steps=10**12).n_steps == 10**12
    monkeypatch.setenv("MEANFIELD_MAX_WORK", "lots")
    with pytest.raises(InputError, match="MEANFIELD_MAX_WORK"):
        RunSpec(**big)
    monkeypatch.setenv("MEANFIELD_MAX_WORK", "-1")
    with pytest.raises(InputError, match="MEANFIELD_MAX_WORK"):
        RunSpec(**big)
    monkeypatch.delenv("MEANFIELD_MAX_WORK")
    monkeypatch.setattr(spec_module, "MAX_WORK", 1e3)  # below one step of anything
    with pytest.raises(SizeLimitError, match="n_steps"):
        RunSpec(energy=E, initial=omega, beta=1.0, eta=0.01, n_steps=1)


def test_the_default_and_the_studies_sizes_are_below_the_ceiling():
    """The README's main job and a long study run (the log gas at N = 1000: η = 0.05/N,
    t = 10) are far below the ceiling."""
    assert SimulationConfig()._check_work() is None
    N = 1000
    w = estimate_work(n_steps=int(10 / (0.05 / N)), n_particles=N, partners=N - 1, replicas=4)
    assert w < spec_module.MAX_WORK / 10


def _coulomb_spec(pair, n_particles, n_steps=200, **fields):
    """A p = 2 log-gas spec from a law on an 8 × 8 grid (made, never run: no particle is
    sampled when the spec is made)."""
    from meanfield.kernels import Coulomb
    from meanfield.pde import Density, Grid

    box = Box(2, 4.0)
    E = Energy([QuadraticPotential(), pair(Coulomb(2), 0.5)], box)
    law = Density.gaussian(Grid(box, 8), np.zeros(2), 1.0)
    fields |= dict(n_particles=n_particles, n_steps=n_steps)
    return RunSpec(energy=E, initial=law, beta=10.0, eta=0.005, **fields)


def test_a_fast_pair_sum_counts_n_log_n_partners_and_is_accepted_at_a_million():
    """FastCoulombInteraction steps in O(N log N) (fast sum and k-d tree near field): the
    estimate counts c log₂ N partners, so 200 steps of 10⁶ particles (the default comparison's
    steps) are accepted; the exact sum at the same size counts N − 1 and is refused."""
    import math

    from meanfield.fastsums import DIRECT_BELOW, FastCoulombInteraction

    N, c = 10**6, spec_module.FAST_SUM_PARTNERS_PER_LOG2N
    fast = _coulomb_spec(FastCoulombInteraction, N)
    # by hand: 200 steps x (N (1 + c log2 N) + STEP_COST) + 200 x 64 cells ≈ 4.0e11
    by_hand = 200 * (N * (1 + c * math.log2(N)) + spec_module.STEP_COST) + 200 * 64
    assert fast.work() == pytest.approx(by_hand, rel=1e-12)
    assert fast.work() < spec_module.MAX_WORK / 10
    with pytest.raises(SizeLimitError, match=r"n_steps, n_particles: .* 999999 pair partners"):
        _coulomb_spec(PairInteraction, N)  # 200 x 10¹² ≈ 2e14 > 1e13
    # where the step is still O(N²) the fast term counts N − 1: below the fast sum's
    # crossover to its direct sum (p = 2: 14 000), and below the near-field tree (N < 1024)
    n = DIRECT_BELOW[2] - 1
    assert _coulomb_spec(FastCoulombInteraction, n)._work_terms()["partners"] == n - 1
    always_fast = functools.partial(FastCoulombInteraction, min_n=0)
    assert _coulomb_spec(always_fast, 1000)._work_terms()["partners"] == 999
    terms = _coulomb_spec(always_fast, 1024)._work_terms()
    assert terms["partners"] == c * 10  # log2(1024) = 10
    # random batches are direct within each batch: B − 1, fast sum or not
    batched = _coulomb_spec(FastCoulombInteraction, N, interaction_batch=8)
    assert batched._work_terms()["partners"] == 7


# ----------------------------------------------------------------------------------------
# extra attributes never overwrite a recorded parameter
# ----------------------------------------------------------------------------------------
def test_extra_attrs_that_collide_with_a_recorded_parameter_are_refused():
    recorded = {"beta": 1.0, "eta": 0.01, "N": 8}
    with pytest.raises(InputError, match="'beta'"):
        merge_attrs(recorded, {"beta": 99})
    for name in ("seed", "meanfield_version", "created"):  # written by provenance itself
        with pytest.raises(InputError, match=name):
            check_extra_attrs({name: 1}, recorded)
    with pytest.raises(InputTypeError, match="extra_attrs"):
        check_extra_attrs([("beta", 99)], recorded)
    with pytest.raises(InputTypeError, match="keys"):
        check_extra_attrs({1: "x"}, recorded)
    assert merge_attrs(recorded, {"study": "x"}) == {**recorded, "study": "x"}
    assert merge_attrs(recorded, None) == recorded
