"""The theory figures of ``meanfield figures``: each computed, drawn and written to a folder.

Every figure is written as PNG and PDF next to a netCDF record of the numbers behind it (with
parameters, seeds and the package version in its attributes).  ``size="small"`` runs a quick
configuration of the same computation (tests, CI and notebooks); ``size="full"`` is what is
committed in the repository's ``figures/`` (the README's image, the data the gallery redraws).

The output folder is ``runs/figures`` by default (``runs/`` is ignored by git), so a
regeneration never overwrites the committed files; ``meanfield figures --in-place`` writes into
the committed ``figures/`` of the source checkout (:func:`committed_figures_dir`): the
maintainers' command for refreshing them.

The experiments live in :mod:`meanfield.studies` (:mod:`~meanfield.studies.limits`,
:mod:`~meanfield.studies.large_deviations`, :mod:`~meanfield.studies.kernel_concentration`,
:mod:`~meanfield.studies.coulomb3d`: the function ``<name>_data`` of each figure) and the
drawing in :mod:`meanfield.workbench.plotting` (``plot_<name>``); both are imported only when
a figure is made, so the command line's help reads this module without them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from .._validation import check_choice, check_output_path

if TYPE_CHECKING:
    import xarray as xr

#: Default output folder of :func:`make_figures` and ``meanfield figures`` (relative to the
#: working directory; ``runs/`` is ignored by git).
DEFAULT_OUT = "runs/figures"


def committed_figures_dir() -> Path:
    """The ``figures/`` folder of the source checkout this package is imported from.

    It holds the committed figures (PNG, PDF) and their netCDF records, which the
    documentation's gallery redraws; ``meanfield figures --in-place`` rewrites it.  Found
    from this file's location (``<checkout>/meanfield/cli/figures.py``), not from the
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
    >>> from meanfield.cli.figures import committed_figures_dir
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
    >>> from meanfield.cli.figures import committed_figure_data
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
    from ..results import save_dataset

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf", out_dir / f"{name}.nc"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    save_dataset(ds, paths[2])
    return paths


#: The figures: name → the module of :mod:`meanfield.studies` whose ``<name>_data`` computes
#: its dataset (drawn by :mod:`meanfield.workbench.plotting`'s ``plot_<name>``).
FIGURES = {
    "n_limit": "limits",
    "ldp_rate": "large_deviations",
    "beta_limit": "limits",
    "t_limit": "limits",
    "kernel_concentration": "kernel_concentration",
    "coulomb3d": "coulomb3d",
}

#: Measured wall time (s) of each figure at full size on the 2-core development machine
#: (README, Performance): what the stage messages of :func:`make_figures` and
#: ``meanfield figures --help`` quote.
FULL_SIZE_SECONDS = {
    "n_limit": 101,
    "ldp_rate": 205,
    "beta_limit": 12,
    "t_limit": 4,
    "kernel_concentration": 28,
    "coulomb3d": 900,
}


def figure_functions(name: str):
    """The experiment and the drawing function of the figure ``name``.

    Parameters
    ----------
    name : str
        One of :data:`FIGURES`.

    Returns
    -------
    (callable, callable)
        ``compute(size=..., seed=...) -> xarray.Dataset``, the function ``<name>_data`` of
        ``meanfield.studies.<FIGURES[name]>``, and ``plot(dataset) -> Figure``, the function
        ``plot_<name>`` of :mod:`meanfield.workbench.plotting`.

    See Also
    --------
    make_figures : computes, draws and writes them.

    Examples
    --------
    >>> from meanfield.cli.figures import figure_functions
    >>> compute, plot = figure_functions("t_limit")
    >>> compute.__module__, plot.__name__
    ('meanfield.studies.limits', 'plot_t_limit')
    """
    from ..studies import coulomb3d, kernel_concentration, large_deviations, limits
    from ..workbench import plotting

    check_choice("figure", name, FIGURES)
    studies = (limits, large_deviations, kernel_concentration, coulomb3d)
    study = {m.__name__.rpartition(".")[2]: m for m in studies}[FIGURES[name]]
    return getattr(study, f"{name}_data"), getattr(plotting, f"plot_{name}")


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

    See Also
    --------
    figure_functions : the experiment and the drawing of one figure.
    committed_figure_data : the committed record of a figure.

    Examples
    --------
    Names and sizes are checked before any work (nothing is computed or written):

    >>> from pathlib import Path
    >>> from meanfield.cli.figures import make_figures
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
    from ..studies.limits import SIZES

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
        compute, plot = figure_functions(name)
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
    "committed_figure_data",
    "committed_figures_dir",
    "figure_functions",
    "make_figures",
]
