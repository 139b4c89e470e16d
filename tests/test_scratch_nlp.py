"""The from-scratch NLP study (meanfield.studies.nlp with ``encoder = "scratch"``) on the sweep
runner, through its API and ``meanfield run``, on the tiny fixtures."""

from __future__ import annotations

import csv
import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch
import xarray as xr

pytest.importorskip("tokenizers")
pytest.importorskip("sklearn")

from meanfield.cli import main  # noqa: E402
from meanfield.errors import InputError, MeanfieldWarning  # noqa: E402
from meanfield.studies import nlp  # noqa: E402
from meanfield.studies.nlp_report import scratch_variants, write_report  # noqa: E402
from meanfield.workbench.sweeps import run_key  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(nlp.FIXTURES)
TINY = ROOT / "paper_repro" / "nlp" / "configs" / "tiny.toml"
METRICS = ("accuracy", "noisy_accuracy", "ece", "log_loss")


def _small_config(**changes) -> dict:
    """The tiny preset with one feature map (FAVOR, whose controls run on RT): 32 runs
    (sst2 3 variants, RT 7, QQP 3 x 2 Q = K settings; 2 seeds)."""
    settings = nlp.load_preset("nlp", "tiny")
    settings.update(data_dir=str(FIX), features=["favor"], **changes)
    return settings


def _run(settings, out, **kw) -> None:
    nlp.run_study(nlp.check_config(settings), out, progress=False, **kw)


def read_record(path) -> dict:
    """The record a run file holds (every number of the run)."""
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return json.loads(ds.attrs["record"])


def _run_path(out: Path, settings: dict, dataset: str, point: dict) -> Path:
    cfg, _ = nlp._split(nlp.check_config(settings))
    spec = nlp._sweep_specs(cfg, FIX)[dataset]["variants"]
    return out / spec["folder"] / "runs" / f"{run_key(point, spec['digest'])}.nc"


def _mtimes(out: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in out.glob("**/runs/*.nc")}


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: a second thread only adds synchronisation
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The small study, run once (threads); tests work on copies of its folder."""
    out = tmp_path_factory.mktemp("scratch") / "base"
    _run(_small_config(), out)
    return out


def _copy(base, tmp_path) -> Path:
    out = tmp_path / "study"
    shutil.copytree(base, out)
    return out


def test_tiny_study_runs_and_reports(base, tmp_path):
    cfg, _ = nlp._split(nlp.check_config(_small_config()))
    per_seed = sum(
        len(scratch_variants(cfg, d["name"])) * len(d["tie_qk"]) for d in cfg["datasets"]
    )
    assert per_seed == 16 and len(list(base.glob("*/runs/*.nc"))) == 2 * per_seed
    assert len(list(base.glob("*/baseline/runs/*.nc"))) == 3
    out = _copy(base, tmp_path)
    rep = write_report(out)
    for name in (
        "results.csv",
        "table.md",
        "table.csv",
        "paired.md",
        "paired.csv",
        "claims.md",
        "phase_a.md",
        "training.md",
        "config.json",
        "figures/metrics.png",
        "figures/alignment.png",
    ):
        assert (out / name).is_file(), name
    assert rep["n_runs"] == 2 * per_seed
    assert set(rep["baselines"]) == {"sst2", "rotten_tomatoes", "qqp"}
    assert all(0.0 <= b["accuracy"] <= 1.0 and b["C"] > 0 for b in rep["baselines"].values())
    with open(out / "table.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == per_seed and all(int(r["seeds"]) == 2 for r in rows)
    assert all(0.0 <= float(r["noisy_accuracy"]) <= 1.0 for r in rows)
    table = (out / "table.md").read_text()
    assert "±" in table and "TF-IDF + LR" in table and "Sanity bar" in table
    claims = (out / "claims.md").read_text()
    for head in ("sst2: Kernel-FAVOR", "rotten_tomatoes: Kernel-softmaxfeat", "headline"):
        assert head in claims, head
    ctl = claims.split("minus each control")[1]
    kinds = ("redraw Ω", "Phase A directions", "Phase A, λ = 0", "Phase A at init")
    assert all(f"minus control: {k}" in ctl for k in kinds)
    with open(out / "paired.csv") as fh:
        paired = list(csv.DictReader(fh))
    assert {r["branch"] for r in paired} == {"kernel", "redraw", "priornorms", "lam0", "atinit"}
    assert all(float(r["accuracy_p_holm"]) >= float(r["accuracy_p"]) for r in paired)
    assert "Holm p" in (out / "paired.md").read_text()
    recorded = json.loads((out / "config.json").read_text())
    assert recorded["config"]["model"] == cfg["model"] and "torch" in recorded
    assert set(recorded["sweeps"]) == {"sst2", "rotten_tomatoes", "qqp"}


def test_rerun_with_another_lr_computes_new_runs_and_reports_only_them(base, tmp_path):
    out = _copy(base, tmp_path)
    cfg = _small_config()
    lr = dict(cfg, train=dict(cfg["train"], lr=2 * cfg["train"]["lr"]), only={"datasets": ["sst2"]})
    before = _mtimes(out)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _run(lr, out)
    notes = [str(w.message) for w in seen]
    assert any("train.lr: 0.003 -> 0.006" in n for n in notes), notes  # names what changed
    new = set(_mtimes(out)) - set(before)
    assert len(new) == 6  # sst2: 3 variants x 2 seeds, computed anew
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert len(rows) == 6 and {r["dataset"] for r in rows} == {"sst2"}  # nothing stale shown
    point = {"seed": 1, "tie_qk": False, "variant": "kernel-favor"}
    kernel, old = _run_path(out, lr, "sst2", point), _run_path(out, cfg, "sst2", point)
    assert kernel.is_file() and old.is_file() and kernel != old  # both kept
    assert read_record(kernel)["phase_b_history"] != read_record(old)["phase_b_history"]
    # --report-only reports the configuration last run there and rewrites no run file
    after = _mtimes(out)
    argv = ["run", str(TINY), "--out", str(out), "--report-only", "--no-progress"]
    assert main([*argv, "--set", f"data_dir='{FIX}'"]) == 0
    assert _mtimes(out) == after and len(list(csv.DictReader(open(out / "results.csv")))) == 6
    # back to the first configuration: its runs are all there again, none recomputed
    with pytest.warns(MeanfieldWarning, match="train.lr: 0.006 -> 0.003"):
        _run(cfg, out)
    assert _mtimes(out) == after
    assert len(list(csv.DictReader(open(out / "results.csv")))) == 32


def test_resume_after_deleting_runs_recomputes_only_them_exactly(base, tmp_path):
    out = _copy(base, tmp_path)
    cfg = _small_config()
    lost = [
        _run_path(out, cfg, "rotten_tomatoes", {"seed": 1, "tie_qk": False, "variant": v})
        for v in ("kernel-favor", "atinit-favor")
    ]
    before = [read_record(p) for p in lost]
    for p in lost:
        p.unlink()
    kept = _mtimes(out)
    nlp._clear_caches()  # recomputed from scratch: data, tokenizer, warm-up
    _run(cfg, out)
    after = _mtimes(out)
    assert {p: after[p] for p in kept} == kept and set(after) - set(kept) == set(lost)
    for p, rec in zip(lost, before, strict=True):
        again = read_record(p)
        for m in METRICS + ("align_heldout_after", "row_norm_after"):
            assert again[m] == pytest.approx(rec[m], rel=1e-9, abs=1e-12), (p.name, m)


def test_local_cluster_with_two_workers_runs_and_resumes(base, tmp_path):
    distributed = pytest.importorskip("distributed")
    cfg = _small_config(seeds=[0], baseline=False, only={"datasets": ["sst2"]})
    study, _ = nlp._split(nlp.check_config(cfg))
    points = [{"seed": 0, "tie_qk": False, "variant": v} for v in scratch_variants(study, "sst2")]
    out = tmp_path / "local"
    # one LocalCluster of 2 single-threaded worker processes for both passes (what
    # --scheduler local --n-workers 2 starts per sweep), reached by its address
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        kw = dict(scheduler=cluster.scheduler_address, n_workers=2)
        _run(cfg, out, **kw)
        assert len(_mtimes(out)) == 3
        for p in points:  # the threaded study's runs: same keys, same numbers
            here = read_record(_run_path(out, cfg, "sst2", p))
            there = read_record(_run_path(base, cfg, "sst2", p))
            for m in METRICS:
                assert here[m] == pytest.approx(there[m], rel=1e-9, abs=1e-12), (p, m)
        _run_path(out, cfg, "sst2", points[1]).unlink()
        kept = _mtimes(out)
        _run(cfg, out, **kw)
        assert len(_mtimes(out)) == 3 and all(_mtimes(out)[p] == t for p, t in kept.items())
    assert read_record(_run_path(out, cfg, "sst2", points[1]))["accuracy"] == pytest.approx(
        read_record(_run_path(base, cfg, "sst2", points[1]))["accuracy"], rel=1e-9
    )


def test_unknown_and_misspelled_keys_are_refused_naming_the_nearest():
    good = _small_config()
    for change, match in [
        (
            {"validation_fractoin": 0.2},
            "'validation_fractoin' \\(did you mean 'validation_fraction'",
        ),
        ({"noise": {"rte": 0.5}}, "'noise.rte' \\(did you mean 'noise.rate'"),
        ({"train": {"lrr": 0.1}}, "'train.lrr' \\(did you mean 'train.lr'"),
        ({"phase_a": {"tlt": 0.1}}, "'phase_a.tlt' \\(did you mean 'phase_a.tilt'"),
        ({"model": {"d_modl": 8}}, "'model.d_modl' \\(did you mean 'model.d_model'"),
        ({"controls": {"kind": []}}, "'controls.kind' \\(did you mean 'controls.kinds'"),
        ({"tokenizer": {"vocab": 50}}, "'tokenizer.vocab' \\(did you mean 'tokenizer.vocab_size'"),
        ({"only": {"dataset": ["sst2"]}}, "'only.dataset' \\(did you mean 'only.datasets'"),
    ]:
        with pytest.raises(InputError, match=match):
            nlp.check_config({**good, **change})
    ds = [dict(good["datasets"][0], max_trian=5)]
    with pytest.raises(
        InputError, match="'datasets\\[0\\].max_trian' \\(did you mean 'datasets\\[0\\].max_train'"
    ):
        nlp.check_config({**good, "datasets": ds})
    for change, match in [
        ({"features": ["relu"]}, "features must be among"),
        ({"seeds": [1, 1]}, "distinct"),
        ({"controls": {"feature": "porf", "datasets": ["sst2"]}}, "controls.feature"),
        ({"controls": {"datasets": ["imdb"]}}, "controls.datasets"),
        ({"controls": {"kinds": ["shuffle"]}}, "controls.kinds must be among"),
        ({"noise": {"rate": 1.5}}, "noise.rate"),
        ({"train": {"lr": 0.0}}, "lr"),
        ({"phase_a": {"tilt": 0.0}}, "tilt"),
        ({"model": {"n_heads": 3}}, "n_heads"),
        ({"noise": 0.1}, "'noise' must be a mapping"),
        ({"datasets": []}, "at least one data set"),
        ({"only": {"datasets": ["imdb"]}}, "only.datasets"),
        ({"encoder": "bert"}, "encoder"),
    ]:
        with pytest.raises(InputError, match=match):
            nlp.check_config({**good, **change})


def test_runner_refuses_bad_input_in_one_line_before_any_work(tmp_path, capsys):
    out = tmp_path / "never"
    common = ["run", str(TINY), "--out", str(out), "--no-progress"]
    data = ["--set", f"data_dir='{FIX}'"]
    for argv in (
        [*common, *data, "--set", "noise.rte=0.5"],
        [*common, "--set", f"data_dir='{tmp_path}'"],  # no data there
        [*common, *data, "--set", 'only.datasets=["imdb"]'],
        [*common, *data, "--scheduler", "nowhere"],
        [*common, *data, "--n-workers", "0"],
        [*common, *data, "--report-only"],  # no study there to report on
    ):
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as stop:  # a flag refused while parsing: the same one-line form
            code = stop.code
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("meanfield: error: "), (argv, err)
        assert code == 2, argv
    main([*common, *data, "--set", "noise.rte=0.5"])
    assert "'noise.rte' (did you mean 'noise.rate'?)" in capsys.readouterr().err
    assert not out.exists()
