"""Issue 10: every Coulomb variant against fixed and importance-sampled features, all CV-tuned.

    python paper_repro/synthetic/run_variants.py --config full     # the study (README)
    python paper_repro/synthetic/run_variants.py --config ci       # seconds, for CI
    python paper_repro/synthetic/run_variants.py --config full --report-only

For every (m, seed, task) cell -- one data split shared by all learners, so every comparison is
paired -- hyper-parameters are chosen by stratified 3-fold cross-validation on the *training*
rows only (``meanfield.learners.select_by_cv``: GridSearchCV on features + ridge), for every
learner:

- fixed RFF: the bandwidth sigma = f * median, f in BANDWIDTH_FACTORS;
- importance sampling (iid resampling of m features from q): sigma (same grid) x budget rho;
- Coulomb particles: the variant (VARIANTS: alignment form, confinement, regime, early
  stopping), starting from the CV-chosen RFF draw (same sigma, same seed) so the comparison with
  fixed RFF stays paired. ``coulomb_cv`` is the variant CV picked; every variant is also fitted
  and scored on the test set for the variant table.

Each finished cell is appended to ``<out>/runs.jsonl`` and flushed at once (resumable: a rerun
skips finished cells; ``--fresh`` starts over; a changed configuration is refused; a line cut
off by an interruption is set aside into ``runs.jsonl.bad`` with a warning and its cell rerun).
Records hold the parameters, seeds, CV scores, package version, wall time and machine. The report
(``report_variants.py``) writes the tables and ``claims.md`` with paired 95 % intervals.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from jsonl_runs import StudyInputError, open_runs  # noqa: E402

from meanfield._scripts import existing_dir, output_dir  # noqa: E402
from meanfield.studies.synthetic_kernels import TASKS  # noqa: E402  (the first study's tasks)

#: Settings shared by every Coulomb variant (the first study's, chosen there on dev seeds).
BASE = dict(lam=0.3, s=1.0, softening=0.1, beta=1e3, eta=1.0, n_steps=300, data_batch=250)

#: The variants of issue 10 (each a CoulombFeatures option set on top of BASE). Step sizes:
#: eta = 1 for every form (eta = 10 was worse for risk/normalised/centred on the radial and
#: mixture tasks, dev seed 100, m = 64); the prior confinement at beta = 1 needs eta << beta_N
#: (OU relaxation time beta_N): eta = 0.05, 300 steps = 15 relaxation times.
VARIANTS = {
    "linear": {},
    "risk": {"alignment": "risk"},
    "normalised": {"alignment": "normalised"},
    "centred": {"alignment": "centred"},
    "linear_es": {"early_stopping": True},
    "centred_es": {"alignment": "centred", "early_stopping": True},
    "prior_b1": {"confinement": "prior", "beta": 1.0, "eta": 0.05},
    "prior_b100": {"confinement": "prior", "beta": 100.0},
    "coulomb_gas": {"regime": "coulomb-gas", "beta": 10.0},
}

BANDWIDTH_FACTORS = [0.25, 0.5, 1.0, 2.0]
RHO_FRACTIONS = [0.0, 1e-3, 1e-2, 0.05]

CONFIGS = {
    "full": dict(
        tasks=list(TASKS),
        noise=0.1,
        m=[64, 256],
        seeds=list(range(10)),
        n_train=1000,
        n_test=2000,
        cv=3,
        base=BASE,
        variants=VARIANTS,
        bandwidth_factors=BANDWIDTH_FACTORS,
        rho_fractions=RHO_FRACTIONS,
    ),
    "ci": dict(
        tasks=["two_moons"],
        noise=0.1,
        m=[8],
        seeds=[0, 1],
        n_train=120,
        n_test=100,
        cv=2,
        base={**BASE, "n_steps": 20, "data_batch": None},
        variants={k: VARIANTS[k] for k in ("linear", "centred_es", "prior_b1")},
        bandwidth_factors=[0.5, 1.0],
        rho_fractions=[0.0, 1e-2],
    ),
}


def machine() -> dict:
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }


def run_cell(cfg: dict, task: str, seed: int, m: int) -> dict:
    """Every learner on one split: CV on the training rows, then one fit and the test scores."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
    import meanfield
    from meanfield.learners import (
        CoulombFeatures,
        ImportanceSampledFeatures,
        RandomFourierFeatures,
        evaluate,
        median_bandwidth,
        select_by_cv,
    )
    from meanfield.synthetic import make_task

    t_cell = time.perf_counter()
    split = make_task(
        task, cfg["n_train"], cfg["n_test"], noise=cfg["noise"], seed=seed, **TASKS[task]
    )
    X, y = split[0], split[1]
    ls = 10_000 + seed  # learner seed, shared: Coulomb starts from the RFF draw
    cv = dict(cv=cfg["cv"], random_state=seed)
    med = median_bandwidth(X, rng=ls)
    bws = [float(f * med) for f in cfg["bandwidth_factors"]]
    out = {"task": task, "seed": seed, "m": m, "median_bandwidth": med, "learners": {}}

    def score(name, learner, cv_res=None, extra=None):
        t0 = time.perf_counter()
        res = evaluate(learner, *split, classifiers=("ridge",))
        res["wall_s"] = time.perf_counter() - t0
        for attr in ("alignment_init_", "alignment_", "min_distance_", "best_step_"):
            if hasattr(learner, attr):
                res[attr.rstrip("_")] = float(getattr(learner, attr))
        res["params"] = {k: v for k, v in learner.get_params().items() if _jsonable(v)}
        if cv_res is not None:
            res["cv_score"] = cv_res
        out["learners"][name] = {**res, **(extra or {})}

    score("rff_median", RandomFourierFeatures(m, bandwidth=med, random_state=ls))
    rcv = select_by_cv(RandomFourierFeatures(m, random_state=ls), {"bandwidth": bws}, X, y, **cv)
    bw = rcv["best_params"]["bandwidth"]
    score(
        "rff",
        RandomFourierFeatures(m, bandwidth=bw, random_state=ls),
        rcv["best_score"],
        {"bandwidth_factor": bw / med},
    )
    icv = select_by_cv(
        ImportanceSampledFeatures(m, rho=None, random_state=ls),
        {"bandwidth": bws, "rho_fraction": cfg["rho_fractions"]},
        X,
        y,
        **cv,
    )
    score(
        "importance",
        ImportanceSampledFeatures(m, rho=None, random_state=ls, **icv["best_params"]),
        icv["best_score"],
        {"bandwidth_factor": icv["best_params"]["bandwidth"] / med},
    )
    proto = CoulombFeatures(m, bandwidth=bw, random_state=ls, **cfg["base"])
    grid = [
        {k: [v] for k, v in var.items()} or {"lam": [cfg["base"]["lam"]]}
        for var in cfg["variants"].values()
    ]
    ccv = select_by_cv(proto, grid, X, y, **cv)
    names = list(cfg["variants"])
    cv_scores = dict(zip(names, map(float, ccv["mean_test_score"]), strict=True))
    best = names[int(np.argmax(ccv["mean_test_score"]))]  # first best, in VARIANTS order
    for name, var in cfg["variants"].items():
        learner = CoulombFeatures(m, bandwidth=bw, random_state=ls, **{**cfg["base"], **var})
        score(f"coulomb_{name}", learner, cv_scores[name])
    out["learners"]["coulomb_cv"] = {**out["learners"][f"coulomb_{best}"], "variant": best}
    out["wall_s"] = time.perf_counter() - t_cell
    out["meanfield_version"] = meanfield.__version__
    out["machine"] = machine()
    out["noise"] = cfg["noise"]
    return out


def _jsonable(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def run(config: str, out: Path, fresh: bool = False) -> list[dict]:
    cfg = CONFIGS[config]
    runs, done = open_runs(out, cfg, fresh, lambda r: (r["task"], r["seed"], r["m"]))
    # m = 64 first (fast), then seeds outermost: a partial run has every task for its seeds
    cells = [
        (t, s, m)
        for m in sorted(cfg["m"])
        for s in cfg["seeds"]
        for t in cfg["tasks"]
        if (t, s, m) not in done
    ]
    print(f"{len(done)} cells on disk, {len(cells)} to go", flush=True)
    t0 = time.perf_counter()
    with open(runs, "a") as fh:
        for i, c in enumerate(cells):
            rec = run_cell(cfg, *c)
            done[c] = rec
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            chose = rec["learners"]["coulomb_cv"]["variant"]
            total = time.perf_counter() - t0
            print(
                f"  {i + 1}/{len(cells)} {c}: {rec['wall_s']:.0f} s (total {total:.0f} s), "
                f"CV chose {chose}",
                flush=True,
            )
    return list(done.values())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=list(CONFIGS), default="full")
    ap.add_argument(
        "--out",
        type=output_dir,
        default=None,
        metavar="FOLDER",
        help="output folder, created if missing (default: results/variants_<config> here)",
    )
    ap.add_argument("--fresh", action="store_true", help="discard runs on disk and start over")
    ap.add_argument(
        "--report-only", action="store_true", help="tables and claims from the runs on disk"
    )
    a = ap.parse_args(argv)  # bad flags end here (exit 2), before any work
    out = a.out or HERE / "results" / f"variants_{a.config}"
    if a.report_only:
        if a.fresh:
            ap.error("argument --fresh: not allowed with --report-only (it would discard the runs)")
        try:
            existing_dir(str(out))
        except argparse.ArgumentTypeError as err:
            ap.error(f"argument --out: --report-only reads the runs there: {err}")
        if not (out / "runs.jsonl").is_file():
            ap.error(f"argument --out: --report-only: no runs.jsonl in {str(out)!r}")
    else:
        try:
            run(a.config, out, fresh=a.fresh)
        except StudyInputError as err:
            ap.error(str(err))
    from report_variants import report

    report(out, CONFIGS[a.config])


if __name__ == "__main__":
    main()
