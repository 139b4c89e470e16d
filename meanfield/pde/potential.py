"""The energy on a grid: δE/δρ at the cell centres and the discrete free energy.

:class:`GridEnergy` reads an :class:`~meanfield.energy.Energy` (the one definition of the model)
and evaluates it for a density ρ on a :class:`~meanfield.pde.grid.Grid`, the density being
the weighted measure μ = Σ_i w_i δ_{x_i}, w_i = ρ_i |C| (x_i the cell centres).  It reads
each term through the kind the term declares (:attr:`meanfield.energy.Term.kind`), never
through its class:

* ``"one-body"`` (confining potentials, the linear alignment): δE/δμ does not depend on ρ,
  so ``term.first_variation`` is evaluated once at the cell centres and stored;
* ``"pair"`` λ ∬ k dμ dμ: (k, λ) come from ``term.pair_kernel()``, and 2λ (k ∗ ρ) is computed
  by the zero-padded FFT with the cell-integrated kernel (:mod:`meanfield.pde.convolution`),
  never by the O(M²) ``first_variation``;
* ``"measure"`` (the risk and normalised alignments): ``term.first_variation`` is called at
  every evaluation (cost O(M n²) for n data points: fine in 1D, slow on large 2D grids), and
  ``term.measure_value`` gives the term's energy.

The discrete free energy, the quantity whose decay the schemes guarantee, is

    F_h(ρ) = β⁻¹ Σ_i w_i log ρ_i  +  E_h(ρ),

with E_h = Σ_i w_i U^loc_i + λ Σ_i w_i (Σ_j W_{i−j} ρ_j) + Σ_measure E_k(μ), and
U_i = ∂F_h/∂w_i − β⁻¹(log ρ_i + 1) the potential returned by :meth:`GridEnergy.potential`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..energy import TERM_KINDS, Energy, PeriodicPairInteraction
from ..errors import InputError, InputTypeError
from .convolution import FFTConvolution
from .grid import Grid

#: Evaluation points per call of ``term.first_variation`` × (data points or cells): bounds the
#: memory of the (chunk × n) feature and (chunk × M) kernel matrices the terms build.
CHUNK_ELEMENTS = 1 << 22


def term_names(energy: Energy) -> list:
    """Unique term names in the order of ``energy.terms`` (:attr:`Energy.term_names`).

    See Also
    --------
    meanfield.energy.Energy.term_names : the names this returns.
    GridEnergy.term_values : the grid view's values under these names.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.pde.potential import term_names
    >>> term_names(Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), 0.5)], Box(1, 3.0)))
    ['confinement', 'interaction']
    """
    return list(energy.term_names)


def check_same_domain(energy: Energy, grid: Grid) -> None:
    """Raise if the energy's domain is not the grid's box.

    See Also
    --------
    GridEnergy : checks the domains when it is made.
    meanfield.pde.grid.check_grid_domain : the domains a grid can cover.

    Examples
    --------
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.pde.grid import Grid
    >>> from meanfield.pde.potential import check_same_domain
    >>> E = Energy([QuadraticPotential()], Box(1, 3.0))
    >>> check_same_domain(E, Grid(Box(1, 3.0), 8))  # same box: no error
    >>> check_same_domain(E, Grid(Box(1, 2.0), 8))
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: grid: incompatible domains: ...
    """
    if energy.domain != grid.domain:
        raise InputError(
            f"grid: incompatible domains: the grid covers {grid.domain!r} but the energy "
            f"lives on {energy.domain!r}; build the grid on the energy's domain (a "
            f"{type(energy.domain).__name__} of the same dim and half_width)"
        )


def entropy(rho: np.ndarray, cell_volume: float) -> float:
    r"""Σ_i |C| ρ_i log ρ_i with 0 log 0 = 0 (dimensionless for a probability density).

    .. math::

        H_h(\rho) = \sum_i |C|\, \rho_i \log \rho_i.

    Parameters
    ----------
    rho : numpy.ndarray
        Cell averages ≥ 0, any shape.
    cell_volume : float
        |C|.

    Returns
    -------
    float

    See Also
    --------
    GridEnergy.free_energy : E_h + β⁻¹ × this.
    meanfield.pde.trackers.FreeEnergyTracker : records it along a solve.
    meanfield.ot.diagnostics.free_energy : F_β of a density from the transport side.

    References
    ----------
    - R. Jordan, D. Kinderlehrer, F. Otto, "The variational formulation of the Fokker–Planck
      equation", SIAM J. Math. Anal. 29 (1998) 1–17.

    Examples
    --------
    The uniform law on a box of volume V has H = −log V:

    >>> import numpy as np
    >>> from meanfield.pde.potential import entropy
    >>> bool(np.isclose(entropy(np.full(8, 1 / 6), 6 / 8), -np.log(6.0)))
    True
    >>> entropy(np.array([0.0, 2.0]), 0.5)  # 0 log 0 = 0; log 2
    0.6931471805599453
    """
    pos = rho > 0
    return float((rho[pos] * np.log(rho[pos])).sum() * cell_volume)


class GridEnergy:
    r"""δE/δρ and E on a grid for an :class:`~meanfield.energy.Energy`.

    Parameters
    ----------
    energy : Energy
        Must live on the grid's box; every term must declare a ``kind`` in
        :data:`~meanfield.energy.TERM_KINDS` (one-body, pair, measure).
    grid : Grid
    workers : int, optional
        Threads for the FFTs.

    See Also
    --------
    meanfield.energy.Energy.first_variation : δE/δμ at points, what this evaluates at the cell
        centres.
    meanfield.energy.Energy.value : the particle view's H_N.
    meanfield.pde.equation.McKeanVlasov : the equation driven by δE/δρ.
    meanfield.pde.convolution.FFTConvolution : the pair terms' W ∗ ρ.

    Notes
    -----
    With w_i = ρ_i |C| and U^loc the one-body potentials,

    .. math::

        U_i = U^{\mathrm{loc}}_i + \sum_{\text{pairs}} 2\lambda\, (W * \rho)_i
        + \sum_{\text{measure}} \frac{\delta E_k}{\delta \mu}(x_i), \qquad
        F_h(\rho) = E_h(\rho) + \beta^{-1} \sum_i w_i \log \rho_i.

    References
    ----------
    - J. A. Carrillo, R. J. McCann, C. Villani, "Kinetic equilibration rates for granular media and
      related equations", Rev. Mat. Iberoamericana 19 (2003) 971–1018.
    - J. A. Carrillo, A. Chertock, Y. Huang, "A finite-volume method for nonlinear nonlocal
      equations with a gradient flow structure", Commun. Comput. Phys. 17 (2015) 233–258.

    Examples
    --------
    On [−3, 3] with V = x²/2 and λ = 1/2, k = −|x|, the uniform law has
    ∫ V dμ = 3/2, λ ∬ k = −E|X − Y|/2 = −1 and entropy −log 6:

    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.pde.field import Density
    >>> from meanfield.pde.grid import Grid
    >>> from meanfield.pde.potential import GridEnergy
    >>> box = Box(1, 3.0)
    >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], box)
    >>> g = Grid(box, 64)
    >>> ge = GridEnergy(E, g)
    >>> rho = Density.uniform(g).data
    >>> {k: round(v, 3) for k, v in ge.free_energy_terms(rho, beta=1.0).items()}
    {'confinement': 1.5, 'interaction': -1.0, 'entropy': -1.792, 'energy': 0.5,
     'free_energy': -1.292}
    >>> ge.potential(rho).shape, ge.depends_on_density
    ((64,), True)
    """

    def __init__(self, energy: Energy, grid: Grid, *, workers: int | None = None):
        if not isinstance(energy, Energy):
            raise InputTypeError(f"energy must be a meanfield.energy.Energy, got {energy!r}")
        if not isinstance(grid, Grid):
            raise InputTypeError(
                f"grid must be a meanfield.pde.Grid (None only with a GridEnergy), got {grid!r}"
            )
        check_same_domain(energy, grid)
        for i, t in enumerate(energy.terms):  # a minimum-image term only on its own torus
            if isinstance(t, PeriodicPairInteraction) and t.domain != energy.domain:
                raise InputError(
                    f"terms[{i}]: a PeriodicPairInteraction on {t.domain!r} in an energy on "
                    f"{energy.domain!r}; give it the energy's domain (a Torus)"
                )
        for t in energy.terms:
            if getattr(t, "kind", None) not in TERM_KINDS:
                raise NotImplementedError(
                    f"the grid solver does not handle the term {type(t).__name__}: it declares "
                    f"kind={getattr(t, 'kind', None)!r}, not one of {TERM_KINDS} (see "
                    "meanfield.energy.Term)"
                )
        self.energy, self.grid = energy, grid
        self.names = term_names(energy)
        self._centers = torch.as_tensor(grid.centers, dtype=energy.dtype, device=energy.device)
        self._one = self._centers[:1]
        self._zero_w = torch.zeros(1, dtype=energy.dtype, device=energy.device)
        self.local: dict = {}
        self.pair: dict = {}
        self.measure: dict = {}
        for name, t in zip(self.names, energy.terms, strict=True):
            if t.kind == "pair":
                kernel, lam = t.pair_kernel()
                self.pair[name] = (lam, FFTConvolution(kernel, grid, workers=workers))
            elif t.kind == "measure":
                self.measure[name] = t
            else:  # one-body: δE/δμ does not depend on μ (points/weights are ignored)
                self.local[name] = self._eval(t, self._one, self._zero_w)
        self.external = sum(self.local.values()) if self.local else np.zeros(grid.shape)
        self._pair_stiffness = None

    @property
    def risk(self) -> dict:
        """Deprecated name of :attr:`measure` (the measure-dependent terms by name).

        See Also
        --------
        measure

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Grid
        >>> g = Grid(Box(1, 3.0), 6)
        >>> ge = GridEnergy(Energy([QuadraticPotential()], g.domain), g)
        >>> ge.risk is ge.measure, ge.risk
        (True, {})
        """
        return self.measure

    @property
    def pair_stiffness(self) -> float:
        """Σ_pairs 2λ × the stiffness of the convolution (:meth:`FFTConvolution.stiffness`).

        Times max ρ, it is the fastest linearised pair-interaction rate (1/time).  Computed on
        first use (80 FFT pairs of power iteration: seconds on a 64³ grid) and cached; the
        β = ∞ solver never needs it.

        See Also
        --------
        meanfield.pde.convolution.FFTConvolution.stiffness
        meanfield.pde.schemes.Scheme.stable_dt : the step bound it enters.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 3.0), 6)
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], g.domain)
        >>> ge, rho = GridEnergy(E, g), Density.uniform(g).data
        >>> lam, conv = ge.pair["interaction"]
        >>> bool(ge.pair_stiffness == 2 * lam * conv.stiffness())
        True
        """
        if self._pair_stiffness is None:
            self._pair_stiffness = sum(
                2 * lam * conv.stiffness() for lam, conv in self.pair.values()
            )
        return self._pair_stiffness

    @property
    def depends_on_density(self) -> bool:
        """False when δE/δρ is the same for every ρ (one-body terms only).

        U is then computed once per solve.

        See Also
        --------
        potential

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, QuadraticPotential
        >>> from meanfield.pde import Grid
        >>> g = Grid(Box(1, 3.0), 6)
        >>> GridEnergy(Energy([QuadraticPotential()], g.domain), g).depends_on_density
        False
        """
        return bool(self.pair or self.measure)

    def _np(self, x: torch.Tensor) -> np.ndarray:
        """A tensor of M cell values as a float64 grid function."""
        return x.detach().cpu().numpy().astype(float).reshape(self.grid.shape)

    def _eval(self, term, points, weights) -> np.ndarray:
        """``term.first_variation`` at every cell centre, in chunks of centres."""
        width = max(getattr(term, "n", 1), points.shape[0], 1)
        step = max(1, CHUNK_ELEMENTS // width)
        M = self._centers.shape[0]
        parts = [
            term.first_variation(self._centers[s : s + step], points, weights)
            for s in range(0, M, step)
        ]
        return self._np(torch.cat(parts))

    def _weights(self, rho):
        """The cell masses w_i = ρ_i |C| as a flat tensor of the energy's dtype and device."""
        w = torch.as_tensor(
            np.ravel(rho) * self.grid.cell_volume,
            dtype=self.energy.dtype,
            device=self.energy.device,
        )
        return w

    def _density_potentials(self, rho: np.ndarray):
        """(name, δE_k/δρ) of the terms whose potential depends on ρ, pairs then measure
        terms: 2λ (W ∗ ρ) by FFT, or the term's ``first_variation`` at the cell centres."""
        for name, (lam, conv) in self.pair.items():
            yield name, 2.0 * lam * conv(rho)
        if self.measure:
            w = self._weights(rho)
            for name, t in self.measure.items():
                yield name, self._eval(t, self._centers, w)

    def potentials(self, rho) -> dict:
        """Each term's δE/δρ at the cell centres.

        Parameters
        ----------
        rho : array_like, shape ``grid.shape``
            The density.

        Returns
        -------
        dict of str to numpy.ndarray
            Term name to its potential (shape ``grid.shape``), in the order of the terms.

        See Also
        --------
        potential : their sum.
        meanfield.energy.Term.first_variation : each term's δE/δμ.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 3.0), 6)
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], g.domain)
        >>> ge, rho = GridEnergy(E, g), Density.uniform(g).data
        >>> {k: v.round(3) for k, v in ge.potentials(rho).items()}  # x²/2 and 2λ (W ∗ ρ)
        {'confinement': array([3.125, 1.125, 0.125, 0.125, 1.125, 3.125]),
         'interaction': array([-2.542, -1.875, -1.542, -1.542, -1.875, -2.542])}
        """
        rho = np.asarray(rho, dtype=float)
        out = {**self.local, **dict(self._density_potentials(rho))}
        return {k: out[k] for k in self.names}

    def potential(self, rho) -> np.ndarray:
        r"""U = δE/δρ at the cell centres (energy units): the sum of :meth:`potentials`.

        .. math::

            U_i = U^{\mathrm{loc}}_i + \sum_{\text{pairs}} 2\lambda\, (W * \rho)_i
            + \sum_{\text{measure}} \frac{\delta E_k}{\delta \mu}(x_i).

        Parameters
        ----------
        rho : array_like, shape ``grid.shape``

        Returns
        -------
        numpy.ndarray, shape ``grid.shape``

        See Also
        --------
        potentials : per term.
        meanfield.energy.Energy.first_variation : the particle view's δE/δμ.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 3.0), 6)
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], g.domain)
        >>> ge, rho = GridEnergy(E, g), Density.uniform(g).data
        >>> ge.potential(rho).round(3)
        array([ 0.583, -0.75 , -1.417, -1.417, -0.75 ,  0.583])
        """
        rho = np.asarray(rho, dtype=float)
        U = self.external.copy()
        for _, u in self._density_potentials(rho):
            U += u
        return U

    def term_values(self, rho, potentials: dict | None = None) -> dict:
        r"""Each energy term E_k(ρ) (no entropy), keyed like ``Energy.term_values``.

        .. math::

            E_{\text{one-body}} = \sum_i w_i U_i, \qquad
            E_{\text{pair}} = \lambda \sum_i w_i (W * \rho)_i = \tfrac12 \sum_i w_i U_i,

        and a measure term's own ``measure_value``.

        Parameters
        ----------
        rho : array_like, shape ``grid.shape``
        potentials : dict, optional
            :meth:`potentials` at ``rho``, if already computed (saves the convolutions).

        Returns
        -------
        dict of str to float

        See Also
        --------
        value : their sum.
        meanfield.energy.Energy.term_values : the particle view's H_N terms, keyed alike.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 3.0), 6)
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], g.domain)
        >>> ge, rho = GridEnergy(E, g), Density.uniform(g).data
        >>> {k: round(v, 4) for k, v in ge.term_values(rho).items()}
        {'confinement': 1.4583, 'interaction': -0.9931}
        """
        rho = np.asarray(rho, dtype=float)
        w = rho * self.grid.cell_volume
        out = {}
        for name in self.names:
            if name in self.measure:
                tw = self._weights(rho)
                out[name] = float(self.measure[name].measure_value(self._centers, tw).item())
                continue
            if potentials is not None:
                U = potentials[name]
            elif name in self.local:
                U = self.local[name]
            else:
                lam, conv = self.pair[name]
                U = 2.0 * lam * conv(rho)
            # one-body: Σ w U; pair: λ Σ w (W ∗ ρ) = ½ Σ w U
            out[name] = float((w * U).sum()) * (1.0 if name in self.local else 0.5)
        return out

    def value(self, rho) -> float:
        """E_h(ρ) = Σ_k E_k(ρ), the energy without entropy (energy units).

        Parameters
        ----------
        rho : array_like, shape ``grid.shape``

        Returns
        -------
        float

        See Also
        --------
        free_energy : with the entropy.
        meanfield.energy.Energy.value : the particle view's H_N.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 3.0), 6)
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], g.domain)
        >>> ge, rho = GridEnergy(E, g), Density.uniform(g).data
        >>> round(ge.value(rho), 4)  # 1.4583 - 0.9931
        0.4653
        """
        return float(sum(self.term_values(rho).values()))

    def free_energy_terms(self, rho, beta: float) -> dict:
        """The discrete free energy and its parts.

        Parameters
        ----------
        rho : array_like, shape ``grid.shape``
        beta : float
            Inverse temperature (inf: no entropy term).

        Returns
        -------
        dict of str to float
            ``{<term>: E_k, ..., "entropy": β⁻¹ Σ w log ρ, "energy": Σ E_k,
            "free_energy": F_β}``.

        See Also
        --------
        free_energy, entropy
        meanfield.pde.trackers.FreeEnergyTracker : records them.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 3.0), 6)
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], g.domain)
        >>> ge, rho = GridEnergy(E, g), Density.uniform(g).data
        >>> {k: round(v, 4) for k, v in ge.free_energy_terms(rho, beta=1.0).items()}
        {'confinement': 1.4583, 'interaction': -0.9931, 'entropy': -1.7918, 'energy': 0.4653,
         'free_energy': -1.3265}
        """
        rho = np.asarray(rho, dtype=float)
        terms = self.term_values(rho)
        ent = 0.0 if math.isinf(beta) else entropy(rho, self.grid.cell_volume) / beta
        E = float(sum(terms.values()))
        return {**terms, "entropy": ent, "energy": E, "free_energy": E + ent}

    def free_energy(self, rho, beta: float) -> float:
        r"""The discrete free energy (β = inf: E_h).

        .. math::

            F_\beta(\rho) = E_h(\rho) + \beta^{-1} \sum_i w_i \log \rho_i.

        Parameters
        ----------
        rho : array_like, shape ``grid.shape``
        beta : float
            Inverse temperature.

        Returns
        -------
        float

        See Also
        --------
        free_energy_terms : its parts.
        meanfield.pde.stationary.gibbs_state : its minimiser ρ_β.
        meanfield.ot.diagnostics.free_energy : the transport-side entry point.

        Examples
        --------
        >>> from meanfield.domains import Box
        >>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> from meanfield.pde import Density, Grid
        >>> g = Grid(Box(1, 3.0), 6)
        >>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], g.domain)
        >>> ge, rho = GridEnergy(E, g), Density.uniform(g).data
        >>> round(ge.free_energy(rho, 1.0), 4), round(ge.free_energy(rho, float("inf")), 4)
        (-1.3265, 0.4653)
        """
        return self.free_energy_terms(rho, beta)["free_energy"]
