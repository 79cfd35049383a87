"""The tour's chapters 1-3: P prefills and writes each layer's latent rows; its blocks move
into D's; D sets ``num_computed_tokens = N - 1``, and why. Numbers from a
:class:`~pdlab.demo.Demo`'s trace, words from :mod:`pdlab.catalog`. Upstream (vLLM 0.33.0):
``vllm/v1/core/sched/scheduler.py`` (``_update_waiting_for_remote_kv``) and
``vllm/v1/core/kv_cache_manager.py`` (``get_computed_blocks``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from pdlab.catalog import text
from pdlab.ui.fmt import FitTable, elided, source_excerpt, source_rich, span, token_char

if TYPE_CHECKING:  # pdlab.demo imports the engine (torch); these views only read a Demo
    from pdlab.demo import Demo


def say(lang: str, key: str, **values: object) -> str:
    """The words for ``key``, escaped for rich (a prompt such as ``[b]`` prints as typed)."""
    return escape(text(lang, key, **values))


def printer(c: Console, lang: str) -> Callable[..., None]:
    """``put(key, **values)``: print :func:`say`'s words for ``key`` on ``c``."""
    return lambda key, **values: c.print(say(lang, key, **values))


def print_source(c: Console, lang: str, key: str, obj: Any, *where: str, **values: object) -> None:
    """The words for ``key`` with the ``path`` and ``qualname`` of ``obj``, then its source
    (``where``: :func:`~pdlab.ui.fmt.source_excerpt`'s start, end and mark)."""
    ex = source_excerpt(obj, *where)
    c.print(say(lang, key, path=ex.path, qualname=ex.qualname, **values))
    c.print(source_rich(ex))


def columns_table(
    lang: str, title: str, right: Sequence[str] = (), left: Sequence[str] = (), **options: Any
) -> FitTable:
    """A table titled with ``title``'s words, its columns headed by the words of ``right``
    (right-justified), then of ``left``."""
    tab = FitTable(title=say(lang, title), **options)
    for keys, justify in ((right, "right"), (left, "left")):
        for key in keys:
            tab.add_column(say(lang, key), justify=justify)
    return tab


def row_shape(kernels: Sequence[Mapping[str, Any]]) -> tuple[int, int, int]:
    """(layers, kv_lora_rank, qk_rope_head_dim) read off reshape_and_cache_mla calls."""
    writes = [k for k in kernels if k["name"] == "reshape_and_cache_mla"]
    s = writes[0]["shapes"]
    return 1 + max(k["layer"] for k in writes), s["kv_c"][-1], s["k_pe"][-1]


def shown(prompt: str, limit: int = 60) -> str:
    return repr(prompt if len(prompt) <= limit else prompt[: limit - 1] + "…")


def chapter1(c: Console, demo: Demo, lang: str) -> None:
    t, rid, put = demo.trace, demo.request_id, printer(c, lang)
    n = t.first("add_request", "P", req_id=rid)["num_prompt_tokens"]
    put("ch1_tokens", prompt=shown(demo.prompt), n=n)
    steps = t.steps("P", rid)
    if len(steps) == 1:
        put("ch1_whole")
    for ev, r in steps:
        route = t.route_of("P", rid, ev["step"])
        done = {"before": r["num_computed_tokens_before"], "after": r["num_computed_tokens_after"]}
        sched, q = r["num_scheduled_tokens"], route["query_len"]
        put("ch1_step", step=ev["step"], sched=sched, q=q, forward=route["forward"], **done)
    layers, L, R = row_shape(t.kernels("P", steps[0][0]["step"]))
    put("ch1_write", layers=layers, L=L, R=R, W=L + R)
    bs = t.meta["block_size"]
    blocks = steps[-1][1]["block_ids"]
    right, left = ("col_logical", "col_p_block", "col_positions"), ("col_tokens", "col_ids")
    tab = columns_table(lang, "ch1_table", right, left)
    for j in elided(len(blocks), 8, 3):
        if j is None:
            tab.add_row("…", "…", "…", "…", "…")
            continue
        ids = demo.prompt_ids[j * bs : (j + 1) * bs]
        chars, numbers = escape(" ".join(token_char(i) for i in ids)), " ".join(map(str, ids))
        tab.add_row(str(j), str(blocks[j]), span(j * bs, j * bs + len(ids) - 1), chars, numbers)
    c.print(tab)
    tok = t.first("sample", "P", req_id=rid)
    fin = t.first("finish", "P", req_id=rid)
    pos, reason = tok["position"], fin["finish_reason"]
    put("ch1_sample", tok=tok["token"], ch=token_char(tok["token"]), pos=pos, reason=reason)
    if fin.get("kv_transfer_params"):
        put("ch1_hold", delay=fin["delay_free"], blocks=blocks)
        c.print(escape(json.dumps(fin["kv_transfer_params"])))
    freed = t.filter("free", "P", req_id=rid)
    if freed:
        put("ch1_freed", blocks=freed[0]["block_ids"], step=freed[0]["step"])


def chapter2(c: Console, demo: Demo, lang: str) -> None:
    t, rid, put = demo.trace, demo.request_id, printer(c, lang)
    wait = t.first("waiting_for_remote_kvs", "D", req_id=rid)
    put("ch2_admit", ext=wait["num_external_tokens"], blocks=wait["block_ids"])
    x = t.first("kv_transfer", "D", req_id=rid)
    if not x["ok"]:
        put("ch2_failed", reason=x["reason"])
    bs = t.meta["block_size"]
    n = t.first("add_request", "D", req_id=rid)["num_prompt_tokens"]
    cols = ("col_p_block", "col_d_block", "col_positions", "col_rows")
    tab = columns_table(lang, "ch2_table", cols)
    pairs = list(zip(x["remote_block_ids"], x["local_block_ids"]))
    for j in elided(len(pairs), 8, 3):
        if j is None:
            tab.add_row("…", "…", "…", "…")
            continue
        lo, hi = j * bs, min((j + 1) * bs, n) - 1
        tab.add_row(str(pairs[j][0]), f"→ {pairs[j][1]}", span(lo, hi), str(hi - lo + 1))
    c.print(tab)
    layers, L, R = row_shape(t.filter("kernel", "P"))
    rows, nbytes = len(pairs) * bs * layers * (L + R), x["nbytes"]
    if rows and nbytes % rows == 0:
        size = {"nb": len(pairs), "bs": bs, "layers": layers, "W": L + R}
        put("ch2_bytes", nbytes=nbytes, e=nbytes // rows, **size)
    else:
        put("ch2_bytes_plain", nbytes=nbytes)


def chapter3(c: Console, demo: Demo, lang: str) -> None:
    t, rid, put = demo.trace, demo.request_id, printer(c, lang)
    wait = t.first("waiting_for_remote_kvs", "D", req_id=rid)
    put("ch3_wait", step=wait["step"], ext=wait["num_external_tokens"])
    ready = t.first("remote_kv_ready", "D", req_id=rid)
    n, nct = ready["num_prompt_tokens"], ready["num_computed_tokens"]
    before_adjust = ready["num_computed_tokens_before_adjust"]
    put("ch3_ready", step=ready["step"], before=before_adjust, n=n, nct=nct)
    ev, r = t.steps("D", rid)[0]
    before, after = r["num_computed_tokens_before"], r["num_computed_tokens_after"]
    sched = r["num_scheduled_tokens"]
    put("ch3_sched", step=ev["step"], sched=sched, pos=before, before=before, after=after)
    # The table: every layer's K/V row per position (in D's blocks), against h[N-1].
    layers, L, R = row_shape(t.kernels("D", ev["step"]))
    bs, d_blocks = t.meta["block_size"], t.first("kv_transfer", "D", req_id=rid)["local_block_ids"]
    last = n - 1
    tab = FitTable(title=say(lang, "ch3_table"))
    tab.add_column(say(lang, "col_pos"), justify="right")
    tab.add_column(say(lang, "col_token"))
    tab.add_column(say(lang, "col_d_slot"), justify="right")
    per_layer = layers <= 3
    if per_layer:
        for layer in range(layers):
            tab.add_column(say(lang, "col_layer_kv", l=layer))
    else:
        tab.add_column(say(lang, "col_layers_kv", a=0, b=layers - 1))
    tab.add_column(say(lang, "col_h", l=layers - 1))
    for pos in elided(n, 3, 3):
        if pos is None:
            tab.add_row(*["…"] * (4 + (layers if per_layer else 1)))
            continue
        kv = say(lang, "cell_rewritten") if pos == last else f"✓ {L}|{R}"
        h = say(lang, "cell_needed") if pos == last else "—"
        slot = f"{d_blocks[pos // bs]}[{pos % bs}]"
        cells = [kv] * (layers if per_layer else 1)
        tab.add_row(str(pos), escape(token_char(demo.prompt_ids[pos])), slot, *cells, h)
    c.print(tab)
    reused = f"0..{last - 1}" if last else "—"
    shape = {"layers": layers, "W": L + R, "H": demo.cfg.hidden_size}
    put("ch3_explain", n=n, last=last, reused=reused, **shape)
    d_tok = t.first("sample", "D", req_id=rid)["token"]
    p_tok = t.first("sample", "P", req_id=rid)["token"]
    put("ch3_check", d=d_tok, p=p_tok, verdict=say(lang, "same" if d_tok == p_tok else "different"))
    from pdlab.engine.core.kv_cache_manager import KVCacheManager
    from pdlab.engine.core.sched.scheduler import Scheduler

    fn, end = Scheduler._update_waiting_for_remote_kv, "request.num_tokens - 1"
    print_source(c, lang, "ch3_src", fn, "before_adjust = request", end, end)
    put("ch3_cached", nct=nct, n=n)
    fn = KVCacheManager.get_computed_blocks
    print_source(c, lang, "ch3_local", fn, "max_cache_hit_length =", "max_num_blocks =", "- 1")
    hit = t.first("admit", "local", req_id=demo.local_ids[1])["num_cached_tokens"]
    put("ch3_local_hit", hit=hit, bs=bs, nm1=n - 1, expect=(n - 1) // bs * bs, n=n)
