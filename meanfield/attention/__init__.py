"""Kernel attention: learned particles as the feature map of linear Transformers (THEORY §7).

Modules
-------
features
    Feature-map modules (FAVOR+, PORF, PORF-softplus, softmaxfeat) with one ``Omega``.
hedgehog
    The published Hedgehog map: trainable per-head ``W x + b`` with a two-sided softmax.
linear
    Linear attention (bidirectional, causal): the functional API.
mha
    :class:`KernelAttention`, the drop-in for ``torch.nn.MultiheadAttention``.
model
    A small Transformer encoder classifier (sentences and sentence pairs).
tokenizer
    A WordPiece tokenizer trained offline on the training split (needs ``tokenizers``).
data
    Loaders for SST-2, Rotten Tomatoes and QQP from a user-named directory.
metrics
    Accuracy, MCC, log loss, Brier score, ECE.
baselines
    The studies' sanity bar: logistic regression, C by CV, refitted to convergence.
phases
    Phase A (alignment by the package's projected Langevin) and Phase B (fine-tuning).
"""

from .features import (
    FEATURE_KINDS,
    AttentionFeatureMap,
    PositiveFeatures,
    SoftmaxFeatures,
    SoftplusFeatures,
    make_feature_map,
)
from .hedgehog import HedgehogFeatureMap
from .linear import (
    ATTENTION_KINDS,
    kernel_attention,
    linear_attention,
    softmax_attention,
)
from .metrics import classification_metrics
from .mha import KernelAttention
from .model import TransformerClassifier

__all__ = [
    "ATTENTION_KINDS",
    "FEATURE_KINDS",
    "AttentionFeatureMap",
    "HedgehogFeatureMap",
    "KernelAttention",
    "PositiveFeatures",
    "SoftmaxFeatures",
    "SoftplusFeatures",
    "TransformerClassifier",
    "classification_metrics",
    "kernel_attention",
    "linear_attention",
    "make_feature_map",
    "softmax_attention",
]


def __getattr__(name: str):
    """A module of this subpackage not imported above (``linearize``, ``pretrained``,
    ``phases``, ...), imported on first access (PEP 562)."""
    import pkgutil

    if not name.startswith("_") and name in {m.name for m in pkgutil.iter_modules(__path__)}:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
