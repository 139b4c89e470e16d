"""Particles and grid side by side: the same Energy, the same β, the same initial law.

:func:`compare` evolves N particles by projected Langevin (:func:`meanfield.particles.simulate`,
mean-field regime β_N = β) and the grid density by the McKean–Vlasov solver
(:class:`meanfield.pde.McKeanVlasov`) from one initial law, and returns one
``xarray.Dataset`` holding both trajectories and the diagnostics over time.  The initial
particles are an exact iid sample of the initial grid density (piecewise constant), so at
t = 0 the only gap is the sampling error.

:func:`default_problem` is the embedded problem of the README: a synthetic two-class data set,
so the particles are the model's random features and the energy contains the alignment term.
:func:`run_default_comparison` writes the dataset (netCDF) and a figure.
:func:`convergence_in_n` measures the rate of W2(μ_N(t), ρ_t) → 0 with a confidence interval
over seeds.
"""

from __future__ import annotations

import time

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from ._validation import check_fit_sizes, check_int, check_output_path, check_positive
from .diagnostics import kernel_gap, resolve_w_method, w_name, wasserstein_particles_grid
from .domains import Box
from .energy import (
    AlignmentTerm,
    Energy,
    LinearAlignment,
    PairInteraction,
    QuadraticPotential,
)
from .kernels import Coulomb
from .particles import simulate
from .pde import Density, FreeEnergyTracker, Grid, MassTracker, McKeanVlasov, StorageTracker
from .pde.potential import check_same_domain
from .results import provenance, save_dataset
from .synthetic import radial


def _data_term(energy: Energy):
    for t in energy.terms:
        if isinstance(t, AlignmentTerm):
            return t
    return None


def compare(
    energy: Energy,
    initial: Density,
    *,
    n_particles: int,
    beta: float,
    t_final: float,
    eta: float,
    n_records: int = 20,
    seed: int = 0,
    scheme: str = "upwind",
    order: int = 2,
    safety: float = 0.5,
    w_method: str = "auto",
    progress: bool = False,
    extra_attrs: dict | None = None,
) -> xr.Dataset:
    """Evolve N particles and the grid density from the same law; diagnostics over time.

    Parameters
    ----------
    energy : Energy
        The model (its domain must be the grid's box).
    initial : Density
        The initial law ρ_0 on the grid; the particles are an iid sample of it.
    n_particles : int
        N ≥ 1.
    beta : float
        Inverse temperature (mean-field regime: the particles use β_N = β).
    t_final : float
        Final time (> 0); the particles take round(t_final/η) steps.
    eta : float
        Langevin step η (time per step).
    n_records : int
        About this many records (every ``n_steps // n_records`` steps, plus the last).
    seed : int
        Seeds the initial sample and the Langevin noise.
    scheme, order, safety :
        Grid scheme (see :class:`~meanfield.pde.McKeanVlasov` and
        :func:`~meanfield.pde.solver.solve`).
    w_method : {"auto", "exact", "sparse_exact", "sliced"}
        How W2 is computed (:func:`~meanfield.diagnostics.wasserstein_particles_grid`;
        "auto" is exact or sparse_exact, never sliced).
    progress : bool
    extra_attrs : dict, optional
        More attributes for the dataset.

    Returns
    -------
    xarray.Dataset
        Coordinates ``time``, ``particle``, ``dim``, ``x`` [, ``y``]; variables

        * ``omega`` (time, particle, dim): particle positions;
        * ``rho`` (time, x[, y]): grid density;
        * ``w2``, ``w1`` (time): W2 and W1 between μ_N(t) and ρ_t (``w1`` when the dense
          exact solver runs, else NaN); with ``w_method="sliced"`` the variable is
          ``sliced_w2`` instead of ``w2`` (SW2 ≤ W2 is a different quantity);
        * ``energy_particles`` and ``energy_particles_<term>`` (time): H_N(Ω_t);
        * ``energy_grid``, ``energy_grid_<term>``, ``entropy_grid``, ``free_energy_grid``
          (time): E(ρ_t), its terms, β⁻¹∫ρ log ρ and F_β(ρ_t);
        * ``mass_grid``, ``min_density_grid`` (time);
        * ``kernel_gap`` (time), when the energy has a data term: max_jk |K_{μ_N} − K_ρ| on
          its data.

        Attributes: every parameter, the seed, solver statistics and the package version.
    """
    if not isinstance(initial, Density):
        raise TypeError(f"initial must be a meanfield.pde.Density, got {initial!r}")
    check_same_domain(energy, initial.grid)
    n_particles = check_int("n_particles (N)", n_particles)
    beta = check_positive("beta", beta)
    t_final = check_positive("t_final", t_final)
    eta = check_positive("eta (step size)", eta)
    n_records = check_int("n_records", n_records)
    n_steps = int(round(t_final / eta))
    if n_steps < 1:
        raise ValueError(f"t_final/eta must give at least one step, got {t_final}/{eta}")
    record_every = max(1, n_steps // n_records)
    grid = initial.grid
    p = grid.dim
    initial = initial.normalised()
    eq = McKeanVlasov(energy, grid, beta, scheme=scheme, order=order)  # validates first

    start = time.perf_counter()
    omega0 = initial.sample(n_particles, seed)
    ds_p = simulate(
        energy,
        omega0,
        eta=eta,
        beta=beta,
        n_steps=n_steps,
        regime="mean-field",
        record_every=record_every,
        seed=seed,
        progress=progress,
    )
    t_particles = time.perf_counter() - start

    times = ds_p["time"].values
    storage = StorageTracker(eta * record_every)
    fe = FreeEnergyTracker(eta * record_every)
    mt = MassTracker(eta * record_every)
    res = eq.solve(
        initial, float(times[-1]), trackers=[storage, fe, mt], safety=safety, progress=progress
    )
    grid_ds = res.dataset().sel(time=times, method="nearest")
    lag = float(np.max(np.abs(grid_ds["time"].values - times)))
    if lag > 1e-9 * max(1.0, times[-1]):
        raise RuntimeError(f"grid records do not line up with particle records (lag {lag:g})")
    grid_ds = grid_ds.assign_coords(time=times)

    method = resolve_w_method(p, n_particles, int(np.count_nonzero(initial.data)), w_method)
    omega = ds_p["omega"].values
    w2 = np.empty(len(times))
    w1 = np.full(len(times), np.nan)
    data = _data_term(energy)
    gap = np.empty(len(times)) if data is not None else None
    records = tqdm(
        range(len(times)),
        desc=f"W{'2' if method != 'exact' else '1, W2'} per record",
        unit="record",
        disable=not progress,
    )
    for k in records:
        rho_k = Density(grid, grid_ds["rho"].values[k])
        w2[k] = wasserstein_particles_grid(omega[k], rho_k, order=2, method=method, seed=seed)
        if method == "exact":
            w1[k] = wasserstein_particles_grid(omega[k], rho_k, order=1, method="exact")
        if data is not None:
            gap[k] = kernel_gap(omega[k], rho_k, data.X_np, data.feature)

    out = xr.Dataset(
        coords={
            "time": times,
            "step": ("time", ds_p["step"].values),
            "particle": ds_p["particle"].values,
            "dim": ds_p["dim"].values,
            **grid.coords,
        }
    )
    out["omega"] = (("time", "particle", "dim"), omega)
    out["rho"] = grid_ds["rho"]
    out[w_name(method)] = ("time", w2)
    out["w1"] = ("time", w1)
    for name in ds_p.data_vars:
        if name.startswith("energy"):
            out[name.replace("energy", "energy_particles", 1)] = ("time", ds_p[name].values)
    for name in grid_ds.data_vars:
        if name == "rho":
            continue
        new = {
            "mass": "mass_grid",
            "min_density": "min_density_grid",
            "free_energy": "free_energy_grid",
            "entropy": "entropy_grid",
            "energy": "energy_grid",
        }.get(name, name.replace("energy", "energy_grid", 1))
        out[new] = ("time", grid_ds[name].values)
    if gap is not None:
        out["kernel_gap"] = ("time", gap)
        out["kernel_gap"].attrs["long_name"] = "max_jk |K_muN(x_j, x_k) - K_rho(x_j, x_k)|"
    out[w_name(method)].attrs["long_name"] = (
        "sliced W2(mu_N(t), rho_t)" if method == "sliced" else "W2(mu_N(t), rho_t)"
    )
    out[w_name(method)].attrs["method"] = method
    out["w1"].attrs["long_name"] = "W1(mu_N(t), rho_t)"
    out["rho"].attrs["long_name"] = "grid density rho_t (cell average)"
    out["omega"].attrs["long_name"] = "particle positions"
    params = {
        "N": n_particles,
        "p": p,
        "beta": beta,
        "regime": "mean-field",
        "eta": eta,
        "t_final": float(times[-1]),
        "n_steps": n_steps,
        "record_every": record_every,
        "w_method": method,
        "grid_scheme": eq.scheme.name,
        "grid_safety": safety,
        "grid_steps": res.n_steps,
        "grid_dt_min": res.dt_min,
        "grid_dt_max": res.dt_max,
        "wall_particles_s": t_particles,
        "wall_grid_s": res.wall_time,
        **grid.describe(),
        **eq.scheme.describe(),
        **energy.describe(),
        **(extra_attrs or {}),
    }
    params.pop("scheme", None)
    out.attrs = provenance(params, seed=seed)
    return out


# ----------------------------------------------------------------------------------------
# the embedded default problem
# ----------------------------------------------------------------------------------------
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
    """The README's problem: random features on a synthetic two-class data set.

    Data: the radial task of Sinha & Duchi in d = ``dim`` (x ~ N(0, I_d), y = sign(|x| − √d),
    ``n_data`` points, seed 0).  Particles: positive (FAVOR+) features ω ∈ R^d, so p = d.
    Energy on the box [−R, R]^p:

        E(μ) = ∫ |ω|²/2 dμ − ∫ a dμ + λ ∬ k(ω − ω') dμ dμ,

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
    plot_comparison(ds.rename({"sliced_w2": "w2"}) if "sliced_w2" in ds else ds, png)
    ds.attrs["dataset_path"] = str(nc)
    ds.attrs["figure_path"] = str(png)
    return ds


# ----------------------------------------------------------------------------------------
# the rate in N
# ----------------------------------------------------------------------------------------
def fit_rate(n_values, w, confidence: float = 0.95) -> dict:
    """Fit W ≈ C N^slope per seed and summarise the slope over seeds (Student-t interval).

    A thin alias of :func:`meanfield.studies.limits.fit_power_law` with ``interval="t"``
    (the package's one power-law fit).

    Parameters
    ----------
    n_values : array (K,)
        Particle numbers.
    w : array (K, S)
        Distances for each N and seed (S ≥ 2).
    confidence : float
        Level of the Student-t interval on the mean slope over the S seeds.

    Returns
    -------
    dict
        ``slope`` (mean over seeds), ``ci_low``, ``ci_high``, ``slopes`` (per seed),
        ``pooled_slope`` (least squares on all points), ``confidence``, ``prefactor``.

    Raises
    ------
    meanfield.errors.InputError
        Fewer than 3 distinct N (the rate is undetermined) or fewer than 2 seeds.
    """
    from .studies.limits import fit_power_law

    w = np.asarray(w, dtype=float)
    if w.ndim != 2 or w.shape[1] < 2:
        raise ValueError("w must have shape (len(n_values), S) with S >= 2 seeds")
    out = fit_power_law(check_fit_sizes("n_values (N)", n_values), w, level=confidence,
                        interval="t")
    return {**out, "confidence": confidence}


def convergence_in_n(
    energy: Energy,
    initial: Density,
    *,
    n_values,
    seeds,
    beta: float,
    t_final: float,
    eta: float,
    scheme: str = "upwind",
    safety: float = 0.5,
    confidence: float = 0.95,
) -> xr.Dataset:
    """W2(μ_N(t), ρ_t) at t = t_final for several N and seeds, and the fitted rate.

    The grid solution is computed once; each (N, seed) runs the particles from an iid sample
    of ``initial``.  Expected rate about N^(−1/2) in p = 1 (THEORY §6) until the Langevin bias
    O(η) and the grid error take over.

    Returns
    -------
    xarray.Dataset
        ``w2`` (N, seed), ``w2_initial`` (N, seed) (the t = 0 sampling error); attributes
        ``rate``, ``rate_ci_low``, ``rate_ci_high``, ``rate_confidence``, ``rate_pooled`` and
        all parameters.
    """
    n_values = [check_int("N", n) for n in n_values]
    check_fit_sizes("n_values (N)", n_values)
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2:
        raise ValueError(f"seeds: need at least 2 seeds to fit a rate with a CI, got {len(seeds)}")
    check_same_domain(energy, initial.grid)
    initial = initial.normalised()
    eq = McKeanVlasov(energy, initial.grid, beta, scheme=scheme)
    n_steps = int(round(t_final / eta))
    res = eq.solve(initial, eta * n_steps, safety=safety)
    rho_t = res.state
    w2 = np.empty((len(n_values), len(seeds)))
    w2_0 = np.empty_like(w2)
    for i, N in enumerate(n_values):
        for j, s in enumerate(seeds):
            omega0 = initial.sample(N, s)
            ds = simulate(
                energy,
                omega0,
                eta=eta,
                beta=beta,
                n_steps=n_steps,
                regime="mean-field",
                record_every=n_steps,
                seed=s,
            )
            w2[i, j] = wasserstein_particles_grid(ds["omega"].values[-1], rho_t, order=2)
            w2_0[i, j] = wasserstein_particles_grid(omega0, initial, order=2)
    fit = fit_rate(n_values, w2, confidence)
    out = xr.Dataset(
        {"w2": (("N", "seed"), w2), "w2_initial": (("N", "seed"), w2_0)},
        coords={"N": n_values, "seed": seeds},
    )
    out.attrs = provenance(
        {
            "beta": beta,
            "t_final": eta * n_steps,
            "eta": eta,
            "grid_scheme": eq.scheme.name,
            "rate": fit["slope"],
            "rate_ci_low": fit["ci_low"],
            "rate_ci_high": fit["ci_high"],
            "rate_confidence": confidence,
            "rate_pooled": fit["pooled_slope"],
            **initial.grid.describe(),
            **energy.describe(),
        },
        seed=None,
    )
    return out
