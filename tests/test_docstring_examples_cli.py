"""The ``Examples`` of the command line's public functions run (see test_docstring_examples)."""

from __future__ import annotations

import tempfile

import pytest
import torch
from test_docstring_examples import _run_examples


@pytest.mark.parametrize("name", ["meanfield.cli"])
def test_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the examples write run.nc here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _run_examples(name)
    finally:
        torch.set_num_threads(threads)
