"""Theory figures: ``meanfield figures`` computes and draws each one into an output folder.

Every figure is written as PNG and PDF next to a netCDF record of the numbers behind it (with
parameters, seeds and the package version in its attributes).  ``size="small"`` runs a quick
configuration of the same computation (tests, CI and notebooks); ``size="full"`` is what is
committed in the repository's ``figures/`` (the README's image, the data the gallery redraws).

The output folder is ``runs/figures`` by default (``runs/`` is ignored by git), so a
regeneration never overwrites the committed files; ``meanfield figures --in-place`` writes into
the committed ``figures/`` of the source checkout (:func:`committed_figures_dir`): the
maintainers' command for refreshing them.

This module only orchestrates: the experiments live in :mod:`meanfield.studies`
(:mod:`~meanfield.studies.limit_curves`, :mod:`~meanfield.studies.ldp_rate`,
:mod:`~meanfield.studies.kernel_figure`, :mod:`~meanfield.studies.coulomb3d`) and the drawing
in :mod:`meanfield.workbench.plotting`; their names are re-exported here for compatibility.
"""

from __future__ import annotations

import time
from pathlib import Path

import xarray as xr

from .._validation import check_choice, check_output_path
from ..results import save_dataset
from ..workbench.plotting import (
    plot_beta_limit,
    plot_coulomb3d,
    plot_kernel_concentration,
    plot_ldp_rate,
    plot_n_limit,
    plot_t_limit,
)
from ._sizes import FULL_SIZE_SECONDS, SIZES
from .coulomb3d import coulomb3d_data
from .kernel_figure import kernel_concentration_data, kernel_model
from .ldp_rate import ldp_rate_data
from .limit_curves import beta_limit_data, n_limit_data, t_limit_data

#: Default output folder of :func:`make_figures` and ``meanfield figures`` (relative to the
#: working directory; ``runs/`` is ignored by git).
DEFAULT_OUT = "runs/figures"


def committed_figures_dir() -> Path:
    """The ``figures/`` folder of the source checkout this package is imported from.

    It holds the committed figures (PNG, PDF) and their netCDF records, which the
    documentation's gallery redraws; ``meanfield figures --in-place`` rewrites it.  Found
    from this file's location (``<checkout>/meanfield/studies/figures.py``), not from the
    working directory, so it is the same wherever a script runs.

    Returns
    -------
    pathlib.Path
        Absolute path of ``<checkout>/figures``.

    Raises
    ------
    meanfield.errors.MissingFileError
        The package is not imported from a source checkout holding ``figures/`` (e.g. an
        installed wheel): there are no committed figures to read or refresh.

    See Also
    --------
    committed_figure_data : the netCDF record of one committed figure.

    Examples
    --------
    >>> from meanfield.studies.figures import committed_figures_dir
    >>> committed_figures_dir().name, (committed_figures_dir() / "t_limit.nc").is_file()
    ('figures', True)
    """
    from ..errors import MissingFileError

    root = Path(__file__).resolve().parents[2]
    folder = root / "figures"
    if not (folder.is_dir() and (root / "pyproject.toml").is_file()):
        raise MissingFileError(
            f"no committed figures: meanfield is imported from {str(root)!r}, not from a "
            "source checkout holding figures/ (install it with pip install -e from a clone, "
            "or make the figures with meanfield figures --out FOLDER)"
        )
    return folder


def committed_figure_data(name: str) -> Path:
    """Path of the committed netCDF record ``figures/<name>.nc`` of one figure.

    Parameters
    ----------
    name : str
        One of :data:`FIGURES` (``"n_limit"``, ``"ldp_rate"``, ...).

    Returns
    -------
    pathlib.Path
        ``committed_figures_dir() / f"{name}.nc"``, an existing file.

    Raises
    ------
    meanfield.errors.InputError
        ``name`` is not a figure of :data:`FIGURES`.
    meanfield.errors.MissingFileError
        Not a source checkout, or the record is missing.

    See Also
    --------
    committed_figures_dir, make_figures

    Examples
    --------
    >>> import xarray as xr
    >>> from meanfield.studies.figures import committed_figure_data
    >>> ds = xr.load_dataset(committed_figure_data("t_limit"))
    >>> "wall_time_s" in ds.attrs
    True
    """
    from ..errors import MissingFileError

    check_choice("figure", name, FIGURES)
    path = committed_figures_dir() / f"{name}.nc"
    if not path.is_file():
        raise MissingFileError(f"no committed record {str(path)!r} of the figure {name!r}")
    return path


def _save(fig, ds: xr.Dataset, out_dir: Path, name: str) -> list[Path]:
    """Write ``name``.png, .pdf (the figure) and .nc (the dataset) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf", out_dir / f"{name}.nc"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    save_dataset(ds, paths[2])
    return paths


FIGURES = {
    "n_limit": (n_limit_data, plot_n_limit),
    "ldp_rate": (ldp_rate_data, plot_ldp_rate),
    "beta_limit": (beta_limit_data, plot_beta_limit),
    "t_limit": (t_limit_data, plot_t_limit),
    "kernel_concentration": (kernel_concentration_data, plot_kernel_concentration),
    "coulomb3d": (coulomb3d_data, plot_coulomb3d),
}


def make_figures(
    out_dir=DEFAULT_OUT, *, size: str = "full", only=None, seed: int = 0, log=print
) -> dict:
    """Compute and draw the figures (all, or those named in ``only``); returns their paths.

    Parameters
    ----------
    out_dir : path
        Folder of the PNG, PDF and netCDF files (checked writable before any work); default
        ``runs/figures`` (ignored by git).  :func:`committed_figures_dir` is the committed
        one: write there only to refresh the repository's figures.
    size : {"small", "full"}
    only : list of str, optional
        Names of :data:`FIGURES` to make (default: all).
    seed : int
    log : callable
        Receives a stage message before each figure (with its expected time) and one line
        after it; ``None`` for silence.

    Returns
    -------
    dict
        Figure name → [PNG, PDF, netCDF] paths.

    Examples
    --------
    Names and sizes are checked before any work (nothing is computed or written):

    >>> from pathlib import Path
    >>> from meanfield.studies.figures import make_figures
    >>> make_figures("out", size="small", only=["nope"], log=None)
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown figure 'nope'; choose one of 'n_limit', 'ldp_rate', ...
    >>> Path("out").exists()
    False

    The quickest figure at its small size takes a few seconds:

    >>> paths = make_figures("out", size="small", only=["t_limit"], log=None)
    >>> [p.name for p in paths["t_limit"]]
    ['t_limit.png', 't_limit.pdf', 't_limit.nc']
    """
    check_choice("size", size, SIZES)
    names = list(FIGURES) if not only else list(only)
    for n in names:
        check_choice("figure", n, FIGURES)
    out_dir = check_output_path("out_dir", out_dir, kind="dir")
    log = log or (lambda _msg: None)
    out = {}
    for i, name in enumerate(names, 1):
        expect = FULL_SIZE_SECONDS[name]
        hint = (
            f"about {expect} s" if size == "full" else f"a fraction of the {expect} s at full size"
        )
        log(f"[{i}/{len(names)}] {name}: computing ({hint} on 2 cores) ...")
        t0 = time.perf_counter()
        compute, plot = FIGURES[name]
        ds = compute(size=size, seed=seed)
        ds.attrs["wall_time_s"] = time.perf_counter() - t0
        out[name] = _save(plot(ds), ds, out_dir, name)
        log(
            f"[{i}/{len(names)}] {name}: {time.perf_counter() - t0:.1f} s -> "
            f"{', '.join(map(str, out[name]))}"
        )
    return out


__all__ = [
    "DEFAULT_OUT",
    "FIGURES",
    "FULL_SIZE_SECONDS",
    "SIZES",
    "beta_limit_data",
    "committed_figure_data",
    "committed_figures_dir",
    "coulomb3d_data",
    "kernel_concentration_data",
    "kernel_model",
    "ldp_rate_data",
    "make_figures",
    "n_limit_data",
    "plot_beta_limit",
    "plot_coulomb3d",
    "plot_kernel_concentration",
    "plot_ldp_rate",
    "plot_n_limit",
    "plot_t_limit",
    "t_limit_data",
]
