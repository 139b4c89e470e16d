"""Reports of the synthetic kernel-learning study (:mod:`meanfield.studies.synthetic_kernels`).

From the runs of the configuration last run into a study folder (``config.json`` names its
sweep's digest and grid; cells of other configurations in ``runs/`` are left out), written
next to them: ``results.nc`` (an ``xarray.Dataset`` with dims learner, task, noise, m, seed),
``table.csv`` / ``table.md`` (mean ± standard error over seeds), ``claims.md`` (the paper's
claims checked with paired differences, ± their standard error) and the figures
``error_vs_m.png`` and ``error_vs_noise.png``.

Examples
--------
>>> import tempfile
>>> from meanfield.studies.synthetic_kernels_report import load_study
>>> load_study(tempfile.mkdtemp())  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
meanfield.errors.MissingFileError: no config.json in ...
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .synthetic_kernels import LEARNER_LABELS, TASKS

__all__ = ["METRICS", "load_study", "to_dataset", "write_tables", "write_claims", "plot", "report"]


METRICS = [
    "ridge_test_error",
    "logistic_test_error",
    "ridge_test_accuracy",
    "alignment_train",
    "alignment_test",
    "fit_time",
    "alignment_init",
    "alignment",
    "min_distance_init",
    "min_distance",
]


def to_dataset(records, cfg):
    """Records -> xarray.Dataset with dims (learner, task, noise, m, seed); NaN where absent.

    Examples
    --------
    >>> from meanfield.studies.synthetic_kernels import CONFIGS
    >>> ds = to_dataset([], CONFIGS["ci"])
    >>> dict(ds["ridge_test_error"].sizes)
    {'learner': 4, 'task': 2, 'noise': 1, 'm': 2, 'seed': 2}
    """
    import xarray as xr

    from .._version import __version__

    coords = {
        "learner": cfg["learners"],
        "task": cfg["tasks"],
        "noise": [float(x) for x in cfg["noise"]],
        "m": cfg["m"],
        "seed": cfg["seeds"],
    }
    shape = tuple(len(v) for v in coords.values())
    index = {k: {v: i for i, v in enumerate(vals)} for k, vals in coords.items()}
    data = {k: np.full(shape, np.nan) for k in METRICS}
    for r in records:
        ix = tuple(index[k][float(r[k]) if k == "noise" else r[k]] for k in coords)
        for k in METRICS:
            if k in r:
                data[k][ix] = r[k]
    ds = xr.Dataset({k: (tuple(coords), v) for k, v in data.items()}, coords=coords)
    ds.attrs.update(
        {
            "n_train": cfg["n_train"],
            "n_test": cfg["n_test"],
            "coulomb": json.dumps(cfg["coulomb"]),
            "tasks": json.dumps({t: TASKS[t] for t in cfg["tasks"]}),
            "bandwidth": "median heuristic on the training inputs",
            "ridge_alpha": "exact leave-one-out over n_train * 10^[-7..0]",
            "logistic_C": 100.0,
            "meanfield_version": __version__,
        }
    )
    return ds


def _mse(a, axis=-1):
    """Mean and standard error over ``axis`` (NaN-aware, ddof=1)."""
    n = np.sum(np.isfinite(a), axis=axis)
    mean = np.nanmean(a, axis=axis)
    sd = np.nanstd(a, axis=axis, ddof=1) if a.shape[axis] > 1 else np.zeros_like(mean)
    return mean, sd / np.sqrt(np.maximum(n, 1))


def write_tables(ds, out: Path):
    """table.csv (long form) and table.md (test error, ridge, mean ± SE over seeds).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.studies.synthetic_kernels import CONFIGS
    >>> out = Path(tempfile.mkdtemp())
    >>> write_tables(to_dataset([], CONFIGS["ci"]), out)
    >>> (out / "table.md").read_text().splitlines()[0][:40]
    '# Test error (ridge on the learned featu'
    """
    rows = ["learner,task,noise,m,metric,mean,se,n_seeds"]
    for metric in ["ridge_test_error", "logistic_test_error", "alignment_test", "fit_time"]:
        mean, se = _mse(ds[metric].values)
        n = np.isfinite(ds[metric].values).sum(-1)
        for idx in np.ndindex(mean.shape):
            lab = [
                str(ds[d].values[i])
                for d, i in zip(("learner", "task", "noise", "m"), idx, strict=True)
            ]
            rows.append(",".join(lab + [metric, f"{mean[idx]:.6g}", f"{se[idx]:.3g}", str(n[idx])]))
    (out / "table.csv").write_text("\n".join(rows) + "\n")

    md = [
        "# Test error (ridge on the learned features), mean ± standard error over seeds",
        "",
        f"n_train = {ds.attrs['n_train']}, n_test = {ds.attrs['n_test']}, "
        f"{ds.sizes['seed']} seeds; label noise on the training labels only.",
        "",
    ]
    for task in ds.task.values:
        md += [f"## {task}", ""]
        header = "| noise | learner | " + " | ".join(f"m = {m}" for m in ds.m.values) + " |"
        md += [header, "|" + "---|" * (2 + ds.sizes["m"])]
        for nz in ds.noise.values:
            for ln in ds.learner.values:
                v = ds["ridge_test_error"].sel(task=task, noise=nz, learner=ln).values
                mean, se = _mse(v)
                cells = " | ".join(f"{a:.3f} ± {b:.3f}" for a, b in zip(mean, se, strict=True))
                md.append(f"| {nz:g} | {LEARNER_LABELS.get(ln, ln)} | {cells} |")
        md.append("")
    md += ["# Kernel-training time (s), mean over tasks, noise levels and seeds", ""]
    md += ["| learner | " + " | ".join(f"m = {m}" for m in ds.m.values) + " |"]
    md += ["|" + "---|" * (1 + ds.sizes["m"])]
    for ln in ds.learner.values:
        t = ds["fit_time"].sel(learner=ln).mean(("task", "noise", "seed")).values
        md.append(f"| {LEARNER_LABELS.get(ln, ln)} | " + " | ".join(f"{x:.3g}" for x in t) + " |")
    (out / "table.md").write_text("\n".join(md) + "\n")


def _flag(mean, se) -> str:
    return " *" if mean - 2 * se > 0 else (" †" if mean + 2 * se < 0 else "")


def write_claims(ds, out: Path, moderate=(0.1, 0.2)):
    """The paper's three claims, checked with paired differences over seeds.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.studies.synthetic_kernels import CONFIGS
    >>> out = Path(tempfile.mkdtemp())
    >>> write_claims(to_dataset([], CONFIGS["ci"]), out)
    >>> (out / "claims.md").read_text().splitlines()[0]
    "# The paper's claims against this study"
    """
    err = ds["ridge_test_error"]
    lines = ["# The paper's claims against this study", ""]
    lines += [
        "Differences are paired over seeds (same data split, same initial draw); ± is the",
        "standard error of the paired difference. Positive = Coulomb particles have lower error.",
        "",
    ]
    have = set(ds.learner.values.tolist())
    noises = [n for n in moderate if n in ds.noise.values] or list(ds.noise.values)
    if "coulomb" in have:
        for base in [b for b in ("rff", "importance", "langevin") if b in have]:
            lines += [
                f"## Claim 1: Coulomb particles beat {LEARNER_LABELS[base]} (noise {noises})",
                "",
            ]
            lines += ["| task | noise | " + " | ".join(f"m = {m}" for m in ds.m.values) + " |"]
            lines += ["|" + "---|" * (2 + ds.sizes["m"])]
            for task in ds.task.values:
                for nz in noises:
                    d = (
                        err.sel(learner=base, task=task, noise=nz)
                        - err.sel(learner="coulomb", task=task, noise=nz)
                    ).values
                    mean, se = _mse(d)
                    cells = " | ".join(
                        f"{a:+.3f} ± {b:.3f}{_flag(a, b)}" for a, b in zip(mean, se, strict=True)
                    )
                    lines.append(f"| {task} | {nz:g} | {cells} |")
            lines += ["", "`*` Coulomb better by > 2 SE; `†` Coulomb worse by > 2 SE.", ""]
        m_lo, m_hi = int(ds.m.values[0]), int(ds.m.values[-1])
        lines += [
            f"## Claim 2: the gap grows with m (gap at m = {m_hi} minus gap at m = {m_lo})",
            "",
        ]
        bases = [b for b in ("rff", "importance") if b in have]
        lines += ["| task | noise | " + " | ".join(f"vs {LEARNER_LABELS[b]}" for b in bases) + " |"]
        lines += ["|" + "---|" * (2 + len(bases))]
        for task in ds.task.values:
            for nz in noises:
                cells = []
                for b in bases:
                    g = err.sel(learner=b, task=task, noise=nz) - err.sel(
                        learner="coulomb", task=task, noise=nz
                    )
                    mean, se = _mse((g.sel(m=m_hi) - g.sel(m=m_lo)).values)
                    cells.append(f"{mean:+.3f} ± {se:.3f}{_flag(mean, se)}")
                lines.append(f"| {task} | {nz:g} | " + " | ".join(cells) + " |")
        lines += ["", "`*` the gap grows by > 2 SE; `†` it shrinks by > 2 SE.", ""]
    acc = 1 - err
    if 64 in ds.m.values and 256 in ds.m.values:
        lines += ["## Claim 3: accuracy at m = 64 as a fraction of accuracy at m = 256", ""]
        lines += [
            "| task | noise | "
            + " | ".join(LEARNER_LABELS.get(ln, ln) for ln in ds.learner.values)
            + " |"
        ]
        lines += ["|" + "---|" * (2 + ds.sizes["learner"])]
        for task in ds.task.values:
            for nz in ds.noise.values:
                cells = []
                for ln in ds.learner.values:
                    r = (
                        acc.sel(learner=ln, task=task, noise=nz, m=64)
                        / acc.sel(learner=ln, task=task, noise=nz, m=256)
                    ).values
                    mean, se = _mse(r)
                    cells.append(f"{mean:.3f} ± {se:.3f}")
                lines.append(f"| {task} | {nz:g} | " + " | ".join(cells) + " |")
        lines.append("")
    (out / "claims.md").write_text("\n".join(lines) + "\n")


def plot(ds, out: Path):
    """The figures error_vs_m.png and error_vs_noise.png.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.studies.synthetic_kernels import CONFIGS
    >>> cfg = CONFIGS["ci"]
    >>> recs = [dict(learner=ln, task=t, noise=0.1, m=m, seed=s, ridge_test_error=0.2)
    ...         for ln in cfg["learners"] for t in cfg["tasks"] for m in cfg["m"]
    ...         for s in cfg["seeds"]]
    >>> out = Path(tempfile.mkdtemp())
    >>> plot(to_dataset(recs, cfg), out)
    >>> sorted(p.name for p in out.glob("*.png"))
    ['error_vs_m.png', 'error_vs_noise.png']
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    err = ds["ridge_test_error"]
    tasks, noises = list(ds.task.values), list(ds.noise.values)
    fig, axes = plt.subplots(
        len(noises),
        len(tasks),
        figsize=(3.4 * len(tasks), 2.8 * len(noises)),
        squeeze=False,
        sharex=True,
    )
    for i, nz in enumerate(noises):
        for j, task in enumerate(tasks):
            ax = axes[i, j]
            for ln in ds.learner.values:
                mean, se = _mse(err.sel(learner=ln, task=task, noise=nz).values)
                ax.plot(ds.m.values, mean, marker="o", ms=3, label=LEARNER_LABELS.get(ln, ln))
                ax.fill_between(ds.m.values, mean - se, mean + se, alpha=0.25)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{task}, noise {nz:g}", fontsize=9)
            if j == 0:
                ax.set_ylabel("test error (ridge)")
            if i == len(noises) - 1:
                ax.set_xlabel("number of features m")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "error_vs_m.png", dpi=120)
    plt.close(fig)

    m_sel = 64 if 64 in ds.m.values else int(ds.m.values[-1])
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.4 * len(tasks), 2.8), squeeze=False)
    for j, task in enumerate(tasks):
        ax = axes[0, j]
        for ln in ds.learner.values:
            mean, se = _mse(err.sel(learner=ln, task=task, m=m_sel).values)
            ax.errorbar(
                ds.noise.values,
                mean,
                yerr=se,
                marker="o",
                ms=3,
                capsize=2,
                label=LEARNER_LABELS.get(ln, ln),
            )
        ax.set_title(f"{task}, m = {m_sel}", fontsize=9)
        ax.set_xlabel("label noise")
        if j == 0:
            ax.set_ylabel("test error (ridge)")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "error_vs_noise.png", dpi=120)
    plt.close(fig)


def load_study(out) -> dict:
    """The study folder's configuration and the records of its current runs.

    Parameters
    ----------
    out : path
        A study folder (``config.json`` as written by
        :func:`meanfield.studies.synthetic_kernels.run_study`).

    Returns
    -------
    dict
        ``config`` (the configuration last run there), ``records`` (one per learner and cell
        of that configuration's sweep found in ``runs/``), ``n_cells`` and ``missing`` (cells
        of the grid not on disk, or unreadable).

    Raises
    ------
    meanfield.errors.MissingFileError
        No ``config.json`` in ``out``.
    meanfield.errors.DataFileError
        ``config.json`` is not a study record of the sweep layout.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_kernels import run_study
    >>> cfg = dict(learners=["rff"], tasks=["two_moons"], noise=[0.1], m=[8], seeds=[0, 1],
    ...            n_train=40, n_test=20)
    >>> out = tempfile.mkdtemp()
    >>> _ = run_study(cfg, out, scheduler="threads", progress=False)
    >>> study = load_study(out)
    >>> study["n_cells"], study["missing"], len(study["records"])
    (2, 0, 2)
    """
    from ..workbench.sweeps import grid_points, run_key
    from .synthetic_kernels import cell_records, read_study_record

    out = Path(out)
    sweep, cfg = read_study_record(out)
    import xarray as xr

    records, missing = [], 0
    points = grid_points(sweep["grid"])
    for p in points:
        run = out / "runs" / f"{run_key(p, sweep['digest'])}.nc"
        try:
            with xr.open_dataset(run, engine="h5netcdf") as ds:
                records += cell_records(ds)
        except (OSError, ValueError, KeyError):
            missing += 1
    return {"config": cfg, "records": records, "n_cells": len(points), "missing": missing}


def report(out, figures: bool = True):
    """Every report of the study folder ``out`` from its current runs; returns the dataset
    (``attrs["cells_missing"]``: the cells of the grid not on disk).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from meanfield.studies.synthetic_kernels import run_study
    >>> from meanfield.studies.synthetic_kernels_report import report
    >>> cfg = dict(learners=["rff"], tasks=["two_moons"], noise=[0.1], m=[8], seeds=[0],
    ...            n_train=40, n_test=20)
    >>> out = Path(tempfile.mkdtemp())
    >>> _ = run_study(cfg, out, scheduler="threads", progress=False)
    >>> report(out, figures=False)["ridge_test_error"].shape, (out / "claims.md").is_file()
    ((1, 1, 1, 1, 1), True)
    """
    out = Path(out)
    study = load_study(out)
    ds = to_dataset(study["records"], study["config"])
    try:
        ds.to_netcdf(out / "results.nc", engine="h5netcdf")
    except ImportError:  # h5netcdf needs h5py; fall back to scipy's netCDF3 writer
        ds.to_netcdf(out / "results.nc", engine="scipy")
    write_tables(ds, out)
    write_claims(ds, out)
    if figures:
        plot(ds, out)
    ds.attrs["cells_missing"] = study["missing"]
    return ds
