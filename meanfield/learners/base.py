"""The fit/transform plumbing that every feature learner shares (scikit-learn contract)."""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from meanfield._validation import check_int

from ._common import (
    _check_lengths,
    _encode_labels,
    _resolve_bandwidth,
    _seeds,
    _validate_data,
    fourier_features,
)


class _FeatureLearner(TransformerMixin, BaseEstimator):
    """Shared fit/transform plumbing: validation, bandwidth, timing, transform."""

    _requires_y = True

    def _check_params(self):
        check_int("n_features (m)", self.n_features, minimum=1)

    def _fit_start(self, X, y):
        """Checks, labels, seeds and bandwidth: what every ``fit`` does first, in this order.

        Sets ``classes_`` (learners that use labels) and ``bandwidth_``.

        Returns
        -------
        X : ndarray (n, d)
        t : ndarray (n,) or None
            ±1 or class ids (:func:`~meanfield.learners._common._encode_labels`).
        t0 : float
            ``time.perf_counter()`` after the checks (the start of ``fit_time_``).
        seed : int
        rng : numpy Generator
        """
        _check_lengths(X, y)
        self._check_params()
        X = _validate_data(self, X, reset=True, dtype=np.float64)
        classes, t = _encode_labels(y, type(self).__name__) if self._requires_y else (None, None)
        if self._requires_y and len(X) < 2:
            raise ValueError(f"n_samples = {len(X)}: at least 2 samples are needed")
        t0 = time.perf_counter()
        seed, rng = _seeds(self.random_state)
        if self._requires_y:
            self.classes_ = classes
        self.bandwidth_ = _resolve_bandwidth(self.bandwidth, X, rng)
        return X, t, t0, seed, rng

    def transform(self, X):
        """Features Φ of shape (n, m): Φ_ji = w_i φ(x_j; ω_i).

        Parameters
        ----------
        X : array of shape (n, d)
            Inputs.

        Returns
        -------
        ndarray of shape (n, n_features_out_)
            One column per kept feature.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.learners import RandomFourierFeatures
        >>> X = np.random.default_rng(0).normal(size=(5, 2))
        >>> Phi = RandomFourierFeatures(n_features=3, random_state=0).fit(X).transform(X)
        >>> Phi.shape, bool(np.all(np.abs(Phi) <= np.sqrt(2 / 3)))  # √(2/m) cos(·)
        ((5, 3), True)
        """
        check_is_fitted(self, "omega_")
        X = _validate_data(self, X, reset=False, dtype=np.float64)
        return fourier_features(X, self.omega_, self.feature_weights_)

    def get_feature_names_out(self, input_features=None):
        """Output column names: the lower-cased class name and the feature index.

        Parameters
        ----------
        input_features : ignored
            Accepted for the scikit-learn API.

        Returns
        -------
        ndarray of str objects, shape (n_features_out_,)

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.learners import RandomFourierFeatures
        >>> rff = RandomFourierFeatures(n_features=2, random_state=0).fit(np.zeros((3, 1)))
        >>> rff.get_feature_names_out().tolist()
        ['randomfourierfeatures0', 'randomfourierfeatures1']
        """
        check_is_fitted(self, "omega_")
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self.omega_.shape[0])], dtype=object)

    def kernel(self, X, X2=None):
        """Learned kernel matrix K = Φ(X) Φ(X2)ᵀ, shape (n, n2).

        Parameters
        ----------
        X : array of shape (n, d)
            Inputs x.
        X2 : array of shape (n2, d), optional
            Inputs x' (default ``X``).

        Returns
        -------
        ndarray of shape (n, n2)
            K(x_j, x'_k) = Σ_i w_i² φ(x_j; ω_i) φ(x'_k; ω_i).

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.learners import RandomFourierFeatures
        >>> X = np.random.default_rng(0).normal(size=(4, 2))
        >>> K = RandomFourierFeatures(n_features=500, random_state=0).fit(X).kernel(X)
        >>> K.shape, bool(np.allclose(K, K.T))
        ((4, 4), True)
        """
        P = self.transform(X)
        return P @ (P if X2 is None else self.transform(X2)).T

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self._requires_y
        tags.input_tags.allow_nan = False
        return tags

    def _more_tags(self):  # scikit-learn < 1.6
        return {"requires_y": self._requires_y}
