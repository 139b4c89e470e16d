r"""Compact convex domains 𝒲 ⊂ R^p for the particles, with Euclidean projection Π_𝒲.

The projection is what keeps projected Langevin (THEORY §3) inside the domain; in the
N -> infinity limit it becomes the no-flux boundary condition of the grid solver (§4).
All methods accept torch tensors or numpy arrays of shape ``(..., p)`` and return the same
kind of array.

.. math::

    \Pi_{\mathcal W}(\omega) = \arg\min_{v \in \mathcal W} |v - \omega|.

Examples
--------
>>> import numpy as np
>>> from meanfield.domains import Ball, Box
>>> Box(2, 1.0).project(np.array([3.0, -0.5]))
array([ 1. , -0.5])
>>> Ball(2, 1.0).project(np.array([3.0, 4.0]))
array([0.6, 0.8])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ._validation import check_choice, check_int, check_positive


@dataclass(frozen=True)
class Domain:
    """Base class: a compact convex set 𝒲 ⊂ R^dim.

    Subclasses implement the Euclidean projection, membership, volume and a bounding box;
    they are frozen dataclasses, so a domain can key a cache and be compared by value.

    Parameters
    ----------
    dim : int
        Dimension p of the particles, ≥ 1.

    See Also
    --------
    Box, Ball, make_domain

    Examples
    --------
    >>> from meanfield.domains import Box, Domain
    >>> isinstance(Box(3), Domain)
    True
    """

    dim: int

    def project(self, omega):
        """Euclidean projection onto the domain.

        Parameters
        ----------
        omega : torch.Tensor or numpy.ndarray, shape (..., dim)
            Points; the last axis is the coordinate.

        Returns
        -------
        torch.Tensor or numpy.ndarray, shape (..., dim)
            The nearest point of the domain to each point (the point itself inside); the
            same array type and dtype as ``omega``.

        Raises
        ------
        ValueError
            The last dimension of ``omega`` is not ``dim``.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.domains import Ball
        >>> Ball(2, 2.0).project(np.array([[0.0, 4.0], [1.0, 0.0]]))
        array([[0., 2.],
               [1., 0.]])
        """
        raise NotImplementedError

    def contains(self, omega, atol: float = 0.0):
        """Boolean membership of each point.

        Parameters
        ----------
        omega : torch.Tensor or numpy.ndarray, shape (..., dim)
            Points.
        atol : float, default 0
            Tolerance: the domain is enlarged by ``atol`` (in units of ω).

        Returns
        -------
        torch.Tensor or numpy.ndarray of bool, shape (...)
            True where the point lies in the (enlarged) domain.

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Box
        >>> Box(1, 1.0).contains(torch.tensor([[0.5], [1.05]]), atol=0.1)
        tensor([True, True])
        """
        raise NotImplementedError

    @property
    def volume(self) -> float:
        """Lebesgue measure of the domain in R^dim (units of ω^dim).

        Examples
        --------
        >>> import math
        >>> from meanfield.domains import Ball
        >>> math.isclose(Ball(2, 1.0).volume, math.pi)
        True
        """
        raise NotImplementedError

    @property
    def bounding_box(self) -> tuple[float, float]:
        """``(low, high)`` such that the domain lies in [low, high]^dim (units of ω).

        Examples
        --------
        >>> from meanfield.domains import Ball
        >>> Ball(3, 2.0).bounding_box
        (-2.0, 2.0)
        """
        raise NotImplementedError

    def describe(self) -> dict:
        """Parameters as plain types, for dataset attributes.

        Returns
        -------
        dict
            ``{"domain": "box", "dim": int, "half_width": float}`` or
            ``{"domain": "ball", "dim": int, "radius": float}``: each domain's size under its
            own name.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> Box(2, 3.0).describe()
        {'domain': 'box', 'dim': 2, 'half_width': 3.0}
        """
        raise NotImplementedError

    def _check_fields(self, size: str, label: str) -> None:
        """Validate ``dim`` and the size field named ``size`` in place (``label`` in errors).

        The dataclasses are frozen, so the checked values are written with
        ``object.__setattr__``.
        """
        object.__setattr__(self, "dim", check_int("dim", self.dim))
        object.__setattr__(self, size, check_positive(label, getattr(self, size)))

    def _check_points(self, omega):
        """Raise unless the last axis of ``omega`` has length ``dim``."""
        if omega.shape[-1] != self.dim:
            raise ValueError(
                f"points must have last dimension {self.dim} for this {type(self).__name__}, "
                f"got shape {tuple(omega.shape)}"
            )


@dataclass(frozen=True)
class Box(Domain):
    r"""The box [−R, R]^dim with R = ``half_width``; the projection clips each coordinate.

    .. math::

        \Pi(\omega)_k = \min(R, \max(-R, \omega_k)), \qquad
        |\mathcal W| = (2R)^{\dim}.

    Parameters
    ----------
    dim : int
        Dimension p, ≥ 1.
    half_width : float, default 1
        R > 0 (units of ω).

    Raises
    ------
    meanfield.errors.InputError
        ``dim`` < 1 or ``half_width`` ≤ 0 (or not finite).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Box
    >>> box = Box(2, half_width=2.0)
    >>> box.project(np.array([[3.0, 0.0], [-5.0, 1.0]]))
    array([[ 2.,  0.],
           [-2.,  1.]])
    >>> bool(box.contains(np.array([1.0, 2.5]))), box.volume
    (False, 16.0)
    """

    half_width: float = 1.0

    def __post_init__(self):
        self._check_fields("half_width", "half_width (R)")

    def project(self, omega):
        self._check_points(omega)
        R = self.half_width
        if isinstance(omega, torch.Tensor):
            return omega.clamp(-R, R)
        return np.clip(omega, -R, R)

    def contains(self, omega, atol: float = 0.0):
        self._check_points(omega)
        lim = self.half_width + atol
        if isinstance(omega, torch.Tensor):
            return (omega.abs() <= lim).all(dim=-1)
        return np.all(np.abs(omega) <= lim, axis=-1)

    @property
    def volume(self) -> float:
        return (2.0 * self.half_width) ** self.dim

    @property
    def bounding_box(self) -> tuple[float, float]:
        return (-self.half_width, self.half_width)

    def describe(self) -> dict:
        return {"domain": "box", "dim": self.dim, "half_width": self.half_width}


@dataclass(frozen=True)
class Ball(Domain):
    r"""The closed Euclidean ball B(0, R) in R^dim; the projection rescales radially.

    .. math::

        \Pi(\omega) = \omega \min\Big(1, \frac{R}{|\omega|}\Big), \qquad
        |\mathcal W| = \frac{\pi^{\dim/2}}{\Gamma(\dim/2 + 1)} R^{\dim}.

    Parameters
    ----------
    dim : int
        Dimension p, ≥ 1.
    radius : float, default 1
        R > 0 (units of ω).

    Raises
    ------
    meanfield.errors.InputError
        ``dim`` < 1 or ``radius`` ≤ 0 (or not finite).

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Ball
    >>> ball = Ball(3, radius=1.0)
    >>> ball.project(torch.tensor([0.0, 3.0, 4.0], dtype=torch.float64))
    tensor([0.0000, 0.6000, 0.8000], dtype=torch.float64)
    >>> round(ball.volume, 6)  # 4π/3
    4.18879
    """

    radius: float = 1.0

    def __post_init__(self):
        self._check_fields("radius", "radius (R)")

    def project(self, omega):
        self._check_points(omega)
        R = self.radius
        if isinstance(omega, torch.Tensor):
            norm = omega.norm(dim=-1, keepdim=True)
            return omega * torch.clamp(R / norm.clamp_min(torch.finfo(omega.dtype).tiny), max=1.0)
        norm = np.linalg.norm(omega, axis=-1, keepdims=True)
        return omega * np.minimum(1.0, R / np.maximum(norm, np.finfo(float).tiny))

    def contains(self, omega, atol: float = 0.0):
        self._check_points(omega)
        if isinstance(omega, torch.Tensor):
            return omega.norm(dim=-1) <= self.radius + atol
        return np.linalg.norm(omega, axis=-1) <= self.radius + atol

    @property
    def volume(self) -> float:
        p = self.dim
        return math.pi ** (p / 2) / math.gamma(p / 2 + 1) * self.radius**p

    @property
    def bounding_box(self) -> tuple[float, float]:
        return (-self.radius, self.radius)

    def describe(self) -> dict:
        return {"domain": "ball", "dim": self.dim, "radius": self.radius}


def make_domain(kind: str, dim: int, radius: float) -> Domain:
    """Build a domain by name: ``"box"`` ([−R, R]^dim) or ``"ball"`` (B(0, R)).

    Parameters
    ----------
    kind : {"box", "ball"}
        Shape of the domain.
    dim : int
        Dimension p, ≥ 1.
    radius : float
        R > 0: the box's half-width or the ball's radius.

    Returns
    -------
    Domain
        A :class:`Box` or a :class:`Ball`.

    Raises
    ------
    meanfield.errors.InputError
        ``kind`` is not one of the two names, or ``dim``/``radius`` out of range.

    Examples
    --------
    >>> from meanfield.domains import make_domain
    >>> make_domain("ball", 2, 1.5)
    Ball(dim=2, radius=1.5)
    """
    check_choice("domain", kind, ("box", "ball"))
    return Box(dim, radius) if kind == "box" else Ball(dim, radius)
