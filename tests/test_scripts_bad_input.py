"""Every script of benchmarks/ and paper_repro/synthetic/ refuses bad input as a new user would
type it (negative or zero sizes, unknown names, a file where a folder is expected, a missing
file or folder, text where a number is expected): one ``<script>: error: ...`` line naming the
flag and what it allows, exit status 2, no traceback, and nothing run or written -- before any
heavy import (each case takes a fraction of a second)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT_DIRS = ("benchmarks", "paper_repro/synthetic")

#: (script, arguments, the flag the message names); {file}: an existing file, {missing}: a
#: path that does not exist, {dir}: an existing folder without the expected content.
CASES = [
    ("benchmarks/bench_attention.py", ["--features", "0"], "--features"),
    ("benchmarks/bench_attention.py", ["--heads", "3"], "--embed-dim"),
    ("benchmarks/bench_attention.py", ["--device", "tpu"], "--device"),
    ("benchmarks/bench_attention.py", ["--out", "{file}"], "--out"),
    ("benchmarks/bench_attention.py", ["--max-len", "64"], "--max-len"),
    ("benchmarks/bench_fastsums.py", ["--max-n", "10"], "--max-n"),
    ("benchmarks/bench_fastsums.py", ["--eps", "nan"], "--eps"),
    ("benchmarks/bench_fastsums.py", ["--threads", "x"], "--threads"),
    ("benchmarks/bench_near_field_symmetric.py", ["--sizes", "10"], "--sizes"),
    ("benchmarks/bench_near_field_symmetric.py", ["--repeats", "0"], "--repeats"),
    ("benchmarks/bench_near_field_symmetric.py", ["--out", "{file}"], "--out"),
    ("benchmarks/bench_hmc.py", ["--budget", "-1"], "--budget"),
    ("benchmarks/bench_hmc_blackjax.py", ["--n", "1"], "--n"),
    ("benchmarks/bench_pretrained_long.py", ["--lengths", "0"], "--lengths"),
    ("benchmarks/bench_pretrained_long.py", ["--model-dir", "{missing}"], "--model-dir"),
    ("benchmarks/bench_pretrained_long.py", ["--out", "{file}"], "--out"),
    ("benchmarks/bench_hmc_blackjax.py", ["--replicas", "0"], "--replicas"),
    ("benchmarks/bench_hmc_blackjax.py", ["--out", "{file}"], "--out"),
    ("benchmarks/bench_hmc.py", ["--cases", "nope"], "--cases"),
    ("benchmarks/bench_hmc.py", ["--target-accept", "1"], "--target-accept"),
    ("benchmarks/bench_hmc.py", ["--n", "0"], "--n"),
    ("benchmarks/bench_learners.py", ["--repeats", "0"], "--repeats"),
    ("benchmarks/bench_learners.py", ["--out", "{file}"], "--out"),
    ("benchmarks/bench_pairs.py", ["--sections", "pairs,nope"], "--sections"),
    ("benchmarks/bench_pairs.py", ["--N", "1"], "--N"),
    ("benchmarks/bench_pairs.py", ["--tiles", "0,64"], "--tiles"),
    ("benchmarks/bench_pairs.py", ["--name", "a/b"], "--name"),
    ("benchmarks/bench_particles.py", ["--repeats", "-1"], "--repeats"),
    ("benchmarks/bench_particles.py", ["--out", "{file}/sub"], "--out"),
    ("benchmarks/bench_pde.py", ["--sections", "4"], "--sections"),
    ("benchmarks/bench_pde.py", ["--sizes3d", "2"], "--sizes3d"),
    ("benchmarks/bench_pde.py", ["--emd-timeout", "0"], "--emd-timeout"),
    ("benchmarks/bench_causal_backward.py", ["--repeats", "0"], "--repeats"),
    ("benchmarks/bench_causal_backward.py", ["--lengths", "0"], "--lengths"),
    ("benchmarks/bench_causal_backward.py", ["--out", "{file}"], "--out"),
    ("benchmarks/bench_samplers_ess.py", ["--replicas", "1"], "--replicas"),
    ("benchmarks/bench_samplers_ess.py", ["--cases", "3d"], "--cases"),
    ("benchmarks/bench_samplers_ess.py", ["--samplers", "mala,nuts"], "--samplers"),
    ("benchmarks/bench_samplers_ess.py", ["--seed", "-1"], "--seed"),
    ("benchmarks/bench_samplers_ess.py", ["--out", "{file}"], "--out"),
    ("benchmarks/bench_startup.py", ["--repeats", "0"], "--repeats"),
    ("benchmarks/bench_startup.py", ["--out", "{file}"], "--out"),
    ("benchmarks/bench_studies.py", ["--out", "{file}"], "--out"),
    ("benchmarks/bench_studies.py", ["--bogus"], "--bogus"),
    ("benchmarks/bench_w2.py", ["--repeats", "0"], "--repeats"),
    ("benchmarks/bench_w2.py", ["--cache", "{file}"], "--cache"),
    ("benchmarks/ldp_large_n.py", ["--n-particles", "1"], "--n-particles"),
    ("benchmarks/ldp_large_n.py", ["--figure-data", "{missing}"], "--figure-data"),
    ("benchmarks/ldp_large_n.py", ["--figure-data", "{dir}"], "--figure-data"),
    ("paper_repro/synthetic/sanity_sklearn.py", ["--out", "{missing}"], "--out"),
    ("paper_repro/synthetic/sanity_sklearn.py", ["--out", "{dir}"], "--out"),
]


def _scripts() -> set[str]:
    """Every runnable script (with a ``__main__`` block) of the script folders."""
    found = set()
    for folder in SCRIPT_DIRS:
        for path in (ROOT / folder).glob("*.py"):
            if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8"):
                found.add(path.relative_to(ROOT).as_posix())
    return found


def test_every_script_has_bad_input_cases():
    assert _scripts() == {script for script, _, _ in CASES}


@pytest.mark.parametrize(("script", "args", "flag"), CASES, ids=lambda x: str(x))
def test_bad_input_is_one_line_exit_2_before_any_work(script, args, flag, tmp_path):
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("not a folder\n")
    (tmp_path / "empty_dir").mkdir()
    subs = {
        "{file}": str(a_file),
        "{missing}": str(tmp_path / "missing"),
        "{dir}": str(tmp_path / "empty_dir"),
    }
    for token, value in subs.items():
        args = [a.replace(token, value) for a in args]
    bench_out = tmp_path / "bench-out"  # the benchmarks' default --out: nothing may appear
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "MEANFIELD_BENCH_OUT": str(bench_out),
    }
    out = subprocess.run(
        [sys.executable, str(ROOT / script), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    name = Path(script).name
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if ": error:" in line]
    assert len(errors) == 1, out.stderr
    assert errors[0].startswith(f"{name}: error: ") and flag in errors[0], errors[0]
    assert out.stderr.rstrip().splitlines()[-1] == errors[0]  # the last line says it
    assert out.stdout == ""  # nothing ran
    assert not bench_out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file.txt", "empty_dir"]
