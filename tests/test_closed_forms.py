import numpy as np
import pytest
from scipy import integrate, stats

from meanfield.closed_forms import (
    DiskRadius,
    Semicircle,
    UniformInterval,
    equilibrium_case,
    wasserstein_to_law_1d,
)


@pytest.mark.parametrize("law", [Semicircle(), UniformInterval(), DiskRadius()])
def test_pdf_cdf_quantile_consistent(law):
    assert integrate.quad(law.pdf, law.lo, law.hi)[0] == pytest.approx(1.0, abs=1e-9)
    x = np.linspace(law.lo, law.hi, 9)
    cdf_quad = [integrate.quad(law.pdf, law.lo, t)[0] for t in x]
    np.testing.assert_allclose(law.cdf(x), cdf_quad, atol=1e-9)
    u = np.linspace(0.01, 0.99, 7)
    np.testing.assert_allclose(law.cdf(law.quantile(u)), u, atol=1e-12)


def test_w1_agrees_with_scipy():
    # scipy's W1 between the sample and a 200 001-point quantile discretisation of the law
    # differs from the exact value by < 1e-5 (the discretisation step)
    rng = np.random.default_rng(0)
    law = Semicircle()
    x = rng.normal(scale=0.6, size=300)
    xs = np.linspace(law.lo, law.hi, 400001)
    quantiles = np.interp(np.linspace(0, 1, 200001), law.cdf(xs), xs)
    ref = stats.wasserstein_distance(x, quantiles)
    assert wasserstein_to_law_1d(x, law, order=1) == pytest.approx(ref, abs=1e-4)


def test_w2_of_a_shifted_exact_sample():
    # the law's own quantiles at the centres of N bins, shifted by c: W2 ≈ c (up to O(1/N))
    law = UniformInterval()
    N = 2000
    x = law.quantile((np.arange(N) + 0.5) / N) + 0.1
    assert wasserstein_to_law_1d(x, law, order=2) == pytest.approx(0.1, abs=1e-3)


def test_cases():
    assert equilibrium_case("disk")[:2] == (0.0, 2)
    with pytest.raises(ValueError, match="case"):
        equilibrium_case("sphere")


def test_bad_closed_form_arguments_are_named_and_far_samples_do_not_overflow():
    # these raised a ZeroDivisionError, a numpy error from leggauss, or returned a negative
    # mass; a sample at 1e160 gave W₂ = inf (|x − Q|² overflows) where W₂² = 1e320 + 1/3
    from meanfield.closed_forms import (
        UniformInterval,
        default_step,
        exact_cell_masses,
        wasserstein_to_law_1d,
    )
    from meanfield.errors import InputError

    with pytest.raises(InputError, match="N \\(number of particles\\)"):
        default_step("semicircle", 0)
    with pytest.raises(InputError, match="edges"):
        exact_cell_masses("uniform", [1.0, 0.0])
    with pytest.raises(InputError, match="n_quad"):
        wasserstein_to_law_1d([0.0], UniformInterval(), n_quad=0)
    assert wasserstein_to_law_1d([1e160], UniformInterval()) == pytest.approx(1e160, rel=1e-15)
    # and the scaled sum is the same sum: one point at 0.3, W₂² = 0.3² + 1/3
    assert wasserstein_to_law_1d([0.3], UniformInterval()) == pytest.approx(
        np.sqrt(0.09 + 1 / 3), rel=1e-9
    )
