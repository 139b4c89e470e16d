"""The workbench: what runs the model and keeps its results.

* :mod:`~meanfield.workbench.problems` — the embedded default problem and its one-call run;
* :mod:`~meanfield.workbench.compare` — particles and grid side by side from one energy;
* :mod:`~meanfield.workbench.config` — plain-parameter descriptions of runs (CLI, TOML);
* :mod:`~meanfield.workbench.sweeps` — resumable parameter sweeps on dask, keyed by the full
  configuration;
* :mod:`~meanfield.workbench.plotting` — the shared matplotlib helpers.

The studies (:mod:`meanfield.studies`) build on it, and the command line
(:mod:`meanfield.cli`) on both.
"""

from .._lazy import submodule_attributes

__getattr__, __dir__ = submodule_attributes(__name__, __path__)
