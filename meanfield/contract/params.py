"""The parameter declaration: :class:`~meanfield.contract.Param`, one parameter of an entry
point, and :class:`~meanfield.contract.Contract`, the parameters of one entry point, with
their checks.

A parameter's check converts what it accepts (``numpy.int64`` to ``int``, ``2`` to ``2.0`` for
a real) and refuses the rest with a named error whose message names the parameter and its
allowed range, as the house's ``check_*`` helpers (:mod:`meanfield._validation`) word them.

The other method groups live in the modules below this one and are bound in the class bodies
here, so they are methods of the classes themselves: the command line
(:mod:`meanfield.contract.flags`: ``Param.from_text``, ``Contract.add_arguments``, ...), the
generated test values (:mod:`meanfield.contract.cases`: ``Param.invalid_values``, ...) and the
documentation tables (:mod:`meanfield.contract.tables`: ``Param.rst_row``,
``Contract.rst_table``). Those modules import nothing from this one.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_choice, check_int, shown
from ..errors import InputError, InputTypeError
from . import cases, flags, tables
from .kinds import KINDS, MAX_SEED, REQUIRED


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
    sequence : bool, default False
        The value is a non-empty list of such values (each checked as above; a tuple or a
        list in Python, ``--flag 64,256`` or ``--flag 64 256`` on the command line); the
        checked value is a ``list``.
    repeated : bool, default False
        For a ``sequence``: on the command line each word is one whole element and the flag
        is repeated for more (``--set a=1 --set 'b=[1, 2]'``; no comma splits a word), the
        flag's words appended in order; use it for values that may hold commas.
    default : object, optional
        The default of a parameter that no signature gives (a script's flag,
        :meth:`Contract.add_arguments`); checked when declared. A declared function's
        signature default is its default, and :func:`declare` refuses a ``default`` that
        disagrees with it.

    See Also
    --------
    Contract : the parameters of one entry point.
    declare : declares a function's.

    References
    ----------
    MacIver, D. R., Hatfield-Dodds, Z. et al. (2019). Hypothesis: a new approach to
    property-based testing. J. Open Source Softw. 4(43), 1891 (the generated invalid values).

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
    sequence: bool = False
    default: object = field(default=REQUIRED, repr=False)
    repeated: bool = False

    def __post_init__(self):
        check_choice("Param kind", self.kind, KINDS)
        if self.kind == "choice" and not self.choices:
            raise InputError(f"Param {self.name!r} of kind 'choice' needs its choices")
        object.__setattr__(self, "choices", tuple(self.choices))
        object.__setattr__(self, "examples", tuple(self.examples))
        if self.sequence and self.kind == "flag":
            raise InputError(f"Param {self.name!r}: a flag cannot be a sequence")
        if self.repeated and not self.sequence:
            raise InputError(f"Param {self.name!r}: only a sequence can be repeated")
        if self.default is not REQUIRED:  # a declared default must itself be allowed
            self.check(self.default)

    @property
    def element(self) -> Param:
        """The parameter of one element of a ``sequence`` (itself otherwise).

        Examples
        --------
        >>> Param("lengths", "int", "L", low=1, sequence=True).element.allowed()
        'an integer >= 1'
        """
        if not self.sequence:
            return self
        return Param(
            self.name, self.kind, self.doc, self.low, self.high, self.low_open, self.high_open,
            self.choices, False, self.units, self.label, self.finite, self.examples,
        )  # fmt: skip

    @property
    def flag(self) -> str:
        """The command-line spelling, ``--`` and the name with ``-`` for ``_``.

        Examples
        --------
        >>> Param("n_steps", "int", "steps", low=1).flag
        '--n-steps'
        """
        return "--" + self.name.replace("_", "-")

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
        >>> Param("m", "int", "features", low=1, sequence=True).allowed()
        'a non-empty list, each an integer >= 1'
        """
        if self.sequence:
            return f"a non-empty list, each {self.element.allowed()}"
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
            return "True, False or None" if self.optional else "True or False"
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
        if self.sequence:
            if not isinstance(value, (list, tuple)):  # a string is not a list of its letters
                raise InputTypeError(f"{shown(name)} must be {self.allowed()}, got {value!r}")
            if not value:
                raise InputError(f"{shown(name)} must be {self.allowed()}, got {value!r}")
            return [self.element.check(v) for v in value]
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

    # -- the command line (meanfield.contract.flags) -------------------------------------
    from_text = flags.from_text

    # -- generated inputs for the tests (meanfield.contract.cases) -----------------------
    invalid_values = cases.invalid_values
    _outside_real = cases._outside_real
    _accepts = cases._accepts
    edge_values = cases.edge_values
    invalid_strategy = cases.invalid_strategy

    # -- documentation (meanfield.contract.tables) ---------------------------------------
    rst_row = tables.rst_row


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

    See Also
    --------
    Param : one parameter.
    declare : the contract of a function.
    declare_fields : the contract of a dataclass.

    References
    ----------
    Python Software Foundation. argparse — parser for command-line options,
    https://docs.python.org/3/library/argparse.html (the flags generated).
    MacIver, D. R., Hatfield-Dodds, Z. et al. (2019). Hypothesis: a new approach to
    property-based testing. J. Open Source Softw. 4(43), 1891 (the generated invalid values).

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
        declared = {p.name: p.default for p in self.params if p.default is not REQUIRED}
        self.defaults = {**declared, **self.defaults}  # a signature's default stands

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

    # -- documentation (meanfield.contract.tables) ---------------------------------------
    rst_table = tables.rst_table

    # -- the command line (meanfield.contract.flags) -------------------------------------
    _selected = flags._selected
    help_text = flags.help_text
    add_arguments = flags.add_arguments
    from_args = flags.from_args
    parse_args = flags.parse_args

    # -- generated inputs for the tests (meanfield.contract.cases) -----------------------
    count_invalid = cases.count_invalid
