"""The energy E(μ) = ∫V dμ − A(μ) + λ ∬ k(ω − ω') μ(dω) μ(dω'), defined once (THEORY §2).

An :class:`Energy` is a sum of terms.  Each term gives, for particles Ω of shape (..., N, p)
(leading axes are independent replicas):

* ``value(Ω)``  the finite-N energy H_N(Ω) = E(μ_N) with the diagonal i = j left out of every
  pair sum, shape (...);
* ``grad(Ω)``   its analytic gradient ∇_Ω H_N, shape (..., N, p);
* ``first_variation(at, points, weights)``  δE/δμ evaluated at arbitrary points ``at`` (M, p)
  for a measure μ = Σ_k w_k δ_{points_k}: what the grid solver consumes, with the grid cells as
  the weighted points.

So the particle dynamics (:mod:`meanfield.dynamics.langevin`) and the McKean–Vlasov solver
(:mod:`meanfield.pde`) read the same object.  Everything is batched torch, float64 by default,
on CPU or CUDA; pair sums are chunked so memory stays O(N · chunk).

Conventions (also in the README):

* finite-N pair sums exclude i = j, so E[H_N] = E(μ) for iid particles (U-statistics);
* the *normalised* (Cristianini) alignment is a ratio, not a sum of pair energies, so it uses
  the full empirical kernel K_Ω = ΦᵀΦ/N, diagonal included: H_N = −A(μ_N) exactly;
* targets: binary labels ±1 give T = y yᵀ; C ≥ 2 class ids give T_jk = 1 if y_j = y_k else
  −1/(C − 1).  Both are stored in the low-rank form T = U diag(w) Uᵀ, so nothing n × n is
  built for the linear form.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ._validation import check_array, check_choice, check_finite_real, check_int, check_positive
from .alignment import alignment_parts, small_gram, target_norm, times_gram
from .domains import Domain
from .features import FeatureMap, get_feature_map
from .kernels import PairKernel
from .pairsum import cast_checked, out_of_range, pair_sums, roundoff_bound

#: Elements per chunk of the pair sums (rows × columns [× dim]); bounds the memory.
#: 2^18 float32 entries is 1 MiB: each block's elementwise passes stay in the CPU cache.
PAIR_CHUNK_ELEMENTS = 1 << 18


# ----------------------------------------------------------------------------------------
# targets
# ----------------------------------------------------------------------------------------
def target_factors(y) -> tuple[np.ndarray, np.ndarray]:
    r"""Low-rank factors of the target matrix, T = U diag(w) Uᵀ.

    Parameters
    ----------
    y : array (n,)
        Binary labels in {−1, +1}, or integer class ids with at least two classes.

    Returns
    -------
    U : (n, r) array, w : (r,) array
        Binary: U = y, w = 1.  C classes: U = [one-hot, 1], w = [C/(C−1), …, −1/(C−1)],
        which gives T_jk = 1 for equal classes and −1/(C−1) otherwise.

    Notes
    -----
    .. math::

        T = U \operatorname{diag}(w)\, U^\top, \qquad
        T_{jk} = \begin{cases} 1, & y_j = y_k, \\ -1/(C - 1), & y_j \ne y_k. \end{cases}

    Examples
    --------
    >>> from meanfield.energy import target_factors
    >>> U, w = target_factors([1.0, -1.0, 1.0])  # binary: U = y, w = 1
    >>> U.ravel().tolist(), w.tolist()
    ([1.0, -1.0, 1.0], [1.0])
    >>> U, w = target_factors([0, 1, 2])  # three classes: one-hot and a column of ones
    >>> U.shape, w.tolist()
    ((3, 4), [1.5, 1.5, 1.5, -0.5])
    """
    y = check_array("y", y, ndim=1)
    values = np.unique(y)
    if set(values.tolist()) <= {-1.0, 1.0} and len(values) == 2:
        return y[:, None].copy(), np.ones(1)
    if not np.all(values == np.round(values)):
        raise ValueError("y must hold binary labels in {-1, +1} or integer class ids")
    C = len(values)
    if C < 2:
        raise ValueError(f"y must contain at least 2 classes, got {C}")
    onehot = (y[:, None] == values[None, :]).astype(float)
    U = np.concatenate([onehot, np.ones((len(y), 1))], axis=1)
    w = np.concatenate([np.full(C, C / (C - 1)), [-1.0 / (C - 1)]])
    return U, w


def target_matrix(y) -> np.ndarray:
    """The dense target matrix T (n, n) (for tests and small problems).

    Parameters
    ----------
    y : array (n,)
        Binary labels ±1 or integer class ids (see :func:`target_factors`).

    Returns
    -------
    numpy.ndarray (n, n)
        T = U diag(w) Uᵀ: 1 for equal labels, −1/(C − 1) (−1 for binary labels) otherwise.

    Examples
    --------
    >>> from meanfield.energy import target_matrix
    >>> target_matrix([1.0, -1.0])
    array([[ 1., -1.],
           [-1.,  1.]])
    >>> target_matrix([0, 1, 2])
    array([[ 1. , -0.5, -0.5],
           [-0.5,  1. , -0.5],
           [-0.5, -0.5,  1. ]])
    """
    U, w = target_factors(y)
    return (U * w) @ U.T


# ----------------------------------------------------------------------------------------
# terms
# ----------------------------------------------------------------------------------------
#: The kinds of term, by how the first variation δE/δμ depends on the measure μ.
TERM_KINDS = ("one-body", "pair", "measure")


class UnboundTermError(AttributeError):
    """A term's data was used before :meth:`Term.bind` (an :class:`Energy` binds its terms).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.energy import LinearAlignment, UnboundTermError
    >>> term = LinearAlignment(np.eye(2), np.array([1.0, -1.0]))
    >>> try:
    ...     term.U
    ... except UnboundTermError as err:
    ...     print(str(err)[:40])
    LinearAlignment.U is set when the term i
    """


class Term:
    r"""One additive piece of the energy.  Subclasses implement the three views.

    Every term declares its ``kind`` (one of :data:`TERM_KINDS`): what a solver on densities
    (:class:`meanfield.pde.GridEnergy`) needs to evaluate it, without knowing its class.

    * ``"one-body"``: E(μ) = ∫ f dμ, so δE/δμ = f does not depend on μ (potentials, the
      linear alignment): ``first_variation(at)`` is evaluated once;
    * ``"pair"``: E(μ) = λ ∬ k(ω − ω') μ(dω) μ(dω'); :meth:`pair_kernel` gives (k, λ), and
      δE/δμ = 2λ k ∗ μ can be computed by a convolution;
    * ``"measure"``: any other dependence; ``first_variation(at, points, weights)`` is
      evaluated at each μ and :meth:`measure_value` gives E(μ) of a weighted measure.

    The first variation is the derivative of E along a perturbation ν of zero mass, and the
    finite-N value is E at the empirical measure (pair sums without their diagonal):

    .. math::

        \frac{d}{d\varepsilon} E(\mu + \varepsilon \nu) \Big|_{\varepsilon = 0}
        = \int \frac{\delta E}{\delta \mu}(\omega)\, \nu(d\omega), \qquad
        H_N(\Omega) = E\Big(\frac1N \sum_{i=1}^N \delta_{\omega_i}\Big).

    Examples
    --------
    >>> import torch
    >>> from meanfield.energy import Term
    >>> class Mean(Term):  # E(μ) = ∫ ω_1 dμ: one-body, δE/δμ = ω_1
    ...     kind = "one-body"
    ...     def value(self, omega):
    ...         return omega[..., 0].mean(-1)
    ...     def grad(self, omega):
    ...         return torch.full_like(omega, 1.0 / omega.shape[-2])
    ...     def first_variation(self, at, points=None, weights=None):
    ...         return at[:, 0]
    >>> pts = torch.tensor([[1.0], [3.0]])
    >>> float(Mean().measure_value(pts, torch.tensor([0.25, 0.75])))
    2.5
    """

    name = "term"
    kind = "measure"
    #: Attributes set by :meth:`bind`; reading one before binding raises UnboundTermError.
    _bound_attributes: tuple = ()

    def __getattr__(self, name):
        # reached only when the normal lookup fails
        if name in type(self)._bound_attributes:
            raise UnboundTermError(
                f"{type(self).__name__}.{name} is set when the term is bound: use the term "
                "inside an Energy (Energy([term], domain)) or call term.bind(dim, dtype, "
                "device) first"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def bind(self, dim: int, dtype, device) -> None:
        """Check the particle dimension and move data to ``dtype``/``device``.

        An :class:`Energy` binds its own copy of each term; call this only to use a term alone.

        Parameters
        ----------
        dim : int
            Particle dimension p (the domain's ``dim``).
        dtype : torch.dtype
            Floating type of the term's tensors.
        device : str or torch.device
            Where the term's tensors live.

        Raises
        ------
        ValueError
            The term cannot act on particles of dimension ``dim`` (a feature map of another
            dimension, a Riesz kernel that is not integrable in R^dim).

        Examples
        --------
        >>> import numpy as np
        >>> import torch
        >>> from meanfield.energy import LinearAlignment
        >>> term = LinearAlignment(np.zeros((3, 2)), np.array([1.0, -1.0, 1.0]))
        >>> term.bind(2, torch.float32, "cpu")  # positive features: p = d = 2
        >>> term.U.dtype
        torch.float32
        >>> try:
        ...     term.bind(3, torch.float32, "cpu")
        ... except ValueError as err:
        ...     print(str(err)[:44])
        feature 'positive' on data of dimension d=2
        """

    def pair_kernel(self):
        r"""(kernel, λ) of a ``"pair"`` term; a TypeError for any other kind.

        .. math::

            E(\mu) = \lambda \iint k(\omega - \omega')\, \mu(d\omega)\, \mu(d\omega').

        Returns
        -------
        kernel : meanfield.kernels.PairKernel
        lam : float
            The strength λ ≥ 0.

        Examples
        --------
        >>> from meanfield.energy import PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> PairInteraction(Riesz(0.0), lam=0.5).pair_kernel()
        (Riesz(s=0.0, softening=0.0), 0.5)
        >>> try:
        ...     QuadraticPotential().pair_kernel()
        ... except TypeError as err:
        ...     print(err)
        QuadraticPotential is a 'one-body' term, not a pair term
        """
        raise TypeError(f"{type(self).__name__} is a {self.kind!r} term, not a pair term")

    def measure_value(self, points, weights) -> torch.Tensor:
        """E(μ) for the weighted measure μ = Σ_k w_k δ_{points_k} (mean-field value), shape ().

        A one-body term integrates its first variation: E(μ) = Σ_k w_k f(points_k).

        Parameters
        ----------
        points : tensor (K, p)
        weights : tensor (K,)
            Non-negative masses w_k.

        Returns
        -------
        tensor ()

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import QuadraticPotential
        >>> points = torch.tensor([[0.0], [2.0]])  # V = ω²/2: 0 and 2
        >>> float(QuadraticPotential().measure_value(points, torch.tensor([0.5, 0.5])))
        1.0
        """
        if self.kind == "one-body":
            return (self.first_variation(points, points, weights) * weights).sum()
        raise NotImplementedError(f"{type(self).__name__} does not give its value on a measure")

    def value(self, omega: torch.Tensor) -> torch.Tensor:
        """The finite-N energy H_N(Ω) = E(μ_N) of particles Ω, one value per replica.

        Parameters
        ----------
        omega : tensor (..., N, p)
            Particles of the bound dtype/device (leading axes are independent replicas).

        Returns
        -------
        tensor (...)

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import QuadraticPotential
        >>> omega = torch.tensor([[[1.0], [3.0]], [[0.0], [2.0]]])  # two replicas of N = 2
        >>> QuadraticPotential().value(omega).tolist()  # mean of ω²/2
        [2.5, 1.0]
        """
        raise NotImplementedError

    def grad(self, omega: torch.Tensor) -> torch.Tensor:
        """The analytic gradient ∇_Ω H_N(Ω) (of the sum, so O(1/N) per particle).

        Parameters
        ----------
        omega : tensor (..., N, p)
            Particles of the bound dtype/device.

        Returns
        -------
        tensor (..., N, p)

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import QuadraticPotential
        >>> QuadraticPotential().grad(torch.tensor([[1.0], [3.0]])).ravel().tolist()  # ω / N
        [0.5, 1.5]
        """
        raise NotImplementedError

    def first_variation(self, at, points, weights) -> torch.Tensor:
        """δE/δμ at the points ``at`` for the measure μ = Σ_k w_k δ_{points_k}.

        Parameters
        ----------
        at : tensor (M, p)
            Where to evaluate it (e.g. the grid's cell centres).
        points : tensor (K, p)
            Atoms of μ (one-body terms ignore them and accept None).
        weights : tensor (K,)
            Their non-negative masses.

        Returns
        -------
        tensor (M,)

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import PairInteraction
        >>> from meanfield.kernels import Riesz
        >>> points = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
        >>> weights = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> term = PairInteraction(Riesz(0.0), lam=0.5)  # 2λ k∗μ with k(z) = −log|z|
        >>> round(float(term.first_variation(torch.tensor([[4.0]]).double(), points, weights)), 4)
        -1.0397
        """
        raise NotImplementedError

    def value_and_grad(self, omega) -> tuple[torch.Tensor, torch.Tensor]:
        """(H_N, ∇H_N) at once (terms with a shared expensive pass override this).

        Parameters
        ----------
        omega : tensor (..., N, p)

        Returns
        -------
        value : tensor (...)
        grad : tensor (..., N, p)

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import DoubleWellPotential
        >>> v, g = DoubleWellPotential().value_and_grad(torch.tensor([[1.0], [0.0]]))
        >>> float(v), g.ravel().tolist()
        (-0.125, [0.0, 0.0])
        """
        return self.value(omega), self.grad(omega)

    def subset_data(self, index) -> Term:
        """The same term on a subset of the data (mini-batches); data-free terms return self.

        Parameters
        ----------
        index : array of int
            Rows of the data to keep.

        Returns
        -------
        Term

        Examples
        --------
        >>> from meanfield.energy import QuadraticPotential
        >>> V = QuadraticPotential()
        >>> V.subset_data([0, 2]) is V
        True
        """
        return self

    def describe(self) -> dict:
        """The term's parameters as plain types (for dataset attributes; empty by default).

        Returns
        -------
        dict

        Examples
        --------
        >>> from meanfield.energy import DoubleWellPotential
        >>> DoubleWellPotential(strength=2.0).describe()
        {'potential': 'double_well', 'strength': 2.0}
        """
        return {}


class Potential(Term):
    r"""Confining potential: H = (1/N) Σ_i V(ω_i), δE/δμ = V.

    Subclasses give ``V`` (..., p) -> (...) and ``gradV`` (..., p) -> (..., p).

    .. math::

        E(\mu) = \int V \, d\mu, \qquad H_N(\Omega) = \frac1N \sum_{i=1}^N V(\omega_i),
        \qquad \frac{\delta E}{\delta \mu} = V.

    Examples
    --------
    >>> import torch
    >>> from meanfield.energy import Potential
    >>> class Linear(Potential):  # V(ω) = Σ_d ω_d
    ...     def V(self, omega):
    ...         return omega.sum(-1)
    ...     def gradV(self, omega):
    ...         return torch.ones_like(omega)
    >>> omega = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> float(Linear().value(omega)), Linear().grad(omega).tolist()
    (5.0, [[0.5, 0.5], [0.5, 0.5]])
    """

    name = "confinement"
    kind = "one-body"

    def V(self, omega):
        """The potential V at each point.

        Parameters
        ----------
        omega : tensor (..., p)

        Returns
        -------
        tensor (...)

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import QuadraticPotential
        >>> QuadraticPotential(strength=2.0, center=1.0).V(torch.tensor([[0.0, 3.0]])).tolist()
        [5.0]
        """
        raise NotImplementedError

    def gradV(self, omega):
        """The gradient ∇V at each point.

        Parameters
        ----------
        omega : tensor (..., p)

        Returns
        -------
        tensor (..., p)

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import DoubleWellPotential
        >>> DoubleWellPotential().gradV(torch.tensor([[2.0, -1.0]])).tolist()  # ω³ − ω
        [[6.0, 0.0]]
        """
        raise NotImplementedError

    def value(self, omega):
        return self.V(omega).mean(-1)

    def grad(self, omega):
        return self.gradV(omega) / omega.shape[-2]

    def first_variation(self, at, points=None, weights=None):
        return self.V(at)


class QuadraticPotential(Potential):
    r"""V(ω) = strength · |ω − center|²/2.

    .. math::

        V(\omega) = \frac{a}{2} |\omega - c|^2, \qquad \nabla V(\omega) = a (\omega - c).

    Parameters
    ----------
    strength : float, default 1
        a > 0.
    center : float, default 0
        c, the same in every coordinate.

    Examples
    --------
    >>> import torch
    >>> from meanfield.energy import QuadraticPotential
    >>> V = QuadraticPotential(strength=2.0)
    >>> omega = torch.tensor([[1.0, 2.0]])
    >>> float(V.V(omega)[0]), V.gradV(omega).tolist()
    (5.0, [[2.0, 4.0]])
    """

    def __init__(self, strength: float = 1.0, center: float = 0.0):
        self.strength = check_positive("strength", strength)
        self.center = check_finite_real("center", center)

    def V(self, omega):
        return 0.5 * self.strength * ((omega - self.center) ** 2).sum(-1)

    def gradV(self, omega):
        return self.strength * (omega - self.center)

    def describe(self):
        return {"potential": "quadratic", "strength": self.strength, "center": self.center}


class DoubleWellPotential(Potential):
    r"""V(ω) = strength · Σ_d (ω_d⁴/4 − ω_d²/2): wells at ±1 in every coordinate.

    .. math::

        V(\omega) = a \sum_{d=1}^p \Big(\frac{\omega_d^4}{4} - \frac{\omega_d^2}{2}\Big),
        \qquad \partial_d V(\omega) = a (\omega_d^3 - \omega_d).

    Parameters
    ----------
    strength : float, default 1
        a > 0.

    Examples
    --------
    >>> import torch
    >>> from meanfield.energy import DoubleWellPotential
    >>> V = DoubleWellPotential()
    >>> wells = torch.tensor([[1.0], [-1.0], [0.0]])
    >>> V.V(wells).tolist(), V.gradV(wells).ravel().tolist()  # minima at ±1, zero force
    ([-0.25, -0.25, 0.0], [0.0, 0.0, 0.0])
    """

    def __init__(self, strength: float = 1.0):
        self.strength = check_positive("strength", strength)

    def V(self, omega):
        return self.strength * (omega**4 / 4 - omega**2 / 2).sum(-1)

    def gradV(self, omega):
        return self.strength * (omega**3 - omega)

    def describe(self):
        return {"potential": "double_well", "strength": self.strength}


class CallablePotential(Potential):
    """A user potential V: (..., p) -> (...) written in torch; its gradient comes from autograd.

    Parameters
    ----------
    fn : callable
        V, mapping a tensor (..., p) to (...).
    label : str, default "custom"
        Name recorded by :meth:`describe`.

    Examples
    --------
    >>> import torch
    >>> from meanfield.energy import CallablePotential
    >>> V = CallablePotential(lambda w: (w**2).sum(-1) / 2, label="harmonic")
    >>> V.gradV(torch.tensor([[1.0, -3.0]])).tolist()  # ∇(|ω|²/2) = ω
    [[1.0, -3.0]]
    >>> V.describe()
    {'potential': 'harmonic'}
    """

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], label: str = "custom"):
        if not callable(fn):
            raise TypeError("fn must be a callable taking a (..., p) tensor")
        self.fn, self.label = fn, label

    def V(self, omega):
        return self.fn(omega)

    def gradV(self, omega):
        with torch.enable_grad():
            w = omega.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self.fn(w).sum(), w)
        return g

    def describe(self):
        return {"potential": self.label}


class AlignmentTerm(Term):
    r"""Base of the alignment terms: the data, the targets T = U diag(w) Uᵀ and the feature map.

    Every form reads the data through the features and the target through its factors:

    .. math::

        \Phi_{ij} = \varphi(x_j; \omega_i), \qquad
        K_\mu(x, x') = \int \varphi(x; \omega)\, \varphi(x'; \omega)\, d\mu(\omega),
        \qquad T = U \operatorname{diag}(w)\, U^\top.

    Parameters
    ----------
    X : array (n, d)
        Data points.
    y : array (n,)
        Binary labels ±1 or class ids (see :func:`target_factors`).
    feature : str or FeatureMap, default "positive"
        Feature map φ(x; ω); it fixes the particle dimension p.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.energy import AlignmentTerm
    >>> term = AlignmentTerm(np.zeros((3, 2)), np.array([0, 1, 2]))
    >>> term.n, term.w_np.tolist(), term.describe()
    (3, [1.5, 1.5, 1.5, -0.5], {'feature': 'positive', 'n_data': 3})
    """

    name = "alignment"
    _bound_attributes = ("Xt", "offset", "U", "w", "_offset_zero", "_UXt")

    def __init__(self, X, y, feature: str | FeatureMap = "positive"):
        X = check_array("X", X, ndim=2)
        y = check_array("y", y, ndim=1)
        if len(y) != len(X):
            raise ValueError(
                f"y must have one label per row of X: len(y)={len(y)}, len(X)={len(X)}"
            )
        if len(X) < 2:
            raise ValueError(f"the alignment needs at least n >= 2 data points, got n={len(X)}")
        self.feature = get_feature_map(feature)
        self.X_np, self.y_np = X, y
        self.U_np, self.w_np = target_factors(y)
        self._bound = None

    @property
    def n(self) -> int:
        """Number of data points n.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.energy import LinearAlignment
        >>> LinearAlignment(np.zeros((3, 2)), np.array([1.0, -1.0, 1.0])).n
        3
        """
        return len(self.X_np)

    def bind(self, dim, dtype, device):
        p = self.feature.particle_dim(self.X_np.shape[1])
        if p != dim:
            raise ValueError(
                f"feature {self.feature.name!r} on data of dimension d={self.X_np.shape[1]} needs "
                f"particles of dimension p={p}, but the domain has dim={dim}"
            )
        X = torch.as_tensor(self.X_np, dtype=dtype, device=device)
        self.Xt, self.offset = self.feature.lift(X)
        self._bound = (dim, dtype, device)
        # c(x) = 0 (every map but the positive one): the pre-activation skips adding it (a
        # mini-batch inherits the flag: its offsets are some of these)
        self._offset_zero = not bool(self.offset.any())
        self._bind_rows()

    def _bind_rows(self):
        """What follows from the bound rows ``Xt``, ``offset`` and ``U_np``: the target
        tensors (subclasses add theirs). Also run for a mini-batch, on the parent's rows."""
        _, dtype, device = self._bound
        self.U = torch.as_tensor(self.U_np, dtype=dtype, device=device)
        self.w = torch.as_tensor(self.w_np, dtype=dtype, device=device)

    def subset_data(self, index):
        """The same term on the data rows ``index`` (a mini-batch), bound like this one.

        The targets keep the full data's class structure: the batch's T is the full T
        restricted to the rows, even when a class is missing from the batch.

        Parameters
        ----------
        index : array of int
            Rows of ``X`` and ``y`` to keep.

        Returns
        -------
        AlignmentTerm
            A new term of the same class; this one is unchanged.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.energy import LinearAlignment
        >>> term = LinearAlignment(np.zeros((3, 2)), np.array([0, 1, 2]))
        >>> batch = term.subset_data([0, 2])
        >>> batch.n, batch.U_np.shape, term.n  # three classes: 3 one-hot columns and ones
        (2, (2, 4), 3)
        """
        index = np.asarray(index)
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.X_np, new.y_np = self.X_np[index], self.y_np[index]
        # keep the full-data class structure (U, w) so T is the same matrix restricted
        new.U_np = self.U_np[index]
        if self._bound is not None:
            # the lift is row-wise: index the bound rows instead of lifting the batch again
            rows = torch.as_tensor(index if index.dtype == bool else index.astype(np.int64))
            rows = rows.to(self.Xt.device)
            new.Xt, new.offset = self.Xt[rows], self.offset[rows]
            new._bind_rows()
        return new

    def features(self, omega):
        """The features Φ_ij = g(z_ij) = φ(x_j; ω_i) and their derivatives g'(z_ij).

        Parameters
        ----------
        omega : tensor (..., N, p)
            Particles; the term must be bound.

        Returns
        -------
        phi, dphi : tensor (..., N, n)

        Examples
        --------
        >>> import numpy as np
        >>> import torch
        >>> from meanfield.energy import LinearAlignment
        >>> term = LinearAlignment(np.eye(3, 2), np.array([1.0, -1.0, 1.0]))
        >>> term.bind(2, torch.float64, "cpu")
        >>> phi, dphi = term.features(torch.zeros(5, 2, dtype=torch.float64))
        >>> tuple(phi.shape), tuple(dphi.shape)
        ((5, 3), (5, 3))
        """
        return self.feature.g_and_dg(self._preactivation(omega))

    def feature_values(self, omega):
        """The features Φ_ij = φ(x_j; ω_i) alone (no derivative), shape (..., N, n).

        Parameters
        ----------
        omega : tensor (..., N, p)
            Particles; the term must be bound.

        Returns
        -------
        tensor (..., N, n)
            The first output of :meth:`features`.

        Examples
        --------
        >>> import numpy as np
        >>> import torch
        >>> from meanfield.energy import LinearAlignment
        >>> term = LinearAlignment(np.eye(3, 2), np.array([1.0, -1.0, 1.0]))
        >>> term.bind(2, torch.float64, "cpu")
        >>> omega = torch.zeros(5, 2, dtype=torch.float64)
        >>> bool(torch.equal(term.feature_values(omega), term.features(omega)[0]))
        True
        """
        return self.feature.g(self._preactivation(omega))

    def _preactivation(self, omega):
        """z = ω x̃ᵀ + c, without the pass that adds c when it is zero."""
        if self._offset_zero:
            return omega @ self.Xt.transpose(-1, -2)
        return self.feature.preactivation(self.Xt, self.offset, omega)

    def _grad_from_coeff(self, coeff, dphi):
        """Σ_j coeff_ij g'(z_ij) x̃_j, shape (..., N, p)."""
        return (coeff * dphi) @ self.Xt

    def _T_apply(self, S):
        """(S diag(w)) Uᵀ: rows of Φ mapped by T, with S = Φ U."""
        return (S * self.w) @ self.U.T

    def _measure_kernel(self, points, weights):
        """⟨K_μ, T⟩_F and K_μ = Σ_k w_k φ_k φ_kᵀ (n, n) of a weighted measure, diagonal kept.

        The two pieces that the risk and normalised forms combine into their value on a measure.
        """
        phi = self.feature_values(points)
        S = phi @ self.U
        KT = (weights * (S * S * self.w).sum(-1)).sum()  # ⟨K_μ, T⟩
        Kmu = phi.T @ (weights[:, None] * phi)
        return KT, Kmu

    def describe(self):
        return {"feature": self.feature.name, "n_data": self.n}


class LinearAlignment(AlignmentTerm):
    r"""Linear (U-statistic) alignment, energy term −∫a dμ (THEORY §2, form 1).

    a(ω) = (1/(n(n−1))) Σ_{j≠k} T_jk φ(x_j; ω) φ(x_k; ω): a one-body data potential, so the
    model is a Riesz gas in the external field −a.

    .. math::

        a(\omega) = \frac{1}{n(n-1)} \sum_{j \ne k} T_{jk}\, \varphi(x_j; \omega)\,
        \varphi(x_k; \omega), \qquad E(\mu) \ni -\int a \, d\mu .

    Parameters
    ----------
    X : array (n, d)
        Data points.
    y : array (n,)
        Binary labels ±1 or class ids.
    feature : {"positive", "fourier", "softplus"}

    Examples
    --------
    The analytic gradient agrees with autograd:

    >>> import numpy as np
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, LinearAlignment
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    >>> E = Energy([LinearAlignment(X, np.array([1.0, 1.0, -1.0, -1.0]))], Box(2, 3.0))
    >>> omega = torch.tensor(np.random.default_rng(0).normal(size=(5, 2)), requires_grad=True)
    >>> E.value(omega).backward()
    >>> bool(torch.allclose(E.grad(omega.detach()), omega.grad))
    True
    """

    kind = "one-body"  # a(ω) does not depend on μ

    def _particle_chunks(self, N):
        # a(ω) is one-body: particles are processed in blocks of ~PAIR_CHUNK_ELEMENTS features,
        # so memory is O(chunk · n) and each block's passes stay in cache
        step = max(1, PAIR_CHUNK_ELEMENTS // self.n)
        return [(s, min(N, s + step)) for s in range(0, N, step)]

    def a(self, omega):
        """The data potential a(ω) at each particle (the term's value is −mean a).

        Parameters
        ----------
        omega : tensor (..., N, p)
            Particles; the term must be bound.

        Returns
        -------
        tensor (..., N)

        Examples
        --------
        >>> import numpy as np
        >>> import torch
        >>> from meanfield.energy import LinearAlignment
        >>> term = LinearAlignment(np.eye(3, 2), np.array([1.0, -1.0, 1.0]))
        >>> term.bind(2, torch.float64, "cpu")
        >>> omega = torch.tensor(np.random.default_rng(0).normal(size=(4, 2)))
        >>> a = term.a(omega)
        >>> tuple(a.shape), bool(torch.isclose(term.value(omega), -a.mean()))
        ((4,), True)
        """
        n = self.n
        out = []
        for s, e in self._particle_chunks(omega.shape[-2]):
            phi = self.feature_values(omega[..., s:e, :])
            S = phi @ self.U
            out.append(((S * S * self.w).sum(-1) - (phi * phi).sum(-1)) / (n * (n - 1)))
        return torch.cat(out, dim=-1)

    def value(self, omega):
        return -self.a(omega).mean(-1)

    def _bind_rows(self):
        super()._bind_rows()
        # binary labels (T = y yᵀ): the rows y_j x̃_j, for the O(n N p) gradient below
        self._UXt = self.U * self.Xt if self.U.shape[1] == 1 else None

    def grad(self, omega):
        # ∇_i a = (2/(n(n−1))) Σ_j c_ij g'(z_ij) x̃_j with c = Φ T − Φ (j = k left out).
        # Binary labels: Σ_j (Φ T)_ij g'_ij x̃_j = (Φ y)_i (g' ⊙ y x̃)_i, so no (N, n) matrix
        # Φ T is formed; the constant factors of g, g' (√2 for Fourier) act on (N, p) results.
        n, N = self.n, omega.shape[-2]
        out = torch.empty_like(omega)
        for s, e in self._particle_chunks(N):
            G, D, cg, cd = self.feature.g_and_dg_scaled(self._preactivation(omega[..., s:e, :]))
            S = (G @ self.U) * self.w  # (Φ U diag(w)) / c_g
            if self._UXt is not None:
                cross = S * (D @ self._UXt)  # Σ_j (ΦT)_ij g'_ij x̃_j / (c_g c_d)
                # G ⊙ D overwrites G (D may be G itself: G is not read again)
                out[..., s:e, :] = (cg * cd) * (cross - G.mul_(D) @ self.Xt)
            else:
                coeff = S @ self.U.transpose(-1, -2) - G  # (Φ T − Φ) / c_g
                out[..., s:e, :] = (cg * cd) * ((coeff * D) @ self.Xt)
        return out * (-2.0 / (n * (n - 1) * N))

    def first_variation(self, at, points=None, weights=None):
        return -self.a(at)


# the Grams of the alignment forms live with the Cristianini alignment (meanfield.alignment)
_small_gram, _times_gram = small_gram, times_gram


class RiskAlignment(AlignmentTerm):
    r"""Risk form: R(μ) = (1/(2n²)) Σ_{j,k} (α T_jk − K_μ(x_j, x_k))² (THEORY §2, form 2).

    Finite N: K_Ω² has its particle diagonal (i = i') left out, as every pair sum.

    .. math::

        R(\mu) = \frac{1}{2n^2} \sum_{j,k=1}^n \big(\alpha T_{jk} - K_\mu(x_j, x_k)\big)^2,
        \qquad K_\mu(x, x') = \int \varphi(x; \omega)\, \varphi(x'; \omega)\, d\mu(\omega).

    Parameters
    ----------
    X : array (n, d)
    y : array (n,)
    feature : {"positive", "fourier", "softplus"}
    alpha : float, default 1
        Scale α > 0 of the target.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, RiskAlignment
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    >>> E = Energy([RiskAlignment(X, np.array([1.0, 1.0, -1.0, -1.0]))], Box(2, 3.0))
    >>> omega = torch.tensor(np.random.default_rng(0).normal(size=(5, 2)), requires_grad=True)
    >>> E.value(omega).backward()
    >>> bool(E.value(omega) >= 0), bool(torch.allclose(E.grad(omega.detach()), omega.grad))
    (True, True)
    """

    kind = "measure"

    def __init__(self, X, y, feature="positive", alpha: float = 1.0):
        super().__init__(X, y, feature)
        self.alpha = check_positive("alpha", alpha)

    def measure_value(self, points, weights):
        """R(μ) = ‖αT − K_μ‖²_F / (2n²) with K_μ = Σ_k w_k φ_k φ_kᵀ (diagonal included).

        Parameters
        ----------
        points : tensor (K, p)
        weights : tensor (K,)
            Non-negative masses w_k.

        Returns
        -------
        tensor ()

        Examples
        --------
        On the empirical measure it is H_N plus the particle diagonal Σ_i |φ_i|⁴ / (2n²N²)
        that the finite-N value leaves out:

        >>> import numpy as np
        >>> import torch
        >>> from meanfield.energy import RiskAlignment
        >>> term = RiskAlignment(np.eye(4, 2), np.array([1.0, 1.0, -1.0, -1.0]))
        >>> term.bind(2, torch.float64, "cpu")
        >>> omega = torch.tensor(np.random.default_rng(0).normal(size=(5, 2)))
        >>> phi, _ = term.features(omega)
        >>> diagonal = ((phi * phi).sum(-1) ** 2).sum() / (2 * 4**2 * 5**2)
        >>> R = term.measure_value(omega, torch.full((5,), 0.2, dtype=torch.float64))
        >>> bool(torch.isclose(R, term.value(omega) + diagonal))
        True
        """
        KT, Kmu = self._measure_kernel(points, weights)
        al = self.alpha
        return (al**2 * self._T_norm_sq() - 2 * al * KT + (Kmu * Kmu).sum()) / (2 * self.n**2)

    def _T_norm_sq(self):
        M = (self.U.T @ self.U) * self.w
        return (M * M.T).sum()

    def value(self, omega):
        phi = self.feature_values(omega)
        N, n, al = omega.shape[-2], self.n, self.alpha
        S = phi @ self.U
        tr_T = (S * S * self.w).sum((-1, -2))  # Σ_i φ_iᵀ T φ_i
        P = _small_gram(phi)  # ‖ΦᵀΦ‖_F² (N K_Ω) from the smaller of the two Grams
        sq = (phi * phi).sum(-1)
        pair = (P * P).sum((-1, -2)) - (sq * sq).sum(-1)
        return (al**2 * self._T_norm_sq() - 2 * al * tr_T / N + pair / N**2) / (2 * n**2)

    def grad(self, omega):
        phi, dphi = self.features(omega)
        N, n, al = omega.shape[-2], self.n, self.alpha
        S = phi @ self.U
        P = _small_gram(phi)
        sq = (phi * phi).sum(-1, keepdim=True)
        coeff = -(2 * al / (n**2 * N)) * self._T_apply(S) + (2 / (n**2 * N**2)) * (
            _times_gram(phi, P) - sq * phi
        )
        return self._grad_from_coeff(coeff, dphi)

    def first_variation(self, at, points, weights):
        phi_at = self.feature_values(at)  # (M, n)
        phi_mu = self.feature_values(points)  # (K, n)
        S = phi_at @ self.U
        tTt = (S * S * self.w).sum(-1)
        Kphi = (phi_at @ phi_mu.T) * weights  # (M, K): w_k φ(ω)·φ_k
        tKt = (Kphi * (phi_at @ phi_mu.T)).sum(-1)
        return -(self.alpha * tTt - tKt) / self.n**2

    def describe(self):
        return {**super().describe(), "alpha": self.alpha}


class NormalisedAlignment(AlignmentTerm):
    r"""Cristianini alignment A = ⟨K, T⟩_F / (‖K‖_F ‖T‖_F); energy term −A (form 3).

    A ratio, so the finite-N kernel keeps its diagonal: H_N = −A(μ_N) exactly.

    .. math::

        A(\mu) = \frac{\langle K_\mu, T \rangle_F}{\|K_\mu\|_F \, \|T\|_F} \in [-1, 1].

    Parameters
    ----------
    X : array (n, d)
        Data points.
    y : array (n,)
        Binary labels ±1 or class ids.
    feature : {"positive", "fourier", "softplus"} or FeatureMap, default "positive"

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, NormalisedAlignment
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    >>> E = Energy([NormalisedAlignment(X, np.array([1.0, 1.0, -1.0, -1.0]))], Box(2, 3.0))
    >>> omega = torch.tensor(np.random.default_rng(0).normal(size=(5, 2)), requires_grad=True)
    >>> E.value(omega).backward()
    >>> bool(abs(E.value(omega)) <= 1), bool(torch.allclose(E.grad(omega.detach()), omega.grad))
    (True, True)
    """

    kind = "measure"

    def measure_value(self, points, weights):
        """−A(μ) = −⟨K_μ, T⟩_F / (‖K_μ‖_F ‖T‖_F) with K_μ = Σ_k w_k φ_k φ_kᵀ.

        Parameters
        ----------
        points : tensor (K, p)
        weights : tensor (K,)
            Non-negative masses w_k.

        Returns
        -------
        tensor ()

        Examples
        --------
        A ratio, so on the empirical measure it is exactly H_N:

        >>> import numpy as np
        >>> import torch
        >>> from meanfield.energy import NormalisedAlignment
        >>> term = NormalisedAlignment(np.eye(4, 2), np.array([1.0, 1.0, -1.0, -1.0]))
        >>> term.bind(2, torch.float64, "cpu")
        >>> omega = torch.tensor(np.random.default_rng(1).normal(size=(5, 2)))
        >>> uniform = torch.full((5,), 0.2, dtype=torch.float64)
        >>> bool(torch.isclose(term.measure_value(omega, uniform), term.value(omega)))
        True
        """
        KT, Kmu = self._measure_kernel(points, weights)
        return -KT / ((Kmu * Kmu).sum().sqrt() * self._T_norm())

    def _T_norm(self):
        return target_norm(self.U, self.w)

    def _parts(self, omega):
        phi, dphi = self.features(omega)
        S, P, num, Gn = alignment_parts(phi, self.U, self.w)
        return phi, dphi, S, P, num, Gn

    def value(self, omega):
        _, _, num, Gn = alignment_parts(self.feature_values(omega), self.U, self.w)
        return -num / (Gn * self._T_norm())

    def grad(self, omega):
        phi, dphi, S, P, num, Gn = self._parts(omega)
        Tn = self._T_norm()
        num, Gn = num[..., None, None], Gn[..., None, None]
        dA = (2 * self._T_apply(S) - 2 * (num / Gn**2) * _times_gram(phi, P)) / (Gn * Tn)
        return -self._grad_from_coeff(dA, dphi)

    def first_variation(self, at, points, weights):
        phi_at = self.feature_values(at)
        S_at = phi_at @ self.U
        KT, Kmu = self._measure_kernel(points, weights)
        Knorm = (Kmu * Kmu).sum().sqrt()
        tTt = (S_at * S_at * self.w).sum(-1)
        tKt = ((phi_at @ Kmu) * phi_at).sum(-1)
        Tn = self._T_norm()
        return -(tTt / (Knorm * Tn) - KT * tKt / (Knorm**3 * Tn))


class CentredAlignment(NormalisedAlignment):
    r"""Centred alignment (Cortes, Mohri & Rostamizadeh 2012); energy term −A_c.

    A_c = ⟨K_c, T_c⟩_F / (‖K_c‖_F ‖T_c‖_F) with K_c = H K H, T_c = H T H and H = I − 11ᵀ/n:
    the Cristianini alignment of the *centred* kernel and target, so a feature that is nearly
    constant on the data (or correlated only with the label mean) earns nothing.  Because
    K_Ω = ΦᵀΦ/N, K_c is the kernel of the centred features φ_i − mean_j φ_i(x_j), and T_c has
    the centred factors H U; this term is the normalised form on those (so its value, gradient
    and first variation are the normalised ones, the gradient's data coefficients centred by the
    chain rule).  Like the normalised form, a ratio: the finite-N kernel keeps its diagonal.
    On a data mini-batch (``subset_data``) the centring is over the batch.

    .. math::

        A_c(\mu) = \frac{\langle H K_\mu H, H T H \rangle_F}
        {\|H K_\mu H\|_F \, \|H T H\|_F}, \qquad H = I - \tfrac1n \mathbf{1}\mathbf{1}^\top.

    Parameters
    ----------
    X : array (n, d)
        Data points; the features are centred over these rows.
    y : array (n,)
        Binary labels ±1 or class ids; the target is centred through its factors, H U.
    feature : {"positive", "fourier", "softplus"} or FeatureMap, default "positive"
        Feature map φ(x; ω) before centring.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import CentredAlignment, Energy
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    >>> E = Energy([CentredAlignment(X, np.array([1.0, 1.0, -1.0, -1.0]))], Box(2, 3.0))
    >>> omega = torch.tensor(np.random.default_rng(0).normal(size=(5, 2)), requires_grad=True)
    >>> E.value(omega).backward()
    >>> bool(abs(E.value(omega)) <= 1), bool(torch.allclose(E.grad(omega.detach()), omega.grad))
    (True, True)

    References
    ----------
    C. Cortes, M. Mohri, A. Rostamizadeh, "Algorithms for learning kernels based on centered
    alignment", JMLR 13, 2012.
    """

    def _bind_rows(self):
        super()._bind_rows()
        self.U = self.U - self.U.mean(0, keepdim=True)  # T_c = (HU) diag(w) (HU)ᵀ

    def features(self, omega):
        """Centred features Φ_ij − mean_k Φ_ik (over the data) and the uncentred g'(z_ij).

        Parameters
        ----------
        omega : tensor (..., N, p)
            Particles of a bound term.

        Returns
        -------
        phi : tensor (..., N, n)
            The centred features: each row sums to zero over the data.
        dphi : tensor (..., N, n)
            g'(z), not centred (the gradient centres its coefficients instead).

        Examples
        --------
        >>> import numpy as np
        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import CentredAlignment, Energy
        >>> X, y = np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 1.0]]), np.array([0, 1, 1])
        >>> (term,) = Energy([CentredAlignment(X, y)], Box(2, 3.0)).terms
        >>> phi, _ = term.features(torch.ones(4, 2, dtype=torch.float64))
        >>> phi.mean(-1).abs().max().item() < 1e-15  # each particle's features average to 0
        True
        """
        phi, dphi = super().features(omega)
        return phi - phi.mean(-1, keepdim=True), dphi

    def feature_values(self, omega):
        phi = super().feature_values(omega)
        return phi - phi.mean(-1, keepdim=True)

    def _grad_from_coeff(self, coeff, dphi):
        # ∂/∂ω_i Σ_j c_ij (φ_ij − mean_k φ_ik) = Σ_j (c_ij − mean_k c_ik) g'(z_ij) x̃_j
        return super()._grad_from_coeff(coeff - coeff.mean(-1, keepdim=True), dphi)


class PairInteraction(Term):
    r"""λ ∬ k(ω − ω') μ(dω) μ(dω'); finite N: (λ/N²) Σ_{i≠j} k(ω_i − ω_j).

    Particles without an autograd graph go through the tiled symmetric sums of
    :func:`meanfield.pairsum.pair_sums` (each pair once, two matrix products per tile, float32
    rescaled where its range is too short), replica by replica.  Replicas of fewer than
    :attr:`tiled_replica_min_n` particles and differentiable values run over row chunks of at
    most :data:`PAIR_CHUNK_ELEMENTS` entries (in float64 when float32 would leave its range).
    In p = 1 the differences ω_i − ω_j are formed directly (exact, which the stiff 1D
    singular kernels need); in p ≥ 2 the squared distances come from |a|² + |b|² − 2aᵀb, a
    matrix product, so no (chunk × N × p) tensor is built (relative error ~ machine epsilon ×
    |ω|²/|z|²).

    Parameters
    ----------
    kernel : PairKernel
    lam : float
        Interaction strength λ ≥ 0.

    Notes
    -----
    .. math::

        E(\mu) = \lambda \iint k(\omega - \omega')\, d\mu(\omega)\, d\mu(\omega'), \qquad
        H_N(\Omega) = \frac{\lambda}{N^2} \sum_{i \ne j} k(\omega_i - \omega_j),

    and δE/δμ = 2λ k ∗ μ.

    Examples
    --------
    Two particles at distance 2 with the log kernel: H_N = (λ/4) · 2 · (−log 2).

    >>> import math
    >>> import torch
    >>> from meanfield.energy import PairInteraction
    >>> from meanfield.kernels import Riesz
    >>> term = PairInteraction(Riesz(0.0), lam=0.5)
    >>> omega = torch.tensor([[-1.0], [1.0]], dtype=torch.float64)
    >>> math.isclose(float(term.value(omega)), -0.25 * math.log(2))
    True
    >>> term.grad(omega).ravel().tolist()  # repulsion: the force −∇H pushes them apart
    [0.125, -0.125]
    """

    name = "interaction"
    kind = "pair"

    def __init__(self, kernel: PairKernel, lam: float = 1.0):
        if not isinstance(kernel, PairKernel):
            raise TypeError(f"kernel must be a PairKernel (e.g. Riesz(s)), got {kernel!r}")
        self.kernel = kernel
        self.lam = check_positive("lam (lambda)", lam, allow_zero=True)

    def bind(self, dim, dtype, device):
        self.kernel.check_dimension(dim)

    def _chunks(self, N, p):
        per_row = N
        step = max(1, min(N, PAIR_CHUNK_ELEMENTS // max(per_row, 1)))
        return [(s, min(N, s + step)) for s in range(0, N, step)]

    def _block_r2(self, block, omega, sq_block, sq_all):
        """Squared distances (..., C, N) and, in low p, the differences (..., C, N, p)."""
        if omega.shape[-1] == 1:
            diff = block.unsqueeze(-2) - omega.unsqueeze(-3)
            return (diff * diff).sum(-1), diff
        base = sq_block.unsqueeze(-1) + sq_all.unsqueeze(-2)
        if omega.ndim == 2:  # the gemm adds |a|² + |b|² in its epilogue
            r2 = torch.addmm(base, block, omega.T, alpha=-2.0)
        else:
            r2 = base - 2 * block @ omega.transpose(-1, -2)
        return r2.clamp_min(0.0), None

    def _exact_near(self, r2, block, omega, tol: float):
        """Recompute from explicit differences the entries of r2 (..., C, N) at or below the
        round-off bound ``tol`` of the matrix product: a coincident pair rounds there to a
        tiny r2 > 0 instead of 0, which a singular κ' turns into an enormous, cancelling
        force (see :meth:`meanfield.pairsum._Tiles.exact_below`)."""
        near = r2 <= tol
        if not bool(near.any()):
            return r2
        idx = near.nonzero(as_tuple=True)  # (..., row in block, column)
        z = block[idx[:-1]] - omega[idx[:-2] + idx[-1:]]
        r2 = r2.index_put(idx, (z * z).sum(-1))  # out of place: r2 may be in a graph
        return r2

    def _near_tol(self, omega, sq) -> float:
        """The round-off bound below which r2 entries are recomputed exactly (p ≥ 2 with a
        singular or barely softened kernel), else −1 (none)."""
        p = omega.shape[-1]
        if p == 1 or omega.numel() == 0:
            return -1.0
        soft2 = self.kernel.softening**2
        tol = roundoff_bound(p, omega.dtype, float(sq.detach().max()), soft2)
        return tol if (self.kernel.is_singular or 0.0 < soft2 <= tol) else -1.0

    def _pair_pass(self, omega, want_value: bool, want_grad: bool):
        N, p = omega.shape[-2], omega.shape[-1]
        sq = (omega * omega).sum(-1)
        traced = torch.compiler.is_compiling()
        tol = -1.0 if traced else self._near_tol(omega, sq)
        total = omega.new_zeros(omega.shape[:-2]) if want_value else None
        grad = torch.empty_like(omega) if want_grad else None
        for s, e in self._chunks(N, p):
            block = omega[..., s:e, :]
            if traced:  # explicit differences in any p: exact, and fused with the sums
                diff = block.unsqueeze(-2) - omega.unsqueeze(-3)
                r2 = (diff * diff).sum(-1)
                v, g = self._masked_block(r2, diff, block, omega, s, want_value, want_grad)
                total = total + v if want_value else None
                if want_grad:
                    grad[..., s:e, :] = g
                continue
            r2, diff = self._block_r2(block, omega, sq[..., s:e], sq)
            if tol >= 0:
                r2 = self._exact_near(r2, block, omega, tol)
            # the i = j entries of this row block lie on its diagonal at column offset s: give
            # them a harmless distance 1, then leave them out of the sums below
            r2.diagonal(offset=s, dim1=-2, dim2=-1).fill_(1.0)
            if want_value:
                k = self.kernel.value_sq(r2)
                total = total + k.sum((-1, -2)) - k.diagonal(offset=s, dim1=-2, dim2=-1).sum(-1)
            if want_grad:
                # the value pass above still holds r2 in its autograd graph: work on a copy
                c = self.kernel.grad_coeff_sq_(r2.clone() if want_value else r2)
                c.diagonal(offset=s, dim1=-2, dim2=-1).zero_()
                if diff is not None:
                    grad[..., s:e, :] = (c.unsqueeze(-1) * diff).sum(-2)
                else:
                    grad[..., s:e, :] = c.sum(-1, keepdim=True) * block - c @ omega
        return total, grad

    def _masked_block(self, r2, diff, block, omega, s: int, want_value: bool, want_grad: bool):
        """A row block's sums as :meth:`_pair_pass` makes them, its i = j entries (on the
        diagonal at column offset s) masked instead of written in place: traced by
        :func:`torch.compile` (HMC's fused trajectory, with the explicit differences ``diff``
        in any p, so no near-pair check reads a value), the block then fuses into one pass
        over the pairs.  Equal to the eager sums to round-off (the diagonal is left out of
        the sums instead of subtracted; in p ≥ 2 the distances are exact where the eager
        matrix product rounds)."""
        rows = torch.arange(s, s + r2.shape[-2], device=r2.device)
        eye = rows[:, None] == torch.arange(r2.shape[-1], device=r2.device)
        r2 = torch.where(eye, torch.ones_like(r2), r2)
        value = grad = None
        if want_value:
            value = torch.where(eye, 0.0, self.kernel.value_sq(r2)).sum((-1, -2))
        if want_grad:
            c = torch.where(eye, 0.0, self.kernel.grad_coeff_sq_(r2.clone()))
            if diff is not None:
                grad = (c.unsqueeze(-1) * diff).sum(-2)
            else:
                grad = c.sum(-1, keepdim=True) * block - c @ omega
        return value, grad

    #: Replicas (..., N, p) with at least this many particles take the tiled sums one replica
    #: at a time; below it one batched row-chunk pass over all replicas costs fewer calls.
    tiled_replica_min_n = 256

    def _uses_tiles(self, omega) -> bool:
        """No autograd graph, and one set of particles or large replicas: the tiled symmetric
        sums of :mod:`meanfield.pairsum` (the rest takes the row chunks)."""
        if torch.is_grad_enabled() and omega.requires_grad or torch.compiler.is_compiling():
            return False  # (a trace takes the row chunks: the tiles' range check reads a value)
        return omega.ndim == 2 or omega.shape[-2] >= self.tiled_replica_min_n

    def _replica_pass(self, omega, want_value: bool, want_grad: bool):
        """The tiled sums of each replica of omega (..., N, p), stacked."""
        outs = [self._scaled_pass(x, want_value, want_grad) for x in omega.flatten(0, -3)]
        v = torch.stack([o[0] for o in outs]).reshape(omega.shape[:-2]) if want_value else None
        g = torch.stack([o[1] for o in outs]).reshape(omega.shape) if want_grad else None
        return v, g

    def _scaled_pass(self, omega, want_value: bool, want_grad: bool):
        N = omega.shape[-2]
        if self._uses_tiles(omega):
            if omega.ndim > 2:
                return self._replica_pass(omega, want_value, want_grad)
            return pair_sums(
                omega,
                self.kernel,
                want_value=want_value,
                want_grad=want_grad,
                value_scale=self.lam / N**2,
                grad_scale=2 * self.lam / N**2,
            )
        if omega.dtype != torch.float64 and out_of_range(self.kernel, omega):
            v, g = self._scaled_pass(omega.double(), want_value, want_grad)
            return cast_checked(v, omega.dtype, "value"), cast_checked(g, omega.dtype, "force")
        total, g = self._pair_pass(omega, want_value, want_grad)
        return (
            self.lam * total / N**2 if want_value else None,
            (2 * self.lam / N**2) * g if want_grad else None,
        )

    def value_and_grad(self, omega):
        return self._scaled_pass(omega, True, True)

    def value(self, omega):
        return self._scaled_pass(omega, True, False)[0]

    def grad(self, omega):
        return self._scaled_pass(omega, False, True)[1]

    def grad_random_batch(self, omega, batch_size: int, generator: torch.Generator):
        r"""Random-batch estimate of ∇H (Jin–Li–Liu 2020), unbiased, cost O(N B p).

        Particles are split by a random permutation into batches of ``batch_size`` (a remainder
        of one joins the last batch); particle i feels only its batch, rescaled by
        (N − 1)/(|b| − 1) so the expectation over permutations is the exact gradient.

        .. math::

            \widehat{\nabla_{\omega_i} H} = \frac{2\lambda}{N^2} \frac{N - 1}{|b| - 1}
            \sum_{j \in b(i),\, j \ne i} \nabla k(\omega_i - \omega_j).

        Parameters
        ----------
        omega : tensor (..., N, p)
        batch_size : int
            B ≥ 2; B ≥ N gives the exact :meth:`grad`.
        generator : torch.Generator
            Source of the permutation.

        Returns
        -------
        tensor (..., N, p)

        Examples
        --------
        The mean of many estimates approaches the exact gradient:

        >>> import torch
        >>> from meanfield.energy import PairInteraction
        >>> from meanfield.kernels import Riesz
        >>> term = PairInteraction(Riesz(0.0), lam=0.5)
        >>> omega = torch.tensor([[-1.5], [-0.5], [0.5], [2.0]], dtype=torch.float64)
        >>> gen = torch.Generator().manual_seed(0)
        >>> mean = torch.stack([term.grad_random_batch(omega, 2, gen) for _ in range(300)]).mean(0)
        >>> bool(torch.allclose(mean, term.grad(omega), atol=0.01))
        True
        """
        N = omega.shape[-2]
        if batch_size >= N:
            return self.grad(omega)
        if omega.dtype != torch.float64 and out_of_range(self.kernel, omega):
            g = self.grad_random_batch(omega.double(), batch_size, generator)
            return cast_checked(g, omega.dtype, "force")
        perm = torch.randperm(N, generator=generator).to(omega.device)
        nb = N // batch_size
        sizes = [batch_size] * nb
        rem = N - nb * batch_size
        if rem == 1:
            sizes[-1] += 1
        elif rem > 1:
            sizes.append(rem)
        out = torch.empty_like(omega)
        start = 0
        for size, count in _runs(sizes):
            idx = perm[start : start + size * count]
            blocks = omega[..., idx, :].reshape(*omega.shape[:-2], count, size, omega.shape[-1])
            _, g = self._pair_pass(blocks, False, True)  # all pairs within each batch
            out[..., idx, :] = (g * ((N - 1) / (size - 1))).reshape(
                *omega.shape[:-2], size * count, omega.shape[-1]
            )
            start += size * count
        return (2 * self.lam / N**2) * out

    def first_variation(self, at, points, weights):
        """2λ (k ∗ μ)(ω) = 2λ Σ_k w_k k(ω − ω_k), chunked over the evaluation points.

        Parameters
        ----------
        at : tensor (M, p)
        points : tensor (K, p)
        weights : tensor (K,)

        Returns
        -------
        tensor (M,)

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import PairInteraction
        >>> from meanfield.kernels import Riesz
        >>> points = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
        >>> at = torch.linspace(0.5, 1.5, 1001, dtype=torch.float64)[:, None]
        >>> field = PairInteraction(Riesz(0.0)).first_variation(at, points, torch.ones(2).double())
        >>> tuple(field.shape), round(float(field[500]), 12)  # zero midway: k(±1) = −log 1
        ((1001,), 0.0)
        """
        out = at.new_empty(at.shape[0])
        step = max(1, PAIR_CHUNK_ELEMENTS // max(points.shape[0] * at.shape[1], 1))
        for s in range(0, at.shape[0], step):
            z = at[s : s + step, None, :] - points[None, :, :]
            out[s : s + step] = (self.kernel(z) * weights).sum(-1)
        return 2 * self.lam * out

    def pair_kernel(self):
        return self.kernel, self.lam

    def describe(self):
        return {**self.kernel.describe(), "lam": self.lam}


def _runs(sizes):
    """Group equal consecutive sizes: [64, 64, 65] -> [(64, 2), (65, 1)]."""
    out = []
    for s in sizes:
        if out and out[-1][0] == s:
            out[-1][1] += 1
        else:
            out.append([s, 1])
    return [tuple(r) for r in out]


# ----------------------------------------------------------------------------------------
# the energy
# ----------------------------------------------------------------------------------------
class Energy:
    r"""E = Σ terms on a domain: the one definition of the model that every view consumes.

    .. math::

        E(\mu) = \int V \, d\mu - A(\mu)
        + \lambda \iint k(\omega - \omega')\, \mu(d\omega)\, \mu(d\omega').

    Parameters
    ----------
    terms : sequence of Term
        E.g. ``[QuadraticPotential(), LinearAlignment(X, y), PairInteraction(Riesz(0.), 0.5)]``.
    domain : Domain
        The particle domain 𝒲 (its ``dim`` is the particle dimension p).
    dtype : torch.dtype, default float64
    device : str or torch.device, default "cpu"

    Examples
    --------
    Confinement |ω|²/2 and the log interaction with λ = 1/2, two particles at ±1:
    H_N = (1 + 1)/(2 · 2) − (1/2)(2/4) log 2.

    >>> import math
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    >>> from meanfield.kernels import Riesz
    >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 3.0))
    >>> omega = [[-1.0], [1.0]]
    >>> math.isclose(float(E.value(omega)), 0.5 - 0.25 * math.log(2))
    True
    >>> {k: round(float(v), 4) for k, v in E.term_values(omega).items()}
    {'confinement': 0.5, 'interaction': -0.1733}
    >>> E.drift(omega).ravel().tolist()  # N ∇H_N: ω_i from V, ±1/4 from the pair
    [-0.75, 0.75]
    """

    def __init__(self, terms: Sequence[Term], domain: Domain, *, dtype=torch.float64, device="cpu"):
        if not isinstance(domain, Domain):
            raise TypeError(f"domain must be a Box or a Ball, got {domain!r}")
        terms = list(terms)
        if not terms:
            raise ValueError("the energy needs at least one term")
        for t in terms:
            if not isinstance(t, Term):
                raise TypeError(f"every term must be a meanfield.energy.Term, got {t!r}")
        check_choice("dtype", str(dtype).replace("torch.", ""), ("float64", "float32"))
        # each energy binds its own shallow copies, so one term can serve several energies
        # (e.g. a float64 and a float32 one) without one rebinding the other's tensors
        self.terms = [copy.copy(t) for t in terms]
        self.domain = domain
        self.dtype, self.device = dtype, torch.device(device)
        for t in self.terms:
            t.bind(domain.dim, dtype, self.device)

    @property
    def dim(self) -> int:
        """The particle dimension p (the domain's).

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> Energy([QuadraticPotential()], Box(3, 2.0)).dim
        3
        """
        return self.domain.dim

    def as_tensor(self, omega, *, name: str = "omega") -> torch.Tensor:
        """Particles as a tensor of this energy's dtype/device, checking shape (..., N, p).

        Parameters
        ----------
        omega : tensor or array-like (..., N, p)
        name : str, default "omega"
            Name quoted in the error message.

        Returns
        -------
        tensor (..., N, p)

        Raises
        ------
        ValueError
            Fewer than two axes, or a last axis other than p.

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> E = Energy([QuadraticPotential()], Box(2, 2.0), dtype=torch.float32)
        >>> E.as_tensor([[0.0, 1.0]]).dtype
        torch.float32
        >>> try:
        ...     E.as_tensor([[0.0, 1.0, 2.0]])
        ... except ValueError as err:
        ...     print(err)
        omega must have shape (..., N, 2), got (1, 3)
        """
        if not isinstance(omega, torch.Tensor):
            omega = torch.as_tensor(check_array(name, omega), dtype=self.dtype)
        if omega.ndim < 2 or omega.shape[-1] != self.dim:
            raise ValueError(
                f"{name} must have shape (..., N, {self.dim}), got {tuple(omega.shape)}"
            )
        return omega.to(dtype=self.dtype, device=self.device)

    def value(self, omega) -> torch.Tensor:
        """H_N(Ω), the sum of the terms' finite-N energies.

        Parameters
        ----------
        omega : tensor or array-like (..., N, p)
            Particles, converted by :meth:`as_tensor`.

        Returns
        -------
        tensor (...)

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import DoubleWellPotential, Energy, QuadraticPotential
        >>> E = Energy([QuadraticPotential(), DoubleWellPotential()], Box(1, 2.0))
        >>> E.value([[[1.0], [-1.0]], [[0.0], [0.0]]]).tolist()  # 1/2 − 1/4; 0
        [0.25, 0.0]
        """
        omega = self.as_tensor(omega)
        return sum(t.value(omega) for t in self.terms)

    @property
    def term_names(self) -> list[str]:
        """Unique term names in the order of ``terms``: the name, then ``name_2``, ``name_3``…
        for repeats (the keys of :meth:`term_values` and of the grid's term energies).

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import DoubleWellPotential, Energy, QuadraticPotential
        >>> Energy([QuadraticPotential(), DoubleWellPotential()], Box(1, 2.0)).term_names
        ['confinement', 'confinement_2']
        """
        names: list[str] = []
        for t in self.terms:
            key, i = t.name, 1
            while key in names:
                i += 1
                key = f"{t.name}_{i}"
            names.append(key)
        return names

    def term_values(self, omega) -> dict[str, torch.Tensor]:
        """Each term's contribution, keyed by a unique name (``alignment``, ``interaction``…).

        Parameters
        ----------
        omega : tensor or array-like (..., N, p)

        Returns
        -------
        dict of str to tensor (...)
            Keyed by :attr:`term_names`; the values sum to :meth:`value`.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import DoubleWellPotential, Energy, QuadraticPotential
        >>> E = Energy([QuadraticPotential(), DoubleWellPotential()], Box(1, 2.0))
        >>> {k: float(v) for k, v in E.term_values([[2.0]]).items()}
        {'confinement': 2.0, 'confinement_2': 2.0}
        """
        omega = self.as_tensor(omega)
        return {k: t.value(omega) for k, t in zip(self.term_names, self.terms, strict=True)}

    def value_and_grad(self, omega) -> tuple[torch.Tensor, torch.Tensor]:
        """(H_N, ∇H_N) with one pass over the pairs.

        Parameters
        ----------
        omega : tensor or array-like (..., N, p)

        Returns
        -------
        value : tensor (...)
        grad : tensor (..., N, p)

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], Box(1, 3.0))
        >>> omega = torch.tensor([[-1.0], [0.5], [2.0]], dtype=torch.float64)
        >>> v, g = E.value_and_grad(omega)
        >>> bool(torch.isclose(v, E.value(omega))), bool(torch.allclose(g, E.grad(omega)))
        (True, True)
        """
        values, grad = self.term_values_and_grad(omega)
        return sum(values.values()), grad

    def term_values_and_grad(self, omega) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Each term's value (as :meth:`term_values`) and ∇H_N, with one pass over the pairs.

        :meth:`value_and_grad` is the sum of these values with the same gradient.

        Parameters
        ----------
        omega : tensor or array-like (..., N, p)

        Returns
        -------
        values : dict of str to tensor (...)
            Keyed by :attr:`term_names`.
        grad : tensor (..., N, p)

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import DoubleWellPotential, Energy, QuadraticPotential
        >>> E = Energy([QuadraticPotential(), DoubleWellPotential()], Box(1, 2.0))
        >>> values, grad = E.term_values_and_grad([[2.0]])
        >>> {k: float(v) for k, v in values.items()}, grad.ravel().tolist()  # ω, ω³ − ω
        ({'confinement': 2.0, 'confinement_2': 2.0}, [8.0])
        """
        omega = self.as_tensor(omega)
        values, grad = {}, 0
        for k, t in zip(self.term_names, self.terms, strict=True):
            values[k], g = t.value_and_grad(omega)
            grad = grad + g
        return values, grad

    def grad(self, omega) -> torch.Tensor:
        """∇_Ω H_N, the analytic gradient of the sum of the terms.

        Parameters
        ----------
        omega : tensor or array-like (..., N, p)

        Returns
        -------
        tensor (..., N, p)
            O(1/N) per particle; :meth:`drift` is N times it.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> Energy([QuadraticPotential()], Box(1, 3.0)).grad([[1.0], [-2.0]]).ravel().tolist()
        [0.5, -1.0]
        """
        omega = self.as_tensor(omega)
        return sum(t.grad(omega) for t in self.terms)

    def drift(
        self,
        omega,
        *,
        interaction_batch: int | None = None,
        generator: torch.Generator | None = None,
        data_index=None,
    ) -> torch.Tensor:
        r"""N ∇_{ω_i} H_N: the O(1) force of Algorithm 1, optionally stochastic.

        .. math::

            d\omega_i = -N \nabla_{\omega_i} H_N(\Omega)\, dt + \sqrt{2/\beta_N}\, dW_i .

        Parameters
        ----------
        omega : tensor or array (..., N, p)
            Particles; converted like :meth:`value` (numpy in, this energy's dtype/device).
        interaction_batch : int, optional
            Random-batch size B for the pair terms (O(N B) instead of O(N²)).
        generator : torch.Generator
            Source of the random batches; required with ``interaction_batch``.
        data_index : array of int, optional
            Mini-batch of data rows for the alignment terms.

        Returns
        -------
        tensor (..., N, p)
            +N ∇H_N; the SDE drift is its negative (dω = −N∇H_N dt + √(2/β_N) dW).

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 3.0))
        >>> omega = torch.linspace(-1.0, 1.0, 8, dtype=torch.float64)[:, None]
        >>> bool(torch.allclose(E.drift(omega), 8 * E.grad(omega)))
        True
        >>> gen = torch.Generator().manual_seed(0)  # random batches of 4 for the pair term
        >>> tuple(E.drift(omega, interaction_batch=4, generator=gen).shape)
        (8, 1)
        """
        omega = self.as_tensor(omega)
        if interaction_batch is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                "drift(interaction_batch=...) needs generator=torch.Generator (seeded) for the "
                f"random batches, got {generator!r}"
            )
        N = omega.shape[-2]
        total = torch.zeros_like(omega)
        for t in self.terms:
            term = t.subset_data(data_index) if data_index is not None else t
            if interaction_batch is not None and t.kind == "pair":
                total = total + term.grad_random_batch(omega, interaction_batch, generator)
            else:
                total = total + term.grad(omega)
        return N * total

    def first_variation(self, at, points, weights) -> torch.Tensor:
        """δE/δμ at points ``at`` for μ = Σ_k weights_k δ_{points_k}: the sum over the terms.

        Parameters
        ----------
        at : tensor or array-like (M, p)
        points : tensor or array-like (K, p)
        weights : array-like (K,)
            Non-negative masses.

        Returns
        -------
        tensor (M,)

        Raises
        ------
        ValueError
            ``weights`` of another length than ``points``, or negative.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], Box(1, 3.0))
        >>> E.first_variation([[0.0], [1.0]], [[1.0]], [1.0]).tolist()  # ω²/2 − |ω − 1|
        [-1.0, 0.5]
        """
        at = self.as_tensor(at, name="at")
        points = self.as_tensor(points, name="points")
        weights = torch.as_tensor(
            check_array("weights", weights, ndim=1), dtype=self.dtype, device=self.device
        )
        if weights.shape[0] != points.shape[0]:
            raise ValueError("weights must have one entry per point")
        if torch.any(weights < 0):
            raise ValueError("weights must be non-negative (a measure)")
        return sum(t.first_variation(at, points, weights) for t in self.terms)

    def n_data(self) -> int | None:
        """Number of data points of the alignment terms (None without data).

        Returns
        -------
        int or None

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, LinearAlignment, QuadraticPotential
        >>> X, y = np.eye(3, 2), np.array([1.0, -1.0, 1.0])
        >>> Energy([QuadraticPotential(), LinearAlignment(X, y)], Box(2, 2.0)).n_data()
        3
        >>> print(Energy([QuadraticPotential()], Box(2, 2.0)).n_data())
        None
        """
        ns = [t.n for t in self.terms if isinstance(t, AlignmentTerm)]
        return ns[0] if ns else None

    def describe(self) -> dict:
        """Every parameter as plain types, flattened for dataset attributes.

        Returns
        -------
        dict
            The domain's parameters, the dtype, and ``term{i}`` (the class name) with
            ``term{i}_{key}`` for each of the term's :meth:`Term.describe` entries.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import DoubleWellPotential, Energy
        >>> Energy([DoubleWellPotential()], Box(1, 2.0)).describe()
        {'domain': 'box', 'dim': 1, 'half_width': 2.0, 'dtype': 'float64',
         'term0': 'DoubleWellPotential', 'term0_potential': 'double_well', 'term0_strength': 1.0}
        """
        out = dict(self.domain.describe())
        out["dtype"] = str(self.dtype).replace("torch.", "")
        for i, t in enumerate(self.terms):
            out[f"term{i}"] = type(t).__name__
            for k, v in t.describe().items():
                out[f"term{i}_{k}"] = v
        return out


def check_n_particles(N) -> int:
    """The number of particles N as an int, checked (an integer ≥ 1).

    Parameters
    ----------
    N : int
        Number of particles.

    Returns
    -------
    int
        ``N``; a ValueError or TypeError names the argument when it is not a positive integer.

    Examples
    --------
    >>> from meanfield.energy import check_n_particles
    >>> check_n_particles(64)
    64
    """
    return check_int("N (number of particles)", N)


__all__ = [
    "Energy",
    "Term",
    "AlignmentTerm",
    "Potential",
    "QuadraticPotential",
    "DoubleWellPotential",
    "CallablePotential",
    "LinearAlignment",
    "RiskAlignment",
    "NormalisedAlignment",
    "CentredAlignment",
    "PairInteraction",
    "target_factors",
    "target_matrix",
    "PAIR_CHUNK_ELEMENTS",
]
