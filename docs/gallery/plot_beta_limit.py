"""
β → ∞: the Gibbs state tends to the equilibrium measure
=======================================================

THEORY's β → ∞ limit: the mean-field Gibbs state :math:`\\rho_\\beta` (the minimiser of the free
energy :math:`F_\\beta = E + \\beta^{-1}\\int\\rho\\log\\rho`) tends to the equilibrium measure
:math:`\\mu^* = \\arg\\min E`, for the two closed-form cases of p = 1 with
:math:`V = \\omega^2/2`, :math:`\\lambda = 1/2`: the semicircle (log kernel) and the uniform law
on [−1, 1] (:math:`k = -|z|`). Left: :math:`W_2(\\rho_\\beta, \\mu^*)` on the grid, with the
:math:`\\beta^{-1}` reference slope. Right: N = 64 particles in both temperature regimes.
"""

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from meanfield.cli.figures import committed_figure_data

ds = xr.load_dataset(committed_figure_data("beta_limit"))

fig, ax = plt.subplots(1, 2, figsize=(10, 4))
beta = ds["beta_grid"].values
for case in ds["case"].values:
    ax[0].loglog(beta, ds["w2_grid"].sel(case=case), "o-", label=f"{case} (grid)")
ax[0].loglog(beta, ds["w2_grid"].values[0, 0] * beta[0] / beta, "k:", label=r"$\propto\beta^{-1}$")
ax[0].set(xlabel=r"$\beta$", ylabel=r"$W_2(\rho_\beta, \mu^*)$", title="grid")
ax[0].legend(fontsize=8)

for regime in ds["regime"].values:
    w = ds["w2_particles"].sel(regime=regime)
    se = w.std("seed", ddof=1) / np.sqrt(w.sizes["seed"])
    ax[1].errorbar(
        ds["beta_particles"], w.mean("seed"), yerr=2 * se, fmt="o-", capsize=3, label=regime
    )
ax[1].set(
    xscale="log",
    yscale="log",
    xlabel=r"$\beta$",
    ylabel=r"$W_2(\mu_N, \mu^*)$ (mean ± 2 s.e.)",
    title=f"particles, N = {ds.attrs['N_particles']}, uniform case",
)
ax[1].legend(fontsize=8)
fig.tight_layout()
plt.show()
