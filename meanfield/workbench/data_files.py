"""Training data from a file: ``X``, ``y`` from a ``.npz`` archive or a numeric ``.csv``.

What ``SimulationConfig(data_file=...)`` (``meanfield simulate --data-file``) reads instead
of a synthetic task; every value is checked (finite, matching shapes) before any work.

The data of a run come from here or from a synthetic task
(:meth:`meanfield.workbench.config.SimulationConfig.load_data`,
:func:`meanfield.learners.tasks.make_task`).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from .._validation import check_array
from ..errors import DataFileError

__all__ = ["load_xy"]


def load_xy(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read X, y from ``.npz`` (arrays X and y) or ``.csv`` (label in the last column).

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.npz`` archive holding arrays ``X`` (n, d) and ``y`` (n,), or a numeric ``.csv``
        without header whose last column is the label.

    Returns
    -------
    X : numpy.ndarray of float64, shape (n, d)
    y : numpy.ndarray of float64, shape (n,)

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    meanfield.errors.DataFileError
        A ``.npz`` that is not a readable archive.
    ValueError
        Another suffix, missing arrays, a non-numeric CSV; non-finite values or mismatched
        shapes (:class:`~meanfield.errors.InputError`).

    See Also
    --------
    meanfield.workbench.config.SimulationConfig.load_data : the data of a run.
    meanfield.learners.tasks.make_task : a synthetic task instead of a file.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from meanfield.workbench.data_files import load_xy
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "data.csv")
    ...     np.savetxt(path, [[0.5, 1.0, 1], [0.0, -1.0, -1]], delimiter=",")
    ...     X, y = load_xy(path)
    >>> X.shape, y.tolist()
    ((2, 2), [1.0, -1.0])
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"data_file {path} does not exist")
    if path.suffix == ".npz":
        try:
            f = np.load(path)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
            msg = str(err).split(". ")[0]
            raise DataFileError(f"data_file {path} is not a readable .npz ({msg})") from None
        if not isinstance(f, np.lib.npyio.NpzFile):
            raise DataFileError(f"data_file {path} holds one array, not an .npz archive of X, y")
        with f:
            if "X" not in f or "y" not in f:
                raise ValueError(f"data_file {path} must hold arrays named 'X' and 'y'")
            X, y = f["X"], f["y"]
    elif path.suffix == ".csv":
        try:
            a = np.loadtxt(path, delimiter=",", ndmin=2)
        except ValueError as err:
            raise ValueError(f"data_file {path}: not a numeric CSV ({err})") from None
        X, y = a[:, :-1], a[:, -1]
    else:
        raise ValueError(f"data_file must end in .npz or .csv, got {path.name}")
    X = check_array(f"X in {path}", X, ndim=2)
    y = check_array(f"y in {path}", y, shape=(X.shape[0],))
    return X, y
