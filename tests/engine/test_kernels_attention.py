"""flash_attn_varlen and merge_attn_states, Triton and torch, against ``naive_attention``.

Tolerances (see ``kernel_utils``): out fp32 1e-5 (5e-3 on a GPU), fp16 3e-3, bf16 2e-2;
LSE fp32 1e-5 (5e-3 on a GPU), fp16/bf16 2e-3 (bf16 5e-3 on a GPU).
"""

import pytest
import torch
from kernel_utils import ALL_IMPLS, DEVICE, MAIN_IMPLS, assert_close, cu_seqlens, randn

from pdlab.attention.reference import naive_attention
from pdlab.kernels import flash_attn_varlen, merge_attn_states

TINY = {"heads": 4, "d_qk": 48, "d_v": 32}  # 32 nope + 16 rope, v 32
DEEPSEEK = {"heads": 2, "d_qk": 192, "d_v": 128}  # 128 nope + 64 rope, v 128

# (q_lens, k_lens): a ragged prefill (lengths around the 64-token tiles), and a batch of
# extends over cached context, with a query longer than its keys and an empty context.
PREFILL = ([1, 16, 17, 64, 65, 200], [1, 16, 17, 64, 65, 200])
EXTEND = ([1, 3, 20, 6, 2], [1, 64, 300, 3, 0])


def _oracle(q, k, v, lens_q, lens_k, scale, causal):
    outs, lses = [], []
    qs = ks = 0
    for nq, nk in zip(lens_q, lens_k):
        if nk == 0:  # no key at all: nothing to attend to
            outs.append(torch.zeros(nq, q.shape[1], v.shape[2]))
            lses.append(torch.full((nq, q.shape[1]), float("-inf")))
        else:
            o, lse = naive_attention(
                q[qs : qs + nq].float().cpu(),
                k[ks : ks + nk].float().cpu(),
                v[ks : ks + nk].float().cpu(),
                scale,
                causal,
            )
            outs.append(o)
            lses.append(lse)
        qs, ks = qs + nq, ks + nk
    return torch.cat(outs), torch.cat(lses)


def _run_flash(backend, dtype, widths, lens_q, lens_k, causal, seed):
    g = torch.Generator().manual_seed(seed)
    h, d_qk, d_v = widths["heads"], widths["d_qk"], widths["d_v"]
    q = randn(sum(lens_q), h, d_qk, g=g, dtype=dtype)
    k = randn(sum(lens_k), h, d_qk, g=g, dtype=dtype)
    v = randn(sum(lens_k), h, d_v, g=g, dtype=dtype)
    scale = d_qk**-0.5
    out, lse = flash_attn_varlen(
        q,
        k,
        v,
        cu_seqlens(lens_q),
        cu_seqlens(lens_k),
        max(lens_q),
        max(lens_k),
        scale,
        causal,
        backend=backend,
    )
    assert out.dtype == dtype and out.shape == (q.shape[0], h, d_v)
    assert lse.dtype == torch.float32 and lse.shape == (q.shape[0], h)
    exp_out, exp_lse = _oracle(q, k, v, lens_q, lens_k, scale, causal)
    assert not out.isnan().any() and not lse.isnan().any()
    assert_close(out, exp_out, dtype, what="out")
    assert_close(lse, exp_lse, dtype, lse=True, what="lse")


@pytest.mark.parametrize("backend,dtype", MAIN_IMPLS)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("lens", [PREFILL, EXTEND], ids=["prefill", "extend"])
def test_flash_attn_varlen_tiny(backend, dtype, causal, lens):
    _run_flash(backend, dtype, TINY, *lens, causal, seed=1)


@pytest.mark.parametrize("backend,dtype", ALL_IMPLS)
def test_flash_attn_varlen_deepseek_widths(backend, dtype):
    """QK 192 and V 128, padded to 256 and 128 inside the kernel."""
    _run_flash(backend, dtype, DEEPSEEK, [5, 1, 33], [5, 70, 40], True, seed=2)


@pytest.mark.parametrize("backend,dtype", ALL_IMPLS[2:3] + ALL_IMPLS[4:5])
def test_flash_attn_varlen_other_dtypes(backend, dtype):
    """Triton in bf16 (upcast on the interpreter) and the torch twin in fp16."""
    _run_flash(backend, dtype, TINY, [3, 20], [40, 20], True, seed=3)


def test_flash_attn_causal_is_bottom_right():
    """2 queries over 4 keys: the first sees keys 0..2, the second all four."""
    q = torch.zeros(2, 1, 16, device=DEVICE)
    k = torch.zeros(4, 1, 16, device=DEVICE)
    v = torch.arange(4.0, device=DEVICE).view(4, 1, 1).expand(4, 1, 16).contiguous()
    for backend in ("torch", "triton"):
        if backend == "triton":
            pytest.importorskip("triton")
        out, lse = flash_attn_varlen(
            q, k, v, cu_seqlens([2]), cu_seqlens([4]), 2, 4, 1.0, True, backend=backend
        )
        torch.testing.assert_close(out[:, 0, 0].cpu(), torch.tensor([1.0, 1.5]))  # means
        torch.testing.assert_close(lse[:, 0].cpu(), torch.tensor([3.0, 4.0]).log())


def _merge_case(seed, T=12, H=4, D=32, Dqk=24, S=30):
    """Keys split per token into two disjoint parts; some tokens have an empty part, the
    last has two. Returns the partial results and the oracle over the union."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(T, H, Dqk, generator=g), torch.randn(S, H, Dqk, generator=g)
    v = torch.randn(S, H, D, generator=g)
    in_a = torch.rand(T, S, generator=g) < 0.5
    in_b = ~in_a
    in_a[0], in_b[0] = True, False  # all keys in A, B empty
    in_a[1], in_b[1] = False, True  # A empty
    in_a[-1], in_b[-1] = False, False  # both empty
    parts, whole = [], []
    for mask in (in_a, in_b):
        o, l = torch.zeros(T, H, D), torch.full((T, H), float("-inf"))
        for t in range(T):
            if mask[t].any():
                o[t], l[t] = (
                    x[0] for x in naive_attention(q[t : t + 1], k[mask[t]], v[mask[t]], 0.3, False)
                )
        parts += [o, l]
    for t in range(T):
        keys = in_a[t] | in_b[t]
        if keys.any():
            whole.append(naive_attention(q[t : t + 1], k[keys], v[keys], 0.3, False))
        else:
            whole.append((torch.zeros(1, H, D), torch.full((1, H), float("-inf"))))
    return parts, torch.cat([w[0] for w in whole]), torch.cat([w[1] for w in whole])


@pytest.mark.parametrize("backend,dtype", ALL_IMPLS)
@pytest.mark.parametrize("D", [32, 128])
def test_merge_attn_states(backend, dtype, D):
    (o_a, l_a, o_b, l_b), exp_out, exp_lse = _merge_case(seed=D, D=D)
    o_a, o_b = o_a.to(dtype).to(DEVICE), o_b.to(dtype).to(DEVICE)
    out, lse = merge_attn_states(o_a, l_a.to(DEVICE), o_b, l_b.to(DEVICE), backend=backend)
    assert out.dtype == dtype and lse.dtype == torch.float32
    assert not out.isnan().any() and not lse.isnan().any()
    assert (out[-1] == 0).all() and torch.isneginf(lse[-1]).all()
    assert_close(out, exp_out, dtype, what="out")
    assert_close(lse, exp_lse, dtype, lse=True, what="lse")


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_merge_ignores_whatever_an_empty_part_holds(backend):
    """An empty part (lse -inf, or +inf as some kernels report it) may hold garbage."""
    if backend == "triton":
        pytest.importorskip("triton")
    (o_a, l_a, o_b, l_b), exp_out, exp_lse = _merge_case(seed=5)
    o_b[l_b == float("-inf")] = float("nan")
    assert torch.isneginf(l_b[0]).all() and torch.isneginf(l_a[-1]).all()
    l_b[0] = float("inf")  # B empty for token 0, reported as +inf
    l_a[-1] = float("inf")  # both empty for the last token, one of them as +inf
    out, lse = merge_attn_states(
        o_a.to(DEVICE), l_a.to(DEVICE), o_b.to(DEVICE), l_b.to(DEVICE), backend=backend
    )
    assert_close(out, exp_out, torch.float32, what="out")
    assert_close(lse, exp_lse, torch.float32, lse=True, what="lse")


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_bad_inputs_name_the_argument(backend):
    if backend == "triton":
        pytest.importorskip("triton")
    q, k, v = torch.zeros(3, 2, 48), torch.zeros(5, 2, 48), torch.zeros(5, 2, 32)
    cq, ck = cu_seqlens([3]).cpu(), cu_seqlens([5]).cpu()
    with pytest.raises(ValueError, match=r"k: .*QK head width of q"):
        flash_attn_varlen(q, k[..., :40], v, cq, ck, 3, 5, 1.0, True, backend=backend)
    with pytest.raises(ValueError, match=r"v: expected dtype torch\.float32"):
        flash_attn_varlen(q, k, v.half(), cq, ck, 3, 5, 1.0, True, backend=backend)
    with pytest.raises(ValueError, match=r"cu_seqlens_q: expected dtype torch\.int32"):
        flash_attn_varlen(q, k, v, cq.long(), ck, 3, 5, 1.0, True, backend=backend)
    with pytest.raises(ValueError, match=r"max_seqlen_q: expected an int >= 0"):
        flash_attn_varlen(q, k, v, cq, ck, 3.0, 5, 1.0, True, backend=backend)
    o, lse = torch.zeros(3, 2, 32), torch.zeros(3, 2)
    with pytest.raises(ValueError, match=r"lse_b: expected \[tokens, heads\]"):
        merge_attn_states(o, lse, o, lse.T.contiguous(), backend=backend)
    with pytest.raises(ValueError, match=r"lse_a: expected dtype torch\.float32"):
        merge_attn_states(o, lse.half(), o, lse, backend=backend)
