"""Sphinx configuration for the meanfield documentation.

Build from the repository root with one command (what CI runs)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The API reference is generated at build time by autosummary, recursively over the
``meanfield`` package, so a module that is added or moved appears without editing docs/.
The gallery (sphinx-gallery) redraws the committed results under ``figures/*.nc`` in seconds;
the notebooks under ``notebooks/`` are rendered with their stored outputs, never executed.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import sys
import unicodedata
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# Import the package from this checkout even when it is not installed (a clean clone).
sys.path.insert(0, str(ROOT))
# No display on CI: gallery scripts and any import of pyplot use the file backend.
os.environ.setdefault("MPLBACKEND", "Agg")

import meanfield  # noqa: E402

project = "meanfield"
author = "the meanfield developers"
copyright = "2026, the meanfield developers"  # noqa: A001
release = meanfield.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_nb",
]

templates_path = ["_templates"]
# sphinx-gallery writes a notebook beside each generated page; myst-nb must not read it.
exclude_patterns = [
    "_build",
    "Thumbs.db",
    ".DS_Store",
    "**.ipynb_checkpoints",
    "gallery",
    "auto_examples/*.ipynb",
]
source_suffix = {".rst": "restructuredtext", ".ipynb": "myst-nb", ".md": "myst-nb"}
root_doc = "index"
default_role = "py:obj"

html_theme = "furo"
html_title = f"meanfield {release}"
html_static_path: list[str] = []

# --- API reference ----------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "inherited-members": False, "show-inheritance": True}
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
autodoc_member_order = "bysource"
# numpydoc renders the sections; class member tables come from the autosummary templates,
# and no numpydoc validation check is enforced at build time (tests/test_docstring_examples.py
# holds the modules whose docstrings are complete to the stricter standard).
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

# --- notebooks (myst-nb): render the stored outputs, never execute -----------------------
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
# Notebooks use one markdown heading per section; relative file links in them point into the
# repository, which the site does not contain.
suppress_warnings = ["myst.header", "myst.xref_missing", "mystnb.unknown_mime_type"]

# --- gallery: redraw the committed figure data ------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "gallery",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "reset_modules": ("matplotlib",),
    "min_reported_time": 1,
    "show_memory": False,
}


# --- docstrings: plain-text formulas -----------------------------------------------------
# The package writes formulas in its prose as plain Unicode (|z|, |ω|², ‖x‖), which
# reStructuredText reads as substitution references ("|z|"). Escape a bar that is prose, and
# leave alone the bars of math, literals, roles, tables and code.
_PROTECTED = re.compile(r"(``.+?``|:[\w:.-]+:`[^`]*`|`[^`]*`_{0,2})")
_BLOCK_START = re.compile(
    r"^(\s*)(\.\. (math|code-block|code|sourcecode|highlight|doctest)::|.*::\s*$)"
)


def _escape_bars_in_line(line: str) -> str:
    parts = _PROTECTED.split(line)
    for i in range(0, len(parts), 2):  # even indices are outside the protected spans
        parts[i] = re.sub(r"(?<!\\)\|", r"\\|", parts[i])
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


def setup(app) -> None:
    # after numpydoc (priority 500), so the lines are the final reStructuredText
    app.connect("autodoc-process-docstring", _process_docstring, priority=900)
    app.connect("autodoc-skip-member", _skip_foreign_member)


def _copy_notebooks() -> None:
    """Mirror ``notebooks/*.ipynb`` into ``docs/notebooks`` (ignored by git).

    Sphinx reads sources only under its source directory; the copy is refreshed on every
    build so the rendered pages follow the committed notebooks.
    """
    target = DOCS / "notebooks"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copy2(nb, target / nb.name)


_copy_notebooks()
