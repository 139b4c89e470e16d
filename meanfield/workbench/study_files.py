"""Study configuration files: read one, override its settings, and find where it reads and writes.

A *study* is configuration files run by one runner (``meanfield run FILE``, or
:func:`meanfield.studies.run_study_file` from Python). A study configuration is a TOML file,
by convention ``paper_repro/<question>/configs/<preset>.toml``::

    type = "Study"
    study = "synthetic"     # which study (a key of meanfield.studies.STUDIES)
    seeds = [0, 1, 2]       # every other key or table is a setting of that study
    [coulomb]
    lam = 0.5

This module knows nothing of any particular study: it reads such a file
(:func:`read_study_file`), applies ``KEY=VALUE`` overrides written in TOML syntax
(:func:`override_settings`), and decides the *study folder* — where runs are computed and
reports written — and the *report folder* (:func:`study_folders`), so that documented commands
never rewrite what the repository records:

* ``out`` names the study folder. Without it the study folder is the scratch folder
  ``runs/<question>/<preset>`` under the current directory (``runs/`` is ignored by git) or,
  with ``in_place``, the committed ``<question>/results/<preset>`` beside the file's
  ``configs/`` folder (the maintainers' command for extending the recorded study).
  ``report_only`` without ``out`` reads the committed folder where one exists.
* Computing into a committed folder needs ``in_place``: an ``out`` inside
  ``<question>/results/`` is refused without it, before any work.
* ``report_only`` reads the run files and writes only reports. Its reports go beside the runs,
  except for committed runs without ``in_place``: the record of the study (``config.json`` and
  every ``runs/`` folder) is then copied into the report folder (``report_dir``, default
  ``runs/<question>/<preset>_report``) by :func:`stage_report`, so that committed files are only
  read.

See Also
--------
meanfield.studies.run_study_file : reads a file with these functions and runs its study.
meanfield.dynamics.spec.RunSpec.from_toml : the other kind of run file (``type = "RunSpec"``).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, InputTypeError

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["StudyFile", "override_settings", "read_study_file", "stage_report", "study_folders"]

#: The file that marks a report folder made by :func:`stage_report`.
MARKER = "report_of.json"


@dataclass(frozen=True)
class StudyFile:
    """One study configuration file, read.

    Attributes
    ----------
    path : pathlib.Path
        The file.
    study : str
        The study it runs (a key of :data:`meanfield.studies.STUDIES`).
    settings : dict
        Every other key of the file (not yet checked: the study's ``check_config`` does that).
    preset : str
        The file's stem (``full``, ``ci``): the name of its study folder.
    question : pathlib.Path
        The folder of the question: the file's folder, or its parent when the file sits in a
        ``configs/`` folder. Committed results live in ``question / "results" / preset``.

    See Also
    --------
    read_study_file : reads one.
    study_folders : its folders.

    Examples
    --------
    >>> from pathlib import Path
    >>> f = StudyFile(Path("q/configs/ci.toml"), "demo", {}, "ci", Path("q"))
    >>> f.committed.as_posix()
    'q/results/ci'
    """

    path: Path
    study: str
    settings: dict
    preset: str
    question: Path

    @property
    def committed(self) -> Path:
        """The committed study folder, ``<question>/results/<preset>``.

        Examples
        --------
        >>> from pathlib import Path
        >>> StudyFile(Path("q/configs/ci.toml"), "demo", {}, "ci", Path("q")).committed.as_posix()
        'q/results/ci'
        """
        return self.question / "results" / self.preset

    @property
    def scratch(self) -> Path:
        """The scratch study folder, ``runs/<question name>/<preset>`` of the current directory.

        Examples
        --------
        >>> from pathlib import Path
        >>> StudyFile(Path("q/configs/ci.toml"), "demo", {}, "ci", Path("q")).scratch.as_posix()
        'runs/q/ci'
        """
        return Path("runs") / self.question.resolve().name / self.preset


def read_study_file(path) -> StudyFile:
    """Read a study configuration file (TOML with ``type = "Study"`` and ``study = NAME``).

    Parameters
    ----------
    path : str or path-like
        The file.

    Returns
    -------
    StudyFile
        The study's name, its unchecked settings, the preset name and the question folder.

    Raises
    ------
    InputError
        The file is missing, is not valid TOML, is not a study file, or names no study.

    See Also
    --------
    override_settings : applies ``--set``.
    meanfield.studies.run_study_file : runs the study it names.

    Examples
    --------
    >>> from pathlib import Path
    >>> _ = Path("configs").mkdir(exist_ok=True)
    >>> text = 'type = "Study"\\nstudy = "demo"\\nseeds = [0, 1]\\n'
    >>> _ = Path("configs/quick.toml").write_text(text)
    >>> f = read_study_file("configs/quick.toml")
    >>> f.study, f.settings, f.preset, f.committed.as_posix()
    ('demo', {'seeds': [0, 1]}, 'quick', 'results/quick')
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise InputError(f"FILE: {str(path)!r} is not a file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"FILE: {str(path)!r} is not valid TOML: {exc}") from None
    kind = data.pop("type", None)
    if kind != "Study":
        raise InputError(
            f'FILE: {str(path)!r} is not a study file (type = "Study"), type = {kind!r}'
        )
    study = data.pop("study", None)
    if not isinstance(study, str) or not study:
        raise InputError(f"FILE: {str(path)!r} names no study (study = NAME)")
    question = path.parent.parent if path.parent.name == "configs" else path.parent
    return StudyFile(path, study, data, path.stem, question)


def override_settings(settings: dict, assignments) -> dict:
    """``settings`` with ``KEY=VALUE`` assignments applied (VALUE in TOML syntax).

    Dotted keys set a key of a table (``coulomb.lam=0.5``); a table given whole replaces the
    table. ``settings`` is not changed.

    Parameters
    ----------
    settings : dict
        The file's settings.
    assignments : sequence of str
        ``"KEY=VALUE"`` strings, as after ``--set`` (``seeds=[3]``, ``data_dir="../data"``).

    Returns
    -------
    dict
        A new dictionary.

    Raises
    ------
    InputError
        An assignment without ``=`` or whose value is not TOML.

    See Also
    --------
    read_study_file : the settings it overrides.
    meanfield.workbench.study_settings.unflatten_settings : dotted keys as tables.
    meanfield.studies.check_study_settings : checks the result.

    Examples
    --------
    >>> override_settings({"seeds": [0, 1], "coulomb": {"lam": 1.0, "steps": 9}},
    ...                   ["seeds=[3]", "coulomb.lam=0.5"])
    {'seeds': [3], 'coulomb': {'lam': 0.5, 'steps': 9}}
    """
    out = json.loads(json.dumps(settings))  # a deep copy of plain data
    for text in assignments:
        if not isinstance(text, str):
            raise InputTypeError(f"--set must be KEY=VALUE strings, got {text!r}")
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set: {text!r} is not KEY=VALUE")
        try:
            parsed = tomllib.loads(f"{key.strip()} = {value.strip()}")
        except tomllib.TOMLDecodeError:
            raise InputError(
                f"--set: the value of {key.strip()!r} is not TOML ({value.strip()!r}; strings "
                'are quoted: data_dir="../data")'
            ) from None
        _merge(out, parsed)
    return out


def _merge(into: dict, new: dict) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _inside(folder: Path, results: Path) -> bool:
    return folder.resolve().is_relative_to(results.resolve())


def study_folders(
    file: StudyFile, *, out=None, in_place=False, report_only=False, report_dir=None
) -> tuple[Path, Path]:
    """The study folder and the report folder of one run of a study file, checked.

    Parameters
    ----------
    file : StudyFile
        From :func:`read_study_file`.
    out : path-like, optional
        The study folder (``--out``).
    in_place : bool
        Write into the committed folder ``<question>/results/<preset>`` (``--in-place``).
    report_only : bool
        Only write reports from the runs there (``--report-only``).
    report_dir : path-like, optional
        With ``report_only`` on committed runs: where the reports go (``--report-dir``).

    Returns
    -------
    (pathlib.Path, pathlib.Path)
        The study folder (runs) and the report folder (the same folder unless reports of
        committed runs are written elsewhere; then :func:`stage_report` copies the record there).

    Raises
    ------
    InputError
        Writing into the committed results without ``in_place``, ``report_dir`` without
        ``report_only`` or with ``in_place``, a report folder that is a file, inside the
        committed results, or a non-empty folder that is not a report folder.

    See Also
    --------
    stage_report : copies the record for a report.
    meanfield.studies.run_study_file : uses these folders.

    Examples
    --------
    >>> from pathlib import Path
    >>> _ = Path("q/configs").mkdir(parents=True, exist_ok=True)
    >>> _ = Path("q/configs/ci.toml").write_text('type = "Study"\\nstudy = "demo"\\n')
    >>> f = read_study_file("q/configs/ci.toml")
    >>> [p.as_posix() for p in study_folders(f)]
    ['runs/q/ci', 'runs/q/ci']
    >>> [p.as_posix() for p in study_folders(f, in_place=True)]
    ['q/results/ci', 'q/results/ci']
    >>> study_folders(f, out="q/results/ci")
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: --out: 'q/results/ci' is in the committed results (q/results); ...
    """
    results = file.question / "results"
    if report_dir is not None:
        if not report_only:
            raise InputError("--report-dir: only with --report-only")
        if in_place:
            raise InputError("--report-dir: not allowed with --in-place (reports beside the runs)")
    if out is not None:
        folder = Path(out).expanduser()
        if folder.exists() and not folder.is_dir():
            raise InputError(f"--out: {str(folder)!r} exists and is not a folder")
        if not (report_only or in_place) and _inside(folder, results):
            raise InputError(
                f"--out: {str(folder)!r} is in the committed results ({results.as_posix()}); "
                "add --in-place to write there, or choose another folder"
            )
    elif in_place or (report_only and file.committed.is_dir()):
        folder = file.committed
    else:
        folder = file.scratch
    if not report_only or in_place or not _inside(folder, results):
        return folder, folder
    dest = Path(report_dir if report_dir is not None else f"{file.scratch}_report").expanduser()
    if dest.exists() and not dest.is_dir():
        raise InputError(f"--report-dir: {str(dest)!r} is a file, not a folder")
    if _inside(dest, results):
        raise InputError(
            f"--report-dir: {str(dest)!r} is in the committed results; choose another folder, "
            "or --in-place to rewrite the committed reports"
        )
    if dest.is_dir() and any(dest.iterdir()) and not (dest / MARKER).is_file():
        raise InputError(
            f"--report-dir: {str(dest)!r} is neither empty nor a report folder (no {MARKER}); "
            "choose another folder"
        )
    return folder, dest


def stage_report(src: Path, dest: Path) -> Path:
    """Copy the record of the study in ``src`` into the report folder ``dest``; return ``dest``.

    The record is ``config.json`` and every top-most ``runs/`` folder at any depth; the
    report functions, which read beside what they write, then write there and ``src`` is only
    read. An earlier copy in ``dest`` is replaced; ``dest/report_of.json`` names the source.

    Parameters
    ----------
    src, dest : pathlib.Path
        The study folder (read) and the report folder (new, empty or an earlier report folder).

    Returns
    -------
    pathlib.Path
        ``dest``.

    See Also
    --------
    study_folders : the report folder.
    meanfield.workbench.study_settings.write_json : writes a record.

    Examples
    --------
    >>> from pathlib import Path
    >>> _ = Path("study/runs").mkdir(parents=True, exist_ok=True)
    >>> _ = Path("study/runs/a.nc").write_bytes(b"x")
    >>> sorted(p.name for p in stage_report(Path("study"), Path("report")).rglob("*"))
    ['a.nc', 'report_of.json', 'runs']
    """
    src, dest = Path(src), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    marker = dest / MARKER
    if marker.is_file():  # an earlier report folder: drop its copy of the record
        for rel in json.loads(marker.read_text()).get("copied", []):
            p = dest / rel
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    copied = []
    if (src / "config.json").is_file():
        shutil.copy2(src / "config.json", dest / "config.json")
        copied.append("config.json")
    for runs in sorted(src.rglob("runs")):
        rel = runs.relative_to(src)
        if runs.is_dir() and "runs" not in rel.parts[:-1]:  # the top-most runs/ folders only
            shutil.copytree(runs, dest / rel)
            copied.append(str(rel))
    marker.write_text(json.dumps({"source": str(src.resolve()), "copied": copied}, indent=1))
    return dest
