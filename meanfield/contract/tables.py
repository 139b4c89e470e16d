"""The parameter tables of the documentation, written from a contract.

:meth:`Contract.rst_table <meanfield.contract.Contract.rst_table>` writes one entry point's
parameters as a reStructuredText list-table, a row per parameter
(:meth:`Param.rst_row <meanfield.contract.Param.rst_row>`); ``.. contract-tables::``
(docs/_ext/contract_docs.py) prints every registered entry point's when the docs are built.
Both functions are methods, bound in the class bodies of :mod:`meanfield.contract.params`;
this module imports nothing from ``params`` and receives the ``Param`` or ``Contract`` as
``self``.
"""

from __future__ import annotations

import re

from .kinds import REQUIRED


def _rst_text(text: str) -> str:
    """Plain text as reStructuredText: the inline markup characters (``*``, ``|``, a
    backquote, a backslash, a word's trailing ``_``) escaped, so a doc line such as
    "|omega|^2/2" prints as written (docs are built with warnings as errors).

    Examples
    --------
    >>> print(_rst_text("alpha*T, |omega|^2/2, H_N, n_"))
    alpha\\*T, \\|omega\\|^2/2, H_N, n\\_
    """
    text = re.sub(r"([*|`\\])", r"\\\1", text)
    return re.sub(r"(\w)_(?=\W|$)", r"\1\\_", text)


def rst_row(self, default=REQUIRED) -> str:
    """One row of :meth:`Contract.rst_table`.

    See Also
    --------
    meanfield.contract.Contract.rst_table : the whole table.

    Examples
    --------
    >>> print(Param("on", "flag", "a switch").rst_row(default=False))
       * - ``on``
         - True or False
         - ``False``
         - a switch
    """
    units = f" [{self.units}]" if self.units else ""
    dflt = "required" if default is REQUIRED else f"``{default!r}``"
    none = self.optional and self.kind != "flag"  # a flag's allowed() says it
    allowed = self.allowed() + (", or None" if none else "")
    doc = _rst_text(self.doc)
    return f"   * - ``{self.name}``\n     - {allowed}{units}\n     - {dflt}\n     - {doc}"


def rst_table(self) -> str:
    """The parameter table of the docs (a reStructuredText list-table).

    See Also
    --------
    meanfield.contract.Contract.help_text : the same as a flag's help.
    meanfield.workbench.study_settings.declare_settings : a study's settings, tabled too.

    Examples
    --------
    >>> print(Contract("demo:f", [Param("n", "int", "count", low=1)]).rst_table())
    .. list-table:: ``demo:f``
       :header-rows: 1
    <BLANKLINE>
       * - parameter
         - allowed
         - default
         - meaning
       * - ``n``
         - an integer >= 1
         - required
         - count
    """
    head = (
        f".. list-table:: ``{self.entry}``\n   :header-rows: 1\n\n"
        "   * - parameter\n     - allowed\n     - default\n     - meaning"
    )
    rows = [p.rst_row(self.defaults.get(p.name, REQUIRED)) for p in self.params]
    return "\n".join([head, *rows])
