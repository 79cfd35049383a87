"""The words of ``pdlab bench`` (``paths``, ``kernels``, ``sched``) and ``pdlab train``, in
English and Simplified Chinese. It mirrors no upstream file (vLLM's benchmarks print English).

Keys: ``bench_`` for what the three measurements share (the progress bar), ``bp_`` for the
table of ``bench paths``, ``bs_`` for its speculative-decoding table, ``bk_`` for ``bench
kernels``, ``bsch_`` for ``bench sched`` and ``tr_`` for ``pdlab train`` (its lines, its
progress bars and its loss curve). A column has its header under its key, its short header
under ``KEY_s`` and what the short one stands for (the legend) under ``KEY_m``. Every
number is computed by the view and passed in; the results written as JSON hold none of
these words. The English is what these commands printed before they spoke Chinese, word
for word. Chinese terms (``docs/glossary.md``): 算子 for kernel, 下界 for this machine's
floor, 孪生实现 for a torch twin, 稠密版本 for the dense torch version, 损失 for loss,
语料 for the corpus, 额外 token for the bonus token; identifiers stay in English.
"""

from __future__ import annotations

TEXT_BENCH: dict[str, dict[str, str]] = {
    # ---- the progress bar (pdlab/cli/bench.py) ----------------------------------------
    "bench_progress": {"en": "{what}: {label}", "zh": "{what}：{label}"},
    "bench_what_paths": {"en": "bench paths", "zh": "路径基准测试"},
    "bench_what_kernels": {"en": "bench kernels", "zh": "算子基准测试"},
    "bench_done": {"en": "done", "zh": "完成"},
    # ---- bench paths: D's one-token step through both paths (pdlab/tools/bench.py) ------
    "bp_title": {
        "en": "D's one-token step, {preset} (H={h}), {device} {dtype}, backend {backend}; "
        "this run's ceilings: matmul {matmul} GFLOP/s, copy {copy} GB/s",
        "zh": "D 的单 token 步，{preset}（H={h}），{device} {dtype}，后端 {backend}；本次运行实测"
        "的上限：矩阵乘 {matmul} GFLOP/s，拷贝 {copy} GB/s",
    },
    "bp_note": {
        "en": "one attention layer, one query token over the context; times are medians of "
        "{repeats}; ratios are prefill path / decode path; floor = max(modelled FLOPs / "
        "measured matmul rate, modelled bytes / measured copy rate), measured in this run",
        "zh": "一个注意力层，一个 query token 对整段上下文做注意力；时间取 {repeats} 次的中位数；"
        "比值为 prefill 路径 / decode 路径；下界 = max(估算的 FLOPs / 实测矩阵乘速率，估算的字节数"
        " / 实测拷贝速率)，两种速率都在本次运行中测得",
    },
    "bench_legend": {"en": "Columns: ", "zh": "列："},
    "bp_ctx": {"en": "context", "zh": "上下文"},
    "bp_ctx_s": {"en": "ctx", "zh": "长度"},
    "bp_ctx_m": {"en": "context tokens", "zh": "上下文 token 数"},
    "bp_mha": {"en": "forward_mha ms", "zh": "forward_mha ms"},
    "bp_mha_s": {"en": "pf ms", "zh": "MHA ms"},
    "bp_mha_m": {"en": "forward_mha ms", "zh": "forward_mha ms"},
    "bp_floor": {"en": "floor ms", "zh": "下界 ms"},
    "bp_floor_s": {"en": "floor", "zh": "下界"},
    "bp_floor_m": {"en": "its floor ms", "zh": "其下界 ms"},
    "bp_xfloor": {"en": "x floor", "zh": "倍于下界"},
    "bp_xfloor_s": {"en": "x", "zh": "倍"},
    "bp_xfloor_m": {"en": "times its floor", "zh": "是其下界的几倍"},
    "bp_mqa": {"en": "forward_mqa ms", "zh": "forward_mqa ms"},
    "bp_mqa_s": {"en": "dc ms", "zh": "MQA ms"},
    "bp_mqa_m": {"en": "forward_mqa ms", "zh": "forward_mqa ms"},
    "bp_ratio": {"en": "measured ratio", "zh": "实测比值"},
    "bp_ratio_s": {"en": "ratio", "zh": "比值"},
    "bp_ratio_m": {"en": "measured pf / dc", "zh": "实测的 MHA ms / MQA ms"},
    "bp_flop": {"en": "modelled FLOP ratio", "zh": "估算 FLOP 比"},
    "bp_flop_s": {"en": "FLOP", "zh": "FLOP"},
    "bp_flop_m": {"en": "modelled FLOP ratio", "zh": "按代价模型估算的 FLOP 比"},
    "bp_bytes": {"en": "modelled bytes ratio", "zh": "估算字节比"},
    "bp_bytes_s": {"en": "bytes", "zh": "字节"},
    "bp_bytes_m": {"en": "modelled bytes ratio", "zh": "按代价模型估算的字节比"},
    "bp_diff": {"en": "max |diff|", "zh": "最大 |差|"},
    "bp_diff_s": {"en": "diff", "zh": "差"},
    "bp_diff_m": {"en": "max |diff| of the outputs", "zh": "两条路径输出之差的最大绝对值"},
    "bp_progress_rates": {
        "en": "this machine's matmul and copy rates",
        "zh": "本机的矩阵乘与拷贝速率",
    },
    "bp_progress_paths": {
        "en": "context {n}: both paths, {repeats} repeats",
        "zh": "上下文 {n}：两条路径，各重复 {repeats} 次",
    },
    "bp_progress_spec": {
        "en": "context {n}: 1 and 1 + {k} queries",
        "zh": "上下文 {n}：1 个和 1 + {k} 个 query",
    },
    # ---- bench paths --num-speculative-tokens K: the decode kernel for 1 + K queries ----
    "bs_title": {
        "en": "mla_decode for D's verifying step, 1 + K = {q} queries of one request, "
        "{preset} (H={h}), {device} {dtype}, backend {backend}",
        "zh": "D 的验证步中的 mla_decode：一个请求的 1 + K = {q} 个 query，{preset}（H={h}），"
        "{device} {dtype}，后端 {backend}",
    },
    "bs_note": {
        "en": "ratios are 1 + K queries / 1 query (modelled: FLOPs follow the (query, key) "
        "pairs, the rows are read once per request); flat = the 1 + K queries as one row "
        "each (0.33.0's Triton MLA), against the shared rows; floors as above",
        "zh": "比值为 1 + K 个 query / 1 个 query（估算：FLOPs 随 (query, key) 对的个数增长，"
        "每个请求的行只读一次）；展平 = 1 + K 个 query 各占一行（0.33.0 的 Triton MLA），与共享"
        "的行相比；下界同上",
    },
    "bs_one": {"en": "1 query ms", "zh": "1 个 query ms"},
    "bs_one_s": {"en": "1q ms", "zh": "单 ms"},
    "bs_one_m": {"en": "one query ms", "zh": "1 个 query 的 ms"},
    "bs_many": {"en": "1+{k} ms", "zh": "1+{k} ms"},
    "bs_many_s": {"en": "nq ms", "zh": "多 ms"},
    "bs_many_m": {"en": "1 + {k} queries ms", "zh": "1 + {k} 个 query 的 ms"},
    "bs_ratio_m": {"en": "measured nq / 1q", "zh": "实测的多 ms / 单 ms"},
    "bs_flat": {"en": "flat / shared ms", "zh": "展平 / 共享 ms"},
    "bs_flat_s": {"en": "flat", "zh": "展平"},
    "bs_flat_m": {"en": "flattened ms / shared ms", "zh": "展平 ms / 共享 ms"},
    "bs_fbytes": {"en": "flat / shared bytes", "zh": "展平 / 共享字节"},
    "bs_fbytes_s": {"en": "fbyt", "zh": "展字节"},
    "bs_fbytes_m": {
        "en": "flattened bytes / shared, modelled",
        "zh": "展平 / 共享的字节数，按代价模型估算",
    },
    "bs_diff_m": {"en": "max |diff| flat vs shared", "zh": "展平与共享的输出之差的最大绝对值"},
    # ---- bench kernels (pdlab/tools/bench_kernels.py) -----------------------------------
    "bk_title": {"en": "pdlab kernels on {device}", "zh": "pdlab 的算子，运行于 {device}"},
    "bk_note_cpu": {
        "en": "CPU: the torch twins (tiny widths for the copies, DeepSeek's for attention, beside "
        "a dense torch version of the same math: vs dense = twin / dense), on one thread: on a "
        "shared machine, two threads' barriers measure the neighbours' load. The Triton kernels "
        "run here only through the interpreter, whose timings mean nothing, so they are not timed; "
        "run `python -m pdlab.tools.gpu_check` on a CUDA machine.",
        "zh": "CPU：torch 孪生实现（拷贝类算子用 tiny 模型的宽度，注意力用 DeepSeek 的宽度，并与同"
        "一算法的 torch 稠密版本并列：稠密比 = 孪生实现 / 稠密版本），单线程：在共享的机器上，两个"
        "线程的同步屏障测到的是邻居的负载。Triton 算子在这里只能通过解释器运行，其耗时没有意义，所"
        "以不计时；请在 CUDA 机器上运行 `python -m pdlab.tools.gpu_check`。",
    },
    "bk_note_cpu_no_triton": {
        "en": "CPU: the torch twins, each beside a dense torch version of the same math, on one "
        "thread. Triton is not installed here (it has Linux wheels only), so only the torch twins "
        "run; on a CUDA machine, `pip install triton` and run `python -m pdlab.tools.gpu_check`.",
        "zh": "CPU：torch 孪生实现，各自与同一算法的 torch 稠密版本并列，单线程。这里没有安装 "
        "Triton（它只有 Linux 的 wheel），所以只运行 torch 孪生实现；在 CUDA 机器上先 `pip install "
        "triton`，再运行 `python -m pdlab.tools.gpu_check`。",
    },
    "bk_note_gpu": {
        "en": "GPU: Triton kernels, compiled; decode share = bytes read / peak bandwidth, "
        "prefill share = FLOP/s / peak dense bf16.",
        "zh": "GPU：编译后的 Triton 算子；解码占比 = 读取的字节数 / 峰值带宽，预填充占比 = "
        "FLOP/s / bf16 稠密算力峰值。",
    },
    "bk_kernel": {"en": "kernel", "zh": "算子"},
    "bk_impl": {"en": "impl", "zh": "实现"},
    "bk_dtype": {"en": "dtype", "zh": "数据类型"},
    "bk_shape": {"en": "shape", "zh": "形状"},
    "bk_ms": {"en": "ms", "zh": "ms"},
    "bk_gbps": {"en": "GB/s", "zh": "GB/s"},
    "bk_tflops": {"en": "TFLOP/s", "zh": "TFLOP/s"},
    "bk_peak": {"en": "of peak", "zh": "占峰值"},
    "bk_dense_ms": {"en": "dense ms", "zh": "稠密 ms"},
    "bk_vs_dense": {"en": "vs dense", "zh": "稠密比"},
    "bk_error": {"en": "error", "zh": "出错"},
    "bk_starting": {"en": "starting", "zh": "开始"},
    "bk_case_prefill": {"en": "{impl} prefill H={h}", "zh": "{impl} 预填充 H={h}"},
    # ---- bench sched (pdlab/tools/bench_sched.py) ---------------------------------------
    "bsch_line": {
        "en": "scheduler, {n} running requests decoding: median {median} us per step ({per} "
        "us per request), mean {mean} us over {steps} steps",
        "zh": "调度器：{n} 个运行中的请求都在解码，每步中位数 {median} µs（每个请求 {per} µs），"
        "{steps} 步平均 {mean} µs",
    },
    # ---- pdlab train (pdlab/cli/train.py) -----------------------------------------------
    "tr_head": {
        "en": "pdlab train: the tiny model on {n} corpus lines (English and Chinese)",
        "zh": "pdlab train：用 {n} 行语料（英文和中文）训练 tiny 模型",
    },
    "tr_settings": {
        "en": "{steps} steps of {bs} x {seq} bytes, seed {seed}, {threads}",
        "zh": "{steps} 步，每步 {bs} x {seq} 字节，种子 {seed}，{threads}",
    },
    "tr_thread": {"en": "{n} thread", "zh": "{n} 个线程"},
    "tr_threads": {"en": "{n} threads", "zh": "{n} 个线程"},
    "tr_main_from": {
        "en": "the main model from {path}, not trained",
        "zh": "主模型读自 {path}，不再训练",
    },
    "tr_then_mtp": {
        "en": "then the MTP layer: {steps} steps, the main model frozen",
        "zh": "然后训练 MTP 层：{steps} 步，主模型冻结",
    },
    "tr_task_main": {"en": "train", "zh": "训练"},
    "tr_task_mtp": {"en": "mtp", "zh": "MTP 层"},
    "tr_loss_word": {"en": "loss", "zh": "损失"},
    "tr_step": {
        "en": "{name} step {i}/{n} loss {loss}",
        "zh": "{name}：第 {i}/{n} 步，损失 {loss}",
    },
    "tr_trained": {
        "en": "trained in {s} s ({rate} bytes/s)",
        "zh": "训练用时 {s} s（{rate} 字节/s）",
    },
    "tr_loss": {
        "en": "loss {final} nats/byte (the last {k} steps), {corpus} over the corpus",
        "zh": "损失 {final} 奈特/字节（最后 {k} 步），在整个语料上为 {corpus}",
    },
    "tr_mtp_trained": {
        "en": "MTP layer trained in {s} s (the main model frozen)",
        "zh": "MTP 层训练用时 {s} s（主模型冻结）",
    },
    "tr_mtp_loss": {
        "en": "MTP loss {final} on token i + 2 (the last {k} steps), {corpus} over the corpus",
        "zh": "MTP 损失：token i + 2 上为 {final}（最后 {k} 步），在整个语料上为 {corpus}",
    },
    "tr_acceptance": {
        "en": "MTP acceptance (greedy, every corpus prefix): first draft {a1}, second {a2}",
        "zh": "MTP 接受率（贪心，语料的每个前缀）：第一个草稿 token {a1}，第二个 {a2}",
    },
    "tr_length": {
        "en": "mean acceptance length with the bonus token: {k1} at K = 1, {k2} at K = 2",
        "zh": "平均接受长度（含额外 token）：K = 1 时 {k1}，K = 2 时 {k2}",
    },
    "tr_wrote_checkpoint": {"en": "wrote {path} ({mb} MB)", "zh": "已写入 {path}（{mb} MB）"},
    "tr_wrote_plot": {"en": "wrote {path} (the loss curve)", "zh": "已写入 {path}（损失曲线）"},
    "tr_sample": {
        "en": "{prompt} -> {completion}",
        "zh": "提示词 {prompt} 的贪心续写：{completion}",
    },
    "tr_run_it": {
        "en": "run it: pdlab trace --weights {path}",
        "zh": "运行它：pdlab trace --weights {path}",
    },
    "tr_plot_main": {"en": "main model (token i + 1)", "zh": "主模型（token i + 1）"},
    "tr_plot_mtp": {"en": "MTP layer (token i + 2)", "zh": "MTP 层（token i + 2）"},
    "tr_plot_x": {"en": "step", "zh": "步"},
    "tr_plot_y": {"en": "cross-entropy (nats per byte)", "zh": "交叉熵（奈特/字节）"},
    "tr_plot_title": {
        "en": "pdlab train: tiny model, seed {seed}, {steps} steps of {tokens} bytes",
        "zh": "pdlab train：tiny 模型，种子 {seed}，{steps} 步，每步 {tokens} 字节",
    },
}
