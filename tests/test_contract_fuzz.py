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

CONTRACTS = registered()


class _Reached(Exception):
    """The entry point's body was reached (the spy's signal)."""


def _call(contract, monkeypatch, name, value):
    """Call ``contract``'s entry point with ``name = value``, the other declared parameters at
    a valid value, undeclared required arguments as placeholders, and the body spied on."""
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
    kwargs[name] = value

    def spy(*args, **kw):  # the body: report the (checked) arguments it was handed
        raise _Reached(dict(sig.bind(*args, **kw).arguments))

    monkeypatch.setattr(contract, "func", spy)
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
    ):
        assert entry in CONTRACTS


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
    if value is None:
        assert got is None
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
