"""The pair interaction λ ∬ k(ω − ω') μ(dω) μ(dω') and its chunked pair sums (THEORY §2).

Large sets of particles without an autograd graph go through the tiled symmetric sums of
:mod:`meanfield.pairsum`; replicas of few particles, differentiable values and compiled
trajectories take the row chunks here, of at most :data:`PAIR_CHUNK_ELEMENTS` entries.
"""

from __future__ import annotations

import torch

from .._validation import check_finite_real
from ..domains import Torus
from ..errors import InputError, InputTypeError
from ..kernels import PairKernel
from ..pairsum import cast_checked, out_of_range, pair_sums, roundoff_bound
from .protocol import Term

#: Elements per chunk of the pair sums (rows × columns [× dim]); bounds the memory.
#: 2^18 float32 entries is 1 MiB: each block's elementwise passes stay in the CPU cache.
#: The alignment's particle chunks read it too (one knob for both).
PAIR_CHUNK_ELEMENTS = 1 << 18


class PairInteraction(Term):
    r"""λ ∬ k(ω − ω') μ(dω) μ(dω'); finite N: (λ/N²) Σ_{i≠j} k(ω_i − ω_j).

    Particles without an autograd graph go through the tiled symmetric sums of
    :func:`meanfield.pairsum.pair_sums` (each pair once, two matrix products per tile, float32
    rescaled where its range is too short), replica by replica.  Replicas of fewer than
    :attr:`tiled_replica_min_n` particles and differentiable values run over row chunks of at
    most :data:`PAIR_CHUNK_ELEMENTS` entries (in float64 when float32 would leave its range).
    In p = 1 the differences ω_i − ω_j are formed directly (exact, which the stiff 1D
    singular kernels need); in p ≥ 2 the squared distances come from |a|² + |b|² − 2aᵀb, a
    matrix product, so no (chunk × N × p) tensor is built (relative error ~ machine epsilon ×
    |ω|²/|z|²).

    Parameters
    ----------
    kernel : PairKernel
    lam : float
        Interaction strength λ, finite.  λ > 0 with a repulsive kernel (Riesz, log) is the
        Coulomb/Riesz gas; λ < 0 turns the kernel's sign: with k = −log|z| in p = 2 it is
        the attractive logarithmic interaction of Keller–Segel (2λk = (χM/2π) log|z|).
        λ < 0 needs a kernel that is not singular at coincident points (a softening ε > 0
        for Riesz): see Raises.

    Raises
    ------
    meanfield.errors.InputError
        ``lam`` not finite; ``lam`` < 0 with a kernel singular at coincident points
        (:attr:`~meanfield.kernels.PairKernel.is_singular`, e.g. an unsoftened Riesz or log
        kernel).  An attractive singular force is not integrated by the particle solvers:
        Euler and the capped pair step of :class:`~meanfield.dynamics.langevin.ProjectedLangevin`
        (which assumes λ > 0) let a close pair fall into the singularity, and HMC's leapfrog
        diverges there; for the log kernel in p = 2 the Gibbs law ∝ e^{−βN H_N} of a
        collapsing cluster of k particles is integrable only if k β |λ| / N < 2.

    See Also
    --------
    meanfield.energy.Energy : the sum of the terms the views read.
    meanfield.pairsum.pair_sums : the tiled symmetric sums behind the large cases.
    meanfield.fastsums.FastCoulombInteraction : the same term by fast Coulomb sums.
    meanfield.pde.convolution : the grid view's 2λ k ∗ ρ by FFT.

    Notes
    -----
    For λ < 0, :meth:`pair_kernel` gives the grid (|λ|, −k) instead of (λ, k): the same
    product λk, so the grid's potential and energy are unchanged, while the solvers that
    read λ as a nonnegative strength (the explicit step bound from the pair stiffness, the
    Lipschitz bound of the β = ∞ solver) keep a valid bound, and the convexity test sees a
    kernel it does not know to be positive definite (an attractive term is not convex).

    .. math::

        E(\mu) = \lambda \iint k(\omega - \omega')\, d\mu(\omega)\, d\mu(\omega'), \qquad
        H_N(\Omega) = \frac{\lambda}{N^2} \sum_{i \ne j} k(\omega_i - \omega_j),

    and δE/δμ = 2λ k ∗ μ.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
      Mathematics, EMS, 2015 (the energy of Coulomb and Riesz gases, its N → ∞ limit).
    - J. A. Carrillo, R. J. McCann, C. Villani, "Kinetic equilibration rates for granular media
      and related equations", Rev. Mat. Iberoamericana 19 (2003) 971–1018 (the McKean–Vlasov
      equation as the gradient flow of E + β⁻¹ ∫ ρ log ρ).
    - S. Jin, L. Li, J.-G. Liu, "Random batch methods (RBM) for interacting particle systems",
      J. Comput. Phys. 400 (2020) 108877 (:meth:`grad_random_batch`).

    Examples
    --------
    Two particles at distance 2 with the log kernel: H_N = (λ/4) · 2 · (−log 2).

    >>> import math
    >>> import torch
    >>> from meanfield.energy import PairInteraction
    >>> from meanfield.kernels import Riesz
    >>> term = PairInteraction(Riesz(0.0), lam=0.5)
    >>> omega = torch.tensor([[-1.0], [1.0]], dtype=torch.float64)
    >>> math.isclose(float(term.value(omega)), -0.25 * math.log(2))
    True
    >>> term.grad(omega).ravel().tolist()  # repulsion: the force −∇H pushes them apart
    [0.125, -0.125]
    """

    name = "interaction"
    kind = "pair"

    def __init__(self, kernel: PairKernel, lam: float = 1.0):
        if not isinstance(kernel, PairKernel):
            raise InputTypeError(
                f"kernel must be a meanfield.kernels.PairKernel (e.g. Riesz(s), Cosine()), got "
                f"{kernel!r}"
            )
        self.kernel = kernel
        self.lam = check_finite_real("lam (lambda)", lam)
        if self.lam < 0 and kernel.is_singular:
            raise InputError(
                f"lam (lambda) < 0 (attraction, got {lam!r}) needs a kernel that is not "
                f"singular at coincident points, got {kernel!r}: give it a softening "
                "epsilon > 0 (the particle solvers do not integrate an attractive singular "
                "force), or use lam >= 0"
            )

    def _chunks(self, N, p):
        per_row = N
        step = max(1, min(N, PAIR_CHUNK_ELEMENTS // max(per_row, 1)))
        return [(s, min(N, s + step)) for s in range(0, N, step)]

    def _block_r2(self, block, omega, sq_block, sq_all):
        """Squared distances (..., C, N) and, in low p, the differences (..., C, N, p)."""
        if omega.shape[-1] == 1:
            diff = block.unsqueeze(-2) - omega.unsqueeze(-3)
            return (diff * diff).sum(-1), diff
        base = sq_block.unsqueeze(-1) + sq_all.unsqueeze(-2)
        if omega.ndim == 2:  # the gemm adds |a|² + |b|² in its epilogue
            r2 = torch.addmm(base, block, omega.T, alpha=-2.0)
        else:
            r2 = base - 2 * block @ omega.transpose(-1, -2)
        return r2.clamp_min(0.0), None

    def _exact_near(self, r2, block, omega, tol: float):
        """Recompute from explicit differences the entries of r2 (..., C, N) at or below the
        round-off bound ``tol`` of the matrix product: a coincident pair rounds there to a
        tiny r2 > 0 instead of 0, which a singular κ' turns into an enormous, cancelling
        force (see :meth:`meanfield.pairsum._Tiles.exact_below`)."""
        near = r2 <= tol
        if not bool(near.any()):
            return r2
        idx = near.nonzero(as_tuple=True)  # (..., row in block, column)
        z = block[idx[:-1]] - omega[idx[:-2] + idx[-1:]]
        r2 = r2.index_put(idx, (z * z).sum(-1))  # out of place: r2 may be in a graph
        return r2

    def _near_tol(self, omega, sq) -> float:
        """The round-off bound below which r2 entries are recomputed exactly (p ≥ 2 with a
        singular or barely softened kernel), else −1 (none)."""
        p = omega.shape[-1]
        if p == 1 or omega.numel() == 0:
            return -1.0
        soft2 = self.kernel.softening**2
        tol = roundoff_bound(p, omega.dtype, float(sq.detach().max()), soft2)
        return tol if (self.kernel.is_singular or 0.0 < soft2 <= tol) else -1.0

    def _displacement(self, diff):
        """Pair differences as the kernel reads them: unchanged in free space (a torus term
        maps them to their minimum image)."""
        return diff

    def _explicit_pass(self, omega, want_value: bool, want_grad: bool):
        """Row-chunk sums from explicit differences, the i = j entries masked
        (:meth:`_masked_block`): every pass under a trace (exact, and fused with the sums) and
        every pass on a torus."""
        N, p = omega.shape[-2], omega.shape[-1]
        total = omega.new_zeros(omega.shape[:-2]) if want_value else None
        grad = torch.empty_like(omega) if want_grad else None
        for s, e in self._chunks(N, p):
            block = omega[..., s:e, :]
            diff = self._displacement(block.unsqueeze(-2) - omega.unsqueeze(-3))
            r2 = (diff * diff).sum(-1)
            v, g = self._masked_block(r2, diff, block, omega, s, want_value, want_grad)
            if want_value:
                total = total + v
            if want_grad:
                grad[..., s:e, :] = g
        return total, grad

    def _pair_pass(self, omega, want_value: bool, want_grad: bool):
        if torch.compiler.is_compiling():  # explicit differences in any p
            return self._explicit_pass(omega, want_value, want_grad)
        N, p = omega.shape[-2], omega.shape[-1]
        sq = (omega * omega).sum(-1)
        tol = self._near_tol(omega, sq)
        total = omega.new_zeros(omega.shape[:-2]) if want_value else None
        grad = torch.empty_like(omega) if want_grad else None
        for s, e in self._chunks(N, p):
            block = omega[..., s:e, :]
            r2, diff = self._block_r2(block, omega, sq[..., s:e], sq)
            if tol >= 0:
                r2 = self._exact_near(r2, block, omega, tol)
            # the i = j entries of this row block lie on its diagonal at column offset s: give
            # them a harmless distance 1, then leave them out of the sums below
            r2.diagonal(offset=s, dim1=-2, dim2=-1).fill_(1.0)
            if want_value:
                k = self.kernel.value_sq(r2)
                total = total + k.sum((-1, -2)) - k.diagonal(offset=s, dim1=-2, dim2=-1).sum(-1)
            if want_grad:
                # the value pass above still holds r2 in its autograd graph: work on a copy
                c = self.kernel.grad_coeff_sq_(r2.clone() if want_value else r2)
                c.diagonal(offset=s, dim1=-2, dim2=-1).zero_()
                if diff is not None:
                    grad[..., s:e, :] = (c.unsqueeze(-1) * diff).sum(-2)
                else:
                    grad[..., s:e, :] = c.sum(-1, keepdim=True) * block - c @ omega
        return total, grad

    def _masked_block(self, r2, diff, block, omega, s: int, want_value: bool, want_grad: bool):
        """A row block's sums as :meth:`_pair_pass` makes them, its i = j entries (on the
        diagonal at column offset s) masked instead of written in place: traced by
        :func:`torch.compile` (HMC's fused trajectory, with the explicit differences ``diff``
        in any p, so no near-pair check reads a value), the block then fuses into one pass
        over the pairs.  Equal to the eager sums to round-off (the diagonal is left out of
        the sums instead of subtracted; in p ≥ 2 the distances are exact where the eager
        matrix product rounds)."""
        rows = torch.arange(s, s + r2.shape[-2], device=r2.device)
        eye = rows[:, None] == torch.arange(r2.shape[-1], device=r2.device)
        r2 = torch.where(eye, torch.ones_like(r2), r2)
        value = grad = None
        if want_value:
            value = torch.where(eye, 0.0, self.kernel.value_sq(r2)).sum((-1, -2))
        if want_grad:
            c = torch.where(eye, 0.0, self.kernel.grad_coeff_sq_(r2.clone()))
            if diff is not None:
                grad = (c.unsqueeze(-1) * diff).sum(-2)
            else:
                grad = c.sum(-1, keepdim=True) * block - c @ omega
        return value, grad

    #: Replicas (..., N, p) with at least this many particles take the tiled sums one replica
    #: at a time; below it one batched row-chunk pass over all replicas costs fewer calls.
    tiled_replica_min_n = 256

    def _uses_tiles(self, omega) -> bool:
        """No autograd graph, and one set of particles or large replicas: the tiled symmetric
        sums of :mod:`meanfield.pairsum` (the rest takes the row chunks)."""
        if torch.is_grad_enabled() and omega.requires_grad or torch.compiler.is_compiling():
            return False  # (a trace takes the row chunks: the tiles' range check reads a value)
        return omega.ndim == 2 or omega.shape[-2] >= self.tiled_replica_min_n

    def _replica_pass(self, omega, want_value: bool, want_grad: bool):
        """The tiled sums of each replica of omega (..., N, p), stacked."""
        outs = [self._scaled_pass(x, want_value, want_grad) for x in omega.flatten(0, -3)]
        v = torch.stack([o[0] for o in outs]).reshape(omega.shape[:-2]) if want_value else None
        g = torch.stack([o[1] for o in outs]).reshape(omega.shape) if want_grad else None
        return v, g

    def _scaled_pass(self, omega, want_value: bool, want_grad: bool):
        N = omega.shape[-2]
        if self._uses_tiles(omega):
            if omega.ndim > 2:
                return self._replica_pass(omega, want_value, want_grad)
            return pair_sums(
                omega,
                self.kernel,
                want_value=want_value,
                want_grad=want_grad,
                value_scale=self.lam / N**2,
                grad_scale=2 * self.lam / N**2,
            )
        if omega.dtype != torch.float64 and out_of_range(self.kernel, omega):
            v, g = self._scaled_pass(omega.double(), want_value, want_grad)
            return cast_checked(v, omega.dtype, "value"), cast_checked(g, omega.dtype, "force")
        total, g = self._pair_pass(omega, want_value, want_grad)
        return (
            self.lam * total / N**2 if want_value else None,
            (2 * self.lam / N**2) * g if want_grad else None,
        )

    def bind(self, dim, dtype, device):
        self.kernel.check_dimension(dim)

    # A pair term holds no data, so it is used without binding too: each entry point checks
    # the particles' dimension itself (a kernel not integrable in R^p is refused there as by
    # bind, not evaluated into a finite H_N of a measure whose energy is infinite).
    def value_and_grad(self, omega):
        self.kernel.check_dimension(omega.shape[-1])
        return self._scaled_pass(omega, True, True)

    def value(self, omega):
        self.kernel.check_dimension(omega.shape[-1])
        return self._scaled_pass(omega, True, False)[0]

    def grad(self, omega):
        self.kernel.check_dimension(omega.shape[-1])
        return self._scaled_pass(omega, False, True)[1]

    def grad_random_batch(self, omega, batch_size: int, generator: torch.Generator):
        r"""Random-batch estimate of ∇H (Jin–Li–Liu 2020), unbiased, cost O(N B p).

        Particles are split by a random permutation into batches of ``batch_size`` (a remainder
        of one joins the last batch); particle i feels only its batch, rescaled by
        (N − 1)/(|b| − 1) so the expectation over permutations is the exact gradient.

        .. math::

            \widehat{\nabla_{\omega_i} H} = \frac{2\lambda}{N^2} \frac{N - 1}{|b| - 1}
            \sum_{j \in b(i),\, j \ne i} \nabla k(\omega_i - \omega_j).

        Parameters
        ----------
        omega : tensor (..., N, p)
        batch_size : int
            B ≥ 2; B ≥ N gives the exact :meth:`grad`.
        generator : torch.Generator
            Source of the permutation.

        Returns
        -------
        tensor (..., N, p)

        See Also
        --------
        grad : the exact O(N²) gradient.
        meanfield.dynamics.langevin.simulate : ``interaction_batch`` selects this.

        Examples
        --------
        The mean of many estimates approaches the exact gradient:

        >>> import torch
        >>> from meanfield.energy import PairInteraction
        >>> from meanfield.kernels import Riesz
        >>> term = PairInteraction(Riesz(0.0), lam=0.5)
        >>> omega = torch.tensor([[-1.5], [-0.5], [0.5], [2.0]], dtype=torch.float64)
        >>> gen = torch.Generator().manual_seed(0)
        >>> mean = torch.stack([term.grad_random_batch(omega, 2, gen) for _ in range(300)]).mean(0)
        >>> bool(torch.allclose(mean, term.grad(omega), atol=0.01))
        True
        """
        self.kernel.check_dimension(omega.shape[-1])
        N = omega.shape[-2]
        if batch_size >= N:
            return self.grad(omega)
        if omega.dtype != torch.float64 and out_of_range(self.kernel, omega):
            g = self.grad_random_batch(omega.double(), batch_size, generator)
            return cast_checked(g, omega.dtype, "force")
        perm = torch.randperm(N, generator=generator).to(omega.device)
        nb = N // batch_size
        sizes = [batch_size] * nb
        rem = N - nb * batch_size
        if rem == 1:
            sizes[-1] += 1
        elif rem > 1:
            sizes.append(rem)
        out = torch.empty_like(omega)
        start = 0
        for size, count in _runs(sizes):
            idx = perm[start : start + size * count]
            blocks = omega[..., idx, :].reshape(*omega.shape[:-2], count, size, omega.shape[-1])
            _, g = self._pair_pass(blocks, False, True)  # all pairs within each batch
            out[..., idx, :] = (g * ((N - 1) / (size - 1))).reshape(
                *omega.shape[:-2], size * count, omega.shape[-1]
            )
            start += size * count
        return (2 * self.lam / N**2) * out

    def first_variation(self, at, points, weights):
        """2λ (k ∗ μ)(ω) = 2λ Σ_k w_k k(ω − ω_k), chunked over the evaluation points.

        Parameters
        ----------
        at : tensor (M, p)
        points : tensor (K, p)
        weights : tensor (K,)

        Returns
        -------
        tensor (M,)

        See Also
        --------
        pair_kernel : (k, λ), what the grid view reads instead.
        meanfield.pde.convolution.FFTConvolution : the grid view's 2λ (W ∗ ρ) by FFT.

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import PairInteraction
        >>> from meanfield.kernels import Riesz
        >>> points = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
        >>> at = torch.linspace(0.5, 1.5, 1001, dtype=torch.float64)[:, None]
        >>> field = PairInteraction(Riesz(0.0)).first_variation(at, points, torch.ones(2).double())
        >>> tuple(field.shape), round(float(field[500]), 12)  # zero midway: k(±1) = −log 1
        ((1001,), 0.0)
        """
        self.kernel.check_dimension(at.shape[-1])
        # an atom of zero mass adds nothing, also where k is infinite (on a target): 0 · inf
        # would be NaN
        charged = weights != 0
        if not bool(charged.all()):
            points, weights = points[charged], weights[charged]
        out = at.new_empty(at.shape[0])
        step = max(1, PAIR_CHUNK_ELEMENTS // max(points.shape[0] * at.shape[1], 1))
        for s in range(0, at.shape[0], step):
            z = self._displacement(at[s : s + step, None, :] - points[None, :, :])
            out[s : s + step] = (self.kernel(z) * weights).sum(-1)
        return 2 * self.lam * out

    def pair_kernel(self):
        if self.lam < 0:  # attraction: the grid reads λk as |λ| · (−k) (see Notes)
            return _NegatedKernel(self.kernel), -self.lam
        return self.kernel, self.lam

    def describe(self):
        return {**self.kernel.describe(), "lam": self.lam}


class PeriodicPairInteraction(PairInteraction):
    r"""λ ∬ k(ω − ω') μ(dω) μ(dω') on a torus, pair differences by the minimum image.

    The same term as :class:`PairInteraction` with each difference ω_i − ω_j replaced by its
    minimum image m(ω_i − ω_j) ∈ [−L, L)^p (:meth:`meanfield.domains.Torus.minimum_image`):

    .. math::

        H_N(\Omega) = \frac{\lambda}{N^2} \sum_{i \ne j} k\big(m(\omega_i - \omega_j)\big),
        \qquad
        \frac{\delta E}{\delta\mu}(\omega) = 2\lambda \int k\big(m(\omega - \omega')\big)
        \, d\mu(\omega').

    The kernel is thus the periodised kernel Σ_n k(z + 2Ln) only to the minimum-image
    approximation: exact for a kernel whose range is below L (k = 0 where some
    |z_a| ≥ L), and for a kernel already 2L-periodic in each coordinate
    (:class:`~meanfield.kernels.Cosine` on the circle); otherwise k∘m has a kink where a
    coordinate of the difference crosses ±L, and the force there is its one-sided gradient.
    All pair sums take the row chunks with explicit differences (no tiled sums: they read
    distances from |a|² + |b|² − 2aᵀb, which has no minimum image).

    Parameters
    ----------
    kernel : PairKernel
    lam : float
        Interaction strength λ (λ < 0, attraction, only with a kernel not singular at 0).
    domain : Torus
        The torus of the particles (the energy's domain; the same dimension is checked at
        binding).

    Raises
    ------
    meanfield.errors.InputTypeError
        ``domain`` is not a :class:`~meanfield.domains.Torus`.
    meanfield.errors.InputError
        Bound to particles of another dimension than ``domain.dim``.

    See Also
    --------
    PairInteraction : the same term in free space (Box, Ball).
    meanfield.domains.Torus : the periodic domain.
    meanfield.pde.convolution.FFTConvolution : the grid view, circular on a torus.
    meanfield.pde.convolution.periodic_weights : the grid view's circular weights.

    References
    ----------
    M. P. Allen, D. J. Tildesley, *Computer Simulation of Liquids*, 2nd ed., Oxford
    University Press, 2017, §1.6 (the minimum-image convention).

    Examples
    --------
    Two particles 1.8 apart on the circle of circumference 2 (L = 1) are 0.2 apart the other
    way round: with k = |z|²/2 (range below L for these points) H_N = (λ/4)·2·0.02.

    >>> import math
    >>> import torch
    >>> from meanfield.domains import Torus
    >>> from meanfield.energy import PeriodicPairInteraction
    >>> from meanfield.kernels import Quadratic
    >>> term = PeriodicPairInteraction(Quadratic(), lam=1.0, domain=Torus(1, 1.0))
    >>> omega = torch.tensor([[-0.9], [0.9]], dtype=torch.float64)
    >>> math.isclose(float(term.value(omega)), 0.01)
    True
    >>> [round(g, 12) for g in term.grad(omega).ravel().tolist()]  # pulled across the seam
    [0.1, -0.1]

    δE/δμ through the minimum image: with k = −cos (2π-periodic), 2λ k(m(0 − 3)) = −cos 3:

    >>> from meanfield.kernels import Cosine
    >>> term = PeriodicPairInteraction(Cosine(), lam=0.5, domain=Torus(1))
    >>> at = torch.tensor([[0.0], [3.0]], dtype=torch.float64)
    >>> pts = torch.tensor([[3.0]], dtype=torch.float64)
    >>> term.first_variation(at, pts, torch.ones(1).double()).tolist()  # −cos(3), −1
    [0.9899924966004454, -1.0]
    """

    def __init__(self, kernel: PairKernel, lam: float = 1.0, *, domain: Torus):
        if not isinstance(domain, Torus):
            raise InputTypeError(
                f"domain must be a meanfield.domains.Torus for a periodic pair term, got "
                f"{domain!r} (use PairInteraction on a Box or a Ball)"
            )
        super().__init__(kernel, lam)
        self.domain = domain

    def bind(self, dim, dtype, device):
        if dim != self.domain.dim:
            raise InputError(
                f"PeriodicPairInteraction: particles of dimension {dim} on a torus of "
                f"dimension domain.dim = {self.domain.dim}; give the energy's own Torus"
            )
        super().bind(dim, dtype, device)

    def _uses_tiles(self, omega) -> bool:
        return False  # the tiles' |a|² + |b|² − 2aᵀb has no minimum image

    def _chunks(self, N, p):
        step = max(1, min(N, PAIR_CHUNK_ELEMENTS // max(N * p, 1)))
        return [(s, min(N, s + step)) for s in range(0, N, step)]

    def _displacement(self, diff):
        return self.domain.minimum_image(diff)

    def _pair_pass(self, omega, want_value: bool, want_grad: bool):
        return self._explicit_pass(omega, want_value, want_grad)

    def describe(self):
        return {
            **super().describe(),
            **{f"torus_{k}": v for k, v in self.domain.describe().items() if k != "domain"},
        }


def check_periodic_terms(energy) -> None:
    """Refuse an energy whose pair terms do not match its domain: on a
    :class:`~meanfield.domains.Torus` every :class:`PairInteraction` must be a
    :class:`PeriodicPairInteraction` on that torus (free-space pair sums there would ignore
    the periodicity), and a :class:`PeriodicPairInteraction` needs a torus.

    Parameters
    ----------
    energy : meanfield.energy.Energy

    Raises
    ------
    meanfield.errors.InputError
        A pair term that does not match the domain (the message names it).

    See Also
    --------
    PeriodicPairInteraction : the pair term of a torus.
    meanfield.domains.Torus : the periodic domain.
    meanfield.pde.grid.Grid.periodic : the grid view on a torus.

    Examples
    --------
    >>> from meanfield.domains import Torus
    >>> from meanfield.energy import Energy, PairInteraction
    >>> from meanfield.energy import check_periodic_terms
    >>> from meanfield.kernels import Cosine
    >>> check_periodic_terms(Energy([PairInteraction(Cosine())], Torus(1)))
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: terms[0]: a PairInteraction on the torus Torus(dim=1, ...
    """
    periodic = isinstance(energy.domain, Torus)
    for i, term in enumerate(energy.terms):
        if isinstance(term, PeriodicPairInteraction):
            if term.domain != energy.domain:
                raise InputError(
                    f"terms[{i}]: a PeriodicPairInteraction on {term.domain!r} in an energy "
                    f"on {energy.domain!r}; give it the energy's domain"
                )
        elif periodic and isinstance(term, PairInteraction):
            raise InputError(
                f"terms[{i}]: a PairInteraction on the torus {energy.domain!r} would ignore "
                "the periodicity; use PeriodicPairInteraction(kernel, lam, domain=torus)"
            )


def _runs(sizes):
    """Group equal consecutive sizes: [64, 64, 65] -> [(64, 2), (65, 1)]."""
    out = []
    for s in sizes:
        if out and out[-1][0] == s:
            out[-1][1] += 1
        else:
            out.append([s, 1])
    return [tuple(r) for r in out]


class _NegatedKernel(PairKernel):
    """−k for a kernel k: what :meth:`PairInteraction.pair_kernel` gives the grid for λ < 0,
    so that it reads λk as |λ| · (−k) with a nonnegative strength (private: never built by
    a user, never described in a run file, which holds the term's own kernel and λ)."""

    def __init__(self, kernel: PairKernel):
        self.base = kernel
        self.softening = kernel.softening
        self.name = f"negated {kernel.name}"

    def kappa(self, u):
        return -self.base.kappa(u)

    def dkappa(self, u):
        return -self.base.dkappa(u)

    @property
    def is_singular(self) -> bool:
        return self.base.is_singular

    def check_dimension(self, dim: int) -> None:
        self.base.check_dimension(dim)

    def length_scale(self, dim: int):
        return self.base.length_scale(dim)

    def describe(self) -> dict:
        return {**self.base.describe(), "kernel": self.name}

    def __repr__(self) -> str:
        return f"-{self.base!r}"
