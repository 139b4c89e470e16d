"""The term protocol: what one additive piece of the energy gives, and how it is bound.

A term is built from its parameters and data alone (``LinearAlignment(X, y)``); the particle
dimension, dtype and device come from where it is used.  :meth:`Term.bound` returns a bound
copy in one step (the term itself is never changed), and an :class:`~meanfield.energy.Energy`
binds its own copies the same way.  A data term used before it is bound refuses by name
(:class:`UnboundTermError`); a data-free term (a potential, a pair interaction) needs no
binding and checks the particle dimension where it is used.
"""

from __future__ import annotations

import copy

import torch

from ..errors import InputTypeError

#: The kinds of term, by how the first variation δE/δμ depends on the measure μ.
TERM_KINDS = ("one-body", "pair", "measure")


class UnboundTermError(AttributeError):
    """A term's data was used before :meth:`Term.bind` (an :class:`Energy` binds its terms).

    See Also
    --------
    Term.bind : binds a term to the particles' dimension, dtype and device.
    Energy : binds its terms when it is made.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.energy import LinearAlignment, UnboundTermError
    >>> term = LinearAlignment(np.eye(2), np.array([1.0, -1.0]))
    >>> try:
    ...     term.U
    ... except UnboundTermError as err:
    ...     print(str(err)[:40])
    LinearAlignment.U is set when the term i
    """


class Term:
    r"""One additive piece of the energy.  Subclasses implement the three views.

    Every term declares its ``kind`` (one of :data:`TERM_KINDS`): what a solver on densities
    (:class:`meanfield.pde.GridEnergy`) needs to evaluate it, without knowing its class.

    * ``"one-body"``: E(μ) = ∫ f dμ, so δE/δμ = f does not depend on μ (potentials, the
      linear alignment): ``first_variation(at)`` is evaluated once;
    * ``"pair"``: E(μ) = λ ∬ k(ω − ω') μ(dω) μ(dω'); :meth:`pair_kernel` gives (k, λ), and
      δE/δμ = 2λ k ∗ μ can be computed by a convolution;
    * ``"measure"``: any other dependence; ``first_variation(at, points, weights)`` is
      evaluated at each μ and :meth:`measure_value` gives E(μ) of a weighted measure.

    The first variation is the derivative of E along a perturbation ν of zero mass, and the
    finite-N value is E at the empirical measure (pair sums without their diagonal):

    .. math::

        \frac{d}{d\varepsilon} E(\mu + \varepsilon \nu) \Big|_{\varepsilon = 0}
        = \int \frac{\delta E}{\delta \mu}(\omega)\, \nu(d\omega), \qquad
        H_N(\Omega) = E\Big(\frac1N \sum_{i=1}^N \delta_{\omega_i}\Big).

    See Also
    --------
    meanfield.energy.Energy : binds its own copy of each term (:meth:`bound`).
    meanfield.testing.check_term : the contract every term keeps, checked.

    Examples
    --------
    >>> import torch
    >>> from meanfield.energy import Term
    >>> class Mean(Term):  # E(μ) = ∫ ω_1 dμ: one-body, δE/δμ = ω_1
    ...     kind = "one-body"
    ...     def value(self, omega):
    ...         return omega[..., 0].mean(-1)
    ...     def grad(self, omega):
    ...         return torch.full_like(omega, 1.0 / omega.shape[-2])
    ...     def first_variation(self, at, points=None, weights=None):
    ...         return at[:, 0]
    >>> pts = torch.tensor([[1.0], [3.0]])
    >>> float(Mean().measure_value(pts, torch.tensor([0.25, 0.75])))
    2.5
    """

    name = "term"
    kind = "measure"
    #: Attributes set by :meth:`bind`; reading one on an unbound term raises UnboundTermError.
    _bound_attributes: tuple = ()

    def __getattr__(self, name):
        # reached only when the normal lookup fails
        if name in type(self)._bound_attributes:
            raise UnboundTermError(
                f"{type(self).__name__}.{name} is set when the term is bound: use the term "
                "inside an Energy (Energy([term], domain)) or use the bound copy "
                "term.bound(dim, dtype, device)"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def bound(self, dim: int, dtype=torch.float64, device="cpu") -> Term:
        """A copy of this term bound to particles of dimension ``dim``, ``dtype``, ``device``.

        The one step that makes a term usable alone; the term itself is left as it is, so one
        term can serve several energies (a float64 and a float32 one) and a bound copy is
        never rebound behind its user's back.  :class:`~meanfield.energy.Energy` binds its
        terms this way.

        Parameters
        ----------
        dim : int
            Particle dimension p (the domain's ``dim``).
        dtype : torch.dtype, default float64
            Floating type of the term's tensors.
        device : str or torch.device, default "cpu"
            Where the term's tensors live.

        Returns
        -------
        Term
            A shallow copy of this term on which :meth:`bind` has run.

        Raises
        ------
        ValueError
            The term cannot act on particles of dimension ``dim`` (a feature map of another
            dimension, a Riesz kernel that is not integrable in R^dim).

        See Also
        --------
        bind : the same in place.

        Examples
        --------
        >>> import numpy as np
        >>> import torch
        >>> from meanfield.energy import LinearAlignment
        >>> term = LinearAlignment(np.zeros((3, 2)), np.array([1.0, -1.0, 1.0]))
        >>> bound = term.bound(2, torch.float32)  # positive features: p = d = 2
        >>> bound.U.dtype, hasattr(term, "U")  # the term itself stays unbound
        (torch.float32, False)
        >>> try:
        ...     term.bound(3)
        ... except ValueError as err:
        ...     print(str(err)[:44])
        feature 'positive' on data of dimension d=2
        """
        new = copy.copy(self)
        new.bind(dim, dtype, torch.device(device))
        return new

    def bind(self, dim: int, dtype, device) -> None:
        """Check the particle dimension and move data to ``dtype``/``device``, in place.

        The hook a term with data or a dimension constraint implements (nothing by default);
        :meth:`bound` and :class:`~meanfield.energy.Energy` run it on a copy, which is how a
        term is meant to be bound.

        Parameters
        ----------
        dim : int
            Particle dimension p (the domain's ``dim``).
        dtype : torch.dtype
            Floating type of the term's tensors.
        device : str or torch.device
            Where the term's tensors live.

        Raises
        ------
        ValueError
            The term cannot act on particles of dimension ``dim`` (a feature map of another
            dimension, a Riesz kernel that is not integrable in R^dim).

        See Also
        --------
        bound : a bound copy.
        UnboundTermError : data used before binding.

        Examples
        --------
        >>> import numpy as np
        >>> import torch
        >>> from meanfield.energy import LinearAlignment
        >>> term = LinearAlignment(np.zeros((3, 2)), np.array([1.0, -1.0, 1.0]))
        >>> term.bind(2, torch.float32, "cpu")  # in place: prefer term.bound(2, torch.float32)
        >>> term.U.dtype
        torch.float32
        """

    def kernel_data(self):
        r"""The data and feature map through which the term reads μ, or None.

        An *alignment* term reads the measure through the kernel of its random features on a
        data set, K_μ(x, x') = ∫ φ(x; ω) φ(x'; ω) μ(dω), x, x' in X. A term that does so —
        built-in or a user's — returns ``(X, feature)`` here, and the comparison of the two
        views records the kernel gap max_jk |K_{μ_N}(x_j, x_k) − K_ρ(x_j, x_k)| on that data
        (:func:`meanfield.ot.diagnostics.kernel_gap`). Other terms return None (the default).

        Returns
        -------
        tuple of (numpy.ndarray of shape (n, d), str or FeatureMap) or None
            The data points X and the feature map φ.

        See Also
        --------
        meanfield.workbench.compare.compare : records the kernel gap of the first such term.

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.energy import LinearAlignment, QuadraticPotential
        >>> X, y = np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([1.0, -1.0])
        >>> LinearAlignment(X, y).kernel_data()[0].shape, QuadraticPotential().kernel_data()
        ((2, 2), None)
        """
        return None

    def pair_kernel(self):
        r"""(kernel, λ) of a ``"pair"`` term; a TypeError for any other kind.

        .. math::

            E(\mu) = \lambda \iint k(\omega - \omega')\, \mu(d\omega)\, \mu(d\omega').

        Returns
        -------
        kernel : meanfield.kernels.PairKernel
        lam : float
            The strength λ ≥ 0.

        See Also
        --------
        meanfield.pde.convolution.FFTConvolution : the grid view's convolution with this kernel.

        Examples
        --------
        >>> from meanfield.energy import PairInteraction, QuadraticPotential
        >>> from meanfield.kernels import Riesz
        >>> PairInteraction(Riesz(0.0), lam=0.5).pair_kernel()
        (Riesz(s=0.0, softening=0.0), 0.5)
        >>> try:
        ...     QuadraticPotential().pair_kernel()
        ... except TypeError as err:
        ...     print(err)
        QuadraticPotential is a 'one-body' term, not a pair term
        """
        raise InputTypeError(f"{type(self).__name__} is a {self.kind!r} term, not a pair term")

    def measure_value(self, points, weights) -> torch.Tensor:
        """E(μ) for the weighted measure μ = Σ_k w_k δ_{points_k} (mean-field value), shape ().

        A one-body term integrates its first variation: E(μ) = Σ_k w_k f(points_k).

        Parameters
        ----------
        points : tensor (K, p)
        weights : tensor (K,)
            Non-negative masses w_k.

        Returns
        -------
        tensor ()

        See Also
        --------
        value : the finite-N energy.
        meanfield.pde.potential.GridEnergy.term_values : the grid view's value of a ``measure``
            term.

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import QuadraticPotential
        >>> points = torch.tensor([[0.0], [2.0]])  # V = ω²/2: 0 and 2
        >>> float(QuadraticPotential().measure_value(points, torch.tensor([0.5, 0.5])))
        1.0
        """
        if self.kind == "one-body":
            return (self.first_variation(points, points, weights) * weights).sum()
        raise NotImplementedError(f"{type(self).__name__} does not give its value on a measure")

    def value(self, omega: torch.Tensor) -> torch.Tensor:
        """The finite-N energy H_N(Ω) = E(μ_N) of particles Ω, one value per replica.

        Parameters
        ----------
        omega : tensor (..., N, p)
            Particles of the bound dtype/device (leading axes are independent replicas).

        Returns
        -------
        tensor (...)

        See Also
        --------
        meanfield.energy.Energy.value : the sum over the terms.
        measure_value : the mean-field value.

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import QuadraticPotential
        >>> omega = torch.tensor([[[1.0], [3.0]], [[0.0], [2.0]]])  # two replicas of N = 2
        >>> QuadraticPotential().value(omega).tolist()  # mean of ω²/2
        [2.5, 1.0]
        """
        raise NotImplementedError

    def grad(self, omega: torch.Tensor) -> torch.Tensor:
        """The analytic gradient ∇_Ω H_N(Ω) (of the sum, so O(1/N) per particle).

        Parameters
        ----------
        omega : tensor (..., N, p)
            Particles of the bound dtype/device.

        Returns
        -------
        tensor (..., N, p)

        See Also
        --------
        meanfield.energy.Energy.grad : the sum over the terms.
        first_variation : its mean-field counterpart.

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import QuadraticPotential
        >>> QuadraticPotential().grad(torch.tensor([[1.0], [3.0]])).ravel().tolist()  # ω / N
        [0.5, 1.5]
        """
        raise NotImplementedError

    def first_variation(self, at, points, weights) -> torch.Tensor:
        """δE/δμ at the points ``at`` for the measure μ = Σ_k w_k δ_{points_k}.

        Parameters
        ----------
        at : tensor (M, p)
            Where to evaluate it (e.g. the grid's cell centres).
        points : tensor (K, p)
            Atoms of μ (one-body terms ignore them and accept None).
        weights : tensor (K,)
            Their non-negative masses.

        Returns
        -------
        tensor (M,)

        See Also
        --------
        meanfield.energy.Energy.first_variation : the sum over the terms.
        meanfield.pde.potential.GridEnergy.potentials : the grid view, per term.

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import PairInteraction
        >>> from meanfield.kernels import Riesz
        >>> points = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
        >>> weights = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> term = PairInteraction(Riesz(0.0), lam=0.5)  # 2λ k∗μ with k(z) = −log|z|
        >>> round(float(term.first_variation(torch.tensor([[4.0]]).double(), points, weights)), 4)
        -1.0397
        """
        raise NotImplementedError

    def value_and_grad(self, omega) -> tuple[torch.Tensor, torch.Tensor]:
        """(H_N, ∇H_N) at once (terms with a shared expensive pass override this).

        Parameters
        ----------
        omega : tensor (..., N, p)

        Returns
        -------
        value : tensor (...)
        grad : tensor (..., N, p)

        See Also
        --------
        value, grad

        Examples
        --------
        >>> import torch
        >>> from meanfield.energy import DoubleWellPotential
        >>> v, g = DoubleWellPotential().value_and_grad(torch.tensor([[1.0], [0.0]]))
        >>> float(v), g.ravel().tolist()
        (-0.125, [0.0, 0.0])
        """
        return self.value(omega), self.grad(omega)

    def subset_data(self, index) -> Term:
        """The same term on a subset of the data (mini-batches); data-free terms return self.

        Parameters
        ----------
        index : array of int
            Rows of the data to keep.

        Returns
        -------
        Term

        See Also
        --------
        meanfield.energy.AlignmentTerm.subset_data : the data terms' version.

        Examples
        --------
        >>> from meanfield.energy import QuadraticPotential
        >>> V = QuadraticPotential()
        >>> V.subset_data([0, 2]) is V
        True
        """
        return self

    def describe(self) -> dict:
        """The term's parameters as plain types (for dataset attributes; empty by default).

        Returns
        -------
        dict

        See Also
        --------
        meanfield.energy.Energy.describe : every term's, flattened.

        Examples
        --------
        >>> from meanfield.energy import DoubleWellPotential
        >>> DoubleWellPotential(strength=2.0).describe()
        {'potential': 'double_well', 'strength': 2.0}
        """
        return {}
