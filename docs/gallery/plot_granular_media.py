"""
Granular media: the Curie–Weiss phase transition
================================================

The granular-media (Curie–Weiss) model of THEORY §8 (:doc:`../stationary_states`): the double well
:math:`V = \\omega^4/4 - \\omega^2/2` with the attraction :math:`W = \\theta\\omega^2/2`
(``PairInteraction(Quadratic(), lam=θ/2)``, θ = 1), on the box [−3, 3]. Every branch of
stationary states from β = 1 to 4 (:func:`~meanfield.pde.branches.follow_branches`, Newton on
a 128-cell grid), drawn by :func:`~meanfield.pde.branches.plot_bifurcation`: left, the order
parameter :math:`m = \\int\\omega\\,d\\rho`; right, the free energy
:math:`F_\\beta = E + \\beta^{-1}\\int\\rho\\log\\rho`. Stable states solid, unstable (saddles)
dashed. Below the critical :math:`\\beta_c = 2.18844` (the self-consistency
:math:`\\beta\\theta\\,\\mathrm{Var}_0(\\omega) = 1`, by quadrature: :doc:`../stationary_states`)
the symmetric state m = 0 is the only one; above it, two ordered states ±m* of equal free
energy branch off and the symmetric state turns into a saddle of higher free energy (a
pitchfork). The dotted line marks β_c.

Computed live: about 6 s of CPU time (13 s of wall time on a shared, loaded 2-core machine).
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np

from meanfield.domains import Box
from meanfield.energy import DoubleWellPotential, Energy, PairInteraction
from meanfield.kernels import Quadratic
from meanfield.pde import Grid
from meanfield.pde.branches import follow_branches, plot_bifurcation

THETA = 1.0
BETA_C = 2.18844  # βθ Var_0(ω) = 1, Var_0 the variance of e^{−βV}/Z (scipy quad + brentq)

grid = Grid(Box(1, 3.0), 128)
energy = Energy([DoubleWellPotential(), PairInteraction(Quadratic(), lam=THETA / 2)], grid.domain)
# steps of 0.05 in β keep the branches apart near the bifurcation (follow_branches' notes)
betas = np.round(np.linspace(1.0, 4.0, 61), 10)
with warnings.catch_warnings():
    # above β_c every β finds several states: that is the figure, not a problem
    warnings.simplefilter("ignore")
    diagram = follow_branches(energy, grid, betas)

fig = plot_bifurcation(diagram)
for ax in fig.axes:
    ax.axvline(BETA_C, color="k", ls=":", lw=1)
fig.axes[0].annotate(
    r"$\beta_c = 2.18844$",
    (BETA_C, 0.0),
    xytext=(BETA_C + 0.15, -0.3),
    fontsize=9,
)
fig.suptitle(r"granular media, $\theta = 1$, box $[-3, 3]$, 128 cells")
plt.show()
