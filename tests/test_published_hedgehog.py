"""The published Hedgehog (Zhang et al., ICLR 2024) in the pretrained study, end to end.

``linearize(model, "hedgehog")`` on a tiny random BERT, the per-head attention against a
per-head loop, distillation of the maps' parameters with the Hedgehog loss, a fine-tuning
step that trains them, the study's ``hedgehog-published`` variant and its report rows.
"""

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from meanfield.attention.hedgehog import HedgehogFeatureMap  # noqa: E402
from meanfield.attention.learn_features import (  # noqa: E402
    attention_cross_entropy,
    distil_feature_maps,
    phase_a_pretrained,
    record_inputs,
)
from meanfield.attention.linearize import (  # noqa: E402
    _hf_kernel_attention,
    attention_modules,
    feature_maps_of,
    linearize,
)
from meanfield.attention.pretrained import (  # noqa: E402
    encode_pretrained,
    load_pretrained_classifier,
    save_tiny_bert,
)
from meanfield.errors import InputError  # noqa: E402

TEXTS = ["a good film", "a bad film", "great story", "awful plot", "very fine", "not good"]


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny models: a second thread only adds synchronisation
    yield


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    save_tiny_bert(folder, hidden_size=16, n_layers=2, n_heads=2, seed=0)
    return folder


@pytest.fixture(scope="module")
def data(bert_dir):
    _, tok = load_pretrained_classifier(bert_dir)
    labels = [1, 0, 1, 0, 1, 0] * 6
    return encode_pretrained(tok, TEXTS * 6, None, labels, max_length=10)


def _per_head_loop_attention(fm, q, k, v, keep):
    """Brute-force truth: head by head, that head's own W, b; explicit weights, masked keys.
    q, k, v: (N, H, L, d); keep: (N, L) bool. Returns (N, L, H, d)."""
    out = torch.zeros(q.shape[0], q.shape[2], q.shape[1], v.shape[-1], dtype=torch.float64)
    for h in range(q.shape[1]):

        def phi(x, side, h=h):
            u = x.double() @ getattr(fm, f"{side}_weight")[h].double().T
            u = u + getattr(fm, f"{side}_bias")[h].double()
            return torch.cat([u.softmax(-1), (-u).softmax(-1)], -1)

        a = phi(q[:, h], "query") @ phi(k[:, h], "key").transpose(-1, -2)  # (N, L, S)
        a = a * keep[:, None, :]
        a = a / (a.sum(-1, keepdim=True) + 1e-6)  # kernel attention's eps
        out[:, :, h] = a @ v[:, h].double()
    return out


def test_linearize_hedgehog_gives_each_head_its_own_map_in_the_hf_attention(bert_dir):
    model, _ = load_pretrained_classifier(bert_dir)
    linearize(model, "hedgehog")
    fms = feature_maps_of(model)
    assert [type(fm) for fm in fms] == [HedgehogFeatureMap] * 2
    assert (fms[0].num_heads, fms[0].head_dim, fms[0].n_features) == (2, 8, 8)  # m = d_h
    # every head's map differs (else one map for all heads would pass too)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in fms[0].parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=gen))
    module = [m for m in model.modules() if getattr(m, "feature_map", None) is fms[0]][0]
    q, k, v = (torch.randn(3, 2, 5, 8, generator=gen) for _ in range(3))
    keep = torch.ones(3, 5, dtype=torch.bool)
    keep[0, 3:] = False
    with torch.no_grad():
        out, _ = _hf_kernel_attention(module.eval(), q, k, v, keep, scaling=8**-0.5)
    truth = _per_head_loop_attention(fms[0], q, k, v, keep)
    # float32 features against float64 loop: agreement to float32 rounding
    torch.testing.assert_close(out.double(), truth, atol=1e-5, rtol=1e-5)


def test_distillation_trains_the_maps_and_fine_tuning_trains_them_further(bert_dir, data):
    model, _ = load_pretrained_classifier(bert_dir)
    # the random BERT attends almost uniformly, as does the identity start (TV 0.001): its
    # query and key weights x 20 make a peaked teacher far from the start (TV 0.36)
    with torch.no_grad():
        for module in attention_modules(model):
            module.query.weight.mul_(20.0)
            module.key.weight.mul_(20.0)
    linearize(model, "hedgehog")
    start = [p.detach().clone() for fm in feature_maps_of(model) for p in fm.parameters()]
    res = distil_feature_maps(model, data, n_sequences=24, n_heldout=12, steps=60, lr=0.05)
    # held-out sequences (deterministic: seeded choice, no sampling): the Hedgehog loss and
    # the TV distance to softmax both fall; observed CE 1.28 -> 0.92, TV 0.359 -> 0.035
    assert res["loss_after"] < res["loss_before"]
    assert res["tv_before"] > 0.2 and res["tv_after"] < 0.5 * res["tv_before"], res
    fms = feature_maps_of(model)
    now = [p for fm in fms for p in fm.parameters()]
    assert all(p.requires_grad and p.grad is None for p in now)  # trainable, no stale grad
    assert all(not torch.equal(a, b) for a, b in zip(start, now, strict=True))
    # the reported TV is the installed maps' TV, recomputed by the per-head loop
    held = record_inputs(model, data.subset(np.arange(12)))
    q, k, pad = held[0][0]
    with torch.no_grad():
        _, tv = attention_cross_entropy(fms[0], None, [(q, k, pad)])
        keep = ~pad if pad is not None else torch.ones(q.shape[0], q.shape[2], dtype=torch.bool)
        ident = torch.eye(q.shape[2]).expand(q.shape[0], q.shape[1], -1, -1)
        # attention weights of the loop: its output for V = the identity (per head)
        lin = _per_head_loop_attention(fms[0], q, k, ident, keep).transpose(1, 2)
        lin = lin / lin.sum(-1, keepdim=True)  # drop the eps of the output formula
        logits = (q @ k.transpose(-1, -2)).double() / np.sqrt(q.shape[-1])
        soft = logits.masked_fill(~keep[:, None, None, :], -np.inf).softmax(-1)
        rows = 0.5 * (lin - soft).abs().sum(-1)
        tv_loop = float(rows[keep[:, None, :].expand_as(rows)].mean())
    assert tv == pytest.approx(tv_loop, abs=1e-5)
    # fine-tuning with the maps trainable: one AdamW step moves them
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    before = [p.detach().clone() for p in now]
    loss = torch.nn.functional.cross_entropy(
        model(data.input_ids[:8], data.padding_mask[:8], data.segment_ids[:8]), data.labels[:8]
    )
    loss.backward()
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in now)
    opt.step()
    assert all(not torch.equal(a, b) for a, b in zip(before, now, strict=True))


def test_phase_a_refuses_the_published_hedgehog_map(bert_dir, data):
    model, _ = load_pretrained_classifier(bert_dir)
    linearize(model, "hedgehog")
    with pytest.raises(InputError, match="random feature map"):
        phase_a_pretrained(model, data, n_align=20, n_heldout=8, n_steps=2)


def test_study_runs_the_published_hedgehog_and_reports_it(bert_dir, tmp_path):
    from meanfield.studies.nlp import FIXTURES, check_config, load_preset, run_study
    from meanfield.studies.nlp_report import load_pretrained_runs, write_report

    cfg = load_preset("nlp_pretrained", "tiny")
    cfg.update(data_dir=FIXTURES, model_dir=str(bert_dir), seeds=[0], features=[])
    cfg.update(methods=["hedgehog-published"], controls={"kinds": []})
    run_study(check_config(cfg), tmp_path, progress=False)
    lin = [r for r in load_pretrained_runs(tmp_path) if r["stage"] == "linearized"]
    assert [r["variant"] for r in lin] == ["hedgehog-published-hedgehog"]
    # the distillation was recorded (held-out TV before and after) and the maps' size:
    # 2 layers x 2 maps (query, key) x 2 heads x (8 x 8 + 8)
    assert lin[0]["feature_map_parameters"] == 576
    assert np.isfinite(lin[0]["hedgehog_tv_after"])
    write_report(tmp_path)
    text = (tmp_path / "report.md").read_text()
    row = [line for line in text.splitlines() if line.startswith("| hedgehog-published-hedgehog")]
    assert len(row) == 2  # its accuracy row and its "what learning did" (TV) row
    assert "| hedgehog-published-hedgehog | 1 | TV to softmax attention |" in row[1]


def test_report_pairs_kernel_with_the_published_hedgehog_and_reads_earlier_names(tmp_path):
    """Holm over the planned family: data set a runs every method (Kernel − vanilla, Kernel −
    Hedgehog-loss, Kernel − published), b lists three methods (no published): 5 planned;
    with one computable comparison its Holm p is min(1, 5 p). The Ω-only runs recorded as
    ``hedgehog-favor`` (the earlier name, also in the configuration) are reported as
    ``hedgehog-loss-favor``."""
    import xarray as xr
    from scipy import stats

    from meanfield.results import save_dataset
    from meanfield.studies.nlp_report import write_report

    cfg = {
        "name": "t",
        "datasets": [
            {"name": "a", "task": "rotten_tomatoes"},
            {"name": "b", "task": "sst2", "methods": ["vanilla", "kernel", "hedgehog"]},
        ],
        "features": ["favor"],
        "methods": ["vanilla", "kernel", "hedgehog", "hedgehog-published"],
        "controls": {},
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    acc = {
        "kernel-favor": [0.71, 0.74, 0.72],
        "hedgehog-published-hedgehog": [0.80, 0.81, 0.83],
        "hedgehog-favor": [0.79, 0.80, 0.80],
    }
    runs = tmp_path / "linearized" / "runs"
    runs.mkdir(parents=True)
    for variant, values in acc.items():
        for seed, a in enumerate(values):
            ds = xr.Dataset({k: ((), a) for k in ("clean_accuracy", "noisy_accuracy")})
            ds["clean_ece"] = ((), 0.0)
            ds.attrs.update(sweep_dataset="a", sweep_seed=seed, sweep_variant=variant)
            save_dataset(ds, runs / f"{variant}-{seed}.nc")
    rep = write_report(tmp_path)
    assert (rep["comparisons"], rep["planned"]) == (2, 5)
    text = (tmp_path / "report.md").read_text()
    assert [r["variant"] for r in rep["table"]] == [
        "kernel-favor",
        "hedgehog-loss-favor",
        "hedgehog-published-hedgehog",
    ]
    assert "hedgehog-favor" not in text
    d_pub = np.array(acc["kernel-favor"]) - np.array(acc["hedgehog-published-hedgehog"])
    d_loss = np.array(acc["kernel-favor"]) - np.array(acc["hedgehog-favor"])
    p_pub = stats.ttest_1samp(d_pub, 0.0).pvalue
    p_loss = stats.ttest_1samp(d_loss, 0.0).pvalue
    # Holm over 5 planned (3 at p = 1): the smaller p times 5, the larger times 4 (monotone)
    lo_p, hi_p = sorted([p_pub, p_loss])
    holm = {lo_p: min(1.0, 5 * lo_p), hi_p: min(1.0, max(5 * lo_p, 4 * hi_p))}
    rows = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| a |")}
    pub = rows["kernel-favor − hedgehog-published-hedgehog (Kernel − published Hedgehog)"]
    loss = rows["kernel-favor − hedgehog-loss-favor (Kernel − Hedgehog-loss (Ω only))"]
    assert pub.endswith(f"| {p_pub:.3g} | {holm[p_pub]:.3g} |")
    assert loss.endswith(f"| {p_loss:.3g} | {holm[p_loss]:.3g} |")


def test_study_names_old_and_new(tmp_path):
    from meanfield.studies.nlp import check_config
    from meanfield.studies.nlp_report import pretrained_variants, recorded_variant, split_variant

    where = {"encoder": "pretrained", "model_dir": "model"}
    cfg = check_config(
        {
            **where,
            "datasets": [{"name": "q", "task": "qqp", "methods": ["hedgehog"]}],
            "features": ["favor"],
            "methods": ["hedgehog", "hedgehog-published"],
            "controls": {"kinds": []},
        }  # fmt: skip
    )
    assert cfg["methods"] == ["hedgehog-loss", "hedgehog-published"]
    assert pretrained_variants(cfg) == ["hedgehog-loss-favor", "hedgehog-published-hedgehog"]
    assert pretrained_variants(cfg, cfg["datasets"][0]) == ["hedgehog-loss-favor"]
    assert recorded_variant("hedgehog-loss-favor") == "hedgehog-favor"
    with pytest.raises(InputError, match="variant must be"):
        split_variant("hedgehog-published-favor")  # the published method brings its own map
    with pytest.raises(InputError, match="methods must be among"):
        check_config(
            {**where, "datasets": [{"name": "q", "task": "qqp"}], "methods": ["hedgehogg"]}
        )
