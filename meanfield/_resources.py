"""Pre-flight size checks: the memory a grid computation will need, against what the machine
has, raised before anything is allocated.

The estimates are per cell of the grid, measured with ``ru_maxrss`` on the McKean–Vlasov
solver (construction plus a few steps, one pair term; 64²–512² and 48³–80³ cells):

* every scheme: :data:`BYTES_PER_CELL` (the density, the potential, fluxes, face rates and
  the scratch arrays of a step; measured 240-530 B per cell);
* each pair term: its zero-padded FFT convolution, :data:`BYTES_PER_PADDED_CELL` per cell of
  the padded grid, 2^p times the grid (the kernel's transform and one of ρ);
* the unsplit implicit schemes in 2D/3D (``sg-implicit``, ``sg-mprk22``): the sparse LU
  factors, whose fill grows with the grid — :data:`LU_BYTES_2D` · log₂ M per cell in 2D
  (measured 1.3 kB at 512²) and :data:`LU_BYTES_3D` · M^(1/3) per cell in 3D (11.7 kB at 48³).

A size is refused when the estimate exceeds the memory available now
(:func:`available_memory`: ``psutil``, else ``/proc/meminfo`` MemAvailable, else
``os.sysconf``); with no way to tell, nothing is refused.  The estimates are meant to catch
sizes that are far out of reach (a 100000² grid: terabytes), not to plan a run to the last
megabyte.

Examples
--------
>>> from meanfield._resources import grid_bytes
>>> grid_bytes((64, 64), pair_terms=1) // 2**20  # MiB
2
"""

from __future__ import annotations

import math
import os

from ._validation import shown
from .errors import SizeLimitError

#: Bytes per grid cell every scheme needs (see the module docstring).
BYTES_PER_CELL = 512
#: Bytes per cell of a pair term's zero-padded FFT grid (2^p times the grid).
BYTES_PER_PADDED_CELL = 24
#: LU fill of the unsplit implicit schemes: bytes per cell per log₂ M (2D).
LU_BYTES_2D = 80
#: LU fill of the unsplit implicit schemes: bytes per cell per M^(1/3) (3D).
LU_BYTES_3D = 250
#: Schemes that factor I − Δt A as a sparse LU in 2D/3D.
LU_SCHEMES = ("sg-implicit", "sg-mprk22")


def available_memory() -> int | None:
    """Bytes of memory available now, or None when the platform does not say.

    Returns
    -------
    int or None

    Examples
    --------
    >>> from meanfield._resources import available_memory
    >>> m = available_memory()
    >>> m is None or m > 0
    True
    """
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # not installed, or no answer on this platform
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def grid_bytes(n: tuple, *, pair_terms: int = 0, scheme: str = "upwind") -> int:
    """The estimated peak memory (bytes) of a McKean–Vlasov solve on a grid of ``n`` cells
    per axis (module docstring).

    Parameters
    ----------
    n : tuple of int
        Cells per axis.
    pair_terms : int
        Pair terms of the energy (each has an FFT convolution).
    scheme : str
        The scheme's name (the unsplit implicit ones add their LU factors in 2D/3D).

    Returns
    -------
    int

    Examples
    --------
    >>> from meanfield._resources import grid_bytes
    >>> grid_bytes((600, 600, 600), pair_terms=1) > 100 * 2**30  # over 100 GiB
    True
    """
    p = len(n)
    cells = math.prod(int(k) for k in n)
    total = cells * BYTES_PER_CELL + pair_terms * cells * 2**p * BYTES_PER_PADDED_CELL
    if scheme in LU_SCHEMES and p == 2:
        total += cells * LU_BYTES_2D * math.log2(max(cells, 2))
    elif scheme in LU_SCHEMES and p == 3:
        total += cells * LU_BYTES_3D * cells ** (1 / 3)
    return int(total)


def _format_bytes(b: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if b < 1000:
            return f"{b:.3g} {unit}"
        b /= 1000
    return f"{b:.3g} TB"


def check_grid_memory(name: str, n: tuple, *, pair_terms: int = 0, scheme: str = "upwind"):
    """Refuse a grid whose estimated memory (:func:`grid_bytes`) exceeds what is available.

    Parameters
    ----------
    name : str
        The flag or parameter that sets the grid size, quoted in the message.
    n, pair_terms, scheme :
        As :func:`grid_bytes`.

    Raises
    ------
    meanfield.errors.SizeLimitError
        The estimate exceeds :func:`available_memory`.

    Examples
    --------
    >>> from meanfield._resources import check_grid_memory
    >>> check_grid_memory("--cells", (128,), pair_terms=1)  # fine
    >>> try:
    ...     check_grid_memory("--cells", (100000, 100000), pair_terms=1)
    ... except ValueError as err:
    ...     print(str(err)[:40])
    --cells: a grid of 100000 x 100000 cells
    """
    need = grid_bytes(n, pair_terms=pair_terms, scheme=scheme)
    have = available_memory()
    if have is None or need <= have:
        return
    name = shown(name)
    shape = " x ".join(str(int(k)) for k in n)
    per_axis = _largest_fitting(n, pair_terms, scheme, have)
    raise SizeLimitError(
        f"{name}: a grid of {shape} cells needs about {_format_bytes(need)} ({scheme}"
        f"{f', {pair_terms} pair term(s)' if pair_terms else ''}), more than the "
        f"{_format_bytes(have)} of memory available; lower {name} (at most about {per_axis} "
        "cells per axis fit)"
    )


def _largest_fitting(n: tuple, pair_terms: int, scheme: str, have: int) -> int:
    """The largest k such that k cells on every axis fit into ``have`` bytes (bisection)."""
    lo, hi = 1, max(int(k) for k in n)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if grid_bytes((mid,) * len(n), pair_terms=pair_terms, scheme=scheme) <= have:
            lo = mid
        else:
            hi = mid - 1
    return lo
