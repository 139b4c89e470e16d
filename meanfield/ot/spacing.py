"""The smallest distance between two particles (the one implementation).

Reported by :class:`meanfield.learners.CoulombFeatures` (``min_distance_``) and by the
command line after a run (``meanfield.cli``), where a zero distance means coinciding particles.
"""

from __future__ import annotations

import numpy as np

from .._arrays import _power_of_two_unit
from ..errors import InputError

__all__ = ["min_pair_distance", "too_close"]


def min_pair_distance(omega) -> float:
    r"""Smallest Euclidean distance between two of the N points ``omega``, in O(N) memory.

    .. math:: \min_{i \ne j} \|\omega_i - \omega_j\|_2

    p = 1: the smallest gap between sorted neighbours; p > 1: a k-d tree query of each
    point's nearest neighbour (O(N log N) time). Exact: no |a|² + |b|² − 2a·b expansion, so
    nearly coinciding points are not rounded to 0.

    Parameters
    ----------
    omega : array_like of shape (N, p) or (N,)
        Points (a 1-d array is N points on the line), in the caller's units.

    Returns
    -------
    float
        The distance, in the units of ``omega``; NaN for fewer than two points (no pair, so
        no distance: NaN rather than inf, so a mean over runs does not silently become inf).

    See Also
    --------
    too_close : the particles to redraw below a spacing.
    meanfield.dynamics.chain_checks.check_start_spacing : a start refused on it.
    meanfield.errors.CoincidentParticlesWarning : a run whose closest pair is 0.

    References
    ----------
    - J. L. Bentley, "Multidimensional binary search trees used for associative searching", Commun.
      ACM 18 (1975) 509–517 (the k-d tree).

    Examples
    --------
    >>> min_pair_distance([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])
    1.0
    """
    x, unit = _scaled_points(omega)
    if len(x) < 2:
        return float("nan")
    if x.shape[1] == 1:
        return float(np.diff(np.sort(x[:, 0])).min()) * unit
    from scipy.spatial import cKDTree

    d, _ = cKDTree(x).query(x, k=2)
    return float(d[:, 1].min()) * unit


def _scaled_points(omega) -> tuple[np.ndarray, float]:
    """(omega / s as float64 (N, p), s): s a power of two with max|ω|/s in [1, 2), so the
    tree's squared distances neither underflow (points 1e-200 apart were at distance 0) nor
    overflow (1e200 apart: inf); an InputError naming omega for p = 0 or NaN/inf."""
    x = np.asarray(omega, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] < 1:
        raise InputError(f"omega must have shape (N, p) with p >= 1, or (N,), got {x.shape}")
    if not np.isfinite(x).all():
        raise InputError("omega must be finite (found NaN or inf)")
    unit = _power_of_two_unit(x)
    return x / unit, unit


def too_close(omega, spacing: float) -> np.ndarray:
    """Indices of particles to redraw so that no two of ``omega`` are closer than ``spacing``:
    the later particle of every pair at distance < ``spacing`` (sorted, without repeats).

    Parameters
    ----------
    omega : array_like of shape (N, p) or (N,)
        Points.
    spacing : float
        The smallest allowed distance (> 0).

    Returns
    -------
    ndarray of int
        Empty when every pair is at least ``spacing`` apart.

    See Also
    --------
    min_pair_distance : the closest distance itself.
    meanfield.dynamics.chain_checks.check_start_spacing : the spacing a Metropolis start needs.
    meanfield.features.sample_initial_particles : a draw to redraw from.

    References
    ----------
    - J. L. Bentley, "Multidimensional binary search trees used for associative searching", Commun.
      ACM 18 (1975) 509–517 (the k-d tree).

    Examples
    --------
    >>> too_close([[0.0], [1.0], [1.05], [3.0], [0.02]], 0.1).tolist()
    [2, 4]
    """
    x, unit = _scaled_points(omega)
    if len(x) < 2:
        return np.zeros(0, dtype=int)
    spacing = min(spacing / unit, 1e300)  # the scaled cloud lies in [−1, 1]^p
    if x.shape[1] == 1:
        order = np.argsort(x[:, 0], kind="stable")
        close = np.flatnonzero(np.diff(x[order, 0]) < spacing)
        pairs = np.stack([order[close], order[close + 1]], axis=1)
    else:
        from scipy.spatial import cKDTree

        pairs = cKDTree(x).query_pairs(spacing * (1 - 1e-12), output_type="ndarray")
    if len(pairs) == 0:
        return np.zeros(0, dtype=int)
    return np.unique(pairs.max(axis=1))
