"""Renamed keyword arguments, accepted under their former names for one version."""

from __future__ import annotations

import functools
import warnings

from ..errors import InputError


def renamed_keywords(**old_to_new: str):
    """Decorator: the keyword ``old`` still works as ``new`` and warns (``FutureWarning``).

    Passing both spellings is an :class:`~meanfield.errors.InputError` naming both.

    Examples
    --------
    >>> @renamed_keywords(N="n_particles")
    ... def f(n_particles):
    ...     return n_particles
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     f(N=3)
    3
    """

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for old, new in old_to_new.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise InputError(f"give {new} or its former name {old}, not both")
                warnings.warn(
                    f"{func.__name__}({old}=...) is deprecated and will be removed in the next "
                    f"version; use {new}=...",
                    FutureWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper

    return decorate
