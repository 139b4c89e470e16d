r"""The one measure convention of :mod:`meanfield.ot`: weighted points, validated once.

A :class:`Measure` is ``(points (n, p), weights (n,))``: the measure
:math:`\mu = \sum_i w_i \delta_{x_i} / \sum_i w_i`.  Every distance of the package
(:func:`meanfield.ot.distance.wasserstein`) takes two of them, whatever they came from:

* particles, optionally weighted — :meth:`Measure.from_particles`;
* a grid density — :meth:`Measure.from_density`: the cell centres carrying the cell masses,
  and the cell edges, which say that the measure is *piecewise constant* on its cells rather
  than atoms at the centres.  In p = 1 the distances use that exactly (the quantile function
  of a cell density is piecewise linear); in p = 2, 3 they read the cells as atoms at their
  centres, which moves W₁ and W₂ by at most :math:`\sqrt{\sum_k h_k^2 / 12}` per density
  (the W₂ cost of moving a uniform cell of sides :math:`h_k` to its centre);
  :meth:`Measure.atoms` drops the cells to read a density as atoms in p = 1 as well;
* a histogram (cell masses and edges, as :func:`numpy.histogramdd` returns them) —
  :meth:`Measure.from_histogram`.

The weights need not sum to 1 (a density's cell masses sum to its mass): every distance
normalises both measures to probability measures first.  Points and weights are float64,
finite, copied and read-only; weights are ≥ 0, not all zero; a bad argument raises
:class:`~meanfield.errors.InputError` naming it and the allowed range, before any work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_array
from ..errors import InputError, InputTypeError
from ..pde.field import Density
from .precision import _probabilities

__all__ = ["Measure"]


def _frozen(a: np.ndarray) -> np.ndarray:
    """A read-only C-contiguous float64 copy of ``a`` (later changes to ``a`` do not reach it)."""
    v = np.array(a, dtype=np.float64, order="C")
    v.flags.writeable = False
    return v


def _check_points(name: str, points) -> np.ndarray:
    """Finite float64 points of shape (n, p), n, p ≥ 1; a 1-d array is n points on the line."""
    dtype = getattr(points, "dtype", None)
    if dtype is None:
        try:
            dtype = np.asarray(points).dtype
        except (TypeError, ValueError):  # ragged: check_array names it below
            dtype = None
    if str(dtype) in ("bool", "torch.bool"):  # a mask passed for the points
        raise InputTypeError(f"{name} must be real coordinates, got a boolean array")
    x = check_array(name, points)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim == 2 and x.shape[0] == 0:
        raise InputError(f"{name} is empty; a measure needs at least one point")
    if x.ndim != 2 or x.shape[1] == 0:
        raise InputError(
            f"{name} must have shape (n, p) with n >= 1 points of dimension p >= 1 (a 1-d "
            f"array is n points on the line), got shape {x.shape}"
        )
    return x


def _check_weights(name: str, weights, n: int) -> np.ndarray:
    """Finite float64 weights ≥ 0, one per point, not all zero."""
    w = check_array(name, weights)
    if w.shape != (n,) or np.any(w < 0) or not (w.size and w.max() > 0):
        raise InputError(
            f"{name} must be one number >= 0 per point (shape ({n},)), not all zero; "
            f"got shape {w.shape}" + (f", minimum {w.min():g}" if w.size else "")
        )
    return w


def _check_edges(edges, points: np.ndarray) -> tuple:
    """Cell edges of a piecewise-constant density whose cell centres (C order) are ``points``."""
    n, p = points.shape
    if len(edges) != p:
        raise InputError(f"edges must hold one array per dimension ({p}), got {len(edges)}")
    out = []
    for k, e in enumerate(edges):
        e = check_array(f"edges[{k}]", e, ndim=1)
        if len(e) < 2 or np.any(np.diff(e) <= 0):
            raise InputError(f"edges[{k}] must be at least 2 strictly increasing numbers")
        out.append(_frozen(e))
    shape = tuple(len(e) - 1 for e in out)
    if int(np.prod(shape)) != n:
        raise InputError(f"edges give {shape} = {int(np.prod(shape))} cells for {n} points")
    idx = np.unravel_index(np.arange(n), shape)
    for k, e in enumerate(out):
        if np.any(points[:, k] < e[idx[k]]) or np.any(points[:, k] > e[idx[k] + 1]):
            raise InputError(f"points must lie in their cells (C order) along axis {k}")
    return tuple(out)


@dataclass(frozen=True, eq=False)
class Measure:
    r"""A finite measure :math:`\sum_i w_i \delta_{x_i}` (or a density piecewise constant on
    cells), the one input of every distance in :mod:`meanfield.ot`.

    Parameters
    ----------
    points : array (n, p)
        Positions (a 1-d array is n points on the line), finite; float64 after validation.
    weights : array (n,), optional
        Weights ≥ 0, not all zero (default 1/n each).  Kept as given: a distance normalises
        them to a probability measure.
    edges : tuple of p arrays, optional
        Cell edges per axis when the measure is a density piecewise constant on the cells
        of a grid whose centres, in C order, are ``points`` (each point inside its cell) and
        whose masses are ``weights``.  Prefer :meth:`from_density` or :meth:`from_histogram`.

    Raises
    ------
    meanfield.errors.InputError
        A bad argument, named with the allowed range.

    See Also
    --------
    meanfield.ot.distance.wasserstein : the distance between two of them.
    quantile_segments : its quantile function in p = 1.
    meanfield.pde.field.Density : a grid density, read by ``from_density``.
    meanfield.dynamics.langevin.simulate : particles, read by ``from_particles``.

    Examples
    --------
    >>> from meanfield.ot import Measure
    >>> m = Measure([[0.0, 0.0], [1.0, 0.0]], [1.0, 3.0])
    >>> m.dim, m.size, m.mass, m.is_density
    (2, 2, 4.0, False)
    >>> Measure([[0.0]], [-1.0])
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: weights must be one number >= 0 per point (shape (1,)), ...
    """

    points: np.ndarray
    weights: np.ndarray | None = None
    edges: tuple | None = None

    def __post_init__(self):
        x = _check_points("points", self.points)
        if self.weights is None:
            w = np.full(len(x), 1.0 / len(x))
        else:
            w = _check_weights("weights", self.weights, len(x))
        edges = None if self.edges is None else _check_edges(tuple(self.edges), x)
        object.__setattr__(self, "points", _frozen(x))
        object.__setattr__(self, "weights", _frozen(w))
        object.__setattr__(self, "edges", edges)

    # --- constructors -----------------------------------------------------------------------
    @classmethod
    def from_particles(cls, omega, weights=None) -> Measure:
        r"""The empirical measure of particles: :math:`\sum_i w_i \delta_{\omega_i}/\sum_i w_i`.

        Parameters
        ----------
        omega : array (N, p) or torch.Tensor
            Particles (a 1-d array is N particles on the line).
        weights : array (N,), optional
            Weights ≥ 0, not all zero; normalised here (default 1/N each).

        Returns
        -------
        Measure
            Of mass 1.

        Examples
        --------
        >>> from meanfield.ot import Measure
        >>> Measure.from_particles([[0.0], [1.0]], weights=[1.0, 3.0]).weights
        array([0.25, 0.75])
        """
        x = _check_points("omega (particles)", omega)
        if weights is None:
            return cls(x)
        w = _check_weights("weights", weights, len(x))
        return cls(x, _probabilities(w))

    @classmethod
    def from_density(cls, density: Density) -> Measure:
        r"""A grid density: the cell centres carrying the cell masses, and the cell edges.

        The measure is piecewise constant on the cells: exactly so for the distances in
        p = 1; in p = 2, 3 they read it as atoms at the centres (module docstring).

        Parameters
        ----------
        density : Density
            Of mass > 0 (normalised by the distances, not here), on a grid of a Box.

        Raises
        ------
        meanfield.errors.InputError
            Zero mass, or a density on a :class:`~meanfield.domains.Torus` grid (the
            distances here are those of free space; :mod:`meanfield.ot.circle` has the
            torus's own).

        Returns
        -------
        Measure
            ``points = density.grid.centers``, ``weights`` the cell masses (flattened in C
            order, zeros kept), ``edges = density.grid.edges``.

        Examples
        --------
        >>> from meanfield.ot import Measure
        >>> from meanfield.domains import Box
        >>> from meanfield.pde import Density, Grid
        >>> m = Measure.from_density(Density(Grid(Box(1, 1.0), 4), [1.0, 1.0, 0, 0]))
        >>> m.points[:, 0], m.weights, m.is_density
        (array([-0.75, -0.25,  0.25,  0.75]), array([0.5, 0.5, 0. , 0. ]), True)
        """
        if not isinstance(density, Density):
            raise InputTypeError(
                f"density must be a meanfield.pde.Density, got {type(density).__name__}"
            )
        if not density.mass > 0:
            raise InputError("density has zero mass; a distance needs a density of mass > 0")
        if density.grid.periodic:  # the free-space distances would ignore the periodicity
            raise InputError(
                f"density lives on the torus {density.grid.domain!r}: the distances of "
                "meanfield.ot.distance are those of free space; use "
                "meanfield.ot.circle.wasserstein_circle (p = 1) or wasserstein_torus with "
                "density.grid.centers and density.masses.ravel()"
            )
        grid = density.grid
        return cls(grid.centers, density.masses.ravel(), grid.edges)

    @classmethod
    def from_histogram(cls, masses, edges) -> Measure:
        """A density piecewise constant on the cells of a rectilinear grid, from cell masses.

        Parameters
        ----------
        masses : array (n_1, ..., n_p)
            Mass of each cell (≥ 0, not all zero), e.g. the counts of :func:`numpy.histogramdd`.
        edges : array (n_1 + 1,) or sequence of p arrays
            Strictly increasing cell edges per axis (one array: p = 1).

        Returns
        -------
        Measure
            Cell midpoints (C order) carrying ``masses``, with ``edges``.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.ot import Measure
        >>> counts, edges = np.histogram([0.1, 0.2, 0.7], bins=2, range=(0.0, 1.0))
        >>> m = Measure.from_histogram(counts, edges)
        >>> m.points[:, 0], m.weights
        (array([0.25, 0.75]), array([2., 1.]))
        """
        if len(edges) == 0:
            raise InputError("edges must hold the cell edges of at least one axis")
        axes = [edges] if np.ndim(edges[0]) == 0 else list(edges)
        axes = [check_array(f"edges[{k}]", e, ndim=1) for k, e in enumerate(axes)]
        shape = tuple(len(e) - 1 for e in axes)
        m = check_array("masses", masses)
        if m.shape != shape:
            raise InputError(f"masses must have shape {shape} to match the edges, got {m.shape}")
        mids = np.meshgrid(*[(e[:-1] + e[1:]) / 2 for e in axes], indexing="ij")
        return cls(np.stack([c.ravel() for c in mids], axis=-1), m.ravel(), tuple(axes))

    # --- properties -------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """The dimension p of the points.

        Examples
        --------
        >>> from meanfield.ot import Measure
        >>> Measure([0.0, 1.0, 2.0]).dim  # a 1-d array: points on the line
        1
        """
        return self.points.shape[1]

    @property
    def size(self) -> int:
        """The number n of points (cells of a density, empty ones included).

        Examples
        --------
        >>> from meanfield.ot import Measure
        >>> Measure([[0.0, 1.0], [2.0, 3.0]]).size
        2
        """
        return self.points.shape[0]

    @property
    def mass(self) -> float:
        """The total weight Σ w_i (the distances compare the normalised measures).

        Examples
        --------
        >>> from meanfield.ot import Measure
        >>> Measure([[0.0], [1.0]], [2.0, 3.0]).mass
        5.0
        """
        return float(self.weights.sum())

    @property
    def is_density(self) -> bool:
        """Whether the measure is a density piecewise constant on cells (``edges`` given).

        Examples
        --------
        >>> from meanfield.ot import Measure
        >>> Measure.from_histogram([1.0, 1.0], [0.0, 1.0, 2.0]).is_density
        True
        """
        return self.edges is not None

    def atoms(self) -> Measure:
        """The same points and weights read as atoms (a density's cells dropped).

        Returns
        -------
        Measure
            Without ``edges``: a density becomes atoms at its cell centres.

        Examples
        --------
        >>> from meanfield.ot import Measure
        >>> m = Measure.from_histogram([1.0, 1.0], [0.0, 1.0, 2.0])
        >>> m.atoms().is_density, m.atoms().points[:, 0]
        (False, array([0.5, 1.5]))
        """
        return Measure(self.points, self.weights)

    def __repr__(self) -> str:
        kind = "density on cells" if self.is_density else "atoms"
        return f"Measure({kind}, n={self.size}, p={self.dim}, mass={self.mass:.6g})"


# ----------------------------------------------------------------------------------------
# the quantile function of a 1D measure, as linear pieces
# ----------------------------------------------------------------------------------------
def _cumulative_fractions(w: np.ndarray) -> np.ndarray:
    """(0, w_1, w_1 + w_2, ..., Σ w) / Σ w, each correctly rounded (w > 0, shape (K,)).

    The partial sums are exact (integers: each float64 weight is m 2^e with an integer m of
    53 bits, brought to the smallest exponent), and each fraction is one correctly rounded
    integer division, so every breakpoint of the quantile function is within u of the true
    one; ``np.cumsum`` would let the k-th drift by k u, and the W_q^q of the quantile formula
    by up to K² u D^q (the certificate of :func:`meanfield.ot.distance.wasserstein` counts u).
    """
    mant, expo = np.frexp(w)
    ints = np.ldexp(mant, 53).astype(np.int64)  # exact: 53-bit significands
    low = int(expo.min())
    total, sums = 0, [0]
    for m, e in zip(ints.tolist(), (expo - low).tolist(), strict=True):
        total += m << e
        sums.append(total)
    return np.array([s / total for s in sums])  # int / int: correctly rounded


def _atom_segments(x, w):
    """Quantile function of Σ w_k δ_{x_k} as segments (cum (K+1,), lo (K,), hi (K,))."""
    order = np.argsort(x, kind="stable")
    x, w = x[order], w[order]
    keep = w > 0
    x, w = x[keep], w[keep]
    return _cumulative_fractions(w), x, x


def _cell_segments(e, m):
    """Quantile function of a 1D density of cell masses m on edges e (linear on each cell)."""
    keep = m > 0
    cum = _cumulative_fractions(m[keep])
    lo, hi = e[:-1][keep], e[1:][keep]
    # masses below the rounding of the running sum give zero-width quantile pieces: drop them
    step = np.diff(cum) > 0
    return np.concatenate([[0.0], cum[1:][step]]), lo[step], hi[step]


def quantile_segments(measure: Measure) -> tuple:
    """The quantile function of a measure on the line as linear pieces ``(cum, lo, hi)``.

    Q(u) runs linearly from ``lo[k]`` to ``hi[k]`` for u in [``cum[k]``, ``cum[k+1]``]: a
    jump-free ramp across each cell of a density, a flat piece (lo = hi) for each atom.

    Parameters
    ----------
    measure : Measure
        Of dimension 1.

    Returns
    -------
    tuple of numpy.ndarray
        ``cum`` (K + 1,) from 0 to 1, ``lo`` (K,), ``hi`` (K,).

    See Also
    --------
    Measure : the measure it reads.
    meanfield.ot.distance.wasserstein : the ``"quantile"`` method built on it.
    meanfield.closed_forms.Law1D : an exact law's quantile function.

    References
    ----------
    - C. Villani, *Optimal Transport: Old and New*, Grundlehren 338, Springer, 2009.
    - G. Peyré, M. Cuturi, "Computational optimal transport", Found. Trends Mach. Learn. 11 (2019)
      355–607.

    Examples
    --------
    >>> from meanfield.ot import Measure
    >>> from meanfield.ot.measure import quantile_segments
    >>> quantile_segments(Measure.from_histogram([1.0, 3.0], [0.0, 1.0, 2.0]))
    (array([0.  , 0.25, 1.  ]), array([0., 1.]), array([1., 2.]))
    """
    if measure.dim != 1:
        raise InputError(f"a quantile function needs a measure on the line, got p = {measure.dim}")
    if measure.is_density:
        return _cell_segments(measure.edges[0], measure.weights)
    return _atom_segments(measure.points[:, 0], measure.weights)
