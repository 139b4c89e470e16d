"""
The Coulomb gas in R³
=====================

For :math:`V = |\\omega|^2/2`, :math:`k(z) = 1/|z|`, :math:`\\lambda = 1/2` in p = 3, the
equilibrium measure is the uniform law on the unit ball. Left: the radial profile of HMC
particles (Coulomb-gas regime, β = 2) and of the β = ∞ grid equilibrium, divided by the
ball's density. Right: the grid's errors against the ball as the cell width h shrinks, with
the :math:`h^2` reference slope.
"""

import matplotlib.pyplot as plt
import xarray as xr

from meanfield.cli.figures import committed_figure_data

ds = xr.load_dataset(committed_figure_data("coulomb3d"))

fig, ax = plt.subplots(1, 2, figsize=(10, 4))
r = ds["r"].values
ax[0].step(r, ds["profile_grid"], where="mid", label=f"grid ({ds.attrs['n_grid']}³, β = ∞)")
ax[0].step(
    r,
    ds["profile_particles"],
    where="mid",
    label=f"HMC, N = {ds.attrs['N_profile']}, β = {ds.attrs['beta']:g}",
)
ax[0].plot([0, 1, 1, r[-1]], [1, 1, 0, 0], "k--", label="uniform unit ball")
ax[0].set(xlabel="|ω|", ylabel="shell density / (3/4π)", title="radial profile")
ax[0].legend(fontsize=8)

h = ds["grid_h"].values
for key, label in (
    ("grid_radius_error", "|radius − 1|"),
    ("grid_energy_error", "|E_h(μ*_h) − 9/10|"),
):
    ax[1].plot(h, ds[key], "o-", label=label)
ax[1].plot(h, float(ds["grid_energy_error"][-1]) * (h / h[-1]) ** 2, "k:", label="h²")
ax[1].set(
    xscale="log",
    yscale="log",
    xlabel="cell width h",
    ylabel="error",
    title="grid equilibrium vs the ball",
)
ax[1].legend(fontsize=8)
fig.tight_layout()
plt.show()
