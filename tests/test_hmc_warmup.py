"""HMC's warm-up and its edges: dual averaging on a grid of log ε (so the compiled chain is the
eager chain after the default warm-up), the ceiling on ``max_leapfrog`` and the named error of
a step without a step size."""

from __future__ import annotations

import math
import shutil
import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch

import meanfield.dynamics.hamiltonian as hamiltonian_mod
import meanfield.dynamics.hmc as hmc_mod
from meanfield.domains import Box
from meanfield.dynamics.adaptation import DualAveraging
from meanfield.dynamics.hmc import HMC, sample_hmc
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.errors import InputError
from meanfield.kernels import Riesz


def _hoffman_gelman(step_size0, probs, target=0.8, gamma=0.05, t0=10.0, kappa=0.75):
    """Hoffman & Gelman (2014), Alg. 5, written out: (ε_m, ε̄_m) after each α_m."""
    mu, h, log_bar, out = math.log(10 * step_size0), 0.0, 0.0, []
    for m, a in enumerate(probs, start=1):
        h = (1 - 1 / (m + t0)) * h + (target - a) / (m + t0)
        log_eps = mu - math.sqrt(m) / gamma * h
        log_bar = m**-kappa * log_eps + (1 - m**-kappa) * log_bar
        out.append((math.exp(log_eps), math.exp(log_bar)))
    return out


def _probs(n=200, seed=0):
    return np.random.default_rng(seed).uniform(0.3, 1.0, size=n).tolist()


def test_dual_averaging_is_hoffman_gelman_rounded_to_the_grid():
    """Unrounded (grid 0) the recursion is Alg. 5 to round-off; on the default grid 2^-10 each
    step size is exp(k / 1024) for an integer k, within half a grid step (0.049 %) of it."""
    probs = _probs()
    truth = _hoffman_gelman(0.3, probs)
    plain, grid = DualAveraging(0.3, log_step_grid=0.0), DualAveraging(0.3)
    assert grid.step_size == grid.final_step_size == 0.3  # ε₀ itself before any update
    for a, (eps, bar) in zip(probs, truth, strict=True):
        assert plain.update(a) == pytest.approx(eps, rel=1e-12)
        assert plain.final_step_size == pytest.approx(bar, rel=1e-12)
        for got, want in ((grid.update(a), eps), (grid.final_step_size, bar)):
            k = math.log(got) * 1024
            assert abs(k - round(k)) < 1e-6
            assert abs(math.log(got / want)) <= 2.0**-11 * (1 + 1e-9)


def test_step_sizes_are_insensitive_to_round_off_in_the_acceptances():
    """200 updates with every acceptance perturbed by 1e-13 (the round-off between compiled and
    eager trajectories is ~1e-14): on the grid every step size is bit-identical; without it
    they differ (√m/γ amplifies the perturbation into log ε), which is what the grid removes."""
    probs = _probs(seed=1)
    for grid, identical in ((2.0**-10, True), (0.0, False)):
        a, b = DualAveraging(0.2, log_step_grid=grid), DualAveraging(0.2, log_step_grid=grid)
        steps_a = [a.update(p) for p in probs]
        steps_b = [b.update(p + 1e-13) for p in probs]
        same = steps_a == steps_b and a.final_step_size == b.final_step_size
        assert same is identical, grid


def _torch_compile_runs() -> bool:
    """Whether torch.compile with Inductor's C++ backend can build a tiny function here."""
    if not any(shutil.which(cc) for cc in ("g++", "c++", "clang++")):
        return False
    try:
        f = torch.compile(lambda x: x * 2 + 1, dynamic=False, fullgraph=True)
        return bool(f(torch.ones(3)).eq(3).all())
    except Exception:  # noqa: BLE001 - any failure to build means: cannot test here
        return False


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")
def test_compiled_chain_is_the_eager_chain_after_the_default_warm_up():
    """sample_hmc with its defaults (heuristic first step, 200 warm-up trajectories of dual
    averaging, jitter 0.1, T = 1), compiled against eager: the frozen step size is the same
    float, every Metropolis decision the same, and the recorded positions and energies agree
    to round-off (measured 1e-14; 1e-11 allows 30 more trajectories of it).  Without the grid
    the step sizes differed by 2 % and the positions by 0.58 (measured), so this fails if
    the adaptation reads the last bits again."""
    if not _torch_compile_runs():
        pytest.skip("torch.compile (Inductor, C++) cannot build here")
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 4.0))
    om0 = torch.linspace(-1.0, 1.0, 8, dtype=torch.float64)[None, :, None].repeat(2, 1, 1)
    kw = dict(beta=2.0, regime="coulomb-gas", n_samples=30, seed=4, record_every=1)
    eager = sample_hmc(E, om0, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = sample_hmc(E, om0, compile=True, **kw)
    # the compiled path ran (an energy that fails to compile would run the eager chain)
    assert not [w for w in caught if "does not compile" in str(w.message)]
    assert E not in hamiltonian_mod._NOT_FUSED and compiled.attrs["compile"] == 1
    assert compiled.attrs["n_warmup"] == 200 and compiled.attrs["jitter"] == 0.1
    assert compiled.attrs["step_size"] == eager.attrs["step_size"]
    assert compiled.attrs["warmup_accept_prob"] == pytest.approx(
        eager.attrs["warmup_accept_prob"], rel=1e-12
    )
    np.testing.assert_array_equal(compiled["acceptance_rate"], eager["acceptance_rate"])
    for k in ("omega", "energy", "energy_interaction"):
        np.testing.assert_allclose(compiled[k], eager[k], rtol=0, atol=1e-11, err_msg=k)
    assert 0.2 < eager["acceptance_rate"].values[1:].mean() < 1.0  # decisions of both kinds


def _energy():
    return Energy([QuadraticPotential()], Box(1, 2.0))


def test_max_leapfrog_above_the_ceiling_is_refused_unless_raised(monkeypatch):
    """10**12 leapfrog steps would run until killed: refused before any work, naming the
    ceiling; raising the ceiling explicitly allows it."""
    E = _energy()
    with pytest.raises(InputError, match=r"max_leapfrog must be an integer in \[1, 100000\]"):
        HMC(E, 1.0, step_size=0.1, max_leapfrog=10**12)
    with pytest.raises(InputError, match="MAX_LEAPFROG_CEILING"):
        sample_hmc(E, np.zeros((3, 1)), beta=1.0, n_samples=1, max_leapfrog=10**12)
    assert HMC(E, 1.0, step_size=0.1, max_leapfrog=100_000).max_leapfrog == 100_000
    monkeypatch.setattr(hmc_mod, "MAX_LEAPFROG_CEILING", 10**12)
    assert HMC(E, 1.0, step_size=0.1, max_leapfrog=10**12).n_leapfrog == 10


def test_a_step_without_a_step_size_is_a_named_error():
    """HMC(...).step / .advance without step_size: InputError saying what to pass (was a raw
    TypeError from torch.tensor([None]))."""
    hmc = HMC(_energy(), 1.0)
    state = hmc.init(torch.zeros(2, 3, 1), seed=0)
    for call in (lambda: hmc.step(state), lambda: hmc.advance(state, 2)):
        with pytest.raises(InputError, match=r"needs the leapfrog step size.*step_size=eps"):
            call()
    assert replace(hmc, step_size=0.1).step(state).step == 1  # what the message says to do


def test_step_after_evolve_with_new_positions_is_a_fresh_chain():
    """``evolve(omega=...)`` drops the cached U and grad U; HMC recomputes them (instead of a
    KeyError, or a step from the old positions' energy): the same trajectory, bit for bit, as
    a chain started at the new positions with the same stream."""
    import torch

    from meanfield.domains import Box
    from meanfield.dynamics.hmc import HMC
    from meanfield.energy import Energy, QuadraticPotential

    hmc = HMC(Energy([QuadraticPotential()], Box(1, 2.0)), beta=1.0, step_size=0.1)
    new = torch.full((3, 4, 1), 1.0, dtype=torch.float64)
    moved = hmc.init(torch.zeros(3, 4, 1, dtype=torch.float64), seed=0).evolve(omega=new)
    fresh = hmc.init(new, seed=0)
    for advance in (lambda s: hmc.step(s), lambda s: hmc.advance(s, 3)[0]):
        a, b = advance(moved), advance(fresh)
        assert torch.equal(a.omega, b.omega) and torch.equal(a.cache["U"], b.cache["U"])
