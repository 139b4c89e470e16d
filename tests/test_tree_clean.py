"""Documented commands leave the repository's tracked files as they are: ``meanfield figures``
writes to ``runs/figures`` unless ``--in-place``; the study scripts' ``--report-only`` reads the
committed runs and writes its reports elsewhere (never a run record, never a wall time of its
own); quick configurations go under ``runs/`` (ignored); the gallery runs from any folder; the
notebook command of ``docs/notebooks.rst`` works with the ``studies`` extra and writes under
``runs/``.

Every test hashes the tracked files it could touch before and after (``git ls-files``), and
writes only under ``tmp_path``.
"""

from __future__ import annotations

import hashlib
import os
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC = ROOT / "paper_repro" / "synthetic"


def _tracked(*folders: str) -> dict[str, str]:
    """SHA-256 of every tracked file under ``folders`` (paths relative to the checkout)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    names = subprocess.run(
        ["git", "ls-files", "-z", "--", *folders],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    out = {}
    for name in filter(None, names):
        path = ROOT / name.decode()
        out[name.decode()] = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""
    assert out, folders  # the folders hold tracked files: the comparison can fail
    return out


def _script(path: Path, args, cwd, timeout=300):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    return subprocess.run(
        [sys.executable, str(path), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow  # the smallest figure at its small size: ~9 s
def test_figures_default_is_runs_figures_and_in_place_is_the_checkout(tmp_path, monkeypatch):
    """``meanfield figures`` (the smallest figure at its small size) writes into
    ``./runs/figures``; the committed ``figures/`` is unchanged; ``--in-place`` names the
    checkout's ``figures/`` wherever the command runs, and excludes ``--out``."""
    import matplotlib

    from meanfield.cli import build_parser
    from meanfield.cli.commands import cmd_figures
    from meanfield.cli.figures import committed_figures_dir

    before = _tracked("figures")
    monkeypatch.chdir(tmp_path)
    parser = build_parser()
    args = parser.parse_args(["figures", "--size", "small", "--only", "t_limit"])
    assert args.out == "runs/figures"
    backend = matplotlib.get_backend()
    try:
        assert cmd_figures(args) == 0
    finally:
        matplotlib.use(backend)
    made = sorted(p.name for p in (tmp_path / "runs" / "figures").iterdir())
    assert made == ["t_limit.nc", "t_limit.pdf", "t_limit.png"]
    assert _tracked("figures") == before
    in_place = parser.parse_args(["figures", "--in-place"]).out
    assert Path(in_place) == committed_figures_dir() == ROOT / "figures"
    with pytest.raises(SystemExit):
        parser.parse_args(["figures", "--in-place", "--out", "x"])


def test_gallery_scripts_find_the_committed_data_from_any_folder(tmp_path, monkeypatch):
    """A gallery example run from an unrelated working directory reads ``figures/<name>.nc``
    of the checkout (sphinx-gallery defines no ``__file__``: the package locates it)."""
    import matplotlib

    from meanfield.cli.figures import FIGURES, committed_figure_data
    from meanfield.errors import InputError

    monkeypatch.chdir(tmp_path)
    backend = matplotlib.get_backend()
    matplotlib.use("Agg")
    try:
        runpy.run_path(str(ROOT / "docs" / "gallery" / "plot_t_limit.py"), run_name="__main__")
    finally:
        import matplotlib.pyplot as plt

        plt.close("all")
        matplotlib.use(backend)
    assert {committed_figure_data(n).name for n in FIGURES} == {f"{n}.nc" for n in FIGURES}
    with pytest.raises(InputError, match="figure"):
        committed_figure_data("nope")
    for path in (ROOT / "docs" / "gallery").glob("plot_*.py"):
        assert "Path.cwd()" not in path.read_text(), path.name


def test_study_folders_write_committed_results_only_in_place(tmp_path, monkeypatch):
    """The folder rules of the studies (:func:`meanfield.workbench.study_files.study_folders`)
    on a real committed preset, checked without running a study: computing goes to the
    scratch folder (ignored by git) unless in place; reports of committed runs go elsewhere."""
    from meanfield.errors import InputError
    from meanfield.workbench.study_files import read_study_file, study_folders

    monkeypatch.chdir(ROOT)  # the scratch folders are under the current directory
    f = read_study_file(SYNTHETIC / "configs" / "full.toml")
    results, scratch = SYNTHETIC / "results", Path("runs") / "synthetic"
    # computing: scratch by default (ignored by git), the committed folder only in place
    assert study_folders(f) == (scratch / "full", scratch / "full")
    assert study_folders(f, in_place=True)[0] == results / "full"
    with pytest.raises(InputError, match="--in-place"):
        study_folders(f, out=results / "full")
    assert study_folders(f, out=tmp_path) == (tmp_path, tmp_path)
    # --report-only: reads the committed runs, writes the reports elsewhere unless in place
    assert study_folders(f, report_only=True) == (results / "full", scratch / "full_report")
    assert study_folders(f, report_only=True, in_place=True) == (results / "full",) * 2
    assert study_folders(f, report_only=True, out=tmp_path) == (tmp_path, tmp_path)
    with pytest.raises(InputError, match="committed"):
        study_folders(f, report_only=True, report_dir=results / "elsewhere")
    (tmp_path / "keep.txt").write_text("a user's file")
    with pytest.raises(InputError, match="neither empty nor a report folder"):
        study_folders(f, report_only=True, report_dir=tmp_path)
    with pytest.raises(InputError, match="only with --report-only"):
        study_folders(f, report_dir=tmp_path)
    # git ignores the scratch root
    if shutil.which("git") and (ROOT / ".git").exists():
        probe = str(scratch / "x" / "runs" / "a.nc")
        assert subprocess.run(["git", "check-ignore", "-q", probe], cwd=ROOT).returncode == 0


def _notebook_commands() -> list[str]:
    """The notebook commands of docs/notebooks.rst (its ``code-block:: bash``, minus pip)."""
    text = (ROOT / "docs" / "notebooks.rst").read_text()
    block = text.split(".. code-block:: bash", 1)[1].split("\n\n", 2)[1]
    lines = [ln.split("#")[0].strip() for ln in block.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("pip ")]


@pytest.mark.slow  # a kernel starts and runs the notebook: ~30 s
def test_documented_notebook_command_runs_with_the_studies_extra(tmp_path):
    """The commands of docs/notebooks.rst, from a copy of the notebook in a scratch checkout
    layout, with the tools of the ``studies`` extra only (jupytext, nbclient, ipykernel):
    the executed notebook lands under ``runs/notebooks`` and the committed pair is unchanged."""
    pytest.importorskip("jupytext")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    extra = re.search(r"^studies = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M)
    assert extra and all(t in extra.group(1) for t in ("jupytext", "nbclient", "ipykernel"))
    commands = _notebook_commands()
    assert any("jupytext" in c for c in commands) and any("jupyter execute" in c for c in commands)
    before = _tracked("notebooks")
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "n_limit.py", tmp_path / "notebooks" / "n_limit.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    for command in commands:
        argv = shlex.split(command)
        res = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert res.returncode == 0, (command, res.stderr[-2000:])
    import nbformat

    nb = nbformat.read(tmp_path / "runs" / "notebooks" / "n_limit.ipynb", as_version=4)
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert _tracked("notebooks") == before
