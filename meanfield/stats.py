"""Small statistics shared by the studies and samplers: power-law rates, Student-t intervals
and effective sample sizes.

One definition of each, imported by every module that reports a rate or an interval (the
limit studies, :mod:`meanfield.studies.limits`, and the reports of the NLP studies,
:mod:`meanfield.studies.nlp_report`, among them):

* :func:`t_interval`: the mean of replicates and its Student-t interval;
* :func:`paired_test`, :func:`holm` and :func:`paired_family`: paired differences seed by seed,
  Holm's step-down adjustment and Bonferroni's simultaneous intervals over a family of claims;
* :func:`fit_power_law`: y ≈ C x^slope in log-log, with a bootstrap interval over seeds or a
  t-interval (:func:`t_interval`) on the per-seed slopes; :func:`fit_power_law_or_undetermined`
  for sweeps that may hold too few sizes, and :func:`format_rate` to print the result;
* :func:`integrated_autocorr_time` and :func:`effective_sample_size` of Markov chains
  (re-exported by :mod:`meanfield.dynamics.hmc`, their former home).

The module imports nothing of the package but input validation and the parameter contract
(:mod:`meanfield.contract`, which declares the parameters of its functions), so any module can
use it (SciPy, for the t quantile, is imported on first use).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ._arrays import _power_of_two_unit
from ._validation import check_fit_sizes
from .contract import Param, declare
from .errors import InputError

#: Differences that agree to within ROUNDOFF_ULPS units in the last place of the differenced
#: quantities (:func:`paired_test`'s ``scale``) are equal: their spread is round-off.  A
#: compound difference such as (c − e) − (a − b) carries a few roundings of half an ulp each.
ROUNDOFF_ULPS = 16

#: The parameters the statistics share, declared once.
_LEVEL = Param("level", "level", "confidence level of the interval")
_SCALE = Param(
    "scale", "real", "magnitude of the differenced quantities, for the round-off tolerance "
    "(None: the largest |a| and |b|)", low=0.0, low_open=True, optional=True,
)  # fmt: skip


@declare(_LEVEL)
def t_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    r"""Mean and Student-t interval of ``values``; NaN bounds for fewer than 2 values, and for
    values without spread.

    The interval over the k finite values (non-finite ones are left out) is

    .. math::

        \bar v \pm t_{(1+\text{level})/2,\,k-1}\; \frac{s}{\sqrt k},
        \qquad s^2 = \frac{1}{k-1} \sum_{i=1}^k (v_i - \bar v)^2 .

    When the k ≥ 2 values are all equal (s = 0) no interval is formed: the bounds are NaN
    and the mean is that value.  The interval's model is k draws of a continuous random
    quantity, which are all equal with probability 0; equal replicates therefore come from
    discrete or deterministic data (accuracies on one test set are multiples of 1/n), where a
    width-0 interval would claim a certainty that k draws cannot give.  A caller whose
    replicates are equal by construction (a model's accuracy relative to its own, 1 at every
    seed) knows the value exactly and shows it without an interval, which the NaN bounds
    give; so no option returns ``(v, v, v)``.  Equality here is exact: the round-off tolerance
    depends on how the values were computed, which :func:`paired_test` knows (its ``scale``)
    and this function does not.

    Parameters
    ----------
    values : array_like (k,)
        Replicates (seeds, or paired differences seed by seed): one axis.
    level : float
        Confidence level of the interval, in (0, 1).

    Returns
    -------
    (mean, low, high) : tuple of float
        NaN throughout without a finite value; NaN bounds with one finite value, and with
        k ≥ 2 equal ones (no spread: the mean is then exactly that value, and a finite mean
        beside NaN bounds over k ≥ 2 values says "no spread").

    Raises
    ------
    meanfield.errors.InputError
        ``values`` is not one-dimensional, or ``level`` is not in (0, 1).

    See Also
    --------
    paired_test : the interval and test of paired differences (a sign-flip p without spread).
    fit_power_law : intervals of a fitted rate.
    meanfield.workbench.report_tables.interval : the cell it is written as.

    References
    ----------
    - Student, "The probable error of a mean", Biometrika 6 (1908) 1–25.

    Examples
    --------
    >>> from meanfield.stats import t_interval
    >>> m, lo, hi = t_interval([1.0, 2.0, 3.0])
    >>> m, round(lo, 3), round(hi, 3)
    (2.0, -0.484, 4.484)
    >>> t_interval([0.5, float("nan")])
    (0.5, nan, nan)
    >>> t_interval([0.8, 0.8, 0.8])  # no spread: no interval, not [0.8, 0.8]
    (0.8, nan, nan)
    >>> t_interval([1.0, 2.0], level=1.5)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: level must be a number in (0, 1), got 1.5
    """
    from scipy import stats

    v = _one_axis("values", values)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return float("nan"), float("nan"), float("nan")
    if len(v) < 2 or np.ptp(v) == 0:  # the mean of equal values is that value, not 1 ulp off
        return float(v[0]), float("nan"), float("nan")
    s = _power_of_two_unit(v)
    w = v / s
    m = float(w.mean())
    # the upper quantile from its tail probability: 0.5 + level/2 would round the tail away
    # for a level near 1 (0.999999: a relative error of 1e-10 in the quantile)
    half = stats.t.isf((1 - level) / 2, len(w) - 1) * w.std(ddof=1) / np.sqrt(len(w))
    return m * s, float((m - half) * s), float((m + half) * s)


def _one_axis(name: str, values) -> np.ndarray:
    """``values`` as a 1-D float64 array, or an InputError naming ``name`` (a 2-D input is
    never flattened: its rows and columns mean something the caller must say)."""
    try:
        v = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as err:
        raise InputError(f"{name} must be a 1-D array of numbers ({err})") from None
    if v.ndim != 1:
        raise InputError(f"{name} must be one-dimensional, shape (k,), got shape {v.shape}")
    return v


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error rate), in the order given.

    The i-th smallest p is multiplied by K − i + 1 (i = 1 … K), capped at 1, and made
    monotone (an adjusted p is at least every smaller p's).  Rejecting where the adjusted p is
    below α controls the probability of any false claim in the family at α.

    Parameters
    ----------
    pvalues : array_like (K,)
        One p-value per claim of the family, each in [0, 1].

    Returns
    -------
    ndarray (K,)

    Raises
    ------
    meanfield.errors.InputError
        ``pvalues`` is not one-dimensional, or holds a value outside [0, 1] or NaN (a claim
        that cannot be tested has no p-value: leave it out, or count it as p = 1 as
        :func:`paired_family` does with ``planned``).

    See Also
    --------
    paired_family : a family of paired tests, Holm-adjusted.
    paired_test : one test's p-value.

    References
    ----------
    - S. Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6
      (1979) 65–70.

    Examples
    --------
    >>> from meanfield.stats import holm
    >>> holm([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.06, 0.06]
    >>> holm([0.01, float("nan")])
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: pvalues must lie in [0, 1] (p-values), got nan at position 1
    """
    p = _one_axis("pvalues", pvalues)
    bad = np.flatnonzero(~((p >= 0) & (p <= 1)))  # NaN fails both
    if bad.size:
        raise InputError(
            f"pvalues must lie in [0, 1] (p-values), got {float(p[bad[0]])} at position {bad[0]}"
        )
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, i in enumerate(np.argsort(p)):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


@declare(_LEVEL, _SCALE)
def paired_test(a, b=None, level: float = 0.95, *, scale: float | None = None) -> dict:
    r"""Mean of a − b seed by seed, its Student-t interval and a two-sided p-value of mean 0.

    The differences d_s = a_s − b_s (s = 1 … k) are tested for mean 0 by the one-sample
    t-test (scipy's ``ttest_1samp``, or ``ttest_rel(a, b)``),

    .. math::

        t = \frac{\bar d}{s_d / \sqrt k}, \qquad p = 2\, P(T_{k-1} > |t|),

    with the interval :math:`\bar d \pm t_{(1+\text{level})/2,\,k-1}\, s_d/\sqrt k`
    (:func:`t_interval`).

    **Differences without spread.**  When the k ≥ 2 differences are all equal, s_d = 0 and
    t = ±∞; under the t-test's model (continuous differences) that happens with probability
    0, so it only arises from discrete or deterministic data (accuracies on one test set of n
    items differ by multiples of 1/n), where t = ∞ is no evidence.  The p-value is then the
    exact two-sided sign-flip (randomisation) test's, which needs no variance model: under
    H0 the differences are symmetric about 0, so each of the 2^k sign patterns
    (±d_1, …, ±d_k) is equally likely, and with every d_s = d ≠ 0 only the all-plus and
    all-minus patterns reach :math:`|\bar d| = |d|`:

    .. math::

        p = \frac{\#\{\epsilon \in \{\pm 1\}^k :
            |\tfrac1k \textstyle\sum_s \epsilon_s d_s| \ge |\bar d|\}}{2^k} = 2^{1-k},

    and p = 1 when every difference is 0 (every pattern reaches 0).  No interval can be
    formed from zero observed spread: ``lo`` and ``hi`` are NaN, ``sd`` is 0 and ``no_spread``
    is True.  The sign-flip p is never below 2^(1−k), whatever the data: at 2 seeds,
    p = 0.5 is the strongest evidence that two equal differences can give (the t-test, with
    spread, can give less at small k: it leans on normal differences).

    "Equal" allows for round-off: differences within :data:`ROUNDOFF_ULPS` units in the last
    place of ``scale`` of each other are equal, and within that of 0 are 0 (accuracies on a
    common test set differ by exact multiples of 1/n, which floating point writes with an
    error of about 1e-16).

    Parameters
    ----------
    a : array_like (k,)
        Per-seed values, or per-seed differences when ``b`` is None: one axis (a 2-D input
        is refused, never flattened; :func:`paired_family` reads a pair given as rows).
    b : array_like (k,), optional
        Subtracted pairwise (the same seeds in the same order, the same length).  Non-finite
        pairs are left out (a seed whose value is missing, NaN).
    level : float
        Confidence level of the interval, in (0, 1).
    scale : float, optional
        Magnitude of the differenced quantities, > 0, for the round-off tolerance (e.g. 1 for
        accuracies).  Default: the largest |a| and |b| (|d| when ``b`` is None).  Give it
        when ``a`` holds differences computed from larger quantities.

    Returns
    -------
    dict
        ``mean``, ``lo``, ``hi`` (:func:`t_interval`), ``sd`` (ddof = 1), ``k`` (pairs used),
        ``p`` and ``no_spread``.  With spread: the t-test's p, ``no_spread`` False.  Without
        (k ≥ 2 equal differences): the sign-flip p (2^(1−k), or 1 if all are 0), NaN ``lo``
        and ``hi``, ``sd`` = 0, ``no_spread`` True.  With fewer than two pairs: NaN ``p``,
        ``sd``, ``lo`` and ``hi``, ``no_spread`` False.

    Raises
    ------
    meanfield.errors.InputError
        ``a`` or ``b`` not one-dimensional, of different lengths; ``level`` not in (0, 1);
        ``scale`` not a finite number > 0.

    See Also
    --------
    paired_family : several comparisons at once.
    t_interval : the interval of one sample.
    meanfield.studies.nlp_report.write_report : reports that compare variants seed by seed.

    References
    ----------
    - Student, "The probable error of a mean", Biometrika 6 (1908) 1–25.
    - R. A. Fisher, *The Design of Experiments*, Oliver and Boyd, Edinburgh (1935), §21 (the
      randomisation test of paired differences by their signs).
    - E. J. G. Pitman, "Significance tests which may be applied to samples from any
      populations", J. R. Statist. Soc. Suppl. 4 (1937) 119–130.

    Examples
    --------
    >>> from meanfield.stats import paired_test
    >>> r = paired_test([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    >>> r["mean"], r["k"], round(r["hi"] - r["mean"], 4), round(r["p"], 4), r["no_spread"]
    (2.0, 3, 2.4841, 0.0742, False)

    Accuracies on one test set of 1066 items, at two seeds: the same difference −5/1066 at
    both.  No spread: the sign-flip p is 2^(1−2) = 0.5, and there is no interval.

    >>> r = paired_test([800 / 1066, 810 / 1066], [805 / 1066, 815 / 1066])
    >>> round(r["mean"], 4), r["lo"], r["hi"], r["sd"], r["p"], r["no_spread"]
    (-0.0047, nan, nan, 0.0, 0.5, True)
    >>> paired_test([1e-13, 1e-13, 1e-13, 1e-13, 1e-13])["p"]  # 5 equal signs: 2/2^5
    0.0625
    >>> paired_test([0.1 + 0.2, 0.3], [0.3, 0.3])["p"]  # zero up to round-off: no evidence
    1.0
    """
    from scipy import stats

    a = _one_axis("a", a)
    if b is None:
        d, size = a, np.abs(a)
    else:
        b = _one_axis("b", b)
        if b.shape != a.shape:
            raise InputError(
                f"a and b must have the same length (one value per seed each), got {len(a)} "
                f"and {len(b)}"
            )
        with np.errstate(invalid="ignore"):  # inf - inf: a non-finite pair, left out below
            d = a - b
        size = np.maximum(np.abs(a), np.abs(b))
    keep = np.isfinite(d)
    d, size = d[keep], size[keep]
    k = len(d)
    nan = float("nan")
    if scale is None:
        scale = float(size.max()) if k else 0.0
    tol = ROUNDOFF_ULPS * np.finfo(float).eps * scale
    no_spread = bool(k and np.ptp(d) <= tol)  # equal up to round-off
    mean = nan
    if no_spread:
        centre = float(np.median(d))
        mean = 0.0 if abs(centre) <= tol else centre
    if k < 2:
        return {"mean": mean, "lo": nan, "hi": nan, "sd": nan, "k": k, "p": nan,
                "no_spread": False}  # fmt: skip
    if no_spread:  # the exact sign-flip p: all 2^k sign patterns reach |mean| = 0 when it
        # is 0; otherwise only the all-plus and all-minus patterns reach |d|
        p = 1.0 if mean == 0.0 else 2.0 ** (1 - k)
        return {"mean": mean, "lo": nan, "hi": nan, "sd": 0.0, "k": k, "p": p,
                "no_spread": True}  # fmt: skip
    mean, lo, hi = t_interval(d, level)
    s = _power_of_two_unit(d)  # the t statistic is scale-free: formed at scale 1
    sd_scaled = float((d / s).std(ddof=1))
    sd = sd_scaled * s
    p = float(2 * stats.t.sf(abs(mean / s) / (sd_scaled / math.sqrt(k)), k - 1))
    return {"mean": mean, "lo": lo, "hi": hi, "sd": sd, "k": k, "p": p, "no_spread": False}


def _family_member(label, value) -> tuple[np.ndarray, np.ndarray | None]:
    """One value of :func:`paired_family`: ``(differences, None)`` for one axis, ``(a, b)``
    for a pair (a tuple of two samples, or rows of shape (2, k)); anything else refused."""
    where = f"diffs[{label!r}]"
    if isinstance(value, tuple) and len(value) == 2 and all(np.ndim(x) >= 1 for x in value):
        a, b = (_one_axis(f"{where}[{i}]", x) for i, x in enumerate(value))
        if a.shape != b.shape:
            raise InputError(
                f"{where}: the pair (a, b) must have one value per seed each, got lengths "
                f"{len(a)} and {len(b)}"
            )
        return a, b
    try:
        v = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as err:
        raise InputError(f"{where} must be differences (k,) or a pair (2, k) ({err})") from None
    if v.ndim == 1:
        return v, None
    if v.ndim == 2 and v.shape[0] == 2:
        return v[0], v[1]
    raise InputError(
        f"{where} must be per-seed differences, shape (k,), or a pair of samples as rows, "
        f"shape (2, k) (differences row 0 − row 1), got shape {v.shape}"
    )


@declare(
    dataclasses.replace(_LEVEL, doc="family-wise confidence of the simultaneous intervals"),
    Param(
        "planned", "int", "the number K of claims the study makes (None: those tested)", low=0,
        optional=True,
    ),
    _SCALE,
)  # fmt: skip
def paired_family(
    diffs: dict,
    level: float = 0.95,
    planned: int | None = None,
    *,
    scale: float | None = None,
) -> list[dict]:
    r"""A family of paired comparisons: Holm-adjusted p and Bonferroni simultaneous intervals.

    Each comparison is :func:`paired_test`'s; over the K claims of the family, Holm's
    step-down adjustment (:func:`holm`) of their p-values controls the family-wise error
    rate, and each Bonferroni interval is the Student-t interval at level 1 − (1 − level)/K,

    .. math::

        \bar d \pm t_{1 - (1-\text{level})/(2K),\,k-1}\; \frac{s_d}{\sqrt k},

    which hold simultaneously with probability at least ``level``.  A comparison without
    spread (:func:`paired_test`'s ``no_spread``) enters Holm with its exact sign-flip p,
    2^(1−k), and has no interval (NaN bounds): its Holm p is at least 2^(1−k), never the
    p = 0 that the t statistic's division by zero would suggest.

    Parameters
    ----------
    diffs : dict
        label -> the comparison's paired data, in one of two forms (anything else is
        refused):

        * per-seed differences, one axis, shape (k,);
        * a pair of per-seed samples (a, b), differenced a − b seed by seed: a tuple of two
          arrays of one length, or anything of shape (2, k) (row 0 minus row 1).  So
          ``{"x": [[1, 2, 3], [0, 0.5, 1]]}`` is the pair a = (1, 2, 3), b = (0, 0.5, 1):
          differences (1, 1.5, 2), mean 1.5, never six values.
    level : float
        Family-wise confidence of the simultaneous intervals, in (0, 1): each is the
        Student-t interval at 1 − (1 − level)/K.
    planned : int, optional
        The number K of claims the study makes, when it is larger than the number that can be
        tested now (a partial study): the missing ones count as p = 1 in Holm's adjustment and
        in K, so a partial study is never corrected for fewer claims than it makes.
    scale : float, optional
        :func:`paired_test`'s round-off scale, for every comparison.

    Returns
    -------
    list of dict
        One row per label, in order: :func:`paired_test`'s entries (``no_spread`` among
        them) and ``label``, ``p_holm``, ``lo_bonf``, ``hi_bonf`` and ``K``.  A comparison
        with fewer than two pairs has NaN ``p_holm`` and bounds; one without spread
        (``no_spread``) has NaN Bonferroni bounds (no interval from zero observed spread)
        and its sign-flip p (:func:`paired_test`) adjusted by Holm with the others.

    Raises
    ------
    meanfield.errors.InputError
        A value of another shape, a pair of unequal lengths, ``level`` not in (0, 1), or
        ``planned`` below the number of comparisons that can be tested.

    See Also
    --------
    paired_test : one comparison.
    holm : the adjusted p-values.
    meanfield.workbench.report_tables.family_table : the table of a family.

    References
    ----------
    - S. Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6
      (1979) 65–70.
    - O. J. Dunn, "Multiple comparisons among means", J. Amer. Statist. Assoc. 56 (1961) 52–64 (the
      Bonferroni intervals).
    - R. A. Fisher, *The Design of Experiments*, Oliver and Boyd, Edinburgh (1935), §21 (the
      sign-flip test of a comparison without spread).

    Examples
    --------
    >>> from meanfield.stats import paired_family
    >>> rows = paired_family({"x": [1.0, 1.2, 0.9], "y": [0.1, -0.1, 0.0]})
    >>> [round(r["p_holm"], 3) for r in rows], bool(rows[0]["lo_bonf"] < rows[0]["lo"])
    ([0.014, 1.0], True)
    >>> paired_family({"x": [1.0, 1.2, 0.9]}, planned=4)[0]["K"]
    4
    >>> paired_family({"a": [[1, 2, 3], [0, 0.5, 1]]})[0]["mean"]  # a pair, as rows
    1.5

    A comparison without spread (the same difference at both seeds) among 8 planned:

    >>> row = paired_family({"c": [-0.005, -0.005]}, planned=8)[0]
    >>> row["no_spread"], row["p"], row["p_holm"], row["lo_bonf"], row["hi_bonf"]
    (True, 0.5, 1.0, nan, nan)
    """
    from collections.abc import Mapping

    from scipy import stats

    if not isinstance(diffs, Mapping):
        raise InputError(f"diffs must be a dict of label -> paired data, got {type(diffs)}")
    rows = []
    for label, v in diffs.items():
        a, b = _family_member(label, v)
        rows.append({"label": label, **paired_test(a, b, level=level, scale=scale)})
    tested = [i for i, r in enumerate(rows) if np.isfinite(r["p"])]
    if planned is not None:
        if planned < len(tested):
            raise InputError(
                f"planned must be >= the {len(tested)} comparisons that can be tested, got "
                f"{planned}"
            )
    K = len(tested) if planned is None else planned
    adjusted = holm([rows[i]["p"] for i in tested] + [1.0] * (K - len(tested)))
    for r in rows:
        r.update(p_holm=float("nan"), lo_bonf=float("nan"), hi_bonf=float("nan"), K=K)
    for i, p in zip(tested, adjusted, strict=False):
        r = rows[i]
        r["p_holm"] = float(p)
        if r["no_spread"]:  # no interval from zero observed spread; its sign-flip p is in Holm
            continue
        half = stats.t.isf((1 - level) / (2 * K), r["k"] - 1) * r["sd"] / math.sqrt(r["k"])
        r.update(lo_bonf=r["mean"] - half, hi_bonf=r["mean"] + half)
    return rows


@declare(
    Param("n_boot", "int", "bootstrap resamples (checked for both intervals)", low=1),
    Param("seed", "seed", "seed of the bootstrap resamples"),
    _LEVEL,
    Param(
        "interval",
        "choice",
        "bootstrap over seeds, or Student-t on the per-seed slopes",
        choices=("bootstrap", "t"),
    ),
)
def fit_power_law(
    x, y, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95, interval: str = "bootstrap"
) -> dict:
    """Fit y ≈ C x^slope by least squares in log-log, with a CI over replicates.

    The one power-law fit of the package (:func:`meanfield.workbench.compare.fit_rate` and
    :func:`meanfield.workbench.compare.convergence_in_n` use it with ``interval="t"``).

    .. math::

        \\log y = \\log C + \\text{slope} \\cdot \\log x .

    Parameters
    ----------
    x : array (K,)
        Positive abscissae (N, β, …).
    y : array (K, S)
        S independent replicates (seeds) at each x.
    n_boot, seed : int
        Bootstrap resamples (≥ 1) and their seed (in [0, 2⁶³ − 1]), for
        ``interval="bootstrap"`` (checked for both intervals).
    level : float
        Confidence level of the interval, in (0, 1).
    interval : {"bootstrap", "t"}
        "bootstrap": the line through the seed means, CI by resampling seeds within each x
        (serves with a single replicate too).  "t": one line per seed (each seed a full
        curve), slope = their mean, Student-t CI on it (S ≥ 2); also returns ``slopes``
        and ``pooled_slope`` (least squares on all points).

    Returns
    -------
    dict with ``slope``, ``ci_low``, ``ci_high``, ``prefactor``, ``level``.

    Raises
    ------
    meanfield.errors.InputError
        Fewer than 3 distinct x (a line through two points has no error to estimate: the rate
        is undetermined), x not positive, or y not positive and finite, or not one row per x;
        ``n_boot`` < 1, ``seed`` outside [0, 2⁶³ − 1], ``level`` outside (0, 1), an unknown
        ``interval``, or ``interval="t"`` with one replicate.
    meanfield.errors.InputTypeError
        ``n_boot`` or ``seed`` not an integer, ``level`` not a real number.

    See Also
    --------
    fit_power_law_or_undetermined : the same, or undetermined for too few sizes.
    format_rate : the fitted rate as text.
    meanfield.workbench.compare.fit_rate : the rate of W against N.
    meanfield.workbench.compare.convergence_in_n : a study that fits it.

    Examples
    --------
    Exact data y = 3 x^(−1/2) give the slope and prefactor back:

    >>> import numpy as np
    >>> from meanfield.stats import fit_power_law
    >>> x = np.array([1.0, 2.0, 4.0, 8.0])
    >>> fit = fit_power_law(x, 3 * x**-0.5, n_boot=100)
    >>> round(fit["slope"], 9), round(fit["prefactor"], 9), fit["level"]
    (-0.5, 3.0, 0.95)
    """
    x = check_fit_sizes("x (sizes of the fit)", x)
    y = np.asarray(y, dtype=float)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2 or y.shape[0] != len(x):
        raise InputError(f"y must have one row per x ({len(x)}), got shape {y.shape}")
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise InputError("y must be positive and finite (fit_power_law fits log y)")
    if interval == "t":
        return _fit_per_seed(np.log(x), np.log(y), level)
    return _fit_seed_means(np.log(x), y, level, n_boot, seed)


def _fit_seed_means(lx, y, level: float, n_boot: int, seed: int) -> dict:
    """The log-log line through the seed means of y (K, S) against lx = log x; bootstrap CI
    on its slope by resampling the seeds (with replacement) within each x."""

    def slope_of(ym):
        return np.polyfit(lx, np.log(ym), 1)

    b, a = slope_of(y.mean(1))
    rng = np.random.default_rng(seed)
    S = y.shape[1]
    boots = np.array(
        [
            slope_of(np.take_along_axis(y, rng.integers(0, S, size=y.shape), axis=1).mean(1))[0]
            for _ in range(n_boot)
        ]
    )
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return {
        "slope": float(b),
        "ci_low": float(lo),
        "ci_high": float(hi),
        "prefactor": float(np.exp(a)),
        "level": level,
    }


def _fit_per_seed(lx, ly, level: float) -> dict:
    """One log-log line per seed (column of ly); Student-t CI on the mean slope."""
    S = ly.shape[1]
    if S < 2:
        raise InputError(
            f"interval='t' needs y of shape (len(x), S) with S >= 2 replicates, got S = {S}"
        )
    fits = np.array([np.polyfit(lx, ly[:, s], 1) for s in range(S)])
    slopes = fits[:, 0]
    m, lo, hi = t_interval(slopes, level)
    pooled = np.polyfit(np.repeat(lx, S), ly.ravel(), 1)[0]
    return {
        "slope": m,
        "ci_low": lo,
        "ci_high": hi,
        "prefactor": float(np.exp(fits[:, 1].mean())),
        "level": level,
        "slopes": slopes,
        "pooled_slope": float(pooled),
    }


def fit_power_law_or_undetermined(x, y, **kwargs) -> dict:
    """:func:`fit_power_law`, or NaN entries with ``status="undetermined"`` when x holds fewer
    than 3 distinct values (sweeps gather whatever sizes were asked for; the rate is then
    reported as undetermined, never as a number with an interval).

    See Also
    --------
    fit_power_law : the fit.
    format_rate : the fitted rate as text.
    meanfield.studies.limits.particles_vs_grid_in_n : rates against N of a sweep.

    Examples
    --------
    >>> from meanfield.stats import fit_power_law_or_undetermined
    >>> fit_power_law_or_undetermined([1, 2, 4], [1.0, 0.5, 0.25], n_boot=10)["status"]
    'fitted'
    >>> fit = fit_power_law_or_undetermined([1, 2], [1.0, 0.5])
    >>> fit["slope"], fit["status"]
    (nan, 'undetermined: fewer than 3 distinct sizes')
    """
    if len(np.unique(np.asarray(x, dtype=float))) < 3:
        nan = float("nan")
        return {
            "slope": nan,
            "ci_low": nan,
            "ci_high": nan,
            "prefactor": nan,
            "level": kwargs.get("level", 0.95),
            "status": "undetermined: fewer than 3 distinct sizes",
        }
    return {**fit_power_law(x, y, **kwargs), "status": "fitted"}


def format_rate(fit: dict, digits: int = 3) -> str:
    """``-0.485 [-0.492, -0.478]``, or ``undetermined (fewer than 3 sizes)``.

    See Also
    --------
    fit_power_law_or_undetermined : the fit it writes.
    meanfield.cli.output.format_rate : the command line's one-string form.

    Examples
    --------
    >>> from meanfield.stats import format_rate
    >>> format_rate({"slope": -0.485, "ci_low": -0.492, "ci_high": -0.478})
    '-0.485 [-0.492, -0.478]'
    >>> format_rate({"slope": float("nan")})
    'undetermined (fewer than 3 sizes)'
    """
    if not np.isfinite(fit["slope"]):
        return "undetermined (fewer than 3 sizes)"
    f = f"{{:+.{digits}f}}"
    return f"{f.format(fit['slope'])} [{f.format(fit['ci_low'])}, {f.format(fit['ci_high'])}]"


__all__ = [
    "holm",
    "paired_family",
    "paired_test",
    "effective_sample_size",
    "fit_power_law",
    "fit_power_law_or_undetermined",
    "format_rate",
    "integrated_autocorr_time",
    "t_interval",
]


def integrated_autocorr_time(x) -> float:
    r"""Integrated autocorrelation time τ = 1 + 2 Σ_{t≥1} ρ_t of chains, pooled.

    Geyer's initial monotone sequence estimator on the multi-chain autocorrelation of Stan and
    ArviZ (without rank normalisation or chain splitting): ρ_t = 1 − (W − ⟨γ_t⟩)/V̂, with γ_t
    each chain's autocovariance (FFT, divisor n), W the mean within-chain variance and
    V̂ = (n − 1)/n W + B/n (B/n the variance of the chain means), so chains that disagree
    inflate τ.  Pairs Γ_k = ρ_{2k} + ρ_{2k+1} are summed while positive and made
    non-increasing; τ = −1 + 2 Σ_k Γ_k.

    .. math::

        \tau = 1 + 2 \sum_{t \ge 1} \rho_t = -1 + 2 \sum_{k} \Gamma_k, \qquad
        \Gamma_k = \rho_{2k} + \rho_{2k+1}

    Parameters
    ----------
    x : array (n,) or (n, m)
        n ≥ 4 draws of m chains.

    Returns
    -------
    float
        τ (in draws); the effective sample size is n m / τ (:func:`effective_sample_size`).

    See Also
    --------
    effective_sample_size : n m / τ.
    meanfield.dynamics.hmc.sample_hmc : chains it is applied to.
    meanfield.dynamics.langevin.MALA : chains it is applied to.

    References
    ----------
    - C. J. Geyer, "Practical Markov chain Monte Carlo", Statist. Sci. 7 (1992) 473–483.
    - A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner, "Rank-normalization, folding,
      and localization: an improved R̂ for assessing convergence of MCMC", Bayesian Anal. 16 (2021)
      667–718 (the multi-chain autocorrelation).

    Examples
    --------
    Independent draws have τ ≈ 1; each draw repeated 4 times gives τ ≈ 4.

    >>> import numpy as np
    >>> from meanfield.stats import integrated_autocorr_time
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal(1000)
    >>> 0.9 < integrated_autocorr_time(x) < 1.1
    True
    >>> 3.5 < integrated_autocorr_time(np.repeat(x[:250], 4)) < 5.0
    True
    """
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 4:
        raise InputError(f"x must have shape (n,) or (n, m) with n >= 4 draws, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise InputError("x contains non-finite values (NaN or inf); all must be finite")
    n, m = x.shape
    x = x / _power_of_two_unit(x)  # τ is scale-free: no overflow near 1e308, no underflow
    xc = x - x.mean(0)
    f = np.fft.rfft(xc, n=2 * n, axis=0)
    acov = np.fft.irfft(f * np.conj(f), n=2 * n, axis=0)[:n] / n  # (n, m), divisor n
    W = acov[0].mean() * n / (n - 1)
    B_over_n = x.mean(0).var(ddof=1) if m > 1 else 0.0
    var_plus = W * (n - 1) / n + B_over_n
    if var_plus <= 0:
        return 1.0  # a constant chain: nothing to correlate (ESS as for independent draws)
    rho = 1 - (W - acov.mean(1)) / var_plus
    rho[0] = 1.0
    n_pairs = n // 2
    pairs = rho[: 2 * n_pairs].reshape(n_pairs, 2).sum(1)
    stop = np.argmax(pairs <= 0) if np.any(pairs <= 0) else n_pairs
    pairs = np.minimum.accumulate(pairs[: max(stop, 1)])
    return float(max(-1 + 2 * pairs.sum(), 1.0 / math.log10(max(n * m, 10))))


def effective_sample_size(x) -> float:
    r"""n m / τ for chains x of shape (n,) or (n, m) (see :func:`integrated_autocorr_time`).

    .. math::

        \mathrm{ESS} = \frac{n m}{\tau}

    See Also
    --------
    integrated_autocorr_time : τ.
    meanfield.dynamics.hmc.sample_hmc : chains it is applied to.
    meanfield.dynamics.chain_checks.frozen_chain_warning : a chain that did not move.

    References
    ----------
    - C. J. Geyer, "Practical Markov chain Monte Carlo", Statist. Sci. 7 (1992) 473–483.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.stats import effective_sample_size
    >>> x = np.random.default_rng(0).standard_normal(1000)
    >>> 900 < effective_sample_size(x) < 1100
    True
    >>> 200 < effective_sample_size(np.repeat(x[:250], 4)) < 300  # 1000 draws, 250 independent
    True
    """
    x = np.asarray(x, dtype=float)
    if x.ndim not in (1, 2):
        raise InputError(f"x must have shape (n,) or (n, m) with n >= 4 draws, got {x.shape}")
    size = x.shape[0] * (x.shape[1] if x.ndim == 2 else 1)
    return size / integrated_autocorr_time(x)
