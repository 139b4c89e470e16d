"""The embedded default problem of the README and its one-call run (data, energy, I/O).

:func:`default_problem` builds the problem (a synthetic two-class data set, so the particles
are the model's random features and the energy contains the alignment term);
:func:`run_default_comparison` runs :func:`meanfield.workbench.compare.compare` on it and writes the
dataset (netCDF) and a figure.  (Moved out of :mod:`meanfield.workbench.compare`, which re-exports
both.)
"""

from __future__ import annotations

import xarray as xr

from .._resources import check_grid_memory
from .._validation import check_int, check_output_path
from ..domains import Box
from ..energy import Energy, LinearAlignment, PairInteraction, QuadraticPotential
from ..kernels import Coulomb
from ..learners.tasks import radial
from ..pde import Density, Grid
from ..results import save_dataset
from .compare import compare

DEFAULTS = {
    1: {
        "radius": 2.0,
        "grid_n": 128,
        "n_data": 200,
        "lam": 0.5,
        "beta": 10.0,
        "n_particles": 500,
        "eta": 0.005,
        "t_final": 2.0,
        "init_mean": 0.0,
        "init_std": 0.3,
    },
    2: {
        "radius": 2.0,
        "grid_n": 48,
        "n_data": 200,
        "lam": 0.5,
        "beta": 10.0,
        "n_particles": 1000,
        "eta": 0.005,
        "t_final": 1.0,
        "init_mean": 0.0,
        "init_std": 0.4,
    },
}


def default_problem(dim: int = 1, **overrides) -> dict:
    r"""The README's problem: random features on a synthetic two-class data set.

    Data: the radial task of Sinha & Duchi in d = ``dim`` (x ~ N(0, I_d), y = sign(|x| − √d),
    ``n_data`` points, seed 0).  Particles: positive (FAVOR+) features ω ∈ R^d, so p = d.
    Energy on the box [−R, R]^p:

    .. math::

        E(\mu) = \int \frac{|\omega|^2}{2}\, d\mu - \int a\, d\mu
        + \lambda \iint k(\omega - \omega')\, d\mu(\omega)\, d\mu(\omega'),

    with the linear (U-statistic) alignment a and the Coulomb kernel of R^p (k = −|z| in
    p = 1, −log|z| in p = 2).  Initial law: N(init_mean, init_std² I) on the grid.

    Parameters
    ----------
    dim : {1, 2}
    **overrides
        Any key of :data:`DEFAULTS` (``radius``, ``grid_n``, ``n_data``, ``lam``, ``beta``,
        ``n_particles``, ``eta``, ``t_final``, ``init_mean``, ``init_std``).

    Returns
    -------
    dict
        Keyword arguments for :func:`compare` (``energy``, ``initial``, ``n_particles``,
        ``beta``, ``t_final``, ``eta``) and ``data`` = (X, y).

    Examples
    --------
    >>> from meanfield.workbench.problems import default_problem
    >>> prob = default_problem(1, n_data=20, grid_n=32)
    >>> prob["energy"].term_names, prob["n_particles"], prob["data"][0].shape
    (['confinement', 'alignment', 'interaction'], 500, (20, 1))
    >>> prob["energy"].terms[2].kernel  # the Coulomb kernel of R^1: k(z) = −|z|
    Coulomb(dim=1, softening=0.0)
    """
    if dim not in DEFAULTS:
        raise ValueError(f"dim must be 1 or 2 for the default problem, got {dim!r}")
    cfg = dict(DEFAULTS[dim])
    unknown = set(overrides) - set(cfg)
    if unknown:
        raise ValueError(
            f"unknown default-problem parameter(s) {sorted(unknown)}; choose from {sorted(cfg)}"
        )
    cfg.update(overrides)
    split = radial(check_int("n_data", cfg["n_data"], minimum=2), 1, d=dim, seed=0)
    X, y = split.X_train, split.y_train
    domain = Box(dim, cfg["radius"])
    energy = Energy(
        [
            QuadraticPotential(1.0),
            LinearAlignment(X, y, "positive"),
            PairInteraction(Coulomb(dim), cfg["lam"]),
        ],
        domain,
    )
    grid = Grid(domain, cfg["grid_n"])
    # before the initial density is allocated (a 100000² grid: 80 GB for it alone)
    check_grid_memory("grid_n (cells per axis)", grid.n, pair_terms=int(cfg["lam"] > 0))
    initial = Density.gaussian(grid, cfg["init_mean"], cfg["init_std"])
    return {
        "energy": energy,
        "initial": initial,
        "n_particles": cfg["n_particles"],
        "beta": cfg["beta"],
        "t_final": cfg["t_final"],
        "eta": cfg["eta"],
        "data": (X, y),
        "config": cfg,
    }


_COMPARE_KEYS = {"n_records", "seed", "scheme", "order", "safety", "w_method", "progress"}


def run_default_comparison(out_dir, *, dim: int = 1, **overrides) -> xr.Dataset:
    """Run the default problem, write ``comparison.nc`` and ``comparison.png`` to ``out_dir``.

    Parameters
    ----------
    out_dir : path
        Created if missing.
    dim : {1, 2}
        Particle dimension of the default problem.
    **overrides
        Default-problem parameters (:func:`default_problem`) and :func:`compare` options
        (``n_records``, ``seed``, ``scheme``, ``order``, ``safety``, ``w_method``,
        ``progress``).

    Returns
    -------
    xarray.Dataset
        As :func:`compare`; ``attrs["dataset_path"]`` and ``attrs["figure_path"]`` say where
        the files went.

    Examples
    --------
    A very short run (writes into ``out/``; the figure takes most of the second it needs):

    >>> from meanfield.workbench.problems import run_default_comparison
    >>> ds = run_default_comparison(
    ...     "out", n_data=10, grid_n=16, n_particles=20, t_final=0.02, n_records=1
    ... )
    >>> dict(ds.sizes), ds.attrs["figure_path"]
    ({'time': 2, 'particle': 20, 'dim': 1, 'x': 16}, 'out/comparison.png')
    """
    from .plotting import plot_comparison

    out_dir = check_output_path("out (folder)", out_dir, kind="dir")
    for name in ("comparison.nc", "comparison.png"):
        check_output_path("out (folder)", out_dir / name, kind="file")
    cmp_kw = {k: overrides.pop(k) for k in list(overrides) if k in _COMPARE_KEYS}
    prob = default_problem(dim, **overrides)
    cfg = prob.pop("config")
    prob.pop("data")
    extra = {"problem": "default", "task": "radial", **{f"problem_{k}": v for k, v in cfg.items()}}
    ds = compare(**prob, **cmp_kw, extra_attrs=extra)
    out_dir.mkdir(parents=True, exist_ok=True)
    nc = save_dataset(ds, out_dir / "comparison.nc")
    png = out_dir / "comparison.png"
    # the figure reads "w2"; a sliced run keeps its own name and long_name in the dataset
    plot_comparison(ds, png)
    ds.attrs["dataset_path"] = str(nc)
    ds.attrs["figure_path"] = str(png)
    return ds


__all__ = ["DEFAULTS", "default_problem", "run_default_comparison"]
