"""
Particles relax to a closed-form equilibrium
============================================

A run of the package itself, small enough to take seconds. N = 200 particles in p = 1 with
the energy of THEORY §5's uniform case,

.. math::

    H_N(\\Omega) = \\frac1N \\sum_i \\frac{\\omega_i^2}{2}
    + \\frac{1}{2N^2} \\sum_{i \\ne j} \\big(-|\\omega_i - \\omega_j|\\big),

evolve by projected Langevin in the Coulomb-gas regime (:math:`\\beta_N = \\beta N`). Their
empirical measure approaches the equilibrium measure :math:`\\mu^*`, the uniform law on
[−1, 1] (:class:`meanfield.closed_forms.UniformInterval`); the distance is the exact
:math:`W_2` of :func:`meanfield.closed_forms.wasserstein_to_law_1d`. It decays exponentially,
then levels off at a floor set by the temperature 1/β_N and by finite N (N equal atoms are at
least (2/N)/√12 ≈ 0.003 from the uniform law in W₂ for N = 200).
"""

import matplotlib.pyplot as plt
import numpy as np
import torch

from meanfield.closed_forms import UniformInterval, wasserstein_to_law_1d
from meanfield.domains import Box
from meanfield.dynamics.langevin import simulate
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.kernels import Riesz

torch.set_num_threads(1)  # N = 200: one thread is fastest; more only contend for the cores

energy = Energy(
    [QuadraticPotential(1.0), PairInteraction(Riesz(-1.0), lam=0.5)],  # V = ω²/2, k = −|z|
    Box(1, 3.0),
)
generator = torch.Generator().manual_seed(0)
omega0 = 0.3 * torch.randn(200, 1, generator=generator, dtype=torch.float64)
ds = simulate(
    energy, omega0, eta=0.01, beta=50.0, n_steps=600, regime="coulomb-gas", record_every=20, seed=0
)

law = UniformInterval()
w2 = [wasserstein_to_law_1d(ds["omega"].isel(time=i).values, law) for i in range(ds.sizes["time"])]

fig, ax = plt.subplots(1, 2, figsize=(10, 4))
final = ds["omega"].isel(time=-1).values.ravel()
ax[0].hist(final, bins=20, range=(-1.2, 1.2), density=True, alpha=0.6, label="particles, t = 6")
x = np.linspace(-1.2, 1.2, 481)
ax[0].plot(x, law.pdf(x), "k--", label=r"$\mu^*$: uniform on [−1, 1]")
ax[0].set(xlabel="ω", ylabel="density", title="final empirical measure")
ax[0].legend(fontsize=8)
ax[1].semilogy(ds["time"], w2, "o-", ms=3)
ax[1].set(
    xlabel="time t = η · steps",
    ylabel=r"$W_2(\mu_N(t), \mu^*)$",
    title="distance to the equilibrium measure",
)
fig.tight_layout()
plt.show()
