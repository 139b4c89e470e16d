"""The kernel–target alignment of learned features: the scale-free metric of the learners."""

from __future__ import annotations

import numpy as np
import torch

from meanfield.alignment import cristianini_alignment
from meanfield.energy import target_factors

from ._common import _encode_labels

__all__ = ["kernel_alignment"]


def kernel_alignment(Phi, y, *, centred: bool = False) -> float:
    r"""Cristianini kernel-target alignment A = ⟨K, T⟩_F / (‖K‖_F ‖T‖_F), K = Φ Φᵀ.

    .. math::

        A = \frac{\langle K, T\rangle_F}{\|K\|_F\, \|T\|_F}, \qquad K = \Phi \Phi^\top,
        \qquad T_{jk} = \begin{cases} 1, & y_j = y_k, \\ -1/(C - 1), & y_j \ne y_k \end{cases}

    (:func:`meanfield.energy.target_factors`; T = y yᵀ for ±1 labels).

    Scale-free, so it compares learners whatever their feature weights. Computed through the
    (m, m) Gram matrix ΦᵀΦ: O(n m²), nothing (n, n) is built.

    Parameters
    ----------
    Phi : array of shape (n, m)
        Features of the n points (one column per feature).
    y : array of shape (n,)
        Labels (two classes are mapped to ±1, more to class ids).
    centred : bool
        Centred alignment (Cortes et al. 2012): K and T replaced by HKH and HTH,
        H = I − 11ᵀ/n, i.e. the columns of Φ and of the target factors centred
        (the learner-side twin of :class:`meanfield.energy.CentredAlignment`).

    Returns
    -------
    float in [−1, 1]
        The alignment (0 for identically zero features).

    See Also
    --------
    meanfield.energy.NormalisedAlignment, meanfield.energy.CentredAlignment : the same
        alignments as energy terms of particles.
    meanfield.attention.phases.attention_kernel_alignment : of an attention feature map.

    References
    ----------
    .. [1] N. Cristianini, J. Shawe-Taylor, A. Elisseeff and J. Kandola, "On kernel-target
       alignment", NeurIPS 2001.
    .. [2] C. Cortes, M. Mohri and A. Rostamizadeh, "Algorithms for learning kernels based on
       centered alignment", JMLR 13, 795–828, 2012.

    Examples
    --------
    >>> y = np.array([1, -1, 1, -1])
    >>> kernel_alignment(y[:, None].astype(float), y)  # one feature equal to the labels: K = T
    1.0
    """
    Phi = torch.as_tensor(np.asarray(Phi, dtype=float))
    _, t = _encode_labels(y, "kernel_alignment")
    U, w = (torch.as_tensor(a) for a in target_factors(t))  # T = U diag(w) Uᵀ, as the energy
    return float(cristianini_alignment(Phi.T, U, w, centred=centred))
