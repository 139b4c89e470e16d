"""
Noisy Kuramoto model: the order parameter's bifurcation at K_c = 2/β
====================================================================

The noisy Kuramoto model (mean-field XY rotators) on the circle [−π, π) (:doc:`../classic_models`):
:math:`d\\theta_i = -\\frac{K}{N}\\sum_j \\sin(\\theta_i - \\theta_j)\\,dt + \\sqrt{2D}\\,dB_i`,
whose limit is :math:`\\partial_t\\rho = \\partial_\\theta(\\rho\\,\\partial_\\theta(W*\\rho))
+ D\\,\\partial^2_\\theta\\rho` with :math:`W(\\theta) = -K\\cos\\theta`. In the package:
the domain ``Torus(1, half_width=π)``, ``PeriodicPairInteraction(Cosine(), lam=K/2)``,
β = 1/D = 1 (the run file ``paper_repro/gallery/kuramoto.toml``, read with
:meth:`~meanfield.dynamics.spec.RunSpec.from_toml`, with its coupling K changed).

**Known answer** (Kuramoto 1975; Strogatz 2000; Bertini–Giacomin–Pakdaman 2010). The
stationary states are the von Mises laws :math:`\\rho \\propto e^{\\beta K r\\cos(\\theta-\\psi)}`
whose order parameter :math:`r = |\\int e^{i\\theta}\\rho(d\\theta)|` solves

.. math::

   r = \\frac{I_1(\\beta K r)}{I_0(\\beta K r)} ,

so r = 0 (incoherence) is the only solution for βK ≤ 2 and a branch r* > 0 appears above
the critical coupling :math:`K_c = 2/\\beta` (r* = 0.831462 at βK = 4); the incoherent state
stays a solution above K_c but is unstable there.

**The package's numbers.** Circles: the grid's stationary state
(:func:`meanfield.gibbs_state`, damped Picard iteration from a von Mises bump, 64 cells of the
circle) at 20 couplings; its r is within 1.2e-3 of the self-consistency root at K = 2.1,
next to K_c where r varies fastest with K, and within 1.1e-4 from K = 3.9 on (the scheme's
error is O(h²): ``tests/test_classic_models.py``); below K_c it is the uniform law
(r < 1e-11). Squares: N = 200 particles (:func:`meanfield.simulate`, η = 0.01, one seed),
their r_N averaged over t ∈ [3, 10] (standard error about 0.005, scaled from the test's batch
means): 0.7242, 0.8249, 0.8742 at K = 3, 4, 5 against r* = 0.7242, 0.8315, 0.8768. Below
K_c the particles' r_N is not 0 but the size of the finite-N fluctuations of an incoherent
cloud, :math:`\\mathbb{E}\\,r_N \\approx \\sqrt{\\pi/(4N(1-\\beta K/2))}` (dotted: a complex
Gaussian order parameter of variance 1/N, enlarged by the linear response 1/(1 − βK/2)).

Computed live: about 7 s of CPU time (8 s of wall time on a shared, loaded 2-core machine).
"""

import dataclasses
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
from scipy.optimize import brentq
from scipy.special import i0e, i1e

import meanfield as mf
from meanfield.cli.figures import committed_figures_dir
from meanfield.dynamics.spec import RunSpec
from meanfield.energy import Energy, PeriodicPairInteraction
from meanfield.errors import MultipleStationaryStatesWarning
from meanfield.pde import Density, Grid

# small tensors: a second thread only adds synchronisation (ten times the run time on a
# loaded 2-core machine); the caller's setting is restored at the end
threads = torch.get_num_threads()
torch.set_num_threads(1)
# the run files of the checkout the package is imported from, whatever the working folder
# (sphinx-gallery defines no __file__)
GALLERY = committed_figures_dir().parent / "paper_repro" / "gallery"
spec = RunSpec.from_toml(GALLERY / "kuramoto.toml")
(term,) = spec.energy.terms
circle = spec.energy.domain
beta = spec.beta
K_c = 2.0 / beta


def self_consistency_root(beta_K):
    """The root r > 0 of r = I₁(βKr)/I₀(βKr) (0 for βK ≤ 2); scaled Bessel functions."""
    if beta_K <= 2.0:
        return 0.0
    return brentq(lambda r: i1e(beta_K * r) / i0e(beta_K * r) - r, 1e-9, 1.0, xtol=1e-14)


def kuramoto_energy(K):
    # 2λk = W = −K cos θ with k = Cosine() = −cos θ: λ = K/2
    return Energy([PeriodicPairInteraction(term.kernel, K / 2, domain=circle)], circle)


def order_parameter(theta, weights=None):
    """|∫ e^{iθ} ρ(dθ)|: of a density's cell values (with weights) or of particles."""
    if weights is None:
        return float(np.abs(np.exp(1j * theta).mean(-1)).mean())
    return float(abs(np.sum(weights * np.exp(1j * theta))))


# --- grid: the stationary state at each coupling ---------------------------------------------
grid = Grid(circle, 64)
theta_cells = grid.axes[0]
bump = Density.from_function(grid, lambda x: np.exp(np.cos(x[:, 0])))
K_grid = np.linspace(0.3, 6.0, 20)  # steps of 0.3: K = 2.0 itself (critical slowing) is skipped
r_grid = []
with warnings.catch_warnings():
    # every rotation of a von Mises state is stationary too: the zero mode of that symmetry
    # makes gibbs_state call the state "marginal" (σ_min = 0), which is the model, not a flaw
    warnings.simplefilter("ignore", MultipleStationaryStatesWarning)
    for K in K_grid:
        rho, report = mf.gibbs_state(kuramoto_energy(K), grid, beta, rho0=bump, search="single")
        if not report.converged:
            raise RuntimeError(f"gibbs_state did not converge at K = {K}")
        r_grid.append(order_parameter(theta_cells, np.asarray(rho.data) * grid.h[0]))

# --- particles: the file's run with its coupling changed, shortened to t = 10 ----------------
K_particles = np.array([1.0, 3.0, 4.0, 5.0])
r_particles = []
for K in K_particles:
    run = dataclasses.replace(spec, energy=kuramoto_energy(K), n_steps=1000)
    ds = mf.simulate(run, seed=0, record_every=25)
    later = ds["time"].values >= 3.0  # past the relaxation from the initial bump
    r_particles.append(order_parameter(ds["omega"].values[later, :, 0]))

# --- the known answer and the figure ---------------------------------------------------------
r_star = np.array([self_consistency_root(beta * K) for K in K_grid])
print(f"grid: max |r - r*| over {len(K_grid)} couplings = {np.max(np.abs(r_grid - r_star)):.1e}")
for K, r in zip(K_particles, r_particles, strict=True):
    print(f"particles: K = {K:g}, r_N = {r:.4f}, r* = {self_consistency_root(beta * K):.4f}")
K_fine = np.linspace(0.0, 6.2, 400)
r_exact = np.array([self_consistency_root(beta * K) for K in K_fine])
N = spec.n_particles
K_below = np.linspace(0.0, 0.8 * K_c, 50)

fig, ax = plt.subplots(figsize=(7, 4.5))
ax.plot(
    K_fine, r_exact, "k-", lw=1.5, label=r"self-consistency $r = I_1(\beta K r)/I_0(\beta K r)$"
)
ax.plot([K_c, K_fine[-1]], [0, 0], "k--", lw=1, label="incoherence $r = 0$ (unstable above $K_c$)")
ax.plot(K_grid, r_grid, "o", mfc="none", color="C0", label="grid: stationary state (64 cells)")
ax.plot(
    K_particles,
    r_particles,
    "s",
    color="C3",
    label=rf"particles: $r_N$, $N = {N}$, $t \in [3, 10]$",
)
ax.plot(
    K_below,
    np.sqrt(np.pi / (4 * N * (1 - beta * K_below / 2))),
    ":",
    color="C3",
    label=r"finite-$N$ incoherent level $\sqrt{\pi/(4N(1-\beta K/2))}$",
)
ax.axvline(K_c, color="0.5", ls=":", lw=1)
ax.annotate(r"$K_c = 2/\beta$", (K_c, 0.95), xytext=(K_c + 0.1, 0.95), fontsize=9)
ax.set(
    xlabel=r"coupling $K$",
    ylabel=r"order parameter $r = |\int e^{i\theta}\,\rho(d\theta)|$",
    title=rf"noisy Kuramoto model on the circle, $\beta = 1/D = {beta:g}$",
    ylim=(-0.03, 1.03),
)
ax.legend(fontsize=8, loc="lower right")
fig.tight_layout()
torch.set_num_threads(threads)
plt.show()
