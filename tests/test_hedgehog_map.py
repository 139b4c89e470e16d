"""The published Hedgehog feature map (meanfield.attention.hedgehog) against a direct
NumPy computation, autograd (gradcheck), and a distillation that must approach softmax."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from meanfield.attention.hedgehog import HedgehogFeatureMap
from meanfield.attention.learn_features import _teacher_weights
from meanfield.errors import InputError, InputTypeError


def _numpy_features(x, W, b):
    """phi = [softmax(W x + b), softmax(-(W x + b))] per head, written out in NumPy."""
    u = np.einsum("hmd,bhld->bhlm", W, x) + b[None, :, None, :]

    def softmax(z):
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return np.concatenate([softmax(u), softmax(-u)], axis=-1)


def _randomise(fm, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in fm.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype))


def test_features_match_a_direct_computation_per_head_and_side():
    fm = HedgehogFeatureMap(head_dim=5, num_heads=3, n_features=7).double()
    _randomise(fm, 0)
    x = torch.randn(2, 3, 6, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for side, W, b in (
        ("queries", fm.query_weight, fm.query_bias),
        ("keys", fm.key_weight, fm.key_bias),
    ):
        got = getattr(fm, f"transform_{side}")(x).detach().numpy()
        want = _numpy_features(x.numpy(), W.detach().numpy(), b.detach().numpy())
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    # separate maps: after the random draw, queries and keys differ
    assert not torch.allclose(fm.transform_queries(x), fm.transform_keys(x))


def test_identity_start_is_softmax_of_the_input_and_features_are_a_pair_of_distributions():
    fm = HedgehogFeatureMap(head_dim=4)
    x = 30.0 * torch.randn(10, 4, generator=torch.Generator().manual_seed(2))  # large logits
    phi = fm.transform_keys(x)
    assert torch.isfinite(phi).all() and (phi >= 0).all()
    torch.testing.assert_close(phi[:, :4], torch.softmax(x, -1))
    torch.testing.assert_close(phi[:, 4:], torch.softmax(-x, -1))
    torch.testing.assert_close(phi.sum(-1), torch.full((10,), 2.0))


def test_gradients_match_finite_differences():
    """Autograd through the map (inputs, weights and biases) against central differences."""
    fm = HedgehogFeatureMap(head_dim=3, num_heads=2).double()
    _randomise(fm, 3)
    params = {k: v.detach().clone() for k, v in fm.named_parameters()}
    x = torch.randn(1, 2, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(6))

    def features(x, wq, bq):
        state = {**params, "query_weight": wq, "query_bias": bq}
        return torch.func.functional_call(fm, state, (x,), {})

    fm.forward = fm.transform_queries  # functional_call calls forward
    inputs = tuple(
        t.clone().requires_grad_(True) for t in (x, params["query_weight"], params["query_bias"])
    )
    assert torch.autograd.gradcheck(features, inputs, eps=1e-6, atol=1e-8)


def test_tied_maps_share_one_parameter_set():
    fm = HedgehogFeatureMap(head_dim=4, num_heads=2, separate_query_key=False)
    assert fm.key_weight is fm.query_weight and fm.key_bias is fm.query_bias
    assert sum(p.numel() for p in fm.parameters()) == 2 * (16 + 4)
    no_bias = HedgehogFeatureMap(head_dim=4, bias=False)
    assert no_bias.query_bias is None and no_bias.key_bias is None
    assert sum(p.numel() for p in no_bias.parameters()) == 2 * 16


def test_state_dict_round_trip():
    src = HedgehogFeatureMap(head_dim=4, num_heads=2)
    _randomise(src, 4)
    dst = HedgehogFeatureMap(head_dim=4, num_heads=2)
    dst.load_state_dict(src.state_dict())
    x = torch.randn(1, 2, 3, 4)
    assert torch.equal(dst.transform_keys(x), src.transform_keys(x))


def test_distillation_recovers_a_teacher_the_map_can_express():
    """Adam on Hedgehog's cross-entropy from the identity start, one head, d = 4, against the
    attention weights of a Hedgehog map with random parameters (a teacher the family
    contains, so the attainable TV distance is 0): training must remove at least 80 % of the
    starting TV (observed 0.213 -> 1.6e-7; a map that cannot learn, e.g. a frozen W, keeps all
    of it)."""
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(8, 1, 16, 4, generator=gen)
    k = torch.randn(8, 1, 16, 4, generator=gen)
    teacher_map = HedgehogFeatureMap(head_dim=4, num_heads=1)
    _randomise(teacher_map, 7)
    fm = HedgehogFeatureMap(head_dim=4, num_heads=1)

    def weights(m):
        kern = m.transform_queries(q) @ m.transform_keys(k).transpose(-1, -2)
        return kern / kern.sum(-1, keepdim=True)

    with torch.no_grad():
        teacher = weights(teacher_map)

    def tv():
        with torch.no_grad():
            return float(0.5 * (weights(fm) - teacher).abs().sum(-1).mean())

    before = tv()
    opt = torch.optim.Adam(fm.parameters(), lr=0.05)
    for _ in range(300):
        loss = -(teacher * torch.log(weights(fm))).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = tv()
    assert after < 0.2 * before, (before, after)


def test_distillation_moves_the_map_towards_softmax_attention():
    """The same training against softmax attention exp(q.k / 2) / Z: the square map cannot
    express it exactly, so only a decrease is asserted (observed TV 0.238 -> 0.181)."""
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(8, 1, 16, 4, generator=gen)
    k = torch.randn(8, 1, 16, 4, generator=gen)
    teacher = _teacher_weights(q, k, None)
    fm = HedgehogFeatureMap(head_dim=4, num_heads=1)

    def tv():
        with torch.no_grad():
            kern = fm.kernel(q, k)
            return float(0.5 * (kern / kern.sum(-1, keepdim=True) - teacher).abs().sum(-1).mean())

    before = tv()
    opt = torch.optim.Adam(fm.parameters(), lr=0.05)
    for _ in range(100):
        kern = fm.kernel(q, k)
        loss = -(teacher * torch.log(kern / kern.sum(-1, keepdim=True))).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert tv() < before


@pytest.mark.parametrize(
    ("kwargs", "x", "error", "names"),
    [
        ({"head_dim": 4}, torch.zeros(3, 5), InputError, "head_dim"),
        ({"head_dim": 4}, torch.zeros(3, 4, dtype=torch.long), InputTypeError, "floating"),
        ({"head_dim": 4, "num_heads": 2}, torch.zeros(3, 4), InputError, "num_heads"),
        ({"head_dim": 4}, [[0.0] * 4], InputTypeError, "torch.Tensor"),
    ],
)
def test_bad_inputs_are_refused_by_name(kwargs, x, error, names):
    with pytest.raises(error, match=names):
        HedgehogFeatureMap(**kwargs).transform_queries(x)


@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"head_dim": 0}, InputError, "head_dim"),
        ({"head_dim": 4, "n_features": 0}, InputError, "n_features"),
        ({"head_dim": 4, "bias": "yes"}, InputTypeError, "bias"),
        ({"head_dim": 4, "separate_query_key": 1}, InputTypeError, "separate_query_key"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs, error, names):
    with pytest.raises(error, match=names):
        HedgehogFeatureMap(**kwargs)


def _attention_reference(attn, x, pad=None, causal=False):
    """Kernel attention of a KernelAttention written out densely: weights
    phi_Q(q) phi_K(k)^T, masked, normalised per row, applied to the values, projected."""
    b, L, E = x.shape
    q, k, v = (
        f(x).transpose(1, 2) for f in (attn.project_queries, attn.project_keys, attn.project_values)
    )
    fm = attn.feature_map
    kern = fm.transform_queries(q) @ fm.transform_keys(k).transpose(-1, -2)
    if pad is not None:
        kern = kern.masked_fill(pad[:, None, None, :], 0.0)
    if causal:
        kern = kern.tril()
    weights = kern / kern.sum(-1, keepdim=True)
    return attn.out_proj((weights @ v).transpose(1, 2).reshape(b, L, E)), weights


def test_kernel_attention_with_the_hedgehog_map_matches_the_dense_form():
    from meanfield.attention import KernelAttention

    torch.manual_seed(0)
    attn = KernelAttention(8, 2, feature="hedgehog", batch_first=True, eps=0.0).double()
    _randomise(attn.feature_map, 8)
    x = torch.randn(3, 7, 8, dtype=torch.float64)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 5:] = True
    out, w = attn(x, x, x, key_padding_mask=pad, need_weights=True, average_attn_weights=False)
    ref_out, ref_w = _attention_reference(attn, x, pad)
    torch.testing.assert_close(w, ref_w, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(out, ref_out, rtol=1e-12, atol=1e-14)
    # the maps are trained with the model: the loss reaches both sides' parameters
    out.sum().backward()
    assert attn.feature_map.query_weight.grad.abs().sum() > 0
    assert attn.feature_map.key_weight.grad.abs().sum() > 0


def test_kernel_attention_hedgehog_settings():
    from meanfield.attention import KernelAttention

    attn = KernelAttention(12, 3, feature="hedgehog")
    assert attn.feature_map.query_weight.shape == (3, 4, 4)  # per head, m = head_dim
    with torch.no_grad():
        attn.feature_map.query_weight.add_(1.0)
    attn.reset_parameters()  # back to the identity start
    assert torch.equal(attn.feature_map.query_weight, torch.eye(4).expand(3, 4, 4))
    with pytest.raises(InputError, match="redraw_every"):
        KernelAttention(12, 3, feature="hedgehog", redraw_every=10)
