"""Tokenizer, Transformer classifier and Phases A/B (meanfield.attention)."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from meanfield.attention import data as D
from meanfield.attention.linear import ATTENTION_KINDS
from meanfield.attention.model import TransformerClassifier

tokenizers = pytest.importorskip("tokenizers")

from meanfield.attention import phases as P  # noqa: E402
from meanfield.attention.tokenizer import PAD_ID, TextTokenizer  # noqa: E402

FIX = Path(__file__).parent / "fixtures" / "nlp"


@pytest.fixture(autouse=True)
def _one_thread():
    # these tensors are tiny: a second thread only adds synchronisation, which on the shared
    # 2-core machine (and under load) costs more than it saves
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="module")
def sst():
    tr = D.load_split("sst2", "train", FIX)
    va = D.load_split("sst2", "validation", FIX)
    tok = TextTokenizer.train(tr.text_a, vocab_size=120, min_frequency=1)
    return tok, tr, va


# -- tokenizer ----------------------------------------------------------------------------
def test_tokenizer_single_and_pair(sst, tmp_path):
    tok, tr, _ = sst
    enc = tok.encode(tr.text_a[:3], max_length=12)
    ids, mask, seg, lengths = (
        enc["input_ids"],
        enc["padding_mask"],
        enc["segment_ids"],
        enc["lengths"],
    )
    assert ids.shape == (3, 12) and ids.dtype == np.int64
    assert np.all(ids[:, 0] == 2)  # [CLS]
    for i, n in enumerate(lengths):
        assert ids[i, n - 1] == 3  # [SEP]
        assert np.all(ids[i, n:] == PAD_ID) and np.all(mask[i, n:]) and not mask[i, :n].any()
    assert not seg.any()
    pair = tok.encode(["good film"], ["dull story"], max_length=32)
    n = pair["lengths"][0]
    seg_b = pair["segment_ids"][0, :n]
    n_b = tok.encode(["dull story"], max_length=32)["lengths"][0] - 1  # pieces + [SEP]
    assert list(seg_b) == [0] * (n - n_b) + [1] * n_b
    short = tok.encode(["a " * 50], max_length=5)
    assert short["lengths"][0] == 5
    path = tmp_path / "tok.json"
    tok.save(path)
    again = TextTokenizer.load(path)
    assert np.array_equal(
        again.encode(tr.text_a, max_length=16)["input_ids"],
        tok.encode(tr.text_a, max_length=16)["input_ids"],
    )
    # characters never seen in training map to [UNK]
    assert 1 in tok.encode(["\u0416"], max_length=5)["input_ids"][0]


def test_tokenizer_errors(sst, tmp_path):
    tok, _, _ = sst
    with pytest.raises(ValueError, match="vocab_size"):
        TextTokenizer.train(["a b"], vocab_size=3)
    with pytest.raises(ValueError, match="texts is empty"):
        TextTokenizer.train([], vocab_size=100)
    with pytest.raises(ValueError, match="max_length"):
        tok.encode(["a"], ["b"], max_length=4)
    with pytest.raises(ValueError, match="text_b must have length 1"):
        tok.encode(["a"], ["b", "c"])
    with pytest.raises(FileNotFoundError, match="tokenizer file not found"):
        TextTokenizer.load(tmp_path / "missing.json")


# -- model ----------------------------------------------------------------------------------
@pytest.mark.parametrize("attention", ATTENTION_KINDS)
def test_model_shapes_and_padding_invariance(attention):
    m = TransformerClassifier(
        50,
        attention=attention,
        d_model=16,
        n_heads=2,
        n_layers=2,
        d_ff=32,
        max_length=20,
        n_features=8,
        seed=0,
    ).eval()
    ids = torch.tensor([[2, 7, 9, 11, 3], [2, 5, 3, 0, 0]])
    wide = torch.cat([ids, torch.zeros(2, 6, dtype=torch.long)], dim=1)
    with torch.no_grad():
        a = m(ids)
        b = m(wide)
    assert a.shape == (2, 2)
    assert torch.allclose(a, b, atol=1e-5)
    keys = m.pooled_keys(ids)
    assert len(keys) == 2 and keys[0].shape == (2, 2, 8)


def test_model_pairs_seeds_and_buffers():
    m1 = TransformerClassifier(
        40,
        pair=True,
        d_model=16,
        n_heads=2,
        n_layers=2,
        d_ff=16,
        max_length=10,
        n_features=4,
        seed=3,
    )
    m2 = TransformerClassifier(
        40,
        pair=True,
        d_model=16,
        n_heads=2,
        n_layers=2,
        d_ff=16,
        max_length=10,
        n_features=4,
        seed=3,
    )
    for (n1, p1), (_, p2) in zip(m1.state_dict().items(), m2.state_dict().items(), strict=True):
        if torch.is_tensor(p1):
            assert torch.equal(p1, p2), n1
    fms = m1.feature_maps()
    assert not torch.equal(fms[0].omega, fms[1].omega)  # one Omega per layer
    names = [n for n, _ in m1.named_parameters()]
    assert not any("omega" in n for n in names)
    ids = torch.tensor([[2, 5, 3, 6, 3]])
    seg = torch.tensor([[0, 0, 0, 1, 1]])
    assert not torch.allclose(m1.eval()(ids, segment_ids=seg), m1(ids))


def test_model_errors():
    with pytest.raises(ValueError, match="unknown attention"):
        TransformerClassifier(10, attention="rff")
    with pytest.raises(ValueError, match="vocab_size"):
        TransformerClassifier(2)
    with pytest.raises(ValueError, match="divisible by n_heads"):
        TransformerClassifier(10, d_model=10, n_heads=3)
    with pytest.raises(ValueError, match="n_features"):
        TransformerClassifier(10, d_model=8, n_heads=2, n_features=0)
    m = TransformerClassifier(10, d_model=8, n_heads=2, n_layers=1, max_length=4)
    with pytest.raises(ValueError, match="exceeds max_length = 4"):
        m(torch.ones(1, 6, dtype=torch.long))


# -- phases ----------------------------------------------------------------------------------
def _small_model(tok, attention="favor", seed=0):
    return TransformerClassifier(
        tok.vocab_size,
        attention=attention,
        d_model=16,
        n_heads=2,
        n_layers=2,
        d_ff=32,
        max_length=24,
        n_features=8,
        seed=seed,
    )


def test_phase_b_trains_everything_but_omega(sst):
    tok, tr, va = sst
    data = P.encode(tok, tr, 24)
    model = _small_model(tok)
    omegas = [fm.omega.clone() for fm in model.feature_maps()]
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    info = P.phase_b(model, data, epochs=6, batch_size=16, lr=5e-3, seed=0)
    assert info["steps"] == 18
    assert info["final_loss"] < info["losses"][0]
    for before, fm in zip(omegas, model.feature_maps(), strict=True):
        assert torch.equal(before, fm.omega)
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, params[n])]
    assert "blocks.0.attn.q_proj.weight" in changed and "head.weight" in changed
    probs = P.predict_proba(model, P.encode(tok, va, 24))
    assert probs.shape == (16, 2) and np.allclose(probs.sum(1), 1)


def test_alignment_diagnostic_equals_the_energy_normalised_alignment():
    """attention_kernel_alignment of FAVOR+ is -NormalisedAlignment.value of the package energy
    on the scaled representations (the m^(-1/2) factor cancels in the ratio)."""
    from meanfield.attention.features import make_feature_map
    from meanfield.domains import Ball
    from meanfield.energy import Energy, NormalisedAlignment

    rng = np.random.default_rng(0)
    d = 8
    X = rng.standard_normal((30, d)) * 0.5
    y = np.where(rng.random(30) < 0.5, -1.0, 1.0)
    fm = make_feature_map("favor", d, 16, seed=0)
    ours = P.attention_kernel_alignment(fm, X, y)
    energy = Energy([NormalisedAlignment(X / d**0.25, y, feature="positive")], domain=Ball(d, 50))
    ref = -float(energy.value(fm.omega.double()))
    assert ours == pytest.approx(ref, rel=1e-10)


def test_phase_a_uses_the_package_energy_and_dynamics(sst, monkeypatch):
    import meanfield.particles as particles
    from meanfield.energy import Energy, NormalisedAlignment, PairInteraction
    from meanfield.kernels import Riesz

    tok, tr, _ = sst
    data = P.encode(tok, tr, 24)
    model = _small_model(tok)
    P.train(model, data, epochs=2, batch_size=16, lr=5e-3, seed=0)  # brief warm-up
    calls = []
    real = particles.simulate

    def spy(energy, omega0, **kw):
        calls.append((energy, omega0.clone(), kw))
        return real(energy, omega0, **kw)

    monkeypatch.setattr(particles, "simulate", spy)
    before = [fm.omega.clone() for fm in model.feature_maps()]
    res = P.phase_a(model, data, n_align=24, n_heldout=24, n_steps=60, seed=0)
    assert len(calls) == 2  # one Langevin run per layer
    for (energy, omega0, kw), b, fm in zip(calls, before, model.feature_maps(), strict=True):
        assert isinstance(energy, Energy)
        kinds = [type(t) for t in energy.terms]
        assert kinds == [NormalisedAlignment, PairInteraction]
        pair = energy.terms[1]
        assert isinstance(pair.kernel, Riesz) and pair.kernel.s == model.head_dim - 2
        assert energy.terms[0].n == 24 * 2  # n_align sequences x heads
        assert torch.allclose(omega0, b.double())  # starts from the vanilla particles
        assert kw["regime"] == "mean-field"
        assert fm.learned and not torch.equal(fm.omega, b)
        radius = 2 * math.sqrt(model.head_dim)
        assert torch.all(fm.omega.double().norm(dim=1) <= radius + 1e-4)
    assert res.seconds > 0 and len(res.eta) == 2


@pytest.mark.parametrize("attention", ["favor", "porf-softplus", "softmaxfeat"])
def test_phase_a_raises_heldout_alignment(attention, monkeypatch):
    """On class-structured representations, Phase A raises the alignment of the attention
    kernel with the labels on *held-out* sequences (fresh draws) over the vanilla features.

    The representations are synthetic (two Gaussian classes whose means differ along one
    direction, at the scale of real pooled keys), so the test is about Phase A, not about
    how well a tiny model learned; the study measures the same quantity on real data.
    """
    rng = np.random.default_rng(0)
    d, heads = 8, 2
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)

    def fake_reps(model, data, batch_size=256):
        y = np.where(data.labels.numpy() > 0, 1.0, -1.0)
        n = len(y)
        r = 0.3 * rng.standard_normal((n, heads, d)) + 0.25 * y[:, None, None] * direction
        return [r / d**0.25 for _ in range(len(model.blocks))]

    monkeypatch.setattr(P, "sequence_representations", fake_reps)
    n = 600
    labels = torch.as_tensor(rng.integers(0, 2, n))
    ids = torch.full((n, 4), 5, dtype=torch.long)
    data = P.EncodedData(
        ids, torch.zeros_like(ids), torch.zeros(n, 4, dtype=torch.bool), torch.full((n,), 4), labels
    )
    model = TransformerClassifier(
        20,
        attention=attention,
        d_model=d * heads,
        n_heads=heads,
        n_layers=1,
        n_features=16,
        max_length=4,
        seed=0,
    )
    res = P.phase_a(model, data, n_align=300, n_heldout=300, n_steps=200, seed=0)
    assert res.align_train_after[0] > res.align_train_before[0]
    assert res.align_heldout_after[0] > 1.5 * res.align_heldout_before[0]


def test_phase_a_bad_arguments(sst):
    tok, tr, _ = sst
    data = P.encode(tok, tr, 24)
    with pytest.raises(ValueError, match="Phase A needs a feature map"):
        P.phase_a(_small_model(tok, "softmax"), data)
    model = _small_model(tok)
    with pytest.raises(ValueError, match="n_align \\+ n_heldout must be <= len"):
        P.phase_a(model, data, n_align=40, n_heldout=20)
    with pytest.raises(ValueError, match="step_fraction must be in"):
        P.phase_a(model, data, n_align=8, n_heldout=8, step_fraction=2.0)
    with pytest.raises(ValueError, match="alignment"):
        P.phase_a(model, data, n_align=8, n_heldout=8, alignment="risk")
    with pytest.raises(ValueError, match="epochs"):
        P.train(model, data, epochs=0)
