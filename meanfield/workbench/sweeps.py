"""Parameter sweeps on dask: a grid of independent runs gathered into one labelled dataset.

A *study* is a run function ``f(**params) -> xarray.Dataset`` and a grid ``{name: values}``.
:func:`run_sweep` maps ``f`` over the Cartesian product of the grid:

* every run is written to ``out_dir/runs/<key>.nc`` by the worker that computed it, as soon as
  it finishes (atomically), so an interrupted sweep loses nothing;
* rerunning the same sweep skips every run whose file exists: it resumes where it stopped;
* a run's key holds its grid point *and* a digest of the whole configuration (the run
  function, the fixed parameters and the package version), so a rerun with any other
  parameter never reuses a stale run: it writes its own keys, and the differing parameters of
  the runs already in the folder are reported;
* every run file records its own key and grid point (attributes ``sweep_run_key`` and
  ``sweep_<name>``); a corrupt or partial run file (a truncated write, a ``.part`` left by a
  kill), a file of another configuration under a matching name, or a file of another grid
  point (a run file copied or renamed under this run's name) is detected before the sweep
  starts, moved to ``out_dir/runs/set_aside/``, recomputed and reported
  (:class:`~meanfield.errors.RunFileMismatchWarning`);
* a grid whose values repeat — equal as numbers too (``[1, 1.0]``, ``[True, 1]``) — is
  refused by name before any work, never run twice nor deduplicated behind the caller's back;
* the manifest (``configurations.json``) is written atomically (a temporary file beside it,
  renamed): a full disk raises :class:`~meanfield.errors.OutputWriteError` and leaves
  neither a partial manifest nor a folder this call created;
* runs execute on dask — the threaded scheduler (``scheduler="threads"``), a
  ``distributed.LocalCluster`` sized to the machine (``scheduler="local"``, the default), or a
  user's cluster (``scheduler="tcp://host:8786"``), with nothing else changed;
* the gathered dataset has one dimension per grid parameter (``N``, ``beta``, ``seed``…) and
  records the grid, the fixed parameters and the package version in its attributes.

Runs are independent and seeded through their parameters, so the result does not depend on the
scheduler or on the order in which runs finish.

Examples
--------
>>> import tempfile
>>> import xarray as xr
>>> from meanfield.workbench.sweeps import run_sweep
>>> def run(N, seed):  # a study's run function: parameters in, a Dataset out
...     return xr.Dataset({"x": ((), float(N + seed))})
>>> with tempfile.TemporaryDirectory() as folder:
...     ds = run_sweep(run, {"N": [10, 20], "seed": [0, 1]}, folder, scheduler="threads",
...                    progress=False)
>>> ds["x"].dims, ds["x"].values.tolist()
(('N', 'seed'), [[10.0, 11.0], [20.0, 21.0]])
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import inspect
import itertools
import json
import math
import numbers
import os
import re
import socket
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from .._validation import check_output_path, require_module
from .._version import __version__
from ..contract import Param, declare
from ..errors import (
    InputError,
    InputTypeError,
    MeanfieldWarning,
    ResourceError,
    RunFileMismatchWarning,
    SweepConflictError,
)
from ..results import (
    _attr_value,
    _make_parents,
    _write_atomically,
    load_dataset,
    provenance,
    save_dataset,
)

#: The install command printed when dask is missing.
DASK_INSTALL = 'pip install "dask[distributed]>=2023.1"'
#: Where a sweep folder records the configurations whose runs it holds.
MANIFEST = "configurations.json"


def grid_points(grid: Mapping[str, Sequence]) -> list[dict]:
    """The Cartesian product of a grid, as a list of parameter dicts (first key slowest).

    Parameters
    ----------
    grid : mapping of str to sequence
        Parameter name -> non-empty list of distinct values.  Values equal as numbers are
        repeats (``1``, ``1.0``, ``True``, ``numpy.int64(1)``; two NaN too), and so are lists
        or tuples of such values: each would run the same point twice under two keys.

    Returns
    -------
    list of dict
        One dict per grid point, ∏ len(values) in all.

    Raises
    ------
    meanfield.errors.InputError
        An empty grid, an empty value list, or one that holds repeats (the message names the
        parameter and the repeated values).
    meanfield.errors.InputTypeError
        A grid that is not a mapping, or a value list that is a string or not a sequence.

    See Also
    --------
    run_key : the key of a point.
    run_sweep : runs every point.

    Examples
    --------
    >>> from meanfield.workbench.sweeps import grid_points
    >>> grid_points({"N": [10, 20], "seed": [0, 1]})
    [{'N': 10, 'seed': 0}, {'N': 10, 'seed': 1}, {'N': 20, 'seed': 0}, {'N': 20, 'seed': 1}]
    >>> grid_points({"N": [1, 1.0]})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: grid['N'] must hold distinct values, got the repeated values 1 ...
    """
    if not isinstance(grid, Mapping):
        raise InputTypeError(f"grid must be a dict of name -> list of values, got {grid!r}")
    if not grid:
        raise InputError("grid must name at least one parameter with a list of values")
    for k, v in grid.items():
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
            raise InputTypeError(f"grid[{k!r}] must be a non-empty list of values, got {v!r}")
        if len(v) == 0:
            raise InputError(f"grid[{k!r}] must be a non-empty list of values, got {v!r}")
        seen = {}
        for value in v:
            canon = _value_identity(value)
            if canon in seen:
                raise InputError(
                    f"grid[{k!r}] must hold distinct values, got the repeated values "
                    f"{seen[canon]!r} and {value!r} (equal as values: the same run twice) in "
                    f"{list(v)!r}; list each value once"
                )
            seen[canon] = value
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*grid.values())]


def _value_identity(v):
    """What makes two grid values the same run: a number by its value (``1 == 1.0 == True``,
    every NaN one value), a list or tuple element by element, anything else by its repr."""
    v = _plain(v)
    if isinstance(v, numbers.Number):
        if isinstance(v, numbers.Real) and math.isnan(v):
            return ("number", "nan")
        return ("number", v)  # equal numbers hash alike across int, float and bool
    if isinstance(v, list | tuple):
        return ("sequence", tuple(_value_identity(x) for x in v))
    return ("repr", repr(v))


def run_key(params: Mapping, config: str | None = None) -> str:
    """A readable, unique file stem for one run: ``N=100_seed=3-<hash>``.

    The hash covers the grid point and ``config`` (the digest of the whole configuration, see
    :func:`sweep_configuration`), so runs of different configurations never share a key.

    Parameters
    ----------
    params : mapping
        The grid point.
    config : str, optional
        :func:`configuration_digest` of the sweep's configuration.

    Returns
    -------
    str
        ``name=value`` pairs joined by ``_`` (characters outside ``[A-Za-z0-9=._+-]``
        replaced by ``-``, at most 120 of them), then ``-`` and 8 hex digits of SHA-1.

    See Also
    --------
    grid_points : the points.
    configuration_digest : the digest in the key.

    Examples
    --------
    >>> from meanfield.workbench.sweeps import run_key
    >>> run_key({"N": 10, "seed": 3})
    'N=10_seed=3-aece0b01'
    >>> run_key({"N": 10, "seed": 3}, config="abc") != run_key({"N": 10, "seed": 3})
    True
    """
    text = "_".join(f"{k}={v}" for k, v in params.items())
    text = re.sub(r"[^A-Za-z0-9=._+-]", "-", text)[:120]
    payload = params if config is None else {"params": dict(params), "config": config}
    digest = hashlib.sha1(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    return f"{text}-{digest[:8]}"


def _defaults(func: Callable) -> dict:
    """The run function's parameter defaults (what a run uses for every parameter that is
    neither fixed nor on the grid), so that changing a default changes the key."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: no signature to read
        return {}
    empty = inspect.Parameter.empty
    return {p.name: _json_plain(p.default) for p in params if p.default is not empty}


def _json_plain(v):
    """``v`` as it reads back from JSON (tuples as lists); anything else (an object whose repr
    could hold a memory address) by its type name, so that the digest is reproducible."""
    v = _plain(v)
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list | tuple):
        return [_json_plain(x) for x in v]
    return f"<{type(v).__module__}.{type(v).__qualname__}>"


def sweep_configuration(func: Callable, fixed: Mapping) -> dict:
    """Everything besides the grid point that changes a run's result: the run function, the
    fixed parameters, the function's defaults for the others and the package version.

    Parameters
    ----------
    func : callable
        The run function.
    fixed : mapping
        The parameters passed to every run.

    Returns
    -------
    dict
        ``function`` (qualified name), ``fixed``, ``defaults`` (the function's defaults for
        the parameters not fixed; an object default by its type name, so the digest is
        reproducible) and ``meanfield_version``.

    See Also
    --------
    configuration_digest : its digest.
    meanfield.workbench.study_settings.KeyedAs : a run function under a recorded name.

    Examples
    --------
    >>> from meanfield.workbench.sweeps import sweep_configuration
    >>> def run(N, seed, scale=1.0, method="langevin"):
    ...     pass
    >>> config = sweep_configuration(run, {"scale": 2.0})
    >>> config["fixed"], config["defaults"]
    ({'scale': 2.0}, {'method': 'langevin'})
    """
    fixed = {str(k): _plain(v) for k, v in sorted(fixed.items())}
    return {
        "function": f"{func.__module__}.{func.__qualname__}",
        "fixed": fixed,
        "defaults": {k: v for k, v in sorted(_defaults(func).items()) if k not in fixed},
        "meanfield_version": __version__,
    }


def configuration_digest(config: Mapping) -> str:
    """A short digest of a :func:`sweep_configuration`: 12 hex digits of SHA-1 of its JSON.

    Parameters
    ----------
    config : mapping
        A configuration (JSON-serialisable; other values by their ``str``).

    Returns
    -------
    str

    See Also
    --------
    sweep_configuration : what it digests.
    meanfield.workbench.study_settings.settings_digest : both in one call.

    Examples
    --------
    >>> from meanfield.workbench.sweeps import configuration_digest
    >>> a = configuration_digest({"fixed": {"beta": 1.0}})
    >>> len(a), a == configuration_digest({"fixed": {"beta": 2.0}})
    (12, False)
    """
    return hashlib.sha1(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]


def configuration_differences(old: Mapping, new: Mapping) -> list[str]:
    """``name: old -> new`` for every parameter where two configurations differ.

    Parameters
    ----------
    old, new : mapping
        Two :func:`sweep_configuration` dicts.

    Returns
    -------
    list of str
        The run function and version first, then the fixed parameters, then the defaults
        (``default name: …``); ``'<unset>'`` marks a parameter one side lacks.

    See Also
    --------
    sweep_configuration : what it compares.

    Examples
    --------
    >>> from meanfield.workbench.sweeps import configuration_differences
    >>> configuration_differences({"fixed": {"beta": 1.0}}, {"fixed": {"beta": 2.0, "N": 8}})
    ["N: '<unset>' -> 8", 'beta: 1.0 -> 2.0']
    """
    out = []
    for k in ("function", "meanfield_version"):
        if old.get(k) != new.get(k):
            out.append(f"{k}: {old.get(k)!r} -> {new.get(k)!r}")
    a, b = old.get("fixed", {}), new.get("fixed", {})
    for k in sorted(set(a) | set(b)):
        if a.get(k, "<unset>") != b.get(k, "<unset>"):
            out.append(f"{k}: {a.get(k, '<unset>')!r} -> {b.get(k, '<unset>')!r}")
    a, b = old.get("defaults", {}), new.get("defaults", {})
    for k in sorted((set(a) | set(b)) - set(old.get("fixed", {})) - set(new.get("fixed", {}))):
        if a.get(k, "<unset>") != b.get(k, "<unset>"):
            out.append(f"default {k}: {a.get(k, '<unset>')!r} -> {b.get(k, '<unset>')!r}")
    return out


@declare(
    Param("scheduler", "string", "threads, local or a scheduler's address",
          examples=("local", "threads")),
    Param("timeout", "real", "seconds to wait for a connection to an address", low=0.0,
          low_open=True, units="s"),
)  # fmt: skip
def check_scheduler(scheduler: str, *, timeout: float = 3.0) -> str:
    """Check before any work that ``scheduler`` can run a sweep.

    ``"threads"`` needs dask, ``"local"`` needs dask.distributed; an address
    (``tcp://host:port``) needs dask.distributed and a scheduler that accepts a connection
    within ``timeout`` seconds.

    Parameters
    ----------
    scheduler : str
        ``"threads"``, ``"local"`` or an address ``tcp://host:port`` (``tls://`` too; a bare
        ``host:port`` is read as tcp).
    timeout : float, default 3
        Seconds to wait for a connection to an address.

    Returns
    -------
    str
        ``scheduler``, unchanged.

    Raises
    ------
    meanfield.errors.InputError
        Not one of the names nor an address with host and port.
    meanfield.errors.DependencyError
        dask (or dask.distributed) is missing; the message holds the install command.
    meanfield.errors.ResourceError
        The address does not accept a connection within ``timeout``.

    See Also
    --------
    run_sweep : what runs on the scheduler.

    References
    ----------
    Rocklin, M. (2015). Dask: parallel computation with blocked algorithms and task
    scheduling. Proc. 14th Python in Science Conf., 130–136.

    Examples
    --------
    >>> from meanfield.workbench.sweeps import check_scheduler
    >>> check_scheduler("threads")
    'threads'
    >>> check_scheduler("nowhere")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: scheduler must be 'local', 'threads' or an address ...
    """
    if not isinstance(scheduler, str) or not scheduler:
        raise InputError(
            f"scheduler must be 'local', 'threads' or an address tcp://host:port, got {scheduler!r}"
        )
    require_module("dask", "a sweep", DASK_INSTALL)
    if scheduler == "threads":
        return scheduler
    require_module("distributed", f"the scheduler {scheduler!r}", DASK_INSTALL)
    if scheduler == "local":
        return scheduler
    parts = urlsplit(scheduler if "://" in scheduler else "tcp://" + scheduler)
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if parts.scheme not in ("tcp", "tls") or not host or port is None:
        raise InputError(
            f"scheduler must be 'local', 'threads' or an address tcp://host:port, got {scheduler!r}"
        )
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        raise ResourceError(
            f"scheduler {scheduler!r} is not reachable within {timeout:g} s ({err}); start one "
            "with 'dask scheduler', or use --scheduler local"
        ) from None
    return scheduler


def _run_and_save(
    func: Callable, params: dict, fixed: dict, path: str, config: str | None = None
) -> str:
    """Worker side: compute one run and write it before reporting back."""
    import torch

    torch.set_num_threads(1)  # parallelism is across runs; one thread each avoids oversubscription
    ds = func(**params, **fixed)
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"the run function must return an xarray.Dataset, got {type(ds).__name__}")
    ds = ds.copy()
    ds.attrs.update({f"sweep_{k}": v for k, v in params.items()})
    # its own key (the file's name when written): a file copied under another run's name
    # is then told apart on resume (_check_run_file)
    ds.attrs["sweep_run_key"] = Path(path).name.removesuffix(".nc")
    if config is not None:
        ds.attrs["sweep_config_digest"] = config
    save_dataset(ds, path)
    return path


def _client_for(scheduler: str, n_workers: int | None):
    from distributed import Client, LocalCluster

    if scheduler == "local":
        cluster = LocalCluster(
            n_workers=n_workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        )
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout="10s"), None
    except (OSError, TimeoutError) as err:
        raise ResourceError(f"cannot connect to the dask scheduler {scheduler!r}: {err}") from None


def _check_run_file(path: Path, config: str, params: Mapping | None = None) -> str | None:
    """None if ``path`` is a complete run of configuration ``config`` at the grid point
    ``params`` (its recorded key is its name, or, in a file written before keys were recorded,
    its recorded ``sweep_<name>`` values are ``params``); else what is wrong."""
    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            attrs = dict(ds.attrs)
            ds.load()
    except Exception as err:  # noqa: BLE001 - any failure to read means "not a finished run"
        return f"unreadable ({type(err).__name__})"
    got = attrs.get("sweep_config_digest")
    if got != config:
        return f"written by another configuration ({got!r}, expected {config!r})"
    if params is None:
        return None
    key = path.name.removesuffix(".nc")
    recorded = attrs.get("sweep_run_key")
    if recorded is not None and str(recorded) != key:
        return f"holds the run {str(recorded)!r}, not {key!r} (a run file under another name)"
    wrong = [
        f"{k}={_recorded(attrs.get(f'sweep_{k}'))!r} (expected {v!r})"
        for k, v in params.items()
        if not _same_attr(attrs.get(f"sweep_{k}"), v)
    ]
    if wrong:
        return f"records another grid point: {', '.join(wrong)}"
    return None


def _recorded(value):
    """A recorded attribute as plain Python, for a message."""
    value = np.asarray(value) if value is not None else None
    return None if value is None else value.tolist()


def _same_attr(recorded, value) -> bool:
    """Whether a run file's recorded attribute is ``value`` as :func:`save_dataset` writes it."""
    if recorded is None:
        return False
    try:
        return bool(np.array_equal(np.asarray(recorded), np.asarray(_attr_value(value))))
    except (TypeError, ValueError):
        return False


def _set_aside(path: Path, why: str, notes: list) -> None:
    aside = path.parent / "set_aside"
    aside.mkdir(exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    target = aside / f"{path.name}.{stamp}"
    os.replace(path, target)
    notes.append(f"{path.name}: {why}; moved to {target} and recomputed")


def _read_manifest(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_manifest(path: Path, data: dict) -> None:
    """Write the manifest atomically (:func:`meanfield.results.save_dataset`'s writer: a fresh
    temporary file beside ``path``, synced, renamed); a failed write (a full disk) raises
    :class:`~meanfield.errors.OutputWriteError` and leaves neither a partial file nor the
    folders this call created."""
    text = json.dumps(data, indent=1, sort_keys=True, default=str).encode()
    created = _make_parents(path.parent)
    try:
        _write_atomically(memoryview(text), path)
    except BaseException:
        for folder in reversed(created):  # only the (still empty) folders made here
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


@declare(
    Param("scheduler", "string", "local (a LocalCluster), threads, or a dask scheduler's "
          "address", examples=("local", "threads")),
    Param("n_workers", "int", "processes of local or threads of threads (None: one per core)",
          low=1, optional=True),
    Param("progress", "flag", "a progress bar of runs done and left"),
    Param("on_conflict", "choice", "runs of another configuration in out_dir: keep them, or "
          "refuse", choices=("keep", "refuse")),
)  # fmt: skip
def run_sweep(
    func: Callable[..., xr.Dataset],
    grid: Mapping[str, Sequence],
    out_dir,
    *,
    fixed: Mapping | None = None,
    context: Mapping | None = None,
    scheduler: str = "local",
    n_workers: int | None = None,
    progress: bool = True,
    on_conflict: str = "keep",
    log: Callable[[str], None] | None = None,
) -> xr.Dataset:
    """Map ``func`` over ``grid``, writing each run as it finishes; resume; gather.

    Parameters
    ----------
    func : callable
        ``func(**grid_point, **fixed) -> xarray.Dataset``, module-level (it is shipped to
        worker processes), its randomness from its parameters (a ``seed`` axis), never global.
    grid : mapping of name -> list
        The swept parameters; the result has one dimension per name, in this order.
    out_dir : path
        Where ``runs/<key>.nc`` and the gathered ``sweep.nc`` are written.
    fixed : mapping, optional
        Parameters passed to every run (recorded in the attributes).
    context : mapping, optional
        Passed to every run like ``fixed`` but not part of its key: *where* the inputs and
        outputs live (folders), not *what* is computed, so moving a study's folders (another
        machine, a clone) finds its finished runs.  Identify the inputs' content in ``fixed``
        (e.g. a fingerprint of the data files), never their location.
    scheduler : {"local", "threads"} or str
        ``"local"``: a ``distributed.LocalCluster`` of single-threaded processes; ``"threads"``:
        dask's threaded scheduler in this process; else the address of a dask scheduler.
    n_workers : int, optional
        Processes of ``"local"`` or threads of ``"threads"`` (default: one per core).
    progress : bool
        A progress bar of runs done and left (with an ETA).
    on_conflict : {"keep", "refuse"}
        When ``out_dir`` holds runs of another configuration: ``"keep"`` keeps them, computes
        this one under its own keys and notes the differences; ``"refuse"`` raises (below).
    log : callable, optional
        Receives each note (other configurations, run files set aside); default: a warning.

    Returns
    -------
    xarray.Dataset
        The runs combined along the grid dimensions; ``attrs["sweep_notes"]`` holds the notes.

    Raises
    ------
    meanfield.errors.OutputPathError
        ``out_dir`` is a file or lies under one (before any work).
    meanfield.errors.DependencyError, meanfield.errors.ResourceError
        dask is missing or the scheduler is unreachable (before any work).
    meanfield.errors.SweepConflictError
        With ``on_conflict="refuse"``, naming the differences (before any work).
    meanfield.errors.InputError
        A grid value list with repeats, equal as numbers too (:func:`grid_points`).
    meanfield.errors.OutputWriteError
        A file could not be written to the end (a full disk); nothing partial is left.

    Warns
    -----
    meanfield.errors.RunFileMismatchWarning
        A run file set aside and recomputed: unreadable or partial, of another
        configuration, or of another grid point (a file copied under this run's name); sent
        to ``log`` instead when given.
    meanfield.errors.MeanfieldWarning
        ``out_dir`` also holds runs of another configuration (kept, not reused); to ``log``
        instead when given.

    See Also
    --------
    grid_points : the grid's points, checked.
    run_key : the file name of a run.
    check_scheduler : the scheduler check run first.
    gather_runs : the runs combined along the grid.

    References
    ----------
    Rocklin, M. (2015). Dask: parallel computation with blocked algorithms and task
    scheduling. Proc. 14th Python in Science Conf., 130–136.

    Examples
    --------
    A second sweep with another fixed parameter computes its own runs and notes the change:

    >>> import tempfile
    >>> import xarray as xr
    >>> from meanfield.workbench.sweeps import run_sweep
    >>> def run(N, seed, scale=1.0):
    ...     return xr.Dataset({"x": ((), scale * (N + seed))})
    >>> grid = {"N": [10, 20], "seed": [0, 1]}
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     first = run_sweep(run, grid, folder, scheduler="threads", progress=False)
    ...     notes = []
    ...     second = run_sweep(run, grid, folder, fixed={"scale": 2.0}, scheduler="threads",
    ...                        progress=False, log=notes.append)
    >>> second["x"].values.tolist(), notes[0].split("differs in: ")[1]
    ([[20.0, 22.0], [40.0, 42.0]], "scale: '<unset>' -> 2.0")
    """
    points, fixed, n_workers, out_dir = _check_arguments(
        func, grid, out_dir, fixed, scheduler, n_workers, on_conflict
    )
    context = dict(context or {})
    clash = (set(grid) | set(fixed)) & set(context)
    if clash:
        raise InputError(f"parameter(s) {sorted(clash)} are both context and swept or fixed")
    digest, notes = _register_configuration(out_dir, func, fixed, on_conflict)
    set_aside: list[str] = []
    paths, todo = _pending_runs(out_dir / "runs", points, digest, set_aside)
    _report(notes, log, MeanfieldWarning)
    _report(set_aside, log, RunFileMismatchWarning)
    notes = notes + set_aside
    every_run = {**fixed, **context}
    _compute_runs(func, todo, len(points), every_run, digest, scheduler, n_workers, progress)
    result = gather_runs(paths, points, grid)
    _save_sweep(result, out_dir, func, grid, fixed, digest, notes)
    return result


def _check_arguments(func, grid, out_dir, fixed, scheduler, n_workers, on_conflict):
    """:func:`run_sweep`'s arguments checked before any work, in this order: the grid,
    ``n_workers``, ``func``, ``on_conflict``, no parameter both swept and fixed, ``out_dir``
    (not a file nor under one) and the scheduler (:func:`check_scheduler`).  Returns the grid
    points, the fixed parameters as a dict, ``n_workers`` and ``out_dir`` as checked."""
    points = grid_points(grid)
    fixed = dict(fixed or {})
    if not callable(func):
        raise InputTypeError(f"func must be callable, got {func!r}")
    clash = set(grid) & set(fixed)
    if clash:
        raise InputError(f"parameter(s) {sorted(clash)} are both swept (grid) and fixed")
    out_dir = check_output_path("out_dir", out_dir, kind="dir")
    check_scheduler(scheduler)
    return points, fixed, n_workers, out_dir


def _report(notes: list, log, category=MeanfieldWarning) -> None:
    """Each note to ``log``, or as a warning of ``category`` pointing at :func:`run_sweep`'s
    caller."""
    for note in notes:
        if log is None:
            # run_sweep's caller: above _report, run_sweep and the contract's checking wrapper
            warnings.warn(note, category, stacklevel=4)
        else:
            log(note)


def _save_sweep(result: xr.Dataset, out_dir: Path, func, grid, fixed, digest, notes) -> None:
    """Give the gathered ``result`` its attributes (the grid, the fixed parameters, the run
    function, the configuration digest, the notes, the attributes every run shares as
    ``run_<name>``, and the provenance) and write it to ``out_dir/sweep.nc``; the notes stay
    a list in memory."""
    result.attrs = provenance(
        {
            "sweep_grid": {k: list(map(_plain, v)) for k, v in grid.items()},
            "sweep_fixed": {k: _plain(v) for k, v in fixed.items()},
            "sweep_function": f"{func.__module__}.{func.__qualname__}",
            "sweep_config_digest": digest,
            "sweep_notes": notes,
            **{f"run_{k}": v for k, v in _common_attrs(result).items()},
        },
        seed=None,
    )
    save_dataset(result, out_dir / "sweep.nc")
    result.attrs["sweep_notes"] = notes


def _register_configuration(out_dir: Path, func, fixed: dict, on_conflict: str):
    """Record the sweep's configuration (:func:`sweep_configuration` of ``func`` and
    ``fixed``) in the folder's manifest; returns its digest and notes on the others there.

    Refuses (before any work) with ``on_conflict="refuse"`` when other configurations are
    present; otherwise returns one note per other configuration, naming how it differs.
    """
    config = sweep_configuration(func, fixed)
    digest = configuration_digest(config)
    manifest_path = out_dir / MANIFEST
    manifest = _read_manifest(manifest_path)
    others = {d: c for d, c in manifest.items() if d != digest}
    diffs = {d: "; ".join(configuration_differences(c, config)) for d, c in others.items()}
    if diffs and on_conflict == "refuse":
        raise SweepConflictError(
            f"{out_dir} holds runs of {len(diffs)} other configuration(s), differing in: "
            + " | ".join(f"({d}) {text}" for d, text in diffs.items())
            + ". Use another output folder, or on_conflict='keep' to add this one."
        )
    notes = [
        f"{out_dir} also holds runs of another configuration ({d}), kept and not reused; "
        f"it differs in: {text}"
        for d, text in diffs.items()
    ]
    manifest[digest] = config
    _write_manifest(manifest_path, manifest)  # first: a full disk leaves no empty folder
    (out_dir / "runs").mkdir(parents=True, exist_ok=True)
    return digest, notes


def _pending_runs(runs_dir: Path, points: list, digest: str, notes: list):
    """The run file of each grid point (``runs_dir/<key>.nc``, :func:`run_key` under the
    configuration ``digest``), and the (point, path) pairs still to compute: absent, partial
    or foreign run files (another configuration's, or another grid point's: a run file copied
    under this run's name).

    Partial writes and files of another configuration are set aside (and noted in ``notes``),
    never overwritten, so an interrupted sweep resumes without losing finished work.
    """
    paths = [str(runs_dir / f"{run_key(p, digest)}.nc") for p in points]
    for part in sorted(runs_dir.glob("*.part")):
        _set_aside(part, "a partial write (the run was interrupted)", notes)
    todo = []
    for p, path in zip(points, paths, strict=True):
        if Path(path).exists():
            why = _check_run_file(Path(path), digest, p)
            if why is None:
                continue
            _set_aside(Path(path), why, notes)
        todo.append((p, path))
    return paths, todo


def _compute_runs(func, todo, n_total, fixed, digest, scheduler, n_workers, progress):
    """Compute and write each pending run of ``todo`` on the chosen dask scheduler, with a
    progress bar over all ``n_total`` runs (those already on disk count as done)."""
    done = n_total - len(todo)
    bar = tqdm(total=n_total, initial=done, disable=not progress, desc="sweep", unit="run")
    if todo:
        jobs = [(func, p, fixed, path, digest) for p, path in todo]  # _run_and_save's arguments
        if scheduler == "threads":
            _compute_threaded(jobs, n_workers, bar)
        else:
            _compute_distributed(jobs, scheduler, n_workers, bar)
    bar.close()


def _compute_threaded(jobs: list, n_workers, bar) -> None:
    """Run ``_run_and_save(*job)`` for each job on dask's threaded scheduler, ticking ``bar``
    as each run is written."""
    import dask
    from dask.callbacks import Callback

    class _Bar(Callback):
        def _posttask(self, key, result, dsk, state, id):
            if isinstance(result, str) and result.endswith(".nc"):
                bar.update(1)

    # named by grid position (dask orders independent tasks by descending key), so runs start
    # in grid order: a partial sweep holds the first grid points, and consecutive runs that
    # share work (a study's warm-up) run one after the other
    n = len(jobs)
    tasks = [
        dask.delayed(_run_and_save)(*job, dask_key_name=f"sweep-run-{n - i:09d}")
        for i, job in enumerate(jobs)
    ]
    with _Bar():
        dask.compute(*tasks, scheduler="threads", num_workers=n_workers)


def _compute_distributed(jobs: list, scheduler: str, n_workers, bar) -> None:
    """Run ``_run_and_save(*job)`` for each job on a dask.distributed cluster (a local one, or
    the scheduler at the address ``scheduler``), ticking ``bar`` as each run finishes."""
    from distributed import as_completed

    client, cluster = _client_for(scheduler, n_workers)
    try:
        futures = [client.submit(_run_and_save, *job, pure=False) for job in jobs]
        for fut in as_completed(futures):
            fut.result()  # re-raise a failed run here, with its traceback
            bar.update(1)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def _common_attrs(ds: xr.Dataset) -> dict:
    return {k: v for k, v in ds.attrs.items() if not k.startswith("sweep_")}


def gather_runs(paths: Sequence, points: Sequence[Mapping], grid: Mapping) -> xr.Dataset:
    """Combine per-run datasets into one with a dimension per grid parameter.

    Parameters
    ----------
    paths : sequence of path
        One netCDF file per grid point, in the order of ``points``.
    points : sequence of mapping
        The grid points, as :func:`grid_points` gives them for ``grid``.
    grid : mapping of str to sequence
        The grid.

    Returns
    -------
    xarray.Dataset
        The runs combined along the grid dimensions (outer join: runs of different sizes,
        such as the particle axis across N, are padded with NaN); the attributes common to
        every run (less ``created``).

    See Also
    --------
    run_sweep : writes the runs.
    grid_points : the points of the grid.

    Examples
    --------
    >>> import os, tempfile
    >>> import xarray as xr
    >>> from meanfield.results import save_dataset
    >>> from meanfield.workbench.sweeps import gather_runs, grid_points
    >>> grid = {"N": [1, 2]}
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     runs = [xr.Dataset({"x": ("particle", [0.0] * p["N"])},
    ...                        coords={"particle": range(p["N"])}) for p in grid_points(grid)]
    ...     paths = [save_dataset(run, os.path.join(folder, f"{i}.nc"))
    ...              for i, run in enumerate(runs)]
    ...     ds = gather_runs(paths, grid_points(grid), grid)
    >>> ds["x"].values.tolist()
    [[0.0, nan], [0.0, 0.0]]
    """
    runs = []
    for path, p in zip(paths, points, strict=True):
        ds = load_dataset(path)
        attrs = ds.attrs
        ds = ds.expand_dims({k: [v] for k, v in p.items()})
        ds.attrs = attrs
        runs.append(ds)
    shape = [len(v) for v in grid.values()]
    nested = np.empty(shape, dtype=object)
    for idx, ds in zip(itertools.product(*[range(n) for n in shape]), runs, strict=True):
        nested[idx] = ds
    # runs may differ in size (e.g. the particle axis across N): pad with NaN on the outer join
    combined = xr.combine_nested(
        nested.tolist(),
        concat_dim=list(grid),
        combine_attrs="drop",
        join="outer",
        fill_value=np.nan,
    )
    keep = {
        k: v
        for k, v in runs[0].attrs.items()
        if all(np.array_equal(np.asarray(r.attrs.get(k)), np.asarray(v)) for r in runs)
        and k not in ("created",)
    }
    combined.attrs = keep
    return combined
