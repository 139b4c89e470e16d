"""Stationary states on a grid: the Gibbs state ρ_β and the β = ∞ equilibrium measure μ*.

* :func:`gibbs_state`: the self-consistent Gibbs state ρ = Z⁻¹ exp(−β δE/δρ[ρ]) (THEORY §4),
  the critical points of F_β = E + β⁻¹ ∫ρ log ρ, by a damped fixed point (Picard iteration
  with adaptive damping) or by Newton–Krylov on the log-density.  The grid Gibbs state is
  exactly the zero-flux state of the Scharfetter–Gummel and upwind schemes.
* :func:`equilibrium_measure`: μ* = argmin E over grid densities of given mass (β = ∞, the
  Coulomb-gas limit, THEORY §5), a convex quadratic programme on the simplex of cell masses for
  a positive-definite pair kernel.  The Frank–Wolfe gap
  G(w) = Σ_i w_i g_i − m min_i g_i,  g = ∂E/∂w = δE/δρ,
  bounds E(w) − E(μ*) for a convex E and is the reported residual.  Two phases:

  1. FISTA (accelerated projected gradient; step 1/L with L doubled until the descent lemma
     holds, starting from 2λ Σ_m |W_m| / |C| per pair term, a bound on ‖H‖; gradient
     restart) until the gap is ≤ ``warm_tol``: this finds the support;
  2. primal–dual active set (Hintermüller, Ito & Kunisch 2002): on the current support S,
     solve the KKT system H_SS w_S − c 1 = −b_S, Σ w_S = mass, by MINRES with FFT
     products; drop cells with w_i < 0, add cells whose multiplier g_i − c is negative;
     repeat until S is stable (finitely many steps; usually 1–5).

  If the active-set phase fails to settle, FISTA continues from its best point.

Both return the density and a :class:`StationaryReport` (convergence history included).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import NoConvergence, newton_krylov
from scipy.sparse.linalg import LinearOperator, minres

from .._validation import check_choice, check_int, check_positive
from ..energy import Energy
from ..errors import ConvergenceWarning
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


def _report(method, converged, iterations, history, free_energy, message) -> StationaryReport:
    """A :class:`StationaryReport` whose residual is the last entry of ``history`` (nan if none)."""
    return StationaryReport(
        method=method,
        converged=converged,
        iterations=iterations,
        residual=history[-1] if history else math.nan,
        history=np.asarray(history),
        free_energy=free_energy,
        message=message,
    )


def _warn_unconverged(what: str, report: StationaryReport, tol: float, advice: str) -> None:
    """A :class:`~meanfield.errors.ConvergenceWarning` for a solve that stopped above ``tol``
    (the caller's caller is the user's line)."""
    if report.converged:
        return
    warnings.warn(
        f"{what} did not converge: residual {report.residual:.2e} > tol {tol:g} after "
        f"{report.iterations} iterations ({report.method}); the density returned is the last "
        f"iterate, not the stationary state: {advice}",
        ConvergenceWarning,
        stacklevel=3,
    )


def _grid_energy(energy, grid) -> GridEnergy:
    """``energy`` as a :class:`GridEnergy` on ``grid`` (a GridEnergy passes through, checked)."""
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
    """The starting density: ``rho0`` rescaled to ``mass`` (uniform if None), grid shape."""
    if rho0 is None:
        return np.full(ge.grid.shape, mass / (ge.grid.size * ge.grid.cell_volume))
    rho = rho0 if isinstance(rho0, Density) else Density(ge.grid, rho0)
    if rho.grid != ge.grid:
        raise ValueError("rho0 must live on the solver's grid")
    if not rho.mass > 0:
        raise ValueError("rho0 must have positive mass")
    return rho.data * (mass / rho.mass)


def _gibbs(ge: GridEnergy, U: np.ndarray, beta: float, mass: float) -> np.ndarray:
    """G = m e^(−βU) / Σ |C| e^(−βU), shifted by min U so the exponentials cannot overflow."""
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


def _gibbs_options(beta, method, mass, damping, tol, max_iter) -> tuple:
    """Check :func:`gibbs_state`'s options; returns ``(beta, mass, damping, tol, max_iter)``."""
    beta = check_positive("beta (inverse temperature)", beta)
    check_choice("method", method, ("picard", "newton"))
    mass = check_positive("mass", mass)
    damping = check_positive("damping", damping)
    if damping > 1:
        raise ValueError(f"damping must be in (0, 1], got {damping}")
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter)
    return beta, mass, damping, tol, max_iter


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
        use Newton).  ``newton``: Newton–Krylov (scipy) on φ = log ρ for φ − log G(e^φ) = 0.
    rho0 : Density or array, optional
        Initial guess (default uniform).
    mass : float
        Total mass (1 for a probability density).
    damping : float in (0, 1]
        Initial Picard damping α.
    tol : float
        Stop when the residual max_i |G(ρ)_i − ρ_i| / max_i G(ρ)_i ≤ tol (Picard) or
        max_i |φ_i − log G_i| ≤ tol (Newton; a relative density error).
    max_iter : int

    Returns
    -------
    (Density, StationaryReport)
        The returned density is G(ρ) at the last iterate: exactly of Gibbs form.

    Warns
    -----
    meanfield.errors.ConvergenceWarning
        The residual is still above ``tol`` after ``max_iter`` iterations (then
        ``report.converged`` is False and the density is not the Gibbs state).

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
    >>> from meanfield.pde import Grid, gibbs_state
    >>> g = Grid(Box(1, 5.0), 64)
    >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], g.domain)
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
    beta, mass, damping, tol, max_iter = _gibbs_options(beta, method, mass, damping, tol, max_iter)
    rho = _initial(ge, rho0, mass)
    history = []
    solver = _picard_gibbs if method == "picard" else _newton_gibbs
    out, iters, converged, msg = solver(ge, rho, beta, mass, damping, tol, max_iter, history)
    report = _report(method, converged, iters, history, ge.free_energy(out, beta), msg)
    advice = (
        "raise max_iter or use method='newton'"
        if method == "picard"
        else "raise max_iter or start from a closer rho0"
    )
    _warn_unconverged("gibbs_state", report, tol, advice)
    return Density(ge.grid, out), report


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
        return float(w @ g - self.mass * g.min())

    def lipschitz_start(self) -> float:
        """2λ Σ_m |W_m| / |C| summed over the pair terms (1 without one): a bound on ‖H‖."""
        pairs = self.ge.pair.values()
        return sum(2 * lam * conv.row_sum_bound() / self.vol for lam, conv in pairs) or 1.0


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
        _, g_y = qp.energy_and_grad(y)
    return w, E_w, L, False


def _active_set_polish(qp: _SimplexQP, w, E_w, stop: _QPStopping):
    """Primal active-set refinement of a FISTA iterate (exact on a settled support).

    Solves the KKT system on the support, adds cells whose multiplier is negative and drops
    cells that turn negative, until the support settles; accepts the candidate when its
    Frank–Wolfe gap is <= ``stop.tol``. Appends the gap to ``qp.history`` and a note to
    ``qp.phases``.  Returns ``(w, E(w), converged)``.
    """
    b = qp.grad(np.zeros_like(w))
    S = w > 0
    for it in range(1, stop.max_active_set + 1):
        cand, c = _kkt_on_support(qp.grad, b, S, qp.mass, stop.minres_maxiter)
        g = qp.grad(cand)
        mu = g - c
        thresh = 1e-13 * (1.0 + float(np.abs(g).max()))
        newS = (S & (cand >= 0)) | (~S & (mu < -thresh))
        if np.array_equal(newS, S) and cand.min() >= 0:
            gap = qp.gap(cand, g)
            qp.history.append(gap)
            qp.phases.append(f"active set {it} it")
            if gap <= stop.tol:
                return cand, qp.energy_and_grad(cand)[0], True
            return w, E_w, False
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

    Every supported energy is quadratic in the cell masses w: a QP on the simplex, solved by
    FISTA, then by an active-set method on its support (:mod:`meanfield.pde.stationary`).

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

    Warns
    -----
    meanfield.errors.ConvergenceWarning
        The gap is still above ``tol`` when the iterations run out (``report.converged``
        False).

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
    >>> from meanfield.pde import Grid, equilibrium_measure
    >>> g = Grid(Box(1, 2.0), 40)
    >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], g.domain)
    >>> mu, report = equilibrium_measure(E, g)
    >>> report.converged, report.residual <= 1e-10
    (True, True)
    >>> mu.data[8:12].round(6), mu.data[18:22].round(6)  # support [-1, 1]: cells 10 to 29
    (array([0. , 0. , 0.5, 0.5]), array([0.5, 0.5, 0.5, 0.5]))
    >>> round(float(mu.covariance()[0, 0]), 6), round(report.free_energy, 3)
    (0.333333, -0.167)
    """
    ge = _grid_energy(energy, grid)
    qp = _SimplexQP(ge, check_positive("mass", mass))
    stop = _QPStopping(tol, warm_tol, max_iter, max_active_set, minres_maxiter)
    w0 = _initial(ge, rho0, qp.mass).ravel() * qp.vol
    w, E_w, L, converged = _minimise_on_simplex(qp, w0, stop)
    message = "; ".join(qp.phases) + f"; Lipschitz estimate L={L:.3g}"
    report = _report("fista+active-set", converged, len(qp.history), qp.history, E_w, message)
    _warn_unconverged("equilibrium_measure", report, tol, "raise max_iter or max_active_set")
    return Density(ge.grid, qp.density(w)), report
