"""The arguments of ``pdlab tour`` and ``pdlab trace``, and the configurations built from
them; the commands themselves are ``pdlab/ui/tour.py``'s. vLLM 0.33.0's counterpart is its
per-command argument setup (``vllm/entrypoints/cli/``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pdlab.catalog import LANGS, Help
from pdlab.cli.args import (
    BACKENDS,
    add_routing_arguments,
    add_run_arguments,
    add_weights_argument,
    positive_int,
    prompt_text,
    routing_configs,
    tiny_model_config,
)
from pdlab.engine.config import PRESETS, ModelConfig
from pdlab.errors import PdlabArgumentTypeError, PdlabError
from pdlab.ui.tour import CHAPTERS, DEFAULT_BACKEND, DEFAULT_PROMPT, TOUR_MAX_TOKENS

if TYPE_CHECKING:
    from rich.console import Console


def _tour_max_tokens(text: str) -> int:
    v = positive_int(text)
    if v > TOUR_MAX_TOKENS:
        raise PdlabArgumentTypeError("err_tour_tokens", value=v, n=TOUR_MAX_TOKENS)
    return v


def _preset(text: str) -> str:
    try:
        ModelConfig.preset(text)
    except PdlabError as e:
        raise PdlabArgumentTypeError(e.key, **e.values) from None
    return text


def add_tour_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prompt", type=prompt_text, default=DEFAULT_PROMPT, help=Help("help_tour_prompt")
    )
    p.add_argument("--block-size", type=positive_int, default=4, help=Help("help_block_size"))
    add_routing_arguments(p)
    p.add_argument(
        "--preset",
        type=_preset,
        default="deepseek-v3",
        help=Help("help_tour_preset", presets=tuple(PRESETS)),
    )
    p.add_argument(
        "--chapter",
        type=int,
        choices=range(1, CHAPTERS + 1),
        metavar="N",
        help=Help("help_tour_chapter", n=CHAPTERS),
    )
    p.add_argument("--lang", choices=LANGS, default="en", help=Help("help_lang"))
    add_weights_argument(p)
    p.add_argument("--json", type=Path, metavar="PATH", help=Help("help_json_trace"))
    p.add_argument("--plots", type=Path, metavar="DIR", help=Help("help_plots"))
    p.add_argument(
        "--max-tokens",
        type=_tour_max_tokens,
        default=8,
        help=Help("help_tour_max_tokens", n=TOUR_MAX_TOKENS),
    )
    p.add_argument(
        "--backend", choices=BACKENDS, default=DEFAULT_BACKEND, help=Help("help_backend")
    )
    p.add_argument("--no-pager", dest="pager", action="store_false", help=Help("help_no_pager"))


def add_trace_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p)
    p.add_argument("--num-blocks", type=positive_int, default=256)
    p.add_argument("--max-num-batched-tokens", type=positive_int, default=2048)
    p.add_argument(
        "--long-prefill-token-threshold", type=int, default=0, help=Help("help_long_prefill")
    )
    p.add_argument("--pd", action="store_true", help=Help("help_trace_pd"))
    p.add_argument("--json", type=Path, metavar="PATH", help=Help("help_json_trace"))


def run_tour(args: argparse.Namespace, console: Console | None = None) -> int:
    from pdlab.ui import tour

    return tour.run_tour(args, tiny_model_config(args), console)


def run_trace(args: argparse.Namespace, console: Console | None = None) -> int:
    from pdlab.ui import tour

    return tour.run_trace(args, tiny_model_config(args), routing_configs(args), console)
