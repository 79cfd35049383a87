"""Speculative decoding on the model runner's side: the drafter and the verification.

Mirrors vLLM 0.33.0's Model Runner V2 (``vllm/v1/worker/gpu/spec_decode/``):

* ``rejection_sampler.py``: which drafts are placeholders (``gather_draft_sampled``) and
  greedy verification (the greedy case of ``rejection_sampler_utils.rejection_sample``);
* ``mtp.py``: the MTP proposer, DeepSeek's multi-token-prediction layer drafting from the
  target's hidden states (``mtp/speculator.py`` on ``target_dependent_ar/speculator.py``);
* ``ngram.py``: prompt lookup, no model (``ngram/speculator.py``).

The scheduler's side (draft slots, ``-1`` padding, rollback) is ``pdlab/engine/core/sched``;
the runner's (feeding a row's drafts, the rollback of ``num_computed_tokens``) is
``ModelRunner`` itself, which calls these once per step.
"""
