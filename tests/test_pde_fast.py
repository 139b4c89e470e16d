"""The compiled 1D steppers, the second-order implicit scheme, and the solver's interface."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import expm
from scipy.sparse.linalg import spsolve

from meanfield.domains import Box
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.errors import InputError
from meanfield.kernels import Gaussian
from meanfield.pde import Density, Grid, MassTracker, McKeanVlasov, StorageTracker, _kernels, solve
from meanfield.pde.schemes import ScharfetterGummel, ScharfetterGummelMPRK, generator_matrix
from meanfield.pde.stepper import StepPlan


def _ou(n, scheme, L=5.0):
    dom = Box(1, L)
    g = Grid(dom, n)
    eq = McKeanVlasov(Energy([QuadraticPotential(1.0)], dom), g, 1.0, scheme=scheme)
    return eq, g, Density.gaussian(g, 1.0, 0.5)


# ---- the fast step equals the reference step ---------------------------------------------
@pytest.mark.parametrize("implicit", [False, True])
def test_compiled_sg_steps_equal_the_numpy_reference(implicit, rng):
    eq, g, rho0 = _ou(96, "sg-implicit" if implicit else "sg")
    rho = rho0.data * (0.5 + rng.random(g.shape))  # rough data: every face matters
    sch, U = eq.scheme, eq.potential(rho0)
    dt = 0.9 * eq.stable_dt(rho0) if not implicit else 0.05
    ref = rho.copy()
    for _ in range(40):
        if implicit:
            # independent truth: scipy's sparse LU (with pivoting) on the assembled generator
            A = generator_matrix(sch.face_rates(U), g)
            ref = spsolve((sp.identity(g.size) - dt * A).tocsc(), ref)
        else:
            out, inn = sch.flows(ref, U)  # the numpy out/in form
            ref = (ref - dt * out) + dt * inn
    fast = sch.advance_frozen(rho, U, dt, 40)
    # explicit: the same operations in the same order (equal to the last bit in practice);
    # implicit: two different LU algorithms, cond(I − Δt A) ≈ 30: 40 steps × 1e-14 relative
    np.testing.assert_allclose(fast, ref, rtol=1e-13 if not implicit else 1e-12, atol=0)


def test_mprk22_step_matches_its_definition(rng):
    # one MPRK22 step written out with dense numpy solves (Burchard, Deuflhard, Meister 2003)
    eq, g, rho0 = _ou(40, "sg-mprk22")
    rho = rho0.data * (0.5 + rng.random(g.shape))
    U, dt = eq.potential(rho0), 0.2
    A = generator_matrix(ScharfetterGummel().bind(g, 1.0).face_rates(U), g).toarray()
    I = np.eye(g.size)
    stage = np.linalg.solve(I - dt * A, rho)
    B = 0.5 * A @ np.diag(1.0 + rho / stage)
    ref = np.linalg.solve(I - dt * B, rho)
    sch = eq.scheme
    # cond(I − Δt A) ≈ 1 + Δt max rate ≈ 40: agreement to 1e-12 relative
    np.testing.assert_allclose(sch.advance(rho, U, dt), ref, rtol=1e-12, atol=1e-300)
    many = sch.advance_frozen(rho, U, dt, 5)
    one_by_one = rho
    for _ in range(5):
        one_by_one = sch.advance(one_by_one, U, dt)
    np.testing.assert_allclose(many, one_by_one, rtol=1e-13, atol=0)


# ---- order in time -----------------------------------------------------------------------
def _time_slope(errors, dts):
    return np.polyfit(np.log(dts), np.log(errors), 1)[0]


def test_mprk22_is_second_order_in_time_linear():
    # reference: the exact semi-discrete solution exp(T A) ρ0, so only the time error remains
    eq, g, rho0 = _ou(64, "sg-mprk22")
    A = generator_matrix(ScharfetterGummel().bind(g, 1.0).face_rates(eq.potential(rho0)), g)
    exact = expm(A.toarray()) @ rho0.data
    dts = np.array([0.05, 0.025, 0.0125, 0.00625])
    errs = {}
    for name in ("sg-mprk22", "sg-implicit"):
        e, _, _ = _ou(64, name)
        errs[name] = [
            np.abs(e.solve(rho0, 1.0, dt=dt).state.data - exact).sum() * g.h[0] for dt in dts
        ]
    # measured slopes 1.92 (MPRK22, successive ratios 3.6, 3.8, 3.9 → 4) and 0.99 (implicit
    # Euler); ±0.2 separates them clearly
    assert abs(_time_slope(errs["sg-mprk22"], dts) - 2.0) < 0.2, errs
    assert abs(_time_slope(errs["sg-implicit"], dts) - 1.0) < 0.2, errs
    assert errs["sg-mprk22"][-1] < 0.05 * errs["sg-implicit"][-1]


def test_mprk22_is_second_order_in_time_with_a_pair_term():
    # U depends on ρ: the stage re-evaluates U[ρ⁽¹⁾]; reference: the same scheme at Δt/32
    dom = Box(1, 3.0)
    g = Grid(dom, 48)
    E = Energy([QuadraticPotential(1.0), PairInteraction(Gaussian(0.5), 1.0)], dom)
    eq = McKeanVlasov(E, g, 2.0, scheme="sg-mprk22")
    rho0 = Density.gaussian(g, 0.8, 0.4)
    ref = eq.solve(rho0, 0.5, dt=0.05 / 32).state.data
    dts = np.array([0.1, 0.05, 0.025])
    errs = [np.abs(eq.solve(rho0, 0.5, dt=dt).state.data - ref).sum() for dt in dts]
    # measured slope 1.97; a lagged (first-order) potential would give ≈ 1
    assert abs(_time_slope(errs, dts) - 2.0) < 0.25, errs


# ---- the solver ------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme, kw", [("sg", {"safety": 0.9}), ("sg-mprk22", {"dt": 0.02})])
def test_batched_steps_equal_step_by_step(scheme, kw):
    # a MassTracker(0) needs every step, which turns the batched (compiled) path off
    eq, g, rho0 = _ou(80, scheme)
    fast = eq.solve(rho0, 0.7, trackers=[StorageTracker(0.1)], **kw)
    slow = eq.solve(rho0, 0.7, trackers=[StorageTracker(0.1), MassTracker(0)], **kw)
    assert fast.n_steps == slow.n_steps and fast.t == slow.t == 0.7
    # the compiled explicit loop does the numpy arithmetic in the same order; the implicit
    # per-step path uses the same kernels: agreement to round-off over ~100 steps
    np.testing.assert_allclose(fast.state.data, slow.state.data, rtol=1e-12, atol=1e-300)
    assert fast.dt_max == pytest.approx(slow.dt_max, rel=1e-12)


class _Relaxation:
    """A toy equation: dρ/dt = k (ρ̄ − ρ), ρ̄ the uniform density of the same mass.

    Exact: ρ(t) = ρ̄ + (ρ0 − ρ̄) e^(−kt).  Forward Euler is positive for Δt ≤ 1/k.
    """

    implicit = False
    linear = False

    def __init__(self, grid, k):
        self.grid, self.k = grid, k

    def prepare_step(self, rho):
        return StepPlan(None, None, None, 1.0 / self.k)

    def advance(self, rho, dt, plan):
        return rho + dt * self.k * (rho.mean() - rho)

    def describe(self):
        return {"equation": "relaxation", "k": self.k}


def test_solver_runs_any_equation_with_the_interface():
    g = Grid(Box(1, 1.0), 20)
    rho0 = Density.gaussian(g, 0.2, 0.3)
    eq, T, safety = _Relaxation(g, 3.0), 1.0, 0.05
    st = StorageTracker(0.25)
    res = solve(eq, rho0, T, trackers=[st], safety=safety)
    assert st.times == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert res.attrs["equation"] == "relaxation" and res.dt_max == pytest.approx(safety / 3.0)
    mean = rho0.data.mean()
    for t, d in zip(st.times, st.data, strict=True):
        exact = mean + (rho0.data - mean) * math.exp(-3.0 * t)
        # forward Euler: global error ≤ t k² Δt/2 e^(−k t(1 − kΔt))·max|ρ0 − ρ̄| ≤ 0.05 max|ρ0 − ρ̄|
        bound = t * 9.0 * (safety / 3.0) / 2 * np.abs(rho0.data - mean).max()
        assert np.abs(d - exact).max() <= bound + 1e-15


def test_solver_names_what_an_equation_lacks():
    g = Grid(Box(1, 1.0), 8)

    class Half:
        grid, implicit, linear = g, False, False

    with pytest.raises(TypeError, match="lacks prepare_step, advance, describe"):
        solve(Half(), Density.uniform(g), 1.0)
    with pytest.raises(InputError, match="zero mass"):
        solve(_Relaxation(g, 1.0), Density(g, np.zeros(8)), 1.0)


def test_density_view_checks_its_array():
    g = Grid(Box(1, 1.0), 8)
    data = np.ones(8)
    assert Density(g, data, check=False).data is data  # no copy
    with pytest.raises(ValueError, match="check=False needs a float64 array"):
        Density(g, np.ones(8, dtype=np.float32), check=False)


def test_kernels_keep_vacuum_and_mass():
    # vacuum cells next to full ones, extreme rates: the subtraction-free solve stays ≥ 0
    rng = np.random.default_rng(3)
    M = 200
    rho = rng.random(M) * (rng.random(M) > 0.5)
    c_lr, c_rl = 10.0 ** rng.uniform(-8, 8, M - 1), 10.0 ** rng.uniform(-8, 8, M - 1)
    for dt in (1e-6, 1.0, 1e8):
        out = _kernels.mprk22_steps(rho, c_lr, c_rl, dt, 3)
        assert out.min() >= 0.0
        # each solve: O(M ε) relative mass error for every Δt; three steps, two solves each
        assert abs(out.sum() - rho.sum()) <= 6 * M * 1.2e-16 * rho.sum()


def test_mprk22_needs_no_stable_step_for_positivity():
    eq, g, rho0 = _ou(64, "sg-mprk22")
    # 1000 × the explicit bound: still positive and conservative
    big = 1000 * ScharfetterGummel().bind(g, 1.0).stable_dt(rho0.data, eq.potential(rho0))
    res = eq.solve(rho0, 10 * big, dt=big)
    assert res.state.data.min() >= 0 and abs(res.state.mass - 1.0) < 1e-13
    assert isinstance(eq.scheme, ScharfetterGummelMPRK) and eq.scheme.time_order == 2


@pytest.mark.parametrize("scheme", ["sg-implicit", "sg-mprk22"])
def test_frozen_2d_steps_reuse_the_factorisation(scheme, rng):
    # 2D: one sparse LU for all the steps must give the step-by-step result
    dom = Box(2, 2.0)
    g = Grid(dom, 12)
    eq = McKeanVlasov(Energy([QuadraticPotential(1.0)], dom), g, 2.0, scheme=scheme)
    rho = Density.gaussian(g, 0.3, 0.5).data * (0.5 + rng.random(g.shape))
    U, sch = eq.potential(rho), eq.scheme
    one_by_one = rho
    for _ in range(6):
        one_by_one = sch.advance(one_by_one, U, 0.05)
    # the same factorisation algorithm on the same matrix: agreement to round-off
    np.testing.assert_allclose(
        sch.advance_frozen(rho, U, 0.05, 6), one_by_one, rtol=1e-13, atol=1e-300
    )


def test_the_operator_gives_the_evolution_rate(rng):
    dom = Box(2, 2.0)
    g = Grid(dom, 10)
    E = Energy([QuadraticPotential(1.0), PairInteraction(Gaussian(0.5), 0.3)], dom)
    rho = Density.gaussian(g, 0.2, 0.6).data * (0.5 + rng.random(g.shape))
    eq = McKeanVlasov(E, g, 3.0, scheme="sg")
    rate = eq.evolution_rate(rho)
    # the same face rates, applied as a sparse matrix instead of the out/in scatter
    np.testing.assert_allclose(
        (eq.operator(rho) @ rho.ravel()).reshape(g.shape), rate, rtol=1e-12, atol=1e-12
    )
    with pytest.raises(TypeError, match="no linear operator"):
        McKeanVlasov(E, g, 3.0, scheme="upwind").operator(rho)


def _ou2d(n=12, scheme="sg-mprk22-split"):
    dom = Box(2, 3.0)
    g = Grid(dom, n)
    eq = McKeanVlasov(Energy([QuadraticPotential(1.0)], dom), g, 1.0, scheme=scheme)
    return eq, g, Density.gaussian(g, [0.8, -0.4], [0.5, 0.7])


def test_split_mprk22_is_second_order_and_positive_in_2d():
    # reference: exp(T A) ρ0 of the full 2D generator; Strang splitting + MPRK22: O(Δt²)
    eq, g, rho0 = _ou2d()
    exact = (expm(eq.operator(rho0).toarray() * 0.5) @ rho0.data.ravel()).reshape(g.shape)
    dts = np.array([0.025, 0.0125, 0.00625])
    errs = [np.abs(eq.solve(rho0, 0.5, dt=dt).state.data - exact).sum() for dt in dts]
    # splitting and MPRK22 errors both O(Δt²); measured slope 1.9 here (1.81 over
    # Δt = 0.05 … 0.0125, successive ratios 3.4, 3.7 → 4); ±0.25
    assert abs(_time_slope(errs, dts) - 2.0) < 0.25, errs
    for dim, n in [(2, 16), (3, 8)]:
        dom = Box(dim, 2.0)
        g = Grid(dom, n)
        sch = ScharfetterGummelMPRK(split=True).bind(g, 4.0)
        rho = Density.gaussian(g, 0.3, 0.2).data
        U = 3.0 * (g.centers**4).sum(1).reshape(g.shape)  # steep: rates up to ~1e3
        for dt in (1e-3, 1.0, 1e6):
            new = sch.advance(rho, U, dt)
            # every line is a subtraction-free tridiagonal solve: ≥ 0, mass to O(M ε)
            assert new.min() >= 0.0 and abs(new.sum() - rho.sum()) <= 1e-13 * rho.sum()


@pytest.mark.parametrize("shape", [(1,), (7,), (5, 4), (3, 4, 2)])
def test_total_and_min_matches_numpy(shape, rng):
    rho = rng.random(shape) - 0.1
    total, low = _kernels.total_and_min(rho)
    assert total == pytest.approx(rho.sum(), rel=1e-14) and low == rho.min()
    assert _kernels.total_and_min(np.asfortranarray(rho))[1] == rho.min()  # any layout
    rho.flat[-1] = np.nan
    total, low = _kernels.total_and_min(rho)
    assert math.isnan(total)  # the caller's finiteness test sees the NaN
