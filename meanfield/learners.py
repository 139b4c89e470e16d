"""Kernel learners on random Fourier features, with the scikit-learn estimator contract.

Three ways to choose m features φ(x; ω_i) = √2 cos(ω_i[:d]ᵀ x + ω_i[d]) (the ``"fourier"``
map of :mod:`meanfield.features`, used by every learner so the comparison is fair):

- :class:`RandomFourierFeatures`: fixed ω ~ N(0, σ⁻² I_d), phase ~ U[−π, π): the Gaussian
  kernel of bandwidth σ, blind to the labels;
- :class:`ImportanceSampledFeatures`: Sinha & Duchi (2016): draw N_w candidates from the same
  law, reweight them by the χ²-constrained alignment maximiser q (:func:`solve_importance_weights`),
  then resample m of them from q (or keep them weighted by √q);
- :class:`CoulombFeatures`: m particles started from the fixed draw and moved by the projected
  Langevin dynamics of :mod:`meanfield.particles` on the energy of :mod:`meanfield.energy`,
  H = −(linear alignment) + λ · (Riesz repulsion), on a box domain (THEORY §2-3). ``lam=0``
  is the same dynamics without repulsion.

Every learner's ``transform`` returns Φ of shape (n, m) with Φ_ji = w_i φ(x_j; ω_i), where
w_i = 1/√m (uniform) or √q_i (importance weights), so Φ Φᵀ is the learned kernel matrix.

Downstream: :class:`RidgeFeatureClassifier` (closed-form ridge, one-vs-all ±1 targets) and
scikit-learn's logistic regression, through :func:`evaluate`.

Labels: two classes are treated as ±1 (the larger class label is +1), C ≥ 3 classes as class
ids with the target T_jk = 1 if y_j = y_k else −1/(C−1) (THEORY §1).

References
----------
A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.
A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.
J. Duchi, S. Shalev-Shwartz, Y. Singer, T. Chandra, "Efficient projections onto the l1-ball
for learning in high dimensions", ICML 2008 (the sort-based simplex projection).
N. Cristianini, J. Shawe-Taylor, A. Elisseeff, J. Kandola, "On kernel-target alignment",
NeurIPS 2001.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import _num_samples, check_is_fitted, column_or_1d

from meanfield._validation import check_choice, check_int, check_positive
from meanfield.alignment import cristianini_alignment
from meanfield.domains import Box
from meanfield.energy import (
    CentredAlignment,
    Energy,
    LinearAlignment,
    NormalisedAlignment,
    PairInteraction,
    Potential,
    RiskAlignment,
    target_factors,
)
from meanfield.features import get_feature_map, sample_initial_particles
from meanfield.kernels import Riesz
from meanfield.particles import simulate
from meanfield.simplex import project_simplex
from meanfield.spacing import min_pair_distance

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn

    def _validate_data(est, X="no_validation", y="no_validation", **kw):
        return est._validate_data(X, y, **kw)


__all__ = [
    "CoulombFeatures",
    "ImportanceSampledFeatures",
    "RandomFourierFeatures",
    "RidgeFeatureClassifier",
    "FrequencyConfinement",
    "evaluate",
    "feature_pipeline",
    "fourier_features",
    "kernel_alignment",
    "median_bandwidth",
    "project_simplex",
    "select_by_cv",
    "solve_importance_weights",
]

FEATURE = "fourier"


# ----------------------------------------------------------------------------------------
# input checks
# ----------------------------------------------------------------------------------------
def _check_lengths(X, y):
    """Mismatched lengths are reported before any conversion or work."""
    if y is None:
        return
    nx, ny = _num_samples(X), _num_samples(y)
    if nx != ny:
        raise ValueError(
            f"X and y must have the same number of samples: X has {nx} rows, y has {ny} labels"
        )


def _encode_labels(y, owner: str):
    """Check classification labels and encode them.

    Returns
    -------
    classes : ndarray (C,)
        Sorted distinct labels.
    t : ndarray (n,)
        ±1 (binary, ``classes[1]`` -> +1) or class ids 0..C−1 (C ≥ 3), as float64: the label
        form that :class:`meanfield.energy.LinearAlignment` takes.
    """
    if y is None:
        raise ValueError(
            f"{owner} requires y to be passed, but the target y is None; y must hold class "
            "labels ({-1, +1} or class ids)"
        )
    y = column_or_1d(y, warn=True)
    if y.shape[0] == 0:
        raise ValueError("y is empty (0 samples); at least 2 labelled samples are needed")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or inf; y must hold class labels ({-1, +1} or class ids)")
    kind = type_of_target(y, input_name="y")
    if kind not in ("binary", "multiclass"):
        raise ValueError(
            f"Unknown label type: {kind!r}. y must hold class labels: {{-1, +1}} for two "
            "classes, or integer (or string) class ids for C >= 2 classes; got values such as "
            f"{np.unique(y)[:5].tolist()}"
        )
    classes, ids = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(
            f"y has 1 class ({classes[0]!r}); at least 2 classes are needed to learn a kernel"
        )
    if len(classes) == 2:
        return classes, np.where(ids == 1, 1.0, -1.0)
    return classes, ids.astype(float)


def _resolve_bandwidth(bandwidth, X, rng):
    if isinstance(bandwidth, str):
        check_choice("bandwidth", bandwidth, ("median",))
        return median_bandwidth(X, rng=rng)
    return check_positive("bandwidth (sigma)", bandwidth)


def median_bandwidth(X, *, max_points: int = 1000, rng=None) -> float:
    """Median heuristic: the median Euclidean distance between distinct rows of X.

    Parameters
    ----------
    X : array of shape (n, d)
    max_points : int
        Use a random subset of at most this many rows (O(max_points²) work).
    rng : numpy Generator or int, optional
        Source of the subset.

    Returns
    -------
    float
        The bandwidth σ (1.0 if all rows coincide).
    """
    X = np.asarray(X, dtype=float)
    rng = np.random.default_rng(rng)
    if len(X) > max_points:
        X = X[rng.choice(len(X), max_points, replace=False)]
    from scipy.spatial.distance import pdist

    dist = pdist(X)
    med = float(np.median(dist)) if dist.size else 0.0
    return med if med > 0 else 1.0


def _seeds(random_state) -> tuple[int, np.random.Generator]:
    """An integer seed for torch-side draws and a numpy Generator, both from random_state."""
    if isinstance(random_state, np.random.RandomState):
        seed = int(random_state.randint(0, 2**31 - 1))
    elif isinstance(random_state, np.random.Generator):
        seed = int(random_state.integers(0, 2**31 - 1))
    elif random_state is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
    else:
        seed = check_int("random_state", random_state, minimum=0)
    return seed, np.random.default_rng(seed)


# ----------------------------------------------------------------------------------------
# features and alignment
# ----------------------------------------------------------------------------------------
def fourier_features(X, omega, weights=None) -> np.ndarray:
    """Φ_ji = w_i φ(x_j; ω_i) with the package's ``"fourier"`` feature map.

    Parameters
    ----------
    X : array of shape (n, d)
    omega : array of shape (m, d + 1)
        Frequencies ω[:, :d] and phases ω[:, d].
    weights : array of shape (m,), optional
        Column weights w_i; default 1/√m.

    Returns
    -------
    ndarray of shape (n, m)
    """
    omega_t = torch.as_tensor(np.asarray(omega, dtype=float), dtype=torch.float64)
    phi = get_feature_map(FEATURE).evaluate(np.asarray(X, dtype=float), omega_t)  # (m, n)
    Phi = phi.numpy().T
    if weights is None:
        return Phi / math.sqrt(omega_t.shape[0])
    return Phi * np.asarray(weights, dtype=float)[None, :]


def kernel_alignment(Phi, y, *, centred: bool = False) -> float:
    """Cristianini kernel-target alignment A = ⟨K, T⟩_F / (‖K‖_F ‖T‖_F), K = Φ Φᵀ.

    Scale-free, so it compares learners whatever their feature weights. Computed through the
    (m, m) Gram matrix ΦᵀΦ: O(n m²), nothing (n, n) is built.

    Parameters
    ----------
    Phi : array of shape (n, m)
    y : array of shape (n,)
        Labels (two classes are mapped to ±1, more to class ids).
    centred : bool
        Centred alignment (Cortes et al. 2012): K and T replaced by HKH and HTH,
        H = I − 11ᵀ/n, i.e. the columns of Φ and of the target factors centred
        (the learner-side twin of :class:`meanfield.energy.CentredAlignment`).

    Returns
    -------
    float in [−1, 1]
    """
    Phi = torch.as_tensor(np.asarray(Phi, dtype=float))
    _, t = _encode_labels(y, "kernel_alignment")
    U, w = (torch.as_tensor(a) for a in target_factors(t))  # T = U diag(w) Uᵀ, as the energy
    return float(cristianini_alignment(Phi.T, U, w, centred=centred))


# ----------------------------------------------------------------------------------------
# importance sampling (Sinha & Duchi 2016)
# ----------------------------------------------------------------------------------------
def _chi2_excess(q, N):
    return float(((q - 1.0 / N) ** 2).sum())


def solve_importance_weights(v, rho: float, *, rtol: float = 1e-12, max_iter: int = 200):
    """Maximise vᵀq over the simplex subject to ‖q − 1/N‖² ≤ ρ/N (Sinha & Duchi 2016).

    The χ² divergence D(q‖uniform) = N‖q − 1/N‖² is at most ρ. The Lagrangian dual with
    multiplier λ ≥ 0 gives q(λ) = Π_Δ(1/N + v/λ) (sort-based simplex projection); g(λ) =
    ‖q(λ) − 1/N‖² decreases in λ, and the optimum is the λ* with g(λ*) = ρ/N (the
    constraint is tight) unless the unconstrained vertex solution is already feasible.
    λ* is bracketed and bisected until the support S of q(λ) stops changing; on a fixed
    support q_i = 1/|S| + (v_i − v̄_S)/λ and g = 1/|S| − 1/N + Σ_S (v_i − v̄_S)²/λ², so
    λ* is then solved for exactly and the answer is feasible and tight to rounding.

    Parameters
    ----------
    v : array of shape (N,)
        Scores, e.g. v_m = (Σ_i y_i φ(x_i; w_m))².
    rho : float >= 0
        χ² budget. ρ = 0 forces the uniform q; ρ >= N − 1 allows any vertex.
    rtol : float
        Relative width at which bisection stops if the support never settles.
    max_iter : int
        Cap on bisection steps.

    Returns
    -------
    q : ndarray of shape (N,)
        Optimal weights: q >= 0, Σ q = 1, ‖q − 1/N‖² ≤ ρ/N.
    """
    v = np.asarray(v, dtype=float)
    if v.ndim != 1 or len(v) < 1:
        raise ValueError(f"v must be a non-empty 1-d array, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("v contains NaN or inf; all scores must be finite")
    rho = check_positive("rho", rho, allow_zero=True)
    N = len(v)
    u = np.full(N, 1.0 / N)
    budget = rho / N
    vc = v - v.mean()  # the projection ignores constant shifts
    if rho == 0.0 or not np.any(vc):
        return u
    # lambda -> 0+: uniform weight on the maximisers of v; feasible => constraint inactive
    top = v >= v.max() - 1e-14 * max(1.0, abs(v.max()))
    q0 = top / top.sum()
    if _chi2_excess(q0, N) <= budget:
        return q0.astype(float)

    def q_of(lam):
        return project_simplex(u + vc / lam)

    # g(lam) <= ||vc||^2 / lam^2 (the projection is 1-Lipschitz and fixes u): feasible at hi
    hi = float(np.linalg.norm(vc)) / math.sqrt(budget)
    lo = hi
    while _chi2_excess(q_of(lo), N) <= budget:
        lo *= 0.5
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        if _chi2_excess(q_of(mid), N) > budget:
            lo = mid
        else:
            hi = mid
        q_lo, q_hi = q_of(lo), q_of(hi)
        exact = _exact_on_support(vc, q_lo > 0, budget, N)
        if exact is None and np.array_equal(q_lo > 0, q_hi > 0):
            exact = _exact_on_support(vc, q_hi > 0, budget, N)
        if exact is not None:
            return exact
        if hi - lo <= rtol * hi:
            break
    return q_of(hi)  # feasible; tight to within the bisection tolerance


def _exact_on_support(vc, S, budget, N):
    """λ* and q* on the support S if they satisfy the KKT conditions, else None."""
    k = int(S.sum())
    gap = budget + 1.0 / N - 1.0 / k
    if k == 0 or gap <= 0:
        return None
    dev = vc[S] - vc[S].mean()
    ss = float((dev * dev).sum())
    if ss == 0.0:
        return None
    lam = math.sqrt(ss / gap)
    z = 1.0 / k + (vc - vc[S].mean()) / lam
    # KKT: strictly inside the support, non-positive outside (up to rounding)
    tol = 1e-12
    if np.any(z[S] < -tol) or np.any(z[~S] > tol):
        return None
    q = np.where(S, np.maximum(z, 0.0), 0.0)
    return q / q.sum()


# ----------------------------------------------------------------------------------------
# estimators
# ----------------------------------------------------------------------------------------
class _FeatureLearner(TransformerMixin, BaseEstimator):
    """Shared fit/transform plumbing: validation, bandwidth, timing, transform."""

    _requires_y = True

    def _check_params(self):
        check_int("n_features (m)", self.n_features, minimum=1)

    def _fit_prepare(self, X, y):
        _check_lengths(X, y)
        self._check_params()
        X = _validate_data(self, X, reset=True, dtype=np.float64)
        classes, t = _encode_labels(y, type(self).__name__) if self._requires_y else (None, None)
        if self._requires_y and len(X) < 2:
            raise ValueError(f"n_samples = {len(X)}: at least 2 samples are needed")
        return X, classes, t

    def transform(self, X):
        """Features Φ of shape (n, m): Φ_ji = w_i φ(x_j; ω_i).

        Parameters
        ----------
        X : array of shape (n, d)

        Returns
        -------
        ndarray of shape (n, n_features_out_)
        """
        check_is_fitted(self, "omega_")
        X = _validate_data(self, X, reset=False, dtype=np.float64)
        return fourier_features(X, self.omega_, self.feature_weights_)

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "omega_")
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self.omega_.shape[0])], dtype=object)

    def kernel(self, X, X2=None):
        """Learned kernel matrix K = Φ(X) Φ(X2)ᵀ, shape (n, n2)."""
        P = self.transform(X)
        return P @ (P if X2 is None else self.transform(X2)).T

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self._requires_y
        tags.input_tags.allow_nan = False
        return tags

    def _more_tags(self):  # scikit-learn < 1.6
        return {"requires_y": self._requires_y}


class RandomFourierFeatures(_FeatureLearner):
    """Fixed random Fourier features for the Gaussian kernel exp(−‖x − x'‖²/(2σ²)).

    ω ~ N(0, σ⁻² I_d) and phase b ~ U[−π, π) (:func:`meanfield.features.sample_initial_particles`);
    features √(2/m) cos(ωᵀx + b). The labels are not used.

    Parameters
    ----------
    n_features : int >= 1
        Number m of features.
    bandwidth : float > 0 or "median"
        Kernel width σ; "median" uses :func:`median_bandwidth` on the training inputs.
    random_state : int, Generator, RandomState or None
        Seed of the draw.

    Attributes
    ----------
    omega_ : ndarray of shape (m, d + 1)
        Frequencies and phases.
    feature_weights_ : ndarray of shape (m,)
        1/√m.
    bandwidth_ : float
    n_features_in_ : int
    fit_time_ : float
        Seconds spent drawing the features.
    """

    _requires_y = False

    def __init__(self, n_features=64, *, bandwidth=1.0, random_state=None):
        self.n_features = n_features
        self.bandwidth = bandwidth
        self.random_state = random_state

    def fit(self, X, y=None):
        """Draw the features; y is ignored (checked for length only).

        Parameters
        ----------
        X : array of shape (n, d)
        y : ignored

        Returns
        -------
        self
        """
        X, _, _ = self._fit_prepare(X, y)
        t0 = time.perf_counter()
        m = int(self.n_features)
        seed, rng = _seeds(self.random_state)
        self.bandwidth_ = _resolve_bandwidth(self.bandwidth, X, rng)
        self.omega_ = sample_initial_particles(
            FEATURE, m, X.shape[1], bandwidth=self.bandwidth_, seed=seed
        ).numpy()
        self.feature_weights_ = np.full(m, 1.0 / math.sqrt(m))
        self.fit_time_ = time.perf_counter() - t0
        return self


class ImportanceSampledFeatures(_FeatureLearner):
    """Importance-sampled random features (Sinha & Duchi 2016).

    Draws N_w candidates ω_k from the Gaussian-kernel law of :class:`RandomFourierFeatures`,
    scores each by v_k = φ_kᵀ T φ_k with φ_k = (φ(x_j; ω_k))_j (binary: (Σ_j y_j φ(x_j;
    ω_k))², diagonal j = k included as in the paper), solves
    max_q vᵀq over the simplex with ‖q − 1/N_w‖² ≤ ρ/N_w (:func:`solve_importance_weights`),
    then either

    - ``mode="sample"``: draws m features iid from q (weights 1/√m), or
    - ``mode="weight"``: keeps all N_w candidates with weights √q_k (then N_w = m unless
      ``n_candidates`` is given, and the output has N_w columns), or
    - ``mode="support"``: Sinha & Duchi's published protocol (their ``optimizeGaussianKernel``
      and ``createOptimizedGaussianKernelParams`` with D = |support|): keeps the candidates with
      q_k > machine epsilon, *unweighted* (1/√|S| each), so the output has |S| columns and
      ``n_features`` only sets the default pool N_w = 10 m.

    Parameters
    ----------
    n_features : int >= 1
        Number m of features.
    n_candidates : int >= 1 or None
        Pool size N_w; default 10 m for ``"sample"``, m for ``"weight"``.
    rho : float >= 0 or None
        χ² budget ρ: D_χ²(q ‖ uniform) = N_w ‖q − 1/N_w‖² ≤ ρ. None uses ``rho_fraction``.
        The default 1 did best among the budgets tried on the synthetic tasks (README of
        ``paper_repro/synthetic``); large budgets concentrate q on a few candidates.
    rho_fraction : float in [0, 1] or None
        When ``rho`` is None, ρ = rho_fraction · (N_w − 1): 0 keeps q uniform, 1 allows any
        vertex (the largest χ² divergence from uniform is N_w − 1).
    mode : {"sample", "weight", "support"}
    bandwidth : float > 0 or "median"
    random_state : int, Generator, RandomState or None

    Attributes
    ----------
    omega_ : ndarray of shape (n_features_out, d + 1)
        Selected features (with repeats under ``"sample"``; the support of q under
        ``"support"``).
    feature_weights_ : ndarray of shape (n_features_out,)
    candidates_ : ndarray of shape (N_w, d + 1)
    q_ : ndarray of shape (N_w,)
        Optimal candidate weights.
    scores_ : ndarray of shape (N_w,)
        v.
    rho_ : float
        The χ² budget used.
    classes_ : ndarray
    bandwidth_ : float
    n_features_in_ : int
    fit_time_ : float
        Seconds for candidates, scores, q and the resampling.
    """

    def __init__(
        self,
        n_features=64,
        *,
        n_candidates=None,
        rho=1.0,
        rho_fraction=None,
        mode="sample",
        bandwidth=1.0,
        random_state=None,
    ):
        self.n_features = n_features
        self.n_candidates = n_candidates
        self.rho = rho
        self.rho_fraction = rho_fraction
        self.mode = mode
        self.bandwidth = bandwidth
        self.random_state = random_state

    def _check_params(self):
        super()._check_params()
        check_choice("mode", self.mode, ("sample", "weight", "support"))
        if self.n_candidates is not None:
            check_int("n_candidates (N_w)", self.n_candidates, minimum=1)
        if self.rho is not None:
            check_positive("rho", self.rho, allow_zero=True)
        else:
            if self.rho_fraction is None:
                raise ValueError("rho and rho_fraction are both None; set one of them")
            f = check_positive("rho_fraction", self.rho_fraction, allow_zero=True)
            if f > 1:
                raise ValueError(f"rho_fraction must be in [0, 1], got {self.rho_fraction!r}")

    def fit(self, X, y):
        """Learn q on (X, y) and select the features.

        Parameters
        ----------
        X : array of shape (n, d)
        y : array of shape (n,)
            Class labels.

        Returns
        -------
        self
        """
        X, classes, t = self._fit_prepare(X, y)
        t0 = time.perf_counter()
        m = int(self.n_features)
        Nw = self.n_candidates
        if Nw is None:
            Nw = m if self.mode == "weight" else 10 * m
        seed, rng = _seeds(self.random_state)
        self.classes_ = classes
        self.bandwidth_ = _resolve_bandwidth(self.bandwidth, X, rng)
        cand = sample_initial_particles(
            FEATURE, Nw, X.shape[1], bandwidth=self.bandwidth_, seed=seed
        ).numpy()
        U, w = target_factors(t)  # the energy's own factorisation T = U diag(w) Uᵀ
        # v_k = φ_kᵀ T φ_k over blocks of candidates: memory O(n · block), not O(n N_w)
        block = max(1, (1 << 22) // max(len(X), 1))
        v = np.empty(Nw)
        for s in range(0, Nw, block):
            S = fourier_features(X, cand[s : s + block], np.ones(len(cand[s : s + block]))).T @ U
            v[s : s + block] = (S * S * w).sum(1)
        rho = self.rho if self.rho is not None else self.rho_fraction * (Nw - 1)
        q = solve_importance_weights(v, rho)
        if self.mode == "sample":
            idx = np.sort(rng.choice(Nw, size=m, replace=True, p=q))
            self.omega_ = cand[idx]
            self.feature_weights_ = np.full(m, 1.0 / math.sqrt(m))
        elif self.mode == "support":
            support = q > np.finfo(float).eps  # as Sinha & Duchi's code: alpha > eps
            self.omega_ = cand[support]
            self.feature_weights_ = np.full(int(support.sum()), 1.0 / math.sqrt(support.sum()))
        else:
            self.omega_ = cand
            self.feature_weights_ = np.sqrt(q)
        self.candidates_, self.q_, self.scores_, self.rho_ = cand, q, v, float(rho)
        self.fit_time_ = time.perf_counter() - t0
        return self


class CoulombFeatures(_FeatureLearner):
    """Random features learned as Coulomb (Riesz) particles by projected Langevin dynamics.

    Particles (frequencies and phase) start from the Gaussian-kernel draw of
    :class:`RandomFourierFeatures` and follow Algorithm 1 of THEORY §3
    (:func:`meanfield.particles.simulate`) on

        H_N(Ω) = (1/N) Σ_i V(ω_i) − A_N(Ω) + (λ/N²) Σ_{i≠j} k_s(ω_i − ω_j),

    A the kernel–target alignment of :mod:`meanfield.energy` chosen by ``alignment``
    (linear U-statistic :class:`~meanfield.energy.LinearAlignment`, the negative risk
    :class:`~meanfield.energy.RiskAlignment`, Cristianini's
    :class:`~meanfield.energy.NormalisedAlignment`, or the centred
    :class:`~meanfield.energy.CentredAlignment`), k_s the Riesz kernel
    (:class:`meanfield.kernels.Riesz`) softened by ε, and V an optional confinement.
    ``lam=0`` drops the repulsion (alignment only). The defaults are the settings of the first
    synthetic study (``paper_repro/synthetic``, linear alignment).

    ``confinement="prior"``: V(ω) = |w|²/(2 β_N) on the frequencies w = ω[:d] (standardised
    units, phase free), β_N the regime's inverse temperature (β, or β N). The Gibbs law
    ∝ exp(−β_N N H_N) of the confinement alone is then exactly the RFF prior N(0, I) ⊗ U(phase),
    and the alignment tilts it: with the linear form and λ = 0 the mean-field stationary law is
    prior · exp(β a(ω)) / Z, absolutely continuous w.r.t. the prior. At β = 1, V is the negative
    log-density of the prior, |w|²/(2 σ_w²) with σ_w = 1/σ the prior's frequency scale in the
    original units; β sets the strength of the tilt.

    ``early_stopping=True``: a stratified ``validation_fraction`` of the training rows is held
    out of the dynamics; the particles are checkpointed ``n_checkpoints`` times along the run and
    the checkpoint with the largest held-out *centred* alignment (:func:`kernel_alignment`,
    scale- and label-mean-free) is kept ("restore best": the run is not cut short, so the whole
    held-out curve is available in ``checkpoint_val_alignment_``).

    Convention: the dynamics run on standardised inputs x/σ (σ the bandwidth), so particles
    live in the box [−R, R]^(d+1) of standardised frequencies (initially N(0, I)) and phase,
    and η, R, λ, s, ε do not depend on the scale of the data. ``omega_`` is reported in the
    original units (frequencies divided by σ); distances (``min_distance_*``) are in
    standardised units, where the repulsion acts.

    Parameters
    ----------
    n_features : int >= 1
        Number m = N of particles.
    bandwidth : float > 0 or "median"
        σ of the initial Gaussian-kernel draw.
    lam : float >= 0
        Repulsion strength λ.
    s : float or None
        Riesz exponent; None means Coulomb, s = p − 2 with p = d + 1 (the default 1 is Coulomb
        for d = 2 and a longer-ranged Riesz kernel above).
    softening : float >= 0
        Softening length ε of the Riesz kernel.
    beta : float > 0
        Inverse temperature β.
    eta : float > 0
        Step size η.
    n_steps : int >= 1
        Number of Langevin steps.
    radius : float > 0 or None
        Half-width R of the box in standardised coordinates (x / σ, initial frequencies
        N(0, I)); None means 3π.
    regime : {"mean-field", "coulomb-gas"}
        Temperature scaling β_N = β or β N (THEORY §3).
    data_batch : int or None
        Mini-batch of data rows per step (None: all rows).
    alignment : {"linear", "risk", "normalised", "centred"}
        Alignment form of the energy (THEORY §2 forms 1-3, and the centred alignment).
    confinement : None or "prior"
        None: no potential (the box alone confines). "prior": V = |w|²/(2 β_N), above.
    early_stopping : bool
        Keep the checkpoint with the best held-out centred alignment.
    validation_fraction : float in (0, 1)
        Share of the training rows held out when ``early_stopping``.
    n_checkpoints : int >= 1 or None
        Checkpoints along the run (every n_steps // n_checkpoints steps, plus step 0); None
        means 10 with ``early_stopping`` and none (start and end only) without.
    random_state : int, Generator, RandomState or None
        Seed of the initial draw, the validation split and the Langevin noise.

    Attributes
    ----------
    omega_ : ndarray of shape (m, d + 1)
        Final (or, with early stopping, best) particles, original units.
    omega_init_ : ndarray of shape (m, d + 1)
        Initial particles (the RFF draw with the same seed), original units.
    feature_weights_ : ndarray of shape (m,)
        1/√m.
    alignment_init_, alignment_ : float
        The energy's alignment term, −H_align (the risk form: minus the risk), at the start and
        the end of the run, on the rows the dynamics saw.
    energy_init_, energy_ : float
        H_N before and after.
    min_distance_init_, min_distance_ : float
        Smallest pairwise particle distance before and after (of ``omega_``;
        :func:`meanfield.spacing.min_pair_distance`, NaN for a single particle).
    checkpoint_steps_ : ndarray of shape (K,)
        Steps of the checkpoints (only with checkpoints).
    checkpoints_ : ndarray of shape (K, m, d + 1)
        Particles at the checkpoints, original units (only with checkpoints).
    checkpoint_val_alignment_ : ndarray of shape (K,)
        Held-out centred alignment at each checkpoint (only with early stopping).
    best_step_ : int
        Step of the particles kept (n_steps without early stopping).
    validation_index_ : ndarray of int
        Training rows held out of the dynamics (only with early stopping).
    energy_description_ : dict
        ``Energy.describe()`` of the energy the dynamics ran on (terms and parameters).
    classes_ : ndarray
    bandwidth_, radius_, s_ : float
    n_features_in_ : int
    fit_time_ : float
        Seconds for building the energy, running the dynamics and (with early stopping)
        scoring the checkpoints.
    """

    def __init__(
        self,
        n_features=64,
        *,
        bandwidth=1.0,
        lam=0.3,
        s=1.0,
        softening=0.1,
        beta=1e3,
        eta=1.0,
        n_steps=300,
        radius=None,
        regime="mean-field",
        data_batch=None,
        alignment="linear",
        confinement=None,
        early_stopping=False,
        validation_fraction=0.2,
        n_checkpoints=None,
        random_state=None,
    ):
        self.n_features = n_features
        self.bandwidth = bandwidth
        self.lam = lam
        self.s = s
        self.softening = softening
        self.beta = beta
        self.eta = eta
        self.n_steps = n_steps
        self.radius = radius
        self.regime = regime
        self.data_batch = data_batch
        self.alignment = alignment
        self.confinement = confinement
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_checkpoints = n_checkpoints
        self.random_state = random_state

    def _check_params(self):
        super()._check_params()
        check_positive("lam (lambda)", self.lam, allow_zero=True)
        if self.s is not None:
            s = float(self.s)
            if not math.isfinite(s):
                raise ValueError(f"s must be a finite real number or None, got {self.s!r}")
        check_positive("softening (epsilon)", self.softening, allow_zero=True)
        check_positive("beta", self.beta)
        check_positive("eta", self.eta)
        check_int("n_steps", self.n_steps, minimum=1)
        if self.radius is not None:
            check_positive("radius (R)", self.radius)
        check_choice("regime", self.regime, ("mean-field", "coulomb-gas"))
        if self.data_batch is not None:
            check_int("data_batch", self.data_batch, minimum=2)
        check_choice("alignment", self.alignment, tuple(ALIGNMENTS))
        if self.confinement is not None:
            check_choice("confinement", self.confinement, ("prior",))
        if not isinstance(self.early_stopping, (bool, np.bool_)):
            raise ValueError(f"early_stopping must be True or False, got {self.early_stopping!r}")
        f = check_positive("validation_fraction", self.validation_fraction)
        if f >= 1:
            raise ValueError(
                f"validation_fraction must be in (0, 1), got {self.validation_fraction!r}"
            )
        if self.n_checkpoints is not None:
            check_int("n_checkpoints", self.n_checkpoints, minimum=1)
            if self.n_checkpoints > self.n_steps:
                raise ValueError(
                    f"n_checkpoints must be in [1, n_steps = {self.n_steps}], "
                    f"got {self.n_checkpoints}"
                )

    def fit(self, X, y):
        """Run the Langevin dynamics on (X, y).

        Parameters
        ----------
        X : array of shape (n, d)
        y : array of shape (n,)
            Class labels.

        Returns
        -------
        self
        """
        X, classes, t = self._fit_prepare(X, y)
        t0 = time.perf_counter()
        m, d = int(self.n_features), X.shape[1]
        p = d + 1
        seed, rng = _seeds(self.random_state)
        self.classes_ = classes
        self.bandwidth_ = sigma = _resolve_bandwidth(self.bandwidth, X, rng)
        # The dynamics run on standardised inputs x / σ, where the initial law is N(0, I) and
        # eta, radius, lam, s, softening are free of the data scale; ω[:d] is scaled back below.
        R = self.radius if self.radius is not None else 3.0 * math.pi
        self.radius_ = float(R)
        self.s_ = float(self.s) if self.s is not None else float(p - 2)
        domain = Box(p, self.radius_)
        omega0 = domain.project(sample_initial_particles(FEATURE, m, d, bandwidth=1.0, seed=seed))
        Z = X / sigma
        if self.early_stopping:
            fit_idx, val_idx = _stratified_split(t, self.validation_fraction, rng)
            self.validation_index_ = val_idx
            Z, t, Z_val, t_val = Z[fit_idx], t[fit_idx], Z[val_idx], t[val_idx]
        terms = [ALIGNMENTS[self.alignment](Z, t, feature=FEATURE)]
        beta_N = self.beta * (m if self.regime == "coulomb-gas" else 1)
        if self.confinement == "prior":
            terms.append(FrequencyConfinement(1.0 / beta_N))
        if self.lam > 0 and m > 1:
            terms.append(PairInteraction(Riesz(self.s_, softening=self.softening), lam=self.lam))
        energy = Energy(terms, domain=domain)
        self.energy_description_ = energy.describe()
        batch = self.data_batch if self.data_batch is None or self.data_batch < len(Z) else None
        n_ck = self.n_checkpoints
        if n_ck is None and self.early_stopping:
            n_ck = 10
        n_steps = int(self.n_steps)
        ds = simulate(
            energy,
            omega0,
            eta=self.eta,
            beta=self.beta,
            n_steps=n_steps,
            regime=self.regime,
            seed=seed,
            data_batch=batch,
            # step 0 and the last step are always recorded
            record_every=n_steps if n_ck is None else max(1, n_steps // n_ck),
            record_positions=n_ck is not None,
        )
        scale = np.concatenate([np.full(d, 1.0 / sigma), [1.0]])
        steps = np.asarray(ds["step"].values, dtype=int)
        best = len(steps) - 1
        if n_ck is not None:
            path = np.asarray(ds["omega"].values, dtype=float)  # (K, m, p), standardised
            self.checkpoint_steps_ = steps
            self.checkpoints_ = path * scale
            if self.early_stopping:
                val = np.array(
                    [
                        kernel_alignment(fourier_features(Z_val, w), t_val, centred=True)
                        for w in path
                    ]
                )
                self.checkpoint_val_alignment_ = val
                best = int(np.argmax(val))
            omega = path[best]
        else:
            omega = np.asarray(ds["omega_final"].values, dtype=float)
        self.best_step_ = int(steps[best])
        self.fit_time_ = time.perf_counter() - t0
        # the recorded terms are on the rows the dynamics saw: alignment = −term
        self.alignment_init_ = float(-ds["energy_alignment"].isel(time=0))
        self.alignment_ = float(-ds["energy_alignment"].isel(time=best))
        self.energy_init_ = float(ds["energy"].isel(time=0))
        self.energy_ = float(ds["energy"].isel(time=best))
        # distances are measured where the repulsion acts: standardised coordinates
        self.min_distance_init_ = min_pair_distance(omega0.numpy())
        self.min_distance_ = min_pair_distance(omega)
        self.omega_init_ = omega0.numpy() * scale
        self.omega_ = omega * scale
        self.feature_weights_ = np.full(m, 1.0 / math.sqrt(m))
        return self


#: The alignment forms of :class:`CoulombFeatures` (terms of :mod:`meanfield.energy`).
ALIGNMENTS = {
    "linear": LinearAlignment,
    "risk": RiskAlignment,
    "normalised": NormalisedAlignment,
    "centred": CentredAlignment,
}


class FrequencyConfinement(Potential):
    """V(ω) = strength · |ω[:d]|²/2: a Gaussian confinement of the frequencies, phase free.

    For ``"fourier"`` particles ω = (w, b) ∈ R^(d+1); the phase b (last coordinate) feels no
    force, so with strength 1/β_N the Gibbs law exp(−β_N Σ_i V(ω_i)) is the RFF prior
    N(0, I_d) ⊗ uniform phase on the box (see :class:`CoulombFeatures`).

    Parameters
    ----------
    strength : float > 0
    """

    def __init__(self, strength: float):
        self.strength = check_positive("strength", strength)

    def V(self, omega):
        return 0.5 * self.strength * (omega[..., :-1] ** 2).sum(-1)

    def gradV(self, omega):
        g = self.strength * omega
        g[..., -1] = 0.0
        return g

    def describe(self):
        return {"potential": "frequency_prior", "strength": self.strength}


def _stratified_split(t, fraction: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """Indices (fit, validation) with about ``fraction`` of every class held out (>= 1 each).

    Raises
    ------
    ValueError
        If a class has fewer than 2 rows, or either part would be smaller than 2 rows.
    """
    fit, val = [], []
    for c in np.unique(t):
        idx = np.flatnonzero(t == c)
        if len(idx) < 2:
            raise ValueError(
                f"early_stopping needs >= 2 training rows per class; class {c} has {len(idx)}"
            )
        idx = rng.permutation(idx)
        k = min(len(idx) - 1, max(1, int(round(fraction * len(idx)))))
        val.append(idx[:k])
        fit.append(idx[k:])
    fit, val = np.sort(np.concatenate(fit)), np.sort(np.concatenate(val))
    if len(fit) < 2 or len(val) < 2:
        raise ValueError(
            f"early_stopping with validation_fraction={fraction} leaves {len(fit)} rows for the "
            f"dynamics and {len(val)} held out; both must be >= 2"
        )
    return fit, val


# ----------------------------------------------------------------------------------------
# downstream classifier
# ----------------------------------------------------------------------------------------
class RidgeFeatureClassifier(ClassifierMixin, BaseEstimator):
    """Ridge classification in closed form on given features, α fixed or chosen by exact LOO.

    Targets are ±1 (binary: the larger label is +1; C ≥ 3: one-vs-all columns). With the
    features and targets centred (when ``fit_intercept=True``), the coefficients minimise
    ‖Φ W − Y‖²_F + α ‖W‖²_F. With the thin SVD Φ_c = U diag(s) Vᵀ,

        W = V diag(s / (s² + α)) Uᵀ Y_c,

    the same objective as scikit-learn's ``RidgeClassifier``. When ``alpha`` is a sequence,
    each candidate is scored by the exact leave-one-out squared error of the ±1 targets,
    Σ_j ((y_j − ŷ_j)/(1 − h_jj))², h_jj = Σ_k U_jk² s_k²/(s_k² + α) + 1/n (the hat matrix of
    the centred fit plus the intercept), and the best is refitted: no data are held out, and
    every learner gets the same selection rule.

    Parameters
    ----------
    alpha : float >= 0, or sequence of floats >= 0
        Ridge penalty α, or candidates for the leave-one-out choice.
    fit_intercept : True, False or "label_mean"
        True: centre features and targets and fit the intercept (scikit-learn's convention).
        False: no centring, no intercept. "label_mean": Sinha & Duchi's published convention —
        the features are *not* centred, the targets are centred by their mean ȳ, and the
        intercept is ȳ (not fitted): W = (ΦᵀΦ + α I)⁻¹ Φᵀ(Y − ȳ), scores ΦW + ȳ.

    Attributes
    ----------
    coef_ : ndarray of shape (1, m) (binary) or (C, m)
    intercept_ : ndarray of shape (1,) or (C,)
    alpha_ : float
        The penalty used.
    loo_errors_ : ndarray of shape (n_alphas,)
        Mean leave-one-out squared error per candidate (only when ``alpha`` is a sequence).
    classes_ : ndarray of shape (C,)
    n_features_in_ : int
    """

    def __init__(self, alpha=1.0, *, fit_intercept=True):
        self.alpha = alpha
        self.fit_intercept = fit_intercept

    def fit(self, X, y):
        """Fit the coefficients.

        Parameters
        ----------
        X : array of shape (n, m)
        y : array of shape (n,)

        Returns
        -------
        self
        """
        _check_lengths(X, y)
        alphas = np.atleast_1d(np.asarray(self.alpha, dtype=float))
        if alphas.ndim != 1 or alphas.size == 0:
            raise ValueError(
                f"alpha must be a number >= 0 or a 1-d sequence of them, got {self.alpha!r}"
            )
        for a in alphas:
            check_positive("alpha", a, allow_zero=True)
        intercept = self.fit_intercept
        if isinstance(intercept, (bool, np.bool_)):
            intercept = bool(intercept)
        elif intercept != "label_mean":
            raise ValueError(
                f"fit_intercept must be True, False or 'label_mean', got {self.fit_intercept!r}"
            )
        classes, _ = _encode_labels(y, type(self).__name__)
        X = _validate_data(self, X, reset=True, dtype=np.float64)
        y = column_or_1d(y)
        ids = np.searchsorted(classes, y)
        if len(classes) == 2:
            Y = np.where(ids == 1, 1.0, -1.0)[:, None]
        else:
            Y = np.where(ids[:, None] == np.arange(len(classes))[None, :], 1.0, -1.0)
        n = X.shape[0]
        xm, ym = np.zeros(X.shape[1]), np.zeros(Y.shape[1])
        if intercept is True:
            xm, ym = X.mean(0), Y.mean(0)
        elif intercept == "label_mean":
            ym = Y.mean(0)
        Xc, Yc = X - xm, Y - ym
        U, sv, Vt = np.linalg.svd(Xc, full_matrices=False)
        keep = sv > sv.max(initial=0.0) * max(Xc.shape) * np.finfo(float).eps
        U, sv, Vt = U[:, keep], sv[keep], Vt[keep]
        UtY = U.T @ Yc
        if alphas.size > 1:
            errs = np.empty(alphas.size)
            for i, a in enumerate(alphas):
                f = sv**2 / (sv**2 + a)
                resid = Yc - U @ (f[:, None] * UtY)
                h = (U * U) @ f + (1.0 / n if intercept is True else 0.0)
                errs[i] = np.mean((resid / np.maximum(1.0 - h, 1e-12)[:, None]) ** 2)
            self.loo_errors_ = errs
            alpha = float(alphas[int(np.argmin(errs))])
        else:
            alpha = float(alphas[0])
        W = Vt.T @ ((sv / (sv**2 + alpha))[:, None] * UtY)
        self.alpha_ = alpha
        self.classes_ = classes
        self.coef_ = W.T
        self.intercept_ = ym - xm @ W
        return self

    def decision_function(self, X):
        """Scores, shape (n,) for two classes (positive means ``classes_[1]``), else (n, C)."""
        check_is_fitted(self, "coef_")
        X = _validate_data(self, X, reset=False, dtype=np.float64)
        s = X @ self.coef_.T + self.intercept_
        return s[:, 0] if s.shape[1] == 1 else s

    def predict(self, X):
        """Predicted labels, shape (n,)."""
        s = self.decision_function(X)
        if s.ndim == 1:
            return self.classes_[(s > 0).astype(int)]
        return self.classes_[np.argmax(s, axis=1)]


# ----------------------------------------------------------------------------------------
# evaluation
# ----------------------------------------------------------------------------------------
def evaluate(
    learner,
    X_train,
    y_train,
    X_test,
    y_test,
    *,
    classifiers=("ridge", "logistic"),
    ridge_alpha="loo",
    logistic_C: float = 100.0,
) -> dict:
    """Fit ``learner`` on the training split, then the downstream classifiers on its features.

    Parameters
    ----------
    learner : feature learner (unfitted)
    X_train : array (n_train, d)
    y_train : array (n_train,)
    X_test : array (n_test, d)
    y_test : array (n_test,)
    classifiers : subset of {"ridge", "logistic"}
    ridge_alpha : float, sequence of floats, or "loo"
        α of :class:`RidgeFeatureClassifier`; a sequence is chosen from by exact leave-one-out;
        "loo" means the candidates n_train · 10^k, k = −7, −6.5, …, 0 (the learned kernel
        matrix has trace about n_train, so this spans no to heavy shrinkage).
    logistic_C : float
        Inverse penalty of scikit-learn's ``LogisticRegression`` (lbfgs).

    Returns
    -------
    dict
        ``fit_time`` (kernel training, s), ``alignment_train``/``alignment_test`` (Cristianini),
        and for each classifier c: ``{c}_train_accuracy``, ``{c}_test_accuracy``,
        ``{c}_test_error``.
    """
    from sklearn.linear_model import LogisticRegression

    for c in classifiers:
        check_choice("classifier", c, ("ridge", "logistic"))
    learner.fit(X_train, y_train)
    F_tr, F_te = learner.transform(X_train), learner.transform(X_test)
    out = {
        "fit_time": float(learner.fit_time_),
        "alignment_train": kernel_alignment(F_tr, y_train),
        "alignment_test": kernel_alignment(F_te, y_test),
    }
    for c in classifiers:
        if c == "ridge":
            clf = RidgeFeatureClassifier(alpha=_ridge_alphas(ridge_alpha, len(F_tr)))
        else:
            clf = LogisticRegression(C=logistic_C, max_iter=2000)
        clf.fit(F_tr, y_train)
        acc_tr = float(np.mean(clf.predict(F_tr) == np.asarray(y_train)))
        acc_te = float(np.mean(clf.predict(F_te) == np.asarray(y_test)))
        out[f"{c}_train_accuracy"] = acc_tr
        out[f"{c}_test_accuracy"] = acc_te
        out[f"{c}_test_error"] = 1.0 - acc_te
        if c == "ridge":
            out["ridge_alpha"] = float(clf.alpha_)
    return out


def _ridge_alphas(ridge_alpha, n: int):
    """α of :class:`RidgeFeatureClassifier`: "loo" means the candidates n · 10^k, k = −7 … 0."""
    if isinstance(ridge_alpha, str):
        check_choice("ridge_alpha", ridge_alpha, ("loo",))
        return n * np.logspace(-7, 0, 15)
    return ridge_alpha


# ----------------------------------------------------------------------------------------
# hyper-parameter selection
# ----------------------------------------------------------------------------------------
def feature_pipeline(learner, *, ridge_alpha="loo", n_train: int = 1000, fit_intercept=True):
    """``Pipeline([("features", learner), ("ridge", RidgeFeatureClassifier)])``.

    Parameters
    ----------
    learner : feature learner
    ridge_alpha : float, sequence or "loo"
        As in :func:`evaluate` ("loo": n_train · 10^[−7..0], chosen by exact leave-one-out
        inside every fit).
    n_train : int
        Rows the ridge will see (sets the "loo" grid).
    fit_intercept : True, False or "label_mean"
    """
    from sklearn.pipeline import Pipeline

    ridge = RidgeFeatureClassifier(
        alpha=_ridge_alphas(ridge_alpha, n_train), fit_intercept=fit_intercept
    )
    return Pipeline([("features", learner), ("ridge", ridge)])


def select_by_cv(
    learner, param_grid, X, y, *, cv: int = 3, random_state: int = 0, ridge_alpha="loo"
) -> dict:
    """Choose ``learner``'s hyper-parameters by stratified k-fold CV on (X, y) only.

    scikit-learn's ``GridSearchCV`` on :func:`feature_pipeline` (accuracy of the ridge
    classifier on the held-out fold; ties go to the first candidate), without refitting: the
    caller refits the chosen learner on all of (X, y). The same rule serves every learner, so
    none is tuned on test data or left at a default while another is tuned.

    Parameters
    ----------
    learner : feature learner (unfitted; its other parameters are kept)
    param_grid : dict or list of dicts
        Learner parameters (without the ``features__`` prefix), as for ``GridSearchCV``; a list
        of dicts compares variants with different parameter sets.
    X : array of shape (n, d)
    y : array of shape (n,)
    cv : int >= 2
        Folds.
    random_state : int
        Seed of the fold shuffle.
    ridge_alpha : float, sequence or "loo"

    Returns
    -------
    dict
        ``best_params`` (learner parameters), ``best_score`` (mean CV accuracy), ``params``
        and ``mean_test_score`` (every candidate, in grid order), ``std_test_score``.
    """
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    cv = check_int("cv (folds)", cv, minimum=2)
    grids = [param_grid] if isinstance(param_grid, dict) else list(param_grid)
    if not grids or not all(isinstance(g, dict) for g in grids):
        raise ValueError("param_grid must be a dict or a non-empty list of dicts")
    _check_lengths(X, y)
    prefixed = [{f"features__{k}": list(v) for k, v in g.items()} for g in grids]
    n_fold = int(len(X) * (cv - 1) / cv)
    search = GridSearchCV(
        feature_pipeline(learner, ridge_alpha=ridge_alpha, n_train=n_fold),
        prefixed,
        cv=StratifiedKFold(cv, shuffle=True, random_state=random_state),
        scoring="accuracy",
        refit=False,
        error_score="raise",
    )
    search.fit(X, y)
    res = search.cv_results_
    strip = len("features__")
    params = [{k[strip:]: v for k, v in p.items()} for p in res["params"]]
    # the first best in grid order (GridSearchCV's rank breaks ties the same way)
    best = int(np.flatnonzero(res["rank_test_score"] == 1)[0])
    return {
        "best_params": params[best],
        "best_score": float(res["mean_test_score"][best]),
        "params": params,
        "mean_test_score": np.asarray(res["mean_test_score"], dtype=float),
        "std_test_score": np.asarray(res["std_test_score"], dtype=float),
    }
