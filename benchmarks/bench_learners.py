"""Kernel-training time of each learner against the number of features m and of samples n.

    python benchmarks/bench_learners.py  # m = 16..256 at n = 1000; n = 250..4000 at m = 64
    python benchmarks/bench_learners.py --quick    # a few seconds
    python benchmarks/bench_learners.py --out FOLDER  # the table into FOLDER/bench_learners.md
    python benchmarks/bench_learners.py --fit-cost --out FOLDER   # FOLDER/bench_fit_cost.md
        # issue 10: CoulombFeatures.fit at m = 256, n = 10^4, d = 10, every variant of
        # paper_repro/synthetic/run_variants.py: wall time and peak memory, one process each
    python benchmarks/bench_learners.py --vs-sklearn [--full-batch]  # FOLDER/bench_vs_sklearn.md
        # issue 22: CoulombFeatures.fit at its defaults against scikit-learn's RBFSampler and
        # Nystroem (fit + transform) at m = 256, n = 10^4, d = 10, as ratios (also the last
        # table of the default run; --full-batch adds the data_batch=None fit, ~10 s each)

The markdown table is printed and written into ``--out`` (by default a folder outside the
repository; the committed tables are refreshed with ``--out paper_repro/synthetic/results``).

Times are wall-clock seconds of ``fit`` (``fit_time_``: drawing, scoring and the Langevin
dynamics; input validation excluded), median of ``--repeats`` runs, one torch thread, on the
radial task (d = 10), after one warm-up fit per learner. The Coulomb learners use the study's
settings (300 steps, data mini-batches of 250 rows, so their cost flattens once n > 250).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out, progress, say


def bench(learners, ms, ns, repeats, coulomb, show=False):
    from meanfield.learners import make_learner
    from meanfield.learners.tasks import radial

    warm = radial(100, 10, d=10, seed=0)
    for name in learners:  # first calls pay one-time imports and allocations
        make_learner(name, 8, 0, coulomb).fit(warm.X_train, warm.y_train)
    rows = []
    sizes = [(1000, m) for m in ms] + [(n, 64) for n in ns if n != 1000 or 64 not in ms]
    for n, m in progress(sizes, enabled=show, desc="(n, m)"):
        split = radial(n, 10, d=10, seed=0)
        for name in learners:
            ts = []
            for r in range(repeats):
                est = make_learner(name, m, r, coulomb)
                est.fit(split.X_train, split.y_train)
                ts.append(est.fit_time_)
            rows.append((name, n, m, float(np.median(ts))))
            say(f"{name:11s} n={n:5d} m={m:4d}  {rows[-1][3]:.4f} s")
    return rows


def to_markdown(rows, ms, ns, learners):
    from meanfield.studies.synthetic import LEARNER_LABELS

    t = {(a, n, m): s for a, n, m, s in rows}
    out = ["Kernel-training time (s) against m, at n = 1000", ""]
    out += [
        "| learner | " + " | ".join(f"m = {m}" for m in ms) + " |",
        "|" + "---|" * (len(ms) + 1),
    ]
    for a in learners:
        out.append(
            f"| {LEARNER_LABELS[a]} | " + " | ".join(f"{t[(a, 1000, m)]:.3g}" for m in ms) + " |"
        )
    out += ["", "Kernel-training time (s) against n, at m = 64", ""]
    out += [
        "| learner | " + " | ".join(f"n = {n}" for n in ns) + " |",
        "|" + "---|" * (len(ns) + 1),
    ]
    for a in learners:
        out.append(
            f"| {LEARNER_LABELS[a]} | " + " | ".join(f"{t[(a, n, 64)]:.3g}" for n in ns) + " |"
        )
    return "\n".join(out) + "\n"


def vs_sklearn(m=256, n=10_000, d=10, repeats=5, full_batch=False):
    """Wall time of ``CoulombFeatures(m).fit`` (its defaults) against scikit-learn's RBFSampler
    and Nystroem ``fit`` + ``transform`` of the same m features (the same Gaussian kernel,
    σ = 1, γ = 1/2) on n radial points: (markdown, {case: median seconds}).

    The cases run interleaved, ``repeats`` rounds after one warm-up each, so a change of load
    on a shared machine hits them alike; the ratios are of the medians.
    """
    from sklearn.kernel_approximation import Nystroem, RBFSampler

    from meanfield.learners import CoulombFeatures
    from meanfield.learners.tasks import radial

    X, y = radial(n, 10, d=d, seed=0)[:2]
    cases = {"CoulombFeatures.fit (defaults)": lambda r: CoulombFeatures(m, random_state=r)}
    if full_batch:
        cases["CoulombFeatures.fit (data_batch=None)"] = lambda r: CoulombFeatures(
            m, data_batch=None, random_state=r
        )
    sk = {
        "RBFSampler fit + transform": lambda r: RBFSampler(
            gamma=0.5, n_components=m, random_state=r
        ),
        "Nystroem fit + transform": lambda r: Nystroem(gamma=0.5, n_components=m, random_state=r),
    }

    def run(name, r, rows=slice(None)):
        t0 = time.perf_counter()
        if name in sk:
            sk[name](r).fit(X[rows]).transform(X[rows])
        else:
            cases[name](r).fit(X[rows], y[rows])
        return time.perf_counter() - t0

    names = list(cases) + list(sk)
    for name in names:  # warm-up on a tenth of the rows
        run(name, 0, slice(n // 10))
    times = {name: [] for name in names}
    for r in range(repeats):
        for name in names:
            times[name].append(run(name, r))
    med = {name: float(np.median(ts)) for name, ts in times.items()}
    rbf, nys = med["RBFSampler fit + transform"], med["Nystroem fit + transform"]
    out = [
        f"Feature training against scikit-learn at m = {m}, n = {n}, d = {d} (radial task),",
        f"one torch/BLAS thread, wall time, median of {repeats} interleaved repeats",
        "",
        "| method | time (s) | / RBFSampler | / Nystroem |",
        "|---|---|---|---|",
    ]
    out += [f"| {k} | {v:.3g} | {v / rbf:.3g} | {v / nys:.3g} |" for k, v in med.items()]
    return "\n".join(out) + "\n", med


def _rss_kib(field: str) -> int:
    """A memory field of /proc/self/status (VmRSS, VmHWM) in KiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _fit_cost_one(args):
    """Child process: one CoulombFeatures.fit; peak RSS above the pre-fit RSS (VmHWM reset)."""
    variant, m, n, d, seed = args
    import torch
    from threadpoolctl import threadpool_limits

    from meanfield.learners import CoulombFeatures
    from meanfield.learners.tasks import radial
    from meanfield.studies.synthetic import COULOMB as BASE
    from meanfield.studies.synthetic import VARIANTS

    torch.set_num_threads(1)
    threadpool_limits(1)
    sp = radial(n, 10, d=d, seed=seed)
    est = CoulombFeatures(m, bandwidth="median", random_state=seed, **{**BASE, **VARIANTS[variant]})
    CoulombFeatures(8, n_steps=2).fit(sp.X_train[:100], sp.y_train[:100])  # warm-up
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    base = _rss_kib("VmRSS")
    t0 = time.perf_counter()
    est.fit(sp.X_train, sp.y_train)
    wall = time.perf_counter() - t0
    return variant, wall, float(est.fit_time_), (_rss_kib("VmHWM") - base) / 1024


def fit_cost(m=256, n=10_000, d=10, seed=0, show=False):
    """Every variant's fit in a fresh process: (variant, wall s, fit_time_ s, peak MiB)."""
    import multiprocessing as mp

    from meanfield.studies.synthetic import VARIANTS

    rows = []
    ctx = mp.get_context("spawn")
    for v in progress(list(VARIANTS), enabled=show, desc="variants"):
        with ctx.Pool(1) as pool:
            rows.append(pool.map(_fit_cost_one, [(v, m, n, d, seed)])[0])
        say(f"{v:12s} wall {rows[-1][1]:.2f} s  peak +{rows[-1][3]:.0f} MiB")
    head = [
        f"CoulombFeatures.fit at m = {m}, n = {n}, d = {d} (radial task), one torch/BLAS thread,",
        "each variant in a fresh process; peak memory is the rise of the resident set (VmHWM,",
        "reset before the fit) above the resident set before it.",
        "",
        "| variant | wall time (s) | fit_time_ (s) | peak memory above baseline (MiB) |",
        "|---|---|---|---|",
    ]
    return (
        "\n".join(head + [f"| {v} | {w:.2f} | {f:.2f} | {p:.0f} |" for v, w, f, p in rows]) + "\n"
    )


#: The flags, declared once: their checks, help and docs come from these Params.
FLAGS = Contract(
    "benchmarks/bench_learners.py",
    [
        Param("quick", "flag", "m = 16, 64; n = 250, 1000; one repeat", default=False),
        Param("repeats", "int", "fits per learner and size", low=1, default=3),
        Param("fit_cost", "flag", "only the fit cost at m = 256, n = 1e4", default=False),
        Param("vs_sklearn", "flag", "only the ratios to scikit-learn", default=False),
        Param("full_batch", "flag", "with --vs-sklearn: add data_batch=None", default=False),
        Param("progress", "flag", "show the progress bar", default=True),
    ],
)


def main(argv=None):
    from meanfield.studies.synthetic import COULOMB

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    FLAGS.add_arguments(ap)
    add_bench_out(
        ap,
        "bench_learners.md, or bench_fit_cost.md with --fit-cost, bench_vs_sklearn.md with "
        "--vs-sklearn",
    )
    args = FLAGS.parse_args(ap, argv)  # bad flags end here (exit 2), before torch loads
    show = args.progress
    args.out.mkdir(parents=True, exist_ok=True)
    if args.fit_cost:
        md = fit_cost(show=show)
        print(md)
        (args.out / "bench_fit_cost.md").write_text(md)
        print(f"wrote {args.out / 'bench_fit_cost.md'}")
        return 0
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
    if args.vs_sklearn:
        md = vs_sklearn(repeats=args.repeats, full_batch=args.full_batch)[0]
        print(md)
        (args.out / "bench_vs_sklearn.md").write_text(md)
        print(f"wrote {args.out / 'bench_vs_sklearn.md'}")
        return 0
    learners = ["rff", "importance", "coulomb", "langevin"]
    if args.quick:
        ms, ns, repeats, coulomb = [16, 64], [250, 1000], 1, {**COULOMB, "n_steps": 30}
    else:
        ms, ns, repeats, coulomb = (
            [16, 32, 64, 128, 256],
            [250, 500, 1000, 2000, 4000],
            args.repeats,
            COULOMB,
        )
    t0 = time.perf_counter()
    rows = bench(learners, ms, ns, repeats, coulomb, show=show)
    md = to_markdown(rows, ms, ns, learners)
    md += "\n" + (vs_sklearn(64, 2000, repeats=1) if args.quick else vs_sklearn(repeats=repeats))[0]
    print(md)
    print(f"total {time.perf_counter() - t0:.1f} s")
    (args.out / "bench_learners.md").write_text(md)
    print(f"wrote {args.out / 'bench_learners.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
