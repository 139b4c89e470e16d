"""The configuration engine of the studies (meanfield.workbench.study_settings) and the
synthetic study's declared settings: merged, flattened, refused by name, keyed."""

from __future__ import annotations

import inspect
import pickle

import pytest

from meanfield.contract import Param, registered
from meanfield.errors import InputError, InputTypeError
from meanfield.studies import synthetic as S
from meanfield.workbench.study_settings import (
    KeyedAs,
    check_section,
    declare_settings,
    flatten_settings,
    merge_settings,
    settings_digest,
    unflatten_settings,
)


def test_flatten_and_unflatten_are_inverse():
    nested = {"seed": 0, "train": {"lr": 0.1, "noise": {"p": 0.2}}, "tags": ["a"]}
    flat = flatten_settings(nested)
    assert flat == {"seed": 0, "train.lr": 0.1, "train.noise.p": 0.2, "tags": ["a"]}
    assert unflatten_settings(flat) == nested
    # a table given whole and dotted keys into it merge; a value under a dotted key is refused
    assert unflatten_settings({"a": {"b": 1}, "a.c": 2}) == {"a": {"b": 1, "c": 2}}
    with pytest.raises(InputError, match="'a' must be a mapping"):
        unflatten_settings({"a": 1, "a.b": 2})


def test_merge_refuses_unknown_keys_naming_the_nearest_and_replaces_whole_tables():
    defaults = {"train": {"lr": 1e-3, "epochs": 2}, "datasets": {"sst2": {}}}
    merged = merge_settings({"train": {"lr": 0.1}, "datasets": {"imdb": {}}}, defaults,
                            whole=("datasets",))  # fmt: skip
    assert merged == {"train": {"lr": 0.1, "epochs": 2}, "datasets": {"imdb": {}}}
    assert defaults["train"]["lr"] == 1e-3  # not changed
    with pytest.raises(InputError, match=r"'train.epoch' \(did you mean 'train.epochs'\?\)"):
        merge_settings({"train": {"epoch": 3}}, defaults)
    with pytest.raises(InputError, match="configuration key 'train' must be a mapping"):
        merge_settings({"train": 3}, defaults)


def test_declared_settings_fill_defaults_check_and_name_each_key():
    c = declare_settings(
        "demo:SETTINGS",
        [Param("n", "int", "count", low=1), Param("train.lr", "real", "rate", low=0.0),
         Param("train.batch", "int", "rows", low=2)],
        {"n": 1, "train": {"lr": 0.5}, "free": {"x": 1}},
        register=False,
    )  # fmt: skip
    # a table key by key (a key without a default stays absent), a free key whole
    assert c.wrapper(**{"train.batch": 4, "free": {"y": 2}}) == {
        "n": 1, "train": {"lr": 0.5, "batch": 4}, "free": {"y": 2}
    }  # fmt: skip
    assert c.defaults == {"n": 1, "train.lr": 0.5, "free": {"x": 1}}
    with pytest.raises(InputTypeError, match="train.batch must be an integer >= 2"):
        c.wrapper(train={"batch": 4.0})
    with pytest.raises(InputError, match=r"'nn' \(did you mean 'n'\?\)"):
        c.wrapper(nn=2)
    with pytest.raises(InputError, match="n must be an integer >= 1, got 0"):
        declare_settings("demo:BAD", [Param("n", "int", "count", low=1)], {"n": 0}, register=False)


def test_coulomb_section_is_the_learners_keywords_with_its_ranges():
    """The declared Coulomb keys are CoulombFeatures' keywords (but those set per run), with
    its defaults; each valid edge value is accepted by CoulombFeatures' own checks, and each
    out-of-range number the section refuses is refused by them too (an independent check)."""
    from meanfield.learners import CoulombFeatures

    sig = inspect.signature(CoulombFeatures).parameters
    per_run = {"n_features", "bandwidth", "random_state"}
    assert [p.name for p in S.COULOMB_KEYS] == [k for k in sig if k not in per_run]
    assert S.COULOMB_SECTION.defaults == {k: sig[k].default for k in sig if k not in per_run}
    for p in S.COULOMB_KEYS:
        for v in p.edge_values():
            CoulombFeatures(8, **{p.name: v})._check_params()
        for v in p.invalid_values():
            numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
            if numeric and p.kind in ("real", "int", "level") and v == v:  # not NaN
                with pytest.raises((ValueError, TypeError)):
                    CoulombFeatures(8, **{p.name: v})._check_params()


def test_check_section_names_the_full_key():
    with pytest.raises(InputError, match=r"variants.a.beta must be a finite number in \(0, inf\)"):
        check_section("variants.a", {"beta": 0.0}, S.COULOMB_SECTION, {})
    assert check_section("base", {"beta": 10}, S.COULOMB_SECTION, {"eta": 1.0}) == {
        "eta": 1.0, "beta": 10.0
    }  # fmt: skip


def test_every_synthetic_setting_is_declared_or_checked_by_the_study():
    """Each design's defaults are its declared settings, its sections and the free keys the
    study checks itself; every contract is registered (fuzzed, printed in the docs)."""
    free = {"variants", "tempered", "ridges", "settings"}
    entries = registered()
    for design, contract in S.SETTINGS.items():
        assert entries[contract.entry] is contract
        declared = {p.name.split(".")[0] for p in contract.params}
        sections = {"coulomb", "base"} & set(S.DEFAULTS[design])
        assert set(S.DEFAULTS[design]) == declared | sections | (free & set(S.DEFAULTS[design]))
        assert S.check_config({"design": design})["design"] == design


def _cell(seed, n=3):
    return seed * n


#: pickled by reference (its class and the wrapped function)
KEYED = KeyedAs(_cell, "meanfield.studies.old_module.run_cell")


def test_keyed_as_keeps_the_recorded_name_the_signature_and_pickles():
    from meanfield.workbench.sweeps import sweep_configuration

    assert KEYED(2) == 6 and inspect.signature(KEYED) == inspect.signature(_cell)
    assert sweep_configuration(KEYED, {})["function"] == "meanfield.studies.old_module.run_cell"
    assert settings_digest(KEYED, {"n": 3}) != settings_digest(_cell, {"n": 3})
    assert pickle.loads(pickle.dumps(KEYED))(1) == 3
