"""The ``Examples`` sections of every module run and print what they show.

Every module of the package (bar :data:`EXEMPT`) has a numpydoc docstring with an example on
every public function and class; the test runs them as doctests, so an example that drifts
from the code fails.
A module must hold at least one example per public definition (a test that ran no example
could not fail).
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import tempfile

import pytest
import torch

import meanfield

#: Modules whose public definitions are exempt, with the reason.
EXEMPT = {
    "meanfield.pde._kernels": "private numba kernels, run through the public steppers' examples",
}
#: Every module of the package (discovered, so a new module is covered without editing this).
MODULES = ["meanfield"] + [
    m.name for m in pkgutil.walk_packages(meanfield.__path__, "meanfield.") if m.name not in EXEMPT
]


def _public_definitions(module) -> list[str]:
    """Functions and classes defined in ``module`` whose names do not start with ``_``."""
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == module.__name__
    ]


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # and their temporary folders
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: extra threads only add overhead on a shared machine
    try:
        _run_examples(name)
    finally:
        torch.set_num_threads(threads)


def _run_examples(name: str) -> None:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, name)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"
    # a definition's own docstring must hold the example (a method's does not count for its class)
    with_examples = {t.name[len(name) + 1 :] for t in tests if t.examples}
    missing = [d for d in _public_definitions(module) if d not in with_examples]
    assert not missing, f"public definitions of {name} without an example: {missing}"


def _methods_without_examples(module) -> list[str]:
    """Public methods and properties of the module's public classes whose docstring (their
    own, or the one they inherit from the method they override) shows no example."""
    missing = []
    for cname in _public_definitions(module):
        cls = getattr(module, cname)
        if not inspect.isclass(cls):
            continue
        for name, attr in vars(cls).items():
            if name.startswith("_") or not (
                inspect.isfunction(attr) or isinstance(attr, (property, classmethod, staticmethod))
            ):
                continue
            doc = inspect.getdoc(attr if isinstance(attr, property) else getattr(cls, name)) or ""
            if isinstance(attr, property) and not doc:  # a property inherits its base's text
                base = next((b for b in cls.__mro__[1:] if name in vars(b)), None)
                doc = inspect.getdoc(vars(base)[name]) or "" if base else ""
            if ">>>" not in doc:
                missing.append(f"{cname}.{name}")
    return missing


@pytest.mark.parametrize("name", MODULES)
def test_public_methods_have_examples(name):
    """Every public method and property shows an example (run by test_examples_run)."""
    module = importlib.import_module(name)
    assert not _methods_without_examples(module), _methods_without_examples(module)


#: Modules of the public API: none of their dotted parts is private.
PUBLIC_MODULES = [m for m in MODULES if not any(p.startswith("_") for p in m.split(".")[1:])]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_public_definitions_link_their_neighbours(name):
    """Every public function and class has a numpydoc ``See Also`` section: the links between
    the views (particles, grid, distances, energy, studies) that a reader follows."""
    module = importlib.import_module(name)
    missing = [
        d
        for d in _public_definitions(module)
        if "See Also" not in (inspect.getdoc(getattr(module, d)) or "")
    ]
    assert not missing, f"{name}: no See Also on {missing}"
