"""The notebooks' graded "check yourself" cells (``pdlab/exercises/notebook_checks.py``):
pdlab's answers are the ones the notebooks teach, a prediction is judged against them, and
nothing is revealed before every prediction is in (or ``solution=True``)."""

import pytest


def _formula_answers():
    """What each notebook's check cell used to assert, from the formulas the notebooks
    teach: N - 1 capped whole blocks, ceil(N / budget) chunks, the crossover's ratio."""
    from pdlab.engine.config import ModelConfig
    from pdlab.sim.kernel_costs import absorb_crossover_query_len

    v3 = absorb_crossover_query_len(ModelConfig.deepseek_v3())
    return {
        "01": {f"{k}_{n}": v for n in (23, 24)
               for k, v in (("reused", (n - 1) // 8 * 8), ("computed", n - (n - 1) // 8 * 8))},
        "02": {"first_sample_step": -(-50 // 16), "num_steps": -(-50 // 16) + 3 - 1},
        "03": {"crossover_tiny": round(64 * (32 + 32) / ((2 * 64 + 16) - (32 + 16 + 32)), 1),
               "crossover_v2_lite": round(v3, 1), "depends_on_heads": False},
        "04": {"empty_part_returns_the_other": True, "order_matters": False,
               "more_splits_than_tokens_same": True},
        "05": {"a_num_computed_tokens": 36, "b_forward": "forward_mha", "c_rows_gathered": 36,
               "d_local_reuse": 36 // 16 * 16, "e_p_forward_flashmla": "forward_mqa"},
        # 9 tokens under PCP: N - 1 for recompute; a prompt row for append_prompt, a decode
        # for first_token; the two designs whose first row is a decode keep the batch uniform
        "07": {"a_recompute_computed": 9 - 1, "b_append_prompt_forward": "forward_mha",
               "c_first_token_forward": "forward_mqa", "d_uniform_designs": 2},
    }  # fmt: skip


@pytest.mark.parametrize("notebook", ["01", "02", "03", "04", "05", "07"])
def test_notebook_check_grades_predictions_and_hides_answers(notebook, capsys):
    from pdlab.exercises.notebook_checks import answers, notebook_check

    right = _formula_answers()[notebook]
    assert answers(notebook) == right
    first, *rest = right
    assert not notebook_check(notebook, {first: right[first]}, lang="en")
    hidden = capsys.readouterr().out
    assert rest[0] in hidden and repr(right[rest[0]]) not in hidden.split(rest[0])[-1]
    assert notebook_check(notebook, right)
    assert "All right" in capsys.readouterr().out
    wrong = dict(right, **{first: "no" if not isinstance(right[first], str) else "forward_x"})
    assert not notebook_check(notebook, wrong, lang="zh")
    out = capsys.readouterr().out
    assert "你的答案是" in out and repr(right[first]) in out
    assert not notebook_check(notebook, {}, solution=True)
    shown = capsys.readouterr().out
    assert all(repr(v) in shown for v in right.values())


def test_notebook_check_names_an_unknown_prediction():
    from pdlab.exercises.notebook_checks import notebook_check

    with pytest.raises(ValueError, match="predictions=\\['typo'\\] are unknown"):
        notebook_check("01", {"typo": 1})
