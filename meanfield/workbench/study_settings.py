"""The configuration engine of the studies: nested settings merged, checked and keyed.

A study's settings are a TOML file's keys (:mod:`meanfield.workbench.study_files`): top-level
values and tables of values (``[coulomb]`` with ``lam = 0.5``, or ``coulomb.lam`` in a dotted
``--set``). The studies share one way of handling them, here:

* :func:`declare_settings` declares a study's settings as a
  :class:`~meanfield.contract.Contract` — each value a :class:`~meanfield.contract.Param`,
  a table's key by its dotted name (``"coulomb.lam"``) — and registers it, so that the
  generated fuzzing (``tests/test_contract_fuzz.py``) feeds each declared setting its invalid
  values and the docs print its table (docs/validation.rst). The contract's checker fills the
  defaults (a table key by key), refuses an unknown key at any depth naming the nearest
  (:func:`unknown_key`), and checks and converts every declared value before the study's own
  cross-checks (its ``check``) run, before any work;
* :func:`merge_settings` and :func:`check_table` merge given settings into defaults;
  :func:`flatten_settings` and :func:`unflatten_settings` go between tables and dotted keys;
  :func:`check_list` checks a free list setting;
* :class:`KeyedAs` and :func:`settings_digest` key a study's runs
  (:func:`meanfield.workbench.sweeps.sweep_configuration`); :func:`writable_folder` checks a
  study folder before any work; :func:`write_json` writes a record atomically.

See Also
--------
meanfield.contract : the parameter declaration (:class:`~meanfield.contract.Param`).
meanfield.workbench.study_files : reads a study file and applies ``--set`` overrides.
meanfield.studies.run_study_file : the runner that calls a study's ``check_config``.

Examples
--------
>>> from meanfield.contract import Param
>>> demo = declare_settings(
...     "demo:SETTINGS",
...     [Param("seeds", "seed", "seeds", sequence=True),
...      Param("coulomb.lam", "real", "repulsion", low=0.0)],
...     {"seeds": [0, 1], "coulomb": {"lam": 0.3}},
...     register=False,
... )
>>> demo.wrapper(coulomb={"lam": 1})
{'seeds': [0, 1], 'coulomb': {'lam': 1.0}}
>>> demo.wrapper(**{"coulomb.lamb": 1})
Traceback (most recent call last):
    ...
meanfield.errors.InputError: unknown configuration key 'coulomb.lamb' (did you mean 'coulomb.lam'?)
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..contract import Contract, Param
from ..contract.registry import REGISTRY
from ..errors import InputError

__all__ = [
    "KeyedAs",
    "check_list",
    "check_section",
    "check_table",
    "declare_settings",
    "flatten_settings",
    "machine",
    "merge_settings",
    "run_recorded_sweep",
    "settings_digest",
    "unflatten_settings",
    "unknown_key",
    "writable_folder",
    "write_json",
]


def unknown_key(where: str, key, allowed) -> InputError:
    """The refusal of an unknown configuration key, naming the nearest allowed one.

    Parameters
    ----------
    where : str
        The dotted path of the key's table, with its trailing dot (``"coulomb."``; ``""`` at
        the top level).
    key : str
        The unknown key.
    allowed : iterable
        The keys allowed there.

    Returns
    -------
    meanfield.errors.InputError
        To raise; the message holds ``(did you mean '...'?)`` when a key is close
        (:func:`difflib.get_close_matches`).

    See Also
    --------
    check_table, merge_settings : raise it.

    Examples
    --------
    >>> str(unknown_key("coulomb.", "n_step", ["lam", "n_steps"]))
    "unknown configuration key 'coulomb.n_step' (did you mean 'coulomb.n_steps'?)"
    """
    near = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
    hint = f" (did you mean {where + near[0]!r}?)" if near else ""
    return InputError(f"unknown configuration key {where + str(key)!r}{hint}")


def check_table(where: str, value, allowed, default: Mapping) -> dict:
    """One table of settings: a mapping whose keys are among ``allowed``, merged key by key
    into ``default`` (one level; the values are not checked here).

    Parameters
    ----------
    where : str
        The table's dotted name (``"coulomb"``, ``"variants.linear"``), for the messages.
    value : object
        The table as given.
    allowed : iterable of str
        Its allowed keys.
    default : mapping
        Its defaults.

    Returns
    -------
    dict
        A new dict: ``default`` updated by ``value``.

    Raises
    ------
    meanfield.errors.InputError
        Not a mapping, or an unknown key (naming the nearest, :func:`unknown_key`).

    See Also
    --------
    merge_settings : the same, recursively.

    Examples
    --------
    >>> check_table("coulomb", {"lam": 1.0}, ["lam", "s"], {"lam": 0.3, "s": 1.0})
    {'lam': 1.0, 's': 1.0}
    >>> check_table("coulomb", 3, ["lam"], {})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: configuration key 'coulomb' must be a mapping, got 3
    """
    if not isinstance(value, dict):
        raise InputError(f"configuration key {where!r} must be a mapping, got {value!r}")
    allowed = list(allowed)
    for k in value:
        if k not in allowed:
            raise unknown_key(f"{where}.", k, allowed)
    return {**default, **value}


def check_section(where: str, value, contract: Contract, default: Mapping) -> dict:
    """One table checked by a section's contract: its keys among the contract's parameters,
    each given value checked and converted, merged key by key into ``default``.

    A *section* is a table whose keys one contract declares and that appears in several
    places (the Coulomb learner's keywords in ``coulomb``, ``base`` and each named variant):
    declared once (its table printed once), checked wherever it appears, each refusal naming
    the full dotted key. Only the keys given are checked and set: a key left out keeps
    ``default``'s value, or stays absent (the estimator's own default applies).

    Parameters
    ----------
    where : str
        The table's dotted name (``"coulomb"``, ``"variants.linear"``).
    value : object
        The table as given.
    contract : meanfield.contract.Contract
        The section's declared keys (e.g. from :func:`declare_settings`).
    default : mapping
        The table's defaults here.

    Returns
    -------
    dict
        ``default`` updated by the checked ``value``.

    Raises
    ------
    meanfield.errors.InputError, meanfield.errors.InputTypeError
        Not a mapping, an unknown key (naming the nearest), a value refused (naming
        ``where.key`` and its range).

    See Also
    --------
    check_table : the keys only.
    declare_settings : its ``sections``.

    Examples
    --------
    >>> from meanfield.contract import Contract, Param
    >>> c = Contract("demo:SECTION", [Param("lam", "real", "repulsion", low=0.0)])
    >>> check_section("variants.a", {"lam": 1}, c, {})
    {'lam': 1.0}
    >>> check_section("variants.a", {"lam": -1}, c, {})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: variants.a.lam must be a finite number in [0, inf), got -1
    """
    table = check_table(where, value, contract.by_name, default)
    for k in value:
        param = contract.by_name[k]
        table[k] = dataclasses.replace(param, label=f"{where}.{param.shown_name}").check(value[k])
    return table


def check_list(name: str, values, allowed=None, *, kind=None, empty=False, distinct=False) -> list:
    """A free setting that is a list (of data-set names, feature maps, ...), checked.

    Parameters
    ----------
    name : str
        The setting's dotted name, for the messages.
    values : object
        The value given.
    allowed : collection of str, optional
        The values allowed (none: any).
    kind : type, optional
        The type of every entry (``int`` refuses booleans).
    empty : bool, default False
        Whether an empty list is allowed.
    distinct : bool, default False
        Whether the entries must be distinct.

    Returns
    -------
    list
        ``values``, unchanged.

    Raises
    ------
    meanfield.errors.InputError
        Not a list, empty where not allowed, an entry of another kind, a repeated entry, an
        entry not among ``allowed`` (each message names ``name``).

    See Also
    --------
    meanfield.contract.Param : a declared setting's check (``sequence=True``: non-empty).

    Examples
    --------
    >>> check_list("features", ["favor"], ["favor", "porf"])
    ['favor']
    >>> check_list("features", ["favour"], ["favor", "porf"])
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: features must be among favor, porf; got 'favour'
    """
    if not isinstance(values, list) or (not values and not empty):
        raise InputError(f"{name} must be {'a' if empty else 'a non-empty'} list, got {values!r}")
    if kind is not None and not all(
        isinstance(v, kind) and not (kind is int and isinstance(v, bool)) for v in values
    ):
        raise InputError(f"{name} must hold {kind.__name__} values, got {values!r}")
    if distinct and len(set(values)) != len(values):
        raise InputError(f"{name} must hold distinct values, got {values!r}")
    if allowed is not None and (bad := [v for v in values if v not in allowed]):
        raise InputError(f"{name} must be among {', '.join(allowed)}; got {bad[0]!r}")
    return values


def writable_folder(out) -> Path:
    """A study folder, checked before any work: ``out`` as a folder path whose nearest
    existing folder takes a new file.

    A file is made and removed there, which finds a read-only folder even where the
    permission bits do not tell (``/proc``, root).

    Parameters
    ----------
    out : path-like
        The study folder (it may not exist yet).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    meanfield.errors.OutputPathError
        ``out`` is a file, or its nearest existing folder refuses a new file (the message
        names ``out`` and that folder).

    See Also
    --------
    run_recorded_sweep : computes into a study folder.

    Examples
    --------
    >>> import tempfile
    >>> writable_folder(Path(tempfile.mkdtemp()) / "study").name
    'study'
    """
    import tempfile

    from .._validation import check_output_path
    from ..errors import OutputPathError

    out = probe = check_output_path("out", out, kind="dir")
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".write-check-"):
            pass
    except OSError as exc:
        why = f"the folder {str(probe)!r} refuses a new file ({exc.strerror or exc})"
        raise OutputPathError(f"out {str(out)!r} cannot be written: {why}") from None
    return out


def merge_settings(given, defaults: Mapping, where: str = "", whole=()) -> dict:
    """``defaults`` updated by ``given``, recursively; unknown keys refused naming the nearest.

    Parameters
    ----------
    given : dict
        The settings given (a file's, after ``--set``).
    defaults : mapping
        Every allowed key with its default; a table's default is a dict.
    where : str
        The dotted path of this level with its trailing dot (``""`` at the top).
    whole : sequence of str
        Tables that ``given`` replaces as a whole rather than key by key (their keys are
        free: names of variants, data sets, ...).

    Returns
    -------
    dict
        A new dict (``defaults`` and ``given`` are not changed); a ``None`` given for a table
        is kept as given.

    Raises
    ------
    meanfield.errors.InputError
        ``given`` (or a table of it) is not a mapping, or holds an unknown key.

    See Also
    --------
    check_table : one level.
    declare_settings : merges and checks declared settings.

    Examples
    --------
    >>> merge_settings({"train": {"lr": 0.1}}, {"train": {"lr": 1e-3, "epochs": 2}, "seed": 0})
    {'train': {'lr': 0.1, 'epochs': 2}, 'seed': 0}
    >>> merge_settings({"train": {"lr_": 0.1}}, {"train": {"lr": 1e-3}})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'train.lr_' (did you mean 'train.lr'?)
    """
    if not isinstance(given, dict):
        raise InputError(f"configuration key {where[:-1]!r} must be a mapping, got {given!r}")
    out = copy.deepcopy(dict(defaults))
    for k, v in given.items():
        if k not in defaults:
            raise unknown_key(where, k, defaults)
        if isinstance(defaults[k], dict) and k not in whole and v is not None:
            v = merge_settings(v, defaults[k], f"{where}{k}.", whole)
        out[k] = v
    return out


def flatten_settings(settings: Mapping, prefix: str = "") -> dict:
    """Nested tables as dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``).

    Parameters
    ----------
    settings : mapping
        Nested settings.
    prefix : str
        Put before every key (``"a."``).

    Returns
    -------
    dict
        One level; an empty table leaves no key.

    See Also
    --------
    unflatten_settings : the inverse.

    Examples
    --------
    >>> flatten_settings({"seed": 0, "train": {"lr": 0.1, "noise": {"p": 0.2}}})
    {'seed': 0, 'train.lr': 0.1, 'train.noise.p': 0.2}
    """
    flat = [
        flatten_settings(v, f"{prefix}{k}.") if isinstance(v, Mapping) else {f"{prefix}{k}": v}
        for k, v in settings.items()
    ]
    return {k: v for part in flat for k, v in part.items()}


def unflatten_settings(flat: Mapping) -> dict:
    """Dotted keys as nested tables (``{"a.b": 1}`` -> ``{"a": {"b": 1}}``).

    A key without a dot stays at the top; a table given whole and dotted keys into it merge
    (``{"a": {"b": 1}, "a.c": 2}`` -> ``{"a": {"b": 1, "c": 2}}``).

    Parameters
    ----------
    flat : mapping
        Settings with dotted keys.

    Returns
    -------
    dict
        Nested (values are not copied).

    See Also
    --------
    flatten_settings : the inverse.

    Examples
    --------
    >>> unflatten_settings({"seed": 0, "train.lr": 0.1, "train.noise.p": 0.2})
    {'seed': 0, 'train': {'lr': 0.1, 'noise': {'p': 0.2}}}
    """
    out: dict = {}
    for k, v in flat.items():
        *head, last = str(k).split(".")
        node = out
        for h in head:
            node = node.setdefault(h, {})
            if not isinstance(node, dict):
                raise InputError(f"configuration key {h!r} must be a mapping, got {node!r}")
        if isinstance(v, Mapping) and isinstance(node.get(last), dict):
            node[last] = {**v, **node[last]}  # the dotted keys already read win
        else:
            node[last] = v
    return out


class KeyedAs:
    """A run function under another ``module.qualname``: the name its recorded runs were keyed
    by.

    A sweep keys each run by its function's qualified name, signature and defaults
    (:func:`~meanfield.workbench.sweeps.sweep_configuration`); a run function that moved or was
    renamed keeps finding its committed runs (a resume computes nothing) when wrapped so. The
    signature and defaults, also in the key, are the wrapped function's; it pickles by
    reference (its class and the wrapped function: dask workers import them).

    Parameters
    ----------
    func : callable
        The run function.
    name : str
        The recorded name, ``"package.module.qualname"``.

    See Also
    --------
    settings_digest : the digest of a sweep of such a function.
    meanfield.workbench.sweeps.run_sweep : runs it.

    Examples
    --------
    >>> def run_cell(seed, n=3):
    ...     return seed * n
    >>> f = KeyedAs(run_cell, "meanfield.studies.old_module.run_cell")
    >>> f(2), f.__module__, f.__qualname__
    (6, 'meanfield.studies.old_module', 'run_cell')
    """

    def __init__(self, func: Callable, name: str):
        functools.update_wrapper(self, func)  # signature and defaults (part of the key)
        self.__module__, _, self.__qualname__ = name.rpartition(".")
        self.__name__ = self.__qualname__

    def __call__(self, *args, **kwargs):
        return self.__wrapped__(*args, **kwargs)


def settings_digest(func: Callable, fixed: Mapping) -> str:
    """The digest of a sweep of ``func`` with the fixed settings ``fixed``: the key of its runs.

    Parameters
    ----------
    func : callable
        The run function (a :class:`KeyedAs` keeps a recorded name).
    fixed : mapping
        Its fixed keyword arguments.

    Returns
    -------
    str
        :func:`~meanfield.workbench.sweeps.configuration_digest` of
        :func:`~meanfield.workbench.sweeps.sweep_configuration` (12 hex digits).

    See Also
    --------
    KeyedAs

    Examples
    --------
    >>> def run_cell(seed, n=3):
    ...     return seed
    >>> a, b = settings_digest(run_cell, {"n": 3}), settings_digest(run_cell, {"n": 4})
    >>> len(a), a == b
    (12, False)
    """
    from .sweeps import configuration_digest, sweep_configuration

    return configuration_digest(sweep_configuration(func, dict(fixed)))


def write_json(path, obj, **kwargs) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically (a ``.part`` file renamed), so a
    record is never half written; the folder is made if missing.

    Parameters
    ----------
    path : path-like
        The file.
    obj : object
        JSON-serialisable (other numbers by ``float``).
    **kwargs
        More options of :func:`json.dumps` (``sort_keys``, ...).

    See Also
    --------
    meanfield.workbench.study_files.stage_report : copies the records of a study folder.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "a" / "config.json"
    >>> write_json(p, {"n": 1})
    >>> p.read_text()
    '{\\n "n": 1\\n}'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(obj, indent=1, default=float, **kwargs))
    os.replace(tmp, path)


def machine() -> dict:
    """Where a run ran: host, platform, Python, cores (recorded beside a run, not in its key).

    Returns
    -------
    dict
        ``host``, ``platform``, ``python`` and ``cpu_count``.

    See Also
    --------
    run_recorded_sweep : records it in ``run.json``.

    Examples
    --------
    >>> sorted(machine())
    ['cpu_count', 'host', 'platform', 'python']
    """
    import platform
    import socket

    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }


def run_recorded_sweep(
    func: Callable,
    grid: Mapping,
    fixed: Mapping,
    out,
    *,
    config: Mapping,
    scheduler: str = "local",
    n_workers: int | None = None,
    progress: bool = True,
) -> dict:
    """Run (or resume) a study's sweep into ``out`` with its records.

    Writes ``config.json`` first (``config``, the versions, the sweep's ``grid`` and digest:
    what the reports read), runs :func:`~meanfield.workbench.sweeps.run_sweep` (finished runs
    reused, another configuration computes its own), then ``run.json`` (runs computed by
    this call, runs in the grid, wall time, scheduler, :func:`machine`).

    Parameters
    ----------
    func : callable
        The run function (a :class:`KeyedAs` keeps a recorded name).
    grid, fixed : mapping
        The sweep's axes and fixed keyword arguments.
    out : pathlib.Path
        The study folder (checked by the caller).
    config : mapping
        The resolved settings to record.
    scheduler, n_workers, progress
        As for :func:`~meanfield.workbench.sweeps.run_sweep`.

    Returns
    -------
    dict
        What ``run.json`` holds.

    See Also
    --------
    settings_digest : the digest recorded.
    meanfield.workbench.sweeps.run_sweep : the runner underneath.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import xarray as xr
    >>> def square(x):
    ...     return xr.Dataset({"y": x * x})
    >>> out = Path(tempfile.mkdtemp())
    >>> rec = run_recorded_sweep(square, {"x": [1, 2]}, {}, out, config={"x": [1, 2]},
    ...                          scheduler="threads", n_workers=1, progress=False)
    >>> rec["runs_computed"], rec["runs_total"], (out / "config.json").is_file()
    (2, 2, True)
    """
    import platform
    import time

    import numpy as np

    from .._version import __version__
    from .sweeps import grid_points, run_key, run_sweep

    out = Path(out)
    digest = settings_digest(func, fixed)
    write_json(
        out / "config.json",
        {
            "config": dict(config),
            "meanfield_version": __version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "sweep": {"grid": dict(grid), "digest": digest},
        },
    )
    t0_ns, t0 = time.time_ns(), time.perf_counter()
    run_sweep(
        func, dict(grid), out, fixed=dict(fixed), scheduler=scheduler, n_workers=n_workers,
        progress=progress,
    )  # fmt: skip
    paths = [out / "runs" / f"{run_key(p, digest)}.nc" for p in grid_points(dict(grid))]
    record = {
        "runs_computed": sum(p.is_file() and p.stat().st_mtime_ns >= t0_ns for p in paths),
        "runs_total": len(paths),
        "wall_s": time.perf_counter() - t0,
        "scheduler": scheduler,
        "n_workers": n_workers,
        "machine": machine(),
    }
    write_json(out / "run.json", record)
    return record


def _keep(**settings) -> dict:
    return settings


def declare_settings(
    entry: str,
    params: Sequence[Param],
    defaults: Mapping,
    *,
    check: Callable[..., dict] | None = None,
    sections: Mapping[str, Contract] | None = None,
    example: Callable[[str, object], dict] | None = None,
    register: bool = True,
) -> Contract:
    """Declare a study's settings: the contract from which its ``check_config`` validates.

    Parameters
    ----------
    entry : str
        The contract's name, ``"module:NAME"`` (``"meanfield.studies.synthetic:SETTINGS.grid"``).
    params : sequence of Param
        The declared settings; a table's key by its dotted name (``"coulomb.lam"``), which
        makes ``coulomb`` a *declared table*: its keys are exactly the declared ones.
    defaults : mapping
        Every top-level key a study file may give, with its default (a declared table's
        default a dict of some of its keys: a key without a default is left out unless given,
        so the study's own default applies). A top-level key no ``Param`` declares is *free*:
        given whole, checked only by ``check`` (a mapping of named variants, pairs, ...).
        The declared values among the defaults are checked here.
    check : callable, optional
        ``check(**settings) -> dict``: the study's own checks after the declared ones (values
        that depend on each other, distinct values, the free keys) and its resolved settings;
        default: the settings as they are.
    sections : mapping, optional
        Top-level tables whose keys another contract declares (:func:`check_section`):
        key -> that contract. Merged key by key into their default in ``defaults``.
    example : callable, optional
        As for :func:`~meanfield.contract.declare`: the other settings of a valid call with
        ``name = value`` (for the generated tests).
    register : bool, default True
        Put the contract in the registry (the generated fuzzing and the docs' tables).

    Returns
    -------
    meanfield.contract.Contract
        Its ``wrapper(**settings)`` (nested tables or dotted keys) fills the defaults (a
        declared table key by key, a free key whole), refuses an unknown key naming the
        nearest, checks and converts every declared value (:meth:`Param.check`), then calls
        ``check`` (``contract.func``) with the settings, nested, and returns what it returns.
        Its ``defaults`` are ``defaults`` flattened (the docs' default column).

    Raises
    ------
    meanfield.errors.InputError
        A declared default is invalid, or a dotted parameter names a table whose default is
        not a dict.

    See Also
    --------
    meanfield.contract.declare : the same for a function's parameters.
    meanfield.studies.run_study_file : runs a study file through its ``check_config``.

    References
    ----------
    Tom Preston-Werner et al. TOML v1.0.0, https://toml.io/en/v1.0.0 (tables, dotted keys).

    Examples
    --------
    >>> from meanfield.contract import Param
    >>> c = declare_settings(
    ...     "demo:SETTINGS",
    ...     [Param("n_train", "int", "training rows", low=2),
    ...      Param("train.lr", "real", "learning rate", low=0.0, low_open=True)],
    ...     {"n_train": 100, "train": {"lr": 0.01}, "variants": {"a": {}}},
    ...     register=False,
    ... )
    >>> c.wrapper(**{"train.lr": 1, "variants": {"b": {"x": 1}}})
    {'n_train': 100, 'train': {'lr': 1.0}, 'variants': {'b': {'x': 1}}}
    >>> c.wrapper(n_train=1)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: n_train must be an integer >= 2, got 1
    """
    defaults = copy.deepcopy(dict(defaults))
    by_table: dict[str, list[str]] = {}
    for p in params:
        table, dot, key = p.name.partition(".")
        if dot:
            by_table.setdefault(table, []).append(key)
            if not isinstance(defaults.setdefault(table, {}), dict):
                raise InputError(f"{entry}: the default of table {table!r} must be a dict")
    flat_defaults = {
        k: v
        for k, v in defaults.items()
        if k not in by_table  # a declared table's defaults by dotted key
    } | {f"{t}.{k}": v for t in by_table for k, v in defaults[t].items()}
    contract = Contract(entry, params, flat_defaults, example, check or _keep)
    for name, value in flat_defaults.items():
        if name in contract.by_name:
            contract.by_name[name].check(value)
        elif "." in name:
            raise InputError(f"{entry}: the default {name!r} is not a declared setting")
    sections = dict(sections or {})
    for key, section in sections.items():
        defaults[key] = check_section(key, defaults.get(key, {}), section, {})
    top = list(defaults)

    def checked(**settings):
        out = copy.deepcopy(defaults)
        for key, value in unflatten_settings(settings).items():
            if key in by_table:
                out[key] = check_table(key, value, by_table[key], defaults[key])
            elif key in sections:
                out[key] = check_section(key, value, sections[key], defaults[key])
            elif key in defaults or key in contract.by_name:
                out[key] = copy.deepcopy(value)
            else:
                raise unknown_key("", key, top)
        for p in contract.params:  # in declared order: the first refusal is reproducible
            table, dot, key = p.name.partition(".")
            node = out.get(table, {}) if dot else out
            name = key if dot else p.name
            if name in node:
                node[name] = p.check(node[name])
        return contract.func(**out)

    checked.__name__ = checked.__qualname__ = entry.rpartition(":")[2]
    checked.__module__ = entry.rpartition(":")[0] or __name__
    contract.wrapper = checked
    if register:
        REGISTRY[entry] = contract
    return contract
