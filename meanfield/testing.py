r"""Public contract checks for kernels, energy terms and PDE schemes.

A user's pair kernel (:class:`~meanfield.kernels.PairKernel`), energy term
(:class:`~meanfield.energy.Term`) or flux scheme (:class:`~meanfield.pde.flux.Scheme`) goes
everywhere a built-in goes; these checks say whether it keeps the contract the package relies
on, as scikit-learn's ``check_estimator`` does for estimators [1]_.  The package's own test suite
(``tests/test_common.py``) runs the same checks on every built-in, so one implementation
serves both.

* :func:`check_kernel`: k depends on |z| only; κ' is the derivative of κ; the gradient is
  the autograd gradient of the value and its central finite difference; float32 in, float32
  out; numpy and torch agree (the grid solver passes numpy); the in-place gradient
  coefficient is the plain one; coincident points get a finite (for a singular kernel, the
  zero) gradient; ``describe()`` is plain data that rebuilds a built-in; bad constructor
  arguments raise a named error.
* :func:`check_term`: the value is finite, one per replica; ``grad`` is the autograd gradient
  of ``value``; H_N is symmetric in the particles; the particle force is the gradient of the
  first variation, N ∇_{ω_i} H_N = ∇ δE/δμ[μ_N](ω_i); the first variation is the derivative
  of the energy on measures; a pair term is translation invariant and the pair sum of its
  kernel; a float32 energy computes in float32, close to float64.
* :func:`check_scheme`: over a few steps of a 1D and a 2D problem, mass is conserved, the
  density stays nonnegative and the free energy does not increase (the structure of the
  finite-volume schemes of [2]_).

Each check raises :class:`AssertionError` naming the object, the check, the input and the
observed against the expected numbers; it returns None when everything holds.  Tolerances
are round-off bounds of float64 (float32 where stated), derived in each function's Notes.
Every random input is drawn from a fixed seed, so a check gives the same verdict every time.

References
----------
.. [1] F. Pedregosa et al., "Scikit-learn: machine learning in Python", JMLR 12 (2011);
   ``sklearn.utils.estimator_checks.check_estimator``.
.. [2] J. A. Carrillo, A. Chertock, Y. Huang, "A finite-volume method for nonlinear
   nonlocal equations with a gradient flow structure", Commun. Comput. Phys. 17 (2015).

Examples
--------
>>> import torch
>>> from meanfield.kernels import PairKernel
>>> from meanfield.testing import check_kernel
>>> class Kink(PairKernel):  # k(z) = |z|²/2 − |z|; κ' by autograd, singular at 0
...     def kappa(self, u):
...         return u / 2 - u**0.5
>>> check_kernel(Kink())  # passes: returns None
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import torch

from ._validation import check_int
from .domains import Box
from .energy import TERM_KINDS, Energy, PairInteraction, QuadraticPotential, Term
from .errors import InputError, InputTypeError
from .kernels import KERNEL_NAMES, Gaussian, PairKernel, make_kernel
from .pde import Density, FreeEnergyTracker, Grid, MassTracker, McKeanVlasov
from .pde.flux import SCHEMES, Scheme

__all__ = ["check_kernel", "check_scheme", "check_term"]

_F64 = torch.float64


# ------------------------------------------------------------------------------- reporting
@contextlib.contextmanager
def _check(function: str, obj, name: str):
    """Run one named check: an exception other than AssertionError raised inside (a kernel
    that cannot take numpy, a term whose value autograd cannot differentiate) becomes an
    AssertionError naming the check, the original chained as its cause."""
    try:
        yield
    except AssertionError:
        raise
    except Exception as err:  # noqa: BLE001 (any failure of user code is a failed check)
        raise AssertionError(
            f"{function}({obj!r}) failed the {name!r} check: it raised {type(err).__name__}: {err}"
        ) from err


def _fail(function: str, obj, name: str, detail: str):
    raise AssertionError(f"{function}({obj!r}) failed the {name!r} check: {detail}")


def _require(ok: bool, function: str, obj, name: str, detail: str) -> None:
    if not ok:
        _fail(function, obj, name, detail)


def _as_f64(x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().to(_F64)
    return torch.as_tensor(np.asarray(x, dtype=float))


def _compare(
    function: str,
    obj,
    name: str,
    what: str,
    observed,
    expected,
    *,
    rtol: float,
    atol: float,
    at: Callable[[tuple], str] | None = None,
) -> None:
    """Fail the check ``name`` unless |observed − expected| ≤ atol + rtol |expected| entrywise
    (NaN anywhere fails); the message gives the worst entry, its input (``at(index)``), both
    numbers, the difference against the tolerance and how many entries are outside."""
    obs, exp = _as_f64(observed), _as_f64(expected)
    if obs.shape != exp.shape:
        _fail(function, obj, name, f"{what}: shape {tuple(obs.shape)}, expected {tuple(exp.shape)}")
    if obs.numel() == 0:
        return
    err = (obs - exp).abs()
    allowed = atol + rtol * exp.abs()
    excess = err - allowed
    # NaN anywhere, or an infinity that does not match, is an infinite excess (inf − inf and
    # NaN comparisons would otherwise pass); equal entries, infinities included, agree
    excess = torch.where(torch.isfinite(excess), excess, math.inf)
    excess = torch.where(obs == exp, -math.inf, excess)
    bad = excess > 0
    if not bool(bad.any()):
        return
    flat = int(torch.argmax(torch.where(bad, excess, -math.inf)))
    index = tuple(int(i) for i in np.unravel_index(flat, tuple(obs.shape)))
    where = at(index) if at is not None else f"entry {list(index)}"
    _fail(
        function,
        obj,
        name,
        f"{what}: at {where}: observed {float(obs[index]):.17g}, expected "
        f"{float(exp[index]):.17g} (|difference| {float(err[index]):.3g} > tolerance "
        f"{float(allowed[index]):.3g}; {int(bad.sum())} of {obs.numel()} entries outside)",
    )


def _vec(x: torch.Tensor) -> str:
    return "[" + ", ".join(f"{float(v):.6g}" for v in x.reshape(-1)) + "]"


# ---------------------------------------------------------------------------------- kernels
def _points(p: int, m: int = 20, seed: int = 0) -> torch.Tensor:
    """m nonzero points in R^p, float64, |z| spread over [0.1, 3]: short range (where a
    singular kernel is steep) to long range."""
    z = torch.randn(m, p, generator=torch.Generator().manual_seed(seed), dtype=_F64)
    return z / z.norm(dim=-1, keepdim=True) * torch.linspace(0.1, 3.0, m, dtype=_F64)[:, None]


def check_kernel(
    kernel: PairKernel,
    *,
    dims: Iterable[int] = (1, 2, 3),
    bad_parameters: Iterable[Mapping] = (),
) -> None:
    r"""Check that a pair kernel keeps the contract of :class:`~meanfield.kernels.PairKernel`.

    One call runs every check, as scikit-learn's ``check_estimator`` does for an
    estimator [1]_.

    With u = |z|² + ε², k(z) = κ(u) and ∇k(z) = 2κ'(u) z.  On 20 fixed points z with
    |z| ∈ [0.1, 3] in each dimension of ``dims`` (float64 unless stated), the checks are:

    ``radial``
        k(Qz) = k(z) for an orthogonal Q, k(−z) = k(z) exactly, ``radial(|z|)`` = k(z).
    ``numpy``
        ``value_sq`` and ``gradient`` accept numpy arrays, return numpy, and agree with torch
        (the grid solver, :func:`~meanfield.pde.stationary.gibbs_state` and
        :meth:`~meanfield.kernels.PairKernel.radial` pass numpy).
    ``dkappa``
        κ'(u) = dκ/du by autograd (the derivative check: a κ' given by hand must be the
        derivative of κ).
    ``gradient``
        ``gradient(z)`` = ∇ k(z) by autograd, and = the central finite difference of
        ``value_sq`` with step 1e-6.
    ``float32``
        float32 in gives float32 out (value, gradient, coefficient), within float32
        round-off of float64.
    ``in-place``
        ``grad_coeff_sq_(r2)`` (the pair sums' hot loop) = ``grad_coeff_sq(r2)``.
    ``coincident points``
        at z = 0 the gradient is finite, and 0 (the symmetric subgradient) for a singular
        kernel (:attr:`~meanfield.kernels.PairKernel.is_singular`).
    ``describe``
        plain data (int, float, str); a kernel that ``describe()`` names by a built-in name is
        rebuilt with the same values by :func:`~meanfield.kernels.make_kernel`.
    ``bad parameters``
        ``type(kernel)(**kwargs)`` raises :class:`~meanfield.errors.InputError` or
        :class:`~meanfield.errors.InputTypeError` for each mapping of ``bad_parameters``.

    Parameters
    ----------
    kernel : PairKernel
        The kernel to check (an instance).
    dims : iterable of int, default (1, 2, 3)
        Dimensions p ≥ 1 of the points z.
    bad_parameters : iterable of mapping, default ()
        Constructor keyword arguments of ``type(kernel)`` that must be refused by name.

    Returns
    -------
    None
        When every check holds.

    Raises
    ------
    AssertionError
        A check fails; the message names the kernel, the check, the input (the point z or u)
        and the observed and expected numbers.
    meanfield.errors.InputTypeError
        ``kernel`` is not a PairKernel instance; ``bad_parameters`` not mappings.
    meanfield.errors.InputError
        A dimension in ``dims`` below 1, or ``dims`` empty.

    References
    ----------
    .. [1] F. Pedregosa et al., "Scikit-learn: machine learning in Python", JMLR 12 (2011):
       ``sklearn.utils.estimator_checks.check_estimator``, the model of these checks.

    See Also
    --------
    check_term : the contract of an energy term (a pair term checks its kernel in use).
    meanfield.kernels.CallableKernel : a kernel from a function κ.

    Notes
    -----
    Tolerances are float64 round-off: 1e-12 relative for the rotation and autograd checks,
    1e-10 for κ' (a hand-written κ' and autograd's may round differently, the difference being
    a few ulp times the condition of κ' over |z| ≥ 0.1), 1e-14 between numpy and torch
    (the same operations), 1e-7 for the finite difference (truncation O(h²) ≈ 1e-12 times the
    third derivative, ≤ 1e3 for |z| ≥ 0.1, plus round-off 1e-16 / h), and 1e-5 relative
    (1e-6 absolute) between float32 and float64.

    Examples
    --------
    A kernel given by κ only passes (κ' by autograd; is_singular is derived):

    >>> import torch
    >>> from meanfield.kernels import PairKernel, Riesz
    >>> from meanfield.testing import check_kernel
    >>> class Kink(PairKernel):  # k(z) = |z|²/2 − |z|
    ...     def kappa(self, u):
    ...         return u / 2 - u**0.5
    >>> check_kernel(Kink())
    >>> check_kernel(Riesz(0.5), bad_parameters=[{"s": float("nan")}])

    A κ' that is twice the truth fails the derivative check:

    >>> class WrongDerivative(Kink):
    ...     def dkappa(self, u):
    ...         return 2 * (0.5 - 0.5 * u**-0.5)
    >>> try:
    ...     check_kernel(WrongDerivative())
    ... except AssertionError as err:
    ...     print(str(err).split(" failed ")[1].split(":")[0])
    the 'dkappa' check
    """
    if not isinstance(kernel, PairKernel):
        raise InputTypeError(
            "kernel must be a meanfield.kernels.PairKernel instance (a subclass giving kappa, "
            f"or a CallableKernel), got {type(kernel).__name__}"
        )
    dims = [check_int("dims", d, minimum=1) for d in dims]
    if not dims:
        raise InputError("dims must name at least one dimension p >= 1, got none")
    bad_parameters = list(bad_parameters)
    for kw in bad_parameters:
        if not isinstance(kw, Mapping):
            raise InputTypeError(
                f"bad_parameters must be mappings of constructor arguments, got {kw!r}"
            )
    fn, k = "check_kernel", kernel

    with _check(fn, k, "numpy"):
        r2 = (_points(2) ** 2).sum(-1)
        out = k.value_sq(r2.numpy())
        _require(
            isinstance(out, np.ndarray),
            fn,
            k,
            "numpy",
            f"value_sq of a numpy array returned {type(out).__name__}, not a numpy array",
        )
    for p in dims:
        z = _points(p)
        zs = z.norm(dim=-1)
        at = lambda i, z=z: f"z = {_vec(z[i[0]])} (p = {z.shape[-1]})"  # noqa: E731
        with _check(fn, k, "radial"):
            g = torch.Generator().manual_seed(1)
            q, _ = torch.linalg.qr(torch.randn(p, p, generator=g, dtype=_F64))
            value = k(z)
            _require(
                value.shape == z.shape[:-1] and value.dtype == _F64,
                fn,
                k,
                "radial",
                f"k(z) of points z of shape {tuple(z.shape)} (float64) has shape "
                f"{tuple(value.shape)} and dtype {value.dtype}: expected {tuple(z.shape[:-1])}",
            )
            _compare(
                fn,
                k,
                "radial",
                "k(Qz) vs k(z)",
                k(z @ q.T),
                value,
                rtol=1e-12,
                atol=1e-12,
                at=at,
            )
            _compare(fn, k, "radial", "k(−z) vs k(z)", k(-z), value, rtol=0, atol=0, at=at)
            _compare(
                fn,
                k,
                "radial",
                "radial(|z|) vs k(z)",
                k.radial(zs.numpy()),
                value,
                rtol=1e-12,
                atol=0,
                at=at,
            )
        with _check(fn, k, "numpy"):
            rr = zs**2
            _compare(
                fn,
                k,
                "numpy",
                "value_sq(numpy) vs value_sq(torch)",
                k.value_sq(rr.numpy()),
                k.value_sq(rr),
                rtol=1e-14,
                atol=0,
                at=at,
            )
            g_np = k.gradient(z.numpy())
            _require(
                isinstance(g_np, np.ndarray),
                fn,
                k,
                "numpy",
                f"gradient of a numpy array returned {type(g_np).__name__}",
            )
            _compare(
                fn,
                k,
                "numpy",
                "gradient(numpy) vs gradient(torch)",
                g_np,
                k.gradient(z),
                rtol=1e-14,
                atol=0,
                at=at,
            )
        with _check(fn, k, "dkappa"):
            u = (rr + k.softening**2).clone().requires_grad_(True)
            with torch.enable_grad():
                (auto,) = torch.autograd.grad(torch.as_tensor(k.kappa(u)).sum(), u)
            u_in = u.detach()
            at_u = lambda i, u_in=u_in: f"u = {float(u_in[i]):.6g}"  # noqa: E731
            scale = float(auto.abs().max())
            _compare(
                fn,
                k,
                "dkappa",
                "κ'(u) vs dκ/du by autograd",
                k.dkappa(u_in),
                auto,
                rtol=1e-10,
                atol=1e-12 * scale,
                at=at_u,
            )
        with _check(fn, k, "gradient"):
            zg = z.clone().requires_grad_(True)
            with torch.enable_grad():
                (auto,) = torch.autograd.grad(k(zg).sum(), zg)
            g = k.gradient(z)
            _compare(
                fn,
                k,
                "gradient",
                "gradient(z) vs ∇k(z) by autograd",
                g,
                auto,
                rtol=1e-12,
                atol=1e-12,
                at=at,
            )
            h, zn = 1e-6, z.numpy()
            fd = np.stack(
                [
                    (
                        k.value_sq(((zn + h * e) ** 2).sum(-1))
                        - k.value_sq(((zn - h * e) ** 2).sum(-1))
                    )
                    / (2 * h)
                    for e in np.eye(p)
                ],
                axis=-1,
            )
            _compare(
                fn,
                k,
                "gradient",
                "gradient(z) vs central difference of k (h = 1e-6)",
                g,
                fd,
                rtol=1e-7,
                atol=1e-7,
                at=at,
            )
        with _check(fn, k, "float32"):
            z32, r32 = z.float(), rr.float()
            for what, out in (
                ("k(z)", k(z32)),
                ("gradient(z)", k.gradient(z32)),
                ("grad_coeff_sq(r²)", k.grad_coeff_sq(r32)),
            ):
                _require(
                    out.dtype == torch.float32,
                    fn,
                    k,
                    "float32",
                    f"{what} of float32 input is {out.dtype}, not torch.float32",
                )
            _compare(
                fn,
                k,
                "float32",
                "k(z) in float32 vs float64",
                k(z32),
                value,
                rtol=1e-5,
                atol=1e-6,
                at=at,
            )
        with _check(fn, k, "in-place"):
            _compare(
                fn,
                k,
                "in-place",
                "grad_coeff_sq_(r²) vs grad_coeff_sq(r²)",
                k.grad_coeff_sq_(rr.clone()),
                k.grad_coeff_sq(rr),
                rtol=1e-14,
                atol=0,
                at=at,
            )
    with _check(fn, k, "coincident points"):
        zero = torch.zeros(3, max(dims), dtype=_F64)
        g0 = k.gradient(zero)
        _require(
            bool(torch.isfinite(g0).all()),
            fn,
            k,
            "coincident points",
            f"gradient at z = 0 is {_vec(g0[0])}, not finite",
        )
        if k.is_singular:
            _compare(
                fn,
                k,
                "coincident points",
                "gradient at z = 0 of a singular kernel vs the zero subgradient",
                g0,
                torch.zeros_like(g0),
                rtol=0,
                atol=0,
            )
            _compare(
                fn,
                k,
                "coincident points",
                "grad_coeff_sq(0) (numpy) of a singular kernel vs 0",
                k.grad_coeff_sq(np.zeros(2)),
                np.zeros(2),
                rtol=0,
                atol=0,
            )
    with _check(fn, k, "describe"):
        d = k.describe()
        _require(
            isinstance(d, dict) and "kernel" in d,
            fn,
            k,
            "describe",
            f"describe() gave {d!r}, not a dict with the key 'kernel'",
        )
        not_plain = {key: v for key, v in d.items() if not isinstance(v, (int, float, str))}
        _require(
            not not_plain,
            fn,
            k,
            "describe",
            f"describe() holds values that are not int, float or str: {not_plain!r}",
        )
        if d["kernel"] in KERNEL_NAMES:  # saved attributes naming a built-in must rebuild it
            twin = make_kernel(d["kernel"], **{key: v for key, v in d.items() if key != "kernel"})
            z = _points(2)
            _compare(
                fn,
                k,
                "describe",
                f"make_kernel(**{d!r}) vs the kernel",
                twin(z),
                k(z),
                rtol=0,
                atol=0,
                at=lambda i: f"z = {_vec(z[i[0]])}",
            )
    for kw in bad_parameters:
        try:
            type(k)(**kw)
        except (InputError, InputTypeError):
            continue
        except Exception as err:  # noqa: BLE001
            _fail(
                fn,
                k,
                "bad parameters",
                f"{type(k).__name__}(**{kw!r}) raised {type(err).__name__}: {err}, not "
                "meanfield.errors.InputError or InputTypeError",
            )
        _fail(fn, k, "bad parameters", f"{type(k).__name__}(**{kw!r}) raised nothing")


# ------------------------------------------------------------------------------------ terms
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

    References
    ----------
    .. [1] L. Chizat, F. Bach, "On the global convergence of gradient descent for
       over-parameterized models using optimal transport", NeurIPS 2018: the first variation
       of an energy on measures and the particle gradient it drives.

    See Also
    --------
    check_kernel : the kernel of a pair term.
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
    fn, t0 = "check_term", term
    with _check(fn, t0, "kind"):
        _require(
            term.kind in TERM_KINDS,
            fn,
            t0,
            "kind",
            f"kind {term.kind!r} is not one of {TERM_KINDS}",
        )
        E = Energy([term], Box(p, radius))
        E32 = Energy([term], Box(p, radius), dtype=torch.float32)
        t = E.terms[0]  # the bound copy
        if t.kind == "pair":
            kernel, lam = t.pair_kernel()
            _require(
                isinstance(kernel, PairKernel) and isinstance(lam, (int, float)),
                fn,
                t0,
                "kind",
                f"pair_kernel() gave {(kernel, lam)!r}, not (PairKernel, float)",
            )

    at_particle = lambda i: f"particle {list(i[:-1])}, coordinate {i[-1]}"  # noqa: E731
    for shape in ((), (3,)):
        omega = _particles(p, shape)
        with _check(fn, t0, "value"):
            value = E.value(omega)
            _require(
                value.shape == shape,
                fn,
                t0,
                "value",
                f"H_N of particles of shape {tuple(omega.shape)} has shape "
                f"{tuple(value.shape)}, expected {shape} (one value per replica)",
            )
            _require(
                bool(torch.isfinite(value).all()),
                fn,
                t0,
                "value",
                f"H_N = {_vec(value)} is not finite",
            )
        with _check(fn, t0, "gradient"):
            w = omega.clone().requires_grad_(True)
            with torch.enable_grad():
                (auto,) = torch.autograd.grad(E.value(w).sum(), w)
            grad = E.grad(omega)
            scale = float(auto.abs().max())
            _compare(
                fn,
                t0,
                "gradient",
                "grad(Ω) vs ∇H_N by autograd",
                grad,
                auto,
                rtol=1e-10,
                atol=1e-10 * scale,
                at=at_particle,
            )
            v2, g2 = E.value_and_grad(omega)
            _compare(
                fn,
                t0,
                "gradient",
                "value_and_grad(Ω)[0] vs value(Ω)",
                v2,
                value,
                rtol=1e-12,
                atol=1e-14,
            )
            _compare(
                fn,
                t0,
                "gradient",
                "value_and_grad(Ω)[1] vs grad(Ω)",
                g2,
                grad,
                rtol=1e-10,
                atol=1e-12 * scale,
                at=at_particle,
            )

    omega = _particles(p, (2,))
    with _check(fn, t0, "permutation"):
        perm = torch.tensor([3, 0, 5, 1, 4, 2])
        _compare(
            fn,
            t0,
            "permutation",
            "H_N(permuted Ω) vs H_N(Ω)",
            E.value(omega[:, perm]),
            E.value(omega),
            rtol=1e-12,
            atol=1e-14,
        )
        _compare(
            fn,
            t0,
            "permutation",
            "∇H_N(permuted Ω) vs permuted ∇H_N(Ω)",
            E.grad(omega[:, perm]),
            E.grad(omega)[:, perm],
            rtol=1e-10,
            atol=1e-13,
            at=at_particle,
        )

    omega = _particles(p)
    n = omega.shape[0]
    with _check(fn, t0, "force"):
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
                _compare(
                    fn,
                    t0,
                    "force",
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

    with _check(fn, t0, "first variation"):
        if t.kind == "pair":
            at = _particles(p, n=4, seed=3) + 0.05
            wts = torch.full((n,), 1.0 / n, dtype=_F64)
            _compare(
                fn,
                t0,
                "first variation",
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
            _require(
                fv.shape == (9,) and bool(torch.isfinite(fv).all()),
                fn,
                t0,
                "first variation",
                f"δE/δμ at 9 atoms is {_vec(fv)} (shape "
                f"{tuple(fv.shape)}): expected 9 finite values",
            )
            scale = float(dw.abs().max()) + 1e-300
            _compare(
                fn,
                t0,
                "first variation",
                "δE/δμ at the atoms vs d measure_value / d weights (both centred)",
                fv - fv.mean(),
                dw - dw.mean(),
                rtol=1e-10,
                atol=1e-10 * scale,
                at=lambda i: f"atom {_vec(points[i[0]])}",
            )
            if t.kind == "one-body":
                _compare(
                    fn,
                    t0,
                    "first variation",
                    "H_N vs the mean of δE/δμ over particles",
                    E.value(points),
                    E.first_variation(points, points, wts.detach()).mean(),
                    rtol=1e-12,
                    atol=1e-14,
                )

    if t.kind == "pair":
        with _check(fn, t0, "translation"):
            shift = torch.linspace(0.3, -0.2, p, dtype=_F64)
            _compare(
                fn,
                t0,
                "translation",
                "H_N(Ω + c) vs H_N(Ω)",
                E.value(omega + shift),
                E.value(omega),
                rtol=1e-10,
                atol=1e-12,
            )
            _compare(
                fn,
                t0,
                "translation",
                "∇H_N(Ω + c) vs ∇H_N(Ω)",
                E.grad(omega + shift),
                E.grad(omega),
                rtol=1e-9,
                atol=1e-11,
                at=at_particle,
            )
            off = ~torch.eye(n, dtype=torch.bool)
            direct = lam / n**2 * kernel(omega[:, None] - omega[None])[off].sum()
            _compare(
                fn,
                t0,
                "translation",
                "H_N vs (λ/N²) Σ_{i≠j} k(ω_i − ω_j)",
                E.value(omega),
                direct,
                rtol=1e-12,
                atol=1e-14,
            )

    omega = _particles(p, (2,))
    with _check(fn, t0, "float32"):
        v32, g32 = E32.value(omega.float()), E32.grad(omega.float())
        _require(
            v32.dtype == g32.dtype == torch.float32,
            fn,
            t0,
            "float32",
            f"a float32 energy gave value {v32.dtype}, gradient {g32.dtype}",
        )
        v64, g64 = E.value(omega), E.grad(omega)
        vs, gs = float(v64.abs().max()) + 1e-12, float(g64.abs().max()) + 1e-12
        _compare(
            fn, t0, "float32", "H_N in float32 vs float64", v32, v64, rtol=1e-4, atol=1e-4 * vs
        )
        _compare(
            fn,
            t0,
            "float32",
            "∇H_N in float32 vs float64",
            g32,
            g64,
            rtol=1e-4,
            atol=1e-4 * gs,
            at=at_particle,
        )


# ---------------------------------------------------------------------------------- schemes
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
    (:class:`~meanfield.pde.McKeanVlasov` with ``scheme``).  The checks, at every step:

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
        A name of :data:`~meanfield.pde.flux.SCHEMES`, or a
        :class:`~meanfield.pde.flux.Scheme` instance (each problem binds its own copy).
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

    References
    ----------
    .. [1] J. A. Carrillo, A. Chertock, Y. Huang, "A finite-volume method for nonlinear
       nonlocal equations with a gradient flow structure", Commun. Comput. Phys. 17 (2015).

    See Also
    --------
    check_term : the contract of the energy terms that give the potential.
    meanfield.pde.flux.make_scheme : the built-in schemes by name.

    Examples
    --------
    >>> from meanfield.testing import check_scheme
    >>> check_scheme("sg")
    >>> from meanfield.pde.flux import make_scheme
    >>> check_scheme(make_scheme("upwind", order=1), problems=[(1, 16)])
    """
    if isinstance(scheme, str):
        if scheme not in SCHEMES:
            raise InputError(f"scheme must be one of {SCHEMES} or a Scheme, got {scheme!r}")
    elif not isinstance(scheme, Scheme):
        raise InputTypeError(
            "scheme must be a name of meanfield.pde.flux.SCHEMES or a "
            f"meanfield.pde.flux.Scheme instance, got {type(scheme).__name__}"
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
    fn, s = "check_scheme", scheme
    for p, cells in problems:
        where = f"p = {p}, {cells} cells per axis"
        with _check(fn, s, "solve"):
            dom = Box(p, 2.0)
            energy = Energy([QuadraticPotential(), PairInteraction(Gaussian(0.5), 0.5)], dom)
            grid = Grid(dom, cells)
            eq = McKeanVlasov(energy, grid, beta=2.0, scheme=scheme)
            rho0 = Density.gaussian(grid, 0.5, 0.4)
            mass, fe = MassTracker(0), FreeEnergyTracker(0)
            res = eq.solve(rho0, t_end, trackers=[mass, fe], dt_max=dt_max)
            _require(
                res.n_steps >= 5 and math.isclose(res.t, t_end, rel_tol=1e-9),
                fn,
                s,
                "solve",
                f"{where}: reached t = {res.t!r} in {res.n_steps} steps, expected "
                f"t = {t_end!r} in at least 5",
            )
        step = lambda i, where=where: f"{where}, record {i[0]}"  # noqa: E731
        m = np.asarray(mass.mass, dtype=float)
        _compare(
            fn,
            s,
            "mass",
            "mass vs the initial mass",
            m,
            np.full_like(m, rho0.mass),
            rtol=0,
            atol=1e-12,
            at=step,
        )
        low = np.asarray(mass.min_density, dtype=float)
        _compare(
            fn,
            s,
            "positivity",
            "min ρ vs 0 (clipped at 0)",
            low,
            np.maximum(low, 0.0),
            rtol=0,
            atol=0,
            at=step,
        )
        F = np.asarray(fe.records["free_energy"], dtype=float)
        _require(
            bool(np.isfinite(F).all()),
            fn,
            s,
            "free energy",
            f"{where}: F_β is not finite at every record: {F.tolist()}",
        )
        rise = np.diff(F)
        _compare(
            fn,
            s,
            "free energy",
            "F_β(ρ_{n+1}) − F_β(ρ_n) vs ≤ 0",
            rise,
            np.minimum(rise, 0.0),
            rtol=0,
            atol=1e-13,
            at=step,
        )
        _require(
            F[-1] < F[0],
            fn,
            s,
            "free energy",
            f"{where}: F_β ends at {F[-1]!r}, not below its start {F[0]!r}",
        )
