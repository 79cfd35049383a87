"""The ``pdlab`` command's argument types and shared options.

Each converter raises ``argparse.ArgumentTypeError`` with one line naming the value and what
is allowed, so argparse prints ``pdlab <command>: error: argument --x: ...`` and exits 2.
The routing switches (``--pcp``, ``--mla-backend``) carry upstream's names
(``vllm/config/parallel.py``, ``vllm/config/attention.py``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from pdlab.catalog import LANGS, Help
from pdlab.engine.config import (
    MLA_BACKENDS,
    MODEL_RUNNERS,
    AttentionConfig,
    ModelConfig,
    ParallelConfig,
    SpeculativeConfig,
)
from pdlab.engine.config.speculative import MAX_NUM_SPECULATIVE_TOKENS, SPECULATIVE_METHODS
from pdlab.engine.platforms import GPUS
from pdlab.errors import PdlabArgumentTypeError, PdlabValueError, Phrase, os_reason

BACKENDS = ("torch", "triton")  # which kernels run (pdlab/kernels/backend.py)


def number(text: str, cast: type, ok: Any, allowed: Phrase, key: str = "err_not") -> Any:
    """``cast(text)``, or one line (``key``) saying what ``text`` is not."""
    try:
        v = cast(text)
    except ValueError:
        not_a = "err_not_int" if cast is int else "err_not_number"
        raise PdlabArgumentTypeError(not_a, value=text) from None
    if not ok(v):
        raise PdlabArgumentTypeError(key, value=text, allowed=allowed)
    return v


def positive_int(text: str) -> int:
    return number(text, int, lambda v: v >= 1, Phrase("err_x_int_ge_short", n=1))


def speculative_tokens(text: str) -> int:
    """K for ``--num-speculative-tokens``: 1 to :data:`MAX_NUM_SPECULATIVE_TOKENS`."""
    top = MAX_NUM_SPECULATIVE_TOKENS
    return number(text, int, lambda v: 1 <= v <= top, Phrase("err_x_int_range", a=1, b=top))


def seed_int(text: str) -> int:
    """A ``--seed``: what torch's and Python's generators both take."""
    top = 2**63 - 1
    return number(text, int, lambda v: 0 <= v <= top, Phrase("err_x_int_range", a=0, b=top))


def positive_float(text: str) -> float:
    return number(text, float, lambda v: 0 < v < float("inf"), Phrase("err_x_finite_gt", n=0))


def port(text: str) -> int:
    return number(text, int, lambda v: 0 <= v <= 65535, Phrase("err_x_port", a=0, b=65535))


def prompt_text(text: str) -> str:
    """A prompt the byte tokenizer can read: text that encodes as UTF-8 (a shell passes
    other bytes through as lone surrogates, which do not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise PdlabArgumentTypeError("err_not_utf8", value=text, a=e.start, b=e.end - 1) from None
    return text


def int_list(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise PdlabArgumentTypeError("err_not_int_list", value=text) from None
    if not vals or min(vals) < 1:
        raise PdlabArgumentTypeError(
            "err_value_expected", value=text, allowed=Phrase("err_x_ints_ge", n=1)
        )
    return vals


def weights(text: str) -> str:
    """``--weights``: ``trained``, ``random`` or an existing ``.safetensors`` file."""
    if text in ("trained", "random"):
        return text
    if not text.endswith(".safetensors"):
        raise PdlabArgumentTypeError("err_not_weights", value=text)
    if not Path(text).is_file():
        raise PdlabArgumentTypeError("err_no_such_file", value=text)
    return text


def add_weights_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--weights", type=weights, default="trained", metavar="W", help=Help("help_weights")
    )


def add_routing_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pcp",
        "--prefill-context-parallel-size",
        dest="pcp",
        type=positive_int,
        default=1,
        metavar="N",
        help=Help("help_pcp"),
    )
    p.add_argument(
        "--model-runner", type=str.lower, choices=MODEL_RUNNERS, help=Help("help_model_runner")
    )
    p.add_argument("--gpu", type=str.lower, choices=tuple(GPUS), help=Help("help_gpu"))
    p.add_argument(
        "--mla-backend", type=str.lower, choices=tuple(MLA_BACKENDS), help=Help("help_mla_backend")
    )
    p.add_argument(
        "--num-speculative-tokens", type=speculative_tokens, metavar="K", help=Help("help_num_spec")
    )
    p.add_argument(
        "--speculative-method", choices=SPECULATIVE_METHODS, help=Help("help_spec_method")
    )


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """What ``pdlab trace`` and ``pdlab pd`` share: the prompts, how many tokens to generate,
    the cache's block size, the routing switches, which kernels run and the language of the
    tables."""
    p.add_argument(
        "--prompt",
        action="append",
        type=prompt_text,
        dest="prompts",
        metavar="TEXT",
        help=Help("help_prompts"),
    )
    p.add_argument("--max-tokens", type=positive_int, default=8)
    p.add_argument("--block-size", type=positive_int, default=4, help=Help("help_block_size"))
    add_routing_arguments(p)
    p.add_argument("--backend", choices=BACKENDS, default="torch")
    p.add_argument("--lang", choices=LANGS, default="en", help=Help("help_lang"))
    add_weights_argument(p)


def routing_configs(args: argparse.Namespace) -> dict[str, Any]:
    """``attention_config``, ``parallel_config``, ``model_runner`` and
    ``speculative_config`` for an engine, from the arguments."""
    k = getattr(args, "num_speculative_tokens", None)
    method = getattr(args, "speculative_method", None)
    if method is not None and not k:
        raise PdlabValueError(
            "err_option_without",
            option="--speculative-method",
            value=method,
            needed="--num-speculative-tokens",
        )
    method = method or "mtp"
    return {
        "attention_config": AttentionConfig(args.mla_backend, getattr(args, "gpu", None)),
        "parallel_config": ParallelConfig(args.pcp),
        "model_runner": getattr(args, "model_runner", None),
        "speculative_config": SpeculativeConfig(method, k) if k else None,
    }


def tiny_model_config(args: argparse.Namespace) -> ModelConfig:
    """The tiny model with ``--weights``; under ``--num-speculative-tokens`` with the MTP
    method it has its MTP layer (the drafter) whatever the preset says."""
    k = getattr(args, "num_speculative_tokens", None)
    mtp = bool(k) and (getattr(args, "speculative_method", None) or "mtp") == "mtp"
    extra = {"num_nextn_predict_layers": 1} if mtp else {}
    return ModelConfig.tiny(weights=args.weights, **extra)


def check_output_path(option: str, path: Path | None, is_dir: bool = False) -> None:
    """Raise ``ValueError`` unless ``path`` can be written (a file, or a directory to write
    files into): checked before the work, so a long run never ends in a failed save."""
    if path is None:
        return
    if path.exists():
        if is_dir and not path.is_dir():
            raise PdlabValueError("err_path_is_file", option=option, path=path)
        if not is_dir and path.is_dir():
            raise PdlabValueError("err_path_is_dir", option=option, path=path)
    if not is_dir and not path.parent.is_dir() and not path.parent.exists():
        raise PdlabValueError("err_no_parent", option=option, path=path, parent=path.parent)
    base = path if is_dir else path.parent
    while not base.exists():  # the first folder that exists must take new entries
        base = base.parent
    if not base.is_dir():
        raise PdlabValueError("err_base_is_file", option=option, path=path, base=base)
    try:
        with tempfile.TemporaryFile(dir=base):
            pass
    except OSError as e:
        raise PdlabValueError(
            "err_not_writable_in", option=option, path=path, why=os_reason(e), base=base
        ) from None
    if path.exists() and not path.is_dir() and not os.access(path, os.W_OK):
        why = Phrase("err_permission_denied")
        raise PdlabValueError("err_not_writable", option=option, path=path, why=why)


def check_outputs(args: argparse.Namespace) -> None:
    check_output_path("--json", getattr(args, "json", None))
    check_output_path("--plots", getattr(args, "plots", None), is_dir=True)
