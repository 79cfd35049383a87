"""Under ``--lang zh`` every error a learner reads is Chinese (``pdlab/errors.py``, the
catalog's ``err_`` keys in ``pdlab/catalog/errors.py``).

The messages are not samples typed in here: they are what pdlab raises for bad input. Every
option of every ``pdlab`` subcommand (read off the parser itself) gets a set of bad values
(none, not a number, 0, -1, too large, a bad choice, a value for a switch), each command an
unknown option and a missing argument, and a list of inputs that pass argparse and fail
later (an empty prompt, a folder where a file goes, a role without a port, ...); all run
in-process through :func:`pdlab.cli.main`. Every field of every config dataclass
(``pdlab/engine/config/``, ``SimConfig``) gets bad values, and the engine's entry points get bad
requests. Each Chinese line must pass the glossary's rule
(``tests/contracts/test_glossary.py``), keep the English message's options, quoted values
and ``name=value`` pairs as they were, fit 80 columns, and come from a pattern (not the
untranslated fallback). The English output is checked unchanged: argparse's own text, one
line ``pdlab <command>: error: ...``.
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import math
import re
from pathlib import Path

import pytest
from glossary_rule import prose, violations
from rich.cells import cell_len

from pdlab.cli import build_parser, main, parse
from pdlab.errors import UNTRANSLATED, error_text
from pdlab.errors import parse as read_back
from pdlab.ui.fmt import wrap_cells

BAD_VALUES = ("bogus", "0", "-1", "1e999", "99999")
_CJK = re.compile("[\u4e00-\u9fff]")


def _commands() -> list[tuple[list[str], argparse.ArgumentParser]]:
    """``(argv prefix, parser)`` for the top parser and every subcommand under it."""
    out = []

    def walk(p: argparse.ArgumentParser, prefix: list[str]) -> None:
        out.append((prefix, p))
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, child in a.choices.items():
                    walk(child, [*prefix, name])

    walk(build_parser(), [])
    return out


def generated_bad_inputs() -> list[list[str]]:
    """Bad command lines for every option of every subcommand, from the parser itself."""
    argvs = []
    for prefix, p in _commands():
        positionals = [
            a
            for a in p._actions
            if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
        ]
        fill = ["1" for a in positionals if a.nargs is None]
        if any(isinstance(a, argparse._SubParsersAction) for a in p._actions):
            argvs += [[*prefix, "bogus"], prefix]  # a bad subcommand, none at all
        argvs += [[*prefix, *fill, "--bogus"], [*prefix, *fill, "--bogus=1", "extra"]]
        if fill:
            argvs += [prefix] + [[*prefix, "bogus"] for a in positionals if a.type is int]
        for a in p._actions:
            if not a.option_strings or {"-h", "--version", "--lang"} & set(a.option_strings):
                continue
            opt = a.option_strings[-1]
            if a.nargs == 0:
                argvs.append([*prefix, *fill, opt + "=x"])
                continue
            argvs.append([*prefix, *fill, opt])
            argvs += [[*prefix, *fill, opt, v] for v in BAD_VALUES]
    argvs.append(["pd", "--pro", "x"])  # ambiguous: --procs or --prompt
    return argvs


def later_bad_inputs(tmp: Path) -> list[tuple[list[str], dict[str, str]]]:
    """Command lines argparse accepts and pdlab refuses before any work, with the
    environment they run under."""
    a_file = tmp / "a_file"
    a_file.write_text("not a folder")
    (tmp / "x.bin").write_text("")
    nb = str(tmp / "nb")
    return [
        (["trace", "--prompt", ""], {}),
        (["tour", "--prompt", ""], {}),
        (["trace", "--prompt", "hi", "--json", f"{a_file}/out.json"], {}),
        (["trace", "--prompt", "hi", "--json", str(tmp)], {}),
        (["trace", "--prompt", "hi", "--json", f"{tmp}/no/such/out.json"], {}),
        (["tour", "--chapter", "1", "--plots", str(a_file)], {}),
        (["trace", "--prompt", "hi", "--long-prefill-token-threshold", "-1"], {}),
        (["trace", "--prompt", "hi", "--pcp", "2", "--model-runner", "v1"], {}),
        (["trace", "--prompt", "hi", "--block-size", "1000000000"], {}),
        (["trace", "--prompt", "hi", "--weights", str(tmp / "none.safetensors")], {}),
        (["trace", "--prompt", "\udcff"], {}),
        (["trace", "--prompt", "hi"], {"PDLAB_CHECK_INDICES": "maybe"}),
        (["trace", "--prompt", "hi"], {"PDLAB_GPU": "bogus"}),
        (["trace", "--prompt", "hi"], {"VLLM_USE_V2_MODEL_RUNNER": "2"}),
        (["pd", "--role", "decode", "--port", "1", "--prompt", "x"], {}),
        (["pd", "--role", "decode", "--port", "1", "--procs", "1"], {}),
        (["pd", "--role", "prefill"], {}),
        (["pd", "--role", "prefill", "--compare-designs"], {}),
        (["bench", "paths", "--context", "1000000"], {}),
        (["bench", "sched", "--json", f"{a_file}/x"], {}),
        (["train", "--seed", "-1"], {}),
        (["train", "--out", str(tmp / "x.bin")], {}),
        (["exercises", "check", "99"], {}),
        (["exercises", "hint", "0"], {}),
        (["exercises", "solution", "15"], {}),
        (["exercises", "--dir", str(tmp / "ex"), "start", "0"], {}),
        (["notebooks", str(a_file)], {}),
        (["lab", "--dir", nb, "--port", "99999", "--no-browser"], {}),
        (["lab", "--dir", nb, "--notebook", "zz", "--no-browser"], {}),
        (["lab", "--dir", str(a_file), "--no-browser"], {}),
    ]


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _error_lines(err: str) -> list[str]:
    """The error lines of ``err``, without argparse's usage block."""
    lines, in_usage = [], False
    for line in err.splitlines():
        if line.startswith(("usage:", "用法：")):
            in_usage = True
        elif in_usage and line.startswith(" "):
            continue
        else:
            in_usage = False
            lines.append(line)
    return [ln for ln in lines if ln.strip()]


def _kept(message: str) -> list[str]:
    """What the Chinese must keep from the English: options, quoted values, ``a=b``."""
    found = re.findall(r"--[\w-]+|(?<![A-Za-z])'[^']*'|\b\w+(?:\.\w+)*=\S+?(?=[\s,;:)]|$)", message)
    return [f.rstrip(".") for f in found]


def problems(message: str, zh: str, where: str) -> list[str]:
    """What is wrong with ``zh`` as a pattern's Chinese for ``message``: the glossary's rule
    must hold, every option and value be kept, every line fit 80 columns."""
    flat = prose(zh)
    if UNTRANSLATED in flat or not _CJK.search(flat):
        return [f"{where}: no pattern for {message!r}"]
    out = [f"{where}: {flat!r}: {v}" for v in violations(flat)]
    squeezed = re.sub(r"\s", "", flat)
    for piece in _kept(message):
        if re.sub(r"\s", "", piece) not in squeezed:
            out.append(f"{where}: {piece!r} lost in {flat!r}")
    for line in zh.splitlines():
        if cell_len(line) > 80:
            out.append(f"{where}: {cell_len(line)} columns: {line!r}")
    return out


def _no_launch(monkeypatch) -> None:
    """``pdlab lab`` must never start JupyterLab here."""
    import os
    import subprocess

    def refuse(*a, **k):
        raise AssertionError("a bad input started JupyterLab")

    monkeypatch.setattr(os, "execv", refuse)
    monkeypatch.setattr(subprocess, "call", refuse)


def test_every_bad_command_line_is_chinese_under_lang_zh(tmp_path, capsys, monkeypatch):
    _no_launch(monkeypatch)
    monkeypatch.chdir(tmp_path)
    generated = generated_bad_inputs()
    runs, families, bad = 0, set(), []
    for i, argv in enumerate(generated):
        try:
            parse(argv)  # the English, as main() prints it first
            capsys.readouterr()
            continue  # argparse accepts it (an --seed -1): not a parse error
        except SystemExit as e:
            assert e.code == 2, argv
        en = capsys.readouterr().err
        try:
            build_parser().parse_args(argv)
        except SystemExit:
            pass
        assert capsys.readouterr().err == en, f"{argv}: the English changed"
        (en_line,) = _error_lines(en)
        prog, message = en_line.split(": error: ", 1)
        # --lang zh anywhere on the line: first, last, after the command
        at = (0, len(argv), min(1, len(argv)))[i % 3]
        code, out, zh = _run([*argv[:at], "--lang", "zh", *argv[at:]], capsys)
        assert code == 2 and out == "", argv
        assert zh.startswith("用法： ") and "error:" not in zh and "usage:" not in zh, (argv, zh)
        lines = _error_lines(zh)
        assert lines[0].startswith(f"{prog}：错误："), (argv, zh)
        bad += problems(message, "\n".join(lines).split("：错误：", 1)[1], str(argv))
        runs += 1
        families.add(_family(message))
    later = later_bad_inputs(tmp_path)
    for argv, env in later:
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            code, _, en = _run(argv, capsys)
            assert code == 2, (argv, en)
            (en_line,) = _error_lines(en)  # English: one line, as before
            assert not _CJK.search(en) and ": error: " in en_line, en
            prog, message = en_line.split(": error: ", 1)
            code, _, zh = _run([*argv, "--lang", "zh"], capsys)
            assert code == 2, (argv, zh)
        lines = _error_lines(zh)
        assert lines[0].startswith(f"{prog}：错误："), (argv, zh)
        bad += problems(message, "\n".join(lines).split("：错误：", 1)[1], str(argv))
        runs += 1
        families.add(_family(message))
    assert not bad, f"{len(bad)} problems:\n" + "\n".join(bad)
    assert runs >= 300, runs
    print(f"{runs} bad command lines ({len(generated)} generated, {len(later)} listed) "
          f"in {len(families)} message families")  # fmt: skip


def _family(message: str) -> str:
    """A message with its values blanked: what a pattern has to cover."""
    m = re.sub(r"'[^']*'|\[[^\]]*\]|\([^)]*\)|-?\d[\w.]*|--[\w-]+|\S+=\S+|/\S+", "V", message)
    return re.sub(r"^argument V: ", "", m)


# ---- the configs and the engine ---------------------------------------------------------
BAD_FIELD_VALUES = (-1, 0, "bogus", None, 1.5, True, math.nan, math.inf, 10**9, [], -0.5)


def config_messages() -> dict[str, tuple[str, Exception]]:
    """What every field of every config says to every bad value: message -> (where, the
    exception)."""
    from pdlab.engine import config
    from pdlab.sim.simulator import SimConfig
    from pdlab.tools.train_config import TrainConfig

    classes = {n: getattr(config, n) for n in dir(config) if n.endswith("Config")}
    classes |= {"TrainConfig": TrainConfig, "SimConfig": SimConfig}
    out = {}
    for name, cls in classes.items():
        if not dataclasses.is_dataclass(cls):
            continue
        make = config.ModelConfig.tiny if cls is config.ModelConfig else cls
        for f in dataclasses.fields(cls):
            if not f.init or f.name == "name":
                continue
            for v in BAD_FIELD_VALUES:
                try:
                    make(**{f.name: v})
                except (ValueError, TypeError) as e:
                    out.setdefault(str(e), (f"{name}({f.name}={v!r})", e))
    return out


def engine_messages() -> dict[str, tuple[str, Exception]]:
    """What the engine's entry points say to bad requests and states: message -> (where,
    the exception)."""
    import torch

    from kernels import checks
    from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
    from pdlab.engine.core.block_pool import BlockPool
    from pdlab.engine.distributed.kv_transfer.base import validate_kv_transfer_params
    from pdlab.engine.llm_engine import LLMEngine
    from pdlab.engine.platforms import check_gpu, select_mla_backend
    from pdlab.engine.request import SamplingParams

    engine = LLMEngine(ModelConfig.tiny(), CacheConfig(num_blocks=8), SchedulerConfig())
    pool = BlockPool(4, enable_caching=True)
    cases = {
        "prompt ''": lambda: engine.add_request(""),
        "prompt []": lambda: engine.add_request([]),
        "prompt b''": lambda: engine.add_request(b"x"),
        "prompt [999]": lambda: engine.add_request([999]),
        "prompt ['a']": lambda: engine.add_request(["a"]),
        "prompt too long": lambda: engine.add_request([1] * 10**6),
        "cache too small": lambda: engine.add_request([1] * 40, SamplingParams(max_tokens=8)),
        "max_steps 0": lambda: engine.generate(["hi"], max_steps=0),
        "unknown id": lambda: engine.get_output("nope"),
        "stop ids": lambda: engine.add_request("hi", SamplingParams(stop_token_ids=[10**6])),
        "sampling 1": lambda: engine.add_request("hi", 1),
        "max_tokens 0": lambda: SamplingParams(max_tokens=0),
        "temperature": lambda: SamplingParams(temperature=-1),
        "seed": lambda: SamplingParams(seed="x"),
        "pool 0": lambda: BlockPool(0, enable_caching=True),
        "pool full": lambda: pool.get_new_blocks(9),
        "gpu": lambda: check_gpu("bogus"),
        "gpu 1": lambda: check_gpu(1),
        "fp8 on cpu": lambda: select_mla_backend("cpu", kv_cache_dtype="fp8"),
        "kv dtype": lambda: select_mla_backend("h200", kv_cache_dtype="int4"),
        "kv params": lambda: validate_kv_transfer_params([]),
        "kv first_token": lambda: validate_kv_transfer_params({"first_token": "x"}),
        "kv both": lambda: validate_kv_transfer_params(
            {"do_remote_prefill": True, "do_remote_decode": True}
        ),
        "kv flag": lambda: validate_kv_transfer_params({"do_remote_decode": 1}),
        "kv ids": lambda: validate_kv_transfer_params({"do_remote_prefill": True}),
        "index checks": lambda: checks.set_index_checks("x"),
        "slot_mapping": lambda: checks.reshape_and_cache_mla(
            torch.zeros(2, 8), torch.zeros(2, 4), torch.zeros(2, 4, 12), torch.tensor([0, 99])
        ),
    }
    out = {}
    for where, call in cases.items():
        try:
            call()
        except (ValueError, TypeError) as e:
            out.setdefault(str(e), (where, e))
    return out


def test_every_config_and_engine_message_is_chinese():
    messages = config_messages()
    assert len(messages) >= 300, len(messages)
    engine = engine_messages()
    assert len(engine) >= 20, sorted(w for w, _ in engine.values())
    messages |= engine
    families = {_family(m) for m in messages}
    bad = []
    for message, (where, e) in messages.items():
        zh = error_text(e, "zh")
        bad += problems(message, "\n".join(wrap_cells(zh)), where)
        # as the grader shows a caught error, as text: its type, then the same Chinese
        said = error_text(f"ValueError: {message}", "zh")
        if read_back(message) and said != f"ValueError：{zh}":
            bad.append(f"{where}: read back from the text, {said!r} is not {zh!r}")
    assert not bad, f"{len(bad)} problems:\n" + "\n".join(bad)
    print(f"{len(messages)} config and engine messages in {len(families)} families")


# ---- what is shown where -----------------------------------------------------------------
def test_a_message_no_pattern_knows_is_shown_whole():
    odd = "the flux capacitor ran dry at 88 mph"
    assert read_back(odd) is None
    assert error_text(odd, "zh") == f"{UNTRANSLATED}{odd}"
    assert error_text(RuntimeError(odd), "zh") == f"{UNTRANSLATED}{odd}"
    said = error_text(f"RuntimeError: {odd}\nsecond line", "zh")
    assert said == f"{UNTRANSLATED}RuntimeError: {odd}"


def test_an_unknown_error_in_a_command_is_shown_in_both_languages(monkeypatch, capsys):
    from pdlab.tools import lab

    def boom(*a, **k):
        raise ValueError("the flux capacitor ran dry")

    monkeypatch.setattr(lab, "run_lab", boom)
    code, _, en = _run(["lab"], capsys)
    assert code == 2 and en == "pdlab lab: error: the flux capacitor ran dry\n"
    code, _, zh = _run(["lab", "--lang", "zh"], capsys)
    assert code == 2 and zh == f"pdlab lab：错误：{UNTRANSLATED}the flux capacitor ran dry\n"


def test_the_grader_shows_the_engine_in_chinese():
    from pdlab.exercises import engine_runs

    en = engine_runs.said("ValueError: no free blocks left", "en")
    assert en == "The engine said: ValueError: no free blocks left"
    zh = engine_runs.said("ValueError: no free blocks left", "zh")
    assert zh == "引擎报错：ValueError：没有空闲的块了"
    long = (
        "ValueError: slot_mapping[3]=99 is out of range: expected a slot in [0, 32) = "
        "num_blocks * block_size of kv_cache, or negative to skip the token"
    )
    lines = engine_runs.said(long, "zh").splitlines()
    assert all(cell_len(ln) <= 80 for ln in lines) and "slot_mapping[3]=99" in lines[0]
    assert not violations(" ".join(lines))


def test_widgets_show_a_bad_setting_in_chinese():
    pytest.importorskip("ipywidgets")
    from pdlab.ui.sim_widget import SimExplorer

    w = SimExplorer(lang="zh", duration_s=0.2)
    w.duration_s = -1.0  # SimConfig refuses it
    w.rerun()
    shown = re.sub(r"<[^>]+>", "", w.error.value)
    assert "ValueError：`duration_s=-1.0` 无效：应为不小于 0 的有限数" in shown, shown
    assert "Traceback" not in shown
    en = SimExplorer(lang="en", duration_s=0.2)
    en.duration_s = -1.0
    en.rerun()
    assert "ValueError: duration_s=-1.0 is invalid: expected a finite number >= 0" in html.unescape(
        en.error.value
    )  # English: the traceback, as before


@pytest.mark.parametrize("command", [["trace", "--prompt", "hi"], ["pd"]])
def test_the_cpu_platform_is_named_in_chinese(command, capsys):
    """``CPU (no GPU)`` (pdlab/engine/platforms.py GPUS) is the view's Chinese label under zh,
    named (``--gpu cpu``) or from ``PDLAB_GPU`` (tests/conftest.py sets it to cpu)."""
    from pdlab.catalog import text

    for gpu in (["--gpu", "cpu"], []):
        code, out, _ = _run([*command, "--max-tokens", "2", *gpu, "--lang", "zh"], capsys)
        assert code == 0 and "no GPU" not in out, out
        assert re.search(r"CPU（没有\s*GPU）", out) and not re.search(r"CPU\s*平台", out), out
    assert text("en", "pf_cpu_label") == "CPU (no GPU)"
    zh = error_text("kv_cache_dtype='fp8' is invalid on CPU (no GPU): no MLA backend of its "
                  "platform takes it (CPU_MLA takes 'auto' only)", "zh")  # fmt: skip
    assert "CPU（没有 GPU）" in zh and "no GPU" not in zh
