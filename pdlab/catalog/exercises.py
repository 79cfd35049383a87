"""The words ``pdlab exercises`` shows around the exercises (headers, verdicts, prompts) and
the notebooks' graded check-yourself cells print (keys ``ex_``), and each grader's case names
and verdicts (keys ``ex01_`` to ``ex14_``, by exercise; a grader names them with
:class:`pdlab.exercises.base.Words`), in English and Simplified Chinese, merged into
:data:`pdlab.catalog.TEXT`. Each exercise's own statement, hints and mistakes sit in its
module.

Chinese terms are the glossary's (``docs/glossary.md``; ``tests/lab/test_exercises.py`` checks
every Chinese text of the exercises against it); vLLM identifiers stay in English.
"""

from __future__ import annotations

TEXT_EXERCISES: dict[str, dict[str, str]] = {
    "ex_list_title": {"en": "pdlab exercises", "zh": "pdlab 练习"},
    "ex_col_n": {"en": "#", "zh": "#"},
    "ex_col_title": {"en": "exercise", "zh": "练习"},
    "ex_col_status": {"en": "status", "zh": "状态"},
    "ex_col_hints": {"en": "hints", "zh": "线索"},
    "ex_passed": {"en": "passed once", "zh": "曾通过"},
    "ex_col_last": {"en": "last check", "zh": "上次检查"},
    "ex_last_pass": {"en": "pass", "zh": "通过"},
    "ex_last_fail": {"en": "FAIL", "zh": "未通过"},
    "ex_started": {"en": "started", "zh": "已开始"},
    "ex_todo": {"en": "-", "zh": "-"},
    "ex_progress_in": {"en": "Progress in {dir}: {passed} of {total} passed.",
                       "zh": "{dir} 中的进度：{total} 题中通过 {passed} 题。"},
    "ex_started_file": {
        "en": "Wrote {path}. Write `{function}` there, then run: pdlab exercises check {n} {path}",
        "zh": "已写入 {path}。请在其中实现 `{function}`，然后运行：`pdlab exercises check {n} "
        "{path}`"},
    "ex_exists": {"en": "{path} exists already; it was left as it is (--force overwrites it)",
                  "zh": "{path} 已存在，未改动（用 --force 覆盖）"},
    "ex_checking": {"en": "Exercise {n}: {title} · {file} · seed {seed}",
                    "zh": "练习 {n}：{title} · {file} · 随机种子 {seed}"},
    "ex_pass": {"en": "PASS: {cases} cases, all as the engine does them.",
                "zh": "通过：{cases} 个用例，全部与引擎一致。"},
    "ex_fail": {"en": "FAIL in case: {case} ({cases} cases passed before it)",
                "zh": "未通过，用例：{case}（此前通过 {cases} 个用例）"},
    "ex_expected": {"en": "  expected: {value}", "zh": "  期望：{value}"},
    "ex_got": {"en": "  got:      {value}", "zh": "  得到：{value}"},
    "ex_raised": {"en": "  your code raised {value}", "zh": "  你的代码抛出 {value}"},
    "ex_loading_file": {"en": "loading your file", "zh": "加载你的文件"},
    "ex_too_slow": {"en": "stopped: this case ran longer than {limit:g} s (an endless loop?)",
                    "zh": "已中止：该用例运行超过 {limit:g} 秒（死循环？）"},
    "ex_process_ended": {
        "en": "stopped: your code ended the process (exit code {code}; os._exit?); a check "
        "passes only when every case runs to its end",
        "zh": "已中止：你的代码结束了进程（退出码 {code}；os._exit？）；只有每个用例都运行到底，"
        "检查才算通过"},
    "ex_called_exit": {
        "en": "stopped: your code raised SystemExit({code!r}) (sys.exit?); a check passes only "
        "when every case runs to its end",
        "zh": "已中止：你的代码抛出 SystemExit({code!r})（`sys.exit`？）；只有每个用例都运行到底，"
        "检查才算通过"},
    "ex_raised_interrupt": {
        "en": "stopped: your code raised KeyboardInterrupt; a check passes only when every "
        "case runs to its end",
        "zh": "已中止：你的代码抛出 KeyboardInterrupt；只有每个用例都运行到底，检查才算通过"},
    "ex_returned_type": {"en": "your function returned {got}, expected {expected}",
                         "zh": "你的函数返回了 {got}，应为 {expected}"},
    "ex_returned_type_at": {"en": "your function returned {got} at {at}, expected {expected}",
                            "zh": "你的函数在 {at} 处返回了 {got}，应为 {expected}"},
    "ex_returned_odd": {
        "en": "your function returned a {got} (at {at}): return plain values (int, float, "
        "bool, str, lists, tuples, dicts, tensors), whose == means equal",
        "zh": "你的函数返回了一个 {got}（位于 {at}）：请返回普通的值（`int`、`float`、`bool`、"
        "`str`、列表、元组、字典、张量），它们的 == 才表示相等"},
    "ex_random_case": {"en": "random case {i} of {count}: {name}",
                       "zh": "随机用例 {i}/{count}：{name}"},
    "ex_random_case_shrunk": {
        "en": "random case {i}, shrunk to the smallest that still differs: {name}",
        "zh": "随机用例 {i}，已缩小到仍有差异的最小用例：{name}"},
    "ex_random_for": {"en": "{want} for {case}", "zh": "{want}，参数 {case}"},
    "ex_progress_set_aside": {
        "en": "{path} was damaged ({why}): set aside as {bad}; progress starts afresh",
        "zh": "{path} 已损坏（{why}）：已另存为 {bad}；进度重新开始"},
    "ex_progress_not_json": {"en": "not JSON", "zh": "不是 JSON"},
    "ex_progress_bad_value": {"en": "it holds {value}, which pdlab never writes there",
                              "zh": "其中有 pdlab 从不会写入的值 {value}"},
    "ex_compare_with": {"en": "Now compare yours with pdlab's own: {where}",
                        "zh": "现在把你的实现与 pdlab 自己的比一比：{where}"},
    "ex_called_own": {
        "en": "stopped: your function called pdlab's own answer ({what}); write it yourself: "
        "the check compares yours with that one",
        "zh": "已中止：你的函数调用了 pdlab 自己的答案（{what}）；请自己实现："
        "检查正是拿你的实现与它对照"},
    "ex_changed_pdlab": {
        "en": "stopped: your code changed pdlab itself ({names}); the check would compare "
        "your function with itself",
        "zh": "已中止：你的代码改动了 pdlab 本身（{names}）；这样检查就成了拿你的函数和它自己对照"},
    "ex_looks_like": {"en": "This looks like: {what}", "zh": "这像是：{what}"},
    "ex_evidence": {"en": "What the engine did with your function (its own step table):",
                    "zh": "引擎用你的函数做了什么（引擎自己的步骤表）："},
    "ex_rerun": {"en": "Replay these cases with: pdlab exercises check {n} {file} --seed {seed}",
                 "zh": "用同样的用例重跑：`pdlab exercises check {n} {file} --seed {seed}`"},
    "ex_engine_said": {"en": "The engine said: {message}", "zh": "引擎报错：{message}"},
    "ex_nb_fill_in": {
        "en": "Write a prediction for each of: {keys}; then run this cell again. The answers "
        "stay hidden until then (solution=True shows them).",
        "zh": "请为以下每一项写下预测：{keys}；然后再运行本单元格。在此之前答案不会显示"
        "（`solution=True` 可直接查看）。"},
    "ex_nb_you_said": {"en": "you said {value}", "zh": "你的答案是 {value}"},
    "ex_nb_all_right": {"en": "All right: the engine agrees with every prediction.",
                        "zh": "全部正确：引擎的结果与每一项预测一致。"},
    "ex_nb_solution": {"en": "These are pdlab's answers, computed just now.",
                       "zh": "以上是 pdlab 刚刚算出的答案。"},
    "ex_nb_some_wrong": {"en": "Not all right: the values above are what pdlab computed.",
                         "zh": "有预测不对：上面的值是 pdlab 算出的结果。"},
    "ex_not_written": {"en": "NotImplementedError: the stub is not written yet",
                       "zh": "NotImplementedError：桩函数还没有实现"},
    "ex_hint": {"en": "Hint {i} of {total} for exercise {n}:",
                "zh": "练习 {n} 的线索 {i}/{total}："},
    "ex_no_more_hints": {
        "en": "That was the last hint; `pdlab exercises solution {n}` shows the solution.",
        "zh": "线索已经用完；`pdlab exercises solution {n}` 可查看参考答案。"},
    "ex_confirm": {
        "en": "Show the reference solution of exercise {n}? It is best read after trying. [y/N] ",
        "zh": "显示练习 {n} 的参考答案吗？最好先自己试过再看。[y/N] "},
    "ex_not_shown": {"en": "Not shown.", "zh": "未显示。"},
    "ex_solution_of": {"en": "Reference solution of exercise {n}:", "zh": "练习 {n} 的参考答案："},
    "ex_no_file": {"en": "{path} does not exist", "zh": "{path} 不存在"},
    "ex_not_py": {"en": "{path} is not a Python file: name the .py file you wrote",
                  "zh": "{path} 不是 Python 文件：请给出你写的 `.py` 文件"},
    "ex_start_writes": {"en": " (`pdlab exercises start {n}` writes exercise {n}'s)",
                        "zh": "（`pdlab exercises start {n}` 会写出练习 {n} 的文件）"},
    "ex_syntax": {"en": "{path}:{line}: syntax error: {msg}",
                  "zh": "{path}:{line}：语法错误：{msg}"},
    "ex_import_error": {"en": "{path}: importing it raised {error}",
                        "zh": "{path}：导入时抛出 {error}"},
    "ex_missing_function": {
        "en": "{path}: no function named `{function}` (the stub defines it; keep its name)",
        "zh": "{path}：没有名为 `{function}` 的函数（桩文件里定义了它，请保留这个名字）"},
    "ex_not_callable": {"en": "{path}: `{function}` is not a function",
                        "zh": "{path}：`{function}` 不是函数"},
    "ex01_random": {"en": "random batch: block_size {bs}, contexts {contexts}, new tokens {q_lens}",
                    "zh": "随机批次：block_size {bs}，上下文 {contexts}，新 token 数 {q_lens}"},
    "ex01_one_request_empty_context_new": {"en": "one request, empty context, 5 new tokens",
                                           "zh": "一个请求，空上下文，5 个新 token"},
    "ex01_exactly_blocks_empty_context_new": {
        "en": "exactly 2 blocks: empty context, {v0} new tokens",
        "zh": "正好 2 块：空上下文，{v0} 个新 token"},
    "ex01_blocks_context_new_token_decode": {
        "en": "2 blocks + 1: context {v0}, 1 new token (a decode)",
        "zh": "2 块 + 1：上下文 {v0}，1 个新 token（解码）"},
    "ex01_later_chunk_context_new_tokens": {"en": "a later chunk: context 6, 5 new tokens",
                                            "zh": "后续分块：上下文 6，5 个新 token"},
    "ex01_one_token_prompt": {"en": "one-token prompt", "zh": "只有一个 token 的提示词"},
    "ex01_random_batch_three": {"en": "random batch of three", "zh": "随机的三请求批次"},
    "ex01_inside_colocated_engine_chunked_prefill": {
        "en": "inside a colocated engine, chunked prefill (budget 8), prompts of 13 and 6",
        "zh": "在非分离引擎中：分块预填充（预算 8），提示词长 13 和 6"},
    "ex01_inside_colocated_engine_with_10": {
        "en": "inside a colocated engine with 10 blocks: one request is preempted and resumes",
        "zh": "在只有 10 个块的非分离引擎中：一个请求被抢占后恢复"},
    "ex01_engine_step_contexts_new_tokens": {
        "en": "engine step {step}: contexts {computed}, new tokens {q}",
        "zh": "引擎第 {step} 步：上下文 {computed}，新 token {q}"},
    "ex02_miss_mid_prefix": {
        "en": "the prompt cached ({v0} tokens), its block 1 evicted since: a miss mid-prefix",
        "zh": "提示词已缓存（{v0} 个 token），但它的块 1 此后被驱逐：前缀中途未命中"},
    "ex02_random": {
        "en": "random: {cached} tokens cached, blocks {evicted} of them evicted; a query of "
        "{query} tokens sharing the first {share}",
        "zh": "随机：已缓存 {cached} 个 token，其中块 {evicted} 已被驱逐；查询 {query} 个 token，"
        "与之共享前 {share} 个"},
    "ex02_fully_cached_prompt_exactly_blocks": {
        "en": "fully cached prompt of exactly 3 blocks (N = {v0})",
        "zh": "全部已缓存、正好 3 块的提示词（N = {v0}）"},
    "ex02_fully_cached_prompt_blocks": {"en": "fully cached prompt of 3 blocks + 1 (N = {v0})",
                                        "zh": "全部已缓存、3 块 + 1 的提示词（N = {v0}）"},
    "ex02_one_token_prompt_cached": {"en": "one-token prompt, cached",
                                     "zh": "已缓存的一 token 提示词"},
    "ex02_empty_cache": {"en": "empty cache", "zh": "空缓存"},
    "ex02_second_block_equal_first_block": {"en": "second block equal, first block different",
                                            "zh": "第二块相同、第一块不同"},
    "ex02_shares_tokens_one_whole_block": {"en": "shares 5 tokens: one whole block",
                                           "zh": "共享 5 个 token：一个整块"},
    "ex02_random_shares_tokens": {"en": "random: shares {n} of {v0} tokens",
                                  "zh": "随机：共享 {v0} 个 token 中的 {n} 个"},
    "ex02_inside_colocated_engine_13_tokens": {
        "en": "inside a colocated engine: 13 tokens, the same again, 2 blocks shared, 12",
        "zh": "在非分离引擎中：13 个 token、再来一次相同的、共享 2 块、12 个"},
    "ex02_inside_colocated_engine_10_blocks": {
        "en": "inside a colocated engine of 10 blocks: two prompts at once, one preempted",
        "zh": "在只有 10 个块的非分离引擎中：两个提示词同时运行，其中一个被抢占"},
    "ex02_block_pool_as_it_was": {"en": "the block pool as it was (a lookup changes nothing)",
                                  "zh": "块池保持原样（查找不改变任何东西）"},
    "ex02_free_blocks_ref_cnt_changed": {
        "en": "free blocks {free} -> {after}; ref_cnt changed on blocks {moved}",
        "zh": "空闲块 {free} -> {after}；块 {moved} 的 ref_cnt 变了"},
    "ex03_two_receives_one_step": {
        "en": "two prompts ({n1} and {n2} tokens) sent together: both receives land in one step",
        "zh": "两个提示词（{n1} 和 {n2} 个 token）同时发出：两个接收在同一步完成"},
    "ex03_random": {
        "en": "random: prompts of {lengths} tokens {together}, read delay {delay} polls, {fault}",
        "zh": "随机：提示词长度 {lengths}，{together}，读取延迟 {delay} 次轮询，{fault}"},
    "ex03_together": {"en": "sent together", "zh": "同时发出"},
    "ex03_one_after": {"en": "one after the other", "zh": "依次发出"},
    "ex03_fault_none": {"en": "the whole load arrives", "zh": "整个加载都到达"},
    "ex03_fault_fail": {"en": "the first load fails whole (recompute)",
                        "zh": "第一次加载整个失败（recompute）"},
    "ex03_fault_from": {"en": "the first load fails from block {i} on",
                        "zh": "第一次加载从第 {i} 块起失败"},
    "ex03_others_stay": {"en": "the other requests' ids left in the sets when {rid} resumes",
                         "zh": "{rid} 恢复时，其他请求的 id 仍留在集合里"},
    "ex03_others_gone": {"en": "{lost} removed too", "zh": "{lost} 也被移除了"},
    "ex03_scheduler_stopped_request_came_back": {
        "en": "D's scheduler stopped: the request came back with every token computed, so its step "
        "had nothing to run.",
        "zh": "D 的调度器停下了：请求回来时所有 token 都已算完，这一步没有可运行的。"},
    "ex03_three_blocks_plus_one": {"en": "3 blocks + 1, N = {v0}", "zh": "3 块 + 1，N = {v0}"},
    "ex03_exactly_blocks": {"en": "exactly 3 blocks, N = {v0}", "zh": "正好 3 块，N = {v0}"},
    "ex03_exactly_one_block": {"en": "exactly one block, N = {BS}", "zh": "正好 1 块，N = {BS}"},
    "ex03_one_token_prompt": {"en": "one-token prompt, N = 1", "zh": "一 token 提示词，N = 1"},
    "ex03_random_length_slow_transfer_polls": {
        "en": "random length N = {n}, a slow transfer (3 polls)",
        "zh": "随机长度 N = {n}，慢速传输（3 次轮询）"},
    "ex03_local_prefix_hit_blocks_beside": {
        "en": "a local prefix hit (2 blocks) beside the remote K/V, N = {v0}",
        "zh": "本地前缀命中（2 块）加上远端 K/V，N = {v0}"},
    "ex03_short_prompt_blocks_and_on": {
        "en": "K/V short of the prompt: blocks 2 and on failed to load, N = {v0}",
        "zh": "K/V 不足整个提示词：第 2 块起加载失败，N = {v0}"},
    "ex03_whole_load_failed_policy_recompute": {
        "en": "the whole load failed (policy recompute), N = {v0}",
        "zh": "整个加载失败（策略 recompute），N = {v0}"},
    "ex03_same_prompt_twice_prefix_cache": {
        "en": "the same prompt twice, N = {v0}: D's prefix cache holds the received blocks",
        "zh": "同一提示词两次，N = {v0}：D 的前缀缓存里有收到的块"},
    "ex03_num_computed_tokens_num_tokens": {
        "en": "num_computed_tokens {before} -> {right} (num_tokens = {num_tokens}), and D's step "
        "runs",
        "zh": "num_computed_tokens {before} -> {right}（num_tokens = {num_tokens}），D 的这一步照常"
        "运行"},
    "ex03_finished_recving_kv_req_ids": {"en": "finished_recving_kv_req_ids empty after the run",
                                         "zh": "运行结束后 finished_recving_kv_req_ids 为空"},
    "ex03_still_holds": {"en": "still holds {v0}", "zh": "仍有 {v0}"},
    "ex03_failed_recving_kv_req_ids": {"en": "failed_recving_kv_req_ids empty after the run",
                                       "zh": "运行结束后 failed_recving_kv_req_ids 为空"},
    "ex03_false_while_are_still_arriving": {"en": "False while the K/V are still arriving",
                                            "zh": "K/V 还在路上时返回 False"},
    "ex03_pair_with_your_function_on": {"en": "{name}: P/D pair with your function on D",
                                        "zh": "{name}：D 上装着你的函数的 P/D 对"},
    "ex03_num_computed_tokens_step_has": {
        "en": "num_computed_tokens {before} -> {after}: D's step has nothing to schedule",
        "zh": "num_computed_tokens {before} -> {after}：D 的这一步无可调度"},
    "ex04_random_features": {"en": "rows (new tokens, computed, prompt) {rows}, use_pcp {pcp}",
                             "zh": "各行（新 token 数，已计算，提示词）{rows}，use_pcp {pcp}"},
    "ex04_use_pcp": {"en": "{name} (use_pcp)", "zh": "{name} (use_pcp)"},
    "ex04_first_step_token_over_12": {"en": "D's first step: 1 token over N - 1 = 12 cached",
                                      "zh": "D 的第一步：在 N - 1 = 12 个已缓存 token 之上算 1 个"},
    "ex04_first_step_under_prefill_context": {
        "en": "D's first step under prefill context parallelism",
        "zh": "预填充上下文并行下 D 的第一步"},
    "ex04_one_token_prompt_nothing_cached": {"en": "one-token prompt, nothing cached",
                                             "zh": "一 token 提示词，无缓存"},
    "ex04_three_decodes": {"en": "three decodes", "zh": "三个 decode 行"},
    "ex04_decode_step_and_fresh_prompt": {"en": "a decode, D's step and a fresh prompt",
                                          "zh": "一个 decode 行、D 的那一步和一个新提示词"},
    "ex04_decode_and_step": {"en": "a decode and D's step", "zh": "一个 decode 行和 D 的那一步"},
    "ex04_two_decodes_and_two_steps": {"en": "two decodes and two of D's steps",
                                       "zh": "两个 decode 行和 D 的两步"},
    "ex04_decode_and_step_with_pcp": {"en": "a decode and D's step, with PCP",
                                      "zh": "一个 decode 行和 D 的那一步，开启 PCP"},
    "ex04_later_chunk_prompt_tokens_over": {"en": "a later chunk of a prompt: 4 tokens over 8",
                                            "zh": "提示词的后续分块：在 8 个之上算 4 个"},
    "ex04_random_batch": {"en": "random batch {rows}", "zh": "随机批次 {rows}"},
    "ex04_inside_pair_prefill_context_parallel": {
        "en": "inside a P/D pair, prefill_context_parallel_size = {pcp}, N = 13",
        "zh": "在 P/D 对中，prefill_context_parallel_size = {pcp}，N = 13"},
    "ex05_random_features": {
        "en": "query_lens {q}, is_prefilling {pf}, threshold {thr}, require_uniform "
        "{uniform}, treat_short_extends_as_decodes {treat}",
        "zh": "query_lens {q}，is_prefilling {pf}，阈值 {thr}，require_uniform {uniform}，"
        "treat_short_extends_as_decodes {treat}"},
    "ex05_lists_as_given": {"en": "query_lens {q} and is_prefilling {pf} left as given",
                            "zh": "query_lens {q} 和 is_prefilling {pf} 保持传入时的样子"},
    "ex05_lists_changed": {"en": "changed to {q} and {pf}", "zh": "被改成了 {q} 和 {pf}"},
    "ex05_switches": {"en": "{name} (threshold {thr}, require_uniform {uniform}, treat {treat})",
                      "zh": "{name} (threshold {thr}, require_uniform {uniform}, treat {treat})"},
    "ex05_step_alone_default_switches": {"en": "D's step alone, default switches",
                                         "zh": "只有 D 的那一步，默认开关"},
    "ex05_step_alone_treat_short_extends": {
        "en": "D's step alone, treat_short_extends_as_decodes=False (PCP)",
        "zh": "只有 D 的那一步，treat_short_extends_as_decodes=False（PCP）"},
    "ex05_decode_step_fresh_prompt": {"en": "decode, D's step, fresh prompt of 7",
                                      "zh": "decode 行、D 的那一步、7 个 token 的新提示词"},
    "ex05_decode_step_fresh_prompt_pcp": {"en": "decode, D's step, fresh prompt, PCP",
                                          "zh": "decode 行、D 的那一步、新提示词，PCP"},
    "ex05_flashmla_128_uniform_decodes_prompt": {
        "en": "FlashMLA (128, uniform): decodes, prompt of 5",
        "zh": "FlashMLA（128，`uniform`）：decode 行、5 个 token 的提示词"},
    "ex05_flash_attn_mla_512_varlen": {
        "en": "FLASH_ATTN_MLA (512, varlen): decodes, prompt of 5",
        "zh": "FLASH_ATTN_MLA（512，`varlen`）：decode 行、5 个 token 的提示词"},
    "ex05_uniform_with_padding_rows_query": {"en": "uniform with padding rows (query_len 0)",
                                             "zh": "`uniform`，带填充行（query_len 0）"},
    "ex05_first_row_above_threshold": {"en": "first row above the threshold",
                                       "zh": "第一行超过阈值"},
    "ex05_empty_batch": {"en": "empty batch", "zh": "空批次"},
    "ex05_random_batch": {"en": "random batch {rows}", "zh": "随机批次 {rows}"},
    "ex05_pair_13": {"en": "P/D pair, N = 13", "zh": "P/D 对，N = 13"},
    "ex05_pair_under_pcp_13": {"en": "P/D pair under PCP = 2, N = 13",
                               "zh": "PCP = 2 下的 P/D 对，N = 13"},
    "ex05_colocated_flashmla_batch_14_tokens": {
        "en": "colocated FlashMLA batch of 3, 9, 14 tokens, budget 10",
        "zh": "非分离 FlashMLA 批次：3、9、14 个 token，预算 10"},
    "ex05_inside_mla_builder": {"en": "inside the MLA builder: {label}",
                                "zh": "在 MLA builder 中：{label}"},
    "ex06_random": {
        "en": "random: {t} tokens, {h} heads, {ka} and {kb} keys, scores shifted by {shift}, "
        "part A empty at rows {empty_a}, part B at rows {empty_b}",
        "zh": "随机：{t} 个 token，{h} 个头，{ka} 和 {kb} 个 key，分数平移 {shift}，"
        "A 部分在第 {empty_a} 行为空，B 部分在第 {empty_b} 行为空"},
    "ex06_random_tokens_heads_keys_keys": {
        "en": "random: {t} tokens, {h} heads, 5 keys + 7 keys",
        "zh": "随机：{t} 个 token，{h} 个头，5 个 key + 7 个 key"},
    "ex06_one_key_in_each_part": {"en": "one key in each part", "zh": "每部分一个 key"},
    "ex06_large_scores_lses_in_hundreds": {"en": "large scores (LSEs in the hundreds)",
                                           "zh": "很大的分数（LSE 上百）"},
    "ex06_part_empty": {"en": "part B empty", "zh": "B 部分为空"},
    "ex06_part_empty_2": {"en": "part A empty", "zh": "A 部分为空"},
    "ex06_both_parts_empty_out_lse": {"en": "both parts empty: out = 0, lse = -inf, no NaN",
                                      "zh": "两部分都为空：`out = 0`，`lse = -inf`，不能有 NaN"},
    "ex06_one_token_step_under_pcp": {
        "en": "D's one-token step under PCP = 2 (forward_mha over 12 cached), N = 13",
        "zh": "PCP = 2 下 D 的一 token 步骤（forward_mha，12 个已缓存），N = 13"},
    "ex06_colocated_engine_chunked_prefill_budget": {
        "en": "a colocated engine, chunked prefill (budget 5), N = 14",
        "zh": "非分离引擎，分块预填充（预算 5），N = 14"},
    "ex06_lse_inf_its_output_nan": {
        "en": "{label} (lse = -inf, its output NaN): the result is the other part",
        "zh": "{label}（`lse = -inf`，输出为 NaN）：结果就是另一部分"},
    "ex06_inside_forward_mha": {"en": "inside forward_mha: {label}",
                                "zh": "在 forward_mha 中：{label}"},
    "ex06_forward_mha_merges_its_parts": {
        "en": "forward_mha merges its parts with merge_attn_states",
        "zh": "forward_mha 用 merge_attn_states 合并各部分"},
    "ex06_no_call": {"en": "no call", "zh": "没有调用"},
    "ex07_random": {
        "en": "random: {t} queries over {s} cached rows, {h} heads, qk_nope_head_dim {n}, "
        "qk_rope_head_dim {r}, v_head_dim {v}, kv_lora_rank {L}",
        "zh": "随机：{t} 个 query，{s} 行缓存，{h} 个头，qk_nope_head_dim {n}，"
        "qk_rope_head_dim {r}，v_head_dim {v}，kv_lora_rank {L}"},
    "ex07_random_one_query_over_cached": {"en": "random: one query over {rand} cached rows",
                                          "zh": "随机：一个 query，{rand} 行缓存"},
    "ex07_one_cached_row": {"en": "one cached row", "zh": "只有一行缓存"},
    "ex07_three_queries_over_rows": {"en": "three queries over 9 rows",
                                     "zh": "三个 query，9 行缓存"},
    "ex07_steps_pair_13": {"en": "D's steps of a P/D pair, N = 13",
                           "zh": "P/D 对中 D 的各步，N = 13"},
    "ex07_colocated_engine_13": {"en": "a colocated engine, N = 13", "zh": "非分离引擎，N = 13"},
    "ex07_inside_forward_mqa": {"en": "inside forward_mqa: {label}",
                                "zh": "在 forward_mqa 中：{label}"},
    "ex07_forward_mqa_runs_decode_steps": {"en": "forward_mqa runs the decode steps",
                                           "zh": "forward_mqa 运行解码步骤"},
    "ex07_no_decode_step_ran": {"en": "no decode step ran", "zh": "没有运行任何解码步骤"},
    "ex08_unused_slots_nan": {"en": "{name}, unused slots hold NaN",
                              "zh": "{name}，未用的槽为 NaN"},
    "ex08_one_cached_row_seq_len": {"en": "one cached row (seq_len 1)",
                                    "zh": "只有一行缓存（seq_len 1）"},
    "ex08_exactly_pages_seq_len": {"en": "exactly 2 pages (seq_len {v0})",
                                   "zh": "正好 2 页（seq_len {v0}）"},
    "ex08_pages_seq_len": {"en": "2 pages + 1 (seq_len {v0})", "zh": "2 页 + 1（seq_len {v0}）"},
    "ex08_random_batch_seq_lens": {"en": "random batch: seq_lens [{n}, 3, {v0}]",
                                   "zh": "随机批次：seq_lens [{n}, 3, {v0}]"},
    "ex08_inside_colocated_engine_mla_decode": {
        "en": "inside a colocated engine: mla_decode is your kernel, N = 13",
        "zh": "在非分离引擎中：mla_decode 换成你的算子，N = 13"},
    "ex08_pair_out_lse": {"en": "a pair (out, lse)", "zh": "一对 `(out, lse)`"},
    "ex08_decode_steps_call_mla_decode": {"en": "the decode steps call mla_decode",
                                          "zh": "解码步骤调用 mla_decode"},
    "ex08_no_call": {"en": "no call", "zh": "没有调用"},
    "ex09_case": {"en": "{what}: {preset}, query_len {q}, context_len {s}",
                  "zh": "{what}: {preset}, query_len {q}, context_len {s}"},
    "ex09_one_token_step_over_4096": {"en": "D's one-token step over 4096 cached",
                                      "zh": "D 在 4096 个已缓存 token 之上的一 token 步骤"},
    "ex09_fresh_prompt_4096": {"en": "a fresh prompt of 4096", "zh": "4096 个 token 的新提示词"},
    "ex09_one_token_prompt_empty_context": {"en": "a one-token prompt, empty context",
                                            "zh": "一 token 提示词，空上下文"},
    "ex09_chunk_64_over_1024": {"en": "a chunk of 64 over 1024",
                                "zh": "1024 之上 64 个 token 的分块"},
    "ex09_tiny_model_fresh_prompt_13": {"en": "the tiny model's fresh prompt of 13",
                                        "zh": "tiny 模型 13 个 token 的新提示词"},
    "ex09_random": {"en": "random", "zh": "随机"},
    "ex09_deepseek_v3_context_10_last": {
        "en": "deepseek-v3, context 10^7: the last query length at which absorbing wins",
        "zh": "deepseek-v3，上下文 10^7：吸收仍更省的最大 query 长度"},
    "ex09_no_fresh_prompt_is_cheaper": {
        "en": "no fresh prompt is cheaper absorbed (every preset, query_len 1 to 4096)",
        "zh": "没有哪个新提示词吸收后更省（所有预设，query_len 1 到 4096）"},
    "ex10_not_shown": {"en": "(the engine's answer, not shown: it would be copied)",
                       "zh": "（引擎的答案，不展示：否则会被照抄）"},
    "ex10_answers_returns_dict_every_question": {"en": "answers() returns a dict of every question",
                                                 "zh": "`answers()` 返回包含每道题的 `dict`"},
    "ex10_keys": {"en": "keys {v0}", "zh": "键 {v0}"},
    "ex10_missing": {"en": "missing {missing}", "zh": "缺少 {missing}"},
    "ex11_bool_tensor": {"en": "a tensor of torch.bool", "zh": "`torch.bool` 类型的张量"},
    "ex11_fresh_prompt_queries_keys": {"en": "a fresh prompt: 5 queries, 5 keys",
                                       "zh": "新提示词：5 个 query，5 个 key"},
    "ex11_later_chunk_new_tokens_after": {"en": "a later chunk: 3 new tokens after 4 cached",
                                          "zh": "后续分块：4 个已缓存之后 3 个新 token"},
    "ex11_step_query_over_12_cached": {"en": "D's step: 1 query over 12 cached + itself",
                                       "zh": "D 的那一步：1 个 query，12 个已缓存加它自己"},
    "ex11_random_queries_keys": {"en": "random: {q} queries, {k} keys",
                                 "zh": "随机：{q} 个 query，{k} 个 key"},
    "ex11_colocated_engine_chunked_prefill_budget": {
        "en": "a colocated engine, chunked prefill (budget 5), N = 14",
        "zh": "非分离引擎，分块预填充（预算 5），N = 14"},
    "ex11_one_token_step_under_pcp": {"en": "D's one-token step under PCP = 2, N = 13",
                                      "zh": "PCP = 2 下 D 的一 token 步骤，N = 13"},
    "ex11_inside_forward_mha_one_attention": {
        "en": "inside forward_mha (one attention with your mask): {label}",
        "zh": "在 forward_mha 中（用你的掩码做一次注意力）：{label}"},
    "ex12_random_features": {
        "en": "{mode}, a {n}-token prompt, room {room} under max_model_len, max_tokens "
        "{max_tokens}, {stop}, {params}",
        "zh": "{mode}，{n} 个 token 的提示词，max_model_len 之下余 {room}，max_tokens "
        "{max_tokens}，{stop}，{params}"},
    "ex12_stop_first": {"en": "P's token the first stop token",
                        "zh": "P 的 token 是第一个停止 token"},
    "ex12_stop_later": {"en": "P's token a stop token, not the first",
                        "zh": "P 的 token 是停止 token，但不是第一个"},
    "ex12_stop_no": {"en": "P's token no stop token", "zh": "P 的 token 不是停止 token"},
    "ex12_failed_handoff": {"en": "a failed hand-off (kv_transfer_params None)",
                            "zh": "交接失败（kv_transfer_params 为 None）"},
    "ex12_params_sent": {"en": "P's params sent", "zh": "P 的参数已发出"},
    "ex12_inputs_as_they_were": {
        "en": "prompt, p_tokens and kv_transfer_params as they were given",
        "zh": "`prompt`、`p_tokens` 和 `kv_transfer_params` 保持传入时的样子"},
    "ex12_inputs_changed": {"en": "{what} changed in place", "zh": "{what} 被就地修改"},
    "ex12_token_is_stop_token": {"en": "P's token is a stop token",
                                 "zh": "P 的 token 是停止 token"},
    "ex12_refused_request": {"en": "D refused the request", "zh": "D 拒绝了这个请求"},
    "ex12_never_asked_token_is_whole": {"en": "D never asked: P's token is the whole answer",
                                        "zh": "不需要 D：P 的 token 就是全部答案"},
    "ex12_ran_steps": {"en": "D ran {v0} steps", "zh": "D 运行了 {v0} 步"},
    "ex12_shared": {"en": "shared", "zh": "相同"},
    "ex12_your_prediction_first_step_under": {
        "en": "your prediction: D's first step under {mode}, N = {N}",
        "zh": "你的预测：{mode} 下 D 的第一步，N = {N}"},
    "ex12_live_pdpair_under_your_hand": {
        "en": "a live PDPair under {mode}, N = {N}, {what}, your hand_off",
        "zh": "{mode} 下的真实 PDPair，N = {N}，{what}，用你的 hand_off"},
    "ex12_predictions_mode_computed_before_scheduled": {
        "en": "PREDICTIONS[mode] = (computed before, scheduled, is_prefilling)",
        "zh": "PREDICTIONS[mode] = (之前已算, 调度数, is_prefilling)"},
    "ex12_no_prediction_written": {"en": "no prediction written", "zh": "还没有写预测"},
    "ex12_max_model_len_room_for": {"en": "max_model_len = {room}: room for one token",
                                    "zh": "max_model_len = {room}：只容得下一个 token"},
    "ex13_random_features": {
        "en": "rows (num_computed_tokens, prefill_len) {rows}, routing {routing}",
        "zh": "各行（num_computed_tokens，prefill_len）{rows}，路由 {routing}"},
    "ex13_decode_graph_eligible_step_ms": {
        "en": "decode_graph_eligible={eligible}, step {ms:.4f} ms",
        "zh": "decode_graph_eligible={eligible}，这一步 {ms:.4f} ms"},
    "ex13_decodes_alone": {"en": "{b} decodes alone", "zh": "只有 {b} 个 decode 行"},
    "ex13_decodes_recompute_first_row_over": {
        "en": "{b} decodes + recompute's first row (1 over N - 1 = 4095)",
        "zh": "{b} 个 decode 行 + recompute 的第一行（在 N - 1 = 4095 之上算 1 个）"},
    "ex13_decodes_append_prompt_first_row": {
        "en": "{b} decodes + append_prompt's first row (1 over N of N + 1)",
        "zh": "{b} 个 decode 行 + append_prompt 的第一行（N + 1 中在 N 之上算 1 个）"},
    "ex13_decodes_recompute_first_row_under": {
        "en": "{b} decodes + recompute's first row, under PCP",
        "zh": "{b} 个 decode 行 + recompute 的第一行，开启 PCP"},
    "ex13_decodes_first_token_first_row": {
        "en": "{b} decodes + first_token's first row (a decode), under PCP",
        "zh": "{b} 个 decode 行 + first_token 的第一行（一个 decode 行），开启 PCP"},
    "ex13_decodes_recompute_first_row_model": {
        "en": "{b} decodes + recompute's first row, Model Runner V1",
        "zh": "{b} 个 decode 行 + recompute 的第一行，Model Runner V1"},
    "ex13_one_token_prompt_nothing_cached": {
        "en": "a one-token prompt: nothing cached to decode over",
        "zh": "一 token 提示词：没有可解码的已缓存上下文"},
    "ex13_one_token_prompt_model_runner": {"en": "a one-token prompt, Model Runner V1",
                                           "zh": "一 token 提示词，Model Runner V1"},
    "ex13_random_two_arrivals_over_contexts": {
        "en": "random: two arrivals over contexts near {ctx}, under PCP",
        "zh": "随机：两个新到请求，上下文约 {ctx}，开启 PCP"},
    "ex13_case_routing": {"en": "{name} ({routing})", "zh": "{name}（{routing}）"},
    "ex13_inside_pdlab_sim_design_routing": {
        "en": "inside pdlab sim: --design {design} --routing {routing}, TPOT",
        "zh": "在 pdlab sim 中：--design {design} --routing {routing}，TPOT"},
    "ex14_random_features": {
        "en": "K = {k}, {n} new token(s) over {c} computed, {budget}, {room}, {beside}",
        "zh": "K = {k}，{c} 个已计算 token 之上 {n} 个新 token，{budget}，{room}，{beside}"},
    "ex14_beside_prefill": {"en": "beside a running row mid-prefill",
                            "zh": "旁边有正处于预填充中途的运行中的行"},
    "ex14_beside_running": {"en": "beside a running row", "zh": "旁边有运行中的行"},
    "ex14_alone": {"en": "nothing else scheduled", "zh": "本步没有调度别的行"},
    "ex14_first_step_one_token_over": {
        "en": "D's first step, K = 1, N = 9 (one token over 8 cached)",
        "zh": "D 的第一步，K = 1，N = 9（在 8 个已缓存之上算 1 个）"},
    "ex14_first_step_two_whole_blocks": {"en": "D's first step, K = 2, N = 8 (two whole blocks)",
                                         "zh": "D 的第一步，K = 2，N = 8（正好两块）"},
    "ex14_first_step": {"en": "D's first step, K = 2, N = 3", "zh": "D 的第一步，K = 2，N = 3"},
    "ex14_fully_prefix_cached_prompt": {"en": "a fully prefix-cached prompt, K = 2",
                                        "zh": "全部命中前缀缓存的提示词，K = 2"},
    "ex14_padded_row_does_not_fit": {
        "en": "the padded row does not fit the budget beside a verifying row (budget 5)",
        "zh": "补齐后的行与一个验证行一起放不进预算（预算 5）"},
    "ex14_beside_running_row_that_is": {"en": "beside a running row that is mid-prefill, K = 1",
                                        "zh": "旁边有一个还在预填充中途的运行行，K = 1"},
    "ex14_fresh_one_token_prompts_alone": {
        "en": "fresh one-token prompts: alone, then beside a running row",
        "zh": "全新的一 token 提示词：先单独，再与一个运行中的行一起"},
    "ex14_max_model_len_12_room": {"en": "max_model_len = 12: room for 8 + 3 + the sampled token",
                                   "zh": "max_model_len = 12：容得下 8 + 3 加采样出的 token"},
    "ex14_max_model_len_11_no": {"en": "max_model_len = 11: no room for the padded row",
                                 "zh": "max_model_len = 11：补齐后的行放不下"},
    "ex14_live_pair_on_tiny_model": {
        "en": "a live P/D pair on the tiny model with MTP, K = 2, N = 13",
        "zh": "tiny 模型上开启 MTP 的真实 P/D 对，K = 2，N = 13"},
    "ex14_right_for_args": {"en": "{right!r} for {shown}", "zh": "{shown} 时返回 {right!r}"},
}  # fmt: skip
