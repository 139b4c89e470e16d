"""Particles and grid side by side: the same Energy, the same β, the same initial law.

:func:`compare` evolves N particles by projected Langevin
(:func:`meanfield.dynamics.langevin.simulate`, mean-field regime β_N = β) and the grid density by
the McKean–Vlasov solver (:class:`meanfield.pde.McKeanVlasov`) from one initial law, and returns one
``xarray.Dataset`` holding both trajectories and the diagnostics over time.  The initial particles
are an exact iid sample of the initial grid density (piecewise constant), so at t = 0 the only gap
is the sampling error.

:func:`default_problem` and :func:`run_default_comparison` (the README's embedded problem and
its one-call run with I/O) live in :mod:`meanfield.workbench.problems` and are re-exported here.
:func:`convergence_in_n` (the rate of W2(μ_N(t), ρ_t) → 0 with a confidence interval over
seeds) lives in :mod:`meanfield.studies.convergence` and is re-exported here.

The dataset
-----------
Coordinates ``time``, ``particle``, ``dim``, ``x`` [, ``y``]; variables

* ``omega`` (time, particle, dim): particle positions;
* ``rho`` (time, x[, y]): grid density;
* ``w2``, ``w1`` (time): W2 and W1 between μ_N(t) and ρ_t (``w1`` when the dense exact
  solver runs, else NaN); with ``w_method="sliced"`` the variable is ``sliced_w2`` instead
  of ``w2`` (SW2 ≤ W2 is a different quantity);
* ``energy_particles`` and ``energy_particles_<term>`` (time): H_N(Ω_t);
* ``energy_grid``, ``energy_grid_<term>``, ``entropy_grid``, ``free_energy_grid`` (time):
  E(ρ_t), its terms, β⁻¹∫ρ log ρ and F_β(ρ_t);
* ``mass_grid``, ``min_density_grid`` (time);
* ``kernel_gap`` (time), when the energy has a data term: max_jk |K_{μ_N} − K_ρ| on its data.
"""

from __future__ import annotations

import time

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from .._validation import check_fit_sizes, check_int, check_positive
from ..dynamics.langevin import simulate
from ..energy import (
    AlignmentTerm,
    Energy,
)
from ..errors import StepBudgetError
from ..ot.diagnostics import kernel_gap, resolve_w_method, w_name, wasserstein_particles_grid
from ..pde import Density, FreeEnergyTracker, MassTracker, McKeanVlasov, StorageTracker
from ..pde.potential import check_same_domain
from ..pde.solver import check_step_budget
from ..pde.stepper import Stepper
from ..results import provenance
from ..stats import fit_power_law

#: Default step budget of :func:`compare`, for the particles and the grid alike (the default
#: ``max_steps`` of :func:`meanfield.pde.solve`).
MAX_STEPS = 10_000_000


def _data_term(energy: Energy):
    """The energy's data (alignment) term, whose kernel gap is recorded, or None."""
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
    max_steps: int = MAX_STEPS,
) -> xr.Dataset:
    r"""Evolve N particles and the grid density from the same law; diagnostics over time.

    The two sides discretise the same dynamics, the Langevin system and its mean-field
    (McKean–Vlasov) limit, and are compared at each record by W2(μ_N(t), ρ_t):

    .. math::

        d\omega_i = -N \nabla_{\omega_i} H_N(\Omega)\, dt + \sqrt{2/\beta}\, dW_i, \qquad
        \partial_t \rho = \nabla \cdot \Big(\rho\, \nabla \frac{\delta E}{\delta \rho}\Big)
        + \beta^{-1} \Delta \rho.

    Parameters
    ----------
    energy, initial : Energy, Density
        The model and the initial law ρ_0 on a grid of its box; the particles sample ρ_0 iid.
    n_particles, beta : int, float
        N ≥ 1; the inverse temperature (mean-field regime: the particles use β_N = β).
    t_final, eta : float
        Final time (> 0) and Langevin step η; the particles take round(t_final/η) steps.
    n_records, seed : int
        About this many records (every ``n_steps // n_records`` steps, plus the last); the
        seed of the initial sample and of the Langevin noise.
    scheme, order, safety :
        Grid scheme (see :class:`~meanfield.pde.McKeanVlasov` and
        :func:`~meanfield.pde.solver.solve`).
    w_method : {"auto", "exact", "sparse_exact", "sliced"}
        How W2 is computed (:func:`~meanfield.ot.diagnostics.wasserstein_particles_grid`;
        "auto" is exact or sparse_exact, never sliced).
    progress, extra_attrs : bool, dict, optional
        Show progress bars; more attributes for the dataset.
    max_steps : int
        The most steps either side may take (default :data:`MAX_STEPS`): the particles'
        round(t_final/η) and the grid's, estimated from its stable step at ρ_0, are both
        checked before any work (:class:`~meanfield.errors.StepBudgetError`).

    Returns
    -------
    xarray.Dataset
        Coordinates ``time``, ``particle``, ``dim``, ``x`` [, ``y``]; the variables listed in
        the module docstring ("The dataset"); attributes: every parameter, the seed, solver
        statistics and the package version.

    Examples
    --------
    >>> from meanfield.workbench.compare import compare
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde import Density, Grid
    >>> box = Box(1, 2.0)  # 20 particles in a quadratic well, 16 cells, 5 steps
    >>> E, rho0 = Energy([QuadraticPotential()], box), Density.gaussian(Grid(box, 16), 0.0, 0.5)
    >>> ds = compare(E, rho0, n_particles=20, beta=10.0, t_final=0.05, eta=0.01, n_records=1)
    >>> dict(ds.sizes), bool((ds["w2"] > 0).all()), round(float(ds["mass_grid"][-1]), 9)
    ({'time': 2, 'particle': 20, 'dim': 1, 'x': 16}, True, 1.0)
    """
    n_steps, record_every = _check_run(
        energy, initial, n_particles, beta, t_final, eta, n_records, max_steps
    )
    n_particles, beta, eta = int(n_particles), float(beta), float(eta)
    grid = initial.grid
    initial = initial.normalised()
    eq = McKeanVlasov(energy, grid, beta, scheme=scheme, order=order)  # validates first
    # the grid's step count too, before the particles run (the solve would refuse it later)
    check_step_budget(Stepper(eq, safety=safety), initial.data, n_steps * eta, max_steps)
    run = {"N": n_particles, "eta": eta, "n_steps": n_steps, "record_every": record_every}
    ds_p, t_particles = _particle_run(energy, initial, beta, run, seed, progress)
    res, grid_ds = _grid_run(eq, initial, ds_p["time"].values, eta * record_every, safety, progress)
    method = resolve_w_method(grid.dim, n_particles, int(np.count_nonzero(initial.data)), w_method)
    diag = _diagnostics(energy, grid, ds_p["omega"].values, grid_ds, method, seed, progress)
    run["t_final"] = float(ds_p["time"].values[-1])
    attrs = _attrs(run, eq, res, method, safety, t_particles, energy, extra_attrs, seed)
    return _assemble(ds_p, grid_ds, grid, method, diag).assign_attrs(attrs)


def _attrs(run, eq, res, method, safety, t_particles, energy, extra_attrs, seed) -> dict:
    """The dataset's attributes: every parameter, solver statistics, provenance."""
    grid = eq.grid
    params = {
        "N": run["N"],
        "p": grid.dim,
        "beta": eq.beta,
        "regime": "mean-field",
        "eta": run["eta"],
        "t_final": run["t_final"],
        "n_steps": run["n_steps"],
        "record_every": run["record_every"],
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
    return provenance(params, seed=seed)


def _particle_run(energy, initial, beta, run, seed, progress):
    """Projected Langevin from an iid sample of ``initial``: (dataset, wall seconds)."""
    start = time.perf_counter()
    ds = simulate(
        energy,
        initial.sample(run["N"], seed),
        eta=run["eta"],
        beta=beta,
        n_steps=run["n_steps"],
        regime="mean-field",
        record_every=run["record_every"],
        seed=seed,
        progress=progress,
    )
    return ds, time.perf_counter() - start


def _check_run(energy, initial, n_particles, beta, t_final, eta, n_records, max_steps):
    """Every argument of :func:`compare` checked before work; (n_steps, record_every)."""
    if not isinstance(initial, Density):
        raise TypeError(f"initial must be a meanfield.pde.Density, got {initial!r}")
    check_same_domain(energy, initial.grid)
    check_int("n_particles (N)", n_particles)
    check_positive("beta", beta)
    t_final = check_positive("t_final", t_final)
    eta = check_positive("eta (step size)", eta)
    n_records = check_int("n_records", n_records)
    max_steps = check_int("max_steps", max_steps)
    n_steps = int(round(t_final / eta))
    if n_steps < 1:
        raise ValueError(f"t_final/eta must give at least one step, got {t_final}/{eta}")
    if n_steps > max_steps:
        raise StepBudgetError(
            f"t_final/eta = {t_final:g}/{eta:g} gives {n_steps:.3g} particle steps, above "
            f"max_steps = {max_steps} (allowed: t_final/eta <= max_steps); lower t_final, "
            "raise eta or raise max_steps"
        )
    return n_steps, max(1, n_steps // n_records)


def _grid_run(eq, initial, times, interval, safety, progress):
    """The grid solve recorded at the particles' record times: (result, dataset)."""
    trackers = [StorageTracker(interval), FreeEnergyTracker(interval), MassTracker(interval)]
    res = eq.solve(initial, float(times[-1]), trackers=trackers, safety=safety, progress=progress)
    grid_ds = res.dataset().sel(time=times, method="nearest")
    lag = float(np.max(np.abs(grid_ds["time"].values - times)))
    if lag > 1e-9 * max(1.0, times[-1]):
        raise RuntimeError(f"grid records do not line up with particle records (lag {lag:g})")
    return res, grid_ds.assign_coords(time=times)


def _diagnostics(energy, grid, omega, grid_ds, method, seed, progress) -> dict:
    """W2 (or sliced W2), W1 when the dense solver runs, and the kernel gap, per record."""
    n = len(omega)
    w2, w1 = np.empty(n), np.full(n, np.nan)
    data = _data_term(energy)
    gap = np.empty(n) if data is not None else None
    records = tqdm(
        range(n),
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
    return {"w2": w2, "w1": w1, "gap": gap}


_GRID_NAMES = {
    "mass": "mass_grid",
    "min_density": "min_density_grid",
    "free_energy": "free_energy_grid",
    "entropy": "entropy_grid",
    "energy": "energy_grid",
}


def _assemble(ds_p, grid_ds, grid, method, diag) -> xr.Dataset:
    """One dataset: both trajectories, their energies and the diagnostics, with long names."""
    out = xr.Dataset(
        coords={
            "time": ds_p["time"].values,
            "step": ("time", ds_p["step"].values),
            "particle": ds_p["particle"].values,
            "dim": ds_p["dim"].values,
            **grid.coords,
        }
    )
    out["omega"] = (("time", "particle", "dim"), ds_p["omega"].values)
    out["rho"] = grid_ds["rho"]
    name = w_name(method)
    out[name] = ("time", diag["w2"])
    out["w1"] = ("time", diag["w1"])
    for v in ds_p.data_vars:
        if v.startswith("energy"):
            out[v.replace("energy", "energy_particles", 1)] = ("time", ds_p[v].values)
    for v in grid_ds.data_vars:
        if v != "rho":
            new = _GRID_NAMES.get(v, v.replace("energy", "energy_grid", 1))
            out[new] = ("time", grid_ds[v].values)
    if diag["gap"] is not None:
        out["kernel_gap"] = ("time", diag["gap"])
        out["kernel_gap"].attrs["long_name"] = "max_jk |K_muN(x_j, x_k) - K_rho(x_j, x_k)|"
    out[name].attrs["long_name"] = (
        "sliced W2(mu_N(t), rho_t)" if method == "sliced" else "W2(mu_N(t), rho_t)"
    )
    out[name].attrs["method"] = method
    out["w1"].attrs["long_name"] = "W1(mu_N(t), rho_t)"
    out["rho"].attrs["long_name"] = "grid density rho_t (cell average)"
    out["omega"].attrs["long_name"] = "particle positions"
    return out


# ----------------------------------------------------------------------------------------
# the rate in N
# ----------------------------------------------------------------------------------------
def fit_rate(n_values, w, confidence: float = 0.95) -> dict:
    r"""Fit W ≈ C N^slope per seed and summarise the slope over seeds (Student-t interval).

    .. math::

        \log W_{ks} = \log C_s + \text{slope}_s \log N_k,
        \qquad \overline{\text{slope}} \pm t_{S-1}\,
        \frac{\operatorname{sd}(\text{slope}_s)}{\sqrt S}.

    A thin alias of :func:`meanfield.stats.fit_power_law` with ``interval="t"``
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

    Examples
    --------
    Two seeds following W = C N^(−1/2) exactly:

    >>> import numpy as np
    >>> from meanfield.workbench.compare import fit_rate
    >>> n = np.array([100, 200, 400, 800])
    >>> w = n[:, None] ** -0.5 * np.array([1.0, 1.1])
    >>> r = fit_rate(n, w)
    >>> round(r["slope"], 9), r["slopes"].round(9).tolist(), r["confidence"]
    (-0.5, [-0.5, -0.5], 0.95)
    """
    w = np.asarray(w, dtype=float)
    if w.ndim != 2 or w.shape[1] < 2:
        raise ValueError("w must have shape (len(n_values), S) with S >= 2 seeds")
    out = fit_power_law(
        check_fit_sizes("n_values (N)", n_values), w, level=confidence, interval="t"
    )
    return {**out, "confidence": confidence}


# the default problem and its run moved to meanfield.workbench.problems, the rate study in N to
# meanfield.studies.convergence; both stay importable from here, resolved on first use (PEP
# 562): meanfield.workbench.problems runs compare(), so importing it here at load time would be a
# cycle. The only imports of a higher module in this file; tests/test_import_graph.py lists them.
_MOVED = {
    "DEFAULTS": "problems",
    "default_problem": "problems",
    "run_default_comparison": "problems",
    "convergence_in_n": "convergence",
}


def __getattr__(name: str):
    if _MOVED.get(name) == "problems":
        from . import problems

        return getattr(problems, name)
    if _MOVED.get(name) == "convergence":
        from ..studies import convergence

        return getattr(convergence, name)
    raise AttributeError(f"module 'meanfield.workbench.compare' has no attribute {name!r}")


__all__ = ["compare", "fit_rate", *_MOVED]  # noqa: F822 (moved names resolve lazily)
