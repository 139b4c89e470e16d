"""Phase A (learning the attention particles) and Phase B (fine-tuning with Omega frozen).

Phase A (THEORY.md §2-3, §7) learns each layer's feature matrix ``Omega`` (its rows are the
particles) by projected Langevin dynamics -- :func:`meanfield.dynamics.langevin.simulate` on an
:class:`meanfield.energy.Energy`; nothing here re-implements the energy or the step.

What is aligned, and at which scale (``representation``)
--------------------------------------------------------
Attention evaluates its kernel on *token* queries and keys, scaled inside the feature map to
``x~ = x / d_h^(1/4)``. In linear attention a sequence enters only through the sums
``sum_s phi(k_s)`` and ``sum_s phi(k_s) v_s^T``, i.e. through the mean feature embedding of
its keys. The default, ``representation="pooled"``, aligns the kernel on the per-head mean
keys of each sequence (labelled with the sequence's label), *rescaled* so that their mean
norm is that of the token keys: averaging shrinks the norm about 4x, and at that small scale
the positive kernel is nearly constant, so an unrescaled alignment rises mainly by inflating
``|omega|`` (the earlier design, kept as ``"pooled-raw"`` only to reproduce it).
``"tokens"`` aligns individual token queries and keys (``sides``) at exactly the attention
scale. Measured on Rotten Tomatoes (FAVOR, warmed-up model, 2048 aligned sequences, 512
held out): tokens raise the training alignment 5x but the held-out one not at all (one
token says little about a review's label); pooled keys raise the held-out centred alignment
from 0.0016 to 0.0113 and bring attention *closer* to softmax (mean TV 0.29 -> 0.20), hence
the default.

Keeping the particles at the prior's scale (``confinement="prior"``)
--------------------------------------------------------------------
The energy is ``E(mu) = int |w|^2/2 dmu - gamma A(mu) + lam int int k_s dmu dmu`` in the
mean-field regime at ``beta = 1``. Without data its Gibbs law is ``N(0, I)^m``: exactly the
FAVOR+ prior, so vanilla ``Omega`` is a sample of the ``gamma = 0`` law, and the alignment
*tilts* it by ``exp(gamma N A)``: the learned law stays absolutely continuous with respect to
the prior (THEORY §2-3). ``gamma`` (``alignment_weight``) is the one knob of the tilt. The
dynamics run on the equivalent energy ``E / gamma`` at ``beta = gamma`` (the package's
``QuadraticPotential(1/gamma)``) with step ``tau * gamma``, so ``tau`` and ``t = tau *
n_steps`` are in units of the prior's relaxation time (the OU rate is 1): ``t = 3`` forgets
the starting point to ``e^-3``. ``confinement=None`` gives the old, unconfined low-temperature
run (``beta = 1e4``), which inflates ``|omega|`` (kept to reproduce it).

Repulsion at the particles' spacing (``repulsion_ratio``)
---------------------------------------------------------
With ``m = 32`` particles in ``d_h = 16`` the Coulomb exponent ``s = d_h - 2`` makes the force
``~ r^-15`` at the typical spacing ``r ~ 5``: about ``1e-11`` of the alignment force, i.e.
absent. The default is the Riesz exponent ``s = 1`` (integrable in every ``d_h >= 2``, long
range), and ``lam`` is *calibrated*: at the starting particles the root-mean-square repulsive
force is ``repulsion_ratio`` times the root-mean-square alignment force (both ``N grad H_N``
on the full alignment data). An explicit ``lam`` overrides the calibration.

Diagnostics (:class:`PhaseAResult`, per layer): mean row norm before/after (and the prior's
``E|N(0, I)| = chi mean``), fraction of rows on the domain boundary, alignment on the train
and on held-out sequences before/after (with the attention's own features, so softmaxfeat is
measured with its real softmax features), the repulsion/alignment force ratio before/after,
and how far linear attention moved from softmax attention on held-out sequences: the mean
total-variation distance between its attention rows and ``softmax(q k^T / sqrt(d_h))``, and
the mean attention entropy.

Phase B: ``Omega`` is a buffer, so it is frozen by construction; every parameter is trained
by :func:`meanfield.attention.training.train`. Kernel-X is X after Phase A + Phase B, vanilla
X is X after Phase B alone, both from the same warmed-up weights.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch

from .._validation import check_choice, check_int, check_positive
from .features import chi_mean
from .model import TransformerClassifier
from .training import (
    EncodedData,
    encode,
    iterate_batches,
    predict_proba,
    split_validation,
    train,
    validation_loss,
)

__all__ = [
    "EncodedData",
    "encode",
    "iterate_batches",
    "split_validation",
    "train",
    "predict_proba",
    "validation_loss",
    "phase_b",
    "token_samples",
    "attention_kernel_alignment",
    "attention_vs_softmax",
    "PhaseAResult",
    "PhaseASettings",
    "phase_a",
    "ENERGY_FEATURE",
    "REPRESENTATIONS",
    "ALIGNMENTS",
]

#: mean-field feature (meanfield.features) used by Phase A for each attention feature map
ENERGY_FEATURE = {
    "favor": "positive",
    "porf": "positive",
    "porf-softplus": "softplus",
    "softmaxfeat": "positive",
}
REPRESENTATIONS = ("tokens", "pooled", "pooled-raw")
ALIGNMENTS = ("normalised", "centred", "linear")


def phase_b(model: TransformerClassifier, data: EncodedData, **train_kwargs) -> dict:
    """Phase B: train every parameter except the (frozen) feature matrices.

    Checks that no feature matrix is a trainable parameter, then calls :func:`train`; the
    feature matrices are compared before and after to prove they stayed frozen.

    See Also
    --------
    phase_a : learns the ``Omega`` that this phase keeps frozen.
    meanfield.attention.training.train : the training loop it runs.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.model import TransformerClassifier
    >>> from meanfield.attention.training import EncodedData
    >>> g = torch.Generator().manual_seed(0)
    >>> ids = torch.randint(6, 10, (64, 6), generator=g)
    >>> labels = torch.arange(64) % 2
    >>> ids[labels == 1, 2] = 5  # the label: does token 5 occur
    >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.full((64,), 6), labels)
    >>> _ = torch.manual_seed(0)
    >>> model = TransformerClassifier(10, d_model=16, n_heads=2, n_layers=1, d_ff=32,
    ...                               max_length=6, n_features=8, dropout=0.0)
    >>> omega = model.feature_maps()[0].omega.clone()
    >>> info = phase_b(model, data, epochs=1, batch_size=16, warmup_steps=0)
    >>> info["steps"], bool(torch.equal(model.feature_maps()[0].omega, omega))
    (4, True)
    """
    before = [None if fm is None else fm.omega.clone() for fm in model.feature_maps()]
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    for fm in model.feature_maps():
        if fm is not None and id(fm.omega) in trainable:  # pragma: no cover - by construction
            raise RuntimeError("feature matrix omega must not be a trainable parameter")
    info = train(model, data, **train_kwargs)
    for b, fm in zip(before, model.feature_maps(), strict=True):
        if fm is not None and not torch.equal(b, fm.omega):  # pragma: no cover
            raise RuntimeError("Phase B changed a feature matrix; it must stay frozen")
    return info


# ---------------------------------------------------------------------------------------
# what Phase A aligns
# ---------------------------------------------------------------------------------------
@torch.no_grad()
def _layer_projections(model, data: EncodedData, layer: int, batch_size: int = 256):
    """Token queries and keys of one layer, per sequence: list of ((L_i, H, d_h) q, k)."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for ids, mask, seg, _ in iterate_batches(data, batch_size, shuffle=False):
        q, k = model.layer_projections(ids.to(device), mask.to(device), seg.to(device), layer)
        q, k = q.double().cpu(), k.double().cpu()
        lengths = (~mask).sum(1)
        for i in range(ids.shape[0]):
            n = int(lengths[i])
            out.append((q[i, :n], k[i, :n]))
    return out


def token_samples(
    model: TransformerClassifier,
    data: EncodedData,
    layer: int,
    *,
    representation: str = "pooled",
    sides: str = "queries+keys",
    tokens_per_sequence: int = 4,
    seed: int = 0,
):
    """The samples Phase A aligns for one layer: vectors in ``R^{d_h}`` with labels +-1.

    Parameters
    ----------
    model : TransformerClassifier
    data : EncodedData
        The sequences (binary labels 0/1 -> -1/+1).
    layer : int
    representation : {"tokens", "pooled", "pooled-raw"}
        See the module notes.
    sides : {"queries+keys", "keys"}
        Token queries and keys, or keys only (ignored by the pooled representations, which
        pool keys; with ``tie_qk`` queries are keys).
    tokens_per_sequence : int
        Tokens drawn per sequence, head and side (``"tokens"``; fewer if the sequence is
        shorter).
    seed : int

    Returns
    -------
    X : numpy.ndarray, shape (n_samples, d_h)
        *Unscaled* vectors: the feature maps apply ``d_h^(-1/4)`` themselves.
    y : numpy.ndarray, shape (n_samples,)
        Labels in {-1, +1}.

    See Also
    --------
    phase_a : aligns the kernel on these samples.
    attention_kernel_alignment : their alignment under an attention feature map.
    meanfield.attention.learn_features.phase_a_pretrained : the same pooled keys, per head.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.model import TransformerClassifier
    >>> from meanfield.attention.training import EncodedData
    >>> g = torch.Generator().manual_seed(0)
    >>> ids = torch.randint(6, 10, (64, 6), generator=g)
    >>> labels = torch.arange(64) % 2
    >>> ids[labels == 1, 2] = 5  # the label: does token 5 occur
    >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.full((64,), 6), labels)
    >>> _ = torch.manual_seed(0)
    >>> model = TransformerClassifier(10, d_model=16, n_heads=2, n_layers=1, d_ff=32,
    ...                               max_length=6, n_features=8, dropout=0.0)
    >>> X, y = token_samples(model, data, layer=0)
    >>> X.shape, sorted(set(y.tolist()))  # (n_sequences * n_heads, d_h): the pooled keys
    ((128, 8), [-1.0, 1.0])
    """
    check_choice("representation", representation, REPRESENTATIONS)
    check_choice("sides", sides, ("queries+keys", "keys"))
    tokens_per_sequence = check_int("tokens_per_sequence", tokens_per_sequence)
    proj = _layer_projections(model, data, layer)
    labels = np.where(data.labels.numpy() > 0, 1.0, -1.0)
    rng = np.random.default_rng(seed)
    X, y = [], []
    if representation == "tokens":
        use_q = sides == "queries+keys" and not model.config["tie_qk"]
        for (q, k), lab in zip(proj, labels, strict=True):
            L, H, _ = k.shape
            for h in range(H):
                pick = rng.permutation(L)[:tokens_per_sequence]
                X.append(k[pick, h])
                if use_q:
                    pick = rng.permutation(L)[:tokens_per_sequence]
                    X.append(q[pick, h])
                y += [lab] * (len(pick) * (2 if use_q else 1))
        return torch.cat(X).numpy(), np.asarray(y)
    pooled = torch.stack([k.mean(0) for _, k in proj])  # (n, H, d_h)
    if representation == "pooled":
        token_norm = torch.cat([k.reshape(-1, k.shape[-1]) for _, k in proj]).norm(dim=1).mean()
        pooled = pooled * (token_norm / pooled.norm(dim=-1).mean())
    n, H, d = pooled.shape
    return pooled.reshape(n * H, d).numpy(), np.repeat(labels, H)


def attention_kernel_alignment(feature_map, X, y, *, centred: bool = False) -> float:
    """Alignment of the attention kernel with the labels on samples ``X``.

    ``A = <K, T>_F / (||K||_F ||T||_F)`` (Cristianini; centred: Cortes et al. 2012) with
    ``K = Phi Phi^T``, ``Phi`` the *unshifted* features of the attention's own feature map
    (:meth:`AttentionFeatureMap.raw_features`, so softmaxfeat is measured with its real softmax
    features), ``T = y y^T``; computed by :func:`meanfield.learners.kernel_alignment`.

    Parameters
    ----------
    feature_map : meanfield.attention.features.AttentionFeatureMap
    X : array_like, shape (n, d_h)
        Unscaled vectors (the feature map scales its input).
    y : array_like, shape (n,)
        Labels in {-1, +1}.
    centred : bool

    See Also
    --------
    meanfield.learners.kernel_alignment : the alignment of a feature matrix.
    meanfield.attention.learn_features.DeployedKernelAlignment : the same centred alignment
        as an energy term of the particles.

    Examples
    --------
    >>> from meanfield.attention.features import make_feature_map
    >>> fm = make_feature_map("favor", head_dim=4, n_features=64, seed=0)
    >>> X = np.random.default_rng(0).normal(size=(20, 4))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> -1.0 <= attention_kernel_alignment(fm, X, y, centred=True) <= 1.0
    True
    """
    from ..learners import kernel_alignment

    x = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    phi = feature_map.raw_features(x).numpy()
    return kernel_alignment(phi, np.asarray(y), centred=centred)


@torch.no_grad()
def attention_vs_softmax(feature_map, projections, max_sequences: int = 256) -> dict:
    """How far linear attention with ``feature_map`` is from softmax attention.

    For each sequence and head, the linear-attention weights
    ``a_ts = phi(q_t).phi(k_s) / sum_s' phi(q_t).phi(k_s')`` (float64, unshifted features)
    against ``softmax_s(q_t.k_s / sqrt(d_h))``.

    Parameters
    ----------
    feature_map : AttentionFeatureMap
    projections : list of (q, k), each a tensor of shape (L_i, H, d_h)
        From the layer whose feature map this is.
    max_sequences : int

    Returns
    -------
    dict
        ``tv_to_softmax``: mean over rows of the total-variation distance (in [0, 1]);
        ``entropy``: mean row entropy of the linear attention (nats); ``entropy_softmax``:
        that of softmax attention.

    See Also
    --------
    meanfield.attention.learn_features.attention_cross_entropy : the Hedgehog loss and the
        same TV distance, on recorded queries and keys.
    meanfield.attention.linear.softmax_attention : the exact attention it compares with.

    References
    ----------
    .. [1] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021.

    Examples
    --------
    >>> from meanfield.attention.features import make_feature_map
    >>> fm = make_feature_map("favor", head_dim=4, n_features=256, seed=0)
    >>> q = torch.randn(5, 2, 4, dtype=torch.float64)  # one sequence: L = 5, H = 2, d_h = 4
    >>> out = attention_vs_softmax(fm, [(q, q)])
    >>> sorted(out), 0.0 <= out["tv_to_softmax"] <= 1.0
    (['entropy', 'entropy_softmax', 'tv_to_softmax'], True)
    """
    tv, ent, ent_s, rows = 0.0, 0.0, 0.0, 0
    for q, k in projections[:max_sequences]:
        d = q.shape[-1]
        qh, kh = q.transpose(0, 1), k.transpose(0, 1)  # (H, L, d)
        pq, pk = feature_map.raw_features(qh), feature_map.raw_features(kh)
        w = pq @ pk.transpose(-1, -2)
        w = w / w.sum(-1, keepdim=True).clamp_min(1e-300)
        s = torch.softmax(qh @ kh.transpose(-1, -2) / math.sqrt(d), dim=-1)
        tv += float(0.5 * (w - s).abs().sum(-1).sum())
        ent += float(-(w * torch.log(w.clamp_min(1e-300))).sum(-1).sum())
        ent_s += float(-(s * torch.log(s.clamp_min(1e-300))).sum(-1).sum())
        rows += w.shape[0] * w.shape[1]
    return {"tv_to_softmax": tv / rows, "entropy": ent / rows, "entropy_softmax": ent_s / rows}


# ---------------------------------------------------------------------------------------
# Phase A
# ---------------------------------------------------------------------------------------
@dataclass
class PhaseAResult:
    """What Phase A did; every list is indexed by layer.

    See Also
    --------
    phase_a, meanfield.attention.learn_features.phase_a_pretrained : what fills it.
    PhaseASettings : the settings recorded in ``settings``.

    Examples
    --------
    >>> res = PhaseAResult(seconds=1.5, lam=[0.2, 0.4])
    >>> res.summary()["lam"], res.summary()["layers"]["lam"]
    (0.30000000000000004, [0.2, 0.4])
    """

    seconds: float = 0.0
    settings: dict = field(default_factory=dict)
    lam: list = field(default_factory=list)
    gamma: list = field(default_factory=list)
    eta: list = field(default_factory=list)
    n_samples: list = field(default_factory=list)
    row_norm_before: list = field(default_factory=list)
    row_norm_after: list = field(default_factory=list)
    prior_row_norm: list = field(default_factory=list)
    frac_on_boundary: list = field(default_factory=list)
    align_train_before: list = field(default_factory=list)
    align_train_after: list = field(default_factory=list)
    align_heldout_before: list = field(default_factory=list)
    align_heldout_after: list = field(default_factory=list)
    force_ratio_before: list = field(default_factory=list)
    force_ratio_after: list = field(default_factory=list)
    tv_to_softmax_before: list = field(default_factory=list)
    tv_to_softmax_after: list = field(default_factory=list)
    entropy_before: list = field(default_factory=list)
    entropy_after: list = field(default_factory=list)
    entropy_softmax: list = field(default_factory=list)
    energy_before: list = field(default_factory=list)
    energy_after: list = field(default_factory=list)
    mean_displacement: list = field(default_factory=list)

    def summary(self) -> dict:
        """Means over layers (plain floats), plus the per-layer lists under ``layers``.

        Returns
        -------
        dict
            ``phase_a_seconds``; for each per-layer field its mean (NaN when empty); and
            ``layers``, the per-layer lists as floats.

        Examples
        --------
        >>> s = PhaseAResult(seconds=2.0, gamma=[1.0, 3.0]).summary()
        >>> s["phase_a_seconds"], s["gamma"], s["layers"]["gamma"], s["eta"] != s["eta"]
        (2.0, 2.0, [1.0, 3.0], True)
        """
        out = {"phase_a_seconds": self.seconds}
        per_layer = {}
        for k, v in asdict(self).items():
            if isinstance(v, list):
                per_layer[k] = [float(x) for x in v]
                out[k] = float(np.mean(v)) if v else float("nan")
        out["layers"] = per_layer
        return out


def _rms(x: torch.Tensor) -> float:
    return float(x.pow(2).sum(-1).mean().sqrt())


@dataclass(frozen=True)
class PhaseASettings:
    """The keyword settings of :func:`phase_a`, checked when created (before any work).

    Parameters
    ----------
    n_align, n_heldout : int
        Sequence counts (>= 2 each, ``n_align + n_heldout <= len(train_data)``): ``n_align``
        sequences (a seeded random subset) define the energy, ``n_heldout`` *other* ones
        measure the held-out alignment.
    representation : {"tokens", "pooled", "pooled-raw"}
        What is aligned; default per-head mean keys rescaled to the token-key norm.
    sides : {"queries+keys", "keys"}
        Token sides (``representation="tokens"``).
    tokens_per_sequence : int
        Tokens per sequence, head and side (>= 1).
    alignment : {"normalised", "centred", "linear"}
        :class:`~meanfield.energy.CentredAlignment` (Cortes et al., default: the positive
        kernel's large constant part carries no label information, and the uncentred
        alignment of token samples is ~1e-3 and rises mostly by scaling it),
        :class:`~meanfield.energy.NormalisedAlignment` (Cristianini), or
        :class:`~meanfield.energy.LinearAlignment` (U-statistic).
    alignment_weight : float or "auto"
        ``gamma``, the strength of the tilt of the prior (> 0; with ``confinement="prior"``).
        ``"auto"``: per layer, ``gamma`` such that at the starting particles the RMS alignment
        force ``gamma |N grad A|`` is ``tilt`` times the RMS confining force ``|w|`` (the
        alignment's natural scale differs by orders of magnitude between forms, layers and
        models; the ratio does not).
    tilt : float
        See ``alignment_weight`` (> 0). A force ratio ``t`` shifts a particle by up to about
        ``t |w|`` at equilibrium, so ``t`` bounds the growth of the row norms. Default 0.15:
        measured on Rotten Tomatoes (FAVOR, pooled keys) it raises the held-out centred
        alignment 13x (0.0018 -> 0.024, as much as 0.25 or 0.5 do) with the mean row norm at
        the prior's; on small models 0.5 grew softplus rows up to 2x.
    confinement : {"prior", None}
        ``"prior"``: ``V = |w|^2/2`` at ``beta = 1`` (Gibbs law = FAVOR prior, tilted).
        None: no confinement, temperature ``1 / beta`` (the earlier design).
    repulsion_ratio : float
        RMS repulsive / RMS alignment force at the start (>= 0; 0 = no repulsion).
    lam : float, optional
        Explicit repulsion strength ``lam`` (>= 0) in place of the calibration.
    riesz_s, softening : float
        Riesz exponent (``-1 < s < d_h``, default 1; the bound is checked against the model by
        :func:`phase_a`) and softening length (>= 0).
    n_steps : int
        Langevin steps (>= 1).
    tau : float
        Step in prior-relaxation units (> 0; ``eta = tau * gamma``); with ``confinement=None``
        the step is ``tau`` itself.
    radius : float, optional
        Ball radius (default ``2 sqrt(d_h) + 4``: about 12 standard deviations of ``|w|``
        beyond its mean under the prior; a guard, not an active constraint).
    data_batch : int or None
        Alignment samples per Langevin step (None, default: all; a full step costs
        O(m^2 n) with the particle-side Gram, so mini-batches are rarely needed).
    norms : {"learned", "prior"}
        ``"prior"`` (a control): keep the learned directions but give each row its starting
        norm back.
    beta : float
        Inverse temperature when ``confinement`` is None (> 0).
    seed : int
        Seeds the subsets, the token draws and the Langevin noise.

    See Also
    --------
    phase_a : the run these settings configure.
    meanfield.attention.learn_features.phase_a_pretrained : the same settings on a
        linearized pretrained model.

    Examples
    --------
    >>> PhaseASettings(n_steps=50).n_steps
    50
    >>> PhaseASettings(tilt=0.0)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: tilt must be a finite number in (0, inf), got 0.0
    """

    n_align: int = 2048
    n_heldout: int = 512
    representation: str = "pooled"
    sides: str = "queries+keys"
    tokens_per_sequence: int = 4
    alignment: str = "centred"
    alignment_weight: float | str = "auto"
    tilt: float = 0.15
    confinement: str | None = "prior"
    repulsion_ratio: float = 0.25
    lam: float | None = None
    riesz_s: float = 1.0
    softening: float = 0.1
    n_steps: int = 300
    tau: float = 0.01
    radius: float | None = None
    data_batch: int | None = None
    norms: str = "learned"
    beta: float = 1e4
    seed: int = 0

    def __post_init__(self):
        def put(name, value):  # frozen: the checked (converted) value replaces the given one
            object.__setattr__(self, name, value)

        put("n_align", check_int("n_align", self.n_align, minimum=2))
        put("n_heldout", check_int("n_heldout", self.n_heldout, minimum=2))
        check_choice("representation", self.representation, REPRESENTATIONS)
        check_choice("sides", self.sides, ("queries+keys", "keys"))
        put("tokens_per_sequence", check_int("tokens_per_sequence", self.tokens_per_sequence))
        check_choice("alignment", self.alignment, ALIGNMENTS)
        if not (isinstance(self.alignment_weight, str) and self.alignment_weight == "auto"):
            put("alignment_weight", check_positive("alignment_weight", self.alignment_weight))
        put("tilt", check_positive("tilt", self.tilt))
        if self.confinement not in ("prior", None):
            raise ValueError(f"confinement must be 'prior' or None, got {self.confinement!r}")
        ratio = check_positive("repulsion_ratio", self.repulsion_ratio, allow_zero=True)
        put("repulsion_ratio", ratio)
        if self.lam is not None:
            put("lam", check_positive("lam", self.lam, allow_zero=True))
        put("riesz_s", float(self.riesz_s))
        put("softening", check_positive("softening", self.softening, allow_zero=True))
        put("n_steps", check_int("n_steps", self.n_steps))
        put("tau", check_positive("tau", self.tau))
        if self.radius is not None:
            put("radius", check_positive("radius", self.radius))
        if self.data_batch is not None:
            put("data_batch", check_int("data_batch", self.data_batch, minimum=2))
        check_choice("norms", self.norms, ("learned", "prior"))
        put("beta", check_positive("beta", self.beta))


def _phase_a_settings(model, train_data, settings: dict) -> tuple[PhaseASettings, dict]:
    """Check every argument of :func:`phase_a` (the model's first); settings and their record.

    The record is :attr:`PhaseAResult.settings`: the checked values, the radius resolved for
    the model's head dimension, and the mean-field feature of the energy.
    """
    attention = model.config["attention"]
    check_choice("model attention (Phase A needs a feature map)", attention, tuple(ENERGY_FEATURE))
    if model.config["n_classes"] != 2:
        raise ValueError(f"Phase A needs binary labels, the model has {model.config['n_classes']}")
    st = PhaseASettings(**settings)
    if st.n_align + st.n_heldout > len(train_data):
        raise ValueError(
            f"n_align + n_heldout must be <= len(train_data) = {len(train_data)}, "
            f"got {st.n_align} + {st.n_heldout}"
        )
    d_h = model.head_dim
    if not -1.0 < st.riesz_s < d_h:
        raise ValueError(f"riesz_s must be in (-1, d_h = {d_h}) (integrable), got {st.riesz_s}")
    if st.radius is None:
        st = replace(st, radius=2.0 * math.sqrt(d_h) + 4.0)
    record = asdict(st)
    record["energy_feature"] = ENERGY_FEATURE[attention]
    return st, record


def _layer_energy(align, omega0, domain, st: PhaseASettings):
    """Calibrate gamma and lam at the starting particles and build the layer's energy.

    Returns the energy, the run's (step, beta), and ``cal``: gamma, the user-scale ``lam``,
    the energy-scale ``lam_e``, and the force functions of the alignment and of a unit-strength
    repulsion (for the force ratios before and after).
    """
    from ..energy import Energy, PairInteraction, QuadraticPotential
    from ..kernels import Riesz

    kernel = Riesz(st.riesz_s, softening=st.softening)

    def forces(omega):
        fa = Energy([align], domain).drift(omega)
        return fa, Energy([PairInteraction(kernel, lam=1.0)], domain).drift(omega)

    f_align, f_pair1 = forces(omega0)
    calibrated = st.repulsion_ratio * _rms(f_align) / max(_rms(f_pair1), 1e-300)
    if st.alignment_weight == "auto":
        gamma = st.tilt * _rms(omega0) / max(_rms(f_align), 1e-300)
    else:
        gamma = st.alignment_weight
    if st.confinement == "prior":
        # E/gamma = |w|^2/(2 gamma) - A + (lam/gamma) K at beta' = gamma, step tau*gamma
        lam_e = calibrated if st.lam is None else st.lam / gamma
        lam_user, step, beta_run = lam_e * gamma, st.tau * gamma, gamma
        terms = [align, QuadraticPotential(strength=1.0 / gamma)]
    else:
        lam_e = calibrated if st.lam is None else st.lam
        lam_user, step, beta_run = lam_e, st.tau, st.beta
        terms = [align]
    if lam_e > 0:
        terms.append(PairInteraction(kernel, lam=lam_e))
    ratio_before = lam_e * _rms(f_pair1) / max(_rms(f_align), 1e-300)
    cal = dict(gamma=gamma, lam=lam_user, lam_e=lam_e, forces=forces, ratio_before=ratio_before)
    return Energy(terms, domain=domain), step, beta_run, cal


def _align_layer(Xa, ya, omega0, layer: int, st: PhaseASettings, feature: str, result, align=None):
    """One layer's Langevin run on the alignment energy; records the run's diagnostics.

    ``align`` (optional) is the alignment term to use instead of the ``st.alignment`` form of
    the ridge ``feature`` (e.g. the deployed kernel's,
    :class:`meanfield.attention.learn_features.DeployedKernelAlignment`).
    Returns the learned particles (float64, shape of ``omega0``).
    """
    from ..domains import Ball
    from ..dynamics.langevin import simulate
    from ..learners import ALIGNMENTS as ALIGNMENT_TERMS  # name -> energy term, one mapping

    align_cls = ALIGNMENT_TERMS[st.alignment]
    d_h = omega0.shape[1]
    domain = Ball(d_h, st.radius)
    if align is None:  # the energy sees x~ = x d_h^-1/4
        align = align_cls(Xa * d_h**-0.25, ya, feature=feature)
    omega0 = domain.project(omega0)
    energy, step, beta_run, cal = _layer_energy(align, omega0, domain, st)
    batch = st.data_batch
    ds = simulate(
        energy,
        omega0,
        eta=step,
        beta=beta_run,
        n_steps=st.n_steps,
        regime="mean-field",
        seed=st.seed * 1000 + layer,
        record_every=st.n_steps,
        data_batch=None if batch is None or batch >= len(ya) else batch,
    )
    omega = torch.as_tensor(ds["omega"].isel(time=-1).values)
    if st.norms == "prior":
        omega = omega / omega.norm(dim=1, keepdim=True).clamp_min(1e-12)
        omega = omega * omega0.norm(dim=1, keepdim=True)
    fa, fp = cal["forces"](omega)
    result.force_ratio_before.append(cal["ratio_before"])
    result.force_ratio_after.append(cal["lam_e"] * _rms(fp) / max(_rms(fa), 1e-300))
    result.lam.append(cal["lam"])
    result.gamma.append(cal["gamma"] if st.confinement == "prior" else float("nan"))
    result.eta.append(step)
    result.energy_before.append(float(ds["energy"].isel(time=0)))
    result.energy_after.append(float(ds["energy"].isel(time=-1)))
    result.row_norm_before.append(float(omega0.norm(dim=1).mean()))
    result.row_norm_after.append(float(omega.norm(dim=1).mean()))
    result.prior_row_norm.append(chi_mean(d_h))
    on_boundary = omega.norm(dim=1) >= st.radius * (1 - 1e-9)
    result.frac_on_boundary.append(float(on_boundary.float().mean()))
    result.mean_displacement.append(float((omega - omega0).norm(dim=1).mean()))
    return omega


def _phase_a_layer(model, layer: int, data_a, data_h, st, feature: str, result) -> None:
    """Phase A on one layer: the samples, the run, the diagnostics before and after."""
    fm_model = model.feature_maps()[layer]
    fm = copy.deepcopy(fm_model).cpu()  # the diagnostics run on the CPU in float64
    kw = dict(
        representation=st.representation,
        sides=st.sides,
        tokens_per_sequence=st.tokens_per_sequence,
    )
    Xa, ya = token_samples(model, data_a, layer, seed=st.seed * 7 + layer, **kw)
    Xh, yh = token_samples(model, data_h, layer, seed=st.seed * 7 + layer + 1, **kw)
    proj_h = _layer_projections(model, data_h, layer)
    centred = st.alignment == "centred"
    result.n_samples.append(len(ya))
    result.align_train_before.append(attention_kernel_alignment(fm, Xa, ya, centred=centred))
    result.align_heldout_before.append(attention_kernel_alignment(fm, Xh, yh, centred=centred))
    before = attention_vs_softmax(fm, proj_h)
    omega0 = fm.omega.detach().to(torch.float64).cpu()
    omega = _align_layer(Xa, ya, omega0, layer, st, feature, result)
    fm.set_omega(omega.numpy())
    fm_model.set_omega(omega.numpy())
    result.align_train_after.append(attention_kernel_alignment(fm, Xa, ya, centred=centred))
    result.align_heldout_after.append(attention_kernel_alignment(fm, Xh, yh, centred=centred))
    after = attention_vs_softmax(fm, proj_h)
    result.tv_to_softmax_before.append(before["tv_to_softmax"])
    result.tv_to_softmax_after.append(after["tv_to_softmax"])
    result.entropy_before.append(before["entropy"])
    result.entropy_after.append(after["entropy"])
    result.entropy_softmax.append(before["entropy_softmax"])


def phase_a(model: TransformerClassifier, train_data: EncodedData, **settings) -> PhaseAResult:
    """Phase A: learn every layer's ``Omega`` by projected Langevin on the alignment energy.

    Layers are processed in order, each on the representations of the model with the layers
    below it already updated. Per layer, on the samples of :func:`token_samples`, the energy

    .. math::

        E(\\mu) = \\int \\frac{|w|^2}{2}\\, d\\mu - \\gamma A(\\mu)
                  + \\lambda \\iint k_s\\, d\\mu\\, d\\mu

    (A the alignment form, k_s the softened Riesz kernel) is run by
    :func:`meanfield.dynamics.langevin.simulate` from the model's ``Omega``, with gamma and lambda
    calibrated at the starting particles. See the module notes for the reasoning behind each
    default. Every argument is checked before any work.

    Parameters
    ----------
    model : TransformerClassifier
        A (warmed-up) model with a kernel feature map (not softmax); its Omegas are replaced.
    train_data : EncodedData
        Training examples (binary labels).
    **settings
        The keyword parameters of :class:`PhaseASettings` (``n_align``, ``n_heldout``,
        ``representation``, ``sides``, ``tokens_per_sequence``, ``alignment``,
        ``alignment_weight``, ``tilt``, ``confinement``, ``repulsion_ratio``, ``lam``,
        ``riesz_s``, ``softening``, ``n_steps``, ``tau``, ``radius``, ``data_batch``,
        ``norms``, ``beta``, ``seed``), each documented there with its default.

    Returns
    -------
    PhaseAResult
        Per-layer diagnostics; ``settings`` holds the checked settings.

    See Also
    --------
    phase_b : the fine-tuning that follows, ``Omega`` frozen.
    token_samples : what each layer aligns.
    PhaseASettings : every setting, with its default.
    meanfield.attention.learn_features.phase_a_pretrained : on a linearized pretrained model.
    meanfield.dynamics.langevin.simulate : the dynamics.
    meanfield.learners.CoulombFeatures : the same particle dynamics for random Fourier
        features of data (:mod:`meanfield.features`).

    References
    ----------
    .. [1] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021.
    .. [2] C. Cortes, M. Mohri and A. Rostamizadeh, "Algorithms for learning kernels based on
       centered alignment", JMLR 13, 795–828, 2012.
    .. [3] A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.model import TransformerClassifier
    >>> from meanfield.attention.training import EncodedData
    >>> g = torch.Generator().manual_seed(0)
    >>> ids = torch.randint(6, 10, (64, 6), generator=g)
    >>> labels = torch.arange(64) % 2
    >>> ids[labels == 1, 2] = 5  # the label: does token 5 occur
    >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.full((64,), 6), labels)
    >>> _ = torch.manual_seed(0)
    >>> model = TransformerClassifier(10, d_model=16, n_heads=2, n_layers=1, d_ff=32,
    ...                               max_length=6, n_features=8, dropout=0.0)
    >>> res = phase_a(model, data, n_align=24, n_heldout=16, n_steps=40)
    >>> s = res.summary()
    >>> s["frac_on_boundary"], abs(s["row_norm_after"] / s["prior_row_norm"] - 1) < 0.2
    (0.0, True)
    """
    st, record = _phase_a_settings(model, train_data, settings)
    t0 = time.perf_counter()
    rng = np.random.default_rng(st.seed)
    perm = rng.permutation(len(train_data))
    data_a = train_data.subset(perm[: st.n_align])
    data_h = train_data.subset(perm[st.n_align : st.n_align + st.n_heldout])
    result = PhaseAResult(settings=record)
    for layer in range(len(model.feature_maps())):
        _phase_a_layer(model, layer, data_a, data_h, st, record["energy_feature"], result)
    result.seconds = time.perf_counter() - t0
    return result
