"""The hyper-parameter searches of meanfield.learners.tuning: the widening grid search against
a classifier whose accuracy is a known function of its parameter, and the learn-or-stay rule
on hand-made search records."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from meanfield.errors import InputError
from meanfield.learners.tuning import learn_or_stay, widen_search


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


def _searched(error, *accuracies, **measured):
    """A learner row of tuned_learners: its test error, a widened search's CV record."""
    scores = [[[j], {"accuracy": a}] for j, a in enumerate(accuracies)]
    return {"ridge_test_error": error, "cv": {"scores": scores}, **measured}


_MOVED = dict(disp=0.7, disp_redraw=0.9, ed=0.05, ed_redraw=0.01, norm_ratio=0.8, iso=1.4)
_MOVED |= dict(iso_init=1.1, align_c_train=0.3, align_c_train_init=0.2, align_c_test=0.25)
_MOVED |= dict(align_c_test_init=0.22, plateau=0.01)


def test_learn_or_stay_keeps_the_particles_only_where_cv_prefers_them():
    """The rule compares the best CV accuracy of each search (not the first, not the last)."""
    rff = _searched(0.20, 0.70, 0.81, 0.75)  # best 0.81
    learned = learn_or_stay({"rff": rff, "coulomb_tempered": _searched(0.15, 0.6, 0.82, **_MOVED)})
    assert learned == {**_searched(0.15, 0.6, 0.82, **_MOVED), "learned": True}
    tempered = _searched(0.15, 0.81, 0.5, **_MOVED)  # a tie is no preference: stay
    stay = learn_or_stay({"rff": rff, "coulomb_tempered": tempered})
    assert stay["learned"] is False and stay["ridge_test_error"] == 0.20  # the draw's error
    # an unmoved cloud: no displacement, no energy distance, its start's shape and alignments
    assert (stay["disp"], stay["ed"], stay["norm_ratio"]) == (0.0, 0.0, 1.0)
    assert (stay["iso"], stay["align_c_train"], stay["align_c_test"]) == (1.1, 0.2, 0.22)
    assert stay["disp_redraw"] == 0.9 and stay["plateau"] == 0.01  # the rest is the record's
    assert tempered["ridge_test_error"] == 0.15 and tempered["disp"] == 0.7  # input untouched


def test_learn_or_stay_refuses_records_it_cannot_decide():
    with pytest.raises(InputError, match="'coulomb_tempered' and 'rff'"):
        learn_or_stay({"rff": _searched(0.2, 0.7)})
    with pytest.raises(InputError, match="cv record"):
        learn_or_stay({"rff": {"ridge_test_error": 0.2}, "coulomb_tempered": _searched(0.1, 0.8)})
    with pytest.raises(InputError, match=r"\['iso'\] without their values at the start"):
        learn_or_stay(
            {"rff": _searched(0.2, 0.7), "coulomb_tempered": _searched(0.1, 0.8, iso=2.0)}
        )
