import triton
import triton.language as tl


@triton.jit
def paged_decode_kernel(
    q_ptr,  # fp32 [B, H, W]: the absorbed query, W = L + R
    # zh: fp32 [B, H, W]：吸收形式的 query，W = L + R
    cache_ptr,  # fp32 [num_blocks, PAGE, W]: the latent rows [kv_c | k_pe]
    # zh: fp32 [num_blocks, PAGE, W]：潜向量行 [kv_c | k_pe]
    block_table_ptr,  # int32 [B, max_blocks]
    seq_lens_ptr,  # int32 [B]
    out_ptr,  # fp32 [B, H, L]
    lse_ptr,  # fp32 [B, H]
    scale,
    max_blocks,
    H,
    L: tl.constexpr,
    W: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_W: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    cols = tl.arange(0, BLOCK_W)
    in_row = cols < W
    q = tl.load(q_ptr + (b * H + h) * W + cols, mask=in_row, other=0.0)
    seq_len = tl.load(seq_lens_ptr + b)
    offs = tl.arange(0, PAGE)
    m_i = tl.full((), float("-inf"), tl.float32)
    l_i = tl.full((), 0.0, tl.float32)
    acc = tl.zeros([BLOCK_W], dtype=tl.float32)
    for page in range(0, tl.cdiv(seq_len, PAGE)):
        block_id = tl.load(block_table_ptr + b * max_blocks + page).to(tl.int64)
        valid = page * PAGE + offs < seq_len  # the last page may be partly filled
        # zh: 最后一页可能只填了一部分
        rows = tl.load(
            cache_ptr + (block_id * PAGE + offs[:, None]) * W + cols[None, :],
            mask=valid[:, None] & in_row[None, :],
            other=0.0,
        )
        s = tl.where(valid, tl.sum(rows * q[None, :], axis=1) * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp(m_i - m_new)  # rescale what was summed under the old max
        # zh: 把按旧最大值累加的部分重新缩放
        p = tl.exp(s - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * rows, axis=0)
        m_i = m_new
    out = acc / l_i
    tl.store(out_ptr + (b * H + h) * L + cols, out, mask=cols < L)
    tl.store(lse_ptr + b * H + h, m_i + tl.log(l_i))
