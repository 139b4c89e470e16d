"""The sizes of the figure experiments: one name per configuration of the same computation."""

from __future__ import annotations

from .._validation import check_choice

#: ``"full"``: the committed figures; ``"small"``: a quick run of the same computation (tests,
#: CI, notebooks: seconds each on two cores).
SIZES = ("small", "full")


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
