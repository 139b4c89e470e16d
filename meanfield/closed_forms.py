"""Exact equilibrium laws of THEORY §5 (V = |ω|²/2, λ = 1/2, β = ∞), for tests and studies.

Each law has a density, a CDF and a quantile function (numpy, vectorised).  In 1D these give
exact W_p distances to an empirical measure through quantile functions (see
:func:`wasserstein_to_law_1d`), an independent check on the transport code of
:mod:`meanfield.diagnostics`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from ._validation import check_choice, check_int, check_sample


@dataclass(frozen=True)
class Law1D:
    """A law on the line given by its CDF on [lo, hi]; quantiles by root finding."""

    name: str
    lo: float
    hi: float

    def pdf(self, x):
        raise NotImplementedError

    def cdf(self, x):
        raise NotImplementedError

    def quantile(self, u):
        """F⁻¹(u) for u in [0, 1] (vectorised bisection, exact to 1e-13)."""
        u = np.atleast_1d(np.asarray(u, dtype=float))
        out = np.empty_like(u)
        for i, ui in enumerate(u):
            if ui <= 0:
                out[i] = self.lo
            elif ui >= 1:
                out[i] = self.hi
            else:
                out[i] = optimize.brentq(
                    lambda x, ui=ui: self.cdf(x) - ui, self.lo, self.hi, xtol=1e-14
                )
        return out


class Semicircle(Law1D):
    """(1/π)√(2 − x²) on [−√2, √2]: the p = 1 log-gas (s = 0)."""

    def __init__(self):
        super().__init__("semicircle", -math.sqrt(2), math.sqrt(2))

    def pdf(self, x):
        x = np.asarray(x, dtype=float)
        return np.sqrt(np.clip(2 - x**2, 0, None)) / math.pi

    def cdf(self, x):
        x = np.clip(np.asarray(x, dtype=float), self.lo, self.hi)
        root = np.sqrt(np.clip(2 - x**2, 0, None))
        return 0.5 + (x * root / 2 + np.arcsin(x / math.sqrt(2))) / math.pi


class UniformInterval(Law1D):
    """Uniform on [−1, 1]: the p = 1 gas with k = −|z| (s = −1)."""

    def __init__(self):
        super().__init__("uniform", -1.0, 1.0)

    def pdf(self, x):
        x = np.asarray(x, dtype=float)
        return np.where(np.abs(x) <= 1, 0.5, 0.0)

    def cdf(self, x):
        return np.clip((np.asarray(x, dtype=float) + 1) / 2, 0, 1)

    def quantile(self, u):
        return 2 * np.clip(np.asarray(u, dtype=float), 0, 1) - 1


class BallRadius(Law1D):
    """Law of |ω| under the uniform unit ball of R^p: CDF r^p on [0, 1].

    p = 2: the log-gas of the plane (uniform disk); p = 3: the Coulomb gas 1/|z| of R³.
    """

    def __init__(self, dim: int = 3):
        super().__init__(f"ball{check_int('dim', dim)}_radius", 0.0, 1.0)
        object.__setattr__(self, "dim", int(dim))

    def pdf(self, r):
        r = np.asarray(r, dtype=float)
        return np.where((r >= 0) & (r <= 1), self.dim * np.clip(r, 0, 1) ** (self.dim - 1), 0.0)

    def cdf(self, r):
        return np.clip(np.asarray(r, dtype=float), 0, 1) ** self.dim

    def quantile(self, u):
        return np.clip(np.asarray(u, dtype=float), 0, 1) ** (1.0 / self.dim)


class DiskRadius(BallRadius):
    """Law of |ω| under the uniform unit disk (p = 2 log-gas): CDF r² on [0, 1]."""

    def __init__(self):
        super().__init__(2)
        object.__setattr__(self, "name", "disk_radius")


CASES = {
    "semicircle": (0.0, 1, Semicircle),
    "uniform": (-1.0, 1, UniformInterval),
    "disk": (0.0, 2, DiskRadius),
}


def equilibrium_case(name: str) -> tuple[float, int, Law1D]:
    """(Riesz s, particle dimension p, exact law) of a closed-form case of THEORY §5."""
    check_choice("case", name, CASES)
    s, p, law = CASES[name]
    return s, p, law()


def wasserstein_to_law_1d(samples, law: Law1D, order: int = 2, n_quad: int = 64) -> float:
    """W_order between the empirical law of ``samples`` (1D) and ``law``, by quantiles.

    W_q^q = Σ_i ∫_{(i−1)/N}^{i/N} |x_(i) − F⁻¹(u)|^q du, each piece by ``n_quad``-point
    Gauss–Legendre quadrature (the quantile function is smooth inside each piece except at the
    support edges, where it is integrable).
    """
    x = np.sort(check_sample("samples", np.asarray(samples, dtype=float).ravel()))
    order = check_int("order", order)
    N = len(x)
    g, gw = np.polynomial.legendre.leggauss(n_quad)
    edges = np.arange(N + 1) / N
    u = (edges[:-1, None] + edges[1:, None]) / 2 + g[None, :] / (2 * N)
    Q = _fast_quantile(law, u.ravel()).reshape(u.shape)
    total = (np.abs(x[:, None] - Q) ** order * gw[None, :]).sum() / (2 * N)
    return float(total ** (1 / order))


def _fast_quantile(law: Law1D, u):
    """Quantiles through a dense monotone table and linear interpolation (error < 1e-9)."""
    if type(law).quantile is not Law1D.quantile:
        return law.quantile(u)
    t = np.linspace(0, 1, 20001) ** 1  # table in x, cdf values monotone
    xs = law.lo + (law.hi - law.lo) * (0.5 - 0.5 * np.cos(np.pi * t))  # dense at the edges
    return np.interp(u, law.cdf(xs), xs)
