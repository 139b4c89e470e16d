"""Why the first Coulomb configuration loses on the radial and mixture tasks, over many seeds,
with counterfactual feature sets that separate the norms, the directions and the phases of
the learned frequencies (issue 22, item 2).

For one (task, seed) split (noise 0.1, n_train = 1000, n_test = 2000) and m = 256 particles
from the median-bandwidth RFF draw ω⁰ = (w⁰, b⁰), the first study's configuration (linear
alignment, β = 10³, λ = 0.3, 300 steps) is run to ω¹ = (w¹, b¹), and the same run with the
frame repulsion of the directions (``direction_repulsion`` = 1) to ω^F. With u = w/|w| (one
particle each, matched by index; standardised units), the feature sets scored by the same
ridge (α by exact leave-one-out over n · 10^[−12..1]):

=====================  =========================================  ==========================
set                    frequencies, phase                          isolates
=====================  =========================================  ==========================
``rff``                w⁰, b⁰                                       the start
``learned``            w¹, b¹                                       the learned particles
``learned_w_prior_b``  w¹, b⁰                                       the learned phases
``norms_only``         |w¹| u⁰, b⁰ (learned norms, prior directions)  the norms
``directions_only``    |w⁰| u¹, b⁰ (prior norms, learned directions)  the directions
``narrowed``           c w⁰, b⁰, c = median|w¹| / median|w⁰|        a kernel narrowed as much
``frame``              ω^F (learned with the frame repulsion)        stopping the collapse
=====================  =========================================  ==========================

and, along the linear run (``n_checkpoints`` records), the test error and the centred test
alignment. :func:`diagnose_seed` returns one JSON-ready record; the CLI and the figure are
``paper_repro/synthetic/diagnose.py``.

Examples
--------
>>> import numpy as np
>>> from meanfield.studies.synthetic_diagnosis import counterfactuals
>>> w0 = np.array([[3.0, 4.0, 0.1]]); w1 = np.array([[0.0, 10.0, 0.2]])
>>> cf = counterfactuals(w0, w1, d=2)
>>> cf["norms_only"].tolist(), cf["directions_only"].tolist()
([[6.0, 8.0, 0.1]], [[0.0, 5.0, 0.1]])
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["SETS", "FIRST", "counterfactuals", "isotropy", "diagnose_seed"]

#: The feature sets of a record, in report order.
SETS = (
    "rff",
    "learned",
    "learned_w_prior_b",
    "norms_only",
    "directions_only",
    "narrowed",
    "frame",
)

#: The first study's configuration (``synthetic_kernels.COULOMB``).
FIRST = dict(lam=0.3, s=1.0, softening=0.1, beta=1e3, eta=1.0, n_steps=300, data_batch=250)


def counterfactuals(omega0, omega1, d: int) -> dict:
    """The recombined particle sets of the module docstring (frequencies in any units: the
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

    Examples
    --------
    >>> import numpy as np
    >>> isotropy(np.array([[1.0, 0.0], [-2.0, 0.0]]), 2), isotropy(np.eye(2), 2)
    (2.0, 1.0)
    """
    w = np.asarray(omega, dtype=float)[:, :d]
    u = w / np.linalg.norm(w, axis=1, keepdims=True)
    return float(d * np.linalg.eigvalsh(u.T @ u / len(u)).max())


def _ridge_row(omega, split, alphas) -> dict:
    from ..learners import RidgeFeatureClassifier, fourier_features, kernel_alignment

    Xtr, ytr, Xte, yte = split[:4]
    Ftr, Fte = fourier_features(Xtr, omega), fourier_features(Xte, omega)
    clf = RidgeFeatureClassifier(alpha=alphas).fit(Ftr, ytr)
    return {
        "test_error": float(np.mean(clf.predict(Fte) != yte)),
        "align_c_test": kernel_alignment(Fte, yte, centred=True),
        "align_c_train": kernel_alignment(Ftr, ytr, centred=True),
        "alpha": float(clf.alpha_),
    }


def diagnose_seed(
    task: str,
    seed: int,
    *,
    m: int = 256,
    noise: float = 0.1,
    n_train: int = 1000,
    n_test: int = 2000,
    n_checkpoints: int = 10,
    coulomb: dict | None = None,
    direction_repulsion: float = 1.0,
) -> dict:
    """One (task, seed) record of the diagnosis (module docstring): every feature set's test
    error, alignments, isotropy and median standardised norm, and the linear run's curve.

    Examples
    --------
    >>> from meanfield.studies.synthetic_diagnosis import diagnose_seed
    >>> rec = diagnose_seed("two_moons", 0, m=8, n_train=60, n_test=40, n_checkpoints=2,
    ...                     coulomb={"n_steps": 4, "data_batch": None})
    >>> sorted(rec["sets"]) == sorted(SETS), [c["step"] for c in rec["curve"]]
    (True, [0, 2, 4])
    """
    import torch
    from threadpoolctl import threadpool_limits

    from .._version import __version__
    from ..learners import CoulombFeatures, median_bandwidth
    from ..learners.tasks import make_task
    from .synthetic_kernels import TASKS
    from .synthetic_search import ridge_alphas
    from .synthetic_variants import machine

    torch.set_num_threads(1)
    threadpool_limits(1)
    t0 = time.perf_counter()
    split = make_task(task, n_train, n_test, noise=noise, seed=seed, **TASKS[task])
    ls = 10_000 + seed
    sigma = median_bandwidth(split[0], rng=ls)
    cfg = {**FIRST, **(coulomb or {})}
    lin = CoulombFeatures(m, bandwidth=sigma, random_state=ls, n_checkpoints=n_checkpoints, **cfg)
    lin.fit(split[0], split[1])
    fr = CoulombFeatures(
        m, bandwidth=sigma, random_state=ls, direction_repulsion=direction_repulsion, **cfg
    )
    fr.fit(split[0], split[1])
    d = split[0].shape[1]
    alphas = ridge_alphas(n_train)
    sets = counterfactuals(lin.omega_init_, lin.omega_, d)
    c = sets.pop("c")
    sets["frame"] = fr.omega_
    out = {
        "task": task,
        "seed": seed,
        "m": m,
        "noise": noise,
        "sigma": sigma,
        "narrowing": c,
        "sets": {},
    }
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
        configuration={**cfg, "direction_repulsion_frame": direction_repulsion},
        meanfield_version=__version__,
        wall_s=time.perf_counter() - t0,
        machine=machine(),
    )
    return out
