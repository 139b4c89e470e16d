"""Figures from result datasets (no pyplot state: each function builds its own Figure)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def _save(fig: Figure, path) -> None:
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        FigureCanvasAgg(fig)
        fig.savefig(path, dpi=130, bbox_inches="tight")


def plot_comparison(ds: xr.Dataset, path=None, *, n_snapshots: int = 4) -> Figure:
    """Particles vs grid from a :func:`meanfield.compare.compare` dataset.

    Panels: (a) the grid density at a few times with the particle histograms (p = 1), or the
    final density with the particles on top (p = 2); (b) W2 (and W1) between them over time;
    (c) the grid energy E(ρ_t) and free energy F_β(ρ_t) next to the particle energy H_N(Ω_t);
    (d) the kernel gap on the data, when the dataset has one.

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`~meanfield.compare.compare`.
    path : path, optional
        Write a PNG there.
    n_snapshots : int
        Number of times shown in panel (a) for p = 1.

    Returns
    -------
    matplotlib.figure.Figure
    """
    for v in ("omega", "rho", "w2"):
        if v not in ds:
            raise ValueError(f"dataset lacks {v!r}: pass the output of meanfield.compare.compare")
    p = ds.sizes["dim"]
    has_gap = "kernel_gap" in ds
    ncol = 4 if has_gap else 3
    fig = Figure(figsize=(4.2 * ncol, 3.6), layout="constrained")
    axes = fig.subplots(1, ncol)
    t = ds["time"].values
    N = ds.sizes["particle"]
    ax = axes[0]
    if p == 1:
        x = ds["x"].values
        h = x[1] - x[0]
        edges = np.concatenate([x - h / 2, [x[-1] + h / 2]])
        picks = np.unique(np.linspace(0, len(t) - 1, n_snapshots).round().astype(int))
        colors = [f"C{i}" for i in range(len(picks))]
        for c, k in zip(colors, picks, strict=True):
            ax.hist(
                ds["omega"].values[k, :, 0],
                bins=edges[:: max(1, len(x) // 48)],
                density=True,
                color=c,
                alpha=0.25,
            )
            ax.plot(x, ds["rho"].values[k], color=c, label=f"t = {t[k]:.2g}")
        ax.set_xlabel("ω")
        ax.set_ylabel("density")
        ax.legend(fontsize=8)
        ax.set_title(f"(a) grid ρ_t (lines), N = {N} particles (bars)", fontsize=9)
    else:
        x, y = ds["x"].values, ds["y"].values
        im = ax.pcolormesh(x, y, ds["rho"].values[-1].T, shading="nearest", cmap="viridis")
        pts = ds["omega"].values[-1]
        sub = pts[:: max(1, len(pts) // 2000)]
        ax.scatter(sub[:, 0], sub[:, 1], s=2, c="w", alpha=0.6)
        ax.set_aspect("equal")
        ax.set_xlabel("ω₁")
        ax.set_ylabel("ω₂")
        fig.colorbar(im, ax=ax, shrink=0.8, label="grid density ρ (cell average)")
        ax.set_title(f"(a) ρ and N = {N} particles at t = {t[-1]:.2g}", fontsize=9)
    ax = axes[1]
    ax.plot(t, ds["w2"].values, "o-", ms=3, label=ds["w2"].attrs.get("long_name", "W2"))
    if "w1" in ds and np.isfinite(ds["w1"].values).any():
        ax.plot(t, ds["w1"].values, "s--", ms=3, label="W1")
    ax.axhline(1 / np.sqrt(N), color="0.6", lw=0.8, ls=":", label="N^(-1/2)")
    ax.set_xlabel("t")
    ax.set_ylabel("Wasserstein distance (unit of ω)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("(b) distance particles vs grid", fontsize=9)
    ax = axes[2]
    ax.plot(t, ds["energy_grid"].values, "-", label="E(ρ_t) grid")
    ax.plot(t, ds["energy_particles"].values, "--", label="H_N(Ω_t) particles")
    ax.plot(t, ds["free_energy_grid"].values, "-", label="F_β(ρ_t) grid")
    ax.set_xlabel("t")
    ax.set_ylabel("energy / free energy")
    ax.legend(fontsize=8)
    ax.set_title("(c) energies", fontsize=9)
    if has_gap:
        ax = axes[3]
        ax.plot(t, ds["kernel_gap"].values, "o-", ms=3)
        ax.set_yscale("log")
        ax.set_xlabel("t")
        ax.set_ylabel("max |K_μN − K_ρ| on the data")
        ax.set_title("(d) kernel gap max |K_μN − K_ρ| on data", fontsize=9)
    beta = ds.attrs.get("beta", "?")
    fig.suptitle(f"particles vs McKean–Vlasov grid (p = {p}, β = {beta})", fontsize=10)
    _save(fig, path)
    return fig


__all__ = ["plot_comparison"]
