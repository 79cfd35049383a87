"""Routing beside vLLM 0.33.0's own functions, on seeded random batches.

* ``split_decodes_and_prefills``: pdlab.attention.metadata against
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

import ast
import importlib
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import vllm
from vllm.model_executor.layers.attention import mla_attention as upstream_mla
from vllm.v1.attention import backend as upstream_backend
from vllm.v1.attention.backends import utils as upstream_utils

from pdlab.attention.builder import build_mla_metadata
from pdlab.attention.metadata import (
    CommonAttentionMetadata,
    reorder_batch_to_split_decodes_and_prefills,
    split_decodes_and_prefills,
)
from pdlab.config import AttentionConfig, ParallelConfig
from pdlab.config.attention import MLA_BACKENDS

pytestmark = pytest.mark.upstream
NUM_BATCHES = 300
VLLM_ROOT = Path(vllm.__file__).parent.parent


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


class StandInBatch:
    """What upstream's reorder reads of the V1 runner's ``InputBatch``, and its swap."""

    def __init__(self, rows):
        self.req_ids = [f"r{i}" for i in range(len(rows))]
        self.num_computed_tokens_cpu = np.array([c for _, c, _ in rows])
        self.num_prompt_tokens = np.array([p for _, _, p in rows])

    def swap_states(self, i: int, j: int) -> None:
        ids = self.req_ids
        ids[i], ids[j] = ids[j], ids[i]
        for a in (self.num_computed_tokens_cpu, self.num_prompt_tokens):
            a[[i, j]] = a[[j, i]]


class StandInOutput:
    def __init__(self, rows):
        self.num_scheduled_tokens = {f"r{i}": q for i, (q, _, _) in enumerate(rows)}


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


def _returns(fn: ast.FunctionDef) -> str | None:
    for stmt in fn.body:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            return ast.unparse(stmt.value).strip("'\"")
    return None


def upstream_switches(name: str, path: str) -> tuple[int, str, str]:
    """``(reorder_batch_threshold, query_len_support, builder class)`` of the upstream
    backend whose ``get_name()`` is ``name`` in ``path`` (relative to the vllm package's
    parent): its ``get_builder_cls()``, or the common builder it inherits."""
    tree = ast.parse((VLLM_ROOT / path).read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    backends = [
        cls
        for cls in classes.values()
        for fn in cls.body
        if isinstance(fn, ast.FunctionDef) and fn.name == "get_name" and _returns(fn) == name
    ]
    assert backends, f"{path} has no backend whose get_name() is {name!r}"
    getters = [f for f in backends[0].body if getattr(f, "name", "") == "get_builder_cls"]
    builder_name = _returns(getters[0]) if getters else "MLACommonMetadataBuilder"
    common = upstream_mla.MLACommonMetadataBuilder
    if builder_name not in classes:
        assert builder_name == common.__name__, f"{path}: builder {builder_name} not found"
        return common.reorder_batch_threshold, common.query_len_support.value, builder_name
    module = path.removesuffix(".py").replace("/", ".")
    try:
        builder = getattr(importlib.import_module(module), builder_name)
        return builder.reorder_batch_threshold, builder.query_len_support.value, builder_name
    except Exception:  # CUDA-only imports (FlashAttention MLA, CUTLASS MLA): read the class
        found = {"reorder_batch_threshold": common.reorder_batch_threshold}
        found["query_len_support"] = common.query_len_support.value
        for stmt in classes[builder_name].body:
            if isinstance(stmt, ast.AnnAssign | ast.Assign) and stmt.value is not None:
                target = stmt.target if isinstance(stmt, ast.AnnAssign) else stmt.targets[0]
                attr, value = ast.unparse(target), ast.unparse(stmt.value)
                if attr == "reorder_batch_threshold":
                    found[attr] = int(value)
                elif attr == "query_len_support":
                    found[attr] = upstream_mla.QueryLenSupport[value.split(".")[-1]].value
        return found["reorder_batch_threshold"], found["query_len_support"], builder_name


@pytest.mark.parametrize("key", sorted(MLA_BACKENDS))
def test_mla_backend_profile_matches_its_upstream_builder(key):
    profile = MLA_BACKENDS[key]
    threshold, support, builder = upstream_switches(profile.name, profile.upstream)
    assert (profile.reorder_batch_threshold, profile.query_len_support) == (threshold, support), (
        f"pdlab's {key} profile differs from {builder} ({profile.upstream})"
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
