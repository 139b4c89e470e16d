"""KernelAttention as a drop-in for torch.nn.MultiheadAttention, tested against torch itself."""

import copy
import itertools

import pytest
import torch
from torch import nn

from meanfield.attention.features import FEATURE_KINDS
from meanfield.attention.linear import KernelAttention, is_causal_mask

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
        o1, _ = mha(q, k, v, need_weights=False, **kw)
        o2, w2 = ka(q, k, v, **kw)  # need_weights defaults to False here
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
        assert torch.equal(other.q_proj.weight, mha.in_proj_weight[:E])
    sep = _mha(batch_first=True, kdim=6, vdim=10)
    ka = KernelAttention(E, H, kdim=6, vdim=10, feature="porf", n_features=8)
    ka.load_state_dict(sep.state_dict())
    assert torch.equal(ka.k_proj.weight, sep.k_proj_weight) and ka.in_proj_weight is None
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
    mha = _mha(batch_first=False, dropout=0.1)
    with pytest.raises(ValueError, match="pass dropout=0.0"):
        KernelAttention.from_mha(mha, feature_map=feature)
    ka = KernelAttention.from_mha(mha, feature_map=feature, n_features=8, seed=3, dropout=0.0)
    assert not ka.batch_first and ka.feature_map.seed == 3
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
        E, H, add_bias_kv=True, add_zero_attn=True, feature=feature, n_features=8
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
        vals = torch.cat([attn.v_proj(x), attn.bias_v.expand(2, 1, E), torch.zeros(2, 1, E)], 1)
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
    v = attn._split(attn.v_proj(x)).double().transpose(1, 2)
    K = fm.raw_features(q) @ fm.raw_features(k).transpose(-1, -2)
    w = K * torch.exp(bias.double())
    o = (w / w.sum(-1, keepdim=True)) @ v
    return attn.out_proj(o.transpose(1, 2).reshape(x.shape).float())


@pytest.mark.parametrize("feature", FEATURE_KINDS)
def test_general_masks_are_applied_exactly(feature):
    torch.manual_seed(0)
    attn = KernelAttention(E, H, feature=feature, n_features=16, eps=0.0).eval()
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
    attn = KernelAttention(E, H, feature="porf", n_features=8).eval()
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
    ka = KernelAttention(E, H, feature="favor", n_features=8, dtype=torch.float64)
    assert ka.q_proj.weight.dtype == torch.float64 and ka.feature_map.omega.dtype == torch.float32
    x = torch.randn(2, 5, E, dtype=torch.float64)
    out, _ = ka(x, x, x, is_causal=True)
    assert out.dtype == torch.float64
    for feature in ("favor", "softmaxfeat"):  # bf16 parameters, fp32 attention inside
        kb = KernelAttention(E, H, feature=feature, n_features=8, dtype=torch.bfloat16).eval()
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
