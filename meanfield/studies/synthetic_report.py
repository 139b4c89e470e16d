"""Reports of the synthetic kernel-learning study (:mod:`meanfield.studies.synthetic`): tables,
claims and figures, one set per design, from the runs of a study folder.

``grid``: ``results.nc`` (dims learner × task × noise × m × seed), ``table.csv``, ``table.md``
(mean ± standard error over seeds), ``claims.md`` (the paper's claims [1]_ as paired differences ±
their standard error), ``error_vs_m.png``, ``error_vs_noise.png``. ``variants``: ``table.csv``,
``table.md`` (paired differences against RFF and importance sampling, 95 % t-intervals),
``cv_choices.md``, ``claims.md``. ``tuned``: ``table.csv``, ``table.md``, ``cv_choices.md``,
``claims.md`` (Holm-corrected [4]_ families with Bonferroni intervals), ``moved.md``,
``beta_curve.md``, ``error_vs_noise.png``; the learn-or-stay learner is derived from the
records (:func:`meanfield.learners.tuning.learn_or_stay`). ``diagnosis``: ``summary.md``,
``diagnosis.csv``, ``curves.csv``, ``diagnosis.png``. ``sinha_duchi``: ``table.md`` (the
published numbers [3]_ beside ours under four ridges). RFF: random Fourier features [2]_. The
markdown and CSV pieces are those of :mod:`meanfield.workbench.report_tables`.

Paired intervals: every learner of a cell sees the same split, and the Coulomb particles start
from the fixed-RFF draw, so differences are taken seed by seed.

References
----------
.. [1] The paper: learning the random-feature distribution by Langevin dynamics of interacting
   particles (Khuzani et al., arXiv:1909.11820; summary in ``seeds/``).
.. [2] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.
.. [3] A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.
.. [4] S. Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Stat. 6
   (1979).

See Also
--------
meanfield.studies.synthetic : the study; its ``write_report`` calls :func:`report`.
meanfield.stats.paired_family : the paired statistics.

Examples
--------
>>> import tempfile
>>> from meanfield.studies.synthetic_report import report
>>> report(tempfile.mkdtemp(), tempfile.mkdtemp())  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
meanfield.errors.MissingFileError: no config.json in ...
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from contextlib import suppress
from pathlib import Path

import numpy as np
import xarray as xr

from ..learners.tuning import learn_or_stay
from ..stats import paired_family, t_interval
from ..workbench.report_tables import (
    counts_cell,
    family_table,
    interval,
    markdown_section,
    markdown_table,
    mean_se,
    plus_minus,
    write_csv,
    write_lines,
)

__all__ = ["TASKS", "LEARNER_LABELS", "PUBLISHED", "SETS", "load_study", "cell_records", "report"]

#: Each task's settings (:func:`meanfield.learners.tasks.make_task` keywords); part of every key.
TASKS = {
    "radial": dict(d=10),
    "gaussian_mixture": dict(d=5),
    "checkerboard": dict(n_cells=4, d=2),
    "two_moons": dict(jitter=0.3, d=2),
}

LEARNER_LABELS = {
    "rff": "fixed RFF",
    "importance": "importance sampling",
    "coulomb": "Coulomb particles",
    "langevin": "Langevin, lambda=0",
}

#: Sinha & Duchi's published test errors (one run) and protocol.
PUBLISHED = {"rff": 0.355, "importance": 0.143}

#: The diagnosis's feature sets, in report order.
SETS = ("rff", "learned", "learned_w_prior_b", "norms_only", "directions_only", "narrowed", "frame")


def cell_records(ds: xr.Dataset) -> list[dict]:
    """A run file's records (:func:`~meanfield.studies.synthetic.cell_dataset`'s ``records``).

    See Also
    --------
    meanfield.studies.synthetic.cell_dataset : writes them.
    load_study : the records of every run of a study folder.

    Examples
    --------
    >>> from meanfield.studies.synthetic import cell_dataset
    >>> from meanfield.studies.synthetic_report import cell_records
    >>> cell_records(cell_dataset([{"learner": "rff", "m": 8}]))
    [{'learner': 'rff', 'm': 8}]
    """
    return json.loads(ds.attrs["records"])


def _design_of(cfg: dict) -> str:
    """The design of recorded settings (those recorded before ``design`` existed by their keys)."""
    if "design" in cfg:
        return cfg["design"]
    for key, design in (("learners", "grid"), ("settings", "tuned"), ("protocol", "sinha_duchi")):
        if key in cfg:
            return design
    return "diagnosis" if "n_checkpoints" in cfg else "variants"


def load_study(out) -> tuple[dict, list[dict]]:
    """The settings last run into the study folder ``out`` and the records of their runs there.

    Records: ``grid`` one per learner and cell, the others one per run; ``diagnosis`` and
    ``sinha_duchi`` read all runs of those settings in ``out``, the others the last grid's cells.

    Raises
    ------
    meanfield.errors.MissingFileError, meanfield.errors.DataFileError
        No ``config.json`` in ``out``, or not a study record of the sweep layout.

    See Also
    --------
    report : writes the reports from these records.
    meanfield.studies.synthetic.run_study : runs a study into ``out``.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic_report import load_study
    >>> load_study(tempfile.mkdtemp())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    meanfield.errors.MissingFileError: no config.json in ...
    """
    from ..errors import DataFileError, MissingFileError
    from ..workbench.sweeps import grid_points, run_key

    out = Path(out)
    path = out / "config.json"
    if not path.is_file():
        raise MissingFileError(f"no config.json in {str(out)!r}: nothing was run there")
    try:
        study = json.loads(path.read_text())
        sweep, cfg = study["sweep"], dict(study["config"])
    except (ValueError, KeyError, TypeError):
        raise DataFileError(f"{path} is not a study record of the sweep layout") from None
    cfg["design"] = _design_of(cfg)
    if cfg["design"] in ("diagnosis", "sinha_duchi"):
        runs = sorted((out / "runs").glob("*.nc"))
    else:
        keys = (run_key(p, sweep["digest"]) for p in grid_points(sweep["grid"]))
        runs = [out / "runs" / f"{key}.nc" for key in keys]
    records, grid = [], cfg["design"] == "grid"
    for run in runs:  # skip a file that cannot be read (still being written) or of other settings
        with suppress(OSError, ValueError, KeyError), xr.open_dataset(run, engine="h5netcdf") as ds:
            if ds.attrs.get("sweep_config_digest", sweep["digest"]) == sweep["digest"]:
                records += cell_records(ds) if grid else [json.loads(ds.attrs["record"])]
    return cfg, records


def _subplots(rows: int, cols: int, size, **kw):
    """A figure of rows × cols axes (always 2-D) on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(rows, cols, figsize=size, squeeze=False, **kw)


def _save(fig, path: Path, dpi: int) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def _errors(records, keys=("task", "m", "noise"), metric: str = "ridge_test_error") -> dict:
    """{(learner, *keys): {seed: value}} of one metric."""
    out: dict = {}
    for r in records:
        for name, res in r["learners"].items():
            if metric in res:
                out.setdefault((name, *(r[k] for k in keys)), {})[r["seed"]] = res[metric]
    return out


def _seedwise(E, *keys) -> np.ndarray:
    """The values of ``E[key]`` ({seed: value}, :func:`_errors`) at the seeds every key has,
    sorted, one row per key: the paired samples, gaps and ratios of the claims, seed by seed."""
    xs = [E.get(key, {}) for key in keys]
    seeds = sorted(set.intersection(*(set(x) for x in xs)))
    return np.array([[x[s] for s in seeds] for x in xs], dtype=float).reshape(len(xs), -1)


def _m_change(E, learner: str, lo: tuple, hi: tuple) -> tuple:
    """From m = lo to hi (cell keys after the learner), seed by seed where ``rff`` and ``learner``
    have both: the error gaps ``rff`` − ``learner`` at lo and at hi, and the accuracy ratios
    (1 − error at lo) / (1 − error at hi) of ``learner``, ``rff``, ``importance`` (its seeds)."""
    keys = [(name, *key) for key in (lo, hi) for name in ("rff", learner)]
    rff_lo, ln_lo, rff_hi, ln_hi = _seedwise(E, *keys)
    imp_lo, imp_hi = _seedwise(E, ("importance", *lo), ("importance", *hi), *keys)[:2]
    ratio = {learner: (1 - ln_lo) / (1 - ln_hi), "rff": (1 - rff_lo) / (1 - rff_hi)}
    ratio["importance"] = (1 - imp_lo) / (1 - imp_hi)
    return rff_lo - ln_lo, rff_hi - ln_hi, ratio


def _pair(E, a, b, key) -> tuple:
    """Seed-aligned arrays of ``E[a, *key]`` and ``E[b, *key]`` (one paired comparison)."""
    return tuple(_seedwise(E, (a, *key), (b, *key)))


_GRID_METRICS = (
    "ridge_test_error logistic_test_error ridge_test_accuracy alignment_train alignment_test "
    "fit_time alignment_init alignment min_distance_init min_distance"
).split()
_NOISE_NOTE = "label noise on the training labels only."
#: The ``grid`` design's protocol, in the attributes of its ``results.nc``.
_GRID_PROTOCOL = dict(
    bandwidth="median heuristic on the training inputs",
    ridge_alpha="exact leave-one-out over n_train * 10^[-7..0]",
    logistic_C=100.0,
)


def _grid_to_dataset(records, cfg):
    """Records -> xarray.Dataset with dims (learner, task, noise, m, seed); NaN where absent."""
    from .._version import __version__

    coords = dict(learner=cfg["learners"], task=cfg["tasks"], noise=list(map(float, cfg["noise"])))
    coords.update(m=cfg["m"], seed=cfg["seeds"])
    shape = tuple(len(v) for v in coords.values())
    index = {k: {v: i for i, v in enumerate(vals)} for k, vals in coords.items()}
    data = {k: np.full(shape, np.nan) for k in _GRID_METRICS}
    for r in records:
        ix = tuple(index[k][float(r[k]) if k == "noise" else r[k]] for k in coords)
        for k in _GRID_METRICS:
            if k in r:
                data[k][ix] = r[k]
    ds = xr.Dataset({k: (tuple(coords), v) for k, v in data.items()}, coords=coords)
    attrs = dict(n_train=cfg["n_train"], n_test=cfg["n_test"], coulomb=json.dumps(cfg["coulomb"]))
    attrs["tasks"] = json.dumps({t: TASKS[t] for t in cfg["tasks"]})
    ds.attrs.update(attrs, **_GRID_PROTOCOL, meanfield_version=__version__)
    return ds


def _grid_mse(a, axis=-1):
    """Mean and standard error over ``axis`` (NaN-aware, ddof=1)."""
    n = np.sum(np.isfinite(a), axis=axis)
    mean = np.nanmean(a, axis=axis)
    sd = np.nanstd(a, axis=axis, ddof=1) if a.shape[axis] > 1 else np.zeros_like(mean)
    return mean, sd / np.sqrt(np.maximum(n, 1))


def _grid_write_tables(ds, out: Path):
    """table.csv (long form) and table.md (test error, ridge, mean ± SE over seeds)."""
    rows = ["learner,task,noise,m,metric,mean,se,n_seeds"]
    dims = ("learner", "task", "noise", "m")
    for metric in ["ridge_test_error", "logistic_test_error", "alignment_test", "fit_time"]:
        mean, se = _grid_mse(ds[metric].values)
        n = np.isfinite(ds[metric].values).sum(-1)
        for idx in np.ndindex(mean.shape):
            lab = [str(ds[d].values[i]) for d, i in zip(dims, idx, strict=True)]
            rows.append(",".join(lab + [metric, f"{mean[idx]:.6g}", f"{se[idx]:.3g}", str(n[idx])]))
    write_lines(out / "table.csv", rows)
    ms, n_train, n_test = [f"m = {m}" for m in ds.m.values], ds.attrs["n_train"], ds.attrs["n_test"]
    md = ["# Test error (ridge on the learned features), mean ± standard error over seeds", ""]
    md += [f"n_train = {n_train}, n_test = {n_test}, {ds.sizes['seed']} seeds; {_NOISE_NOTE}", ""]
    for task in ds.task.values:
        body = []
        for nz, ln in itertools.product(ds.noise.values, ds.learner.values):
            mean, se = _grid_mse(ds["ridge_test_error"].sel(task=task, noise=nz, learner=ln).values)
            body.append([f"{nz:g}", LEARNER_LABELS.get(ln, ln), *map(plus_minus, mean, se)])
        md += [f"## {task}", "", *markdown_table(["noise", "learner", *ms], body), ""]
    md += ["# Kernel-training time (s), mean over tasks, noise levels and seeds", ""]
    rows = []
    for ln in ds.learner.values:
        t = ds["fit_time"].sel(learner=ln).mean(("task", "noise", "seed")).values
        rows.append([LEARNER_LABELS.get(ln, ln), *(f"{x:.3g}" for x in t)])
    write_lines(out / "table.md", md + markdown_table(["learner", *ms], rows))


def _grid_write_claims(ds, out: Path, moderate=(0.1, 0.2)):
    """The paper's three claims, checked with paired differences over seeds."""
    err = ds["ridge_test_error"]
    lines = [
        "# The paper's claims against this study",
        "",
        "Differences are paired over seeds (same data split, same initial draw); ± is the",
        "standard error of the paired difference. Positive = Coulomb particles have lower error.",
        "",
    ]
    have = ds.learner.values.tolist()
    noises = [n for n in moderate if n in ds.noise.values] or list(ds.noise.values)
    cells = list(itertools.product(ds.task.values, noises))
    ms = [f"m = {m}" for m in ds.m.values]

    def gap(base, task, nz):  # error of ``base`` minus that of the Coulomb particles
        e = err.sel(task=task, noise=nz)
        return e.sel(learner=base) - e.sel(learner="coulomb")

    def flagged(mean, se):  # `*`: the mean is above 0 by > 2 SE, `†`: below
        flag = " *" if mean - 2 * se > 0 else (" †" if mean + 2 * se < 0 else "")
        return f"{mean:+.3f} ± {se:.3f}{flag}"

    if "coulomb" in have:
        for base in [b for b in ("rff", "importance", "langevin") if b in have]:
            rows = [
                [t, f"{nz:g}", *map(flagged, *_grid_mse(gap(base, t, nz).values))]
                for t, nz in cells
            ]
            lines += [f"## Claim 1: Coulomb particles beat {LEARNER_LABELS[base]} (noise {noises})"]
            lines += ["", *markdown_table(["task", "noise", *ms], rows), ""]
            lines += ["`*` Coulomb better by > 2 SE; `†` Coulomb worse by > 2 SE.", ""]
        m_lo, m_hi = int(ds.m.values[0]), int(ds.m.values[-1])
        bases = [b for b in ("rff", "importance") if b in have]
        rows = []
        for t, nz in cells:
            grows = [gap(b, t, nz).sel(m=m_hi) - gap(b, t, nz).sel(m=m_lo) for b in bases]
            rows.append([t, f"{nz:g}", *(flagged(*_grid_mse(g.values)) for g in grows)])
        lines += [f"## Claim 2: the gap grows with m (gap at m = {m_hi} minus gap at m = {m_lo})"]
        header = ["task", "noise", *(f"vs {LEARNER_LABELS[b]}" for b in bases)]
        lines += ["", *markdown_table(header, rows), ""]
        lines += ["`*` the gap grows by > 2 SE; `†` it shrinks by > 2 SE.", ""]
    acc = 1 - err
    if 64 in ds.m.values and 256 in ds.m.values:
        rows = []
        for t, nz in itertools.product(ds.task.values, ds.noise.values):
            a = acc.sel(task=t, noise=nz)
            ratios = [_grid_mse((a.sel(m=64) / a.sel(m=256)).sel(learner=ln).values) for ln in have]
            rows.append([t, f"{nz:g}", *(f"{mean:.3f} ± {se:.3f}" for mean, se in ratios)])
        lines += ["## Claim 3: accuracy at m = 64 as a fraction of accuracy at m = 256", ""]
        labels = [LEARNER_LABELS.get(x, x) for x in ds.learner.values]
        lines += markdown_table(["task", "noise", *labels], rows) + [""]
    write_lines(out / "claims.md", lines)


def _grid_plot(ds, out: Path):
    """The figures error_vs_m.png and error_vs_noise.png."""
    err, ms = ds["ridge_test_error"], ds.m.values
    tasks, noises = list(ds.task.values), list(ds.noise.values)
    size = (3.4 * len(tasks), 2.8 * len(noises))
    fig, axes = _subplots(len(noises), len(tasks), size, sharex=True)
    for (i, nz), (j, task) in itertools.product(enumerate(noises), enumerate(tasks)):
        ax = axes[i, j]
        for ln in ds.learner.values:
            mean, se = _grid_mse(err.sel(learner=ln, task=task, noise=nz).values)
            ax.plot(ms, mean, marker="o", ms=3, label=LEARNER_LABELS.get(ln, ln))
            ax.fill_between(ms, mean - se, mean + se, alpha=0.25)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{task}, noise {nz:g}", fontsize=9)
        if j == 0:
            ax.set_ylabel("test error (ridge)")
        if i == len(noises) - 1:
            ax.set_xlabel("number of features m")
    axes[0, 0].legend(fontsize=7)
    _save(fig, out / "error_vs_m.png", 120)
    m_sel = 64 if 64 in ms else int(ms[-1])
    fig, axes = _subplots(1, len(tasks), (3.4 * len(tasks), 2.8))
    for ax, task in zip(axes[0], tasks, strict=True):
        for ln in ds.learner.values:
            mean, se = _grid_mse(err.sel(learner=ln, task=task, m=m_sel).values)
            kw = dict(marker="o", ms=3, capsize=2, label=LEARNER_LABELS.get(ln, ln))
            ax.errorbar(ds.noise.values, mean, yerr=se, **kw)
        ax.set_title(f"{task}, m = {m_sel}", fontsize=9)
        ax.set_xlabel("label noise")
        if ax is axes[0, 0]:
            ax.set_ylabel("test error (ridge)")
    axes[0, 0].legend(fontsize=7)
    _save(fig, out / "error_vs_noise.png", 120)


_TUNED_LABELS = {
    "rff_median": "RFF, median bandwidth (no CV)",
    "rff": "RFF (CV bandwidth)",
    "sklearn_rff": "scikit-learn RBFSampler + RidgeClassifierCV (CV bandwidth)",
    "importance": "importance sampling (CV bandwidth, ρ)",
    "coulomb_linear": "Coulomb, first configuration (linear, β = 10³)",
    "coulomb_tempered": "Coulomb, tempered + direction repulsion (β by CV)",
    "coulomb_tempered_align": "Coulomb, tempered + direction repulsion (β by held-out alignment)",
    "coulomb_learn_or_stay": "Coulomb, tempered where CV prefers it to the RFF draw, else the draw",
}
_TUNED_COULOMB = [name for name in _TUNED_LABELS if name.startswith("coulomb")]
#: The label columns of a tuned family over cells and over (task, noise); the two references.
_CELL, _TN, _REFS = ("task", "m", "noise"), ("task", "noise"), ("rff", "importance")
_FAMILY_NOTE = (
    "One family of K = {} tests: p from the paired t-test, Holm-adjusted p over the family, "
    "Bonferroni (simultaneous, family-wise 95 %) interval."
)
_REF_MINUS_COULOMB = "Error of the reference minus error of Coulomb (positive: Coulomb better)."


def _error_table(E, learners, labels: dict, tasks, cell: tuple) -> tuple[str, list[str]]:
    """The seeds of RFF per task (``"task k, ..."``) and the table learner × task of the test
    error's mean ± SE over the seeds, at the cell keys ``cell`` after the task."""
    ks = ", ".join(f"{t} {len(E.get(('rff', t, *cell), {}))}" for t in tasks)
    rows = [
        [labels.get(ln, ln), *(mean_se(E.get((ln, t, *cell), {}).values()) for t in tasks)]
        for ln in learners
    ]
    return ks, markdown_table(["learner", *tasks], rows)


def _tuned_present(records) -> list[tuple]:
    """The (m, noise) settings that have records, noise first then m."""
    return sorted({(r["m"], r["noise"]) for r in records}, key=lambda p: (p[1], p[0]))


def _tuned_cells(records, cfg):
    """(m, noise, task, the cell's records) of every setting present, task by task."""
    for m, n in _tuned_present(records):
        for t in cfg["tasks"]:
            yield m, n, t, [r for r in records if (r["task"], r["m"], r["noise"]) == (t, m, n)]


def _tuned_write_table(records, cfg, out: Path) -> None:
    E, tasks = _errors(records), cfg["tasks"]
    learners = [n for n in _TUNED_LABELS if any(n in r["learners"] for r in records)]
    lines = [
        f"Test error (ridge, α by LOO over n · 10^[−12..1]), n_train = {cfg['n_train']}, "
        f"n_test = {cfg['n_test']}; mean ± standard error over the seeds present (k). Label "
        "noise on the training labels only.",
        "",
    ]
    for m, noise in _tuned_present(records):
        ks, table = _error_table(E, learners, _TUNED_LABELS, tasks, (m, noise))
        lines += [f"### noise {noise}, m = {m}", "", f"Seeds: {ks}", "", *table, ""]
    write_lines(out / "table.md", lines)


#: The columns of the tuned design's ``cv_choices.md`` after noise, m and task.
_CV_CHOICES = {
    "RFF k": lambda x: x["rff"]["bandwidth_exponent"],
    "RFF edge": lambda x: x["rff"]["cv"]["edges"]["bandwidth"],
    "sklearn k": lambda x: x["sklearn_rff"]["bandwidth_exponent"],
    "IS k": lambda x: x["importance"]["bandwidth_exponent"],
    "IS ρ_f": lambda x: x["importance"]["rho_fraction"],
    "IS edges": lambda x: "/".join(x["importance"]["cv"]["edges"].values()),
    "tempered β": lambda x: x["coulomb_tempered"]["beta"],
    "β edge": lambda x: x["coulomb_tempered"]["cv"]["edges"]["beta"],
    "β by alignment": lambda x: x["coulomb_tempered_align"]["beta"],
}


def _tuned_write_cv_choices(records, cfg, out: Path) -> None:
    rows = []
    for m, noise, t, cell in _tuned_cells(records, cfg):
        if cell:
            L = [r["learners"] for r in cell]
            alpha_edges = Counter(n for x in L for n, v in x.items() if v.get("alpha_edge"))
            counts = [counts_cell(map(col, L)) for col in _CV_CHOICES.values()]
            rows.append([noise, m, t, *counts, counts_cell(alpha_edges.elements()) or "none"])
    header = ["noise", "m", "task", *_CV_CHOICES, "α at a grid end"]
    lines = [
        "CV-chosen values (count over seeds) and where they sit in their searched lists "
        "(`interior`; `low end`/`high end`: an end of the candidate list, i.e. the search could "
        "not widen further). RFF/IS bandwidth as k in σ = 2^k · median (list k ∈ "
        f"[{cfg['bandwidth_exponents'][0]}, {cfg['bandwidth_exponents'][1]}]); ρ_f ∈ "
        f"{cfg['rho_fractions']} (both ends natural bounds); β ∈ {cfg['betas']}. Ridge α: "
        "cells whose LOO choice is an end of n · 10^[−12..1], per learner.",
        "",
    ]
    write_lines(out / "cv_choices.md", lines + markdown_table(header, rows))


def _tuned_family_table(title, note, family: dict, labels=_CELL) -> list[str]:
    """A family of paired comparisons (:func:`~meanfield.stats.paired_family` of ``family``)."""
    rows = paired_family(family)
    notes = [note, _FAMILY_NOTE.format(rows[0]["K"] if rows else 0)]
    return markdown_section(title, notes, family_table(rows, labels)) + [""]


def _tuned_claims_lines(records, cfg) -> list[str]:
    """Every family of claims (one Holm correction per family)."""
    E, present = _errors(records), _tuned_present(records)
    ms, tasks, noises = sorted(cfg["m"]), cfg["tasks"], cfg["noise"]
    cells = [(t, m, n) for m, n in present for t in tasks]
    lines = ["# Claims, round three (every learner tuned on widened grids)", ""]
    fam = {(*c, ref): _pair(E, ref, "coulomb_tempered", c) for c in cells for ref in _REFS}
    title = "learned particles (tempered variant) beat fixed features and importance sampling"
    lines += _tuned_family_table(
        f"Claim 1: {title}", _REF_MINUS_COULOMB, fam, (*_CELL, "reference")
    )
    note = "Positive: worse than RFF. 'Not worse' is read from the Bonferroni upper bound; a "
    note += "significant loss is a positive mean with Holm p < 0.05."
    for ln in ("coulomb_tempered", "coulomb_learn_or_stay", "coulomb_linear", "importance"):
        title = f"Against RFF: {_TUNED_LABELS[ln]} minus RFF, every cell"
        lines += _tuned_family_table(title, note, {c: _pair(E, ln, "rff", c) for c in cells})
    lo, hi = ms[0], ms[-1]
    both = [n for n in noises if lo != hi and (lo, n) in present and (hi, n) in present]
    gaps, ratios = {}, {}
    for t, n in itertools.product(tasks, both):
        gap_lo, gap_hi, ratio = _m_change(E, "coulomb_tempered", (t, lo, n), (t, hi, n))
        gaps[(t, n)], ratios[(t, n)] = gap_hi - gap_lo, ratio["coulomb_tempered"] - ratio["rff"]
    title = f"Claim 2: the gap RFF − Coulomb grows from m = {lo} to m = {hi}"
    lines += _tuned_family_table(title, "Change of the gap (positive: it grows).", gaps, _TN)
    title = f"Claim 3: fixed features lose more accuracy from m = {hi} to m = {lo}"
    note = "Accuracy ratio (m = lo / m = hi) of Coulomb minus that of RFF (positive: fixed "
    note += "features degrade more)."
    lines += _tuned_family_table(title, note, ratios, _TN)
    title = "Sanity: scikit-learn's RBFSampler pipeline minus ours (same model, another draw)"
    fam = {c: _pair(E, "sklearn_rff", "rff", c) for c in cells}
    return lines + _tuned_family_table(title, "Expected: no difference.", fam)


_MOVED_MEANS = "align_c_train_init align_c_train disp disp_redraw ed ed_redraw norm_ratio".split()
_MOVED_MEANS += ["iso_init", "iso"]


def _tuned_moved_lines(records, cfg) -> list[str]:
    """How far each Coulomb learner moved, with the families 'the centred training alignment
    rose' and 'the law moved more than a redraw' (energy distance) for the tempered one."""
    rows, fam_a, fam_e = [], {}, {}
    for m, n, t, cell in _tuned_cells(records, cfg):
        for ln in _TUNED_COULOMB:
            xs = [r["learners"][ln] for r in cell if ln in r["learners"]]
            if not xs:
                continue
            mu = {k: float(np.mean([x[k] for x in xs])) for k in _MOVED_MEANS}
            dte = np.mean([x["align_c_test"] - x["align_c_test_init"] for x in xs])
            name = ln.replace("coulomb_", "")
            if ln == "coulomb_learn_or_stay":
                name += f" (learned {sum(x['learned'] for x in xs)}/{len(xs)})"
            align = f"{mu['align_c_train_init']:.3f} → {mu['align_c_train']:.3f}"
            moved = [f"{mu['disp'] / mu['disp_redraw']:.2f}", f"{mu['ed'] / mu['ed_redraw']:.1f}"]
            moved += [f"{mu['norm_ratio']:.2f}", f"{mu['iso_init']:.2f} → {mu['iso']:.2f}"]
            rows.append([n, m, t, name, align, f"{dte:+.3f}", *moved])
        xs = [r["learners"]["coulomb_tempered"] for r in cell]
        fam_a[(t, m, n)] = np.array([x["align_c_train"] - x["align_c_train_init"] for x in xs])
        fam_e[(t, m, n)] = np.log(np.array([x["ed"] / x["ed_redraw"] for x in xs]))
    header = ["noise", "m", "task", "learner", "align. train", "Δ align. test", "disp / redraw"]
    header += ["ED / redraw", "norm ratio", "isotropy"]
    lines = [
        "# Did the particles move?",
        "",
        "Per cell, means over seeds of: the centred training alignment at the start → end "
        "(Δ test alignment), the mean particle displacement and the energy distance of the "
        "final from the initial cloud (standardised frequencies), each divided by the same "
        "quantity for an independent prior draw (a redraw: displacement ratio ≈ 1, "
        "energy-distance ratio ≈ 1), the median-norm ratio and the direction isotropy "
        "d·λ_max (start → end).",
        "",
        *markdown_table(header, rows),
        "",
    ]
    title = "Tempered variant: the centred training alignment rose (end − start)"
    lines += _tuned_family_table(title, "Positive: it rose.", fam_a)
    title = "Tempered variant: the law moved more than a redraw (log of ED / ED of a redraw)"
    note = "Positive: the final cloud is further from the start than an independent prior draw is."
    return lines + _tuned_family_table(title, note, fam_e)


def _tuned_beta_lines(records, cfg) -> list[str]:
    """The tempered variant's CV error (1 − mean held-out accuracy) at each β searched, mean
    over the seeds whose search reached it (k in brackets): the curve CV chose from."""
    rows = []
    for m, n, t, cell in _tuned_cells(records, cfg):
        if cell:
            scores = [s for r in cell for s in r["learners"]["coulomb_tempered"]["cv"]["scores"]]
            errors = [
                [1 - s["accuracy"] for p, s in scores if p == [j]] for j in range(len(cfg["betas"]))
            ]
            rows.append([n, m, t, *(f"{np.mean(v):.3f} ({len(v)})" if v else "—" for v in errors)])
    title = "# The tempered variant's cross-validated error at each β (training folds only; "
    title += "mean over the seeds whose widened search scored it, k in brackets)"
    header = ["noise", "m", "task", *(f"β = {b:g}" for b in cfg["betas"])]
    return [title, "", *markdown_table(header, rows)]


def _tuned_write_figure(records, cfg, out: Path) -> None:
    """``error_vs_noise.png``: test error (mean ± 2 SE over seeds) against the label noise, one
    panel per task and m, for RFF, importance sampling and the Coulomb learners."""
    E = _errors(records)
    show = ["rff", "sklearn_rff", "importance", "coulomb_linear", "coulomb_tempered"]
    ms, tasks = sorted(cfg["m"]), cfg["tasks"]
    fig, axes = _subplots(len(ms), len(tasks), (4 * len(tasks), 3.3 * len(ms)))
    style = dict(marker="o", ms=3, capsize=2)
    for (i, m), (j, t) in itertools.product(enumerate(ms), enumerate(tasks)):
        ax = axes[i, j]
        for k, ln in enumerate(show):
            vs = {n: np.array(list(E.get((ln, t, m, n), {}).values())) for n in cfg["noise"]}
            vs = {n + 0.004 * (k - 2): v for n, v in vs.items() if len(v) > 1}  # side by side
            if vs:
                mu = [v.mean() for v in vs.values()]
                se = [2 * v.std(ddof=1) / np.sqrt(len(v)) for v in vs.values()]
                ax.errorbar(list(vs), mu, yerr=se, **style, label=_TUNED_LABELS[ln])
        ax.set(title=f"{t}, m = {m}", xlabel="label noise", ylabel="test error")
    axes[0, 0].legend(fontsize=6)
    _save(fig, out / "error_vs_noise.png", 100)


_TUNED_CSV = (
    "ridge_test_error ridge_alpha alpha_edge alignment_test align_c_test_final fit_time "
    "bandwidth_exponent rho_fraction beta disp disp_redraw ed ed_redraw norm_ratio iso iso_init "
    "align_c_train_init align_c_train plateau"
).split()


def _learner_rows(records, keys, fields) -> list[dict]:
    """One CSV row per learner of every record: the record's ``keys``, the learner's ``fields``."""
    return [
        {"learner": name, **{k: r[k] for k in keys}} | {k: res.get(k, "") for k in fields}
        for r in records
        for name, res in r["learners"].items()
    ]


_VARIANTS_LABELS = {
    "rff_median": "fixed RFF, median bandwidth (no CV)",
    "rff": "fixed RFF (CV bandwidth)",
    "importance": "importance sampling (CV bandwidth, rho)",
    "coulomb_cv": "**Coulomb, CV-chosen variant**",
}
_VARIANTS_CSV = (
    "ridge_test_error alignment_train alignment_test fit_time cv_score bandwidth_factor "
    "best_step variant"
).split()


def _variants_paired_ci(a, b=None):
    """Mean of a - b (seed by seed) with its 95 % t-interval and the number of pairs
    (:func:`meanfield.stats.t_interval`, the package's one t-interval)."""
    a = np.asarray(a, dtype=float)
    d = a if b is None else a - np.asarray(b, dtype=float)
    d = d[np.isfinite(d)]
    return (*t_interval(d, 0.95), len(d))


def _variants_write_table(records, cfg, out: Path):
    E, tasks = _errors(records, ("task", "m")), cfg["tasks"]
    learners = ["rff_median", "rff", "importance"]
    learners += [f"coulomb_{v}" for v in cfg["variants"]] + ["coulomb_cv"]
    lines = [
        f"Test error (ridge, α by LOO) at noise {cfg['noise']}, n_train = {cfg['n_train']}, "
        f"n_test = {cfg['n_test']}; mean ± standard error over the seeds present (k). "
        "Paired differences are learner − reference (negative: the learner is better), "
        "with 95 % t-intervals.",
        "",
    ]

    def paired(ln, ref, t, m):
        a, b = _pair(E, ln, ref, (t, m))
        if len(a) < 2:
            return "—"
        mean, lo, hi, _ = _variants_paired_ci(a, b)
        return interval(mean, lo, hi) + (" *" if (hi < 0 or lo > 0) else "")

    for m in cfg["m"]:
        ks, table = _error_table(E, learners, _VARIANTS_LABELS, tasks, (m,))
        lines += [f"### m = {m}", "", f"Seeds per task: {ks}", "", *table]
        for ref in _REFS:
            rows = [
                [_VARIANTS_LABELS.get(ln, ln), *(paired(ln, ref, t, m) for t in tasks)]
                for ln in learners
                if ln != ref
            ]
            lines += ["", f"Paired difference against {_VARIANTS_LABELS[ref]} at m = {m}:", ""]
            lines += markdown_table(["learner", *tasks], rows)
        lines.append("")
    write_lines(out / "table.md", lines + ["`*`: the 95 % interval excludes 0."])


def _variants_write_cv_choices(records, cfg, out: Path):
    rows = []
    for m, t in itertools.product(cfg["m"], cfg["tasks"]):
        cell = [r["learners"] for r in records if r["task"] == t and r["m"] == m]
        if cell:
            c = Counter(x["coulomb_cv"]["variant"] for x in cell)
            bw = Counter(round(x["rff"]["bandwidth_factor"], 3) for x in cell)
            isf = [x["importance"] for x in cell]
            imp = Counter(
                (round(i["bandwidth_factor"], 3), i["params"]["rho_fraction"]) for i in isf
            )
            counts = [", ".join(f"{k} {v}" for k, v in c.most_common())]
            counts.append(", ".join(f"{k}: {v}" for k, v in sorted(bw.items())))
            counts.append(", ".join(f"{a}, {b}: {v}" for (a, b), v in sorted(imp.items())))
            rows.append([t, m, *counts])
    header = ["task", "m", "Coulomb variants chosen by 3-fold CV (count over seeds)"]
    header += ["RFF bandwidth factor (× median)", "IS bandwidth factor, ρ fraction"]
    write_lines(out / "cv_choices.md", markdown_table(header, rows))


def _variants_write_claims(records, cfg, out: Path):
    E = _errors(records, ("task", "m"))
    tasks, ms = cfg["tasks"], sorted(cfg["m"])
    lo_m, hi_m = ms[0], ms[-1]
    rows = []
    for t, m in itertools.product(tasks, ms):
        r1 = _variants_paired_ci(*_pair(E, "rff", "coulomb_cv", (t, m)))
        r2 = _variants_paired_ci(*_pair(E, "importance", "coulomb_cv", (t, m)))
        if r1[3] < 2:
            continue
        worse = "RFF" if r1[2] < 0 else ("IS" if r2[2] < 0 else None)  # a significant loss
        shown = np.isfinite(r1[1]) and np.isfinite(r2[1])  # NaN bounds: no spread
        verdict = "not shown (interval contains 0)" if shown else "not shown (no spread)"
        verdict = "holds" if r1[1] > 0 and r2[1] > 0 else verdict
        verdict = f"fails (Coulomb significantly worse than {worse})" if worse else verdict
        rows.append([t, m, interval(*r1[:3]), interval(*r2[:3]), verdict])
    lines = [
        "# The paper's claims, rechecked with CV-tuned learners (issue 10)",
        "",
        f"Noise {cfg['noise']} (moderate), m ∈ {ms}; paired over seeds, 95 % t-intervals "
        "[lo, hi], k = number of seeds. 'Coulomb' is the variant chosen by 3-fold CV on the "
        "training data in each cell; RFF and importance sampling are CV-tuned too.",
        "",
    ]
    title = "Claim 1: learned particles beat fixed features and importance sampling"
    header = ["task", "m", "RFF − Coulomb", "IS − Coulomb", "verdict"]
    lines += markdown_section(title, [_REF_MINUS_COULOMB], markdown_table(header, rows))
    gap_rows, ratio_rows = [], []
    for t in tasks:
        gap_lo, gap_hi, ratio = _m_change(E, "coulomb_cv", (t, lo_m), (t, hi_m))
        if len(gap_lo) < 2:
            continue
        lo, hi = _variants_paired_ci(gap_lo), _variants_paired_ci(gap_hi)
        ch = _variants_paired_ci(gap_hi - gap_lo)
        verdict = "holds" if ch[1] > 0 else ("fails (shrinks)" if ch[2] < 0 else "not shown")
        gap_rows.append([t, interval(*lo[:3]), interval(*hi[:3]), interval(*ch), verdict])
        rc, rr = _variants_paired_ci(ratio["coulomb_cv"]), _variants_paired_ci(ratio["rff"])
        ri = _variants_paired_ci(ratio["importance"])
        d = _variants_paired_ci(ratio["coulomb_cv"] - ratio["rff"])
        keeps, degrade = rc[1] >= 0.9, d[1] > 0
        verdict = f"first half {'holds' if keeps else 'not shown'}, fixed features "
        verdict += "degrade more" if degrade else "do not degrade significantly more"
        ratios = [interval(*x[:3], fmt=".3f") for x in (rc, rr, ri)]
        ratio_rows.append([t, *ratios, interval(*d), "holds" if keeps and degrade else verdict])
    title = f"Claim 2: the gap grows with m (gap at m = {hi_m} minus gap at m = {lo_m})"
    note = "gap = RFF error − Coulomb error (same seed); positive change: the gap grows."
    header = ["task", f"gap at m = {lo_m}", f"gap at m = {hi_m}", "change", "verdict"]
    lines += ["", *markdown_section(title, [note], markdown_table(header, gap_rows))]
    title = f"Claim 3: {lo_m} learned features keep ≈ 90 % of the {hi_m}-feature accuracy, "
    note = f"ratio = accuracy at m = {lo_m} / accuracy at m = {hi_m}, per seed."
    header = ["task", "Coulomb ratio", "RFF ratio", "IS ratio", "Coulomb − RFF ratio", "verdict"]
    table = markdown_table(header, ratio_rows)
    lines += ["", *markdown_section(title + "fixed features degrade more", [note], table)]
    write_lines(out / "claims.md", lines)


_DIAGNOSIS_SHOW = ["radial", "gaussian_mixture", "checkerboard"]
_DIAGNOSIS_LABELS = {
    "rff": "RFF draw (start)",
    "learned": "learned (first configuration)",
    "learned_w_prior_b": "learned frequencies, prior phases",
    "norms_only": "learned norms, prior directions",
    "directions_only": "prior norms, learned directions",
    "narrowed": "RFF narrowed as much as the learned kernel",
    "frame": "learned with the direction repulsion (λ_F = 1)",
}
#: The paired comparisons of the summary (a − b), one family over every task.
_DIAGNOSIS_COMPARISONS = [("learned", "rff"), ("narrowed", "rff"), ("norms_only", "rff")]
_DIAGNOSIS_COMPARISONS += [("directions_only", "rff"), ("learned_w_prior_b", "learned")]
_DIAGNOSIS_COMPARISONS += [("frame", "rff"), ("frame", "learned")]
_COLUMNS = (("test_error", ".4f"), ("align_c_test", ".3f"), ("isotropy", ".2f"))
_COLUMNS += (("median_norm", ".2f"),)
_NARROWING = "median|w¹|/median|w⁰|"
_CURVE_KEYS = ("test_error", "align_c_test")


def _diagnosis_summary(records) -> str:
    """The summary table and the family of paired differences (Holm over all of it)."""
    by = {}
    for r in records:
        by.setdefault(r["task"], {})[r["seed"]] = r
    tasks = [t for t in _DIAGNOSIS_SHOW if t in by] + [t for t in by if t not in _DIAGNOSIS_SHOW]
    lines = [
        "Test error (ridge, α by LOO over n · 10^[−12..1]), centred test alignment, direction "
        "isotropy d·λ_max (1 isotropic, d one axis) and median σ|w|: mean ± SE over the seeds "
        "(k). Noise 0.1, m = 256, median bandwidth, n_train = 1000, n_test = 2000.",
        "",
    ]
    header = ["set", "test error", "centred test alignment", "isotropy", "median σ|w|"]
    fam = {}
    for t in tasks:
        seeds = sorted(by[t])
        sets = [by[t][k]["sets"] for k in seeds]
        rows = [
            [_DIAGNOSIS_LABELS[s], *(mean_se([x[s][k] for x in sets], f) for k, f in _COLUMNS)]
            for s in SETS
        ]
        c = mean_se([by[t][k]["narrowing"] for k in seeds], ".2f")
        lines += [f"### {t} (k = {len(seeds)}; seeds {seeds[0]}–{seeds[-1]})", ""]
        lines += [*markdown_table(header, rows), "", f"Narrowing factor {_NARROWING}: {c}.", ""]
        for a, b in _DIAGNOSIS_COMPARISONS:
            ea, eb = (np.array([x[s]["test_error"] for x in sets]) for s in (a, b))
            fam[(t, _DIAGNOSIS_LABELS[a], _DIAGNOSIS_LABELS[b])] = (ea, eb)
    rows = paired_family(fam)  # one row per comparison: never empty, as records are not
    title = f"### Paired differences of test error (a − b), one family of {rows[0]['K']} tests"
    lines += [f"{title} (Holm-adjusted p; Bonferroni intervals at family-wise 95 %)", ""]
    body = family_table(rows, ["task", "a", "b"], digits=4, estimate="a − b [95 % CI]")
    return "\n".join(lines + body) + "\n"


def _diagnosis_figure(records, out: Path) -> None:
    """``diagnosis.png``, one row per task: the norms σ|w| pooled over the seeds (start,
    learned, the prior χ_d), each set's test error (mean ± 2 SE, grey: seeds), and the linear
    run's test error (± 2 SE) and centred test alignment along its Langevin steps."""
    from scipy.stats import chi

    tasks = [t for t in _DIAGNOSIS_SHOW if any(r["task"] == t for r in records)]
    fig, axes = _subplots(len(tasks), 3, (16, 3.8 * len(tasks)))
    for (ax_norm, ax_err, ax), t in zip(axes, tasks, strict=True):
        recs = sorted((r for r in records if r["task"] == t), key=lambda r: r["seed"])
        n0, n1 = (np.concatenate([r[k] for r in recs]) for k in ("norms_init", "norms_learned"))
        bins, d = np.linspace(0, max(n1.max(), n0.max()) * 1.02, 40), TASKS[t]["d"]
        ax_norm.hist(n0, bins=bins, density=True, histtype="step", label="start (RFF draw)")
        ax_norm.hist(n1, bins=bins, density=True, alpha=0.5, label="learned (first configuration)")
        ax_norm.plot(bins, chi(d).pdf(bins), "k--", lw=1, label=f"prior χ_{d}")
        ax_norm.set(title=f"{t}: σ|w| pooled over {len(recs)} seeds", xlabel="σ |w|")
        ax_norm.legend(fontsize=7)
        for j, s in enumerate(SETS):
            v = np.array([r["sets"][s]["test_error"] for r in recs])
            ax_err.errorbar(v.mean(), j, xerr=2 * v.std(ddof=1) / np.sqrt(len(v)), fmt="o")
            ax_err.plot(v, np.full(len(v), j) + 0.15, ".", color="0.6", ms=3)
        ax_err.set_yticks(range(len(SETS)), [_DIAGNOSIS_LABELS[s] for s in SETS], fontsize=7)
        ax_err.invert_yaxis()
        ax_err.set(title="test error: mean ± 2 SE (grey: seeds)", xlabel="test error")
        steps = [c["step"] for c in recs[0]["curve"]]
        err, al = (np.array([[c[k] for c in r["curve"]] for r in recs]) for k in _CURVE_KEYS)
        ax.plot(steps, err.mean(0), "C1-o", ms=3, label="test error (mean)")
        band = (err.mean(0) + s * err.std(0, ddof=1) / np.sqrt(len(err)) for s in (-2, 2))
        ax.fill_between(steps, *band, color="C1", alpha=0.2)
        ax.set(title="linear run: error and alignment", xlabel="Langevin step", ylabel="error")
        ax2 = ax.twinx()
        ax2.plot(steps, al.mean(0), "C2--", label="centred test alignment (mean)")
        ax2.set_ylabel("centred test alignment")
        ax.legend(fontsize=7, loc="upper left")
        ax2.legend(fontsize=7, loc="lower right")
    _save(fig, out / "diagnosis.png", 100)


def _sinha_duchi_table(records, cfg: dict) -> str:
    """The markdown table of the study (``table.md``) from the records of its seeds and its
    settings (the variants and ridges)."""
    records = sorted(records, key=lambda r: r["seed"])
    ridges = list(cfg["ridges"])
    rows = [
        ("rff", "fixed RFF (D features, sigma = 1)"),
        ("importance", "importance sampling, support of q (Sinha & Duchi)"),
        ("coulomb_cv", "Coulomb particles, CV-chosen variant"),
        ("coulomb_tempered_cv", "Coulomb, tempered + direction repulsion (β by CV)"),
    ] + [(f"coulomb_{v}", f"Coulomb: {v}") for v in {**cfg["variants"], **cfg["tempered"]}]
    seeds = [r["seed"] for r in records]
    cols = [f"{t}_test_error" for t in ridges] + ["published_ridge_train_error"]
    sizes = ", ".join(str(r["learners"]["importance"]["n_features"]) for r in records)
    body, changes = [], []
    for i, (key, label) in enumerate(rows):
        vals = [r["learners"][key] for r in records if key in r["learners"]]
        if vals:
            pub = f"{PUBLISHED[key]:.3f}" if key in PUBLISHED else "—"
            body.append([label, pub, *(mean_se([v[c] for v in vals]) for c in cols)])
        if vals and i < 4:
            p = np.array([v["published_ridge_test_error"] for v in vals])
            other = ("label_mean_loo_ridge", "centred_fixed_ridge", "centred_loo_ridge")
            ch = [np.mean(np.array([v[f"{t}_test_error"] for v in vals]) / p - 1) for t in other]
            changes.append([label, *(f"{c:+.0%}" for c in ch)])
    header = ["features", "published", "α = 0.05, label mean (published)", "α by LOO, label mean"]
    header += ["α = 0.05, centred", "α by LOO, centred", "train error, published ridge"]
    lines = [
        f"Radial task, Sinha & Duchi protocol, seeds {seeds} (mean ± standard error over seeds; "
        f"D = |support| = {sizes}).",
        "",
        "Test error under the four ridges: the penalty α = 0.05 (published) or by exact LOO over "
        "n · 10^[−12..1], and the intercept the label mean on uncentred features (published) or "
        "fitted on centred features.",
        "",
        *markdown_table(header, body),
        "",
        "Relative change of the test error from the published ridge (mean over seeds):",
        "",
        *markdown_table(["features", "α by LOO only", "centring only", "both"], changes),
    ]
    draws = sorted(k for k in records[0]["learners"] if k.startswith("importance"))
    pools = []
    for r in records:
        v = [r["learners"][k] for k in draws if k in r["learners"]]
        p = np.array([x["published_ridge_test_error"] for x in v])
        c = np.array([x["centred_loo_ridge_test_error"] for x in v])
        D = [x["n_features"] for x in v]
        cells = [f"{x.mean():.3f}, {x.std(ddof=1):.3f}" for x in (p, c)]
        pools.append([r["seed"], *cells, f"{min(D)}–{max(D)}"])
    chosen = ", ".join(r["learners"]["coulomb_cv"]["variant"] for r in records)
    chosen_t = ", ".join(r["learners"]["coulomb_tempered_cv"]["variant"] for r in records)
    header = ["seed", "published ridge: mean, sd", "centred LOO ridge: mean, sd", "D range"]
    lines += [
        "",
        f"Importance sampling over {len(draws)} candidate pools per seed (same data): "
        "mean and standard deviation over the pools, per seed.",
        "",
        *markdown_table(header, pools),
        "",
        f"CV-chosen Coulomb variant per seed: {chosen}; tempered β: {chosen_t}.",
    ]
    return "\n".join(lines) + "\n"


#: The files :func:`report` writes, per design.
_REPORTS = {
    "grid": "results.nc table.csv table.md claims.md error_vs_m.png error_vs_noise.png",
    "variants": "table.csv table.md cv_choices.md claims.md",
    "tuned": "table.csv table.md cv_choices.md claims.md moved.md beta_curve.md error_vs_noise.png",
    "diagnosis": "diagnosis.csv curves.csv summary.md diagnosis.png",
    "sinha_duchi": "table.md",
}


def report(out, report_dir=None) -> list[str]:
    """Every report of the study folder ``out`` (module docstring), written into ``report_dir``
    (default ``out``), from the runs of the settings last run there.

    Parameters
    ----------
    out : path
        A study folder (``config.json`` and ``runs/`` of
        :func:`meanfield.studies.synthetic.run_study`).
    report_dir : path, optional
        Where the reports go (created if missing); ``out`` is only read.

    Returns
    -------
    list of str
        The names of the files written (none when no run is on disk yet).

    Raises
    ------
    meanfield.errors.MissingFileError, meanfield.errors.DataFileError
        ``out`` holds no study record (:func:`load_study`).

    See Also
    --------
    meanfield.studies.synthetic.write_report : the runner's entry point.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.studies.synthetic import check_config, run_study
    >>> from meanfield.studies.synthetic_report import report
    >>> cfg = check_config(dict(learners=["rff"], tasks=["two_moons"], noise=[0.1], m=[8],
    ...                         seeds=[0], n_train=40, n_test=20))
    >>> out = tempfile.mkdtemp()
    >>> run_study(cfg, out, scheduler="threads", n_workers=1, progress=False)
    >>> report(out, tempfile.mkdtemp())[:3]
    ['results.nc', 'table.csv', 'table.md']
    """
    cfg, records = load_study(out)
    dest = Path(report_dir if report_dir is not None else out)
    dest.mkdir(parents=True, exist_ok=True)
    if not records:
        return []
    design = cfg["design"]
    if design == "grid":
        ds = _grid_to_dataset(records, cfg)
        try:
            ds.to_netcdf(dest / "results.nc", engine="h5netcdf")
        except ImportError:  # h5netcdf needs h5py; fall back to scipy's netCDF3 writer
            ds.to_netcdf(dest / "results.nc", engine="scipy")
        _grid_write_tables(ds, dest)
        _grid_write_claims(ds, dest)
        _grid_plot(ds, dest)
    elif design == "variants":
        write_csv(dest / "table.csv", _learner_rows(records, ("task", "m", "seed"), _VARIANTS_CSV))
        _variants_write_table(records, cfg, dest)
        _variants_write_cv_choices(records, cfg, dest)
        _variants_write_claims(records, cfg, dest)
    elif design == "tuned":
        cfg.setdefault("m", sorted({m for m, _ in cfg["settings"]}))
        cfg.setdefault("noise", sorted({n for _, n in cfg["settings"]}))
        for r in records:  # the derived learner, after every other
            r["learners"]["coulomb_learn_or_stay"] = learn_or_stay(r["learners"])
        keys = ("task", "m", "noise", "seed")
        write_csv(dest / "table.csv", _learner_rows(records, keys, _TUNED_CSV))
        _tuned_write_table(records, cfg, dest)
        _tuned_write_cv_choices(records, cfg, dest)
        write_lines(dest / "claims.md", _tuned_claims_lines(records, cfg))
        write_lines(dest / "moved.md", _tuned_moved_lines(records, cfg))
        write_lines(dest / "beta_curve.md", _tuned_beta_lines(records, cfg))
        _tuned_write_figure(records, cfg, dest)
    elif design == "diagnosis":
        records = sorted(records, key=lambda r: (r["task"], r["seed"]))
        keyed = [({"task": r["task"], "seed": r["seed"]}, r) for r in records]
        sets = [k | {"set": s, **v} for k, r in keyed for s, v in r["sets"].items()]
        write_csv(dest / "diagnosis.csv", sets)
        write_csv(dest / "curves.csv", [k | c for k, r in keyed for c in r["curve"]])
        (dest / "summary.md").write_text(_diagnosis_summary(records))
        _diagnosis_figure(records, dest)
    else:
        (dest / "table.md").write_text(_sinha_duchi_table(records, cfg))
    return _REPORTS[design].split()
