"""The ``Examples`` sections of the grid solver and attention-kernel modules run.

Same check as :mod:`test_docstring_examples`: every public function and class of each module
listed here holds a doctest example in its own docstring, and all of them pass.
"""

from __future__ import annotations

import tempfile

import pytest
import torch
from test_docstring_examples import _run_examples

MODULES = [
    "meanfield.pde.grid",
    "meanfield.pde.field",
    "meanfield.pde.flux",
    "meanfield.pde.convolution",
    "meanfield.pde.potential",
    "meanfield.pde.equation",
    "meanfield.pde.solver",
    "meanfield.pde.stepper",
    "meanfield.pde.stationary",
    "meanfield.pde.trackers",
    "meanfield.attention.linear",
    "meanfield.attention.causal",
]


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # and their temporary folders
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny sizes: extra threads only add overhead on a shared machine
    try:
        _run_examples(name)
    finally:
        torch.set_num_threads(threads)
