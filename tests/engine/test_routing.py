"""Routing as vLLM 0.33.0 has it (``split_decodes_and_prefills``, the four-region reorder,
the MLA builder's switches), and the cost model behind the question."""

import random

import pytest
import torch

from pdlab.engine.attention.backend import (
    CommonAttentionMetadata,
    batch_region,
    reorder_batch_to_split_decodes_and_prefills,
    split_decodes_and_prefills,
    split_prefill_chunks,
)
from pdlab.engine.attention.mla_builder import (
    MLAMetadataBuilder,
    build_mla_metadata,
    plan_context_chunks,
)
from pdlab.engine.config import AttentionConfig, ModelConfig, ParallelConfig
from pdlab.sim import kernel_costs as cost


def _common(query_lens, seq_lens=None, is_prefilling=None, padded_num_tokens=None):
    """Common metadata for a batch (seq lens 10, 20, ... as in upstream's helper)."""
    seq_lens = seq_lens or [10 * (i + 1) for i in range(len(query_lens))]
    qsl = torch.zeros(len(query_lens) + 1, dtype=torch.int32)
    qsl[1:] = torch.cumsum(torch.tensor(query_lens, dtype=torch.int32), 0)
    return CommonAttentionMetadata(
        query_start_loc=qsl,
        query_start_loc_cpu=qsl,
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        num_reqs=len(query_lens),
        num_actual_tokens=padded_num_tokens or int(qsl[-1]),
        max_query_len=max(query_lens),
        max_seq_len=max(seq_lens),
        block_table_tensor=torch.zeros(len(query_lens), 1, dtype=torch.int32),
        slot_mapping=torch.zeros(int(qsl[-1]), dtype=torch.int64),
        is_prefilling=None if is_prefilling is None else torch.tensor(is_prefilling),
    )


# (query_lens, decode_threshold, require_uniform, padded tokens) -> split, the cases of
# upstream's tests/v1/attention/test_attention_splitting.py.
UPSTREAM_CASES = [
    ([1, 1, 1], 1, False, None, (3, 0, 3, 0)),
    ([1, 2, 1, 3, 2, 1, 2], 3, False, None, (7, 0, 12, 0)),
    ([4, 5, 6, 7], 3, False, None, (0, 4, 0, 22)),
    ([2, 1, 3, 4, 5, 6, 7, 8], 4, False, None, (4, 4, 10, 26)),
    ([1, 1, 1], 1, True, None, (3, 0, 3, 0)),
    ([2, 2, 1, 3, 2, 1, 2], 3, True, None, (2, 5, 4, 9)),
    ([4, 5, 6, 7], 3, True, None, (0, 4, 0, 22)),
    ([2, 2, 2, 4, 5, 6, 7, 8], 4, True, None, (3, 5, 6, 30)),
    ([2, 1, 2, 4, 5, 6, 7, 8], 4, True, None, (1, 7, 2, 33)),
    ([2, 2, 2, 0], 3, True, 8, (4, 0, 8, 0)),
]


@pytest.mark.parametrize("q, threshold, uniform, padded, expected", UPSTREAM_CASES)
def test_split_matches_upstream_cases(q, threshold, uniform, padded, expected):
    m = _common(q, padded_num_tokens=padded)
    assert split_decodes_and_prefills(m, threshold, uniform) == expected
    # is_prefilling is not read when short extends count as decodes
    assert split_decodes_and_prefills(m, threshold, uniform, True) == expected


@pytest.mark.parametrize("uniform", [False, True])
def test_short_extend_is_a_decode_unless_pcp(uniform):
    # D's first step after a transfer: one token over N-1 cached tokens, N in the prompt.
    n = 17
    m = _common([1], seq_lens=[n], is_prefilling=[True])
    assert split_decodes_and_prefills(m, 1, uniform, True) == (1, 0, 1, 0)
    assert split_decodes_and_prefills(m, 1, uniform, False) == (0, 1, 0, 1)
    # a real decode (past the prompt) is a decode either way
    m = _common([1], seq_lens=[n + 3], is_prefilling=[False])
    assert split_decodes_and_prefills(m, 1, uniform, False) == (1, 0, 1, 0)


@pytest.mark.parametrize("uniform", [False, True])
def test_treat_short_extends_as_prefills_in_a_mixed_batch(uniform):
    # decode, decode, short extend, long extend, prefill (already in upstream's order)
    q = [1, 1, 1, 9, 5]
    prefilling = [False, False, True, True, True]
    m = _common(q, is_prefilling=prefilling)
    assert split_decodes_and_prefills(m, 1, uniform, True) == (3, 2, 3, 14)
    assert split_decodes_and_prefills(m, 1, uniform, False) == (2, 3, 2, 15)
    # all one-token queries: the early return must not hide is_prefilling
    m = _common([1, 1, 1], is_prefilling=[False, True, True])
    assert split_decodes_and_prefills(m, 1, uniform, False) == (1, 2, 1, 2)
    m = _common([1, 1], is_prefilling=[True, False])
    assert split_decodes_and_prefills(m, 1, uniform, False) == (0, 2, 0, 2)


def test_without_is_prefilling_the_pcp_split_says_what_is_missing():
    with pytest.raises(ValueError, match="is_prefilling"):
        split_decodes_and_prefills(_common([1, 3]), 1, False, False)


def test_four_regions_and_their_order():
    assert batch_region(1, 9, 5, 1) == "decode"
    assert batch_region(1, 4, 5, 1) == "short_extend"
    assert batch_region(7, 4, 50, 1) == "long_extend"
    assert batch_region(7, 0, 7, 1) == "prefill"
    assert batch_region(1, 0, 1, 1) == "prefill"  # no context: a prefill at any length
    assert batch_region(100, 30, 200, 128) == "short_extend"
    # slots: prefill, decode, long_extend, short_extend, decode
    q, c, p = [7, 1, 9, 1, 1], [0, 9, 3, 4, 12], [7, 5, 40, 5, 8]
    order = reorder_batch_to_split_decodes_and_prefills(q, c, p, 1)
    regions = [batch_region(q[i], c[i], p[i], 1) for i in order]
    assert regions == ["decode", "decode", "short_extend", "long_extend", "prefill"]
    assert sorted(order) == list(range(5))
    # Only misplaced requests move; the swaps follow the cycles of the permutation.
    assert order == [4, 1, 3, 2, 0]
    # an ordered batch stays as it is
    assert reorder_batch_to_split_decodes_and_prefills([1, 1, 5], [3, 2, 0], [2, 4, 5]) == [
        0,
        1,
        2,
    ]


def _routes(q, c, p, backend="triton_mla", pcp=1):
    order = reorder_batch_to_split_decodes_and_prefills(
        q, c, p, AttentionConfig(backend).profile.reorder_batch_threshold
    )
    m = build_mla_metadata(
        [q[i] for i in order],
        [c[i] for i in order],
        [p[i] for i in order],
        torch.zeros(len(q), 64, dtype=torch.int32),
        torch.zeros(sum(q), dtype=torch.int64),
        4,
        attention_config=AttentionConfig(backend),
        parallel_config=ParallelConfig(pcp),
    )
    return {order[i]: ("decode" if i < m.num_decodes else "prefill") for i in range(len(q))}


def test_builder_switches():
    # D's short extend: decode by default, prefill under prefill context parallelism
    assert _routes([1], [40], [41]) == {0: "decode"}
    assert _routes([1], [40], [41], pcp=2) == {0: "prefill"}
    # FlashMLA (threshold 128) sends a short fresh prompt down the decode path, alone...
    assert _routes([100], [0], [100], "flashmla") == {0: "decode"}
    assert _routes([100], [0], [100], "triton_mla") == {0: "prefill"}
    assert _routes([200], [0], [200], "flashmla") == {0: "prefill"}
    # ...but it requires uniform decodes: beside one-token decodes it is a prefill
    assert _routes([1, 100], [9, 0], [5, 100], "flashmla") == {0: "decode", 1: "prefill"}
    # FlashAttnMLA (512, variable lengths) keeps both on the decode path
    assert _routes([1, 100], [9, 0], [5, 100], "flash_attn_mla") == {0: "decode", 1: "decode"}
    # and under PCP any request still in its prompt is a prefill, whatever the backend
    assert _routes([1, 100], [9, 0], [5, 100], "flash_attn_mla", 2) == {
        0: "decode",
        1: "prefill",
    }


def test_builder_reads_the_profiles():
    b = MLAMetadataBuilder(16, AttentionConfig("FLASHMLA"), ParallelConfig(2))
    assert (b.reorder_batch_threshold, b.require_uniform) == (128, True)
    assert b.treat_short_extends_as_decodes is False
    b = MLAMetadataBuilder(16, AttentionConfig("flash-attn-mla"))
    assert (b.reorder_batch_threshold, b.require_uniform, b.use_pcp) == (512, False, False)
    with pytest.raises(ValueError, match="AttentionConfig.backend='x' is invalid"):
        AttentionConfig("x")
    with pytest.raises(ValueError, match="prefill_context_parallel_size=0 is invalid"):
        ParallelConfig(0)


def test_split_prefill_chunks():
    assert split_prefill_chunks(torch.tensor([3, 4, 2, 6]), 7) == [(0, 2), (2, 3), (3, 4)]
    assert split_prefill_chunks([7, 7], 7, request_offset=3) == [(3, 4), (4, 5)]
    assert split_prefill_chunks([], 7) == []
    with pytest.raises(ValueError, match="seq_lens_cpu=9"):
        split_prefill_chunks([1, 9], 8)


def test_context_chunks_fill_the_workspace_and_split_on_pages():
    # three contexts, a 16-row workspace, 4-row pages
    plans = plan_context_chunks([6, 0, 21, 3], 16, 4)
    covered: dict[int, int] = {}
    for p in plans:
        assert sum(p.seq_lens) <= 16
        for i, (start, n) in enumerate(zip(p.starts, p.seq_lens)):
            r = p.request_start + i
            assert start == covered.get(r, 0)  # contiguous, in order
            covered[r] = start + n
            if start + n < [6, 0, 21, 3][r]:
                assert n % 4 == 0  # a split ends on a page boundary
    assert covered == {0: 6, 2: 21, 3: 3}
    assert [(p.request_start, p.request_end, p.starts, p.seq_lens) for p in plans] == [
        (0, 1, [0], [6]),  # a request with no context ends a chunk
        (2, 3, [0], [16]),
        (2, 4, [16, 0], [5, 3]),
    ]
    # what is left after a context that fills most of the workspace is not split further
    assert [p.seq_lens for p in plan_context_chunks([13, 5], 16, 4)] == [[13], [5]]
    # a context longer than the workspace is cut at a page boundary that fills it
    assert [p.seq_lens for p in plan_context_chunks([17], 16, 4)] == [[16], [1]]
    assert plans[2].is_continuation and not plans[0].is_continuation
    with pytest.raises(ValueError, match="workspace_size=3"):
        plan_context_chunks([5], 3, 4)


def test_cost_model_figures_for_deepseek_v3():
    cfg = ModelConfig.deepseek_v3()
    # the prefill path's context up-projection: ~33.5 MFLOP per context token per layer
    pre = {n: f for n, f, _ in cost.prefill_path_cost(cfg, 1000).parts}
    assert pre["kv_b_proj (context up-projection)"] / 1000 == pytest.approx(33.554432e6)
    # the decode path reads 576 values per context token
    d1, d2 = cost.decode_path_cost(cfg, 1000), cost.decode_path_cost(cfg, 2000)
    assert (d2.bytes - d1.bytes) / 1000 == pytest.approx(576 * 2)
    for ctx in (1024, 4096, 16384):
        assert cost.prefill_path_cost(cfg, ctx).flops > 50 * cost.decode_path_cost(cfg, ctx).flops
    assert cost.absorb_crossover_query_len(cfg) == pytest.approx(170.67, abs=0.01)


def test_attention_pairs():
    assert cost.attention_pairs([3], [3], True) == 6
    assert cost.attention_pairs([1], [9], True) == 9
    assert cost.attention_pairs([2], [5], False) == 10
    assert cost.attention_pairs([4], [2], True) == 3  # bottom-right: first two rows see nothing


def test_attention_pairs_against_the_mask():
    """The closed form counts what a bottom-right causal mask lets through, row by row."""
    rng = random.Random(11)
    for _ in range(200):
        n = rng.randint(0, 5)
        qs = [rng.randint(0, 40) for _ in range(n)]
        ks = [rng.randint(0, 40) for _ in range(n)]
        mask = sum(1 for q, k in zip(qs, ks) for i in range(q) for j in range(k) if j <= k - q + i)
        assert cost.attention_pairs(qs, ks, True) == mask
        assert cost.attention_pairs(qs, ks, False) == sum(q * k for q, k in zip(qs, ks))


def _split_v2(rows, k, backend, parallel=None):
    """Forward per row (``mqa``/``mha``) of a batch already in V2's order (rows with drafts
    first), with K speculative tokens and ``backend``'s builder."""
    q, c, p = (list(x) for x in zip(*rows))
    m = build_mla_metadata(
        q,
        c,
        p,
        torch.zeros(len(q), 64, dtype=torch.int32),
        torch.zeros(sum(q), dtype=torch.int64),
        16,
        attention_config=AttentionConfig(backend, num_speculative_tokens=k),
        parallel_config=parallel,
    )
    return ["mqa" if i < m.num_decodes else "mha" for i in range(len(q))]


@pytest.mark.parametrize("k", [1, 2])
def test_an_unpadded_one_token_row_is_a_prefill_under_a_uniform_builder(k):
    # Two verifying rows of 1 + K, then D's row left at one token over N - 1 (unpadded).
    rows = [(1 + k, 50, 20), (1 + k, 61, 30), (1, 39, 40)]
    # UNIFORM (require_uniform): a row whose length differs from the first row's is a
    # prefill, with no PCP in sight; VARLEN keeps every row at or under the threshold.
    for backend in ("flashmla", "triton_mla"):
        assert _split_v2(rows, k, backend) == ["mqa", "mqa", "mha"], backend
    assert _split_v2(rows, k, "flash_attn_mla") == ["mqa"] * 3
    assert _split_v2(rows, k, "flashinfer_mla") == ["mqa"] * 3
    # Padded to 1 + K, the same row keeps the decode path under every builder.
    padded = rows[:2] + [(1 + k, 39, 40)]
    for backend in ("flashmla", "triton_mla", "flash_attn_mla", "flashinfer_mla"):
        assert _split_v2(padded, k, backend) == ["mqa"] * 3, backend


def test_dcp_on_a_pd_instance_interleaves_by_block_and_drops_flash_attn_mlas_threshold():
    from pdlab.engine.config import adjust_dcp_kv_cache_interleave_size as adjust

    dcp = ParallelConfig(decode_context_parallel_size=2)
    # With a connector and DCP > 1 the interleave becomes the block size; otherwise kept.
    assert adjust(dcp, 16, True).cp_kv_cache_interleave_size == 16
    assert adjust(dcp, 16, False) == dcp and adjust(ParallelConfig(), 16, True) == ParallelConfig()
    named = dcp.replace(allow_auto_resolve_cp_interleave_size=False)
    assert adjust(named, 16, True) == named
    # FLASH_ATTN_MLA supports DCP with varlen queries only at interleave 1: otherwise
    # _init_reorder_batch_threshold forces 1, and a verifying row of 1 + K is a prefill.
    nixl = adjust(dcp, 16, True)
    for k in (0, 1, 2):
        b = MLAMetadataBuilder(
            16, AttentionConfig("flash_attn_mla", num_speculative_tokens=k), nixl
        )
        assert b.reorder_batch_threshold == 1
        b = MLAMetadataBuilder(16, AttentionConfig("flash_attn_mla", num_speculative_tokens=k), dcp)
        assert b.reorder_batch_threshold == 512
    rows = [(2, 50, 20), (2, 39, 40)]
    assert _split_v2(rows, 1, "flash_attn_mla", nixl) == ["mha", "mha"]
    assert _split_v2(rows, 1, "flash_attn_mla", dcp) == ["mqa", "mqa"]
    # Without drafts D's one-token row is still a decode there (use_pcp stays False).
    assert _split_v2([(1, 50, 20), (1, 39, 40)], 0, "flash_attn_mla", nixl) == ["mqa"] * 2


def test_a_pd_engine_under_dcp_runs_the_adjusted_threshold():
    from pdlab.disagg.pair import PDPair
    from pdlab.engine.config import CacheConfig

    pair = PDPair(
        ModelConfig.tiny(),
        CacheConfig(block_size=4, num_blocks=32),
        attention_config=AttentionConfig("flash_attn_mla"),
        parallel_config=ParallelConfig(decode_context_parallel_size=2),
    )
    assert pair.decode.parallel_config.cp_kv_cache_interleave_size == 4
    assert pair.decode.runner.attn_metadata_builder.reorder_batch_threshold == 1
