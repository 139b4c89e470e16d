"""The kernel gap on the data and the free energy of a density: how far the two views of the
model are apart, beside the Wasserstein distance.

* :func:`kernel_gap`, :func:`grid_kernel`: how far the kernel of the particles is from the
  kernel of the grid density on the data points;
* :func:`free_energy`: the discrete free energy of a density and its parts.

The Wasserstein distances have one home, :func:`meanfield.ot.distance.wasserstein` on two
:class:`~meanfield.ot.measure.Measure`\\ s (``mf.ot.w2(a, b)``).
"""

from __future__ import annotations

import numpy as np
import torch

from .._validation import check_array
from ..energy import Energy
from ..errors import InputError, InputTypeError
from ..features import FeatureMap, get_feature_map
from ..pde.field import Density
from ..pde.potential import GridEnergy

__all__ = ["grid_kernel", "kernel_gap", "free_energy"]


def _particles(omega, p: int) -> np.ndarray:
    """The particles as an (N, p) array, checked against the grid's dimension p."""
    x = check_array("omega (particles)", omega)
    if x.ndim == 1 and p == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] != p:
        raise InputError(f"omega must have shape (N, {p}) to match the grid, got {x.shape}")
    if len(x) == 0:
        raise InputError("omega (particles) is empty; it must hold at least one particle")
    return x


def _density(rho, name="density") -> Density:
    if not isinstance(rho, Density):
        raise InputTypeError(f"{name} must be a meanfield.pde.Density, got {type(rho).__name__}")
    if not rho.mass > 0:
        raise InputError(f"{name} has zero mass; it must have mass > 0 (it is normalised)")
    return rho


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

    See Also
    --------
    kernel_gap : the largest difference between this kernel and the particles' one.
    meanfield.features.FeatureMap.empirical_kernel : the kernel of N particles.

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
        raise InputError(
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

    See Also
    --------
    grid_kernel : the kernel K_ρ of the grid density.
    meanfield.ot.distance.wasserstein : the distance between the two measures themselves.

    References
    ----------
    .. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines",
       NeurIPS 2007 (the kernel of random features).

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
    if len(X) == 0:  # a max over no entries
        raise InputError("X must hold n >= 1 data points (rows), got shape (0, d)")
    Kr = grid_kernel(fmap, X, density)
    x = _particles(omega, density.grid.dim)
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

    See Also
    --------
    meanfield.pde.potential.GridEnergy.free_energy_terms : the discrete functional computed here.
    meanfield.pde.trackers.FreeEnergyTracker : F_β recorded along a solve.

    References
    ----------
    .. [1] J. A. Carrillo, R. J. McCann and C. Villani, "Kinetic equilibration rates for granular
       media and related equations: entropy dissipation and mass transportation estimates",
       Rev. Mat. Iberoam. 19 (2003) (F_β and its decay along the flow).

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
        raise InputError(f"beta must be in (0, inf], got {beta!r}")
    return GridEnergy(energy, rho.grid).free_energy_terms(rho.data, float(beta))
