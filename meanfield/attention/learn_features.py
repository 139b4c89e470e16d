r"""Learning the feature maps of a linearized pretrained model: Kernel (Phase A) and Hedgehog.

Both act on a model linearized by :func:`meanfield.attention.linearize.linearize`, per layer
and per head. On a random feature map (FAVOR+, PORF, softmaxfeat) they leave ``Omega`` a
buffer (frozen in the fine-tuning that follows), so the three ways of getting such a map —
the prior draw (*vanilla*), :func:`phase_a_pretrained` (*Kernel*, the paper) and
:func:`distil_feature_maps` (*Hedgehog-loss (Ω only)*: the Hedgehog loss on the deployed
map's ``Omega``) — have exactly the same parameters: one ``(m, d_h)`` matrix per head. On the
published Hedgehog map (``linearize(model, "hedgehog")``,
:class:`~meanfield.attention.hedgehog.HedgehogFeatureMap`) :func:`distil_feature_maps`
trains the map's own parameters (per head, separate query and key maps ``W``, ``b``) with
the same loss, and they stay trainable for the fine-tuning, as in the paper.

"Features" in this module's name are *attention feature maps*
(:mod:`meanfield.attention.features`: per query or key a vector computed from a whole matrix
``Omega`` of particles), not the one-particle mean-field maps of :mod:`meanfield.features` nor
the feature columns of :mod:`meanfield.learners`.

Kernel: Phase A on the deployed kernel
--------------------------------------
Per layer ``l`` and head ``h`` the particles ``omega_1..omega_m`` (the rows of
``Omega[l, h]``) follow the package's projected Langevin dynamics
(:func:`meanfield.dynamics.langevin.simulate`) on the energy of :mod:`meanfield.attention.phases`,

.. math::

    E(\mu) = \int \frac{|w|^2}{2}\, d\mu - \gamma A_c(\mu) + \lambda \iint k_s\, d\mu\,d\mu,

whose Gibbs law without data is the FAVOR+ prior; ``gamma`` and ``lambda`` are calibrated
at the start as there. The alignment is that of **the kernel the layer deploys**,
:class:`DeployedKernelAlignment`: ``K_Omega(x, x') = phi_Omega(x) . phi_Omega(x')`` with
``phi`` the layer's own feature map (FAVOR+, PORF-softplus, or softmaxfeat, whose softmax
normaliser couples all particles: a nonlinear functional of the empirical measure, with
gradient by automatic differentiation), centred (Cortes et al. 2012) on the head's per-sequence
mean keys (rescaled to the token-key norm, :func:`meanfield.attention.phases.token_samples`'
``"pooled"`` representation) labelled by the sequence's class. The aligned sequences are a
stated budget, ``n_align`` (default 4096), drawn from the training split; ``n_heldout`` others
measure the held-out alignment.

Hedgehog: distillation of softmax attention
-------------------------------------------
Zhang et al. (ICLR 2024) train each layer's feature map so that its linear attention weights
mimic the pretrained softmax attention on the training data, with the cross-entropy

.. math::

    \mathcal{L}_l = -\frac{1}{|T|} \sum_{t \in T} \sum_s A^{\mathrm{soft}}_{ts}
    \log A^{\mathrm{lin}}_{ts}, \qquad
    A^{\mathrm{lin}}_{ts} = \frac{\varphi(q_t) \cdot \varphi(k_s)}
    {\sum_{s'} \varphi(q_t) \cdot \varphi(k_{s'})},

queries and keys those of the softmax model (the teacher), ``T`` the real (non-padding)
queries. Their map is ``[softmax(W x + b), softmax(-(W x + b))]`` with a trainable
``d_h x d_h`` matrix and bias per head, separate for queries and keys. Two uses here, both
trained by Adam on ``n_sequences`` training sequences:

* *Hedgehog-loss (Ω only)*: the trainable matrix is ``Omega`` of whichever random map is
  deployed (for softmaxfeat with ``m = d_h``: Hedgehog's map without its bias, one map for
  queries and keys), so it and Kernel learn the same parameters from the same data;
* *published Hedgehog*: the map of the paper, whose parameters ``W_Q, b_Q, W_K, b_K`` per
  head are trained (what a map's ``parameters()`` yields).

Examples
--------
>>> import tempfile, torch
>>> from meanfield.attention.linearize import linearize
>>> from meanfield.attention.pretrained import (encode_pretrained, load_pretrained_classifier,
...                                             save_tiny_bert)
>>> folder = tempfile.mkdtemp()
>>> save_tiny_bert(folder)
>>> model, tok = load_pretrained_classifier(folder)
>>> texts = ["a good film", "a bad film", "great story", "awful plot"] * 8
>>> data = encode_pretrained(tok, texts, None, [1, 0, 1, 0] * 8, max_length=8)
>>> model = linearize(model, "softmaxfeat", n_features=8)
>>> res = distil_feature_maps(model, data, n_sequences=24, n_heldout=8, steps=20)
>>> res["loss_after"] < res["loss_before"]
True
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import asdict, replace

import numpy as np
import torch

from .._validation import check_int, check_positive
from ..energy import Term
from ..errors import InputError
from .features import AttentionFeatureMap, make_feature_map
from .linearize import feature_maps_of, record_attention_inputs
from .phases import PhaseAResult, PhaseASettings, _align_layer
from .training import EncodedData, iterate_batches

__all__ = [
    "DeployedKernelAlignment",
    "head_feature_map",
    "record_inputs",
    "attention_cross_entropy",
    "distil_feature_maps",
    "phase_a_pretrained",
]


def head_feature_map(fm: AttentionFeatureMap, head: int) -> AttentionFeatureMap:
    """Head ``head`` of a per-head feature map, as a feature map of its own (a copy).

    See Also
    --------
    DeployedKernelAlignment, meanfield.attention.coulomb_distillation.HedgehogLossField :
        the energy terms that take one head's map.
    meanfield.attention.features.make_feature_map : a map of a given kind.

    Examples
    --------
    >>> from meanfield.attention.features import make_feature_map
    >>> fm = make_feature_map("favor", 4, 8, num_heads=3)
    >>> one = head_feature_map(fm, 2)
    >>> torch.equal(one.omega, fm.omega[2]), one.num_heads
    (True, None)
    """
    kind = fm.kind
    one = make_feature_map(kind, fm.head_dim, fm.n_features)
    one.set_omega(fm.omega[head] if fm.num_heads is not None else fm.omega)
    one.learned = fm.learned
    return one


@contextlib.contextmanager
def _omega_stand_in(fm, omega):
    """``fm`` with ``omega`` (possibly batched, differentiable) in place of its buffer, restored
    on exit: how a map's features are evaluated at particles other than its own."""
    saved = fm.omega
    fm.omega = omega
    try:
        yield fm
    finally:
        fm.omega = saved


# ---------------------------------------------------------------------------------------
# what the per-head particle energies share
# ---------------------------------------------------------------------------------------
class _HeadParticleTerm(Term):
    """An energy term on one head's particles ``Omega`` ``(m, d_h)``, through a map's features.

    What :class:`DeployedKernelAlignment` and
    :class:`~meanfield.attention.coulomb_distillation.HedgehogLossField` share: a copy of one
    head's map (float64, CPU) in ``self.fm``, particles of dimension ``d_h``, a gradient by
    automatic differentiation of :meth:`value`, and no grid view (a ``d_h``-dimensional
    particle energy). Subclasses set ``value``, ``bind`` and ``describe``.
    """

    kind = "measure"

    @classmethod
    def _check_one_head(cls, feature_map):
        """Refuse a per-head map: the term takes one head's (:func:`head_feature_map`)."""
        if feature_map.num_heads is not None:
            raise InputError(f"{cls.__name__} takes one head's map (head_feature_map)")

    def _check_dim(self, dim):
        if dim != self.fm.head_dim:
            raise ValueError(f"particles of dimension {self.fm.head_dim} needed, domain has {dim}")

    def grad(self, omega):
        """Gradient of :meth:`value` with respect to the particles (autograd), shape of omega.

        Examples
        --------
        The gradient of the deployed kernel's alignment equals its finite differences:

        >>> from meanfield.attention.features import make_feature_map
        >>> g = torch.Generator().manual_seed(0)
        >>> X = torch.randn(6, 2, generator=g, dtype=torch.float64).numpy()
        >>> term = DeployedKernelAlignment(make_feature_map("favor", 2, 3), X, [1, -1] * 3).bound(2)
        >>> omega = torch.randn(3, 2, generator=g, dtype=torch.float64)
        >>> e = torch.zeros(3, 2, dtype=torch.float64)
        >>> e[1, 0] = 1e-6  # central differences: error O(1e-12) + rounding O(1e-10)
        >>> fd = (term.value(omega + e) - term.value(omega - e)) / 2e-6
        >>> bool(abs(term.grad(omega)[1, 0] - fd) < 1e-6)
        True
        """
        with torch.enable_grad():
            om = omega.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self.value(om).sum(), om)
        return g

    def first_variation(self, at, points, weights):
        """Not defined: a particle energy in ``d_h`` dimensions has no grid view.

        Examples
        --------
        >>> from meanfield.attention.features import make_feature_map
        >>> fm = make_feature_map("favor", 2, 3)
        >>> DeployedKernelAlignment(fm, [[0.0, 1.0], [1.0, 0.0]], [1, -1]).first_variation(0, 0, 0)
        Traceback (most recent call last):
            ...
        NotImplementedError: DeployedKernelAlignment is a particle energy ...
        """
        raise NotImplementedError(
            f"{type(self).__name__} is a particle energy (d_h-dimensional); it has no grid view"
        )


# ---------------------------------------------------------------------------------------
# the deployed kernel's alignment, an energy term
# ---------------------------------------------------------------------------------------
class DeployedKernelAlignment(_HeadParticleTerm):
    r"""Energy term ``-A_c``: centred alignment of an attention feature map's own kernel.

    For particles ``Omega`` (the rows of the map's matrix) and data ``X`` (unscaled keys; the
    map applies ``d_h^{-1/4}`` itself), ``Phi = phi_Omega(X)`` (n, n_outputs),
    ``Phi_c = H Phi`` (features centred over the data) and ``y_c = H y``:

    .. math::

        A_c(\Omega) = \frac{\|\Phi_c^\top y_c\|^2}
        {\|\Phi_c^\top \Phi_c\|_F\, \|y_c\|^2},

    the Cortes–Mohri–Rostamizadeh alignment of ``K = Phi Phi^T`` with ``y y^T``, computed in
    ``O(n m^2)`` through the ``m x m`` Gram matrix. For FAVOR+ and PORF-softplus it is
    :class:`meanfield.energy.CentredAlignment` with the ``"positive"`` / ``"softplus"``
    ridge features (tested equal); for softmaxfeat the per-token normaliser couples the
    particles, so the term is a nonlinear functional of the empirical measure (kind
    ``"measure"``). Its gradient is computed by automatic differentiation.

    Parameters
    ----------
    feature_map : AttentionFeatureMap
        A shared (not per-head) map; its kind fixes the kernel, its ``omega`` is ignored.
    X : array_like, shape (n, d_h)
    y : array_like, shape (n,)
        Labels ±1.

    See Also
    --------
    phase_a_pretrained : the Langevin run on this term.
    meanfield.attention.coulomb_distillation.HedgehogLossField : the distillation term.
    meanfield.energy.CentredAlignment : the same alignment with a ridge feature of
        :mod:`meanfield.features`.

    References
    ----------
    .. [1] C. Cortes, M. Mohri and A. Rostamizadeh, "Algorithms for learning kernels based on
       centered alignment", JMLR 13, 795–828, 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.attention.features import make_feature_map
    >>> from meanfield.domains import Ball
    >>> from meanfield.energy import Energy
    >>> fm = make_feature_map("softmaxfeat", 4, 6)
    >>> X = np.random.default_rng(0).normal(size=(40, 4))
    >>> E = Energy([DeployedKernelAlignment(fm, X, np.sign(X[:, 0]))], Ball(4, 10.0))
    >>> omega = torch.randn(6, 4, dtype=torch.float64)
    >>> -1 <= float(E.value(omega)) <= 0, tuple(E.grad(omega).shape)
    (True, (6, 4))
    """

    name = "deployed_alignment"

    def __init__(self, feature_map: AttentionFeatureMap, X, y):
        self._check_one_head(feature_map)
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != feature_map.head_dim:
            raise InputError(f"X must have shape (n, {feature_map.head_dim}), got {X.shape}")
        if y.shape != (len(X),) or len(X) < 2:
            raise InputError(f"y must have shape ({len(X)},) with n >= 2, got {y.shape}")
        self.fm = copy.deepcopy(feature_map).cpu().double()
        self.X_np, self.y_np = X, y
        self._bound = None

    def bind(self, dim, dtype, device):
        """Hold the data and the centred labels in ``dtype`` on ``device``.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.attention.features import make_feature_map
        >>> term = DeployedKernelAlignment(make_feature_map("favor", 2, 3), np.eye(2), [1, -1])
        >>> term.bind(2, torch.float64, "cpu")
        >>> term.yc.tolist()
        [1.0, -1.0]
        """
        self._check_dim(dim)
        self.X = torch.as_tensor(self.X_np, dtype=dtype, device=device)
        yc = torch.as_tensor(self.y_np, dtype=dtype, device=device)
        self.yc = yc - yc.mean()
        self._bound = (dim, dtype, device)

    def _alignment(self, omega):
        with _omega_stand_in(self.fm, omega) as fm:
            phi = fm._raw(self.X.to(omega.dtype))  # (..., n, n_outputs): X broadcasts
        phi = phi - phi.mean(-2, keepdim=True)
        num = (phi.transpose(-1, -2) @ self.yc).pow(2).sum(-1)
        gram = phi.transpose(-1, -2) @ phi
        den = torch.linalg.matrix_norm(gram) * self.yc.pow(2).sum()
        return num / den.clamp_min(1e-300)

    def value(self, omega):
        """``-A_c(Omega)``, shape ``omega.shape[:-2]``.

        Examples
        --------
        >>> from meanfield.attention.features import make_feature_map
        >>> fm = make_feature_map("favor", 2, 3)
        >>> term = DeployedKernelAlignment(fm, [[1.0, 0.0], [0.0, 1.0]], [1, -1]).bound(2)
        >>> float(term.value(torch.zeros(3, 2, dtype=torch.float64)))  # constant features
        -0.0
        """
        return -self._alignment(omega)

    def describe(self):
        """The term's settings (for provenance).

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.attention.features import make_feature_map
        >>> fm = make_feature_map("favor", 2, 3)
        >>> DeployedKernelAlignment(fm, np.eye(2), [1, -1]).describe()
        {'feature_map': 'favor', 'n_data': 2}
        """
        return {"feature_map": self.fm.kind, "n_data": len(self.X_np)}


# ---------------------------------------------------------------------------------------
# the teacher's queries and keys
# ---------------------------------------------------------------------------------------
@torch.no_grad()
def record_inputs(model, data: EncodedData, *, batch_size: int = 16, softmax: bool = True):
    """Each layer's queries, keys and padding on ``data`` (per batch, trimmed to its width).

    Parameters
    ----------
    model : torch.nn.Module
        A linearized ``transformers`` model (``(input_ids, padding_mask, segment_ids)``).
    data : EncodedData
    batch_size : int
    softmax : bool
        Run the layers with exact softmax attention (the teacher's inputs: with it every
        layer sees the hidden states of the softmax model).

    Returns
    -------
    list (per layer) of list (per batch) of (q, k, pad)
        ``q, k`` of shape ``(b, H, L, d_h)``; ``pad`` ``(b, L)`` bool or None.

    See Also
    --------
    attention_cross_entropy : the loss on the recorded batches.
    meanfield.attention.linearize.record_attention_inputs : the recording context.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.linearize import linearize
    >>> from meanfield.attention.pretrained import (encode_pretrained,
    ...     load_pretrained_classifier, save_tiny_bert)
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> model, tok = load_pretrained_classifier(folder)
    >>> data = encode_pretrained(tok, ["a film", "a good film"], None, [0, 1], 8)
    >>> rec = record_inputs(linearize(model, "favor", n_features=4), data)
    >>> len(rec), tuple(rec[0][0][0].shape)
    (2, (2, 2, 5, 8))
    """
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    with record_attention_inputs(model, softmax=softmax) as records:
        for ids, mask, seg, _ in iterate_batches(data, batch_size, shuffle=False):
            model(ids.to(device), mask.to(device), seg.to(device))
    model.train(was)
    return records


def _teacher_weights(q, k, pad):
    d = q.shape[-1]
    logits = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    if pad is not None:
        logits = logits.masked_fill(pad[:, None, None, :], float("-inf"))
    return logits.softmax(-1)


def _student_log_weights(fm: AttentionFeatureMap, omega, q, k, pad):
    """``log A_lin`` (b, H, L, S) of the map with matrix ``omega`` (differentiable), or of the
    map as it is (its own parameters and buffers) where ``omega`` is None."""
    if omega is None:
        # the map's own query and key features: differentiable in its parameters (Hedgehog)
        kern = fm.transform_queries(q) @ fm.transform_keys(k).transpose(-1, -2)
        logk = torch.log(kern.clamp_min(1e-30))
        if pad is not None:
            logk = logk.masked_fill(pad[:, None, None, :], float("-inf"))
        return logk - torch.logsumexp(logk, dim=-1, keepdim=True)
    with _omega_stand_in(fm, omega):
        if fm.log_space:  # positive features: shift by the per-token maximum, exactly
            aq, ak = fm._transform(q), fm._transform(k)
            cq = aq.amax(-1, keepdim=True).detach()
            ck = ak.amax(-1, keepdim=True).detach()
            kern = torch.exp(aq - cq) @ torch.exp(ak - ck).transpose(-1, -2)
            logk = torch.log(kern.clamp_min(1e-30)) + ck.transpose(-1, -2)
        else:
            kern = fm._raw(q) @ fm._raw(k).transpose(-1, -2)
            logk = torch.log(kern.clamp_min(1e-30))
    if pad is not None:
        logk = logk.masked_fill(pad[:, None, None, :], float("-inf"))
    return logk - torch.logsumexp(logk, dim=-1, keepdim=True)


def _cross_entropy_rows(teacher, logs):
    """``-sum_s A_soft log A_lin`` per query row; keys the teacher ignores (weight 0) add 0."""
    return -(teacher * torch.where(teacher > 0, logs, torch.zeros_like(logs))).sum(-1)


def attention_cross_entropy(fm, omega, batches) -> tuple[torch.Tensor, float]:
    """Hedgehog's loss and the mean total-variation distance to softmax, over ``batches``.

    Parameters
    ----------
    fm : AttentionFeatureMap or HedgehogFeatureMap
        A per-head map (its kind; ``omega`` stands in for its matrix).
    omega : torch.Tensor, shape (H, m, d_h), or None
        None: the map as it is, differentiable in its parameters (the published Hedgehog's
        ``W``, ``b``; a random map's own ``Omega``).
    batches : list of (q, k, pad)
        From :func:`record_inputs` (one layer).

    Returns
    -------
    loss : torch.Tensor (scalar, differentiable in ``omega``, or in the map's parameters)
        Mean over real query rows of ``-sum_s A_soft log A_lin``.
    tv : float
        Mean over real query rows of ``0.5 sum_s |A_lin - A_soft|``.

    See Also
    --------
    distil_feature_maps : trains a map on this loss.
    meanfield.attention.coulomb_distillation.HedgehogLossField : the loss of one head as an
        energy term of its particles.
    meanfield.attention.phases.attention_vs_softmax : the TV distance on token projections.

    References
    ----------
    .. [1] M. Zhang, K. Bhatia, H. Kumbong and C. Ré, "The Hedgehog & the Porcupine: Expressive
       linear attentions with softmax mimicry", ICLR 2024.

    Examples
    --------
    >>> from meanfield.attention.features import make_feature_map
    >>> fm = make_feature_map("favor", 4, 64, num_heads=1)
    >>> q = 0.3 * torch.randn(2, 1, 5, 4)
    >>> loss, tv = attention_cross_entropy(fm, fm.omega, [(q, q, None)])
    >>> loss.item() > 0, 0 <= tv < 0.2
    (True, True)
    >>> from meanfield.attention.hedgehog import HedgehogFeatureMap
    >>> hh = HedgehogFeatureMap(4, num_heads=1)
    >>> loss, tv = attention_cross_entropy(hh, None, [(q, q, None)])
    >>> loss.backward()  # the gradient reaches the map's parameters
    >>> tuple(hh.query_weight.grad.shape)
    (1, 4, 4)
    """
    total, tv, rows = 0.0, 0.0, 0
    for q, k, pad in batches:
        teacher = _teacher_weights(q, k, pad)
        logs = _student_log_weights(fm, omega, q, k, pad)
        ce = _cross_entropy_rows(teacher, logs)
        keep = torch.ones(ce.shape[0], ce.shape[-1], dtype=torch.bool, device=ce.device)
        if pad is not None:
            keep = ~pad
        keep = keep[:, None, :].expand_as(ce)
        total = total + ce[keep].sum()
        with torch.no_grad():
            diff = 0.5 * (logs.exp() - teacher).abs().sum(-1)
            tv += float(diff[keep].sum())
        rows += int(keep.sum())
    return total / rows, tv / rows


# ---------------------------------------------------------------------------------------
# what the per-layer and per-head learners share (here and in coulomb_distillation)
# ---------------------------------------------------------------------------------------
def _kernel_feature_maps(model, caller: str, what: str = "a kernel feature map") -> list:
    """The model's per-layer feature maps, refused (naming ``caller``) where a layer has none."""
    fms = feature_maps_of(model)
    if not fms or any(fm is None for fm in fms):
        raise InputError(f"{caller} needs a model linearized with {what}")
    return fms


def _first_not_random(fms, *, per_head: bool = False):
    """The kind of the first map without particles ``Omega`` (or not per head), else None."""
    for fm in fms:
        if not hasattr(fm, "omega") or (per_head and fm.num_heads is None):
            return fm.kind
    return None


def _disjoint_subsets(data, seed, *sizes):
    """Consecutive blocks of sizes ``sizes`` of one seeded permutation of ``data``.

    The first blocks do not depend on the later sizes, so learners that ask for the same
    leading sizes with the same seed see the same sequences.
    """
    perm = np.random.default_rng(seed).permutation(len(data))
    ends = np.cumsum(sizes)
    return [data.subset(perm[end - size : end]) for size, end in zip(sizes, ends, strict=True)]


def _split_sequences(data, n_sequences, n_heldout, seed):
    n_sequences = check_int("n_sequences", n_sequences, minimum=1)
    n_heldout = check_int("n_heldout", n_heldout, minimum=1)
    if n_sequences + n_heldout > len(data):
        raise InputError(
            f"n_sequences + n_heldout must be <= len(data) = {len(data)}, "
            f"got {n_sequences} + {n_heldout}"
        )
    return _disjoint_subsets(data, seed, n_sequences, n_heldout)


def _head_batches(layer_batches, head: int):
    """One head's ``(q, k, pad)`` from a layer's recorded batches, in float64 on the CPU."""
    return [
        (q[:, head].to("cpu", torch.float64), k[:, head].to("cpu", torch.float64),
         None if pad is None else pad.cpu())
        for q, k, pad in layer_batches
    ]  # fmt: skip


class _HeldOutRecord:
    """Held-out cross-entropy and TV to softmax per layer, before and after the learning."""

    def __init__(self):
        self.layers = {k: [] for k in ("loss_before", "loss_after", "tv_before", "tv_after")}

    def add(self, before, after) -> None:
        """One layer's ``(loss, tv)`` before and after."""
        values = (before[0], after[0], before[1], after[1])
        for k, v in zip(self.layers, values, strict=True):
            self.layers[k].append(float(v))

    def means(self) -> dict:
        """Each quantity's mean over layers."""
        return {k: float(np.mean(v)) for k, v in self.layers.items()}


def distil_feature_maps(
    model,
    data: EncodedData,
    *,
    n_sequences: int = 1024,
    n_heldout: int = 256,
    steps: int = 300,
    lr: float = 1e-2,
    batch_size: int = 16,
    seed: int = 0,
    log=None,
) -> dict:
    """The Hedgehog loss: train every layer's feature map to mimic the softmax attention.

    Layers are trained independently (each on the teacher's queries and keys), by Adam on
    the cross-entropy of :func:`attention_cross_entropy`, cycling over the recorded batches
    (module notes). What is trained is each map's trainable parameters where it has any (the
    published Hedgehog map, ``linearize(model, "hedgehog")``: ``W`` and ``b`` per head and
    side, trained in place and left trainable for fine-tuning); otherwise its ``Omega``
    (*Hedgehog-loss (Ω only)*), installed with ``set_omega`` (``learned`` becomes True), a
    buffer still.

    Parameters
    ----------
    model : torch.nn.Module
        Linearized with a kernel feature map (:func:`~meanfield.attention.linearize.linearize`;
        a random map, or ``"hedgehog"``).
    data : EncodedData
        Training sequences; ``n_sequences`` are distilled on, ``n_heldout`` others measured.
    n_sequences, n_heldout : int
    steps : int
        Adam steps per layer (>= 1), one recorded batch each.
    lr : float
        Adam's learning rate (> 0).
    batch_size : int
        Sequences per recorded batch.
    seed : int
        Seeds the choice of sequences.
    log : callable, optional
        Receives one line per layer.

    Returns
    -------
    dict
        ``loss_before``/``loss_after`` (held-out cross-entropy, mean over layers),
        ``tv_before``/``tv_after`` (held-out TV distance to softmax), the per-layer lists
        under ``layers``, ``seconds``.

    See Also
    --------
    phase_a_pretrained : the same particles learned by kernel alignment.
    meanfield.attention.coulomb_distillation.coulomb_distil_feature_maps : the same loss by
        Langevin dynamics, with a repulsion.
    attention_cross_entropy : the loss.

    References
    ----------
    .. [1] M. Zhang, K. Bhatia, H. Kumbong and C. Ré, "The Hedgehog & the Porcupine: Expressive
       linear attentions with softmax mimicry", ICLR 2024.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.linearize import linearize
    >>> from meanfield.attention.pretrained import (encode_pretrained,
    ...     load_pretrained_classifier, save_tiny_bert)
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> model, tok = load_pretrained_classifier(folder)
    >>> data = encode_pretrained(tok, ["a good film", "a bad plot"] * 6, None, [1, 0] * 6, 8)
    >>> model = linearize(model, "favor", n_features=8)
    >>> res = distil_feature_maps(model, data, n_sequences=8, n_heldout=4, steps=10)
    >>> sorted(res["layers"]), res["tv_after"] <= res["tv_before"] + 0.05
    (['loss_after', 'loss_before', 'tv_after', 'tv_before'], True)
    >>> model = linearize(model, "hedgehog")  # the published map: its parameters are trained
    >>> res = distil_feature_maps(model, data, n_sequences=8, n_heldout=4, steps=10, lr=0.05)
    >>> bool(res["loss_after"] < res["loss_before"])
    True
    """
    steps = check_int("steps", steps)
    lr = check_positive("lr", lr)
    fms = _kernel_feature_maps(model, "distil_feature_maps")
    train_d, held_d = _split_sequences(data, n_sequences, n_heldout, seed)
    t0 = time.perf_counter()
    rec_train = record_inputs(model, train_d, batch_size=batch_size)
    rec_held = record_inputs(model, held_d, batch_size=batch_size)
    held = _HeldOutRecord()
    for layer, fm in enumerate(fms):
        params = [p for p in fm.parameters() if p.requires_grad]
        # a map with trainable parameters (the published Hedgehog) is trained in place;
        # otherwise a copy of its Omega buffer is trained and installed after
        omega = None if params else fm.omega.detach().clone().requires_grad_(True)
        with torch.no_grad():
            lb, tb = attention_cross_entropy(fm, omega, rec_held[layer])
        opt = torch.optim.Adam(params if params else [omega], lr=lr)
        batches = rec_train[layer]
        for step in range(steps):
            loss, _ = attention_cross_entropy(fm, omega, [batches[step % len(batches)]])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            la, ta = attention_cross_entropy(fm, omega, rec_held[layer])
        if omega is not None:
            fm.set_omega(omega.detach())
        else:
            fm.zero_grad(set_to_none=True)  # no distillation gradient left for fine-tuning
        held.add((lb, tb), (la, ta))
        if log is not None:
            log(f"hedgehog layer {layer}: held-out CE {float(lb):.4f} -> {float(la):.4f}, "
                f"TV {tb:.3f} -> {ta:.3f}")  # fmt: skip
    summary = held.means()
    summary["layers"] = held.layers
    summary["seconds"] = time.perf_counter() - t0
    return summary


# ---------------------------------------------------------------------------------------
# Kernel: Phase A per layer and head
# ---------------------------------------------------------------------------------------
def _pooled_keys(batches, head: int):
    """Per-sequence mean keys of one head, rescaled to the mean token-key norm."""
    pooled, tokens = [], []
    for _, kh, pad in _head_batches(batches, head):  # kh (b, L, d); Phase A runs on the CPU
        keep = torch.ones(kh.shape[:2], dtype=torch.bool) if pad is None else ~pad
        w = keep.to(kh.dtype).unsqueeze(-1)
        pooled.append((kh * w).sum(1) / w.sum(1).clamp_min(1.0))
        tokens.append(kh[keep])
    pooled = torch.cat(pooled)
    token_norm = torch.cat(tokens).norm(dim=1).mean()
    pooled = pooled * (token_norm / pooled.norm(dim=1).mean())
    return pooled.numpy()


def _alignment_value(fm_one, X, y) -> float:
    term = DeployedKernelAlignment(fm_one, X, y)
    term.bind(fm_one.head_dim, torch.float64, "cpu")
    return float(-term.value(fm_one.omega.double()))


def phase_a_pretrained(model, data: EncodedData, **settings) -> PhaseAResult:
    """Kernel Phase A on a linearized pretrained model, per layer and head (module notes).

    Parameters
    ----------
    model : torch.nn.Module
        Linearized with a kernel feature map; its per-head ``Omega`` are replaced.
    data : EncodedData
        Training sequences (binary labels).
    **settings
        :class:`~meanfield.attention.phases.PhaseASettings` (``n_align`` default here 4096,
        ``n_heldout`` 512, ``alignment`` must be ``"centred"``, ``representation``
        ``"pooled"``; ``tilt``, ``repulsion_ratio``, ``lam``, ``riesz_s``, ``softening``,
        ``n_steps``, ``tau``, ``radius``, ``norms``, ``seed``).

    Returns
    -------
    PhaseAResult
        Lists indexed by ``(layer, head)`` in row-major order; alignments are those of the
        deployed kernel; ``tv_to_softmax_*`` the held-out TV distance to softmax per layer
        (the same value repeated over that layer's heads).

    See Also
    --------
    distil_feature_maps : the same particles learned by distillation.
    meanfield.attention.phases.phase_a : Phase A on the package's own model.
    DeployedKernelAlignment : the energy's alignment term.

    References
    ----------
    .. [1] C. Cortes, M. Mohri and A. Rostamizadeh, "Algorithms for learning kernels based on
       centered alignment", JMLR 13, 795–828, 2012.
    .. [2] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.linearize import linearize
    >>> from meanfield.attention.pretrained import (encode_pretrained,
    ...     load_pretrained_classifier, save_tiny_bert)
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> model, tok = load_pretrained_classifier(folder)
    >>> texts = ["a good film", "a bad film", "great story", "awful plot"] * 8
    >>> data = encode_pretrained(tok, texts, None, [1, 0, 1, 0] * 8, max_length=8)
    >>> model = linearize(model, "favor", n_features=8)
    >>> res = phase_a_pretrained(model, data, n_align=20, n_heldout=8, n_steps=30)
    >>> len(res.lam), res.summary()["frac_on_boundary"]  # 2 layers x 2 heads
    (4, 0.0)
    """
    settings = {"n_align": 4096, **settings}
    st = PhaseASettings(**settings)
    if st.alignment != "centred" or st.representation != "pooled":
        raise InputError("phase_a_pretrained aligns pooled keys with the centred alignment")
    fms = _kernel_feature_maps(model, "phase_a_pretrained")
    kind = _first_not_random(fms)
    if kind is not None:
        raise InputError(
            "phase_a_pretrained moves the particles Omega of a random feature map (favor, "
            f"porf, porf-softplus, softmaxfeat); the model is linearized with {kind!r}"
        )
    n_align = min(st.n_align, len(data) - st.n_heldout)
    if n_align < 2:
        raise InputError(f"n_heldout = {st.n_heldout} leaves fewer than 2 of {len(data)} to align")
    d_h = fms[0].head_dim
    radius = st.radius if st.radius is not None else 2.0 * math.sqrt(d_h) + 4.0
    st = replace(st, n_align=n_align, radius=radius)
    train_d, held_d = _split_sequences(data, n_align, st.n_heldout, st.seed)
    t0 = time.perf_counter()
    rec_a = record_inputs(model, train_d, softmax=False)
    rec_h = record_inputs(model, held_d, softmax=False)
    ya = np.where(train_d.labels.numpy() > 0, 1.0, -1.0)
    yh = np.where(held_d.labels.numpy() > 0, 1.0, -1.0)
    result = PhaseAResult(settings={**asdict(st), "energy": "deployed kernel, per head"})
    for layer, fm in enumerate(fms):
        tv_b = attention_cross_entropy(fm, fm.omega, rec_h[layer])[1]
        new = fm.omega.detach().clone().double()
        for h in range(fm.num_heads):
            one = head_feature_map(fm, h)
            Xa = _pooled_keys(rec_a[layer], h)
            Xh = _pooled_keys(rec_h[layer], h)
            result.n_samples.append(len(ya))
            result.align_train_before.append(_alignment_value(one, Xa, ya))
            result.align_heldout_before.append(_alignment_value(one, Xh, yh))
            omega0 = one.omega.detach().double()
            align = DeployedKernelAlignment(one, Xa, ya)
            omega = _align_layer(Xa, ya, omega0, layer * 100 + h, st, None, result, align=align)
            one.set_omega(omega)
            new[h] = omega
            result.align_train_after.append(_alignment_value(one, Xa, ya))
            result.align_heldout_after.append(_alignment_value(one, Xh, yh))
        fm.set_omega(new)
        with torch.no_grad():
            tv_a = attention_cross_entropy(fm, fm.omega, rec_h[layer])[1]
        result.tv_to_softmax_before += [tv_b] * fm.num_heads
        result.tv_to_softmax_after += [tv_a] * fm.num_heads
    result.seconds = time.perf_counter() - t0
    return result
