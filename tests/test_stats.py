"""meanfield.stats: the one t-interval, paired test, Holm adjustment and Bonferroni intervals,
against SciPy and exact hand computations."""

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


def test_paired_test_without_spread_is_certain_unless_all_zero():
    assert paired_test([0.3, 0.3, 0.3], [0.1, 0.1, 0.1])["p"] == 0.0
    assert paired_test([0.1 + 0.2, 0.3], [0.1 + 0.2, 0.3])["p"] == 1.0
    # accuracies on one test set differ by multiples of 1/n: round-off is not spread
    assert paired_test([0.7 + 0.1, 0.8], [0.1, 0.1])["sd"] == 0.0
    one = paired_test([0.5], [0.4])
    assert one["k"] == 1 and np.isnan(one["p"]) and np.isnan(one["lo"])


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
