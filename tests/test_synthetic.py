"""Tests of meanfield.learners.tasks: each task against its defining rule, noise rates, seeds."""

import numpy as np
import pytest
from scipy import stats

from meanfield.learners import tasks as syn

BINARY_TASKS = ["radial", "checkerboard", "xor", "two_moons", "gaussian_mixture"]


@pytest.mark.parametrize("name", BINARY_TASKS)
def test_shapes_labels_and_seeds(name):
    a = syn.make_task(name, 50, 30, seed=3)
    b = syn.make_task(name, 50, 30, seed=3)
    c = syn.make_task(name, 50, 30, seed=4)
    assert a.X_train.shape[0] == 50 and a.X_test.shape[0] == 30
    assert a.X_train.shape[1] == a.X_test.shape[1]
    assert a.y_train.shape == (50,) and a.y_test.shape == (30,)
    assert set(np.unique(np.concatenate([a.y_train, a.y_test]))) <= {-1, 1}
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)  # same seed, same bits
    assert not np.array_equal(a.X_train, c.X_train)


def test_radial_rule_and_balance():
    d, n = 10, 20000
    sp = syn.radial(n, 100, d=d, seed=0)
    X = np.vstack([sp.X_train, sp.X_test])
    y = np.concatenate([sp.y_train, sp.y_test])
    np.testing.assert_array_equal(y, np.where(np.linalg.norm(X, axis=1) > np.sqrt(d), 1, -1))
    # P(y = +1) = P(chi2_d > d); binomial standard error sqrt(p(1-p)/n) ~ 0.0035, allow 5 SE
    p = stats.chi2.sf(d, d)
    assert abs(np.mean(sp.y_train == 1) - p) < 5 * np.sqrt(p * (1 - p) / n)
    # x ~ N(0, I): the sample covariance is I up to O(1/sqrt(n)) = 0.007 per entry; 5 SE
    assert np.abs(np.cov(sp.X_train.T) - np.eye(d)).max() < 5 * np.sqrt(2 / n)


@pytest.mark.parametrize("noise", [0.1, 0.3])
def test_label_noise_rate_train_only(noise):
    n = 20000
    clean = syn.radial(n, 500, d=5, seed=1)
    noisy = syn.radial(n, 500, d=5, noise=noise, seed=1)
    np.testing.assert_array_equal(clean.X_train, noisy.X_train)  # points drawn before noise
    np.testing.assert_array_equal(clean.y_test, noisy.y_test)  # test labels stay clean
    rate = np.mean(clean.y_train != noisy.y_train)
    assert abs(rate - noise) < 5 * np.sqrt(noise * (1 - noise) / n)  # 5 binomial SE
    clean5k = syn.radial(n, 5000, d=5, seed=1)
    noisy_test = syn.radial(n, 5000, d=5, noise=noise, seed=1, noisy_test=True)
    rate_test = np.mean(noisy_test.y_test != clean5k.y_test)
    assert abs(rate_test - noise) < 5 * np.sqrt(noise * (1 - noise) / 5000)


def test_multiclass_noise_goes_to_other_classes_uniformly():
    rng = np.random.default_rng(0)
    y = np.zeros(30000, dtype=int)
    out = syn.flip_labels(y, 0.3, rng, n_classes=4)
    changed = out != y
    assert abs(changed.mean() - 0.3) < 5 * np.sqrt(0.21 / 30000)
    # changed labels are uniform over the 3 other classes: chi-square test at level 1e-3
    counts = np.bincount(out[changed], minlength=4)
    assert counts[0] == 0
    assert stats.chisquare(counts[1:]).pvalue > 1e-3


def test_checkerboard_and_xor_rules():
    sp = syn.checkerboard(4000, 10, n_cells=4, d=3, seed=2)
    X, y = sp.X_train, sp.y_train
    assert np.all(np.abs(X) <= 1)
    cell = np.floor((X[:, :2] + 1) * 2).astype(int)  # 4 cells of width 1/2 per side
    np.testing.assert_array_equal(y, np.where(cell.sum(1) % 2 == 0, 1, -1))
    sx = syn.xor(4000, 10, seed=2)
    np.testing.assert_array_equal(
        sx.y_train, np.where(sx.X_train[:, 0] * sx.X_train[:, 1] > 0, 1, -1)
    )


def test_two_moons_geometry():
    sp = syn.two_moons(2000, 10, jitter=0.0, d=3, seed=5)
    X, y = sp.X_train, sp.y_train
    up, lo = X[y == 1], X[y == -1]
    np.testing.assert_allclose(np.hypot(up[:, 0], up[:, 1]), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.hypot(1 - lo[:, 0], 0.5 - lo[:, 1]), 1.0, atol=1e-12)
    assert np.all(up[:, 1] >= 0) and np.all(lo[:, 1] <= 0.5)
    np.testing.assert_array_equal(X[:, 2], 0.0)
    assert abs(np.mean(y == 1) - 0.5) < 5 * np.sqrt(0.25 / 2000)


def test_gaussian_mixture_points_near_their_class_centres():
    sp = syn.gaussian_mixture(3000, 10, d=4, n_classes=3, n_components=2, scale=1e-3, seed=0)
    centers = syn._mixture_centers(3, 2, 4, 3.0, 0)
    assert set(np.unique(sp.y_train)) == {0, 1, 2}
    dist = np.linalg.norm(sp.X_train[:, None, None, :] - centers[None], axis=-1)  # (n, C, K)
    nearest_class = np.unravel_index(dist.reshape(len(dist), -1).argmin(1), (3, 2))[0]
    np.testing.assert_array_equal(nearest_class, sp.y_train)
    # the task is fixed by center_seed, not by seed
    other = syn.gaussian_mixture(10, 10, d=4, n_classes=3, n_components=2, seed=9)
    assert other.X_train.shape == (10, 4)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"noise": 0.5}, "noise must be in"),
        ({"noise": -0.1}, "noise"),
        ({"seed": -1}, "seed"),
        ({"d": 0}, "d must be an integer >= 1"),
    ],
)
def test_bad_parameters_raise_named_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        syn.radial(10, 10, **kwargs)


def test_bad_sizes_and_names():
    with pytest.raises(ValueError, match="n_train"):
        syn.checkerboard(0, 10)
    with pytest.raises(TypeError, match="n_test"):
        syn.two_moons(10, 2.5)
    with pytest.raises(ValueError, match="n_cells"):
        syn.checkerboard(10, 10, n_cells=1)
    with pytest.raises(ValueError, match="unknown task 'spiral'"):
        syn.make_task("spiral")


# ----------------------------------------------------------------------------- the study
# (meanfield.studies.synthetic_kernels on meanfield.workbench.sweeps; threads, tiny sizes: ~1 s a
# run)

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


def _study(cfg, out, notes=None):
    from meanfield.studies.synthetic_kernels import run_study

    log = None if notes is None else notes.append
    return run_study(cfg, out, scheduler="threads", n_workers=1, progress=False, log=log)


def _run_files(out):
    return {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.nc")}


def test_study_runs_on_sweeps_resumes_and_reports(tmp_path):
    """The tiny study: one run file per (m, task, noise, seed) cell, every learner in it; a
    rerun computes nothing; the report has the dims learner x task x noise x m x seed."""
    from meanfield.studies.synthetic_kernels_report import report

    res = _study(TINY, tmp_path)
    assert (res["runs_done"], res["runs_total"]) == (2, 2)
    files = _run_files(tmp_path)
    assert len(files) == 2 and all(
        f.startswith("m=8_task=two_moons_noise=0.1_seed=") for f in files
    )
    assert res["result"]["metrics"].dims == ("m", "task", "noise", "seed", "learner", "metric")
    again = _study(TINY, tmp_path)
    assert again["runs_done"] == 0 and _run_files(tmp_path) == files
    ds = report(tmp_path, figures=False)
    assert ds["ridge_test_error"].shape == (2, 1, 1, 1, 2)
    assert np.all(np.isfinite(ds["ridge_test_error"].values))
    assert np.isnan(ds["min_distance"].sel(learner="rff")).all()  # RFF has no particles
    assert np.isfinite(ds["min_distance"].sel(learner="coulomb")).all()
    np.testing.assert_array_equal(  # the report holds the sweep's numbers
        ds["ridge_test_error"].sel(learner="coulomb", task="two_moons", noise=0.1, m=8).values,
        again["result"]["metrics"]
        .sel(learner="coulomb", metric="ridge_test_error", m=8, task="two_moons", noise=0.1)
        .values,
    )
    for f in ("table.csv", "table.md", "claims.md", "results.nc", "config.json"):
        assert (tmp_path / f).stat().st_size > 0


def test_study_changed_setting_computes_new_runs_and_reports_only_them(tmp_path):
    from meanfield.studies.synthetic_kernels_report import load_study, report

    _study(TINY, tmp_path)
    first = _run_files(tmp_path)
    notes = []
    res = _study({**TINY, "n_train": 80}, tmp_path, notes)
    assert res["runs_done"] == 2  # another n_train: nothing reused
    assert len(_run_files(tmp_path)) == 4 and set(first) <= set(_run_files(tmp_path))
    assert any("n_train: 60 -> 80" in n for n in notes), notes
    study = load_study(tmp_path)
    assert study["config"]["n_train"] == 80 and len(study["records"]) == 4  # 2 cells x 2
    ds = report(tmp_path, figures=False)
    np.testing.assert_array_equal(
        ds["ridge_test_error"].sel(learner="rff", task="two_moons", noise=0.1, m=8).values,
        res["result"]["metrics"]
        .sel(learner="rff", metric="ridge_test_error", m=8, task="two_moons", noise=0.1)
        .values,
    )
    assert "n_train = 80" in (tmp_path / "table.md").read_text()


def test_study_recomputes_only_a_deleted_run(tmp_path):
    _study(TINY, tmp_path)
    files = _run_files(tmp_path)
    gone = sorted(files)[0]
    (tmp_path / "runs" / gone).unlink()
    assert _study(TINY, tmp_path)["runs_done"] == 1
    after = _run_files(tmp_path)
    assert set(after) == set(files) and after[gone] != files[gone]
    assert all(after[f] == files[f] for f in files if f != gone)  # the other one untouched


def test_study_sets_a_truncated_run_file_aside_and_recomputes_it(tmp_path):
    from meanfield.results import load_dataset
    from meanfield.studies.synthetic_kernels import cell_records

    _study(TINY, tmp_path)
    victim = tmp_path / "runs" / sorted(_run_files(tmp_path))[1]
    before = cell_records(load_dataset(victim))
    victim.write_bytes(victim.read_bytes()[:500])  # cut mid-write
    notes = []
    assert _study(TINY, tmp_path, notes)["runs_done"] == 1
    aside = list((tmp_path / "runs" / "set_aside").iterdir())
    assert len(aside) == 1 and aside[0].name.startswith(victim.name)
    assert any("unreadable" in n and "recomputed" in n for n in notes), notes
    after = cell_records(load_dataset(victim))
    assert [r["ridge_test_error"] for r in after] == [r["ridge_test_error"] for r in before]


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        ({"n_trian": 10}, "'n_trian' \\(did you mean 'n_train'\\?\\)"),
        ({"coulomb": {"n_step": 10}}, "'coulomb.n_step' \\(did you mean 'coulomb.n_steps'\\?\\)"),
        ({"importance": {"rhoo": 1}}, "'importance.rhoo' \\(did you mean 'importance.rho'\\?\\)"),
        ({"learners": ["rff", "sinkhorn"]}, "unknown learner 'sinkhorn'"),
        ({"tasks": ["spiral"]}, "unknown task 'spiral'"),
        ({"noise": [0.5]}, "noise must hold values in"),
        ({"m": [8, 8]}, "distinct"),
        ({"n_test": 1}, "n_test must be an integer >= 2"),
    ],
)
def test_study_config_refuses_unknown_keys_naming_the_nearest(cfg, match):
    from meanfield.errors import InputError
    from meanfield.studies.synthetic_kernels import check_config

    with pytest.raises(InputError, match=match):
        check_config(cfg)


def test_converter_moves_an_old_runs_jsonl_folder_into_the_sweep_layout(tmp_path):
    """A folder of the old engine (runs.jsonl + config.json + results.nc) converts into run
    files keyed by its configuration; the report rebuilt from them is byte-identical to the
    old report of the same records; a rerun of the study then computes nothing."""
    import importlib.util
    import json
    from pathlib import Path

    import meanfield
    from meanfield.studies import synthetic_kernels as study
    from meanfield.studies import synthetic_kernels_report as rep

    cfg = study.check_config(TINY)
    records = []
    for seed in cfg["seeds"]:
        ds = study.run_cell("two_moons", 0.1, seed, 8, **study.sweep_spec(cfg)["fixed"])
        records += study.cell_records(ds)
    old, expect = tmp_path / "old", tmp_path / "expect"
    for folder in (old, expect):
        folder.mkdir()
        ds = rep.to_dataset(records, cfg)  # what the old engine reported
        ds.to_netcdf(folder / "results.nc", engine="h5netcdf")
        rep.write_tables(ds, folder)
        rep.write_claims(ds, folder)
    (old / "config.json").write_text(json.dumps(cfg, indent=1))
    # the old engine wrote records as they finished, in any order
    lines = [json.dumps(r) for r in records[::-1]]
    (old / "runs.jsonl").write_text("\n".join(lines) + "\n")

    path = Path(__file__).resolve().parents[1] / "paper_repro" / "synthetic" / "convert_results.py"
    spec = importlib.util.spec_from_file_location("convert_results", path)
    conv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conv)
    counts = conv.convert(old)
    assert counts == {"cells": 2, "records": 4, "incomplete_cells": 0, "missing_cells": 0}
    assert not (old / "runs.jsonl").exists() and len(_run_files(old)) == 2
    assert json.loads((old / "config.json").read_text())["converted"]["counts"] == counts
    rep.report(old, figures=False)
    for f in ("table.md", "claims.md", "table.csv"):
        assert (old / f).read_bytes() == (expect / f).read_bytes(), f
    # keyed by the recorded version (the installed one here): the study finds every cell
    assert json.loads((old / "config.json").read_text())["meanfield_version"] == (
        meanfield.__version__
    )
    assert _study(cfg, old)["runs_done"] == 0
    with pytest.raises(ValueError, match="already in the sweep layout"):
        conv.convert(old)


def _converter():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "paper_repro" / "synthetic" / "convert_results.py"
    spec = importlib.util.spec_from_file_location("convert_results", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_old_runs_reader_reports_every_unreadable_line(tmp_path, capsys):
    """The converter's reader of the old checkpoint skips a damaged line with a warning,
    never silently, and leaves the file alone; a record cut exactly before its newline is
    kept."""
    conv = _converter()
    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"a": 1}\n[1, 2]\n{"a": \n{"a": 3}')
    assert conv.read_runs(runs) == [{"a": 1}, {"a": 3}]
    err = capsys.readouterr().err
    assert "line 2 is not a JSON record" in err and "line 3 is not a JSON record" in err
    assert runs.read_text().endswith('{"a": 3}')  # untouched
    assert conv.read_runs(tmp_path / "none.jsonl") == []


def _record_study(module, cfg, out):
    return module.run_study(cfg, out, scheduler="threads", n_workers=1, progress=False)


@pytest.mark.parametrize("name", ["synthetic_sinha_duchi", "synthetic_diagnosis"])
def test_record_study_recomputes_only_a_deleted_run(name, tmp_path):
    """Sinha & Duchi's protocol and the diagnosis on the sweeps runner, tiny: one run file per
    grid point; a rerun computes nothing; a deleted run file is the only one recomputed, to
    the same record; another setting computes its own runs."""
    import importlib
    import json

    from meanfield.results import load_dataset

    study = importlib.import_module(f"meanfield.studies.{name}")
    cfg = {**study.CONFIGS["ci"], "seeds": [0, 1]}
    res = _record_study(study, cfg, tmp_path)
    files = _run_files(tmp_path)
    assert res["runs_done"] == res["runs_total"] == len(files) > 1
    assert _record_study(study, cfg, tmp_path)["runs_done"] == 0  # resumes
    gone = sorted(files)[0]
    before = json.loads(load_dataset(tmp_path / "runs" / gone).attrs["record"])
    (tmp_path / "runs" / gone).unlink()
    assert _record_study(study, cfg, tmp_path)["runs_done"] == 1
    after = _run_files(tmp_path)
    assert set(after) == set(files) and after[gone] != files[gone]
    assert all(after[f] == files[f] for f in files if f != gone)  # the others untouched
    again = json.loads(load_dataset(tmp_path / "runs" / gone).attrs["record"])
    for rec in (before, again):
        rec.pop("wall_s"), rec.pop("machine")
        for row in rec.get("learners", {}).values():
            row.pop("wall_s"), row.pop("fit_time")
    assert json.dumps(again, sort_keys=True) == json.dumps(before, sort_keys=True)
    notes = []
    more = study.run_study(
        {**cfg, "seeds": [0]},
        tmp_path,
        scheduler="threads",
        n_workers=1,
        progress=False,
        log=notes.append,
    )
    assert more["runs_done"] == 0  # fewer seeds: the same configuration, nothing computed


def _script(name, args, cwd):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, str(root / "paper_repro" / "synthetic" / name), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize(
    ("script", "reports"),
    [("sinha_duchi.py", ["table.md"]), ("diagnose.py", ["summary.md", "diagnosis.csv"])],
)
def test_record_study_script_resumes_converts_and_reports(script, reports, tmp_path, monkeypatch):
    """The command line end to end, tiny: run, rerun (nothing computed), a deleted run file
    recomputed alone, --report-only; then the same records in the old layout (runs.jsonl)
    convert into the same run files, and the reports from them are byte-identical."""
    import json

    out = tmp_path / "study"
    args = ["--config", "ci", "--out", str(out)]
    first = _script(script, args, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    files = _run_files(out)
    n = len(files)
    assert f"(0 of {n} already there)" in first.stdout
    again = _script(script, args, tmp_path)
    assert again.returncode == 0 and f"({n} of {n} already there)" in again.stdout
    assert _run_files(out) == files
    gone = sorted(files)[-1]
    (out / "runs" / gone).unlink()
    third = _script(script, args, tmp_path)
    assert third.returncode == 0 and f"({n - 1} of {n} already there)" in third.stdout
    assert {f for f, t in _run_files(out).items() if files.get(f) != t} == {gone}
    expect = {f: (out / f).read_bytes() for f in reports}
    for f in reports:
        (out / f).unlink()
    before = _run_files(out)
    only = _script(script, ["--report-only", *args], tmp_path)
    assert only.returncode == 0, only.stderr[-2000:]
    assert {f: (out / f).read_bytes() for f in reports} == expect
    assert _run_files(out) == before  # nothing recomputed by --report-only

    # the old layout of the same records: runs.jsonl (+ config.json for the diagnosis)
    from meanfield.results import load_dataset

    recs = [json.loads(load_dataset(out / "runs" / f).attrs["record"]) for f in sorted(files)]
    old = tmp_path / "old"
    old.mkdir()
    (old / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs[::-1]))
    if script == "diagnose.py":
        cfg = json.loads((out / "config.json").read_text())["config"]
        (old / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "seeds"}))
    refused = _script(script, ["--report-only", "--config", "ci", "--out", str(old)], tmp_path)
    assert refused.returncode == 2 and "convert it first" in refused.stderr
    if script == "sinha_duchi.py":  # the converter keys seeds by the full configuration
        from meanfield.studies import synthetic_sinha_duchi as study

        with pytest.raises(ValueError, match="another protocol"):
            _converter().convert(old)
        assert sorted(p.name for p in old.iterdir()) == ["runs.jsonl"]  # nothing written
        monkeypatch.setitem(study.CONFIGS, "full", study.CONFIGS["ci"])
    assert _converter().convert(old)["cells"] == n
    assert sorted(_run_files(old)) == sorted(files)  # the same keys as the study's own
    conv = _script(script, ["--report-only", "--config", "ci", "--out", str(old)], tmp_path)
    assert conv.returncode == 0, conv.stderr[-2000:]
    for f in reports:
        assert (old / f).read_bytes() == expect[f], f


def test_variant_study_ci_runs_resumes_and_reports(tmp_path):
    """Issue 10's study (CV for every learner, every Coulomb variant) end to end on the sweeps
    runner, tiny: a rerun computes nothing; the report reads the run files."""
    import json
    import sys
    from pathlib import Path

    from meanfield.studies import synthetic_variants as study

    here = Path(__file__).resolve().parents[1] / "paper_repro" / "synthetic"
    cfg = study.CONFIGS["ci"]
    kw = dict(scheduler="threads", n_workers=1, progress=False)
    res = study.run_study(cfg, tmp_path, **kw)
    n = len(cfg["seeds"]) * len(cfg["tasks"]) * len(cfg["m"])
    assert res["runs_done"] == res["runs_total"] == n
    files = _run_files(tmp_path)
    assert study.run_study(cfg, tmp_path, **kw)["runs_done"] == 0  # resumes
    assert _run_files(tmp_path) == files
    sys.path.insert(0, str(here))
    try:
        from report_variants import paired_ci, report

        report(tmp_path)
        with pytest.raises(ValueError, match="another configuration"):
            report(tmp_path, {**cfg, "cv": 3})
    finally:
        sys.path.remove(str(here))
    _, recs = study.load_records(tmp_path)
    assert len(recs) == n
    rec = recs[0]
    assert {"meanfield_version", "machine", "wall_s", "seed", "m", "task"} <= set(rec)
    expect = {"rff_median", "rff", "importance", "coulomb_cv"}
    expect |= {f"coulomb_{v}" for v in cfg["variants"]}
    assert set(rec["learners"]) == expect
    assert rec["learners"]["coulomb_cv"]["variant"] in cfg["variants"]
    for f in ("table.csv", "table.md", "claims.md", "cv_choices.md"):
        assert (tmp_path / f).stat().st_size > 0
    # the paired interval is the shared t-interval: for d = (1, 2, 3), mean 2, half-width
    # t_{0.975,2} * 1 / sqrt(3) = 4.303 / 1.732 = 2.484
    mean, lo, hi, k = paired_ci([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert (mean, k) == (2.0, 3) and hi - mean == pytest.approx(2.4841, abs=1e-4)

    # the converter: the same records in the old layout (runs.jsonl + config.json) become run
    # files of this configuration's keys; the report from them is byte-identical
    import importlib.util

    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text(json.dumps(study.check_config(cfg), indent=1))
    (old / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    spec = importlib.util.spec_from_file_location("convert_results", here / "convert_results.py")
    conv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conv)
    assert conv.convert(old)["cells"] == n
    assert sorted(_run_files(old)) == sorted(files)  # the same keys as the study's own
    sys.path.insert(0, str(here))
    try:
        report(old)
    finally:
        sys.path.remove(str(here))
    for f in ("table.csv", "table.md", "claims.md", "cv_choices.md"):
        assert (old / f).read_bytes() == (tmp_path / f).read_bytes(), f
