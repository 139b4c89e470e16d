"""Tests of meanfield.learners against independent truth.

- the simplex projection against its KKT characterisation;
- the importance-sampling weights against scipy's SLSQP on the same small problems;
- random Fourier features against the Gaussian kernel they estimate;
- the closed-form ridge against scikit-learn's RidgeClassifier and brute-force leave-one-out;
- the Cristianini alignment against the dense n x n formula;
- Langevin-learned particles against their own starting point (alignment up) and against the
  same dynamics without repulsion (collapse);
- bad input raises before any work; the scikit-learn estimator contract.
"""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from sklearn.base import clone
from sklearn.linear_model import RidgeClassifier
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import meanfield.learners as L
from meanfield.domains import Box
from meanfield.learners.tasks import gaussian_mixture, two_moons, xor


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The matrices here are tiny: extra threads only contend on a shared 2-core machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ----------------------------------------------------------------------------- simplex / IS


@pytest.mark.parametrize("seed", range(5))
def test_project_simplex_satisfies_kkt(seed):
    z = np.random.default_rng(seed).normal(size=17) * 3
    q = L.project_simplex(z)
    assert np.all(q >= 0) and abs(q.sum() - 1) < 1e-12
    # KKT of min |q - z|^2 on the simplex: z_i - q_i = theta on the support, z_i <= theta off it
    S = q > 0
    theta = (z - q)[S]
    assert np.ptp(theta) < 1e-12
    assert np.all(z[~S] <= theta[0] + 1e-12)


@pytest.mark.parametrize("mass", [0.25, 3.0])
def test_shared_simplex_projection_matches_slsqp_at_any_mass(mass):
    """The one projection (meanfield.simplex) is the minimiser of |q - z|^2 on {q >= 0, sum = mass}.

    SLSQP solves the same strictly convex QP independently; its default ftol 1e-6 on |q - z|^2
    bounds the distance to the unique minimiser by about sqrt(2e-6) ~ 1.4e-3, so 1e-4 on the
    entries is met with room only if both are right (rounding of the sort-based formula: 1e-15).
    """
    from meanfield.simplex import project_simplex

    z = np.random.default_rng(11).normal(size=9) * 2
    q = project_simplex(z, mass)
    ref = minimize(
        lambda x: ((x - z) ** 2).sum(),
        np.full(9, mass / 9),
        jac=lambda x: 2 * (x - z),
        bounds=[(0, None)] * 9,
        constraints=[{"type": "eq", "fun": lambda x: x.sum() - mass}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    ).x
    assert abs(q.sum() - mass) < 1e-12 and np.all(q >= 0)
    np.testing.assert_allclose(q, ref, atol=1e-6)
    assert L.project_simplex is project_simplex  # one implementation, re-exported


@pytest.mark.parametrize(
    "z, mass, match",
    [
        ([], 1.0, "z must be a non-empty 1-d"),
        ([[1.0]], 1.0, "z must be a non-empty 1-d"),
        ([1.0, np.nan], 1.0, "NaN or inf"),
        ([1.0], 0.0, "mass must be"),
        ([1.0], math.inf, "mass must be"),
    ],
)
def test_simplex_projection_bad_input(z, mass, match):
    from meanfield.simplex import project_simplex

    with pytest.raises(ValueError, match=match):
        project_simplex(z, mass)


def _slsqp(v, rho):
    """max v'q on the simplex with |q - 1/N|^2 <= rho/N by SLSQP (convex: two starts suffice)."""
    N = len(v)
    cons = [
        {"type": "eq", "fun": lambda q: q.sum() - 1.0, "jac": lambda q: np.ones(N)},
        {
            "type": "ineq",
            "fun": lambda q: rho / N - ((q - 1.0 / N) ** 2).sum(),
            "jac": lambda q: -2 * (q - 1.0 / N),
        },
    ]
    best = None
    rng = np.random.default_rng(0)
    for k in range(2):
        x0 = np.full(N, 1.0 / N) if k == 0 else rng.dirichlet(np.full(N, 5.0))
        x0 = 1.0 / N + (x0 - 1.0 / N) * min(
            1.0, math.sqrt(rho / N) / max(np.linalg.norm(x0 - 1.0 / N), 1e-300)
        )
        res = minimize(
            lambda q: -v @ q,
            x0,
            jac=lambda q: -v,
            bounds=[(0, 1)] * N,
            constraints=cons,
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 1000},
        )
        if best is None or -res.fun > -best.fun:
            best = res
    return best.x


@pytest.mark.parametrize(
    "N, rho, seed", [(5, 0.5, 0), (8, 2.0, 1), (12, 0.1, 2), (15, 5.0, 3), (15, 11.0, 4)]
)
def test_importance_weights_feasible_tight_and_optimal_vs_slsqp(N, rho, seed):
    v = np.random.default_rng(seed).exponential(size=N) ** 2  # v = (sum_i y_i phi)^2 >= 0
    q = L.solve_importance_weights(v, rho)
    # feasible: q >= 0, sum q = 1 (rounding ~ N eps)
    assert np.all(q >= 0) and abs(q.sum() - 1) < 1e-12
    # tight: the chi2 constraint is active at the optimum (v not constant, rho < N - 1);
    # the exact support solve leaves only rounding, ~1e-15 relative
    g = ((q - 1 / N) ** 2).sum()
    assert abs(g - rho / N) <= 1e-10 * rho / N
    # optimal: no worse than SLSQP (whose own accuracy is ~1e-8), and the same point
    # (the objective is linear and the feasible set strictly convex, so the maximiser is unique)
    q_ref = _slsqp(v, rho)
    assert v @ q >= v @ q_ref - 1e-8 * np.abs(v).sum()
    np.testing.assert_allclose(q, q_ref, atol=1e-5)


def test_importance_weights_edge_cases():
    v = np.array([3.0, 1.0, 3.0, 0.5])
    np.testing.assert_array_equal(L.solve_importance_weights(v, 0.0), np.full(4, 0.25))
    np.testing.assert_array_equal(L.solve_importance_weights(np.ones(4), 1.0), np.full(4, 0.25))
    # rho >= N - 1 allows any vertex: all mass on the maximisers (ties share it)
    np.testing.assert_allclose(L.solve_importance_weights(v, 3.0), [0.5, 0, 0.5, 0])
    # rho slightly larger than the tie solution needs: still the tie solution (inactive)
    np.testing.assert_allclose(L.solve_importance_weights(v, 1.5), [0.5, 0, 0.5, 0])
    with pytest.raises(ValueError, match="rho"):
        L.solve_importance_weights(v, -1.0)
    with pytest.raises(ValueError, match="v contains NaN"):
        L.solve_importance_weights(np.array([1.0, np.nan]), 1.0)


def test_importance_sampled_features_use_q():
    sp = xor(300, 10, seed=0)
    est = L.ImportanceSampledFeatures(
        32, n_candidates=200, rho=None, rho_fraction=0.3, random_state=1
    )
    est.fit(sp.X_train, sp.y_train)
    assert est.q_.shape == (200,) and abs(est.q_.sum() - 1) < 1e-12
    # q maximises sum q v over a set containing the uniform weights
    assert est.q_ @ est.scores_ >= est.scores_.mean()
    # scores are (sum_i y_i phi(x_i; w))^2 with the package feature map
    phi = L.fourier_features(sp.X_train, est.candidates_, np.ones(200))
    np.testing.assert_allclose(est.scores_, (sp.y_train @ phi) ** 2, rtol=1e-12)
    # every selected feature is a candidate with q > 0
    cand = {tuple(r) for r in est.candidates_[est.q_ > 0]}
    assert all(tuple(r) in cand for r in est.omega_)
    w = L.ImportanceSampledFeatures(16, mode="weight", random_state=1).fit(sp.X_train, sp.y_train)
    np.testing.assert_allclose(w.feature_weights_, np.sqrt(w.q_))
    assert w.transform(sp.X_test).shape == (10, 16)


# ----------------------------------------------------------------------------- RFF, alignment


def test_random_fourier_features_estimate_the_gaussian_kernel():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    sigma, m = 1.7, 40000
    est = L.RandomFourierFeatures(m, bandwidth=sigma, random_state=0).fit(X)
    K = est.kernel(X)
    # each entry averages m terms of variance <= 1 (2 cos cos is bounded by 2, variance of
    # cos(a)cos(b)-type terms is <= 1): SE <= 1/sqrt(m) = 0.005; 144 entries, allow 6 SE
    assert np.abs(K - rbf_kernel(X, gamma=1 / (2 * sigma**2))).max() < 6 / math.sqrt(m)


def test_median_bandwidth_matches_definition():
    X = np.random.default_rng(1).normal(size=(40, 2))
    D = np.linalg.norm(X[:, None] - X[None], axis=-1)
    assert L.median_bandwidth(X) == pytest.approx(np.median(D[np.triu_indices(40, 1)]), rel=1e-12)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_kernel_alignment_matches_dense_formula(n_classes):
    sp = gaussian_mixture(60, 5, d=3, n_classes=n_classes, seed=0)
    Phi = np.random.default_rng(2).normal(size=(60, 7))
    y = sp.y_train
    K = Phi @ Phi.T
    T = np.where(y[:, None] == y[None, :], 1.0, -1.0 / (n_classes - 1))
    ref = (K * T).sum() / (np.linalg.norm(K) * np.linalg.norm(T))
    assert L.kernel_alignment(Phi, y) == pytest.approx(ref, rel=1e-12)


# ----------------------------------------------------------------------------- ridge


@pytest.mark.parametrize("n_classes, alpha", [(2, 0.0), (2, 3.0), (3, 0.5)])
def test_ridge_matches_sklearn(n_classes, alpha):
    sp = gaussian_mixture(80, 5, d=6, n_classes=n_classes, seed=1)
    ours = L.RidgeFeatureClassifier(alpha=alpha).fit(sp.X_train, sp.y_train)
    ref = RidgeClassifier(alpha=alpha, solver="svd").fit(sp.X_train, sp.y_train)
    np.testing.assert_allclose(ours.coef_, np.reshape(ref.coef_, ours.coef_.shape), atol=1e-10)
    np.testing.assert_allclose(ours.intercept_, np.ravel(ref.intercept_), atol=1e-10)
    np.testing.assert_array_equal(ours.predict(sp.X_test), ref.predict(sp.X_test))


def test_ridge_leave_one_out_matches_brute_force():
    sp = two_moons(40, 5, jitter=0.3, seed=2)
    alphas = [1e-3, 0.1, 10.0]
    est = L.RidgeFeatureClassifier(alpha=alphas).fit(sp.X_train, sp.y_train)
    for a, err in zip(alphas, est.loo_errors_, strict=True):
        sq = []
        for j in range(40):
            keep = np.arange(40) != j
            m = RidgeClassifier(alpha=a, solver="svd").fit(sp.X_train[keep], sp.y_train[keep])
            sq.append((m.decision_function(sp.X_train[j : j + 1])[0] - sp.y_train[j]) ** 2)
        assert err == pytest.approx(np.mean(sq), rel=1e-10)
    assert est.alpha_ == alphas[int(np.argmin(est.loo_errors_))]


def test_ridge_svd_falls_back_to_gesvd_when_gesdd_fails(monkeypatch):
    """numpy's SVD (LAPACK gesdd) can fail to converge on rank-deficient features with many
    repeated columns (importance sampling with a large budget); the fit then uses scipy's
    gesvd driver and gives the same model as the numpy SVD (and scikit-learn's ridge)."""
    from meanfield.learners import ridge

    sp = two_moons(60, 20, jitter=0.3, seed=3)
    F = np.c_[sp.X_train, sp.X_train[:, :1], sp.X_train[:, :1]]  # repeated columns
    ref = L.RidgeFeatureClassifier(alpha=[1e-3, 1.0]).fit(F, sp.y_train)

    def fails(*a, **k):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(ridge.np.linalg, "svd", fails)
    got = L.RidgeFeatureClassifier(alpha=[1e-3, 1.0]).fit(F, sp.y_train)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.loo_errors_, ref.loo_errors_, rtol=1e-10)


# ----------------------------------------------------------------------------- Coulomb particles


# a pinned run (particles stuck on the box boundary by the projection) is not the dynamics
# under test: the package's warning fails the test instead of passing on a degenerate run
@pytest.mark.filterwarnings("error::meanfield.errors.PinnedParticlesWarning")
def test_coulomb_starts_from_the_rff_draw_and_raises_the_alignment():
    sp = xor(300, 10, seed=3)
    rff = L.RandomFourierFeatures(32, bandwidth="median", random_state=4).fit(sp.X_train)
    # eta = 1 (the default): eta = 5 overshot and left 78 % of the particles pinned on the
    # boundary; here none is on it (checked below) and the alignment still rises 0.019 -> 0.54
    est = L.CoulombFeatures(
        32, bandwidth="median", eta=1.0, lam=0.03, s=1.0, n_steps=150, random_state=4
    )
    est.fit(sp.X_train, sp.y_train)
    # every particle strictly inside the box [-R, R]^(d+1) of standardised coordinates
    scale = np.concatenate([np.full(sp.X_train.shape[1], est.bandwidth_), [1.0]])
    assert np.all(np.abs(est.omega_ * scale) < est.radius_ - 1e-6)
    # same initial particles as the fixed features (box radius 3 pi clips nothing here)
    np.testing.assert_allclose(est.omega_init_, rff.omega_, rtol=1e-12)
    # the linear alignment (1/N) sum_i a(w_i) rises well above its initial value, and so does
    # the normalised alignment of the learned kernel on the training data
    assert est.alignment_ > est.alignment_init_ + 0.01
    Phi0 = L.fourier_features(sp.X_train, est.omega_init_)
    assert L.kernel_alignment(est.transform(sp.X_train), sp.y_train) > L.kernel_alignment(
        Phi0, sp.y_train
    )
    assert est.energy_ < est.energy_init_


@pytest.mark.parametrize("seed", [0, 1])
def test_repulsion_prevents_collapse(seed):
    # Low temperature, alignment only: particles fall into the few maxima of a(w) and pile up
    # (their spread is thermal, ~ sqrt(eta / beta) ~ 1e-3 here, against an initial minimum
    # spacing of ~0.3-0.4): with 32 particles and a handful of maxima, some must share one.
    # With the Coulomb repulsion (s = p - 2 = 1 in p = 3) they keep a spacing of order 0.4.
    # Same seed, data and initial particles for both runs; measured margins are >= 2x.
    sp = xor(120, 10, seed=0)
    kw = dict(
        n_features=32,
        bandwidth=1.0,
        beta=1e7,
        eta=20.0,
        n_steps=800,
        s=1.0,
        softening=0.01,
        random_state=seed,
    )
    free = L.CoulombFeatures(lam=0.0, **kw).fit(sp.X_train, sp.y_train)
    # checkpoints only record (the trajectory is the same with or without them)
    rep = L.CoulombFeatures(lam=0.02, n_checkpoints=16, **kw).fit(sp.X_train, sp.y_train)
    assert free.min_distance_ < 0.05 * free.min_distance_init_
    assert rep.min_distance_ > 0.5 * rep.min_distance_init_
    assert rep.min_distance_ > 20 * free.min_distance_
    # both still learn. The free run maximises the alignment alone, so it rises; the repulsive
    # run lowers its energy (alignment traded against repulsion). At this step (eta = 20) the
    # discrete flow overshoots and its energy oscillates along the run (checkpoints: 0-75 % of
    # |E_0| below E_0), so the energy of the last step alone is not a property: under 1-ulp
    # changes of the data (x (1 + k 2^-52), k = 0..3) its drop ranged over -3 % to 58 % at
    # seeds 0-1, while the mean over the second half of the run dropped 9-50 % (asserted
    # >= 5 %: a gradient flow must descend). Its alignment alone is not a property at this
    # temperature either: at seed 1 it ends at 0.039 or 0.035 (start 0.037) under two
    # summation orders of the same pair force (agreeing to 1e-13), as the nearly deterministic
    # flow amplifies round-off over 800 steps.
    assert free.alignment_ > free.alignment_init_
    t = np.where(sp.y_train == rep.classes_[1], 1.0, -1.0)
    energy = rep._energy(sp.X_train / rep.bandwidth_, t, 32, Box(3, rep.radius_))
    unit = np.array([rep.bandwidth_, rep.bandwidth_, 1.0])  # back to standardised units
    late = [float(energy.value(torch.as_tensor(c * unit))) for c in rep.checkpoints_[8:]]
    assert np.mean(late) < rep.energy_init_ - 0.05 * abs(rep.energy_init_)


# ----------------------------------------------------------------------------- bad input


@pytest.fixture
def no_work(monkeypatch):
    """Make any dynamics or feature evaluation fail loudly: errors must come first."""

    def boom(*a, **k):
        raise AssertionError("work started before the input was checked")

    # where the learners look these up (the modules of the meanfield.learners package)
    from meanfield.learners import coulomb, random_features

    monkeypatch.setattr(coulomb, "simulate", boom)
    for module in (coulomb, random_features):
        monkeypatch.setattr(module, "sample_initial_particles", boom)


LEARNERS = [L.RandomFourierFeatures, L.ImportanceSampledFeatures, L.CoulombFeatures]


@pytest.mark.parametrize("cls", LEARNERS)
def test_bad_input_raises_clear_errors_before_work(cls, no_work):
    X = np.random.default_rng(0).normal(size=(20, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match=r"n_features \(m\) must be an integer >= 1, got 0"):
        cls(0).fit(X, y)
    with pytest.raises(ValueError, match="same number of samples: X has 20 rows, y has 19"):
        cls(4).fit(X, y[:-1])
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cls(4).fit(Xn, y)
    if cls is L.RandomFourierFeatures:
        return
    with pytest.raises(ValueError, match="Unknown label type.*class labels"):
        cls(4).fit(X, X[:, 0])  # continuous targets
    with pytest.raises(ValueError, match="1 class"):
        cls(4).fit(X, np.ones(20))
    with pytest.raises(ValueError, match="requires y"):
        cls(4).fit(X, None)


def test_bad_hyperparameters_name_the_parameter(no_work):
    X = np.random.default_rng(0).normal(size=(20, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match="lam"):
        L.CoulombFeatures(4, lam=-1).fit(X, y)
    with pytest.raises(ValueError, match="beta"):
        L.CoulombFeatures(4, beta=0).fit(X, y)
    with pytest.raises(ValueError, match="regime"):
        L.CoulombFeatures(4, regime="hot").fit(X, y)
    with pytest.raises(ValueError, match="mode"):
        L.ImportanceSampledFeatures(4, mode="top").fit(X, y)
    with pytest.raises(ValueError, match=r"rho_fraction must be in \[0, 1\]"):
        L.ImportanceSampledFeatures(4, rho=None, rho_fraction=2).fit(X, y)
    with pytest.raises(ValueError, match="bandwidth"):
        L.RandomFourierFeatures(4, bandwidth=-1.0).fit(X)
    with pytest.raises(ValueError, match="alpha"):
        L.RidgeFeatureClassifier(alpha=-1.0).fit(X, y)


def test_transform_checks_the_input_dimension():
    X = np.random.default_rng(0).normal(size=(20, 2))
    est = L.RandomFourierFeatures(4, random_state=0).fit(X)
    with pytest.raises(ValueError, match="X has 3 features"):
        est.transform(np.zeros((2, 3)))


# ----------------------------------------------------------------------------- contract


@parametrize_with_checks(
    [
        L.RandomFourierFeatures(8, random_state=0),
        L.ImportanceSampledFeatures(8, random_state=0),
        L.CoulombFeatures(6, n_steps=3, random_state=0),
        L.RidgeFeatureClassifier(alpha=1.0),
    ]
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_pipeline_and_cross_validation():
    sp = two_moons(240, 10, jitter=0.2, seed=0)
    pipe = Pipeline(
        [
            ("features", L.CoulombFeatures(16, bandwidth="median", n_steps=20, random_state=0)),
            ("clf", L.RidgeFeatureClassifier(alpha=1e-3)),
        ]
    )
    scores = cross_val_score(pipe, sp.X_train, sp.y_train, cv=3)
    # two moons at jitter 0.2 is ~97% separable by a smooth kernel; 16 features reach > 0.85
    assert scores.shape == (3,) and scores.min() > 0.85
    fitted = clone(pipe).fit(sp.X_train, sp.y_train)
    assert fitted.named_steps["features"].omega_.shape == (16, 3)


def test_evaluate_reports_all_metrics():
    sp = two_moons(300, 300, jitter=0.2, seed=1)
    out = L.evaluate(L.RandomFourierFeatures(64, bandwidth="median", random_state=0), *sp)
    for k in [
        "fit_time",
        "alignment_train",
        "alignment_test",
        "ridge_test_error",
        "logistic_test_error",
    ]:
        assert k in out
    assert out["ridge_test_accuracy"] > 0.9 and out["logistic_test_accuracy"] > 0.9
    assert out["ridge_test_error"] == pytest.approx(1 - out["ridge_test_accuracy"])


# ----------------------------------------------------------------------------- issue 10 variants


@pytest.mark.parametrize("form", ["linear", "risk", "normalised", "centred"])
def test_every_alignment_form_is_the_energy_term_and_rises(form):
    """Each form runs the matching meanfield.energy term and raises it (low temperature)."""
    sp = xor(200, 10, seed=2)
    est = L.CoulombFeatures(
        16, bandwidth="median", alignment=form, n_steps=60, lam=0.03, random_state=1
    ).fit(sp.X_train, sp.y_train)
    assert est.energy_description_["term0"] == L.ALIGNMENTS[form].__name__
    assert est.alignment_ > est.alignment_init_
    if form == "centred":  # the learner's metric is the term's value: the same number
        z = est.transform(sp.X_train)
        assert L.kernel_alignment(z, sp.y_train, centred=True) == pytest.approx(
            est.alignment_, rel=1e-9
        )


def test_frequency_confinement_gradient_and_ula_stationary_variance():
    """V = c|w|²/2 on the frequencies only; its gradient is autograd's; ULA samples its law.

    Unadjusted Langevin on V = |w|²/(2β) at inverse temperature β (no other term) is the AR(1)
    recursion w <- (1 - η/β) w + sqrt(2η/β) ξ, whose stationary variance is exactly
    2/(2 - η/β) (= 1.0256 at η = 0.05, β = 1): the RFF prior N(0, 1) up to the O(η) bias.
    20 000 independent particles, 300 steps ((1 - η)^300 ~ 2e-7 of the start left): the
    sample variance has standard error sqrt(2/N) * var ~ 0.010, so a 4 SE tolerance is 0.04.
    """
    from meanfield.domains import Box
    from meanfield.dynamics.langevin import simulate
    from meanfield.energy import Energy

    conf = L.FrequencyConfinement(0.7)
    om = torch.tensor(np.random.default_rng(0).normal(size=(5, 4)), requires_grad=True)
    (auto,) = torch.autograd.grad(conf.V(om).sum(), om)
    assert torch.allclose(auto, conf.gradV(om.detach()), atol=1e-14)
    assert float(auto[:, -1].abs().max()) == 0.0  # the phase feels nothing

    E = Energy([L.FrequencyConfinement(1.0)], Box(3, 40.0))
    w0 = torch.tensor(np.random.default_rng(1).normal(size=(20_000, 3)) * 3.0)
    ds = simulate(E, w0, eta=0.05, beta=1.0, n_steps=300, seed=2, record_positions=False)
    w = ds["omega_final"].values[:, :2]
    assert abs(w.var() - 2 / 1.95) < 0.04
    assert abs(w.mean()) < 0.03  # 4 SE of the mean, SE = 1/sqrt(40 000)


@pytest.mark.parametrize("regime, factor", [("mean-field", 1), ("coulomb-gas", 12)])
def test_prior_confinement_strength_is_one_over_beta_n(regime, factor):
    sp = xor(60, 10, seed=0)
    est = L.CoulombFeatures(
        12, confinement="prior", beta=2.0, regime=regime, n_steps=2, random_state=0
    ).fit(sp.X_train, sp.y_train)
    d = est.energy_description_
    assert d["term1"] == "FrequencyConfinement"
    assert d["term1_strength"] == pytest.approx(1 / (2.0 * factor), rel=1e-15)


def test_early_stopping_keeps_the_best_held_out_checkpoint():
    sp = two_moons(300, 10, jitter=0.3, seed=4)
    est = L.CoulombFeatures(
        16, bandwidth="median", early_stopping=True, n_steps=40, n_checkpoints=8, random_state=3
    ).fit(sp.X_train, sp.y_train)
    val = est.validation_index_
    # stratified: about 20 % of each class held out
    assert abs(len(val) - 60) <= 2
    assert est.checkpoints_.shape == (9, 16, 3)
    assert list(est.checkpoint_steps_) == list(range(0, 41, 5))
    best = int(np.argmax(est.checkpoint_val_alignment_))
    np.testing.assert_array_equal(est.omega_, est.checkpoints_[best])
    assert est.best_step_ == est.checkpoint_steps_[best]
    # the recorded held-out score is the centred alignment of the kept features on those rows
    z = est.transform(sp.X_train[val])
    assert L.kernel_alignment(z, sp.y_train[val], centred=True) == pytest.approx(
        est.checkpoint_val_alignment_[best], rel=1e-9
    )


def test_support_mode_keeps_the_support_unweighted():
    """Sinha & Duchi's protocol: the features are the candidates with q > eps, weight 1/√|S|."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 3))  # n = 5000: the candidate scores are computed in 2 blocks
    y = np.where((X**2).sum(1) > 3, 1, -1)
    est = L.ImportanceSampledFeatures(
        10, n_candidates=1000, rho=5.0, mode="support", bandwidth=1.0, random_state=0
    ).fit(X, y)
    S = est.q_ > np.finfo(float).eps
    assert 1 < S.sum() < 1000
    np.testing.assert_array_equal(est.omega_, est.candidates_[S])
    np.testing.assert_allclose(est.feature_weights_, 1 / np.sqrt(S.sum()), rtol=1e-15)
    # scores v_k = (sum_j y_j phi(x_j; w_k))^2 against the dense feature matrix
    phi = L.fourier_features(X, est.candidates_, np.ones(1000))
    np.testing.assert_allclose(est.scores_, (y @ phi) ** 2, rtol=1e-10)
    # the budget is tight: |S| >= N_w / (1 + rho) for any q on S with chi2 <= rho
    assert S.sum() >= 1000 / 6


def test_ridge_label_mean_intercept_is_the_published_closed_form():
    rng = np.random.default_rng(1)
    Phi = rng.normal(size=(80, 12))
    y = np.where(Phi[:, 0] + 0.5 * rng.normal(size=80) > 0.4, 1, -1)
    clf = L.RidgeFeatureClassifier(alpha=0.05, fit_intercept="label_mean").fit(Phi, y)
    yb = y.mean()
    w = np.linalg.solve(Phi.T @ Phi + 0.05 * np.eye(12), Phi.T @ (y - yb))
    np.testing.assert_allclose(clf.coef_[0], w, rtol=1e-10)
    assert clf.intercept_[0] == pytest.approx(yb, rel=1e-12)
    np.testing.assert_array_equal(clf.predict(Phi), np.sign(Phi @ w + yb))
    with pytest.raises(ValueError, match="fit_intercept must be True, False or 'label_mean'"):
        L.RidgeFeatureClassifier(fit_intercept="mean").fit(Phi, y)


def test_select_by_cv_equals_a_manual_stratified_k_fold():
    from sklearn.model_selection import StratifiedKFold

    sp = two_moons(150, 10, jitter=0.3, seed=5)
    X, y = sp.X_train, sp.y_train
    grid = {"bandwidth": [0.1, 0.5, 2.0]}
    res = L.select_by_cv(L.RandomFourierFeatures(16, random_state=2), grid, X, y, cv=3)
    alphas = 100 * np.logspace(-7, 0, 15)  # n_fold = 100
    for bw, got in zip(grid["bandwidth"], res["mean_test_score"], strict=True):
        accs = []
        for tr, te in StratifiedKFold(3, shuffle=True, random_state=0).split(X, y):
            f = L.RandomFourierFeatures(16, bandwidth=bw, random_state=2).fit(X[tr])
            clf = L.RidgeFeatureClassifier(alpha=alphas).fit(f.transform(X[tr]), y[tr])
            accs.append(np.mean(clf.predict(f.transform(X[te])) == y[te]))
        assert got == pytest.approx(np.mean(accs), abs=1e-12)
    best = grid["bandwidth"][int(np.argmax(res["mean_test_score"]))]
    assert res["best_params"] == {"bandwidth": best}


def test_bad_variant_options_name_the_parameter(no_work):
    X = np.random.default_rng(0).normal(size=(20, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match="alignment 'cka'"):
        L.CoulombFeatures(4, alignment="cka").fit(X, y)
    with pytest.raises(ValueError, match="confinement"):
        L.CoulombFeatures(4, confinement="box").fit(X, y)
    with pytest.raises(ValueError, match=r"validation_fraction must be in \(0, 1\)"):
        L.CoulombFeatures(4, validation_fraction=1.5).fit(X, y)
    with pytest.raises(ValueError, match=r"n_checkpoints must be in \[1, n_steps = 5\]"):
        L.CoulombFeatures(4, n_steps=5, n_checkpoints=9).fit(X, y)
    with pytest.raises(ValueError, match="early_stopping must be True or False"):
        L.CoulombFeatures(4, early_stopping="yes").fit(X, y)
    with pytest.raises(ValueError, match="mode"):
        L.ImportanceSampledFeatures(4, mode="top-k").fit(X, y)
    with pytest.raises(ValueError, match="cv"):
        L.select_by_cv(L.RandomFourierFeatures(4), {"bandwidth": [1.0]}, X, y, cv=1)


def test_make_learner_is_the_class_built_directly():
    # the truth: each estimator built by hand with the same keywords
    coulomb, importance = {"lam": 0.3, "n_steps": 7, "softening": 0.1}, {"rho": 0.5}
    common = dict(bandwidth="median", random_state=11)
    want = {
        "rff": L.RandomFourierFeatures(16, **common),
        "importance": L.ImportanceSampledFeatures(16, **common, **importance),
        "coulomb": L.CoulombFeatures(16, **common, **coulomb),
        "langevin": L.CoulombFeatures(16, **common, **{**coulomb, "lam": 0.0}),
    }
    assert tuple(want) == L.LEARNER_NAMES
    for name, est in want.items():
        got = L.make_learner(name, 16, 11, coulomb, importance)
        assert type(got) is type(est) and got.get_params() == est.get_params(), name
    # without options: each class's own defaults
    for name, cls in [("importance", L.ImportanceSampledFeatures), ("coulomb", L.CoulombFeatures)]:
        assert (
            L.make_learner(name, 4, 0).get_params()
            == cls(4, **common | {"random_state": 0}).get_params()
        )


def test_make_learner_refuses_an_unknown_name():
    from meanfield.errors import InputError

    with pytest.raises(InputError, match="unknown name 'coulom'; choose one of 'rff', "):
        L.make_learner("coulom", 8, 0)
