r"""Wasserstein distances on the circle and the flat torus (a periodic domain).

On the circle ℝ/Pℤ (a :class:`~meanfield.domains.Torus` of dimension 1, period P = 2L) with
the geodesic distance d(x, y) = min_k |x − y + kP|, the distances are exact:

* W₁ by the formula of Werman, Peleg and Rosenfeld (1985), rediscovered by Rabin, Delon and
  Gousseau (2011): with F, G the cumulative distribution functions from a cut point,

  .. math::

      W_1(\mu, \nu) = \min_{c \in \mathbb R} \int_0^P |F(t) - G(t) - c|\, dt,

  the minimiser c being a (Lebesgue-weighted) median of F − G;
* W₂ by the shift of the quantile coupling (Delon, Salomon and Sobolevski 2010): with the
  quantile functions extended quasi-periodically (G⁻¹(t + 1) = G⁻¹(t) + P),

  .. math::

      W_2^2(\mu, \nu) = \min_{\theta \in \mathbb R} \int_0^1
      |F^{-1}(t) - G^{-1}(t + \theta)|^2\, dt,

  a convex function of θ (Delon et al., Prop. 3), piecewise linear for discrete measures,
  minimised here by golden-section search to round-off.

On the torus of dimension p ≥ 2 the distance is the optimal assignment for the cost
|m(x − y)|^order, m the minimum image (:meth:`~meanfield.domains.Torus.minimum_image`),
solved exactly by POT's network simplex for at most :data:`MAX_TORUS_PAIRS` pairs of points
(the dense cost matrix), refused above.

See Also
--------
meanfield.domains.Torus : the periodic domain.
meanfield.ot.distance.wasserstein : the distances in free space.

References
----------
- M. Werman, S. Peleg, A. Rosenfeld, "A distance metric for multidimensional histograms",
  Computer Vision, Graphics, and Image Processing 32 (1985) 328–336.
- J. Rabin, J. Delon, Y. Gousseau, "Transportation distances on the circle", J. Math.
  Imaging Vis. 41 (2011) 147–167.
- J. Delon, J. Salomon, A. Sobolevski, "Fast transport optimization for Monge costs on the
  circle", SIAM J. Appl. Math. 70 (2010) 2239–2258.
- R. Flamary et al., "POT: Python Optimal Transport", JMLR 22 (2021) 1–8
  (``ot.wasserstein_circle``, the reference of the tests).

Examples
--------
Two Dirac masses 0.2 apart across the seam of the unit circle (P = 1):

>>> import numpy as np
>>> from meanfield.domains import Torus
>>> from meanfield.ot.circle import wasserstein_circle
>>> T = Torus(1, half_width=0.5)
>>> round(wasserstein_circle([0.4], [-0.4], domain=T, order=1), 12)
0.2
>>> round(wasserstein_circle([0.4], [-0.4], domain=T, order=2), 12)
0.2
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._arrays import _power_of_two_unit
from ..domains import Torus
from ..errors import InputError, InputTypeError, PrecisionWarning, SizeLimitError

#: Largest number of point pairs n_a × n_b of the torus distance in p ≥ 2 (a dense cost
#: matrix of 8 × 4·10⁶ bytes = 32 MB and a network simplex on it).
MAX_TORUS_PAIRS = 4_000_000
#: Golden-section iterations of the W₂ shift search: the bracket shrinks by 0.618 a step,
#: from width 2 to below 1e-16 after 80.
SHIFT_ITERATIONS = 100
#: Rounding of the unit-circle coordinate u = (wrap(x) + L)/P of a point, in ulps of 1: the
#: wrap, the shift by L and the division each round once, and W adds the errors of two
#: points; a distance at or below this many ulps times the period P is not resolved.
ROUNDING_ULPS = 8


def _check_domain(domain) -> Torus:
    if not isinstance(domain, Torus):
        raise InputTypeError(f"domain must be a meanfield.domains.Torus, got {domain!r}")
    return domain


def _real_array(name: str, what: str, values) -> np.ndarray:
    raw = values.detach().cpu() if hasattr(values, "detach") else values
    if np.iscomplexobj(raw):
        raise InputTypeError(f"{name}: {what} must be real numbers, got complex ones")
    try:
        return np.asarray(raw, dtype=float)
    except (TypeError, ValueError) as err:  # strings, ragged lists
        raise InputTypeError(f"{name}: {what} must be real numbers ({err})") from None


def _points_weights(x, w, name: str, dim: int | None):
    x = _real_array(name, "points", x)
    if dim == 1 and x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if dim == 1 and x.ndim != 1:
        raise InputError(
            f"{name}: points on the circle must have shape (n,) or (n, 1), got {x.shape}"
        )
    if dim is not None and dim > 1 and (x.ndim != 2 or x.shape[1] != dim):
        raise InputError(
            f"{name}: points on the {dim}-torus must have shape (n, {dim}), got {x.shape}"
        )
    if x.shape[0] == 0:
        raise InputError(f"{name}: at least one point is needed")
    if not np.all(np.isfinite(x)):
        raise InputError(f"{name}: points must be finite")
    if w is None:
        w = np.full(x.shape[0], 1.0 / x.shape[0])
    else:
        w = _real_array(name, "weights", w)
        if w.shape != (x.shape[0],):
            raise InputError(f"{name}: weights must have shape ({x.shape[0]},), got {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise InputError(f"{name}: weights must be finite, >= 0 and not all zero")
        w = w / w.max()  # first: a sum of weights near the largest float would overflow
        w = w / w.sum()
    return x, w


def _on_unit_circle(x, w, domain: Torus):
    """Points as coordinates in [0, 1) (sorted) with their weights."""
    u = (np.asarray(domain.project(x[:, None]))[:, 0] + domain.half_width) / domain.period
    u = np.where(u >= 1.0, 0.0, u)
    order = np.argsort(u, kind="stable")
    return u[order], w[order]


def _check_order(order) -> int:
    if order not in (1, 2) or isinstance(order, bool):
        raise InputError(f"order must be 1 or 2, got {order!r}")
    return int(order)


def _w1_unit(u, a, v, b) -> float:
    # F − G is constant between consecutive support points (from the cut at 0); its
    # Lebesgue-weighted median c minimises ∫ |F − G − c|
    t = np.concatenate([u, v])
    jump = np.concatenate([a, -b])
    order = np.argsort(t, kind="stable")
    t, jump = t[order], jump[order]
    D = np.cumsum(jump)  # F − G on [t_k, t_{k+1})
    lengths = np.diff(np.concatenate([t, [1.0]]))
    D = np.concatenate([[0.0], D])  # on [0, t_0) F − G = 0
    lengths = np.concatenate([[t[0]], lengths])
    idx = np.argsort(D, kind="stable")
    cum = np.cumsum(lengths[idx])
    c = D[idx][np.searchsorted(cum, 0.5 * cum[-1])]
    return float(np.sum(lengths * np.abs(D - c)))


def _shift_cost(theta: float, u, Fa, v, Gb, order: int) -> float:
    """∫_0^1 |F⁻¹(t) − G⁻¹(t + θ)|^order dt for sorted unit-circle supports (exact)."""
    # breakpoints of t ↦ F⁻¹(t) (cumulative weights) and of t ↦ G⁻¹(t + θ)
    Gs = np.mod(Gb - theta, 1.0)
    t = np.unique(np.concatenate([[0.0, 1.0], Fa, Gs]))
    t = t[(t >= 0.0) & (t <= 1.0)]
    mid = 0.5 * (t[:-1] + t[1:])
    lengths = np.diff(t)
    i = np.minimum(np.searchsorted(Fa, mid, side="right"), len(u) - 1)
    s = mid + theta
    k = np.floor(s)
    j = np.minimum(np.searchsorted(Gb, s - k, side="right"), len(v) - 1)
    diff = u[i] - (v[j] + k)
    return float(np.sum(lengths * np.abs(diff) ** order))


def _w2_unit(u, a, v, b) -> float:
    Fa, Gb = np.cumsum(a), np.cumsum(b)
    Fa[-1] = Gb[-1] = 1.0  # the weights are normalised: close the last step exactly
    # the optimal shift lies in [−1, 1]: beyond, every point travels more than a period
    lo, hi = -1.0, 1.0
    g = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = _shift_cost(x1, u, Fa, v, Gb, 2), _shift_cost(x2, u, Fa, v, Gb, 2)
    for _ in range(SHIFT_ITERATIONS):
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = _shift_cost(x1, u, Fa, v, Gb, 2)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = _shift_cost(x2, u, Fa, v, Gb, 2)
    return math.sqrt(max(min(f1, f2), 0.0))


def wasserstein_circle(x, y, a=None, b=None, *, domain: Torus, order: int = 2) -> float:
    r"""W₁ or W₂ between two weighted point sets on the circle, exactly.

    Parameters
    ----------
    x, y : array_like, shape (n,) or (n, 1), and (m,) or (m, 1)
        Points on the circle (any real numbers: read modulo the period P = 2L).
    a, b : array_like, shape (n,) and (m,), optional
        Weights ≥ 0 (normalised to mass 1); uniform by default.
    domain : Torus
        The circle, a :class:`~meanfield.domains.Torus` of dimension 1.
    order : {1, 2}, default 2

    Returns
    -------
    float
        W_order in units of ω (the geodesic distance of the circle of circumference P).

    Raises
    ------
    meanfield.errors.InputTypeError
        ``domain`` is not a Torus.
    meanfield.errors.InputError
        A torus of dimension ≠ 1, ``order`` not 1 or 2, points not finite, weights not
        ≥ 0 or of the wrong shape.
    meanfield.errors.InputTypeError
        Points or weights that are not real numbers (strings, complex numbers).

    Warns
    -----
    meanfield.errors.PrecisionWarning
        A distance not above :data:`ROUNDING_ULPS` ulps of the period (two distinct point
        sets on a circle far larger than their differences: float64 cannot resolve it).

    See Also
    --------
    wasserstein_torus : the torus of dimension p ≥ 2.

    Notes
    -----
    W₁ = P ∫_0^1 |F − G − c| with c the weighted median of F − G (Werman et al. 1985;
    Rabin et al. 2011); W₂² = P² min_θ ∫_0^1 |F⁻¹(t) − G⁻¹(t + θ)|² dt on the unit circle
    (Delon et al. 2010), the convex piecewise-linear function of θ minimised by golden-section
    search (:data:`SHIFT_ITERATIONS` steps, to round-off).  Cost O((n + m) log(n + m)) per
    evaluation.

    References
    ----------
    - J. Rabin, J. Delon, Y. Gousseau, "Transportation distances on the circle", J. Math.
      Imaging Vis. 41 (2011) 147–167.
    - J. Delon, J. Salomon, A. Sobolevski, "Fast transport optimization for Monge costs on
      the circle", SIAM J. Appl. Math. 70 (2010) 2239–2258.

    Examples
    --------
    The uniform measure on n equally spaced points and its rotation by a quarter spacing:
    every point moves by π/(2n) on the circle θ ∈ [−π, π).

    >>> import math
    >>> import numpy as np
    >>> from meanfield.domains import Torus
    >>> from meanfield.ot.circle import wasserstein_circle
    >>> theta = np.linspace(-math.pi, math.pi, 8, endpoint=False)
    >>> d = wasserstein_circle(theta, theta + math.pi / 16, domain=Torus(1), order=2)
    >>> math.isclose(d, math.pi / 16)
    True
    """
    domain = _check_domain(domain)
    if domain.dim != 1:
        raise InputError(
            f"wasserstein_circle needs a Torus of dimension 1, got dim={domain.dim}; use "
            "wasserstein_torus"
        )
    order = _check_order(order)
    x, a = _points_weights(x, a, "x", 1)
    y, b = _points_weights(y, b, "y", 1)
    u, a_u = _on_unit_circle(x, a, domain)
    v, b_v = _on_unit_circle(y, b, domain)
    P = domain.period
    value = P * (_w1_unit(u, a_u, v, b_v) if order == 1 else _w2_unit(u, a_u, v, b_v))
    _warn_if_unresolved(value, x, a, y, b, domain)
    return value


def _warn_if_unresolved(value: float, x, a, y, b, domain: Torus) -> None:
    """PrecisionWarning when W is below the rounding of the points' unit-circle coordinates
    (a few ulps of 1, times the period P): the value is then not resolved; exact 0 for two
    identical inputs is kept silent."""
    bound = ROUNDING_ULPS * np.finfo(float).eps * domain.period
    if value > bound:
        return
    # the same points modulo the period (π and −π on the circle of half-width π): paired in
    # the order of their wrapped values, every difference an exact multiple of the period
    # (the wrap itself may round: 1 on a circle of half-width 1e300 wraps to 0)
    half, period = domain.period / 2, domain.period
    ix = np.lexsort((a, np.mod(x + half, period) - half))
    iy = np.lexsort((b, np.mod(y + half, period) - half))
    if x.shape == y.shape and np.array_equal(a[ix], b[iy]):
        d = x[ix] - y[iy]
        if np.array_equal(d, np.round(d / period) * period):
            return
    warnings.warn(
        f"wasserstein_circle: the distance {value:.3g} is not above its rounding bound "
        f"{bound:.3g} ({ROUNDING_ULPS} ulps of the period 2 * half_width = {domain.period:.3g}): "
        "float64 cannot resolve it on this circle; use a circle (half_width) of the scale of "
        "the points' differences",
        PrecisionWarning,
        stacklevel=3,
    )


def wasserstein_torus(x, y, a=None, b=None, *, domain: Torus, order: int = 2) -> float:
    r"""W₁ or W₂ on a flat torus of any dimension, by the network simplex on the periodic cost.

    The cost of moving x to y is |m(x − y)|^order with m the minimum image: on the flat
    torus [−L, L)^p it is the geodesic distance (to the power ``order``), so the assignment
    is the exact distance.  On the circle (p = 1) :func:`wasserstein_circle` is used.

    Parameters
    ----------
    x, y : array_like, shape (n, p) and (m, p)
        Points (read modulo the period 2L in each coordinate).
    a, b : array_like, shape (n,) and (m,), optional
        Weights ≥ 0 (normalised); uniform by default.
    domain : Torus
    order : {1, 2}, default 2

    Returns
    -------
    float
        W_order (units of ω).

    Raises
    ------
    meanfield.errors.SizeLimitError
        n × m above :data:`MAX_TORUS_PAIRS` (p ≥ 2), before the cost matrix is made.
    meanfield.errors.InputError, meanfield.errors.InputTypeError
        As :func:`wasserstein_circle`; points of the wrong shape.

    See Also
    --------
    wasserstein_circle : exact on the circle in O((n + m) log(n + m)).

    References
    ----------
    R. Flamary et al., "POT: Python Optimal Transport", JMLR 22 (2021) 1–8 (``ot.emd2``).

    Examples
    --------
    A point and its image across the seam of the square torus [−1, 1)²:

    >>> from meanfield.domains import Torus
    >>> from meanfield.ot.circle import wasserstein_torus
    >>> round(wasserstein_torus([[0.9, 0.0]], [[-0.9, 0.0]], domain=Torus(2, 1.0)), 12)
    0.2
    """
    domain = _check_domain(domain)
    order = _check_order(order)
    if domain.dim == 1:
        return wasserstein_circle(x, y, a, b, domain=domain, order=order)
    x, a = _points_weights(x, a, "x", domain.dim)
    y, b = _points_weights(y, b, "y", domain.dim)
    pairs = x.shape[0] * y.shape[0]
    if pairs > MAX_TORUS_PAIRS:
        raise SizeLimitError(
            f"wasserstein_torus: {x.shape[0]} x {y.shape[0]} = {pairs} pairs is above "
            f"MAX_TORUS_PAIRS = {MAX_TORUS_PAIRS} (a dense cost matrix); subsample the points"
        )
    import ot

    z = domain.minimum_image(x[:, None, :] - y[None, :, :])
    # a torus of extreme period in units of a power of two near it: the squared differences
    # underflowed (period 1e-200: W = 0) or overflowed (1e200: inf); exact, and not needed
    # in between
    unit = 1.0 if 2.0**-100 <= domain.period <= 2.0**100 else _power_of_two_unit(domain.period)
    z = z / unit
    cost = np.sqrt((z * z).sum(-1)) ** order
    value = float(ot.emd2(a, b, cost, numItermax=10_000_000))
    return max(value, 0.0) ** (1.0 / order) * unit


__all__ = [
    "MAX_TORUS_PAIRS",
    "ROUNDING_ULPS",
    "SHIFT_ITERATIONS",
    "wasserstein_circle",
    "wasserstein_torus",
]
