"""The README's Python example runs as written (issue 21: every README command still works)."""

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the example ends with a plot; no display in tests

README = Path(__file__).parents[1] / "README.md"


def test_the_readme_python_example_runs_and_learns():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1, "the README holds one Python example"
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # noqa: S102 - our own README
    ds = namespace["ds"]
    assert ds.omega.shape[1:] == (256, 3)  # (time, particle, dim) as the comment says
    assert ds.attrs["seed"] == 0 and "meanfield_version" in ds.attrs
    alignment = ds["energy_alignment"].values
    # -A(mu) on two moons from a prior draw: the dynamics at beta = 1e3 climb the alignment,
    # so the alignment energy falls (by far more than the O(1/sqrt(N)) noise of the start)
    assert alignment[-1] < alignment[0]
