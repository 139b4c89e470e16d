"""The vocabulary of a parameter declaration: the kinds a :class:`~meanfield.contract.Param`
may have, the range of a seed, and the marker of a parameter without a default.

The lowest module of :mod:`meanfield.contract`: the declaration (``params``), its command-line
flags (``flags``), its generated test values (``cases``) and its documentation tables
(``tables``) all read these, and it imports nothing.
"""

from __future__ import annotations

import inspect

#: The kinds of parameter a contract knows.
KINDS = ("real", "int", "seed", "level", "choice", "flag", "string")

#: The largest seed (numpy's and torch's generators both take it; results record it as int64).
MAX_SEED = 2**63 - 1

#: Marks a parameter without a default (required).
REQUIRED = inspect.Parameter.empty
