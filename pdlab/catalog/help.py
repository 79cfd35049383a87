"""Every ``pdlab ... --help`` text, English and Chinese side by side per ``help_`` key: each
parser's description, each option's and subcommand's help, and argparse's own words.

``pdlab/cli/*.py`` never writes a help in words: it passes a key, ``Help("help_...")``
(:class:`pdlab.catalog.Help`), and the parser keeps it until a help is printed; then
:func:`words` renders every key of that parser with :func:`pdlab.catalog.text`, in the
language asked for. Rewording the English is an edit here, beside its Chinese; a help
that is no key fails ``tests/contracts/test_help_keys.py``. Option names, metavars,
choices, ``%(default)s`` values, paths, environment variables and vLLM's identifiers stay
as they are; a value that is a plain English word (``trained``, ``start``) is set in
backticks, as pdlab's Chinese error messages do (``pdlab/catalog/errors.py``). Imported only
when a help is printed (or a Chinese usage line), so ``pdlab --version`` and every run that
prints no help do not pay for it.

It mirrors no upstream file: vLLM's CLI help is English only.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from pdlab.catalog import Help, text

# argparse's "usage: " is 7 cells; this is too (用法 and ： are two each), so the usage
# lines argparse wraps under it stay aligned.
USAGE = "用法： "
# argparse's own group titles (3.10 says "optional arguments"), under --lang zh
_TITLES = {
    "positional arguments": "help_ap_positionals",
    "options": "help_ap_options",
    "optional arguments": "help_ap_options",
}

TEXT_HELP: dict[str, dict[str, str]] = {
    # ---- how a list and the choices left out of a usage line are written -----------------
    "help_list_sep": {"en": ", ", "zh": "、"},
    "help_choice": {"en": "{name}", "zh": "`{name}`"},  # a value, not a word
    "help_one_of": {"en": "one of: {names}", "zh": "可选值：{names}"},
    "help_then": {"en": "{help}; {rest}", "zh": "{help}；{rest}"},
    # ---- argparse's own words ------------------------------------------------------------
    "help_ap_positionals": {"en": "positional arguments", "zh": "位置参数"},
    "help_ap_options": {"en": "options", "zh": "选项"},
    "help_ap_help": {"en": "show this help message and exit", "zh": "显示本帮助信息并退出"},
    "help_ap_version": {
        "en": "show program's version number and exit",
        "zh": "显示程序的版本号并退出",
    },
    "help_pdlab": {
        "en": "Run the prefill/decode path of an LLM inference engine: paged KV cache, vLLM-v1 "
        "scheduler, MLA kernels, P/D disaggregation.",
        "zh": "运行 LLM 推理引擎从预填充到解码的全过程：分页 KV 缓存、vLLM-v1 调度器、MLA 算子"
        "、P/D 分离。",
    },
    "help_lang": {
        "en": "en or zh (Simplified Chinese), anywhere on the line",
        "zh": "`en` 或 `zh`（简体中文），可放在命令行的任何位置",
    },
    "help_cmd_tour": {
        "en": "guided walkthrough: why D runs the last prompt token again",
        "zh": "导览：为什么 D 要把最后一个提示词 token 再算一遍",
    },
    "help_cmd_trace": {
        "en": "run any prompt with any settings; print or save its step table",
        "zh": "用任意设置运行任意提示词；打印或保存它的逐步记录表",
    },
    "help_cmd_doctor": {
        "en": "check what works on this machine",
        "zh": "检查这台机器上哪些功能可用",
    },
    "help_doctor_aot": {
        "en": "also compile every Triton kernel for sm_80 and sm_90",
        "zh": "另外为 sm_80 和 sm_90 编译每个 Triton 算子",
    },
    "help_cmd_notebooks": {
        "en": "copy the notebooks into a folder (default ./pdlab-notebooks)",
        "zh": "把笔记本复制到一个文件夹（默认 `./pdlab-notebooks`）",
    },
    "help_notebooks_force": {"en": "overwrite copies you have edited", "zh": "覆盖你改过的副本"},
    "help_cmd_lab": {"en": "open the notebooks in JupyterLab", "zh": "在 JupyterLab 中打开笔记本"},
    "help_lab_dir": {
        "en": "your working copy (made once; the notebooks missing from it are copied in, your "
        "edits are kept); default ~/pdlab-notebooks or PDLAB_LAB_DIR",
        "zh": "你的工作副本（只创建一次；其中缺少的笔记本会复制进去，你的修改会保留）；默认 `~/"
        "pdlab-notebooks` 或 PDLAB_LAB_DIR",
    },
    "help_lab_port": {
        "en": "default: JupyterLab's (8888, or the next free)",
        "zh": "默认用 JupyterLab 的端口（8888，或下一个空闲的）",
    },
    "help_lab_ip": {
        "en": "address to listen on (default localhost; 0.0.0.0 for all)",
        "zh": "监听的地址（默认 localhost；0.0.0.0 表示所有地址）",
    },
    "help_lab_notebook": {
        "en": "open this one, e.g. 05, 05_pd_decode_side or 05_zh (Chinese)",
        "zh": "打开这一本，例如 05、05_pd_decode_side 或 05_zh（中文版）",
    },
    "help_lab_no_browser": {"en": "do not open a web browser", "zh": "不打开网页浏览器"},
    "help_weights": {
        "en": "trained (the shipped checkpoint, default), random (seeded random weights) or a "
        ".safetensors file written by pdlab train",
        "zh": "`trained`（随附的检查点，默认）、`random`（按种子生成的随机权重），或 pdlab trai"
        "n 写出的 `.safetensors` 文件",
    },
    "help_pcp": {
        "en": "prefill_context_parallel_size; above 1 the MLA builder passes "
        "treat_short_extends_as_decodes=False (pdlab reproduces only this routing "
        "consequence, not context parallelism itself)",
        "zh": "prefill_context_parallel_size；大于 1 时 MLA 的 builder 传入 treat_short_extends"
        "_as_decodes=False（pdlab 只复现它对路由的这一影响，不实现上下文并行本身）",
    },
    "help_model_runner": {
        "en": "v2 (vLLM 0.33.0's default) or v1 (VLLM_USE_V2_MODEL_RUNNER=0); unset: "
        "VLLM_USE_V2_MODEL_RUNNER, else v2",
        "zh": "v2（vLLM 0.33.0 的默认值）或 v1（VLLM_USE_V2_MODEL_RUNNER=0）；不设时看 VLLM_USE"
        "_V2_MODEL_RUNNER，再没有则为 v2",
    },
    "help_gpu": {
        "en": "follow the MLA backend vLLM picks on this GPU (h100/h200: FLASH_ATTN_MLA, b200: "
        "FLASHINFER_MLA, cpu: CPU_MLA); unset: PDLAB_GPU, this machine's GPU, else cpu",
        "zh": "按 vLLM 在这种 GPU 上选用的 MLA 后端运行（h100/h200：FLASH_ATTN_MLA，b200："
        "FLASHINFER_MLA，`cpu`：CPU_MLA）；不设时依次看 PDLAB_GPU、本机的 GPU，都没有则为 `cpu`",
    },
    "help_mla_backend": {
        "en": "name the backend instead of the GPU: its reorder_batch_threshold and "
        "query_len_support decide the routing (flash_attn_mla 512, flashmla 128, others 1)",
        "zh": "直接指定后端而不是 GPU：由它的 reorder_batch_threshold 和 query_len_support 决定路由"
        "（flash_attn_mla 为 512，`flashmla` 为 128，其余为 1）",
    },
    "help_num_spec": {
        "en": "speculative decoding with DeepSeek's MTP layer: K drafts per step, verified in "
        "rows of 1 + K tokens (D's first step padded with K placeholders); unset: none",
        "zh": "用 DeepSeek 的 MTP 层做投机解码：每步 K 个草稿 token，按每行 1 + K 个 token 验证"
        "（D 的第一步补上 K 个占位草稿）；不设则不做投机解码",
    },
    "help_spec_method": {
        "en": "with --num-speculative-tokens: mtp (DeepSeek's MTP layer drafts, the default) "
        "or ngram (prompt lookup, no model)",
        "zh": "配合 --num-speculative-tokens 使用：`mtp`（由 DeepSeek 的 MTP 层出草稿，默认）或"
        " `ngram`（在提示词里查找，不用模型）",
    },
    "help_prompts": {
        "en": "a prompt (repeat for a batch)",
        "zh": "一个提示词（重复这个选项组成一个批次）",
    },
    "help_block_size": {"en": "tokens per KV block", "zh": "每个 KV 块的 token 数"},
    "help_tour_prompt": {
        "en": "the text prompt (default: %(default)r)",
        "zh": "文本提示词（默认：%(default)r）",
    },
    "help_json_trace": {"en": "save the trace as JSON", "zh": "把 trace 保存为 JSON"},
    "help_plots": {"en": "write the PNG plots into DIR", "zh": "把 PNG 图写进 DIR"},
    "help_backend": {
        "en": "kernel implementation (default torch; triton needs the triton package, and "
        "without a GPU it runs through Triton's interpreter, slowly)",
        "zh": "算子实现（默认 `torch`；`triton` 需要 triton 包，没有 GPU 时经 Triton 的解释器运"
        "行，很慢）",
    },
    "help_no_pager": {
        "en": "print straight through (a terminal otherwise gets a pager when the tour is "
        "longer than the screen; a pipe or a file never does)",
        "zh": "直接全部打印（否则导览比屏幕长时，终端会打开分页器；输出到管道或文件时从不打开）",
    },
    "help_long_prefill": {
        "en": "cap on a prefill chunk (0: no cap)",
        "zh": "分块预填充每一块的 token 上限（0：不设上限）",
    },
    "help_trace_pd": {"en": "a P/D pair instead of one engine", "zh": "用一对 P 和 D 代替单个引擎"},
    "help_cmd_pd": {
        "en": "prefill/decode disaggregation: P and D in one process or two",
        "zh": "P/D 分离：P 和 D 在同一个进程里，或分成两个进程",
    },
    "help_pd_procs": {
        "en": "1: both engines in this process; 2: two processes over torch.distributed (default)",
        "zh": "1：两个引擎都在本进程里；2：两个进程，经 `torch.distributed` 通信（默认）",
    },
    "help_pd_role": {
        "en": "run one side only (two machines): prefill holds the prompts",
        "zh": "只运行其中一侧（用于两台机器）：--role prefill 这一侧持有提示词",
    },
    "help_pd_port": {"en": "0 picks a free port", "zh": "0 表示自动选一个空闲端口"},
    "help_pd_timeout": {"en": "seconds, for every wait", "zh": "秒数，每次等待都以此为限"},
    "help_pd_first_token": {
        "en": "how D gets its first token: recompute (vLLM's, the default), first_token (P's "
        "token as D's first output), append_prompt (P's token appended to D's prompt), "
        "hidden_state (P's last hidden state, D runs lm_head)",
        "zh": "D 怎样得到它的第一个 token：recompute（vLLM 的做法，默认）、first_token（P 的 to"
        "ken 作为 D 的第一个输出）、append_prompt（P 的 token 追加到 D 的提示词后面）、hi"
        "dden_state（P 的最后一个隐藏状态，D 运行 lm_head）",
    },
    "help_pd_compare": {
        "en": "run the prompts under all four first-token designs and print a table",
        "zh": "在第一个 token 的四种设计下各运行一遍这些提示词，并打印对比表",
    },
    "help_cmd_sim": {
        "en": "simulate D's decode batch as requests arrive: TPOT, D's TTFT, per design",
        "zh": "模拟请求陆续到达时 D 的解码批次：每种设计的 TPOT 和 D 的 TTFT",
    },
    "help_sim_gpu": {"en": "device profile", "zh": "设备参数"},
    "help_sim_batch_size": {
        "en": "running decodes (default 64)",
        "zh": "正在解码的请求数（默认 64）",
    },
    "help_sim_context": {"en": "their context, tokens", "zh": "它们的上下文长度（token 数）"},
    "help_sim_rate": {"en": "arrivals per second", "zh": "每秒到达的请求数"},
    "help_sim_prompt_len": {"en": "mean prompt length", "zh": "平均提示词长度"},
    "help_sim_output_len": {"en": "tokens each decodes", "zh": "每个请求解码的 token 数"},
    "help_sim_duration": {
        "en": "simulated seconds (default 5: about 300 steps, enough for a p99)",
        "zh": "模拟的秒数（默认 5：约 300 步，足够算出 p99）",
    },
    "help_sim_num_spec": {
        "en": "MTP draft tokens per step, 0 to 16 (default 0: no speculative decoding)",
        "zh": "每步的 MTP 草稿 token 数，0 到 16（默认 0：不做投机解码）",
    },
    "help_sim_acceptance": {
        "en": "each draft's acceptance rate, 0 to 1 (default 0.85: DeepSeek-V3's report, "
        "85-90%% for the second token)",
        "zh": "每个草稿的接受率，0 到 1（默认 0.85：DeepSeek-V3 的技术报告中第二个 token 的接受"
        "率为 85-90%%）",
    },
    "help_sim_kv_dtype": {
        "en": "D's KV cache (fp8: FLASH_ATTN_MLA refuses it, Hopper runs FLASHMLA)",
        "zh": "D 的 KV 缓存的数据类型（fp8：FLASH_ATTN_MLA 不支持，Hopper 上改用 FLASHMLA）",
    },
    "help_sim_launch_us": {
        "en": "eager launch cost per attention kernel when the full decode graph is lost (an "
        "assumption, no published figure; default 5)",
        "zh": "失去完整的 decode CUDA graph 时，每个注意力算子单独启动的开销，单位 us（假设值，"
        "没有公开数据；默认 5）",
    },
    "help_sim_link": {
        "en": "P->D link and the experts' all-to-all, GB/s (default 50: one 400 Gb/s port "
        "per GPU, an assumption)",
        "zh": "P->D 链路与专家全对全通信的带宽，单位 GB/s（默认 50：每个 GPU 一个 400 Gb/s "
        "端口，假设值）",
    },
    "help_sim_num_gpus": {
        "en": "GPUs of the decode instance, 1 to 1024: attention data parallel, routed "
        "experts expert parallel (default 144: DeepSeek's decode deployment)",
        "zh": "解码实例的 GPU 数，1 到 1024：注意力按数据并行，路由专家按专家并行（默认 144："
        "DeepSeek 的解码部署）",
    },
    "help_sim_weight_dtype": {
        "en": "the linear layers' weights (default fp8: DeepSeek-V3's checkpoint)",
        "zh": "线性层权重的数据类型（默认 fp8：DeepSeek-V3 的检查点）",
    },
    "help_sim_plots": {"en": "write the figures as PNG here", "zh": "把图以 PNG 格式写到这里"},
    "help_sim_json": {"en": "write the numbers as JSON here", "zh": "把数字以 JSON 格式写到这里"},
    "help_cmd_bench": {
        "en": "measurements: paths, kernels, sched",
        "zh": "测量：`paths`、`kernels`、`sched`",
    },
    "help_bench_paths": {
        "en": "D's one-token step through both MLA paths",
        "zh": "D 一次处理一个 token 的一步，分别走两条 MLA 路径",
    },
    "help_bench_context": {
        "en": "comma-separated context lengths (default 1024,4096,16384)",
        "zh": "以逗号分隔的上下文长度（默认 1024,4096,16384）",
    },
    "help_bench_heads": {"en": "override the preset's head count", "zh": "覆盖预设的注意力头数"},
    "help_bench_num_spec": {
        "en": "also time mla_decode for 1 + K queries per request beside one query",
        "zh": "除了每个请求一个 query，再测每个请求 1 + K 个 query 时 mla_decode 的耗时",
    },
    "help_bench_kernels": {
        "en": "each kernel (GPU: GB/s and TFLOP/s vs peak)",
        "zh": "每个算子（GPU 上：GB/s 和 TFLOP/s，与峰值对比）",
    },
    "help_bench_sched": {"en": "the scheduler's time per step", "zh": "调度器每一步的耗时"},
    "help_bench_json": {"en": "also write results as JSON", "zh": "另把结果写成 JSON"},
    "help_cmd_train": {
        "en": "train the tiny model on pdlab's own corpus (a few minutes)",
        "zh": "在 pdlab 自带的语料上训练 tiny 模型（几分钟）",
    },
    "help_train_seq_len": {"en": "bytes per sequence", "zh": "每条序列的字节数"},
    "help_train_lr": {"en": "peak learning rate", "zh": "峰值学习率"},
    "help_train_mtp_steps": {
        "en": "steps of the MTP layer (DeepSeek-V3's drafter), the main model frozen",
        "zh": "训练 MTP 层（DeepSeek-V3 的草稿模型）的步数，主模型冻结不动",
    },
    "help_train_main_from": {
        "en": "read the main model from this checkpoint (made with the same settings) and "
        "train only its MTP layer",
        "zh": "从这个检查点读取主模型（须是相同设置训练出的），只训练它的 MTP 层",
    },
    "help_train_seed": {"en": "seeds the model and the batches", "zh": "模型和批次的随机种子"},
    "help_train_threads": {
        "en": "torch threads (default 1: on a shared machine more threads wait on each other; "
        "the result can depend on the number)",
        "zh": "torch 的线程数（默认 1：在共享的机器上，线程多了会互相等待；结果可能随线程数而变）",
    },
    "help_train_out": {
        "en": "the checkpoint to write (default %(default)s)",
        "zh": "要写出的检查点（默认 %(default)s）",
    },
    "help_train_plot": {
        "en": "the loss curve PNG (default: next to --out, ending -loss.png)",
        "zh": "损失曲线的 PNG（默认：放在 --out 旁边，文件名以 -loss.png 结尾）",
    },
    "help_cmd_exercises": {
        "en": "graded exercises: write the piece, run it in the engine",
        "zh": "带评分的练习：写出缺的那段代码，放进引擎里运行",
    },
    "help_ex_lang": {
        "en": "en or zh; default: the language start was given in this folder, else en",
        "zh": "`en` 或 `zh`；默认用本文件夹里 `start` 时给的语言，没有则为 `en`",
    },
    "help_ex_dir": {"en": "working folder (default .)", "zh": "工作文件夹（默认 .）"},
    "help_ex_list": {
        "en": "every exercise, with your progress in --dir",
        "zh": "列出所有练习，以及你在 --dir 里的进度",
    },
    "help_ex_start": {
        "en": "write exercise N's stub (with its statement) into DIR",
        "zh": "把练习 N 的代码框架（连同题目说明）写进 DIR",
    },
    "help_ex_start_dir": {"en": "default: --dir", "zh": "默认：--dir"},
    "help_ex_force": {"en": "overwrite the file if it exists", "zh": "文件已存在时覆盖它"},
    "help_ex_check": {
        "en": "grade FILE (default: the file start wrote in --dir)",
        "zh": "给 FILE 评分（默认：`start` 在 --dir 里写出的文件）",
    },
    "help_ex_seed": {
        "en": "replay the random cases of an earlier check",
        "zh": "重放之前某次检查的随机用例",
    },
    "help_ex_hint": {"en": "one more hint for exercise N", "zh": "练习 N 的下一条线索"},
    "help_ex_solution": {
        "en": "show exercise N's reference solution (asks first)",
        "zh": "显示练习 N 的参考答案（先询问确认）",
    },
    "help_ex_yes": {"en": "do not ask (for scripts)", "zh": "不询问（供脚本使用）"},
    "help_tour_preset": {
        "en": "model dimensions for the cost chapter: {presets}",
        "zh": "代价一章所用的模型尺寸：{presets}",
    },
    "help_tour_chapter": {"en": "show only chapter N (1-{n})", "zh": "只显示第 N 章（1-{n}）"},
    "help_tour_max_tokens": {
        "en": "tokens to generate (1 to {n}; the tour runs the prompt four ways)",
        "zh": "要生成的 token 数（1 到 {n}；导览会用四种方式运行这个提示词）",
    },
}


def render(help: str | None, lang: str) -> str | None:
    """``help`` in ``lang``: a :class:`Help` rendered with :func:`text` (its list values
    joined, its choices listed unless the words name them all); any other text as it is."""
    if not isinstance(help, Help):
        return help
    sep = text(lang, "help_list_sep")
    values = {
        k: sep.join(map(str, v)) if isinstance(v, (list, tuple)) else v
        for k, v in help.values.items()
    }
    out = text(lang, help.key, **values) if help.key else ""
    if help.choices and not all(n in out for n in help.choices):
        names = sep.join(text(lang, "help_choice", name=n) for n in help.choices)
        rest = text(lang, "help_one_of", names=names)
        out = text(lang, "help_then", help=out, rest=rest) if out else rest
    return out


def words(parser: argparse.ArgumentParser, lang: str) -> list[str]:
    """Render every :class:`Help` of ``parser`` in ``lang``, in place (its description,
    epilog, group titles and descriptions, each option's and subcommand's help); under
    ``zh`` argparse's own group titles too. Returns the group titles, as rendered."""
    p = parser
    p.description, p.epilog = render(p.description, lang), render(p.epilog, lang)
    for g in p._action_groups:
        if lang == "zh" and g.title in _TITLES:
            g.title = Help(_TITLES[g.title])
        g.title, g.description = render(g.title, lang), render(g.description, lang)
    for a in p._actions:
        a.help = render(a.help, lang)
        if isinstance(a, argparse._SubParsersAction):
            for c in a._choices_actions:
                c.help = render(c.help, lang)
    return [g.title for g in p._action_groups if g.title]


def format_help(parser: argparse.ArgumentParser, original: Callable[[], str], lang: str) -> str:
    """``parser``'s help in ``lang``: its keys rendered (:func:`words`), then argparse's
    ``original`` format; under ``zh`` its ``usage:`` and heading colons Chinese too (the
    usage line printed for an error is headed :data:`USAGE` by ``pdlab/cli/errors.py``)."""
    titles = words(parser, lang)
    out = original()
    if lang != "zh":
        return out
    out = re.sub(rf"\A({_ANSI})usage: ", lambda m: m.group(1) + USAGE, out)
    if not titles:
        return out
    heads = "|".join(re.escape(t) for t in titles)
    return re.sub(rf"^(\s*{_ANSI})({heads}):(?={_ANSI}$)", r"\1\2：", out, flags=re.M)


def help_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every text of ``parser``'s help that is words (its description, epilog, group titles
    and descriptions, each option's and each subcommand's help), in order; argparse's
    ``SUPPRESS`` and the unset ones left out."""
    out = [parser.description, parser.epilog]
    for g in parser._action_groups:
        out += [g.title, g.description]
    for a in parser._actions:
        out.append(a.help)
        if isinstance(a, argparse._SubParsersAction):
            out += [c.help for c in a._choices_actions]
    return [s for s in out if s and s != argparse.SUPPRESS]


_ANSI = r"(?:\x1b\[[0-9;]*m)*"  # Python 3.14 colours argparse's headings on a terminal
