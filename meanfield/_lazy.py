"""Submodules of a package as attributes, imported on first access (PEP 562).

The wing packages (:mod:`meanfield.dynamics`, :mod:`meanfield.ot`,
:mod:`meanfield.workbench`) import none of their modules when they are imported themselves,
so ``import meanfield.workbench.sweeps`` costs the sweeps alone; ``mf.ot.sparse`` still works.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__ = ["submodule_attributes"]


def submodule_attributes(package: str, path, names: dict[str, str] | None = None) -> tuple:
    """``(__getattr__, __dir__)`` for a package: its public modules, imported when first read.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    path : list of str
        The package's ``__path__``.
    names : dict of str -> str, optional
        Entry points of the package: name -> the module (relative to the package) that
        defines it, imported when the name is first read (``mf.ot.w2``).  A name must not be
        spelled like a module of the package.

    Returns
    -------
    tuple of callable
        The module-level ``__getattr__(name)`` and ``__dir__()`` (PEP 562).

    Examples
    --------
    >>> get, names = submodule_attributes("meanfield.ot", __import__("meanfield.ot").ot.__path__)
    >>> "sparse" in names(), get("sparse").__name__
    (True, 'meanfield.ot.sparse')
    >>> get, names = submodule_attributes("meanfield.ot", [], {"w2": "distance"})
    >>> get("w2").__module__
    'meanfield.ot.distance'
    """
    found = frozenset(m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_"))
    names = dict(names or {})
    if clash := sorted(found & set(names)):
        raise ValueError(f"entry points of {package} spelled like its modules: {clash}")

    def __getattr__(name: str):
        if name in names:
            return getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        if name in found:
            return importlib.import_module(f"{package}.{name}")  # which sets the attribute
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(found | set(names))

    return __getattr__, __dir__
