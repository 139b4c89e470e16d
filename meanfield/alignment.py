"""Cristianini kernel–target alignment from features and target factors (the one implementation).

For a kernel K = Φᵀ Φ built from a feature matrix Φ of shape (N, n) (N features, n data
points) and a target T = U diag(w) Uᵀ (the low-rank factors of
:func:`meanfield.energy.target_factors`),

.. math::

    A = \\frac{\\langle K, T\\rangle_F}{\\|K\\|_F \\, \\|T\\|_F},
    \\qquad \\langle K, T\\rangle_F = \\sum_r w_r \\|\\Phi u_r\\|^2 ,

and ‖K‖_F is the Frobenius norm of the smaller of the two Grams ΦᵀΦ (n, n) and ΦΦᵀ (N, N),
which have the same norm: nothing of size n × n is built when N < n. The centred alignment
(Cortes, Mohri & Rostamizadeh 2012) is the same ratio for H K H and H T H, H = I − 11ᵀ/n,
i.e. for features and target factors centred over the data points.

Used by the energy terms :class:`meanfield.energy.NormalisedAlignment` (value and gradient,
in torch) and :class:`~meanfield.energy.CentredAlignment`, and by the evaluation metric
:func:`meanfield.learners.kernel_alignment` (which the attention diagnostics call too).

References
----------
N. Cristianini, J. Shawe-Taylor, A. Elisseeff, J. Kandola, "On kernel-target alignment",
NeurIPS 2001. C. Cortes, M. Mohri, A. Rostamizadeh, "Algorithms for learning kernels based on
centered alignment", JMLR 13, 2012.
"""

from __future__ import annotations

import torch

__all__ = [
    "alignment_parts",
    "cristianini_alignment",
    "small_gram",
    "target_norm",
    "times_gram",
]


def small_gram(phi: torch.Tensor) -> torch.Tensor:
    """The smaller Gram of ``phi`` (..., N, n): Φ Φᵀ (N, N) if N <= n, else Φᵀ Φ (n, n).

    Both have the same Frobenius norm; with n data points >> N particles the particle Gram
    costs O(N² n) instead of O(N n²) time and N² instead of n² memory.

    Parameters
    ----------
    phi : tensor of shape (..., N, n)
        Features of N particles on n data points.

    Returns
    -------
    tensor of shape (..., N, N) or (..., n, n)
        Φ Φᵀ when N ≤ n, else Φᵀ Φ.

    See Also
    --------
    times_gram : Φ Φᵀ Φ from it.
    alignment_parts : the pieces that use it.
    cristianini_alignment : the alignment.

    Examples
    --------
    >>> phi = torch.ones(2, 5)
    >>> tuple(small_gram(phi).shape), tuple(small_gram(phi.T).shape)  # always the 2 x 2 side
    ((2, 2), (2, 2))
    """
    if phi.shape[-2] <= phi.shape[-1]:
        return phi @ phi.transpose(-1, -2)
    return phi.transpose(-1, -2) @ phi


def times_gram(phi: torch.Tensor, gram: torch.Tensor) -> torch.Tensor:
    """Φ Φᵀ Φ from :func:`small_gram`'s result: ``(Φ Φᵀ) Φ`` or ``Φ (Φᵀ Φ)``, shape of phi.

    Parameters
    ----------
    phi : tensor of shape (..., N, n)
        Features.
    gram : tensor of shape (..., N, N) or (..., n, n)
        ``small_gram(phi)``; its size says on which side it multiplies.

    Returns
    -------
    tensor of shape (..., N, n)
        Φ Φᵀ Φ.

    See Also
    --------
    small_gram : the Gram it starts from.
    cristianini_alignment : the alignment whose gradient needs it.

    Examples
    --------
    >>> phi = torch.arange(6.0).reshape(2, 3)
    >>> bool(torch.allclose(times_gram(phi, small_gram(phi)), phi @ phi.T @ phi))
    True
    """
    if gram.shape[-1] == phi.shape[-2]:
        return gram @ phi
    return phi @ gram


def target_norm(U: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """‖T‖_F of T = U diag(w) Uᵀ from its factors U (n, r), w (r,), in O(n r²).

    .. math:: \\|T\\|_F^2 = \\operatorname{tr}(M M^\\top)
              = \\sum_{ab} M_{ab} M_{ba}, \\qquad M = (U^\\top U) \\operatorname{diag}(w).

    Parameters
    ----------
    U : tensor of shape (n, r)
        Target factor vectors (columns).
    w : tensor of shape (r,)
        Their weights.

    Returns
    -------
    tensor of shape ()
        ‖U diag(w) Uᵀ‖_F, without building the n × n matrix.

    See Also
    --------
    meanfield.energy.target_factors : the factors U and w of T.
    meanfield.energy.target_matrix : the dense T.
    cristianini_alignment : the alignment normalised by it.

    Examples
    --------
    >>> y = torch.tensor([[1.0], [-1.0], [1.0]])  # T = y yᵀ, ‖T‖_F = |y|² = 3
    >>> float(target_norm(y, torch.ones(1)))
    3.0
    """
    M = (U.T @ U) * w
    return (M * M.T).sum().sqrt()


def alignment_parts(phi: torch.Tensor, U: torch.Tensor, w: torch.Tensor):
    r"""The pieces of the alignment that its value and gradient share.

    .. math::

        S = \Phi U, \qquad \mathrm{num} = \sum_{i,r} w_r S_{ir}^2 = \langle \Phi^\top \Phi, T
        \rangle_F, \qquad G_n = \|\Phi^\top \Phi\|_F .

    Parameters
    ----------
    phi : tensor of shape (..., N, n)
        Features of N particles on n data points.
    U : tensor of shape (n, r)
        Target factor vectors, T = U diag(w) Uᵀ.
    w : tensor of shape (r,)
        Their weights.

    Returns
    -------
    S : tensor (..., N, r)
        Φ U.
    P : tensor (..., N, N) or (..., n, n)
        :func:`small_gram` of Φ.
    num : tensor (...)
        ⟨ΦᵀΦ, T⟩_F = Σ_ir w_r S_ir².
    Gn : tensor (...)
        ‖ΦᵀΦ‖_F.

    See Also
    --------
    cristianini_alignment : the value.
    small_gram : the Gram it holds.
    target_norm : ‖T‖_F.

    Examples
    --------
    >>> y = torch.tensor([[1.0], [-1.0]])
    >>> S, P, num, Gn = alignment_parts(y.T, y, torch.ones(1))  # one feature equal to y
    >>> float(num), float(Gn)  # ⟨yyᵀ, yyᵀ⟩ = |y|⁴ = 4, ‖yyᵀ‖ = 2
    (4.0, 2.0)
    """
    S = phi @ U
    num = (S * S * w).sum((-1, -2))
    P = small_gram(phi)
    Gn = (P * P).sum((-1, -2)).sqrt()
    return S, P, num, Gn


def _check_shapes(phi, U, w) -> None:
    """phi (..., N, n) floating, U (n, r), w (r,): raise naming what does not fit."""
    if not (torch.is_tensor(phi) and phi.is_floating_point() and phi.ndim >= 2):
        raise ValueError(f"phi must be a floating tensor of shape (..., N, n), got {phi!r:.60}")
    if U.ndim != 2 or U.shape[0] != phi.shape[-1]:
        raise ValueError(
            f"U must have shape (n, r) with n = phi.shape[-1] = {phi.shape[-1]}, "
            f"got {tuple(U.shape)}"
        )
    if w.shape != (U.shape[1],):
        raise ValueError(f"w must have shape (r,) = ({U.shape[1]},), got {tuple(w.shape)}")


def cristianini_alignment(
    phi: torch.Tensor, U: torch.Tensor, w: torch.Tensor, *, centred: bool = False
) -> torch.Tensor:
    r"""Kernel–target alignment A ∈ [−1, 1] of K = ΦᵀΦ with T = U diag(w) Uᵀ.

    .. math::

        A = \frac{\langle K, T\rangle_F}{\|K\|_F\, \|T\|_F}, \qquad
        \langle K, T\rangle_F = \sum_r w_r \|\Phi u_r\|^2 ;

    centred, K and T are replaced by HKH and HTH, H = I − 11ᵀ/n.

    Parameters
    ----------
    phi : tensor of shape (..., N, n)
        Features (rows) on the n data points (columns).
    U : tensor of shape (n, r)
        Target factor vectors, T = U diag(w) Uᵀ.
    w : tensor of shape (r,)
        Their weights.
    centred : bool
        Centre features and factors over the data points first (Cortes et al. 2012).

    Returns
    -------
    tensor of shape (...)
        The alignment; 0 where the kernel is identically zero (the ratio's limit is
        undefined, and a zero kernel carries no information about the labels).

    Raises
    ------
    ValueError
        If phi is not a floating tensor of at least 2 dimensions, or U, w do not fit it.

    See Also
    --------
    meanfield.energy.NormalisedAlignment : the energy term −A.
    meanfield.energy.CentredAlignment : the centred energy term.
    meanfield.learners.metric.kernel_alignment : the alignment of a learned kernel.
    meanfield.ot.diagnostics.kernel_gap : how far two kernels are.

    References
    ----------
    - N. Cristianini, J. Shawe-Taylor, A. Elisseeff, J. Kandola, "On kernel-target alignment",
      Advances in Neural Information Processing Systems 14 (NIPS 2001), MIT Press, 2002.
    - C. Cortes, M. Mohri, A. Rostamizadeh, "Algorithms for learning kernels based on centered
      alignment", JMLR 13 (2012) 795–828 (the centred form).

    Examples
    --------
    >>> y = torch.tensor([[1.0], [-1.0], [1.0]])
    >>> float(cristianini_alignment(y.T, y, torch.ones(1)))  # K = T
    1.0
    """
    _check_shapes(phi, U, w)
    U, w = U.to(phi.dtype), w.to(phi.dtype)  # the features set the precision
    if centred:
        phi = phi - phi.mean(-1, keepdim=True)
        U = U - U.mean(0, keepdim=True)
    _, _, num, Gn = alignment_parts(phi, U, w)
    Tn = target_norm(U, w)
    safe = torch.where(Gn > 0, Gn, torch.ones_like(Gn))
    return torch.where(Gn > 0, num / (safe * Tn), torch.zeros_like(num))
