"""Kernel learners on random Fourier features, with the scikit-learn estimator contract.

Three ways to choose m features φ(x; ω_i) = √2 cos(ω_i[:d]ᵀ x + ω_i[d]) (the ``"fourier"``
map of :mod:`meanfield.features`, used by every learner so the comparison is fair):

- :class:`RandomFourierFeatures`: fixed ω ~ N(0, σ⁻² I_d), phase ~ U[−π, π): the Gaussian
  kernel of bandwidth σ, blind to the labels;
- :class:`ImportanceSampledFeatures`: Sinha & Duchi (2016): draw N_w candidates from the same
  law, reweight them by the χ²-constrained alignment maximiser q (:func:`solve_importance_weights`),
  then resample m of them from q (or keep them weighted by √q);
- :class:`CoulombFeatures`: m particles started from the fixed draw and moved by the projected
  Langevin dynamics of :mod:`meanfield.dynamics.langevin` on the energy of :mod:`meanfield.energy`,
  H = −(linear alignment) + λ · (Riesz repulsion), on a box domain (THEORY §2-3). ``lam=0``
  is the same dynamics without repulsion.

Every learner's ``transform`` returns Φ of shape (n, m) with Φ_ji = w_i φ(x_j; ω_i), where
w_i = 1/√m (uniform) or √q_i (importance weights), so Φ Φᵀ is the learned kernel matrix.

Downstream: :class:`RidgeFeatureClassifier` (closed-form ridge, one-vs-all ±1 targets) and
scikit-learn's logistic regression, through :func:`evaluate`.

Which "features": here, as in scikit-learn, the *features* are the m columns of Φ that
``transform`` returns (one per particle ω_i), and ``n_features`` is m; the data dimension d is
scikit-learn's ``n_features_in_``. The map φ(x; ω) of one particle is a *feature map* of
:mod:`meanfield.features` (the mean-field one); the *attention feature maps* of
:mod:`meanfield.attention.features` (a whole matrix Ω per query or key) are a third meaning,
not used here.

Labels: two classes are treated as ±1 (the larger class label is +1), C ≥ 3 classes as class
ids with the target T_jk = 1 if y_j = y_k else −1/(C−1) (THEORY §1).

The package's modules, one job each (every public name is re-exported here):

``_common``
    Input checks, label encoding, the median bandwidth, the feature matrix Φ.
``importance_qp``
    The χ²-constrained programme of the importance weights (simplex projection from
    :mod:`meanfield.simplex`).
``metric``
    :func:`kernel_alignment`, the Cristianini alignment of :mod:`meanfield.alignment`.
``base``, ``random_features``, ``coulomb``
    The estimators: shared fit/transform plumbing, the two random-feature learners, the
    Langevin-learned particles.
``directions``
    :class:`DirectionFrame`, the frame potential of the frequency directions (a repulsion on
    the projective sphere, ``CoulombFeatures(direction_repulsion=...)``).
``ridge``
    :class:`RidgeFeatureClassifier`.
``evaluation``
    :func:`make_learner`, :func:`evaluate`, :func:`feature_pipeline`, :func:`select_by_cv`.

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

from ._common import FEATURE, fourier_features, median_bandwidth
from .coulomb import ALIGNMENTS, CoulombFeatures, FrequencyConfinement
from .directions import DirectionFrame
from .evaluation import LEARNER_NAMES, evaluate, feature_pipeline, make_learner, select_by_cv
from .importance_qp import project_simplex, solve_importance_weights
from .metric import kernel_alignment
from .random_features import ImportanceSampledFeatures, RandomFourierFeatures
from .ridge import RidgeFeatureClassifier

__all__ = [
    "ALIGNMENTS",
    "FEATURE",
    "LEARNER_NAMES",
    "CoulombFeatures",
    "DirectionFrame",
    "FrequencyConfinement",
    "ImportanceSampledFeatures",
    "RandomFourierFeatures",
    "RidgeFeatureClassifier",
    "evaluate",
    "feature_pipeline",
    "fourier_features",
    "kernel_alignment",
    "make_learner",
    "median_bandwidth",
    "project_simplex",
    "select_by_cv",
    "solve_importance_weights",
]
