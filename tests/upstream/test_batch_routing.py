"""Routing beside vLLM 0.33.0's own functions, on seeded random batches.

* ``split_decodes_and_prefills``: pdlab.engine.attention.backend against
  ``vllm/v1/attention/backends/utils.py``, with every decode_threshold, require_uniform
  and treat_short_extends_as_decodes, on batches in order and out of it, with padding
  rows (query length 0).
* The V1 model runner's batch order: pdlab's ``reorder_batch_to_split_decodes_and_prefills``
  against upstream's, which reorders a persistent ``InputBatch`` in place by
  ``swap_states`` (a small stand-in batch gives it the three arrays it reads).
* The MLA builder's switches: each pdlab backend profile against the builder of the
  upstream backend of that name (its ``reorder_batch_threshold`` and
  ``query_len_support``; a module that cannot be imported on a CPU, such as FlashAttention
  MLA's, is read with ``ast``),
  and pdlab's ``MLAMetadataBuilder.build`` against upstream's split called as
  ``MLACommonMetadataBuilder.build`` calls it (the test checks that call in upstream's
  source first).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path

import pytest
import torch
from lockstep import run_routing
from twin_vllm import StandInBatch, StandInOutput, upstream_switches
from vllm.model_executor.layers.attention import mla_attention as upstream_mla
from vllm.v1.attention import backend as upstream_backend
from vllm.v1.attention.backends import utils as upstream_utils
from workload import make_routing_batch, routing_grid

from pdlab.engine.attention.backend import (
    CommonAttentionMetadata,
    reorder_batch_to_split_decodes_and_prefills,
    split_decodes_and_prefills,
)
from pdlab.engine.attention.mla_builder import build_mla_metadata
from pdlab.engine.config import AttentionConfig, ParallelConfig
from pdlab.engine.config.attention import MLA_BACKENDS

pytestmark = pytest.mark.upstream
NUM_BATCHES = 300


def random_batch(rng: random.Random, padding: bool = False):
    """Per request ``(query_len, num_computed_tokens, num_prompt_tokens)``: decodes, D's
    short extends (1 over N - 1), later chunks, first chunks, in random order."""
    rows = []
    for _ in range(rng.randint(1, 8)):
        prompt = rng.randint(1, 600)
        kind = rng.choice(("decode", "short_extend", "chunk", "first"))
        if kind == "decode":
            rows.append((rng.choice((1, 1, 2, 4)), prompt + rng.randint(0, 20), prompt))
        elif kind == "short_extend" or prompt == 1:
            rows.append((1, prompt - 1, prompt) if prompt > 1 else (1, 0, 1))
        elif kind == "chunk":
            done = rng.randint(1, prompt - 1)
            rows.append((rng.randint(1, prompt - done), done, prompt))
        else:
            rows.append((rng.randint(1, prompt), 0, prompt))
    if padding and rng.random() < 0.5:
        rows += [(0, 0, 1)] * rng.randint(1, 3)
    return rows


def both_metadata(rows):
    """pdlab's CommonAttentionMetadata for ``rows`` (from_batch, as its runner builds it)
    and upstream's with the same tensors."""
    q, c, p = zip(*rows)
    ours = CommonAttentionMetadata.from_batch(
        q, c, p, torch.zeros(len(rows), 1, dtype=torch.int32), torch.zeros(0), range(len(rows))
    )
    theirs = upstream_backend.CommonAttentionMetadata(
        query_start_loc=ours.query_start_loc,
        query_start_loc_cpu=ours.query_start_loc_cpu,
        seq_lens=ours.seq_lens,
        num_reqs=ours.num_reqs,
        num_actual_tokens=ours.num_actual_tokens,
        max_query_len=ours.max_query_len,
        max_seq_len=ours.max_seq_len,
        block_table_tensor=ours.block_table_tensor,
        slot_mapping=ours.slot_mapping,
        is_prefilling=ours.is_prefilling.clone(),
    )
    return ours, theirs


@pytest.mark.parametrize("seed", range(NUM_BATCHES))
def test_split_decodes_and_prefills_matches_upstream(seed):
    rng = random.Random(seed)
    rows = random_batch(rng, padding=True)
    if rng.random() < 0.7:  # the order the runners give; the rest as they come
        order = reorder_batch_to_split_decodes_and_prefills(*zip(*rows), decode_threshold=1)
        rows = [rows[i] for i in order]
    for threshold in (1, 2, 4, 128, 512):
        for uniform in (False, True):
            for short_as_decodes in (True, False):
                ours, theirs = both_metadata(rows)
                args = (threshold, uniform, short_as_decodes)
                got = split_decodes_and_prefills(ours, *args)
                want = tuple(
                    int(x) for x in upstream_utils.split_decodes_and_prefills(theirs, *args)
                )
                assert got == want, f"seed={seed} rows={rows} args={args}: {got} != {want}"


@pytest.mark.parametrize("seed", range(NUM_BATCHES))
def test_v1_batch_order_matches_upstream(seed):
    rng = random.Random(seed)
    rows = random_batch(rng)
    for threshold in (1, 4, 128, 512):
        batch = StandInBatch(rows)
        upstream_utils.reorder_batch_to_split_decodes_and_prefills(
            batch, StandInOutput(rows), decode_threshold=threshold
        )
        want = [int(r[1:]) for r in batch.req_ids]
        got = reorder_batch_to_split_decodes_and_prefills(*zip(*rows), decode_threshold=threshold)
        assert got == want, f"seed={seed} rows={rows} threshold={threshold}"


@pytest.mark.parametrize("key", sorted(MLA_BACKENDS))
def test_mla_backend_profile_matches_its_upstream_builder(key):
    profile = MLA_BACKENDS[key]
    up = upstream_switches(profile.name, profile.upstream)
    ours = (profile.reorder_batch_threshold, profile.query_len_support)
    assert ours == (up.reorder_batch_threshold, up.query_len_support), (
        f"pdlab's {key} profile differs from {up.builder} ({profile.upstream})"
    )


def test_upstream_mla_builder_calls_the_split_as_this_file_does():
    source = Path(upstream_mla.__file__).read_text()
    for arg in (
        "decode_threshold=self.reorder_batch_threshold",
        "require_uniform=(self.query_len_support != QueryLenSupport.VARLEN)",
        "treat_short_extends_as_decodes=not self.use_pcp",
    ):
        assert arg in source, f"MLACommonMetadataBuilder.build no longer passes {arg}"


@pytest.mark.parametrize("seed", range(NUM_BATCHES // 3))
def test_mla_builder_split_matches_upstream(seed):
    rng = random.Random(seed)
    rows = random_batch(rng)
    for key, profile in sorted(MLA_BACKENDS.items()):
        order = reorder_batch_to_split_decodes_and_prefills(
            *zip(*rows), decode_threshold=profile.reorder_batch_threshold
        )
        batch = [rows[i] for i in order]
        for pcp in (1, 2):
            q, c, p = zip(*batch)
            m = build_mla_metadata(
                list(q),
                list(c),
                list(p),
                torch.zeros(len(batch), 1, dtype=torch.int32),
                torch.zeros(0, dtype=torch.int64),
                block_size=16,
                attention_config=AttentionConfig(backend=key),
                parallel_config=ParallelConfig(prefill_context_parallel_size=pcp),
            )
            _, theirs = both_metadata(batch)
            want = upstream_utils.split_decodes_and_prefills(
                theirs,
                decode_threshold=profile.reorder_batch_threshold,
                require_uniform=profile.query_len_support
                != upstream_mla.QueryLenSupport.VARLEN.value,
                treat_short_extends_as_decodes=pcp == 1,
            )
            got = (m.num_decodes, m.num_prefills, m.num_decode_tokens, m.num_prefill_tokens)
            assert got == tuple(int(x) for x in want), f"seed={seed} {key} pcp={pcp} {batch}"


# ---- every decision, across configurations ----------------------------------------------
GRID = routing_grid()
BATCHES_PER_CONFIG = 25


@pytest.mark.parametrize("rc", GRID, ids=[rc.label for rc in GRID])
def test_routing_grid_matches_upstream(rc):
    """``BATCHES_PER_CONFIG`` seeded batches under one configuration: pdlab's interleave,
    threshold, order, ``is_prefilling``, graph decision, split and forward per row against
    vLLM's own (``lockstep.run_routing``)."""
    for seed in range(BATCHES_PER_CONFIG):
        run_routing(rc, seed)


def test_routing_grid_reaches_the_cases_it_is_for():
    """The grid's batches reach what the issue names, counted from vLLM's reports: V1
    keeping its full graph for ``1 + K`` rows with D's padded row among them; a NIXL
    decode instance under DCP where FLASH_ATTN_MLA's ``1 + K`` rows take
    ``forward_mha``; a one-token row left unpadded beside ``1 + K`` rows sent to
    ``forward_mha`` by a UNIFORM builder without PCP; padding rows in a split."""
    seen: Counter = Counter()
    start = time.perf_counter()
    for rc in GRID:
        for seed in range(BATCHES_PER_CONFIG):
            batch = make_routing_batch(seed, rc)
            r = run_routing(rc, seed)
            k, rows = rc.num_spec_tokens, batch.rows
            q = {rid: rows[rid][0] for rid in rows}
            padded = any(d and d[0] == -1 for d in batch.drafts.values())
            if rc.model_runner == "v1" and k and padded and r["uniform_decode"]:
                seen["v1 graph with a padded 1 + K row"] += 1
            mha = {rid for rid, f in zip(r["order"], r["forward"]) if f == "mha"}
            if rc.nixl and rc.dcp > 1 and rc.backend == "flash_attn_mla" and k:
                if any(q[rid] == 1 + k and rid in mha for rid in rows):
                    seen["nixl dcp: a 1 + K row on forward_mha"] += 1
            uniform_builder = rc.backend in ("flashmla", "triton_mla")
            if uniform_builder and k and rc.pcp == 1 and any(n == 1 + k for n in q.values()):
                unpadded = [rid for rid in rows if q[rid] == 1 and rows[rid][1] > 0]
                if any(rid in mha for rid in unpadded):
                    seen["unpadded one-token row on forward_mha"] += 1
            if batch.num_padding_rows:
                seen["padding rows"] += 1
    elapsed = time.perf_counter() - start
    print(f"\nrouting grid: {len(GRID)} configurations x {BATCHES_PER_CONFIG} batches "
          f"in {elapsed:.1f} s: {dict(seen)}")  # fmt: skip
    assert len(seen) == 4, dict(seen)


def test_vllm_refuses_speculation_on_a_nixl_dcp_instance_which_pdlab_runs():
    """A kept difference (docs/upstream.md): on a NIXL instance under DCP the interleave
    is the block size, and with it vLLM's ``check_attention_cp_compatibility`` refuses any
    speculative config for every dense MLA impl pdlab profiles (none sets
    ``supports_mtp_with_cp_non_trivial_interleave_size``). pdlab builds the builder
    (threshold 1 for FLASH_ATTN_MLA, FLASHMLA, TRITON_MLA) so its views can show what the
    rows would do; fails if vLLM refuses any other grid point, or accepts one of these."""
    from twin_pdlab import pdlab_routing
    from twin_vllm import vllm_refuses_cp

    refused = {rc for rc in GRID if vllm_refuses_cp(rc)}
    assert refused == {rc for rc in GRID if rc.nixl and rc.dcp > 1 and rc.num_spec_tokens}
    assert all("MTP with cp_kv_cache_interleave_size > 1" in vllm_refuses_cp(rc) for rc in refused)
    for rc in refused:
        pdlab_routing(rc, make_routing_batch(0, rc))  # runs, where vLLM would not start
