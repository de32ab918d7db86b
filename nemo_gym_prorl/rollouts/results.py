# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A finished rollout as the service returns it, in the part a trainer reads: its result, its
trajectory's model turns, whether it may be trained on, and its token sequence.

A multi-turn trajectory is one token sequence: the first model call's prompt ids, then the
model's tokens and, between its turns, the tokens the environment added (tool results,
observations, the chat template's turn markup), which are exactly the part of each later prompt
that extends the previous prompt plus its generation (`concatenate`). No text is re-tokenized:
the ids are the ones the policy saw and sampled.

A rollout must not be trained on (`mask_reason`) when it failed or was cancelled, its
infrastructure failed, it has no reward or no model turn, or a turn was sampled under
constrained decoding. A harness rollout may hold several token sequences (`segments`).

Pure Python and pydantic: the project venv and the trainers' model venv both import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class NotTokenExactError(ValueError):
    """A later prompt does not extend the earlier prompt and generation: the recorded token
    history was re-tokenized somewhere, so log-probs and ids cannot be aligned."""


class ModelTurn(BaseModel):
    """The token fields the service records on each assistant message."""

    model_config = ConfigDict(extra="ignore")

    prompt_token_ids: list[int]
    generation_token_ids: list[int]
    generation_log_probs: list[float]
    decoding: dict[str, Any] | None = Field(
        None, description="the decoding constraint the turn was sampled under (None: unconstrained)"
    )


class ServiceTrajectory(BaseModel):
    model_config = ConfigDict(extra="ignore")

    messages: list[dict[str, Any]] = Field(default_factory=list)
    stop_reason: str | None = None
    steps: list[dict[str, Any]] = Field(default_factory=list, description="one per tool call")
    num_turns: int = 0
    generated_tokens: int = 0
    decoding: dict[str, Any] | None = Field(
        None,
        description="the service's summary of its turns' decoding constraints (None: none was constrained)",
    )
    harness: dict[str, Any] | None = Field(
        None, description="a harness rollout's record: its calls, and every token segment (`token_segments`)"
    )

    def segments(self) -> list[list[ModelTurn]]:
        """Every token sequence of the rollout: a harness's segments, complete, or the one the
        messages carry."""
        recorded = (self.harness or {}).get("token_segments")
        if recorded:
            return [[ModelTurn.model_validate(turn) for turn in segment] for segment in recorded if segment]
        turns = model_turns(self)
        return [turns] if turns else []


class ServiceResult(BaseModel):
    """The part of the service's `JobResult` (`/v1/rollouts` results) the trainer reads."""

    model_config = ConfigDict(extra="ignore")

    id: str
    state: str
    group_id: str | None = None
    reward: float | None = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    trajectory: ServiceTrajectory | None = None
    report: dict[str, Any] = Field(default_factory=dict)
    mask_sample: bool = False
    error: str | None = None
    cancel_reason: str | None = None
    policy_versions: list[int] = Field(default_factory=list)
    staleness: int | None = None
    stale: bool = False


def model_turns(trajectory: ServiceTrajectory) -> list[ModelTurn]:
    """The assistant messages that carry token fields, in order."""
    return [
        ModelTurn.model_validate(message)
        for message in trajectory.messages
        if message.get("role") == "assistant" and "generation_token_ids" in message
    ]


def concatenate(turns: Sequence[ModelTurn]) -> tuple[list[int], list[int], list[float], list[int]]:
    """(prompt_ids, completion_ids, logprobs, env_mask) of a non-empty list of model turns."""
    if not turns:
        raise ValueError("a trajectory without a model turn has no completion")
    prompt = list(turns[0].prompt_token_ids)
    completion: list[int] = []
    logprobs: list[float] = []
    env_mask: list[int] = []
    history = prompt
    for index, turn in enumerate(turns):
        if turn.prompt_token_ids[: len(history)] != history:
            raise NotTokenExactError(
                f"turn {index}: its prompt ({len(turn.prompt_token_ids)} ids) does not start with the "
                f"previous prompt and generation ({len(history)} ids)"
            )
        if len(turn.generation_token_ids) != len(turn.generation_log_probs):
            raise NotTokenExactError(
                f"turn {index}: {len(turn.generation_token_ids)} generated ids but "
                f"{len(turn.generation_log_probs)} log-probs"
            )
        environment = turn.prompt_token_ids[len(history) :]
        completion += [*environment, *turn.generation_token_ids]
        logprobs += [0.0] * len(environment) + list(turn.generation_log_probs)
        env_mask += [0] * len(environment) + [1] * len(turn.generation_token_ids)
        history = [*turn.prompt_token_ids, *turn.generation_token_ids]
    return prompt, completion, logprobs, env_mask


def constrained_decoding(trajectory: ServiceTrajectory) -> str | None:
    """Which of a trajectory's turns were sampled under a decoding constraint (guided, grammar,
    structural tag), from each model turn's recorded `decoding` or, where the turns do not carry
    it, the trajectory's summary of them; None when every turn was the policy's free sample."""
    turns = model_turns(trajectory)
    constrained = [index for index, turn in enumerate(turns) if turn.decoding]
    if constrained:
        kinds = sorted({str((turns[i].decoding or {}).get("kind", "a constraint")) for i in constrained})
        return f"model turn(s) {', '.join(map(str, constrained))} of {len(turns)} sampled under {', '.join(kinds)}"
    summary = trajectory.decoding
    if not summary or summary.get("constrained") is False or summary.get("constrained_turns") == 0:
        return None
    count = summary.get("constrained_turns", "some")
    return f"{count} of {len(turns)} model turn(s) sampled under {summary.get('kind', 'a constraint')}"


def mask_reason(result: ServiceResult) -> str | None:
    """Why this rollout must not be trained on, or None when it may be."""
    if result.state != "done":
        detail = result.error or result.cancel_reason or "no detail"
        return f"rollout {result.state}: {detail}"
    if result.mask_sample or result.report.get("mask_sample"):
        detail = result.report.get("detail") or result.error or "masked by the service"
        return f"infrastructure failure: {detail}"
    if result.reward is None:
        return "finished without a reward"
    if result.trajectory is None or not model_turns(result.trajectory):
        return "no model turn was recorded"
    constrained = constrained_decoding(result.trajectory)
    if constrained is not None:
        # Its log-probs are from the masked, renormalised distribution and its tokens were forced:
        # training on it as the policy's own sample would bias the ratios and teach the format.
        return f"constrained decoding: {constrained}, not the policy's free sample"
    return None


def scored_reward(result: ServiceResult) -> float | None:
    """The rollout's reward where it counts, else None: one rule (`mask_reason`) for every
    figure, the training samples, a step's statistics and the held-out evaluations alike."""
    return float(result.reward or 0.0) if mask_reason(result) is None else None
