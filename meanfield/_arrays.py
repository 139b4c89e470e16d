"""Small array helpers shared by the NumPy and the compiled (numba) paths of the fast sums.

Private: a module of its own so that :mod:`meanfield._fastsums_ewald` and
:mod:`meanfield._fastsums_near` both import it without importing each other.
"""

from __future__ import annotations

import numpy as np


def _column_bounds(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest entry of each column of ``x`` (N, d): ``x.min(0)``, ``x.max(0)``.

    Column by column: numpy reduces an (N, 2) array along axis 0 row by row, 25 ms at
    N = 1e6 against 0.9 ms for a strided column, and a p = 2 step took four such bounds.
    """
    return np.array([c.min() for c in x.T]), np.array([c.max() for c in x.T])
