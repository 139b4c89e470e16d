r"""The health checks of a Metropolis run: whether its start is spread enough for a singular
kernel (:func:`check_start_spacing`), and whether it moved across its law
(:func:`frozen_chain_warning`).

Both read only the chain machinery of :mod:`meanfield.dynamics.chains`; the samplers of
:mod:`meanfield.dynamics.langevin` run them before and after a chain.
"""

from __future__ import annotations

import torch

from ..energy import Energy
from ..errors import InputError
from .chains import LOW_ACCEPTANCE_MIN_PROPOSALS, LangevinState


def frozen_chain_warning(state: LangevinState, step_name: str, step: float) -> str | None:
    r"""The warning after a Metropolis run that did not move across its law; else None.

    A chain whose accumulated squared displacement per coordinate (``cache["travel"]``,
    summed over its steps) is below the squared spread of its particles (their variance per
    coordinate about their centre, at the last state) could not have crossed the law once,
    even as a free random walk: its records are its start.  This catches a chain that
    accepts a few per cent of its proposals (above :data:`LOW_ACCEPTANCE`) but still never
    leaves its start.  A chain accepting :data:`FROZEN_ACCEPTANCE` or more of its proposals
    is not judged: it is at most short (a healthy chain of an interacting gas moves each
    particle only locally while its empirical law is sampled).  Replicas are judged one by one
    (the worst is named); N = 1 (no spread) and runs under
    :data:`LOW_ACCEPTANCE_MIN_PROPOSALS` proposals are not judged.

    .. math::

        \sum_k \frac{1}{Np} \|\Omega_{k+1} - \Omega_k\|^2 \;<\;
        \frac{1}{Np} \sum_i \|\omega_i - \bar\omega\|^2

    Parameters
    ----------
    state : LangevinState
        The chain's last state (``cache["travel"]``, ``accepted``, ``proposed``).
    step_name : str
        The step parameter to lower ("eta", "step_size").
    step : float
        Its value.

    Returns
    -------
    str or None

    See Also
    --------
    meanfield.dynamics.chains.low_acceptance_warning : the check on the acceptance rate.
    meanfield.errors.FrozenChainWarning : the warning it returns the text of.
    meanfield.stats.integrated_autocorr_time : how long a chain that moves takes to forget.
    meanfield.dynamics.langevin.simulate : the runner that issues it after a MALA run.

    Examples
    --------
    Ten particles spread over [−1, 1] (spread² ≈ 0.41) that moved 0.01 in all:

    >>> import torch
    >>> from meanfield.dynamics.chain_checks import frozen_chain_warning
    >>> from meanfield.dynamics.chains import LangevinState
    >>> omega = torch.linspace(-1, 1, 10, dtype=torch.float64)[:, None]
    >>> s = LangevinState(omega, accepted=torch.tensor(250.0), proposed=12000,
    ...                   cache={"travel": torch.tensor(0.01)})
    >>> frozen_chain_warning(s, "eta", 0.002)[:62]
    'the chain moved a squared distance 0.01 per coordinate in 1200'
    >>> frozen_chain_warning(s.evolve(cache={"travel": torch.tensor(5.0)}), "eta", 0.002) is None
    True
    >>> frozen_chain_warning(s.evolve(accepted=torch.tensor(9000.0)), "eta", 0.002) is None
    True
    """
    travel = state.cache.get("travel")
    N = state.omega.shape[-2]
    if travel is None or N < 2 or state.proposed < LOW_ACCEPTANCE_MIN_PROPOSALS:
        return None
    omega = state.omega.detach().cpu().to(torch.float64)
    spread = ((omega - omega.mean(-2, keepdim=True)) ** 2).mean((-1, -2))
    ratio = torch.as_tensor(travel, dtype=torch.float64) / spread.clamp_min(1e-300)
    worst = int(ratio.argmin()) if ratio.ndim else None
    r = float(ratio.min())
    if r >= 1.0:
        return None
    pick = (lambda t: float(t.flatten()[worst])) if worst is not None else float
    which = f" (replica {worst})" if worst is not None else ""
    rate = pick(torch.as_tensor(state.accepted)) / state.proposed
    if rate >= FROZEN_ACCEPTANCE:
        # most proposals accepted: a short run, not a frozen chain; in an interacting gas at
        # large β_N each particle moves only locally while the empirical law is sampled
        # (the log gas of docs/cli.rst travels 0.1 of its spread in 5000 healthy steps)
        return None
    return (
        f"the chain moved a squared distance {pick(torch.as_tensor(travel)):.3g} per coordinate "
        f"in {state.proposed} proposals{which}, less than the squared spread of its particles "
        f"({pick(spread):.3g}), accepting {rate:.3f} of them: it has not travelled the width "
        f"of its law, so its records are its start, not samples; lower {step_name} (now "
        f"{step:g}): most proposals are rejected"
    )


#: A chain accepting fewer than this fraction of its proposals is judged by its movement
#: (:func:`frozen_chain_warning`); above it, rejection does not hold the chain back.
FROZEN_ACCEPTANCE = 0.2


#: A Metropolis run under an unsoftened singular pair kernel refuses a start with two
#: particles closer than START_SPACING · N^(−1/p) (the command line's start spacing,
#: ``meanfield.workbench.config.START_SPACING``, which draws its starts that far apart).
START_SPACING = 0.5


def check_start_spacing(energy: Energy, omega: torch.Tensor, method: str) -> None:
    """Refuse a Metropolis start with two particles closer than :data:`START_SPACING` ·
    N^(−1/p) under an unsoftened singular pair kernel (λ > 0).

    From such a start (a Gaussian draw of 100 particles has gaps ~1e-4) the force of the
    closest pair dominates every proposal, MALA accepts 0.000–0.001 of them and never leaves
    its start.  Other energies, and N = 1, pass.

    Parameters
    ----------
    energy : Energy
    omega : tensor (..., N, p)
        The start, every replica checked.
    method : str
        The sampler, named in the message.

    Raises
    ------
    meanfield.errors.InputError
        Names the closest distance, the spacing required and the ways out.

    See Also
    --------
    meanfield.dynamics.chains.check_finite_start : the check of U and ∇U at the start.
    meanfield.dynamics.langevin.singular_pair_terms : the pair terms this check concerns.
    meanfield.ot.spacing.min_pair_distance : the closest distance of a set of points.
    meanfield.ot.spacing.too_close : the particles to redraw for a given spacing.

    Examples
    --------
    >>> import torch
    >>> from meanfield.domains import Box
    >>> from meanfield.energy import Energy, PairInteraction
    >>> from meanfield.kernels import Riesz
    >>> from meanfield.dynamics.chain_checks import check_start_spacing
    >>> E = Energy([PairInteraction(Riesz(0.0))], Box(1, 2.0))
    >>> check_start_spacing(E, torch.tensor([[0.0], [1.0]]), "mala")  # 1 >= 0.5 · 2^(-1)
    >>> check_start_spacing(E, torch.tensor([[0.0], [0.1]]), "mala")
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: omega0: particles 0 and 1 are 0.1 apart, closer than ...
    """
    N, p = omega.shape[-2], omega.shape[-1]
    singular = [
        t
        for t in energy.terms
        if getattr(t, "kind", None) == "pair" and t.kernel.is_singular and t.lam > 0
    ]
    if N < 2 or not singular:
        return
    spacing = START_SPACING * N ** (-1.0 / p)
    x = omega.detach().cpu().to(torch.float64).reshape(-1, N, p)
    dist = torch.cdist(x, x)
    dist.diagonal(dim1=-2, dim2=-1).fill_(float("inf"))
    closest = dist.flatten(-2).min(-1)
    r = int(closest.values.argmin())
    if float(closest.values[r]) >= spacing:
        return
    i, j = divmod(int(closest.indices[r]), N)
    where = f" (replica {r})" if omega.ndim > 2 else ""
    raise InputError(
        f"omega0: particles {i} and {j} are {float(closest.values[r]):.3g} apart{where}, closer "
        f"than {spacing:.3g} = {START_SPACING:g} N^(-1/p) under the unsoftened singular kernel "
        f"{singular[0].kernel.name}: {method} would accept almost none of its proposals from "
        "there; start from spread particles (e.g. evenly spaced), give the kernel a "
        "softening > 0, or use method='langevin'"
    )


__all__ = ["FROZEN_ACCEPTANCE", "START_SPACING", "check_start_spacing", "frozen_chain_warning"]
