r"""Plain-parameter description of a particle simulation, shared by the CLI, TOML files and
sweeps: one place that turns names and numbers into an :class:`~meanfield.energy.Energy`.

:class:`SimulationConfig` is what ``meanfield simulate`` and its TOML file fill; its
:meth:`~SimulationConfig.spec` is the typed run specification
(:class:`~meanfield.dynamics.spec.RunSpec`) that :func:`~meanfield.dynamics.langevin.simulate`
reads.  Every configuration here (and :class:`~meanfield.workbench.problems.ComparisonConfig`,
``meanfield compare``'s) is a frozen dataclass, checked when made, that reads and writes
TOML (``from_toml``, ``to_toml``: :class:`~meanfield.workbench.toml_config.TomlConfig`).
Each field of :class:`SimulationConfig` is declared by a :class:`~meanfield.contract.Param` in
its metadata: its check (the run parameters it shares
with a spec are declared once, :data:`meanfield.contract.registry.RUN_PARAMS`), its flag's help text
(:data:`meanfield.cli.parser.HELP`) and its row in the docs' tables come from it.

The energy built from a configuration is (THEORY §2)

.. math::

    H_N(\Omega) = \frac{c}{2N} \sum_i |\omega_i|^2 \;-\; A(\mu_N)
    \;+\; \frac{\lambda}{N^2} \sum_{i \ne j} k(\omega_i - \omega_j),

with c = ``confinement``, A the ``alignment`` (linear, risk or normalised) and k the
``kernel``; each term is left out when its coefficient is zero (or ``alignment = "none"``).

That menu is a preset.  The ``model`` field replaces it by any energy the plain-data
description can express (:func:`meanfield.to_dict`: the package's own terms and kernels by
name — ``DoubleWellPotential``, ``Torus``, ``PeriodicPairInteraction`` … — and a user's class
by its import path ``"module:Class"``): a ``[simulate.model]`` table of a TOML file, the
path of a description file, or its JSON text.

Examples
--------
>>> from meanfield.workbench.config import SimulationConfig
>>> cfg = SimulationConfig(n_particles=16, n_data=20, n_steps=5)
>>> [type(t).__name__ for t in cfg.build_energy().terms]
['LinearAlignment', 'PairInteraction']
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from .._validation import check_choice, check_device
from ..contract import RUN_METHODS, RUN_PARAMS, Param, check_declared, declare_fields
from ..errors import InputError
from .data_files import load_xy
from .toml_config import (
    MODEL_EXAMPLE,
    TomlConfig,
    check_menu_left_alone,
    config_field,
    model_energy,
    model_text,
)

# torch and the computational modules (energy, kernels, particles, ...) are imported where
# they are used, so that ``meanfield --help`` (whose flags are this dataclass's fields) and
# ``import meanfield.workbench.config`` load no torch.
if TYPE_CHECKING:  # pragma: no cover
    import torch

    from ..energy import Energy


ALIGNMENTS = ("linear", "risk", "normalised", "none")


def __getattr__(name: str):
    """``CONFIG_METHODS``: the dynamics a configuration can run, the integrators of
    :func:`meanfield.dynamics.langevin.simulate` (:data:`meanfield.dynamics.langevin.METHODS`) and
    ``"hmc"`` (:func:`meanfield.dynamics.hmc.sample_hmc`); computed on first use (it imports
    torch)."""
    if name == "CONFIG_METHODS":
        return _config_methods()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _config_methods() -> tuple[str, ...]:
    from ..dynamics.langevin import METHODS

    return (*METHODS, "hmc")


#: With an unsoftened singular pair kernel the initial particles are at least
#: START_SPACING · N^(−1/p) / bandwidth apart (after the projection onto the domain): half
#: the spacing of N points on the scale 1/bandwidth of the initial law.  A pair 1e-3 apart
#: under the log kernel (a random draw of 50 does this for 2 seeds in 6) has a force so large
#: that every MALA proposal overshoots and the chain never moves.
START_SPACING = 0.5
#: Redraw rounds before a start that cannot be separated is refused.
START_MAX_ROUNDS = 100


#: The fields of :class:`SimulationConfig` that only HMC reads.
_HMC_FIELDS = ("trajectory_length", "n_warmup", "target_accept", "step_size")

#: The fields of :class:`SimulationConfig` that build the menu's energy (and its data): a
#: ``model`` replaces them all, so a value other than the default beside it is refused.
MENU_FIELDS = (
    "data",
    "data_file",
    "n_data",
    "data_dim",
    "feature",
    "alignment",
    "alpha",
    "kernel",
    "s",
    "softening",
    "width",
    "lam",
    "confinement",
    "domain",
    "radius",
    "dtype",
    "device",
)


def _simulation_example(name, value) -> dict:
    """The fields a valid :class:`SimulationConfig` needs beside ``name = value`` (for the
    contract's generated tests): HMC for the HMC fields, the Riesz kernel with ``s``, a
    confinement with every alignment (``alignment = "none"`` needs one)."""
    if name in _HMC_FIELDS:
        return {"method": "hmc", **({"step_size": 0.1} if name == "n_warmup" else {})}
    if name == "s":
        return {} if value is None else {"kernel": "riesz"}
    if name == "kernel" and value == "riesz":
        return {"s": 1.0}
    if name == "alignment":
        return {"confinement": 1.0}
    return {}


@declare_fields(example=_simulation_example)
@dataclass(frozen=True)
class SimulationConfig(TomlConfig):
    """Every parameter of one particle run (defaults: the README's main job).

    Data: ``data`` names a synthetic task of :mod:`meanfield.learners.tasks` (drawn with ``n_data``
    points in ``data_dim`` dimensions and ``seed``), or ``data_file`` points at a ``.npz``
    (arrays ``X``, ``y``) or ``.csv`` (features then label in the last column).

    Every field is also a ``meanfield simulate`` flag and a key of a TOML file
    (:meth:`from_toml`); all are validated on construction, before any work.

    Parameters
    ----------
    data : str, default "two_moons"
        Synthetic task (:data:`meanfield.learners.tasks.TASKS`).
    data_file : str, optional
        ``.npz`` or ``.csv`` file of training data, instead of ``data``.
    n_data : int, default 400
        Training points of the synthetic task (≥ 2).
    data_dim : int, default 2
        Input dimension d of the synthetic task.
    feature : {"positive", "fourier", "softplus"}, default "fourier"
        Feature map φ(x; ω); fixes the particle dimension p (d + 1 for ``fourier``).
    alignment : {"linear", "risk", "normalised", "none"}, default "linear"
        Form of the alignment A (THEORY §2).
    alpha : float, default 1
        Scale α of the ideal kernel αT in the risk form.
    kernel : str, default "coulomb"
        Pair kernel, one of :data:`meanfield.kernels.KERNEL_NAMES`.
    s : float, optional
        Riesz exponent; required with ``kernel = "riesz"`` and refused otherwise.
    softening : float, default 0.05
        ε of the softened kernel (|z|² + ε²), ≥ 0.
    width : float, default 1
        Width of the Gaussian kernel.
    lam : float, default 0.05
        Interaction strength λ ≥ 0 (0 drops the pair term).
    confinement : float, default 0
        c ≥ 0 of the potential V = c|ω|²/2.
    domain : {"box", "ball"}, default "box"
        Shape of the domain 𝒲.
    radius : float, default 4
        R > 0 of the domain.
    n_particles : int, default 256
        N.
    init : {"gaussian", "orthogonal"}, default "gaussian"
        Sampler of the initial particles.
    bandwidth : float, default 1
        σ of the initial law ω ~ N(0, σ⁻² I).
    method : str, default "langevin"
        Dynamics, one of :data:`CONFIG_METHODS`: :data:`meanfield.dynamics.langevin.METHODS` or
        ``"hmc"`` (:func:`meanfield.dynamics.hmc.sample_hmc`; ``n_steps`` recorded trajectories
        after ``n_warmup``, and ``eta`` unused).
    regime : {"mean-field", "coulomb-gas"}, default "mean-field"
        β_N = β or β_N = βN.
    eta : float, default 0.05
        Step size η > 0 (time t = η · steps).
    beta : float, default 1000
        Inverse temperature β > 0.
    n_steps : int, default 400
        Number of steps.
    record_every : int, optional
        Steps between records (default: about 100 records).
    interaction_batch : int, optional
        Random-batch size B ≥ 2 for the pair force.
    data_batch : int, optional
        Mini-batch of data points for the alignment force.
    dtype : {"float64", "float32"}, default "float64"
        Floating-point type of the energy and the particles.
    device : str, default "cpu"
        Torch device.
    seed : int, default 0
        Seeds the data, the initial particles and the noise; in [0, 2⁶³ − 1].
    trajectory_length : float, optional
        HMC only: Hamiltonian time T > 0 of a trajectory (default 1).
    n_warmup : int, optional
        HMC only: warm-up trajectories ≥ 0 adapting the leapfrog step (default 200; 0 needs
        ``step_size``).
    target_accept : float, optional
        HMC only: target mean acceptance probability in (0, 1) of the warm-up (default 0.8).
    step_size : float, optional
        HMC only: initial (or, with ``n_warmup = 0``, fixed) leapfrog step ε > 0 (default:
        Hoffman–Gelman's heuristic).
    model : str or dict, optional
        Any energy instead of the menu's: its description (:func:`meanfield.to_dict` form;
        built-in names, a user's class as ``"module:Class"``) as a TOML table
        (``[simulate.model]``), the path of a TOML or JSON file holding one, or its JSON text
        (stored as JSON text, keys sorted; :meth:`to_toml` writes it back as the table).  The
        fields of :data:`MENU_FIELDS` (data, feature, alignment, kernel, confinement, domain,
        dtype, device …) are then refused at other values than their defaults; the initial
        particles are drawn as :meth:`initial_particles` says.

    Raises
    ------
    meanfield.errors.InputError
        A value out of range or an unknown name; the message names the field.  With a
        ``model``: a description that cannot be read or built (named ``model``), or a menu
        field set beside it.
    meanfield.errors.InputTypeError
        A value of the wrong type: a boolean for a number (``beta = true`` in TOML is not
        β = 1), a float for a count.
    meanfield.errors.SizeLimitError
        The run's estimated work (``n_steps`` × N × (pair partners + data points), see
        :func:`meanfield.dynamics.spec.estimate_work`) exceeds the ceiling
        :data:`meanfield.dynamics.spec.MAX_WORK` (10¹³ evaluations; the environment variable
        ``MEANFIELD_MAX_WORK`` raises it).

    See Also
    --------
    meanfield.dynamics.spec.RunSpec : the typed run specification :meth:`spec` returns.
    meanfield.dynamics.langevin.simulate : the run it describes.
    meanfield.workbench.problems.ComparisonConfig : the configuration of ``meanfield compare``.
    meanfield.workbench.toml_config.TomlConfig : reading and writing it as TOML.

    References
    ----------
    .. [1] M. Badiei Khuzani, S. Honnaiah, A. Islam, A. Cozzi and A. Bagherjeiran, "A Coulomb
       particle model for learning kernel attention in Transformers" (the paper; the model of
       THEORY §1-3; summary in ``seeds/``).

    Examples
    --------
    >>> from meanfield.workbench.config import SimulationConfig
    >>> SimulationConfig(n_particles=0)
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: n_particles (N) must be an integer >= 1, got 0
    >>> ds = SimulationConfig(n_particles=16, n_data=20, n_steps=5, seed=1).run()
    >>> ds["omega"].dims, ds["omega"].shape
    (('time', 'particle', 'dim'), (6, 16, 3))
    """

    data: str = config_field(
        "two_moons",
        Param(
            "data",
            "string",
            "synthetic task for the alignment data: two_moons, xor, "
            "checkerboard, radial, gaussian_mixture (default two_moons)",
            examples=("two_moons",),
        ),
    )
    data_file: str | None = config_field(
        None,
        Param(
            "data_file",
            "string",
            "read the data from a .npz (arrays X, y) or .csv (label last) instead",
            optional=True,
        ),
    )
    n_data: int = config_field(
        400, Param("n_data", "int", "number of data points drawn from the synthetic task", low=2)
    )
    data_dim: int = config_field(
        2, Param("data_dim", "int", "input dimension d of the synthetic task", low=1)
    )
    feature: str = config_field(
        "fourier",
        Param(
            "feature",
            "choice",
            "feature map phi(x; omega): fourier (sqrt2 cos(w.x + b), "
            "p = d + 1), positive (exp(w.x - |x|^2/2), p = d) or softplus (p = d)",
            choices=("positive", "fourier", "softplus"),
        ),
    )
    alignment: str = config_field(
        "linear",
        Param(
            "alignment",
            "choice",
            "alignment form: linear (U-statistic), risk (with --alpha), "
            "normalised (Cristianini) or none",
            choices=ALIGNMENTS,
        ),
    )
    alpha: float = config_field(
        1.0,
        Param(
            "alpha",
            "real",
            "scale of the ideal kernel alpha*T in the risk form",
            low=0.0,
            low_open=True,
        ),
    )
    kernel: str = config_field(
        "coulomb",
        Param(
            "kernel",
            "string",
            "pair kernel: coulomb (Riesz s = p - 2), riesz (needs --s), log, gaussian, quadratic",
            examples=("coulomb", "log"),
        ),
    )
    s: float | None = config_field(
        None,
        Param(
            "s",
            "real",
            "Riesz exponent s of --kernel riesz, required with it (any real; "
            "s < p unless --softening > 0)",
            optional=True,
            label="s (Riesz exponent)",
        ),
    )
    softening: float = config_field(
        0.05, Param("softening", "real", "softening length epsilon of the pair kernel", low=0.0)
    )
    width: float = config_field(
        1.0,
        Param("width", "real", "width of the gaussian pair kernel", low=0.0, low_open=True),
    )
    lam: float = config_field(
        0.05,
        Param(
            "lam",
            "real",
            "interaction strength lambda (0 switches the pair term off)",
            low=0.0,
            label="lam (lambda)",
        ),
    )
    confinement: float = config_field(
        0.0,
        Param(
            "confinement",
            "real",
            "strength of the confining potential |omega|^2/2 (0 = none)",
            low=0.0,
        ),
    )
    domain: str = config_field(
        "box",
        Param(
            "domain",
            "choice",
            "particle domain: box [-R, R]^p or ball B(0, R)",
            choices=("box", "ball"),
        ),
    )
    radius: float = config_field(
        4.0,
        Param(
            "radius",
            "real",
            "R, half-width of the box or radius of the ball",
            low=0.0,
            low_open=True,
            label="radius (R)",
        ),
    )
    n_particles: int = config_field(
        256, replace(RUN_PARAMS["n_particles"], doc="number of particles N")
    )
    init: str = config_field(
        "gaussian",
        Param(
            "init",
            "choice",
            "initial particles: gaussian or orthogonal (blocks of orthogonal "
            "rows); with --softening 0 and a singular kernel they are drawn >= 0.5 N^(-1/p) / "
            "bandwidth apart",
            choices=("gaussian", "orthogonal"),
        ),
    )
    bandwidth: float = config_field(
        1.0,
        Param(
            "bandwidth",
            "real",
            "initial particles omega ~ N(0, bandwidth^-2 I)",
            low=0.0,
            low_open=True,
        ),
    )
    method: str = config_field(
        "langevin",
        replace(
            RUN_PARAMS["method"],
            choices=(*RUN_METHODS, "hmc"),
            doc="langevin (Algorithm 1, projected), mala (exact Gibbs sampler) or hmc (exact, "
            "Hamiltonian Monte Carlo with reflection: --trajectory-length, --n-warmup, "
            "--target-accept, --step-size)",
        ),
    )
    regime: str = config_field("mean-field", RUN_PARAMS["regime"])
    eta: float = config_field(
        0.05,
        replace(RUN_PARAMS["eta"], doc="step size eta of langevin and mala; time t = eta * steps"),
    )
    beta: float = config_field(1000.0, RUN_PARAMS["beta"])
    n_steps: int = config_field(
        400,
        replace(
            RUN_PARAMS["n_steps"],
            doc="number of steps (hmc: recorded trajectories, after the warm-up)",
        ),
    )
    record_every: int | None = config_field(
        None,
        replace(
            RUN_PARAMS["record_every"],
            doc="record positions and energies every this many steps (default ~100 records)",
        ),
    )
    interaction_batch: int | None = config_field(
        None,
        replace(
            RUN_PARAMS["interaction_batch"],
            doc="random-batch size B for the pair term (O(N B) per step)",
        ),
    )
    data_batch: int | None = config_field(
        None,
        replace(
            RUN_PARAMS["data_batch"], doc="mini-batch size of data rows per step for the alignment"
        ),
    )
    dtype: str = config_field(
        "float64",
        Param(
            "dtype",
            "choice",
            "float64 (default, for the science) or float32 (speed)",
            choices=("float64", "float32"),
        ),
    )
    device: str = config_field(
        "cpu", Param("device", "string", "torch device: cpu or cuda", examples=("cpu",))
    )
    seed: int = config_field(
        0,
        replace(
            RUN_PARAMS["seed"], doc="seed of every random number (data, initial particles, noise)"
        ),
    )
    trajectory_length: float | None = config_field(
        None,
        Param(
            "trajectory_length",
            "real",
            "hmc only: Hamiltonian time T of one trajectory (default 1)",
            low=0.0,
            low_open=True,
            optional=True,
        ),
    )
    n_warmup: int | None = config_field(
        None,
        Param(
            "n_warmup",
            "int",
            "hmc only: warm-up trajectories adapting the leapfrog step "
            "(default 200; 0 needs --step-size)",
            low=0,
            optional=True,
        ),
    )
    target_accept: float | None = config_field(
        None,
        Param(
            "target_accept",
            "level",
            "hmc only: target mean acceptance probability of the warm-up (default 0.8)",
            optional=True,
        ),
    )
    step_size: float | None = config_field(
        None,
        Param(
            "step_size",
            "real",
            "hmc only: initial (fixed with --n-warmup 0) leapfrog step "
            "(default: Hoffman-Gelman heuristic)",
            low=0.0,
            low_open=True,
            optional=True,
        ),
    )

    model: str | None = config_field(
        None,
        Param(
            "model",
            "string",
            "the energy as a description (meanfield.to_dict form: built-in names, user "
            "classes as 'module:Class'): a TOML or JSON file of one, its JSON text, or a "
            "[simulate.model] table; replaces the menu's energy (feature, alignment, kernel, "
            "confinement, domain, data, dtype)",
            optional=True,
            examples=(MODEL_EXAMPLE,),
        ),
    )

    TABLE = "simulate"
    TABLE_FIELDS = ("model",)

    def __post_init__(self):
        from ..kernels import KERNEL_NAMES

        # a TOML table (a dict) is stored as its JSON text: the field is a string throughout
        object.__setattr__(self, "model", model_text(self.model))
        # every field by its declaration (the run parameters a RunSpec shares are declared
        # once, meanfield.contract.registry.RUN_PARAMS), then what involves several fields
        check_declared(self)
        self._check_hmc()
        check_choice("kernel", self.kernel, KERNEL_NAMES)
        if self.kernel == "riesz":
            if self.s is None:
                raise InputError(
                    "kernel 'riesz' needs its exponent: set s (--s), any real number "
                    "(s < p unless softening > 0)"
                )
        elif self.s is not None:
            raise InputError(
                f"s (Riesz exponent) is used only with kernel 'riesz', not {self.kernel!r}; "
                "drop it or set kernel = 'riesz'"
            )
        object.__setattr__(self, "device", check_device("device", self.device))
        if self.model is not None:
            check_menu_left_alone(self, MENU_FIELDS)
            self._check_work(model_energy(self.model))  # the model built once, checked
            return
        if self.alignment == "none" and self.confinement == 0.0:
            raise InputError(
                "with alignment 'none' set confinement > 0: the energy needs a term "
                "that depends on the particle positions alone"
            )
        self._check_work()

    def _check_work(self, energy: Energy | None = None) -> None:
        """The run's estimated work against the ceiling (:func:`meanfield.dynamics.spec.
        check_work`), from the fields alone (or the model's ``energy``), before any data is
        read or particle drawn.

        HMC counts one gradient per trajectory (its leapfrog steps are adapted during the
        run: a lower bound), and a ``data_file`` counts no data points until it is read (the
        :class:`~meanfield.dynamics.spec.RunSpec` of :meth:`spec` counts them)."""
        from ..dynamics.spec import check_work, estimate_work

        N = self.n_particles
        if energy is None:
            paired = self.lam > 0
            n_data = 0
            if self.alignment != "none":
                n_data = self.data_batch or (0 if self.data_file else self.n_data)
        else:  # the model's own terms: a pair term has a kernel, an alignment term data
            paired = any(hasattr(t, "kernel") for t in energy.terms)
            n_data = self.data_batch or energy.n_data() or 0
        partners = (self.interaction_batch or N) - 1 if paired else 0
        steps = self.n_steps
        if self.method == "hmc":
            steps += 200 if self.n_warmup is None else self.n_warmup
        evaluations = 2 if self.method == "mala" else 1
        work = estimate_work(
            n_steps=steps,
            n_particles=N,
            partners=partners,
            n_data=n_data,
            evaluations=evaluations,
        )
        check_work(
            work,
            detail=f"{steps} steps x {evaluations} x ({N} particles x (1 + {partners} pair "
            f"partners + {n_data} data points) + the fixed cost of a step)",
        )

    def _check_hmc(self) -> None:
        """The HMC fields (in range by their declarations): refused with the other methods
        (as ``s`` without the Riesz kernel), and no stochastic batches for the exact sampler."""
        if self.method != "hmc":
            for name in _HMC_FIELDS:
                if getattr(self, name) is not None:
                    raise InputError(
                        f"{name} (--{name.replace('_', '-')}) is used only with method 'hmc', "
                        f"not {self.method!r}; drop it or set method = 'hmc'"
                    )
            return
        for name in ("interaction_batch", "data_batch"):
            if getattr(self, name) is not None:
                raise InputError(
                    f"method 'hmc' samples the exact Gibbs law: it takes no {name}; drop it"
                )
        if self.n_warmup == 0 and self.step_size is None:
            raise InputError("n_warmup = 0 needs a step_size (--step-size): nothing adapts it")

    # --- building blocks --------------------------------------------------------------------
    def load_data(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Training inputs X (n, d) and labels y (n,); (None, None) without an alignment term,
        where the particles live in R^p with p given by ``data_dim`` and the feature.

        Returns
        -------
        X : numpy.ndarray, shape (n, d), or None
        y : numpy.ndarray, shape (n,), or None
            None too with a ``model``, whose alignment terms hold their own data.

        Examples
        --------
        >>> from meanfield.workbench.config import SimulationConfig
        >>> X, y = SimulationConfig(n_data=20).load_data()
        >>> X.shape, y.shape
        ((20, 2), (20,))
        """
        if self.alignment == "none" or self.model is not None:
            return None, None
        if self.data_file:
            return load_xy(self.data_file)
        from ..learners.tasks import make_task

        split = make_task(self.data, n_train=self.n_data, n_test=1, d=self.data_dim, seed=self.seed)
        return split.X_train, split.y_train

    def build_energy(self, X=None, y=None) -> Energy:
        """The :class:`~meanfield.energy.Energy` of this configuration.

        Parameters
        ----------
        X : numpy.ndarray, shape (n, d), optional
            Training inputs (default: :meth:`load_data`).
        y : numpy.ndarray, shape (n,), optional
            Labels (±1 or class ids).

        Returns
        -------
        meanfield.energy.Energy
            Terms: the confinement (if c > 0), the alignment (unless ``"none"``), the pair
            interaction (if λ > 0); on the domain of dimension p = the feature's particle
            dimension, with this dtype and device.  With a ``model``: the energy it
            describes (``X`` and ``y`` unused).

        Examples
        --------
        >>> from meanfield.workbench.config import SimulationConfig
        >>> energy = SimulationConfig(n_data=20, domain="ball", confinement=1.0).build_energy()
        >>> energy.domain
        Ball(dim=3, radius=4.0)
        >>> model = {"type": "Energy", "terms": [{"type": "DoubleWellPotential"}],
        ...          "domain": {"type": "Box", "dim": 1, "half_width": 2.0}}
        >>> [type(t).__name__ for t in SimulationConfig(model=model).build_energy().terms]
        ['DoubleWellPotential']
        """
        if self.model is not None:
            return model_energy(self.model)
        import torch

        from ..domains import make_domain
        from ..energy import (
            Energy,
            LinearAlignment,
            NormalisedAlignment,
            PairInteraction,
            QuadraticPotential,
            RiskAlignment,
        )
        from ..features import get_feature_map
        from ..kernels import make_kernel

        dtype = torch.float64 if self.dtype == "float64" else torch.float32
        if X is None:
            X, y = self.load_data()
        d = self.data_dim if X is None else X.shape[1]
        p = get_feature_map(self.feature).particle_dim(d)
        terms = []
        if self.confinement > 0:
            terms.append(QuadraticPotential(self.confinement))
        if self.alignment != "none":
            cls = {
                "linear": LinearAlignment,
                "risk": RiskAlignment,
                "normalised": NormalisedAlignment,
            }[self.alignment]
            kw = {"alpha": self.alpha} if self.alignment == "risk" else {}
            terms.append(cls(X, y, self.feature, **kw))
        if self.lam > 0:
            kernel = make_kernel(
                self.kernel, dim=p, s=self.s, softening=self.softening, width=self.width
            )
            terms.append(PairInteraction(kernel, self.lam))
        return Energy(
            terms, make_domain(self.domain, p, self.radius), dtype=dtype, device=self.device
        )

    def initial_particles(self, data_dim: int) -> torch.Tensor:
        """N initial particles from ``init`` and ``bandwidth``, seeded by ``seed``.

        With an unsoftened singular pair kernel (``softening = 0``, λ > 0: log, Coulomb, Riesz
        s > −2) the start is separated: any particle closer than :meth:`start_spacing` to an
        earlier one, after the projection onto the domain, is redrawn from the same law (a
        fresh draw seeded from ``seed`` and the round), up to :data:`START_MAX_ROUNDS` rounds.
        A near-coincident pair under such a kernel would freeze MALA (every proposal
        rejected) and make the start energy infinite.  Other kernels keep the plain draw.

        With a ``model`` the draw is that of the feature map of the model's first alignment
        term (in its data's dimension), or, without one, iid N(0, bandwidth⁻² I_p) in the
        dimension p of the model's domain; the spacing follows the model's pair kernels.

        Parameters
        ----------
        data_dim : int
            Input dimension d of the data (the particle dimension follows from the feature);
            unused with a ``model``.

        Returns
        -------
        torch.Tensor, shape (n_particles, p)

        Raises
        ------
        meanfield.errors.InputError
            The particles cannot be separated (too many for the domain and the spacing).

        Examples
        --------
        >>> from meanfield.workbench.config import SimulationConfig
        >>> from meanfield.ot.spacing import min_pair_distance
        >>> SimulationConfig(n_particles=16).initial_particles(2).shape  # fourier: p = d + 1
        torch.Size([16, 3])
        >>> cfg = SimulationConfig(alignment="none", confinement=1.0, kernel="log", softening=0.0,
        ...     n_particles=50, feature="positive", seed=2)
        >>> min_pair_distance(cfg.initial_particles(1)) >= cfg.start_spacing(1)  # 0.5 / 50
        True
        """
        from ..domains import make_domain
        from ..features import get_feature_map

        if self.model is not None:
            return self._model_start(self.build_energy())
        p = get_feature_map(self.feature).particle_dim(data_dim)
        domain = make_domain(self.domain, p, self.radius)
        return self._draw_start(self.feature, data_dim, domain)

    def _model_start(self, energy: Energy) -> torch.Tensor:
        """The initial particles of a model: drawn for the feature map of its first
        alignment term (its data's dimension), else iid N(0, bandwidth⁻² I_p) in the
        dimension p of its domain."""
        for term in energy.terms:
            if getattr(term, "feature", None) is not None and hasattr(term, "X_np"):
                return self._draw_start(term.feature.name, term.X_np.shape[1], energy.domain)
        return self._draw_start("positive", energy.domain.dim, energy.domain)

    def _draw_start(self, feature: str, data_dim: int, domain) -> torch.Tensor:
        """N particles for ``feature`` in ``data_dim``, separated (after the projection onto
        ``domain``) when the pair kernel is singular: :meth:`initial_particles`."""
        from ..features import sample_initial_particles
        from ..ot.spacing import too_close

        draw = {"method": self.init, "bandwidth": self.bandwidth}
        omega = sample_initial_particles(
            feature, self.n_particles, data_dim, seed=self.seed, **draw
        )
        spacing = self.start_spacing(omega.shape[1])
        if spacing == 0.0:
            return omega
        project = domain.project
        for round_ in range(START_MAX_ROUNDS):
            bad = too_close(project(omega).numpy(), spacing)
            if bad.size == 0:
                return omega
            seed = int(np.random.SeedSequence([self.seed, round_ + 1]).generate_state(1)[0])
            fresh = sample_initial_particles(feature, self.n_particles, data_dim, seed=seed, **draw)
            omega[bad] = fresh[bad]
        if self.model is None:
            where = f"the {self.domain} of radius {self.radius:g}"
            kernel, fix = repr(self.kernel), "raise radius, or set softening > 0"
        else:
            where, fix = repr(domain), "widen the model's domain, or soften its kernel"
            kernel = repr(self._pair_kernel(omega.shape[1]))
        raise InputError(
            f"n_particles = {self.n_particles} initial particles could not be drawn "
            f"{spacing:.3g} apart in {where} after {START_MAX_ROUNDS} rounds (needed by the "
            f"unsoftened singular kernel {kernel}): lower n_particles, {fix}"
        )

    def start_spacing(self, p: int) -> float:
        """The smallest distance between initial particles: :data:`START_SPACING` ·
        N^(−1/p) / bandwidth with an unsoftened singular pair kernel and λ > 0, else 0.

        Parameters
        ----------
        p : int
            Particle dimension.

        Returns
        -------
        float

        Examples
        --------
        >>> from meanfield.workbench.config import SimulationConfig
        >>> SimulationConfig(kernel="log", softening=0.0, n_particles=50).start_spacing(1)
        0.01
        >>> SimulationConfig(n_particles=50).start_spacing(1)  # softened: no spacing
        0.0
        """
        kernel = self._pair_kernel(p)
        if kernel is None or not kernel.is_singular:
            return 0.0
        return START_SPACING * self.n_particles ** (-1.0 / p) / self.bandwidth

    def _pair_kernel(self, p: int):
        """The kernel of the pair term (None without one): the menu's (λ > 0), or the first
        singular one of the model's pair terms of positive strength (else its first)."""
        if self.model is None:
            from ..kernels import make_kernel

            if self.lam == 0.0:
                return None
            return make_kernel(
                self.kernel, dim=p, s=self.s, softening=self.softening, width=self.width
            )
        kernels = [
            t.kernel
            for t in self.build_energy().terms
            if hasattr(t, "kernel") and getattr(t, "lam", 1.0) != 0.0
        ]
        singular = [k for k in kernels if k.is_singular]
        return (singular or kernels or [None])[0]

    def _model(self):
        """The energy and the initial particles of this configuration."""
        if self.model is not None:
            energy = self.build_energy()
            return energy, self._model_start(energy)
        X, y = self.load_data()
        energy = self.build_energy(X, y)
        return energy, self.initial_particles(self.data_dim if X is None else X.shape[1])

    def spec(self):
        """The :class:`~meanfield.dynamics.spec.RunSpec` of this configuration: the energy and
        the initial particles built, the run parameters copied (Langevin and MALA; ``method =
        "hmc"`` runs through :meth:`run`).

        Returns
        -------
        meanfield.dynamics.spec.RunSpec

        Raises
        ------
        meanfield.errors.InputError
            ``method = "hmc"``: HMC is not a :func:`~meanfield.dynamics.langevin.simulate`
            run.

        Examples
        --------
        >>> from meanfield.workbench.config import SimulationConfig
        >>> spec = SimulationConfig(n_particles=16, n_data=20, n_steps=5, beta=10.0).spec()
        >>> spec.n_particles, spec.beta, spec.energy.term_names
        (16, 10.0, ['alignment', 'interaction'])
        """
        from ..dynamics.spec import RunSpec

        if self.method == "hmc":
            raise InputError(
                "method 'hmc' samples through meanfield.dynamics.hmc.sample_hmc, not from a "
                "RunSpec: call SimulationConfig.run()"
            )
        energy, omega0 = self._model()
        return RunSpec(
            energy=energy,
            initial=omega0,
            beta=self.beta,
            eta=self.eta,
            n_steps=self.n_steps,
            regime=self.regime,
            method=self.method,
            interaction_batch=self.interaction_batch,
            data_batch=self.data_batch,
            seed=self.seed,
        )

    def run(self, *, progress: bool = False):
        """Build everything and simulate; the dataset's attributes hold this whole config.

        Parameters
        ----------
        progress : bool, default False
            Show a progress bar.

        Returns
        -------
        xarray.Dataset
            What :func:`meanfield.dynamics.langevin.simulate` returns (of :meth:`spec`), or
            :func:`meanfield.dynamics.hmc.sample_hmc` for ``method = "hmc"``, with every field
            of this configuration as a ``config_<name>`` attribute.

        Examples
        --------
        >>> from meanfield.workbench.config import SimulationConfig
        >>> ds = SimulationConfig(n_particles=16, n_data=20, n_steps=5).run()
        >>> int(ds.attrs["config_n_particles"]), ds.sizes["time"]
        (16, 6)
        """
        from ..dynamics.langevin import simulate

        if self.method == "hmc":
            return self._run_hmc(*self._model(), progress)
        return simulate(
            self.spec(),
            record_every=self.record_every,
            progress=progress,
            extra_attrs={f"config_{k}": v for k, v in self.as_dict().items()},
        )

    def _run_hmc(self, energy: Energy, omega0, progress: bool):
        """:func:`meanfield.dynamics.hmc.sample_hmc` with this configuration (``n_steps``
        recorded trajectories; unset HMC fields take the sampler's defaults)."""
        from ..dynamics.hmc import sample_hmc

        given = {
            k: getattr(self, k)
            for k in ("trajectory_length", "n_warmup", "target_accept", "step_size")
            if getattr(self, k) is not None
        }
        return sample_hmc(
            energy,
            omega0,
            beta=self.beta,
            n_samples=self.n_steps,
            regime=self.regime,
            record_every=self.record_every,
            seed=self.seed,
            progress=progress,
            extra_attrs={f"config_{k}": v for k, v in self.as_dict().items()},
            **given,
        )
