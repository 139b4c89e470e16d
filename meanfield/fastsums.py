"""Fast pair sums for the Coulomb kernel of R^p, p = 1, 2, 3: a drop-in :class:`PairInteraction`.

The direct pair sum costs O(N²).  For the Coulomb kernel of the particle dimension (THEORY §2,
Riesz s = p − 2, unsoftened) the structure allows much less:

* **p = 1, k(z) = −‖z‖** (s = −1).  After sorting, Σ_{i≠j} ‖x_i − x_j‖ = 2 Σ_r (2r − N + 1) x_(r)
  (0-based rank r) and the force is ∇_{x_i} Σ_j −‖x_i − x_j‖ = −(#{x_j < x_i} − #{x_j > x_i}):
  a function of the rank.  O(N log N), exact (integer counts, one ordered sum).
* **p = 2, k(z) = −log‖z‖** (s = 0).  Spectral Ewald summation with the non-uniform FFT
  (``finufft``): a Gaussian split into a short-range part ½E₁(r²/σ²) summed over neighbour
  pairs (``scipy.spatial.cKDTree``) and a smooth part summed in Fourier space with the free-space
  kernel truncated at radius R (Vico–Greengard–Ferrando 2016), so no periodic images enter.
  O(N log N) at fixed tolerance.  (``fmm2dpy``, the 2D FMM, was the first choice; its only
  wheel, 0.0.5 of 2022, is built against NumPy 1 and does not import under NumPy 2.)
* **p = 3, k(z) = 1/‖z‖** (s = 1).  The fast multipole method of ``fmm3dpy`` (FMM3D, Flatiron
  Institute), O(N) at fixed tolerance; it computes Σ q/(4π r), rescaled here by 4π.

Softening: all three structures belong to the *unsoftened* kernel (‖z‖² + ε² has no rank
formula, no multipole expansion and no compact split), so a softened kernel is refused with a
named error rather than silently computed with ε = 0.  Coincident particles behave as in the
direct sum: the value is +inf for the singular p = 2, 3 kernels and the gradient takes the zero
subgradient of the pair.

Precision: the sums run in float64 on the CPU whatever the particles' dtype and device (the
libraries are float64 CPU codes); the results are cast back.  ``eps`` is the requested relative
accuracy of the p = 2, 3 sums (p = 1 is exact): the relative ℓ² error over the particles of the
potentials Σ_j k(ω_i − ω_j) and of the forces, checked against the direct sum in the tests.

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

import math

import numpy as np
import torch
from scipy import special
from scipy.spatial import cKDTree

from ._validation import check_int, check_positive
from .energy import PairInteraction
from .kernels import PairKernel, Riesz

#: particle dimension -> Riesz exponent s of its Coulomb kernel, the kernels with a fast sum
COULOMB_S = {1: -1.0, 2: 0.0, 3: 1.0}

#: default median number of neighbours inside the p = 2 short-range cutoff (balances the
#: neighbour pairs against the Fourier modes; of 16/32/64/128 with the cap below, 64 was
#: fastest or within noise of it for the force at N = 3e3, 1e4, 1e5 on a uniform disc)
NEAR_NEIGHBOURS = 64

#: particle dimension -> N below which the direct sum is faster (min_n=None): the crossover of
#: benchmarks/results/fastsums.md (force only, float64, one thread, quiet machine, against the
#: tiled direct sum of meanfield.pairsum: N ≈ 14 000 in p = 2 and ≈ 35 000 in p = 3; the
#: earlier 2200-2400 were measured against the slower row-chunk direct sum), rounded down
DIRECT_BELOW = {1: 0, 2: 14_000, 3: 35_000}

_INSTALL_HINT = "install it with `pip install meanfield[fast]` (or `pip install {pkg}`)"


def _import(pkg: str):
    try:
        return __import__(pkg)
    except ImportError as exc:  # also a NumPy-ABI failure inside the package
        raise ImportError(
            f"the fast pair sum in this dimension needs {pkg!r}: "
            + _INSTALL_HINT.format(pkg=pkg)
            + f" ({exc})"
        ) from exc


def _check_finite(name: str, t: torch.Tensor) -> None:
    # a tree or FMM over an infinite coordinate does not end well (and NaN would not warn)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite for a fast pair sum (found NaN or inf)")


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

    Examples
    --------
    The points 0, 1, 3: Σ_{i≠j} −|x_i − x_j| = −2 (1 + 3 + 2) = −12.

    >>> import torch
    >>> from meanfield.fastsums import coulomb1d_sums
    >>> total, grad = coulomb1d_sums(torch.tensor([0.0, 1.0, 3.0], dtype=torch.float64))
    >>> float(total), grad.tolist()
    (-12.0, [2.0, 0.0, -2.0])
    """
    N = x.shape[-1]
    # the rank weights sum to 0, so a common offset cancels analytically: remove it first so
    # it does not cancel numerically (round-off ~ eps · N · spread instead of eps · N · |x|)
    xc = x - x.mean(-1, keepdim=True)
    xs = torch.sort(xc, dim=-1).values.contiguous()
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
def _coincident(targets: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
    """Mask (M,) of targets that coincide exactly with a source (another particle if None)."""
    if sources is None:
        _, inverse, counts = np.unique(targets, axis=0, return_inverse=True, return_counts=True)
        return counts[inverse.ravel()] > 1
    dist, _ = cKDTree(sources).query(targets, k=1)
    return dist == 0.0


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

    Notes
    -----
    .. math::

        \phi_i = \sum_{j \ne i} \frac{1}{|x_i - x_j|}, \qquad
        \nabla_{x_i} \phi_i = -\sum_{j \ne i} \frac{x_i - x_j}{|x_i - x_j|^3}.

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
    fmm3dpy = _import("fmm3dpy")
    N = len(x)
    if N < 2 or not np.ptp(x, axis=0).any():  # no pairs, or only coincident ones: no tree
        return np.full(N, np.inf if N > 1 else 0.0), (np.zeros((N, 3)) if want_grad else None)
    out = fmm3dpy.lfmm3d(
        eps=eps, sources=np.asfortranarray(x.T), charges=np.ones(N), pg=2 if want_grad else 1
    )
    pot = 4 * np.pi * out.pot  # FMM3D's kernel is 1/(4π r)
    pot[_coincident(x)] = np.inf
    return pot, (4 * np.pi * out.grad.T if want_grad else None)


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

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.fastsums import coulomb3d_field
    >>> atoms = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    >>> pot = coulomb3d_field(np.zeros((1, 3)), atoms, np.array([1.0, 1.0]), 1e-10)
    >>> round(float(pot[0]), 8)  # 1/1 + 1/2
    1.5
    """
    fmm3dpy = _import("fmm3dpy")
    out = fmm3dpy.lfmm3d(
        eps=eps,
        sources=np.asfortranarray(points.T),
        charges=np.ascontiguousarray(weights),
        targets=np.asfortranarray(at.T),
        pgt=1,
    )
    pot = 4 * np.pi * out.pottarg
    pot[_coincident(at, points[weights > 0])] = np.inf
    return pot


# ----------------------------------------------------------------------------------------
# p = 2: spectral Ewald with the NUFFT
# ----------------------------------------------------------------------------------------
class _EwaldPlan2D:
    """Parameters of the Gaussian split −log r = ½E₁(r²/σ²) + (−log r − ½E₁(r²/σ²)).

    With L = log(1/eps): the short-range part is cut at r_c = σ √L, where ½E₁ ≤ e^{−L}/(2L);
    the smooth part's Fourier integral, 2π e^{−σ²k²/4}/k², is cut at k_max = 2√L/σ, an error
    ½E₁(L) of the same size; the kernel is truncated at R = D + r_c (D the diameter of the box
    holding every point), whose Gaussian tail at ‖x‖ ≤ D is again e^{−L}; and the Fourier modes
    are spaced Δk = 2π/P with period P = s + R + r_c (s the box side), so periodic images of the
    truncated kernel (support R + r_c) never reach a difference of two points.  Each term is
    e^{−L} = eps times an O(1) factor (the force tails carry 1/r_c, the sums N); measured
    relative ℓ² errors of the potentials and forces are 0.01–0.3 eps for eps = 1e-4 … 1e-10
    (uniform, Gaussian and nearly collinear clouds, N = 3000); below 1e-10 the NUFFT's own
    round-off sets a floor.
    """

    def __init__(self, lo: np.ndarray, hi: np.ndarray, r_c: float, eps: float):
        side = np.maximum(hi - lo, 0.0)
        # a cloud of coincident points has no extent: give it a tiny one (the log kernel is
        # scale-covariant, so any box works; coincident pairs are +inf in the near part)
        scale = max(1.0, float(np.abs(lo).max()), float(np.abs(hi).max()))
        s = max(float(side.max()), 1e-9 * scale)
        self.centre = (lo + hi) / 2
        diam = float(np.hypot(*side)) or s
        # M ≈ L P/(π r_c) modes per axis: the floor on r_c keeps M ≤ MAX_MODES however
        # concentrated the cloud (the price is more neighbour pairs in its dense part)
        L = math.log(1 / eps)
        self.r_c = min(max(r_c, L * (2.5 * s) / (math.pi * MAX_MODES)), s)
        self.L = L
        self.sigma = self.r_c / math.sqrt(self.L)
        self.R = diam + self.r_c
        self.period = s + self.R + self.r_c
        self.dk = 2 * math.pi / self.period
        k_max = 2 * math.sqrt(self.L) / self.sigma
        self.M = int(math.ceil(k_max / self.dk))

    def multiplier(self) -> np.ndarray:
        """Ĝ_R(k) e^{−σ²k²/4} Δk²/(4π²) on the (2M+1)² mode grid (modes −M … M per axis).

        .. math::

            \\hat G_R(k) = 2\\pi \\int_0^R (-\\log r)\\, J_0(kr)\\, r\\, dr
            = 2\\pi \\left[\\frac{1 - J_0(kR)}{k^2} - \\frac{R \\log R\\, J_1(kR)}{k}\\right],
            \\quad \\hat G_R(0) = 2\\pi\\left(\\frac{R^2}{4} - \\frac{R^2 \\log R}{2}\\right).

        Every nonzero mode has kR ≥ 2πR/P > 2: no cancellation in 1 − J₀.
        """
        m = np.arange(-self.M, self.M + 1) * self.dk
        k = np.hypot(m[:, None], m[None, :])
        R = self.R
        kk = np.where(k > 0, k, 1.0)
        kR = kk * R
        g = 2 * np.pi * ((1 - special.j0(kR)) / kk**2 - R * math.log(R) * special.j1(kR) / kk)
        g[k == 0] = 2 * np.pi * (R * R / 4 - R * R * math.log(R) / 2)
        return g * np.exp(-((self.sigma * k) ** 2) / 4) * (self.dk**2 / (4 * np.pi**2)), m

    def scaled(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Coordinates mapped to the NUFFT's 2π-periodic box, each in (−π, π)."""
        z = (x - self.centre) * self.dk
        return np.ascontiguousarray(z[:, 0]), np.ascontiguousarray(z[:, 1])

    @property
    def self_energy(self) -> float:
        """The smooth part at r = 0, γ/2 − log σ: each point's own term in the Fourier sum."""
        return np.euler_gamma / 2 - math.log(self.sigma)


#: cap on the p = 2 Fourier modes per axis and sign ((2M + 1)² modes, 4× that FFT grid:
#: ≈ 270 MB of complex128 at the cap, reached near N = 1e5; 768 was 2× slower there)
MAX_MODES = 1024


def _cutoff(tree: cKDTree, x: np.ndarray, near: int) -> float:
    """Short-range cutoff: the median distance to the ``near``-th neighbour (≤ 256 samples)."""
    k = min(near, len(x) - 1)
    if k < 1:
        return 0.0
    sample = x[:: max(1, len(x) // 256)]
    dist, _ = tree.query(sample, k=k + 1)  # the first neighbour is the point itself
    return float(np.median(dist[:, -1]))


#: FINUFFT threads: one, because its OpenMP regions stall on a loaded machine (measured 40×
#: slower with 2 threads than with 1 at 225² modes while other processes held both cores)
FINUFFT_THREADS = 1


def _ewald_far(plan, src, q, tgt, eps, want_value=True, want_grad=False, threads=None):
    """Smooth part at the targets: values (M,) or None, gradients (M, 2) or None.

    The smooth part and its two derivatives are real, and their Fourier coefficients are
    Hermitian, so the two derivatives share one complex transform: T(c₁ + i c₂) = T(c₁) + i T(c₂).
    """
    finufft = _import("finufft")
    threads = FINUFFT_THREADS if threads is None else threads
    mult, m = plan.multiplier()
    F = finufft.nufft2d1(
        *plan.scaled(src), q.astype(np.complex128), mult.shape, eps=eps, isign=-1, nthreads=threads
    )
    coef = F * mult
    stack = []
    if want_value:
        stack.append(coef)
    if want_grad:  # ∂/∂x e^{ik·x} = i k e^{ik·x}: (i k₁ c) + i (i k₂ c)
        stack.append(1j * coef * (m[:, None] + 1j * m[None, :]))
    out = finufft.nufft2d2(*plan.scaled(tgt), np.stack(stack), eps=eps, isign=1, nthreads=threads)
    value = out[0].real if want_value else None
    grad = np.stack([out[-1].real, out[-1].imag], axis=1) if want_grad else None
    return value, grad


def coulomb2d_sums(
    x: np.ndarray,
    eps: float,
    want_grad: bool = True,
    near: int = NEAR_NEIGHBOURS,
    want_value: bool = True,
):
    r"""Σ_{j≠i} −log‖x_i − x_j‖ and its gradient in x_i by spectral Ewald summation.

    Parameters
    ----------
    x : array (N, 2), float64
        Particle positions.
    eps : float
        Relative accuracy (see :class:`_EwaldPlan2D` for how each error term is bounded).
    want_grad : bool
        Compute the gradient (the drift needs only the gradient).
    near : int
        Mean number of neighbours inside the short-range cutoff (a speed knob only).
    want_value : bool
        Compute the potential.

    Returns
    -------
    pot : array (N,) or None
        +inf at a particle with an exact twin (E₁(0), as the direct sum).
    grad : array (N, 2) or None
        −Σ_j (x_i − x_j)/‖x_i − x_j‖²; coincident pairs excluded (zero subgradient).

    Notes
    -----
    The Gaussian (Ewald) split of the kernel, with E₁ the exponential integral:

    .. math::

        -\log r = \underbrace{\tfrac12 E_1(r^2/\sigma^2)}_{\text{near pairs}}
        + \underbrace{\big(-\log r - \tfrac12 E_1(r^2/\sigma^2)\big)}_{\text{NUFFT}} .

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
    N = len(x)
    if N < 2 or not np.ptp(x, axis=0).any():  # no pairs, or only coincident ones
        pot = np.full(N, np.inf if N > 1 else 0.0)
        return (pot if want_value else None), (np.zeros((N, 2)) if want_grad else None)
    tree = cKDTree(x)
    plan = _EwaldPlan2D(x.min(0), x.max(0), _cutoff(tree, x, near), eps)
    pot, grad = _ewald_far(plan, x, np.ones(N), x, eps, want_value, want_grad)
    pairs = tree.query_pairs(plan.r_c, output_type="ndarray")
    i, j = pairs[:, 0], pairs[:, 1]
    d = x[i] - x[j]
    r2 = (d * d).sum(1) / plan.sigma**2
    if want_value:
        with np.errstate(divide="ignore"):
            v = 0.5 * special.exp1(r2)
        pot += np.bincount(i, v, N) + np.bincount(j, v, N) - plan.self_energy
    if want_grad:
        # ∇_{x_i} ½E₁(|x_i − x_j|²/σ²) = −e^{−r²/σ²} (x_i − x_j)/|x_i − x_j|²
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(r2 > 0, -np.exp(-r2) / (r2 * plan.sigma**2), 0.0)
        f = c[:, None] * d
        for a in range(2):
            grad[:, a] += np.bincount(i, f[:, a], N) - np.bincount(j, f[:, a], N)
    return pot, grad


def coulomb2d_field(at, points, weights, eps: float, near: int = NEAR_NEIGHBOURS):
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

    Returns
    -------
    array (M,)
        The potential; +inf at a target on a charged atom, as the direct sum.

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
    both = np.concatenate([at, points])
    tree = cKDTree(points)
    plan = _EwaldPlan2D(both.min(0), both.max(0), _cutoff(tree, points, near), eps)
    pot, _ = _ewald_far(plan, points, weights, at, eps)
    a, b, dist = _near_records(at, tree, plan.r_c)
    with np.errstate(divide="ignore", invalid="ignore"):
        # a target on a charged point gets E₁(0) = +inf, as the direct sum; uncharged
        # points contribute nothing (not inf · 0)
        v = np.where(weights[b] > 0, 0.5 * special.exp1((dist / plan.sigma) ** 2) * weights[b], 0.0)
    pot += np.bincount(a, v, len(at))
    return pot


def _near_records(at, tree, r_c):
    """(target index, point index, distance) of every pair closer than r_c."""
    rec = cKDTree(at).sparse_distance_matrix(tree, r_c, output_type="ndarray")
    return rec["i"].astype(np.intp), rec["j"].astype(np.intp), rec["v"]


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
    eps : float, default 1e-10
        Requested relative accuracy of the p = 2, 3 sums, in [1e-14, 1e-2]; p = 1 is exact.
    min_n : int or None, default None
        Below this many particles (per replica) the direct sum of the base class is used.
        None: :data:`DIRECT_BELOW` for the particle dimension, the crossover measured by
        ``benchmarks/bench_fastsums.py`` on a 2-core machine (force, float64, eps = 1e-8);
        0 always uses the fast sum.

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
        self, kernel: PairKernel, lam: float = 1.0, *, eps: float = 1e-10, min_n: int | None = None
    ):
        super().__init__(kernel, lam)
        if not isinstance(kernel, Riesz) or kernel.s not in COULOMB_S.values():
            raise ValueError(
                f"kernel must be the Coulomb kernel of R^p for p in 1, 2, 3 (Riesz s = -1, 0, 1),"
                f" got {kernel!r}"
            )
        if kernel.softening != 0.0:
            raise ValueError(
                f"softening (epsilon) must be 0 for a fast sum, got {kernel.softening}: the rank "
                "formula, the FMM and the Ewald split hold for the unsoftened kernel only; use "
                "PairInteraction for a softened kernel"
            )
        self.eps = check_positive("eps", eps)
        if not 1e-14 <= self.eps <= 1e-2:
            raise ValueError(f"eps must lie in [1e-14, 1e-2], got {eps}")
        self.min_n = None if min_n is None else check_int("min_n", min_n, minimum=0)

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
        ValueError
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
            raise ValueError(
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
        fn = coulomb2d_sums if p == 2 else coulomb3d_sums
        flat = omega.detach().reshape(-1, *omega.shape[-2:]).to("cpu", torch.float64).numpy()
        totals, grads = [], []
        for x in flat:
            x = np.ascontiguousarray(x)
            pot, g = fn(x, self.eps, want_grad=want_grad, want_value=want_value)
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
            out = coulomb2d_field(*args, self.eps)
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

    Examples
    --------
    >>> from meanfield.fastsums import fast_pair_interaction
    >>> from meanfield.kernels import Coulomb
    >>> term = fast_pair_interaction(Coulomb(1), lam=0.5)  # exact O(N log N) in p = 1
    >>> type(term).__name__, term.describe()["fast_sum"], term.eps
    ('FastCoulombInteraction', 'coulomb', 1e-10)
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
    "COULOMB_S",
    "NEAR_NEIGHBOURS",
    "DIRECT_BELOW",
]
