"""Model Runner V2 (vLLM 0.33.0's default) against V1: the batch order, ``is_prefilling``
from ``prefill_len``, ``prefill_runs_as_decode`` and ``decode_graph_eligible``; the
switch between the runners; and the MLA backend the platform picks for each GPU."""

import json
import random
from dataclasses import asdict

import pytest

from pdlab.disagg.pair import PDPair
from pdlab.engine.config import (
    MLA_BACKENDS,
    AttentionConfig,
    CacheConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    resolve_model_runner,
)
from pdlab.engine.platforms import GPUS, Chosen, select_mla_backend
from pdlab.engine.request import SamplingParams
from pdlab.engine.worker.gpu.batch import gather_batch_req_state, sort_batch_req_ids
from pdlab.ui.choices import choice_reason, routing_reason

CFG = ModelConfig.tiny()


def test_sort_puts_one_token_rows_first_then_by_query_len():
    n = {"a": 7, "b": 1, "c": 3, "d": 1, "e": 3}
    assert sort_batch_req_ids(n) == ["b", "d", "c", "e", "a"]
    # Rows with drafts lead; decode_query_len is the verify width.
    assert sort_batch_req_ids(n, {"a": [1, 2]}, decode_query_len=3) == ["a", "c", "e", "b", "d"]


def _state(rows, **kw):
    """rows: req_id -> (scheduled, computed, prompt, prefill_len)."""
    return gather_batch_req_state(
        {r: v[0] for r, v in rows.items()},
        {r: v[1] for r, v in rows.items()},
        {r: v[2] for r, v in rows.items()},
        {r: v[3] for r, v in rows.items()},
        **kw,
    )


def test_ds_first_step_runs_as_decode_and_keeps_the_decode_graph():
    # Two running decodes and D's arriving request (one token over N - 1 = 39 cached).
    rows = {"run0": (1, 50, 20, 20), "new": (1, 39, 40, 40), "run1": (1, 61, 30, 30)}
    s = _state(rows)
    i = s.req_ids.index("new")
    assert s.is_prefilling == [r == "new" for r in s.req_ids]
    assert s.prefill_runs_as_decode == s.is_prefilling
    assert s.decode_graph_eligible and s.uniform_decode_token_count == 1
    # Under PCP: no prefill_runs_as_decode, the step loses the decode graph, and the
    # prefilling row goes after the decodes.
    p = _state(rows, use_pcp=True)
    assert p.prefill_runs_as_decode is None and not p.decode_graph_eligible
    assert p.req_ids[-1] == "new" and p.is_prefilling == [False, False, True]
    assert s.num_computed_tokens[i] == 39


def test_a_chunk_or_a_fresh_prompt_is_not_run_as_a_decode():
    # A first chunk (no context) and a later chunk of several tokens.
    s = _state({"fresh": (1, 0, 1, 1), "chunk": (4, 8, 20, 20), "dec": (1, 9, 4, 4)})
    assert dict(zip(s.req_ids, s.prefill_runs_as_decode)) == {
        "dec": False,
        "fresh": False,
        "chunk": False,
    }
    assert s.has_prefill and not s.decode_graph_eligible
    assert s.uniform_decode_token_count is None


def test_resumed_request_refills_its_outputs_as_a_prefill_under_v2_only():
    # Preempted after 3 outputs: V2 re-sends prompt + outputs (prefill_len 13 > prompt 10).
    rows = {"r": (13, 0, 10, 13)}
    assert _state(rows).is_prefilling == [True]
    # The last step of that re-prefill: V2 still counts it prefilling, V1 (prompt) does not.
    rows = {"r": (1, 12, 10, 13)}
    v2, v1 = _state(rows), _state(rows, model_runner="v1")
    assert v2.is_prefilling == [True] and v2.prefill_runs_as_decode == [True]
    assert v1.is_prefilling == [False] and v1.prefill_runs_as_decode is None


def test_v1_orders_by_region_v2_by_query_len():
    rows = {"pre": (5, 0, 5, 5), "ext": (1, 3, 4, 4), "dec": (1, 9, 4, 4), "long": (6, 4, 12, 12)}
    assert _state(rows, model_runner="v1").req_ids == ["dec", "ext", "long", "pre"]
    assert _state(rows).req_ids == ["ext", "dec", "pre", "long"]


def test_random_batches_v2_rules_hold():
    rng = random.Random(1234)
    for _ in range(300):
        rows = {}
        for i in range(rng.randint(1, 8)):
            prompt = rng.randint(1, 40)
            plen = prompt + rng.choice([0, 0, rng.randint(1, 5)])
            c = rng.randint(0, plen + 3)
            q = rng.choice([1, 1, rng.randint(1, 9)])
            rows[f"r{i}"] = (q, c, prompt, plen)
        s = _state(rows)
        qs = s.num_scheduled_tokens
        assert [q != 1 for q in qs] == sorted(q != 1 for q in qs)
        for j, r in enumerate(s.req_ids):
            q, c, _, plen = rows[r]
            assert s.is_prefilling[j] == (min(c, plen) < plen)
            if s.prefill_runs_as_decode is not None:
                assert s.prefill_runs_as_decode[j] == (s.is_prefilling[j] and q == 1 and c > 0)
        expect = all(not pf or (rows[r][0] == 1 and rows[r][1] > 0)
                     for r, pf in zip(s.req_ids, s.is_prefilling))  # fmt: skip
        assert s.decode_graph_eligible == expect


def test_model_runner_switch(monkeypatch):
    assert resolve_model_runner(None) == "v2"
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    assert resolve_model_runner(None) == "v1"
    with pytest.raises(ValueError, match=r"VLLM_USE_V2_MODEL_RUNNER=0 cannot run prefill_context"):
        resolve_model_runner(None, ParallelConfig(2))
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "maybe")
    with pytest.raises(ValueError, match=r"VLLM_USE_V2_MODEL_RUNNER='maybe' is invalid"):
        resolve_model_runner(None)
    with pytest.raises(ValueError, match=r"model_runner='v1' cannot run prefill_context_parallel"):
        resolve_model_runner("v1", ParallelConfig(2))
    with pytest.raises(ValueError, match=r"model_runner='v3' is invalid: expected one of"):
        resolve_model_runner("v3")


@pytest.mark.parametrize(
    "runner,pcp,runs_as_decode,eligible,forward",
    [("v2", 1, True, True, "forward_mqa"), ("v2", 2, None, False, "forward_mha"),
     ("v1", 1, None, True, "forward_mqa")],
)  # fmt: skip
def test_ds_first_step_in_the_trace(runner, pcp, runs_as_decode, eligible, forward):
    pair = PDPair(
        CFG,
        CacheConfig(block_size=4, num_blocks=64),
        SchedulerConfig(),
        backend="torch",
        parallel_config=ParallelConfig(pcp),
        model_runner=runner,
    )
    out = pair.generate("Why run the last token twice?", SamplingParams(max_tokens=3))[0]
    n = len(out.prompt_token_ids)
    r = pair.tracer.route_of("D", out.request_id)
    assert (r["query_len"], r["num_computed_tokens"], r["prefill_len"]) == (1, n - 1, n)
    assert r["model_runner"] == runner and r["is_prefilling"]
    assert r["prefill_runs_as_decode"] == runs_as_decode
    assert r["decode_graph_eligible"] == eligible and r["forward"] == forward
    assert pair.tracer.meta["routing"]["D"]["model_runner"] == runner
    # the platform's choice, as facts (the views word them)
    assert pair.tracer.meta["routing"]["D"]["choice"] == asdict(select_mla_backend())


@pytest.mark.parametrize(
    "gpu,backend",
    [("h100", "flash_attn_mla"), ("h200", "flash_attn_mla"), ("h800", "flash_attn_mla"),
     ("b200", "flashinfer_mla"), ("rtx5090", "triton_mla"), ("a100", "triton_mla"),
     ("cpu", "cpu_mla")],
)  # fmt: skip
def test_platform_picks_the_backend(gpu, backend):
    assert select_mla_backend(gpu).backend == backend
    a = AttentionConfig(gpu=gpu)
    assert (a.backend, a.gpu) == (backend, gpu) and backend.upper() in choice_reason(a.choice)
    # The choice is facts: the backend is the first of the capability's list it walked.
    assert a.choice.capability == GPUS[gpu][1] and a.choice.kv_cache_dtype == "auto"
    assert backend in a.choice.priorities


def test_unnamed_gpu_reads_the_environment(monkeypatch):
    monkeypatch.setenv("PDLAB_GPU", "h200")
    a = AttentionConfig()
    assert (a.backend, a.gpu) == ("flash_attn_mla", "h200") and a.selected_how == Chosen.ENV
    assert "PDLAB_GPU" in choice_reason(a.choice)
    monkeypatch.setenv("PDLAB_GPU", "tpu")
    with pytest.raises(ValueError, match=r"PDLAB_GPU='tpu' is invalid: expected one of"):
        AttentionConfig()
    with pytest.raises(ValueError, match=r"gpu='v100' is invalid: expected one of"):
        AttentionConfig(gpu="v100")


def test_threshold_under_speculation_and_decode_context_parallelism():
    th = {k: p.effective_threshold(3) for k, p in MLA_BACKENDS.items()}
    # Not SINGLE_ONLY: raised to 1 + 3 (never lowered); SINGLE_ONLY keeps 1.
    assert th == {
        "cpu_mla": 1,
        "triton_mla": 4,
        "flashmla": 128,
        "flash_attn_mla": 512,
        "flashinfer_mla": 4,
        "cutlass_mla": 1,
    }
    dcp = {k: p.effective_threshold(0, 2) for k, p in MLA_BACKENDS.items()}
    assert dcp["flashmla"] == 1 and dcp["flash_attn_mla"] == 512
    assert MLA_BACKENDS["flash_attn_mla"].effective_threshold(0, 2, 4) == 1


def test_pcp_splits_the_prefilling_rows_and_keeps_the_others_whole():
    from pdlab.engine.worker.gpu.batch import pcp_rank_chunks

    # Two decodes, D's one-token row (prefilling), a 10-token prefill, PCP 2.
    ranks = pcp_rank_chunks([1, 1, 1, 10], [False, False, True, True], 2)
    assert ranks == [
        [(0, 0, 1), (2, 0, 1), (3, 0, 3), (3, 9, 1)],
        [(1, 0, 1), (3, 3, 3), (3, 6, 3)],
    ]
    # Every token of every row is computed exactly once across the ranks.
    for q_lens, pf, size in (([5, 1, 7], [True, False, True], 4), ([3], [True], 3)):
        got = sorted((row, o + i) for rk in pcp_rank_chunks(q_lens, pf, size) for row, o, n in rk
                     for i in range(n))  # fmt: skip
        assert got == [(row, t) for row, q in enumerate(q_lens) for t in range(q)]
    # Under DCP the rows that stay whole go to every rank.
    assert pcp_rank_chunks([1], [False], 2, 2) == [[(0, 0, 1)], [(0, 0, 1)]]


def test_the_reason_reads_in_either_language(monkeypatch):
    from pdlab.catalog import text

    words = {  # what the English line names, from the platform's table
        "named": ("NVIDIA H200 (named)", "sm_90", "FLASH_ATTN_MLA"),
        "env": ("NVIDIA B200 (PDLAB_GPU)", "sm_100", "FLASHINFER_MLA"),
        "none": ("no GPU named", "the CPU platform", "CPU_MLA"),
    }
    for gpu, how in (("h200", "named"), ("b200", "env"), ("cpu", "none")):
        if how == "env":
            monkeypatch.setenv("PDLAB_GPU", gpu)
            a = AttentionConfig()
        elif how == "none":
            monkeypatch.delenv("PDLAB_GPU")
            monkeypatch.setattr("pdlab.engine.platforms._local_gpu", lambda: None)
            a = AttentionConfig()
        else:
            a = AttentionConfig(gpu=gpu)
        assert a.selected_how == how
        en = choice_reason(a.choice)
        assert all(w in en for w in words[how]), en
        # What a trace keeps, saved and loaded, reads the same.
        meta = json.loads(json.dumps({"mla_backend": a.backend, "choice": asdict(a.choice)}))
        assert routing_reason(meta) == en
        zh = routing_reason(meta, "zh")
        assert a.backend.upper() in zh and zh != en
    named = AttentionConfig("flashmla")
    assert named.choice is None and named.selected_how == Chosen.BACKEND
    meta = {"mla_backend": "flashmla", "choice": None}
    assert routing_reason(meta, "zh") == text("zh", "pf_backend", backend="FLASHMLA")


def _v1_uniform_decode(q: list[int], k: int) -> bool:
    """V1's ``_is_uniform_decode`` by its definition (``gpu_model_runner.py``): every row
    has ``uniform_decode_query_len = 1 + num_spec_tokens`` tokens."""
    return max(q) == 1 + k and sum(q) == (1 + k) * len(q)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_v1_keeps_its_full_graph_for_rows_of_one_plus_k_tokens(k):
    # Verifying rows and D's first step padded to 1 + K with -1 placeholders over N - 1.
    rows = {"v0": (1 + k, 50, 20, 20), "d": (1 + k, 39, 40, 40), "v1": (1 + k, 61, 30, 30)}
    drafts = {"v0": [7] * k, "d": [-1] * k, "v1": [8] * k} if k else None
    for runner in ("v1", "v2"):
        s = _state(rows, model_runner=runner, draft_tokens=drafts, decode_query_len=1 + k)
        assert s.uniform_decode and s.uniform_decode_token_count == 1 + k, runner
    # A shorter verify (a draft cut by max_model_len) breaks the uniform shape under both.
    if k:
        cut = {**rows, "v1": (k, 61, 30, 30)}
        cut_drafts = {**drafts, "v1": [8] * (k - 1)}
        for runner in ("v1", "v2"):
            s = _state(cut, model_runner=runner, draft_tokens=cut_drafts, decode_query_len=1 + k)
            assert not s.uniform_decode and s.uniform_decode_token_count is None, runner


def test_v1_graph_follows_its_uniform_decode_rule_on_random_batches():
    rng = random.Random(39)
    for _ in range(300):
        k = rng.choice((0, 1, 2))
        rows, drafts = {}, {}
        for i in range(rng.randint(1, 6)):
            prompt = rng.randint(2, 60)
            kind = rng.choice(("verify", "padded", "unpadded", "chunk"))
            if kind in ("verify", "padded"):
                c = prompt + rng.randint(0, 9) if kind == "verify" else prompt - 1
                rows[f"r{i}"] = (1 + k, c, prompt, prompt)
                if k:
                    drafts[f"r{i}"] = [-1 if kind == "padded" else 5] * k
            elif kind == "unpadded":
                rows[f"r{i}"] = (1, prompt - 1, prompt, prompt)
            else:
                rows[f"r{i}"] = (rng.randint(2, prompt), 0, prompt, prompt)
        s = _state(rows, model_runner="v1", draft_tokens=drafts, decode_query_len=1 + k)
        q = [v[0] for v in rows.values()]
        assert s.uniform_decode == _v1_uniform_decode(q, k), (k, rows)
        assert s.decode_graph_eligible == _v1_uniform_decode(q, k)


@pytest.mark.parametrize("k", [1, 2])
def test_an_unpadded_one_token_row_beside_verify_rows_loses_the_graph(k):
    # D's row left at one token (the max_model_len edge kept it from padding) beside a
    # verifying row: both runners call it a decode-like row, but the batch is not uniform.
    rows = {"v": (1 + k, 50, 20, 20), "d": (1, 39, 40, 40)}
    drafts = {"v": [3] * k}
    v2 = _state(rows, draft_tokens=drafts, decode_query_len=1 + k)
    assert v2.req_ids == ["v", "d"] and v2.prefill_runs_as_decode == [False, True]
    assert v2.decode_graph_eligible and not v2.uniform_decode
    v1 = _state(rows, model_runner="v1", draft_tokens=drafts, decode_query_len=1 + k)
    assert not v1.uniform_decode and v1.uniform_decode_token_count is None
