"""The block pool: a fixed set of KV-cache blocks, reference counts, and LRU eviction.

Mirrors ``vllm/v1/core/block_pool.py`` (``BlockPool``) and ``KVCacheBlock`` /
``FreeKVCacheBlockQueue`` in ``vllm/v1/core/kv_cache_utils.py``.

* A block in use has ``ref_cnt > 0`` (several requests may share a prefix block).
* A block with ``ref_cnt == 0`` sits in the free queue. If it was cached (it has a
  ``block_hash``) it keeps its contents and can still be hit until it is handed out
  again; handing it out evicts it (its hash is dropped from the cache map).
* New blocks come from the front of the free queue. A freed block that carries no hash
  (a partial block, or any block when prefix caching is off) can never be hit, so it goes
  to the *front* and is reused first; a freed cached block goes to the *back*, so cached
  blocks are evicted least recently used first. The manager frees a request's blocks tail
  first: the uncached tail lands at the front in that order (its last block first), and
  among its cached blocks the last (least shareable) is evicted first and a shared prefix
  last. This is ``BlockPool.free_blocks`` in vLLM 0.33.0 (``prepend_n`` / ``append_n``).

Unlike vLLM, pdlab reserves no "null block" (vLLM keeps block 0 as a placeholder for
sliding-window and Mamba layers, which pdlab does not have): all ``num_blocks`` are usable.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from pdlab.engine.core.kv_cache_utils import BlockHash
from pdlab.errors import PdlabValueError, check_int


@dataclass(eq=False)
class KVCacheBlock:
    """One page of ``block_size`` token slots in every layer's cache."""

    block_id: int
    ref_cnt: int = 0
    # Set only when the block is full and cached; ``token_ids`` are the tokens it holds
    # (and the lookahead tokens its hash covers), kept so a hit is confirmed, not trusted.
    block_hash: BlockHash | None = None
    token_ids: tuple[int, ...] | None = None

    def __repr__(self) -> str:
        h = self.block_hash.hex()[:8] if self.block_hash is not None else None
        return f"KVCacheBlock(id={self.block_id}, ref_cnt={self.ref_cnt}, hash={h})"


class FreeKVCacheBlockQueue:
    """Free blocks in eviction order: ``popleft`` takes the least recently freed.

    vLLM uses a hand-written doubly linked list; an ``OrderedDict`` gives the same O(1)
    ``popleft``, appends and ``remove`` (a cached block taken back out of the middle).
    """

    def __init__(self, blocks: Iterable[KVCacheBlock]) -> None:
        self._blocks: OrderedDict[int, KVCacheBlock] = OrderedDict((b.block_id, b) for b in blocks)

    def popleft(self) -> KVCacheBlock:
        if not self._blocks:
            raise PdlabValueError("err_no_free_blocks")
        return self._blocks.popitem(last=False)[1]

    def append_n(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Put ``blocks`` at the back, in order (the first given is evicted first)."""
        for block in blocks:
            self._blocks[block.block_id] = block

    def prepend_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put ``blocks`` at the front, in order: ``blocks[0]`` becomes the next handed out."""
        for block in reversed(blocks):
            self._blocks[block.block_id] = block
            self._blocks.move_to_end(block.block_id, last=False)

    def remove(self, block: KVCacheBlock) -> None:
        del self._blocks[block.block_id]

    def __contains__(self, block: KVCacheBlock) -> bool:
        return block.block_id in self._blocks

    def __len__(self) -> int:
        return len(self._blocks)

    def __iter__(self) -> Iterator[KVCacheBlock]:
        return iter(self._blocks.values())


class BlockPool:
    """All blocks of the cache, the free queue, and the map from block hash to block."""

    def __init__(self, num_blocks: int, enable_caching: bool = True) -> None:
        check_int("num_blocks", num_blocks)
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.blocks = [KVCacheBlock(i) for i in range(num_blocks)]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        # Several blocks may hold the same prefix (a request recomputed a block that was
        # still cached), so a hash maps to the blocks that carry it, by block id.
        self.cached_block_hash_to_block: dict[BlockHash, dict[int, KVCacheBlock]] = {}

    def get_cached_block(
        self, block_hash: BlockHash, token_ids: Sequence[int]
    ) -> KVCacheBlock | None:
        """A cached block with this hash whose stored tokens equal ``token_ids``, or None."""
        token_ids = tuple(token_ids)
        for block in self.cached_block_hash_to_block.get(block_hash, {}).values():
            if block.token_ids == token_ids:
                return block
        return None

    def cache_full_blocks(
        self, blocks: Sequence[KVCacheBlock], block_hashes: Sequence[BlockHash],
        token_ids: Sequence[int], block_size: int, num_cached_blocks: int, num_full_blocks: int,
        num_lookahead_tokens: int = 0,
    ) -> None:  # fmt: skip
        """Cache ``blocks[num_cached_blocks:num_full_blocks]``, now full, under their
        hashes. ``token_ids`` are the request's tokens, block ``i`` holding
        ``token_ids[i*block_size:(i+1)*block_size]``; the ``num_lookahead_tokens`` after
        it, which its hash covers, are kept with them to confirm a hit."""
        for i in range(num_cached_blocks, num_full_blocks):
            block = blocks[i]
            block.block_hash = block_hashes[i]
            end = (i + 1) * block_size + num_lookahead_tokens
            block.token_ids = tuple(token_ids[i * block_size : end])
            self.cached_block_hash_to_block.setdefault(block.block_hash, {})[block.block_id] = block

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Take ``num_blocks`` blocks from the front of the free queue (evicting any that
        were cached) with ``ref_cnt = 1``."""
        if num_blocks > len(self.free_block_queue):
            free = len(self.free_block_queue)
            raise PdlabValueError("err_few_free_blocks", n=num_blocks, free=free)
        blocks = []
        for _ in range(num_blocks):
            block = self.free_block_queue.popleft()
            self._maybe_evict_cached_block(block)
            block.ref_cnt = 1
            blocks.append(block)
        return blocks

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """Drop ``block`` from the cache map before it is reused. True if it was cached."""
        if block.block_hash is None:
            return False
        same_hash = self.cached_block_hash_to_block[block.block_hash]
        del same_hash[block.block_id]
        if not same_hash:
            del self.cached_block_hash_to_block[block.block_hash]
        block.block_hash = None
        block.token_ids = None
        return True

    def touch(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Take a reference to cached blocks hit by a new request; a block that was free
        (ref_cnt 0, still cached) leaves the free queue so it cannot be evicted."""
        for block in blocks:
            if block.ref_cnt == 0:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Drop one reference from each block, given in eviction order; blocks no one holds
        any more go back to the free queue, uncached ones to the front and cached ones to
        the back (the module docstring)."""
        evict_first: list[KVCacheBlock] = []
        evict_last: list[KVCacheBlock] = []
        for block in ordered_blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                if block.block_hash is None or not self.enable_caching:
                    evict_first.append(block)
                else:
                    evict_last.append(block)
        self.free_block_queue.prepend_n(evict_first)
        self.free_block_queue.append_n(evict_last)

    def get_num_free_blocks(self) -> int:
        return len(self.free_block_queue)

    def get_usage(self) -> float:
        """Fraction of blocks held by requests (cached-but-free blocks count as free)."""
        return 1.0 - self.get_num_free_blocks() / self.num_blocks
