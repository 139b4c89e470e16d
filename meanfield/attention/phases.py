"""Phase A (alignment of the attention particles) and Phase B (fine-tuning with Omega frozen).

Phase A (THEORY.md §7). For each layer of a (briefly warmed-up) model with a kernel feature
map:

1. *Sequence representations*: the layer's keys ``k = W_K LN(h)`` of every real token,
   averaged over the tokens of a sequence, one vector per head ("pooled per-head keys",
   :meth:`TransformerClassifier.pooled_keys`), scaled to ``r~ = r / d_h^(1/4)`` exactly as the
   attention scales its keys. The ``H`` heads of a sequence give ``H`` samples, each labelled
   with the sequence's label (+-1); ``n_align`` training sequences give ``n_align * H`` samples.
2. *Energy*: ``Energy([LinearAlignment(r~, y, feature), PairInteraction(Riesz(s, eps), lam)],
   domain=Ball(d_h, R))`` from :mod:`meanfield.energy` -- the package's one definition of the
   model. The mean-field feature is the ``positive`` one, ``exp(w.r~ - |r~|^2/2)``, for FAVOR+
   and PORF (it *is* their feature up to the constant ``m^(-1/2)``), and ``softplus`` for
   PORF-softplus. softmaxfeat has no mean-field feature (its per-token normaliser couples all
   particles, THEORY §1), so its particles are aligned with the positive feature of the same
   ``Omega`` (``softmax(Omega r~)_j`` is that feature divided by its sum over particles): a
   stated proxy. The Riesz exponent defaults to Coulomb, ``s = d_h - 2``, softened.
3. *Dynamics*: :func:`meanfield.particles.simulate` (projected Langevin, Algorithm 1) from the
   layer's current (vanilla) ``Omega`` projected onto the ball; the final particles become the
   layer's ``Omega`` (:meth:`FeatureMap.set_omega`).

Nothing here re-implements the energy or the Langevin step.

Phase B: Omega is a buffer, so it is frozen by construction; every parameter is trained with
cross-entropy (AdamW, linear warm-up and decay). Kernel-X is X after Phase A + Phase B,
vanilla X is X after Phase B alone, both from the same warmed-up weights.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .._validation import check_choice, check_int, check_positive
from .model import TransformerClassifier

__all__ = [
    "EncodedData",
    "encode",
    "iterate_batches",
    "train",
    "predict_proba",
    "phase_b",
    "sequence_representations",
    "attention_kernel_alignment",
    "PhaseAResult",
    "phase_a",
    "ENERGY_FEATURE",
]

#: mean-field feature (meanfield.features) used by Phase A for each attention feature map
ENERGY_FEATURE = {
    "favor": "positive",
    "porf": "positive",
    "porf-softplus": "softplus",
    "softmaxfeat": "positive",
}


@dataclass
class EncodedData:
    """Token ids and labels as tensors (row ``i`` is example ``i``).

    Attributes
    ----------
    input_ids, segment_ids : torch.LongTensor, shape (n, max_length)
    padding_mask : torch.BoolTensor, shape (n, max_length), True = padding
    lengths : torch.LongTensor, shape (n,)
    labels : torch.LongTensor, shape (n,)
    """

    input_ids: torch.Tensor
    segment_ids: torch.Tensor
    padding_mask: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return self.labels.shape[0]

    def subset(self, index) -> EncodedData:
        idx = torch.as_tensor(np.asarray(index), dtype=torch.long)
        return EncodedData(
            self.input_ids[idx],
            self.segment_ids[idx],
            self.padding_mask[idx],
            self.lengths[idx],
            self.labels[idx],
        )


def encode(tokenizer, data, max_length: int) -> EncodedData:
    """Tokenise a :class:`~meanfield.attention.data.TextClassificationData`."""
    enc = tokenizer.encode(data.text_a, data.text_b, max_length=max_length)
    return EncodedData(
        torch.as_tensor(enc["input_ids"]),
        torch.as_tensor(enc["segment_ids"]),
        torch.as_tensor(enc["padding_mask"]),
        torch.as_tensor(enc["lengths"]),
        torch.as_tensor(np.asarray(data.labels), dtype=torch.long),
    )


def iterate_batches(data: EncodedData, batch_size: int, *, shuffle: bool, generator=None):
    """Yield batches ``(input_ids, padding_mask, segment_ids, labels)`` trimmed to the longest
    sequence of the batch."""
    n = len(data)
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    for s in range(0, n, batch_size):
        idx = order[s : s + batch_size]
        width = int(data.lengths[idx].max())
        yield (
            data.input_ids[idx, :width],
            data.padding_mask[idx, :width],
            data.segment_ids[idx, :width],
            data.labels[idx],
        )


def train(
    model: TransformerClassifier,
    data: EncodedData,
    *,
    epochs: float = 1.0,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.01,
    warmup_frac: float = 0.05,
    clip_norm: float = 1.0,
    seed: int = 0,
) -> dict:
    """Train every parameter with cross-entropy (AdamW, linear warm-up then linear decay).

    Buffers (the feature matrices Omega) are never updated.

    Parameters
    ----------
    epochs : float
        Passes over ``data`` (> 0; a fraction trains on a prefix of the last shuffled pass).
    batch_size : int
    lr, weight_decay : float
    warmup_frac : float
        Fraction of the steps with a linearly increasing learning rate, in [0, 1).
    clip_norm : float
        Gradient-norm clipping (> 0).
    seed : int
        Seeds the shuffling and dropout.

    Returns
    -------
    dict
        ``steps``, ``seconds``, ``final_loss`` (mean of the last 50 steps), ``losses``.
    """
    epochs = check_positive("epochs", epochs)
    batch_size = check_int("batch_size", batch_size)
    lr = check_positive("lr", lr)
    check_positive("weight_decay", weight_decay, allow_zero=True)
    if not 0.0 <= warmup_frac < 1.0:
        raise ValueError(f"warmup_frac must be in [0, 1), got {warmup_frac!r}")
    steps_per_epoch = math.ceil(len(data) / batch_size)
    total = max(1, int(round(epochs * steps_per_epoch)))
    warm = int(warmup_frac * total)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            (s + 1) / (warm + 1) if s < warm else max(0.0, (total - s) / max(1, total - warm))
        ),
    )
    gen = torch.Generator().manual_seed(seed)
    losses = []
    step = 0
    t0 = time.perf_counter()
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout masks
        while step < total:
            for ids, mask, seg, y in iterate_batches(data, batch_size, shuffle=True, generator=gen):
                logits = model(ids, mask, seg)
                loss = F.cross_entropy(logits, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, clip_norm)
                opt.step()
                sched.step()
                losses.append(float(loss.detach()))
                step += 1
                if step >= total:
                    break
    model.eval()
    return {
        "steps": step,
        "seconds": time.perf_counter() - t0,
        "final_loss": float(np.mean(losses[-50:])),
        "losses": losses,
    }


@torch.no_grad()
def predict_proba(model: TransformerClassifier, data: EncodedData, batch_size: int = 256):
    """Class probabilities, numpy array of shape (n, n_classes) (eval mode)."""
    model.eval()
    out = []
    for ids, mask, seg, _ in iterate_batches(data, batch_size, shuffle=False):
        out.append(torch.softmax(model(ids, mask, seg).double(), dim=-1))
    return torch.cat(out).numpy()


def phase_b(model: TransformerClassifier, data: EncodedData, **train_kwargs) -> dict:
    """Phase B: train every parameter except the (frozen) feature matrices.

    Checks that no feature matrix is a trainable parameter, then calls :func:`train`.
    The feature matrices are compared before and after to prove they stayed frozen.
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


@torch.no_grad()
def sequence_representations(
    model: TransformerClassifier, data: EncodedData, batch_size: int = 256
) -> list[np.ndarray]:
    """Scaled pooled per-head keys of every layer.

    Returns
    -------
    list of numpy.ndarray, one per layer, shape (n, heads, d_h)
        ``pooled_keys / d_h^(1/4)`` (the attention's own key scaling).
    """
    model.eval()
    per_layer = None
    for ids, mask, seg, _ in iterate_batches(data, batch_size, shuffle=False):
        keys = model.pooled_keys(ids, mask, seg)
        if per_layer is None:
            per_layer = [[] for _ in keys]
        for acc, k in zip(per_layer, keys, strict=True):
            acc.append(k.double())
    scale = model.head_dim ** (-0.25)
    return [(torch.cat(acc) * scale).numpy() for acc in per_layer]


def _flatten_heads(reps: np.ndarray, labels: np.ndarray):
    """(n, H, d_h) representations and (n,) labels in {0, 1} -> (n H, d_h), (n H,) in +-1."""
    n, h, d = reps.shape
    y = np.where(np.asarray(labels) > 0, 1.0, -1.0)
    return reps.reshape(n * h, d), np.repeat(y, h)


def attention_kernel_alignment(feature_map, X, y) -> float:
    """Normalised (Cristianini) alignment of the attention kernel with the labels.

    ``A = <K, T>_F / (||K||_F ||T||_F)`` with ``K = Phi Phi^T``, ``Phi`` the *unshifted*
    features of the attention's feature map (:meth:`FeatureMap.raw_features`, so softmaxfeat
    is measured with its real softmax features), ``T = y y^T``.

    Parameters
    ----------
    feature_map : meanfield.attention.features.FeatureMap
    X : array_like, shape (n, d_h)
        Representations *before* the ``d_h^(-1/4)`` scaling is undone: the feature map scales
        its input, so pass ``r`` (unscaled). See :func:`phase_a` for the bookkeeping.
    y : array_like, shape (n,)
        Labels in {-1, +1}.
    """
    x = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    yy = torch.as_tensor(np.asarray(y), dtype=torch.float64)
    phi = feature_map.raw_features(x)  # float64 input -> float64 features
    s = phi.T @ yy  # (m,)
    num = (s * s).sum()  # y^T K y
    G = phi.T @ phi  # ||K||_F^2 = ||Phi^T Phi||_F^2
    knorm = torch.sqrt((G * G).sum())
    return float(num / (knorm * len(yy)))


@dataclass
class PhaseAResult:
    """What Phase A did, per layer (lists indexed by layer)."""

    seconds: float
    energy_before: list = field(default_factory=list)
    energy_after: list = field(default_factory=list)
    align_train_before: list = field(default_factory=list)
    align_train_after: list = field(default_factory=list)
    align_heldout_before: list = field(default_factory=list)
    align_heldout_after: list = field(default_factory=list)
    eta: list = field(default_factory=list)
    mean_displacement: list = field(default_factory=list)

    def summary(self) -> dict:
        """Means over layers (plain floats)."""
        out = {"phase_a_seconds": self.seconds}
        for k in (
            "align_train_before",
            "align_train_after",
            "align_heldout_before",
            "align_heldout_after",
            "mean_displacement",
        ):
            vals = getattr(self, k)
            out[k] = float(np.mean(vals)) if vals else float("nan")
        return out


def phase_a(
    model: TransformerClassifier,
    train_data: EncodedData,
    *,
    n_align: int = 512,
    n_heldout: int = 512,
    n_steps: int = 400,
    eta: float | str = "auto",
    step_fraction: float = 0.01,
    beta: float = 1e4,
    lam: float = 0.1,
    riesz_s: float | None = None,
    softening: float = 0.5,
    radius: float | None = None,
    data_batch: int | None = 256,
    alignment: str = "normalised",
    confinement: float = 0.0,
    seed: int = 0,
) -> PhaseAResult:
    """Phase A: learn every layer's Omega by projected Langevin on the alignment energy.

    Parameters
    ----------
    model : TransformerClassifier
        A (warmed-up) model with a kernel feature map (not softmax); its Omegas are replaced.
    train_data : EncodedData
        Training examples; ``n_align`` of them (a seeded random subset) define the energy and
        ``n_heldout`` *other* ones measure the held-out alignment.
    n_align, n_heldout : int
        Sequence counts (>= 2 each, ``n_align + n_heldout <= len(train_data)``).
    n_steps : int
        Langevin steps (>= 1).
    eta : float or "auto"
        Step size. ``"auto"``: ``step_fraction * radius / max_i |N grad_i H_N(Omega_0)|`` per
        layer, so the largest first drift step moves a particle ``step_fraction`` of the ball
        radius (the data scale differs between layers and models).
    step_fraction : float
        See ``eta`` (in (0, 1]).
    beta : float
        Inverse temperature (mean-field regime).
    lam : float
        Riesz repulsion strength (>= 0).
    riesz_s : float, optional
        Riesz exponent (default Coulomb, ``d_h - 2``).
    softening : float
        Riesz softening length (> 0 keeps high-dimensional Riesz kernels integrable).
    radius : float, optional
        Ball radius (default ``2 sqrt(d_h)``, twice the typical norm of a Gaussian row).
    data_batch : int or None
        Mini-batch of representation rows per Langevin step (capped at the number of rows;
        None: all rows every step).
    alignment : {"normalised", "linear"}
        Alignment term: :class:`~meanfield.energy.NormalisedAlignment` (Cristianini, bounded,
        default) or :class:`~meanfield.energy.LinearAlignment` (U-statistic; with positive
        features it grows exponentially with ``|omega|`` along discriminative directions, so
        it drives particles to the boundary unless ``confinement`` holds them).
    confinement : float
        Strength of an optional :class:`~meanfield.energy.QuadraticPotential` (>= 0).
    seed : int
        Seeds the subsets and the Langevin noise.

    Returns
    -------
    PhaseAResult
    """
    from ..domains import Ball
    from ..energy import (
        Energy,
        LinearAlignment,
        NormalisedAlignment,
        PairInteraction,
        QuadraticPotential,
    )
    from ..kernels import Riesz
    from ..particles import simulate

    attention = model.config["attention"]
    check_choice("model attention (Phase A needs a feature map)", attention, tuple(ENERGY_FEATURE))
    n_align = check_int("n_align", n_align, minimum=2)
    n_heldout = check_int("n_heldout", n_heldout, minimum=2)
    n_steps = check_int("n_steps", n_steps)
    if n_align + n_heldout > len(train_data):
        raise ValueError(
            f"n_align + n_heldout must be <= len(train_data) = {len(train_data)}, "
            f"got {n_align} + {n_heldout}"
        )
    if not (isinstance(eta, str) and eta == "auto"):
        eta = check_positive("eta", eta)
    step_fraction = check_positive("step_fraction", step_fraction)
    if step_fraction > 1:
        raise ValueError(f"step_fraction must be in (0, 1], got {step_fraction}")
    beta = check_positive("beta", beta)
    lam = check_positive("lam", lam, allow_zero=True)
    softening = check_positive("softening", softening, allow_zero=True)
    d_h = model.head_dim
    riesz_s = float(d_h - 2) if riesz_s is None else float(riesz_s)
    radius = 2.0 * math.sqrt(d_h) if radius is None else check_positive("radius", radius)
    if data_batch is not None:
        data_batch = min(
            check_int("data_batch", data_batch, minimum=2), n_align * model.config["n_heads"]
        )
    feature = ENERGY_FEATURE[attention]
    check_choice("alignment", alignment, ("linear", "normalised"))
    confinement = check_positive("confinement", confinement, allow_zero=True)
    align_term = LinearAlignment if alignment == "linear" else NormalisedAlignment

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(train_data))
    idx_a, idx_h = perm[:n_align], perm[n_align : n_align + n_heldout]
    labels = train_data.labels.numpy()
    reps_a = sequence_representations(model, train_data.subset(idx_a))
    reps_h = sequence_representations(model, train_data.subset(idx_h))
    result = PhaseAResult(seconds=0.0)
    unscale = d_h**0.25  # the attention feature maps scale their input themselves
    for layer, fm in enumerate(model.feature_maps()):
        Xa, ya = _flatten_heads(reps_a[layer], labels[idx_a])
        Xh, yh = _flatten_heads(reps_h[layer], labels[idx_h])
        result.align_train_before.append(attention_kernel_alignment(fm, Xa * unscale, ya))
        result.align_heldout_before.append(attention_kernel_alignment(fm, Xh * unscale, yh))
        domain = Ball(d_h, radius)
        terms = [
            align_term(Xa, ya, feature=feature),
            PairInteraction(Riesz(riesz_s, softening=softening), lam=lam),
        ]
        if confinement > 0:
            terms.append(QuadraticPotential(strength=confinement))
        energy = Energy(terms, domain=domain)
        omega0 = domain.project(fm.omega.detach().to(torch.float64).cpu())
        if eta == "auto":
            drift = energy.drift(omega0)
            step = step_fraction * radius / float(drift.norm(dim=-1).max().clamp_min(1e-12))
        else:
            step = eta
        ds = simulate(
            energy,
            omega0,
            eta=step,
            beta=beta,
            n_steps=n_steps,
            regime="mean-field",
            seed=seed * 1000 + layer,
            record_every=n_steps,
            data_batch=data_batch,
        )
        omega = ds["omega"].isel(time=-1).values
        result.energy_before.append(float(ds["energy"].isel(time=0)))
        result.energy_after.append(float(ds["energy"].isel(time=-1)))
        result.mean_displacement.append(
            float(np.linalg.norm(omega - omega0.numpy(), axis=1).mean())
        )
        result.eta.append(step)
        fm.set_omega(omega)
        result.align_train_after.append(attention_kernel_alignment(fm, Xa * unscale, ya))
        result.align_heldout_after.append(attention_kernel_alignment(fm, Xh * unscale, yh))
    result.seconds = time.perf_counter() - t0
    return result
