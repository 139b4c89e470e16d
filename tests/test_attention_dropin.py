"""KernelAttention as a drop-in for torch.nn.MultiheadAttention, tested against torch itself."""

import copy
import itertools

import pytest
import torch
from torch import nn

from meanfield.attention.features import FEATURE_KINDS
from meanfield.attention.masks import is_causal_mask
from meanfield.attention.mha import KernelAttention

E, H = 16, 4


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny tensors: a second thread only adds overhead
    yield


def _mha(seed=0, **kw):
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(E, H, **kw).eval()
    if mha.in_proj_bias is not None:  # MHA initialises biases to 0: make them matter
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.out_proj.bias.normal_()
    return mha


def _inputs(batch_first, N=2, L=5, S=7, kdim=E, vdim=E, seed=1):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(N, L, E, generator=g)
    k = torch.randn(N, S, kdim, generator=g)
    v = torch.randn(N, S, vdim, generator=g)
    if not batch_first:
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    return q, k, v


def _masks(N=2, L=5, S=7):
    """Every mask form nn.MultiheadAttention accepts (None = no mask)."""
    g = torch.Generator().manual_seed(3)
    kpm = torch.zeros(N, S, dtype=torch.bool)
    kpm[0, 5:] = True
    am_bool = torch.rand(L, S, generator=g) < 0.3
    am_bool[:, 0] = False  # every query keeps a key
    am_float3 = torch.randn(N * H, L, S, generator=g)
    return {
        "none": {},
        "kpm_bool": {"key_padding_mask": kpm},
        "kpm_float": {"key_padding_mask": torch.zeros(N, S).masked_fill(kpm, float("-inf"))},
        "kpm_additive": {"key_padding_mask": torch.randn(N, S, generator=g)},
        "attn_bool_2d": {"attn_mask": am_bool},
        "attn_float_3d": {"attn_mask": am_float3},
        "both": {"attn_mask": am_bool, "key_padding_mask": kpm},
    }


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("mask", list(_masks()))
def test_softmax_reproduces_multiheadattention(batch_first, mask):
    """The strongest drop-in test: same weights, same outputs and weights, every mask form."""
    mha = _mha(batch_first=batch_first)
    ka = KernelAttention.from_mha(mha, feature_map="softmax")
    assert ka.batch_first == batch_first and not ka.training
    q, k, v = _inputs(batch_first)
    kw = _masks()[mask]
    with torch.no_grad():
        for avg in (True, False):
            o1, w1 = mha(q, k, v, need_weights=True, average_attn_weights=avg, **kw)
            o2, w2 = ka(q, k, v, need_weights=True, average_attn_weights=avg, **kw)
            assert o1.shape == o2.shape and w1.shape == w2.shape
            torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(w2, w1, atol=1e-6, rtol=1e-5)
        # torch's defaults: need_weights=True, average_attn_weights=True
        o1, w1 = mha(q, k, v, **kw)
        o2, w2 = ka(q, k, v, **kw)
        assert w1.shape == w2.shape == (2, 5, 7)
        torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(w2, w1, atol=1e-6, rtol=1e-5)
        o1, _ = mha(q, k, v, need_weights=False, **kw)
        o2, w2 = ka(q, k, v, need_weights=False, **kw)
    assert w2 is None
    torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "opts",
    [
        {"kdim": 6, "vdim": 10},
        {"add_bias_kv": True},
        {"add_zero_attn": True},
        {"add_bias_kv": True, "add_zero_attn": True, "kdim": 6},
        {"bias": False},
    ],
    ids=lambda o: ",".join(o),
)
@pytest.mark.parametrize("causal", [False, True])
def test_softmax_reproduces_mha_options(opts, causal):
    mha = _mha(batch_first=True, **opts)
    ka = KernelAttention.from_mha(mha, feature_map="softmax")
    L = 6
    q, k, v = _inputs(True, L=L, S=L, kdim=opts.get("kdim", E), vdim=opts.get("vdim", E))
    if causal and "kdim" in opts:  # causal self-attention needs key = query widths
        return
    kw = {}
    if causal:
        # bool, like the padding mask (torch warns about mixed mask types)
        kw = {"attn_mask": torch.ones(L, L, dtype=torch.bool).triu(1), "is_causal": True}
    kpm = torch.zeros(2, L, dtype=torch.bool)
    kpm[1, 4:] = True
    with torch.no_grad():
        o1, w1 = mha(q, k, v, key_padding_mask=kpm, need_weights=True, **kw)
        o2, w2 = ka(q, k, v, key_padding_mask=kpm, need_weights=True, **kw)
    torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w2, w1, atol=1e-6, rtol=1e-5)


def test_unbatched_inputs_like_mha():
    mha = _mha(batch_first=False)
    ka = KernelAttention.from_mha(mha, feature_map="softmax")
    q, k, v = (t[0] for t in _inputs(True))
    kpm = torch.tensor([False] * 5 + [True] * 2)
    with torch.no_grad():
        o1, w1 = mha(q, k, v, key_padding_mask=kpm)
        o2, w2 = ka(q, k, v, key_padding_mask=kpm, need_weights=True)
    assert o2.shape == (5, E) and w2.shape == (5, 7)
    torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w2, w1, atol=1e-6, rtol=1e-5)


def test_mha_state_dict_loads_strictly_and_tie_qk_is_checked():
    mha = _mha(batch_first=True)
    for feature in ("softmax", "favor"):
        ka = KernelAttention(E, H, feature=feature, n_features=8, seed=5)
        omega = None if ka.feature_map is None else ka.feature_map.omega.clone()
        ka.load_state_dict(mha.state_dict())  # strict: every key mapped
        assert torch.equal(ka.in_proj_weight, mha.in_proj_weight)
        assert torch.equal(ka.in_proj_bias, mha.in_proj_bias)
        assert torch.equal(ka.out_proj.weight, mha.out_proj.weight)
        if omega is not None:  # a softmax module has no Omega: ours is kept
            assert torch.equal(ka.feature_map.omega, omega)
        # its own state_dict still round-trips
        other = KernelAttention(E, H, feature=feature, n_features=8, seed=6)
        other.load_state_dict(ka.state_dict())
        assert torch.equal(other.in_proj_weight, mha.in_proj_weight)
    sep = _mha(batch_first=True, kdim=6, vdim=10)
    ka = KernelAttention(E, H, kdim=6, vdim=10, feature="porf", n_features=8)
    ka.load_state_dict(sep.state_dict())
    assert torch.equal(ka.k_proj_weight, sep.k_proj_weight) and ka.in_proj_weight is None
    tied = KernelAttention(E, H, tie_qk=True, feature="favor", n_features=8)
    with pytest.raises(ValueError, match="tie_qk=True: its query and key projection"):
        tied.load_state_dict(mha.state_dict())
    sd = mha.state_dict()
    sd["in_proj_weight"] = torch.cat(
        [sd["in_proj_weight"][:E]] * 2 + [sd["in_proj_weight"][E : 2 * E]]
    )
    sd["in_proj_bias"] = torch.cat([sd["in_proj_bias"][:E]] * 3)
    tied.load_state_dict(sd)  # equal Q and K projections: accepted
    assert torch.equal(
        tied.project_keys(torch.ones(1, 2, E)), tied.project_queries(torch.ones(1, 2, E))
    )


@pytest.mark.parametrize("feature", FEATURE_KINDS)
def test_from_mha_keeps_the_projections(feature):
    mha = _mha(batch_first=False, dropout=0.1)  # torch's layers' default rate
    assert KernelAttention.from_mha(mha, feature_map=feature).dropout == 0.1  # output dropout
    ka = KernelAttention.from_mha(mha, feature_map=feature, n_features=8, seed=3, dropout=0.0)
    assert not ka.batch_first and ka.feature_map.seed == 3 and ka.dropout == 0.0
    x = torch.randn(2, 5, E)
    wq, wk, wv = mha.in_proj_weight.chunk(3)
    bq, bk, _ = mha.in_proj_bias.chunk(3)
    torch.testing.assert_close(ka.project_queries(x), (x @ wq.T + bq).reshape(2, 5, H, E // H))
    torch.testing.assert_close(ka.project_keys(x), (x @ wk.T + bk).reshape(2, 5, H, E // H))
    with torch.no_grad():
        out, _ = ka(*(torch.randn(5, 2, E),) * 3)
    assert out.shape == (5, 2, E) and torch.isfinite(out).all()


def _replace_attention(layer, feature, **kw):
    layer.self_attn = KernelAttention.from_mha(layer.self_attn, feature_map=feature, **kw)
    if hasattr(layer, "multihead_attn"):
        layer.multihead_attn = KernelAttention.from_mha(
            layer.multihead_attn, feature_map=feature, **kw
        )
    return layer


@pytest.mark.parametrize("batch_first", [True, False])
def test_encoder_layer_softmax_equals_torch_in_train_and_eval(batch_first):
    """In eval mode torch's layer takes its fused fast path; ours must take the regular one
    (the fused kernel would compute softmax attention from in_proj_weight) and agree."""
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(E, H, 32, dropout=0.0, batch_first=batch_first)
    ours = _replace_attention(copy.deepcopy(ref), "softmax")
    x = torch.randn(3, 6, E) if batch_first else torch.randn(6, 3, E)
    kpm = torch.zeros(3, 6, dtype=torch.bool)
    kpm[1, 4:] = True
    causal = nn.Transformer.generate_square_subsequent_mask(6)
    for train, kw in itertools.product(
        (True, False),
        ({}, {"src_key_padding_mask": kpm}, {"src_mask": causal, "is_causal": True}),
    ):
        ref.train(train)
        ours.train(train)
        with torch.no_grad():
            a, b = ref(x, **kw), ours(x, **kw)
        if "src_key_padding_mask" in kw:  # the fast path zeroes padded rows; compare real ones
            keep = ~kpm if batch_first else ~kpm.T
            a, b = a[keep], b[keep]
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("feature", ["softmax", *FEATURE_KINDS])
def test_encoder_and_decoder_containers_run_every_feature(feature):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, H, 32, dropout=0.0, batch_first=True)
    layer = _replace_attention(layer, feature, n_features=8)
    enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    dec_layer = _replace_attention(
        nn.TransformerDecoderLayer(E, H, 32, dropout=0.0, batch_first=True), feature, n_features=8
    )
    x, mem = torch.randn(2, 9, E), torch.randn(2, 5, E)
    kpm = torch.zeros(2, 9, dtype=torch.bool)
    kpm[0, 7:] = True
    causal = nn.Transformer.generate_square_subsequent_mask(9)
    for train in (True, False):
        enc.train(train)
        dec_layer.train(train)
        with torch.no_grad():
            y = enc(x, src_key_padding_mask=kpm)
            yc = enc(x, mask=causal, is_causal=True)
            z = dec_layer(x, mem, tgt_mask=causal, tgt_is_causal=True)
        assert y.shape == yc.shape == z.shape == (2, 9, E)
        assert torch.isfinite(y).all() and torch.isfinite(yc).all() and torch.isfinite(z).all()
        # causal stacks do not see the future: changing token 6.. leaves tokens < 6 unchanged
        x2 = x.clone()
        x2[:, 6:] += 10 * torch.randn(2, 3, E)
        with torch.no_grad():
            yc2 = enc(x2, mask=causal, is_causal=True)
            z2 = dec_layer(x2, mem, tgt_mask=causal, tgt_is_causal=True)
        torch.testing.assert_close(yc2[:, :6], yc[:, :6], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(z2[:, :6], z[:, :6], atol=1e-5, rtol=1e-5)


def test_encoder_construction_warns_only_about_nested_tensors():
    layer = _replace_attention(
        nn.TransformerEncoderLayer(E, H, 32, batch_first=True), "favor", dropout=0.0
    )
    with pytest.warns(UserWarning, match="_qkv_same_embed_dim was not True"):
        enc = nn.TransformerEncoder(layer, num_layers=2)
    assert not enc.use_nested_tensor
    assert all(isinstance(m.self_attn, KernelAttention) for m in enc.layers)
    assert enc.layers[0].self_attn is not enc.layers[1].self_attn


@pytest.mark.parametrize("feature", FEATURE_KINDS)
@pytest.mark.parametrize("causal", [False, True])
def test_extra_keys_match_the_explicit_weights(feature, causal):
    """add_bias_kv / add_zero_attn: the O(L) output equals out_proj(weights @ values)."""
    torch.manual_seed(2)
    attn = KernelAttention(
        E,
        H,
        add_bias_kv=True,
        add_zero_attn=True,
        batch_first=True,
        feature=feature,
        n_features=8,
    ).eval()
    x = torch.randn(2, 6, E)
    kpm = torch.zeros(2, 6, dtype=torch.bool)
    kpm[1, 4:] = True
    with torch.no_grad():
        out, w = attn(
            x,
            x,
            x,
            key_padding_mask=kpm,
            need_weights=True,
            average_attn_weights=False,
            is_causal=causal,
        )
        vals = [attn.project_values(x).flatten(2), attn.bias_v.expand(2, 1, E)]
        vals = torch.cat(vals + [torch.zeros(2, 1, E)], 1)
        vals = vals.reshape(2, 8, H, E // H).transpose(1, 2)
        rebuilt = attn.out_proj((w @ vals).transpose(1, 2).reshape(2, 6, E))
    assert w.shape == (2, H, 6, 8)
    assert torch.all(w[..., 6:] > 0)  # the extra keys are visible to every query
    if causal:
        assert torch.all(w[..., :6].triu(1) == 0)
    torch.testing.assert_close(out, rebuilt, atol=1e-5, rtol=1e-4)


def _kernel_reference(attn, x, bias):
    """float64 O(L^2) reference from the unshifted kernel: w_ls ~ K(q_l, k_s) exp(bias_ls)."""
    fm = attn.feature_map
    q = attn.project_queries(x).double().transpose(1, 2)
    k = attn.project_keys(x).double().transpose(1, 2)
    v = attn.project_values(x).double().transpose(1, 2)
    K = fm.raw_features(q) @ fm.raw_features(k).transpose(-1, -2)
    w = K * torch.exp(bias.double())
    o = (w / w.sum(-1, keepdim=True)) @ v
    return attn.out_proj(o.transpose(1, 2).reshape(x.shape).float())


@pytest.mark.parametrize("feature", FEATURE_KINDS)
def test_general_masks_are_applied_exactly(feature):
    torch.manual_seed(0)
    attn = KernelAttention(E, H, batch_first=True, feature=feature, n_features=16, eps=0.0).eval()
    N, L = 2, 7
    x = torch.randn(N, L, E)
    g = torch.Generator().manual_seed(1)
    am_bool = torch.rand(L, L, generator=g) < 0.4
    am_bool.fill_diagonal_(False)
    am_float = torch.randn(N * H, L, L, generator=g)
    with torch.no_grad():
        for am in (am_bool, am_float):
            bias = am.reshape(-1, H, L, L) if am.ndim == 3 else am[None, None]
            if am.dtype == torch.bool:
                bias = torch.zeros(1, 1, L, L).masked_fill(am, float("-inf"))
            out, _ = attn(x, x, x, attn_mask=am)
            torch.testing.assert_close(out, _kernel_reference(attn, x, bias), atol=1e-5, rtol=1e-4)
        # a causal mask the O(L) path does not recognise (-1e30, not -inf) goes through the
        # weights, and agrees with the prefix sums
        fut = torch.ones(L, L, dtype=torch.bool).triu(1)
        soft = torch.zeros(L, L).masked_fill(fut, -1e30)
        assert not is_causal_mask(soft)
        a, _ = attn(x, x, x, attn_mask=soft)
        b, _ = attn(x, x, x, is_causal=True)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_causal_masks_are_recognised_not_replaced():
    L = 6
    fut = torch.ones(L, L, dtype=torch.bool).triu(1)
    assert is_causal_mask(fut) and is_causal_mask(nn.Transformer.generate_square_subsequent_mask(L))
    assert is_causal_mask(fut.expand(8, L, L))
    assert not is_causal_mask(fut.T) and not is_causal_mask(torch.zeros(L, L))
    attn = KernelAttention(E, H, batch_first=True, feature="porf", n_features=8).eval()
    x = torch.randn(2, L, E)
    with torch.no_grad():
        ref, _ = attn(x, x, x, is_causal=True)
        for m in (fut, nn.Transformer.generate_square_subsequent_mask(L)):
            out, _ = attn(x, x, x, attn_mask=m)  # recognised without the hint
            assert torch.equal(out, ref)
            out, _ = attn(x, x, x, attn_mask=m, is_causal=True)
            assert torch.equal(out, ref)
        # a non-causal mask with the hint is refused, not replaced
        with pytest.raises(ValueError, match="not the causal mask"):
            attn(x, x, x, attn_mask=fut.T.contiguous(), is_causal=True)


def test_dtype_device_and_meta_construction():
    ka = KernelAttention(E, H, batch_first=True, feature="favor", n_features=8, dtype=torch.float64)
    assert ka.in_proj_weight.dtype == torch.float64 and ka.feature_map.omega.dtype == torch.float32
    x = torch.randn(2, 5, E, dtype=torch.float64)
    out, _ = ka(x, x, x, is_causal=True)
    assert out.dtype == torch.float64
    for feature in ("favor", "softmaxfeat"):  # bf16 parameters, fp32 attention inside
        kb = KernelAttention(
            E, H, batch_first=True, feature=feature, n_features=8, dtype=torch.bfloat16
        ).eval()
        xb = torch.randn(2, 70, E, dtype=torch.bfloat16)
        with torch.no_grad():
            ob, wb = kb(xb, xb, xb, is_causal=True, need_weights=True)
            kf = copy.deepcopy(kb).float()
            of, _ = kf(xb.float(), xb.float(), xb.float(), is_causal=True)
        assert ob.dtype == wb.dtype == torch.bfloat16 and torch.isfinite(ob).all()
        assert (ob.float() - of).abs().max() < 0.05 * of.abs().max() + 0.05
    meta = KernelAttention(E, H, feature="porf", n_features=8, add_bias_kv=True, device="meta")
    assert all(p.device.type == "meta" for p in meta.parameters())
    assert meta.feature_map.omega.device.type == "meta"
    xm = torch.empty(2, 5, E, device="meta")
    om, _ = meta(xm, xm, xm)
    assert om.shape == (2, 5, E) and om.device.type == "meta"
    real = meta.to_empty(device="cpu")
    real.reset_parameters()
    ref = KernelAttention(E, H, feature="porf", n_features=8)
    assert torch.equal(real.feature_map.omega, ref.feature_map.omega)  # redrawn from the seed
    with torch.no_grad():
        out, _ = real(x.float(), x.float(), x.float())
    assert torch.isfinite(out).all()


# -- issue 20: torch's defaults, parameter layout, state_dict, to_mha, dropout, nested ------
def _mha64(seed=0, **kw):
    """A float64 nn.MultiheadAttention with nonzero biases (torch initialises them to 0)."""
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(E, H, dtype=torch.float64, **kw).eval()
    with torch.no_grad():
        for p in (mha.in_proj_bias, mha.out_proj.bias):
            if p is not None:
                p.normal_()
    return mha


def test_module_lives_in_mha_and_is_the_subpackages_name():
    import meanfield.attention as attention
    import meanfield.attention.linear as linear

    assert attention.KernelAttention is KernelAttention
    assert KernelAttention.__module__ == "meanfield.attention.mha"
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        linear.NoSuchThing  # noqa: B018


@pytest.mark.parametrize("mask", ["none", "kpm_bool", "attn_float_3d"])
def test_defaults_are_torch_defaults_float64(mask):
    """batch_first=False reads (L, N, E), need_weights=True returns the head-averaged weights,
    as nn.MultiheadAttention with the same weights (written into in_proj_weight directly)."""
    mha = _mha64()
    ka = KernelAttention(E, H, feature="softmax", dtype=torch.float64).eval()
    assert ka.batch_first is False and mha.batch_first is False
    with torch.no_grad():
        ka.in_proj_weight.copy_(mha.in_proj_weight)
        ka.in_proj_bias.copy_(mha.in_proj_bias)
        ka.out_proj.load_state_dict(mha.out_proj.state_dict())
    L, N, S = 5, 2, 7  # L != N: a layout read the wrong way round fails
    g = torch.Generator().manual_seed(4)
    q = torch.randn(L, N, E, generator=g, dtype=torch.float64)
    k = torch.randn(S, N, E, generator=g, dtype=torch.float64)
    v = torch.randn(S, N, E, generator=g, dtype=torch.float64)
    kw = {k_: t.double() if t.is_floating_point() else t for k_, t in _masks()[mask].items()}
    with torch.no_grad():
        o1, w1 = mha(q, k, v, **kw)
        o2, w2 = ka(q, k, v, **kw)
        o3, w3 = ka(q, k, v, average_attn_weights=False, **kw)
        _, w4 = mha(q, k, v, average_attn_weights=False, **kw)
    assert o2.shape == (L, N, E) and w2.shape == (N, L, S) and w3.shape == (N, H, L, S)
    torch.testing.assert_close(o2, o1, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(w2, w1, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(w3, w4, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(o3, o1, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize(
    "opts",
    [{}, {"kdim": 6, "vdim": 10}, {"bias": False}, {"add_bias_kv": True}],
    ids=["packed", "kdim-vdim", "no-bias", "bias-kv"],
)
def test_parameters_and_state_dict_keys_are_torchs(opts):
    mha = _mha64(**opts)
    ka = KernelAttention(E, H, feature="softmax", dtype=torch.float64, **opts)
    assert list(ka.state_dict()) == list(mha.state_dict())
    assert [(n, p.shape) for n, p in ka.named_parameters()] == [
        (n, p.shape) for n, p in mha.named_parameters()
    ]
    for name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"):
        assert (getattr(ka, name) is None) == (getattr(mha, name) is None), name
    assert isinstance(ka.out_proj, nn.Linear)
    # both ways, strictly, for softmax
    ka.load_state_dict(mha.state_dict())
    other = nn.MultiheadAttention(E, H, dtype=torch.float64, **opts).eval()
    other.load_state_dict(ka.state_dict())
    x = torch.randn(5, 2, E, dtype=torch.float64)
    kx = torch.randn(7, 2, opts.get("kdim", E), dtype=torch.float64)
    vx = torch.randn(7, 2, opts.get("vdim", E), dtype=torch.float64)
    with torch.no_grad():
        ref = mha(x, kx, vx)
        for out in (ka.eval()(x, kx, vx), other(x, kx, vx)):
            torch.testing.assert_close(out[0], ref[0], atol=1e-12, rtol=1e-12)
            torch.testing.assert_close(out[1], ref[1], atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("feature", FEATURE_KINDS)
def test_kernel_state_dict_both_ways(feature):
    """mha.load_state_dict(ka.state_dict(), strict=False): only the feature map's keys are
    unexpected; ka.load_state_dict(mha.state_dict()) is strict and keeps Omega."""
    mha = _mha64()
    ka = KernelAttention(E, H, feature=feature, n_features=8, seed=2, dtype=torch.float64)
    omega = ka.feature_map.omega.clone()
    result = ka.load_state_dict(mha.state_dict())  # strict
    assert not result.missing_keys and not result.unexpected_keys
    assert torch.equal(ka.feature_map.omega, omega)
    assert torch.equal(ka.in_proj_weight, mha.in_proj_weight)
    target = nn.MultiheadAttention(E, H, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="feature_map.omega"):
        target.load_state_dict(ka.state_dict())
    result = target.load_state_dict(ka.state_dict(), strict=False)
    assert result.missing_keys == []
    assert sorted(result.unexpected_keys) == ["feature_map._extra_state", "feature_map.omega"]
    for name, t in mha.state_dict().items():
        assert torch.equal(target.state_dict()[name], t), name
    # a learned Omega travels with the module's own state_dict
    learned = torch.randn_like(omega)
    ka.feature_map.set_omega(learned)
    twin = KernelAttention(E, H, feature=feature, n_features=8, seed=9, dtype=torch.float64)
    twin.load_state_dict(ka.state_dict())
    assert torch.equal(twin.feature_map.omega, learned) and twin.feature_map.learned


def test_writes_to_in_proj_weight_take_effect_and_gradients_reach_it():
    mha = _mha64()
    ka = KernelAttention(E, H, feature="softmax", dtype=torch.float64).eval()
    x = torch.randn(5, 2, E, dtype=torch.float64)
    with torch.no_grad():
        before, _ = ka(x, x, x)
        ka.in_proj_weight.copy_(mha.in_proj_weight)  # in place, as a user would
        ka.in_proj_bias.copy_(mha.in_proj_bias)
        ka.out_proj.weight.copy_(mha.out_proj.weight)
        ka.out_proj.bias.copy_(mha.out_proj.bias)
        after, _ = ka(x, x, x)
        ref, _ = mha(x, x, x)
    assert not torch.allclose(before, ref)
    torch.testing.assert_close(after, ref, atol=1e-12, rtol=1e-12)
    # zero value projection: every output is out_proj's bias
    with torch.no_grad():
        ka.in_proj_weight[2 * E :] = 0
        ka.in_proj_bias[2 * E :] = 0
        out, _ = ka(x, x, x)
    torch.testing.assert_close(out, ka.out_proj.bias.expand_as(out).detach())
    ka.reset_parameters()
    for feature in ("softmax", "favor"):
        for opts in ({}, {"kdim": 6, "vdim": 10}):
            m = KernelAttention(E, H, feature=feature, n_features=8, **opts)
            kx = torch.randn(7, 2, opts.get("kdim", E))
            vx = torch.randn(7, 2, opts.get("vdim", E))
            out, _ = m(torch.randn(5, 2, E), kx, vx, need_weights=False)
            out.square().sum().backward()
            blocks = (
                m.in_proj_weight.grad.chunk(3)
                if m.in_proj_weight is not None
                else [m.q_proj_weight.grad, m.k_proj_weight.grad, m.v_proj_weight.grad]
            )
            assert all(g is not None and g.abs().sum() > 0 for g in blocks)
            assert m.in_proj_bias.grad.abs().sum() > 0


def test_initialisation_draws_are_those_of_the_earlier_linear_layers():
    """A seeded module starts as before issue 20 (q, k, v, out nn.Linear layers, then
    bias_k / bias_v): the same random draws, in the same order."""
    for opts in ({}, {"kdim": 6, "vdim": 10}, {"tie_qk": True}, {"add_bias_kv": True}):
        torch.manual_seed(7)
        kdim, vdim = opts.get("kdim", E), opts.get("vdim", E)
        q = nn.Linear(E, E)
        k = None if opts.get("tie_qk") else nn.Linear(kdim, E)
        v = nn.Linear(vdim, E)
        o = nn.Linear(E, E)
        if opts.get("add_bias_kv"):
            bk, bv = torch.empty(1, 1, E), torch.empty(1, 1, E)
            nn.init.xavier_normal_(bk)
            nn.init.xavier_normal_(bv)
        torch.manual_seed(7)
        ka = KernelAttention(E, H, feature="softmax", **opts)
        k = q if k is None else k
        (wq, bq), (wk, b_k), (wv, b_v) = ka._projections()
        for w, b, lin in ((wq, bq, q), (wk, b_k, k), (wv, b_v, v)):
            assert torch.equal(w, lin.weight) and torch.equal(b, lin.bias)
        assert torch.equal(ka.out_proj.weight, o.weight)
        if opts.get("add_bias_kv"):
            assert torch.equal(ka.bias_k, bk) and torch.equal(ka.bias_v, bv)


def test_tie_qk_state_dict_is_torchs_and_checked_on_load():
    for vdim in (E, 10):
        tied = KernelAttention(E, H, tie_qk=True, vdim=vdim, feature="favor", n_features=8)
        mha = nn.MultiheadAttention(E, H, vdim=vdim)
        mha_keys = set(mha.state_dict())
        assert set(tied.state_dict()) - mha_keys == {
            "feature_map.omega",
            "feature_map._extra_state",
        }
        result = mha.load_state_dict(tied.state_dict(), strict=False)
        assert result.missing_keys == []
        wq, wk, _ = (
            mha.in_proj_weight.chunk(3)
            if vdim == E
            else (mha.q_proj_weight, mha.k_proj_weight, None)
        )
        assert torch.equal(wq, tied.qk_proj_weight) and torch.equal(wk, tied.qk_proj_weight)
        twin = KernelAttention(E, H, tie_qk=True, vdim=vdim, feature="favor", n_features=8)
        with torch.no_grad():
            twin.qk_proj_weight.zero_()
        twin.load_state_dict(tied.state_dict())  # its own (torch-layout) state: strict
        assert torch.equal(twin.qk_proj_weight, tied.qk_proj_weight)
        with pytest.raises(ValueError, match="query and key projection weights differ"):
            twin.load_state_dict(nn.MultiheadAttention(E, H, vdim=vdim).state_dict())


@pytest.mark.parametrize("feature", ["softmax", *FEATURE_KINDS])
@pytest.mark.parametrize(
    "opts", [{}, {"kdim": 6, "vdim": 10, "add_bias_kv": True}, {"tie_qk": True}]
)
def test_to_mha_round_trip(feature, opts):
    torch.manual_seed(1)
    ka = KernelAttention(E, H, dropout=0.2, feature=feature, n_features=8, seed=4, **opts)
    mha = ka.to_mha()
    assert isinstance(mha, nn.MultiheadAttention) and mha.training
    assert (mha.dropout, mha.batch_first, mha.kdim, mha.vdim) == (0.2, False, ka.kdim, ka.vdim)
    back = KernelAttention.from_mha(mha, feature, n_features=8, seed=4, tie_qk=ka.tie_qk).eval()
    ka.eval()
    for name, t in ka.state_dict().items():
        if torch.is_tensor(t):
            assert torch.equal(back.state_dict()[name], t), name
    x = torch.randn(5, 2, E)
    kx, vx = torch.randn(7, 2, ka.kdim), torch.randn(7, 2, ka.vdim)
    with torch.no_grad():
        a, wa = ka(x, kx, vx)
        b, wb = back(x, kx, vx)
        assert torch.equal(a, b) and torch.equal(wa, wb)
        if feature == "softmax":  # the same attention: torch gives the same result
            ref, wref = mha.eval()(x, kx, vx)
            torch.testing.assert_close(a, ref, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(wa, wref, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("feature", FEATURE_KINDS)
def test_kernel_dropout_is_on_the_attention_output_in_train_mode_only(feature):
    p = 0.3
    torch.manual_seed(0)
    ka = KernelAttention(E, H, dropout=p, batch_first=True, feature=feature, n_features=8)
    ref = copy.deepcopy(ka)
    ref.dropout = 0.0
    with torch.no_grad():  # out_proj = identity: the module returns the attention output
        for m in (ka, ref):
            m.out_proj.weight.copy_(torch.eye(E))
            m.out_proj.bias.zero_()
    x = torch.randn(4, 50, E)
    kpm = torch.zeros(4, 50, dtype=torch.bool)
    kpm[1, 40:] = True
    with torch.no_grad():
        for causal in (False, True):
            kw = {"key_padding_mask": kpm, "is_causal": causal, "need_weights": False}
            expect, _ = ref.eval()(x, x, x, **kw)
            out, _ = ka.eval()(x, x, x, **kw)
            assert torch.equal(out, expect)  # eval: the identity
            ka.train()
            ref.train()
            out, _ = ka(x, x, x, **kw)
            expect, _ = ref(x, x, x, **kw)
            dropped = out == 0
            assert abs(dropped.float().mean().item() - p) < 0.04  # 3200 entries: sd 0.008
            torch.testing.assert_close(out[~dropped], expect[~dropped] / (1 - p))
            # the returned kernel weights are not dropped
            _, w = ka(x, x, x, key_padding_mask=kpm, is_causal=causal)
            torch.testing.assert_close(w.sum(-1), torch.ones(4, 50))


def test_softmax_dropout_is_on_the_weights_as_torch():
    p = 0.3
    torch.manual_seed(0)
    ka = KernelAttention(E, H, dropout=p, feature="softmax", batch_first=True).train()
    x = torch.randn(3, 40, E)
    with torch.no_grad():
        out, w = ka(x, x, x, average_attn_weights=False)
        vals = ka.project_values(x).transpose(1, 2)
        rebuilt = ka.out_proj((w @ vals).transpose(1, 2).reshape(3, 40, E))
        frac = (w == 0).float().mean().item()
        out_eval, w_eval = ka.eval()(x, x, x, average_attn_weights=False)
    assert abs(frac - p) < 0.03  # 19200 weights
    torch.testing.assert_close(out, rebuilt, atol=1e-5, rtol=1e-5)  # the dropped ones made it
    assert (w_eval > 0).all() and torch.allclose(w_eval.sum(-1), torch.ones(3, H, 40))


@pytest.mark.parametrize("feature", ["softmax", "favor", "porf-softplus"])
def test_nested_tensor_encoder_after_from_mha_swap(feature):
    """An nn.TransformerEncoder built for nn.MultiheadAttention keeps its nested-tensor path
    (decided at construction): after swapping in KernelAttention.from_mha (torch's default
    dropout 0.1 accepted), eval + no_grad + padding hands it nested tensors."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, H, 32, batch_first=True)  # dropout 0.1
    enc = nn.TransformerEncoder(layer, num_layers=2).eval()
    assert enc.use_nested_tensor
    x = torch.randn(3, 7, E)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 4:] = True
    pad[2, 6:] = True
    with torch.no_grad():
        ref = enc(x, src_key_padding_mask=pad)
    for lay in enc.layers:
        lay.self_attn = KernelAttention.from_mha(lay.self_attn, feature, n_features=8)
        assert lay.self_attn.dropout == 0.1
    calls = []
    enc.layers[0].self_attn.register_forward_hook(lambda m, a, o: calls.append(a[0].is_nested))
    with torch.no_grad():
        out = enc(x, src_key_padding_mask=pad)
        enc.use_nested_tensor = False  # the regular path, for comparison
        plain = enc(x, src_key_padding_mask=pad)
    assert calls == [True, False]  # the nested path was taken
    keep = ~pad
    assert out.shape == (3, 7, E) and torch.isfinite(out[keep]).all()
    torch.testing.assert_close(out[keep], plain[keep], atol=1e-5, rtol=1e-5)
    if feature == "softmax":  # torch's own nested fast path agrees
        torch.testing.assert_close(out[keep], ref[keep], atol=1e-5, rtol=1e-5)


def test_nested_input_direct_and_its_errors():
    ka = KernelAttention(E, H, batch_first=True, feature="porf", n_features=8).eval()
    seqs = [torch.randn(n, E) for n in (3, 5)]
    nt = torch.nested.nested_tensor(seqs)
    with torch.no_grad():
        out, w = ka(nt, nt, nt)
        for s, o in zip(seqs, out.unbind(), strict=True):
            alone, _ = ka(s[None], s[None], s[None])
            torch.testing.assert_close(o, alone[0], atol=1e-5, rtol=1e-5)
    assert out.is_nested and w is None
    with pytest.raises(ValueError, match="all nested tensors or all regular"):
        ka(nt, torch.randn(2, 5, E), torch.randn(2, 5, E))
    with pytest.raises(ValueError, match="key_padding_mask and attn_mask must be None"):
        ka(nt, nt, nt, key_padding_mask=torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="needs batch_first=True"):
        KernelAttention(E, H, feature="porf", n_features=8)(nt, nt, nt)


def test_no_f_pad_of_bool_tensors(monkeypatch):
    """torch.compile's inductor (CPU) miscompiles F.pad of a bool tensor: the module widens its
    bool masks with torch.cat (the add_bias_kv / add_zero_attn keys, causal or padded)."""
    import torch.nn.functional as F

    real_pad = F.pad

    def strict_pad(t, *args, **kwargs):
        assert t.dtype != torch.bool, "F.pad of a bool tensor"
        return real_pad(t, *args, **kwargs)

    monkeypatch.setattr(F, "pad", strict_pad)
    x = torch.randn(2, 6, E)
    kpm = torch.zeros(2, 6, dtype=torch.bool)
    kpm[1, 4:] = True
    for feature in ("softmax", "favor"):
        ka = KernelAttention(
            E,
            H,
            add_bias_kv=True,
            add_zero_attn=True,
            batch_first=True,
            feature=feature,
            n_features=8,
        ).eval()
        with torch.no_grad():
            for causal in (False, True):
                out, w = ka(x, x, x, key_padding_mask=kpm, is_causal=causal)
                assert torch.isfinite(out).all() and w.shape == (2, 6, 8)
                ka(x, x, x, attn_mask=torch.randn(6, 6), key_padding_mask=kpm)


def test_tied_module_inside_an_encoder_built_for_mha_in_eval_with_grad():
    """tie_qk has no packed parameter, but nn.TransformerEncoder (built with
    nn.MultiheadAttention layers, nested tensors on) reads ``in_proj_weight.requires_grad`` of
    its first layer in eval mode with a padding mask: it gets the packed [QK; QK; V] blocks
    (it was None: AttributeError inside torch)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2)
    for block in enc.layers:
        block.self_attn = KernelAttention(
            16, 2, feature="favor", n_features=8, tie_qk=True, batch_first=True
        )
    enc.eval()
    x = torch.randn(3, 5, 16)
    pad = torch.zeros(3, 5, dtype=torch.bool)
    pad[0, 3:] = True
    out = enc(x, src_key_padding_mask=pad)  # grad enabled
    assert out.shape == (3, 5, 16) and torch.isfinite(out).all()
    attn = enc.layers[0].self_attn
    qk, v = attn.qk_proj_weight, attn.v_proj_weight
    assert torch.equal(attn.in_proj_weight, torch.cat([qk, qk, v]))
    assert attn.in_proj_weight.requires_grad
    assert torch.equal(attn.in_proj_bias[:16], attn.qk_proj_bias)
    # the packed view is derived, not a parameter: the state_dict is unchanged by it
    assert sorted(attn.state_dict()) == sorted(
        ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
        + ["feature_map.omega", "feature_map._extra_state"]
    )


# -- the remaining nn.MultiheadAttention surface, and the documented deviations ---------------
def test_reset_parameters_alias_and_merge_masks_are_torchs():
    """``_reset_parameters`` (torch's private name) re-initialises as ``reset_parameters``;
    ``merge_masks`` gives nn.MultiheadAttention's result for every combination of masks."""
    torch.manual_seed(0)
    ka = KernelAttention(E, H, add_bias_kv=True, feature="porf", n_features=8, seed=2)
    with torch.no_grad():
        for p in ka.parameters():
            p.zero_()
    torch.manual_seed(5)
    ka._reset_parameters()
    twin = KernelAttention(E, H, add_bias_kv=True, feature="porf", n_features=8, seed=2)
    torch.manual_seed(5)
    twin.reset_parameters()
    for (name, a), b in zip(ka.state_dict().items(), twin.state_dict().values(), strict=True):
        if torch.is_tensor(a):
            assert torch.equal(a, b), name
    assert ka.in_proj_weight.abs().sum() > 0  # the zeros were overwritten
    mha = nn.MultiheadAttention(E, H, batch_first=True)
    N, L = 2, 5
    g = torch.Generator().manual_seed(4)
    query = torch.randn(N, L, E, generator=g)
    kpm = torch.zeros(N, L, dtype=torch.bool)
    kpm[1, 3:] = True
    masks = {
        "attn_bool_2d": torch.rand(L, L, generator=g) < 0.3,
        "attn_float_2d": torch.randn(L, L, generator=g),
        "attn_float_3d": torch.randn(N * H, L, L, generator=g),
    }
    pads = {"kpm_bool": kpm, "kpm_float": torch.zeros(N, L).masked_fill(kpm, float("-inf"))}
    combos = [(None, None)] + [(None, p) for p in pads.values()]
    combos += [(a, None) for a in masks.values()]
    combos += [
        (masks["attn_bool_2d"], pads["kpm_bool"]),
        (masks["attn_float_2d"], pads["kpm_float"]),
        (masks["attn_float_3d"], pads["kpm_float"]),
    ]
    for am, kp in combos:
        ours, kind = ka.merge_masks(am, kp, query)
        ref, ref_kind = mha.merge_masks(am, kp, query)
        assert kind == ref_kind
        assert (ours is None) == (ref is None)
        if ref is not None:
            assert ours.dtype == ref.dtype and torch.equal(ours, ref)
    merged, kind = ka.merge_masks(masks["attn_bool_2d"], kpm, query)
    assert kind == 2 and merged.shape == (N, H, L, L)
    # bool masks are or-ed: a padded key is masked for every head and query
    assert merged[1, :, :, 3:].all() and torch.equal(merged[0, 0], masks["attn_bool_2d"])


@pytest.mark.parametrize("feature", ["softmax", "favor"])
def test_weights_in_the_autocast_dtype_as_torch(feature):
    """Under torch.autocast (CPU, bfloat16) nn.MultiheadAttention returns output and weights in
    bfloat16; outside it, and for float64 inputs inside it, in the input dtype."""
    mha = _mha(batch_first=True)
    ka = KernelAttention.from_mha(mha, feature_map=feature, n_features=8)
    q, k, v = _inputs(True)
    with torch.no_grad():
        for avg in (True, False):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                o1, w1 = mha(q, k, v, average_attn_weights=avg)
                o2, w2 = ka(q, k, v, average_attn_weights=avg)
            assert (o1.dtype, w1.dtype) == (torch.bfloat16, torch.bfloat16)  # torch's, measured
            assert (o2.dtype, w2.dtype) == (o1.dtype, w1.dtype)
            assert w2.shape == w1.shape
            if feature == "softmax":
                # the same attention in bfloat16: weights < 1, whose spacing is <= 2^-8 there;
                # two units allowed (observed max difference 2^-8, at a weight of 0.82)
                torch.testing.assert_close(w2.float(), w1.float(), atol=2**-7, rtol=0)
            o3, w3 = ka(q, k, v, average_attn_weights=avg)
            assert o3.dtype == w3.dtype == torch.float32
        mha64 = copy.deepcopy(mha).double()
        ka64 = copy.deepcopy(ka).double()
        q64, k64, v64 = (t.double() for t in (q, k, v))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            _, w1 = mha64(q64, k64, v64)
            _, w2 = ka64(q64, k64, v64)
    assert w1.dtype == w2.dtype == torch.float64


def _all_padding_case():
    """Batch element 1 has every key padded; query 2 of the attn_mask sees no key either."""
    L = 5
    kpm = torch.zeros(2, L, dtype=torch.bool)
    kpm[1] = True
    am = torch.zeros(L, L, dtype=torch.bool)
    am[2] = True
    return kpm, am


@pytest.mark.parametrize(
    ("feature", "eps"),
    [("softmax", 1e-6)] + [(f, e) for f in (*FEATURE_KINDS, "hedgehog") for e in (1e-6, 0.0)],
)
def test_queries_that_see_no_key_give_torchs_finite_output(feature, eps):
    """A query whose keys are all masked: nn.MultiheadAttention's SDPA path (need_weights=False,
    torch 2.13, measured) returns attention 0, i.e. out_proj.bias; we return that in every path
    (weights rows 0), with finite gradients; the other rows are unchanged (softmax: torch's)."""
    mha = _mha(batch_first=True)
    mha.train()  # torch's eval + no_grad fast path gives NaN (documented); SDPA path here
    ka = KernelAttention.from_mha(mha, feature_map=feature, n_features=8, eps=eps).eval()
    x = _inputs(True, L=5, S=5)[0]
    kpm, am = _all_padding_case()
    fut = torch.ones(5, 5, dtype=torch.bool).triu(1)  # torch needs the mask with is_causal
    bias = ka.out_proj.bias.detach()
    for kw, dead in (
        ({"key_padding_mask": kpm}, (1, slice(None))),
        ({"key_padding_mask": kpm, "attn_mask": fut, "is_causal": True}, (1, slice(None))),
        ({"attn_mask": am}, (slice(None), 2)),
    ):
        with torch.no_grad():
            ref, _ = mha(x, x, x, need_weights=False, **kw)
        assert torch.isfinite(ref).all()  # torch's SDPA path: finite
        torch.testing.assert_close(ref[dead], bias.expand_as(ref[dead]))
        for need_weights in (True, False):
            xg = x.clone().requires_grad_(True)
            out, w = ka(xg, xg, xg, need_weights=need_weights, **kw)
            assert torch.isfinite(out).all()
            torch.testing.assert_close(out[dead], ref[dead], atol=1e-6, rtol=0)
            if feature == "softmax":
                torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
            if need_weights:
                assert torch.isfinite(w).all() and torch.all(w[dead] == 0)
                live = torch.ones(w.shape[:2], dtype=torch.bool)
                live[dead] = False
                torch.testing.assert_close(w[live].sum(-1), torch.ones(int(live.sum())))
            out.square().sum().backward()
            assert torch.isfinite(xg.grad).all()
            assert all(torch.isfinite(p.grad).all() for p in ka.parameters() if p.grad is not None)
            ka.zero_grad()


def test_torch_gives_nan_for_queries_that_see_no_key_where_we_give_zero():
    """The documented deviation, measured: torch 2.13's MHA returns NaN for a query that sees
    no key with need_weights=True (a softmax over -inf only) and on its eval + no_grad fast
    path; ours gives out_proj.bias (attention 0) there too."""
    mha = _mha(batch_first=True)
    ka = KernelAttention.from_mha(mha, feature_map="softmax")
    x = _inputs(True, L=5, S=5)[0]
    kpm, _ = _all_padding_case()
    with torch.no_grad():
        for need_weights, train in ((True, True), (True, False), (False, False)):
            mha.train(train)
            ka.train(train)
            ref, _ = mha(x, x, x, key_padding_mask=kpm, need_weights=need_weights)
            out, _ = ka(x, x, x, key_padding_mask=kpm, need_weights=need_weights)
            assert torch.isnan(ref[1]).all()  # torch's result there
            torch.testing.assert_close(out[1], mha.out_proj.bias.expand(5, E))
            torch.testing.assert_close(out[0], ref[0], atol=1e-5, rtol=1e-5)


def test_non_finite_input_is_refused_on_the_cpu_where_torch_passes_it_through():
    """Documented deviation: the package's rule (finite input never gives a silent NaN;
    non-finite input gives InputError) over MHA's NaN-in, NaN-out. Checked on the CPU only."""
    from meanfield.errors import InputError

    mha = _mha(batch_first=True)
    ka = KernelAttention.from_mha(mha, feature_map="softmax")
    for bad in (float("nan"), float("inf")):
        q, k, v = _inputs(True)
        k[0, 1, 2] = bad
        with torch.no_grad():
            ref, _ = mha(q, k, v)
        assert not torch.isfinite(ref).all()  # torch passes it through
        with pytest.raises(InputError, match="key has 1 non-finite entry"):
            ka(q, k, v)


def test_qkv_same_embed_dim_is_false_by_design():
    """Documented deviation: False even when kdim == vdim == embed_dim (torch: True), so torch's
    containers never take the fused softmax fast path that would bypass forward."""
    assert nn.MultiheadAttention(E, H)._qkv_same_embed_dim is True
    for opts in ({}, {"kdim": 6, "vdim": 10}):
        ka = KernelAttention(E, H, feature="favor", n_features=8, **opts)
        assert ka._qkv_same_embed_dim is False
        assert (ka.in_proj_weight is not None) == (
            not opts
        )  # torch's parameter layout all the same
    layer = nn.TransformerEncoderLayer(E, H, 32, dropout=0.0, batch_first=True).eval()
    layer.self_attn = KernelAttention.from_mha(layer.self_attn, "favor", n_features=8)
    calls = []
    layer.self_attn.register_forward_hook(lambda *a: calls.append(1))
    with torch.no_grad():  # eval + no_grad: torch's fast path if the flag were True
        layer(torch.randn(2, 5, E))
    assert calls == [1]  # forward was called: the kernel attention ran


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_torch_jit_script_is_not_supported():
    """Documented deviation: TorchScript cannot compile the module (nested-tensor handling,
    mask planning, feature-map objects); torch's MHA scripts."""
    torch.jit.script(nn.MultiheadAttention(E, H))
    with pytest.raises((RuntimeError, torch.jit.frontend.FrontendError)):
        torch.jit.script(KernelAttention(E, H, feature="favor", n_features=8))


def test_torch_compile_of_the_module_gives_the_eager_result():
    """The compiler the deviation list points to instead of torch.jit.script."""
    torch.manual_seed(0)
    ka = KernelAttention(E, H, feature="favor", n_features=8, batch_first=True).eval()
    x = torch.randn(2, 6, E)
    kpm = torch.zeros(2, 6, dtype=torch.bool)
    kpm[1, 4:] = True
    compiled = torch.compile(ka, backend="aot_eager")
    with torch.no_grad():
        out, _ = compiled(x, x, x, key_padding_mask=kpm, need_weights=False)
        ref, _ = ka(x, x, x, key_padding_mask=kpm, need_weights=False)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-5)
