"""Labelled results: provenance attributes and netCDF input/output for xarray datasets.

Every simulation and study returns an :class:`xarray.Dataset` whose attributes hold all
parameters, the seed, the package version and a timestamp (:func:`provenance`);
:func:`save_dataset` writes it atomically and :func:`load_dataset` reads it back.

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> import xarray as xr
>>> from meanfield.results import load_dataset, provenance, save_dataset
>>> ds = xr.Dataset({"w2": ("N", np.array([0.1, 0.05]))}, coords={"N": [100, 400]},
...                 attrs=provenance({"beta": 2.0, "regime": "mean-field"}, seed=0))
>>> with tempfile.TemporaryDirectory() as folder:
...     back = load_dataset(save_dataset(ds, os.path.join(folder, "run.nc")))
>>> back["w2"].values.tolist(), float(back.attrs["beta"]), str(back.attrs["regime"])
([0.1, 0.05], 2.0, 'mean-field')
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
from pathlib import Path

import numpy as np
import xarray as xr

from ._version import __version__
from .errors import DataFileError, MissingFileError


def _attr_value(v):
    """A netCDF-safe attribute value (str, number or 1-D numeric array)."""
    if v is None:
        return "none"
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, str):
        return str(v)  # numpy's str_ (a grid of strings) has no HDF5 type
    if isinstance(v, (int, float, np.integer, np.floating)):
        return v
    if isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v) and v:
        return np.asarray(v)
    return json.dumps(v, default=str)


def provenance(params: dict, *, seed: int | None) -> dict:
    """Dataset attributes: every parameter, the seed, the package version and a timestamp.

    Parameters
    ----------
    params : dict
        Parameters by name. Values become netCDF-safe: numbers and strings stay, booleans
        become 0/1, ``None`` becomes ``"none"``, numeric lists become arrays and anything
        else its JSON text.
    seed : int or None
        The run's seed (``"none"`` when None).

    Returns
    -------
    dict
        The converted parameters plus ``seed``, ``meanfield_version`` and ``created`` (UTC,
        ISO 8601).

    See Also
    --------
    merge_attrs : the parameters with extra attributes.
    save_dataset : the dataset written with them.
    meanfield.dynamics.description.to_dict : a model's description.

    Examples
    --------
    >>> from meanfield.results import provenance
    >>> attrs = provenance({"N": 100, "exact": True, "batch": None}, seed=3)
    >>> attrs["N"], attrs["exact"], attrs["batch"], attrs["seed"]
    (100, 1, 'none', 3)
    >>> sorted(attrs)
    ['N', 'batch', 'created', 'exact', 'meanfield_version', 'seed']
    """
    attrs = {k: _attr_value(v) for k, v in params.items()}
    attrs["seed"] = "none" if seed is None else int(seed)
    attrs["meanfield_version"] = __version__
    attrs["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return attrs


#: Attributes :func:`provenance` writes itself: no parameter and no extra attribute may
#: bear these names.
PROVENANCE_ATTRS = ("seed", "meanfield_version", "created")


def check_extra_attrs(extra, recorded=(), *, name: str = "extra_attrs") -> dict:
    """The caller's extra dataset attributes, checked before a run: a mapping whose keys are
    strings and none of which is a recorded parameter.

    A run records its parameters (β, η, N, the energy's description...) and
    :data:`PROVENANCE_ATTRS` as attributes; an extra attribute of the same name would
    silently overwrite the recorded value (``extra_attrs={"beta": 99}`` saved a run at β = 1
    as one at β = 99), so it is refused.

    Parameters
    ----------
    extra : mapping or None
        Attribute name -> value (None: no extra attribute).
    recorded : iterable of str
        The names the run records (a dict gives its keys).
    name : str, default "extra_attrs"
        Name of the parameter, quoted in the error message.

    Returns
    -------
    dict
        A copy of ``extra`` (empty for None).

    Raises
    ------
    meanfield.errors.InputTypeError
        ``extra`` is not a mapping, or a key is not a string.
    meanfield.errors.InputError
        A key is a recorded parameter or a provenance attribute; the message lists them.

    See Also
    --------
    merge_attrs : the recorded parameters and the checked extra attributes in one dict.

    Examples
    --------
    >>> from meanfield.results import check_extra_attrs
    >>> check_extra_attrs({"study": "demo"}, ["beta", "eta"])
    {'study': 'demo'}
    >>> check_extra_attrs({"beta": 99}, ["beta", "eta"])
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: extra_attrs may not set the recorded parameter(s) 'beta': ...
    """
    from collections.abc import Mapping

    from .errors import InputError, InputTypeError

    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise InputTypeError(f"{name} must be a dict of attributes, got {type(extra).__name__}")
    bad = [k for k in extra if not isinstance(k, str)]
    if bad:
        raise InputTypeError(f"{name} keys must be strings, got {bad!r}")
    taken = set(recorded) | set(PROVENANCE_ATTRS)
    clash = sorted(k for k in extra if k in taken)
    if clash:
        raise InputError(
            f"{name} may not set the recorded parameter(s) {', '.join(map(repr, clash))}: the "
            "run records its own value there; give the extra attribute another name (e.g. "
            f"{'user_' + clash[0]!r})"
        )
    return dict(extra)


def merge_attrs(params: dict, extra, *, name: str = "extra_attrs") -> dict:
    """``params`` followed by the extra attributes ``extra``, none of which may overwrite a
    parameter (:func:`check_extra_attrs`).

    Parameters
    ----------
    params : dict
        The recorded parameters.
    extra : mapping or None
        The caller's extra attributes.
    name : str, default "extra_attrs"
        Name of the parameter, quoted in the error message.

    Returns
    -------
    dict

    See Also
    --------
    check_extra_attrs : the checks on the extra attributes.
    provenance : the parameters as attributes.

    Examples
    --------
    >>> from meanfield.results import merge_attrs
    >>> merge_attrs({"beta": 2.0}, {"note": "x"})
    {'beta': 2.0, 'note': 'x'}
    """
    return {**params, **check_extra_attrs(extra, params, name=name)}


def save_dataset(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` to netCDF atomically: serialised in memory, written to a temporary file
    beside ``path``, renamed into place.

    An interrupted write therefore never leaves a truncated file that a resumed run would
    mistake for a finished one, and a write that fails (a full disk: ENOSPC, a quota, an I/O
    error) raises :class:`~meanfield.errors.OutputWriteError` and leaves nothing behind:
    neither ``path`` nor the temporary ``<name>.<random>.part`` file, nor the parent folders
    this call created.  The netCDF bytes are made in memory (h5netcdf) and written by plain
    ``os.write`` calls, so a full disk never reaches HDF5: an HDF5 file that fails to flush
    while it is closed leaves the library in a state that crashed the interpreter at exit
    (a segmentation fault).  The memory cost is one serialised copy of the dataset.

    Parameters
    ----------
    ds : xarray.Dataset
        The dataset; its attributes are converted as in :func:`provenance` (the input is
        not modified).
    path : str or os.PathLike
        Destination file (parent folders are created).  It must not exist, or be a regular
        file (replaced); a directory, a device (``/dev/null``), a FIFO or a socket is
        refused, and so is a path ending in a separator (``runs/``, a folder: give the file
        name).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    meanfield.errors.InputTypeError
        ``ds`` is not an :class:`xarray.Dataset`.
    meanfield.errors.OutputPathError
        ``path`` cannot be written (checked before any work,
        :func:`meanfield._validation.check_output_path`).
    meanfield.errors.OutputWriteError
        The write failed part-way (disk full, quota, I/O error); nothing is left behind.

    See Also
    --------
    load_dataset : the read back.
    meanfield.errors.OutputWriteError : a write that failed.
    meanfield.workbench.sweeps.run_sweep : the sweeps that write one file per run.
    meanfield.dynamics.langevin.simulate : a trajectory as a dataset.

    Examples
    --------
    >>> import os, tempfile
    >>> import xarray as xr
    >>> from meanfield.results import save_dataset
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = save_dataset(xr.Dataset(attrs={"ok": True}), os.path.join(folder, "a", "b.nc"))
    ...     sorted(os.listdir(os.path.join(folder, "a")))  # no .part file left
    ['b.nc']
    >>> save_dataset(xr.Dataset(), "runs/")
    Traceback (most recent call last):
        ...
    meanfield.errors.OutputPathError: path 'runs/' ends with a path separator, so it names ...
    """
    from ._validation import check_output_path
    from .errors import InputTypeError

    if not isinstance(ds, xr.Dataset):
        raise InputTypeError(f"ds must be an xarray.Dataset, got {type(ds).__name__}")
    path = check_output_path("path", path, kind="file")
    clean = ds.copy()
    clean.attrs = {k: _attr_value(v) for k, v in ds.attrs.items()}
    data = _netcdf_bytes(clean)
    created = _make_parents(path.parent)
    try:
        _write_atomically(memoryview(data), path)
    except BaseException:
        for folder in reversed(created):  # only the (still empty) folders this call made
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return path


def _netcdf_bytes(ds: xr.Dataset) -> memoryview:
    """The netCDF-4 file of ``ds``, made in memory by h5netcdf (no disk is touched).

    Not ``ds.to_netcdf()``: inside a dask-distributed worker (a sweep) xarray guards an
    in-memory target with a distributed lock keyed by the buffer object, which the scheduler
    cannot find ("Semaphore or Lock ... not known").  The store is opened here with the
    process's HDF5 lock instead, and the dataset is loaded first because
    :meth:`xarray.Dataset.dump_to_store` writes lazy (dask) arrays only when computed."""
    import io

    from xarray.backends import H5NetCDFStore, locks

    buffer = io.BytesIO()
    store = H5NetCDFStore.open(buffer, mode="w", lock=getattr(locks, "HDF5_LOCK", False))
    try:
        ds.load().dump_to_store(store)
    finally:
        store.close()
    return buffer.getbuffer()


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; the folders created, outermost first."""
    missing = []
    probe = folder
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    folder.mkdir(parents=True, exist_ok=True)
    return missing[::-1]


def _write_atomically(data: memoryview, path: Path) -> None:
    """Write ``data`` to a fresh ``<name>.<random>.part`` beside ``path`` (synced, closed
    once), then rename it over ``path``; on any failure remove the temporary file and raise
    :class:`~meanfield.errors.OutputWriteError` (a failed OS call) or what was raised."""
    import errno
    import secrets

    from .errors import OutputWriteError

    # a fresh name (O_EXCL): two writers of one target never share a temporary file, and a
    # FIFO or a folder that happens to bear the name is never opened; "*.part" is what the
    # sweeps set aside after a kill (meanfield.workbench.sweeps)
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.part")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as err:
        raise OutputWriteError(f"cannot create {str(tmp)!r} to write {str(path)!r}: {err}") from err
    try:
        try:
            while data:
                data = data[os.write(fd, data) :]  # os.write may write part: loop to the end
            os.fsync(fd)  # a delayed write error (NFS, a quota) shows here, not after rename
        finally:
            os.close(fd)  # exactly once
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if not isinstance(err, OSError):
            raise
        cause = {
            errno.ENOSPC: "the disk is full (ENOSPC)",
            getattr(errno, "EDQUOT", -1): "the disk quota is exceeded (EDQUOT)",
            errno.EFBIG: "the file exceeds a file-size limit (EFBIG)",
        }.get(err.errno, f"{type(err).__name__}: {err}")
        failure = OutputWriteError(
            f"cannot write {str(path)!r}: {cause}; nothing was written (free space, or give "
            "another path)"
        )
        failure.errno = err.errno  # the cause's code, for callers that test it
        raise failure from err


def load_dataset(path: str | os.PathLike) -> xr.Dataset:
    """Read a dataset written by :func:`save_dataset` fully into memory.

    Parameters
    ----------
    path : str or os.PathLike
        A netCDF-4 file.

    Returns
    -------
    xarray.Dataset
        Loaded (the file is closed on return).

    Raises
    ------
    meanfield.errors.MissingFileError
        ``path`` does not exist.
    meanfield.errors.DataFileError
        ``path`` is a directory, or not a complete netCDF-4 file (truncated, corrupt, another
        format); the message names the file.

    See Also
    --------
    save_dataset : the write.
    meanfield.errors.DataFileError : a file that is not a complete dataset.
    meanfield.errors.MissingFileError : a file that does not exist.

    Examples
    --------
    >>> from meanfield.results import load_dataset
    >>> load_dataset("no/such/run.nc")
    Traceback (most recent call last):
        ...
    meanfield.errors.MissingFileError: dataset file 'no/such/run.nc' does not exist
    """
    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"dataset file {str(path)!r} does not exist")
    if path.is_dir():
        raise DataFileError(f"dataset file {str(path)!r} is a directory, not a netCDF file")
    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            return ds.load()
    except Exception as err:  # noqa: BLE001 - h5py/xarray raise many types for a bad file
        raise DataFileError(
            f"cannot read {str(path)!r} as a netCDF dataset (truncated or corrupt?): "
            f"{type(err).__name__}: {err}"
        ) from err
