"""What the sandbox's forkserver imports once, so that each check's child starts in
milliseconds: torch, the engine and every exercise (:mod:`pdlab.exercises.sandbox`)."""

import pdlab.exercises as _exercises

for _n in range(1, len(_exercises._MODULES) + 1):
    _exercises.get(_n)
