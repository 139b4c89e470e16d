"""The binned W2 estimator (meanfield.ot.binned) and the p = 2 particles-vs-grid study
(meanfield.studies.limits.particles_vs_grid_2d_run / _in_n, and the study file run by
``meanfield run``) at tiny sizes."""

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from meanfield.domains import Box
from meanfield.errors import InputError, InputTypeError
from meanfield.ot import Measure, w2
from meanfield.ot.binned import binned_particles, refined_atoms, w2_to_density
from meanfield.pde import Density, Grid


def _density_1d(cells=8):
    """A non-uniform piecewise-constant law on [-1, 1] (p = 1: its W2 to particles is exact
    by the quantile formula, an independent truth)."""
    grid = Grid(Box(1, 1.0), cells)
    values = 1.0 + np.linspace(-0.8, 0.8, cells) ** 2
    return Density(grid, values / (values.sum() * grid.h[0]))


def test_refined_atoms_shift_is_exact_w2_in_1d():
    # W2(rho, nu_r) of a piecewise-constant law and its sub-cell atoms is (h/r)/sqrt(12)
    # exactly (uniform on each sub-cell moved to its centre); the quantile formula computes
    # W2 with the density read as piecewise constant: agreement to rounding.
    rho = _density_1d()
    for r in (1, 3):
        nu, shift = refined_atoms(rho, r)
        assert shift == pytest.approx(0.25 / r / np.sqrt(12), rel=1e-14)
        assert w2(Measure.from_density(rho), nu).distance == pytest.approx(shift, rel=1e-9)
        assert nu.mass == pytest.approx(1.0, rel=1e-14)


@pytest.mark.parametrize("bin_particles", [True, False])
def test_bracket_contains_exact_w2_in_1d(bin_particles):
    # the certified bracket [lower, upper] of w2_to_density contains W2(mu_N, rho) computed
    # exactly by the quantile formula on the piecewise-constant density (a theorem: triangle
    # inequality; observed widths ~0.02-0.06 around values ~0.05)
    rho = _density_1d()
    x = np.random.default_rng(3).uniform(-1, 1, size=(300, 1))
    truth = w2(Measure.from_particles(x), Measure.from_density(rho)).distance
    for r in (1, 2, 8):
        est = w2_to_density(x, rho, refine=r, bin_particles=bin_particles)
        assert est.lower <= truth <= est.upper
        assert est.upper - est.lower <= 2 * (est.particle_shift + est.density_shift) + 1e-9


def test_binning_shift_and_lone_particles():
    grid = Grid(Box(2, 1.0), 4)
    x = np.random.default_rng(0).uniform(-1, 1, size=(200, 2))
    q, shift = binned_particles(x, grid, 2)
    # delta_mu recomputed by brute force: each particle to its sub-cell's barycentre
    cell = [tuple(c) for c in np.floor((x + 1) / 0.25).astype(int)]
    sq = 0.0
    for c in set(cell):
        members = x[[k for k, d in enumerate(cell) if d == c]]
        sq += ((members - members.mean(0)) ** 2).sum()
    assert shift == pytest.approx(np.sqrt(sq / len(x)), rel=1e-12)
    assert q.mass == pytest.approx(1.0, rel=1e-14)
    # particles alone in their sub-cells are not moved: binned == unbinned, shift 0
    lone = np.array([[-0.9, -0.9], [0.1, 0.6], [0.7, -0.3]])
    rho = Density(grid, np.full((4, 4), 0.25))
    a, b = w2_to_density(lone, rho), w2_to_density(lone, rho, bin_particles=False)
    assert a.particle_shift == 0.0
    assert a.estimate == pytest.approx(b.estimate, rel=1e-12)


def test_binned_close_to_unbinned_in_2d():
    # binned vs unbinned on 2000 Gaussian particles: within the certified bound
    # delta_mu + delta_rho (observed difference ~1e-3 against a bound ~0.06)
    grid = Grid(Box(2, 2.0), 16)
    rho = Density.gaussian(grid, 0.0, 0.5)
    x = np.random.default_rng(1).normal(0, 0.5, size=(2000, 2)).clip(-2, 2)
    a, b = w2_to_density(x, rho), w2_to_density(x, rho, bin_particles=False)
    assert abs(a.estimate - b.estimate) <= a.particle_shift + 1e-12
    assert b.lower <= a.estimate + a.particle_shift and a.estimate - a.particle_shift <= b.upper


def test_refusals():
    rho = _density_1d()
    with pytest.raises(InputTypeError, match="density"):
        w2_to_density(np.zeros((3, 1)), np.ones(8))
    with pytest.raises(InputError, match="omega"):
        w2_to_density(np.zeros((3, 2)), rho)
    with pytest.raises(InputError, match="refine"):
        w2_to_density(np.zeros((3, 1)), rho, refine=0)
    with pytest.raises(InputError, match="finite"):
        w2_to_density(np.full((3, 1), np.nan), rho)
    with pytest.raises(InputTypeError, match="bin_particles"):
        w2_to_density(np.zeros((3, 1)), rho, bin_particles=1)


@pytest.mark.slow
def test_study_runs_and_resumes(tmp_path):
    from meanfield.studies.limits import particles_vs_grid_2d_in_n

    kw = dict(cells=16, t_final=0.01, n_data=10, binned_min=1)
    seeds = {20: [0, 1], 40: [0, 1], 80: [0]}
    ds = particles_vs_grid_2d_in_n(seeds, tmp_path, **kw)
    assert dict(ds["w2"].sizes) == {"N": 3, "seed": 2}
    assert np.isnan(ds["w2"].sel(N=80, seed=1)) and np.isfinite(ds["w2"].sel(N=80, seed=0))
    # the certified bound holds at every finished run
    ok = abs(ds["w2"] - ds["w2_binned"]) <= ds["w2_binned_bound"]
    assert bool(ok.where(np.isfinite(ds["w2"]), True).all())
    # the fit uses the seeds present at every N (seed 0 only here)
    assert ds.attrs["rate_seeds"] == "0" and np.isfinite(ds.attrs["rate"])
    runs = sorted(tmp_path.rglob("runs/*.nc"))
    assert len(runs) == 5
    stamps = [p.stat().st_mtime_ns for p in runs]
    again = particles_vs_grid_2d_in_n(seeds, tmp_path, **kw)  # resumes: nothing rerun
    assert [p.stat().st_mtime_ns for p in runs] == stamps
    assert np.array_equal(again["w2"].values, ds["w2"].values, equal_nan=True)


def test_a_rate_over_two_sizes_is_reported_undetermined_not_nan(tmp_path):
    """Two fitted sizes give no rate (fit_power_law_or_undetermined): the report says so in
    words, never "nan [nan, nan]"."""
    from meanfield.studies.limits import particles_vs_grid_2d_in_n, write_report

    kw = dict(cells=16, t_final=0.01, n_data=10, binned_min=1)
    ds = particles_vs_grid_2d_in_n({20: [0], 40: [0]}, tmp_path / "sweep", **kw)
    assert np.isnan(ds.attrs["rate"])
    ds.to_netcdf(tmp_path / "n_limit_2d.nc")
    write_report(tmp_path, tmp_path / "report")
    text = (tmp_path / "report" / "report.md").read_text()
    assert "undetermined (< 3 sizes fitted)" in text and "nan" not in text


CI_CONFIG = Path(__file__).parents[1] / "paper_repro" / "n_limit_2d" / "configs" / "ci.toml"


@pytest.mark.slow
def test_study_file_runs_end_to_end_and_resumes(tmp_path):
    """``meanfield run configs/ci.toml --out DIR``: every part, the report, then a rerun that
    reuses every run and the grid check (file times unchanged) and reports the same numbers."""
    from meanfield.cli import main

    out = tmp_path / "study"
    argv = ["run", str(CI_CONFIG), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    runs = sorted(out.rglob("runs/*.nc"))
    assert len(runs) == 5 + 1  # the sweep's (N, seed) and the time-step check's one run
    ds = xr.load_dataset(out / "n_limit_2d.nc")
    # binned_min = 40: the binned estimate lies within its certified bound of the exact one
    both = np.isfinite(ds["w2"]) & np.isfinite(ds["w2_binned"])
    assert int(both.sum()) == 3
    assert bool((abs(ds["w2"] - ds["w2_binned"]) <= ds["w2_binned_bound"]).where(both, True).all())
    report = (out / "report.md").read_text()
    assert "| 20 | 2 |" in report and "Time step: η = 0.0025 at N = 40" in report
    assert "Grid: W₂(ρ_t on 8², ρ_t on 16²)" in report
    stamps = [p.stat().st_mtime_ns for p in [*runs, out / "grid_check.json"]]
    grid_before = (out / "grid_check.json").read_text()
    assert main(argv) == 0
    assert (out / "grid_check.json").read_text() == grid_before
    assert [p.stat().st_mtime_ns for p in runs] == stamps[:-1]
    assert (out / "report.md").read_text() == report


def test_study_settings_are_checked_before_any_work(tmp_path):
    from meanfield.studies.limits import check_config

    with pytest.raises(InputError, match="did you mean 'refine'"):
        check_config({"refne": 4})
    with pytest.raises(InputError, match="seeds.300"):
        check_config({"seeds": {"300": [0, 0]}})
    with pytest.raises(InputError, match="cells"):
        check_config({"cells": 2})
    assert check_config({})["seeds"][10_000] == [0, 1]  # the defaults are the full study's


@pytest.mark.parametrize("preset", ["full", "large_n"])
def test_committed_reports_are_their_runs(preset, tmp_path):
    """Each committed ``results/<preset>/report.md`` is what its committed runs give now."""
    from meanfield.studies.limits import write_report

    results = CI_CONFIG.parents[1] / "results" / preset
    write_report(results, tmp_path)
    assert (tmp_path / "report.md").read_text() == (results / "report.md").read_text()
