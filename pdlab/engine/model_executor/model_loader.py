"""Which weights the model runs: the shipped checkpoint, a seeded random model, or a file.

Plays the part of vLLM's model loader (``vllm/model_executor/model_loader/``: the default
loader reads safetensors files; ``--load-format dummy`` gives random weights instead). A
checkpoint is a safetensors file of a dense DeepSeek-V2/V3 state dict, and every one, the
shipped file included, goes through the same loader,
:meth:`DeepseekV2ForCausalLM.load_hf_state_dict`, which rejects a mismatch by name.
``ModelConfig.weights`` chooses: ``"trained"`` (:data:`TRAINED_CHECKPOINT`, made by
``pdlab train``, one MTP module), ``"random"`` (any number of modules), or a path.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from pdlab.errors import PdlabValueError

if TYPE_CHECKING:
    from pdlab.engine.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM

# Made by `pdlab train` with its defaults (see its metadata: `checkpoint_metadata`).
TRAINED_CHECKPOINT = Path(__file__).with_name("tiny-trained.safetensors")


def read_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    """The state dict in a safetensors file; a missing or unreadable file is one line."""
    path = Path(path)
    try:
        from safetensors import SafetensorError
        from safetensors.torch import load_file
    except ImportError:
        raise PdlabValueError("err_needs_safetensors", path=str(path)) from None
    if not path.is_file():
        raise PdlabValueError("err_no_such_weights", path=str(path))
    try:
        return load_file(path)
    except (SafetensorError, OSError) as e:
        raise PdlabValueError("err_not_safetensors", path=str(path), why=str(e)) from None


def checkpoint_metadata(path: str | Path = TRAINED_CHECKPOINT) -> dict[str, str]:
    """The strings a checkpoint records about how it was made (empty if none)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})


def load_weights(model: DeepseekV2ForCausalLM, weights: str) -> None:
    """Load ``weights`` (``"trained"`` or a path) into ``model`` through its state-dict
    loader; ``"random"`` leaves its seeded initialisation."""
    if weights == "random":
        return
    path = TRAINED_CHECKPOINT if weights == "trained" else Path(weights)
    model.load_hf_state_dict(read_checkpoint(path), f"weights={weights!r}")


def save_checkpoint(
    model: DeepseekV2ForCausalLM, path: str | Path, metadata: dict[str, str] | None = None
) -> Path:
    """Write the model's state dict as safetensors, fp32, under the names of its
    ``hf_state_dict`` (DeepSeek-V3's)."""
    from safetensors.torch import save_file

    path = Path(path)
    tensors = {k: v.detach().float().clone() for k, v in model.hf_state_dict().items()}
    save_file(tensors, str(path), metadata=metadata)
    return path


def weights_label(weights: str) -> str:
    """How the views name the weights they ran: ``trained``, ``random`` or the file name."""
    return weights if weights in ("trained", "random") else Path(weights).name
