"""
Dyson Brownian motion: the second moment relaxes at rate 2, the law stays a semicircle
======================================================================================

Dyson Brownian motion with the Ornstein–Uhlenbeck drift (Dyson 1962; :doc:`../classic_models`):
:math:`dx_i = \\big(-x_i + \\frac{1}{N}\\sum_{j\\ne i}\\frac{1}{x_i - x_j}\\big)dt
+ \\sqrt{2/(\\beta N)}\\,dW_i` with β = 2 (GUE). In the package: V = x²/2
(``QuadraticPotential``), the pair term ``PairInteraction(Riesz(s=0), lam=1/2)`` (k = −log|z|,
unsoftened), the Coulomb-gas regime β_N = βN: the run file ``paper_repro/gallery/dyson.toml``,
read with :meth:`~meanfield.dynamics.spec.RunSpec.from_toml`, here with N = 50 particles and
run to t = 1.5.

**Known answer.** Itô's formula for :math:`S = \\frac{1}{N}\\sum_i x_i^2`, with
:math:`\\sum_{i\\ne j} x_i/(x_i - x_j) = N(N-1)/2`, gives at every N

.. math::

   \\mathbb{E}[S](t) = S_\\infty + (S(0) - S_\\infty)\\,e^{-2t}, \\qquad
   S_\\infty = \\frac{N-1}{2N} + \\frac{1}{\\beta N} = \\frac{1}{2} \\text{ at } \\beta = 2 ,

and as N → ∞ the law solves the free Ornstein–Uhlenbeck flow (Voiculescu 1991; Biane 1997):
a semicircle of variance v₀ stays a semicircle, of variance 1/2 + (v₀ − 1/2)e^{−2t}, relaxing
to the equilibrium semicircle on [−√2, √2].

**The package's numbers.** Left: S(t) of 12 seeds (:func:`meanfield.simulate`, η = 0.002,
from the semicircle of radius 2, variance 1; thin lines), their mean ± 2 standard errors
(markers; the standard error of the seeds' residuals S(t) − E[S](t | S(0)), 1.8e-3 to
4.7e-3, which leaves out the scatter of the initial samples) and the exact E[S](t) from the
seeds' mean S(0) (black); the mean residual is at most 1.0e-2, 2.7 standard errors (printed
below). Right: the positions of all seeds at t = 0.25 and t = 1.5 against the semicircles
of the limit's variance at those times. ``tests/test_classic_models.py`` checks the
residuals (N = 100, 8 seeds: ≤ 1.4e-3 against standard errors of 2.5e-3 to 5e-3) and the
semicircle's moment ratio m₄/(2m₂²) = 1.

Computed live: about 7 s of CPU time (7 s of wall time on a shared, loaded 2-core machine).
"""

import dataclasses
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import meanfield as mf
from meanfield.cli.figures import committed_figures_dir
from meanfield.dynamics.spec import RunSpec

# small tensors: a second thread only adds synchronisation (ten times the run time on a
# loaded 2-core machine); the caller's setting is restored at the end
threads = torch.get_num_threads()
torch.set_num_threads(1)
# the run files of the checkout the package is imported from, whatever the working folder
# (sphinx-gallery defines no __file__)
GALLERY = committed_figures_dir().parent / "paper_repro" / "gallery"
spec = RunSpec.from_toml(GALLERY / "dyson.toml")
# the file's model and initial law, with fewer particles and to t = 1.5
spec = dataclasses.replace(spec, n_particles=50, n_steps=750)
SEEDS = range(12)
N, beta = spec.n_particles, spec.beta

runs = [mf.simulate(spec, seed=s, record_every=25) for s in SEEDS]
t = runs[0]["time"].values
x = np.stack([ds["omega"].values[..., 0] for ds in runs])  # (seed, time, N)
S = (x**2).mean(-1)  # (seed, time)
mean = S.mean(0)

s_inf = (N - 1) / (2 * N) + 1 / (beta * N)  # = 1/2 at β = 2, for every N


def expected_second_moment(S0, times):
    """E[S](t) given S(0) = S0: exact at every N (Itô)."""
    return s_inf + (S0 - s_inf) * np.exp(-2 * times)


# each seed against the exact curve from its own S(0): the scatter of the initial samples
# (standard error 0.04 at t = 0) then drops out of the comparison, as in the test
residual = S - expected_second_moment(S[:, :1], t)
se = residual.std(0, ddof=1) / math.sqrt(len(SEEDS))
later = t > 0
print(f"S_inf = {s_inf:g}")
print(
    f"mean residual S - E[S | S(0)]: max |.| = {np.abs(residual.mean(0)).max():.1e}, "
    f"max |.|/s.e. = {np.max(np.abs(residual.mean(0)[later]) / se[later]):.2f} "
    f"(s.e. {se[later].min():.1e} to {se.max():.1e})"
)
t_fine = np.linspace(0.0, t[-1], 200)
exact = expected_second_moment(mean[0], t_fine)  # linear in S(0): the mean of the seeds' curves


def semicircle(xs, variance):
    """Density of the semicircle law of the given variance (radius R = 2√variance)."""
    R2 = 4 * variance
    return 2 / (math.pi * R2) * np.sqrt(np.clip(R2 - xs**2, 0.0, None))


fig, ax = plt.subplots(1, 2, figsize=(10, 4.2))
ax[0].plot(t, S.T, color="C0", lw=0.6, alpha=0.5)
ax[0].errorbar(
    t[::2],
    mean[::2],
    yerr=2 * se[::2],
    fmt="s",
    color="C3",
    ms=4,
    capsize=3,
    label=rf"particles: mean of {len(SEEDS)} seeds, $N = {N}$ (±2 s.e. of the residual)",
)
ax[0].plot(t_fine, exact, "k-", lw=1.5, label=r"exact $S_\infty + (S(0) - S_\infty)\,e^{-2t}$")
ax[0].axhline(s_inf, color="0.5", ls=":", lw=1, label=rf"$S_\infty = {s_inf:g}$")
ax[0].set(
    xlabel=r"time $t$",
    ylabel=r"$S(t) = \frac{1}{N}\sum_i x_i^2$",
    title=r"second moment (thin lines: single seeds)",
)
ax[0].legend(fontsize=8)

xs = np.linspace(-2.2, 2.2, 400)
bins = np.linspace(-2.2, 2.2, 23)
for t_snap, color in ((0.25, "C1"), (1.5, "C2")):
    i = int(np.argmin(np.abs(t - t_snap)))
    variance = 0.5 + (1.0 - 0.5) * math.exp(-2 * t[i])  # the limit's, from variance 1
    ax[1].hist(x[:, i].ravel(), bins=bins, density=True, color=color, alpha=0.35)
    ax[1].plot(
        xs,
        semicircle(xs, variance),
        color=color,
        label=rf"$t = {t[i]:g}$: semicircle, var {variance:.3f}",
    )
ax[1].set(
    xlabel=r"$x$",
    ylabel="density",
    title=rf"positions of {len(SEEDS)} seeds $\times$ {N} (histograms)",
)
ax[1].set_ylim(0, 0.62)
ax[1].legend(fontsize=8, loc="upper left")
fig.suptitle(rf"Dyson Brownian motion, $\beta = {beta:g}$, $V = x^2/2$")
fig.tight_layout()
torch.set_num_threads(threads)
plt.show()
