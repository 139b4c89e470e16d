"""Flag types and output folders shared by the scripts of ``benchmarks/`` and ``paper_repro/``.

Every check is an argparse ``type``: a bad value ends the script during ``parse_args`` with
argparse's own one-line error naming the flag and its allowed range, and exit status 2,

    bench_hmc.py: error: argument --budget: must be a number > 0, got '-1'

before any heavy import (this module imports the standard library only) or any work.

Benchmarks write into a folder the user names with ``--out``; by default a folder outside the
repository (:func:`bench_out_default`), so that a run never overwrites the committed reference
results in ``benchmarks/results/`` unless asked to (``--out benchmarks/results``).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = [
    "BENCH_OUT_ENV",
    "add_bench_out",
    "bench_out_default",
    "choice_list",
    "device_name",
    "existing_dir",
    "file_stem",
    "float_range",
    "int_list",
    "int_range",
    "output_dir",
    "output_file",
    "progress",
    "say",
]

#: Environment variable naming the default results folder of the benchmarks.
BENCH_OUT_ENV = "MEANFIELD_BENCH_OUT"


def bench_out_default() -> Path:
    """The benchmarks' default results folder: ``$MEANFIELD_BENCH_OUT`` if set, else
    ``meanfield/bench-results`` in the user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``).

    See Also
    --------
    add_bench_out : the ``--out`` flag that uses it.

    Examples
    --------
    >>> import os
    >>> from meanfield.workbench._scripts import bench_out_default
    >>> os.environ["MEANFIELD_BENCH_OUT"] = "/tmp/my-bench"
    >>> str(bench_out_default())
    '/tmp/my-bench'
    >>> del os.environ["MEANFIELD_BENCH_OUT"]
    """
    env = os.environ.get(BENCH_OUT_ENV)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "meanfield" / "bench-results"


def add_bench_out(ap: argparse.ArgumentParser, writes: str) -> None:
    """``--out FOLDER``: where a benchmark writes ``writes`` (checked like :func:`output_dir`;
    the default, outside the repository, is checked too).

    See Also
    --------
    bench_out_default : its default folder.
    meanfield.contract.Contract.add_arguments : flags declared in a contract.

    Examples
    --------
    >>> import argparse, tempfile
    >>> from meanfield.workbench._scripts import add_bench_out
    >>> ap = argparse.ArgumentParser()
    >>> add_bench_out(ap, "x.json")
    >>> folder = tempfile.mkdtemp()
    >>> str(ap.parse_args(["--out", folder]).out) == folder
    True
    """
    ap.add_argument(
        "--out",
        type=output_dir,
        default=str(bench_out_default()),
        metavar="FOLDER",
        help=f"folder for the results ({writes}; created if missing) [default: "
        f"${BENCH_OUT_ENV} if set, else ~/.cache/meanfield/bench-results, outside the "
        "repository; the committed reference results are refreshed with --out "
        "benchmarks/results]",
    )


def _fail(message: str):
    raise argparse.ArgumentTypeError(message)


def _bound_text(kind: str, lo, hi, lo_open: bool, hi_open: bool) -> str:
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo:g}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {hi:g}")
    return f"{kind} {' and '.join(parts)}" if parts else kind


def int_range(lo: int | None = 1, hi: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [lo, hi] (``None``: unbounded).

    See Also
    --------
    float_range : the same for a real.
    meanfield.contract.Param.from_text : a declared flag's parsing.

    Examples
    --------
    >>> from meanfield.workbench._scripts import int_range
    >>> int_range(1)("3")
    3
    >>> int_range(1)("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer >= 1, got '0'
    """
    need = _bound_text("an integer", lo, hi, False, False)

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            _fail(f"must be {need}, got {text!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            _fail(f"must be {need}, got {text!r}")
        return value

    convert.__name__ = "int"
    return convert


def float_range(
    lo: float | None = 0.0,
    hi: float | None = None,
    *,
    lo_open: bool = True,
    hi_open: bool = False,
) -> Callable[[str], float]:
    """An argparse type: a finite number between lo and hi (open or closed ends).

    See Also
    --------
    int_range : the same for an integer.
    meanfield.contract.Param.from_text : a declared flag's parsing.

    Examples
    --------
    >>> from meanfield.workbench._scripts import float_range
    >>> float_range(0)("0.5")
    0.5
    >>> float_range(0, 1, hi_open=True)("1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a number > 0 and < 1, got '1'
    """
    need = _bound_text("a number", lo, hi, lo_open, hi_open)

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            _fail(f"must be {need}, got {text!r}")
        bad = not math.isfinite(value)
        if lo is not None:
            bad |= value <= lo if lo_open else value < lo
        if hi is not None:
            bad |= value >= hi if hi_open else value > hi
        if bad:
            _fail(f"must be {need}, got {text!r}")
        return value

    convert.__name__ = "float"
    return convert


def int_list(lo: int | None = 1, hi: int | None = None) -> Callable[[str], list[int]]:
    """An argparse type: comma-separated integers, each in [lo, hi].

    See Also
    --------
    choice_list : a list of names.
    meanfield.contract.Param.from_text : a declared sequence flag.

    Examples
    --------
    >>> from meanfield.workbench._scripts import int_list
    >>> int_list(1)("64,256")
    [64, 256]
    >>> int_list(1)("64,x")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be comma-separated integers >= 1, got '64,x'
    """
    need = _bound_text("comma-separated integers", lo, hi, False, False)
    one = int_range(lo, hi)

    def convert(text: str) -> list[int]:
        try:
            values = [one(x.strip()) for x in text.split(",")]
        except argparse.ArgumentTypeError:
            _fail(f"must be {need}, got {text!r}")
        return values

    convert.__name__ = "int list"
    return convert


def choice_list(choices: Iterable[str]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated subset of ``choices``.

    See Also
    --------
    int_list : a list of integers.
    meanfield.contract.Param.from_text : a declared choice flag.

    Examples
    --------
    >>> from meanfield.workbench._scripts import choice_list
    >>> choice_list(["a", "b"])("b,a")
    ['b', 'a']
    >>> choice_list(["a", "b"])("a,c")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: takes comma-separated names among a, b; got unknown 'c'
    """
    allowed = list(choices)

    def convert(text: str) -> list[str]:
        values = [x.strip() for x in text.split(",")]
        bad = [x for x in values if x not in allowed]
        if bad:
            _fail(
                f"takes comma-separated names among {', '.join(allowed)}; got unknown "
                + ", ".join(repr(x) for x in bad)
            )
        return values

    convert.__name__ = "name list"
    return convert


def _creatable(path: Path, what: str) -> None:
    """``path`` can be created: its nearest existing ancestor is a writable folder."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        _fail(f"{what} {str(path)!r} cannot be created: {str(parent)!r} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        _fail(f"{what} {str(path)!r} cannot be created: no write permission in {str(parent)!r}")


def output_dir(text: str) -> Path:
    """An argparse type: a folder to write into (existing, or creatable: not a file, not
    under a file, in a writable place). Returns it with ``~`` expanded; nothing is created.

    See Also
    --------
    output_file : an output file.
    existing_dir : a folder to read.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from meanfield.workbench._scripts import output_dir
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "f"
    >>> _ = f.write_text("")
    >>> output_dir(str(f))
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: ... is a file, not a folder
    """
    if not text.strip():
        _fail("must name a folder, got ''")
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            _fail(f"{str(path)!r} is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            _fail(f"no write permission in the folder {str(path)!r}")
        return path
    _creatable(path, "folder")
    return path


def output_file(text: str) -> Path:
    """An argparse type: a file to write (not a folder; its folder existing or creatable).

    See Also
    --------
    output_dir : an output folder.
    file_stem : a file name's stem.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.workbench._scripts import output_file
    >>> output_file(tempfile.mkdtemp() + "/result.json").name
    'result.json'
    >>> output_file(tempfile.mkdtemp())
    Traceback (most recent call last):
        ...
    argparse.ArgumentTypeError: ... is a folder, not a file
    """
    if not text.strip():
        _fail("must name a file, got ''")
    path = Path(text).expanduser()
    if path.is_dir():
        _fail(f"{str(path)!r} is a folder, not a file")
    if path.exists():
        if not os.access(path, os.W_OK):
            _fail(f"no write permission for the file {str(path)!r}")
        return path
    _creatable(path, "file")
    return path


def device_name(text: str) -> str:
    """An argparse type: a torch device name, ``cpu``, ``cuda``, ``cuda:K`` or ``mps`` (its
    availability is the script's to check once torch is loaded).

    See Also
    --------
    meanfield.contract.Param.from_text : a declared flag's parsing.

    Examples
    --------
    >>> from meanfield.workbench._scripts import device_name
    >>> device_name("cuda:1")
    'cuda:1'
    >>> device_name("gpu")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be cpu, cuda, cuda:K or mps, got 'gpu'
    """
    import re

    if not re.fullmatch(r"cpu|cuda(:\d+)?|mps", text):
        _fail(f"must be cpu, cuda, cuda:K or mps, got {text!r}")
    return text


def file_stem(text: str) -> str:
    """An argparse type: a plain file name without suffix (no folder part), e.g. ``pairs_1thread``.

    See Also
    --------
    output_file : an output file.

    Examples
    --------
    >>> from meanfield.workbench._scripts import file_stem
    >>> file_stem("a/b")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a plain file name (no folder, no suffix), got 'a/b'
    """
    if not text or text in (".", "..") or "/" in text or os.sep in text or "." in text:
        _fail(f"must be a plain file name (no folder, no suffix), got {text!r}")
    return text


def existing_dir(text: str) -> Path:
    """An argparse type: a folder that exists (to read from).

    See Also
    --------
    output_dir : a folder to write.
    meanfield.workbench.study_files.study_folders : a study's folders.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.workbench._scripts import existing_dir
    >>> existing_dir(tempfile.mkdtemp()).is_dir()
    True
    >>> existing_dir("/no/such/folder")
    Traceback (most recent call last):
        ...
    argparse.ArgumentTypeError: no such folder: '/no/such/folder'
    """
    path = Path(text).expanduser()
    if not path.exists():
        _fail(f"no such folder: {str(path)!r}")
    if not path.is_dir():
        _fail(f"{str(path)!r} is a file, not a folder")
    return path


def progress(iterable, *, enabled: bool = True, **kwargs):
    """``iterable`` under a tqdm bar on stderr (``enabled=False``: unchanged). Lines printed
    meanwhile should go through ``tqdm.write`` (:func:`say`) so the bar stays whole.

    See Also
    --------
    say : a line of progress.

    Examples
    --------
    >>> from meanfield.workbench._scripts import progress
    >>> list(progress([1, 2], enabled=False))
    [1, 2]
    """
    if not enabled:
        return iterable
    import sys

    from tqdm import tqdm

    return tqdm(iterable, file=sys.stderr, dynamic_ncols=True, **kwargs)


def say(*parts) -> None:
    """``print`` (to stdout) that keeps a running tqdm bar whole (``tqdm.write``).

    See Also
    --------
    progress : a progress bar.

    Examples
    --------
    >>> from meanfield.workbench._scripts import say
    >>> say("N =", 3)
    N = 3
    """
    import sys

    from tqdm import tqdm

    tqdm.write(" ".join(str(p) for p in parts))
    sys.stdout.flush()
