"""Particles and grid side by side: the same Energy, the same β, the same initial law.

:func:`compare` evolves N particles by projected Langevin
(:func:`meanfield.dynamics.langevin.simulate`, mean-field regime β_N = β) and the grid density by
the McKean–Vlasov solver (:class:`meanfield.pde.McKeanVlasov`) from one initial law, and returns one
``xarray.Dataset`` holding both trajectories and the diagnostics over time.  The initial particles
are an exact iid sample of the initial grid density (piecewise constant), so at t = 0 the only gap
is the sampling error.

It reads one :class:`~meanfield.dynamics.spec.RunSpec` (``compare(spec)``), or builds it from
keywords (``compare(energy, initial, n_particles=..., beta=..., t_final=..., eta=...)``).
:func:`~meanfield.workbench.problems.default_problem` and
:func:`~meanfield.workbench.problems.run_default_comparison` (the README's embedded problem, a
:class:`~meanfield.workbench.problems.ComparisonConfig`, and its one-call run with I/O) live in
:mod:`meanfield.workbench.problems`.  :func:`convergence_in_n` measures the rate of
W2(μ_N(t), ρ_t) → 0 in N with a confidence interval over seeds; :func:`free_energy_decay`
follows the grid alone to t → ∞ (the free-energy gap to the Gibbs state and its rate), and
:func:`beta_limit_grid` its Gibbs state to β → ∞ (against the exact law of a closed-form case).

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
from ..closed_forms import closed_form_energy, exact_cell_masses
from ..contract import Param, declare
from ..domains import Torus
from ..dynamics.langevin import simulate
from ..dynamics.spec import MAX_STEPS, RunSpec, as_spec, n_steps_for
from ..energy import Energy
from ..errors import ConvergenceError, InputError, InputTypeError
from ..ot.circle import wasserstein_circle, wasserstein_torus
from ..ot.diagnostics import kernel_gap
from ..ot.distance import W2_METHODS, resolve_w_method, w_name, wasserstein
from ..ot.distance import w2 as _w2_exact
from ..ot.measure import Measure
from ..pde import (
    Density,
    FreeEnergyTracker,
    Grid,
    MassTracker,
    McKeanVlasov,
    StorageTracker,
    gibbs_state,
    solve,
)
from ..pde.solver import check_step_budget
from ..pde.stepper import Stepper
from ..results import check_extra_attrs, merge_attrs, provenance
from ..stats import fit_power_law


def _data_term(energy: Energy):
    """(X, feature) of the energy's first alignment term — any term whose
    :meth:`~meanfield.energy.Term.kernel_data` names its data, built-in or not — or None."""
    for t in energy.terms:
        if (data := t.kernel_data()) is not None:
            return data
    return None


@declare(
    Param("n_records", "int", "about this many records (every n_steps // n_records steps, "
          "plus the last)", low=1),
    Param("w_method", "choice", "how W2 is computed (auto: exact or sparse_exact)",
          choices=W2_METHODS),
    Param("progress", "flag", "show progress bars"),
    Param("max_steps", "int", "the most steps either side may take (the particles' and the "
          "grid's, checked before any work)", low=1),
)  # fmt: skip
def compare(
    spec=None,
    initial=None,
    *,
    n_records: int = 20,
    w_method: str = "auto",
    progress: bool = False,
    extra_attrs: dict | None = None,
    max_steps: int = MAX_STEPS,
    **run,
) -> xr.Dataset:
    r"""Evolve N particles and the grid density from the same law; diagnostics over time.

    The two sides discretise the same dynamics, the Langevin system and its mean-field
    (McKean–Vlasov) limit, and are compared at each record by W2(μ_N(t), ρ_t):

    .. math::

        d\omega_i = -N \nabla_{\omega_i} H_N(\Omega)\, dt + \sqrt{2/\beta}\, dW_i, \qquad
        \partial_t \rho = \nabla \cdot \Big(\rho\, \nabla \frac{\delta E}{\delta \rho}\Big)
        + \beta^{-1} \Delta \rho.

    Two forms, the same run: ``compare(spec)`` with a
    :class:`~meanfield.dynamics.spec.RunSpec` whose initial state is a law on a grid (keywords
    of ``run`` replace its fields), or the keyword form ``compare(energy, initial,
    n_particles=..., beta=..., t_final=..., eta=..., ...)``, which builds the spec.

    Parameters
    ----------
    spec : RunSpec or Energy
        The run (mean-field regime, projected Langevin, an initial :class:`~meanfield.pde.Density`
        that the particles sample iid); or the model, in the keyword form.
    initial : Density, optional
        Keyword form: the initial law ρ_0 on a grid of the energy's box.
    n_records : int
        About this many records (every ``n_steps // n_records`` steps, plus the last).
    w_method : {"auto", "exact", "sparse_exact", "sliced"}
        How W2 is computed (:func:`~meanfield.ot.distance.wasserstein`;
        "auto" is exact or sparse_exact, never sliced).
    progress, extra_attrs : bool, dict, optional
        Show progress bars; more attributes for the dataset.
    max_steps : int
        The most steps either side may take (default
        :data:`~meanfield.dynamics.spec.MAX_STEPS`): the particles' round(t_final/η) and the
        grid's, estimated from its stable step at ρ_0, are both checked before any work
        (:class:`~meanfield.errors.StepBudgetError`).
    **run
        Fields of the spec: in the keyword form ``n_particles`` (N ≥ 1), ``beta``,
        ``t_final`` (> 0; the particles take round(t_final/η) steps) or ``n_steps``, ``eta``,
        and optionally ``seed`` (of the initial sample and the Langevin noise), ``scheme``,
        ``order``, ``safety`` (the grid scheme, :class:`~meanfield.pde.McKeanVlasov` and
        :func:`~meanfield.pde.solver.solve`); with a spec, the fields to change.

    Returns
    -------
    xarray.Dataset
        Coordinates ``time``, ``particle``, ``dim``, ``x`` [, ``y``]; the variables listed in
        the module docstring ("The dataset"); attributes: every parameter, the seed, solver
        statistics and the package version.

    Raises
    ------
    meanfield.errors.InputTypeError, meanfield.errors.InputError
        A declared parameter (``n_records``, ``w_method``, ``progress``, ``max_steps``) or a
        field of the spec refused by name, before any work.
    meanfield.errors.StepBudgetError
        Either side would take more than ``max_steps`` steps.

    See Also
    --------
    meanfield.dynamics.langevin.simulate : the particle side.
    meanfield.pde.solver.solve : the grid side.
    meanfield.workbench.problems.run_default_comparison : the default problem, run and saved.
    convergence_in_n : the rate of W2(μ_N(t), ρ_t) → 0 in N.

    References
    ----------
    Carrillo, J. A., Chertock, A. and Huang, Y. (2015). A finite-volume method for nonlinear
    nonlocal equations with a gradient flow structure. Commun. Comput. Phys. 17, 233–258
    (the grid scheme).
    Sznitman, A.-S. (1991). Topics in propagation of chaos. École d'Été de Probabilités de
    Saint-Flour XIX, Lecture Notes in Math. 1464 (why W2(μ_N(t), ρ_t) → 0).

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

    The same run from its spec:

    >>> from meanfield.dynamics.spec import RunSpec
    >>> spec = RunSpec(energy=E, initial=rho0, n_particles=20, beta=10.0, eta=0.01, n_steps=5)
    >>> bool((compare(spec, n_records=1)["w2"] == ds["w2"]).all())
    True
    """
    spec = as_spec(spec, initial, max_steps=max_steps, **run)
    _check_spec(spec, max_steps)
    law, grid = spec.law, spec.grid
    eq = spec.equation()  # the grid's step count too, before the particles run
    check_step_budget(Stepper(eq, safety=spec.safety), law.data, spec.t_final, max_steps)
    recorded = (*COMPARE_ATTRS, *grid.describe(), *eq.scheme.describe(), *spec.energy.describe())
    check_extra_attrs(extra_attrs, recorded)  # none may overwrite a recorded parameter
    record_every = max(1, spec.n_steps // n_records)
    ds_p, t_particles = _particle_run(spec, record_every, progress)
    res, grid_ds = _grid_run(
        eq, law, ds_p["time"].values, spec.eta * record_every, spec.safety, progress
    )
    method = resolve_w_method(grid.dim, spec.n_particles, int(np.count_nonzero(law.data)), w_method)
    if isinstance(spec.energy.domain, Torus):
        # the torus's own distance: exact on the circle, POT's emd on the minimum-image
        # cost in p >= 2 (meanfield.ot.circle); a sliced distance is not defined there
        if w_method == "sliced":
            raise InputError("w_method 'sliced' is not defined on a torus; use 'auto' or 'exact'")
        method = "exact"
    diag = _diagnostics(
        spec.energy, grid, ds_p["omega"].values, grid_ds, method, spec.seed, progress
    )
    record = {"record_every": record_every, "t_final": float(ds_p["time"].values[-1])}
    attrs = _attrs(spec, record, eq, res, method, t_particles, extra_attrs)
    return _assemble(ds_p, grid_ds, grid, method, diag).assign_attrs(attrs)


def _check_spec(spec: RunSpec, max_steps: int) -> None:
    """What :func:`compare` needs of a spec beyond its own checks: the initial law on a grid,
    the mean-field regime and Langevin (the grid equation is their limit), the step budget."""
    if spec.law is None:
        raise InputTypeError(
            "initial must be a meanfield.pde.Density for compare (the law both views start "
            f"from), got particles of shape {tuple(np.shape(spec.initial))}"
        )
    if spec.regime != "mean-field" or spec.method != "langevin":
        raise InputError(
            "compare runs the particles by projected Langevin in the mean-field regime (the "
            f"McKean-Vlasov equation is their limit), got method={spec.method!r}, "
            f"regime={spec.regime!r}"
        )
    n_steps_for(spec.t_final, spec.eta, max_steps=max_steps)


#: The attributes :func:`compare` records besides the descriptions and provenance.
COMPARE_ATTRS = (
    "N", "p", "beta", "regime", "eta", "t_final", "n_steps", "record_every", "w_method",
    "grid_scheme", "grid_safety", "grid_steps", "grid_dt_min", "grid_dt_max",
    "wall_particles_s", "wall_grid_s",
)  # fmt: skip


def _attrs(spec: RunSpec, record, eq, res, method, t_particles, extra_attrs) -> dict:
    """The dataset's attributes: every parameter, solver statistics, provenance."""
    grid = eq.grid
    params = {
        "N": spec.n_particles,
        "p": grid.dim,
        "beta": eq.beta,
        "regime": spec.regime,
        "eta": spec.eta,
        "t_final": record["t_final"],
        "n_steps": spec.n_steps,
        "record_every": record["record_every"],
        "w_method": method,
        "grid_scheme": eq.scheme.name,
        "grid_safety": spec.safety,
        "grid_steps": res.n_steps,
        "grid_dt_min": res.dt_min,
        "grid_dt_max": res.dt_max,
        "wall_particles_s": t_particles,
        "wall_grid_s": res.wall_time,
        **grid.describe(),
        **eq.scheme.describe(),
        **spec.energy.describe(),
    }
    params = merge_attrs(params, extra_attrs)
    params.pop("scheme", None)
    return provenance(params, seed=spec.seed)


def _particle_run(spec: RunSpec, record_every: int, progress: bool):
    """Projected Langevin from an iid sample of the initial law: (dataset, wall seconds)."""
    start = time.perf_counter()
    ds = simulate(spec, record_every=record_every, progress=progress)
    return ds, time.perf_counter() - start


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
    # in 1D every exact method is the quantile formula (as the particles-vs-grid distance was)
    solver = "exact" if grid.dim == 1 and method == "sparse_exact" else method
    periodic = isinstance(energy.domain, Torus)
    for k in records:
        rho_k = Density(grid, grid_ds["rho"].values[k])
        if periodic:  # the geodesic distance of the torus, not the free-space one
            on_torus = wasserstein_circle if grid.dim == 1 else wasserstein_torus
            y, b = grid.centers, rho_k.masses.ravel()
            w2[k] = on_torus(omega[k], y, None, b, domain=energy.domain, order=2)
            w1[k] = on_torus(omega[k], y, None, b, domain=energy.domain, order=1)
        else:
            a, b = Measure.from_particles(omega[k]), Measure.from_density(rho_k)
            w2[k] = wasserstein(a, b, 2, solver, seed=seed).distance
            if method == "exact":
                w1[k] = wasserstein(a, b, 1, "exact").distance
        if data is not None:
            gap[k] = kernel_gap(omega[k], rho_k, *data)
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
# β → ∞: the grid Gibbs state against the exact law
# ----------------------------------------------------------------------------------------
def beta_limit_grid(case: str, betas, *, cells: int = 512, progress: bool = False) -> xr.Dataset:
    r"""W2(ρ_β, μ*) on a grid: the mean-field Gibbs state against the exact β = ∞ law.

    ρ_β solves ρ = Z⁻¹ exp(−β δE/δρ[ρ]) (Newton–Krylov, warm-started along increasing β);
    μ* is the closed form of THEORY §5 averaged over the same cells.

    .. math::

        \rho_\beta = Z^{-1} \exp\Big(-\beta \frac{\delta E}{\delta \rho}[\rho_\beta]\Big),
        \qquad W_2(\rho_\beta, \mu^*) \to 0 \quad (\beta \to \infty)

    Returns
    -------
    xarray.Dataset
        ``w2_grid`` over ``beta`` (sorted).

    See Also
    --------
    meanfield.studies.limits.beta_limit_particles : the same limit for particles.
    meanfield.studies.limits.beta_limit_on_grid : this computation saved, with its power law.
    meanfield.closed_forms.exact_cell_masses : μ* on the cells.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* as N → ∞).

    Examples
    --------
    >>> from meanfield.workbench.compare import beta_limit_grid
    >>> ds = beta_limit_grid("uniform", [8.0, 2.0], cells=16)
    >>> ds["beta"].values.tolist(), bool(ds["w2_grid"][1] < ds["w2_grid"][0])
    ([2.0, 8.0], True)
    """
    betas = np.sort(np.asarray(betas, dtype=float))
    energy = closed_form_energy(case)
    grid = Grid(energy.domain, cells)
    mstar = Density(grid, exact_cell_masses(case, grid.edges[0]) / grid.cell_volume)
    dist, rho = [], None
    for beta in tqdm(betas, desc="grid Gibbs states", unit="beta", disable=not progress):
        rho, report = gibbs_state(energy, grid, float(beta), method="newton", rho0=rho)
        if not report.converged:
            raise ConvergenceError(f"Gibbs state at beta={beta} did not converge: {report}")
        dist.append(_w2_exact(Measure.from_density(rho), Measure.from_density(mstar)).distance)
    return xr.Dataset(
        {"w2_grid": ("beta", np.asarray(dist))},
        coords={"beta": betas},
        attrs=provenance({"case": case, "cells": cells}, seed=None),
    )


# ----------------------------------------------------------------------------------------
# t → ∞: the free-energy gap along the flow
# ----------------------------------------------------------------------------------------
def free_energy_decay(
    energy: Energy,
    beta: float,
    *,
    cells: int = 256,
    t_end: float = 6.0,
    mean0: float = 1.0,
    std0: float = 0.3,
    n_records: int = 200,
    fit_window=(1e-9, 1e-3),
    n_boot: int = 1000,
    seed: int = 0,
    progress: bool = False,
) -> xr.Dataset:
    """t → ∞: the free-energy gap F_β(ρ_t) − F_β(ρ_β) along the McKean–Vlasov flow (p = 1).

    The flow starts from a Gaussian N(mean0, std0²) on the grid; ρ_β is the grid Gibbs state.
    The exponential rate is the slope of log(gap) against t over the times where the gap lies
    in ``fit_window`` (above round-off, past the initial transient), with a residual-bootstrap
    95 % interval.  Fewer than 5 records in the window (``t_end`` too short for the gap to
    fall below ``fit_window[1]``) leave the rate undetermined: NaN, with ``rate_status``
    saying why, never a number fitted to the transient.

    Returns
    -------
    xarray.Dataset over ``time``: ``free_energy``, ``gap``; attributes ``rate``,
    ``rate_ci_low``, ``rate_ci_high``, ``rate_status`` (``"fitted"`` or why not),
    ``F_beta_min``.

    .. math::

        F_\\beta(\\rho_t) - F_\\beta(\\rho_\\beta) \\approx C e^{-\\text{rate} \\cdot t}

    See Also
    --------
    meanfield.studies.limits.t_decay : this computation on a closed-form case, saved.
    meanfield.studies.limits.t_limit_data : the ``t_limit`` figure's experiment.

    References
    ----------
    - J. A. Carrillo, R. J. McCann, C. Villani, Rev. Mat. Iberoamericana 19 (2003) 971–1018.

    Examples
    --------
    V = ω²/2 with k = −|z|: the mean relaxes at rate 1, so the gap (∝ m_t²) decays at rate 2.

    >>> from meanfield.closed_forms import closed_form_energy
    >>> from meanfield.workbench.compare import free_energy_decay
    >>> E = closed_form_energy("uniform")
    >>> ds = free_energy_decay(E, 1.0, cells=16, t_end=6.0, n_records=30, n_boot=20)
    >>> ds.attrs["rate_status"], round(float(ds.attrs["rate"]), 1)
    ('fitted', 2.0)
    """
    beta = check_positive("beta", beta)
    t_end = check_positive("t_end", t_end)
    if energy.dim != 1:
        raise ValueError(f"free_energy_decay is written for p = 1, got p = {energy.dim}")
    t, F, F_min = _free_energy_trace(energy, beta, cells, t_end, mean0, std0, n_records, progress)
    gap = F - F_min
    slope, lo, hi, status = _log_linear_rate(t, gap, fit_window, n_boot, seed, t_end)
    attrs = {"beta": beta, "cells": cells, "t_end": t_end, "mean0": mean0, "std0": std0}
    attrs |= {"rate": -slope, "rate_ci_low": -hi, "rate_ci_high": -lo, "rate_status": status}
    attrs = provenance({**attrs, "F_beta_min": F_min, **energy.describe()}, seed=seed)
    data = {"free_energy": ("time", F), "gap": ("time", gap)}
    return xr.Dataset(data, coords={"time": t}, attrs=attrs)


def _free_energy_trace(energy, beta, cells, t_end, mean0, std0, n_records, progress):
    """F_β(ρ_t) along the McKean–Vlasov flow (SG-implicit) from N(mean0, std0²) on the grid,
    recorded ``n_records`` times up to ``t_end``: (times, free energies, min F_β), where
    min F_β is that of the grid Gibbs state ρ_β (Newton)."""
    grid = Grid(energy.domain, cells)
    _, report = gibbs_state(energy, grid, beta, method="newton")
    eq = McKeanVlasov(energy, grid, beta, scheme="sg-implicit")
    tracker = FreeEnergyTracker(interval=t_end / n_records)
    rho0 = Density.gaussian(grid, mean=mean0, std=std0)
    solve(eq, rho0, t_end, trackers=[tracker], dt=t_end / (4 * n_records), progress=progress)
    fe = tracker.to_dataset()
    return fe["time"].values, fe["free_energy"].values, report.free_energy


def _log_linear_rate(t, gap, fit_window, n_boot: int, seed: int, t_end: float):
    """The slope of log(gap) against t over the records with the gap inside ``fit_window``,
    its residual-bootstrap 95 % interval, and a status: (slope, low, high, status).

    Fewer than 5 records in the window leave the slope undetermined (NaN), with a status
    saying why (``t_end`` is named as what to lengthen)."""
    sel = (gap > fit_window[0]) & (gap < fit_window[1])
    if sel.sum() < 5:
        status = (
            f"undetermined: {int(sel.sum())} of {len(gap)} records have the gap in "
            f"[{fit_window[0]:g}, {fit_window[1]:g}] (at least 5 needed; the gap is "
            f"{gap[-1]:.3g} at t_end = {t_end:g}): lengthen t_end"
        )
        return np.nan, np.nan, np.nan, status
    tt, lg = t[sel], np.log(gap[sel])
    slope, icpt = np.polyfit(tt, lg, 1)
    resid = lg - (slope * tt + icpt)
    rng = np.random.default_rng(seed)
    boots = [
        np.polyfit(tt, slope * tt + icpt + rng.choice(resid, len(resid)), 1)[0]
        for _ in range(n_boot)
    ]
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return slope, lo, hi, "fitted"


# ----------------------------------------------------------------------------------------
# the rate in N
# ----------------------------------------------------------------------------------------
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
    r"""W2(μ_N(t), ρ_t) at t = t_final for several N and seeds, and the fitted rate.

    The grid solution is computed once; each (N, seed) runs the particles from an iid sample
    of ``initial``.  Expected rate about N^(−1/2) in p = 1 (THEORY §6) until the Langevin bias
    O(η) and the grid error take over:

    .. math::

        W_2(\mu_N(t), \rho_t) \approx C N^{\text{rate}}, \qquad \text{rate} \approx -\tfrac12.

    Returns
    -------
    xarray.Dataset
        ``w2`` (N, seed), ``w2_initial`` (N, seed) (the t = 0 sampling error); attributes
        ``rate``, ``rate_ci_low``, ``rate_ci_high``, ``rate_confidence``, ``rate_pooled`` and
        all parameters.

    See Also
    --------
    meanfield.studies.limits.particles_vs_grid_in_n : the same distance at several times, as
        a resumable sweep.
    compare : one side-by-side run.
    fit_rate : the fit.

    References
    ----------
    - N. Fournier, A. Guillin, Probab. Theory Relat. Fields 162 (2015) 707–738 (iid rates).

    Examples
    --------
    Three small N, two seeds, five steps (far too few for a sharp rate: the interval is wide):

    >>> from meanfield.pde import Density, Grid
    >>> from meanfield.closed_forms import closed_form_energy
    >>> from meanfield.workbench.compare import convergence_in_n
    >>> E = closed_form_energy("uniform")
    >>> initial = Density.gaussian(Grid(E.domain, 32), mean=0.0, std=0.5)
    >>> ds = convergence_in_n(
    ...     E, initial, n_values=[4, 8, 16], seeds=[0, 1], beta=1.0, t_final=0.05, eta=0.01
    ... )
    >>> low, rate, high = (float(ds.attrs[k]) for k in ("rate_ci_low", "rate", "rate_ci_high"))
    >>> dict(ds["w2"].sizes), low <= rate <= high
    ({'N': 3, 'seed': 2}, True)
    """
    n_values = [check_int("N", n) for n in n_values]
    check_fit_sizes("n_values (N)", n_values)
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2:
        raise ValueError(f"seeds: need at least 2 seeds to fit a rate with a CI, got {len(seeds)}")
    run = dict(beta=beta, t_final=t_final, eta=eta, scheme=scheme, safety=safety)
    spec = as_spec(energy, initial, n_particles=n_values[0], **run)
    eq = spec.equation()
    res = eq.solve(spec.law, spec.t_final, safety=spec.safety)
    w2, w2_0 = _particle_distances(spec, res.state, n_values, seeds)
    fit = fit_power_law(n_values, w2, level=confidence, interval="t")
    out = xr.Dataset(
        {"w2": (("N", "seed"), w2), "w2_initial": (("N", "seed"), w2_0)},
        coords={"N": n_values, "seed": seeds},
    )
    attrs = {"beta": spec.beta, "t_final": spec.t_final, "eta": spec.eta}
    attrs |= {"grid_scheme": eq.scheme.name, "rate": fit["slope"]}
    attrs |= {"rate_ci_low": fit["ci_low"], "rate_ci_high": fit["ci_high"]}
    attrs |= {"rate_confidence": confidence, "rate_pooled": fit["pooled_slope"]}
    out.attrs = provenance({**attrs, **spec.grid.describe(), **energy.describe()}, seed=None)
    return out


def _particle_distances(spec: RunSpec, rho_t, n_values, seeds):
    """W2(μ_N(t), ρ_t) and W2(μ_N(0), ρ_0) for each N and seed, each of shape
    (len(n_values), len(seeds)).

    Each (N, seed) runs ``spec`` with N particles and that seed (mean-field regime, an iid
    sample of the initial law seeded by the seed); the t = 0 distance is the sampling error
    alone.
    """
    w2 = np.empty((len(n_values), len(seeds)))
    w2_0 = np.empty_like(w2)
    for i, N in enumerate(n_values):
        for j, s in enumerate(seeds):
            run = spec.replace(n_particles=N, seed=s)
            omega0 = run.particles()
            ds = simulate(run.replace(initial=omega0), record_every=run.n_steps)
            final = Measure.from_particles(ds["omega"].values[-1])
            w2[i, j] = _w2_exact(final, Measure.from_density(rho_t)).distance
            w2_0[i, j] = _w2_exact(
                Measure.from_particles(omega0), Measure.from_density(spec.law)
            ).distance
    return w2, w2_0


@declare(Param("confidence", "level", "level of the Student-t interval on the mean slope"))
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
        Fewer than 3 distinct N (the rate is undetermined), fewer than 2 seeds, ``w`` not of
        shape (K, S), or ``confidence`` outside (0, 1).

    See Also
    --------
    meanfield.stats.fit_power_law : the fit itself (bootstrap or Student-t interval).
    convergence_in_n : measures W2 over N and seeds.

    References
    ----------
    Fournier, N. and Guillin, A. (2015). On the rate of convergence in Wasserstein distance of
    the empirical measure. Probab. Theory Relat. Fields 162, 707–738 (the iid rates, N^(−1/2)
    in p = 1, that the fitted slope is compared with).

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
        raise InputError(f"w must have shape (len(n_values), S) with S >= 2 seeds, got {w.shape}")
    out = fit_power_law(
        check_fit_sizes("n_values (N)", n_values), w, level=confidence, interval="t"
    )
    return {**out, "confidence": confidence}


__all__ = ["beta_limit_grid", "compare", "convergence_in_n", "fit_rate", "free_energy_decay"]
