"""Euclidean projection onto a scaled probability simplex (the one implementation).

Used by the importance-weight solver of :mod:`meanfield.learners` (mass 1) and by the
stationary quadratic programme of :mod:`meanfield.pde.stationary` (mass = the grid's mass).

References
----------
J. Duchi, S. Shalev-Shwartz, Y. Singer, T. Chandra, "Efficient projections onto the l1-ball
for learning in high dimensions", ICML 2008.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["project_simplex"]


def project_simplex(z, mass: float = 1.0) -> np.ndarray:
    r"""Euclidean projection of ``z`` onto the simplex {q ≥ 0, Σ q = mass} (sort based).

    .. math::

        \Pi(z) = \max(z - \theta, 0), \qquad
        \theta = \frac{1}{k}\Big(\sum_{i \le k} u_i - \text{mass}\Big),

    with u the entries of z in decreasing order and k the largest index with
    u_k > (Σ_{i≤k} u_i − mass)/k (Duchi et al. 2008). O(M log M) time.

    Parameters
    ----------
    z : array_like of shape (M,)
        Finite point to project.
    mass : float > 0
        Total of the projected vector (1 for a probability vector).

    Returns
    -------
    ndarray of shape (M,)
        The projection: entries ≥ 0 summing to ``mass`` (to rounding).

    Raises
    ------
    ValueError
        If ``z`` is not a non-empty 1-d finite array or ``mass`` is not a finite number > 0.

    See Also
    --------
    meanfield.pde.stationary.equilibrium_measure : a QP on the simplex of cell masses.
    meanfield.pde.simplex_qp : the quadratic programme that projects with it.
    meanfield.learners.importance_qp.solve_importance_weights : weights on the simplex.

    References
    ----------
    - J. Duchi, S. Shalev-Shwartz, Y. Singer, T. Chandra, "Efficient projections onto the ℓ1-ball
      for learning in high dimensions", ICML 2008, 272–279.

    Examples
    --------
    >>> project_simplex([0.5, 0.2, -1.0])
    array([0.65, 0.35, 0.  ])
    """
    z = np.asarray(z, dtype=float)
    if z.ndim != 1 or z.size == 0:
        raise ValueError(f"z must be a non-empty 1-d array, got shape {z.shape}")
    if not (isinstance(mass, (int, float, np.floating, np.integer)) and math.isfinite(mass)):
        raise ValueError(f"mass must be a finite number > 0, got {mass!r}")
    if mass <= 0:
        raise ValueError(f"mass must be a finite number > 0, got {mass!r}")
    if not np.all(np.isfinite(z)):
        raise ValueError("z contains NaN or inf; the point to project must be finite")
    u = np.sort(z)[::-1]
    css = np.cumsum(u) - mass
    k = np.arange(1, z.size + 1)
    # the condition holds for k = 1 (u_1 > u_1 − mass), so the index set is never empty
    r = k[u - css / k > 0][-1]
    return np.maximum(z - css[r - 1] / r, 0.0)
