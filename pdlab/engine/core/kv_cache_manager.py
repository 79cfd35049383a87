"""KVCacheManager: which blocks each request holds, prefix-cache lookups, allocation.

Mirrors ``vllm/v1/core/kv_cache_manager.py`` (``KVCacheManager``) together with the
single-group bookkeeping of ``vllm/v1/core/single_type_kv_cache_manager.py``
(``req_to_blocks``, ``num_cached_block``). pdlab has one KV-cache group (every layer uses
the same block table), so block ids are a plain ``list[int]`` rather than vLLM's tuple of
lists per group.

MTP and the prefix cache (vLLM 0.33.0: ``kv_cache_coordinator.py``,
``single_type_kv_cache_manager.py``, ``kv_cache_utils.py``, ``VllmConfig`` in
``config/vllm.py``). This is the one place the fact is told; the rest points here.
The cache holds the drafter's K/V too (the MTP layer's), and the MTP layer builds its
row at position ``p`` from the target's hidden state at ``p`` and the token at ``p + 1``.
So the drafter's row at a block's last position depends on a token the block does not
hold: the first of the next block (with K MTP modules, module ``k`` reads ``k`` tokens
ahead, so the first K). It is the reason of D's ``N - 1``, again: the drafter needs what
the cache does not hold. A request that shares the block but not the tokens after it
must not reuse that row. Upstream has two answers, and the KV connector picks one:

* **No KV connector** (prefix caching on): lookahead hashes. A block's hash covers the
  ``num_prefill_lookahead_tokens`` L tokens after it (1 with one MTP module, K with
  more), and a block is hashed, so cached, only once they exist: a hit proves the next
  tokens too, and nothing is dropped. A resent prompt of N tokens reuses
  ``floor((N - L) / B) * B`` tokens, ``floor((N - 1) / B) * B`` with one module.
* **A KV connector** (NIXL's, on P and on D): connectors keep the plain hashes
  (upstream's comment gives no other reason), and ``use_eagle_block_drop`` drops the
  last block of every local prefix hit, which is then recomputed: a resent prompt
  reuses ``(floor((N - 1) / B) - 1) * B`` tokens, one block less (0 if it had one).

With more than one MTP module, the last ``K - 1`` computed tokens are not cached yet
(``num_reprefillable_tokens``: the drafter may still rewrite their rows), and a
``block_size`` below K is refused with prefix caching on (the dropped block must hold
the drafter's whole lookahead). n-gram drafts have no K/V: none of this applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pdlab.engine.config import CacheConfig
from pdlab.engine.core.block_pool import BlockPool, KVCacheBlock
from pdlab.engine.core.kv_cache_utils import hash_request_tokens
from pdlab.engine.math_utils import cdiv
from pdlab.engine.request import Request
from pdlab.errors import PdlabValueError, check_int


@dataclass
class PrefixCacheStats:
    """Prefix-cache lookups, counted in tokens (vLLM's ``PrefixCacheStats`` in
    ``vllm/v1/metrics/stats.py``). Lookups of requests resuming after a preemption are
    counted apart, so recomputation does not inflate the hit rate."""

    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0

    def record(self, num_tokens: int, num_hits: int, preempted: bool = False) -> None:
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hits
            return
        self.requests += 1
        self.queries += num_tokens
        self.hits += num_hits

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0


class KVCacheManager:
    def __init__(
        self, cache_config: CacheConfig, max_model_len: int, *, use_eagle: bool = False,
        num_hash_lookahead_tokens: int = 0, num_prefill_lookahead: int = 0,
    ) -> None:  # fmt: skip
        """``use_eagle`` (upstream's name, the scheduler's ``use_eagle_block_drop``) drops
        the trailing block of each hit (the module docstring tells why each option)."""
        check_int("max_model_len", max_model_len)
        self.use_eagle = use_eagle
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens
        # Computed tokens a multi-module drafter may still rewrite: not cached yet.
        self.num_reprefillable_tokens = max(0, num_prefill_lookahead - 1)
        if cache_config.enable_prefix_caching and num_prefill_lookahead > cache_config.block_size:
            raise PdlabValueError(
                "err_mtp_block_size", bs=cache_config.block_size, k=num_prefill_lookahead
            )
        self.block_size = cache_config.block_size
        self.num_blocks = cache_config.num_blocks
        self.enable_caching = cache_config.enable_prefix_caching
        self.max_model_len = max_model_len
        self.block_pool = BlockPool(cache_config.num_blocks, self.enable_caching)
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        # How many leading blocks of each request are cached (hashed) already.
        self.num_cached_block: dict[str, int] = {}
        self.prefix_cache_stats = PrefixCacheStats()

    @property
    def usage(self) -> float:
        """Fraction of the pool held by requests, between 0 and 1."""
        return self.block_pool.get_usage()

    @property
    def num_free_blocks(self) -> int:
        return self.block_pool.get_num_free_blocks()

    def get_computed_blocks(self, request: Request) -> tuple[list[KVCacheBlock], int]:
        """The cached blocks that hold a prefix of ``request``, and how many tokens they
        cover. Only whole blocks are reused.

        The hit is capped at ``request.num_tokens - 1`` (vLLM's ``max_cache_hit_length``):
        the cache holds each layer's keys and values, not the last hidden state, and the
        logits for the next token need that hidden state, so the last token must run
        through the model again. Because hits are whole blocks, a fully cached prompt of
        ``N`` tokens reuses ``floor((N - 1) / block_size) * block_size`` tokens, less
        under MTP (the module docstring).
        """
        if not self.enable_caching:
            return [], 0
        max_cache_hit_length = request.num_tokens - 1
        max_num_blocks = max_cache_hit_length // self.block_size
        token_ids = request.all_token_ids
        ahead = self.num_hash_lookahead_tokens
        hashes = hash_request_tokens(
            self.block_size, token_ids, request.block_hashes, max_num_blocks, ahead
        )
        bs = self.block_size
        blocks: list[KVCacheBlock] = []
        for i in range(min(max_num_blocks, len(hashes))):
            tokens = token_ids[i * bs : (i + 1) * bs + ahead]
            block = self.block_pool.get_cached_block(hashes[i], tokens)
            if block is None:
                break
            blocks.append(block)
        if self.use_eagle and blocks:
            blocks.pop()  # the trailing block is recomputed (the module docstring)
        return blocks, len(blocks) * bs

    def record_prefix_cache_stats(self, request: Request, num_hits: int) -> None:
        """Count one lookup of ``request`` that found ``num_hits`` tokens."""
        if self.enable_caching:
            self.prefix_cache_stats.record(
                request.num_tokens, num_hits, preempted=request.num_preemptions > 0
            )

    def get_num_blocks_to_allocate(
        self, request_id: str, num_tokens: int, new_computed_blocks: Sequence[KVCacheBlock] = ()
    ) -> int:
        """Free blocks the request would use to hold ``num_tokens`` slots: the blocks it
        lacks, plus the prefix hits that sit in the free queue (touching one takes it out
        of the queue, so it costs a free block too)."""
        num_held = len(self.req_to_blocks.get(request_id, ())) + len(new_computed_blocks)
        num_new_blocks = max(cdiv(num_tokens, self.block_size) - num_held, 0)
        return num_new_blocks + sum(1 for b in new_computed_blocks if b.ref_cnt == 0)

    def allocate_slots(
        self, request: Request, num_new_tokens: int, num_new_computed_tokens: int = 0,
        new_computed_blocks: Sequence[KVCacheBlock] | None = None, num_lookahead_tokens: int = 0,
        num_external_computed_tokens: int = 0, delay_cache_blocks: bool = False,
        full_sequence_must_fit: bool = False, reserved_blocks: int = 0,
    ) -> list[KVCacheBlock] | None:  # fmt: skip
        """Give ``request`` slots for the tokens it is about to compute (layout as in
        vLLM's docstring)::

            | computed | new_computed | external | new | lookahead |
                                      |   to be allocated          |

        ``new_computed`` are prefix-cache hits (``new_computed_blocks``), ``external``
        tokens a KV connector will load. ``full_sequence_must_fit`` (the scheduler's
        ``scheduler_reserve_full_isl``) first checks that the free blocks could hold the
        whole sequence, not only this chunk; ``reserved_blocks`` are free blocks to leave
        alone. Returns the new blocks, or None (nothing changed) if the pool cannot supply
        them. Unless ``delay_cache_blocks`` (a P/D receive's K/V are not there yet), the
        full blocks among the known tokens are cached right away: their K/V are written
        during this step's forward before attention reads them.
        """
        if num_new_tokens == 0 and num_external_computed_tokens == 0:
            raise PdlabValueError("err_no_tokens_to_allocate")
        new_computed_blocks = list(new_computed_blocks or ())
        req_id = request.request_id

        num_local_computed_tokens = request.num_computed_tokens + num_new_computed_tokens
        total_computed_tokens = min(
            num_local_computed_tokens + num_external_computed_tokens, self.max_model_len
        )
        num_free = self.block_pool.get_num_free_blocks()
        if full_sequence_must_fit:
            full_num_tokens = min(request.num_tokens, self.max_model_len)
            need = self.get_num_blocks_to_allocate(req_id, full_num_tokens, new_computed_blocks)
            if need > num_free:
                return None
        num_tokens_need_slot = min(
            total_computed_tokens + num_new_tokens + num_lookahead_tokens, self.max_model_len
        )
        num_blocks_to_allocate = self.get_num_blocks_to_allocate(
            req_id, num_tokens_need_slot, new_computed_blocks
        )
        if num_blocks_to_allocate > num_free - reserved_blocks:
            return None

        self.block_pool.touch(new_computed_blocks)
        req_blocks = self.req_to_blocks.setdefault(req_id, [])
        if new_computed_blocks:
            req_blocks.extend(new_computed_blocks)
            self.num_cached_block.setdefault(req_id, len(new_computed_blocks))
        num_new_blocks = max(cdiv(num_tokens_need_slot, self.block_size) - len(req_blocks), 0)
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
        req_blocks.extend(new_blocks)

        if not self.enable_caching or delay_cache_blocks:
            return new_blocks
        self.cache_blocks(request, min(total_computed_tokens + num_new_tokens, request.num_tokens))
        return new_blocks

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """Cache (hash) the request's blocks that are full within its first
        ``num_computed_tokens`` tokens. A partial block is never cached."""
        if not self.enable_caching:
            return
        req_id = request.request_id
        # The last num_reprefillable_tokens are not final yet; a block is hashed only once
        # the tokens its hash looks ahead to exist.
        ahead = self.num_hash_lookahead_tokens
        num_cacheable = min(
            num_computed_tokens - self.num_reprefillable_tokens, request.num_tokens - ahead
        )
        num_full_blocks = max(num_cacheable, 0) // self.block_size
        num_cached_blocks = self.num_cached_block.get(req_id, 0)
        if num_full_blocks <= num_cached_blocks:
            return
        hash_request_tokens(
            self.block_size, request.all_token_ids, request.block_hashes, num_full_blocks, ahead
        )
        self.block_pool.cache_full_blocks(
            self.req_to_blocks[req_id], request.block_hashes, request.all_token_ids,
            self.block_size, num_cached_blocks, num_full_blocks, ahead,
        )  # fmt: skip
        self.num_cached_block[req_id] = num_full_blocks

    def free(self, request: Request) -> None:
        """Give the request's blocks back, last block first, so that its tail is evicted
        before its prefix (the part other requests are likely to share)."""
        blocks = self.req_to_blocks.pop(request.request_id, [])
        self.num_cached_block.pop(request.request_id, None)
        self.block_pool.free_blocks(reversed(blocks))

    def get_blocks(self, request_id: str) -> list[KVCacheBlock]:
        return list(self.req_to_blocks.get(request_id, ()))

    def get_block_ids(self, request_id: str) -> list[int]:
        return [b.block_id for b in self.req_to_blocks.get(request_id, ())]
