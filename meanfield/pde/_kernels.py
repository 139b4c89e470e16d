"""Compiled (numba) inner loops of the 1D Scharfetter–Gummel steppers.

The flux schemes in :mod:`meanfield.pde.schemes` are written with numpy over whole arrays; on the
small 1D grids where a time-to-accuracy study lives (M ≈ 50–5000 cells) a numpy step costs
tens of microseconds of call overhead for a few hundred flops.  When the potential U does
not depend on ρ (one-body energies: the linear Fokker–Planck equation) the face coefficients
are fixed for the whole run, so many steps can run in one compiled call.  Each loop here does
exactly the arithmetic of the numpy reference, in the same order, so the two agree to
round-off (``tests/test_pde_fast.py``).

Face coefficients of a 1D grid of M cells are two arrays of length M − 1: across face
i + ½, mass leaves cell i at rate ``c_lr[i] ρ_i`` and cell i + 1 at rate ``c_rl[i] ρ_{i+1}``
(both ≥ 0, unit 1/time).

The tridiagonal solve (:func:`mmatrix_factor`, :func:`mmatrix_apply`) is Thomas' algorithm
written without a subtraction: for the M-matrix I − Δt A (A the generator above) every
intermediate quantity is a sum or a product of non-negative numbers, so (i) a non-negative
right-hand side gives a non-negative solution *in floating point*, and (ii) each entry
carries a relative error of O(M ε) independent of Δt, hence the mass Σ ρ_i (conserved
exactly by the solve) is kept to O(M ε) relative: no clamp and no rescaling are needed.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def explicit_steps(rho, c_lr, c_rl, dt, n_steps, last_dt=0.0):
    """``n_steps`` forward-Euler SG steps ρ ← (ρ − Δt out) + Δt in, shape (M,) -> (M,),
    then one step of ``last_dt`` if it is > 0 (the step shortened to reach a target time).

    out_i = c_lr[i] ρ_i + c_rl[i−1] ρ_i and in_i = c_lr[i−1] ρ_{i−1} + c_rl[i] ρ_{i+1}
    (missing faces at the walls carry nothing), accumulated in the order of the numpy
    reference :meth:`ScharfetterGummel.prepare`.
    """
    M = rho.shape[0]
    cur = rho.copy()
    nxt = np.empty_like(cur)
    for k in range(n_steps + (last_dt > 0.0)):
        if k == n_steps:
            dt = last_dt
        for i in range(M):
            out = 0.0
            inn = 0.0
            if i < M - 1:
                out = c_lr[i] * cur[i]
            if i > 0:
                inn = c_lr[i - 1] * cur[i - 1]
                out = out + c_rl[i - 1] * cur[i]
            if i < M - 1:
                inn = inn + c_rl[i] * cur[i + 1]
            nxt[i] = (cur[i] - dt * out) + dt * inn
        cur, nxt = nxt, cur
    return cur


@njit(cache=True)
def total_and_min(rho):
    """(Σ ρ_i, min ρ_i) of an array of any shape in one pass: one compiled call instead of
    two numpy reductions (each a few µs of call overhead on a small grid).

    Four interleaved partial sums and minima keep the pipeline busy on large grids (the sum
    is thus in a different order from numpy's pairwise one: they differ by O(M ε) relative).
    A NaN makes the sum NaN (the minimum may skip it), so a caller tests the sum for
    finiteness first, as :class:`~meanfield.pde.trackers.GuardTracker` does.
    """
    flat = rho.ravel()  # a view of a contiguous array
    n = flat.size
    s0, s1, s2, s3 = 0.0, 0.0, 0.0, 0.0
    m0, m1, m2, m3 = np.inf, np.inf, np.inf, np.inf
    k = n - n % 4
    for i in range(0, k, 4):
        a, b, c, d = flat[i], flat[i + 1], flat[i + 2], flat[i + 3]
        s0 += a
        s1 += b
        s2 += c
        s3 += d
        m0 = min(m0, a)
        m1 = min(m1, b)
        m2 = min(m2, c)
        m3 = min(m3, d)
    for i in range(k, n):
        s0 += flat[i]
        m0 = min(m0, flat[i])
    return (s0 + s1) + (s2 + s3), min(min(m0, m1), min(m2, m3))


@njit(cache=True)
def mmatrix_factor(a_lr, a_rl, dt, mult, inv_b):
    r"""LU factors of I − Δt A for the 1D generator A of the face rates (a_lr, a_rl).

    Row i of I − Δt A: diagonal 1 + Δt (a_lr[i] + a_rl[i−1]), x_{i−1} coefficient
    −Δt a_lr[i−1], x_{i+1} coefficient −Δt a_rl[i].  Forward elimination keeps the pivot
    b_i = g_i + Δt a_lr[i] through g_i, the pivot minus the rate to the right, which avoids
    the one subtraction of the textbook form:

    .. math::

        g_0 = 1,\quad g_i = 1 + \Delta t\, a^{rl}_{i-1}\, g_{i-1}/b_{i-1} \ge 1,\quad
        b_i = g_i + \Delta t\, a^{lr}_i .

    Writes the multipliers Δt a_lr[i] / b_i (shape (M − 1,)) into ``mult`` and 1/b_i
    (shape (M,)) into ``inv_b``.
    """
    M = inv_b.shape[0]
    g = 1.0
    inv_b[0] = 1.0 / (g + (dt * a_lr[0] if M > 1 else 0.0))
    for i in range(1, M):
        g = 1.0 + (dt * a_rl[i - 1]) * (g * inv_b[i - 1])
        inv_b[i] = 1.0 / (g + (dt * a_lr[i] if i < M - 1 else 0.0))
        mult[i - 1] = (dt * a_lr[i - 1]) * inv_b[i - 1]


@njit(cache=True)
def mmatrix_apply(mult, inv_b, a_rl, dt, rhs, out):
    """x = (I − Δt A)⁻¹ rhs from :func:`mmatrix_factor`; every update adds non-negative
    terms, so rhs ≥ 0 gives x ≥ 0 in floating point.  Writes x into ``out``."""
    M = rhs.shape[0]
    out[0] = rhs[0]
    for i in range(1, M):
        out[i] = rhs[i] + mult[i - 1] * out[i - 1]
    out[M - 1] = out[M - 1] * inv_b[M - 1]
    for i in range(M - 2, -1, -1):
        out[i] = (out[i] + (dt * a_rl[i]) * out[i + 1]) * inv_b[i]
    return out


@njit(cache=True)
def mmatrix_solve(a_lr, a_rl, dt, rhs, out):
    """Solve (I − Δt A) x = rhs (shape (M,)) into ``out``: :func:`mmatrix_factor` then
    :func:`mmatrix_apply`; ``rhs`` is left unchanged."""
    M = rhs.shape[0]
    mult = np.empty(max(M - 1, 0))
    inv_b = np.empty(M)
    mmatrix_factor(a_lr, a_rl, dt, mult, inv_b)
    return mmatrix_apply(mult, inv_b, a_rl, dt, rhs, out)


@njit(cache=True)
def implicit_euler_steps(rho, c_lr, c_rl, dt, n_steps, last_dt=0.0):
    """``n_steps`` implicit-Euler SG steps (I − Δt A) ρ^{n+1} = ρ^n, shape (M,) -> (M,),
    then one of ``last_dt`` if > 0; the matrix is factored once per step size."""
    M = rho.shape[0]
    mult = np.empty(max(M - 1, 0))
    inv_b = np.empty(M)
    mmatrix_factor(c_lr, c_rl, dt, mult, inv_b)
    cur = rho.copy()
    nxt = np.empty_like(cur)
    for _ in range(n_steps):
        mmatrix_apply(mult, inv_b, c_rl, dt, cur, nxt)
        cur, nxt = nxt, cur
    if last_dt > 0.0:
        mmatrix_solve(c_lr, c_rl, last_dt, cur, nxt)
        cur = nxt
    return cur


@njit(cache=True)
def mprk22_weights(c_lr, c_rl, c1_lr, c1_rl, rho, rho1, w_lr, w_rl):
    """Stage-2 face rates of MPRK22: (c ρⁿ + c⁽¹⁾ ρ⁽¹⁾) / (2 ρ⁽¹⁾) on the leaving cell.

    A cell with ρ⁽¹⁾ = 0 has ρⁿ = 0 too (the implicit-Euler stage keeps every cell with
    mass); its Patankar weight is then taken as 1 (its column multiplies a zero unknown).
    """
    M = rho.shape[0]
    for i in range(M - 1):
        if rho1[i] > 0.0:
            w_lr[i] = 0.5 * (c_lr[i] * (rho[i] / rho1[i]) + c1_lr[i])
        else:
            w_lr[i] = 0.5 * (c_lr[i] + c1_lr[i])
        if rho1[i + 1] > 0.0:
            w_rl[i] = 0.5 * (c_rl[i] * (rho[i + 1] / rho1[i + 1]) + c1_rl[i])
        else:
            w_rl[i] = 0.5 * (c_rl[i] + c1_rl[i])


@njit(cache=True)
def mprk22_steps(rho, c_lr, c_rl, dt, n_steps, last_dt=0.0):
    """``n_steps`` MPRK22 steps of dρ/dt = A ρ with fixed face rates, shape (M,) -> (M,),
    then one of ``last_dt`` if > 0.

    Stage 1 is implicit Euler, ρ⁽¹⁾ = (I − Δt A)⁻¹ ρⁿ; stage 2 solves
    (I − Δt B) ρ^{n+1} = ρⁿ with B = ½ A (I + diag(ρⁿ/ρ⁽¹⁾)), a generator again (columns of
    A rescaled by positive numbers), so both solves are M-matrix solves.
    """
    M = rho.shape[0]
    mult1, inv_b1 = np.empty(max(M - 1, 0)), np.empty(M)
    mmatrix_factor(c_lr, c_rl, dt, mult1, inv_b1)  # stage 1: the same matrix every step
    mult, inv_b = np.empty(max(M - 1, 0)), np.empty(M)
    cur = rho.copy()
    stage = np.empty(M)
    nxt = np.empty(M)
    w_lr = np.empty(max(M - 1, 0))
    w_rl = np.empty(max(M - 1, 0))
    for k in range(n_steps + (last_dt > 0.0)):
        if k == n_steps:  # the shortened last step: its own stage-1 factors
            dt = last_dt
            mmatrix_factor(c_lr, c_rl, dt, mult1, inv_b1)
        mmatrix_apply(mult1, inv_b1, c_rl, dt, cur, stage)
        mprk22_weights(c_lr, c_rl, c_lr, c_rl, cur, stage, w_lr, w_rl)
        mmatrix_factor(w_lr, w_rl, dt, mult, inv_b)
        mmatrix_apply(mult, inv_b, w_rl, dt, cur, nxt)
        cur, nxt = nxt, cur
    return cur


@njit(cache=True)
def mprk22_lines(rho, c_lr, c_rl, dt):
    """One MPRK22 step of Δt along the middle axis of every line of ``rho`` (P, n, Q).

    ``c_lr``, ``c_rl`` (P, n − 1, Q) are the face rates along that axis.  Each line is an
    independent 1D problem, solved as in :func:`mprk22_steps` (two M-matrix solves, O(n)), so
    the cost is linear in the number of cells and every line keeps its mass and positivity.
    """
    P, n, Q = rho.shape
    out = np.empty_like(rho)
    line = np.empty(n)
    stage = np.empty(n)
    nxt = np.empty(n)
    a = np.empty(max(n - 1, 0))
    b = np.empty(max(n - 1, 0))
    w_lr = np.empty(max(n - 1, 0))
    w_rl = np.empty(max(n - 1, 0))
    mult = np.empty(max(n - 1, 0))
    inv_b = np.empty(n)
    for p in range(P):
        for q in range(Q):
            for i in range(n):
                line[i] = rho[p, i, q]
            for i in range(n - 1):
                a[i] = c_lr[p, i, q]
                b[i] = c_rl[p, i, q]
            mmatrix_factor(a, b, dt, mult, inv_b)
            mmatrix_apply(mult, inv_b, b, dt, line, stage)
            mprk22_weights(a, b, a, b, line, stage, w_lr, w_rl)
            mmatrix_factor(w_lr, w_rl, dt, mult, inv_b)
            mmatrix_apply(mult, inv_b, w_rl, dt, line, nxt)
            for i in range(n):
                out[p, i, q] = nxt[i]
    return out
