import dataclasses  # noqa: F401 - `dataclasses.replace(sampling_params, ...)` 也许用得上

from pdlab.disagg.designs import HandOff  # noqa: F401 - hand_off 的返回值

# 先预测：N = 13 的提示词在每种设计下 D 的第一步，写成
# (这一步之前的 num_computed_tokens, 这一步调度的 token 数, is_prefilling)。
PREDICTIONS = {
    "recompute": None,
    "first_token": None,
    "append_prompt": None,
    "hidden_state": None,
}


def hand_off(mode, prompt, sampling_params, p_tokens, kv_transfer_params, p_step, max_model_len):
    """代理的第 2 步：P 对 `prompt` 做完了预填充，得到 `p_tokens`（它采样的一个 token）
    和 `kv_transfer_params`（它的块在哪里；P 无法交接时为 None）。

    返回 `HandOff(...)`，字段依次为 `prompt`、`sampling_params`、`kv_transfer_params`、
    `prefix=[]`、`done=False`、`finish_reason=None`：发给 D 什么，以及代理放在 D 的 token
    前面的 token。`done=True` 只用 `prefix` 作答（根本不请求 D）。各设计："recompute" 和
    "hidden_state" 不传 P 的 token；"first_token" 把它放进参数 `first_token_ids=[t]`；
    "append_prompt" 把它追加到 D 的提示词后。"""
    raise NotImplementedError("write PREDICTIONS, then hand_off")
