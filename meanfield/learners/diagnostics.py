"""What learning moved: counterfactual recombinations of learned random-feature particles
([1]_, [2]_), the isotropy of their directions, their displacement from the draw they started
from.

A learned particle set ω¹ = (w¹, b¹) and its start ω⁰ = (w⁰, b⁰) (frequencies, then the
phase; one particle each, matched by row), with u = w/|w|, give the recombined sets of
:func:`counterfactuals`:

=====================  =============================================  ==========================
set                    frequencies, phase                             isolates
=====================  =============================================  ==========================
``rff``                w⁰, b⁰                                         the start
``learned``            w¹, b¹                                         the learned particles
``learned_w_prior_b``  w¹, b⁰                                         the learned phases
``norms_only``         |w¹| u⁰, b⁰ (learned norms, prior directions)  the norms
``directions_only``    |w⁰| u¹, b⁰ (prior norms, learned directions)  the directions
``narrowed``           c w⁰, b⁰, c = median|w¹| / median|w⁰|          a kernel narrowed as much
=====================  =============================================  ==========================

:func:`isotropy` is d times the largest eigenvalue of the directions' second moment (1 for an
isotropic law, d on one axis); :func:`energy_distance` [4]_ measures how far a particle cloud
moved; :func:`moved` compares the final cloud with the initial one and with an independent
redraw (energy distance, displacement, norms, centred alignments [3]_);
:func:`alignment_plateau` says whether a run levelled off. Every feature set is scored by the
exact leave-one-out ridge over the penalties of :func:`ridge_alphas`, the grid that
:mod:`meanfield.learners.tuning` scores its tuned learners with too (the searches build on
these measurements, never the reverse).

See Also
--------
meanfield.learners.CoulombFeatures : the learner whose particles these describe.
meanfield.learners.tuning : the hyper-parameter searches (which import these measurements).
meanfield.studies.synthetic : the study's diagnosis design.

References
----------
.. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.
.. [2] A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.
.. [3] C. Cortes, M. Mohri and A. Rostamizadeh, "Algorithms for learning kernels based on
   centered alignment", JMLR 13 (2012).
.. [4] G. J. Székely and M. L. Rizzo, "Energy statistics: a class of statistics based on
   distances", J. Stat. Plan. Inference 143 (2013).

Examples
--------
>>> import numpy as np
>>> from meanfield.learners.diagnostics import counterfactuals
>>> w0 = np.array([[3.0, 4.0, 0.1]]); w1 = np.array([[0.0, 10.0, 0.2]])
>>> cf = counterfactuals(w0, w1, d=2)
>>> cf["norms_only"].tolist(), cf["directions_only"].tolist()
([[6.0, 8.0, 0.1]], [[0.0, 5.0, 0.1]])
"""

from __future__ import annotations

import numpy as np

from .._validation import check_int, check_sample
from ..errors import InputError

__all__ = [
    "ridge_alphas",
    "energy_distance",
    "counterfactuals",
    "counterfactual_scores",
    "isotropy",
    "moved",
    "alignment_plateau",
]


def ridge_alphas(n: int) -> np.ndarray:
    """A wide grid of ridge penalties for leave-one-out selection: n · 10^k, k = −12, −11.5, …, 1.

    Wider than n · 10^[−7..0]: with a wide Gaussian kernel the features are
    nearly collinear and the leave-one-out choice went to the old grid's lowest value.

    Parameters
    ----------
    n : int >= 1
        Rows the ridge sees.

    Returns
    -------
    ndarray of shape (27,)

    Raises
    ------
    meanfield.errors.InputTypeError, meanfield.errors.InputError
        ``n`` is not an integer >= 1.

    See Also
    --------
    RidgeFeatureClassifier : its leave-one-out selection over such a grid.
    meanfield.learners.tuning.ridge_errors : the test errors over a grid.

    Examples
    --------
    >>> a = ridge_alphas(1000)
    >>> len(a), float(a[0]), float(a[-1])
    (27, 1e-09, 10000.0)
    """
    n = check_int("n", n, minimum=1)
    return n * 10.0 ** np.arange(-12.0, 1.25, 0.5)


def energy_distance(a, b) -> float:
    """Energy distance between two point clouds: 2 E|A − B| − E|A − A'| − E|B − B'| (V-statistics).

    Zero iff the two empirical laws are equal; between two independent draws of one law it is
    of the order of the sampling noise, which is the yardstick the study compares with.

    Parameters
    ----------
    a : array of shape (m, p)
    b : array of shape (k, p)

    Returns
    -------
    float >= 0

    Raises
    ------
    meanfield.errors.InputError
        An empty cloud, one not of two dimensions, a NaN or inf coordinate, or clouds of
        different dimensions p.

    See Also
    --------
    moved : the energy distance of a learner's particles from their start.

    References
    ----------
    .. [1] G. J. Székely and M. L. Rizzo, "Energy statistics: a class of statistics based on
       distances", J. Stat. Plan. Inference 143(8), 1249–1272, 2013.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.random.default_rng(0).normal(size=(200, 3))
    >>> energy_distance(a, a), energy_distance(a, a + 3.0) > 1.0
    (0.0, True)
    """
    from scipy.spatial.distance import cdist

    a, b = check_sample("a", a, ndim=2), check_sample("b", b, ndim=2)
    if a.shape[1] != b.shape[1]:
        raise InputError(f"a and b must have one dimension p, got shapes {a.shape} and {b.shape}")
    return float(max(0.0, 2 * cdist(a, b).mean() - cdist(a, a).mean() - cdist(b, b).mean()))


def counterfactuals(omega0, omega1, d: int) -> dict:
    """The recombined particle sets of the module's table (frequencies in any units: the
    construction is scale-equivariant), from the start ``omega0`` and the learned ``omega1``.

    Parameters
    ----------
    omega0, omega1 : arrays of shape (m, d + 1)
        Initial and learned particles (frequencies, then the phase), matched by row.
    d : int
        Input dimension.

    Returns
    -------
    dict
        ``rff``, ``learned``, ``learned_w_prior_b``, ``norms_only``, ``directions_only``,
        ``narrowed`` (arrays of shape (m, d + 1)) and the narrowing factor ``c``.

    See Also
    --------
    isotropy : how far from isotropic the learned directions are.
    moved : how far the learned particles moved.
    CoulombFeatures : the learner whose particles they recombine.

    Examples
    --------
    >>> import numpy as np
    >>> w0 = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 1.0]]); w1 = 3 * w0
    >>> float(counterfactuals(w0, w1, 2)["c"])
    3.0
    """
    w0, b0 = np.asarray(omega0)[:, :d], np.asarray(omega0)[:, d:]
    w1, b1 = np.asarray(omega1)[:, :d], np.asarray(omega1)[:, d:]
    n0 = np.linalg.norm(w0, axis=1, keepdims=True)
    n1 = np.linalg.norm(w1, axis=1, keepdims=True)
    u0, u1 = w0 / n0, w1 / n1
    c = float(np.median(n1) / np.median(n0))
    return {
        "rff": np.c_[w0, b0],
        "learned": np.c_[w1, b1],
        "learned_w_prior_b": np.c_[w1, b0],
        "norms_only": np.c_[n1 * u0, b0],
        "directions_only": np.c_[n0 * u1, b0],
        "narrowed": np.c_[c * w0, b0],
        "c": c,
    }


def isotropy(omega, d: int) -> float:
    """d times the largest eigenvalue of the directions' second moment (1/m) Σ u uᵀ: 1 for an
    isotropic law, d when every direction lies on one axis.

    Parameters
    ----------
    omega : array of shape (m, >= d)
    d : int

    Returns
    -------
    float in [1, d]

    See Also
    --------
    counterfactuals : the particle sets with learned or prior directions.
    meanfield.learners.DirectionFrame : a repulsion that keeps the directions spread.

    Examples
    --------
    >>> import numpy as np
    >>> isotropy(np.array([[1.0, 0.0], [-2.0, 0.0]]), 2), isotropy(np.eye(2), 2)
    (2.0, 1.0)
    """
    w = np.asarray(omega, dtype=float)[:, :d]
    u = w / np.linalg.norm(w, axis=1, keepdims=True)
    return float(d * np.linalg.eigvalsh(u.T @ u / len(u)).max())


def moved(est, sigma: float, X, y, X_test, y_test, redraw) -> dict:
    """How far a Coulomb learner moved its particles from the RFF draw it started from.

    In standardised frequencies (σ w, initially N(0, I)): the mean particle displacement
    ``disp`` and the energy distance ``ed`` between the final and the initial clouds, each
    beside the same quantity for an independent prior draw ``redraw`` (a redraw moves every
    particle as far, but leaves the law where it was: ``ed_redraw`` is the sampling noise);
    ``norm_ratio`` (median σ|w| final / initial); ``iso``/``iso_init``, d times the largest
    eigenvalue of the directions' second moment (1 isotropic, d one axis); the centred
    alignment of the initial and final features on the training and the test rows.

    Parameters
    ----------
    est : fitted CoulombFeatures
    sigma : float
        The bandwidth of the initial draw.
    X, y, X_test, y_test : arrays
        Training and test rows.
    redraw : array of shape (m, d + 1)
        An independent draw of the same prior, original units.

    Returns
    -------
    dict

    See Also
    --------
    energy_distance, isotropy : the measurements it reports.
    alignment_plateau : whether the run levelled off.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.learners import CoulombFeatures, RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> est = CoulombFeatures(8, n_steps=5, random_state=0).fit(X, y)
    >>> red = RandomFourierFeatures(8, random_state=9).fit(X).omega_
    >>> sorted(moved(est, 1.0, X, y, X, y, red))[:4]
    ['align_c_test', 'align_c_test_init', 'align_c_train', 'align_c_train_init']
    """
    from ._common import fourier_features
    from .metric import kernel_alignment

    d = X.shape[1]
    w0, w1, wr = (np.asarray(o)[:, :d] * sigma for o in (est.omega_init_, est.omega_, redraw))

    out = {
        "disp": float(np.linalg.norm(w1 - w0, axis=1).mean()),
        "disp_redraw": float(np.linalg.norm(wr - w0, axis=1).mean()),
        "ed": energy_distance(w1, w0),
        "ed_redraw": energy_distance(wr, w0),
        "norm_ratio": float(
            np.median(np.linalg.norm(w1, axis=1)) / np.median(np.linalg.norm(w0, axis=1))
        ),
        "iso": isotropy(w1, d),
        "iso_init": isotropy(w0, d),
    }
    for tag, om in (("_init", est.omega_init_), ("", est.omega_)):
        out[f"align_c_train{tag}"] = kernel_alignment(fourier_features(X, om), y, centred=True)
        out[f"align_c_test{tag}"] = kernel_alignment(
            fourier_features(X_test, om), y_test, centred=True
        )
    return out


def alignment_plateau(est, X, y) -> float:
    """Relative change of the centred training alignment over the last 30 % of a run:
    |A(end) − A(70 %)| / |A(end) − A(0)| (small: the run has levelled off).

    Parameters
    ----------
    est : fitted CoulombFeatures with ``n_checkpoints`` >= 1
    X, y : arrays
        The training rows.

    Returns
    -------
    float >= 0

    See Also
    --------
    moved : the run's other measurements.
    meanfield.learners.kernel_alignment : the alignment it follows.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.learners import CoulombFeatures
    >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> est = CoulombFeatures(8, n_steps=10, n_checkpoints=5, random_state=0).fit(X, y)
    >>> alignment_plateau(est, X, y) >= 0
    True
    """
    from ._common import fourier_features
    from .metric import kernel_alignment

    a = [kernel_alignment(fourier_features(X, om), y, centred=True) for om in est.checkpoints_]
    j = int(round(0.7 * (len(a) - 1)))
    return float(abs(a[-1] - a[j]) / max(abs(a[-1] - a[0]), 1e-12))


def _ridge_row(omega, split, alphas) -> dict:
    from . import RidgeFeatureClassifier, fourier_features, kernel_alignment

    Xtr, ytr, Xte, yte = split[:4]
    Ftr, Fte = fourier_features(Xtr, omega), fourier_features(Xte, omega)
    clf = RidgeFeatureClassifier(alpha=alphas).fit(Ftr, ytr)
    return {
        "test_error": float(np.mean(clf.predict(Fte) != yte)),
        "align_c_test": kernel_alignment(Fte, yte, centred=True),
        "align_c_train": kernel_alignment(Ftr, ytr, centred=True),
        "alpha": float(clf.alpha_),
    }


def counterfactual_scores(
    split, m: int, *, seed: int, coulomb: dict, n_checkpoints: int, direction_repulsion: float
) -> dict:
    """Which part of the learned particles helps: every :func:`counterfactuals` feature set of
    one Coulomb run, and a run with the direction repulsion (``frame``), scored by the same
    leave-one-out ridge.

    One :class:`~meanfield.learners.CoulombFeatures` run (``coulomb`` keywords, median
    bandwidth σ, ``n_checkpoints`` snapshots) is recombined with its start; a second run adds
    ``direction_repulsion``. Each set gets its test error, centred alignments (train, test),
    ridge α, :func:`isotropy` and median norm |ω|·σ; the first run's snapshots give the curve.

    Parameters
    ----------
    split : tuple
        ``(X_train, y_train, X_test, y_test, ...)``, X of shape (n, d), y in {−1, +1}.
    m : int
        Number of particles.
    seed : int
        The learners' seed (the particles start from the RFF draw of this seed).
    coulomb : dict
        CoulombFeatures keywords (besides ``n_features``, ``bandwidth``, ``random_state``).
    n_checkpoints : int
    direction_repulsion : float >= 0

    Returns
    -------
    dict
        ``sigma``, ``narrowing`` (the factor c of the ``narrowed`` set), ``sets`` (name ->
        row), ``curve`` (one row per snapshot, with its ``step``), ``norms_init``,
        ``norms_learned`` (|ω|·σ per particle).

    See Also
    --------
    meanfield.studies.synthetic : its ``diagnosis`` design.

    Examples
    --------
    >>> from meanfield.learners.tasks import make_task
    >>> split = make_task("radial", 60, 40, noise=0.1, seed=0, d=3)
    >>> res = counterfactual_scores(split, 8, seed=1, coulomb={"n_steps": 4},
    ...                             n_checkpoints=2, direction_repulsion=1.0)
    >>> list(res["sets"])
    ['rff', 'learned', 'learned_w_prior_b', 'norms_only', 'directions_only', 'narrowed', 'frame']
    """
    from . import CoulombFeatures, median_bandwidth

    X, y = split[0], split[1]
    sigma = median_bandwidth(X, rng=seed)
    kw = dict(bandwidth=sigma, random_state=seed, **coulomb)
    lin = CoulombFeatures(m, n_checkpoints=n_checkpoints, **kw).fit(X, y)
    fr = CoulombFeatures(m, direction_repulsion=direction_repulsion, **kw).fit(X, y)
    d = X.shape[1]
    alphas = ridge_alphas(len(X))
    sets = counterfactuals(lin.omega_init_, lin.omega_, d)
    c = sets.pop("c")
    sets["frame"] = fr.omega_
    out = {"sigma": sigma, "narrowing": c, "sets": {}}
    for name, om in sets.items():
        row = _ridge_row(om, split, alphas)
        row["isotropy"] = isotropy(om, d)
        row["median_norm"] = float(np.median(np.linalg.norm(om[:, :d], axis=1)) * sigma)
        out["sets"][name] = row
    out["curve"] = [
        {"step": int(s), **_ridge_row(om, split, alphas)}
        for s, om in zip(lin.checkpoint_steps_, lin.checkpoints_, strict=True)
    ]
    out.update(
        norms_init=(np.linalg.norm(lin.omega_init_[:, :d], axis=1) * sigma).tolist(),
        norms_learned=(np.linalg.norm(lin.omega_[:, :d], axis=1) * sigma).tolist(),
    )
    return out
