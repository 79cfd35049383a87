"""The words ``pdlab exercises`` shows around the exercises (headers, verdicts, prompts) and
the notebooks' graded check-yourself cells print, in English and Simplified Chinese, merged
into :data:`pdlab.catalog.TEXT` (keys ``ex_``). Each exercise's own statement, hints and
mistakes sit in its module.

Chinese terms are the glossary's (``docs/glossary.md``; ``tests/test_exercises.py`` checks
every Chinese text of the exercises against it); vLLM identifiers stay in English.
"""

from __future__ import annotations

TEXT_EXERCISES: dict[str, dict[str, str]] = {
    "ex_list_title": {"en": "pdlab exercises", "zh": "pdlab 练习"},
    "ex_col_n": {"en": "#", "zh": "#"},
    "ex_col_title": {"en": "exercise", "zh": "练习"},
    "ex_col_file": {"en": "file", "zh": "文件"},
    "ex_col_status": {"en": "status", "zh": "状态"},
    "ex_col_hints": {"en": "hints", "zh": "线索"},
    "ex_passed": {"en": "passed once", "zh": "曾通过"},
    "ex_col_last": {"en": "last check", "zh": "上次检查"},
    "ex_last_pass": {"en": "pass", "zh": "通过"},
    "ex_last_fail": {"en": "FAIL", "zh": "未通过"},
    "ex_started": {"en": "started", "zh": "已开始"},
    "ex_todo": {"en": "-", "zh": "-"},
    "ex_progress_in": {
        "en": "Progress in {dir}: {passed} of {total} passed.",
        "zh": "{dir} 中的进度：{total} 题中通过 {passed} 题。",
    },
    "ex_started_file": {
        "en": "Wrote {path}. Write `{function}` there, then run: pdlab exercises check {n}",
        "zh": "已写入 {path}。请在其中实现 `{function}`，然后运行：`pdlab exercises check {n}`",
    },
    "ex_exists": {
        "en": "{path} exists already; it was left as it is (--force overwrites it)",
        "zh": "{path} 已存在，未改动（用 --force 覆盖）",
    },
    "ex_checking": {
        "en": "Exercise {n}: {title} · {file} · seed {seed}",
        "zh": "练习 {n}：{title} · {file} · 随机种子 {seed}",
    },
    "ex_pass": {
        "en": "PASS: {cases} cases, all as the engine does them.",
        "zh": "通过：{cases} 个用例，全部与引擎一致。",
    },
    "ex_fail": {
        "en": "FAIL in case: {case} ({cases} cases passed before it)",
        "zh": "未通过，用例：{case}（此前通过 {cases} 个用例）",
    },
    "ex_expected": {"en": "  expected: {value}", "zh": "  期望：{value}"},
    "ex_got": {"en": "  got:      {value}", "zh": "  得到：{value}"},
    "ex_raised": {"en": "  your code raised {value}", "zh": "  你的代码抛出 {value}"},
    "ex_looks_like": {"en": "This looks like: {what}", "zh": "这像是：{what}"},
    "ex_evidence": {
        "en": "What the engine did with your function (its own step table):",
        "zh": "引擎用你的函数做了什么（引擎自己的步骤表）：",
    },
    "ex_rerun": {
        "en": "Replay these cases with: pdlab exercises check {n} {file} --seed {seed}",
        "zh": "用同样的用例重跑：`pdlab exercises check {n} {file} --seed {seed}`",
    },
    "ex_engine_said": {"en": "The engine said: {message}", "zh": "引擎报错：{message}"},
    "ex_nb_fill_in": {
        "en": "Write a prediction for each of: {keys}; then run this cell again. The answers "
        "stay hidden until then (solution=True shows them).",
        "zh": "请为以下每一项写下预测：{keys}；然后再运行本单元格。在此之前答案不会显示"
        "（`solution=True` 可直接查看）。",
    },
    "ex_nb_you_said": {"en": "you said {value}", "zh": "你的答案是 {value}"},
    "ex_nb_all_right": {
        "en": "All right: the engine agrees with every prediction.",
        "zh": "全部正确：引擎的结果与每一项预测一致。",
    },
    "ex_nb_solution": {
        "en": "These are pdlab's answers, computed just now.",
        "zh": "以上是 pdlab 刚刚算出的答案。",
    },
    "ex_nb_some_wrong": {
        "en": "Not all right: the values above are what pdlab computed.",
        "zh": "有预测不对：上面的值是 pdlab 算出的结果。",
    },
    "ex_not_written": {
        "en": "NotImplementedError: the stub is not written yet",
        "zh": "NotImplementedError：桩函数还没有实现",
    },
    "ex_hint": {
        "en": "Hint {i} of {total} for exercise {n}:",
        "zh": "练习 {n} 的线索 {i}/{total}：",
    },
    "ex_no_more_hints": {
        "en": "That was the last hint; `pdlab exercises solution {n}` shows the solution.",
        "zh": "线索已经用完；`pdlab exercises solution {n}` 可查看参考答案。",
    },
    "ex_confirm": {
        "en": "Show the reference solution of exercise {n}? It is best read after trying. [y/N] ",
        "zh": "显示练习 {n} 的参考答案吗？最好先自己试过再看。[y/N] ",
    },
    "ex_not_shown": {"en": "Not shown.", "zh": "未显示。"},
    "ex_solution_of": {"en": "Reference solution of exercise {n}:", "zh": "练习 {n} 的参考答案："},
    "ex_no_file": {"en": "{path} does not exist", "zh": "{path} 不存在"},
    "ex_not_py": {
        "en": "{path} is not a Python file: name the .py file you wrote",
        "zh": "{path} 不是 Python 文件：请给出你写的 `.py` 文件",
    },
    "ex_start_writes": {
        "en": " (`pdlab exercises start {n}` writes exercise {n}'s)",
        "zh": "（`pdlab exercises start {n}` 会写出练习 {n} 的文件）",
    },
    "ex_syntax": {
        "en": "{path}:{line}: syntax error: {msg}",
        "zh": "{path}:{line}：语法错误：{msg}",
    },
    "ex_import_error": {
        "en": "{path}: importing it raised {error}",
        "zh": "{path}：导入时抛出 {error}",
    },
    "ex_missing_function": {
        "en": "{path}: no function named `{function}` (the stub defines it; keep its name)",
        "zh": "{path}：没有名为 `{function}` 的函数（桩文件里定义了它，请保留这个名字）",
    },
    "ex_not_callable": {
        "en": "{path}: `{function}` is not a function",
        "zh": "{path}：`{function}` 不是函数",
    },
}
