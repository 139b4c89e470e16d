r"""Coulomb-regularised distillation: the Hedgehog loss as the particles' field, with repulsion.

Per layer ``l`` and head ``h`` of a model linearized with a random feature map (FAVOR+, PORF,
PORF-softplus, softmaxfeat), the rows ``omega_1..omega_m`` of ``Omega[l, h]`` are the
particles. Their energy (THEORY §2, finite ``N = m``, pair sums without the diagonal) is

.. math::

    H_N(\Omega) = \frac{1}{\beta N}\sum_i \frac{|\omega_i|^2}{2}
    + \gamma\, \mathcal L(\Omega)
    + \frac{\lambda}{N^2}\sum_{i \ne j} k_s(\omega_i - \omega_j),

with :math:`\mathcal L` the Hedgehog attention cross-entropy of the map the layer deploys
(:class:`HedgehogLossField`, Zhang et al. 2024), on a fixed set of training sequences with
the teacher's (the softmax model's) queries and keys, and :math:`k_s` the softened Riesz
kernel. The particles follow the package's projected Langevin dynamics
(:func:`meanfield.dynamics.langevin.simulate`, mean-field regime, ``beta_N = beta``) on a ball
that acts as a guard, not a constraint. The Gibbs law is

.. math::

    \pi_\beta(\Omega) \propto \underbrace{\prod_i e^{-|\omega_i|^2/2}}_{\text{FAVOR+ prior}}
    \; e^{-\beta N (\gamma \mathcal L(\Omega) + \lambda R_s(\Omega))},

the prior (the law the deployed ``Omega`` was drawn from, with ``prior=True``; for PORF and
softmaxfeat their orthogonal draws share its Gaussian marginals) tilted by the loss and the
repulsion at inverse temperature ``beta``. The confinement is ``1/beta`` of the prior's, so it
fades as ``beta`` grows: at the refining temperatures used here (``beta`` in the thousands)
the run is, to ``O(1/beta)``, gradient descent on :math:`\gamma\mathcal L + \lambda R_s` with
step ``eta`` (``omega_i <- omega_i - eta N grad_i H_N``) plus noise of standard deviation
``sqrt(2 eta / beta)`` per step and coordinate. Over a horizon ``t = eta n_steps`` the noise
alone moves ``Omega`` by about ``sqrt(2 t / beta)`` of its norm (``|omega| ~ sqrt(d_h)`` per
row), so ``t / beta`` small *refines* the draw; a high temperature (``beta ~ 1``) would
*re-sample* it from the tilted prior, which is what moved ``Omega`` by about ``sqrt 2`` of its
norm in the earlier alignment runs. What each run did is recorded as
``||Omega_T - Omega_0||_F / ||Omega_0||_F`` per head.

At ``lam = 0`` and ``beta -> inf`` the dynamics is plain gradient descent on the Hedgehog
loss: a Langevin version of :func:`~meanfield.attention.learn_features.distil_feature_maps`
(which runs Adam on mini-batches; here every step sees the full fixed training set, so the
energy is one deterministic function of ``Omega``).

The repulsion strength is given as a *force ratio* by default (``lam_scale="force-ratio"``):
per head, ``lam`` times the root-mean-square Hedgehog-loss force ``N grad (gamma L)`` at the
starting ``Omega`` over that of a unit-strength repulsion there, as Phase A calibrates its
repulsion (:mod:`meanfield.attention.phases`): the loss force differs by orders of magnitude
between layers and heads, the ratio does not. ``lam_scale="absolute"`` takes ``lam`` as the
energy's ``lambda`` itself. The exponent defaults to the Riesz ``s = 1`` (integrable in every
``d_h >= 2``, long range): the Coulomb exponent ``s = d_h - 2`` (``riesz_s = d_h - 2``) gives
in ``d_h = 32`` a force ``~ r^-31`` at the particles' spacing ``r ~ 5``, i.e. none.

``lam`` is a small declared grid; the value with the lowest mean validation TV (total
variation of the attention rows to softmax, as
:func:`~meanfield.attention.learn_features.attention_cross_entropy` measures it) on
``n_validation`` sequences, disjoint from the training and the held-out ones, is installed;
the selection (every candidate's validation TV and how far it moved ``Omega``) is returned.
The training and held-out sequences are those of
:func:`~meanfield.attention.learn_features.distil_feature_maps` with the same ``seed``,
``n_sequences`` and ``n_heldout``, so the two methods are compared on the same data.

Examples
--------
>>> import tempfile
>>> from meanfield.attention.linearize import linearize
>>> from meanfield.attention.pretrained import (encode_pretrained, load_pretrained_classifier,
...                                             save_tiny_bert)
>>> folder = tempfile.mkdtemp()
>>> save_tiny_bert(folder)
>>> model, tok = load_pretrained_classifier(folder)
>>> texts = ["a good film", "a bad film", "great story", "awful plot"] * 6
>>> data = encode_pretrained(tok, texts, None, [1, 0, 1, 0] * 6, max_length=8)
>>> model = linearize(model, "favor", n_features=8)
>>> res = coulomb_distil_feature_maps(model, data, lam=[0.0, 0.5], beta=1e4, eta=0.05,
...                                   n_steps=20, n_sequences=12, n_validation=4, n_heldout=8)
>>> res["lam_selected"] in (0.0, 0.5), res["loss_after"] < res["loss_before"]
(True, True)
"""

from __future__ import annotations

import copy
import math
import time

import numpy as np
import torch

from .._validation import check_positive
from ..contract import Param, declare
from ..errors import InputError, InputTypeError
from .learn_features import (
    _cross_entropy_rows,
    _disjoint_subsets,
    _first_not_random,
    _head_batches,
    _HeadParticleTerm,
    _HeldOutRecord,
    _kernel_feature_maps,
    _student_log_weights,
    _teacher_weights,
    attention_cross_entropy,
    head_feature_map,
    record_inputs,
)
from .training import EncodedData

__all__ = [
    "HedgehogLossField",
    "LAM_SCALES",
    "coulomb_distil_feature_maps",
    "min_pair_distance",
]

#: How ``lam`` is read by :func:`coulomb_distil_feature_maps`.
LAM_SCALES = ("force-ratio", "absolute")


def _as_head_batches(batches):
    """Checked ``(q, k, pad)`` batches of one head: ``q, k`` (b, L, d_h), ``pad`` (b, L)."""
    if not isinstance(batches, (list, tuple)) or not batches:
        raise InputError("batches must be a non-empty list of (q, k, pad) tuples of one head")
    out = []
    for i, item in enumerate(batches):
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise InputError(f"batches[{i}] must be a (q, k, pad) tuple, got {type(item).__name__}")
        q, k, pad = item
        if not (torch.is_tensor(q) and torch.is_tensor(k)) or q.ndim != 3 or q.shape != k.shape:
            raise InputError(
                f"batches[{i}]: q and k must be tensors of one shape (b, L, d_h), got "
                f"{getattr(q, 'shape', type(q))} and {getattr(k, 'shape', type(k))}"
            )
        if not (torch.isfinite(q).all() and torch.isfinite(k).all()):
            raise InputError(f"batches[{i}]: q and k must be finite (no NaN or inf)")
        if pad is not None and (
            not torch.is_tensor(pad) or pad.dtype != torch.bool or pad.shape != q.shape[:2]
        ):
            raise InputError(f"batches[{i}]: pad must be None or a bool tensor (b, L)")
        if pad is not None and bool(pad.all(-1).any()):
            raise InputError(f"batches[{i}]: a sequence whose every key is padding")
        out.append((q.detach().cpu(), k.detach().cpu(), None if pad is None else pad.cpu()))
    return out


class HedgehogLossField(_HeadParticleTerm):
    r"""Energy term ``gamma L(Omega)``: the Hedgehog cross-entropy of one head's deployed map.

    For particles ``Omega`` (the rows of the head's feature matrix, ``(m, d_h)``) and the
    teacher's queries ``q_t`` and keys ``k_s`` of one head on a fixed set of sequences,

    .. math::

        \mathcal L(\Omega) = -\frac{1}{|T|} \sum_{t \in T} \sum_s A^{\mathrm{soft}}_{ts}
        \log A^{\Omega}_{ts}, \qquad
        A^{\Omega}_{ts} = \frac{\varphi_\Omega(q_t) \cdot \varphi_\Omega(k_s)}
        {\sum_{s'} \varphi_\Omega(q_t) \cdot \varphi_\Omega(k_{s'})}, \qquad
        A^{\mathrm{soft}}_{ts} = \operatorname{softmax}_s\Big(\frac{q_t \cdot k_s}
        {\sqrt{d_h}}\Big),

    ``T`` the real (non-padding) query rows of all sequences, padding keys excluded, and
    ``phi_Omega`` the layer's own feature map with matrix ``Omega`` (the value of
    :func:`~meanfield.attention.learn_features.attention_cross_entropy` for this head). The
    normalised kernel is a ratio of empirical means over the particles (for softmaxfeat the
    per-token normaliser couples them too), so the term is a nonlinear functional of the
    empirical measure (kind ``"measure"``); its value for replicas ``(..., m, d_h)`` is one
    per replica, its gradient is by automatic differentiation (O(1/m) per particle, as every
    term's ``grad`` of ``H_N``).

    Parameters
    ----------
    feature_map : AttentionFeatureMap
        One head's map (:func:`~meanfield.attention.learn_features.head_feature_map`): its
        kind fixes ``phi``, its ``omega`` is ignored.
    batches : list of (q, k, pad)
        The head's teacher queries and keys, ``q, k`` of shape ``(b, L, d_h)``, ``pad``
        ``(b, L)`` bool (True: padding) or None; as
        :func:`~meanfield.attention.learn_features.record_inputs` gives them, head ``h``
        taken as ``q[:, h]``.
    weight : float
        ``gamma > 0``, the loss's weight in the energy.

    See Also
    --------
    coulomb_distil_feature_maps : the Langevin run on this term plus the repulsion.
    meanfield.attention.learn_features.DeployedKernelAlignment : the kernel-alignment term.

    References
    ----------
    - M. Zhang, K. Bhatia, H. Kumbong, C. Ré, "The Hedgehog & the Porcupine: Expressive
      linear attentions with softmax mimicry", ICLR 2024 (the loss).

    Examples
    --------
    >>> from meanfield.attention.features import make_feature_map
    >>> from meanfield.domains import Ball
    >>> from meanfield.energy import Energy
    >>> fm = make_feature_map("favor", 4, 16)
    >>> q = 0.5 * torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(0))
    >>> E = Energy([HedgehogLossField(fm, [(q, q, None)])], Ball(4, 20.0))
    >>> omega = fm.omega.double()
    >>> float(E.value(omega)) > 0, tuple(E.grad(omega).shape)
    (True, (16, 4))
    """

    name = "hedgehog_loss"
    _bound_attributes = ("data",)

    def __init__(self, feature_map, batches, weight: float = 1.0):
        if not hasattr(feature_map, "omega") or not hasattr(feature_map, "_raw"):
            raise InputTypeError(
                "feature_map must be a random attention feature map (favor, porf, "
                f"porf-softplus, softmaxfeat), got {type(feature_map).__name__}"
            )
        self._check_one_head(feature_map)
        self.batches = _as_head_batches(batches)
        d_h = feature_map.head_dim
        if self.batches[0][0].shape[-1] != d_h:
            raise InputError(
                f"q and k must have last dimension head_dim = {d_h}, "
                f"got {self.batches[0][0].shape[-1]}"
            )
        self.weight = check_positive("weight (gamma)", weight)
        self.fm = copy.deepcopy(feature_map).cpu().double()
        self.n_rows = sum(int(q.shape[0] * q.shape[1]) if p is None else int((~p).sum())
                          for q, _, p in self.batches)  # fmt: skip

    def bind(self, dim, dtype, device):
        """Hold the queries, keys, teacher weights and real rows in ``dtype`` on ``device``.

        Examples
        --------
        >>> from meanfield.attention.features import make_feature_map
        >>> q = torch.randn(1, 3, 2)
        >>> term = HedgehogLossField(make_feature_map("favor", 2, 4), [(q, q, None)])
        >>> bound = term.bound(2)
        >>> len(bound.data), bound.data[0][0].dtype
        (1, torch.float64)
        """
        self._check_dim(dim)
        # a bound copy shares the unbound term's attributes (Term.bound): a map of its own
        self.fm = copy.deepcopy(self.fm).to(device=device, dtype=dtype)
        data = []
        for q, k, pad in self.batches:
            # a head axis of 1: the package's masks index (batch, head, query, key)
            q = q.to(device=device, dtype=dtype).unsqueeze(1)
            k = k.to(device=device, dtype=dtype).unsqueeze(1)
            pad = None if pad is None else pad.to(device)
            teacher = _teacher_weights(q, k, pad)
            keep = torch.ones(q.shape[0], q.shape[2], dtype=torch.bool, device=device)
            keep = (keep if pad is None else ~pad)[:, None, :]
            data.append((q, k, pad, teacher, keep))
        self.data = data

    def _loss(self, omega):
        """``L`` of one ``(m, d_h)`` particle matrix (differentiable)."""
        total = 0.0
        for q, k, pad, teacher, keep in self.data:
            logs = _student_log_weights(self.fm, omega, q, k, pad)
            total = total + _cross_entropy_rows(teacher, logs)[keep].sum()
        return total / self.n_rows

    def value(self, omega):
        """``gamma L(Omega)``, shape ``omega.shape[:-2]``.

        Examples
        --------
        >>> from meanfield.attention.features import make_feature_map
        >>> q = torch.randn(1, 3, 2, dtype=torch.float64)
        >>> fm = make_feature_map("softmaxfeat", 2, 4)  # Omega = 0: constant features
        >>> term = HedgehogLossField(fm, [(q, q, None)]).bound(2)
        >>> round(float(term.value(torch.zeros(4, 2, dtype=torch.float64))), 6)  # uniform: log 3
        1.098612
        """
        m, d = self.fm.n_features, self.fm.head_dim
        if omega.ndim < 2 or tuple(omega.shape[-2:]) != (m, d):
            raise ValueError(f"omega must have shape (..., {m}, {d}), got {tuple(omega.shape)}")
        flat = omega.reshape(-1, m, d)
        vals = torch.stack([self._loss(o) for o in flat])
        return self.weight * vals.reshape(omega.shape[:-2])

    def describe(self):
        """The term's settings (for provenance).

        Examples
        --------
        >>> from meanfield.attention.features import make_feature_map
        >>> q = torch.randn(2, 3, 2)
        >>> HedgehogLossField(make_feature_map("favor", 2, 4), [(q, q, None)]).describe()
        {'feature_map': 'favor', 'n_queries': 6, 'weight': 1.0}
        """
        return {"feature_map": self.fm.kind, "n_queries": self.n_rows, "weight": self.weight}


def min_pair_distance(omega) -> float:
    """The smallest distance between two rows of ``omega`` (m, p), m >= 2.

    See Also
    --------
    coulomb_distil_feature_maps : records it before and after each run.
    meanfield.kernels.Riesz : the repulsion that keeps it from shrinking.

    Examples
    --------
    >>> min_pair_distance(torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    1.0
    """
    om = torch.as_tensor(omega, dtype=torch.float64)
    dist = torch.cdist(om, om)
    dist.fill_diagonal_(float("inf"))
    return float(dist.min())


def _rms(x) -> float:
    return float(x.pow(2).mean().sqrt())


def _run_head(fm_one, batches, omega0, lam, st, seed):
    """One head's Langevin run; returns the final particles and the run's record."""
    from ..domains import Ball
    from ..dynamics.langevin import simulate
    from ..energy import Energy, PairInteraction, QuadraticPotential
    from ..kernels import Riesz

    d_h = fm_one.head_dim
    domain = Ball(d_h, st["radius"])
    omega0 = domain.project(omega0)
    loss = HedgehogLossField(fm_one, batches, weight=st["gamma"])
    kernel = Riesz(st["riesz_s"], softening=st["softening"])
    lam_e = lam
    if st["lam_scale"] == "force-ratio" and lam > 0:
        f_loss = Energy([loss], domain).drift(omega0)
        f_pair = Energy([PairInteraction(kernel, lam=1.0)], domain).drift(omega0)
        lam_e = lam * _rms(f_loss) / max(_rms(f_pair), 1e-300)
    terms = [loss]
    if st["prior"]:
        terms.append(QuadraticPotential(strength=1.0 / st["beta"]))
    if lam_e > 0:
        terms.append(PairInteraction(kernel, lam=lam_e))
    energy = Energy(terms, domain)
    ds = simulate(
        energy, omega0, eta=st["eta"], beta=st["beta"], n_steps=st["n_steps"],
        regime="mean-field", seed=seed, record_every=st["n_steps"],
    )  # fmt: skip
    omega = torch.as_tensor(ds["omega"].isel(time=-1).values)
    loss_v = ds["energy_hedgehog_loss"].values / st["gamma"]
    record = {
        "lam_energy": lam_e,
        "relative_move": float((omega - omega0).norm() / omega0.norm().clamp_min(1e-300)),
        "loss_train_before": float(loss_v[0]),
        "loss_train_after": float(loss_v[-1]),
        "min_distance_before": min_pair_distance(omega0),
        "min_distance_after": min_pair_distance(omega),
    }
    return omega, record


def _head_seed(seed: int, layer: int, head: int) -> int:
    """The noise seed of one head's run: the same for every ``lam`` (common random numbers,
    so candidates differ by ``lam`` alone)."""
    return int(np.random.SeedSequence([seed, layer, head]).generate_state(1)[0])


def _check_model_and_data(model, data, n_sequences, n_validation, n_heldout, riesz_s, lam):
    """The model's feature maps and the split sizes, checked before any work."""
    if not isinstance(model, torch.nn.Module):
        raise InputTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(data, EncodedData):
        raise InputTypeError(f"data must be an EncodedData, got {type(data).__name__}")
    fms = _kernel_feature_maps(model, "coulomb_distil_feature_maps", "a random feature map")
    kind = _first_not_random(fms, per_head=True)
    if kind is not None:
        raise InputError(
            "coulomb_distil_feature_maps moves the per-head particles Omega of a random "
            f"feature map (favor, porf, porf-softplus, softmaxfeat); the model has {kind!r}"
        )
    if any(fm.n_features < 2 for fm in fms) and any(v > 0 for v in lam):
        raise InputError("the repulsion needs n_features >= 2 particles per head")
    need = n_sequences + n_validation + n_heldout
    if need > len(data):
        raise InputError(
            f"n_sequences + n_validation + n_heldout must be <= len(data) = {len(data)}, "
            f"got {n_sequences} + {n_validation} + {n_heldout}"
        )
    d_h = fms[0].head_dim
    if not riesz_s < d_h:
        raise InputError(
            f"riesz_s must be in (-1, d_h = {d_h}) (integrable in the head dimension), "
            f"got {riesz_s}"
        )
    return fms


@declare(
    Param("lam", "real", "repulsion strengths to select from (force ratios, or lambda)",
          low=0.0, sequence=True),
    Param("beta", "real", "inverse temperature of the particles", low=0.0, low_open=True),
    Param("eta", "real", "Langevin step size", low=0.0, low_open=True, units="time"),
    Param("n_steps", "int", "Langevin steps per head", low=1),
    Param("gamma", "real", "weight of the Hedgehog loss in the energy", low=0.0,
          low_open=True),
    Param("prior", "flag", "confinement |w|^2/(2 beta): the FAVOR+ prior as the Gibbs law"),
    Param("lam_scale", "choice", "how lam is read", choices=LAM_SCALES),
    Param("riesz_s", "real", "Riesz exponent of the repulsion (d_h - 2: Coulomb)", low=-1.0,
          low_open=True),
    Param("softening", "real", "softening length of the Riesz kernel", low=0.0),
    Param("radius", "real", "radius of the ball of the particles (None: 2 sqrt(d_h) + 4)",
          low=0.0, low_open=True, optional=True),
    Param("n_sequences", "int", "training sequences (the loss's data)", low=1),
    Param("n_validation", "int", "validation sequences (selection of lam)", low=1),
    Param("n_heldout", "int", "held-out sequences (the reported TV and loss)", low=1),
    Param("batch_size", "int", "sequences per recorded batch", low=1),
    Param("seed", "seed", "seeds the split of the sequences and the Langevin noise"),
)  # fmt: skip
def coulomb_distil_feature_maps(
    model,
    data: EncodedData,
    *,
    lam=(0.0, 0.25, 1.0),
    beta: float = 1e4,
    eta: float = 0.01,
    n_steps: int = 100,
    gamma: float = 1.0,
    prior: bool = True,
    lam_scale: str = "force-ratio",
    riesz_s: float = 1.0,
    softening: float = 0.1,
    radius: float | None = None,
    n_sequences: int = 256,
    n_validation: int = 64,
    n_heldout: int = 256,
    batch_size: int = 16,
    seed: int = 0,
    log=None,
) -> dict:
    r"""Coulomb-regularised distillation of every head's ``Omega`` (module notes).

    Per layer and head, projected Langevin (mean-field regime) on

    .. math::

        H_N(\Omega) = \frac{1}{\beta N}\sum_i \frac{|\omega_i|^2}{2}
        + \gamma\, \mathcal L(\Omega)
        + \frac{\lambda}{N^2}\sum_{i \ne j} k_s(\omega_i - \omega_j),

    ``L`` the head's Hedgehog cross-entropy (:class:`HedgehogLossField`) on ``n_sequences``
    training sequences, ``k_s`` the softened Riesz kernel, from the deployed ``Omega``, for
    each ``lam`` of the grid with the same noise; the ``lam`` of lowest mean validation TV
    is installed (``set_omega``: ``Omega`` stays a buffer, ``learned`` becomes True). Layers
    are independent: each sees the softmax model's queries and keys (the teacher's).

    Parameters
    ----------
    model : torch.nn.Module
        Linearized with a random feature map
        (:func:`~meanfield.attention.linearize.linearize` with ``"favor"``, ``"porf"``,
        ``"porf-softplus"`` or ``"softmaxfeat"``); its ``Omega`` are replaced.
    data : EncodedData
        Training sequences: ``n_sequences`` are distilled on, ``n_validation`` select
        ``lam``, ``n_heldout`` measure (disjoint; the first and last are
        :func:`~meanfield.attention.learn_features.distil_feature_maps`' with this ``seed``).
    lam : sequence of float
        The grid of repulsion strengths (each >= 0; include 0 to let the selection refuse
        the repulsion). Read per ``lam_scale``.
    beta : float
        Inverse temperature (> 0). The noise moves ``Omega`` by about ``sqrt(2 eta n_steps /
        beta)`` of its norm: keep it small to refine rather than re-sample.
    eta : float
        Step size (> 0), in the units of the drift ``N grad H_N``; the time is
        ``eta n_steps``.
    n_steps : int
        Langevin steps per head and ``lam`` (>= 1).
    gamma : float
        Weight of the loss (> 0); it matters only against the prior's confinement
        (without it, ``gamma`` rescales ``eta`` and ``beta``).
    prior : bool
        Add ``|w|^2 / (2 beta)`` per particle, so that the Gibbs law is the FAVOR+ prior
        ``N(0, I)`` tilted by the loss and the repulsion (module notes). False: no
        confinement (only the ball).
    lam_scale : {"force-ratio", "absolute"}
        ``"force-ratio"``: per head, ``lambda = lam * rms(N grad gamma L) / rms(N grad R_s)``
        at the starting ``Omega``; ``"absolute"``: ``lambda = lam``.
    riesz_s : float
        Riesz exponent ``s`` in ``(-1, d_h)``; ``d_h - 2`` is Coulomb.
    softening : float
        Softening length ``epsilon >= 0`` of ``k_s``.
    radius : float, optional
        Radius of the ball of the particles (default ``2 sqrt(d_h) + 4``, as Phase A: a
        guard, not an active constraint).
    n_sequences, n_validation, n_heldout : int
        Sizes of the three disjoint sets (each >= 1).
    batch_size : int
        Sequences per recorded batch (memory only: every step uses every training batch).
    seed : int
        Seeds the split and the noise.
    log : callable, optional
        Receives one line per layer and ``lam``.

    Returns
    -------
    dict
        ``lam_selected`` and ``selection`` (per ``lam``: ``tv_validation`` (mean over layers),
        ``relative_move`` (mean over heads)); for the selected run: ``loss_before`` /
        ``loss_after`` and ``tv_before`` / ``tv_after`` (held-out, means over layers, as
        :func:`~meanfield.attention.learn_features.distil_feature_maps` reports them),
        ``relative_move`` (mean over heads of ``||Omega_T - Omega_0||_F / ||Omega_0||_F``),
        ``layers`` (per layer lists of the held-out values), ``heads`` (per ``(layer, head)``
        in row-major order: ``lam_energy``, ``relative_move``, ``loss_train_before/after``,
        ``min_distance_before/after``), ``noise_scale`` (``sqrt(2 eta n_steps / beta)``),
        ``settings`` and ``seconds``.

    Raises
    ------
    meanfield.errors.InputError
        A parameter out of range (named, with its range), a model without random per-head
        feature maps, split sizes larger than ``data``, ``riesz_s >= d_h``.
    meanfield.errors.InputTypeError
        A parameter of the wrong type, a ``model`` that is not a module, ``data`` that is
        not an ``EncodedData``.

    See Also
    --------
    HedgehogLossField : the loss as an energy term.
    meanfield.attention.learn_features.distil_feature_maps : Hedgehog-loss (Ω only), Adam.
    meanfield.attention.learn_features.phase_a_pretrained : Kernel (alignment field).
    meanfield.dynamics.langevin.simulate : the dynamics.

    References
    ----------
    - M. Zhang, K. Bhatia, H. Kumbong, C. Ré, "The Hedgehog & the Porcupine: Expressive
      linear attentions with softmax mimicry", ICLR 2024.
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
      Mathematics, EMS, 2015 (Riesz and Coulomb gases).
    - M. B. Khuzani, L. Ying, A. Clark, "Mean-field Langevin dynamics and energy landscape of
      neural networks", arXiv:1909.11820 (particles of a random-feature kernel by Langevin),
      and the paper this package reproduces (``seeds/``): Coulomb-interacting particles as
      the features of kernel attention.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.linearize import linearize
    >>> from meanfield.attention.pretrained import (encode_pretrained,
    ...     load_pretrained_classifier, save_tiny_bert)
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> model, tok = load_pretrained_classifier(folder)
    >>> data = encode_pretrained(tok, ["a good film", "a bad plot"] * 8, None, [1, 0] * 8, 8)
    >>> model = linearize(model, "softmaxfeat", n_features=8)
    >>> res = coulomb_distil_feature_maps(model, data, lam=[0.0], n_steps=10, n_sequences=8,
    ...                                   n_validation=2, n_heldout=4)
    >>> res["relative_move"] < 0.2, res["loss_after"] < res["loss_before"]
    (True, True)
    >>> coulomb_distil_feature_maps(model, data, lam=[0.0], beta=0.0)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: beta must be a finite number in (0, inf), got 0.0
    """
    lam = [float(v) for v in lam]
    fms = _check_model_and_data(model, data, n_sequences, n_validation, n_heldout, riesz_s, lam)
    d_h = fms[0].head_dim
    radius = 2.0 * math.sqrt(d_h) + 4.0 if radius is None else radius
    st = dict(
        lam=lam, beta=beta, eta=eta, n_steps=n_steps, gamma=gamma, prior=prior,
        lam_scale=lam_scale, riesz_s=riesz_s, softening=softening, radius=radius,
        n_sequences=n_sequences, n_validation=n_validation, n_heldout=n_heldout,
        batch_size=batch_size, seed=seed,
    )  # fmt: skip
    t0 = time.perf_counter()
    # the split of distil_feature_maps (same seed: same training and held-out sequences),
    # the validation sequences after them
    train_d, held_d, val_d = _disjoint_subsets(data, seed, n_sequences, n_heldout, n_validation)
    rec_train, rec_val, rec_held = (
        record_inputs(model, d, batch_size=batch_size) for d in (train_d, val_d, held_d)
    )
    omegas0 = [fm.omega.detach().to("cpu", torch.float64).clone() for fm in fms]
    candidates = []  # per lam: new omegas per layer, head records, validation TV per layer
    for lam_v in lam:
        new, heads, tv_val = [], [], []
        for layer, fm in enumerate(fms):
            om_layer = omegas0[layer].clone()
            for h in range(fm.num_heads):
                one = head_feature_map(fm, h)
                batches = _head_batches(rec_train[layer], h)
                om_layer[h], rec = _run_head(
                    one, batches, omegas0[layer][h], lam_v, st, _head_seed(seed, layer, h)
                )
                heads.append(rec)
            with torch.no_grad():
                tv_val.append(attention_cross_entropy(fm, om_layer, rec_val[layer])[1])
            new.append(om_layer)
            if log is not None:
                moves = [r["relative_move"] for r in heads[-fm.num_heads :]]
                log(f"coulomb-hedgehog lam={lam_v:g} layer {layer}: validation TV "
                    f"{tv_val[-1]:.4f}, |dOmega|/|Omega| {np.mean(moves):.4f}")  # fmt: skip
        candidates.append((new, heads, tv_val))
    scores = [float(np.mean(c[2])) for c in candidates]
    best = int(np.argmin(scores))
    new, heads, _ = candidates[best]
    held = _HeldOutRecord()
    for layer, fm in enumerate(fms):
        with torch.no_grad():
            before = attention_cross_entropy(fm, fm.omega, rec_held[layer])
            fm.set_omega(new[layer])
            held.add(before, attention_cross_entropy(fm, fm.omega, rec_held[layer]))
    summary = held.means()
    summary.update(
        lam_selected=lam[best],
        selection={
            "lam": lam,
            "tv_validation": scores,
            "relative_move": [
                float(np.mean([r["relative_move"] for r in c[1]])) for c in candidates
            ],
        },
        relative_move=float(np.mean([r["relative_move"] for r in heads])),
        layers=held.layers,
        heads=heads,
        noise_scale=math.sqrt(2.0 * eta * n_steps / beta),
        settings=st,
        seconds=time.perf_counter() - t0,
    )  # fmt: skip
    return summary
