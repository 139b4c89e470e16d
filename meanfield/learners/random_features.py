"""Label-blind and importance-sampled random Fourier features (Rahimi & Recht; Sinha & Duchi)."""

from __future__ import annotations

import math
import time

import numpy as np

from meanfield._validation import check_choice, check_int, check_positive
from meanfield.energy import target_factors
from meanfield.features import sample_initial_particles

from ._common import FEATURE, fourier_features
from .base import _FeatureLearner
from .importance_qp import solve_importance_weights

__all__ = ["ImportanceSampledFeatures", "RandomFourierFeatures"]


class RandomFourierFeatures(_FeatureLearner):
    r"""Fixed random Fourier features for the Gaussian kernel exp(−‖x − x'‖²/(2σ²)).

    ω ~ N(0, σ⁻² I_d) and phase b ~ U[−π, π) (:func:`meanfield.features.sample_initial_particles`);
    features √(2/m) cos(ωᵀx + b). The labels are not used.

    .. math::

        \Phi_{ji} = \sqrt{2/m}\, \cos(\omega_i^\top x_j + b_i), \qquad
        (\Phi \Phi^\top)_{jk} \to e^{-|x_j - x_k|^2 / (2\sigma^2)} \quad (m \to \infty).

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

    See Also
    --------
    ImportanceSampledFeatures, CoulombFeatures : learners that start from the same draw.
    meanfield.features.FourierFeatures : the feature map φ (a particle at a time).
    median_bandwidth : the ``"median"`` bandwidth.

    References
    ----------
    .. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(20, 2))
    >>> rff = RandomFourierFeatures(n_features=8, random_state=0).fit(X)
    >>> rff.transform(X).shape, rff.omega_.shape
    ((20, 8), (8, 3))
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
            Training inputs (their dimension, and their scale with ``bandwidth="median"``).
        y : ignored
            Accepted for the scikit-learn API.

        Returns
        -------
        self
            Fitted: ``omega_`` (m, d + 1) and ``feature_weights_`` 1/√m.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.learners import RandomFourierFeatures
        >>> rff = RandomFourierFeatures(n_features=4, bandwidth=2.0, random_state=0)
        >>> rff = rff.fit(np.zeros((5, 3)))
        >>> rff.omega_.shape, rff.bandwidth_, rff.feature_weights_.tolist()
        ((4, 4), 2.0, [0.5, 0.5, 0.5, 0.5])
        """
        X, _, t0, seed, _ = self._fit_start(X, y)
        m = int(self.n_features)
        self.omega_ = sample_initial_particles(
            FEATURE, m, X.shape[1], bandwidth=self.bandwidth_, seed=seed
        ).numpy()
        self.feature_weights_ = np.full(m, 1.0 / math.sqrt(m))
        self.fit_time_ = time.perf_counter() - t0
        return self


class ImportanceSampledFeatures(_FeatureLearner):
    r"""Importance-sampled random features (Sinha & Duchi 2016).

    Draws N_w candidates ω_k from the Gaussian-kernel law of :class:`RandomFourierFeatures`,
    scores each by v_k = φ_kᵀ T φ_k with φ_k = (φ(x_j; ω_k))_j (binary: (Σ_j y_j φ(x_j;
    ω_k))², diagonal j = k included as in the paper), solves
    max_q vᵀq over the simplex with ‖q − 1/N_w‖² ≤ ρ/N_w (:func:`solve_importance_weights`),

    .. math::

        v_k = \varphi_k^\top T \varphi_k, \qquad
        q = \arg\max_{q \in \Delta_{N_w},\ \|q - \mathbf 1/N_w\|^2 \le \rho/N_w} v^\top q,

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
        Kernel width σ of the candidates' law, as in :class:`RandomFourierFeatures`.
    random_state : int, Generator, RandomState or None
        Seed of every random choice: the candidates, the draw from q (``mode="sample"``).

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

    See Also
    --------
    solve_importance_weights : the weights q.
    RandomFourierFeatures : the candidates' law, unweighted.
    CoulombFeatures : particles moved by dynamics instead.

    References
    ----------
    .. [1] A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(40, 2))
    >>> y = np.where(X[:, 0] > 0, 1, -1)
    >>> isf = ImportanceSampledFeatures(n_features=8, random_state=0).fit(X, y)
    >>> isf.transform(X).shape, round(float(isf.q_.sum()), 12), isf.candidates_.shape
    ((40, 8), 1.0, (80, 3))
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
            Training inputs.
        y : array of shape (n,)
            Class labels.

        Returns
        -------
        self
            Fitted: ``q_``, ``scores_``, ``candidates_`` and the selected ``omega_``.

        Examples
        --------
        With ``mode="weight"`` every candidate is kept with weight √q_k, so the squared
        weights sum to 1:

        >>> import numpy as np
        >>> from meanfield.learners import ImportanceSampledFeatures
        >>> X = np.random.default_rng(0).normal(size=(40, 2))
        >>> y = np.where(X[:, 0] > 0, 1, -1)
        >>> isf = ImportanceSampledFeatures(n_features=6, mode="weight", random_state=0)
        >>> isf = isf.fit(X, y)
        >>> isf.omega_.shape, round(float((isf.feature_weights_**2).sum()), 12)
        ((6, 3), 1.0)
        """
        X, t, t0, seed, rng = self._fit_start(X, y)
        m = int(self.n_features)
        Nw = self.n_candidates
        if Nw is None:
            Nw = m if self.mode == "weight" else 10 * m
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
