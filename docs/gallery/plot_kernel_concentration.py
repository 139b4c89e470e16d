"""
Concentration of the learned kernel
===================================

The probability that the learned kernel on the data deviates from its mean-field limit by
more than ε, :math:`P(\\max_{jk}|K_{\\mu_N}(x_j, x_k) - K_{\\rm ref}(x_j, x_k)| > \\varepsilon)`,
decays exponentially: in N in the mean-field regime (β = 2, reference :math:`\\rho_\\beta`),
and in β in the Coulomb-gas regime (N = 16, reference :math:`\\mu^*`). Estimated from 200
replicas; ± 2 standard errors.
"""

import matplotlib.pyplot as plt
import xarray as xr

from meanfield.cli.figures import committed_figure_data

ds = xr.load_dataset(committed_figure_data("kernel_concentration"))

fig, ax = plt.subplots(1, 2, figsize=(10, 4))
for axis, x, unit in ((ax[0], "N", "/N"), (ax[1], "beta", "/β")):
    for eps in ds[f"eps_{x}"].values:
        p = ds[f"prob_{x}"].sel({f"eps_{x}": eps}).values
        se = ds[f"prob_se_{x}"].sel({f"eps_{x}": eps}).values
        ok = p > 0  # a log axis cannot show the zero estimates
        rate = float(ds[f"decay_rate_{x}"].sel({f"eps_{x}": eps}))
        axis.errorbar(
            ds[x].values[ok],
            p[ok],
            yerr=2 * se[ok],
            fmt="o-",
            capsize=3,
            label=f"ε = {eps:g}: rate {rate:.3f}{unit}",
        )
    axis.set(yscale="log", ylabel="P(max gap > ε)")
    axis.legend(fontsize=8)
ax[0].set(xlabel="number of particles N", title="mean-field regime, β = 2")
ax[1].set(xlabel=r"$\beta$", title="Coulomb-gas regime, N = 16")
fig.tight_layout()
plt.show()
