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
    """One program per (request, head): attention of one head's query over the request's
    cached rows, one page at a time, with the online softmax. V is the first L columns of
    the same rows."""
    # zh: """每个（请求，头）对应一个 `program`：一个头的 query 对该请求已缓存行的注意力，一次一页，
    # zh: 用在线 softmax。V 是同样这些行的前 L 列。"""
    b = tl.program_id(0)
    h = tl.program_id(1)
    cols = tl.arange(0, BLOCK_W)
    in_row = cols < W
    q = tl.load(q_ptr + (b * H + h) * W + cols, mask=in_row, other=0.0)
    seq_len = tl.load(seq_lens_ptr + b)
    offs = tl.arange(0, PAGE)
    m_i = tl.full((), float("-inf"), tl.float32)  # running max of the scores
    # zh: 分数的运行最大值
    l_i = tl.full((), 0.0, tl.float32)  # running sum of exp(score - m_i)
    # zh: `exp(score - m_i)` 的运行和
    acc = tl.zeros([BLOCK_W], dtype=tl.float32)  # running sum of exp(score - m_i) * row
    # zh: `exp(score - m_i) * row` 的运行和
    for page in range(0, tl.cdiv(seq_len, PAGE)):
        # Write this loop's body: load the page's rows through the block table (only the
        # positions < seq_len), score them against q, and fold them into m_i, l_i, acc.
        # zh: 写出这个循环的主体：经块表加载这一页的行（只取位置 < seq_len 的），与 q 计算分数，
        # zh: 再并入 `m_i`、`l_i`、`acc`。
        pass
    out = acc / l_i
    tl.store(out_ptr + (b * H + h) * L + cols, out, mask=cols < L)
    tl.store(lse_ptr + b * H + h, m_i + tl.log(l_i))
