"""The invalid and edge values of a contract, generated for fuzzing.

From each :class:`~meanfield.contract.Param` come the values it must refuse (wrong types, NaN
and ±inf, out of range on each side, booleans for numbers, huge integers, ``None`` where
``None`` is not allowed, unknown choices), the valid values at the edges of its range, and a
hypothesis strategy of random invalid values; ``tests/test_contract_fuzz.py`` feeds them to
every registered entry point.

The functions here are methods: :meth:`Param.invalid_values
<meanfield.contract.Param.invalid_values>`, :meth:`~meanfield.contract.Param.edge_values`,
:meth:`~meanfield.contract.Param.invalid_strategy` and :meth:`Contract.count_invalid
<meanfield.contract.Contract.count_invalid>`. The class bodies of
:mod:`meanfield.contract.params` bind them (``edge_values = cases.edge_values``), so they are
methods of the classes themselves, and this module sits below the declaration: it imports
nothing from ``params`` and receives the ``Param`` or ``Contract`` as ``self``.

Reference: MacIver, D. R., Hatfield-Dodds, Z. et al. (2019). Hypothesis: a new approach to
property-based testing. J. Open Source Softw. 4(43), 1891.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError, InputTypeError
from .kinds import MAX_SEED


def invalid_values(self) -> list:
    """Values this parameter must refuse: wrong types, non-finite, out of range, huge.

    Deterministic, so a failure names its case; ``tests/test_contract_fuzz.py`` adds
    random ones (hypothesis) from :meth:`invalid_strategy`.

    See Also
    --------
    meanfield.contract.Param.edge_values : the valid edge values.
    meanfield.contract.Param.invalid_strategy : random invalid values.

    Examples
    --------
    >>> Param("n", "int", "count", low=1, high=10).invalid_values()
    [True, 2.5, 3.0, '3', None, [1], 0, 11, 1180591620717411303424]
    >>> Param("m", "int", "features", low=1, sequence=True).invalid_values()[:5]
    [[], 1, '1', None, [True]]
    """
    if self.sequence:  # not a list, empty, and each bad element inside a list
        one = self.element.edge_values()[0]
        bad = [[], one, str(one), None] + [[v] for v in self.element.invalid_values()]
        bad.append([one, self.element.invalid_values()[0]])
        return [v for v in bad if not (v is None and self.optional) and not self._accepts(v)]
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

    See Also
    --------
    meanfield.contract.Param.invalid_values : the values refused.

    Examples
    --------
    >>> Param("lam", "real", "strength", low=0.0, high=2.0, high_open=True).edge_values()
    [0.0, 1.0, 1.9999999999999998]
    >>> Param("m", "int", "features", low=1, high=4, sequence=True).edge_values()
    [[1], [4], [1, 4]]
    """
    if self.sequence:
        ends = self.element.edge_values()
        vals = [[v] for v in ends] + ([ends] if len(ends) > 1 else [])
        return vals + ([None] if self.optional else [])
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

    See Also
    --------
    meanfield.contract.Param.invalid_values : the deterministic ones.

    Examples
    --------
    >>> from hypothesis import find
    >>> p = Param("eta", "real", "step", low=0.0, low_open=True)
    >>> find(p.invalid_strategy(), lambda v: isinstance(v, float) and v < -1) < -1
    True
    """
    from hypothesis import strategies as st

    if self.sequence:  # a list holding a bad element, or not a list
        bad_list = st.lists(self.element.invalid_strategy(), min_size=1, max_size=3)
        return st.one_of(bad_list, self.element.invalid_strategy()).filter(
            lambda v: not self._accepts(v)
        )
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


def count_invalid(self) -> int:
    """How many deterministic invalid cases the contract generates.

    See Also
    --------
    meanfield.contract.generated_cases : the counts over every entry point.

    Examples
    --------
    >>> Contract("demo:f", [Param("ok", "flag", "a switch")]).count_invalid()
    6
    """
    return sum(len(p.invalid_values()) for p in self.params)
