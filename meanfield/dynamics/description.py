r"""One plain-data description of the model objects: :func:`to_dict` and :func:`from_dict`.

A description is a tree of dicts, lists, strings, numbers and booleans (what JSON and TOML
hold): each object is a dict whose ``"type"`` names its class and whose other keys are the
keyword arguments that rebuild it,

.. code-block:: python

    {"type": "Riesz", "s": 0.0, "softening": 0.05}

so ``from_dict(to_dict(obj))`` is an equal object (the same description, bit for bit in
every number).  It covers the domains (:class:`~meanfield.domains.Box`,
:class:`~meanfield.domains.Ball`), the pair kernels of :mod:`meanfield.kernels`, the energy
terms and :class:`~meanfield.energy.Energy`, the grid (:class:`~meanfield.pde.grid.Grid`), a
density on it (:class:`~meanfield.pde.field.Density`), the run specification
(:class:`~meanfield.dynamics.spec.RunSpec`, also written to TOML by
:meth:`~meanfield.dynamics.spec.RunSpec.to_toml`), and any user class.

**Names.**  The built-in classes go by their short names (:data:`BUILT_INS`); any other class
by its import path ``"module:Class"`` (``"mypackage.kernels:Yukawa"``), which
:func:`from_dict` imports, so a class defined inside a function or in ``__main__`` is
refused.  Reading a description imports the modules it names and runs their code, as
unpickling does: read only descriptions you trust.

**Arguments.**  A class's keyword arguments are the parameters of its constructor
(:func:`inspect.signature`), each read back from the attribute of the same name (the
dataclasses, ``Riesz(s, softening)`` storing ``self.s`` and ``self.softening``, ...); the
few built-ins that store an argument under another name declare where
(:data:`FIELD_READERS`: the alignment terms' ``X``, ``y`` and feature map, the energy's dtype).
A parameter without such an attribute, a ``*args``/``**kwargs`` constructor, or a value that
is not plain data (a function: :class:`~meanfield.kernels.CallableKernel`,
:class:`~meanfield.energy.CallablePotential`) is refused by name, and so is a user class
whose description does not survive the round trip (checked on every :func:`to_dict`).

**Arrays.**  A numpy array (or torch tensor) of at most :data:`MAX_ARRAY_ELEMENTS` numbers is
written inline, ``{"type": "array", "dtype": "float64", "shape": [n, d], "data": [[...]]}``
(exact: every float64 is written as the shortest decimal that reads back to the same
bits); a larger one (the data of an alignment term on a real data set) is refused with a
:class:`~meanfield.errors.SizeLimitError` that names it: keep such data in a file and build
the term in code.

Examples
--------
>>> from meanfield.domains import Box
>>> from meanfield.dynamics.description import from_dict, to_dict
>>> from meanfield.energy import Energy, PairInteraction, QuadraticPotential
>>> from meanfield.kernels import Riesz
>>> E = Energy([QuadraticPotential(), PairInteraction(Riesz(0.0, softening=0.05))], Box(1, 2.0))
>>> d = to_dict(E)
>>> d["terms"][1]
{'type': 'PairInteraction', 'kernel': {'type': 'Riesz', 's': 0.0, 'softening': 0.05}, 'lam': 1.0}
>>> to_dict(from_dict(d)) == d
True
>>> from_dict({"type": "Yukawa"})
Traceback (most recent call last):
    ...
meanfield.errors.InputError: unknown type 'Yukawa': give a built-in name (Ball, Box, ...) ...
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import re

import numpy as np
import torch

from ..errors import InputError, InputTypeError, SizeLimitError

#: The built-in classes by short name -> import path (resolved on use, so this module
#: imports none of the run machinery above it).
BUILT_INS = {
    "Box": "meanfield.domains:Box",
    "Ball": "meanfield.domains:Ball",
    "Torus": "meanfield.domains:Torus",
    "Cosine": "meanfield.kernels:Cosine",
    "PeriodicPairInteraction": "meanfield.energy:PeriodicPairInteraction",
    "Riesz": "meanfield.kernels:Riesz",
    "Coulomb": "meanfield.kernels:Coulomb",
    "Gaussian": "meanfield.kernels:Gaussian",
    "Quadratic": "meanfield.kernels:Quadratic",
    "QuadraticPotential": "meanfield.energy:QuadraticPotential",
    "DoubleWellPotential": "meanfield.energy:DoubleWellPotential",
    "PairInteraction": "meanfield.energy:PairInteraction",
    "LinearAlignment": "meanfield.energy:LinearAlignment",
    "RiskAlignment": "meanfield.energy:RiskAlignment",
    "NormalisedAlignment": "meanfield.energy:NormalisedAlignment",
    "CentredAlignment": "meanfield.energy:CentredAlignment",
    "Energy": "meanfield.energy:Energy",
    "Grid": "meanfield.pde.grid:Grid",
    "Density": "meanfield.pde.field:Density",
    "RunSpec": "meanfield.dynamics.spec:RunSpec",
}
_SHORT = {path: name for name, path in BUILT_INS.items()}

#: The largest array written inline, in elements (10⁴: a 5000 × 2 set of particles, a
#: 64 × 64 density); larger data belong in a data file.
MAX_ARRAY_ELEMENTS = 10_000

#: Classes refused by name, with the reason (they hold Python functions, not data).
REFUSED = {
    "meanfield.kernels:CallableKernel": "it wraps Python functions (kappa, dkappa)",
    "meanfield.energy:CallablePotential": "it wraps a Python function (fn)",
}


def _feature_name(term) -> str:
    from ..features import FEATURE_MAPS

    name = term.feature.name
    if type(term.feature) is not FEATURE_MAPS.get(name):
        raise InputTypeError(
            f"{type(term).__name__}.feature: the feature map {term.feature!r} is not one of "
            f"the built-in maps {tuple(FEATURE_MAPS)}; it cannot be described"
        )
    return name


_ALIGNMENT = {"X": lambda t: t.X_np, "y": lambda t: t.y_np, "feature": _feature_name}

#: Where a built-in class keeps a constructor argument that is not an attribute of the same
#: name: class path -> {argument: reader(obj) -> value}.  ``"Density"`` lists its arguments
#: (``check`` is an option of the constructor, not data).
FIELD_READERS = {
    "meanfield.energy:LinearAlignment": _ALIGNMENT,
    "meanfield.energy:NormalisedAlignment": _ALIGNMENT,
    "meanfield.energy:CentredAlignment": _ALIGNMENT,
    "meanfield.energy:RiskAlignment": {**_ALIGNMENT, "alpha": lambda t: t.alpha},
    "meanfield.energy:Energy": {
        "terms": lambda e: e.terms,
        "domain": lambda e: e.domain,
        "dtype": lambda e: str(e.dtype).replace("torch.", ""),
        "device": lambda e: str(e.device),
    },
    "meanfield.pde.field:Density": {"grid": lambda r: r.grid, "data": lambda r: r.data},
}
#: Arguments read back from plain data by a function: class path -> {argument: function}.
_FIELD_DECODERS = {"meanfield.energy:Energy": {"dtype": lambda s: getattr(torch, str(s))}}


def _path_of(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _import(path: str, where: str) -> type:
    """The class named ``"module:Class"``, imported; refused by name if it cannot be."""
    module_name, _, qualname = path.partition(":")
    if not module_name or not qualname:
        raise InputError(f"{where}: type {path!r} must be 'module:Class' or a built-in name")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(
            f"{where}: type {path!r}: module {module_name!r} cannot be imported ({exc})"
        ) from None
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise InputError(f"{where}: type {path!r}: {module_name!r} has no {qualname!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise InputTypeError(f"{where}: type {path!r} is not a class, got {obj!r}")
    return obj


def _signature(cls: type, where: str) -> dict:
    """The constructor's keyword parameters, name -> inspect.Parameter."""
    params = {}
    for p in inspect.signature(cls).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise InputTypeError(
                f"{where}: {cls.__qualname__} takes {p.kind.description} arguments ({p}); only "
                "a constructor of named arguments can be described"
            )
        params[p.name] = p
    return params


def _encode_array(value, where: str) -> dict:
    kind = "tensor" if isinstance(value, torch.Tensor) else "array"
    arr = value.detach().cpu().numpy() if kind == "tensor" else np.asarray(value)
    if arr.size > MAX_ARRAY_ELEMENTS:
        raise SizeLimitError(
            f"{where}: an array of shape {arr.shape} ({arr.size} elements) is above "
            f"MAX_ARRAY_ELEMENTS = {MAX_ARRAY_ELEMENTS} written inline; keep such data in a "
            "data file (numpy .npy, netCDF) and build the object in code"
        )
    if arr.dtype.kind not in "biuf":
        raise InputTypeError(
            f"{where}: an array of dtype {arr.dtype} cannot be described (numbers and "
            "booleans only)"
        )
    return {"type": kind, "dtype": str(arr.dtype), "shape": list(arr.shape), "data": arr.tolist()}


def _decode_array(d: dict, where: str):
    extra = set(d) - {"type", "dtype", "shape", "data"}
    if extra or not {"dtype", "shape", "data"} <= set(d):
        raise InputError(
            f"{where}: an {d['type']} takes the keys dtype, shape and data, got {sorted(d)}"
        )
    try:
        dtype = np.dtype(d["dtype"])
        arr = np.array(d["data"], dtype=dtype).reshape([int(n) for n in d["shape"]])
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: a bad {d['type']} ({exc})") from None
    return torch.from_numpy(arr) if d["type"] == "tensor" else arr


def _encode(value, where: str):
    """Plain data of one value (``where`` names it in a refusal)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return _encode_array(value, where)
    if isinstance(value, (list, tuple)):
        return [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if "type" in value or not all(isinstance(k, str) for k in value):
            raise InputTypeError(
                f"{where}: a dict value needs string keys other than 'type', got {list(value)}"
            )
        return {k: _encode(v, f"{where}.{k}") for k, v in value.items()}
    if inspect.isroutine(value) or isinstance(value, type):
        kind = "a class" if isinstance(value, type) else "a function"
        raise InputTypeError(f"{where}: {kind} ({value!r}) cannot be described, only data")
    return _encode_object(value, where)


def _encode_object(obj, where: str, *, verify: bool = True) -> dict:
    cls = type(obj)
    path = _path_of(cls)
    if path in REFUSED:
        raise InputTypeError(
            f"{where}: {cls.__qualname__} cannot be described: {REFUSED[path]}; write the "
            "function as a subclass (of PairKernel or Potential) in an importable module, "
            "named by its path 'module:Class'"
        )
    builtin = path in _SHORT
    if not builtin and ("<locals>" in cls.__qualname__ or cls.__module__ == "__main__"):
        raise InputTypeError(
            f"{where}: {cls.__qualname__} (module {cls.__module__}) cannot be described: "
            "define the class at the top level of an importable module, so 'module:Class' "
            "names it"
        )
    readers = FIELD_READERS.get(path, {})
    out = {"type": _SHORT.get(path, path)}
    names = list(readers) if path in FIELD_READERS else list(_signature(cls, where))
    for name in names:
        if name in readers:
            value = readers[name](obj)
        elif hasattr(obj, name):
            value = getattr(obj, name)
        else:
            raise InputTypeError(
                f"{where}: {cls.__qualname__} cannot be described: its constructor argument "
                f"{name!r} is not stored as the attribute {name!r}"
            )
        if inspect.ismethod(value) or inspect.isfunction(value):
            raise InputTypeError(
                f"{where}: {cls.__qualname__}.{name} is a function ({value!r}); only data "
                "can be described"
            )
        out[name] = _encode(value, f"{where}.{name}")
    if verify and not builtin:
        _check_round_trip(out, where)
    return out


def _same(a, b) -> bool:
    """Equal descriptions: the same types and values (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (a != a and b != b)
    return a == b


def _check_round_trip(d: dict, where: str) -> None:
    """A user class's description rebuilds an object with the same description."""
    again = _encode_object(_decode(d, where), where, verify=False)
    if not _same(again, d):
        changed = [k for k in d if k not in again or not _same(d[k], again[k])]
        raise InputTypeError(
            f"{where}: {d['type']} cannot be described: rebuilt from its description it "
            f"describes itself otherwise (arguments {changed}); its constructor must store "
            "each argument, unchanged, as the attribute of the same name"
        )


def _decode(value, where: str):
    if isinstance(value, list):
        return [_decode(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    if "type" not in value:
        return {k: _decode(v, f"{where}.{k}") for k, v in value.items()}
    name = value["type"]
    if not isinstance(name, str):
        raise InputTypeError(f"{where}: type must be a string, got {name!r}")
    if name in ("array", "tensor"):
        return _decode_array(value, where)
    if name in BUILT_INS:
        path = BUILT_INS[name]
    elif ":" in name:
        path = name
    else:
        raise InputError(
            f"unknown type {name!r}: give a built-in name ({', '.join(sorted(BUILT_INS))}) "
            f"or a class's import path 'module:Class' (at {where})"
        )
    cls = _import(path, where)
    allowed = list(FIELD_READERS.get(path) or _signature(cls, where))
    kwargs = {k: v for k, v in value.items() if k != "type"}
    unknown = [k for k in kwargs if k not in allowed]
    if unknown:
        raise InputError(f"{where}: {name} takes the arguments {allowed}, got unknown {unknown}")
    decoders = _FIELD_DECODERS.get(path, {})
    for k, v in kwargs.items():
        v = _decode(v, f"{where}.{k}")
        kwargs[k] = decoders[k](v) if k in decoders else v
    return cls(**kwargs)


def to_dict(obj) -> dict:
    """The plain-data description of a model object: ``{"type": name, **arguments}``.

    Parameters
    ----------
    obj : object
        A domain, pair kernel, energy term, :class:`~meanfield.energy.Energy`,
        :class:`~meanfield.pde.grid.Grid`, :class:`~meanfield.pde.field.Density`,
        :class:`~meanfield.dynamics.spec.RunSpec`, or an instance of a user class whose
        constructor arguments are stored as attributes of the same names.

    Returns
    -------
    dict
        Dicts, lists, str, int, float, bool and None only; ``from_dict`` rebuilds ``obj``.

    Raises
    ------
    meanfield.errors.InputTypeError
        An object that cannot be described (the message names it, its field and why): a
        function, a class not importable by ``"module:Class"``, a constructor argument not
        stored under its name, a user class that does not survive the round trip.
    meanfield.errors.SizeLimitError
        An array above :data:`MAX_ARRAY_ELEMENTS` elements.

    See Also
    --------
    from_dict : the inverse.
    toml_text : a description as a TOML document.
    meanfield.dynamics.spec.RunSpec.to_toml : a run's description as a TOML file.

    References
    ----------
    Tom Preston-Werner et al. TOML v1.0.0 (2021), https://toml.io/en/v1.0.0 (the format
    toml_text writes a description in).

    Examples
    --------
    >>> from meanfield.domains import Ball
    >>> from meanfield.dynamics.description import to_dict
    >>> to_dict(Ball(2, radius=3.0))
    {'type': 'Ball', 'dim': 2, 'radius': 3.0}
    >>> to_dict(lambda u: u)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputTypeError: obj: a function (<function <lambda> at ...>) cannot be ...
    """
    out = _encode(obj, "obj")
    if not isinstance(out, dict) or "type" not in out:
        raise InputTypeError(f"obj must be a model object, got {type(obj).__name__} {obj!r}")
    return out


def from_dict(d: dict):
    """The model object a description (:func:`to_dict`) gives.

    Parameters
    ----------
    d : dict
        ``{"type": name, **arguments}``, the arguments themselves descriptions or plain data;
        ``name`` a key of :data:`BUILT_INS` or an import path ``"module:Class"`` (imported:
        read only descriptions you trust).

    Returns
    -------
    object
        ``type(**arguments)``, checked by its constructor.

    Raises
    ------
    meanfield.errors.InputError
        An unknown type name, a module that cannot be imported, an unknown argument (the
        message names it and the allowed ones), or what the constructor refuses.
    meanfield.errors.InputTypeError
        ``d`` is not a dict with a ``"type"``, or the type is not a class.

    See Also
    --------
    to_dict : the inverse.

    References
    ----------
    Tom Preston-Werner et al. TOML v1.0.0 (2021), https://toml.io/en/v1.0.0 (the format
    toml_text writes a description in).

    Examples
    --------
    >>> from meanfield.dynamics.description import from_dict
    >>> from_dict({"type": "Riesz", "s": 1.0, "softening": 0.1})
    Riesz(s=1.0, softening=0.1)
    >>> from_dict({"type": "Box", "dim": 1, "width": 2.0})
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: d: Box takes the arguments ['dim', 'half_width'], got unknown ...
    """
    if not isinstance(d, dict) or not isinstance(d.get("type"), str):
        raise InputTypeError(f"d must be a dict with a 'type' string, got {d!r}")
    return _decode(d, "d")


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _toml_string(key)


def _toml_string(text: str) -> str:
    # a JSON string without ASCII escapes is a TOML basic string, but for DEL (not allowed raw)
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007F")


def _toml_value(value, where: str, *, rows: bool = False) -> str:
    """One TOML value, inline (``rows``: a nested list one row a line)."""
    if value is None:
        raise InputTypeError(f"{where}: TOML has no null; a None can only be left out of a table")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # the shortest decimal that reads back to the same bits; inf, nan
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        items = [_toml_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if rows and value and all(isinstance(v, list) for v in value):
            return "[\n" + "".join(f"    {item},\n" for item in items) + "]"
        return "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        items = [
            f"{_toml_key(k)} = {_toml_value(v, f'{where}.{k}')}"
            for k, v in value.items()
            if v is not None
        ]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    raise InputTypeError(f"{where}: {type(value).__name__} is not plain data")


def _toml_table(lines: list, path: list, table: dict, header: str) -> None:
    """Write ``table`` under ``header`` ("" for the root): its values, then its sub-tables
    (a dict) and arrays of tables (a list of dicts)."""
    if header:
        lines += ["", header]
    subtables = []
    for k, v in table.items():
        if v is None:
            continue  # TOML has no null: the constructor's default (None) applies on reading
        is_tables = isinstance(v, list) and v and all(isinstance(x, dict) for x in v)
        if isinstance(v, dict) or is_tables:
            subtables.append((k, v))
        else:
            lines.append(f"{_toml_key(k)} = {_toml_value(v, '.'.join(path + [k]), rows=True)}")
    for k, v in subtables:
        name = ".".join(_toml_key(p) for p in path + [k])
        if isinstance(v, dict):
            _toml_table(lines, path + [k], v, f"[{name}]")
        else:
            for item in v:
                _toml_table(lines, path + [k], item, f"[[{name}]]")


def toml_text(d: dict) -> str:
    """A description (:func:`to_dict`) as a TOML document: its nested objects as tables, a
    list of objects (an energy's terms) as an array of tables, None left out (TOML has no
    null: the constructor's default, None, applies on reading).

    Parameters
    ----------
    d : dict
        Plain data, string keys.

    Returns
    -------
    str
        Read back by :mod:`tomllib` to ``d`` less its None entries; floats are written by
        :func:`repr` (the shortest decimal that reads back to the same float64; ``inf``,
        ``nan``), so the numbers survive bit for bit.

    See Also
    --------
    to_dict : the description it writes.
    from_dict : the object a description gives.

    References
    ----------
    .. [1] TOML v1.0.0, https://toml.io/en/v1.0.0 (tables, arrays of tables, floats).

    Examples
    --------
    >>> import tomllib
    >>> from meanfield.dynamics.description import to_dict, toml_text
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.energy import PairInteraction
    >>> text = toml_text(to_dict(PairInteraction(Riesz(0.0, softening=0.05), lam=0.5)))
    >>> print(text)
    type = "PairInteraction"
    lam = 0.5
    <BLANKLINE>
    [kernel]
    type = "Riesz"
    s = 0.0
    softening = 0.05
    >>> tomllib.loads(text)["kernel"]["softening"]
    0.05
    """
    lines: list[str] = []
    _toml_table(lines, [], d, "")
    return "\n".join(lines) + "\n"


__all__ = [
    "BUILT_INS",
    "FIELD_READERS",
    "MAX_ARRAY_ELEMENTS",
    "REFUSED",
    "from_dict",
    "to_dict",
    "toml_text",
]
