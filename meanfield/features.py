r"""Feature maps φ(x; ω) (one scalar per particle) and samplers for initial particles.

Every mean-field feature here is a *ridge* function of the particle,

.. math::

    \varphi(x; \omega) = g(\omega^\top \tilde x + c(x)), \qquad
    \nabla_\omega \varphi(x; \omega) = g'(\omega^\top \tilde x + c(x))\, \tilde x,

with a lifted input x̃ and an offset c(x) that depend on the feature only (THEORY §1):

======== ============================ ============ ========== ==============
name     φ                            x̃            c(x)       particle dim p
======== ============================ ============ ========== ==============
positive exp(ωᵀx − |x|²/2)            x            −|x|²/2    d
fourier  √2 cos(ωᵀx + b)              (x, 1)       0          d + 1 (b = ω_p)
softplus log(1 + exp(ωᵀx))            x            0          d
======== ============================ ============ ========== ==============

For ``fourier`` the phase b is the last coordinate of the particle, so the energy can move it
too; for ω ~ N(0, σ⁻² I), b ~ U[−π, π) the kernel E φ(x)φ(x') is the Gaussian kernel
exp(−|x − x'|²/(2σ²)).  For ``positive``, E_{ω~N(0,I)} φ(x)φ(x') = exp(xᵀx').

The ridge form is what lets the energy give analytic gradients with one code path.

Which "features" (three meanings in the package; this module is the first). Here a *feature
map* is φ(x; ω): one data point x and **one particle** ω give one scalar, and a measure μ of
particles gives the kernel K_μ(x, x') = ∫ φ(x; ω) φ(x'; ω) μ(dω) (THEORY §1), random features
[1]_ whose law is learned. The other two:

- :mod:`meanfield.attention.features`: an *attention feature map* φ_Ω(x) ∈ R^m (or R^{2m}) of
  a query or key (FAVOR+ [2]_ and its relatives), computed from a whole matrix Ω of m
  particles at once (torch modules with Ω a buffer; softmaxfeat's normaliser couples the
  particles, so it is not a ridge map of one particle and not a mean-field feature);
- :mod:`meanfield.learners`: *features* in scikit-learn's sense, the m output columns of a
  learner's ``transform``, Φ_ji = w_i φ(x_j; ω_i) with the ``"fourier"`` map of this module;
  there ``n_features`` is m, the number of particles (columns out), not scikit-learn's
  ``n_features_in_`` (d, columns in).

So ``n_features`` (learners, attention) always counts particles m; the data dimension is d.

See Also
--------
meanfield.attention.features : attention feature maps (FAVOR+, PORF, softmaxfeat).
meanfield.learners : random-feature learners whose ``transform`` gives the feature matrix.
meanfield.energy : the alignment terms built on these maps.

References
----------
.. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.
.. [2] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ._validation import check_choice, check_int, check_positive
from .contract import Param, declare


class FeatureMap:
    r"""A ridge feature map φ(x; ω) = g(ωᵀ x̃ + c(x)). Subclasses set g, g' and the lift.

    .. math::

        \varphi(x; \omega) = g\big(\omega^\top \tilde x + c(x)\big), \qquad
        \nabla_\omega \varphi(x; \omega) = g'\big(\omega^\top \tilde x + c(x)\big)\, \tilde x .

    See Also
    --------
    get_feature_map : a built-in map by name.
    meanfield.attention.features.AttentionFeatureMap : the feature maps of attention (torch
        modules, one ``Omega`` shared by queries and keys).
    meanfield.energy.LinearAlignment : the alignment term built on a feature map.

    References
    ----------
    .. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.

    Examples
    --------
    >>> fmap = get_feature_map("softplus")  # a FeatureMap
    >>> X, omega = torch.zeros(3, 2, dtype=torch.float64), torch.ones(4, 2, dtype=torch.float64)
    >>> Phi = fmap.evaluate(X, omega)
    >>> tuple(Phi.shape), round(float(Phi[0, 0]), 6)  # (N, n); softplus(0) = log 2
    ((4, 3), 0.693147)
    """

    name: str = ""

    def particle_dim(self, data_dim: int) -> int:
        """Dimension p of a particle for data in R^data_dim.

        Parameters
        ----------
        data_dim : int
            Dimension d of the inputs x.

        Returns
        -------
        int
            d, or d + 1 for maps whose particle carries a phase.

        Examples
        --------
        >>> PositiveFeatures().particle_dim(3), FourierFeatures().particle_dim(3)
        (3, 4)
        """
        return data_dim

    def lift(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Lifted inputs x̃, shape (n, p), and offsets c(x), shape (n,).

        Parameters
        ----------
        X : tensor of shape (n, d)
            Inputs.

        Returns
        -------
        Xt : tensor of shape (n, p)
            x̃ (x itself, or (x, 1) for the Fourier phase).
        offset : tensor of shape (n,)
            c(x) (−|x|²/2 for the positive features, else 0).

        Examples
        --------
        >>> X = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
        >>> Xt, c = FourierFeatures().lift(X)
        >>> Xt.tolist(), c.tolist()
        ([[1.0, 2.0, 1.0]], [0.0])
        >>> PositiveFeatures().lift(X)[1].tolist()  # −|x|²/2
        [-2.5]
        """
        return X, torch.zeros(X.shape[0], dtype=X.dtype, device=X.device)

    def g(self, z: torch.Tensor) -> torch.Tensor:
        """The ridge profile g, elementwise: φ(x; ω) = g(ωᵀ x̃ + c(x)).

        Parameters
        ----------
        z : tensor, any shape
            Pre-activations.

        Returns
        -------
        tensor
            g(z), same shape.

        Examples
        --------
        >>> z = torch.tensor([0.0], dtype=torch.float64)
        >>> float(PositiveFeatures().g(z)[0]), float(FourierFeatures().g(z)[0])  # e⁰, √2 cos 0
        (1.0, 1.4142135623730951)
        """
        raise NotImplementedError

    def dg(self, z: torch.Tensor) -> torch.Tensor:
        """The derivative g' of the ridge profile, elementwise.

        Parameters
        ----------
        z : tensor, any shape
            Pre-activations.

        Returns
        -------
        tensor
            g'(z), same shape.

        Examples
        --------
        >>> z = torch.tensor([0.0], dtype=torch.float64)
        >>> float(SoftplusFeatures().dg(z)[0]), float(FourierFeatures().dg(z)[0])  # σ(0), −√2 sin 0
        (0.5, -0.0)
        """
        raise NotImplementedError

    def g_and_dg(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(g(z), g'(z)); maps whose two share work override this.

        Parameters
        ----------
        z : tensor, any shape
            Pre-activations.

        Returns
        -------
        g : tensor
            g(z), the shape of ``z``.
        dg : tensor
            g'(z), the shape of ``z``.

        Examples
        --------
        >>> z = torch.tensor([0.0, 1.0], dtype=torch.float64)
        >>> g, dg = PositiveFeatures().g_and_dg(z)  # exp is its own derivative
        >>> bool(torch.equal(g, dg)), round(float(g[1]), 6)
        (True, 2.718282)
        """
        return self.g(z), self.dg(z)

    def g_and_dg_scaled(self, z: torch.Tensor):
        """(G, D, c_g, c_d) with g(z) = c_g G and g'(z) = c_d D, for callers that fold the
        constant factors into smaller matrices (one elementwise pass less for each).

        ``z`` may be overwritten (pass a tensor of your own, e.g. a fresh pre-activation);
        G and D may be the same tensor (maps with g = g').

        Parameters
        ----------
        z : tensor, any shape
            Pre-activations.

        Returns
        -------
        G, D : tensor
            The shape of ``z``.
        c_g, c_d : float
            The constant factors (1.0 for maps without one).

        Examples
        --------
        >>> z = torch.tensor([0.0, 1.0], dtype=torch.float64)
        >>> G, D, cg, cd = FourierFeatures().g_and_dg_scaled(z.clone())
        >>> g, dg = FourierFeatures().g_and_dg(z)
        >>> bool(torch.allclose(cg * G, g)), bool(torch.allclose(cd * D, dg))
        (True, True)
        """
        g, dg = self.g_and_dg(z)
        return g, dg, 1.0, 1.0

    def preactivation(self, Xt, offset, omega):
        """z_{ji} = ω_iᵀ x̃_j + c(x_j): shape (..., N, n) for omega (..., N, p).

        Parameters
        ----------
        Xt : tensor of shape (n, p)
            Lifted inputs (:meth:`lift`).
        offset : tensor of shape (n,)
            Offsets c(x).
        omega : tensor of shape (..., N, p)
            Particles.

        Returns
        -------
        tensor of shape (..., N, n)
            The pre-activations.

        Examples
        --------
        >>> fmap = PositiveFeatures()
        >>> Xt, c = fmap.lift(torch.tensor([[1.0, 1.0]], dtype=torch.float64))
        >>> fmap.preactivation(Xt, c, torch.tensor([[2.0, 0.0]], dtype=torch.float64)).tolist()
        [[1.0]]
        """
        if omega.dim() == 2:  # the offset added inside the product: one pass less
            return torch.addmm(offset, omega, Xt.T)
        return omega @ Xt.T + offset

    def evaluate(self, X, omega) -> torch.Tensor:
        """Feature matrix Φ_ij = φ(x_j; ω_i): shape (..., N, n) for X (n, d), omega (..., N, p).

        Parameters
        ----------
        X : array_like of shape (n, d)
            Inputs (converted to the dtype and device of ``omega``).
        omega : tensor of shape (..., N, p)
            Particles.

        Returns
        -------
        tensor of shape (..., N, n)
            Φ, one row per particle.

        Examples
        --------
        >>> omega = torch.zeros(2, 3, 1, dtype=torch.float64)  # 2 replicas of 3 particles
        >>> tuple(SoftplusFeatures().evaluate([[1.0], [2.0]], omega).shape)
        (2, 3, 2)
        """
        X = torch.as_tensor(X, dtype=omega.dtype, device=omega.device)
        Xt, c = self.lift(X)
        return self.g(self.preactivation(Xt, c, omega))

    def empirical_kernel(self, X, omega, X2=None) -> torch.Tensor:
        r"""K_Ω(x, x') = (1/N) Σ_i φ(x; ω_i) φ(x'; ω_i), shape (n, n2).

        .. math::

            K_\Omega(x, x') = \frac1N \sum_{i=1}^N \varphi(x; \omega_i)\, \varphi(x'; \omega_i).

        Parameters
        ----------
        X : array_like of shape (n, d)
            Inputs x.
        omega : tensor of shape (..., N, p)
            Particles.
        X2 : array_like of shape (n2, d), optional
            Inputs x' (default ``X``).

        Returns
        -------
        tensor of shape (..., n, n2)
            The kernel matrix.

        Examples
        --------
        >>> omega = torch.zeros(4, 2, dtype=torch.float64)  # φ = √2 cos(0) = √2 everywhere
        >>> FourierFeatures().empirical_kernel(torch.zeros(2, 1), omega).round(decimals=12)
        tensor([[2., 2.],
                [2., 2.]], dtype=torch.float64)
        """
        P = self.evaluate(X, omega)
        P2 = P if X2 is None else self.evaluate(X2, omega)
        return P.transpose(-1, -2) @ P2 / omega.shape[-2]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class PositiveFeatures(FeatureMap):
    r"""FAVOR+ positive features φ = exp(ωᵀx − |x|²/2).

    .. math::

        \varphi(x; \omega) = e^{\omega^\top x - |x|^2/2}, \qquad
        \mathbb E_{\omega \sim N(0, I)}\, \varphi(x; \omega)\, \varphi(x'; \omega) = e^{x^\top x'} .

    See Also
    --------
    FourierFeatures, SoftplusFeatures : the other built-in maps.
    meanfield.attention.features.PositiveFeatures : the same map for attention (FAVOR+).

    References
    ----------
    .. [1] K. Choromanski et al., "Rethinking attention with Performers", ICLR 2021 (the positive
       features and their orthogonal draws).

    Examples
    --------
    >>> x = torch.tensor([[0.3, -0.2]], dtype=torch.float64)
    >>> om = sample_gaussian(100_000, 2, seed=0)
    >>> K = PositiveFeatures().empirical_kernel(x, om)  # Monte Carlo of exp(xᵀx)
    >>> bool(abs(float(K[0, 0]) - math.exp(0.13)) < 0.02)
    True
    """

    name = "positive"

    def lift(self, X):
        return X, -0.5 * (X * X).sum(-1)

    def g(self, z):
        return torch.exp(z)

    def dg(self, z):
        return torch.exp(z)

    def g_and_dg(self, z):
        e = torch.exp(z)
        return e, e


class FourierFeatures(FeatureMap):
    r"""Fourier feature map φ = √2 cos(ωᵀx + b), the phase b being the last coordinate.

    .. math::

        \varphi(x; (w, b)) = \sqrt2 \cos(w^\top x + b), \qquad
        \mathbb E\, \varphi(x)\, \varphi(x') = e^{-|x - x'|^2 / (2\sigma^2)}
        \ \text{ for } w \sim N(0, \sigma^{-2} I),\ b \sim U[-\pi, \pi).

    Not to be confused with the label-blind learner
    :class:`meanfield.learners.RandomFourierFeatures`, which draws its frequencies once.

    See Also
    --------
    PositiveFeatures, SoftplusFeatures : the other built-in maps.

    References
    ----------
    .. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.

    Examples
    --------
    >>> fmap = FourierFeatures()
    >>> fmap.particle_dim(3)  # frequencies and the phase
    4
    >>> zero = torch.zeros(1, 2, dtype=torch.float64)
    >>> float(fmap.evaluate(zero[:, :1], zero)[0, 0])  # √2 cos(0)
    1.4142135623730951
    """

    name = "fourier"

    def particle_dim(self, data_dim: int) -> int:
        return data_dim + 1

    def lift(self, X):
        ones = torch.ones(X.shape[0], 1, dtype=X.dtype, device=X.device)
        return torch.cat([X, ones], dim=1), torch.zeros(X.shape[0], dtype=X.dtype, device=X.device)

    def g(self, z):
        return math.sqrt(2.0) * torch.cos(z)

    def dg(self, z):
        return -math.sqrt(2.0) * torch.sin(z)

    def g_and_dg_scaled(self, z):
        # cos z, then sin z in z's own storage: g = √2 cos z, g' = −√2 sin z
        return torch.cos(z), z.sin_(), math.sqrt(2.0), -math.sqrt(2.0)


class SoftplusFeatures(FeatureMap):
    r"""φ = softplus(ωᵀx) = log(1 + exp(ωᵀx)).

    .. math::

        \varphi(x; \omega) = \log\big(1 + e^{\omega^\top x}\big), \qquad
        g'(z) = \frac{1}{1 + e^{-z}} .

    See Also
    --------
    PositiveFeatures, FourierFeatures : the other built-in maps.
    meanfield.attention.features.SoftplusFeatures : the same map for attention (PORF-softplus).

    Examples
    --------
    >>> z = torch.tensor([0.0], dtype=torch.float64)
    >>> round(float(SoftplusFeatures().g(z)[0]), 6), float(SoftplusFeatures().dg(z)[0])
    (0.693147, 0.5)
    """

    name = "softplus"

    def g(self, z):
        return F.softplus(z)

    def dg(self, z):
        return torch.sigmoid(z)


FEATURE_MAPS = {cls.name: cls for cls in (PositiveFeatures, FourierFeatures, SoftplusFeatures)}


def get_feature_map(name: str | FeatureMap) -> FeatureMap:
    """Return a feature map by name: ``"positive"``, ``"fourier"`` or ``"softplus"``.

    Parameters
    ----------
    name : str or FeatureMap
        A key of :data:`FEATURE_MAPS`, or a map (returned as it is).

    Returns
    -------
    FeatureMap
        A new instance of the named map.

    Raises
    ------
    meanfield.errors.InputError
        An unknown name.

    See Also
    --------
    FEATURE_MAPS : the built-in maps by name.

    Examples
    --------
    >>> get_feature_map("fourier")
    FourierFeatures()
    >>> sorted(FEATURE_MAPS)
    ['fourier', 'positive', 'softplus']
    """
    if isinstance(name, FeatureMap):
        return name
    check_choice("feature", name, FEATURE_MAPS)
    return FEATURE_MAPS[name]()


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def gaussian_rows(n_rows: int, dim: int, generator: torch.Generator) -> torch.Tensor:
    """iid standard normal rows, float64, shape (n_rows, dim), drawn from ``generator``.

    The one Gaussian sampler: :func:`sample_gaussian` (seeded) and the attention feature maps
    (:func:`meanfield.attention.features.gaussian_omega`) both draw through it.

    Parameters
    ----------
    n_rows, dim : int >= 1
        Number of rows and their dimension.
    generator : torch.Generator
        Source of the draw (advanced by n_rows · dim normals).

    Returns
    -------
    torch.Tensor of shape (n_rows, dim), float64
        The rows.

    See Also
    --------
    orthogonal_rows : the same rows drawn in orthogonal blocks.
    sample_gaussian : seeded and scaled, for initial particles.

    Examples
    --------
    >>> w = gaussian_rows(3, 2, torch.Generator().manual_seed(0))
    >>> tuple(w.shape), w.dtype
    ((3, 2), torch.float64)
    """
    n_rows = check_int("n_rows (N)", n_rows)
    dim = check_int("dim (p)", dim)
    return torch.randn(n_rows, dim, generator=generator, dtype=torch.float64)


def orthogonal_rows(n_rows: int, dim: int, generator: torch.Generator) -> torch.Tensor:
    r"""Orthogonal random features (Yu et al. 2016; PORF in Choromanski et al. 2021), float64.

    Rows come in blocks of ``dim`` exactly orthogonal directions: each block is the Q factor
    of the QR decomposition of a (dim, dim) standard normal matrix, with the signs of diag(R)
    folded in so that Q is Haar distributed (Mezzadri 2007). Each row is then rescaled to an
    independent χ_dim norm (the norm of a fresh standard normal vector), so every row is
    marginally N(0, I) while rows within a block are orthogonal:

    .. math:: \omega_i = \|g_i\|\, q_i, \qquad g_i \sim N(0, I_{dim}), \quad
              q_i \perp q_j \ (i \ne j \text{ in one block}).

    When ``n_rows`` is not a multiple of ``dim`` the last block is truncated. The one
    orthogonal sampler: :func:`sample_orthogonal` and
    :func:`meanfield.attention.features.orthogonal_omega` draw through it.

    Parameters
    ----------
    n_rows, dim : int >= 1
        Number of rows and their dimension (the size of a block).
    generator : torch.Generator
        Source of the draw.

    Returns
    -------
    torch.Tensor of shape (n_rows, dim), float64
        The rows, orthogonal within each block of ``dim``.

    See Also
    --------
    gaussian_rows : iid rows.
    sample_orthogonal : seeded and scaled, for initial particles.

    References
    ----------
    .. [1] F. X. Yu, A. T. Suresh, K. Choromanski, D. Holtmann-Rice and S. Kumar, "Orthogonal
       random features", NeurIPS 2016.

    Examples
    --------
    >>> W = orthogonal_rows(4, 4, torch.Generator().manual_seed(0))
    >>> D = W / W.norm(dim=1, keepdim=True)
    >>> bool(torch.allclose(D @ D.T, torch.eye(4, dtype=torch.float64)))  # one orthogonal block
    True
    """
    n_rows = check_int("n_rows (N)", n_rows)
    dim = check_int("dim (p)", dim)
    n_blocks = math.ceil(n_rows / dim)
    g = torch.randn(n_blocks, dim, dim, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(g)  # batched over blocks
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)  # Haar measure
    rows = q.transpose(-1, -2).reshape(n_blocks * dim, dim)[:n_rows]
    norms = torch.randn(n_rows, dim, generator=generator, dtype=torch.float64).norm(dim=1)
    return rows * norms.unsqueeze(1)


def _seeded_rows(draw, n_particles, dim, scale, seed, dtype, device) -> torch.Tensor:
    """``draw`` from a CPU generator seeded with ``seed``, times ``scale``, cast and moved.

    Drawn on the CPU, so the same seed gives the same bits on every device.
    """
    n_particles = check_int("n_particles (N)", n_particles)
    dim = check_int("dim (p)", dim)
    scale = check_positive("scale", scale)
    w = draw(n_particles, dim, _generator(seed)) * scale
    return w.to(dtype=dtype, device=device)


def sample_gaussian(
    n_particles: int,
    dim: int,
    *,
    scale: float = 1.0,
    seed: int = 0,
    dtype=torch.float64,
    device="cpu",
) -> torch.Tensor:
    """iid N(0, scale² I) particles, shape (n_particles, dim) (:func:`gaussian_rows`, seeded).

    Drawn on the CPU with a seeded generator, so the same seed gives the same bits on every
    device.

    Parameters
    ----------
    n_particles : int >= 1
        Number N of rows.
    dim : int >= 1
        Dimension p of a row.
    scale : float > 0
        Standard deviation of each coordinate.
    seed : int
        Seed of the CPU generator.
    dtype : torch.dtype
        Floating type of the result.
    device : str or torch.device
        Where the result lives.

    Returns
    -------
    torch.Tensor of shape (n_particles, dim)
        The particles, in ``dtype`` on ``device``.

    See Also
    --------
    sample_orthogonal : orthogonal blocks instead of iid rows.
    sample_initial_particles : the initial particles of a run, by the name of their law.

    Examples
    --------
    >>> a = sample_gaussian(5, 2, scale=0.5, seed=7)
    >>> bool(torch.equal(a, sample_gaussian(5, 2, scale=0.5, seed=7))), tuple(a.shape)
    (True, (5, 2))
    """
    return _seeded_rows(gaussian_rows, n_particles, dim, scale, seed, dtype, device)


def sample_orthogonal(
    n_particles: int,
    dim: int,
    *,
    scale: float = 1.0,
    seed: int = 0,
    dtype=torch.float64,
    device="cpu",
) -> torch.Tensor:
    """Orthogonal blocks of rows, each marginally N(0, scale² I) (:func:`orthogonal_rows`, seeded).

    Shape (n_particles, dim); drawn on the CPU like :func:`sample_gaussian`.

    Parameters
    ----------
    n_particles : int >= 1
        Number N of rows.
    dim : int >= 1
        Dimension p of a row.
    scale : float > 0
        Standard deviation of each coordinate.
    seed : int
        Seed of the CPU generator.
    dtype : torch.dtype
        Floating type of the result.
    device : str or torch.device
        Where the result lives.

    Returns
    -------
    torch.Tensor of shape (n_particles, dim)
        Rows orthogonal within each block of ``dim``, in ``dtype`` on ``device``.

    See Also
    --------
    sample_gaussian : iid rows.
    meanfield.attention.features.orthogonal_omega : the same draw for attention's ``Omega``.

    References
    ----------
    .. [1] F. X. Yu, A. T. Suresh, K. Choromanski, D. Holtmann-Rice and S. Kumar, "Orthogonal
       random features", NeurIPS 2016.

    Examples
    --------
    >>> W = sample_orthogonal(6, 3, seed=1)
    >>> tuple(W.shape), bool(abs(float(W[0] @ W[1])) < 1e-12)  # rows 0 and 1 share a block
    ((6, 3), True)
    """
    return _seeded_rows(orthogonal_rows, n_particles, dim, scale, seed, dtype, device)


@declare(
    Param("n_particles", "int", "number N of particles", low=1),
    Param("data_dim", "int", "dimension d of the data", low=1),
    Param("method", "choice", "sampler of the frequencies", choices=("gaussian", "orthogonal")),
    Param("bandwidth", "real", "kernel width sigma of the initial law", low=0.0, low_open=True),
    Param("seed", "seed", "seed of the frequencies and phases"),
)
def sample_initial_particles(
    feature: str | FeatureMap,
    n_particles: int,
    data_dim: int,
    *,
    method: str = "gaussian",
    bandwidth: float = 1.0,
    seed: int = 0,
    dtype=torch.float64,
    device="cpu",
) -> torch.Tensor:
    r"""Initial particles for a feature map: ω ~ N(0, bandwidth⁻² I) (or orthogonal blocks).

    For ``fourier`` the last coordinate is a phase b ~ U[−π, π), so the initial kernel is the
    Gaussian kernel of width ``bandwidth``.  Shape (n_particles, p).

    .. math::

        w_i \sim N(0, \sigma^{-2} I_d), \qquad b_i \sim U[-\pi, \pi) \ (\texttt{fourier}),
        \qquad \sigma = \text{bandwidth}.

    Parameters
    ----------
    feature : str or FeatureMap
        The feature map (:func:`get_feature_map`); it sets p.
    n_particles : int >= 1
        Number N of particles.
    data_dim : int >= 1
        Dimension d of the data.
    method : {"gaussian", "orthogonal"}
        iid Gaussian frequencies, or orthogonal blocks (:func:`orthogonal_rows`).
    bandwidth : float > 0
        Kernel width σ; the frequencies have standard deviation 1/σ.
    seed : int
        Seed of the frequencies (the phase draws from a seed derived from it).
    dtype : torch.dtype
        Floating type of the result.
    device : str or torch.device
        Where the result lives.

    Returns
    -------
    torch.Tensor of shape (n_particles, p)
        Frequencies, then the phase for ``fourier``.

    See Also
    --------
    sample_gaussian, sample_orthogonal : the draws behind it.
    meanfield.dynamics.langevin.simulate : the run that starts from them.

    References
    ----------
    .. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS
       2007 (random Fourier features of the Gaussian kernel).

    Examples
    --------
    >>> om = sample_initial_particles("fourier", 4, 2, bandwidth=0.5, seed=0)
    >>> tuple(om.shape), bool((om[:, -1].abs() <= math.pi).all())  # last column: the phase
    ((4, 3), True)
    """
    fmap = get_feature_map(feature)
    sampler = sample_gaussian if method == "gaussian" else sample_orthogonal
    w = sampler(n_particles, data_dim, scale=1.0 / bandwidth, seed=seed)
    if fmap.particle_dim(data_dim) == data_dim + 1:
        gen = _generator(np.random.SeedSequence(seed).generate_state(1)[0])
        b = (torch.rand(n_particles, 1, generator=gen, dtype=torch.float64) * 2 - 1) * math.pi
        w = torch.cat([w, b], dim=1)
    return w.to(dtype=dtype, device=device)
