"""Chapter 4 under speculative decoding (``pdlab tour --num-speculative-tokens K``): D's
first step as vLLM 0.33.0 schedules, routes and verifies it when DeepSeek's MTP layer drafts
on D, in six stops, each beside the pdlab source that decided it and its upstream
counterpart: the padded row (``vllm/v1/core/sched/scheduler.py``), why it stays a decode,
the threshold ``1 + K`` (``vllm/v1/attention/backend.py``), the placeholders rejected, the
drafter fed ``h[N-1]`` (``target_dependent_ar/speculator.py``) and PCP, and what happens
behind the connector (the trailing-block drop is told in
``pdlab/engine/core/kv_cache_manager.py``). Words in :mod:`pdlab.catalog.mtp`.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from pdlab.demo import Demo
from pdlab.engine.trace import Tracer
from pdlab.ui.tour_kv import print_source, printer


def _first(trace: Tracer, kind: str, rid: str, instance: str = "D") -> dict | None:
    found = trace.filter(kind, instance, req_id=rid)
    return dict(found[0]) if found else None


def mtp_section(c: Console, demo: Demo, lang: str) -> None:
    """Print the six stops for ``demo`` (a run with ``num_speculative_tokens > 0``)."""
    from pdlab.engine.config.attention import MLABackendProfile
    from pdlab.engine.core.sched.scheduler import Scheduler
    from pdlab.engine.worker.gpu.batch import pcp_rank_chunks
    from pdlab.engine.worker.gpu.spec_decode.mtp import MTPProposer
    from pdlab.engine.worker.gpu.spec_decode.rejection_sampler import gather_draft_sampled

    t, rid, k = demo.trace, demo.request_id, demo.num_speculative_tokens
    put = printer(c, lang)

    def show(obj: Any, start: str, end: str, mark: str, upstream: str) -> None:
        print_source(c, lang, "mtp_src", obj, start, end, mark, upstream=upstream)

    step, row = t.steps("D", rid)[0]
    rt = dict(t.route_of("D", rid, step["step"]))
    c.print()
    nct, q = row["num_computed_tokens_before"], row["num_scheduled_tokens"]
    put("mtp_padded", k=k, nct=nct, q=q, drafts=row["spec_token_ids"])
    show(Scheduler._pad_spec_decode, "if not (", "return padded", "padded = 1 +",
         "vllm/v1/core/sched/scheduler.py, Scheduler.schedule")  # fmt: skip
    q, eligible, u = rt["query_len"], rt["decode_graph_eligible"], rt["uniform_decode_token_count"]
    rad = rt["prefill_runs_as_decode"]
    put("mtp_stays_decode", q=q, d=rt["num_draft_tokens"], rad=rad, eligible=eligible, u=u)
    path, forward, threshold = rt["path"], rt["forward"], rt["decode_threshold"]
    put("mtp_threshold", backend=rt["mla_backend"], t=threshold, q=q, path=path, forward=forward)
    show(MLABackendProfile.effective_threshold, "t = self.reorder_batch_threshold", "return t",
         "t = max(t, 1 + num_speculative_tokens)",
         "vllm/v1/attention/backend.py, _init_reorder_batch_threshold")  # fmt: skip
    calls = [e for e in t.kernels("D", step["step"], layer=0) if e["name"] == "mla_decode"]
    if path == "decode" and calls and "query_start_loc" in calls[0]["shapes"]:
        shapes = calls[0]["shapes"]
        put("mtp_mqa", qsl=shapes["query_start_loc"], seq=shapes["seq_lens"])
    elif path != "decode":
        put("mtp_single_only", q=q, t=threshold)
    v, d = _first(t, "verify", rid), _first(t, "draft", rid)
    if v is not None:
        nct, rej = rt["num_computed_tokens"], v["num_rejected"]
        drafts, target = v["draft_token_ids"], v["target_token_ids"]
        tokens = {"drafts": drafts, "target": target, "sampled": v["sampled_token_ids"]}
        put("mtp_verify", nct=nct, plen=rt["prefill_len"], rej=rej, after=nct + q - rej, **tokens)
        show(gather_draft_sampled, "if num_computed_tokens < prefill_len", "return [t if",
             "PLACEHOLDER_TOKEN_ID] *",
             "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py, "
             "gather_draft_sampled")  # fmt: skip
    if d is not None:
        hp, n, tok = d["hidden_position"], rt["num_prompt_tokens"], d["next_token"]
        put("mtp_drafter", hp=hp, n=n, tok=tok, drafts=d["draft_token_ids"])
        show(MTPProposer.propose, "ids = input_ids.clone()", "out = self.mtp(",
             "ids[r.last_token_index] = r.next_token",
             "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py, "
             "prepare_prefill_inputs")  # fmt: skip
    pcp = demo.variant_traces.get(("v2", 2))
    if pcp is not None:
        p = dict(pcp.route_of("D", rid))
        rad, eligible = p["prefill_runs_as_decode"], p["decode_graph_eligible"]
        taken = {"path": p["path"], "forward": p["forward"], "q": p["query_len"]}
        put("mtp_pcp", rad=rad, eligible=eligible, **taken)
        ranks = pcp_rank_chunks([p["query_len"]], [p["is_prefilling"]], 2)
        for r, parts in enumerate(ranks):
            cells = ", ".join(f"{rid}[{o}:{o + n}]" for _, o, n in parts) or "—"
            c.print(escape(f"  rank {r}: {cells}"))
    connector_section(c, demo, lang)


def connector_section(c: Console, demo: Demo, lang: str) -> None:
    """Stop 6: the drafter's row at N - 1, the backoff and the trailing-block drop, each
    read from the pair's trace."""
    t, rid, n, bs = demo.trace, demo.request_id, len(demo.prompt_ids), demo.block_size
    put = printer(c, lang)
    p_draft, d_draft = _first(t, "draft", rid, "P"), _first(t, "draft", rid)
    if p_draft is not None and d_draft is not None:
        hp, ptok = p_draft["hidden_position"], p_draft["next_token"]
        dhp, dtok = d_draft["hidden_position"], d_draft["next_token"]
        put("mtp_drafter_row", hp=hp, ptok=ptok, dhp=dhp, dtok=dtok)
    cut = t.filter("kv_prefill_backoff", "P", req_id=rid)
    k = demo.num_speculative_tokens
    put("mtp_backoff", k=k, cut=cut[0]["num_tokens"] if cut else 0, n=n)
    again = demo.pd_again_id
    if again is None:
        return
    hits = (t.filter("prefix_hit", i, req_id=again) for i in ("D", "P"))
    d_hit, p_hit = (found[0]["num_hit_tokens"] if found else 0 for found in hits)
    full = (n - 1) // bs * bs
    put("mtp_block_drop", n=n, bs=bs, full=full, d_hit=d_hit, p_hit=p_hit)
