"""Make every `/run` result one NeMo RL can consume, also when the model generated nothing.

NeMo RL's Gym environment (`_postprocess_nemo_gym_to_nemo_rl_result` in
`nemo_rl/environments/nemo_gym.py`) raises "NeMo Gym returned a result with no generation data"
for a result without an output item carrying non-empty `generation_token_ids`, masked or not; on
the synchronous GRPO path that exception ends the training run. Gym's own agents hit the same
wall (Gym's `vllm_model` answers a first-turn context overflow with an empty completion). A
rollout ends without a generated turn when the first prompt already overflows the context or the
time budget runs out before the first turn; it is still one result per row, so it must be
trainable-shaped: one placeholder assistant item of one token, flagged
`instance_config.mask_sample` (NeMo RL drops flagged samples from the loss on the synchronous
path; they still count in the reward baseline there, and the single-controller path ignores the
flag, see the integrations README).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Any id inside every vocabulary: the item is masked from the loss, so its value never trains.
PLACEHOLDER_TOKEN_ID = 0
NO_GENERATION = "no_generation"


def has_trainable_item(output: Any) -> bool:
    """NeMo RL's gate: an output item with non-empty `generation_token_ids`."""
    return isinstance(output, list) and any(
        isinstance(item, Mapping) and item.get("generation_token_ids") for item in output
    )


def placeholder_item(trajectory_id: str) -> dict[str, Any]:
    return {
        "id": f"msg_{trajectory_id}_placeholder",
        "type": "message",
        "role": "assistant",
        "status": "incomplete",
        "content": [{"type": "output_text", "text": "", "annotations": []}],
        "prompt_token_ids": [PLACEHOLDER_TOKEN_ID],
        "generation_token_ids": [PLACEHOLDER_TOKEN_ID],
        "generation_log_probs": [0.0],
    }


def ensure_trainable(body: dict[str, Any], *, trajectory_id: str, reason: str) -> dict[str, Any]:
    """Give a result with no generated turn the masked placeholder shape (in place; returned)."""
    response = body.get("response")
    if not isinstance(response, dict) or has_trainable_item(response.get("output")):
        return body
    output = response.get("output") if isinstance(response.get("output"), list) else []
    response["output"] = [*output, placeholder_item(trajectory_id)]
    body["mask_sample"] = True
    instance_config = body.get("instance_config") if isinstance(body.get("instance_config"), dict) else {}
    body["instance_config"] = {**instance_config, "mask_sample": True}
    body["failure_kind"] = body.get("failure_kind") or NO_GENERATION
    body["failure_reason"] = body.get("failure_reason") or f"no model turn was generated ({reason})"
    return body
