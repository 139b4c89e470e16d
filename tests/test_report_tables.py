"""The README tables of the pretrained-model study come from the report's unrounded values
(meanfield.studies.nlp_report.readme_tables, meanfield.workbench.report_tables.
update_readme_tables); the report prints the inference-cost tables found beside the study."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from meanfield.errors import InputError
from meanfield.stats import paired_family
from meanfield.studies.nlp_report import _p_short, _points, readme_tables, write_report
from meanfield.workbench.report_tables import marked_tables, update_readme_tables

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "paper_repro" / "nlp_pretrained"
RESULTS = STUDY / "results" / "full"
#: every table the README includes between report-table markers
MARKED = {
    f"{kind}-{ds}" for kind in ("variants", "paired") for ds in ("rotten_tomatoes", "sst2", "qqp")
} - {"paired-sst2"} | {"paired-sst2-no-bonferroni", "inference-cost"}


@pytest.fixture(scope="module")
def committed_report(tmp_path_factory):
    """The report regenerated, in a temporary folder, from the committed run files (the
    results folder is only read: a study may be writing to it)."""
    out = tmp_path_factory.mktemp("report") / "full"  # the inference cost beside it
    out.mkdir()
    shutil.copy(RESULTS.parent / "inference_cost.nc", out.parent / "inference_cost.nc")
    shutil.copy(RESULTS / "config.json", out / "config.json")
    # every stage's sweep: softmax, linearized and the methods kept in their own sweeps
    for stage in sorted(p.parent.name for p in RESULTS.glob("*/current.json")):
        (out / stage / "runs").mkdir(parents=True)
        shutil.copy(RESULTS / stage / "current.json", out / stage / "current.json")
        for path in (RESULTS / stage / "runs").glob("*.nc"):
            shutil.copy(path, out / stage / "runs" / path.name)
    return out, write_report(out)


@pytest.mark.slow  # reads the ~160 committed run files (~15 s on the 2-core machine)
def test_readme_tables_are_the_reports(committed_report, tmp_path):
    out, rep = committed_report
    readme = tmp_path / "README.md"
    shutil.copy(STUDY / "README.md", readme)
    before = readme.read_text()
    names = update_readme_tables(readme, rep["readme_tables"])
    assert set(names) == MARKED and len(names) == len(MARKED)
    # replacing every marked table by the regenerated one changes nothing
    assert readme.read_text() == before
    # the file the report writes holds the same tables between the same markers
    written = (out / "readme_tables.md").read_text()
    assert update_readme_tables(out / "readme_tables.md", rep["readme_tables"])
    assert (out / "readme_tables.md").read_text() == written


def _sst2_rows(diffs):
    """Runs of SST-2 whose Kernel − vanilla softmaxfeat differences are ``diffs``."""
    rows = []
    for seed, d in enumerate(diffs):
        for variant, acc in (
            ("softmax", 0.86),
            ("vanilla-softmaxfeat", 0.82),
            ("kernel-softmaxfeat", 0.82 + d),
        ):
            rows.append(
                dict(
                    dataset="sst2",
                    seed=seed,
                    variant=variant,
                    clean_accuracy=acc,
                    linearized_accuracy=0.78,
                )  # fmt: skip
            )
    return rows


def test_paired_cell_is_rounded_once_from_the_unrounded_difference():
    # mean difference -0.8486 points: rounded once -0.8; rounded to -0.85 first, then -0.9
    diffs = np.array([-0.018486, -0.008486, 0.001514, -0.013486, -0.003486])
    cfg = {"datasets": [{"name": "sst2"}], "features": ["softmaxfeat"], "methods": ["vanilla",
           "kernel"]}  # fmt: skip
    rows = _sst2_rows(diffs)
    label = ("sst2", "kernel-softmaxfeat", "vanilla-softmaxfeat", "Kernel − vanilla")
    family = paired_family({label: diffs}, planned=1)
    cell = readme_tables(cfg, rows, family)["paired-sst2-no-bonferroni"].splitlines()[2]
    # independent truth: the Student-t interval and the paired t-test of scipy; one planned
    # comparison, so Holm's p is the p-value itself
    k = len(diffs)
    half = stats.t.ppf(0.975, k - 1) * diffs.std(ddof=1) / np.sqrt(k)
    p = stats.ttest_1samp(diffs, 0.0).pvalue
    m = 100 * diffs.mean()
    lo, hi = m - 100 * half, m + 100 * half
    sign = lambda x: f"{x:+.1f}".replace("-", "−")  # noqa: E731
    assert m == pytest.approx(-0.8486)
    assert cell == (
        f"| Kernel − vanilla | {sign(m)} [{sign(lo)}, {sign(hi)}], Holm {round(p, 3):g} |"
    )
    assert "−0.8 [" in cell
    # the variant table: 4 decimals of the mean accuracy, recovered = accuracy / softmax's
    variants = readme_tables(cfg, rows, family)["variants-sst2"].splitlines()
    kernel = next(line for line in variants if line.startswith("| Kernel softmaxfeat |"))
    acc = 0.82 + diffs
    assert kernel.split(" | ")[2].startswith(f"{acc.mean():.4f} [")
    assert kernel.split(" | ")[4].startswith(f"{(acc / 0.86).mean():.3f} [")


@pytest.mark.parametrize(
    "p, text",
    [(1.0, "1"), (0.1903, "0.19"), (0.0329, "0.033"), (0.00405, "0.004"), (0.0002, "< 0.001")],
)
def test_p_short(p, text):
    assert _p_short(p) == text


def test_points():
    assert (_points(0.0073), _points(-0.008486), _points(-0.0002)) == ("+0.7", "−0.8", "−0.0")


TEXT = (
    "Before.\n\n<!-- report-table:a -->\nold a\n<!-- /report-table:a -->\n\n"
    "- item:\n\n  <!-- report-table:b -->\n\n  old b\n\n  <!-- /report-table:b -->\n\nAfter.\n"
)


def test_update_readme_tables_replaces_only_between_markers(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(TEXT)
    assert update_readme_tables(path, {"a": "| x |\n| --- |", "b": "| y |\n| --- |"}) == ["a", "b"]
    new = path.read_text()
    assert new == (
        "Before.\n\n<!-- report-table:a -->\n\n| x |\n| --- |\n\n<!-- /report-table:a -->\n\n"
        "- item:\n\n  <!-- report-table:b -->\n\n  | y |\n  | --- |\n\n"
        "  <!-- /report-table:b -->\n\nAfter.\n"
    )
    update_readme_tables(path, {"a": "| x |\n| --- |", "b": "| y |\n| --- |"})
    assert path.read_text() == new  # idempotent


def test_update_readme_tables_refuses_unknown_or_unclosed_markers(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(TEXT)
    with pytest.raises(InputError, match="tables: .* marks table\\(s\\) b"):
        update_readme_tables(path, {"a": "| x |"})
    path.write_text(TEXT.replace("<!-- /report-table:b -->", ""))
    with pytest.raises(InputError, match="readme_path: .* b without the closing"):
        update_readme_tables(path, {"a": "| x |", "b": "| y |"})
    assert path.read_text() == TEXT.replace("<!-- /report-table:b -->", "")  # nothing written


def _cost_dataset():
    """A result of the documented shape of meanfield.attention.inference_cost.inference_cost
    (two variants, two lengths, CPU and wall time, memory)."""
    import xarray as xr

    t = np.array([[0.1, 0.4], [0.1, 0.2]])
    both = ("variant", "L")
    data = {
        "seconds": (both, t),
        "ratio_to_softmax": (both, t / t[0]),
        "cpu_seconds": (both, t / 2),
        "cpu_ratio_to_softmax": (both, t / t[0]),
        "slope_seconds": ("variant", [2.0, 1.0]),
        "slope_cpu_seconds": ("variant", [2.0, 1.0]),
        "peak_extra_mib": (both, [[2.0, 8.0], [2.0, 4.0]]),
        "n_repeats": ("L", [5, 5]),
    }
    return xr.Dataset(data, coords={"variant": ["softmax", "favor m=64"], "L": [128, 256],
                                    "n_outputs": ("variant", [0, 64])})  # fmt: skip


def test_the_report_prints_the_inference_cost_found_beside_the_study(tmp_path):
    from meanfield.attention.inference_cost import inference_cost_table
    from meanfield.results import save_dataset

    out = tmp_path / "full"
    out.mkdir()
    (out / "config.json").write_text('{"name": "x", "datasets": []}')
    assert "inference-cost" not in write_report(out, tmp_path / "without")["readme_tables"]
    assert "Inference time" not in (tmp_path / "without" / "report.md").read_text()
    save_dataset(_cost_dataset(), tmp_path / "inference_cost.nc")
    rep = write_report(out, tmp_path / "with")
    # the tables as inference_cost_table writes them (CPU first, then wall, then memory),
    # read back from the file: the report adds its heading and nothing else
    expected = inference_cost_table(_cost_dataset(), clock="both")
    assert rep["readme_tables"] == {"inference-cost": expected.rstrip("\n")}
    report = (tmp_path / "with" / "report.md").read_text()
    assert report.endswith(f"## Inference time and memory per feature map\n\n{expected}\n")
    assert expected.index("CPU time") < expected.index("Wall time") < expected.index("Peak")
    assert "| favor m=64 | 64 | 0.05 s (×1.00) | 0.1 s (×0.50) | 1.00 |" in expected
    assert (tmp_path / "with" / "readme_tables.md").read_text() == marked_tables(
        rep["readme_tables"]
    )
