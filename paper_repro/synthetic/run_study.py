"""The synthetic kernel-learning study: learner x task x noise x m x seed.

One command regenerates everything in the output folder (default: next to this file):

    python paper_repro/synthetic/run_study.py --config full      # the study (see README)
    python paper_repro/synthetic/run_study.py --config ci        # seconds, for CI
    python paper_repro/synthetic/run_study.py --config full --workers 2

Each finished (task, noise, seed, m) cell -- every learner on the same data split, so the
comparisons are paired -- is appended as JSON lines to ``<out>/runs.jsonl`` and flushed, so an
interrupted run resumes where it stopped (``--fresh`` starts over). A line cut off by an
interruption (or otherwise unreadable) is set aside into ``runs.jsonl.bad`` with a warning, the
good lines are kept, and the lost run is recomputed. At the end the runs are
gathered into ``results.nc`` (an ``xarray.Dataset`` with dims learner, task, noise, m, seed),
``table.csv`` / ``table.md`` (mean +- standard error over seeds), ``claims.md`` (the paper's
claims checked with paired differences) and the figures ``error_vs_m.png`` and
``error_vs_noise.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from meanfield._scripts import int_range, output_dir

HERE = Path(__file__).resolve().parent

# ----------------------------------------------------------------------------- configuration

#: Coulomb-particle hyper-parameters (standardised units, see CoulombFeatures). Chosen on
#: development seeds 100-101 (never the study seeds 0-9) at noise 0.1, m = 64 (and 256) over
#: eta in {1, 5, 20}, lam in {0, 0.01, 0.03, 0.1, 0.3, 1}, s in {0, 1}; data mini-batches of
#: 250 rows (of 1000) halve the cost and changed the dev errors by < 0.01. See the README.
COULOMB = dict(eta=1.0, lam=0.3, s=1.0, softening=0.1, beta=1e3, n_steps=300, data_batch=250)

#: Importance sampling: chi-square budget rho (D_chi2(q || uniform) <= rho). Chosen on the same
#: development seeds over rho = rho_fraction * (N_w - 1), rho_fraction in {0, 1e-3, 1e-2, 0.05,
#: 0.2, 0.5}: small budgets win (0.5 was at chance on the checkerboard); rho = 1 is fixed in m.
IMPORTANCE = dict(rho=1.0)

TASKS = {
    "radial": dict(d=10),
    "gaussian_mixture": dict(d=5),
    "checkerboard": dict(n_cells=4, d=2),
    "two_moons": dict(jitter=0.3, d=2),
}

CONFIGS = {
    "full": dict(
        learners=["rff", "importance", "coulomb", "langevin"],
        tasks=list(TASKS),
        noise=[0.0, 0.1, 0.2],
        m=[16, 32, 64, 128, 256],
        seeds=list(range(10)),
        n_train=1000,
        n_test=2000,
        coulomb=COULOMB,
        importance=IMPORTANCE,
    ),
    "ci": dict(
        learners=["rff", "importance", "coulomb", "langevin"],
        tasks=["checkerboard", "two_moons"],
        noise=[0.1],
        m=[16, 32],
        seeds=[0, 1],
        n_train=200,
        n_test=200,
        coulomb={**COULOMB, "n_steps": 30},
        importance=IMPORTANCE,
    ),
}

LEARNER_LABELS = {
    "rff": "fixed RFF",
    "importance": "importance sampling",
    "coulomb": "Coulomb particles",
    "langevin": "Langevin, lambda=0",
}


def make_learner(name: str, m: int, seed: int, coulomb: dict, importance: dict | None = None):
    from meanfield.learners import CoulombFeatures, ImportanceSampledFeatures, RandomFourierFeatures

    common = dict(bandwidth="median", random_state=seed)
    if name == "rff":
        return RandomFourierFeatures(m, **common)
    if name == "importance":
        return ImportanceSampledFeatures(m, **common, **(importance or IMPORTANCE))
    if name == "coulomb":
        return CoulombFeatures(m, **common, **coulomb)
    if name == "langevin":
        return CoulombFeatures(m, **common, **{**coulomb, "lam": 0.0})
    raise ValueError(f"unknown learner {name!r}; choose one of {', '.join(LEARNER_LABELS)}")


def run_cell(cfg: dict, task: str, noise: float, seed: int, m: int, learners=None) -> list[dict]:
    """Learners (default all) on one (task, noise, seed) split with m features: one record each."""
    import torch
    from threadpoolctl import threadpool_limits

    # One run per core; the matrices are small. Without the BLAS limit, numpy's SVD in the
    # ridge fit slows down ~50x on a loaded machine (threads contending for 2 cores).
    torch.set_num_threads(1)
    threadpool_limits(1)
    from meanfield.learners import evaluate
    from meanfield.synthetic import make_task

    split = make_task(task, cfg["n_train"], cfg["n_test"], noise=noise, seed=seed, **TASKS[task])
    out = []
    for name in learners or cfg["learners"]:
        # the learner seed differs from the data seed but is shared by all learners, so the
        # Coulomb particles start from exactly the fixed-RFF draw
        learner = make_learner(name, m, 10_000 + seed, cfg["coulomb"], cfg.get("importance"))
        res = evaluate(learner, *split)
        rec = {"learner": name, "task": task, "noise": noise, "seed": seed, "m": m, **res}
        for attr in ("alignment_init_", "alignment_", "min_distance_init_", "min_distance_"):
            if hasattr(learner, attr):
                rec[attr.rstrip("_")] = float(getattr(learner, attr))
        out.append(rec)
    return out


def _key(rec) -> tuple:
    return (rec["learner"], rec["task"], float(rec["noise"]), int(rec["seed"]), int(rec["m"]))


class StudyInputError(ValueError):
    """The output folder holds something the study refuses (e.g. runs of another
    configuration): the command line ends with one line and exit status 2."""


def _warn(message: str) -> None:
    print(f"{Path(sys.argv[0]).name or 'run_study.py'}: warning: {message}", file=sys.stderr)


def read_runs(runs: Path, repair: bool = False) -> list[dict]:
    """The records of the checkpoint file ``runs`` (one JSON object a line; [] if absent).

    A line that is not a JSON object -- the last one cut off mid-write by an interruption, or
    a damaged one -- is reported on stderr and left out, never silently.  With ``repair``
    such lines are moved to ``runs.jsonl.bad`` (appended, with their line numbers) and
    ``runs`` is rewritten with the good lines only, each ending in a newline, so that the
    next appended record starts on a line of its own; the lost runs are then recomputed by
    the caller (their keys are missing).
    """
    if not runs.exists():
        return []
    text = runs.read_text(encoding="utf-8", errors="replace")
    good, bad = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            rec = None
        if isinstance(rec, dict):
            good.append((line, rec))
        else:
            bad.append((number, line))
    for number, line in bad:
        cut = number == len(text.splitlines()) and not text.endswith("\n")
        why = "cut off (an interrupted write?)" if cut else "not a JSON record"
        shown = line if len(line) <= 60 else line[:57] + "..."
        _warn(
            f"{runs} line {number} is {why}: {shown!r}; "
            + (f"set aside in {runs.name}.bad, its run will be recomputed" if repair else "skipped")
        )
    if repair and (bad or (text and not text.endswith("\n"))):
        if bad:
            with open(runs.with_name(runs.name + ".bad"), "a", encoding="utf-8") as fh:
                for number, line in bad:
                    fh.write(f"{number}\t{line}\n")
        tmp = runs.with_name(runs.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line, _ in good), encoding="utf-8")
        os.replace(tmp, runs)
    return [rec for _, rec in good]


def open_runs(out: Path, cfg: dict, fresh: bool, key) -> tuple[Path, dict]:
    """The checkpoint file ``out/runs.jsonl`` and its records keyed by ``key(record)``.

    ``fresh`` deletes it first; runs of another configuration (``out/config.json``) are refused
    rather than mixed. Writes the configuration. Unreadable lines (a last line cut off by an
    interruption) are set aside with a warning (:func:`read_runs`), so their runs are redone.
    """
    out.mkdir(parents=True, exist_ok=True)
    runs, cfg_file = out / "runs.jsonl", out / "config.json"
    if fresh:
        runs.unlink(missing_ok=True)
    plain = json.loads(json.dumps(cfg))  # tuples -> lists, as read back from disk
    if runs.exists() and cfg_file.exists():
        try:
            stored = json.loads(cfg_file.read_text())
        except json.JSONDecodeError:
            stored = None  # cut off by an interruption: rewritten below
            _warn(f"{cfg_file} is unreadable (an interrupted write?); it is written anew")
        if stored is not None and stored != plain:
            raise StudyInputError(
                f"{runs} holds runs of another configuration; pass --fresh to start over "
                "or choose another --out"
            )
    cfg_file.write_text(json.dumps(cfg, indent=1))
    done = {}
    for rec in read_runs(runs, repair=True):
        try:
            done[key(rec)] = rec
        except (KeyError, TypeError, ValueError):
            _warn(f"{runs}: a record without its keys is skipped: {str(rec)[:60]!r}")
    return runs, done


def run(config: str, out: Path, workers: int = 1, fresh: bool = False, progress: bool = True):
    """Run (or resume) a configuration; returns the list of records."""
    cfg = CONFIGS[config]
    runs, done = open_runs(out, cfg, fresh, _key)
    cells = []
    for m in sorted(cfg["m"], reverse=True):  # slowest first: better load balance
        for t in cfg["tasks"]:
            for nz in cfg["noise"]:
                for s in cfg["seeds"]:
                    todo = [ln for ln in cfg["learners"] if (ln, t, float(nz), s, m) not in done]
                    if todo:
                        cells.append((t, nz, s, m, todo))
    t0 = time.perf_counter()
    n_cells = len(cells)
    if progress:
        print(f"{len(done)} runs on disk, {n_cells} cells to go", flush=True)
    with open(runs, "a") as fh:

        def save(recs):
            for rec in recs:
                done[_key(rec)] = rec
                fh.write(json.dumps(rec) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

        if workers <= 1:
            for i, c in enumerate(cells):
                save(run_cell(cfg, *c))
                if progress and (i + 1) % 10 == 0:
                    print(
                        f"  {i + 1}/{n_cells} cells, {time.perf_counter() - t0:.0f} s", flush=True
                    )
        else:
            with ProcessPoolExecutor(workers) as pool:
                futs = [pool.submit(run_cell, cfg, *c) for c in cells]
                for i, f in enumerate(as_completed(futs)):
                    save(f.result())
                    if progress and (i + 1) % 10 == 0:
                        print(
                            f"  {i + 1}/{n_cells} cells, {time.perf_counter() - t0:.0f} s",
                            flush=True,
                        )
    wall = time.perf_counter() - t0
    (out / "wall_time.json").write_text(
        json.dumps({"config": config, "cells_run_now": n_cells, "wall_s": wall, "workers": workers})
    )
    return [
        done[k]
        for k in sorted(done)
        if k[1] in cfg["tasks"]
        and k[2] in cfg["noise"]
        and k[4] in cfg["m"]
        and k[3] in cfg["seeds"]
    ]


# ----------------------------------------------------------------------------- aggregation

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
    """Records -> xarray.Dataset with dims (learner, task, noise, m, seed); NaN where absent."""
    import xarray as xr

    import meanfield

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
            "meanfield_version": meanfield.__version__,
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
    """table.csv (long form) and table.md (test error, ridge, mean +- SE over seeds)."""
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
    """The paper's three claims, checked with paired differences over seeds."""
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


def report(records, config: str, out: Path, figures: bool = True):
    cfg = CONFIGS[config]
    ds = to_dataset(records, cfg)
    try:
        ds.to_netcdf(out / "results.nc", engine="h5netcdf")
    except ImportError:  # h5netcdf needs h5py; fall back to scipy's netCDF3 writer
        ds.to_netcdf(out / "results.nc", engine="scipy")
    write_tables(ds, out)
    write_claims(ds, out)
    if figures:
        plot(ds, out)
    return ds


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", choices=sorted(CONFIGS), default="full")
    ap.add_argument(
        "--out",
        type=output_dir,
        default=None,
        metavar="FOLDER",
        help="output folder, created if missing (default: results/<config> next to this file)",
    )
    ap.add_argument(
        "--workers", type=int_range(1), default=1, help="processes >= 1 (one run per core)"
    )
    ap.add_argument("--fresh", action="store_true", help="discard runs on disk and start over")
    ap.add_argument("--no-figures", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)  # bad flags end here (exit 2), before any work
    out = args.out or HERE / "results" / args.config
    t0 = time.perf_counter()
    try:
        records = run(
            args.config, out, workers=args.workers, fresh=args.fresh, progress=not args.quiet
        )
    except StudyInputError as err:
        ap.error(str(err))
    report(records, args.config, out, figures=not args.no_figures)
    if not args.quiet:
        print(f"done in {time.perf_counter() - t0:.1f} s; results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
