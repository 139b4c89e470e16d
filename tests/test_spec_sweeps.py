"""Sweeps over a run specification (meanfield.workbench.spec_sweeps.run_spec_sweep): any field
of the spec's plain-data description on an axis.

The truth each point is checked against is the direct run: ``simulate`` of the spec with the
same fields replaced (``spec.replace`` for run parameters, the energy rebuilt in Python for a
term's parameter), which a sweep point must equal bit for bit (the description is exact:
every float64 written as the shortest decimal that reads back to the same bits).  Refusals
are checked by their error class and the name in the message, with nothing written.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from meanfield.cli import main
from meanfield.domains import Box
from meanfield.dynamics.langevin import simulate
from meanfield.dynamics.spec import RunSpec
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.errors import InputError, InputTypeError, MeanfieldWarning, SizeLimitError
from meanfield.kernels import Riesz
from meanfield.pde import Density, Grid
from meanfield.results import load_dataset
from meanfield.workbench.spec_sweeps import (
    check_axes,
    read_sweep_file,
    run_spec_sweep,
    write_sweep_file,
)

BOX = Box(1, 2.0)


def _energy(lam=0.5, strength=1.0):
    return Energy([QuadraticPotential(strength), PairInteraction(Riesz(-1.0), lam=lam)], BOX)


def _spec(**changes):
    fields = dict(
        energy=_energy(),
        initial=np.linspace(-1.0, 1.0, 6)[:, None],
        beta=10.0,
        eta=0.01,
        n_steps=8,
    )
    return RunSpec(**{**fields, **changes})


def _law_spec(**changes):
    """A spec whose initial state is a law on a grid, so N is free to vary."""
    law = Density.gaussian(Grid(BOX, 32), 0.0, 0.5)
    return RunSpec(energy=_energy(), initial=law, n_particles=5, beta=4.0, eta=0.01, n_steps=6)


def _sweep(spec, axes, out, **kw):
    return run_spec_sweep(spec, axes, out, scheduler="threads", n_workers=1, progress=False, **kw)


def _same_run(a, b):
    """Every data variable equal to the last bit (NaN padding of a sweep cut away first)."""
    for name in b.data_vars:
        got = a[name].isel({d: slice(0, b.sizes[d]) for d in b[name].dims}).values
        assert np.array_equal(got, b[name].values), name


def test_every_point_is_the_direct_run_bit_for_bit(tmp_path):
    """Axes on a run parameter (beta), on a term's parameter (energy.terms[1].lam) and the
    seeds: each point equals simulate() of the spec with those fields replaced."""
    lams, betas, seeds = [0.25, 0.5], [1.0, 10.0], [0, 3]
    ds = _sweep(_spec(), {"energy.terms[1].lam": lams, "beta": betas}, tmp_path, seeds=seeds)
    assert ds["omega"].dims == ("energy.terms[1].lam", "beta", "seed", "time", "particle", "dim")
    assert ds["beta"].values.tolist() == betas and ds["seed"].values.tolist() == seeds
    for lam in lams:
        for beta in betas:
            for seed in seeds:
                direct = simulate(_spec(energy=_energy(lam=lam), beta=beta, seed=seed))
                point = ds.sel({"energy.terms[1].lam": lam, "beta": beta, "seed": seed})
                _same_run(point, direct)
    # the gathered file is the returned dataset
    on_disk = load_dataset(tmp_path / "sweep.nc")
    assert np.array_equal(on_disk["omega"].values, ds["omega"].values)


def test_particle_numbers_on_an_axis_pad_with_nan(tmp_path):
    """N varies (a law as the initial state): each run is the direct run, the shorter ones
    padded with NaN on the particle axis; an integer axis for a real field reads as reals."""
    ds = _sweep(_law_spec(), {"n_particles": [3, 5], "energy.terms[0].strength": [1, 2]}, tmp_path)
    assert ds["energy.terms[0].strength"].values.tolist() == [1.0, 2.0]
    for n in (3, 5):
        direct = simulate(_law_spec().replace(n_particles=n))
        _same_run(ds.sel({"n_particles": n, "energy.terms[0].strength": 1.0}), direct)
    assert np.isnan(ds["omega"].sel(n_particles=3).values[..., 3:, :]).all()


def test_a_rerun_resumes_and_a_changed_spec_computes_its_own_runs(tmp_path):
    axes = {"beta": [1.0, 4.0]}
    first = _sweep(_spec(), axes, tmp_path)
    runs = sorted((tmp_path / "runs").glob("*.nc"))
    stamps = [p.stat().st_mtime_ns for p in runs]
    # the base value of a swept field is not part of the key: the same runs, reused
    again = _sweep(_spec(beta=99.0), axes, tmp_path)
    assert [p.stat().st_mtime_ns for p in runs] == stamps
    assert np.array_equal(again["omega"].values, first["omega"].values)
    # another fixed field (eta) is another configuration: its own runs, and a note
    notes = []
    other = _sweep(_spec(eta=0.02), axes, tmp_path, log=notes.append)
    assert len(list((tmp_path / "runs").glob("*.nc"))) == 4
    assert notes and "eta" in notes[0]
    _same_run(other.sel(beta=4.0), simulate(_spec(eta=0.02, beta=4.0)))


@pytest.mark.parametrize(
    ("axes", "error", "named"),
    [
        ({}, InputError, "axes must name at least one field"),
        ({"bta": [1.0]}, InputError, "'bta' does not exist.*its fields: type, energy"),
        ({"energy.terms[2].lam": [1.0]}, InputError, r"energy\.terms holds 2 item"),
        ({"energy.terms[1].lamb": [1.0]}, InputError, r"energy\.terms\[1\] has no field 'lamb'"),
        ({"beta.x": [1.0]}, InputError, "'beta.x' does not exist.*beta is not a table"),
        ({"energy..lam": [1.0]}, InputError, "not a path into the description"),
        ({"beta": []}, InputError, r"axes\['beta'\] must be a non-empty list"),
        ({"beta": 1.0}, InputTypeError, r"axes\['beta'\] must be a non-empty list"),
        ({"beta": [1.0, "ten"]}, InputTypeError, r"axes\['beta'\]\[1\] must be a real number"),
        ({"beta": [True]}, InputTypeError, r"axes\['beta'\]\[0\] must be a real number"),
        ({"n_steps": [5, 7.5]}, InputTypeError, r"axes\['n_steps'\]\[1\] must be an integer"),
        ({"regime": [1]}, InputTypeError, r"axes\['regime'\]\[0\] must be a string"),
        ({"beta": [None]}, InputTypeError, r"axes\['beta'\]\[0\] must be a number"),
        ({"energy.terms[1]": [1.0]}, InputTypeError, "holds a table.*sweep a field inside it"),
        ({"beta": [1, 1.0]}, InputError, "repeated values"),
        ({"beta": [1.0, -1.0]}, InputError, r"sweep point beta = -1\.0: beta"),
        ({"regime": ["hot"]}, InputError, "sweep point regime = 'hot'.*unknown regime"),
        ({"n_particles": [7]}, InputError, "sweep point n_particles = 7.*initial particles are 6"),
        ({"n_steps": [10**12]}, SizeLimitError, "sweep point n_steps = 1000000000000"),
    ],
)
def test_bad_axes_are_refused_by_name_before_any_work(tmp_path, axes, error, named):
    out = tmp_path / "out"
    with pytest.raises(error, match=named):
        _sweep(_spec(), axes, out)
    assert not out.exists()


def test_seeds_and_a_seed_axis_are_one_or_the_other(tmp_path):
    with pytest.raises(InputError, match="seeds: the axes already sweep 'seed'"):
        _sweep(_spec(), {"seed": [1]}, tmp_path / "out", seeds=[0, 1])
    with pytest.raises(InputTypeError, match="seeds must be a list of integers"):
        _sweep(_spec(), {"beta": [1.0]}, tmp_path / "out", seeds=3)
    with pytest.raises(InputTypeError, match=r"axes\['seed'\]\[1\] must be an integer"):
        _sweep(_spec(), {"beta": [1.0]}, tmp_path / "out", seeds=[0, 1.5])
    with pytest.raises(InputTypeError, match="spec must be a meanfield.dynamics.spec.RunSpec"):
        _sweep(_energy(), {"beta": [1.0]}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_nested_axes_read_as_dotted_paths():
    d = {"type": "RunSpec", "energy": {"domain": {"half_width": 2.0}}, "beta": 1.0}
    axes = {"energy": {"domain": {"half_width": [1, 3]}}, "beta": [2.0]}
    assert check_axes(d, axes) == {"energy.domain.half_width": [1.0, 3.0], "beta": [2.0]}


def test_a_sweep_file_run_by_the_command_line_is_the_python_sweep(tmp_path, capsys):
    axes = {"energy.terms[1].lam": [0.25, 0.5], "beta": [1.0, 10.0]}
    path = write_sweep_file(tmp_path / "sweep.toml", _spec(), axes, seeds=[0, 1], record_every=2)
    settings = read_sweep_file(path)
    assert settings["axes"] == axes and settings["seeds"] == [0, 1]
    argv = ["run", str(path), "--out", str(tmp_path / "cli"), "--no-progress"]
    assert main([*argv, "--scheduler", "threads", "--n-workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert "energy.terms[1].lam (2), beta (2), seed (2): 8 runs" in printed
    cli = load_dataset(tmp_path / "cli" / "sweep.nc")
    py = _sweep(_spec(), axes, tmp_path / "py", seeds=[0, 1], record_every=2)
    assert np.array_equal(cli["omega"].values, py["omega"].values)
    assert cli.sizes["time"] == 5  # 8 steps recorded every 2
    assert json.loads(cli.attrs["sweep_fixed"])["description"]["beta"] == "<swept>"


def test_a_hand_written_sweep_file_with_nested_axes(tmp_path):
    """A [spec] table written by RunSpec.to_toml, axes as TOML tables ([axes.energy.domain])."""
    spec_text = _spec().to_toml(tmp_path / "spec.toml").read_text()
    body = "".join(
        f"[spec.{line[1:]}\n" if line.startswith("[") and not line.startswith("[[") else
        f"[[spec.{line[2:]}\n" if line.startswith("[[") else line + "\n"
        for line in spec_text.splitlines()
    )  # fmt: skip
    text = 'type = "Sweep"\n\n[axes.energy.domain]\nhalf_width = [1.5, 2.0]\n\n[spec]\n' + body
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    ds = run_spec_sweep(**read_sweep_file(path), out_dir=tmp_path / "out", scheduler="threads",
                    progress=False)  # fmt: skip
    box = Box(1, 1.5)
    energy = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), lam=0.5)], box)
    _same_run(ds.sel({"energy.domain.half_width": 1.5}), simulate(_spec(energy=energy)))


@pytest.mark.parametrize(
    ("text", "flags", "named"),
    [
        ('type = "Sweep"\n[axes]\nbeta = [1.0]\n', [], "no [spec] table"),
        ('type = "Sweep"\nsweeps = 1\n', [], "unknown key(s) sweeps"),
        (None, ["--set", "beta=2"], '--set: only for a study file (type = "Study"), not a sweep'),
        (None, ["--scheduler", "nowhere"], "scheduler must be 'local', 'threads'"),
        (None, ["--n-workers", "0"], "--n-workers"),
    ],
)
def test_a_bad_sweep_file_or_flag_ends_with_one_line_and_writes_nothing(
    tmp_path, capsys, text, flags, named
):
    path = tmp_path / "sweep.toml"
    if text is None:
        write_sweep_file(path, _spec(), {"beta": [1.0]})
    else:
        path.write_text(text)
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--no-progress", *flags]) == 2
    assert named in capsys.readouterr().err
    assert not out.exists()


def test_a_sweep_that_finds_another_configuration_warns(tmp_path):
    _sweep(_spec(), {"beta": [1.0]}, tmp_path)
    with pytest.warns(MeanfieldWarning, match="another configuration") as caught:
        run_spec_sweep(_spec(n_steps=9), {"beta": [1.0]}, tmp_path, scheduler="threads",
                   progress=False)  # fmt: skip
    assert all(w.filename == __file__ for w in caught)  # it points at the caller


def test_a_configuration_is_a_preset_whose_spec_sweeps(tmp_path):
    """The spec a SimulationConfig builds (the menu's energy, its data and start inline) is
    swept like any other: the point lam = 0.2 is the run of the configuration with lam = 0.2."""
    import dataclasses

    from meanfield.workbench.config import SimulationConfig

    cfg = SimulationConfig(n_particles=8, n_data=20, n_steps=5, seed=2)
    ds = _sweep(cfg.spec(), {"energy.terms[1].lam": [0.05, 0.2]}, tmp_path)
    direct = dataclasses.replace(cfg, lam=0.2).run()
    assert np.array_equal(ds["omega"].sel({"energy.terms[1].lam": 0.2}).values, direct["omega"])
