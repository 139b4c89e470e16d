"""The front door (issue 21): ``import meanfield as mf`` gives the main entry points of every
part, each the very object of its home module, while ``import meanfield`` stays lazy."""

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import meanfield

ROOT = Path(__file__).resolve().parents[1]
NAMES = [n for n in meanfield.__all__ if n != "__version__"]
MODULES = {m.name for m in pkgutil.iter_modules(meanfield.__path__) if not m.name.startswith("_")}


def _fresh(code: str) -> str:
    """stdout of ``code`` in a fresh interpreter that imports this checkout's meanfield."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_all_is_the_homes_and_the_namespaces_without_repeats():
    assert len(meanfield.__all__) == len(set(meanfield.__all__))
    # curated: the main entry points of each part (52 with the model's plain-data description,
    # to_dict / from_dict), not every public name
    assert 25 <= len(NAMES) <= 52
    named = set(meanfield._HOME_OF)
    assert named | (set(NAMES) & MODULES) == set(NAMES), "a name of __all__ has no home"
    assert named <= set(NAMES), "a home is given for a name missing from __all__"


@pytest.mark.parametrize("name", sorted(meanfield._HOME_OF))
def test_each_name_is_the_object_of_its_home_module(name):
    home = meanfield._HOME_OF[name]
    obj = getattr(meanfield, name)
    assert obj is getattr(importlib.import_module(home), name)
    if inspect.isclass(obj) or inspect.isfunction(obj):
        assert obj.__module__ == home, f"{name} is defined in {obj.__module__}, not {home}"


def test_no_name_hides_a_module_of_the_package():
    """``import meanfield.x`` sets the attribute ``x`` of the package to the module: a
    front-door name spelled like a module would be the function or the module depending on
    what was imported first."""
    assert not set(meanfield._HOME_OF) & MODULES


@pytest.mark.parametrize("name", sorted(set(NAMES) & MODULES))
def test_namespaces_are_the_modules(name):
    assert getattr(meanfield, name) is importlib.import_module(f"meanfield.{name}")


def test_the_main_entry_points_are_where_the_issue_names_them():
    mf = meanfield
    assert mf.pde.solve is mf.solve and mf.pde.McKeanVlasov is mf.McKeanVlasov
    assert mf.workbench.sweeps.run_sweep is mf.run_sweep
    assert mf.dynamics.langevin.sample_hmc is mf.sample_hmc is mf.dynamics.hmc.sample_hmc
    assert mf.attention.linearize.linearize is mf.linearize
    assert mf.workbench.compare.compare.__module__ == "meanfield.workbench.compare"
    assert mf.ot.w2 is mf.ot.distance.w2 and mf.ot.wasserstein is mf.wasserstein
    assert mf.ot.Measure is mf.Measure is mf.ot.measure.Measure


def test_every_module_is_an_attribute_loaded_on_first_use():
    out = _fresh(
        "import sys, meanfield as mf\n"
        "assert 'meanfield.ot.sparse' not in sys.modules\n"
        "print(mf.ot.sparse.__name__, 'meanfield.ot.sparse' in sys.modules)\n"
    )
    assert out.split() == ["meanfield.ot.sparse", "True"]


def test_import_meanfield_imports_no_torch_and_no_package_module():
    out = _fresh(
        "import sys, meanfield\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('meanfield.')))\n"
    )
    # the version only: nothing heavy
    assert out.strip() == "['meanfield._version']"


def test_a_name_imports_only_what_it_needs():
    out = _fresh(
        "import sys, meanfield as mf\n"
        "mf.run_sweep\n"
        "print('torch' in sys.modules, 'meanfield.workbench.sweeps' in sys.modules)\n"
    )
    assert out.split() == ["False", "True"]


def test_an_unknown_attribute_raises_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="'no_such_thing'"):
        meanfield.no_such_thing  # noqa: B018
    with pytest.raises(AttributeError, match="'_private'"):
        meanfield._private  # noqa: B018
    assert getattr(meanfield, "__test__", None) is None  # doctest's probe finds nothing
    with pytest.raises(AttributeError, match="'no_such_thing'"):
        meanfield.attention.no_such_thing  # noqa: B018


def test_dir_lists_the_names_and_the_modules():
    listed = dir(meanfield)
    assert set(meanfield.__all__) <= set(listed)
    assert MODULES <= set(listed)
    assert listed == sorted(listed)


def test_star_import_gives_every_name():
    space: dict = {}
    exec("from meanfield import *", space)  # noqa: S102
    assert set(meanfield.__all__) <= set(space)


def test_the_api_page_lists_every_name_at_its_home():
    page = (ROOT / "docs" / "api.rst").read_text()
    missing = [f"{home}.{n}" for n, home in meanfield._HOME_OF.items() if f"{home}.{n}" not in page]
    assert not missing, f"docs/api.rst does not list the front-door names {missing}"


def test_the_api_page_lists_every_module_of_the_package():
    """The page lists the top-level modules part by part (the subpackages recursively), so a
    new top-level module must be given its section."""
    page = (ROOT / "docs" / "api.rst").read_text()
    missing = [m for m in sorted(MODULES) if f"\n   meanfield.{m}\n" not in page]
    assert not missing, f"docs/api.rst lists no section for the modules {missing}"


def test_module_paths_of_earlier_layouts_are_not_found():
    """0.1.0 is the first release: a module path of the flat layout before the wing packages
    (``meanfield.particles``, now ``meanfield.dynamics.langevin``) is not a module."""
    with pytest.raises(ModuleNotFoundError, match="meanfield.particles"):
        importlib.import_module("meanfield.particles")
    with pytest.raises(AttributeError, match="'sweeps'"):
        meanfield.sweeps  # noqa: B018
    assert not (ROOT / "meanfield" / "_deprecation.py").exists()
