"""``python -m meanfield.cli``: the ``meanfield`` command line (:func:`meanfield.cli.main`)."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
