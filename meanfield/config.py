"""Plain-parameter description of a particle simulation, shared by the CLI, TOML files and
sweeps: one place that turns names and numbers into an :class:`~meanfield.energy.Energy`."""

from __future__ import annotations

import dataclasses
import sys
import zipfile
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

from ._validation import (
    check_array,
    check_choice,
    check_device,
    check_finite_real,
    check_int,
    check_positive,
)
from .domains import make_domain
from .energy import (
    Energy,
    LinearAlignment,
    NormalisedAlignment,
    PairInteraction,
    QuadraticPotential,
    RiskAlignment,
)
from .errors import DataFileError, InputError, MissingFileError
from .features import get_feature_map, sample_initial_particles
from .kernels import KERNEL_NAMES, make_kernel
from .particles import METHODS, REGIMES, simulate

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ALIGNMENTS = ("linear", "risk", "normalised", "none")


@dataclass
class SimulationConfig:
    """Every parameter of one particle run (defaults: the README's main job).

    Data: ``data`` names a synthetic task of :mod:`meanfield.synthetic` (drawn with ``n_data``
    points in ``data_dim`` dimensions and ``seed``), or ``data_file`` points at a ``.npz``
    (arrays ``X``, ``y``) or ``.csv`` (features then label in the last column).
    """

    data: str = "two_moons"
    data_file: str | None = None
    n_data: int = 400
    data_dim: int = 2
    feature: str = "fourier"
    alignment: str = "linear"
    alpha: float = 1.0
    kernel: str = "coulomb"
    s: float | None = None
    softening: float = 0.05
    width: float = 1.0
    lam: float = 0.05
    confinement: float = 0.0
    domain: str = "box"
    radius: float = 4.0
    n_particles: int = 256
    init: str = "gaussian"
    bandwidth: float = 1.0
    method: str = "langevin"
    regime: str = "mean-field"
    eta: float = 0.05
    beta: float = 1000.0
    n_steps: int = 400
    record_every: int | None = None
    interaction_batch: int | None = None
    data_batch: int | None = None
    dtype: str = "float64"
    device: str = "cpu"
    seed: int = 0

    def __post_init__(self):
        check_choice("alignment", self.alignment, ALIGNMENTS)
        check_choice("feature", self.feature, ("positive", "fourier", "softplus"))
        check_choice("method", self.method, METHODS)
        check_choice("regime", self.regime, REGIMES)
        check_choice("dtype", self.dtype, ("float64", "float32"))
        check_choice("init", self.init, ("gaussian", "orthogonal"))
        check_int("n_particles (N)", self.n_particles)
        check_int("n_steps", self.n_steps)
        check_int("n_data", self.n_data, minimum=2)
        check_positive("eta (step size)", self.eta)
        check_positive("beta (inverse temperature)", self.beta)
        check_positive("radius (R)", self.radius)
        check_positive("lam (lambda)", self.lam, allow_zero=True)
        check_positive("confinement", self.confinement, allow_zero=True)
        check_int("seed", self.seed, minimum=0)
        check_choice("kernel", self.kernel, KERNEL_NAMES)
        if self.kernel == "riesz":
            if self.s is None:
                raise InputError(
                    "kernel 'riesz' needs its exponent: set s (--s), any real number "
                    "(s < p unless softening > 0)"
                )
            check_finite_real("s (Riesz exponent)", self.s)
        elif self.s is not None:
            raise InputError(
                f"s (Riesz exponent) is used only with kernel 'riesz', not {self.kernel!r}; "
                "drop it or set kernel = 'riesz'"
            )
        check_positive("softening", self.softening, allow_zero=True)
        check_positive("width", self.width)
        check_positive("alpha", self.alpha)
        check_positive("bandwidth", self.bandwidth)
        for name in ("record_every", "data_batch"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name))
        if self.interaction_batch is not None:
            check_int("interaction_batch", self.interaction_batch, minimum=2)
        check_int("data_dim", self.data_dim)
        check_choice("domain", self.domain, ("box", "ball"))
        self.device = check_device("device", self.device)
        if self.alignment == "none" and self.confinement == 0.0:
            raise InputError(
                "with alignment 'none' set confinement > 0: the energy needs a term "
                "that depends on the particle positions alone"
            )

    @classmethod
    def from_toml(cls, path: str | Path, **overrides) -> SimulationConfig:
        """Read a TOML file (top-level keys or a ``[simulate]`` table), then apply overrides.

        A missing file, a folder, or a file that is not UTF-8 TOML raises a
        :class:`~meanfield.errors.MeanfieldError` naming the file, before any work.
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
        raw = raw.get("simulate", raw)
        if not isinstance(raw, dict):
            raise InputError(f"'simulate' in config file {path} must be a table ([simulate])")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(
                f"unknown key(s) in {path}: {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(known))}"
            )
        raw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**raw)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    # --- building blocks --------------------------------------------------------------------
    def load_data(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Training inputs X (n, d) and labels y (n,); (None, None) without an alignment term,
        where the particles live in R^p with p given by ``data_dim`` and the feature."""
        if self.alignment == "none":
            return None, None
        if self.data_file:
            return load_xy(self.data_file)
        from .synthetic import make_task

        split = make_task(self.data, n_train=self.n_data, n_test=1, d=self.data_dim, seed=self.seed)
        return split.X_train, split.y_train

    def build_energy(self, X=None, y=None) -> Energy:
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
        return sample_initial_particles(
            self.feature,
            self.n_particles,
            data_dim,
            method=self.init,
            bandwidth=self.bandwidth,
            seed=self.seed,
        )

    def run(self, *, progress: bool = False):
        """Build everything and simulate; the dataset's attributes hold this whole config."""
        X, y = self.load_data()
        energy = self.build_energy(X, y)
        omega0 = self.initial_particles(self.data_dim if X is None else X.shape[1])
        return simulate(
            energy,
            omega0,
            eta=self.eta,
            beta=self.beta,
            n_steps=self.n_steps,
            regime=self.regime,
            method=self.method,
            record_every=self.record_every,
            interaction_batch=self.interaction_batch,
            data_batch=self.data_batch,
            seed=self.seed,
            progress=progress,
            extra_attrs={f"config_{k}": v for k, v in self.as_dict().items()},
        )


def load_xy(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read X, y from ``.npz`` (arrays X and y) or ``.csv`` (label in the last column)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"data_file {path} does not exist")
    if path.suffix == ".npz":
        try:
            f = np.load(path)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
            msg = str(err).split(". ")[0]
            raise DataFileError(f"data_file {path} is not a readable .npz ({msg})") from None
        if not isinstance(f, np.lib.npyio.NpzFile):
            raise DataFileError(f"data_file {path} holds one array, not an .npz archive of X, y")
        with f:
            if "X" not in f or "y" not in f:
                raise ValueError(f"data_file {path} must hold arrays named 'X' and 'y'")
            X, y = f["X"], f["y"]
    elif path.suffix == ".csv":
        try:
            a = np.loadtxt(path, delimiter=",", ndmin=2)
        except ValueError as err:
            raise ValueError(f"data_file {path}: not a numeric CSV ({err})") from None
        X, y = a[:, :-1], a[:, -1]
    else:
        raise ValueError(f"data_file must end in .npz or .csv, got {path.name}")
    X = check_array(f"X in {path}", X, ndim=2)
    y = check_array(f"y in {path}", y, shape=(X.shape[0],))
    return X, y
