"""Labelled results: provenance attributes and netCDF input/output for xarray datasets."""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

import numpy as np
import xarray as xr

from . import __version__
from .errors import DataFileError, MissingFileError


def _attr_value(v):
    """A netCDF-safe attribute value (str, number or 1-D numeric array)."""
    if v is None:
        return "none"
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, float, str, np.integer, np.floating)):
        return v
    if isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v) and v:
        return np.asarray(v)
    return json.dumps(v, default=str)


def provenance(params: dict, *, seed: int | None) -> dict:
    """Dataset attributes: every parameter, the seed, the package version and a timestamp."""
    attrs = {k: _attr_value(v) for k, v in params.items()}
    attrs["seed"] = "none" if seed is None else int(seed)
    attrs["meanfield_version"] = __version__
    attrs["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return attrs


def save_dataset(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` to netCDF atomically (a temporary file renamed into place).

    An interrupted write therefore never leaves a truncated file that a resumed run would
    mistake for a finished one.
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

    Raises
    ------
    meanfield.errors.MissingFileError
        ``path`` does not exist.
    meanfield.errors.DataFileError
        ``path`` is a directory, or not a complete netCDF-4 file (truncated, corrupt, another
        format); the message names the file.
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
