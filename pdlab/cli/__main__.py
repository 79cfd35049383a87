"""``python -m pdlab.cli``: the ``pdlab`` command."""

import sys

from pdlab.cli import main

sys.exit(main())
