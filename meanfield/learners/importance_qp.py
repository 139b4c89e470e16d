"""The χ²-constrained linear programme of importance-sampled features (Sinha & Duchi 2016).

max_q vᵀq over the probability simplex with ‖q − 1/N‖² ≤ ρ/N, solved through its Lagrangian
dual and the sort-based simplex projection of :mod:`meanfield.simplex`.
"""

from __future__ import annotations

import math

import numpy as np

from meanfield._validation import check_positive
from meanfield.simplex import project_simplex

__all__ = ["project_simplex", "solve_importance_weights"]


def _chi2_excess(q, N):
    """‖q − 1/N‖², the χ² divergence from the uniform weights divided by N."""
    return float(((q - 1.0 / N) ** 2).sum())


def solve_importance_weights(v, rho: float, *, rtol: float = 1e-12, max_iter: int = 200):
    r"""Maximise vᵀq over the simplex subject to ‖q − 1/N‖² ≤ ρ/N (Sinha & Duchi 2016).

    .. math::

        \max_{q \in \Delta_N} v^\top q \quad \text{s.t.} \quad
        \Big\|q - \tfrac1N \mathbf 1\Big\|^2 \le \frac{\rho}{N}, \qquad
        q(\lambda) = \Pi_\Delta\Big(\tfrac1N \mathbf 1 + \frac{v}{\lambda}\Big).

    The χ² divergence D(q‖uniform) = N‖q − 1/N‖² is at most ρ. The Lagrangian dual with
    multiplier λ ≥ 0 gives q(λ) = Π_Δ(1/N + v/λ) (sort-based simplex projection); g(λ) =
    ‖q(λ) − 1/N‖² decreases in λ, and the optimum is the λ* with g(λ*) = ρ/N (the
    constraint is tight) unless the unconstrained vertex solution is already feasible.
    λ* is bracketed and bisected until the support S of q(λ) stops changing; on a fixed
    support q_i = 1/|S| + (v_i − v̄_S)/λ and g = 1/|S| − 1/N + Σ_S (v_i − v̄_S)²/λ², so
    λ* is then solved for exactly and the answer is feasible and tight to rounding.

    Parameters
    ----------
    v : array of shape (N,)
        Scores, e.g. v_m = (Σ_i y_i φ(x_i; w_m))².
    rho : float >= 0
        χ² budget. ρ = 0 forces the uniform q; ρ >= N − 1 allows any vertex.
    rtol : float
        Relative width at which bisection stops if the support never settles.
    max_iter : int
        Cap on bisection steps.

    Returns
    -------
    q : ndarray of shape (N,)
        Optimal weights: q >= 0, Σ q = 1, ‖q − 1/N‖² ≤ ρ/N.

    See Also
    --------
    ImportanceSampledFeatures : the learner built on these weights.
    meanfield.simplex.project_simplex : the projection it bisects on.

    References
    ----------
    .. [1] A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.
    .. [2] J. Duchi, S. Shalev-Shwartz, Y. Singer and T. Chandra, "Efficient projections onto
       the l1-ball for learning in high dimensions", ICML 2008.

    Examples
    --------
    >>> q = solve_importance_weights([3.0, 1.0, 1.0, 1.0], rho=0.5)
    >>> round(float(q.sum()), 12), bool(q[0] > q[1])
    (1.0, True)
    >>> bool(((q - 0.25) ** 2).sum() <= 0.5 / 4 + 1e-12)  # the χ² budget holds
    True
    """
    v = _check_scores(v)
    rho = check_positive("rho", rho, allow_zero=True)
    N = len(v)
    u = np.full(N, 1.0 / N)
    budget = rho / N
    vc = v - v.mean()  # the projection ignores constant shifts
    if rho == 0.0 or not np.any(vc):
        return u
    # lambda -> 0+: uniform weight on the maximisers of v; feasible => constraint inactive
    top = v >= v.max() - 1e-14 * max(1.0, abs(v.max()))
    q0 = top / top.sum()
    if _chi2_excess(q0, N) <= budget:
        return q0.astype(float)
    return _bisect_dual(vc, budget, rtol, max_iter)


def _check_scores(v) -> np.ndarray:
    """``v`` as a non-empty 1-d float array of finite scores, else a ValueError."""
    v = np.asarray(v, dtype=float)
    if v.ndim != 1 or len(v) < 1:
        raise ValueError(f"v must be a non-empty 1-d array, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("v contains NaN or inf; all scores must be finite")
    return v


def _bisect_dual(vc, budget: float, rtol: float, max_iter: int) -> np.ndarray:
    """q(λ*) for centred scores ``vc``: λ* bracketed, bisected, then solved on its support.

    g(λ) = ‖q(λ) − 1/N‖² decreases in λ; the bisection keeps g(lo) > budget ≥ g(hi) and
    returns the exact solution as soon as the support of q(lo) (or a support shared by q(lo)
    and q(hi)) passes the KKT check of :func:`_exact_on_support`.
    """
    N = len(vc)
    u = np.full(N, 1.0 / N)

    def q_of(lam):
        return project_simplex(u + vc / lam)

    # g(lam) <= ||vc||^2 / lam^2 (the projection is 1-Lipschitz and fixes u): feasible at hi
    hi = float(np.linalg.norm(vc)) / math.sqrt(budget)
    lo = hi
    while _chi2_excess(q_of(lo), N) <= budget:
        lo *= 0.5
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        if _chi2_excess(q_of(mid), N) > budget:
            lo = mid
        else:
            hi = mid
        q_lo, q_hi = q_of(lo), q_of(hi)
        exact = _exact_on_support(vc, q_lo > 0, budget, N)
        if exact is None and np.array_equal(q_lo > 0, q_hi > 0):
            exact = _exact_on_support(vc, q_hi > 0, budget, N)
        if exact is not None:
            return exact
        if hi - lo <= rtol * hi:
            break
    return q_of(hi)  # feasible; tight to within the bisection tolerance


def _exact_on_support(vc, S, budget, N):
    """λ* and q* on the support S if they satisfy the KKT conditions, else None."""
    k = int(S.sum())
    gap = budget + 1.0 / N - 1.0 / k
    if k == 0 or gap <= 0:
        return None
    dev = vc[S] - vc[S].mean()
    ss = float((dev * dev).sum())
    if ss == 0.0:
        return None
    lam = math.sqrt(ss / gap)
    z = 1.0 / k + (vc - vc[S].mean()) / lam
    # KKT: strictly inside the support, non-positive outside (up to rounding)
    tol = 1e-12
    if np.any(z[S] < -tol) or np.any(z[~S] > tol):
        return None
    q = np.where(S, np.maximum(z, 0.0), 0.0)
    return q / q.sum()
