# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The body and status `/run` answers: NeMo Gym's verify response for a finished rollout."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from nemo_gym_prorl.integrations.nemo_rl.result import ensure_trainable
from nemo_gym_prorl.pipeline import JobResult
from nemo_gym_prorl.pipeline.job import Trajectory
from nemo_gym_prorl.rollouts.delivery import harness_delivery


def sampling_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """NeMo RL stamps temperature/top_p/max_output_tokens on responses_create_params."""
    params = row.get("responses_create_params") or {}
    out: dict[str, Any] = {}
    for src, dst in (("temperature", "temperature"), ("top_p", "top_p"), ("max_output_tokens", "max_tokens")):
        if params.get(src) is not None:
            out[dst] = params[src]
    return out


def run_result(row: Mapping[str, Any], result: JobResult) -> dict[str, Any]:
    """The Gym verify response `/run` returns for a finished job."""
    trajectory = result.trajectory
    assert trajectory is not None
    report = result.report
    verify: dict[str, Any] = dict(report.get("verify") or {})
    body: dict[str, Any] = {k: v for k, v in row.items() if k not in verify}
    body.update(verify)
    body["responses_create_params"] = row.get("responses_create_params")
    body["response"] = trajectory.response
    reward = float(result.reward or 0.0)
    inference_failed = trajectory.infrastructure_failed
    masked = bool(verify.get("mask_sample")) or bool(report.get("mask_sample")) or inference_failed
    split = split_harness_reason(trajectory)
    masked = masked or split is not None
    body["reward"] = reward
    body["reward_components"] = dict(result.reward_components) or {"reward": reward}
    body["mask_sample"] = masked
    given = verify.get("instance_config")
    instance_config: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    body["instance_config"] = {**instance_config, "mask_sample": masked}
    if masked and not body.get("failure_kind"):
        if split is not None and not inference_failed and not report.get("mask_sample"):
            body["failure_kind"] = SPLIT_SEQUENCE
            body["failure_reason"] = split
        elif inference_failed:
            failure = trajectory.failure or {}
            body["failure_kind"] = "provider_unavailable"
            body["failure_reason"] = (
                f"inference failed mid-trajectory: {failure.get('kind')}: {failure.get('message')}"
            )
        else:
            body["failure_kind"] = report.get("failure_kind") or "verifier_error"
            body["failure_reason"] = report.get("failure_reason")
    timing = result.timing
    # Numeric top-level fields: NeMo RL logs them as metrics.
    body.update(
        init_time_s=timing.init_time,
        run_time_s=timing.run_time,
        eval_time_s=timing.eval_time,
        queue_wait_s=timing.init_wait + timing.run_wait + timing.eval_wait,
        total_time_s=timing.total_elapsed,
        num_turns=trajectory.num_turns,
        generated_tokens=trajectory.generated_tokens,
        num_tool_calls=len(trajectory.steps),
        tool_errors=trajectory.tool_errors,
        end_properly=float(bool(trajectory.end_properly)),
    )
    body["prorl"] = {
        "job_id": result.id,
        "task": result.task,
        "stop_reason": trajectory.stop_reason,
        "reroutes": trajectory.reroutes,
        "http_retries": trajectory.http_retries,
        "decoding": trajectory.decoding,
        "nodes": [a.node for a in result.attempts],  # where each start ran (Ray: node ids)
        "infra_retries": result.infra_retries,
    }
    if trajectory.harness is not None:  # which harness drove RUN, its calls and token segments
        body["prorl"]["harness"] = trajectory.harness
    # NeMo RL cannot consume a result without a generated turn (first prompt overflowed, time ran out).
    return ensure_trainable(body, trajectory_id=result.id, reason=str(trajectory.stop_reason))


# Namespaced as Gym's failure vocabulary allows for what it has no name for.
SPLIT_SEQUENCE = "prorl:split_token_sequence"


def split_harness_reason(trajectory: Trajectory) -> str | None:
    """Why a harness rollout cannot be one `/run` result: NeMo RL trains one contiguous token
    sequence per result, and a harness that rewrote its history made several. The result is
    masked rather than trained on one segment with the reward of all (every segment is in
    `prorl.harness.token_segments`). Where the rollout's Gym token capture was built, Gym's
    builder decided (`rollouts.delivery`): the same verdict the project's TRL trainer follows."""
    delivery = harness_delivery(trajectory.harness)
    if delivery is not None:
        return delivery.mask_reason
    segments = (trajectory.harness or {}).get("token_segments") or []
    if len(segments) <= 1:
        return None
    return (
        f"the harness rollout is {len(segments)} token sequences (its history was rewritten between calls); "
        "one /run result carries one sequence: masked, every segment in prorl.harness.token_segments"
    )


class RunOutcome(NamedTuple):
    status: int
    body: dict[str, Any]
    headers: dict[str, str] | None = None  # e.g. `Retry-After` with a full queue


def error_outcome(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> RunOutcome:
    return RunOutcome(status, {"error": kind, "detail": message}, headers)
