r"""Pair interaction kernels k(z), z = ω − ω' ∈ R^p, with values and gradients.

Every kernel here is radial, so it is written as a function of the squared distance
u = |z|² + ε² (ε the softening length, 0 for an exact kernel):

.. math::

    k(z) = \kappa(u), \qquad \nabla k(z) = 2 \kappa'(u)\, z.

Riesz family (THEORY §2), with sign so that every member is repulsive:

.. math::

    k_s(z) = |z|^{-s} \ (s > 0), \qquad -\log|z| \ (s = 0), \qquad -|z|^{-s} \ (s < 0),

softened by replacing |z|² with |z|² + ε².  Coulomb in R^p is s = p − 2.  The mean-field
(integrable) range is s < p; a Riesz kernel with s ≥ p and ε = 0 is rejected when the energy
learns the dimension.

Coincident points (z = 0, possible after projection onto the boundary) get gradient 0, the
symmetric subgradient, instead of NaN; the value there is +inf for the singular kernels.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ._validation import check_choice, check_finite_real, check_int, check_positive


def _pow_(u: torch.Tensor, e: float) -> torch.Tensor:
    """u ** e in place.  Integer and half-integer e (every Riesz s with integer 2s, Coulomb
    included) use reciprocals, square roots and squarings, several times faster than pow."""
    if 2 * e != round(2 * e) or abs(e) > 64:
        return u.pow_(e)
    if e < 0:
        u.reciprocal_()
        e = -e
    half = u.sqrt() if e != int(e) else None
    k = int(e)
    if k == 0:
        result = torch.ones_like(u)
    else:
        result = None  # binary exponentiation on u, collecting the set bits into result
        while k:
            if k & 1:
                result = u.clone() if result is None else result.mul_(u)
            k >>= 1
            if k:
                u.square_()
    return result.mul_(half) if half is not None else result


class PairKernel:
    r"""A radial pair kernel k(z) = κ(|z|² + ε²).

    Subclasses give κ and κ'; values and gradients in z follow from

    .. math::

        k(z) = \kappa(|z|^2 + \varepsilon^2), \qquad
        \nabla k(z) = 2\,\kappa'(|z|^2 + \varepsilon^2)\, z .

    Examples
    --------
    >>> import torch
    >>> from meanfield.kernels import PairKernel
    >>> class Half(PairKernel):  # k(z) = |z|²/2
    ...     def kappa(self, u):
    ...         return 0.5 * u
    ...     def dkappa(self, u):
    ...         return 0.5 + 0.0 * u
    >>> z = torch.tensor([[3.0, 4.0]])
    >>> float(Half()(z)[0]), Half().gradient(z).tolist()
    (12.5, [[3.0, 4.0]])
    """

    name = ""
    softening = 0.0

    def kappa(self, u):
        """κ(u), elementwise, for u = |z|² + ε² (torch or numpy).

        Parameters
        ----------
        u : tensor or ndarray, any shape
            Squared distances with the softening added, u ≥ 0.

        Returns
        -------
        tensor or ndarray
            κ(u), same shape and library as ``u``.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.kernels import Riesz
        >>> Riesz(s=1.0).kappa(np.array([4.0]))  # u^(−1/2)
        array([0.5])
        """
        raise NotImplementedError

    def dkappa(self, u):
        """κ'(u), elementwise (torch or numpy).

        Parameters
        ----------
        u : tensor or ndarray, any shape
            Squared distances with the softening added, u > 0 for a singular kernel.

        Returns
        -------
        tensor or ndarray
            dκ/du at ``u``, same shape and library as ``u``.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.kernels import Riesz
        >>> Riesz(s=1.0).dkappa(np.array([4.0]))  # −½ u^(−3/2)
        array([-0.0625])
        """
        raise NotImplementedError

    def check_dimension(self, dim: int) -> None:
        """Raise if the kernel is not locally integrable in R^dim (nothing to check by default).

        Parameters
        ----------
        dim : int
            Dimension p of the particles.

        Raises
        ------
        ValueError
            The kernel is too singular at 0 for R^dim (see :meth:`Riesz.check_dimension`).

        Examples
        --------
        >>> from meanfield.kernels import Gaussian
        >>> Gaussian().check_dimension(5) is None  # bounded: integrable in every dimension
        True
        """

    @property
    def is_singular(self) -> bool:
        """Whether κ'(u) blows up at u = 0 (so coincident points need the zero subgradient).

        Examples
        --------
        >>> from meanfield.kernels import Gaussian, Riesz
        >>> Gaussian().is_singular, Riesz(s=0.0).is_singular, Riesz(1.0, 0.1).is_singular
        (False, True, False)
        """
        return False

    # --- values as functions of z or r, for users, plots and the grid solver -----------------
    def value_sq(self, r2):
        """k as a function of the squared distance r² (softening applied here).

        Parameters
        ----------
        r2 : tensor or ndarray, any shape
            Squared distances |z|² ≥ 0.

        Returns
        -------
        tensor or ndarray
            κ(r² + ε²), same shape as ``r2``.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.kernels import Riesz
        >>> Riesz(s=1.0, softening=3.0).value_sq(np.array([16.0]))  # 1/√(16 + 9)
        array([0.2])
        """
        return self.kappa(r2 + self.softening**2)

    def grad_coeff_sq(self, r2):
        """2 κ'(r² + ε²): ∇k(z) = grad_coeff_sq(|z|²) · z; 0 where z = 0 and κ' blows up.

        Parameters
        ----------
        r2 : tensor or array_like, any shape
            Squared distances |z|² ≥ 0.

        Returns
        -------
        tensor or ndarray
            The radial gradient coefficient, same shape as ``r2`` (a tensor for a tensor).

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.kernels import Riesz
        >>> Riesz(s=0.0).grad_coeff_sq(np.array([0.0, 4.0]))  # −1/r², zero subgradient at 0
        array([ 0.  , -0.25])
        """
        u = r2 + self.softening**2
        if isinstance(u, torch.Tensor):
            # the common case, no coincidences, skips the masked form; under torch.compile the
            # masked form is taken always (one fused kernel, no host synchronisation)
            if not self.is_singular or (not torch.compiler.is_compiling() and bool(u.min() > 0)):
                return 2.0 * self.dkappa(u)
            safe = torch.where(u > 0, u, torch.ones_like(u))
            return torch.where(u > 0, 2.0 * self.dkappa(safe), torch.zeros_like(u))
        u = np.asarray(u, dtype=float)
        safe = np.where(u > 0, u, 1.0)
        return np.where(u > 0, 2.0 * self.dkappa(safe), 0.0)

    def grad_coeff_sq_(self, r2: torch.Tensor) -> torch.Tensor:
        """:meth:`grad_coeff_sq` that may overwrite ``r2`` (the hot loop of the pair sums).

        Parameters
        ----------
        r2 : tensor, any shape
            Squared distances; its contents are undefined afterwards.

        Returns
        -------
        tensor
            The same values as :meth:`grad_coeff_sq`, possibly in the storage of ``r2``.

        Examples
        --------
        >>> import torch
        >>> from meanfield.kernels import Riesz
        >>> Riesz(s=1.0).grad_coeff_sq_(torch.tensor([4.0, 1.0])).tolist()  # −r^(−3)
        [-0.125, -1.0]
        """
        return self.grad_coeff_sq(r2)

    def __call__(self, z):
        """k(z) for z of shape (..., p) -> (...)."""
        return self.value_sq((z * z).sum(-1))

    def radial(self, r):
        """k as a function of the distance r >= 0 (numpy), for grids and plots.

        Parameters
        ----------
        r : array_like, any shape
            Distances r ≥ 0.

        Returns
        -------
        ndarray
            κ(r² + ε²), same shape as ``r`` (+inf at r = 0 for a singular kernel).

        Examples
        --------
        >>> from meanfield.kernels import Riesz
        >>> Riesz(s=2.0).radial([0.0, 0.5])  # 1/r²
        array([inf,  4.])
        """
        r = np.asarray(r, dtype=float)
        with np.errstate(divide="ignore"):
            return self.kappa(r * r + self.softening**2)

    def gradient(self, z):
        """∇k(z) for z of shape (..., p) -> (..., p).

        Parameters
        ----------
        z : tensor or ndarray of shape (..., p)
            Differences ω − ω'.

        Returns
        -------
        tensor or ndarray of shape (..., p)
            2 κ'(|z|² + ε²) z; 0 at z = 0 for a singular kernel.

        Examples
        --------
        >>> import torch
        >>> from meanfield.kernels import Gaussian
        >>> Gaussian(width=1.0).gradient(torch.tensor([[0.0, 0.0], [1.0, 0.0]])).tolist()
        [[-0.0, -0.0], [-0.6065306663513184, -0.0]]
        """
        return self.grad_coeff_sq((z * z).sum(-1))[..., None] * z

    def describe(self) -> dict:
        """Name and parameters of the kernel, as saved in dataset attributes.

        Returns
        -------
        dict
            ``{"kernel": name, ...parameters}``.

        Examples
        --------
        >>> from meanfield.kernels import Gaussian, Riesz
        >>> Riesz(s=0.5).describe()
        {'kernel': 'riesz', 's': 0.5, 'softening': 0.0}
        >>> Gaussian(width=2.0).describe()
        {'kernel': 'gaussian', 'width': 2.0, 'softening': 0.0}
        """
        return {"kernel": self.name, "softening": self.softening}


class Riesz(PairKernel):
    r"""Riesz kernel k_s (log at s = 0), optionally softened: κ(u) = sgn(s) u^(−s/2), −½ log u.

    .. math::

        k_s(z) = \begin{cases}
            \operatorname{sgn}(s)\,(|z|^2 + \varepsilon^2)^{-s/2}, & s \ne 0, \\
            -\tfrac12 \log(|z|^2 + \varepsilon^2), & s = 0,
        \end{cases}

    repulsive for every s; coincident points (z = 0, ε = 0) get the zero subgradient.

    Parameters
    ----------
    s : float
        Riesz exponent, any real number.  s = p − 2 is Coulomb.
    softening : float, default 0
        Softening length ε ≥ 0; with ε > 0 the kernel is smooth and every s is allowed.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from meanfield.kernels import Riesz
    >>> k = Riesz(s=1.0)
    >>> k.radial(np.array([0.5, 2.0]))  # 1/r
    array([2. , 0.5])
    >>> k.gradient(torch.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()  # −z/|z|³; 0 at z = 0
    [[-0.25, -0.0], [0.0, 0.0]]
    >>> round(float(Riesz(s=0.0).radial(np.e)), 12)  # −log r
    -1.0
    """

    name = "riesz"

    def __init__(self, s: float, softening: float = 0.0):
        self.s = check_finite_real("s", s)
        self.softening = check_positive("softening (epsilon)", softening, allow_zero=True)

    def _lib(self, u):
        return torch if isinstance(u, torch.Tensor) else np

    def kappa(self, u):
        lib = self._lib(u)
        if self.s == 0.0:
            return -0.5 * lib.log(u)
        return math.copysign(1.0, self.s) * u ** (-self.s / 2)

    def dkappa(self, u):
        if self.s == 0.0:
            return -0.5 / u
        return -0.5 * abs(self.s) * u ** (-self.s / 2 - 1)

    def grad_coeff_sq_(self, r2):
        # 2κ'(u) = −|s| u^(−s/2−1) (s ≠ 0), −1/u (s = 0), computed in place: two passes
        if self.is_singular and (torch.compiler.is_compiling() or not bool(r2.min() > 0)):
            return self.grad_coeff_sq(r2)
        u = r2.add_(self.softening**2) if self.softening else r2
        if self.s == 0.0:
            return u.reciprocal_().neg_()
        return _pow_(u, -self.s / 2 - 1).mul_(-abs(self.s))

    def check_dimension(self, dim: int) -> None:
        """Raise unless s < dim or the kernel is softened (the mean-field range of Riesz).

        Parameters
        ----------
        dim : int
            Dimension p of the particles.

        Raises
        ------
        ValueError
            ε = 0 and s ≥ p: |z|^(−s) is not locally integrable in R^p.

        Examples
        --------
        >>> from meanfield.kernels import Riesz
        >>> Riesz(s=1.0).check_dimension(3)  # Coulomb in R^3: fine
        >>> Riesz(s=3.0, softening=0.1).check_dimension(3)  # softened: fine
        >>> Riesz(s=3.0).check_dimension(3)
        Traceback (most recent call last):
        ...
        ValueError: Riesz exponent s=3.0 is not integrable in dimension p=3: ...
        """
        if self.softening == 0.0 and self.s >= dim:
            raise ValueError(
                f"Riesz exponent s={self.s} is not integrable in dimension p={dim}: the "
                f"mean-field range is s < p (s < {dim}); use a softening epsilon > 0 for s >= p"
            )

    @property
    def is_singular(self) -> bool:
        # κ'(u) blows up at u = 0 for every unsoftened s > −2 (s = −1: the kink of −|z|)
        return self.softening == 0.0 and self.s > -2

    def describe(self) -> dict:
        return {"kernel": "riesz", "s": self.s, "softening": self.softening}

    def __repr__(self) -> str:
        return f"Riesz(s={self.s}, softening={self.softening})"


class Coulomb(Riesz):
    r"""The Coulomb kernel of R^dim: Riesz with s = dim − 2 (−|z| in 1D, −log|z| in 2D).

    .. math::

        k(z) = -|z| \ (p = 1), \qquad -\log|z| \ (p = 2), \qquad |z|^{2-p} \ (p \ge 3).

    A :class:`Riesz` kernel in every respect (the same values, forces, fast paths and
    ``describe()``, so saved attributes read ``kernel = "riesz"``, ``s = p − 2``); the class
    only records the dimension it was built for.

    Parameters
    ----------
    dim : int
        Dimension p ≥ 1 of the space.
    softening : float, default 0
        Softening length ε ≥ 0.

    Examples
    --------
    >>> from meanfield.kernels import Coulomb, Riesz
    >>> k = Coulomb(3)
    >>> k, k.s, isinstance(k, Riesz)
    (Coulomb(dim=3, softening=0.0), 1.0, True)
    >>> float(Coulomb(1).radial(2.0))  # −|z| in 1D
    -2.0
    """

    def __init__(self, dim: int, softening: float = 0.0):
        self.dim = check_int("dim", dim)
        super().__init__(s=float(self.dim) - 2.0, softening=softening)

    def __repr__(self) -> str:
        return f"Coulomb(dim={self.dim}, softening={self.softening})"


class Quadratic(PairKernel):
    r"""k(z) = |z|²/2 (attractive for λ > 0; used for closed-form Gaussian tests).

    .. math::

        k(z) = \tfrac12 |z|^2, \qquad \nabla k(z) = z .

    Examples
    --------
    >>> import torch
    >>> from meanfield.kernels import Quadratic
    >>> z = torch.tensor([[1.0, 2.0]])
    >>> float(Quadratic()(z)[0]), Quadratic().gradient(z).tolist()
    (2.5, [[1.0, 2.0]])
    """

    name = "quadratic"

    def kappa(self, u):
        return 0.5 * u

    def dkappa(self, u):
        return 0.5 + 0.0 * u

    def __repr__(self) -> str:
        return "Quadratic()"


class Gaussian(PairKernel):
    r"""k(z) = exp(−|z|²/(2 width²)): a smooth, bounded repulsion (for λ > 0).

    .. math::

        k(z) = \exp\!\Big(-\frac{|z|^2}{2 w^2}\Big), \qquad
        \nabla k(z) = -\frac{z}{w^2}\, k(z).

    Parameters
    ----------
    width : float, default 1
        Width w > 0 (units of ω).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.kernels import Gaussian
    >>> k = Gaussian(width=2.0)
    >>> k.radial(np.array([0.0, 2.0])).round(6)  # 1 and exp(−1/2)
    array([1.      , 0.606531])
    """

    name = "gaussian"

    def __init__(self, width: float = 1.0):
        self.width = check_positive("width", width)

    def kappa(self, u):
        lib = torch if isinstance(u, torch.Tensor) else np
        return lib.exp(-u / (2 * self.width**2))

    def dkappa(self, u):
        return -self.kappa(u) / (2 * self.width**2)

    def describe(self) -> dict:
        return {"kernel": "gaussian", "width": self.width, "softening": 0.0}

    def __repr__(self) -> str:
        return f"Gaussian(width={self.width})"


KERNEL_NAMES = ("riesz", "coulomb", "log", "quadratic", "gaussian")


def make_kernel(
    name: str,
    *,
    dim: int | None = None,
    s: float | None = None,
    softening: float = 0.0,
    width: float = 1.0,
) -> PairKernel:
    """Build a kernel by name: riesz (needs s), coulomb (needs dim), log, quadratic, gaussian.

    Parameters
    ----------
    name : {"riesz", "coulomb", "log", "quadratic", "gaussian"}
        Kernel family.
    dim : int, optional
        Dimension p (needed by "coulomb": s = p − 2).
    s : float, optional
        Riesz exponent (needed by "riesz").
    softening : float, default 0
        Softening length ε ≥ 0 (Riesz family).
    width : float, default 1
        Width of the Gaussian kernel.

    Returns
    -------
    PairKernel
        The kernel.

    Examples
    --------
    >>> from meanfield.kernels import make_kernel
    >>> make_kernel("coulomb", dim=2)
    Coulomb(dim=2, softening=0.0)
    >>> make_kernel("riesz", s=0.5, softening=0.1)
    Riesz(s=0.5, softening=0.1)
    >>> make_kernel("gaussian", width=0.3)
    Gaussian(width=0.3)
    """
    check_choice("kernel", name, KERNEL_NAMES)
    if name == "riesz":
        if s is None:
            raise ValueError("kernel 'riesz' needs the exponent s (any real number)")
        return Riesz(s, softening)
    if name == "coulomb":
        if dim is None:
            raise ValueError("kernel 'coulomb' needs the dimension dim >= 1")
        return Coulomb(dim, softening)
    if name == "log":
        return Riesz(0.0, softening)
    if name == "quadratic":
        return Quadratic()
    return Gaussian(width)
