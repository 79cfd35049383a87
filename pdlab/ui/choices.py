"""The words for two choices the engine reports as facts: which MLA backend's routing a run
followed and why (:class:`~pdlab.engine.platforms.BackendChoice`, kept in a trace's
``meta["routing"][instance]["choice"]``), and which implementation runs the kernels
(:func:`pdlab.kernels.backend.in_force`). pdlab's own; vLLM logs its choice in English.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pdlab.catalog import text
from pdlab.engine.config.attention import MLA_BACKENDS
from pdlab.engine.platforms import GPUS, BackendChoice, Chosen


def choice_reason(choice: BackendChoice | Mapping[str, Any], lang: str = "en") -> str:
    """Why the platform picked ``choice.backend``, in ``lang``: the GPU and how it was
    chosen, and the compute capability whose priority list picked it. ``choice`` is a
    :class:`BackendChoice` or its fields as a trace keeps them."""
    facts = choice if isinstance(choice, Mapping) else dataclasses.asdict(choice)
    cap = facts["capability"]
    if cap is None:
        gpu, where = text(lang, "pf_cpu_label"), text(lang, "pf_cpu")
    else:
        gpu, where = GPUS[facts["gpu"]][0], f"sm_{cap[0]}{cap[1]}"
    key = f"pf_{Chosen(facts['how']).value}"
    return text(
        lang, key, gpu=gpu, where=where, backend=facts["backend"].upper(), flag="--gpu h200"
    )


def routing_reason(routing: Mapping[str, Any], lang: str = "en") -> str:
    """Why the profile in a trace's ``meta["routing"][instance]`` was followed, in ``lang``:
    the platform's choice, or the backend the learner named (``choice`` None)."""
    if routing.get("choice") is None:
        return text(lang, "pf_backend", backend=MLA_BACKENDS[routing["mla_backend"]].name)
    return choice_reason(routing["choice"], lang)


def kernels_line(lang: str = "en") -> str:
    """One line for ``pdlab doctor`` and notebook 04: the kernels' backend in force and why,
    in ``lang``. Raises ``ValueError`` naming a bad ``PDLAB_BACKEND`` or
    ``PDLAB_CHECK_INDICES``, which the doctor reports."""
    # Imported here: the console views import this module and need neither torch nor kernels.
    from pdlab.kernels import backend
    from pdlab.kernels.checks import index_checks_enabled

    index_checks_enabled()
    name, why = backend.in_force()
    if name == "torch":
        return text(lang, "be_torch", why=text(lang, f"be_{why}", env=backend.ENV_VAR))
    if why == "interpreted":
        return text(lang, "be_interpreted")
    import torch

    return text(lang, "be_compiled", gpu=torch.cuda.get_device_name(0))
