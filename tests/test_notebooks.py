"""Every notebook (jupytext percent-format .py) executes top to bottom in its small size, and
the checks it asserts on the quantities it shows hold (a failing ``assert`` in a notebook
fails its test)."""

import ast
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.py"))


def _execute(nb, tmp_path, monkeypatch):
    """Run ``nb`` in a fresh kernel at the small size; raises CellExecutionError (with the
    cell and its traceback) at the first cell that fails."""
    monkeypatch.setenv("MEANFIELD_NOTEBOOK_SIZE", "small")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    return nb


def _asserts(nb) -> int:
    """Number of ``assert`` statements in the notebook's code cells."""
    return sum(
        isinstance(node, ast.Assert)
        for c in nb.cells
        if c.cell_type == "code"
        for node in ast.walk(ast.parse(c.source))
    )


@pytest.mark.slow  # a kernel per notebook: 11-25 s each
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_its_checks_hold(path, tmp_path, monkeypatch):
    nb = jupytext.read(path)
    # a notebook that shows results must also check them (claims of its text, asserted)
    assert _asserts(nb) >= 2, f"{path.name} asserts nothing about what it shows"
    _execute(nb, tmp_path, monkeypatch)
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_paired_ipynb_has_the_same_code(path):
    """The .ipynb next to each .py (jupytext pairing) holds the same code cells."""
    py = jupytext.read(path)
    ipynb = nbformat.read(path.with_suffix(".ipynb"), as_version=4)
    code = [c.source.strip() for c in py.cells if c.cell_type == "code"]
    assert code == [c.source.strip() for c in ipynb.cells if c.cell_type == "code"]


@pytest.mark.slow  # starts a kernel
def test_a_failing_notebook_assertion_fails_the_run(tmp_path, monkeypatch):
    """The mechanism the checks rely on: an assert that fails inside a notebook stops the
    execution with an error naming it."""
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("assert x == 2")]
    )
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="AssertionError"):
        _execute(nb, tmp_path, monkeypatch)
