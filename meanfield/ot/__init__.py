"""Optimal transport and the diagnostics that compare the two views of the model.

The entry points, one convention for every distance: two :class:`Measure`\\ s in, one
:class:`TransportResult` out.

* :class:`~meanfield.ot.measure.Measure` — weighted points ``(points, weights)``, from
  particles (:meth:`~meanfield.ot.measure.Measure.from_particles`), a grid density
  (:meth:`~meanfield.ot.measure.Measure.from_density`) or a histogram;
* :func:`~meanfield.ot.distance.wasserstein` (``order=1`` or ``2``, ``method="auto"``,
  "exact", "sparse", "sliced", "quantile"), :func:`~meanfield.ot.distance.w1`,
  :func:`~meanfield.ot.distance.w2`, returning a
  :class:`~meanfield.ot.distance.TransportResult`.

The modules:

* :mod:`~meanfield.ot.measure` — the measure type and the quantile functions in p = 1;
* :mod:`~meanfield.ot.distance` — the distances, exact in 1D by quantile functions, by POT's
  network simplex or the sparse solver in 2D and 3D, sliced on request;
* :mod:`~meanfield.ot.sparse` — exact W₂ between weighted point clouds on a sparse support,
  certified over all pairs (:func:`~meanfield.ot.sparse.w2_sparse`, the solver behind
  ``method="sparse"``);
* :mod:`~meanfield.ot.diagnostics` — the kernel gap on the data and the free energy;
* :mod:`~meanfield.ot.spacing` — the minimum pair distance of a particle configuration.

Examples
--------
>>> import numpy as np
>>> import meanfield as mf
>>> omega = np.random.default_rng(0).normal(size=(200, 1))
>>> rho = mf.Density.gaussian(mf.Grid(mf.Box(1, 6.0), 120), 0.0, 1.0)
>>> r = mf.ot.w2(mf.Measure.from_particles(omega), mf.Measure.from_density(rho))
>>> r.method, r.certified, bool(0 < r.distance < 0.2)
('quantile', True, True)
"""

from .._lazy import submodule_attributes

#: The entry points of the wing (name -> module), imported on first access.
ENTRY_POINTS = {
    "Measure": "measure",
    "TransportResult": "distance",
    "wasserstein": "distance",
    "w1": "distance",
    "w2": "distance",
}

__getattr__, __dir__ = submodule_attributes(__name__, __path__, ENTRY_POINTS)
