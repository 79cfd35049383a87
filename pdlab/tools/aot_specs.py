"""What ``pdlab doctor --aot`` compiles: every Triton kernel of ``pdlab.kernels``, configured
as its launcher configures it for one sample launch, with the type of every argument.

A :class:`KernelSpec` is what ``triton.compile`` needs besides the target: the kernel, its
constexprs (from the kernel's ``*_config`` function, the one the launcher calls), its launch
options, and the integer arguments of a typical launch (:data:`SAMPLE`), on whose values the
JIT specialises. vLLM has no counterpart: its Triton kernels compile at their first launch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pdlab.kernels import cache, decode_attention, flash_attn, merge
from pdlab.kernels.decode_attention_kernels import (
    mla_decode_stage1_kernel,
    mla_decode_stage2_kernel,
)
from pdlab.kernels.flash_attn_kernels import flash_attn_varlen_kernel

# Widths: the tiny model, and DeepSeek-V2/V3 (latent 512 + rope 64, QK 192, V 128).
WIDTHS = {
    "tiny": {"L": 64, "R": 16, "d_qk": 48, "d_v": 32, "heads": 4},
    "deepseek": {"L": 512, "R": 64, "d_qk": 192, "d_v": 128, "heads": 128},
}
ELEM_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}  # the dtypes a check may ask for
OPTIONS = ("num_warps", "num_stages")

# The launch the builds stand for: 64 requests of a 4K context in 64-token pages (decode),
# 4K packed tokens (prefill). The JIT specialises on these values, so the build does too.
SAMPLE = {"batch": 64, "page": 64, "context": 4096, "tokens": 4096}
# Queries per request of the speculative-decoding builds: 1 + K for K = 1 and 2. Every
# longer request builds as 3 does (BLOCK_Q = MAX_BLOCK_Q = 4 queries of 4 heads, the same
# split counts for the sample launch), so these two are every multi-query build there is.
SPEC_Q_LENS = (2, 3)


@dataclass
class KernelSpec:
    name: str
    widths: str
    kernel: Callable
    constexprs: dict
    options: dict
    ints: dict[str, int]
    pointers: dict = field(default_factory=dict)  # pointer args not in the data dtype
    floats: tuple[str, ...] = ("scale",)
    uses_dot: bool = False


def _split_options(cfg: dict) -> tuple[dict, dict]:
    return (
        {k: v for k, v in cfg.items() if k not in OPTIONS},
        {k: v for k, v in cfg.items() if k in OPTIONS},
    )


def specs(widths: dict, dtype: str, target: int = 90) -> list[KernelSpec]:
    """Every Triton kernel of pdlab.kernels, configured as its launcher configures it for
    :data:`SAMPLE` on ``sm_<target>``, with the strides of the tensors it passes."""
    L, R, d_qk, d_v, H = (widths[k] for k in ("L", "R", "d_qk", "d_v", "heads"))
    B, page, ctx, T = (SAMPLE[k] for k in ("batch", "page", "context", "tokens"))
    e = ELEM_BYTES[dtype]
    cache_strides = {"stride_cache_block": page * (L + R), "stride_cache_slot": L + R}
    i32 = "*i32"
    out: list[KernelSpec] = []

    c, o = _split_options(cache.reshape_and_cache_mla_config(L, R))
    ints = {"stride_kv_c": L, "stride_k_pe": R, **cache_strides, "block_size": page, "L": L, "R": R}
    kernel, pointers = cache.reshape_and_cache_mla_kernel, {"slot_mapping_ptr": "*i64"}
    out.append(KernelSpec("reshape_and_cache_mla", f"L+R={L}+{R}", kernel, c, o, ints, pointers))
    c, o = _split_options(cache.gather_cache_config(L + R))
    ints = {**cache_strides, "stride_block_table": ctx // page, "stride_out": L + R}
    ints |= {"block_size": page, "D": L + R}
    pointers = {p: i32 for p in ("block_table_ptr", "cu_seq_lens_ptr", "seq_starts_ptr")}
    for starts in (True, False):
        widths_label = f"L+R={L}+{R}{' seq_starts' if starts else ''}"
        const = {**c, "HAS_SEQ_STARTS": starts}
        kernel = cache.gather_cache_kernel
        out.append(KernelSpec("gather_cache", widths_label, kernel, const, o, ints, pointers))
    c, o = _split_options(flash_attn.flash_attn_varlen_config(T, d_qk, d_v, e, target))
    ints = {f"stride_{t}_t": H * w for t, w in (("q", d_qk), ("k", d_qk), ("v", d_v), ("o", d_v))}
    ints |= {f"stride_{t}_h": w for t, w in (("q", d_qk), ("k", d_qk), ("v", d_v), ("o", d_v))}
    ints |= {"num_heads": H}
    pointers = {"lse_ptr": "*fp32", "cu_seqlens_q_ptr": i32, "cu_seqlens_k_ptr": i32}
    for causal in (True, False):
        const = {**c, "CAUSAL": causal, "UPCAST": False, "D_QK": d_qk, "D_V": d_v}
        label = f"QK={d_qk} V={d_v} {'causal' if causal else 'non-causal'}"
        built = (label, flash_attn_varlen_kernel, const, o, ints, pointers)
        out.append(KernelSpec("flash_attn_varlen", *built, uses_dot=True))
    c, o = _split_options(merge.merge_attn_states_config(H, d_v))
    ints = {f"stride_{t}_t": H * d_v for t in ("out", "a", "b")}
    ints |= {f"stride_{t}_h": d_v for t in ("out", "a", "b")} | {"H": H, "D": d_v}
    kernel = merge.merge_attn_states_kernel
    pointers = {p: "*fp32" for p in ("lse_ptr", "lse_a_ptr", "lse_b_ptr")}
    out.append(KernelSpec("merge_attn_states", f"H={H} D={d_v}", kernel, c, o, ints, pointers))
    out += _decode_specs(L, R, H, B, page, ctx, dtype, target, spec=L >= 512 and e <= 2)
    return out


def _decode_specs(
    L: int, R: int, H: int, B: int, page: int, ctx: int, dtype: str, target: int, spec: bool
) -> list:
    """Stage 1 as the automatic split count launches it for the sample batch and for one
    request (at least 2 splits), which stage 2 merges; with ``spec`` (DeepSeek's widths), the
    same for each of :data:`SPEC_Q_LENS`, stage 2 once."""
    out = _decode_specs_for(L, R, H, B, page, ctx, dtype, target, 1)
    for i, q_len in enumerate(SPEC_Q_LENS if spec else ()):
        specs_q = _decode_specs_for(L, R, H, B, page, ctx, dtype, target, q_len)
        out += specs_q if i == 0 else specs_q[:-1]
    return out


def _decode_specs_for(
    L: int, R: int, H: int, B: int, page: int, ctx: int, dtype: str, target: int, q_len: int
) -> list:
    da = decode_attention
    S = da.num_kv_splits_auto(B, H, ctx, da.CPU_NUM_SMS, L, R, q_len)
    S2 = max(2, da.num_kv_splits_auto(1, H, ctx, da.CPU_NUM_SMS, L, R, q_len))
    cfg = da.mla_decode_config(L, R, ELEM_BYTES[dtype], target, q_len)
    c, o = _split_options(cfg["stage1"])
    varlen = q_len > 1
    ints = {"stride_q_b": H * (L + R), "stride_q_h": L + R, "stride_cache_block": page * (L + R)}
    ints |= {"stride_block_table": ctx // page}
    ints |= {"stride_o_b": H * L, "stride_o_h": L, "num_heads": H, "L": L}
    ints |= {"num_head_groups": -(-H // c["BLOCK_H"])}
    f32 = "*fp32"
    label = f" q_len={q_len}" if varlen else ""
    out = []
    for s in sorted({S, S2}):  # not split (S = 1 writes out directly) and split, if both
        mid = {"stride_mid_b": H * s * L, "stride_mid_h": s * L, "stride_mid_s": L}
        pointers = {"block_table_ptr": "*i32", "seq_lens_ptr": "*i32", "lse_ptr": f32}
        pointers |= {"mid_out_ptr": f32 if s > 1 else f"*{dtype}", "mid_lse_ptr": f32}
        pointers |= {"query_start_loc_ptr": "*i32"}
        const = {**c, "UPCAST": False, "PAGE_SIZE": page, "L": L, "R": R, "VARLEN": varlen}
        const["stride_cache_slot"] = L + R  # a constexpr of stage 1 (its tile's row offsets)
        built = (f"L+R={L}+{R} splits={s}{label}", mla_decode_stage1_kernel, const, o)
        built += ({**ints, **mid, "num_kv_splits": s}, pointers)
        out.append(KernelSpec("mla_decode stage 1", *built, uses_dot=True))
    mid = {"stride_mid_b": H * S2 * L, "stride_mid_h": S2 * L, "stride_mid_s": L}
    c, o = _split_options(cfg["stage2"])
    pointers = {"mid_out_ptr": f32, "mid_lse_ptr": f32, "seq_lens_ptr": "*i32", "lse_ptr": f32}
    built = (f"L={L} splits={S2}{label}", mla_decode_stage2_kernel, {**c, "VARLEN": varlen}, o)
    built += ({**ints, **mid, "num_kv_splits": S2}, {**pointers, "query_start_loc_ptr": "*i32"})
    return [*out, KernelSpec("mla_decode stage 2", *built)]
