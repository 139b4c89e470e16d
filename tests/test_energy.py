import itertools
import math

import numpy as np
import pytest
import torch

import meanfield.energy as energy_mod
from meanfield.domains import Ball, Box
from meanfield.energy import (
    CallablePotential,
    CentredAlignment,
    DoubleWellPotential,
    Energy,
    LinearAlignment,
    NormalisedAlignment,
    PairInteraction,
    QuadraticPotential,
    RiskAlignment,
    target_matrix,
)
from meanfield.errors import InputError
from meanfield.features import get_feature_map
from meanfield.kernels import Coulomb, Gaussian, Quadratic, Riesz

FEATURES = ["positive", "fourier", "softplus"]


def _data(rng, n=14, d=3, classes=None):
    X = rng.normal(scale=0.5, size=(n, d))
    y = (
        rng.permutation(np.arange(n) % classes)
        if classes
        else np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    )
    return X, y


def _terms(X, y, yc, feat):
    return [
        QuadraticPotential(1.7, center=0.2),
        DoubleWellPotential(0.5),
        CallablePotential(lambda w: torch.cos(w).sum(-1)),
        LinearAlignment(X, y, feat),
        LinearAlignment(X, yc, feat),
        RiskAlignment(X, y, feat, alpha=0.7),
        RiskAlignment(X, yc, feat, alpha=1.3),
        NormalisedAlignment(X, y, feat),
        NormalisedAlignment(X, yc, feat),
        PairInteraction(Riesz(1.2), 0.3),
        PairInteraction(Riesz(0.0), 0.5),
        PairInteraction(Riesz(-1.0), 0.5),
        PairInteraction(Riesz(2.5, softening=0.3), 0.2),
        PairInteraction(Quadratic(), 1.0),
        PairInteraction(Gaussian(0.6), 2.0),
    ]


@pytest.mark.parametrize("feat", FEATURES)
def test_gradient_equals_autograd_every_term(feat, rng):
    """∇H_N (analytic) equals torch autograd of H_N to 1e-10 in float64, with replica axes
    and without (one (N, p) cloud: the alignment's pre-activation is one fused product)."""
    X, y = _data(rng)
    _, yc = _data(rng, classes=3)
    p = get_feature_map(feat).particle_dim(3)
    for term in _terms(X, y, yc, feat):
        E = Energy([term], Ball(p, 10.0))
        for shape in [(2, 9, p), (9, p)]:
            om = torch.tensor(rng.normal(size=shape), requires_grad=True)
            (auto,) = torch.autograd.grad(E.value(om).sum(), om)
            err = (auto - E.grad(om.detach())).abs().max().item()
            assert err < 1e-10, (type(term).__name__, shape, err)


@pytest.mark.parametrize("n_particles", [9, 20])  # fewer, then more particles than data (14)
def test_ratio_alignments_either_gram_side(n_particles, rng):
    """The ratio alignments use the smaller Gram (particles or data): value against the
    direct data-side formula ‖ΦᵀΦ‖_F, gradient against autograd, both sides, to 1e-10."""
    from meanfield.energy import CentredAlignment

    X, y = _data(rng)
    for cls in (NormalisedAlignment, CentredAlignment, RiskAlignment):
        term = cls(X, y, "positive")
        E = Energy([term], Ball(3, 10.0))
        om = torch.tensor(rng.normal(size=(n_particles, 3)), requires_grad=True)
        value = float(E.value(om.detach()))
        term.bind(3, torch.float64, om.device)
        phi, _ = term.features(om.detach())
        G = phi.T @ phi  # (n, n) data-side Gram, the definition
        if cls is not RiskAlignment:
            S = phi @ term.U
            direct = -(S * S * term.w).sum() / ((G * G).sum().sqrt() * term._T_norm())
            assert abs(value - float(direct)) < 1e-10, cls.__name__
        (auto,) = torch.autograd.grad(E.value(om), om)
        err = (auto - E.grad(om.detach())).abs().max().item()
        assert err < 1e-10, (cls.__name__, err)


def _brute_force(term, om, X, T, feat):
    """Direct evaluation of THEORY §2 with explicit loops over data pairs and particles."""
    f = get_feature_map(feat)
    P = f.evaluate(torch.tensor(X), om).numpy()  # (N, n)
    N, n = P.shape
    if isinstance(term, LinearAlignment):
        a = [
            sum(T[j, k] * P[i, j] * P[i, k] for j in range(n) for k in range(n) if j != k)
            / (n * (n - 1))
            for i in range(N)
        ]
        return -np.mean(a)
    if isinstance(term, RiskAlignment):
        total = 0.0
        for j, k in itertools.product(range(n), range(n)):
            # (αT − K)² expanded, particle diagonal left out of the K² pair sum
            K2 = (
                sum(
                    P[i, j] * P[i, k] * P[l, j] * P[l, k]
                    for i in range(N)
                    for l in range(N)
                    if i != l
                )
                / N**2
            )
            K = P[:, j] @ P[:, k] / N
            total += term.alpha**2 * T[j, k] ** 2 - 2 * term.alpha * T[j, k] * K + K2
        return total / (2 * n**2)
    K = P.T @ P / N
    return -(K * T).sum() / (np.linalg.norm(K) * np.linalg.norm(T))


@pytest.mark.parametrize("feat", FEATURES)
@pytest.mark.parametrize("cls", [LinearAlignment, RiskAlignment, NormalisedAlignment])
@pytest.mark.parametrize("classes", [None, 3])
def test_alignment_values_match_the_definition(feat, cls, classes, rng):
    X, y = _data(rng, n=6, classes=classes)
    T = target_matrix(y)
    # T has unit diagonal and the stated off-diagonal values
    assert np.allclose(np.diag(T), 1)
    if classes:
        assert np.allclose(T[np.not_equal.outer(y, y)], -1 / (classes - 1))
    term = cls(X, y, feat)
    p = get_feature_map(feat).particle_dim(3)
    E = Energy([term], Box(p, 10.0))
    om = torch.tensor(rng.normal(size=(4, p)))
    assert E.value(om).item() == pytest.approx(_brute_force(term, om, X, T, feat), rel=1e-10)


def test_pair_interaction_matches_double_loop(rng):
    om = torch.tensor(rng.normal(size=(7, 2)))
    k = Riesz(0.7)
    want = sum(k(om[i] - om[j]) for i in range(7) for j in range(7) if i != j) * 0.4 / 49
    E = Energy([PairInteraction(k, 0.4)], Box(2, 5.0))
    assert E.value(om).item() == pytest.approx(want.item(), rel=1e-12)


@pytest.mark.parametrize("p", [2, 6])
def test_chunked_pair_sums_equal_one_block(p, rng, monkeypatch):
    """Chunking (and, in p ≥ 2, the matrix-product distances) changes nothing but round-off."""
    om = torch.tensor(rng.normal(size=(3, 50, p)))
    E = Energy([PairInteraction(Riesz(0.5, 0.05), 1.0)], Ball(p, 10.0))
    v1, g1 = E.value(om), E.grad(om)
    monkeypatch.setattr(energy_mod.pair, "PAIR_CHUNK_ELEMENTS", 64)
    assert len(E.terms[0]._chunks(50, p)) > 5
    v2, g2 = E.value(om), E.grad(om)
    assert torch.allclose(v1, v2, rtol=1e-12) and torch.allclose(g1, g2, rtol=1e-10, atol=1e-12)
    # direct differences vs the matrix-product path on the same points
    diff = om[..., :, None, :] - om[..., None, :, :]
    r2 = (diff**2).sum(-1)
    eye = torch.eye(50, dtype=torch.bool)
    c = torch.where(eye, 0.0, E.terms[0].kernel.grad_coeff_sq(r2))
    direct = (c[..., None] * diff).sum(-2) * 2 / 50**2
    assert torch.allclose(g1, direct, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("kernel", [Riesz(0.0), Riesz(-1.0), Riesz(1.0, 0.1), Quadratic()])
def test_masked_pair_blocks_equal_the_in_place_ones(kernel, p, rng, monkeypatch):
    """The row blocks a compiled trajectory traces (the i = j entries masked, not written in
    place; explicit differences in any p) give the eager pair sums to round-off, chunk
    offsets included (two blocks of 7 rows here): values and gradients to 1e-13 relative, a
    few ulps of sums of 14 terms (in p = 2 the eager matrix-product distances carry
    ~1e-16 |ω|²/|z|², here |z| ~ |ω| ~ 1)."""
    om = torch.tensor(rng.normal(size=(3, 14, p)))
    term = PairInteraction(kernel, 0.5)
    monkeypatch.setattr(energy_mod.pair, "PAIR_CHUNK_ELEMENTS", 7 * 14)
    assert term._chunks(14, p) == [(0, 7), (7, 14)]
    value, grad = term._pair_pass(om, True, True)
    sq = (om * om).sum(-1)
    for explicit in (False, True):  # the eager distances, or the differences a trace takes
        masked_value, masked_grad = 0.0, []
        for s, e in term._chunks(14, p):
            block = om[..., s:e, :]
            r2, diff = term._block_r2(block, om, sq[..., s:e], sq)
            if explicit:
                diff = block.unsqueeze(-2) - om.unsqueeze(-3)
                r2 = (diff * diff).sum(-1)
            v, g = term._masked_block(r2, diff, block, om, s, True, True)
            masked_value, masked_grad = masked_value + v, [*masked_grad, g]
        torch.testing.assert_close(masked_value, value, rtol=1e-13, atol=1e-13)
        torch.testing.assert_close(torch.cat(masked_grad, -2), grad, rtol=1e-13, atol=1e-13)
    assert value.abs().min() > 0.1 and grad.abs().max() > 0.1  # not a comparison of zeros


def test_first_variation_is_the_particle_force(rng):
    """N ∇_{ω_i} H_N = ∇_ω δE/δμ[μ_N without i](ω_i) for U-statistic terms (1/N weights)."""
    X, y = _data(rng, n=10)
    for feat in FEATURES:
        p = get_feature_map(feat).particle_dim(3)
        terms = [
            QuadraticPotential(),
            LinearAlignment(X, y, feat),
            RiskAlignment(X, y, feat),
            PairInteraction(Riesz(0.5), 0.3),
        ]
        E = Energy(terms, Ball(p, 10.0))
        N = 6
        om = torch.tensor(rng.normal(size=(N, p)))
        force = E.drift(om)
        for i in range(N):
            others = torch.cat([om[:i], om[i + 1 :]])
            at = om[i : i + 1].clone().requires_grad_(True)
            fv = E.first_variation(at, others, np.full(N - 1, 1.0 / N))
            (g,) = torch.autograd.grad(fv.sum(), at)
            assert torch.allclose(g[0], force[i], atol=1e-10), feat


def test_first_variation_normalised_alignment(rng):
    """The ratio form keeps the diagonal: N ∇_i H_N = ∇ δE/δμ[μ_N](ω_i) exactly."""
    X, y = _data(rng, n=10, classes=3)
    E = Energy([NormalisedAlignment(X, y, "softplus")], Ball(3, 10.0))
    om = torch.tensor(rng.normal(size=(5, 3)))
    at = om.clone().requires_grad_(True)
    fv = E.first_variation(at, om, np.full(5, 0.2))
    (g,) = torch.autograd.grad(fv.sum(), at)
    assert torch.allclose(g, E.drift(om), atol=1e-10)


def test_random_batch_is_unbiased(rng):
    # the mean of M random-batch gradients has standard error sd/√M per entry; 5 SE bound
    om = torch.tensor(rng.normal(size=(23, 2)))  # 23 = 5·4 + 3: a remainder batch too
    term = PairInteraction(Riesz(-0.5), 1.0)
    E = Energy([term], Box(2, 10.0))
    exact = E.grad(om)
    gen = torch.Generator().manual_seed(0)
    draws = torch.stack([term.grad_random_batch(om, 4, gen) for _ in range(4000)])
    se = draws.std(0) / math.sqrt(len(draws))
    assert ((draws.mean(0) - exact).abs() <= 5 * se + 1e-12).all()


def test_data_subset_is_the_same_energy_on_fewer_rows(rng):
    X, y = _data(rng, n=12)
    term = LinearAlignment(X, y, "positive")
    E = Energy([term], Ball(3, 5.0))
    idx = np.array([0, 3, 5, 7, 8])
    sub = Energy([LinearAlignment(X[idx], y[idx], "positive")], Ball(3, 5.0))
    om = torch.tensor(rng.normal(size=(4, 3)))
    assert torch.allclose(E.drift(om, data_index=idx), sub.drift(om))


@pytest.mark.parametrize("feat", FEATURES)
@pytest.mark.parametrize(
    "cls", [LinearAlignment, RiskAlignment, NormalisedAlignment, CentredAlignment]
)
@pytest.mark.parametrize("classes", [None, 3])
def test_data_subset_indexes_the_bound_rows(feat, cls, classes, rng):
    """A mini-batch indexes the parent's lifted rows (no new lift): bit for bit the term built
    on those rows, for index arrays, lists and boolean masks, binary labels and classes."""
    X, y = _data(rng, n=15, classes=classes)
    p = get_feature_map(feat).particle_dim(3)
    (term,) = Energy([cls(X, y, feat)], Ball(p, 5.0)).terms
    om = torch.tensor(rng.normal(size=(2, 6, p)))
    idx = np.arange(15)[rng.permutation(15)[:9]]
    for index in (idx, idx.tolist(), np.isin(np.arange(15), idx)):
        rows = np.arange(15)[index]
        if classes:
            assert len(np.unique(y[rows])) == classes  # same target factors as the parent
        (fresh,) = Energy([cls(X[rows], y[rows], feat)], Ball(p, 5.0)).terms
        sub = term.subset_data(index)
        assert torch.equal(sub.value(om), fresh.value(om))
        assert torch.equal(sub.grad(om), fresh.grad(om))


@pytest.mark.parametrize("feat", FEATURES)
def test_scaled_profile_is_the_profile(feat):
    fmap = get_feature_map(feat)
    z = torch.linspace(-3.0, 3.0, 13, dtype=torch.float64)
    G, D, cg, cd = fmap.g_and_dg_scaled(z.clone())
    g, dg = fmap.g_and_dg(z)
    assert torch.allclose(cg * G, g, rtol=1e-15, atol=0)
    assert torch.allclose(cd * D, dg, rtol=1e-15, atol=1e-16)


def test_float32_runs_and_agrees(rng):
    X, y = _data(rng)
    terms = [LinearAlignment(X, y), PairInteraction(Coulomb(3, 0.1), 0.1)]
    E64 = Energy(terms, Ball(3, 5.0))
    E32 = Energy(terms, Ball(3, 5.0), dtype=torch.float32)
    om = torch.tensor(rng.normal(size=(30, 3)))
    assert E32.grad(om).dtype == torch.float32
    assert torch.allclose(E32.grad(om).double(), E64.grad(om), rtol=1e-4, atol=1e-6)


def test_bad_inputs(rng):
    X, y = _data(rng)
    with pytest.raises(ValueError, match="X contains 1 non-finite"):
        Xn = X.copy()
        Xn[0, 0] = np.nan
        LinearAlignment(Xn, y)
    with pytest.raises(ValueError, match="X must be a 2-dimensional"):
        LinearAlignment(X[:, 0], y)
    with pytest.raises(ValueError, match="one label per row"):
        LinearAlignment(X, y[:-1])
    with pytest.raises(ValueError, match="at least 2 classes"):
        LinearAlignment(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="binary labels"):
        LinearAlignment(X, np.linspace(0, 1, len(X)))
    with pytest.raises(ValueError, match="needs particles of dimension p=4"):
        Energy([LinearAlignment(X, y, "fourier")], Ball(3, 1.0))
    with pytest.raises(ValueError, match="not integrable"):
        Energy([PairInteraction(Riesz(2.0), 1.0)], Ball(2, 1.0))
    with pytest.raises(ValueError, match="lam"):
        PairInteraction(Riesz(0.0), -1.0)
    with pytest.raises(ValueError, match="shape"):
        Energy([QuadraticPotential()], Ball(2, 1.0)).value(torch.zeros(5, 3))


def test_bound_gives_a_bound_copy_and_leaves_the_term_unbound(rng):
    """One step to a usable term: ``bound`` returns a bound copy; the term itself is unchanged
    (still refused by name), so two bound copies never share (or rebind) each other's tensors."""
    from meanfield.energy import UnboundTermError

    X, y = _data(rng, d=2)
    term = LinearAlignment(X, y)
    b64, b32 = term.bound(2), term.bound(2, torch.float32)
    assert b64 is not term and b32 is not b64
    assert b64.U.dtype == torch.float64 and b32.U.dtype == torch.float32
    with pytest.raises(UnboundTermError, match="term.bound"):
        term.U  # noqa: B018
    om = torch.tensor(rng.normal(size=(5, 2)))
    # the bound copy is the term an Energy binds: the same value to round-off (bitwise here)
    assert torch.equal(b64.value(om), Energy([term], Box(2, 3.0)).value(om))
    with pytest.raises(ValueError, match="dimension d=2"):
        term.bound(3)


@pytest.mark.parametrize("use", ["value", "grad", "value_and_grad", "first_variation", "batch"])
def test_an_unbound_pair_term_refuses_a_kernel_not_integrable_in_its_dimension(use):
    """A pair term needs no binding, so it checks the dimension where it is used, as
    ``Energy`` (bind) does: Riesz s = 1 is not integrable in R^1 (E(μ) = +∞ for every μ with
    a density), and a finite H_N or field would be silently wrong."""
    term = PairInteraction(Riesz(1.0), 0.5)
    om = torch.tensor([[0.0], [1.0], [3.0]], dtype=torch.float64)
    calls = {
        "value": lambda: term.value(om),
        "grad": lambda: term.grad(om),
        "value_and_grad": lambda: term.value_and_grad(om),
        "first_variation": lambda: term.first_variation(om, om, torch.ones(3).double() / 3),
        "batch": lambda: term.grad_random_batch(om, 2, torch.Generator().manual_seed(0)),
    }
    with pytest.raises(ValueError, match="not integrable in dimension p=1"):
        calls[use]()
    with pytest.raises(ValueError, match="not integrable in dimension p=1"):
        Energy([term], Box(1, 4.0))
    assert torch.isfinite(term.value(torch.cat([om, om], -1)))  # s = 1 < p = 2: integrable


def test_an_atom_of_zero_mass_adds_nothing_to_the_first_variation():
    # δE/δμ of μ = δ₂ at ω = 0 for V = ω²/2 and the log gas (λ = 1/2): V(0) + 2λ k(2) =
    # −log 2, also with a massless atom on the target (0 · k(0) = 0 · inf was NaN), and the
    # zero measure's pair part is 0
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 3.0))
    at = torch.zeros(1, 1, dtype=torch.float64)
    got = E.first_variation(at, torch.tensor([[0.0], [2.0]]).double(), torch.tensor([0.0, 1.0]))
    assert float(got[0]) == pytest.approx(-math.log(2.0), abs=1e-15)
    none = E.first_variation(at, torch.zeros(1, 1).double(), torch.zeros(1).double())
    assert float(none[0]) == 0.0


def test_an_energy_of_no_particles_is_refused_by_name():
    # H_N of N = 0 is not defined (the pair term divides by N²: it was a ZeroDivisionError,
    # and the potential a NaN mean); simulate already refused it the same way
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(2, 3.0))
    for call in (E.value, E.grad, E.drift):
        for shape in [(0, 2), (3, 0, 2)]:
            with pytest.raises(InputError, match="N \\(number of particles\\)"):
                call(np.zeros(shape))
