"""
Large deviations of a linear statistic
======================================

Tail of :math:`L_N = \\int \\omega^2 \\, d\\mu_N` under the Gibbs law (V = ω²/2, k = −|z|,
β = 1): Monte Carlo estimates of :math:`-\\frac{1}{s_N}\\log P(L_N \\ge a)` with exponential
tilting (± 2 standard errors, sampling and quadrature combined) approach the rate
:math:`J(a) = \\sup_\\theta(\\theta a - \\Lambda(\\theta))` computed from tilted stationary
states on the grid. The speed is :math:`s_N = N` in the mean-field regime and
:math:`s_N = \\beta N^2` in the Coulomb-gas regime.
"""

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from meanfield.cli.figures import committed_figure_data

ds = xr.load_dataset(committed_figure_data("ldp_rate"))

fig, ax = plt.subplots(1, 2, figsize=(10, 4))
titles = ("mean-field: speed N", "Coulomb gas: speed βN²")
for axis, tag, title in zip(ax, ("mf", "cg"), titles, strict=True):
    err = np.hypot(ds[f"rate_se_{tag}"], ds[f"rate_quad_err_{tag}"])
    axis.errorbar(
        ds[f"N_{tag}"], ds[f"rate_{tag}"], yerr=2 * err, fmt="o-", capsize=3, label="Monte Carlo"
    )
    axis.axhline(float(ds[f"J_{tag}"]), color="k", ls="--", label="grid rate J(a)")
    axis.set(
        xscale="log",
        xlabel="number of particles N",
        ylabel="rate",
        title=f"{title}; a = {ds.attrs[f'a_{tag}']:.3g}",
    )
    axis.legend(fontsize=8)
fig.tight_layout()
plt.show()
