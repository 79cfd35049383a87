"""``--num-speculative-tokens K`` on ``pdlab tour``, ``trace`` and ``pd``: the runs draft
with MTP and still give greedy's tokens; bad values are one line and exit 2."""

import json

import pytest

from pdlab.cli import main
from pdlab.engine.config import ModelConfig
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM

MODEL = DeepseekV2ForCausalLM(ModelConfig.tiny(weights="random", num_nextn_predict_layers=1))


@pytest.mark.parametrize("command", ["tour", "trace", "pd"])
@pytest.mark.parametrize("bad", ["0", "-1", "two"])
def test_bad_k_is_one_line_and_exit_2(command, bad, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--num-speculative-tokens", bad])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"pdlab {command}: error: argument --num-speculative-tokens")


def test_trace_with_mtp_saves_ds_padded_first_step(tmp_path, capsys):
    path = tmp_path / "t.json"
    args = ["trace", "--pd", "--prompt", "hello there", "--max-tokens", "5", "--weights"]
    assert main([*args, "random", "--num-speculative-tokens", "2", "--json", str(path)]) == 0
    events = json.loads(path.read_text())["events"]
    steps = [e for e in events if e["kind"] == "step" and e["instance"] == "D"]
    first = steps[0]["scheduled"][0]
    assert (first["num_computed_tokens_before"], first["num_scheduled_tokens"]) == (10, 3)
    assert first["spec_token_ids"] == [-1, -1]
    sampled = [e["token"] for e in events if e["kind"] == "sample" and e["instance"] == "D"]
    assert sampled == MODEL.greedy_generate(list(b"hello there"), 5)


def test_pd_with_mtp_in_one_process(capsys):
    argv = ["pd", "--procs", "1", "--prompt", "abcdefgh", "--max-tokens", "4"]
    assert main([*argv, "--weights", "random", "--num-speculative-tokens", "1"]) == 0
    assert "num_computed_tokens = 7 (N - 1, N = 8)" in capsys.readouterr().out


def test_tour_with_mtp_runs_chapter_4(capsys):
    argv = ["tour", "--chapter", "4", "--weights", "random", "--num-speculative-tokens", "1"]
    assert main([*argv, "--gpu", "h200"]) == 0
    out = capsys.readouterr().out
    assert "query_len = 2" in out


def test_pd_with_ngram_in_one_process(capsys):
    argv = ["pd", "--procs", "1", "--prompt", "abcabcabc", "--max-tokens", "4"]
    argv += ["--num-speculative-tokens", "2", "--speculative-method", "ngram"]
    assert main(argv) == 0


def test_bad_method_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["trace", "--num-speculative-tokens", "2", "--speculative-method", "eagle"])
    assert e.value.code == 2
    assert "--speculative-method" in capsys.readouterr().err.strip().splitlines()[-1]
