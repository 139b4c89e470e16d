"""Input checks shared by every module.

Each check raises before any work is done, with a message that names the parameter and the
allowed range, so that a user who mistypes a flag learns what to change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from .errors import InputError, InputTypeError


def check_positive(name: str, value, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float if it is finite and > 0 (or >= 0 with ``allow_zero``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputTypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(v) or (v < 0 if allow_zero else v <= 0):
        rng = "[0, inf)" if allow_zero else "(0, inf)"
        raise InputError(f"{name} must be a finite number in {rng}, got {value!r}")
    return v


def check_int(name: str, value, *, minimum: int = 1) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputTypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def check_finite_real(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputTypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(v):
        raise InputError(f"{name} must be finite, got {value!r}")
    return v


def check_choice(name: str, value, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise InputError(f"unknown {name} {value!r}; choose one of {', '.join(map(repr, choices))}")
    return value


def check_array(name: str, array, *, ndim: int | None = None, shape=None) -> np.ndarray:
    """Return ``array`` as a float64 numpy array, checking rank, shape and finiteness.

    ``shape`` may hold ``None`` for free axes.
    """
    a = np.asarray(array.detach().cpu() if hasattr(array, "detach") else array, dtype=float)
    if ndim is not None and a.ndim != ndim:
        raise InputError(f"{name} must be a {ndim}-dimensional array, got shape {a.shape}")
    if shape is not None:
        if a.ndim != len(shape) or any(
            s is not None and s != t for s, t in zip(shape, a.shape, strict=True)
        ):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise InputError(f"{name} must have shape {want}, got {a.shape}")
    if a.size and not np.all(np.isfinite(a)):
        bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
        raise InputError(
            f"{name} contains {bad} non-finite value(s) (NaN or inf); all must be finite"
        )
    return a


def check_sample(name: str, values, *, ndim: int | None = None) -> np.ndarray:
    """A non-empty, finite sample as a float64 array (an empty or NaN sample has no distance)."""
    a = check_array(name, values, ndim=ndim)
    if a.size == 0:
        raise InputError(f"{name} is empty; a sample needs at least one point")
    return a


def check_fit_sizes(name: str, values, *, minimum: int = 3) -> np.ndarray:
    """The abscissae of a rate fit: positive, finite, with at least ``minimum`` distinct values.

    A line through fewer than three sizes has no residual to estimate its error from, so a
    rate "with a confidence interval" from one or two sizes would be meaningless.
    """
    x = np.asarray(values, dtype=float).ravel()
    if x.size and (not np.all(np.isfinite(x)) or np.any(x <= 0)):
        raise InputError(f"{name} must be positive and finite, got {x.tolist()}")
    distinct = np.unique(x)
    if len(distinct) < minimum:
        raise InputError(
            f"a rate fit needs at least {minimum} distinct values of {name}, got "
            f"{len(distinct)} ({distinct.tolist()}); the rate is undetermined"
        )
    return x


def check_output_path(name: str, path, *, kind: str = "file"):
    """Check that ``path`` can be written as a ``kind`` ("file" or "dir") before any work.

    Refuses a file path that is an existing directory, a folder path that is an existing
    file, a path under an existing file, and a nearest existing parent that is not writable.
    Creates nothing.  Returns the path as a :class:`pathlib.Path`.
    """
    import os
    from pathlib import Path

    from .errors import OutputPathError

    check_choice("kind", kind, ("file", "dir"))
    try:
        p = Path(path)
    except TypeError:
        raise InputTypeError(f"{name} must be a path, got {path!r}") from None
    if str(path) == "":
        raise OutputPathError(f"{name} must be a non-empty path")
    if kind == "file" and p.is_dir():
        raise OutputPathError(f"{name} {str(p)!r} is an existing directory; give a file name")
    if kind == "dir" and p.exists() and not p.is_dir():
        raise OutputPathError(f"{name} {str(p)!r} is an existing file; give a folder")
    parent = p.parent if kind == "file" else p
    probe = parent
    while not probe.exists():
        if probe == probe.parent:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise OutputPathError(
            f"{name} {str(p)!r} lies under {str(probe)!r}, which is a file, not a folder"
        )
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise OutputPathError(f"{name} {str(p)!r}: the folder {str(probe)!r} is not writable")
    return p


def check_device(name: str, device) -> str:
    """A torch device that exists here (``cpu``, ``cuda``, ``cuda:1``, ``mps``), as a string."""
    import torch

    from .errors import ResourceError

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(
            f"{name} must be a torch device such as 'cpu' or 'cuda', got {device!r}"
        ) from None
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ResourceError(
                f"{name}={device!r}: CUDA is not available on this machine; use cpu"
            )
        if dev.index is not None and dev.index >= n:
            raise ResourceError(f"{name}={device!r}: this machine has {n} CUDA device(s)")
    elif dev.type == "mps":
        if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise ResourceError(f"{name}={device!r}: MPS is not available on this machine")
    elif dev.type != "cpu":
        raise InputError(f"{name} must be 'cpu', 'cuda[:k]' or 'mps', got {device!r}")
    return str(dev)


def require_module(module: str, feature: str, install: str):
    """Import ``module`` or raise a DependencyError with the install command in the message."""
    import importlib

    from .errors import DependencyError

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise DependencyError(
            f"{feature} needs the package {module!r} ({err}); install it with: {install}"
        ) from None
