"""The limits of THEORY §5–6: N → ∞, β → ∞ and t → ∞.

* N → ∞: W1, W2 of relaxed particles to the equilibrium μ* of a closed-form case
  (:func:`equilibrium_in_n`); W2(μ_N(t), ρ_t) against the McKean–Vlasov grid in p = 1
  (:func:`particles_vs_grid_in_n`) and p = 2 (:func:`particles_vs_grid_2d_in_n`, the study
  that ``meanfield run`` runs: :func:`check_config`, :func:`run_study`, :func:`write_report`);
* β → ∞: W2(ρ_β, μ*) of the grid Gibbs state and W2(μ_N, μ*) of particles
  (:func:`beta_limit_on_grid`, :func:`beta_limit_particles`);
* t → ∞: the free-energy gap along the flow and its exponential rate (:func:`t_decay`).

Generic pieces live below the studies: the cases' energies and laws in
:mod:`meanfield.closed_forms`; ``convergence_in_n``, ``beta_limit_grid``, ``free_energy_decay`` in
:mod:`meanfield.workbench.compare`; the default problem's runs in
:mod:`meanfield.workbench.problems`. :func:`meanfield.workbench.sweeps.run_sweep` maps run functions
``f(**params) -> xarray.Dataset`` into resumable sweeps; the ``*_data`` functions are the
experiments of ``meanfield figures`` at a named size (:data:`SIZES`).

References
----------
- S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* and N → ∞).
- I. Dumitriu, A. Edelman, J. Math. Phys. 43 (2002) 5830–5847 (the log gas as β-ensemble).
- J. A. Carrillo, R. J. McCann, C. Villani, Rev. Mat. Iberoamericana 19 (2003) 971–1018.
- N. Fournier, A. Guillin, Probab. Theory Relat. Fields 162 (2015) 707–738 (iid rates).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from .._validation import check_choice, check_int, check_output_path, check_positive
from ..closed_forms import closed_form_energy, default_step, equilibrium_case, wasserstein_to_law_1d
from ..contract import Param
from ..domains import Box
from ..dynamics.langevin import simulate
from ..dynamics.spec import RunSpec
from ..energy import Energy, QuadraticPotential
from ..errors import InputError
from ..results import provenance, save_dataset
from ..stats import fit_power_law_or_undetermined
from ..workbench.compare import beta_limit_grid, free_energy_decay
from ..workbench.problems import (
    ComparisonConfig,
    grid_refinement_w2,
    grid_solution,
    particles_vs_grid_run,
)
from ..workbench.study_settings import declare_settings, write_json
from ..workbench.sweeps import run_sweep

#: ``"full"``: the committed figures; ``"small"``: a quick run of the same computation (tests,
#: CI, notebooks: seconds each on two cores).
SIZES = ("small", "full")


def check_size(size: str) -> str:
    """``size`` checked against :data:`SIZES` (ValueError naming the allowed values).

    See Also
    --------
    n_limit_data, beta_limit_data, t_limit_data : the experiments sized by it.

    Examples
    --------
    >>> from meanfield.studies.limits import check_size
    >>> check_size("tiny")
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown size 'tiny'; choose one of 'small', 'full'
    """
    return check_choice("size", size, SIZES)


def particle_equilibrium_run(
    N: int,
    beta: float,
    seed: int,
    *,
    case: str = "semicircle",
    regime: str = "coulomb-gas",
    t_end: float = 5.0,
    eta: float | None = None,
    n_replicas: int = 1,
) -> xr.Dataset:
    """Relax N particles of a closed-form case to stationarity and measure W1, W2 to μ*.

    Parameters
    ----------
    N, beta, seed : int, float, int
        Number of particles, inverse temperature (β_N = β or βN by ``regime``), seed.
    case : {"semicircle", "uniform", "disk"}
        THEORY §5: p = 1 log-gas, p = 1 with k = −|z|, p = 2 log-gas.
    t_end : float
        Time of the Langevin run from a well-spread start (uniform on [−1, 1]^p).
    eta : float, optional
        Step; default :func:`meanfield.closed_forms.default_step`.
    n_replicas : int
        Independent replicas run side by side.

    Returns
    -------
    xarray.Dataset
        ``omega_final`` (replica, particle, dim); ``w1``, ``w2`` (replica): distance of the
        empirical measure to μ* (in p = 2, of the radii to the radial law), by exact quantile
        integrals.

    See Also
    --------
    equilibrium_in_n : this run swept over (N, seed), with the rate in N.
    beta_limit_particles : this run swept over (β, seed), with the rate in β.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* as N → ∞).
    - I. Dumitriu, A. Edelman, J. Math. Phys. 43 (2002) 5830–5847 (the log gas as β-ensemble).

    Examples
    --------
    Eight particles of the uniform case (k = −|z|) at β = 4, a short run:

    >>> from meanfield.studies.limits import particle_equilibrium_run
    >>> ds = particle_equilibrium_run(8, 4.0, 0, case="uniform", t_end=0.5)
    >>> dict(ds["omega_final"].sizes), ds.attrs["eta"], ds.attrs["n_steps"]
    ({'replica': 1, 'particle': 8, 'dim': 1}, 0.0625, 8)
    >>> bool((ds["w1"] <= ds["w2"]).all())  # W1 ≤ W2
    True
    """
    N = check_int("N", N)
    beta = check_positive("beta", beta)
    check_choice("case", case, ("semicircle", "uniform", "disk"))
    n_replicas = check_int("n_replicas", n_replicas)
    s, p, law = equilibrium_case(case)
    eta = default_step(case, N) if eta is None else check_positive("eta", eta)
    n_steps = max(1, int(round(t_end / eta)))
    run = dict(eta=eta, beta=beta, n_steps=n_steps, regime=regime, seed=seed)
    final, energy_final = _relax_replicas(closed_form_energy(case), N, p, n_replicas, run)
    params = {"case": case, "s": s, "p": p, "N": N, "beta": beta, "regime": regime}
    params |= {"eta": eta, "t_end": t_end, "n_steps": n_steps, "n_replicas": n_replicas}
    return _equilibrium_dataset(final, energy_final, law, params, seed)


def _relax_replicas(energy: Energy, N: int, p: int, n_replicas: int, run: dict):
    """Langevin runs of ``n_replicas`` replicas of N particles from a well-spread start.

    The start is evenly spread on [−1, 1] with a random jitter below the spacing (p = 1: no
    near-collisions for the stiff singular kernels), or uniform on [−0.6, 0.6]^p (p = 2);
    ``run`` holds the run's fields of a :class:`~meanfield.dynamics.spec.RunSpec`: ``eta``,
    ``beta``, ``n_steps``, ``regime`` and ``seed`` (which also seeds the start).  Returns the
    final positions (replica, particle, dim) and the final energies (replica,)."""
    gen = torch.Generator().manual_seed(int(run["seed"]))
    if p == 1:  # evenly spread start, randomly jittered: no near-collisions
        base = torch.linspace(-1, 1, N, dtype=torch.float64)
        jitter = (torch.rand(n_replicas, N, generator=gen, dtype=torch.float64) - 0.5) / N
        omega0 = (base + jitter)[..., None]
    else:
        omega0 = (torch.rand(n_replicas, N, p, generator=gen, dtype=torch.float64) - 0.5) * 1.2
    ds = simulate(RunSpec(energy=energy, initial=omega0, **run), record_positions=False)
    return ds["omega_final"].values, ds["energy"].isel(time=-1).values


def _equilibrium_dataset(final, energy_final, law, params: dict, seed) -> xr.Dataset:
    """:func:`particle_equilibrium_run`'s dataset: the final positions ``final`` (replica,
    particle, dim), their W1 and W2 to μ* (in p = 2, of the radii to the radial law ``law``)
    by exact quantile integrals, the final energies, and ``params`` as provenance."""
    p, N, n_replicas = params["p"], params["N"], params["n_replicas"]
    samples = final[..., 0] if p == 1 else np.linalg.norm(final, axis=-1)
    w1 = [wasserstein_to_law_1d(x, law, order=1) for x in samples]
    w2 = [wasserstein_to_law_1d(x, law, order=2) for x in samples]
    out = xr.Dataset(
        {
            "omega_final": (("replica", "particle", "dim"), final),
            "w1": (("replica",), np.asarray(w1)),
            "w2": (("replica",), np.asarray(w2)),
            "energy_final": (("replica",), energy_final),
        },
        coords={"replica": np.arange(n_replicas), "particle": np.arange(N), "dim": np.arange(p)},
        attrs=provenance(params, seed=seed),
    )
    out["w1"].attrs["long_name"] = "W1(mu_N, mu*)"
    out["w2"].attrs["long_name"] = "W2(mu_N, mu*)"
    return out


def particles_vs_grid_in_n(
    Ns,
    seeds,
    out_dir,
    *,
    t_final: float = 1.0,
    n_records: int = 4,
    scheduler: str = "threads",
    n_workers: int | None = None,
    progress: bool = False,
) -> xr.Dataset:
    r"""N → ∞ at several times: W2(μ_N(t), ρ_t) and the kernel gap against N, as a resumable
    sweep over (N, seed), with the fitted power-law rate and its bootstrap 95 % interval at
    every recorded time (variables ``rate_<metric>``, ``rate_<metric>_low/high`` over time;
    NaN, with ``attrs["rate_status"]`` "undetermined…", for fewer than 3 distinct N).

    See Also
    --------
    meanfield.workbench.problems.particles_vs_grid_run : one run of the sweep.
    meanfield.workbench.compare.convergence_in_n : the rate at one time, one grid solution.
    n_limit_data : the ``n_limit`` figure's experiment.

    References
    ----------
    - N. Fournier, A. Guillin, Probab. Theory Relat. Fields 162 (2015) 707–738 (iid rates).

    Examples
    --------
    Two sizes only (the rate is then undetermined), into ``sweep_n/`` in the current folder:

    >>> from meanfield.studies.limits import particles_vs_grid_in_n
    >>> ds = particles_vs_grid_in_n([4, 8], [0], "sweep_n", t_final=0.05, n_records=1, n_workers=1)
    >>> dict(ds["w2"].sizes), ds.attrs["rate_status"]
    ({'N': 2, 'seed': 1, 'time': 2}, 'undetermined: fewer than 3 distinct sizes')
    """
    ds = run_sweep(
        particles_vs_grid_run,
        {"N": list(Ns), "seed": list(seeds)},
        out_dir,
        fixed={"t_final": t_final, "n_records": n_records},
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
    )
    for k in ("w2", "kernel_gap"):
        fits = [
            fit_power_law_or_undetermined(ds["N"].values, ds[k].isel(time=i).values, n_boot=1000)
            for i in range(ds.sizes["time"])
        ]
        ds[f"rate_{k}"] = ("time", [f["slope"] for f in fits])
        ds[f"rate_{k}_low"] = ("time", [f["ci_low"] for f in fits])
        ds[f"rate_{k}_high"] = ("time", [f["ci_high"] for f in fits])
        ds.attrs["rate_status"] = fits[0]["status"]
    return ds


def particles_vs_grid_2d_run(
    N: int,
    seed: int,
    *,
    cells: int = 128,
    t_final: float = 0.25,
    eta: float = 0.005,
    refine: int = 2,
    exact_max: int = 10_000,
    binned_min: int = 10_000,
    n_data: int = 200,
) -> xr.Dataset:
    r"""One (N, seed) of the p = 2 N → ∞ study: W₂(μ_N(t), ρ_t) against the grid density.

    The README's problem in p = 2 (:class:`~meanfield.workbench.problems.ComparisonConfig`,
    ``dim=2``: FAVOR+ features on the radial task, V = |ω|²/2, the log kernel with λ = 1/2,
    β = 10, mean-field regime, initial N(0, 0.4² I) on [−2, 2]²), the pair term by fast sums
    (:class:`~meanfield.fastsums.FastCoulombInteraction`, direct below 14 000 particles).
    ρ_t is read as piecewise constant on its cells and compared by
    :func:`meanfield.ot.binned.w2_to_density` (sub-cells of side h/``refine``):

    * ``w2``: the particles unbinned, certified to within δ_ρ = (h/r)√(1/6) (N ≤ ``exact_max``,
      else NaN);
    * ``w2_binned``: the particles binned on the same sub-cells, certified to within
      δ_μ + δ_ρ (``w2_binned_bound``) at any N (N ≥ ``binned_min``, else NaN);
    * ``w2_binned_initial``: the same at t = 0 (the iid sampling error of the initial law).

    Each distance is one exact solve against (``cells`` · ``refine``)² atoms (seconds to a
    minute).  t_final = 0.25 keeps large N affordable on one core (the step's near-field pass,
    :func:`meanfield.dynamics.near_field.near_field`, is a k-d tree search from N = 1024).

    Returns
    -------
    xarray.Dataset
        Scalars ``w2``, ``w2_binned``, ``w2_binned_bound``, ``w2_binned_initial``,
        ``particle_shift``, ``density_shift``, ``wall_particles_s``, ``wall_w2_s``.

    See Also
    --------
    particles_vs_grid_2d_in_n : the sweep over N and seeds, and the fitted rate.
    meanfield.workbench.problems.particles_vs_grid_run : the p = 1 study.

    References
    ----------
    - N. Fournier, A. Guillin, Probab. Theory Relat. Fields 162 (2015) 707–738 (in p = 2 the
      iid rate is (log N / N)^(1/2)).

    Examples
    --------
    >>> from meanfield.studies.limits import particles_vs_grid_2d_run
    >>> ds = particles_vs_grid_2d_run(50, 0, cells=16, t_final=0.01, binned_min=1, n_data=10)
    >>> bool(abs(ds["w2"] - ds["w2_binned"]) <= ds["w2_binned_bound"])
    True
    """
    from ..fastsums import FastCoulombInteraction
    from ..kernels import Coulomb
    from ..ot.binned import w2_to_density

    N, cells = check_int("N", N), check_int("cells", cells, minimum=4)
    problem = ComparisonConfig(dim=2, cells=cells, n_data=n_data, t_final=t_final, eta=eta)
    E = problem.energy
    fast = Energy([*E.terms[:2], FastCoulombInteraction(Coulomb(2), problem.lam)], E.domain)
    spec = problem.spec().replace(energy=fast, n_particles=N, seed=seed)
    start = time.perf_counter()
    omega = simulate(spec, record_every=spec.n_steps)["omega"].values
    wall_particles = time.perf_counter() - start
    rho = grid_solution(2, cells, t_final, eta, n_data)
    start = time.perf_counter()
    values = dict.fromkeys(("w2", "w2_binned", "w2_binned_bound", "w2_binned_initial"), np.nan)
    values |= {"particle_shift": np.nan, "density_shift": np.nan}
    if N <= exact_max:
        values["w2"] = w2_to_density(omega[-1], rho, refine=refine, bin_particles=False).estimate
    if N >= binned_min:
        b = w2_to_density(omega[-1], rho, refine=refine)
        values |= {"w2_binned": b.estimate, "w2_binned_bound": b.particle_shift + b.density_shift}
        values["w2_binned_initial"] = w2_to_density(omega[0], spec.law, refine=refine).estimate
        values |= {"particle_shift": b.particle_shift, "density_shift": b.density_shift}
    values |= {"wall_particles_s": wall_particles, "wall_w2_s": time.perf_counter() - start}
    attrs = {"t_final": float(spec.n_steps * eta), "n_steps": spec.n_steps, "beta": spec.beta}
    return xr.Dataset({k: ((), float(v)) for k, v in values.items()}, attrs=attrs)


def particles_vs_grid_2d_in_n(
    seeds_by_n: dict,
    out_dir,
    *,
    fit_max: int | None = None,
    scheduler: str = "threads",
    n_workers: int | None = 1,
    progress: bool = False,
    **fixed,
) -> xr.Dataset:
    r"""The p = 2 N → ∞ study as resumable sweeps (one per N, ``out_dir/N<N>``, each finished (N,
    seed) written at once), gathered over N (seeds missing at an N are NaN), with the fitted rate of
    W₂(μ_N(t), ρ_t) ≈ C N^rate over N ≤ ``fit_max`` (below the floor). The fit
    (:func:`meanfield.stats.fit_power_law`, bootstrap 95 % interval over seeds) uses ``w2`` where
    every fitted N has it, else ``w2_binned``, and the seeds present at every fitted N; the iid
    reference in p = 2, W₂ ≈ c (log N / N)^(1/2), has the local slope −1/2 + 1/(2 log N), recorded
    over the same range (``attrs["iid_slope"]``).

    Parameters
    ----------
    seeds_by_n : dict of int -> list of int
        Particle numbers and the seeds run at each.
    out_dir : path
    fit_max : int, optional
        Largest N in the fit (default: all).
    scheduler, n_workers, progress :
        As :func:`meanfield.workbench.sweeps.run_sweep`.
    **fixed
        Keywords of :func:`particles_vs_grid_2d_run` (``cells``, ``t_final``, ``eta``, ...).

    Returns
    -------
    xarray.Dataset
        The variables of :func:`particles_vs_grid_2d_run` over (N, seed); attributes
        ``rate``, ``rate_ci_low``, ``rate_ci_high``, ``rate_metric``, ``rate_n``, ``iid_slope``;
        ``rate_pooled`` (``_low``, ``_high``, ``_runs``): least squares on every finished run
        of the fitted N, with the 95 % Student-t interval of the slope.

    See Also
    --------
    particles_vs_grid_2d_run : one run.

    Examples
    --------
    >>> from meanfield.studies.limits import particles_vs_grid_2d_in_n
    >>> ds = particles_vs_grid_2d_in_n({20: [0, 1], 40: [0, 1], 80: [0]}, "sweep_2d",
    ...                                cells=16, t_final=0.01, n_data=10)
    >>> dict(ds["w2"].sizes), bool(ds.attrs["rate"] < 0), ds.attrs["rate_n"]
    ({'N': 3, 'seed': 2}, True, '20, 40, 80')
    """
    parts = []
    for N, seeds in sorted(seeds_by_n.items()):
        parts.append(run_sweep(
            particles_vs_grid_2d_run, {"N": [int(N)], "seed": [int(s) for s in seeds]},
            Path(out_dir) / f"N{int(N)}", fixed=fixed, scheduler=scheduler, n_workers=n_workers,
            progress=progress,
        ).load())  # fmt: skip
    ds = xr.concat(parts, dim="N", join="outer", combine_attrs="drop_conflicts")
    fitted = ds.sel(N=[n for n in ds["N"].values if fit_max is None or n <= fit_max])
    metric = "w2" if bool(np.isfinite(fitted["w2"]).any("seed").all()) else "w2_binned"
    y = fitted[metric].dropna("seed", how="any").transpose("N", "seed")
    fit = fit_power_law_or_undetermined(fitted["N"].values, y.values, n_boot=2000)
    logs = np.log(fitted["N"].values.astype(float))
    iid = np.polyfit(logs, 0.5 * (np.log(logs) - logs), 1)[0] if len(logs) > 1 else np.nan
    ds.attrs |= {**_rate_attrs(fit), "rate_metric": metric, "iid_slope": float(iid)}
    ds.attrs["rate_n"] = ", ".join(str(int(n)) for n in fitted["N"].values)
    ds.attrs["rate_seeds"] = ", ".join(str(int(s)) for s in y["seed"].values)
    # every finished run of the fitted N, each an independent point: least squares in log-log
    # with the Student-t interval of its slope (uses the runs the common-seed fit leaves out)
    n_all, w_all = xr.broadcast(fitted["N"], fitted[metric])
    keep = np.isfinite(w_all.values)
    lx, ly = np.log(n_all.values[keep].astype(float)), np.log(w_all.values[keep])
    if len(np.unique(lx)) >= 3:
        from scipy.stats import t as student_t

        (slope, _), cov = np.polyfit(lx, ly, 1, cov=True)
        half = student_t.ppf(0.975, len(lx) - 2) * np.sqrt(cov[0, 0])
        ds.attrs |= {"rate_pooled": slope, "rate_pooled_low": slope - half}
        ds.attrs |= {"rate_pooled_high": slope + half, "rate_pooled_runs": int(keep.sum())}
    return ds


# ---- the p = 2 N → ∞ study, run by ``meanfield run`` (``study = "limits"``) -----------------
#: The keywords of :func:`particles_vs_grid_2d_run` a study file sets (every run's key).
RUN_2D = ("cells", "t_final", "eta", "refine", "exact_max", "binned_min")
PARTS_2D = ("sweep", "dt", "grid")


def _check_2d(**cfg) -> dict:
    """The cross-checks of :data:`SETTINGS`: ``seeds`` a table N -> distinct seeds."""
    seeds, cfg["seeds"] = cfg["seeds"], {}
    if not isinstance(seeds, dict) or not seeds:
        raise InputError(f"seeds must be a non-empty table N = [seeds], got {seeds!r}")
    for n, ss in seeds.items():
        N = check_int(f"seeds key N ({n!r})", int(n) if str(n).isdigit() else n, minimum=2)
        if not isinstance(ss, list) or not ss or len(set(ss)) != len(ss):
            raise InputError(f"seeds.{n} must be a non-empty list of distinct seeds, got {ss!r}")
        cfg["seeds"][N] = [check_int(f"seeds.{n}", s, minimum=0) for s in ss]
    return cfg


#: The settings of the p = 2 study (``paper_repro/n_limit_2d/configs/*.toml``).
SETTINGS = declare_settings(
    f"{__name__}:SETTINGS",
    [
        Param("cells", "int", "grid cells per axis on [−2, 2]²", low=4),
        Param("t_final", "real", "time of the comparison", low=0.0, low_open=True),
        Param("eta", "real", "Langevin step", low=0.0, low_open=True),
        Param("refine", "int", "sub-cells per axis and cell of the W₂ atoms", low=1),
        Param("exact_max", "int", "largest N of the unbinned W₂", low=1),
        Param("binned_min", "int", "smallest N of the binned W₂", low=1),
        Param("fit_max", "int", "largest N in the fitted rate", low=2),
        Param("parts", "choice", "what to compute", choices=PARTS_2D, sequence=True),
        Param("dt_check.N", "int", "N of the time-step check", low=2),
        Param("dt_check.seeds", "seed", "seeds of the time-step check", sequence=True),
        Param("dt_check.eta", "real", "the check's step", low=0.0, low_open=True),
        Param("grid_check.cells", "int", "grid resolutions compared", low=4, sequence=True),
    ],
    {
        "cells": 128, "t_final": 0.25, "eta": 0.005, "refine": 2, "exact_max": 10_000,
        "binned_min": 10_000, "fit_max": 10_000, "parts": list(PARTS_2D),
        "seeds": {300: [0, 1, 2, 3], 1000: [0, 1, 2, 3], 3000: [0, 1, 2], 10_000: [0, 1]},
        "dt_check": {"N": 3000, "seeds": [0, 1], "eta": 0.0025},
        "grid_check": {"cells": [64, 128]},
    },
    check=_check_2d,
)  # fmt: skip


def check_config(settings: dict) -> dict:
    """The complete, checked settings of the p = 2 study (:data:`SETTINGS`), before any work.

    See Also
    --------
    run_study, write_report : the study run with these settings, and its report.

    Examples
    --------
    >>> from meanfield.studies.limits import check_config
    >>> check_config({"seeds": {"300": [0, 1]}})["seeds"]
    {300: [0, 1]}
    >>> check_config({"refne": 4})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: unknown configuration key 'refne' (did you mean 'refine'?)
    """
    return SETTINGS.wrapper(**settings)


def run_study(settings: dict, out, *, n_workers=None, scheduler=None, progress=True) -> None:
    """Run (or resume) the p = 2 study into the folder ``out``, then write its report there.

    ``parts``: ``sweep`` (:func:`particles_vs_grid_2d_in_n` into ``sweep/N<N>/``, gathered in
    ``n_limit_2d.nc``), ``dt`` (the same at ``dt_check.N``, step ``dt_check.eta``: ``dt_check/``,
    ``dt_check.nc``) and ``grid`` (:func:`grid_refinement_w2`: ``grid_check.json``). Finished runs,
    and grid checks of the same settings, are reused. Runs go one at a time (``n_workers`` 1,
    ``scheduler`` ``"threads"`` by default) on one torch thread; wall times are reported.

    See Also
    --------
    check_config : the settings it takes, checked.
    particles_vs_grid_2d_in_n : the sweep of its ``sweep`` and ``dt`` parts.

    Examples
    --------
    >>> from meanfield.studies.limits import check_config, run_study
    >>> cfg = check_config({"cells": 16, "t_final": 0.01, "seeds": {20: [0], 40: [0]},
    ...                     "parts": ["grid"], "grid_check": {"cells": [8, 16]}})
    >>> run_study(cfg, "study_2d", progress=False)
    >>> sorted(p.name for p in Path("study_2d").iterdir())
    ['grid_check.json', 'report.md']
    """
    cfg = check_config(settings)
    out = check_output_path("out", out, kind="dir")
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    run = {k: cfg[k] for k in RUN_2D}
    sweep = {"scheduler": scheduler or "threads", "n_workers": n_workers or 1, "progress": progress}
    if "sweep" in cfg["parts"]:
        ds = particles_vs_grid_2d_in_n(
            cfg["seeds"], out / "sweep", fit_max=cfg["fit_max"], **sweep, **run
        )
        save_dataset(ds, out / "n_limit_2d.nc")
    if "dt" in cfg["parts"]:
        dt = cfg["dt_check"]
        ds = particles_vs_grid_2d_in_n(
            {dt["N"]: dt["seeds"]}, out / "dt_check", **sweep, **run | {"eta": dt["eta"]}
        )
        save_dataset(ds, out / "dt_check.nc")
    if "grid" in cfg["parts"]:
        path, cells = out / "grid_check.json", sorted(cfg["grid_check"]["cells"])
        old = json.loads(path.read_text()) if path.is_file() else []
        records = []
        for pair in zip(cells[:-1], cells[1:], strict=True):
            run = {k: cfg[k] for k in ("t_final", "eta", "refine")}
            same = [r for r in old if r["cells"] == list(pair) and run.items() <= r.items()]
            records += same[:1] or grid_refinement_w2(pair, **run)
        write_json(path, records)
    write_report(out, out)


def _span(values, digits: int) -> str:
    v = values[np.isfinite(values)]
    return f"{v.min():.{digits}f} – {v.max():.{digits}f}" if v.size else "–"


def write_report(out, report_dir) -> None:
    """``report.md`` in ``report_dir``: the numbers of the study folder ``out`` (W₂ over N and
    seeds, the fitted rate, the binned estimate, the time-step and grid checks), read from its
    ``n_limit_2d.nc``, ``dt_check.nc``, ``grid_check.json`` where present (``out`` is not written).

    See Also
    --------
    run_study, particles_vs_grid_2d_in_n : write the files it reads.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.limits import write_report
    >>> write_report(tempfile.mkdtemp(), "report_2d")
    >>> Path("report_2d/report.md").read_text().splitlines()[0]
    '# N → ∞ in p = 2: W₂(μ_N(t), ρ_t), particles against the grid'
    """
    out, report_dir = Path(out), Path(report_dir)
    lines = ["# N → ∞ in p = 2: W₂(μ_N(t), ρ_t), particles against the grid", ""]
    # fmt: off
    if (out / "n_limit_2d.nc").is_file():
        ds = xr.load_dataset(out / "n_limit_2d.nc")
        a = ds.attrs
        lines += [f"t = {a['run_t_final']:g} ({a['run_n_steps']} steps); every run: "
                  f"{a['sweep_fixed']}", "", "| N | seeds | W₂ mean | sd | min – max | wall, "
                  "particles (s) | wall, W₂ (s) | W₂ binned | t = 0 (binned) |", "|---" * 9 + "|"]
        for n in ds["N"].values:
            r = ds.sel(N=n)
            w = r["w2"].values[np.isfinite(r["w2"].values)]
            stats = f"{w.mean():.4f} | {w.std(ddof=1):.4f}" if w.size > 1 else "– | –"
            walls = " | ".join(_span(r[k].values, 0) for k in ("wall_particles_s", "wall_w2_s"))
            binned = " | ".join(_span(r[k].values, 4) for k in ("w2_binned", "w2_binned_initial"))
            lines.append(f"| {n} | {int(np.isfinite(r['wall_w2_s']).sum())} | {stats} | "
                         f"{_span(r['w2'].values, 4)} | {walls} | {binned} |")
        rate = (f"{a['rate']:.3f} [{a['rate_ci_low']:.3f}, {a['rate_ci_high']:.3f}] (95 %, "
                "bootstrap)" if np.isfinite(a["rate"]) else "undetermined (< 3 sizes fitted)")
        lines += ["", f"Rate of {a['rate_metric']} over N = {a['rate_n']} (seeds "
                  f"{a['rate_seeds']}): {rate}; iid local slope over the same N: "
                  f"{a['iid_slope']:.3f}."]
        if "rate_pooled" in a:
            lines.append(f"Least squares on all {a['rate_pooled_runs']} runs: "
                         f"{a['rate_pooled']:.3f} [{a['rate_pooled_low']:.3f}, "
                         f"{a['rate_pooled_high']:.3f}] (Student t).")
    # fmt: on
    if (out / "dt_check.nc").is_file():
        d = xr.load_dataset(out / "dt_check.nc")
        fixed = json.loads(d.attrs["sweep_fixed"])
        w = ", ".join(f"{x:.4f}" for x in d["w2"].values.ravel() if np.isfinite(x))
        lines += ["", f"Time step: η = {fixed['eta']:g} at N = {int(d['N'][0])}: W₂ = {w}."]
    if (out / "grid_check.json").is_file():
        for r in json.loads((out / "grid_check.json").read_text()):
            (a, b), w, d = r["cells"], r["w2"], r["bracket"]
            lines += ["", f"Grid: W₂(ρ_t on {a}², ρ_t on {b}²) = {w:.4f} (bracket ±{d:.4f})."]
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "report.md").write_text("\n".join(lines) + "\n")


def beta_limit_particles(
    case: str,
    betas,
    N: int,
    seeds,
    out_dir,
    *,
    regime: str = "coulomb-gas",
    t_end: float = 6.0,
    scheduler: str = "threads",
    n_workers: int | None = None,
    progress: bool = False,
) -> xr.Dataset:
    r"""β → ∞ for particles: W2(μ_N, μ*) over a (β, seed) sweep, with the fitted power law in β
    and its bootstrap 95 % interval over seeds (attributes ``rate``, ``rate_ci_low/high``;
    NaN with ``rate_status`` "undetermined…" for fewer than 3 distinct β).

    .. math::

        W_2(\mu_N, \mu^*) \approx C \beta^{\text{rate}}

    See Also
    --------
    particle_equilibrium_run : one run of the sweep.
    meanfield.workbench.compare.beta_limit_grid : the same limit on the grid.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* as N → ∞).

    Examples
    --------
    Four particles, two β, one seed, a short run, into ``sweep_beta/`` in the current folder:

    >>> from meanfield.studies.limits import beta_limit_particles
    >>> betas, N, seeds = [1.0, 2.0], 4, [0]
    >>> ds = beta_limit_particles("uniform", betas, N, seeds, "sweep_beta", t_end=0.1, n_workers=1)
    >>> ds["w2"].dims, ds.attrs["rate_status"]
    (('beta', 'seed', 'replica'), 'undetermined: fewer than 3 distinct sizes')
    """
    ds = run_sweep(
        particle_equilibrium_run,
        {"beta": [float(b) for b in betas], "seed": list(seeds)},
        out_dir,
        fixed={"N": int(N), "case": case, "regime": regime, "t_end": t_end},
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
    )
    fit = fit_power_law_or_undetermined(ds["beta"].values, ds["w2"].isel(replica=0).values)
    ds.attrs.update({**_rate_attrs(fit), "rate_status": fit["status"]})
    return ds


def _rate_attrs(fit: dict) -> dict:
    """The fitted power law ``fit`` (:func:`~meanfield.stats.fit_power_law`) as the
    attributes ``rate``, ``rate_ci_low``, ``rate_ci_high``."""
    return {"rate": fit["slope"], "rate_ci_low": fit["ci_low"], "rate_ci_high": fit["ci_high"]}


def equilibrium_in_n(
    case: str,
    n_particles,
    seeds,
    out_dir,
    *,
    beta: float,
    regime: str,
    t_final: float,
    scheduler: str = "threads",
    n_workers: int | None = None,
    progress: bool = False,
    log=None,
) -> tuple[xr.Dataset, dict]:
    """N → ∞ on a closed-form case: particles relaxed at each (N, seed), W1 and W2 to μ*.

    .. math::

        W_q(\\mu_N, \\mu^*) \\sim N^{\\text{rate}}, \\quad q = 1, 2.

    Parameters
    ----------
    case, n_particles, seeds : str, list of int, list of int
        Closed-form case of THEORY §5, the N and the seeds of the sweep (into ``out_dir``).
    beta, regime, t_final :
        Each run's :func:`particle_equilibrium_run` ``beta``, ``regime`` and ``t_end``.
    scheduler, n_workers, progress, log :
        As :func:`meanfield.workbench.sweeps.run_sweep`.

    Returns
    -------
    (xarray.Dataset, dict)
        The sweep (``w1``, ``w2`` over N, seed, replica) and the power-law fits in N of
        ``w1`` and ``w2`` (:func:`~meanfield.stats.fit_power_law_or_undetermined`).

    See Also
    --------
    particle_equilibrium_run : one run of the sweep.
    particles_vs_grid_in_n : N → ∞ at finite times, against the grid.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* as N → ∞).

    Examples
    --------
    Two N (too few for a rate), one seed, a short run, into ``eq/`` in the current folder:

    >>> from meanfield.studies.limits import equilibrium_in_n
    >>> ds, fits = equilibrium_in_n(
    ...     "uniform", [4, 8], [0], "eq", beta=1.0, regime="coulomb-gas", t_final=0.1, n_workers=1
    ... )
    >>> ds["w2"].dims, fits["w2"]["status"]
    (('N', 'seed', 'replica'), 'undetermined: fewer than 3 distinct sizes')
    """
    grid = {"N": list(n_particles), "seed": list(seeds)}
    fixed = {"beta": beta, "case": case, "regime": regime, "t_end": t_final}
    # a 1e-3 time run of N = 2 validates every parameter before the sweep starts
    particle_equilibrium_run(2, **{**fixed, "t_end": 1e-3}, seed=0)
    ds = run_sweep(
        particle_equilibrium_run,
        grid,
        out_dir,
        fixed=fixed,
        scheduler=scheduler,
        n_workers=n_workers,
        progress=progress,
        log=log,
    )
    fits = {
        k: fit_power_law_or_undetermined(ds["N"].values, ds[k].isel(replica=0).values)
        for k in ("w1", "w2")
    }
    return ds, fits


def beta_limit_on_grid(case: str, betas, out_dir, *, progress: bool = False):
    """β → ∞ on the grid: W2(ρ_β, μ*) for each β, saved as ``out_dir/grid.nc``, and its
    power-law fit in β (10 bootstrap draws: the grid values carry no seed noise).

    Returns
    -------
    (xarray.Dataset, dict)
        The dataset of :func:`~meanfield.workbench.compare.beta_limit_grid` and the fit.

    See Also
    --------
    meanfield.workbench.compare.beta_limit_grid : the computation, unsaved.
    beta_limit_particles : the same limit for particles.
    beta_limit_data : the figure's experiment.
    meanfield.stats.fit_power_law : the fit.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* as N → ∞).

    Examples
    --------
    >>> from pathlib import Path
    >>> from meanfield.studies.limits import beta_limit_on_grid
    >>> g, fit = beta_limit_on_grid("uniform", [2.0, 4.0, 8.0], "grid_sweep")
    >>> fit["status"], bool(fit["slope"] < 0), Path("grid_sweep/grid.nc").exists()
    ('fitted', True, True)
    """
    g = beta_limit_grid(case, betas, progress=progress)
    save_dataset(g, Path(out_dir) / "grid.nc")
    fit = fit_power_law_or_undetermined(g["beta"].values, g["w2_grid"].values, n_boot=10)
    return g, fit


def t_decay(case: str, beta: float, t_final: float, out_dir, *, progress: bool = False):
    """t → ∞: the free-energy gap along the McKean–Vlasov flow of a closed-form case from a
    Gaussian, with its exponential rate; saved as ``out_dir/t_decay.nc``.

    Returns
    -------
    xarray.Dataset
        The dataset of :func:`~meanfield.workbench.compare.free_energy_decay`.

    See Also
    --------
    meanfield.workbench.compare.free_energy_decay : the computation, unsaved.
    t_limit_data : the figure's experiment.
    meanfield.pde.trackers.FreeEnergyTracker : the free energy along the flow.

    References
    ----------
    - J. A. Carrillo, R. J. McCann, C. Villani, Rev. Mat. Iberoamericana 19 (2003) 971–1018.

    Examples
    --------
    V = ω²/2, k = −|z| at β = 1: the gap decays at rate 2 (the mean relaxes at rate 1).

    >>> from pathlib import Path
    >>> from meanfield.studies.limits import t_decay
    >>> ds = t_decay("uniform", 1.0, 6.0, "decay")
    >>> ds.attrs["rate_status"], round(float(ds.attrs["rate"]), 1)
    ('fitted', 2.0)
    >>> Path("decay/t_decay.nc").exists()
    True
    """
    energy = closed_form_energy(case)
    ds = free_energy_decay(energy, beta, t_end=t_final, progress=progress)
    save_dataset(ds, Path(out_dir) / "t_decay.nc")
    return ds


# ---- the experiments of ``meanfield figures`` at a named size ----------------------------
#: Configuration of each size: particle numbers, seeds, grid cells, inverse temperatures.
N_LIMIT = {
    "small": {"Ns": [64, 256], "n_seeds": 3, "t_final": 0.5},
    "full": {"Ns": [100, 200, 400, 800, 1600, 3200], "n_seeds": 8, "t_final": 1.0},
}

BETA_LIMIT = {
    "small": {"n_doublings": 5, "cells": 256, "N": 16, "betas": [1.0, 8.0], "n_seeds": 2},
    "full": {
        "n_doublings": 9,
        "cells": 512,
        "N": 64,
        "betas": [1.0, 4.0, 16.0, 64.0],
        "n_seeds": 4,
    },
}

T_LIMIT_CELLS = {"small": 128, "full": 512}

REGIMES = ("mean-field", "coulomb-gas")

CASES = ("semicircle", "uniform")


def n_limit_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """N → ∞: W2(μ_N(t), ρ_t) and the kernel gap against N at several times.

    On the default side-by-side problem (p = 1, mean-field regime,
    :func:`meanfield.workbench.problems.default_problem`), with bootstrap intervals over seeds of
    the fitted rates (expected :math:`W_2(\\mu_N(t), \\rho_t) \\sim N^{-1/2}`).

    Parameters
    ----------
    size : {"small", "full"}
        Particle numbers, seeds and final time of :data:`N_LIMIT`.
    seed : int
        First seed; the runs use ``seed``, ``seed + 1``, ...

    Returns
    -------
    xarray.Dataset
        ``w2``, ``kernel_gap`` (N, seed, time), ``rate_*`` (time).

    See Also
    --------
    particles_vs_grid_in_n : the sweep it runs.
    meanfield.cli.figures.make_figures : computes and draws every figure.

    References
    ----------
    - A.-S. Sznitman, *Topics in propagation of chaos*, École d'Été de Probabilités de
      Saint-Flour XIX (1989), Lecture Notes in Math. 1464, Springer, 1991 (μ_N(t) → ρ_t).

    Examples
    --------
    >>> from meanfield.studies.limits import n_limit_data
    >>> ds = n_limit_data(size="small")
    >>> sorted(k for k in ds.data_vars if not k.startswith('rate'))
    ['kernel_gap', 'w1', 'w2']
    """
    check_size(size)
    torch.set_num_threads(1)
    cfg = N_LIMIT[size]
    seeds = [seed + s for s in range(cfg["n_seeds"])]
    with tempfile.TemporaryDirectory() as d:
        ds = particles_vs_grid_in_n(
            cfg["Ns"], seeds, d, t_final=cfg["t_final"], n_records=4, progress=True
        )
        ds = ds.load()
    attrs = {"figure": "n_limit", "size": size, "t_final": cfg["t_final"]}
    attrs["problem"] = "meanfield.workbench.problems.default_problem(1)"
    ds.attrs = provenance(attrs, seed=seed)
    return ds


def _w2_particles_in_beta(N: int, betas, seeds, t_final: float) -> np.ndarray:
    """W2(μ_N, μ*) of relaxed particles (uniform case), shape (regime, beta, seed)."""
    w2 = np.zeros((len(REGIMES), len(betas), len(seeds)))
    bar = tqdm(total=w2.size, desc="beta_limit, particles", unit="run", leave=False)
    for i, regime in enumerate(REGIMES):
        for j, beta in enumerate(betas):
            for k, s in enumerate(seeds):
                r = particle_equilibrium_run(
                    N, beta, s, case="uniform", regime=regime, t_end=t_final
                )
                w2[i, j, k] = float(r["w2"].values[0])
                bar.update(1)
    bar.close()
    return w2


def beta_limit_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """β → ∞: W2(ρ_β, μ*) on the grid and W2(μ_N, μ*) for particles.

    Grid: the semicircle and uniform cases of THEORY §5 at β = 1, 2, 4, ...  Particles: the
    uniform case (whose force has no singularity) in both temperature regimes, relaxed by
    Langevin to t = 6.  Both distances vanish as β → ∞, the grid one like β⁻¹:

    .. math::

        W_2(\\rho_\\beta, \\mu^*) = O(\\beta^{-1}), \\qquad
        W_2(\\mu_N, \\mu^*) \\to 0 \\quad (\\beta \\to \\infty).

    Parameters
    ----------
    size : {"small", "full"}
        Grid and particle configuration of :data:`BETA_LIMIT`.
    seed : int
        First seed of the particle runs.

    Returns
    -------
    xarray.Dataset
        ``w2_grid`` (case, beta_grid) and ``w2_particles`` (regime, beta_particles, seed).

    See Also
    --------
    meanfield.workbench.compare.beta_limit_grid, particle_equilibrium_run : what it runs.
    meanfield.cli.figures.make_figures : computes and draws every figure.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, EMS, 2015 (μ* as N → ∞).

    Examples
    --------
    >>> from meanfield.studies.limits import beta_limit_data
    >>> ds = beta_limit_data(size="small")
    >>> ds['w2_grid'].dims, ds['w2_particles'].dims
    (('case', 'beta_grid'), ('regime', 'beta_particles', 'seed'))
    """
    check_size(size)
    torch.set_num_threads(1)
    cfg = BETA_LIMIT[size]
    betas_grid = 2.0 ** np.arange(0, cfg["n_doublings"])
    grids = [beta_limit_grid(c, betas_grid, cells=cfg["cells"])["w2_grid"].values for c in CASES]
    seeds = range(cfg["n_seeds"])
    w2p = _w2_particles_in_beta(cfg["N"], cfg["betas"], [seed + s for s in seeds], 6.0)
    data = {"w2_grid": (("case", "beta_grid"), np.stack(grids))}
    data["w2_particles"] = (("regime", "beta_particles", "seed"), w2p)
    coords = {"case": list(CASES), "beta_grid": betas_grid, "regime": list(REGIMES)}
    coords |= {"beta_particles": cfg["betas"], "seed": list(seeds)}
    attrs = {"figure": "beta_limit", "size": size, "N_particles": cfg["N"]}
    attrs["model"] = "V=w^2/2, lambda=1/2, p=1 (THEORY 5)"
    return xr.Dataset(data, coords=coords, attrs=provenance(attrs, seed=seed))


def t_limit_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """t → ∞: the free-energy gap along the McKean–Vlasov flow and its exponential rate.

    For OU (no interaction) and the interacting uniform case (k = −|z|), from N(1, 0.3²) at
    β = 1, with fitted rates and bootstrap intervals.  In both models the mean obeys
    dm/dt = −m (the pair forces cancel), so the gap decays as

    .. math::

        F_\\beta(\\rho_t) - F_\\beta(\\rho_\\beta) \\sim C e^{-2t}.

    Parameters
    ----------
    size : {"small", "full"}
        Grid cells of :data:`T_LIMIT_CELLS`.
    seed : int

    Returns
    -------
    xarray.Dataset
        ``gap`` (model, time), ``rate``, ``rate_ci_low``, ``rate_ci_high`` (model).

    See Also
    --------
    meanfield.workbench.compare.free_energy_decay : what it runs.
    meanfield.cli.figures.make_figures : computes and draws every figure.

    References
    ----------
    - J. A. Carrillo, R. J. McCann, C. Villani, Rev. Mat. Iberoamericana 19 (2003) 971–1018.

    Examples
    --------
    >>> from meanfield.studies.limits import t_limit_data
    >>> ds = t_limit_data(size="small")
    >>> ds['rate'].values.round(1).tolist()
    [2.0, 2.0]
    """
    check_size(size)
    cells = T_LIMIT_CELLS[size]
    models = {
        "OU (no interaction)": Energy([QuadraticPotential()], Box(1, 4.0)),
        "V = w^2/2, k = -|z|, lambda = 1/2": closed_form_energy("uniform"),
    }
    runs = [free_energy_decay(E, 1.0, cells=cells, seed=seed) for E in models.values()]
    t = runs[0]["time"].values
    gap = np.stack([np.interp(t, r["time"].values, r["gap"].values) for r in runs])
    attrs = {"figure": "t_limit", "size": size, "beta": 1.0, "cells": cells}
    data = {"gap": (("model", "time"), gap)}
    data |= {
        k: ("model", [r.attrs[k] for r in runs]) for k in ("rate", "rate_ci_low", "rate_ci_high")
    }
    attrs = provenance({**attrs, "initial": "N(1, 0.3^2)"}, seed=seed)
    return xr.Dataset(data, coords={"model": list(models), "time": t}, attrs=attrs)
