"""What the ``meanfield`` command prints: run and comparison summaries, rates, warnings.

Every line a command writes to the terminal is formatted here (stdout for results, one
``meanfield: warning:`` / ``meanfield: note:`` line on stderr for what a user should know),
so the commands (:mod:`meanfield.cli.commands`) only compute.
"""

from __future__ import annotations

import contextlib
import sys
import warnings

import numpy as np

from ..ot.spacing import min_pair_distance  # NaN for < 2 points (documented there)


def coincidence_warnings(ds) -> list[str]:
    """After a run: warn when particles ended on top of each other (minimum pair distance 0).

    Pinned particles are warned about by :func:`meanfield.dynamics.langevin.simulate` itself.

    Parameters
    ----------
    ds : xarray.Dataset
        A run of :func:`meanfield.dynamics.langevin.simulate` (``omega`` of shape (time, particle,
        dim)); replica runs (4-d ``omega``) and runs without positions give no warning.

    Returns
    -------
    list of str
        One line per warning (empty when the last positions are pairwise distinct).

    See Also
    --------
    summarise_run : the summary printed beside them.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from meanfield.cli.output import coincidence_warnings
    >>> omega = np.array([[[0.0], [1.0]], [[0.5], [0.5]]])  # two particles meet at t = 1
    >>> coincidence_warnings(xr.Dataset({"omega": (("time", "particle", "dim"), omega)}))
    ['some particles coincide (minimum pair distance 0)']
    """
    if "omega" not in ds or ds["omega"].ndim != 3:
        return []
    last = ds["omega"].isel(time=-1).values
    if len(last) > 1 and min_pair_distance(last) == 0.0:
        return ["some particles coincide (minimum pair distance 0)"]
    return []


def summarise_run(ds) -> str:
    """A short human-readable summary of a simulation dataset.

    Parameters
    ----------
    ds : xarray.Dataset
        A run of :func:`meanfield.dynamics.langevin.simulate` (its provenance attributes and
        energies).

    Returns
    -------
    str
        A header line (method, regime, N, p, β, η, steps, seed), each energy at the first and
        last record, and (with positions) the minimum pair distance and mean |ω|.

    See Also
    --------
    summarise_comparison : the summary of a comparison.
    meanfield.cli.commands.cmd_run : prints it.

    Examples
    --------
    >>> import torch
    >>> from meanfield.cli.output import summarise_run
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, QuadraticPotential
    >>> from meanfield.dynamics.langevin import simulate
    >>> E = Energy([QuadraticPotential()], Box(1, 3.0))
    >>> ds = simulate(E, torch.zeros(4, 1), eta=0.01, beta=10.0, n_steps=3, seed=0)
    >>> summarise_run(ds).splitlines()[0].split(": ")[1]
    'langevin (mean-field), N=4, p=1, beta=10, eta=0.01, 3 steps (t = 0.03), seed=0'
    """
    a = ds.attrs
    if a["method"] == "hmc":  # trajectories of L leapfrog steps of epsilon, not eta-steps
        run = (
            f"step_size={a['step_size']:.3g}, L={a['n_leapfrog']}, {a['n_samples']} "
            f"trajectories after {a['n_warmup']} warm-up (T = {a['trajectory_length']:.3g} each)"
        )
    else:
        run = f"eta={a['eta']:g}, {a['n_steps']} steps (t = {float(ds['time'][-1]):g})"
    lines = [
        f"meanfield {a['meanfield_version']}: {a['method']} ({a['regime']}), N={a['N']}, "
        f"p={a['p']}, beta={a['beta']:g}, {run}, seed={a['seed']}",
    ]
    for k in [v for v in ds.data_vars if str(v).startswith("energy")]:
        first, last = ds[k].isel(time=0).values, ds[k].isel(time=-1).values
        lines.append(f"  {k:<22s} {np.mean(first):+.6g} -> {np.mean(last):+.6g}")
    if "acceptance_rate" in ds:
        lines.append(f"  acceptance rate        {float(ds['acceptance_rate'][1:].mean()):.3f}")
    if "omega" in ds and ds["omega"].ndim == 3:
        last = ds["omega"].isel(time=-1).values
        lines.append(f"  min pair distance      {min_pair_distance(last):.4g}")
        lines.append(f"  mean |omega|           {np.linalg.norm(last, axis=1).mean():.4g}")
    return "\n".join(lines)


def _warn(message: str) -> None:
    print(f"meanfield: warning: {message}", file=sys.stderr)


@contextlib.contextmanager
def _package_warnings_as_lines():
    """Inside: every :class:`~meanfield.errors.MeanfieldWarning` is printed at once as one
    ``meanfield: warning:`` line on stderr (each time; other warnings as Python shows them)."""
    from ..errors import MeanfieldWarning

    with warnings.catch_warnings():
        warnings.simplefilter("always", MeanfieldWarning)
        default = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, MeanfieldWarning):
                _warn(str(message))
            else:
                default(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def summarise_comparison(ds) -> str:
    """Summary of a side-by-side run: a header and each diagnostic at the first and last time.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`meanfield.workbench.compare.compare` (provenance attributes and the
        diagnostics over ``time``).

    Returns
    -------
    str
        A header (N, p, β, regime, grid, times, W method, seed) and an aligned table.

    See Also
    --------
    summarise_run : the summary of a run.
    format_rate : a fitted rate.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from meanfield.cli.output import summarise_comparison
    >>> ds = xr.Dataset({"w2": ("time", [0.3, 0.1])}, coords={"time": [0.0, 2.0]},
    ...                 attrs={"meanfield_version": "0", "N": 10, "p": 1, "beta": 10.0,
    ...                        "eta": 0.05, "seed": 0})
    >>> print(summarise_comparison(ds).splitlines()[-1])
      w2                 +0.3           +0.1

    A quantity the run did not compute reads n/a, with the reason (not ``+nan``):

    >>> ds["w1"] = ("time", [np.nan, np.nan])
    >>> ds.attrs["w_method"] = "sparse_exact"
    >>> for line in summarise_comparison(ds).splitlines()[-2:]:
    ...     print(line)
      w1                  n/a            n/a
      n/a: w1 is computed only by the dense exact solver (W method exact; this run used
      sparse_exact, chosen for its size)
    """
    a = ds.attrs
    t_end = float(ds["time"][-1])
    grid = "x".join(str(ds.sizes[d]) for d in ("x", "y") if d in ds.sizes)
    lines = [
        f"meanfield {a['meanfield_version']}: particles vs McKean-Vlasov grid",
        f"  N = {a['N']} particles, p = {a['p']}, beta = {float(a['beta']):g} "
        f"({a.get('regime', 'mean-field')} regime), eta = {float(a['eta']):g}, "
        f"grid {grid} cells ({a.get('grid_scheme', '?')}), t = 0 .. {t_end:g}, "
        f"W method {a.get('w_method', '?')}, seed {a['seed']}",
    ]
    rows = [(str(k), ds[k].values) for k in ds.data_vars if ds[k].dims == ("time",)]
    width = max([len("quantity")] + [len(k) for k, _ in rows])
    head0, head1 = "t = 0", f"t = {t_end:g}"
    lines.append(f"  {'quantity':<{width}}  {head0:>13}  {head1:>13}")
    lines.append(f"  {'-' * width}  {'-' * 13}  {'-' * 13}")
    not_computed = []
    for k, v in rows:
        if np.isnan(v).all():  # a quantity this run did not compute: say so, not "+nan"
            not_computed.append(k)
            lines.append(f"  {k:<{width}}  {'n/a':>13}  {'n/a':>13}")
        else:
            lines.append(f"  {k:<{width}}  {v[0]:>+13.5g}  {v[-1]:>+13.5g}")
    for k in not_computed:
        why = (
            f"computed only by the dense exact solver (W method exact; this run used "
            f"{a.get('w_method', '?')}, chosen for its size)"
            if k == "w1"
            else "not computed in this run"
        )
        lines.append(f"  n/a: {k} is {why}")
    return "\n".join(lines)


def _note(message: str) -> None:
    print(f"meanfield: note: {message}", file=sys.stderr)


def _notes(ds) -> None:
    for note in ds.attrs.get("sweep_notes", []):
        _note(note)


_RATE_KEYS = (("slope", ""), ("ci_low", "_low"), ("ci_high", "_high"))


def format_rate(fit: dict) -> str:
    """A fitted rate with its 95 % interval, or the reason it is undetermined (one string).

    Parameters
    ----------
    fit : dict
        The output of :func:`meanfield.stats.fit_power_law`.

    Returns
    -------
    str
        ``"rate [low, high]"`` to three decimals.

    See Also
    --------
    meanfield.workbench.compare.fit_rate : the rate it formats.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.cli.output import format_rate
    >>> from meanfield.stats import fit_power_law
    >>> n = np.array([100, 400, 1600])
    >>> format_rate(fit_power_law(n, 3 * n**-0.5))  # exact N^(-1/2) data
    '-0.500 [-0.500, -0.500]'
    """
    from ..stats import format_rate as _fmt  # numpy: imported when a study prints

    return _fmt(fit)
