"""Compact convex domains 𝒲 ⊂ R^p for the particles, with Euclidean projection Π_𝒲.

The projection is what keeps projected Langevin (THEORY §3) inside the domain; in the
N -> infinity limit it becomes the no-flux boundary condition of the grid solver (§4).
All methods accept torch tensors or numpy arrays of shape ``(..., p)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ._validation import check_choice, check_int, check_positive


@dataclass(frozen=True)
class Domain:
    """Base class: a compact convex set in R^dim."""

    dim: int

    def project(self, omega):
        """Euclidean projection onto the domain, shape ``(..., dim)`` -> ``(..., dim)``."""
        raise NotImplementedError

    def contains(self, omega, atol: float = 0.0):
        """Boolean membership of each point, shape ``(..., dim)`` -> ``(...)``."""
        raise NotImplementedError

    @property
    def volume(self) -> float:
        raise NotImplementedError

    @property
    def bounding_box(self) -> tuple[float, float]:
        """(low, high) such that the domain lies in [low, high]^dim."""
        raise NotImplementedError

    def describe(self) -> dict:
        """Parameters as plain types, for dataset attributes."""
        raise NotImplementedError

    def _check_points(self, omega):
        if omega.shape[-1] != self.dim:
            raise ValueError(
                f"points must have last dimension {self.dim} for this {type(self).__name__}, "
                f"got shape {tuple(omega.shape)}"
            )


@dataclass(frozen=True)
class Box(Domain):
    """The box [-half_width, half_width]^dim."""

    half_width: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "dim", check_int("dim", self.dim))
        object.__setattr__(self, "half_width", check_positive("half_width (R)", self.half_width))

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
        return {"domain": "box", "dim": self.dim, "radius": self.half_width}


@dataclass(frozen=True)
class Ball(Domain):
    """The closed Euclidean ball B(0, radius) in R^dim."""

    radius: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "dim", check_int("dim", self.dim))
        object.__setattr__(self, "radius", check_positive("radius (R)", self.radius))

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
    """Build a domain by name: ``"box"`` ([-R, R]^dim) or ``"ball"`` (B(0, R))."""
    check_choice("domain", kind, ("box", "ball"))
    return Box(dim, radius) if kind == "box" else Ball(dim, radius)
