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
def _small_model(tok, attention="favor", seed=0, n_features=8):
    return TransformerClassifier(
        tok.vocab_size,
        attention=attention,
        d_model=16,
        n_heads=2,
        n_layers=2,
        d_ff=32,
        max_length=24,
        n_features=n_features,
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
    assert np.mean(info["losses"][-6:]) < np.mean(info["losses"][:6])
    for before, fm in zip(omegas, model.feature_maps(), strict=True):
        assert torch.equal(before, fm.omega)
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, params[n])]
    assert "blocks.0.attn.in_proj_weight" in changed and "head.weight" in changed
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


def test_train_early_stopping_restores_the_best_parameters(sst, monkeypatch):
    """Stops after `patience` evaluations without improvement and restores the parameters of
    the best one (a scripted validation loss makes the stopping point exact)."""
    from meanfield.attention import training

    tok, tr, va = sst
    data, val = P.encode(tok, tr, 24), P.encode(tok, va, 24)
    model = _small_model(tok)
    script = iter([1.0, 0.8, 0.9, 0.85, 0.7])
    snapshots = []

    def fake_validation_loss(m, d):
        snapshots.append({k: v.clone() for k, v in m.state_dict().items() if torch.is_tensor(v)})
        return next(script), 0.5

    monkeypatch.setattr(training, "validation_loss", fake_validation_loss)
    info = P.train(
        model, data, validation=val, max_epochs=50, patience=2, eval_every=0.5, lr=5e-3, seed=0
    )
    assert info["stopped_early"] and len(info["history"]) == 4  # 0.9, 0.85 do not improve
    assert info["best_val_loss"] == 0.8 and info["best_epoch"] == info["history"][1][0]
    best = snapshots[1]
    for k, v in model.state_dict().items():
        if torch.is_tensor(v):
            assert torch.equal(v, best[k]), k
    assert info["steps"] == 4 * round(0.5 * math.ceil(len(data) / 32))


def test_validation_split_is_stratified_and_seeded(sst):
    tok, tr, _ = sst
    data = P.encode(tok, tr, 24)
    a, b = P.split_validation(data, 0.25, seed=3)
    a2, b2 = P.split_validation(data, 0.25, seed=3)
    assert len(a) + len(b) == len(data) and torch.equal(b.labels, b2.labels)
    for c in (0, 1):
        n_c = int((data.labels == c).sum())
        assert int((b.labels == c).sum()) == max(1, round(0.25 * n_c))
    with pytest.raises(ValueError, match="fraction must be in"):
        P.split_validation(data, 0.7, seed=0)


@pytest.fixture(scope="module")
def warmed(sst):
    tok, tr, _ = sst
    data = P.encode(tok, tr, 24)
    model = _small_model(tok)
    P.train(model, data, epochs=3, batch_size=16, lr=5e-3, seed=0)
    return model, data


def test_phase_a_uses_the_package_energy_and_dynamics(warmed, monkeypatch):
    """One projected-Langevin run per layer on the package Energy: centred alignment, the
    prior confinement |w|^2/2 (as E/gamma at beta = gamma) and a Riesz s = 1 repulsion."""
    import copy

    import meanfield.dynamics.langevin as particles
    from meanfield.energy import CentredAlignment, Energy, PairInteraction, QuadraticPotential
    from meanfield.kernels import Riesz

    model = copy.deepcopy(warmed[0])
    data = warmed[1]
    calls = []
    real = particles.simulate

    def spy(energy, omega0, **kw):
        calls.append((energy, omega0.clone(), kw))
        return real(energy, omega0, **kw)

    monkeypatch.setattr(particles, "simulate", spy)
    before = [fm.omega.clone() for fm in model.feature_maps()]
    res = P.phase_a(model, data, n_align=24, n_heldout=16, n_steps=40, seed=0)
    assert len(calls) == 2  # one Langevin run per layer
    for layer, (energy, omega0, kw) in enumerate(calls):
        assert isinstance(energy, Energy)
        kinds = [type(t) for t in energy.terms]
        assert kinds == [CentredAlignment, QuadraticPotential, PairInteraction]
        gamma = res.gamma[layer]
        assert energy.terms[1].strength == pytest.approx(1.0 / gamma)
        assert kw["beta"] == pytest.approx(gamma) and kw["eta"] == pytest.approx(0.01 * gamma)
        assert isinstance(energy.terms[2].kernel, Riesz) and energy.terms[2].kernel.s == 1.0
        assert energy.terms[0].n == 24 * model.config["n_heads"]  # pooled keys x heads
        assert torch.allclose(omega0, before[layer].double())  # starts from vanilla Omega
        assert kw["regime"] == "mean-field"
        fm = model.feature_maps()[layer]
        assert fm.learned and not torch.equal(fm.omega, before[layer])
    assert res.seconds > 0 and len(res.eta) == 2
    summary = res.summary()
    assert set(summary["layers"]) >= {"row_norm_after", "force_ratio_after", "tv_to_softmax_after"}


@pytest.mark.parametrize("attention", ["favor", "porf-softplus", "softmaxfeat"])
def test_phase_a_keeps_the_prior_scale_and_an_active_repulsion(sst, attention):
    """Defaults: mean |omega| stays within 20 % of the prior's E|N(0, I)| (the Gibbs law of
    the confinement alone *is* the prior), no row on the boundary, and the repulsive force
    is a non-negligible fraction of the alignment force before and after the run."""
    from meanfield.attention.features import chi_mean

    tok, tr, _ = sst
    data = P.encode(tok, tr, 24)
    model = _small_model(tok, attention, n_features=32)
    P.train(model, data, epochs=2, batch_size=16, lr=5e-3, seed=0)
    res = P.phase_a(model, data, n_align=24, n_heldout=16, n_steps=300, seed=1)
    prior = chi_mean(model.head_dim)
    for layer, fm in enumerate(model.feature_maps()):
        mean_norm = float(fm.omega.double().norm(dim=1).mean())
        # 32 rows: the sample mean of chi_8 has sd ~0.7/sqrt(32) = 0.12, i.e. 4.5 % of 2.74;
        # measured (3 kinds x 2 seeds x 2 layers): at most 11 % above the prior
        assert abs(mean_norm / prior - 1) < 0.2, (layer, mean_norm, prior)
        assert res.frac_on_boundary[layer] == 0.0
        assert res.force_ratio_before[layer] == pytest.approx(0.25)  # the calibration
        assert res.force_ratio_after[layer] > 0.02


def test_changing_lambda_changes_omega(warmed):
    """Same seed (same noise), only lam differs: a different Omega, and a stronger repulsion
    spreads the particles (larger mean nearest-neighbour distance)."""
    import copy

    out = {}
    for lam in (0.0, 20.0):
        model = copy.deepcopy(warmed[0])
        P.phase_a(model, warmed[1], n_align=24, n_heldout=16, n_steps=100, lam=lam, seed=0)
        out[lam] = model.feature_maps()[0].omega.double()
    assert not torch.allclose(out[0.0], out[20.0])

    def nn_dist(om):
        d = torch.cdist(om, om) + torch.eye(len(om)) * 1e9
        return float(d.min(1).values.mean())

    assert nn_dist(out[20.0]) > nn_dist(out[0.0])


def test_phase_a_prior_norms_control_keeps_row_norms(warmed):
    import copy

    model = copy.deepcopy(warmed[0])
    before = [fm.omega.double().norm(dim=1) for fm in model.feature_maps()]
    P.phase_a(model, warmed[1], n_align=24, n_heldout=16, n_steps=50, norms="prior", seed=0)
    for b, fm in zip(before, model.feature_maps(), strict=True):
        assert torch.allclose(fm.omega.double().norm(dim=1), b, rtol=1e-6)


@pytest.mark.parametrize("attention", ["favor", "porf-softplus", "softmaxfeat"])
def test_phase_a_raises_heldout_alignment(attention, monkeypatch):
    """On class-structured representations, Phase A raises the centred alignment of the
    attention kernel with the labels on *held-out* samples (fresh draws) over vanilla Omega.

    The representations are synthetic (two Gaussian classes whose means differ along one
    direction, at the norm of real token keys ~1.4), so the test is about Phase A, not about
    how well a tiny model learned; the study measures the same quantity on real data.
    """
    rng = np.random.default_rng(0)
    d, heads = 8, 2
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)

    def fake_samples(model, data, layer, **kw):
        y = np.where(data.labels.numpy() > 0, 1.0, -1.0)
        y = np.repeat(y, heads)
        X = 0.5 * rng.standard_normal((len(y), d)) + 0.3 * y[:, None] * direction
        return X, y

    monkeypatch.setattr(P, "token_samples", fake_samples)
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
    res = P.phase_a(model, data, n_align=300, n_heldout=300, n_steps=300, seed=0)
    assert res.align_train_after[0] > res.align_train_before[0]
    assert res.align_heldout_after[0] > 1.2 * res.align_heldout_before[0]


def test_phase_a_bad_arguments(sst):
    tok, tr, _ = sst
    data = P.encode(tok, tr, 24)
    with pytest.raises(ValueError, match="Phase A needs a feature map"):
        P.phase_a(_small_model(tok, "softmax"), data)
    model = _small_model(tok)
    small = dict(n_align=8, n_heldout=8)
    with pytest.raises(ValueError, match="n_align \\+ n_heldout must be <= len"):
        P.phase_a(model, data, n_align=40, n_heldout=20)
    for kw, match in [
        (dict(alignment="risk"), "alignment"),
        (dict(representation="cls"), "representation"),
        (dict(riesz_s=8.0), "riesz_s"),
        (dict(tilt=0.0), "tilt"),
        (dict(confinement="box"), "confinement"),
        (dict(norms="unit"), "norms"),
        (dict(repulsion_ratio=-1.0), "repulsion_ratio"),
        (dict(alignment_weight="big"), "alignment_weight"),
    ]:
        before = model.feature_maps()[0].omega.clone()
        with pytest.raises((ValueError, TypeError), match=match):
            P.phase_a(model, data, **small, **kw)
        assert torch.equal(before, model.feature_maps()[0].omega)  # nothing was done
    with pytest.raises(ValueError, match="epochs"):
        P.train(model, data, epochs=0)
    with pytest.raises(ValueError, match="not both"):
        P.train(model, data, epochs=1, validation=data)
    with pytest.raises(ValueError, match="validation split or a fixed number"):
        P.train(model, data)


def test_token_noise_drops_and_swaps_content_tokens_only(sst):
    from meanfield.attention.noise import perturb_tokens

    tok, tr, _ = sst
    data = P.encode(tok, tr, 24)
    same = perturb_tokens(data, 0.0, tok.vocab_size, seed=0)
    assert torch.equal(same.input_ids, data.input_ids)
    a = perturb_tokens(data, 0.5, tok.vocab_size, seed=1)
    b = perturb_tokens(data, 0.5, tok.vocab_size, seed=1)
    assert torch.equal(a.input_ids, b.input_ids)  # seeded
    assert torch.all(a.lengths <= data.lengths)
    assert torch.equal(a.padding_mask, torch.arange(24)[None] >= a.lengths[:, None])
    n_special = 0
    for i in range(len(data)):
        L0, L1 = int(data.lengths[i]), int(a.lengths[i])
        orig, new = data.input_ids[i, :L0], a.input_ids[i, :L1]
        assert new[0] == orig[0] == 2 and new[-1] == orig[-1] == 3  # [CLS] ... [SEP] kept
        n_special += int((orig < 4).sum())
        assert int((new < 4).sum()) == int((orig < 4).sum())
    content = int(data.lengths.sum()) - n_special
    dropped = content - (int(a.lengths.sum()) - n_special)
    # drops ~ Binomial(content, 0.25): within 5 standard deviations
    sd = math.sqrt(content * 0.25 * 0.75)
    assert abs(dropped - 0.25 * content) < 5 * sd
    with pytest.raises(ValueError, match="rate must be in"):
        perturb_tokens(data, 1.0, tok.vocab_size, seed=0)


def test_tokenizer_training_is_reproducible_across_processes():
    """The same texts give the same vocabulary in separate interpreters (the hash seeds of
    `tokenizers` differ per process, which used to change the vocabulary from run to run:
    on this fixture, four runs gave four vocabularies before the fix)."""
    import subprocess
    import sys

    code = (
        "import hashlib, json\n"
        "from meanfield.attention import data as D\n"
        "from meanfield.attention.tokenizer import TextTokenizer\n"
        f"tr = D.load_split('sst2', 'train', {str(FIX)!r})\n"
        "v = TextTokenizer.train(tr.text_a, vocab_size=120, min_frequency=1)._tok.get_vocab()\n"
        "print(hashlib.md5(json.dumps(sorted(v.items())).encode()).hexdigest())\n"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(3)
    }
    assert len(runs) == 1, runs
