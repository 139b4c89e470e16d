"""Conservative finite-volume fluxes for ∂_t ρ = ∇·(ρ ∇U[ρ]) + β⁻¹ Δρ with no-flux walls.

Every scheme here moves mass only across interior cell faces (the wall faces carry zero flux:
the no-flux condition), and splits each face flux into the part leaving the left cell and the
part leaving the right cell, both ≥ 0.  A forward-Euler step is then written as

    ρ_i ← (ρ_i − Δt out_i) + Δt in_i,

where out_i ≤ ρ_i / Δt under the time-step bound returned by ``stable_dt``; the bracket is a
product of ρ_i with a number in [0, 1] and ``in_i`` ≥ 0, so ρ stays ≥ 0 *in floating point*,
and the total mass changes only by round-off (each face flux is added once and subtracted
once).

A scheme is made with its options alone (``UpwindScheme(order=2)``, :func:`make_scheme`) and
bound once to a grid and an inverse temperature, :meth:`Scheme.bind` (as a py-pde solver's
``make_stepper`` fixes the grid of the state it will step); the bound scheme's methods take the
state (ρ, U) and the step, nothing else.  With D = β⁻¹:

``UpwindScheme`` (Carrillo, Chertock & Huang, Commun. Comput. Phys. 17, 2015)
    ξ = D log ρ + U,  face velocity u_{i+½} = −(ξ_{i+1} − ξ_i)/h, upwind flux
    F = u⁺ ρ^E_i + u⁻ ρ^W_{i+1} with ρ^{E,W} the (order 2) minmod-limited reconstruction, which
    lies in [0, 2ρ_i].  Semi-discrete free-energy dissipation: dF_h/dt = −Σ_faces h^p u F ≤ 0.
    Explicit; positivity needs Δt ≤ ρ_i/out_i, and, the diffusion being inside ξ, the
    linearised scheme is the explicit heat equation, so Δt ≤ 1/(2D Σ_a h_a⁻²) as well.

``ScharfetterGummel`` (Scharfetter & Gummel 1969; for Fokker–Planck the Chang–Cooper 1970 flux)
    J_{i+½} = (D/h) [B(a) ρ_i − B(−a) ρ_{i+1}],  a = β (U_{i+1} − U_i),  B(z) = z/(eᶻ − 1):
    exact for the face's 1D drift-diffusion with U linear across it.  Zero flux exactly at
    ρ ∝ exp(−βU), so the discrete Gibbs state is a steady state to round-off; the relative
    entropy to it never increases (a monotone Markov generator).  Explicit under
    Δt ≤ 1/max_i Σ_faces D B(±a)/h² (the positivity bound, which includes the parabolic one),
    or implicit Euler (an M-matrix solve, positive for every Δt: the option for stiff
    diffusion), with U lagged at the old time, where Δt only needs the drift's CFL bound.

Layout, one file per scheme family: :mod:`~meanfield.pde.schemes.base` (the protocol and the
face scatter), :mod:`~meanfield.pde.schemes.upwind`,
:mod:`~meanfield.pde.schemes.scharfetter_gummel` (with the implicit solves) and
:mod:`~meanfield.pde.schemes.mprk`; every public name is imported here, and :func:`make_scheme`
builds a scheme by its name in :data:`SCHEMES`.
"""

from __future__ import annotations

from ..._validation import check_choice
from .base import TINY, Scheme, scatter_faces
from .mprk import ScharfetterGummelMPRK
from .scharfetter_gummel import (
    ScharfetterGummel,
    bernoulli,
    generator_matrix,
    implicit_solve,
    solve_raw,
    sparse_factor,
)
from .upwind import UpwindScheme, minmod3, reconstruct

SCHEMES = ("upwind", "sg", "sg-implicit", "chang-cooper", "sg-mprk22", "sg-mprk22-split")


def make_scheme(name: str = "upwind", *, order: int = 2) -> Scheme:
    """Build a scheme by name: ``upwind`` (CCH, ``order`` 1 or 2), ``sg`` (explicit
    Scharfetter–Gummel), ``sg-implicit`` or its alias ``chang-cooper`` (implicit Euler,
    first order in time), ``sg-mprk22`` (implicit, second order in time, positive and
    conservative for every Δt: :class:`ScharfetterGummelMPRK`), ``sg-mprk22-split`` (the same
    with 2D/3D Strang splitting into tridiagonal lines: O(M) per step).

    Parameters
    ----------
    name : str
        One of ``SCHEMES``.
    order : {1, 2}
        Reconstruction order of the upwind scheme (ignored by the others).

    Returns
    -------
    Scheme

    See Also
    --------
    meanfield.pde.equation.McKeanVlasov : binds the scheme to its grid and β.
    meanfield.testing.check_scheme : the contract every scheme keeps, checked.

    References
    ----------
    - J. A. Carrillo, A. Chertock, Y. Huang, "A finite-volume method for nonlinear nonlocal
      equations with a gradient flow structure", Commun. Comput. Phys. 17 (2015) 233–258.
    - D. L. Scharfetter, H. K. Gummel, "Large-signal analysis of a silicon Read diode
      oscillator", IEEE Trans. Electron Devices 16 (1969) 64–77.

    Examples
    --------
    >>> from meanfield.pde.schemes import make_scheme
    >>> make_scheme("upwind", order=1).describe()
    {'scheme': 'upwind', 'order': 1, 'theta': 2.0}
    >>> make_scheme("chang-cooper").name, make_scheme("sg-mprk22").time_order
    ('sg-implicit', 2)
    """
    check_choice("scheme", name, SCHEMES)
    if name == "upwind":
        return UpwindScheme(order=order)
    if name.startswith("sg-mprk22"):
        return ScharfetterGummelMPRK(split=name.endswith("split"))
    return ScharfetterGummel(implicit=name != "sg")


__all__ = [
    "SCHEMES",
    "Scheme",
    "ScharfetterGummel",
    "ScharfetterGummelMPRK",
    "TINY",
    "UpwindScheme",
    "bernoulli",
    "generator_matrix",
    "implicit_solve",
    "make_scheme",
    "minmod3",
    "reconstruct",
    "scatter_faces",
    "solve_raw",
    "sparse_factor",
]
