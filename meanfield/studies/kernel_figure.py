"""Exponential concentration of the learned kernel: the experiment of its figure.

:func:`kernel_model` is the learned-kernel model (1D two-class data, softplus features, linear
alignment, Riesz repulsion); :func:`kernel_concentration_data` runs
:func:`meanfield.studies.ldp.kernel_concentration` on it against N (mean-field regime) and
:func:`~meanfield.studies.ldp.kernel_concentration_in_beta` against β (Coulomb-gas regime).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..results import provenance
from ._sizes import check_size

#: Replicas, particle numbers (N sweep) and inverse temperatures (β sweep) of each size.
CONFIG = {
    "small": {"reps": 40, "Ns": [8, 24], "betas": [0.1, 0.4]},
    "full": {"reps": 200, "Ns": [8, 16, 32, 64], "betas": [0.1, 0.2, 0.4, 0.8, 1.6]},
}


def kernel_model(seed: int = 0):
    """The learned-kernel model of the concentration figure.

    1D two-class data (n = 30, x = 0.8 y + 0.4 ξ, y = ±1), softplus features, V = ω²/2,
    linear alignment, k = −|z| with λ = 1/2, on [−4, 4]:

    .. math::

        E(\\mu) = \\int \\frac{\\omega^2}{2} d\\mu - \\text{alignment}(\\mu)
        - \\frac{1}{4}\\iint |\\omega - \\omega'|\\, d\\mu\\, d\\mu'.

    Parameters
    ----------
    seed : int
        Seed of the data draw.

    Returns
    -------
    (Energy, ndarray (30, 1))
        The energy and the data inputs X.

    Examples
    --------
    >>> from meanfield.studies.kernel_figure import kernel_model
    >>> energy, X = kernel_model(seed=0)
    >>> X.shape, energy.term_names, energy.domain
    ((30, 1), ['confinement', 'alignment', 'interaction'], Box(dim=1, half_width=4.0))
    """
    from ..domains import Box
    from ..energy import Energy, LinearAlignment, PairInteraction, QuadraticPotential
    from ..kernels import Riesz

    rng = np.random.default_rng(seed)
    y = np.repeat([-1.0, 1.0], 15)
    X = (0.8 * y + 0.4 * rng.normal(size=30))[:, None]
    E = Energy(
        [
            QuadraticPotential(),
            LinearAlignment(X, y, "softplus"),
            PairInteraction(Riesz(-1.0), 0.5),
        ],
        Box(1, 4.0),
    )
    return E, X


def kernel_concentration_data(size: str = "full", seed: int = 0) -> xr.Dataset:
    """P(max|K_{μ_N} − K_ref| > ε) against N and against β, and P(W2(μ_N, ρ_β) > ε).

    Against N: mean-field regime, β = 2, reference ρ_β.  Against β: Coulomb-gas regime,
    N = 16, reference μ*.  Variables suffixed ``_N`` and ``_beta`` for the two sweeps:

    .. math::

        P\\Big(\\max_{jk} |K_{\\mu_N}(x_j, x_k) - K_{\\mathrm{ref}}(x_j, x_k)| > \\varepsilon\\Big)
        \\approx e^{-N I(\\varepsilon)}.

    Parameters
    ----------
    size : {"small", "full"}
        Replicas and sweeps of :data:`CONFIG`.
    seed : int

    Returns
    -------
    xarray.Dataset
        ``prob_N``, ``prob_se_N`` (N, eps_N), ``mean_gap_N``, ``mean_gap_se_N`` (N),
        ``decay_rate_N`` (eps_N); the same with ``_beta`` over (beta, eps_beta); ``prob_w2``,
        ``prob_w2_se`` (N, eps_w2) and ``mean_w2``, ``mean_w2_se`` (N).

    Examples
    --------
    The size is checked before any work:

    >>> from meanfield.studies.kernel_figure import kernel_concentration_data
    >>> kernel_concentration_data(size="tiny")
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown size 'tiny'; choose one of 'small', 'full'

    The small size takes seconds:

    >>> ds = kernel_concentration_data(size="small")
    >>> dict(ds["prob_N"].sizes)
    {'N': 2, 'eps_N': 3}
    """
    import torch

    from .ldp import kernel_concentration, kernel_concentration_in_beta

    check_size(size)
    torch.set_num_threads(1)
    E, X = kernel_model(seed)
    cfg = CONFIG[size]
    kw = {"n_replicas": cfg["reps"], "n_steps": 300, "burn_in": 100, "seed": seed}
    in_n = kernel_concentration(
        E, X, "softplus", 2.0, cfg["Ns"], [0.75, 1.0, 1.5], eps_w2=[0.3, 0.4, 0.5], **kw
    )
    in_b = kernel_concentration_in_beta(E, X, "softplus", 16, cfg["betas"], [0.5, 1.0], **kw)
    w2_vars = ["prob_w2", "prob_w2_se", "mean_w2", "mean_w2_se"]
    w2 = in_n[w2_vars]
    in_n = in_n.drop_vars([*w2_vars, "eps_w2"])
    in_n, in_b = in_n.rename(eps="eps_N"), in_b.rename(eps="eps_beta")
    out = xr.Dataset(
        {
            **{f"{k}_N": v for k, v in in_n.data_vars.items()},
            **{f"{k}_beta": v for k, v in in_b.data_vars.items()},
            **dict(w2.data_vars),
        }
    )
    out.attrs = provenance(
        {
            "figure": "kernel_concentration",
            "size": size,
            "n_replicas": cfg["reps"],
            "beta_for_N_sweep": 2.0,
            "N_for_beta_sweep": 16,
            "model": "meanfield.studies.kernel_figure.kernel_model",
        },
        seed=seed,
    )
    return out


__all__ = ["CONFIG", "kernel_concentration_data", "kernel_model"]
