"""The package version, in a module of its own.

Modules that record the version (provenance of results, sweep manifests) import it from here,
never from the package ``meanfield`` itself, whose front door imports them lazily: no module
depends on the package's ``__init__``, so the import graph stays acyclic.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("meanfield")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.1.0+unknown"

__all__ = ["__version__"]
