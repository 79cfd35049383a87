"""``pdlab bench``: measurements, reported as ratios from one run (these machines are noisy).

* ``paths``: D's one-token step (one query over ``N - 1`` cached tokens) through
  ``forward_mha`` and through ``forward_mqa`` (vLLM's
  ``vllm/model_executor/layers/attention/mla_attention.py``), one attention layer at a
  preset's real widths, timed beside the cost model's FLOPs and bytes of each path and
  this machine's floor for it (:func:`pdlab.tools.measure.floor_ms`). With
  ``num_speculative_tokens = K`` it also times the decode kernel for D's verifying step
  (``1 + K`` queries of one request) beside one query, and beside the same queries
  flattened to one row each (how 0.33.0's Triton MLA runs them);
* ``kernels``: each kernel (``pdlab/tools/bench_kernels.py``);
* ``sched``: the scheduler's own time per step (``pdlab/tools/bench_sched.py``).

The tables are rendered in ``lang`` (the words are in ``pdlab/catalog/bench.py``); the
results hold numbers and English notes only.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch

from pdlab.engine.attention.mla_attention import ForwardContext, MLAAttention
from pdlab.engine.attention.mla_builder import build_mla_metadata
from pdlab.engine.config import ModelConfig, ParallelConfig
from pdlab.engine.config.speculative import MAX_NUM_SPECULATIVE_TOKENS
from pdlab.engine.llm_engine import one_thread
from pdlab.errors import Phrase, invalid
from pdlab.sim import kernel_costs as cost
from pdlab.tools.measure import floor_ms, measure_ceilings, median_ms


@torch.no_grad()
def bench_paths(
    preset: str = "deepseek-v3",
    contexts: list[int] | None = None,
    num_heads: int | None = None,
    block_size: int = 64,
    repeats: int = 3,
    backend: str | None = None,
    device: str | None = None,
    workspace_tokens: int = 65536,
    seed: int = 0,
    progress: Callable[[int, int, str], None] | None = None,
    num_speculative_tokens: int | None = None,
    lang: str = "en",
) -> dict[str, Any]:
    """Time one layer's attention for D's short extend through both paths (and, with
    ``num_speculative_tokens``, the decode kernel for ``1 + K`` queries: ``"spec"``);
    ``progress(done, total, label)`` is called before each measurement and at the end."""
    from pdlab.catalog import check_lang, text

    check_lang(lang)
    contexts = contexts or [1024, 4096, 16384]
    if not contexts or any(
        isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in contexts
    ):
        raise invalid("contexts", contexts, Phrase("err_x_ints_ge", n=1))
    K = num_speculative_tokens
    top = MAX_NUM_SPECULATIVE_TOKENS
    if K is not None and (isinstance(K, bool) or not isinstance(K, int) or not 1 <= K <= top):
        raise invalid("num_speculative_tokens", K, Phrase("err_x_int_range", a=1, b=top))
    cfg = ModelConfig.preset(preset)
    if num_heads is not None:
        cfg = cfg.replace(num_attention_heads=num_heads, weights="random")  # timing only
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    from pdlab.kernels import backend as kb

    be = kb.resolve(backend) if backend else ("torch" if dev.type == "cpu" else kb.get_backend())
    g = torch.Generator(device="cpu").manual_seed(seed)
    h, L = cfg.num_attention_heads, cfg.kv_lora_rank
    kv_b = torch.nn.Linear(L, h * (cfg.qk_nope_head_dim + cfg.v_head_dim), bias=False)
    kv_b.weight.copy_(torch.randn(kv_b.weight.shape, generator=g) * L**-0.5)
    layer = SimpleNamespace(cfg=cfg, layer_idx=0, kv_b_proj=kv_b.to(dev, dtype))
    attn = MLAAttention()
    # On a CPU one thread: on a shared machine, two threads' barriers stall.
    with one_thread() if dev.type == "cpu" else contextlib.nullcontext():
        tell = progress or (lambda done, total, label: None)
        total = len(contexts) * (1 if K is None else 2) + 1
        tell(0, total, text(lang, "bp_progress_rates"))
        ceilings = measure_ceilings(dev, dtype, quick=repeats <= 3)
        run = SimpleNamespace(layer=layer, attn=attn, g=g, dev=dev, dtype=dtype, backend=be)
        run.block_size, run.repeats, run.ceilings = block_size, repeats, ceilings
        run.workspace_tokens = workspace_tokens
        rows, spec = [], []
        for i, n in enumerate(contexts):
            tell(i + 1, total, text(lang, "bp_progress_paths", n=n, repeats=repeats))
            rows.append(_path_row(run, n))
        for i, n in enumerate(contexts if K is not None else []):
            tell(len(contexts) + i + 1, total, text(lang, "bp_progress_spec", n=n, k=K))
            spec.append(spec_decode_row(run, n, K))
        tell(total, total, text(lang, "bench_done"))
    out = {"preset": cfg.name, "num_heads": h, "device": str(dev), "dtype": str(dtype)}
    out |= {"backend": be, "block_size": block_size, "repeats": repeats}
    out |= {"threads": 1 if dev.type == "cpu" else None, "ceilings": ceilings, "rows": rows}
    out |= {"num_speculative_tokens": K, "spec": spec} if K is not None else {}
    return out | {"note": text("en", "bp_note", repeats=repeats)}  # the JSON's words: English


def _path_row(run: SimpleNamespace, n_ctx: int) -> dict[str, Any]:
    """One context length: both paths timed, their modelled cost and this machine's floor."""
    cfg, g, dev, dtype = run.layer.cfg, run.g, run.dev, run.dtype
    block_size, repeats, ceilings = run.block_size, run.repeats, run.ceilings
    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    nblocks = -(-(n_ctx + 1) // block_size)
    cache = torch.randn(nblocks, block_size, L + R, generator=g).to(dev, dtype)
    q = (torch.randn(1, h, cfg.qk_head_dim, generator=g) * 0.5).to(dev, dtype)
    kv_c = torch.randn(1, L, generator=g).to(dev, dtype)
    k_pe = torch.randn(1, R, generator=g).to(dev, dtype)
    perm = torch.randperm(nblocks, generator=g).to(torch.int32)
    slot = int(perm[n_ctx // block_size]) * block_size + n_ctx % block_size

    def step(pcp: int) -> torch.Tensor:
        """One layer's step for one query over ``n_ctx`` cached tokens, still in its prompt:
        ``forward_mha`` with ``pcp=2``, ``forward_mqa`` with ``pcp=1``
        (``treat_short_extends_as_decodes = not use_pcp``)."""
        slots = torch.tensor([slot], dtype=torch.int64, device=dev)
        ws, parallel = run.workspace_tokens, ParallelConfig(prefill_context_parallel_size=pcp)
        args = ([1], [n_ctx], [n_ctx + 1], perm[None].to(dev), slots, block_size)
        meta = build_mla_metadata(*args, parallel_config=parallel, workspace_size=ws)
        ctx = ForwardContext(meta, [cache], run.attn, run.backend, workspace_tokens=ws)
        return run.attn.forward_impl(run.layer, q, kv_c, k_pe, ctx)

    out_p, out_d = step(2), step(1)
    err = float((out_p.float() - out_d.float()).abs().max())
    t_pre = median_ms(functools.partial(step, 2), dev, repeats)
    t_dec = median_ms(functools.partial(step, 1), dev, repeats)
    e = 2 if dtype == torch.bfloat16 else 4
    # pdlab's own forward_mha packs V (v.contiguous()), unlike Hopper's FA3 prefill: cost
    # what runs here.
    cp = cost.prefill_path_cost(cfg, n_ctx, e=e, prefill_backend="pdlab")
    cd = cost.decode_path_cost(cfg, n_ctx, e=e)
    f_pre, f_dec = floor_ms(cp.flops, cp.bytes, ceilings), floor_ms(cd.flops, cd.bytes, ceilings)
    return {
        "context": n_ctx,
        "prefill_ms": t_pre,
        "decode_ms": t_dec,
        "measured_ratio": t_pre / t_dec,
        "prefill_gflop": cp.flops / 1e9,
        "decode_gflop": cd.flops / 1e9,
        "flop_ratio": cp.flops / cd.flops,
        "prefill_mb": cp.bytes / 1e6,
        "decode_mb": cd.bytes / 1e6,
        "bytes_ratio": cp.bytes / cd.bytes,
        "max_abs_diff": err,
        "prefill_floor_ms": f_pre,
        "decode_floor_ms": f_dec,
        "prefill_vs_floor": t_pre / f_pre,
        "decode_vs_floor": t_dec / f_dec,
    }


def _table(res: dict, lang: str, key: str, title: dict, caption: str, columns: tuple, **values):
    """A :class:`~pdlab.ui.fmt.FitTable` titled ``key`` (with ``title`` and the run's set-up
    filled in) with ``columns`` (``(col, legend, ...)``: the header is ``col``, the short
    header ``col_s``, ``legend`` the key of what the short one stands for, or None for a
    column the legend has named already) in ``lang``, right-justified."""
    from rich.markup import escape

    from pdlab.catalog import text
    from pdlab.ui.fmt import FitTable

    setup = {k: res[k] for k in ("preset", "device", "dtype", "backend")}
    heading = text(lang, key, h=res["num_heads"], **setup, **title)
    legend = escape(text(lang, "bench_legend"))
    t = FitTable(title=escape(heading), caption=escape(caption), legend=legend)
    for col, means, *_ in columns:
        t.add_column(
            escape(text(lang, col, **values)),
            justify="right",
            short=escape(text(lang, f"{col}_s", **values)),
            means=escape(text(lang, means, **values)) if means else "",
        )
    return t


_PATH_COLUMNS = (  # (header, legend, the row's value, its format)
    ("bp_ctx", "bp_ctx_m", "context", "{}"),
    ("bp_mha", "bp_mha_m", "prefill_ms", "{:.2f}"),
    ("bp_floor", "bp_floor_m", "prefill_floor_ms", "{:.2f}"),
    ("bp_xfloor", "bp_xfloor_m", "prefill_vs_floor", "{:.1f}x"),
    ("bp_mqa", "bp_mqa_m", "decode_ms", "{:.2f}"),
    ("bp_floor", None, "decode_floor_ms", "{:.2f}"),
    ("bp_xfloor", None, "decode_vs_floor", "{:.1f}x"),
    ("bp_ratio", "bp_ratio_m", "measured_ratio", "{:.1f}x"),
    ("bp_flop", "bp_flop_m", "flop_ratio", "{:.1f}x"),
    ("bp_bytes", "bp_bytes_m", "bytes_ratio", "{:.1f}x"),
    ("bp_diff", "bp_diff_m", "max_abs_diff", "{:.1e}"),
)


def render_paths_table(res: dict[str, Any], lang: str = "en") -> Any:
    """The table ``pdlab bench paths`` prints, in ``lang``."""
    from pdlab.catalog import text

    c = res["ceilings"]
    rates = {"matmul": f"{c['matmul_tflops'] * 1e3:.0f}", "copy": f"{c['copy_gbps']:.1f}"}
    note = text(lang, "bp_note", repeats=res["repeats"]) if "repeats" in res else res["note"]
    t = _table(res, lang, "bp_title", rates, note, _PATH_COLUMNS)
    for r in res["rows"]:
        t.add_row(*(spec.format(r[k]) for _, _, k, spec in _PATH_COLUMNS))
    return t


def spec_decode_row(run: SimpleNamespace, n_ctx: int, K: int) -> dict[str, Any]:
    """``mla_decode`` for one request over ``n_ctx`` cached tokens: one query (``n_ctx + 1``
    keys), ``1 + K`` queries sharing the rows (``n_ctx + 1 + K`` keys, ``query_start_loc``),
    and the same ``1 + K`` queries flattened to one row each (a repeated block table and a
    key count per row, as 0.33.0's Triton MLA). Times, modelled cost, floors."""
    from pdlab.kernels import decode_attention as da

    cfg, g, dev, dtype = run.layer.cfg, run.g, run.dev, run.dtype
    block_size, repeats, ceilings = run.block_size, run.repeats, run.ceilings
    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    q_len, seq = 1 + K, n_ctx + 1 + K
    pages = -(-seq // block_size)
    cache = torch.randn(pages, block_size, L + R, generator=g).to(dev, dtype)
    table = torch.randperm(pages, generator=g).to(torch.int32)[None].to(dev)
    q = (torch.randn(q_len, h, L + R, generator=g) * 0.5).to(dev, dtype)
    qsl = torch.tensor([0, q_len], dtype=torch.int32, device=dev)
    row_lens = torch.arange(seq - q_len + 1, seq + 1, dtype=torch.int32, device=dev)
    one_len = torch.tensor([n_ctx + 1], dtype=torch.int32, device=dev)
    scale, e = cfg.softmax_scale, 2 if dtype == torch.bfloat16 else 4
    kw = {"kv_lora_rank": L, "backend": run.backend}

    def call(qq: torch.Tensor, tbl: torch.Tensor, lens: torch.Tensor, qs=None) -> Any:
        splits = da.plan_num_kv_splits(qq, lens, None, L, qs)
        fn = functools.partial(da.mla_decode, qq, cache, tbl, lens, scale, splits, qs, **kw)
        return splits, fn

    cases = {
        "one": (call(q[:1], table, one_len), [n_ctx + 1], None),
        "spec": (call(q, table, torch.tensor([seq], dtype=torch.int32, device=dev), qsl),
                 [seq], [q_len]),
        "flat": (call(q, table.expand(q_len, -1), row_lens), row_lens.tolist(), None),
    }  # fmt: skip
    out: dict[str, Any] = {"context": n_ctx, "K": K}
    for name, ((splits, fn), lens, q_lens) in cases.items():
        flops, nbytes = cost.mla_decode_call_cost(lens, h, L, R, splits, e, q_lens)
        ms = median_ms(fn, dev, repeats)
        out[f"{name}_ms"], out[f"{name}_splits"] = ms, splits
        out[f"{name}_gflop"], out[f"{name}_mb"] = flops / 1e9, nbytes / 1e6
        out[f"{name}_floor_ms"] = floor_ms(flops, nbytes, ceilings)
        out[f"{name}_vs_floor"] = ms / out[f"{name}_floor_ms"]
    out["measured_ratio"] = out["spec_ms"] / out["one_ms"]
    out["flop_ratio"] = out["spec_gflop"] / out["one_gflop"]
    out["bytes_ratio"] = out["spec_mb"] / out["one_mb"]
    out["flat_vs_spec"] = out["flat_ms"] / out["spec_ms"]
    out["flat_bytes_ratio"] = out["flat_mb"] / out["spec_mb"]
    shared, flat = cases["spec"][0][1](), cases["flat"][0][1]()
    out["max_abs_diff"] = float((shared[0].float() - flat[0].float()).abs().max())
    return out


_SPEC_COLUMNS = (
    ("bp_ctx", "bp_ctx_m", "context", "{}"),
    ("bs_one", "bs_one_m", "one_ms", "{:.2f}"),
    ("bp_xfloor", "bp_xfloor_m", "one_vs_floor", "{:.1f}x"),
    ("bs_many", "bs_many_m", "spec_ms", "{:.2f}"),
    ("bp_xfloor", None, "spec_vs_floor", "{:.1f}x"),
    ("bp_ratio", "bs_ratio_m", "measured_ratio", "{:.2f}x"),
    ("bp_flop", "bp_flop_m", "flop_ratio", "{:.2f}x"),
    ("bp_bytes", "bp_bytes_m", "bytes_ratio", "{:.2f}x"),
    ("bs_flat", "bs_flat_m", "flat_vs_spec", "{:.2f}x"),
    ("bs_fbytes", "bs_fbytes_m", "flat_bytes_ratio", "{:.2f}x"),
    ("bp_diff", "bs_diff_m", "max_abs_diff", "{:.1e}"),
)


def render_spec_table(res: dict[str, Any], lang: str = "en") -> Any:
    """The second table of ``pdlab bench paths --num-speculative-tokens K``, in ``lang``."""
    from pdlab.catalog import text

    K = res["num_speculative_tokens"]
    t = _table(res, lang, "bs_title", {"q": 1 + K}, text(lang, "bs_note"), _SPEC_COLUMNS, k=K)
    for r in res["spec"]:
        t.add_row(*(spec.format(r[k]) for _, _, k, spec in _SPEC_COLUMNS))
    return t
