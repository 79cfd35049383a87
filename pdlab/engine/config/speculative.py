"""Speculative decoding: ``SpeculativeConfig`` (vLLM's ``vllm/config/speculative.py``).

Two of upstream's methods: ``"mtp"`` (DeepSeek's multi-token-prediction module drafts
from the target's hidden states; pdlab's default, as DeepSeek-V3/R1 is served) and
``"ngram"`` (prompt lookup: drafts copied from an earlier match of the last
``prompt_lookup_min``..``prompt_lookup_max`` tokens, no model at all).
``num_speculative_tokens`` is K, the drafts proposed per step; a verifying decode row then
runs ``1 + K`` tokens. ``None`` in place of a config (the engine's default) means no
speculative decoding. The methods and properties below are the ones vLLM 0.33.0 derives
from its config and the scheduler reads; what they do to the prefix cache and to P/D is
told once, in ``pdlab/engine/core/kv_cache_manager.py``'s docstring.

Differences from upstream: no draft model, quantization or parallel config (pdlab's MTP
module lives in the target checkpoint, ``pdlab/engine/model_executor/models/deepseek_mtp.py``);
prompt-lookup bounds given for ``"mtp"`` are refused in one line where upstream silently sets them
to 0. ``num_nextn_predict_layers`` (the MTP modules the checkpoint holds) sits here, where
upstream reads it from the draft model's ``hf_config``; it drives the scheduler, the prefix
cache and the connector. The drafts come from the model's own modules
(``ModelConfig.num_nextn_predict_layers``): with more than one, module ``j`` drafts token
``j`` as 0.33.0's ``MultiModuleMTPSpeculator`` does
(``pdlab/engine/worker/gpu/spec_decode/mtp.py``; ``tests/lab/test_spec_decode_pd.py``
checks the drafts against a cacheless oracle, colocated and on D). Upstream has one
number for both; pdlab does not check that they agree, so a one-module model with a
value above 1 here runs its module K times while the scheduler and the connector act
for K modules.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdlab.engine.config.utils import ConfigBase, _check_int, _fail
from pdlab.errors import Phrase

SPECULATIVE_METHODS = ("mtp", "ngram")
# Upstream's defaults when neither bound is given ("arbitrarily chosen", its comment says).
NGRAM_DEFAULT_LOOKUP = 5
# pdlab's bound on K (upstream sets none): every verifying row holds 1 + K tokens and, with
# MTP, 2K slots past them, so a K in the thousands only ever fails in the allocator.
MAX_NUM_SPECULATIVE_TOKENS = 16


@dataclass(frozen=True)
class SpeculativeConfig(ConfigBase):
    method: str = "mtp"
    num_speculative_tokens: int = 1
    # ngram only: the shortest and longest suffix matched against earlier tokens.
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None
    # mtp only: the MTP modules of the checkpoint (upstream's hf_config field).
    num_nextn_predict_layers: int = 1

    def __post_init__(self) -> None:
        c = "SpeculativeConfig"
        _check_int(c, "num_nextn_predict_layers", self.num_nextn_predict_layers, 1)
        if self.method not in SPECULATIVE_METHODS:
            _fail(c, "method", self.method, Phrase("err_x_one_of", choices=SPECULATIVE_METHODS))
        k = self.num_speculative_tokens
        _check_int(c, "num_speculative_tokens", k, 1)
        if k > MAX_NUM_SPECULATIVE_TOKENS:
            allowed = Phrase("err_x_int_range", a=1, b=MAX_NUM_SPECULATIVE_TOKENS)
            _fail(c, "num_speculative_tokens", k, allowed)
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        if self.method != "ngram":
            only, when = Phrase("err_n_ngram_only"), f"method={self.method!r}"
            none = Phrase("err_x_with", x=Phrase("err_x_none"), setting=when, note=only)
            for name, value in (("prompt_lookup_min", lo), ("prompt_lookup_max", hi)):
                if value is not None:
                    _fail(c, name, value, none)
            return
        for name, value in (("prompt_lookup_min", lo), ("prompt_lookup_max", hi)):
            if value is not None:
                _check_int(c, name, value, 1)
        # As upstream: one bound given sets the other; neither gives 5 and 5.
        if lo is None and hi is None:
            lo = hi = NGRAM_DEFAULT_LOOKUP
        lo = hi if lo is None else lo
        hi = lo if hi is None else hi
        if lo > hi:
            at_most = Phrase("err_x_at_most", bound=f"prompt_lookup_max={hi}")
            _fail(c, "prompt_lookup_min", lo, at_most)
        object.__setattr__(self, "prompt_lookup_min", lo)
        object.__setattr__(self, "prompt_lookup_max", hi)

    def use_eagle(self) -> bool:
        """Upstream's name for "drafts from the target's hidden states" (MTP here)."""
        return self.method == "mtp"

    @property
    def num_lookahead_tokens(self) -> int:
        """KV slots reserved past the scheduled tokens for the drafter to write
        (``VllmConfig.num_lookahead_tokens``): K for MTP, 0 for n-gram."""
        return self.num_speculative_tokens if self.use_eagle() else 0

    def use_eagle_block_drop(self) -> bool:
        """Whether a prefix-cache hit recomputes its trailing block (before ``VllmConfig``
        swaps it for lookahead hashes): MTP, whose K/V need the next token. Upstream's
        ``disable_eagle_block_drop`` (experimental, off by default) is not in pdlab."""
        return self.use_eagle()

    def use_multi_module_mtp(self) -> bool:
        """More than one MTP module runs: ``min(num_nextn_predict_layers, K) > 1``."""
        modules = min(self.num_nextn_predict_layers, self.num_speculative_tokens)
        return self.method == "mtp" and modules > 1

    @property
    def num_prefill_lookahead_tokens(self) -> int:
        """Prompt tokens past a chunk's end that the drafter reads
        (``VllmConfig.num_prefill_lookahead_tokens``): K for multi-module MTP (each module
        reads one token further), 1 for one MTP module, 0 for n-gram."""
        if not self.use_eagle():
            return 0
        return self.num_speculative_tokens if self.use_multi_module_mtp() else 1
