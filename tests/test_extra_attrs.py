"""extra_attrs never overwrite a recorded parameter (``extra_attrs={'beta': 99}`` once saved a
run at beta = 1 as one at beta = 99): refused by name before any work in simulate,
sample_hmc and compare; an attribute of a new name is kept. The lists the early checks read
(HMC_ATTRS, COMPARE_ATTRS) are checked against what the runs record."""

from __future__ import annotations

import pytest

from meanfield.domains import Box
from meanfield.dynamics.hmc import HMC_ATTRS, sample_hmc
from meanfield.dynamics.langevin import simulate
from meanfield.energy import Energy, QuadraticPotential
from meanfield.errors import InputError
from meanfield.pde import Density, Grid
from meanfield.results import PROVENANCE_ATTRS
from meanfield.workbench.compare import COMPARE_ATTRS, compare


def _energy():
    return Energy([QuadraticPotential()], Box(1, 2.0))


def _runs(extra):
    E = _energy()
    grid = Grid(E.domain, 16)
    return {
        "simulate": lambda: simulate(
            E, [[0.1], [-0.1]], eta=0.01, beta=1.0, n_steps=3, extra_attrs=extra
        ),
        "sample_hmc": lambda: sample_hmc(
            E, [[0.1], [-0.1]], beta=1.0, n_samples=2, n_warmup=2, seed=0, extra_attrs=extra
        ),
        "compare": lambda: compare(
            energy=E, initial=Density.gaussian(grid, 0.0, 0.5), n_particles=4, beta=2.0,
            eta=0.01, n_steps=3, n_records=1, extra_attrs=extra,
        ),
    }  # fmt: skip


@pytest.mark.parametrize("entry", ["simulate", "sample_hmc", "compare"])
@pytest.mark.parametrize("key", ["beta", "seed", "meanfield_version"])
def test_extra_attrs_cannot_overwrite_a_recorded_parameter(entry, key, monkeypatch):
    # before any work: the first step of each run is never reached
    import meanfield.dynamics.chains as chains

    def no_work(*args, **kwargs):
        raise AssertionError("the run started")

    monkeypatch.setattr(chains._Recorder, "run", no_work)
    with pytest.raises(InputError, match=key):
        _runs({key: 99})[entry]()


@pytest.mark.parametrize("entry", ["simulate", "sample_hmc", "compare"])
def test_new_extra_attrs_are_recorded_and_the_lists_match_the_runs(entry):
    ds = _runs({"note": "kept"})[entry]()
    assert ds.attrs["note"] == "kept"
    recorded = set(ds.attrs) - {"note"} - set(PROVENANCE_ATTRS)
    described = {k for k in recorded if k not in HMC_ATTRS and k not in COMPARE_ATTRS}
    if entry == "sample_hmc":  # every recorded name the early check does not list comes
        assert all(k in _energy().describe() for k in described)  # from the energy
    if entry == "compare":
        assert set(COMPARE_ATTRS) <= recorded
