"""One-body confining potentials V: E(μ) = ∫ V dμ, δE/δμ = V (THEORY §2)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._validation import check_finite_real, check_positive
from ..errors import InputTypeError
from .protocol import Term


class Potential(Term):
    r"""Confining potential: H = (1/N) Σ_i V(ω_i), δE/δμ = V.

    Subclasses give ``V`` (..., p) -> (...) and ``gradV`` (..., p) -> (..., p).

    .. math::

        E(\mu) = \int V \, d\mu, \qquad H_N(\Omega) = \frac1N \sum_{i=1}^N V(\omega_i),
        \qquad \frac{\delta E}{\delta \mu} = V.

    See Also
    --------
    QuadraticPotential, DoubleWellPotential, CallablePotential
    meanfield.energy.Energy : the one definition of the model the views read.
    meanfield.pde.potential.GridEnergy : the grid view (V stored once at the cell centres).
    meanfield.dynamics.langevin.simulate : the particle view (projected Langevin on H_N).

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

        See Also
        --------
        gradV : its gradient.
        meanfield.pde.potential.GridEnergy : stores V at the cell centres once.

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

        See Also
        --------
        V : the potential.
        meanfield.energy.Energy.drift : the force it enters.

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

    See Also
    --------
    meanfield.energy.Energy : the sum of the terms the views read.
    meanfield.closed_forms.equilibrium_case : the exact equilibria with this confinement.

    References
    ----------
    - I. Dumitriu, A. Edelman, "Matrix models for β-ensembles", J. Math. Phys. 43 (2002)
      5830–5847 (with the log interaction, the Gibbs law of the Gaussian β-ensemble).

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

    See Also
    --------
    Potential : the one-body term protocol.
    meanfield.pde.branches.follow_branches : the stationary branches in β (the phase transition of
        the double well).
    meanfield.pde.stationary.gibbs_state : the grid view's stationary state ρ_β.
    meanfield.dynamics.langevin.simulate : the particle view (projected Langevin on H_N).

    References
    ----------
    - D. A. Dawson, "Critical dynamics and fluctuations for a mean-field model of cooperative
      behavior", J. Stat. Phys. 31 (1983).
    - J. Tugaut, "Phase transitions of McKean–Vlasov processes in double-wells landscape",
      Stochastics 86 (2014).

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

    See Also
    --------
    Potential : the one-body term protocol (subclass it for an analytic gradient).
    QuadraticPotential, DoubleWellPotential
    meanfield.energy.Energy : the one definition of the model the views read.

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
            raise InputTypeError("fn must be a callable taking a (..., p) tensor")
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
