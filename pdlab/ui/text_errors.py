"""pdlab's error messages in Chinese, where a ``--lang zh`` reader sees them.

The exceptions stay English where they are raised (as vLLM's do, so a message can be searched
for and tests can match it); :func:`zh_error` translates one message for display: the
``pdlab <command>`` error line and argparse's (``pdlab/cli/__init__.py``), the grader's "引擎报错"
(``pdlab/exercises/engine_runs.py``) and a widget's error output. It works by pattern, over
the families of messages pdlab raises (``X=V is invalid: expected ...``, what ``expected``
allows, argparse's own texts, the output-path checks, P/D's role errors, ...), and keeps
every identifier, value, option, path and vLLM name as it was. A message no pattern knows is
shown whole after a Chinese lead-in, never dropped. Terms are the glossary's
(``docs/glossary.md``). vLLM has no counterpart: its messages are English only.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable
from typing import NoReturn

_CJK = re.compile("[\u4e00-\u9fff]")
_PUNCT = "，。：；、（）“”！？"  # Chinese punctuation: touches Latin text without a space
UNTRANSLATED = "（原文）"  # the lead-in of a message no pattern knows


def _glue(left: str, right: str) -> str:
    """``left + right``, with the space the glossary's typography wants between a Chinese
    character and Latin text (none between two Chinese characters or at punctuation)."""
    if not left or not right:
        return left + right
    a, b = left[-1], right[0]
    if a.isspace() or b.isspace() or a in _PUNCT or b in _PUNCT:
        return left + right
    if bool(_CJK.match(a)) != bool(_CJK.match(b)):
        return left + " " + right
    return left + right


def _fill(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``{name}`` replaced, spaced by :func:`_glue`."""
    out = ""
    for piece in re.split(r"(\{\w+\})", template):
        if re.fullmatch(r"\{\w+\}", piece):
            out = _glue(out, values[piece[1:-1]])
        else:
            out = _glue(out, piece)
    return out


# ---- what "expected ..." allows -----------------------------------------------------------
_NOTES = {  # the parenthesised notes after an allowed value
    "V2": "V2",
    "V1": "V1",
    "P": "P",
    "D": "D",
    "check indices": "检查索引",
    "skip": "跳过",
    "no MTP layer": "没有 MTP 层",
    "DeepSeek-V3's one": "即 DeepSeek-V3 的一层",
    "Triton's CPU interpreter": "Triton 的 CPU 解释器",
    "compile for the GPU": "为 GPU 编译",
    "RoPE rotates pairs": "RoPE 成对旋转",
    "1 + num_speculative_tokens": "1 + num_speculative_tokens",
    "ngram only": "只用于 `ngram` 方法",
    "the only scaling DeepSeek uses": "DeepSeek 只用这一种缩放",
    "the tokens P's blocks hold": "P 的块中的 token 数",
    "integers >= 0": "不小于 0 的整数",
    "P's last hidden state": "P 最后的隐藏状态",
    "offsets never decrease": "偏移量不会减小",
    "the first sequence starts at row 0": "第一个序列从第 0 行开始",
    "a request is either P's prefill or D's decode": "一个请求要么是 P 的预填充，要么是 D 的解码",
    "vocab_size of model {m}": "模型 {m} 的 vocab_size",
    "one position is left for the first output token": "要给第一个输出 token 留一个位置",
    "RoPE has no positions beyond it": "RoPE 没有超出它的位置",
    "both sides must share it": "两侧必须一致",
    "0 picks a free one": "0 表示挑一个空闲端口",
    "0 means greedy": "0 表示贪心",
    "new or existing": "新建或已有的均可",
}


def _note(text: str) -> str | None:
    if text in _NOTES:
        return _NOTES[text]
    m = re.fullmatch(r"vocab_size of model (\S+)", text)
    if m:
        return _fill("模型 {m} 的 vocab_size", {"m": m[1]})
    m = re.fullmatch(r"with (.+)", text)
    if m:
        return _fill("{x} 时", {"x": m[1]})
    return None


_A = r"(?P<a>-?[\w.]+)"
_B = r"(?P<b>-?[\w.]+)"
_ALLOWED: list[tuple[str, str]] = [
    (r"one of (?P<x>.+)", "{x} 之一"),
    (rf"(?:an integer from|an integer) {_A} to {_B}", "{a} 到 {b} 之间的整数"),
    (rf"a number from {_A} to {_B}", "{a} 到 {b} 之间的数"),
    (rf"an even integer >= {_A}", "不小于 {a} 的偶数"),
    (rf"(?:an integer|an int|integers) >= {_A}", "不小于 {a} 的整数"),
    (rf"(?:a|an) (?:integer|number) > {_A}", "大于 {a} 的数"),
    (rf"a number >= {_A}", "不小于 {a} 的数"),
    (rf"a finite number >= {_A}", "不小于 {a} 的有限数"),
    (rf"a finite number > {_A}", "大于 {a} 的有限数"),
    (rf">= {_A}", "不小于 {a} 的整数"),
    (r">= (?P<x>\S+)", "不小于 {x}"),
    (rf"a port in \[{_A}, {_B}\]", "{a} 到 {b} 之间的端口号"),
    (rf"a position >= {_A}", "不小于 {a} 的位置"),
    (r"(?:an integer )?token ids? in (?P<x>\[.+?\))", "{x} 范围内的 token id"),
    (r"an integer token id in (?P<x>\[.+?\))", "{x} 范围内的整数 token id"),
    (r"a token id in (?P<x>\[.+?\))", "{x} 范围内的 token id"),
    (r"(?:block ids|a block id) in (?P<x>\[.+?\))", "{x} 范围内的块 id"),
    (
        r"a slot in (?P<x>\[.+?\)) = num_blocks \* block_size of kv_cache, or negative to skip "
        r"the token",
        "{x} 范围内的槽（即 kv_cache 的 num_blocks * block_size），或负数（跳过这个 token）",
    ),
    (
        r"(?P<x>\S+) with weights='trained' \(the shipped checkpoint has the tiny preset's "
        r"shape\); pass weights='random' for another",
        "{x}（`weights='trained'` 时：随附的检查点是 tiny 预设的形状）；要用别的值请传 "
        "`weights='random'`",
    ),
    (r"an id add_request returned", "add_request 返回过的 id"),
    (r"a length in (?P<x>\[.+?\]), the block table's capacity", "{x} 范围内的长度（块表的容量）"),
    (r"at least one (?P<x>[\w ]+)", "至少一个 {x}"),
    (r"at least (?P<x>.+)", "至少 {x}"),
    (r"at most (?P<x>\S+) of (?P<y>\S+)", "不超过 {y} 的 {x}"),
    (r"at most (?P<x>\S+) rows", "至多 {x} 行"),
    (r"at most (?P<x>.+)", "不超过 {x}"),
    (r"fewer than (?P<x>.+)", "少于 {x}"),
    (r"a subset of (?P<x>.+)", "{x} 的子集"),
    (r"parts of (?P<x>.+)", "{x} 中的部分"),
    (r"True or False", "True 或 False"),
    (r"True, False or None", "True、False 或 None"),
    (r"None or a dict", "None 或 `dict`"),
    (r"None or an integer", "None 或整数"),
    (r"None or an? (?P<t>[A-Z]\w+)", "None 或 {t}"),
    (r"None", "None"),
    (r"an? (?P<t>[A-Z][A-Za-z]+)", "{t}"),
    (r"a fresh Request that no scheduler has run", "尚未被任何调度器运行过的新 Request"),
    (r"a FINISHED_\* status", "FINISHED_* 状态"),
    (r"a function or a file path", "函数或文件路径"),
    (r"a string or a list of token ids", "字符串或 token id 列表"),
    (r"a non-empty string", "非空字符串"),
    (r"a string", "字符串"),
    (r"a dict loaded from a DeepSeek config\.json", "从 DeepSeek 的 config.json 读出的 dict"),
    (r"a list of block ids", "块 id 列表"),
    (r"a list of token ids", "token id 列表"),
    (r"a list of floats", "浮点数列表"),
    (r"a non-empty list of block ids", "非空的块 id 列表"),
    (r"a string naming P's engine", "命名 P 的引擎的字符串"),
    (r"a prompt length >= (?P<a>\d+)", "不小于 {a} 的提示词长度"),
    (r"a directory", "目录"),
    (r"a file path", "文件路径"),
    (r"a path ending in \.safetensors", "以 `.safetensors` 结尾的路径"),
    (
        r"(?P<a>'\w+'), (?P<b>'\w+') or a path ending in \.safetensors",
        "{a}、{b} 或以 `.safetensors` 结尾的路径",
    ),
    (r"(?P<a>[\w'.-]+) or (?P<b>[\w'.-]+)", "{a} 或 {b}"),
    (r"(?P<a>[\w'.=-]+)", "{a}"),
]
_ALLOWED_RE = [(re.compile(p), t) for p, t in _ALLOWED]


def _allowed(text: str) -> str | None:
    """The Chinese for what an ``expected`` clause allows, or None if no pattern knows it."""
    text = text.strip()
    m = re.fullmatch(r"(?P<x>.+?) when (?P<w>\S+) is (?P<v>\S+)(?: \((?P<n>[^()]+)\))?", text)
    if m:
        x, n = _allowed(m["x"]), _note(m["n"]) if m["n"] else ""
        if x is not None and n is not None:
            note = "；" + n if n else ""
            return _fill("{x}（{w} 为 {v} 时" + note + "）", {"x": x, "w": m["w"], "v": m["v"]})
    m = re.fullmatch(r"(?P<x>.+?) with (?P<w>\S+=\S+)(?: \((?P<n>[^()]+)\))?", text)
    if m:
        x, n = _allowed(m["x"]), _note(m["n"]) if m["n"] else ""
        if x is not None and n is not None:
            note = "；" + n if n else ""
            return _fill("{x}（{w} 时" + note + "）", {"x": x, "w": _code(m["w"], always=True)})
    # "A (note) or B (note)": 1 (V2) or 0 (V1)
    m = re.fullmatch(r"(?P<a>\S+) \((?P<an>[^()]+)\) or (?P<b>\S+) \((?P<bn>[^()]+)\)", text)
    if m and _note(m["an"]) is not None and _note(m["bn"]) is not None:
        return _fill(
            "{a}（{an}）或 {b}（{bn}）",
            {"a": m["a"], "b": m["b"], "an": _note(m["an"]), "bn": _note(m["bn"])},  # type: ignore[dict-item]
        )
    # a value and a note: "an integer >= 1 (1 + num_speculative_tokens)", "0 (the first ...)"
    m = re.fullmatch(r"(?P<x>.+?) \((?P<n>[^()]+)\)", text)
    if m and (x := _allowed(m["x"])) is not None and (n := _note(m["n"])) is not None:
        return x + "（" + n + "）"
    # "4, P's block size": a value, then what it is
    m = re.fullmatch(r"(?P<x>\S+), (?P<what>.+)", text)
    if m and (w := _WHAT.get(m["what"])) is not None:
        return _fill("{x}（" + w + "）", {"x": m["x"]})
    # "one of auto, triton, torch": bare values are code, so each keeps its backticks
    m = re.fullmatch(r"one of (?P<x>[\w.-]+(?:, [\w.-]+)+)", text)
    if m and not any(v[0].isdigit() for v in m["x"].split(", ")):
        return "、".join(_code(v, always=True) for v in m["x"].split(", ")) + " 之一"
    for pattern, template in _ALLOWED_RE:
        m = pattern.fullmatch(text)
        if m:
            return _fill(template, {k: v for k, v in m.groupdict().items() if v is not None})
    return None


_WHAT = {
    "P's block size (both sides must share it)": "P 的块大小，两侧必须一致",
    "the longest sequence": "最长的序列",
}


# ---- whole messages -------------------------------------------------------------------
def _sub(template: str) -> Callable[[re.Match[str]], str | None]:
    """A rule that fills ``template`` with the match's groups; a group named ``allowed``
    goes through :func:`_allowed`, one named ``rest`` through :func:`_translate`."""

    def fill(m: re.Match[str]) -> str | None:
        values = {k: v for k, v in m.groupdict().items() if v is not None}
        if "allowed" in values:
            allowed = _allowed(values["allowed"])
            if allowed is None:
                return None
            values["allowed"] = allowed
        if "rest" in values:
            rest = _translate(values["rest"])
            if rest is None:
                return None
            values["rest"] = rest
        for key in ("v", "args", "d"):  # what the user typed, marked as code unless quoted
            if key in values:
                values[key] = _code(values[key], always=key != "v")
        if "s" in values and re.fullmatch(
            r"[A-Za-z_][\w.]*(?:(?:\[[^\]]*\])?=[^`]*)?", values["s"]
        ):
            values["s"] = f"`{values['s']}`"  # name=value, or a name
        if "who" in values:
            values["who"] = {"prefill": "预填充实例", "decode": "解码实例"}[values["who"]]
        if "why" in values:
            why = _OS.get(values["why"])
            if why is None:
                return None
            values["why"] = why
        return _fill(template, values)

    return fill


def _code(value: str, always: bool = False) -> str:
    """``value`` as typed, in backticks unless it is a quoted string or a number."""
    plain = re.fullmatch(r"'[^']*'|\"[^\"]*\"|-?\d[\d.,e+-]*|`[^`]*`", value)
    return value if plain and not always else f"`{value}`"


_OS = {  # strerror texts an output-path check quotes
    "Permission denied": "权限不足",
    "permission denied": "权限不足",
    "Read-only file system": "只读文件系统",
    "No space left on device": "设备空间不足",
    "No such file or directory": "没有这个文件或目录",
    "Is a directory": "是目录",
    "Not a directory": "不是目录",
    "File exists": "文件已存在",
}

_S = r"(?P<s>.+?)"  # a subject: name=value, Cls.name=value, --flag value, 'text'
_RULES: list[tuple[str, str]] = [
    # argparse's own texts (Lib/argparse.py), then pdlab's argument types (pdlab/cli/)
    (r"argument (?P<opt>\S+): (?P<rest>.+)", "参数 {opt}：{rest}"),
    (r"invalid choice: (?P<v>.+?) \(choose from (?P<c>.+)\)", "无效的选择 {v}（可选：{c}）"),
    (r"invalid int value: (?P<v>.+)", "{v} 不是整数"),
    (r"invalid float value: (?P<v>.+)", "{v} 不是数"),
    (r"invalid (?P<t>\w+) value: (?P<v>.+)", "{v} 不是有效的 {t} 值"),
    (r"expected one argument", "需要一个值"),
    (r"expected at least one argument", "至少需要一个值"),
    (r"expected at most one argument", "至多接受一个值"),
    (r"ignored explicit argument (?P<v>.+)", "这个开关不接受取值（给了 {v}）"),
    (r"unrecognized arguments: (?P<args>.+)", "无法识别的参数：{args}"),
    (r"the following arguments are required: (?P<a>.+)", "缺少必需的参数：{a}"),
    (r"ambiguous option: (?P<o>\S+) could match (?P<m>.+)", "选项 {o} 有歧义，可能是：{m}"),
    (r"not allowed with argument (?P<o>.+)", "不能与参数 {o} 同时使用"),
    (r"one of the arguments (?P<a>.+) is required", "参数 {a} 必须给出其中一个"),
    (r"(?P<v>.+) is not an integer", "{v} 不是整数"),
    (r"(?P<v>.+) is not a number", "{v} 不是数"),
    (r"(?P<v>.+) is not a comma-separated list of integers", "{v} 不是以逗号分隔的整数列表"),
    (
        r"(?P<v>.+) is not trained, random or a path ending in \.safetensors",
        "{v} 无效：应为 `trained`、`random` 或以 `.safetensors` 结尾的路径",
    ),
    (
        r"(?P<v>.+) is not UTF-8 text \(characters (?P<a>\d+)-(?P<b>\d+) are undecodable "
        r"bytes\): expected text in UTF-8, as the byte tokenizer reads it",
        "{v} 不是 UTF-8 文本（第 {a}-{b} 个字符是无法解码的字节）：应为 UTF-8 文本，"
        "字节分词器按它读取",
    ),
    (
        r"(?P<v>\S+) is more than the tour shows: expected 1 to (?P<n>\d+) "
        r"\((?P<c>`[^`]+`) runs longer generations\)",
        "{v} 超出了导览展示的长度：应为 1 到 {n}（更长的生成请用 {c}）",
    ),
    (r"(?P<v>.+): no such file", "{v}：文件不存在"),
    # the engine's validators: "X=V is invalid: expected ..." and its relatives
    (rf"{_S} is invalid: expected (?P<allowed>.+)", "{s} 无效：应为{allowed}"),
    (
        rf"{_S} is invalid on (?P<g>.+?): no MLA backend of its platform takes it "
        r"\((?P<b>\w+) takes (?P<v>'\w+') only\)",
        "{s} 在 {g} 上无效：其平台没有接受它的 MLA 后端（{b} 只接受 {v}）",
    ),
    (
        rf"{_S} is invalid with (?P<w>.+?): expected (?P<allowed>.+)",
        "{s} 与 {w} 不兼容：应为{allowed}",
    ),
    (
        rf"{_S} is invalid here: expected a scheduler with a KV connector for P/D requests",
        "{s} 在这里无效：P/D 请求需要带 KV connector 的调度器",
    ),
    (
        rf"{_S} is invalid when there are no external computed tokens: expected at least one "
        r"token to allocate for",
        "没有外部已计算的 token 时 {s} 无效：至少要为一个 token 分配",
    ),
    (rf"{_S} is invalid: only (?P<n>\d+) free blocks", "{s} 无效：只剩 {n} 个空闲块"),
    (rf"{_S} is invalid: no such file", "{s} 无效：文件不存在"),
    (
        rf"{_S} is invalid: a request with this id is (?:still in the pair|already in the "
        r"scheduler); expected a unique id",
        "{s} 无效：已有同一 id 的请求；应为唯一的 id",
    ),
    (
        rf"{_S} is invalid: every length must be <= (?P<w>\S+)",
        "{s} 无效：每个长度都必须 <= {w}",
    ),
    (
        rf"{_S} is invalid: it must hold at least one block of (?P<n>\d+) rows",
        "{s} 无效：它至少要容纳一个 {n} 行的块",
    ),
    (rf"{_S} is out of range: expected (?P<allowed>.+)", "{s} 超出范围：应为{allowed}"),
    (
        rf"{_S} is out of range; expected (?P<a>\d+)\.\.(?P<b>\d+) \(0 picks a free one\)",
        "{s} 超出范围：应为 {a} 到 {b}（0 表示挑一个空闲端口）",
    ),
    (
        rf"{_S} is too small: expected at least (?P<n>\S+), the longest sequence in (?P<w>\S+)",
        "{s} 太小：应至少为 {n}，即 {w} 中最长的序列",
    ),
    (rf"{_S} is unknown: expected (?P<allowed>.+)", "{s} 未知：应为{allowed}"),
    (rf"{_S} are unknown: expected (?P<allowed>.+)", "{s} 未知：应为{allowed}"),
    (rf"{_S} is empty: expected (?P<allowed>.+)", "{s} 为空：应为{allowed}"),
    (
        rf"{_S} has (?P<n>\d+) tokens: expected fewer than (?P<m>\S+) "
        r"\(one position is left for the first output token\)",
        "{s} 有 {n} 个 token：应少于 {m}（要给第一个输出 token 留一个位置）",
    ),
    (
        rf"{_S} has (?P<n>\d+) entries for (?P<k>\d+) req_ids: expected one per request",
        "{s} 有 {n} 项，而 req_ids 有 {k} 个：应每个请求一项",
    ),
    (
        r"(?P<s>[\w.]+) contains (?P<v>.+?): expected (?P<allowed>.+)",
        "{s} 含有 {v}：应为{allowed}",
    ),
    (
        rf"{_S} needs triton, which is not installed \(it has Linux wheels only\): use (?P<i>.+)",
        "{s} 需要 triton，但它没有安装（它只有 Linux 的 wheel）：请改用 {i}",
    ),
    (
        rf"{_S}: TRITON_INTERPRET=(?P<v>\S+) is invalid: expected (?P<allowed>.+)",
        "{s}：TRITON_INTERPRET={v} 无效：应为{allowed}",
    ),
    (
        rf"{_S} with TRITON_INTERPRET=(?P<v>\S+) compiles for a GPU and this machine has none: "
        r"unset TRITON_INTERPRET \(or set it to 1, the interpreter\) or use (?P<i>.+)",
        "{s} 在 TRITON_INTERPRET={v} 下要为 GPU 编译，而这台机器没有 GPU：请取消 TRITON_INTERPRET"
        "（或设为 1，即解释器），或改用 {i}",
    ),
    (
        r"(?P<r>\S+) cannot run prefill_context_parallel_size=(?P<n>\d+): vLLM (?P<v>\S+) "
        r"implements prefill context parallelism only in Model Runner V2; expected "
        r"(?P<a>\S+) or (?P<b>\S+)",
        "{r} 不能运行 prefill_context_parallel_size={n}：vLLM {v} 只在 Model Runner V2 中实现了"
        "预填充上下文并行；应为 {a} 或 {b}",
    ),
    (
        r"(?P<s>\S+) cannot run with MTP: (?P<rest>.+)",
        "{s} 不能与 MTP 一起运行：{rest}",
    ),
    (
        r"the KV cache is too small for request (?P<r>\S+): (?P<n>\d+) tokens \(prompt "
        r"(?P<p>\d+) \+ max_tokens (?P<m>\d+) - 1, at most max_model_len\)(?: \+ (?P<x>\d+) "
        r"for speculative decoding)? need (?P<k>\d+) blocks of (?P<b>\d+); expected at most "
        r"(?P<c>\S+)",
        "KV 缓存对请求 {r} 太小：{n} 个 token（提示词 {p} + max_tokens {m} - 1，至多为 "
        "max_model_len）需要 {k} 个 {b} token 的块；应不超过 {c}",
    ),
    (
        r"CacheConfig\((?P<c>[^)]*)\) is too large: it needs (?P<g>\S+) GiB on (?P<d>\w+) and "
        r"(?P<f>\S+) GiB is available; expected fewer blocks or a smaller block_size",
        "CacheConfig({c}) 太大：它在 {d} 上需要 {g} GiB，而可用的只有 {f} GiB；请减少块数或减小 "
        "block_size",
    ),
    (
        r"CacheConfig\((?P<c>[^)]*)\) is too large: the latent cache needs (?P<g>\S+) GiB on "
        r"(?P<d>\S+) and allocating it failed \((?P<e>.+)\); expected fewer blocks or a "
        r"smaller block_size",
        "CacheConfig({c}) 太大：潜向量缓存在 {d} 上需要 {g} GiB，分配失败（{e}）；请减少块数或"
        "减小 block_size",
    ),
    (r"no free blocks left", "没有空闲的块了"),
    (rf"{_S} must not be empty", "{s} 不能为空"),
    # the output paths (pdlab/cli/args.py)
    (rf"{_S} is a file: expected a directory", "{s} 是文件：应为目录"),
    (rf"{_S} is a directory: expected a file path", "{s} 是目录：应为文件路径"),
    (
        rf"{_S}: the folder (?P<f>.+) does not exist \(it is not created for a file; make it "
        r"first, or write the file elsewhere\)",
        "{s}：文件夹 {f} 不存在（不会为文件自动创建它；请先创建，或把文件写到别处）",
    ),
    (
        rf"{_S} is not writable: (?P<b>.+) is a file, not a directory",
        "{s} 不可写：{b} 是文件，不是目录",
    ),
    (rf"{_S} is not writable: (?P<why>[^:]+?) in (?P<b>.+)", "{s} 不可写：{b} 中{why}"),
    (rf"{_S} is not writable: (?P<why>.+)", "{s} 不可写：{why}"),
    # pdlab pd's roles and peers (pdlab/cli/pd.py, pdlab/kv_transfer/dist.py)
    (
        r"(?P<a>--[\w-]+) does not go with (?P<b>--[\w-]+) \(it runs both sides\)",
        "{a} 不能与 {b} 同用（它自己运行两侧）",
    ),
    (
        r"(?P<a>--[\w-]+) does not go with (?P<b>--[\w-]+) \(each command runs one side\)",
        "{a} 不能与 {b} 同用（每条命令只运行一侧）",
    ),
    (
        r"(?P<a>--[\w-]+) needs (?P<b>--[\w-]+) \(the same on both machines\)",
        "{a} 需要 {b}（两台机器上取同一个值）",
    ),
    (
        r"(?P<a>--[\w-]+) goes to (?P<b>--[\w-]+ \w+), which holds the prompts",
        "{a} 应交给 {b}：提示词在那一侧",
    ),
    (
        r"could not reach the (?P<who>prefill|decode) peer at (?P<a>\S+) within (?P<t>\S+) s",
        "在 {t} s 内没能连上 {a} 的{who}",
    ),
    (
        r"(?P<k>\w+) differs between the two sides: (?P<me>\w) has (?P<a>.+), (?P<peer>\w) has "
        r"(?P<b>.+); expected P and D to share the block size and the model",
        "两侧的 {k} 不同：{me} 为 {a}，{peer} 为 {b}；P 和 D 的块大小与模型必须相同",
    ),
    (
        r"port=(?P<p>\d+) on (?P<h>\S+) is not available \((?P<why>.+)\): expected a free "
        r"port, or 0 to pick one",
        "{h} 上的 port={p} 不可用（{why}）：应为空闲端口，或用 0 自动挑选",
    ),
    # pdlab lab and pdlab notebooks (pdlab/tools/lab.py)
    (
        r"(?P<o>--notebook)=(?P<n>.+?) matches no notebook; expected a number or a name among: "
        r"(?P<l>.+)",
        "{o}={n} 没有对应的笔记本：应为数字，或以下名称之一：{l}",
    ),
    (
        rf"{_S} is a file; expected a folder \(new or existing\)",
        "{s} 是文件：应为文件夹（新建或已有的均可）",
    ),
    (rf"{_S} is a file; expected a folder", "{s} 是文件：应为文件夹"),
    (
        rf"{_S} already has edited copies of (?P<n>.+); pass --force to overwrite them, or "
        r"choose another folder",
        "{s} 中已有改过的副本 {n}；用 --force 覆盖它们，或换一个文件夹",
    ),
    (rf"{_S} cannot be written: (?P<why>.+)", "{s} 无法写入：{why}"),
    (
        rf"{_S} is (?P<w>the checkout's tracked notebooks|pdlab's own): JupyterLab saves into "
        r"the folder it serves; pick a folder of yours \(default (?P<d>.+)\)",
        "{s} 是 pdlab 自带的笔记本文件夹：JupyterLab 会保存到它打开的文件夹里；"
        "请选一个你自己的文件夹（默认 {d}）",
    ),
]
_RULES += [  # the general forms, last
    (r"(?P<v>\S+) is not (?P<allowed>.+)", "{v} 无效：应为{allowed}"),
    (r"(?P<s>.+?): expected (?P<e>.+?), got (?P<g>.+)", "{s}：应为 {e}，得到 {g}"),
    (r"(?P<s>.+?): expected (?P<allowed>.+)", "{s}：应为{allowed}"),
]
_RULES_RE = [(re.compile(p), _sub(t)) for p, t in _RULES]


def _translate(text: str) -> str | None:
    for pattern, fill in _RULES_RE:
        m = pattern.fullmatch(text)
        if m and (out := fill(m)) is not None:
            return out
    return None


def _platform_names(text: str) -> str:
    """The platform's English label inside a message, as the zh views write it."""
    from pdlab.catalog import text as view_text

    return text.replace("CPU (no GPU)", view_text("zh", "pf_cpu_label"))


def translate(message: str) -> str | None:
    """The Chinese for ``message`` (its first line), or None where no pattern knows it. A
    leading ``ValueError: `` (as the engine reports a caught error) is kept."""
    lines = message.strip().splitlines()
    text = lines[0] if lines else ""
    kind = re.match(r"(\w+(?:Error|Exception|Interrupt)): ", text)
    head = kind[1] + "：" if kind else ""
    out = _translate(text[kind.end() :] if kind else text)
    return None if out is None else _glue(head, _platform_names(out))


def zh_error(message: str) -> str:
    """``message`` in Chinese; one no pattern knows is kept whole after a Chinese lead-in."""
    out = translate(message)
    if out is not None:
        return out
    lines = message.strip().splitlines()
    first = lines[0] if lines else ""
    if any("\u4e00" <= ch <= "\u9fff" for ch in first):  # already Chinese (a zh caller's)
        return first
    return _glue(UNTRANSLATED, first)


def error_text(message: str, lang: str) -> str:
    """``message`` as a reader of ``lang`` sees it: as it is in English, :func:`zh_error`
    in Chinese."""
    return zh_error(message) if lang == "zh" else message


def wrap_cells(text: str, width: int = 80, indent: str = "  ") -> list[str]:
    """``text`` cut into lines of at most ``width`` terminal cells (a Chinese character is
    two), breaking where ``pdlab/ui/layout.py`` allows (never inside an identifier); lines
    after the first start with ``indent``."""
    import io

    from rich.console import Console
    from rich.text import Text

    import pdlab.ui.layout  # noqa: F401 - installs the CJK-aware line breaking

    console = Console(width=width, file=io.StringIO(), color_system=None)
    lines = [t.plain.strip() for t in Text(text).wrap(console, width - len(indent))]
    return [lines[0]] + [indent + line for line in lines[1:]] if lines else [""]


def error_line(prog: str, message: str, lang: str) -> str:
    """What ``pdlab <command>`` prints for an error, newline included: ``prog: error:
    message`` in English (one line, as it always was), the Chinese wrapped at 80 columns."""
    if lang != "zh":
        return f"{prog}: error: {message}\n"
    return "\n".join(wrap_cells(f"{prog}：错误：{zh_error(message)}")) + "\n"


def interrupted_line(prog: str, lang: str) -> str:
    return f"{prog}: 已中断\n" if lang == "zh" else f"{prog}: interrupted\n"


def chinese_parser_errors(parsers: list[argparse.ArgumentParser]) -> None:
    """Make each parser's error (a bad option, a missing value, ...) print its usage line as
    argparse does (option names are identifiers), headed 用法： as the Chinese ``--help``
    heads it, and the error in Chinese."""
    for parser in parsers:
        parser.error = functools.partial(_parser_error, parser)  # type: ignore[method-assign]


def _parser_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    from pdlab.catalog.help import USAGE

    usage = parser.format_usage()  # argparse's "usage: " is as wide as 用法： (7 cells)
    sys.stderr.write(
        USAGE + usage.removeprefix("usage: ") if usage.startswith("usage: ") else usage
    )
    parser.exit(2, error_line(parser.prog, message, "zh"))


def widget_error_html(e: BaseException, lang: str) -> str:
    """What a notebook widget shows for an exception its observer caught (an observer's
    exception is otherwise invisible): the traceback in English, as it always was; in
    Chinese the message in Chinese, and under it, for an error that is not a bad setting
    (a ``ValueError`` or ``TypeError``), the traceback to report."""
    import html
    import traceback

    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    if lang != "zh":
        return f"<pre style='color:#b00'>{html.escape(tb)}</pre>"
    line = html.escape(_glue(type(e).__name__ + "：", zh_error(str(e))))
    if isinstance(e, (ValueError, TypeError)):
        return f"<pre style='color:#b00'>{line}</pre>"
    return (
        f"<pre style='color:#b00'>{line}</pre><details><summary>出错位置（请附在问题报告里）"
        f"</summary><pre>{html.escape(tb)}</pre></details>"
    )
