"""The ``Examples`` sections of the dynamics, sampler, plotting and study modules run.

Each module listed here has a numpydoc docstring with an example on every public function
and class; :func:`test_docstring_examples._run_examples` runs them as doctests and fails
when an example fails or a public definition has none.
"""

from __future__ import annotations

import tempfile

import pytest
import torch
from test_docstring_examples import _run_examples

MODULES = [
    "meanfield.particles",
    "meanfield.samplers",
    "meanfield.plotting",
    "meanfield.figures",
    "meanfield.studies._sizes",
    "meanfield.studies.limits",
    "meanfield.studies.ldp",
    "meanfield.studies.convergence",
    "meanfield.studies.limit_sweeps",
    "meanfield.studies.coulomb3d",
    "meanfield.studies.ldp_rate",
    "meanfield.studies.kernel_figure",
    "meanfield.studies.limit_curves",
]


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # and their temporary folders
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny examples: extra threads only add overhead on a shared machine
    try:
        _run_examples(name)
    finally:
        torch.set_num_threads(threads)
