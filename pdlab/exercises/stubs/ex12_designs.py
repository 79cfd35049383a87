import dataclasses  # noqa: F401 - dataclasses.replace(sampling_params, ...) may help
# zh: noqa: F401 - `dataclasses.replace(sampling_params, ...)` 也许用得上

from pdlab.disagg.designs import HandOff  # noqa: F401 - what hand_off returns
# zh: noqa: F401 - hand_off 的返回值

# First predict: D's first step for an N = 13 prompt under each design, as
# (num_computed_tokens before the step, tokens scheduled in it, is_prefilling).
# zh: 先预测：N = 13 的提示词在每种设计下 D 的第一步，写成
# zh: (这一步之前的 num_computed_tokens, 这一步调度的 token 数, is_prefilling)。
PREDICTIONS = {
    "recompute": None,
    "first_token": None,
    "append_prompt": None,
    "hidden_state": None,
}


def hand_off(mode, prompt, sampling_params, p_tokens, kv_transfer_params, p_step, max_model_len):
    """The proxy's step 2: P finished ``prompt`` with ``p_tokens`` (its one sampled token)
    and ``kv_transfer_params`` (where its blocks are; None when P could not hand over).
    Return ``HandOff(prompt, sampling_params, kv_transfer_params, prefix=[], done=False,
    finish_reason=None)``: what D is sent, and the tokens the proxy puts before D's.
    ``done=True`` answers with ``prefix`` alone (D is never asked). The designs:
    "recompute" and "hidden_state" send nothing of P's token; "first_token" sends it in
    the params as ``first_token_ids=[t]``; "append_prompt" appends it to D's prompt."""
    # zh: """代理的第 2 步：P 对 `prompt` 做完了预填充，得到 `p_tokens`（它采样的一个 token）
    # zh: 和 `kv_transfer_params`（它的块在哪里；P 无法交接时为 None）。
    # zh:
    # zh: 返回 `HandOff(...)`，字段依次为 `prompt`、`sampling_params`、`kv_transfer_params`、
    # zh: `prefix=[]`、`done=False`、`finish_reason=None`：发给 D 什么，以及代理放在 D 的 token
    # zh: 前面的 token。`done=True` 只用 `prefix` 作答（根本不请求 D）。各设计："recompute" 和
    # zh: "hidden_state" 不传 P 的 token；"first_token" 把它放进参数 `first_token_ids=[t]`；
    # zh: "append_prompt" 把它追加到 D 的提示词后。"""
    raise NotImplementedError("write PREDICTIONS, then hand_off")
