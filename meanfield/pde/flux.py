"""Conservative finite-volume fluxes for ∂_t ρ = ∇·(ρ ∇U[ρ]) + β⁻¹ Δρ with no-flux walls.

Every scheme here moves mass only across interior cell faces (the wall faces carry zero flux:
the no-flux condition), and splits each face flux into the part leaving the left cell and the
part leaving the right cell, both ≥ 0.  A forward-Euler step is then written as

    ρ_i ← (ρ_i − Δt out_i) + Δt in_i,

where out_i ≤ ρ_i / Δt under the time-step bound returned by ``stable_dt``; the bracket is a
product of ρ_i with a number in [0, 1] and ``in_i`` ≥ 0, so ρ stays ≥ 0 *in floating point*,
and the total mass changes only by round-off (each face flux is added once and subtracted
once).  With D = β⁻¹:

``UpwindScheme`` (Carrillo, Chertock & Huang, Commun. Comput. Phys. 17, 2015)
    ξ = D log ρ + U,  face velocity u_{i+½} = −(ξ_{i+1} − ξ_i)/h, upwind flux
    F = u⁺ ρ^E_i + u⁻ ρ^W_{i+1} with ρ^{E,W} the (order 2) minmod-limited reconstruction, which
    lies in [0, 2ρ_i].  Semi-discrete free-energy dissipation: dF_h/dt = −Σ_faces h^p u F ≤ 0.
    Explicit; positivity needs Δt ≤ ρ_i/out_i, and, the diffusion being inside ξ, the
    linearised scheme is the explicit heat equation, so Δt ≤ 1/(2D Σ_a h_a⁻²) as well.

``ScharfetterGummel`` (Scharfetter & Gummel 1969; for Fokker–Planck the Chang–Cooper 1970 flux)
    J_{i+½} = (D/h) [B(a) ρ_i − B(−a) ρ_{i+1}],  a = β (U_{i+1} − U_i),  B(z) = z/(eᶻ − 1):
    exact for the face's 1D drift-diffusion with U linear across it.  Zero flux exactly at
    ρ ∝ exp(−βU), so the discrete Gibbs state is a steady state to round-off; the relative
    entropy to it never increases (a monotone Markov generator).  Explicit under
    Δt ≤ 1/max_i Σ_faces D B(±a)/h² (the positivity bound, which includes the parabolic one),
    or implicit Euler (an M-matrix solve, positive for every Δt: the option for stiff
    diffusion), with U lagged at the old time, where Δt only needs the drift's CFL bound.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_banded
from scipy.sparse.linalg import splu

from .._validation import check_choice, check_positive
from ..errors import NumericalError
from .grid import Grid

#: Smallest positive normal float: the floor under log ρ in the upwind scheme.
TINY = np.finfo(float).tiny


def bernoulli(z):
    """B(z) = z / (eᶻ − 1), with B(0) = 1; B(z) → 0 for z → +inf and B(z) ≈ −z for z → −inf."""
    z = np.asarray(z, dtype=float)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = z / np.expm1(z)
    out = np.where(z == 0, 1.0, out)
    return np.where(np.isnan(out) & (z > 0), 0.0, out)


def _sl(a: int, s: slice, p: int) -> tuple:
    idx = [slice(None)] * p
    idx[a] = s
    return tuple(idx)


def _left(a, p):
    return _sl(a, slice(0, -1), p)


def _right(a, p):
    return _sl(a, slice(1, None), p)


def minmod3(a, b, c):
    """Elementwise minmod: the argument of least magnitude if all share a sign, else 0.

    Written as max(min(a, b, c), 0) + min(max(a, b, c), 0): one of the two terms is zero
    unless all three share a sign, and then the other is the least-magnitude argument.
    """
    lo = np.minimum(np.minimum(a, b), c)
    hi = np.maximum(np.maximum(a, b), c)
    np.maximum(lo, 0.0, out=lo)
    np.minimum(hi, 0.0, out=hi)
    return lo + hi


def reconstruct(rho: np.ndarray, axis: int, theta: float = 2.0):
    """Face values (ρ^E, ρ^W) = ρ ± σ/2 along ``axis`` with the minmod-θ slope σ.

    σ_i = minmod(θ Δ⁻, (Δ⁻ + Δ⁺)/2, θ Δ⁺) in the interior, 0 in the two wall cells.  For
    θ ≤ 2 both face values lie in [0, 2ρ_i].
    """
    p = rho.ndim
    d = np.diff(rho, axis=axis)
    sigma = np.zeros_like(rho)
    dm, dp = d[_sl(axis, slice(0, -1), p)], d[_sl(axis, slice(1, None), p)]
    sigma[_sl(axis, slice(1, -1), p)] = minmod3(theta * dm, 0.5 * (dm + dp), theta * dp)
    return np.maximum(rho + 0.5 * sigma, 0.0), np.maximum(rho - 0.5 * sigma, 0.0)


class Scheme:
    """Base class of the flux schemes.

    Arrays ``rho`` and ``U`` have the grid's shape; ``rho`` is a density (mass / volume), ``U``
    the potential δE/δρ at the cell centres (energy units), ``beta`` the inverse temperature.
    ``flows`` gives the outflow and inflow of every cell, both ≥ 0 (density / time);
    ``prepare`` gives them together with the stable time step; ``advance`` takes the step.
    ``U`` must not be modified in place between calls (schemes may cache per ``U`` object).
    """

    name = "scheme"
    implicit = False

    def flows(self, rho, U, grid: Grid, beta: float):
        raise NotImplementedError

    def rate(self, rho, U, grid: Grid, beta: float) -> np.ndarray:
        """dρ/dt of the semi-discrete scheme, shape ``grid.shape``."""
        out, inn = self.flows(rho, U, grid, beta)
        return inn - out

    def stable_dt(
        self, rho, U, grid: Grid, beta: float, out=None, nonlocal_rate: float = 0.0
    ) -> float:
        """Largest Δt keeping the step positive and monotone (before the safety factor).

        ``nonlocal_rate`` (1/time) is max ρ times the pair-interaction stiffness, the fastest
        rate of the linearised nonlocal term (see :attr:`GridEnergy.pair_stiffness`).
        """
        raise NotImplementedError

    def prepare(self, rho, U, grid: Grid, beta: float, nonlocal_rate: float = 0.0):
        """(out, in, stable Δt) for one step: what the solver needs, computed once."""
        out, inn = self.flows(rho, U, grid, beta)
        return out, inn, self.stable_dt(rho, U, grid, beta, out, nonlocal_rate)

    def advance(self, rho, U, grid: Grid, beta: float, dt: float, out=None, inn=None):
        """One forward-Euler step (implicit schemes override)."""
        if out is None:
            out, inn = self.flows(rho, U, grid, beta)
        return (rho - dt * out) + dt * inn

    def describe(self) -> dict:
        return {"scheme": self.name}


class UpwindScheme(Scheme):
    """Carrillo–Chertock–Huang positivity-preserving, entropy-dissipating upwind scheme.

    Parameters
    ----------
    order : {1, 2}
        1: piecewise-constant face values (first order in h); 2: minmod-θ reconstruction
        (second order away from extrema and vacuum).
    theta : float in [1, 2]
        Limiter parameter of the order-2 reconstruction.
    """

    name = "upwind"

    def __init__(self, order: int = 2, theta: float = 2.0):
        if order not in (1, 2):
            raise ValueError(f"order must be 1 or 2, got {order!r}")
        theta = check_positive("theta", theta)
        if not 1.0 <= theta <= 2.0:
            raise ValueError(
                f"theta must be in [1, 2] (positivity of the reconstruction), got {theta}"
            )
        self.order, self.theta = order, theta

    def flows(self, rho, U, grid, beta):
        p = grid.dim
        xi = np.log(np.maximum(rho, TINY)) / beta + U
        out = np.zeros_like(rho)
        inn = np.zeros_like(rho)
        for a in range(p):
            h = grid.h[a]
            u = (xi[_left(a, p)] - xi[_right(a, p)]) / h
            if self.order == 2:
                rE, rW = reconstruct(rho, a, self.theta)
            else:
                rE = rW = rho
            L, R = _left(a, p), _right(a, p)
            f_lr = np.maximum(u, 0.0) * rE[L] / h  # leaves the left cell
            f_rl = np.maximum(-u, 0.0) * rW[R] / h  # leaves the right cell
            out[L] += f_lr
            inn[R] += f_lr
            out[R] += f_rl
            inn[L] += f_rl
        return out, inn

    def stable_dt(self, rho, U, grid, beta, out=None, nonlocal_rate=0.0):
        """min(positivity bound, 1 / (D Σ_a 4/h_a² + nonlocal_rate)).

        The positivity bound is min_i ρ_i / out_i.  The second bound makes the linearised
        step monotone for every Fourier mode: the diffusion sits inside ξ, so the upwind
        velocity alone does not limit it (D Σ_a 4/h_a² is the largest eigenvalue of −DΔ_h).
        """
        if out is None:
            out, _ = self.flows(rho, U, grid, beta)
        pos = rho > 0
        ratio = float(np.max(out[pos] / rho[pos])) if pos.any() else 0.0
        dt_pos = math.inf if ratio == 0 else 1.0 / ratio
        dt_mono = 1.0 / (sum(4.0 / h**2 for h in grid.h) / beta + nonlocal_rate)
        return min(dt_pos, dt_mono)

    def describe(self):
        return {"scheme": self.name, "order": self.order, "theta": self.theta}


class ScharfetterGummel(Scheme):
    """Scharfetter–Gummel (Chang–Cooper) exponentially fitted flux, explicit or implicit.

    Parameters
    ----------
    implicit : bool
        False: forward Euler under the positivity bound.  True: implicit Euler for the linear
        drift-diffusion with U frozen at the old time (unconditionally positive; the time step
        is then bounded only by the drift's CFL number, see :meth:`stable_dt`).
    """

    def __init__(self, implicit: bool = False):
        self.implicit = bool(implicit)
        self.name = "sg-implicit" if self.implicit else "sg"
        self._cache = None

    @staticmethod
    def _coefficients(U, grid, beta, a):
        """Rates (c_lr, c_rl) per face: out of the left cell c_lr ρ_L, out of the right c_rl ρ_R.

        One exponential per face: with b = B(|z|), B(z) = b for z ≥ 0 and |z| + b for z < 0
        (the identity B(−z) = z + B(z) applied without cancellation), so both are ≥ 0.
        """
        p = grid.dim
        z = beta * (U[_right(a, p)] - U[_left(a, p)])
        az = np.abs(z)
        b = bernoulli(az)
        scale = 1.0 / (beta * grid.h[a] ** 2)
        big = az + b
        return scale * np.where(z >= 0, b, big), scale * np.where(z >= 0, big, b)

    def _face_data(self, U, grid, beta):
        """Face coefficients per axis and the largest exit rate, cached for the last U.

        The solver passes the same U object while it does not depend on ρ (one-body terms
        only), so the exponentials are then computed once per run.
        """
        key = (id(U), beta, grid)
        if self._cache is not None and self._cache[0] == key and self._cache[1] is U:
            return self._cache[2]
        coeffs, exit_rate = [], np.zeros(grid.shape)
        for a in range(grid.dim):
            c_lr, c_rl = self._coefficients(U, grid, beta, a)
            coeffs.append((c_lr, c_rl))
            exit_rate[_left(a, grid.dim)] += c_lr
            exit_rate[_right(a, grid.dim)] += c_rl
        data = (coeffs, float(exit_rate.max()))
        self._cache = (key, U, data)
        return data

    def prepare(self, rho, U, grid, beta, nonlocal_rate=0.0):
        """(out, in, stable Δt) from one evaluation of the face coefficients."""
        if self.implicit:
            return None, None, self.stable_dt(rho, U, grid, beta, None, nonlocal_rate)
        p = grid.dim
        out = np.zeros_like(rho)
        inn = np.zeros_like(rho)
        coeffs, max_exit = self._face_data(U, grid, beta)
        for a, (c_lr, c_rl) in enumerate(coeffs):
            L, R = _left(a, p), _right(a, p)
            f_lr, f_rl = c_lr * rho[L], c_rl * rho[R]
            out[L] += f_lr
            inn[R] += f_lr
            out[R] += f_rl
            inn[L] += f_rl
        r = max(max_exit, nonlocal_rate)
        return out, inn, (math.inf if r == 0 else 1.0 / r)

    def flows(self, rho, U, grid, beta):
        p = grid.dim
        out = np.zeros_like(rho)
        inn = np.zeros_like(rho)
        for a in range(p):
            c_lr, c_rl = self._coefficients(U, grid, beta, a)
            L, R = _left(a, p), _right(a, p)
            f_lr, f_rl = c_lr * rho[L], c_rl * rho[R]
            out[L] += f_lr
            inn[R] += f_lr
            out[R] += f_rl
            inn[L] += f_rl
        return out, inn

    def _exit_rates(self, U, grid, beta, drift_only: bool):
        p = grid.dim
        total = np.zeros(grid.shape)
        for a in range(p):
            if drift_only:
                dU = U[_right(a, p)] - U[_left(a, p)]
                h = grid.h[a]
                c_lr, c_rl = np.maximum(-dU, 0.0) / h**2, np.maximum(dU, 0.0) / h**2
            else:
                c_lr, c_rl = self._coefficients(U, grid, beta, a)
            total[_left(a, p)] += c_lr
            total[_right(a, p)] += c_rl
        return total

    def stable_dt(self, rho, U, grid, beta, out=None, nonlocal_rate=0.0):
        """Explicit: 1 / max_i (exit rate of cell i).  Implicit: the same for the drift alone.

        Both are further bounded by 1/nonlocal_rate.  The explicit bound makes the step for a
        frozen U a Markov (stochastic, non-negative) matrix, hence positive and, with
        ρ ∝ e^(−βU) its fixed point, non-increasing in relative entropy.  The implicit step is
        positive for any Δt; the drift bound keeps the lagged potential U[ρⁿ] accurate (a
        Courant number ≤ 1 for the velocity −∇U).
        """
        r = float(np.max(self._exit_rates(U, grid, beta, drift_only=self.implicit)))
        r = max(r, nonlocal_rate)
        return math.inf if r == 0 else 1.0 / r

    def matrix(self, U, grid, beta):
        """The generator A (M × M, sparse CSC) with dρ/dt = A ρ (flattened C order)."""
        p, M = grid.dim, grid.size
        index = np.arange(M).reshape(grid.shape)
        rows, cols, vals = [], [], []
        for a in range(p):
            c_lr, c_rl = self._coefficients(U, grid, beta, a)
            iL, iR = index[_left(a, p)].ravel(), index[_right(a, p)].ravel()
            c_lr, c_rl = c_lr.ravel(), c_rl.ravel()
            rows += [iL, iR, iR, iL]
            cols += [iL, iL, iR, iR]
            vals += [-c_lr, c_lr, -c_rl, c_rl]
        A = sp.coo_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(M, M)
        )
        return A.tocsc()

    def advance(self, rho, U, grid, beta, dt, out=None, inn=None):
        if not self.implicit:
            return super().advance(rho, U, grid, beta, dt, out, inn)
        if grid.dim == 1:
            c_lr, c_rl = self._coefficients(U, grid, beta, 0)
            n = grid.size
            ab = np.zeros((3, n))
            diag = np.zeros(n)
            diag[:-1] += c_lr
            diag[1:] += c_rl
            ab[1] = 1.0 + dt * diag
            ab[0, 1:] = -dt * c_rl  # A[i, i+1]: inflow to i from i+1
            ab[2, :-1] = -dt * c_lr  # A[i+1, i]: inflow to i+1 from i
            new = solve_banded((1, 1), ab, rho)
        else:
            A = self.matrix(U, grid, beta)
            lhs = (sp.identity(grid.size, format="csc") - dt * A).tocsc()
            new = splu(lhs).solve(rho.ravel()).reshape(grid.shape)
        # the exact solution is ≥ 0 (M-matrix inverse); the LU solve may leave round-off
        # negatives of size ~1e-16 max ρ: set those to zero, anything larger is an error
        floor = -1e-12 * max(float(np.max(np.abs(new))), TINY)
        if np.any(new < floor):
            raise NumericalError(
                f"implicit Scharfetter-Gummel step produced a negative density ({new.min():.3g}); "
                "this should not happen for a finite potential: check U for NaN or inf"
            )
        new = np.maximum(new, 0.0)
        # the exact solve conserves mass (the columns of A sum to zero); the LU round-off
        # grows with the condition number ~ Δt ‖A‖, so restore the mass by a rescaling that
        # changes ρ by no more than that round-off (and keeps it ≥ 0)
        total = new.sum()
        return new * (rho.sum() / total) if total > 0 else new

    def describe(self):
        return {"scheme": self.name}


SCHEMES = ("upwind", "sg", "sg-implicit", "chang-cooper")


def make_scheme(name: str = "upwind", *, order: int = 2) -> Scheme:
    """Build a scheme by name: ``upwind`` (CCH, ``order`` 1 or 2), ``sg`` (explicit
    Scharfetter–Gummel), ``sg-implicit`` or its alias ``chang-cooper`` (implicit Euler)."""
    check_choice("scheme", name, SCHEMES)
    if name == "upwind":
        return UpwindScheme(order=order)
    return ScharfetterGummel(implicit=name != "sg")
