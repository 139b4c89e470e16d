"""Stationary states on a grid: the Gibbs state ρ_β and the β = ∞ equilibrium measure μ*.

* :func:`gibbs_state`: the self-consistent Gibbs state ρ = Z⁻¹ exp(−β δE/δρ[ρ]) (THEORY §4),
  the critical points of F_β = E + β⁻¹ ∫ρ log ρ, by a damped fixed point (Picard iteration
  with adaptive damping) or by Newton–Krylov on the log-density.  The grid Gibbs state is
  exactly the zero-flux state of the Scharfetter–Gummel and upwind schemes.
* :func:`equilibrium_measure`: μ* = argmin E over grid densities of given mass (β = ∞, the
  Coulomb-gas limit, THEORY §5), a convex quadratic programme on the simplex of cell masses for
  a positive-definite pair kernel, solved by FISTA and then a primal–dual active set (the
  algorithm: :mod:`meanfield.pde.simplex_qp`); its residual is the Frank–Wolfe gap, a bound on
  E(w) − E(μ*).

Both return the density and a :class:`StationaryReport` (convergence history included).

Stationary states can be several.  F_β is strictly convex in ρ (flat sense: along
ρ_t = (1 − t)ρ_0 + tρ_1) when every pair kernel is (conditionally) positive definite and every
measure term convex (V enters linearly, whatever its shape): then ρ_β is the unique critical
point.  An attractive pair term (e.g. the quadratic kernel of the granular-media /
Curie–Weiss model) gives, above a critical β, several (ordered minimisers, a symmetric
saddle): :func:`gibbs_state` then searches from several starts, classifies each state by its
free energy and the second variation of F_β on mass-zero perturbations
(:func:`second_variation_eigenvalue`), returns the minimiser and lists every state in
``report.states``; :mod:`meanfield.pde.branches` follows them in β.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import NoConvergence, newton_krylov
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

from .._validation import check_choice, check_int, check_positive
from ..contract import RUN_PARAMS, Param, declare
from ..energy import Energy, NormalisedAlignment, RiskAlignment
from ..errors import (
    ConvergenceError,
    ConvergenceWarning,
    InputError,
    InputTypeError,
    MultipleStationaryStatesWarning,
)
from ..kernels import Cosine, Gaussian, Quadratic, Riesz
from .field import Density, check_density_values
from .grid import Grid
from .potential import GridEnergy
from .simplex_qp import _minimise_on_simplex, _QPStopping, _SimplexQP


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
    states : tuple of StationaryState
        :func:`gibbs_state` only: every distinct stationary state found, lowest free energy
        first (the first is the density returned); empty for :func:`equilibrium_measure`.

    See Also
    --------
    gibbs_state, equilibrium_measure, meanfield.pde.solver.SolveResult

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
    states: tuple = field(default=(), repr=False)

    def __str__(self) -> str:
        state = "converged" if self.converged else "NOT converged"
        return (
            f"{self.method}: {state} after {self.iterations} iterations, residual "
            f"{self.residual:.3e}, free energy {self.free_energy:.12g}. {self.message}"
        )


def _report(method, converged, iterations, history, free_energy, message) -> StationaryReport:
    """A :class:`StationaryReport` whose residual is the last entry of ``history`` (nan if none)."""
    residual = history[-1] if history else math.nan
    return StationaryReport(
        method, converged, iterations, residual, np.asarray(history), free_energy, message
    )


def _warn_unconverged(what: str, report: StationaryReport, tol: float, advice: str) -> None:
    """A :class:`~meanfield.errors.ConvergenceWarning` for a solve that stopped above ``tol``
    (the caller's caller, past the contract's wrapper, is the user's line)."""
    if report.converged:
        return
    warnings.warn(
        f"{what} did not converge: residual {report.residual:.2e} > tol {tol:g} after "
        f"{report.iterations} iterations ({report.method}); the density returned is the last "
        f"iterate, not the stationary state: {advice}",
        ConvergenceWarning,
        stacklevel=4,  # past the solver and its contract wrapper (meanfield.contract.declare)
    )


def _grid_energy(energy, grid) -> GridEnergy:
    """``energy`` as a :class:`GridEnergy` on ``grid`` (a GridEnergy passes through, checked)."""
    if isinstance(energy, GridEnergy):
        if grid is not None and grid != energy.grid:
            raise InputError("grid does not match the GridEnergy's grid")
        return energy
    if not isinstance(energy, Energy):
        raise InputTypeError(f"energy must be an Energy or a GridEnergy, got {energy!r}")
    return GridEnergy(energy, grid)  # checks the grid


def _initial(ge: GridEnergy, rho0, mass: float) -> np.ndarray:
    """The starting density: ``rho0`` rescaled to ``mass`` (uniform if None), grid shape."""
    if rho0 is None:
        return np.full(ge.grid.shape, mass / (ge.grid.size * ge.grid.cell_volume))
    if isinstance(rho0, Density):
        rho = rho0
    else:
        rho = Density(ge.grid, check_density_values(ge.grid, rho0, "rho0"))
    if rho.grid != ge.grid:
        raise InputError(f"rho0 must live on the solver's grid {ge.grid!r}, got {rho.grid!r}")
    if not rho.mass > 0:
        raise InputError(f"rho0 must have positive mass, got {rho.mass!r}")
    return rho.data * (mass / rho.mass)


def _gibbs(ge: GridEnergy, U: np.ndarray, beta: float, mass: float) -> np.ndarray:
    """G = m e^(−βU) / Σ |C| e^(−βU), shifted by min U so the exponentials cannot overflow."""
    g = np.exp(-beta * (U - U.min()))
    return g * (mass / (g.sum() * ge.grid.cell_volume))


def _picard_gibbs(ge, rho, beta, mass, damping, tol, max_iter, history):
    """Damped fixed point ρ ← (1 − α)ρ + α G(ρ) with adaptive α; appends residuals to history.
    Returns ``(G(ρ) at the last iterate, iterations, converged, message)``."""
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
    appended after the iteration count is taken. ``damping`` is unused (Picard only)."""
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
        raise InputError(f"damping must be in (0, 1], got {damping}")
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter)
    return beta, mass, damping, tol, max_iter


#: |σ| at or below this: the second variation vanishes to the solver's accuracy ("marginal").
MARGINAL_EIGENVALUE = 1e-8
#: Up to this many cells the second variation is built densely (M Hessian products and one
#: symmetric eigensolve, deterministic); Lanczos (ARPACK, a fixed start vector) above.
DENSE_SECOND_VARIATION_CELLS = 1024
#: Two solves reached the same state when ∫|ρ_1 − ρ_2| ≤ this × max(mass · 1e4 tol, 1):
#: far above the solvers' accuracy, far below the distance between distinct states.
SAME_STATE_L1 = 1e-6
#: Two distinct states have equal free energy when |F_1 − F_2| ≤ this × (1 + |F_1|); F is
#: stationary at a critical point, so its error is of order the square of the solve's.
EQUAL_FREE_ENERGY = 1e-9
#: β h R of the tilted starts exp(−β(U_ext ∓ h x_d)) (R the half-width along axis d): a
#: weight ratio e^6 between x_d = ±R/2, enough to put a start in a symmetry-broken basin.
DEFAULT_TILT = 6.0


@dataclass(frozen=True)
class StationaryState:
    r"""One stationary state (critical point of F_β) found by :func:`gibbs_state`.

    Attributes
    ----------
    density : Density
        The state, exactly of Gibbs form ρ = m Z⁻¹ e^{−βU[ρ]}.
    free_energy : float
        F_β(ρ) = E_h(ρ) + β⁻¹ Σ w log ρ (energy units).
    min_eigenvalue : float or None
        σ_min, the smallest eigenvalue of the second variation of F_β at ρ on mass-zero
        perturbations v, measured against the entropy's (dimensionless; 1 without interaction):
        σ_min = min_v δ²F_β[v] / (β⁻¹ Σ v²/w)   (:func:`second_variation_eigenvalue`).
        None when not computed: F_β strictly convex (the unique minimiser, σ_min ≥ 1).
    stability : {"stable", "unstable", "marginal"}
        σ_min > 1e-8, < −1e-8, or in between (:data:`MARGINAL_EIGENVALUE`).  An unstable
        state is a saddle: a mass-zero perturbation lowers F_β.
    mean : ndarray, shape (p,)
        ∫ ω ρ(dω) / mass: the order parameter of a symmetric model.
    starts : tuple of str
        The starts whose solve reached this state (``"rho0"``, ``"uniform"``,
        ``"boltzmann"``, ``"tilt+x1"``, ``"tilt-x1"``, ...).
    residual : float
        Final residual of the solve that found it.

    See Also
    --------
    gibbs_state, second_variation_eigenvalue
    meanfield.pde.branches.follow_branches : the states followed in β.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde import Density, Grid
    >>> from meanfield.pde.stationary import StationaryState
    >>> g = Grid(Box(1, 1.0), 4)
    >>> st = StationaryState(Density.uniform(g), -0.69, 1.0, "stable", np.zeros(1), ("uniform",),
    ...                      1e-13)
    >>> st.stable, str(st)
    (True, 'stable state: F = -0.69, mean = [0.], sigma_min = 1, from uniform')
    """

    density: Density
    free_energy: float
    min_eigenvalue: float | None
    stability: str
    mean: np.ndarray
    starts: tuple
    residual: float

    @property
    def stable(self) -> bool:
        """True when σ_min > 1e-8 (or not computed: strictly convex F_β).

        See Also
        --------
        second_variation_eigenvalue : σ_min.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde import Density, Grid
        >>> from meanfield.pde.stationary import StationaryState
        >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
        >>> StationaryState(rho, 0.0, -0.2, "unstable", np.zeros(1), ("uniform",), 0.0).stable
        False
        """
        return self.stability == "stable"

    def __str__(self) -> str:
        sigma = self.min_eigenvalue
        sigma = "not computed (convex)" if sigma is None else f"{sigma:.4g}"
        return (
            f"{self.stability} state: F = {self.free_energy:.12g}, mean = "
            f"{np.array2string(np.asarray(self.mean), precision=6)}, sigma_min = {sigma}, "
            f"from {', '.join(self.starts)}"
        )


def flat_convexity(energy, grid: Grid | None = None) -> tuple:
    """Whether F_β is strictly convex in ρ, so that ρ_β is its only critical point.

    F_β = ∫ V dρ + (pair and measure terms) + β⁻¹ ∫ ρ log ρ: the one-body terms are linear in
    ρ (whatever the shape of V) and the entropy strictly convex, so F_β is strictly convex
    when every pair term is λ ≥ 0 times a (conditionally) positive-definite kernel (Riesz with
    s ≥ −2, log, Coulomb, Gaussian; softened or not) and every measure term convex (the risk
    alignment, a square of a linear map).  Anything else (an attractive kernel such as
    :class:`~meanfield.kernels.Quadratic`, a kernel not in this list, the normalised
    alignment) is treated as possibly non-convex.  The statement is about the continuum
    functional; its cell-integrated discretisation can differ at the grid scale.

    Parameters
    ----------
    energy : Energy or GridEnergy
    grid : Grid, optional

    Returns
    -------
    (bool, str)
        Convex or not, and the term that breaks convexity ("" when convex).

    See Also
    --------
    second_variation_eigenvalue, minimiser_is_unique, gibbs_state

    References
    ----------
    - J. A. Carrillo, R. S. Gvalani, G. A. Pavliotis, A. Schlichting, "Long-time behaviour and phase
      transitions for the McKean–Vlasov equation on the torus", Arch. Ration. Mech. Anal. 235 (2020)
      635–690.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import DoubleWellPotential, Energy, PairInteraction
    >>> from meanfield.kernels import Quadratic, Riesz
    >>> from meanfield.pde import Grid
    >>> from meanfield.pde.stationary import flat_convexity
    >>> g = Grid(Box(1, 3.0), 16)
    >>> repulsive = PairInteraction(Riesz(0.0), 0.5)  # log kernel: positive definite
    >>> flat_convexity(Energy([DoubleWellPotential(), repulsive], g.domain), g)
    (True, '')
    >>> attractive = PairInteraction(Quadratic(), 0.5)
    >>> flat_convexity(Energy([DoubleWellPotential(), attractive], g.domain), g)
    (False, "pair term 'interaction': Quadratic() with lam=0.5 is not positive definite")
    """
    ge = _grid_energy(energy, grid)
    for name, (lam, conv) in ge.pair.items():
        k = conv.kernel
        if lam == 0 or _positive_definite(k):
            continue
        return False, f"pair term {name!r}: {k!r} with lam={lam:g} is not positive definite"
    for name, t in ge.measure.items():
        if isinstance(t, RiskAlignment) and not isinstance(t, NormalisedAlignment):
            continue
        return False, f"measure term {name!r} ({type(t).__name__}) is not known to be convex"
    return True, ""


def _positive_definite(kernel) -> bool:
    """A kernel known to be (conditionally) positive definite: Gaussian, Riesz with s ≥ −2."""
    return isinstance(kernel, Gaussian) or (isinstance(kernel, Riesz) and kernel.s >= -2)


def _hessian_product(ge: GridEnergy, rho: np.ndarray):
    """v ↦ H_E v with H_E = ∂²E_h/∂w² at ρ (v: flat cell masses): the pair terms exactly
    (their potential is linear in ρ), measure terms by central differences of their potential."""
    vol, shape = ge.grid.cell_volume, ge.grid.shape
    rho_max = float(rho.max())

    def apply(v):
        dr = v.reshape(shape) / vol
        out = np.zeros(shape)
        for lam, conv in ge.pair.values():
            out += 2.0 * lam * conv(dr)
        if ge.measure:
            # step so that the perturbed density moves by 1e-4 max ρ: central-difference error
            # ~1e-8 relative for a smooth term
            t = 1e-4 * rho_max / max(float(np.abs(dr).max()), 1e-300)
            up, down = ge.potentials(rho + t * dr), ge.potentials(rho - t * dr)
            for name in ge.measure:
                out += (up[name] - down[name]) / (2 * t)
        return out.ravel()

    return apply


def second_variation_eigenvalue(energy, grid: Grid | None, rho, beta: float) -> float:
    r"""σ_min: the smallest eigenvalue of the second variation of F_β at ρ on mass-zero
    perturbations, measured against the entropy's second variation.

    In the cell masses w = ρ|C|, δ²F_β[v] = β⁻¹ Σ v_i²/w_i + vᵀ H_E v with H_E = ∂²E_h/∂w²,
    and

    .. math::

        \sigma_{\min} = \min_{\sum_i v_i = 0}
        \frac{\beta^{-1} \sum_i v_i^2 / w_i + v^\top H_E v}{\beta^{-1} \sum_i v_i^2 / w_i}
        = 1 - \mu_{\max},

    μ_max the largest eigenvalue of the linearised self-consistency map
    v ↦ −β w (H_E v − ⟨H_E v⟩_w) (the derivative of ρ ↦ G(ρ) on mass-zero perturbations).
    σ_min > 0: a strict local minimiser (linearly stable for the McKean–Vlasov flow);
    σ_min < 0: a saddle.  Dimensionless; 1 without interaction.

    Parameters
    ----------
    energy : Energy or GridEnergy
    grid : Grid or None
    rho : Density or array, shape ``grid.shape``
        A stationary state (the quantity is defined anywhere, but means stability only there).
    beta : float
        β > 0.

    Returns
    -------
    float

    See Also
    --------
    flat_convexity, StationaryState.stable
    meanfield.pde.branches.follow_branches : the stability along the branches.

    Notes
    -----
    Up to :data:`DENSE_SECOND_VARIATION_CELLS` cells the symmetric matrix
    I + β D^{1/2} H_E D^{1/2} (D = diag w) is built and restricted to the complement of √w by a
    Householder reflection; above, Lanczos (``scipy.sparse.linalg.eigsh``) from a fixed start.

    References
    ----------
    - J. Chayes, V. Panferov, "The McKean–Vlasov equation in finite volume", J. Stat. Phys. 138
      (2010) 351–380.
    - J. A. Carrillo, R. S. Gvalani, G. A. Pavliotis, A. Schlichting, "Long-time behaviour and phase
      transitions for the McKean–Vlasov equation on the torus", Arch. Ration. Mech. Anal. 235 (2020)
      635–690.

    Examples
    --------
    The granular-media model (double well, attractive quadratic interaction θ = 1) at β = 3
    (above β_c ≈ 2.19): the symmetric state is a saddle, the ordered one a minimiser.

    >>> import warnings
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import DoubleWellPotential, Energy, PairInteraction
    >>> from meanfield.kernels import Quadratic
    >>> from meanfield.pde import Grid, gibbs_state
    >>> from meanfield.pde.stationary import second_variation_eigenvalue
    >>> g = Grid(Box(1, 3.0), 64)
    >>> E = Energy([DoubleWellPotential(), PairInteraction(Quadratic(), lam=0.5)], g.domain)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")  # it warns: the state found is a saddle
    ...     sym, _ = gibbs_state(E, g, 3.0, search="single")  # from the uniform start
    >>> sigma = second_variation_eigenvalue(E, g, sym, 3.0)
    >>> # the quadratic kernel is rank one on mass-zero perturbations: σ_min = 1 − βθ Var_w(x),
    >>> # the variance of the cell masses w at the centres (here the mean is 0)
    >>> var = float((sym.masses * g.axes[0] ** 2).sum())
    >>> round(sigma, 4), round(1 - 3.0 * 1.0 * var, 4)
    (-0.1708, -0.1708)
    """
    ge = _grid_energy(energy, grid)
    beta = check_positive("beta (inverse temperature)", beta)
    rho = rho.data if isinstance(rho, Density) else np.asarray(rho, dtype=float)
    w = rho.ravel() * ge.grid.cell_volume
    M = w.size
    if M < 2:
        raise InputError("the second variation needs a grid of at least 2 cells")
    root = np.sqrt(np.maximum(w, 0.0))
    s = root / math.sqrt(float(np.sum(root * root)))
    H = _hessian_product(ge, rho)

    def A(u):
        return u + beta * root * H(root * u)

    if M <= DENSE_SECOND_VARIATION_CELLS:
        cols = np.empty((M, M))
        for i in range(M):
            e = np.zeros(M)
            e[i] = 1.0
            cols[:, i] = A(e)
        mat = 0.5 * (cols + cols.T)
        # Householder reflection P (P s = ∓e_0): P mat P restricted to indices 1..M−1 is the
        # form on the complement of s, the mass-zero perturbations
        u = s.copy()
        u[0] += math.copysign(1.0, s[0])
        u /= math.sqrt(float(np.sum(u * u)))
        mu = mat @ u
        kappa = float(np.sum(u * mu))
        red = mat - 2 * np.outer(u, mu) - 2 * np.outer(mu, u) + 4 * kappa * np.outer(u, u)
        return float(np.linalg.eigvalsh(red[1:, 1:])[0])

    def proj(u):
        return u - s * float(np.sum(s * u))

    v0 = proj(np.random.default_rng(0).standard_normal(M))
    # the s direction gets an eigenvalue above the Rayleigh quotient of v0 (≥ σ_min), so the
    # smallest eigenvalue of the shifted operator is σ_min
    shift = 1.0 + abs(float(np.sum(v0 * A(v0))) / float(np.sum(v0 * v0)))

    def op(u):
        return proj(A(proj(u))) + shift * s * float(np.sum(s * u))

    lin = LinearOperator((M, M), matvec=op, dtype=float)
    try:
        vals = eigsh(lin, k=1, which="SA", v0=v0, tol=1e-10, maxiter=20 * M)
    except ArpackNoConvergence as exc:  # pragma: no cover - ARPACK failure
        raise ConvergenceError(f"second variation: Lanczos did not converge ({exc})") from exc
    return float(vals[0][0])


def _classify(sigma: float | None) -> str:
    if sigma is None or sigma > MARGINAL_EIGENVALUE:
        return "stable"
    return "unstable" if sigma < -MARGINAL_EIGENVALUE else "marginal"


def _tilted_starts(ge: GridEnergy, beta: float, mass: float, tilt: float) -> list:
    """(label, density) starts: exp(−βU_ext) ("boltzmann") and exp(−β(U_ext ∓ h x_d)) with
    β h R_d = ``tilt`` along every axis d ("tilt+x1", "tilt-x1", ...)."""
    U = ge.external
    starts = [("boltzmann", _gibbs(ge, U, beta, mass))]
    for d in range(ge.grid.dim):
        x = ge.grid.mesh[d] if ge.grid.dim > 1 else ge.grid.axes[0]
        lo, hi = float(ge.grid.edges[d][0]), float(ge.grid.edges[d][-1])
        xc = x - 0.5 * (lo + hi)
        h = tilt / (beta * 0.5 * (hi - lo))
        for sign, label in ((1.0, "+"), (-1.0, "-")):
            starts.append((f"tilt{label}x{d + 1}", _gibbs(ge, U - sign * h * xc, beta, mass)))
    return starts


def _same_state(a: np.ndarray, b: np.ndarray, vol: float, mass: float, tol: float) -> bool:
    return float(np.sum(np.abs(a - b))) * vol <= SAME_STATE_L1 * mass * max(1.0, 1e4 * tol)


def _minimum_first(states: list) -> list:
    """Order states by free energy; states within :data:`EQUAL_FREE_ENERGY` of the current
    minimum keep their discovery order, so the order (and the state returned) does not
    depend on round-off between mirror images."""
    rest, out = list(states), []
    while rest:
        F_min = min(st.free_energy for st in rest)
        tie = EQUAL_FREE_ENERGY * (1 + abs(F_min))
        pick = next(st for st in rest if st.free_energy <= F_min + tie)
        out.append(pick)
        rest.remove(pick)
    return out


def _search_states(ge, starts, beta, method, mass, damping, tol, max_iter, *, stability=True):
    """Solve from every (label, density) start; returns (states, reports, failed) with
    ``states`` the distinct converged states (min-first), ``reports`` the report of the
    solve that first found each (same order) and ``failed`` the (label, report) pairs of
    unconverged solves."""
    solver = _picard_gibbs if method == "picard" else _newton_gibbs
    vol = ge.grid.cell_volume
    found, failed = [], []  # found: [out, report, labels]
    for label, start in starts:
        history = []
        out, iters, converged, msg = solver(ge, start, beta, mass, damping, tol, max_iter, history)
        report = _report(method, converged, iters, history, ge.free_energy(out, beta), msg)
        if not converged:
            failed.append((label, report, out))
            continue
        for entry in found:
            if _same_state(entry[0], out, vol, mass, tol):
                entry[2].append(label)
                break
        else:
            found.append([out, report, [label]])
    states = []
    for out, report, labels in found:
        sigma = second_variation_eigenvalue(ge, None, out, beta) if stability else None
        rho = Density(ge.grid, out)
        mean = np.asarray(rho.mean, dtype=float) / mass
        F, stability, res = report.free_energy, _classify(sigma), report.residual
        states.append(StationaryState(rho, F, sigma, stability, mean, tuple(labels), res))
    order = _minimum_first(states)
    reports = [found[states.index(st)][1] for st in order]
    return order, reports, failed


def minimiser_is_unique(states) -> bool:
    """False when two or more of ``states`` share the lowest free energy (within
    :data:`EQUAL_FREE_ENERGY`), as the ordered states ±m* of a symmetric model do.

    Parameters
    ----------
    states : sequence of StationaryState
        As ``report.states`` of :func:`gibbs_state`.

    Returns
    -------
    bool

    See Also
    --------
    gibbs_state, flat_convexity

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde import Density, Grid
    >>> from meanfield.pde.stationary import StationaryState, minimiser_is_unique
    >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
    >>> a = StationaryState(rho, -1.0, 0.5, "stable", np.array([0.5]), ("tilt+x1",), 0.0)
    >>> b = StationaryState(rho, -1.0, 0.5, "stable", np.array([-0.5]), ("tilt-x1",), 0.0)
    >>> minimiser_is_unique([a]), minimiser_is_unique([a, b])
    (True, False)
    """
    if not states:
        return True
    F_min = min(st.free_energy for st in states)
    tie = EQUAL_FREE_ENERGY * (1 + abs(F_min))
    return sum(st.free_energy <= F_min + tie for st in states) == 1


def _several_states_message(states, beta: float) -> str:
    lines = "; ".join(f"[{i}] {st}" for i, st in enumerate(states))
    head = (
        f"gibbs_state found {len(states)} distinct stationary states at beta={beta:g}; the "
        "density returned is the one of lowest free energy ([0])"
    )
    if not minimiser_is_unique(states):
        head += (
            "; the minimiser is NOT unique: several states share the lowest free energy "
            "(e.g. mirror images), so the N-particle Gibbs law does not concentrate on one state"
        )
    return f"{head}. States: {lines}. All are in report.states."


@declare(
    RUN_PARAMS["beta"],
    Param("method", "choice", "fixed-point solver", choices=("picard", "newton")),
    Param("mass", "real", "total mass (1 for a probability density)", low=0.0, low_open=True),
    Param("damping", "real", "initial Picard damping alpha", low=0.0, high=1.0, low_open=True),
    Param("tol", "real", "stop at this relative residual", low=0.0, low_open=True),
    Param("max_iter", "int", "iterations per start", low=1),
    Param("search", "choice", "one start, several (symmetry-broken) starts, or by convexity",
          choices=("auto", "single", "multi")),
    Param("tilt", "real", "beta h R_d of the tilted starts", low=0.0, low_open=True),
)  # fmt: skip
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
    search: str = "auto",
    tilt: float = DEFAULT_TILT,
) -> tuple:
    r"""The self-consistent Gibbs state ρ = Z⁻¹ exp(−β δE/δρ[ρ]) on a grid: the minimiser of
    F_β among the stationary states found.

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
        Initial guess (default uniform); with ``search="multi"`` one start among several.
    mass : float
        Total mass (1 for a probability density).
    damping : float in (0, 1]
        Initial Picard damping α.
    tol : float
        Stop when the residual max_i |G(ρ)_i − ρ_i| / max_i G(ρ)_i ≤ tol (Picard) or
        max_i |φ_i − log G_i| ≤ tol (Newton; a relative density error).
    max_iter : int
        Iterations per start.
    search : {"auto", "single", "multi"}
        ``single``: one solve from ``rho0``; when F_β is not known to be convex
        (:func:`flat_convexity`) the state's stability is computed and a saddle is warned
        about.  ``multi``: solves from ``rho0`` (or uniform), the Boltzmann density
        e^{−βU_ext} of the one-body terms and the tilted starts e^{−β(U_ext ∓ h x_d)} along
        every axis; each distinct state is classified by its free energy and σ_min
        (:func:`second_variation_eigenvalue`).  ``auto`` (default): ``single`` when F_β is
        strictly convex (its unique critical point), ``multi`` otherwise.
    tilt : float
        β h R_d of the tilted starts (R_d the half-width of axis d), > 0.

    Returns
    -------
    (Density, StationaryReport)
        The state of lowest free energy found, exactly of Gibbs form; ``report.states`` lists
        every distinct state found as :class:`StationaryState` (lowest free energy first, the
        first being the density returned); the report's other fields describe its solve.

    Raises
    ------
    meanfield.errors.InputError
        ``search`` not one of the choices, ``tilt`` not > 0, or another option out of range.

    Warns
    -----
    meanfield.errors.ConvergenceWarning
        No start converged (then ``report.converged`` is False and the density is the last
        iterate of the start of lowest free energy, not a stationary state).
    meanfield.errors.MultipleStationaryStatesWarning
        Several distinct stationary states were found, or the minimiser is not unique (two
        states of equal free energy), or (``search="single"``) the one state found is
        unstable.

    See Also
    --------
    meanfield.pde.branches.follow_branches : the states followed in β (bifurcation diagram).
    second_variation_eigenvalue, flat_convexity, equilibrium_measure
    meanfield.dynamics.langevin.simulate : the particle view, whose chains sample ρ_β.
    meanfield.pde.solver.solve : the McKean–Vlasov flow that relaxes to ρ_β.
    meanfield.ot.distance.wasserstein : the transport view (particles against ρ_β).

    Notes
    -----
    The Gibbs state is a critical point of the free energy F_β = E + β⁻¹ ∫ ρ log ρ:

    .. math::

        \rho = G(\rho) = \frac{m}{Z} \exp\left(-\beta \frac{\delta E}{\delta \rho}[\rho]\right),
        \qquad Z = \sum_i |C| \exp\left(-\beta \frac{\delta E}{\delta \rho}[\rho]_i\right).

    Critical points can be several when the interaction is attractive
    (:doc:`/stationary_states`); a fixed point iteration from a symmetric start stays
    symmetric even where the symmetric state is a saddle, hence the symmetry-broken starts.
    A search finds the states whose basins its starts lie in, not a proof there are no others.

    References
    ----------
    .. [0] J. A. Carrillo, R. J. McCann, C. Villani, "Kinetic equilibration rates for granular
       media and related equations", Rev. Mat. Iberoamericana 19 (2003) 971–1018.
    .. [1] D. A. Dawson, "Critical dynamics and fluctuations for a mean-field model of
       cooperative behavior", J. Stat. Phys. 31 (1983).
    .. [2] J. Tugaut, "Phase transitions of McKean–Vlasov processes in double-wells landscape",
       Stochastics 86 (2014).

    Examples
    --------
    V = x²/2 with the repulsion λ = 1/2, k = −|x| at β = 2 (F_β convex: one state): the two
    methods agree, and the state is symmetric and wider than the Gibbs state N(0, 1/β) of V
    alone:

    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.pde import Grid, gibbs_state
    >>> g = Grid(Box(1, 5.0), 64)
    >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], g.domain)
    >>> rho, report = gibbs_state(E, g, beta=2.0)
    >>> report.converged, report.residual <= 1e-12, len(report.states)
    (True, True, 1)
    >>> newton, _ = gibbs_state(E, g, beta=2.0, method="newton")
    >>> bool(np.allclose(newton.data, rho.data, atol=1e-10))
    True
    >>> abs(float(rho.mean[0])) < 1e-12, round(float(rho.covariance[0, 0]), 2)
    (True, 1.1)

    The granular-media model (double well, attractive W = θx²/2 with θ = 1, i.e. λ = θ/2) at
    β = 3 > β_c ≈ 2.188: two ordered minimisers ±m* and the symmetric saddle.

    >>> import warnings
    >>> from meanfield.energy import DoubleWellPotential
    >>> from meanfield.errors import MultipleStationaryStatesWarning
    >>> from meanfield.kernels import Quadratic
    >>> g = Grid(Box(1, 3.0), 128)
    >>> E = Energy([DoubleWellPotential(), PairInteraction(Quadratic(), lam=0.5)], g.domain)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     rho, report = gibbs_state(E, g, 3.0)
    >>> caught[0].category is MultipleStationaryStatesWarning
    True
    >>> [(round(float(st.mean[0]), 6) + 0.0, st.stability) for st in report.states]
    [(0.637324, 'stable'), (-0.637324, 'stable'), (0.0, 'unstable')]
    >>> round(report.free_energy, 6), round(report.states[2].free_energy, 6)
    (-0.237969, -0.22222)
    """
    ge = _grid_energy(energy, grid)
    beta, mass, damping, tol, max_iter = _gibbs_options(beta, method, mass, damping, tol, max_iter)
    check_choice("search", search, ("auto", "single", "multi"))
    tilt = check_positive("tilt", tilt)
    convex, _ = flat_convexity(ge)
    # σ_min is computed unless F_β is convex and the caller left the search to "auto"/"single"
    with_stability = not convex or search == "multi"
    if search == "auto":
        # strictly convex F_β: the unique critical point is the minimiser, one start finds it
        search = "single" if convex else "multi"
    first = ("rho0" if rho0 is not None else "uniform", _initial(ge, rho0, mass))
    starts = [first] if search == "single" else [first, *_tilted_starts(ge, beta, mass, tilt)]
    states, reports, failed = _search_states(
        ge, starts, beta, method, mass, damping, tol, max_iter, stability=with_stability
    )
    advice = (
        "raise max_iter or use method='newton'"
        if method == "picard"
        else "raise max_iter or start from a closer rho0"
    )
    if not states:
        label, report, out = min(failed, key=lambda f: f[1].free_energy)
        _warn_unconverged("gibbs_state", report, tol, advice)
        return Density(ge.grid, out), report
    report = reports[0]
    if search == "multi":
        report.message += f"; search over {len(starts)} starts: {len(states)} distinct states"
        if failed:
            report.message += f" ({len(failed)} starts did not converge)"
    report.states = tuple(states)
    if len(states) > 1 or not minimiser_is_unique(states):
        warnings.warn(
            _several_states_message(states, beta), MultipleStationaryStatesWarning, stacklevel=3
        )  # the caller, past the contract wrapper
    elif not states[0].stable and search == "single":
        warnings.warn(
            f"gibbs_state: the state found is {states[0].stability} (sigma_min = "
            f"{states[0].min_eigenvalue:.4g} <= 0): a saddle of F_beta, so stationary states of "
            "lower free energy exist; use search='multi' (or meanfield.pde.branches) to find "
            "them",
            MultipleStationaryStatesWarning,
            stacklevel=3,
        )
    return states[0].density, report


@declare(
    Param("mass", "real", "total mass", low=0.0, low_open=True),
    Param("tol", "real", "success at this Frank-Wolfe gap", low=0.0, low_open=True,
          units="energy"),
    Param("max_iter", "int", "FISTA iterations (both phases together)", low=1),
    Param("warm_tol", "real", "gap at which FISTA hands over to the active set", low=0.0,
          low_open=True, units="energy"),
    Param("max_active_set", "int", "active-set iterations", low=0),
    Param("minres_maxiter", "int", "conjugate-gradient iterations per KKT solve", low=1),
)  # fmt: skip
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
    FISTA, then by an active-set method on its support (:mod:`meanfield.pde.simplex_qp`).

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
        Conjugate-gradient iterations per KKT solve (named after the MINRES solver it replaced).

    Returns
    -------
    (Density, StationaryReport)
        ``residual`` is the final Frank–Wolfe gap; ``free_energy`` is E(μ*).

    Raises
    ------
    meanfield.errors.InputError
        An attractive pair part, before any work: a term with λ < 0, or λ > 0 times
        :class:`~meanfield.kernels.Cosine` or :class:`~meanfield.kernels.Quadratic` (concave
        along the mean) with no positive-definite pair term (Riesz s ≥ −2, Gaussian) beside
        it: the problem is then not convex.

    Warns
    -----
    meanfield.errors.ConvergenceWarning
        The gap is above ``tol`` when the iterations run out (``report.converged`` False).

    See Also
    --------
    gibbs_state : the stationary state at finite β (ρ_β → μ* as β → ∞).
    meanfield.closed_forms.equilibrium_case : the exact equilibria of THEORY §5.
    meanfield.dynamics.hmc.sample_hmc : the particle view (Coulomb-gas regime, β_N = β N).

    Notes
    -----
    In the cell masses w_i = ρ_i |C|, with g = ∂E/∂w = δE/δρ,

    .. math::

        \min_{w \ge 0,\ \sum_i w_i = m} E(w), \qquad
        G(w) = \sum_i w_i g_i - m \min_i g_i \ge E(w) - E(\mu^*).

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
      Mathematics, EMS, 2015.
    - E. B. Saff, V. Totik, *Logarithmic Potentials with External Fields*, Springer, 1997.

    Examples
    --------
    V = x²/2, λ = 1/2, k = −|x| in p = 1: μ* is uniform on [−1, 1] (density 1/2,
    variance 1/3) with E(μ*) = 1/6 − 1/3 = −1/6 (THEORY §5, :mod:`meanfield.closed_forms`):

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
    >>> round(float(mu.covariance[0, 0]), 6), round(report.free_energy, 3)
    (0.333333, -0.167)
    """
    attractive = [t for t in energy.terms if t.kind == "pair" and getattr(t, "lam", 0.0) < 0]
    if attractive:
        # the quadratic programme is then not convex: a local minimiser could be returned as
        # converged, and the minimiser may concentrate below the grid's cell (Keller–Segel)
        raise InputError(
            f"equilibrium_measure needs repulsive pair terms (lam >= 0), got lam="
            f"{attractive[0].lam:g}: the beta = inf problem with attraction is not convex and "
            "its minimiser may concentrate below the grid scale; use gibbs_state at finite "
            "beta or the particles"
        )
    pair = [t for t in energy.terms if t.kind == "pair" and getattr(t, "lam", 0.0) > 0]
    concave = [t for t in pair if isinstance(getattr(t, "kernel", None), (Cosine, Quadratic))]
    if concave and not any(_positive_definite(t.kernel) for t in pair):
        # λ > 0 times k = −cos (Kuramoto: E = −λ|∫e^{iθ}|²) or k = |z|²/2 (E = λ(∫|x|² −
        # |∫x|²)) is attraction too, concave along the mean: without a positive-definite pair
        # term the QP is not convex and a maximiser (uniform on the torus) could be returned
        raise InputError(
            f"equilibrium_measure needs positive-definite pair kernels for lam > 0, got "
            f"{concave[0].kernel!r} with lam={concave[0].lam:g}, an attraction whose beta = inf "
            "problem is not convex (its minimiser concentrates on a point); use gibbs_state "
            "at finite beta or the particles"
        )
    ge = _grid_energy(energy, grid)
    qp = _SimplexQP(ge, check_positive("mass", mass))
    stop = _QPStopping(tol, warm_tol, max_iter, max_active_set, minres_maxiter)
    w0 = _initial(ge, rho0, qp.mass).ravel() * qp.vol
    w, E_w, L, converged = _minimise_on_simplex(qp, w0, stop)
    message = "; ".join(qp.phases) + f"; Lipschitz estimate L={L:.3g}"
    report = _report("fista+active-set", converged, len(qp.history), qp.history, E_w, message)
    _warn_unconverged("equilibrium_measure", report, tol, "raise max_iter or max_active_set")
    return Density(ge.grid, qp.density(w)), report
