"""Issue 11: property-based tests (hypothesis) over the public entry points.

Finite input never gives a silent NaN; invalid input (non-finite, empty, zero mass) gives the
documented :class:`~meanfield.errors.InputError`.  Example counts are small so the file runs
in a few seconds; the strategies cover the awkward corners (coincident points, points on the
boundary, tiny and huge steps and temperatures).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from meanfield.domains import Box
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.errors import InputError
from meanfield.kernels import Riesz

FAST = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
#: fewer examples where one example runs a simulation or a solve
SLOW = settings(FAST, max_examples=8)
R = 2.0
coord = st.floats(-R, R, allow_nan=False, allow_infinity=False, width=64)


def particles(p: int, n_min: int = 1, n_max: int = 8):
    return st.integers(n_min, n_max).flatmap(lambda n: arrays(np.float64, (n, p), elements=coord))


def _energy(p: int, s: float, lam: float) -> Energy:
    return Energy([QuadraticPotential(1.0), PairInteraction(Riesz(s, 0.05), lam)], Box(p, R))


def _with_bad_value(x: np.ndarray, bad: float, where: int) -> np.ndarray:
    y = x.copy()
    y.flat[where % y.size] = bad
    return y


bad_value = st.sampled_from([np.nan, np.inf, -np.inf])


# ---- Energy --------------------------------------------------------------------------------
@FAST
@given(
    p=st.integers(1, 2),
    data=st.data(),
    s=st.sampled_from([-1.0, 0.0, 0.5]),
    lam=st.floats(0.0, 10.0),
)
def test_energy_of_finite_particles_is_finite(p, data, s, lam):
    omega = data.draw(particles(p, n_min=2))
    E = _energy(p, s, lam)
    v, g = E.value_and_grad(omega)
    assert torch.isfinite(v).all() and torch.isfinite(g).all()


@FAST
@given(omega=particles(1, n_min=2), bad=bad_value, where=st.integers(0, 100))
def test_energy_refuses_non_finite_particles(omega, bad, where):
    with pytest.raises(ValueError, match="omega"):
        _energy(1, 0.0, 1.0).value(_with_bad_value(omega, bad, where))


# ---- simulate ------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::meanfield.errors.PinnedParticlesWarning")  # huge steps
@SLOW
@given(
    omega=particles(1, n_min=2, n_max=6),
    eta=st.floats(1e-5, 10.0),
    beta=st.floats(1e-3, 1e6),
    regime=st.sampled_from(["mean-field", "coulomb-gas"]),
)
def test_simulate_keeps_finite_particles_in_the_domain(omega, eta, beta, regime):
    from meanfield.dynamics.langevin import simulate

    ds = simulate(_energy(1, 0.0, 0.5), omega, eta=eta, beta=beta, n_steps=3, regime=regime, seed=0)
    om = ds["omega"].values
    assert np.isfinite(om).all() and np.abs(om).max() <= R * (1 + 1e-12)
    assert all(np.isfinite(ds[k].values).all() for k in ds.data_vars if k.startswith("energy"))


# ---- Density and solve --------------------------------------------------------------------
positive_cells = arrays(np.float64, 16, elements=st.floats(0.0, 1e3, width=64))


@SLOW
@given(rho=positive_cells, t=st.floats(1e-3, 0.05))
def test_solve_of_a_finite_density_stays_finite_and_conservative(rho, t):
    from meanfield.pde import Density, Grid, McKeanVlasov, solve

    grid = Grid(Box(1, R), 16)
    if not rho.sum() > 0:
        with pytest.raises(InputError, match="zero mass"):
            solve(McKeanVlasov(_energy(1, -1.0, 0.5), grid, 1.0), Density(grid, rho), t)
        return
    state = Density(grid, rho)
    res = solve(McKeanVlasov(_energy(1, -1.0, 0.5), grid, 1.0), state, t)
    assert np.isfinite(res.state.data).all() and res.state.data.min() >= 0
    assert res.state.mass == pytest.approx(state.mass, rel=1e-9)


@FAST
@given(rho=positive_cells, bad=bad_value, where=st.integers(0, 15))
def test_density_refuses_non_finite_values(rho, bad, where):
    from meanfield.pde import Density, Grid

    with pytest.raises(ValueError, match="non-finite"):
        Density(Grid(Box(1, R), 16), _with_bad_value(rho, bad, where))


# ---- diagnostics ----------------------------------------------------------------------------
@SLOW
@given(omega=particles(1, n_max=30), order=st.sampled_from([1, 2]))
def test_distances_of_finite_samples_are_finite(omega, order):
    from meanfield.closed_forms import equilibrium_case, wasserstein_to_law_1d
    from meanfield.ot import Measure, wasserstein
    from meanfield.pde import Density, Grid

    rho = Density.gaussian(Grid(Box(1, R), 32), 0.0, 0.5)
    w = wasserstein(Measure.from_particles(omega), Measure.from_density(rho), order).distance
    assert np.isfinite(w) and w >= 0
    law = equilibrium_case("uniform")[2]
    assert np.isfinite(wasserstein_to_law_1d(omega[:, 0], law, order=order))


@FAST
@given(omega=particles(2, n_max=20), bad=bad_value, where=st.integers(0, 100))
def test_distances_refuse_non_finite_or_empty_samples(omega, bad, where):
    from meanfield.ot import Measure

    bad_omega = _with_bad_value(omega, bad, where)
    with pytest.raises(InputError, match="omega"):
        Measure.from_particles(bad_omega)
    with pytest.raises(InputError, match="points"):
        Measure(bad_omega, np.ones(len(omega)))
    with pytest.raises(InputError, match="empty"):
        Measure.from_particles(omega[:0])


# ---- linear attention --------------------------------------------------------------------------
@FAST
@given(
    L=st.integers(1, 6),
    scale=st.floats(1e-6, 1e6),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_linear_attention_of_finite_features_is_finite(L, scale, causal, seed):
    from meanfield.attention.linear import linear_attention

    g = torch.Generator().manual_seed(seed)
    q = torch.rand(1, L, 2, 4, generator=g) * scale
    k = torch.rand(1, L, 2, 4, generator=g) * scale
    v = torch.randn(1, L, 2, 3, generator=g)
    out = linear_attention(q, k, v, causal=causal)
    assert out.shape == (1, L, 2, 3) and torch.isfinite(out).all()


@FAST
@given(
    L=st.integers(1, 6),
    bad=bad_value,
    where=st.integers(0, 200),
    which=st.sampled_from(["q_features", "k_features", "v"]),
    causal=st.booleans(),
)
def test_linear_attention_refuses_non_finite_input(L, bad, where, which, causal):
    from meanfield.attention.linear import linear_attention

    g = torch.Generator().manual_seed(where)
    args = {
        "q_features": torch.rand(1, L, 2, 4, generator=g),
        "k_features": torch.rand(1, L, 2, 4, generator=g),
        "v": torch.randn(1, L, 2, 3, generator=g),
    }
    t = args[which]
    t.view(-1)[where % t.numel()] = bad
    with pytest.raises(InputError, match=which):
        linear_attention(**args, causal=causal)


@FAST
@given(
    L=st.integers(1, 5),
    bad=bad_value,
    where=st.integers(0, 200),
    which=st.sampled_from(["query", "key", "value"]),
    feature=st.sampled_from(["softmax", "porf", "favor"]),
)
def test_kernel_attention_module_refuses_non_finite_input(L, bad, where, which, feature):
    from meanfield.attention import KernelAttention

    attn = KernelAttention(8, 2, feature=feature, n_features=8)
    g = torch.Generator().manual_seed(where)
    x = {k: torch.randn(2, L, 8, generator=g) for k in ("query", "key", "value")}
    x[which].view(-1)[where % x[which].numel()] = bad
    with pytest.raises(InputError, match=which):
        attn(x["query"], x["key"], x["value"])
