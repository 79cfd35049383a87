"""Then and now: the learner's premise, release by release.

The learner read, in November 2025, that for DeepSeek "whether to take the prefill path is
decided by ``num_computed_tokens < num_prompt_tokens``". :data:`RULES` holds, per release and
setting, the argument that decides D's one-token row in its MLA split and the source line it
was read from; :func:`then_and_now` runs each through pdlab's
:func:`~pdlab.engine.attention.backend.split_query_lens` (0.11.1's split is its case
``treat_short_extends_as_decodes=True``: it had no ``is_prefilling``). Words: ``tn_*``.

Sources: vLLM 0.11.1 and 0.33.0 wheels; vllm-ascend at ``bc67696a02`` (the last commit of
November 2025) and at ``7baeb54ab8`` ("Fix PD recompute decode classification for MTP",
vllm-ascend #10973, June 2026).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from pdlab.engine.attention.backend import split_query_lens
from pdlab.engine.config import AttentionConfig, ParallelConfig
from pdlab.engine.config.vllm import adjust_dcp_kv_cache_interleave_size
from pdlab.ui.tour_kv import printer, say

ASCEND_NOV_2025 = "bc67696a02"
ASCEND_10973 = "7baeb54ab8"


@dataclass(frozen=True)
class Rule:
    """One release and setting: what its MLA split is given for D's row, and where."""

    key: str  # tn_s_<key> says the setting in words
    release: str
    source: str  # file:line in that release
    code: tuple[str, ...]  # the deciding argument or expression, line by line
    treat_short_extends_as_decodes: bool
    pcp: int = 1
    dcp: int = 1
    spec_tokens: int = 0
    ascend: bool = False  # vllm-ascend's MLA decode threshold: 1 + spec tokens
    paths: tuple[str, str] | None = ("forward_mqa", "forward_mha")  # None: not vLLM's
    has_is_prefilling: bool = True  # 0.11.1's metadata has none


_V0111 = ("_forward_decode", "_forward_prefill")  # 0.11.1's names, the learner's

RULES: tuple[Rule, ...] = (
    Rule(
        "v0111",
        "vLLM 0.11.1",
        "vllm/v1/attention/backends/mla/common.py:764",
        ("split_decodes_and_prefills(m, decode_threshold, require_uniform)",),
        True,
        paths=_V0111,
        has_is_prefilling=False,
    ),
    Rule(
        "default",
        "vLLM 0.33.0",
        "vllm/model_executor/layers/attention/mla_attention.py:2612",
        ("treat_short_extends_as_decodes=not self.use_pcp",),
        True,
    ),
    Rule(
        "pcp",
        "vLLM 0.33.0",
        "vllm/v1/attention/backends/utils.py:896-898",
        ("if not treat_short_extends_as_decodes:", "    is_prefill |= is_prefilling"),
        False,
        pcp=2,
    ),
    Rule(
        "dcp",
        "vLLM 0.33.0",
        "vllm/config/vllm.py:3339; vllm/v1/attention/backend.py:658",
        ("adjust_dcp_kv_cache_interleave_size", "_init_reorder_batch_threshold"),
        True,
        dcp=2,
    ),
    Rule(
        "mtp",
        "vLLM 0.33.0",
        "vllm/v1/core/sched/scheduler.py:1330; vllm/v1/attention/backend.py:658",
        ("pad_spec_decode", "max(reorder_batch_threshold, 1 + K)"),
        True,
        spec_tokens=1,
    ),
    Rule(
        "ascend_2025",
        f"vllm-ascend {ASCEND_NOV_2025}",
        "vllm_ascend/worker/model_runner_v1.py:4252-4253",
        ("num_decodes = sum(num_computed_tokens_cpu >= num_prompt_tokens)",),
        True,
        pcp=2,
        ascend=True,
        paths=None,
    ),
    Rule(
        "ascend_cp",
        f"vllm-ascend {ASCEND_10973}",
        "vllm_ascend/attention/mla_v1.py:444",
        ("treat_short_extends_as_decodes=", "    prefill_context_parallel_metadata is None"),
        False,
        dcp=2,
        ascend=True,
        paths=None,
    ),
    Rule(
        "ascend_fix",
        f"vllm-ascend {ASCEND_10973}",
        "vllm_ascend/attention/utils.py:361-362",
        (
            "if is_pd_decode_recompute_scheduler_enabled():",
            "    treat_short_extends_as_decodes = True",
        ),  # fmt: skip
        True,
        dcp=2,
        spec_tokens=1,
        ascend=True,
        paths=None,
    ),
)


@dataclass(frozen=True)
class RuleRun:
    """D's row under one rule, as pdlab's split computed it."""

    rule: Rule
    query_len: int
    threshold: int
    is_prefilling: bool | None  # None: the release's metadata has none
    path: str  # "decode" or "prefill"
    forward: str | None
    premise_holds: bool  # a prefill only because is_prefilling was read


def then_and_now(
    num_prompt_tokens: int, block_size: int, attention_config: AttentionConfig | None = None
) -> list[RuleRun]:
    """D's first row (one token over ``N - 1`` cached, padded to ``1 + K`` under MTP) run
    through each rule of :data:`RULES` with pdlab's split. vLLM rows use the backend
    profile of ``attention_config`` (its threshold after DCP, the NIXL interleave and MTP,
    as :meth:`~pdlab.engine.config.MLABackendProfile.effective_threshold` computes it);
    vllm-ascend's MLA builder starts at 1 and adds the spec tokens (``mla_v1.py:264-267``)."""
    profile = (attention_config or AttentionConfig()).profile
    nct = num_prompt_tokens - 1
    runs = []
    for r in RULES:
        parallel = ParallelConfig(decode_context_parallel_size=r.dcp)
        par = adjust_dcp_kv_cache_interleave_size(parallel, block_size, True)
        if r.ascend:
            threshold, uniform = 1 + r.spec_tokens, False
        else:
            threshold = profile.effective_threshold(
                r.spec_tokens, par.decode_context_parallel_size, par.cp_kv_cache_interleave_size
            )
            uniform = profile.require_uniform
        q = 1 + r.spec_tokens
        prefilling = nct < num_prompt_tokens and nct > 0
        row = ([q], [prefilling], threshold, uniform)
        nd, *_ = split_query_lens(*row, r.treat_short_extends_as_decodes)
        path = "decode" if nd else "prefill"
        by_length = split_query_lens(*row, True)[0] == 0
        shown = prefilling if r.has_is_prefilling else None
        forward = None if r.paths is None else r.paths[0 if nd else 1]
        holds = path == "prefill" and not by_length
        runs.append(RuleRun(r, q, threshold, shown, path, forward, holds))
    return runs


def then_and_now_section(
    c: Console,
    lang: str,
    num_prompt_tokens: int,
    block_size: int,
    attention_config: AttentionConfig | None = None,
) -> None:
    """The section as the tour's chapter 4 and notebook 05 print it: one block per rule,
    each line whole at 80 columns."""
    runs, put = then_and_now(num_prompt_tokens, block_size, attention_config), printer(c, lang)
    put("tn_title")
    put("tn_intro", n=num_prompt_tokens, nct=num_prompt_tokens - 1)
    for run in runs:
        r = run.rule
        c.print(f"[bold]{escape(r.release)}[/] · " + say(lang, f"tn_s_{r.key}"))
        c.print(f"  [dim]{escape(r.source)}[/]")
        for line in r.code:
            c.print(f"  [cyan]{escape(line)}[/]")
        verdict = say(lang, "tn_holds" if run.premise_holds else "tn_not")
        pf = "—" if run.is_prefilling is None else run.is_prefilling
        path = say(lang, f"tn_{run.path}")
        if run.forward is not None:
            path = say(lang, "tn_forward", path=path, forward=run.forward)
        c.print("  " + say(lang, "tn_run", q=run.query_len, t=run.threshold, pf=pf,
                           path=path, verdict=verdict))  # fmt: skip
        if r.key == "ascend_2025":
            counted = num_prompt_tokens - 1 >= num_prompt_tokens
            c.print("  " + say(lang, "tn_ascend_meta", counted=counted))
    put("tn_outro")
