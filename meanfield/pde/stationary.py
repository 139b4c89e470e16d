"""Stationary states on a grid: the Gibbs state ρ_β and the β = ∞ equilibrium measure μ*.

* :func:`gibbs_state`: the self-consistent Gibbs state ρ = Z⁻¹ exp(−β δE/δρ[ρ]) (THEORY §4),
  the critical points of F_β = E + β⁻¹ ∫ρ log ρ, by a damped fixed point (Picard iteration
  with adaptive damping) or by Newton–Krylov on the log-density.  The grid Gibbs state is
  exactly the zero-flux state of the Scharfetter–Gummel and upwind schemes.
* :func:`equilibrium_measure`: μ* = argmin E over grid densities of given mass (β = ∞, the
  Coulomb-gas limit, THEORY §5), a convex quadratic programme on the simplex of cell masses for
  a positive-definite pair kernel, solved by accelerated projected gradient (FISTA with
  backtracking and adaptive restart).  The Frank–Wolfe gap
  G(w) = Σ_i w_i g_i − m min_i g_i,  g = ∂E/∂w = δE/δρ,
  bounds E(w) − E(μ*) for a convex E and is the reported residual.

Both return the density and a :class:`StationaryReport` (convergence history included).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import NoConvergence, newton_krylov
from scipy.sparse.linalg import LinearOperator, minres

from .._validation import check_choice, check_int, check_positive
from ..energy import Energy
from ..simplex import project_simplex
from .field import Density
from .grid import Grid
from .potential import GridEnergy


@dataclass
class StationaryReport:
    """How a stationary solver ended.

    Attributes
    ----------
    method : str
    converged : bool
    iterations : int
    residual : float
        Final residual (see each solver for its definition).
    history : ndarray
        Residual at every iteration.
    free_energy : float
        F_β of the result (E for β = inf).
    message : str

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.pde.stationary import StationaryReport
    >>> r = StationaryReport("picard", True, 3, 1e-13, np.array([1e-2, 1e-7, 1e-13]), -0.5)
    >>> print(r)
    picard: converged after 3 iterations, residual 1.000e-13, free energy -0.5.
    """

    method: str
    converged: bool
    iterations: int
    residual: float
    history: np.ndarray = field(repr=False)
    free_energy: float
    message: str = ""

    def __str__(self) -> str:
        state = "converged" if self.converged else "NOT converged"
        return (
            f"{self.method}: {state} after {self.iterations} iterations, residual "
            f"{self.residual:.3e}, free energy {self.free_energy:.12g}. {self.message}"
        )


def _grid_energy(energy, grid) -> GridEnergy:
    if isinstance(energy, GridEnergy):
        if grid is not None and grid != energy.grid:
            raise ValueError("grid does not match the GridEnergy's grid")
        return energy
    if not isinstance(energy, Energy):
        raise TypeError(f"energy must be an Energy or a GridEnergy, got {energy!r}")
    if not isinstance(grid, Grid):
        raise TypeError(f"grid must be a meanfield.pde.Grid, got {grid!r}")
    return GridEnergy(energy, grid)


def _initial(ge: GridEnergy, rho0, mass: float) -> np.ndarray:
    if rho0 is None:
        return np.full(ge.grid.shape, mass / (ge.grid.size * ge.grid.cell_volume))
    rho = rho0 if isinstance(rho0, Density) else Density(ge.grid, rho0)
    if rho.grid != ge.grid:
        raise ValueError("rho0 must live on the solver's grid")
    if not rho.mass > 0:
        raise ValueError("rho0 must have positive mass")
    return rho.data * (mass / rho.mass)


def _gibbs(ge: GridEnergy, U: np.ndarray, beta: float, mass: float) -> np.ndarray:
    g = np.exp(-beta * (U - U.min()))
    return g * (mass / (g.sum() * ge.grid.cell_volume))


def _picard_gibbs(ge, rho, beta, mass, damping, tol, max_iter, history):
    """Damped fixed point ρ ← (1 − α)ρ + α G(ρ) with adaptive α; appends residuals to history.

    Returns ``(G(ρ) at the last iterate, iterations, converged, message)``.
    """
    alpha, converged, best, since = damping, False, math.inf, 0
    G = _gibbs(ge, ge.potential(rho), beta, mass)
    for _ in range(max_iter):
        res = float(np.max(np.abs(G - rho)) / np.max(G))
        history.append(res)
        if res <= tol:
            converged = True
            break
        if res < best:
            best, since = res, 0
        else:
            since += 1
        if (len(history) > 1 and res > 1.2 * history[-2]) or since >= 20:
            # growth or stagnation: the damped map has a mode of |multiplier| ≥ 1
            alpha, since = max(alpha * 0.5, 1e-6), 0
        rho = (1 - alpha) * rho + alpha * G
        G = _gibbs(ge, ge.potential(rho), beta, mass)
    return G, len(history), converged, f"final damping {alpha:g}"


def _newton_gibbs(ge, rho, beta, mass, damping, tol, max_iter, history):
    """Newton–Krylov on φ = log ρ for φ − log G(e^φ) = 0; appends residuals to history.

    Returns ``(G(ρ) at the solution, iterations, converged, message)``; the final residual is
    appended after the iteration count is taken. ``damping`` is unused (Picard only).
    """
    h_vol = ge.grid.cell_volume

    def residual(phi):
        r = np.exp(phi - phi.max())
        r *= mass / (r.sum() * h_vol)
        U = ge.potential(r)
        logG = -beta * U
        logG -= logG.max()
        logG -= math.log(np.exp(logG).sum() * h_vol / mass)
        return phi - logG

    def callback(x, f):
        history.append(float(np.max(np.abs(f))))

    phi0 = np.log(np.maximum(rho, np.finfo(float).tiny))
    try:
        phi = newton_krylov(
            residual, phi0, f_tol=tol, maxiter=max_iter, method="lgmres", callback=callback
        )
        converged, msg = True, "newton_krylov converged"
    except NoConvergence as exc:
        phi, converged, msg = exc.args[0], False, "newton_krylov did not converge"
    r = np.exp(phi - phi.max())
    r *= mass / (r.sum() * h_vol)
    out, iters = _gibbs(ge, ge.potential(r), beta, mass), len(history)
    history.append(float(np.max(np.abs(residual(phi)))))
    return out, iters, converged, msg


def gibbs_state(
    energy,
    grid: Grid | None,
    beta: float,
    *,
    method: str = "picard",
    rho0=None,
    mass: float = 1.0,
    damping: float = 0.5,
    tol: float = 1e-12,
    max_iter: int = 5000,
) -> tuple:
    r"""The self-consistent Gibbs state ρ = Z⁻¹ exp(−β δE/δρ[ρ]) on a grid.

    Parameters
    ----------
    energy : Energy or GridEnergy
    grid : Grid or None
        The grid (None when ``energy`` is a GridEnergy).
    beta : float
        Inverse temperature β > 0.
    method : {"picard", "newton"}
        ``picard``: ρ ← (1 − α)ρ + α G(ρ), G(ρ) = Z⁻¹ exp(−βU[ρ]); α starts at ``damping`` and
        is halved whenever the residual grows by 20 % in one step or fails to improve on its
        best value for 20 steps (contractive for weak coupling β λ ‖k‖; for strong coupling
        use Newton).  ``newton``: Newton–Krylov (scipy) on
        φ = log ρ for φ − log G(e^φ) = 0.
    rho0 : Density or array, optional
        Initial guess (default uniform).
    mass : float
        Total mass (1 for a probability density).
    damping : float in (0, 1]
    tol : float
        Stop when the residual max_i |G(ρ)_i − ρ_i| / max_i G(ρ)_i ≤ tol (Picard) or
        max_i |φ_i − log G_i| ≤ tol (Newton; a relative density error).
    max_iter : int

    Returns
    -------
    (Density, StationaryReport)
        The returned density is G(ρ) at the last iterate: exactly of Gibbs form.

    Notes
    -----
    The Gibbs state is a critical point of the free energy F_β = E + β⁻¹ ∫ ρ log ρ:

    .. math::

        \rho = G(\rho) = \frac{m}{Z} \exp\left(-\beta \frac{\delta E}{\delta \rho}[\rho]\right),
        \qquad Z = \sum_i |C| \exp\left(-\beta \frac{\delta E}{\delta \rho}[\rho]_i\right).

    Examples
    --------
    V = x²/2 with the repulsion λ = 1/2, k = −|x| at β = 2: the two methods agree, and the
    state is symmetric and wider than the Gibbs state N(0, 1/β) of V alone:

    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.pde import Grid
    >>> from meanfield.pde.stationary import gibbs_state
    >>> box = Box(1, 5.0)
    >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], box)
    >>> g = Grid(box, 64)
    >>> rho, report = gibbs_state(E, g, beta=2.0)
    >>> report.converged, report.residual <= 1e-12
    (True, True)
    >>> newton, _ = gibbs_state(E, g, beta=2.0, method="newton")
    >>> bool(np.allclose(newton.data, rho.data, atol=1e-10))
    True
    >>> abs(float(rho.mean()[0])) < 1e-12, round(float(rho.covariance()[0, 0]), 2)
    (True, 1.1)
    """
    ge = _grid_energy(energy, grid)
    beta = check_positive("beta (inverse temperature)", beta)
    check_choice("method", method, ("picard", "newton"))
    mass = check_positive("mass", mass)
    damping = check_positive("damping", damping)
    if damping > 1:
        raise ValueError(f"damping must be in (0, 1], got {damping}")
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter)
    rho = _initial(ge, rho0, mass)
    history = []
    solver = _picard_gibbs if method == "picard" else _newton_gibbs
    out, iters, converged, msg = solver(ge, rho, beta, mass, damping, tol, max_iter, history)
    report = StationaryReport(
        method=method,
        converged=converged,
        iterations=iters,
        residual=history[-1] if history else math.nan,
        history=np.asarray(history),
        free_energy=ge.free_energy(out, beta),
        message=msg,
    )
    return Density(ge.grid, out), report


def _kkt_on_support(grad, b, S, mass, maxiter):
    """Minimise bᵀw + ½wᵀHw on {w_S free, w_{S^c} = 0, Σ w = mass} (MINRES on the KKT system).

    ``grad(w) = b + H w``.  Returns (w, c) with c the multiplier of the mass constraint.
    """
    idx = np.flatnonzero(S)
    k, M = len(idx), len(b)

    def matvec(z):
        full = np.zeros(M)
        full[idx] = z[:k]
        Hx = (grad(full) - b)[idx]
        return np.concatenate([Hx - z[k], [-z[:k].sum()]])

    op = LinearOperator((k + 1, k + 1), matvec=matvec, dtype=float)
    rhs = np.concatenate([-b[idx], [-mass]])
    sol, _ = minres(op, rhs, rtol=1e-15, maxiter=maxiter)
    w = np.zeros(M)
    w[idx] = sol[:k]
    return w, sol[k]


def _fista(energy_and_grad, w, mass, L, tol, max_iter, history):
    """Accelerated projected gradient on the simplex; returns (w, E(w), L, converged)."""
    E_w, g_w = energy_and_grad(w)
    y, g_y, t = w.copy(), g_w, 1.0
    for _ in range(max_iter):
        gap = float(w @ g_w - mass * g_w.min())
        history.append(gap)
        if gap <= tol:
            return w, E_w, L, True
        while True:
            w_new = project_simplex(y - g_y / L, mass)
            d = w_new - y
            E_new, g_new = energy_and_grad(w_new)
            # descent-lemma check in gradient form, <∇E(w⁺) − ∇E(y), d> ≤ L |d|²: for a
            # quadratic E it equals the function-value form and does not lose digits to
            # cancellation near the optimum
            if (g_new - g_y) @ d <= L * (d @ d) * (1 + 1e-12):
                break
            L *= 2.0
        if t > 1.0 and g_y @ (w_new - w) > 0:
            # gradient restart (O'Donoghue & Candès 2015): the momentum points uphill; drop it
            # and redo the step from w (a plain projected-gradient step, which decreases E)
            t, y, g_y = 1.0, w, g_w
            continue
        t_new = 0.5 * (1 + math.sqrt(1 + 4 * t * t))
        y = w_new + ((t - 1) / t_new) * (w_new - w)
        w, E_w, g_w, t = w_new, E_new, g_new, t_new
        _, g_y = energy_and_grad(y)
    return w, E_w, L, False


def _active_set_polish(
    grad, energy_and_grad, w, E_w, mass, tol, max_active_set, minres_maxiter, history, phases
):
    """Primal active-set refinement of a FISTA iterate (exact on a settled support).

    Solves the KKT system on the support, adds cells whose multiplier is negative and drops
    cells that turn negative, until the support settles; accepts the candidate when its
    Frank–Wolfe gap is <= ``tol``. Appends the gap to ``history`` and a note to ``phases``.
    Returns ``(w, E(w), converged)``.
    """
    b = grad(np.zeros_like(w))
    S = w > 0
    for it in range(1, max_active_set + 1):
        cand, c = _kkt_on_support(grad, b, S, mass, minres_maxiter)
        g = grad(cand)
        mu = g - c
        thresh = 1e-13 * (1.0 + float(np.abs(g).max()))
        newS = (S & (cand >= 0)) | (~S & (mu < -thresh))
        if np.array_equal(newS, S) and cand.min() >= 0:
            gap = float(cand @ g - mass * g.min())
            history.append(gap)
            phases.append(f"active set {it} it")
            if gap <= tol:
                return cand, energy_and_grad(cand)[0], True
            return w, E_w, False
        S = newS
    phases.append(f"active set did not settle in {max_active_set} it")
    return w, E_w, False


def equilibrium_measure(
    energy,
    grid: Grid | None = None,
    *,
    mass: float = 1.0,
    rho0=None,
    tol: float = 1e-10,
    max_iter: int = 20_000,
    warm_tol: float = 1e-4,
    max_active_set: int = 50,
    minres_maxiter: int = 20_000,
) -> tuple:
    r"""μ* = argmin E(ρ) over densities on the grid with Σ ρ|C| = mass (β = ∞).

    Every supported energy is at most quadratic, E(w) = bᵀw + ½ wᵀHw in the cell masses w, so
    this is a quadratic programme on the simplex.  Two phases:

    1. FISTA (accelerated projected gradient; step 1/L with L doubled until the descent lemma
       holds, starting from 2λ Σ_m |W_m| / |C| per pair term, a bound on ‖H‖; gradient
       restart) until the Frank–Wolfe gap is ≤ ``warm_tol``: this finds the support;
    2. primal–dual active set (Hintermüller, Ito & Kunisch 2002): on the current support S,
       solve the KKT system H_SS w_S − c 1 = −b_S, Σ w_S = mass, by MINRES with FFT
       products; drop cells with w_i < 0, add cells whose multiplier g_i − c is negative;
       repeat until S is stable (finitely many steps; usually 1–5).

    If the active-set phase fails to settle, FISTA continues from its best point.

    Parameters
    ----------
    energy : Energy or GridEnergy
        Its pair kernels should be (conditionally) positive definite, as the Riesz family is,
        so that E is convex on the simplex and the gap below certifies optimality.
    grid : Grid, optional
    mass : float
    rho0 : Density or array, optional
        Starting density (default uniform).
    tol : float
        Success when the Frank–Wolfe gap G(w) = Σ w g − m min g ≤ tol (energy units); for a
        convex E, G bounds E(w) − min E.
    max_iter : int
        FISTA iterations (both phases together).
    warm_tol : float
        Gap at which FISTA hands over to the active-set phase.
    max_active_set : int
        Active-set iterations.
    minres_maxiter : int
        MINRES iterations per KKT solve.

    Returns
    -------
    (Density, StationaryReport)
        ``residual`` is the final Frank–Wolfe gap; ``free_energy`` is E(μ*).

    Notes
    -----
    In the cell masses w_i = ρ_i |C|, with g = ∂E/∂w = δE/δρ,

    .. math::

        \min_{w \ge 0,\ \sum_i w_i = m} E(w), \qquad
        G(w) = \sum_i w_i g_i - m \min_i g_i \ge E(w) - E(\mu^*).

    Examples
    --------
    V = x²/2, λ = 1/2, k = −|x| in p = 1: μ* is uniform on [−1, 1] (density 1/2,
    variance 1/3) with E(μ*) = 1/6 − 1/3 = −1/6 (THEORY §5, :mod:`meanfield.closed_forms`):

    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.pde import Grid
    >>> from meanfield.pde.stationary import equilibrium_measure
    >>> box = Box(1, 2.0)
    >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], box)
    >>> g = Grid(box, 40)
    >>> mu, report = equilibrium_measure(E, g)
    >>> report.converged, report.residual <= 1e-10
    (True, True)
    >>> mu.data[8:12].round(6), mu.data[18:22].round(6)  # support [-1, 1]: cells 10 to 29
    (array([0. , 0. , 0.5, 0.5]), array([0.5, 0.5, 0.5, 0.5]))
    >>> round(float(mu.covariance()[0, 0]), 6), round(report.free_energy, 3)
    (0.333333, -0.167)
    """
    ge = _grid_energy(energy, grid)
    mass = check_positive("mass", mass)
    tol = check_positive("tol", tol)
    warm_tol = max(check_positive("warm_tol", warm_tol), tol)
    max_iter = check_int("max_iter", max_iter)
    max_active_set = check_int("max_active_set", max_active_set, minimum=0)
    vol = ge.grid.cell_volume
    shape = ge.grid.shape

    def grad(w):
        return ge.potential(w.reshape(shape) / vol).ravel()

    def energy_and_grad(w):
        rho = w.reshape(shape) / vol
        pots = ge.potentials(rho)
        E = float(sum(ge.term_values(rho, pots).values()))
        return E, sum(pots.values()).ravel()

    L = sum(2 * lam * conv.row_sum_bound() / vol for lam, conv in ge.pair.values()) or 1.0
    history: list = []
    w = _initial(ge, rho0, mass).ravel() * vol
    w, E_w, L, done = _fista(energy_and_grad, w, mass, L, warm_tol, max_iter, history)
    phases = [f"fista {len(history)} it"]
    converged = done and warm_tol <= tol
    if not converged and max_active_set > 0:
        w, E_w, converged = _active_set_polish(
            grad,
            energy_and_grad,
            w,
            E_w,
            mass,
            tol,
            max_active_set,
            minres_maxiter,
            history,
            phases,
        )
    if not converged:
        left = max(max_iter - len(history), 1)
        w, E_w, L, converged = _fista(energy_and_grad, w, mass, L, tol, left, history)
        phases.append("fista to tol")
    report = StationaryReport(
        method="fista+active-set",
        converged=converged,
        iterations=len(history),
        residual=history[-1],
        history=np.asarray(history),
        free_energy=E_w,
        message="; ".join(phases) + f"; Lipschitz estimate L={L:.3g}",
    )
    return Density(ge.grid, w.reshape(shape) / vol), report
