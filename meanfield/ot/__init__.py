"""Optimal transport and the diagnostics that compare the two views of the model.

* :mod:`~meanfield.ot.sparse` — exact W₂ between weighted point clouds on a sparse support,
  certified over all pairs (:func:`~meanfield.ot.sparse.w2_sparse`);
* :mod:`~meanfield.ot.diagnostics` — W₁/W₂ between particles and a grid density or two grid
  densities, sliced W₂, the kernel gap on the data and the free energy;
* :mod:`~meanfield.ot.spacing` — the minimum pair distance of a particle configuration.
"""

from .._lazy import submodule_attributes

__getattr__, __dir__ = submodule_attributes(__name__, __path__)
