"""The structure check of a flux scheme: :func:`check_scheme`.

Whether a :class:`~meanfield.pde.schemes.Scheme` keeps, over a few steps of a 1D and a 2D
McKean–Vlasov problem, the structure of the finite-volume schemes: mass conserved, density
nonnegative, free energy nonincreasing; the problem and the tolerances are in
:func:`check_scheme`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from .._validation import check_int
from ..domains import Box
from ..energy import Energy, PairInteraction, QuadraticPotential
from ..errors import InputError, InputTypeError
from ..kernels import Gaussian
from ..pde import Density, FreeEnergyTracker, Grid, MassTracker, McKeanVlasov
from ..pde.schemes import SCHEMES, Scheme
from ._runner import CheckRunner

__all__ = ["check_scheme"]


def check_scheme(
    scheme: str | Scheme,
    *,
    problems: Iterable[tuple[int, int]] = ((1, 32), (2, 10)),
    t_end: float = 0.05,
    dt_max: float = 0.01,
) -> None:
    r"""Check that a flux scheme keeps the McKean–Vlasov equation's structure on a grid.

    For each (p, M) of ``problems``, the equation
    ∂_t ρ = ∇·(ρ ∇(V + 2λ k∗ρ)) + β⁻¹ Δρ with V = |ω|²/2, k the Gaussian of width 0.5,
    λ = 1/2, β = 2, on [−2, 2]^p with M cells per axis and the no-flux boundary, is solved
    from a Gaussian (mean 0.5, width 0.4) to ``t_end`` with steps of at most ``dt_max``
    (:class:`~meanfield.pde.equation.McKeanVlasov` with ``scheme``).  The checks, at every step:

    ``solve``
        the solve (whose own guards refuse a mass drift over 1e-9 and a negative density)
        reaches ``t_end`` in at least 5 steps.
    ``mass``
        the mass is the initial mass to 1e-12 (every face flux is added once and removed once).
    ``positivity``
        the density is nonnegative.
    ``free energy``
        the free energy F_β(ρ) = E(ρ) + β⁻¹ ∫ρ log ρ is finite, does not increase from step
        to step by more than its round-off (1e-13), and ends below where it started (the
        discrete Wasserstein gradient-flow structure of [1]_).

    Parameters
    ----------
    scheme : str or Scheme
        A name of :data:`~meanfield.pde.schemes.SCHEMES`, or a
        :class:`~meanfield.pde.schemes.Scheme` instance (each problem binds its own copy).
    problems : iterable of (int, int), default ((1, 32), (2, 10))
        Pairs (dimension p ≥ 1, cells per axis M ≥ 4).
    t_end : float, default 0.05
        Final time, > 0.
    dt_max : float, default 0.01
        Largest step, in (0, t_end / 5] (at least 5 steps).

    Returns
    -------
    None
        When every check holds.

    Raises
    ------
    AssertionError
        A check fails; the message names the scheme, the check, the problem (p, M), the step
        and the observed and expected numbers.
    meanfield.errors.InputError
        A name not in SCHEMES, a bad problem, ``t_end`` or ``dt_max`` out of range.
    meanfield.errors.InputTypeError
        ``scheme`` neither a string nor a Scheme.

    See Also
    --------
    meanfield.testing.term_checks.check_term : the contract of the energy terms that give
        the potential.
    meanfield.testing.kernel_checks.check_kernel : the contract of a pair kernel.
    meanfield.pde.schemes.make_scheme : the built-in schemes by name.

    References
    ----------
    .. [1] J. A. Carrillo, A. Chertock, Y. Huang, "A finite-volume method for nonlinear
       nonlocal equations with a gradient flow structure", Commun. Comput. Phys. 17 (2015).

    Examples
    --------
    >>> from meanfield.testing import check_scheme
    >>> check_scheme("sg")
    >>> from meanfield.pde.schemes import make_scheme
    >>> check_scheme(make_scheme("upwind", order=1), problems=[(1, 16)])
    """
    if isinstance(scheme, str):
        if scheme not in SCHEMES:
            raise InputError(f"scheme must be one of {SCHEMES} or a Scheme, got {scheme!r}")
    elif not isinstance(scheme, Scheme):
        raise InputTypeError(
            "scheme must be a name of meanfield.pde.schemes.SCHEMES or a "
            f"meanfield.pde.schemes.Scheme instance, got {type(scheme).__name__}"
        )
    problems = [tuple(pr) for pr in problems]
    if not problems:
        raise InputError("problems must hold at least one (dimension, cells) pair, got none")
    for pr in problems:
        if len(pr) != 2:
            raise InputError(f"each problem must be a pair (dimension, cells), got {pr!r}")
        check_int("problems: dimension", pr[0], minimum=1)
        check_int("problems: cells", pr[1], minimum=4)
    for name, v in (("t_end", t_end), ("dt_max", dt_max)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise InputError(f"{name} must be a finite number > 0, got {v!r}")
    if dt_max > t_end / 5:
        raise InputError(
            f"dt_max must be at most t_end / 5 = {t_end / 5:g} (at least 5 steps), got {dt_max!r}"
        )
    c = CheckRunner("check_scheme", scheme)
    for p, cells in problems:
        where = f"p = {p}, {cells} cells per axis"
        with c.check("solve"):
            dom = Box(p, 2.0)
            energy = Energy([QuadraticPotential(), PairInteraction(Gaussian(0.5), 0.5)], dom)
            grid = Grid(dom, cells)
            eq = McKeanVlasov(energy, grid, beta=2.0, scheme=scheme)
            rho0 = Density.gaussian(grid, 0.5, 0.4)
            mass, fe = MassTracker(0), FreeEnergyTracker(0)
            res = eq.solve(rho0, t_end, trackers=[mass, fe], dt_max=dt_max)
            c.require(
                res.n_steps >= 5 and math.isclose(res.t, t_end, rel_tol=1e-9),
                f"{where}: reached t = {res.t!r} in {res.n_steps} steps, expected "
                f"t = {t_end!r} in at least 5",
            )
        step = lambda i, where=where: f"{where}, record {i[0]}"  # noqa: E731
        with c.check("mass"):
            m = np.asarray(mass.mass, dtype=float)
            c.compare(
                "mass vs the initial mass",
                m,
                np.full_like(m, rho0.mass),
                rtol=0,
                atol=1e-12,
                at=step,
            )
        with c.check("positivity"):
            low = np.asarray(mass.min_density, dtype=float)
            c.compare(
                "min ρ vs 0 (clipped at 0)", low, np.maximum(low, 0.0), rtol=0, atol=0, at=step
            )
        with c.check("free energy"):
            F = np.asarray(fe.records["free_energy"], dtype=float)
            c.require(
                bool(np.isfinite(F).all()),
                f"{where}: F_β is not finite at every record: {F.tolist()}",
            )
            rise = np.diff(F)
            c.compare(
                "F_β(ρ_{n+1}) − F_β(ρ_n) vs ≤ 0",
                rise,
                np.minimum(rise, 0.0),
                rtol=0,
                atol=1e-13,
                at=step,
            )
            c.require(F[-1] < F[0], f"{where}: F_β ends at {F[-1]!r}, not below its start {F[0]!r}")
