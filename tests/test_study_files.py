"""The one study runner: study configuration files, overrides, folders, ``meanfield run``."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

import meanfield.studies as studies
from meanfield.cli import main
from meanfield.errors import InputError
from meanfield.workbench.study_files import (
    override_settings,
    read_study_file,
    stage_report,
    study_folders,
)


@pytest.fixture
def counting_study(monkeypatch):
    """A registered study that records its calls: settings ``n`` (int >= 1) and ``label``."""
    calls = []
    mod = types.ModuleType("counting_study_for_tests")

    def check_config(settings):
        unknown = set(settings) - {"n", "label"}
        if unknown:
            raise InputError(f"unknown settings {sorted(unknown)}")
        cfg = {"n": 1, "label": "x", **settings}
        if not isinstance(cfg["n"], int) or cfg["n"] < 1:
            raise InputError(f"n must be an integer >= 1, got {cfg['n']!r}")
        return cfg

    def run_study(settings, out, *, n_workers=None, scheduler=None, progress=True):
        calls.append(("run", settings, Path(out), n_workers, scheduler))
        (Path(out) / "runs").mkdir(parents=True, exist_ok=True)
        (Path(out) / "runs" / "r.json").write_text(json.dumps(settings))

    def write_report(out, report_dir):
        calls.append(("report", Path(out), Path(report_dir)))
        (Path(report_dir) / "report.md").write_text(f"n = {len(list(Path(out).rglob('*')))}\n")

    mod.check_config, mod.run_study, mod.write_report = check_config, run_study, write_report
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setitem(studies.STUDIES, "counting", mod.__name__)
    return calls


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_settings_overrides_and_folders(counting_study, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = _write(Path("q/configs/ci.toml"), 'type = "Study"\nstudy = "counting"\nn = 2\n')
    out = studies.run_study_file(f, overrides=["n=5"], n_workers=3, progress=False)
    assert out == Path("runs/q/ci")
    kind, settings, folder, n_workers, _ = counting_study[-1]
    assert (kind, settings, folder, n_workers) == ("run", {"n": 5, "label": "x"}, out, 3)
    assert json.loads((out / "runs" / "r.json").read_text())["n"] == 5
    assert not Path("q/results").exists()  # the committed folder is untouched by default


def test_bad_settings_are_refused_before_any_work(counting_study, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = _write(Path("q/configs/ci.toml"), 'type = "Study"\nstudy = "counting"\n')
    with pytest.raises(InputError, match="n must be"):
        studies.run_study_file(f, overrides=["n=0"])
    with pytest.raises(InputError, match="committed results"):
        studies.run_study_file(f, out="q/results/ci")
    with pytest.raises(InputError, match="not TOML"):
        studies.run_study_file(f, overrides=["label=unquoted text"])
    assert counting_study == [] and not Path("runs").exists()


def test_report_only_on_committed_runs_writes_elsewhere(counting_study, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = _write(Path("q/configs/full.toml"), 'type = "Study"\nstudy = "counting"\n')
    studies.run_study_file(f, in_place=True, progress=False)
    committed = sorted(p.as_posix() for p in Path("q/results/full").rglob("*"))
    reports = studies.run_study_file(f, report_only=True)
    assert reports == Path("runs/q/full_report")
    assert (reports / "report.md").is_file()
    # the committed folder is only read: same files before and after
    assert sorted(p.as_posix() for p in Path("q/results/full").rglob("*")) == committed
    with pytest.raises(InputError, match="--report-dir"):
        studies.run_study_file(f, report_only=True, report_dir="q/results/elsewhere")


def test_unknown_study_and_not_a_study_file(tmp_path):
    bad = _write(tmp_path / "x.toml", 'type = "Study"\nstudy = "no such"\n')
    with pytest.raises(InputError, match="study must be one of"):
        studies.run_study_file(bad)
    spec = _write(tmp_path / "y.toml", 'type = "RunSpec"\n')
    with pytest.raises(InputError, match="not a study file"):
        read_study_file(spec)


def test_override_settings_merges_tables_and_leaves_input():
    base = {"a": {"b": 1, "c": 2}, "d": [1]}
    new = override_settings(base, ["a.b=3", "d=[2, 3]", 'e="s"'])
    assert new == {"a": {"b": 3, "c": 2}, "d": [2, 3], "e": "s"}
    assert base == {"a": {"b": 1, "c": 2}, "d": [1]}
    with pytest.raises(InputError, match="KEY=VALUE"):
        override_settings(base, ["novalue"])


def test_study_folders_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = read_study_file(_write(Path("q/configs/ci.toml"), 'type = "Study"\nstudy = "s"\n'))
    with pytest.raises(InputError, match="only with --report-only"):
        study_folders(f, report_dir="r")
    _write(Path("afile"), "x")
    with pytest.raises(InputError, match="not a folder"):
        study_folders(f, out="afile")
    Path("q/results/ci/runs").mkdir(parents=True)
    _write(Path("busy/other.txt"), "x")
    with pytest.raises(InputError, match="neither empty nor a report folder"):
        study_folders(f, report_only=True, report_dir="busy")


def test_stage_report_replaces_an_earlier_copy(tmp_path):
    src = tmp_path / "src"
    _write(src / "config.json", "{}")
    _write(src / "runs" / "a.nc", "1")
    dest = stage_report(src, tmp_path / "dest")
    (src / "runs" / "a.nc").unlink()
    _write(src / "runs" / "b.nc", "2")
    stage_report(src, dest)
    assert sorted(p.name for p in (dest / "runs").iterdir()) == ["b.nc"]


def test_meanfield_run_on_a_study_file(counting_study, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    f = _write(Path("q/configs/ci.toml"), 'type = "Study"\nstudy = "counting"\n')
    assert main(["run", str(f), "--no-progress", "--set", "n=4", "--n-workers", "2"]) == 0
    assert capsys.readouterr().out.strip().endswith("wrote runs/q/ci")
    assert counting_study[-1][1]["n"] == 4 and counting_study[-1][3] == 2
    # refused while parsing, before the file is read: one line, exit status 2
    assert main(["run", str(f), "--n-workers", "0"]) == 2
    assert "--n-workers" in capsys.readouterr().err


def test_study_flags_are_refused_for_a_run_spec(tmp_path, capsys):
    spec = _write(tmp_path / "run.toml", 'type = "RunSpec"\n')
    assert main(["run", str(spec), "--set", "beta=2"]) == 2
    assert "only for a study file" in capsys.readouterr().err


def test_a_study_declaring_only_its_settings_contract_is_checked_by_it(tmp_path, monkeypatch):
    """A study module with ``SETTINGS`` (no ``check_config``): run_study_file checks the file's
    settings with the contract — defaults filled, unknown keys and bad values refused by name
    before any run."""
    from meanfield.contract import Param
    from meanfield.workbench.study_settings import declare_settings

    calls = []
    mod = types.ModuleType("declared_study_for_tests")
    mod.SETTINGS = declare_settings(
        "declared_study_for_tests:SETTINGS",
        [Param("n", "int", "count", low=1), Param("train.lr", "real", "rate", low=0.0)],
        {"n": 1, "train": {"lr": 0.5}},
        register=False,
    )
    mod.run_study = lambda settings, out, **kw: calls.append(settings)
    mod.write_report = lambda out, report_dir: None
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setitem(studies.STUDIES, "declared", mod.__name__)
    monkeypatch.chdir(tmp_path)
    f = _write(Path("q/configs/ci.toml"), 'type = "Study"\nstudy = "declared"\n[train]\nlr = 1\n')
    studies.run_study_file(f, overrides=["n=3"], progress=False)
    assert calls == [{"n": 3, "train": {"lr": 1.0}}]
    for bad, match in ((["n=0"], "n must be an integer >= 1"),
                       (["train.lr=-1.0"], r"train.lr must be a finite number in \[0, inf\)"),
                       (["train.lrr=1.0"], "did you mean 'train.lr'")):  # fmt: skip
        with pytest.raises(InputError, match=match):
            studies.run_study_file(f, overrides=bad)
    assert len(calls) == 1 and not Path("runs/q/ci").exists()
