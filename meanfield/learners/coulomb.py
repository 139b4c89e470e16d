"""Random features learned as Coulomb (Riesz) particles by projected Langevin dynamics."""

from __future__ import annotations

import math
import time

import numpy as np

from meanfield._validation import check_choice, check_int, check_positive
from meanfield.domains import Box
from meanfield.dynamics.langevin import simulate
from meanfield.energy import (
    CentredAlignment,
    Energy,
    LinearAlignment,
    NormalisedAlignment,
    PairInteraction,
    Potential,
    RiskAlignment,
)
from meanfield.features import sample_initial_particles
from meanfield.kernels import Riesz
from meanfield.ot.spacing import min_pair_distance

from ._common import FEATURE, fourier_features
from .base import _FeatureLearner
from .directions import DirectionFrame
from .metric import kernel_alignment

__all__ = ["ALIGNMENTS", "CoulombFeatures", "FrequencyConfinement"]


class CoulombFeatures(_FeatureLearner):
    r"""Random features learned as Coulomb (Riesz) particles by projected Langevin dynamics.

    Particles (frequencies and phase) start from the Gaussian-kernel draw of
    :class:`RandomFourierFeatures` and follow Algorithm 1 of THEORY §3
    (:func:`meanfield.dynamics.langevin.simulate`) on

    .. math::

        H_N(\Omega) = \frac1N \sum_i V(\omega_i) - A_N(\Omega)
        + \frac{\lambda}{N^2} \sum_{i \ne j} k_s(\omega_i - \omega_j)
        + \frac{\lambda_F}{N^2} \sum_{i \ne j} (u_i \cdot u_j)^2,

    A the kernel–target alignment of :mod:`meanfield.energy` chosen by ``alignment``
    (linear U-statistic :class:`~meanfield.energy.LinearAlignment`, the negative risk
    :class:`~meanfield.energy.RiskAlignment`, Cristianini's
    :class:`~meanfield.energy.NormalisedAlignment`, or the centred
    :class:`~meanfield.energy.CentredAlignment`), k_s the Riesz kernel
    (:class:`meanfield.kernels.Riesz`) softened by ε, V an optional confinement, and the last
    term an optional repulsion of the frequency directions u_i = w_i/|w_i|
    (:class:`~meanfield.learners.DirectionFrame`, ``direction_repulsion`` = λ_F; 0 by default).
    ``lam=0`` drops the repulsion (alignment only). The defaults are the settings of the first
    synthetic study (``paper_repro/synthetic``, linear alignment), its data mini-batches of
    250 rows included.

    Cost: each step reads ``data_batch`` rows, so a fit costs
    O(n_steps · (min(n, data_batch) · m + m²) · p) for the dynamics, whatever n, plus two
    full-data evaluations of the alignment (``alignment_init_``, ``alignment_``), O(n m p).
    ``data_batch=None`` (every row at every step) costs O(n_steps · n · m · p): at m = 256,
    n = 10⁴, d = 10 about 20 times the default (10-12 s against 0.5-0.65 s on a loaded 2-core
    machine, where scikit-learn's RBFSampler fit + transform took 0.05-0.07 s;
    ``benchmarks/bench_learners.py --vs-sklearn --full-batch``).

    ``confinement="prior"``: V(ω) = |w|²/(2 β_N) on the frequencies w = ω[:d] (standardised
    units, phase free), β_N the regime's inverse temperature (β, or β N). The Gibbs law
    ∝ exp(−β_N N H_N) of the confinement alone is then exactly the RFF prior N(0, I) ⊗ U(phase),
    and the alignment tilts it: with the linear form and λ = 0 the mean-field stationary law is
    prior · exp(β a(ω)) / Z, absolutely continuous w.r.t. the prior. At β = 1, V is the negative
    log-density of the prior, |w|²/(2 σ_w²) with σ_w = 1/σ the prior's frequency scale in the
    original units; β sets the strength of the tilt.

    ``early_stopping=True``: a stratified ``validation_fraction`` of the training rows is held
    out of the dynamics; the particles are checkpointed ``n_checkpoints`` times along the run and
    the checkpoint with the largest held-out *centred* alignment (:func:`kernel_alignment`,
    scale- and label-mean-free) is kept ("restore best": the run is not cut short, so the whole
    held-out curve is available in ``checkpoint_val_alignment_``).

    Convention: the dynamics run on standardised inputs x/σ (σ the bandwidth), so particles
    live in the box [−R, R]^(d+1) of standardised frequencies (initially N(0, I)) and phase,
    and η, R, λ, s, ε do not depend on the scale of the data. ``omega_`` is reported in the
    original units (frequencies divided by σ); distances (``min_distance_*``) are in
    standardised units, where the repulsion acts.

    Parameters
    ----------
    n_features : int >= 1
        Number m = N of particles.
    bandwidth : float > 0 or "median"
        σ of the initial Gaussian-kernel draw.
    lam : float >= 0
        Repulsion strength λ.
    s : float or None
        Riesz exponent; None means Coulomb, s = p − 2 with p = d + 1 (the default 1 is Coulomb
        for d = 2 and a longer-ranged Riesz kernel above).
    softening : float >= 0
        Softening length ε of the Riesz kernel.
    beta : float > 0
        Inverse temperature β.
    eta : float > 0
        Step size η.
    n_steps : int >= 1
        Number of Langevin steps.
    radius : float > 0 or None
        Half-width R of the box in standardised coordinates (x / σ, initial frequencies
        N(0, I)); None means 3π.
    regime : {"mean-field", "coulomb-gas"}
        Temperature scaling β_N = β or β N (THEORY §3).
    data_batch : int >= 2 or None, default 250
        Data rows per step, drawn afresh (without replacement) at each step from the
        ``random_state`` stream; with n <= ``data_batch`` rows, or None, every row at every
        step. The mini-batch alignment is the U-statistic on the batch, an unbiased estimate of
        the full one. Changed from None (all rows) to 250, the first synthetic study's value.
        Against the full-batch fits on the package's synthetic tasks (m = 256, median
        bandwidth, seeds 0-2, means over seeds): the held-out ridge error moved by −0.001 to
        +0.003 (within the seed spread) on all five tasks at n = 2000 and on radial, XOR and
        the mixture at n = 10⁴; the held-out Cristianini alignment by −5 % to 0 at n = 2000
        (two moons −5.3 %, checkerboard −4.5 %) and −1 % to +2 % at n = 10⁴ (the centred one
        −5 % to −1 % and −1 % to 0). Fits on more than 250 rows give other results than with
        the former default; ``data_batch=None`` gives those back.
    alignment : {"linear", "risk", "normalised", "centred"}
        Alignment form of the energy (THEORY §2 forms 1-3, and the centred alignment).
    confinement : None or "prior"
        None: no potential (the box alone confines). "prior": V = |w|²/(2 β_N), above.
    direction_repulsion : float >= 0, default 0
        λ_F of the frame potential of the frequency directions
        (:class:`~meanfield.learners.DirectionFrame`, softening 0.1): pushes the law of the
        directions towards isotropy (stops the axis collapse) and leaves the norms |w| alone.
    early_stopping : bool
        Keep the checkpoint with the best held-out centred alignment.
    validation_fraction : float in (0, 1)
        Share of the training rows held out when ``early_stopping``.
    n_checkpoints : int >= 1 or None
        Checkpoints along the run (every n_steps // n_checkpoints steps, plus step 0); None
        means 10 with ``early_stopping`` and none (start and end only) without.
    random_state : int, Generator, RandomState or None
        Seed of the initial draw, the validation split and the Langevin noise.

    Attributes
    ----------
    omega_ : ndarray of shape (m, d + 1)
        Final (or, with early stopping, best) particles, original units.
    omega_init_ : ndarray of shape (m, d + 1)
        Initial particles (the RFF draw with the same seed), original units.
    feature_weights_ : ndarray of shape (m,)
        1/√m.
    alignment_init_, alignment_ : float
        The energy's alignment term, −H_align (the risk form: minus the risk), at the start and
        the end of the run, on the rows the dynamics saw.
    energy_init_, energy_ : float
        H_N before and after.
    min_distance_init_, min_distance_ : float
        Smallest pairwise particle distance before and after (of ``omega_``;
        :func:`meanfield.ot.spacing.min_pair_distance`, NaN for a single particle).
    checkpoint_steps_ : ndarray of shape (K,)
        Steps of the checkpoints (only with checkpoints).
    checkpoints_ : ndarray of shape (K, m, d + 1)
        Particles at the checkpoints, original units (only with checkpoints).
    checkpoint_val_alignment_ : ndarray of shape (K,)
        Held-out centred alignment at each checkpoint (only with early stopping).
    best_step_ : int
        Step of the particles kept (n_steps without early stopping).
    validation_index_ : ndarray of int
        Training rows held out of the dynamics (only with early stopping).
    energy_description_ : dict
        ``Energy.describe()`` of the energy the dynamics ran on (terms and parameters).
    classes_ : ndarray
    bandwidth_, radius_, s_ : float
    n_features_in_ : int
    fit_time_ : float
        Seconds for building the energy, running the dynamics and (with early stopping)
        scoring the checkpoints.

    See Also
    --------
    RandomFourierFeatures : the label-blind draw it starts from.
    ImportanceSampledFeatures : the other label-aware learner (reweighting, no dynamics).
    meanfield.dynamics.langevin.simulate : the dynamics.
    meanfield.energy.LinearAlignment, meanfield.kernels.Riesz : the energy's two parts.
    meanfield.learners.diagnostics.moved : how far the particles moved.

    References
    ----------
    .. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.
    .. [2] A. Sinha and J. C. Duchi, "Learning kernels with random features", NeurIPS 2016.
    .. [3] S. Serfaty, *Coulomb Gases and Ginzburg–Landau Vortices*, Zurich Lectures in
       Advanced Mathematics, EMS, 2015.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(40, 2))
    >>> y = np.where(X[:, 0] > 0, 1, -1)
    >>> cf = CoulombFeatures(n_features=8, n_steps=20, random_state=0).fit(X, y)
    >>> cf.omega_.shape, cf.best_step_, cf.transform(X).shape
    ((8, 3), 20, (40, 8))
    """

    def __init__(
        self,
        n_features=64,
        *,
        bandwidth=1.0,
        lam=0.3,
        s=1.0,
        softening=0.1,
        beta=1e3,
        eta=1.0,
        n_steps=300,
        radius=None,
        regime="mean-field",
        data_batch=250,
        alignment="linear",
        confinement=None,
        direction_repulsion=0.0,
        early_stopping=False,
        validation_fraction=0.2,
        n_checkpoints=None,
        random_state=None,
    ):
        self.n_features = n_features
        self.bandwidth = bandwidth
        self.lam = lam
        self.s = s
        self.softening = softening
        self.beta = beta
        self.eta = eta
        self.n_steps = n_steps
        self.radius = radius
        self.regime = regime
        self.data_batch = data_batch
        self.alignment = alignment
        self.confinement = confinement
        self.direction_repulsion = direction_repulsion
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_checkpoints = n_checkpoints
        self.random_state = random_state

    def _check_params(self):
        super()._check_params()
        check_positive("lam (lambda)", self.lam, allow_zero=True)
        if self.s is not None:
            s = float(self.s)
            if not math.isfinite(s):
                raise ValueError(f"s must be a finite real number or None, got {self.s!r}")
        check_positive("softening (epsilon)", self.softening, allow_zero=True)
        check_positive("beta", self.beta)
        check_positive("eta", self.eta)
        check_int("n_steps", self.n_steps, minimum=1)
        if self.radius is not None:
            check_positive("radius (R)", self.radius)
        check_choice("regime", self.regime, ("mean-field", "coulomb-gas"))
        if self.data_batch is not None:
            check_int("data_batch", self.data_batch, minimum=2)
        check_choice("alignment", self.alignment, tuple(ALIGNMENTS))
        if self.confinement is not None:
            check_choice("confinement", self.confinement, ("prior",))
        check_positive("direction_repulsion (lambda_F)", self.direction_repulsion, allow_zero=True)
        if not isinstance(self.early_stopping, (bool, np.bool_)):
            raise ValueError(f"early_stopping must be True or False, got {self.early_stopping!r}")
        f = check_positive("validation_fraction", self.validation_fraction)
        if f >= 1:
            raise ValueError(
                f"validation_fraction must be in (0, 1), got {self.validation_fraction!r}"
            )
        if self.n_checkpoints is not None:
            check_int("n_checkpoints", self.n_checkpoints, minimum=1)
            if self.n_checkpoints > self.n_steps:
                raise ValueError(
                    f"n_checkpoints must be in [1, n_steps = {self.n_steps}], "
                    f"got {self.n_checkpoints}"
                )

    def fit(self, X, y):
        """Run the Langevin dynamics on (X, y).

        Parameters
        ----------
        X : array of shape (n, d)
            Training inputs.
        y : array of shape (n,)
            Class labels.

        Returns
        -------
        self
            Fitted: ``omega_``, the alignment and energy records, checkpoints if asked.

        Examples
        --------
        With early stopping, a fifth of the rows is held out and the particles are checkpointed
        at steps 0, 5 and 10; the best checkpoint on the held-out rows is kept:

        >>> import numpy as np
        >>> from meanfield.learners import CoulombFeatures
        >>> X = np.random.default_rng(0).normal(size=(40, 2))
        >>> y = np.where(X[:, 0] > 0, 1, -1)
        >>> cf = CoulombFeatures(n_features=6, n_steps=10, early_stopping=True, n_checkpoints=2,
        ...                      random_state=0).fit(X, y)
        >>> cf.checkpoint_steps_.tolist(), len(cf.validation_index_), cf.omega_.shape
        ([0, 5, 10], 8, (6, 3))
        >>> bool(cf.best_step_ in cf.checkpoint_steps_)
        True
        """
        X, t, t0, seed, rng = self._fit_start(X, y)
        m, d, sigma = int(self.n_features), X.shape[1], self.bandwidth_
        # The dynamics run on standardised inputs x / σ, where the initial law is N(0, I) and
        # eta, radius, lam, s, softening are free of the data scale; ω[:d] is scaled back below.
        R = self.radius if self.radius is not None else 3.0 * math.pi
        self.radius_ = float(R)
        self.s_ = float(self.s) if self.s is not None else float(d - 1)  # Coulomb: p − 2
        domain = Box(d + 1, self.radius_)
        omega0 = domain.project(sample_initial_particles(FEATURE, m, d, bandwidth=1.0, seed=seed))
        Z, val = X / sigma, None
        if self.early_stopping:
            fit_idx, val_idx = _stratified_split(t, self.validation_fraction, rng)
            self.validation_index_ = val_idx
            Z, t, val = Z[fit_idx], t[fit_idx], (Z[val_idx], t[val_idx])
        energy = self._energy(Z, t, m, domain)
        self.energy_description_ = energy.describe()
        n_ck = self.n_checkpoints
        if n_ck is None and self.early_stopping:
            n_ck = 10
        ds = self._run(energy, omega0, seed, n_ck, len(Z))
        scale = np.concatenate([np.full(d, 1.0 / sigma), [1.0]])
        omega, best = self._keep(ds, n_ck, scale, val)
        self.fit_time_ = time.perf_counter() - t0
        # the recorded terms are on the rows the dynamics saw: alignment = −term
        self.alignment_init_ = float(-ds["energy_alignment"].isel(time=0))
        self.alignment_ = float(-ds["energy_alignment"].isel(time=best))
        self.energy_init_ = float(ds["energy"].isel(time=0))
        self.energy_ = float(ds["energy"].isel(time=best))
        # distances are measured where the repulsion acts: standardised coordinates
        self.min_distance_init_ = min_pair_distance(omega0.numpy())
        self.min_distance_ = min_pair_distance(omega)
        self.omega_init_ = omega0.numpy() * scale
        self.omega_ = omega * scale
        self.feature_weights_ = np.full(m, 1.0 / math.sqrt(m))
        return self

    def _energy(self, Z, t, m: int, domain) -> Energy:
        """H_N on standardised inputs Z: alignment, optional prior confinement, repulsion(s)."""
        terms = [ALIGNMENTS[self.alignment](Z, t, feature=FEATURE)]
        beta_N = self.beta * (m if self.regime == "coulomb-gas" else 1)
        if self.confinement == "prior":
            terms.append(FrequencyConfinement(1.0 / beta_N))
        if self.lam > 0 and m > 1:
            terms.append(PairInteraction(Riesz(self.s_, softening=self.softening), lam=self.lam))
        if self.direction_repulsion > 0 and m > 1:
            terms.append(DirectionFrame(float(self.direction_repulsion)))
        return Energy(terms, domain=domain)

    def _run(self, energy, omega0, seed: int, n_ck, n_rows: int):
        """The projected Langevin run, recording ``n_ck`` checkpoints (None: start and end)."""
        batch = self.data_batch if self.data_batch is None or self.data_batch < n_rows else None
        n_steps = int(self.n_steps)
        return simulate(
            energy,
            omega0,
            eta=self.eta,
            beta=self.beta,
            n_steps=n_steps,
            regime=self.regime,
            seed=seed,
            data_batch=batch,
            # step 0 and the last step are always recorded
            record_every=n_steps if n_ck is None else max(1, n_steps // n_ck),
            record_positions=n_ck is not None,
        )

    def _keep(self, ds, n_ck, scale, val):
        """Particles kept (standardised) and their record index; sets the checkpoint attributes.

        With early stopping (``val`` = held-out (Z, t)) the checkpoint of largest held-out
        centred alignment, else the last record.
        """
        steps = np.asarray(ds["step"].values, dtype=int)
        best = len(steps) - 1
        if n_ck is None:
            omega = np.asarray(ds["omega_final"].values, dtype=float)
        else:
            path = np.asarray(ds["omega"].values, dtype=float)  # (K, m, p), standardised
            self.checkpoint_steps_ = steps
            self.checkpoints_ = path * scale
            if val is not None:
                Z_val, t_val = val
                self.checkpoint_val_alignment_ = np.array(
                    [
                        kernel_alignment(fourier_features(Z_val, w), t_val, centred=True)
                        for w in path
                    ]
                )
                best = int(np.argmax(self.checkpoint_val_alignment_))
            omega = path[best]
        self.best_step_ = int(steps[best])
        return omega, best


#: The alignment forms of :class:`CoulombFeatures` (terms of :mod:`meanfield.energy`).
ALIGNMENTS = {
    "linear": LinearAlignment,
    "risk": RiskAlignment,
    "normalised": NormalisedAlignment,
    "centred": CentredAlignment,
}


class FrequencyConfinement(Potential):
    r"""V(ω) = strength · |ω[:d]|²/2: a Gaussian confinement of the frequencies, phase free.

    .. math::

        V(w, b) = \frac{\text{strength}}{2} |w|^2, \qquad \nabla V(w, b) = \text{strength}\,(w, 0).

    For ``"fourier"`` particles ω = (w, b) ∈ R^(d+1); the phase b (last coordinate) feels no
    force, so with strength 1/β_N the Gibbs law exp(−β_N Σ_i V(ω_i)) is the RFF prior
    N(0, I_d) ⊗ uniform phase on the box (see :class:`CoulombFeatures`).

    Parameters
    ----------
    strength : float > 0
        Stiffness of the confinement (1/β_N for the RFF prior).

    See Also
    --------
    CoulombFeatures : its ``confinement`` option.
    meanfield.energy.QuadraticPotential : the same potential on every coordinate.

    Examples
    --------
    >>> import torch
    >>> V = FrequencyConfinement(2.0)
    >>> float(V.V(torch.tensor([[1.0, 2.0, 3.0]])))  # the phase 3.0 is free: 2 (1 + 4) / 2
    5.0
    """

    def __init__(self, strength: float):
        self.strength = check_positive("strength", strength)

    def V(self, omega):
        """V(ω) = strength · |ω[:d]|²/2, the last coordinate (the phase) left out.

        Parameters
        ----------
        omega : tensor of shape (..., p)
            Particles (frequencies, then the phase).

        Returns
        -------
        tensor of shape (...)
            The potential of each particle.

        Examples
        --------
        >>> import torch
        >>> FrequencyConfinement(1.0).V(torch.tensor([[3.0, 4.0, 9.0], [0.0, 0.0, 1.0]]))
        tensor([12.5000,  0.0000])
        """
        return 0.5 * self.strength * (omega[..., :-1] ** 2).sum(-1)

    def gradV(self, omega):
        """∇V(ω) = strength · (ω[:d], 0): no force on the phase.

        Parameters
        ----------
        omega : tensor of shape (..., p)
            Particles.

        Returns
        -------
        tensor of shape (..., p)
            The gradient, last coordinate 0.

        Examples
        --------
        >>> import torch
        >>> FrequencyConfinement(2.0).gradV(torch.tensor([[1.0, 2.0, 3.0]]))
        tensor([[2., 4., 0.]])
        """
        g = self.strength * omega
        g[..., -1] = 0.0
        return g

    def describe(self):
        """Name and strength, as recorded in ``energy_description_``.

        Returns
        -------
        dict
            ``{"potential": "frequency_prior", "strength": strength}``.

        Examples
        --------
        >>> FrequencyConfinement(0.5).describe()
        {'potential': 'frequency_prior', 'strength': 0.5}
        """
        return {"potential": "frequency_prior", "strength": self.strength}


def _stratified_split(t, fraction: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """Indices (fit, validation) with about ``fraction`` of every class held out (>= 1 each).

    Raises
    ------
    ValueError
        If a class has fewer than 2 rows, or either part would be smaller than 2 rows.
    """
    fit, val = [], []
    for c in np.unique(t):
        idx = np.flatnonzero(t == c)
        if len(idx) < 2:
            raise ValueError(
                f"early_stopping needs >= 2 training rows per class; class {c} has {len(idx)}"
            )
        idx = rng.permutation(idx)
        k = min(len(idx) - 1, max(1, int(round(fraction * len(idx)))))
        val.append(idx[:k])
        fit.append(idx[k:])
    fit, val = np.sort(np.concatenate(fit)), np.sort(np.concatenate(val))
    if len(fit) < 2 or len(val) < 2:
        raise ValueError(
            f"early_stopping with validation_fraction={fraction} leaves {len(fit)} rows for the "
            f"dynamics and {len(val)} held out; both must be >= 2"
        )
    return fit, val
