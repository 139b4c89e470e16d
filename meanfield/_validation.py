"""Input checks shared by every module.

Each check raises before any work is done, with a message that names the parameter and the
allowed range, so that a user who mistypes a flag learns what to change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def check_positive(name: str, value, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float if it is finite and > 0 (or >= 0 with ``allow_zero``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(v) or (v < 0 if allow_zero else v <= 0):
        rng = "[0, inf)" if allow_zero else "(0, inf)"
        raise ValueError(f"{name} must be a finite number in {rng}, got {value!r}")
    return v


def check_int(name: str, value, *, minimum: int = 1) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def check_finite_real(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def check_choice(name: str, value, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(map(repr, choices))}")
    return value


def check_array(name: str, array, *, ndim: int | None = None, shape=None) -> np.ndarray:
    """Return ``array`` as a float64 numpy array, checking rank, shape and finiteness.

    ``shape`` may hold ``None`` for free axes.
    """
    a = np.asarray(array.detach().cpu() if hasattr(array, "detach") else array, dtype=float)
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-dimensional array, got shape {a.shape}")
    if shape is not None:
        if a.ndim != len(shape) or any(
            s is not None and s != t for s, t in zip(shape, a.shape, strict=True)
        ):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {a.shape}")
    if a.size and not np.all(np.isfinite(a)):
        bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
        raise ValueError(
            f"{name} contains {bad} non-finite value(s) (NaN or inf); all must be finite"
        )
    return a
