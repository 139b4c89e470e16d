"""Branches of stationary states followed in β, and the bifurcation diagram they draw.

:func:`follow_branches` solves for the stationary states of F_β (:func:`gibbs_state`'s
multi-start search) at each β of a sequence, starting each branch from its own state at the
previous β (continuation) and opening a new branch for every new state the symmetric and
tilted starts find.  Per β and branch it returns the order parameter ∫ f dρ / mass, the free
energy F_β and the stability σ_min (:func:`~meanfield.pde.stationary.second_variation_eigenvalue`);
:func:`plot_bifurcation` draws order parameter and free energy against β (stable branches
solid, unstable dashed).

The granular-media model (double well, attractive quadratic interaction) is the worked
example of :doc:`/stationary_states`: one symmetric branch below β_c, and above it two
ordered branches ±m*(β) of equal free energy with the symmetric branch turned unstable.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import xarray as xr

from .._validation import check_choice, check_positive
from ..errors import InputError, InputTypeError
from .grid import Grid
from .stationary import (
    DEFAULT_TILT,
    _gibbs_options,
    _grid_energy,
    _initial,
    _search_states,
    _tilted_starts,
)


def _statistic_cells(ge, statistic) -> np.ndarray:
    """f at the cell centres, grid shape: ω_1 by default, else ``statistic(centres)``."""
    centres = ge.grid.centers
    if statistic is None:
        f = centres[:, 0]
    elif callable(statistic):
        f = np.asarray(statistic(centres), dtype=float)
    else:
        raise InputTypeError(
            f"statistic must be None (the mean of ω_1) or a callable mapping the (M, p) array of "
            f"cell centres to M values, got {statistic!r}"
        )
    if f.shape != (centres.shape[0],) or not np.all(np.isfinite(f)):
        raise InputError(
            f"statistic must return {centres.shape[0]} finite values (one per cell centre), got "
            f"shape {f.shape}"
        )
    return f.reshape(ge.grid.shape)


def _check_betas(betas) -> np.ndarray:
    b = np.atleast_1d(np.asarray(betas, dtype=float))
    if b.ndim != 1 or b.size == 0 or not np.all(np.isfinite(b)) or not np.all(b > 0):
        raise InputError(
            f"betas must be a non-empty 1D sequence of finite values > 0, got {betas!r}"
        )
    return b


def _continue_branches(last: list, states: list, vol: float) -> dict:
    """Match the states found at this β to the branches alive at the previous one: greedily,
    the pair (branch, state) of smallest L1 distance ∫|ρ_prev − ρ| first (a branch's own
    start may converge to a neighbouring state, e.g. Newton from a slightly ordered state to
    the symmetric saddle, so the start that reached a state does not say whose it is).
    Unmatched branches end (``last[k] = None``); unmatched states open new branches.  Returns
    {branch: state} and updates ``last`` in place."""
    pairs = sorted(
        (float(np.sum(np.abs(d - st.density.data))) * vol, k, i)
        for k, d in enumerate(last)
        if d is not None
        for i, st in enumerate(states)
    )
    row, used_k, used_i = {}, set(), set()
    for _, k, i in pairs:
        if k in used_k or i in used_i:
            continue
        row[k] = states[i]
        used_k.add(k)
        used_i.add(i)
    for k in range(len(last)):
        last[k] = row[k].density.data if k in row else None
    for i, st in enumerate(states):
        if i not in used_i:
            row[len(last)] = st
            last.append(st.density.data)
    return row


def follow_branches(
    energy,
    grid: Grid | None,
    betas,
    *,
    statistic=None,
    method: str = "newton",
    mass: float = 1.0,
    tol: float = 1e-12,
    max_iter: int = 5000,
    tilt: float = DEFAULT_TILT,
) -> xr.Dataset:
    r"""Every branch of stationary states found along ``betas``, with its order parameter,
    free energy and stability.

    At each β the starts are each branch's state at the previous β (continuation), the
    uniform density, e^{−βU_ext} and the tilted densities e^{−β(U_ext ∓ h x_d)} of
    :func:`~meanfield.pde.gibbs_state`; every converged solve is a stationary state.  Each
    branch continues to the nearest state (in ∫|ρ_prev − ρ|, matched greedily, nearest pair
    first); a branch with no state left ends, and a state left over opens a new branch.  Steps
    in β should be small against the distance between branches.

    Parameters
    ----------
    energy : Energy or GridEnergy
    grid : Grid or None
    betas : sequence of float
        Inverse temperatures β > 0, in the order to follow them (small steps near a
        bifurcation keep the branches apart).
    statistic : callable, optional
        f: (M, p) array of cell centres -> (M,) values; the order parameter is
        ∫ f dρ / mass.  Default f(ω) = ω_1 (the mean of the first coordinate).
    method : {"newton", "picard"}
        The solver of :func:`~meanfield.pde.gibbs_state` (Newton default: it converges near
        the bifurcation, where the fixed point iteration slows down).
    mass, tol, max_iter, tilt :
        As :func:`~meanfield.pde.gibbs_state`.

    Returns
    -------
    xarray.Dataset
        Dimensions ``beta`` and ``branch`` (0, 1, ...); variables ``order_parameter``,
        ``free_energy`` (F_β, energy units) and ``min_eigenvalue`` (σ_min, dimensionless), NaN
        where the branch was not found at that β, ``present`` (bool) saying where it was, and
        ``stable`` (bool: σ_min > 1e-8; False where absent).

    Raises
    ------
    meanfield.errors.InputError
        ``betas`` empty, not finite or not > 0; a statistic of the wrong shape; another option
        out of range.

    See Also
    --------
    plot_bifurcation, meanfield.pde.gibbs_state,
    meanfield.pde.stationary.second_variation_eigenvalue

    References
    ----------
    - J. Chayes, V. Panferov, "The McKean–Vlasov equation in finite volume", J. Stat. Phys. 138
      (2010) 351–380.
    - J. A. Carrillo, R. S. Gvalani, G. A. Pavliotis, A. Schlichting, "Long-time behaviour and phase
      transitions for the McKean–Vlasov equation on the torus", Arch. Ration. Mech. Anal. 235 (2020)
      635–690.

    Examples
    --------
    The granular-media model, θ = 1 (λ = θ/2), across β_c ≈ 2.188: one symmetric branch,
    then two ordered ones of equal free energy, while the symmetric one turns unstable.

    >>> from meanfield.domains import Box
    >>> from meanfield.energy import DoubleWellPotential, Energy, PairInteraction
    >>> from meanfield.kernels import Quadratic
    >>> from meanfield.pde import Grid
    >>> from meanfield.pde.branches import follow_branches
    >>> g = Grid(Box(1, 3.0), 64)
    >>> E = Energy([DoubleWellPotential(), PairInteraction(Quadratic(), lam=0.5)], g.domain)
    >>> ds = follow_branches(E, g, [2.0, 3.0])
    >>> ds["present"].values.tolist()
    [[True, False, False], [True, True, True]]
    >>> (ds["order_parameter"].sel(beta=3.0).values.round(4) + 0.0).tolist()  # + 0.0: no -0.0
    [0.0, 0.6373, -0.6373]
    >>> ds["stable"].sel(beta=3.0).values.tolist()
    [False, True, True]
    """
    ge = _grid_energy(energy, grid)
    check_choice("method", method, ("newton", "picard"))
    _, mass, _, tol, max_iter = _gibbs_options(1.0, method, mass, 0.5, tol, max_iter)
    tilt = check_positive("tilt", tilt)
    b_arr = _check_betas(betas)
    f = _statistic_cells(ge, statistic)
    vol = ge.grid.cell_volume
    uniform = _initial(ge, None, mass)
    last: list = []  # per branch: its density at the previous β, or None once it ended
    rows: list = []  # per β: {branch: StationaryState}
    for beta in b_arr:
        beta = float(beta)
        own = [(f"branch{k}", d) for k, d in enumerate(last) if d is not None]
        starts = [*own, ("uniform", uniform), *_tilted_starts(ge, beta, mass, tilt)]
        states, _, _ = _search_states(ge, starts, beta, method, mass, 0.5, tol, max_iter)
        row = _continue_branches(last, states, vol)
        rows.append(row)
    n_b = len(last)
    shape = (len(b_arr), n_b)
    order = np.full(shape, math.nan)
    free = np.full(shape, math.nan)
    sigma = np.full(shape, math.nan)
    present = np.zeros(shape, dtype=bool)
    stable = np.zeros(shape, dtype=bool)
    for i, row in enumerate(rows):
        for k, st in row.items():
            order[i, k] = float(np.sum(st.density.data * f)) * vol / mass
            free[i, k] = st.free_energy
            sigma[i, k] = st.min_eigenvalue
            present[i, k], stable[i, k] = True, st.stable
    dims = ("beta", "branch")
    return xr.Dataset(
        {
            "order_parameter": (dims, order),
            "free_energy": (dims, free),
            "min_eigenvalue": (dims, sigma),
            "present": (dims, present),
            "stable": (dims, stable),
        },
        coords={"beta": b_arr, "branch": np.arange(n_b)},
        attrs={
            "method": method,
            "statistic": "mean of omega_1" if statistic is None else repr(statistic),
            "cells": int(ge.grid.size),
            "tol": tol,
            "energy": repr(ge.energy.describe()),
            "torch": torch.__version__,
        },
    )


def plot_bifurcation(diagram: xr.Dataset, *, axes=None):
    """The bifurcation diagram of :func:`follow_branches`: order parameter and free energy
    against β, stable branches solid, unstable (saddles) dashed.

    Parameters
    ----------
    diagram : xarray.Dataset
        The result of :func:`follow_branches`.
    axes : pair of matplotlib Axes, optional
        Where to draw (default: a new figure with two panels side by side).

    Returns
    -------
    matplotlib.figure.Figure

    See Also
    --------
    follow_branches : the diagram this draws.
    meanfield.pde.stationary.gibbs_state : the states at one β.
    meanfield.pde.stationary.second_variation_eigenvalue : the stability that picks solid or dashed.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import DoubleWellPotential, Energy, PairInteraction
    >>> from meanfield.kernels import Quadratic
    >>> from meanfield.pde import Grid
    >>> from meanfield.pde.branches import follow_branches, plot_bifurcation
    >>> g = Grid(Box(1, 3.0), 48)
    >>> E = Energy([DoubleWellPotential(), PairInteraction(Quadratic(), lam=0.5)], g.domain)
    >>> fig = plot_bifurcation(follow_branches(E, g, [2.0, 2.5, 3.0]))
    >>> [ax.get_ylabel() for ax in fig.axes]
    ['order parameter', 'free energy $F_\\\\beta$']
    """
    import matplotlib.pyplot as plt

    if not isinstance(diagram, xr.Dataset) or "order_parameter" not in diagram:
        raise InputTypeError("diagram must be the xarray.Dataset returned by follow_branches")
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), constrained_layout=True)
    else:
        fig = axes[0].figure
    beta = diagram["beta"].values
    for k in diagram["branch"].values:
        br = diagram.sel(branch=k)
        colour = f"C{int(k) % 10}"
        for name, ax in zip(("order_parameter", "free_energy"), axes, strict=True):
            y = br[name].values
            st = br["stable"].values
            ax.plot(beta, np.where(st, y, np.nan), "-", color=colour, label=f"branch {k}")
            ax.plot(beta, np.where(br["present"].values & ~st, y, np.nan), "--", color=colour)
    axes[0].set_ylabel("order parameter")
    axes[1].set_ylabel(r"free energy $F_\beta$")
    for ax in axes:
        ax.set_xlabel(r"$\beta$")
    axes[0].legend(title="solid: stable, dashed: unstable", fontsize="small")
    return fig
