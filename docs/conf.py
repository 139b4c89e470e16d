"""Sphinx configuration for the meanfield documentation.

Build from the repository root with one command (what CI runs)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The API reference is generated at build time by autosummary, grouped by part in
docs/api.rst: each top-level module is named there (tests/test_front_door.py checks that every
one is), each subpackage recursively, so a module added to a subpackage appears without
editing docs/.
The gallery (sphinx-gallery) redraws the committed results under ``figures/*.nc`` in seconds;
the notebooks under ``notebooks/`` are rendered with their stored outputs, never executed.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# Import the package from this checkout even when it is not installed (a clean clone).
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))
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
    # a bundled MathJax 3 (copied to _static/mathjax): the maths renders without a network
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_nb",
    "docstring_bars",  # docs/_ext: plain-text |z| in docstrings, foreign members skipped
    "contract_docs",  # docs/_ext: the parameter contract's tables and counts
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
