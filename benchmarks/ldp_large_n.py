"""Extend the mean-field LDP rate of figures/ldp_rate to N = 128 and 256 (same a, θ*, model).

    python benchmarks/ldp_large_n.py     # about 8 minutes on one core
    python benchmarks/ldp_large_n.py --n-particles 128 --out FOLDER

Reads the figure's data (``--figure-data``, default ``figures/ldp_rate.nc`` of this checkout)
and writes ``ldp_large_n.txt`` (one line per N: N, rate, its standard error, the quadrature
error of log p / N, log p, the mean acceptance rate, seconds, "J" and the mean-field rate J)
and ``ldp_large_n.json`` into ``--out`` (by default a folder outside the repository).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from meanfield.contract import Contract, Param
from meanfield.workbench._scripts import add_bench_out, progress, say

FIGURE_DATA = Path(__file__).resolve().parents[1] / "figures" / "ldp_rate.nc"


def _existing_file(text: str) -> Path:
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{str(path)!r} is a folder, not a file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {str(path)!r}")
    return path


#: The flags, declared once: their checks, help and docs come from these Params (the figure
#: data and the output folder are checked by their own argparse types).
FLAGS = Contract(
    "benchmarks/ldp_large_n.py",
    [
        Param("n_particles", "int", "particle numbers N", low=2, sequence=True,
              default=(128, 256)),
        Param("progress", "flag", "show the progress bar", default=True),
    ],
)  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    FLAGS.add_arguments(ap, names=["n_particles"])
    ap.add_argument(
        "--figure-data",
        type=_existing_file,
        default=str(FIGURE_DATA),
        help="netCDF of the ldp_rate figure (its a, theta* and J) [default: %(default)s]",
    )
    add_bench_out(ap, "ldp_large_n.txt and .json")
    FLAGS.add_arguments(ap, names=["progress"])
    args = FLAGS.parse_args(ap, argv)  # bad flags end here (exit 2), before torch loads

    import torch
    import xarray as xr

    from meanfield.domains import Box
    from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    from meanfield.kernels import Riesz
    from meanfield.studies.large_deviations import statistic, tail_probability

    torch.set_num_threads(1)
    d = xr.open_dataset(args.figure_data)
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], Box(1, 8.0))
    st = statistic("second_moment")
    a, th = d.attrs["a_mf"], d.attrs["theta_star_mf"]
    lines, rows = [], []
    for N in progress(args.n_particles, enabled=args.progress, desc="N"):
        t = time.time()
        r = tail_probability(
            E, st, a, N, 1.0, theta=th, eta=0.3, n_replicas=32, n_steps=400, burn_in=100, seed=N
        )
        row = {
            "N": N,
            "rate": float(r.rate),
            "rate_se": float(r.rate_se),
            "log_p_quad_err_per_N": float(r.log_p_quad_err) / N,
            "log_p": float(r.log_p),
            "acceptance": float(r.acceptance_rate.values.mean().round(2)),
            "wall_s": round(time.time() - t, 1),
            "J_mf": float(d.J_mf),
        }
        rows.append(row)
        v = list(row.values())
        lines.append(" ".join(map(str, [*v[:-1], "J", v[-1]])))
        say(lines[-1])
    args.out.mkdir(parents=True, exist_ok=True)
    head = (
        "# python benchmarks/ldp_large_n.py (one thread; columns: N, rate, rate_se, quadrature "
        "error / N, log P, acceptance, wall s, J)"
    )
    (args.out / "ldp_large_n.txt").write_text("\n".join([head, *lines]) + "\n")
    (args.out / "ldp_large_n.json").write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out / 'ldp_large_n.txt'} and .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
