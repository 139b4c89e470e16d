"""Sphinx extension: plain-text formulas in docstrings, and members other libraries define.

The package writes formulas in its prose as plain Unicode (|z|, |ω|², ‖x‖), which
reStructuredText reads as substitution references ("|z|"). :func:`escape_prose_bars` escapes
a bar that is prose and leaves alone the bars of math, literals, roles, tables and code; the
extension applies it to every docstring after numpydoc has turned it into reStructuredText.
"""

from __future__ import annotations

import inspect
import re
import unicodedata

_PROTECTED = re.compile(r"(``.+?``|:[\w:.-]+:`[^`]*`|`[^`]*`_{0,2})")
_BLOCK_START = re.compile(
    r"^(\s*)(\.\. (math|code-block|code|sourcecode|highlight|doctest)::|.*::\s*$)"
)


_CLOSING_OK = set(" \t-.,:;!?\\/'\")]}>")


def _may_follow_markup(ch: str) -> bool:
    """Whether docutils accepts ``ch`` right after an inline end-string (``x``, `y`)."""
    return ch in _CLOSING_OK or unicodedata.category(ch) in ("Pd", "Po", "Pe", "Pf", "Pi")


def _escape_bars_in_line(line: str) -> str:
    """Escape prose bars; glue a literal or role to a following letter (``n``³, ``x``ᵢ).

    docutils ends inline markup only before whitespace or punctuation, so ``cells``³ would
    leave the literal open; an escaped space (which renders as nothing) closes it.
    """
    parts = _PROTECTED.split(line)
    for i in range(0, len(parts), 2):  # even indices are outside the protected spans
        parts[i] = re.sub(r"(?<!\\)\|", r"\\|", parts[i])
        if i > 0 and parts[i] and not _may_follow_markup(parts[i][0]):
            parts[i] = "\\ " + parts[i]
    return "".join(parts)


_TABLE_BORDER = re.compile(r"^\s*=+( +=+)+\s*$")


def _width(text: str) -> int:
    """Display columns of ``text`` as docutils counts them (combining marks take none)."""
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def _split_columns(row: str, starts: list[int]) -> list[str]:
    """Cut ``row`` at the display columns ``starts`` (the last cell runs to the end)."""
    cells, col, current = [], 0, []
    bounds = starts[1:]
    for ch in row:
        if bounds and col >= bounds[0] and not unicodedata.combining(ch):
            cells.append("".join(current))
            current, bounds = [], bounds[1:]
        current.append(ch)
        col += _width(ch)
    cells.append("".join(current))
    cells += [""] * (len(starts) - len(cells))
    return [c.rstrip() for c in cells]


def _escape_simple_table(rows: list[str]) -> list[str]:
    """Escape prose bars cell by cell in a simple table and widen the columns to fit.

    ``rows`` runs from the top border to the bottom border; column spans come from the top
    border, the last column extending to the end of each line.
    """
    spans = [m.span() for m in re.finditer(r"=+", rows[0])]
    indent = rows[0][: spans[0][0]]
    starts = [s for s, _ in spans]
    cells = [
        None
        if _TABLE_BORDER.match(row)
        else [_escape_bars_in_line(c.strip()) for c in _split_columns(row, starts)]
        for row in rows
    ]
    widths = [e - s for s, e in spans]
    for row_cells in cells:
        for i, text in enumerate(row_cells or []):
            widths[i] = max(widths[i], _width(text))
    out = []
    for row_cells in cells:
        if row_cells is None:
            out.append(indent + "  ".join("=" * w for w in widths))
        else:
            padded = (t + " " * (w - _width(t)) for t, w in zip(row_cells, widths, strict=True))
            out.append((indent + "  ".join(padded)).rstrip())
    return out


def escape_prose_bars(lines: list[str]) -> list[str]:
    """Escape ``|`` in the prose of a docstring (RST lines) so it is not a substitution.

    Parameters
    ----------
    lines : list of str
        The docstring's lines after numpydoc's conversion to reStructuredText.

    Returns
    -------
    list of str
        The same lines with prose bars written ``\\|`` (simple tables re-aligned to fit);
        lines of math, literal and code blocks, doctest blocks, grid tables and line blocks
        are returned unchanged.
    """
    out: list[str] = []
    block_indent: int | None = None  # indentation of the directive that opened a block
    in_doctest = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        i += 1
        if block_indent is not None:
            if stripped and indent <= block_indent:
                block_indent = None
            else:
                out.append(line)
                continue
        if _TABLE_BORDER.match(line):
            # a simple table ends at a border followed by a blank line or the end
            end = i
            while end < len(lines) and not (
                _TABLE_BORDER.match(lines[end])
                and (end + 1 == len(lines) or not lines[end + 1].strip())
            ):
                end += 1
            if end < len(lines):
                out.extend(_escape_simple_table(lines[i - 1 : end + 1]))
                i = end + 1
                continue
        if stripped.startswith(">>>"):
            in_doctest = True
        elif not stripped:
            in_doctest = False
        grid_row = stripped[:1] in "|+" and stripped[-1:] in "|+"
        if in_doctest or grid_row or not stripped:
            out.append(line)
            continue
        out.append(_escape_bars_in_line(line))
        if _BLOCK_START.match(line):
            block_indent = indent
    return out


def _process_docstring(app, what, name, obj, options, lines) -> None:
    lines[:] = escape_prose_bars(lines)


def _skip_foreign_member(app, what, name, obj, skip, options):
    """Skip what another library defines: methods a base class attaches (scikit-learn's
    ``set_fit_request``, whose docstring cross-references that library's glossary) and
    classes or functions a module merely imports (``scipy.spatial.cKDTree``)."""
    module = getattr(obj, "__module__", None) or ""
    foreign = bool(module) and not module.startswith("meanfield")
    if what == "class" and callable(obj) and foreign:
        return True
    if what == "module" and (inspect.isclass(obj) or inspect.isroutine(obj)) and foreign:
        return True
    return None


def setup(app) -> dict:
    # after numpydoc (priority 500), so the lines are the final reStructuredText
    app.connect("autodoc-process-docstring", _process_docstring, priority=900)
    app.connect("autodoc-skip-member", _skip_foreign_member)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
