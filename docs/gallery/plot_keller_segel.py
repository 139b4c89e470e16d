"""
Keller–Segel in R²: the virial identity on both sides of the critical mass 8π
=============================================================================

The parabolic–elliptic Keller–Segel model (:doc:`../classic_models`):
:math:`\\partial_t\\rho = \\Delta\\rho - \\chi\\nabla\\cdot(\\rho\\nabla c)`,
:math:`c = -\\frac{1}{2\\pi}\\log|\\cdot| * \\rho`, mass M. Written for the probability
density ρ/M it is the package's McKean–Vlasov equation with β = 1, no potential and the
pair term ``PairInteraction(Riesz(s=0), lam=−χM/4π)`` (an attractive logarithmic kernel,
softened at ε = 0.05 for the particles): the run files
``paper_repro/gallery/keller_segel_subcritical.toml`` (χM = 4π, λ = −1) and
``keller_segel_supercritical.toml`` (χM = 12π, λ = −3), read with
:meth:`~meanfield.dynamics.spec.RunSpec.from_toml`.

**Known answer** (Jäger–Luckhaus 1992; Blanchet–Dolbeault–Perthame 2006; Perthame 2007,
ch. 5). The second moment obeys the virial identity, exact in free space,

.. math::

   \\frac{d}{dt}\\int |x|^2 \\frac{\\rho}{M}\\,dx = 4\\Big(1 - \\frac{\\chi M}{8\\pi}\\Big)
   = \\frac{4}{\\beta} + 2\\lambda ,

+2 below the critical mass (χM = 4π: the density spreads) and −2 above it (χM = 12π: the
second moment would turn negative at t = S(0)/2 = 4/3, so the density concentrates and
blows up in finite time). Dashed: these lines; dotted: free diffusion (slope 4).

**The package's numbers.** Markers: the files' particle runs (:func:`meanfield.simulate`,
N = 400, 8 seeds, from the uniform law on [−2, 2]²; mean of S_N(t) − S_N(0) ± 2 standard
errors over the seeds), to t = 1 and t = 1/4 as in the files. Solid: the grid's flow
(``spec.equation()`` and :func:`meanfield.pde.solve`, upwind, 96² cells of [−12, 12]²,
h = 1/4) from the Gaussian of the same second moment 8/3 (smooth: a square's edges add an
O(h) transient). Their rates meet the virial slopes within the softening's 2|λ|⟨ε²/(r² +
ε²)⟩ (0.005 and 0.02) and the grid's O(h²) error (checked in
``tests/test_classic_models.py``; the rates are printed below).

Computed live: about 5 s of CPU time (5 s of wall time on a shared, loaded 2-core machine).
"""

import dataclasses
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import meanfield as mf
from meanfield.cli.figures import committed_figures_dir
from meanfield.dynamics.spec import RunSpec
from meanfield.pde import Density, Grid

# small tensors: a second thread only adds synchronisation (ten times the run time on a
# loaded 2-core machine); the caller's setting is restored at the end
threads = torch.get_num_threads()
torch.set_num_threads(1)
# the run files of the checkout the package is imported from, whatever the working folder
# (sphinx-gallery defines no __file__)
GALLERY = committed_figures_dir().parent / "paper_repro" / "gallery"
FILES = ("keller_segel_subcritical", "keller_segel_supercritical")
SEEDS = range(8)
N_CELLS = 96


def particle_second_moment(spec):
    """Times and the seeds' S_N(t) − S_N(0), S_N = (1/N) Σ |x_i|², shape (seed, time)."""
    runs = [mf.simulate(spec, seed=s, record_every=spec.n_steps // 8) for s in SEEDS]
    S = np.stack([(ds["omega"].values ** 2).sum(-1).mean(-1) for ds in runs])
    return runs[0]["time"].values, S - S[:, :1]


def grid_second_moment(spec, n_times=16):
    """Times and S(t) − S(0) of the grid's flow from the Gaussian with S(0) = 8/3."""
    grid = Grid(spec.energy.domain, [N_CELLS, N_CELLS])
    r2 = (np.asarray(grid.centers).reshape(N_CELLS, N_CELLS, 2) ** 2).sum(-1)
    rho = Density(grid, np.exp(-r2 / (2 * 4 / 3))).normalised()  # variance 4/3 per axis
    # the file's model with this initial law: the grid is the initial law's
    equation = dataclasses.replace(spec, initial=rho).equation()
    times = np.linspace(0.0, spec.t_final, n_times + 1)
    S = [float((np.asarray(rho.data) * r2).sum() * grid.cell_volume)]
    for t0, t1 in zip(times[:-1], times[1:], strict=True):
        rho = mf.pde.solve(equation, rho, (float(t0), float(t1))).state
        S.append(float((np.asarray(rho.data) * r2).sum() * grid.cell_volume))
    return times, np.array(S) - S[0]


fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
for ax, name in zip(axes, FILES, strict=True):
    spec = RunSpec.from_toml(GALLERY / f"{name}.toml")
    lam = spec.energy.terms[0].lam
    chi_mass = -4 * math.pi * lam  # λ = −χM/(4π)
    virial = 4 * (1 - chi_mass / (8 * math.pi))  # = 4/β + 2λ

    t_p, dS_p = particle_second_moment(spec)
    mean, se = dS_p.mean(0), dS_p.std(0, ddof=1) / math.sqrt(len(SEEDS))
    t_g, dS_g = grid_second_moment(spec)
    print(
        f"χM = {chi_mass / math.pi:.0f}π: virial rate {virial:+.3f}; "
        f"particles {mean[-1] / t_p[-1]:+.3f} ± {se[-1] / t_p[-1]:.3f} (1 s.e.); "
        f"grid {dS_g[-1] / t_g[-1]:+.3f}"
    )

    t_line = np.array([0.0, spec.t_final])
    ax.plot(t_line, 4 / spec.beta * t_line, ":", color="0.5", label="free diffusion (slope 4)")
    ax.plot(
        t_line, virial * t_line, "k--", label=rf"virial: slope $4(1 - \chi M/8\pi) = {virial:+g}$"
    )
    ax.plot(t_g, dS_g, "-", color="C0", label=rf"grid: ${N_CELLS}^2$ cells, $h = 1/4$")
    ax.errorbar(
        t_p,
        mean,
        yerr=2 * se,
        fmt="s",
        color="C3",
        capsize=3,
        ms=4,
        label=rf"particles: $N = {spec.n_particles}$, {len(SEEDS)} seeds (±2 s.e.)",
    )
    regime = "subcritical, spreading" if virial > 0 else "supercritical, concentrating"
    ax.set(
        xlabel=r"time $t$",
        ylabel=r"$S(t) - S(0)$,  $S = \int |x|^2 \rho\,dx / M$",
        title=rf"$\chi M = {chi_mass / math.pi:.0f}\pi$ ({regime})",
    )
    ax.legend(fontsize=8, loc="upper left")
fig.suptitle("Keller–Segel in R²: the second moment against the virial identity")
fig.tight_layout()
torch.set_num_threads(threads)
plt.show()
