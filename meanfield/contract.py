"""The parameter contract: every public entry point declares its parameters once.

A :class:`Param` says what one parameter is — its kind (a real number, an integer, a seed, a
probability level, a choice, a flag, a string), its range with open or closed ends, whether
``None`` means "unset", its units, its default and one line of documentation. A
:class:`Contract` is the list of one entry point's parameters. From that one declaration come

* the checks (:meth:`Contract.check`), run before any work by the entry point itself —
  :func:`declare` wraps a function so that its declared arguments are checked (and converted:
  ``numpy.int64`` to ``int``, ``2`` to ``2.0`` for a real) before its body runs;
* the refusals' wording: every message names the parameter and its allowed range, as the
  house's ``check_*`` helpers (:mod:`meanfield._validation`) write them, which the contract
  calls;
* the invalid inputs of the test suite (:meth:`Param.invalid_values`: wrong type, NaN and
  ±inf, out of range on each side, booleans for numbers, huge integers, ``None`` where
  ``None`` is not allowed, unknown choices), which ``tests/test_contract_fuzz.py`` feeds to
  every registered entry point, and the valid edge values (:meth:`Param.edge_values`);
* the parameter tables of the documentation (:meth:`Contract.rst_table`) and the counts that
  docs/validation.rst reports (``.. contract-counts::``, computed when the docs are built).

Why a small module of the package's own rather than a validation library (pydantic, attrs
validators, voluptuous): the package's refusals are already worded one way (the ``check_*``
helpers and the CLI's ``--flag`` spelling, :func:`meanfield._validation.shown`), the contract
must generate *invalid* inputs as well as check valid ones, and ``meanfield --help`` must not
import anything heavy. The declaration is plain data (a frozen dataclass per parameter), so a
library could read it later.

Examples
--------
>>> from meanfield.contract import Param, declare
>>> @declare(Param("beta", "real", "inverse temperature", low=0.0, low_open=True))
... def temperature(beta):
...     return 1.0 / beta
>>> temperature(4)
0.25
>>> temperature(True)
Traceback (most recent call last):
    ...
meanfield.errors.InputTypeError: beta must be a real number, got the boolean True
>>> temperature.contract.params[0].invalid_values()[:4]
[nan, inf, -inf, True]
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ._validation import check_choice, check_int, shown
from .errors import InputError, InputTypeError

__all__ = [
    "KINDS",
    "REGISTRY",
    "RUN_METHODS",
    "RUN_PARAMS",
    "RUN_REGIMES",
    "Contract",
    "Param",
    "check_declared",
    "contract_of",
    "declare",
    "declare_fields",
    "generated_cases",
    "registered",
]

#: The kinds of parameter a contract knows.
KINDS = ("real", "int", "seed", "level", "choice", "flag", "string")

#: The largest seed (numpy's and torch's generators both take it; results record it as int64).
MAX_SEED = 2**63 - 1

#: Marks a parameter without a default (required).
REQUIRED = inspect.Parameter.empty

#: Every declared entry point, by its qualified name (``module:function``).
REGISTRY: dict[str, Contract] = {}


def _real(name: str, value) -> float:
    """A real number as a float; booleans, strings and non-numbers refused (numpy scalars
    are numbers; ``"1"`` from a TOML file or a dict is a typo, not 1.0)."""
    if isinstance(value, (bool, np.bool_)):
        raise InputTypeError(f"{shown(name)} must be a real number, got the boolean {value!r}")
    if not isinstance(value, numbers.Real):
        raise InputTypeError(f"{shown(name)} must be a real number, got {value!r}")
    return float(value)


def _interval(low, high, low_open, high_open) -> str:
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    left = "(" if (low is None or low_open) else "["
    right = ")" if (high is None or high_open) else "]"
    return f"{left}{lo}, {hi}{right}"


def _rst_text(text: str) -> str:
    """Plain text as reStructuredText: the inline markup characters (``*``, ``|``, a
    backquote, a backslash, a word's trailing ``_``) escaped, so a doc line such as
    "|omega|^2/2" prints as written (docs are built with warnings as errors).

    Examples
    --------
    >>> print(_rst_text("alpha*T, |omega|^2/2, H_N, n_"))
    alpha\\*T, \\|omega\\|^2/2, H_N, n\\_
    """
    text = re.sub(r"([*|`\\])", r"\\\1", text)
    return re.sub(r"(\w)_(?=\W|$)", r"\1\\_", text)


@dataclass(frozen=True)
class Param:
    """One parameter of an entry point: kind, range, default, units and one line of doc.

    Parameters
    ----------
    name : str
        The parameter's name in Python (and, with ``-`` for ``_``, its command-line flag).
    kind : {"real", "int", "seed", "level", "choice", "flag", "string"}
        ``real``: a finite float in [``low``, ``high``] (ends open with ``low_open`` /
        ``high_open``); ``int``: an integer in [``low``, ``high``] (floats such as 3.0
        refused, not rounded); ``seed``: an integer in [0, 2⁶³ − 1]; ``level``: a number in
        (0, 1); ``choice``: one of ``choices``; ``flag``: ``True`` or ``False`` only;
        ``string``: a non-empty ``str``. Booleans are refused for every number.
    doc : str
        One line: what the parameter is.
    low, high : float, optional
        The range of a ``real`` or ``int`` (none: unbounded on that side).
    low_open, high_open : bool, default False
        Whether the range excludes ``low`` / ``high``.
    choices : tuple
        The allowed values of a ``choice`` (strings), or of an ``int`` restricted to a few
        values (e.g. ``(1, 2)``: "1 or 2").
    optional : bool, default False
        ``None`` is allowed and means "unset" (the entry point's documented default).
    units : str
        Units of a number, shown in the docs ("" for none).
    label : str, optional
        How messages name it (e.g. ``"beta (inverse temperature)"``; default ``name``).
    finite : bool, default True
        A ``real`` must be finite; False admits ``+inf`` / ``-inf`` at an open end that is
        absent (e.g. an upper bound "none": ``dt_max = inf``). NaN is always refused.
    examples : tuple
        Valid values the tests add to the edge values; for a ``string`` they replace the
        generic ``"x"`` (a string the entry point checks further, e.g. a torch device).

    Examples
    --------
    >>> eta = Param("eta", "real", "step size", low=0.0, low_open=True, units="time")
    >>> eta.check(0.01), eta.allowed()
    (0.01, 'a finite number in (0, inf)')
    >>> eta.check(0.0)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: eta must be a finite number in (0, inf), got 0.0
    """

    name: str
    kind: str
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    optional: bool = False
    units: str = ""
    label: str | None = None
    finite: bool = True
    examples: tuple = ()

    def __post_init__(self):
        check_choice("Param kind", self.kind, KINDS)
        if self.kind == "choice" and not self.choices:
            raise InputError(f"Param {self.name!r} of kind 'choice' needs its choices")
        object.__setattr__(self, "choices", tuple(self.choices))
        object.__setattr__(self, "examples", tuple(self.examples))

    @property
    def shown_name(self) -> str:
        """The name messages use (``label`` or ``name``).

        Examples
        --------
        >>> Param("beta", "real", "", label="beta (inverse temperature)").shown_name
        'beta (inverse temperature)'
        """
        return self.label or self.name

    def allowed(self) -> str:
        """The allowed values in words, as the refusals print them.

        Examples
        --------
        >>> Param("n", "int", "count", low=1).allowed(), Param("p", "level", "").allowed()
        ('an integer >= 1', 'a number in (0, 1)')
        """
        if self.kind == "real":
            ends = _interval(self.low, self.high, self.low_open, self.high_open)
            if not self.finite:
                return f"a number in {ends.replace('inf)', 'inf]').replace('(-inf', '[-inf')}"
            return f"a finite number in {ends}"
        if self.kind == "int" and self.choices:
            *head, last = map(str, self.choices)
            return f"{', '.join(head)} or {last}" if head else last
        if self.kind == "int":
            lo = -(2**63) if self.low is None else int(self.low)
            return (
                f"an integer >= {lo}"
                if self.high is None
                else f"an integer in [{lo}, {int(self.high)}]"
            )
        if self.kind == "seed":
            return f"an integer in [0, {MAX_SEED}]"
        if self.kind == "level":
            return "a number in (0, 1)"
        if self.kind == "choice":
            return "one of " + ", ".join(map(repr, self.choices))
        if self.kind == "flag":
            return "True or False"
        return "a non-empty string"

    def check(self, value):
        """``value`` checked and converted (``float`` for reals, ``int`` for integers).

        Raises
        ------
        meanfield.errors.InputTypeError
            A value of the wrong type (a boolean for a number, a float for an integer, ...).
        meanfield.errors.InputError
            A value of the right type out of range (NaN and ±inf for reals included).

        Examples
        --------
        >>> import numpy as np
        >>> Param("n_steps", "int", "steps", low=1).check(np.int64(3))
        3
        >>> Param("seed", "seed", "seed").check(2**70)
        Traceback (most recent call last):
            ...
        meanfield.errors.InputError: seed must be an integer in [0, 9223372036854775807], got 1...
        """
        name = self.shown_name
        if value is None:
            if self.optional:
                return None
            raise InputTypeError(f"{shown(name)} must be {self.allowed()}, got None")
        if self.kind == "real":
            v = _real(name, value)
            lo_bad = self.low is not None and (v <= self.low if self.low_open else v < self.low)
            hi_bad = self.high is not None and (v >= self.high if self.high_open else v > self.high)
            if math.isnan(v) or (math.isinf(v) and self.finite) or lo_bad or hi_bad:
                raise InputError(f"{shown(name)} must be {self.allowed()}, got {value!r}")
            return v
        if self.kind in ("int", "seed"):
            if self.kind == "seed":
                return check_int(name, value, minimum=0, maximum=MAX_SEED)
            if self.choices:  # a few integers: "1 or 2"
                if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
                    raise InputTypeError(f"{shown(name)} must be {self.allowed()}, got {value!r}")
                if int(value) not in self.choices:
                    raise InputError(f"{shown(name)} must be {self.allowed()}, got {value!r}")
                return int(value)
            lo = -(2**63) if self.low is None else int(self.low)
            hi = None if self.high is None else int(self.high)
            return check_int(name, value, minimum=lo, maximum=hi)
        if self.kind == "level":
            v = _real(name, value)
            if not 0.0 < v < 1.0:  # NaN fails both
                raise InputError(f"{shown(name)} must be {self.allowed()}, got {value!r}")
            return v
        if self.kind == "choice":
            if not isinstance(value, str):
                raise InputTypeError(f"{shown(name)} must be {self.allowed()}, got {value!r}")
            return check_choice(name, value, self.choices)
        if self.kind == "flag":
            if not isinstance(value, (bool, np.bool_)):
                raise InputTypeError(f"{shown(name)} must be {self.allowed()}, got {value!r}")
            return bool(value)
        if not isinstance(value, str) or not value:
            raise InputTypeError(f"{shown(name)} must be {self.allowed()}, got {value!r}")
        return value

    # -- generated inputs for the tests --------------------------------------------------
    def invalid_values(self) -> list:
        """Values this parameter must refuse: wrong types, non-finite, out of range, huge.

        Deterministic, so a failure names its case; ``tests/test_contract_fuzz.py`` adds
        random ones (hypothesis) from :meth:`invalid_strategy`.

        Examples
        --------
        >>> Param("n", "int", "count", low=1, high=10).invalid_values()
        [True, 2.5, 3.0, '3', None, [1], 0, 11, 1180591620717411303424]
        """
        if self.kind in ("real", "level"):
            bad: list = [math.nan, math.inf, -math.inf, True, "1", None, [1.0], 1j]
            if self.kind == "level":
                bad += [0.0, 1.0, -0.5, 1.5]
            else:
                bad += self._outside_real()
        elif self.kind in ("int", "seed"):
            lo = 0 if self.kind == "seed" else self.low
            hi = MAX_SEED if self.kind == "seed" else self.high
            bad = [True, 2.5, 3.0, "3", None, [1]]
            if lo is not None:
                bad.append(int(lo) - 1)
            if hi is not None:
                bad.append(int(hi) + 1)
            bad.append(2**70)
        elif self.kind == "choice":
            bad = ["", "not-a-choice", self.choices[0].upper() + "_x", 1, None, True]
        elif self.kind == "flag":
            bad = [1, 0, "true", "yes", None, 1.0]
        else:
            bad = ["", 1, None, b"bytes", ["a"]]
        # None is valid for an optional parameter; a huge int may be in range when unbounded
        return [v for v in bad if not (v is None and self.optional) and not self._accepts(v)]

    def _outside_real(self) -> list:
        out = []
        if self.low is not None:
            out.append(self.low if self.low_open else self.low - max(1.0, abs(self.low)) * 1e-9)
            out.append(self.low - 1.0)
        if self.high is not None:
            out.append(self.high if self.high_open else self.high + max(1.0, abs(self.high)) * 1e-9)
            out.append(self.high + 1.0)
        return out

    def _accepts(self, value) -> bool:
        try:
            self.check(value)
        except (InputError, InputTypeError):
            return False
        return True

    def edge_values(self) -> list:
        """Valid values at the edges of the range (each accepted by :meth:`check`).

        Examples
        --------
        >>> Param("lam", "real", "strength", low=0.0, high=2.0, high_open=True).edge_values()
        [0.0, 1.0, 1.9999999999999998]
        """
        if self.kind == "real":
            lo = -1e300 if self.low is None else self.low
            hi = 1e300 if self.high is None else self.high
            vals = [
                float(np.nextafter(lo, np.inf)) if self.low_open else float(lo),
                0.5 * (lo + hi),
                float(np.nextafter(hi, -np.inf)) if self.high_open else float(hi),
            ]
        elif self.kind == "int":
            lo = -(2**63) if self.low is None else int(self.low)
            vals = [lo, lo + 1] if self.high is None else [lo, int(self.high)]
        elif self.kind == "seed":
            vals = [0, MAX_SEED]
        elif self.kind == "level":
            vals = [1e-12, 0.5, 1 - 1e-12]
        elif self.kind == "choice":
            vals = list(self.choices)
        elif self.kind == "flag":
            vals = [True, False]
        else:
            vals = list(self.examples) or ["x"]
        vals += [v for v in self.examples if v not in vals]
        if self.optional:
            vals.append(None)
        seen: list = []
        for v in vals:  # keep order, drop repeats
            if v not in seen or v is None:
                seen.append(v)
        return [v for v in seen if self._accepts(v)]

    def invalid_strategy(self):
        """A hypothesis strategy of values :meth:`check` refuses (needs ``hypothesis``).

        Examples
        --------
        >>> from hypothesis import find
        >>> p = Param("eta", "real", "step", low=0.0, low_open=True)
        >>> find(p.invalid_strategy(), lambda v: isinstance(v, float) and v < -1) < -1
        True
        """
        from hypothesis import strategies as st

        wrong_type = st.one_of(
            st.booleans(), st.text(max_size=5), st.lists(st.integers(), max_size=2), st.just(1j)
        )
        if self.kind in ("real", "level"):
            numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers())
        elif self.kind in ("int", "seed"):
            numbers = st.one_of(
                st.integers(min_value=-(2**80), max_value=2**80),
                st.floats(allow_nan=True, allow_infinity=True),
            )
        elif self.kind == "choice":
            numbers = st.one_of(st.text(max_size=12), st.integers())
        else:
            numbers = st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=5))
        nothing = st.nothing() if self.optional else st.none()
        return st.one_of(wrong_type, numbers, nothing).filter(lambda v: not self._accepts(v))

    # -- documentation ---------------------------------------------------------------------
    def rst_row(self, default=REQUIRED) -> str:
        """One row of :meth:`Contract.rst_table`.

        Examples
        --------
        >>> print(Param("on", "flag", "a switch").rst_row(default=False))
           * - ``on``
             - True or False
             - ``False``
             - a switch
        """
        units = f" [{self.units}]" if self.units else ""
        dflt = "required" if default is REQUIRED else f"``{default!r}``"
        allowed = self.allowed() + (", or None" if self.optional else "")
        doc = _rst_text(self.doc)
        return f"   * - ``{self.name}``\n     - {allowed}{units}\n     - {dflt}\n     - {doc}"


@dataclass
class Contract:
    """The declared parameters of one entry point.

    Parameters
    ----------
    entry : str
        The entry point's qualified name, ``module:qualname``.
    params : sequence of Param
        Its parameters (those it takes that are plain values; arrays, tensors and model
        objects are checked by their own types).
    defaults : dict
        Defaults read from the signature (for the docs).
    example : callable, optional
        ``example(name, value)`` returns the other keyword arguments of a cheap valid call
        with ``name = value`` (for the tests' generated cases: a dataclass's required fields,
        or the fields a value needs beside it, as ``method = "hmc"`` for an HMC-only field).
    func : callable, optional
        The declared function's body (None for a dataclass).
    wrapper : callable, optional
        What callers call: the checking wrapper of a function, or the dataclass itself.

    Examples
    --------
    >>> c = Contract("demo:f", [Param("n", "int", "count", low=1)])
    >>> c.check({"n": 3, "other": "untouched"})
    {'n': 3, 'other': 'untouched'}
    """

    entry: str
    params: Sequence[Param]
    defaults: dict = field(default_factory=dict)
    example: Callable[[], dict] | None = None
    func: Callable | None = None
    wrapper: Callable | None = None

    def __post_init__(self):
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise InputError(f"contract of {self.entry} declares a parameter twice: {names}")
        self.by_name = {p.name: p for p in self.params}

    def check(self, values: dict) -> dict:
        """``values`` with every declared parameter checked and converted (others untouched).

        Examples
        --------
        >>> c = Contract("demo:f", [Param("beta", "real", "", low=0.0, low_open=True)])
        >>> c.check({"beta": -1})
        Traceback (most recent call last):
            ...
        meanfield.errors.InputError: beta must be a finite number in (0, inf), got -1
        """
        out = dict(values)
        for name, value in values.items():
            param = self.by_name.get(name)
            if param is not None:
                out[name] = param.check(value)
        return out

    def rst_table(self) -> str:
        """The parameter table of the docs (a reStructuredText list-table).

        Examples
        --------
        >>> print(Contract("demo:f", [Param("n", "int", "count", low=1)]).rst_table())
        .. list-table:: ``demo:f``
           :header-rows: 1
        <BLANKLINE>
           * - parameter
             - allowed
             - default
             - meaning
           * - ``n``
             - an integer >= 1
             - required
             - count
        """
        head = (
            f".. list-table:: ``{self.entry}``\n   :header-rows: 1\n\n"
            "   * - parameter\n     - allowed\n     - default\n     - meaning"
        )
        rows = [p.rst_row(self.defaults.get(p.name, REQUIRED)) for p in self.params]
        return "\n".join([head, *rows])

    def count_invalid(self) -> int:
        """How many deterministic invalid cases the contract generates.

        Examples
        --------
        >>> Contract("demo:f", [Param("ok", "flag", "a switch")]).count_invalid()
        6
        """
        return sum(len(p.invalid_values()) for p in self.params)


#: The regimes of the particle dynamics: β_N = β or β_N = β N
#: (:data:`meanfield.dynamics.chains.REGIMES`, declared here without importing torch).
RUN_REGIMES = ("mean-field", "coulomb-gas")
#: The integrators of :func:`meanfield.dynamics.langevin.simulate`
#: (:data:`meanfield.dynamics.spec.METHODS`).
RUN_METHODS = ("langevin", "mala")

#: The run parameters that a run specification (:class:`meanfield.dynamics.spec.RunSpec`),
#: the particle runners (``simulate``, ``sample_hmc``) and the plain configurations
#: (``SimulationConfig``) share, declared once: name -> :class:`Param`. An entry point that
#: takes one as "None: the spec's" declares ``dataclasses.replace(RUN_PARAMS[name],
#: optional=True)``. They live here, not in :mod:`meanfield.dynamics.spec`, because the
#: configurations of the command line must not import torch.
RUN_PARAMS: dict[str, Param] = {
    p.name: p
    for p in (
        Param(
            "beta", "real", "inverse temperature beta", low=0.0, low_open=True,
            label="beta (inverse temperature)",
        ),
        Param(
            "eta", "real", "step size eta of the particles; time t = eta * steps", low=0.0,
            low_open=True, units="time", label="eta (step size)",
        ),
        Param("n_steps", "int", "number of steps; the final time is eta * n_steps", low=1),
        Param("n_particles", "int", "number N of particles", low=1, label="n_particles (N)"),
        Param(
            "regime", "choice", "mean-field (beta_N = beta) or coulomb-gas (beta_N = beta N)",
            choices=RUN_REGIMES,
        ),
        Param(
            "method", "choice", "projected Langevin (Algorithm 1) or the exact MALA sampler",
            choices=RUN_METHODS,
        ),
        Param("seed", "seed", "seed of every random number of the run"),
        Param(
            "interaction_batch", "int", "random-batch size B of the pair force (Langevin only)",
            low=2, optional=True, label="interaction_batch (B)",
        ),
        Param(
            "data_batch", "int", "mini-batch of data rows for the alignment force (Langevin "
            "only; at most the number of data points)", low=2, optional=True,
        ),
        Param(
            "record_every", "int", "steps between records (None: about 100 records; the "
            "first and last are recorded)", low=1, optional=True,
        ),
        Param("record_positions", "flag", "store every record's positions (else the last)"),
        Param("progress", "flag", "show a progress bar"),
    )
}  # fmt: skip


def declare(*params: Param, example: Callable[[], dict] | None = None):
    """Declare a function's parameters: checked, converted and registered before its body runs.

    Parameters
    ----------
    *params : Param
        The declared parameters; each must be a parameter of the function.
    example : callable, optional
        ``example(name, value)``: the other keyword arguments of a cheap valid call with
        ``name = value`` (used by the generated tests; by default only the declared
        parameters are set, the others are placeholders the body never sees).

    Returns
    -------
    callable
        The decorator. The wrapped function has a ``contract`` attribute
        (:class:`Contract`), and is registered in :data:`REGISTRY`.

    Examples
    --------
    >>> @declare(Param("level", "level", "confidence level"))
    ... def width(level=0.95):
    ...     return level
    >>> width(), width(level=0.5)
    (0.95, 0.5)
    >>> width(1.5)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: level must be a number in (0, 1), got 1.5
    """

    def wrap(func):
        sig = inspect.signature(func)
        missing = [p.name for p in params if p.name not in sig.parameters]
        if missing:
            raise InputError(f"{func.__qualname__} declares parameters it does not take: {missing}")
        defaults = {
            k: v.default
            for k, v in sig.parameters.items()
            if v.default is not inspect.Parameter.empty
        }
        contract = Contract(
            f"{func.__module__}:{func.__qualname__}", params, defaults, example, func
        )

        @functools.wraps(func)
        def checked(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            declared = {k: v for k, v in bound.arguments.items() if k in contract.by_name}
            bound.arguments.update(contract.check(declared))
            return contract.func(*bound.args, **bound.kwargs)

        checked.contract = contract
        contract.wrapper = checked
        REGISTRY[contract.entry] = contract
        return checked

    return wrap


def declare_fields(cls=None, *, example: Callable[[str, object], dict] | None = None):
    """Register the contract of a dataclass whose fields carry a ``Param`` in their metadata.

    Apply it above ``@dataclass``; the class then has a ``contract`` attribute and is in
    :data:`REGISTRY` (so the generated tests construct it with each field replaced by each
    invalid value). Its ``__post_init__`` checks the fields by :func:`check_declared`.

    Parameters
    ----------
    cls : type
        The dataclass (``@declare_fields`` without arguments), or None
        (``@declare_fields(example=...)``).
    example : callable, optional
        ``example(name, value)``: the other fields of a cheap valid construction with
        ``name = value`` (required fields, and fields the value needs beside it).

    Returns
    -------
    type or callable
        The class, or the decorator.

    Examples
    --------
    >>> from dataclasses import dataclass, field
    >>> @declare_fields
    ... @dataclass
    ... class Run:
    ...     n: int = field(default=1, metadata={"param": Param("n", "int", "steps", low=1)})
    ...     def __post_init__(self):
    ...         check_declared(self)
    >>> Run(2).n, Run.contract.entry.endswith(":Run")
    (2, True)
    >>> Run(0)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: n must be an integer >= 1, got 0
    """

    def wrap(klass):
        contract = contract_of(klass)
        contract.example, contract.wrapper = example, klass
        klass.contract = contract
        REGISTRY[contract.entry] = contract
        return klass

    return wrap if cls is None else wrap(cls)


def check_declared(obj) -> None:
    """Check and convert, in place, the declared fields of the dataclass instance ``obj``
    (frozen or not), in the order of the fields; what ``__post_init__`` calls first.

    Raises
    ------
    meanfield.errors.InputTypeError, meanfield.errors.InputError
        As :meth:`Param.check`, naming the first field refused.

    Examples
    --------
    >>> from dataclasses import dataclass, field
    >>> @dataclass(frozen=True)
    ... class Step:
    ...     eta: float = field(default=0.1, metadata={"param": Param("eta", "real", "step")})
    ...     def __post_init__(self):
    ...         check_declared(self)
    >>> Step(1).eta
    1.0
    """
    for param in contract_of(type(obj)).params:
        object.__setattr__(obj, param.name, param.check(getattr(obj, param.name)))


def contract_of(obj) -> Contract:
    """The contract of a declared function, or of a dataclass whose fields carry a ``Param``
    in their metadata (``field(default=..., metadata={"param": Param(...)})``).

    Examples
    --------
    >>> from dataclasses import dataclass, field
    >>> @dataclass
    ... class Config:
    ...     beta: float = field(default=1.0, metadata={"param": Param("beta", "real", "")})
    >>> [p.name for p in contract_of(Config).params]
    ['beta']
    """
    if isinstance(getattr(obj, "contract", None), Contract):
        return obj.contract
    import dataclasses

    if dataclasses.is_dataclass(obj):
        fields_ = [f for f in dataclasses.fields(obj) if "param" in f.metadata]
        defaults = {f.name: f.default for f in fields_ if f.default is not dataclasses.MISSING}
        return Contract(
            f"{obj.__module__}:{obj.__qualname__}", [f.metadata["param"] for f in fields_], defaults
        )
    raise InputTypeError(f"{obj!r} declares no contract")


def registered() -> dict[str, Contract]:
    """Every declared entry point of the package: :data:`REGISTRY` after importing each of its
    modules (declarations run at import; a module whose optional dependency is missing is
    skipped, and so are the entry points it declares).

    Returns
    -------
    dict
        ``module:qualname`` -> :class:`Contract`, for entry points of :mod:`meanfield`.

    Examples
    --------
    >>> "meanfield.pde.solver:solve" in registered()
    True
    """
    import importlib
    import pkgutil
    from pathlib import Path

    # the package's folder, not ``import meanfield``: no module imports the front door
    for info in pkgutil.walk_packages([str(Path(__file__).parent)], "meanfield."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional dependency (transformers, finufft, ...) is missing
            continue
    return {k: c for k, c in sorted(REGISTRY.items()) if k.startswith("meanfield.")}


def generated_cases() -> dict[str, int]:
    """The counts of the generated contract tests (what docs/validation.rst reports).

    Returns
    -------
    dict
        ``entry_points``, ``parameters``, ``invalid`` (deterministic invalid values, each
        refused by name before any work) and ``edge`` (valid edge values, each accepted).

    Examples
    --------
    >>> counts = generated_cases()
    >>> counts["invalid"] > counts["parameters"] >= counts["entry_points"] > 0
    True
    """
    contracts = registered().values()
    params = [p for c in contracts for p in c.params]
    return {
        "entry_points": len(contracts),
        "parameters": len(params),
        "invalid": sum(len(p.invalid_values()) for p in params),
        "edge": sum(len(p.edge_values()) for p in params),
    }
