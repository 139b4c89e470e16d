"""Issue 11: a table of bad inputs, on the command line and the Python API.

Each row asserts the error type (or exit status 2 with one line on stderr), that the message
names the parameter, that nothing was written, and that the refusal came before any work
(every row together runs in a few seconds).  Odd inputs that have a right answer are checked
against an independent value (ANSWER_CASES), and a result float64 cannot resolve must warn
by name (WARN_CASES).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from meanfield.cli import main
from meanfield.errors import (
    DataFileError,
    InputError,
    InputTypeError,
    MeanfieldError,
    MissingFileError,
    OutputPathError,
    ResourceError,
    SizeLimitError,
    StepBudgetError,
)

#: A run file whose initial particles hold a NaN (the table's name for them: initial)
NAN_INITIAL_RUN = """type = "RunSpec"
beta = 1.0
eta = 0.01
n_steps = 3
[energy]
type = "Energy"
[[energy.terms]]
type = "QuadraticPotential"
[energy.domain]
type = "Box"
dim = 1
half_width = 2.0
[initial]
type = "array"
dtype = "float64"
shape = [2, 1]
data = [[0.0], [nan]]
"""


def _files(root: Path) -> set:
    return {p.relative_to(root) for p in root.rglob("*")}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working folder with a file and a folder that bad paths point at; cwd moved there."""
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "a_dir").mkdir()
    (tmp_path / "bad.txt").write_text("1,2,3\n")
    (tmp_path / "bad.toml").write_text("n_particle = 3\n")
    (tmp_path / "cmp_bad.toml").write_text("[compare]\nn_particle = 3\n")
    (tmp_path / "broken.toml").write_text("n_particles = [\n")
    (tmp_path / "table.toml").write_text("simulate = 3\n")
    (tmp_path / "binary.toml").write_bytes(b"\x89HDF\r\n\x1a\n\x00\x00")
    (tmp_path / "dir.toml").mkdir()
    (tmp_path / "garbage.npz").write_bytes(b"\x89HDF\r\n\x1a\n" * 8)
    (tmp_path / "nan_initial.toml").write_text(NAN_INITIAL_RUN)
    np.save(tmp_path / "one.npy", np.ones(3))
    (tmp_path / "one.npy").rename(tmp_path / "one.npz")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ----------------------------------------------------------------------------------------
# the command line: (arguments, text the one-line error must contain)
# ----------------------------------------------------------------------------------------
SIM = ["simulate", "--no-progress", "--out", "out/run.nc"]
CMP = ["compare", "--no-progress", "--out", "out/cmp"]
EQ = ["study", "equilibrium", "--no-progress", "--scheduler", "threads", "--out", "out/eq"]
PG = ["study", "particles-vs-grid", "--no-progress", "--scheduler", "threads", "--out", "out/pg"]
BETA = ["study", "beta", "--no-progress", "--scheduler", "threads", "--out", "out/b"]
TD = ["study", "t-decay", "--no-progress", "--out", "out/t"]

#: The README's log gas (an unsoftened singular kernel: the start is separated)
LOG_GAS = (
    "--alignment none --confinement 1 --kernel log --softening 0 --lam 0.5 --feature positive "
    "--data-dim 1 --method mala"
).split()

CLI_CASES = [
    (SIM + ["--beta", "0"], "beta"),
    (SIM + ["--beta", "-1"], "beta"),
    (SIM + ["--beta", "nan"], "beta"),
    (SIM + ["--beta", "inf"], "beta"),
    (SIM + ["--n-particles", "0"], "n_particles"),
    (SIM + ["--n-steps", "0"], "n_steps"),
    (SIM + ["--eta", "-0.1"], "eta"),
    (SIM + ["--eta", "0"], "eta"),
    (SIM + ["--feature", "cosine"], "feature"),
    (SIM + ["--kernel", "yukawa"], "kernel"),
    (SIM + ["--kernel", "riesz"], "s (--s)"),
    (SIM + ["--kernel", "log", "--s", "1"], "s (Riesz exponent)"),
    (SIM + ["--kernel", "riesz", "--s", "nan"], "s (Riesz exponent)"),
    (SIM + ["--radius", "0"], "radius"),
    (SIM + ["--lam", "-1"], "lam"),
    (SIM + ["--confinement", "-1"], "confinement"),
    (SIM + ["--softening", "-1"], "softening"),
    (SIM + ["--width", "0"], "width"),
    (SIM + ["--alpha", "0"], "alpha"),
    (SIM + ["--bandwidth", "0"], "bandwidth"),
    (SIM + ["--interaction-batch", "1"], "interaction_batch"),
    (SIM + ["--data-batch", "0"], "data_batch"),
    (SIM + ["--record-every", "0"], "record_every"),
    (SIM + ["--dtype", "float16"], "dtype"),
    (SIM + ["--device", "cuda:7"], "device"),
    (SIM + ["--device", "tpu"], "device"),
    (SIM + ["--method", "gibbs"], "method"),
    (SIM + ["--regime", "hot"], "regime"),
    (SIM + ["--domain", "sphere"], "domain"),
    (SIM + ["--init", "sobol"], "init"),
    (SIM + ["--alignment", "cosine"], "alignment"),
    (SIM + ["--alignment", "none"], "confinement"),
    (SIM + ["--n-data", "1"], "n_data"),
    (SIM + ["--seed", "-1"], "seed"),
    (SIM + ["--data-dim", "0"], "data_dim"),
    (SIM + ["--data-file", "/nonexistent.npz"], "data_file"),
    (SIM + ["--data-file", "bad.txt"], "data_file"),
    (SIM + ["--config", "missing.toml"], "missing.toml"),
    (SIM + ["--config", "bad.toml"], "n_particle"),
    (SIM + ["--config", "broken.toml"], "config file broken.toml is not valid TOML"),
    (SIM + ["--config", "table.toml"], "must be a table"),
    (SIM + ["--config", "binary.toml"], "config file binary.toml is not valid TOML"),
    (SIM + ["--config", "dir.toml"], "config dir.toml is not a file"),
    (SIM + ["--data-file", "garbage.npz"], "data_file garbage.npz is not a readable .npz"),
    (SIM + ["--data-file", "one.npz"], "data_file one.npz"),
    (SIM + ["--threads", "0"], "threads"),
    (["simulate", "--no-progress", "--out", "a_dir"], "--out"),
    (["simulate", "--no-progress", "--out", "a_file/run.nc"], "--out"),
    (CMP + ["--beta", "-1"], "--beta"),
    (CMP + ["--n-particles", "0"], "--n-particles"),
    (CMP + ["--cells", "1"], "--cells"),
    (CMP + ["--t-final", "0"], "--t-final"),
    (CMP + ["--eta", "0"], "--eta"),
    (CMP + ["--lam", "-1"], "--lam"),
    (CMP + ["--n-data", "1"], "--n-data"),
    (CMP + ["--seed", "-2"], "--seed"),
    (["compare", "--no-progress", "--out", "a_file"], "--out"),
    (CMP + ["--threads", "0"], "--threads"),
    (["figures", "--threads", "-1", "--out", "out/f"], "--threads"),
    (["compare", "--no-progress", "--out", "a_file/cmp"], "--out"),
    (EQ + ["--seeds", "1"], "--seeds"),
    (EQ + ["--n-particles", "0", "8"], "--n-particles"),
    (EQ + ["--beta", "0"], "--beta"),
    (EQ + ["--t-final", "0"], "--t-final"),
    (EQ + ["--workers", "0"], "--workers"),
    (EQ + ["--scheduler", "tcp://127.0.0.1:9"], "scheduler"),
    (EQ + ["--scheduler", "bogus"], "scheduler"),
    (EQ + ["--out", "a_file/eq"], "--out"),
    (PG + ["--t-final", "0"], "--t-final"),
    (PG + ["--seeds", "0"], "--seeds"),
    (BETA + ["--betas", "0", "1", "2"], "--betas"),
    (BETA + ["--n-particles", "0"], "--n-particles"),
    (BETA + ["--t-final", "-1"], "--t-final"),
    (TD + ["--beta", "0"], "--beta"),
    (TD + ["--t-final", "0"], "--t-final"),
    (["study", "t-decay", "--no-progress", "--out", "a_file"], "--out"),
    (["figures", "--only", "nonexistent", "--out", "out/f"], "figure"),
    (["figures", "--seed", "-1", "--out", "out/f"], "--seed"),
    (["figures", "--only", "t_limit", "--out", "a_file/f"], "--out"),  # the flag, as typed
    # issue 24: sizes out of reach, the grid's minimum, the HMC flags, an unseparable start
    (CMP + ["--cells", "3"], "--cells"),
    (CMP + ["--dim", "2", "--cells", "100000"], "--cells"),
    (CMP + ["--t-final", "1e9"], "--t-final"),
    (CMP + ["--scheme", "central"], "--scheme"),
    (CMP + ["--order", "3"], "--order"),
    (CMP + ["--dim", "3"], "dim"),
    (CMP + ["--config", "missing.toml"], "missing.toml"),
    (CMP + ["--config", "cmp_bad.toml"], "n_particle"),
    (SIM + ["--method", "hmc", "--trajectory-length", "0"], "trajectory_length"),
    (SIM + ["--method", "hmc", "--target-accept", "1"], "target_accept"),
    (SIM + ["--method", "hmc", "--n-warmup", "-1"], "n_warmup"),
    (SIM + ["--method", "hmc", "--n-warmup", "0"], "step_size"),
    (SIM + ["--method", "hmc", "--step-size", "0"], "step_size"),
    (SIM + ["--method", "hmc", "--interaction-batch", "4"], "interaction_batch"),
    (SIM + ["--trajectory-length", "1"], "trajectory_length"),
    (SIM + LOG_GAS + ["--n-particles", "10000", "--radius", "1e-4"], "n_particles"),
    (["run", "nan_initial.toml", "--no-progress", "--out", "out/run.nc"], "initial"),
]


@pytest.mark.parametrize(
    "argv,name", CLI_CASES, ids=[" ".join(a[:4] + a[-2:]) for a, _ in CLI_CASES]
)
def test_cli_refuses_bad_input_before_work(workdir, capsys, argv, name):
    before = _files(workdir)
    assert main(argv) == 2  # before any work: nothing written (checked below)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("meanfield: error:"), err
    assert name in err[0]
    assert _files(workdir) == before, "nothing may be written"


# ----------------------------------------------------------------------------------------
# the Python API: (callable, error type, text the message must contain)
# ----------------------------------------------------------------------------------------
def _grid1d(n=32):
    from meanfield.domains import Box
    from meanfield.pde import Grid

    return Grid(Box(1, 2.0), n)


def _ou(c=1.0):
    from meanfield.domains import Box
    from meanfield.energy import Energy, QuadraticPotential
    from meanfield.pde import McKeanVlasov

    E = Energy([QuadraticPotential(c)], Box(1, 2.0))
    return McKeanVlasov(E, _grid1d(), 1.0)


def _gauss():
    from meanfield.pde import Density

    return Density.gaussian(_grid1d(), 0.0, 0.3)


def _zero():
    from meanfield.pde import Density

    return Density(_grid1d(), np.zeros(32))


def _solve(*args, **kw):
    from meanfield.pde import solve

    return solve(*args, **kw)


def _w(omega, rho, *, weights=None, **kw):
    from meanfield.ot import Measure, wasserstein

    return wasserstein(Measure.from_particles(omega, weights), Measure.from_density(rho), **kw)


def _sliced(xa, wa, xb, wb):
    from meanfield.ot import Measure, w2

    return w2(Measure(xa, wa), Measure(xb, wb), method="sliced")


def _law_w(samples):
    from meanfield.closed_forms import equilibrium_case, wasserstein_to_law_1d

    return wasserstein_to_law_1d(samples, equilibrium_case("uniform")[2])


def _fit(x, y):
    from meanfield.stats import fit_power_law

    return fit_power_law(x, y)


def _fit_rate(n, w):
    from meanfield.workbench.compare import fit_rate

    return fit_rate(n, w)


def _sweep(out, **kw):
    from meanfield.studies.limits import particle_equilibrium_run
    from meanfield.workbench.sweeps import run_sweep

    kw.setdefault("scheduler", "threads")
    return run_sweep(
        particle_equilibrium_run,
        {"N": [4], "seed": [0]},
        out,
        fixed={"beta": 1.0, "case": "uniform", "t_end": 0.01},
        progress=False,
        **kw,
    )


def _load(path):
    from meanfield.results import load_dataset

    return load_dataset(path)


def _save(path):
    import xarray as xr

    from meanfield.results import save_dataset

    return save_dataset(xr.Dataset({"a": ("x", [1.0])}), path)


def _config(**kw):
    from meanfield.workbench.config import SimulationConfig

    return SimulationConfig(**kw)


def _figures(**kw):
    from meanfield.cli.figures import make_figures

    return make_figures(log=None, **kw)


def _compare(**kw):
    from meanfield.workbench.compare import compare
    from meanfield.workbench.problems import default_problem

    prob = default_problem(1, cells=32, n_data=20)
    fields = dict(n_particles=prob.n_particles, beta=prob.beta, t_final=prob.t_final)
    return compare(prob.energy, prob.initial, **{**fields, "eta": prob.eta, **kw})


def _spec(**kw):
    from meanfield.dynamics.spec import RunSpec

    fields = dict(energy=_ou().energy, initial=_gauss(), n_particles=8, beta=1.0, eta=0.1)
    return RunSpec(**{**fields, "n_steps": 2, **kw})


def _comparison(**kw):
    from meanfield.workbench.problems import ComparisonConfig

    return ComparisonConfig(**{"n_data": 20, **kw})


def _particle_run(**kw):
    from meanfield.studies.limits import particle_equilibrium_run

    return particle_equilibrium_run(**{"N": 4, "beta": 1.0, "seed": 0, "t_end": 0.01, **kw})


def _gibbs_zero():
    from meanfield.pde import gibbs_state

    return gibbs_state(_ou().energy, _grid1d(), 1.0, rho0=_zero())


def _kernel_gap_empty():
    from meanfield.ot.diagnostics import kernel_gap

    return kernel_gap(np.zeros((0, 1)), _gauss(), np.ones((5, 1)), "positive")


def _density(data):
    from meanfield.pde import Density

    return Density(_grid1d(), data)


def _attn(dtype=None, change=None):
    import torch

    from meanfield.attention import KernelAttention

    x = torch.randn(2, 5, 8, dtype=dtype or torch.float32)
    if change is not None:
        x = change(x)
    return KernelAttention(8, 2, feature="porf", n_features=8)(x, x, x)


def _attn_nan(which):
    import torch

    from meanfield.attention import KernelAttention

    x = {k: torch.randn(2, 5, 8) for k in ("query", "key", "value")}
    x[which][1, 2, 3] = float("nan")
    return KernelAttention(8, 2)(x["query"], x["key"], x["value"])


def _linear(which, bad):
    import torch

    from meanfield.attention.linear import linear_attention

    args = {k: torch.rand(1, 4, 2, 3) for k in ("q_features", "k_features", "v")}
    args[which][0, 1, 1, 1] = bad
    return linear_attention(**args)


NAN1 = np.array([[0.1], [np.nan]])
API_CASES = [
    (lambda: _solve(_ou(), _zero(), 1.0), InputError, "zero mass"),
    (lambda: _solve(_ou(1e10), _gauss(), 1.0), StepBudgetError, "max_steps"),
    (lambda: _solve(_ou(), _gauss(), 1.0, max_steps=3), StepBudgetError, "max_steps=3"),
    (lambda: _solve(_ou(), _gauss(), 1.0, safety=2.0), ValueError, "safety"),
    (lambda: _solve(_ou(), _gauss(), -1.0), ValueError, "t_range"),
    (lambda: _solve(_ou(), _gauss(), (1.0, 0.5)), ValueError, "t_range"),
    (lambda: _solve(_ou(), _gauss(), 1.0, max_steps=0), ValueError, "max_steps"),
    (lambda: _solve(_ou(), _gauss(), 1.0, dt=-1.0), ValueError, "dt"),
    (lambda: _zero().normalised(), InputError, "zero mass"),
    # a quoted number ("3" in a TOML file or a call) is a slip, refused, not converted
    (lambda: _quoted("torus"), InputTypeError, "half_width"),
    (lambda: _quoted("cosine"), InputTypeError, "frequency"),
    (lambda: _zero().sample(3, 0), InputError, "zero mass"),
    (lambda: _density(np.full(32, np.nan)), ValueError, "non-finite"),
    (lambda: _density(-np.ones(32)), ValueError, "negative"),
    (lambda: _density(np.ones(31)), ValueError, "shape"),
    (lambda: _gibbs_zero(), ValueError, "mass"),
    (lambda: _w(np.zeros((0, 1)), _gauss()), InputError, "omega"),
    (lambda: _w(NAN1, _gauss()), InputError, "omega"),
    (lambda: _w(np.zeros((3, 2)), _gauss()), InputError, "same dimension"),
    (lambda: _w(np.zeros((3, 1)), _zero()), InputError, "zero mass"),
    (lambda: _w(np.zeros((3, 1)), _gauss(), order=3), ValueError, "order"),
    (lambda: _w(np.zeros((3, 1)), _gauss(), method="fast"), ValueError, "method"),
    (lambda: _w(np.zeros((3, 1)), _gauss(), weights=[1, -1, 1]), InputError, "weights"),
    (lambda: _w(np.zeros((3, 1)), _gauss(), weights=[0, 0, 0]), InputError, "weights"),
    (lambda: _sliced(np.zeros((0, 2)), [], np.zeros((3, 2)), np.ones(3)), InputError, "points"),
    (
        lambda: _sliced(np.array([[np.nan, 1.0]]), [1.0], np.zeros((3, 2)), np.ones(3)),
        InputError,
        "points",
    ),
    (
        lambda: _sliced(np.zeros((2, 2)), [1, 1], np.zeros((3, 2)), [np.nan, 1, 1]),
        InputError,
        "weights",
    ),
    (
        lambda: _sliced(np.zeros((2, 2)), [1, 1], np.zeros((3, 3)), np.ones(3)),
        InputError,
        "dimension",
    ),
    (lambda: _law_w(np.array([])), InputError, "samples"),
    (lambda: _law_w(np.array([0.1, np.nan])), InputError, "samples"),
    (lambda: _kernel_gap_empty(), InputError, "omega"),
    (lambda: _fit([16], [[0.1, 0.2]]), InputError, "distinct"),
    (lambda: _fit([16, 32], [0.1, 0.07]), InputError, "distinct"),
    (lambda: _fit([16, 16, 16], [0.1, 0.1, 0.1]), InputError, "distinct"),
    (lambda: _fit([-1, 2, 4], [0.1, 0.1, 0.1]), InputError, "positive"),
    (lambda: _fit_rate([16, 32], np.ones((2, 3))), InputError, "distinct"),
    (lambda: _load("missing.nc"), MissingFileError, "missing.nc"),
    (lambda: _load("a_dir"), DataFileError, "a_dir"),
    (lambda: _load("bad.txt"), DataFileError, "bad.txt"),
    (lambda: _save("a_dir"), OutputPathError, "a_dir"),
    (lambda: _save("a_file/x.nc"), OutputPathError, "a_file"),
    (lambda: _sweep("a_file"), OutputPathError, "out_dir"),
    (lambda: _sweep("a_file/sub"), OutputPathError, "out_dir"),
    (lambda: _sweep("out", scheduler="tcp://127.0.0.1:9"), ResourceError, "scheduler"),
    (lambda: _sweep("out", scheduler="nonsense"), InputError, "scheduler"),
    (lambda: _sweep("out", on_conflict="overwrite"), InputError, "on_conflict"),
    (lambda: _sweep("out", n_workers=0), InputError, "n_workers"),
    (lambda: _config(kernel="riesz"), InputError, "s (--s)"),
    (lambda: _config(device="cuda:9"), ResourceError, "device"),
    (lambda: _config(beta=math.inf), InputError, "beta"),
    (lambda: _config(interaction_batch=1), InputError, "interaction_batch"),
    (lambda: _figures(size="huge"), InputError, "size"),
    (lambda: _figures(only=["t_limit"], out_dir="a_file"), OutputPathError, "out_dir"),
    (lambda: _compare(n_particles=0), InputError, "n_particles"),
    (lambda: _compare(beta=0.0), InputError, "beta"),
    (lambda: _compare(eta=-1.0), InputError, "eta"),
    (lambda: _particle_run(N=0), InputError, "N"),
    (lambda: _particle_run(case="ellipse"), InputError, "case"),
    (lambda: _particle_run(beta=-1.0), InputError, "beta"),
    (lambda: _attn(dtype=__import__("torch").float16), InputTypeError, "query"),
    (lambda: _attn(dtype=__import__("torch").float64), InputTypeError, "query"),
    (lambda: _attn(change=lambda t: t.long()), InputTypeError, "query"),
    (lambda: _attn(change=lambda t: t[..., :4]), ValueError, "query"),
    (lambda: _attn_nan("query"), InputError, "query"),
    (lambda: _attn_nan("key"), InputError, "key"),
    (lambda: _attn_nan("value"), InputError, "value"),
    (lambda: _linear("q_features", float("nan")), InputError, "q_features"),
    (lambda: _linear("k_features", float("inf")), InputError, "k_features"),
    (lambda: _linear("v", float("-inf")), InputError, "v"),
    # issue 24
    (lambda: _twin_chain("hmc"), InputError, "omega0"),
    (lambda: _twin_chain("mala"), InputError, "omega0"),
    (lambda: _capped_hmc(), InputError, "max_leapfrog"),
    (lambda: _huge_grid_equation(), SizeLimitError, "grid"),
    (lambda: _default_problem(cells=100000), SizeLimitError, "cells"),
    (lambda: _compare(t_final=1e9), StepBudgetError, "t_final"),
    (lambda: _compare(max_steps=0), InputError, "max_steps"),
    (lambda: _solve(_ou(), _gauss(), 1.0, step_rtol=-1.0), InputError, "step_rtol"),
    (lambda: _config(method="hmc", target_accept=0.0), InputError, "target_accept"),
    (lambda: _config(method="hmc", data_batch=4), InputError, "data_batch"),
    (lambda: _config(step_size=0.1), InputError, "step_size"),
    (lambda: _unseparable_start(), InputError, "n_particles"),
    # issue 21: the run specification and the comparison's configuration, checked once
    (lambda: _spec(beta=-1.0), InputError, "beta (inverse temperature)"),
    (lambda: _spec(n_particles=None), InputError, "n_particles (N) is needed"),
    (lambda: _spec(scheme="central"), InputError, "scheme"),
    (lambda: _spec(order=0), InputError, "order"),
    (lambda: _spec(safety=0.0), InputError, "safety"),
    (lambda: _spec(method="mala", data_batch=2), ValueError, "data_batch"),
    (lambda: _compare(regime="coulomb-gas"), InputError, "regime"),
    (lambda: _comparison(dim=3), InputError, "dim"),
    (lambda: _comparison(init_std=0.0), InputError, "init_std"),
    (lambda: _comparison(safety=2.0), InputError, "safety"),
    # the periodic domain, attraction, transport on degenerate input, attention shapes
    (lambda: _torus(half_width=1e308), InputError, "half_width"),  # period 2L = inf
    (lambda: _torus().project(np.array([[np.nan]])), InputError, "omega"),
    (lambda: _torus(dim=2).project(np.zeros((3, 1))), InputError, "omega"),
    (lambda: _pair_term("cosine"), InputTypeError, "kernel"),
    (lambda: _pair_term("cosine", periodic=False), InputTypeError, "kernel"),
    (lambda: _periodic_energy(terms=[]), InputError, "terms"),
    (lambda: _periodic_energy(domain="torus"), InputTypeError, "domain"),
    (
        lambda: _circle_walk(np.zeros((4, 1)), energy=_periodic_energy(domain=_box(np.pi))),
        InputError,
        "terms[0]",
    ),  # fmt: skip
    (lambda: _circle(["a"], [0.0]), InputTypeError, "x"),
    (lambda: _equilibrium_on_circle(), InputError, "lam"),
    (lambda: _circle_equation(grid=_grid_box_pi()), InputError, "grid"),
    (lambda: _circle_equation(order=3), InputError, "order"),
    (lambda: _circle_gibbs(rho0=np.ones(7)), InputError, "rho0"),
    (lambda: _circle_gibbs(rho0=_circle_density(16)), InputError, "rho0"),
    (lambda: _circle_gibbs(grid=None), InputTypeError, "grid"),
    (lambda: _circle_gibbs(rho0=np.zeros(32)), InputError, "rho0"),
    (lambda: _circle_walk(np.zeros((4, 1), dtype=complex)), InputTypeError, "omega0"),
    (
        lambda: _sliced(np.array([[True], [False]]), [1, 1], np.zeros((3, 1)), np.ones(3)),
        InputTypeError,
        "points",
    ),  # fmt: skip
    (lambda: _sliced([["a"]], [1.0], np.zeros((3, 1)), np.ones(3)), InputTypeError, "points"),
    (lambda: _measure_of(_circle_density(32)), InputError, "density"),
    (lambda: _attention_module(8, 3), InputError, "num_heads"),
    (lambda: _attend(key_length=4, value_length=5), InputError, "key"),
    (lambda: _attend(key_padding_mask=np.zeros((1, 4), bool)), InputError, "key_padding_mask"),
    (lambda: _attend(attn_mask=np.zeros((2, 2), bool)), InputError, "attn_mask"),
    (lambda: _linearize("bert"), InputTypeError, "model"),
]


def _torus(dim=1, half_width=1.0):
    from meanfield.domains import Torus

    return Torus(dim, half_width)


def _box(half_width):
    from meanfield.domains import Box

    return Box(1, half_width)


def _pair_term(kernel, lam=0.5, periodic=True):
    from meanfield.energy import PairInteraction, PeriodicPairInteraction
    from meanfield.kernels import Cosine

    kernel = Cosine() if kernel is None else kernel
    if periodic:
        return PeriodicPairInteraction(kernel, lam, domain=_torus(half_width=np.pi))
    return PairInteraction(kernel, lam)


def _periodic_energy(terms=None, domain=None, lam=0.5):
    """The Kuramoto energy λ∬−cos on the circle [−π, π)."""
    from meanfield.energy import Energy

    terms = [_pair_term(None, lam)] if terms is None else terms
    return Energy(terms, _torus(half_width=np.pi) if domain is None else domain)


def _circle(x, y, half_width=np.pi, **kw):
    from meanfield.ot.circle import wasserstein_circle

    return wasserstein_circle(x, y, domain=_torus(half_width=half_width), **kw)


def _circle_grid(n=32):
    from meanfield.pde import Grid

    return Grid(_torus(half_width=np.pi), n)


def _grid_box_pi():
    from meanfield.pde import Grid

    return Grid(_box(np.pi), 32)


def _circle_density(n):
    from meanfield.pde import Density

    return Density.uniform(_circle_grid(n))


def _equilibrium_on_circle():
    from meanfield.pde import equilibrium_measure

    return equilibrium_measure(_periodic_energy(lam=1.0), _circle_grid())


def _circle_equation(grid=None, **kw):
    from meanfield.pde import McKeanVlasov

    return McKeanVlasov(_periodic_energy(), _circle_grid() if grid is None else grid, 1.0, **kw)


def _circle_gibbs(grid="circle", **kw):
    from meanfield.pde import gibbs_state

    return gibbs_state(_periodic_energy(), _circle_grid() if grid == "circle" else grid, 1.0, **kw)


def _circle_walk(omega0, energy=None, **kw):
    from meanfield.dynamics.langevin import simulate

    fields = dict(eta=0.01, beta=1.0, n_steps=3, seed=0)
    return simulate(_periodic_energy() if energy is None else energy, omega0, **{**fields, **kw})


def _measure_of(density):
    from meanfield.ot import Measure

    return Measure.from_density(density)


def _attention_module(embed_dim=8, num_heads=2):
    from meanfield.attention import KernelAttention

    return KernelAttention(embed_dim, num_heads, feature="porf", n_features=8, batch_first=True)


def _attend(key_length=3, value_length=None, key_padding_mask=None, attn_mask=None):
    import torch

    def t(length):
        return torch.randn(1, length, 8, generator=torch.Generator().manual_seed(length))

    masks = {
        "key_padding_mask": None if key_padding_mask is None else torch.as_tensor(key_padding_mask),
        "attn_mask": None if attn_mask is None else torch.as_tensor(attn_mask),
    }
    value = t(key_length if value_length is None else value_length)
    return _attention_module()(t(3), t(key_length), value, **masks)


def _linearize(model):
    from meanfield.attention.linearize import linearize

    return linearize(model)


def _twin_start():
    import torch

    from meanfield.domains import Box
    from meanfield.energy import Energy, PairInteraction
    from meanfield.kernels import Riesz

    om = torch.linspace(-1, 1, 8, dtype=torch.float64)[:, None]
    om[5] = om[2]  # a duplicated row under the unsoftened log kernel: H_N = +inf
    return Energy([PairInteraction(Riesz(0.0))], Box(1, 2.0)), om


def _twin_chain(method):
    from meanfield.dynamics.langevin import sample_hmc, simulate

    E, om = _twin_start()
    if method == "hmc":
        return sample_hmc(E, om, beta=1.0, n_samples=5, n_warmup=5)
    return simulate(E, om, eta=1e-3, beta=1.0, n_steps=5, method="mala")


def _capped_hmc():
    import torch

    from meanfield.domains import Box
    from meanfield.dynamics.langevin import sample_hmc
    from meanfield.energy import Energy, QuadraticPotential

    E = Energy([QuadraticPotential()], Box(1, 2.0))
    return sample_hmc(E, torch.zeros(4, 1), beta=1.0, n_samples=3, n_warmup=0, step_size=1e-5)


def _huge_grid_equation():
    from meanfield.domains import Box
    from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    from meanfield.kernels import Riesz
    from meanfield.pde import Grid, McKeanVlasov

    g = Grid(Box(3, 1.0), 2000)  # 8e9 cells: terabytes
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.5), 0.5)], g.domain)
    return McKeanVlasov(E, g, 1.0)


def _quoted(what: str):
    from meanfield.domains import Torus
    from meanfield.kernels import Cosine

    return Torus(1, "3") if what == "torus" else Cosine("1")


def _default_problem(**kw):
    from meanfield.workbench.problems import default_problem

    return default_problem(2, n_data=20, **kw)


def _unseparable_start():
    from meanfield.workbench.config import SimulationConfig

    cfg = SimulationConfig(
        alignment="none", confinement=1.0, kernel="log", softening=0.0, lam=0.5,
        feature="positive", data_dim=1, n_particles=10_000, radius=1e-4,
    )  # fmt: skip
    return cfg.initial_particles(1)


@pytest.mark.parametrize("call,err,name", API_CASES, ids=[f"api{i}" for i in range(len(API_CASES))])
def test_api_refuses_bad_input_before_work(workdir, call, err, name):
    before = _files(workdir)
    with pytest.raises(err) as info:
        call()  # before any work: nothing written (checked below)
    assert isinstance(info.value, MeanfieldError) or err in (ValueError, TypeError)
    assert name in str(info.value)
    assert _files(workdir) == before, "nothing may be written"


# ----------------------------------------------------------------------------------------
# odd input answered right (call, independent value, absolute tolerance), or with a warning
# that names the parameter (call, warning type, text)
# ----------------------------------------------------------------------------------------
def _wrap_exact(x, half_width):
    """x − 2L⌊(x + L)/2L⌋ in exact rationals (L the float half-width, 2L the float period)."""
    from fractions import Fraction

    L, x = Fraction(half_width), Fraction(x)
    return float(x - 2 * L * ((x + L) // (2 * L)))


def _wrapped_normal_cell(mean, std, lo, hi, period, images=3):
    """The wrapped normal's mass on [lo, hi] over the cell width, by its images ±k·period."""
    from scipy.stats import norm

    ks = range(-images, images + 1)
    return sum(
        norm.cdf(hi, mean + k * period, std) - norm.cdf(lo, mean + k * period, std) for k in ks
    )


def _gaussian_near_the_seam():
    from meanfield.pde import Density

    rho = Density.gaussian(_circle_grid(), 3.0, 0.5, normalise=False)
    return rho.data[0], rho.mass


def _flat_hmc():
    """One particle under a pair term alone: a flat target, every proposal accepted, whose
    adapted step grew without bound (to 1e38, positions 1e22 off the torus)."""
    from meanfield.dynamics.langevin import sample_hmc

    ds = sample_hmc(_periodic_energy(), [[0.3]], beta=1.0, n_samples=20, n_warmup=50, seed=0)
    return ds.attrs["step_size"], float(np.abs(ds["omega"]).max())


_H = 2 * np.pi / 32  # the circle grid's cell width
ANSWER_CASES = [
    # a sum of weights overflowing to inf normalised them to zero: W₁ = π instead of 1/2
    (lambda: _circle([0.0, 1.0], [0.0], a=[1e308, 1e308], order=1), 0.5, 1e-15),
    # 1e17 wrapped with its exact remainder, not with the rounding of 2L·k for a large k
    (
        lambda: float(_torus(half_width=np.pi).project(np.array([[1e17]]))[0, 0]),
        _wrap_exact(1e17, np.pi),
        1e-12,
    ),  # fmt: skip
    # the wrapped normal on a torus grid, not the normal truncated at the seam
    (
        lambda: _gaussian_near_the_seam(),
        (_wrapped_normal_cell(3.0, 0.5, -np.pi, -np.pi + _H, 2 * np.pi) / _H, 1.0),
        1e-12,
    ),
    # the adapted HMC step is capped at the trajectory length T = 1, the particle stays in
    (
        lambda: tuple(v <= bound for v, bound in zip(_flat_hmc(), (1.0, np.pi), strict=True)),
        (True, True),
        0,
    ),
]


@pytest.mark.parametrize(
    "call,value,tol", ANSWER_CASES, ids=[f"ans{i}" for i in range(len(ANSWER_CASES))]
)
def test_api_answers_odd_input_right(call, value, tol):
    assert np.allclose(call(), value, rtol=0, atol=tol)


WARN_CASES = [
    # points 1 apart on a circle of period 2e300: unit coordinates equal to the last bit
    (lambda: _circle([0.0], [1.0], half_width=1e300), "PrecisionWarning", "half_width"),
]


@pytest.mark.parametrize(
    "call,kind,name", WARN_CASES, ids=[f"warn{i}" for i in range(len(WARN_CASES))]
)
def test_api_warns_by_name(call, kind, name):
    from meanfield import errors

    with pytest.warns(getattr(errors, kind), match=name):
        call()


def test_the_table_has_at_least_sixty_rows_and_the_readme_counts_them():
    assert len(CLI_CASES) + len(API_CASES) >= 60
    assert len({tuple(a) for a, _ in CLI_CASES}) == len(CLI_CASES)
    total, cli, api = len(CLI_CASES) + len(API_CASES), len(CLI_CASES), len(API_CASES)
    for page in ("README.md", "docs/validation.rst"):  # both state the count
        text = " ".join((Path(__file__).parents[1] / page).read_text().split())
        assert f"**{total} bad inputs** ({cli} on the command line, {api} on the Python API" in text


def test_every_package_error_is_a_meanfield_error_and_a_builtin():
    from meanfield import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        if issubclass(cls, Warning):  # the warnings share their own base class
            assert issubclass(cls, errors.MeanfieldWarning) and issubclass(cls, UserWarning)
            continue
        assert issubclass(cls, errors.MeanfieldError)
        if cls is not errors.MeanfieldError:
            builtins = (ValueError, TypeError, ImportError, RuntimeError, OSError, ArithmeticError)
            assert issubclass(cls, builtins)
    from meanfield.pde.trackers import DensityError

    assert issubclass(DensityError, MeanfieldError)


def test_debug_flag_shows_the_traceback(workdir):
    with pytest.raises(InputError, match="beta"):
        main(["--debug", *SIM, "--beta", "0"])


def test_missing_dask_names_the_install_command(workdir, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    assert main(EQ[:3] + ["--scheduler", "local", "--out", "out/eq"]) == 2
    err = capsys.readouterr().err
    assert "pip install" in err and "dask" in err
    assert not os.path.exists("out")
