"""The energy of the model: the sum of its terms on a domain (THEORY §2).

:class:`Energy` binds its own copy of each term to the domain's dimension, the dtype and the
device, and gives H_N, its gradient, the Langevin drift and δE/δμ as the sums of the terms'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from .._validation import check_array, check_choice, check_int
from ..domains import Domain
from ..errors import InputError, InputTypeError
from .alignment import AlignmentTerm
from .protocol import Term


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

    Raises
    ------
    meanfield.errors.InputTypeError
        ``domain`` not a Domain, ``terms`` not a sequence of terms.
    meanfield.errors.InputError
        No term; a term of another dimension than the domain.  (A pair term that does not
        match the domain, :func:`~meanfield.energy.check_periodic_terms`, is refused by the
        views before they run.)

    See Also
    --------
    meanfield.dynamics.langevin.simulate : the particle view (projected Langevin on H_N).
    meanfield.pde.equation.McKeanVlasov : the grid view (the N → ∞ limit, δE/δμ on cells).
    meanfield.pde.stationary.gibbs_state : the stationary state ρ_β of the grid view.
    meanfield.ot.distance.wasserstein : the transport view (distances between the two).

    References
    ----------
    - S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in Advanced
      Mathematics, EMS, 2015 (the energy of Coulomb and Riesz gases, its N → ∞ limit).
    - J. A. Carrillo, R. J. McCann, C. Villani, "Kinetic equilibration rates for granular media
      and related equations", Rev. Mat. Iberoamericana 19 (2003) 971–1018 (the McKean–Vlasov
      equation as the gradient flow of E + β⁻¹ ∫ ρ log ρ).

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
            raise InputTypeError(
                f"domain must be a meanfield.domains.Domain (Box, Ball or Torus), got {domain!r}"
            )
        if isinstance(terms, (str, bytes, Term)) or not isinstance(terms, Iterable):
            raise InputTypeError(f"terms must be a list of meanfield.energy.Term, got {terms!r}")
        terms = list(terms)
        if not terms:
            raise InputError("terms: the energy needs at least one term, got none")
        for i, t in enumerate(terms):
            if not isinstance(t, Term):
                raise InputTypeError(f"terms[{i}] must be a meanfield.energy.Term, got {t!r}")
        check_choice("dtype", str(dtype).replace("torch.", ""), ("float64", "float32"))
        # each energy binds its own copies (Term.bound), so one term can serve several
        # energies (e.g. a float64 and a float32 one) without one rebinding the other's tensors
        self.domain = domain
        self.dtype, self.device = dtype, torch.device(device)
        self.terms = [t.bound(domain.dim, dtype, self.device) for t in terms]

    @property
    def dim(self) -> int:
        """The particle dimension p (the domain's).

        See Also
        --------
        meanfield.domains.Box.dim : the domain's dimension.
        meanfield.pde.grid.Grid.dim : the grid view's.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> Energy([QuadraticPotential()], Box(3, 2.0)).dim
        3
        """
        return self.domain.dim

    def as_tensor(self, omega, *, name: str = "omega", allow_empty: bool = False) -> torch.Tensor:
        """Particles as a tensor of this energy's dtype/device, checking shape (..., N, p).

        Parameters
        ----------
        omega : tensor or array-like (..., N, p)
        name : str, default "omega"
            Name quoted in the error message.
        allow_empty : bool, default False
            Accept N = 0 (a measure's atoms may be none; H_N of no particles is not defined,
            its pair term divides by N²).

        Returns
        -------
        tensor (..., N, p)

        Raises
        ------
        meanfield.errors.InputError
            Fewer than two axes, a last axis other than p, or N = 0 (unless ``allow_empty``).

        See Also
        --------
        check_n_particles : the N checked alone.

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
        elif omega.is_complex():  # the cast below would drop the imaginary part silently
            raise InputTypeError(f"{name} must hold real numbers, got dtype {omega.dtype}")
        if omega.ndim < 2 or omega.shape[-1] != self.dim:
            raise InputError(
                f"{name} must have shape (..., N, {self.dim}), got {tuple(omega.shape)}"
            )
        if not allow_empty:
            check_n_particles(omega.shape[-2])
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

        See Also
        --------
        value_and_grad, term_values
        meanfield.pde.potential.GridEnergy.value : the grid view's E_h(ρ).
        meanfield.ot.diagnostics.free_energy : F_β of a grid density.

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

        See Also
        --------
        meanfield.pde.potential.term_names : the grid view reads these names.

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

        See Also
        --------
        value : their sum.
        meanfield.pde.potential.GridEnergy.term_values : the grid view, keyed alike.
        meanfield.pde.trackers.FreeEnergyTracker : records them along a solve.

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

        See Also
        --------
        value, grad
        meanfield.dynamics.hmc.sample_hmc : the particle view that uses both.

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

        See Also
        --------
        term_values, value_and_grad

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

        See Also
        --------
        drift : N ∇H_N, the force of Algorithm 1.
        first_variation : its mean-field counterpart.
        meanfield.pde.equation.McKeanVlasov : the grid view's drift ∇ δE/δρ.

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

        See Also
        --------
        grad : the gradient of the sum.
        meanfield.dynamics.langevin.simulate : the particle view that calls it every step.

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
            raise InputTypeError(
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

        See Also
        --------
        grad : the finite-N gradient.
        meanfield.pde.potential.GridEnergy.potential : the same at the cell centres, for a density.
        meanfield.pde.stationary.gibbs_state : the fixed point ρ = Z⁻¹ exp(−β δE/δρ[ρ]).

        References
        ----------
        - J. A. Carrillo, R. J. McCann, C. Villani, "Kinetic equilibration rates for granular media
          and related equations", Rev. Mat. Iberoamericana 19 (2003) 971–1018.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], Box(1, 3.0))
        >>> E.first_variation([[0.0], [1.0]], [[1.0]], [1.0]).tolist()  # ω²/2 − |ω − 1|
        [-1.0, 0.5]
        """
        at = self.as_tensor(at, name="at", allow_empty=True)
        points = self.as_tensor(points, name="points", allow_empty=True)
        weights = torch.as_tensor(
            check_array("weights", weights, ndim=1), dtype=self.dtype, device=self.device
        )
        if weights.shape[0] != points.shape[0]:
            raise InputError("weights must have one entry per point")
        if torch.any(weights < 0):
            raise InputError("weights must be non-negative (a measure)")
        return sum(t.first_variation(at, points, weights) for t in self.terms)

    def n_data(self) -> int | None:
        """Number of data points of the alignment terms (None without data).

        Returns
        -------
        int or None

        See Also
        --------
        meanfield.energy.AlignmentTerm.n : one term's count.

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

        See Also
        --------
        meanfield.pde.equation.McKeanVlasov.describe : the grid view's attributes, these included.

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

    See Also
    --------
    Energy.as_tensor : the particles' shape (..., N, p) checked.
    meanfield.dynamics.langevin.simulate : the particle view that takes N.

    Examples
    --------
    >>> from meanfield.energy import check_n_particles
    >>> check_n_particles(64)
    64
    """
    return check_int("N (number of particles)", N)
