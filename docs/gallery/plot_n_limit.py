"""
N → ∞: particles against the McKean–Vlasov density
==================================================

Propagation of chaos: the Wasserstein distance between N particles (projected Langevin,
mean-field regime) and the grid solution :math:`\\rho_t` of the McKean–Vlasov equation
started from the same law, at several times, on ``meanfield.workbench.compare``'s default 1D
problem. Mean ± 2 standard errors over 8 seeds; the dotted line is the iid rate :math:`N^{-1/2}`.
"""

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from meanfield.cli.figures import committed_figure_data

ds = xr.load_dataset(committed_figure_data("n_limit"))

n = ds["N"].values
fig, ax = plt.subplots(figsize=(6, 4))
for i in range(1, ds.sizes["time"]):
    w2 = ds["w2"].isel(time=i)
    se = w2.std("seed", ddof=1) / np.sqrt(w2.sizes["seed"])
    rate = float(ds["rate_w2"].isel(time=i))
    ax.errorbar(
        n,
        w2.mean("seed"),
        yerr=2 * se,
        fmt="o-",
        capsize=3,
        label=f"t = {float(ds['time'][i]):.2g}: fitted N^{rate:.2f}",
    )
ax.plot(
    n, ds["w2"].isel(time=-1).mean("seed").values[0] * np.sqrt(n[0] / n), "k:", label=r"$N^{-1/2}$"
)
ax.set(
    xscale="log", yscale="log", xlabel="number of particles N", ylabel=r"$W_2(\mu_N(t), \rho_t)$"
)
ax.legend(fontsize=7)
fig.tight_layout()
plt.show()
