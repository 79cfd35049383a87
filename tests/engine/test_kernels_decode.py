"""mla_decode, Triton and torch, against the oracle; and decode == prefill for one token.

The oracle for ``mla_decode`` is ``naive_attention`` as MQA: one query token per request,
keys = the request's latent rows ``[kv_c | k_pe]`` as a single head, values = their first
``L`` columns. With ``kv_b_proj`` weights, the same result mapped through ``W_UV`` must equal
``mla_absorbed`` and ``mla_naive``.

Tolerances (see ``kernel_utils``): out fp32 1e-5 (5e-3 on a GPU), fp16 3e-3, bf16 2e-2;
LSE fp32 1e-5 (5e-3 on a GPU), fp16/bf16 2e-3 (bf16 5e-3 on a GPU).

With ``query_start_loc`` (the ``1 + K`` queries of speculative decoding) the oracle is
``naive_attention`` of each request's queries over its rows with ``causal=True`` (the
reference's bottom-right mask), same tolerances; where NaN sits in keys past some queries'
causal limit, those queries are held to the oracle on the clean rows.
"""

from types import SimpleNamespace

import pytest
import torch
from kernel_utils import (
    ALL_IMPLS,
    DEVICE,
    HAS_TRITON,
    MAIN_IMPLS,
    assert_close,
    cu_seqlens,
    paged_cache,
    randn,
)

from pdlab.attention.reference import mla_absorbed, mla_naive, naive_attention, split_kv_b_proj
from pdlab.engine.attention.mla_attention import ForwardContext, MLAAttention
from pdlab.engine.attention.mla_builder import build_mla_metadata
from pdlab.engine.config import ModelConfig, ParallelConfig
from pdlab.kernels import decode_attention, mla_decode, reshape_and_cache_mla
from pdlab.kernels.backend import triton_interpreting


def _oracle(q, rows, L, scale):
    """naive_attention of each request's one query over its rows, as MQA (1 KV head)."""
    outs, lses = [], []
    for b, r in enumerate(rows):
        if r.shape[0] == 0:
            outs.append(torch.zeros(1, q.shape[1], L))
            lses.append(torch.full((1, q.shape[1]), float("-inf")))
            continue
        r = r.float().cpu()
        o, lse = naive_attention(
            q[b : b + 1].float().cpu(), r[:, None, :], r[:, None, :L], scale, causal=False
        )
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


def _run_decode(backend, dtype, lens, block_size, splits, L, R, H, seed):
    g = torch.Generator().manual_seed(seed)
    p = paged_cache(lens, block_size, L + R, dtype, g)
    q = randn(len(lens), H, L + R, g=g, dtype=dtype)
    scale = 0.3
    out, lse = mla_decode(
        q,
        p.kv_cache,
        p.block_table,
        p.seq_lens,
        scale,
        num_kv_splits=splits,
        kv_lora_rank=L,
        backend=backend,
    )
    assert out.shape == (len(lens), H, L) and out.dtype == dtype
    assert lse.shape == (len(lens), H) and lse.dtype == torch.float32
    assert not out.isnan().any() and not lse.isnan().any(), "read a NaN trap"
    exp_out, exp_lse = _oracle(q, p.rows, L, scale)
    assert_close(out, exp_out, dtype, what="out")
    assert_close(lse, exp_lse, dtype, lse=True, what="lse")


@pytest.mark.parametrize("backend,dtype", MAIN_IMPLS)
@pytest.mark.parametrize("block_size", [1, 4, 16, 64])
@pytest.mark.parametrize("splits", ["auto", "1", "4", "more-than-tiles"])
def test_mla_decode_ragged_paged(backend, dtype, block_size, splits):
    """Tiny widths (64 + 16, 4 heads); lengths 1, one block, one block plus one, 37, 150,
    and an empty request, in shuffled order. With 4 splits the long request is split and the
    short ones are not (stage 1 writes them); past the tiles, the extra splits are empty."""
    lens = [block_size + 1, 1, 150, 0, block_size, 37]
    tile = decode_attention.mla_decode_config(64, 16, dtype.itemsize)["stage1"]["BLOCK_N"]
    num_splits = {"auto": None, "1": 1, "4": 4}.get(splits, -(-150 // tile) + 3)
    _run_decode(backend, dtype, lens, block_size, num_splits, 64, 16, 4, seed=block_size)


@pytest.mark.parametrize("backend,dtype", ALL_IMPLS)
@pytest.mark.parametrize("block_size", [16, 64])
def test_mla_decode_deepseek_widths(backend, dtype, block_size):
    """576 = 512 + 64, handled as two power-of-two parts; 3 heads pad to a 16-head tile."""
    _run_decode(backend, dtype, [1, 65, 100], block_size, 4, 512, 64, 3, seed=10 + block_size)


@pytest.mark.parametrize("backend,dtype", ALL_IMPLS[1:3] + ALL_IMPLS[4:5])
def test_mla_decode_half_types_tiny(backend, dtype):
    """bf16 through Triton (upcast on the interpreter), fp16 through the twin."""
    _run_decode(backend, dtype, [3, 40, 17], 4, 4, 64, 16, 4, seed=20)


@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.parametrize("splits", [1, 8])
def test_mla_decode_empty_requests(backend, splits):
    """seq_len 0: out 0 and lse -inf, not NaN (every split is empty)."""
    if backend == "triton" and not HAS_TRITON:
        pytest.skip("needs triton")
    g = torch.Generator().manual_seed(0)
    p = paged_cache([0, 0], 4, 80, torch.float32, g)
    q = randn(2, 4, 80, g=g, dtype=torch.float32)
    out, lse = mla_decode(
        q, p.kv_cache, p.block_table, p.seq_lens, 0.2, num_kv_splits=splits, backend=backend
    )
    assert (out == 0).all() and torch.isneginf(lse).all()


def test_num_kv_splits_auto_follows_its_formula():
    """One wave over the device, at least MIN_TILES_PER_SPLIT tiles per split, workspace at
    most 1/8 of the cache bytes; a big batch or a short context is not split."""
    auto, da = decode_attention.num_kv_splits_auto, decode_attention
    tiles = da.MIN_TILES_PER_SPLIT * da.BLOCK_N
    assert auto(64, 128, 4096, 132) == 1  # 512 programs already fill 132 SMs
    assert auto(1, 16, tiles - 1, 132) == 1  # shorter than one split's minimum
    assert auto(1, 16, 1 << 20, 132) == min(132, da.MAX_NUM_KV_SPLITS)
    for batch, heads, ctx in [(1, 128, 32768), (8, 16, 4096), (2, 128, 8192), (1, 4, 700)]:
        s = auto(batch, heads, ctx, 132)
        groups = -(-heads // da.BLOCK_H)
        assert 1 <= s <= -(-132 // (batch * groups))
        assert s == 1 or s * tiles <= ctx + da.BLOCK_N - 1  # at least 4 whole tiles each
        assert s == 1 or 8 * 512 * 4 * 2 * heads * s <= ctx * 576 * 2  # workspace <= 1/8


@pytest.mark.skipif(not HAS_TRITON, reason="needs triton")
def test_stage2_is_skipped_when_nothing_is_split(monkeypatch):
    """S = 1 (automatic, for a short context): no workspace, no second launch."""

    class NoLaunch:
        def __getitem__(self, grid):
            raise AssertionError("stage 2 launched although nothing was split")

    monkeypatch.setattr(decode_attention, "mla_decode_stage2_kernel", NoLaunch())
    g = torch.Generator().manual_seed(3)
    p = paged_cache([5, 60], 16, 80, torch.float32, g)
    q = randn(2, 4, 80, g=g, dtype=torch.float32)
    out, lse = mla_decode(q, p.kv_cache, p.block_table, p.seq_lens, 0.2, backend="triton")
    exp_out, exp_lse = _oracle(q, p.rows, 64, 0.2)
    assert_close(out, exp_out, torch.float32, what="out")
    assert_close(lse, exp_lse, torch.float32, lse=True, what="lse")


def _weights(cfg: ModelConfig, g: torch.Generator) -> torch.Tensor:
    h = cfg.num_attention_heads
    return (
        torch.randn(h * (cfg.qk_nope_head_dim + cfg.v_head_dim), cfg.kv_lora_rank, generator=g)
        * cfg.kv_lora_rank**-0.5
    )


@pytest.mark.parametrize("backend,dtype", MAIN_IMPLS)
def test_mla_decode_equals_mla_absorbed_and_naive(backend, dtype):
    """Through kv_b_proj: absorb W_UK into the query, decode, map the latent out by W_UV."""
    cfg = ModelConfig.tiny()
    g = torch.Generator().manual_seed(4)
    lens, L = [9, 1, 30], cfg.kv_lora_rank
    p = paged_cache(lens, 4, cfg.kv_cache_dim, dtype, g)
    w = _weights(cfg, g)
    w_uk, w_uv = split_kv_b_proj(w, cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.v_head_dim)
    q = torch.randn(len(lens), cfg.num_attention_heads, cfg.qk_head_dim, generator=g).to(dtype)
    q_nope, q_pe = q[..., : cfg.qk_nope_head_dim].float(), q[..., cfg.qk_nope_head_dim :].float()
    q_mqa = torch.cat([torch.einsum("bhd,hdl->bhl", q_nope, w_uk), q_pe], dim=-1)
    out_lat, lse = mla_decode(
        q_mqa.to(dtype).to(DEVICE),
        p.kv_cache,
        p.block_table,
        p.seq_lens,
        cfg.softmax_scale,
        kv_lora_rank=L,
        backend=backend,
    )
    out = torch.einsum("bhl,hdl->bhd", out_lat.float().cpu(), w_uv)
    for b, rows in enumerate(p.rows):
        rows = rows.float().cpu()
        args = (
            q[b : b + 1],
            rows[:, :L],
            rows[:, L:],
            w,
            cfg.qk_nope_head_dim,
            cfg.v_head_dim,
            cfg.softmax_scale,
            False,
        )
        for oracle in (mla_absorbed, mla_naive):
            exp_out, exp_lse = oracle(*args)
            # q_mqa is rounded to dtype after absorbing: allow the half types twice the room.
            tol_dtype = dtype if dtype == torch.float32 else torch.bfloat16
            assert_close(out[b], exp_out[0], tol_dtype, what=oracle.__name__)
            assert_close(
                lse[b],
                exp_lse[0],
                tol_dtype,
                lse=dtype == torch.float32,
                what=f"{oracle.__name__} lse",
            )


@pytest.mark.parametrize("backend,dtype", MAIN_IMPLS)
@pytest.mark.parametrize("preset", ["tiny", "deepseek-v3"])
def test_decode_equals_prefill_for_one_token(backend, dtype, preset):
    """The P/D question: on D, the last prompt token (position N-1) runs again over N-1 cached
    tokens. Routed as a decode (``forward_mqa``: absorbed ``mla_decode`` over all N rows)
    or as a prefill (``forward_mha``: gather the context, up-project, flash attention,
    merge) by the real ``MLAAttention``, the result is the same, and equals ``mla_naive``."""
    cfg = ModelConfig.preset(preset, num_attention_heads=2 if preset != "tiny" else 4)
    g = torch.Generator().manual_seed(8)
    H, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    lens, block_size = [1, 6, 17, 40], 4  # N per request (1: no context at all)
    B = len(lens)
    w = _weights(cfg, g)
    kv_b = torch.nn.Linear(L, w.shape[0], bias=False)
    kv_b.weight.data.copy_(w)
    layer = SimpleNamespace(cfg=cfg, layer_idx=0, kv_b_proj=kv_b.to(DEVICE, dtype))
    q = torch.randn(B, H, cfg.qk_head_dim, generator=g).to(dtype)  # the token at position N-1

    # The cache holds the transferred N-1 rows; this step writes the token's own row.
    p = paged_cache(lens, block_size, L + R, dtype, g, fill=False)
    for b, n in enumerate(lens):
        rows = p.rows[b][: n - 1]
        reshape_and_cache_mla(
            rows[:, :L].contiguous(),
            rows[:, L:].contiguous(),
            p.kv_cache,
            p.slot_mapping(b, torch.arange(n - 1)),
            backend=backend,
        )
    last = torch.stack([r[-1] for r in p.rows]).to(DEVICE)
    slots = torch.cat([p.slot_mapping(b, torch.tensor([n - 1])) for b, n in enumerate(lens)])

    def step(pcp: int) -> torch.Tensor:
        # Still in their prompts, the one-token steps are decodes unless prefill context
        # parallelism is on (treat_short_extends_as_decodes = not use_pcp).
        meta = build_mla_metadata(
            [1] * B,
            [n - 1 for n in lens],
            lens,
            p.block_table,
            slots.to(DEVICE),
            block_size,
            parallel_config=ParallelConfig(prefill_context_parallel_size=pcp),
            workspace_size=16,
        )
        attn = MLAAttention()
        ctx = ForwardContext(meta, [p.kv_cache.clone()], attn, backend, workspace_tokens=16)
        out = attn.forward_impl(layer, q.to(DEVICE), last[:, :L], last[:, L:], ctx)
        assert (meta.num_decodes, meta.num_prefills) == ((B, 0) if pcp == 1 else (0, B))
        return out.float().cpu()

    out_decode, out_prefill = step(1), step(2)
    # Rounding the up-projected K/V (prefill) or the absorbed query (decode) to a half type
    # costs more than one rounding: hold both paths to the bf16 tolerance then.
    tol_dtype = dtype if dtype == torch.float32 else torch.bfloat16
    nope, dv, scale = cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.softmax_scale
    for b, rows in enumerate(p.rows):
        rows = rows.float().cpu()
        exp, _ = mla_naive(q[b : b + 1], rows[:, :L], rows[:, L:], w, nope, dv, scale, causal=True)
        assert_close(out_decode[b], exp[0], tol_dtype, what=f"decode, N={lens[b]}")
        assert_close(out_prefill[b], exp[0], tol_dtype, what=f"prefill, N={lens[b]}")


@pytest.mark.skipif(not (HAS_TRITON and triton_interpreting()), reason="interpreter only")
def test_bf16_on_the_interpreter_is_upcast_or_refused():
    """bf16 arithmetic is wrong in the interpreter: launchers upcast, and refuse otherwise."""
    from pdlab.kernels.common import guard_interpreter_dtype, upcast

    assert upcast(torch.bfloat16) and not upcast(torch.float16)
    with pytest.raises(RuntimeError, match="bf16 through the Triton interpreter"):
        guard_interpreter_dtype(torch.bfloat16, False)
    guard_interpreter_dtype(torch.bfloat16, True)
    guard_interpreter_dtype(torch.float16, False)


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_bad_inputs_name_the_argument(backend):
    if backend == "triton" and not HAS_TRITON:
        pytest.skip("needs triton")
    q, cache = torch.zeros(2, 4, 80), torch.zeros(8, 4, 80)
    table, lens = torch.zeros(2, 3, dtype=torch.int32), torch.ones(2, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"kv_cache: .*row width L \+ R = q's width"):
        mla_decode(q, cache[..., :64], table, lens, 0.1, backend=backend)
    with pytest.raises(ValueError, match=r"seq_lens: expected dtype torch\.int32"):
        mla_decode(q, cache, table, lens.long(), 0.1, backend=backend)
    with pytest.raises(ValueError, match=r"block_table: .*one row per request"):
        mla_decode(q, cache, table[:1], lens, 0.1, backend=backend)
    with pytest.raises(ValueError, match=r"num_kv_splits: expected an int >= 1"):
        mla_decode(q, cache, table, lens, 0.1, num_kv_splits=0, backend=backend)
    with pytest.raises(ValueError, match=r"kv_lora_rank: expected an int in \[1, 79\]"):
        mla_decode(q, cache, table, lens, 0.1, kv_lora_rank=80, backend=backend)
    with pytest.raises(ValueError, match=r"kv_cache: expected dtype torch\.float32"):
        mla_decode(q, cache.half(), table, lens, 0.1, backend=backend)


# ---- more than one query per request: query_start_loc (the 1 + K rows of speculative
# decoding). Query j of request b sees keys < seq_lens[b] - q_len_b + j + 1 (bottom-right).
def _spec_oracle(q, rows, q_lens, L, scale):
    """naive_attention of each request's queries over its rows with the causal cut (the
    reference's bottom-right mask), as MQA."""
    outs, lses, t = [], [], 0
    for r, n in zip(rows, q_lens):
        r = r.float().cpu()
        o, lse = naive_attention(
            q[t : t + n].float().cpu(), r[:, None, :], r[:, None, :L], scale, causal=True
        )
        outs.append(o)
        lses.append(lse)
        t += n
    return torch.cat(outs), torch.cat(lses)


def _spec_inputs(lens, q_lens, block_size, dtype, L, R, H, seed):
    g = torch.Generator().manual_seed(seed)
    p = paged_cache(lens, block_size, L + R, dtype, g)
    q = randn(sum(q_lens), H, L + R, g=g, dtype=dtype)
    return p, q, cu_seqlens(q_lens)


def _run_spec(backend, dtype, lens, q_lens, block_size, splits, L, R, H, seed, scale=0.3):
    p, q, qsl = _spec_inputs(lens, q_lens, block_size, dtype, L, R, H, seed)
    out, lse = mla_decode(
        q,
        p.kv_cache,
        p.block_table,
        p.seq_lens,
        scale,
        splits,
        qsl,
        kv_lora_rank=L,
        backend=backend,
    )
    assert out.shape == (sum(q_lens), H, L) and out.dtype == dtype
    assert lse.shape == (sum(q_lens), H) and lse.dtype == torch.float32
    assert not out.isnan().any() and not lse.isnan().any(), "read a NaN trap"
    exp_out, exp_lse = _spec_oracle(q, p.rows, q_lens, L, scale)
    assert_close(out, exp_out, dtype, what="out")
    assert_close(lse, exp_lse, dtype, lse=True, what="lse")


@pytest.mark.parametrize("backend,dtype", MAIN_IMPLS)
@pytest.mark.parametrize("block_size,splits", [(1, None), (4, 3), (16, 1), (64, 3)])
def test_mla_decode_multi_query_ragged_paged(backend, dtype, block_size, splits):
    """q_len 1 to 4 mixed over ragged lengths in shuffled pages (tiny widths, 4 heads): a
    request whose keys are all new (q_len = seq_len), one whose causal tail crosses a page
    and a split boundary (3 splits of 64-token tiles over 150), one-query rows between."""
    lens = [block_size + 2, 3, 150, 1, 65, 37]
    q_lens = [2, 3, 4, 1, 3, 1]
    _run_spec(backend, dtype, lens, q_lens, block_size, splits, 64, 16, 4, seed=30 + block_size)


@pytest.mark.parametrize("backend,dtype", ALL_IMPLS)
def test_mla_decode_multi_query_deepseek_widths(backend, dtype):
    """576 = 512 + 64 with 1 + K = 2 and 3 queries; 3 heads pad the head tile."""
    _run_spec(backend, dtype, [70, 5, 129], [2, 3, 1], 16, 2, 512, 64, 3, seed=40)


@pytest.mark.parametrize("backend,dtype", MAIN_IMPLS[:1] + MAIN_IMPLS[-2:-1])
def test_mla_decode_long_query_blocks(backend, dtype):
    """More queries than one program holds (q_len 6 and 9): the queries are tiled too; a
    request with no query this step (q_len 0) is skipped."""
    _run_spec(backend, dtype, [20, 9, 5, 70], [6, 9, 0, 2], 4, 2, 64, 16, 4, seed=41)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("backend,dtype", MAIN_IMPLS[:1] + MAIN_IMPLS[-2:-1])
def test_keys_past_a_query_causal_limit_never_reach_it(backend, dtype):
    """NaN in the last ``t`` keys of every request: the queries whose causal limit stops
    before them (``j < q_len - t``) still equal the oracle on the clean rows, so a key
    masked out of a query's scores is not multiplied into its output either (0 * NaN)."""
    lens, q_lens, L = [6, 40, 3, 66], [4, 3, 3, 2], 64
    for t in range(1, max(q_lens)):
        p, q, qsl = _spec_inputs(lens, q_lens, 4, dtype, L, 16, 4, seed=50 + t)
        exp_out, exp_lse = _spec_oracle(q, p.rows, q_lens, L, 0.3)
        for b, n in enumerate(lens):
            for pos in range(max(0, n - t), n):
                p.kv_cache.view(-1, L + 16)[p.slot_mapping(b, torch.tensor([pos]))] = float("nan")
        out, lse = mla_decode(
            q, p.kv_cache, p.block_table, p.seq_lens, 0.3, 2, qsl, backend=backend
        )
        clean = torch.cat([torch.arange(n) < n - t for n in q_lens])
        assert clean.any()
        assert not out[clean].isnan().any(), f"t={t}: a masked NaN key leaked"
        assert_close(out[clean], exp_out[clean], dtype, what=f"out, t={t}")
        assert_close(lse[clean], exp_lse[clean], dtype, lse=True, what=f"lse, t={t}")


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_one_query_per_request_is_the_same_either_way(backend):
    """query_start_loc = 0, 1, ..., B gives exactly (bit for bit) what None gives; with a
    request that has no query this step, the others still get what None gives them."""
    if backend == "triton" and not HAS_TRITON:
        pytest.skip("needs triton")
    lens = [5, 1, 80, 33]
    p, q, qsl = _spec_inputs(lens, [1] * 4, 16, torch.float32, 64, 16, 4, seed=60)
    args = (q, p.kv_cache, p.block_table, p.seq_lens, 0.3, 2)
    a = mla_decode(*args, backend=backend)
    b = mla_decode(*args, qsl, backend=backend)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    # One query or none each (T < B): the query_start_loc build, the same results.
    some = [0, 2, 3]
    c = mla_decode(q[some], *args[1:], cu_seqlens([1, 0, 1, 1]), backend=backend)
    assert_close(c[0], a[0][some], torch.float32, what="out")
    assert_close(c[1], a[1][some], torch.float32, lse=True, what="lse")


@pytest.mark.parametrize("backend,dtype", MAIN_IMPLS[:1] + MAIN_IMPLS[-2:-1])
def test_multi_query_equals_mla_naive_causal(backend, dtype):
    """Through kv_b_proj: the 1 + K tokens of each row, absorbed and decoded together, equal
    ``mla_naive`` (up-projected keys, causal among the new tokens)."""
    cfg = ModelConfig.tiny()
    g = torch.Generator().manual_seed(61)
    lens, q_lens, L = [9, 3, 30], [3, 2, 4], cfg.kv_lora_rank
    p = paged_cache(lens, 4, cfg.kv_cache_dim, dtype, g)
    w = _weights(cfg, g)
    w_uk, w_uv = split_kv_b_proj(w, cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.v_head_dim)
    q = torch.randn(sum(q_lens), cfg.num_attention_heads, cfg.qk_head_dim, generator=g).to(dtype)
    q_nope, q_pe = q[..., : cfg.qk_nope_head_dim].float(), q[..., cfg.qk_nope_head_dim :].float()
    q_mqa = torch.cat([torch.einsum("bhd,hdl->bhl", q_nope, w_uk), q_pe], dim=-1)
    out_lat, _ = mla_decode(
        q_mqa.to(dtype).to(DEVICE),
        p.kv_cache,
        p.block_table,
        p.seq_lens,
        cfg.softmax_scale,
        query_start_loc=cu_seqlens(q_lens),
        backend=backend,
    )
    out = torch.einsum("bhl,hdl->bhd", out_lat.float().cpu(), w_uv)
    nope, dv, t = cfg.qk_nope_head_dim, cfg.v_head_dim, 0
    for rows, n in zip(p.rows, q_lens):
        rows = rows.float().cpu()
        exp, _ = mla_naive(q[t : t + n], rows[:, :L], rows[:, L:], w, nope, dv, cfg.softmax_scale)
        tol_dtype = dtype if dtype == torch.float32 else torch.bfloat16
        assert_close(out[t : t + n], exp, tol_dtype, what=f"rows {t}:{t + n}")
        t += n


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_bad_query_start_loc_names_the_argument(backend):
    if backend == "triton" and not HAS_TRITON:
        pytest.skip("needs triton")
    q, cache = torch.zeros(5, 4, 80), torch.zeros(8, 4, 80)
    table, lens = torch.zeros(2, 3, dtype=torch.int32), torch.tensor([3, 4], dtype=torch.int32)

    def call(qsl, q=q, lens=lens):
        return mla_decode(q, cache, table, lens, 0.1, None, qsl, backend=backend)

    def qsl(*v):
        return torch.tensor(v, dtype=torch.int32)

    with pytest.raises(ValueError, match=r"query_start_loc: expected dtype torch\.int32"):
        call(qsl(0, 2, 5).long())
    with pytest.raises(ValueError, match=r"query_start_loc: .*size 3 .*num_reqs \+ 1"):
        call(qsl(0, 5))
    with pytest.raises(ValueError, match=r"query_start_loc\[0\]=1 is out of range"):
        call(qsl(1, 2, 5))
    with pytest.raises(ValueError, match=r"query_start_loc\[2\]=1 is out of range: .*never"):
        call(qsl(0, 2, 1))
    with pytest.raises(ValueError, match=r"query_start_loc\[2\]=4 .*5, the number of rows"):
        call(qsl(0, 2, 4))
    with pytest.raises(ValueError, match=r"query_start_loc\[1\] - query_start_loc\[0\]=4 .*"):
        call(qsl(0, 4, 5))
    with pytest.raises(ValueError, match=r"seq_lens: .*one length per row of block_table"):
        call(qsl(0, 2, 5), lens=lens[:1])
