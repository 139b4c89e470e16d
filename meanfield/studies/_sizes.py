"""The sizes of the figure experiments: one name per configuration of the same computation."""

from __future__ import annotations

from .._validation import check_choice

#: ``"full"``: the committed figures; ``"small"``: a quick run of the same computation (tests,
#: CI, notebooks: seconds each on two cores).
SIZES = ("small", "full")

#: Measured wall time (s) of each figure at full size on the 2-core development machine
#: (README, Performance): what the stage messages of :func:`meanfield.studies.figures.make_figures`
#: and ``meanfield figures --help`` quote (here, not in :mod:`meanfield.studies.figures`, so the
#: command line reads them without importing the studies).
FULL_SIZE_SECONDS = {
    "n_limit": 101,
    "ldp_rate": 205,
    "beta_limit": 12,
    "t_limit": 4,
    "kernel_concentration": 28,
    "coulomb3d": 900,
}


def check_size(size: str) -> str:
    """``size`` checked against :data:`SIZES` (ValueError naming the allowed values).

    Examples
    --------
    >>> from meanfield.studies._sizes import check_size
    >>> check_size("small")
    'small'
    >>> check_size("tiny")
    Traceback (most recent call last):
    ...
    meanfield.errors.InputError: unknown size 'tiny'; choose one of 'small', 'full'
    """
    return check_choice("size", size, SIZES)
