"""Tests of meanfield.synthetic: each task against its defining rule, noise rates, seeds."""

import numpy as np
import pytest
from scipy import stats

from meanfield import synthetic as syn

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


def test_study_ci_configuration_runs_resumes_and_reports(tmp_path):
    """The small study configuration runs end to end, resumes from disk and writes its report."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "paper_repro" / "synthetic" / "run_study.py"
    spec = importlib.util.spec_from_file_location("run_study", path)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    cfg = study.CONFIGS["ci"]
    study.CONFIGS["tiny"] = {
        **cfg,
        "m": [8],
        "seeds": [0],
        "tasks": ["two_moons"],
        "n_train": 120,
        "n_test": 60,
    }
    try:
        recs = study.run("tiny", tmp_path, progress=False)
        assert len(recs) == len(cfg["learners"])  # one record per learner
        lines = (tmp_path / "runs.jsonl").read_text().splitlines()
        again = study.run("tiny", tmp_path, progress=False)  # resumes: nothing new is run
        assert (tmp_path / "runs.jsonl").read_text().splitlines() == lines
        assert len(again) == len(recs)
        ds = study.report(recs, "tiny", tmp_path, figures=False)
    finally:
        del study.CONFIGS["tiny"]
    assert ds["ridge_test_error"].shape == (4, 1, 1, 1, 1)
    assert np.all(np.isfinite(ds["ridge_test_error"].values))
    for f in ("table.csv", "table.md", "claims.md", "results.nc"):
        assert (tmp_path / f).stat().st_size > 0


def _load_run_study():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "paper_repro" / "synthetic" / "run_study.py"
    spec = importlib.util.spec_from_file_location("run_study", path)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    return study


def test_study_resumes_from_a_runs_file_cut_mid_line(tmp_path, capsys):
    """An interruption mid-write leaves runs.jsonl ending in half a record: the rerun warns,
    sets the fragment aside (runs.jsonl.bad), keeps the good lines and recomputes the lost run,
    and the file is whole again (one record a line)."""
    import json

    study = _load_run_study()
    study.CONFIGS["tiny"] = {
        **study.CONFIGS["ci"],
        "learners": ["rff", "importance"],
        "m": [8],
        "seeds": [0],
        "tasks": ["two_moons"],
        "n_train": 60,
        "n_test": 30,
    }
    runs = tmp_path / "runs.jsonl"
    try:
        study.run("tiny", tmp_path, progress=False)
        whole = runs.read_text().splitlines()
        assert len(whole) == 2
        runs.write_text(whole[0] + "\n" + whole[1][: len(whole[1]) // 2])  # cut mid-line
        capsys.readouterr()
        recs = study.run("tiny", tmp_path, progress=False)
    finally:
        del study.CONFIGS["tiny"]
    err = capsys.readouterr().err
    assert "warning:" in err and "line 2 is cut off" in err and "recomputed" in err
    lines = runs.read_text().splitlines()
    assert lines[0] == whole[0] and len(lines) == 2  # the good line kept, the lost run redone
    assert runs.read_text().endswith("\n")
    redone = json.loads(lines[1])
    assert redone["learner"] == json.loads(whole[1])["learner"]
    assert redone["ridge_test_error"] == json.loads(whole[1])["ridge_test_error"]  # same seeds
    assert len(recs) == 2
    assert (tmp_path / "runs.jsonl.bad").read_text().startswith("2\t" + whole[1][:20])


def test_runs_reader_reports_every_unreadable_line(tmp_path, capsys):
    """Reading only (the reports) skips a damaged line with a warning, never silently, and
    leaves the file alone; a record cut exactly before its newline is kept and completed."""
    study = _load_run_study()
    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"a": 1}\n[1, 2]\n{"a": \n{"a": 3}')
    assert study.read_runs(runs) == [{"a": 1}, {"a": 3}]
    err = capsys.readouterr().err
    assert "line 2 is not a JSON record" in err and "line 3 is not a JSON record" in err
    assert runs.read_text().endswith('{"a": 3}')  # untouched without repair
    assert study.read_runs(runs, repair=True) == [{"a": 1}, {"a": 3}]
    assert runs.read_text() == '{"a": 1}\n{"a": 3}\n'
    assert study.read_runs(tmp_path / "none.jsonl") == []


def test_variant_study_ci_runs_resumes_and_reports(tmp_path):
    """Issue 10's study (CV for every learner, every Coulomb variant) end to end, tiny."""
    import importlib.util
    import json
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parents[1] / "paper_repro" / "synthetic"
    sys.path.insert(0, str(here))
    try:
        spec = importlib.util.spec_from_file_location("run_variants", here / "run_variants.py")
        study = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(study)
        cfg = study.CONFIGS["ci"]
        recs = study.run("ci", tmp_path)
        lines = (tmp_path / "runs.jsonl").read_text().splitlines()
        assert len(recs) == len(lines) == len(cfg["seeds"]) * len(cfg["tasks"]) * len(cfg["m"])
        assert len(study.run("ci", tmp_path)) == len(recs)  # resumes: nothing new is run
        assert (tmp_path / "runs.jsonl").read_text().splitlines() == lines
        from report_variants import paired_ci, report

        report(tmp_path, cfg)
    finally:
        sys.path.remove(str(here))
    rec = json.loads(lines[0])
    assert {"meanfield_version", "machine", "wall_s", "seed", "m", "task"} <= set(rec)
    expect = {"rff_median", "rff", "importance", "coulomb_cv"}
    expect |= {f"coulomb_{v}" for v in cfg["variants"]}
    assert set(rec["learners"]) == expect
    assert rec["learners"]["coulomb_cv"]["variant"] in cfg["variants"]
    for f in ("table.csv", "table.md", "claims.md", "cv_choices.md"):
        assert (tmp_path / f).stat().st_size > 0
    # the paired interval is the t-interval: for d = (1, 2, 3), mean 2, half-width
    # t_{0.975,2} * 1 / sqrt(3) = 4.303 / 1.732 = 2.484
    mean, lo, hi, k = paired_ci([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert (mean, k) == (2.0, 3) and hi - mean == pytest.approx(2.4841, abs=1e-4)
