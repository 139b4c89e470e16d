"""Particle dynamics: the N-particle view of the model.

* :mod:`~meanfield.dynamics.langevin` — :func:`~meanfield.dynamics.langevin.simulate`, the one
  run loop; projected Langevin (Algorithm 1, THEORY §3) and MALA integrators;
* :mod:`~meanfield.dynamics.hmc` — Hybrid Monte Carlo for the exact Gibbs law
  (:func:`~meanfield.dynamics.hmc.sample_hmc`), with reflection at the domain's walls;
* :mod:`~meanfield.dynamics.chains` — what every chain shares: the state (positions, energy,
  gradient), the Metropolis step, the set-up and the records.

Every integrator consumes the same :class:`meanfield.energy.Energy` as the grid solver.
Chain statistics (autocorrelation times, effective sample sizes) are in
:mod:`meanfield.stats`.
"""

from .._lazy import submodule_attributes

__getattr__, __dir__ = submodule_attributes(__name__, __path__)
