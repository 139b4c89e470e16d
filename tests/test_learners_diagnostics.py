"""What the learned particles changed (meanfield.learners.diagnostics): the counterfactual
feature sets by hand, the energy distance against scipy's, the ridge penalty grid."""

import numpy as np
import pytest
from scipy import stats

from meanfield.errors import InputError, InputTypeError
from meanfield.learners.diagnostics import counterfactuals, energy_distance, isotropy, ridge_alphas


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


def test_energy_distance_is_scipys_squared_in_one_dimension():
    """scipy.stats.energy_distance (1-D) is the square root of 2E|X-Y| - E|X-X'| - E|Y-Y'|."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=40), rng.normal(0.5, 1.2, size=55)
    ours = energy_distance(a[:, None], b[:, None])
    assert ours == pytest.approx(stats.energy_distance(a, b) ** 2, rel=1e-10)


def test_energy_distance_refuses_clouds_it_cannot_compare():
    a = np.zeros((4, 2))
    with pytest.raises(InputError, match="one dimension p"):
        energy_distance(a, np.zeros((3, 3)))
    with pytest.raises(InputError, match="b contains 1 non-finite"):
        energy_distance(a, np.array([[0.0, np.nan]]))
    with pytest.raises(InputError, match="a is empty"):
        energy_distance(np.zeros((0, 2)), a)
    with pytest.raises(InputError, match="2-dimensional"):
        energy_distance(np.zeros(4), a)


def test_ridge_alphas_is_the_half_decade_grid_and_refuses_no_rows():
    a = ridge_alphas(40)
    np.testing.assert_allclose(np.log10(a / 40), np.arange(-12.0, 1.01, 0.5), atol=1e-12)
    with pytest.raises(InputError, match="n"):
        ridge_alphas(0)
    with pytest.raises(InputTypeError, match="n"):
        ridge_alphas(40.0)
