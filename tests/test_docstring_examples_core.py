"""The ``Examples`` sections of the core numerical modules run and print what they show.

Same check as :mod:`test_docstring_examples` (every public function and class of each module
listed here holds a doctest example in its own docstring, and every example passes), for the
kernels, energies, diagnostics and pair sums.
"""

from __future__ import annotations

import tempfile

import pytest
import torch
from test_docstring_examples import _run_examples

MODULES = [
    "meanfield.kernels",
    "meanfield.energy",
    "meanfield.diagnostics",
    "meanfield.pairsum",
    "meanfield.transport",
    "meanfield.fastsums",
    "meanfield.compare",
    "meanfield.problems",
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
