"""``python -m meanfield``: the ``meanfield`` command line (:func:`meanfield.cli.main`).

Examples
--------
>>> import subprocess, sys
>>> command = [sys.executable, "-m", "meanfield", "--help"]
>>> out = subprocess.run(command, capture_output=True, text=True)
>>> out.returncode, "simulate" in out.stdout
(0, True)
"""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
