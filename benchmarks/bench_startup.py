"""Start-up time: ``import meanfield`` and ``meanfield --help`` against ``import torch`` (issue 23).

Each command runs in a fresh interpreter (``--repeats`` times, default 7, interleaved so that
load on the machine hits all of them alike), from the root of this checkout so that its
``meanfield`` is the one measured; the table prints the median and the fastest wall time of
each, and the ratio of the medians to ``import torch``'s.  The bare interpreter
(``python -c pass``) is the floor every command pays.  ``meanfield --help`` is run as
``python -m meanfield.cli --help`` (the console script adds only its own small wrapper); the
modules it loads are listed too, to show that it imports neither torch nor xarray, dask, POT,
scipy or matplotlib.

    python benchmarks/bench_startup.py [--repeats 7] [--out FOLDER]

Writes ``startup.json`` and ``startup.md`` into ``--out`` (by default a folder outside the
repository: ``--help``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out, progress

ROOT = Path(__file__).resolve().parents[1]

#: name -> the command after the interpreter.
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "import meanfield": ["-c", "import meanfield"],
    "meanfield --help": ["-m", "meanfield.cli", "--help"],
    "import torch": ["-c", "import torch"],
}
HEAVY = ("torch", "xarray", "dask", "ot", "scipy", "matplotlib", "pandas", "transformers")

_PROBE = """
import contextlib, io, sys
from meanfield.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(["--help"])
    except SystemExit:
        pass
print(",".join(m for m in {heavy!r} if m in sys.modules))
print(sys.modules["meanfield"].__file__)
"""


def _env() -> dict:
    # this checkout's meanfield first, whatever is installed
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def time_once(args: list[str]) -> float:
    """Wall seconds of one fresh interpreter running ``args``."""
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=_env(),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def probe_help() -> tuple[list[str], str]:
    """The heavy modules ``meanfield --help`` loads, and the meanfield it imported."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY)],
        cwd=ROOT,
        env=_env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return [m for m in out[0].split(",") if m], out[1]


def markdown(res: dict) -> str:
    ref = res["median_s"]["import torch"]
    lines = [
        f"Start-up, median (fastest) of {res['repeats']} fresh interpreters, interleaved; "
        f"ratio = median / median of `import torch`.",
        "",
        "| command | median s | fastest s | ÷ import torch |",
        "| --- | --- | --- | --- |",
    ]
    for name in COMMANDS:
        med, low = res["median_s"][name], res["min_s"][name]
        lines.append(f"| `{name}` | {med:.3f} | {low:.3f} | {med / ref:.2f} |")
    heavy = ", ".join(res["help_imports"]) or "none of " + ", ".join(HEAVY)
    m = res["machine"]
    lines += [
        "",
        f"`meanfield --help` imports: {heavy}.",
        f"Machine: {m['platform']}, {m['cpus']} CPUs, Python {m['python']}; load average at "
        f"start {m['loadavg']}; meanfield from {res['meanfield_file']}.",
    ]
    return "\n".join(lines) + "\n"


#: The flags, declared once: their checks, help and docs come from these Params.
FLAGS = Contract(
    "benchmarks/bench_startup.py",
    [
        Param("repeats", "int", "fresh interpreters per command", low=1, default=7),
        Param("progress", "flag", "show the progress bar", default=True),
    ],
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    FLAGS.add_arguments(ap)
    add_bench_out(ap, "startup.json and startup.md")
    args = FLAGS.parse_args(ap, argv)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    times = {name: [] for name in COMMANDS}
    runs = [name for _ in range(args.repeats) for name in COMMANDS]
    for name in progress(runs, enabled=args.progress, desc="interpreters"):
        times[name].append(time_once(COMMANDS[name]))
    heavy, where = probe_help()
    res = {
        "repeats": args.repeats,
        "median_s": {k: statistics.median(v) for k, v in times.items()},
        "min_s": {k: min(v) for k, v in times.items()},
        "all_s": times,
        "help_imports": heavy,
        "meanfield_file": where,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg": [round(x, 2) for x in load] if load else None,
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        },
    }
    md = markdown(res)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup.json").write_text(json.dumps(res, indent=1))
    (args.out / "startup.md").write_text(md)
    print(md)
    print(f"wrote {args.out / 'startup.json'} and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
