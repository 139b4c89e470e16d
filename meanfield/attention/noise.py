r"""Test-time token noise: the robustness probe of the NLP study.

Each content token (not ``[PAD]``, ``[UNK]``, ``[CLS]`` or ``[SEP]``) is, independently with
probability ``rate``, either *dropped* (the rest of the sequence shifts left, so the sequence
gets shorter) or *swapped* for a token drawn uniformly from the non-special vocabulary, each
with probability 1/2. The draw is seeded, so every variant is evaluated on exactly the same
corrupted sequences.

Per content token, independently,

.. math::

    P(\text{kept}) = 1 - r, \qquad P(\text{dropped}) = P(\text{swapped}) = r/2,

so the expected length of a sequence with L content tokens is (1 − r/2) L.

Examples
--------
>>> import torch
>>> from meanfield.attention.noise import perturb_tokens
>>> from meanfield.attention.training import EncodedData
>>> ids = torch.tensor([[2, 10, 11, 12, 3, 0]])
>>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.tensor([5]),
...                    torch.tensor([1]))
>>> perturb_tokens(data, rate=0.0, vocab_size=20, seed=0).input_ids
tensor([[ 2, 10, 11, 12,  3,  0]])
"""

from __future__ import annotations

import numpy as np
import torch

from .._validation import check_int
from .tokenizer import SPECIAL_TOKENS
from .training import EncodedData

__all__ = ["perturb_tokens", "N_SPECIAL"]

#: ids 0..3 are [PAD], [UNK], [CLS], [SEP] in :class:`~meanfield.attention.tokenizer.TextTokenizer`
N_SPECIAL = len(SPECIAL_TOKENS)


def perturb_tokens(
    data: EncodedData, rate: float, vocab_size: int, seed: int, n_special: int = N_SPECIAL
) -> EncodedData:
    """A copy of ``data`` with random token drops and swaps.

    Parameters
    ----------
    data : EncodedData
        Padded on the right (as :func:`~meanfield.attention.training.encode` makes it).
    rate : float
        Probability that a content token is perturbed, in [0, 1).
    vocab_size : int
        Swapped-in tokens are drawn uniformly from ``[n_special, vocab_size)``.
    seed : int
        Seeds the draws (``numpy.random.default_rng``).
    n_special : int
        Ids below this are special tokens and never touched.

    Returns
    -------
    EncodedData
        Same shape; segment ids follow their tokens; dropped positions become padding.

    Raises
    ------
    ValueError
        ``rate`` outside [0, 1).
    meanfield.errors.InputError
        ``vocab_size`` ≤ ``n_special``.

    See Also
    --------
    meanfield.attention.training.encode : makes the input.
    meanfield.attention.text_data.tokenised_splits : the noised evaluation split.
    meanfield.attention.training.predict_proba : evaluates on the noised copy.

    Examples
    --------
    Special tokens ([CLS] = 2, [SEP] = 3) and padding are never touched; at a high rate the
    content tokens are dropped (the sequence shortens) or swapped for ids in [4, 20):

    >>> import torch
    >>> from meanfield.attention.noise import perturb_tokens
    >>> from meanfield.attention.training import EncodedData
    >>> ids = torch.tensor([[2, 10, 11, 12, 13, 3, 0, 0]])
    >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.tensor([6]),
    ...                    torch.tensor([1]))
    >>> noisy = perturb_tokens(data, rate=0.9, vocab_size=20, seed=0)
    >>> row = noisy.input_ids[0, : int(noisy.lengths[0])]
    >>> int(row[0]), int(row[-1]), bool(noisy.padding_mask[0, int(noisy.lengths[0]):].all())
    (2, 3, True)
    """
    if not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"rate must be in [0, 1), got {rate!r}")
    vocab_size = check_int("vocab_size", vocab_size, minimum=n_special + 1)
    rng = np.random.default_rng(seed)
    ids = data.input_ids.numpy()
    seg = data.segment_ids.numpy()
    n, width = ids.shape
    new_ids = np.zeros_like(ids)
    new_seg = np.zeros_like(seg)
    lengths = np.zeros(n, dtype=np.int64)
    for i in range(n):
        L = int(data.lengths[i])
        row, srow = ids[i, :L].copy(), seg[i, :L]
        content = row >= n_special
        hit = content & (rng.random(L) < rate)
        drop = hit & (rng.random(L) < 0.5)
        swap = hit & ~drop
        row[swap] = rng.integers(n_special, vocab_size, size=int(swap.sum()))
        keep = ~drop
        k = int(keep.sum())
        new_ids[i, :k] = row[keep]
        new_seg[i, :k] = srow[keep]
        lengths[i] = k
    mask = np.arange(width)[None, :] >= lengths[:, None]
    return EncodedData(
        torch.as_tensor(new_ids),
        torch.as_tensor(new_seg),
        torch.as_tensor(mask),
        torch.as_tensor(lengths),
        data.labels.clone(),
    )
