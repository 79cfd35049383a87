"""The lockstep check must catch a known bug: each test plants one in pdlab (its source
with one expression changed, compiled in place of the real method), runs workloads until
the check reports a divergence, and asserts it did, with the seed, the step and a replay
command.

The bugs: ``_update_waiting_for_remote_kv`` without the ``- 1`` (D would resume a
transferred request with nothing left to compute); the block pool appending freed cached
blocks in the wrong order (the LRU order of eviction breaks); the manager freeing a
request's blocks head first (its shared prefix would be evicted before its tail); under
speculative decoding, a newly admitted one-token row left unpadded, rejected drafts left
counted as computed, V2 counting a padded row's placeholders as new tokens, and under MTP
a prefix cache that keeps a hit's trailing block on D or hashes no token ahead without a
connector (``pdlab/engine/core/kv_cache_manager.py``), and with two MTP modules D loading the whole
prompt (no backoff) or a chunk ending within K of the prompt's end; across the
routing grid (``lockstep.run_routing``), V1's full decode graph wanting one-token rows
whatever K (vLLM's ``uniform_decode_query_len`` is ``1 + K``), and a NIXL instance under
DCP keeping an interleave of 1 (vLLM's ``adjust_dcp_kv_cache_interleave_size`` makes it
the block size, and FLASH_ATTN_MLA's threshold drops to 1).
"""

from __future__ import annotations
import __future__

import inspect
import sys
import textwrap

import pytest
from lockstep import Divergence, run, run_routing

import pdlab.engine.worker.gpu.batch as batch
from pdlab.engine.core.block_pool import BlockPool
from pdlab.engine.core.kv_cache_manager import KVCacheManager
from pdlab.engine.core.sched.scheduler import Scheduler
from pdlab.engine.distributed.kv_transfer.pd_connector import PDConnector

pytestmark = pytest.mark.upstream


def plant(monkeypatch, owner, name: str, old: str, new: str):
    """Replace ``owner.name`` (a method of a class, or a function of a module) by its own
    source with ``old`` changed to ``new``; returns the planted function."""
    real = getattr(owner, name)
    source = textwrap.dedent(inspect.getsource(real))
    assert source.count(old) == 1, (
        f"{real.__qualname__} no longer contains {old!r} once: update this planted bug"
    )
    flags = __future__.annotations.compiler_flag
    code = compile(source.replace(old, new), f"<planted bug in {name}>", "exec", flags=flags)
    namespace: dict = {}
    exec(code, vars(sys.modules[real.__module__]), namespace)
    monkeypatch.setattr(owner, name, namespace[name])
    return namespace[name]


def first_divergence(kind: str, seeds: range) -> str:
    for seed in seeds:
        try:
            run(seed, kind)
        except Divergence as e:
            return str(e)
    pytest.fail(f"no {kind} workload of seeds {seeds} caught the planted bug")


def assert_reported(message: str, kind: str) -> None:
    assert f"{kind} workload seed=" in message and ", step " in message
    assert "replay: PDLAB_UPSTREAM_TRACE=1" in message and f"test_{kind}_workload[" in message


def test_dropping_the_minus_one_after_a_transfer_is_caught(monkeypatch):
    plant(
        monkeypatch,
        Scheduler,
        "_update_waiting_for_remote_kv",
        "request.num_computed_tokens = request.num_tokens - 1",
        "request.num_computed_tokens = request.num_tokens",
    )
    message = first_divergence("decode", range(50))
    assert_reported(message, "decode")
    assert "pdlab raised where vLLM did not" in message and "num_tokens - 1" in message


def test_freed_cached_blocks_appended_in_the_wrong_order_are_caught(monkeypatch):
    plant(
        monkeypatch,
        BlockPool,
        "free_blocks",
        "self.free_block_queue.append_n(evict_last)",
        "self.free_block_queue.append_n(evict_last[::-1])",
    )
    message = first_divergence("local", range(200))
    assert_reported(message, "local")


def test_freeing_a_request_head_first_is_caught(monkeypatch):
    plant(monkeypatch, KVCacheManager, "free", "reversed(blocks)", "blocks")
    message = first_divergence("local", range(200))
    assert_reported(message, "local")


def test_a_one_token_first_chunk_run_as_a_decode_is_caught(monkeypatch):
    import test_batch_v2

    planted = plant(
        monkeypatch, batch, "gather_batch_req_state", "pf and ni == 1 and ci > 0", "pf and ni == 1"
    )
    monkeypatch.setattr(test_batch_v2, "gather_batch_req_state", planted)
    for seed in range(test_batch_v2.NUM_BATCHES):
        try:
            test_batch_v2.test_v2_batch_state_matches_upstream(seed, use_pcp=False)
        except AssertionError as e:
            assert f"seed={seed}" in str(e)
            return
    pytest.fail("no batch caught the planted bug")


def test_a_new_one_token_row_left_unpadded_is_caught(monkeypatch):
    plant(
        monkeypatch,
        Scheduler,
        "_pad_spec_decode",
        "self.num_spec_tokens > 0\n",
        "self.num_spec_tokens < 0\n",
    )
    message = first_divergence("decode_spec", range(50))
    assert_reported(message, "decode_spec")
    assert "schedule()" in message


def test_rejected_drafts_left_computed_are_caught(monkeypatch):
    plant(
        monkeypatch,
        Scheduler,
        "_roll_back_rejected",
        "request.num_computed_tokens -= num_rejected",
        "request.num_computed_tokens -= 0",
    )
    message = first_divergence("local_spec", range(50))
    assert_reported(message, "local_spec")


def test_placeholders_counted_as_new_tokens_are_caught(monkeypatch):
    import test_batch_v2

    planted = plant(
        monkeypatch, batch, "gather_batch_req_state", "qi - di for qi, di", "qi for qi, di"
    )
    monkeypatch.setattr(test_batch_v2, "gather_batch_req_state", planted)
    for seed in range(test_batch_v2.NUM_BATCHES):
        try:
            test_batch_v2.test_v2_batch_state_with_drafts_matches_upstream(seed)
        except AssertionError as e:
            assert f"seed={seed}" in str(e)
            return
    pytest.fail("no batch with drafts caught the planted bug")


def test_mtp_on_d_keeping_the_trailing_prefix_block_is_caught(monkeypatch):
    plant(
        monkeypatch,
        KVCacheManager,
        "get_computed_blocks",
        "if self.use_eagle and blocks:",
        "if False and blocks:",
    )
    message = first_divergence("decode_spec", range(100))
    assert_reported(message, "decode_spec")


def test_mtp_without_a_connector_hashing_no_token_ahead_is_caught(monkeypatch):
    plant(
        monkeypatch,
        KVCacheManager,
        "__init__",
        "self.num_hash_lookahead_tokens = num_hash_lookahead_tokens",
        "self.num_hash_lookahead_tokens = 0",
    )
    message = first_divergence("local_spec", range(100))
    assert_reported(message, "local_spec")


def test_d_under_multi_module_mtp_loading_the_whole_prompt_is_caught(monkeypatch):
    plant(
        monkeypatch,
        PDConnector,
        "_prefill_backoff",
        "max(0, self.num_prefill_lookahead_tokens - 1)",
        "0",
    )
    message = first_divergence("decode_spec", range(200))
    assert_reported(message, "decode_spec")


def test_a_chunk_ending_within_k_of_the_prompt_end_is_caught(monkeypatch):
    plant(
        monkeypatch,
        Scheduler,
        "_reserve_prefill_lookahead",
        "if 0 < remaining < self.num_prefill_lookahead:",
        "if False:",
    )
    message = first_divergence("local_spec", range(200))
    assert_reported(message, "local_spec")


def first_routing_divergence() -> str:
    from workload import routing_grid

    for rc in routing_grid():
        for seed in range(25):
            try:
                run_routing(rc, seed)
            except Divergence as e:
                return str(e)
    pytest.fail("no configuration of the routing grid caught the planted bug")


def test_v1_wanting_one_token_rows_for_its_graph_is_caught(monkeypatch):
    plant(
        monkeypatch,
        batch,
        "gather_batch_req_state",
        "is_uniform_decode(max(q, default=0), decode_query_len,",
        "is_uniform_decode(max(q, default=0), 1,",
    )
    message = first_routing_divergence()
    assert "-v1-" in message and "uniform_decode" in message and "replay:" in message


def test_dcp_on_a_nixl_instance_keeping_its_interleave_is_caught(monkeypatch):
    import pdlab.engine.config.vllm as config_vllm

    plant(
        monkeypatch,
        config_vllm,
        "adjust_dcp_kv_cache_interleave_size",
        "return parallel_config.replace(cp_kv_cache_interleave_size=block_size)",
        "return parallel_config",
    )
    message = first_routing_divergence()
    assert "-dcp2-nixl-" in message and "cp_kv_cache_interleave_size" in message
    assert "seed=" in message and "replay:" in message


def test_an_unplanted_pdlab_passes_the_same_workloads():
    """The same seeds without a planted bug: the divergences above are the bugs'."""
    for seed in range(50):
        run(seed, "decode")
    for seed in range(200):
        run(seed, "local")
    for seed in range(50):
        run(seed, "decode_spec")
        run(seed, "local_spec")
