"""Command-line flags from a contract: a typed word parsed and checked, argparse flags
generated, a parsed command line checked.

The functions here are methods: :meth:`Param.from_text <meanfield.contract.Param.from_text>`,
and :meth:`Contract.help_text <meanfield.contract.Contract.help_text>`,
:meth:`~meanfield.contract.Contract.add_arguments`,
:meth:`~meanfield.contract.Contract.from_args` and
:meth:`~meanfield.contract.Contract.parse_args`. The class bodies of
:mod:`meanfield.contract.params` bind them (``from_text = flags.from_text``), so they are
methods of the classes themselves, documented, collected and inherited as any other, and this
module sits below the declaration: it imports nothing from ``params`` and receives the
``Param`` or ``Contract`` as ``self``. The argparse pieces (``_ArgumentType``,
``_FlatList``) are private.

Reference: Python Software Foundation. argparse — parser for command-line options,
https://docs.python.org/3/library/argparse.html.
"""

from __future__ import annotations

import argparse

from .._validation import shown
from ..errors import InputError, InputTypeError
from .kinds import REQUIRED


def from_text(self, text: str):
    """A value typed on the command line (or read from an environment variable), parsed
    by kind and checked by :meth:`check`.

    ``real`` and ``level``: Python's ``float`` syntax (so ``nan`` and ``inf`` parse, and
    are refused by the check); ``int`` and ``seed``: ``int`` syntax (``2.5`` and ``1e3``
    refused, not rounded); ``choice`` and ``string``: the text; ``flag``: ``true`` or
    ``false`` (any case); an optional parameter: ``none`` for None; a ``sequence``:
    comma-separated values, each parsed so (a ``repeated`` sequence: the word is one
    element, commas included).

    Raises
    ------
    meanfield.errors.InputTypeError, meanfield.errors.InputError
        As :meth:`check`, naming the parameter and what it allows.

    See Also
    --------
    meanfield.contract.Param.check : the check of a Python value.
    meanfield.contract.Contract.add_arguments : flags that parse with it.

    Examples
    --------
    >>> Param("m", "int", "features", low=1, sequence=True).from_text("64, 256")
    [64, 256]
    >>> Param("beta", "real", "inverse temperature", low=0.0, low_open=True).from_text("2")
    2.0
    >>> Param("n", "int", "count", low=1).from_text("1e3")
    Traceback (most recent call last):
        ...
    meanfield.errors.InputTypeError: n must be an integer >= 1, got '1e3'
    """
    if not isinstance(text, str):
        raise InputTypeError(f"{shown(self.shown_name)} must be text here, got {text!r}")
    word = text.strip()
    if self.optional and word.lower() == "none":
        return None
    if self.sequence and self.repeated:  # one whole element per word (it may hold commas)
        return [self.element.from_text(text)]
    if self.sequence:
        parts = word.split(",")
        if not word or any(not w.strip() for w in parts):
            raise InputError(f"{shown(self.shown_name)} must be {self.allowed()}, got {text!r}")
        try:
            return [self.element.from_text(w) for w in parts]
        except (InputError, InputTypeError):
            raise InputError(
                f"{shown(self.shown_name)} must be {self.allowed()}, got {text!r}"
            ) from None
    value: object = word
    try:
        if self.kind in ("real", "level"):
            value = float(word)
        elif self.kind in ("int", "seed"):
            value = int(word)
        elif self.kind == "flag":
            value = {"true": True, "false": False}[word.lower()]
    except (ValueError, KeyError):
        raise InputTypeError(
            f"{shown(self.shown_name)} must be {self.allowed()}, got {text!r}"
        ) from None
    try:
        return self.check(value)
    except (InputError, InputTypeError) as err:  # name the text as typed
        raise type(err)(
            f"{shown(self.shown_name)} must be {self.allowed()}, got {text!r}"
        ) from None


def _selected(self, names) -> list:
    if names is None:
        return list(self.params)
    unknown = [n for n in names if n not in self.by_name]
    if unknown:
        raise InputError(
            f"names must be declared parameters of {self.entry} "
            f"({', '.join(self.by_name)}), got unknown {unknown}"
        )
    return [self.by_name[n] for n in names]


def help_text(self, name: str, default=REQUIRED) -> str:
    """The help of one flag: the doc, the allowed values (but a switch's), the units,
    the default.

    See Also
    --------
    meanfield.contract.Contract.add_arguments : the flags it helps.
    meanfield.contract.Contract.rst_table : the same in the docs.

    Examples
    --------
    >>> c = Contract("demo", [Param("budget", "real", "sampling time per run", low=0.0,
    ...                             low_open=True, units="s", default=8.0)])
    >>> c.help_text("budget", c.defaults["budget"])
    'sampling time per run; a finite number in (0, inf) [s] [default: 8.0]'
    """
    param = self.by_name[name]
    units = f" [{param.units}]" if param.units else ""
    if default is REQUIRED:
        dflt = "required"
    elif param.sequence and default is not None:
        dflt = "default: " + ",".join(map(str, default))
    else:
        dflt = f"default: {default}"
    if param.kind == "flag":  # --x / --no-x say it
        return f"{param.doc} [{dflt}]"
    return f"{param.doc}; {param.allowed()}{units} [{dflt}]"


def add_arguments(self, parser, *, names=None, defaults=None, positional=(), metavars=None) -> list:
    """One command-line flag per declared parameter, generated from its :class:`Param`.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        Where the flags go (or an argument group of it).
    names : sequence of str, optional
        The parameters to add, in this order (default: all, in declared order).
    defaults : dict, optional
        Defaults that replace the declared ones (checked); a parameter with no default
        gets a required flag.
    positional : sequence of str, optional
        Parameters that are positional arguments rather than flags (``meanfield run FILE``):
        the argument ``name``, required unless it has a default (then it may be left out),
        parsed and checked as a flag's word is; a ``flag`` or ``sequence`` cannot be one.
    metavars : dict, optional
        name -> how the help shows a flag's value (``{"set": "KEY=VALUE"}``).

    Returns
    -------
    list of argparse.Action
        The flags added.

    See Also
    --------
    meanfield.contract.Contract.parse_args : parses and checks.
    meanfield.cli.parser.RUN_FLAGS : the flags of ``meanfield run``.
    meanfield.contract.Contract.rst_table : the docs' table of the same.

    Notes
    -----
    For the parameter ``some_name``: the flag ``--some-name`` with destination
    ``some_name``; a ``flag`` kind gives the pair ``--some-name`` / ``--no-some-name``
    (``argparse.BooleanOptionalAction``); a ``sequence`` takes one or more words, each
    comma-separated values (``--m 64,256`` or ``--m 64 256``), a ``repeated`` one a whole
    word per flag, repeated (``--set a=1 --set b=2``); a ``choice`` shows its
    values as the metavar. The help is :meth:`help_text`: the doc, the allowed values as
    the refusals word them, the units and the default. Each word is parsed and checked by
    :meth:`Param.from_text` while argparse reads it, so a bad value ends the program in
    ``parse_args`` with argparse's one line ``error: argument --some-name: must be ...,
    got '...'`` and exit status 2, before any work; the default stays a Python value
    (not parsed). :meth:`parse_args` adds the check of every value, defaults included.

    Examples
    --------
    >>> import argparse
    >>> flags = Contract("demo", [
    ...     Param("n_steps", "int", "number of steps", low=1, default=100),
    ...     Param("lengths", "int", "sequence lengths L", low=1, sequence=True,
    ...           default=(64, 256)),
    ...     Param("clock", "choice", "which clock", choices=("wall", "cpu"), default="wall"),
    ...     Param("progress", "flag", "show a progress bar", default=True),
    ... ])
    >>> ap = argparse.ArgumentParser(prog="bench.py")
    >>> _ = flags.add_arguments(ap)
    >>> vars(ap.parse_args(["--n-steps", "5", "--lengths", "8,16", "32", "--no-progress"]))
    {'n_steps': 5, 'lengths': [8, 16, 32], 'clock': 'wall', 'progress': False}
    >>> one = argparse.ArgumentParser(prog="run")
    >>> _ = Contract("demo", [Param("file", "string", "the file to run")]).add_arguments(
    ...     one, positional=["file"])
    >>> one.parse_args(["a.toml"]).file
    'a.toml'
    >>> print(ap.format_help())  # doctest: +NORMALIZE_WHITESPACE
    usage: bench.py [-h] [--n-steps N_STEPS] [--lengths LENGTHS [LENGTHS ...]]
                    [--clock {wall,cpu}] [--progress | --no-progress]
    <BLANKLINE>
    options:
      -h, --help            show this help message and exit
      --n-steps N_STEPS     number of steps; an integer >= 1 [default: 100]
      --lengths LENGTHS [LENGTHS ...]
                            sequence lengths L; a non-empty list, each an integer >= 1
                            [default: 64,256]
      --clock {wall,cpu}    which clock; one of 'wall', 'cpu' [default: wall]
      --progress, --no-progress
                            show a progress bar [default: True]
    <BLANKLINE>
    """
    defaults = dict(defaults or {})
    positional = list(positional)
    self._selected(positional)  # each a declared parameter
    bad = [n for n in positional if self.by_name[n].kind == "flag" or self.by_name[n].sequence]
    if bad:
        raise InputError(f"positional must name neither a flag nor a sequence, got {bad}")
    actions = []
    for param in self._selected(names):
        if param.name in defaults:
            default = param.check(defaults[param.name])
        else:
            default = self.defaults.get(param.name, REQUIRED)
        if param.name in positional:  # an argument: its name, no dest, no "required"
            kwargs = {"type": _ArgumentType(param)}
            if default is not REQUIRED:
                kwargs.update(nargs="?", default=default)
            action = parser.add_argument(param.name, **kwargs)
            action.help = self.help_text(param.name, default).replace("%", "%%")
            actions.append(action)
            continue
        kwargs: dict = {"dest": param.name}
        if default is REQUIRED:
            kwargs["required"] = True
        else:
            kwargs["default"] = list(default) if param.sequence and default else default
        if param.kind == "flag":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = _ArgumentType(param)
            if param.sequence and param.repeated:  # --set a=1 --set b=2: one word each
                kwargs.update(action=_Appended, metavar=param.name.upper())
            elif param.sequence:
                kwargs.update(nargs="+", action=_FlatList)
            if param.kind == "choice":
                kwargs["metavar"] = "{" + ",".join(param.choices) + "}"
        if param.name in (metavars or {}):
            kwargs["metavar"] = metavars[param.name]
        action = parser.add_argument(param.flag, **kwargs)
        # set after: BooleanOptionalAction would append its own "(default: ...)"; a "%"
        # of a doc must not reach argparse's %-formatting
        action.help = self.help_text(param.name, default).replace("%", "%%")
        actions.append(action)
    return actions


def from_args(self, namespace, *, names=None) -> dict:
    """The declared values of a parsed command line, checked and converted.

    Parameters
    ----------
    namespace : argparse.Namespace or dict
        What ``parse_args`` returned (or any mapping of names to values).
    names : sequence of str, optional
        The parameters to read (default: every declared one the namespace holds).

    Returns
    -------
    dict
        name -> checked value, ready for ``entry_point(**values)``.

    Raises
    ------
    meanfield.errors.InputTypeError, meanfield.errors.InputError
        As :meth:`Param.check`, naming the first parameter refused.

    See Also
    --------
    meanfield.contract.Contract.parse_args : the same while parsing.

    Examples
    --------
    >>> import argparse
    >>> c = Contract("demo", [Param("beta", "real", "", low=0.0, low_open=True)])
    >>> c.from_args(argparse.Namespace(beta=2, other="kept out"))
    {'beta': 2.0}
    >>> c.from_args({"beta": 0})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: beta must be a finite number in (0, inf), got 0
    """
    values = namespace if isinstance(namespace, dict) else vars(namespace)
    wanted = self._selected(names)
    return {p.name: p.check(values[p.name]) for p in wanted if p.name in values}


def parse_args(self, parser, argv=None, *, names=None):
    """``parser.parse_args(argv)`` with every declared value checked and converted, the
    defaults included; a refusal ends the program as argparse's own errors do (one line
    ``error: argument --flag: ...``, exit status 2).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        A parser holding the flags of :meth:`add_arguments` (and any others).
    argv : list of str, optional
        The words (default: ``sys.argv[1:]``).
    names : sequence of str, optional
        The parameters to check (default: every declared one the namespace holds).

    Returns
    -------
    argparse.Namespace
        The namespace, the declared values replaced by their checked values.

    See Also
    --------
    meanfield.contract.Contract.add_arguments : the flags it reads.
    meanfield.contract.Contract.from_args : the check of a namespace.

    Examples
    --------
    >>> import argparse, contextlib, io
    >>> c = Contract("demo", [Param("repeats", "int", "timed repeats", low=1, default=3)])
    >>> ap = argparse.ArgumentParser(prog="bench.py")
    >>> _ = c.add_arguments(ap)
    >>> c.parse_args(ap, []).repeats
    3
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     c.parse_args(ap, ["--repeats", "0"])
    Traceback (most recent call last):
        ...
    SystemExit: 2
    >>> err.getvalue().splitlines()[-1]
    "bench.py: error: argument --repeats: must be an integer >= 1, got '0'"
    """
    args = parser.parse_args(argv)
    for param in self._selected(names):
        if not hasattr(args, param.name):
            continue
        try:
            setattr(args, param.name, param.check(getattr(args, param.name)))
        except (InputError, InputTypeError) as err:
            text = str(err)
            prefix = shown(param.shown_name) + " "
            text = text[len(prefix) :] if text.startswith(prefix) else text
            parser.error(f"argument {param.flag}: {text}")
    return args


class _ArgumentType:
    """An argparse ``type`` from a :class:`Param`: :meth:`Param.from_text`, a refusal turned
    into ``argparse.ArgumentTypeError`` ("must be ..., got '...'", argparse names the flag)."""

    def __init__(self, param):
        self.param = param
        # argparse's "invalid <name> value" never shows: every failure is an ArgumentTypeError
        self.__name__ = param.kind

    def __call__(self, text: str):
        try:
            return self.param.from_text(text)
        except (InputError, InputTypeError):
            raise argparse.ArgumentTypeError(
                f"must be {self.param.allowed()}, got {text!r}"
            ) from None

    def __repr__(self) -> str:
        return f"_ArgumentType({self.param.name!r})"


class _FlatList(argparse.Action):
    """The argparse action of a ``sequence`` flag: ``nargs="+"`` of comma-separated words,
    one flat list (``--m 8,16 32`` gives ``[8, 16, 32]``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [v for word in values for v in word])


class _Appended(argparse.Action):
    """The argparse action of a ``repeated`` sequence flag: one word per flag, each flag's
    word appended (``--set a=1 --set b=2`` gives ``["a=1", "b=2"]``; the default is never
    changed in place)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), *values])
