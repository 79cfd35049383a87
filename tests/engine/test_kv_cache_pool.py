"""Block hashing and the block pool (pdlab/engine/core/kv_cache_utils.py, block_pool.py)."""

import hashlib
import struct

import pytest

from pdlab.engine.core.block_pool import BlockPool
from pdlab.engine.core.kv_cache_utils import NONE_HASH, hash_block_tokens, hash_request_tokens


def test_hash_chains_parent_and_tokens():
    h0 = hash_block_tokens(None, [1, 2, 3, 4])
    # A fixed encoding: SHA-256 of the parent digest then little-endian int64 tokens.
    expected = hashlib.sha256(NONE_HASH + struct.pack("<4q", 1, 2, 3, 4)).digest()
    assert h0 == expected and len(h0) == 32
    assert hash_block_tokens(None, [1, 2, 3, 4]) == h0
    h1 = hash_block_tokens(h0, [5, 6, 7, 8])
    # Same tokens after a different prefix: a different hash.
    other_parent = hash_block_tokens(None, [9, 9, 9, 9])
    assert hash_block_tokens(other_parent, [5, 6, 7, 8]) != h1
    assert hash_block_tokens(None, [5, 6, 7, 8]) != h1


def test_only_full_blocks_are_hashed_and_hashes_extend():
    hashes: list[bytes] = []
    hash_request_tokens(4, list(range(7)), hashes)
    assert len(hashes) == 1  # 7 tokens: one full block, the partial one is not hashed
    first = hashes[0]
    hash_request_tokens(4, list(range(12)), hashes)
    assert len(hashes) == 3 and hashes[0] == first
    assert hashes[2] == hash_block_tokens(hashes[1], [8, 9, 10, 11])
    assert len(hash_request_tokens(4, list(range(40)), [], num_blocks=2)) == 2


def test_pool_allocates_in_order_and_counts_refs():
    pool = BlockPool(5)
    a = pool.get_new_blocks(2)
    assert [b.block_id for b in a] == [0, 1] and all(b.ref_cnt == 1 for b in a)
    assert pool.get_num_free_blocks() == 3 and pool.get_usage() == pytest.approx(0.4)
    pool.touch(a)
    assert [b.ref_cnt for b in a] == [2, 2]
    pool.free_blocks(a)
    assert pool.get_num_free_blocks() == 3
    pool.free_blocks(a)
    assert pool.get_num_free_blocks() == 5 and pool.get_usage() == 0.0
    with pytest.raises(ValueError, match="num_blocks=6 .*only 5 free"):
        pool.get_new_blocks(6)
    with pytest.raises(ValueError, match="num_blocks=0"):
        BlockPool(0)


def _cache(pool, blocks, tokens, block_size):
    hashes = hash_request_tokens(block_size, tokens, [])
    pool.cache_full_blocks(blocks, hashes, tokens, block_size, 0, len(hashes))
    return hashes


def test_lru_eviction_takes_the_freed_tail_first():
    pool = BlockPool(6)
    blocks = pool.get_new_blocks(3)  # ids 0, 1, 2 hold a 6-token prompt
    hashes = _cache(pool, blocks, [1, 2, 3, 4, 5, 6], 2)
    pool.free_blocks(reversed(blocks))  # as KVCacheManager.free: tail first
    assert [b.block_id for b in pool.free_block_queue] == [3, 4, 5, 2, 1, 0]
    taken = pool.get_new_blocks(4)  # never-used blocks first, then the tail
    assert [b.block_id for b in taken] == [3, 4, 5, 2]
    assert pool.get_cached_block(hashes[2], [5, 6]) is None  # evicted, hash dropped
    assert taken[3].block_hash is None and taken[3].token_ids is None
    assert pool.get_cached_block(hashes[0], [1, 2]) is blocks[0]  # the prefix survives
    assert pool.get_cached_block(hashes[1], [3, 4]) is blocks[1]
    assert hashes[2] not in pool.cached_block_hash_to_block


def test_touch_revives_a_cached_free_block():
    pool = BlockPool(3)
    blocks = pool.get_new_blocks(1)
    h = _cache(pool, blocks, [7, 7], 2)
    pool.free_blocks(blocks)
    assert blocks[0] in pool.free_block_queue
    hit = pool.get_cached_block(h[0], [7, 7])
    pool.touch([hit])
    assert hit.ref_cnt == 1 and hit not in pool.free_block_queue
    assert pool.get_num_free_blocks() == 2


def test_hash_hit_is_confirmed_by_token_ids():
    pool = BlockPool(2)
    blocks = pool.get_new_blocks(1)
    h = _cache(pool, blocks, [1, 2], 2)
    assert pool.get_cached_block(h[0], [1, 2]) is blocks[0]
    # A (pretend) collision: the right hash but other tokens is not a hit.
    assert pool.get_cached_block(h[0], [1, 3]) is None


def test_two_blocks_may_carry_the_same_hash():
    pool = BlockPool(4)
    a, b = pool.get_new_blocks(1), pool.get_new_blocks(1)
    ha = _cache(pool, a, [4, 4], 2)
    _cache(pool, b, [4, 4], 2)
    assert set(pool.cached_block_hash_to_block[ha[0]]) == {a[0].block_id, b[0].block_id}
    pool.free_blocks(a + b)
    pool.get_new_blocks(3)  # evicts a (and the two unused blocks), b stays cached
    assert pool.get_cached_block(ha[0], [4, 4]) is b[0]
