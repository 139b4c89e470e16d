r"""Wasserstein distances between two measures: one entry point, one result type.

:func:`wasserstein` (and its shorthands :func:`w1`, :func:`w2`) takes two
:class:`~meanfield.ot.measure.Measure`\ s — particles, a grid density, any weighted points —
and returns a :class:`TransportResult`: the distance, the method that computed it, and the
bounds it is known within.

.. math::

    W_q(\mu, \nu) = \Big( \min_{\pi \in \Pi(\mu, \nu)} \sum_{i,j} \pi_{ij} |x_i - y_j|^q
    \Big)^{1/q} = \Big( \int_0^1 |Q_\mu(u) - Q_\nu(u)|^q \, du \Big)^{1/q} \ \ (p = 1),

for q = 1, 2, with Π(μ, ν) the couplings of the two measures normalised to mass 1 and Q
their quantile functions.  The methods:

* ``"quantile"`` (p = 1): the formula above, integrated in closed form on the merged
  breakpoints of the two quantile functions (piecewise constant for atoms, piecewise linear
  for a density on cells: exact for both);
* ``"exact"``: the quantile formula in p = 1, else POT's dense network simplex
  (``ot.emd2``, float64, points of zero weight dropped) on the N × M cost matrix;
* ``"sparse"`` (W₂ only): the same exact W₂ on a sparse support grown by column generation
  (:func:`meanfield.ot.sparse.w2_sparse`), with a certificate
  ``lower`` ≤ W₂ ≤ ``upper`` from a dual check over every pair;
* ``"sliced"`` (order 2 only): the sliced distance SW₂, a Monte Carlo estimate over random
  directions (``ot.sliced_wasserstein_distance``) — a different, smaller quantity
  (SW₂ ≤ W₂), recorded as "sliced_w2", never "w2";
* ``"auto"``: the exact value by the cheaper route, never the sliced one — the quantile
  formula in p = 1; in p ≥ 2 "exact" up to :data:`EXACT_MAX_PAIRS` cost entries (points of
  positive weight) and "sparse" above for W₂ (:func:`resolve_w_method`, the one place that
  decides).

Precision.  Every method computes in one exact frame of the two measures
(:func:`meanfield.ot.precision.common_frame`): translated where the translation is exact
(clouds far from 0 compared with their spread, whose costs would otherwise lose their digits
to cancellation — W₂ of two clouds at 1e8 used to be a certified 0) and scaled by a power of
two (so squared distances neither underflow at 1e-200 nor overflow at 1e150), then mapped
back (W_q(a + c, b + c) = W_q(a, b), W_q(s a, s b) = |s| W_q(a, b)).  The costs are formed
from coordinate differences.  The certificate ``lower`` ≤ W_q ≤ ``upper`` adds the rounding
bound of the float64 cost (:func:`meanfield.ot.precision.rounding_bound`) to the solver's
duality gap, so lower < upper by about 1e-14 relative for a resolved value; a value the
interval does not resolve (its width exceeds it) comes with ``certified=False`` and a
:class:`~meanfield.errors.PrecisionWarning`; a W_q beyond float64 raises
:class:`~meanfield.errors.NumericalError`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_choice, check_int
from ..contract import Param, declare
from ..errors import ConvergenceError, InputError, InputTypeError, NumericalError, PrecisionWarning
from .measure import Measure, quantile_segments
from .precision import UNIT_ROUNDOFF, Frame, _probabilities, common_frame, rounding_bound
from .sparse import w2_sparse

__all__ = [
    "wasserstein",
    "w1",
    "w2",
    "TransportResult",
    "METHODS",
    "EXACT_MAX_PAIRS",
    "W2_METHODS",
    "resolve_w_method",
    "w_name",
]

#: Largest N × M (number of cost-matrix entries) for which ``method="auto"`` runs the dense
#: network simplex (``ot.emd2``) in p = 2, 3.  Above it the sparse exact solver
#: (:func:`meanfield.ot.sparse.w2_sparse`, the same value to rounding) is faster: measured
#: with benchmarks/bench_w2.py on the 2-core CPU, the dense solve takes 0.1 s at 1e6 entries,
#: 0.9 s at 4.4e6 and 3.5 s at 1.2e7 against 0.1, 0.1 and 0.3 s for the sparse one (and
#: minutes and gigabytes at 1.6e8, against seconds).
EXACT_MAX_PAIRS = 1_000_000
#: Iteration cap of the network simplex (POT's default, 1e5, is too small for 1e4 × 1e4).
EMD_MAX_ITER = 100_000_000
#: The methods of :func:`wasserstein` ("sparse_exact" is accepted as the old name of "sparse").
METHODS = ("auto", "exact", "sparse", "sliced", "quantile")
#: The methods of :func:`resolve_w_method` and of the names recorded by the studies.
W2_METHODS = ("auto", "exact", "sparse_exact", "sliced")
#: Options of :func:`wasserstein`, by the method that reads them.
OPTIONS = {
    "sparse": ("k", "pool", "per_row", "max_rounds", "multiscale", "return_plan"),
    "sliced": ("n_projections", "seed"),
}


def resolve_w_method(p: int, n_a: int, n_b: int, method: str = "auto", order: int = 2) -> str:
    """The distance ``method="auto"`` computes: "exact" or "sparse_exact", never "sliced".

    Parameters
    ----------
    p : int
        Dimension.
    n_a, n_b : int
        Support sizes of the two measures (particles, cells of non-zero mass).
    method : {"auto", "exact", "sparse_exact", "sliced"}
    order : {1, 2}
        W1 has no sparse solver: "auto" keeps it on the dense simplex.

    Returns
    -------
    str
        ``method`` itself unless "auto"; then "exact" in p = 1, for W1, or while
        n_a × n_b ≤ :data:`EXACT_MAX_PAIRS`, else "sparse_exact" (the same value, exact, on
        a sparse support: :func:`meanfield.ot.sparse.w2_sparse`).

    See Also
    --------
    wasserstein : the distance that resolves ``method``.
    w_name : the name the resolved method records.
    meanfield.ot.sparse.w2_sparse : the sparse exact route.

    Examples
    --------
    >>> from meanfield.ot.distance import resolve_w_method
    >>> resolve_w_method(2, 100, 100), resolve_w_method(2, 10_000, 10_000)
    ('exact', 'sparse_exact')
    >>> resolve_w_method(1, 10_000, 10_000), resolve_w_method(2, 100, 100, "sliced")
    ('exact', 'sliced')
    """
    check_choice("method", method, W2_METHODS)
    if method != "auto":
        return method
    small = p == 1 or order == 1 or int(n_a) * int(n_b) <= EXACT_MAX_PAIRS
    return "exact" if small else "sparse_exact"


def w_name(method: str) -> str:
    """The name a recorded distance carries: "sliced_w2" for the sliced one, else "w2".

    Parameters
    ----------
    method : str
        A method of :data:`W2_METHODS` or :data:`METHODS` (resolved or not).

    Returns
    -------
    str
        "sliced_w2" or "w2".

    See Also
    --------
    resolve_w_method : the method ``"auto"`` runs.
    wasserstein : the distance.
    meanfield.workbench.compare.compare : a run that records it.

    Examples
    --------
    >>> from meanfield.ot.distance import w_name
    >>> w_name("sliced"), w_name("sparse_exact"), w_name("auto")
    ('sliced_w2', 'w2', 'w2')
    """
    return "sliced_w2" if method == "sliced" else "w2"


@dataclass(frozen=True)
class TransportResult:
    """A distance between two measures, how it was computed and how well it is known.

    Parameters
    ----------
    distance : float
        W_q for the exact methods; the Monte Carlo estimate of SW₂ for "sliced".  In the
        unit of the points.
    order : int
        q (1 or 2).
    method : {"quantile", "exact", "sparse", "sliced"}
        The method that ran ("auto" resolved).
    lower, upper : float
        Bounds on W_q itself, proven against the float64 rounding: the solver's dual bound
        ("exact": POT's potentials checked on every pair; "sparse": its certificate;
        "quantile": the closed form) and the cost of its plan, each widened by the rounding
        bound of the computed cost (module docstring), so ``lower < upper`` (by about 1e-14
        relative) and ``lower == upper`` only for a certified 0.  For "sliced", ``lower`` =
        the estimate (every direction's projection is 1-Lipschitz, so the estimate is ≤ W₂,
        rounding aside) and ``upper = inf``.
    certified : bool
        Whether ``distance`` is W_q resolved by the interval: False for "sliced", and False
        (with a :class:`~meanfield.errors.PrecisionWarning`) when ``upper − lower`` exceeds
        a positive ``distance``: float64 cannot resolve it at the extent of the measures.
    details : dict
        What the method reports: ``support`` (points of positive weight on each side);
        ``centre_bias`` where a density in p ≥ 2 was read as atoms at its cell centres (a
        bound on how much that moves W_q); ``rounding``, the certified width
        ``upper − lower`` (unit of the points) of the exact methods; the sparse solver's
        ``rounds``, ``pairs``, ``tau``, ``levels``, ``seconds`` (and ``u``, ``v``, ``plan`` with
        ``return_plan=True``); the sliced ``n_projections`` and ``seed``.

    See Also
    --------
    wasserstein : the distance that returns it.
    meanfield.ot.precision.rounding_bound : the width of its certificate.
    meanfield.errors.PrecisionWarning : issued when it is not certified.

    Examples
    --------
    >>> from meanfield.ot import Measure, w2
    >>> r = w2(Measure([[0.0, 0.0]]), Measure([[3.0, 4.0]]))
    >>> r.distance, r.method, r.certified, float(r)
    (5.0, 'exact', True, 5.0)
    >>> bool(r.lower < r.distance < r.upper), bool(r.upper - r.lower < 1e-13)
    (True, True)

    The same two points at the offset 1e8 (where a cost built from the raw coordinates
    cancels): the same distance.

    >>> w2(Measure([[1e8, 1e8]]), Measure([[1e8 + 3, 1e8 + 4]])).distance
    5.0
    """

    distance: float
    order: int
    method: str
    lower: float
    upper: float
    certified: bool
    details: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The name to record the value under: "w1", "w2", or "sliced_w2".

        Examples
        --------
        >>> from meanfield.ot import Measure, wasserstein
        >>> a, b = Measure([[0.0, 0.0]]), Measure([[1.0, 0.0]])
        >>> wasserstein(a, b, order=1).name, wasserstein(a, b, method="sliced").name
        ('w1', 'sliced_w2')
        """
        return "sliced_w2" if self.method == "sliced" else f"w{self.order}"

    def __float__(self) -> float:
        return float(self.distance)


def _check_order(order) -> int:
    if isinstance(order, bool) or order not in (1, 2):
        raise InputError(f"order must be 1 or 2 (W1 or W2), got {order!r}")
    return int(order)


def _check_options(options: dict) -> dict:
    """The options of :func:`wasserstein`, each checked, before any work."""
    known = [o for names in OPTIONS.values() for o in names]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InputError(f"unknown option(s) {unknown} of wasserstein; known: {known}")
    out = dict(options)
    for name in ("k", "pool", "per_row", "max_rounds", "n_projections"):
        if name in out:
            out[name] = check_int(name, out[name])
    if "seed" in out:
        out["seed"] = check_int("seed", out["seed"], minimum=0)
    for name in ("multiscale", "return_plan"):
        if name in out and not isinstance(out[name], bool | np.bool_):
            raise InputTypeError(f"{name} must be True or False, got {out[name]!r}")
    return out


def _positive(m: Measure) -> int:
    return int(np.count_nonzero(m.weights))


def _resolve(a: Measure, b: Measure, order: int, method: str) -> str:
    """The method that runs for ``method`` (checked against the order and the dimension)."""
    method = "sparse" if method == "sparse_exact" else check_choice("method", method, METHODS)
    p = a.dim
    if method == "quantile" and p != 1:
        raise InputError(
            f"method='quantile' is exact in p = 1 only; in p = {p} use 'exact' or 'sparse'"
        )
    if method in ("sparse", "sliced") and order != 2:
        what = "the sliced W2" if method == "sliced" else "W2 (order=2); use 'exact' for W1"
        raise InputError(f"method={method!r} gives {what} only (order=2), got order={order}")
    if method not in ("auto", "exact"):
        return method
    if p == 1:
        return "quantile"
    w = resolve_w_method(p, _positive(a), _positive(b), method, order)
    return "sparse" if w == "sparse_exact" else "exact"


@declare(
    Param("order", "int", "q of W_q", low=1, high=2, choices=(1, 2)),
    Param(
        "method", "choice", "solver (auto: exact by the cheaper route, never sliced; "
        "sparse_exact is read as sparse)", choices=(*METHODS, "sparse_exact"),
    ),
)  # fmt: skip
def wasserstein(a: Measure, b: Measure, order: int = 2, method: str = "auto", **options):
    r"""The Wasserstein distance W_q(a, b), q = 1 or 2, between two measures.

    .. math::

        W_q(\mu, \nu) = \Big( \min_{\pi \in \Pi(\mu, \nu)} \int |x - y|^q \, d\pi(x, y)
        \Big)^{1/q},

    both measures normalised to mass 1 first.  The methods are described in the module
    docstring (:mod:`meanfield.ot.distance`).

    Parameters
    ----------
    a, b : Measure
        Of the same dimension p (:meth:`Measure.from_particles`,
        :meth:`Measure.from_density`, ``Measure(points, weights)``).
    order : {1, 2}
        q.
    method : {"auto", "exact", "sparse", "sliced", "quantile"}
        "auto": exact by the cheaper route (quantile in p = 1; ``ot.emd2``, or the sparse
        solver above :data:`EXACT_MAX_PAIRS` cost entries for W₂), never sliced.  "sparse"
        and "sliced" give order 2 only, "quantile" p = 1 only.  "sparse_exact" is read as
        "sparse".
    **options
        ``n_projections`` (default 200), ``seed`` (default 0): the sliced estimate's
        directions.  ``k``, ``pool``, ``per_row``, ``max_rounds``, ``multiscale``,
        ``return_plan``: the sparse solver's (:func:`meanfield.ot.sparse.w2_sparse`).  Each
        is checked first, and read only by its method.

    Returns
    -------
    TransportResult
        ``distance``, ``order``, ``method`` (the one that ran), ``lower`` ≤ W_q ≤ ``upper``
        (rounding of the float64 costs included), ``certified`` and ``details``.

    Raises
    ------
    meanfield.errors.InputError
        Before any work: a bad order, method or option; measures of different dimensions.
    meanfield.errors.InputTypeError
        ``a`` or ``b`` is not a :class:`Measure`.
    meanfield.errors.NumericalError
        W_q exceeds the float64 range (points spanning about 1e308).

    Warns
    -----
    meanfield.errors.PrecisionWarning
        The certified interval is wider than the (positive) value: float64 cannot resolve
        it at the extent of the measures (e.g. W₂ below about 1e-7 times the extent); the
        result then has ``certified=False`` and the honest ``[lower, upper]``.

    See Also
    --------
    meanfield.ot.precision.common_frame : the exact frame every method computes in.
    meanfield.ot.sparse.w2_sparse : the solver behind ``method="sparse"``.

    References
    ----------
    N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM (2002):
    Sterbenz's lemma (§2.5) and the bounds γ_k (§3.1) the certificate uses.

    Examples
    --------
    Particles at 0 against the uniform law on [−1, 1] (a density on 4 cells): W₂ = 1/√3.

    >>> import math
    >>> import meanfield as mf
    >>> grid = mf.Grid(mf.Box(1, 1.0), 4)
    >>> a, b = mf.Measure.from_particles([[0.0]]), mf.Measure.from_density(mf.Density.uniform(grid))
    >>> r = mf.wasserstein(a, b)
    >>> math.isclose(r.distance, 1 / math.sqrt(3)), r.method, r.certified
    (True, 'quantile', True)

    In the plane, the sparse solver brackets W₂ with its certificate:

    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(50, 2))
    >>> r = mf.ot.w2(mf.Measure(x), mf.Measure(x + [0.3, 0.4]), method="sparse")
    >>> round(r.distance, 9), bool(r.lower <= r.distance <= r.upper), r.method
    (0.5, True, 'sparse')
    """
    for name, m in (("a", a), ("b", b)):
        if not isinstance(m, Measure):
            raise InputTypeError(
                f"{name} must be a meanfield.ot.Measure (Measure.from_particles(omega), "
                f"Measure.from_density(rho), Measure(points, weights)), got {type(m).__name__}"
            )
    if a.dim != b.dim:
        raise InputError(f"a and b must have the same dimension p, got {a.dim} and {b.dim}")
    order = _check_order(order)
    options = _check_options(options)
    return _compute(a, b, order, _resolve(a, b, order, method), options)


def w1(a: Measure, b: Measure, method: str = "auto", **options) -> TransportResult:
    """W₁(a, b): :func:`wasserstein` with ``order=1``.

    See Also
    --------
    wasserstein : the distance, with every option.
    w2 : the order-2 distance.
    meanfield.ot.measure.Measure : the measures it compares.
    meanfield.closed_forms.wasserstein_to_law_1d : against an exact law on the line.

    References
    ----------
    - C. Villani, *Optimal Transport: Old and New*, Grundlehren 338, Springer, 2009.
    - G. Peyré, M. Cuturi, "Computational optimal transport", Found. Trends Mach. Learn. 11 (2019)
      355–607.

    Examples
    --------
    >>> from meanfield.ot import Measure, w1
    >>> w1(Measure([0.0, 1.0]), Measure([2.0, 3.0])).distance
    2.0
    """
    return wasserstein(a, b, 1, method, **options)


def w2(a: Measure, b: Measure, method: str = "auto", **options) -> TransportResult:
    """W₂(a, b): :func:`wasserstein` with ``order=2``.

    See Also
    --------
    wasserstein : the distance, with every option.
    w1 : the order-1 distance.
    meanfield.ot.measure.Measure : particles or a grid density, as measures.
    meanfield.dynamics.langevin.simulate : the particles of a run.
    meanfield.pde.solver.solve : the grid density of a run.

    References
    ----------
    - C. Villani, *Optimal Transport: Old and New*, Grundlehren 338, Springer, 2009.
    - G. Peyré, M. Cuturi, "Computational optimal transport", Found. Trends Mach. Learn. 11 (2019)
      355–607.
    - R. Flamary et al., "POT: Python Optimal Transport", JMLR 22 (2021) 1–8.

    Examples
    --------
    >>> from meanfield.ot import Measure, w2
    >>> w2(Measure([0.0, 1.0]), Measure([2.0, 3.0])).distance
    2.0
    """
    return wasserstein(a, b, 2, method, **options)


# ----------------------------------------------------------------------------------------
# the methods, on validated measures and a resolved method
# ----------------------------------------------------------------------------------------
def _centre_bias(m: Measure) -> float:
    """How far reading a density as atoms at its cell centres moves W1 or W2 (p ≥ 2)."""
    if not m.is_density or m.dim == 1:
        return 0.0
    return math.sqrt(sum(float(np.max(np.diff(e))) ** 2 for e in m.edges) / 12)


def _framed(a: Measure, b: Measure) -> tuple[Measure, Measure, Frame]:
    """Both measures in their common exact frame (:func:`meanfield.ot.precision.common_frame`)."""
    edges = [m.edges for m in (a, b) if m.is_density]
    frame = common_frame([a.points, b.points], edges)

    def move(m: Measure) -> Measure:
        e = None
        if m.is_density:
            e = tuple(frame.axis_to_frame(x, k) for k, x in enumerate(m.edges))
        return Measure(frame.to_frame(m.points), m.weights, e)

    return move(a), move(b), frame


def _compute(a: Measure, b: Measure, order: int, method: str, options: dict) -> TransportResult:
    """W_order(a, b) by a resolved method ("quantile", "exact", "sparse", "sliced"), computed in
    the common exact frame of the two measures and certified against float64 rounding."""
    details: dict = {"support": (_positive(a), _positive(b))}
    if bias := _centre_bias(a) + _centre_bias(b):
        details["centre_bias"] = bias
    fa, fb, frame = _framed(a, b)
    if method == "sliced":
        n_projections, seed = options.get("n_projections", 200), options.get("seed", 0)
        d = _sliced(fa.points, fa.weights, fb.points, fb.weights, n_projections, seed)
        details.update(n_projections=n_projections, seed=seed)
        d = frame.length(d)
        return TransportResult(d, 2, method, d, math.inf, False, details)
    if method == "quantile":
        seg_a, seg_b = quantile_segments(fa), quantile_segments(fb)
        cost, pieces = _quantile_power(seg_a, seg_b, order)
        primal, dual, terms, duals, mismatch = cost, cost, pieces + fa.size + fb.size, 0.0, 0.0
    elif method == "exact":
        primal, dual, duals, mismatch = _emd(fa.points, fa.weights, fb.points, fb.weights, order)
        terms = fa.size + fb.size
    else:
        opts = {k: v for k, v in options.items() if k in OPTIONS["sparse"]}
        opts_plan = {**opts, "return_plan": True}  # the plan and potentials for the certificate
        out = w2_sparse(fa.points, fa.weights, fb.points, fb.weights, **opts_plan)
        primal, dual = out["w2"] ** 2, out["w2_lower"] ** 2
        duals, mismatch = _plan_checks(fa.weights, fb.weights, out["u"], out["v"], out["plan"])
        terms = fa.size + fb.size
        keep = ("u", "v", "plan") if opts.get("return_plan") else ()
        skip = {"w2", "w2_lower", "method", "u", "v", "plan"} - set(keep)
        details.update((k, v) for k, v in out.items() if k not in skip)
        details["tau"] = frame.length(out["tau"], 2)
        for name in set(keep) & {"u", "v"}:  # potentials: squared lengths, translation-free
            details[name] = np.ldexp(out[name], 2 * frame.exponent)
    return _certified(primal, dual, order, method, frame, terms, duals, mismatch, a, details)


def _plan_checks(wa, wb, u, v, plan) -> tuple[float, float]:
    """S = Σ a|u| + Σ b|v| + 2 max|u| + 2 max|v| (the size of the dual objective's terms) and
    the ℓ1 distance of the plan's marginals from the normalised weights (0 for an exact plan)."""
    a, b = _probabilities(wa), _probabilities(wb)
    keep_a, keep_b = a > 0, b > 0
    ua, vb = np.abs(u[keep_a]), np.abs(v[keep_b])
    duals = float(a[keep_a] @ ua + b[keep_b] @ vb + 2 * ua.max() + 2 * vb.max())
    i, j, mass = plan
    rows = np.bincount(i, mass, minlength=len(a))
    cols = np.bincount(j, mass, minlength=len(b))
    return duals, float(np.abs(rows - a).sum() + np.abs(cols - b).sum())


def _certified(primal, dual, order, method, frame, terms, duals, mismatch, a, details):
    """The result in the unit of the points with the certificate lower ≤ W_q ≤ upper.

    In the frame: W_q^q ∈ [dual − E, primal + E + mismatch D^q], E the rounding bound of the
    float64 cost (:func:`meanfield.ot.precision.rounding_bound`); the q-th roots are rounded
    outward, widened by the scaling's displacement, then mapped back by 2^e.  A value that
    interval does not resolve (width > value) is returned with ``certified=False`` and a
    :class:`~meanfield.errors.PrecisionWarning`; a W_q beyond float64 raises
    :class:`~meanfield.errors.NumericalError`.
    """
    q, diam = order, frame.diameter
    err = rounding_bound(terms, a.dim, q, diam, duals) + mismatch * diam**q
    lo_q, hi_q = max(dual - err, 0.0), primal + err
    root = math.sqrt if q == 2 else float
    # the roots and the product round too: widen by 2u each side, then the displacement
    lo = max(root(lo_q) * (1 - 2 * UNIT_ROUNDOFF) - 2 * frame.displacement, 0.0)
    hi = root(hi_q) * (1 + 2 * UNIT_ROUNDOFF) + 2 * frame.displacement
    value = min(max(root(max(primal, 0.0)), lo), hi)
    distance = frame.length(value)
    lower, upper = frame.length(lo, rounding="down"), frame.length(hi, rounding="up")
    name = f"W{q}"
    if not math.isfinite(upper):
        raise NumericalError(
            f"{name} between these measures exceeds the float64 range (the points span about "
            f"1e{frame.exponent * math.log10(2):.0f}); rescale the points by a factor s "
            f"({name}(s a, s b) = |s| {name}(a, b)) so that their extent is below 1e300"
        )
    details["rounding"] = frame.length(hi - lo, rounding="up")
    certified = not (value > 0 and hi - lo > value)
    if not certified:
        # name what widened the interval: float64's rounding of the sums (err), or the
        # solver's own primal - dual gap (a certificate the solver did not close)
        gap = primal - dual
        why = (
            f"is not certified: the solver's dual bound is loose (primal - dual = {gap:.3g} "
            f"in {name}^{q} in the frame of extent {diam:.3g}, above the float64 rounding bound "
            f"{err:.3g})"
            if gap > err
            else "is not resolved by float64 (relative to the extent "
            f"{frame.length(diam):.6g} of the two measures)"
        )
        warnings.warn(
            f"{name} = {distance:.6g} ({method}) {why}: the certified interval "
            f"[{lower:.6g}, {upper:.6g}] is wider than the value; returned with certified=False",
            PrecisionWarning,
            stacklevel=5,  # past _compute, wasserstein and its contract wrapper
        )
    return TransportResult(distance, q, method, lower, upper, certified, details)


def _quantile_power(seg_a, seg_b, order: int) -> tuple[float, int]:
    """∫_0^1 |Q_a − Q_b|^q du for piecewise-linear quantile functions, in closed form on the
    merged breakpoints, and the number of pieces it sums."""
    ca, la, ha = seg_a
    cb, lb, hb = seg_b
    u = np.union1d(ca, cb)
    u0, u1 = u[:-1], u[1:]
    du = u1 - u0
    keep = du > 0
    u0, u1, du = u0[keep], u1[keep], du[keep]
    mid = 0.5 * (u0 + u1)

    def q(c, lo, hi, k, uu):
        span = c[k + 1] - c[k]
        return lo[k] + (uu - c[k]) / span * (hi[k] - lo[k])

    ka = np.clip(np.searchsorted(ca, mid, side="right") - 1, 0, len(la) - 1)
    kb = np.clip(np.searchsorted(cb, mid, side="right") - 1, 0, len(lb) - 1)
    d0 = q(ca, la, ha, ka, u0) - q(cb, lb, hb, kb, u0)
    d1 = q(ca, la, ha, ka, u1) - q(cb, lb, hb, kb, u1)
    if order == 2:
        total = (du * (d0 * d0 + d0 * d1 + d1 * d1) / 3.0).sum()
        return max(float(total), 0.0), len(du)
    a0, a1 = np.abs(d0), np.abs(d1)
    same = d0 * d1 >= 0
    with np.errstate(invalid="ignore", divide="ignore"):
        cross = (d0 * d0 + d1 * d1) / (2.0 * (a0 + a1))
    part = np.where(same, 0.5 * (a0 + a1), np.nan_to_num(cross))
    return float((du * part).sum()), len(du)


def _cost_matrix(xa: np.ndarray, xb: np.ndarray, order: int) -> np.ndarray:
    """|x_i − y_j|^q from the coordinate differences (relative error ≤ γ_{p+3} per entry, where
    the expansion |x|² + |y|² − 2 x·y of ``ot.dist`` loses the digits of nearby points)."""
    c = np.zeros((len(xa), len(xb)))
    for k in range(xa.shape[1]):
        d = xa[:, k, None] - xb[None, :, k]
        c += d * d
    return c if order == 2 else np.sqrt(c)


def _emd(xa, wa, xb, wb, order: int) -> tuple[float, float, float, float]:
    """W_order^order by POT's dense network simplex (``ot.emd``), zero weights dropped.

    Returns the cost of its plan (primal), the dual bound Σ a u + Σ b v − max(u_i + v_j −
    c_ij, 0) over every pair, the size S of the dual terms and the ℓ1 error of the plan's
    marginals (:func:`_plan_checks`).
    """
    keep_a, keep_b = wa > 0, wb > 0
    xa, wa, xb, wb = xa[keep_a], wa[keep_a], xb[keep_b], wb[keep_b]
    wa = np.ascontiguousarray(_probabilities(wa), dtype=np.float64)
    wb = np.ascontiguousarray(_probabilities(wb), dtype=np.float64)
    import ot  # POT, imported when used: it loads optional backends (jax: about 1 s)

    M = _cost_matrix(xa, xb, order)
    G, log = ot.emd(wa, wb, M, numItermax=EMD_MAX_ITER, log=True)
    if log.get("warning"):
        raise ConvergenceError(f"ot.emd did not solve the transport problem: {log['warning']}")
    u, v = np.asarray(log["u"], dtype=np.float64), np.asarray(log["v"], dtype=np.float64)
    violation = max(float((u[:, None] + v[None, :] - M).max()), 0.0)
    dual = float(wa @ u + wb @ v) - violation
    i, j = np.nonzero(G)
    duals, mismatch = _plan_checks(wa, wb, u, v, (i, j, G[i, j]))
    return float(np.sum(G[i, j] * M[i, j])), dual, duals, mismatch


def _sliced(xa, wa, xb, wb, n_projections: int, seed: int) -> float:
    """The sliced W2 estimate of POT (``ot.sliced_wasserstein_distance``), weights normalised."""
    import ot  # POT, imported when used

    return float(
        ot.sliced_wasserstein_distance(
            np.ascontiguousarray(xa, dtype=np.float64),
            np.ascontiguousarray(xb, dtype=np.float64),
            a=np.asarray(wa, dtype=np.float64) / np.sum(wa),
            b=np.asarray(wb, dtype=np.float64) / np.sum(wb),
            n_projections=n_projections,
            p=2,
            seed=int(seed),
        )
    )
