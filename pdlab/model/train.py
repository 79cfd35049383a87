"""Training the tiny model on pdlab's own corpus (:mod:`pdlab.model.corpus`), for ``pdlab train``.

The model is :class:`~pdlab.model.deepseek.DeepseekV2ForCausalLM` as the engine runs it, built
from its seeded random initialisation and trained through its own cacheless forward, the
model-level oracle (``attn_impl="naive"``: the up-projected form, which is cheaper to
differentiate at these sizes; the absorbed form the engine runs computes the same attention).
A batch is ``batch_size`` sequences of ``seq_len + 1`` bytes, each starting at the first byte
of a corpus line, so a prompt at position 0 reads like the questions did; ``torch.func.vmap``
runs the one-sequence forward over the batch. AdamW, linear warm-up, cosine decay, gradient
clipping at 1. Everything random draws from generators seeded by ``seed``: the same seed and
the same number of threads give the same weights, bit for bit.

vLLM has no counterpart (it serves checkpoints and never trains one); the result is saved in
the format a DeepSeek checkpoint uses (safetensors, DeepSeek parameter names) and loaded by
the same loader (:mod:`pdlab.model.weights`).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch.func import vmap

from pdlab.config import ModelConfig
from pdlab.config.train import TrainConfig
from pdlab.model import corpus
from pdlab.model.deepseek import DeepseekV2ForCausalLM
from pdlab.tokenizer import ByteTokenizer


@dataclass
class TrainResult:
    model: DeepseekV2ForCausalLM
    losses: list[float]  # the training loss of every step
    corpus_loss: float  # mean loss over every corpus line, read from its first byte
    seconds: float
    tokens_per_step: int


def corpus_ids(lines: list[str] | None = None) -> list[list[int]]:
    """The corpus lines as byte-tokenizer ids, each ending with its newline."""
    tok = ByteTokenizer()
    return [tok.encode(line + "\n") for line in (lines or corpus.entries())]


def corpus_digest(lines: list[str] | None = None) -> str:
    """sha256 of the corpus text, recorded in the checkpoint's metadata."""
    text = "\n".join(lines or corpus.entries())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sample_batch(
    lines: list[list[int]], batch_size: int, seq_len: int, g: torch.Generator
) -> torch.Tensor:
    """``[batch_size, seq_len + 1]`` ids: from a random line onward, lines in corpus order,
    wrapping around at the end."""
    rows = []
    for start in torch.randint(len(lines), (batch_size,), generator=g).tolist():
        row: list[int] = []
        i = start
        while len(row) < seq_len + 1:
            row.extend(lines[i % len(lines)])
            i += 1
        rows.append(row[: seq_len + 1])
    return torch.tensor(rows, dtype=torch.long)


def batch_loss(model: DeepseekV2ForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of ``ids[B, S + 1]`` through the model's own forward."""
    positions = torch.arange(ids.shape[1] - 1)
    hidden = vmap(lambda seq: model(seq, positions, None, "naive"))(ids[:, :-1])
    logits = model.compute_logits(hidden)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)
    )


@torch.no_grad()
def corpus_loss(model: DeepseekV2ForCausalLM, lines: list[list[int]]) -> float:
    """Mean next-token loss over every corpus line, each read on its own from position 0."""
    total, count = 0.0, 0
    for ids in lines:
        logits = model.forward_full(ids[:-1], attn_impl="naive")
        target = torch.tensor(ids[1:])
        total += float(torch.nn.functional.cross_entropy(logits, target, reduction="sum"))
        count += len(ids) - 1
    return total / count


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up to ``lr``, then cosine decay to a tenth of it."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    t = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(t, 1.0))))


def train(
    cfg: TrainConfig | None = None,
    model_config: ModelConfig | None = None,
    lines: list[str] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> TrainResult:
    """Train from the seeded random model of ``model_config`` (the tiny preset's dimensions
    by default) on ``lines`` (the whole corpus by default); ``on_step(step, loss)`` after
    every step."""
    cfg = cfg or TrainConfig()
    mc = (model_config or ModelConfig.tiny()).replace(weights="random", seed=cfg.seed)
    model = DeepseekV2ForCausalLM(mc).train()
    data = corpus_ids(lines)
    g = torch.Generator().manual_seed(cfg.seed)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    rest = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    losses: list[float] = []
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        loss = batch_loss(model, sample_batch(data, cfg.batch_size, cfg.seq_len, g))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
    seconds = time.perf_counter() - t0
    model.eval()
    return TrainResult(
        model, losses, corpus_loss(model, data), seconds, cfg.batch_size * cfg.seq_len
    )


def metadata(result: TrainResult, cfg: TrainConfig) -> dict[str, str]:
    """What the checkpoint records about how it was made (safetensors metadata: strings)."""
    meta = {k: str(v) for k, v in asdict(cfg).items()}
    meta.update(
        preset=result.model.config.name,
        corpus_sha256=corpus_digest(),
        final_loss=f"{sum(result.losses[-20:]) / len(result.losses[-20:]):.4f}",
        corpus_loss=f"{result.corpus_loss:.4f}",
        threads=str(torch.get_num_threads()),
        torch=torch.__version__,
    )
    return meta
