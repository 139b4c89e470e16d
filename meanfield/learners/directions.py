r"""A repulsion of the frequency *directions*: the frame potential on the projective sphere.

The alignment flows of :class:`~meanfield.learners.CoulombFeatures` collapse the directions
w_i/|w_i| of the frequencies onto a few axes (on the Gaussian-mixture task almost onto one:
``paper_repro/synthetic/README.md``). The Riesz repulsion acts on the whole particle (w, b) and
does not see it: particles on one axis at different radii are far apart. This term acts on the
directions only. With u(ω) = w/√(|w|² + ε²) (w = ω[:d], the phase ω[d] left out),

.. math::

    E(\mu) = \lambda_F \iint \big(u(\omega)\cdot u(\omega')\big)^2\, \mu(d\omega)\,\mu(d\omega')
    = \lambda_F \,\|M_\mu\|_F^2, \qquad M_\mu = \int u u^\top d\mu ,

the frame potential (Benedetto & Fickus 2003). It depends on ±u alike (cos(wᵀx + b) and
cos(−wᵀx + b') span the same functions), and for unit vectors ‖M‖²_F ≥ (tr M)²/d = 1/d, with
equality iff M = I/d: its minimisers are the isotropic ("tight frame") laws of directions,
whatever the norms. It neither pulls nor pushes |w| (for ε = 0 the force is tangent to the
sphere), so it stops the axis collapse without acting on the kernel's width.
"""

from __future__ import annotations

import torch

from meanfield._validation import check_positive
from meanfield.energy import Term

__all__ = ["DirectionFrame"]


class DirectionFrame(Term):
    r"""Frame potential of the frequency directions, λ_F ∬ (u·u')² dμ dμ (module docstring).

    Finite N (diagonal left out, as every pair sum of the package):

    .. math::

        H_N = \frac{\lambda_F}{N^2}\Big(\|S\|_F^2 - \sum_i |u_i|^4\Big), \qquad
        S = \sum_i u_i u_i^\top, \\
        \nabla_{w_i} H_N = \frac{4\lambda_F}{N^2\, r_i}\,(I - u_i u_i^\top)
        \big(S u_i - |u_i|^2 u_i\big), \qquad r_i = \sqrt{|w_i|^2 + \varepsilon^2},

    O(N d²) per evaluation; no force on the phase (last coordinate). First variation:
    δE/δμ(ω) = 2 λ_F u(ω)ᵀ M_μ u(ω).

    Parameters
    ----------
    lam : float >= 0
        Strength λ_F.
    softening : float > 0
        ε of u = w/√(|w|² + ε²): keeps the force bounded (by 8 λ_F/ε) near w = 0.

    See Also
    --------
    CoulombFeatures : its ``direction_repulsion`` option.
    meanfield.learners.diagnostics.isotropy : how spread the directions are.
    meanfield.energy.PairInteraction : the Riesz repulsion of whole particles.

    Examples
    --------
    Four unit directions in the plane, two on each axis: S = 2 I, ‖S‖² = 8, Σ|u|⁴ = 4,
    H = (8 − 4)/16 = 1/4 (ε → 0):

    >>> import torch
    >>> omega = torch.tensor([[1.0, 0, 0], [-1.0, 0, 1], [0, 1.0, 2], [0, -1.0, 3]]).double()
    >>> round(float(DirectionFrame(1.0, softening=1e-9).value(omega)), 6)
    0.25
    """

    name = "direction_frame"
    kind = "measure"

    def __init__(self, lam: float = 1.0, softening: float = 0.1):
        self.lam = check_positive("lam (lambda_F)", lam, allow_zero=True)
        self.softening = check_positive("softening (epsilon)", softening)

    def bind(self, dim, dtype, device):
        """Check that the particles have a phase coordinate besides the frequencies.

        Parameters
        ----------
        dim : int
            Particle dimension p = d + 1 (frequencies, then the phase); p >= 2.
        dtype, device
            Unused (the term holds no data).

        Raises
        ------
        ValueError
            If ``dim`` < 2.

        Examples
        --------
        >>> import torch
        >>> DirectionFrame().bind(3, torch.float64, "cpu")
        """
        if int(dim) < 2:
            raise ValueError(
                f"DirectionFrame needs particles (w, phase) of dimension >= 2, got {dim}"
            )

    def _directions(self, omega):
        w = omega[..., :-1]
        r = torch.sqrt((w * w).sum(-1, keepdim=True) + self.softening**2)
        return w / r, r

    def value(self, omega):
        """H_N(Ω) = λ_F (‖S‖²_F − Σ_i |u_i|⁴)/N² (class docstring), one value per replica.

        Parameters
        ----------
        omega : tensor (..., N, p)

        Returns
        -------
        tensor (...)

        Examples
        --------
        >>> import torch
        >>> omega = torch.tensor([[3.0, 0.0, 1.0], [5.0, 0.0, 2.0]]).double()  # one axis
        >>> round(float(DirectionFrame(1.0, softening=1e-9).value(omega)), 6)  # 2 / 4
        0.5
        """
        u, _ = self._directions(omega)
        N = omega.shape[-2]
        S = u.transpose(-1, -2) @ u
        diag = ((u * u).sum(-1) ** 2).sum(-1)
        return self.lam * ((S * S).sum((-1, -2)) - diag) / N**2

    def grad(self, omega):
        """∇_Ω H_N (class docstring); zero on the phase.

        Parameters
        ----------
        omega : tensor (..., N, p)

        Returns
        -------
        tensor (..., N, p)

        Examples
        --------
        Two orthogonal directions feel no force (the frame potential is at its minimum):

        >>> import torch
        >>> omega = torch.tensor([[2.0, 0.0, 0.5], [0.0, 3.0, 1.0]]).double()
        >>> DirectionFrame(1.0).grad(omega).abs().max().item()
        0.0
        """
        u, r = self._directions(omega)
        N = omega.shape[-2]
        S = u.transpose(-1, -2) @ u
        gu = 4.0 * (u @ S - (u * u).sum(-1, keepdim=True) * u)  # ∂/∂u_i of ‖S‖² − Σ|u|⁴
        gw = (gu - u * (u * gu).sum(-1, keepdim=True)) / r  # (I − u uᵀ) gu / r
        g = torch.zeros_like(omega)
        g[..., :-1] = self.lam * gw / N**2
        return g

    def first_variation(self, at, points, weights):
        """δE/δμ(ω) = 2 λ_F u(ω)ᵀ M_μ u(ω), M_μ = Σ_k w_k u_k u_kᵀ.

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
        >>> pts = torch.tensor([[1.0, 0.0, 0.0]]).double()
        >>> at = torch.tensor([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]]).double()
        >>> DirectionFrame(1.0, softening=1e-9).first_variation(at, pts, torch.ones(1).double())
        tensor([2., 0.], dtype=torch.float64)
        """
        u_at, _ = self._directions(at)
        u, _ = self._directions(points)
        M = (u * weights[:, None]).transpose(0, 1) @ u
        return 2.0 * self.lam * ((u_at @ M) * u_at).sum(-1)

    def measure_value(self, points, weights):
        """E(μ) = λ_F ‖M_μ‖²_F for μ = Σ_k w_k δ_{points_k}.

        Parameters
        ----------
        points : tensor (K, p)
        weights : tensor (K,)

        Returns
        -------
        tensor ()

        Examples
        --------
        Mass 1/2 on each axis of the plane: M = I/2, ‖M‖² = 1/2, the minimum 1/d:

        >>> import torch
        >>> pts = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).double()
        >>> w = torch.tensor([0.5, 0.5]).double()
        >>> round(float(DirectionFrame(1.0, softening=1e-9).measure_value(pts, w)), 6)
        0.5
        """
        u, _ = self._directions(points)
        M = (u * weights[:, None]).transpose(0, 1) @ u
        return self.lam * (M * M).sum()

    def describe(self):
        """Name, strength and softening (recorded in ``energy_description_``).

        Returns
        -------
        dict

        Examples
        --------
        >>> DirectionFrame(0.5).describe()
        {'interaction': 'direction_frame', 'lam': 0.5, 'softening': 0.1}
        """
        return {"interaction": "direction_frame", "lam": self.lam, "softening": self.softening}
