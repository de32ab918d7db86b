# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A finished rollout, as the service returns it (`nemo_gym_prorl.rollouts.results`), in the
fields TRL's `rollout_func` returns.

A multi-turn trajectory is one TRL sample: the first model call's prompt ids are `prompt_ids`;
everything after them is `completion_ids`: the model's tokens and, between its turns, the tokens
the environment added (tool results, observations, the chat template's turn markup), which are
exactly the part of each later prompt that extends the previous prompt plus its generation.
`env_mask` is 1 on the model's tokens and 0 on the environment's (TRL trains on the 1s only);
`logprobs` are the log-probs the service recorded for the model's tokens and 0.0 elsewhere.
No text is re-tokenized: the ids are the ones the policy saw and sampled.

A rollout that must not be trained on (failed, cancelled, its infrastructure failed, a turn
sampled under constrained decoding, or its token history is not exact) becomes a one-token
placeholder with `env_mask` 0 and no reward, so its group keeps `num_generations` members while
it adds nothing to the loss or the baseline.

A harness rollout's calls were written as NeMo Gym token-capture records as it ran, and Gym's
consumer and builder built them when it ended (`rollouts.delivery`). With one slot per rollout
its sample is the chain Gym delivered (root to the reply the scorer saw, in Gym's own
projection); where Gym masked the rollout (the harness broke the token chain before the scored
reply: a dropped reply, a rewritten or summarised history; or a record was lost) it is a
placeholder with Gym's reason, as NeMo RL's `/run` masks it: no fragment is trained with the whole
rollout's reward. With `slots` above one (`rollout_samples`) each chain (segment) is a sample of
its own with the rollout's reward, the slots it leaves empty are placeholders, and a rollout with
more segments than slots is masked with that reason. TRL's groups then hold `slots` samples per
rollout, and a rollout's segments each count in its group's baseline (unlike NeMo RL's, whose
baseline counts each rollout once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.rollouts.delivery import TokenDelivery, harness_delivery
from nemo_gym_prorl.rollouts.results import (
    ModelTurn,
    NotTokenExactError,
    ServiceResult,
    concatenate,
    mask_reason,
    model_turns,
)

# TRL's required keys, then ours: every other key reaches the reward functions as a keyword.
TRL_KEYS = ("prompt_ids", "completion_ids", "logprobs", "env_mask")
EXTRA_KEYS = ("reward", "reward_components", "stop_reason", "mask_sample", "mask_reason", "rollout_id")
# The mask reason of a slot a rollout leaves empty (not a rollout that was masked).
EMPTY_SLOT = "an empty slot"


class TrlSample(BaseModel):
    """One completion in TRL's terms, plus what the reward function and the logs need."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float | None] = Field(
        description="the sampler's log-prob of each completion token; None where no policy sampled it "
        "(a demonstration's tokens: TRL reads them as NaN)"
    )
    env_mask: list[int]
    reward: float | None = Field(description="None when the sample is masked: TRL then leaves it out")
    reward_components: dict[str, float] = Field(default_factory=dict)
    stop_reason: str | None = None
    mask_sample: bool = False
    mask_reason: str | None = None
    rollout_id: str
    origin: str | None = Field(None, description="None: the policy's own sample; else what wrote it")

    @property
    def model_tokens(self) -> int:
        return sum(self.env_mask)


def to_sample(
    result: ServiceResult | Mapping[str, Any],
    *,
    placeholder_prompt_ids: Sequence[int],
    placeholder_token_id: int | None = None,
) -> TrlSample:
    """The TRL sample of one finished rollout (its messages' token sequence).

    `placeholder_prompt_ids`: the prompt a masked sample carries (a sibling's prompt keeps the
    group's prompt shared); its completion is `placeholder_token_id` (the tokenizer's EOS, so TRL
    does not count it as truncated; default: the prompt's last id) once, with `env_mask` 0.
    """
    if not isinstance(result, ServiceResult):
        result = ServiceResult.model_validate(result)
    reason = mask_reason(result)
    if reason is None:
        assert result.trajectory is not None  # mask_reason checked it
        delivery = harness_delivery(result.trajectory.harness)
        if delivery is not None:
            sample = _delivered(result, delivery)
        else:
            sample = _sample(result, model_turns(result.trajectory))
        if isinstance(sample, TrlSample):
            return sample
        reason = sample
    return placeholder(result, reason, placeholder_prompt_ids, placeholder_token_id)


def rollout_samples(
    result: ServiceResult | Mapping[str, Any],
    *,
    slots: int,
    placeholder_prompt_ids: Sequence[int],
    placeholder_token_id: int | None = None,
) -> list[TrlSample]:
    """The `slots` samples of one rollout: each of its token segments with the rollout's reward,
    then placeholders; all placeholders, with the reason, when it may not be trained on or has
    more segments than slots. One slot: `to_sample`."""
    if slots == 1:
        return [
            to_sample(
                result,
                placeholder_prompt_ids=placeholder_prompt_ids,
                placeholder_token_id=placeholder_token_id,
            )
        ]
    if not isinstance(result, ServiceResult):
        result = ServiceResult.model_validate(result)
    reason = mask_reason(result)
    samples: list[TrlSample] = []
    if reason is None:
        assert result.trajectory is not None  # mask_reason checked it
        segments = result.trajectory.segments()
        if len(segments) > slots:
            reason = f"{len(segments)} token segments, {slots} sample slots per rollout"
        for turns in segments if reason is None else []:
            sample = _sample(result, turns)
            if not isinstance(sample, TrlSample):
                reason, samples = sample, []
                break
            samples.append(sample)
    if reason is not None:
        return [
            placeholder(result, reason, placeholder_prompt_ids, placeholder_token_id) for _ in range(slots)
        ]
    return [
        *samples,
        *(
            placeholder(result, EMPTY_SLOT, placeholder_prompt_ids, placeholder_token_id)
            for _ in range(slots - len(samples))
        ),
    ]


def _delivered(result: ServiceResult, delivery: TokenDelivery) -> TrlSample | str:
    """The sample of the chain Gym's builder delivered, or Gym's reason for masking the rollout."""
    if delivery.mask_reason is not None:
        return delivery.mask_reason
    if delivery.fields is None:
        return "Gym's builder delivered no chain"
    return TrlSample(
        **delivery.fields.model_dump(),
        reward=result.reward,
        reward_components=result.reward_components,
        stop_reason=result.trajectory.stop_reason if result.trajectory else None,
        rollout_id=result.id,
    )


def _sample(result: ServiceResult, turns: Sequence[ModelTurn]) -> TrlSample | str:
    """The sample of one token sequence of a rollout that may be trained on, or why it cannot be."""
    try:
        prompt, completion, logprobs, env_mask = concatenate(turns)
    except NotTokenExactError as exc:
        return f"not token-exact: {exc}"
    return TrlSample(
        prompt_ids=prompt,
        completion_ids=completion,
        logprobs=logprobs,
        env_mask=env_mask,
        reward=result.reward,
        reward_components=result.reward_components,
        stop_reason=result.trajectory.stop_reason if result.trajectory else None,
        rollout_id=result.id,
    )


def placeholder(
    result: ServiceResult, reason: str, prompt_ids: Sequence[int], token_id: int | None
) -> TrlSample:
    """A sample that keeps its group's shape and adds nothing to the loss or the baseline."""
    if not prompt_ids:
        raise ValueError("a masked sample needs a non-empty placeholder prompt")
    return TrlSample(
        prompt_ids=list(prompt_ids),
        completion_ids=[prompt_ids[-1] if token_id is None else token_id],
        logprobs=[0.0],
        env_mask=[0],
        reward=None,
        reward_components=result.reward_components,
        stop_reason=result.trajectory.stop_reason if result.trajectory else None,
        mask_sample=True,
        mask_reason=reason,
        rollout_id=result.id,
    )


def group_samples(
    results: Sequence[ServiceResult | Mapping[str, Any]],
    *,
    fallback_prompt_ids: Sequence[int],
    placeholder_token_id: int | None = None,
    slots: int = 1,
) -> list[TrlSample]:
    """The samples of one prompt's group, in order (`slots` per rollout). A masked member
    borrows the first usable sibling's prompt (the group shares one prompt);
    `fallback_prompt_ids` when none is usable."""
    parsed = [r if isinstance(r, ServiceResult) else ServiceResult.model_validate(r) for r in results]
    shared = list(fallback_prompt_ids)
    for result in parsed:
        if mask_reason(result) is None and result.trajectory is not None:
            shared = list(model_turns(result.trajectory)[0].prompt_token_ids)
            break
    return [
        sample
        for result in parsed
        for sample in rollout_samples(
            result, slots=slots, placeholder_prompt_ids=shared, placeholder_token_id=placeholder_token_id
        )
    ]


def guide_sample(record: Mapping[str, Any]) -> TrlSample:
    """A program-written demonstration (a `Demonstration` record, as JSON) as a member of its
    task's group: off-policy guidance. Its ids and mask are the ones the demonstration recorded
    through the service's rollout path; it has no log-probs, as no policy sampled it, and its
    importance ratio is TRL's on-policy one (the trainer's own log-probs, detached)."""
    origin = record.get("origin")
    if not origin:
        raise ValueError("a guide must be a demonstration record with its `origin`")
    completion = list(record["completion_ids"])
    env_mask = list(record["env_mask"])
    if len(env_mask) != len(completion) or not any(env_mask):
        raise ValueError(f"guide {record.get('task_id')!r}: its env_mask does not cover its model tokens")
    return TrlSample(
        prompt_ids=list(record["prompt_ids"]),
        completion_ids=completion,
        logprobs=[None] * len(completion),
        env_mask=env_mask,
        reward=float(record["reward"]),
        reward_components=dict(record.get("reward_components") or {}),
        stop_reason="demonstration",
        rollout_id=f"demonstration-{record['task_id']}",
        origin=str(origin),
    )


def to_fields(samples: Sequence[TrlSample]) -> dict[str, list[Any]]:
    """What `rollout_func` returns: TRL's keys, then the extras (one list entry per sample)."""
    return {key: [getattr(sample, key) for sample in samples] for key in (*TRL_KEYS, *EXTRA_KEYS)}
