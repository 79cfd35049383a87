"""The routing rule, and the cost model behind the question."""

import pytest
import torch

from pdlab.attention import cost
from pdlab.attention.metadata import (
    MLAMetadata,
    is_decode,
    reorder_batch_to_split_decodes_and_prefills,
    split_decodes_and_prefills,
)
from pdlab.config import ModelConfig


def _meta(q_lens, computed, prompts, rule="query_len", threshold=1):
    qsl = torch.zeros(len(q_lens) + 1, dtype=torch.int32)
    qsl[1:] = torch.cumsum(torch.tensor(q_lens), 0)
    return MLAMetadata(
        req_ids=[f"r{i}" for i in range(len(q_lens))],
        query_start_loc=qsl,
        seq_lens=torch.tensor([c + q for c, q in zip(computed, q_lens)], dtype=torch.int32),
        num_computed_tokens=torch.tensor(computed, dtype=torch.int32),
        num_prompt_tokens=torch.tensor(prompts, dtype=torch.int32),
        block_table=torch.zeros(len(q_lens), 1, dtype=torch.int32),
        slot_mapping=torch.zeros(sum(q_lens), dtype=torch.int64),
        block_size=4,
        rule=rule,
        decode_threshold=threshold,
    )


@pytest.mark.parametrize("n", [2, 5, 17, 300])
def test_short_extend_routes_differently_under_the_two_rules(n):
    # D's first step: one token, N-1 computed, N prompt tokens.
    assert is_decode(1, n - 1, n, "query_len") is True
    assert is_decode(1, n - 1, n, "prompt") is False
    # an ordinary decode step is a decode under both
    assert is_decode(1, n + 3, n, "query_len") and is_decode(1, n + 3, n, "prompt")
    # a full prefill is a prefill under both
    assert not is_decode(n, 0, n, "query_len") and not is_decode(n, 0, n, "prompt")


def test_split_counts_and_order():
    q, c, p = [1, 1, 7, 1], [9, 3, 0, 4], [5, 4, 7, 5]
    order = reorder_batch_to_split_decodes_and_prefills(q, c, p, "query_len")
    assert order == [0, 1, 3, 2]
    m = _meta([q[i] for i in order], [c[i] for i in order], [p[i] for i in order])
    assert split_decodes_and_prefills(m, 1, "query_len") == (3, 1, 3, 7)
    order = reorder_batch_to_split_decodes_and_prefills(q, c, p, "prompt")
    assert order == [0, 1, 2, 3]  # r1 (3 < 4) and r3 (4 < 5) are prefills, r2 too
    m = _meta(q, c, p, rule="prompt")
    split = (m.num_decodes, m.num_prefills, m.num_decode_tokens, m.num_prefill_tokens)
    assert split == (1, 3, 1, 9)


def test_threshold_and_unordered_batch():
    m = _meta([2, 1], [5, 5], [3, 3], threshold=2)
    assert (m.num_decodes, m.num_decode_tokens) == (2, 3)
    with pytest.raises(ValueError, match="not ordered decodes first"):
        _meta([5, 1], [0, 5], [5, 3])
    with pytest.raises(ValueError, match="rule='x' is invalid"):
        _meta([1], [1], [1], rule="x")


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
