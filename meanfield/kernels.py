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

A new kernel (a :class:`PairKernel` subclass, or a :class:`CallableKernel` around a function)
gives κ only: κ' defaults to the derivative by :func:`torch.func.grad`, and whether the kernel
is singular at coincident points is derived from κ' (:attr:`PairKernel.is_singular`), so a user
kernel cannot give silent NaN forces there.  A subclass without κ is refused when it is
instantiated.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable

import numpy as np
import torch

from ._validation import check_choice, check_finite_real, check_int, check_positive
from .errors import InputError, InputTypeError


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


#: Offsets above ε² at which :attr:`PairKernel.is_singular` reads κ' (float64): at u = ε² itself
#: (a coincident pair), and at two tiny distances apart, where a κ' that blows up as u → ε² but
#: is guarded at exactly ε² is enormous and grows by many orders of magnitude.
_SINGULAR_PROBES = (0.0, 1e-200, 1e-100)
#: Growth of |κ'| from u = ε² + 1e-100 to ε² + 1e-200 above which κ' counts as blowing up (a
#: smooth κ' changes by a factor ≈ 1 there, the weakest power blow-up u^(−a) that is not
#: already infinite by a factor 10^(100 a)).
_SINGULAR_GROWTH = 1e3


def _derivative(kappa: Callable, u: torch.Tensor) -> torch.Tensor:
    """κ'(u) of an elementwise κ by :func:`torch.func.grad` of Σ κ: the shape, dtype and
    device of ``u``; differentiable again (a function transform: an outer ``no_grad`` does not
    stop it, and an outer autograd graph through ``u`` is kept)."""
    return torch.func.grad(lambda x: torch.as_tensor(kappa(x), dtype=x.dtype).sum())(u)


def _derived_singularity(kernel: PairKernel) -> bool:
    """Whether 2κ'(r² + ε²) is not finite at r = 0 or blows up as r → 0: κ' in float64 at the
    :data:`_SINGULAR_PROBES` above ε²; a non-finite value (inf or NaN) there, or |κ'| growing
    more than :data:`_SINGULAR_GROWTH` times between the two tiny offsets, is singular."""
    eps2 = float(kernel.softening) ** 2
    u = torch.tensor([eps2 + d for d in _SINGULAR_PROBES], dtype=torch.float64)
    d = torch.as_tensor(kernel.dkappa(u), dtype=torch.float64)
    d = torch.broadcast_to(d, u.shape).abs()
    if not bool(torch.isfinite(d).all()):
        return True
    return bool(d[1] > _SINGULAR_GROWTH * d[2])


def _kappa_from_value_sq(self, u):
    """κ(u) = value_sq(u − ε²): the κ of a kernel that defines its value on r² directly."""
    return self.value_sq(u - self.softening**2)


def _kappa_of_array(kernel, u):
    """κ(u) for numpy (or a number): the kernel's own ``kappa`` when it takes numpy, else
    through float64 torch (a user's κ written with torch functions, e.g. ``torch.sqrt``)."""
    if isinstance(u, torch.Tensor):
        return kernel.kappa(u)
    try:
        return kernel.kappa(u)
    except TypeError:  # torch functions refuse numpy arrays
        return _on_torch(kernel.kappa, u)


def _on_torch(fn: Callable, u):
    """fn(u) for a function written in torch: a tensor ``u`` is passed as is, numpy (or a
    number) as a float64 tensor and the result returned as numpy; the result has the shape
    and (tensor) dtype of ``u`` (a constant result is broadcast)."""
    if isinstance(u, torch.Tensor):
        out = torch.as_tensor(fn(u), dtype=u.dtype, device=u.device)
        return out if out.shape == u.shape else torch.broadcast_to(out, u.shape)
    return _on_torch(fn, torch.as_tensor(np.asarray(u, dtype=float))).numpy()


class PairKernel(abc.ABC):
    r"""A radial pair kernel k(z) = κ(|z|² + ε²): the base of every kernel.

    Values and gradients in z follow from κ and κ':

    .. math::

        k(z) = \kappa(|z|^2 + \varepsilon^2), \qquad
        \nabla k(z) = 2\,\kappa'(|z|^2 + \varepsilon^2)\, z .

    **Writing a kernel.**  A subclass gives :meth:`kappa` (required: the class is abstract
    until it does, and instantiating it raises ``TypeError``).  It may give
    :meth:`dkappa` (κ', faster and exact); without it κ' is the derivative of κ by
    :func:`torch.func.grad`.  :attr:`is_singular` is derived from κ' (a subclass may declare
    it, as a class attribute or a property); ``softening`` (ε, default 0) and ``name`` (what
    :meth:`describe` records) are attributes.  κ receives torch tensors from the particle
    code and numpy arrays from :meth:`radial` (plots, the grid solver): write it with
    operators valid for both (``u ** 0.5``) or use :class:`CallableKernel`, which converts.
    A wrapper that defines the value on r² directly (overriding :meth:`value_sq` and
    :meth:`grad_coeff_sq`) gets κ(u) = value_sq(u − ε²) and needs no :meth:`kappa`.

    See Also
    --------
    Riesz : the Riesz and log kernels.
    CallableKernel : a kernel from a torch function.
    make_kernel : a kernel by name.
    meanfield.energy.PairInteraction : the energy term built on a kernel.
    meanfield.pde.convolution.cell_integrated_kernel : the kernel on a grid.

    Examples
    --------
    κ only (k(z) = |z|²/2, κ(u) = u/2): κ' = 1/2 comes from autograd.

    >>> import torch
    >>> from meanfield.kernels import PairKernel
    >>> class Half(PairKernel):
    ...     def kappa(self, u):
    ...         return 0.5 * u
    >>> z = torch.tensor([[3.0, 4.0]])
    >>> float(Half()(z)[0]), Half().gradient(z).tolist(), Half().is_singular
    (12.5, [[3.0, 4.0]], False)

    A subclass without κ is refused at once:

    >>> class Broken(PairKernel):
    ...     pass
    >>> Broken()
    Traceback (most recent call last):
    ...
    TypeError: Can't instantiate abstract class Broken ...
    """

    name = ""
    softening = 0.0

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # a wrapper that defines the value on r² (value_sq) has its κ from it; set before
        # abc counts the abstract methods of the new class, so it is not abstract
        if "value_sq" in cls.__dict__ and getattr(cls.kappa, "__isabstractmethod__", False):
            cls.kappa = _kappa_from_value_sq

    @abc.abstractmethod
    def kappa(self, u):
        """κ(u), elementwise, for u = |z|² + ε² (torch or numpy): the one method a subclass
        must define (abstract here).

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

    def dkappa(self, u):
        """κ'(u), elementwise (torch or numpy); by default the derivative of :meth:`kappa`
        by :func:`torch.func.grad` (numpy input computed in float64 torch and returned as
        numpy).

        Parameters
        ----------
        u : tensor or ndarray, any shape
            Squared distances with the softening added, u > 0 for a singular kernel.

        Returns
        -------
        tensor or ndarray
            dκ/du at ``u``, same shape and library (a tensor: the same dtype) as ``u``.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.kernels import Riesz
        >>> Riesz(s=1.0).dkappa(np.array([4.0]))  # −½ u^(−3/2)
        array([-0.0625])
        >>> from meanfield.kernels import CallableKernel
        >>> CallableKernel(lambda u: u**3, name="cubic").dkappa(np.array([2.0]))  # 3u², autograd
        array([12.])
        """
        if isinstance(u, torch.Tensor):
            return _derivative(self.kappa, u)
        u = np.asarray(u)
        u = u if np.issubdtype(u.dtype, np.floating) else u.astype(float)
        return _derivative(self.kappa, torch.from_numpy(u)).numpy()

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
        return None  # a concrete default (not abstract): no constraint unless a kernel has one

    @property
    def is_singular(self) -> bool:
        """Whether κ' is not finite, or blows up, at coincident points (u = ε²), so that they
        need the zero subgradient instead of 2κ'(ε²)·0 = NaN.

        Derived from κ' (not declared): κ' is read in float64 at u = ε² and at ε² + 1e-200 and
        ε² + 1e-100; the kernel is singular when a value is inf or NaN, or when |κ'| grows more
        than 1000 times between the last two (a κ' guarded at 0 that blows up next to it).
        Computed once per softening and remembered (the parameters of a kernel are fixed
        after construction).  A subclass may declare it instead (a class attribute or a
        property, as :class:`Riesz` does).

        Examples
        --------
        >>> from meanfield.kernels import CallableKernel, Gaussian, Riesz
        >>> Gaussian().is_singular, Riesz(s=0.0).is_singular, Riesz(1.0, 0.1).is_singular
        (False, True, False)
        >>> import torch
        >>> log = CallableKernel(lambda u: -0.5 * torch.log(u), name="log2")  # −log|z|
        >>> log.is_singular, CallableKernel(log.kappa, softening=0.1, name="log2").is_singular
        (True, False)
        """
        cached = self.__dict__.get("_derived_is_singular")
        if cached is not None and cached[0] == self.softening:
            return cached[1]
        singular = _derived_singularity(self)
        self.__dict__["_derived_is_singular"] = (self.softening, singular)
        return singular

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
        return _kappa_of_array(self, r2 + self.softening**2)

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
        # coincident points are r² = 0 (u = ε²: a kernel singular there may be softened)
        if isinstance(u, torch.Tensor):
            # the common case, no coincidences, skips the masked form; under torch.compile the
            # masked form is taken always (one fused kernel, no host synchronisation)
            if not self.is_singular or (not torch.compiler.is_compiling() and bool(r2.min() > 0)):
                return 2.0 * self.dkappa(u)
            apart = r2 > 0
            safe = torch.where(apart, u, torch.ones_like(u))
            return torch.where(apart, 2.0 * self.dkappa(safe), torch.zeros_like(u))
        u = np.asarray(u, dtype=float)
        apart = np.asarray(r2) > 0
        safe = np.where(apart, u, 1.0)
        return np.where(apart, 2.0 * self.dkappa(safe), 0.0)

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
            return np.asarray(_kappa_of_array(self, r * r + self.softening**2))

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

    def length_scale(self, dim: int) -> float | None:
        """The shortest length over which the kernel varies in dimension ``dim``, or None.

        The grid solver needs cells no wider than this length to resolve the kernel
        (:func:`meanfield.pde.convolution.check_kernel_resolution` refuses a coarser grid). None
        (the default) means the kernel imposes no such length on the grid: it is smooth on the
        domain's scale, or its singularity is integrable in ``dim`` and the cell integrals of
        the grid's convolution resolve it. A kernel with a length of its own (a width, a
        softening that makes it integrable, a range) declares it by overriding this method, or
        through ``resolution_length`` of :class:`CallableKernel`.

        Parameters
        ----------
        dim : int
            Dimension p of ω-space.

        Returns
        -------
        float or None
            The length (units of ω), or None.

        Examples
        --------
        >>> from meanfield.kernels import Gaussian, Riesz
        >>> Gaussian(width=0.3).length_scale(2), Riesz(s=0.5).length_scale(1)
        (0.3, None)
        >>> Riesz(s=1.0, softening=0.05).length_scale(1)  # integrable only through ε in 1D
        0.05
        """
        return None

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

    See Also
    --------
    Coulomb : the case s = dim − 2.
    meanfield.energy.PairInteraction : the pair energy λ∬k dμdμ.
    meanfield.pairsum.pair_sums : the tiled pair sums of the particles.
    meanfield.pde.convolution.FFTConvolution : k ∗ ρ on a grid.
    meanfield.closed_forms.equilibrium_case : exact equilibria of Riesz gases.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
      Mathematics, EMS, 2015.
    - S. V. Borodachov, D. P. Hardin, E. B. Saff, *Discrete Energy on Rectifiable Sets*, Springer
      Monographs in Mathematics, Springer, 2019 (Riesz energies).

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
        meanfield.errors.InputError: Riesz exponent s=3.0 is not integrable in dimension p=3: ...
        """
        if self.softening == 0.0 and self.s >= dim:
            raise InputError(
                f"Riesz exponent s={self.s} is not integrable in dimension p={dim}: the "
                f"mean-field range is s < p (s < {dim}); use a softening epsilon > 0 for s >= p"
            )

    @property
    def is_singular(self) -> bool:
        # κ'(u) blows up at u = 0 for every unsoftened s > −2 (s = −1: the kink of −|z|)
        return self.softening == 0.0 and self.s > -2

    def radial(self, r):
        """:meth:`PairKernel.radial` from the distance d = hypot(r, ε) itself: sgn(s) d^(−s) and
        −log d hold at every finite r, where κ(r² + ε²) overflowed beyond r ≈ 1e154.

        Examples
        --------
        >>> Riesz(s=0.0).radial([1e200]).round(3)  # −log r (−inf through r²)
        array([-460.517])
        """
        d = np.hypot(np.asarray(r, dtype=float), self.softening)
        with np.errstate(divide="ignore"):
            return -np.log(d) if self.s == 0.0 else np.sign(self.s) * d ** (-self.s)

    def length_scale(self, dim: int) -> float | None:
        # s >= p is integrable only through the softening, which the grid must then resolve
        return self.softening if self.s >= dim and self.softening > 0 else None

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

    See Also
    --------
    Riesz : the kernel it is.
    meanfield.fastsums.fast_pair_interaction : its pair energy by a fast sum.
    meanfield.pde.stationary.equilibrium_measure : μ* on a grid.
    meanfield.closed_forms.BallRadius : μ* under a quadratic confinement, the uniform ball.

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
      Mathematics, EMS, 2015.

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

    See Also
    --------
    Gaussian : a smooth bounded kernel.
    meanfield.energy.QuadraticPotential : the one-body quadratic potential.
    meanfield.energy.PairInteraction : the pair energy built on it.

    Examples
    --------
    >>> import torch
    >>> from meanfield.kernels import Quadratic
    >>> z = torch.tensor([[1.0, 2.0]])
    >>> float(Quadratic()(z)[0]), Quadratic().gradient(z).tolist()
    (2.5, [[1.0, 2.0]])
    """

    name = "quadratic"
    is_singular = False  # declared: κ' = 1/2 everywhere

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

    See Also
    --------
    Quadratic : the other smooth kernel.
    Riesz : the singular kernels.
    meanfield.energy.PairInteraction : the pair energy built on it.
    meanfield.pde.convolution.FFTConvolution : k ∗ ρ on a grid.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.kernels import Gaussian
    >>> k = Gaussian(width=2.0)
    >>> k.radial(np.array([0.0, 2.0])).round(6)  # 1 and exp(−1/2)
    array([1.      , 0.606531])
    """

    name = "gaussian"
    is_singular = False  # declared: κ' is bounded

    def __init__(self, width: float = 1.0):
        self.width = check_positive("width", width)

    def kappa(self, u):
        lib = torch if isinstance(u, torch.Tensor) else np
        return lib.exp(-u / (2 * self.width**2))

    def dkappa(self, u):
        return -self.kappa(u) / (2 * self.width**2)

    def length_scale(self, dim: int) -> float:
        return self.width

    def describe(self) -> dict:
        return {"kernel": "gaussian", "width": self.width, "softening": 0.0}

    def __repr__(self) -> str:
        return f"Gaussian(width={self.width})"


KERNEL_NAMES = ("riesz", "coulomb", "log", "quadratic", "gaussian", "cosine")


class Cosine(PairKernel):
    r"""k(z) = −cos(ν|z|): the Kuramoto / mean-field XY coupling, attractive for λ > 0.

    On the circle (p = 1, θ ∈ [−π, π), ν = 1) it is k(θ) = −cos θ, which is 2π-periodic:
    read on a :class:`~meanfield.domains.Torus` of half-width π (or any L with νL ∈ πℤ) by
    the minimum image, it is the periodic kernel itself, with no approximation.  In p ≥ 2
    the radial −cos(ν|z|) is not periodic: on a torus it is read to the minimum-image
    approximation.

    .. math::

        k(z) = -\cos(\nu |z|), \qquad \kappa(u) = -\cos(\nu\sqrt u), \qquad
        \kappa'(u) = \frac{\nu^2}{2}\, \frac{\sin(\nu\sqrt u)}{\nu\sqrt u}
        \;(= \nu^2/2 \text{ at } u = 0).

    Parameters
    ----------
    frequency : float, default 1
        ν > 0 (1 / units of ω).

    Raises
    ------
    meanfield.errors.InputError
        ``frequency`` ≤ 0 or not finite.

    See Also
    --------
    meanfield.energy.PeriodicPairInteraction : the pair energy on a torus.
    meanfield.domains.Torus : the periodic domain.

    References
    ----------
    - Y. Kuramoto, "Self-entrainment of a population of coupled non-linear oscillators",
      in *International Symposium on Mathematical Problems in Theoretical Physics*, Lecture
      Notes in Physics 39, Springer, 1975, 420–422.
    - L. Bertini, G. Giacomin, K. Pakdaman, "Dynamical aspects of mean field plane
      rotators and the Kuramoto model", J. Stat. Phys. 138 (2010) 270–290.

    Examples
    --------
    >>> import math
    >>> import torch
    >>> from meanfield.kernels import Cosine
    >>> k = Cosine()
    >>> theta = torch.tensor([[0.0], [math.pi / 2], [math.pi]], dtype=torch.float64)
    >>> k(theta).tolist()[0], round(float(k(theta)[1]), 12), k(theta).tolist()[2]
    (-1.0, -0.0, 1.0)
    >>> k.gradient(theta)[1].tolist()  # d/dθ (−cos θ) = sin θ
    [1.0]
    """

    name = "cosine"
    is_singular = False  # declared: κ' is bounded by ν²/2

    def __init__(self, frequency: float = 1.0):
        self.frequency = check_positive("frequency (nu)", frequency)

    def kappa(self, u):
        lib = torch if isinstance(u, torch.Tensor) else np
        return -lib.cos(self.frequency * u**0.5)

    def dkappa(self, u):
        nu = self.frequency
        if isinstance(u, torch.Tensor):  # sinc(x) = sin(πx)/(πx), regular at 0
            return 0.5 * nu * nu * torch.sinc(nu * u**0.5 / math.pi)
        return 0.5 * nu * nu * np.sinc(nu * np.asarray(u) ** 0.5 / math.pi)

    def length_scale(self, dim: int) -> float:
        """1/ν: the grid must resolve the oscillation (units of ω).

        Examples
        --------
        >>> from meanfield.kernels import Cosine
        >>> Cosine(frequency=2.0).length_scale(1)
        0.5
        """
        return 1.0 / self.frequency

    def describe(self) -> dict:
        return {"kernel": "cosine", "frequency": self.frequency, "softening": 0.0}

    def __repr__(self) -> str:
        return f"Cosine(frequency={self.frequency})"


class CallableKernel(PairKernel):
    r"""A user kernel k(z) = κ(|z|² + ε²) from a function κ written in torch; κ' by autograd
    unless given.

    .. math::

        k(z) = \kappa(|z|^2 + \varepsilon^2), \qquad
        \nabla k(z) = 2\,\kappa'(|z|^2 + \varepsilon^2)\, z ,

    κ' by :func:`torch.func.grad` of κ when ``dkappa`` is None.  Whether the kernel is singular
    at coincident points is derived from κ' (:attr:`PairKernel.is_singular`); those points get
    the zero subgradient, never NaN.  The functions receive torch tensors (numpy input, from
    :meth:`~PairKernel.radial` and the grid solver, is converted to float64 tensors and the
    result back); they must be elementwise.  Beside
    :class:`~meanfield.energy.CallablePotential` for the one-body term.

    Parameters
    ----------
    kappa : callable
        κ: a tensor u = |z|² + ε² of any shape (..., N) -> κ(u), the same shape.
    dkappa : callable, optional
        κ' (same contract); default: the derivative of ``kappa`` by autograd.
    name : str, default "custom"
        Name recorded by :meth:`describe` (not one of the built-in names of
        :func:`make_kernel`, which it would pass for).
    softening : float, default 0
        Softening length ε ≥ 0, added as u = |z|² + ε².
    resolution_length : float, optional
        The shortest length over which the kernel varies (:meth:`PairKernel.length_scale`):
        the grid solver refuses cells wider than it. Default None: no such length.

    Raises
    ------
    meanfield.errors.InputTypeError
        ``kappa`` or ``dkappa`` not callable, ``name`` not a string.
    meanfield.errors.InputError
        ``name`` empty or a built-in kernel name; ``softening`` negative or not finite;
        ``resolution_length`` not a finite length > 0.

    See Also
    --------
    PairKernel : the base class (subclass it for a kernel with parameters of its own).
    meanfield.energy.CallablePotential : a user one-body potential.

    Examples
    --------
    k(z) = |z|²/2 − |z| (attraction at long range, repulsion at short), κ(u) = u/2 − √u; its
    κ'(u) = 1/2 − 1/(2√u) blows up at 0, so coincident points get the zero subgradient:

    >>> import torch
    >>> from meanfield.kernels import CallableKernel
    >>> k = CallableKernel(lambda u: u / 2 - torch.sqrt(u), name="attractive-repulsive")
    >>> k.dkappa(torch.tensor([4.0], dtype=torch.float64)).tolist()  # 1/2 − 1/4
    [0.25]
    >>> k.is_singular, k.gradient(torch.zeros(1, 2)).tolist()
    (True, [[0.0, 0.0]])
    >>> k.describe()
    {'kernel': 'attractive-repulsive', 'softening': 0.0}
    """

    def __init__(
        self,
        kappa: Callable,
        dkappa: Callable | None = None,
        name: str = "custom",
        softening: float = 0.0,
        resolution_length: float | None = None,
    ):
        if not callable(kappa):
            raise InputTypeError(
                f"kappa must be a callable u -> κ(u) on torch tensors, got {type(kappa).__name__}"
            )
        if dkappa is not None and not callable(dkappa):
            raise InputTypeError(
                "dkappa must be None (autograd) or a callable u -> κ'(u) on torch tensors, got "
                f"{type(dkappa).__name__}"
            )
        if not isinstance(name, str):
            raise InputTypeError(f"name must be a string, got {type(name).__name__}")
        if not name or name in KERNEL_NAMES:
            raise InputError(
                f"name must be a non-empty string other than the built-in kernel names "
                f"{KERNEL_NAMES} (describe() would pass for one), got {name!r}"
            )
        self.kappa_fn, self.dkappa_fn, self.name = kappa, dkappa, name
        self.softening = check_positive("softening (epsilon)", softening, allow_zero=True)
        self.resolution_length = (
            None
            if resolution_length is None
            else check_positive("resolution_length", resolution_length)
        )

    def length_scale(self, dim: int) -> float | None:
        return self.resolution_length

    def kappa(self, u):
        return _on_torch(self.kappa_fn, u)

    def dkappa(self, u):
        if self.dkappa_fn is None:
            return super().dkappa(u)
        return _on_torch(self.dkappa_fn, u)

    def describe(self) -> dict:
        return {"kernel": self.name, "softening": self.softening}

    def __repr__(self) -> str:
        return f"CallableKernel(name={self.name!r}, softening={self.softening})"


def make_kernel(
    name: str,
    *,
    dim: int | None = None,
    s: float | None = None,
    softening: float = 0.0,
    width: float = 1.0,
    frequency: float = 1.0,
) -> PairKernel:
    """Build a kernel by name: riesz (needs s), coulomb (needs dim), log, quadratic, gaussian,
    cosine.

    Parameters
    ----------
    name : {"riesz", "coulomb", "log", "quadratic", "gaussian", "cosine"}
        Kernel family.
    dim : int, optional
        Dimension p (needed by "coulomb": s = p − 2).
    s : float, optional
        Riesz exponent (needed by "riesz").
    softening : float, default 0
        Softening length ε ≥ 0 (Riesz family).
    width : float, default 1
        Width of the Gaussian kernel.
    frequency : float, default 1
        Frequency ν of the cosine kernel −cos(ν|z|).

    Returns
    -------
    PairKernel
        The kernel.

    See Also
    --------
    PairKernel : the base class.
    meanfield.domains.make_domain : a domain by name.
    meanfield.dynamics.description.from_dict : a kernel from its description.

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
            raise InputError("kernel 'riesz' needs the exponent s (any real number)")
        return Riesz(s, softening)
    if name == "coulomb":
        if dim is None:
            raise InputError("kernel 'coulomb' needs the dimension dim >= 1")
        return Coulomb(dim, softening)
    if name == "log":
        return Riesz(0.0, softening)
    if name == "quadratic":
        return Quadratic()
    if name == "cosine":
        if softening != 0.0:
            raise InputError(f"kernel 'cosine' takes no softening, got softening={softening!r}")
        return Cosine(frequency)
    return Gaussian(width)
