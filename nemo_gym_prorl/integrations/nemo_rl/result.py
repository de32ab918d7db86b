# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Make every `/run` result one NeMo RL can consume, also when the model generated nothing.

NeMo RL's Gym environment (`_postprocess_nemo_gym_to_nemo_rl_result` in
`nemo_rl/environments/nemo_gym.py`) raises "NeMo Gym returned a result with no generation data"
for a result without an output item carrying non-empty `generation_token_ids`, masked or not; on
the synchronous GRPO path that exception ends the training run. Gym's own agents hit the same
wall (Gym's `vllm_model` answers a first-turn context overflow with an empty completion). A
rollout ends without a generated turn when the first prompt already overflows the context or the
time budget runs out before the first turn; it is still one result per row, so it must be
trainable-shaped: one placeholder assistant item of one token, with reward 0, flagged
`instance_config.mask_sample`.

Why that is harmless on both NeMo RL paths (7ea279a): GRPO groups samples for the baseline by
their first-turn prompt tokens (`calculate_baseline_and_std_per_prompt` over the first user
message). The placeholder's one-token prompt matches no real prompt, so it never enters its
task's group; alone (or with other placeholders, all rewarded 0) its baseline equals its reward,
so its advantage is 0. The synchronous path also drops it from the loss (`mask_sample`); the
single controller commits `sample_mask` as all ones and so trains it, with advantage 0. With DAPO's
dynamic sampling its group has zero variance and is filtered out.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal

# Any id inside every vocabulary: the item is masked from the loss, so its value never trains.
PLACEHOLDER_TOKEN_ID = 0
# Gym's failure vocabulary has no name for it: namespaced, as Gym asks of a plugin's own kinds.
NO_GENERATION = "prorl:no_generation"


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
    output = response.get("output")
    response["output"] = [*(output if isinstance(output, list) else []), placeholder_item(trajectory_id)]
    # No generated turn, no answer: reward 0 keeps every placeholder's advantage at 0.
    body["reward"] = 0.0
    components = body.get("reward_components")
    body["reward_components"] = (
        {str(k): 0.0 for k in components}
        if isinstance(components, Mapping) and components
        else {"reward": 0.0}
    )
    body["mask_sample"] = True
    instance_config = body.get("instance_config")
    body["instance_config"] = {
        **(instance_config if isinstance(instance_config, dict) else {}),
        "mask_sample": True,
    }
    body["failure_kind"] = body.get("failure_kind") or NO_GENERATION
    body["failure_reason"] = body.get("failure_reason") or f"no model turn was generated ({reason})"
    return body


# -- infrastructure failures on NeMo RL's synchronous path --------------------------------------

InfrastructureFailureAnswer = Literal["http_status", "masked_result"]


def masked_failure_result(
    row: Mapping[str, Any], *, status: int, error: str, detail: str, trajectory_id: str
) -> dict[str, Any]:
    """A `/run` result for a rollout that infrastructure prevented: masked, reward 0, placeholder turn.

    For NeMo RL's synchronous GRPO path, which aborts the whole training run on any non-200 from
    `/run`: an outage of a resources server or of every policy rank then costs samples, not the run.
    """
    given = row.get("responses_create_params")
    params: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    body: dict[str, Any] = dict(row)
    body["responses_create_params"] = row.get("responses_create_params")
    body["response"] = {
        "id": f"resp_{trajectory_id}",
        "object": "response",
        "created_at": float(time.time()),
        "model": str(params.get("model") or "unknown"),
        "output": [],
        "parallel_tool_calls": bool(params.get("parallel_tool_calls", True)),
        "tool_choice": params.get("tool_choice") or "auto",
        "tools": list(params.get("tools") or []),
        "temperature": params.get("temperature"),
        "top_p": params.get("top_p"),
        "status": "failed",
        "incomplete_details": None,
        "metadata": {"stop_reason": error, "trajectory_id": trajectory_id},
    }
    body["failure_kind"] = "agent_timeout" if status == 504 else "provider_unavailable"
    body["failure_reason"] = f"HTTP {status} {error}: {detail}"[:2000]
    body["prorl"] = {"job_id": trajectory_id, "http_status": status, "error": error}
    return ensure_trainable(body, trajectory_id=trajectory_id, reason=error)


def answer_for_trainer(
    status: int, body: Mapping[str, Any], row: Mapping[str, Any], answer: InfrastructureFailureAnswer
) -> tuple[int, dict[str, Any]]:
    """The `/run` answer for the trainer's path: 5xx kept (`http_status`: NeMo RL's single
    controller retries them) or turned into a masked 200 (`masked_result`: its synchronous path)."""
    if answer == "http_status" or status < 500:
        return status, dict(body)
    error = str(body.get("error") or "infrastructure")
    detail = str(body.get("detail") or "")
    return 200, masked_failure_result(
        row, status=status, error=error, detail=detail, trajectory_id=f"failed-{uuid.uuid4().hex}"
    )
