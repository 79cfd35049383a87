"""The simulator's grids in a second Python process, while this one does other work.

The tour's closing chapter shows grids of ``pdlab sim`` that do not depend on the prompt.
The simulator imports no torch, so a child interpreter (``python -m pdlab.sim.background``)
runs them on another core while the tour runs chapters 1 to 6. It reads the grids as JSON
on stdin and writes each grid's summary rows as JSON on stdout (floats round-trip exactly).
Whatever goes wrong with it is never shown: :meth:`BackgroundGrids.rows` runs the grids here
instead; its stderr is discarded, so a Ctrl-C prints only the command's own line. vLLM has
no counterpart.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdlab.sim import ROUTINGS
from pdlab.sim.simulator import MODES, SimConfig

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # this process's pdlab


@dataclass(frozen=True)
class Grid:
    """One ``run_grid``: every (routing, design) of ``base`` on a published profile."""

    base: SimConfig
    profile: str = "H200"  # a name of pdlab.sim.profiles.GPUS ("here" measures: not here)
    gpu: str = "h200"
    designs: tuple[str, ...] = MODES
    routings: tuple[str, ...] = ROUTINGS

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "base": dataclasses.asdict(self.base)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Grid:
        designs, routings = tuple(d["designs"]), tuple(d["routings"])
        return cls(SimConfig(**d["base"]), d["profile"], d["gpu"], designs, routings)

    def run(self) -> list[dict[str, Any]]:
        from pdlab.engine.config import ModelConfig
        from pdlab.sim.profiles import device_profile
        from pdlab.sim.report import run_grid

        profile = device_profile(self.profile)
        model = ModelConfig.deepseek_v3()
        return run_grid(self.base, model, profile, self.gpu, self.designs, self.routings)[0]


class BackgroundGrids:
    """Start ``grids`` in a child process now; :meth:`rows` waits for them."""

    command = ("-m", "pdlab.sim.background")  # after sys.executable

    def __init__(self, grids: Sequence[Grid]) -> None:
        self.grids = list(grids)
        self._proc: subprocess.Popen | None = None
        env = dict(os.environ)
        # the child imports this process's pdlab, wherever it was imported from
        paths = [str(PACKAGE_DIR.parent), *filter(None, [env.get("PYTHONPATH")])]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        request = json.dumps({"package": str(PACKAGE_DIR), "grids": [g.to_json() for g in grids]})
        try:
            out = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
            command = [sys.executable, *self.command]
            self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, **out, env=env, text=True)
            self._proc.stdin.write(request)  # a few hundred bytes: the pipe takes them all
            self._proc.stdin.close()
            atexit.register(self.close)  # a command that ends early stops its child too
        except OSError:
            self.close()

    def rows(self) -> list[list[dict[str, Any]]]:
        """Each grid's summary rows: the child's, or, if it failed in any way, this process's."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.close)
        if proc is not None:
            try:
                out = proc.stdout.read()
                reply = json.loads(out) if proc.wait() == 0 else None
                if isinstance(reply, list) and len(reply) == len(self.grids):
                    return reply
            except (OSError, ValueError):
                pass
            finally:
                _stop(proc)
        return [g.run() for g in self.grids]

    def close(self) -> None:
        """Stop a child whose rows were never read (the tour ended early)."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.close)
        if proc is not None:
            _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for f in (proc.stdin, proc.stdout):
        if f is not None and not f.closed:
            f.close()


def main() -> int:
    """The child: grids in, rows out (nothing if its pdlab is not the parent's)."""
    request = json.loads(sys.stdin.read())
    if Path(request["package"]).resolve() != PACKAGE_DIR:
        return 1
    rows = [Grid.from_json(g).run() for g in request["grids"]]
    sys.stdout.write(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
