"""Direct pair sums Σ_{i≠j} k(ω_i − ω_j) and their gradients, tiled and symmetric.

The particles are cut into square tiles of :data:`TILE_ROWS` rows; each unordered pair of
tiles (I ≤ J) is visited once, so every pair's kernel is evaluated once and its force goes to
both particles (Newton's third law).  In p ≥ 2 the squared distances of a tile are one
matrix product,

.. math::

    u_{ij} = |ω_i|^2 + |ω_j|^2 − 2\\,ω_i·ω_j + ε^2
           = [ω_i,\\ |ω_i|^2 + ε^2,\\ 1] · [−2ω_j,\\ 1,\\ |ω_j|^2],

(no tile × tile × p tensor; relative error ~ machine epsilon × |ω|²/u, so a cloud far from
the origin, max|ω − mean|² < max|ω|²/4, is first centred: the sums are translation invariant),
and the gradient is a second one,

.. math::

    ∇_{ω_i} \\sum_{j≠i} k(ω_i − ω_j) = \\sum_j c_{ij} (ω_i − ω_j),\\qquad c_{ij} = 2κ'(u_{ij}),

with Σ_j c_ij and Σ_j c_ij ω_j both read from c @ [ω, 1].  Between the two products only a
short chain of in-place passes runs over the tile (a Riesz kernel: one reciprocal or rsqrt
and a few squarings; the value is then Σ u·c, one dot product), and constant factors such as
−|s| are applied once at the end.  Memory is O(N p + tile²).  In p = 1 the differences
ω_i − ω_j are formed directly instead (exact: the stiff 1D singular kernels need it).

Range.  The terms u^(−m), m = s/2 + 1, of a Riesz kernel with large s leave the float range
(p = 64, s = 62, u ≈ 36: 10^-50, below float32's smallest normal number 1.2·10^-38), where
a CPU computes denormals very slowly and the sums silently become 0.  When the bounds
ε² ≤ u ≤ (2 max|ω|)² + ε² allow terms outside 2^(±100) (float32; 2^(±1000) in float64), the
sums are rescaled.  First by a fixed power of two u₀ = 2^a chosen from the upper bound alone
(every term (u₀/u)^m ≥ 2^(−100) is then proved, and u₀/u is exactly 2^a times 1/u): the
data's closest pair is not known before the products, so the sums are checked once at the end
— a term beyond the float range is +inf, which every product and sum carries to the result —
and, finite, are exactly 2^(a m) times the unscaled sums, bit for bit those wherever they stay
normal (the benchmark's p = 64 spheres of radius 1.5: terms up to ε^(−64) ≈ 2^212 allowed by
the bound, all normal float32 numbers in fact).  If a sum overflowed (a pair closer than about
u₀ · 2^(−127/m) in float32), they are formed again with a running reference u₀, the smallest
u > 0 of the tiles seen so far (lowered, with the sums so far, only when a tile's terms would
pass 2^(|floor|/2)):
u^(−m) = u₀^(−m) (u₀/u)^m, the second factor at most 2^50 (float32; 2^500 in float64) and
floored at 2^(−100) (2^(−1000)) — a pass that runs only where the bound allows smaller terms,
(u₀/(4 max|ω|² + ε²))^m < 2^(−100) (not on the p = 64 spheres of the benchmark, where u₀ is
a good fraction of the squared radius).  The floor changes each term by at most 2^(−100) of
the largest term (≥ 1 in these units: the pair that set the final u₀; the sums of earlier
tiles were multiplied by (u₀/u₀_before)^m < 2^(−50) at each lowering, which shrinks their
floored terms with them), so each row's force by at most N · 2^(−100) · max|ω_i − ω_j| of
the largest coefficient: a normwise bound, relative only for rows near the closest pairs.
The constant u₀^(−m) is applied in float64 at the end, with the scales, as a logarithm
(u₀^m itself may leave even the float64 range).  Coincident points (u = ε² = 0) take the
zero subgradient without any factor u₀^m.  Rounding the result to the dtype leaves entries
below its smallest normal number an absolute error below it (1.2·10^-38 in float32); if the
whole float32 result is that small (or overflows), :class:`~meanfield.errors.NumericalError`
is raised naming float64, instead of returning zeros.  In float64 only an overflow raises: a
result below float64's normal range (a vanishing λ, say) is zero to float64's own accuracy
and is returned rounded.
"""

from __future__ import annotations

import math

import torch

from .errors import NumericalError
from .kernels import Coulomb, Gaussian, PairKernel, Riesz

#: Rows (and columns) per tile with several CPU threads, chosen with ``benchmarks/
#: bench_pairs.py --sections tiles`` (README, Performance).  On this 2-core machine, quiet
#: (load average 1, 2 threads, N = 10^4, p = 16): 512 / 1024 / 2048 / 4096 rows ran 1387 /
#: 1371 / 818 / 541 Mpairs/s (``results/pairs_tiles_quiet.md``); under load (load average 11)
#: 39 / 77 / 93 / 97, because each tile costs ~7 parallel regions and an oversubscribed
#: OpenMP region waits for its slowest thread.  1024 is within 1 % of the best quiet and 17 %
#: below the best loaded; a float32 tile is 4 MiB.  At p = 64 under load (load average 14,
#: 2 threads) 1024 / 2048 / 4096 rows ran 0.85 / 1.70 / 1.93× a plain symmetric torch form
#: (docs/performance.rst, "p = 64, float32"); quiet they ran 185 / 129 / 117 Mpairs/s (3.5× the
#: plain form at 1024, ``results/pairs_p64_quiet.md``), so 1024 is the default at p = 64 too.
TILE_ROWS = 1024
#: Rows per tile with one CPU thread (no barriers to amortise, the tile stays in L2): at
#: N = 10^4 512 rows ran 287 Mpairs/s against 247 (1024) and 172 (2048) on this machine.
TILE_ROWS_ONE_THREAD = 512
#: Rows per tile on a GPU, where one tile product must fill the device (64 MiB in float32).
TILE_ROWS_GPU = 4096

_FLOOR_LOG2 = {torch.float32: -100.0, torch.float64: -1000.0, torch.float16: -10.0}


def _power_(w: torch.Tensor, k: int) -> torch.Tensor:
    """w ** k for an integer k ≥ 1 by repeated squaring, overwriting w (clones only when k is
    not a power of two)."""
    result = None
    while True:
        if k & 1:
            if k == 1 and result is None:
                return w
            result = w.clone() if result is None else result.mul_(w)
        k >>= 1
        if not k:
            return result
        w.square_()


def _ratio_(u: torch.Tensor, buf: torch.Tensor, u0: float, floor_log2) -> torch.Tensor:
    """u₀/u into ``buf`` (one division by a 0-dim tensor: one pass, not a reciprocal and a
    product), floored at 2^floor_log2 unless that is None."""
    w = torch.div(u.new_full((), u0), u, out=buf)
    return w if floor_log2 is None else w.clamp_min_(2.0**floor_log2)


class _Plan:
    """Generic kernel: c = 2κ'(r²), value Σ κ(r²) through the kernel's own methods.

    ``coeff`` turns a tile of u (softening already added for the specialised plans, here
    ``eps2 = 0`` so u = r²) into "bare" coefficients; the true ones are
    ``grad_factor · scale · c`` and the true value sum ``value_factor · scale · value``.
    """

    grad_factor = 1.0
    value_factor = 1.0
    eps2 = 0.0
    power: float | None = None  # m of c = u^(−m) where rescaling is possible

    def __init__(self, kernel: PairKernel):
        self.kernel = kernel

    def coeff(self, u, buf, want_value, diag, u0=None, floor_log2=None):
        u.clamp_min_(0.0)  # the matrix-product distances may round below 0
        value = None
        if want_value:
            value = self.kernel.value_sq(u).sum()
            if diag:
                value = value - self.kernel.value_sq(u.diagonal()).sum()
        c = self.kernel.grad_coeff_sq_(u)
        if diag:
            c.diagonal().zero_()
        return c, value


class _GaussianPlan(_Plan):
    """c = exp(−u/(2w²)) = κ, 2κ' = −c/w²."""

    def __init__(self, kernel: Gaussian):
        super().__init__(kernel)
        self.grad_factor = -1.0 / kernel.width**2

    def coeff(self, u, buf, want_value, diag, u0=None, floor_log2=None):
        c = torch.mul(u, -0.5 / self.kernel.width**2, out=buf).exp_()
        if diag:
            c.diagonal().zero_()
        return c, (c.sum() if want_value else None)


class _RieszPlan(_Plan):
    """κ = sgn(s) u^(−s/2), 2κ' = −|s| u^(−m), m = s/2 + 1, so Σκ = sgn(s) Σ u · u^(−m);
    log (s = 0): 2κ' = −1/u, κ = −½ log u."""

    def __init__(self, kernel: Riesz):
        super().__init__(kernel)
        s = kernel.s
        self.eps2 = kernel.softening**2
        self.m = s / 2 + 1
        self.log = s == 0.0
        self.power = self.m if (not self.log and self.m > 0) else None
        self.grad_factor = -1.0 if self.log else -abs(s)
        self.value_factor = -0.5 if self.log else math.copysign(1.0, s)
        self.twice_int = 2 * self.m == round(2 * self.m) and abs(self.m) <= 64

    def coeff(self, u, buf, want_value, diag, u0=None, floor_log2=None):
        if self.log:
            c = torch.reciprocal(u, out=buf)
            if diag:
                c.diagonal().zero_()
            return c, (u.log_().sum() if want_value else None)
        c = self._bare(u, buf, u0, floor_log2)
        if diag:
            c.diagonal().zero_()
        value = None
        if want_value:
            value = torch.dot(c.reshape(-1), u.reshape(-1)) if c.is_contiguous() else (c * u).sum()
        return c, value

    def _bare(self, u, buf, u0, floor_log2):
        """u^(−m), or (u₀/u)^m when rescaling, floored at 2^floor_log2 unless that is None."""
        m = self.m
        w_floor = floor_log2 / m if floor_log2 is not None else None
        if m <= 0 or not self.twice_int:
            if u0 is None:
                return torch.pow(u, -m, out=buf)
            return _ratio_(u, buf, u0, w_floor).pow_(m)
        if u0 is not None:
            w = _ratio_(u, buf, u0, w_floor)
            if m != int(m):
                w.sqrt_()
        elif m == int(m):
            w = torch.reciprocal(u, out=buf)
        else:
            w = torch.rsqrt(u, out=buf)
            if m == 1.5:  # s = 1: u^(−1/2) / u, one pass instead of three (and 1 ulp closer)
                return w.div_(u)
        return _power_(w, int(m) if m == int(m) else int(2 * m))


def make_plan(kernel: PairKernel) -> _Plan:
    """The specialised evaluation plan of ``kernel`` (exact type match: a subclass that
    changes κ gets the generic plan).

    Parameters
    ----------
    kernel : PairKernel

    Returns
    -------
    _Plan
        A Riesz plan (κ' as a power u^(−m), m = s/2 + 1), a Gaussian plan, or the generic
        plan calling the kernel's own κ and κ'.

    See Also
    --------
    pair_sums : the sums that evaluate the plan.
    meanfield.kernels.Riesz : the kernel of the Riesz plan.
    meanfield.kernels.Gaussian : the kernel of the Gaussian plan.

    Examples
    --------
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.pairsum import make_plan
    >>> class MyRiesz(Riesz):
    ...     pass
    >>> plan = make_plan(Riesz(1.0))
    >>> type(plan).__name__, plan.m, type(make_plan(MyRiesz(1.0))).__name__
    ('_RieszPlan', 1.5, '_Plan')
    """
    if type(kernel) in (Riesz, Coulomb):  # exact types: a subclass may redefine the kernel
        return _RieszPlan(kernel)
    if type(kernel) is Gaussian:
        return _GaussianPlan(kernel)
    return _Plan(kernel)


class _Tiles:
    """The operands of the tile products for one call (p ≥ 2: augmented matrices).

    Every operand of a product is a contiguous block of full-width rows: the rows of tile I
    of A = [ω, |ω|² + ε², 1] (row-major, so A[i0:i1] is contiguous), and, for each tile J,
    its own contiguous (p + 2) × tile block of Bᵀ = [−2ω, 1, |ω|²]ᵀ and (p + 1) × tile
    block of Wᵀ = [ω, 1]ᵀ, accumulated into a contiguous (p + 1) × tile block of the
    gradient sums.  A column slice Bᵀ[:, j0:j1] of one (p + 2) × N matrix has rows N apart
    (reported at half the GEMM speed with two threads; on one thread the blocks measured
    +2.7 % on the whole sum at N = 10⁴, p = 16); the blocks cost one O(N p) copy per call."""

    def __init__(self, omega: torch.Tensor, eps2: float, tile: int):
        N, p = omega.shape
        self.omega, self.p, self.tile = omega, p, tile
        self.bounds = [(s, min(N, s + tile)) for s in range(0, N, tile)]
        self.block = {s: k for k, (s, _) in enumerate(self.bounds)}
        self.sq = (omega * omega).sum(-1)
        one = omega.new_ones(N, 1)
        if p > 1:
            self.A = torch.cat([omega, (self.sq + eps2)[:, None], one], 1)
            B = torch.cat([-2.0 * omega, one, self.sq[:, None]], 1)
            W = torch.cat([omega, one], 1)
            # [ω, 1]ᵀ blocks: the gradient products run as (p + 1) × tile × tile, the layout
            # MKL does fastest for this thin shape (measured 1.3-2× over tile × tile × (p + 1))
            self.BT = [B[j0:j1].T.contiguous() for j0, j1 in self.bounds]
            self.WT = [W[j0:j1].T.contiguous() for j0, j1 in self.bounds]
        self.eps2 = eps2
        b = min(N, tile)
        self.ubuf = omega.new_empty(b * b)
        self.cbuf = omega.new_empty(b * b)
        self.dbuf = omega.new_empty(b * b) if p == 1 else None

    def pairs(self):
        """Unordered tile pairs (I ≤ J) as ((i0, i1), (j0, j1))."""
        for a, rows in enumerate(self.bounds):
            for cols in self.bounds[a:]:
                yield rows, cols

    def u(self, rows, cols):
        """(u tile (rows × cols), differences ω_i − ω_j in p = 1 else None); i = j gets u = 1."""
        (i0, i1), (j0, j1) = rows, cols
        shape = (i1 - i0, j1 - j0)
        u = self.ubuf[: shape[0] * shape[1]].view(shape)
        d = None
        if self.p == 1:
            x = self.omega[:, 0]
            d = self.dbuf[: shape[0] * shape[1]].view(shape)
            torch.sub(x[i0:i1, None], x[None, j0:j1], out=d)
            torch.mul(d, d, out=u)
            if self.eps2:
                u.add_(self.eps2)
        else:
            torch.mm(self.A[i0:i1], self.BT[self.block[j0]], out=u)
        if i0 == j0:
            u.diagonal().fill_(1.0)
        return u, d

    def exact_below(self, u, rows, cols, tol: float):
        """Recompute from explicit differences, in place, the entries of a tile (p ≥ 2) with
        u ≤ ``tol`` (the round-off bound of the matrix product): there a coincident pair
        rounds to a tiny u > 0 instead of ε², and a singular κ' turns it into an enormous
        coefficient whose force c_ij ω_i − c_ij ω_j is pure cancellation (8-25 % errors on
        the whole force with a few duplicated points).  Exact u = ε² then takes the zero
        subgradient of the kernel's own κ'."""
        i0, j0 = rows[0], cols[0]
        if self.p == 1 or not bool(u.min() <= tol):
            return
        near = u <= tol
        if i0 == j0:
            near.diagonal().fill_(False)  # i = j keeps its placeholder u = 1
        ii, jj = near.nonzero(as_tuple=True)
        z = self.omega[i0 + ii] - self.omega[j0 + jj]
        u[ii, jj] = (z * z).sum(-1) + self.eps2

    def refuse_underflow(self, u, rows, cols) -> None:
        """NumericalError where u = 0 comes from two distinct points (unsoftened kernel): their
        squared distance underflowed (closer than ~1.5e-154), and reading them as coincident
        gave the value +inf and a zero force, both wrong (−log 1e-200 = 460.5)."""
        if self.eps2:
            return
        ii, jj = (u <= 0).nonzero(as_tuple=True)
        z = self.omega[rows[0] + ii] - self.omega[cols[0] + jj]
        if bool((z != 0).any()):
            raise NumericalError(
                "two distinct particles are closer than ~1.5e-154: their squared distance "
                "underflows float64, so the singular pair kernel cannot be evaluated there; "
                "measure positions in other units, merge such points, or soften the kernel"
            )

    def cbuffer(self, shape):
        return self.cbuf[: shape[0] * shape[1]].view(shape)

    def new_acc(self):
        """Zeroed gradient sums: p ≥ 2, one contiguous (p + 1) × tile block per tile, all views
        of one flat buffer (so a rescaling multiplies them at once); p = 1, an (N, 1) column."""
        N, p = self.omega.shape
        if p == 1:
            return self.omega.new_zeros(N, 1)
        flat = self.omega.new_zeros((p + 1) * N)
        blocks = [flat[(p + 1) * j0 : (p + 1) * j1].view(p + 1, j1 - j0) for j0, j1 in self.bounds]
        return _Acc(flat, blocks)

    def accumulate(self, acc, c, d, rows, cols):
        """accᵀ_i += Σ_j c_ij [ω_j, 1] (p ≥ 2) or acc_i += Σ_j c_ij (ω_i − ω_j) (p = 1), on
        both sides of the tile pair."""
        (i0, i1), (j0, j1) = rows, cols
        if self.p == 1:
            c.mul_(d)
            acc[i0:i1, 0] += c.sum(1)
            if i0 != j0:
                acc[j0:j1, 0] -= c.sum(0)
            return
        I, J = self.block[i0], self.block[j0]
        acc.blocks[I].addmm_(self.WT[J], c.T)
        if i0 != j0:
            acc.blocks[J].addmm_(self.WT[I], c)

    def gradient(self, acc):
        """Σ_j c_ij (ω_i − ω_j) from the accumulated products."""
        if self.p == 1:
            return acc
        sums = torch.cat(acc.blocks, 1)  # (p + 1) × N
        return sums[self.p][:, None] * self.omega - sums[: self.p].T


class _Acc:
    """The gradient sums of p ≥ 2: per-tile blocks viewing one flat buffer."""

    def __init__(self, flat: torch.Tensor, blocks: list):
        self.flat, self.blocks = flat, blocks

    def mul_(self, factor: float):
        self.flat.mul_(factor)
        return self

    def all_finite(self) -> bool:
        return bool(torch.isfinite(self.flat).all())


def _needs_rescale(plan, sq_max: float, dtype) -> bool:
    """Whether terms u^(−m) can leave 2^(±|floor|) for u in [ε², (2 max|ω|)² + ε²]."""
    if plan.power is None:
        return False
    lim = -_FLOOR_LOG2.get(dtype, -100.0)
    umax = 4.0 * sq_max + plan.eps2
    if plan.power * math.log2(max(umax, 1e-300)) > lim:
        return True
    return plan.eps2 > 0 and -plan.power * math.log2(plan.eps2) > lim


def roundoff_bound(p: int, dtype, sq_max: float, eps2: float = 0.0) -> float:
    """A bound on the rounding error of u = |a|² + |b|² + ε² − 2a·b formed as one matrix
    product of length p + 2 (|a|², |b|² ≤ ``sq_max``): 4 (p + 2) · eps · (4 sq_max + ε²).

    A u at or below it cannot be told from a coincident pair (u = ε²): the product of two
    copies of one point rounds to ±a few eps · |ω|² instead of 0 (measured ±4.4e-16 in p = 3).

    Parameters
    ----------
    p : int
        Dimension of the particles.
    dtype : torch.dtype
        The dtype of the product (sets eps).
    sq_max : float
        The largest |ω|² of the call.
    eps2 : float
        The softening ε² added to u.

    Returns
    -------
    float

    See Also
    --------
    pair_sums : the sums whose products it bounds.
    meanfield.ot.precision.gamma : the γ_k bounds of the transport certificate.

    References
    ----------
    - N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM, 2002 (§3.1,
      rounding errors of inner products).

    Examples
    --------
    >>> import torch
    >>> from meanfield.pairsum import roundoff_bound
    >>> 1e-15 < roundoff_bound(3, torch.float64, 1.0) < 1e-13
    True
    """
    return 4 * (p + 2) * torch.finfo(dtype).eps * (4 * sq_max + eps2)


def _needs_check(plan, tiles: _Tiles, dtype) -> bool:
    """Whether a tile can hold u ≤ 0 or a coincident pair (a singular kernel, or round-off of
    the matrix product beyond the softening), which the specialised Riesz plan must not see."""
    if tiles.p == 1:  # exact differences: coincident pairs give u = ε² exactly
        return isinstance(plan, _RieszPlan) and plan.eps2 == 0.0
    if plan.kernel.is_singular:
        return True
    if not isinstance(plan, _RieszPlan):
        return False
    return plan.eps2 <= roundoff_bound(tiles.p, dtype, float(tiles.sq.max()), plan.eps2)


def _scaled(x: torch.Tensor, log_factor: float, sign: float, what: str, dtype=None):
    """x · sign · e^log_factor formed in float64 and rounded to ``dtype`` (default x's),
    raising if the largest entry is nonzero but outside the normal range of ``dtype`` (in
    float64 only above it: a float64 result below the normal range is rounded, as any)."""
    dtype = dtype or x.dtype
    info = torch.finfo(dtype)
    # applied as two halves, so e^log_factor itself may be outside the float64 range
    half = math.exp(max(min(log_factor, 1400.0), -1400.0) / 2)
    peak = float(x.abs().max()) if x.numel() else 0.0
    if not math.isfinite(peak):  # the max propagates NaN: some entry is not finite
        return (x.double() * (sign * half) * half).to(dtype)  # inf from coincident points
    if peak == 0.0:
        return x.to(dtype, copy=True)
    log_peak = math.log(peak) + log_factor
    if log_peak < math.log(info.tiny) and dtype == torch.float64:
        # below float64's normal range the result is 0 to float64's own absolute accuracy
        # (e.g. a vanishing λ); there is no wider dtype to name, so it is returned as rounded
        return (x.double() * (sign * half) * half).to(dtype)
    if log_peak < math.log(info.tiny) or log_peak > math.log(info.max):
        side = "below the smallest normal" if log_peak < 0 else "above the largest"
        fix = (
            "use dtype=float64 (Energy(..., dtype=torch.float64))"
            if dtype != torch.float64
            else "rescale the particles or the interaction strength"  # float64: overflow
        )
        raise NumericalError(
            f"the pair-interaction {what} (|largest entry| ≈ e^{log_peak:.0f}) lies {side} "
            f"{str(dtype).replace('torch.', '')} number: every entry would be rounded to 0 "
            f"or inf; {fix}"
        )
    return (x.double() * (sign * half) * half).to(dtype)


def out_of_range(kernel: PairKernel, omega: torch.Tensor) -> bool:
    """Whether the pair terms of ``kernel`` on ``omega`` (shape (..., N, p)) may leave the
    safe range of its dtype (see the module docstring); the row-chunk path of
    :class:`~meanfield.energy.PairInteraction` then computes in float64.

    Parameters
    ----------
    kernel : PairKernel
    omega : tensor (..., N, p)
        Particles; their dtype sets the range (float32: terms within 2^(±100)).

    Returns
    -------
    bool
        True when some term u^(−m) with ε² ≤ u ≤ (2 max|ω|)² + ε² may leave that range.

    See Also
    --------
    cast_checked : the cast back from float64.
    pair_sums : the tiled sums.
    meanfield.energy.PairInteraction : the term that switches to float64.

    Examples
    --------
    >>> import torch
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.pairsum import out_of_range
    >>> out_of_range(Riesz(62.0), torch.full((2, 64), 3.0))  # u^(−32), u up to (2 · 24)²
    True
    >>> out_of_range(Riesz(1.0), torch.ones(2, 3))
    False
    """
    if omega.numel() == 0:
        return False
    sq_max = float((omega.detach() * omega.detach()).sum(-1).max())
    return _needs_rescale(make_plan(kernel), sq_max, omega.dtype)


def cast_checked(x: torch.Tensor | None, dtype, what: str) -> torch.Tensor | None:
    """``x`` (float64) rounded to ``dtype``, raising :class:`NumericalError` when its largest
    entry is nonzero but outside the normal range of ``dtype`` (all would round to 0 or inf).

    Parameters
    ----------
    x : tensor or None
        A float64 result (None passes through).
    dtype : torch.dtype
        The dtype to round to.
    what : str
        Name of the quantity in the error message ("value", "force").

    Returns
    -------
    tensor or None
        ``x`` in ``dtype``.

    See Also
    --------
    out_of_range : when the sums are formed in float64.
    meanfield.errors.NumericalError : what it raises.

    Examples
    --------
    >>> import torch
    >>> from meanfield.errors import NumericalError
    >>> from meanfield.pairsum import cast_checked
    >>> cast_checked(torch.tensor([1.5], dtype=torch.float64), torch.float32, "value")
    tensor([1.5000])
    >>> try:
    ...     cast_checked(torch.tensor([1e-50], dtype=torch.float64), torch.float32, "value")
    ... except NumericalError:
    ...     print("below float32's smallest normal number")
    below float32's smallest normal number
    """
    if x is None or x.dtype == dtype:
        return x
    return _scaled(x, 0.0, 1.0, what, dtype)


def default_tile(device) -> int:
    """Rows per tile: :data:`TILE_ROWS_GPU` off the CPU, else :data:`TILE_ROWS` or, with one
    torch thread, :data:`TILE_ROWS_ONE_THREAD`.

    Parameters
    ----------
    device : str or torch.device

    Returns
    -------
    int
        Rows (and columns) per tile.

    See Also
    --------
    pair_sums : the sums cut into tiles.
    meanfield.dynamics.spec.estimate_work : the work of a run in pair evaluations.

    Examples
    --------
    >>> from meanfield.pairsum import default_tile
    >>> default_tile("cuda"), default_tile("cpu") in (512, 1024)
    (4096, True)
    """
    if torch.device(device).type != "cpu":
        return TILE_ROWS_GPU
    return TILE_ROWS if torch.get_num_threads() > 1 else TILE_ROWS_ONE_THREAD


def pair_sums(
    omega: torch.Tensor,
    kernel: PairKernel,
    *,
    want_value: bool = True,
    want_grad: bool = True,
    value_scale: float = 1.0,
    grad_scale: float = 1.0,
    tile: int | None = None,
):
    r"""Σ_{i≠j} k(ω_i − ω_j) and, for each i, Σ_{j≠i} 2κ'(|ω_i − ω_j|² + ε²)(ω_i − ω_j).

    .. math::

        S = \sum_{i \ne j} \kappa(u_{ij}), \qquad
        G_i = \sum_{j \ne i} 2\kappa'(u_{ij})\, (\omega_i - \omega_j), \qquad
        u_{ij} = |\omega_i - \omega_j|^2 + \varepsilon^2 .

    Parameters
    ----------
    omega : tensor (N, p)
        Particles (float32 or float64, any device).
    kernel : PairKernel
    want_value, want_grad : bool
        Which of the two sums to form.
    value_scale, grad_scale : float
        Constant factors applied to the results (in float64, before rounding to the dtype).
    tile : int, optional
        Rows per tile (default :func:`default_tile`).

    Returns
    -------
    value : tensor () or None
        ``value_scale`` · Σ_{i≠j} k(ω_i − ω_j).
    grad : tensor (N, p) or None
        ``grad_scale`` · Σ_{j≠i} c_ij (ω_i − ω_j), c_ij = 2κ'(u_ij) (half the gradient of the
        ordered pair sum with respect to ω_i).

    See Also
    --------
    meanfield.energy.PairInteraction : the energy term that calls it.
    meanfield.fastsums.FastCoulombInteraction : the fast sums of the Coulomb kernels.
    meanfield.pde.convolution.FFTConvolution : the same sum on a grid (k ∗ ρ).
    make_plan : the kernel's evaluation plan.

    Examples
    --------
    k(z) = −|z| (Riesz s = −1) on the points 0, 1, 3: S = −2 (1 + 3 + 2) = −12 and
    G_i = −Σ_j sign(ω_i − ω_j).

    >>> import torch
    >>> from meanfield.kernels import Gaussian, Riesz
    >>> from meanfield.pairsum import pair_sums
    >>> x = torch.tensor([[0.0], [1.0], [3.0]], dtype=torch.float64)
    >>> value, grad = pair_sums(x, Riesz(-1.0))
    >>> float(value), grad.ravel().tolist()
    (-12.0, [2.0, -0.0, -2.0])

    Several tiles in p = 2 give the dense sums:

    >>> g = torch.Generator().manual_seed(0)
    >>> w = torch.randn(7, 2, generator=g, dtype=torch.float64)
    >>> k = Gaussian(0.7)
    >>> value, grad = pair_sums(w, k, tile=3)
    >>> z = w[:, None] - w[None]
    >>> K = k(z).fill_diagonal_(0.0)
    >>> G = (k.grad_coeff_sq((z * z).sum(-1))[..., None] * z).sum(1)
    >>> bool(torch.allclose(value, K.sum())), bool(torch.allclose(grad, G))
    (True, True)
    """
    plan = make_plan(kernel)
    tiles = _Tiles(_centred(omega), plan.eps2, tile or default_tile(omega.device))
    sq_max = float(tiles.sq.max())
    if not math.isfinite(4.0 * sq_max):  # (x_i − x_j)² of the centred cloud can overflow
        raise NumericalError(
            f"pair sums: the particles reach |omega| = {float(omega.detach().abs().max()):.3g}, "
            "beyond ~1e153 from their centre, where squared distances overflow float64; "
            "measure positions in other units"
        )
    rescale = _needs_rescale(plan, sq_max, omega.dtype)
    a = _fixed_reference(plan, sq_max, omega.dtype) if rescale else None
    # the fixed reference u₀ = 2^a first (None back if a sum overflowed), else the plain sums
    # or the running reference of the rescaled ones
    out = _fixed_sums(plan, tiles, a, want_value, want_grad) if a is not None else None
    if out is None:
        total, acc, u0 = _sum_tiles(plan, tiles, rescale, want_value, want_grad)
        # the constant u₀^(−m) of rescaled terms, applied once with the scales, in float64
        log_v = log_g = -plan.power * math.log(u0) if u0 is not None else 0.0
        g = tiles.gradient(acc) if want_grad else None
    else:
        total, log_v, g, log_g = out
    value = grad = None
    if want_value:
        value = _apply_factor(total, value_scale * plan.value_factor, log_v, "value", omega)
    if want_grad:
        grad = _apply_factor(g, grad_scale * plan.grad_factor, log_g, "force", omega)
    return value, grad


def _fixed_sums(plan, tiles, a: int, want_value: bool, want_grad: bool):
    """The sums with the fixed reference u₀ = 2^a (:func:`_fixed_reference`) as (value,
    log of its remaining factor, gradient, log of its factor), or None if a sum overflowed
    (the value may be +∞ by coincident points).  The constant u₀^(−m) = 2^(−a m) is applied
    exactly where it can be (:func:`_exact_unit`), so the results are bit for bit those of the
    unscaled sums wherever those stay in the normal range."""
    out = _sum_tiles(plan, tiles, True, want_value, want_grad, fixed_u0=2.0**a)
    if out is None:
        return None
    total, acc, _ = out
    k = -a * plan.power
    log_v = log_g = 0.0
    g = None
    if want_grad:
        g = tiles.gradient(acc)
        if not bool(torch.isfinite(g).all()):  # Σ_j c_ij ω_i − Σ_j c_ij ω_j overflowed
            return None
        g, log_g = _exact_unit(g.double(), k)
    if want_value:
        total, log_v = _exact_unit(total.double(), k)
    return total, log_v, g, log_g


def _centred(omega: torch.Tensor) -> torch.Tensor:
    """ω − mean(ω) where that shrinks max|ω|² at least 4-fold (p ≥ 2), else ω itself.

    Why.  The pair sums are translation invariant, but the distance product's round-off is
    relative to the norms, not to the distances: u = |a|² + |b|² − 2a·b carries an error up to
    :func:`roundoff_bound` ≈ 4 (p + 2) eps · 4 max|ω|², so a cloud at offset c far beyond its
    spread (|c| ≫ max|ω − c|) loses the digits of u to cancellation, and its norm bound
    u ≤ 4 max|ω|² + ε² is as loose (it sets the range check and the fixed reference).
    Centring rounds each coordinate once (ω_i − c relative to |ω_i − c|, exact where ω_i
    and c agree to a factor 2), after which both bounds use max|ω − c|².  Where it would
    shrink them less than 4-fold the data is left as it is, bit for bit (the tests' sums
    near the origin, the benchmark's spheres).  In p = 1 the differences are exact already."""
    N, p = omega.shape
    if p < 2 or N < 2:
        return omega
    centred = omega - omega.mean(0)
    sq = float((omega * omega).sum(-1).max())
    sq_centred = float((centred * centred).sum(-1).max())
    return centred if 4.0 * sq_centred < sq else omega


def _exact_unit(x: torch.Tensor, k: float):
    """(x · 2^k, 0) exactly (float64 x, integer k) when its largest entry stays in float64's
    normal range with 2^60 to spare, so no entry that matters is rounded; else (x, k ln 2),
    the factor left to :func:`_apply_factor`, which applies it with the scales (the unit of a
    float64 sum far outside the normal range, brought back by a large ``grad_scale``)."""
    k = int(k)
    peak = float(x.abs().max()) if x.numel() else 0.0
    if peak == 0.0 or not math.isfinite(peak):
        return x, 0.0
    if not -1022 + 60 <= math.log2(peak) + k <= 1022:
        return x, k * math.log(2.0)
    half = k // 2  # two steps: 2^k itself may leave float64's range
    return x * 2.0**half * 2.0 ** (k - half), 0.0


def _fixed_reference(plan, sq_max: float, dtype) -> int | None:
    """The exponent a of a fixed rescaling reference u₀ = 2^a that proves, from the bound
    u ≤ u_top = 4 max|ω|² + ε² alone, every bare term (u₀/u)^m ≥ 2^floor (so no floor pass and
    no per-tile minimum); None where the plan has no power m.

    Why a fixed reference suffices where the data allows it.  The terms u^(−m) must stay in
    the dtype's normal range, [2^floor, 2^(−floor)] with |floor| = 100 (float32) or 1000
    (float64) leaving room for the sums.  The small end, u = u_top, is bounded by the norms
    (|ω_i − ω_j| ≤ 2 max|ω|): a = ⌈log2 u_top + floor/m⌉ gives (u₀/u_top)^m ≥ 2^floor.  The
    large end needs the smallest u of the data, which only the products show; instead of a
    minimum per tile (the running reference of :func:`_lower_reference`) the sums are formed
    with this u₀ and checked once at the end: a term or partial sum beyond the float range is
    +inf (a GEMM or dot product carries inf, or NaN from inf − inf, to its result), so if
    every accumulated sum is finite no term overflowed and the sums are exact in these units.
    Otherwise the caller reruns with the running reference (data with pairs closer than
    u₀ · 2^(floor/m)-ish pay one extra pass).  With u₀ a power of two, u₀/u is 2^a times the
    rounded 1/u (correctly rounded division), and the squarings, products and sums scale
    exactly (a even for half-integer m, whose square root must also scale exactly), so the
    results equal the unscaled sums bit for bit wherever those stay normal."""
    m = plan.power
    if m is None:
        return None
    floor = _FLOOR_LOG2.get(dtype, -100.0)
    top = max(4.0 * sq_max + plan.eps2, 1e-300)
    a = math.ceil(math.log2(top) + floor / m)
    if m != int(m) and a % 2:
        a += 1  # the square root of (2^a/u) must scale exactly: 2^(a/2)
    return a


def _lower_reference(u, diag: bool, u0, plan: _Plan, floor_log2: float, total, acc, zeros):
    """The rescaling reference after one more tile: the tile's smallest u > 0 (i ≠ j) when the
    terms (u₀/u)^m would pass 2^(|floor|/2) with the current u₀ (or there is none yet), with
    the sums so far rescaled to it in place; else the current u₀.  ``zeros``: the tile holds
    coincident pairs (u = 0), which the minimum skips (they take the zero subgradient).

    A running reference replaces a first pass over every tile for the smallest u of the call:
    the products are formed once.  Lowering it only past 2^(|floor|/2) keeps every term below
    that bound (far inside the dtype's range), and each lowering divides the terms by at
    least that much; the floor 2^floor of the terms is then relative to a largest term ≥ 1
    (the pair that set the final u₀), as with the exact minimum.  The partial sums are
    multiplied by (u_new/u_old)^m < 2^(floor/2) (one rounding each; the terms that factor
    pushes below the dtype's range were below the floor of the new units anyway)."""
    if diag:
        u.diagonal().fill_(math.inf)
    if zeros:
        u_min = float(torch.where(u > 0, u, math.inf).min())
    else:
        u_min = float(u.min())
    if diag:
        u.diagonal().fill_(1.0)  # the placeholder of i = j (the coefficient there is zeroed)
    if not 0.0 < u_min < math.inf:
        return u0
    if u0 is None:
        return u_min
    if plan.power * math.log2(u0 / u_min) <= -floor_log2 / 2:
        return u0
    factor = math.exp(plan.power * (math.log(u_min) - math.log(u0)))  # (u_new/u_old)^m < 1
    total.mul_(factor)
    if acc is not None:
        acc.mul_(factor)
    return u_min


def _sum_tiles(
    plan: _Plan, tiles: _Tiles, rescale: bool, want_value: bool, want_grad: bool, fixed_u0=None
):
    """Visit each unordered tile pair once: the float64 sum of the bare values (an off-diagonal
    tile stands for both orders, so it counts twice), the accumulated gradient products
    (``_Tiles.accumulate``; None unless ``want_grad``) and the rescaling reference u₀ of both
    (None unless ``rescale``).  With ``fixed_u0`` (:func:`_fixed_reference`) the reference is
    that constant and None is returned if a sum overflowed; else a running reference
    (:func:`_lower_reference`).  Where u ≤ 0 or a coincident pair can occur
    (``_needs_check``), entries within round-off of ε² are recomputed exactly
    (``_Tiles.exact_below``) and a tile that then holds u = 0 gives those pairs the zero
    subgradient (:func:`_coincident_tile`), in the bare units of ``plan``."""
    dtype = tiles.omega.dtype
    floor = _FLOOR_LOG2.get(dtype, -100.0)
    check = _needs_check(plan, tiles, dtype)
    sq_max = float(tiles.sq.max())
    tol = roundoff_bound(tiles.p, dtype, sq_max, plan.eps2) if check else 0.0
    # the largest u the bound allows: terms (u₀/u)^m ≥ (u₀/u_top)^m need no floor above it
    log2_top = math.log2(max(4.0 * sq_max + plan.eps2, 1e-300))
    generic = _Plan(plan.kernel)
    acc = tiles.new_acc() if want_grad else None
    total = torch.zeros((), dtype=torch.float64, device=tiles.omega.device)
    u0 = fixed_u0
    running = rescale and fixed_u0 is None  # the partial sums are rescaled as u₀ drops
    # without a running reference the tiles' values are summed once at the end (two ops
    # per tile fewer: ~4 % of a p = 16 sum on one thread); the diagonal tiles count once
    values = ([], [])
    infinite_value = False  # κ(0) = +∞ added for coincident points: an exact +∞ value
    for rows, cols in tiles.pairs():
        u, d = tiles.u(rows, cols)
        diag = rows[0] == cols[0]
        cbuf = tiles.cbuffer(u.shape)
        if check:
            tiles.exact_below(u, rows, cols, tol)
        zeros = check and not bool(u.min() > 0)  # coincident points (u = ε² = 0)
        if zeros:
            tiles.refuse_underflow(u, rows, cols)
        tile_floor = None
        if running:
            u0 = _lower_reference(u, diag, u0, plan, floor, total, acc, zeros)
            if u0 is not None and plan.power * (log2_top - math.log2(u0)) > -floor:
                tile_floor = floor  # else the bound proves every term ≥ 2^floor: no pass
        if zeros:
            c, v = _coincident_tile(generic, plan, u, cbuf, diag, want_value, u0, tile_floor)
            infinite_value = infinite_value or (v is not None and bool(torch.isinf(v)))
        else:
            c, v = plan.coeff(u, cbuf, want_value, diag, u0, tile_floor)
        if want_value and running:
            total += v.double() * (1.0 if diag else 2.0)
        elif want_value:
            values[0 if diag else 1].append(v)
        if want_grad:
            tiles.accumulate(acc, c, d, rows, cols)
    for weight, vs in zip((1.0, 2.0), values, strict=True):
        if vs:
            total += torch.stack(vs).double().sum() * weight
    if fixed_u0 is not None and not _all_finite(total, acc, infinite_value):
        return None
    return total, acc, u0


def _all_finite(total, acc, infinite_value: bool) -> bool:
    """No overflow in the sums of the fixed reference: every accumulated gradient sum finite,
    and the value finite unless it is +∞ by coincident points (every term then has the sign
    of κ(0), so the sum is +∞ whatever overflowed)."""
    if not infinite_value and not bool(torch.isfinite(total)):
        return False
    if acc is None:
        return True
    return acc.all_finite() if isinstance(acc, _Acc) else bool(torch.isfinite(acc).all())


def _coincident_tile(generic: _Plan, plan: _Plan, u, cbuf, diag, want_value, u0, floor_log2):
    """A tile holding coincident points (u = ε² = 0, where a coincident pair takes the zero
    subgradient: its force c_ij (ω_i − ω_j) is 0 whatever c_ij) in the bare units of ``plan``.

    Without rescaling (``u0`` None; every term then lies in the dtype's range) through the
    kernel's own κ and κ', in float64, ÷ the plan's constant factors.  With rescaling the
    coincident entries are given the placeholder u = u₀ (a bare term 1) and the other entries
    the plan's own rescaled terms (u₀/u)^m; the placeholders' coefficients are then zeroed,
    and their value κ(0) (+∞ for s > 0, 0 for s < 0) is added: no factor u₀^m is formed
    (it may leave even the float64 range)."""
    if u0 is None:
        c, v = generic.coeff(u.double().sub_(plan.eps2), None, want_value, diag)
        c = (c / plan.grad_factor).to(u.dtype)
        return c, (v / plan.value_factor if v is not None else None)
    zero = u <= 0
    u.masked_fill_(zero, u0)
    c, _ = plan.coeff(u, cbuf, False, diag, u0, floor_log2)
    c.masked_fill_(zero, 0.0)
    if not want_value:
        return c, None
    v = torch.dot(c.reshape(-1), u.reshape(-1)).double()
    n0 = int(zero.sum())
    k0 = float(plan.kernel.value_sq(torch.zeros((), dtype=torch.float64))) if n0 else 0.0
    if k0 != 0.0:  # κ(0) = ±∞ here: the value is infinite whatever the units
        v = v + n0 * k0 / plan.value_factor
    return c, v


def _apply_factor(x: torch.Tensor, factor: float, log_unit: float, what: str, like):
    """``factor`` · e^log_unit · ``x`` rounded to the dtype of ``like`` (``_scaled``, which
    raises when the result leaves its normal range); zeros of that dtype when ``factor`` is 0."""
    if not factor:
        return torch.zeros(x.shape, dtype=like.dtype, device=x.device)
    sign = math.copysign(1, factor)
    return _scaled(x, log_unit + math.log(abs(factor)), sign, what, like.dtype)
