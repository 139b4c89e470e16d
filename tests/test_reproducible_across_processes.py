"""Seeded entry points give bit-identical results in separate interpreters.

"Everything that draws random numbers takes a seed and is reproducible": not only within one
process (the other tests) but across processes, whose string hashes (``PYTHONHASHSEED``) and
hence set and dict-of-hash orders differ, and, for the particles' trajectory, across torch
thread counts.  Each case runs one entry point at a tiny size; the
entry points are bundled into one script that runs in two interpreters at once and prints an
md5 of every output (arrays as bytes, datasets' variables and attributes, wall-clock times and
the creation stamp left out).
"""

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")

# two fresh interpreters per check (the first case of each kind pays 10-25 s for all)
pytestmark = pytest.mark.slow

FIX = Path(__file__).parent / "fixtures" / "nlp"

SCRIPT = r"""
import hashlib, json, re, sys, tempfile, warnings
from functools import cache
from pathlib import Path

import numpy as np
import torch
import xarray as xr

warnings.simplefilter("ignore")
torch.set_num_threads(int(sys.argv[1]))
FIX = Path(sys.argv[3])
VOLATILE = re.compile(r"created|seconds|wall|_time$")  # clocks, not results


def feed(h, obj):
    if isinstance(obj, xr.Dataset):
        for name in sorted(map(str, obj.variables)):
            if not VOLATILE.search(name):
                h.update(name.encode())
                feed(h, obj[name].values)
        feed(h, dict(obj.attrs))
    elif isinstance(obj, torch.Tensor):
        feed(h, obj.detach().cpu().numpy())
    elif isinstance(obj, np.ndarray) and obj.dtype != object:
        h.update(f"{obj.dtype}{obj.shape}".encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            if not VOLATILE.search(str(k)):
                h.update(str(k).encode())
                feed(h, obj[k])
    elif isinstance(obj, (list, tuple)):
        h.update(b"[")
        for x in obj:
            feed(h, x)
        h.update(b"]")
    elif isinstance(obj, (float, np.floating)):
        h.update(np.float64(obj).tobytes())
    else:
        h.update(repr(obj).encode())


def digest(obj):
    h = hashlib.md5()
    feed(h, obj)
    return h.hexdigest()


def energy_1d():
    from meanfield.domains import Box
    from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    from meanfield.kernels import Riesz

    return Energy([QuadraticPotential(), PairInteraction(Riesz(0.0), lam=0.5)], Box(1, 2.0))


def simulate_small(N, seed, **kw):
    from meanfield.dynamics.langevin import simulate

    omega0 = np.linspace(-1, 1, N)[:, None]
    return simulate(energy_1d(), omega0, eta=0.01, beta=2.0, record_every=10, seed=seed, **kw)


def sweep_run(N, seed):
    ds = simulate_small(N, seed, n_steps=20)
    return ds[["energy"]].isel(time=-1, drop=True).drop_vars("step", errors="ignore")


@cache
def sst2():
    from meanfield.attention import data as D
    from meanfield.attention.tokenizer import TextTokenizer

    tr = D.load_split("sst2", "train", FIX)
    return TextTokenizer.train(tr.text_a, vocab_size=120, min_frequency=1), tr


def small_model(tok):
    from meanfield.attention.model import TransformerClassifier

    kw = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, max_length=24, n_features=8)
    return TransformerClassifier(tok.vocab_size, attention="favor", seed=0, **kw)


def state(model):
    return {k: v for k, v in model.state_dict().items() if torch.is_tensor(v)}


@cache
def large_langevin():
    from meanfield.domains import Ball
    from meanfield.energy import Energy, PairInteraction, QuadraticPotential
    from meanfield.kernels import Riesz
    from meanfield.dynamics.langevin import simulate

    E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.5), lam=0.5)], Ball(2, 3.0))
    omega0 = np.random.default_rng(0).normal(size=(300, 2)) * 0.5
    return simulate(E, omega0, eta=0.001, beta=2.0, n_steps=5, record_every=5, seed=1)


def case_tokenizer():
    tok, tr = sst2()
    return [sorted(tok._tok.get_vocab().items()), tok.encode(tr.text_a, max_length=24)]


def case_langevin():
    return simulate_small(8, 3, n_steps=50)


def case_langevin_random_batch():
    return simulate_small(16, 3, n_steps=50, interaction_batch=4)


def case_mala():
    from meanfield.dynamics.langevin import simulate

    # distinct starting points: coincident ones have infinite energy under the singular kernel
    omega0 = np.broadcast_to(np.linspace(-1.0, 1.0, 8)[:, None], (3, 8, 1)).copy()
    return simulate(energy_1d(), omega0, eta=0.01, beta=2.0, n_steps=50, method="mala", seed=4)


def case_hmc():
    from meanfield.dynamics.hmc import sample_hmc

    omega0 = np.broadcast_to(np.linspace(-1.0, 1.0, 6)[:, None], (2, 6, 1)).copy()
    return sample_hmc(energy_1d(), omega0, beta=1.0, n_samples=10, n_warmup=10, seed=5)


def case_pde_solve():
    from meanfield.pde import Density, Grid, McKeanVlasov

    E = energy_1d()
    g = Grid(E.domain, 32)
    res = McKeanVlasov(E, g, beta=2.0).solve(Density.gaussian(g, 0.3, 0.5), 0.2)
    return [res.state.data, res.dataset()]


def case_compare():
    from meanfield.workbench.compare import compare
    from meanfield.domains import Box
    from meanfield.energy import Energy, QuadraticPotential
    from meanfield.pde import Density, Grid

    box = Box(2, 2.0)
    E, rho0 = Energy([QuadraticPotential()], box), Density.gaussian(Grid(box, 12), 0.0, 0.5)
    return compare(E, rho0, n_particles=30, beta=10.0, t_final=0.03, eta=0.01, n_records=2, seed=1)


def case_synthetic():
    from meanfield.learners.tasks import make_task

    names = ("radial", "gaussian_mixture", "checkerboard", "xor", "two_moons")
    return [make_task(name, 50, 10, seed=7) for name in names]


def case_learners():
    from meanfield.learners import (
        CoulombFeatures,
        ImportanceSampledFeatures,
        RandomFourierFeatures,
    )
    from meanfield.learners.evaluation import evaluate, select_by_cv
    from meanfield.learners.tasks import make_task

    Xtr, ytr, Xte, yte = make_task("two_moons", 60, 30, seed=2)
    cf = CoulombFeatures(n_features=6, n_steps=10, early_stopping=True, n_checkpoints=2,
                         random_state=0).fit(Xtr, ytr)
    isf = ImportanceSampledFeatures(n_features=8, random_state=0).fit(Xtr, ytr)
    rff = RandomFourierFeatures(16, random_state=1)
    out = evaluate(rff, Xtr, ytr, Xte, yte, classifiers=("ridge",))
    grid = {"bandwidth": [0.5, 2.0]}
    cv = select_by_cv(RandomFourierFeatures(16, random_state=0), grid, Xtr, ytr)
    return [cf.omega_, cf.best_step_, cf.transform(Xte), isf.transform(Xte), out,
            cv["mean_test_score"], cv["best_params"]]


def case_sweep():
    from meanfield.workbench.sweeps import run_sweep

    with tempfile.TemporaryDirectory() as folder:
        ds = run_sweep(sweep_run, {"N": [4], "seed": [0, 1]}, folder, scheduler="threads",
                       n_workers=1, progress=False).load()
        files = sorted(p.name for p in Path(folder).rglob("*.nc"))  # the run keys
    return [ds, files]


def case_w2_sparse():
    from meanfield.ot.sparse import w2_sparse

    rng = np.random.default_rng(0)
    x, z, wz = rng.normal(size=(60, 2)), rng.normal(size=(70, 2)), rng.random(70)
    r = w2_sparse(x, np.ones(60), z, wz, k=2)
    return {k: r[k] for k in ("w2", "w2_lower", "rounds", "pairs")}


def case_attention():
    from meanfield.attention import phases as P

    tok, tr = sst2()
    data = P.encode(tok, tr, 24)
    model = small_model(tok)
    init = state(model)
    info = P.train(model, data, epochs=2, batch_size=16, lr=5e-3, seed=0)
    res = P.phase_a(model, data, n_align=24, n_heldout=16, n_steps=40, seed=0)
    return [init, info["losses"], state(model), res.summary()]


def case_studies():
    from meanfield.domains import Box
    from meanfield.energy import Energy, QuadraticPotential
    from meanfield.studies.kernel_concentration import kernel_concentration, kernel_model
    from meanfield.studies.large_deviations import statistic, tail_probability
    from meanfield.workbench.problems import particles_vs_grid_run

    E = Energy([QuadraticPotential()], Box(1, 4.0))
    tail = tail_probability(E, statistic("mean"), 1.0, 4, 1.0, theta=1.0, n_ladder=3,
                            n_replicas=4, n_steps=40, burn_in=10, thin=5, eta=0.1)
    Ek, X = kernel_model()
    conc = kernel_concentration(Ek, X, "softplus", 2.0, [4, 8], [0.1, 1.0], cells=32,
                                n_replicas=4, n_steps=20, burn_in=10, thin=5)
    pvg = particles_vs_grid_run(8, 0, t_final=0.05, n_records=1, grid_n=16, n_data=10)
    return [tail, conc, pvg]


def case_large_langevin_positions():
    return large_langevin()["omega"].values


names = sys.argv[2].split(",")
print(json.dumps({n: digest(globals()["case_" + n.replace("-", "_")]()) for n in names}))
"""

# PYTHONHASHSEED 1 vs 2, one torch thread each
HASH_CASES = {
    "tokenizer": [],
    "langevin": [],
    "langevin-random-batch": [],
    "mala": [],
    "hmc": [],
    "pde-solve": [],
    "compare": [],
    "synthetic": [],
    "learners": [],
    "sweep": [],
    "w2-sparse": [],
    "attention": [],
    "studies": [],
}

# one torch thread vs two, same PYTHONHASHSEED: the gradients reduce per particle, so the
# trajectory does not depend on the thread count.  (What does, in the last bits, is documented
# in the README: sums that torch splits over threads, the recorded N² pair energy and
# LayerNorm's backward; bit-identical results need the same torch.get_num_threads().)
THREAD_CASES = {"large-langevin-positions": []}


@cache
def _digests(cases: tuple, runs: tuple) -> list[dict]:
    """Run the script once per ``(hash_seed, threads)`` in ``runs``, all at once; the
    digests of ``cases`` from each."""
    procs = []
    for hash_seed, threads in runs:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": str(threads)}
        argv = [sys.executable, "-c", SCRIPT, str(threads), ",".join(cases), str(FIX)]
        procs.append(
            subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        )
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr.decode()[-3000:]
        out.append(json.loads(stdout.decode().strip().splitlines()[-1]))
    return out


def _params(cases: dict):
    return [pytest.param(name, marks=marks, id=name) for name, marks in cases.items()]


@pytest.mark.parametrize("case", _params(HASH_CASES))
def test_same_result_under_another_hash_seed(case):
    a, b = _digests(tuple(HASH_CASES), (("1", 1), ("2", 1)))
    assert a[case] == b[case]


@pytest.mark.parametrize("case", _params(THREAD_CASES))
def test_same_result_with_another_thread_count(case):
    a, b = _digests(tuple(THREAD_CASES), (("1", 1), ("1", 2)))
    assert a[case] == b[case]
