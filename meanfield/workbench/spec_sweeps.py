"""Sweeps over a run specification: any field of its plain-data description on an axis.

:func:`run_spec_sweep` takes a :class:`~meanfield.dynamics.spec.RunSpec` and axes — dotted
paths into its description (:func:`meanfield.to_dict`), list indices allowed
(``"energy.terms[1].lam"``) — and runs :func:`meanfield.simulate` at every point of their
product through :func:`~meanfield.workbench.sweeps.run_sweep` (a run file per point, resume,
the configuration digest), gathering one dataset with the axes as dimensions. A sweep file
(``type = "Sweep"``: a ``[spec]`` table and an ``[axes]`` table) is the same sweep as data,
run by ``meanfield run FILE --out DIR``.

See Also
--------
meanfield.workbench.sweeps.run_sweep : the sweep machinery this builds on.
meanfield.dynamics.description : the plain-data description the axes point into.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import xarray as xr

from .._validation import check_output_path
from ..contract import Param, declare
from ..errors import (
    InputError,
    InputTypeError,
)
from .sweeps import _plain, grid_points, run_sweep

#: What a swept field holds in the description kept in the sweep's configuration (each
#: point sets its own value there), so that the configuration digest, and hence the run
#: keys, depend on the fixed part of the spec only, not on the base value of a swept field.
SWEPT = "<swept>"

#: One part of a path into a description: a key, then list indices (``terms[1]``).
_PATH_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)((?:\[[0-9]+\])*)$")


def description_path(path: str) -> list:
    """The keys and list indices of a dotted path into a description.

    Parameters
    ----------
    path : str
        Dict keys joined by dots, each followed by any list indices:
        ``"energy.terms[1].lam"``, ``"initial.grid.n[0]"``, ``"beta"``.

    Returns
    -------
    list of str and int

    Raises
    ------
    meanfield.errors.InputError
        An empty path, or a part that is not ``name`` or ``name[i]...`` (named).

    See Also
    --------
    simulate_point : one point of a sweep.

    Examples
    --------
    >>> from meanfield.workbench.spec_sweeps import description_path
    >>> description_path("energy.terms[1].lam")
    ['energy', 'terms', 1, 'lam']
    >>> description_path("energy..lam")
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: axes: 'energy..lam' is not a path into the description: ...
    """
    keys: list = []
    parts = path.split(".") if isinstance(path, str) and path else [""]
    for part in parts:
        m = _PATH_PART.match(part)
        if m is None:
            raise InputError(
                f"axes: {path!r} is not a path into the description: write dict keys joined "
                "by dots, each with any list indices ('energy.terms[1].lam', 'beta')"
            )
        keys.append(m.group(1))
        keys += [int(i) for i in re.findall(r"\[([0-9]+)\]", m.group(2))]
    return keys


def _shown_path(keys: list) -> str:
    out = ""
    for k in keys:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else k)
    return out


def _resolve(description: dict, path: str):
    """The value at ``path`` in ``description``; a path that does not exist is refused by
    name, with what exists where it stops."""
    node = description
    keys = description_path(path)
    for i, key in enumerate(keys):
        where = _shown_path(keys[:i]) or "the spec"
        if isinstance(key, int):
            if not isinstance(node, list):
                raise InputError(
                    f"axes: {path!r} does not exist in the spec's description: {where} is not "
                    f"a list (it holds {node!r:.60}), so it has no [{key}]"
                )
            if key >= len(node):
                raise InputError(
                    f"axes: {path!r} does not exist in the spec's description: {where} holds "
                    f"{len(node)} item(s), indices 0 to {len(node) - 1}"
                )
        elif not isinstance(node, dict) or key not in node:
            if not isinstance(node, dict):
                raise InputError(
                    f"axes: {path!r} does not exist in the spec's description: {where} is "
                    f"not a table (it holds {node!r:.60}), so it has no {key!r}"
                )
            raise InputError(
                f"axes: {path!r} does not exist in the spec's description: {where} has no "
                f"field {key!r}; its fields: {', '.join(map(str, node))}"
            )
        node = node[key]
    return node


def _with_values(description: dict, values: Mapping) -> dict:
    """A copy of ``description`` with the value at each path of ``values`` replaced."""
    out = json.loads(json.dumps(description))  # a deep copy of plain data
    for path, value in values.items():
        keys = description_path(path)
        node = out
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return out


def _flat_axes(axes: Mapping, prefix: str = "") -> dict:
    """Nested tables of axes (TOML's ``[axes.energy]``, or ``energy.lam = [...]`` unquoted)
    flattened to dotted paths."""
    out = {}
    for key, values in axes.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(values, Mapping):
            out.update(_flat_axes(values, path))
        else:
            out[path] = values
    return out


def _axis_value(path: str, i: int, value, current):
    """One value of an axis, checked against the type of the field it replaces: a number for
    a number (an integer for an integer; an integer for a real is read as that real), a
    string for a string, a boolean for a boolean; a field that is None takes any number or
    string (the spec checks it)."""
    where = f"axes[{path!r}][{i}]"
    value = _plain(value)
    if isinstance(current, (dict, list)):
        kind = "a table" if isinstance(current, dict) else "a list"
        raise InputTypeError(
            f"axes: {path!r} holds {kind} in the spec's description, not a number or a name; "
            "sweep a field inside it (e.g. 'energy.terms[1].lam', 'initial.grid.n[0]')"
        )
    if value is None or not isinstance(value, (bool, int, float, str)):
        raise InputTypeError(
            f"{where} must be a number, a string or a boolean (a value of the field {path!r}), "
            f"got {value!r}"
        )
    if current is None:
        return value
    if isinstance(current, bool):
        ok, expected = isinstance(value, bool), "a boolean (true or false)"
    elif isinstance(current, int):  # a boolean is not a count
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(current, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        expected = "a real number"
        if ok:
            value = float(value)
    else:
        ok, expected = isinstance(value, str), "a string"
    if not ok:
        raise InputTypeError(
            f"{where} must be {expected}, as the field {path!r} of the spec "
            f"(= {current!r}), got {value!r}"
        )
    return value


def check_axes(description: dict, axes: Mapping, *, seeds: Sequence | None = None) -> dict:
    """The axes of a spec sweep, checked against the spec's description before any work.

    Parameters
    ----------
    description : dict
        :func:`meanfield.dynamics.description.to_dict` of a
        :class:`~meanfield.dynamics.spec.RunSpec`.
    axes : mapping of str to list
        Path into the description (``"beta"``, ``"energy.terms[1].lam"``) -> the values it
        takes; nested mappings are read as dotted paths.
    seeds : sequence of int, optional
        Values of the axis ``"seed"`` (added last).

    Returns
    -------
    dict
        Path -> list of values, in the order given, each of the type of the field it
        replaces (an integer given for a real field as that real).

    Raises
    ------
    meanfield.errors.InputError
        No axis, an empty list of values, repeated values (equal as numbers too), a path
        that does not exist in the description, or ``seeds`` with a ``"seed"`` axis.
    meanfield.errors.InputTypeError
        A value of the wrong type for its field, or an axis on a table or a list (sweep a
        field inside it).

    See Also
    --------
    run_spec_sweep : the sweep these axes drive.

    Examples
    --------
    >>> from meanfield.workbench.spec_sweeps import check_axes
    >>> check_axes({"type": "RunSpec", "beta": 1.0, "n_steps": 5}, {"beta": [1, 2.5]})
    {'beta': [1.0, 2.5]}
    >>> check_axes({"type": "RunSpec", "beta": 1.0, "n_steps": 5}, {"n_steps": [5, 7.5]})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputTypeError: axes['n_steps'][1] must be an integer, as the field ...
    """
    if not isinstance(axes, Mapping):
        raise InputTypeError(f"axes must be a dict of path -> list of values, got {axes!r}")
    axes = _flat_axes(axes)
    if seeds is not None:
        if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
            raise InputTypeError(f"seeds must be a list of integers (the seed axis), got {seeds!r}")
        if "seed" in axes:
            raise InputError("seeds: the axes already sweep 'seed'; give one or the other")
        axes["seed"] = seeds
    if not axes:
        raise InputError(
            "axes must name at least one field of the spec with a list of values "
            "({'beta': [1.0, 10.0]})"
        )
    checked = {}
    for path, values in axes.items():
        current = _resolve(description, path)
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise InputTypeError(
                f"axes[{path!r}] must be a non-empty list of values, got {values!r}"
            )
        if len(values) == 0:
            raise InputError(f"axes[{path!r}] must be a non-empty list of values, got []")
        checked[path] = [_axis_value(path, i, v, current) for i, v in enumerate(values)]
    grid_points(checked)  # repeats refused by name (equal as numbers too)
    return checked


def simulate_point(description: dict, record_every: int | None = None, **point) -> xr.Dataset:
    """One run of a spec sweep: the spec that ``description`` gives with the swept fields
    set to ``point``, simulated (:func:`meanfield.dynamics.langevin.simulate`).

    Parameters
    ----------
    description : dict
        A RunSpec's description (:func:`~meanfield.dynamics.description.to_dict`).
    record_every : int, optional
        Steps between records (default: about 100 records).
    **point
        Path -> value (:func:`run_spec_sweep`'s axes).

    Returns
    -------
    xarray.Dataset
        ``simulate(from_dict(description with point))``: bit for bit the direct run.

    See Also
    --------
    run_spec_sweep : the sweep of such points.
    meanfield.dynamics.langevin.simulate : the run of one point.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.dynamics.description import to_dict
    >>> from meanfield.dynamics.spec import RunSpec
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> spec = RunSpec(energy=Energy([QuadraticPotential()], Box(1, 2.0)),
    ...                initial=np.zeros((4, 1)), beta=1.0, eta=0.01, n_steps=3)
    >>> ds = simulate_point(to_dict(spec), beta=2.0)
    >>> float(ds.attrs["beta"]), ds.sizes["time"]
    (2.0, 4)
    """
    from ..dynamics.description import from_dict
    from ..dynamics.langevin import simulate

    spec = from_dict(_with_values(description, point))
    return simulate(spec, record_every=record_every, progress=False)


def _spec_description(spec) -> dict:
    from ..dynamics.description import to_dict
    from ..dynamics.spec import RunSpec

    if isinstance(spec, Mapping):
        if spec.get("type") != "RunSpec":
            raise InputError(
                f'spec: a description must be of a RunSpec (type = "RunSpec"), got type = '
                f"{spec.get('type')!r}"
            )
        return json.loads(json.dumps(dict(spec)))
    if not isinstance(spec, RunSpec):
        raise InputTypeError(
            f"spec must be a meanfield.dynamics.spec.RunSpec or its description, got {spec!r:.80}"
        )
    return to_dict(spec)


def _build_points(description: dict, axes: dict) -> list:
    """Every point's spec, built and checked before any run: an out-of-range value or a
    description the package refuses is named with its point."""
    from ..dynamics.description import from_dict
    from ..errors import MeanfieldError

    specs = []
    for point in grid_points(axes):
        try:
            specs.append(from_dict(_with_values(description, point)))
        except MeanfieldError as err:
            shown_point = ", ".join(f"{k} = {v!r}" for k, v in point.items())
            raise type(err)(f"sweep point {shown_point}: {err}") from None
    return specs


@declare(
    Param("record_every", "int", "steps between records (None: about 100 records)", low=1,
          optional=True),
    Param("scheduler", "string", "local (a LocalCluster), threads, or a dask scheduler's "
          "address", examples=("local", "threads")),
    Param("n_workers", "int", "processes of local or threads of threads (None: one per core)",
          low=1, optional=True),
    Param("progress", "flag", "a progress bar of runs done and left"),
    Param("on_conflict", "choice", "runs of another configuration in out_dir: keep them, or "
          "refuse", choices=("keep", "refuse")),
)  # fmt: skip
def run_spec_sweep(
    spec,
    axes: Mapping[str, Sequence],
    out_dir,
    *,
    seeds: Sequence[int] | None = None,
    record_every: int | None = None,
    scheduler: str = "local",
    n_workers: int | None = None,
    progress: bool = True,
    on_conflict: str = "keep",
    log: Callable[[str], None] | None = None,
) -> xr.Dataset:
    r"""Simulate a run specification over axes of any of its fields; resume; gather.

    Each axis is a path into the spec's plain-data description
    (:func:`meanfield.dynamics.description.to_dict`) with the values it takes: a run
    parameter (``"beta"``, ``"n_particles"``, ``"seed"``), a parameter of a term
    (``"energy.terms[1].lam"``, ``"energy.terms[1].kernel.s"``), of the domain
    (``"energy.domain.half_width"``) or of the initial law.  Each point of the Cartesian
    product of the axes is the description with those fields set, rebuilt by
    :func:`~meanfield.dynamics.description.from_dict` and run by
    :func:`meanfield.dynamics.langevin.simulate`, so it is the direct run
    ``simulate(spec.replace(...))`` bit for bit.  The runs go through :func:`run_sweep`: one
    file per point under ``out_dir/runs``, keyed by the point and a digest of the spec's
    description (less its swept fields), so a rerun resumes and a changed spec never reuses
    a stale run.

    Parameters
    ----------
    spec : RunSpec or dict
        The run, or its description (``type = "RunSpec"``).
    axes : mapping of str to list
        Path -> values; the result has one dimension per path, in this order (``seeds``
        last).  Nested mappings are read as dotted paths.
    out_dir : path
        The sweep folder: ``runs/<key>.nc``, ``sweep.nc``, ``configurations.json``.
    seeds : sequence of int, optional
        Shorthand for the axis ``"seed"`` (the seed of the initial sample and the noise).
    record_every : int, optional
        Steps between records of every run (default: about 100 records).
    scheduler, n_workers, progress, on_conflict, log :
        As :func:`run_sweep`.

    Returns
    -------
    xarray.Dataset
        What ``simulate`` returns (``omega`` over time, particle, dim; the energies over
        time), with one more dimension per axis (runs of different N or number of records
        padded with NaN); ``attrs["sweep_fixed"]`` holds the description (JSON), the swept
        fields marked ``"<swept>"``.

    Raises
    ------
    meanfield.errors.InputError
        No axis, an empty or repeated list of values, a path that is not in the
        description (named, with the fields that are), or a point the spec refuses (named
        with its values: ``beta = -1.0`` ...); all before any run.
    meanfield.errors.InputTypeError
        ``spec`` not a RunSpec, a value of the wrong type for its field (a string for
        ``beta``, a real for ``n_steps``), an axis on a table or a list.
    meanfield.errors.SizeLimitError
        A point whose estimated work exceeds the ceiling
        (:data:`meanfield.dynamics.spec.MAX_WORK`).

    See Also
    --------
    run_sweep : the machinery (run files, resume, configuration digest, dask).
    check_axes : the axes' check.
    read_sweep_file : the same sweep from a TOML file (``meanfield run FILE``).
    meanfield.dynamics.spec.RunSpec : the run.

    References
    ----------
    Rocklin, M. (2015). Dask: parallel computation with blocked algorithms and task
    scheduling. Proc. 14th Python in Science Conf., 130–136.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.dynamics.spec import RunSpec
    >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.workbench.spec_sweeps import run_spec_sweep
    >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), lam=0.5)], Box(1, 2.0))
    >>> spec = RunSpec(energy=E, initial=np.linspace(-1, 1, 6)[:, None], beta=10.0,
    ...                eta=0.01, n_steps=5)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     ds = run_spec_sweep(spec, {"energy.terms[1].lam": [0.25, 0.5], "beta": [1, 10]},
    ...                     folder, seeds=[0, 1], scheduler="threads", progress=False)
    >>> ds["omega"].dims
    ('energy.terms[1].lam', 'beta', 'seed', 'time', 'particle', 'dim')
    >>> run_spec_sweep(spec, {"energy.terms[2].lam": [0.5]}, "out")
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: axes: 'energy.terms[2].lam' does not exist in the spec's ...
    """
    description = _spec_description(spec)
    axes = check_axes(description, axes, seeds=seeds)
    _build_points(description, axes)  # every point checked before any run
    fixed_part = _with_values(description, dict.fromkeys(axes, SWEPT))
    # the sweep's warnings (and the runs') re-sent to point at the caller of run_spec_sweep, not
    # at this line (run_sweep points at its own caller)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_sweep(
            simulate_point,
            axes,
            out_dir,
            fixed={"description": fixed_part, "record_every": record_every},
            scheduler=scheduler,
            n_workers=n_workers,
            progress=progress,
            on_conflict=on_conflict,
            log=log,
        )
    for w in caught:  # above this frame: the contract's checking wrapper, then the caller
        warnings.warn(w.message, w.category, stacklevel=3)
    return result


#: The keys of a sweep file (``type = "Sweep"``) besides ``type``.
SWEEP_FILE_KEYS = ("spec", "axes", "seeds", "record_every", "scheduler", "n_workers")


def read_sweep_file(path) -> dict:
    """The sweep a TOML file describes: ``type = "Sweep"``, a ``[spec]`` table (a RunSpec's
    description, as :meth:`~meanfield.dynamics.spec.RunSpec.to_toml` writes it at the top
    level) and an ``[axes]`` table (path -> values); optionally ``seeds``, ``record_every``,
    ``scheduler`` and ``n_workers``.

    Parameters
    ----------
    path : str or path-like
        The file (UTF-8 TOML).  Its ``"module:Class"`` names are imported: read only files
        you trust.

    Returns
    -------
    dict
        The keyword arguments of :func:`run_spec_sweep` (``spec`` the description, ``axes``
        flattened to dotted paths), the axes checked against the description
        (:func:`check_axes`; :func:`run_spec_sweep` builds and checks every point).

    Raises
    ------
    meanfield.errors.MissingFileError
        No such file.
    meanfield.errors.InputError
        Not a file, not TOML, not ``type = "Sweep"``, an unknown key, no ``[spec]`` or
        ``[axes]`` table, or what :func:`run_spec_sweep` refuses (named).

    See Also
    --------
    write_sweep_file : writes one.
    run_spec_sweep : runs it.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from meanfield.workbench.spec_sweeps import read_sweep_file
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sweep.toml"
    >>> _ = path.write_text('type = "Sweep"\\n[axes]\\nbeta = [1.0]\\n')
    >>> read_sweep_file(path)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: sweep file ...: no [spec] table (the RunSpec's description, ...
    """
    import tomllib

    from ..errors import MissingFileError

    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"sweep file {path} does not exist")
    if not path.is_file():
        raise InputError(f"sweep file {path} is not a file (a TOML file is expected)")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise InputError(f"sweep file {path} is not valid TOML: {err}") from None
    if raw.get("type") != "Sweep":
        raise InputError(f'sweep file {path}: type must be "Sweep", got {raw.get("type")!r}')
    unknown = sorted(set(raw) - {"type", *SWEEP_FILE_KEYS})
    if unknown:
        raise InputError(
            f"sweep file {path}: unknown key(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(SWEEP_FILE_KEYS)}"
        )
    for table, what in (("spec", "the RunSpec's description"), ("axes", "path = [values]")):
        if not isinstance(raw.get(table), dict):
            raise InputError(f"sweep file {path}: no [{table}] table ({what}, {table!r} key)")
    settings = {k: raw[k] for k in SWEEP_FILE_KEYS if k in raw}
    axes = _flat_axes(settings["axes"])
    settings["axes"] = axes
    description = _spec_description(settings["spec"])
    check_axes(description, axes, seeds=settings.get("seeds"))
    return settings


def write_sweep_file(path, spec, axes: Mapping, *, seeds=None, record_every=None) -> Path:
    """Write a sweep file (``type = "Sweep"``) that :func:`read_sweep_file` and
    ``meanfield run FILE --out DIR`` read.

    Parameters
    ----------
    path : str or path-like
        The file, created or replaced.
    spec : RunSpec or dict
        The run (or its description).
    axes : mapping of str to list
        As :func:`run_spec_sweep` (checked here).
    seeds : sequence of int, optional
    record_every : int, optional

    Returns
    -------
    pathlib.Path

    See Also
    --------
    read_sweep_file : reads it back.
    meanfield.dynamics.description.toml_text : the TOML writer.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.dynamics.spec import RunSpec
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.workbench.spec_sweeps import read_sweep_file, write_sweep_file
    >>> spec = RunSpec(energy=Energy([QuadraticPotential()], Box(1, 2.0)),
    ...                initial=np.zeros((4, 1)), beta=1.0, eta=0.01, n_steps=3)
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sweep.toml"
    >>> path = write_sweep_file(path, spec, {"energy.terms[0].strength": [0.5, 2.0]})
    >>> print(path.read_text().split("[spec]")[0])
    type = "Sweep"
    <BLANKLINE>
    [axes]
    "energy.terms[0].strength" = [0.5, 2.0]
    <BLANKLINE>
    <BLANKLINE>
    >>> read_sweep_file(path)["axes"]
    {'energy.terms[0].strength': [0.5, 2.0]}
    """
    from ..dynamics.description import toml_text

    description = _spec_description(spec)
    checked = check_axes(description, axes, seeds=seeds)
    if seeds is not None:
        checked.pop("seed")
    doc = {"type": "Sweep", "axes": checked, "spec": description}
    if seeds is not None:
        doc["seeds"] = list(seeds)
    if record_every is not None:
        doc["record_every"] = record_every
    # plain values (seeds, record_every) before the tables: TOML reads a key after a table
    # header as the table's
    doc = {k: doc[k] for k in ("type", "seeds", "record_every", "axes", "spec") if k in doc}
    path = check_output_path("path", path, kind="file")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(toml_text(doc), encoding="utf-8")
    return path


def run_sweep_file(
    path,
    out_dir,
    *,
    scheduler: str | None = None,
    n_workers: int | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> xr.Dataset:
    """Run the sweep a file describes (:func:`read_sweep_file`): what ``meanfield run FILE
    --out DIR`` does for ``type = "Sweep"``.

    Parameters
    ----------
    path : str or path-like
        The sweep file.
    out_dir : path
        The sweep folder.
    scheduler, n_workers : optional
        Replace the file's (default ``"local"``, one worker per core).
    progress : bool, default True
    log : callable, optional
        As :func:`run_sweep`.

    Returns
    -------
    xarray.Dataset
        As :func:`run_spec_sweep`.

    See Also
    --------
    run_spec_sweep : the sweep itself.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.dynamics.spec import RunSpec
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.workbench.spec_sweeps import run_sweep_file, write_sweep_file
    >>> spec = RunSpec(energy=Energy([QuadraticPotential()], Box(1, 2.0)),
    ...                initial=np.zeros((4, 1)), beta=1.0, eta=0.01, n_steps=3)
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> path = write_sweep_file(folder / "sweep.toml", spec, {"beta": [1.0, 4.0]})
    >>> ds = run_sweep_file(path, folder / "out", scheduler="threads", progress=False)
    >>> ds["omega"].dims[:2], sorted(p.name for p in (folder / "out").iterdir())
    (('beta', 'time'), ['configurations.json', 'runs', 'sweep.nc'])
    """
    settings = read_sweep_file(path)
    return run_spec_sweep(
        settings["spec"],
        settings["axes"],
        out_dir,
        seeds=settings.get("seeds"),
        record_every=settings.get("record_every"),
        scheduler=scheduler or settings.get("scheduler", "local"),
        n_workers=n_workers if n_workers is not None else settings.get("n_workers"),
        progress=progress,
        log=log,
    )
