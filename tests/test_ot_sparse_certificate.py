"""The certificate of the sparse exact W₂ solver on grid-like measures, against POT's dense
network simplex.

The defect these tests pin down: POT's sparse network simplex (LEMON) returns potentials
carrying a common offset of ± its artificial arc cost, (max c + 1) × (number of nodes), which
grows with every warm start (3·10⁵ at 2 × 16 384 atoms against costs ≤ 8).  The reduced
costs are unchanged by it, but the certificate was not: its rounding tolerance τ₀ and the
rounding bound of :func:`meanfield.ot.distance.wasserstein` scale with max|u| + max|v|, so on
256² sub-cells the certified interval of a W₂ of 0.0033 was [0, 0.020].  The measures here
look like the grid densities of the N-limit studies: many atoms of tiny mass (down to 1e-16),
atoms of exactly zero mass, cells split into sub-cells of exactly equal mass (a degenerate
transport problem), a flat against a peaked law.

Truth: ``ot.emd2`` on the dense cost matrix (a different code path of the same LP: no
support, no pricing, no multiscale).  Both values are float64 sums Σ π_ij c_ij of optimal plans
with ≤ N + M − 1 entries π ≤ 1 and costs ≤ D², so they agree to 4 (N + M) ε D² on W₂²
(rounding of each entry, its cost and the sum); a wrong support or dual misses by ≫ 1e-6.
"""

import functools
import math

import numpy as np
import ot
import pytest

from meanfield.ot import Measure, wasserstein
from meanfield.ot.precision import gamma
from meanfield.ot.sparse import DUAL_TOL, w2_sparse

EPS = 2.0**-52


def _centres(n: int) -> np.ndarray:
    """Centres (n², 2) of the n × n cells of [−1, 1]²."""
    g = -1.0 + (np.arange(n) + 0.5) * (2.0 / n)
    x, y = np.meshgrid(g, g, indexing="ij")
    return np.stack([x.ravel(), y.ravel()], axis=1)


def _gaussian(x: np.ndarray, centre, sd: float) -> np.ndarray:
    w = np.exp(-((x - np.asarray(centre)) ** 2).sum(1) / (2 * sd**2))
    return w / w.sum()


def _split_vs_fine():
    """A 16² cell density split 2 × 2 (1024 atoms, equal masses in fours) against the same
    law on 64² cells shifted by 0.01 (4096 atoms): the grid-refinement comparison in small.
    Masses down to 4e-10.  The old certificate was 4.4e-5 wide relative to W₂ here."""
    coarse = _gaussian(_centres(16), (0.0, 0.0), 0.25)
    xa = _centres(32)
    cell = np.floor((xa + 1.0) / (2.0 / 16)).astype(int)
    wa = coarse[cell[:, 0] * 16 + cell[:, 1]] / 4
    xb = _centres(64)
    return xa, wa, xb, _gaussian(xb, (0.01, 0.0), 0.25)


def _peaked_vs_flat():
    """A peaked law on 40² cells (masses from 1e-16 up, the 128 below 1e-16 exactly 0: the
    corners) against the uniform law on 32² cells."""
    xa = _centres(40)
    wa = _gaussian(xa, (0.2, -0.1), 0.15)
    wa[wa < 1e-16] = 0.0
    xb = _centres(32)
    return xa, wa, xb, np.full(len(xb), 1.0 / len(xb))


CASES = {"split_vs_fine": _split_vs_fine, "peaked_vs_flat": _peaked_vs_flat}


@functools.cache
def _solved(case: str):
    """The case, its dense W₂² by ot.emd2, and w2_sparse's result with the plan."""
    xa, wa, xb, wb = CASES[case]()
    a, b = wa / wa.sum(), wb / wb.sum()
    dense = ot.emd2(a, b, ot.dist(xa, xb), numItermax=10**8)
    return (xa, a, xb, b), float(dense), w2_sparse(xa, a, xb, b, return_plan=True)


def _diameter2(xa, xb) -> float:
    both = np.vstack([xa, xb])
    return float(((both.max(0) - both.min(0)) ** 2).sum())


def test_the_cases_are_grid_like():
    """The cases hold what made the certificate fail: zero and tiny masses, equal masses."""
    xa, wa, _, _ = _peaked_vs_flat()
    assert (wa == 0).sum() > 100 and 0 < wa[wa > 0].min() < 1e-15
    xa, wa, _, wb = _split_vs_fine()
    assert len(np.unique(wa)) <= len(wa) // 4 and wb.min() < 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_value_equals_dense_emd_and_interval_contains_it(case):
    """w2_sparse's value is ot.emd2's to the rounding of the two sums (module docstring), and
    the certified interval of wasserstein(method="sparse") contains the dense value (widened
    by that rounding, the only error of the truth) and is certified."""
    (xa, a, xb, b), dense, got = _solved(case)
    n, m = int((a > 0).sum()), int((b > 0).sum())
    rounding = 4 * (n + m) * EPS * _diameter2(xa, xb)
    assert abs(got["w2"] ** 2 - dense) <= rounding
    r = wasserstein(Measure(xa, a), Measure(xb, b), method="sparse")
    assert r.certified
    assert r.lower**2 <= dense + rounding and dense - rounding <= r.upper**2


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_certificate_is_feasible_everywhere_and_tight(case):
    """The returned potentials: feasible over every pair of the dense matrix up to the
    rounding tolerance τ₀ they were certified with, at the size of the costs (not LEMON's
    offset), and their dual objective within τ₀ + rounding of the dense optimum.

    Size: u = v^c and v = u^c oscillate by ≤ D² each; they are centred so that median u ≈
    median v =: μ, and u_i + v_j = c_ij ∈ [0, D²] on the plan, so |μ| ≤ 1.5 D² and
    max|u|, max|v| ≤ 2.5 D².  The old code returned max|u| = 1.5·10³ D² on split_vs_fine.
    Gap: weak duality gives Σ a u + Σ b v − τ₀ ≤ W₂²; the optimal duals reach W₂², so the
    gap is τ₀ plus the rounding of the two sums (≤ 4 (N + M) ε D², as above).  The old gap
    was τ₀ with the offset in it: 2.3e-9 on split_vs_fine, 2500 times the new one.
    """
    (xa, a, xb, b), dense, got = _solved(case)
    live_a, live_b = a > 0, b > 0
    u, v = got["u"][live_a], got["v"][live_b]
    d2 = _diameter2(xa, xb)
    assert np.abs(u).max() <= 2.5 * d2 and np.abs(v).max() <= 2.5 * d2
    tau0 = DUAL_TOL * (1.0 + d2 + np.abs(u).max() + np.abs(v).max())
    r = ((xa[live_a, None, :] - xb[None, live_b, :]) ** 2).sum(-1) - u[:, None] - v[None, :]
    assert r.min() >= -tau0
    rounding = 4 * (live_a.sum() + live_b.sum()) * EPS * d2
    dual = float(a[live_a] @ u + b[live_b] @ v)
    assert dual <= dense + rounding  # weak duality against the independent optimum
    assert got["w2"] ** 2 - got["w2_lower"] ** 2 <= tau0 + rounding
    assert got["w2_lower"] ** 2 <= dense + rounding
    assert np.isnan(got["u"][~live_a]).all()


def test_translate_is_certified_to_its_closed_form():
    """W₂(μ, μ(· − δ)) = |δ| for any μ (the translation is a gradient of a convex function):
    a 48² Gaussian grid law (masses down to 1e-9) against its translate by |δ| = 1e-3, its
    interval contains |δ| (to the rounding of x + δ, ≤ 2ε per coordinate) and is as narrow
    as the rounding bound of wasserstein allows: 2 γ_K (2 D² + S) (precision.rounding_bound,
    K = N + M + 18, S = Σ a|u| + Σ b|v| + 2 max|u| + 2 max|v| ≤ 6 × 2.5 D² by the potentials'
    size, test above) plus the solver's τ₀ ≤ DUAL_TOL (1 + 6 D²)."""
    xa = _centres(48)
    w = _gaussian(xa, (0.0, 0.0), 0.25)
    delta = np.array([0.6e-3, 0.8e-3])
    r = wasserstein(Measure(xa, w), Measure(xa + delta, w), method="sparse")
    slack = 4 * EPS  # |fl(x + δ) − (x + δ)| ≤ ε |x + δ| ≤ 2ε per coordinate
    assert r.certified
    assert r.lower - slack <= 1e-3 <= r.upper + slack
    d2 = _diameter2(xa, xa + delta)
    width = 2 * gamma(2 * len(xa) + 18) * (2 + 15) * d2 + DUAL_TOL * (1 + 6 * d2)
    assert r.upper**2 - r.lower**2 <= width
    assert math.isclose(r.distance, 1e-3, rel_tol=1e-9)


def test_covering_gives_every_point_its_nearest_partner():
    """A support that leaves points without a pair (the refined support does, for the cells
    of tiny-mass atoms the coarse plan dropped) gains exactly one pair per such point, its
    nearest partner (brute force here), and keeps every pair it had."""
    from scipy.spatial import cKDTree

    from meanfield.ot.sparse import _covering

    rng = np.random.default_rng(5)
    xa, xb = rng.normal(size=(40, 2)), rng.normal(size=(30, 2))
    m = len(xb)
    keys = np.unique(rng.integers(0, 20, 25) * m + rng.integers(0, 15, 25))  # rows ≥ 20 bare
    got = _covering(keys, xa, xb, cKDTree(xa), cKDTree(xb))
    assert np.isin(keys, got).all()
    new = np.setdiff1d(got, keys)
    lone_a = np.setdiff1d(np.arange(len(xa)), keys // m)
    lone_b = np.setdiff1d(np.arange(m), keys % m)
    d2 = ((xa[:, None, :] - xb[None, :, :]) ** 2).sum(-1)
    want = np.union1d(lone_a * m + d2[lone_a].argmin(1), d2[:, lone_b].argmin(0) * m + lone_b)
    assert len(lone_a) >= 20 and len(lone_b) >= 15
    assert np.array_equal(new, np.setdiff1d(want, keys))
    assert set(np.unique(got // m)) == set(range(len(xa)))
    assert set(np.unique(got % m)) == set(range(m))
