"""The frame potential of the frequency directions (meanfield.learners.DirectionFrame) and the
CoulombFeatures option that adds it (issue 22)."""

import numpy as np
import pytest
import torch

import meanfield.learners as L
from meanfield.domains import Box
from meanfield.energy import Energy
from meanfield.learners.tasks import gaussian_mixture


@pytest.fixture
def no_work(monkeypatch):
    """Make the dynamics and the initial draw fail loudly: errors must come first."""

    def boom(*a, **k):
        raise AssertionError("work started before the input was checked")

    from meanfield.learners import coulomb

    monkeypatch.setattr(coulomb, "simulate", boom)
    monkeypatch.setattr(coulomb, "sample_initial_particles", boom)


def _particles(N, p, seed):
    return torch.tensor(np.random.default_rng(seed).normal(size=(N, p)), dtype=torch.float64)


@pytest.mark.parametrize("softening", [0.1, 1e-6])
def test_gradient_is_autograds_and_the_phase_feels_nothing(softening):
    term = L.DirectionFrame(0.7, softening=softening)
    om = _particles(9, 4, 0).requires_grad_(True)
    (auto,) = torch.autograd.grad(term.value(om), om)
    got = term.grad(om.detach())
    assert torch.allclose(got, auto, rtol=1e-12, atol=1e-15)
    assert float(got[:, -1].abs().max()) == 0.0
    # replicas: leading axes are independent
    reps = _particles(18, 4, 1).reshape(2, 9, 4)
    assert torch.allclose(term.value(reps)[1], term.value(reps[1]), rtol=1e-14)


def test_value_is_the_pair_sum_without_diagonal():
    """H_N = λ/N² Σ_{i≠j} (u_i·u_j)², by a double loop over the pairs."""
    term = L.DirectionFrame(1.3, softening=0.2)
    om = _particles(7, 3, 2)
    w = om[:, :-1].numpy()
    u = w / np.sqrt((w * w).sum(1, keepdims=True) + 0.04)
    brute = sum((u[i] @ u[j]) ** 2 for i in range(7) for j in range(7) if i != j)
    assert float(term.value(om)) == pytest.approx(1.3 * brute / 49, rel=1e-13)


def test_first_variation_is_the_derivative_of_the_measure_value():
    """d/dε E(μ + ε(δ_a − δ_b)) = δE/δμ(a) − δE/δμ(b) (a zero-mass perturbation), by a central
    difference (error O(ε²) ~ 1e-10 at ε = 1e-5 against values of order 1)."""
    term = L.DirectionFrame(0.9)
    pts, wts = _particles(6, 4, 3), torch.full((6,), 1 / 6, dtype=torch.float64)
    a, b = _particles(1, 4, 4), _particles(1, 4, 5)
    allp = torch.cat([pts, a, b])

    def E(eps):
        w = torch.cat([wts, torch.tensor([eps, -eps], dtype=torch.float64)])
        return float(term.measure_value(allp, w))

    h = 1e-5
    fd = (E(h) - E(-h)) / (2 * h)
    fv = term.first_variation(torch.cat([a, b]), pts, wts)
    assert fd == pytest.approx(float(fv[0] - fv[1]), abs=1e-8)


def test_gradient_descent_reaches_an_isotropic_frame():
    """The minimum of ‖M‖²_F over unit directions is 1/d (M = I/d); from directions bunched
    around one axis, gradient descent on the term alone ends at an isotropic law (the largest
    eigenvalue of M is 1/d = 1/3 to 1e-3). The force is tangent to the sphere (ε → 0), so each
    step w ← w − ηg changes |w|² by exactly η²|g|²: the final |w|² equals the initial one plus
    the sum of those, to round-off."""
    rng = np.random.default_rng(6)
    w = np.array([5.0, 0.0, 0.0]) + 0.3 * rng.normal(size=(60, 3))
    om = torch.tensor(np.c_[w, rng.uniform(size=60)], dtype=torch.float64)
    sq0 = (om[:, :3] ** 2).sum(1)
    E = Energy([L.DirectionFrame(1.0, softening=1e-9)], Box(4, 100.0))
    eta, grown = 2.0, torch.zeros(60, dtype=torch.float64)
    for _ in range(400):  # converged to round-off by step 400 (5e-9 at step 200)
        g = E.drift(om)
        grown += eta**2 * (g[:, :3] ** 2).sum(1)
        om = om - eta * g
    u = om[:, :3] / om[:, :3].norm(dim=1, keepdim=True)
    M = (u.T @ u / 60).numpy()
    assert np.linalg.eigvalsh(M).max() == pytest.approx(1 / 3, abs=1e-3)
    assert torch.allclose((om[:, :3] ** 2).sum(1), sq0 + grown, rtol=1e-10)


def test_coulomb_option_adds_the_term_and_keeps_the_directions_isotropic():
    """With λ_F > 0 the energy holds the term. On the mixture task the alignment flow bunches
    the directions; the frame repulsion keeps them as isotropic as a random draw. Measure:
    d · λ_max of the directions' second moment (1 isotropic, d = 5 one axis); its null law
    for 32 isotropic directions is sampled (2000 draws, seed 5): the plain flow ends above the
    null's 99th percentile, the framed one below it (deterministic given the seeds)."""
    sp = gaussian_mixture(300, 10, seed=0)
    kw = dict(bandwidth="median", n_steps=150, random_state=1)

    def spread(w):
        u = w[:, :5] / np.linalg.norm(w[:, :5], axis=1, keepdims=True)
        return 5 * np.linalg.eigvalsh(u.T @ u / len(u)).max()

    rng = np.random.default_rng(5)
    q99 = np.quantile([spread(rng.normal(size=(32, 5))) for _ in range(2000)], 0.99)
    plain = L.CoulombFeatures(32, **kw).fit(sp.X_train, sp.y_train)
    framed = L.CoulombFeatures(32, direction_repulsion=3.0, **kw).fit(sp.X_train, sp.y_train)
    assert framed.energy_description_["term2"] == "DirectionFrame"
    assert spread(framed.omega_) < q99 < spread(plain.omega_)


def test_bad_direction_repulsion_names_the_parameter(no_work):
    X = np.random.default_rng(0).normal(size=(20, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match="direction_repulsion"):
        L.CoulombFeatures(4, direction_repulsion=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="lambda_F"):
        L.DirectionFrame(float("nan"))
    with pytest.raises(ValueError, match="softening"):
        L.DirectionFrame(1.0, softening=0.0)
    with pytest.raises(ValueError, match="dimension >= 2"):
        Energy([L.DirectionFrame(1.0)], Box(1, 1.0))
