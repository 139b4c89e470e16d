"""Kernel-training time of each learner against the number of features m and of samples n.

    python benchmarks/bench_learners.py  # m = 16..256 at n = 1000; n = 250..4000 at m = 64
    python benchmarks/bench_learners.py --quick    # a few seconds
    python benchmarks/bench_learners.py --out bench.md  # also write the markdown table

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
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "paper_repro" / "synthetic"))


def bench(learners, ms, ns, repeats, coulomb):
    from run_study import make_learner

    from meanfield.synthetic import radial

    warm = radial(100, 10, d=10, seed=0)
    for name in learners:  # first calls pay one-time imports and allocations
        make_learner(name, 8, 0, coulomb).fit(warm.X_train, warm.y_train)
    rows = []
    for n, m in [(1000, m) for m in ms] + [(n, 64) for n in ns if n != 1000 or 64 not in ms]:
        split = radial(n, 10, d=10, seed=0)
        for name in learners:
            ts = []
            for r in range(repeats):
                est = make_learner(name, m, r, coulomb)
                est.fit(split.X_train, split.y_train)
                ts.append(est.fit_time_)
            rows.append((name, n, m, float(np.median(ts))))
            print(f"{name:11s} n={n:5d} m={m:4d}  {rows[-1][3]:.4f} s", flush=True)
    return rows


def to_markdown(rows, ms, ns, learners):
    from run_study import LEARNER_LABELS

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


def main(argv=None):
    from run_study import COULOMB

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
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
    rows = bench(learners, ms, ns, repeats, coulomb)
    md = to_markdown(rows, ms, ns, learners)
    print(md)
    print(f"total {time.perf_counter() - t0:.1f} s")
    if args.out:
        args.out.write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
