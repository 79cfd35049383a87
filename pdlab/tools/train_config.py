"""How ``pdlab train`` trains: ``TrainConfig`` (no upstream counterpart: vLLM serves
models, it does not train them). Kept apart from the loop (``train.py``) so that the
command's parser reads its defaults without importing torch."""

from __future__ import annotations

from dataclasses import dataclass

from pdlab.engine.config.utils import _check_int, _check_positive_float, _fail
from pdlab.errors import Phrase


@dataclass(frozen=True)
class TrainConfig:
    """How ``pdlab train`` trains; the defaults made the shipped checkpoint."""

    steps: int = 300
    batch_size: int = 16
    seq_len: int = 224  # the longest corpus line is 218 bytes: each fits whole
    lr: float = 3e-3
    warmup_steps: int = 30
    weight_decay: float = 0.01
    seed: int = 0
    # Then DeepSeek-V3's MTP layer, the main model frozen (0 steps: no MTP layer).
    mtp_steps: int = 200
    mtp_lr: float = 3e-3

    def __post_init__(self) -> None:
        c = "TrainConfig"
        for name in ("steps", "batch_size", "seq_len"):
            _check_int(c, name, getattr(self, name))
        _check_int(c, "warmup_steps", self.warmup_steps, minimum=0)
        _check_int(c, "seed", self.seed, minimum=0)
        _check_int(c, "mtp_steps", self.mtp_steps, minimum=0)
        _check_positive_float(c, "lr", self.lr)
        _check_positive_float(c, "mtp_lr", self.mtp_lr)
        if not (isinstance(self.weight_decay, (int, float)) and self.weight_decay >= 0):
            _fail(c, "weight_decay", self.weight_decay, Phrase("err_x_num_ge", n=0))
