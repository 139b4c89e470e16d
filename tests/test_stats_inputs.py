"""meanfield.stats: inputs checked by name before any work, one documented meaning for paired
data, and the edge values (tiny effects, extreme levels) right against SciPy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st

from meanfield.errors import InputError, InputTypeError
from meanfield.stats import fit_power_law, holm, paired_family, paired_test, t_interval


# ----------------------------------------------------------------------------------------
# refusals: (call, error type, the parameter the message names)
# ----------------------------------------------------------------------------------------
def _fit(**kw):
    x = np.array([10.0, 20.0, 40.0, 80.0])
    y = 3 * x[:, None] ** -0.5 * np.array([1.0, 1.1, 0.9])
    return fit_power_law(x, y, **kw)


REFUSED = [
    (lambda: holm([0.01, np.nan]), InputError, "pvalues"),
    (lambda: holm([0.01, 1.5]), InputError, "pvalues"),
    (lambda: holm([-0.2, 0.5]), InputError, "pvalues"),
    (lambda: holm([[0.01, 0.02], [0.03, 0.04]]), InputError, "pvalues"),
    (lambda: paired_test([[1.0, 2.0, 3.0], [0.0, 0.5, 1.0]]), InputError, "a must be one-dim"),
    (lambda: paired_test([1.0, 2.0], [[1.0, 2.0]]), InputError, "b must be one-dim"),
    (lambda: paired_test([1.0, 2.0, 3.0], [1.0, 2.0]), InputError, "same length"),
    (lambda: paired_test([1.0, 2.0], level=1.0), InputError, "level"),
    (lambda: paired_test([1.0, 2.0], scale=0.0), InputError, "scale"),
    (lambda: paired_family({"a": [[1, 2], [3, 4], [5, 6]]}), InputError, "diffs['a']"),
    (lambda: paired_family({"a": np.ones((4, 2))}), InputError, "shape (2, k)"),
    (lambda: paired_family({"a": ([1.0, 2.0, 3.0], [1.0, 2.0])}), InputError, "lengths 3 and 2"),
    (lambda: paired_family({"a": [1.0, 2.0]}, level=np.nan), InputError, "level"),
    (lambda: paired_family([[1.0, 2.0]]), InputError, "diffs"),
    (lambda: paired_family({"a": [1.0, 2.0]}, planned=True), InputTypeError, "planned"),
    (lambda: t_interval([1.0, 2.0], level=-0.5), InputError, "level"),
    (lambda: t_interval([1.0, 2.0], level=1.5), InputError, "level"),
    (lambda: t_interval([1.0, 2.0], level=np.nan), InputError, "level"),
    (lambda: t_interval([1.0, 2.0], level=True), InputTypeError, "level"),
    (lambda: t_interval([[1.0, 2.0], [3.0, 4.0]]), InputError, "values"),
    (lambda: _fit(n_boot=0), InputError, "n_boot"),
    (lambda: _fit(n_boot=2.5), InputTypeError, "n_boot"),
    (lambda: _fit(level=2), InputError, "level"),
    (lambda: _fit(level=0), InputError, "level"),
    (lambda: _fit(seed=-1), InputError, "seed"),
    (lambda: _fit(seed=2**70), InputError, "seed"),
    (lambda: _fit(interval="normal"), InputError, "interval"),
    (lambda: _fit(interval="t", level=1), InputError, "level"),
    (lambda: fit_power_law([1, 2, 4], [[1.0], [0.5], [0.25]], interval="t"), InputError, "S"),
    (lambda: fit_power_law([1, 2, 4], [1.0, -0.5, 0.25]), InputError, "y"),
]


@pytest.mark.parametrize("call,kind,name", REFUSED, ids=[str(i) for i in range(len(REFUSED))])
def test_bad_input_is_refused_by_name(call, kind, name):
    with pytest.raises(kind) as err:
        call()
    assert name in str(err.value)


# ----------------------------------------------------------------------------------------
# one meaning for paired data
# ----------------------------------------------------------------------------------------
def test_a_pair_given_as_rows_is_differenced_seed_by_seed():
    """``{'a': [[1, 2, 3], [0, .5, 1]]}`` is the pair a − b: differences (1, 1.5, 2), mean 1.5
    and scipy's paired t-test (it was six values of mean 1.25)."""
    a, b = [1.0, 2.0, 3.0], [0.0, 0.5, 1.0]
    ref = st.ttest_rel(a, b)
    for value in ([a, b], (a, b), np.array([a, b])):
        (row,) = paired_family({"a": value})
        assert row["k"] == 3 and row["mean"] == 1.5
        assert row["p"] == pytest.approx(ref.pvalue, rel=1e-12)
        assert (row["lo"], row["hi"]) == pytest.approx(ref.confidence_interval(0.95), rel=1e-12)


def test_one_axis_is_the_differences():
    d = np.array([0.3, -0.1, 0.4, 0.2])
    (row,) = paired_family({"d": d})
    assert row["p"] == pytest.approx(st.ttest_1samp(d, 0.0).pvalue, rel=1e-12)
    assert paired_family({"d": (0.3, 0.2)})[0]["k"] == 2  # a tuple of numbers: differences


# ----------------------------------------------------------------------------------------
# tiny effects and round-off
# ----------------------------------------------------------------------------------------
def test_a_constant_tiny_effect_gets_the_sign_flip_p():
    """A constant nonzero difference, however small, is not certain (t = ∞ under a model that
    gives equal differences with probability 0, so scipy's p = 0 is no evidence): 5 equal
    signs give the sign-flip p 2/2^5, without an interval (rounding to 12 decimals once
    turned 1e-13 into 0 and p = 1)."""
    d = np.full(5, 1e-13)
    r = paired_test(d)
    assert r["p"] == 2 / 2**5 and r["mean"] == 1e-13 and r["no_spread"]
    assert np.isnan(r["lo"]) and np.isnan(r["hi"])
    a = np.array([0.5, 0.25, 0.75, 0.6])  # 1e-13 on O(1) values: ~450 ulps, a real effect
    r = paired_test(a + 1e-13, a)
    assert r["p"] == 2 / 2**4 and r["mean"] == pytest.approx(1e-13, rel=1e-2)


def test_a_tiny_effect_with_spread_is_scipys_t_test():
    """Values of order 1e-13 (their own round-off is ~1e-29): the t-test as scipy's."""
    rng = np.random.default_rng(7)
    a, b = 1e-13 * rng.normal(1.0, 1.0, 8), 1e-13 * rng.normal(0.0, 1.0, 8)
    r, ref = paired_test(a, b), st.ttest_rel(a, b)
    assert 0 < ref.pvalue < 1 and r["p"] == pytest.approx(ref.pvalue, rel=1e-10)
    assert (r["lo"], r["hi"]) == pytest.approx(ref.confidence_interval(0.95), rel=1e-10)
    # an effect of 1e-13 with spread 3e-14 on O(1) values: far above round-off (~2e-15)
    base = rng.uniform(0.2, 0.9, 8)
    shift = 1e-13 + 3e-14 * rng.standard_normal(8)
    r, ref = paired_test(base + shift, base), st.ttest_rel(base + shift, base)
    assert 0 < ref.pvalue < 0.05
    assert r["p"] == pytest.approx(ref.pvalue, rel=1e-3)  # the sums' own round-off ~1e-3


def test_differences_zero_up_to_round_off_have_no_evidence():
    r = paired_test([0.1 + 0.2, 0.3, 0.6], [0.3, 0.3, 0.6])  # 5.6e-17, 0, 0
    assert r["p"] == 1.0 and r["mean"] == 0.0 and r["sd"] == 0.0
    # compound differences of O(1) errors, given as differences: say the scale
    d = np.array([(0.3 - 0.1) - (0.2 - 0.0), 0.0, (0.7 - 0.6) - 0.1])
    assert paired_test(d, scale=1.0)["p"] == 1.0


# ----------------------------------------------------------------------------------------
# valid edge values
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("level", [1e-6, 0.5, 0.999999])
def test_t_interval_at_extreme_levels_is_scipys(level):
    x = np.random.default_rng(1).normal(size=6)
    m, lo, hi = t_interval(x, level)
    # the quantile from the lower tail (1 - level)/2, which floating point holds exactly;
    # scipy's t.interval takes ppf((1 + level)/2), whose rounding costs 2e-11 at 0.999999
    half = -st.t.ppf((1 - level) / 2, len(x) - 1) * st.sem(x)
    assert lo < m < hi and (lo, hi) == pytest.approx((x.mean() - half, x.mean() + half), rel=1e-12)


def test_holm_at_the_edges_of_0_and_1():
    assert holm([0.0, 1.0]).tolist() == [0.0, 1.0]
    assert holm([]).tolist() == []
    assert holm([0.5, 0.5, 1.0]).tolist() == [1.0, 1.0, 1.0]


def test_fit_power_law_edges_are_accepted():
    """n_boot = 1, seed = 2⁶³ − 1 and a level near 0 or 1: exact data keep their slope, and
    the t-interval at level 0.5 is scipy's on the per-seed slopes (scipy's linregress)."""
    x = np.array([10.0, 20.0, 40.0, 80.0])
    exact = fit_power_law(x, 2 * x**-1.0, n_boot=1, seed=2**63 - 1, level=1e-9)
    assert exact["slope"] == pytest.approx(-1.0, abs=1e-12)
    y = 3 * x[:, None] ** -0.5 * np.array([1.0, 1.3, 0.8])[None] ** np.log(x)[:, None]
    fit = fit_power_law(x, y, interval="t", level=0.5)
    slopes = [st.linregress(np.log(x), np.log(y[:, s])).slope for s in range(3)]
    ref = st.t.interval(0.5, 2, loc=np.mean(slopes), scale=st.sem(slopes))
    assert (fit["ci_low"], fit["ci_high"]) == pytest.approx(ref, rel=1e-10)


def test_the_statistics_are_scale_free_to_the_ends_of_float64():
    # t intervals, paired p and τ do not depend on the unit; near 1e-320 the squares underflowed
    # (an interval of width 0, a ZeroDivisionError in paired_test) and near 1e308 the sums
    # overflowed (NaN bounds, p = NaN, τ = NaN); at 1e-200, τ read a constant chain (1.0)
    from meanfield.stats import (
        effective_sample_size,
        integrated_autocorr_time,
        paired_test,
        t_interval,
    )

    v = np.array([1.0, 2.0, 3.0])
    mean, lo, hi = t_interval(v)
    for s in (1e-320, 1e-200, 1e200):
        got = t_interval(s * v)
        np.testing.assert_allclose(
            got, (s * mean, s * lo, s * hi), rtol=1e-3 if s < 1e-300 else 1e-12
        )
    assert paired_test(1e-320 * v)["p"] == pytest.approx(paired_test(v)["p"], rel=1e-3)
    w = np.array([1.0, 1.5, 1.7])
    assert paired_test(1e308 * w)["p"] == pytest.approx(paired_test(w)["p"], rel=1e-12)
    chain = np.repeat(np.random.default_rng(0).standard_normal(250), 4)
    tau = integrated_autocorr_time(chain)
    for s in (1e-200, 1e200):
        assert integrated_autocorr_time(s * chain) == pytest.approx(tau, rel=1e-12)
    with pytest.raises(InputError, match="x must have shape"):
        effective_sample_size(5.0)
