import numpy as np
import pytest
import torch

from meanfield.cli import main
from meanfield.results import load_dataset
from meanfield.workbench.config import SimulationConfig


def test_simulate_writes_dataset_and_summary(tmp_path, capsys):
    out = tmp_path / "run.nc"
    rc = main(
        [
            "simulate",
            "--n-particles",
            "16",
            "--n-steps",
            "20",
            "--n-data",
            "40",
            "--out",
            str(out),
            "--no-progress",
            "--seed",
            "3",
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "energy_alignment" in text and f"wrote {out}" in text
    ds = load_dataset(out)
    assert ds["omega"].shape == (21, 16, 3)  # fourier features on 2-D data: p = d + 1
    assert ds.attrs["seed"] == 3 and ds.attrs["config_n_data"] == 40
    # the alignment energy goes down (the particles learn)
    assert ds["energy_alignment"].values[-1] < ds["energy_alignment"].values[0]


def test_toml_config_and_flag_override(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        "[simulate]\nn_particles = 12\nn_steps = 5\nbeta = 20.0\nn_data = 30\n"
        'feature = "softplus"\ndomain = "ball"\nkernel = "riesz"\ns = 0.5\n'
    )
    out = tmp_path / "run.nc"
    assert (
        main(["simulate", "--config", str(cfg), "--beta", "7", "--out", str(out), "--no-progress"])
        == 0
    )
    ds = load_dataset(out)
    assert ds.attrs["N"] == 12 and ds.attrs["beta"] == 7.0 and ds.attrs["term1_s"] == 0.5
    assert ds.attrs["config_feature"] == "softplus"


def test_data_file(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    np.savez(tmp_path / "d.npz", X=X, y=np.sign(X[:, 0]))
    ds = SimulationConfig(data_file=str(tmp_path / "d.npz"), n_particles=8, n_steps=3).run()
    assert ds.attrs["p"] == 4


@pytest.mark.parametrize(
    "flags, match",
    [
        (["--beta", "0"], "beta"),
        (["--n-particles", "0"], "n_particles"),
        (["--eta", "-0.1"], "eta"),
        (["--feature", "cosine"], "feature"),
        (["--kernel", "yukawa"], "kernel"),
        (["--radius", "0"], "radius"),
        (["--kernel", "riesz", "--s", "3", "--softening", "0"], "not integrable"),
        (["--data-file", "/nonexistent.npz"], "does not exist"),
    ],
)
def test_bad_flags_give_clear_errors(flags, match, capsys, tmp_path):
    assert main(["simulate", "--out", str(tmp_path / "x.nc"), "--no-progress", *flags]) == 2
    assert match in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()


def test_unknown_toml_key(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("n_particle = 3\n")
    with pytest.raises(ValueError, match="unknown key"):
        SimulationConfig.from_toml(cfg)


def test_help_runs(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    assert "inverse temperature" in capsys.readouterr().out


def test_compare_main_job(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert (
        main(
            [
                "compare",
                "--out",
                str(out),
                "--n-particles",
                "100",
                "--t-final",
                "0.2",
                "--cells",
                "64",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "w2" in text and "free_energy_grid" in text
    # a header (N, beta, regime, grid) and an aligned table
    lines = text.splitlines()
    assert "N = 100 particles" in lines[1] and "beta = 10" in lines[1]
    assert "grid 64 cells" in lines[1] and "mean-field regime" in lines[1]
    table = lines[2 : lines.index(next(ln for ln in lines if "wall time" in ln))]
    assert table[0].split() == ["quantity", "t", "=", "0", "t", "=", "0.2"]
    assert len({len(ln) for ln in table}) == 1  # every row as wide as the header
    ds = load_dataset(out / "comparison.nc")
    assert (out / "comparison.png").exists()
    assert "w2" in ds and ds.attrs["meanfield_version"]
    assert np.all(np.diff(ds["free_energy_grid"].values) <= 1e-12)


def test_compare_bad_input(capsys, tmp_path):
    assert main(["compare", "--out", str(tmp_path), "--beta", "-1"]) == 2
    assert "beta" in capsys.readouterr().err


def test_study_commands(tmp_path, capsys):
    assert (
        main(
            [
                "study",
                "equilibrium",
                "--n-particles",
                "8",
                "16",
                "--seeds",
                "2",
                "--t-final",
                "1",
                "--scheduler",
                "threads",
                "--out",
                str(tmp_path / "eq"),
            ]
        )
        == 0
    )
    # two sizes: the rate is reported as undetermined, never as a number with a CI
    out = capsys.readouterr().out
    assert "W2 ~ N^rate, rate undetermined" in out and "CI [" not in out
    assert (
        main(
            [
                "study",
                "particles-vs-grid",
                "--n-particles",
                "32",
                "64",
                "--seeds",
                "2",
                "--t-final",
                "0.1",
                "--scheduler",
                "threads",
                "--out",
                str(tmp_path / "pg"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "kernel gap ~ N^rate" in out and "undetermined" in out
    assert (tmp_path / "pg" / "sweep.nc").exists()


def test_figures_command_small(tmp_path, capsys):
    assert main(["figures", "--size", "small", "--only", "t_limit", "--out", str(tmp_path)]) == 0
    assert "[1/1] t_limit: computing" in capsys.readouterr().err  # a stage message first
    for ext in ("png", "pdf", "nc"):
        assert (tmp_path / f"t_limit.{ext}").exists()
    ds = load_dataset(tmp_path / "t_limit.nc")
    assert ds.attrs["figure"] == "t_limit" and "meanfield_version" in ds.attrs
    assert main(["figures", "--only", "nonexistent", "--out", str(tmp_path)]) == 2


def test_study_beta_and_t_decay(tmp_path, capsys):
    assert (
        main(
            [
                "study",
                "beta",
                "--case",
                "uniform",
                "--betas",
                "1",
                "8",
                "--n-particles",
                "8",
                "--seeds",
                "2",
                "--t-final",
                "1",
                "--scheduler",
                "threads",
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "coulomb-gas" in out and "rate undetermined" in out
    assert (
        main(
            [
                "study",
                "t-decay",
                "--case",
                "uniform",
                "--beta",
                "1",
                "--t-final",
                "4",
                "--out",
                str(tmp_path / "t"),
            ]
        )
        == 0
    )
    assert "exp(-" in capsys.readouterr().out
    assert (tmp_path / "t" / "t_decay.nc").exists()


def test_simulate_without_data_the_pure_coulomb_gas(tmp_path):
    # the README's log-gas example: no alignment, so no data set is drawn (p = data_dim = 1)
    out = tmp_path / "gas.nc"
    assert (
        main(
            [
                "simulate",
                "--alignment",
                "none",
                "--confinement",
                "1",
                "--kernel",
                "log",
                "--softening",
                "0",
                "--lam",
                "0.5",
                "--n-particles",
                "20",
                "--domain",
                "box",
                "--radius",
                "4",
                "--method",
                "mala",
                "--regime",
                "coulomb-gas",
                "--beta",
                "2",
                "--eta",
                "0.001",
                "--n-steps",
                "50",
                "--data-dim",
                "1",
                "--feature",
                "positive",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    ds = load_dataset(out)
    assert ds.attrs["p"] == 1 and "energy_interaction" in ds and "acceptance_rate" in ds


# ---- issue 11 ---------------------------------------------------------------------------
def test_stale_sweep_folder_is_not_reused_by_the_cli(tmp_path, capsys):
    """The issue's case: the same --out with another case and beta computes its own runs."""
    base = [
        "study",
        "equilibrium",
        "--n-particles",
        "4",
        "6",
        "--seeds",
        "2",
        "--t-final",
        "0.05",
        "--scheduler",
        "threads",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    assert main(base + ["--case", "uniform", "--beta", "4"]) == 0
    first = capsys.readouterr()
    assert main(base + ["--case", "semicircle", "--beta", "50"]) == 0
    second = capsys.readouterr()
    table = [ln for ln in second.out.splitlines() if ln.strip().startswith("N=")]
    assert table != [ln for ln in first.out.splitlines() if ln.strip().startswith("N=")]
    assert "note:" in second.err and "case: 'uniform' -> 'semicircle'" in second.err


def test_pinned_particles_are_reported(tmp_path, capsys):
    for flags in (["--eta", "1e6"], ["--beta", "1e-300"]):
        out = tmp_path / "pinned.nc"
        assert (
            main(
                [
                    "simulate",
                    "--n-particles",
                    "8",
                    "--n-steps",
                    "3",
                    "--n-data",
                    "20",
                    "--no-progress",
                    "--out",
                    str(out),
                    *flags,
                ]
            )
            == 0
        )
        err = capsys.readouterr().err
        assert "warning: one noise step" in err and "wider than the domain" in err
        assert "ended on the boundary" in err


def test_min_pair_distance_is_exact_and_linear_in_memory():
    import tracemalloc

    from meanfield.ot.spacing import min_pair_distance

    rng = np.random.default_rng(0)
    for p in (1, 2, 3):
        x = rng.normal(size=(300, p))
        d = np.linalg.norm(x[:, None] - x[None], axis=-1)
        d[np.diag_indices(300)] = np.inf
        assert min_pair_distance(x) == pytest.approx(d.min(), rel=1e-12)
    assert np.isnan(min_pair_distance(np.zeros((1, 2))))
    x = rng.normal(size=(200_000, 2))
    tracemalloc.start()
    min_pair_distance(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100 * x.nbytes  # an N x N matrix would be 320 GB


def test_study_help_is_per_kind_with_defaults(capsys):
    for kind, flag in (
        ("equilibrium", "--regime"),
        ("particles-vs-grid", "--t-final"),
        ("beta", "--betas"),
        ("t-decay", "--t-final"),
    ):
        with pytest.raises(SystemExit):
            main(["study", kind, "--help"])
        text = capsys.readouterr().out
        assert flag in text and "(default:" in text
    with pytest.raises(SystemExit):
        main(["study", "--help"])
    text = capsys.readouterr().out
    assert all(k in text for k in ("equilibrium", "particles-vs-grid", "beta", "t-decay"))


def test_t_decay_too_short_prints_an_undetermined_rate(tmp_path, capsys, monkeypatch):
    """The README's t-decay command with a short --t-final: the rate is reported as
    undetermined with the flag to change, the dataset is still written, exit status 0."""
    from meanfield.studies import limits

    fast = limits.free_energy_decay

    def small(energy, beta, **kw):  # the CLI's problem on a coarser grid (same code path)
        return fast(energy, beta, cells=64, n_records=20, n_boot=10, **kw)

    monkeypatch.setattr(limits, "free_energy_decay", small)
    out = tmp_path / "td"
    argv = ["study", "t-decay", "--case", "uniform", "--t-final", "0.3", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rate undetermined" in text and "lengthen --t-final" in text
    assert (out / "t_decay.nc").exists()


def test_a_run_that_diverges_ends_with_one_line_and_status_2(tmp_path, capsys, monkeypatch):
    """A numerical failure part-way (a NumericalError, e.g. a non-finite drift from too large
    a step) is a user error: one line naming what to change, exit 2; --debug re-raises."""
    from meanfield.dynamics.langevin import _check_finite
    from meanfield.errors import MeanfieldError, NumericalError
    from meanfield.workbench.config import SimulationConfig

    def diverge(self, progress=False):
        _check_finite(torch.tensor([float("nan")]), "the drift", 7)

    monkeypatch.setattr(SimulationConfig, "run", diverge)
    argv = ["simulate", "--no-progress", "--n-data", "20", "--out", str(tmp_path / "r.nc")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "step 7" in err[0] and "eta" in err[0] and "NumericalError" in err[0]
    assert not (tmp_path / "r.nc").exists()
    with pytest.raises(NumericalError) as info:
        main(["--debug", *argv])
    assert isinstance(info.value, MeanfieldError) and isinstance(info.value, FloatingPointError)


LOG_GAS = (
    "--alignment none --confinement 1 --kernel log --softening 0 --lam 0.5 --n-particles 50 "
    "--domain box --radius 4 --method mala --regime coulomb-gas --beta 2 --data-dim 1 "
    "--feature positive --no-progress"
).split()


def test_the_readme_log_gas_moves_for_every_seed(tmp_path, capsys):
    """Issue 24: seeds 2 and 4 of the README's log gas drew two particles ~4e-4 apart; every
    MALA proposal overshot, acceptance 0.000, the energy never changed and the command exited
    0 silently.  The start is now separated (SimulationConfig.start_spacing) and every seed
    moves."""
    starts = []
    for seed in range(6):
        out = tmp_path / f"s{seed}.nc"
        args = ["simulate", *LOG_GAS, "--eta", "0.001", "--n-steps", "300", "--seed", str(seed)]
        assert main([*args, "--out", str(out)]) == 0
        captured = capsys.readouterr()
        assert "warning" not in captured.err
        ds = load_dataset(out)
        assert float(ds["acceptance_rate"][1:].mean()) > 0.5, seed
        assert ds["energy"].values[-1] != ds["energy"].values[0]
        starts.append(ds["omega"].values[0, :, 0])
    cfg = SimulationConfig(
        alignment="none", confinement=1.0, kernel="log", softening=0.0, lam=0.5,
        n_particles=50, feature="positive", data_dim=1,
    )  # fmt: skip
    assert cfg.start_spacing(1) == 0.5 / 50  # START_SPACING · N^(−1/p) / bandwidth
    assert min(np.diff(np.sort(x)).min() for x in starts) >= 0.5 / 50


def test_a_frozen_mala_chain_prints_a_warning_line(tmp_path, capsys):
    """A step far too large for the domain: every proposal leaves the box and is rejected."""
    args = ["simulate", *LOG_GAS, "--eta", "50", "--n-steps", "40", "--out", str(tmp_path / "f.nc")]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "meanfield: warning: the chain accepted 0 of 40 proposals" in err and "lower eta" in err


def test_softened_or_smooth_kernels_keep_the_plain_initial_draw():
    from meanfield.features import sample_initial_particles

    cfg = SimulationConfig(n_particles=64, seed=4)  # coulomb, softening 0.05
    plain = sample_initial_particles("fourier", 64, 2, seed=4)
    assert cfg.start_spacing(3) == 0.0 and torch.equal(cfg.initial_particles(2), plain)


@pytest.fixture
def small_machine(monkeypatch):
    """16 GB available, whatever the machine running the tests has."""
    monkeypatch.setattr("meanfield._resources.available_memory", lambda: 16 * 10**9)


@pytest.mark.parametrize(
    "flags, match",
    [
        (["--dim", "2", "--cells", "100000"], r"--cells: a grid of 100000 x 100000 cells needs"),
        (["--t-final", "1e9"], r"--t-final / --eta = 1e\+09 / 0.005 gives 2e\+11 particle steps"),
        (["--cells", "3"], r"--cells must be an integer >= 4"),
    ],
)
def test_compare_refuses_absurd_sizes_before_allocating(flags, match, small_machine, tmp_path):
    """Issue 24: --cells 100000 in 2D ended in a MemoryError traceback, --t-final 1e9 ran
    without limit, --cells 3 passed the flag check (help: >= 2) and failed in the grid."""

    from meanfield.errors import MeanfieldError

    with pytest.raises(MeanfieldError, match=match):
        main(["--debug", "compare", "--no-progress", "--out", str(tmp_path / "c"), *flags])
    assert not (tmp_path / "c").exists()  # refused before anything was written


def test_a_grid_too_large_for_the_memory_is_refused_before_allocating(small_machine):
    """Issue 24: a 600³ McKeanVlasov took 42 s, then a MemoryError."""

    from meanfield.domains import Box
    from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    from meanfield.errors import SizeLimitError
    from meanfield.kernels import Riesz
    from meanfield.pde import Grid, McKeanVlasov

    g = Grid(Box(3, 3.0), 600)
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.5), 0.5)], g.domain)
    with pytest.raises(SizeLimitError, match=r"600 x 600 x 600 cells needs about 152 GB"):
        McKeanVlasov(E, g, 1.0)  # refused from the estimate (small_machine caps the memory)
    McKeanVlasov(E, Grid(Box(3, 3.0), 16), 1.0)  # a size that fits


def test_compare_help_states_the_grid_minimum_and_figures_help_the_summed_estimates(capsys):
    from meanfield.cli.figures import FULL_SIZE_SECONDS
    from meanfield.pde.grid import MIN_CELLS

    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    assert f"grid cells per axis (>= {MIN_CELLS}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["figures", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"~{round(sum(FULL_SIZE_SECONDS.values()) / 60)} min on 2 cores" in text
    assert "~6 min" not in text


def test_simulate_runs_hmc_with_its_flags(tmp_path, capsys):
    """Issue 24: HMC existed (meanfield.dynamics.langevin.sample_hmc) but the CLI refused it."""
    out = tmp_path / "hmc.nc"
    args = [*LOG_GAS, "--method", "hmc", "--n-steps", "60", "--n-warmup", "40"]
    args += ["--trajectory-length", "0.5", "--target-accept", "0.7", "--out", str(out)]
    assert main(["simulate", *args]) == 0
    text = capsys.readouterr().out
    assert "hmc (coulomb-gas), N=50" in text and "60 trajectories after 40 warm-up" in text
    ds = load_dataset(out)
    a = ds.attrs
    assert a["method"] == "hmc" and a["n_samples"] == 60 and a["n_warmup"] == 40
    assert a["trajectory_length_requested"] == 0.5 and a["target_accept"] == 0.7
    assert a["config_method"] == "hmc" and ds["omega"].shape == (61, 50, 1)
    assert 0.4 < float(ds["acceptance_rate"][1:].mean()) < 0.95
    # the log gas's Gibbs energy, as MALA samples it (0.504-0.506 over seeds 0-5 above)
    assert abs(float(ds["energy"][1:].mean()) - 0.505) < 0.01


@pytest.mark.parametrize(
    "flags, match",
    [
        (["--method", "hmc", "--trajectory-length", "0"], "trajectory_length"),
        (["--method", "hmc", "--target-accept", "1"], "target_accept"),
        (["--method", "hmc", "--n-warmup", "-1"], "n_warmup"),
        (["--method", "hmc", "--n-warmup", "0"], "step_size"),
        (["--method", "hmc", "--step-size", "0"], "step_size"),
        (["--method", "hmc", "--interaction-batch", "4"], "interaction_batch"),
        (["--method", "mala", "--trajectory-length", "1"], "only with method 'hmc'"),
    ],
)
def test_hmc_flags_are_checked_before_work(flags, match, capsys, tmp_path):
    assert main(["simulate", "--out", str(tmp_path / "x.nc"), "--no-progress", *flags]) == 2
    assert match in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()


def test_compare_reads_a_toml_file_and_its_flags_override_it(tmp_path, capsys):
    """Issue 21: ``meanfield compare`` builds one ComparisonConfig from ``--config`` and the
    flags (flags win), the same run as the flags alone; the dataset records every field."""
    from meanfield.workbench.problems import ComparisonConfig

    cfg = ComparisonConfig(n_particles=30, t_final=0.04, cells=16, n_data=10, seed=5, beta=4.0)
    cfg.to_toml(tmp_path / "cmp.toml")
    common = ["compare", "--no-progress"]
    argv = [*common, "--config", str(tmp_path / "cmp.toml"), "--beta", "2", "--out"]
    assert main([*argv, str(tmp_path / "a")]) == 0
    flags = "--n-particles 30 --t-final 0.04 --cells 16 --n-data 10 --seed 5 --beta 2".split()
    assert main([*common, *flags, "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    a, b = (load_dataset(tmp_path / k / "comparison.nc") for k in "ab")
    np.testing.assert_array_equal(a["w2"].values, b["w2"].values)
    assert a.attrs["beta"] == 2.0 and a.attrs["problem_seed"] == 5
    assert a.attrs["problem_cells"] == 16
