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

from rich.console import Console
from rich.markup import escape

from pdlab.demo import Demo
from pdlab.engine.trace import Tracer
from pdlab.ui.tour_kv import printer


def _first(trace: Tracer, kind: str, rid: str) -> dict | None:
    found = trace.filter(kind, "D", req_id=rid)
    return dict(found[0]) if found else None


def mtp_section(c: Console, demo: Demo, lang: str) -> None:
    """Print the six stops for ``demo`` (a run with ``num_speculative_tokens > 0``)."""
    from pdlab.engine.config.attention import MLABackendProfile
    from pdlab.engine.core.sched.scheduler import Scheduler
    from pdlab.engine.worker.gpu.batch import pcp_rank_chunks
    from pdlab.engine.worker.gpu.spec_decode.mtp import MTPProposer
    from pdlab.engine.worker.gpu.spec_decode.rejection_sampler import gather_draft_sampled
    from pdlab.ui.fmt import source_excerpt, source_rich

    t, rid, k = demo.trace, demo.request_id, demo.num_speculative_tokens
    put = printer(c, lang)

    def show(obj, start, end, mark, upstream):
        ex = source_excerpt(obj, start, end, mark)
        put("mtp_src", path=ex.path, qualname=ex.qualname, upstream=upstream)
        c.print(source_rich(ex))

    step, row = t.steps("D", rid)[0]
    rt = dict(t.route_of("D", rid, step["step"]))
    c.print()
    put(
        "mtp_padded",
        k=k,
        nct=row["num_computed_tokens_before"],
        q=row["num_scheduled_tokens"],
        drafts=row["spec_token_ids"],
    )
    show(Scheduler._pad_spec_decode, "if not (", "return padded", "padded = 1 +",
         "vllm/v1/core/sched/scheduler.py, Scheduler.schedule")  # fmt: skip
    put(
        "mtp_stays_decode",
        q=rt["query_len"],
        d=rt["num_draft_tokens"],
        rad=rt["prefill_runs_as_decode"],
        eligible=rt["decode_graph_eligible"],
        u=rt["uniform_decode_token_count"],
    )
    put(
        "mtp_threshold",
        backend=rt["mla_backend"],
        t=rt["decode_threshold"],
        q=rt["query_len"],
        path=rt["path"],
        forward=rt["forward"],
    )
    show(MLABackendProfile.effective_threshold, "t = self.reorder_batch_threshold", "return t",
         "t = max(t, 1 + num_speculative_tokens)",
         "vllm/v1/attention/backend.py, _init_reorder_batch_threshold")  # fmt: skip
    calls = [e for e in t.kernels("D", step["step"], layer=0) if e["name"] == "mla_decode"]
    if rt["path"] == "decode" and calls and "query_start_loc" in calls[0]["shapes"]:
        shapes = calls[0]["shapes"]
        put("mtp_mqa", qsl=shapes["query_start_loc"], seq=shapes["seq_lens"])
    elif rt["path"] != "decode":
        put("mtp_single_only", q=rt["query_len"], t=rt["decode_threshold"])
    v, d = _first(t, "verify", rid), _first(t, "draft", rid)
    if v is not None:
        put(
            "mtp_verify",
            nct=rt["num_computed_tokens"],
            plen=rt["prefill_len"],
            drafts=v["draft_token_ids"],
            target=v["target_token_ids"],
            sampled=v["sampled_token_ids"],
            rej=v["num_rejected"],
            after=rt["num_computed_tokens"] + rt["query_len"] - v["num_rejected"],
        )
        show(gather_draft_sampled, "if num_computed_tokens < prefill_len", "return [t if",
             "PLACEHOLDER_TOKEN_ID] *",
             "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py, "
             "gather_draft_sampled")  # fmt: skip
    if d is not None:
        put(
            "mtp_drafter",
            hp=d["hidden_position"],
            n=rt["num_prompt_tokens"],
            tok=d["next_token"],
            drafts=d["draft_token_ids"],
        )
        show(MTPProposer.propose, "ids = input_ids.clone()", "out = self.mtp(",
             "ids[r.last_token_index] = r.next_token",
             "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py, "
             "prepare_prefill_inputs")  # fmt: skip
    pcp = demo.variant_traces.get(("v2", 2))
    if pcp is not None:
        p = dict(pcp.route_of("D", rid))
        put(
            "mtp_pcp",
            rad=p["prefill_runs_as_decode"],
            eligible=p["decode_graph_eligible"],
            path=p["path"],
            forward=p["forward"],
            q=p["query_len"],
        )
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
    p_drafts = t.filter("draft", "P", req_id=rid)
    p_draft, d_draft = (dict(p_drafts[0]) if p_drafts else None), _first(t, "draft", rid)
    if p_draft is not None and d_draft is not None:
        put(
            "mtp_drafter_row",
            hp=p_draft["hidden_position"],
            ptok=p_draft["next_token"],
            dhp=d_draft["hidden_position"],
            dtok=d_draft["next_token"],
        )
    cut = t.filter("kv_prefill_backoff", "P", req_id=rid)
    k = demo.num_speculative_tokens
    put("mtp_backoff", k=k, cut=cut[0]["num_tokens"] if cut else 0, n=n)
    again = demo.pd_again_id
    if again is None:
        return
    hits = {i: t.filter("prefix_hit", i, req_id=again) for i in ("P", "D")}
    d_hit = hits["D"][0]["num_hit_tokens"] if hits["D"] else 0
    p_hit = hits["P"][0]["num_hit_tokens"] if hits["P"] else 0
    full = (n - 1) // bs * bs
    put("mtp_block_drop", n=n, bs=bs, full=full, d_hit=d_hit, p_hit=p_hit)
