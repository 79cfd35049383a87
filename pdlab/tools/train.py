"""Training the tiny model on pdlab's own corpus (:mod:`pdlab.tools.corpus`), for ``pdlab train``.

The model is :class:`~pdlab.engine.model_executor.models.deepseek_v2.DeepseekV2ForCausalLM` as the
engine runs it, from its seeded random initialisation, trained through its own cacheless forward
(``attn_impl="naive"``, cheaper to differentiate at these sizes; the absorbed form computes the
same attention). A batch is ``batch_size`` sequences of ``seq_len + 1`` bytes, each starting at
the first byte of a corpus line; ``torch.func.vmap`` runs the one-sequence forward over it.
AdamW, linear warm-up, cosine decay, gradient clipping at 1. The same seed and the same number
of threads give the same weights, bit for bit.

Then DeepSeek-V3's MTP layer learns to guess the token after next. DeepSeek-V3 trains the two
jointly; pdlab trains the MTP after the main model, which stays frozen, so every output pdlab
documents stays what it was. ``main_from`` takes the main model from a checkpoint instead
(the shipped one's was made on another machine, whose float rounding this one does not repeat).

vLLM has no counterpart (it serves checkpoints and never trains one); the result is saved in
the format a DeepSeek checkpoint uses (safetensors, DeepSeek parameter names) and loaded by
the same loader (:mod:`pdlab.engine.model_executor.model_loader`).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from torch.func import vmap

from pdlab.engine.config import ModelConfig
from pdlab.engine.model_executor.model_loader import checkpoint_metadata, read_checkpoint
from pdlab.engine.model_executor.models.deepseek_mtp import acceptance_rates
from pdlab.engine.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM
from pdlab.engine.tokenizer import ByteTokenizer
from pdlab.tools import corpus
from pdlab.tools.train_config import TrainConfig

# The number of chained drafts the acceptance rates are measured for (K = 1 is the first).
ACCEPTANCE_K = 2


@dataclass
class TrainResult:
    model: DeepseekV2ForCausalLM
    losses: list[float]  # the training loss of every step
    corpus_loss: float  # mean loss over every corpus line, read from its first byte
    seconds: float
    tokens_per_step: int
    mtp_losses: list[float] = field(default_factory=list)  # the MTP phase's, step by step
    mtp_corpus_loss: float | None = None  # the MTP's loss on token i + 2 over the corpus
    mtp_seconds: float = 0.0
    # Greedy per-position acceptance over every corpus prefix: [first draft, second, ...].
    acceptance: list[float] = field(default_factory=list)
    main_from: dict[str, str] | None = None  # the metadata of the file the main model came from


def corpus_ids(lines: list[str] | None = None) -> list[list[int]]:
    """The corpus lines as byte-tokenizer ids, each ending with its newline."""
    tok = ByteTokenizer()
    return [tok.encode(line + "\n") for line in (lines or corpus.entries())]


def corpus_digest() -> str:
    """sha256 of the corpus text, recorded in the checkpoint's metadata."""
    text = "\n".join(corpus.entries())
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


def mtp_batch_loss(model: DeepseekV2ForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the MTP's guess at token ``i + 2`` over ``ids[B, S + 2]``, fed
    token ``i + 1`` and the main model's hidden state at ``i`` (computed without grad)."""
    positions = torch.arange(ids.shape[1] - 2)
    with torch.no_grad():
        hidden = vmap(lambda seq: model(seq, positions, None, "naive"))(ids[:, :-2])
    mtp = model.mtp
    out = vmap(lambda seq, h: mtp(seq, positions, h, None, "naive"))(ids[:, 1:-1], hidden)
    logits = mtp.compute_logits(out)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), ids[:, 2:].reshape(-1)
    )


@torch.no_grad()
def mtp_corpus_loss(model: DeepseekV2ForCausalLM, lines: list[list[int]]) -> float:
    """The MTP's mean loss on token ``i + 2`` over every corpus line, read from its start."""
    total, count = 0.0, 0
    for ids in lines:
        t = torch.tensor(ids)
        hidden = model(t[:-2], torch.arange(len(ids) - 2), None, "naive")
        out = model.mtp(t[1:-1], torch.arange(len(ids) - 2), hidden, None, "naive")
        logits = model.mtp.compute_logits(out)
        total += float(torch.nn.functional.cross_entropy(logits, t[2:], reduction="sum"))
        count += len(ids) - 2
    return total / count


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
    on_mtp_step: Callable[[int, float], None] | None = None,
    main_from: str | Path | None = None,
) -> TrainResult:
    """Train from the seeded random model of ``model_config`` (the tiny preset's by default)
    on ``lines`` (the whole corpus by default), then its MTP layer (``cfg.mtp_steps > 0``),
    calling ``on_step``/``on_mtp_step(step, loss)`` after each step. With ``main_from`` the
    main model is read from that file, its batches drawn all the same."""
    cfg = cfg or TrainConfig()
    mc = (model_config or ModelConfig.tiny()).replace(
        weights="random", seed=cfg.seed, num_nextn_predict_layers=int(cfg.mtp_steps > 0)
    )
    model = DeepseekV2ForCausalLM(mc).train()
    data = corpus_ids(lines)
    g = torch.Generator().manual_seed(cfg.seed)
    main = [p for n, p in model.named_parameters() if not n.startswith("mtp.")]
    t0 = time.perf_counter()
    if main_from is None:
        losses = _fit(
            main,
            cfg,
            on_step,
            lambda: batch_loss(model, sample_batch(data, cfg.batch_size, cfg.seq_len, g)),
        )
    else:
        _load_main(model, main_from)
        for _ in range(cfg.steps):  # the batches the main phase draws
            sample_batch(data, cfg.batch_size, cfg.seq_len, g)
        losses = []
    seconds = time.perf_counter() - t0
    result = TrainResult(model, losses, 0.0, seconds, cfg.batch_size * cfg.seq_len)
    if main_from is not None:
        result.main_from = {"main_from": Path(main_from).name, **checkpoint_metadata(main_from)}
    if model.mtp is not None:
        own = [p for n, p in model.named_parameters() if n.startswith("mtp.")]
        for p in main:  # frozen: the shared embedding and head too
            p.requires_grad_(False)
        t0 = time.perf_counter()
        sched = replace(  # the same schedule, over the MTP phase's steps
            cfg,
            steps=cfg.mtp_steps,
            lr=cfg.mtp_lr,
            warmup_steps=min(cfg.warmup_steps, cfg.mtp_steps // 10),
        )
        result.mtp_losses = _fit(
            own,
            sched,
            on_mtp_step,
            lambda: mtp_batch_loss(model, sample_batch(data, cfg.batch_size, cfg.seq_len + 1, g)),
        )
        result.mtp_seconds = time.perf_counter() - t0
        for p in main:
            p.requires_grad_(True)
    model.eval()
    result.corpus_loss = corpus_loss(model, data)
    if model.mtp is not None:
        result.mtp_corpus_loss = mtp_corpus_loss(model, data)
        result.acceptance = acceptance_rates(model, data, ACCEPTANCE_K)
    return result


def _load_main(model: DeepseekV2ForCausalLM, path: str | Path) -> None:
    """The main model's tensors from a checkpoint (its MTP layer, if any, skipped)."""
    plain = DeepseekV2ForCausalLM(model.config.replace(num_nextn_predict_layers=0))
    plain.load_hf_state_dict(read_checkpoint(path), f"--main-from {str(path)!r}")
    own = model.state_dict()
    for name, tensor in plain.state_dict().items():
        own[name].copy_(tensor)


def _fit(
    params: list[torch.nn.Parameter],
    sched: TrainConfig,
    on_step: Callable[[int, float], None] | None,
    loss_fn: Callable[[], torch.Tensor],
) -> list[float]:
    """AdamW over ``params`` for ``sched.steps`` steps of ``loss_fn()``, the learning rate of
    :func:`lr_at` under ``sched``, gradients clipped at 1."""
    opt = torch.optim.AdamW(
        [
            {"params": [p for p in params if p.dim() == 2], "weight_decay": sched.weight_decay},
            {"params": [p for p in params if p.dim() != 2], "weight_decay": 0},
        ],
        lr=sched.lr,
        betas=(0.9, 0.95),
    )
    losses: list[float] = []
    for step in range(sched.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, sched)
        loss = loss_fn()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
    return losses


def metadata(result: TrainResult, cfg: TrainConfig) -> dict[str, str]:
    """What the checkpoint records about how it was made (safetensors metadata: strings)."""
    meta = {k: str(v) for k, v in asdict(cfg).items()}
    tail = result.losses[-20:]
    meta.update(
        preset=result.model.config.name,
        corpus_sha256=corpus_digest(),
        final_loss=f"{sum(tail) / len(tail):.4f}" if tail else "?",
        corpus_loss=f"{result.corpus_loss:.4f}",
        threads=str(torch.get_num_threads()),
        torch=torch.__version__,
    )
    if result.main_from is not None:  # the main model's training is the source file's
        src = result.main_from
        meta.update(main_from=src["main_from"], final_loss=src.get("final_loss", "?"))
    if result.mtp_losses:
        tail = result.mtp_losses[-20:]
        meta.update(
            num_nextn_predict_layers="1",
            mtp_final_loss=f"{sum(tail) / len(tail):.4f}",
            mtp_corpus_loss=f"{result.mtp_corpus_loss:.4f}",
            # vLLM's "Per-position acceptance rate" under greedy verification, K = 2.
            mtp_acceptance=",".join(f"{a:.4f}" for a in result.acceptance),
        )
    return meta
