"""Command-line flags generated from the parameter contract (meanfield.contract).

``Contract.add_arguments`` turns each declared :class:`Param` into a flag (``--some-name``,
help = doc + allowed values + units + default), ``Param.from_text`` parses and checks a typed
word, and ``Contract.parse_args`` / ``from_args`` check every value, defaults included. The
truth here is the Python check itself: a word typed on the command line must give exactly the
value (or the refusal) that :meth:`Param.check` gives the corresponding Python value, for
every parameter of every registered entry point.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math

import pytest

from meanfield.contract import REQUIRED, Contract, Param, declare, registered
from meanfield.errors import InputError, InputTypeError

CONTRACTS = registered()


def _as_text(value) -> str:
    """How a user types ``value``: repr of a float (round-trips exactly), commas for a list."""
    if isinstance(value, list):
        return ",".join(_as_text(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _parse_fails(parser, argv) -> str:
    """The one error line of a refused command line (exit status 2)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stop:
        parser.parse_args(argv)
    assert stop.value.code == 2
    return err.getvalue().strip().splitlines()[-1]


DEMO = Contract(
    "demo_script.py",
    [
        Param("n_steps", "int", "number of steps", low=1, default=100),
        Param("eta", "real", "step size", low=0.0, low_open=True, units="time", default=0.01),
        Param("level", "level", "confidence level", default=0.95),
        Param("seed", "seed", "first seed", default=0),
        Param("lengths", "int", "sequence lengths L", low=1, sequence=True, default=(64, 256)),
        Param("clock", "choice", "which clock", choices=("wall", "cpu"), default="wall"),
        Param("progress", "flag", "show a progress bar", default=True),
        Param("quick", "flag", "a smoke run", default=False),
        Param("replicas", "int", "chains (None: by N)", low=1, optional=True, default=None),
        Param("name", "string", "file stem", default="run"),
        Param("budget", "real", "seconds per run", low=0.0, low_open=True, units="s"),
    ],
)


def _demo_parser(**kw):
    ap = argparse.ArgumentParser(prog="demo_script.py")
    DEMO.add_arguments(ap, **kw)
    return ap


def test_flags_defaults_and_conversions():
    ap = _demo_parser()
    args = DEMO.parse_args(ap, ["--budget", "2"])
    assert vars(args) == {
        "n_steps": 100, "eta": 0.01, "level": 0.95, "seed": 0, "lengths": [64, 256],
        "clock": "wall", "progress": True, "quick": False, "replicas": None, "name": "run",
        "budget": 2.0,
    }  # fmt: skip
    args = DEMO.parse_args(
        ap,
        ["--budget", "1e-3", "--n-steps", "7", "--lengths", "8,16", "32", "--no-progress",
         "--quick", "--replicas", "4", "--clock", "cpu", "--seed", str(2**63 - 1)],
    )  # fmt: skip
    assert (args.budget, args.n_steps, args.lengths) == (1e-3, 7, [8, 16, 32])
    assert (args.progress, args.quick, args.replicas, args.clock) == (False, True, 4, "cpu")
    assert args.seed == 2**63 - 1 and type(args.budget) is float
    # an optional parameter is unset again by "none"
    assert DEMO.parse_args(ap, ["--budget", "1", "--replicas", "none"]).replicas is None


def test_a_parameter_without_default_is_a_required_flag():
    line = _parse_fails(_demo_parser(), [])
    assert "--budget" in line and "required" in line


@pytest.mark.parametrize(
    ("argv", "flag", "allowed"),
    [
        (["--n-steps", "0"], "--n-steps", "an integer >= 1"),
        (["--n-steps", "2.5"], "--n-steps", "an integer >= 1"),
        (["--n-steps", "1e3"], "--n-steps", "an integer >= 1"),
        (["--eta", "nan"], "--eta", "a finite number in (0, inf)"),
        (["--eta", "inf"], "--eta", "a finite number in (0, inf)"),
        (["--eta", "0"], "--eta", "a finite number in (0, inf)"),
        (["--eta", "x"], "--eta", "a finite number in (0, inf)"),
        (["--level", "1"], "--level", "a number in (0, 1)"),
        (["--seed", "-1"], "--seed", "an integer in [0, 9223372036854775807]"),
        (["--seed", str(2**63)], "--seed", "an integer in [0, 9223372036854775807]"),
        (["--lengths", "0"], "--lengths", "each an integer >= 1"),
        (["--lengths", "64,"], "--lengths", "each an integer >= 1"),
        (["--lengths", "64", "x"], "--lengths", "each an integer >= 1"),
        (["--clock", "gpu"], "--clock", "one of 'wall', 'cpu'"),
        (["--replicas", "0"], "--replicas", "an integer >= 1"),
        (["--name", ""], "--name", "a non-empty string"),
        (["--quick", "yes"], "", "unrecognized arguments"),
    ],
)
def test_a_bad_word_is_one_line_naming_the_flag_and_its_range(argv, flag, allowed):
    line = _parse_fails(_demo_parser(), ["--budget", "1", *argv])
    assert line.startswith("demo_script.py: error: ")
    assert f"argument {flag}:" in line or not flag
    assert allowed in line


def test_help_is_doc_range_units_and_default():
    text = " ".join(_demo_parser().format_help().split())  # argparse wraps lines
    assert "step size; a finite number in (0, inf) [time] [default: 0.01]" in text
    assert "sequence lengths L; a non-empty list, each an integer >= 1 [default: 64,256]" in text
    assert "--clock {wall,cpu} which clock; one of 'wall', 'cpu' [default: wall]" in text
    assert "--progress, --no-progress show a progress bar [default: True]" in text
    assert "seconds per run; a finite number in (0, inf) [s] [required]" in text


def test_a_percent_sign_in_a_doc_is_printed_as_written():
    c = Contract("x", [Param("share", "level", "share of rows (in %)", default=0.5)])
    ap = argparse.ArgumentParser()
    c.add_arguments(ap)
    assert "(in %)" in ap.format_help()


def test_names_select_and_order_the_flags_and_defaults_replace_declared_ones():
    ap = argparse.ArgumentParser()
    actions = DEMO.add_arguments(ap, names=["quick", "n_steps"], defaults={"n_steps": 3})
    assert [a.dest for a in actions] == ["quick", "n_steps"]
    assert vars(ap.parse_args([])) == {"quick": False, "n_steps": 3}
    with pytest.raises(InputError, match="names must be declared parameters"):
        DEMO.add_arguments(argparse.ArgumentParser(), names=["nope"])
    with pytest.raises(InputError, match="n_steps must be an integer >= 1"):
        DEMO.add_arguments(argparse.ArgumentParser(), defaults={"n_steps": 0})


def test_from_args_checks_what_argparse_did_not_parse():
    """Defaults and hand-built namespaces are checked too (argparse parses only words)."""
    assert DEMO.from_args({"n_steps": 3, "unrelated": object()}) == {"n_steps": 3}
    with pytest.raises(InputTypeError, match="n_steps"):
        DEMO.from_args(argparse.Namespace(n_steps=3.0))
    ap = argparse.ArgumentParser(prog="p.py")
    ap.add_argument("--n-steps", dest="n_steps", default=-1)  # a default nobody checked
    assert "argument --n-steps: must be an integer >= 1, got -1" in _parse_fails_check(ap)


def _parse_fails_check(ap) -> str:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        DEMO.parse_args(ap, [])
    return err.getvalue().strip().splitlines()[-1]


def test_declared_defaults_are_checked_and_agree_with_the_signature():
    with pytest.raises(InputError, match="n must be an integer >= 1, got 0"):
        Param("n", "int", "count", low=1, default=0)
    with pytest.raises(InputError, match="declares defaults its signature does not have"):

        @declare(Param("n", "int", "count", low=1, default=2))
        def f(n=3):
            return n

    @declare(Param("n", "int", "count", low=1, default=3))
    def g(n=3):
        return n

    assert g() == 3 and g.contract.defaults == {"n": 3}


def test_sequences_in_python():
    p = Param("m", "int", "features", low=1, sequence=True)
    assert p.check((64, 256)) == [64, 256]
    for bad in ([], "64", 64, [0], [64, 2.5], [True]):
        with pytest.raises((InputError, InputTypeError), match="m"):
            p.check(bad)
    with pytest.raises(InputError, match="a flag cannot be a sequence"):
        Param("f", "flag", "", sequence=True)


def _wrong_type_only(param, value) -> bool:
    """Whether ``value`` is refused only for its Python type, which a typed word cannot have
    (every word is text: ``"3"`` for an integer parameter is a valid word), so that written
    out it may be valid."""
    if param.sequence:
        if not isinstance(value, list):
            return True  # a bare value as a word is a list of one
        return any(_wrong_type_only(param.element, v) for v in value)
    if isinstance(value, (bool, list, bytes, complex)) or value is None:
        return True
    if isinstance(value, str):
        return param.kind not in ("choice", "string")
    if param.kind == "string":
        return True
    # "3.0" as a word is refused for an integer too, but by parsing; checked below
    return isinstance(value, float) and value.is_integer() and param.kind in ("int", "seed")


PARAMS = [
    pytest.param(p, id=f"{entry.split(':')[1]}-{p.name}")
    for entry, c in CONTRACTS.items()
    for p in c.params
]


@pytest.mark.parametrize("param", PARAMS)
def test_every_declared_parameter_reads_from_text_as_from_python(param):
    """A typed word gives what the Python value gives: each valid edge value, written as a
    user would write it, parses back to itself; each invalid number or string, written out,
    is refused (a word cannot carry a type error such as a list, so those are left out)."""
    for value in param.edge_values():
        if value is None or param.kind == "flag":
            continue
        got = param.from_text(_as_text(value))
        assert got == param.check(value) and type(got) is type(param.check(value))
    for value in param.invalid_values():
        if _wrong_type_only(param, value):
            continue
        with pytest.raises((InputError, InputTypeError), match=param.shown_name.split(" ")[0]):
            param.from_text(_as_text(value))
    if param.kind in ("int", "seed") and not param.sequence:
        with pytest.raises(InputTypeError):
            param.from_text("3.0")


@pytest.mark.parametrize("param", PARAMS)
def test_every_declared_parameter_makes_a_flag(param):
    """Every registered parameter can be a flag (so an entry point's contract gives its
    script's command line), and its edge values round-trip through argparse."""
    c = Contract("x", [param])
    ap = argparse.ArgumentParser(prog="x.py", exit_on_error=False)
    (action,) = c.add_arguments(ap)  # no default: a required flag
    assert action.option_strings[0] == param.flag and param.doc.split(";")[0] in action.help
    for value in param.edge_values():
        if value is None:
            continue
        if param.kind == "flag":
            argv = [param.flag if value else "--no-" + param.flag[2:]]
        else:
            # "--s=-1e+300": argparse takes a word such as "-1e+300" after a space for a flag
            argv = [f"{param.flag}={_as_text(value)}"]
        got = getattr(c.parse_args(ap, argv), param.name)
        if isinstance(value, float) and math.isinf(value):
            assert got == value
        else:
            assert got == param.check(value)


def _bench_scripts():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "benchmarks"
    return sorted(
        p for p in root.glob("*.py") if "FLAGS = Contract(" in p.read_text(encoding="utf-8")
    )


def test_the_benchmarks_declare_their_flags():
    names = {p.name for p in _bench_scripts()}
    assert {"bench_hmc.py", "bench_pairs.py", "bench_attention.py", "ldp_large_n.py"} <= names
    assert len(names) >= 14


@pytest.mark.parametrize("path", _bench_scripts(), ids=lambda p: p.name)
def test_a_benchmark_help_is_its_declared_flags(path, capsys):
    """``--help`` of every benchmark shows each declared flag with the help the contract
    generates (the doc, what it allows, the default), and nothing runs."""
    import importlib.util
    import sys

    sys.path.insert(0, str(path.parent))  # the scripts import their neighbours
    try:
        spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with pytest.raises(SystemExit) as stop:
            (getattr(mod, "parse", None) or mod.main)(["--help"])
    finally:
        sys.path.remove(str(path.parent))
    assert stop.value.code == 0
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines (at hyphens too)
    for param in mod.FLAGS.params:
        assert param.flag in text
        help_ = mod.FLAGS.help_text(param.name, mod.FLAGS.defaults[param.name])
        assert "".join(help_.split()) in text, (param.name, help_)


def _run_parser():
    from meanfield.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def test_every_flag_of_meanfield_run_is_generated_from_its_contract():
    """``meanfield run``'s flags and its FILE argument are those of RUN_FLAGS, one per
    declared parameter, each with the help the contract generates."""
    from meanfield.cli.parser import RUN_FLAGS

    run = _run_parser()
    actions = [a for a in run._actions if not isinstance(a, argparse._HelpAction)]
    assert [a.dest for a in actions] == [p.name for p in RUN_FLAGS.params]
    for action in actions:
        param = RUN_FLAGS.by_name[action.dest]
        expected = [] if action.dest == "file" else [param.flag]
        if param.kind == "flag":
            expected.append("--no-" + param.flag[2:])
        assert action.option_strings == expected
        help_ = RUN_FLAGS.help_text(param.name, RUN_FLAGS.defaults.get(param.name, REQUIRED))
        assert action.help.replace("%%", "%") == help_
    # the flag names the documented commands use
    flags = {s for a in actions for s in a.option_strings}
    assert {"--out", "--no-progress", "--set", "--in-place", "--report-only", "--report-dir",
            "--n-workers", "--scheduler"} <= flags  # fmt: skip


def test_meanfield_run_reads_its_flags_as_before():
    args = _run_parser().parse_args(
        ["--set", "seeds=[3, 4]", "f.toml", "--set", "coulomb.lam=0.5", "--n-workers", "2",
         "--no-progress", "--in-place"]
    )  # fmt: skip
    assert args.set == ["seeds=[3, 4]", "coulomb.lam=0.5"]  # a comma does not split a --set
    assert (args.file, args.n_workers, args.progress, args.in_place) == ("f.toml", 2, False, True)
    args = _run_parser().parse_args(["f.toml"])
    assert (args.set, args.out, args.report_dir, args.scheduler) == (None, None, None, None)
    assert (args.progress, args.in_place, args.report_only) == (True, False, False)


@pytest.mark.parametrize(
    ("argv", "flag", "allowed"),
    [
        (["--n-workers", "0"], "--n-workers", "an integer >= 1"),
        (["--n-workers", "2.5"], "--n-workers", "an integer >= 1"),
        (["--n-workers", "many"], "--n-workers", "an integer >= 1"),
        (["--out", ""], "--out", "a non-empty string"),
        (["--report-dir", " "], "--report-dir", "a non-empty string"),
        (["--scheduler", ""], "--scheduler", "a non-empty string"),
        (["--set", ""], "--set", "a non-empty"),
    ],
)
def test_a_bad_value_of_meanfield_run_is_refused_by_name_before_any_work(
    argv, flag, allowed, monkeypatch, tmp_path, capsys
):
    """Refused by argparse (one line, exit 2) before the command runs: the command is a spy."""
    import meanfield.cli.commands as commands
    from meanfield.cli import main

    reached = []
    monkeypatch.setitem(commands.COMMANDS, "run", (*commands.COMMANDS["run"][:3], reached.append))
    code = main(["run", str(tmp_path / "f.toml"), *argv])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and not reached
    assert f"argument {flag}: must be {allowed}" in line
