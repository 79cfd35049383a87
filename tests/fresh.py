"""What a pdlab command imports, seen from a fresh interpreter (the test process has
torch loaded long before)."""

from __future__ import annotations

import subprocess
import sys


def loaded_by(argv: list[str], modules: tuple[str, ...] = ("torch", "triton")) -> dict:
    """``{module: imported?}`` after ``pdlab.cli.main(argv)`` returned 0 in a fresh
    interpreter (its output swallowed)."""
    code = (
        "import sys, io, contextlib\n"
        "from pdlab.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main({argv!r}) == 0\n"
        f"print(*[m in sys.modules for m in {modules!r}])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return dict(zip(modules, (w == "True" for w in out.stdout.split())))
