"""``--lang zh`` for ``pdlab bench paths|kernels|sched`` and ``pdlab train``: each prints
text_bench.py's Chinese (and none of its English), every number it shows is the one the
result (the JSON it wrote, the checkpoint's metadata) holds, and the JSON is the same words
and numbers whatever the language."""

from __future__ import annotations

import json
import re

import pytest
from kernel_utils import kernel_result

from pdlab.catalog import text
from pdlab.catalog.bench import TEXT_BENCH
from pdlab.cli import main

_CJK = re.compile("[\u4e00-\u9fff]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _flat(s: str) -> str:
    """``s`` without its whitespace: a line wrapped anywhere still matches."""
    return re.sub(r"\s+", "", s)


def _has(out: str, words: str) -> bool:
    return _flat(words) in _flat(out)


def _no_english(out: str, keys: list[str]) -> None:
    """None of ``keys``' English words is in ``out`` (its commands such as ``pdlab train``
    left out): each run of an entry's English between its placeholders that holds a word and
    is not in its Chinese too (an identifier, a unit), as whole words, wrapped anywhere."""
    from pdlab.catalog import TEXT

    out = re.sub(r"\bpdlab(?: [a-z]+)+", " ", out)
    for key in keys:
        zh = _flat(TEXT[key]["zh"])
        for part in re.split(r"\{[^{}]*\}", TEXT[key]["en"]):
            part = part.strip(" ,;:()")
            if not re.search("[A-Za-z]{2,}", part) or _flat(part) in zh:
                continue
            words = r"\s*".join(re.escape(w) for w in part.split())
            found = re.search(rf"(?<![\w/.-]){words}(?![\w/.-])", out)
            assert found is None, (key, part)


def _english_words(out: str, allowed: set[str]) -> set[str]:
    """The Latin words of ``out`` that are no identifier, name or ``allowed`` value."""
    words = set()
    for w in re.findall(r"[A-Za-z][A-Za-z0-9_.+/-]*", out):
        w = w.rstrip(".")
        if "_" in w or "/" in w or re.search(r"\d|.[A-Z]", w) or w.isupper() or len(w) < 2:
            continue
        if w not in allowed:
            words.add(w)
    return words


def _row(out: str, *cells: str) -> str:
    """The line holding ``cells`` whole, in this order."""
    pattern = r".*?".join(rf"(?<![\w.]){re.escape(c)}(?![\w])" for c in cells)
    found = [ln for ln in out.splitlines() if re.search(pattern, ln)]
    assert found, f"no line holds {cells}:\n{out}"
    return found[0]


_PATH_KEYS = [k for k in TEXT_BENCH if k.startswith(("bp_", "bs_")) and "progress" not in k]


def test_bench_paths_lang_zh(tmp_path, capsys, monkeypatch) -> None:
    from rich.console import Console

    from pdlab.tools.bench import render_paths_table, render_spec_table

    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: full headers, a row per line
    path = tmp_path / "paths.json"
    argv = ["bench", "paths", "--heads", "2", "--context", "32", "--repeats", "1"]
    argv += ["--num-speculative-tokens", "2", "--json", str(path), "--lang", "zh"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    raw = path.read_text()
    res = json.loads(raw)
    # The JSON holds no Chinese: its note is the English one, the same in both languages.
    assert not _CJK.search(raw) and res["note"] == text("en", "bp_note", repeats=1)
    c = res["ceilings"]
    title = text(
        "zh",
        "bp_title",
        preset=res["preset"],
        h=res["num_heads"],
        device=res["device"],
        dtype=res["dtype"],
        backend=res["backend"],
        matmul=f"{c['matmul_tflops'] * 1e3:.0f}",
        copy=f"{c['copy_gbps']:.1f}",
    )
    assert _has(out, title) and _has(out, text("zh", "bp_note", repeats=1))
    assert _has(out, text("zh", "bs_note")) and _has(out, text("zh", "wrote", path=path))
    for key in ("bp_ctx", "bp_mha", "bp_floor", "bp_xfloor", "bp_ratio", "bp_diff", "bs_flat"):
        assert _has(out, text("zh", key))
    _no_english(out.replace(str(path), ""), [*_PATH_KEYS, "wrote", "bench_legend"])
    allowed = {res["preset"], res["device"], res["backend"], "torch", "query", "key", "max"}
    allowed |= {"token", "prefill", "decode", "ms", "Triton"}
    assert _english_words(out.replace(str(path), ""), allowed) == set()
    # Every number of the result, on its row, as the JSON has it.
    (r,) = res["rows"]
    _row(
        out,
        str(r["context"]),
        f"{r['prefill_ms']:.2f}",
        f"{r['prefill_floor_ms']:.2f}",
        f"{r['prefill_vs_floor']:.1f}x",
        f"{r['decode_ms']:.2f}",
        f"{r['decode_floor_ms']:.2f}",
        f"{r['decode_vs_floor']:.1f}x",
        f"{r['flop_ratio']:.1f}x",
        f"{r['bytes_ratio']:.1f}x",
    )
    (s,) = res["spec"]
    _row(out, str(s["context"]), f"{s['one_ms']:.2f}", f"{s['spec_ms']:.2f}")
    # ... and the same numbers as the English tables of the same result.
    con = Console(width=200, record=True, highlight=False)
    con.print(render_paths_table(res, "en"))
    con.print(render_spec_table(res, "en"))
    en = con.export_text()
    zh = out.replace(text("zh", "wrote", path=path), "")
    assert set(_NUMBER.findall(zh)) == set(_NUMBER.findall(en))


def test_bench_sched_lang_zh(tmp_path, capsys) -> None:
    path = tmp_path / "sched.json"
    argv = ["bench", "sched", "--requests", "8", "--steps", "5", "--json", str(path)]
    assert main([*argv, "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    res = json.loads(path.read_text())
    line = text(
        "zh",
        "bsch_line",
        n=8,
        median=f"{res['median_us']:.0f}",
        per=f"{res['us_per_request']:.2f}",
        mean=f"{res['mean_us']:.0f}",
        steps=5,
    )
    assert _has(out, line) and _has(out, text("zh", "wrote", path=path))
    assert "scheduler" not in out and "per step" not in out and "wrote" not in out
    assert set(res) == {"num_requests", "steps", "block_size", "prompt_len"} | {
        "mean_us",
        "median_us",
        "min_us",
        "us_per_request",
    }


@pytest.mark.parametrize("gpu", [False, True])
def test_bench_kernels_lang_zh(gpu, tmp_path, capsys, monkeypatch) -> None:
    from pdlab.tools import bench_kernels as bk

    res = kernel_result(gpu)
    labels = []

    def fake(quick, progress, lang):  # the command's path, without the timing
        labels.append(bk.case_label("starting", lang))
        return res

    monkeypatch.setattr(bk, "bench_kernels", fake)
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "kernels.json"
    assert main(["bench", "kernels", "--quick", "--json", str(path), "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert json.loads(path.read_text()) == res  # written as computed, in no language
    assert labels == [text("zh", "bk_starting")]
    assert _has(out, text("zh", "bk_title", device=res["device"]))
    assert _has(out, text("zh", "bk_note_gpu" if gpu else "bk_note_cpu"))
    for key in ("bk_kernel", "bk_impl", "bk_dtype", "bk_shape", "bk_peak", "bk_vs_dense"):
        assert _has(out, text("zh", key))
    keys = [k for k in TEXT_BENCH if k.startswith("bk_") and k not in ("bk_ms",)]
    shown = out.replace(str(path), "")
    for r in res["rows"]:  # an exception's own message is shown as raised
        shown = shown.replace(r.get("error", "\0"), "")
    _no_english(shown, [*keys, "wrote"])
    assert "causal" not in out and "of peak" not in out and "dense" not in out
    for r in res["rows"]:
        if r.get("error"):
            label = text("zh", "bk_case_prefill", impl="sdpa", h=16)  # its case, translated
            _row(out, label, r["error"], text("zh", "bk_error"))
            assert r["error"] in out
            continue
        cells = [r["kernel"], r["dtype"], r["impl"], f"{r['ms']:.3f}"]
        if "gbps" in r:
            cells.append(f"{r['gbps']:.0f}")
        if "tflops" in r:
            cells.append(f"{r['tflops']:.1f}")
        if "share_of_peak" in r:
            cells.append(f"{r['share_of_peak']:.0%}")
        if "dense_ms" in r:
            cells += [f"{r['dense_ms']:.3f}", f"{r['vs_dense']:.2f}x"]
        _row(out, *cells)
        shape = r["shape"].replace(" causal", " " + text("zh", "k_causal"))
        assert shape in out


def test_kernel_progress_labels_in_chinese() -> None:
    from pdlab.tools.bench_kernels import case_label

    assert case_label("triton prefill H=16", "zh") == "triton 预填充 H=16"
    assert case_label("triton prefill H=16") == "triton prefill H=16"
    assert case_label("mla_decode H=128 q_len=3", "zh") == "mla_decode H=128 q_len=3"


def test_train_lang_zh(tmp_path, capsys, monkeypatch) -> None:
    """Four corpus lines keep it short: what it prints is read from the checkpoint it wrote."""
    from pdlab.engine.model_executor.model_loader import checkpoint_metadata
    from pdlab.tools import corpus

    lines = corpus.entries()[:2] + corpus.entries()[-2:]
    monkeypatch.setattr(corpus, "entries", lambda: lines)
    ckpt = tmp_path / "mine.safetensors"
    argv = ["train", "--steps", "2", "--mtp-steps", "2", "--batch-size", "1", "--seq-len", "16"]
    assert main([*argv, "--out", str(ckpt), "--lang", "zh"]) == 0
    cap = capsys.readouterr()
    out, err = cap.out, cap.err
    meta = checkpoint_metadata(ckpt)
    plot = tmp_path / "mine-loss.png"
    a1, a2 = (float(x) for x in meta["mtp_acceptance"].split(","))
    expected = [
        text("zh", "tr_head", n=4),
        text("zh", "tr_then_mtp", steps=2),
        text("zh", "tr_loss", final=meta["final_loss"], k=2, corpus=meta["corpus_loss"]),
        text(
            "zh", "tr_mtp_loss", final=meta["mtp_final_loss"], k=2, corpus=meta["mtp_corpus_loss"]
        ),
        text("zh", "tr_acceptance", a1=f"{a1:.1%}", a2=f"{a2:.1%}"),
        text("zh", "tr_length", k1=f"{1 + a1:.2f}", k2=f"{1 + a1 + a2:.2f}"),
        text("zh", "tr_wrote_checkpoint", path=ckpt, mb=f"{ckpt.stat().st_size / 1e6:.2f}"),
        text("zh", "tr_wrote_plot", path=plot),
        text("zh", "tr_run_it", path=ckpt),
    ]
    for line in expected:
        assert _has(out, line), line
    for prompt in corpus.DEFAULT_PROMPTS.values():
        assert _has(out, text("zh", "tr_sample", prompt=repr(prompt), completion=""))
    assert re.search(r"训练用时 \d+ s（[\d,]+ 字节/s）", out)
    for name in (text("zh", "tr_task_main"), text("zh", "tr_task_mtp")):
        assert _has(err, f"{name}：第 2/2 步，损失")
    tr_keys = [k for k in TEXT_BENCH if k.startswith("tr_") and not k.startswith("tr_plot")]
    _no_english(out.replace(str(tmp_path), "") + err, [*tr_keys, "wrote"])
    assert plot.stat().st_size > 0
    # The numbers printed are the recorded ones, and the metadata is in no language.
    assert not any(_CJK.search(v) for v in meta.values())
    printed = set(_NUMBER.findall(out))
    assert {meta["final_loss"], meta["corpus_loss"], meta["mtp_final_loss"]} <= printed
