"""The docs extension that lets plain-text formulas (|z|, |ω|²) through reStructuredText.

The truth is docutils itself: the escaped docstring must parse without a single system
message, and the rendered text must still show the bars (and math must keep them raw).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

docutils_core = pytest.importorskip("docutils.core")

_PATH = Path(__file__).parents[1] / "docs" / "_ext" / "docstring_bars.py"
_spec = importlib.util.spec_from_file_location("docstring_bars", _PATH)
bars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bars)


def _parse(text: str):
    """Doctree and the system messages docutils reported (none expected)."""
    doctree = docutils_core.publish_doctree(
        text, settings_overrides={"report_level": 5, "halt_level": 5}
    )
    nodes = doctree.findall() if hasattr(doctree, "findall") else doctree.traverse()
    messages = [n for n in nodes if n.tagname == "system_message"]
    return doctree, messages


DOC = """Energy |z|^(-s) of the pair, and |ω|² / 2 for the potential.

.. math::

    k(z) = |z|^{-s}

A role :math:`|x|` and a literal ``a|b`` keep their bars; a grid of ``cells``³ cells.

========  ==================  =========
name      φ                   c(x)
========  ==================  =========
positive  exp(ωᵀx − |x|²/2)   −|x|²/2
fourier   √2 cos(ωᵀx̃ + b)    0
========  ==================  =========

>>> abs(-2)  # |x| in a doctest
2
"""


def test_raw_docstring_is_broken_without_the_extension():
    # the premise: plain docutils reads |z| as a substitution and complains
    _, messages = _parse(DOC)
    assert messages


def test_escaped_docstring_parses_cleanly_and_keeps_the_bars():
    escaped = "\n".join(bars.escape_prose_bars(DOC.splitlines()))
    doctree, messages = _parse(escaped)
    assert not messages, [m.astext() for m in messages]
    text = doctree.astext()
    assert "|z|^(-s)" in text and "|ω|²" in text
    assert "k(z) = |z|^{-s}" in text  # the math block, raw
    assert "exp(ωᵀx − |x|²/2)" in text  # the table cell, after re-alignment
    assert "# |x| in a doctest" in text
    assert "cells³ cells" in text  # the literal closed before the superscript
    assert "\\|" not in text  # every escape was consumed by docutils


def test_lines_without_bars_are_unchanged():
    lines = ["Parameters", "----------", "x : float", "    A value."]
    assert bars.escape_prose_bars(lines) == lines


def test_unterminated_table_is_left_for_docutils():
    lines = ["=====  =====", "a      |b|"]
    assert bars.escape_prose_bars(lines)[0] == lines[0]
