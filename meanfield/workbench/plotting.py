"""Figures from result datasets (no pyplot state: each function builds its own Figure).

A figure written to a file (``plot_comparison(ds, path)``) is rendered in memory and written
atomically, as :func:`meanfield.results.save_dataset` writes a dataset: to a fresh temporary
file beside ``path``, synced, then renamed.  A write that fails (a full disk) raises
:class:`~meanfield.errors.OutputWriteError` and leaves neither a partial image nor a folder
the call created; the path and its format are checked before the figure is drawn.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import xarray as xr
from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .._validation import check_output_path
from ..errors import InputError
from ..results import _make_parents, _write_atomically


def _figure_path(path):
    """``path`` as a :class:`~pathlib.Path` and the image format its suffix names (else
    ``rcParams["savefig.format"]``), checked before any drawing: a writable file path
    (:func:`meanfield._validation.check_output_path`) of a format Agg writes."""
    path = check_output_path("path", path, kind="file")
    fmt = path.suffix[1:].lower() or str(rcParams["savefig.format"])
    supported = FigureCanvasAgg.get_supported_filetypes()
    if fmt not in supported:
        raise InputError(
            f"path {str(path)!r} names the image format {fmt!r}; use a suffix of "
            + ", ".join(sorted(f".{k}" for k in supported))
        )
    return path, fmt


def _save(fig: Figure, path) -> None:
    """Render ``fig`` in memory and write it to ``path`` atomically (module docstring);
    nothing for ``path=None``."""
    if path is None:
        return
    path, fmt = _figure_path(path)
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=130, bbox_inches="tight")
    created = _make_parents(path.parent)
    try:
        _write_atomically(buffer.getbuffer(), path)
    except BaseException:
        for folder in reversed(created):  # only the (still empty) folders made here
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _panel_histograms(ax, ds: xr.Dataset, n_snapshots: int) -> None:
    """(a), p = 1: the grid density at a few times over the particle histograms."""
    t, x = ds["time"].values, ds["x"].values
    h = x[1] - x[0]
    edges = np.concatenate([x - h / 2, [x[-1] + h / 2]])
    picks = np.unique(np.linspace(0, len(t) - 1, n_snapshots).round().astype(int))
    for i, k in enumerate(picks):
        ax.hist(
            ds["omega"].values[k, :, 0],
            bins=edges[:: max(1, len(x) // 48)],
            density=True,
            color=f"C{i}",
            alpha=0.25,
        )
        ax.plot(x, ds["rho"].values[k], color=f"C{i}", label=f"t = {t[k]:.2g}")
    ax.set_xlabel("ω")
    ax.set_ylabel("density")
    ax.legend(fontsize=8)
    N = ds.sizes["particle"]
    ax.set_title(f"(a) grid ρ_t (lines), N = {N} particles (bars)", fontsize=9)


def _panel_density_2d(fig: Figure, ax, ds: xr.Dataset) -> None:
    """(a), p = 2: the final grid density with (at most 2000 of) the particles on top."""
    x, y = ds["x"].values, ds["y"].values
    im = ax.pcolormesh(x, y, ds["rho"].values[-1].T, shading="nearest", cmap="viridis")
    pts = ds["omega"].values[-1]
    sub = pts[:: max(1, len(pts) // 2000)]
    ax.scatter(sub[:, 0], sub[:, 1], s=2, c="w", alpha=0.6)
    ax.set_aspect("equal")
    ax.set_xlabel("ω₁")
    ax.set_ylabel("ω₂")
    fig.colorbar(im, ax=ax, shrink=0.8, label="grid density ρ (cell average)")
    N, t = ds.sizes["particle"], ds["time"].values
    ax.set_title(f"(a) ρ and N = {N} particles at t = {t[-1]:.2g}", fontsize=9)


def _panel_distances(ax, ds: xr.Dataset) -> None:
    """(b): W2 (and W1) between particles and grid over time, with the N^(-1/2) level."""
    t = ds["time"].values
    name = "w2" if "w2" in ds else "sliced_w2"  # sliced W2 keeps its own name and label
    default = "W2" if name == "w2" else "sliced W2"
    ax.plot(t, ds[name].values, "o-", ms=3, label=ds[name].attrs.get("long_name", default))
    if "w1" in ds and np.isfinite(ds["w1"].values).any():
        ax.plot(t, ds["w1"].values, "s--", ms=3, label="W1")
    ax.axhline(1 / np.sqrt(ds.sizes["particle"]), color="0.6", lw=0.8, ls=":", label="N^(-1/2)")
    ax.set_xlabel("t")
    ax.set_ylabel("Wasserstein distance (unit of ω)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("(b) distance particles vs grid", fontsize=9)


def _panel_energies(ax, ds: xr.Dataset) -> None:
    """(c): grid energy and free energy, particle energy H_N, over time."""
    t = ds["time"].values
    ax.plot(t, ds["energy_grid"].values, "-", label="E(ρ_t) grid")
    ax.plot(t, ds["energy_particles"].values, "--", label="H_N(Ω_t) particles")
    ax.plot(t, ds["free_energy_grid"].values, "-", label="F_β(ρ_t) grid")
    ax.set_xlabel("t")
    ax.set_ylabel("energy / free energy")
    ax.legend(fontsize=8)
    ax.set_title("(c) energies", fontsize=9)


def _panel_kernel_gap(ax, ds: xr.Dataset) -> None:
    """(d): the kernel gap max |K_μN − K_ρ| on the data over time."""
    ax.plot(ds["time"].values, ds["kernel_gap"].values, "o-", ms=3)
    ax.set_yscale("log")
    ax.set_xlabel("t")
    ax.set_ylabel("max |K_μN − K_ρ| on the data")
    ax.set_title("(d) kernel gap max |K_μN − K_ρ| on data", fontsize=9)


def plot_comparison(ds: xr.Dataset, path=None, *, n_snapshots: int = 4) -> Figure:
    """Particles vs grid from a :func:`meanfield.workbench.compare.compare` dataset.

    Panels: (a) the grid density at a few times with the particle histograms (p = 1), or the
    final density with the particles on top (p = 2); (b) W2 (and W1) between them over time;
    (c) the grid energy E(ρ_t) and free energy F_β(ρ_t) next to the particle energy H_N(Ω_t);
    (d) the kernel gap on the data, when the dataset has one.

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`~meanfield.workbench.compare.compare`.
    path : path, optional
        Write the figure there (its suffix names the format: ``.png``, ``.pdf``, ``.svg``…;
        none: PNG), atomically (module docstring); missing folders are created.
    n_snapshots : int
        Number of times shown in panel (a) for p = 1.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    meanfield.errors.InputError
        A dataset without the variables of :func:`~meanfield.workbench.compare.compare`, or
        a ``path`` whose suffix is no image format (before drawing).
    meanfield.errors.OutputPathError
        ``path`` cannot be written: a folder, under a file (before drawing).
    meanfield.errors.OutputWriteError
        The write failed part-way (a full disk); nothing partial is left.

    See Also
    --------
    meanfield.workbench.compare.compare : the comparison it draws.
    meanfield.cli.commands.cmd_compare : ``meanfield compare``, which writes it.

    Examples
    --------
    A hand-made dataset with the variables of :func:`~meanfield.workbench.compare.compare` (p = 1,
    two records, 8 particles, a 4-cell grid), without a kernel gap: three panels.

    >>> import numpy as np
    >>> import xarray as xr
    >>> from meanfield.workbench.plotting import plot_comparison
    >>> t, x = [0.0, 1.0], np.linspace(-0.75, 0.75, 4)
    >>> omega = np.linspace(-0.9, 0.9, 8).reshape(1, 8, 1).repeat(2, 0)
    >>> ds = xr.Dataset(
    ...     {
    ...         "omega": (("time", "particle", "dim"), omega),
    ...         "rho": (("time", "x"), np.full((2, 4), 0.5)),
    ...         "w2": ("time", [0.3, 0.1]),
    ...         "energy_grid": ("time", [1.0, 0.5]),
    ...         "energy_particles": ("time", [1.1, 0.6]),
    ...         "free_energy_grid": ("time", [0.8, 0.3]),
    ...     },
    ...     coords={"time": t, "x": x},
    ... )
    >>> fig = plot_comparison(ds)
    >>> len(fig.axes), fig.axes[1].get_ylabel()
    (3, 'Wasserstein distance (unit of ω)')
    """
    if path is not None:
        _figure_path(path)  # before any drawing
    for v in ("omega", "rho", "w2" if "sliced_w2" not in ds else "sliced_w2"):
        if v not in ds:
            raise InputError(
                f"dataset lacks {v!r}: pass the output of meanfield.workbench.compare.compare"
            )
    p = ds.sizes["dim"]
    has_gap = "kernel_gap" in ds
    ncol = 4 if has_gap else 3
    fig = Figure(figsize=(4.2 * ncol, 3.6), layout="constrained")
    axes = fig.subplots(1, ncol)
    if p == 1:
        _panel_histograms(axes[0], ds, n_snapshots)
    else:
        _panel_density_2d(fig, axes[0], ds)
    _panel_distances(axes[1], ds)
    _panel_energies(axes[2], ds)
    if has_gap:
        _panel_kernel_gap(axes[3], ds)
    beta = ds.attrs.get("beta", "?")
    fig.suptitle(f"particles vs McKean–Vlasov grid (p = {p}, β = {beta})", fontsize=10)
    _save(fig, path)
    return fig


# ----------------------------------------------------------------------------------------
# the theory figures of ``meanfield figures`` (experiments in meanfield.studies)
# ----------------------------------------------------------------------------------------
def _new_figure(figsize) -> Figure:
    """A Figure with an Agg canvas (so ``tight_layout`` and ``savefig`` work without pyplot)."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def _log_log_labels(axis, xlabel: str, ylabel: str, *, fontsize: int = 7) -> None:
    """Both axes of a panel on a log scale, their labels, and the legend of what is drawn."""
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.legend(fontsize=fontsize)


def plot_ldp_rate(ds: xr.Dataset) -> Figure:
    """The ``ldp_rate`` figure: Monte Carlo rates against N beside the grid rate J(a).

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`meanfield.studies.large_deviations.ldp_rate_data`.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels (mean-field, Coulomb-gas), rates with ±2 s.e. and J(a) dashed.

    See Also
    --------
    meanfield.studies.large_deviations : the study it draws.

    Examples
    --------
    >>> import xarray as xr
    >>> from meanfield.workbench.plotting import plot_ldp_rate
    >>> tag = {}
    >>> for r in ("mf", "cg"):
    ...     tag |= {
    ...         f"N_{r}": (f"N_{r}", [4, 8]),
    ...         f"rate_{r}": (f"N_{r}", [0.30, 0.25]),
    ...         f"rate_se_{r}": (f"N_{r}", [0.01, 0.01]),
    ...         f"rate_quad_err_{r}": (f"N_{r}", [0.0, 0.0]),
    ...         f"J_{r}": 0.2,
    ...     }
    >>> fig = plot_ldp_rate(xr.Dataset(tag, attrs={"a_mf": 1.5, "a_cg": 1.2}))
    >>> len(fig.axes), [float(y) for y in fig.axes[0].lines[-1].get_ydata()]  # J(a), dashed
    (2, [0.2, 0.2])
    """
    fig = _new_figure((10, 4))
    ax = fig.subplots(1, 2)
    titles = {"mf": "mean-field regime: speed N", "cg": "Coulomb-gas regime: speed N²"}
    for axis, tag in zip(ax, ("mf", "cg"), strict=True):
        N = ds[f"N_{tag}"].values
        err = np.hypot(ds[f"rate_se_{tag}"].values, ds[f"rate_quad_err_{tag}"].values)
        axis.errorbar(
            N,
            ds[f"rate_{tag}"],
            yerr=2 * err,
            fmt="o-",
            capsize=3,
            label=r"Monte Carlo $-\frac{1}{s_N}\log P(L_N\geq a)$ (±2 s.e.)",
        )
        axis.axhline(float(ds[f"J_{tag}"]), color="k", ls="--", label=r"grid rate $J(a)$")
        axis.set_xscale("log")
        axis.set_xlabel("number of particles N")
        axis.set_ylabel("rate")
        axis.set_title(f"{titles[tag]}; a = {ds.attrs[f'a_{tag}']:.3g}")
        axis.legend(fontsize=8)
    fig.suptitle(r"Tail of $L_N=\int\omega^2 d\mu_N$ (V = ω²/2, k = −|z|, β = 1)")
    fig.tight_layout()
    return fig


def plot_beta_limit(ds: xr.Dataset) -> Figure:
    """The ``beta_limit`` figure: W2 to the equilibrium measure against β (grid, particles).

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`meanfield.studies.limits.beta_limit_data`.

    Returns
    -------
    matplotlib.figure.Figure
        Two log-log panels: the grid Gibbs state (with a β⁻¹ guide) and the particles
        (mean ± 2 s.e. over seeds) in both regimes.

    See Also
    --------
    plot_t_limit : the limit in time.
    plot_n_limit : the limit in N.

    Examples
    --------
    >>> import numpy as np
    >>> import xarray as xr
    >>> from meanfield.workbench.plotting import plot_beta_limit
    >>> beta = np.array([1.0, 2.0, 4.0])
    >>> ds = xr.Dataset(
    ...     {
    ...         "w2_grid": (("case", "beta_grid"), [0.5 / beta]),
    ...         "w2_particles": (("regime", "beta_particles", "seed"), np.full((2, 3, 2), 0.1)),
    ...     },
    ...     coords={
    ...         "case": ["uniform"],
    ...         "beta_grid": beta,
    ...         "regime": ["mean-field", "coulomb-gas"],
    ...         "beta_particles": beta,
    ...     },
    ...     attrs={"N_particles": 8},
    ... )
    >>> fig = plot_beta_limit(ds)
    >>> len(fig.axes), fig.axes[0].get_xscale()
    (2, 'log')
    """
    fig = _new_figure((10, 4))
    ax = fig.subplots(1, 2)
    for c in ds["case"].values:
        ax[0].loglog(ds["beta_grid"], ds["w2_grid"].sel(case=c), "o-", label=f"{c} (grid)")
    b = ds["beta_grid"].values
    ax[0].loglog(b, ds["w2_grid"].values[0, 0] * b[0] / b, "k:", label=r"$\propto\beta^{-1}$")
    ax[0].set_xlabel(r"inverse temperature $\beta$")
    ax[0].set_ylabel(r"$W_2(\rho_\beta, \mu^*)$")
    ax[0].set_title("Mean-field Gibbs state → equilibrium measure")
    ax[0].legend(fontsize=8)
    for r in ds["regime"].values:
        w = ds["w2_particles"].sel(regime=r)
        m, s = w.mean("seed"), w.std("seed", ddof=1) / np.sqrt(w.sizes["seed"])
        ax[1].errorbar(ds["beta_particles"], m, yerr=2 * s, fmt="o-", capsize=3, label=r)
    ylabel = r"$W_2(\mu_N, \mu^*)$ (mean ± 2 s.e. over seeds)"
    _log_log_labels(ax[1], r"inverse temperature $\beta$", ylabel, fontsize=8)
    ax[1].set_title(f"Particles, N = {ds.attrs['N_particles']} (uniform case, k = −|z|)")
    fig.tight_layout()
    return fig


def plot_t_limit(ds: xr.Dataset) -> Figure:
    """The ``t_limit`` figure: the free-energy gap along the flow, log scale, with its rates.

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`meanfield.studies.limits.t_limit_data`.

    Returns
    -------
    matplotlib.figure.Figure
        One panel; non-positive gaps (round-off at equilibrium) are left out.

    See Also
    --------
    plot_beta_limit : the limit in beta.
    plot_n_limit : the limit in N.

    Examples
    --------
    A gap e^(−2t) with its rate 2:

    >>> import numpy as np
    >>> import xarray as xr
    >>> from meanfield.workbench.plotting import plot_t_limit
    >>> t = np.linspace(0.0, 2.0, 5)
    >>> ds = xr.Dataset(
    ...     {
    ...         "gap": (("model", "time"), [np.exp(-2 * t)]),
    ...         "rate": ("model", [2.0]),
    ...         "rate_ci_low": ("model", [1.9]),
    ...         "rate_ci_high": ("model", [2.1]),
    ...     },
    ...     coords={"model": ["OU"], "time": t},
    ... )
    >>> fig = plot_t_limit(ds)
    >>> len(fig.axes), fig.axes[0].get_legend().get_texts()[0].get_text()
    (1, 'OU: rate 2.000 [1.900, 2.100]')
    """
    fig = _new_figure((6, 4))
    ax = fig.subplots()
    for m in ds["model"].values:
        sel = ds.sel(model=m)
        g = np.where(sel["gap"].values > 0, sel["gap"].values, np.nan)
        ax.semilogy(
            ds["time"],
            g,
            label=f"{m}: rate {float(sel['rate']):.3f} "
            f"[{float(sel['rate_ci_low']):.3f}, {float(sel['rate_ci_high']):.3f}]",
        )
    ax.set_xlabel("time t")
    ax.set_ylabel(r"$F_\beta(\rho_t) - F_\beta(\rho_\beta)$")
    ax.set_title(r"Free-energy gap along the McKean–Vlasov flow ($\beta$ = 1)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_kernel_concentration(ds: xr.Dataset) -> Figure:
    """The ``kernel_concentration`` figure: tail probabilities against N, β and of W2.

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`meanfield.studies.kernel_concentration.kernel_concentration_data`.

    Returns
    -------
    matplotlib.figure.Figure
        Three log-scale panels (kernel gap against N, against β; W2 against N); zero
        probabilities are left out.

    See Also
    --------
    meanfield.studies.kernel_concentration : the study it draws.

    Examples
    --------
    >>> import xarray as xr
    >>> from meanfield.workbench.plotting import plot_kernel_concentration
    >>> p = [[0.5, 0.1]]  # one threshold ε, two values of N (or β)
    >>> ds = xr.Dataset(
    ...     {
    ...         "prob_w2": (("eps_w2", "N"), p),
    ...         "prob_w2_se": (("eps_w2", "N"), [[0.05, 0.02]]),
    ...         "prob_N": (("eps_N", "N"), p),
    ...         "prob_se_N": (("eps_N", "N"), [[0.05, 0.02]]),
    ...         "decay_rate_N": ("eps_N", [0.2]),
    ...         "prob_beta": (("eps_beta", "beta"), p),
    ...         "prob_se_beta": (("eps_beta", "beta"), [[0.05, 0.02]]),
    ...         "decay_rate_beta": ("eps_beta", [float("nan")]),
    ...     },
    ...     coords={
    ...         "N": [4, 8],
    ...         "beta": [1.0, 2.0],
    ...         **dict.fromkeys(["eps_w2", "eps_N", "eps_beta"], [0.1]),
    ...     },
    ... )
    >>> fig = plot_kernel_concentration(ds)
    >>> [ax.get_legend().get_texts()[0].get_text() for ax in fig.axes]
    ['ε = 0.1: rate 0.200/N', 'ε = 0.1: rate undetermined', 'ε = 0.1']
    """
    fig = _new_figure((16, 4))
    ax = fig.subplots(1, 3)
    _panel_kernel_tails(ax[0], ds, "N", "/N")
    _panel_kernel_tails(ax[1], ds, "beta", "/β")
    _panel_w2_tails(ax[2], ds)
    ax[0].set_xlabel("number of particles N")
    ax[0].set_title(r"mean-field regime, β = 2: reference $\rho_\beta$")
    ax[1].set_xlabel(r"inverse temperature $\beta$")
    ax[1].set_title(r"Coulomb-gas regime, N = 16: reference $\mu^*$")
    fig.tight_layout()
    return fig


def _tail_errorbars(axis, x: np.ndarray, p: np.ndarray, se: np.ndarray, label: str) -> None:
    """Tail probabilities ``p`` against ``x`` with ±2 s.e. bars; zero probabilities (off a
    log scale) are left out."""
    ok = p > 0
    axis.errorbar(x[ok], p[ok], yerr=2 * se[ok], fmt="o-", capsize=3, label=label)


def _panel_w2_tails(axis, ds: xr.Dataset) -> None:
    """P(W2(μ_N, ρ_β) > ε) against N, one curve per ε (log scale)."""
    for e in ds["eps_w2"].values:
        p = ds["prob_w2"].sel(eps_w2=e).values
        se = ds["prob_w2_se"].sel(eps_w2=e).values
        _tail_errorbars(axis, ds["N"].values, p, se, f"ε = {e:g}")
    axis.set_yscale("log")
    axis.set_xlabel("number of particles N")
    axis.set_ylabel(r"$P(W_2(\mu_N, \rho_\beta) > \varepsilon)$ (± 2 s.e.)")
    axis.set_title(r"the empirical measure, mean-field, β = 2")
    axis.legend(fontsize=8)


def _panel_kernel_tails(axis, ds: xr.Dataset, x: str, unit: str) -> None:
    """P(max|K_μN − K_ref| > ε) against ``x`` ("N" or "beta"), one curve per ε, with the
    fitted decay rate (per ``unit``) in the legend (log scale)."""
    for e in ds[f"eps_{x}"].values:
        at = {f"eps_{x}": e}
        rate = float(ds[f"decay_rate_{x}"].sel(at))
        label = f"ε = {e:g}: " + (
            f"rate {rate:.3f}{unit}" if np.isfinite(rate) else "rate undetermined"
        )
        p, se = ds[f"prob_{x}"].sel(at).values, ds[f"prob_se_{x}"].sel(at).values
        _tail_errorbars(axis, ds[x].values, p, se, label)
    axis.set_yscale("log")
    axis.set_ylabel(r"$P(\max_{jk}|K_{\mu_N} - K_{ref}| > \varepsilon)$ (± 2 s.e.)")
    axis.legend(fontsize=8)


def plot_n_limit(ds: xr.Dataset) -> Figure:
    """The ``n_limit`` figure: W2 and the kernel gap against N at several times.

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`meanfield.studies.limits.n_limit_data`.

    Returns
    -------
    matplotlib.figure.Figure
        Two log-log panels with an N^(-1/2) guide and the fitted rates in the legend.

    See Also
    --------
    plot_t_limit : the limit in time.
    plot_beta_limit : the limit in beta.

    Examples
    --------
    Distances N^(−1/2) over two seeds, at times 0 (not drawn: the initial draw) and 1:

    >>> import numpy as np
    >>> import xarray as xr
    >>> from meanfield.workbench.plotting import plot_n_limit
    >>> N = np.array([4, 16, 64])
    >>> d = np.broadcast_to((N ** -0.5)[None, :, None], (2, 3, 2)) * [1.0, 1.1]
    >>> rates = {f"rate_{k}{x}": ("time", [np.nan, r]) for k in ("w2", "kernel_gap")
    ...          for x, r in (("", -0.5), ("_low", -0.6), ("_high", -0.4))}
    >>> ds = xr.Dataset(
    ...     {"w2": (("time", "N", "seed"), d), "kernel_gap": (("time", "N", "seed"), d), **rates},
    ...     coords={"time": [0.0, 1.0], "N": N},
    ... )
    >>> fig = plot_n_limit(ds)
    >>> [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    ['$N^{-1/2}$', 't = 1: N^-0.50 [-0.60, -0.40]']
    """
    fig = _new_figure((10, 4))
    ax = fig.subplots(1, 2)
    n = ds["N"].values
    for axis, k, label in (
        (ax[0], "w2", r"$W_2(\mu_N(t), \rho_t)$"),
        (ax[1], "kernel_gap", r"$\max_{jk}|K_{\mu_N(t)} - K_{\rho_t}|$"),
    ):
        for i in range(1, ds.sizes["time"]):
            sel = ds[k].isel(time=i)
            m = sel.mean("seed")
            s = sel.std("seed", ddof=1) / np.sqrt(sel.sizes["seed"])
            r, lo, hi = (float(ds[f"rate_{k}{x}"].isel(time=i)) for x in ("", "_low", "_high"))
            rate = f"N^{r:.2f} [{lo:.2f}, {hi:.2f}]" if np.isfinite(r) else "rate undetermined"
            axis.errorbar(
                n,
                m,
                yerr=2 * s,
                fmt="o-",
                capsize=3,
                label=f"t = {float(ds['time'][i]):.2g}: {rate}",
            )
        m0 = ds[k].isel(time=-1).mean("seed").values[0]
        axis.plot(n, m0 * np.sqrt(n[0] / n), "k:", label=r"$N^{-1/2}$")
        _log_log_labels(axis, "number of particles N", label + " (mean ± 2 s.e.)")
    ax[0].set_title("Particles vs McKean–Vlasov density")
    ax[1].set_title("Kernel gap on the data")
    fig.tight_layout()
    return fig


def plot_coulomb3d(ds: xr.Dataset) -> Figure:
    """The ``coulomb3d`` figure: radial profiles, distances against N, grid errors against h.

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`meanfield.studies.coulomb3d.coulomb3d_data`.

    Returns
    -------
    matplotlib.figure.Figure
        Three panels.

    See Also
    --------
    meanfield.studies.coulomb3d : the study it draws.

    Examples
    --------
    >>> import numpy as np
    >>> import xarray as xr
    >>> from meanfield.workbench.plotting import plot_coulomb3d
    >>> r, N, h = np.linspace(0.1, 1.3, 4), np.array([8, 64]), np.array([0.2, 0.1])
    >>> dist = ("N", N ** (-1 / 3))
    >>> errors = ("grid_h", h**2)
    >>> ds = xr.Dataset(
    ...     {
    ...         "profile_grid": ("r", [1.0, 1.0, 0.9, 0.0]),
    ...         "profile_particles": ("r", [1.1, 0.9, 1.0, 0.0]),
    ...         **dict.fromkeys(["w2_grid", "w2_grid_iid", "w2_radial", "w2_radial_iid"], dist),
    ...         "radius": ("N", [1.1, 1.05]),
    ...         "grid_radius_error": errors,
    ...         "grid_flatness": errors,
    ...         "grid_energy_error": errors,
    ...     },
    ...     coords={"r": r, "N": N, "grid_h": h},
    ...     attrs={"cells": 16, "N_profile": 64, "beta": 100.0},
    ... )
    >>> fig = plot_coulomb3d(ds)
    >>> [ax.get_title() for ax in fig.axes]
    ['Radial profile', 'Particles vs grid and ball (exact W2)', 'Grid μ*_h vs the uniform ball']
    """
    fig = _new_figure((15, 4.2))
    ax = fig.subplots(1, 3)
    _panel_radial_profile(ax[0], ds)
    _panel_ball_distances(ax[1], ds)
    _panel_grid_errors(ax[2], ds)
    fig.suptitle("Coulomb gas in R³: V = |ω|²/2, k = 1/|z|, λ = 1/2 (μ* = uniform unit ball)")
    fig.tight_layout()
    return fig


def _panel_radial_profile(axis, ds: xr.Dataset) -> None:
    """Shell densities of μ*_h and of the particles against |ω|, over the unit ball's step."""
    r = ds["r"].values
    cells = ds.attrs.get("cells", ds.attrs.get("n_grid"))  # n_grid: datasets saved before
    axis.step(r, ds["profile_grid"], where="mid", label=f"grid μ*_h ({cells}³, β = ∞)")
    axis.step(
        r,
        ds["profile_particles"],
        where="mid",
        label=f"HMC particles, N = {ds.attrs['N_profile']} (β = {ds.attrs['beta']:g})",
    )
    axis.plot([0, 1, 1, r[-1]], [1, 1, 0, 0], "k--", label="uniform unit ball")
    axis.set_xlabel("|ω|")
    axis.set_ylabel("shell density / (3/4π)")
    axis.set_title("Radial profile")
    axis.legend(fontsize=8)


def _panel_ball_distances(axis, ds: xr.Dataset) -> None:
    """W2 of the particles (HMC and iid) to μ*_h and to the ball against N, log-log, with an
    N^(−1/3) guide."""
    N = ds["N"].values
    for k, label, fmt in (
        ("w2_grid", r"$W_2(\mu_N, \mu^*_h)$ HMC", "o-"),
        ("w2_grid_iid", r"$W_2(\mu_N, \mu^*_h)$ iid ball", "o:"),
        ("w2_radial", r"$W_2$ of $|\omega|$ vs ball, HMC", "s-"),
        ("w2_radial_iid", r"$W_2$ of $|\omega|$ vs ball, iid", "s:"),
    ):
        axis.plot(N, ds[k], fmt, label=label)
    axis.plot(N, np.abs(ds["radius"] - 1), "^-", label="|radius − 1|, HMC")
    ref = float(ds["w2_grid_iid"][0])
    axis.plot(N, ref * (N / N[0]) ** (-1 / 3), "k:", lw=0.8, label=r"$N^{-1/3}$")
    _log_log_labels(axis, "number of particles N", "distance (units of ω)")
    axis.set_title("Particles vs grid and ball (exact W2)")


def _panel_grid_errors(axis, ds: xr.Dataset) -> None:
    """The grid equilibrium's radius, flatness and energy errors against h, with an h² guide."""
    h = ds["grid_h"].values
    for k, label in (
        ("grid_radius_error", "|radius − 1|"),
        ("grid_flatness", "max |ρ/ρ_ball − 1|, |ω| < 0.6"),
        ("grid_energy_error", "|E_h(μ*_h) − 9/10|"),
    ):
        axis.plot(h, ds[k], "o-", label=label)
    e_last = float(ds["grid_energy_error"][-1])
    axis.plot(h, e_last * (h / h[-1]) ** 2, "k:", lw=0.8, label="h²")
    _log_log_labels(axis, "cell width h", "error (radius, density ratio, energy)")
    axis.set_title("Grid μ*_h vs the uniform ball")


__all__ = [
    "plot_beta_limit",
    "plot_comparison",
    "plot_coulomb3d",
    "plot_kernel_concentration",
    "plot_ldp_rate",
    "plot_n_limit",
    "plot_t_limit",
]
