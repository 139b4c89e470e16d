"""The from-scratch NLP study on the sweep runner (meanfield.studies.scratch_nlp, the CLI
paper_repro/nlp/run_study.py and the converter of the old layout), on the tiny fixtures."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
import xarray as xr

pytest.importorskip("tokenizers")
pytest.importorskip("sklearn")

from meanfield.errors import InputError  # noqa: E402
from meanfield.studies import scratch_nlp as study  # noqa: E402
from meanfield.studies.scratch_nlp_report import read_record, write_report  # noqa: E402
from meanfield.workbench.sweeps import run_key  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "nlp"
TINY = ROOT / "paper_repro" / "nlp" / "configs" / "tiny.json"
METRICS = ("accuracy", "noisy_accuracy", "ece", "log_loss")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _small_config() -> dict:
    """The tiny configuration with one feature map (FAVOR, whose controls run on RT): 32 runs
    (sst2 3 variants, RT 7, QQP 3 x 2 Q = K settings; 2 seeds)."""
    cfg = json.loads(TINY.read_text())
    cfg["features"] = ["favor"]
    return cfg


def _run_path(out: Path, cfg: dict, dataset: str, point: dict) -> Path:
    spec = study.sweep_specs(study.check_config(cfg), FIX)[dataset]["variants"]
    return out / spec["folder"] / "runs" / f"{run_key(point, spec['digest'])}.nc"


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
    res = study.run_study(
        _small_config(), data_dir=FIX, out_dir=out, progress=False, log=lambda line: None
    )
    return out, res


def _copy(base, tmp_path) -> Path:
    out = tmp_path / "study"
    shutil.copytree(base[0], out)
    return out


def test_tiny_study_runs_and_reports(base, tmp_path):
    out, res = base
    cfg = study.check_config(_small_config())
    per_seed = sum(len(study.variants(cfg, d["name"])) * len(d["tie_qk"]) for d in cfg["datasets"])
    assert per_seed == 16 and res["runs_done"] == res["runs_total"] == 2 * per_seed
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
    assert rep["n_runs"] == 2 * per_seed and set(rep["baselines"]) == {
        "sst2",
        "rotten_tomatoes",
        "qqp",
    }
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


def test_rerun_with_another_lr_computes_new_runs_and_reports_only_them(base, tmp_path, capsys):
    out = _copy(base, tmp_path)
    cli = _load(ROOT / "paper_repro" / "nlp" / "run_study.py", "nlp_cli_lr")
    cfg = _small_config()
    cfg["train"]["lr"] = 2 * cfg["train"]["lr"]
    new = tmp_path / "lr.json"
    new.write_text(json.dumps(cfg))
    args = ["--data-dir", str(FIX), "--out", str(out), "--no-figures", "--datasets", "sst2"]
    capsys.readouterr()
    assert cli.main(["--config", str(new), *args]) == 0
    text = capsys.readouterr().out
    assert "6 run(s) done" in text  # sst2: 3 variants x 2 seeds, computed anew
    assert "train.lr: 0.003 -> 0.006" in text  # the note names what changed
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert len(rows) == 6 and {r["dataset"] for r in rows} == {"sst2"}  # nothing stale shown
    kernel = _run_path(out, cfg, "sst2", {"seed": 1, "tie_qk": False, "variant": "kernel-favor"})
    before = _run_path(
        out, _small_config(), "sst2", {"seed": 1, "tie_qk": False, "variant": "kernel-favor"}
    )
    assert kernel.is_file() and before.is_file() and kernel != before  # both kept
    assert read_record(kernel)["phase_b_history"] != read_record(before)["phase_b_history"]
    # --report-only with the old configuration is refused: it is not the one last run there
    assert cli.main(["--config", str(TINY), "--out", str(out), "--report-only"]) == 2
    assert "differs from the configuration last run" in capsys.readouterr().err
    # back to the first configuration: its runs are all there again
    first = tmp_path / "first.json"
    first.write_text(json.dumps(_small_config()))
    assert cli.main(["--config", str(first), *args[:-2], "--quiet"]) == 0
    assert "0 run(s) done" in capsys.readouterr().out
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
    study.clear_caches()  # recomputed from scratch: data, tokenizer, warm-up
    res = study.run_study(cfg, data_dir=FIX, out_dir=out, progress=False, log=lambda line: None)
    assert res["runs_done"] == 2 and res["runs_total"] == 32
    for p, rec in zip(lost, before, strict=True):
        after = read_record(p)
        for m in METRICS + ("align_heldout_after", "row_norm_after"):
            assert after[m] == pytest.approx(rec[m], rel=1e-9, abs=1e-12), (p.name, m)


def test_local_cluster_with_two_workers_runs_and_resumes(base, tmp_path):
    distributed = pytest.importorskip("distributed")
    cfg = _small_config()
    cfg.update(seeds=[0], baseline=False)
    points = [
        {"seed": 0, "tie_qk": False, "variant": v}
        for v in study.variants(study.check_config(cfg), "sst2")
    ]
    out = tmp_path / "local"
    # one LocalCluster of 2 single-threaded worker processes for both passes (what
    # --scheduler local --n-workers 2 starts per sweep), reached by its address
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        kw = dict(
            data_dir=FIX,
            out_dir=out,
            datasets=["sst2"],
            scheduler=cluster.scheduler_address,
            n_workers=2,
            progress=False,
            log=lambda line: None,
        )
        assert study.run_study(cfg, **kw)["runs_done"] == 3
        for p in points:  # the threaded study's runs: same keys, same numbers
            here = read_record(_run_path(out, cfg, "sst2", p))
            there = read_record(_run_path(base[0], cfg, "sst2", p))
            for m in METRICS:
                assert here[m] == pytest.approx(there[m], rel=1e-9, abs=1e-12), (p, m)
        _run_path(out, cfg, "sst2", points[1]).unlink()
        assert study.run_study(cfg, **kw)["runs_done"] == 1
    assert read_record(_run_path(out, cfg, "sst2", points[1]))["accuracy"] == pytest.approx(
        read_record(_run_path(base[0], cfg, "sst2", points[1]))["accuracy"], rel=1e-9
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
    ]:
        with pytest.raises(InputError, match=match):
            study.check_config({**good, **change})
    ds = [dict(good["datasets"][0], max_trian=5)]
    with pytest.raises(
        InputError, match="'datasets\\[0\\].max_trian' \\(did you mean 'datasets\\[0\\].max_train'"
    ):
        study.check_config({**good, "datasets": ds})
    for change, match in [
        ({"features": ["relu"]}, "unknown feature"),
        ({"seeds": [1, 1]}, "distinct"),
        ({"controls": {"feature": "porf", "datasets": ["sst2"]}}, "controls.feature"),
        ({"controls": {"datasets": ["imdb"]}}, "controls.datasets"),
        ({"controls": {"kinds": ["shuffle"]}}, "unknown controls"),
        ({"noise": {"rate": 1.5}}, "noise.rate"),
        ({"train": {"lr": 0.0}}, "lr"),
        ({"phase_a": {"tilt": 0.0}}, "tilt"),
        ({"model": {"n_heads": 3}}, "n_heads"),
        ({"noise": 0.1}, "'noise' must be a mapping"),
        ({"datasets": []}, "at least one data set"),
    ]:
        with pytest.raises(InputError, match=match):
            study.check_config({**good, **change})


def test_cli_refuses_bad_input_in_one_line_before_any_work(tmp_path, capsys):
    cli = _load(ROOT / "paper_repro" / "nlp" / "run_study.py", "nlp_cli_bad")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**_small_config(), "noise": {"rte": 0.5}}))
    out = tmp_path / "never"
    for argv in (
        ["--config", str(bad), "--data-dir", str(FIX)],
        ["--config", str(TINY), "--data-dir", str(tmp_path)],  # no data there
        ["--config", str(TINY), "--data-dir", str(FIX), "--datasets", "imdb"],
        ["--config", str(TINY), "--data-dir", str(FIX), "--scheduler", "nowhere"],
        ["--config", str(TINY), "--data-dir", str(FIX), "--n-workers", "0"],
        ["--report-only"],
    ):
        capsys.readouterr()
        assert cli.main([*argv, "--out", str(out)]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("run_study: error: "), (argv, err)
    assert "'noise.rte' (did you mean 'noise.rate'?)" in _last_error(cli, bad, out, capsys)
    assert not out.exists()


def _last_error(cli, bad, out, capsys) -> str:
    capsys.readouterr()
    cli.main(["--config", str(bad), "--data-dir", str(FIX), "--out", str(out)])
    return capsys.readouterr().err


def test_converter_moves_old_layout_runs_under_their_configuration(base, tmp_path):
    """A folder in the layout of the engine before issue 24 (runs/<key>.json, config.json
    beside them), made from the study's own records, converts to runs its report reads."""
    conv = _load(ROOT / "paper_repro" / "nlp" / "convert_results.py", "nlp_convert")
    out = _copy(base, tmp_path)
    rep = write_report(out, figures=False)
    recorded = json.loads((out / "config.json").read_text())
    old = tmp_path / "old"
    (old / "runs").mkdir(parents=True)
    for path in sorted(out.glob("*/runs/*.nc")):
        rec = read_record(path)
        v = "softmax" if rec["feature"] == "softmax" else f"{rec['branch']}-{rec['feature']}"
        key = f"{rec['dataset']}__{v}__qk{int(rec['tie_qk'])}__s{rec['seed']}"
        (old / "runs" / f"{key}.json").write_text(json.dumps(rec))
    for path in sorted(out.glob("*/baseline/runs/*.nc")):
        rec = read_record(path)
        (old / "runs" / f"baseline__{rec.pop('dataset')}.json").write_text(json.dumps(rec))
    extras = {k: recorded[k] for k in ("data_dir", "meanfield_version", "torch", "machine")}
    (old / "config.json").write_text(json.dumps({**recorded["config"], **extras}))
    assert conv.main([str(old)]) == 0
    assert not (old / "runs").exists()  # the JSON is gone, every number moved
    again = write_report(old, figures=False)
    assert again["n_runs"] == rep["n_runs"] == 32
    assert (old / "table.md").read_text() == (out / "table.md").read_text()
    assert (old / "paired.md").read_text() == (out / "paired.md").read_text()
    converted = json.loads((old / "config.json").read_text())
    assert converted["sweeps"] == recorded["sweeps"]  # keyed as the study keys them
    assert converted["converted"]["runs"]["rotten_tomatoes"] == {
        "runs": 14,
        "baseline": 1,
        "missing": 0,
    }
    one = next((old / "sst2" / "runs").glob("*.nc"))
    with xr.open_dataset(one, engine="h5netcdf") as ds:
        assert (
            "issue 24" in ds.attrs["converted_from"]
            and "convert_results" in ds.attrs["converted_by"]
        )
    # a rerun of the same configuration finds them all: nothing is recomputed
    res = study.run_study(
        recorded["config"], data_dir=FIX, out_dir=old, progress=False, log=lambda line: None
    )
    assert res["runs_done"] == 0 and res["runs_total"] == 32
    assert conv.main([str(old)]) == 2  # already converted
