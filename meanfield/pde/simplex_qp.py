r"""The β = ∞ solver's quadratic programme: E(w) over the simplex of cell masses.

For a positive-definite pair kernel the energy of a grid density is a convex quadratic in
the cell masses w (Σ w = mass, w ≥ 0).  :func:`~meanfield.pde.stationary.equilibrium_measure`
solves it in two phases.  The residual is the Frank–Wolfe gap

    G(w) = Σ_i w_i g_i − m min_i g_i,  g = ∂E/∂w = δE/δρ,

which bounds E(w) − E(μ*) for a convex E.

1. FISTA (accelerated projected gradient; step 1/L with L doubled until the descent lemma
   holds, starting from 2λ Σ_m |W_m| / |C| per pair term, a bound on ‖H‖; gradient
   restart) until the gap is ≤ ``warm_tol``: this finds the support;
2. primal–dual active set (Hintermüller, Ito & Kunisch 2002): on the current support S,
   solve the KKT system H_SS w_S − c 1 = −b_S, Σ w_S = mass, by conjugate gradients on
   the mass-zero subspace with FFT products; drop cells with w_i < 0, add cells whose
   multiplier g_i − c is negative (both with margins above round-off); repeat until S is
   stable (finitely many steps; usually 1–5).

If the active-set phase fails to settle, FISTA continues from its best point.  Every
reduction is numpy's pairwise sum (never a BLAS dot), so the path (and the iteration count)
is the same under any number of threads.

References
----------
A. Beck, M. Teboulle, "A fast iterative shrinkage-thresholding algorithm for linear inverse
problems", SIAM J. Imaging Sci. 2 (2009) 183–202.
M. Hintermüller, K. Ito, K. Kunisch, "The primal–dual active set strategy as a semismooth
Newton method", SIAM J. Optim. 13 (2002) 865–888.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import check_int, check_positive
from ..simplex import project_simplex
from .potential import GridEnergy


@dataclass(frozen=True)
class _QPStopping:
    """The stopping rules of :func:`equilibrium_measure`, checked (see its parameters)."""

    tol: float
    warm_tol: float
    max_iter: int
    max_active_set: int
    minres_maxiter: int

    def __post_init__(self):
        tol = check_positive("tol", self.tol)
        object.__setattr__(self, "tol", tol)
        object.__setattr__(self, "warm_tol", max(check_positive("warm_tol", self.warm_tol), tol))
        object.__setattr__(self, "max_iter", check_int("max_iter", self.max_iter))
        max_active_set = check_int("max_active_set", self.max_active_set, minimum=0)
        object.__setattr__(self, "max_active_set", max_active_set)


def _dot(a, b) -> float:
    """Σ a_i b_i by numpy's own pairwise summation, never BLAS: BLAS dots sum in an order
    that depends on the thread count and the CPU's vector kernel, and the β = ∞ solver takes
    decisions (step doubling, restarts, the active set) on these sums, so a BLAS dot made it
    take different paths on different machines."""
    return float(np.sum(a * b))


class _SimplexQP:
    """E(w) = bᵀw + ½wᵀHw in the cell masses w = ρ|C| of a grid energy, on Σ w = mass, w ≥ 0.

    The gradient g = ∂E/∂w is δE/δρ at the cell centres.  ``history`` collects the
    Frank–Wolfe gap of every iterate and ``phases`` a note per phase of the solver.
    """

    def __init__(self, ge: GridEnergy, mass: float):
        self.ge, self.mass = ge, mass
        self.vol, self.shape = ge.grid.cell_volume, ge.grid.shape
        self.history: list = []
        self.phases: list = []

    def density(self, w) -> np.ndarray:
        """The density ρ = w / |C| of flat cell masses w, grid shape."""
        return w.reshape(self.shape) / self.vol

    def grad(self, w) -> np.ndarray:
        """g = ∂E/∂w = δE/δρ at the cell centres, flat."""
        return self.ge.potential(self.density(w)).ravel()

    def energy_and_grad(self, w) -> tuple:
        """(E(w), ∂E/∂w) from one evaluation of every term's potential."""
        rho = self.density(w)
        pots = self.ge.potentials(rho)
        E = float(sum(self.ge.term_values(rho, pots).values()))
        return E, sum(pots.values()).ravel()

    def gap(self, w, g) -> float:
        """Frank–Wolfe gap Σ w g − m min g, a bound on E(w) − min E for a convex E."""
        return _dot(w, g) - self.mass * float(g.min())

    def lipschitz_start(self) -> float:
        """2λ Σ_m |W_m| / |C| summed over the pair terms (1 without one): a bound on ‖H‖."""
        pairs = self.ge.pair.values()
        return sum(2 * lam * conv.row_sum_bound() / self.vol for lam, conv in pairs) or 1.0


def _kkt_on_support(grad, b, S, mass, maxiter):
    """Minimise bᵀw + ½wᵀHw on {w_S free, w_{S^c} = 0, Σ w = mass}: conjugate gradients on
    the mass-zero subspace of the support (H is positive semi-definite there for a
    conditionally positive-definite kernel).

    ``grad(w) = b + H w``.  Returns (w, c) with c the multiplier of the mass constraint (the
    mean of the gradient on S).  Every reduction is a :func:`_dot` and the stopping rule an
    attainable relative residual (1e-13), so the result, and the decisions taken on it, are
    the same under any thread count.
    """
    idx = np.flatnonzero(S)
    k, M = len(idx), len(b)

    def hess(z):  # H_SS z, projected on Σ = 0
        full = np.zeros(M)
        full[idx] = z
        y = (grad(full) - b)[idx]
        return y - float(np.sum(y)) / k

    w_s = np.full(k, mass / k)
    full = np.zeros(M)
    full[idx] = w_s
    r = -grad(full)[idx]
    r -= float(np.sum(r)) / k
    p, rr = r.copy(), _dot(r, r)
    stop = (1e-13 * (1.0 + math.sqrt(_dot(b[idx], b[idx])))) ** 2
    for _ in range(maxiter):
        if rr <= stop:
            break
        Hp = hess(p)
        pHp = _dot(p, Hp)
        if not pHp > 0:  # a flat or negative direction: nothing more to gain along it
            break
        a = rr / pHp
        w_s += a * p
        r -= a * Hp
        r -= float(np.sum(r)) / k  # kept on the mass-zero subspace: round-off in the mean
        rr_new = _dot(r, r)
        p = r + (rr_new / rr) * p
        p -= float(np.sum(p)) / k  # would move the mass by ~1e-10 over thousands of steps
        rr = rr_new
    w = np.zeros(M)
    w[idx] = w_s
    g = grad(w)[idx]
    return w, float(np.sum(g)) / k


def _fista(qp: _SimplexQP, w, L, tol, max_iter):
    """Accelerated projected gradient on the simplex; returns (w, E(w), L, converged).

    Appends the Frank–Wolfe gap of every iterate to ``qp.history``.
    """
    E_w, g_w = qp.energy_and_grad(w)
    y, g_y, t = w.copy(), g_w, 1.0
    for _ in range(max_iter):
        gap = qp.gap(w, g_w)
        qp.history.append(gap)
        if gap <= tol:
            return w, E_w, L, True
        while True:
            w_new = project_simplex(y - g_y / L, qp.mass)
            d = w_new - y
            E_new, g_new = qp.energy_and_grad(w_new)
            # descent-lemma check in gradient form, <∇E(w⁺) − ∇E(y), d> ≤ L |d|²: for a
            # quadratic E it equals the function-value form and does not lose digits to
            # cancellation near the optimum
            if _dot(g_new - g_y, d) <= L * _dot(d, d) * (1 + 1e-12):
                break
            L *= 2.0
        if t > 1.0 and _dot(g_y, w_new - w) > 0:
            # gradient restart (O'Donoghue & Candès 2015): the momentum points uphill; drop it
            # and redo the step from w (a plain projected-gradient step, which decreases E)
            t, y, g_y = 1.0, w, g_w
            continue
        t_new = 0.5 * (1 + math.sqrt(1 + 4 * t * t))
        y = w_new + ((t - 1) / t_new) * (w_new - w)
        w, E_w, g_w, t = w_new, E_new, g_new, t_new
        _, g_y = qp.energy_and_grad(y)
    return w, E_w, L, False


def _active_set_polish(qp: _SimplexQP, w, E_w, stop: _QPStopping):
    """Primal active-set refinement of a FISTA iterate (exact on a settled support).

    Solves the KKT system on the support, adds cells whose multiplier is below −τ_g and drops
    cells whose mass is below −τ_w, until the support settles; the settled candidate is
    projected on the simplex of its support (it moves by at most τ_w per cell) and accepted when its
    Frank–Wolfe gap is <= ``stop.tol``.  The margins τ are far above the round-off of the
    solve, so a cell whose KKT value is zero to round-off (the edge of the support) is never
    dropped and re-added in turn; a support seen before ends the phase (a cycle) instead of
    spending ``max_active_set`` solves.  Appends the gap to ``qp.history`` and a note to
    ``qp.phases``.  Returns ``(w, E(w), converged)``.
    """
    b = qp.grad(np.zeros_like(w))
    S = w > 0
    seen = {S.tobytes()}
    for it in range(1, stop.max_active_set + 1):
        cand, c = _kkt_on_support(qp.grad, b, S, qp.mass, stop.minres_maxiter)
        g = qp.grad(cand)
        mu = g - c
        scale = 1.0 + float(np.abs(g).max())
        # τ_g: a cell left out with multiplier above −τ_g adds at most mass·τ_g to the gap
        tau_g = max(1e-12 * scale, min(0.01 * stop.tol / qp.mass, 1e-9 * scale))
        tau_w = 1e-12 * qp.mass
        newS = (S & (cand >= -tau_w)) | (~S & (mu < -tau_g))
        if np.array_equal(newS, S):
            # on the support only: the cells outside it stay exactly 0
            cand[S] = project_simplex(cand[S], qp.mass)
            g = qp.grad(cand)
            gap = qp.gap(cand, g)
            qp.history.append(gap)
            qp.phases.append(f"active set {it} it")
            if gap <= stop.tol:
                return cand, qp.energy_and_grad(cand)[0], True
            return w, E_w, False
        key = newS.tobytes()
        if key in seen:
            qp.phases.append(f"active set cycled after {it} it")
            return w, E_w, False
        seen.add(key)
        S = newS
    qp.phases.append(f"active set did not settle in {stop.max_active_set} it")
    return w, E_w, False


def _minimise_on_simplex(qp: _SimplexQP, w, stop: _QPStopping):
    """The two phases of the module notes from cell masses ``w``; returns (w, E, L, converged).

    FISTA to ``stop.warm_tol`` finds the support, the active-set phase solves on it; if that
    fails to settle, FISTA continues to ``stop.tol`` from its best point.
    """
    w, E_w, L, done = _fista(qp, w, qp.lipschitz_start(), stop.warm_tol, stop.max_iter)
    qp.phases.append(f"fista {len(qp.history)} it")
    converged = done and stop.warm_tol <= stop.tol
    if not converged and stop.max_active_set > 0:
        w, E_w, converged = _active_set_polish(qp, w, E_w, stop)
    if not converged:
        left = max(stop.max_iter - len(qp.history), 1)
        w, E_w, L, converged = _fista(qp, w, L, stop.tol, left)
        qp.phases.append("fista to tol")
    return w, E_w, L, converged
