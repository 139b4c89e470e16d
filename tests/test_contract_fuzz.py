"""Fuzzing generated from the parameter contract (meanfield.contract).

For every declared parameter of every public entry point: each deterministic invalid value
(wrong type, NaN/±inf, out of range on each side, a boolean for a number, a huge integer,
None where None is not allowed, an unknown choice) is refused with a named error
(InputError / InputTypeError) whose message names the parameter, *before any work* — the
entry point's body is replaced by a spy that fails if it is reached; each valid edge value is
accepted and reaches the body converted; and hypothesis draws further invalid values from
each parameter's strategy. The counts are those docs/validation.rst prints
(:func:`meanfield.contract.generated_cases`).
"""

from __future__ import annotations

import inspect
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meanfield.contract import Param, registered
from meanfield.errors import InputError, InputTypeError
from meanfield.workbench.study_settings import flatten_settings

CONTRACTS = registered()
#: The designs of the synthetic study, each with its declared settings.
DESIGNS = ("grid", "variants", "tuned", "diagnosis", "sinha_duchi")


class _Reached(Exception):
    """The entry point's body was reached (the spy's signal)."""


def _construct(contract, name, value):
    """A declared dataclass built with ``name = value``, the other fields at their defaults
    (or at the contract's example, for required fields and fields the value needs beside
    it): a refusal propagates; a construction reports the fields as stored."""
    kwargs = dict(contract.example(name, value)) if contract.example else {}
    kwargs[name] = value
    built = contract.wrapper(**kwargs)
    raise _Reached({f: getattr(built, f) for f in contract.by_name})


def _left_out(contract, name):
    """What a declared dataclass stores for ``name`` when it is not given (its default, or
    what ``__post_init__`` resolves it to: ComparisonConfig's per-dimension defaults)."""
    kwargs = dict(contract.example(name, None)) if contract.example else {}
    kwargs.pop(name, None)
    return getattr(contract.wrapper(**kwargs), name)


def _call(contract, monkeypatch, name, value):
    """Call ``contract``'s entry point with ``name = value``, the other declared parameters at
    a valid value, undeclared required arguments as placeholders, and the body spied on; a
    dataclass is constructed (:func:`_construct`)."""
    if contract.func is None:
        return _construct(contract, name, value)
    sig = inspect.signature(contract.wrapper)  # the original signature (functools.wraps)
    kwargs = {}
    for pname, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or pname == "self":
            continue
        if pname in contract.by_name:
            if p.default is inspect.Parameter.empty:
                kwargs[pname] = contract.by_name[pname].edge_values()[0]
        elif p.default is inspect.Parameter.empty:
            kwargs[pname] = object()  # never looked at: the body is the spy
    if contract.example:
        kwargs.update(contract.example(name, value))
    kwargs[name] = value

    def spy(*args, **kw):  # the body: report the (checked) arguments it was handed
        handed = dict(sig.bind(*args, **kw).arguments)
        for p in sig.parameters.values():  # a study's settings (**settings): tables dotted
            if p.kind is p.VAR_KEYWORD:
                handed.update(flatten_settings(handed.pop(p.name, {})))
        raise _Reached(handed)

    monkeypatch.setattr(contract, "func", spy)
    if "self" in sig.parameters:  # a declared method: the spy never looks at the instance
        return contract.wrapper(object(), **kwargs)
    return contract.wrapper(**kwargs)


INVALID = [
    pytest.param(entry, p.name, v, id=f"{entry.split(':')[1]}-{p.name}-{v!r:.20}")
    for entry, c in CONTRACTS.items()
    for p in c.params
    for v in p.invalid_values()
]
EDGE = [
    pytest.param(entry, p.name, v, id=f"{entry.split(':')[1]}-{p.name}-{v!r:.20}")
    for entry, c in CONTRACTS.items()
    for p in c.params
    for v in p.edge_values()
]
PARAMS = [
    pytest.param(entry, p.name, id=f"{entry.split(':')[1]}-{p.name}")
    for entry, c in CONTRACTS.items()
    for p in c.params
]


def test_the_contract_covers_the_main_entry_points():
    for entry in (
        "meanfield.pde.solver:solve",
        "meanfield.features:sample_initial_particles",
        "meanfield.learners.tasks:make_task",
        "meanfield.dynamics.langevin:simulate",
        "meanfield.dynamics.hmc:sample_hmc",
        "meanfield.dynamics.hmc:HMC",
        "meanfield.stats:t_interval",
        "meanfield.stats:paired_test",
        "meanfield.stats:paired_family",
        "meanfield.stats:fit_power_law",
        "meanfield.workbench.config:SimulationConfig",
        "meanfield.attention.mha:KernelAttention.__init__",
        "meanfield.ot.distance:wasserstein",
        "meanfield.pde.stationary:gibbs_state",
        "meanfield.pde.stationary:equilibrium_measure",
        "meanfield.workbench.compare:compare",
        "meanfield.workbench.compare:fit_rate",
        "meanfield.workbench.sweeps:run_sweep",
        "meanfield.workbench.sweeps:check_scheduler",
        "meanfield.attention.linear:linear_attention",
        "meanfield.attention.linear:kernel_attention",
        "meanfield.attention.linear:softmax_attention",
        "meanfield.attention.causal:causal_linear_attention",
        "meanfield.attention.causal:causal_kernel_attention",
        "meanfield.attention.linearize:linearize",
        "meanfield.attention.pretrained:load_pretrained_classifier",
        "meanfield.attention.pretrained:PretrainedClassifier.__init__",
        "meanfield.attention.pretrained:encode_pretrained",
        "meanfield.attention.pretrained:save_tiny_bert",
        "meanfield.attention.hedgehog:HedgehogFeatureMap.__init__",
        *(f"meanfield.studies.synthetic:SETTINGS.{d}" for d in DESIGNS),
    ):
        assert entry in CONTRACTS, entry


def test_the_declared_regimes_and_methods_are_the_dynamics_own():
    """The contract declares them without importing torch; they must be what runs."""
    from meanfield.contract import RUN_METHODS, RUN_REGIMES
    from meanfield.dynamics.chains import REGIMES
    from meanfield.dynamics.langevin import METHODS

    assert RUN_REGIMES == tuple(REGIMES) and RUN_METHODS == tuple(METHODS)


@pytest.mark.parametrize(("entry", "name", "value"), INVALID)
def test_invalid_value_is_refused_by_name_before_any_work(entry, name, value, monkeypatch):
    contract = CONTRACTS[entry]
    with pytest.raises((InputError, InputTypeError)) as err:
        _call(contract, monkeypatch, name, value)
    assert contract.by_name[name].shown_name.split(" ")[0] in str(err.value)


@pytest.mark.parametrize(("entry", "name", "value"), EDGE)
def test_valid_edge_value_reaches_the_body_converted(entry, name, value, monkeypatch):
    contract = CONTRACTS[entry]
    with pytest.raises(_Reached) as reached:
        _call(contract, monkeypatch, name, value)
    got = reached.value.args[0][name]
    if value is None:  # "unset": as if not given (a dataclass may resolve it when made)
        assert got is None or (contract.func is None and got == _left_out(contract, name))
    elif isinstance(value, float):
        assert type(got) is float and (got == value or (math.isinf(got) and got == value))
    else:
        assert got == value


@pytest.mark.parametrize(("entry", "name"), PARAMS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.data())
def test_random_invalid_values_are_refused(entry, name, data, monkeypatch):
    contract = CONTRACTS[entry]
    value = data.draw(contract.by_name[name].invalid_strategy())
    with pytest.raises((InputError, InputTypeError)):
        _call(contract, monkeypatch, name, value)


@pytest.mark.parametrize(
    ("param", "value", "error"),
    [
        (Param("beta", "real", "", low=0.0, low_open=True), True, InputTypeError),
        (Param("beta", "real", "", low=0.0, low_open=True), "10", InputTypeError),
        (Param("beta", "real", "", low=0.0, low_open=True), math.nan, InputError),
        (Param("n", "int", "", low=1), 3.0, InputTypeError),
        (Param("seed", "seed", ""), -1, InputError),
        (Param("seed", "seed", ""), 2**63, InputError),
        (Param("level", "level", ""), 1.0, InputError),
        (Param("kind", "choice", "", choices=("a", "b")), "c", InputError),
        (Param("on", "flag", ""), 1, InputTypeError),
        (Param("dt", "real", "", low=0.0, low_open=True, finite=False), -math.inf, InputError),
        (Param("order", "int", "", low=1, high=2, choices=(1, 2)), 3, InputError),
        (Param("order", "int", "", low=1, high=2, choices=(1, 2)), 2.0, InputTypeError),
    ],
)
def test_param_refusals_name_the_parameter(param, value, error):
    with pytest.raises(error, match=param.name):
        param.check(value)


def test_edge_values_are_accepted_and_invalid_values_refused_for_every_kind():
    for param in (
        Param("x", "real", "", low=-1.0, high=2.0, high_open=True),
        Param("x", "real", "", low=0.0, low_open=True, finite=False, optional=True),
        Param("n", "int", "", low=0, high=5),
        Param("q", "int", "", low=1, high=3, choices=(1, 3)),
        Param("s", "seed", ""),
        Param("p", "level", ""),
        Param("c", "choice", "", choices=("u", "v")),
        Param("f", "flag", ""),
        Param("t", "string", ""),
    ):
        assert param.edge_values() and param.invalid_values()
        for v in param.edge_values():
            param.check(v)
        for v in param.invalid_values():
            with pytest.raises((InputError, InputTypeError)):
                param.check(v)


def test_warnings_of_a_declared_entry_point_point_at_its_caller():
    """The contract's checking wrapper is one more frame: the entry points' stack levels count
    it, so a warning names the caller's line, not meanfield/contract.py."""
    import warnings

    import torch

    from meanfield.domains import Box
    from meanfield.dynamics.langevin import simulate
    from meanfield.energy import Energy, QuadraticPotential
    from meanfield.errors import LowAcceptanceWarning

    E = Energy([QuadraticPotential()], Box(1, 1.0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # every MALA move of size sqrt(2 * 100) leaves the box: all rejected
        simulate(E, torch.zeros(6, 1), eta=100.0, beta=1.0, n_steps=30, method="mala")
    low = [w for w in caught if issubclass(w.category, LowAcceptanceWarning)]
    assert low and all(w.filename == __file__ for w in caught)


def test_every_simulation_config_field_is_declared_and_is_its_flags_help():
    """Flags, TOML keys, checks and docs come from one declaration per field."""
    import dataclasses

    from meanfield.cli.parser import HELP
    from meanfield.workbench.config import SimulationConfig

    names = [f.name for f in dataclasses.fields(SimulationConfig)]
    declared = CONTRACTS["meanfield.workbench.config:SimulationConfig"].by_name
    assert list(declared) == names and list(HELP) == names
    for name in names:
        assert HELP[name].startswith(declared[name].doc)


def test_every_comparison_config_field_is_declared_and_is_its_flags_help():
    """The same for ``meanfield compare``: ComparisonConfig's fields are its TOML keys, its
    checks and the help of its flags."""
    import dataclasses

    from meanfield.cli.parser import COMPARE_HELP
    from meanfield.workbench.problems import ComparisonConfig

    names = [f.name for f in dataclasses.fields(ComparisonConfig)]
    declared = CONTRACTS["meanfield.workbench.problems:ComparisonConfig"].by_name
    assert list(declared) == names and set(COMPARE_HELP) == set(names)
    for name in names:
        assert COMPARE_HELP[name].startswith(declared[name].doc)
