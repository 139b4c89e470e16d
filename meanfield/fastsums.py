"""Fast pair sums for the Coulomb kernel of R^p, p = 1, 2, 3: a drop-in :class:`PairInteraction`.

The direct pair sum costs O(N²).  For the Coulomb kernel of the particle dimension (THEORY §2,
Riesz s = p − 2, unsoftened) the structure allows much less:

* **p = 1, k(z) = −‖z‖** (s = −1).  After sorting, Σ_{i≠j} ‖x_i − x_j‖ = 2 Σ_r (2r − N + 1) x_(r)
  (0-based rank r) and the force is ∇_{x_i} Σ_j −‖x_i − x_j‖ = −(#{x_j < x_i} − #{x_j > x_i}):
  a function of the rank.  O(N log N), exact (integer counts, one ordered sum).
* **p = 2, k(z) = −log‖z‖** (s = 0).  Spectral Ewald summation with the non-uniform FFT
  (``finufft``): a Gaussian split into a short-range part ½E₁(r²/σ²) summed over neighbour
  pairs (a compiled cell list, :mod:`meanfield._fastsums_near`: no pair list is stored) and a
  smooth part summed in Fourier space with the free-space kernel truncated at radius R
  (Vico–Greengard–Ferrando 2016), so no periodic images enter.  The cutoff holds a fixed
  median number of neighbours (:data:`NEAR_NEIGHBOURS`), so it shrinks as N^(−1/2) and the
  Fourier modes grow as N: O(N log N) time and O(N) memory at fixed tolerance, both parts on
  ``n_threads`` threads (why not the 2D FMM ``fmm2dpy``: ``docs/interactions.rst``).
* **p = 3, k(z) = 1/‖z‖** (s = 1).  The fast multipole method of ``fmm3dpy`` (FMM3D, Flatiron
  Institute), O(N) at fixed tolerance; it computes Σ q/(4π r), rescaled here by 4π.  FMM3D
  rounds a pair at the scale of the coordinates, so pairs closer than τ = 80 · 2⁻⁵² max|x| / eps
  are summed exactly (``meanfield._fastsums_fmm``), or refused if too many.

Softening: all three structures belong to the *unsoftened* kernel (‖z‖² + ε² has no rank
formula, no multipole expansion and no compact split), so a softened kernel is refused with a
named error rather than silently computed with ε = 0.  Coincident particles behave as in the
direct sum: the value is +inf for the singular p = 2, 3 kernels and the gradient takes the zero
subgradient of the pair.

Precision: the sums run in float64 on the CPU whatever the particles' dtype and device (the
libraries are float64 CPU codes); the results are cast back.  ``eps`` (default
:data:`DEFAULT_EPS` = 1e-6) is the requested relative accuracy of the p = 2, 3 sums (p = 1 is
exact): the relative ℓ² error over the particles of the potentials Σ_j k(ω_i − ω_j) and of the
forces, checked against the direct sum in the tests (also on a random subsample at N = 2·10⁴,
``tests/test_fastsums_scaling.py``).  Measured at N = 10⁵ and 10⁶, eps = 1e-6: force errors
1.6–2.6e-8, peak memory ≤ 3 GiB, time × 8–11 for N × 10 (``docs/performance.rst``).

See Also
--------
meanfield.energy.PairInteraction : the direct O(N²) pair sum.

References
----------
L. Greengard, V. Rokhlin, "A fast algorithm for particle simulations", J. Comput. Phys. 73, 1987.
F. Vico, L. Greengard, M. Ferrando, "Fast convolution with free-space Green's functions",
J. Comput. Phys. 323, 2016.
L. af Klinteberg, D. S. Shamshirgar, A.-K. Tornberg, "Fast Ewald summation for free-space
Stokes potentials", Res. Math. Sci. 4, 2017.
A. H. Barnett, J. Magland, L. af Klinteberg, "A parallel nonuniform fast Fourier transform
library based on an 'exponential of semicircle' kernel", SIAM J. Sci. Comput. 41, 2019.
"""

from __future__ import annotations

import numpy as np
import torch

from ._fastsums_ewald import (
    _all_coincident,
    _ewald_field,
    _ewald_sums,
    _import,
    clear_caches,
)
from ._fastsums_fmm import _fmm_field, _fmm_sums
from ._validation import check_int, check_positive
from .contract import Param, declare
from .energy import PairInteraction
from .errors import InputError, InputTypeError
from .kernels import PairKernel, Riesz

#: particle dimension -> Riesz exponent s of its Coulomb kernel, the kernels with a fast sum
COULOMB_S = {1: -1.0, 2: 0.0, 3: 1.0}

#: default tolerance of the p = 2, 3 sums: relative ℓ² force error ≤ 1e-6
DEFAULT_EPS = 1e-6

#: allowed tolerances: below 1e-14 float64 round-off of the sums themselves dominates; above
#: 1e-2 the Ewald split's error bounds (e^{−log(1/eps)} times O(1)) no longer hold
EPS_RANGE = (1e-14, 1e-2)

#: default median number of neighbours inside the p = 2 short-range cutoff, balancing near
#: pairs against Fourier modes: of 64/128/256/512 (N = 1e5, eps = 1e-6, uniform disc, one
#: thread) 256 was fastest (1.5/1.2/1.0/2.5 s), leaving ≈ 5 modes per particle
NEAR_NEIGHBOURS = 256

#: particle dimension -> N below which the direct sum is faster (min_n=None): the crossover of
#: benchmarks/results/fastsums.md (force only, float64, one thread, quiet machine, against the
#: tiled direct sum of meanfield.pairsum: N ≈ 14 000 in p = 2 and ≈ 35 000 in p = 3; the
#: earlier 2200-2400 were measured against the slower row-chunk direct sum), rounded down
DIRECT_BELOW = {1: 0, 2: 14_000, 3: 35_000}


def _check_finite(name: str, t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        got = f"a {t.dtype} tensor" if isinstance(t, torch.Tensor) else type(t).__name__
        raise InputTypeError(f"{name} must be a floating-point torch tensor, got {got}")
    # a tree or FMM over an infinite coordinate does not end well (and NaN would not warn)
    if not bool(torch.isfinite(t).all()):
        raise InputError(f"{name} must be finite for a fast pair sum (found NaN or inf)")


def _points(name: str, x, p: int) -> np.ndarray:
    """``x`` as a float64 (N, p) array of finite points, or a named InputError."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != p:
        raise InputError(f"{name} must be an array of shape (N, {p}), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise InputError(f"{name} must be finite for a fast pair sum (found NaN or inf)")
    return a


def _masses(name: str, w, K: int) -> np.ndarray:
    """``w`` as a float64 (K,) array of finite masses ≥ 0, or a named InputError (a target on
    a negative atom would be −inf, which the coincidence masks do not give)."""
    a = np.asarray(w, dtype=np.float64)
    if a.shape != (K,):
        raise InputError(f"{name} must have shape ({K},) (one mass per atom), got {a.shape}")
    if not (np.isfinite(a).all() and (a >= 0).all()):
        raise InputError(f"{name} must be finite and >= 0 (masses of the atoms)")
    return a


#: The declared parameters of the p = 2, 3 sums (the arrays are checked in each body).
_EPS = Param(
    "eps",
    "real",
    "requested relative l2 accuracy of the sums",
    low=EPS_RANGE[0],
    high=EPS_RANGE[1],
)
_WANT = (
    Param("want_grad", "flag", "compute the gradient"),
    Param("want_value", "flag", "compute the potential"),
)
_EWALD = (
    Param("near", "int", "median number of neighbours inside the short-range cutoff (speed "
          "only)", low=1),
    Param("n_threads", "int", "threads of the near field and of FINUFFT (None: torch's)",
          low=1, optional=True),
    Param("modes_per_particle", "real", "cap on the Fourier modes per particle (speed only)",
          low=0.0, low_open=True),
)  # fmt: skip


# ----------------------------------------------------------------------------------------
# p = 1: ranks
# ----------------------------------------------------------------------------------------
def coulomb1d_sums(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pair sums of k(z) = −‖z‖ on the line from the ranks, O(N log N), exact.

    .. math::

        \\sum_{i \\ne j} -|x_i - x_j| = -2 \\sum_{r=0}^{N-1} (2r - N + 1)\\, x_{(r)},
        \\qquad
        \\sum_{j \\ne i} -\\operatorname{sgn}(x_i - x_j) = \\#\\{x_j > x_i\\} - \\#\\{x_j < x_i\\}.

    Parameters
    ----------
    x : tensor (..., N)
        Positions (any float dtype, any device; leading axes are independent replicas).

    Returns
    -------
    total : tensor (...)
        Σ_{i≠j} k(x_i − x_j).
    grad : tensor (..., N)
        Σ_{j≠i} k'(x_i − x_j); tied particles exert no force on each other (sgn 0 = 0, the
        zero subgradient of the direct sum).

    Raises
    ------
    meanfield.errors.InputError
        A non-finite position.

    See Also
    --------
    coulomb1d_field : the same kernel at other targets.
    FastCoulombInteraction : the energy term built on it.
    meanfield.pairsum.pair_sums : the direct O(N²) sums.
    meanfield.closed_forms.UniformInterval : the equilibrium of the p = 1 gas.

    Examples
    --------
    The points 0, 1, 3: Σ_{i≠j} −|x_i − x_j| = −2 (1 + 3 + 2) = −12.

    >>> import torch
    >>> from meanfield.fastsums import coulomb1d_sums
    >>> total, grad = coulomb1d_sums(torch.tensor([0.0, 1.0, 3.0], dtype=torch.float64))
    >>> float(total), grad.tolist()
    (-12.0, [2.0, 0.0, -2.0])
    """
    _check_finite("x", x)
    N = x.shape[-1]
    # the rank weights sum to 0, so a common offset cancels analytically: remove it first so
    # it does not cancel numerically (round-off ~ eps · N · spread instead of eps · N · |x|).
    # The middle sorted value, not the mean, which overflows near 1e308 (NaN from there);
    # subtracting a constant keeps the order, so the sorted copy is shifted, not re-sorted
    xs = torch.sort(x, dim=-1).values
    centre = xs[..., N // 2 : N // 2 + 1]
    xc = x - centre
    xs = (xs - centre).contiguous()
    r = torch.arange(N, dtype=x.dtype, device=x.device)
    total = -2.0 * (xs * (2 * r - (N - 1))).sum(-1)
    xc = xc.contiguous()
    below = torch.searchsorted(xs, xc, side="left")
    above = N - torch.searchsorted(xs, xc, side="right")
    return total, (above - below).to(x.dtype)


def coulomb1d_field(at: torch.Tensor, points: torch.Tensor, weights: torch.Tensor):
    r"""Σ_k w_k (−‖a − y_k‖) at each a, O((M + K) log K), from weighted prefix sums.

    Parameters
    ----------
    at : tensor (M,)
        Evaluation points.
    points : tensor (K,)
        Atoms y_k of the measure.
    weights : tensor (K,)
        Their masses w_k ≥ 0.

    Returns
    -------
    tensor (M,)
        With W_≤, S_≤ the sums of w_k and w_k y_k over y_k ≤ a:
        Σ_k w_k ‖a − y_k‖ = a (2 W_≤ − W) − (2 S_≤ − S).

    Raises
    ------
    meanfield.errors.InputError
        A non-finite input, or weights not one mass >= 0 per atom.

    See Also
    --------
    coulomb1d_sums : the sums over the particles themselves.
    FastCoulombInteraction : the energy term built on it.
    meanfield.pde.convolution.FFTConvolution : k ∗ ρ on a grid.

    Notes
    -----
    .. math::

        \sum_k w_k |a - y_k| = a\,(2W_\le - W) - (2S_\le - S),
        \qquad W_\le = \sum_{y_k \le a} w_k, \quad S_\le = \sum_{y_k \le a} w_k y_k .

    Examples
    --------
    >>> import torch
    >>> from meanfield.fastsums import coulomb1d_field
    >>> at = torch.tensor([2.0, 5.0])
    >>> coulomb1d_field(at, torch.tensor([0.0, 4.0]), torch.tensor([1.0, 1.0])).tolist()
    [-4.0, -6.0]
    """
    for name, t in (("at", at), ("points", points), ("weights", weights)):
        _check_finite(name, t)
    if weights.shape != points.shape or bool((weights < 0).any()):
        raise InputError("weights must hold one mass >= 0 per atom (the shape of points)")
    ref = (weights * points).sum() / weights.sum().clamp_min(torch.finfo(points.dtype).tiny)
    y, order = torch.sort(points - ref)
    w = weights[order]
    zero = y.new_zeros(1)
    W = torch.cat([zero, torch.cumsum(w, 0)])
    S = torch.cat([zero, torch.cumsum(w * y, 0)])
    a = (at - ref).contiguous()
    m = torch.searchsorted(y, a, side="right")
    return -(a * (2 * W[m] - W[-1]) - (2 * S[m] - S[-1]))


# ----------------------------------------------------------------------------------------
# p = 3: FMM3D
# ----------------------------------------------------------------------------------------
@declare(_EPS, *_WANT)
def coulomb3d_sums(x: np.ndarray, eps: float, want_grad: bool = True, want_value: bool = True):
    r"""Σ_{j≠i} 1/‖x_i − x_j‖ and its gradient in x_i by the FMM (``fmm3dpy.lfmm3d``).

    Parameters
    ----------
    x : array (N, 3), float64
        Particle positions.
    eps : float
        FMM relative precision.
    want_grad, want_value : bool
        Which outputs are needed (the FMM computes the potential in any case).

    Returns
    -------
    pot : array (N,)
        Σ_{j≠i} 1/‖x_i − x_j‖; +inf at a particle with an exact twin (as the direct sum).
    grad : array (N, 3) or None
        Σ_{j≠i} ∇k(x_i − x_j) = −Σ_j (x_i − x_j)/‖x_i − x_j‖³ (coincident pairs excluded).

    Raises
    ------
    meanfield.errors.InputError
        An array of the wrong shape or not finite, or a declared parameter out of its
        range (checked before any work).
    meanfield.errors.NumericalError
        Over 2·10⁹ exact pair evaluations for the particles closer than τ (module doc;
        checked before the FMM), or a distinct pair closer than ~1e-154 (1/r² overflows).

    See Also
    --------
    coulomb3d_field : the same sums at other targets.
    coulomb2d_sums : the p = 2 sums (Ewald).
    FastCoulombInteraction : the energy term built on it.
    meanfield.pairsum.pair_sums : the direct O(N²) sums.

    Notes
    -----
    .. math::

        \phi_i = \sum_{j \ne i} \frac{1}{|x_i - x_j|}, \qquad
        \nabla_{x_i} \phi_i = -\sum_{j \ne i} \frac{x_i - x_j}{|x_i - x_j|^3}.

    References
    ----------
    - L. Greengard, V. Rokhlin, "A fast algorithm for particle simulations", J. Comput. Phys. 73
      (1987) 325–348.
    - L. Greengard, V. Rokhlin, "A new version of the fast multipole method for the Laplace equation
      in three dimensions", Acta Numer. 6 (1997) 229–269.

    Examples
    --------
    Against the direct O(N²) sums (requires ``fmm3dpy``):

    >>> import numpy as np
    >>> from meanfield.fastsums import coulomb3d_sums
    >>> x = np.random.default_rng(0).normal(size=(50, 3))
    >>> pot, grad = coulomb3d_sums(x, 1e-10)
    >>> z = x[:, None] - x[None]
    >>> r = np.sqrt((z * z).sum(-1))
    >>> np.fill_diagonal(r, np.inf)
    >>> direct = -(z / r[..., None] ** 3).sum(1)
    >>> bool(np.allclose(pot, (1 / r).sum(1))), bool(np.allclose(grad, direct))
    (True, True)
    """
    x = _points("x", x, 3)
    _import("fmm3dpy")
    N = len(x)
    if N < 2 or _all_coincident(x):  # no pairs, or only coincident ones: no tree
        return np.full(N, np.inf if N > 1 else 0.0), (np.zeros((N, 3)) if want_grad else None)
    return _fmm_sums(x, eps, want_grad)


@declare(_EPS)
def coulomb3d_field(at: np.ndarray, points: np.ndarray, weights: np.ndarray, eps: float):
    r"""Σ_k w_k / ‖a − y_k‖ at the targets by the FMM (``fmm3dpy.lfmm3d``).

    .. math::

        \phi(a_m) = \sum_k \frac{w_k}{|a_m - y_k|} .

    Parameters
    ----------
    at : array (M, 3), float64
        Targets a.
    points : array (K, 3), float64
        Atoms y_k of the measure.
    weights : array (K,), float64
        Their masses w_k ≥ 0.
    eps : float
        FMM relative precision.

    Returns
    -------
    array (M,)
        The potential; +inf at a target on a charged atom, as the direct sum.

    Raises
    ------
    meanfield.errors.InputError
        An array of the wrong shape or not finite, a negative mass, or a declared
        parameter out of its range (checked before any work).
    meanfield.errors.NumericalError
        Over 2·10⁹ exact pair evaluations for the atoms closer than τ to a target (module
        doc; before the FMM), or a target closer than ~1e-308 to an atom (1/r overflows).

    See Also
    --------
    coulomb3d_sums : the sums over the particles themselves.
    FastCoulombInteraction : the energy term built on it.
    meanfield.studies.coulomb3d.particle_run : the p = 3 Coulomb gas, studied with HMC.

    References
    ----------
    - L. Greengard, V. Rokhlin, "A fast algorithm for particle simulations", J. Comput. Phys. 73
      (1987) 325–348.
    - L. Greengard, V. Rokhlin, "A new version of the fast multipole method for the Laplace equation
      in three dimensions", Acta Numer. 6 (1997) 229–269.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.fastsums import coulomb3d_field
    >>> atoms = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    >>> pot = coulomb3d_field(np.zeros((1, 3)), atoms, np.array([1.0, 1.0]), 1e-10)
    >>> round(float(pot[0]), 8)  # 1/1 + 1/2
    1.5
    """
    at, points = _points("at", at, 3), _points("points", points, 3)
    weights = _masses("weights", weights, len(points))
    if not len(at) or not len(points):  # a sum over no sources, or no targets
        return np.zeros(len(at))
    return _fmm_field(at, points, weights, eps)


# ----------------------------------------------------------------------------------------
# p = 2: spectral Ewald with the NUFFT
# ----------------------------------------------------------------------------------------
#: default cap on the Fourier modes per particle in p = 2, (2M + 1)² ≤ this · N (+ 4096): a
#: uniform disc at eps = 1e-6 needs ≈ 5, the default problem's Gaussian cloud asks for ≈ 40
#: at N = 1e6 and is capped, trading modes for near pairs (timings: docs/performance.rst)
MODES_PER_PARTICLE = 16


def _threads(n_threads: int | None) -> int:
    return torch.get_num_threads() if n_threads is None else n_threads


@declare(_EPS, *_WANT, *_EWALD)
def coulomb2d_sums(
    x: np.ndarray,
    eps: float,
    want_grad: bool = True,
    near: int = NEAR_NEIGHBOURS,
    want_value: bool = True,
    *,
    n_threads: int | None = None,
    modes_per_particle: float = MODES_PER_PARTICLE,
):
    r"""Σ_{j≠i} −log‖x_i − x_j‖ and its gradient in x_i by spectral Ewald summation.

    O(N log N) time and O(N) memory at fixed ``eps``: the near part runs over a cell list
    (no pair list is stored) on ``n_threads`` threads, the smooth part is two NUFFTs
    (FINUFFT, ``n_threads`` threads) on a mode grid whose size grows as N.

    Parameters
    ----------
    x : array (N, 2), float64
        Particle positions.
    eps : float
        Relative accuracy (see :class:`_EwaldPlan2D` for how each error term is bounded).
    want_grad : bool
        Compute the gradient (the drift needs only the gradient).
    near : int
        Median number of neighbours inside the short-range cutoff (a speed knob only).
    want_value : bool
        Compute the potential.
    n_threads : int or None
        Threads of the near field and of FINUFFT; None: ``torch.get_num_threads()``.
    modes_per_particle : float
        Cap on the Fourier modes, (2M + 1)² ≤ this · N + 4096 (the cutoff grows instead).

    Returns
    -------
    pot : array (N,) or None
        +inf at a particle with an exact twin (E₁(0), as the direct sum).
    grad : array (N, 2) or None
        −Σ_j (x_i − x_j)/‖x_i − x_j‖²; coincident pairs excluded (zero subgradient).

    Raises
    ------
    meanfield.errors.InputError
        An array of the wrong shape or not finite, or a declared parameter out of its
        range (checked before any work).
    meanfield.errors.NumericalError
        Two distinct particles closer than ~1.5e-154: r² underflows, the gradient is not
        representable (exact twins are fine: +inf potential, zero subgradient).

    See Also
    --------
    coulomb2d_field : the same split at targets other than the sources.
    FastCoulombInteraction : the energy term built on it.

    Notes
    -----
    The Gaussian (Ewald) split of the kernel, with E₁ the exponential integral:

    .. math::

        -\log r = \underbrace{\tfrac12 E_1(r^2/\sigma^2)}_{\text{near pairs}}
        + \underbrace{\big(-\log r - \tfrac12 E_1(r^2/\sigma^2)\big)}_{\text{NUFFT}} .

    References
    ----------
    F. Vico, L. Greengard, M. Ferrando, "Fast convolution with free-space Green's functions",
    J. Comput. Phys. 323, 2016.
    A. H. Barnett, J. Magland, L. af Klinteberg, "A parallel nonuniform fast Fourier
    transform library based on an 'exponential of semicircle' kernel", SIAM J. Sci. Comput.
    41, 2019.

    Examples
    --------
    Against the direct O(N²) sums (requires ``finufft``):

    >>> import numpy as np
    >>> from meanfield.fastsums import coulomb2d_sums
    >>> x = np.random.default_rng(0).normal(size=(50, 2))
    >>> pot, grad = coulomb2d_sums(x, 1e-10)
    >>> z = x[:, None] - x[None]
    >>> r = np.sqrt((z * z).sum(-1))
    >>> np.fill_diagonal(r, 1.0)  # log 1 = 0 and z_ii = 0: the diagonal adds nothing
    >>> direct = -(z / r[..., None] ** 2).sum(1)
    >>> bool(np.allclose(pot, -np.log(r).sum(1))), bool(np.allclose(grad, direct))
    (True, True)
    """
    x = _points("x", x, 2)
    N = len(x)
    if N < 2 or _all_coincident(x):  # no pairs, or only coincident ones
        pot = np.full(N, np.inf if N > 1 else 0.0)
        return (pot if want_value else None), (np.zeros((N, 2)) if want_grad else None)
    threads = _threads(n_threads)
    return _ewald_sums(x, eps, want_value, want_grad, near, threads, modes_per_particle)


@declare(_EPS, *_EWALD)
def coulomb2d_field(
    at,
    points,
    weights,
    eps: float,
    near: int = NEAR_NEIGHBOURS,
    *,
    n_threads: int | None = None,
    modes_per_particle: float = MODES_PER_PARTICLE,
):
    r"""Σ_k w_k (−log‖a − y_k‖) at the targets by spectral Ewald summation.

    .. math::

        \phi(a_m) = -\sum_k w_k \log|a_m - y_k| .

    Parameters
    ----------
    at : array (M, 2), float64
        Targets a.
    points : array (K, 2), float64
        Atoms y_k of the measure.
    weights : array (K,), float64
        Their masses w_k ≥ 0.
    eps : float
        Relative accuracy, as in :func:`coulomb2d_sums`.
    near : int
        Median number of atoms inside the short-range cutoff (a speed knob only).
    n_threads : int or None
        Threads of the near field and of FINUFFT; None: ``torch.get_num_threads()``.
    modes_per_particle : float
        Cap on the Fourier modes, (2M + 1)² ≤ this · (M + K) + 4096.

    Returns
    -------
    array (M,)
        The potential; +inf at a target on a charged atom, as the direct sum.

    Raises
    ------
    meanfield.errors.InputError
        An array of the wrong shape or not finite, a negative mass, or a declared
        parameter out of its range (checked before any work).
    meanfield.errors.NumericalError
        A target closer than ~1e-162 to a charged atom but not on it (r² = 0: +inf off a twin).

    See Also
    --------
    coulomb2d_sums : the pair sums over the particles themselves.

    References
    ----------
    F. Vico, L. Greengard, M. Ferrando, J. Comput. Phys. 323, 2016 (free-space kernel
    truncation); A. H. Barnett, J. Magland, L. af Klinteberg, SIAM J. Sci. Comput. 41, 2019
    (FINUFFT).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.fastsums import coulomb2d_field
    >>> y = np.random.default_rng(0).normal(size=(50, 2))
    >>> a = np.array([[5.0, 0.0]])
    >>> pot = coulomb2d_field(a, y, np.full(50, 1 / 50), 1e-10)
    >>> bool(np.isclose(pot[0], -np.log(np.linalg.norm(a - y, axis=1)).mean()))
    True
    """
    at, points = _points("at", at, 2), _points("points", points, 2)
    weights = _masses("weights", weights, len(points))
    if not len(at) or not len(points):  # a sum over no sources, or no targets
        return np.zeros(len(at))
    return _ewald_field(at, points, weights, eps, near, _threads(n_threads), modes_per_particle)


# ----------------------------------------------------------------------------------------
# the Energy term
# ----------------------------------------------------------------------------------------
class FastCoulombInteraction(PairInteraction):
    """λ ∬ k dμ dμ for the Coulomb kernel of R^p (p = 1, 2, 3) by a fast sum; drop-in term.

    Same contract as :class:`~meanfield.energy.PairInteraction` (value, grad, value_and_grad,
    first_variation; ``grad_random_batch`` is inherited and stays direct within each batch):

    .. math::

        H_N = \\frac{\\lambda}{N^2} \\sum_{i \\ne j} k(\\omega_i - \\omega_j), \\qquad
        \\nabla_{\\omega_i} H_N
        = \\frac{2\\lambda}{N^2} \\sum_{j \\ne i} \\nabla k(\\omega_i - \\omega_j),

    with k = −‖z‖ (p = 1, ranks, exact), −log‖z‖ (p = 2, NUFFT spectral Ewald), 1/‖z‖ (p = 3,
    FMM) — see the module docstring.

    Parameters
    ----------
    kernel : Riesz
        The unsoftened Coulomb kernel of the particle dimension (``Coulomb(p)``, s = p − 2).
    lam : float
        Interaction strength λ ≥ 0.
    eps : float, default 1e-6
        Tolerance of the p = 2, 3 sums, in [1e-14, 1e-2]: the requested relative ℓ² error
        over the particles of the forces Σ_{j≠i} ∇k(ω_i − ω_j) (and of the potentials), i.e.
        ‖F_fast − F_direct‖₂ / ‖F_direct‖₂ ≤ eps (measured 0.01–0.3 eps against the direct
        sum, ``tests/test_fastsums.py``); p = 1 is exact.  The default 1e-6 is far below
        the O(√η) noise and O(η) bias of one Langevin step at any practical step η, and
        costs about half the time of 1e-10 (``docs/performance.rst``).
    min_n : int or None, default None
        Below this many particles (per replica) the direct sum of the base class is used.
        None: :data:`DIRECT_BELOW` for the particle dimension, the crossover measured by
        ``benchmarks/bench_fastsums.py`` on a 2-core machine (force, float64, eps = 1e-8);
        0 always uses the fast sum.
    n_threads : int or None, default None
        Threads of the p = 2 sum (its near field and FINUFFT); None: ``torch.get_num_threads()``
        at each call (so ``torch.set_num_threads`` and ``OMP_NUM_THREADS`` steer it).  The
        p = 3 FMM of the ``fmm3dpy`` wheel is serial whatever this says; p = 1 is torch's.

    Raises
    ------
    meanfield.errors.InputError
        ``eps`` outside [1e-14, 1e-2], ``lam`` < 0, ``min_n`` < 0, ``n_threads`` < 1, a
        softened kernel, or not a Coulomb kernel (all checked here, before any sum).

    See Also
    --------
    meanfield.energy.PairInteraction : the direct O(N²) sum this replaces.
    coulomb1d_sums, coulomb2d_sums, coulomb3d_sums : the sums by dimension.

    References
    ----------
    L. Greengard, V. Rokhlin, "A fast algorithm for particle simulations", J. Comput. Phys.
    73, 1987 (the FMM, p = 3).
    A. H. Barnett, J. Magland, L. af Klinteberg, "A parallel nonuniform fast Fourier transform
    library based on an 'exponential of semicircle' kernel", SIAM J. Sci. Comput. 41, 2019
    (FINUFFT, p = 2).
    F. Vico, L. Greengard, M. Ferrando, J. Comput. Phys. 323, 2016 (free-space truncation).

    Examples
    --------
    The same value and gradient as the direct :class:`~meanfield.energy.PairInteraction`:

    >>> import torch
    >>> from meanfield.energy import PairInteraction
    >>> from meanfield.fastsums import FastCoulombInteraction
    >>> from meanfield.kernels import Coulomb
    >>> fast = FastCoulombInteraction(Coulomb(1), lam=0.5, min_n=0)  # always the fast sum
    >>> direct = PairInteraction(Coulomb(1), lam=0.5)
    >>> omega = torch.randn(20, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> bool(torch.allclose(fast.value(omega), direct.value(omega)))
    True
    >>> bool(torch.allclose(fast.grad(omega), direct.grad(omega)))
    True
    """

    def __init__(
        self,
        kernel: PairKernel,
        lam: float = 1.0,
        *,
        eps: float = DEFAULT_EPS,
        min_n: int | None = None,
        n_threads: int | None = None,
    ):
        super().__init__(kernel, lam)
        if not isinstance(kernel, Riesz) or kernel.s not in COULOMB_S.values():
            raise InputError(
                f"kernel must be the Coulomb kernel of R^p for p in 1, 2, 3 (Riesz s = -1, 0, 1),"
                f" got {kernel!r}"
            )
        if kernel.softening != 0.0:
            raise InputError(
                f"softening (epsilon) must be 0 for a fast sum, got {kernel.softening}: the rank "
                "formula, the FMM and the Ewald split hold for the unsoftened kernel only; use "
                "PairInteraction for a softened kernel"
            )
        self.eps = check_positive("eps", eps)
        if not EPS_RANGE[0] <= self.eps <= EPS_RANGE[1]:
            raise InputError(
                f"eps (the relative force tolerance) must lie in [{EPS_RANGE[0]:g}, "
                f"{EPS_RANGE[1]:g}], got {eps!r}"
            )
        self.min_n = None if min_n is None else check_int("min_n", min_n, minimum=0)
        self.n_threads = None if n_threads is None else check_int("n_threads", n_threads)

    def bind(self, dim, dtype, device):
        """Bind as :meth:`PairInteraction.bind`; check the kernel is Coulomb in R^dim.

        Parameters
        ----------
        dim : int
            Particle dimension p; the kernel must be Riesz with s = p − 2.
        dtype : torch.dtype
            Floating type of the term's tensors.
        device : str or torch.device
            Where the term's tensors live.

        Raises
        ------
        meanfield.errors.InputError
            The kernel is not the Coulomb kernel of R^dim (no fast sum would apply).

        Examples
        --------
        >>> import torch
        >>> from meanfield.fastsums import FastCoulombInteraction
        >>> from meanfield.kernels import Coulomb
        >>> term = FastCoulombInteraction(Coulomb(2))
        >>> term.bind(2, torch.float64, "cpu")
        >>> try:
        ...     term.bind(3, torch.float64, "cpu")
        ... except ValueError as err:
        ...     print(str(err)[:58])
        the fast sum needs the Coulomb kernel of the particle dime
        """
        super().bind(dim, dtype, device)
        self._check_dim(dim)

    def _check_dim(self, dim: int) -> None:
        if COULOMB_S.get(dim) != self.kernel.s:
            raise InputError(
                f"the fast sum needs the Coulomb kernel of the particle dimension (s = p - 2): "
                f"kernel {self.kernel!r} in dimension p={dim}"
            )
        if dim == 2:
            _import("finufft")
        elif dim == 3:
            _import("fmm3dpy")

    def _sums(self, omega: torch.Tensor, want_value: bool, want_grad: bool):
        """Σ_{i≠j} k (...) or None and Σ_j ∇k(ω_i − ω_j) (..., N, p) or None, unscaled."""
        p = omega.shape[-1]
        self._check_dim(p)
        _check_finite("omega (particles)", omega)
        if p == 1:
            total, g = coulomb1d_sums(omega[..., 0])
            return total, g.unsqueeze(-1)
        flat = omega.detach().reshape(-1, *omega.shape[-2:]).to("cpu", torch.float64).numpy()
        totals, grads = [], []
        for x in flat:
            x = np.ascontiguousarray(x)
            if p == 2:
                pot, g = coulomb2d_sums(
                    x, self.eps, want_grad, want_value=want_value, n_threads=self.n_threads
                )
            else:
                pot, g = coulomb3d_sums(x, self.eps, want_grad=want_grad, want_value=want_value)
            totals.append(pot.sum() if want_value else 0.0)
            grads.append(g)
        total = grad = None
        if want_value:
            total = torch.as_tensor(np.array(totals)).reshape(omega.shape[:-2])
            total = total.to(omega.device, omega.dtype)
        if want_grad:
            grad = torch.as_tensor(np.stack(grads)).reshape(omega.shape)
            grad = grad.to(omega.device, omega.dtype)
        return total, grad

    def _direct(self, omega) -> bool:
        p = omega.shape[-1]
        self._check_dim(p)  # also on the direct path: a wrong kernel/dimension pair is an error
        min_n = DIRECT_BELOW.get(p, 0) if self.min_n is None else self.min_n
        return omega.shape[-2] < min_n

    def value_and_grad(self, omega):
        """H_N and its gradient in one fast sum (the direct sum below ``min_n`` particles).

        Parameters
        ----------
        omega : tensor of shape (..., N, p)
            Particles, p = the kernel's dimension.

        Returns
        -------
        value : tensor of shape (...)
            (λ/N²) Σ_{i≠j} k(ω_i − ω_j).
        grad : tensor of shape (..., N, p)
            ∇_{ω_i} of the value, (2λ/N²) Σ_{j≠i} ∇k(ω_i − ω_j).

        Examples
        --------
        >>> import torch
        >>> from meanfield.fastsums import FastCoulombInteraction
        >>> from meanfield.kernels import Coulomb
        >>> term = FastCoulombInteraction(Coulomb(1), lam=1.0, min_n=0)
        >>> omega = torch.tensor([[0.0], [1.0], [3.0]], dtype=torch.float64)
        >>> value, grad = term.value_and_grad(omega)
        >>> 9 * float(value), (9 * grad[:, 0]).tolist()  # −2 (1 + 3 + 2); −2 (#below − #above)
        (-12.0, [4.0, 0.0, -4.0])
        """
        if self._direct(omega):
            return super().value_and_grad(omega)
        N = omega.shape[-2]
        total, g = self._sums(omega, True, True)
        return self.lam * total / N**2, (2 * self.lam / N**2) * g

    def value(self, omega):
        """H_N = (λ/N²) Σ_{i≠j} k(ω_i − ω_j) by the fast sum (direct below ``min_n`` particles).

        Parameters
        ----------
        omega : tensor of shape (..., N, p)
            Particles.

        Returns
        -------
        tensor of shape (...)
            The interaction energy of each replica.

        Examples
        --------
        >>> import torch
        >>> from meanfield.fastsums import FastCoulombInteraction
        >>> from meanfield.kernels import Coulomb
        >>> term = FastCoulombInteraction(Coulomb(1), lam=2.0, min_n=0)
        >>> term.value(torch.tensor([[[0.0], [2.0]], [[0.0], [1.0]]])).tolist()  # 2 replicas
        [-2.0, -1.0]
        """
        if self._direct(omega):
            return super().value(omega)
        N = omega.shape[-2]
        return self.lam * self._sums(omega, True, False)[0] / N**2

    def grad(self, omega):
        """∇H_N = (2λ/N²) Σ_{j≠i} ∇k(ω_i − ω_j) by the fast sum (direct below ``min_n``).

        Parameters
        ----------
        omega : tensor of shape (..., N, p)
            Particles.

        Returns
        -------
        tensor of shape (..., N, p)
            The gradient with respect to each particle.

        Examples
        --------
        >>> import torch
        >>> from meanfield.fastsums import FastCoulombInteraction
        >>> from meanfield.kernels import Coulomb
        >>> term = FastCoulombInteraction(Coulomb(1), lam=2.0, min_n=0)
        >>> term.grad(torch.tensor([[0.0], [2.0]]))[:, 0].tolist()  # descent pushes them apart
        [1.0, -1.0]
        """
        if self._direct(omega):
            return super().grad(omega)
        N = omega.shape[-2]
        return (2 * self.lam / N**2) * self._sums(omega, False, True)[1]

    def first_variation(self, at, points, weights):
        """2λ (k ∗ μ)(ω) = 2λ Σ_k w_k k(ω − ω_k), by the same fast sum as the pair sums.

        Parameters
        ----------
        at : tensor (M, p)
            Evaluation points ω.
        points : tensor (K, p)
            Atoms ω_k of the measure μ.
        weights : tensor (K,)
            Their masses w_k ≥ 0.

        Returns
        -------
        tensor (M,)
            δE/δμ of this term at ``at``, in the dtype and on the device of ``at``.

        Examples
        --------
        >>> import torch
        >>> from meanfield.fastsums import FastCoulombInteraction
        >>> from meanfield.kernels import Coulomb
        >>> term = FastCoulombInteraction(Coulomb(1), lam=0.5)
        >>> atoms, w = torch.tensor([[-1.0], [1.0]]), torch.tensor([0.5, 0.5])
        >>> term.first_variation(torch.tensor([[0.0], [3.0]]), atoms, w).tolist()  # −E|ω − ω'|
        [-1.0, -3.0]
        """
        p = at.shape[-1]
        self._check_dim(p)
        for name, t in (("at", at), ("points", points), ("weights", weights)):
            _check_finite(name, t)
        if p == 1:
            return 2 * self.lam * coulomb1d_field(at[:, 0], points[:, 0], weights)
        args = [t.detach().to("cpu", torch.float64).numpy() for t in (at, points, weights)]
        if p == 2:
            out = coulomb2d_field(*args, self.eps, n_threads=self.n_threads)
        else:
            out = coulomb3d_field(*args, self.eps)
        return 2 * self.lam * torch.as_tensor(out).to(at.device, at.dtype)

    def describe(self):
        """The direct term's description plus ``fast_sum`` and ``eps``.

        Returns
        -------
        dict
            :meth:`PairInteraction.describe` with ``"fast_sum": "coulomb"`` and ``"eps"``.

        Examples
        --------
        >>> from meanfield.fastsums import FastCoulombInteraction
        >>> from meanfield.kernels import Coulomb
        >>> FastCoulombInteraction(Coulomb(3), eps=1e-8).describe()
        {'kernel': 'riesz', 's': 1.0, 'softening': 0.0, 'lam': 1.0,
         'fast_sum': 'coulomb', 'eps': 1e-08}
        """
        return {**super().describe(), "fast_sum": "coulomb", "eps": self.eps}


def fast_pair_interaction(kernel: PairKernel, lam: float = 1.0, **options) -> PairInteraction:
    """A :class:`FastCoulombInteraction` for ``kernel`` (see there for ``eps`` and ``min_n``).

    Parameters
    ----------
    kernel : Riesz
        The unsoftened Coulomb kernel of the particle dimension, e.g. ``Coulomb(2)``.
    lam : float
        Interaction strength λ ≥ 0.
    **options
        ``eps`` and ``min_n`` of :class:`FastCoulombInteraction`.

    Returns
    -------
    FastCoulombInteraction
        A drop-in :class:`~meanfield.energy.PairInteraction` term of an
        :class:`~meanfield.energy.Energy`.

    See Also
    --------
    FastCoulombInteraction : the term it builds.
    meanfield.energy.PairInteraction : the direct term it replaces.
    meanfield.kernels.Coulomb : the kernels it accepts.
    meanfield.energy.Energy : the energy it is a term of.

    References
    ----------
    - L. Greengard, V. Rokhlin, "A fast algorithm for particle simulations", J. Comput. Phys. 73
      (1987) 325–348.

    Examples
    --------
    >>> from meanfield.fastsums import fast_pair_interaction
    >>> from meanfield.kernels import Coulomb
    >>> term = fast_pair_interaction(Coulomb(1), lam=0.5)  # exact O(N log N) in p = 1
    >>> type(term).__name__, term.describe()["fast_sum"], term.eps
    ('FastCoulombInteraction', 'coulomb', 1e-06)
    """
    return FastCoulombInteraction(kernel, lam, **options)


__all__ = [
    "FastCoulombInteraction",
    "fast_pair_interaction",
    "coulomb1d_sums",
    "coulomb1d_field",
    "coulomb2d_sums",
    "coulomb2d_field",
    "coulomb3d_sums",
    "coulomb3d_field",
    "clear_caches",
    "COULOMB_S",
    "NEAR_NEIGHBOURS",
    "MODES_PER_PARTICLE",
    "DEFAULT_EPS",
    "EPS_RANGE",
    "DIRECT_BELOW",
]
