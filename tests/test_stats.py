"""meanfield.stats: the one t-interval, paired test, Holm adjustment and Bonferroni intervals,
against SciPy and exact hand computations."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as st

from meanfield.errors import InputError
from meanfield.stats import holm, paired_family, paired_test, t_interval


def test_t_interval_is_scipys_t_interval():
    x = np.random.default_rng(0).normal(size=7)
    m, lo, hi = t_interval(x, 0.9)
    ref = st.t.interval(0.9, len(x) - 1, loc=x.mean(), scale=st.sem(x))
    assert m == pytest.approx(x.mean(), rel=1e-15)
    assert (lo, hi) == pytest.approx(ref, rel=1e-13)


def test_paired_test_is_scipys_paired_t_test():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=9), rng.normal(size=9)
    r = paired_test(a, b)
    ref = st.ttest_rel(a, b)
    assert r["p"] == pytest.approx(ref.pvalue, rel=1e-10)
    assert r["k"] == 9 and r["sd"] == pytest.approx(np.std(a - b, ddof=1), rel=1e-12)
    assert (r["lo"], r["hi"]) == pytest.approx(ref.confidence_interval(0.95), rel=1e-10)


def _sign_flip_p(d) -> Fraction:
    """The two-sided sign-flip p of differences ``d`` (exact rationals) by brute force: the
    share of the 2^k sign patterns whose |sum| reaches the observed |sum|."""
    target = abs(sum(d))
    hits = sum(abs(sum(e * x for e, x in zip(eps, d, strict=True))) >= target
               for eps in itertools.product((1, -1), repeat=len(d)))  # fmt: skip
    return Fraction(hits, 2 ** len(d))


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("step", [-5, 1, 0])
def test_equal_differences_get_the_exact_sign_flip_p(k, step):
    """k equal differences of accuracies a/1066 − b/1066 (b = a − step): the p-value is the
    sign-flip test's, counted over all 2^k patterns in exact rationals (2^(1−k), or 1 for
    zero differences); no interval, sd 0."""
    a = np.arange(800, 800 + 7 * k, 7)  # correct answers on a test set of 1066 sentences
    b = a - step
    r = paired_test(a / 1066, b / 1066)
    want = _sign_flip_p([Fraction(step, 1066)] * k)
    assert want == (1 if step == 0 else Fraction(2, 2**k))
    assert r["p"] == float(want) and r["k"] == k and r["no_spread"] is True
    assert np.isnan(r["lo"]) and np.isnan(r["hi"]) and r["sd"] == 0.0
    assert r["mean"] == pytest.approx(step / 1066, rel=1e-12, abs=0)


def test_the_studys_two_equal_seeds_are_no_evidence():
    """Coulomb-distilled minus Hedgehog-loss softmaxfeat on Rotten Tomatoes: −5/1066 ≈ −0.0047
    at both of 2 seeds.  It was p = 0 with interval [−0.0047, −0.0047]; it is the sign-flip
    p = 1/2 without an interval, and in a family of 8 planned claims its Holm p is >= 1/2."""
    a, b = np.array([869, 874]) / 1066, np.array([874, 879]) / 1066
    r = paired_test(a, b)
    assert r["p"] == 0.5 and r["no_spread"] and np.isnan(r["lo"]) and np.isnan(r["hi"])
    assert r["mean"] == pytest.approx(-0.0047, abs=5e-5)
    (row,) = paired_family({"coulomb - hedgehog-loss": (a, b)}, planned=8)
    assert row["K"] == 8 and row["p_holm"] == 1.0  # min(1, 8 · 1/2)
    assert np.isnan(row["lo_bonf"]) and np.isnan(row["hi_bonf"])
    # among 7 tested comparisons with spread and strong effects, its Holm p is still >= 1/2
    rng = np.random.default_rng(4)
    fam = {f"strong{i}": rng.normal(0.05, 0.001, size=5) for i in range(7)}
    rows = paired_family({**fam, "flat": (a, b)})
    assert rows[-1]["p_holm"] >= 0.5
    assert [r["p_holm"] for r in rows] == pytest.approx(holm([r["p"] for r in rows]), rel=1e-12)
    assert all(np.isfinite(r["lo_bonf"]) and not r["no_spread"] for r in rows[:-1])


def test_paired_test_without_spread_and_its_round_off():
    # zero differences up to round-off: every sign pattern ties, p = 1
    r = paired_test([0.1 + 0.2, 0.3], [0.1 + 0.2, 0.3])
    assert r["p"] == 1.0 and r["mean"] == 0.0 and r["no_spread"]
    # accuracies on one test set differ by multiples of 1/n: round-off is not spread
    r = paired_test([0.7 + 0.1, 0.8], [0.1, 0.1])
    assert r["sd"] == 0.0 and r["p"] == 0.5 and r["no_spread"]
    one, none = paired_test([0.5], [0.4]), paired_test([np.nan], [0.4])
    assert one["k"] == 1 and np.isnan(one["p"]) and np.isnan(one["lo"]) and not one["no_spread"]
    assert none["k"] == 0 and np.isnan(none["mean"]) and none["no_spread"] is False
    with_spread = paired_test([0.3, 0.4, 0.35], [0.1, 0.1, 0.1])
    assert with_spread["no_spread"] is False and set(with_spread) == set(one) == set(none)


def test_t_interval_of_equal_values_has_no_bounds():
    """Equal replicates carry no interval (it was a width-0 interval at the value)."""
    for v, value in (([0.8, 0.8], 0.8), ([0.8] * 5, 0.8), ([-1e-13, -1e-13, np.nan], -1e-13)):
        m, lo, hi = t_interval(v)
        assert m == value and np.isnan(lo) and np.isnan(hi)
    m, lo, hi = t_interval([0.8, np.nextafter(0.8, 1.0)])  # one ulp apart: a (tiny) interval
    assert lo < m < hi


def test_holm_by_hand_and_its_properties():
    # sorted p = 0.01, 0.02, 0.03, 0.5 -> 4*0.01, 3*0.02, max(0.06, 2*0.03), max(0.06, 0.5)
    assert holm([0.03, 0.5, 0.01, 0.02]).tolist() == pytest.approx([0.06, 0.5, 0.04, 0.06])
    p = np.random.default_rng(2).uniform(size=20) ** 3
    adj = holm(p)
    assert np.all(adj >= p) and np.all(adj <= 1)
    order = np.argsort(p)
    assert np.all(np.diff(adj[order]) >= 0)  # step-down: monotone in p
    assert adj.min() == pytest.approx(min(1.0, len(p) * p.min()))  # smallest is Bonferroni's


def test_family_intervals_are_t_intervals_at_the_bonferroni_level():
    rng = np.random.default_rng(3)
    diffs = {f"c{i}": rng.normal(0.1 * i, 1.0, size=6) for i in range(4)}
    rows = paired_family(diffs)
    holm_p = holm([paired_test(d)["p"] for d in diffs.values()])
    for r, d, hp in zip(rows, diffs.values(), holm_p, strict=True):
        m, lo, hi = t_interval(d, 1 - 0.05 / 4)
        assert r["K"] == 4 and r["p_holm"] == pytest.approx(hp, rel=1e-12)
        assert (r["lo_bonf"], r["hi_bonf"]) == pytest.approx((lo, hi), rel=1e-12)


def test_family_counts_planned_claims_that_cannot_be_tested_yet():
    d = {"a": [0.01, 0.02, 0.015], "pending": [0.5]}
    alone, planned = paired_family(d), paired_family(d, planned=10)
    assert alone[0]["K"] == 1 and planned[0]["K"] == 10
    assert planned[0]["p_holm"] == pytest.approx(min(1.0, 10 * alone[0]["p"]), rel=1e-12)
    assert planned[0]["hi_bonf"] - planned[0]["lo_bonf"] > alone[0]["hi_bonf"] - alone[0]["lo_bonf"]
    assert np.isnan(planned[1]["p_holm"])
    with pytest.raises(InputError, match="planned"):
        paired_family({"a": [1.0, 2.0], "b": [1.0, 3.0]}, planned=1)
