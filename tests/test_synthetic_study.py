"""The synthetic study as data (meanfield.studies.synthetic): presets check, committed results
read back into unchanged reports, settings refused before any work."""

import json
from pathlib import Path

import pytest
import tomllib

from meanfield.errors import InputError
from meanfield.studies import synthetic as S
from meanfield.studies.synthetic_report import _design_of, load_study
from meanfield.workbench.study_settings import KeyedAs

ROOT = Path(__file__).resolve().parents[1]
SYN = ROOT / "paper_repro" / "synthetic"


def _preset(name):
    d = tomllib.loads((SYN / "configs" / f"{name}.toml").read_text())
    assert (d.pop("type"), d.pop("study")) == ("Study", "synthetic")
    return d


@pytest.mark.parametrize(
    "name", ["full", "coulomb_variants", "tuned_learners", "diagnosis", "sinha_duchi"]
)
def test_full_presets_are_the_committed_settings(name):
    """Each full preset resolves to the settings recorded in its committed folder, and its sweep
    has the committed grid and digest: a resume into the committed folder finds its runs."""
    rec = json.loads((SYN / "results" / name / "config.json").read_text())
    cfg = {
        k: v
        for k, v in rec["config"].items()
        if not (k in ("m", "noise") and "settings" in rec["config"])
    }
    cfg["design"] = _design_of(cfg)
    assert S.check_config(_preset(name)) == S.check_config(cfg)
    spec = S.sweep_spec(S.check_config(_preset(name)))
    assert spec["grid"] == rec["sweep"]["grid"]
    # the committed runs are keyed by this digest (it covers the run function's recorded name)
    assert spec["digest"] == rec["sweep"]["digest"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "files"),
    [
        ("full", ["table.md", "table.csv", "claims.md"]),
        ("coulomb_variants", ["table.md", "table.csv", "claims.md", "cv_choices.md"]),
        ("sinha_duchi", ["table.md"]),
    ],
)
def test_reports_of_committed_runs_are_byte_identical(name, files, tmp_path):
    """The reports rebuilt from the committed runs equal the committed reports (the runs are
    only read: the report goes to a scratch folder)."""
    S.write_report(SYN / "results" / name, tmp_path)
    for f in files:
        assert (tmp_path / f).read_bytes() == (SYN / "results" / name / f).read_bytes(), f


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"design": "nope"}, "design must be one of"),
        ({"n_trian": 10}, "did you mean 'n_train'"),
        ({"coulomb": {"n_step": 3}}, "coulomb.n_steps"),
        ({"noise": [0.6]}, "noise"),
        ({"design": "tuned", "settings": [[64, 0.1], [64, 0.1]]}, "settings"),
        ({"design": "tuned", "beta_window": [0, 9]}, "beta_window"),
        ({"design": "tuned", "rho_fractions": [0.0, 2.0]}, "rho_fractions"),
        ({"design": "variants", "variants": {"linear": {"alignmnet": "risk"}}}, "alignment"),
        ({"design": "diagnosis", "n_checkpoint": 3}, "n_checkpoints"),
        ({"design": "sinha_duchi", "cv_rows": 20_000}, "cv_rows"),
        ({"design": "sinha_duchi", "protocol": {"n_trian": 5}}, "protocol.n_train"),
        ({"tasks": ["spiral"]}, "unknown tasks 'spiral'; choose one of"),
        ({"tasks": ["radial", "radial"]}, "tasks must hold distinct values"),
        ({"coulomb": {"lam": -1.0}}, r"coulomb.lam must be a finite number in \[0, inf\)"),
        ({"design": "variants", "variants": {"a": {"beta": 0}}}, "variants.a.beta must be"),
        ({"design": "tuned", "beta_window": [-1, 1]}, "beta_window must be an integer >= 0"),
        ({"seeds": [-1]}, "seeds"),
    ],
)
def test_settings_refused_naming_the_parameter(settings, match):
    with pytest.raises(InputError, match=match):
        S.check_config(settings)


def test_grid_study_resumes_and_reports_into_another_folder(tmp_path):
    """Tiny end to end: a rerun computes nothing (the run file is unchanged), the report of the
    runs written elsewhere equals the one written beside them."""
    cfg = S.check_config(
        dict(
            learners=["rff", "importance"],
            tasks=["two_moons"],
            noise=[0.1],
            m=[8],
            seeds=[0, 1],
            n_train=40,
            n_test=20,
        )
    )
    kw = dict(scheduler="threads", n_workers=1, progress=False)
    S.run_study(cfg, tmp_path / "a", **kw)
    runs = sorted((tmp_path / "a" / "runs").glob("*.nc"))
    stamp = [p.stat().st_mtime_ns for p in runs]
    S.run_study(cfg, tmp_path / "a", **kw)
    assert [p.stat().st_mtime_ns for p in runs] == stamp and len(runs) == 2
    assert json.loads((tmp_path / "a" / "run.json").read_text())["runs_computed"] == 0
    S.write_report(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b" / "table.md").read_text() == (tmp_path / "a" / "table.md").read_text()
    assert len(load_study(tmp_path / "a")[1]) == 4  # 2 seeds x 2 learners


@pytest.mark.parametrize(
    "name",
    [
        "sinha_duchi",
        pytest.param("diagnosis", marks=pytest.mark.slow),
        pytest.param("coulomb_variants", marks=pytest.mark.slow),
    ],
)
def test_resume_into_a_committed_folder_computes_nothing(name, tmp_path, monkeypatch):
    """The committed runs are found under the run functions' recorded names: a resume of the
    preset into a copy of its committed folder calls no run function and changes no run file
    (the committed folder is only read)."""
    import shutil

    calls = []

    def refuse(self, *args, **kwargs):  # any call means a committed run was not recognised
        calls.append(self.__qualname__)
        raise AssertionError("a committed run was recomputed")

    monkeypatch.setattr(KeyedAs, "__call__", refuse)
    folder = shutil.copytree(SYN / "results" / name, tmp_path / name)
    runs = sorted((folder / "runs").glob("*.nc"))
    stamps = [(p.name, p.stat().st_mtime_ns) for p in runs]
    S.run_study(
        S.check_config(_preset(name)), folder, scheduler="threads", n_workers=1, progress=False
    )
    assert calls == []
    assert [(p.name, p.stat().st_mtime_ns) for p in sorted((folder / "runs").glob("*.nc"))] == (
        stamps
    )
    record = json.loads((folder / "run.json").read_text())
    assert (record["runs_computed"], record["runs_total"]) == (0, len(runs)), record


TINY = dict(
    learners=["rff", "coulomb"],
    tasks=["two_moons"],
    noise=[0.1],
    m=[8],
    seeds=[0, 1],
    n_train=60,
    n_test=30,
    coulomb={"n_steps": 5},
)


def _tiny(out, **changes):
    S.run_study(
        S.check_config({**TINY, **changes}), out, scheduler="threads", n_workers=1, progress=False
    )
    runs = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.nc")}
    return json.loads((out / "run.json").read_text())["runs_computed"], runs


def test_grid_study_recomputes_only_a_deleted_run_and_a_changed_setting(tmp_path):
    """A deleted run file is recomputed alone; another n_train reuses nothing and the report
    reads only its own runs."""
    _, files = _tiny(tmp_path)
    gone = sorted(files)[0]
    (tmp_path / "runs" / gone).unlink()
    done, after = _tiny(tmp_path)
    assert done == 1 and set(after) == set(files)
    assert all(after[f] == files[f] for f in files if f != gone)  # the other one untouched
    done, after = _tiny(tmp_path, n_train=80)
    assert done == 2 and len(after) == 4
    cfg, records = load_study(tmp_path)
    assert cfg["n_train"] == 80 and len(records) == 4  # 2 cells x 2 learners
    assert "n_train = 80" in (tmp_path / "table.md").read_text()


def test_grid_study_sets_a_truncated_run_file_aside_and_recomputes_it(tmp_path):
    """A run file cut mid-write is set aside and recomputed, to the same numbers (seeded)."""
    _, files = _tiny(tmp_path)
    before = sorted(r["ridge_test_error"] for r in load_study(tmp_path)[1])
    victim = tmp_path / "runs" / sorted(files)[1]
    victim.write_bytes(victim.read_bytes()[:500])
    with pytest.warns(Warning, match="unreadable"):
        done, _ = _tiny(tmp_path)
    assert done == 1
    aside = list((tmp_path / "runs" / "set_aside").iterdir())
    assert len(aside) == 1 and aside[0].name.startswith(victim.name)
    assert sorted(r["ridge_test_error"] for r in load_study(tmp_path)[1]) == before


def test_every_grid_learner_is_one_make_learner_builds():
    from meanfield.learners import LEARNER_NAMES

    # run_grid_cell builds each choice of the ``learners`` setting by make_learner
    assert set(S.LEARNER_LABELS) <= set(LEARNER_NAMES)
