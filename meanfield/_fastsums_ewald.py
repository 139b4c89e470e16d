"""The 2D spectral Ewald plan of :mod:`meanfield.fastsums` (p = 2): the Gaussian split's
parameters, its cached Fourier multipliers, the cutoff estimate, the NUFFT smooth part, and
the refusal of a pair too close for float64 (r² underflows), and the sums and fields they
make (:func:`_ewald_sums`, :func:`_ewald_field`).

Private: :func:`meanfield.fastsums.coulomb2d_sums` and :func:`~meanfield.fastsums.coulomb2d_field`
are the entry points.  The compiled near field lives in :mod:`meanfield._fastsums_near`.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import torch
from scipy import special
from scipy.spatial import cKDTree

from ._arrays import _column_bounds, _power_of_two_unit
from .errors import NumericalError

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


def _all_coincident(x: np.ndarray) -> bool:
    """Every point of x (N, p) at one place: no pair is apart (the sums are ±inf and 0)."""
    lo, hi = _column_bounds(x)
    return not (hi > lo).any()


#: the p = 2 plan's box side and cutoff are rounded up to powers of 2^(1/16) (≤ 4.4 % more
#: modes per axis, ≤ 4.4 % larger cutoff), so that successive Langevin steps of a slowly
#: moving cloud share one plan and its Fourier multiplier (cached, :data:`_PLAN_CACHE`)
_QUANTUM = 16


def _round_up(v: float) -> float:
    return 2.0 ** (math.ceil(_QUANTUM * math.log2(v)) / _QUANTUM)


class _EwaldPlan2D:
    """Parameters of the Gaussian split −log r = ½E₁(r²/σ²) + (−log r − ½E₁(r²/σ²)).

    With L = log(1/eps): the short-range part is cut at r_c = σ √L, where ½E₁ ≤ e^{−L}/(2L);
    the smooth part's Fourier integral, 2π e^{−σ²k²/4}/k², is cut at k_max = 2√L/σ, an error
    ½E₁(L) of the same size; the kernel is truncated at R = D + r_c, D a bound on the
    distance between two points (``diam``: the smaller of the diagonal √2 s of the square of
    side s holding every point and twice the largest distance of a point from its centre),
    whose Gaussian tail at ‖x‖ ≤ D is again e^{−L}; and the Fourier modes are spaced
    Δk = 2π/P with period P = s + R + r_c, so periodic images of the truncated kernel
    (support R + r_c) never reach a difference of two points (each coordinate of a difference
    is at most s).  A round cloud has D ≈ s: P ≈ 2s instead of 2.41 s, 31 % fewer modes.
    Each term is e^{−L} = eps times an O(1) factor (the force tails carry 1/r_c, the
    sums N); measured relative ℓ² errors of the potentials and forces are 0.01–0.3 eps for
    eps = 1e-4 … 1e-10 (uniform, Gaussian and nearly collinear clouds, N = 3000); below 1e-10
    the NUFFT's own round-off sets a floor.

    The number of modes per axis is M ≈ L P/(π r_c) + 2L/π: with r_c chosen for a fixed
    number of near neighbours (r_c ∝ N^(−1/2) on a fixed cloud) the (2M + 1)² modes grow as N,
    as do the near pairs.  ``max_modes`` (total) floors r_c instead when the cloud is so
    concentrated that its median spacing would ask for more (the price: more near pairs in
    its dense part).
    """

    def __init__(self, s: float, r_c: float, eps: float, max_modes: int, diam: float | None = None):
        self.L = L = math.log(1 / eps)
        self.eps, self.side = eps, s
        diam = math.sqrt(2.0) * s if diam is None else min(diam, math.sqrt(2.0) * s)
        self.diam = diam
        # (2M + 1)² ≤ max_modes with M = L (s + diam + 2 r_c)/(π r_c): the smallest r_c
        m_cap = (math.sqrt(max_modes) - 1) / 2 - 2 * L / math.pi - 1
        r_floor = L * (s + diam) / (math.pi * m_cap) if m_cap > 0 else s
        self.r_c = min(max(r_c, r_floor), s)
        self.sigma = self.r_c / math.sqrt(L)
        self.R = diam + self.r_c
        self.period = s + self.R + self.r_c
        self.dk = 2 * math.pi / self.period
        k_max = 2 * math.sqrt(L) / self.sigma
        self.M = int(math.ceil(k_max / self.dk))

    def multipliers(self) -> tuple[np.ndarray, np.ndarray]:
        """Value and gradient multipliers on the (2M+1)² mode grid (modes −M … M per axis).

        The value multiplier is Ĝ_R(k) e^{−σ²k²/4} Δk²/(4π²),

        .. math::

            \\hat G_R(k) = 2\\pi \\int_0^R (-\\log r)\\, J_0(kr)\\, r\\, dr
            = 2\\pi \\left[\\frac{1 - J_0(kR)}{k^2} - \\frac{R \\log R\\, J_1(kR)}{k}\\right],
            \\quad \\hat G_R(0) = 2\\pi\\left(\\frac{R^2}{4} - \\frac{R^2 \\log R}{2}\\right),

        and the gradient's is i(k₁ + i k₂) times its first part, the transform of −log(r/R)
        on the disc: ∂/∂x e^{ik·x} = i k e^{ik·x}, and the two real derivatives share one
        complex transform, (i k₁ c) + i (i k₂ c).  The second part, the constant −log R on the
        disc, has no gradient where every pair lies inside it (R exceeds the diameter bound
        by the Gaussian's margin); kept, its sampled transform carried an error that grows
        as log R into the forces (N = 20, eps = 1e-6: 2.7e-8 at extent 1, 4e-6 at 1e100;
        N = 2 at extent 1: 2.5e-6).  Every nonzero
        mode has kR ≥ 2πR/P > 2: no cancellation in 1 − J₀.  Ĝ_R is radial, so the Bessel
        functions are evaluated on one quadrant and mirrored.
        """
        M, R = self.M, self.R
        q = np.arange(M + 1) * self.dk
        k = np.hypot(q[:, None], q[None, :])
        kk = np.where(k > 0, k, 1.0)
        smooth = 2 * np.pi * np.exp(-((self.sigma * k) ** 2) / 4) * (self.dk**2 / (4 * np.pi**2))
        g_scaled = (1 - special.j0(kk * R)) / kk**2  # of −log(r/R) on the disc
        g_scaled[0, 0] = R * R / 4
        g_scaled *= smooth
        g = g_scaled - (R * math.log(R) * special.j1(kk * R) / kk) * smooth  # − log R there
        g[0, 0] = (R * R / 4 - R * R * math.log(R) / 2) * smooth[0, 0]
        del k, kk, smooth
        idx = np.abs(np.arange(-M, M + 1))
        value = g[idx[:, None], idx[None, :]]
        m = np.arange(-M, M + 1) * self.dk
        grad = g_scaled[idx[:, None], idx[None, :]] * (1j * m[:, None] - m[None, :])
        return value, grad

    @property
    def self_energy(self) -> float:
        """The smooth part at r = 0, γ/2 − log σ: each point's own term in the Fourier sum."""
        return np.euler_gamma / 2 - math.log(self.sigma)


#: the last few plans with their multipliers, keyed by (side, cutoff, eps, modes cap, diameter): a
#: Langevin run reuses one for many steps; each holds 24 (2M + 1)² bytes (≈ 380 MB at N = 1e6)
_PLAN_CACHE: dict = {}
_PLAN_CACHE_SIZE = 2
#: a cached plan serves a cloud it covers (side and diameter at least the cloud's, same eps,
#: modes within the cap) whose wanted cutoff is within this factor of the plan's (two
#: quanta): accuracy does not depend on the cutoff, only the time does (by ≲ 20 % here),
#: while new multipliers cost ≈ 2 CPU-s at N = 1e6.  Without it a Langevin run whose box
#: side jitters across a quantum rebuilt a plan at almost every other step.
_REUSE_FACTOR = 2.0 ** (2 / _QUANTUM)


def _plan(s: float, r_c: float, eps: float, max_modes: int, diam: float):
    key = (_round_up(s), _round_up(r_c), eps, max_modes, _round_up(diam))
    hit = _PLAN_CACHE.pop(key, None)
    if hit is None:
        want = _EwaldPlan2D(key[0], key[1], eps, max_modes, key[4])  # cheap: no multipliers
        for old_key, cached in reversed(_PLAN_CACHE.items()):
            plan = cached[0]
            if (
                plan.eps == eps
                and plan.side >= s
                and plan.diam >= diam
                and (2 * plan.M + 1) ** 2 <= max_modes
                and want.r_c / _REUSE_FACTOR <= plan.r_c <= want.r_c * _REUSE_FACTOR
            ):
                key, hit = old_key, _PLAN_CACHE.pop(old_key)
                break
        else:
            hit = (want, *want.multipliers())
            while len(_PLAN_CACHE) >= _PLAN_CACHE_SIZE:
                _PLAN_CACHE.pop(next(iter(_PLAN_CACHE)))
    _PLAN_CACHE[key] = hit  # most recently used last
    return hit


def _cutoff(x: np.ndarray, near: int, seed: int = 0) -> float:
    """Short-range cutoff: the median distance to the ``near``-th neighbour, O(N/near).

    Estimated on a random subsample of n ≈ 16 N/near points (≥ 2000), where the same radius
    holds ≈ 16 neighbours; 256 query points; fixed seed, so the plan is reproducible.
    """
    N = len(x)
    k = min(near, N - 1)
    if k < 1:
        return 0.0
    n = min(N, max(2000, 16 * N // max(k, 1)))
    rng = np.random.default_rng(seed)
    sub = x if n == N else x[rng.choice(N, n, replace=False)]
    ks = max(1, min(n - 1, round(k * n / N)))
    sample = sub[:: max(1, n // 256)]
    dist, _ = cKDTree(sub).query(sample, k=ks + 1)  # the first neighbour is the point itself
    return float(np.median(dist[:, -1]))


class _numba_threads:
    """Run the compiled near field on ``n`` threads (at most numba's pool), then restore.

    torch's thread count is restored too: numba's OpenMP threading layer shares the OpenMP
    runtime with torch, and starting its pool (or restoring numba's count) sets the runtime's
    count to ``NUMBA_NUM_THREADS`` (the CPU count).  That silently overrode
    ``torch.set_num_threads(1)`` / ``OMP_NUM_THREADS=1`` for the rest of the process: the
    alignment's matrix products of a Langevin step then ran 25-50x slower at N = 1e5 on a
    machine whose other core was busy (tests/test_fastsums_scaling.py).
    """

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        import numba

        self.torch_before = torch.get_num_threads()
        self.before = numba.get_num_threads()
        numba.set_num_threads(max(1, min(self.n, numba.config.NUMBA_NUM_THREADS)))

    def __exit__(self, *exc):
        import numba

        numba.set_num_threads(self.before)
        torch.set_num_threads(self.torch_before)


class _SpectrumScratch:
    """One reusable spectrum buffer for :func:`_ewald_far`, kept between calls.

    At N = 1e6 a spectrum is (2M + 1)² ≈ 1.6e7 complex numbers (256 MB), and a fresh one
    cost 0.55 CPU-s of a 5.3 CPU-s Langevin step (default problem, one thread): the kernel
    maps its pages on first touch, ~1.6 µs a 4 KiB page on this machine, every step, since
    the allocator hands a block that large back to the system when it is freed.  Reusing it
    leaves the peak memory as it was (1.66 vs 1.65 GiB) and keeps 16 (2M + 1)² bytes (32 when
    the value is wanted too) after the call.  One slot: a second thread calling while it is
    in use gets a fresh buffer instead of waiting.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._buffer = None

    def take(self, shape: tuple) -> tuple[np.ndarray, bool]:
        """(buffer of ``shape`` = (slots, rows, columns), complex128; whether it is the shared
        one, to :meth:`give`).  A kept buffer of more slots serves fewer (a run that records
        its energy now and then alternates one and two slots)."""
        if not self._lock.acquire(blocking=False):
            return np.empty(shape, dtype=np.complex128), False
        kept = self._buffer
        if kept is None or kept.shape[1:] != shape[1:] or kept.shape[0] < shape[0]:
            self._buffer = kept = None  # the old one is freed before the new one is mapped
            self._buffer = kept = np.empty(shape, dtype=np.complex128)
        return kept[: shape[0]], True

    def give(self, shared: bool) -> None:
        if shared:
            self._lock.release()

    def clear(self) -> None:
        with self._lock:
            self._buffer = None


_SCRATCH = _SpectrumScratch()


def clear_caches() -> None:
    """Free what the p = 2 sums keep between calls: the cached plans with their Fourier
    multipliers (24 (2M + 1)² bytes each, ≈ 380 MB at N = 1e6) and the spectrum buffer
    (16 or 32 (2M + 1)² bytes).  The next call rebuilds them (≈ 2 CPU-s at N = 1e6).

    See Also
    --------
    meanfield.fastsums.coulomb2d_sums : the sums that keep them.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.fastsums import clear_caches, coulomb2d_sums
    >>> x = np.random.default_rng(0).normal(size=(100, 2))
    >>> _, before = coulomb2d_sums(x, 1e-8)
    >>> clear_caches()
    >>> _, after = coulomb2d_sums(x, 1e-8)  # the same sums from a fresh plan
    >>> bool(np.array_equal(before, after))
    True
    """
    _PLAN_CACHE.clear()
    _SCRATCH.clear()


def _ewald_far(plan, centre, src, q, tgt, eps, want_value, want_grad, threads):
    """Smooth part at the targets: values (M,) or None, gradients (M, 2) or None."""
    finufft = _import("finufft")
    plan, mult, mult_grad = plan
    both = want_value and want_grad
    spectra, shared = _SCRATCH.take((1 + both, *mult.shape))
    try:
        z_src = (src - centre) * plan.dk
        # the type-1 transform writes into the last slot, the multipliers then fill the slots
        # in place (a fresh 0.5 GB product per multiplier cost more than the multiplication)
        F = spectra[-1]
        finufft.nufft2d1(
            np.ascontiguousarray(z_src[:, 0]),
            np.ascontiguousarray(z_src[:, 1]),
            q.astype(np.complex128),
            mult.shape,
            out=F,
            eps=eps,
            isign=-1,
            nthreads=threads,
        )
        del z_src
        if both:
            np.multiply(F, mult, out=spectra[0])
        np.multiply(F, mult_grad if want_grad else mult, out=F)
        z = (tgt - centre) * plan.dk
        out = finufft.nufft2d2(
            np.ascontiguousarray(z[:, 0]),
            np.ascontiguousarray(z[:, 1]),
            spectra if both else F,
            eps=eps,
            isign=1,
            nthreads=threads,
        )
    finally:
        _SCRATCH.give(shared)
    out = out.reshape(-1, len(z))
    value = out[0].real.copy() if want_value else None
    grad = np.stack([out[-1].real, out[-1].imag], axis=1) if want_grad else None
    return value, grad


def _ewald_setup(box_points, near_points, eps, near, max_modes):
    lo, hi = _column_bounds(box_points)
    side = float(np.max(hi - lo))
    # a cloud of coincident points has no extent: give it a tiny one (the log kernel is
    # scale-covariant, so any box works; coincident pairs are +inf in the near part)
    scale = max(1.0, float(np.abs(lo).max()), float(np.abs(hi).max()))
    s = max(side, 1e-9 * scale)
    centre = (lo + hi) / 2
    # no two points are further apart than twice the farthest one from the centre
    diam = max(2 * math.sqrt(float(((box_points - centre) ** 2).sum(1).max())), s)
    # the plan and its multipliers do not depend on the centre of the box
    return _plan(s, max(_cutoff(near_points, near), 1e-300), eps, max_modes, diam), centre


def _refuse_underflow(what: str, pot, grad, at: np.ndarray, sources: np.ndarray | None):
    """NumericalError for a non-finite gradient or a +inf potential off an exact twin (the one
    legitimate inf) of the p = 2 sums: both come only from two distinct points closer than
    ~1.5e-154 (after :func:`_unit_scale`, which rescales only clouds of extreme extent),
    whose r² underflows.  ``sources`` None: the targets ``at`` are the particles themselves."""
    bad = np.zeros(len(at), dtype=bool) if grad is None else ~np.isfinite(grad).all(1)
    if pot is not None and not np.isfinite(pot).all():  # rare: only then look for twins
        src = at if sources is None else sources
        tree = cKDTree(src) if len(src) else None
        for i in np.flatnonzero(~np.isfinite(pot)):  # exact equality: r² = 0 is not enough
            near = tree.query_ball_point(at[i], r=0.0) if tree is not None else []
            bad[i] |= (src[near] == at[i]).all(1).sum() < (1 if sources is not None else 2)
    if bad.any():
        raise NumericalError(
            f"{what}: {int(bad.sum())} point(s) have a distinct partner closer than ~1.5e-154 "
            "(relative to the cloud's extent where that lies beyond 2^+-100), where r^2 "
            "underflows float64 and the gradient or potential becomes inf/NaN: merge "
            "such points into exact twins (the zero subgradient) or move them apart"
        )


def _unit_scale(points: np.ndarray) -> float:
    """1.0, or for a cloud of extreme extent (outside 2^±100) a power of two s near its
    extent, with points / s exact (else 1.0: a coordinate would lose bits).

    The sums are scale-covariant, −log‖s z‖ = −log s − log‖z‖, but float64 is not: beyond
    ≈ 1e154 the squared distances overflow (a cloud 1e300 wide was an OverflowError) and
    below ≈ 1e-154 they underflow (a pair 1e-160 apart was refused); scaled to extent ≈ 1,
    both are summed like any other cloud.
    """
    lo, hi = _column_bounds(points)
    extent = float((hi - lo).max())
    if 2.0**-100 <= extent <= 2.0**100:
        return 1.0
    scale = _power_of_two_unit(extent)
    return scale if np.array_equal(points / scale * scale, points) else 1.0


def _ewald_sums(x, eps, want_value, want_grad, near, threads, modes_per_particle):
    """:func:`meanfield.fastsums.coulomb2d_sums` after its checks (N ≥ 2, not all coincident);
    a cloud of extreme extent is first scaled by a power of two (exact, :func:`_unit_scale`)."""
    from ._fastsums_near import near_field

    N = len(x)
    scale = _unit_scale(x)
    if scale != 1.0:
        x = x / scale
    # a handful of particles: the relative error of so few forces does not average the
    # per-mode bounds (measured over 40 clouds each: up to 1.7 eps at N = 2, 1.0 eps at 3,
    # ≤ 0.55 eps from 5 on, for eps 1e-4 to 1e-9), so below 8 the split runs at eps / 8
    eps = eps if N >= 8 else max(eps / 8, 1e-14)
    cached, centre = _ewald_setup(x, x, eps, near, int(modes_per_particle * N) + 4096)
    pot, grad = _ewald_far(cached, centre, x, np.ones(N), x, eps, want_value, want_grad, threads)
    plan = cached[0]
    with _numba_threads(threads):
        near_pot, near_grad = near_field(
            x, x, np.ones(N), plan.r_c, plan.sigma, want_value, want_grad, same=True
        )
    if want_value:  # −log‖x_i − x_j‖ = −log‖x_i/s − x_j/s‖ − log s, N − 1 partners each
        pot += near_pot - plan.self_energy - (N - 1) * math.log(scale)
    if want_grad:
        grad += near_grad
        if scale != 1.0:
            grad /= scale
    _refuse_underflow("coulomb2d_sums", pot if want_value else None, grad, x, None)
    return pot, grad


def _ewald_field(at, points, weights, eps, near, threads, modes_per_particle):
    """:func:`meanfield.fastsums.coulomb2d_field` after its checks (targets and atoms); both
    scaled first by a power of two when extreme, as in :func:`_ewald_sums`."""
    from ._fastsums_near import near_field

    both = np.concatenate([at, points])
    scale = _unit_scale(both)
    if scale != 1.0:
        at, points, both = at / scale, points / scale, both / scale
    cached, centre = _ewald_setup(
        both, points, eps, near, int(modes_per_particle * len(both)) + 4096
    )
    pot, _ = _ewald_far(cached, centre, points, weights, at, eps, True, False, threads)
    plan = cached[0]
    with _numba_threads(threads):
        near_pot, _ = near_field(at, points, weights, plan.r_c, plan.sigma, True, False)
    pot += near_pot - math.log(scale) * float(weights.sum())
    _refuse_underflow("coulomb2d_field", pot, None, at, points[weights > 0])
    return pot
