"""Tests of meanfield.learners.tasks: each task against its defining rule, noise rates, seeds."""

import numpy as np
import pytest
from scipy import stats

from meanfield.learners import tasks as syn

BINARY_TASKS = ["radial", "checkerboard", "xor", "two_moons", "gaussian_mixture"]


@pytest.mark.parametrize("name", BINARY_TASKS)
def test_shapes_labels_and_seeds(name):
    a = syn.make_task(name, 50, 30, seed=3)
    b = syn.make_task(name, 50, 30, seed=3)
    c = syn.make_task(name, 50, 30, seed=4)
    assert a.X_train.shape[0] == 50 and a.X_test.shape[0] == 30
    assert a.X_train.shape[1] == a.X_test.shape[1]
    assert a.y_train.shape == (50,) and a.y_test.shape == (30,)
    assert set(np.unique(np.concatenate([a.y_train, a.y_test]))) <= {-1, 1}
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)  # same seed, same bits
    assert not np.array_equal(a.X_train, c.X_train)


def test_radial_rule_and_balance():
    d, n = 10, 20000
    sp = syn.radial(n, 100, d=d, seed=0)
    X = np.vstack([sp.X_train, sp.X_test])
    y = np.concatenate([sp.y_train, sp.y_test])
    np.testing.assert_array_equal(y, np.where(np.linalg.norm(X, axis=1) > np.sqrt(d), 1, -1))
    # P(y = +1) = P(chi2_d > d); binomial standard error sqrt(p(1-p)/n) ~ 0.0035, allow 5 SE
    p = stats.chi2.sf(d, d)
    assert abs(np.mean(sp.y_train == 1) - p) < 5 * np.sqrt(p * (1 - p) / n)
    # x ~ N(0, I): the sample covariance is I up to O(1/sqrt(n)) = 0.007 per entry; 5 SE
    assert np.abs(np.cov(sp.X_train.T) - np.eye(d)).max() < 5 * np.sqrt(2 / n)


@pytest.mark.parametrize("noise", [0.1, 0.3])
def test_label_noise_rate_train_only(noise):
    n = 20000
    clean = syn.radial(n, 500, d=5, seed=1)
    noisy = syn.radial(n, 500, d=5, noise=noise, seed=1)
    np.testing.assert_array_equal(clean.X_train, noisy.X_train)  # points drawn before noise
    np.testing.assert_array_equal(clean.y_test, noisy.y_test)  # test labels stay clean
    rate = np.mean(clean.y_train != noisy.y_train)
    assert abs(rate - noise) < 5 * np.sqrt(noise * (1 - noise) / n)  # 5 binomial SE
    clean5k = syn.radial(n, 5000, d=5, seed=1)
    noisy_test = syn.radial(n, 5000, d=5, noise=noise, seed=1, noisy_test=True)
    rate_test = np.mean(noisy_test.y_test != clean5k.y_test)
    assert abs(rate_test - noise) < 5 * np.sqrt(noise * (1 - noise) / 5000)


def test_multiclass_noise_goes_to_other_classes_uniformly():
    rng = np.random.default_rng(0)
    y = np.zeros(30000, dtype=int)
    out = syn.flip_labels(y, 0.3, rng, n_classes=4)
    changed = out != y
    assert abs(changed.mean() - 0.3) < 5 * np.sqrt(0.21 / 30000)
    # changed labels are uniform over the 3 other classes: chi-square test at level 1e-3
    counts = np.bincount(out[changed], minlength=4)
    assert counts[0] == 0
    assert stats.chisquare(counts[1:]).pvalue > 1e-3


def test_checkerboard_and_xor_rules():
    sp = syn.checkerboard(4000, 10, n_cells=4, d=3, seed=2)
    X, y = sp.X_train, sp.y_train
    assert np.all(np.abs(X) <= 1)
    cell = np.floor((X[:, :2] + 1) * 2).astype(int)  # 4 cells of width 1/2 per side
    np.testing.assert_array_equal(y, np.where(cell.sum(1) % 2 == 0, 1, -1))
    sx = syn.xor(4000, 10, seed=2)
    np.testing.assert_array_equal(
        sx.y_train, np.where(sx.X_train[:, 0] * sx.X_train[:, 1] > 0, 1, -1)
    )


def test_two_moons_geometry():
    sp = syn.two_moons(2000, 10, jitter=0.0, d=3, seed=5)
    X, y = sp.X_train, sp.y_train
    up, lo = X[y == 1], X[y == -1]
    np.testing.assert_allclose(np.hypot(up[:, 0], up[:, 1]), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.hypot(1 - lo[:, 0], 0.5 - lo[:, 1]), 1.0, atol=1e-12)
    assert np.all(up[:, 1] >= 0) and np.all(lo[:, 1] <= 0.5)
    np.testing.assert_array_equal(X[:, 2], 0.0)
    assert abs(np.mean(y == 1) - 0.5) < 5 * np.sqrt(0.25 / 2000)


def test_gaussian_mixture_points_near_their_class_centres():
    sp = syn.gaussian_mixture(3000, 10, d=4, n_classes=3, n_components=2, scale=1e-3, seed=0)
    centers = syn._mixture_centers(3, 2, 4, 3.0, 0)
    assert set(np.unique(sp.y_train)) == {0, 1, 2}
    dist = np.linalg.norm(sp.X_train[:, None, None, :] - centers[None], axis=-1)  # (n, C, K)
    nearest_class = np.unravel_index(dist.reshape(len(dist), -1).argmin(1), (3, 2))[0]
    np.testing.assert_array_equal(nearest_class, sp.y_train)
    # the task is fixed by center_seed, not by seed
    other = syn.gaussian_mixture(10, 10, d=4, n_classes=3, n_components=2, seed=9)
    assert other.X_train.shape == (10, 4)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"noise": 0.5}, "noise must be in"),
        ({"noise": -0.1}, "noise"),
        ({"seed": -1}, "seed"),
        ({"d": 0}, "d must be an integer >= 1"),
    ],
)
def test_bad_parameters_raise_named_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        syn.radial(10, 10, **kwargs)


def test_bad_sizes_and_names():
    with pytest.raises(ValueError, match="n_train"):
        syn.checkerboard(0, 10)
    with pytest.raises(TypeError, match="n_test"):
        syn.two_moons(10, 2.5)
    with pytest.raises(ValueError, match="n_cells"):
        syn.checkerboard(10, 10, n_cells=1)
    with pytest.raises(ValueError, match="unknown task 'spiral'"):
        syn.make_task("spiral")
