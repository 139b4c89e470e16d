"""Synthetic classification tasks for the kernel-learning study.

Each task is a function ``task(n_train, n_test, *, noise, seed, ...)`` returning a
:class:`Split` ``(X_train, y_train, X_test, y_test)``. All randomness comes from one
``numpy.random.Generator`` seeded with ``seed``, so a (task, parameters, seed) triple always
gives the same arrays.

Conventions (also in ``paper_repro/synthetic/README.md``):

- Binary tasks return labels in {-1, +1} (``int64``); multi-class tasks return class ids
  0, ..., C-1.
- ``noise`` is the label-noise level: each *training* label is, independently with probability
  ``noise``, replaced by a different label (binary: its sign flipped; C classes: a uniformly
  drawn other class). Test labels are clean unless ``noisy_test=True``, so the test error
  measures how well the clean rule is recovered (its Bayes error is 0 for every task here
  except the Gaussian mixture, whose components overlap).
- Train and test points are drawn from the same distribution, test after train, from the one
  generator.

References
----------
A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016 (the radial
task, section 4.1).

Examples
--------
>>> from meanfield.learners.tasks import make_task
>>> X_train, y_train, X_test, y_test = make_task("radial", 200, 50, d=10, seed=0)
>>> X_train.shape, X_test.shape, sorted(set(y_train.tolist()))
((200, 10), (50, 10), [-1, 1])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from meanfield._validation import check_int, check_positive
from meanfield.contract import Param, declare
from meanfield.errors import InputError

__all__ = [
    "Split",
    "TASKS",
    "checkerboard",
    "flip_labels",
    "gaussian_mixture",
    "make_task",
    "radial",
    "two_moons",
    "xor",
]


class Split(NamedTuple):
    """Train and test data of one task draw.

    Parameters
    ----------
    X_train : ndarray of shape (n_train, d)
        Training inputs.
    y_train : ndarray of shape (n_train,)
        In {-1, +1} for binary tasks, in {0, ..., C-1} for C > 2 classes.
    X_test : ndarray of shape (n_test, d)
        Test inputs.
    y_test : ndarray of shape (n_test,)
        Test labels (clean unless ``noisy_test``).

    See Also
    --------
    make_task : a task's split by name.
    meanfield.learners.evaluate : test error of the learners on a split.

    Examples
    --------
    >>> from meanfield.learners.tasks import two_moons
    >>> split = two_moons(100, 20, seed=0)
    >>> split.X_train.shape, split.y_test.dtype
    ((100, 2), dtype('int64'))
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


# ----------------------------------------------------------------------------- helpers


def _start(n_train, n_test, noise, seed) -> tuple[int, int, float, np.random.Generator]:
    """Validated sizes and label-noise level, and the one generator of the draw (from ``seed``).

    Every task starts here, so the arguments they share are checked alike and in one order.
    """
    n_train = check_int("n_train", n_train, minimum=1)
    n_test = check_int("n_test", n_test, minimum=1)
    noise = check_positive("noise", noise, allow_zero=True)
    if noise >= 0.5:
        # At 1/2 (binary) the labels carry no information; above it they are anti-correlated.
        raise ValueError(f"noise must be in [0, 0.5), got {noise!r}")
    seed = check_int("seed", seed, minimum=0)
    return n_train, n_test, noise, np.random.default_rng(seed)


def flip_labels(y, noise: float, rng: np.random.Generator, n_classes: int | None = None):
    """Replace each label, with probability ``noise``, by a different label.

    Parameters
    ----------
    y : ndarray of shape (n,)
        Labels in {-1, +1} (binary) or {0, ..., C-1}.
    noise : float in [0, 1]
        Probability that a label is changed.
    rng : numpy.random.Generator
        Source of the flips.
    n_classes : int, optional
        Number of classes C; inferred as 2 when the labels are +-1, else ``max(y) + 1``.

    Returns
    -------
    ndarray of shape (n,)
        A new array; ``y`` is not modified.

    Raises
    ------
    meanfield.errors.InputError
        ``noise`` < 0 or not finite.
    ValueError
        ``noise`` > 1.

    See Also
    --------
    make_task : the tasks, whose ``noise`` is applied by this function.

    Examples
    --------
    With probability 1 every label changes: binary labels flip sign, class ids move to
    another class.

    >>> import numpy as np
    >>> from meanfield.learners.tasks import flip_labels
    >>> flip_labels(np.array([1, -1, 1, 1]), 1.0, np.random.default_rng(0))
    array([-1,  1, -1, -1])
    >>> y = np.array([0, 1, 2, 0])
    >>> bool(np.all(flip_labels(y, 1.0, np.random.default_rng(0)) != y))
    True
    """
    y = np.asarray(y)
    noise = check_positive("noise", noise, allow_zero=True)
    if noise > 1:
        raise ValueError(f"noise must be in [0, 1], got {noise!r}")
    flip = rng.random(y.shape[0]) < noise
    out = y.copy()
    if set(np.unique(y).tolist()) <= {-1, 1}:
        out[flip] = -out[flip]
        return out
    C = int(n_classes if n_classes is not None else y.max() + 1)
    # a uniformly drawn *other* class: shift by 1..C-1 modulo C
    shift = rng.integers(1, C, size=int(flip.sum()))
    out[flip] = (out[flip] + shift) % C
    return out


def _finish(X, y_clean, n_train, noise, noisy_test, rng, n_classes=2) -> Split:
    """Split the rows (train first), flip the training labels (and the test ones if asked)."""
    y_train = flip_labels(y_clean[:n_train], noise, rng, n_classes)
    y_test = y_clean[n_train:]
    if noisy_test:
        y_test = flip_labels(y_test, noise, rng, n_classes)
    return Split(X[:n_train], y_train.astype(np.int64), X[n_train:], y_test.astype(np.int64))


def _pm1(mask) -> np.ndarray:
    """+1 where ``mask`` holds, −1 elsewhere, as int64 labels."""
    return np.where(mask, 1, -1).astype(np.int64)


# ----------------------------------------------------------------------------- tasks


def radial(
    n_train: int = 1000,
    n_test: int = 1000,
    *,
    d: int = 10,
    noise: float = 0.0,
    seed: int = 0,
    noisy_test: bool = False,
) -> Split:
    r"""Radial task of Sinha & Duchi (2016): x ~ N(0, I_d), y = sign(||x|| - sqrt(d)).

    .. math::

        x \sim N(0, I_d), \qquad y = \operatorname{sign}\big(|x| - \sqrt d\big),
        \qquad P(y = +1) = P(\chi^2_d > d).

    The decision boundary is the sphere of radius sqrt(d); a Gaussian kernel is poorly suited
    to it, which is what makes learning the feature distribution worthwhile. Classes are
    nearly balanced: P(y = +1) = P(chi2_d > d), 0.44 for d = 10.

    Parameters
    ----------
    n_train, n_test : int >= 1
        Numbers of training and test points.
    d : int >= 1
        Input dimension.
    noise : float in [0, 0.5)
        Label-noise level: the probability that a training label is replaced by another.
    seed : int >= 0
        Seed of the one generator of the draw (points, then label noise).
    noisy_test : bool
        Also corrupt the test labels (with the same ``noise``).

    Returns
    -------
    Split
        ``X_train`` (n_train, d), ``y_train`` (n_train,) in {-1, +1}, and likewise for test.

    Raises
    ------
    meanfield.errors.InputError
        A size, ``d`` or ``seed`` out of range.
    ValueError
        ``noise`` outside [0, 0.5).

    See Also
    --------
    gaussian_mixture, checkerboard, two_moons : the other tasks.
    make_task : a task by name.

    References
    ----------
    .. [1] A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016
       (section 4.1).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.learners.tasks import radial
    >>> split = radial(2000, 10, d=10, seed=0)
    >>> bool(abs((split.y_train == 1).mean() - 0.4405) < 3 * np.sqrt(0.25 / 2000))
    True
    """
    n_train, n_test, noise, rng = _start(n_train, n_test, noise, seed)
    d = check_int("d", d, minimum=1)
    X = rng.standard_normal((n_train + n_test, d))
    y = _pm1(np.linalg.norm(X, axis=1) > np.sqrt(d))
    return _finish(X, y, n_train, noise, noisy_test, rng)


def _mixture_centers(n_classes, n_components, d, separation, center_seed):
    """Component centres: uniform on the sphere of radius ``separation``, fixed by center_seed."""
    g = np.random.default_rng(center_seed)
    c = g.standard_normal((n_classes * n_components, d))
    c *= separation / np.linalg.norm(c, axis=1, keepdims=True)
    return c.reshape(n_classes, n_components, d)


def gaussian_mixture(
    n_train: int = 1000,
    n_test: int = 1000,
    *,
    d: int = 5,
    n_classes: int = 2,
    n_components: int = 3,
    separation: float = 3.0,
    scale: float = 1.0,
    noise: float = 0.0,
    seed: int = 0,
    center_seed: int = 0,
    noisy_test: bool = False,
) -> Split:
    r"""Gaussian-mixture task: each class a mixture of isotropic Gaussians.

    .. math::

        c \sim U\{0, \dots, C-1\}, \quad k \sim U\{1, \dots, K\}, \quad
        x = m_{c,k} + \sigma \xi, \quad \xi \sim N(0, I_d), \quad |m_{c,k}| = \text{separation}.

    Class c (equally likely) draws one of its ``n_components`` centres uniformly and adds
    N(0, scale^2 I_d). The ``n_classes * n_components`` centres lie on the sphere of radius
    ``separation`` and are fixed by ``center_seed`` (not by ``seed``), so every seed samples
    the same task. Components overlap, so the Bayes error is small but not zero.

    Parameters
    ----------
    n_train, n_test : int >= 1
        Numbers of training and test points.
    d : int >= 1
        Input dimension.
    n_classes : int >= 2
        Number of classes C; labels are +-1 when C = 2, else 0..C-1.
    n_components : int >= 1
        Gaussians per class.
    separation : float > 0
        Radius of the sphere holding the centres.
    scale : float > 0
        Standard deviation of each component.
    noise : float in [0, 0.5)
        Label-noise level: the probability that a training label is replaced by another.
    seed : int >= 0
        Seed of the one generator of the draw (points, then label noise).
    noisy_test : bool
        Also corrupt the test labels (with the same ``noise``).
    center_seed : int >= 0
        Seed for the centres (the task itself).

    Returns
    -------
    Split
        Labels ±1 for two classes, 0..C−1 for more.

    See Also
    --------
    radial, checkerboard, two_moons : the other tasks.
    make_task : a task by name.

    Examples
    --------
    >>> from meanfield.learners.tasks import gaussian_mixture
    >>> split = gaussian_mixture(100, 10, n_classes=3, seed=0)
    >>> split.X_train.shape, sorted(set(split.y_train.tolist()))
    ((100, 5), [0, 1, 2])
    """
    n_train, n_test, noise, rng = _start(n_train, n_test, noise, seed)
    d = check_int("d", d, minimum=1)
    C = check_int("n_classes", n_classes, minimum=2)
    K = check_int("n_components", n_components, minimum=1)
    separation = check_positive("separation", separation)
    scale = check_positive("scale", scale)
    center_seed = check_int("center_seed", center_seed, minimum=0)
    centers = _mixture_centers(C, K, d, separation, center_seed)
    n = n_train + n_test
    cls = rng.integers(0, C, size=n)
    comp = rng.integers(0, K, size=n)
    X = centers[cls, comp] + scale * rng.standard_normal((n, d))
    y = _pm1(cls == 1) if C == 2 else cls
    return _finish(X, y, n_train, noise, noisy_test, rng, n_classes=C)


def checkerboard(
    n_train: int = 1000,
    n_test: int = 1000,
    *,
    n_cells: int = 4,
    d: int = 2,
    noise: float = 0.0,
    seed: int = 0,
    noisy_test: bool = False,
) -> Split:
    r"""Checkerboard task: x uniform on [-1, 1]^d, label the colour of its cell in (x_1, x_2).

    The square [-1, 1]^2 of the first two coordinates is cut into ``n_cells`` x ``n_cells``
    cells, labelled +1 and -1 alternately; coordinates 3..d are nuisance dimensions that carry
    no information. ``n_cells = 2`` is the XOR task.

    .. math::

        i_k = \Big\lfloor \frac{(x_k + 1)\, n}{2} \Big\rfloor \ (k = 1, 2), \qquad
        y = +1 \text{ if } i_1 + i_2 \text{ is even, else } -1.

    Parameters
    ----------
    n_train, n_test : int >= 1
        Numbers of training and test points.
    n_cells : int >= 2
        Cells per side.
    d : int >= 2
        Input dimension (2 informative + d - 2 nuisance).
    noise : float in [0, 0.5)
        Label-noise level: the probability that a training label is replaced by another.
    seed : int >= 0
        Seed of the one generator of the draw (points, then label noise).
    noisy_test : bool
        Also corrupt the test labels (with the same ``noise``).

    Returns
    -------
    Split
        Labels in {-1, +1}.

    See Also
    --------
    xor : the 2 x 2 board.
    radial, gaussian_mixture, two_moons : the other tasks.

    Examples
    --------
    >>> from meanfield.learners.tasks import checkerboard
    >>> split = checkerboard(200, 10, n_cells=4, d=3, seed=0)
    >>> split.X_train.shape, bool(abs(split.X_train).max() <= 1)
    ((200, 3), True)
    """
    n_train, n_test, noise, rng = _start(n_train, n_test, noise, seed)
    n_cells = check_int("n_cells", n_cells, minimum=2)
    d = check_int("d", d, minimum=2)
    X = rng.uniform(-1.0, 1.0, size=(n_train + n_test, d))
    idx = np.clip(np.floor((X[:, :2] + 1.0) * n_cells / 2.0), 0, n_cells - 1).astype(int)
    y = _pm1((idx[:, 0] + idx[:, 1]) % 2 == 0)
    return _finish(X, y, n_train, noise, noisy_test, rng)


def xor(
    n_train: int = 1000,
    n_test: int = 1000,
    *,
    d: int = 2,
    noise: float = 0.0,
    seed: int = 0,
    noisy_test: bool = False,
) -> Split:
    """XOR task: :func:`checkerboard` with 2 x 2 cells, y = sign(x_1 x_2).

    Parameters
    ----------
    n_train, n_test : int >= 1
        Numbers of training and test points.
    d : int >= 2
        Input dimension (2 informative + d − 2 nuisance).
    noise : float in [0, 0.5)
        Label-noise level: the probability that a training label is replaced by another.
    seed : int >= 0
        Seed of the one generator of the draw (points, then label noise).
    noisy_test : bool
        Also corrupt the test labels (with the same ``noise``).

    Returns
    -------
    Split
        Labels in {-1, +1}.

    See Also
    --------
    checkerboard : the board with any number of cells.

    References
    ----------
    .. [1] M. Minsky and S. Papert, *Perceptrons*, MIT Press, 1969 (XOR, the function a
       linear classifier cannot represent).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.learners.tasks import xor
    >>> X, y, _, _ = xor(200, 10, seed=0)
    >>> bool(np.all(y == np.sign(X[:, 0] * X[:, 1])))
    True
    """
    return checkerboard(
        n_train, n_test, n_cells=2, d=d, noise=noise, seed=seed, noisy_test=noisy_test
    )


def two_moons(
    n_train: int = 1000,
    n_test: int = 1000,
    *,
    jitter: float = 0.1,
    d: int = 2,
    noise: float = 0.0,
    seed: int = 0,
    noisy_test: bool = False,
) -> Split:
    r"""Two interleaved half circles (as scikit-learn's ``make_moons``), labels +-1.

    Class +1: (cos t, sin t); class -1: (1 - cos t, 1/2 - sin t), t ~ U[0, pi], plus
    N(0, jitter^2) on each coordinate; coordinates 3..d are N(0, jitter^2) nuisance.

    .. math::

        x^{(+1)} = (\cos t, \sin t), \qquad x^{(-1)} = (1 - \cos t, \tfrac12 - \sin t),
        \qquad t \sim U[0, \pi].

    Parameters
    ----------
    n_train, n_test : int >= 1
        Numbers of training and test points.
    jitter : float >= 0
        Standard deviation of the input noise (not the label noise).
    d : int >= 2
        Input dimension.
    noise : float in [0, 0.5)
        Label-noise level: the probability that a training label is replaced by another.
    seed : int >= 0
        Seed of the one generator of the draw (points, then label noise).
    noisy_test : bool
        Also corrupt the test labels (with the same ``noise``).

    Returns
    -------
    Split
        Labels in {-1, +1}.

    See Also
    --------
    radial, gaussian_mixture, checkerboard : the other tasks.
    make_task : a task by name.

    References
    ----------
    .. [1] F. Pedregosa et al., "Scikit-learn: Machine learning in Python", JMLR 12,
       2825–2830, 2011 (``sklearn.datasets.make_moons``).

    Examples
    --------
    >>> from meanfield.learners.tasks import two_moons
    >>> X, y, _, _ = two_moons(400, 10, jitter=0.0, seed=0)
    >>> upper = X[y == 1]  # on the unit circle without jitter
    >>> float(abs(upper[:, 0] ** 2 + upper[:, 1] ** 2 - 1).max()) < 1e-12
    True
    """
    n_train, n_test, noise, rng = _start(n_train, n_test, noise, seed)
    jitter = check_positive("jitter", jitter, allow_zero=True)
    d = check_int("d", d, minimum=2)
    n = n_train + n_test
    upper = rng.random(n) < 0.5
    t = rng.uniform(0.0, np.pi, size=n)
    X = np.zeros((n, d))
    X[:, 0] = np.where(upper, np.cos(t), 1.0 - np.cos(t))
    X[:, 1] = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    X += jitter * rng.standard_normal((n, d))
    return _finish(X, _pm1(upper), n_train, noise, noisy_test, rng)


TASKS = {
    "radial": radial,
    "gaussian_mixture": gaussian_mixture,
    "checkerboard": checkerboard,
    "xor": xor,
    "two_moons": two_moons,
}
"""Registry of task functions by name."""


@declare(
    Param("n_train", "int", "number of training points", low=1),
    Param("n_test", "int", "number of test points", low=1),
)
def make_task(name: str, n_train: int = 1000, n_test: int = 1000, **kwargs) -> Split:
    """Draw the task called ``name`` (a key of :data:`TASKS`); ``kwargs`` go to its function.

    Parameters
    ----------
    name : str
        ``"radial"``, ``"gaussian_mixture"``, ``"checkerboard"``, ``"xor"`` or
        ``"two_moons"``.
    n_train, n_test : int >= 1
        Numbers of training and test points.
    **kwargs
        Keyword arguments of the task function (``d``, ``noise``, ``seed``…).

    Returns
    -------
    Split
        The task's train and test data.

    Raises
    ------
    meanfield.errors.InputError
        An unknown ``name`` (the message lists the tasks).

    See Also
    --------
    radial, gaussian_mixture, checkerboard, xor, two_moons : the tasks.
    meanfield.learners.evaluate : the learners' test errors on the split.

    Examples
    --------
    >>> from meanfield.learners.tasks import make_task
    >>> make_task("checkerboard", 50, 5, n_cells=3, seed=1).X_train.shape
    (50, 2)
    """
    if not isinstance(name, str) or name not in TASKS:
        raise InputError(f"unknown task {name!r}; choose one of {', '.join(map(repr, TASKS))}")
    return TASKS[name](n_train, n_test, **kwargs)
