"""The masks of ``nn.MultiheadAttention`` for kernel attention: checked, and planned into
what runs in ``O(L)`` and what needs the explicit ``(N, H, L, S)`` weights.

Linear attention computes ``phi(Q) (phi(K)^T V)`` in ``O(L)`` [2]_; only masks that factor
through that form run there: key padding (bool, or float 0/-inf) and the causal mask, alone or
together (the masks of multi-head attention [1]_). :func:`plan_masks` checks the masks of a
call (their dtypes and shapes, as :class:`torch.nn.MultiheadAttention` accepts them) and
turns any other mask into one additive bias, applied exactly through the explicit weights
(``_kernel_weights``, at ``O(L S)`` memory); :func:`is_causal_mask` recognises the exact
causal mask in torch's two spellings.

References
----------
.. [1] A. Vaswani et al., "Attention is all you need", NeurIPS 2017 (the masks of
   multi-head attention).
.. [2] A. Katharopoulos, A. Vyas, N. Pappas and F. Fleuret, "Transformers are RNNs: fast
   autoregressive transformers with linear attention", ICML 2020 (causal masking by prefix
   sums in O(L)).
"""

from __future__ import annotations

import torch

from ..errors import InputError, InputTypeError
from .features import AttentionFeatureMap, autocast_off
from .linear import _check_causal_lengths, _finite_or_zero

__all__ = ["is_causal_mask", "plan_masks"]


def _mask_tensor(mask, name: str):
    """Validate the dtype of a mask (bool or floating) and return it, or None.

    The dtypes of :class:`torch.nn.MultiheadAttention`: bool (True = not allowed) or floating
    (*added* to the attention logits, so a float 0/1 mask is not a padding mask). An integer
    mask has no meaning there (torch refuses it too): refused by name, never guessed.
    """
    if mask is None:
        return None
    if not torch.is_tensor(mask):
        raise InputTypeError(f"{name} must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise InputTypeError(
            f"{name} must be bool (True = not allowed) or floating (added to the logits), got "
            f"dtype {mask.dtype}; pass {name}.bool() if 1 marks the positions to ignore"
        )
    if mask.is_floating_point() and mask.device.type != "meta":
        if torch.isnan(mask).any() or torch.isposinf(mask).any():
            raise InputError(f"a float {name} must not contain NaN or +inf")
    return mask


def _future(L: int, S: int, device) -> torch.Tensor:
    """bool (L, S), True strictly above the diagonal: the keys a causal query may not see."""
    return torch.ones(L, S, dtype=torch.bool, device=device).triu(1)


def _open_columns(mask: torch.Tensor, n: int) -> torch.Tensor:
    """A bool mask widened by ``n`` False (= visible) columns on the right.

    ``torch.cat`` with a block of zeros, not ``F.pad(..., value=False)``: torch.compile's CPU
    code generation miscompiles ``F.pad`` of a bool tensor (a C++ error in inductor, torch
    2.13; see :func:`meanfield.attention.causal._has_key`).
    """
    return torch.cat([mask, mask.new_zeros(*mask.shape[:-1], n)], dim=-1)


def is_causal_mask(attn_mask: torch.Tensor) -> bool:
    """True when ``attn_mask`` (shape (..., L, L)) is exactly the causal mask.

    Accepted forms are those of :class:`torch.nn.MultiheadAttention`: bool with True above the
    diagonal (True = not allowed), or float with ``-inf`` above the diagonal and 0 on and
    below it (:meth:`torch.nn.Transformer.generate_square_subsequent_mask`); a 3-d mask must
    have every slice causal.

    See Also
    --------
    plan_masks : where the causal mask runs in O(L).
    meanfield.attention.causal.causal_kernel_attention : the O(L) attention a causal mask
        allows.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.masks import is_causal_mask
    >>> is_causal_mask(torch.nn.Transformer.generate_square_subsequent_mask(3))
    True
    >>> is_causal_mask(torch.ones(3, 3, dtype=torch.bool).triu(1))
    True
    >>> is_causal_mask(torch.zeros(3, 3))  # no masking at all
    False
    """
    L, S = attn_mask.shape[-2:]
    if L != S:
        return False
    future = _future(L, S, attn_mask.device)
    if attn_mask.dtype == torch.bool:
        return bool(torch.equal(attn_mask, future.expand_as(attn_mask)))
    return bool(torch.where(future, torch.isneginf(attn_mask), attn_mask == 0).all())


def plan_masks(key_padding_mask, attn_mask, is_causal: bool, N: int, H: int, L: int, S: int):
    """Check the masks of one call and split them into what runs in O(L) and what needs the
    explicit (N, H, L, S) weights.

    Key padding (bool, or float 0 / -inf) and the causal mask (``is_causal``, or an
    ``attn_mask`` that is exactly causal, :func:`is_causal_mask`) factor through linear
    attention's ``phi(Q) (phi(K)^T V)``; any other mask becomes one additive bias, which then
    holds the padding and the causality too.

    Parameters
    ----------
    key_padding_mask : torch.Tensor, shape (N, S), optional
        bool (True = ignore) or float (added to the logits).
    attn_mask : torch.Tensor, shape (L, S) or (N * H, L, S), optional
        bool (True = not allowed) or float (added to the logits).
    is_causal : bool
        Causal attention asked for (``attn_mask``, if given, must then be the causal mask).
    N, H, L, S : int
        Batch size, number of heads, query and key lengths.

    Returns
    -------
    pad : torch.Tensor of bool, shape (N, S), or None
        True = ignore this key.
    causal : bool
        Apply the causal mask in the O(L) form.
    bias : torch.Tensor or None
        An additive float mask broadcastable to (N, H, L, S) (``-inf`` = not allowed); when
        given, ``pad`` is None and ``causal`` False (the bias includes them).

    Raises
    ------
    meanfield.errors.InputTypeError
        A mask that is neither bool nor floating (an integer mask has no meaning).
    meanfield.errors.InputError
        A float mask with NaN or +inf.
    ValueError
        A mask of the wrong shape, or ``is_causal=True`` with a mask that is not causal.

    See Also
    --------
    is_causal_mask : the test of the exact causal mask.
    meanfield.attention.mha.KernelAttention.forward : the module that plans its masks here.

    References
    ----------
    .. [1] A. Katharopoulos, A. Vyas, N. Pappas and F. Fleuret, "Transformers are RNNs: fast
       autoregressive transformers with linear attention", ICML 2020 (causal linear attention
       by prefix sums).

    Examples
    --------
    A bool padding mask runs in O(L); a general float mask becomes one additive bias:

    >>> import torch
    >>> from meanfield.attention.masks import plan_masks
    >>> pad = torch.tensor([[False, False, True]])
    >>> p, causal, bias = plan_masks(pad, None, True, 1, 2, 3, 3)
    >>> p.tolist(), causal, bias
    ([[False, False, True]], True, None)
    >>> p, causal, bias = plan_masks(pad, torch.zeros(3, 3), False, 1, 2, 3, 3)
    >>> p, causal, bias.shape, bias[0, 0, 0].tolist()
    (None, False, torch.Size([1, 1, 3, 3]), [0.0, 0.0, -inf])
    """
    kpm = _mask_tensor(key_padding_mask, "key_padding_mask")
    am = _mask_tensor(attn_mask, "attn_mask")
    pad = bias = None
    if kpm is not None:
        if tuple(kpm.shape) != (N, S):
            raise InputError(
                f"key_padding_mask must have shape (batch, S) = ({N}, {S}), got {tuple(kpm.shape)}"
            )
        if kpm.dtype == torch.bool:
            pad = kpm
        elif bool((torch.isneginf(kpm) | (kpm == 0)).all()):
            pad = torch.isneginf(kpm)
        else:  # other additive values cannot be applied in O(L)
            bias = kpm[:, None, None, :]
    causal = False
    if am is not None:
        if am.ndim == 2 and tuple(am.shape) != (L, S):
            raise InputError(
                f"a 2-d attn_mask must have shape (L, S) = ({L}, {S}), got {tuple(am.shape)}"
            )
        if am.ndim == 3 and tuple(am.shape) != (N * H, L, S):
            raise InputError(
                f"a 3-d attn_mask must have shape (batch * num_heads, L, S) = "
                f"({N * H}, {L}, {S}), got {tuple(am.shape)}"
            )
        if am.ndim not in (2, 3):
            raise InputError(f"attn_mask must be 2-d or 3-d, got shape {tuple(am.shape)}")
        if is_causal_mask(am):
            causal = True
        elif is_causal:
            raise InputError(
                "is_causal=True but attn_mask is not the causal mask (True / -inf exactly "
                "above the diagonal); pass attn_mask=None with is_causal=True, or the "
                "general mask with is_causal=False"
            )
        else:
            add = am if am.is_floating_point() else torch.zeros(am.shape, device=am.device)
            if not am.is_floating_point():
                add = add.masked_fill(am, float("-inf"))
            add = add.reshape(1, 1, L, S) if am.ndim == 2 else add.reshape(N, H, L, S)
            bias = add if bias is None else bias + add
    elif is_causal:
        causal = True
    _check_causal_lengths(causal, L, S)
    if bias is not None:  # one additive mask holds everything
        if pad is not None:
            bias = bias.masked_fill(pad[:, None, None, :], float("-inf"))
        if causal:
            bias = bias.masked_fill(_future(L, S, bias.device), float("-inf"))
        pad, causal = None, False
    return pad, causal, bias


def _full_bias(pad, causal, L, St, n_extra, device):
    """The additive (.., L, St) mask of padding and causality; appended keys stay open."""
    full = torch.zeros(1, 1, L, St, device=device)
    if causal:
        fut = _open_columns(_future(L, St - n_extra, device), n_extra)
        full = full.masked_fill(fut, float("-inf"))
    if pad is not None:
        full = full.masked_fill(pad[:, None, None, :], float("-inf"))
    return full


def _kernel_weights(fm: AttentionFeatureMap, q, k, bias, eps):
    """Explicit kernel-attention weights, head-major; O(L S) memory (O(L S m) time, log space).

    Parameters
    ----------
    q : (b, h, L, d); k : (b, h, S, d)
    bias : float tensor broadcastable to (b, h, L, S), or None
        Additive mask: the kernel is multiplied by ``exp(bias)`` (``-inf`` = not allowed);
        for softmax attention that is the additive logit mask of ``nn.MultiheadAttention``.
    eps : float
        Denominator epsilon, in units where the largest weight of a row is at most 1.

    Returns
    -------
    torch.Tensor, shape (b, h, L, S), rows summing to 1 (0 where no key is allowed)
    """
    dt = torch.float64 if q.dtype == torch.float64 else torch.float32
    with autocast_off(q.device):
        qf, kf = fm.transform_queries(q.to(dt)), fm.transform_keys(k.to(dt))
        if bias is not None:
            bias = bias.to(dt)
        if fm.log_space:
            # log K(q_l, k_s) = logsumexp_j (a_j(q_l) + a_j(k_s)): exact for any magnitude,
            # in row blocks that bound the (rows, S, m) temporary
            b, h, L, m = qf.shape
            rows = max(1, (1 << 24) // max(1, b * h * kf.shape[2] * m))
            logits = torch.cat(
                [
                    torch.logsumexp(qf[:, :, i : i + rows, None, :] + kf[:, :, None], dim=-1)
                    for i in range(0, L, rows)
                ],
                dim=2,
            )
            if bias is not None:
                logits = logits + bias
            a = torch.exp(logits - _finite_or_zero(logits.amax(-1, keepdim=True)).detach())
        else:
            a = qf @ kf.transpose(-1, -2)
            if bias is not None:
                # shift positive biases down per row so that exp(bias) cannot overflow
                top = _finite_or_zero(bias.amax(-1, keepdim=True)).clamp(min=0).detach()
                a = a * torch.exp(bias - top)
        den = a.sum(-1, keepdim=True) + eps
        # a query that sees no key (a row of zeros) gets zero weights, also for eps = 0,
        # where the 0 / 0 would otherwise be NaN in the weights and their gradient
        return a / torch.where(den > 0, den, torch.ones_like(den))
