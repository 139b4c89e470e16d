r"""The Scharfetter–Gummel (Chang–Cooper) exponential-fitting scheme, explicit or implicit,
and the sparse generator and solves of its implicit steps.

J_{i+½} = (D/h) [B(a) ρ_i − B(−a) ρ_{i+1}],  a = β (U_{i+1} − U_i),  B(z) = z/(eᶻ − 1):
exact for the face's 1D drift-diffusion with U linear across it.  Zero flux exactly at
ρ ∝ exp(−βU), so the discrete Gibbs state is a steady state to round-off; the relative
entropy to it never increases (a monotone Markov generator).  Explicit under
Δt ≤ 1/max_i Σ_faces D B(±a)/h² (the positivity bound, which includes the parabolic one), or
implicit Euler (an M-matrix solve, positive for every Δt: the option for stiff diffusion),
with U lagged at the old time, where Δt only needs the drift's CFL bound.

References
----------
D. L. Scharfetter, H. K. Gummel, "Large-signal analysis of a silicon Read diode
oscillator", IEEE Trans. Electron Devices 16 (1969) 64–77.
J. S. Chang, G. Cooper, "A practical difference scheme for Fokker–Planck equations",
J. Comput. Phys. 6 (1970) 1–16.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from ...errors import NumericalError
from .. import _kernels
from ..grid import Grid
from .base import Scheme, _left, _right, scatter_faces, scatter_periodic_faces


def bernoulli(z):
    r"""B(z) = z / (eᶻ − 1), with B(0) = 1; B(z) → 0 for z → +inf and B(z) ≈ −z for z → −inf.

    .. math::

        B(z) = \frac{z}{e^z - 1}, \qquad B(-z) = z + B(z).

    Parameters
    ----------
    z : array_like
        Arguments (dimensionless: β times a potential difference).

    Returns
    -------
    numpy.ndarray
        B(z), same shape as ``z``, ≥ 0 (no overflow warning for large ``|z|``).

    See Also
    --------
    ScharfetterGummel.face_rates : the face rates built from B.
    generator_matrix : the generator of those rates.

    References
    ----------
    - D. L. Scharfetter, H. K. Gummel, "Large-signal analysis of a silicon Read diode oscillator",
      IEEE Trans. Electron Devices 16 (1969) 64–77.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.pde.schemes import bernoulli
    >>> bernoulli([0.0, 1.0, 800.0])
    array([1.        , 0.58197671, 0.        ])
    >>> bool(np.isclose(bernoulli(-1.0), 1.0 + bernoulli(1.0)))  # B(-z) = z + B(z)
    True
    """
    z = np.asarray(z, dtype=float)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = z / np.expm1(z)
    out = np.where(z == 0, 1.0, out)
    return np.where(np.isnan(out) & (z > 0), 0.0, out)


class ScharfetterGummel(Scheme):
    r"""Scharfetter–Gummel (Chang–Cooper) exponentially fitted flux, explicit or implicit.

    Parameters
    ----------
    implicit : bool
        False: forward Euler under the positivity bound.  True: implicit Euler for the linear
        drift-diffusion with U frozen at the old time (unconditionally positive; the time step
        is then bounded only by the drift's CFL number, see :meth:`stable_dt`).

    See Also
    --------
    ScharfetterGummelMPRK : the same fluxes, second order in time.
    meanfield.pde.schemes.UpwindScheme : the upwind scheme of the same equation.

    Notes
    -----
    The implicit solve (:func:`implicit_solve`) is an M-matrix solve: Thomas' algorithm
    without subtractions in 1D (cost O(M), positive and mass-conserving in floating point);
    in 2D and 3D a sparse LU without pivoting (a symmetric fill-reducing permutation keeps
    the M-matrix signs, so the triangular solves only add non-negative numbers).

    The face flux, with D = β⁻¹, a = β (U_{i+1} − U_i) and B the :func:`bernoulli` function, is

    .. math::

        J_{i+1/2} = \frac{D}{h} \left[ B(a)\, \rho_i - B(-a)\, \rho_{i+1} \right],

    zero when ρ_{i+1}/ρ_i = e^{−a}: the discrete Gibbs state is exactly steady.

    References
    ----------
    - D. L. Scharfetter, H. K. Gummel, "Large-signal analysis of a silicon Read diode
      oscillator", IEEE Trans. Electron Devices 16 (1969) 64–77.
    - J. S. Chang, G. Cooper, "A practical difference scheme for Fokker–Planck equations",
      J. Comput. Phys. 6 (1970) 1–16.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.schemes import ScharfetterGummel
    >>> from meanfield.pde.grid import Grid
    >>> g = Grid(Box(1, 1.0), 8)
    >>> U, beta = 0.5 * g.centers[:, 0] ** 2, 2.0
    >>> gibbs = np.exp(-beta * U)
    >>> sg = ScharfetterGummel().bind(g, beta)
    >>> bool(np.abs(sg.rate(gibbs, U)).max() < 1e-12)
    True
    >>> A = sg.matrix(U)  # a generator: columns sum to zero
    >>> A.shape, bool(abs(A.sum(axis=0)).max() < 1e-12)
    ((8, 8), True)
    >>> rho = np.ones(8)
    >>> new = ScharfetterGummel(implicit=True).bind(g, beta).advance(rho, U, dt=10.0)
    >>> bool(new.min() > 0), round(float(new.sum()), 12)  # any dt: positive, mass kept
    (True, 8.0)
    """

    #: Order of the time integration (forward or backward Euler).
    time_order = 1

    def __init__(self, implicit: bool = False):
        self.implicit = bool(implicit)
        self.name = "sg-implicit" if self.implicit else "sg"
        self._cache = None

    @property
    def supports_periodic(self) -> bool:
        """The explicit scheme has periodic faces; the implicit solves (banded and sparse
        factorisations of a non-periodic generator) do not.

        See Also
        --------
        meanfield.pde.schemes.Scheme.bind : refuses a torus grid when False.

        Examples
        --------
        >>> sg = ScharfetterGummel
        >>> sg().supports_periodic, sg(implicit=True).supports_periodic
        (True, False)
        """
        return not self.implicit

    def _coefficients(self, U, a):
        """Rates (c_lr, c_rl) per face: out of the left cell c_lr ρ_L, out of the right c_rl ρ_R.

        One exponential per face: with b = B(|z|), B(z) = b for z ≥ 0 and |z| + b for z < 0
        (the identity B(−z) = z + B(z) applied without cancellation), so both are ≥ 0.
        """
        grid, beta = self.grid, self.beta
        p = grid.dim
        if grid.periodic:  # face i + ½ joins cell i and cell (i + 1) mod n: n faces
            z = beta * (np.roll(U, -1, a) - U)
        else:
            z = beta * (U[_right(a, p)] - U[_left(a, p)])
        az = np.abs(z)
        b = bernoulli(az)
        scale = 1.0 / (beta * grid.h[a] ** 2)
        big = az + b
        return scale * np.where(z >= 0, b, big), scale * np.where(z >= 0, big, b)

    def face_rates(self, U) -> list:
        r"""Per axis, the rates (1/time) at which mass leaves the left and the right cell of a face.

        .. math::

            c_{lr} = \frac{B(a)}{\beta h^2}, \qquad c_{rl} = \frac{B(-a)}{\beta h^2}, \qquad
            a = \beta (U_{i+1} - U_i).

        Parameters
        ----------
        U : numpy.ndarray, shape ``grid.shape``

        Returns
        -------
        list of (numpy.ndarray, numpy.ndarray)
            ``[(c_lr, c_rl) for each axis]``, shape ``grid.shape`` less one along the axis.

        See Also
        --------
        bernoulli : the weights of the rates.
        generator_matrix : the generator they make.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> [(c_lr, c_rl)] = ScharfetterGummel().bind(g, 1.0).face_rates(np.zeros(4))
        >>> c_lr, c_rl  # U = 0: pure diffusion, D/h² both ways
        (array([4., 4., 4.]), array([4., 4., 4.]))
        """
        return [self._coefficients(U, a) for a in range(self.grid.dim)]

    def _face_data(self, U):
        """Face coefficients per axis and the largest exit rate, cached for the last U.

        The solver passes the same U object while it does not depend on ρ (one-body terms
        only), so the exponentials are then computed once per run.
        """
        if self._cache is not None and self._cache[0] is U:
            return self._cache[1]
        grid = self.grid
        coeffs, exit_rate = self.face_rates(U), np.zeros(grid.shape)
        for a, (c_lr, c_rl) in enumerate(coeffs):
            if grid.periodic:
                exit_rate += c_lr + np.roll(c_rl, 1, a)
                continue
            exit_rate[_left(a, grid.dim)] += c_lr
            exit_rate[_right(a, grid.dim)] += c_rl
        data = (coeffs, float(exit_rate.max()))
        self._cache = (U, data)
        return data

    def prepare(self, rho, U, nonlocal_rate=0.0):
        """(out, in, stable Δt) from one evaluation of the face coefficients.

        Implicit: ``(None, None, stable Δt)`` (the solve needs no flows).  Parameters as in
        :meth:`Scheme.prepare`.

        See Also
        --------
        meanfield.pde.schemes.Scheme.prepare

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> U, rho = g.centers[:, 0], np.full(4, 0.5)  # a linear potential, uniform ρ
        >>> out, inn, dt = ScharfetterGummel(implicit=True).bind(g, 1.0).prepare(rho, U)
        >>> out, inn, dt  # the drift's CFL bound h² / max|ΔU| = 1/2
        (None, None, 0.5)
        """
        if self.implicit:
            return None, None, self.stable_dt(rho, U, None, nonlocal_rate)
        out, inn = self.flows(rho, U)
        r = max(self._face_data(U)[1], nonlocal_rate)
        return out, inn, (math.inf if r == 0 else 1.0 / r)

    def flows(self, rho, U):
        p = self.grid.dim
        out = np.zeros_like(rho)
        inn = np.zeros_like(rho)
        for a, (c_lr, c_rl) in enumerate(self._face_data(U)[0]):
            if self.grid.periodic:
                scatter_periodic_faces(out, inn, a, c_lr * rho, c_rl * np.roll(rho, -1, a))
                continue
            scatter_faces(out, inn, a, c_lr * rho[_left(a, p)], c_rl * rho[_right(a, p)])
        return out, inn

    def _exit_rates(self, U, drift_only: bool):
        grid = self.grid
        p = grid.dim
        total = np.zeros(grid.shape)
        for a in range(p):
            if drift_only:
                dU = U[_right(a, p)] - U[_left(a, p)]
                h = grid.h[a]
                c_lr, c_rl = np.maximum(-dU, 0.0) / h**2, np.maximum(dU, 0.0) / h**2
            else:
                c_lr, c_rl = self._face_data(U)[0][a]
            total[_left(a, p)] += c_lr
            total[_right(a, p)] += c_rl
        return total

    def stable_dt(self, rho, U, out=None, nonlocal_rate=0.0):
        """Explicit: 1 / max_i (exit rate of cell i).  Implicit: the same for the drift alone.

        Both are further bounded by 1/nonlocal_rate.  The explicit bound makes the step for a
        frozen U a Markov (stochastic, non-negative) matrix, hence positive and, with
        ρ ∝ e^(−βU) its fixed point, non-increasing in relative entropy.  The implicit step is
        positive for any Δt; the drift bound keeps the lagged potential U[ρⁿ] accurate (a
        Courant number ≤ 1 for the velocity −∇U).  Parameters as in :meth:`Scheme.stable_dt`.

        See Also
        --------
        meanfield.pde.schemes.Scheme.stable_dt

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> U, rho = g.centers[:, 0], np.full(4, 0.5)  # a linear potential, uniform ρ
        >>> round(ScharfetterGummel().bind(g, 1.0).stable_dt(rho, U), 4)
        0.1225
        >>> ScharfetterGummel(implicit=True).bind(g, 1.0).stable_dt(rho, U)
        0.5
        """
        if self.implicit:
            r = float(np.max(self._exit_rates(U, drift_only=True)))
        else:
            r = self._face_data(U)[1]  # cached with the face rates
        r = max(r, nonlocal_rate)
        return math.inf if r == 0 else 1.0 / r

    def matrix(self, U):
        """The generator A with dρ/dt = A ρ (see :func:`generator_matrix`).

        Parameters
        ----------
        U : numpy.ndarray, shape ``grid.shape``

        Returns
        -------
        scipy.sparse.csc_matrix, shape (M, M)
            Cells in flattened C order; off-diagonal ≥ 0, columns summing to zero.

        See Also
        --------
        generator_matrix
        meanfield.pde.equation.McKeanVlasov.operator

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> ScharfetterGummel().bind(g, 1.0).matrix(np.zeros(4)).toarray()  # the heat equation
        array([[-4.,  4.,  0.,  0.],
               [ 4., -8.,  4.,  0.],
               [ 0.,  4., -8.,  4.],
               [ 0.,  0.,  4., -4.]])
        """
        return generator_matrix(self._face_data(U)[0], self.grid)

    def advance(self, rho, U, dt, out=None, inn=None):
        """One step: forward Euler, or implicit Euler (I − Δt A) ρⁿ⁺¹ = ρⁿ (:func:`implicit_solve`).

        Parameters as in :meth:`Scheme.advance`; the implicit step ignores ``out`` and ``inn``.

        See Also
        --------
        implicit_solve : the implicit Euler solve.
        meanfield.pde.schemes.ScharfetterGummelMPRK.advance : the second-order step.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> U, rho = g.centers[:, 0], np.full(4, 0.5)  # a linear potential, uniform ρ
        >>> new = ScharfetterGummel(implicit=True).bind(g, 1.0).advance(rho, U, dt=100.0)
        >>> bool(new.min() > 0), round(g.integrate(new), 12), bool(np.all(np.diff(new) < 0))
        (True, 1.0, True)
        """
        if not self.implicit:
            return super().advance(rho, U, dt, out, inn)
        return implicit_solve(self._face_data(U)[0], self.grid, dt, rho)

    def advance_frozen(self, rho, U, dt, n_steps: int, last: float = 0.0):
        """``n_steps`` equal steps of size ``dt`` with U fixed, then one of size ``last`` if > 0.

        For a potential U independent of ρ.  In 1D the steps run in one compiled loop
        (:mod:`meanfield.pde._kernels`) that does the arithmetic of :meth:`advance` in the same
        order; in 2D/3D the implicit matrix is factored once for all the steps; explicit 2D/3D
        steps call :meth:`advance`.

        Parameters
        ----------
        rho, U
            As in :meth:`Scheme.flows`.
        dt : float
            Step size.
        n_steps : int
            Number of steps of size ``dt``.
        last : float, default 0.0
            A final shorter step, skipped if 0.

        Returns
        -------
        numpy.ndarray, shape ``grid.shape``

        See Also
        --------
        meanfield.pde.equation.McKeanVlasov.advance_frozen

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> U, rho = g.centers[:, 0], np.full(4, 0.5)  # a linear potential, uniform ρ
        >>> sg = ScharfetterGummel().bind(g, 1.0)
        >>> by_hand = sg.advance(sg.advance(rho, U, 0.1), U, 0.05)
        >>> bool(np.allclose(sg.advance_frozen(rho, U, 0.1, 1, last=0.05), by_hand))
        True
        """
        grid = self.grid
        if grid.dim == 1 and not grid.periodic:  # (the compiled loop has wall faces)
            ((c_lr, c_rl),), _ = self._face_data(U)
            kernel = _kernels.implicit_euler_steps if self.implicit else _kernels.explicit_steps
            return kernel(rho, c_lr, c_rl, float(dt), int(n_steps), float(last))
        if self.implicit and n_steps > 0:  # 2D/3D: one factorisation for every step
            coeffs = self._face_data(U)[0]
            lu = sparse_factor(coeffs, grid, dt)
            for _ in range(n_steps):
                rho = implicit_solve(coeffs, grid, dt, rho, lu)
        else:
            for _ in range(n_steps):
                rho = self.advance(rho, U, dt)
        return self.advance(rho, U, last) if last > 0 else rho


def generator_matrix(coeffs, grid: Grid):
    r"""The generator A (M × M, sparse CSC) of per-axis face rates [(c_lr, c_rl), ...].

    dρ/dt = A ρ on the C-order flattened grid; off-diagonal entries ≥ 0, columns sum to 0.

    .. math::

        (A\rho)_i = \sum_{j \sim i} \left(c_{j \to i}\, \rho_j - c_{i \to j}\, \rho_i\right).

    Parameters
    ----------
    coeffs : list of (numpy.ndarray, numpy.ndarray)
        Per axis, the rates (1/time) out of the left and the right cell of each face.
    grid : Grid

    Returns
    -------
    scipy.sparse.csc_matrix
        A, shape (M, M).

    See Also
    --------
    ScharfetterGummel.matrix : the generator at a potential U.
    implicit_solve : the implicit Euler step with it.
    meanfield.pde.equation.McKeanVlasov.operator : the equation's generator at ρ.

    References
    ----------
    - D. L. Scharfetter, H. K. Gummel, "Large-signal analysis of a silicon Read diode oscillator",
      IEEE Trans. Electron Devices 16 (1969) 64–77.
    - J. S. Chang, G. Cooper, "A practical difference scheme for Fokker–Planck equations", J.
      Comput. Phys. 6 (1970) 1–16.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.schemes import generator_matrix
    >>> from meanfield.pde.grid import Grid
    >>> g = Grid(Box(1, 1.0), 4)
    >>> A = generator_matrix([(np.ones(3), 2 * np.ones(3))], g)
    >>> A.toarray()
    array([[-1.,  2.,  0.,  0.],
           [ 1., -3.,  2.,  0.],
           [ 0.,  1., -3.,  2.],
           [ 0.,  0.,  1., -2.]])
    """
    p, M = grid.dim, grid.size
    index = np.arange(M).reshape(grid.shape)
    rows, cols, vals = [], [], []
    for a, (c_lr, c_rl) in enumerate(coeffs):
        if grid.periodic:  # face i + ½ joins cell i and cell (i + 1) mod n
            iL, iR = index.ravel(), np.roll(index, -1, a).ravel()
        else:
            iL, iR = index[_left(a, p)].ravel(), index[_right(a, p)].ravel()
        c_lr, c_rl = c_lr.ravel(), c_rl.ravel()
        rows += [iL, iR, iR, iL]
        cols += [iL, iL, iR, iR]
        vals += [-c_lr, c_lr, -c_rl, c_rl]
    A = sp.coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(M, M)
    )
    return A.tocsc()


def sparse_factor(coeffs, grid: Grid, dt: float):
    """SuperLU factors of I − Δt A (2D/3D): symmetric fill-reducing ordering, no pivoting.

    Parameters
    ----------
    coeffs : list of (numpy.ndarray, numpy.ndarray)
        Face rates per axis, as for :func:`generator_matrix`.
    grid : Grid
    dt : float
        Time step.

    Returns
    -------
    scipy.sparse.linalg.SuperLU
        Factors to pass as ``lu`` to :func:`solve_raw` or :func:`implicit_solve`.

    See Also
    --------
    solve_raw, implicit_solve : the solves that reuse the factors.
    generator_matrix : the A in I − Δt A.

    References
    ----------
    - X. S. Li, "An overview of SuperLU: algorithms, implementation, and user interface", ACM Trans.
      Math. Softw. 31 (2005) 302–325.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.schemes import ScharfetterGummel, sparse_factor
    >>> from meanfield.pde.grid import Grid
    >>> g = Grid(Box(2, 1.0), 4)
    >>> coeffs = ScharfetterGummel().bind(g, 1.0).face_rates(np.zeros(g.shape))
    >>> lu = sparse_factor(coeffs, g, 0.1)
    >>> lu.shape
    (16, 16)
    >>> np.allclose(lu.solve(np.ones(16)), 1.0)  # constants are steady for U = 0
    True
    """
    lhs = (sp.identity(grid.size, format="csc") - dt * generator_matrix(coeffs, grid)).tocsc()
    return splu(
        lhs, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True}
    )


def solve_raw(coeffs, grid: Grid, dt: float, rhs: np.ndarray, lu=None) -> np.ndarray:
    """The solve of :func:`implicit_solve` alone: no check, no mass correction.

    ``lu`` (2D/3D): factors from :func:`sparse_factor` for these rates and Δt, reused.

    See Also
    --------
    implicit_solve : the checked, mass-corrected solve.
    sparse_factor : factors to reuse in 2D and 3D.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.schemes import ScharfetterGummel, solve_raw
    >>> from meanfield.pde.grid import Grid
    >>> g = Grid(Box(1, 1.0), 8)
    >>> coeffs = ScharfetterGummel().bind(g, 1.0).face_rates(np.zeros(g.shape))
    >>> x = solve_raw(coeffs, g, 0.5, np.eye(8)[0])  # diffuse a unit mass from cell 0
    >>> bool(x.min() > 0), round(float(x.sum()), 12), bool(np.all(np.diff(x) < 0))
    (True, 1.0, True)
    """
    if grid.dim == 1:
        c_lr, c_rl = coeffs[0]
        return _kernels.mmatrix_solve(c_lr, c_rl, float(dt), rhs, np.empty_like(rhs))
    lu = sparse_factor(coeffs, grid, dt) if lu is None else lu
    return lu.solve(rhs.ravel()).reshape(grid.shape)


def implicit_solve(coeffs, grid: Grid, dt: float, rhs: np.ndarray, lu=None) -> np.ndarray:
    r"""Solve (I − Δt A) x = rhs for the generator A of the face rates ``coeffs``.

    I − Δt A is an M-matrix whose columns sum to 1, so x ≥ 0 and Σ x = Σ rhs in exact
    arithmetic.  1D: the subtraction-free Thomas algorithm (:func:`_kernels.mmatrix_solve`),
    O(M), x ≥ 0 in floating point and the mass kept to O(M ε) relative for every Δt.  2D/3D:
    SuperLU with a symmetric fill-reducing permutation and no pivoting (``SymmetricMode``,
    ``diag_pivot_thresh=0``): the LU factors of an M-matrix keep its signs, so the
    triangular solves only add non-negative terms and x ≥ 0 in floating point; the pivots
    are formed with subtractions, so the mass error grows like ε · cond(I − Δt A) and is
    removed by a rescaling of that size (cost O(M^{3/2}) in 2D and O(M²) in 3D with nested
    dissection, not linear).

    .. math::

        (I - \Delta t\, A)\, x = \mathrm{rhs}.

    Parameters
    ----------
    coeffs : list of (numpy.ndarray, numpy.ndarray)
        Face rates per axis, as for :func:`generator_matrix`.
    grid : Grid
    dt : float
        Time step (any value > 0).
    rhs : numpy.ndarray
        Right-hand side, grid shape (the old density).
    lu : scipy.sparse.linalg.SuperLU, optional
        2D/3D factors from :func:`sparse_factor`, reused.

    Returns
    -------
    numpy.ndarray
        x ≥ 0, grid shape, with the mass of ``rhs``.

    Raises
    ------
    NumericalError
        A negative entry (impossible for finite rates; a NaN or inf potential produces it).

    See Also
    --------
    solve_raw : the solve alone.
    ScharfetterGummel.advance : the implicit step that calls this.
    generator_matrix : the generator A.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.schemes import ScharfetterGummel, implicit_solve
    >>> from meanfield.pde.grid import Grid
    >>> g = Grid(Box(2, 1.0), 4)
    >>> U = g.mesh[0] + g.mesh[1]
    >>> coeffs = ScharfetterGummel().bind(g, 1.0).face_rates(U)
    >>> x = implicit_solve(coeffs, g, 1e3, np.ones(g.shape))
    >>> bool(x.min() >= 0), round(float(x.sum()), 9)
    (True, 16.0)
    >>> bool(x[0, 0] > x[-1, -1])  # mass moves down the potential
    True
    """
    out = solve_raw(coeffs, grid, dt, rhs, lu)
    if not (np.all(np.isfinite(out)) and out.min() >= 0.0):
        bad = int(np.sum(~(out >= 0.0)))
        raise NumericalError(
            f"implicit Scharfetter-Gummel step produced {bad} negative or non-finite cell(s); "
            "this cannot happen for finite rates: check U for NaN or inf"
        )
    if grid.dim > 1:
        total = out.sum()
        if total > 0:
            out *= rhs.sum() / total
    return out
