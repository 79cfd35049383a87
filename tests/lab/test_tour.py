"""``pdlab tour`` and ``pdlab trace``: every number they print is the trace's.

The tour runs in-process through ``pdlab.cli.main``; each test reads the values it expects
from the saved trace (``--json``), never from the tour's own text.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pdlab.catalog import text
from pdlab.cli import main
from pdlab.disagg.designs import MODES
from pdlab.engine.config import AttentionConfig, ModelConfig
from pdlab.engine.trace import Tracer
from pdlab.sim.kernel_costs import decode_path_cost, prefill_path_cost
from pdlab.ui import tour
from pdlab.ui.fmt import token_char
from pdlab.ui.tour_route import COST_CONTEXTS

CJK = re.compile(r"[\u4e00-\u9fff]")
ESC = "\x1b["


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # Variables that would make rich colour a non-terminal, or narrow its width.
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)


def run_tour(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[str, Tracer]:
    path = tmp_path / "trace.json"
    assert main(["tour", *args, "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert ESC not in out
    return out, Tracer.load(path)


def flat(out: str) -> str:
    """The text with rich's line wrapping undone, for checking sentences."""
    return " ".join(out.split())


def words(key: str, **values: object) -> str:
    """The catalog's English words for ``key`` with ``values``, as :func:`flat` reads them: a
    view's sentence checked by its key and the values it must show, not by its wording."""
    return flat(text("en", key, **values))


def headings(out: str) -> list[str]:
    """The title and chapter headings: lines that are one text between two runs of a
    horizontal-line character (whatever rich draws them with)."""
    return [
        line.strip("─━- ")
        for line in out.splitlines()
        if re.fullmatch(r"[─━-]{3,} .+ [─━-]{3,}", line)
    ]


def rows(out: str) -> list[list[str]]:
    """Every table row of the output as its list of cell texts (the table's vertical
    separators, whatever characters they are, split the cells)."""
    found = []
    for line in out.splitlines():
        parts = re.split(r"\s*[│┃|]\s*", line.strip())
        if len(parts) >= 3:
            found.append([p for p in parts if p != ""])
    return found


def has_row(out: str, *cells: str) -> bool:
    """A table row that starts with these cells."""
    return any(r[: len(cells)] == list(cells) for r in rows(out))


def test_default_tour_runs_every_chapter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tour"]) == 0
    out = capsys.readouterr().out
    assert ESC not in out
    for n in range(1, 8):
        assert f"Chapter {n} ·" in flat(out)
    # the opening counts the chapters the tour then prints
    said = re.search(r"(\d+) chapters\. .*?\(1 to (\d+)\)", flat(out))
    shown = [h for h in headings(out) if h.startswith("Chapter ")]
    assert said and int(said[1]) == int(said[2]) == len(shown)
    assert repr(tour.DEFAULT_PROMPT) in flat(out)
    assert words("equal") in flat(out)


def test_tour_prints_the_traces_values(capsys, tmp_path) -> None:
    out, t = run_tour(capsys, tmp_path)
    p_step = t.first("step", "P")["scheduled"][0]
    n = p_step["num_prompt_tokens"]
    assert f"num_computed_tokens {p_step['num_computed_tokens_before']} → {n}" in flat(out)
    for j, bid in enumerate(p_step["block_ids"][:8]):
        assert has_row(out, str(j), str(bid))  # P's block table: logical block, P block
    finish = t.first("finish", "P")
    assert f"delay_free = {finish['delay_free']}" in flat(out)
    assert f'"remote_block_ids": {finish["kv_transfer_params"]["remote_block_ids"]}' in flat(out)
    x = t.first("kv_transfer", "D")
    for src, dst in list(zip(x["remote_block_ids"], x["local_block_ids"]))[:8]:
        assert has_row(out, str(src), f"→ {dst}")
    assert f"{x['nbytes']} bytes" in flat(out)
    ready = t.first("remote_kv_ready", "D")
    assert ready["num_computed_tokens"] == n - 1
    before = ready["num_computed_tokens_before_adjust"]
    assert words("ch3_ready", step=ready["step"], before=before, n=n, nct=n - 1) in flat(out)
    assert "request.num_computed_tokens = request.num_tokens - 1" in flat(out)  # real source
    hit = t.filter("admit", "local")[1]["num_cached_tokens"]
    assert f"{hit} cached tokens" in flat(out)
    d_tok, p_tok = t.first("sample", "D")["token"], t.first("sample", "P")["token"]
    verdict = text("en", "same" if d_tok == p_tok else "different")
    assert words("ch3_check", d=d_tok, p=p_tok, verdict=verdict) in flat(out)
    outputs = [e["token"] for e in t.filter("sample", "D")]
    assert str(outputs) in flat(out)


@pytest.mark.parametrize("prompt", ["ten bytes!", "twenty-three bytes long"])
def test_n_minus_one_follows_the_prompt(capsys, tmp_path, prompt: str) -> None:
    # the chapters that state N - 1 (3: D's num_computed_tokens; 4: its step), not all seven
    out, t = run_tour(capsys, tmp_path, "--prompt", prompt, "--chapter", "3")
    ready = t.first("remote_kv_ready", "D")
    n, before = ready["num_tokens"], ready["num_computed_tokens_before_adjust"]
    assert n == len(prompt.encode())
    assert words("ch3_ready", step=ready["step"], before=before, n=n, nct=n - 1) in flat(out)
    out, t = run_tour(capsys, tmp_path, "--prompt", prompt, "--chapter", "4")
    assert t.first("remote_kv_ready", "D")["num_tokens"] == n
    assert f"num_computed_tokens = {n - 1}, num_prompt_tokens = {n}" in flat(out)  # chapter 4
    assert f"gather_cache: {n - 1}×" in flat(out)  # the PCP run gathers N - 1 rows


def test_block_size_option(capsys, tmp_path) -> None:
    out, t = run_tour(capsys, tmp_path, "--block-size", "3", "--chapter", "2")
    assert t.meta["block_size"] == 3
    x = t.first("kv_transfer", "D")
    n = t.first("add_request", "D")["num_prompt_tokens"]
    assert len(x["remote_block_ids"]) == -(-n // 3)
    assert "× 3 slots ×" in flat(out)
    assert any("3–5" in r for r in rows(out))


def test_pcp_option_sets_the_main_run(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for the set-ups side by side
    out, t = run_tour(capsys, tmp_path, "--pcp", "2", "--chapter", "4")
    assert {r["prefill_context_parallel_size"] for r in t.meta["routing"].values()} == {2}
    assert {r["treat_short_extends_as_decodes"] for r in t.meta["routing"].values()} == {False}
    first_d = t.filter("route", "D")[0]
    assert first_d["forward"] == "forward_mha" and first_d["is_prefilling"]
    assert has_row(out, "model_runner", "v2", "v2", "v1")
    assert has_row(out, "decode_graph_eligible", "True", "False", "True")
    assert "V2 + PCP 2 (main run)" in flat(out) and "V2 (default) (main run)" not in flat(out)


def test_chapter_4_alone_shows_every_set_up_and_the_fresh_prompt(
    capsys, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for the set-ups side by side
    out, t = run_tour(capsys, tmp_path, "--chapter", "4")
    assert len(headings(out)) == 1 and "Chapter 4" in headings(out)[0]
    for n in (1, 2, 3, 5, 6):
        assert f"Chapter {n} ·" not in flat(out)
    route = t.filter("route", "D")[0]
    n = route["num_prompt_tokens"]
    assert (route["query_len"], route["num_computed_tokens"]) == (1, n - 1)
    assert route["is_prefilling"] and route["region"] == "short_extend"
    assert route["forward"] == "forward_mqa"  # upstream's default
    assert f"query_len = 1, num_computed_tokens = {n - 1}, num_prompt_tokens = {n}" in flat(out)
    assert has_row(out, "is_prefilling", "True", "True", "True")
    assert has_row(out, "region", "short_extend", "short_extend", "short_extend")
    assert has_row(out, "treat_short_extends_as_decodes", "True", "False", "True")
    # V2 names the row; under PCP and V1 there is no such flag.
    assert has_row(out, "prefill_runs_as_decode", "True", "—", "—")
    assert "prefill_runs_as_decode = is_prefilling" not in flat(out)  # pdlab's source, not prose
    # the rule as pdlab's source has it today (an excerpt, so it cannot drift)
    import inspect

    from pdlab.engine.worker.gpu import batch

    (rule,) = [
        ln.strip()
        for ln in inspect.getsource(batch.gather_batch_req_state).splitlines()
        if ln.strip().startswith("runs_as_decode = [")
    ]
    assert " ".join(rule.split()[:8]) in flat(out)
    assert "_forward_prefill" in flat(out) and "MLACommonBaseImpl.forward_mha" in flat(out)
    assert "1 > 1: False" in flat(out) and "OR is_prefilling = True" in flat(out)
    for name in (
        "forward_mha",
        "forward_mqa",
        "gather_cache",
        "kv_b_proj (context)",
        "flash_attn_varlen",
        "merge_attn_states",
        "q_nope @ W_UK_T",
        "mla_decode",
        "o_latent @ W_UV",
    ):
        assert name in flat(out)
    tok = t.first("sample", "D")["token"]
    shown = f"{tok} ({token_char(tok)})"
    assert has_row(out, "first token on D", shown, shown, shown)
    # the default prompt is shorter than FLASH_ATTN_MLA's threshold: a fresh prompt on the
    # decode path, on P's side
    threshold = AttentionConfig("flash_attn_mla").profile.reorder_batch_threshold
    assert n <= threshold and f"reorder_batch_threshold = {threshold}" in flat(out)
    fresh = {"q": n, "t": threshold, "region": "prefill", "forward": "forward_mqa"}
    assert words("ch4_fresh_decode", **fresh) in flat(out)


def test_a_prompt_longer_than_flash_attn_mla_threshold_is_a_prefill(capsys, tmp_path) -> None:
    threshold = AttentionConfig("flash_attn_mla").profile.reorder_batch_threshold
    prompt = "x" * (threshold + 1)
    out, _ = run_tour(capsys, tmp_path, "--prompt", prompt, "--chapter", "4", "--max-tokens", "1")
    fresh = {"q": len(prompt), "t": threshold, "region": "prefill", "forward": "forward_mha"}
    assert words("ch4_fresh_prefill", **fresh) in flat(out)


def test_preset_option_drives_the_cost_chapter(capsys, tmp_path) -> None:
    out, _ = run_tour(capsys, tmp_path, "--chapter", "5", "--preset", "deepseek-v2-lite")
    cfg = ModelConfig.preset("deepseek-v2-lite")
    dims = {"H": cfg.num_attention_heads, "L": cfg.kv_lora_rank, "R": cfg.qk_rope_head_dim}
    assert words("ch5_intro", model=cfg.name, **dims) in flat(out)
    table = [r for r in rows(out) if len(r) == 7 and r[0][0].isdigit()]
    assert [int(r[0].rstrip("K")) * (1024 if r[0].endswith("K") else 1) for r in table] == list(
        COST_CONTEXTS
    )
    for ctx, r in zip(COST_CONTEXTS, table):
        p, d = prefill_path_cost(cfg, ctx), decode_path_cost(cfg, ctx)
        # the printed ratios, rounded for print, agree with the cost model's
        for printed, want in ((r[3], p.flops / d.flops), (r[6], p.bytes / d.bytes)):
            assert float(printed.rstrip("×")) == pytest.approx(want, rel=0.05)
    for name in ("split_decodes_and_prefills", "treat_short_extends_as_decodes", "FLASHMLA"):
        assert name in flat(out)
    assert "vllm/model_executor/layers/attention/mla_attention.py" in flat(out)


def test_lang_zh_is_chinese(capsys, tmp_path) -> None:
    out, t = run_tour(capsys, tmp_path, "--lang", "zh")
    hs = headings(out)
    assert len(hs) == 8 and all(CJK.search(h) for h in hs)
    for n in range(1, 8):
        assert f"第 {n} 章" in flat(out)
    for label in (
        "逻辑块",
        "D 块[槽]",
        "判定",
        "上下文长度",
        "本步调度",
        "输出对比",
        "仍在预填充",
    ):
        assert label in flat(out)
    for english in ("Chapter", "logical block", "first token on D", "computed before"):
        assert english not in flat(out)
    n = t.first("remote_kv_ready", "D")["num_tokens"]
    assert f"num_computed_tokens = {n - 1}" in flat(out)


def test_max_tokens_option(capsys, tmp_path) -> None:
    out, t = run_tour(capsys, tmp_path, "--max-tokens", "3", "--chapter", "6")
    tokens = [e["token"] for e in t.filter("sample", "D")]
    assert len(tokens) == 3 and str(tokens) in flat(out)
    assert "(3 tokens)" in flat(out)


@pytest.mark.triton
def test_triton_backend_option(capsys, tmp_path) -> None:
    from pdlab.kernels import backend

    if not backend.triton_installed():
        pytest.skip("triton is not installed (macOS, or a torch-only install)")
    out, t = run_tour(
        capsys,
        tmp_path,
        "--backend",
        "triton",
        "--prompt",
        "abcdef",
        "--max-tokens",
        "1",
        "--chapter",
        "4",
    )
    assert t.meta["backend"] == "triton"
    assert {k["backend"] for k in t.filter("kernel")} == {"triton"}
    assert "Every set-up gives token" in flat(out)


def test_json_and_plots_options(capsys, tmp_path) -> None:
    out, t = run_tour(capsys, tmp_path, "--plots", str(tmp_path / "png"), "--chapter", "1")
    assert {e["instance"] for e in t} == {"P", "D", "local"}
    assert t.meta["demo"]["prompt"] == tour.DEFAULT_PROMPT
    names = ["block_table.png", "num_computed_tokens.png", "path_costs.png"]
    names += ["designs_cache_grid.png", "designs_timeline.png"]
    names += [f"sim_step_time_{m}.png" for m in MODES] + ["sim_tpot.png"]
    for name in names:
        assert (tmp_path / "png" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {len(names)} plots to {tmp_path / 'png'}: {', '.join(names)}" in flat(out)


def test_chapter_7_states_the_answer_with_the_simulations_numbers(capsys, tmp_path) -> None:
    from pdlab.engine.config import ModelConfig
    from pdlab.sim.profiles import device_profile
    from pdlab.sim.report import run_grid
    from pdlab.sim.simulator import SimConfig
    from pdlab.ui.tour_designs import MTP_BASE, MTP_ROUTINGS, answer_values

    out, _ = run_tour(capsys, tmp_path, "--chapter", "7")
    v3, h200 = ModelConfig.deepseek_v3(), device_profile("H200")
    rows, _ = run_grid(SimConfig(), v3, h200, "h200")
    mtp, _ = run_grid(MTP_BASE, v3, h200, "h200", routings=MTP_ROUTINGS)
    v = answer_values(rows, mtp)
    assert v["v2_tail"] == "p99"  # enough steps for one
    # The answer quotes every one of these numbers: TPOT with and without PCP and MTP, each
    # design's own figure (first_token and hidden_state differ by the lm_head rows), the
    # link-bound share, DeepSeek-V3 as deployed on the H200 profile.
    assert v["gpu"] == "H200" and words("ch7_answer", **v) in flat(out)
    assert words("sim_r_dcp") in flat(out)
    # DeepSeek-V3 as deployed: the tables' caption says how.
    assert "EP144, DP144" in flat(out) and "989 TFLOP/s dense bf16" in flat(out)
    assert all(m in flat(out) for m in MODES) and "= colocated" in flat(out)


def test_prompt_is_printed_as_typed(capsys, tmp_path) -> None:
    out, _ = run_tour(capsys, tmp_path, "--prompt", "[bold]x[/] y", "--chapter", "1")
    assert "'[bold]x[/] y'" in flat(out)


def test_piped_output_has_no_escape_codes(tmp_path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
    }
    out = tmp_path / "tour.txt"
    with out.open("w") as f:
        proc = subprocess.run(
            [sys.executable, "-m", "pdlab.cli", "tour", "--chapter", "3"],
            stdout=f,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "Chapter 3" in text and "\x1b" not in text


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--block-size", "0"], "--block-size"),
        (["--chapter", "8"], "--chapter"),
        (["--chapter", "0"], "--chapter"),
        (["--prompt", ""], "--prompt must not be empty"),
        (["--prompt", "x" * 5000], "max_model_len"),
        (["--preset", "gpt-5"], "--preset"),
        (["--lang", "fr"], "--lang"),
        (["--pcp", "0"], "--pcp"),
        (["--mla-backend", "cutlass"], "--mla-backend"),
        (["--max-tokens", "0"], "--max-tokens"),
        (["--max-tokens", "100000"], "--max-tokens"),
    ],
)
def test_bad_tour_options_exit_2(capsys, args: list[str], needle: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(["tour", *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "pdlab tour: error:" in err and needle in err


def test_trace_prints_the_step_table_and_saves_json(capsys, tmp_path) -> None:
    path = tmp_path / "t.json"
    assert (
        main(
            [
                "trace",
                "--prompt",
                "hello world",
                "--prompt",
                "abc",
                "--block-size",
                "2",
                "--max-tokens",
                "2",
                "--max-num-batched-tokens",
                "8",
                "--json",
                str(path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert ESC not in out
    t = Tracer.load(path)
    assert t.meta["block_size"] == 2 and len(t.filter("add_request", "local")) == 2
    assert "computed before" in flat(out) and "routed to" in flat(out)
    for ev in t.filter("step"):
        for r in ev["scheduled"]:
            assert has_row(
                out,
                "local",
                str(ev["step"]),
                r["req_id"],
                str(r["num_prompt_tokens"]),
                str(r["num_computed_tokens_before"]),
            )
    assert max(r["num_scheduled_tokens"] for e in t.filter("step") for r in e["scheduled"]) <= 8
    assert f"wrote {path}" in flat(out)


def test_trace_pd(capsys, tmp_path) -> None:
    path = tmp_path / "t.json"
    assert main(["trace", "--pd", "--pcp", "2", "--max-tokens", "2", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    t = Tracer.load(path)
    assert {e["instance"] for e in t.filter("step")} == {"P", "D"}
    assert t.first("route", "D")["forward"] == "forward_mha"
    assert "forward_mha" in flat(out) and "P/D" in flat(out)


def test_trace_too_few_blocks_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["trace", "--num-blocks", "2"])
    assert e.value.code == 2
    assert "num_blocks" in capsys.readouterr().err


def test_chapter_5_runs_no_model_and_imports_no_torch():
    """Chapter 5 reads the cost model only (and ``mla_decode``'s split plan, which is plain
    Python: ``kernels/decode_plan.py``): it needs neither torch nor triton."""
    from fresh import loaded_by

    assert loaded_by(["tour", "--chapter", "5"]) == {"torch": False, "triton": False}
