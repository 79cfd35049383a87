"""The ``pdlab`` command's pd and bench subcommands, and its handling of bad options."""

import json
import subprocess
import sys

import pytest

from pdlab.cli import main


def test_pd_in_one_process(capsys):
    assert (
        main(["pd", "--procs", "1", "--prompt", "abcdefgh", "--max-tokens", "3", "--pcp", "2"]) == 0
    )
    out = capsys.readouterr().out
    assert "num_computed_tokens = 7 (N - 1, N = 8)" in out
    assert "_forward_prefill" in out and "KV blocks moved P -> D" in out


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


def test_pd_roles_as_two_commands():
    """The two-machine form: one command per side, meeting at --host/--port."""
    from pdlab.pd_procs import free_port

    port = str(free_port())
    base = [
        sys.executable,
        "-m",
        "pdlab.cli",
        "pd",
        "--port",
        port,
        "--timeout",
        "60",
        "--max-tokens",
        "2",
    ]
    d = subprocess.Popen(
        base + ["--role", "decode"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        p = subprocess.run(
            base + ["--role", "prefill", "--prompt", "two machines"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        d_out, d_err = d.communicate(timeout=60)
    finally:
        if d.poll() is None:
            d.kill()
            d.wait()
    assert p.returncode == 0, p.stdout + p.stderr
    assert d.returncode == 0, d_out + d_err
    res = json.loads(p.stdout)
    assert res["role"] == "prefill" and len(res["outputs"]["req-0"]["output_token_ids"]) == 2
    assert res["free_blocks"].split("/")[0] == res["free_blocks"].split("/")[1]
    assert json.loads(d_out)["role"] == "decode"
