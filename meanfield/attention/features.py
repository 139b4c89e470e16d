"""Feature maps for kernel (linear) attention: FAVOR+, PORF, PORF-softplus, softmaxfeat.

Conventions (THEORY.md §7). Per head, queries and keys ``x`` in ``R^{d_h}`` are scaled to
``x~ = x / d_h^(1/4)``, so that for the positive features ``phi(q) . phi(k)`` is an unbiased
estimate of ``exp(q^T k / sqrt(d_h))``, the softmax-attention kernel. The feature matrix
``Omega`` has shape ``(m, d_h)``; its rows are the *particles* that Phase A learns
(:mod:`meanfield.attention.phases`).

"Feature" here means an attention feature map ``phi_Omega(x)`` in ``R^m`` computed from the
whole matrix ``Omega`` (softmaxfeat couples its rows, so it is not a sum over particles), not
the mean-field feature ``phi(x; omega)`` of one data point and one particle
(:mod:`meanfield.features`) nor the output columns of a scikit-learn transformer
(:mod:`meanfield.learners`); ``n_features`` counts the rows ``m`` of ``Omega`` everywhere.

Design (after fast-transformers / performer-pytorch):

* One ``Omega`` per module, shared by queries and keys (and by all heads of a layer).
* Randomness is drawn in one place, :meth:`AttentionFeatureMap.new_feature_map`, from a
  ``torch.Generator`` seeded by the ``seed`` passed to it; nothing in ``forward`` draws
  random numbers, so a module is deterministic in eval mode (and in training mode unless the
  attention module is told to redraw, see :class:`meanfield.attention.mha.KernelAttention`).
* ``Omega`` is a buffer, not a parameter: the optimiser never sees it. Phase A writes it
  with :meth:`AttentionFeatureMap.set_omega`; Phase B trains every other parameter.
* Features are computed in at least float32, with autocast disabled (fp32 accumulation under
  mixed precision), and the result is float32 (or float64 for float64 input).
* :meth:`AttentionFeatureMap.raw_features` is the definition of the kernel (unshifted);
  :meth:`AttentionFeatureMap.transform` is what attention consumes (log-features when
  ``log_space``).

Stabilising shifts of the positive features (FAVOR+, PORF). ``exp(Omega x~)`` overflows
float32 for large inputs, so these maps return *log-features*
``a_j(x) = omega_j . x~ - |x~|^2 / 2 - log(m) / 2`` (``log_space = True``) and
:func:`meanfield.attention.linear.linear_attention` exponentiates them with shifts that cancel
exactly in the normalised output. For feature ``j`` the key side is shifted by ``M_j``, the
largest key log-feature visible to the query (over all real keys in the bidirectional form;
over keys ``s <= t``, a running maximum, in the causal form), and ``M_j`` is added back on the
query side, which is then shifted by its own per-token maximum
``c(t) = max_j (a_j(q_t) + M_j)``. Every product ``phi_j(q) phi_j(k)`` is thus
``exp(a_j(q) + a_j(k) - c(t))``: exact, at most 1, and equal to 1 for the dominant
(feature, key) pair, so the denominator is at least 1 and nothing overflows or underflows
except terms negligible next to that one (the "online softmax" trick, per feature). In the
causal form (:mod:`meanfield.attention.causal`) the shifts are chunk-wide: they cancel exactly
in the ratio, so a later key of the same chunk can change an output only through rounding (and
a chunk whose denominator underflows is recomputed exactly in log space); no shift depends on a
later chunk. The epsilon of the denominator is applied in these units.

softmaxfeat (Hedgehog-style). ``phi(x) = [softmax(Omega x~), softmax(-Omega x~)]``: the two
halves ("+" and "-") each have their *own* softmax over the ``m`` features, and are
concatenated, so the map has ``2 m`` outputs and ``sum(phi) = 2`` for every token. A softmax
is invariant to shifts of its logits; PyTorch's softmax subtracts the per-token maximum, so no
extra shift is needed (and none involves other tokens). With ``symmetric=False`` only the "+"
half is used (``m`` outputs).

PORF-softplus. ``phi(x) = m^(-1/2) softplus(Omega x~)``, with an orthogonal initial ``Omega``.
It is a positive kernel of its own, not an estimate of the softmax kernel. Its values grow only
linearly (``softplus(u) <= max(u, 0) + log 2``), so float32 sums overflow only for inputs near
``1e18``; it needs no shift.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn

from .._validation import check_choice, check_int
from ..errors import InputError, InputTypeError
from ..features import gaussian_rows, orthogonal_rows

__all__ = [
    "FEATURE_KINDS",
    "AttentionFeatureMap",
    "PositiveFeatures",
    "SoftplusFeatures",
    "SoftmaxFeatures",
    "gaussian_omega",
    "orthogonal_omega",
    "make_feature_map",
    "check_feature_state",
    "check_feature_states",
]

#: Names accepted by :func:`make_feature_map` (and by ``KernelAttention(feature=...)``).
FEATURE_KINDS = ("favor", "porf", "porf-softplus", "softmaxfeat")


def autocast_off(device: torch.device):
    """Context that disables autocast on ``device`` (nothing to disable on e.g. "meta").

    See Also
    --------
    AttentionFeatureMap : the maps whose features it keeps in full precision.
    meanfield.attention.linear.linear_attention : the sums it protects.
    meanfield.attention.hedgehog.HedgehogFeatureMap : computes its features under it.

    Examples
    --------
    >>> with autocast_off(torch.device("cpu")):
    ...     torch.is_autocast_enabled("cpu")
    False
    """
    if device.type in ("cpu", "cuda", "xpu", "mps", "hpu"):
        return torch.autocast(device_type=device.type, enabled=False)
    return contextlib.nullcontext()


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 stays float64; every other floating dtype is computed in float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def gaussian_omega(
    n_features: int, head_dim: int, generator: torch.Generator, dtype=torch.float32
) -> torch.Tensor:
    """iid standard normal feature matrix (FAVOR+), from :func:`meanfield.features.gaussian_rows`.

    Returns
    -------
    omega : torch.Tensor, shape (n_features, head_dim)

    See Also
    --------
    orthogonal_omega : orthogonal blocks (PORF).
    meanfield.features.gaussian_rows : the shared draw.

    References
    ----------
    .. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines",
       NeurIPS 2007.
    .. [2] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021 (FAVOR+).

    Examples
    --------
    >>> om = gaussian_omega(5, 4, torch.Generator().manual_seed(0))
    >>> tuple(om.shape), om.dtype
    ((5, 4), torch.float32)
    """
    return gaussian_rows(n_features, head_dim, generator).to(dtype)


def orthogonal_omega(
    n_features: int, head_dim: int, generator: torch.Generator, dtype=torch.float32
) -> torch.Tensor:
    """Orthogonal random features (PORF): blocks of ``head_dim`` orthogonal rows.

    Drawn by :func:`meanfield.features.orthogonal_rows` (Haar directions, χ norms, so every
    row is marginally N(0, I) and the positive-feature kernel estimate stays unbiased).

    Returns
    -------
    omega : torch.Tensor, shape (n_features, head_dim)

    See Also
    --------
    gaussian_omega : iid rows (FAVOR+).
    meanfield.features.orthogonal_rows : the shared draw.

    References
    ----------
    .. [1] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021 (the positive
       features and their orthogonal draws).

    Examples
    --------
    >>> om = orthogonal_omega(4, 4, torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> D = om / om.norm(dim=1, keepdim=True)
    >>> bool(torch.allclose(D @ D.T, torch.eye(4, dtype=torch.float64)))
    True
    """
    return orthogonal_rows(n_features, head_dim, generator).to(dtype)


class AttentionFeatureMap(nn.Module):
    """Base class: one feature matrix ``omega`` (a buffer) shared by queries and keys.

    Not to be confused with the feature map φ(x; ω) of the particles,
    :class:`meanfield.features.FeatureMap`.

    Parameters
    ----------
    head_dim : int
        Per-head dimension ``d_h`` of queries and keys (>= 1).
    n_features : int
        Number of particles ``m`` (rows of ``omega``, >= 1).
    orthogonal : bool
        Draw ``omega`` in orthogonal blocks (PORF) instead of iid.
    seed : int
        Seed of the initial draw (>= 0); see :meth:`new_feature_map`.
    num_heads : int, optional
        One ``Omega`` per head (shape ``(num_heads, n_features, head_dim)``) instead of one
        shared by all heads. Inputs then carry the head axis third from last,
        ``(..., num_heads, L, head_dim)`` (the head-major layout of attention), and head ``h``
        of the input goes through ``omega[h]``.

    Attributes
    ----------
    omega : torch.Tensor, shape (n_features, head_dim) or (num_heads, n_features, head_dim)
        float32 buffer.
    learned : bool
        True once :meth:`set_omega` installed particles (e.g. from Phase A).

    See Also
    --------
    make_feature_map : a built-in map by name.
    meanfield.attention.mha.KernelAttention : the attention module that holds one.
    meanfield.features.FeatureMap : the feature map φ(x; ω) of the particles.

    References
    ----------
    .. [1] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021 (the positive
       features and their orthogonal draws).

    Examples
    --------
    >>> fm = make_feature_map("favor", head_dim=4, n_features=8, seed=0)  # an AttentionFeatureMap
    >>> tuple(fm.omega.shape), fm.learned
    ((8, 4), False)
    >>> fm.set_omega(torch.zeros(8, 4))
    >>> fm.learned
    True
    """

    kind = "base"

    def __init__(
        self,
        head_dim: int,
        n_features: int,
        *,
        orthogonal: bool,
        seed: int = 0,
        num_heads: int | None = None,
    ):
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim)
        self.n_features = check_int("n_features", n_features)
        self.orthogonal = bool(orthogonal)
        self.num_heads = None if num_heads is None else check_int("num_heads", num_heads)
        heads = () if self.num_heads is None else (self.num_heads,)
        self.register_buffer("omega", torch.empty(*heads, self.n_features, self.head_dim))
        self.learned = False
        self.new_feature_map(check_int("seed", seed, minimum=0))
        # refuse another map's state before its omega is copied in
        self.register_load_state_dict_pre_hook(_refuse_other_map_state)

    # -- randomness lives here and only here ---------------------------------------------
    def new_feature_map(self, seed: int) -> None:
        """Draw a fresh ``omega`` from a generator seeded with ``seed`` (the only random draw).

        The same ``seed`` always gives the same ``omega`` on every device.

        Examples
        --------
        >>> fm = make_feature_map("porf", head_dim=4, n_features=8, seed=0)
        >>> first = fm.omega.clone()
        >>> fm.new_feature_map(1)
        >>> torch.equal(fm.omega, first), fm.seed
        (False, 1)
        >>> fm.new_feature_map(0)
        >>> torch.equal(fm.omega, first)
        True
        """
        seed = check_int("seed", seed, minimum=0)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        draw = orthogonal_omega if self.orthogonal else gaussian_omega
        # per-head: independent blocks drawn in head order from the one generator
        blocks = [
            draw(self.n_features, self.head_dim, gen, dtype=torch.float32)
            for _ in range(self.num_heads or 1)
        ]
        omega = blocks[0] if self.num_heads is None else torch.stack(blocks)
        with torch.no_grad():
            self.omega.copy_(omega.to(self.omega.device))
        self.seed = seed
        self.learned = False

    def set_omega(self, omega) -> None:
        """Install given particles (e.g. learned by Phase A) as ``omega``; marks ``learned``.

        Parameters
        ----------
        omega : array_like, shape (n_features, head_dim) or (num_heads, n_features, head_dim)
            Finite values, in the shape of :attr:`omega`.

        Examples
        --------
        >>> fm = make_feature_map("favor", head_dim=2, n_features=3, seed=0)
        >>> fm.set_omega([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        >>> fm.omega.sum().item(), fm.learned
        (4.0, True)
        """
        om = torch.as_tensor(omega, dtype=torch.float64).detach().cpu()
        if om.shape != self.omega.shape:
            names = (
                "(n_features, head_dim)"
                if self.num_heads is None
                else ("(num_heads, n_features, head_dim)")
            )
            raise InputError(
                f"omega must have shape {names} = {tuple(self.omega.shape)}, got {tuple(om.shape)}"
            )
        if not torch.isfinite(om).all():
            raise InputError("omega must be finite (no NaN or inf)")
        with torch.no_grad():
            self.omega.copy_(om.to(device=self.omega.device, dtype=self.omega.dtype))
        self.learned = True

    # keep `learned` and `seed` in state_dict so a saved Phase-A model reloads as learned, and
    # what the map is (`kind`, ...), so a state of another map is refused, not relabelled
    def _identity(self) -> dict:
        """What distinguishes this map from another of the same ``omega`` shape."""
        return {"kind": self.kind}

    def get_extra_state(self):
        """``learned``, ``seed`` and the map's identity (``kind``), saved in the ``state_dict``
        (torch's hook).

        Examples
        --------
        >>> fm = make_feature_map("favor", head_dim=2, n_features=3, seed=5)
        >>> fm.get_extra_state()
        {'learned': False, 'seed': 5, 'kind': 'favor'}
        """
        return {"learned": self.learned, "seed": self.seed, **self._identity()}

    def set_extra_state(self, state):
        """Restore ``learned`` and ``seed`` from a ``state_dict`` (torch's hook).

        A state of another map (another ``kind``: FAVOR+ and PORF share the class and the
        shape of ``omega``) is refused by :func:`check_feature_state` before anything is
        loaded; a state saved before ``kind`` was recorded loads as before.

        Examples
        --------
        >>> learned = make_feature_map("favor", head_dim=2, n_features=3, seed=5)
        >>> learned.set_omega(torch.ones(3, 2))
        >>> fm = make_feature_map("favor", head_dim=2, n_features=3)
        >>> _ = fm.load_state_dict(learned.state_dict())  # calls set_extra_state
        >>> fm.learned, fm.seed, torch.equal(fm.omega, torch.ones(3, 2))
        (True, 5, True)
        """
        check_feature_state(self, state)
        self.learned = bool(state.get("learned", False))
        self.seed = int(state.get("seed", 0))

    # -- helpers --------------------------------------------------------------------------
    @property
    def n_outputs(self) -> int:
        """Number of output features (``m``, or ``2 m`` for symmetric softmaxfeat).

        Examples
        --------
        >>> [make_feature_map(kind, 4, 8).n_outputs for kind in ("favor", "softmaxfeat")]
        [8, 16]
        """
        return self.n_features

    def _check_input(self, x: torch.Tensor, name: str) -> None:
        if not torch.is_tensor(x):
            raise InputTypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_floating_point():
            raise InputTypeError(f"{name} must be a floating tensor, got dtype {x.dtype}")
        if x.ndim < 1 or x.shape[-1] != self.head_dim:
            raise InputError(
                f"{name} must have last dimension head_dim = {self.head_dim}, "
                f"got shape {tuple(x.shape)}"
            )
        if self.num_heads is not None and (x.ndim < 3 or x.shape[-3] != self.num_heads):
            raise InputError(
                f"{name} must have the head axis third from last (..., num_heads = "
                f"{self.num_heads}, L, head_dim) for a per-head feature map, got shape "
                f"{tuple(x.shape)}"
            )

    def _logits(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``u = Omega x~`` and ``|x~|^2 / 2`` in the compute dtype (autocast off)."""
        dt = _compute_dtype(x.dtype)
        xs = x.to(dt) * self.head_dim ** (-0.25)
        u = xs @ self.omega.to(dt).transpose(-1, -2)  # per-head omega broadcasts over heads
        half_sq = 0.5 * (xs * xs).sum(-1, keepdim=True)
        return u, half_sq

    def raw_features(self, x: torch.Tensor) -> torch.Tensor:
        """Unshifted features ``phi(x)`` (float64 recommended; may overflow for large x).

        This is the kernel's definition: ``raw_features(q) @ raw_features(k).T`` is the
        kernel matrix. Used by tests, by the alignment diagnostic and by Phase A.

        Parameters
        ----------
        x : torch.Tensor, shape (..., head_dim)

        Returns
        -------
        torch.Tensor, shape (..., n_outputs)

        Examples
        --------
        >>> fm = make_feature_map("favor", head_dim=4, n_features=4096, seed=0)
        >>> q = k = torch.full((1, 4), 0.5, dtype=torch.float64)
        >>> est = (fm.raw_features(q) @ fm.raw_features(k).T).item()
        >>> abs(est / math.exp((q @ k.T).item() / 2) - 1) < 0.05  # exp(q.k / sqrt(d_h))
        True
        """
        self._check_input(x, "x")
        with autocast_off(x.device):
            return self._raw(x)

    #: True when :meth:`transform` returns log-features (exponentiated, with shifts, by
    #: :func:`~meanfield.attention.linear.linear_attention`)
    log_space = False

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        """What attention consumes: features, or log-features when ``log_space``.

        Queries and keys go through the same map (one ``Omega``); stabilising shifts are
        applied by :func:`~meanfield.attention.linear.linear_attention`, which sees both.

        Parameters
        ----------
        x : torch.Tensor, shape (..., head_dim)

        Returns
        -------
        torch.Tensor, shape (..., n_outputs), float32 (float64 for float64 input)

        Examples
        --------
        >>> x = torch.randn(2, 5, 4)
        >>> make_feature_map("porf-softplus", head_dim=4, n_features=8).transform(x).shape
        torch.Size([2, 5, 8])
        """
        self._check_input(x, "x")
        with autocast_off(x.device):
            return self._transform(x)

    def transform_queries(self, x: torch.Tensor) -> torch.Tensor:
        """What attention consumes for queries: :meth:`transform` (one map for both sides).

        A map with separate query and key maps
        (:class:`~meanfield.attention.hedgehog.HedgehogFeatureMap`) overrides this and
        :meth:`transform_keys`; attention calls these two, never :meth:`transform` directly.

        Examples
        --------
        >>> fm = make_feature_map("porf-softplus", head_dim=4, n_features=8)
        >>> x = torch.randn(3, 4)
        >>> torch.equal(fm.transform_queries(x), fm.transform_keys(x))
        True
        """
        return self.transform(x)

    def transform_keys(self, x: torch.Tensor) -> torch.Tensor:
        """What attention consumes for keys: :meth:`transform` (see :meth:`transform_queries`).

        Examples
        --------
        >>> fm = make_feature_map("favor", head_dim=4, n_features=8)
        >>> fm.transform_keys(torch.randn(2, 4)).shape
        torch.Size([2, 8])
        """
        return self.transform(x)

    # subclasses implement these two
    def _raw(self, x):  # pragma: no cover - abstract
        raise NotImplementedError

    def _transform(self, x):  # pragma: no cover - abstract
        raise NotImplementedError

    def extra_repr(self) -> str:
        """The settings shown by ``repr`` (torch's hook).

        Examples
        --------
        >>> make_feature_map("porf", head_dim=4, n_features=8).extra_repr()
        "kind='porf', head_dim=4, n_features=8, orthogonal=True, learned=False"
        """
        heads = "" if self.num_heads is None else f"num_heads={self.num_heads}, "
        return (
            f"kind={self.kind!r}, head_dim={self.head_dim}, n_features={self.n_features}, "
            f"{heads}orthogonal={self.orthogonal}, learned={self.learned}"
        )


class PositiveFeatures(AttentionFeatureMap):
    """FAVOR+ / PORF positive random features.

    ``phi(x) = m^(-1/2) exp(Omega x~ - |x~|^2 / 2)``, ``x~ = x / d_h^(1/4)``, so that for
    ``omega_j ~ N(0, I)`` (iid, or orthogonal with chi norms)
    ``E[phi(q) . phi(k)] = exp(q^T k / sqrt(d_h))``. :meth:`~AttentionFeatureMap.transform` returns
    ``log phi`` (``log_space = True``); attention applies the stabilising shifts described in
    the module notes, which cancel in its output.

    Parameters
    ----------
    head_dim, n_features, seed
        See :class:`AttentionFeatureMap`.
    orthogonal : bool, default False
        False: FAVOR+ (iid Gaussian rows); True: PORF (orthogonal blocks, chi norms).

    See Also
    --------
    SoftplusFeatures, SoftmaxFeatures : the other built-in maps.
    orthogonal_omega, gaussian_omega : the PORF and FAVOR+ draws of ``omega``.
    meanfield.attention.linear.kernel_attention : attention with these features.

    References
    ----------
    .. [1] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021 (the positive
       features and their orthogonal draws).

    Examples
    --------
    >>> fm = PositiveFeatures(head_dim=4, n_features=16, seed=0)
    >>> x = torch.randn(3, 4, dtype=torch.float64)
    >>> bool(torch.allclose(fm.transform(x).exp(), fm.raw_features(x)))  # log-features
    True
    """

    def __init__(
        self, head_dim: int, n_features: int, *, orthogonal: bool = False, seed=0, num_heads=None
    ):
        super().__init__(
            head_dim, n_features, orthogonal=orthogonal, seed=seed, num_heads=num_heads
        )
        self.kind = "porf" if orthogonal else "favor"

    log_space = True

    def _raw(self, x):
        return torch.exp(self._transform(x))

    def _transform(self, x):
        u, half_sq = self._logits(x)
        return u - half_sq - 0.5 * math.log(self.n_features)


class SoftplusFeatures(AttentionFeatureMap):
    """PORF-softplus: ``phi(x) = m^(-1/2) softplus(Omega x~)`` with orthogonal initial Omega.

    A positive kernel of its own (not an estimate of softmax). No shift is needed: the
    values grow at most linearly in ``|x|``.

    See Also
    --------
    PositiveFeatures, SoftmaxFeatures : the other built-in maps.
    orthogonal_omega : its initial ``omega``.
    make_feature_map : a map by ``kind`` (``"porf-softplus"``).

    Examples
    --------
    >>> fm = SoftplusFeatures(head_dim=4, n_features=8, seed=0)
    >>> phi = fm.raw_features(torch.randn(3, 4))
    >>> tuple(phi.shape), bool((phi > 0).all())
    ((3, 8), True)
    """

    def __init__(
        self, head_dim: int, n_features: int, *, orthogonal: bool = True, seed=0, num_heads=None
    ):
        super().__init__(
            head_dim, n_features, orthogonal=orthogonal, seed=seed, num_heads=num_heads
        )
        self.kind = "porf-softplus"

    def _raw(self, x):
        u, _ = self._logits(x)
        return torch.nn.functional.softplus(u) * self.n_features ** (-0.5)

    def _transform(self, x):
        return self._raw(x)


class SoftmaxFeatures(AttentionFeatureMap):
    """softmaxfeat (Hedgehog-style): ``phi(x) = [softmax(Omega x~), softmax(-Omega x~)]``.

    The "+" and "-" halves have separate softmaxes (each sums to 1 over its ``m`` features);
    ``symmetric=False`` keeps only the "+" half. The kernel is not an estimate of softmax
    attention; it is a normalised exponential kernel that couples all ``m`` particles through
    its per-token normaliser.

    Parameters
    ----------
    head_dim, n_features, seed
        See :class:`AttentionFeatureMap`.
    orthogonal : bool, default True
        Orthogonal initial Omega (iid Gaussian when False).
    symmetric : bool, default True
        Use both halves (``2 m`` outputs).

    See Also
    --------
    PositiveFeatures, SoftplusFeatures : the other built-in maps.
    meanfield.attention.hedgehog.HedgehogFeatureMap : the published Hedgehog map (trained).

    References
    ----------
    .. [1] M. Zhang, K. Bhatia, H. Kumbong and C. Ré, "The Hedgehog & the Porcupine: expressive
       linear attentions with softmax mimicry", ICLR 2024.

    Examples
    --------
    >>> fm = SoftmaxFeatures(head_dim=4, n_features=8, seed=0)
    >>> phi = fm.raw_features(torch.randn(3, 4))
    >>> tuple(phi.shape), bool(torch.allclose(phi.sum(-1), torch.full((3,), 2.0)))  # two halves
    ((3, 16), True)
    """

    def __init__(
        self,
        head_dim: int,
        n_features: int,
        *,
        orthogonal: bool = True,
        symmetric: bool = True,
        seed=0,
        num_heads=None,
    ):
        super().__init__(
            head_dim, n_features, orthogonal=orthogonal, seed=seed, num_heads=num_heads
        )
        self.symmetric = bool(symmetric)
        self.kind = "softmaxfeat"

    @property
    def n_outputs(self) -> int:
        return 2 * self.n_features if self.symmetric else self.n_features

    def _identity(self) -> dict:
        return {"kind": self.kind, "symmetric": self.symmetric}

    def _raw(self, x):
        u, _ = self._logits(x)
        plus = torch.softmax(u, dim=-1)
        if not self.symmetric:
            return plus
        return torch.cat([plus, torch.softmax(-u, dim=-1)], dim=-1)

    def _transform(self, x):
        return self._raw(x)


def check_feature_state(fm: AttentionFeatureMap, state, where: str = "state_dict") -> None:
    """Refuse the saved extra state of another feature map (another ``kind``, ...).

    Parameters
    ----------
    fm : AttentionFeatureMap
        The map that would load the state.
    state : dict or None
        Its ``_extra_state`` entry (:meth:`AttentionFeatureMap.get_extra_state`); None or a
        state saved before the identity was recorded passes.
    where : str
        Names the state in the message (the key of the entry).

    Raises
    ------
    meanfield.errors.InputError
        The state records another ``kind`` (or ``symmetric``) than ``fm`` has.

    See Also
    --------
    check_feature_states : every feature map of a module.
    AttentionFeatureMap.get_extra_state : the state checked.
    make_feature_map : a map by ``kind``.

    Examples
    --------
    >>> favor = make_feature_map("favor", 4, 8)
    >>> porf_state = make_feature_map("porf", 4, 8).get_extra_state()
    >>> check_feature_state(favor, porf_state)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: state_dict holds a feature map with kind='porf', not the ...
    """
    if not isinstance(state, dict):
        return
    mine = fm._identity()
    for key, value in mine.items():
        if key in state and state[key] != value:
            raise InputError(
                f"{where} holds a feature map with {key}={state[key]!r}, not the "
                f"{key}={value!r} of the module it is loaded into; build the module with that "
                "kind (KernelAttention(feature=...), linearize(model, ...)) before loading"
            )


def check_feature_states(module: nn.Module, state_dict, prefix: str = "") -> None:
    """:func:`check_feature_state` for every feature map under ``module``, before loading.

    A module's ``load_state_dict`` pre-hook calls it so that a state of other feature maps is
    refused before any of the module's tensors is overwritten.

    See Also
    --------
    check_feature_state : the check of one map's state.
    meanfield.attention.mha.KernelAttention : calls it before loading a state.

    Examples
    --------
    >>> from meanfield.attention.mha import KernelAttention
    >>> porf = KernelAttention(8, 2, feature="porf", n_features=4)
    >>> favor_state = KernelAttention(8, 2, n_features=4).state_dict()
    >>> check_feature_states(porf, favor_state)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: state_dict['feature_map._extra_state'] holds a feature map ...
    """
    for name, sub in module.named_modules():
        if isinstance(sub, AttentionFeatureMap):
            key = f"{prefix}{name}{'.' if name else ''}_extra_state"
            check_feature_state(sub, state_dict.get(key), f"state_dict[{key!r}]")


def _refuse_other_map_state(module, state_dict, prefix, *args) -> None:
    """load_state_dict pre-hook of every feature map (see :func:`check_feature_states`)."""
    check_feature_states(module, state_dict, prefix)


def make_feature_map(
    kind: str, head_dim: int, n_features: int, *, seed: int = 0, num_heads: int | None = None
) -> AttentionFeatureMap:
    """Build a feature map by name.

    Parameters
    ----------
    kind : {"favor", "porf", "porf-softplus", "softmaxfeat"}
        ``favor``: positive iid (FAVOR+); ``porf``: positive orthogonal; ``porf-softplus``:
        softplus of orthogonal features; ``softmaxfeat``: symmetric softmax features.
    head_dim, n_features : int
        ``d_h >= 1`` and ``m >= 1``.
    seed : int
        Seed of the initial ``omega`` (>= 0).
    num_heads : int, optional
        One ``omega`` per head (see :class:`AttentionFeatureMap`).

    See Also
    --------
    FEATURE_KINDS : the names accepted.
    PositiveFeatures, SoftplusFeatures, SoftmaxFeatures : the maps it builds.
    meanfield.attention.mha.KernelAttention : ``feature=`` builds its map here.

    References
    ----------
    .. [1] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021 (FAVOR+,
       PORF).
    .. [2] M. Zhang, K. Bhatia, H. Kumbong and C. Ré, "The Hedgehog & the Porcupine: expressive
       linear attentions with softmax mimicry", ICLR 2024 (softmaxfeat).

    Examples
    --------
    >>> [type(make_feature_map(k, 4, 8)).__name__ for k in FEATURE_KINDS]
    ['PositiveFeatures', 'PositiveFeatures', 'SoftplusFeatures', 'SoftmaxFeatures']
    >>> fm = make_feature_map("favor", 4, 8, num_heads=3)
    >>> tuple(fm.omega.shape), tuple(fm.transform(torch.randn(2, 3, 5, 4)).shape)
    ((3, 8, 4), (2, 3, 5, 8))
    """
    check_choice("feature kind", kind, FEATURE_KINDS)
    kw = dict(seed=seed, num_heads=num_heads)
    if kind == "favor":
        return PositiveFeatures(head_dim, n_features, orthogonal=False, **kw)
    if kind == "porf":
        return PositiveFeatures(head_dim, n_features, orthogonal=True, **kw)
    if kind == "porf-softplus":
        return SoftplusFeatures(head_dim, n_features, orthogonal=True, **kw)
    return SoftmaxFeatures(head_dim, n_features, orthogonal=True, **kw)


def chi_mean(k: int) -> float:
    """Mean of the chi distribution with ``k`` degrees of freedom (used by tests).

    See Also
    --------
    orthogonal_omega : rows with chi-distributed norms.
    PositiveFeatures : PORF, whose row norms follow the chi law.
    gaussian_omega : iid rows, whose norms are chi-distributed too.

    Examples
    --------
    >>> round(chi_mean(1), 6)  # E|N(0, 1)| = sqrt(2 / pi)
    0.797885
    """
    return math.sqrt(2.0) * math.exp(math.lgamma((k + 1) / 2) - math.lgamma(k / 2))
