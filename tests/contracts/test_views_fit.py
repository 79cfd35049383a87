"""Every console view reads whole at 80 columns and at 120, in English and Chinese.

Each view is rendered into a rich ``Console(width=W, record=True)``; no line may be wider
than W cells (rich's cell width: a CJK character is two), no word may end in rich's "…",
and the cells a learner reads (the path, the region, the counts, the token) must each
appear whole, all of one row on one line. The expected cells come from the trace (or the
result the view shows), not from the view's formatting code.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from pdlab.catalog import text
from pdlab.cli import build_parser
from pdlab.cli import tour as cli_tour
from pdlab.demo import run_demo
from pdlab.disagg.pair import PDPair
from pdlab.ui import tour, tour_kv, tour_route
from pdlab.ui.console import render_pd_result, step_table

WIDTHS = (80, 120)


# An identifier (it has an underscore) and a number followed, on the next line, by a unit.
IDENT = re.compile(r"(?<![\w.])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w])")
STRANDED = re.compile(r"\d[ \t]*\n[ \t│┃]*(?:[kMGTPµmn]?(?:s|B|FLOPs?))(?![\w/])")


def _rendered(width: int, show) -> str:
    c = Console(width=width, record=True, file=io.StringIO(), highlight=False)
    show(c)
    return c.export_text()


def render(width: int, show) -> str:
    """The view at ``width``, checked: no line wider, no value cut, no unit alone on a line,
    and every identifier the view shows (read off it at a width where nothing wraps) whole
    on one line, in both languages (Chinese has no spaces to break at)."""
    out = _rendered(width, show)
    for line in out.splitlines():
        assert cell_len(line) <= width, f"{cell_len(line)} > {width}: {line!r}"
    cut = re.search(r"\w…", out)
    assert cut is None, f"a value is cut: {out[max(0, cut.start() - 40) : cut.end() + 10]!r}"
    unit = STRANDED.search(out)
    assert unit is None, f"a unit is stranded: {out[max(0, unit.start() - 40) : unit.end()]!r}"
    wide = _rendered(2000, show)
    whole = {m for line in out.splitlines() for m in IDENT.findall(line)}
    split = sorted(i for i in set(IDENT.findall(wide)) - whole if cell_len(i) <= width - 8)
    assert not split, f"identifiers split across lines at {width}: {split}"
    return out


def row_line(out: str, *cells: object) -> str:
    """The line holding every cell, each whole and in this order."""
    pattern = r".*?".join(rf"(?<![\w.]){re.escape(str(c))}(?![\w])" for c in cells)
    found = [ln for ln in out.splitlines() if re.search(pattern, ln)]
    assert found, f"no line holds {cells} whole:\n{out}"
    return found[0]


def check_step_rows(out: str, trace, instance: str | None) -> None:
    for r in trace.step_rows(instance):
        sampled = () if r["sampled"] is None else (r["sampled"],)
        row_line(
            out,
            r["step"],
            r["req_id"],
            r["num_prompt_tokens"],
            r["num_computed_tokens_before"],
            r["num_scheduled_tokens"],
            r["num_computed_tokens_after"],
            r["forward"],
            *sampled,
        )


@pytest.fixture(scope="module")
def demo():
    return run_demo(tour.DEFAULT_PROMPT, compare=True)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width", WIDTHS)
def test_tour_chapters_read_whole(demo, width, lang) -> None:
    from pdlab.engine.config import ModelConfig

    shows = {
        1: lambda c: tour_kv.chapter1(c, demo, lang),
        2: lambda c: tour_kv.chapter2(c, demo, lang),
        3: lambda c: tour_kv.chapter3(c, demo, lang),
        4: lambda c: tour_route.chapter4(c, demo, lang),
        5: lambda c: tour_route.chapter5(c, ModelConfig.preset("deepseek-v3"), lang),
        6: lambda c: tour_route.chapter6(c, demo, lang),
    }
    out = {n: render(width, show) for n, show in shows.items()}
    t, rid = demo.trace, demo.request_id
    # chapter 1: P's block table, block by block (logical index, physical block)
    blocks = t.steps("P", rid)[-1][1]["block_ids"]
    for j in (0, len(blocks) - 1):
        row_line(out[1], j, blocks[j])
    # chapter 2: every block P sent and the D block it went into
    x = t.first("kv_transfer", "D", req_id=rid)
    for p_block, d_block in list(zip(x["remote_block_ids"], x["local_block_ids"]))[:8]:
        row_line(out[2], p_block, d_block)
    # chapter 4: each run's routing values, label and value on one line
    for trace in (demo.trace, demo.other_trace):
        ev, _ = trace.steps("D", rid)[0]
        route = trace.route_of("D", rid, ev["step"])
        for key in ("region", "treat_short_extends_as_decodes", "prefill_context_parallel_size"):
            row_line(out[4], key, route[key])
        row_line(out[4], route["path"], route["forward"])
    # chapter 6: D's steps, one row each, and the three runs' token ids
    check_step_rows(out[6], t, "D")
    for tokens in (demo.pd_tokens, demo.other_tokens, demo.colocated_tokens):
        assert ", ".join(map(str, tokens)) in out[6]
    # wider shows more: the step table's full headers at 120, a legend of short ones at 80
    if width == 120:
        assert text(lang, "st_computed_before") in out[6]
    else:
        assert text(lang, "st_legend").strip() in out[6]


@pytest.fixture(scope="module")
def designs_and_sim():
    from dataclasses import replace

    from pdlab.engine.config import CacheConfig, ModelConfig
    from pdlab.sim.profiles import device_profile
    from pdlab.sim.report import run_grid
    from pdlab.sim.simulator import SimConfig
    from pdlab.ui.designs_view import compare_designs

    rows = compare_designs([list(b"Why run it twice?")], ModelConfig.tiny(), CacheConfig())
    profile = device_profile("H200")
    base = replace(SimConfig(), duration_s=0.2)
    sim_rows, _ = run_grid(base, ModelConfig.deepseek_v3(), profile, "h200")
    return rows, sim_rows, profile


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width", WIDTHS)
def test_designs_and_sim_tables_read_whole(designs_and_sim, width, lang) -> None:
    """``pdlab pd --compare-designs``, chapter 7 and ``pdlab sim``: each design's values
    whole (a stacked layout keeps the values on their lines and wraps the labels)."""
    from pdlab.ui.designs_view import designs_table
    from pdlab.ui.sim_report import sim_table

    rows, sim_rows, profile = designs_and_sim
    out = render(width, lambda c: c.print(designs_table(rows, lang=lang)))
    for r in rows:
        row_line(out, r["mode"])
        for on, step in r["known"]:  # where token 1 is known: the instance and its step
            row_line(out, on, step)
    out = render(width, lambda c: c.print(sim_table(sim_rows, profile, lang)))
    for r in sim_rows:
        row_line(out, r["design"])


@pytest.mark.parametrize("pd", [False, True])
@pytest.mark.parametrize("width", WIDTHS)
def test_trace_reads_whole(width, pd, tmp_path) -> None:
    from pdlab.engine.trace import Tracer

    path = tmp_path / "t.json"
    argv = ["trace", "--prompt", "Why run the last token twice?", "--json", str(path)]
    args = build_parser().parse_args(argv + (["--pd"] if pd else []))
    out = render(width, lambda c: cli_tour.run_trace(args, console=c))
    trace = Tracer.load(path)
    check_step_rows(out, trace, None)
    out_ids = [e["token"] for e in trace.filter("sample", "D" if pd else "local")]
    assert str(out_ids) in " ".join(out.split())  # wrapped between numbers, never inside


@pytest.mark.parametrize("width", WIDTHS)
def test_pd_reads_whole(width) -> None:
    from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
    from pdlab.engine.request import SamplingParams

    pair = PDPair(ModelConfig.tiny(), CacheConfig(block_size=4), SchedulerConfig(), backend="torch")
    prompts = ["Why does the decode instance run the last prompt token again?", "KV, not h."]
    outs = pair.generate(prompts, SamplingParams(max_tokens=4))
    outputs = {o.request_id: vars(o) for o in outs}
    out = render(width, lambda c: render_pd_result(pair.tracer, prompts, outputs, {}, c))
    for inst in ("P", "D"):
        check_step_rows(out, pair.tracer, inst)
    for m in pair.tracer.filter("kv_transfer", "D"):  # a row, or a block of lines per row
        for cell in (m["req_id"], m["remote_block_ids"], m["local_block_ids"], m["nbytes"]):
            row_line(out, cell)
    for o in outs:  # a generation may wrap between its numbers, never inside one
        assert str(o.output_token_ids) in " ".join(out.split())


@pytest.mark.parametrize("width", WIDTHS)
def test_a_failed_request_reads_whole_under_the_step_table(width, monkeypatch) -> None:
    import torch

    from pdlab.engine.config import CacheConfig, ModelConfig
    from pdlab.engine.llm_engine import LLMEngine

    real = torch.nn.Embedding.forward

    def faulty(self, ids):
        if bool((ids == 99).any()):
            raise RuntimeError("injected fault for token 99")
        return real(self, ids)

    monkeypatch.setattr(torch.nn.Embedding, "forward", faulty)
    e = LLMEngine(ModelConfig.tiny(), CacheConfig(block_size=4, num_blocks=16), backend="torch")
    e.generate(["abc", "hello"])
    out = render(width, lambda c: c.print(step_table(e.tracer)))
    (err,) = e.tracer.filter("request_error")
    row_line(out, err["req_id"], err.step, err["error"])


@pytest.fixture(scope="module")
def bench_results():
    """One run of ``pdlab bench paths`` (both tables) and of ``bench sched``, small."""
    from pdlab.tools.bench import bench_paths
    from pdlab.tools.bench_sched import bench_scheduler

    paths = bench_paths(
        "deepseek-v3", contexts=[48, 96], num_heads=2, repeats=1, num_speculative_tokens=2
    )
    return paths, bench_scheduler(num_requests=8, steps=5, block_size=4, prompt_len=6)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width", WIDTHS)
def test_bench_paths_table_reads_whole(bench_results, width, lang) -> None:
    from pdlab.tools.bench import render_paths_table, render_spec_table

    res, _ = bench_results
    out = render(width, lambda c: c.print(render_paths_table(res, lang)))
    for r in res["rows"]:
        if width == 120:  # a table: the row on one line
            row_line(out, r["context"], f"{r['prefill_ms']:.2f}", f"{r['decode_ms']:.2f}")
        else:  # a block per context: each value whole on its own line
            for v in (r["context"], f"{r['prefill_ms']:.2f}", f"{r['flop_ratio']:.1f}x"):
                row_line(out, v)
    out = render(width, lambda c: c.print(render_spec_table(res, lang)))
    for r in res["spec"]:
        for v in (r["context"], f"{r['one_ms']:.2f}", f"{r['flat_bytes_ratio']:.2f}x"):
            row_line(out, v)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width", WIDTHS)
def test_bench_kernels_and_sched_read_whole(bench_results, width, lang) -> None:
    """``pdlab bench kernels`` (a GPU's result and a CPU's, built: the view needs no timing)
    and ``bench sched``'s line: every kernel name, shape and time whole."""
    from kernel_utils import kernel_result

    from pdlab.tools.bench_kernels import case_label, render_table
    from pdlab.tools.bench_sched import summary

    for gpu in (False, True):
        res = kernel_result(gpu)
        out = render(width, lambda c, res=res: c.print(render_table(res, lang)))
        for r in res["rows"]:
            row_line(out, case_label(r["kernel"], lang))  # a failed case: its label
            if r["ms"] is not None:
                row_line(out, f"{r['ms']:.3f}")
                assert r["shape"].split(" causal")[0] in out
    _, sched = bench_results
    out = render(width, lambda c: c.print(summary(sched, lang)))
    for v in (sched["num_requests"], f"{sched['median_us']:.0f}", f"{sched['mean_us']:.0f}"):
        row_line(out, v)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width", WIDTHS)
def test_train_lines_read_whole(width, lang, tmp_path, monkeypatch) -> None:
    """What ``pdlab train`` prints, from a result built here (the command is run in
    tests/lab/test_bench_zh.py): every loss, rate and path whole. The paths are relative
    to a working folder, as a learner types them: pytest's own tmp_path can be wider
    than 80 columns, and a path wider than the terminal cannot be whole."""
    from types import SimpleNamespace

    from pdlab.catalog import text
    from pdlab.cli.train import header_lines, step_line, summary_lines
    from pdlab.engine.tokenizer import printable
    from pdlab.tools import corpus

    cfg = SimpleNamespace(steps=3000, batch_size=16, seq_len=128, seed=0, mtp_steps=1500)
    result = SimpleNamespace(
        losses=[2.0] * 3, seconds=312.4, tokens_per_step=2048, mtp_losses=[1.5], mtp_seconds=97.6
    )
    meta = {
        "final_loss": "0.4121",
        "corpus_loss": "0.3817",
        "mtp_final_loss": "1.2034",
        "mtp_corpus_loss": "1.1502",
        "mtp_acceptance": "0.9907,0.3198",
    }
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    ckpt = Path("runs/mine.safetensors")
    ckpt.write_bytes(b"\0" * 2_660_000)
    plot = Path("runs/mine-loss.png")
    samples = [
        (p, printable(list(b"the last token, again and again")))
        for p in corpus.DEFAULT_PROMPTS.values()
    ]
    name = text(lang, "tr_task_main")

    def show(c) -> None:
        for line in header_lines(71, cfg, 2, Path("runs/main.safetensors"), lang):
            c.print(line)
        c.print(step_line(name, 3000, 3000, 0.4121, lang))
        for line in summary_lines(result, meta, cfg, ckpt, plot, samples, lang):
            c.print(line)

    out = render(width, show)
    rate = f"{cfg.steps * result.tokens_per_step / result.seconds:,.0f}"
    for v in (*meta.values(), rate, "2.66", "99.1%", "32.0%", "1.99", "2.31", str(ckpt)):
        if "," not in v or v == rate:
            row_line(out, v)
    row_line(out, "3000/3000")


@pytest.mark.parametrize("width", WIDTHS)
def test_doctor_reads_whole(width, monkeypatch) -> None:
    import pdlab
    from pdlab.tools import doctor

    monkeypatch.setattr(
        doctor, "_smoke_check", lambda lang="en": doctor.Check("model", True, "skipped")
    )
    for lang in ("en", "zh"):
        checks = doctor.run_checks(lang)
        out = render(width, lambda c, checks=checks: c.print(doctor.render(checks)))
        for c in checks:
            row_line(out, f"[{c.tag}]", c.label or c.name)
        row_line(out, os.path.dirname(pdlab.__file__))  # where pdlab is imported from, whole
        row_line(out, pdlab.__version__)


@pytest.mark.parametrize("width", WIDTHS)
def test_doctor_aot_table_reads_whole(width) -> None:
    pytest.importorskip("triton")
    from pdlab.tools.aot import AotResult, render_table

    rows = [
        AotResult("mla_decode stage 1", t, d, w, True, None, 0.3, True, m, 16384, 121, 0, c)
        for t, m, c in ((80, "mma", "cp.async"), (90, "wgmma", "TMA"))
        for d in ("fp16", "bf16")
        for w in ("tiny L+R=64+16 splits=3", "deepseek L+R=512+64 splits=16")
    ]
    for lang in ("en", "zh"):
        out = render(width, lambda c, lang=lang: c.print(render_table(rows, lang)))
        for r in rows:
            if lang == "en" or width >= 120:  # a table: kernel and target on one line
                row_line(out, r.kernel, f"sm_{r.target}")
            else:  # the Chinese headers need over 80 columns: a block per build
                row_line(out, r.kernel)
                row_line(out, f"sm_{r.target}")
            row_line(out, r.widths)
            row_line(out, r.copy)
