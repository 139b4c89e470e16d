"""The contract check of a pair kernel: :func:`check_kernel`.

Whether a user's :class:`~meanfield.kernels.PairKernel` keeps the contract the pair sums,
the grid solver and the saved attributes rely on (radial, κ' the derivative of κ, the
gradient that of the value, float32 and numpy in and out, coincident points, ``describe``,
named refusals); the checks and their tolerances are listed in :func:`check_kernel`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch

from .._validation import check_int
from ..errors import InputError, InputTypeError
from ..kernels import KERNEL_NAMES, PairKernel, make_kernel
from ._runner import _F64, CheckRunner, _vec

__all__ = ["check_kernel"]


def _points(p: int, m: int = 20, seed: int = 0) -> torch.Tensor:
    """m nonzero points in R^p, float64, |z| spread over [0.1, 3]: short range (where a
    singular kernel is steep) to long range."""
    z = torch.randn(m, p, generator=torch.Generator().manual_seed(seed), dtype=_F64)
    return z / z.norm(dim=-1, keepdim=True) * torch.linspace(0.1, 3.0, m, dtype=_F64)[:, None]


def check_kernel(
    kernel: PairKernel, *, dims: Iterable[int] = (1, 2, 3), bad_parameters: Iterable[Mapping] = ()
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

    See Also
    --------
    meanfield.testing.term_checks.check_term : the contract of an energy term (a pair term
        checks its kernel in use).
    meanfield.testing.scheme_checks.check_scheme : the contract of a PDE scheme.
    meanfield.kernels.CallableKernel : a kernel from a function κ.

    Notes
    -----
    Tolerances are float64 round-off: 1e-12 relative for the rotation and autograd checks,
    1e-10 for κ' (a hand-written κ' and autograd's may round differently, the difference being
    a few ulp times the condition of κ' over |z| ≥ 0.1), 1e-14 between numpy and torch
    (the same operations), 1e-7 for the finite difference (truncation O(h²) ≈ 1e-12 times the
    third derivative, ≤ 1e3 for |z| ≥ 0.1, plus round-off 1e-16 / h), and 1e-5 relative
    (1e-6 absolute) between float32 and float64.

    References
    ----------
    .. [1] F. Pedregosa et al., "Scikit-learn: machine learning in Python", JMLR 12 (2011):
       ``sklearn.utils.estimator_checks.check_estimator``, the model of these checks.

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
    c, k = CheckRunner("check_kernel", kernel), kernel

    with c.check("numpy"):
        r2 = (_points(2) ** 2).sum(-1)
        out = k.value_sq(r2.numpy())
        c.require(
            isinstance(out, np.ndarray),
            f"value_sq of a numpy array returned {type(out).__name__}, not a numpy array",
        )
    for p in dims:
        z = _points(p)
        zs = z.norm(dim=-1)
        at = lambda i, z=z: f"z = {_vec(z[i[0]])} (p = {z.shape[-1]})"  # noqa: E731
        with c.check("radial"):
            g = torch.Generator().manual_seed(1)
            q, _ = torch.linalg.qr(torch.randn(p, p, generator=g, dtype=_F64))
            value = k(z)
            c.require(
                value.shape == z.shape[:-1] and value.dtype == _F64,
                f"k(z) of points z of shape {tuple(z.shape)} (float64) has shape "
                f"{tuple(value.shape)} and dtype {value.dtype}: expected {tuple(z.shape[:-1])}",
            )
            c.compare("k(Qz) vs k(z)", k(z @ q.T), value, rtol=1e-12, atol=1e-12, at=at)
            c.compare("k(−z) vs k(z)", k(-z), value, rtol=0, atol=0, at=at)
            c.compare("radial(|z|) vs k(z)", k.radial(zs.numpy()), value, rtol=1e-12, atol=0, at=at)
        with c.check("numpy"):
            rr = zs**2
            c.compare(
                "value_sq(numpy) vs value_sq(torch)",
                k.value_sq(rr.numpy()),
                k.value_sq(rr),
                rtol=1e-14,
                atol=0,
                at=at,
            )
            g_np = k.gradient(z.numpy())
            c.require(
                isinstance(g_np, np.ndarray),
                f"gradient of a numpy array returned {type(g_np).__name__}",
            )
            c.compare(
                "gradient(numpy) vs gradient(torch)", g_np, k.gradient(z), rtol=1e-14, atol=0, at=at
            )
        with c.check("dkappa"):
            u = (rr + k.softening**2).clone().requires_grad_(True)
            with torch.enable_grad():
                (auto,) = torch.autograd.grad(torch.as_tensor(k.kappa(u)).sum(), u)
            u_in = u.detach()
            at_u = lambda i, u_in=u_in: f"u = {float(u_in[i]):.6g}"  # noqa: E731
            scale = float(auto.abs().max())
            c.compare(
                "κ'(u) vs dκ/du by autograd",
                k.dkappa(u_in),
                auto,
                rtol=1e-10,
                atol=1e-12 * scale,
                at=at_u,
            )
        with c.check("gradient"):
            zg = z.clone().requires_grad_(True)
            with torch.enable_grad():
                (auto,) = torch.autograd.grad(k(zg).sum(), zg)
            g = k.gradient(z)
            c.compare("gradient(z) vs ∇k(z) by autograd", g, auto, rtol=1e-12, atol=1e-12, at=at)
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
            c.compare(
                "gradient(z) vs central difference of k (h = 1e-6)",
                g,
                fd,
                rtol=1e-7,
                atol=1e-7,
                at=at,
            )
        with c.check("float32"):
            z32, r32 = z.float(), rr.float()
            for what, out in (
                ("k(z)", k(z32)),
                ("gradient(z)", k.gradient(z32)),
                ("grad_coeff_sq(r²)", k.grad_coeff_sq(r32)),
            ):
                c.require(
                    out.dtype == torch.float32,
                    f"{what} of float32 input is {out.dtype}, not torch.float32",
                )
            c.compare("k(z) in float32 vs float64", k(z32), value, rtol=1e-5, atol=1e-6, at=at)
        with c.check("in-place"):
            c.compare(
                "grad_coeff_sq_(r²) vs grad_coeff_sq(r²)",
                k.grad_coeff_sq_(rr.clone()),
                k.grad_coeff_sq(rr),
                rtol=1e-14,
                atol=0,
                at=at,
            )
    with c.check("coincident points"):
        zero = torch.zeros(3, max(dims), dtype=_F64)
        g0 = k.gradient(zero)
        c.require(bool(torch.isfinite(g0).all()), f"gradient at z = 0 is {_vec(g0[0])}, not finite")
        if k.is_singular:
            c.compare(
                "gradient at z = 0 of a singular kernel vs the zero subgradient",
                g0,
                torch.zeros_like(g0),
                rtol=0,
                atol=0,
            )
            c.compare(
                "grad_coeff_sq(0) (numpy) of a singular kernel vs 0",
                k.grad_coeff_sq(np.zeros(2)),
                np.zeros(2),
                rtol=0,
                atol=0,
            )
    with c.check("describe"):
        d = k.describe()
        c.require(
            isinstance(d, dict) and "kernel" in d,
            f"describe() gave {d!r}, not a dict with the key 'kernel'",
        )
        not_plain = {key: v for key, v in d.items() if not isinstance(v, (int, float, str))}
        c.require(
            not not_plain, f"describe() holds values that are not int, float or str: {not_plain!r}"
        )
        if d["kernel"] in KERNEL_NAMES:  # saved attributes naming a built-in must rebuild it
            twin = make_kernel(d["kernel"], **{key: v for key, v in d.items() if key != "kernel"})
            z = _points(2)
            c.compare(
                f"make_kernel(**{d!r}) vs the kernel",
                twin(z),
                k(z),
                rtol=0,
                atol=0,
                at=lambda i: f"z = {_vec(z[i[0]])}",
            )
    with c.check("bad parameters"):
        for kw in bad_parameters:
            try:
                type(k)(**kw)
            except (InputError, InputTypeError):
                continue
            except Exception as err:  # noqa: BLE001
                c.fail(
                    f"{type(k).__name__}(**{kw!r}) raised {type(err).__name__}: {err}, not "
                    "meanfield.errors.InputError or InputTypeError"
                )
            c.fail(f"{type(k).__name__}(**{kw!r}) raised nothing")
