"""``lang="zh"`` everywhere a trace is shown: ``pdlab trace`` and ``pdlab pd`` with
``--lang zh``, the trace panels and the step player, the block pool, the explorer's cost
table and the plots. Each view's words are checked against text.py's Chinese entries (and the
English ones are checked absent); every value is read from the run's own trace."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from pdlab.catalog import text
from pdlab.cli import main
from pdlab.demo import Demo, run_demo
from pdlab.disagg.pair import PDPair
from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from pdlab.engine.request import SamplingParams
from pdlab.engine.trace import Tracer
from pdlab.ui import plots
from pdlab.ui.console import _STEP_COLUMNS, render_pd_result
from pdlab.ui.pd_explorer import cost_html
from pdlab.ui.trace_views import StepPlayer, timeline_html, trace_html
from pdlab.ui.widgets import BlockPoolExplorer

STEP_HEADERS = [key for key, _ in _STEP_COLUMNS]  # the step table's full column headers


def _plain(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html).replace("&gt;", ">").replace("&lt;", "<")


@pytest.fixture(scope="module")
def run() -> Demo:
    return run_demo("hello, trace", block_size=4, max_tokens=3)


def test_pdlab_trace_lang_zh(tmp_path, capsys) -> None:
    path = tmp_path / "t.json"
    code = main(
        ["trace", "--lang", "zh", "--max-tokens", "3", "--prompt", "你好", "--json", str(path)]
    )
    assert code == 0
    out = capsys.readouterr().out
    for key in STEP_HEADERS:
        assert text("zh", key) in out
    assert text("en", "st_computed_before") not in out and "one engine" not in out
    assert text("zh", "v_one_engine") in out
    assert text("zh", "wrote", path=path) in out.replace("\n", "")
    trace = Tracer.load(path)
    assert trace.step_rows()
    for r in trace.step_rows():  # every step of the trace is a row of the table, in order
        cells = [
            r["step"],
            r["req_id"],
            r["num_prompt_tokens"],
            r["num_computed_tokens_before"],
            r["num_scheduled_tokens"],
            r["num_computed_tokens_after"],
            r["forward"],
        ]
        assert re.search(r"\s+│\s+".join(re.escape(str(c)) for c in cells), out), r


def test_pdlab_pd_lang_zh(capsys) -> None:
    prompt = "把最后一个 token 再算一遍"
    code = main(["pd", "--procs", "1", "--lang", "zh", "--max-tokens", "2", "--prompt", prompt])
    assert code == 0
    out = capsys.readouterr().out
    for key in ("v_moved", "v_col_p_blocks", "v_col_d_blocks", "v_col_bytes", "v_col_ok"):
        assert text("zh", key) in out
    assert text("zh", "v_instance", inst="D") in out and "instance D" not in out
    n = len(prompt.encode("utf-8"))  # the byte tokenizer: one token per byte
    arrived = text("zh", "v_arrived", req="req-0", n=n, nct=n - 1, N=n)
    assert arrived in out.replace("\n", "")


def test_render_pd_result_reads_the_trace() -> None:
    pair = PDPair(ModelConfig.tiny(), CacheConfig(block_size=4), SchedulerConfig())
    outs = pair.generate(["abcdefghij"], SamplingParams(max_tokens=2))
    outputs = {o.request_id: {"output_token_ids": o.output_token_ids, "text": o.text} for o in outs}
    console = Console(record=True, width=200)
    assert render_pd_result(pair.tracer, ["abcdefghij"], outputs, {}, console, lang="zh") == 0
    out = console.export_text()
    moved = pair.tracer.first("kv_transfer", "D")
    assert str(moved["nbytes"]) in out and text("zh", "v_yes") in out
    ready = pair.tracer.first("remote_kv_ready", "D")
    line = text(
        "zh",
        "v_arrived",
        req=ready["req_id"],
        n=ready["num_computed_tokens_before_adjust"],
        nct=ready["num_computed_tokens"],
        N=ready["num_tokens"],
    )
    assert line in out
    assert text("zh", "v_pd_run", transport=pair.tracer.meta.get("transport", "in-process")) in out


def test_trace_panels_and_step_player_in_chinese(run: Demo) -> None:
    html = _plain(trace_html(run.trace, "D", lang="zh"))
    for key in ("w_step", "w_event", "w_details"):
        assert text("zh", key) in html
    assert "details" not in html
    for r in run.trace.step_rows("D"):
        row = text(
            "zh",
            "v_schedule_row",
            req=r["req_id"],
            before=r["num_computed_tokens_before"],
            after=r["num_computed_tokens_after"],
            n=r["num_scheduled_tokens"],
            N=r["num_prompt_tokens"],
            blocks=r["block_ids"],
        )
        assert row in html
    for s in run.trace.filter("sample", "D"):
        assert (
            text("zh", "v_sample_row", req=s["req_id"], tok=s["token"], pos=s["position"]) in html
        )
    assert text("zh", "v_kernels_layer", layer=0) in html

    player = StepPlayer(run.trace, "D", lang="zh")
    step = player.steps[0]
    total = run.trace.first("step", "D", step=step)["total_num_scheduled_tokens"]
    title = _plain(player.title.value)
    assert text("zh", "v_player_title", inst="D", step=step) in title
    assert f"调度 {total} 个 token" in title and "engine step" not in title
    assert text("zh", "v_sampled") in _plain(player.table.value)

    grid = _plain(timeline_html(run.trace, "local", lang="zh"))
    assert text("zh", "v_tokens") in grid and text("zh", "w_step") in grid


def test_block_pool_and_cost_table_in_chinese() -> None:
    pool = BlockPoolExplorer(block_size=4, num_blocks=6, lang="zh")
    pool.add("abcdefgh")
    pool.step()
    view = _plain(pool.pool_html.value) + _plain(pool.tables_html.value)
    for key in ("w_block_table", "w_status", "w_slots_last", "w_cached_mark"):
        assert text("zh", key) in view
    assert text("zh", "w_block_n", id=0) in view and "block table" not in view

    cfg = ModelConfig.preset("deepseek-v3")
    table = _plain(cost_html("deepseek-v3", 10, "forward_mqa", lang="zh"))
    for key in ("w_flops_per_layer", "w_bytes_per_layer"):
        assert text("zh", key) in table
    assert text("zh", "w_flops_all", n=cfg.num_hidden_layers) in table
    assert "per layer" not in table


def test_plots_in_chinese(run: Demo) -> None:
    first = run.trace.step_numbers("D")[0]
    ax = plots.plot_block_table(run.trace, "D", lang="zh").axes[0]
    assert ax.get_title() == text("zh", "plot_bt_title", inst="D", step=first)
    assert ax.get_ylabel() == text("zh", "plot_bt_y")
    ax = plots.plot_num_computed_tokens(run.trace, lang="zh").axes[0]
    assert (ax.get_xlabel(), ax.get_title()) == (
        text("zh", "plot_nct_x"),
        text("zh", "plot_nct_title"),
    )
    cfg = ModelConfig.preset("deepseek-v3")
    a1, a2 = plots.plot_path_costs(cfg, [64, 128], lang="zh").axes
    assert a1.get_title() == text("zh", "plot_flops_title", model=cfg.name)
    assert a2.get_ylabel() == text("zh", "plot_bytes_y")
    labels = [t.get_text() for t in a1.get_legend().get_texts()]
    assert labels == [text("zh", "plot_pf_pcp"), text("zh", "plot_dc_default")]
    font = plots.cjk_font()
    if font is not None:  # the Chinese glyphs come from a CJK font when one is installed
        assert a1.title.get_fontfamily()[0] == font


def test_plots_without_a_cjk_font_are_labelled_in_english(run: Demo, monkeypatch) -> None:
    monkeypatch.setattr(plots, "cjk_font", lambda: None)
    assert plots.plot_lang("zh") == "en" and plots.plot_lang("en") == "en"
    ax = plots.plot_num_computed_tokens(run.trace, lang="zh").axes[0]
    assert ax.get_xlabel() == text("en", "plot_nct_x")
    with pytest.raises(ValueError, match="lang='fr'"):
        plots.plot_num_computed_tokens(run.trace, lang="fr")


def test_what_the_chinese_views_print_follows_the_glossary(monkeypatch, capsys) -> None:
    """Every word-table string the Chinese tour, ``pdlab sim`` and ``pdlab trace`` print,
    with its values filled in (the routing reason, the backend, a path), passes the
    glossary's rule (``tests/contracts/test_glossary.py``)."""
    from glossary_rule import violations

    from pdlab.catalog import TEXT

    printed: list[tuple[str, str]] = []

    class Recorded(str):
        def format(self, *args: object, **kwargs: object) -> str:
            out = str.format(self, *args, **kwargs)
            printed.append((self.key, out))
            return out

    for key, entry in TEXT.items():
        r = Recorded(entry["zh"])
        r.key = key
        monkeypatch.setitem(entry, "zh", r)
    monkeypatch.setenv("PDLAB_GPU", "h200")
    assert main(["tour", "--lang", "zh", "--no-pager"]) == 0
    assert main(["sim", "--lang", "zh", "--duration", "0.2", "--num-speculative-tokens", "1"]) == 0
    assert main(["trace", "--lang", "zh", "--max-tokens", "2", "--prompt", "你好"]) == 0
    capsys.readouterr()
    keys = {k for k, _ in printed}
    assert {"ch4_intro", "ch4_why_pcp", "ch7_answer", "sim_caption", "pf_env"} <= keys
    bad = {f"{k}: {out[:60]}": v for k, out in printed if (v := violations(out))}
    assert bad == {}, "\n".join(f"{k}: {'; '.join(v)}" for k, v in bad.items())


def test_chinese_views_wrap_without_line_start_punctuation(monkeypatch, capsys) -> None:
    """The Chinese tour, ``pdlab sim`` and ``pdlab trace``, wrapped at 80 columns, never
    start a line with closing punctuation (the typography rule of
    ``tests/contracts/test_glossary.py``)."""
    from glossary_rule import line_start_punctuation

    monkeypatch.setenv("PDLAB_GPU", "h200")
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["tour", "--lang", "zh", "--no-pager"]) == 0
    assert main(["sim", "--lang", "zh", "--duration", "0.2", "--num-speculative-tokens", "1"]) == 0
    assert main(["trace", "--lang", "zh", "--max-tokens", "2", "--prompt", "你好"]) == 0
    out = capsys.readouterr().out
    assert "从提问时到现在" in out  # the tour's then-and-now section, in Chinese
    assert line_start_punctuation(out) == []
