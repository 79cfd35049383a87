"""Model Runner V2's batch beside vLLM 0.33.0's own code (vllm/v1/worker/gpu/model_runner.py),
on seeded random batches: ``sort_batch_req_ids`` (pdlab.engine.worker.gpu.batch against upstream's,
draft tokens included), and ``gather_batch_req_state``: upstream's method runs on a small
stand-in runner holding the per-request arrays it reads (``req_states``), against pdlab's
function of the same name (the order, ``is_prefilling``, ``has_prefill``,
``prefill_runs_as_decode``, ``decode_graph_eligible`` and the uniform decode token count),
also on batches with speculative decoding's draft tokens: verifying decode rows of
``1 + K`` tokens, some with fewer drafts, and D's first step padded to ``1 + K`` with
``-1`` placeholders over ``N - 1`` cached.
"""

from __future__ import annotations

import random

import pytest
from twin_vllm import upstream_state
from vllm.v1.worker.gpu import model_runner as upstream_v2

from pdlab.engine.worker.gpu.batch import gather_batch_req_state, sort_batch_req_ids

pytestmark = pytest.mark.upstream
NUM_BATCHES = 300


def random_rows(rng: random.Random) -> dict[str, tuple[int, int, int, int]]:
    """Per request ``(num_scheduled_tokens, num_computed_tokens, num_prompt_tokens,
    prefill_len)``: decodes, D's one token over ``N - 1``, later and first chunks, and
    requests resumed after a preemption (``prefill_len`` past the prompt)."""
    rows = {}
    for i in range(rng.randint(1, 8)):
        prompt = rng.randint(1, 300)
        plen = prompt + (rng.randint(1, 20) if rng.random() < 0.2 else 0)
        kind = rng.choice(("decode", "short_extend", "chunk", "first"))
        if kind == "decode":
            rows[f"r{i}"] = (1, plen + rng.randint(0, 20), prompt, plen)
        elif kind == "short_extend" or plen == 1:
            rows[f"r{i}"] = (1, plen - 1, prompt, plen)
        elif kind == "chunk":
            done = rng.randint(1, plen - 1)
            rows[f"r{i}"] = (rng.randint(1, plen - done), done, prompt, plen)
        else:
            rows[f"r{i}"] = (rng.randint(1, plen), 0, prompt, plen)
    return rows


@pytest.mark.parametrize("seed", range(NUM_BATCHES))
def test_sort_batch_req_ids_matches_upstream(seed):
    rng = random.Random(seed)
    num_tokens = {f"r{i}": rng.choice((1, 1, 2, 3, 4, 17)) for i in range(rng.randint(1, 10))}
    drafts = {r: [7] * (n - 1) for r, n in num_tokens.items() if n > 1 and rng.random() < 0.3}
    for decode_query_len in (1, 2, 4):
        want = upstream_v2.sort_batch_req_ids(num_tokens, drafts, decode_query_len)
        assert sort_batch_req_ids(num_tokens, drafts, decode_query_len) == want, (
            f"seed={seed} {num_tokens} drafts={drafts} decode_query_len={decode_query_len}"
        )


@pytest.mark.parametrize("seed", range(NUM_BATCHES))
@pytest.mark.parametrize("use_pcp", [False, True])
def test_v2_batch_state_matches_upstream(seed, use_pcp):
    rows = random_rows(random.Random(seed))
    theirs, uniform = upstream_state(rows, use_pcp)
    ours = gather_batch_req_state(
        {r: v[0] for r, v in rows.items()},
        {r: v[1] for r, v in rows.items()},
        {r: v[2] for r, v in rows.items()},
        {r: v[3] for r, v in rows.items()},
        model_runner="v2",
        use_pcp=use_pcp,
    )
    where = f"seed={seed} use_pcp={use_pcp} rows={rows}"
    runs_as_decode = theirs.prefill_runs_as_decode_np
    if use_pcp:
        # pdlab also shows a PCP rank's own order (decodes first, PCPManager); upstream's
        # gather_batch_req_state gives the batch order before that: compare per request.
        at = {r: i for i, r in enumerate(ours.req_ids)}
        order = [at[r] for r in theirs.req_ids]
    else:
        assert ours.req_ids == theirs.req_ids, where
        order = list(range(len(rows)))
    assert [ours.is_prefilling[i] for i in order] == theirs.is_prefilling_np.tolist(), where
    assert [ours.prefill_len[i] for i in order] == theirs.prefill_len_np.tolist(), where
    assert ours.has_prefill == theirs.has_prefill, where
    if runs_as_decode is None:
        assert ours.prefill_runs_as_decode is None, where
    else:
        got = [ours.prefill_runs_as_decode[i] for i in order]
        assert got == runs_as_decode.tolist(), where
    assert ours.decode_graph_eligible == theirs.decode_graph_eligible, where
    assert ours.uniform_decode_token_count == uniform, where


def random_spec_rows(rng: random.Random, k: int):
    """Rows of a step under speculative decoding, and their drafts: verifying decodes
    (``1 + K`` tokens, or fewer drafts where a cut trimmed them), D's first step (``1 + K``
    over ``N - 1`` cached, ``-1`` placeholders), chunks and first chunks."""
    rows, drafts = {}, {}
    for i in range(rng.randint(1, 8)):
        rid = f"r{i}"
        prompt = rng.randint(2, 300)
        kind = rng.choice(("verify", "verify", "padded", "decode", "chunk", "first"))
        if kind == "verify":
            m = rng.randint(1, k)
            rows[rid] = (1 + m, prompt + rng.randint(0, 20), prompt, prompt)
            drafts[rid] = [rng.randrange(1000) for _ in range(m)]
        elif kind == "padded":
            rows[rid] = (1 + k, prompt - 1, prompt, prompt)
            drafts[rid] = [-1] * k
        elif kind == "decode":
            rows[rid] = (1, prompt + rng.randint(0, 20), prompt, prompt)
        elif kind == "chunk":
            done = rng.randint(1, prompt - 1)
            rows[rid] = (rng.randint(1, prompt - done), done, prompt, prompt)
        else:
            rows[rid] = (rng.randint(1, prompt), 0, prompt, prompt)
    return rows, drafts


@pytest.mark.parametrize("seed", range(NUM_BATCHES))
def test_v2_batch_state_with_drafts_matches_upstream(seed):
    rng = random.Random(seed)
    k = rng.choice((1, 2, 3))
    rows, drafts = random_spec_rows(rng, k)
    theirs, uniform = upstream_state(rows, False, drafts, 1 + k)
    ours = gather_batch_req_state(
        {r: v[0] for r, v in rows.items()},
        {r: v[1] for r, v in rows.items()},
        {r: v[2] for r, v in rows.items()},
        {r: v[3] for r, v in rows.items()},
        draft_tokens=drafts,
        decode_query_len=1 + k,
    )
    where = f"seed={seed} k={k} rows={rows} drafts={drafts}"
    assert ours.req_ids == theirs.req_ids, where
    assert ours.is_prefilling == theirs.is_prefilling_np.tolist(), where
    runs = theirs.prefill_runs_as_decode_np
    got = ours.prefill_runs_as_decode
    assert (got is None) == (runs is None) and (runs is None or got == runs.tolist()), where
    assert ours.decode_graph_eligible == theirs.decode_graph_eligible, where
    assert ours.uniform_decode_token_count == uniform, where
    want_drafts = theirs.num_draft_tokens_np
    assert (ours.num_draft_tokens is None) == (want_drafts is None), where
    if want_drafts is not None:
        assert ours.num_draft_tokens == want_drafts.tolist(), where


def test_batches_with_drafts_reach_a_padded_step_that_stays_graph_eligible():
    eligible_with_padding = 0
    for seed in range(NUM_BATCHES):
        rng = random.Random(seed)
        k = rng.choice((1, 2, 3))
        rows, drafts = random_spec_rows(rng, k)
        _, uniform = upstream_state(rows, False, drafts, 1 + k)
        padded = any(d[0] == -1 for d in drafts.values())
        eligible_with_padding += padded and uniform == 1 + k
    assert eligible_with_padding > 0
