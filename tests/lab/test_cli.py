"""The ``pdlab`` command's pd and bench subcommands, and its handling of bad options."""

import json
import subprocess
import sys
import time

import pytest

from pdlab.catalog import text
from pdlab.cli import main


def test_pd_in_one_process(capsys):
    assert (
        main(["pd", "--procs", "1", "--prompt", "abcdefgh", "--max-tokens", "3", "--pcp", "2"]) == 0
    )
    out = capsys.readouterr().out
    assert "num_computed_tokens = 7 (N - 1, N = 8)" in out
    assert "forward_mha" in out and "KV blocks moved P -> D" in out


def test_pd_in_two_processes():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pdlab.cli",
            "pd",
            "--procs",
            "2",
            "--prompt",
            "hello P/D",
            "--max-tokens",
            "3",
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "torch.distributed" in r.stdout and "num_computed_tokens = 8" in r.stdout


def test_bench_paths_and_sched_write_json(tmp_path, capsys):
    p = tmp_path / "paths.json"
    assert (
        main(
            [
                "bench",
                "paths",
                "--preset",
                "deepseek-v3",
                "--heads",
                "2",
                "--context",
                "32,96",
                "--repeats",
                "1",
                "--json",
                str(p),
            ]
        )
        == 0
    )
    rows = json.loads(p.read_text())["rows"]
    assert [r["context"] for r in rows] == [32, 96]
    assert all(r["flop_ratio"] > 1 and r["max_abs_diff"] < 1e-4 for r in rows)
    s = tmp_path / "sched.json"
    assert main(["bench", "sched", "--requests", "8", "--steps", "5", "--json", str(s)]) == 0
    assert json.loads(s.read_text())["num_requests"] == 8


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["pd", "--procs", "3"], "--procs"),
        (["pd", "--block-size", "0"], "--block-size"),
        (["bench", "paths", "--context", "1,x"], "--context"),
        (["bench", "paths", "--preset", "gpt2"], "--preset"),
        (["nonsense"], "invalid choice"),
    ],
)
def test_bad_options_exit_2(argv, needle, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert needle in capsys.readouterr().err


def _two_roles(
    extra: list[str], decode_args: list[str], prefill_args: list[str]
) -> tuple[subprocess.CompletedProcess, int, str, str]:
    """``pdlab pd --role decode`` started first, then ``--role prefill`` on the same free
    port: P's completed process, and D's exit code, stdout and stderr."""
    from pdlab.disagg.group import free_port

    base = [sys.executable, "-m", "pdlab.cli", "pd", "--port", str(free_port())]
    base += ["--timeout", "60", *extra]
    d = subprocess.Popen(
        base + ["--role", "decode", *decode_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        p = subprocess.run(
            base + ["--role", "prefill", *prefill_args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        d_out, d_err = d.communicate(timeout=60)
    finally:
        if d.poll() is None:
            d.kill()
            d.wait()
    return p, d.returncode, d_out, d_err


def test_pd_roles_as_two_commands():
    """The two-machine form: one command per side, meeting at --host/--port."""
    p, d_code, d_out, d_err = _two_roles(["--max-tokens", "2"], [], ["--prompt", "two machines"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert d_code == 0, d_out + d_err
    res = json.loads(p.stdout)
    assert res["role"] == "prefill" and len(res["outputs"]["req-0"]["output_token_ids"]) == 2
    assert res["free_blocks"].split("/")[0] == res["free_blocks"].split("/")[1]
    assert json.loads(d_out)["role"] == "decode"


# ---- every error is one line, exit code 2, never a traceback -----------------------------
def _pdlab(*argv, env=None, timeout=180):
    import os

    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "pdlab.cli", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def _one_error_line(r, command, needle):
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"pdlab {command}: error: ") and needle in lines[0], lines[0]
    assert "Traceback" not in r.stderr + r.stdout


def test_bad_environment_variables_are_one_line_and_doctor_reports_them():
    env = {"PDLAB_BACKEND": "bogus"}
    assert _pdlab("--help", env=env).returncode == 0
    _one_error_line(
        _pdlab("trace", "--prompt", "hi", env=env), "trace", "PDLAB_BACKEND='bogus' is invalid"
    )
    doc = _pdlab("doctor", env=env)
    assert "Traceback" not in doc.stderr and "PDLAB_BACKEND='bogus'" in doc.stdout


def test_a_bad_index_check_variable_is_one_line(monkeypatch, capsys):
    # read at each use (PDLAB_BACKEND, cached per process, needs the process above)
    monkeypatch.setenv("PDLAB_CHECK_INDICES", "maybe")
    with pytest.raises(SystemExit) as e:
        main(["trace", "--prompt", "hi"])
    err = capsys.readouterr().err.splitlines()
    assert e.value.code == 2 and len(err) == 1
    assert err[0].startswith("pdlab trace: error: PDLAB_CHECK_INDICES='maybe' is invalid")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["trace", "--prompt", "hi", "--json", "{file}/out.json"], "is a file, not a directory"),
        (["trace", "--prompt", "hi", "--json", "{dir}"], "is a directory: expected a file path"),
        (["tour", "--chapter", "1", "--plots", "{file}"], "is a file: expected a directory"),
        (["bench", "sched", "--requests", "4", "--steps", "2", "--json", "{file}/x"], "--json"),
    ],
)
def test_unwritable_outputs_are_refused_before_any_work(argv, needle, tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    argv = [x.format(file=a_file, dir=tmp_path) for x in argv]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing ran
    assert captured.err.startswith(f"pdlab {argv[0]}: error: ") and needle in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_a_cache_too_large_for_memory_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["trace", "--prompt", "hi", "--block-size", "1000000000"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "pdlab trace: error: CacheConfig(num_blocks=" in err and "is too large" in err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--role", "decode", "--port", "1", "--prompt", "x"], "--prompt goes to --role prefill"),
        (["--role", "decode", "--port", "1", "--procs", "1"], "--procs does not go with --role"),
        (["--role", "prefill"], "--role needs --port"),
    ],
)
def test_pd_role_errors_are_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as e:
        main(["pd", *argv])
    assert e.value.code == 2 and needle in capsys.readouterr().err


def test_pd_role_without_a_peer_is_one_line():
    from pdlab.disagg.group import free_port

    port = str(free_port())
    r = _pdlab("pd", "--role", "prefill", "--port", port, "--timeout", "2")
    _one_error_line(r, "pd", f"could not reach the decode peer at 127.0.0.1:{port} within 2 s")
    r = _pdlab("pd", "--role", "decode", "--port", port, "--timeout", "2")
    _one_error_line(r, "pd", f"could not reach the prefill peer at 127.0.0.1:{port} within 2 s")


def test_pd_roles_with_different_block_sizes_stop_at_the_handshake():
    p, d_code, _, d_err = _two_roles([], ["--block-size", "8"], ["--block-size", "4"])
    _one_error_line(p, "pd", "block_size differs between the two sides: P has 4, D has 8")
    assert d_code == 2 and "block_size differs" in d_err and "Traceback" not in d_err


@pytest.mark.parametrize(
    "context, needle",
    [("1000000", "expected at most max_position_embeddings=163840"), ("163840", "GiB")],
)
def test_bench_paths_context_beyond_the_model_or_memory_is_one_line(context, needle, capsys):
    import pdlab.engine.input_processor as ip

    # 1 GiB free, whatever this machine has: the check, not the machine, is under test
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ip, "available_bytes", lambda device: 2**30)
        with pytest.raises(SystemExit) as e:
            main(["bench", "paths", "--context", context])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("pdlab bench: error: --context") and needle in err


def test_version_and_help_do_not_import_torch():
    """``pdlab --version`` stays fast: building the parser imports no engine, no torch."""
    code = (
        "import sys\n"
        "from pdlab.cli import build_parser\n"
        "build_parser()\n"
        "print(sorted(m for m in ('torch', 'pdlab.engine.llm_engine', 'pdlab.kernels')"
        " if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_a_prompt_that_is_not_utf8_is_one_line_naming_prompt():
    for command in (["trace"], ["tour"], ["pd", "--procs", "1"]):
        r = subprocess.run(
            [sys.executable, "-m", "pdlab", *command, b"--prompt", b"ab\xff\xfe"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2 and "Traceback" not in r.stderr
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith(f"pdlab {command[0]}: error: argument --prompt: "), last
        assert "is not UTF-8 text" in last


def test_pd_decode_without_a_peer_reports_within_its_timeout(monkeypatch):
    """D waits for P's port itself, up to --timeout, and hands torch only the time left:
    c10d's store client, left to wait, retries once after its timeout (7.6 s for
    --timeout 3). With no listener torch's join is never entered."""
    import pdlab.disagg.group as group

    calls = []
    monkeypatch.setattr(group.dist, "init_process_group", lambda *a, **k: calls.append(k))
    with pytest.raises(group.PeerUnreachable, match="prefill peer at 127.0.0.1:.* within 0.5 s"):
        group.join_group(1, "127.0.0.1", group.free_port(), 0.5)
    assert calls == []


def _commands() -> dict[str, list[str]]:
    """Every subcommand with the arguments it needs to parse (its first action, if any)."""
    from pdlab.cli import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices
    needs = {"bench": ["paths"], "exercises": ["check", "3"], "train": []}
    return {name: [name, *needs.get(name, [])] for name in sub}


@pytest.mark.parametrize("command", sorted(_commands()))
def test_lang_is_accepted_before_and_after_every_command(command) -> None:
    from pdlab.cli import parse

    argv = _commands()[command]
    for where in (["--lang", "zh", *argv], [*argv, "--lang", "zh"], [*argv, "--lang=zh"]):
        assert parse(where)[1].lang == "zh", where
    assert parse(argv)[1].lang in ("en", None)  # None: the command's own (exercises keep it)
    if len(argv) > 1:  # between the command and its action
        assert parse([argv[0], "--lang", "zh", *argv[1:]])[1].lang == "zh"


def test_a_bad_lang_is_one_line_naming_the_command(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["exercises", "check", "3", "--lang", "fr"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert err[-1] == "pdlab exercises: error: argument --lang: invalid choice: 'fr' " + (
        "(choose from 'en', 'zh')"
    )
    # a prompt that merely mentions --lang is not taken for it
    from pdlab.cli import parse

    args = parse(["trace", "--prompt=--lang zh", "--lang", "zh"])[1]
    assert args.prompts == ["--lang zh"] and args.lang == "zh"


def test_every_help_fits_80_columns(monkeypatch) -> None:
    from pdlab.cli import _parsers, build_parser

    monkeypatch.setenv("COLUMNS", "80")
    parsers = _parsers(build_parser())
    assert len(parsers) > 10  # every subcommand and action
    for p in parsers:
        for line in p.format_help().splitlines():
            assert len(line) <= 80, f"{p.prog}: {line!r}"
    # the choices that left the usage line are still listed in the help
    tour = next(p for p in parsers if p.prog.endswith(" tour"))
    assert "flash_attn_mla" in tour.format_help() and "MLA_BACKEND" in tour.format_usage()


def _one_line_refusal(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2
    return err[-1]


def test_sim_refuses_an_empty_batch_and_says_when_nothing_arrived(capsys) -> None:
    assert "argument --batch-size: 0 is not >= 1" in _one_line_refusal(
        ["sim", "--batch-size", "0"], capsys
    )
    argv = ["sim", "--rate", "0", "--design", "recompute", "--routing", "v2"]
    assert main([*argv, "--duration", "0.05", "--json", "/dev/null"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    said = " ".join(text("en", "sim_no_arrivals", s=0.05, rate=0).split())
    assert said in out
    assert main([*argv[:2], "1000", *argv[3:], "--duration", "0.05"]) == 0
    assert said.split(" (")[0] not in " ".join(capsys.readouterr().out.split())


def test_json_into_a_missing_folder_is_refused(tmp_path, capsys) -> None:
    where = tmp_path / "no" / "such" / "x.json"
    line = _one_line_refusal(["trace", "--prompt", "hi", "--json", str(where)], capsys)
    assert line.startswith("pdlab trace: error: --json ") and "does not exist" in line
    assert not (tmp_path / "no").exists()  # nothing was created


def test_pd_holds_every_request_whole_without_naming_an_option_it_lacks(capsys) -> None:
    # 200 + 60 - 1 tokens in blocks of 1: more than the 256 blocks a default cache has
    argv = ["pd", "--procs", "1", "--prompt", "a" * 200, "--max-tokens", "60"]
    assert main([*argv, "--block-size", "1"]) == 0
    assert "num_blocks" not in capsys.readouterr().err


def test_role_decode_without_a_peer_answers_within_its_timeout() -> None:
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "pdlab.cli", "pd", "--role", "decode", "--port", "1"]
        + ["--timeout", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - t0
    assert r.returncode == 2
    assert (
        r.stderr == "pdlab pd: error: could not reach the prefill peer at 127.0.0.1:1 within 2 s\n"
    )
    assert elapsed < 2 + 1, f"answered after {elapsed:.1f} s for --timeout 2"


@pytest.mark.parametrize(
    "decode_args, prefill_args, needle",
    [
        ([], ["--num-speculative-tokens", "2"], "P has 'mtp', D has None"),
        (["--num-speculative-tokens", "2"], [], "P has None, D has 'mtp'"),
        (
            ["--num-speculative-tokens", "2", "--speculative-method", "mtp"],
            ["--num-speculative-tokens", "2", "--speculative-method", "ngram"],
            "P has 'ngram', D has 'mtp'",
        ),
        (
            ["--num-speculative-tokens", "1"],
            ["--num-speculative-tokens", "2"],
            "num_speculative_tokens differs between the two sides: P has 2, D has 1",
        ),
    ],
    ids=["none-vs-k", "k-vs-none", "ngram-vs-mtp", "k1-vs-k2"],
)
def test_pd_roles_with_different_speculative_settings_stop_at_the_handshake(
    decode_args, prefill_args, needle
):
    # Issue 42, item 1: both sides refuse in one line and exit non-zero, before any request.
    p, d_code, d_out, d_err = _two_roles([], decode_args, prefill_args)
    _one_error_line(p, "pd", needle)
    assert d_code == 2 and d_out == "" and "Traceback" not in d_err
    assert d_err.strip().splitlines()[-1].startswith("pdlab pd: error: ")
    assert "differs between the two sides" in d_err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            ["pd", "--procs", "1", "--speculative-method", "ngram"],
            "--speculative-method ngram has no effect without --num-speculative-tokens",
        ),
        (
            ["sim", "--acceptance-rate", "0.5"],
            "--acceptance-rate 0.5 has no effect without --num-speculative-tokens",
        ),
        (["pd", "--procs", "1", "--num-speculative-tokens", "1000"], "1000 is not an integer"),
        (["tour", "--num-speculative-tokens", "17"], "17 is not an integer from 1 to 16"),
        (["bench", "paths", "--num-speculative-tokens", "1000000"], "from 1 to 16"),
        (["sim", "--seed", str(10**39)], "is not an integer from 0 to 9223372036854775807"),
        (["train", "--seed", str(10**39)], "is not an integer from 0 to 9223372036854775807"),
        (["train", "--seed", "-1"], "-1 is not an integer from 0 to"),
    ],
)
def test_speculative_and_seed_options_out_of_bounds_are_one_line(argv, needle, capsys):
    # Issue 42, item 6: each refused before any work, naming the option.
    line = _one_line_refusal(argv, capsys)
    assert line.startswith(f"pdlab {argv[0]}") and ": error: " in line and needle in line, line


def test_a_large_k_in_bounds_gets_a_cache_that_holds_it(capsys):
    assert main(["pd", "--procs", "1", "--num-speculative-tokens", "16", "--block-size", "1",
                 "--speculative-method", "ngram"]) == 0  # fmt: skip
    assert "too small" not in capsys.readouterr().err
