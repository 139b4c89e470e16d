"""Particles and grid side by side: the dataset, the default problem, the rate in N."""

import numpy as np
import pytest
import torch

from meanfield.domains import Box
from meanfield.energy import Energy, QuadraticPotential
from meanfield.ot import Measure, w2
from meanfield.ot.diagnostics import kernel_gap
from meanfield.pde import Density, Grid
from meanfield.results import load_dataset
from meanfield.workbench.compare import compare, convergence_in_n, fit_rate
from meanfield.workbench.problems import ComparisonConfig, default_problem, run_default_comparison


@pytest.fixture(autouse=True)
def _one_torch_thread():
    # runs after conftest's 2-thread setting: on the shared 2-core machine the O(N²) pair
    # sums run ~15× faster with one thread than with two competing for loaded cores
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _small(dim=1, **kw):
    cfg = {
        "n_particles": 120,
        "t_final": 0.2,
        "eta": 0.02,
        "cells": 48 if dim == 1 else 20,
        "n_data": 40,
    }
    cfg.update(kw)
    return default_problem(dim, **cfg)


def test_compare_dataset_holds_both_views_and_diagnostics():
    prob = _small()
    X, _ = prob.data
    ds = compare(prob.spec(), n_records=5, seed=3)
    assert ds.sizes == {"time": 6, "particle": 120, "dim": 1, "x": 48}
    np.testing.assert_allclose(ds["time"].values, 0.04 * np.arange(6), atol=1e-12)
    for v in (
        "omega",
        "rho",
        "w2",
        "w1",
        "energy_particles",
        "energy_grid",
        "free_energy_grid",
        "entropy_grid",
        "mass_grid",
        "min_density_grid",
        "kernel_gap",
        "energy_grid_alignment",
        "energy_particles_interaction",
    ):
        assert v in ds, v
    # provenance: parameters, seed, version
    for k in ("N", "beta", "eta", "seed", "meanfield_version", "grid_scheme", "term1"):
        assert k in ds.attrs, k
    assert ds.attrs["seed"] == 3 and ds.attrs["N"] == 120
    # the diagnostics are what the diagnostics module computes on the stored arrays
    rho0 = Density(prob.initial.grid, ds["rho"].values[0])
    first = Measure.from_particles(ds["omega"].values[0])
    assert ds["w2"].values[0] == w2(first, Measure.from_density(rho0)).distance
    # ... and that is W2 itself: the quantile formula written out independently, midpoint rule
    # on K points of (0, 1).  Q_μ jumps N times by gaps ~1e-2, so (Q_μ − Q_ρ)² jumps by
    # ≲ 2e-3 and the rule errs by ≲ N · 2e-3 / K ≈ 1e-10 on W2² ≈ 1e-3: rel 1e-4 on W2 is wide
    K = 2_000_000
    u = (np.arange(K) + 0.5) / K
    x0 = np.sort(ds["omega"].values[0, :, 0])
    q_mu = x0[np.minimum((u * len(x0)).astype(int), len(x0) - 1)]
    cdf = np.concatenate([[0.0], np.cumsum(rho0.masses)]) / rho0.masses.sum()
    q_rho = np.interp(u, cdf, rho0.grid.edges[0])
    assert ds["w2"].values[0] == pytest.approx(np.sqrt(np.mean((q_mu - q_rho) ** 2)), rel=1e-4)
    assert ds["kernel_gap"].values[-1] == pytest.approx(
        kernel_gap(ds["omega"].values[-1], Density(rho0.grid, ds["rho"].values[-1]), X), rel=1e-12
    )
    # grid invariants along the run
    assert np.abs(ds["mass_grid"].values - 1).max() <= 1e-12
    assert ds["min_density_grid"].values.min() >= 0
    assert np.all(np.diff(ds["free_energy_grid"].values) <= 1e-13)
    # the two energies agree up to the sampling error (|ΔE| ~ N^(−1/2) × spread of U)
    assert abs(ds["energy_particles"].values[0] - ds["energy_grid"].values[0]) < 0.1


def test_compare_2d_uses_exact_emd(capsys):
    from meanfield.workbench.plotting import plot_comparison

    prob = _small(2, n_particles=80, t_final=0.1)
    ds = compare(prob.spec(), n_records=2, progress=True)
    assert ds.sizes["dim"] == 2 and ds.sizes["y"] == 20
    assert ds.attrs["w_method"] == "exact" and np.isfinite(ds["w1"].values).all()
    # issue 11: every stage shows progress (the distances included), every panel is labelled
    assert "W1, W2 per record" in capsys.readouterr().err
    fig = plot_comparison(ds)
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 4 and all(ax.get_xlabel() and ax.get_ylabel() for ax in panels)
    (cbar,) = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert "density" in cbar.get_ylabel()


def test_compare_names_each_distance_by_its_method():
    """Issue 13: the sliced distance is recorded as sliced_w2 (never w2); sparse_exact is W2,
    the same value as the dense simplex (tolerance: the sparse solver's integer rounding,
    ≤ 1e-5 relative, see tests/test_transport.py)."""
    spec = _small(2, n_particles=60, t_final=0.04, cells=16).spec()
    sliced = compare(spec, n_records=1, w_method="sliced")
    assert "w2" not in sliced and "sliced_w2" in sliced
    assert sliced["sliced_w2"].attrs["long_name"].startswith("sliced")
    exact = compare(spec, n_records=1, w_method="exact")
    sparse = compare(spec, n_records=1, w_method="sparse_exact")
    assert sparse.attrs["w_method"] == sparse["w2"].attrs["method"] == "sparse_exact"
    np.testing.assert_allclose(sparse["w2"].values, exact["w2"].values, rtol=1e-5)
    # SW2 ≤ W2 for every set of directions (each projection is 1-Lipschitz): a different,
    # smaller quantity
    assert np.all(sliced["sliced_w2"].values <= exact["w2"].values + 1e-12)
    # the figure shows the sliced distance under its own label, not as W2
    from meanfield.workbench.plotting import plot_comparison

    fig = plot_comparison(sliced)
    labels = [t.get_text() for a in fig.axes if a.get_legend() for t in a.get_legend().texts]
    assert any(lab.startswith("sliced") for lab in labels)
    assert "W2" not in labels


def test_run_default_comparison_writes_dataset_and_figure(tmp_path):
    ds = run_default_comparison(
        tmp_path / "out", n_particles=60, t_final=0.1, eta=0.02, cells=32, n_data=30, n_records=2
    )
    nc, png = tmp_path / "out" / "comparison.nc", tmp_path / "out" / "comparison.png"
    assert nc.exists() and png.exists() and png.stat().st_size > 10_000
    back = load_dataset(nc)
    np.testing.assert_array_equal(back["rho"].values, ds["rho"].values)
    np.testing.assert_array_equal(back["w2"].values, ds["w2"].values)
    assert back.attrs["problem"] == "default" and back.attrs["N"] == 60
    assert back.attrs["problem_cells"] == 32 and back.attrs["problem_scheme"] == "upwind"


def test_default_problem_rejects_unknown_parameters():
    with pytest.raises(ValueError, match=r"unknown default-problem parameter\(s\) \['gridn'\]"):
        default_problem(1, gridn=10)
    with pytest.raises(ValueError, match="dim must be 1 or 2"):
        default_problem(3)


def test_compare_rejects_incompatible_domains():
    g = Grid(Box(1, 2.0), 32)
    with pytest.raises(ValueError, match="incompatible domains"):
        compare(
            Energy([QuadraticPotential()], Box(1, 3.0)),
            Density.uniform(g),
            n_particles=10,
            beta=1.0,
            t_final=0.1,
            eta=0.01,
        )


def test_fit_rate_recovers_an_exact_power_law():
    n = np.array([100, 400, 1600])
    w = np.stack([3.0 * n**-0.5, 2.0 * n**-0.5, 5.0 * n**-0.5], axis=1)
    fit = fit_rate(n, w)
    assert fit["slope"] == pytest.approx(-0.5, abs=1e-12)
    assert fit["ci_high"] - fit["ci_low"] == pytest.approx(0.0, abs=1e-10)
    with pytest.raises(ValueError, match="S >= 2 seeds"):
        fit_rate(n, w[:, :1])


@pytest.mark.slow
def test_w2_particles_vs_grid_shrinks_like_n_to_minus_half():
    # THEORY §6: W2(μ_N(t), ρ_t) → 0 at about N^(−1/2) in p = 1.  Small version of the
    # study (N = 64…1024, 5 seeds, t = 0.2): the 95 % Student-t interval of the per-seed
    # slopes must contain −1/2 and lie below 0 (measured −0.52 [−0.65, −0.39]).
    prob = default_problem(1, cells=128, n_data=200)
    ds = convergence_in_n(
        prob.energy,
        prob.initial,
        n_values=[64, 256, 1024],
        seeds=range(5),
        beta=prob.beta,
        t_final=0.2,
        eta=0.01,
    )
    lo, hi = ds.attrs["rate_ci_low"], ds.attrs["rate_ci_high"]
    assert lo < -0.5 < hi and hi < -0.25
    assert ds["w2"].sizes == {"N": 3, "seed": 5}


# ---- the run specification (issue 21) ------------------------------------------------------
def test_compare_reads_one_spec_and_the_keyword_form_builds_the_same_run():
    """compare(spec) and compare(energy, initial, **fields) are one run: the same numbers to
    the last bit; keywords given with a spec replace its fields."""
    prob = _small(n_particles=30, t_final=0.06, eta=0.02, cells=24, n_data=10)
    spec = prob.spec()
    assert (spec.n_steps, spec.t_final, spec.grid.n) == (3, 0.06, (24,))
    a = compare(spec, n_records=3, seed=2)
    b = compare(
        prob.energy, prob.initial, n_particles=30, beta=10.0, t_final=0.06, eta=0.02, seed=2,
        n_records=3,
    )  # fmt: skip
    for v in ("omega", "rho", "w2", "kernel_gap", "free_energy_grid"):
        np.testing.assert_array_equal(a[v].values, b[v].values)
    assert a.attrs["seed"] == 2 and a.attrs["n_steps"] == 3


def test_compare_refuses_what_the_grid_cannot_be_compared_with():
    """A spec that starts from particles, or runs another regime or MALA, is refused before
    any work, naming what to change."""
    from meanfield.dynamics.spec import RunSpec
    from meanfield.errors import InputError, InputTypeError

    spec = _small(n_particles=10, t_final=0.04, cells=16, n_data=10).spec()
    with pytest.raises(InputError, match="mean-field regime.*coulomb-gas"):
        compare(spec, regime="coulomb-gas")
    with pytest.raises(InputError, match="method='mala'"):
        compare(spec.replace(method="mala"))
    particles = RunSpec(
        energy=spec.energy, initial=np.zeros((10, 1)), beta=1.0, eta=0.01, n_steps=2
    )
    with pytest.raises(InputTypeError, match="initial must be a meanfield.pde.Density"):
        compare(particles)
    with pytest.raises(InputTypeError, match="holds its initial state"):
        compare(spec, spec.initial)


def test_comparison_config_round_trips_through_toml(tmp_path):
    """The plain configuration of ``meanfield compare``: written, read back, equal; its
    dimension-dependent defaults filled in (p = 2: 48 cells, N = 1000, t = 1)."""
    cfg = ComparisonConfig(dim=2, n_data=20, beta=3.5, scheme="sg-mprk22-split", seed=7)
    assert (cfg.cells, cfg.n_particles, cfg.t_final, cfg.init_std) == (48, 1000, 1.0, 0.4)
    path = tmp_path / "cmp.toml"
    text = cfg.to_toml(path)
    assert text.startswith("[compare]\n") and 'scheme = "sg-mprk22-split"' in text
    back = ComparisonConfig.from_toml(path)
    assert back == cfg and back.to_toml() == text
    assert ComparisonConfig.from_toml(path, seed=1, beta=None).seed == 1  # flags win, None not


def test_the_kernel_gap_is_recorded_for_any_term_that_names_its_data():
    # a user's term that is not an AlignmentTerm subclass but reads μ through the features on
    # its data declares them (Term.kernel_data): the comparison records its kernel gap as for
    # the built-in alignment; without such a term there is no gap to record
    import dataclasses

    from meanfield.energy import AlignmentTerm, Term

    prob = _small()
    X, _ = prob.data
    spec = prob.spec()

    class FlatOnData(Term):  # zero energy, but declares the data its kernel lives on
        kind = "one-body"

        def value(self, omega):
            return omega.sum((-1, -2)) * 0.0

        def grad(self, omega):
            return torch.zeros_like(omega)

        def first_variation(self, at, points=None, weights=None):
            return torch.zeros(len(at), dtype=at.dtype)

        def kernel_data(self):
            return X, "positive"

    others = [t for t in spec.energy.terms if not isinstance(t, AlignmentTerm)]
    with_data = Energy(others + [FlatOnData()], spec.energy.domain)
    ds = compare(dataclasses.replace(spec, energy=with_data), n_records=2, seed=0)
    rho = Density(prob.initial.grid, ds["rho"].values[-1])
    assert ds["kernel_gap"].values[-1] == pytest.approx(
        kernel_gap(ds["omega"].values[-1], rho, X), rel=1e-12
    )
    without = Energy(others, spec.energy.domain)
    assert "kernel_gap" not in compare(dataclasses.replace(spec, energy=without), n_records=2)
