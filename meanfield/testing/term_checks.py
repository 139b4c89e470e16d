"""The contract check of an energy term: :func:`check_term`.

Whether a user's :class:`~meanfield.energy.Term` keeps the contract the particle dynamics and
the grid solver rely on (a finite value per replica, the autograd gradient, symmetry in the
particles, the particle force as the gradient of the first variation, the first variation as
the derivative on measures, translation invariance of a pair term, float32); the checks and
their tolerances are listed in :func:`check_term`.
"""

from __future__ import annotations

import torch

from .._validation import check_int
from ..domains import Box
from ..energy import TERM_KINDS, Energy, Term
from ..errors import InputTypeError
from ..kernels import PairKernel
from ._runner import _F64, CheckRunner, _vec

__all__ = ["check_term"]


def _first_variation_slope(E: Energy, omega: torch.Tensor, with_own: bool) -> torch.Tensor:
    """∇_x δE/δμ[μ](x) at x = ω_i, for each particle i, by central differences (h = 1e-5),
    with μ = μ_N (mass 1/N at each particle), or μ_N less the atom at ω_i."""
    n, p = omega.shape
    h, eye = 1e-5, torch.eye(p, dtype=omega.dtype)
    out = torch.empty_like(omega)
    for i in range(n):
        keep = torch.ones(n, dtype=torch.bool) if with_own else torch.arange(n) != i
        weights = torch.full((int(keep.sum()),), 1.0 / n, dtype=omega.dtype)
        fv = E.first_variation(
            torch.cat([omega[i] + h * eye, omega[i] - h * eye]), omega[keep], weights
        )
        out[i] = (fv[:p] - fv[p:]) / (2 * h)
    return out


def _particles(p: int, shape: tuple = (), n: int = 6, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return 0.8 * torch.randn(*shape, n, p, generator=g, dtype=_F64)


def check_term(term: Term, dim: int, *, radius: float = 3.0) -> None:
    r"""Check that an energy term keeps the contract of :class:`~meanfield.energy.Term`.

    The term is bound inside an :class:`~meanfield.energy.Energy` on the box [−R, R]^p
    (a bound copy: ``term`` itself is left unbound), and evaluated at N = 6 fixed particles
    (float64 unless stated; the particles are 0.8 × standard normal draws, seeded).  With
    H_N(Ω) = E(μ_N) the finite-N value and δE/δμ the first variation, the checks are:

    ``kind``
        ``term.kind`` is one of :data:`~meanfield.energy.TERM_KINDS`; a ``"pair"`` term's
        :meth:`~meanfield.energy.Term.pair_kernel` gives (PairKernel, λ).
    ``value``
        H_N is finite, one value per replica (Ω of shape (N, p) and (3, N, p)).
    ``gradient``
        ``grad`` = ∇_Ω H_N by autograd (single and replicas); ``value_and_grad`` = both.
    ``permutation``
        permuting the particles leaves H_N and permutes the gradient.
    ``force``
        the particle force is the gradient of the first variation [1]_:
        N ∇_{ω_i} H_N = ∇_x δE/δμ[μ](x) at x = ω_i (central differences), with μ = μ_N for a
        one-body term, μ_N less the atom at ω_i (the others keep mass 1/N) for a pair term,
        whose pair sums leave the diagonal out, and either of the two for a measure term
        (H_N = E(μ_N) with or without its i = i' terms).
    ``first variation``
        a one-body or measure term: d/dε E(μ + εν) = ∫ δE/δμ dν along zero-mass ν, i.e. the
        autograd gradient of ``measure_value(points, w)`` in the weights w equals the first
        variation at the atoms up to a constant; a one-body H_N is the mean of δE/δμ over the
        particles.  A pair term: δE/δμ(x) = 2λ Σ_k w_k k(x − p_k).
    ``translation``
        a pair term: H_N(Ω + c) = H_N(Ω), its gradient likewise, and
        H_N = (λ/N²) Σ_{i≠j} k(ω_i − ω_j).
    ``float32``
        an energy with ``dtype=torch.float32`` computes value and gradient in float32, within
        float32 round-off of float64.

    Parameters
    ----------
    term : Term
        The term to check (an instance).
    dim : int
        Particle dimension p ≥ 1 the term acts on (for a data term: what its feature map
        gives for the data).
    radius : float, default 3
        Half-width R > 0 of the box domain.

    Returns
    -------
    None
        When every check holds.

    Raises
    ------
    AssertionError
        A check fails; the message names the term, the check, the particle or point and the
        observed and expected numbers.
    meanfield.errors.InputTypeError
        ``term`` is not a Term instance.
    meanfield.errors.InputError
        ``dim`` not an integer ≥ 1, ``radius`` not positive.

    See Also
    --------
    meanfield.testing.kernel_checks.check_kernel : the kernel of a pair term.
    meanfield.testing.scheme_checks.check_scheme : the contract of a PDE scheme.
    meanfield.energy.CallablePotential : a potential from a function V.

    Notes
    -----
    Tolerances are float64 round-off: 1e-10 relative to the largest gradient entry for the
    autograd gradient and the first variation in the weights, 1e-12 for values and
    reordered sums, and 1e-4 relative between float32 and float64 (sums of a few hundred
    terms of ε₃₂ = 1.2e-7).  The force check differentiates the first variation by central
    differences with step h = 1e-5: truncation h² f'''/6 and round-off ε / h, both below
    1e-6 relative for the fixed particles (closest pair 0.25 apart) of smooth and of
    log-singular kernels; 1e-6 relative to the largest force (plus 1e-6 of each entry) is
    allowed, well below the factor-2 errors it exists to catch.

    References
    ----------
    .. [1] L. Chizat, F. Bach, "On the global convergence of gradient descent for
       over-parameterized models using optimal transport", NeurIPS 2018: the first variation
       of an energy on measures and the particle gradient it drives.

    Examples
    --------
    >>> import torch
    >>> from meanfield.energy import PairInteraction, Potential
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.testing import check_term
    >>> check_term(PairInteraction(Riesz(0.0), lam=0.5), dim=2)
    >>> class Quartic(Potential):  # V(ω) = |ω|⁴/4, ∇V = |ω|² ω
    ...     def V(self, omega):
    ...         return (omega**2).sum(-1) ** 2 / 4
    ...     def gradV(self, omega):
    ...         return (omega**2).sum(-1, keepdim=True) * omega
    >>> check_term(Quartic(), dim=3)

    A gradient that is twice the truth fails the gradient check:

    >>> class WrongGradient(Quartic):
    ...     def gradV(self, omega):
    ...         return 2 * (omega**2).sum(-1, keepdim=True) * omega
    >>> try:
    ...     check_term(WrongGradient(), dim=3)
    ... except AssertionError as err:
    ...     print(str(err).split(" failed ")[1].split(":")[0])
    the 'gradient' check
    """
    if not isinstance(term, Term):
        raise InputTypeError(
            f"term must be a meanfield.energy.Term instance, got {type(term).__name__}"
        )
    p = check_int("dim", dim, minimum=1)
    c = CheckRunner("check_term", term)
    with c.check("kind"):
        c.require(term.kind in TERM_KINDS, f"kind {term.kind!r} is not one of {TERM_KINDS}")
        E = Energy([term], Box(p, radius))
        E32 = Energy([term], Box(p, radius), dtype=torch.float32)
        t = E.terms[0]  # the bound copy
        if t.kind == "pair":
            kernel, lam = t.pair_kernel()
            c.require(
                isinstance(kernel, PairKernel) and isinstance(lam, (int, float)),
                f"pair_kernel() gave {(kernel, lam)!r}, not (PairKernel, float)",
            )

    at_particle = lambda i: f"particle {list(i[:-1])}, coordinate {i[-1]}"  # noqa: E731
    for shape in ((), (3,)):
        omega = _particles(p, shape)
        with c.check("value"):
            value = E.value(omega)
            c.require(
                value.shape == shape,
                f"H_N of particles of shape {tuple(omega.shape)} has shape "
                f"{tuple(value.shape)}, expected {shape} (one value per replica)",
            )
            c.require(bool(torch.isfinite(value).all()), f"H_N = {_vec(value)} is not finite")
        with c.check("gradient"):
            w = omega.clone().requires_grad_(True)
            with torch.enable_grad():
                (auto,) = torch.autograd.grad(E.value(w).sum(), w)
            grad = E.grad(omega)
            scale = float(auto.abs().max())
            c.compare(
                "grad(Ω) vs ∇H_N by autograd",
                grad,
                auto,
                rtol=1e-10,
                atol=1e-10 * scale,
                at=at_particle,
            )
            v2, g2 = E.value_and_grad(omega)
            c.compare("value_and_grad(Ω)[0] vs value(Ω)", v2, value, rtol=1e-12, atol=1e-14)
            c.compare(
                "value_and_grad(Ω)[1] vs grad(Ω)",
                g2,
                grad,
                rtol=1e-10,
                atol=1e-12 * scale,
                at=at_particle,
            )

    omega = _particles(p, (2,))
    with c.check("permutation"):
        perm = torch.tensor([3, 0, 5, 1, 4, 2])
        c.compare(
            "H_N(permuted Ω) vs H_N(Ω)",
            E.value(omega[:, perm]),
            E.value(omega),
            rtol=1e-12,
            atol=1e-14,
        )
        c.compare(
            "∇H_N(permuted Ω) vs permuted ∇H_N(Ω)",
            E.grad(omega[:, perm]),
            E.grad(omega)[:, perm],
            rtol=1e-10,
            atol=1e-13,
            at=at_particle,
        )

    omega = _particles(p)
    n = omega.shape[0]
    with c.check("force"):
        force = n * E.grad(omega)
        scale = float(force.abs().max())
        # which measures the force may see: a pair sum leaves the diagonal out (and a singular
        # kernel has no value there); a one-body δE/δμ ignores the measure; a measure term
        # may do either (the risk alignment leaves its i = i' terms out, the normalised
        # alignment, a ratio, keeps them), so it passes with one of the two
        own = {"pair": (False,), "one-body": (True,)}.get(t.kind, (False, True))
        failures = []
        for with_own in own:
            try:
                c.compare(
                    "N ∇_{ω_i} H_N vs ∇_x δE/δμ[μ](ω_i) by central differences, μ = μ_N"
                    + ("" if with_own else " without the atom at ω_i"),
                    force,
                    _first_variation_slope(E, omega, with_own),
                    rtol=1e-6,
                    atol=1e-6 * scale,
                    at=at_particle,
                )
                break
            except AssertionError as err:
                failures.append(str(err))
        else:
            raise AssertionError("; and ".join(failures))

    with c.check("first variation"):
        if t.kind == "pair":
            at = _particles(p, n=4, seed=3) + 0.05
            wts = torch.full((n,), 1.0 / n, dtype=_F64)
            c.compare(
                "δE/δμ(x) vs 2λ Σ_k w_k k(x − p_k)",
                E.first_variation(at, omega, wts),
                2 * lam * (wts * kernel(at[:, None] - omega[None])).sum(-1),
                rtol=1e-12,
                atol=1e-13,
                at=lambda i: f"x = {_vec(at[i[0]])}",
            )
        else:
            points = _particles(p, n=9, seed=5)
            wts = torch.rand(9, generator=torch.Generator().manual_seed(6), dtype=_F64) + 0.5
            wts = (wts / wts.sum()).requires_grad_(True)
            with torch.enable_grad():
                (dw,) = torch.autograd.grad(t.measure_value(points, wts), wts)
            fv = E.first_variation(points, points, wts.detach())
            c.require(
                fv.shape == (9,) and bool(torch.isfinite(fv).all()),
                f"δE/δμ at 9 atoms is {_vec(fv)} (shape "
                f"{tuple(fv.shape)}): expected 9 finite values",
            )
            scale = float(dw.abs().max()) + 1e-300
            c.compare(
                "δE/δμ at the atoms vs d measure_value / d weights (both centred)",
                fv - fv.mean(),
                dw - dw.mean(),
                rtol=1e-10,
                atol=1e-10 * scale,
                at=lambda i: f"atom {_vec(points[i[0]])}",
            )
            if t.kind == "one-body":
                c.compare(
                    "H_N vs the mean of δE/δμ over particles",
                    E.value(points),
                    E.first_variation(points, points, wts.detach()).mean(),
                    rtol=1e-12,
                    atol=1e-14,
                )

    if t.kind == "pair":
        with c.check("translation"):
            shift = torch.linspace(0.3, -0.2, p, dtype=_F64)
            c.compare(
                "H_N(Ω + c) vs H_N(Ω)",
                E.value(omega + shift),
                E.value(omega),
                rtol=1e-10,
                atol=1e-12,
            )
            c.compare(
                "∇H_N(Ω + c) vs ∇H_N(Ω)",
                E.grad(omega + shift),
                E.grad(omega),
                rtol=1e-9,
                atol=1e-11,
                at=at_particle,
            )
            off = ~torch.eye(n, dtype=torch.bool)
            direct = lam / n**2 * kernel(omega[:, None] - omega[None])[off].sum()
            c.compare(
                "H_N vs (λ/N²) Σ_{i≠j} k(ω_i − ω_j)", E.value(omega), direct, rtol=1e-12, atol=1e-14
            )

    omega = _particles(p, (2,))
    with c.check("float32"):
        v32, g32 = E32.value(omega.float()), E32.grad(omega.float())
        c.require(
            v32.dtype == g32.dtype == torch.float32,
            f"a float32 energy gave value {v32.dtype}, gradient {g32.dtype}",
        )
        v64, g64 = E.value(omega), E.grad(omega)
        vs, gs = float(v64.abs().max()) + 1e-12, float(g64.abs().max()) + 1e-12
        c.compare("H_N in float32 vs float64", v32, v64, rtol=1e-4, atol=1e-4 * vs)
        c.compare("∇H_N in float32 vs float64", g32, g64, rtol=1e-4, atol=1e-4 * gs, at=at_particle)
