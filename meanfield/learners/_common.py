"""Shared plumbing of the feature learners: input checks, labels, bandwidth, features Φ.

Every learner of :mod:`meanfield.learners` uses the ``"fourier"`` map of
:mod:`meanfield.features`, φ(x; ω) = √2 cos(ω[:d]ᵀ x + ω[d]), so the comparison is fair.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_consistent_length, column_or_1d

from meanfield._validation import check_choice, check_int, check_positive
from meanfield.features import get_feature_map

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn

    def _validate_data(est, X="no_validation", y="no_validation", **kw):
        return est._validate_data(X, y, **kw)


#: The feature map of every learner (:mod:`meanfield.features`).
FEATURE = "fourier"


def _n_rows(a) -> int:
    """Rows of an array-like (its first dimension), for messages."""
    shape = getattr(a, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else len(a)


def _check_lengths(X, y):
    """Mismatched lengths are reported before any conversion or work."""
    if y is None:
        return
    try:
        check_consistent_length(X, y)  # scikit-learn's public check (TypeError for scalars)
    except ValueError:
        raise ValueError(
            f"X and y must have the same number of samples: X has {_n_rows(X)} rows, "
            f"y has {_n_rows(y)} labels"
        ) from None


def _encode_labels(y, owner: str):
    """Check classification labels and encode them.

    Returns
    -------
    classes : ndarray (C,)
        Sorted distinct labels.
    t : ndarray (n,)
        ±1 (binary, ``classes[1]`` -> +1) or class ids 0..C−1 (C ≥ 3), as float64: the label
        form that :class:`meanfield.energy.LinearAlignment` takes.
    """
    if y is None:
        raise ValueError(
            f"{owner} requires y to be passed, but the target y is None; y must hold class "
            "labels ({-1, +1} or class ids)"
        )
    y = column_or_1d(y, warn=True)
    if y.shape[0] == 0:
        raise ValueError("y is empty (0 samples); at least 2 labelled samples are needed")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or inf; y must hold class labels ({-1, +1} or class ids)")
    kind = type_of_target(y, input_name="y")
    if kind not in ("binary", "multiclass"):
        raise ValueError(
            f"Unknown label type: {kind!r}. y must hold class labels: {{-1, +1}} for two "
            "classes, or integer (or string) class ids for C >= 2 classes; got values such as "
            f"{np.unique(y)[:5].tolist()}"
        )
    classes, ids = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(
            f"y has 1 class ({classes[0]!r}); at least 2 classes are needed to learn a kernel"
        )
    if len(classes) == 2:
        return classes, np.where(ids == 1, 1.0, -1.0)
    return classes, ids.astype(float)


def _resolve_bandwidth(bandwidth, X, rng):
    if isinstance(bandwidth, str):
        check_choice("bandwidth", bandwidth, ("median",))
        return median_bandwidth(X, rng=rng)
    return check_positive("bandwidth (sigma)", bandwidth)


def median_bandwidth(X, *, max_points: int = 1000, rng=None) -> float:
    """Median heuristic: the median Euclidean distance between distinct rows of X.

    Parameters
    ----------
    X : array of shape (n, d)
    max_points : int
        Use a random subset of at most this many rows (O(max_points²) work).
    rng : numpy Generator or int, optional
        Source of the subset.

    Returns
    -------
    float
        The bandwidth σ (1.0 if all rows coincide).

    See Also
    --------
    RandomFourierFeatures : ``bandwidth="median"`` uses it.
    meanfield.features.sample_initial_particles : the draw at a given bandwidth.

    Examples
    --------
    >>> median_bandwidth([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])  # distances 5, 1 and √18
    4.242640687119285
    """
    X = np.asarray(X, dtype=float)
    rng = np.random.default_rng(rng)
    if len(X) > max_points:
        X = X[rng.choice(len(X), max_points, replace=False)]
    from scipy.spatial.distance import pdist

    dist = pdist(X)
    med = float(np.median(dist)) if dist.size else 0.0
    return med if med > 0 else 1.0


def _seeds(random_state) -> tuple[int, np.random.Generator]:
    """An integer seed for torch-side draws and a numpy Generator, both from random_state."""
    if isinstance(random_state, np.random.RandomState):
        seed = int(random_state.randint(0, 2**31 - 1))
    elif isinstance(random_state, np.random.Generator):
        seed = int(random_state.integers(0, 2**31 - 1))
    elif random_state is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
    else:
        seed = check_int("random_state", random_state, minimum=0)
    return seed, np.random.default_rng(seed)


def fourier_features(X, omega, weights=None) -> np.ndarray:
    """Φ_ji = w_i φ(x_j; ω_i) with the package's ``"fourier"`` feature map.

    Parameters
    ----------
    X : array of shape (n, d)
    omega : array of shape (m, d + 1)
        Frequencies ω[:, :d] and phases ω[:, d].
    weights : array of shape (m,), optional
        Column weights w_i; default 1/√m.

    Returns
    -------
    ndarray of shape (n, m)

    See Also
    --------
    meanfield.features.FourierFeatures : the map φ itself, one particle at a time (torch).
    RandomFourierFeatures : a learner whose ``transform`` is this matrix.

    References
    ----------
    .. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.

    Examples
    --------
    >>> Phi = fourier_features([[0.0], [1.0]], [[0.0, 0.0], [1.0, 0.0]])  # ω = 0, 1; phase 0
    >>> Phi.shape
    (2, 2)
    >>> bool(np.allclose(Phi, np.cos([[0.0, 0.0], [0.0, 1.0]])))  # √2 cos(ωx) / √m, m = 2
    True
    """
    omega_t = torch.as_tensor(np.asarray(omega, dtype=float), dtype=torch.float64)
    phi = get_feature_map(FEATURE).evaluate(np.asarray(X, dtype=float), omega_t)  # (m, n)
    Phi = phi.numpy().T
    if weights is None:
        return Phi / math.sqrt(omega_t.shape[0])
    return Phi * np.asarray(weights, dtype=float)[None, :]
