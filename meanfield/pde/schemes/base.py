"""The scheme protocol of the grid solver, and the face-to-cell scatter every scheme shares.

A :class:`Scheme` is made with its options alone and bound once to a grid and an inverse
temperature (:meth:`Scheme.bind`); the bound scheme's methods take the state (ρ, U) and the
step.  Every scheme moves mass only across interior faces, split into the part leaving the
left and the part leaving the right cell (:func:`scatter_faces`), so the forward-Euler step
ρ ← (ρ − Δt out) + Δt in stays positive and conserves mass to round-off.
"""

from __future__ import annotations

import copy

import numpy as np

from ..._validation import check_positive
from ...errors import InputError, InputTypeError
from ..grid import Grid

#: Smallest positive normal float: the floor under log ρ in the upwind scheme.
TINY = np.finfo(float).tiny


def _sl(a: int, s: slice, p: int) -> tuple:
    idx = [slice(None)] * p
    idx[a] = s
    return tuple(idx)


def _left(a, p):
    return _sl(a, slice(0, -1), p)


def _right(a, p):
    return _sl(a, slice(1, None), p)


def scatter_faces(out, inn, axis: int, f_lr, f_rl) -> None:
    """Add the face fluxes of one axis to the out- and inflows of the cells, in place.

    ``f_lr`` (flux leaving the left cell of each face) and ``f_rl`` (leaving the right cell)
    have the grid's shape with one fewer entry along ``axis``; each is added once as an
    outflow and once as an inflow, so the step conserves mass to round-off.  The one place
    the face-to-cell scatter is written (the order of the additions is the reference that
    the compiled loops of :mod:`meanfield.pde._kernels` reproduce).

    Parameters
    ----------
    out, inn : numpy.ndarray
        Outflow and inflow of every cell (grid shape), updated in place.
    axis : int
        The axis whose faces carry the fluxes.
    f_lr, f_rl : numpy.ndarray
        Fluxes ≥ 0 leaving the left and the right cell of each interior face.

    See Also
    --------
    scatter_periodic_faces : the same with the faces at ±L identified.
    Scheme.flows : the flows these scatters build.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.pde.schemes import scatter_faces
    >>> out, inn = np.zeros(3), np.zeros(3)
    >>> scatter_faces(out, inn, 0, np.array([1.0, 2.0]), np.array([0.5, 0.0]))
    >>> out, inn
    (array([1. , 2.5, 0. ]), array([0.5, 1. , 2. ]))
    >>> float(out.sum() - inn.sum())  # every flux leaves one cell and enters another
    0.0
    """
    p = out.ndim
    L, R = _left(axis, p), _right(axis, p)
    out[L] += f_lr
    inn[R] += f_lr
    out[R] += f_rl
    inn[L] += f_rl


def scatter_periodic_faces(out, inn, axis: int, f_lr, f_rl) -> None:
    """:func:`scatter_faces` on a periodic grid: face i + ½ joins cell i and cell
    (i + 1) mod n along ``axis``, so there are n faces and the fluxes have the grid's shape.

    Parameters
    ----------
    out, inn : numpy.ndarray
        Outflow and inflow of every cell (grid shape), updated in place.
    axis : int
        The axis whose faces carry the fluxes.
    f_lr, f_rl : numpy.ndarray, grid shape
        Fluxes ≥ 0 leaving cell i and leaving cell i + 1 (mod n) through face i + ½.

    See Also
    --------
    scatter_faces : the free-space (no-flux) version.
    meanfield.domains.Torus : the periodic domain.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.pde.schemes.base import scatter_periodic_faces
    >>> out, inn = np.zeros(3), np.zeros(3)
    >>> scatter_periodic_faces(out, inn, 0, np.array([0.0, 0.0, 1.0]), np.zeros(3))
    >>> out, inn  # the last cell's right face is the first cell's left face
    (array([0., 0., 1.]), array([1., 0., 0.]))
    """
    out += f_lr
    inn += np.roll(f_lr, 1, axis)
    out += np.roll(f_rl, 1, axis)
    inn += f_rl


class Scheme:
    r"""Base class of the flux schemes.

    On a periodic grid (a :class:`~meanfield.domains.Torus`, :attr:`Grid.periodic`) the
    faces at ±L are identified and carry flux like any interior face
    (:func:`scatter_periodic_faces`); a scheme that does not implement periodic faces
    (:attr:`supports_periodic` False: the implicit ones) is refused at :meth:`bind`.

    A scheme is made unbound, with its options only (``UpwindScheme(order=2)``), and bound
    once to a grid and an inverse temperature, :meth:`bind` (as a py-pde solver makes its
    stepper for one state): the bound scheme is the stepper, its methods take the state
    alone.  :class:`~meanfield.pde.equation.McKeanVlasov` binds its scheme when it is made.

    Arrays ``rho`` and ``U`` have the grid's shape; ``rho`` is a density (mass / volume), ``U``
    the potential δE/δρ at the cell centres (energy units).
    ``flows`` gives the outflow and inflow of every cell, both ≥ 0 (density / time);
    ``prepare`` gives them together with the stable time step; ``advance`` takes the step.
    ``U`` must not be modified in place between calls (schemes may cache per ``U`` object).

    The step is conservative and positive by construction:

    .. math::

        \rho_i^{n+1} = (\rho_i^n - \Delta t\, \mathrm{out}_i) + \Delta t\, \mathrm{in}_i,
        \qquad \sum_i \mathrm{out}_i = \sum_i \mathrm{in}_i.

    See Also
    --------
    meanfield.pde.schemes.UpwindScheme, meanfield.pde.schemes.ScharfetterGummel
    meanfield.pde.schemes.ScharfetterGummelMPRK
    meanfield.pde.schemes.make_scheme : a scheme by name.
    meanfield.pde.equation.McKeanVlasov : binds and steps the scheme.
    meanfield.testing.check_scheme : the contract a new scheme must pass.

    References
    ----------
    - J. A. Carrillo, A. Chertock, Y. Huang, "A finite-volume method for nonlinear nonlocal
      equations with a gradient flow structure", Commun. Comput. Phys. 17 (2015) 233–258.
    - D. L. Scharfetter, H. K. Gummel, "Large-signal analysis of a silicon Read diode oscillator",
      IEEE Trans. Electron Devices 16 (1969) 64–77.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.schemes import Scheme, UpwindScheme
    >>> from meanfield.pde.grid import Grid
    >>> g = Grid(Box(1, 1.0), 8)
    >>> scheme = UpwindScheme().bind(g, beta=1.0)
    >>> isinstance(scheme, Scheme)
    True
    >>> rho, U = np.ones(8) / 2, g.centers[:, 0] ** 2
    >>> out, inn, dt = scheme.prepare(rho, U)
    >>> new = scheme.advance(rho, U, dt, out, inn)
    >>> bool(new.min() >= 0), round(g.integrate(new), 12)
    (True, 1.0)
    """

    name = "scheme"
    implicit = False
    #: Order of the time integration.
    time_order = 1
    #: True if :meth:`advance` takes ``potential`` (ρ -> U) to re-evaluate U inside the step.
    needs_potential = False
    _grid = None
    _beta = None
    #: Whether the scheme implements periodic faces (a torus grid); refused at bind if not.
    supports_periodic = False

    def bind(self, grid: Grid, beta: float) -> Scheme:
        """This scheme bound to ``grid`` and ``beta``: a copy whose methods take the state alone.

        Parameters
        ----------
        grid : Grid
            The grid of every state the bound scheme steps.
        beta : float
            Inverse temperature β > 0 (the diffusion is D = β⁻¹).

        Returns
        -------
        Scheme
            A new scheme of the same kind and options (this one is left unbound).

        Raises
        ------
        meanfield.errors.InputError
            ``beta`` is not a finite number > 0, or a periodic grid for a scheme without
            periodic faces.
        TypeError
            ``grid`` is not a :class:`~meanfield.pde.grid.Grid`.

        See Also
        --------
        meanfield.pde.equation.McKeanVlasov : binds its scheme when made.

        Examples
        --------
        >>> from meanfield.pde.schemes import UpwindScheme
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> scheme = UpwindScheme(order=1)
        >>> bound = scheme.bind(Grid(Box(1, 1.0), 4), beta=2.0)
        >>> bound.beta, bound.grid.n, bound.describe() == scheme.describe()
        (2.0, (4,), True)
        """
        if not isinstance(grid, Grid):
            raise InputTypeError(f"grid must be a meanfield.pde.Grid, got {grid!r}")
        if grid.periodic and not self.supports_periodic:
            raise InputError(
                f"scheme {self.name!r} has no periodic faces: on a torus grid use 'upwind' or "
                "'sg' (explicit)"
            )
        bound = copy.copy(self)
        bound._grid = grid
        bound._beta = check_positive("beta (inverse temperature)", beta)
        bound._cache = None
        return bound

    @property
    def grid(self) -> Grid:
        """The grid the scheme is bound to (:meth:`bind`).

        Raises
        ------
        meanfield.errors.InputTypeError
            The scheme is not bound.

        See Also
        --------
        bind

        Examples
        --------
        >>> from meanfield.pde.schemes import UpwindScheme
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> UpwindScheme().bind(Grid(Box(1, 1.0), 4), 1.0).grid
        Grid(domain=Box(dim=1, half_width=1.0), n=(4,))
        """
        if self._grid is None:
            raise self._unbound()
        return self._grid

    @property
    def beta(self) -> float:
        """The inverse temperature the scheme is bound to (:meth:`bind`).

        See Also
        --------
        bind

        Examples
        --------
        >>> from meanfield.pde.schemes import ScharfetterGummel
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> ScharfetterGummel().bind(Grid(Box(1, 1.0), 4), 3).beta
        3.0
        """
        if self._beta is None:
            raise self._unbound()
        return self._beta

    def _unbound(self) -> Exception:
        return InputTypeError(
            f"the {self.name!r} scheme is not bound to a grid and beta: bind it once, "
            "scheme.bind(grid, beta), and call the bound scheme (McKeanVlasov does this)"
        )

    def flows(self, rho, U):
        """Outflow and inflow of every cell (density / time), both ≥ 0.

        Parameters
        ----------
        rho : numpy.ndarray, shape ``grid.shape``
            Density.
        U : numpy.ndarray, shape ``grid.shape``
            Potential δE/δρ at the cell centres.

        Returns
        -------
        (numpy.ndarray, numpy.ndarray)
            ``(out, in)``, each of shape ``grid.shape``, with equal sums.

        See Also
        --------
        rate, prepare
        scatter_faces : adds face fluxes to the flows.

        Examples
        --------
        >>> from meanfield.pde.schemes import UpwindScheme
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> U, rho = g.centers[:, 0], np.full(4, 0.5)  # a linear potential, uniform ρ
        >>> UpwindScheme(order=1).bind(g, beta=1.0).flows(rho, U)  # mass moves left, down U
        (array([0., 1., 1., 1.]), array([1., 1., 1., 0.]))
        """
        raise NotImplementedError

    def rate(self, rho, U) -> np.ndarray:
        """dρ/dt = in − out of the semi-discrete scheme.

        Parameters
        ----------
        rho, U
            As in :meth:`flows`.

        Returns
        -------
        numpy.ndarray, shape ``grid.shape``

        See Also
        --------
        flows
        meanfield.pde.equation.McKeanVlasov.evolution_rate

        Examples
        --------
        >>> from meanfield.pde.schemes import UpwindScheme
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> U, rho = g.centers[:, 0], np.full(4, 0.5)  # a linear potential, uniform ρ
        >>> UpwindScheme(order=1).bind(g, beta=1.0).rate(rho, U).round(12)
        array([ 1., -0.,  0., -1.])
        """
        out, inn = self.flows(rho, U)
        return inn - out

    def stable_dt(self, rho, U, out=None, nonlocal_rate: float = 0.0) -> float:
        """Largest Δt keeping the step positive and monotone (before the safety factor).

        Parameters
        ----------
        rho, U
            As in :meth:`flows`.
        out : numpy.ndarray, optional
            The outflows at ``rho``, if already computed.
        nonlocal_rate : float, default 0.0
            Max ρ times the pair-interaction stiffness (1/time), the fastest rate of the
            linearised nonlocal term (see :attr:`GridEnergy.pair_stiffness`).

        Returns
        -------
        float
            The step bound (inf if nothing limits it).

        See Also
        --------
        prepare
        meanfield.pde.stepper.Stepper : the step sized from it.

        Examples
        --------
        >>> from meanfield.pde.schemes import ScharfetterGummel
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> U, rho = g.centers[:, 0], np.full(4, 0.5)  # a linear potential, uniform ρ
        >>> scheme = ScharfetterGummel().bind(g, beta=1.0)
        >>> round(scheme.stable_dt(rho, U), 4)
        0.1225
        >>> scheme.stable_dt(rho, U, nonlocal_rate=100.0)  # the pair term is faster
        0.01
        """
        raise NotImplementedError

    def prepare(self, rho, U, nonlocal_rate: float = 0.0):
        """(out, in, stable Δt) for one step: what the solver needs, computed once.

        Parameters
        ----------
        rho, U
            As in :meth:`flows`.
        nonlocal_rate : float, default 0.0
            As in :meth:`stable_dt`.

        Returns
        -------
        tuple
            ``(out, in, dt_stable)``; implicit schemes return ``(None, None, dt_stable)``.

        See Also
        --------
        flows, stable_dt, advance

        Examples
        --------
        >>> from meanfield.pde.schemes import UpwindScheme
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> U, rho = g.centers[:, 0], np.full(4, 0.5)  # a linear potential, uniform ρ
        >>> UpwindScheme(order=1).bind(g, beta=1.0).prepare(rho, U)
        (array([0., 1., 1., 1.]), array([1., 1., 1., 0.]), 0.0625)
        """
        out, inn = self.flows(rho, U)
        return out, inn, self.stable_dt(rho, U, out, nonlocal_rate)

    def advance(self, rho, U, dt: float, out=None, inn=None):
        """One step of size ``dt``: forward Euler here (implicit schemes override).

        Parameters
        ----------
        rho, U
            As in :meth:`flows`.
        dt : float
            Step size (≤ :meth:`stable_dt` for an explicit scheme).
        out, inn : numpy.ndarray, optional
            The flows of :meth:`prepare` at ``rho``, else recomputed.

        Returns
        -------
        numpy.ndarray, shape ``grid.shape``
            The density after the step.

        See Also
        --------
        prepare
        meanfield.pde.equation.McKeanVlasov.advance

        Examples
        --------
        >>> from meanfield.pde.schemes import UpwindScheme
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 4)
        >>> U, rho = g.centers[:, 0], np.full(4, 0.5)  # a linear potential, uniform ρ
        >>> UpwindScheme(order=1).bind(g, 1.0).advance(rho, U, dt=0.01)
        array([0.51, 0.5 , 0.5 , 0.49])
        """
        if out is None:
            out, inn = self.flows(rho, U)
        return (rho - dt * out) + dt * inn

    def describe(self) -> dict:
        """The scheme's parameters as plain types (for dataset attributes).

        See Also
        --------
        meanfield.pde.equation.McKeanVlasov.describe

        Examples
        --------
        >>> from meanfield.pde.schemes import ScharfetterGummel, UpwindScheme
        >>> ScharfetterGummel(implicit=True).describe(), UpwindScheme(order=1).describe()
        ({'scheme': 'sg-implicit'}, {'scheme': 'upwind', 'order': 1, 'theta': 2.0})
        """
        return {"scheme": self.name}
