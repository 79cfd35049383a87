"""Block hashing for prefix caching: a full block is named by its tokens and its prefix.

Mirrors ``hash_block_tokens`` and ``NONE_HASH`` in ``vllm/v1/core/kv_cache_utils.py``.
The hash of block ``i`` chains the hash of block ``i - 1`` with block ``i``'s token ids, so
equal hashes mean equal prefixes, not just equal blocks: the K/V of a token depend on every
token before it, and a block can only be reused after the same prefix.

pdlab uses SHA-256 (vLLM's default) over a fixed byte encoding (parent digest, then each
token id as a little-endian int64), so a hash is the same in every process and on every
machine. vLLM also mixes in "extra keys" (LoRA id, multimodal hashes, cache salt); pdlab
has none. Only full blocks are hashed: a partial block's tokens are not final yet. With
``num_lookahead_tokens`` L > 0 (``get_request_block_hasher``'s ``num_hash_lookahead_tokens``)
a block's hash also covers the L tokens after it (why: ``pdlab/engine/core/kv_cache_manager.py``).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

BlockHash = bytes

# The parent of the first block: a fixed value, so hashes are reproducible across runs
# (vLLM seeds it from PYTHONHASHSEED or at random).
NONE_HASH: BlockHash = bytes(32)


def hash_block_tokens(
    parent_block_hash: BlockHash | None,
    block_token_ids: Sequence[int],
    lookahead_token_ids: Sequence[int] = (),
) -> BlockHash:
    """SHA-256 of ``parent_block_hash`` followed by the block's token ids (and, marked
    apart from them, the lookahead tokens after the block, if any)."""
    h = hashlib.sha256(NONE_HASH if parent_block_hash is None else parent_block_hash)
    h.update(struct.pack(f"<{len(block_token_ids)}q", *block_token_ids))
    if lookahead_token_ids:
        h.update(b"lookahead")
        h.update(struct.pack(f"<{len(lookahead_token_ids)}q", *lookahead_token_ids))
    return h.digest()


def hash_request_tokens(
    block_size: int, token_ids: Sequence[int], block_hashes: list[BlockHash],
    num_blocks: int | None = None, num_lookahead_tokens: int = 0,
) -> list[BlockHash]:  # fmt: skip
    """Extend ``block_hashes`` in place with the hashes of the next full blocks of
    ``token_ids`` (up to ``num_blocks`` blocks if given) and return it; a block is hashed
    only once the ``num_lookahead_tokens`` after it exist. Hashes already in the list are
    kept: a request's tokens only ever grow, so the hash of a full block never changes."""
    num_full = max(len(token_ids) - num_lookahead_tokens, 0) // block_size
    if num_blocks is not None:
        num_full = min(num_full, num_blocks)
    for i in range(len(block_hashes), num_full):
        parent = block_hashes[i - 1] if i > 0 else None
        end = (i + 1) * block_size
        lookahead = token_ids[end : end + num_lookahead_tokens]
        block_hashes.append(hash_block_tokens(parent, token_ids[i * block_size : end], lookahead))
    return block_hashes
