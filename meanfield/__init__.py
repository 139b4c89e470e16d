"""meanfield: random features as charged particles.

The same model seen as N particles (projected Langevin dynamics, :mod:`meanfield.particles`)
and as its N -> infinity limit (a McKean-Vlasov equation on a grid, :mod:`meanfield.pde`),
with one definition of the energy (:mod:`meanfield.energy`) consumed by both.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("meanfield")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.1.0+unknown"

__all__ = ["__version__"]
