"""Sphinx extension: the parameter contract's tables and counts, computed at build time.

``.. contract-counts::`` prints how many entry points, parameters and generated cases
:mod:`meanfield.contract` declares (the numbers ``tests/test_contract_fuzz.py`` runs), and
``.. contract-tables::`` every declared entry point's parameter table, so the docs cannot
drift from the declarations.
"""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


class ContractCounts(SphinxDirective):
    """One paragraph with the generated counts."""

    def run(self):
        from meanfield.contract import generated_cases

        c = generated_cases()
        text = (
            f"The contract declares {c['parameters']} parameters of {c['entry_points']} "
            f"entry points; from them the test suite generates {c['invalid']} invalid "
            f"values (each refused by name before any work), {c['edge']} valid edge values "
            "(each accepted and converted) and, per parameter, 25 random invalid values "
            "(hypothesis)."
        )
        return [nodes.paragraph(text=text)]


class ContractTables(SphinxDirective):
    """The parameter table of every declared entry point."""

    def run(self):
        from meanfield.contract import registered

        lines = []
        for contract in registered().values():
            lines += [*contract.rst_table().splitlines(), ""]
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="contract"), 0, container)
        return container.children


def setup(app):
    app.add_directive("contract-counts", ContractCounts)
    app.add_directive("contract-tables", ContractTables)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
