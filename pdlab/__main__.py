"""``python -m pdlab``: the ``pdlab`` command (``pdlab/cli/``), for environments whose
scripts folder is not on ``PATH``. Mirrors ``vllm/entrypoints/cli/main.py``'s role."""

import sys

from pdlab.cli import main

if __name__ == "__main__":
    sys.exit(main())
