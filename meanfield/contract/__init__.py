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

Why a small part of the package's own rather than a validation library (pydantic, attrs
validators, voluptuous): the package's refusals are already worded one way (the ``check_*``
helpers and the CLI's ``--flag`` spelling, :func:`meanfield._validation.shown`), the contract
must generate *invalid* inputs as well as check valid ones, and ``meanfield --help`` must not
import anything heavy. The declaration is plain data (a frozen dataclass per parameter), so a
library could read it later.

Layout, one concept per module; every public name is imported from here, its public home
(``meanfield.contract.Param``, and so in the API reference, pickles and descriptions):

* :mod:`meanfield.contract.kinds`: the vocabulary (:data:`~meanfield.contract.kinds.KINDS`,
  the seed range, the marker of a required parameter);
* :mod:`meanfield.contract.params`: :class:`Param` and :class:`Contract`, the declaration and
  its checks;
* :mod:`meanfield.contract.flags`: command-line flags from a contract (:meth:`Param.from_text`,
  :meth:`Contract.add_arguments`, :meth:`Contract.parse_args`, ...);
* :mod:`meanfield.contract.cases`: the invalid and edge values generated for fuzzing
  (:meth:`Param.invalid_values`, :meth:`Param.edge_values`, :meth:`Param.invalid_strategy`);
* :mod:`meanfield.contract.tables`: the parameter tables of the docs (:meth:`Contract.rst_table`);
* :mod:`meanfield.contract.registry`: :func:`declare`, :func:`declare_fields`,
  :func:`registered` and the shared run parameters
  (:data:`~meanfield.contract.registry.RUN_PARAMS`).

The method groups of ``flags``, ``cases`` and ``tables`` are bound in the class bodies of
``params`` (``from_text = flags.from_text``): they are the classes' own methods, which the API
reference and the doctest collection list as such (inherited mixin methods they would not),
and those modules import nothing from ``params``: the imports go down only.

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

import inspect as _inspect

from .kinds import KINDS
from .kinds import MAX_SEED as MAX_SEED
from .kinds import REQUIRED as REQUIRED
from .params import Contract, Param
from .registry import (
    REGISTRY,
    RUN_METHODS,
    RUN_PARAMS,
    RUN_REGIMES,
    check_declared,
    contract_of,
    declare,
    declare_fields,
    generated_cases,
    registered,
)


def _publish(*objects) -> None:
    """Give each object (and its methods) this package as its module, as numpy's
    ``set_module`` does: ``meanfield.contract`` is the one address of every public name (the
    API reference, pickles, the doctest collection), whichever file defines it. A method
    defined in a lower module and bound in a class body (``from_text = flags.from_text``)
    also gets its class in its qualified name, ``Param.from_text``, as if defined there."""
    for obj in objects:
        obj.__module__ = __name__
        if not isinstance(obj, type):
            continue
        for name, attr in vars(obj).items():
            fn = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            fn = fn.fget if isinstance(fn, property) else fn
            if _inspect.isfunction(fn) and fn.__module__ != __name__:
                fn.__module__ = __name__
                if "." not in fn.__qualname__:  # defined at the top of flags, cases, tables
                    fn.__qualname__ = f"{obj.__qualname__}.{name}"


_publish(
    Param,
    Contract,
    declare,
    declare_fields,
    check_declared,
    contract_of,
    registered,
    generated_cases,
)

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
