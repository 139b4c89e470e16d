r"""The frame every transport distance is computed in, and the rounding bound of its certificate.

W_q is translation-equivariant and homogeneous,

.. math::

    W_q(\mu(\cdot - c), \nu(\cdot - c)) = W_q(\mu, \nu), \qquad
    W_q(s_\# \mu, s_\# \nu) = |s|\, W_q(\mu, \nu),

so :func:`common_frame` moves both measures to a frame where float64 resolves them — centred
near 0 and scaled to coordinates in (−1, 1) — and the distance is mapped back at the end.  Both
steps are *exact* in float64:

* the translation by c_k along axis k is made only where Sterbenz's lemma makes every
  difference x − c_k exact (all coordinates, of both measures and of a density's cell edges,
  within [c_k/2, 2c_k]: exactly the clouds far from 0 compared with their spread, where a cost
  |x − y|² computed from the raw coordinates loses its digits to cancellation);
  elsewhere the axis is not translated (the coordinates then straddle 0 or reach it, so the
  extent already bounds them and no digits cancel);
* the scaling is by a power of two, 2^−e with max |x − c| = f 2^e, f ∈ [½, 1): exact unless a
  coordinate falls below the normal range (tracked, :attr:`Frame.displacement`).

So squared distances neither underflow (measures at 1e-200) nor overflow (at 1e150), and
differences of nearby coordinates are not lost to an offset (1e8).

:func:`rounding_bound` is the absolute error bound of the float64 optimal cost W_q^q in the
frame that the certificate of :func:`meanfield.ot.distance.wasserstein` adds to the solver's
duality gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._arrays import _power_of_two_unit

__all__ = ["Frame", "common_frame", "rounding_bound", "gamma", "UNIT_ROUNDOFF"]

#: u = 2^−53, the unit roundoff of float64 (round to nearest).
UNIT_ROUNDOFF = 2.0**-53
#: The smallest positive normal float64; a translation centre below it is not used (its half
#: would round).
_TINY = 2.0**-1021
#: The smallest positive subnormal float64: the absolute rounding of a coordinate that the
#: scaling pushes below the normal range.
_SUBNORMAL = 2.0**-1074


def gamma(k: int) -> float:
    """γ_k = k u / (1 − k u), the classic bound on the relative error of k float64 operations.

    See Also
    --------
    rounding_bound : the bound built on it.
    meanfield.pairsum.roundoff_bound : the rounding bound of the pair sums.

    References
    ----------
    - N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM, 2002 (§2.5
      Sterbenz's lemma, §3.1 the constants γ_k).

    Examples
    --------
    >>> from meanfield.ot.precision import gamma
    >>> 1.1e-15 < gamma(10) < 1.2e-15
    True
    """
    ku = k * UNIT_ROUNDOFF
    return ku / (1.0 - ku)


@dataclass(frozen=True)
class Frame:
    """An exact translation and power-of-two scaling: x ↦ (x − shift) · 2^−exponent.

    Parameters
    ----------
    shift : numpy.ndarray (p,)
        The translation c per axis (0 where Sterbenz's lemma does not make it exact).
    exponent : int
        e: frame coordinates are (x − c) 2^−e, in (−1, 1).
    displacement : float
        Largest distance, in frame units, by which the scaling moved a point from its exact
        image (0 unless a coordinate fell below the normal range).
    diameter : float
        An upper bound of the largest distance between two points (or cell edges) of the two
        measures, in frame units.

    See Also
    --------
    common_frame : the frame of several point sets.
    rounding_bound : the error bound in frame units.
    meanfield.ot.distance.wasserstein : the distance computed in it.

    References
    ----------
    - N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM, 2002 (§2.5
      Sterbenz's lemma, §3.1 the constants γ_k).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.ot.precision import common_frame
    >>> f = common_frame([np.array([[1e8 + 0.5], [1e8 - 0.5]])])
    >>> float(f.shift[0]), f.exponent, f.to_frame(np.array([[1e8 + 0.5]]))
    (100000000.0, 0, array([[0.5]]))
    """

    shift: np.ndarray
    exponent: int
    displacement: float
    diameter: float

    def to_frame(self, x: np.ndarray) -> np.ndarray:
        """Frame coordinates (x − shift) 2^−exponent of points x (n, p).

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.ot.precision import Frame
        >>> Frame(np.array([8.0, 0.0]), 2, 0.0, 1.0).to_frame(np.array([[9.0, -2.0]]))
        array([[ 0.25, -0.5 ]])
        """
        return np.ldexp(np.asarray(x, dtype=np.float64) - self.shift, -self.exponent)

    def axis_to_frame(self, values: np.ndarray, axis: int) -> np.ndarray:
        """Frame coordinates of values along one axis (cell edges).

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.ot.precision import Frame
        >>> Frame(np.array([8.0, 0.0]), 2, 0.0, 1.0).axis_to_frame(np.array([6.0, 10.0]), 0)
        array([-0.5,  0.5])
        """
        return np.ldexp(np.asarray(values, dtype=np.float64) - self.shift[axis], -self.exponent)

    def length(self, d: float, power: int = 1, rounding: str = "nearest") -> float:
        """A length (``power=1``) or a squared length (``power=2``) back in the unit of the
        points: d · 2^(power · e), rounded toward 0 (``"down"``), +inf (``"up"``) or to the
        nearest where it leaves the normal range; inf if it overflows float64.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.ot.precision import Frame
        >>> f = Frame(np.zeros(1), -1070, 0.0, 1.0)
        >>> f.length(0.7, rounding="down"), f.length(0.7, rounding="up")  # 0.7 2^-1070 rounds
        (5.4e-323, 6e-323)
        >>> Frame(np.zeros(1), 1024, 0.0, 1.0).length(1.0)
        inf
        """
        shift = power * self.exponent
        try:
            y = math.ldexp(d, shift)
        except OverflowError:
            return math.inf
        if rounding != "nearest" and math.ldexp(y, -shift) != d:  # rounded (subnormal)
            toward = 0.0 if rounding == "down" else math.inf
            if (math.ldexp(y, -shift) > d) == (rounding == "down"):
                y = math.nextafter(y, toward)
        return y


def _axis_shift(lo: float, hi: float) -> float:
    """The exact translation of an axis whose values lie in [lo, hi]: the midpoint c if every
    value is in [c/2, 2c] (Sterbenz: then x − c is exact), else 0."""
    if lo > 0 or hi < 0:
        s = 1.0 if lo > 0 else -1.0
        a, b = (lo, hi) if s > 0 else (-hi, -lo)  # 0 < a ≤ b
        c = 0.5 * a + 0.5 * b
        if c >= _TINY and a >= 0.5 * c and 0.5 * b <= c:
            return s * c
    return 0.0


def common_frame(points: list, edges: list | None = None) -> Frame:
    """The exact frame of several point sets of one dimension p (module docstring).

    Parameters
    ----------
    points : list of numpy.ndarray (n_i, p)
        Finite float64 points of the measures.
    edges : list of tuple of p arrays, optional
        Cell edges of the densities among them (included in the translation test and the
        extent, so that transformed cells still hold their centres).

    Returns
    -------
    Frame

    See Also
    --------
    Frame : the frame it returns.
    rounding_bound : the error bound in that frame.
    meanfield.ot.sparse.w2_sparse : a solver run in it.

    References
    ----------
    - N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM, 2002 (§2.5
      Sterbenz's lemma, §3.1 the constants γ_k).

    Examples
    --------
    A cloud at 1e-200: no translation (it straddles 0), the scale 2^−e brings it to (−1, 1).

    >>> import numpy as np
    >>> from meanfield.ot.precision import common_frame
    >>> f = common_frame([np.array([[-3e-200], [5e-200]])])
    >>> float(f.shift[0]), f.exponent, bool(f.to_frame(np.array([[5e-200]]))[0, 0] < 1)
    (0.0, -662, True)
    """
    p = points[0].shape[1]
    axes = []
    for k in range(p):
        vals = [x[:, k] for x in points] + [e[k] for e in edges or ()]
        axes.append((min(float(v.min()) for v in vals), max(float(v.max()) for v in vals)))
    shift = np.array([_axis_shift(lo, hi) for lo, hi in axes])
    extent = max(max(abs(lo - c), abs(hi - c)) for (lo, hi), c in zip(axes, shift, strict=True))
    exponent = math.frexp(extent)[1] if extent > 0 else 0
    frame = Frame(shift, exponent, 0.0, 0.0)
    exact = all(
        np.array_equal(np.ldexp(frame.to_frame(x), exponent), x - shift) for x in points
    ) and all(
        np.array_equal(np.ldexp(frame.axis_to_frame(e[k], k), exponent), e[k] - shift[k])
        for e in edges or ()
        for k in range(p)
    )
    # the frame extent of each axis, rounded up: a bound of every pair's distance
    # (scaled before the difference, which cannot overflow then; it may round: padded)
    widths = [math.ldexp(hi, -exponent) - math.ldexp(lo, -exponent) for lo, hi in axes]
    diameter = math.sqrt(sum(w * w for w in widths)) * (1.0 + 8 * UNIT_ROUNDOFF)
    displacement = 0.0 if exact else math.sqrt(p) * _SUBNORMAL
    return Frame(shift, exponent, displacement, diameter + 2 * displacement)


def rounding_bound(n_terms: int, p: int, order: int, diameter: float, duals: float = 0.0):
    r"""Absolute error bound, in frame units, of the float64 optimal cost W_q^q.

    .. math::

        E = \gamma_K \,(2 D^q + S), \qquad K = n_{\rm terms} + p + 16,

    with D the frame diameter (every cost is ≤ D^q), S = Σ a_i|u_i| + Σ b_j|v_j| + 2 max|u| +
    2 max|v| for a solver that returns dual potentials (0 otherwise), γ_K = K u / (1 − K u).
    It covers: each cost |x_i − y_j|^q from direct differences (relative error γ_{p+3}: p
    differences, p squares, p − 1 sums, a square root for q = 1); the normalisation of the
    weights and the breakpoints of the quantile functions (relative error u each, moving the
    cost by ≤ u D^q per term); the sum of the plan's cost and of the dual objective over at
    most n_terms entries; the check of the dual constraints.  The certificate adds it to the
    solver's own duality gap.

    Parameters
    ----------
    n_terms : int
        The number of terms the cost is summed over (points of both measures, pieces).
    p : int
        Dimension.
    order : {1, 2}
        q.
    diameter : float
        D, frame units.
    duals : float
        S (frame units of the cost).

    Returns
    -------
    float
        E, in frame units of W_q^q.

    See Also
    --------
    gamma : the constants γ_k.
    common_frame : the frame the bound is in.
    meanfield.ot.distance.TransportResult : ``lower`` and ``upper``, widened by it.

    References
    ----------
    - N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM, 2002 (§2.5
      Sterbenz's lemma, §3.1 the constants γ_k).

    Examples
    --------
    >>> from meanfield.ot.precision import rounding_bound
    >>> 1e-14 < rounding_bound(110, 2, 2, 2.0) < 1e-12
    True
    """
    return gamma(n_terms + p + 16) * (2.0 * diameter**order + duals)


def _probabilities(w: np.ndarray) -> np.ndarray:
    """w / Σ w for weights w ≥ 0 (n,), not all zero, without overflow: divided first by a
    power of two near the largest (exact, so ordinary weights give the same bits as w / Σ w);
    weights near 1e308 summed to inf and normalised to 0, which POT refused with an
    AssertionError."""
    w = w / _power_of_two_unit(w)  # the largest in [1, 2)
    return w / w.sum()
