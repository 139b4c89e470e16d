"""The tiled symmetric pair sums (meanfield.pairsum) against a direct float64 computation with
explicit differences ω_i − ω_j, for every kernel kind, tile layout and dtype."""

import math

import numpy as np
import pytest
import torch

from meanfield import pairsum
from meanfield.domains import Ball, Box
from meanfield.energy import Energy, PairInteraction
from meanfield.errors import NumericalError
from meanfield.kernels import Gaussian, PairKernel, Quadratic, Riesz
from meanfield.pairsum import pair_sums


class _Lorentzian(PairKernel):
    """A user kernel the module has no special plan for: κ(u) = 1 / (1 + u)."""

    name = "lorentzian"

    def __repr__(self):  # a stable test id (the default repr holds the object's address)
        return "_Lorentzian()"

    def kappa(self, u):
        return 1.0 / (1.0 + u)

    def dkappa(self, u):
        return -1.0 / (1.0 + u) ** 2


class _Abs(PairKernel):
    """|κ|, for the scale of a value sum whose terms may cancel."""

    def __init__(self, kernel):
        self.kernel = kernel

    def value_sq(self, r2):
        return self.kernel.value_sq(r2).abs()

    def grad_coeff_sq(self, r2):
        return torch.zeros_like(r2)


KERNELS = [
    Riesz(0.0),  # log, unsoftened
    Riesz(0.0, 0.1),
    Riesz(1.0, 0.1),  # half-integer m = 3/2 (rsqrt path)
    Riesz(2.0, 0.1),  # integer m = 2
    Riesz(3.0, 0.2),  # m = 5/2
    Riesz(0.7, 0.2),  # m = 1.35: the general power
    Riesz(-1.0),  # −|z|, singular at 0
    Riesz(-3.0),  # m = −1/2: grows with u
    Riesz(14.0, 0.1),  # the benchmark's s = p − 2 at p = 16
    Gaussian(0.7),
    Quadratic(),
    _Lorentzian(),
]


def _direct(om, kernel):
    """(Σ_{i≠j} k, Σ_{j≠i} 2κ'(u_ij)(ω_i − ω_j)) in float64 from explicit differences."""
    om = om.double()
    diff = om[:, None, :] - om[None, :, :]
    r2 = (diff * diff).sum(-1)
    eye = torch.eye(len(om), dtype=torch.bool)
    r2 = torch.where(eye, torch.ones_like(r2), r2)
    value = torch.where(eye, 0.0, kernel.value_sq(r2)).sum()
    c = torch.where(eye, 0.0, kernel.grad_coeff_sq(r2))
    return value, (c[..., None] * diff).sum(1)


def _spread(N, p, seed):
    """N points in [−2, 2]^p with pairwise distances ≥ 0.02 (rejection), so the round-off
    bound below stays finite."""
    rng = np.random.default_rng(seed)
    pts = []
    while len(pts) < N:
        x = rng.uniform(-2, 2, size=p)
        if all(np.sum((x - q) ** 2) >= 0.02**2 for q in pts):
            pts.append(x)
    return torch.tensor(np.array(pts))


def _tolerance(om, kernel, dtype):
    """Relative error bound of the matrix-product form: u carries an absolute error of about
    (p + 2) · eps · (2 max|ω|² + ε²) (a length-(p + 2) dot product), which a power u^(−m)
    turns into a relative error m + 1 times the relative error of u at the closest pair; a
    factor 8 covers the summation and the kernel's own rounding."""
    eps = torch.finfo(dtype).eps
    p = om.shape[1]
    soft2 = getattr(kernel, "softening", 0.0) ** 2
    d = torch.cdist(om, om) + torch.eye(len(om)) * 1e9
    u_min = float(d.min()) ** 2 + soft2
    m = abs(getattr(kernel, "s", 2.0)) / 2 + 1
    if p == 1:  # exact differences: only the kernel's rounding
        return 8 * (m + 1) * eps * 16
    return 8 * (m + 1) * (p + 2) * eps * (2 * float((om * om).sum(1).max()) + soft2) / u_min


@pytest.mark.parametrize("p", [1, 2, 3, 16])
@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_tiled_sums_match_direct(kernel, p):
    if isinstance(kernel, Riesz) and kernel.softening == 0 and kernel.s >= p:
        pytest.skip("not integrable")
    om = _spread(97, p, seed=p)  # 97 = 3 · 32 + 1: ragged last tile
    want_v, want_g = _direct(om, kernel)
    scale_g = float(want_g.abs().max())
    scale_v = float(_direct(om, _Abs(kernel))[0])  # Σ |k_ij|: the value may cancel
    for dtype in (torch.float64, torch.float32):
        x = om.to(dtype)
        tol = _tolerance(om, kernel, dtype)
        for tile in (32, 4096):  # symmetric tile pairs with a remainder; one diagonal tile
            v, g = pair_sums(x, kernel, tile=tile)
            assert v.dtype == g.dtype == dtype
            assert abs(float(v) - float(want_v)) <= tol * scale_v, (dtype, tile)
            err = float((g.double() - want_g).abs().max())
            assert err <= tol * scale_g, (dtype, tile, err / scale_g, tol)


def test_value_only_and_grad_only_agree_with_both():
    om = _spread(50, 3, seed=0)
    k = Riesz(1.0, 0.1)
    v, g = pair_sums(om, k, value_scale=0.3, grad_scale=0.7, tile=16)
    v1, none1 = pair_sums(om, k, want_grad=False, value_scale=0.3, tile=16)
    none2, g1 = pair_sums(om, k, want_value=False, grad_scale=0.7, tile=16)
    assert none1 is None and none2 is None
    assert float(v1) == pytest.approx(float(v), rel=1e-14)
    assert torch.allclose(g1, g, rtol=1e-14, atol=0)


def test_pair_interaction_gradient_is_autograd_of_its_value():
    """The tiled gradient against autograd through the (row-chunked) differentiable value."""
    om = _spread(60, 4, seed=1)
    E = Energy([PairInteraction(Riesz(2.0, 0.1), 0.4)], Ball(4, 10.0))
    x = om.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(E.value(x), x)  # requires_grad: the row-chunk path
    with torch.no_grad():
        v, g = E.value_and_grad(om)  # the tiled path
    assert float(v) == pytest.approx(float(E.value(x).detach()), rel=1e-12)
    assert torch.allclose(g, auto, rtol=1e-10, atol=1e-14)


def test_coincident_points_give_inf_value_and_zero_force():
    om = torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 0.5], [-0.3, 2.0]], dtype=torch.float64)
    for k in (Riesz(1.0), Riesz(0.0), Riesz(-1.0)):
        v, g = pair_sums(om, k, tile=2)
        assert math.isinf(float(v)) or k.s < 0
        assert torch.isfinite(g).all()
        assert torch.allclose(g[0], g[1])  # twins feel the same force, their mutual one 0


def _sphere(N, p, radius, seed):
    x = torch.randn(N, p, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return radius * x / x.norm(dim=1, keepdim=True)


def test_float32_at_p64_rescales_instead_of_underflowing():
    """p = 64, s = 62 on the radius-3 sphere: the terms u^(−32) ≈ 18^(−32) ≈ 10^(−40) are
    float32 denormals (checked below), yet the rescaled sums keep float32 accuracy."""
    N, p = 300, 64
    om = _sphere(N, p, 3.0, seed=0)
    k = Riesz(62.0, 0.1)
    diff = om[:, None] - om[None]
    r2 = (diff * diff).sum(-1)[~torch.eye(N, dtype=torch.bool)]
    naive = k.grad_coeff_sq(r2.float())
    assert (naive.abs() < torch.finfo(torch.float32).tiny).float().mean() > 0.5  # the hazard
    want_v, want_g = _direct(om, k)
    v, g = pair_sums(om.float(), k, tile=128)
    # float32 rounding of the points moves u by ~ 2·64·eps·9 relative to u ≳ 10 (m = 32):
    # relative force error ≲ 33 · 1e-5; 1e-3 leaves room for the sums
    assert abs(float(v) / float(want_v) - 1) < 1e-3
    rows = want_g.norm(dim=1)
    assert float(((g.double() - want_g).norm(dim=1) / rows).max()) < 1e-3
    # through the energy (λ/N² applied in float64): the same, not zeros; entries that land
    # below float32's smallest normal number keep an absolute error below it (the stated bound)
    E = Energy([PairInteraction(k, 1.0)], Ball(p, 3.0), dtype=torch.float32)
    gE = E.grad(om.float()).double()
    tiny = torch.finfo(torch.float32).tiny
    assert torch.allclose(gE, want_g * 2 / N**2, rtol=1e-3, atol=tiny)
    assert float(gE.abs().max()) > 1e4 * tiny


def _reference_lowerings(monkeypatch):
    """Record (u₀ before, u₀ after) of every call of the running rescaling reference, which
    the sums then take wherever they rescale (no fixed reference first)."""
    import meanfield.pairsum as ps

    monkeypatch.setattr(ps, "_fixed_reference", lambda *args: None)
    seen, inner = [], ps._lower_reference

    def spy(u, diag, u0, *args):
        out = inner(u, diag, u0, *args)
        seen.append((u0, out))
        return out

    monkeypatch.setattr(ps, "_lower_reference", spy)
    return seen


def test_float32_p64_reference_lowered_mid_sum_keeps_accuracy(monkeypatch):
    """The reference u₀ starts at the first tile's smallest u (≈ 10 on the radius-3 sphere)
    and must drop to ≈ 1 at the last tile, which holds a close pair: (10/1)^32 ≈ 2^106 would
    overflow float32, so the sums of the earlier tiles are rescaled in place.  The result
    equals the float64 direct sum to float32 accuracy (the bound of the test above; the close
    pair's u = 1.01 carries the product's round-off ~ 18 · 64 · 6e-8 ≈ 7e-5, × m = 32 in
    its terms: 2e-3 relative at worst, ~1e-4 typical, so 3e-3)."""
    N, p = 320, 64
    om = _sphere(N, p, 3.0, seed=4)
    om[-1] = om[-2] + 1.0 * torch.nn.functional.normalize(torch.ones(p, dtype=om.dtype), dim=0)
    k = Riesz(62.0, 0.1)
    seen = _reference_lowerings(monkeypatch)
    v, g = pair_sums(om.float(), k, tile=64)
    lowered = [(a, b) for a, b in seen if a is not None and b < a]
    assert lowered and lowered[-1][1] < 1.1 < 5.0 < lowered[-1][0]  # the path was taken
    want_v, want_g = _direct(om, k)
    assert abs(float(v) / float(want_v) - 1) < 3e-3
    # every row to 3e-3 relative, up to the floor 2^(−100) of the bare terms (the stated
    # guarantee: N · 2^(−100) of the largest term, × the largest |ω_i − ω_j| = 6), which the
    # rows far from the close pair (forces ~1e-33 against ~5) lie below
    floor = N * 2.0**-100 * 6.0 * float(want_g.norm(dim=1).max())
    err = (g.double() - want_g).norm(dim=1)
    assert bool((err <= 3e-3 * want_g.norm(dim=1) + floor).all())
    assert float(err[-2:].max() / want_g[-2:].norm(dim=1).min()) < 3e-3  # the close pair


def _direct_twins(om, kernel):
    """(Σ_{j≠i} 2κ'(u_ij)(ω_i − ω_j), max |2κ'(u_ij)|) in float64 from explicit differences,
    coincident pairs taking the zero subgradient (as :func:`_direct`, which needs u > 0)."""
    diff = om[:, None] - om[None]
    r2 = (diff * diff).sum(-1)
    keep = r2 > 0
    c = torch.where(keep, kernel.grad_coeff_sq(torch.where(keep, r2, 1.0)), 0.0)
    return (c[..., None] * diff).sum(1), float(c.abs().max())


@pytest.mark.parametrize("twin", [1, -1], ids=["first-tile", "last-tile"])
def test_float32_p64_coincident_points_rescaled_generic_tile(twin):
    """An unsoftened s = 62 kernel with a duplicated point needs both the rescaling (terms
    ≈ 18^(−32)) and the zero subgradient of the coincident pair (u = 0), so the force equals
    the float64 direct sum over the other pairs (the duplicated pair contributes nothing).
    The twin of point 0 sits in the first tile (whose smallest u is then 0: the reference
    must come from the smallest u > 0, or the first tile's sums stay in other units) or in
    the last one.  Tolerance as in the p = 64 test above (u ≳ 10, relative error ≲ 33 · 1e-5)."""
    N, p = 200, 64
    om = _sphere(N, p, 3.0, seed=6)
    om[twin] = om[0]
    k = Riesz(62.0)
    v, g = pair_sums(om.float(), k, tile=64)
    want_g, _ = _direct_twins(om, k)
    rows = want_g.norm(dim=1)
    assert float(((g.double() - want_g).norm(dim=1) / rows).max()) < 1e-3
    assert math.isinf(float(v)) and float(v) > 0  # κ(0) = +∞ for s > 0


def _central_pair(om, i, j, half, axis):
    """Points i, j at ±half · e_axis: a pair at distance 2·half with |ω|² = half², whose
    matrix-product u carries a round-off ~ (p + 2) · eps · 2 half² only (not · 9, as on the
    radius-3 sphere)."""
    om[i] = 0.0
    om[j] = 0.0
    om[i, axis] = half
    om[j, axis] = -half


def test_float32_p64_twins_and_a_closer_pair_in_one_tile():
    """The last tile holds both a duplicated point (u = 0) and a pair at distance 0.3
    (u = 0.09) far closer than the reference of the earlier tiles (u₀ ≈ 10): the reference
    must drop to 0.09 there ((10/0.09)^32 ≈ 2^217 is no float32 number), although the tile's
    smallest u is 0.  The close pair sits at ±0.15 e₁, so its u carries a round-off
    ~ 66 · 1.2e-7 · 0.045 ≈ 4e-7, 4e-6 relative, × m + 1 = 33: ≲ 1.5e-4 in its force; 1e-3.
    The other rows are exact up to the stated floor: N · 2^(−100) of the largest coefficient,
    × the largest |ω_i − ω_j| = 6."""
    N, p = 200, 64
    om = _sphere(N, p, 3.0, seed=6)
    om[-1] = om[-3]
    _central_pair(om, -2, -4, 0.15, 0)
    k = Riesz(62.0)
    _, g = pair_sums(om.float(), k, tile=64)
    want_g, c_max = _direct_twins(om, k)
    rows = want_g.norm(dim=1)
    err = (g.double() - want_g).norm(dim=1)
    assert bool(torch.isfinite(g).all())
    assert float(err[[-2, -4]].max() / rows[[-2, -4]].min()) < 1e-3
    assert bool((err <= 1e-3 * rows + N * 2.0**-100 * c_max * 6.0).all())


def test_float32_p64_reference_lowered_twice_keeps_accuracy(monkeypatch):
    """Radius-3 sphere (first tile: u₀ ≈ 10), then a pair at ±0.85 e₁ (u = 2.9, in tile 2)
    and one at ±0.4 e₂ (in tile 4; u = 0.88 to the first pair, met in tile (2, 4)): each
    step is (u_old/u_new)^32 > 2^50, so the reference drops twice and the sums of the
    earlier tiles are rescaled twice in place; the floor pass runs only once u₀ has dropped.
    Tolerances: the central pairs' u carry a round-off ~ 66 · 1.2e-7 · 1.4 ≈ 1e-5, ≲ 1.5e-5
    relative at u ≥ 0.65, × 33: ≲ 5e-4; the sphere rows are exact up to the floor
    (N · 2^(−100) of the largest coefficient × 6)."""
    N, p = 320, 64
    om = _sphere(N, p, 3.0, seed=4)
    _central_pair(om, 130, 131, 0.85, 0)
    _central_pair(om, 290, 291, 0.4, 1)
    k = Riesz(62.0, 0.1)
    seen = _reference_lowerings(monkeypatch)
    floors, ratio = [], pairsum._ratio_
    monkeypatch.setattr(pairsum, "_ratio_", lambda *a: floors.append(a[3]) or ratio(*a))
    v, g = pair_sums(om.float(), k, tile=64)
    lowered = [(a, b) for a, b in seen if a is not None and b < a]
    assert len(lowered) >= 2  # the path under test was taken
    # the floor pass: skipped while u₀ ≈ 10 ((10/36)^32 ≈ 2^(−59) ≥ 2^(−100) is proved),
    # run once u₀ ≤ 2.9 ((2.9/36)^32 ≈ 2^(−116))
    assert None in floors and any(f is not None for f in floors)
    want_v, want_g = _direct(om, k)
    _, c_max = _direct_twins(om, k)
    assert abs(float(v) / float(want_v) - 1) < 1e-3
    rows = want_g.norm(dim=1)
    err = (g.double() - want_g).norm(dim=1)
    central = [130, 131, 290, 291]
    assert float((err[central] / rows[central]).max()) < 1e-3
    assert bool((err <= 1e-3 * rows + N * 2.0**-100 * c_max * 6.0).all())


@pytest.mark.parametrize(
    "dtype, log_lam, shift", [(torch.float64, 5, 300), (torch.float32, 1, 60)], ids=str
)
def test_rescaled_far_points_by_homogeneity(dtype, log_lam, shift):
    """k = |z|^(−62) is homogeneous: at λ times the points the force is λ^(−63) times the
    force at scale 1, and ``grad_scale`` = 10^shift brings it back.  float64 at λ = 10^5:
    10^(−315) is below even float64's range, so float64 rescales too, and the rescaling
    constant u₀^m ≈ (2·10^10)^32 is never formed (it overflows float64); float32 at λ = 10:
    10^(−63), u₀^m ≈ 200^32 beyond float32's range.  A duplicated point takes the zero
    subgradient.  Tolerance: float64 1e-12 (u ≳ 1, |ω|² = 1: round-off 66 · 2.2e-16 × 33 ≈
    5e-13 relative at worst); float32 1e-3 (the same × 5e8: ≲ 3e-4)."""
    N, p = 100, 64
    x = _sphere(N, p, 1.0, seed=6)
    x[-1] = x[0]
    k = Riesz(62.0)
    want, _ = _direct_twins(x, k)
    _, g = pair_sums((10.0**log_lam * x).to(dtype), k, grad_scale=10.0**shift, tile=32)
    want = want * 10.0 ** (shift - 63 * log_lam)
    tol = 1e-12 if dtype == torch.float64 else 1e-3
    assert float(((g.double() - want).norm(dim=1) / want.norm(dim=1)).max()) < tol


def test_float64_p64_is_not_rescaled(monkeypatch):
    """The p = 64 case of the float32 tests above lies inside float64's range (terms
    ~ 18^(−32) ≫ 2^(−1000)): no rescaling reference, the plain sums, equal to the direct sum
    within the matrix-product bound (``_tolerance``)."""
    N, p = 200, 64
    om = _sphere(N, p, 3.0, seed=0)
    k = Riesz(62.0, 0.1)
    seen = _reference_lowerings(monkeypatch)
    v, g = pair_sums(om, k, tile=64)
    assert not seen
    want_v, want_g = _direct(om, k)
    tol = _tolerance(om, k, torch.float64)
    assert abs(float(v) - float(want_v)) <= tol * abs(float(want_v))
    assert float((g - want_g).abs().max()) <= tol * float(want_g.abs().max())


def test_float32_large_replicas_at_p64_rescale_each_replica():
    """Replicas of N ≥ ``tiled_replica_min_n`` take the tiled sums one replica at a time,
    each with its own rescaling reference (u₀ ≈ 10 and ≈ 14 on the radius-3 and 3.5
    spheres): equal to a float64 energy (tolerance as above; λ = 10^12 brings the forces
    ≈ 10^(−33) into float32's normal range, as in the test below)."""
    N, p = 256, 64
    reps = torch.stack([_sphere(N, p, 3.0, seed=8), _sphere(N, p, 3.5, seed=9)])
    terms = [PairInteraction(Riesz(62.0, 0.1), 1e12)]
    E32 = Energy(terms, Ball(p, 4.0), dtype=torch.float32)
    E64 = Energy(terms, Ball(p, 4.0))
    assert E32.terms[0]._uses_tiles(reps.float())
    v32, g32 = E32.value_and_grad(reps.float())
    v64, g64 = E64.value_and_grad(reps)
    assert torch.allclose(v32.double(), v64, rtol=1e-3, atol=0)
    assert float(g64.abs().max()) > 1e4 * torch.finfo(torch.float32).tiny
    # per row (a single component may cancel far below its row's norm)
    rows = g64.norm(dim=-1)
    assert float(((g32.double() - g64).norm(dim=-1) / rows).max()) < 1e-3


def test_float32_replicas_and_random_batches_at_p64_are_not_zero():
    """The row-chunk paths (replicas, random batches) compute in float64 when float32 would
    leave its range, and round the result: the same numbers as a float64 run.  On the
    radius-4 sphere the terms 62 u^(−32) ≈ 10^(−46) are 0 in float32, while λ = 10^12 brings
    the forces (≈ 10^(−33)) back into its range."""
    N, p = 120, 64
    om = _sphere(N, p, 4.0, seed=2)
    terms = [PairInteraction(Riesz(62.0, 0.1), 1e12)]
    E32 = Energy(terms, Ball(p, 4.0), dtype=torch.float32)
    E64 = Energy(terms, Ball(p, 4.0))
    tiny = torch.finfo(torch.float32).tiny
    reps = torch.stack([om, om.flip(0)])
    g32, g64 = E32.grad(reps.float()).double(), E64.grad(reps)
    assert float(g64.abs().max()) > 1e4 * tiny
    assert torch.allclose(g32, g64, rtol=1e-3, atol=tiny)
    b32 = E32.terms[0].grad_random_batch(om.float(), 20, torch.Generator().manual_seed(5))
    b64 = E64.terms[0].grad_random_batch(om, 20, torch.Generator().manual_seed(5))
    assert torch.allclose(b32.double(), b64, rtol=1e-3, atol=tiny)


def test_float32_force_below_range_raises_naming_float64():
    """randn particles at p = 64: every force is ~1e-59, not a float32 number at all."""
    om = torch.randn(200, 64, generator=torch.Generator().manual_seed(0))
    E = Energy([PairInteraction(Riesz(62.0, 0.1), 0.1)], Ball(64, 100.0), dtype=torch.float32)
    with pytest.raises(NumericalError, match="float64"):
        E.grad(om)
    v64 = Energy([PairInteraction(Riesz(62.0, 0.1), 0.1)], Ball(64, 100.0)).grad(om.double())
    assert 0 < float(v64.abs().max()) < 1e-50  # float64 holds it


# --- CUDA (run by benchmarks/gpu_check.sh on a GPU; skipped here) ---------------------------
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("kernel", [Riesz(14.0, 0.1), Riesz(0.0), Riesz(1.0, 0.1), Gaussian(0.7)])
def test_cuda_pair_sums_match_cpu(kernel):
    om = _spread(300, 16, seed=3)
    for dtype, rtol in ((torch.float64, 1e-12), (torch.float32, 1e-4)):
        v_cpu, g_cpu = pair_sums(om.to(dtype), kernel, tile=64)
        v, g = pair_sums(om.to(dtype).cuda(), kernel, tile=64)
        assert v.device.type == g.device.type == "cuda"
        assert float(v) == pytest.approx(float(v_cpu), rel=rtol)
        scale = float(g_cpu.abs().max())
        assert float((g.cpu() - g_cpu).abs().max()) <= rtol * scale


@pytest.mark.cuda
@cuda
def test_cuda_langevin_step_matches_cpu():
    """One projected-Langevin step on the GPU against the same step on the CPU (float64, the
    same noise drawn on the CPU generator)."""
    from meanfield.dynamics.langevin import ProjectedLangevin

    p, N = 3, 200
    om = _sphere(N, p, 1.0, seed=1)
    outs = []
    for device in ("cpu", "cuda"):
        E = Energy([PairInteraction(Riesz(1.0, 0.05), 0.5)], Ball(p, 2.0), device=device)
        step = ProjectedLangevin(E, eta=1e-3, beta=50.0)
        state = step.init(om.clone(), seed=0)
        state = step.step(state)
        outs.append(state.omega.cpu())
    assert torch.allclose(outs[0], outs[1], rtol=1e-10, atol=1e-12)


@pytest.mark.cuda
@cuda
def test_cuda_float32_p64_rescales():
    om = _sphere(300, 64, 3.0, seed=0)
    k = Riesz(62.0, 0.1)
    _, want = _direct(om, k)
    _, g = pair_sums(om.float().cuda(), k)
    assert float(((g.cpu().double() - want).norm(dim=1) / want.norm(dim=1)).max()) < 1e-3


def test_bench_pairs_smoke(tmp_path):
    """benchmarks/bench_pairs.py at toy sizes: every implementation agrees with meanfield,
    and the result files are written."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_pairs.py"
    spec = importlib.util.spec_from_file_location("bench_pairs", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    threads = torch.get_num_threads()
    try:
        om = _spread(40, 3, seed=4).float()
        k = Riesz(1.0, 0.1)
        v, g = pair_sums(om, k)
        for got_v, got_g in (
            bench.previous_pair_pass(om, k),
            bench.torch_plain(om, 1.0, 0.01, chunk=16),
            bench.torch_symmetric(om, 1.0, 0.01),
        ):
            assert float(got_v) == pytest.approx(float(v), rel=1e-5)
            assert torch.allclose(got_g, g, rtol=1e-4, atol=1e-6 * float(g.abs().max()))
        out = tmp_path / "pairs"  # --out is the folder, the files are pairs.json, pairs.md
        args = ["--sections", "pairs,tiles", "--N", "60", "--N-other", "30", "--repeats", "1"]
        bench.main([*args, "--tiles", "16,64", "--no-keops", "--out", str(tmp_path)])
        res = json.loads(out.with_suffix(".json").read_text())
        assert set(res["pairs"]["main"]) == {
            "meanfield",
            "previous",
            "torch_plain",
            "torch_symmetric",
        }
        assert res["pairs"]["main"]["torch_symmetric"]["vs_symmetric"] == 1.0
        assert "| meanfield |" in out.with_suffix(".md").read_text()
        step = bench.scaling_one(50, 3, 1, "cpu")
        assert step["sec_per_step"] > 0 and step["peak_rss_MiB"] > 0
    finally:
        torch.set_num_threads(threads)


def test_large_replicas_take_the_tiles_and_agree_with_the_row_chunks():
    rng = np.random.default_rng(7)
    om = torch.tensor(rng.normal(size=(2, 300, 3)))
    term = Energy([PairInteraction(Riesz(1.0, 0.1), 0.7)], Ball(3, 10.0)).terms[0]
    assert term._uses_tiles(om) and not term._uses_tiles(om[:, :50])
    v, g = term.value_and_grad(om)
    assert v.shape == (2,) and g.shape == om.shape
    total, g_rows = term._pair_pass(om, True, True)  # the batched row chunks
    assert torch.allclose(v, 0.7 * total / 300**2, rtol=1e-12)
    assert torch.allclose(g, 2 * 0.7 / 300**2 * g_rows, rtol=1e-10, atol=1e-15)
    assert torch.allclose(term.grad(om)[1], term.grad(om[1]), rtol=1e-14, atol=0)


def _numpy_force(om: np.ndarray, s: float) -> np.ndarray:
    """Σ_{j≠i} ∇k(ω_i − ω_j) for k = Riesz(s), unsoftened, by a plain double loop in numpy;
    coincident pairs take the zero subgradient."""
    N = len(om)
    out = np.zeros_like(om)
    for i in range(N):
        for j in range(N):
            z = om[i] - om[j]
            r2 = float(z @ z)
            if r2 == 0.0:
                continue
            # 2κ'(r²) = −|s| r^(−s−2) (s ≠ 0), −1/r² (log)
            out[i] += (-1.0 / r2 if s == 0 else -abs(s) * r2 ** (-s / 2 - 1)) * z
    return out


@pytest.mark.parametrize("p", [1, 2, 3])
def test_coincident_pairs_give_the_fast_sum_and_a_double_loop(p, monkeypatch):
    """Issue 24: 30 duplicated particles made the tiled force 8.5 % wrong in p = 3, because
    the matrix-product distance of a twin pair rounds to ±4e-16 instead of 0 and a singular
    κ' turns the positive ones into 1e23 coefficients that cancel badly.  Every path (tiles
    of several sizes, row chunks of several sizes) now gives the zero subgradient."""
    from meanfield.fastsums import FastCoulombInteraction
    from meanfield.kernels import Coulomb

    g = torch.Generator().manual_seed(3)
    x = torch.rand(150, p, generator=g, dtype=torch.float64)
    om = torch.cat([x, x[:20]])
    N = len(om)
    k = Coulomb(p)
    want = torch.from_numpy(_numpy_force(om.numpy(), k.s))
    fast = FastCoulombInteraction(k, eps=1e-10, min_n=0).grad(om) * N**2 / 2
    assert rel_err(fast, want) < 1e-8
    for tile in (7, 64, 1024):
        _, got = pair_sums(om, k, want_value=False, tile=tile)
        assert rel_err(got, want) < 1e-9, tile
        assert rel_err(got, fast) < 1e-8, tile
    term = PairInteraction(k)
    for chunk in (1, 100, 1 << 18):  # the row-chunk path: replicas of few particles
        monkeypatch.setattr("meanfield.energy.pair.PAIR_CHUNK_ELEMENTS", chunk * N)
        got = term.grad(torch.stack([om, om]))[1] * N**2 / 2
        assert rel_err(got, want) < 1e-9, chunk
    value = term.value(om)
    assert math.isinf(float(value)) or p == 1  # −|0| = 0 in p = 1


def rel_err(a, b) -> float:
    return float((a - b).norm() / b.norm())


def test_float64_force_below_the_normal_range_is_rounded_not_refused():
    """Found by the property test of finite energies: λ = 1e-291 and two points 8e-133 apart
    give a force ~1e-423, below float64's smallest normal number.  There is no wider dtype to
    ask for, so the result is float64's rounding of it (zeros), not a NumericalError."""
    om = torch.tensor([[8.2e-133], [0.0]], dtype=torch.float64)
    k = Riesz(0.5, 0.05)
    v, g = pair_sums(om, k)
    e = Energy([PairInteraction(k, 1e-291)], Box(1, 2.0))
    grad = e.grad(om)
    assert torch.isfinite(grad).all() and float(grad.abs().max()) < 1e-307
    assert float(g.abs().max()) > 0  # the bare sums themselves are representable


# --- the range and cancellation decisions: fixed reference, fallback, centring ----------------
def _rescale_spies(monkeypatch):
    """Record the calls of the running reference (``_lower_reference``) and the outcome of
    each fixed-reference pass (``_sum_tiles`` with ``fixed_u0``: None when a sum overflowed)."""
    running, fixed, inner_ref, inner_sum = [], [], pairsum._lower_reference, pairsum._sum_tiles

    def ref(*args):
        running.append(args[2])
        return inner_ref(*args)

    def sums(*args, fixed_u0=None):
        out = inner_sum(*args, fixed_u0=fixed_u0)
        if fixed_u0 is not None:
            fixed.append(out is not None)
        return out

    monkeypatch.setattr(pairsum, "_lower_reference", ref)
    monkeypatch.setattr(pairsum, "_sum_tiles", sums)
    return running, fixed


def _row_bound(x, kernel, dtype):
    """Relative force error per row allowed by the distance product's round-off: u of the pair
    (i, j) carries at most ``roundoff_bound`` of its own norms (a length-(p + 2) dot product),
    which u^(−m) turns into m + 1 times the relative error; the worst pair of each row, × 2
    for the sums' own rounding (a row's force is dominated by its closest pairs)."""
    m = kernel.s / 2 + 1
    eps2 = kernel.softening**2
    sq = (x * x).sum(1)
    pair_sq = torch.maximum(sq[:, None], sq[None, :])
    rb = 4 * (x.shape[1] + 2) * torch.finfo(dtype).eps * (4 * pair_sq + eps2)
    u = torch.cdist(x, x) ** 2 + eps2
    u.fill_diagonal_(math.inf)
    return 2 * (m + 1) * (rb / u).max(1).values


@pytest.mark.parametrize(
    "dtype, eps", [(torch.float32, 0.1), (torch.float64, 1e-16)], ids=["float32", "float64"]
)
def test_range_skip_is_bit_for_bit_the_plain_sums(dtype, eps, monkeypatch):
    """p = 64, s = 62 on the radius-1.5 sphere (the benchmark's data): the a-priori bound
    (terms ε^(−64), 2^212 in float32 with ε = 0.1; 2^3400 in float64 with ε = 1e-16) fires,
    yet every actual term u^(−32), u ∈ [1, 9], is a normal number.  The fixed power-of-two
    reference is taken (no running reference, no overflow), and its sums are bit for bit
    those of the unscaled sums (``_needs_rescale`` forced off); both equal a float64 direct
    sum on the same points within the round-off bound of each row (``_row_bound``: ≈ 5e-3
    in float32, 1e-11 in float64; observed ~1e-5 and ~1e-14)."""
    N, p = 300, 64
    x = _sphere(N, p, 1.5, seed=11).to(dtype)
    k = Riesz(62.0, eps)
    assert pairsum._needs_rescale(pairsum.make_plan(k), float((x * x).sum(1).max()), dtype)
    running, fixed = _rescale_spies(monkeypatch)
    v, g = pair_sums(x, k, tile=128)
    assert fixed == [True] and not running
    monkeypatch.setattr(pairsum, "_needs_rescale", lambda *args: False)
    v_plain, g_plain = pair_sums(x, k, tile=128)
    assert torch.equal(g, g_plain) and torch.equal(v, v_plain)
    want_v, want_g = _direct(x.double(), k)
    rel = (g.double() - want_g).norm(dim=1) / want_g.norm(dim=1)
    bound = _row_bound(x.double(), k, dtype)
    assert bool((rel <= bound).all()), float((rel / bound).max())
    assert abs(float(v) / float(want_v) - 1) <= float(bound.max())


def _direct_log_scaled(x, kernel, scale):
    """(scale · Σ_{j≠i} 2κ'(u_ij)(ω_i − ω_j), scale · max |2κ'|) for a Riesz kernel in float64
    from explicit differences, each coefficient −|s| u^(−m) · scale formed as one exponential
    of its logarithm (u^(−m) alone may leave even float64's range)."""
    diff = x[:, None] - x[None]
    u = (diff * diff).sum(-1) + kernel.softening**2
    u.fill_diagonal_(1.0)
    m = kernel.s / 2 + 1
    c = -abs(kernel.s) * torch.exp(-m * torch.log(u) + math.log(scale))
    c.fill_diagonal_(0.0)
    return (c[..., None] * diff).sum(1), float(c.abs().max())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_range_fallback_when_the_fixed_reference_overflows(dtype, monkeypatch):
    """Data that needs the running reference: the radius-1.5 sphere and a pair at ±δ e₁ with
    u = (2δ)² + ε² far below the sphere's u ≈ 2-9, so the fixed reference's terms
    (u₀/u)^32 pass the float range (float32: ε = 0.1, δ = 0.025, (2/0.0125)^32 ≈ 2^234;
    float64: ε = 1e-16, δ = 2e-10, u ≈ 1.6e-19, (2^−28/u)^32 ≈ 2^1100).  The overflow is
    seen, the running reference reruns the sums, and the result is bit for bit the running
    reference's own (``_fixed_reference`` off); against the float64 direct sum the close
    pair's rows are within their round-off bound (``_row_bound``: the pair's own small norms
    give ≈ 1e-3 in float32) and every row within it plus the stated floor of the rescaled
    terms, N · 2^floor of the largest coefficient × the largest |ω_i − ω_j| (3), and the
    dtype's smallest normal number (the sphere rows, ≈ e^−87 in float32 and ≈ 1e−308 in
    float64 after the scale, are rounded to the dtype: the stated absolute error)."""
    N, p = 200, 64
    x = _sphere(N, p, 1.5, seed=12)
    delta, eps = (0.025, 0.1) if dtype == torch.float32 else (2e-10, 1e-16)
    _central_pair(x, -2, -1, delta, 0)
    x = x.to(dtype)
    k = Riesz(62.0, eps)
    # grad_scale brings the close pair's force (float32 ≈ e^141, float64 ≈ e^1368) into range
    scale = 1e-30 if dtype == torch.float32 else 1e-300
    running, fixed = _rescale_spies(monkeypatch)
    _, g = pair_sums(x, k, want_value=False, grad_scale=scale, tile=64)
    assert fixed == [False] and running  # overflow seen, then the running reference
    monkeypatch.setattr(pairsum, "_fixed_reference", lambda *args: None)
    _, g_running = pair_sums(x, k, want_value=False, grad_scale=scale, tile=64)
    assert torch.equal(g, g_running)
    want_g, c_max = _direct_log_scaled(x.double(), k, scale)
    floor = -100.0 if dtype == torch.float32 else -1000.0
    err = (g.double() - want_g).norm(dim=1)
    rows = want_g.norm(dim=1)
    bound = _row_bound(x.double(), k, dtype)
    assert bool((err[-2:] <= bound[-2:] * rows[-2:]).all())
    slack = N * 2.0**floor * c_max * 3.0 + torch.finfo(dtype).tiny
    assert bool((err <= bound * rows + slack).all())


@pytest.mark.parametrize(
    "dtype, offset", [(torch.float32, 1e3), (torch.float64, 1e6)], ids=["float32", "float64"]
)
def test_far_offset_is_centred_and_keeps_the_bound(dtype, offset):
    """A cloud far from the origin: the radius-1.5 sphere moved by ``offset`` along (1, …, 1).
    Uncentred, u = |a|² + |b|² − 2a·b would carry a round-off ~ 4 · 66 · eps · 4|offset|²
    (float32: ≈ 1e2, float64: ≈ 2e-1, against u ≈ 2-9: no digit left); the pair sums are
    translation invariant, so they centre (max|ω − mean|² ≈ 2.3, far below |offset|²/4)
    and keep the bound of the centred cloud (``_row_bound`` of the points minus their mean,
    against a float64 direct sum on the same points; the centring's own rounding is exact
    here, Sterbenz: each coordinate and the mean agree to a factor 2)."""
    N, p = 200, 64
    x = (_sphere(N, p, 1.5, seed=13) + offset / math.sqrt(p)).to(dtype)
    assert pairsum._centred(x) is not x
    k = Riesz(62.0, 0.1)
    v, g = pair_sums(x, k, tile=64)
    want_v, want_g = _direct(x.double(), k)
    rel = (g.double() - want_g).norm(dim=1) / want_g.norm(dim=1)
    xd = x.double()
    bound = _row_bound(xd - xd.mean(0), k, dtype)
    assert bool((rel <= bound).all()), float((rel / bound).max())
    assert abs(float(v) / float(want_v) - 1) <= float(bound.max())


def test_centring_leaves_data_near_the_origin_bit_for_bit():
    """The centring decision: a cloud whose max|ω − mean|² is not 4× below max|ω|² (the
    spheres and boxes about the origin of the other tests) is not touched, so their sums are
    the uncentred ones bit for bit; a shifted copy is centred."""
    for x in (_sphere(100, 16, 1.5, seed=1), _spread(60, 3, seed=2), _spread(60, 3, 2) + 1.0):
        assert pairsum._centred(x) is x
        assert pairsum._centred(x.float()).dtype == torch.float32
    shifted = _spread(60, 3, seed=2) + 10.0  # max|ω|² ≈ 400 against max|ω − mean|² ≈ 12
    centred = pairsum._centred(shifted)
    assert centred is not shifted and float(centred.mean(0).abs().max()) < 1e-12
    line = torch.arange(5.0)[:, None] + 1e3  # p = 1: exact differences, never centred
    assert pairsum._centred(line) is line


def test_tiled_operands_are_contiguous_full_rows():
    """Each product reads contiguous blocks: the rows of tile I of A and a (p + 2) × tile
    block of Bᵀ per tile J (the distance product), a (p + 1) × tile block of Wᵀ (the
    gradient product), and it writes a contiguous (p + 1) × tile block of the sums."""
    x = _spread(97, 5, seed=3)
    tiles = pairsum._Tiles(x, 0.01, 32)
    assert all(b.is_contiguous() and b.shape[0] == 7 for b in tiles.BT)
    assert all(b.is_contiguous() and b.shape[0] == 6 for b in tiles.WT)
    acc = tiles.new_acc()
    assert all(b.is_contiguous() for b in acc.blocks)
    assert [b.shape[1] for b in acc.blocks] == [32, 32, 32, 1]


@pytest.mark.parametrize("p", [1, 2, 3])
def test_distinct_particles_whose_squared_distance_underflows_are_refused(p):
    # 1e-200 apart, r² = 0: the pair was read as coincident, value +inf and zero force
    # (right: −log 1e-200 = 460.5 and a force of 1e200); exact twins stay the zero
    # subgradient with +inf value
    E = Energy([PairInteraction(Riesz(0.0), 0.5)], Box(p, 3.0))
    om = np.zeros((3, p))
    om[1, 0], om[2, 0] = 1e-200, 1.0
    for call in (E.value, E.grad):
        with pytest.raises(NumericalError, match="closer than ~1.5e-154"):
            call(om)
    om[1, 0] = 0.0
    assert math.isinf(float(E.value(om))) and bool(torch.isfinite(E.grad(om)).all())


@pytest.mark.parametrize("kernel", [Riesz(-1.0), Riesz(0.0)])
def test_particles_whose_squared_distances_overflow_are_refused(kernel):
    # 1e160 apart: an OverflowError from a log2 (k = −|z|) or the value −inf (log gas); at
    # 1e150 the sums are still right
    E = Energy([PairInteraction(kernel, 0.5)], Box(1, 1e200))
    with pytest.raises(NumericalError, match="overflow"):
        E.value([[0.0], [1e160]])
    want = -0.25 * 1e150 if kernel.s == -1.0 else -0.25 * math.log(1e150)  # (λ/N²) · 2 k(d)
    assert float(E.value([[0.0], [1e150]])) == pytest.approx(want, rel=1e-12)
