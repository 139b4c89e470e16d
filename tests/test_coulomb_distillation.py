"""Coulomb-regularised distillation: the Hedgehog loss as the particles' field, with repulsion.

Truths: the loss by an explicit per-sequence, per-row loop over the map's unshifted features;
its gradient by central differences and by autograd of
:func:`~meanfield.attention.learn_features.attention_cross_entropy` (the multi-head loss);
one Langevin step at beta -> inf against the gradient-descent step computed from that
autograd; the small-step limit (displacement linear in the step); the repulsion's effect on
the smallest pair distance; determinism under a seed; the lam selection against single-lam
runs with the same noise; refusals before any work.
"""

import copy
import math

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from meanfield.attention.coulomb_distillation import (  # noqa: E402
    HedgehogLossField,
    coulomb_distil_feature_maps,
    min_pair_distance,
)
from meanfield.attention.features import make_feature_map  # noqa: E402
from meanfield.attention.learn_features import (  # noqa: E402
    attention_cross_entropy,
    head_feature_map,
    record_inputs,
)
from meanfield.attention.linearize import feature_maps_of, linearize  # noqa: E402
from meanfield.attention.pretrained import (  # noqa: E402
    encode_pretrained,
    load_pretrained_classifier,
    save_tiny_bert,
)
from meanfield.domains import Ball  # noqa: E402
from meanfield.energy import Energy, UnboundTermError  # noqa: E402
from meanfield.errors import InputError, InputTypeError  # noqa: E402

TEXTS = ["a good film", "a bad film", "great story", "awful plot", "very fine", "not good"]
#: small runs on the tiny BERT (2 layers, 2 heads, d_h = 8, m = 8)
SMALL = dict(n_sequences=12, n_validation=6, n_heldout=6)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny models: a second thread only adds synchronisation
    yield


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    save_tiny_bert(folder, hidden_size=16, n_layers=2, n_heads=2, seed=0)
    model, tok = load_pretrained_classifier(folder)
    labels = [1, 0, 1, 0, 1, 0] * 5
    # lengths differ, so batches carry padding
    texts = [t + " very" * (i % 3) for i, t in enumerate(TEXTS * 5)]
    data = encode_pretrained(tok, texts, None, labels, max_length=10)
    return model, data


def _linearized(bert, kind="favor", m=8):
    model, _ = bert
    return linearize(copy.deepcopy(model), kind, n_features=m, seed=0)


def _padded_batches(seed=0, b=3, L=5, d=4):
    g = torch.Generator().manual_seed(seed)
    q = 0.8 * torch.randn(b, L, d, generator=g, dtype=torch.float64)
    k = 0.8 * torch.randn(b, L, d, generator=g, dtype=torch.float64)
    pad = torch.zeros(b, L, dtype=torch.bool)
    pad[0, 3:] = True  # a short sequence
    pad[2, 4:] = True
    return [(q, k, pad)]


def _loop_cross_entropy(fm, omega, batches):
    """The Hedgehog loss row by row from the map's unshifted features (float64)."""
    one = copy.deepcopy(fm).double()
    one.omega = omega.detach().double()
    total, rows = 0.0, 0
    for q, k, pad in batches:
        for i in range(q.shape[0]):
            n = int((~pad[i]).sum()) if pad is not None else q.shape[1]
            qi, ki = q[i, :n].double(), k[i, :n].double()
            phq, phk = one.raw_features(qi), one.raw_features(ki)
            soft = torch.softmax(qi @ ki.T / math.sqrt(qi.shape[-1]), dim=-1)
            for t in range(n):
                a_lin = phq[t] @ phk.T
                a_lin = a_lin / a_lin.sum()
                total += float(-(soft[t] * torch.log(a_lin)).sum())
                rows += 1
    return total / rows


@pytest.mark.parametrize("kind", ["favor", "porf-softplus", "softmaxfeat"])
def test_loss_equals_a_row_by_row_loop(kind):
    fm = make_feature_map(kind, 4, 6, seed=1)
    batches = _padded_batches()
    term = HedgehogLossField(fm, batches, weight=2.5).bound(4)
    omega = fm.omega.double()
    expected = 2.5 * _loop_cross_entropy(fm, omega, batches)
    assert float(term.value(omega)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("kind", ["favor", "softmaxfeat"])
def test_gradient_against_central_differences(kind):
    fm = make_feature_map(kind, 4, 6, seed=2)
    term = HedgehogLossField(fm, _padded_batches(seed=1)).bound(4)
    omega = fm.omega.double()
    grad = term.grad(omega)
    h = 1e-6  # central differences: error O(h^2) ~ 1e-12 plus round-off ~ 1e-16 / h ~ 1e-10
    for i, j in [(0, 0), (3, 1), (5, 3)]:
        e = torch.zeros_like(omega)
        e[i, j] = h
        fd = (float(term.value(omega + e)) - float(term.value(omega - e))) / (2 * h)
        assert float(grad[i, j]) == pytest.approx(fd, abs=1e-7)


def test_term_and_gradient_equal_the_multi_head_loss(bert):
    """Per head, the term is that head's share of attention_cross_entropy (mean over heads),
    and its gradient that of the multi-head loss times the number of heads."""
    model = _linearized(bert)
    rec = record_inputs(model, bert[1])
    fm = feature_maps_of(model)[1]
    omega = fm.omega.detach().double().clone().requires_grad_(True)
    loss, _ = attention_cross_entropy(fm, omega, rec[1])
    (g_multi,) = torch.autograd.grad(loss, omega)
    values = []
    for h in range(fm.num_heads):
        batches = [(q[:, h].double(), k[:, h].double(), pad) for q, k, pad in rec[1]]
        term = HedgehogLossField(head_feature_map(fm, h), batches).bound(fm.head_dim)
        values.append(float(term.value(omega[h].detach())))
        g = term.grad(omega[h].detach())
        torch.testing.assert_close(g, fm.num_heads * g_multi[h], rtol=1e-5, atol=1e-9)
    # float32 queries and keys in attention_cross_entropy: agreement to float32 round-off
    assert np.mean(values) == pytest.approx(float(loss.detach()), rel=1e-5)


def test_replicas_protocol_and_refusals():
    fm = make_feature_map("favor", 4, 6, seed=3)
    batches = _padded_batches()
    term = HedgehogLossField(fm, batches)
    with pytest.raises(UnboundTermError):
        _ = term.data
    energy = Energy([term], Ball(4, 10.0))
    omegas = torch.randn(3, 6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    values = energy.value(omegas)
    assert values.shape == (3,)
    for r in range(3):
        assert float(values[r]) == pytest.approx(float(energy.value(omegas[r])), rel=1e-13)
    assert energy.grad(omegas).shape == (3, 6, 4)
    assert term.describe() == {"feature_map": "favor", "n_queries": 12, "weight": 1.0}
    with pytest.raises(NotImplementedError):
        term.first_variation(None, None, None)
    with pytest.raises(InputError, match="one head"):
        HedgehogLossField(make_feature_map("favor", 4, 6, num_heads=2), batches)
    with pytest.raises(InputError, match="head_dim"):
        HedgehogLossField(make_feature_map("favor", 3, 6), batches)
    q, k, pad = batches[0]
    with pytest.raises(InputError, match="finite"):
        HedgehogLossField(fm, [(q * float("nan"), k, pad)])
    with pytest.raises(InputError, match="every key is padding"):
        HedgehogLossField(fm, [(q, k, torch.ones_like(pad))])
    with pytest.raises(InputError, match="weight"):
        HedgehogLossField(fm, batches, weight=0.0)


def test_langevin_step_at_zero_temperature_is_gradient_descent(bert):
    """lam = 0, no prior, beta = 1e16: one step is omega - eta N grad L (plus noise of sd
    sqrt(2 eta / beta) = 3e-9), N grad L from autograd of the multi-head loss."""
    model = _linearized(bert)
    fm = feature_maps_of(model)[0]
    omega0 = fm.omega.detach().double().clone()
    eta = 0.02
    res = coulomb_distil_feature_maps(
        model, bert[1], lam=[0.0], beta=1e16, eta=eta, n_steps=1, prior=False, **SMALL
    )
    # the training sequences: distil_feature_maps' split with the same seed
    perm = np.random.default_rng(0).permutation(len(bert[1]))
    rec = record_inputs(model, bert[1].subset(perm[: SMALL["n_sequences"]]))
    om = omega0.clone().requires_grad_(True)
    loss, _ = attention_cross_entropy(fm, om, rec[0])
    (g,) = torch.autograd.grad(loss, om)
    m, H = fm.n_features, fm.num_heads
    expected = omega0 - eta * m * H * g  # head h's loss is H times its share of the mean
    # installed as a float32 buffer: agreement to float32 round-off of |omega| ~ 3
    torch.testing.assert_close(fm.omega.double(), expected, rtol=0, atol=2e-6)
    assert res["lam_selected"] == 0.0 and res["noise_scale"] < 1e-8


def test_small_step_limit_loss_decreases_and_move_is_linear_in_eta(bert):
    """beta -> inf, lam = 0: every head's training loss decreases, and at small eta the
    displacement is eta n_steps times the starting force, to first order: halving eta
    halves the relative move (to O(t) relative, t = eta n_steps = 0.1 here)."""
    moves = {}
    for eta in (0.005, 0.0025):
        model = _linearized(bert)
        res = coulomb_distil_feature_maps(
            model, bert[1], lam=[0.0], beta=1e12, eta=eta, n_steps=20, **SMALL
        )
        for rec in res["heads"]:
            assert rec["loss_train_after"] < rec["loss_train_before"]
        moves[eta] = np.array([rec["relative_move"] for rec in res["heads"]])
    assert (moves[0.005] < 0.2).all()  # refined, not re-sampled
    ratio = moves[0.005] / moves[0.0025]
    np.testing.assert_allclose(ratio, 2.0, rtol=0.1)


@pytest.mark.slow  # three runs on the tiny BERT: about 5 s
def test_repulsion_increases_the_smallest_pair_distance(bert):
    """The same noise (one seed) for every lam: the smallest distance between two particles,
    mean over the 4 heads, grows with lam."""
    nearest = []
    for lam in (0.0, 2.0, 8.0):
        model = _linearized(bert)
        res = coulomb_distil_feature_maps(
            model, bert[1], lam=[lam], beta=1e6, eta=0.01, n_steps=40, **SMALL
        )
        before = [r["min_distance_before"] for r in res["heads"]]
        after = [r["min_distance_after"] for r in res["heads"]]
        fms = feature_maps_of(model)
        installed = [min_pair_distance(fm.omega[h]) for fm in fms for h in range(fm.num_heads)]
        np.testing.assert_allclose(installed, after, rtol=1e-5)  # the record is what is installed
        nearest.append((np.mean(before), np.mean(after)))
    assert nearest[0][0] == nearest[1][0] == nearest[2][0]  # the same start
    afters = [a for _, a in nearest]
    assert afters[0] < afters[1] < afters[2]
    assert afters[2] > nearest[0][0]  # the strongest repulsion spreads the particles


def test_selection_matches_single_lam_runs_and_is_deterministic(bert):
    grid = [0.0, 4.0]
    kw = dict(beta=1e4, eta=0.01, n_steps=10, **SMALL)
    model = _linearized(bert, "softmaxfeat")
    res = coulomb_distil_feature_maps(model, bert[1], lam=grid, **kw)
    sel = res["selection"]
    assert sel["lam"] == grid and len(sel["tv_validation"]) == 2
    assert res["lam_selected"] == grid[int(np.argmin(sel["tv_validation"]))]
    # common random numbers: the selected run is the single-lam run with that lam
    single = _linearized(bert, "softmaxfeat")
    res1 = coulomb_distil_feature_maps(single, bert[1], lam=[res["lam_selected"]], **kw)
    for a, b in zip(feature_maps_of(model), feature_maps_of(single), strict=True):
        assert torch.equal(a.omega, b.omega)
        assert a.learned
    assert res1["selection"]["tv_validation"][0] == min(sel["tv_validation"])
    # another seed: other sequences and other noise
    other = _linearized(bert, "softmaxfeat")
    coulomb_distil_feature_maps(other, bert[1], lam=[res["lam_selected"]], **{**kw, "seed": 1})
    assert not torch.equal(feature_maps_of(other)[0].omega, feature_maps_of(single)[0].omega)


def test_refusals_before_any_work(bert):
    model = _linearized(bert)
    before = [fm.omega.clone() for fm in feature_maps_of(model)]
    data = bert[1]
    cases = [
        (dict(lam=[0.0], beta=0.0), InputError, "beta"),
        (dict(lam=[-1.0]), InputError, "lam"),
        (dict(lam=[]), InputError, "lam"),
        (dict(lam=[0.0], eta=float("nan")), InputError, "eta"),
        (dict(lam=[0.0], n_steps=0), InputError, "n_steps"),
        (dict(lam=[0.0], lam_scale="ratio"), InputError, "lam_scale"),
        (dict(lam=[0.0], riesz_s=8.0), InputError, "riesz_s"),
        (dict(lam=[0.0], n_sequences=30), InputError, "n_sequences"),
        (dict(lam=[0.0], prior=1), InputTypeError, "prior"),
    ]
    for kw, err, name in cases:
        with pytest.raises(err, match=name):
            coulomb_distil_feature_maps(model, data, **{**SMALL, **kw})
    with pytest.raises(InputTypeError, match="data"):
        coulomb_distil_feature_maps(model, list(data.labels), lam=[0.0])
    with pytest.raises(InputError, match="random feature map"):
        coulomb_distil_feature_maps(_linearized(bert, "hedgehog"), data, lam=[0.0])
    with pytest.raises(InputError, match="linearized"):
        coulomb_distil_feature_maps(bert[0], data, lam=[0.0])
    for b, fm in zip(before, feature_maps_of(model), strict=True):
        assert torch.equal(b, fm.omega) and not fm.learned
