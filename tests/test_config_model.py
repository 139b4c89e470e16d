"""The configurations of ``meanfield simulate`` and ``meanfield compare`` as presets over the
plain-data description: a ``model`` (a TOML table, a description file or its JSON text)
replaces the menu's energy with any energy the description can express — a package term the
menu never offered (DoubleWellPotential, a Torus with PeriodicPairInteraction) and a user's
kernel named ``"module:Class"`` — through Python, TOML and the command line.

Truths: the run of a configuration with a model is ``simulate`` of the RunSpec built by hand
from the same energy (``from_dict`` of the description, or the objects themselves) and the
same initial particles, bit for bit; the command line writes what ``cfg.run()`` returns; and a
configuration without a model still builds the menu's energy term for term (its runs are the
hand-built runs of that energy bit for bit).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from meanfield.cli import main
from meanfield.domains import Box, Torus
from meanfield.dynamics.description import from_dict, to_dict, toml_text
from meanfield.dynamics.langevin import simulate
from meanfield.dynamics.spec import RunSpec
from meanfield.energy import (
    DoubleWellPotential,
    Energy,
    LinearAlignment,
    PairInteraction,
    PeriodicPairInteraction,
    QuadraticPotential,
)
from meanfield.errors import InputError, InputTypeError, MissingFileError
from meanfield.features import sample_initial_particles
from meanfield.kernels import Cosine, Coulomb, PairKernel, make_kernel
from meanfield.pde import Density, Grid
from meanfield.results import load_dataset
from meanfield.workbench.config import SimulationConfig
from meanfield.workbench.problems import ComparisonConfig


class Bump(PairKernel):
    """A user's kernel, k(z) = |z|²/4 + exp(−|z|²) (κ(u) = u/4 + e^(−u), κ' by autograd):
    short-range repulsion, long-range attraction, smooth; not a built-in, reached through
    its import path "module:Class"."""

    name = "bump"

    def kappa(self, u):
        return u / 4 + 2.718281828459045 ** (-u)  # torch tensors and numpy arrays alike


BUMP = f"{Bump.__module__}:Bump"


def _user_model(half_width=2.0):
    """The double well and the user's kernel on [−L, L]: nothing the menu could build."""
    return {
        "type": "Energy",
        "terms": [
            {"type": "DoubleWellPotential", "strength": 1.0},
            {"type": "PairInteraction", "kernel": {"type": BUMP}, "lam": 0.5},
        ],
        "domain": {"type": "Box", "dim": 1, "half_width": half_width},
    }


def _direct(cfg, energy):
    """The run of ``cfg``'s run parameters on ``energy`` from N(0, I_p) particles of its seed
    (the draw of a model without alignment data), built without the configuration."""
    omega0 = sample_initial_particles("positive", cfg.n_particles, energy.domain.dim, seed=cfg.seed)
    spec = RunSpec(energy=energy, initial=omega0, beta=cfg.beta, eta=cfg.eta, n_steps=cfg.n_steps,
                   seed=cfg.seed)  # fmt: skip
    return simulate(spec, record_every=cfg.record_every)


RUN = dict(n_particles=12, n_steps=20, beta=5.0, eta=0.01, seed=3)


def test_a_user_kernel_and_a_package_potential_go_through_the_config():
    cfg = SimulationConfig(model=_user_model(), **RUN)
    energy = Energy([DoubleWellPotential(), PairInteraction(Bump(), 0.5)], Box(1, 2.0))
    assert to_dict(cfg.build_energy()) == to_dict(energy)
    ds = cfg.run()
    direct = _direct(cfg, energy)
    assert np.array_equal(ds["omega"].values, direct["omega"].values)
    assert np.array_equal(ds["energy"].values, direct["energy"].values)
    assert json.loads(ds.attrs["config_model"]) == json.loads(cfg.model)


def test_a_periodic_model_runs_on_the_circle():
    """The noisy Kuramoto coupling on the torus [−π, π): wrapped particles stay in the cell."""
    torus = Torus(1)
    energy = Energy([PeriodicPairInteraction(Cosine(), lam=1.0, domain=torus)], torus)
    cfg = SimulationConfig(model=json.dumps(to_dict(energy)), **RUN)
    ds = cfg.run()
    assert np.array_equal(ds["omega"].values, _direct(cfg, energy)["omega"].values)
    assert (np.abs(ds["omega"].values) <= np.pi).all()


def test_the_model_as_a_toml_table_a_file_and_json_text_is_one_config(tmp_path):
    table = tmp_path / "run.toml"
    table.write_text(
        "[simulate]\nn_particles = 12\nn_steps = 20\nbeta = 5.0\neta = 0.01\nseed = 3\n\n"
        + "[simulate.model]\n"
        + "".join(
            f"[[simulate.model.{line[2:]}\n"
            if line.startswith("[[")
            else f"[simulate.model.{line[1:]}\n"
            if line.startswith("[")
            else line + "\n"
            for line in toml_text(_user_model()).splitlines()
        )  # fmt: skip
    )
    from_table = SimulationConfig.from_toml(table)
    model_file = tmp_path / "model.toml"
    model_file.write_text(toml_text(_user_model()))
    from_file = SimulationConfig(model=str(model_file), **RUN)
    json_file = tmp_path / "model.json"
    json_file.write_text(json.dumps(_user_model()))
    from_json_file = SimulationConfig(model=str(json_file), **RUN)
    from_text = SimulationConfig(model=json.dumps(_user_model()), **RUN)
    assert from_table == from_text  # the table stored as its JSON text, keys sorted
    runs = [c.run()["omega"].values for c in (from_table, from_file, from_json_file, from_text)]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])
    # to_toml writes the model as a [simulate.model] table that reads back equal
    again = tmp_path / "again.toml"
    from_table.to_toml(again)
    assert "[simulate.model]" in again.read_text()
    assert SimulationConfig.from_toml(again) == from_table


def test_the_command_line_runs_a_user_model_from_the_config_and_the_flag(tmp_path, capsys):
    """``meanfield simulate --config run.toml`` (a [simulate.model] table) and ``--model
    FILE`` write what cfg.run() returns."""
    cfg = SimulationConfig(model=_user_model(), **RUN)
    config = tmp_path / "run.toml"
    cfg.to_toml(config)
    out = tmp_path / "a.nc"
    assert main(["simulate", "--config", str(config), "--out", str(out), "--no-progress"]) == 0
    expected = cfg.run()["omega"].values
    assert np.array_equal(load_dataset(out)["omega"].values, expected)
    model_file = tmp_path / "model.toml"
    model_file.write_text(toml_text(_user_model()))
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in RUN.items()]
    out_b = tmp_path / "b.nc"
    argv = ["simulate", "--model", str(model_file), *flags, "--out", str(out_b), "--no-progress"]
    assert main(argv) == 0
    assert np.array_equal(load_dataset(out_b)["omega"].values, expected)
    # a menu flag beside a model is refused by its flag, before any work
    bad = tmp_path / "c.nc"
    argv = ["simulate", "--model", str(model_file), "--kernel", "log", "--out", str(bad)]
    assert main(argv) == 2
    assert "kernel (--kernel) = 'log' builds the menu's energy" in capsys.readouterr().err
    assert not bad.exists()


def test_unknown_kernel_names_stay_refused_and_import_paths_go_through_the_model(capsys, tmp_path):
    """The menu keeps refusing a name it does not know (--kernel yukawa); a kernel of one's
    own is named by its import path inside a model."""
    assert main(["simulate", "--kernel", "yukawa", "--out", str(tmp_path / "x.nc")]) == 2
    assert "kernel" in capsys.readouterr().err
    assert isinstance(from_dict(_user_model()).terms[1].kernel, Bump)


@pytest.mark.parametrize(
    ("model", "error", "named"),
    [
        ('{"type": "Box", "dim": 1}', InputTypeError, 'model must describe an Energy'),
        ('{"type": "Energy", "terms": [{"type": "Yukawa"}]}', InputError, "model: unknown type"),
        ('{"type": "Energy", "terms": [], "domain": {"type": "Box", "dim": 1, "w": 1}}',
         InputError, "model: .*Box takes the arguments"),
        ('{"type": "Energy", "terms": [{"type": "nowhere:K"}]}', InputError,
         "model: .*module 'nowhere' cannot be imported"),
        ("{not json", InputError, "model: text starting with '{' is read as JSON"),
        ("no/such/model.toml", MissingFileError, "model: the description file"),
        ({"terms": []}, InputError, 'a description is a table with a "type"'),
    ],
)  # fmt: skip
def test_a_bad_model_is_refused_by_name_when_the_config_is_made(model, error, named):
    with pytest.raises(error, match=named):
        SimulationConfig(model=model)
    with pytest.raises(error, match=named):
        ComparisonConfig(model=model)


@pytest.mark.parametrize("field", ["feature", "alignment", "confinement", "domain", "dtype"])
def test_every_menu_field_beside_a_model_is_refused(field):
    other = {"feature": "positive", "alignment": "risk", "confinement": 1.0, "domain": "ball",
             "dtype": "float32"}[field]  # fmt: skip
    with pytest.raises(InputError, match=f"{field} .* builds the menu's energy"):
        SimulationConfig(model=_user_model(), **{field: other})


def test_a_model_with_alignment_data_draws_for_its_feature_map():
    """The start of a model holding an alignment term is the draw for that term's feature map
    in its data's dimension (fourier: the frequencies and the phase)."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(10, 2)), np.where(np.arange(10) % 2, 1.0, -1.0)
    energy = Energy([LinearAlignment(X, y, "fourier"), QuadraticPotential()], Box(3, 4.0))
    cfg = SimulationConfig(model=to_dict(energy), **RUN)
    expected = sample_initial_particles("fourier", 12, 2, seed=3)
    assert np.array_equal(cfg.initial_particles(99).numpy(), expected.numpy())


def test_an_unsoftened_singular_model_kernel_separates_the_start():
    model = {"type": "Energy", "domain": {"type": "Box", "dim": 1, "half_width": 4.0},
             "terms": [{"type": "QuadraticPotential"},
                       {"type": "PairInteraction", "kernel": {"type": "Gaussian"},
                        "lam": 0.5}]}  # fmt: skip
    cfg = SimulationConfig(model=model, n_particles=50)  # a smooth kernel: the plain draw
    assert cfg.start_spacing(1) == 0.0
    plain = sample_initial_particles("positive", 50, 1, seed=0)
    assert np.array_equal(cfg.initial_particles(1).numpy(), plain.numpy())
    model["terms"][1]["kernel"] = {"type": "Riesz", "s": 0.0, "softening": 0.0}  # log: singular
    cfg = SimulationConfig(model=model, n_particles=50, seed=2)
    omega = np.sort(cfg.initial_particles(1).numpy()[:, 0])
    assert cfg.start_spacing(1) == 0.5 / 50 and np.diff(omega).min() >= 0.5 / 50


def test_the_menu_builds_the_same_energy_and_run_as_before():
    """Without a model the menu is unchanged: the README's energy term for term, and a run
    that is the hand-built run of that energy bit for bit."""
    cfg = SimulationConfig(n_particles=16, n_data=20, n_steps=5, seed=1, confinement=0.5)
    X, y = cfg.load_data()
    energy = Energy(
        [QuadraticPotential(0.5), LinearAlignment(X, y, "fourier"),
         PairInteraction(make_kernel("coulomb", dim=3, softening=0.05), 0.05)],
        Box(3, 4.0),
    )  # fmt: skip
    assert to_dict(cfg.build_energy()) == to_dict(energy)
    omega0 = sample_initial_particles("fourier", 16, 2, seed=1)
    spec = RunSpec(energy=energy, initial=omega0, beta=cfg.beta, eta=cfg.eta, n_steps=5, seed=1)
    assert np.array_equal(cfg.run()["omega"].values, simulate(spec)["omega"].values)
    assert cfg.model is None and "model" not in cfg.to_toml()


# ------------------------------------------------------------------ compare (ComparisonConfig)
SMALL = dict(cells=16, n_particles=20, t_final=0.02, n_data=10)


def test_a_comparison_of_a_user_model():
    model = _user_model(half_width=2.0)
    problem = ComparisonConfig(model=model, cells=16, n_particles=20, t_final=0.02)
    energy = from_dict(model)
    spec = problem.spec()
    assert to_dict(spec.energy) == to_dict(energy) and problem.data == (None, None)
    assert spec.grid.n == (16,) and spec.initial.grid.domain == Box(1, 2.0)
    # the hand-built spec: the model's energy, the Gaussian law on its box, the run parameters
    law = Density.gaussian(Grid(Box(1, 2.0), 16), 0.0, 0.3)
    direct = RunSpec(energy=energy, initial=law, n_particles=20, beta=10.0, eta=0.005,
                     n_steps=4, seed=0)  # fmt: skip
    assert np.array_equal(simulate(spec)["omega"].values, simulate(direct)["omega"].values)


def test_the_readme_problem_is_unchanged_without_a_model():
    problem = ComparisonConfig(**SMALL)
    X, y = problem.data
    energy = Energy(
        [QuadraticPotential(1.0), LinearAlignment(X, y, "positive"),
         PairInteraction(Coulomb(1), 0.5)],
        Box(1, 2.0),
    )  # fmt: skip
    assert to_dict(problem.energy) == to_dict(energy) and problem.model is None


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"dim": 2}, r"model: its domain Box\(dim=1.*dim \(--dim\) = 2; set dim = 1"),
        ({"lam": 0.2}, "lam .* builds the menu's energy"),
        ({"radius": 3.0}, "radius .* builds the menu's energy"),
    ],
)
def test_a_comparison_model_refuses_another_dimension_and_the_menu(changes, named):
    with pytest.raises(InputError, match=named):
        ComparisonConfig(model=_user_model(), **changes)


def test_compare_on_the_command_line_with_a_model_table(tmp_path, capsys):
    config = tmp_path / "cmp.toml"
    problem = ComparisonConfig(model=_user_model(), cells=16, n_particles=20, t_final=0.02)
    problem.to_toml(config)
    assert ComparisonConfig.from_toml(config) == problem
    out = tmp_path / "cmp"
    argv = ["compare", "--config", str(config), "--out", str(out), "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().err
    ds = load_dataset(out / "comparison.nc")
    assert json.loads(ds.attrs["problem_model"]) == json.loads(problem.model)
