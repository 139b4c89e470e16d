"""The published Hedgehog feature map: a trainable per-head map with a two-sided softmax.

Hedgehog (Zhang, Bhatia, Kumbong & Ré, ICLR 2024 [1]_) replaces the random projection of FAVOR+
by a *learned* one. Per head ``h``, a query or key ``x`` in ``R^{d_h}`` is mapped to

.. math::

    u = W_h x + b_h \\in \\mathbb{R}^m, \\qquad
    \\varphi(x) = \\bigl[\\operatorname{softmax}(u),\\ \\operatorname{softmax}(-u)\\bigr]
    \\in \\mathbb{R}^{2m},

two softmaxes, each over its own ``m`` features, concatenated, so ``phi >= 0`` and
``sum(phi) = 2`` for every token. ``W_h`` starts at the identity (``m = d_h`` by default;
a rectangular identity otherwise) and ``b_h`` at zero, and queries and keys have *separate*
maps (the authors' follow-up code; ``separate_query_key=False`` ties them). The maps are
trained first by distillation, matching softmax attention weights with the Hedgehog loss (the
cross-entropy of :func:`meanfield.attention.learn_features.attention_cross_entropy`), then
fine-tuned with the model.

Conventions, where this differs from :mod:`meanfield.attention.features`:

* ``W`` and ``b`` are :class:`torch.nn.Parameter` (trained), not a buffer of particles; the
  map draws nothing at random, so there is no seed.
* The map acts on the raw per-head query or key, not on ``x / d_h^(1/4)``: the learned ``W``
  absorbs the softmax scale, as in the published method.
* Features are computed in at least float32 with autocast off, like the other maps.

References
----------
.. [1] M. Zhang, K. Bhatia, H. Kumbong, C. Ré, "The Hedgehog & the Porcupine: Expressive
   Linear Attentions with Softmax Mimicry", ICLR 2024, arXiv:2402.04347.

See Also
--------
meanfield.attention.features.SoftmaxFeatures : the same two-sided softmax on a fixed
    (random or Phase-A) ``Omega`` shared by queries and keys.
"""

from __future__ import annotations

import torch
from torch import nn

from ..contract import Param, declare
from ..errors import InputError, InputTypeError
from .features import _compute_dtype, autocast_off

__all__ = ["HedgehogFeatureMap"]


class HedgehogFeatureMap(nn.Module):
    """Hedgehog's trainable feature map ``phi(x) = [softmax(W x + b), softmax(-(W x + b))]``.

    Parameters
    ----------
    head_dim : int
        Per-head dimension ``d_h`` of queries and keys (>= 1).
    num_heads : int, optional
        One map per head (weights of shape ``(num_heads, m, d_h)``); inputs then carry the
        head axis third from last, ``(..., num_heads, L, d_h)``. Without it one map serves
        every input.
    n_features : int, optional
        ``m``, the width of each softmax (default ``d_h``: the square map of the paper). The
        map has ``2 m`` outputs.
    separate_query_key : bool, default True
        Separate maps for queries and keys (the authors' code); False ties them.
    bias : bool, default True
        Learn the bias ``b``.

    Attributes
    ----------
    query_weight, key_weight : torch.nn.Parameter, shape ([num_heads,] m, d_h)
        ``key_weight`` is ``query_weight`` when tied.
    query_bias, key_bias : torch.nn.Parameter or None, shape ([num_heads,] m)
    n_outputs : int
        ``2 m``.

    See Also
    --------
    meanfield.attention.learn_features.distil_feature_maps : trains the maps (distillation).
    meanfield.attention.linearize.linearize : ``feature_map="hedgehog"`` puts one in every layer.
    meanfield.attention.features.SoftmaxFeatures : the random (untrained) softmax features.

    References
    ----------
    Zhang, M., Bhatia, K., Kumbong, H. and Ré, C. (2024). The Hedgehog & the Porcupine:
    expressive linear attentions with softmax mimicry. ICLR 2024, arXiv:2402.04347.

    Examples
    --------
    >>> fm = HedgehogFeatureMap(head_dim=4, num_heads=2)
    >>> q = torch.randn(3, 2, 5, 4)  # (batch, heads, L, d_h)
    >>> phi = fm.transform_queries(q)
    >>> tuple(phi.shape), bool((phi >= 0).all())
    ((3, 2, 5, 8), True)
    >>> bool(torch.allclose(phi.sum(-1), torch.tensor(2.0)))  # two distributions
    True
    >>> bool(torch.allclose(phi[..., :4], torch.softmax(q, -1)))  # identity start, zero bias
    True
    >>> sum(p.numel() for p in fm.parameters())  # 2 maps x 2 heads x (4 x 4 + 4)
    80
    """

    kind = "hedgehog"
    #: attention consumes features, not log-features
    log_space = False

    @declare(
        Param("head_dim", "int", "dimension d_h of a head's queries and keys", low=1),
        Param("num_heads", "int", "heads, each with its own maps (None: one map shared by "
              "every head)", low=1, optional=True),
        Param("n_features", "int", "features m per half (None: head_dim); phi has 2 m",
              low=1, optional=True),
        Param("separate_query_key", "flag", "separate query and key maps (else tied)"),
        Param("bias", "flag", "the maps learn a bias b"),
    )  # fmt: skip
    def __init__(
        self,
        head_dim: int,
        num_heads: int | None = None,
        *,
        n_features: int | None = None,
        separate_query_key: bool = True,
        bias: bool = True,
    ):
        super().__init__()
        self.head_dim = head_dim
        self.num_heads = num_heads
        self.n_features = head_dim if n_features is None else n_features
        self.separate_query_key = separate_query_key
        heads = () if self.num_heads is None else (self.num_heads,)
        self.query_weight = nn.Parameter(torch.empty(*heads, self.n_features, self.head_dim))
        self.query_bias = nn.Parameter(torch.empty(*heads, self.n_features)) if bias else None
        if separate_query_key:
            self.key_weight = nn.Parameter(torch.empty_like(self.query_weight))
            self.key_bias = nn.Parameter(torch.empty(*heads, self.n_features)) if bias else None
        self.reset_parameters()

    @property
    def has_bias(self) -> bool:
        """Whether the maps learn a bias ``b``.

        Examples
        --------
        >>> HedgehogFeatureMap(head_dim=2).has_bias, HedgehogFeatureMap(2, bias=False).has_bias
        (True, False)
        """
        return self.query_bias is not None

    # tied maps: the key side reads the query side's parameters (one tensor, one gradient)
    def __getattr__(self, name: str):
        if name in ("key_weight", "key_bias") and not self.__dict__.get("separate_query_key", True):
            return getattr(self, name.replace("key", "query"))
        return super().__getattr__(name)

    def reset_parameters(self) -> None:
        """Identity weights (rectangular when ``m != d_h``) and zero biases: the paper's start.

        Examples
        --------
        >>> fm = HedgehogFeatureMap(head_dim=3)
        >>> with torch.no_grad():
        ...     _ = fm.query_weight.add_(1.0)
        >>> fm.reset_parameters()
        >>> torch.equal(fm.query_weight, torch.eye(3))
        True
        """
        eye = torch.eye(self.n_features, self.head_dim)
        with torch.no_grad():
            for side in ("query", "key") if self.separate_query_key else ("query",):
                weight = getattr(self, f"{side}_weight")
                weight.copy_(eye.expand_as(weight))
                bias = getattr(self, f"{side}_bias")
                if bias is not None:
                    bias.zero_()

    @property
    def n_outputs(self) -> int:
        """Number of output features, ``2 m``.

        Examples
        --------
        >>> HedgehogFeatureMap(head_dim=4, n_features=6).n_outputs
        12
        """
        return 2 * self.n_features

    def _check_input(self, x, name: str) -> None:
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
                f"{self.num_heads}, L, head_dim) for a per-head map, got shape {tuple(x.shape)}"
            )

    def _features(self, x: torch.Tensor, side: str) -> torch.Tensor:
        self._check_input(x, "queries" if side == "query" else "keys")
        weight, bias = getattr(self, f"{side}_weight"), getattr(self, f"{side}_bias")
        dt = _compute_dtype(x.dtype)
        with autocast_off(x.device):
            u = x.to(dt) @ weight.to(dt).transpose(-1, -2)  # per-head weights broadcast
            if bias is not None:
                b = bias.to(dt)
                u = u + (b if self.num_heads is None else b.unsqueeze(-2))
            return torch.cat([torch.softmax(u, dim=-1), torch.softmax(-u, dim=-1)], dim=-1)

    def transform_queries(self, x: torch.Tensor) -> torch.Tensor:
        """Query features ``phi_Q(x)``.

        Parameters
        ----------
        x : torch.Tensor, shape (..., head_dim) or (..., num_heads, L, head_dim)

        Returns
        -------
        torch.Tensor, shape (..., 2 m)
            Non-negative, each half summing to 1; float32 (float64 for float64 input).

        Examples
        --------
        >>> fm = HedgehogFeatureMap(head_dim=2)
        >>> fm.transform_queries(torch.zeros(1, 2))  # u = 0: uniform halves
        tensor([[0.5000, 0.5000, 0.5000, 0.5000]], grad_fn=<CatBackward0>)
        """
        return self._features(x, "query")

    def transform_keys(self, x: torch.Tensor) -> torch.Tensor:
        """Key features ``phi_K(x)`` (the query map when tied).

        Parameters
        ----------
        x : torch.Tensor, shape (..., head_dim) or (..., num_heads, L, head_dim)

        Returns
        -------
        torch.Tensor, shape (..., 2 m)

        Examples
        --------
        >>> fm = HedgehogFeatureMap(head_dim=2, separate_query_key=False)
        >>> x = torch.randn(4, 2)
        >>> torch.equal(fm.transform_keys(x), fm.transform_queries(x))
        True
        """
        return self._features(x, "key")

    def kernel(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The learned kernel matrix ``phi_Q(q) phi_K(k)^T``.

        Parameters
        ----------
        q : torch.Tensor, shape (..., L, head_dim)
        k : torch.Tensor, shape (..., S, head_dim)

        Returns
        -------
        torch.Tensor, shape (..., L, S)
            Entries in [0, 2] (each half contributes a product of two probability vectors).

        Examples
        --------
        >>> fm = HedgehogFeatureMap(head_dim=3)
        >>> K = fm.kernel(torch.randn(5, 3), torch.randn(4, 3))
        >>> tuple(K.shape), bool((K >= 0).all() and (K <= 2).all())
        ((5, 4), True)
        """
        return self.transform_queries(q) @ self.transform_keys(k).transpose(-1, -2)

    def extra_repr(self) -> str:
        """The settings shown by ``repr`` (torch's hook).

        Examples
        --------
        >>> HedgehogFeatureMap(head_dim=4, num_heads=2).extra_repr()
        "kind='hedgehog', head_dim=4, n_features=4, num_heads=2, separate_query_key=True, bias=True"
        """
        return (
            f"kind={self.kind!r}, head_dim={self.head_dim}, n_features={self.n_features}, "
            f"num_heads={self.num_heads}, separate_query_key={self.separate_query_key}, "
            f"bias={self.has_bias}"
        )
