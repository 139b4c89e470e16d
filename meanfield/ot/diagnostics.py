"""How far the particles are from the grid density, measured as a user would measure it.

Wasserstein distances (on POT), the kernel gap on the data, and the free energy of a density.

Conventions
-----------
* Both measures are normalised to probability measures before any distance is taken.
* A grid density is *piecewise constant* on its cells (``density_model="cells"``): this is
  how the finite-volume solver reads it.  In p = 1 every distance to or between such
  densities is computed exactly from quantile functions (piecewise linear for a cell
  density, piecewise constant for particles), merged on their common breakpoints and
  integrated in closed form: W_q^q = ∫_0^1 |Q_μ(u) − Q_ρ(u)|^q du.
* In p = 2 and 3 the grid density is replaced by atoms at the cell centres carrying the cell masses
  (``density_model="centres"``), and W_q is the exact optimal-transport cost from
  ``ot.emd2`` (network simplex, float64 weights, cells of zero mass dropped).  Moving each
  cell's mass to its centre costs at most h √(p/12) in W2, a bias of that size.
* For large problems (N × M_support > :data:`EXACT_MAX_PAIRS`) ``method="auto"`` switches to
  :func:`meanfield.ot.sparse.w2_sparse` ("sparse_exact"): the same exact W2, solved by POT's
  network simplex on a sparse support grown by column generation and certified by a dual
  check over every pair (order 2 only; W1 stays on the dense simplex).  The sliced distance SW_2
  (``ot.sliced_wasserstein_distance``, SW_2 ≤ W_2, a different quantity) is computed only when
  asked for with ``method="sliced"``, and whoever records it names it "sliced_w2", never
  "w2".  :func:`resolve_w_method` is the one place where "auto" is decided.
"""

from __future__ import annotations

import math

import numpy as np
import ot
import torch

from .._validation import check_array, check_choice, check_int, check_sample
from ..energy import Energy
from ..errors import ConvergenceError, InputError
from ..features import FeatureMap, get_feature_map
from ..pde.field import Density
from ..pde.potential import GridEnergy
from .sparse import w2_sparse

#: Largest N × M (number of cost-matrix entries) for which ``method="auto"`` runs the dense
#: network simplex (``ot.emd2``) in p = 2, 3.  Above it the sparse exact solver
#: (:func:`meanfield.ot.sparse.w2_sparse`, the same value to rounding) is faster: measured
#: with benchmarks/bench_w2.py on the 2-core CPU, the dense solve takes 0.1 s at 1e6 entries,
#: 0.9 s at 4.4e6 and 3.5 s at 1.2e7 against 0.1, 0.1 and 0.3 s for the sparse one (and
#: minutes and gigabytes at 1.6e8, against seconds).
EXACT_MAX_PAIRS = 1_000_000
#: Iteration cap of the network simplex (POT's default, 1e5, is too small for 1e4 × 1e4).
EMD_MAX_ITER = 100_000_000


# ----------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------
W2_METHODS = ("auto", "exact", "sparse_exact", "sliced")


def resolve_w_method(p: int, n_a: int, n_b: int, method: str = "auto", order: int = 2) -> str:
    """The distance ``method="auto"`` computes: "exact" or "sparse_exact", never "sliced".

    Parameters
    ----------
    p : int
        Dimension.
    n_a, n_b : int
        Support sizes of the two measures (particles, cells of non-zero mass).
    method : {"auto", "exact", "sparse_exact", "sliced"}
    order : {1, 2}
        W1 has no sparse solver: "auto" keeps it on the dense simplex.

    Returns
    -------
    str
        ``method`` itself unless "auto"; then "exact" in p = 1, for W1, or while
        n_a × n_b ≤ :data:`EXACT_MAX_PAIRS`, else "sparse_exact" (the same value, exact, on
        a sparse support: :func:`meanfield.ot.sparse.w2_sparse`).

    Examples
    --------
    >>> from meanfield.ot.diagnostics import resolve_w_method
    >>> resolve_w_method(2, 100, 100), resolve_w_method(2, 10_000, 10_000)
    ('exact', 'sparse_exact')
    >>> resolve_w_method(1, 10_000, 10_000), resolve_w_method(2, 100, 100, "sliced")
    ('exact', 'sliced')
    """
    check_choice("method", method, W2_METHODS)
    if method != "auto":
        return method
    small = p == 1 or order == 1 or int(n_a) * int(n_b) <= EXACT_MAX_PAIRS
    return "exact" if small else "sparse_exact"


def w_name(method: str) -> str:
    """The name a recorded distance carries: "sliced_w2" for the sliced one, else "w2".

    Parameters
    ----------
    method : str
        A method of :data:`W2_METHODS` (resolved or not).

    Returns
    -------
    str
        "sliced_w2" or "w2".

    Examples
    --------
    >>> from meanfield.ot.diagnostics import w_name
    >>> w_name("sliced"), w_name("sparse_exact"), w_name("auto")
    ('sliced_w2', 'w2', 'w2')
    """
    return "sliced_w2" if method == "sliced" else "w2"


def _point_distance(xa, wa, xb, wb, order: int, method: str, n_projections: int, seed: int):
    """W_order between two weighted point clouds by an already resolved method (p ≥ 2)."""
    if method == "sliced":
        if order != 2:
            raise ValueError("method='sliced' gives the sliced W2 only (order=2)")
        return sliced_w2(xa, wa, xb, wb, n_projections=n_projections, seed=seed)
    if method == "sparse_exact":
        if order != 2:
            raise ValueError("method='sparse_exact' gives W2 only (order=2); use 'exact'")
        return w2_sparse(xa, wa, xb, wb)["w2"]
    return _emd(xa, wa, xb, wb, order)


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


def _weights(name: str, w, n: int) -> np.ndarray:
    """Non-negative, finite weights, one per point, not all zero."""
    w = check_array(name, w, ndim=1)
    if len(w) != n or np.any(w < 0) or not w.sum() > 0:
        raise InputError(
            f"{name} must be one non-negative number per point ({n}), not all zero; "
            f"got shape {w.shape}"
        )
    return w


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


# ----------------------------------------------------------------------------------------
# exact 1D transport from quantile functions
# ----------------------------------------------------------------------------------------
def _segments_atoms(x, w):
    """Quantile function of Σ w_k δ_{x_k} as segments (cum (K+1,), lo (K,), hi (K,))."""
    order = np.argsort(x, kind="stable")
    x, w = x[order], w[order]
    keep = w > 0
    x, w = x[keep], w[keep]
    cum = np.concatenate([[0.0], np.cumsum(w)])
    cum /= cum[-1]
    return cum, x, x


def _segments_cells(rho: Density):
    """Quantile function of a 1D piecewise-constant density (linear on each cell of mass > 0)."""
    m = rho.masses.ravel()
    e = rho.grid.edges[0]
    keep = m > 0
    cum = np.concatenate([[0.0], np.cumsum(m[keep])])
    cum /= cum[-1]
    lo, hi = e[:-1][keep], e[1:][keep]
    # masses below the rounding of the running sum give zero-width quantile pieces: drop them
    step = np.diff(cum) > 0
    return np.concatenate([[0.0], cum[1:][step]]), lo[step], hi[step]


def _quantile_distance(seg_a, seg_b, order: int) -> float:
    """(∫_0^1 |Q_a − Q_b|^q du)^(1/q) for piecewise-linear quantile functions, exactly."""
    ca, la, ha = seg_a
    cb, lb, hb = seg_b
    u = np.union1d(ca, cb)
    u0, u1 = u[:-1], u[1:]
    du = u1 - u0
    keep = du > 0
    u0, u1, du = u0[keep], u1[keep], du[keep]
    mid = 0.5 * (u0 + u1)

    def q(c, lo, hi, k, uu):
        span = c[k + 1] - c[k]
        return lo[k] + (uu - c[k]) / span * (hi[k] - lo[k])

    ka = np.clip(np.searchsorted(ca, mid, side="right") - 1, 0, len(la) - 1)
    kb = np.clip(np.searchsorted(cb, mid, side="right") - 1, 0, len(lb) - 1)
    d0 = q(ca, la, ha, ka, u0) - q(cb, lb, hb, kb, u0)
    d1 = q(ca, la, ha, ka, u1) - q(cb, lb, hb, kb, u1)
    if order == 2:
        total = (du * (d0 * d0 + d0 * d1 + d1 * d1) / 3.0).sum()
        return math.sqrt(max(float(total), 0.0))
    a0, a1 = np.abs(d0), np.abs(d1)
    same = d0 * d1 >= 0
    with np.errstate(invalid="ignore", divide="ignore"):
        cross = (d0 * d0 + d1 * d1) / (2.0 * (a0 + a1))
    part = np.where(same, 0.5 * (a0 + a1), np.nan_to_num(cross))
    return float((du * part).sum())


# ----------------------------------------------------------------------------------------
# public distances
# ----------------------------------------------------------------------------------------
def _emd(xa, wa, xb, wb, order: int) -> float:
    metric = "sqeuclidean" if order == 2 else "euclidean"
    keep_a, keep_b = wa > 0, wb > 0
    xa, wa, xb, wb = xa[keep_a], wa[keep_a], xb[keep_b], wb[keep_b]
    wa = np.ascontiguousarray(wa / wa.sum(), dtype=np.float64)
    wb = np.ascontiguousarray(wb / wb.sum(), dtype=np.float64)
    M = ot.dist(
        np.ascontiguousarray(xa, dtype=np.float64),
        np.ascontiguousarray(xb, dtype=np.float64),
        metric=metric,
    )
    cost, log = ot.emd2(wa, wb, M, numItermax=EMD_MAX_ITER, log=True)
    if log.get("warning"):
        raise ConvergenceError(f"ot.emd2 did not solve the transport problem: {log['warning']}")
    cost = float(cost)
    return math.sqrt(max(cost, 0.0)) if order == 2 else cost


def sliced_w2(xa, wa, xb, wb, *, n_projections: int = 200, seed: int = 0) -> float:
    r"""Sliced W2 between two weighted point clouds (``ot.sliced_wasserstein_distance``).

    SW2² = E_θ W2²(θ·μ, θ·ν) over uniform directions θ, estimated with ``n_projections``
    seeded directions; SW2 ≤ W2.

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

    >>> import numpy as np
    >>> from meanfield.ot.diagnostics import sliced_w2
    >>> sw = sliced_w2([[0.0, 0.0]], [1.0], [[1.0, 0.0]], [1.0], n_projections=500)
    >>> bool(abs(sw - 2**-0.5) < 0.05), bool(sw <= 1.0)
    (True, True)
    """
    n_projections = check_int("n_projections", n_projections)
    xa = check_sample("xa (points)", xa, ndim=2)
    xb = check_sample("xb (points)", xb, ndim=2)
    if xa.shape[1] != xb.shape[1]:
        raise InputError(
            f"xa and xb must have the same dimension p, got {xa.shape[1]} and {xb.shape[1]}"
        )
    wa, wb = _weights("wa", wa, len(xa)), _weights("wb", wb, len(xb))
    return float(
        ot.sliced_wasserstein_distance(
            np.ascontiguousarray(xa, dtype=np.float64),
            np.ascontiguousarray(xb, dtype=np.float64),
            a=np.asarray(wa, dtype=np.float64) / np.sum(wa),
            b=np.asarray(wb, dtype=np.float64) / np.sum(wb),
            n_projections=n_projections,
            p=2,
            seed=int(seed),
        )
    )


def _density_model(density_model: str | None, p: int) -> str:
    """The checked reading of the grid density: "cells" (default, exact) only in p = 1."""
    model = density_model or ("cells" if p == 1 else "centres")
    check_choice("density_model", model, ("cells", "centres"))
    if model == "cells" and p != 1:
        raise ValueError(f"density_model='cells' is exact only in p = 1; use 'centres' in p = {p}")
    return model


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
    r"""W_q(μ_N, ρ) between a particle cloud and a grid density (q = 1 or 2).

    .. math::

        W_q^q(\mu_N, \rho) = \min_{\pi \in \Pi(\mu_N, \rho)} \int |\omega - \omega'|^q\,
        d\pi(\omega, \omega') = \int_0^1 |Q_{\mu_N}(u) - Q_\rho(u)|^q\, du \ \ (p = 1),

    with Q the quantile functions.

    Parameters
    ----------
    omega : array (N, p)
        Particles (same unit as the grid coordinates).
    density : Density
        Grid density on p ∈ {1, 2, 3}; normalised to mass 1 here.
    order : {1, 2}
        q.
    method : {"auto", "exact", "sparse_exact", "sliced"}
        ``exact``: quantile functions in p = 1, ``ot.emd2`` in p = 2, 3.  ``sparse_exact``:
        the same W2 by :func:`meanfield.ot.sparse.w2_sparse` (order 2).  ``sliced``: SW2, a
        different, smaller quantity (order 2 only; record it as "sliced_w2").  ``auto``:
        exact, or sparse_exact when N × M > :data:`EXACT_MAX_PAIRS`, never sliced
        (:func:`resolve_w_method` says which).
    weights : array (N,), optional
        Particle weights (default uniform).
    density_model : {"cells", "centres"}, optional
        How the grid density is read (module docstring); default "cells" in p = 1 (exact),
        "centres" in p = 2, 3 (the only one available there).
    n_projections, seed : int
        Sliced distance only.

    Returns
    -------
    float
        The distance, in the unit of ω.

    Examples
    --------
    One particle at 0 against the uniform law on [−1, 1]: W2 = (E X²)^½ = 1/√3 and
    W1 = E|X| = 1/2.

    >>> import math
    >>> from meanfield.ot.diagnostics import wasserstein_particles_grid
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
    >>> math.isclose(wasserstein_particles_grid([[0.0]], rho), 1 / math.sqrt(3))
    True
    >>> round(wasserstein_particles_grid([[0.0]], rho, order=1), 12)
    0.5
    """
    rho = _density(density)
    p = rho.grid.dim
    order = _check_order(order)
    check_choice("method", method, W2_METHODS)
    model = _density_model(density_model, p)
    x, w = _particles(omega, p, weights)
    cells = rho.masses.ravel()
    method = resolve_w_method(p, len(x), np.count_nonzero(cells), method, order)
    if p == 1 and method != "sliced":  # the quantile formula is exact and cheapest in p = 1
        seg_b = (
            _segments_cells(rho)
            if model == "cells"
            else _segments_atoms(rho.grid.centers[:, 0], cells)
        )
        return _quantile_distance(_segments_atoms(x[:, 0], w), seg_b, order)
    return _point_distance(x, w, rho.grid.centers, cells, order, method, n_projections, seed)


def w1_particles_grid(omega, density: Density, **kwargs) -> float:
    """W1(μ_N, ρ); see :func:`wasserstein_particles_grid`.

    Examples
    --------
    >>> from meanfield.ot.diagnostics import w1_particles_grid
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> rho = Density.uniform(Grid(Box(1, 1.0), 4))
    >>> round(w1_particles_grid([[0.0]], rho), 12)  # E|X| for X ~ U(−1, 1)
    0.5
    """
    return wasserstein_particles_grid(omega, density, order=1, **kwargs)


def w2_particles_grid(omega, density: Density, **kwargs) -> float:
    """W2(μ_N, ρ); see :func:`wasserstein_particles_grid`.

    Examples
    --------
    In p = 2 the density is read as atoms at the cell centres; particles on those centres
    are at distance 0.

    >>> from meanfield.ot.diagnostics import w2_particles_grid
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> grid = Grid(Box(2, 1.0), 4)
    >>> round(w2_particles_grid(grid.centers, Density.uniform(grid)), 12)
    0.0
    """
    return wasserstein_particles_grid(omega, density, order=2, **kwargs)


def wasserstein_grids(
    rho_a: Density,
    rho_b: Density,
    *,
    order: int = 2,
    method: str = "auto",
    n_projections: int = 200,
    seed: int = 0,
) -> float:
    """W_q between two grid densities (normalised to mass 1).

    p = 1: exact, both densities piecewise constant (the grids may differ but must be 1D).
    p = 2, 3: ``ot.emd2`` between the cell-centre atoms (cost matrix M_a × M_b, zero cells
    dropped), the same value on a sparse support (:func:`meanfield.ot.sparse.w2_sparse`)
    when ``method="sparse_exact"`` or the product exceeds :data:`EXACT_MAX_PAIRS` under
    ``method="auto"``, or the sliced W2 only when ``method="sliced"``.

    Parameters
    ----------
    rho_a, rho_b : Density
        Grid densities of the same dimension p.
    order : {1, 2}
        q.
    method : {"auto", "exact", "sparse_exact", "sliced"}
        As in :func:`wasserstein_particles_grid`.
    n_projections, seed : int
        Sliced distance only.

    Returns
    -------
    float
        The distance, in the unit of ω.

    Examples
    --------
    U(−1, 1) against U(0, 1): Q_a(u) = 2u − 1, Q_b(u) = u, so W2² = ∫(1 − u)² du = 1/3
    and W1 = 1/2.

    >>> import math
    >>> from meanfield.ot.diagnostics import wasserstein_grids
    >>> from meanfield.domains import Box
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> grid = Grid(Box(1, 1.0), 4)
    >>> a, b = Density.uniform(grid), Density(grid, [0.0, 0.0, 1.0, 1.0])
    >>> math.isclose(wasserstein_grids(a, b), 1 / math.sqrt(3))
    True
    >>> round(wasserstein_grids(a, b, order=1), 12)
    0.5
    """
    a, b = _density(rho_a, "rho_a"), _density(rho_b, "rho_b")
    if a.grid.dim != b.grid.dim:
        raise ValueError(f"incompatible densities: p={a.grid.dim} and p={b.grid.dim}")
    order = _check_order(order)
    check_choice("method", method, W2_METHODS)
    if a.grid.dim == 1:
        if method == "sliced":
            raise ValueError(
                "method='sliced' is for p = 2, 3; in p = 1 the exact distance is cheap"
            )
        return _quantile_distance(_segments_cells(a), _segments_cells(b), order)
    ma, mb = a.masses.ravel(), b.masses.ravel()
    method = resolve_w_method(a.grid.dim, np.count_nonzero(ma), np.count_nonzero(mb), method, order)
    return _point_distance(
        a.grid.centers, ma, b.grid.centers, mb, order, method, n_projections, seed
    )


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


__all__ = [
    "wasserstein_particles_grid",
    "w1_particles_grid",
    "w2_particles_grid",
    "wasserstein_grids",
    "sliced_w2",
    "grid_kernel",
    "kernel_gap",
    "free_energy",
    "EXACT_MAX_PAIRS",
    "W2_METHODS",
    "resolve_w_method",
    "w_name",
]
