"""Deprecated names kept for one version: a module-level ``__getattr__`` that warns.

Other helpers may use it for their renames too.
"""

from __future__ import annotations

import warnings

__all__ = ["deprecated_aliases"]


def deprecated_aliases(module: str, aliases: dict):
    """A module ``__getattr__`` that resolves old names to new objects with a DeprecationWarning.

    Parameters
    ----------
    module : str
        The module's ``__name__`` (for messages).
    aliases : dict of str -> (str, callable)
        Old name -> (new name, zero-argument function returning the new object); the function
        is called at look-up, so the alias may be defined before the object.

    Returns
    -------
    callable
        ``__getattr__(name)`` for the module (PEP 562).

    Examples
    --------
    >>> __getattr__ = deprecated_aliases(__name__, {"Old": ("New", lambda: New)})  # doctest: +SKIP
    """

    def __getattr__(name: str):
        if name in aliases:
            new, get = aliases[name]
            warnings.warn(
                f"{module}.{name} is deprecated and will be removed in the next version; "
                f"use {module}.{new}",
                DeprecationWarning,
                stacklevel=2,
            )
            return get()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
