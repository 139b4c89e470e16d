"""The ``Examples`` sections of the documented modules run and print what they show.

Each module listed here has a numpydoc docstring with an example on every public function
and class; the test runs them as doctests, so an example that drifts from the code fails.
A module must hold at least one example per public definition (a test that ran no example
could not fail).
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import tempfile

import pytest
import torch

MODULES = [
    "meanfield.domains",
    "meanfield.closed_forms",
    "meanfield.errors",
    "meanfield._validation",
    "meanfield.attention.metrics",
    "meanfield.attention.noise",
    "meanfield.attention.model",
    "meanfield.attention.training",
    "meanfield.attention.tokenizer",
    "meanfield.config",
    "meanfield.synthetic",
    "meanfield.results",
    "meanfield.sweeps",
    "meanfield.attention.data",
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
