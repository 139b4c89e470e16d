"""Plain-text pieces of the study reports: markdown tables, CSV files, ``mean ± SE`` cells and
interval cells.

Every report of :mod:`meanfield.studies` is a set of markdown and CSV files; this module holds
what they share, so one table looks the same in every report:

* :func:`markdown_row`, :func:`markdown_table`: GitHub-flavoured markdown (a header, a rule
  ``|---|---|`` or ``| --- | --- |``, one line per row; every row as wide as the header);
* :func:`write_lines`: lines to a text file, each ended by a newline;
* :func:`write_csv`: dict rows to a CSV file (:class:`csv.DictWriter`);
* :func:`plus_minus`, :func:`mean_se`: ``mean ± half-width`` cells; :func:`mean_se` computes
  the mean and its standard error s/√k (sample standard deviation s, ddof = 1) over k values;
* :func:`interval`, :func:`family_cells`: ``mean [lo, hi]`` cells and the four cells of a row
  of :func:`meanfield.stats.paired_family` (mean with its 95 % interval, Bonferroni interval,
  p, Holm-adjusted p); :func:`family_table`: the markdown table of a whole family;
* :func:`marked_tables`, :func:`update_readme_tables`: generated tables between markers in a
  markdown file (a README includes a report's tables verbatim, rounded once).

Numbers are formatted with Python's format specifications (``".3f"``, ``"+.4f"``): a NaN shows
as ``nan`` in the cell, never silently as a number.  One exception, said in words: a mean over
k ≥ 2 equal values has no interval (:func:`meanfield.stats.t_interval` and
:func:`meanfield.stats.paired_test` give NaN bounds, as zero observed spread is no evidence of
certainty), and its cell reads ``mean [no spread]`` (:data:`NO_SPREAD`) in every formatter.

See Also
--------
meanfield.stats.paired_family : the rows :func:`family_cells` formats.
meanfield.studies.synthetic_report : the synthetic study's reports, built from these pieces.

Examples
--------
>>> from meanfield.workbench.report_tables import markdown_table, mean_se
>>> print("\\n".join(markdown_table(["learner", "error"], [["rff", mean_se([0.2, 0.3])]])))
| learner | error |
|---|---|
| rff | 0.250 ± 0.050 |
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .._validation import check_choice, check_int
from ..errors import InputError, InputTypeError

__all__ = [
    "markdown_row",
    "markdown_table",
    "write_lines",
    "write_csv",
    "plus_minus",
    "mean_se",
    "interval",
    "family_cells",
    "family_table",
    "marked_tables",
    "update_readme_tables",
    "markdown_section",
    "counts_cell",
    "NO_SPREAD",
]

#: The two rules of the reports: ``|---|---|`` and ``| --- | --- |``.
RULES = ("---|", " --- |")

#: What an interval cell shows for k ≥ 2 values without spread (equal values, or paired
#: differences equal up to round-off): no interval can be formed from zero observed spread.
NO_SPREAD = "[no spread]"


def _without_spread(mean, lo, hi, k) -> bool:
    """Whether ``mean [lo, hi]`` is a mean over k ≥ 2 values without spread: a finite mean and
    NaN bounds (:func:`meanfield.stats.t_interval`'s answer), with k ≥ 2 or k unknown (None).
    A single value (k = 1) also has NaN bounds, and keeps them (``nan`` shows)."""
    finite = np.isfinite(float(mean))
    return bool(finite and np.isnan(float(lo)) and np.isnan(float(hi)) and (k is None or k >= 2))


def markdown_row(cells) -> str:
    """One line of a markdown table, ``| c1 | c2 |`` (each cell by :class:`str`).

    Parameters
    ----------
    cells : iterable
        The cells, in order.

    Returns
    -------
    str

    See Also
    --------
    markdown_table : a whole table.

    Examples
    --------
    >>> markdown_row(["a", 1, 0.5])
    '| a | 1 | 0.5 |'
    """
    return "| " + " | ".join(map(str, cells)) + " |"


def markdown_table(header, rows=(), *, rule: str = "---|") -> list[str]:
    """The lines of a markdown table: the header, the rule, one line per row.

    Parameters
    ----------
    header : sequence
        The column titles (at least one).
    rows : iterable of sequences
        The rows, each as wide as ``header``; none gives the header and rule alone.
    rule : {"---|", " --- |"}
        The rule's cell: ``|---|---|`` or ``| --- | --- |``.

    Returns
    -------
    list of str
        ``2 + len(rows)`` lines, without newlines.

    Raises
    ------
    meanfield.errors.InputError
        An empty header, a row of another width than the header (the message names the row),
        or another ``rule``.

    See Also
    --------
    markdown_row : one row.
    write_lines : writes it.

    Examples
    --------
    >>> markdown_table(["task", "k"], [["radial", 3], ["checkerboard", 4]])
    ['| task | k |', '|---|---|', '| radial | 3 |', '| checkerboard | 4 |']
    >>> markdown_table(["a", "b"], rule=" --- |")
    ['| a | b |', '| --- | --- |']
    """
    check_choice("rule", rule, RULES)
    header = list(header)
    if not header:
        raise InputError("header must name at least one column, got none")
    rows = [list(row) for row in rows]
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise InputError(
                f"rows[{i}] has {len(row)} cells; every row must have the header's {len(header)}"
            )
    return [markdown_row(header), "|" + rule * len(header)] + [markdown_row(r) for r in rows]


def write_lines(path, lines) -> None:
    """Write ``lines`` to the text file ``path`` (UTF-8), each line ended by a newline.

    Parameters
    ----------
    path : str or path
        The file (its folder must exist; an existing file is replaced).
    lines : iterable of str
        The lines, without their newlines.

    Raises
    ------
    meanfield.errors.InputTypeError
        A line that is not a string (the message names it), before anything is written.

    See Also
    --------
    write_csv : a CSV table.
    markdown_table : a Markdown table.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "table.md"
    >>> write_lines(path, markdown_table(["a"], [[1]]))
    >>> path.read_text()
    '| a |\\n|---|\\n| 1 |\\n'
    """
    lines = list(lines)
    for i, line in enumerate(lines):
        if not isinstance(line, str):
            raise InputTypeError(f"lines[{i}] must be a string, got {type(line).__name__}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_csv(path, rows, keys=None) -> bool:
    """Write dict ``rows`` to the CSV file ``path``: a header line, then one line per row.

    Parameters
    ----------
    path : str or path
        The file (its folder must exist; an existing file is replaced).
    rows : iterable of mappings
        The rows; values are written as :class:`str` writes them (floats in full precision).
    keys : sequence of str, optional
        The columns, in order: a row's other keys are left out and its missing ones left
        empty. By default the first row's keys, and then every row may hold only those.

    Returns
    -------
    bool
        Whether a file was written: with no rows and no ``keys`` there are no columns to name,
        and nothing is written.

    Raises
    ------
    meanfield.errors.InputTypeError
        A row that is not a mapping.
    meanfield.errors.InputError
        Without ``keys``: a row with a key the first row lacks (the message names the row and
        the keys). Both are checked before anything is written.

    See Also
    --------
    write_lines : a text report.
    markdown_table : the same rows in Markdown.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "table.csv"
    >>> write_csv(path, [{"seed": 0, "error": 0.25}, {"seed": 1, "error": 0.5}])
    True
    >>> path.read_text().splitlines()
    ['seed,error', '0,0.25', '1,0.5']
    >>> write_csv(path, [{"seed": 0, "error": 0.25}], keys=["error"])
    True
    >>> path.read_text().splitlines(), write_csv(path, [])
    (['error', '0.25'], False)
    """
    rows = list(rows)
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise InputTypeError(f"rows[{i}] must be a mapping, got {type(row).__name__}")
    if keys is None:
        if not rows:
            return False
        keys = list(rows[0])
        for i, row in enumerate(rows):
            if extra := [k for k in row if k not in rows[0]]:
                raise InputError(
                    f"rows[{i}] has the keys {extra} that rows[0] lacks; pass keys to choose "
                    "the columns"
                )
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(keys), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return True


def plus_minus(mean, half_width, fmt: str = ".3f") -> str:
    """The cell ``mean ± half_width``, both numbers in the format ``fmt``.

    Parameters
    ----------
    mean, half_width : float
    fmt : str
        A format specification (``".3f"``, ``".2g"``, ...).

    Returns
    -------
    str

    See Also
    --------
    mean_se : the numbers it shows.
    interval : an interval.

    Examples
    --------
    >>> plus_minus(0.25, 0.0125), plus_minus(1.5, 0.25, ".1f")
    ('0.250 ± 0.013', '1.5 ± 0.2')
    """
    return f"{mean:{fmt}} ± {half_width:{fmt}}"


def mean_se(values, fmt: str = ".3f") -> str:
    """The cell ``mean ± standard error`` of ``values``: the SE is s/√k, s the sample standard
    deviation (ddof = 1) of the k values.

    Parameters
    ----------
    values : iterable of float
        The values (e.g. one per seed).
    fmt : str
        A format specification for both numbers.

    Returns
    -------
    str
        ``"—"`` for no value; ``"m ± nan"`` for one (no standard error from one value); a NaN
        among the values shows as ``nan``; ``"m [no spread]"`` (:data:`NO_SPREAD`) for k ≥ 2
        equal values, whose standard error 0 would read as certainty (see
        :func:`meanfield.stats.t_interval`).

    See Also
    --------
    plus_minus : as text.
    meanfield.stats.t_interval : a confidence interval.

    Examples
    --------
    >>> mean_se([0.1, 0.2, 0.3]), mean_se([0.5]), mean_se([])
    ('0.200 ± 0.058', '0.500 ± nan', '—')
    >>> mean_se([0.25, 0.25, 0.25])
    '0.250 [no spread]'
    """
    v = np.asarray(list(values), dtype=float)
    if not len(v):
        return "—"
    if len(v) > 1 and np.isfinite(v).all() and np.ptp(v) == 0:
        return f"{v[0]:{fmt}} {NO_SPREAD}"
    se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.nan
    return plus_minus(v.mean(), se, fmt)


def interval(mean, lo, hi, k=None, fmt: str = "+.3f") -> str:
    """The cell ``mean [lo, hi]``, followed by ``(k=K)`` when ``k`` is given; ``mean [no
    spread]`` for a mean over values without spread.

    Parameters
    ----------
    mean, lo, hi : float
        An estimate and its interval.  A finite mean with NaN bounds over k ≥ 2 values is
        :func:`meanfield.stats.t_interval`'s answer to values without spread: the cell
        reads ``mean [no spread]`` (:data:`NO_SPREAD`).
    k : int, optional
        The number of values behind it (e.g. seeds).  Without it, NaN bounds beside a finite
        mean are read as no spread; give ``k = 1`` for a single value, whose NaN bounds then
        show as ``nan``.
    fmt : str
        A format specification for the three numbers (signed by default: differences).

    Returns
    -------
    str

    See Also
    --------
    plus_minus : a mean and its standard error.
    meanfield.stats.paired_family : the intervals of a family.

    Examples
    --------
    >>> interval(0.02, -0.01, 0.05), interval(0.9, 0.85, 0.95, k=5, fmt=".2f")
    ('+0.020 [-0.010, +0.050]', '0.90 [0.85, 0.95] (k=5)')
    >>> from meanfield.stats import t_interval
    >>> interval(*t_interval([-0.0047, -0.0047]), k=2)  # two equal differences
    '-0.005 [no spread] (k=2)'
    >>> interval(*t_interval([0.5]), k=1)  # one value: no interval either, and NaN shows
    '+0.500 [+nan, +nan] (k=1)'
    """
    if _without_spread(mean, lo, hi, k):
        s = f"{mean:{fmt}} {NO_SPREAD}"
    else:
        s = f"{mean:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"
    return s if k is None else f"{s} (k={k})"


def family_cells(row: Mapping, digits: int = 3) -> list[str]:
    """The four cells of a row of :func:`meanfield.stats.paired_family`: the mean with its 95 %
    interval, the Bonferroni (simultaneous) interval, p and the Holm-adjusted p.

    A comparison without spread (``row["no_spread"]``; without that entry, a finite mean with
    NaN bounds and ``k`` ≥ 2) has no interval: its two interval cells read ``[no spread]``
    (:data:`NO_SPREAD`), beside its mean and its sign-flip p.

    Parameters
    ----------
    row : mapping
        With ``mean``, ``lo``, ``hi``, ``lo_bonf``, ``hi_bonf``, ``p``, ``p_holm``; optionally
        ``no_spread`` and ``k``.
    digits : int >= 0
        Decimals of the mean and the intervals (signed); p-values get two significant digits.

    Returns
    -------
    list of 4 str

    Raises
    ------
    meanfield.errors.InputError
        A missing entry (the message names it) or ``digits`` < 0.
    meanfield.errors.InputTypeError
        ``digits`` is not an integer.

    See Also
    --------
    family_table : the table of a family.
    meanfield.stats.paired_family : the tests of a family.

    Examples
    --------
    >>> from meanfield.stats import paired_family
    >>> row = paired_family({"x": [0.1, 0.2, 0.15, 0.12]})[0]
    >>> family_cells(row, 2)
    ['+0.14 [+0.07, +0.21]', '[+0.07, +0.21]', '0.0072', '0.0072']

    The same difference at both of 2 seeds, one of 8 planned claims:

    >>> row = paired_family({"y": [-0.0047, -0.0047]}, planned=8)[0]
    >>> family_cells(row)
    ['-0.005 [no spread]', '[no spread]', '0.5', '1']
    """
    digits = check_int("digits", digits, minimum=0)
    need = ("mean", "lo", "hi", "lo_bonf", "hi_bonf", "p", "p_holm")
    if missing := [k for k in need if k not in row]:
        raise InputError(f"row must hold {list(need)} (a paired_family row), missing {missing}")
    f = f"+.{digits}f"
    if "no_spread" in row:
        flat = bool(row["no_spread"])
    else:  # a row of another source: read as interval() reads it, k unknown as k >= 2
        flat = _without_spread(row["mean"], row["lo"], row["hi"], row.get("k"))
    if flat:
        cells = [f"{row['mean']:{f}} {NO_SPREAD}", NO_SPREAD]
    else:  # written out, not by interval(): a one-seed row's NaN bounds must show as nan
        cells = [f"{row['mean']:{f}} [{row['lo']:{f}}, {row['hi']:{f}}]",
                 f"[{row['lo_bonf']:{f}}, {row['hi_bonf']:{f}}]"]  # fmt: skip
    return cells + [f"{row['p']:.2g}", f"{row['p_holm']:.2g}"]


def family_table(rows, labels, *, digits: int = 3, estimate: str = "mean [95 % CI]") -> list[str]:
    """The markdown table of a family of :func:`meanfield.stats.paired_family` rows: the parts
    of each row's label (a tuple label gives one column per part), then its
    :func:`family_cells`.

    Parameters
    ----------
    rows : list of mappings
        :func:`~meanfield.stats.paired_family`'s rows, in order.
    labels : sequence of str
        The titles of the label columns, one per part of a label.
    digits : int >= 0
        As in :func:`family_cells`.
    estimate : str
        The title of the estimate's column.

    Returns
    -------
    list of str
        The lines of :func:`markdown_table`.

    Raises
    ------
    meanfield.errors.InputError
        A label with another number of parts than ``labels`` has titles, or a row that
        :func:`family_cells` refuses.

    See Also
    --------
    family_cells : its cells.
    markdown_table : the table's text.

    Examples
    --------
    >>> from meanfield.stats import paired_family
    >>> rows = paired_family({("radial", 64): [0.1, 0.2, 0.15, 0.12]})
    >>> family_table(rows, ["task", "m"], digits=2)[2]
    '| radial | 64 | +0.14 [+0.07, +0.21] | [+0.07, +0.21] | 0.0072 | 0.0072 |'
    """
    header = [*labels, estimate, "Bonferroni CI", "p", "Holm p"]
    parts = [r["label"] if isinstance(r["label"], tuple) else (r["label"],) for r in rows]
    body = [[*label, *family_cells(r, digits)] for label, r in zip(parts, rows, strict=True)]
    return markdown_table(header, body)


#: The markers around a generated table in a markdown file: ``<!-- report-table:NAME -->``
#: and ``<!-- /report-table:NAME -->`` (``NAME``: letters, digits, ``_``, ``.``, ``-``).
TABLE_MARKERS = ("<!-- report-table:{} -->", "<!-- /report-table:{} -->")
_MARKED = re.compile(
    r"^(?P<indent>[ \t]*)<!-- report-table:(?P<name>[\w.-]+) -->[ \t]*\n(?P<body>.*?)"
    r"^[ \t]*<!-- /report-table:(?P=name) -->[ \t]*$", re.M | re.S)  # fmt: skip
_OPENING = re.compile(r"^[ \t]*<!-- report-table:([\w.-]+) -->", re.M)


def marked_tables(tables: Mapping[str, str]) -> str:
    """Each table between its markers (:data:`TABLE_MARKERS`), a blank line around it: the
    text of a file that :func:`update_readme_tables` reads back unchanged.

    Parameters
    ----------
    tables : mapping
        Table name -> markdown.

    Returns
    -------
    str

    See Also
    --------
    update_readme_tables : puts the tables into a file that marks them.

    Examples
    --------
    >>> print(marked_tables({"t": "| a |\\n| --- |"}), end="")
    <!-- report-table:t -->
    <BLANKLINE>
    | a |
    | --- |
    <BLANKLINE>
    <!-- /report-table:t -->
    <BLANKLINE>
    """
    opening, closing = TABLE_MARKERS
    return "".join(
        f"{opening.format(k)}\n\n{v}\n\n{closing.format(k)}\n\n" for k, v in tables.items()
    )


def update_readme_tables(readme_path, tables: Mapping[str, str]) -> list[str]:
    """Replace each table between ``<!-- report-table:NAME -->`` and its closing marker by
    ``tables[NAME]``, indented as the marker; the rest is kept, the file rewritten only if
    a table changed.

    A README that includes a report's tables so holds them as the report rounded them: a
    number rounded by the report and then again by hand can land one unit off in its last
    digit (-0.8486 -> -0.85 -> -0.9).

    Parameters
    ----------
    readme_path : str or pathlib.Path
        The markdown file, e.g. ``paper_repro/nlp_pretrained/README.md``.
    tables : mapping
        Table name -> markdown (e.g. :func:`meanfield.studies.nlp_report.readme_tables`).

    Returns
    -------
    list of str
        The names of the marked tables, in the file's order.

    Raises
    ------
    meanfield.errors.InputError
        A marker not among ``tables``, or one not closed (nothing is written).

    See Also
    --------
    marked_tables : the tables between markers, as a report writes them.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "README.md"
    >>> text = "- item:\\n  <!-- report-table:t -->\\n  old\\n  <!-- /report-table:t -->\\n"
    >>> _ = path.write_text(text)
    >>> update_readme_tables(path, {"t": "| a |\\n| --- |"})
    ['t']
    >>> print(path.read_text())
    - item:
      <!-- report-table:t -->
    <BLANKLINE>
      | a |
      | --- |
    <BLANKLINE>
      <!-- /report-table:t -->
    <BLANKLINE>
    """
    path = Path(readme_path)
    text = path.read_text()
    found = [m.group("name") for m in _MARKED.finditer(text)]
    opened = _OPENING.findall(text)
    if opened != found:
        unclosed = ", ".join(sorted(set([n for n in opened if n not in found] or opened)))
        raise InputError(f"readme_path: {str(path)!r} opens report-table marker(s) {unclosed} "
                         "without the closing '<!-- /report-table:NAME -->' after it")  # fmt: skip
    if missing := [n for n in found if n not in tables]:
        raise InputError(f"tables: {str(path)!r} marks table(s) {', '.join(missing)} that are not "
                         f"among the tables given ({', '.join(tables) or 'none'})")  # fmt: skip
    opening, closing = TABLE_MARKERS

    def _replace(m: re.Match) -> str:
        ind, name = m.group("indent"), m.group("name")
        body = "\n".join(ind + line if line else line for line in tables[name].split("\n"))
        return f"{ind}{opening.format(name)}\n\n{body}\n\n{ind}{closing.format(name)}"

    if (new := _MARKED.sub(_replace, text)) != text:
        path.write_text(new)
    return found


def markdown_section(title: str, notes, table: list[str]) -> list[str]:
    """The lines of a markdown section: ``## title``, each of ``notes`` as a paragraph (a line
    and a blank line), then the lines of ``table``.

    Parameters
    ----------
    title : str
        The heading's text (after ``##`` and a space).
    notes : iterable of str
        The paragraphs between the heading and the table, in order.
    table : list of str
        The table's lines (:func:`markdown_table`, :func:`family_table`).

    Returns
    -------
    list of str

    See Also
    --------
    write_lines : writes the lines to a file.

    Examples
    --------
    >>> print("\\n".join(markdown_section("Errors", ["Mean over seeds."], markdown_table(["a"]))))
    ## Errors
    <BLANKLINE>
    Mean over seeds.
    <BLANKLINE>
    | a |
    |---|
    """
    return [f"## {title}", ""] + [line for note in notes for line in (note, "")] + table


def counts_cell(values) -> str:
    """The cell ``value: count, ...`` of ``values``: each distinct value with how often it
    occurs, ordered by the values' text (``str``), so mixed types sort too.

    Parameters
    ----------
    values : iterable of hashable
        The values (e.g. one CV choice per seed).

    Returns
    -------
    str
        ``""`` for no value.

    See Also
    --------
    mean_se : the cell of numbers summarised by their mean.

    Examples
    --------
    >>> counts_cell([2, 1, 2, "none"]), counts_cell([])
    ('1: 1, 2: 2, none: 1', '')
    """
    from collections import Counter

    counts = sorted(Counter(values).items(), key=lambda kv: str(kv[0]))
    return ", ".join(f"{k}: {v}" for k, v in counts)
