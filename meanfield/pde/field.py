"""Densities on a grid: the state of the McKean–Vlasov solver.

A :class:`Density` is a non-negative grid function of cell averages ρ_i (unit: mass per unit
volume of ω-space) tied to its :class:`~meanfield.pde.grid.Grid`.  It is validated on
construction, so a negative or non-finite value is caught before any work is done.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import xarray as xr
from scipy.special import erf, erfc

from .._validation import check_positive
from ..errors import InputError, InputTypeError
from .grid import Grid


def check_density_values(grid: Grid, data, name: str = "density") -> np.ndarray:
    """Return ``data`` as a float64 array of the grid's shape if finite and ≥ 0, else raise.

    Parameters
    ----------
    grid : Grid
        The grid whose :attr:`~meanfield.pde.grid.Grid.shape` ``data`` must have.
    data : array_like
        Cell values.
    name : str
        Name used in the error messages.

    Returns
    -------
    numpy.ndarray
        A float64 copy of ``data``, shape ``grid.shape``.

    See Also
    --------
    Density : the state this check guards.
    meanfield.pde.trackers.GuardTracker : the same checks on every step of a solve.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import check_density_values
    >>> from meanfield.pde.grid import Grid
    >>> g = Grid(Box(1, 1.0), 4)
    >>> check_density_values(g, [0, 1, 2, 3])
    array([0., 1., 2., 3.])
    >>> check_density_values(g, [0, -1, 2, 3])
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: density has 1 negative value(s) (min -1 at cell ...
    """
    a = np.array(data, dtype=float, copy=True)
    if a.shape != grid.shape:
        raise InputError(f"{name} must have the grid's shape {grid.shape}, got {a.shape}")
    bad = ~np.isfinite(a)
    if bad.any():
        raise InputError(
            f"{name} has {int(bad.sum())} non-finite value(s) (NaN or inf); a density must be "
            "finite and >= 0 in every cell"
        )
    if (a < 0).any():
        i = np.unravel_index(int(np.argmin(a)), a.shape)
        raise InputError(
            f"{name} has {int((a < 0).sum())} negative value(s) (min {a[i]:.3g} at cell {i}); "
            "a density must be finite and >= 0 in every cell"
        )
    return a


def _normal_cell_masses(z: np.ndarray) -> np.ndarray:
    """Φ(z_{i+1}) − Φ(z_i) of a standard normal on cells with edges √2 z (J + 1,), without
    cancellation: erfc differences in the tails (1 + erf rounds to 0 or 2 there) and an erf
    difference across 0 (0.5 (1 + erf) rounded away cells narrower than 1e-16 of the
    standard deviation: a 4-cell box under std 1e16 gave [0, 1/3, 0, 2/3], not 1/4 each)."""
    lo, hi = z[:-1], z[1:]
    # erf is accurate near 0, erfc in the tails: each cell takes the one that fits it
    right = erfc(np.maximum(lo, 1.0)) - erfc(np.maximum(hi, 1.0))  # cells at z ≥ 1
    left = erfc(-np.minimum(hi, -1.0)) - erfc(-np.minimum(lo, -1.0))  # cells at z ≤ −1
    middle = erf(hi) - erf(lo)
    return 0.5 * np.where(lo >= 1.0, right, np.where(hi <= -1.0, left, middle))


class Density:
    r"""A non-negative density ρ on a grid (cell averages).

    Parameters
    ----------
    grid : Grid
    data : array of shape ``grid.shape``
        Cell averages ρ_i ≥ 0, finite (float64 copy kept).
    check : bool, default True
        False: keep ``data`` (a float64 array of the grid's shape) as it is, without a copy
        or the value checks: a cheap view for solvers that check positivity themselves.

    See Also
    --------
    Grid : the cells the density lives on.
    meanfield.pde.solver.solve : evolves a density.
    meanfield.ot.measure.Measure.from_density : the density as a measure for the transport view.
    meanfield.dynamics.chains.LangevinState : the particle view's state.

    Notes
    -----
    The mass and the moments are those of the piecewise-constant function, exact per cell:

    .. math::

        m = \sum_i \rho_i |C|, \qquad
        \mathrm{Cov} = \sum_i \frac{\rho_i |C|}{m} (x_i - \bar x)(x_i - \bar x)^\top
        + \operatorname{diag}\left(\frac{h_a^2}{12}\right).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> g = Grid(Box(2, 1.0), 4)
    >>> u = Density.uniform(g)
    >>> round(u.mass, 12), float(u.data[0, 0])  # 1 / area of [-1, 1]^2
    (1.0, 0.25)
    >>> np.allclose(u.covariance, np.eye(2) / 3)  # Var U(-1, 1) = 1/3
    True
    >>> rho = Density.gaussian(Grid(Box(1, 6.0), 64), mean=0.5, std=1.0)
    >>> round(float(rho.mean[0]), 3), round(float(rho.covariance[0, 0]), 1)
    (0.5, 1.0)
    >>> rho.sample(5, seed=0).shape
    (5, 1)
    """

    __slots__ = ("grid", "data")

    def __init__(self, grid: Grid, data, *, check: bool = True):
        if not isinstance(grid, Grid):
            raise InputTypeError(f"grid must be a meanfield.pde.Grid, got {grid!r}")
        self.grid = grid
        if check:
            self.data = check_density_values(grid, data)
        elif isinstance(data, np.ndarray) and data.dtype == np.float64 and data.shape == grid.shape:
            # a view for solvers whose steps keep ρ finite and ≥ 0 (the guard checks them)
            self.data = data
        else:
            raise InputError(
                f"check=False needs a float64 array of the grid's shape {grid.shape}, got "
                f"{type(data).__name__} {getattr(data, 'shape', None)}"
            )

    # --- constructors -----------------------------------------------------------------------
    @classmethod
    def from_function(cls, grid: Grid, fn, *, normalise: bool = True) -> Density:
        """The density ρ_i = fn(x_i) at the cell centres x_i.

        Parameters
        ----------
        grid : Grid
        fn : callable
            Maps points of shape (M, p) to M values ≥ 0.
        normalise : bool, default True
            Rescale to mass 1.

        Returns
        -------
        Density

        See Also
        --------
        meanfield.pde.grid.Grid.evaluate : a function at the centres.
        uniform, gaussian

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> rho = Density.from_function(Grid(Box(1, 1.0), 4), lambda x: 1 + x[:, 0])
        >>> rho.data, round(rho.mass, 12)
        (array([0.125, 0.375, 0.625, 0.875]), 1.0)
        """
        out = cls(grid, grid.evaluate(fn))
        return out.normalised() if normalise else out

    @classmethod
    def uniform(cls, grid: Grid) -> Density:
        """The uniform probability density on the box, ρ_i = 1 / (2R)^p.

        See Also
        --------
        gaussian, from_function

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> Density.uniform(Grid(Box(1, 2.0), 4)).data
        array([0.25, 0.25, 0.25, 0.25])
        """
        return cls(grid, np.full(grid.shape, 1.0 / (grid.cell_volume * grid.size)))

    @classmethod
    def gaussian(cls, grid: Grid, mean=0.0, std=1.0, *, normalise: bool = True) -> Density:
        r"""Cell averages of N(mean, diag(std²)), computed exactly with erf.

        The law is a product of 1D laws, so each cell average is a product of

        .. math::

            \frac{1}{h_a}\left[\Phi\left(\frac{x - m_a}{s_a}\right)\right]
            _{x_{i_a - 1/2}}^{x_{i_a + 1/2}}.

        Parameters
        ----------
        grid : Grid
        mean, std : float or sequence of p floats
            Mean and per-axis standard deviation (> 0).
        normalise : bool
            Rescale to mass 1 on the box (removes the mass truncated outside it).  On a
            periodic grid (a :class:`~meanfield.domains.Torus`) the law is the wrapped normal
            (the images of the mean one period apart summed), of mass 1 before rescaling.

        Returns
        -------
        Density

        See Also
        --------
        uniform, from_function
        meanfield.dynamics.chains.initial_particles : the particle view's start.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> rho = Density.gaussian(Grid(Box(1, 1.0), 4), std=10.0, normalise=False)
        >>> rho.data.round(3)  # nearly flat: the N(0, 100) density near 0 is 1/(10 sqrt(2 pi))
        array([0.04, 0.04, 0.04, 0.04])
        """
        p = grid.dim
        mean = np.broadcast_to(np.asarray(mean, dtype=float), (p,))
        std = np.broadcast_to(np.asarray(std, dtype=float), (p,))
        for s in std:
            check_positive("std", s)
        masses = []
        for a in range(p):
            # on a torus: the wrapped normal, the images mean + 2Lk summed while they carry
            # mass (|k| ≤ K, with 2LK beyond 40 standard deviations of the whole cell)
            period = 2.0 * grid.domain.half_width
            K = 0
            if grid.periodic:
                K = int(min(np.ceil((40.0 * std[a] + abs(mean[a])) / period) + 1, 10_000))
            mass = 0.0
            for k in range(-K, K + 1):
                z = (grid.edges[a] - mean[a] - k * period) / (std[a] * math.sqrt(2.0))
                mass = mass + _normal_cell_masses(z)
            masses.append(mass / grid.h[a])
        data = functools.reduce(np.multiply.outer, masses)  # shape (n_1, …, n_p)
        out = cls(grid, data)
        return out.normalised() if normalise else out

    def sample(self, n: int, seed: int) -> np.ndarray:
        """Draw n iid points from the piecewise-constant density.

        A cell is drawn with probability ρ_i |C| / mass, then a uniform point in it: an exact
        sample of the piecewise-constant law.

        Parameters
        ----------
        n : int
            Number of points.
        seed : int
            Seed of the numpy generator.

        Returns
        -------
        numpy.ndarray, shape (n, p)

        See Also
        --------
        meanfield.ot.measure.Measure.from_particles : the samples as a measure.
        meanfield.dynamics.langevin.simulate : particles started from them.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> rho = Density(Grid(Box(1, 1.0), 4), [0, 0, 0, 1.0])  # all mass in [0.5, 1]
        >>> x = rho.sample(100, seed=0)
        >>> x.shape, bool((x >= 0.5).all())
        ((100, 1), True)
        """
        if not self.mass > 0:
            raise InputError("cannot sample from a density of zero mass")
        rng = np.random.default_rng(seed)
        w = self.data.ravel() / self.data.sum()
        cells = rng.choice(self.grid.size, size=int(n), p=w)
        idx = np.unravel_index(cells, self.grid.shape)
        pts = np.empty((int(n), self.grid.dim))
        for a in range(self.grid.dim):
            lo = self.grid.edges[a][idx[a]]
            pts[:, a] = lo + self.grid.h[a] * rng.random(int(n))
        return pts

    # --- moments ----------------------------------------------------------------------------
    @property
    def mass(self) -> float:
        """Mass Σ ρ_i |C| (dimensionless: a probability density has mass 1).

        See Also
        --------
        masses : per cell.
        normalised : rescaled to mass 1.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> Density(Grid(Box(1, 1.0), 4), [1.0, 1.0, 0, 0]).mass
        1.0
        """
        return float(self.data.sum() * self.grid.cell_volume)

    @property
    def masses(self) -> np.ndarray:
        """Cell masses ρ_i |C|, shape ``grid.shape``.

        See Also
        --------
        mass : their sum.
        meanfield.ot.measure.Measure.from_density : centres carrying these masses.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> Density(Grid(Box(1, 1.0), 4), [1.0, 1.0, 0, 0]).masses
        array([0.5, 0.5, 0. , 0. ])
        """
        return self.data * self.grid.cell_volume

    def normalised(self) -> Density:
        """A new density rescaled to mass 1 (raises for zero mass).

        See Also
        --------
        mass

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> Density(Grid(Box(1, 1.0), 4), [2.0, 2.0, 0, 0]).normalised().data
        array([1., 1., 0., 0.])
        """
        m = self.mass
        if not m > 0:
            raise InputError("cannot normalise a density of zero mass")
        return Density(self.grid, self.data / m)

    @property
    def mean(self) -> np.ndarray:
        """First moment of the piecewise-constant density (exact per cell), divided by the mass.

        The moments are properties, as :attr:`mass` is (and as a
        :class:`~meanfield.ot.Measure`'s ``mass`` is).

        Returns
        -------
        numpy.ndarray, shape (p,)

        See Also
        --------
        covariance

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> Density(Grid(Box(1, 1.0), 4), [0, 0, 1.0, 1.0]).mean
        array([0.5])
        """
        w = self.masses.ravel() / self.mass
        return w @ self.grid.centers

    @property
    def covariance(self) -> np.ndarray:
        """Covariance of the piecewise-constant density (of the normalised law).

        Exact for piecewise-constant cells: the centre-point covariance plus h_a²/12 on the
        diagonal (the variance of a uniform law on a cell).

        Returns
        -------
        numpy.ndarray, shape (p, p)

        See Also
        --------
        mean

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> Density(Grid(Box(1, 1.0), 4), [0, 0, 0, 1.0]).covariance  # U(0.5, 1): 0.5²/12
        array([[0.02083333]])
        """
        w = self.masses.ravel() / self.mass
        c = self.grid.centers - self.mean
        cov = (c * w[:, None]).T @ c
        return cov + np.diag(np.square(self.grid.h)) / 12.0

    def copy(self) -> Density:
        """An independent copy (the data are copied and checked again).

        See Also
        --------
        meanfield.pde.field.check_density_values : the checks repeated.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
        >>> rho.copy().data is rho.data
        False
        """
        return Density(self.grid, self.data)

    def to_xarray(self, name: str = "rho") -> xr.DataArray:
        """The density as a labelled array over the cell-centre coordinates.

        Parameters
        ----------
        name : str, default "rho"
            Name of the array.

        Returns
        -------
        xarray.DataArray
            Dims :attr:`Grid.axis_names <meanfield.pde.grid.Grid.axis_names>`.

        See Also
        --------
        meanfield.pde.trackers.StorageTracker.to_dataset : many states over time.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.pde.grid import Grid
        >>> da = Density.uniform(Grid(Box(2, 1.0), 4)).to_xarray()
        >>> da.dims, da.shape
        (('x', 'y'), (4, 4))
        """
        return xr.DataArray(
            self.data,
            coords=self.grid.coords,
            dims=self.grid.axis_names,
            name=name,
            attrs={"long_name": "density (cell average)"},
        )

    def __repr__(self) -> str:
        return f"Density(grid={self.grid!r}, mass={self.mass:.6g})"
