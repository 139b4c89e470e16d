"""A plain configuration in TOML [1]_: the base of the workbench's configurations.

:class:`TomlConfig` gives a frozen dataclass of names and numbers ``from_toml`` (the file's
top-level keys or its ``[<TABLE>]`` table; overrides from the command line win, ``None``
leaves the file's value), ``to_toml`` (which ``from_toml`` reads back equal) and ``as_dict``;
:func:`config_field` declares a field by its :class:`~meanfield.contract.Param` (its check,
its flag's help text, its row in the docs).  Nothing here imports torch, so the command
line's help reads the fields without loading it.

The two configurations built on it are :class:`~meanfield.workbench.config.SimulationConfig`
and :class:`~meanfield.workbench.problems.ComparisonConfig`.

References
----------
.. [1] TOML v1.0.0, https://toml.io/en/v1.0.0 (the file format).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np

from ..contract import Param
from ..errors import InputError, InputTypeError, MissingFileError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "MODEL_EXAMPLE",
    "TomlConfig",
    "check_menu_left_alone",
    "config_field",
    "model_description",
    "model_energy",
    "model_text",
]

#: A model description in JSON text (the energy |ω|²/2 on [−1, 1]): the example of a
#: configuration's ``model`` field, in the form a TOML table there is stored in (keys sorted,
#: so a table read back from the configuration's own TOML is the same text).
MODEL_EXAMPLE = (
    '{"domain": {"dim": 1, "type": "Box"}, "terms": [{"type": "QuadraticPotential"}], '
    '"type": "Energy"}'
)


def _toml_value(value) -> str:
    """One value in TOML: a string, a boolean, an integer or a float (inf and nan included).

    Examples
    --------
    >>> [_toml_value(v) for v in (True, 3, 0.5, float("inf"), "a")]
    ['true', '3', '0.5', 'inf', '"a"']
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if np.isnan(v):
            return "nan"
        return repr(v) if np.isfinite(v) else ("inf" if v > 0 else "-inf")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    raise InputTypeError(f"a configuration value must be a string or a number, got {value!r}")


class TomlConfig:
    """Base of a plain configuration (a frozen dataclass of names and numbers) read from and
    written to TOML: the file's top-level keys or its ``[<TABLE>]`` table, one key per field.

    See Also
    --------
    meanfield.workbench.config.SimulationConfig : ``meanfield simulate``'s configuration.
    meanfield.workbench.problems.ComparisonConfig : ``meanfield compare``'s configuration.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> from meanfield.workbench.toml_config import TomlConfig
    >>> @dataclass(frozen=True)
    ... class Tiny(TomlConfig):
    ...     TABLE = "tiny"
    ...     beta: float = 1.0
    ...     label: str = "run"
    >>> print(Tiny(beta=2.0).to_toml(), end="")
    [tiny]
    beta = 2.0
    label = "run"
    """

    #: The TOML table of the configuration (also its command).
    TABLE = ""
    #: Fields that may hold a TOML table (a model description, :func:`model_text`): stored
    #: as JSON text, written back as the sub-table ``[<TABLE>.<name>]``.
    TABLE_FIELDS: tuple = ()

    @classmethod
    def from_toml(cls, path: str | Path, **overrides):
        r"""Read a TOML file (top-level keys or the configuration's table), then apply overrides.

        A missing file, a folder, or a file that is not UTF-8 TOML raises a
        :class:`~meanfield.errors.MeanfieldError` naming the file, before any work.

        Parameters
        ----------
        path : str or pathlib.Path
            The TOML file.
        **overrides
            Field values that replace the file's (``None`` values are ignored, so unset
            command-line flags do not override the file).

        Returns
        -------
        The configuration.

        Raises
        ------
        meanfield.errors.MissingFileError
            ``path`` does not exist.
        meanfield.errors.InputError
            ``path`` is a folder or not valid TOML, or a value is out of range.
        ValueError
            An unknown key (the message lists the allowed ones).

        Examples
        --------
        >>> import os, tempfile
        >>> from meanfield.workbench.config import SimulationConfig
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "run.toml")
        ...     with open(path, "w") as f:
        ...         _ = f.write("[simulate]\nbeta = 10.0\nn_particles = 64\n")
        ...     cfg = SimulationConfig.from_toml(path, n_particles=32, eta=None)
        >>> cfg.beta, cfg.n_particles, cfg.eta
        (10.0, 32, 0.05)
        """
        path = Path(path)
        if not path.exists():
            raise MissingFileError(f"config file {path} does not exist")
        if not path.is_file():
            raise InputError(f"config {path} is not a file (a TOML file is expected)")
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise InputError(f"config file {path} is not valid TOML: {err}") from None
        raw = raw.get(cls.TABLE, raw)
        if not isinstance(raw, dict):
            raise InputError(f"'{cls.TABLE}' in config file {path} must be a table ([{cls.TABLE}])")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(
                f"unknown key(s) in {path}: {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(known))}"
            )
        raw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**raw)

    def to_toml(self, path: str | Path | None = None) -> str:
        """This configuration as TOML, a ``[<TABLE>]`` table of every field that is set;
        :meth:`from_toml` reads it back to an equal configuration.

        Parameters
        ----------
        path : str or pathlib.Path, optional
            Also write the text to this file.

        Returns
        -------
        str
            The TOML text.

        Examples
        --------
        >>> import os, tempfile
        >>> from meanfield.workbench.config import SimulationConfig
        >>> cfg = SimulationConfig(n_particles=16, beta=5.0)
        >>> print(cfg.to_toml().splitlines()[0])
        [simulate]
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "run.toml")
        ...     _ = cfg.to_toml(path)
        ...     back = SimulationConfig.from_toml(path)
        >>> back == cfg
        True
        """
        lines = [f"[{self.TABLE}]"]
        tables = []
        for k, v in self.as_dict().items():
            if v is None:
                continue
            if k in self.TABLE_FIELDS and v.startswith("{"):
                tables.append(_sub_table(f"{self.TABLE}.{k}", json.loads(v)))
            else:
                lines.append(f"{k} = {_toml_value(v)}")
        text = "\n".join(lines) + "\n" + "".join(tables)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def as_dict(self) -> dict:
        """Every field as a plain dict (what a dataset's ``config_*`` attributes hold).

        Returns
        -------
        dict
            Field name -> value.

        Examples
        --------
        >>> from meanfield.workbench.config import SimulationConfig
        >>> SimulationConfig().as_dict()["regime"]
        'mean-field'
        """
        return dataclasses.asdict(self)


def config_field(default, param: Param):
    """A configuration field with its default, declared by ``param`` (its check, its flag's
    help text, its row in the docs).

    Parameters
    ----------
    default : object
        The field's default value.
    param : meanfield.contract.Param
        Its declaration, stored in the field's metadata under ``"param"``.

    Returns
    -------
    dataclasses.Field

    See Also
    --------
    TomlConfig : the base class of the configurations whose fields these are.
    meanfield.contract.declare_fields : reads the declarations into the class's contract.

    Examples
    --------
    >>> from meanfield.contract import Param
    >>> from meanfield.workbench.toml_config import config_field
    >>> f = config_field(0.5, Param("lam", "real", "interaction strength", low=0.0))
    >>> f.default, f.metadata["param"].name
    (0.5, 'lam')
    """
    return dataclasses.field(default=default, metadata={"param": param})


def _sub_table(header: str, description: dict) -> str:
    """A description written as the TOML table ``[header]`` (its own tables below it, as
    :func:`meanfield.dynamics.description.toml_text` writes them, under ``header``)."""
    from ..dynamics.description import toml_text

    out = [f"\n[{header}]"]
    for line in toml_text(description).splitlines():
        if line.startswith("[["):  # an array of tables: [[terms]] -> [[header.terms]]
            line = f"[[{header}.{line[2:]}"
        elif line.startswith("["):  # a table (an inline array's rows are indented)
            line = f"[{header}.{line[1:]}"
        out.append(line)
    return "\n".join(out) + "\n"


def model_text(value, name: str = "model"):
    """A configuration's model field in its stored form: a description (a dict: a TOML
    table) as its JSON text (keys sorted), JSON text in the same form, a path unchanged.

    Parameters
    ----------
    value : dict, str or None
        A description (:func:`meanfield.to_dict` form), its JSON text, or the path of a file
        holding one.
    name : str
        The field's name, for a refusal.

    Returns
    -------
    str or None

    Raises
    ------
    meanfield.errors.InputError
        Text that starts like JSON (``{``) but is not JSON.
    meanfield.errors.InputTypeError
        A table whose keys are not strings (not a description).

    See Also
    --------
    model_description : the description it writes.

    Examples
    --------
    >>> from meanfield.workbench.toml_config import model_text
    >>> model_text({"type": "Energy", "terms": []})
    '{"terms": [], "type": "Energy"}'
    >>> model_text("models/double_well.toml")
    'models/double_well.toml'
    """
    # keys sorted: TOML writes a table's values before its sub-tables, so the order of a
    # table read back from to_toml differs; sorted, the stored text is the same
    if isinstance(value, dict):
        try:
            return json.dumps(value, sort_keys=True)
        except TypeError as err:
            raise InputTypeError(f"{name}: a table that is not plain data ({err})") from None
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.dumps(json.loads(value), sort_keys=True)
        except ValueError as err:
            raise InputError(f"{name}: text starting with '{{' is read as JSON: {err}") from None
    return value


def model_description(value: str, name: str = "model") -> dict:
    """The description a model field holds: its JSON text read, or the file it names read
    (``.json``: JSON; else TOML whose top level is the description).

    Parameters
    ----------
    value : str
        :func:`model_text`'s form.
    name : str
        The field's name, for a refusal.

    Returns
    -------
    dict

    Raises
    ------
    meanfield.errors.MissingFileError
        A path that does not exist.
    meanfield.errors.InputError
        Not a file, not valid TOML or JSON, or not a table with a ``type``.

    See Also
    --------
    model_text : the same as TOML text.

    Examples
    --------
    >>> from meanfield.workbench.toml_config import MODEL_EXAMPLE, model_description
    >>> model_description(MODEL_EXAMPLE)["domain"]
    {'dim': 1, 'type': 'Box'}
    >>> model_description("no/such/model.toml")
    Traceback (most recent call last):
        ...
    meanfield.errors.MissingFileError: model: the description file no/such/model.toml does not exist
    """
    if value.startswith("{"):
        d = json.loads(value)
    else:
        path = Path(value)
        if not path.exists():
            raise MissingFileError(f"{name}: the description file {path} does not exist")
        if not path.is_file():
            raise InputError(f"{name}: {path} is not a file (a TOML or JSON description)")
        try:
            text = path.read_text(encoding="utf-8")
            d = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (UnicodeDecodeError, ValueError) as err:  # TOMLDecodeError is a ValueError
            raise InputError(f"{name}: {path} is not a valid description file: {err}") from None
    if not isinstance(d, dict) or "type" not in d:
        raise InputError(
            f'{name}: a description is a table with a "type" (type = "Energy"), got {d!r:.80}'
        )
    return d


def model_energy(value: str, name: str = "model"):
    """The :class:`~meanfield.energy.Energy` a model field describes
    (:func:`meanfield.dynamics.description.from_dict` of :func:`model_description`).

    Parameters
    ----------
    value : str
        :func:`model_text`'s form.
    name : str
        The field's name, for a refusal.

    Returns
    -------
    meanfield.energy.Energy

    Raises
    ------
    meanfield.errors.InputError
        What :func:`model_description` or :func:`~meanfield.dynamics.description.from_dict`
        refuses (an unknown type, an unknown argument, a module that cannot be imported),
        named with ``name``.
    meanfield.errors.InputTypeError
        A description of something other than an Energy.

    See Also
    --------
    meanfield.dynamics.description.from_dict : the reader.

    Examples
    --------
    >>> from meanfield.workbench.toml_config import MODEL_EXAMPLE, model_energy
    >>> model_energy(MODEL_EXAMPLE).term_names
    ['confinement']
    >>> model_energy('{"type": "Box", "dim": 1}')
    Traceback (most recent call last):
        ...
    meanfield.errors.InputTypeError: model must describe an Energy (type = "Energy"), got type ...
    """
    from ..dynamics.description import from_dict
    from ..energy import Energy
    from ..errors import MeanfieldError

    d = model_description(value, name)
    if d.get("type") not in ("Energy", "meanfield.energy:Energy"):
        raise InputTypeError(
            f'{name} must describe an Energy (type = "Energy"), got type = {d.get("type")!r}'
        )
    try:
        energy = from_dict(d)
    except MeanfieldError as err:
        raise type(err)(f"{name}: {err}") from None
    if not isinstance(energy, Energy):  # pragma: no cover - the type was checked above
        raise InputTypeError(f"{name} must describe an Energy, got {energy!r}")
    return energy


def check_menu_left_alone(config, menu) -> None:
    """With a ``model``, every field of ``menu`` at its default (the model replaces them).

    Parameters
    ----------
    config : dataclass instance
        A configuration whose ``model`` is set.
    menu : sequence of str
        The fields the model replaces.

    Raises
    ------
    meanfield.errors.InputError
        The first field of ``menu`` set to another value than its default, named with its
        flag.

    See Also
    --------
    model_energy : the energy that replaces the menu's.

    Examples
    --------
    >>> from meanfield.workbench.config import SimulationConfig
    >>> from meanfield.workbench.toml_config import MODEL_EXAMPLE
    >>> SimulationConfig(model=MODEL_EXAMPLE, kernel="log")
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: kernel (--kernel) = 'log' builds the menu's energy, which model ...
    """
    defaults = {f.name: f.default for f in fields(config)}
    for name in menu:
        value = getattr(config, name)
        if value != defaults[name]:
            raise InputError(
                f"{name} (--{name.replace('_', '-')}) = {value!r} builds the menu's energy, "
                "which model replaces: set it in the model's description, or drop model"
            )
