"""The words ``pdlab exercises`` shows around the exercises (headers, verdicts, prompts), in
English and Simplified Chinese, read through :func:`word` as ``pdlab/catalog/__init__.py`` does for
the tour. Each exercise's own statement, hints and mistakes sit in its module.

Chinese terms are the glossary's (``docs/glossary.md``; ``tests/test_exercises.py`` checks
every Chinese text of the exercises against it); vLLM identifiers stay in English.
"""

from __future__ import annotations

from rich.cells import cell_len

from pdlab.catalog import check_lang

WORDS: dict[str, dict[str, str]] = {
    "list_title": {"en": "pdlab exercises", "zh": "pdlab 练习"},
    "col_n": {"en": "#", "zh": "#"},
    "col_title": {"en": "exercise", "zh": "练习"},
    "col_file": {"en": "file", "zh": "文件"},
    "col_status": {"en": "status", "zh": "状态"},
    "col_hints": {"en": "hints", "zh": "线索"},
    "passed": {"en": "passed once", "zh": "曾通过"},
    "col_last": {"en": "last check", "zh": "上次检查"},
    "last_pass": {"en": "pass", "zh": "通过"},
    "last_fail": {"en": "FAIL", "zh": "未通过"},
    "started": {"en": "started", "zh": "已开始"},
    "todo": {"en": "-", "zh": "-"},
    "progress_in": {
        "en": "Progress in {dir}: {passed} of {total} passed.",
        "zh": "{dir} 中的进度：{total} 题中通过 {passed} 题。",
    },
    "started_file": {
        "en": "Wrote {path}. Write `{function}` there, then run: pdlab exercises check {n}",
        "zh": "已写入 {path}。请在其中实现 `{function}`，然后运行：`pdlab exercises check {n}`",
    },
    "exists": {
        "en": "{path} exists already; it was left as it is (--force overwrites it)",
        "zh": "{path} 已存在，未改动（用 --force 覆盖）",
    },
    "checking": {
        "en": "Exercise {n}: {title} · {file} · seed {seed}",
        "zh": "练习 {n}：{title} · {file} · 随机种子 {seed}",
    },
    "pass": {
        "en": "PASS: {cases} cases, all as the engine does them.",
        "zh": "通过：{cases} 个用例，全部与引擎一致。",
    },
    "fail": {
        "en": "FAIL in case: {case} ({cases} cases passed before it)",
        "zh": "未通过，用例：{case}（此前通过 {cases} 个用例）",
    },
    "expected": {"en": "  expected: {value}", "zh": "  期望：{value}"},
    "got": {"en": "  got:      {value}", "zh": "  得到：{value}"},
    "raised": {"en": "  your code raised {value}", "zh": "  你的代码抛出 {value}"},
    "looks_like": {"en": "This looks like: {what}", "zh": "这像是：{what}"},
    "evidence": {
        "en": "What the engine did with your function (its own step table):",
        "zh": "引擎用你的函数做了什么（引擎自己的步骤表）：",
    },
    "rerun": {
        "en": "Replay these cases with: pdlab exercises check {n} {file} --seed {seed}",
        "zh": "用同样的用例重跑：`pdlab exercises check {n} {file} --seed {seed}`",
    },
    "engine_said": {"en": "The engine said: {message}", "zh": "引擎报错：{message}"},
    "nb_fill_in": {
        "en": "Write a prediction for each of: {keys}; then run this cell again. The answers "
        "stay hidden until then (solution=True shows them).",
        "zh": "请为以下每一项写下预测：{keys}；然后再运行本单元格。在此之前答案不会显示"
        "（`solution=True` 可直接查看）。",
    },
    "nb_you_said": {"en": "you said {value}", "zh": "你的答案是 {value}"},
    "nb_all_right": {
        "en": "All right: the engine agrees with every prediction.",
        "zh": "全部正确：引擎的结果与每一项预测一致。",
    },
    "nb_solution": {
        "en": "These are pdlab's answers, computed just now.",
        "zh": "以上是 pdlab 刚刚算出的答案。",
    },
    "nb_some_wrong": {
        "en": "Not all right: the values above are what pdlab computed.",
        "zh": "有预测不对：上面的值是 pdlab 算出的结果。",
    },
    "not_written": {
        "en": "NotImplementedError: the stub is not written yet",
        "zh": "NotImplementedError：桩函数还没有实现",
    },
    "hint": {"en": "Hint {i} of {total} for exercise {n}:", "zh": "练习 {n} 的线索 {i}/{total}："},
    "no_more_hints": {
        "en": "That was the last hint; `pdlab exercises solution {n}` shows the solution.",
        "zh": "线索已经用完；`pdlab exercises solution {n}` 可查看参考答案。",
    },
    "confirm": {
        "en": "Show the reference solution of exercise {n}? It is best read after trying. [y/N] ",
        "zh": "显示练习 {n} 的参考答案吗？最好先自己试过再看。[y/N] ",
    },
    "not_shown": {"en": "Not shown.", "zh": "未显示。"},
    "solution_of": {"en": "Reference solution of exercise {n}:", "zh": "练习 {n} 的参考答案："},
    "no_file": {"en": "{path} does not exist", "zh": "{path} 不存在"},
    "not_py": {
        "en": "{path} is not a Python file: name the .py file you wrote",
        "zh": "{path} 不是 Python 文件：请给出你写的 `.py` 文件",
    },
    "start_writes": {
        "en": " (`pdlab exercises start {n}` writes exercise {n}'s)",
        "zh": "（`pdlab exercises start {n}` 会写出练习 {n} 的文件）",
    },
    "syntax": {"en": "{path}:{line}: syntax error: {msg}", "zh": "{path}:{line}：语法错误：{msg}"},
    "import_error": {
        "en": "{path}: importing it raised {error}",
        "zh": "{path}：导入时抛出 {error}",
    },
    "missing_function": {
        "en": "{path}: no function named `{function}` (the stub defines it; keep its name)",
        "zh": "{path}：没有名为 `{function}` 的函数（桩文件里定义了它，请保留这个名字）",
    },
    "not_callable": {
        "en": "{path}: `{function}` is not a function",
        "zh": "{path}：`{function}` 不是函数",
    },
}


def wrap80(text: str, width: int = 80) -> str:
    """Each line of ``text`` cut to ``width`` terminal columns (a Chinese character takes
    two), at a space where there is one, continued two columns in; lines of a table (box
    drawing) are left whole."""
    out = []
    for line in text.splitlines():
        if line.lstrip()[:1] in _BOX:
            out.append(line)
        else:
            out += _cut(line, width, "  ")
    return "\n".join(out)


def reflow(text: str, width: int = 80) -> str:
    """Paragraphs (separated by blank lines) and ``*`` items re-wrapped to ``width``
    columns: how a statement is written out, whatever its source lines' lengths."""
    out: list[str] = []
    for para in text.split("\n\n"):
        items: list[list[str]] = []
        for line in para.splitlines():
            if line.lstrip().startswith("* ") or not items:
                items.append([line.rstrip()])
            else:
                items[-1].append(line.strip())
        for item in items:
            joined = item[0]
            for piece in item[1:]:
                tight = _cjk(piece[:1]) or joined[-1:] in _CJK_PUNCT
                glue = "" if _cjk(joined[-1:]) and tight else " "
                joined += glue + piece
            lead = len(joined) - len(joined.lstrip())
            indent = " " * (lead + (2 if joined.lstrip().startswith("* ") else 0))
            out += _cut(joined, width, indent)
        out.append("")
    return "\n".join(out[:-1])


def _cut(line: str, width: int, indent: str) -> list[str]:
    out = []
    while cell_len(line) > width:
        cut, cells = 0, 0
        for i, ch in enumerate(line):
            cells += cell_len(ch)
            if cells > width:
                break
            cut = i + 1
        space = line.rfind(" ", len(indent) + 1, cut + 1)
        if space > width // 3 and not (_cjk(line[cut - 1 : cut]) and _cjk(line[cut : cut + 1])):
            cut = space
        out.append(line[:cut].rstrip())
        line = indent + line[cut:].lstrip()
    out.append(line)
    return out


_CJK_PUNCT = set("，。：；、（）“”？！")
_BOX = set("┏┃┡│└━┗┳╇┻┓┩┛")


def _cjk(s: str) -> bool:
    return any(cell_len(ch) == 2 for ch in s)


def word(lang: str, key: str, **values: object) -> str:
    """The words for ``key`` in ``lang`` (``"en"`` or ``"zh"``), ``values`` filled in."""
    return WORDS[key][check_lang(lang)].format(**values)
