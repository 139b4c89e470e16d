"""Linear (kernel) attention: the functional API.

The module form, :class:`~meanfield.attention.mha.KernelAttention` (a drop-in for
``torch.nn.MultiheadAttention``), and :func:`~meanfield.attention.masks.is_causal_mask` live in
:mod:`meanfield.attention.mha`.

Linear attention (THEORY.md §7) with feature maps ``phi`` from
:mod:`meanfield.attention.features`::

    out = phi(Q) (phi(K)^T V)  /  (phi(Q) (phi(K)^T 1) + eps)

Padding is masked by zeroing rows of ``phi(K)``. The bidirectional form costs
``O(L m d_h)`` time and ``O(L m)`` memory. The causal form replaces the two sums over keys by
chunked prefix sums (:mod:`meanfield.attention.causal`: inside a chunk of ``C`` tokens the
masked ``C x C`` kernel block, across chunks a running ``(m, d_h)`` state; chunk-wide feature
maxima keep positive features exact and overflow-free, a later token changing an output only
by rounding), so it costs ``O(L m (d_h + C))`` time and ``O(L (m + C + m d_h / C))`` memory.

Checks. Shapes, lengths and arguments are checked before any work, everywhere. Values (NaN
or inf, ``phi >= 0`` for precomputed features, a float mask's 0 / -inf) are checked where a
host read is cheap -- on the CPU, outside ``torch.compile`` -- and on an accelerator only
when asked (``check_inputs=True``: a host synchronisation per tensor); ``kernel_attention``
checks finiteness on its result's small state and denominators (a non-finite input always
reaches them), so its guard costs no pass over the ``(L, m)`` features.

Public functions use the ``(batch, length, heads, dim)`` layout (fast-transformers); the
module works head-major internally. All sums are accumulated in float32 (float64 for float64
input) with autocast disabled; the output is cast back to the dtype of ``v``.

The exact baseline is softmax attention through
:func:`torch.nn.functional.scaled_dot_product_attention`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..contract import declare
from ..errors import InputError, InputTypeError
from .causal import (
    ATTENTION_PARAMS,
    _grad_needed,
    _log_features,
    causal_kernel_attention,
    causal_linear_attention,
)
from .features import (
    FEATURE_KINDS,
    AttentionFeatureMap,
    PositiveFeatures,
    autocast_off,
)

__all__ = [
    "ATTENTION_KINDS",
    "kernel_attention",
    "linear_attention",
    "softmax_attention",
]

#: ``"softmax"`` (exact, SDPA), every random feature-map kind, and ``"hedgehog"`` (trained maps).
ATTENTION_KINDS = ("softmax",) + FEATURE_KINDS + ("hedgehog",)


def _declared(*names: str):
    """:func:`~meanfield.contract.declare` with the parameters of :data:`ATTENTION_PARAMS`."""
    return declare(*(ATTENTION_PARAMS[n] for n in names))


def _checks_on(t: torch.Tensor, check: bool | None) -> bool:
    """Whether to run the value checks (finite entries, ``phi >= 0``, a float mask's values).

    ``check=None`` (the default of the public functions): on the CPU only, where a reduction
    and a host read are cheap beside the attention itself; on an accelerator each would be a
    host synchronisation, so they are skipped there unless ``check=True`` (opt-in, one
    synchronisation per checked tensor). Never inside ``torch.compile`` (a host read would
    break the graph); ``check=False``: never.
    """
    if check is False or torch.compiler.is_compiling():
        return False
    return check is True or t.device.type == "cpu"


def _check_finite_input(
    name: str,
    t: torch.Tensor,
    allow_neg_inf: bool = False,
    nonnegative: bool = False,
    check: bool | None = None,
) -> None:
    """Refuse NaN or infinite entries (and, with ``nonnegative``, negative ones) in an
    attention input, where the check is cheap (:func:`_checks_on`). ``allow_neg_inf``:
    log-features, where -inf is a zero feature.

    One ``aminmax`` pass decides (a NaN propagates into both, +inf shows in the max, -inf and
    negative entries in the min); only a refused tensor is scanned again, to count.
    """
    if not _checks_on(t, check) or t.numel() == 0:
        return
    lo, hi = torch.aminmax(t.detach())
    lo, hi = torch.stack([lo, hi]).tolist()
    finite = math.isfinite(hi) and (math.isfinite(lo) or (allow_neg_inf and lo == -math.inf))
    if finite and not (nonnegative and lo < 0):
        return
    x = t.detach()
    ok = torch.isfinite(x) | (x == float("-inf")) if allow_neg_inf else torch.isfinite(x)
    n_bad = int((~ok).sum())
    if n_bad:
        raise InputError(
            f"{name} has {n_bad} non-finite entr{'y' if n_bad == 1 else 'ies'} (NaN or "
            f"{'+inf' if allow_neg_inf else 'inf'}); attention needs finite input"
        )
    n_neg = int((x < 0).sum())
    raise InputError(
        f"{name} has {n_neg} negative entr{'y' if n_neg == 1 else 'ies'} (min {lo:.3g}); "
        "linear attention needs features phi >= 0 (its weights phi(q) . phi(k) are then "
        "non-negative); pass log-features with log_space=True"
    )


def _check_finite_output(out_witness: torch.Tensor, inputs, check: bool | None) -> None:
    """The finiteness check of :func:`kernel_attention`, made after the work on a small tensor.

    A NaN or inf in ``q``, ``k`` or ``v`` always reaches the output (its denominator, or the
    ``(m, d_v + 1)`` state), so the inputs are scanned (to name the culprit,
    :func:`_check_finite_input`) only when ``out_witness`` -- a sum over that small part of
    the result -- is not finite: one reduction over ``O(L + m d_v)`` numbers instead of three
    passes over ``(L, d_h)`` inputs. Finite inputs whose result overflows pass, as before;
    non-finite entries in padding keys that the mask removes entirely also pass.
    """
    if not _checks_on(out_witness, check) or bool(torch.isfinite(out_witness)):
        return
    for name, t in inputs:
        _check_finite_input(name, t, check=check)


def _empty_result(name: str, b: int, L: int, S: int, h: int, m: int, dv: int, v):
    """An empty output where one is well defined, else a named error for zero keys.

    No query (``L = 0``, also the zero-length causal sequence), batch, head or value column:
    the output ``(b, L, h, d_v)`` is empty, and is returned as such (no work). Queries but
    no key (``S = 0``, ``L > 0``): every output would be ``0 / eps`` (NaN for ``eps = 0``), an
    average over an empty set, so it is refused; as is ``m = 0`` (no feature).
    """
    if b * L * h * dv == 0:
        return v.new_zeros(b, L, h, dv)
    if S == 0:
        raise InputError(
            f"{name} has no keys (S = 0): attention of {L} quer{'y' if L == 1 else 'ies'} "
            "over an empty set of keys is undefined; pass at least one key (or mask keys "
            "with key_padding_mask)"
        )
    if m == 0:
        raise InputError("q_features and k_features need at least one feature (m >= 1)")
    return None


def _check_mask(
    mask, batch: int, length: int, name: str = "key_padding_mask", check: bool | None = None
):
    """Return a bool mask (True = padding) of shape (batch, length) or None.

    The values of a float mask (0 / -inf only) are checked where :func:`_checks_on` allows:
    on an accelerator that is a host synchronisation, skipped unless ``check=True`` (other
    values then count as "attend", as ``mask == -inf`` decides).
    """
    if mask is None:
        return None
    if not torch.is_tensor(mask):
        raise InputTypeError(f"{name} must be a torch.Tensor or None, got {type(mask).__name__}")
    if tuple(mask.shape) != (batch, length):
        raise InputError(
            f"{name} must have shape (batch, length) = ({batch}, {length}), got {tuple(mask.shape)}"
        )
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point():
        # additive float mask (MultiheadAttention): -inf = ignore, 0 = attend
        pad = torch.isneginf(mask)
        if _checks_on(mask, check) and not torch.all(pad | (mask == 0)):
            raise InputError(
                f"a float {name} must contain only 0 (attend) and -inf (ignore); kernel "
                "attention cannot add arbitrary biases to attention logits"
            )
        return pad
    raise InputTypeError(
        f"{name} must be bool (True = padding) or float (0 / -inf), got {mask.dtype}"
    )


@_declared("causal", "log_space", "eps", "chunk_size", "check_inputs")
def linear_attention(
    q_features: torch.Tensor,
    k_features: torch.Tensor,
    v: torch.Tensor,
    *,
    key_padding_mask: torch.Tensor | None = None,
    causal: bool = False,
    log_space: bool = False,
    eps: float = 1e-6,
    chunk_size: int = 64,
    check_inputs: bool | None = None,
) -> torch.Tensor:
    r"""Normalised linear attention from precomputed (log-)features.

    Parameters
    ----------
    q_features : torch.Tensor, shape (batch, L, heads, m)
        Query features ``phi(Q) >= 0``, or their logarithms when ``log_space``.
    k_features : torch.Tensor, shape (batch, S, heads, m)
        Key features ``phi(K) >= 0``, or their logarithms when ``log_space``.
    v : torch.Tensor, shape (batch, S, heads, d_v)
    key_padding_mask : torch.Tensor of bool, shape (batch, S), optional
        True marks padding; those key rows are zeroed.
    causal : bool
        Query ``t`` attends to keys ``s <= t`` (requires ``L == S``); chunked prefix sums,
        see :mod:`meanfield.attention.causal`.
    log_space : bool
        The features are logarithms (positive random features). They are exponentiated with
        per-feature key shifts moved to the query side and a per-query shift; the shifts
        cancel exactly, every term is at most 1 and the dominant visible one is 1 (see
        :mod:`meanfield.attention.features`; causal: chunk-wide shifts, see
        :mod:`meanfield.attention.causal`).
    eps : float
        Added to the denominator (>= 0), in the units of the (shifted) features; in the
        causal form of log-features, relative to the query's kernel with its own key.
    chunk_size : int
        Chunk length of the causal prefix sums (>= 1).
    check_inputs : bool or None
        Check the values before any work: finite entries (``-inf`` allowed in
        log-features), ``phi >= 0`` (features, not log-features), a float mask of 0 / -inf
        only. ``None`` (default): on the CPU, one ``aminmax`` pass per tensor; skipped on an
        accelerator, where it would cost a host synchronisation, and under ``torch.compile``.
        ``True``: also on an accelerator (opt-in, synchronises). ``False``: never.

    Returns
    -------
    torch.Tensor, shape (batch, L, heads, d_v), dtype of ``v``
        Empty when there is no query (``L = 0``, also a zero-length causal sequence).

    Raises
    ------
    InputError
        A negative feature (the weights ``phi(q) . phi(k)`` would not be a kernel's, and the
        output not an average of the values), a NaN or inf entry (where checked); queries
        but no key (``S = 0``); no feature (``m = 0``).

    See Also
    --------
    kernel_attention : the same from queries and keys and a feature map.
    meanfield.attention.causal.causal_linear_attention : the causal form, head-major.
    softmax_attention : the exact baseline.

    Notes
    -----
    With φ_t = ``q_features[t]``, ψ_s = ``k_features[s]`` (padding rows zeroed) and s ranging
    over all keys (causal: s ≤ t),

    .. math::

        \mathrm{out}_t = \frac{\sum_s (\varphi_t \cdot \psi_s)\, v_s}
        {\sum_s \varphi_t \cdot \psi_s + \varepsilon}.

    References
    ----------
    Katharopoulos, A., Vyas, A., Pappas, N. and Fleuret, F. (2020). Transformers are RNNs:
    fast autoregressive transformers with linear attention. ICML 2020, arXiv:2006.16236.
    Choromanski, K. et al. (2021). Rethinking attention with Performers. ICLR 2021,
    arXiv:2009.14794.

    Examples
    --------
    Constant features weight every visible key alike, so the output is the mean of the
    visible values (causal: the running mean):

    >>> import torch
    >>> from meanfield.attention.linear import linear_attention
    >>> v = torch.arange(4.0).reshape(1, 4, 1, 1)  # values 0, 1, 2, 3
    >>> phi = torch.ones(1, 4, 1, 2)
    >>> linear_attention(phi, phi, v, eps=0.0).flatten()
    tensor([1.5000, 1.5000, 1.5000, 1.5000])
    >>> linear_attention(phi, phi, v, causal=True, eps=0.0).flatten()
    tensor([0.0000, 0.5000, 1.0000, 1.5000])
    >>> pad = torch.tensor([[False, False, True, True]])  # the last two keys are padding
    >>> linear_attention(phi, phi, v, key_padding_mask=pad, eps=0.0).flatten()
    tensor([0.5000, 0.5000, 0.5000, 0.5000])
    >>> log_phi = torch.zeros(1, 4, 1, 2)  # log-features: exp(0) = 1
    >>> linear_attention(log_phi, log_phi, v, log_space=True, eps=0.0).flatten()
    tensor([1.5000, 1.5000, 1.5000, 1.5000])
    """
    mask, empty = _check_feature_inputs(
        q_features, k_features, v, key_padding_mask, causal, log_space, check_inputs
    )
    if empty is not None:
        return empty
    dt = torch.float64 if torch.float64 in (q_features.dtype, v.dtype) else torch.float32
    with autocast_off(v.device):
        qf, kf, vh = (t.to(dt).transpose(1, 2) for t in (q_features, k_features, v))
        out = _linear_core(qf, kf, vh, mask, causal, log_space, eps, chunk_size)
    return out.transpose(1, 2).to(v.dtype)


def _check_causal_lengths(causal: bool, L: int, S: int) -> None:
    """Causal attention pairs query t with keys s <= t: it needs as many queries as keys."""
    if causal and L != S:
        raise InputError(f"causal attention needs equal query and key lengths, got {L} and {S}")


def _check_lengths_and_mask(
    key_padding_mask, b: int, L: int, S: int, causal: bool, check: bool | None = None
):
    """The causal length rule (``L == S``) and the checked padding mask (bool or None)."""
    _check_causal_lengths(causal, L, S)
    return _check_mask(key_padding_mask, b, S, check=check)


def _check_feature_inputs(
    q_features, k_features, v, key_padding_mask, causal, log_space, check=None
):
    """Every input check of :func:`linear_attention`; returns the padding mask (or None) and
    the empty result where there is nothing to compute (else None).

    Shapes (4-d, shared batch, heads and feature count; ``v`` the keys' length), the causal
    length rule, the mask, empty inputs (:func:`_empty_result`), then the values: finite
    entries (-inf allowed in log-features) and ``phi >= 0`` in one pass per tensor.
    """
    if not all(torch.is_tensor(t) for t in (q_features, k_features, v)):
        got = ", ".join(type(t).__name__ for t in (q_features, k_features, v))
        raise InputTypeError(f"q_features, k_features and v must be torch.Tensors, got {got}")
    if q_features.ndim != 4 or k_features.ndim != 4 or v.ndim != 4:
        raise InputError(
            "q_features, k_features and v must be 4-d (batch, length, heads, dim), got "
            f"{tuple(q_features.shape)}, {tuple(k_features.shape)}, {tuple(v.shape)}"
        )
    b, L, h, m = q_features.shape
    if k_features.shape[0] != b or k_features.shape[2:] != (h, m):
        raise InputError(
            f"k_features must have shape (batch, S, heads, m) = ({b}, S, {h}, {m}), "
            f"got {tuple(k_features.shape)}"
        )
    S = k_features.shape[1]
    if v.shape[:3] != (b, S, h):
        raise InputError(
            f"v must have shape (batch, S, heads, d_v) = ({b}, {S}, {h}, d_v), got {tuple(v.shape)}"
        )
    mask = _check_lengths_and_mask(key_padding_mask, b, L, S, causal, check)
    empty = _empty_result("k_features", b, L, S, h, m, v.shape[3], v)
    if empty is not None:
        return mask, empty
    nonneg = not log_space
    _check_finite_input("q_features", q_features, log_space, nonneg, check)
    _check_finite_input("k_features", k_features, log_space, nonneg, check)
    _check_finite_input("v", v, check=check)
    return mask, None


def _linear_core(qf, kf, v, mask, causal, log_space, eps, chunk_size):
    """Head-major core: ``(b, h, L, m)``, ``(b, h, S, m)``, ``(b, h, S, d)`` -> ``(b, h, L, d)``.

    ``mask`` (b, S), True = padding, or None. Inputs are in the compute dtype (and may be
    views of the caller's tensors: never written to).
    """
    if causal:
        return causal_linear_attention(
            qf, kf, v, log_space=log_space, eps=eps, chunk_size=chunk_size, key_padding_mask=mask
        )
    if mask is not None:
        kf = kf.masked_fill(mask[:, None, :, None], float("-inf") if log_space else 0.0)
    if log_space:
        qf, kf = _exp_bidirectional(qf, kf)
    return _normalised(qf, kf, v, eps)[0]


def _normalised(qf, kf, v, eps):
    """``phi(Q) (phi(K)^T V) / (phi(Q) (phi(K)^T 1) + eps)``, head-major.

    Returns the output ``(b, h, L, d_v)`` and ``(state, den)``: the ``(b, h, m, d_v)`` state
    and the ``(b, h, L, 1)`` denominators, small tensors that are non-finite whenever a NaN
    or inf went in (see :func:`_check_finite_output`). (A column of ones appended to ``V``
    would carry the denominator through the same products, but the ``d_v + 1``-wide matrix
    products cost more than the key sum and the matrix-vector product: 15 % at d_v = 64.)
    """
    state = kf.transpose(-1, -2) @ v  # (b, h, m, d_v)
    den = qf @ kf.sum(dim=2).unsqueeze(-1)  # (b, h, L, 1)
    return (qf @ state) / (den + eps), (state, den)


def _finite_or_zero(x):
    return torch.where(torch.isfinite(x), x, torch.zeros_like(x))


def _exp_bidirectional(qa, ka):
    """Stabilised exponentials of head-major log-features (per-feature key max moved to Q).

    Keys: ``exp(a_j(k) - M_j)`` with ``M_j`` the largest key log-feature (0 where every key
    is padding: those factors are then all 0, and so is every output's numerator and
    denominator). Queries: ``exp(a_j(q) + M_j - c)`` with their own maximum ``c``. The inputs
    are not written to.
    """
    with torch.no_grad():
        M0 = ka.amax(dim=2, keepdim=True).nan_to_num(0.0, 0.0, 0.0)  # (b, h, 1, m)
    kf = torch.exp(ka - M0)
    zq = qa + M0
    c = zq.detach().amax(dim=-1, keepdim=True).nan_to_num(0.0, 0.0, 0.0)
    qf = torch.exp(zq - c) if _grad_needed(qa, ka) else zq.sub_(c).exp_()
    return qf, kf


def _positive_bidirectional(q, k, v, fm, mask, eps):
    """Bidirectional FAVOR+ / PORF from head-major contiguous ``q``, ``k`` (compute dtype).

    As :func:`_exp_bidirectional` on ``fm.transform``, without what cancels: the per-query
    ``-|q~|^2 / 2`` and the global ``-log(m) / 2`` (every shift absorbs them), and without
    copies: ``Omega`` is scaled by ``d^(-1/4)`` once, and without a gradient to record the
    shifts and exponentials are applied in place. Per ``(L, m)`` tensor that is two passes
    beyond what a plain FAVOR+ (``exp(Omega x~ - |x~|^2 / 2 - max)``) does: the per-feature
    key maximum moved to the query side, which keeps every denominator >= 1 (module notes
    of :mod:`meanfield.attention.features`). Returns what :func:`_normalised` returns.
    """
    d = q.shape[-1]
    om = fm.omega.to(q.dtype) * d ** (-0.25)
    uq, ka = _log_features(q, k, om, mask)
    with torch.no_grad():
        M0 = ka.amax(dim=2, keepdim=True)  # (b, h, 1, m)
        if mask is not None:  # -inf where every key is padding (else finite, as the input)
            M0 = M0.nan_to_num(0.0, 0.0, 0.0)
    if _grad_needed(q, k, v, om):
        kf = torch.exp(ka - M0)
        zq = uq + M0
        qf = torch.exp(zq - zq.detach().amax(dim=-1, keepdim=True))
    else:
        kf = ka.sub_(M0).exp_()  # <= 1
        zq = uq.add_(M0)
        qf = zq.sub_(zq.amax(dim=-1, keepdim=True)).exp_()  # <= 1, one entry 1 per query
    return _normalised(qf, kf, v, eps)


def _kernel_core(q, k, v, fm, mask, causal, eps, chunk_size, finite_check=None):
    """Head-major kernel attention ``(b, h, L, d)`` -> ``(b, h, L, d_v)`` (compute dtype).

    ``finite_check``: None, or ``(inputs, check)`` for :func:`_check_finite_output` on the
    result (``inputs`` the named tensors to scan if it is not finite).
    """
    dt = torch.float64 if torch.float64 in (q.dtype, v.dtype) else torch.float32
    with autocast_off(v.device):
        fm._check_input(q, "q")
        fm._check_input(k, "k")
        if causal:  # features formed on the chunk layout, constants that cancel left out
            out = causal_kernel_attention(
                q.to(dt), k.to(dt), v.to(dt), fm,
                key_padding_mask=mask, eps=eps, chunk_size=chunk_size,
            )  # fmt: skip
            small = (out,)  # its (b, h, L, d_v) output: the chunk states are not kept
        else:
            # contiguous head-major copies: the feature matmul on a transposed view is a
            # strided batched product, several times slower than one plain matrix product
            qc, kc, vd = q.to(dt).contiguous(), k.to(dt).contiguous(), v.to(dt)
            if type(fm) is PositiveFeatures:
                out, small = _positive_bidirectional(qc, kc, vd, fm, mask, eps)
            else:
                qf, kf = fm.transform_queries(qc), fm.transform_keys(kc)
                if mask is not None:
                    pad = mask[:, None, :, None]
                    grad = _grad_needed(qc, kc, *fm.buffers(), *fm.parameters())
                    kf = kf.masked_fill(pad, 0.0) if grad else kf.masked_fill_(pad, 0.0)
                out, small = _normalised(qf, kf, vd, eps)
        if finite_check is not None and _checks_on(out, finite_check[1]):
            inputs, check = finite_check
            witness = small[0].sum() if len(small) == 1 else small[0].sum() + small[1].sum()
            _check_finite_output(witness, inputs, check)
        return out


@_declared("causal", "eps", "chunk_size", "check_inputs")
def kernel_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    feature_map: AttentionFeatureMap,
    *,
    key_padding_mask: torch.Tensor | None = None,
    causal: bool = False,
    eps: float = 1e-6,
    chunk_size: int = 64,
    check_inputs: bool | None = None,
) -> torch.Tensor:
    r"""Linear attention with a feature map: ``phi(Q) (phi(K)^T V) / (phi(Q) phi(K)^T 1 + eps)``.

    Parameters
    ----------
    q : torch.Tensor, shape (batch, L, heads, d_h)
    k : torch.Tensor, shape (batch, S, heads, d_h)
    v : torch.Tensor, shape (batch, S, heads, d_v)
    feature_map : AttentionFeatureMap
        Applied to queries and keys alike (one ``Omega``).
    key_padding_mask, causal, eps, chunk_size
        As in :func:`linear_attention`.
    check_inputs : bool or None
        Refuse NaN or inf in ``q``, ``k``, ``v`` (and a float mask other than 0 / -inf).
        ``None`` (default): on the CPU, checked on the result -- a non-finite input always
        makes the denominators or the small ``(m, d_v + 1)`` state non-finite, so one
        reduction over those decides, and only then are the inputs scanned to name the one at
        fault (NaN or inf confined to padding keys that the mask removes passes); skipped on
        an accelerator (a host synchronisation) and under ``torch.compile``. ``True``: the
        inputs are checked before any work, also on an accelerator (opt-in, synchronises).
        ``False``: never.

    Returns
    -------
    torch.Tensor, shape (batch, L, heads, d_v), dtype of ``v``
        Empty when there is no query (``L = 0``).

    Raises
    ------
    InputError
        NaN or inf in an input (where checked); queries but no key (``S = 0``).

    See Also
    --------
    linear_attention : from precomputed features.
    meanfield.attention.features.make_feature_map : the feature maps.
    meanfield.attention.mha.KernelAttention : the module form (a drop-in for
        torch.nn.MultiheadAttention).

    Notes
    -----
    For positive random features E[φ(q) · φ(k)] = exp(q · k / √d_h), so

    .. math::

        \mathrm{out}_t = \frac{\sum_s \varphi(q_t) \cdot \varphi(k_s)\, v_s}
        {\sum_s \varphi(q_t) \cdot \varphi(k_s) + \varepsilon}
        \approx \sum_s \operatorname{softmax}_s\left(\frac{q_t \cdot k_s}{\sqrt{d_h}}\right) v_s.

    References
    ----------
    Katharopoulos, A., Vyas, A., Pappas, N. and Fleuret, F. (2020). Transformers are RNNs:
    fast autoregressive transformers with linear attention. ICML 2020, arXiv:2006.16236.
    Choromanski, K. et al. (2021). Rethinking attention with Performers. ICLR 2021,
    arXiv:2009.14794.

    Examples
    --------
    With 256 orthogonal positive features the output is close to exact softmax attention:

    >>> import torch
    >>> from meanfield.attention.features import make_feature_map
    >>> from meanfield.attention.linear import kernel_attention, softmax_attention
    >>> _ = torch.manual_seed(0)
    >>> q, k, v = (0.5 * torch.randn(1, 16, 1, 4) for _ in range(3))
    >>> fm = make_feature_map("porf", 4, 256, seed=0)
    >>> out = kernel_attention(q, k, v, fm)
    >>> out.shape
    torch.Size([1, 16, 1, 4])
    >>> bool((out - softmax_attention(q, k, v)).abs().max() < 0.05)
    True
    """
    mask = _check_qkv_inputs(q, k, v, key_padding_mask, causal, check_inputs)
    (b, L, h), S = q.shape[:3], k.shape[1]
    empty = _empty_result("k", b, L, S, h, None, v.shape[3], v)
    if empty is not None:
        return empty
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
    named = (("q", q), ("k", k), ("v", v))
    post = (named, check_inputs) if check_inputs is None else None
    out = _kernel_core(qh, kh, vh, feature_map, mask, causal, eps, chunk_size, post)
    return out.transpose(1, 2).to(v.dtype)


def _check_qkv_inputs(q, k, v, key_padding_mask, causal: bool, check: bool | None = True):
    """Every input check of :func:`kernel_attention`; returns the padding mask (or None).

    Shapes (4-d tensors sharing batch and heads, ``k`` and ``v`` the length), the causal
    length rule, the mask (its values as :func:`_checks_on` says), then with ``check=True``
    finite entries, also on an accelerator (``None``: :func:`kernel_attention` checks the
    result instead).
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not torch.is_tensor(t):
            raise InputTypeError(
                f"{name} must be a 4-d torch.Tensor (batch, length, heads, dim), got "
                f"{type(t).__name__}"
            )
        if t.ndim != 4:
            raise InputError(
                f"{name} must be a 4-d tensor (batch, length, heads, dim), got {tuple(t.shape)}"
            )
    b, L = q.shape[:2]
    S = k.shape[1]
    if k.shape[0] != b or v.shape[:3] != k.shape[:3] or q.shape[2] != k.shape[2]:
        raise InputError(
            "q, k and v must share batch and heads, and k, v the length; got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    mask = _check_lengths_and_mask(key_padding_mask, b, L, S, causal, check)
    if check is True:
        for name, t in (("q", q), ("k", k), ("v", v)):
            _check_finite_input(name, t, check=True)
    return mask


@_declared("causal", "dropout_p")
def softmax_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    key_padding_mask: torch.Tensor | None = None,
    causal: bool = False,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    r"""Exact softmax attention ``softmax(Q K^T / sqrt(d_h)) V`` via PyTorch's SDPA.

    Parameters
    ----------
    q : torch.Tensor, shape (batch, L, heads, d_h)
    k : torch.Tensor, shape (batch, S, heads, d_h)
    v : torch.Tensor, shape (batch, S, heads, d_v)
    key_padding_mask : torch.Tensor of bool, shape (batch, S), optional
        True marks padding.
    causal : bool
        Lower-triangular mask (``L == S``).
    dropout_p : float
        Dropout on the attention weights, in [0, 1).

    Returns
    -------
    torch.Tensor, shape (batch, L, heads, d_v)
        Empty when there is no query (``L = 0``, also a zero-length causal sequence), as
        ``torch.nn.functional.scaled_dot_product_attention`` gives.

    Raises
    ------
    InputError
        Shapes that do not match (4-d tensors sharing batch and heads, ``k``, ``v`` the
        length, ``q``, ``k`` the head dimension), a causal call with ``L != S``, a
        ``dropout_p`` outside [0, 1); queries but no key (``S = 0``): SDPA returns zeros
        there, an average over an empty set, which is refused as in
        :func:`kernel_attention` and :func:`linear_attention`.
    InputTypeError
        A mask that is not a bool or float tensor, a ``dropout_p`` that is not a number.

    See Also
    --------
    kernel_attention : its linear-time approximation.
    meanfield.attention.mha.KernelAttention : the module form (``feature="softmax"``).

    Notes
    -----
    .. math::

        \mathrm{out}_t = \sum_s \frac{\exp(q_t \cdot k_s / \sqrt{d_h})}
        {\sum_{s'} \exp(q_t \cdot k_{s'} / \sqrt{d_h})}\, v_s.

    References
    ----------
    Vaswani, A. et al. (2017). Attention is all you need. NeurIPS 2017, arXiv:1706.03762.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.linear import softmax_attention
    >>> _ = torch.manual_seed(0)
    >>> q, k, v = (torch.randn(1, 5, 1, 4) for _ in range(3))
    >>> out = softmax_attention(q, k, v)
    >>> w = torch.softmax(q[0, :, 0] @ k[0, :, 0].T / 2.0, dim=-1)  # sqrt(d_h) = 2
    >>> torch.allclose(out[0, :, 0], w @ v[0, :, 0], atol=1e-6)
    True
    >>> causal = softmax_attention(q, k, v, causal=True)
    >>> torch.allclose(causal[0, 0], v[0, 0])  # the first query sees only the first key
    True
    """
    # the shapes, causal lengths and mask as kernel_attention checks them (values: SDPA's own)
    mask = _check_qkv_inputs(q, k, v, key_padding_mask, causal, check=False)
    (b, L, h), S = q.shape[:3], k.shape[1]
    if q.shape[3] != k.shape[3]:
        raise InputError(
            f"q and k must share the head dimension d_h, got {q.shape[3]} and {k.shape[3]}"
        )
    # SDPA gives zeros for queries over no key (S = 0): refused here, as the kernel forms do
    empty = _empty_result("k", b, L, S, h, None, v.shape[3], v)
    if empty is not None:
        return empty
    attn_mask = None
    if mask is not None:
        allowed = ~mask[:, None, None, :]  # (b, 1, 1, S), True = attend
        if causal:
            allowed = allowed & torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
            causal = False
        attn_mask = allowed
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        attn_mask=attn_mask,
        dropout_p=float(dropout_p),
        is_causal=causal,
    )
    return out.transpose(1, 2)
