"""Every notebook (jupytext percent-format .py) executes top to bottom in its small size."""

import os
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.py"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    monkeypatch.setenv("MEANFIELD_NOTEBOOK_SIZE", "small")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nb = jupytext.read(path)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    assert os.environ["MEANFIELD_NOTEBOOK_SIZE"] == "small"
