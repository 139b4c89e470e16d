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


def save_dataset(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` to netCDF atomically (a temporary file renamed into place).

    An interrupted write therefore never leaves a truncated file that a resumed run would
    mistake for a finished one.

    Parameters
    ----------
    ds : xarray.Dataset
        The dataset; its attributes are converted as in :func:`provenance` (the input is
        not modified).
    path : str or os.PathLike
        Destination file (parent folders are created).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    meanfield.errors.OutputPathError
        ``path`` cannot be written (checked before any work).

    Examples
    --------
    >>> import os, tempfile
    >>> import xarray as xr
    >>> from meanfield.results import save_dataset
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = save_dataset(xr.Dataset(attrs={"ok": True}), os.path.join(folder, "a", "b.nc"))
    ...     sorted(os.listdir(os.path.join(folder, "a")))  # no .part file left
    ['b.nc']
    """
    from ._validation import check_output_path

    path = check_output_path("path", path, kind="file")
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = ds.copy()
    clean.attrs = {k: _attr_value(v) for k, v in ds.attrs.items()}
    tmp = path.with_name(path.name + ".part")
    clean.to_netcdf(tmp, engine="h5netcdf")
    os.replace(tmp, path)
    return path


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
