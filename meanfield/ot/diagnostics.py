"""The kernel gap on the data and the free energy of a density; the distances of earlier versions.

* :func:`kernel_gap`, :func:`grid_kernel`: how far the kernel of the particles is from the
  kernel of the grid density on the data points;
* :func:`free_energy`: the discrete free energy of a density and its parts.

The Wasserstein distances moved to one entry point, :func:`meanfield.ot.distance.wasserstein`
on two :class:`~meanfield.ot.measure.Measure`\\ s (``mf.ot.w2(a, b)``).  The functions of
earlier versions — :func:`wasserstein_particles_grid`, :func:`w1_particles_grid`,
:func:`w2_particles_grid`, :func:`wasserstein_grids`, :func:`sliced_w2` — still work for one
release, with a ``DeprecationWarning`` naming the call that replaces them, and return the
same numbers bit for bit (they build the two measures and run the same method).
:func:`resolve_w_method`, :func:`w_name`, :data:`EXACT_MAX_PAIRS` and :data:`W2_METHODS` live
in :mod:`meanfield.ot.distance` and are re-exported here.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from .._validation import check_array, check_choice, check_int, check_sample
from ..energy import Energy
from ..errors import InputError
from ..features import FeatureMap, get_feature_map
from ..pde.field import Density
from ..pde.potential import GridEnergy
from .distance import EMD_MAX_ITER, EXACT_MAX_PAIRS, W2_METHODS, _compute, resolve_w_method, w_name
from .measure import Measure
from .measure import _check_weights as _weights

__all__ = [
    "grid_kernel",
    "kernel_gap",
    "free_energy",
    "wasserstein_particles_grid",
    "w1_particles_grid",
    "w2_particles_grid",
    "wasserstein_grids",
    "sliced_w2",
    "EXACT_MAX_PAIRS",
    "EMD_MAX_ITER",
    "W2_METHODS",
    "resolve_w_method",
    "w_name",
]


def _deprecated(old: str, new: str) -> None:
    """The DeprecationWarning of a distance function of earlier versions, at its caller."""
    warnings.warn(
        f"meanfield.ot.diagnostics.{old} is deprecated and will be removed in the next "
        f"version; use {new}",
        DeprecationWarning,
        stacklevel=3,
    )


def _particles(omega, p: int, weights=None):
    x = check_array("omega (particles)", omega)
    if x.ndim == 1 and p == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] != p:
        raise InputError(f"omega must have shape (N, {p}) to match the grid, got {x.shape}")
    if len(x) == 0:
        raise InputError("omega (particles) is empty; it must hold at least one particle")
    if weights is None:
        w = np.full(len(x), 1.0 / len(x))
    else:
        w = _weights("weights", weights, len(x))
        w = w / w.sum()
    return x, w


def _density(rho, name="density") -> Density:
    if not isinstance(rho, Density):
        raise TypeError(f"{name} must be a meanfield.pde.Density, got {type(rho).__name__}")
    if not rho.mass > 0:
        raise InputError(f"{name} has zero mass; a distance needs a density of mass > 0")
    return rho


def _check_order(order) -> int:
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2 (W1 or W2), got {order!r}")
    return int(order)


def _density_model(density_model: str | None, p: int) -> str:
    """The checked reading of the grid density: "cells" (default, exact) only in p = 1."""
    model = density_model or ("cells" if p == 1 else "centres")
    check_choice("density_model", model, ("cells", "centres"))
    if model == "cells" and p != 1:
        raise ValueError(f"density_model='cells' is exact only in p = 1; use 'centres' in p = {p}")
    return model


def _run(a: Measure, b: Measure, order: int, method: str, n_projections: int, seed: int) -> float:
    """The distance of the old functions: their resolved method run by the new code."""
    if method == "sliced":
        if order != 2:
            raise ValueError("method='sliced' gives the sliced W2 only (order=2)")
        opts = {"n_projections": check_int("n_projections", n_projections), "seed": seed}
        return _compute(a, b, 2, "sliced", opts).distance
    if method == "sparse_exact":
        if order != 2:
            raise ValueError("method='sparse_exact' gives W2 only (order=2); use 'exact'")
        return _compute(a, b, 2, "sparse", {}).distance
    return _compute(a, b, order, method, {}).distance


# ----------------------------------------------------------------------------------------
# the distance functions of earlier versions (deprecated)
# ----------------------------------------------------------------------------------------
_NEW_PG = (
    "meanfield.ot.wasserstein(Measure.from_particles(omega, weights), "
    "Measure.from_density(density), order, method)"
)


def wasserstein_particles_grid(
    omega,
    density: Density,
    *,
    order: int = 2,
    method: str = "auto",
    weights=None,
    density_model: str | None = None,
    n_projections: int = 200,
    seed: int = 0,
) -> float:
    r"""W_q(μ_N, ρ) between a particle cloud and a grid density (q = 1 or 2). Deprecated.

    .. deprecated:: 0.1.0
        Use ``meanfield.ot.wasserstein(Measure.from_particles(omega, weights),
        Measure.from_density(density), order, method).distance`` (the same number);
        ``density_model="centres"`` in p = 1 is ``Measure.from_density(density).atoms()``.

    Parameters
    ----------
    omega : array (N, p)
        Particles (same unit as the grid coordinates).
    density : Density
        Grid density on p ∈ {1, 2, 3}; normalised to mass 1 here.
    order : {1, 2}
        q.
    method : {"auto", "exact", "sparse_exact", "sliced"}
        As in :func:`meanfield.ot.distance.wasserstein` ("sparse_exact" is its "sparse");
        in p = 1 every method but "sliced" is the exact quantile formula.
    weights : array (N,), optional
        Particle weights (default uniform).
    density_model : {"cells", "centres"}, optional
        "cells" (default in p = 1, exact) or "centres" (atoms at the cell centres, the only
        reading in p = 2, 3).
    n_projections, seed : int
        Sliced distance only.

    Returns
    -------
    float
        The distance, in the unit of ω.

    Examples
    --------
    >>> import math, warnings
    >>> from meanfield.ot.diagnostics import wasserstein_particles_grid
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     d = wasserstein_particles_grid([[0.0]], rho)
    >>> math.isclose(d, 1 / math.sqrt(3)), seen[0].category.__name__
    (True, 'DeprecationWarning')
    """
    _deprecated("wasserstein_particles_grid", _NEW_PG)
    return _particles_grid(
        omega, density, order, method, weights, density_model, n_projections, seed
    )


def _particles_grid(omega, density, order, method, weights, density_model, n_projections, seed):
    rho = _density(density)
    p = rho.grid.dim
    order = _check_order(order)
    check_choice("method", method, W2_METHODS)
    model = _density_model(density_model, p)
    x, w = _particles(omega, p, weights)
    cells = rho.masses.ravel()
    method = resolve_w_method(p, len(x), np.count_nonzero(cells), method, order)
    b = Measure.from_density(rho)
    if model == "centres":
        b = b.atoms()
    if p == 1 and method != "sliced":  # the quantile formula is exact and cheapest in p = 1
        method = "quantile"
    return _run(Measure(x, w), b, order, method, n_projections, seed)


def w1_particles_grid(omega, density: Density, **kwargs) -> float:
    """W1(μ_N, ρ); see :func:`wasserstein_particles_grid`. Deprecated.

    .. deprecated:: 0.1.0
        Use ``meanfield.ot.w1(Measure.from_particles(omega), Measure.from_density(density))``.

    Examples
    --------
    >>> import warnings
    >>> from meanfield.ot.diagnostics import w1_particles_grid
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     round(w1_particles_grid([[0.0]], rho), 12)  # E|X| for X ~ U(−1, 1)
    0.5
    """
    _deprecated(
        "w1_particles_grid",
        "meanfield.ot.w1(Measure.from_particles(omega), Measure.from_density(density))",
    )
    return _particles_grid_kw(omega, density, 1, **kwargs)


def w2_particles_grid(omega, density: Density, **kwargs) -> float:
    """W2(μ_N, ρ); see :func:`wasserstein_particles_grid`. Deprecated.

    .. deprecated:: 0.1.0
        Use ``meanfield.ot.w2(Measure.from_particles(omega), Measure.from_density(density))``.

    Examples
    --------
    >>> import warnings
    >>> from meanfield.ot.diagnostics import w2_particles_grid
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> grid = Grid(Box(2, 1.0), 4)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     round(w2_particles_grid(grid.centers, Density.uniform(grid)), 12)
    0.0
    """
    _deprecated(
        "w2_particles_grid",
        "meanfield.ot.w2(Measure.from_particles(omega), Measure.from_density(density))",
    )
    return _particles_grid_kw(omega, density, 2, **kwargs)


def _particles_grid_kw(
    omega,
    density,
    order,
    *,
    method="auto",
    weights=None,
    density_model=None,
    n_projections=200,
    seed=0,
):
    return _particles_grid(
        omega, density, order, method, weights, density_model, n_projections, seed
    )


def wasserstein_grids(
    rho_a: Density,
    rho_b: Density,
    *,
    order: int = 2,
    method: str = "auto",
    n_projections: int = 200,
    seed: int = 0,
) -> float:
    """W_q between two grid densities (normalised to mass 1). Deprecated.

    .. deprecated:: 0.1.0
        Use ``meanfield.ot.wasserstein(Measure.from_density(rho_a),
        Measure.from_density(rho_b), order, method).distance`` (the same number).

    Parameters
    ----------
    rho_a, rho_b : Density
        Grid densities of the same dimension p (exact in p = 1, the cells read as atoms at
        their centres in p = 2, 3).
    order : {1, 2}
        q.
    method : {"auto", "exact", "sparse_exact", "sliced"}
        As in :func:`wasserstein_particles_grid` ("sliced" only in p = 2, 3).
    n_projections, seed : int
        Sliced distance only.

    Returns
    -------
    float
        The distance, in the unit of ω.

    Examples
    --------
    U(−1, 1) against U(0, 1): W2 = 1/√3.

    >>> import math, warnings
    >>> from meanfield.ot.diagnostics import wasserstein_grids
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> grid = Grid(Box(1, 1.0), 4)
    >>> a, b = Density.uniform(grid), Density(grid, [0.0, 0.0, 1.0, 1.0])
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     math.isclose(wasserstein_grids(a, b), 1 / math.sqrt(3))
    True
    """
    _deprecated(
        "wasserstein_grids",
        "meanfield.ot.wasserstein(Measure.from_density(rho_a), Measure.from_density(rho_b), "
        "order, method)",
    )
    a, b = _density(rho_a, "rho_a"), _density(rho_b, "rho_b")
    if a.grid.dim != b.grid.dim:
        raise ValueError(f"incompatible densities: p={a.grid.dim} and p={b.grid.dim}")
    order = _check_order(order)
    check_choice("method", method, W2_METHODS)
    ma, mb = Measure.from_density(a), Measure.from_density(b)
    if a.grid.dim == 1:
        if method == "sliced":
            raise ValueError(
                "method='sliced' is for p = 2, 3; in p = 1 the exact distance is cheap"
            )
        return _run(ma, mb, order, "quantile", n_projections, seed)
    n_a, n_b = np.count_nonzero(ma.weights), np.count_nonzero(mb.weights)
    method = resolve_w_method(a.grid.dim, n_a, n_b, method, order)
    return _run(ma, mb, order, method, n_projections, seed)


def sliced_w2(xa, wa, xb, wb, *, n_projections: int = 200, seed: int = 0) -> float:
    r"""Sliced W2 between two weighted point clouds (``ot.sliced_wasserstein_distance``).
    Deprecated.

    .. deprecated:: 0.1.0
        Use ``meanfield.ot.w2(Measure(xa, wa), Measure(xb, wb), method="sliced",
        n_projections=..., seed=...).distance`` (the same number).

    .. math::

        SW_2^2(\mu, \nu) = \int_{S^{p-1}} W_2^2(\theta_\# \mu, \theta_\# \nu)\, d\sigma(\theta)
        \le W_2^2(\mu, \nu).

    Parameters
    ----------
    xa : array (Na, p)
    wa : array (Na,)
        Points and non-negative weights of the first measure (normalised here).
    xb : array (Nb, p)
    wb : array (Nb,)
        The second measure.
    n_projections : int, default 200
        Number of random directions θ.
    seed : int, default 0
        Seed of the directions.

    Returns
    -------
    float
        The Monte Carlo estimate of SW2, in the unit of the points.

    Examples
    --------
    A translation by v in the plane: W2 = |v| and SW2 = |v|/√2 ≈ 0.707 for |v| = 1.

    >>> import warnings
    >>> from meanfield.ot.diagnostics import sliced_w2
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     sw = sliced_w2([[0.0, 0.0]], [1.0], [[1.0, 0.0]], [1.0], n_projections=500)
    >>> bool(abs(sw - 2**-0.5) < 0.05), bool(sw <= 1.0)
    (True, True)
    """
    _deprecated(
        "sliced_w2",
        'meanfield.ot.w2(Measure(xa, wa), Measure(xb, wb), method="sliced", ...)',
    )
    n_projections = check_int("n_projections", n_projections)
    xa = check_sample("xa (points)", xa, ndim=2)
    xb = check_sample("xb (points)", xb, ndim=2)
    if xa.shape[1] != xb.shape[1]:
        raise InputError(
            f"xa and xb must have the same dimension p, got {xa.shape[1]} and {xb.shape[1]}"
        )
    wa, wb = _weights("wa", wa, len(xa)), _weights("wb", wb, len(xb))
    return _run(Measure(xa, wa), Measure(xb, wb), 2, "sliced", n_projections, seed)


# ----------------------------------------------------------------------------------------
# kernel gap and free energy
# ----------------------------------------------------------------------------------------
def grid_kernel(feature, X, density: Density) -> np.ndarray:
    r"""K_ρ(x_j, x_k) = ∫ φ(x_j; ω) φ(x_k; ω) ρ(ω) dω by the cell midpoint rule, shape (n, n).

    The midpoint rule is second order in the cell width for smooth φ.

    .. math::

        K_\rho(x_j, x_k) \approx \sum_{c} \frac{m_c}{\sum_{c'} m_{c'}}\,
        \varphi(x_j; \omega_c)\, \varphi(x_k; \omega_c),

    with m_c the mass of cell c and ω_c its centre.

    Parameters
    ----------
    feature : str or FeatureMap
        Feature map φ (:mod:`meanfield.features`).
    X : array (n, d)
        Data points.
    density : Density
        Grid density on particles of the feature's dimension p.

    Returns
    -------
    numpy.ndarray (n, n)
        The kernel matrix, symmetric positive semi-definite.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.ot.diagnostics import grid_kernel
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    >>> K = grid_kernel("positive", X, Density.uniform(Grid(Box(2, 1.0), 4)))
    >>> K.shape, bool(np.allclose(K, K.T)), bool(np.linalg.eigvalsh(K).min() > -1e-12)
    ((3, 3), True, True)
    """
    fmap = get_feature_map(feature)
    rho = _density(density)
    X = check_array("X", X, ndim=2)
    p = fmap.particle_dim(X.shape[1])
    if p != rho.grid.dim:
        raise ValueError(
            f"feature {fmap.name!r} on data of dimension d={X.shape[1]} needs "
            f"particles of dimension p={p}, but the grid has p={rho.grid.dim}"
        )
    centres = torch.as_tensor(rho.grid.centers, dtype=torch.float64)
    phi = fmap.evaluate(torch.as_tensor(X), centres).numpy()  # (M, n)
    w = rho.masses.ravel() / rho.mass
    return (phi * w[:, None]).T @ phi


def kernel_gap(omega, density: Density, X, feature: str | FeatureMap = "positive") -> float:
    r"""max_jk |K_{μ_N}(x_j, x_k) − K_ρ(x_j, x_k)| on the data points X.

    .. math::

        \max_{j,k} \Big| \frac1N \sum_{i=1}^N \varphi(x_j; \omega_i)\, \varphi(x_k; \omega_i)
        - K_\rho(x_j, x_k) \Big|.

    Parameters
    ----------
    omega : array (N, p)
        Particles; K_{μ_N} = (1/N) Σ_i φ(x; ω_i) φ(x'; ω_i) (:mod:`meanfield.features`).
    density : Density
        Grid density (normalised to mass 1); K_ρ by :func:`grid_kernel`.
    X : array (n, d)
        Data points.
    feature : str or FeatureMap

    Returns
    -------
    float
        The gap (unit of the kernel, dimensionless for the features here).

    Examples
    --------
    One particle on each cell centre of a uniform density: the two kernels coincide.

    >>> import numpy as np
    >>> from meanfield.ot.diagnostics import kernel_gap
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> grid = Grid(Box(2, 1.0), 4)
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    >>> kernel_gap(grid.centers, Density.uniform(grid), X) < 1e-12
    True
    """
    fmap = get_feature_map(feature)
    X = check_array("X", X, ndim=2)
    Kr = grid_kernel(fmap, X, density)
    x, _ = _particles(omega, density.grid.dim)
    KN = fmap.empirical_kernel(torch.as_tensor(X), torch.as_tensor(x)).numpy()
    return float(np.max(np.abs(KN - Kr)))


def free_energy(energy: Energy, density: Density, beta: float) -> dict:
    r"""The discrete free energy F_β(ρ) = E(ρ) + β⁻¹ ∫ ρ log ρ and its parts.

    .. math::

        F_\beta(\rho) = E(\rho) + \frac1\beta \int \rho \log \rho \, d\omega .

    Parameters
    ----------
    energy : Energy
        Must live on the density's box (see :class:`~meanfield.pde.potential.GridEnergy`).
    density : Density
    beta : float
        β > 0, or ``math.inf`` for E alone.

    Returns
    -------
    dict
        ``free_energy``, ``energy``, ``entropy`` (the β⁻¹ ∫ρ log ρ term) and one entry per
        energy term (keyed as ``Energy.term_values``).

    Examples
    --------
    The uniform density on [−1, 1] has ∫ρ log ρ = log ½; V = ω²/2 at the four cell centres
    ±1/4, ±3/4 averages 5/32.

    >>> import math
    >>> from meanfield.ot.diagnostics import free_energy
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> box = Box(1, 1.0)
    >>> parts = free_energy(Energy([QuadraticPotential()], box), Density.uniform(Grid(box, 4)), 1.0)
    >>> parts["energy"], math.isclose(parts["entropy"], math.log(0.5))
    (0.15625, True)
    >>> math.isclose(parts["free_energy"], 5 / 32 - math.log(2))
    True
    """
    rho = _density(density)
    if not (beta > 0):
        raise ValueError(f"beta must be in (0, inf], got {beta!r}")
    return GridEnergy(energy, rho.grid).free_energy_terms(rho.data, float(beta))
