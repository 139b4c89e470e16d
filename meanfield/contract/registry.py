"""The registry of declared entry points: :func:`~meanfield.contract.declare` (a function)
and :func:`~meanfield.contract.declare_fields` (a dataclass) check an entry point's declared
parameters before its body runs and register its contract in :data:`REGISTRY`;
:func:`~meanfield.contract.registered` imports the package and returns every declared entry
point, :func:`~meanfield.contract.generated_cases` the counts of the generated tests that
docs/validation.rst reports. The run parameters that several entry points share
(:data:`RUN_PARAMS`, with :data:`RUN_REGIMES` and :data:`RUN_METHODS`) are declared here once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from ..errors import InputError, InputTypeError
from .kinds import REQUIRED
from .params import Contract, Param

#: Every declared entry point, by its qualified name (``module:function``).
REGISTRY: dict[str, Contract] = {}


#: The regimes of the particle dynamics: β_N = β or β_N = β N
#: (:data:`meanfield.dynamics.chains.REGIMES`, declared here without importing torch).
RUN_REGIMES = ("mean-field", "coulomb-gas")
#: The integrators of :func:`meanfield.dynamics.langevin.simulate`
#: (:data:`meanfield.dynamics.spec.METHODS`).
RUN_METHODS = ("langevin", "mala")

#: The run parameters that a run specification (:class:`meanfield.dynamics.spec.RunSpec`),
#: the particle runners (``simulate``, ``sample_hmc``) and the plain configurations
#: (``SimulationConfig``) share, declared once: name -> :class:`Param`. An entry point that
#: takes one as "None: the spec's" declares ``dataclasses.replace(RUN_PARAMS[name],
#: optional=True)``. They live here, not in :mod:`meanfield.dynamics.spec`, because the
#: configurations of the command line must not import torch.
RUN_PARAMS: dict[str, Param] = {
    p.name: p
    for p in (
        Param(
            "beta", "real", "inverse temperature beta", low=0.0, low_open=True,
            label="beta (inverse temperature)",
        ),
        Param(
            "eta", "real", "step size eta of the particles; time t = eta * steps", low=0.0,
            low_open=True, units="time", label="eta (step size)",
        ),
        Param("n_steps", "int", "number of steps; the final time is eta * n_steps", low=1),
        Param("n_particles", "int", "number N of particles", low=1, label="n_particles (N)"),
        Param(
            "regime", "choice", "mean-field (beta_N = beta) or coulomb-gas (beta_N = beta N)",
            choices=RUN_REGIMES,
        ),
        Param(
            "method", "choice", "projected Langevin (Algorithm 1) or the exact MALA sampler",
            choices=RUN_METHODS,
        ),
        Param("seed", "seed", "seed of every random number of the run"),
        Param(
            "interaction_batch", "int", "random-batch size B of the pair force (Langevin only)",
            low=2, optional=True, label="interaction_batch (B)",
        ),
        Param(
            "data_batch", "int", "mini-batch of data rows for the alignment force (Langevin "
            "only; at most the number of data points)", low=2, optional=True,
        ),
        Param(
            "record_every", "int", "steps between records (None: about 100 records; the "
            "first and last are recorded)", low=1, optional=True,
        ),
        Param("record_positions", "flag", "store every record's positions (else the last)"),
        Param("progress", "flag", "show a progress bar"),
    )
}  # fmt: skip


def declare(*params: Param, example: Callable[[], dict] | None = None):
    """Declare a function's parameters: checked, converted and registered before its body runs.

    Parameters
    ----------
    *params : Param
        The declared parameters; each must be a parameter of the function.
    example : callable, optional
        ``example(name, value)``: the other keyword arguments of a cheap valid call with
        ``name = value`` (used by the generated tests; by default only the declared
        parameters are set, the others are placeholders the body never sees).

    Returns
    -------
    callable
        The decorator. The wrapped function has a ``contract`` attribute
        (:class:`Contract`), and is registered in :data:`~meanfield.contract.registry.REGISTRY`.

    See Also
    --------
    declare_fields : the same for a dataclass.
    registered : every declared entry point.

    References
    ----------
    MacIver, D. R., Hatfield-Dodds, Z. et al. (2019). Hypothesis: a new approach to
    property-based testing. J. Open Source Softw. 4(43), 1891 (the generated invalid values).

    Examples
    --------
    >>> @declare(Param("level", "level", "confidence level"))
    ... def width(level=0.95):
    ...     return level
    >>> width(), width(level=0.5)
    (0.95, 0.5)
    >>> width(1.5)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: level must be a number in (0, 1), got 1.5
    """

    def wrap(func):
        sig = inspect.signature(func)
        missing = [p.name for p in params if p.name not in sig.parameters]
        if missing:
            raise InputError(f"{func.__qualname__} declares parameters it does not take: {missing}")
        disagree = [
            p.name
            for p in params
            if p.default is not REQUIRED and sig.parameters[p.name].default != p.default
        ]
        if disagree:  # declared once: the signature's default and the Param's must agree
            raise InputError(
                f"{func.__qualname__} declares defaults its signature does not have: {disagree}"
            )
        defaults = {
            k: v.default
            for k, v in sig.parameters.items()
            if v.default is not inspect.Parameter.empty
        }
        contract = Contract(
            f"{func.__module__}:{func.__qualname__}", params, defaults, example, func
        )

        @functools.wraps(func)
        def checked(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            declared = {k: v for k, v in bound.arguments.items() if k in contract.by_name}
            bound.arguments.update(contract.check(declared))
            return contract.func(*bound.args, **bound.kwargs)

        checked.contract = contract
        contract.wrapper = checked
        REGISTRY[contract.entry] = contract
        return checked

    return wrap


def declare_fields(cls=None, *, example: Callable[[str, object], dict] | None = None):
    """Register the contract of a dataclass whose fields carry a ``Param`` in their metadata.

    Apply it above ``@dataclass``; the class then has a ``contract`` attribute and is in
    :data:`~meanfield.contract.registry.REGISTRY` (so the generated tests construct it with
    each field replaced by each invalid value). Its ``__post_init__`` checks the fields by
    :func:`check_declared`.

    Parameters
    ----------
    cls : type
        The dataclass (``@declare_fields`` without arguments), or None
        (``@declare_fields(example=...)``).
    example : callable, optional
        ``example(name, value)``: the other fields of a cheap valid construction with
        ``name = value`` (required fields, and fields the value needs beside it).

    Returns
    -------
    type or callable
        The class, or the decorator.

    See Also
    --------
    declare : the same for a function.
    check_declared : what ``__post_init__`` calls.

    References
    ----------
    MacIver, D. R., Hatfield-Dodds, Z. et al. (2019). Hypothesis: a new approach to
    property-based testing. J. Open Source Softw. 4(43), 1891 (the generated invalid values).

    Examples
    --------
    >>> from dataclasses import dataclass, field
    >>> @declare_fields
    ... @dataclass
    ... class Run:
    ...     n: int = field(default=1, metadata={"param": Param("n", "int", "steps", low=1)})
    ...     def __post_init__(self):
    ...         check_declared(self)
    >>> Run(2).n, Run.contract.entry.endswith(":Run")
    (2, True)
    >>> Run(0)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: n must be an integer >= 1, got 0
    """

    def wrap(klass):
        contract = contract_of(klass)
        contract.example, contract.wrapper = example, klass
        klass.contract = contract
        REGISTRY[contract.entry] = contract
        return klass

    return wrap if cls is None else wrap(cls)


def check_declared(obj) -> None:
    """Check and convert, in place, the declared fields of the dataclass instance ``obj``
    (frozen or not), in the order of the fields; what ``__post_init__`` calls first.

    Raises
    ------
    meanfield.errors.InputTypeError, meanfield.errors.InputError
        As :meth:`Param.check`, naming the first field refused.

    See Also
    --------
    declare_fields : registers the dataclass.

    Examples
    --------
    >>> from dataclasses import dataclass, field
    >>> @dataclass(frozen=True)
    ... class Step:
    ...     eta: float = field(default=0.1, metadata={"param": Param("eta", "real", "step")})
    ...     def __post_init__(self):
    ...         check_declared(self)
    >>> Step(1).eta
    1.0
    """
    for param in contract_of(type(obj)).params:
        object.__setattr__(obj, param.name, param.check(getattr(obj, param.name)))


def contract_of(obj) -> Contract:
    """The contract of a declared function, or of a dataclass whose fields carry a ``Param``
    in their metadata (``field(default=..., metadata={"param": Param(...)})``).

    See Also
    --------
    declare : a function's contract.
    declare_fields : a dataclass's.

    Examples
    --------
    >>> from dataclasses import dataclass, field
    >>> @dataclass
    ... class Config:
    ...     beta: float = field(default=1.0, metadata={"param": Param("beta", "real", "")})
    >>> [p.name for p in contract_of(Config).params]
    ['beta']
    """
    if isinstance(getattr(obj, "contract", None), Contract):
        return obj.contract
    import dataclasses

    if dataclasses.is_dataclass(obj):
        fields_ = [f for f in dataclasses.fields(obj) if "param" in f.metadata]
        defaults = {f.name: f.default for f in fields_ if f.default is not dataclasses.MISSING}
        return Contract(
            f"{obj.__module__}:{obj.__qualname__}", [f.metadata["param"] for f in fields_], defaults
        )
    raise InputTypeError(f"{obj!r} declares no contract")


def registered() -> dict[str, Contract]:
    """Every declared entry point of the package:
    :data:`~meanfield.contract.registry.REGISTRY` after importing each of its modules
    (declarations run at import; a module whose optional dependency is missing is skipped,
    and so are the entry points it declares).

    Returns
    -------
    dict
        ``module:qualname`` -> :class:`Contract`, for entry points of :mod:`meanfield`.

    See Also
    --------
    generated_cases : their counts.
    declare : how an entry point joins.

    References
    ----------
    MacIver, D. R., Hatfield-Dodds, Z. et al. (2019). Hypothesis: a new approach to
    property-based testing. J. Open Source Softw. 4(43), 1891 (the generated invalid values).

    Examples
    --------
    >>> "meanfield.pde.solver:solve" in registered()
    True
    """
    import importlib
    import pkgutil
    from pathlib import Path

    # the package's folder, not ``import meanfield``: no module imports the front door
    for info in pkgutil.walk_packages([str(Path(__file__).parents[1])], "meanfield."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional dependency (transformers, finufft, ...) is missing
            continue
    return {k: c for k, c in sorted(REGISTRY.items()) if k.startswith("meanfield.")}


def generated_cases() -> dict[str, int]:
    """The counts of the generated contract tests (what docs/validation.rst reports).

    Returns
    -------
    dict
        ``entry_points``, ``parameters``, ``invalid`` (deterministic invalid values, each
        refused by name before any work) and ``edge`` (valid edge values, each accepted).

    See Also
    --------
    registered : the entry points counted.

    References
    ----------
    MacIver, D. R., Hatfield-Dodds, Z. et al. (2019). Hypothesis: a new approach to
    property-based testing. J. Open Source Softw. 4(43), 1891 (the generated invalid values).

    Examples
    --------
    >>> counts = generated_cases()
    >>> counts["invalid"] > counts["parameters"] >= counts["entry_points"] > 0
    True
    """
    contracts = registered().values()
    params = [p for c in contracts for p in c.params]
    return {
        "entry_points": len(contracts),
        "parameters": len(params),
        "invalid": sum(len(p.invalid_values()) for p in params),
        "edge": sum(len(p.edge_values()) for p in params),
    }
