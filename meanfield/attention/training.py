r"""Training a :class:`~meanfield.attention.model.TransformerClassifier`: batches, AdamW with
early stopping on a validation split, prediction.

Kept apart from :mod:`meanfield.attention.phases` (which learns the feature matrices) because
every variant of the NLP study -- softmax, vanilla X, Kernel-X and the controls -- is trained
by this one function, so their differences are only what happens to ``Omega``.

Conventions
-----------
* Batches are *length-bucketed*: the shuffled training set is cut into pools of
  ``bucket_batches`` batches, each pool is sorted by length and split into batches, and the
  batch order is shuffled again. Every batch is trimmed to its longest sequence, so padding
  costs little (about 1.6x faster than plain shuffling on SST-2), while the data order stays
  random at the pool level.
* Early stopping: the validation log loss is measured every ``eval_every`` epochs; training
  stops after ``patience`` evaluations without improvement (by more than ``min_delta``) or at
  ``max_epochs``, and the parameters of the best evaluation are restored. The log loss (not
  the accuracy) is the stopping criterion because it is smooth and the study also reports
  calibration.
* Learning rate: linear warm-up over ``warmup_steps`` steps, then constant (the stopping point
  is not known in advance, so no decay schedule is tied to it):

  .. math::

      \mathrm{lr}(s) = \mathrm{lr} \cdot \min\Big(1, \frac{s + 1}{\text{warmup\_steps} + 1}\Big).

Examples
--------
>>> import torch
>>> from meanfield.attention.training import EncodedData, iterate_batches
>>> ids = torch.tensor([[2, 5, 3, 0], [2, 6, 7, 3]])
>>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.tensor([3, 4]),
...                    torch.tensor([0, 1]))
>>> [b[0].shape for b in iterate_batches(data, 1, shuffle=False)]
[torch.Size([1, 3]), torch.Size([1, 4])]
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .._validation import check_int, check_positive

__all__ = [
    "EncodedData",
    "encode",
    "iterate_batches",
    "split_validation",
    "validation_indices",
    "TrainSettings",
    "train",
    "predict_proba",
    "validation_loss",
]


@dataclass
class EncodedData:
    """Token ids and labels as tensors (row ``i`` is example ``i``).

    Parameters
    ----------
    input_ids, segment_ids : torch.LongTensor, shape (n, max_length)
        Token ids (padded on the right with 0) and the 0/1 sentence of each token.
    padding_mask : torch.BoolTensor, shape (n, max_length)
        True = padding.
    lengths : torch.LongTensor, shape (n,)
        Number of real tokens of each example.
    labels : torch.LongTensor, shape (n,)
        Class ids.

    See Also
    --------
    encode : makes one from texts.
    meanfield.attention.pretrained.encode_pretrained : makes one with a pretrained tokenizer.
    iterate_batches : its batches.
    split_validation : its stratified split.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.training import EncodedData
    >>> ids = torch.tensor([[2, 5, 3, 0], [2, 6, 7, 3], [2, 8, 3, 0]])
    >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.tensor([3, 4, 3]),
    ...                    torch.tensor([0, 1, 0]))
    >>> len(data), data.subset([2, 0]).labels
    (3, tensor([0, 0]))
    """

    input_ids: torch.Tensor
    segment_ids: torch.Tensor
    padding_mask: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return self.labels.shape[0]

    def subset(self, index) -> EncodedData:
        """The examples at ``index``, in that order.

        Parameters
        ----------
        index : array_like of int
            Positions of the examples.

        Returns
        -------
        EncodedData
            New tensors (indexing copies).

        Examples
        --------
        >>> import torch
        >>> from meanfield.attention.training import EncodedData
        >>> ids = torch.tensor([[2, 5, 3], [2, 6, 3]])
        >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.tensor([3, 3]),
        ...                    torch.tensor([0, 1]))
        >>> data.subset([1]).input_ids
        tensor([[2, 6, 3]])
        """
        idx = torch.as_tensor(np.asarray(index), dtype=torch.long)
        return EncodedData(
            self.input_ids[idx],
            self.segment_ids[idx],
            self.padding_mask[idx],
            self.lengths[idx],
            self.labels[idx],
        )


def encode(tokenizer, data, max_length: int) -> EncodedData:
    """Tokenise a :class:`~meanfield.attention.data.TextClassificationData`.

    Parameters
    ----------
    tokenizer : meanfield.attention.tokenizer.TextTokenizer
        A trained tokenizer.
    data : meanfield.attention.data.TextClassificationData
        Texts (``text_a`` and, for pairs, ``text_b``) and labels.
    max_length : int
        Width of the id arrays, special tokens included.

    Returns
    -------
    EncodedData
        Padded on the right to ``max_length``.

    See Also
    --------
    EncodedData : what it returns.
    meanfield.attention.tokenizer.TextTokenizer : the tokenizer.
    meanfield.attention.pretrained.encode_pretrained : the same with a pretrained tokenizer.

    Examples
    --------
    >>> from meanfield.attention.data import TextClassificationData
    >>> from meanfield.attention.tokenizer import TextTokenizer
    >>> from meanfield.attention.training import encode
    >>> data = TextClassificationData(["a fine film", "a dull film"], None, [1, 0])
    >>> tok = TextTokenizer.train(data.text_a, vocab_size=40, min_frequency=1)
    >>> enc = encode(tok, data, max_length=8)
    >>> enc.input_ids.shape, enc.lengths.tolist()
    (torch.Size([2, 8]), [5, 5])
    """
    enc = tokenizer.encode(data.text_a, data.text_b, max_length=max_length)
    return EncodedData(
        torch.as_tensor(enc["input_ids"]),
        torch.as_tensor(enc["segment_ids"]),
        torch.as_tensor(enc["padding_mask"]),
        torch.as_tensor(enc["lengths"]),
        torch.as_tensor(np.asarray(data.labels), dtype=torch.long),
    )


def split_validation(data: EncodedData, fraction: float, seed: int):
    """Carve a stratified validation split from the training data.

    Parameters
    ----------
    data : EncodedData
        The training examples.
    fraction : float
        Share of each class held out, in (0, 0.5] (at least one example per class).
    seed : int
        Seeds the choice.

    Returns
    -------
    train, validation : EncodedData
        Disjoint; together all of ``data``.

    See Also
    --------
    validation_indices : the indices it holds out.
    train : early-stops on the validation split.
    meanfield.attention.text_data.training_indices : the same split on the raw texts.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.training import EncodedData, split_validation
    >>> ids = torch.full((10, 4), 5)
    >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.full((10,), 4),
    ...                    torch.tensor([0] * 6 + [1] * 4))
    >>> train, val = split_validation(data, 0.25, seed=0)
    >>> len(train), len(val), val.labels.tolist()
    (7, 3, [0, 0, 1])
    """
    held = validation_indices(data.labels.numpy(), fraction, seed)
    keep = np.setdiff1d(np.arange(len(data)), held)
    return data.subset(keep), data.subset(held)


def validation_indices(labels, fraction: float, seed: int) -> np.ndarray:
    """Sorted indices of the stratified validation split of :func:`split_validation`.

    From each class c with n_c examples, round(fraction · n_c) (at least one) are drawn
    without replacement.

    Parameters
    ----------
    labels : array_like of int, shape (n,)
        Class of each example.
    fraction : float
        Share of each class held out, in (0, 0.5].
    seed : int
        Seeds the draw (``numpy.random.default_rng``).

    Returns
    -------
    numpy.ndarray of int, shape (n_held,)
        Sorted indices into ``labels``.

    Raises
    ------
    ValueError
        ``fraction`` outside (0, 0.5].

    See Also
    --------
    split_validation : the split of an EncodedData.
    meanfield.attention.text_data.training_indices : the split of a data set's texts.
    train : early-stops on the held-out examples.

    Examples
    --------
    >>> from meanfield.attention.training import validation_indices
    >>> len(validation_indices([0, 0, 0, 0, 1, 1, 1, 1], 0.5, seed=1))
    4
    """
    if not 0.0 < float(fraction) <= 0.5:
        raise ValueError(f"fraction must be in (0, 0.5], got {fraction!r}")
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    held = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        held.append(rng.permutation(idx)[: max(1, int(round(fraction * len(idx))))])
    return np.sort(np.concatenate(held))


def iterate_batches(
    data: EncodedData,
    batch_size: int,
    *,
    shuffle: bool,
    generator=None,
    bucket_batches: int = 0,
):
    """Yield batches ``(input_ids, padding_mask, segment_ids, labels)`` trimmed to the longest
    sequence of the batch.

    Parameters
    ----------
    data : EncodedData
        The examples.
    batch_size : int
        Examples per batch (the last batch may be smaller).
    shuffle : bool
        Random order (from ``generator``).
    generator : torch.Generator, optional
        Source of the random order when ``shuffle``.
    bucket_batches : int
        With ``shuffle``, sort pools of this many batches by length (0: no bucketing).

    Yields
    ------
    input_ids, padding_mask, segment_ids : torch.Tensor, shape (b, width)
        ``width`` is the longest sequence of the batch.
    labels : torch.LongTensor, shape (b,)

    See Also
    --------
    train : consumes its shuffled, bucketed batches.
    predict_proba : consumes its ordered batches.
    EncodedData : the examples.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.training import EncodedData, iterate_batches
    >>> ids = torch.tensor([[2, 5, 3, 0, 0], [2, 6, 7, 8, 3], [2, 9, 3, 0, 0]])
    >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.tensor([3, 5, 3]),
    ...                    torch.tensor([0, 1, 0]))
    >>> gen = torch.Generator().manual_seed(0)
    >>> sorted(b[3].numel() for b in iterate_batches(data, 2, shuffle=True, generator=gen))
    [1, 2]
    """
    n = len(data)
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    if shuffle and bucket_batches > 1:
        pool = batch_size * bucket_batches
        chunks = []
        for s in range(0, n, pool):
            idx = order[s : s + pool]
            idx = idx[torch.argsort(data.lengths[idx], stable=True)]
            chunks += [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]
        perm = torch.randperm(len(chunks), generator=generator)
        batches = [chunks[i] for i in perm.tolist()]
    else:
        batches = [order[s : s + batch_size] for s in range(0, n, batch_size)]
    for idx in batches:
        width = int(data.lengths[idx].max())
        yield (
            data.input_ids[idx, :width],
            data.padding_mask[idx, :width],
            data.segment_ids[idx, :width],
            data.labels[idx],
        )


def _to(batch, device):
    return tuple(t.to(device) for t in batch)


@torch.no_grad()
def predict_proba(model, data: EncodedData, batch_size: int = 256) -> np.ndarray:
    """Class probabilities of ``model`` on ``data`` (eval mode, no gradients).

    Parameters
    ----------
    model : torch.nn.Module
        Called as ``model(input_ids, padding_mask, segment_ids)`` -> logits.
    data : EncodedData
        The examples.
    batch_size : int, default 256
        Examples per forward pass.

    Returns
    -------
    numpy.ndarray of float64, shape (n, n_classes)
        Softmax of the logits; rows sum to 1.

    See Also
    --------
    validation_loss : the log loss and accuracy.
    meanfield.attention.metrics.classification_metrics : metrics of the probabilities.
    train : fits the model.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.model import TransformerClassifier
    >>> from meanfield.attention.training import EncodedData, predict_proba
    >>> ids = torch.tensor([[2, 5, 3, 0], [2, 6, 7, 3]])
    >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.tensor([3, 4]),
    ...                    torch.tensor([0, 1]))
    >>> model = TransformerClassifier(10, d_model=8, n_heads=2, n_layers=1, n_features=4)
    >>> p = predict_proba(model, data)
    >>> p.shape, bool(abs(p.sum(axis=1) - 1).max() < 1e-12)
    ((2, 2), True)
    """
    model.eval()
    device = next(model.parameters()).device
    out = []
    for batch in iterate_batches(data, batch_size, shuffle=False):
        ids, mask, seg, _ = _to(batch, device)
        out.append(torch.softmax(model(ids, mask, seg).double(), dim=-1).cpu())
    return torch.cat(out).numpy()


def validation_loss(model, data: EncodedData) -> tuple[float, float]:
    r"""Mean log loss and accuracy of ``model`` on ``data`` (eval mode).

    .. math::

        \ell = -\frac1n \sum_i \log \max(p_{i y_i}, 10^{-15}).

    Parameters
    ----------
    model : torch.nn.Module
        Called as ``model(input_ids, padding_mask, segment_ids)`` -> logits.
    data : EncodedData
        The examples.

    Returns
    -------
    loss : float
        Mean log loss (nats).
    accuracy : float
        Fraction of ``argmax`` predictions equal to the label.

    See Also
    --------
    predict_proba : the probabilities.
    train : stops early on this loss.
    meanfield.attention.metrics.log_loss : the same loss on given probabilities.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.model import TransformerClassifier
    >>> from meanfield.attention.training import EncodedData, validation_loss
    >>> ids = torch.tensor([[2, 5, 3, 0], [2, 6, 7, 3]])
    >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.tensor([3, 4]),
    ...                    torch.tensor([0, 1]))
    >>> model = TransformerClassifier(10, d_model=8, n_heads=2, n_layers=1, n_features=4)
    >>> loss, acc = validation_loss(model, data)
    >>> loss > 0, acc in (0.0, 0.5, 1.0)
    (True, True)
    """
    p = predict_proba(model, data)
    y = data.labels.numpy()
    pt = np.clip(p[np.arange(len(y)), y], 1e-15, 1.0)
    return float(-np.log(pt).mean()), float((p.argmax(1) == y).mean())


@dataclass(frozen=True)
class TrainSettings:
    """The keyword settings of :func:`train`; the optimiser's are checked when created.

    The early-stopping settings are checked by :func:`train`, and only when a validation
    split is given (without one they are not used).

    Parameters
    ----------
    max_epochs : float
        Upper bound on passes over the data (> 0) when early stopping.
    epochs : float, optional
        Fixed number of passes (no early stopping); required when ``train`` gets no
        ``validation``.
    patience : int
        Evaluations without improvement before stopping (>= 1).
    eval_every : float
        Epochs between validation evaluations (> 0).
    min_delta : float
        Improvement of the validation log loss that counts (>= 0).
    batch_size, lr, weight_decay, warmup_steps, clip_norm
        Optimiser settings (AdamW, linear warm-up then constant, gradient-norm clipping).
    bucket_batches : int
        Length bucketing, see :func:`iterate_batches`.
    seed : int
        Seeds the data order and dropout.

    Raises
    ------
    meanfield.errors.InputError
        An optimiser setting out of range.

    See Also
    --------
    train : takes these settings as keywords.
    iterate_batches : the batching they control.
    validation_loss : the early-stopping criterion.

    References
    ----------
    Loshchilov, I. and Hutter, F. (2019). Decoupled weight decay regularization.
    ICLR 2019 (AdamW).

    Prechelt, L. (1998). Early stopping -- but when? In *Neural Networks: Tricks of the
    Trade*, LNCS 1524, Springer, 55–69.

    Examples
    --------
    >>> from meanfield.attention.training import TrainSettings
    >>> TrainSettings(epochs=2, lr=5e-3).batch_size
    32
    >>> TrainSettings(lr=0.0)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: lr must be a finite number in (0, inf), got 0.0
    """

    max_epochs: float = 10.0
    epochs: float | None = None
    patience: int = 3
    eval_every: float = 0.5
    min_delta: float = 1e-4
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 100
    clip_norm: float = 1.0
    bucket_batches: int = 50
    seed: int = 0

    def __post_init__(self):
        # frozen: the checked (converted) values replace the given ones
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size))
        object.__setattr__(self, "lr", check_positive("lr", self.lr))
        check_positive("weight_decay", self.weight_decay, allow_zero=True)
        check_int("warmup_steps", self.warmup_steps, minimum=0)
        check_positive("clip_norm", self.clip_norm)


def _epoch_budget(validation, st: TrainSettings) -> float:
    """Passes over the data to allow: ``epochs`` (fixed) or ``max_epochs`` (early stopping).

    Checks that exactly one of ``validation`` and ``epochs`` is given, and the early-stopping
    settings, before any work.
    """
    if validation is None:
        if st.epochs is None:
            raise ValueError("train needs either a validation split or a fixed number of epochs")
        return check_positive("epochs", st.epochs)
    if st.epochs is not None:
        raise ValueError("pass either epochs (fixed) or validation (early stopping), not both")
    if len(validation) < 2:
        raise ValueError(f"validation needs >= 2 examples, got {len(validation)}")
    budget = check_positive("max_epochs", st.max_epochs)
    check_int("patience", st.patience)
    check_positive("eval_every", st.eval_every)
    check_positive("min_delta", st.min_delta, allow_zero=True)
    return budget


class _EarlyStopping:
    """The validation side of :func:`train`: when to evaluate, the history, the best state.

    Without a validation split it never evaluates and never stops training.
    """

    def __init__(self, validation, st: TrainSettings, steps_per_epoch: int, total: int, log):
        self.validation, self.st, self.log = validation, st, log
        self.steps_per_epoch, self.total = steps_per_epoch, total
        self.every = (
            max(1, int(round(st.eval_every * steps_per_epoch))) if validation is not None else 0
        )
        self.history = []  # (epoch, val loss, val accuracy)
        self.best = (math.inf, None, 0.0)  # (val loss, state, epoch)
        self.bad = 0  # evaluations since the last improvement

    def after_step(self, model, step: int) -> bool:
        """Evaluate when due (every ``every`` steps and at the last); True: patience is out."""
        if not self.every or not (step % self.every == 0 or step == self.total):
            return False
        ep = step / self.steps_per_epoch
        loss, acc = validation_loss(model, self.validation)
        self.history.append((ep, loss, acc))
        model.train()
        if self.log is not None:
            self.log(f"  epoch {ep:.2f}: val loss {loss:.4f} acc {acc:.4f}")
        if loss < self.best[0] - self.st.min_delta:
            self.best = (loss, copy.deepcopy(model.state_dict()), ep)
            self.bad = 0
            return False
        self.bad += 1
        return self.bad >= self.st.patience


def _optimiser(model, st: TrainSettings):
    """AdamW on the trainable parameters and its schedule (linear warm-up, then constant)."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=st.lr, weight_decay=st.weight_decay)
    warmup = st.warmup_steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / (warmup + 1)))
    return params, opt, sched


def _optimiser_step(model, batch, opt, sched, params, clip_norm: float) -> float:
    """One AdamW step on the cross-entropy of ``batch``; the loss before the step.

    A non-finite loss is returned without stepping, so the caller can name ``lr``.
    """
    ids, mask, seg, y = batch
    loss = F.cross_entropy(model(ids, mask, seg), y)
    if not torch.isfinite(loss):
        return float(loss)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, clip_norm)
    opt.step()
    sched.step()
    return float(loss.detach())


def _train_steps(model, data, st: TrainSettings, total: int, stopper: _EarlyStopping):
    """Optimiser steps over reshuffled epochs until ``total`` steps or early stopping.

    Returns the training loss of every step and whether training stopped early.
    """
    device = next(model.parameters()).device
    params, opt, sched = _optimiser(model, st)
    gen = torch.Generator().manual_seed(st.seed)
    losses = []
    while True:
        for batch in iterate_batches(
            data, st.batch_size, shuffle=True, generator=gen, bucket_batches=st.bucket_batches
        ):
            loss = _optimiser_step(model, _to(batch, device), opt, sched, params, st.clip_norm)
            if not math.isfinite(loss):
                raise FloatingPointError(
                    f"training loss became {loss} at step {len(losses)}; lower lr "
                    f"(now {st.lr}) or check the inputs"
                )
            losses.append(loss)
            if stopper.after_step(model, len(losses)):
                return losses, True
            if len(losses) >= total:
                return losses, False


def _finish(model, stopper: _EarlyStopping, losses: list, stopped: bool, t0: float) -> dict:
    """Restore the best evaluated parameters (if any), switch to eval mode; the run's record.

    The record is the dict :func:`train` returns; ``seconds`` counts from ``t0``.
    """
    best_loss, best_state, best_epoch = stopper.best
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    epochs = len(losses) / stopper.steps_per_epoch
    early = stopper.validation is not None
    return {
        "steps": len(losses),
        "epochs": epochs,
        "best_epoch": best_epoch if early else epochs,
        "best_val_loss": best_loss if early else float("nan"),
        "stopped_early": stopped,
        "seconds": time.perf_counter() - t0,
        "final_loss": float(np.mean(losses[-50:])),
        "history": stopper.history,
        "losses": losses,
    }


def train(
    model, data: EncodedData, *, validation: EncodedData | None = None, log=None, **settings
) -> dict:
    """Train every parameter with cross-entropy (AdamW); early stopping on ``validation``.

    Buffers (the feature matrices ``Omega``) are never updated. On early stopping the
    parameters of the best evaluation are restored.

    Parameters
    ----------
    model : torch.nn.Module
        Called as ``model(input_ids, padding_mask, segment_ids)`` -> logits.
    data : EncodedData
        Training examples.
    validation : EncodedData, optional
        Early-stopping split (never trained on). Without it, train exactly ``epochs``.
    log : callable, optional
        Receives one line per evaluation.
    **settings
        The keyword parameters of :class:`TrainSettings` (``max_epochs``, ``epochs``,
        ``patience``, ``eval_every``, ``min_delta``, ``batch_size``, ``lr``,
        ``weight_decay``, ``warmup_steps``, ``clip_norm``, ``bucket_batches``, ``seed``),
        each documented there with its default.

    Returns
    -------
    dict
        ``steps``, ``epochs`` (passes actually made), ``best_epoch``, ``best_val_loss``,
        ``stopped_early``, ``seconds``, ``final_loss`` (mean training loss of the last 50
        steps), ``history`` (list of ``(epoch, val_loss, val_accuracy)``), ``losses``
        (training loss of every step).

    Raises
    ------
    ValueError
        Neither or both of ``validation`` and ``epochs``; a validation split of fewer than
        two examples.
    meanfield.errors.InputError
        A setting out of range.
    FloatingPointError
        The training loss became non-finite (the message names ``lr``).

    See Also
    --------
    TrainSettings : the settings and their defaults.
    split_validation : the early-stopping split.
    predict_proba : predictions of the trained model.
    meanfield.attention.phases.phase_b : fine-tuning after the feature maps are aligned.

    References
    ----------
    Loshchilov, I. and Hutter, F. (2019). Decoupled weight decay regularization.
    ICLR 2019 (AdamW).

    Prechelt, L. (1998). Early stopping -- but when? In *Neural Networks: Tricks of the
    Trade*, LNCS 1524, Springer, 55–69.

    Examples
    --------
    A toy task (the label is whether token 5 occurs) learned in a few epochs:

    >>> import torch
    >>> from meanfield.attention.model import TransformerClassifier
    >>> from meanfield.attention.training import EncodedData, train
    >>> g = torch.Generator().manual_seed(0)
    >>> ids = torch.randint(6, 10, (64, 6), generator=g)
    >>> labels = torch.arange(64) % 2
    >>> ids[labels == 1, 2] = 5
    >>> data = EncodedData(ids, torch.zeros_like(ids), ids == 0, torch.full((64,), 6), labels)
    >>> model = TransformerClassifier(10, d_model=16, n_heads=2, n_layers=1, d_ff=32,
    ...                               max_length=6, n_features=8, dropout=0.0)
    >>> out = train(model, data, epochs=6, batch_size=16, lr=1e-2, warmup_steps=0)
    >>> out["steps"], out["losses"][0] > 0.5, out["losses"][-1] < 0.05
    (24, True, True)
    """
    st = TrainSettings(**settings)
    budget = _epoch_budget(validation, st)
    steps_per_epoch = math.ceil(len(data) / st.batch_size)
    total = max(1, int(round(budget * steps_per_epoch)))
    stopper = _EarlyStopping(validation, st, steps_per_epoch, total, log)
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(st.seed)  # dropout masks
        model.train()
        losses, stopped = _train_steps(model, data, st, total, stopper)
    return _finish(model, stopper, losses, stopped, t0)
