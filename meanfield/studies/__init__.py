"""Studies: the computations of the paper's questions, run from configuration files.

Each module here computes one question (limits, large deviations, kernel concentration, the 3D
Coulomb gas, NLP training and evaluation, synthetic evaluation). A study is run from a TOML
configuration file (``type = "Study"``, ``study = NAME``, then its settings) by the one runner,
``meanfield run FILE`` or :func:`run_study_file`; presets are files, not code
(``paper_repro/<question>/configs/<preset>.toml``).

A study module listed in :data:`STUDIES` defines ``run_study(settings, out, *,
n_workers=None, scheduler=None, progress=True)`` (computes into the study folder, resuming,
and writes the reports there), ``write_report(out, report_dir)`` (reads the runs in ``out``,
writes only reports into ``report_dir``), and its settings' check, one of

* ``SETTINGS``, its settings contract
  (:func:`meanfield.workbench.study_settings.declare_settings`): every setting declared once
  (type, range, default, one line of doc), so the generated fuzzing covers it and the docs
  print its table; :func:`check_study_settings` calls ``SETTINGS.wrapper(**settings)``;
* ``check_config(settings) -> dict`` (the complete settings, every value checked, before any
  work), which takes precedence: a study whose settings depend on a selector (the synthetic
  study's ``design``) picks one of its contracts there (``synthetic.SETTINGS[design]``).

See Also
--------
meanfield.workbench.study_files : the study file, its overrides and its folders.
meanfield.workbench.study_settings : the configuration engine (defaults, unknown keys, checks).
meanfield.cli.parser.RUN_FLAGS : the flags of ``meanfield run``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import InputError
from ..workbench.study_files import (
    override_settings,
    read_study_file,
    study_folders,
)

__all__ = ["STUDIES", "check_study_settings", "run_study_file", "study_module"]

#: The studies a configuration file can name: name -> the module implementing it.
STUDIES: dict[str, str] = {
    "limits": "meanfield.studies.limits",  # N → ∞ in p = 2: particles against the grid
    "nlp": "meanfield.studies.nlp",  # kernel attention on text: from scratch and pretrained
    "synthetic": "meanfield.studies.synthetic",  # kernel learning on synthetic tasks
}


def study_module(name: str):
    """The module implementing the study ``name`` (a key of :data:`STUDIES`).

    Parameters
    ----------
    name : str
        The ``study`` key of a configuration file.

    Returns
    -------
    module
        Defines ``check_config``, ``run_study`` and ``write_report``.

    Raises
    ------
    InputError
        An unknown study (the message lists the known ones).

    See Also
    --------
    check_study_settings : checks a study's settings.
    run_study_file : runs a study file.

    Examples
    --------
    >>> study_module("no such study")
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: study must be one of ..., got 'no such study'
    """
    if name not in STUDIES:
        known = ", ".join(repr(k) for k in sorted(STUDIES)) or "(none)"
        raise InputError(f"study must be one of {known}, got {name!r}")
    return importlib.import_module(STUDIES[name])


def check_study_settings(module, settings: dict) -> dict:
    """The complete, checked settings of a study, before any work.

    Parameters
    ----------
    module : module
        A study module (:func:`study_module`).
    settings : dict
        The settings of its file, overrides applied.

    Returns
    -------
    dict
        ``module.check_config(settings)`` where the module defines it, else
        ``module.SETTINGS.wrapper(**settings)`` (its settings contract,
        :func:`~meanfield.workbench.study_settings.declare_settings`).

    Raises
    ------
    meanfield.errors.InputError, meanfield.errors.InputTypeError
        A setting refused (by name, with its range), or a module with neither.

    See Also
    --------
    meanfield.workbench.study_settings.declare_settings : declares a study's settings.

    Examples
    --------
    >>> check_study_settings(study_module("synthetic"), {"n_train": 1})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: n_train must be an integer >= 2, got 1
    """
    if not isinstance(settings, dict):
        raise InputError(f"the settings must be a mapping, got {settings!r}")
    check = getattr(module, "check_config", None)
    if check is not None:
        return check(settings)
    contract = getattr(module, "SETTINGS", None)
    if contract is None or not callable(getattr(contract, "wrapper", None)):
        raise InputError(f"study module {module.__name__} declares no SETTINGS nor check_config")
    return contract.wrapper(**settings)


def run_study_file(
    path,
    *,
    out=None,
    in_place: bool = False,
    report_only: bool = False,
    report_dir=None,
    overrides=(),
    n_workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
) -> Path:
    """Run the study a configuration file describes (or only write its reports).

    Everything is checked before any work: the file, the overrides, the settings
    (:func:`check_study_settings`: the study's ``check_config`` or its ``SETTINGS`` contract)
    and the folders
    (:func:`~meanfield.workbench.study_files.study_folders`).

    Parameters
    ----------
    path : str or path-like
        A TOML file with ``type = "Study"`` and ``study = NAME``.
    out : path-like, optional
        The study folder; default the scratch folder ``runs/<question>/<preset>``.
    in_place : bool
        Write into the committed ``<question>/results/<preset>``.
    report_only : bool
        Only write the reports from the runs already in the study folder.
    report_dir : path-like, optional
        With ``report_only`` on committed runs: where the reports go.
    overrides : sequence of str
        ``KEY=VALUE`` settings in TOML syntax (``seeds=[3]``), applied over the file's
        (``meanfield run --set``).
    n_workers : int, optional
        Worker processes of the local cluster (default: the study's choice).
    scheduler : str, optional
        ``"local"`` (a local cluster of ``n_workers`` processes), ``"threads"`` or a dask
        scheduler address (``tcp://host:8786``); default: the study's choice.
    progress : bool
        Show progress bars.

    Returns
    -------
    pathlib.Path
        The folder the reports were written to.

    See Also
    --------
    meanfield.workbench.study_files : the file format and the folder rules.
    check_study_settings : the settings' check.
    meanfield.cli.commands.cmd_run : ``meanfield run``, which calls it for a study file.

    Examples
    --------
    >>> run_study_file("missing.toml")
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: FILE: 'missing.toml' is not a file
    """
    file = read_study_file(path)
    module = study_module(file.study)
    settings = check_study_settings(module, override_settings(file.settings, overrides))
    folder, reports = study_folders(
        file, out=out, in_place=in_place, report_only=report_only, report_dir=report_dir
    )
    if report_only:
        if not folder.is_dir():
            raise InputError(f"--report-only: no study folder {str(folder)!r} to report on")
        reports.mkdir(parents=True, exist_ok=True)
        module.write_report(folder, reports)
        return reports
    module.run_study(settings, folder, n_workers=n_workers, scheduler=scheduler, progress=progress)
    return folder
