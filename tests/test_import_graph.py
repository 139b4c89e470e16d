"""The package's import graph has no cycle, and its wings are layered.

Every ``from .x import``, ``from ..x import``, ``from meanfield.x import`` and
``import meanfield.x`` of every module is read with :mod:`ast`, at module level and inside
functions alike (an import inside a function only moves a cycle to call time; it does not
remove it), and so are the re-exports that a module-level ``__getattr__`` (PEP 562) resolves
on first access, and the front door's lazy names (``meanfield._HOMES``).

The graph must be acyclic twice: between modules (``meanfield.pde.schemes`` is one node), and
between the package's top-level parts (``meanfield.pde.*`` and ``meanfield.studies.*`` each
collapsed into one node). A lower module never imports a higher one: shared pieces move
down (``meanfield.dynamics.chains`` under ``langevin`` and ``hmc``, ``meanfield.stats`` under
``compare`` and the studies), and a name that moved keeps no former address.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import meanfield

PACKAGE = Path(meanfield.__file__).resolve().parent

#: Re-exports of names that moved to a module that builds on their former one, resolved by a
#: PEP 562 ``__getattr__``. The first release keeps none: a lower module never imports a
#: higher one, and the tests below fail on any such edge.
COMPAT: dict[tuple[str, str], str] = {}


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _edges(module: str, path: Path) -> dict[str, str]:
    """{imported meanfield module: "import" or "__getattr__"} of one module's source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, str] = {}

    def add(target: str, how: str) -> None:
        if target.split(".")[0] == "meanfield" and target != module:
            found[target] = "import" if found.get(target) == "import" else how

    def visit(node: ast.AST, how: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = how
            if isinstance(child, ast.FunctionDef) and node is tree and child.name == "__getattr__":
                inner = "__getattr__"
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                for alias in child.names:  # ``from . import x`` imports the module x
                    sub = f"{target}.{alias.name}"
                    add(sub if sub in MODULES else target, inner)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name, inner)
            visit(child, inner)

    visit(tree, "import")
    return found


def _graph() -> dict[str, dict[str, str]]:
    graph = {m: _edges(m, p) for m, p in MODULES.items()}
    for home in meanfield._HOMES:  # the front door imports each home on first access
        graph["meanfield"].setdefault(home, "__getattr__")
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return path[path.index(w) :] + [w]
            if w not in state and (found := dfs(w)):
                return found
        state[v] = 2
        path.pop()
        return None

    for v in sorted(graph):
        if v not in state and (found := dfs(v)):
            return found
    return None


def _top(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _collapsed(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        out.setdefault(_top(a), set()).update(_top(b) for b in targets if _top(b) != _top(a))
    return out


def _without_compat(graph) -> dict[str, set[str]]:
    return {a: {b for b in t if (a, b) not in COMPAT} for a, t in graph.items()}


def test_every_import_names_a_module_of_the_package():
    """The parser resolves what it reads (a typo here would hide an edge)."""
    unknown = {(a, b) for a, t in _graph().items() for b in t if b not in MODULES}
    assert not unknown


@pytest.mark.parametrize("granularity", ["modules", "top-level parts"])
def test_no_import_cycle(granularity):
    graph = _without_compat(_graph())
    if granularity != "modules":
        graph = _collapsed(graph)
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_compatibility_re_exports_are_lazy_and_still_needed():
    """Each listed edge exists and only as a ``__getattr__`` re-export (an eager import, or
    a listed edge that no longer exists, fails)."""
    graph = _graph()
    for (a, b), why in COMPAT.items():
        assert graph[a].get(b) == "__getattr__", (a, b, why)


def test_the_shared_pieces_sit_low():
    """What MALA and HMC share, the statistics and the version import (almost) nothing."""
    graph = _graph()
    low = {"meanfield._validation", "meanfield.energy", "meanfield.errors", "meanfield.results"}
    low |= {m for m in MODULES if m.startswith("meanfield.energy.")}
    low |= {"meanfield.dynamics.chain_checks"}
    assert set(graph["meanfield.dynamics.chains"]) <= low
    assert set(graph["meanfield.stats"]) <= {
        "meanfield._arrays",
        "meanfield._validation",
        "meanfield.contract",
        "meanfield.errors",
    }
    assert set(graph["meanfield._arrays"]) == set()  # a leaf: numpy only
    contract = {m for m in MODULES if m.split(".")[:2] == ["meanfield", "contract"]}
    assert {"meanfield.contract", "meanfield.contract.params"} <= contract  # the package
    outside = {b for m in contract for b in graph[m]} - contract
    assert outside == {"meanfield._validation", "meanfield.errors"}
    assert set(graph["meanfield._version"]) == set()
    assert "meanfield.dynamics.langevin" not in graph["meanfield.dynamics.hmc"]
    assert not {
        m for m in graph["meanfield.workbench.compare"] if m.startswith("meanfield.studies")
    }


def test_no_module_imports_the_front_door():
    """The front door imports every part lazily; a part that imported the package itself
    (``from . import __version__``) would close a cycle through it (the version lives in
    ``meanfield._version``)."""
    users = sorted(m for m, targets in _graph().items() if "meanfield" in targets)
    assert not users


#: the wing packages, lowest first: a wing imports only wings before it and the top level;
#: ``testing`` (the public contract checks, one module) sits above every wing, since
#: check_scheme runs the grid solver of ``pde`` and nothing in the package imports it
WINGS = ["pde", "dynamics", "ot", "learners", "attention", "workbench", "studies", "cli", "testing"]


def test_wings_import_only_what_lies_below_them():
    """The layering of docs/architecture.rst: the top-level modules (the model and the shared
    pieces) import no wing except through a listed compatibility re-export, and each wing
    imports only wings below it in :data:`WINGS`."""

    def wing(module: str) -> str | None:
        if module == "meanfield.__main__":  # ``python -m meanfield`` is the command line
            return "cli"
        part = module.split(".")[1] if module.count(".") else None
        return part if part in WINGS else None

    bad = []
    for a, targets in _graph().items():
        for b, how in targets.items():
            if how == "__getattr__" or wing(b) is None or wing(a) == wing(b):
                continue
            if wing(a) is None or WINGS.index(wing(b)) > WINGS.index(wing(a)):
                bad.append((a, b))
    assert not bad, f"imports against the layering: {bad}"


def test_at_most_fourteen_public_top_level_modules():
    """The top level keeps the model's nouns and the shared pieces (statistics, results,
    errors, the parameter contract, the public contract checks: 14 at most, underscore
    modules aside); everything else lives in a wing package."""
    top = sorted(m for m in MODULES if m.count(".") == 1 and not m.split(".")[1].startswith("_"))
    modules = [m for m in top if not (PACKAGE / m.split(".")[1]).is_dir()]
    assert len(modules) <= 14, modules


def _code_lines(path: Path) -> int:
    """Lines of code: not blank, not a comment, not inside a docstring."""
    source = path.read_text()
    docstring_lines = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            docstring_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(
        1
        for i, line in enumerate(source.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#") and i not in docstring_lines
    )


def test_no_module_over_800_lines_of_code():
    """Issue 21: small modules with one job each (docstrings and comments aside)."""
    sizes = {str(p.relative_to(PACKAGE)): _code_lines(p) for p in PACKAGE.rglob("*.py")}
    assert max(sizes.values()) > 300  # the count sees code (the largest module is ~650)
    assert {m: n for m, n in sizes.items() if n > 800} == {}


def test_no_module_over_1000_physical_lines():
    """No module of the package over 1000 lines, docstrings and comments included (the
    house limit: a module a reader can hold whole)."""
    sizes = {
        p.relative_to(PACKAGE).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in PACKAGE.rglob("*.py")
    }
    assert max(sizes.values()) > 900  # the count sees whole files (the largest are ~1000)
    assert {m: n for m, n in sizes.items() if n > 1000} == {}
