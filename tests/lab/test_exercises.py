"""pdlab exercises: every reference solution passes its grader, every untouched stub fails
it, every slip an exercise lists (and a known-wrong variant of each) fails naming its
mistake, the unhappy-path cases do what they are named for, the seams into the engine are
put back, and the CLI flow (start, check, hint, solution, list; --lang before or after the
action, kept by start) works in a folder of its own, in English and Chinese."""

import json
import re
import textwrap

import pytest

import pdlab.engine.attention.mla_builder as builder_module
import pdlab.engine.worker.gpu.model_runner as runner_module
import pdlab.exercises as ex
import pdlab.kernels as kernels_module
from pdlab.cli import main
from pdlab.engine.attention.backend import CommonAttentionMetadata
from pdlab.engine.attention.mla_attention import MLAAttention
from pdlab.exercises import ex08_decode_kernel, progress
from pdlab.exercises.solutions.ex08_decode_torch import paged_decode
from pdlab.kernels.backend import triton_installed

SEED = 20


def _flat(text):
    """Text with its line breaks and indents (the 80-column wrapping) undone."""
    return " ".join(text.split())


def _write(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


@pytest.mark.parametrize("n", range(1, 15))
def test_reference_solution_passes(n):
    r = ex.check(n, ex.reference(n), seed=SEED, quiet=True)
    assert r.passed, str(r)
    assert r.cases >= 4


@pytest.mark.parametrize("n", range(1, 15))
def test_untouched_stub_fails(n, tmp_path):
    path = ex.start(n, tmp_path)
    r = ex.check(n, path, seed=SEED, quiet=True)
    assert not r.passed
    assert r.failure is not None and r.failure.case


def test_torch_twin_of_exercise_8_passes_where_triton_is_installed_too():
    from pdlab.exercises.base import Grader

    g = Grader(SEED, "en")
    ex08_decode_kernel.TORCH.grade(paged_decode, g)  # raises Mismatch on a failure
    assert g.cases == 5


@pytest.mark.triton
def test_exercise_8_is_the_triton_kernel_where_triton_is_installed():
    assert triton_installed() and ex.get(8) is ex08_decode_kernel.TRITON
    assert ex.get(8).function == "paged_decode_kernel"


WRONG = {
    1: (
        "off_by_one",
        """
        def slot_mapping(block_table, num_computed_tokens, query_lens, block_size):
            return [blocks[p // block_size] * block_size + p % block_size + 1
                    for blocks, c, q in zip(block_table, num_computed_tokens, query_lens)
                    for p in range(c, c + q)]
        """,
    ),
    2: (
        "no_cap",
        """
        from pdlab.engine.core.kv_cache_utils import hash_block_tokens

        def get_computed_blocks(self, request):
            bs, toks, blocks, parent = self.block_size, request.all_token_ids, [], None
            for i in range(request.num_tokens // bs):
                parent = hash_block_tokens(parent, toks[i * bs:(i + 1) * bs])
                b = self.block_pool.get_cached_block(parent, toks[i * bs:(i + 1) * bs])
                if b is None:
                    break
                blocks.append(b)
            return blocks, len(blocks) * bs
        """,
    ),
    3: (
        "recompute_all",
        """
        def _update_waiting_for_remote_kv(self, request):
            if request.request_id not in self.finished_recving_kv_req_ids:
                return False
            self.finished_recving_kv_req_ids.remove(request.request_id)
            self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
            request.num_computed_tokens = 0
            return True
        """,
    ),
    4: (
        "no_context_test",
        """
        def decode_flags(is_prefilling, num_scheduled_tokens, num_computed_prefill_tokens, use_pcp):
            if use_pcp:
                return None, not any(is_prefilling)
            runs = [p and q == 1 for p, q in zip(is_prefilling, num_scheduled_tokens)]
            return runs, all(r or not p for r, p in zip(runs, is_prefilling))
        """,
    ),
    5: (
        "wrong_switch",
        """
        def split_decodes_and_prefills(query_lens, is_prefilling, decode_threshold=1,
                                       require_uniform=False, treat_short_extends_as_decodes=True):
            def pre(i):
                q = query_lens[i]
                p = q > decode_threshold or (require_uniform and q not in (query_lens[0], 0))
                return p or (treat_short_extends_as_decodes and is_prefilling[i])
            nd = next((i for i in range(len(query_lens)) if pre(i)), len(query_lens))
            t = sum(query_lens[:nd])
            return nd, len(query_lens) - nd, t, sum(query_lens) - t
        """,
    ),
    6: (
        "base2",
        """
        import torch

        def merge_attn_states(out_a, lse_a, out_b, lse_b):
            m = torch.maximum(lse_a, lse_b)
            w_a, w_b = torch.exp2(lse_a - m), torch.exp2(lse_b - m)
            t = w_a + w_b
            return (w_a / t)[..., None] * out_a + (w_b / t)[..., None] * out_b, m + torch.log2(t)
        """,
    ),
    7: (
        "latent_scale",
        """
        import torch

        def absorbed_decode(q, kv_c, k_pe, w_kv_b, qk_nope_head_dim, v_head_dim, scale):
            h, n = q.shape[1], qk_nope_head_dim
            w = w_kv_b.view(h, n + v_head_dim, kv_c.shape[-1])
            ql = torch.einsum("thn,hnl->thl", q[..., :n], w[:, :n])
            s = torch.einsum("thl,sl->ths", ql, kv_c)
            s = s + torch.einsum("thr,sr->ths", q[..., n:], k_pe)
            p = torch.softmax(s * (kv_c.shape[-1] + k_pe.shape[-1]) ** -0.5, dim=-1)
            return torch.einsum("thl,hvl->thv", torch.einsum("ths,sl->thl", p, kv_c), w[:, n:])
        """,
    ),
    9: (
        "no_absorb_cost",
        """
        def mla_forms_flops(cfg, query_len, context_len):
            h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
            n, v, q, s = cfg.qk_nope_head_dim, cfg.v_head_dim, query_len, context_len
            pairs = q * s + q * (q + 1) / 2
            naive = (s + q) * 2 * L * h * (n + v) + pairs * 2 * h * (n + R + v)
            return naive, pairs * 2 * h * (2 * L + R)
        """,
    ),
    10: (
        "d_forward_default",
        """
        def answers():
            return {"d_num_computed_tokens": 12, "d_prompt_tokens_computed": 1,
                    "d_is_prefilling": True, "d_forward_default": "forward_mha",
                    "d_forward_pcp2": "forward_mha", "same_tokens_as_colocated": True,
                    "d_prompt_tokens_computed_without_params": 13}
        """,
    ),
    11: (
        "top_left",
        """
        import torch

        def causal_mask(q_len, k_len):
            return torch.ones(q_len, k_len, dtype=torch.bool).tril()
        """,
    ),
}
NOMASK_TORCH = """
    import torch

    def paged_decode(q, kv_cache, block_ids, seq_len, scale, kv_lora_rank, page_size):
        pages = (seq_len + page_size - 1) // page_size
        rows = torch.cat([kv_cache[b] for b in block_ids[:pages]])  # whole pages: NaN slots
        p = torch.softmax((q @ rows.T) * scale, dim=-1)
        return p @ rows[:, :kv_lora_rank], torch.logsumexp((q @ rows.T) * scale, dim=-1)
    """


@pytest.mark.parametrize("n", sorted(WRONG))
def test_known_wrong_variant_fails_naming_its_mistake(n, tmp_path):
    key, source = WRONG[n]
    r = ex.check(n, _write(tmp_path, "mine.py", source), seed=SEED, quiet=True)
    assert not r.passed and r.failure.mistake == key, str(r)
    assert _flat(ex.get(n).mistakes[key]["en"]) in _flat(str(r))


SLIPS = [
    (n, key, lang)
    for n in range(1, 15)
    for i, key in enumerate(ex.get(n).slips)
    for lang in (("en", "zh")[(n + i) % 2],)  # each slip once, the languages alternating
]


def test_every_exercise_lists_at_least_three_slips_with_both_explanations():
    for e in [*ex.exercises(), ex08_decode_kernel.TORCH]:
        assert len(e.slips) >= 3, e.slug
        assert set(e.slips) <= set(e.mistakes), e.slug


@pytest.mark.parametrize(("n", "key", "lang"), SLIPS)
def test_every_listed_slip_fails_naming_its_mistake(n, key, lang, tmp_path):
    r = ex.check(n, _write(tmp_path, "mine.py", ex.get(n).slips[key]), lang, SEED, quiet=True)
    assert not r.passed and r.failure.mistake == key, str(r)
    explained = ex.get(n).mistakes[key][lang]
    assert _flat(explained).replace(" ", "") in _flat(str(r)).replace(" ", "")


@pytest.mark.parametrize("key", sorted(ex08_decode_kernel.TORCH.slips))
def test_every_slip_of_the_torch_twin_of_exercise_8_is_named(key, tmp_path):
    from pdlab.exercises.base import Grader, Mismatch
    from pdlab.exercises.loader import load_function

    source = ex08_decode_kernel.TORCH.slips[key]
    fn = load_function(_write(tmp_path, "mine.py", source), "paged_decode")
    with pytest.raises(Mismatch) as info:
        ex08_decode_kernel.TORCH.grade(fn, Grader(SEED, "en"))
    assert info.value.mistake == key


def test_exercise_3_minus_one_without_the_guard_fails_on_a_short_load(tmp_path):
    """The issue's slip, word for word: no `== num_tokens` test, no failed-load handling."""
    source = """
        def _update_waiting_for_remote_kv(self, request):
            if request.request_id not in self.finished_recving_kv_req_ids:
                return False
            self.finished_recving_kv_req_ids.remove(request.request_id)
            self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
            request.num_computed_tokens = request.num_computed_tokens - 1
            return True
        """
    r = ex.check(3, _write(tmp_path, "mine.py", source), seed=SEED, quiet=True)
    assert not r.passed and r.failure.mistake == "unguarded_minus_one", str(r)
    assert "short of the prompt" in r.failure.case


def test_returning_ready_before_the_kv_arrived_is_named(tmp_path):
    source = """
        def _update_waiting_for_remote_kv(self, request):
            self.finished_recving_kv_req_ids.discard(request.request_id)
            request.num_computed_tokens = request.num_tokens - 1
            return True
        """
    r = ex.check(3, _write(tmp_path, "mine.py", source), seed=SEED, quiet=True)
    assert not r.passed and r.failure.mistake == "ready_too_early", str(r)
    assert "slow transfer" in r.failure.case


def test_decode_kernel_reading_past_seq_len_is_named(tmp_path):
    from pdlab.exercises.base import Grader, Mismatch
    from pdlab.exercises.loader import load_function

    fn = load_function(_write(tmp_path, "mine.py", NOMASK_TORCH), "paged_decode")
    with pytest.raises(Mismatch) as info:
        ex08_decode_kernel.TORCH.grade(fn, Grader(SEED, "en"))
    assert info.value.mistake == "nan"


def test_seams_are_put_back_even_when_the_learner_raises(tmp_path):
    before = (
        CommonAttentionMetadata.__dict__["from_batch"],
        builder_module.split_decodes_and_prefills,
        kernels_module.merge_attn_states,
        runner_module.gather_batch_req_state,
        MLAAttention.__dict__["forward_mqa"],
        MLAAttention.__dict__["forward_mha"],
        kernels_module.mla_decode,
    )
    raising = {1: "slot_mapping", 4: "decode_flags", 5: "split_decodes_and_prefills"}
    for n, name in raising.items():
        path = _write(tmp_path, f"e{n}.py", f"def {name}(*a, **k):\n    raise KeyError('x')\n")
        r = ex.check(n, path, seed=SEED, quiet=True)
        assert not r.passed and "KeyError" in r.failure.raised
        assert f"e{n}.py:2" in r.failure.raised  # the learner's file and line
    for n in (6, 7, 8, 11):
        ex.check(n, ex.start(n, tmp_path / str(n)), seed=SEED, quiet=True)
    after = (
        CommonAttentionMetadata.__dict__["from_batch"],
        builder_module.split_decodes_and_prefills,
        kernels_module.merge_attn_states,
        runner_module.gather_batch_req_state,
        MLAAttention.__dict__["forward_mqa"],
        MLAAttention.__dict__["forward_mha"],
        kernels_module.mla_decode,
    )
    assert after == before


def test_learner_error_inside_d_scheduler_names_the_file_and_line(tmp_path):
    path = _write(
        tmp_path,
        "mine.py",
        """
        def _update_waiting_for_remote_kv(self, request):
            return self.no_such_attribute
        """,
    )
    r = ex.check(3, path, seed=SEED, quiet=True)
    assert "AttributeError" in r.failure.raised and "mine.py:3" in r.failure.raised


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("def slot_mapping(:\n", "mine.py:1: syntax error"),
        ("import no_such_module_here\n", "ModuleNotFoundError"),
        ("def other():\n    pass\n", "no function named `slot_mapping`"),
        ("slot_mapping = 3\n", "`slot_mapping` is not a function"),
    ],
)
def test_bad_file_is_one_line(tmp_path, capsys, source, needle):
    path = _write(tmp_path, "mine.py", source)
    with pytest.raises(SystemExit) as info:
        main(["exercises", "check", "1", str(path)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_flow_start_check_fail_fix_pass(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["exercises", "start", "3"]) == 0
    stub = tmp_path / "ex03_remote_kv.py"
    assert "Exercise 3" in stub.read_text(encoding="utf-8")
    solution = ex.solution_text(3)
    without = solution.replace(
        "    if request.num_computed_tokens == request.num_tokens:\n"
        "        request.num_computed_tokens = request.num_tokens - 1\n",
        "",
    )
    assert without != solution
    stub.write_text(without, encoding="utf-8")
    capsys.readouterr()
    assert main(["exercises", "check", "3", "--seed", "1"]) == 1
    out = capsys.readouterr().out
    assert ex.get(3).mistakes["no_minus_one"]["en"].split(":")[0] in out
    assert "nothing to run" in out  # what stopped D, in the grader's words
    assert "must leave" not in out  # the engine's own message would hand over the fix
    assert "steps" in out and "13" in out  # the step table of the run
    assert json.loads((tmp_path / progress.FILE_NAME).read_text())["passed"] == []
    stub.write_text(solution, encoding="utf-8")
    assert main(["exercises", "check", "3", "--seed", "1"]) == 0
    assert "PASS" in capsys.readouterr().out
    state = progress.load(tmp_path)
    assert state.started == [3] and state.passed == [3]
    assert main(["exercises", "list"]) == 0
    listing = capsys.readouterr().out
    row = next(line for line in listing.splitlines() if "K/V arrived" in line)
    assert "passed once" in row and "pass" in row.split("passed once")[1]
    stub.write_text(without, encoding="utf-8")  # the file breaks again: list says so
    assert main(["exercises", "check", "3", "--seed", "1"]) == 1
    capsys.readouterr()
    assert main(["exercises", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "K/V arrived" in line)
    assert "passed once" in row and "FAIL" in row
    assert progress.load(tmp_path).passed == [3] and progress.load(tmp_path).last_result(3) is False


def test_hints_one_at_a_time_and_solution_asks_first(tmp_path, monkeypatch, capsys):
    import io

    hints = ex.get(2).hints["en"]
    for i in range(len(hints) + 1):
        assert main(["exercises", "--dir", str(tmp_path), "hint", "2"]) == 0
        assert _flat(hints[min(i, len(hints) - 1)]) in _flat(capsys.readouterr().out)
    assert progress.load(tmp_path).hints_used(2) == len(hints)
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(["exercises", "solution", "2"]) == 0
    assert "def get_computed_blocks" not in capsys.readouterr().out
    assert main(["exercises", "solution", "2", "--yes"]) == 0
    assert "def get_computed_blocks" in capsys.readouterr().out


def test_start_keeps_the_language_and_lang_goes_after_the_action_too(tmp_path, monkeypatch,
                                                                    capsys):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    assert main(["exercises", "--lang", "zh", "start", "3"]) == 0
    assert progress.load(tmp_path).lang == "zh"
    capsys.readouterr()
    assert main(["exercises", "check", "3", "--seed", "1"]) == 1  # no --lang: the folder's
    assert "未通过" in capsys.readouterr().out
    assert main(["exercises", "check", "3", "--lang", "en", "--seed", "1"]) == 1
    assert "FAIL in case" in capsys.readouterr().out
    assert main(["exercises", "list", "--lang", "zh"]) == 0
    assert "上次检查" in capsys.readouterr().out


def test_a_file_that_is_not_python_is_named_as_such(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# notes\n", encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["exercises", "check", "3", str(readme)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "is not a Python file" in err
    assert "start N" not in err and "start 3" in err
    assert len(err.strip().splitlines()) == 1


def test_chinese_statement_hint_and_feedback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["exercises", "--lang", "zh", "start", "6"]) == 0
    assert "练习 6" in (tmp_path / "ex06_merge.py").read_text(encoding="utf-8")
    assert main(["exercises", "--lang", "zh", "check", "6", "--seed", "2"]) == 1
    out = capsys.readouterr().out
    assert "未通过" in out and "桩函数还没有实现" in out
    assert main(["exercises", "--lang", "zh", "hint", "6"]) == 0
    assert _flat(ex.get(6).hints["zh"][0])[:20] in _flat(capsys.readouterr().out)


def test_every_exercise_has_both_languages_and_fits_80_columns():
    from rich.cells import cell_len

    for e in ex.exercises():
        for lang in ("en", "zh"):
            assert e.title[lang] and e.hints[lang] and e.statement[lang]
            assert all(set(m) == {"en", "zh"} for m in e.mistakes.values())
            statement = ex.stub_text(e.number, lang).split('\n"""\n')[0]
            assert max(cell_len(line) for line in statement.splitlines()) <= 80
            # nothing lost in the re-wrapping
            assert (
                _flat(statement)
                .replace(" ", "")
                .endswith(_flat(e.statement[lang]).replace(" ", "")[-30:])
            )


def _code(source):
    """``source``'s code without its docstrings and comments (``ast`` drops comments)."""
    import ast

    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _prose(source):
    """The docstrings and comments of ``source``."""
    import ast
    import io
    import re
    import tokenize

    tree = ast.parse(source)
    docs = [ast.get_docstring(n) or "" for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))]  # fmt: skip
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    comments = [  # a linter's directive is not prose: what follows it is
        re.sub(r"#\s*noqa: [A-Z0-9, ]+( - )?", "# ", t.string)
        for t in tokens
        if t.type == tokenize.COMMENT
    ]
    return "\n".join(docs + comments)


def _cjk(text):
    return any(ord(c) > 0x2E80 for c in text)


def _both(kind, name):
    """The bilingual source of a stub or solution and its English and Chinese renderings."""
    import importlib.resources

    from pdlab.exercises.bilingual import render

    src = importlib.resources.files(f"pdlab.exercises.{kind}").joinpath(name).read_text("utf-8")
    return src, render(src, "en"), render(src, "zh")


def test_one_source_renders_either_language():
    from pdlab.exercises.bilingual import render

    src = (
        "def f(x):\n"
        '    """Add one.\n\n    Twice."""\n'
        '    # zh: """加一。\n    # zh:\n    # zh: 两次。"""\n'
        "    # Why: one.\n"
        "    # zh: 为什么：一。\n"
        "    return x + 1  # the sum\n"
        "    # zh: 和\n"
    )
    assert render(src, "en") == (
        'def f(x):\n    """Add one.\n\n    Twice."""\n    # Why: one.\n'
        "    return x + 1  # the sum\n"
    )
    assert render(src, "zh") == (
        'def f(x):\n    """加一。\n\n    两次。"""\n    # 为什么：一。\n    return x + 1  # 和\n'
    )
    with pytest.raises(ValueError, match="lang='fr' is invalid"):
        render(src, "fr")


def test_chinese_stubs_are_the_same_code_with_chinese_docstrings(tmp_path):
    from rich.cells import cell_len

    for e in [*ex.exercises(), ex08_decode_kernel.TORCH, ex08_decode_kernel.TRITON]:
        src, en, zh = _both("stubs", e.file_name)
        # one source: the code the learner gets in either language is the source's own
        assert _code(src) == _code(en) == _code(zh), e.slug
        assert _cjk(zh) and not _cjk(en), e.slug
        assert max(cell_len(line) for line in zh.splitlines()) <= 100, e.slug
    path = ex.start(3, tmp_path, lang="zh")
    assert "移除" in path.read_text(encoding="utf-8").split('"""\n\n', 1)[1]
    path = ex.start(3, tmp_path / "en")
    assert not _cjk(path.read_text(encoding="utf-8"))


def test_chinese_solutions_are_the_same_code_with_chinese_comments():
    import importlib.resources

    from rich.cells import cell_len

    en_dir = importlib.resources.files("pdlab.exercises.solutions")
    names = {f.name for f in en_dir.iterdir() if f.name.startswith("ex")}
    for name in names:
        src, en, zh = _both("solutions", name)
        assert _code(src) == _code(en) == _code(zh), name
        assert _cjk(zh) and not _cjk(en), name
        assert max(cell_len(line) for line in zh.splitlines()) <= 100, name
        # every comment is in Chinese, but for a bare shape such as "# int32 [B]"
        for comment in _prose(zh).splitlines():
            english = re.findall(r"\b[A-Za-z]{3,}\b", re.sub(r"`[^`]*`|\[[^\]]*\]", "", comment))
            assert any(ord(c) > 0x2E80 for c in comment) or not english, (name, comment)
    for e in [*ex.exercises(), ex08_decode_kernel.TORCH, ex08_decode_kernel.TRITON]:
        assert e.file_name in names, e.slug
    _, en, zh = _both("solutions", "ex03_remote_kv.py")
    assert ex.solution_text(3, "zh") == zh and "最终隐藏状态" in zh
    assert ex.solution_text(3) == en and "final hidden state" in en


def test_solution_speaks_the_learners_language(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["exercises", "solution", "3", "--yes", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert "练习 3 的参考答案" in out and "最终隐藏状态" in out and "hidden state" not in out
    assert "def _update_waiting_for_remote_kv" in out
    assert main(["exercises", "solution", "3", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "final hidden state" in out and not re.search("[\u4e00-\u9fff]", out)
    assert main(["exercises", "--lang", "zh", "start", "3"]) == 0
    capsys.readouterr()
    assert main(["exercises", "solution", "3", "--yes"]) == 0  # no --lang: the folder's
    out = capsys.readouterr().out
    assert "最终隐藏状态" in out and "hidden state" not in out
    assert main(["exercises", "solution", "3", "--yes", "--lang", "en"]) == 0
    assert "final hidden state" in capsys.readouterr().out


def test_chinese_texts_use_the_glossary_terms():
    from glossary_rule import violations

    from pdlab.catalog.exercises import TEXT_EXERCISES
    from pdlab.exercises import ex10_quiz

    texts = {f"words[{k!r}]": v["zh"] for k, v in TEXT_EXERCISES.items()}
    texts |= {f"quiz {k}": v["zh"] for k, v in ex10_quiz._QUESTIONS.items()}
    import importlib.resources

    for kind in ("stubs", "solutions"):  # what a learner reads: docstrings and comments
        for f in importlib.resources.files(f"pdlab.exercises.{kind}").iterdir():
            if f.name.startswith("ex"):
                texts[f"{kind} (zh) {f.name}"] = _prose(_both(kind, f.name)[2])
    for e in [*ex.exercises(), ex08_decode_kernel.TORCH, ex08_decode_kernel.TRITON]:
        texts[f"{e.slug} title"] = e.title["zh"]
        texts[f"{e.slug} statement"] = e.statement["zh"]
        texts |= {f"{e.slug} hint {i}": h for i, h in enumerate(e.hints["zh"])}
        texts |= {f"{e.slug} mistake {k}": m["zh"] for k, m in e.mistakes.items()}
    from pdlab.exercises.notebook_checks import NOTEBOOKS

    for nb, (_, questions) in NOTEBOOKS.items():
        texts |= {f"notebook {nb} {q.key}": q.text["zh"] + "\n" + q.why["zh"] for q in questions}
    bad = {where: v for where, t in texts.items() if (v := violations(t))}
    assert not bad


def test_bad_exercise_number_is_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["exercises", "hint", "15"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "exercise=15 is invalid" in err


def test_damaged_progress_file_is_set_aside(tmp_path):
    (tmp_path / progress.FILE_NAME).write_text("{not json", encoding="utf-8")
    assert progress.load(tmp_path).passed == []
    assert (tmp_path / (progress.FILE_NAME + ".bad")).exists()


def test_the_preemption_cases_do_preempt():
    """The cases named for preemption (exercises 1 and 2) run an engine that preempts."""
    from pdlab.engine.request import SamplingParams
    from pdlab.engine.trace import Tracer
    from pdlab.exercises import engine_runs as er
    from pdlab.exercises.base import Grader
    from pdlab.exercises.ex02_computed_blocks import _engine_run

    tracer = Tracer()
    engine = er.colocated(tracer=tracer, cache={"num_blocks": 10})
    engine.generate([er.prompt_of(13), er.prompt_of(14, salt=1)], SamplingParams(max_tokens=8))
    assert tracer.filter("preempt")
    a = er.prompt_of(13, salt=SEED % 5)
    other = [(t + 101) % 256 for t in a]
    *_, tracer, free = _engine_run(None, Grader(SEED, "en"), [a, a[:4] + other[4:]], True)
    assert tracer.filter("preempt") and free == 10


def test_exercise_3_short_load_case_loads_short():
    """The fault behind exercise 3's short-load case: D's first step starts after the
    blocks that loaded, not at N - 1."""
    from pdlab.exercises.engine_runs import prompt_of
    from pdlab.exercises.ex03_remote_kv import _reference

    got = _reference((tuple(prompt_of(13)),), 0, 2)
    assert got["rows"][0][1:] == (8, 5)  # 2 blocks of 4 loaded, 5 tokens computed on D


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_start_into_a_file_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys, lang):
    """``start N FILE`` (a file where the folder goes): exit 2, one error line naming DIR,
    the file untouched and no progress file beside it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("mine")
    with pytest.raises(SystemExit) as exit_:
        main(["exercises", "start", "3", "afile", "--lang", lang])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "DIR='afile'" in err and "Traceback" not in err and "Errno" not in err
    assert (tmp_path / "afile").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
