"""``pdlab pd``: prefill/decode disaggregation from the command line.

``--procs 1`` runs :class:`pdlab.disagg.pair.PDPair` in this process; ``--procs 2`` (the
default) starts P and D as two processes (``pdlab/disagg/launch.py``); ``--role`` runs one
side, for two machines. Every fault is one line with exit 2. ``--timeout`` counts from the
command's start (``pdlab.cli.STARTED``), imports included: ``--role decode`` waits for P's
port with plain sockets before torch is even imported, so no peer means one line within the
timeout. Ctrl-C is one line and exit 130 here too (``--role`` leaves through ``os._exit``: a
gloo receive blocked in a thread would abort interpreter teardown). Upstream's counterpart
is ``vllm serve`` with a ``--kv-transfer-config`` (``vllm/entrypoints/cli/serve.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import time
from typing import Any

from pdlab.catalog import Help
from pdlab.cli.args import (
    add_run_arguments,
    port,
    positive_float,
    routing_configs,
    tiny_model_config,
)
from pdlab.engine.distributed.kv_transfer.base import FIRST_TOKEN_MODES as MODES
from pdlab.errors import PdlabValueError, Phrase, cli_message


def add_arguments(sub: Any) -> None:
    pd = sub.add_parser("pd", help=Help("help_cmd_pd"))
    pd.add_argument("--procs", type=int, choices=(1, 2), help=Help("help_pd_procs"))
    pd.add_argument("--role", choices=("prefill", "decode"), help=Help("help_pd_role"))
    add_run_arguments(pd)
    pd.add_argument("--host", default="127.0.0.1")
    pd.add_argument("--port", type=port, default=0, help=Help("help_pd_port"))
    pd.add_argument("--timeout", type=positive_float, default=120.0, help=Help("help_pd_timeout"))
    pd.add_argument(
        "--first-token", choices=MODES, default="recompute", help=Help("help_pd_first_token")
    )
    pd.add_argument("--compare-designs", action="store_true", help=Help("help_pd_compare"))


def _left(args: argparse.Namespace) -> float:
    """What is left of ``--timeout``, counted from the command's start."""
    from pdlab.cli import STARTED

    return args.timeout - (time.monotonic() - STARTED)


def _wait_for_prefill(host: str, port: int, args: argparse.Namespace) -> None:
    """Until P listens on ``host:port`` or ``--timeout`` runs out (then one line)."""
    while _left(args) > 0:
        try:
            with socket.create_connection((host, port), timeout=min(_left(args), 1.0)):
                return
        except OSError:
            time.sleep(min(0.05, max(_left(args), 0)))
    who, address = Phrase("err_n_prefill"), f"{host}:{port}"
    raise PdlabValueError("err_peer_unreachable", who=who, address=address, timeout=args.timeout)


def _num_blocks(ids: list[list[int]], cfg: Any, args: argparse.Namespace) -> int:
    """A KV cache that holds every request whole (``pd`` has no ``--num-blocks``): each
    prompt plus ``--max-tokens`` (and under speculative decoding 2K: a row's K drafts and
    the MTP layer's K slots) up to max_model_len, at least 256 blocks. ``--role decode``
    does not see the prompts; it holds two requests of max_model_len."""
    from pdlab.engine.math_utils import cdiv

    longest = cfg.max_position_embeddings
    if args.role == "decode":
        return max(256, 2 * cdiv(longest, args.block_size) + 1)
    extra = 2 * (args.num_speculative_tokens or 0)
    lengths = (min(len(i) + args.max_tokens - 1 + extra, longest) for i in ids)
    need = sum(cdiv(n, args.block_size) for n in lengths)
    return max(256, need + 1)


def before_imports(args: argparse.Namespace) -> None:
    """What ``pdlab pd`` does before anything imports torch: ``--role decode`` waits for P."""
    if args.role == "decode" and args.port and args.procs is None and not args.prompts:
        _wait_for_prefill(args.host, args.port, args)


def run(args: argparse.Namespace) -> int:
    if args.role is not None:
        try:
            return _run(args)
        except KeyboardInterrupt:
            print("pdlab pd: interrupted", file=sys.stderr, flush=True)
            os._exit(130)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    from pdlab.engine.config import CacheConfig, SchedulerConfig
    from pdlab.engine.model_executor.model_loader import weights_label
    from pdlab.engine.request import SamplingParams
    from pdlab.ui.console import render_pd_result

    prompts = args.prompts or [
        "Why does the decode instance run the last prompt token again?",
        "The KV cache holds keys and values, not hidden states.",
    ]
    ids = [list(p.encode("utf-8")) for p in prompts]
    if any(not i for i in ids):
        print("pdlab pd: error: --prompt must not be empty", file=sys.stderr)
        return 2
    cfg = tiny_model_config(args)
    cache = CacheConfig(block_size=args.block_size, num_blocks=_num_blocks(ids, cfg, args))
    sched = SchedulerConfig(kv_transfer_timeout_s=min(args.timeout, 30.0))
    routing = routing_configs(args)
    sp = SamplingParams(max_tokens=args.max_tokens)
    from pdlab.disagg.designs import check_first_token_mode

    check_first_token_mode(args.first_token, sp, routing["speculative_config"])
    if args.compare_designs:
        from pdlab.ui.console import make_console
        from pdlab.ui.designs_view import compare_designs, designs_table

        if args.role is not None:
            raise PdlabValueError("err_pd_compare_role")
        rows = compare_designs(ids, cfg, cache, sp, procs=args.procs or 1, **routing)
        make_console().print(designs_table(rows, lang=args.lang))
        return 0 if all(r["same_as_colocated"] for r in rows) else 1
    if args.role is not None:
        from pdlab.disagg import procs as pd_procs

        if args.port == 0:
            raise PdlabValueError("err_pd_role_port")
        if args.procs is not None:
            raise PdlabValueError("err_pd_procs_role")
        if args.role == "decode" and args.prompts:
            raise PdlabValueError("err_pd_prompt_prefill")
        try:
            common = dict(timeout_s=max(_left(args), 1.0), engine_kwargs=routing)
            where = (cfg, cache, sched, args.host, args.port, args.backend)
            if args.role == "prefill":
                s = pd_procs.run_prefill(ids, sp, *where, first_token=args.first_token, **common)
            else:
                s = pd_procs.run_decode(*where, **common)
        except Exception as e:  # noqa: BLE001 - one line, then leave by os._exit below
            # The wait was given what was left of --timeout; the line names --timeout itself.
            msg = re.sub(r"within [\d.]+ s$", f"within {args.timeout:g} s", cli_message(e))
            print(f"pdlab pd: error: {msg}", file=sys.stderr, flush=True)
            os._exit(2)
        summary = {
            "role": s.role,
            "weights": weights_label(cfg.weights),
            "outputs": s.outputs,
            "steps": s.steps,
            "free_blocks": f"{s.num_free_blocks}/{s.num_blocks}",
            "peer_failed": s.peer_failed,
        }
        print(json.dumps(summary, indent=1), flush=True)
        if s.peer_failed:
            peer = "decode" if args.role == "prefill" else "prefill"
            print(
                f"pdlab pd: error: the {peer} peer failed ({s.peer_failed}); this side "
                "stopped and freed its blocks",
                file=sys.stderr,
            )
        sys.stderr.flush()
        os._exit(0 if not s.peer_failed else 2)  # no teardown (the module docstring says why)
    if args.procs == 1:
        from pdlab.disagg.pair import PDPair

        pair = PDPair(
            cfg, cache, sched, backend=args.backend, first_token=args.first_token, **routing
        )
        outputs = {
            o.request_id: {"output_token_ids": o.output_token_ids, "text": o.text, "error": o.error}
            for o in pair.generate(ids, sp)
        }
        return render_pd_result(pair.tracer, prompts, outputs, errors={}, lang=args.lang)
    from pdlab.disagg.launch import run_pd_procs

    where = (ids, cfg, cache, sched, sp, args.host, args.port, args.backend)
    res = run_pd_procs(*where, timeout_s=args.timeout, first_token=args.first_token, **routing)
    if res.errors:
        why = "; ".join(f"{role}: {err}" for role, err in sorted(res.errors.items()))
        for side in (res.prefill, res.decode):
            if side is not None and side.peer_failed:
                why += f"; {side.role} stopped and freed its blocks ({side.peer_failed})"
        raise ValueError(why)
    outputs = res.prefill.outputs if res.prefill else {}
    return render_pd_result(res.tracer, prompts, outputs, errors=res.errors, lang=args.lang)
