"""The plain-data description of the model objects (meanfield.dynamics.description), the run
file (RunSpec.to_toml / from_toml) and ``meanfield run``.

The truth each round trip is checked against is the object itself: the rebuilt object equals
the original (dataclass equality for domains and grids), gives the same description, and
computes the same numbers bit for bit (kernel values, energies and forces on fixed points,
the run's trajectory).
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import meanfield as mf
from meanfield import energy as energy_mod
from meanfield import kernels as kernels_mod
from meanfield.cli import main
from meanfield.domains import Ball, Box, Torus
from meanfield.dynamics.description import MAX_ARRAY_ELEMENTS, from_dict, to_dict, toml_text
from meanfield.dynamics.spec import RunSpec
from meanfield.energy import (
    CallablePotential,
    CentredAlignment,
    DoubleWellPotential,
    Energy,
    LinearAlignment,
    NormalisedAlignment,
    PairInteraction,
    PeriodicPairInteraction,
    QuadraticPotential,
    RiskAlignment,
)
from meanfield.errors import (
    InputError,
    InputTypeError,
    MissingFileError,
    OutputPathError,
    SizeLimitError,
)
from meanfield.kernels import (
    CallableKernel,
    Cosine,
    Coulomb,
    Gaussian,
    PairKernel,
    Quadratic,
    Riesz,
)
from meanfield.pde import Density, Grid
from meanfield.results import load_dataset

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "paper_repro" / "specs" / "log_gas.toml"


class Yukawa(PairKernel):
    """A user kernel, k(z) = exp(−|z|/length)/|z| softened: importable as 'module:Yukawa'."""

    name = "yukawa"

    def __init__(self, length: float, softening: float = 0.1):
        self.length = float(length)
        self.softening = float(softening)

    def __repr__(self):  # a stable test id (the default repr holds the object's address)
        return f"Yukawa(length={self.length}, softening={self.softening})"

    def kappa(self, u):
        r = torch.sqrt(u)
        return torch.exp(-r / self.length) / r


class ScaledKernel(PairKernel):
    """Stores its argument changed (width² for width): the round trip shows it and refuses."""

    def __init__(self, width: float = 1.0):
        self.width = float(width) ** 2

    def kappa(self, u):
        return torch.exp(-u / self.width)


class HiddenKernel(PairKernel):
    """Stores its argument under another name: refused by the argument's name."""

    def __init__(self, width: float = 1.0):
        self._w = float(width)

    def kappa(self, u):
        return torch.exp(-u / self._w)


def _public_subclasses(module, base):
    """Public classes defined in ``module`` that subclass ``base`` (as tests/test_common.py)."""
    return {
        cls
        for name, cls in inspect.getmembers(module, inspect.isclass)
        if not name.startswith("_") and cls.__module__ == module.__name__ and issubclass(cls, base)
    }


def _data(n=6, d=1, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), np.array([1.0, -1.0] * (n // 2))


#: Every kernel class described: exact and softened, every sign of the Riesz s.
KERNEL_EXAMPLES = {
    Riesz: [Riesz(0.0), Riesz(0.5), Riesz(-1.0), Riesz(3.0, softening=0.5)],
    Coulomb: [Coulomb(1), Coulomb(2), Coulomb(3, softening=0.2)],
    Quadratic: [Quadratic()],
    Gaussian: [Gaussian(), Gaussian(width=0.4)],
    Cosine: [Cosine(), Cosine(frequency=2.5)],
}
#: Kernel and term classes refused by name: they wrap Python functions.
REFUSED_CLASSES = {CallableKernel, CallablePotential}


def test_every_kernel_class_is_described_or_refused():
    found = _public_subclasses(kernels_mod, PairKernel) - {PairKernel}
    assert found == set(KERNEL_EXAMPLES) | (REFUSED_CLASSES & found), "add the kernel here"


@pytest.mark.parametrize(
    "kernel", [k for ks in KERNEL_EXAMPLES.values() for k in ks] + [Yukawa(0.7)], ids=repr
)
def test_kernel_round_trip_gives_the_same_kernel(kernel):
    d = to_dict(kernel)
    again = from_dict(d)
    assert type(again) is type(kernel)
    assert to_dict(again) == d
    if isinstance(kernel, Yukawa):
        assert (again.length, again.softening) == (kernel.length, kernel.softening)
    else:
        assert repr(again) == repr(kernel)
    z = torch.tensor([[0.3], [1.7], [-2.2]], dtype=torch.float64)
    assert torch.equal(again(z), kernel(z))


def test_built_in_names_are_short_and_user_classes_their_import_path():
    assert to_dict(Riesz(0.0, softening=0.05)) == {"type": "Riesz", "s": 0.0, "softening": 0.05}
    assert to_dict(Yukawa(0.7)) == {
        "type": f"{__name__}:Yukawa",
        "length": 0.7,
        "softening": 0.1,
    }


@pytest.mark.parametrize(
    "domain", [Box(1), Box(3, 2.5), Ball(2, 0.7), Ball(1, radius=1e-3), Torus(1), Torus(2, 1.5)]
)
def test_domain_round_trip_is_equal(domain):
    assert from_dict(to_dict(domain)) == domain


def test_grid_round_trip_is_equal():
    grid = Grid(Box(2, 1.5), (6, 9))
    assert from_dict(to_dict(grid)) == grid


def _every_term():
    X, y = _data()
    return [
        QuadraticPotential(strength=2.0, center=0.25),
        DoubleWellPotential(strength=0.5),
        PairInteraction(Riesz(0.5, softening=0.1), lam=0.3),
        PairInteraction(Yukawa(0.7), lam=0.2),
        LinearAlignment(X, y, feature="positive"),
        RiskAlignment(X, y, feature="positive", alpha=2.0),
        NormalisedAlignment(X, y),
        CentredAlignment(X, y),
    ]


def _torus_terms():
    return [PeriodicPairInteraction(Cosine(), lam=0.7, domain=Torus(1))]


def test_periodic_energy_round_trip_computes_the_same_numbers_bit_for_bit():
    E = Energy(_torus_terms(), Torus(1))
    again = from_dict(to_dict(E))
    assert to_dict(again) == to_dict(E)
    omega = torch.tensor([[-3.0], [0.2], [2.9], [1.7]], dtype=torch.float64)
    (value, grad), (value0, grad0) = again.value_and_grad(omega), E.value_and_grad(omega)
    assert torch.equal(value, value0) and torch.equal(grad, grad0)


def test_every_term_class_is_described_or_refused():
    abstract = {energy_mod.Term, energy_mod.Potential, energy_mod.AlignmentTerm}
    found = _public_subclasses(energy_mod, energy_mod.Term) - abstract
    described = {type(t) for t in _every_term() + _torus_terms()}
    assert found == described | (REFUSED_CLASSES & found), "add the term here"


def test_energy_round_trip_computes_the_same_numbers_bit_for_bit():
    """Every term class, a user kernel by its import path: the rebuilt energy gives the same
    description, energy and forces (torch.equal) on fixed points."""
    E = Energy(_every_term(), Box(1, 2.0))
    d = to_dict(E)
    assert d["terms"][3]["kernel"]["type"] == f"{__name__}:Yukawa"
    again = from_dict(d)
    assert to_dict(again) == d
    omega = torch.tensor([[-1.3], [0.2], [0.9], [1.7]], dtype=torch.float64)
    (value, grad), (value0, grad0) = again.value_and_grad(omega), E.value_and_grad(omega)
    assert torch.equal(value, value0) and torch.equal(grad, grad0)


class Holder:
    """A user class (module level) holding one value: its description is the value's."""

    def __init__(self, value):
        self.value = value


def test_arrays_are_exact_and_keep_dtype_and_shape():
    """The shortest decimals read back to the same bits: 0.1, 1/3, −0.0, a subnormal."""
    x = np.array([[0.1, 1 / 3], [-0.0, 5e-324], [1e30, -2.5]])
    for value in (x, x.astype(np.float32), np.arange(6).reshape(2, 3, 1), np.zeros((0, 2))):
        d = to_dict(Holder(value))
        assert d["value"]["dtype"] == str(value.dtype)
        back = from_dict(d).value
        assert back.dtype == value.dtype and back.shape == value.shape
        assert np.array_equal(back, value) and np.array_equal(np.signbit(back), np.signbit(value))


def _spec(initial=None, kernel=None, **fields):
    box = Box(1, 2.0)
    kernel = Riesz(0.0, softening=0.05) if kernel is None else kernel
    E = Energy([QuadraticPotential(), PairInteraction(kernel, lam=0.5)], box)
    if initial is None:
        initial = Density.gaussian(Grid(box, 16), 0.0, 0.5)
        fields.setdefault("n_particles", 12)
    return RunSpec(energy=E, initial=initial, beta=20.0, eta=0.01, n_steps=15, **fields)


@pytest.mark.parametrize(
    "spec",
    [
        _spec(),
        _spec(np.linspace(-1.0, 1.0, 7)[:, None] / 3, regime="coulomb-gas", seed=5),
        _spec(torch.linspace(-1.0, 1.0, 4, dtype=torch.float64)[:, None], method="mala"),
        _spec(interaction_batch=4, scheme="sg", order=1, safety=0.25),
        _spec(kernel=Yukawa(0.7, softening=0.2)),
    ],
    ids=["density", "particles", "tensor", "batch", "user-kernel"],
)
def test_run_spec_to_toml_from_toml_is_equal(spec, tmp_path):
    path = spec.to_toml(tmp_path / "run.toml")
    again = RunSpec.from_toml(path)
    assert to_dict(again) == to_dict(spec)
    assert again.describe() == spec.describe()
    assert np.array_equal(np.asarray(again.particles()), np.asarray(spec.particles()))


def test_meanfield_run_equals_simulate_bit_for_bit(tmp_path, capsys):
    """The file written by ``meanfield run`` holds what mf.simulate(spec) returns for the spec
    the file was written from: every array equal, every attribute but the creation time."""
    spec = _spec(
        np.array([[-0.7], [-0.1], [0.4], [1.1], [1.5]]), interaction_batch=3, regime="coulomb-gas"
    )
    spec.to_toml(tmp_path / "run.toml")
    out = tmp_path / "run.nc"
    assert main(["run", str(tmp_path / "run.toml"), "--out", str(out), "--no-progress"]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"wrote {out}")
    ran, direct = load_dataset(out), mf.simulate(spec)
    assert set(ran.data_vars) == set(direct.data_vars)
    for name in direct.data_vars:
        assert np.array_equal(ran[name].values, direct[name].values), name
    assert np.array_equal(ran.omega.values, direct.omega.values)
    assert set(ran.attrs) == set(direct.attrs)
    for key, value in direct.attrs.items():
        if key != "created":  # the clock time of each run
            assert ran.attrs[key] == value, key


def test_meanfield_run_checks_the_output_before_running(tmp_path):
    _spec().to_toml(tmp_path / "run.toml")
    (tmp_path / "folder").mkdir()
    argv = ["run", str(tmp_path / "run.toml"), "--out", str(tmp_path / "folder"), "--no-progress"]
    assert main(argv) == 2
    assert main(["run", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "x.nc")]) == 2
    assert not (tmp_path / "x.nc").exists()


def test_the_example_file_is_the_log_gas_and_runs(tmp_path):
    """paper_repro/specs/log_gas.toml (shown in docs/cli.rst) is the spec built in Python; cut
    to 40 steps it runs through ``meanfield run`` (MALA keeps the particles in the box)."""
    box = Box(1, 4.0)
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0, softening=0.05), lam=0.5)], box)
    expected = RunSpec(
        energy=E,
        initial=Density.uniform(Grid(box, 8)),
        n_particles=50,
        beta=2.0,
        eta=0.001,
        n_steps=5000,
        regime="coulomb-gas",
        method="mala",
        seed=0,
    )
    spec = RunSpec.from_toml(EXAMPLE)
    assert to_dict(spec) == to_dict(expected)
    spec.replace(n_steps=40).to_toml(tmp_path / "short.toml")
    out = tmp_path / "short.nc"
    assert main(["run", str(tmp_path / "short.toml"), "--out", str(out), "--no-progress"]) == 0
    omega = load_dataset(out).omega.values
    assert omega.shape[-2:] == (50, 1) and np.all(np.abs(omega) <= 4.0)


# ------------------------------------------------------------------------------------ refusals
def test_unknown_type_name_is_refused_with_the_built_in_names():
    with pytest.raises(InputError, match=r"unknown type 'Yukawa'.*Box.*'module:Class'"):
        from_dict({"type": "Yukawa", "length": 1.0})


@pytest.mark.parametrize(
    "path, match",
    [
        ("no_such_module_for_meanfield:Thing", "cannot be imported"),
        ("meanfield.kernels:NoSuchKernel", "has no 'NoSuchKernel'"),
        ("meanfield.kernels:make_kernel", "is not a class"),
        ("meanfield.kernels", "unknown type 'meanfield.kernels'"),
        ("meanfield.kernels:", "must be 'module:Class'"),
    ],
)
def test_a_path_that_names_no_class_is_refused(path, match):
    with pytest.raises((InputError, InputTypeError), match=match):
        from_dict({"type": "Energy", "terms": [{"type": path}], "domain": to_dict(Box(1))})


def test_an_unknown_argument_is_refused_by_name():
    with pytest.raises(InputError, match=r"Riesz takes the arguments \['s', 'softening'\]"):
        from_dict({"type": "Riesz", "s": 1.0, "eps": 0.1})


def test_objects_that_cannot_be_described_are_refused_by_name():
    with pytest.raises(InputTypeError, match="CallableKernel cannot be described: it wraps"):
        to_dict(PairInteraction(CallableKernel(lambda u: 1 / (1 + u), name="lorentz")))
    with pytest.raises(InputTypeError, match="CallablePotential cannot be described"):
        to_dict(Energy([CallablePotential(lambda w: (w**2).sum(-1))], Box(1)))

    class Local(PairKernel):
        def kappa(self, u):
            return u

    with pytest.raises(InputTypeError, match="Local.*define the class at the top level"):
        to_dict(Local())
    with pytest.raises(InputTypeError, match="argument 'width' is not stored as the attribute"):
        to_dict(HiddenKernel(2.0))
    with pytest.raises(InputTypeError, match=r"ScaledKernel cannot be described.*\['width'\]"):
        to_dict(ScaledKernel(2.0))
    with pytest.raises(InputTypeError, match="a function"):
        to_dict(math.sqrt)


def test_an_array_above_the_inline_limit_is_refused_by_name():
    X = np.zeros((MAX_ARRAY_ELEMENTS + 1, 1))
    term = LinearAlignment(X, np.resize([1.0, -1.0], len(X)))
    with pytest.raises(SizeLimitError, match=r"obj\.X: an array of shape .* data file"):
        to_dict(term)


def test_run_file_refusals(tmp_path):
    with pytest.raises(MissingFileError, match="does not exist"):
        RunSpec.from_toml(tmp_path / "none.toml")
    (tmp_path / "box.toml").write_text(toml_text(to_dict(Box(1))))
    with pytest.raises(InputError, match="must describe a RunSpec"):
        RunSpec.from_toml(tmp_path / "box.toml")
    with pytest.raises(OutputPathError, match="path"):
        _spec().to_toml(tmp_path)  # a folder
    (tmp_path / "bad.toml").write_text("type = ")
    with pytest.raises(InputError, match="not valid TOML"):
        RunSpec.from_toml(tmp_path / "bad.toml")
