"""
t → ∞: exponential decay of the free energy
===========================================

Along the McKean–Vlasov flow the free-energy gap :math:`F_\\beta(\\rho_t) - F_\\beta(\\rho_\\beta)`
decays exponentially under a log-Sobolev inequality (β = 1, 512 cells). The legend gives
the fitted rate with its confidence interval, for the Ornstein–Uhlenbeck case (no
interaction) and for :math:`V = \\omega^2/2`, :math:`k = -|z|`.
"""

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from meanfield.cli.figures import committed_figure_data

ds = xr.load_dataset(committed_figure_data("t_limit"))

fig, ax = plt.subplots(figsize=(6, 4))
for model in ds["model"].values:
    sel = ds.sel(model=model)
    gap = np.where(sel["gap"] > 0, sel["gap"], np.nan)  # log axis: drop the round-off floor
    ax.semilogy(ds["time"], gap, label=f"{model}: rate {float(sel['rate']):.3f}")
ax.set(xlabel="time t", ylabel=r"$F_\beta(\rho_t) - F_\beta(\rho_\beta)$")
ax.legend(fontsize=7)
fig.tight_layout()
plt.show()
