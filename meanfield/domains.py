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
import sys
from dataclasses import dataclass

import numpy as np
import torch

from ._validation import check_choice, check_int, check_positive
from .errors import InputError, InputTypeError, StepBudgetError


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
        """Raise unless ``omega`` is an array or tensor whose last axis has length ``dim``."""
        shape = getattr(omega, "shape", None)
        if shape is None:
            raise InputTypeError(
                f"omega (points) must be a numpy array or a torch tensor of shape (..., "
                f"{self.dim}), got {type(omega).__name__}"
            )
        if len(shape) == 0 or shape[-1] != self.dim:
            raise InputError(
                f"omega (points) must have last dimension {self.dim} for this "
                f"{type(self).__name__}, got shape {tuple(shape)}"
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

    See Also
    --------
    Ball : the ball B(0, R).
    Torus : the same cell with opposite faces identified.
    meanfield.pde.grid.Grid : a grid on a box.
    billiard : HMC's flight reflected at the walls.

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

    See Also
    --------
    Box : the box [−R, R]^dim.
    make_domain : a domain by name.
    billiard : HMC's flight reflected at the sphere.
    meanfield.closed_forms.BallRadius : the uniform ball, μ* of the Coulomb gas.

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


@dataclass(frozen=True)
class Torus(Domain):
    r"""The flat torus [−L, L)^dim with opposite faces identified, L = ``half_width``.

    A periodic domain: a particle leaving through one face comes back through the opposite
    one.  :meth:`project` is therefore the wrap (the point's class modulo the period 2L),
    not a Euclidean projection, and the torus has no boundary.  A pair difference is read by
    the minimum-image convention (:meth:`minimum_image`), each coordinate brought into
    [−L, L).

    .. math::

        \operatorname{wrap}(\omega)_k = \omega_k - 2L \Big\lfloor
        \frac{\omega_k + L}{2L} \Big\rfloor \in [-L, L), \qquad
        |\mathcal T| = (2L)^{\dim}.

    Parameters
    ----------
    dim : int
        Dimension p, ≥ 1 (p = 1: the circle of circumference 2L).
    half_width : float, default π
        L > 0 (units of ω); the default makes the circle θ ∈ [−π, π).

    Raises
    ------
    meanfield.errors.InputError
        ``dim`` < 1 or ``half_width`` ≤ 0 (or not finite).

    See Also
    --------
    Box : the same cell with walls (projection, no-flux boundary).
    meanfield.energy.PeriodicPairInteraction : pair sums by minimum image.
    meanfield.ot.circle : Wasserstein distances on the circle.

    Notes
    -----
    A pair kernel k on the torus is read as k(minimum_image(ω − ω')): the periodised kernel
    Σ_n k(z + 2Ln) only to the minimum-image approximation.  It is exact when the kernel
    vanishes at distances ≥ L in each coordinate (a range below L), and for a kernel that is
    already 2L-periodic in each coordinate (the Kuramoto kernel −cos θ on the circle,
    :class:`~meanfield.kernels.Cosine`).

    References
    ----------
    M. P. Allen, D. J. Tildesley, *Computer Simulation of Liquids*, 2nd ed., Oxford
    University Press, 2017, §1.6 (periodic boundary conditions, the minimum-image
    convention).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.domains import Torus
    >>> T = Torus(1, half_width=1.0)
    >>> T.project(np.array([[1.25], [-1.0], [1.0], [3.5]]))  # 1.25 comes back at -0.75
    array([[-0.75],
           [-1.  ],
           [-1.  ],
           [-0.5 ]])
    >>> T.minimum_image(np.array([1.75]))  # 1.75 apart is 0.25 the other way round
    array([-0.25])
    >>> T.volume, T.describe()
    (2.0, {'domain': 'torus', 'dim': 1, 'half_width': 1.0})
    """

    half_width: float = math.pi

    def __post_init__(self):
        self._check_fields("half_width", "half_width (L)")
        if not math.isfinite(2.0 * self.half_width):  # the period 2L must be a float64
            raise InputError(
                f"half_width (L) must be a finite number in (0, {sys.float_info.max / 2:.4g}] "
                f"(the period 2L must be finite), got {self.half_width!r}"
            )

    @property
    def period(self) -> float:
        """The period 2L of each coordinate (units of ω).

        Examples
        --------
        >>> import math
        >>> from meanfield.domains import Torus
        >>> math.isclose(Torus(1).period, 2 * math.pi)
        True
        """
        return 2.0 * self.half_width

    def project(self, omega):
        """Wrap each coordinate into [−L, L) (the torus has no boundary to project onto).

        The same signature as :meth:`Domain.project`; ω − 2L ⌊(ω + L)/2L⌋, with a point that
        rounding puts at L itself sent to −L.  The remainder modulo 2L is taken first
        (``fmod``, exact in floating point), so that a coordinate many periods away comes
        back to its exact class, not to one shifted by the rounding of 2L·k for a large k; a
        point already in [−L, L) is returned unchanged, bit for bit.

        Raises
        ------
        meanfield.errors.InputError
            ``omega`` of another last dimension than ``dim``, or (a numpy array) holding a
            NaN or inf, which has no class modulo 2L.  A torch tensor is not checked (the
            integrators call this in their loop): its non-finite coordinates come back NaN,
            which the integrators refuse by name.

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Torus
        >>> Torus(1, 1.0).project(torch.tensor([[2.5], [1.0]])).tolist()
        [[0.5], [-1.0]]
        """
        self._check_points(omega)
        L, P = self.half_width, self.period
        if isinstance(omega, torch.Tensor):
            r = torch.fmod(omega, P)  # exact, in (−2L, 2L); r = ω inside the cell
            out = r - P * torch.floor((r + L) / P)
            out = torch.where(out >= L, out - P, out)
            return torch.where(out < -L, out + P, out)
        omega = np.asarray(omega)
        if omega.dtype.kind in "fc" and not np.all(np.isfinite(omega)):
            raise InputError(
                "omega (points) must be finite to be wrapped onto the torus, got "
                f"{int(np.sum(~np.isfinite(omega)))} NaN or inf coordinate(s)"
            )
        r = np.fmod(omega, P)
        out = r - P * np.floor((r + L) / P)
        out = np.where(out >= L, out - P, out)
        return np.where(out < -L, out + P, out)

    def minimum_image(self, z):
        """The difference ``z`` (..., dim) brought coordinatewise into [−L, L): the shortest
        representative of ω − ω' on the torus (a torch tensor or a numpy array, kept).

        Examples
        --------
        >>> import torch
        >>> from meanfield.domains import Torus
        >>> Torus(2, 1.0).minimum_image(torch.tensor([[1.5, -0.5]])).tolist()
        [[-0.5, -0.5]]
        """
        return self.project(z)

    def contains(self, omega, atol: float = 0.0):
        self._check_points(omega)
        L = self.half_width
        if isinstance(omega, torch.Tensor):
            return ((omega >= -L - atol) & (omega < L + atol)).all(dim=-1)
        return np.all((omega >= -L - atol) & (omega < L + atol), axis=-1)

    @property
    def volume(self) -> float:
        return (2.0 * self.half_width) ** self.dim

    @property
    def bounding_box(self) -> tuple[float, float]:
        return (-self.half_width, self.half_width)

    def describe(self) -> dict:
        return {"domain": "torus", "dim": self.dim, "half_width": self.half_width}


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

    See Also
    --------
    Box : the box.
    Ball : the ball.
    meanfield.kernels.make_kernel : a kernel by name.

    Examples
    --------
    >>> from meanfield.domains import make_domain
    >>> make_domain("ball", 2, 1.5)
    Ball(dim=2, radius=1.5)
    """
    check_choice("domain", kind, ("box", "ball"))
    return Box(dim, radius) if kind == "box" else Ball(dim, radius)


# ----------------------------------------------------------------------------------------
# free flight with specular reflection at the boundary (the drift of HMC's leapfrog steps)
# ----------------------------------------------------------------------------------------
def billiard(domain: Domain, omega: torch.Tensor, v: torch.Tensor, dt, *, max_bounces=100_000):
    r"""Free flight Ω + t v, t ∈ [0, dt], reflected specularly at ∂𝒲 (each particle alone);
    on a :class:`Torus` (no boundary) the flight wraps around instead.

    In a box each coordinate folds back at ±R (position mirrored, that velocity component
    negated); in a ball the velocity is mirrored about the normal n at the hitting point:

    .. math::

        v \leftarrow v - 2 (v \cdot n)\, n

    Parameters
    ----------
    domain : Box, Ball or Torus
    omega, v : tensor (..., N, p)
        Positions (inside 𝒲) and velocities.
    dt : float or tensor broadcastable to (..., N, 1)
        Flight time ≥ 0 (per replica with jitter).
    max_bounces : int
        Safety bound on reflections of one particle within one flight (ball only).

    Returns
    -------
    (omega, v) : the positions and velocities after the flight, shape (..., N, p).

    See Also
    --------
    meanfield.dynamics.hmc.HMC : the sampler whose flight it is.
    Box : folded coordinates.
    Ball : mirrored at the normal.
    Torus : wrapped around.

    References
    ----------
    - R. M. Neal, "MCMC using Hamiltonian dynamics", in *Handbook of Markov Chain Monte Carlo*, S.
      Brooks et al. (eds.), CRC Press, 2011, ch. 5 (HMC with reflection at the walls).

    Examples
    --------
    From 0.5 at speed 1 for time 1 in [−1, 1]: the wall at 1 is hit at t = 0.5 and the particle
    flies back to 0.5; the same in the unit disc from the centre for time 1.5.

    >>> import torch
    >>> from meanfield.domains import Ball, Box
    >>> from meanfield.domains import billiard
    >>> omega, v = billiard(Box(1, 1.0), torch.tensor([[0.5]]), torch.tensor([[1.0]]), 1.0)
    >>> omega.tolist(), v.tolist()
    ([[0.5]], [[-1.0]])
    >>> omega, v = billiard(Ball(2, 1.0), torch.zeros(1, 2), torch.tensor([[1.0, 0.0]]), 1.5)
    >>> omega.tolist(), v.tolist()
    ([[0.5, 0.0]], [[-1.0, 0.0]])
    """
    if isinstance(domain, Box):
        return _fold_box(omega, v, dt, domain.half_width)
    if isinstance(domain, Ball):
        return _reflect_ball(omega, v, dt, domain.radius, max_bounces)
    if isinstance(domain, Torus):
        # no wall: the free flight wraps around (the leapfrog map stays volume-preserving
        # and reversible, wrap being an isometry of the torus), the velocity is unchanged
        return domain.project(omega + dt * v), v
    raise InputTypeError(
        f"HMC moves particles only in a Box, a Ball or a Torus, got {type(domain).__name__}"
    )


def _fold_box(omega, v, dt, R):
    # Unfold the reflected motion on [−R, R] onto the line: s = x + R + t v moves freely and the
    # reflected position is s folded with period 4R; an odd number of walls crossed (n odd)
    # mirrors the position and reverses that velocity component.
    s = omega + R + dt * v
    n = torch.floor(s / (2 * R))
    y = s - 2 * R * n
    # n mod 2 by floor, exact for these integers (torch.remainder computes an fmod, several
    # times slower, and the compiled trajectory repeats the fold in every pair's read)
    odd = n - 2 * torch.floor(n / 2) == 1
    return torch.where(odd, 2 * R - y, y) - R, torch.where(odd, -v, v)


def _reflect_ball(omega, v, dt, R, max_bounces):
    q, v = omega, v
    dt = torch.as_tensor(dt, dtype=q.dtype, device=q.device)
    tau = torch.broadcast_to(dt, (*q.shape[:-1], 1))[..., 0].clone()  # flight time left
    if torch.compiler.is_compiling():
        return _reflect_ball_traced(q, v, tau, R, max_bounces)
    for _ in range(max_bounces):
        if not bool((tau > 0).any()):
            return q, v
        q, v, tau = _bounce(q, v, tau, R)
    raise StepBudgetError(
        f"a particle hit the ball's wall more than {max_bounces} times in one leapfrog step: "
        "lower step_size"
    )


def _bounce(q, v, tau, R):
    """Each particle's flight to its next wall hit, or to the end of its flight time ``tau``
    (...): (q, v, tau) after it, the velocity mirrored at a hit."""
    qv, vv, qq = (q * v).sum(-1), (v * v).sum(-1), (q * q).sum(-1)
    gap = (R * R - qq).clamp_min(0)  # rounding may put a point a hair outside
    disc = torch.sqrt(qv * qv + vv * gap)
    # positive root of |q + t v| = R in the form free of cancellation for each sign of q·v
    t_hit = torch.where(qv > 0, gap / (qv + disc), (disc - qv) / vv)
    t_hit = torch.where(vv > 0, t_hit, torch.full_like(t_hit, math.inf))
    hit = (tau > 0) & (t_hit < tau)
    t = torch.where(hit, t_hit, tau.clamp_min(0))
    q = q + t[..., None] * v
    n = q / q.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(q.dtype).tiny)
    v = torch.where(hit[..., None], v - 2 * (v * n).sum(-1, keepdim=True) * n, v)
    tau = torch.where(hit, tau - t_hit, torch.zeros_like(tau))
    return q, v, tau


def _reflect_ball_traced(q, v, tau, R, max_bounces):
    """The bounces of :func:`_reflect_ball` as one :func:`torch.while_loop` (a compiled
    trajectory cannot read whether flight time is left).  A particle still in flight after
    ``max_bounces`` (eagerly a StepBudgetError) gets NaN positions, so its trajectory counts
    as divergent and is rejected: the bounce count is the same backwards, so the rejection
    keeps the chain exact."""

    def cond(i, q, v, tau):
        return (tau > 0).any() & (i < max_bounces)

    def body(i, q, v, tau):
        return (i + 1, *_bounce(q, v, tau, R))

    i0 = torch.zeros((), dtype=torch.int64, device=q.device)
    _, q, v, tau = torch.while_loop(cond, body, (i0, q, v, tau))
    return torch.where((tau > 0)[..., None], torch.full_like(q, math.nan), q), v
