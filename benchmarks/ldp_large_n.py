"""Extend the mean-field LDP rate of figures/ldp_rate to N = 128 and 256 (same a, θ*, model).

python benchmarks/ldp_large_n.py     # about 8 minutes on one core
"""

import time

import torch
import xarray as xr

from meanfield.domains import Box
from meanfield.energy import Energy, PairInteraction, QuadraticPotential
from meanfield.kernels import Riesz
from meanfield.studies.ldp import statistic, tail_probability


def main():
    torch.set_num_threads(1)
    d = xr.open_dataset("figures/ldp_rate.nc")
    E = Energy([QuadraticPotential(), PairInteraction(Riesz(-1.0), 0.5)], Box(1, 8.0))
    st = statistic("second_moment")
    a, th = d.attrs["a_mf"], d.attrs["theta_star_mf"]
    for N in (128, 256):
        t = time.time()
        r = tail_probability(
            E, st, a, N, 1.0, theta=th, eta=0.3, n_replicas=32, n_steps=400, burn_in=100, seed=N
        )
        print(
            N,
            float(r.rate),
            float(r.rate_se),
            float(r.log_p_quad_err) / N,
            float(r.log_p),
            r.acceptance_rate.values.mean().round(2),
            round(time.time() - t, 1),
            "J",
            float(d.J_mf),
            flush=True,
        )


if __name__ == "__main__":
    import argparse

    # no options; --help describes the run (about 8 minutes) instead of starting it
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
