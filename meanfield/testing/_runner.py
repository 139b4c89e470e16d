"""The runner of named checks that :func:`~meanfield.testing.check_kernel`,
:func:`~meanfield.testing.check_term` and :func:`~meanfield.testing.check_scheme` share.

One :class:`CheckRunner` per call of a check function: each check runs under its name
(:meth:`CheckRunner.check`), and a failure is an :class:`AssertionError` that names the
function, the object, the check, the input and the observed against the expected numbers.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator

import numpy as np
import torch

__all__ = ["CheckRunner"]

_F64 = torch.float64


def _as_f64(x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().to(_F64)
    return torch.as_tensor(np.asarray(x, dtype=float))


def _vec(x: torch.Tensor) -> str:
    """A short vector in a message: ``[0.1, -2]``."""
    return "[" + ", ".join(f"{float(v):.6g}" for v in x.reshape(-1)) + "]"


class CheckRunner:
    """The named checks of one call of a check function on one object.

    Parameters
    ----------
    function : str
        The check function's name, for messages (``"check_kernel"``).
    obj : object
        The object checked (its ``repr`` is in every message).

    See Also
    --------
    meanfield.testing.kernel_checks.check_kernel : runs a kernel's checks here.
    meanfield.testing.term_checks.check_term : runs an energy term's checks here.
    meanfield.testing.scheme_checks.check_scheme : runs a PDE scheme's checks here.

    Examples
    --------
    >>> from meanfield.testing._runner import CheckRunner
    >>> runner = CheckRunner("check_sum", "pair")
    >>> with runner.check("sum"):
    ...     runner.compare("1 + 1 vs 2", [1.0 + 1.0], [2.0], rtol=0, atol=0)
    >>> try:
    ...     with runner.check("sum"):
    ...         runner.compare("1 + 1 vs 3", [2.0], [3.0], rtol=0, atol=0.5)
    ... except AssertionError as err:
    ...     print(err)  # doctest: +NORMALIZE_WHITESPACE
    check_sum('pair') failed the 'sum' check: 1 + 1 vs 3: at entry [0]: observed 2,
    expected 3 (|difference| 1 > tolerance 0.5; 1 of 1 entries outside)
    """

    def __init__(self, function: str, obj):
        self.function, self.obj = function, obj
        self.name: str | None = None

    @contextlib.contextmanager
    def check(self, name: str) -> Iterator[None]:
        """Run the check ``name``: the failures inside are reported under it, and an exception
        other than AssertionError (a kernel that cannot take numpy, a term whose value autograd
        cannot differentiate) becomes an AssertionError naming the check, the original chained
        as its cause.

        Examples
        --------
        >>> from meanfield.testing._runner import CheckRunner
        >>> runner = CheckRunner("check_thing", 1)
        >>> try:
        ...     with runner.check("division"):
        ...         1 / 0
        ... except AssertionError as err:
        ...     print(err)
        check_thing(1) failed the 'division' check: it raised ZeroDivisionError: division by zero
        """
        self.name = name
        try:
            yield
        except AssertionError:
            raise
        except Exception as err:  # noqa: BLE001 (any failure of user code is a failed check)
            raise AssertionError(
                f"{self.function}({self.obj!r}) failed the {name!r} check: it raised "
                f"{type(err).__name__}: {err}"
            ) from err
        finally:
            self.name = None

    def fail(self, detail: str):
        """Fail the current check with ``detail``.

        Examples
        --------
        >>> from meanfield.testing._runner import CheckRunner
        >>> runner = CheckRunner("check_thing", 1)
        >>> try:
        ...     with runner.check("shape"):
        ...         runner.fail("a scalar, expected a vector")
        ... except AssertionError as err:
        ...     print(err)
        check_thing(1) failed the 'shape' check: a scalar, expected a vector
        """
        raise AssertionError(
            f"{self.function}({self.obj!r}) failed the {self.name!r} check: {detail}"
        )

    def require(self, ok: bool, detail: str) -> None:
        """Fail the current check with ``detail`` unless ``ok``.

        Examples
        --------
        >>> from meanfield.testing._runner import CheckRunner
        >>> runner = CheckRunner("check_thing", 1)
        >>> with runner.check("sign"):
        ...     runner.require(1 > 0, "negative")
        """
        if not ok:
            self.fail(detail)

    def compare(
        self,
        what: str,
        observed,
        expected,
        *,
        rtol: float,
        atol: float,
        at: Callable[[tuple], str] | None = None,
    ) -> None:
        """Fail the current check unless |observed − expected| ≤ atol + rtol |expected|
        entrywise (NaN anywhere fails).

        The message gives ``what``, the worst entry and its input (``at(index)``), both
        numbers, the difference against the tolerance and how many entries are outside.

        Parameters
        ----------
        what : str
            What is compared (``"k(−z) vs k(z)"``).
        observed, expected : array_like or torch.Tensor
            Of the same shape (compared in float64).
        rtol, atol : float
            Relative and absolute tolerance.
        at : callable, optional
            Index tuple -> the input in words (default ``"entry [i, j]"``).

        Examples
        --------
        >>> import math
        >>> from meanfield.testing._runner import CheckRunner
        >>> runner = CheckRunner("check_thing", 1)
        >>> with runner.check("value"):
        ...     runner.compare("inf vs inf", [math.inf, 1.0], [math.inf, 1.0 + 1e-15],
        ...                    rtol=1e-14, atol=0)
        """
        obs, exp = _as_f64(observed), _as_f64(expected)
        if obs.shape != exp.shape:
            self.fail(f"{what}: shape {tuple(obs.shape)}, expected {tuple(exp.shape)}")
        if obs.numel() == 0:
            return
        err = (obs - exp).abs()
        allowed = atol + rtol * exp.abs()
        excess = err - allowed
        # NaN anywhere, or an infinity that does not match, is an infinite excess (inf − inf
        # and NaN comparisons would otherwise pass); equal entries, infinities included, agree
        excess = torch.where(torch.isfinite(excess), excess, math.inf)
        excess = torch.where(obs == exp, -math.inf, excess)
        bad = excess > 0
        if not bool(bad.any()):
            return
        flat = int(torch.argmax(torch.where(bad, excess, -math.inf)))
        index = tuple(int(i) for i in np.unravel_index(flat, tuple(obs.shape)))
        where = at(index) if at is not None else f"entry {list(index)}"
        self.fail(
            f"{what}: at {where}: observed {float(obs[index]):.17g}, expected "
            f"{float(exp[index]):.17g} (|difference| {float(err[index]):.3g} > tolerance "
            f"{float(allowed[index]):.3g}; {int(bad.sum())} of {obs.numel()} entries outside)"
        )
