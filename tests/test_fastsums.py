"""Fast Coulomb pair sums (meanfield.fastsums) against the direct pair sum of PairInteraction.

Tolerances:
* p = 1 is exact up to float64 round-off: the ordered sum of N terms of size N·|x| and the
  direct sum of N² terms each carry a relative error ≲ N · 2⁻⁵³ ≈ 1e-12 at N ≤ 5000; the force
  is an integer count in the rank formula and ±1 · (1 ± 2⁻⁵²) per pair in the direct sum.
* p = 2, 3 are asked for a relative accuracy eps: FMM3D's contract and the spectral-Ewald
  truncations (each e^{−log(1/eps)} = eps times an O(1) factor,
  meanfield._fastsums_ewald._EwaldPlan2D) bound the relative ℓ² error over the particles of
  the potentials and forces by eps; the measured errors are 0.01–0.3 eps, so the tests assert
  ≤ eps itself.
"""

import math
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("finufft")
pytest.importorskip("fmm3dpy")

from meanfield import fastsums as fs  # noqa: E402
from meanfield.domains import Ball, Box  # noqa: E402
from meanfield.energy import Energy, PairInteraction, QuadraticPotential  # noqa: E402
from meanfield.errors import InputError, InputTypeError  # noqa: E402
from meanfield.fastsums import (  # noqa: E402
    FastCoulombInteraction,
    coulomb1d_sums,
    fast_pair_interaction,
)
from meanfield.kernels import Coulomb, Gaussian, Riesz  # noqa: E402


def rel(a, b):
    return float((a - b).norm() / b.norm())


def cloud(p, N, seed, kind="gauss"):
    g = torch.Generator().manual_seed(seed)
    if kind == "gauss":
        return torch.randn(N, p, generator=g, dtype=torch.float64)
    return torch.rand(N, p, generator=g, dtype=torch.float64) * 4 - 2


def test_1d_rank_sums_match_direct_with_ties_offset_and_replicas():
    g = torch.Generator().manual_seed(0)
    # integer positions give many ties (zero subgradient pairs); a large offset tests that the
    # common translation is removed before the ordered sum; leading axis = replicas
    om = torch.randint(-40, 40, (3, 2000, 1), generator=g).double() + 1e4
    om[1] = torch.randn(2000, 1, generator=g, dtype=torch.float64) * 3 + 1e4
    direct = PairInteraction(Coulomb(1), 0.7)
    fast = FastCoulombInteraction(Coulomb(1), 0.7)
    vd, gd = direct.value_and_grad(om)
    vf, gf = fast.value_and_grad(om)
    assert torch.allclose(vf, vd, rtol=1e-12, atol=0)
    assert torch.allclose(gf, gd, rtol=0, atol=1e-12 * float(gd.abs().max()))
    assert torch.equal(fast.value(om), vf) and torch.equal(fast.grad(om), gf)


def test_1d_counts_by_hand():
    x = torch.tensor([0.0, 2.0, 2.0, 5.0], dtype=torch.float64)
    total, g = coulomb1d_sums(x)
    # Σ_{i≠j} −|x_i − x_j| = −2 (2 + 2 + 5 + 0 + 3 + 3) = −30
    assert float(total) == -30.0
    # each force = #right − #left, ties excluded
    assert g.tolist() == [3.0, 0.0, 0.0, -3.0]


def test_1d_first_variation_matches_direct():
    g = torch.Generator().manual_seed(1)
    pts = torch.randn(700, 1, generator=g, dtype=torch.float64)
    w = torch.rand(700, generator=g, dtype=torch.float64)
    at = torch.cat([torch.linspace(-4, 4, 301, dtype=torch.float64)[:, None], pts[:5]])
    d = PairInteraction(Coulomb(1), 1.3).first_variation(at, pts, w)
    f = FastCoulombInteraction(Coulomb(1), 1.3).first_variation(at, pts, w)
    assert rel(f, d) < 1e-12


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("eps", [1e-4, 1e-8])
@pytest.mark.parametrize("kind", ["gauss", "uniform"])
def test_fast_sums_match_direct_at_eps(p, eps, kind):
    om = cloud(p, 1500, seed=p, kind=kind)
    lam = 0.8
    vd, gd = PairInteraction(Coulomb(p), lam).value_and_grad(om)
    vf, gf = FastCoulombInteraction(Coulomb(p), lam, eps=eps, min_n=0).value_and_grad(om)
    assert abs(float(vf - vd)) <= eps * abs(float(vd))
    assert rel(gf, gd) <= eps
    # the potentials themselves (what the FMM contract is about): N/(2λ) grad is not them,
    # so check the first variation at the particles' own mean field, off the particles
    at = cloud(p, 300, seed=10 + p, kind=kind) * 1.1 + 0.01
    w = torch.rand(1500, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    fd = PairInteraction(Coulomb(p), lam).first_variation(at, om, w)
    ff = FastCoulombInteraction(Coulomb(p), lam, eps=eps, min_n=0).first_variation(at, om, w)
    assert rel(ff, fd) <= eps


@pytest.mark.parametrize("p", [2, 3])
def test_nearly_collinear_and_batched_clouds(p):
    g = torch.Generator().manual_seed(5)
    om = torch.rand(2, 800, p, generator=g, dtype=torch.float64)
    om[..., 1:] *= 1e-3  # a thin sliver: the 2D Ewald plan floors the area it assumes
    vd, gd = PairInteraction(Coulomb(p)).value_and_grad(om)
    vf, gf = FastCoulombInteraction(Coulomb(p), eps=1e-6, min_n=0).value_and_grad(om)
    assert vf.shape == (2,) and gf.shape == om.shape
    assert torch.allclose(vf, vd, rtol=1e-6, atol=0)
    assert rel(gf, gd) <= 1e-6


@pytest.mark.parametrize("p", [1, 2, 3])
def test_coincident_particles_as_the_direct_sum(p):
    om = cloud(p, 300, seed=7)
    om[10] = om[20]
    direct = PairInteraction(Coulomb(p))
    fast = FastCoulombInteraction(Coulomb(p), eps=1e-8, min_n=0)
    vd, gd = direct.value_and_grad(om)
    vf, gf = fast.value_and_grad(om)
    if p == 1:  # −|0| = 0: the value stays finite
        assert torch.isfinite(vf) and torch.allclose(vf, vd, rtol=1e-12)
    else:  # 1/0 and −log 0: +inf, as the direct sum
        assert math.isinf(float(vf)) and float(vf) > 0 and math.isinf(float(vd))
    assert torch.isfinite(gf).all()  # the twin pair takes the zero subgradient
    assert rel(gf, gd) <= 1e-8


@pytest.mark.parametrize("p", [1, 2, 3])
def test_energy_drift_same_as_direct(p):
    om = cloud(p, 1000, seed=11)
    dom = Box(p, 4.0) if p == 1 else Ball(p, 4.0)
    E_d = Energy([QuadraticPotential(), PairInteraction(Coulomb(p), 0.5)], dom)
    fast = fast_pair_interaction(Coulomb(p), 0.5, eps=1e-8, min_n=0)
    E_f = Energy([QuadraticPotential(), fast], dom)
    tol = 1e-12 if p == 1 else 1e-8  # the drift is dominated by the pair force here
    assert rel(E_f.drift(om), E_d.drift(om)) <= tol
    v_f, g_f = E_f.value_and_grad(om)
    v_d, g_d = E_d.value_and_grad(om)
    assert abs(float(v_f - v_d)) <= tol * abs(float(v_d))
    assert rel(g_f, g_d) <= tol
    # the random-batch drift stays available (direct within each batch)
    gen = torch.Generator().manual_seed(0)
    assert E_f.drift(om, interaction_batch=50, generator=gen).shape == om.shape


@pytest.mark.parametrize("p", [1, 2, 3])
def test_float32_energy_agrees_and_returns_float32(p):
    om = cloud(p, 600, seed=12)
    dom = Box(p, 5.0) if p == 1 else Ball(p, 5.0)
    E32 = Energy([FastCoulombInteraction(Coulomb(p), eps=1e-8, min_n=0)], dom, dtype=torch.float32)
    E64 = Energy([PairInteraction(Coulomb(p))], dom)
    v, g = E32.value_and_grad(om.float())
    assert v.dtype == torch.float32 and g.dtype == torch.float32
    om32 = om.float().double()  # the same particles, rounded to float32
    if p == 1:
        # the rank path runs in float32 itself: the force is an integer count (exact in
        # float32) times 2λ/N², one rounding ≤ 2⁻²⁴ ≈ 6e-8; the value an ordered sum of N
        # terms, relative error ≲ N · 2⁻²⁴ ≈ 4e-5
        assert rel(g.double(), E64.grad(om32)) < 1.2e-7
        assert abs(float(v) - float(E64.value(om32))) < 4e-5 * abs(float(v))
    else:
        # p = 2, 3 run in float64 on the rounded inputs, then round once: ≈ 2⁻²⁴ ≈ 6e-8
        assert rel(g.double(), E64.grad(om32)) < 1e-6
        assert abs(float(v) - float(E64.value(om32))) < 1e-6 * abs(float(v))


def test_min_n_falls_back_to_the_direct_sum(monkeypatch):
    import meanfield.fastsums as fs

    om = cloud(3, 200, seed=13)
    direct = PairInteraction(Coulomb(3))
    for fast in (FastCoulombInteraction(Coulomb(3), min_n=500), FastCoulombInteraction(Coulomb(3))):
        assert torch.equal(fast.grad(om), direct.grad(om))
        assert torch.equal(fast.value(om), direct.value(om))
    # the default threshold is read per dimension: with it lowered the FMM runs (not bitwise)
    monkeypatch.setitem(fs.DIRECT_BELOW, 3, 100)
    g = FastCoulombInteraction(Coulomb(3), eps=1e-8).grad(om)
    assert not torch.equal(g, direct.grad(om)) and rel(g, direct.grad(om)) <= 1e-8


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="softening"):
        FastCoulombInteraction(Coulomb(2, softening=0.1))
    with pytest.raises(ValueError, match="kernel"):
        FastCoulombInteraction(Riesz(0.5))
    with pytest.raises(TypeError, match="kernel"):
        FastCoulombInteraction("coulomb")
    with pytest.raises(ValueError, match="kernel"):
        FastCoulombInteraction(Gaussian(1.0))
    with pytest.raises(ValueError, match="eps"):
        FastCoulombInteraction(Coulomb(3), eps=0.5)
    with pytest.raises(ValueError, match="lam"):
        FastCoulombInteraction(Coulomb(3), lam=-1.0)
    with pytest.raises(ValueError, match="min_n"):
        FastCoulombInteraction(Coulomb(3), min_n=-1)
    # the Coulomb kernel of R^2 (log) on particles of dimension 3
    with pytest.raises(ValueError, match="p=3"):
        Energy([FastCoulombInteraction(Coulomb(2))], Ball(3, 1.0))
    with pytest.raises(ValueError, match="p=2"):
        FastCoulombInteraction(Coulomb(1)).grad(torch.zeros(5, 2, dtype=torch.float64))
    bad = torch.randn(50, 3, dtype=torch.float64)
    bad[7, 1] = float("nan")
    with pytest.raises(ValueError, match="omega"):
        FastCoulombInteraction(Coulomb(3), min_n=0).grad(bad)
    with pytest.raises(ValueError, match="points"):
        FastCoulombInteraction(Coulomb(3)).first_variation(bad[:3] * 0, bad, torch.ones(50))


def test_missing_library_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "finufft", None)  # import finufft now raises ImportError
    with pytest.raises(ImportError, match="finufft"):
        FastCoulombInteraction(Coulomb(2)).grad(torch.randn(10, 2, dtype=torch.float64))


def test_ewald_self_term_and_far_part_by_hand():
    # two charges at distance r: each potential is −log r, the gradient ±(x_i − x_j)/r² · (−1)
    from meanfield.fastsums import coulomb2d_sums

    x = np.array([[0.0, 0.0], [0.3, 0.4]])
    pot, grad = coulomb2d_sums(x, 1e-10)
    assert np.allclose(pot, -np.log(0.5), rtol=1e-9, atol=0)
    assert np.allclose(grad[0], -(x[0] - x[1]) / 0.25, rtol=1e-9, atol=0)
    assert np.allclose(grad[1], -grad[0], rtol=1e-9, atol=0)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_first_variation_on_a_charged_point_as_the_direct_sum(p):
    pts = cloud(p, 200, seed=20)
    w = torch.rand(200, generator=torch.Generator().manual_seed(21), dtype=torch.float64)
    w[3] = 0.0  # an uncharged point contributes nothing, not inf · 0
    at = torch.cat([pts[:5], cloud(p, 20, seed=22) + 0.05])
    d = PairInteraction(Coulomb(p)).first_variation(at, pts, w)
    f = FastCoulombInteraction(Coulomb(p), eps=1e-8).first_variation(at, pts, w)
    charged = torch.tensor([True, True, True, False, True] + [False] * 20)
    if p == 1:
        assert rel(f, d) < 1e-12
    else:
        assert torch.isinf(f[charged]).all() and (f[charged] > 0).all()
        assert torch.isinf(d[charged]).all()
        assert rel(f[~charged][1:], d[~charged][1:]) <= 1e-8
        assert torch.isfinite(f[3])  # the direct sum gives inf · 0 = nan there


def test_benchmark_smoke(tmp_path, monkeypatch):
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_fastsums.py"
    spec = importlib.util.spec_from_file_location("bench_fastsums", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    # the script pins threads for the whole process: undo that after the run
    threads = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
    try:
        assert bench.main(["--max-n", "300", "--max-direct", "100", "--out", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(threads)
    res = json.loads((tmp_path / "fastsums.json").read_text())
    assert {r["p"] for r in res["rows"]} == {1, 2, 3} and len(res["rows"]) == 6
    extrapolated = [r for r in res["rows"] if r["direct_extrapolated"]]
    assert [r["N"] for r in extrapolated] == [300, 300, 300]
    assert all(r["grad_rel_err"] < 1e-7 for r in res["rows"] if not r["direct_extrapolated"])
    assert "Crossover" in (tmp_path / "fastsums.md").read_text()
    with pytest.raises(SystemExit):
        bench.main(["--eps", "1"])


@pytest.mark.parametrize("p", [1, 2, 3])
def test_degenerate_clouds_as_the_direct_sum(p):
    # eps = 1e-10 (the default before it became 1e-6): the first-variation check below is 1e-8
    fast = FastCoulombInteraction(Coulomb(p), eps=1e-10, min_n=0)
    direct = PairInteraction(Coulomb(p))
    for om in (torch.randn(1, p, dtype=torch.float64), torch.ones(5, p, dtype=torch.float64)):
        vf, gf = fast.value_and_grad(om)
        vd, gd = direct.value_and_grad(om)
        # one particle: no pairs (0); all coincident: +inf except −|0| = 0 in p = 1; no force
        assert float(vf) == float(vd) and torch.equal(gf, gd)
    pts, w = torch.ones(4, p, dtype=torch.float64), torch.ones(4, dtype=torch.float64)
    at = torch.full((3, p), 1.5, dtype=torch.float64)
    f, d = fast.first_variation(at, pts, w), direct.first_variation(at, pts, w)
    assert rel(f, d) <= 1e-8


@pytest.mark.parametrize("p", [1, 2, 3])
def test_a_field_of_no_sources_is_zero_and_of_no_targets_empty(p):
    # an empty sum is 0, not an error from inside the libraries (the p = 2, 3 fields raised
    # ZeroDivisionError / ValueError on an empty array)
    field = {1: fs.coulomb1d_field, 2: fs.coulomb2d_field, 3: fs.coulomb3d_field}[p]
    shape = (lambda n: (n,)) if p == 1 else (lambda n: (n, p))
    args = (lambda a, y, w: (a, y, w)) if p == 1 else (lambda a, y, w: (a, y, w, 1e-6))
    as_array = torch.as_tensor if p == 1 else np.asarray
    for n_at, n_points in [(3, 0), (0, 3), (0, 0)]:
        at = as_array(np.full(shape(n_at), 0.5))
        points = as_array(np.arange(float(np.prod(shape(n_points)))).reshape(shape(n_points)))
        out = np.asarray(field(*args(at, points, as_array(np.ones(n_points)))))
        assert out.shape == (n_at,) and not out.any()


def test_a_3d_field_with_every_atom_on_the_targets_is_inf_or_zero():
    # targets and atoms all at one place: FMM3D has no box and returned NaN; Σ w/0 is +inf
    # for a charged atom (as coulomb2d_field and the direct sum) and 0 for massless ones
    at, atoms = np.zeros((2, 3)), np.zeros((3, 3))
    assert (fs.coulomb3d_field(at, atoms, np.array([2.0, 0.0, 0.0]), 1e-6) == np.inf).all()
    assert (fs.coulomb3d_field(at, atoms, np.zeros(3), 1e-6) == 0.0).all()


@pytest.mark.parametrize("N", [2, 3, 20])
def test_the_2d_sums_hold_eps_at_every_scale_and_size(N):
    # −log‖s z‖ = −log s − log‖z‖: the sums are scale-covariant, but the truncated kernel's
    # transform carries R log R, which the gradient must cancel: its error grew as log R
    # (N = 20, eps = 1e-6: 4e-6 at extent 1e100; at 1e300 an OverflowError).  The gradient
    # now leaves that constant's transform out, a cloud of extreme extent is scaled by a
    # power of two, and below 8 particles the split runs at eps / 8 (N = 2 reached 1.7 eps)
    rng = np.random.default_rng(11)
    for s in (1e-200, 1e-10, 1.0, 1e10, 1e100, 1e300):
        for trial in range(4):
            x = rng.normal(size=(N, 2)) if trial % 2 else rng.random((N, 2))
            z = x[:, None] - x[None]
            r2 = (z * z).sum(-1)
            np.fill_diagonal(r2, np.inf)
            want_grad = -(z / r2[..., None]).sum(1)  # at scale 1: the force scales as 1/s
            np.fill_diagonal(r2, 1.0)
            want_pot = -0.5 * np.log(r2).sum(1) - (N - 1) * math.log(s)
            pot, grad = fs.coulomb2d_sums(s * x, 1e-6)
            err = np.linalg.norm(s * grad - want_grad) / np.linalg.norm(want_grad)
            assert err <= 1e-6, (s, trial, err)
            assert np.abs(pot - want_pot).max() <= 1e-6 * max(1.0, np.abs(want_pot).max())


def test_the_1d_sums_of_huge_coincident_particles_are_zero():
    # the offset removed before the ordered sum was the mean, which overflows near 1e308
    # (total and gradient NaN); the middle sorted value keeps every difference exact here
    total, grad = fs.coulomb1d_sums(torch.full((3,), 1e308, dtype=torch.float64))
    assert float(total) == 0.0 and not grad.any()
    ulp = 2.0**971  # of 1e308
    x = torch.tensor([1e308, 1e308 - ulp, 1e308], dtype=torch.float64)
    total, grad = fs.coulomb1d_sums(x)
    assert float(total) == -4 * ulp and grad.tolist() == [-1.0, 2.0, -1.0]


def _cloud(p, n=40):
    return np.random.default_rng(7).normal(size=(n, p))


@pytest.mark.parametrize(
    "call, names",
    [
        (lambda: fs.coulomb2d_sums(_cloud(3), 1e-6), "x"),  # wrong dimension
        (lambda: fs.coulomb2d_sums(np.where(np.eye(40, 2) > 0, np.nan, _cloud(2)), 1e-6), "x"),
        (lambda: fs.coulomb2d_sums(_cloud(2), 0.5), "eps"),
        (lambda: fs.coulomb2d_sums(_cloud(2), 1e-6, near=0), "near"),
        (lambda: fs.coulomb2d_field(_cloud(2, 3), _cloud(2), -np.ones(40), 1e-6), "weights"),
        (lambda: fs.coulomb2d_field(_cloud(2, 3), _cloud(2), np.ones(39), 1e-6), "weights"),
        (lambda: fs.coulomb2d_field(np.full((1, 2), np.inf), _cloud(2), np.ones(40), 1e-6), "at"),
        (lambda: fs.coulomb3d_sums(_cloud(2), 1e-6), "x"),
        (lambda: fs.coulomb3d_sums(_cloud(3), 1e-20), "eps"),
        (lambda: fs.coulomb3d_field(_cloud(3, 2), _cloud(3), -np.ones(40), 1e-6), "weights"),
        (lambda: fs.coulomb1d_sums(torch.tensor([0.0, float("nan"), 1.0])), "x"),
        (
            lambda: fs.coulomb1d_field(
                torch.zeros(1), torch.tensor([float("nan"), 1.0]), torch.ones(2)
            ),
            "points",
        ),
        (lambda: fs.coulomb1d_field(torch.zeros(1), torch.ones(2), -torch.ones(2)), "weights"),
        (lambda: fs.coulomb1d_sums(torch.tensor([0, 1, 3])), "x"),  # integers: a torch error
        (lambda: fs.coulomb1d_sums(np.array([0.0, 1.0])), "x"),  # not a tensor: a TypeError
        (lambda: fs.coulomb1d_field(torch.tensor([2]), torch.ones(2), torch.ones(2)), "at"),
    ],
)
def test_the_sums_refuse_bad_arrays_by_name(call, names):
    # the low-level sums are public: a NaN, a wrong shape or a negative mass was an IndexError,
    # a scipy ValueError or a silently wrong (NaN, or finite where −inf is due) result
    with pytest.raises((InputError, InputTypeError), match=names):
        call()
