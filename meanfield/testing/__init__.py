r"""Public contract checks for kernels, energy terms and PDE schemes.

A user's pair kernel (:class:`~meanfield.kernels.PairKernel`), energy term
(:class:`~meanfield.energy.Term`) or flux scheme (:class:`~meanfield.pde.schemes.Scheme`) goes
everywhere a built-in goes; these checks say whether it keeps the contract the package relies
on, as scikit-learn's ``check_estimator`` does for estimators [1]_.  The package's own test suite
(``tests/test_common.py``) runs the same checks on every built-in, so one implementation
serves both.

* :func:`~meanfield.testing.kernel_checks.check_kernel`: k depends on |z| only; κ' is the
  derivative of κ; the gradient is the autograd gradient of the value and its central finite
  difference; float32 in, float32 out; numpy and torch agree (the grid solver passes numpy); the
  in-place gradient coefficient is the plain one; coincident points get a finite (for a singular
  kernel, the zero) gradient; ``describe()`` is plain data that rebuilds a built-in; bad
  constructor arguments raise a named error.
* :func:`~meanfield.testing.term_checks.check_term`: the value is finite, one per replica;
  ``grad`` is the autograd gradient of ``value``; H_N is symmetric in the particles; the
  particle force is the gradient of the first variation, N ∇_{ω_i} H_N = ∇ δE/δμ[μ_N](ω_i); the
  first variation is the derivative of the energy on measures; a pair term is translation
  invariant and the pair sum of its kernel; a float32 energy computes in float32, close to
  float64.
* :func:`~meanfield.testing.scheme_checks.check_scheme`: over a few steps of a 1D and a 2D
  problem, mass is conserved, the density stays nonnegative and the free energy does not
  increase (the structure of the finite-volume schemes of [2]_).

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

from .kernel_checks import check_kernel
from .scheme_checks import check_scheme
from .term_checks import check_term

__all__ = ["check_kernel", "check_scheme", "check_term"]
