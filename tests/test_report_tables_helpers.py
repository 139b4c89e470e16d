"""The report pieces of meanfield.workbench.report_tables: markdown tables parsed back cell by
cell, CSV files read back by the standard library's reader, ``mean ± SE`` against scipy's
standard error, and the named refusals."""

import csv
import statistics

import numpy as np
import pytest
from scipy import stats

from meanfield.errors import InputError, InputTypeError
from meanfield.stats import paired_family
from meanfield.workbench.report_tables import (
    family_cells,
    family_table,
    interval,
    markdown_row,
    markdown_table,
    mean_se,
    plus_minus,
    write_csv,
    write_lines,
)


def _cells(line: str) -> list[str]:
    """The cells of a markdown table line, by splitting on the pipes."""
    assert line.startswith("| ") and line.endswith(" |")
    return line[2:-2].split(" | ")


def test_a_markdown_table_parses_back_to_its_cells():
    header, rows = ["task", "m", "error"], [["radial", 64, 0.25], ["two_moons", 256, "—"]]
    lines = markdown_table(header, rows)
    assert [_cells(x) for x in lines[:1] + lines[2:]] == [
        list(map(str, r)) for r in [header, *rows]
    ]
    assert lines[1] == "|---|---|---|"
    assert markdown_table(header, rule=" --- |")[1] == "| --- | --- | --- |"
    assert markdown_row(["a", 1, 0.5]) == "| a | 1 | 0.5 |"


def test_a_markdown_table_refuses_ragged_rows_and_unknown_rules():
    with pytest.raises(
        InputError, match=r"rows\[1\] has 1 cells; every row must have the header's 2"
    ):
        markdown_table(["a", "b"], [[1, 2], [3]])
    with pytest.raises(InputError, match="header must name at least one column"):
        markdown_table([], [])
    with pytest.raises(InputError, match="rule"):
        markdown_table(["a"], [], rule="===|")


def test_write_lines_ends_every_line_and_refuses_non_strings(tmp_path):
    path = tmp_path / "t.md"
    write_lines(path, ["# title", "", "body"])
    assert path.read_bytes() == b"# title\n\nbody\n"
    with pytest.raises(InputTypeError, match=r"lines\[1\] must be a string, got int"):
        write_lines(tmp_path / "u.md", ["a", 3])
    assert not (tmp_path / "u.md").exists()  # refused before anything was written


def test_csv_files_read_back_by_the_standard_reader(tmp_path):
    rows = [{"learner": "rff", "error": 0.1 + 0.2, "edge": True}, {"learner": "is", "error": 1e-9}]
    rows[1]["edge"] = ""
    path = tmp_path / "t.csv"
    assert write_csv(path, rows)
    with open(path, newline="") as fh:
        back = list(csv.DictReader(fh))
    assert back == [{k: str(v) for k, v in r.items()} for r in rows]
    assert float(back[0]["error"]) == 0.1 + 0.2  # full precision, not rounded
    assert write_csv(path, [{"a": 1, "b": 2}, {"b": 3}], keys=["b", "c"])
    with open(path, newline="") as fh:
        assert list(csv.reader(fh)) == [["b", "c"], ["2", ""], ["3", ""]]
    assert write_csv(path, [], keys=["b"]) and path.read_text().splitlines() == ["b"]
    assert not write_csv(tmp_path / "none.csv", [])
    assert not (tmp_path / "none.csv").exists()


def test_csv_refusals_come_before_the_file(tmp_path):
    path = tmp_path / "t.csv"
    with pytest.raises(InputError, match=r"rows\[1\] has the keys \['x'\] that rows\[0\] lacks"):
        write_csv(path, [{"a": 1}, {"a": 2, "x": 3}])
    with pytest.raises(InputTypeError, match=r"rows\[0\] must be a mapping, got list"):
        write_csv(path, [[1, 2]])
    assert not path.exists()


def test_mean_se_is_the_mean_and_scipys_standard_error():
    v = np.random.default_rng(5).normal(0.3, 0.1, size=7)
    mean, se = statistics.fmean(v), stats.sem(v)  # sem: ddof = 1
    assert mean_se(v, ".6f") == f"{mean:.6f} ± {se:.6f}"
    assert mean_se(iter([0.25, 0.75])) == "0.500 ± 0.250"  # s = 0.3536, s/√2 = 0.25
    assert mean_se([0.5]) == "0.500 ± nan" and mean_se([]) == "—"
    assert mean_se([0.1, np.nan]) == "nan ± nan"  # a NaN shows, never a number
    assert plus_minus(-0.5, 0.125, "+.2f") == "-0.50 ± +0.12"


def test_interval_and_family_cells_format_paired_family_rows():
    assert interval(0.1, -0.2, 0.4, k=3, fmt=".1f") == "0.1 [-0.2, 0.4] (k=3)"
    rows = paired_family({"x": [0.11, 0.2, 0.16, 0.13, 0.09], "y": [0.0, 0.01, -0.02]})
    for r in rows:
        f = "+.4f"
        want = [
            f"{r['mean']:{f}} [{r['lo']:{f}}, {r['hi']:{f}}]",
            f"[{r['lo_bonf']:{f}}, {r['hi_bonf']:{f}}]",
            f"{r['p']:.2g}",
            f"{r['p_holm']:.2g}",
        ]
        assert family_cells(r, 4) == want
    # the first comparison by hand: mean 0.138, t-interval half-width t_{0.975,4} · s/√5
    x = np.array([0.11, 0.2, 0.16, 0.13, 0.09])
    half = stats.t.ppf(0.975, 4) * x.std(ddof=1) / np.sqrt(5)
    assert family_cells(rows[0])[0] == interval(0.138, 0.138 - half, 0.138 + half)
    with pytest.raises(InputError, match=r"missing \['p_holm'\]"):
        family_cells({k: 0.0 for k in ("mean", "lo", "hi", "lo_bonf", "hi_bonf", "p")})
    with pytest.raises(InputError, match="digits"):
        family_cells(rows[0], -1)


def test_cells_of_values_without_spread_say_so():
    """k >= 2 equal values (or equal paired differences) have no interval: every formatter
    prints the mean and "[no spread]", never "[nan, nan]" nor a width-0 interval; a single
    value keeps its NaN bounds (nan shows)."""
    from meanfield.stats import t_interval

    assert interval(*t_interval([0.25, 0.25, 0.25]), fmt=".2f") == "0.25 [no spread]"
    assert interval(-0.0047, np.nan, np.nan, k=2) == "-0.005 [no spread] (k=2)"
    assert interval(0.5, np.nan, np.nan, k=1) == "+0.500 [+nan, +nan] (k=1)"
    assert interval(np.nan, np.nan, np.nan, k=3) == "+nan [+nan, +nan] (k=3)"
    assert mean_se([0.25, 0.25]) == "0.250 [no spread]"
    assert mean_se([0.25, np.nan]) == "nan ± nan"  # a NaN still shows
    a, b = np.array([869, 874]) / 1066, np.array([874, 879]) / 1066  # −5/1066 at both seeds
    rows = paired_family({"flat": (a, b), "x": [0.11, 0.2, 0.16], "one": [0.3]}, planned=8)
    flat, spread, one = (family_cells(r) for r in rows)
    assert flat == ["-0.005 [no spread]", "[no spread]", "0.5", "1"]  # Holm: min(1, 8 · 0.5)
    assert "no spread" not in " ".join(spread) and "nan" not in " ".join(spread)
    assert one == ["+0.300 [+nan, +nan]", "[+nan, +nan]", "nan", "nan"]  # one seed: untested
    # a row without the no_spread entry is read by its NaN bounds and k
    bare = {k: v for k, v in rows[0].items() if k != "no_spread"}
    assert family_cells(bare) == flat
    table = family_table(rows, ["comparison"])
    assert _cells(table[2]) == ["flat", *flat]


def test_family_table_spreads_tuple_labels_over_their_columns():
    rows = paired_family({("radial", 64): [0.1, 0.2, 0.15], ("two_moons", 64): [0.0, 0.1, -0.05]})
    lines = markdown_table(["task", "m", "d", "Bonferroni CI", "p", "Holm p"], [])[:1]
    table = family_table(rows, ["task", "m"], estimate="d")
    assert table[0] == lines[0] and len(table) == 4
    for line, r in zip(table[2:], rows, strict=True):
        assert _cells(line) == [*map(str, r["label"]), *family_cells(r)]
    plain = family_table(paired_family({"x": [0.1, 0.2, 0.15]}), ["comparison"])
    assert _cells(plain[2])[0] == "x"
    with pytest.raises(
        InputError, match="rows\\[0\\] has 6 cells; every row must have the header's 5"
    ):
        family_table(rows, ["task"])  # a two-part label under one title
