"""Start-up (issue 23): ``import meanfield`` and ``meanfield --help`` load none of the heavy
dependencies; they load where first used.  Checked on ``sys.modules`` in a fresh interpreter,
not timed (benchmarks/bench_startup.py measures the times)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "xarray", "dask", "distributed", "ot", "scipy", "matplotlib", "pandas")
HEAVY += ("transformers", "sklearn", "numba", "tqdm")


def _loaded(code: str) -> list[str]:
    """The heavy modules in ``sys.modules`` after ``code`` runs in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return [m for m in out.stdout.rstrip("\n").split("\n")[-1].split(",") if m]


def test_import_meanfield_loads_no_heavy_dependency():
    assert _loaded("import meanfield") == []


def test_every_help_of_the_command_line_loads_no_heavy_dependency():
    helps = [[], ["simulate"], ["compare"], ["figures"], ["study"], ["study", "equilibrium"]]
    helps += [["study", k] for k in ("particles-vs-grid", "beta", "t-decay")]
    code = (
        "import contextlib, io\n"
        "from meanfield.cli import main\n"
        f"for argv in {helps!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()) as text:\n"
        "        try:\n"
        "            main([*argv, '--help'])\n"
        "        except SystemExit as e:\n"
        "            assert e.code == 0, (argv, e.code)\n"
        "    assert 'usage: meanfield' in text.getvalue(), argv\n"
    )
    assert _loaded(code) == []


def test_the_configuration_module_loads_torch_only_when_used():
    assert _loaded("import meanfield.workbench.config") == []
    code = (
        "from meanfield.workbench.config import CONFIG_METHODS, SimulationConfig\n"
        "assert CONFIG_METHODS == ('langevin', 'mala', 'hmc'), CONFIG_METHODS\n"
        "SimulationConfig(n_particles=4)\n"
    )
    assert "torch" in _loaded(code)  # validation names the kernels and regimes of torch modules


def test_pot_is_imported_only_by_a_transport_solve():
    """POT loads optional backends (jax: about 1 s of the main job's start-up): the particle
    dynamics, the grid and the comparison modules import it only when a distance is solved."""
    code = "import meanfield.workbench.compare, meanfield.dynamics.langevin, meanfield.ot"
    assert "ot" not in _loaded(code)
    solve = (
        "import meanfield as mf\n"
        "mf.ot.w2(mf.Measure([[0.0, 0.0], [1.0, 0.0]]), mf.Measure([[0.0, 1.0]]), "
        "method='exact')\n"
    )
    assert "ot" in _loaded(solve)
