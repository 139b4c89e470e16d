"""Deprecated names and module paths kept for one version, each with a DeprecationWarning.

* :func:`warn_deprecated`: the warning of a name or call form kept for one release;
* :func:`deprecated_aliases`: a module-level ``__getattr__`` for renamed names;
* :data:`MOVED_MODULES` and :func:`install_moved_module_finder`: the modules that moved into
  the wing packages (``meanfield.particles`` is now ``meanfield.dynamics.langevin``), found
  at their old paths by a meta path finder that the package installs on import.
"""

from __future__ import annotations

import warnings

__all__ = [
    "deprecated_aliases",
    "MOVED_MODULES",
    "install_moved_module_finder",
    "warn_deprecated",
    "warn_moved",
]


def warn_deprecated(old: str, instead: str, *, stacklevel: int = 3) -> None:
    """The DeprecationWarning of a name or call form that works for one more release.

    Parameters
    ----------
    old : str
        What is deprecated, as the caller wrote it (``"MALA.step(state, generator)"``).
    instead : str
        What to write instead (the message reads "...; use <instead>").
    stacklevel : int
        As :func:`warnings.warn`, counted from the caller of this function: the default 3
        points at the line that called the function which calls this one.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn_deprecated("f(x, g)", "f(x)")
    >>> str(seen[0].message)
    'f(x, g) is deprecated and will be removed in the next version; use f(x)'
    """
    warnings.warn(
        f"{old} is deprecated and will be removed in the next version; use {instead}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


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
            warn_deprecated(f"{module}.{name}", f"{module}.{new}")
            return get()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


#: Modules that moved into the wing packages (issue 21): old import path -> new one.  The old
#: paths keep working for one release, with a DeprecationWarning naming the new path.
MOVED_MODULES = {
    "meanfield.chains": "meanfield.dynamics.chains",
    "meanfield.particles": "meanfield.dynamics.langevin",
    "meanfield.samplers": "meanfield.dynamics.hmc",
    "meanfield.transport": "meanfield.ot.sparse",
    "meanfield.spacing": "meanfield.ot.spacing",
    "meanfield.diagnostics": "meanfield.ot.diagnostics",
    "meanfield.problems": "meanfield.workbench.problems",
    "meanfield.sweeps": "meanfield.workbench.sweeps",
    "meanfield.config": "meanfield.workbench.config",
    "meanfield.compare": "meanfield.workbench.compare",
    "meanfield.plotting": "meanfield.workbench.plotting",
    "meanfield.figures": "meanfield.studies.figures",
    "meanfield.synthetic": "meanfield.learners.tasks",
}


def warn_moved(old: str, new: str, stacklevel: int = 3) -> None:
    """The DeprecationWarning of a module that moved from ``old`` to ``new``.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn_moved("meanfield.sweeps", "meanfield.workbench.sweeps")
    >>> str(seen[0].message).split(";")[0]
    'meanfield.sweeps moved to meanfield.workbench.sweeps'
    """
    warnings.warn(
        f"{old} moved to {new}; the old path works for one release only (import {new} instead)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class _MovedModuleFinder:
    """A meta path finder that answers an old module path with the module at its new path.

    ``import meanfield.particles`` (or ``from meanfield.particles import simulate``) then gives
    the module object of ``meanfield.dynamics.langevin`` itself, so every name, patch and
    ``isinstance`` check is shared, and warns once per import statement that finds it
    (Python caches the module under the old name afterwards, as for any import).
    """

    def find_spec(self, fullname, path=None, target=None):
        new = MOVED_MODULES.get(fullname)
        if new is None:
            return None
        import importlib.util

        return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(fullname, new))


class _MovedModuleLoader:
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def create_module(self, spec):
        import importlib

        # the warning points at the importing line: warnings skips importlib's own frames
        warn_moved(self.old, self.new, stacklevel=3)
        module = importlib.import_module(self.new)
        self._spec = module.__spec__  # importlib sets __spec__ to the old path's: restored below
        return module

    def exec_module(self, module):
        module.__spec__ = self._spec  # the module is already executed; it keeps its own spec


def install_moved_module_finder() -> None:
    """Put the finder of moved modules on ``sys.meta_path`` (once; the package does it).

    Examples
    --------
    >>> import sys
    >>> install_moved_module_finder()
    >>> sum(isinstance(f, _MovedModuleFinder) for f in sys.meta_path)
    1
    """
    import sys

    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
