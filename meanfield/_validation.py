"""Input checks shared by every module.

Each check raises before any work is done, with a message that names the parameter and the
allowed range, so that a user who mistypes a flag learns what to change.

Examples
--------
>>> from meanfield._validation import check_choice, check_positive
>>> check_positive("eta", 0.05)
0.05
>>> check_positive("eta", "0.05")  # a quoted number is a slip: refused, not converted
Traceback (most recent call last):
    ...
meanfield.errors.InputTypeError: eta must be a real number, got the string '0.05'
>>> check_choice("regime", "mean-field", ("mean-field", "coulomb-gas"))
'mean-field'
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from .errors import InputError, InputTypeError

#: How the caller spelled each parameter (a command-line flag), for the errors of a block.
_SPELLED: ContextVar[Mapping[str, str] | None] = ContextVar("meanfield_spelled", default=None)


@contextmanager
def spelled_as(names: Mapping[str, str]) -> Iterator[None]:
    """Inside the block, an error about parameter ``k`` names it ``names[k]``.

    The command line builds a typed configuration from its flags inside this block, so that
    the configuration's one validation names each value by its flag (``--cells``) and not by
    its field name (``cells``).

    Parameters
    ----------
    names : mapping of str to str
        Field name -> how it was spelled.

    Examples
    --------
    >>> from meanfield._validation import check_int, spelled_as
    >>> with spelled_as({"cells": "--cells"}):
    ...     check_int("cells (grid cells per axis)", 1, minimum=4)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: --cells must be an integer >= 4, got 1
    """
    token = _SPELLED.set(dict(names))
    try:
        yield
    finally:
        _SPELLED.reset(token)


def shown(name: str) -> str:
    """The parameter label ``name`` as the caller spelled it (:func:`spelled_as`).

    A label is a field name, possibly followed by an explanation ("eta (step size)"); inside
    :func:`spelled_as` a field with a spelling is shown by its spelling alone.  The checks call
    it only on their error path, so a check that passes reads no context (and stays traceable
    by ``torch.compile``).

    Parameters
    ----------
    name : str
        The label.

    Returns
    -------
    str

    Examples
    --------
    >>> from meanfield._validation import shown, spelled_as
    >>> shown("eta (step size)")
    'eta (step size)'
    >>> with spelled_as({"eta": "--eta"}):
    ...     shown("eta (step size)")
    '--eta'
    """
    names = _SPELLED.get()
    return names.get(name.split(" ", 1)[0], name) if names else name


def _real(name: str, value) -> float:
    """``float(value)``, refusing what is not a real number, booleans and strings included:
    ``True`` is an int to Python and ``"3"`` converts, but ``beta = true`` or ``beta = "3"`` in
    a TOML file is a slip, not β = 1 or 3 (the command line parses its words first)."""
    if isinstance(value, (bool, np.bool_)):
        raise InputTypeError(f"{shown(name)} must be a real number, got the boolean {value!r}")
    if isinstance(value, (str, bytes)):  # "3" in a TOML file or a call is a quoting slip
        raise InputTypeError(f"{shown(name)} must be a real number, got the string {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputTypeError(f"{shown(name)} must be a real number, got {value!r}") from None


def check_positive(name: str, value, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float if it is finite and > 0 (or ≥ 0 with ``allow_zero``).

    Parameters
    ----------
    name : str
        Name of the parameter, quoted in the error message.
    value : object
        Anything ``float()`` accepts.
    allow_zero : bool, default False
        Accept 0.

    Returns
    -------
    float

    Raises
    ------
    meanfield.errors.InputTypeError
        ``value`` is not a real number (a boolean is refused: ``True`` is not 1.0 here).
    meanfield.errors.InputError
        ``value`` is not finite, or not in (0, ∞) (``[0, ∞)`` with ``allow_zero``).

    Examples
    --------
    >>> from meanfield._validation import check_positive
    >>> check_positive("lam", 0, allow_zero=True)
    0.0
    """
    v = _real(name, value)
    if not math.isfinite(v) or (v < 0 if allow_zero else v <= 0):
        rng = "[0, inf)" if allow_zero else "(0, inf)"
        raise InputError(f"{shown(name)} must be a finite number in {rng}, got {value!r}")
    return v


def check_int(name: str, value, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int if it is an integer ≥ ``minimum`` (bool is refused).

    Parameters
    ----------
    name : str
        Name of the parameter, quoted in the error message.
    value : int or numpy.integer
        The value; a float such as ``3.0`` is refused, not rounded.
    minimum : int, default 1
        Smallest allowed value.
    maximum : int, optional
        Largest allowed value (none by default).

    Returns
    -------
    int

    Raises
    ------
    meanfield.errors.InputTypeError
        ``value`` is not an integer.
    meanfield.errors.InputError
        ``value`` < ``minimum`` or > ``maximum``.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield._validation import check_int
    >>> check_int("seed", np.int64(0), minimum=0)
    0
    >>> check_int("order", 3, maximum=2)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: order must be an integer in [1, 2], got 3
    """
    if maximum is None:
        allowed = f"an integer >= {minimum}"
    else:
        allowed = f"an integer in [{minimum}, {maximum}]"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputTypeError(f"{shown(name)} must be {allowed}, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        raise InputError(f"{shown(name)} must be {allowed}, got {value}")
    return int(value)


#: The largest seed: 2⁶³ − 1.  A seed seeds torch's generator (a signed 64-bit ``manual_seed``
#: in the package's streams) and numpy's, and is recorded as a 64-bit integer attribute of
#: every result; anything larger overflowed in one of them.
MAX_SEED = 2**63 - 1


def check_seed(name: str, value) -> int:
    """Return ``value`` as an int if it is a seed: an integer in [0, :data:`MAX_SEED`].

    Parameters
    ----------
    name : str
        Name of the parameter, quoted in the error message.
    value : int or numpy.integer
        The seed (bool and floats are refused).

    Returns
    -------
    int

    Raises
    ------
    meanfield.errors.InputTypeError
        ``value`` is not an integer.
    meanfield.errors.InputError
        ``value`` < 0 or > 2⁶³ − 1.

    Examples
    --------
    >>> from meanfield._validation import check_seed
    >>> check_seed("seed", 2**63 - 1)
    9223372036854775807
    >>> check_seed("seed", 2**70)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: seed must be an integer in [0, 9223372036854775807], got 1...
    """
    return check_int(name, value, minimum=0, maximum=MAX_SEED)


def check_level(name: str, value) -> float:
    """Return ``value`` as a float if it lies in the open interval (0, 1): a confidence level
    or a probability that must be neither 0 nor 1 (bool refused).

    Parameters
    ----------
    name : str
        Name of the parameter, quoted in the error message.
    value : float
        The value.

    Returns
    -------
    float

    Raises
    ------
    meanfield.errors.InputTypeError
        ``value`` is not a real number.
    meanfield.errors.InputError
        ``value`` is NaN or outside (0, 1).

    Examples
    --------
    >>> from meanfield._validation import check_level
    >>> check_level("level", 0.95)
    0.95
    >>> check_level("level", 1.5)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: level must be a number in (0, 1), got 1.5
    """
    v = _real(name, value)
    if not 0.0 < v < 1.0:  # NaN fails both comparisons
        raise InputError(f"{shown(name)} must be a number in (0, 1), got {value!r}")
    return v


def check_finite_real(name: str, value) -> float:
    """Return ``value`` as a finite float (any sign).

    Parameters
    ----------
    name : str
        Name of the parameter, quoted in the error message.
    value : object
        Anything ``float()`` accepts.

    Returns
    -------
    float

    Raises
    ------
    meanfield.errors.InputTypeError
        ``value`` is not a real number (a boolean is refused).
    meanfield.errors.InputError
        ``value`` is NaN or infinite.

    Examples
    --------
    >>> from meanfield._validation import check_finite_real
    >>> check_finite_real("s", -1)
    -1.0
    """
    v = _real(name, value)
    if not math.isfinite(v):
        raise InputError(f"{shown(name)} must be finite, got {value!r}")
    return v


def check_choice(name: str, value, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``.

    Parameters
    ----------
    name : str
        Name of the parameter, quoted in the error message.
    value : object
        The value to check.
    choices : iterable of str
        The allowed values (a dict gives its keys).

    Returns
    -------
    str
        ``value``, unchanged.

    Raises
    ------
    meanfield.errors.InputError
        ``value`` is not in ``choices``; the message lists them.

    Examples
    --------
    >>> from meanfield._validation import check_choice
    >>> check_choice("domain", "disk", ("box", "ball"))
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown domain 'disk'; choose one of 'box', 'ball'
    """
    choices = tuple(choices)
    if value not in choices:
        raise InputError(
            f"unknown {shown(name)} {value!r}; choose one of {', '.join(map(repr, choices))}"
        )
    return value


def check_array(name: str, array, *, ndim: int | None = None, shape=None) -> np.ndarray:
    """Return ``array`` as a float64 numpy array, checking rank, shape and finiteness.

    Parameters
    ----------
    name : str
        Name of the parameter, quoted in the error message.
    array : array_like or torch.Tensor
        The values (a tensor is detached and moved to the CPU).
    ndim : int, optional
        Required number of dimensions.
    shape : tuple of (int or None), optional
        Required shape; ``None`` marks a free axis.

    Returns
    -------
    numpy.ndarray of float64
        A copy or view of ``array``.

    Raises
    ------
    meanfield.errors.InputError
        Wrong rank or shape, or a NaN/inf entry (the message counts them).
    meanfield.errors.InputTypeError
        Values that are not real numbers (strings, complex numbers, a ragged list).

    Examples
    --------
    >>> from meanfield._validation import check_array
    >>> check_array("X", [[0, 1], [2, 3]], shape=(None, 2)).dtype
    dtype('float64')
    """
    raw = array.detach().cpu() if hasattr(array, "detach") else array
    if np.iscomplexobj(raw):  # the cast to float would drop the imaginary part silently
        raise InputTypeError(f"{name} must hold real numbers, got a complex array")
    try:
        a = np.asarray(raw, dtype=float)
    except (TypeError, ValueError) as err:  # strings, ragged lists, objects
        raise InputTypeError(
            f"{name} must be an array of real numbers, got {type(array).__name__} ({err})"
        ) from None
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
    """A non-empty, finite sample as a float64 array (an empty or NaN sample has no distance).

    Parameters
    ----------
    name : str
        Name of the parameter, quoted in the error message.
    values : array_like
        The sample.
    ndim : int, optional
        Required number of dimensions.

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    meanfield.errors.InputError
        The sample is empty, has the wrong rank, or holds NaN/inf.

    Examples
    --------
    >>> from meanfield._validation import check_sample
    >>> check_sample("samples", [])
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: samples is empty; a sample needs at least one point
    """
    a = check_array(name, values, ndim=ndim)
    if a.size == 0:
        raise InputError(f"{name} is empty; a sample needs at least one point")
    return a


def check_fit_sizes(name: str, values, *, minimum: int = 3) -> np.ndarray:
    """The abscissae of a rate fit: positive, finite, with at least ``minimum`` distinct values.

    A line through fewer than three sizes has no residual to estimate its error from, so a
    rate "with a confidence interval" from one or two sizes would be meaningless.

    Parameters
    ----------
    name : str
        Name of the abscissa (``"N"``, ``"beta"``…), quoted in the error message.
    values : array_like
        The abscissae (flattened).
    minimum : int, default 3
        Number of distinct values required.

    Returns
    -------
    numpy.ndarray of float64, shape (n,)

    Raises
    ------
    meanfield.errors.InputError
        A value ≤ 0 or not finite, or fewer than ``minimum`` distinct values.

    Examples
    --------
    >>> from meanfield._validation import check_fit_sizes
    >>> check_fit_sizes("N", [100, 200, 400])
    array([100., 200., 400.])
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

    Refuses, with the reason:

    * for a file: an existing target that is not a regular file (a directory, a device such as
      ``/dev/null``, a FIFO, a socket: replacing it would destroy it, or writing to it would
      lose the result), and a path that names a folder: one ending in a path separator
      (``runs/``), or in ``.`` or ``..``.  A trailing separator is refused, never read as
      "the default file name inside this folder": give the file name;
    * for a folder: an existing target that is not a directory;
    * for both: a path under an existing file, and a nearest existing parent folder that is
      not writable (the folders still missing would be created there).

    Creates nothing.

    Parameters
    ----------
    name : str
        Name of the parameter, quoted in the error message.
    path : str or os.PathLike
        The path to check.
    kind : {"file", "dir"}, default "file"
        What will be written there.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    meanfield.errors.InputTypeError
        ``path`` is not a path.
    meanfield.errors.OutputPathError
        The path cannot be written as a ``kind``.

    Examples
    --------
    >>> from meanfield._validation import check_output_path
    >>> check_output_path("out", "runs/compare/comparison.nc").name
    'comparison.nc'
    >>> check_output_path("out", "runs/")
    Traceback (most recent call last):
        ...
    meanfield.errors.OutputPathError: out 'runs/' ends with a path separator, so it names a ...
    """
    import os
    import stat
    from pathlib import Path

    from .errors import OutputPathError

    check_choice("kind", kind, ("file", "dir"))
    try:
        raw = os.fspath(path)
        p = Path(path)
    except TypeError:
        raise InputTypeError(f"{name} must be a path, got {path!r}") from None
    if isinstance(raw, bytes) or raw == "":
        raise OutputPathError(f"{name} must be a non-empty path (a str), got {path!r}")
    if kind == "file":
        seps = tuple(s for s in (os.sep, os.altsep) if s)
        if raw.endswith(seps):
            raise OutputPathError(
                f"{name} {raw!r} ends with a path separator, so it names a folder; give a "
                f"file name (e.g. {raw + 'run.nc'!r})"
            )
        if p.name in ("", ".", "..") or raw.endswith(tuple(s + "." for s in seps)):
            raise OutputPathError(f"{name} {raw!r} names a folder; give a file name")
    try:
        mode = p.stat().st_mode  # follows a symbolic link: a link to /dev/null is a device
    except OSError:
        mode = None  # absent (or a dangling link, which a rename replaces)
    if kind == "file" and mode is not None and not stat.S_ISREG(mode):
        what = _file_kind(mode)
        if what == "a directory":
            raise OutputPathError(f"{name} {raw!r} is an existing directory; give a file name")
        raise OutputPathError(
            f"{name} {raw!r} exists and is {what}, not a regular file; it is never replaced "
            "or written to: give the path of a new or regular file"
        )
    if kind == "dir" and mode is not None and not stat.S_ISDIR(mode):
        raise OutputPathError(
            f"{name} {raw!r} is an existing file ({_file_kind(mode)}), not a folder; give a folder"
        )
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


def _file_kind(mode: int) -> str:
    """What an existing path is, in words, from its ``st_mode``."""
    import stat

    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((text for test, text in kinds if test(mode)), "not a regular file")


def check_device(name: str, device) -> str:
    """A torch device that exists here (``cpu``, ``cuda``, ``cuda:1``, ``mps``), as a string.

    Parameters
    ----------
    name : str
        Name of the parameter, quoted in the error message.
    device : str or torch.device
        The device.

    Returns
    -------
    str
        The canonical device string.

    Raises
    ------
    meanfield.errors.InputError
        Not a torch device, or a kind other than cpu, cuda and mps.
    meanfield.errors.ResourceError
        CUDA or MPS (or that CUDA index) is not available on this machine.

    Examples
    --------
    >>> from meanfield._validation import check_device
    >>> check_device("device", "cpu")
    'cpu'
    """
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
    """Import ``module`` or raise a DependencyError with the install command in the message.

    Parameters
    ----------
    module : str
        Module to import.
    feature : str
        What needs it, for the message.
    install : str
        The command that installs it, for the message.

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    meanfield.errors.DependencyError
        The import failed.

    Examples
    --------
    >>> from meanfield._validation import require_module
    >>> require_module("json", "reading results", "pip install json").__name__
    'json'
    """
    import importlib

    from .errors import DependencyError

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise DependencyError(
            f"{feature} needs the package {module!r} ({err}); install it with: {install}"
        ) from None


def env_ceiling(variable: str, default: float, meaning: str) -> float:
    """A ceiling read from the environment variable ``variable`` (``default`` when unset or
    empty; ``inf`` turns the check off), refusing what is not a number > 0 by name.

    Parameters
    ----------
    variable : str
        The environment variable.
    default : float
        The ceiling when it is unset.
    meaning : str
        What the ceiling is, for the message (e.g. "the work ceiling in evaluations").

    Returns
    -------
    float
        > 0 (``inf``: no ceiling).

    Examples
    --------
    >>> env_ceiling("MEANFIELD_UNSET_FOR_THIS_EXAMPLE", 1e3, "a ceiling")
    1000.0
    """
    text = os.environ.get(variable)
    if text is None or not text.strip():
        return float(default)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:  # NaN too
        raise InputError(
            f"the environment variable {variable} must be a number > 0 ({meaning}; inf turns "
            f"it off), got {text!r}"
        )
    return value
