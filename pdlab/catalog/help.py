"""The Chinese of every ``pdlab ... --help`` (``--lang zh``): each parser's description, each
option's and subcommand's help, the group titles and argparse's own words.

:data:`HELP` is keyed by the English text itself, as ``pdlab/cli/*.py`` and
``pdlab/ui/tour.py`` write it, so a new option, or an English help that changes, has no
entry until its Chinese is written: :func:`translate` leaves it English and
``tests/lab/test_help_zh.py`` fails, naming it. Option names, metavars, choices, ``%(default)s``
values, paths, environment variables and vLLM's identifiers stay as they are; a value that is
a plain English word (``trained``, ``start``) is set in backticks, as pdlab's Chinese error
messages do (``pdlab/catalog/errors.py``). Terms are the glossary's (``docs/glossary.md``).
Imported only under ``--lang zh``, so ``pdlab --version`` does not pay for it.

It mirrors no upstream file: vLLM's CLI help is English only.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Callable

# argparse's "usage: " is 7 cells; this is too (用法 and ： are two each), so the usage
# lines argparse wraps under it stay aligned.
USAGE = "用法： "
ONE_OF = "可选值："  # what pdlab.cli._short_choices appends: the choices left out of usage
ONE_OF_SEP = "、"  # between the choices, each in backticks (they are values, not words)

HELP: dict[str, str] = {
    # ---- argparse's own words --------------------------------------------------------
    "positional arguments": "位置参数",
    "options": "选项",
    "show this help message and exit": "显示本帮助信息并退出",
    "show program's version number and exit": "显示程序的版本号并退出",
    # ---- pdlab (pdlab/cli/__init__.py) ------------------------------------------------
    "Run the prefill/decode path of an LLM inference engine: paged KV cache, vLLM-v1 "
    "scheduler, MLA kernels, P/D disaggregation.": "运行 LLM 推理引擎从预填充到解码的全过程："
    "分页 KV 缓存、vLLM-v1 调度器、MLA 算子、P/D 分离。",
    "en or zh (Simplified Chinese), anywhere on the line": "`en` 或 `zh`（简体中文），可放在命令行"
    "的任何位置",
    "guided walkthrough: why D runs the last prompt token again": "导览：为什么 D 要把最后一个"
    "提示词 token 再算一遍",
    "run any prompt with any settings; print or save its step table": "用任意设置运行任意提示词；"
    "打印或保存它的逐步记录表",
    "check what works on this machine": "检查这台机器上哪些功能可用",
    "also compile every Triton kernel for sm_80 and sm_90": "另外为 sm_80 和 sm_90 编译每个 "
    "Triton 算子",
    "copy the notebooks into a folder (default ./pdlab-notebooks)": "把笔记本复制到一个文件夹"
    "（默认 `./pdlab-notebooks`）",
    "overwrite copies you have edited": "覆盖你改过的副本",
    "open the notebooks in JupyterLab": "在 JupyterLab 中打开笔记本",
    "your working copy (made once; the notebooks missing from it are copied in, your edits "
    "are kept); default ~/pdlab-notebooks or PDLAB_LAB_DIR": "你的工作副本（只创建一次；其中缺少"
    "的笔记本会复制进去，你的修改会保留）；默认 `~/pdlab-notebooks` 或 PDLAB_LAB_DIR",
    "default: JupyterLab's (8888, or the next free)": "默认用 JupyterLab 的端口（8888，或下一个"
    "空闲的）",
    "address to listen on (default localhost; 0.0.0.0 for all)": "监听的地址（默认 localhost；"
    "0.0.0.0 表示所有地址）",
    "open this one, e.g. 05, 05_pd_decode_side or 05_zh (Chinese)": "打开这一本，例如 05、"
    "05_pd_decode_side 或 05_zh（中文版）",
    "do not open a web browser": "不打开网页浏览器",
    # ---- the shared options (pdlab/cli/args.py) ---------------------------------------
    "trained (the shipped checkpoint, default), random (seeded random weights) or a "
    ".safetensors file written by pdlab train": "`trained`（随附的检查点，默认）、`random`"
    "（按种子生成的随机权重），或 pdlab train 写出的 `.safetensors` 文件",
    "prefill_context_parallel_size; above 1 the MLA builder passes "
    "treat_short_extends_as_decodes=False (pdlab reproduces only this routing consequence, "
    "not context parallelism itself)": "prefill_context_parallel_size；大于 1 时 MLA 的 "
    "builder 传入 treat_short_extends_as_decodes=False（pdlab 只复现它对路由的这一影响，"
    "不实现上下文并行本身）",
    "v2 (vLLM 0.33.0's default) or v1 (VLLM_USE_V2_MODEL_RUNNER=0); unset: "
    "VLLM_USE_V2_MODEL_RUNNER, else v2": "v2（vLLM 0.33.0 的默认值）或 v1"
    "（VLLM_USE_V2_MODEL_RUNNER=0）；不设时看 VLLM_USE_V2_MODEL_RUNNER，再没有则为 v2",
    "follow the MLA backend vLLM picks on this GPU (h100/h200: FLASH_ATTN_MLA, b200: "
    "FLASHINFER_MLA, cpu: CPU_MLA); unset: PDLAB_GPU, this machine's GPU, else cpu": "按 vLLM "
    "在这种 GPU 上选用的 MLA 后端运行（h100/h200：FLASH_ATTN_MLA，b200：FLASHINFER_MLA，"
    "`cpu`：CPU_MLA）；不设时依次看 PDLAB_GPU、本机的 GPU，都没有则为 `cpu`",
    "name the backend instead of the GPU: its reorder_batch_threshold and "
    "query_len_support decide the routing (flash_attn_mla 512, flashmla 128, others 1)": "直接"
    "指定后端而不是 GPU：由它的 reorder_batch_threshold 和 query_len_support 决定路由"
    "（flash_attn_mla 为 512，`flashmla` 为 128，其余为 1）",
    "speculative decoding with DeepSeek's MTP layer: K drafts per step, verified in rows of "
    "1 + K tokens (D's first step padded with K placeholders); unset: none": "用 DeepSeek 的 "
    "MTP 层做投机解码：每步 K 个草稿 token，按每行 1 + K 个 token 验证（D 的第一步补上 K 个"
    "占位草稿）；不设则不做投机解码",
    "with --num-speculative-tokens: mtp (DeepSeek's MTP layer drafts, the default) or ngram "
    "(prompt lookup, no model)": "配合 --num-speculative-tokens 使用：`mtp`（由 DeepSeek 的 "
    "MTP 层出草稿，默认）或 `ngram`（在提示词里查找，不用模型）",
    "a prompt (repeat for a batch)": "一个提示词（重复这个选项组成一个批次）",
    "tokens per KV block": "每个 KV 块的 token 数",
    # ---- tour and trace (pdlab/ui/tour.py) --------------------------------------------
    "the text prompt (default: %(default)r)": "文本提示词（默认：%(default)r）",
    "save the trace as JSON": "把 trace 保存为 JSON",
    "write the PNG plots into DIR": "把 PNG 图写进 DIR",
    "kernel implementation (default torch; triton needs the triton package, and without a "
    "GPU it runs through Triton's interpreter, slowly)": "算子实现（默认 `torch`；`triton` 需要 "
    "triton 包，没有 GPU 时经 Triton 的解释器运行，很慢）",
    "print straight through (a terminal otherwise gets a pager when the tour is longer than "
    "the screen; a pipe or a file never does)": "直接全部打印（否则导览比屏幕长时，终端会打开"
    "分页器；输出到管道或文件时从不打开）",
    "cap on a prefill chunk (0: no cap)": "分块预填充每一块的 token 上限（0：不设上限）",
    "a P/D pair instead of one engine": "用一对 P 和 D 代替单个引擎",
    # ---- pd (pdlab/cli/pd.py) ----------------------------------------------------------
    "prefill/decode disaggregation: P and D in one process or two": "P/D 分离：P 和 D 在同一个"
    "进程里，或分成两个进程",
    "1: both engines in this process; 2: two processes over torch.distributed (default)": "1："
    "两个引擎都在本进程里；2：两个进程，经 `torch.distributed` 通信（默认）",
    "run one side only (two machines): prefill holds the prompts": "只运行其中一侧（用于两台"
    "机器）：--role prefill 这一侧持有提示词",
    "0 picks a free port": "0 表示自动选一个空闲端口",
    "seconds, for every wait": "秒数，每次等待都以此为限",
    "how D gets its first token: recompute (vLLM's, the default), first_token (P's token as "
    "D's first output), append_prompt (P's token appended to D's prompt), hidden_state (P's "
    "last hidden state, D runs lm_head)": "D 怎样得到它的第一个 token：recompute（vLLM 的"
    "做法，默认）、first_token（P 的 token 作为 D 的第一个输出）、append_prompt（P 的 token "
    "追加到 D 的提示词后面）、hidden_state（P 的最后一个隐藏状态，D 运行 lm_head）",
    "run the prompts under all four first-token designs and print a table": "在第一个 token 的"
    "四种设计下各运行一遍这些提示词，并打印对比表",
    # ---- sim (pdlab/cli/sim.py) --------------------------------------------------------
    "simulate D's decode batch as requests arrive: TPOT, D's TTFT, per design": "模拟请求陆续"
    "到达时 D 的解码批次：每种设计的 TPOT 和 D 的 TTFT",
    "device profile": "设备参数",
    "running decodes (default 64)": "正在解码的请求数（默认 64）",
    "their context, tokens": "它们的上下文长度（token 数）",
    "arrivals per second": "每秒到达的请求数",
    "mean prompt length": "平均提示词长度",
    "tokens each decodes": "每个请求解码的 token 数",
    "simulated seconds (default 5: about 160 steps, enough for a p99)": "模拟的秒数（默认 5："
    "约 160 步，足够算出 p99）",
    "MTP draft tokens per step, 0 to 16 (default 0: no speculative decoding)": "每步的 MTP 草稿 "
    "token 数，0 到 16（默认 0：不做投机解码）",
    "each draft's acceptance rate, 0 to 1 (default 0.85: DeepSeek-V3's report, 85-90%% for "
    "the second token)": "每个草稿的接受率，0 到 1（默认 0.85：DeepSeek-V3 的技术报告中第二个 "
    "token 的接受率为 85-90%%）",
    "D's KV cache (fp8: FLASH_ATTN_MLA refuses it, Hopper runs FLASHMLA)": "D 的 KV 缓存的数据"
    "类型（fp8：FLASH_ATTN_MLA 不支持，Hopper 上改用 FLASHMLA）",
    "eager launch cost per attention kernel when the full decode graph is lost (an "
    "assumption, no published figure; default 5)": "失去完整的 decode CUDA graph 时，每个注意力"
    "算子单独启动的开销，单位 us（假设值，没有公开数据；默认 5）",
    "P->D link and the experts' all-to-all, GB/s (default 50: one 400 Gb/s port per GPU, an "
    "assumption)": "P->D 链路与专家全对全通信的带宽，单位 GB/s（默认 50：每个 GPU 一个 "
    "400 Gb/s 端口，假设值）",
    "GPUs of the decode instance, 1 to 1024: attention data parallel, routed experts expert "
    "parallel (default 144: DeepSeek's decode deployment)": "解码实例的 GPU 数，1 到 1024："
    "注意力按数据并行，路由专家按专家并行（默认 144：DeepSeek 的解码部署）",
    "the linear layers' weights (default fp8: DeepSeek-V3's checkpoint)": "线性层权重的数据"
    "类型（默认 fp8：DeepSeek-V3 的检查点）",
    "write the figures as PNG here": "把图以 PNG 格式写到这里",
    "write the numbers as JSON here": "把数字以 JSON 格式写到这里",
    # ---- bench (pdlab/cli/bench.py) ----------------------------------------------------
    "measurements: paths, kernels, sched": "测量：`paths`、`kernels`、`sched`",
    "D's one-token step through both MLA paths": "D 一次处理一个 token 的一步，分别走两条 MLA 路径",
    "comma-separated context lengths (default 1024,4096,16384)": "以逗号分隔的上下文长度"
    "（默认 1024,4096,16384）",
    "override the preset's head count": "覆盖预设的注意力头数",
    "also time mla_decode for 1 + K queries per request beside one query": "除了每个请求一个 "
    "query，再测每个请求 1 + K 个 query 时 mla_decode 的耗时",
    "each kernel (GPU: GB/s and TFLOP/s vs peak)": "每个算子（GPU 上：GB/s 和 TFLOP/s，与峰值"
    "对比）",
    "the scheduler's time per step": "调度器每一步的耗时",
    "also write results as JSON": "另把结果写成 JSON",
    # ---- train (pdlab/cli/train.py) ----------------------------------------------------
    "train the tiny model on pdlab's own corpus (a few minutes)": "在 pdlab 自带的语料上训练 "
    "tiny 模型（几分钟）",
    "bytes per sequence": "每条序列的字节数",
    "peak learning rate": "峰值学习率",
    "steps of the MTP layer (DeepSeek-V3's drafter), the main model frozen": "训练 MTP 层"
    "（DeepSeek-V3 的草稿模型）的步数，主模型冻结不动",
    "read the main model from this checkpoint (made with the same settings) and train only "
    "its MTP layer": "从这个检查点读取主模型（须是相同设置训练出的），只训练它的 MTP 层",
    "seeds the model and the batches": "模型和批次的随机种子",
    "torch threads (default 1: on a shared machine more threads wait on each other; the "
    "result can depend on the number)": "torch 的线程数（默认 1：在共享的机器上，线程多了会"
    "互相等待；结果可能随线程数而变）",
    "the checkpoint to write (default %(default)s)": "要写出的检查点（默认 %(default)s）",
    "the loss curve PNG (default: next to --out, ending -loss.png)": "损失曲线的 PNG（默认："
    "放在 --out 旁边，文件名以 -loss.png 结尾）",
    # ---- exercises (pdlab/cli/exercises.py) --------------------------------------------
    "graded exercises: write the piece, run it in the engine": "带评分的练习：写出缺的那段代码，"
    "放进引擎里运行",
    "en or zh; default: the language start was given in this folder, else en": "`en` 或 `zh`；"
    "默认用本文件夹里 `start` 时给的语言，没有则为 `en`",
    "working folder (default .)": "工作文件夹（默认 .）",
    "every exercise, with your progress in --dir": "列出所有练习，以及你在 --dir 里的进度",
    "write exercise N's stub (with its statement) into DIR": "把练习 N 的代码框架（连同题目"
    "说明）写进 DIR",
    "default: --dir": "默认：--dir",
    "overwrite the file if it exists": "文件已存在时覆盖它",
    "grade FILE (default: the file start wrote in --dir)": "给 FILE 评分（默认：`start` 在 "
    "--dir 里写出的文件）",
    "replay the random cases of an earlier check": "重放之前某次检查的随机用例",
    "one more hint for exercise N": "练习 N 的下一条线索",
    "show exercise N's reference solution (asks first)": "显示练习 N 的参考答案（先询问确认）",
    "do not ask (for scripts)": "不询问（供脚本使用）",
}


def _computed() -> dict[str, str]:
    """The entries whose English is built from pdlab's constants (the presets, the tour's
    chapters and its token limit), built the same way."""
    from pdlab.config import PRESETS
    from pdlab.ui.tour import CHAPTERS, TOUR_MAX_TOKENS

    return {
        f"model dimensions for the cost chapter: {', '.join(PRESETS)}": "代价一章所用的模型"
        f"尺寸：{ONE_OF_SEP.join(PRESETS)}",
        f"show only chapter N (1-{CHAPTERS})": f"只显示第 N 章（1-{CHAPTERS}）",
        f"tokens to generate (1 to {TOUR_MAX_TOKENS}; the tour runs the prompt four ways)": (
            f"要生成的 token 数（1 到 {TOUR_MAX_TOKENS}；导览会用四种方式运行这个提示词）"
        ),
    }


@functools.lru_cache(maxsize=1)
def entries() -> dict[str, str]:
    """Every English help text pdlab has, and its Chinese."""
    return {**HELP, **_computed()}


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


def one_of(help: str | None, names: list[str]) -> str:
    """``help`` with the choices that left the usage line listed after it."""
    return (help + "；" if help else "") + ONE_OF + ONE_OF_SEP.join(f"`{n}`" for n in names)


def translate(parsers: list[argparse.ArgumentParser]) -> None:
    """Put every parser's help into Chinese, in place: the texts of :data:`HELP` (a text
    without an entry stays English; the test names it), and argparse's ``usage:`` and
    heading colons in what ``format_help`` prints (the usage line printed for an error is
    headed :data:`USAGE` by ``pdlab/cli/errors.py``)."""
    known = entries()

    def zh(s: str | None) -> str | None:
        return known.get(s, s) if s else s

    for p in parsers:
        p.description, p.epilog = zh(p.description), zh(p.epilog)
        for g in p._action_groups:
            g.title, g.description = zh(g.title), zh(g.description)
        for a in p._actions:
            a.help = zh(a.help)
            if isinstance(a, argparse._SubParsersAction):
                for c in a._choices_actions:
                    c.help = zh(c.help)
        titles = [g.title for g in p._action_groups if g.title]
        p.format_help = functools.partial(_format_help, p.format_help, titles)  # type: ignore[method-assign]


_ANSI = r"(?:\x1b\[[0-9;]*m)*"  # Python 3.14 colours argparse's headings on a terminal


def _format_help(original: Callable[[], str], titles: list[str]) -> str:
    text = re.sub(rf"\A({_ANSI})usage: ", lambda m: m.group(1) + USAGE, original())
    if titles:
        heads = "|".join(re.escape(t) for t in titles)
        text = re.sub(rf"^(\s*{_ANSI})({heads}):(?={_ANSI}$)", r"\1\2：", text, flags=re.M)
    return text
