"""Cell-centred Cartesian grids on box domains (p = 1, 2 and 3).

The box [−R, R]^p is cut into ``n_1 × … × n_p`` equal cells.  A grid function holds one value
per cell, stored as an array of shape :attr:`Grid.shape` with axis ``a`` running along
coordinate ``a`` (``x``, ``y``, ``z``).  Densities are cell averages, so the mass of a density
ρ is Σ_i ρ_i |C_i| with |C_i| = Π_a h_a the cell volume.

Only boxes are supported: the finite-volume fluxes and the FFT convolution need a tensor grid
whose faces are the domain boundary, where the no-flux condition is imposed exactly.

Size ceiling.  A grid is refused when it is made (before anything is allocated) if the memory
a solve on it would keep, :func:`grid_memory_estimate` (cells × 8 bytes × the
:data:`GRID_ARRAYS` float64 arrays of the solver), exceeds :func:`grid_bytes_ceiling`:
:data:`MAX_GRID_BYTES` (2⁴⁰ bytes, 1 TiB), or the environment variable :data:`GRID_BYTES_ENV`
(``MEANFIELD_MAX_GRID_BYTES=4e12``; ``inf`` turns the check off).  The ceiling refuses sizes
far out of reach (``Grid(Box(3, 1.0), 10**5)``: 10¹⁵ cells, 512 PB), which would otherwise
fail with a raw ``MemoryError`` at the first array; the solver
(:class:`~meanfield.pde.equation.McKeanVlasov`) further checks its own estimate against the
memory available now.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._resources import BYTES_PER_CELL
from .._validation import check_int, env_ceiling
from ..domains import Box, Domain, Torus
from ..errors import InputError, InputTypeError, SizeLimitError

#: Dimensions the grid solver handles.
GRID_DIMS = (1, 2, 3)
#: Fewest cells per axis: the second-order reconstruction needs two neighbours.
MIN_CELLS = 4
#: Names of the coordinate axes in xarray output.
AXIS_NAMES = ("x", "y", "z")
#: The float64 arrays per cell a grid solve keeps (the density, the potential, the fluxes and
#: face rates of each axis, the scratch arrays of a step): the measured
#: :data:`meanfield._resources.BYTES_PER_CELL` (512 B) over 8 bytes.
GRID_ARRAYS = BYTES_PER_CELL // 8
#: The memory ceiling of one grid, in bytes (:func:`grid_memory_estimate`): 2⁴⁰ (1 TiB).  It
#: refuses a grid that no machine would hold (``Grid(Box(3, 1.0), 10**5)``) before anything is
#: allocated, not to plan a run (the solver checks the memory available).  Raise it by the
#: environment variable :data:`GRID_BYTES_ENV` (``inf`` turns the check off) or by assigning
#: this constant.
MAX_GRID_BYTES = 2**40
#: The environment variable that replaces :data:`MAX_GRID_BYTES` when set.
GRID_BYTES_ENV = "MEANFIELD_MAX_GRID_BYTES"


def grid_memory_estimate(n) -> int:
    """The memory (bytes) a grid solve keeps on a grid of ``n`` cells per axis: cells × 8
    bytes × :data:`GRID_ARRAYS`.

    Parameters
    ----------
    n : tuple of int
        Cells per axis.

    Returns
    -------
    int
        Bytes (an exact integer: no overflow for any size).

    See Also
    --------
    check_grid_size : the refusal this estimate drives.
    grid_bytes_ceiling : the ceiling it is compared with.

    Examples
    --------
    >>> from meanfield.pde.grid import grid_memory_estimate
    >>> grid_memory_estimate((100, 100))  # 10⁴ cells x 8 B x 64 arrays
    5120000
    """
    return math.prod(int(k) for k in n) * 8 * GRID_ARRAYS


def grid_bytes_ceiling() -> float:
    """The grid memory ceiling in force: the environment variable :data:`GRID_BYTES_ENV` if
    set, else :data:`MAX_GRID_BYTES`.

    Returns
    -------
    float
        > 0 (``inf``: no ceiling).

    Raises
    ------
    meanfield.errors.InputError
        The environment variable is not a number > 0.

    See Also
    --------
    check_grid_size : refuses a grid over this ceiling.
    grid_memory_estimate : the memory a grid solve keeps.

    Examples
    --------
    >>> from meanfield.pde.grid import grid_bytes_ceiling
    >>> grid_bytes_ceiling() > 0
    True
    """
    return env_ceiling(GRID_BYTES_ENV, MAX_GRID_BYTES, "the grid memory ceiling in bytes")


def check_grid_size(n, *, name: str = "n (cells per axis)") -> int:
    """Refuse a grid whose memory estimate (:func:`grid_memory_estimate`) exceeds the ceiling
    (:func:`grid_bytes_ceiling`), before anything is allocated.

    Parameters
    ----------
    n : tuple of int
        Cells per axis.
    name : str
        The parameter that sets the size, quoted in the message.

    Returns
    -------
    int
        The estimate in bytes.

    Raises
    ------
    meanfield.errors.SizeLimitError
        Above the ceiling; the message gives the estimate, the ceiling, the largest number of
        cells per axis that fits and how to raise the ceiling.

    See Also
    --------
    grid_memory_estimate, grid_bytes_ceiling
    Grid : checks its size when it is made.

    Examples
    --------
    >>> from meanfield.pde.grid import check_grid_size
    >>> check_grid_size((64, 64))
    2097152
    >>> check_grid_size((10**5,) * 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    meanfield.errors.SizeLimitError: n (cells per axis): a grid of 100000 x 100000 x 100000 ...
    """
    need = grid_memory_estimate(n)
    ceiling = grid_bytes_ceiling()
    if need > ceiling:
        fits = int((ceiling / (8 * GRID_ARRAYS)) ** (1 / len(n)))
        while (fits + 1) ** len(n) * 8 * GRID_ARRAYS <= ceiling:  # the float root rounds
            fits += 1
        while fits > 0 and fits ** len(n) * 8 * GRID_ARRAYS > ceiling:
            fits -= 1
        shape = " x ".join(str(int(k)) for k in n)
        raise SizeLimitError(
            f"{name}: a grid of {shape} cells would keep about {need:.3g} bytes ({GRID_ARRAYS} "
            f"float64 arrays per cell), above the grid memory ceiling {ceiling:.3g} bytes; use "
            f"at most {fits} cells per axis in p = {len(n)}, or raise the ceiling: set the "
            f"environment variable {GRID_BYTES_ENV} (e.g. {GRID_BYTES_ENV}=4e12; inf turns the "
            "check off) or meanfield.pde.grid.MAX_GRID_BYTES"
        )
    return need


def check_grid_domain(domain: Domain) -> Box:
    """Return ``domain`` if the grid solver can discretise it, else raise a clear error.

    Parameters
    ----------
    domain : Domain
        Must be a :class:`~meanfield.domains.Box` (no-flux walls) or a
        :class:`~meanfield.domains.Torus` (periodic faces) of dimension p ∈ {1, 2, 3}.

    Returns
    -------
    Box or Torus
        ``domain`` itself.

    Raises
    ------
    meanfield.errors.InputTypeError
        ``domain`` is not a domain.
    meanfield.errors.InputError
        A ball, or p > 3.

    See Also
    --------
    Grid : the grid on a checked domain.
    meanfield.domains.Box, meanfield.domains.Torus

    Examples
    --------
    >>> from meanfield.domains import Ball, Box
    >>> from meanfield.pde.grid import check_grid_domain
    >>> check_grid_domain(Box(2, 1.0))
    Box(dim=2, half_width=1.0)
    >>> check_grid_domain(Ball(2, 1.0))
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: incompatible domain ...
    """
    if not isinstance(domain, Domain):
        raise InputTypeError(f"domain must be a meanfield.domains.Box, got {domain!r}")
    if not isinstance(domain, (Box, Torus)):
        raise InputError(
            f"incompatible domain {domain!r}: the grid solver needs a Box [-R, R]^p (its faces "
            "carry the no-flux condition) or a Torus [-L, L)^p (periodic faces); build the "
            "energy on a Box to compare with the grid"
        )
    if domain.dim not in GRID_DIMS:
        raise InputError(
            f"the grid solver handles particle dimension p in {{1, 2, 3}}, got p={domain.dim}; "
            "use the particle dynamics (meanfield.dynamics.langevin) for p > 3"
        )
    return domain


@dataclass(frozen=True, eq=False)
class Grid:
    r"""A uniform cell-centred grid on a box ``[−R, R]^p``, p ∈ {1, 2, 3}.

    On a :class:`~meanfield.domains.Torus` [−L, L)^p the same cells tile the periodic cell
    (:attr:`periodic`): the schemes let mass cross the faces at ±L (the last cell's right
    face is the first cell's left face) and the pair convolution is circular.

    Parameters
    ----------
    domain : Box or Torus
        The box (or torus); its ``dim`` is p and its ``half_width`` is R.
    n : int or tuple of int
        Cells per axis (≥ 4); an int is used on every axis.  The grid's memory estimate
        (:func:`grid_memory_estimate`) must not exceed :func:`grid_bytes_ceiling` (1 TiB by
        default, the environment variable ``MEANFIELD_MAX_GRID_BYTES``).

    Attributes
    ----------
    shape : tuple of int
        ``(n_x,)``, ``(n_x, n_y)`` or ``(n_x, n_y, n_z)``.
    h : tuple of float
        Cell widths ``2R / n_a`` (same unit as the particles ω).

    Raises
    ------
    meanfield.errors.InputTypeError
        ``domain`` is not a domain, ``n`` not an int or a tuple of ints.
    meanfield.errors.InputError
        ``domain`` not a box of p ∈ {1, 2, 3}, ``n`` of another length than p or below 4.
    meanfield.errors.SizeLimitError
        A grid above the memory ceiling (:func:`check_grid_size`), before any allocation.

    See Also
    --------
    meanfield.pde.field.Density : a density on the grid.
    meanfield.pde.equation.McKeanVlasov : the equation on the grid.
    meanfield.domains.Box : the particle view's domain, the same box.
    meanfield.ot.measure.Measure.from_density : grid densities in the transport view.

    Notes
    -----
    Cell ``i = (i_1, …, i_p)`` is the product of intervals with centres and volume

    .. math::

        x_{i_a} = -R + \left(i_a + \tfrac12\right) h_a, \qquad
        h_a = \frac{2R}{n_a}, \qquad |C| = \prod_a h_a,

    and a grid function f is integrated by the midpoint rule
    :math:`\int f \approx \sum_i f_i |C|`.

    References
    ----------
    - D. Zwicker, "py-pde: A Python package for solving partial differential equations", J. Open
      Source Softw. 5 (2020) 2158.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.grid import Grid
    >>> g = Grid(Box(1, 1.0), 4)
    >>> g.h, g.axes[0]
    ((0.5,), array([-0.75, -0.25,  0.25,  0.75]))
    >>> g2 = Grid(Box(2, 1.0), (4, 8))
    >>> g2.shape, g2.size, g2.cell_volume
    ((4, 8), 32, 0.125)
    >>> g2.integrate(np.ones(g2.shape))  # the area of [-1, 1]^2
    4.0
    """

    domain: Box
    n: tuple

    def __init__(self, domain: Domain, n):
        domain = check_grid_domain(domain)
        if isinstance(n, (int, np.integer)) and not isinstance(n, bool):
            n = (int(n),) * domain.dim
        try:
            n = tuple(n)
        except TypeError:
            raise InputTypeError(
                f"n (cells per axis) must be an int or a tuple of ints, got {n!r}"
            ) from None
        if len(n) != domain.dim:
            raise InputError(
                f"n must give {domain.dim} cell count(s) for p={domain.dim}, got {n!r}"
            )
        n = tuple(check_int("n (cells per axis)", k, minimum=MIN_CELLS) for k in n)
        check_grid_size(n)  # before any array is made: a raw MemoryError otherwise
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "n", n)
        # cached geometry: the solver reads these at every step
        h = tuple(2.0 * domain.half_width / k for k in n)
        # densities are values per volume: a cell or box volume whose inverse is not a
        # normal float64 made a uniform density NaN (Box(2, 1e170)) or a ZeroDivisionError
        # (Box(2, 1e-170)) downstream
        tiny = np.finfo(float).tiny
        box = math.prod((2.0 * domain.half_width,) * len(n))  # inf, not an OverflowError
        for what, volume in (("cell", math.prod(h)), ("box", box)):
            if not tiny <= volume <= 1.0 / tiny:
                raise InputError(
                    f"the {what} volume of this grid, {volume:.3g}, is outside float64's normal "
                    f"range [{tiny:.3g}, {1 / tiny:.3g}] (a density on it, 1/volume, is not "
                    "representable): measure the domain in other units (its half_width)"
                )
        object.__setattr__(self, "_h", h)
        object.__setattr__(self, "_cell_volume", float(np.prod(h)))

    # --- geometry ---------------------------------------------------------------------------
    @property
    def periodic(self) -> bool:
        """True on a :class:`~meanfield.domains.Torus` (faces at ±L identified), False on a
        box (no-flux walls).

        See Also
        --------
        meanfield.domains.Torus

        Examples
        --------
        >>> from meanfield.domains import Box, Torus
        >>> Grid(Torus(1), 8).periodic, Grid(Box(1), 8).periodic
        (True, False)
        """
        return isinstance(self.domain, Torus)

    @property
    def dim(self) -> int:
        """Dimension p of the box.

        See Also
        --------
        shape, size

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(2, 1.0), 4).dim
        2
        """
        return self.domain.dim

    @property
    def shape(self) -> tuple:
        """Shape of a grid function, ``(n_1, …, n_p)`` (the same as :attr:`n`).

        See Also
        --------
        size, dim

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(2, 1.0), (4, 6)).shape
        (4, 6)
        """
        return self.n

    @property
    def size(self) -> int:
        """Number of cells M = Π_a n_a.

        See Also
        --------
        shape, cell_volume

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(2, 1.0), (4, 6)).size
        24
        """
        return int(np.prod(self.n))

    @property
    def half_width(self) -> float:
        """Half-width R of the box ``[−R, R]^p``.

        See Also
        --------
        h, edges

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(1, 2.5), 4).half_width
        2.5
        """
        return self.domain.half_width

    @property
    def h(self) -> tuple:
        """Cell widths ``h_a = 2R / n_a`` per axis.

        See Also
        --------
        cell_volume, edges

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(2, 1.0), (4, 8)).h
        (0.5, 0.25)
        """
        return self._h

    @property
    def cell_volume(self) -> float:
        """Cell volume |C| = Π_a h_a.

        See Also
        --------
        h, integrate

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(2, 1.0), (4, 8)).cell_volume
        0.125
        """
        return self._cell_volume

    @property
    def edges(self) -> tuple:
        """Cell edges per axis, arrays of shape (n_a + 1,).

        See Also
        --------
        axes, h

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(1, 1.0), 4).edges[0]
        array([-1. , -0.5,  0. ,  0.5,  1. ])
        """
        R = self.half_width
        return tuple(np.linspace(-R, R, k + 1) for k in self.n)

    @property
    def axes(self) -> tuple:
        """Cell centres per axis, arrays of shape (n_a,).

        See Also
        --------
        edges, mesh, centers

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(1, 1.0), 4).axes[0]
        array([-0.75, -0.25,  0.25,  0.75])
        """
        R = self.half_width
        return tuple(-R + (np.arange(k) + 0.5) * hk for k, hk in zip(self.n, self.h, strict=True))

    @property
    def mesh(self) -> tuple:
        """Centre coordinates as p arrays of shape :attr:`shape` (``indexing='ij'``).

        See Also
        --------
        axes, centers

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> x, y = Grid(Box(2, 1.0), (4, 6)).mesh
        >>> x.shape, float(x[0, 0]), float(y[0, 0])
        ((4, 6), -0.75, -0.8333333333333334)
        """
        return tuple(np.meshgrid(*self.axes, indexing="ij"))

    @property
    def centers(self) -> np.ndarray:
        """Cell centres flattened in C order, shape (M, p).

        See Also
        --------
        mesh, cell_index

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(2, 1.0), 4).centers[:2]
        array([[-0.75, -0.75],
               [-0.75, -0.25]])
        """
        return np.stack([m.ravel() for m in self.mesh], axis=-1)

    @property
    def axis_names(self) -> tuple:
        """Names of the p coordinate axes in xarray output (``x``, ``y``, ``z``).

        See Also
        --------
        coords

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(2, 1.0), 4).axis_names
        ('x', 'y')
        """
        return AXIS_NAMES[: self.dim]

    @property
    def coords(self) -> dict:
        """xarray coordinates of the cell centres, ``{axis name: centres}``.

        See Also
        --------
        axis_names
        meanfield.pde.field.Density.to_xarray

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(1, 1.0), 4).coords
        {'x': array([-0.75, -0.25,  0.25,  0.75])}
        """
        return {name: ax for name, ax in zip(self.axis_names, self.axes, strict=True)}

    # --- grid functions ---------------------------------------------------------------------
    def integrate(self, values) -> float:
        r"""Midpoint-rule integral of a grid function.

        .. math::

            \int f \approx \sum_i f_i\,|C_i|

        Parameters
        ----------
        values : array_like, shape :attr:`shape`
            The grid function f.

        Returns
        -------
        float
            The integral.

        See Also
        --------
        cell_volume
        meanfield.pde.field.Density.mass

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> g = Grid(Box(1, 1.0), 4)
        >>> g.integrate(g.mesh[0] ** 2)  # exact value 2/3; midpoint rule
        0.625
        """
        values = np.asarray(values, dtype=float)
        if values.shape != self.shape:
            raise InputError(f"grid function must have shape {self.shape}, got {values.shape}")
        return float(values.sum() * self.cell_volume)

    def evaluate(self, fn) -> np.ndarray:
        """Evaluate a function at the cell centres.

        Parameters
        ----------
        fn : callable
            Maps points of shape (M, p) to M values.

        Returns
        -------
        numpy.ndarray, shape :attr:`shape`
            ``fn`` at the centres, as a grid function.

        See Also
        --------
        meanfield.pde.field.Density.from_function

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(1, 1.0), 4).evaluate(lambda x: x[:, 0] ** 2)
        array([0.5625, 0.0625, 0.0625, 0.5625])
        """
        vals = np.asarray(fn(self.centers), dtype=float)
        return vals.reshape(self.shape)

    def cell_index(self, points) -> np.ndarray:
        """Flat C-order index of the cell holding each point.

        Points on the boundary belong to the boundary cell; points outside raise.

        Parameters
        ----------
        points : array_like, shape (N, p)
            Points in the box.

        Returns
        -------
        numpy.ndarray, shape (N,)
            Flat cell indices (into :attr:`centers`).

        See Also
        --------
        centers
        meanfield.pde.field.Density.sample

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(1, 1.0), 4).cell_index([[-1.0], [0.1], [1.0]])
        array([0, 2, 3])
        """
        points = np.asarray(points, dtype=float)
        if points.ndim != 2 or points.shape[1] != self.dim:
            raise InputError(f"points must have shape (N, {self.dim}), got {points.shape}")
        R = self.half_width
        if np.any(np.abs(points) > R * (1 + 1e-12)):
            raise InputError(f"points must lie in the grid's box [-{R}, {R}]^{self.dim}")
        idx = [
            np.clip(np.floor((points[:, a] + R) / self.h[a]).astype(int), 0, self.n[a] - 1)
            for a in range(self.dim)
        ]
        return np.ravel_multi_index(idx, self.shape)

    def describe(self) -> dict:
        """Parameters as plain types, for dataset attributes.

        See Also
        --------
        meanfield.pde.equation.McKeanVlasov.describe

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Grid(Box(1, 1.0), 4).describe()
        {'grid_dim': 1, 'grid_n': [4], 'grid_radius': 1.0, 'grid_h': [0.5]}
        """
        out = {
            "grid_dim": self.dim,
            "grid_n": list(self.n),
            "grid_radius": self.half_width,
            "grid_h": list(self.h),
        }
        if self.periodic:  # only on a torus: a box's attributes stay as they were
            out["grid_periodic"] = 1
        return out

    def __eq__(self, other) -> bool:
        return isinstance(other, Grid) and self.domain == other.domain and self.n == other.n

    def __hash__(self) -> int:
        return hash((self.domain, self.n))

    def __repr__(self) -> str:
        return f"Grid(domain={self.domain!r}, n={self.n})"
