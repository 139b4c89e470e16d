"""Pair potentials on a grid: zero-padded FFT convolution with cell-integrated kernels.

For a density ρ of cell averages ρ_j, the pair potential at the centre x_i of cell i is

    (k ∗ ρ)(x_i) = ∫ k(x_i − y) ρ(y) dy  ≈  Σ_j W_{i−j} ρ_j,     W_m = ∫_{C_m} k(z) dz,

with C_m the cell of index offset m = (m_1, …, m_p) centred at (m_1 h_1, …, m_p h_p).  The
weights W_m are the kernel integrated over a whole cell, so a singular kernel (Riesz
|z|^(−s) with s < p, log, Coulomb) gives finite weights: the singularity is integrable and is
integrated, never sampled.  The sum is a Toeplitz (p ≥ 2: multilevel Toeplitz) product evaluated
exactly, without periodic wrap-around, by FFT on a grid zero-padded to at least 2n − 1 points
per axis: O(M log M) for M cells.

Quadrature for W_m (any radial :class:`~meanfield.kernels.PairKernel`, through ``radial(r)``):

* the central cell (the one holding the singularity) in spherical coordinates about it: the
  cell is split into 2p pyramids with the singularity at their apex, one per face
  (:func:`_central_cell_integral`); the radial integral ∫_0^R k(r) r^(p−1) dr is exact for an
  unsoftened Riesz or log kernel and otherwise done by tanh-sinh (double-exponential)
  quadrature after the substitution r = R x^(1/δ), δ = p − s for a Riesz kernel with
  0 < s < p, which tames the near-singularity of a softened kernel; the solid angle by
  Gauss–Legendre over the faces;
* every other cell by tensor Gauss–Legendre, with a node count chosen from the distance to the
  singularity so that the Bernstein-ellipse error bound ρ^(−2n) is below 1e-15
  (:func:`_gl_nodes`).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import scipy.fft as sfft

from ..errors import InputError, InputTypeError
from ..kernels import Gaussian, PairKernel, Riesz
from .grid import Grid

#: Target relative error of the Gauss–Legendre rule on the regular cells.
GL_TARGET = 1e-15
#: Most Gauss–Legendre nodes per axis (reached only for cells of aspect ratio > 8).
GL_MAX_NODES = 64
#: tanh-sinh step and half-range: nodes at t = kτ, |t| ≤ T; error ~ exp(−π²/τ) for an
#: integrand analytic in a strip (below 1e-15 at τ = 1/24).
TANH_SINH_STEP = 1.0 / 24.0
TANH_SINH_RANGE = 4.0
#: Gauss–Legendre nodes per face axis in the solid angle of the central cell (the integrand
#: is analytic on the face).
ANGLE_NODES = 48


@cache
def _gauss_legendre(n: int):
    x, w = np.polynomial.legendre.leggauss(n)
    return x, w


@cache
def _tanh_sinh():
    """Nodes x ∈ (0, 1) and weights for ∫_0^1 f(x) dx, clustered doubly exponentially at 0."""
    t = np.arange(-TANH_SINH_RANGE, TANH_SINH_RANGE + 1e-12, TANH_SINH_STEP)
    s = 0.5 * math.pi * np.sinh(t)
    x = 1.0 / (1.0 + np.exp(-2.0 * s))  # (1 + tanh s)/2, accurate near 0
    w = TANH_SINH_STEP * 0.5 * math.pi * np.cosh(t) * 2.0 * x * (1.0 - x)
    keep = (x > 0) & (x < 1) & (w > 0)
    return x[keep], w[keep]


def _substitution_exponent(kernel: PairKernel, p: int) -> float:
    """δ in the substitution r = R x^(1/δ): p − s for Riesz 0 < s < p (at least 1/4), else p.

    The floor 1/4 keeps x^(1/δ) and r² clear of underflow (r² > 1e-300 for x > 1e-37).
    """
    if isinstance(kernel, Riesz) and 0.0 < kernel.s < p:
        return max(p - kernel.s, 0.25)
    return float(p)


def radial_moment(kernel: PairKernel, R, p: int) -> np.ndarray:
    r"""∫_0^R k(r) r^(p−1) dr for an array of radii R > 0.

    Exact for an unsoftened Riesz kernel (s < p):  sgn(s) R^(p−s)/(p−s), and for the log
    kernel −R^p (log R / p − 1/p²).  Every other kernel by tanh-sinh quadrature after the
    substitution r = R x^(1/δ) (see :func:`_substitution_exponent`).

    .. math::

        M(R) = \int_0^R k(r)\, r^{p-1}\, dr, \qquad
        M(R) = \operatorname{sgn}(s) \frac{R^{p-s}}{p-s}
        \quad \text{for } k(r) = \operatorname{sgn}(s)\, r^{-s}.

    Parameters
    ----------
    kernel : PairKernel
        Radial kernel, ``kernel.radial(r)`` = k(r).
    R : array_like
        Radii > 0 (length unit).
    p : int
        Dimension.

    Returns
    -------
    numpy.ndarray
        M(R), shape of ``R``.

    See Also
    --------
    cell_integrated_kernel : the cell weights whose singular centre cell this integrates.
    meanfield.kernels.Riesz : the kernels k.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.pde.convolution import radial_moment
    >>> radial_moment(Riesz(1.0), np.array([1.0, 4.0]), 3)  # R^2 / 2 (Coulomb in p = 3)
    array([0.5, 8. ])
    >>> exact = radial_moment(Riesz(1.0), np.array([2.0]), 3)
    >>> soft = radial_moment(Riesz(1.0, softening=1e-9), np.array([2.0]), 3)  # by quadrature
    >>> bool(np.allclose(soft, exact, rtol=1e-8))
    True
    """
    R = np.asarray(R, dtype=float)
    if isinstance(kernel, Riesz) and kernel.softening == 0.0:
        s = kernel.s
        if s == 0.0:
            return -(R**p) * (np.log(R) / p - 1.0 / p**2)
        return math.copysign(1.0, s) * R ** (p - s) / (p - s)
    delta = _substitution_exponent(kernel, p)
    x, w = _tanh_sinh()
    r = R[..., None] * x ** (1.0 / delta)  # (..., K)
    # dr = (R/δ) x^(1/δ − 1) dx, so r^(p−1) dr = R^p/δ · x^(p/δ − 1) dx
    jac = (R[..., None] ** p / delta) * x ** (p / delta - 1.0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        vals = kernel.radial(r) * jac
    # nodes where r underflows carry weight < 1e-30 against a bounded integrand: drop them
    vals = np.where(np.isfinite(vals) & (r > 0), vals, 0.0)
    return (vals * w).sum(-1)


def _central_cell_integral(kernel: PairKernel, h: tuple) -> float:
    """∫ over the cell centred at the singularity, [−h_1/2, h_1/2] × … (any p).

    The cell is the union of 2p pyramids with apex at the singularity, one per face.  For the
    face ⊥ axis a at distance d = h_a/2, in solid-angle form

        ∫_pyramid k(|z|) dz = ∫_face (d / |y|^p) M(|y|) dA(y),   M(R) = ∫_0^R k(r) r^(p−1) dr,

    (dA d/|y|^p is the solid angle seen from the apex), with M from :func:`radial_moment`
    (exact for an unsoftened Riesz kernel).  The face integrand is analytic (|y| ≥ d > 0) and
    is integrated by tensor Gauss–Legendre over the part y_b ∈ [0, h_b/2] (b ≠ a) of each
    face, 1/2^(p−1) of it, the cell being symmetric in every axis: hence the factor
    2 · 2^(p−1) = 2^p for the two faces ⊥ a and their parts.  p = 1 has a point for a face.
    """
    p = len(h)
    half = np.asarray(h, dtype=float) / 2.0
    xg, wg = _gauss_legendre(ANGLE_NODES)
    total = 0.0
    for a in range(p):
        others = [b for b in range(p) if b != a]
        # nodes on the face part [0, h_b/2] for b ≠ a, and y_a = d
        r2 = np.full((ANGLE_NODES,) * (p - 1), half[a] ** 2)
        w = np.ones((ANGLE_NODES,) * (p - 1))
        for k, b in enumerate(others):
            shape = [1] * (p - 1)
            shape[k] = ANGLE_NODES
            y = (0.5 * half[b] * (xg + 1.0)).reshape(shape)
            r2 = r2 + y**2
            w = w * (0.5 * half[b] * wg).reshape(shape)
        R = np.sqrt(r2)
        total += float((w * half[a] / R**p * radial_moment(kernel, R, p)).sum())
    return 2.0**p * total


def _regular_cell_integrals(kernel: PairKernel, h: tuple, offsets: np.ndarray, n_gl: int):
    """Tensor Gauss–Legendre ∫_{C_m} k for cell offsets m (K, p) -> (K,), any p."""
    p = len(h)
    xg, wg = _gauss_legendre(n_gl)
    out = np.empty(len(offsets))
    # evaluate in chunks of ≤ 2^20 kernel values to bound memory
    per = n_gl**p
    step = max(1, (1 << 20) // per)
    hh = np.asarray(h)
    scale = float(np.prod(0.5 * hh))
    for s in range(0, len(offsets), step):
        c = offsets[s : s + step] * hh  # cell centres (K, p)
        r2 = 0.0
        for a in range(p):
            shape = [len(c)] + [1] * p
            shape[a + 1] = n_gl
            r2 = r2 + ((c[:, a : a + 1] + 0.5 * hh[a] * xg[None, :]) ** 2).reshape(shape)
        val = kernel.radial(np.sqrt(r2))  # (K, n_gl, …, n_gl)
        for _ in range(p):  # contract the last node axis with the weights, p times
            val = val @ wg
        out[s : s + step] = val * scale
    return out


def _gl_nodes(offsets: np.ndarray, h: tuple) -> np.ndarray:
    """Gauss–Legendre nodes per axis for cells at offsets m ≥ 0 (K, p) -> (K,).

    The kernel is analytic except at z = 0, at distance δ = |(max(m_a − ½, 0) h_a)_a| from
    the cell.  Mapped to [−1, 1] along an axis of half-width h_a/2 ≤ h_max/2, the singularity
    lies at least r = 2δ/h_max away from the segment, so the integrand is analytic inside
    the Bernstein ellipse of parameter ρ = r + √(r² + 1) and the n-point rule errs by
    O(ρ^(−2n)): n = ⌈ln(1/GL_TARGET) / (2 ln ρ)⌉ + 1 nodes.
    """
    hh = np.asarray(h)
    delta = np.sqrt(((np.maximum(offsets - 0.5, 0.0) * hh) ** 2).sum(axis=1))
    r = 2.0 * delta / hh.max()
    with np.errstate(divide="ignore"):
        n = np.ceil(math.log(1.0 / GL_TARGET) / (2.0 * np.log(r + np.sqrt(r * r + 1)))) + 1
    return np.clip(np.nan_to_num(n, posinf=GL_MAX_NODES), 3, GL_MAX_NODES).astype(int)


def cell_integrated_kernel(kernel: PairKernel, h, n) -> np.ndarray:
    r"""Weights W_m = ∫_{C_m} k(z) dz for offsets |m_a| ≤ n_a − 1.

    Parameters
    ----------
    kernel : PairKernel
        Radial kernel (singular allowed if integrable, i.e. Riesz s < p).
    h : sequence of p floats
        Cell widths.
    n : sequence of p ints
        Cells per axis.

    Returns
    -------
    ndarray of shape (2 n_1 − 1, …)
        ``W[n_1 − 1 + m_1, …]`` = W_m; unit: kernel unit × volume.

    See Also
    --------
    FFTConvolution : the map ρ ↦ W ∗ ρ these weights define.
    periodic_weights : the weights on a torus (minimum image).
    meanfield.energy.PairInteraction : the pair term whose kernel this discretises.

    Notes
    -----
    With C_m the cell centred at (m_1 h_1, …, m_p h_p),

    .. math::

        W_m = \int_{C_m} k(z)\, dz, \qquad (k * \rho)(x_i) \approx \sum_j W_{i-j} \rho_j.

    References
    ----------
    - R. W. Hockney, J. W. Eastwood, *Computer Simulation Using Particles*, McGraw-Hill, 1981.

    Examples
    --------
    For k(z) = −|z| in p = 1 with h = 1/2: W_0 = −2 ∫_0^{1/4} z dz = −1/16 and
    W_1 = −∫_{1/4}^{3/4} z dz = −1/4.

    >>> from meanfield.kernels import Riesz
    >>> from meanfield.pde.convolution import cell_integrated_kernel
    >>> W = cell_integrated_kernel(Riesz(-1.0), (0.5,), (4,))
    >>> W
    array([-0.75  , -0.5   , -0.25  , -0.0625, -0.25  , -0.5   , -0.75  ])
    """
    h = tuple(float(v) for v in h)
    n = tuple(int(v) for v in n)
    p = len(h)
    # the kernel is radial, so W is even in every axis: compute the quadrant m ≥ 0 and mirror
    quad_idx = np.stack(
        [g.ravel() for g in np.meshgrid(*[np.arange(k) for k in n], indexing="ij")], axis=-1
    )
    central = ~quad_idx.any(axis=1)
    quad = np.empty(len(quad_idx))
    quad[central] = _central_cell_integral(kernel, h)
    nodes = _gl_nodes(quad_idx, h)
    for n_gl in np.unique(nodes[~central]):
        sel = ~central & (nodes == n_gl)
        quad[sel] = _regular_cell_integrals(kernel, h, quad_idx[sel], int(n_gl))
    quad = quad.reshape(n)
    full = quad
    for a in range(p):
        rev = np.flip(np.take(full, np.arange(1, n[a]), axis=a), axis=a)
        full = np.concatenate([rev, full], axis=a)
    return full


def check_kernel_resolution(kernel: PairKernel, grid: Grid) -> None:
    """Raise if the grid is too coarse to resolve the kernel's length scale.

    The length is the kernel's own, :meth:`~meanfield.kernels.PairKernel.length_scale`
    (any kernel may declare one): the cell width must satisfy h ≤ that length. For the
    built-ins: a Gaussian kernel's width w; a softened Riesz kernel with s ≥ p (integrable only
    through its softening ε) its ε; none for the others.

    Parameters
    ----------
    kernel : PairKernel
        The pair kernel.
    grid : Grid
        The grid (its largest cell width is compared).

    Raises
    ------
    ValueError
        The grid is too coarse; the message gives the number of cells per axis needed.

    See Also
    --------
    meanfield.kernels.CallableKernel : ``resolution_length`` declares a user kernel's length.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.kernels import Gaussian
    >>> from meanfield.pde.convolution import check_kernel_resolution
    >>> from meanfield.pde.grid import Grid
    >>> check_kernel_resolution(Gaussian(1.0), Grid(Box(1, 1.0), 4))  # h = 0.5 <= 1: fine
    >>> check_kernel_resolution(Gaussian(0.1), Grid(Box(1, 1.0), 4))
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: grid too coarse for the kernel: cell width h=0.5 exceeds ...
    """
    hmax = max(grid.h)
    need = kernel.length_scale(grid.dim)
    if need is not None and not (
        isinstance(need, (int, float)) and math.isfinite(need) and need > 0
    ):
        raise InputError(
            f"{type(kernel).__name__}.length_scale({grid.dim}) must be None or a finite length "
            f"> 0, got {need!r}"
        )
    if need is None or hmax <= need:
        return
    if isinstance(kernel, Gaussian):
        what = f"the Gaussian kernel width {kernel.width:g}"
    elif isinstance(kernel, Riesz):
        what = (
            f"the softening epsilon={kernel.softening:g} of the "
            f"Riesz kernel s={kernel.s:g} >= p={grid.dim}"
        )
    else:
        what = f"the length scale {need:g} of the kernel {kernel!r}"
    n_min = math.ceil(2 * grid.half_width / need)
    raise InputError(
        f"grid too coarse for the kernel: cell width h={hmax:.4g} exceeds {what}; "
        f"use n >= {n_min} cells per axis (h <= {need:g})"
    )


def neg_laplacian(v: np.ndarray, h, *, periodic: bool = False) -> np.ndarray:
    r"""−Δ_h v with no-flux walls on a cell-centred grid (the finite-volume Laplacian).

    .. math::

        (-\Delta_h v)_i = -\sum_a \frac{v_{i+e_a} - 2 v_i + v_{i-e_a}}{h_a^2},

    with the wall faces carrying no flux (a missing neighbour contributes nothing).

    Parameters
    ----------
    v : numpy.ndarray
        Grid function, shape (n_1, …, n_p).
    h : sequence of p floats
        Cell widths.
    periodic : bool, default False
        Periodic faces (a torus grid): the first and last cells of each axis are neighbours.

    Returns
    -------
    numpy.ndarray
        Same shape as ``v``; it sums to zero (the walls are no-flux, or there are none).

    See Also
    --------
    FFTConvolution.stiffness : the spectral radius of −Δ_h (W ∗ ·).
    meanfield.pde.schemes.Scheme.stable_dt : the step bound the stiffness enters.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.pde.convolution import neg_laplacian
    >>> neg_laplacian(np.array([0.0, 1.0, 4.0, 9.0]), (0.5,))  # x^2 at h = 1/2
    array([-4., -8., -8., 20.])
    >>> neg_laplacian(np.ones((3, 3)), (1.0, 1.0))  # constants are in the kernel
    array([[0., 0., 0.],
           [0., 0., 0.],
           [0., 0., 0.]])
    """
    if periodic:
        return -sum(
            (np.roll(v, -1, a) - 2 * v + np.roll(v, 1, a)) / ha**2 for a, ha in enumerate(h)
        )
    out = np.zeros_like(v)
    for a, ha in enumerate(h):
        d = np.diff(v, axis=a) / ha**2
        lo = [slice(None)] * v.ndim
        hi = [slice(None)] * v.ndim
        lo[a], hi[a] = slice(0, -1), slice(1, None)
        out[tuple(lo)] -= d
        out[tuple(hi)] += d
    return out


def periodic_weights(weights: np.ndarray, n) -> np.ndarray:
    r"""The weights of the circular convolution on a periodic grid, by the minimum image.

    Offset m (mod n_a on each axis) takes the cell integral W at its minimum image
    m' ∈ {−⌊n_a/2⌋, …, ⌈n_a/2⌉ − 1}: the kernel read on the torus as k(minimum image of z).
    That is the periodised kernel Σ_ℓ k(z + 2Lℓ) to the minimum-image approximation: exact
    for a kernel whose range is below L, and for a 2L-periodic kernel (−cos θ on the circle)
    when the cell at offset n_a/2 (which straddles ±L) integrates the kernel itself across L.

    .. math::

        W^{\mathrm{per}}_{m} = W_{m'}, \qquad m' \equiv m \pmod n, \quad
        m'_a \in [-n_a/2, n_a/2).

    Parameters
    ----------
    weights : numpy.ndarray, shape (2 n_1 − 1, …)
        The cell-integrated kernel of :func:`cell_integrated_kernel` (offset m at index
        n_a − 1 + m_a).
    n : sequence of p ints
        Cells per axis.

    Returns
    -------
    numpy.ndarray, shape n
        ``out[m]`` = W_{m'} for m = 0 … n_a − 1 (the FFT layout of a circular kernel).

    See Also
    --------
    cell_integrated_kernel : the free-space weights (zero padding).
    meanfield.energy.PeriodicPairInteraction : the particle view's minimum-image pair term.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.pde.convolution import periodic_weights
    >>> W = np.array([-3.0, -2.0, -1.0, 0.0, -1.0, -2.0, -3.0])  # offsets -3 … 3
    >>> periodic_weights(W, (4,))  # offsets 0, 1, -2, -1
    array([ 0., -1., -2., -1.])
    """
    n = tuple(int(k) for k in n)
    src = []
    for k in n:
        m = np.arange(k)
        mi = np.where(m >= k - k // 2, m - k, m)  # minimum image in [−⌊k/2⌋, ⌈k/2⌉ − 1]
        src.append(k - 1 + mi)
    return weights[np.ix_(*src)]


class FFTConvolution:
    r"""The linear map ρ ↦ (Σ_j W_{i−j} ρ_j)_i on a grid, by zero-padded real FFT.

    On a periodic grid (a :class:`~meanfield.domains.Torus`) the sum is circular,
    Σ_j W^per_{(i−j) mod n} ρ_j (:func:`periodic_weights`), by FFT without padding.

    Parameters
    ----------
    kernel : PairKernel
    grid : Grid
    workers : int, optional
        Threads for scipy.fft (default: scipy's default).

    Attributes
    ----------
    weights : ndarray (2 n_1 − 1, …)
        The cell-integrated kernel W (see :func:`cell_integrated_kernel`).

    See Also
    --------
    cell_integrated_kernel : the weights W.
    meanfield.pde.potential.GridEnergy : 2λ (W ∗ ρ) in δE/δρ.
    meanfield.energy.PairInteraction.first_variation : the particle view's 2λ (k ∗ μ), O(M N)
        directly.

    Notes
    -----
    .. math::

        (W * \rho)_i = \sum_j W_{i-j}\, \rho_j,

    an aperiodic (Toeplitz) sum, computed exactly by FFT on a grid padded to at least
    2 n_a − 1 points per axis.

    References
    ----------
    - R. W. Hockney, J. W. Eastwood, *Computer Simulation Using Particles*, McGraw-Hill, 1981.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.pde.convolution import FFTConvolution
    >>> from meanfield.pde.grid import Grid
    >>> conv = FFTConvolution(Riesz(-1.0), Grid(Box(1, 1.0), 4))
    >>> rho = np.array([1.0, 2.0, 0.0, 3.0])
    >>> conv(rho)
    array([-2.8125, -1.875 , -1.75  , -1.9375])
    >>> bool(np.allclose(conv(rho), conv.direct(rho)))  # the FFT equals the direct sum
    True
    """

    def __init__(self, kernel: PairKernel, grid: Grid, *, workers: int | None = None):
        if not isinstance(kernel, PairKernel):
            raise InputTypeError(f"kernel must be a PairKernel, got {kernel!r}")
        kernel.check_dimension(grid.dim)
        check_kernel_resolution(kernel, grid)
        self.kernel, self.grid, self.workers = kernel, grid, workers
        self.weights = cell_integrated_kernel(kernel, grid.h, grid.n)
        if not np.all(np.isfinite(self.weights)):
            raise InputError(f"the cell-integrated kernel {kernel!r} is not finite on this grid")
        if grid.periodic:
            self.padded = tuple(grid.n)  # circular: no padding
            self._hat = sfft.rfftn(periodic_weights(self.weights, grid.n), workers=workers)
            return
        self.padded = tuple(sfft.next_fast_len(2 * k - 1, real=True) for k in grid.n)
        Wp = np.zeros(self.padded)
        # circular placement: offset m goes to index m mod L
        idx = [
            np.r_[np.arange(k), np.arange(L - k + 1, L)]
            for k, L in zip(grid.n, self.padded, strict=True)
        ]
        src = [np.r_[np.arange(k - 1, 2 * k - 1), np.arange(0, k - 1)] for k in grid.n]
        Wp[np.ix_(*idx)] = self.weights[np.ix_(*src)]
        self._hat = sfft.rfftn(Wp, workers=workers)

    def __call__(self, rho) -> np.ndarray:
        """Σ_j W_{i−j} ρ_j for ρ of shape ``grid.shape`` -> same shape."""
        rho = np.asarray(rho, dtype=float)
        f = sfft.rfftn(rho, s=self.padded, workers=self.workers)
        out = sfft.irfftn(f * self._hat, s=self.padded, workers=self.workers)
        return out[tuple(slice(0, k) for k in self.grid.n)]

    def direct(self, rho) -> np.ndarray:
        """The same sum as :meth:`__call__` by the O(M²) definition (for tests and tiny grids).

        Parameters
        ----------
        rho : array_like, shape ``grid.shape``
            Cell values.

        Returns
        -------
        numpy.ndarray, shape ``grid.shape``
            Σ_j W_{i−j} ρ_j.

        See Also
        --------
        cell_integrated_kernel : the weights summed.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.kernels import Riesz
        >>> from meanfield.pde.grid import Grid
        >>> conv = FFTConvolution(Riesz(-1.0), Grid(Box(1, 1.0), 4))
        >>> conv.direct([0.0, 1.0, 0.0, 0.0])  # column 1 of W: W_{i-1}
        array([-0.25  , -0.0625, -0.25  , -0.5   ])
        """
        rho = np.asarray(rho, dtype=float)
        n = self.grid.n
        out = np.zeros(n)
        if self.grid.periodic:
            Wper = periodic_weights(self.weights, n)
            idx = np.indices(n)
            for j in np.ndindex(*n):
                m = tuple((idx[a] - j[a]) % n[a] for a in range(len(n)))
                out += Wper[m] * rho[j]
            return out
        for j in np.ndindex(*n):
            sl = tuple(slice(k - 1 - jj, 2 * k - 1 - jj) for k, jj in zip(n, j, strict=True))
            out += self.weights[sl] * rho[j]
        return out

    def stiffness(self, iterations: int = 80) -> float:
        r"""Upper estimate of the spectral radius of v ↦ −Δ_h (W ∗ v), Δ_h the no-flux Laplacian.

        Linearising ∂_t ρ = ∇·(ρ ∇(2λ W ∗ ρ)) about a constant density ρ₀ gives the
        operator 2λ ρ₀ (−Δ_h)(W ∗ ·); an explicit step is monotone for its modes when

        .. math::

            \Delta t \cdot 2\lambda \rho_0 \cdot \varrho\big((-\Delta_h)(W * \cdot)\big) \le 1.

        Estimated by power iteration (seeded start, the largest ratio ‖Av‖/‖v‖ over the last
        10 of ``iterations`` steps) and multiplied by 1.25 to stay above the true value
        (checked against dense eigenvalues in the tests).

        Parameters
        ----------
        iterations : int, default 80
            Power-iteration steps.

        Returns
        -------
        float
            The estimate; unit kernel unit × volume / length².

        See Also
        --------
        row_sum_bound : a cheaper, cruder bound.
        meanfield.pde.potential.GridEnergy.pair_stiffness : Σ 2λ × this over the pair terms.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.kernels import Gaussian
        >>> from meanfield.pde.convolution import neg_laplacian
        >>> from meanfield.pde.grid import Grid
        >>> g = Grid(Box(1, 1.0), 8)
        >>> conv = FFTConvolution(Gaussian(0.5), g)
        >>> A = np.stack([neg_laplacian(conv(e), g.h) for e in np.eye(8)], axis=1)
        >>> rho_A = max(abs(np.linalg.eigvals(A)))
        >>> bool(rho_A <= conv.stiffness() <= 1.3 * rho_A)
        True
        """
        v = np.random.default_rng(0).standard_normal(self.grid.shape)
        ratios = []
        for _ in range(iterations):
            w = neg_laplacian(self(v), self.grid.h, periodic=self.grid.periodic)
            nv, nw = np.linalg.norm(v), np.linalg.norm(w)
            if nw == 0:
                return 0.0
            ratios.append(nw / nv)
            v = w / nw
        return 1.25 * float(max(ratios[-10:]))

    def row_sum_bound(self) -> float:
        r"""A bound on the operator's 2-norm by Young's inequality.

        .. math::

            \|W * \rho\|_2 \le \Big(\sum_m |W_m|\Big) \|\rho\|_2.

        Returns
        -------
        float
            Σ_m |W_m|; unit kernel unit × volume.

        See Also
        --------
        stiffness : the power-iteration estimate.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.kernels import Riesz
        >>> from meanfield.pde.grid import Grid
        >>> conv = FFTConvolution(Riesz(-1.0), Grid(Box(1, 1.0), 4))
        >>> conv.row_sum_bound()  # 2 (0.75 + 0.5 + 0.25) + 0.0625
        3.0625
        """
        return float(np.abs(self.weights).sum())
