"""Round three of the synthetic study (issue 22): the widening grid search, the paired
statistics with Holm's correction, the energy distance, the diagnosis counterfactuals, and the
study end to end on a tiny configuration."""

import numpy as np
import pytest
from scipy import stats
from sklearn.base import BaseEstimator, ClassifierMixin

from meanfield.errors import InputError
from meanfield.studies import synthetic_round3 as r3
from meanfield.studies.synthetic_diagnosis import counterfactuals, isotropy
from meanfield.studies.synthetic_search import (
    energy_distance,
    paired_family,
    paired_test,
    widen_search,
)


class _Peak(ClassifierMixin, BaseEstimator):
    """A classifier whose accuracy is a known function of its parameter ``c``: column 0 of X
    holds the label, column 1 a uniform u; it answers right where u < acc(c). The rows right
    at a larger acc are a superset of those right at a smaller one, so every fold ranks the
    parameters as acc does."""

    def __init__(self, c=0, peak=5.0, height=0.9):
        self.c = c
        self.peak = peak
        self.height = height

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def acc(self):
        return max(0.05, self.height - 0.05 * abs(self.c - self.peak))

    def predict(self, X):
        return np.where(X[:, 1] < self.acc(), X[:, 0], -X[:, 0]).astype(int)


def _peak_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.choice([-1, 1], n)
    return np.c_[y, rng.uniform(size=n)], y


def _axis(window, n=11):
    return {"name": "c", "values": [{"c": c} for c in range(n)], "window": window}


def test_widening_reaches_an_interior_optimum_and_scores_each_point_once():
    X, y = _peak_data()
    res = widen_search(_Peak(), [_axis([0, 1])], X, y)
    assert res["best"] == {"c": 5}
    assert res["edges"] == {"c": "interior"}
    assert res["windows"] == [[0, 6]]  # grew one step at a time until 5 was inside
    assert res["rounds"] == 5
    pts = [tuple(p) for p, _ in res["scores"]]
    assert sorted(pts) == [(c,) for c in range(7)]  # each point scored once


def test_widening_reports_the_end_of_the_list_and_the_round_limit():
    X, y = _peak_data()
    res = widen_search(_Peak(peak=20.0), [_axis([3, 5])], X, y)
    assert res["best"] == {"c": 10} and res["edges"] == {"c": "high end"}
    res = widen_search(_Peak(peak=-3.0), [_axis([3, 5])], X, y, max_rounds=1)
    assert res["best"] == {"c": 2} and res["edges"] == {"c": "window edge (max_rounds)"}


def test_widening_on_two_axes_grows_each_that_is_at_an_edge():
    X, y = _peak_data()
    axes = [
        _axis([0, 2]),
        {"name": "p", "values": [{"height": 0.7}, {"height": 0.9}], "window": [0, 0]},
    ]
    res = widen_search(_Peak(), axes, X, y)
    # acc = height - 0.05 |c - 5|: best at c = 5 and the larger height, the end of its list
    assert res["best"] == {"c": 5, "height": 0.9}
    assert res["edges"] == {"c": "interior", "p": "high end"}


def test_widening_refuses_bad_axes_before_work():
    X, y = _peak_data(30)
    with pytest.raises(InputError, match="window must be"):
        widen_search(_Peak(), [_axis([2, 20])], X, y)
    with pytest.raises(InputError, match="values must be a list"):
        widen_search(_Peak(), [{"name": "c", "values": [1, 2], "window": [0, 1]}], X, y)
    with pytest.raises(InputError, match="max_rounds"):
        widen_search(_Peak(), [_axis([0, 1])], X, y, max_rounds=-1)


def test_paired_test_is_scipys_one_sample_t_test():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.3, 1, 12), rng.normal(0, 1, 12)
    r = paired_test(a, b)
    ref = stats.ttest_1samp(a - b, 0.0)
    assert r["p"] == pytest.approx(ref.pvalue, rel=1e-10)
    lo, hi = ref.confidence_interval(0.95)
    assert (r["lo"], r["hi"]) == pytest.approx((lo, hi), rel=1e-10)
    # equal differences (errors are multiples of 1/n_test): zero spread, not round-off
    assert paired_test([0.3, 0.3, 0.3], [0.1, 0.1, 0.1])["sd"] == 0.0


def test_paired_family_holm_and_bonferroni():
    """Holm's step-down: sorted p_(i) times (K - i + 1), running maximum, capped at 1; the
    simultaneous interval uses t at 1 - 0.05 / (2 K)."""
    rng = np.random.default_rng(2)
    diffs = {i: rng.normal(mu, 1, 10) for i, mu in enumerate([0.0, 0.4, 1.0, 2.0])}
    rows = paired_family(diffs)
    p = np.array([stats.ttest_1samp(d, 0).pvalue for d in diffs.values()])
    order = np.argsort(p)
    expect = np.empty(4)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (4 - rank) * p[i]))
        expect[i] = running
    np.testing.assert_allclose([r["p_holm"] for r in rows], expect, rtol=1e-10)
    d = diffs[3]
    half = stats.t.ppf(1 - 0.05 / 8, 9) * d.std(ddof=1) / np.sqrt(10)
    assert rows[3]["hi_bonf"] - rows[3]["mean"] == pytest.approx(half, rel=1e-10)
    assert all(r["K"] == 4 for r in rows)


def test_energy_distance_is_scipys_squared_in_one_dimension():
    """scipy.stats.energy_distance (1-D) is the square root of 2E|X-Y| - E|X-X'| - E|Y-Y'|."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=40), rng.normal(0.5, 1.2, size=55)
    ours = energy_distance(a[:, None], b[:, None])
    assert ours == pytest.approx(stats.energy_distance(a, b) ** 2, rel=1e-10)


def test_counterfactuals_swap_norms_and_directions():
    rng = np.random.default_rng(4)
    w0, w1 = rng.normal(size=(30, 4)), 3 * rng.normal(size=(30, 4))
    cf = counterfactuals(w0, w1, d=3)

    def norms(w):
        return np.linalg.norm(w[:, :3], axis=1)

    def dirs(w):
        return w[:, :3] / norms(w)[:, None]

    np.testing.assert_allclose(norms(cf["norms_only"]), norms(w1), rtol=1e-12)
    np.testing.assert_allclose(dirs(cf["norms_only"]), dirs(w0), rtol=1e-12)
    np.testing.assert_allclose(norms(cf["directions_only"]), norms(w0), rtol=1e-12)
    np.testing.assert_allclose(dirs(cf["directions_only"]), dirs(w1), rtol=1e-12)
    for name in ("norms_only", "directions_only", "narrowed", "learned_w_prior_b"):
        np.testing.assert_array_equal(cf[name][:, 3], w0[:, 3])  # the prior phases
    assert np.median(norms(cf["narrowed"])) == pytest.approx(np.median(norms(w1)), rel=1e-12)
    assert 1.0 <= isotropy(w1, 3) <= 3.0


@pytest.mark.slow
def test_round3_study_ci_runs_resumes_and_reports(tmp_path):
    """The study end to end, tiny: every learner of a cell, the widened searches recorded with
    their edges, a rerun computes nothing, the reports are written."""
    from meanfield.studies.synthetic_round3_report import report

    kw = dict(scheduler="threads", n_workers=1, progress=False)
    cfg = {**r3.CONFIGS["ci"], "seeds": [0, 1]}
    assert r3.run_study(cfg, tmp_path, **kw)["runs_done"] == 2
    assert r3.run_study(cfg, tmp_path, **kw)["runs_done"] == 0  # resumes
    _, recs = r3.load_records(tmp_path)
    assert len(recs) == 2
    rec = recs[0]
    assert set(rec["learners"]) == set(r3.LEARNERS)
    assert {"meanfield_version", "machine", "wall_s", "noise"} <= set(rec)
    rff = rec["learners"]["rff"]
    assert rff["cv"]["edges"]["bandwidth"] in ("interior", "low end", "high end")
    assert rec["learners"]["coulomb_tempered"]["beta"] in r3.CONFIGS["full"]["betas"]
    for name in ("coulomb_linear", "coulomb_tempered"):
        row = rec["learners"][name]
        assert row["ed"] >= 0 and row["disp_redraw"] > 0
    report(tmp_path)
    for f in ("table.md", "cv_choices.md", "claims.md", "moved.md", "beta_curve.md", "table.csv"):
        assert (tmp_path / f).stat().st_size > 0


@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"settings": [[64, 0.1], [64, 0.6]]}, "settings"),
        ({"settings": [[64, 0.1], [64, 0.1]]}, "settings"),
        ({"beta_window": [0, 9]}, "beta_window"),
        ({"rho_fractions": [0.0, 2.0]}, "rho_fractions"),
        ({"base": {"n_step": 3}}, "n_steps"),
        ({"tasks": ["spiral"]}, "unknown task"),
        ({"bandwidth_window": [-3]}, "bandwidth_window"),
        ({"betas_": [1.0]}, "betas"),
    ],
)
def test_round3_config_refuses_bad_input(cfg, match):
    with pytest.raises(InputError, match=match):
        r3.check_config(cfg)
