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

import argparse
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


def _folders():
    sys.path.insert(0, str(ROOT / "paper_repro"))
    try:
        import study_folders
    finally:
        sys.path.remove(str(ROOT / "paper_repro"))
    return study_folders


class _Refused(Exception):
    pass


class _Parser:
    @staticmethod
    def error(message):
        raise _Refused(message)


def _args(**kw):
    base = dict(out=None, in_place=False, report_only=False, report_dir=None)
    return argparse.Namespace(**{**base, **kw})


def test_study_folders_write_committed_results_only_in_place(tmp_path):
    """The rules of ``paper_repro/study_folders.py``, checked without running a study."""
    sf = _folders()
    results = SYNTHETIC / "results"
    kw = dict(results=results, name="round3_full")
    scratch = ROOT / "runs" / "paper_repro" / "synthetic"
    # computing: scratch by default (ignored by git), the committed folder only in place
    assert sf.study_folder(_Parser, _args(), **kw) == scratch / "round3_full"
    assert sf.study_folder(_Parser, _args(in_place=True), **kw) == results / "round3_full"
    with pytest.raises(_Refused, match="--in-place"):
        sf.study_folder(_Parser, _args(out=str(results / "round3_full")), **kw)
    assert sf.study_folder(_Parser, _args(out=str(tmp_path)), **kw) == tmp_path
    # --report-only: reads the committed runs, writes the reports elsewhere unless in place
    ro = _args(report_only=True)
    out = sf.study_folder(_Parser, ro, **kw)
    assert out == results / "round3_full"
    assert sf.report_folder(_Parser, ro, out, **kw) == scratch / "round3_full_report"
    ro_in = _args(report_only=True, in_place=True)
    assert sf.report_folder(_Parser, ro_in, out, **kw) == out
    mine = _args(report_only=True, out=str(tmp_path))
    assert sf.report_folder(_Parser, mine, tmp_path, **kw) == tmp_path  # not committed
    with pytest.raises(_Refused, match="committed"):
        bad = _args(report_only=True, report_dir=results / "elsewhere")
        sf.report_folder(_Parser, bad, out, **kw)
    (tmp_path / "keep.txt").write_text("a user's file")
    with pytest.raises(_Refused, match="neither empty nor a report folder"):
        sf.report_folder(_Parser, _args(report_only=True, report_dir=tmp_path), out, **kw)
    with pytest.raises(_Refused, match="only with --report-only"):
        sf.study_folder(_Parser, _args(report_dir=tmp_path), **kw)
    # git ignores the scratch root
    if shutil.which("git") and (ROOT / ".git").exists():
        probe = str((scratch / "x" / "runs" / "a.nc").relative_to(ROOT))
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
