"""Issue 10, part 1: why the original Coulomb configuration loses on the radial and mixture tasks.

    python paper_repro/synthetic/diagnose.py            # ~3 min on one core

For each task (radial, Gaussian mixture, and the checkerboard as the control where learning
helps), one split (seed 0, noise 0.1, n_train = 1000, n_test = 2000) and m = 256 particles, the
first study's configuration (linear alignment, lambda = 0.3, beta = 1e3, 300 steps) is rerun with
30 checkpoints, next to the centred alignment and the prior-confined variant (same draw). At
every checkpoint: the Cristianini alignment (uncentred and centred) on train and test data, and
the test error of the ridge classifier (alpha by exact LOO, as in the study). For the final
particles against the prior: the distribution of the standardised frequency norm sigma*|w|, the
"constancy" c_i = (mean_j phi_i(x_j))^2 / mean_j phi_i(x_j)^2 of each feature on the training
inputs (1 for a feature constant on the data), and the direction-averaged shift-invariant
kernel profile k(r) = (1/m) sum_i E_u cos(|w_i| r u_1), u uniform on the sphere
(= Gamma(d/2) (2/a)^(d/2-1) J_(d/2-1)(a), a = |w_i| r).

Writes ``results/diagnosis/diagnosis.png`` (``--out`` names another folder), ``diagnosis.csv``
(the curves), ``summary.md`` (the numbers quoted in the README) and ``run.json`` (parameters,
seed, version, time, machine).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_variants import BASE, VARIANTS, machine  # noqa: E402

from meanfield.studies.synthetic_kernels import TASKS  # noqa: E402
from meanfield.workbench._scripts import output_dir  # noqa: E402

RUNS = {"linear": VARIANTS["linear"], "centred": VARIANTS["centred"]}
SHOW = ["radial", "gaussian_mixture", "checkerboard"]
M, SEED, NOISE, N_TRAIN, N_TEST, N_CK = 256, 0, 0.1, 1000, 2000, 30


def radial_profile(omega, sigma, d, r):
    """Direction-averaged k(r) of (1/m) sum_i cos(w_i . delta), |delta| = r (units of sigma)."""
    from scipy.special import gamma, jv

    a = np.linalg.norm(omega[:, :d], axis=1)[None, :] * sigma * r[:, None]
    nu = d / 2 - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        val = gamma(d / 2) * (2 / a) ** nu * jv(nu, a)
    val = np.where(a < 1e-8, 1.0, val)
    return val.mean(1)


def constancy(Phi):
    """c_i = mean(phi_i)^2 / mean(phi_i^2) per column of Phi (n, m)."""
    return Phi.mean(0) ** 2 / np.maximum((Phi**2).mean(0), 1e-300)


def along_the_run(est, split):
    from meanfield.learners import RidgeFeatureClassifier, fourier_features, kernel_alignment

    Xtr, ytr, Xte, yte = split[:4]
    rows = []
    alphas = len(Xtr) * np.logspace(-7, 0, 15)
    for step, om in zip(est.checkpoint_steps_, est.checkpoints_, strict=True):
        Ftr, Fte = fourier_features(Xtr, om), fourier_features(Xte, om)
        clf = RidgeFeatureClassifier(alpha=alphas).fit(Ftr, ytr)
        rows.append(
            {
                "step": int(step),
                "align_train": kernel_alignment(Ftr, ytr),
                "align_test": kernel_alignment(Fte, yte),
                "calign_train": kernel_alignment(Ftr, ytr, centred=True),
                "calign_test": kernel_alignment(Fte, yte, centred=True),
                "test_error": float(np.mean(clf.predict(Fte) != yte)),
                "mean_constancy": float(constancy(Ftr * np.sqrt(om.shape[0])).mean()),
            }
        )
    return rows


def main(out: Path = HERE / "results" / "diagnosis"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch
    from scipy.stats import chi
    from threadpoolctl import threadpool_limits

    import meanfield
    from meanfield.learners import CoulombFeatures, fourier_features, median_bandwidth
    from meanfield.learners.tasks import make_task

    torch.set_num_threads(1)
    threadpool_limits(1)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    curves, summary, fitted = [], [], {}
    for task in SHOW:
        split = make_task(task, N_TRAIN, N_TEST, noise=NOISE, seed=SEED, **TASKS[task])
        ls = 10_000 + SEED
        sigma = median_bandwidth(split[0], rng=ls)
        for name, var in RUNS.items():
            est = CoulombFeatures(
                M, bandwidth=sigma, random_state=ls, n_checkpoints=N_CK, **{**BASE, **var}
            ).fit(split[0], split[1])
            fitted[task, name] = (est, split, sigma)
            rows = along_the_run(est, split)
            for r in rows:
                curves.append({"task": task, "variant": name, **r})
            d = split[0].shape[1]
            c0 = constancy(fourier_features(split[0], est.omega_init_, np.ones(M)))
            c1 = constancy(fourier_features(split[0], est.omega_, np.ones(M)))
            wn0 = np.linalg.norm(est.omega_init_[:, :d], axis=1) * sigma
            wn1 = np.linalg.norm(est.omega_[:, :d], axis=1) * sigma
            errs = [r["test_error"] for r in rows]
            summary.append(
                {
                    "task": task,
                    "variant": name,
                    "d": d,
                    "label_mean": float(np.mean(split[1] == split[1].max()) * 2 - 1),
                    "median_sigma_w_init": float(np.median(wn0)),
                    "median_sigma_w_final": float(np.median(wn1)),
                    "frac_low_freq_init": float(np.mean(wn0 < 0.5 * np.sqrt(d))),
                    "frac_low_freq_final": float(np.mean(wn1 < 0.5 * np.sqrt(d))),
                    "mean_constancy_init": float(c0.mean()),
                    "mean_constancy_final": float(c1.mean()),
                    "frac_constancy_gt_0.5_init": float(np.mean(c0 > 0.5)),
                    "frac_constancy_gt_0.5_final": float(np.mean(c1 > 0.5)),
                    "align_train_0": rows[0]["align_train"],
                    "align_train_end": rows[-1]["align_train"],
                    "align_test_0": rows[0]["align_test"],
                    "align_test_end": rows[-1]["align_test"],
                    "calign_test_0": rows[0]["calign_test"],
                    "calign_test_end": rows[-1]["calign_test"],
                    "test_error_0": errs[0],
                    "test_error_min": float(min(errs)),
                    "step_min": rows[int(np.argmin(errs))]["step"],
                    "test_error_end": errs[-1],
                }
            )
            print(task, name, f"{time.perf_counter() - t0:.0f} s", flush=True)

    # ---- figure: one row per task
    fig, axes = plt.subplots(len(SHOW), 4, figsize=(17, 4.0 * len(SHOW)))
    r = np.linspace(0, 3, 200)
    for i, task in enumerate(SHOW):
        est, split, sigma = fitted[task, "linear"]
        estc = fitted[task, "centred"][0]
        d = split[0].shape[1]
        ax = axes[i, 0]
        bins = np.linspace(0, 3 * np.sqrt(d) + 2, 40)
        for om, lab, st in [
            (est.omega_init_, "initial (RFF draw)", "step"),
            (est.omega_, "linear, final", "stepfilled"),
            (estc.omega_, "centred, final", "step"),
        ]:
            ax.hist(
                np.linalg.norm(om[:, :d], axis=1) * sigma,
                bins=bins,
                density=True,
                histtype=st,
                alpha=0.5 if st == "stepfilled" else 1,
                label=lab,
            )
        ax.plot(bins, chi(d).pdf(bins), "k--", lw=1, label=f"prior: chi_{d}")
        ax.set(title=f"{task}: frequency norm", xlabel="sigma |w| (standardised)")
        ax.legend(fontsize=7)
        ax = axes[i, 1]
        cb = np.linspace(0, 1, 26)
        for om, lab, st in [
            (est.omega_init_, "initial", "step"),
            (est.omega_, "linear, final", "stepfilled"),
            (estc.omega_, "centred, final", "step"),
        ]:
            c = constancy(fourier_features(split[0], om, np.ones(M)))
            ax.hist(c, bins=cb, histtype=st, alpha=0.5 if st == "stepfilled" else 1, label=lab)
        ax.set(
            title="feature constancy on the data",
            xlabel="mean(phi)^2 / mean(phi^2)",
            ylabel="features",
            yscale="log",
        )
        ax.legend(fontsize=7)
        ax = axes[i, 2]
        for om, lab in [
            (est.omega_init_, "initial"),
            (est.omega_, "linear, final"),
            (estc.omega_, "centred, final"),
        ]:
            ax.plot(r, radial_profile(om, sigma, d, r), label=lab)
        ax.plot(r, np.exp(-(r**2) / 2), "k--", lw=1, label="Gaussian exp(-r^2/2)")
        ax.set(
            title="kernel profile k(r), direction-averaged",
            xlabel="r / sigma",
            ylabel="k(r)",
        )
        ax.legend(fontsize=7)
        ax = axes[i, 3]
        ax2 = ax.twinx()
        for name, col in [("linear", "C1"), ("centred", "C2")]:
            rows = [c for c in curves if c["task"] == task and c["variant"] == name]
            st = [c["step"] for c in rows]
            ax.plot(st, [c["test_error"] for c in rows], color=col, label=f"{name}: test error")
            ax2.plot(st, [c["align_train"] for c in rows], ":", color=col, label="train align.")
            ax2.plot(st, [c["align_test"] for c in rows], "--", color=col, label="test align.")
        ax.set(title="along the run", xlabel="Langevin step", ylabel="test error (ridge)")
        ax2.set_ylabel("Cristianini alignment (dotted train, dashed test)")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "diagnosis.png", dpi=110)

    import csv

    with open(out / "diagnosis.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(curves[0]))
        w.writeheader()
        w.writerows(curves)
    keys = list(summary[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for s in summary:
        lines.append(
            "| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in s.values())
        )
        lines[-1] += " |"
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "run.json").write_text(
        json.dumps(
            {
                "m": M,
                "seed": SEED,
                "learner_seed": 10_000 + SEED,
                "noise": NOISE,
                "n_train": N_TRAIN,
                "n_test": N_TEST,
                "n_checkpoints": N_CK,
                "base": BASE,
                "variants": RUNS,
                "meanfield_version": meanfield.__version__,
                "wall_s": time.perf_counter() - t0,
                "machine": machine(),
            },
            indent=1,
        )
    )
    print((out / "summary.md").read_text())


def cli(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--out",
        type=output_dir,
        default=str(HERE / "results" / "diagnosis"),
        metavar="FOLDER",
        help="output folder, created if missing [default: results/diagnosis here]",
    )
    args = ap.parse_args(argv)  # bad flags end here (exit 2), before any work
    main(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
