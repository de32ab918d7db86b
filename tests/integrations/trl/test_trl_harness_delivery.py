# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""With one sample per rollout (both harness configs), a harness rollout reaches TRL as NeMo Gym's
builder delivered it from the rollout's own token-capture records: the chain from the root to the
reply the scorer saw, or, where the harness broke the token chain before that reply, nothing at
all, masked with Gym's reason. No fragment is trained with the whole rollout's reward, and a step
accounts for every generated token: delivered, or not and why.

The deliveries are built in the project's venv by Gym's consumer and builder, as the service
builds them; the samples in the model venv, where the trainer runs."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from trl_venv import run_in_model_venv

from nemo_gym_prorl.agent.harness.capture_store import CaptureStore
from nemo_gym_prorl.agent.harness.gym_capture import BROKEN_CHAIN, HarnessCapture
from nemo_gym_prorl.integrations.trl.fields import TrlSample, to_sample
from nemo_gym_prorl.integrations.trl.grpo import token_delivery
from nemo_gym_prorl.llm.records import TurnRecord
from nemo_gym_prorl.pipeline.job import JobResult, JobState, Trajectory
from nemo_gym_prorl.rollouts.delivery import TokenDelivery
from nemo_gym_prorl.rollouts.stats import RolloutStats


def turn(index: int, prompt: list[int], generated: list[int]) -> TurnRecord:
    return TurnRecord(
        turn=index,
        prompt_token_ids=prompt,
        generation_token_ids=generated,
        generation_log_probs=[-0.25] * len(generated),
        finish_reason="stop",
        text="reply",
        content="reply",
        dialect="vllm-completions",
    )


# One sequence: the second call's prompt extends the first call's prompt and reply.
WHOLE = [[turn(0, [1, 2, 3], [4, 5]), turn(1, [1, 2, 3, 4, 5, 6, 7], [8, 9])]]
# The harness dropped its first reply (a format error) and went on from a rewritten history.
BROKEN = [[turn(0, [1, 2, 3], [4, 5])], [turn(0, [1, 2, 3, 6], [7, 8]), turn(1, [1, 2, 3, 6, 7, 8, 9], [10])]]


async def built(job_id: str, segments: list[list[TurnRecord]], reward: float) -> dict[str, Any]:
    """A finished harness rollout as the service returns it, its capture built by Gym with its
    last call as the terminal."""
    capture = HarnessCapture(CaptureStore(), trajectory_id=job_id, model="policy")
    for index, segment in enumerate(segments):
        for position, recorded in enumerate(segment):
            await capture.write(index, position, recorded)
    delivery = await capture.deliver(f"{job_id}-s{len(segments) - 1}-t{len(segments[-1]) - 1}")
    last = segments[-1]
    return JobResult(
        id=job_id,
        task="math_harness",
        state=JobState.DONE,
        group_id="g",
        submitted_at=0.0,
        reward=reward,
        policy_versions=[1],
        trajectory=Trajectory(
            messages=[t.assistant_message().model_dump(exclude_none=True) for t in last],
            stop_reason="submitted",
            num_turns=sum(map(len, segments)),
            generated_tokens=sum(len(t.generation_token_ids) for s in segments for t in s),
            harness={
                "name": "mini_swe_agent",
                "calls": sum(map(len, segments)),
                "capture": delivery.model_dump(mode="json"),
                "token_segments": [[t.model_dump(mode="json") for t in s] for s in segments],
            },
        ),
    ).model_dump(mode="json")


@pytest.fixture(scope="module")
def rollouts() -> list[dict[str, Any]]:
    async def both() -> list[dict[str, Any]]:
        return [await built("whole", WHOLE, 1.0), await built("broken", BROKEN, 0.0)]

    return asyncio.run(both())


CONVERT = """
import json, sys
from nemo_gym_prorl.integrations.trl.fields import group_samples, to_fields
from nemo_gym_prorl.integrations.trl.reward import service_reward
fields = to_fields(group_samples(json.load(sys.stdin), fallback_prompt_ids=[0], placeholder_token_id=2))
fields["rewards_trl_sees"] = service_reward(
    prompts=[None, None], completions=[None, None], reward=fields["reward"], mask_sample=fields["mask_sample"])
print(json.dumps(fields))
"""


@pytest.fixture(scope="module")
def trl_fields(rollouts: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return run_in_model_venv(CONVERT, rollouts)


def test_a_rollout_of_one_chain_trains_the_chain_gym_delivered_with_its_reward(
    rollouts: list[dict[str, Any]], trl_fields: dict[str, list[Any]]
) -> None:
    delivery = TokenDelivery.model_validate(rollouts[0]["trajectory"]["harness"]["capture"])
    assert delivery.mask_reason is None and delivery.fields is not None
    assert trl_fields["prompt_ids"][0] == delivery.fields.prompt_ids == [1, 2, 3]
    assert trl_fields["completion_ids"][0] == [4, 5, 6, 7, 8, 9]
    assert trl_fields["env_mask"][0] == [1, 1, 0, 0, 1, 1]
    assert trl_fields["logprobs"][0] == [-0.25, -0.25, 0.0, 0.0, -0.25, -0.25]
    assert trl_fields["rewards_trl_sees"][0] == 1.0


def test_a_rollout_whose_harness_broke_the_chain_trains_nothing_and_says_why(
    trl_fields: dict[str, list[Any]],
) -> None:
    # Not its last segment with the whole rollout's reward: a placeholder, outside the baseline.
    assert trl_fields["mask_sample"][1] is True and trl_fields["env_mask"][1] == [0]
    assert trl_fields["mask_reason"][1].startswith(f"{BROKEN_CHAIN}:")
    assert "NeMo RL's /run" in trl_fields["mask_reason"][1]
    assert trl_fields["rewards_trl_sees"][1] is None


def test_a_step_accounts_for_every_generated_token_delivered_or_masked_with_the_reason(
    rollouts: list[dict[str, Any]],
) -> None:
    samples: list[TrlSample] = [to_sample(r, placeholder_prompt_ids=[0]) for r in rollouts]
    rollout: Any = SimpleNamespace(last_samples=samples, last_results=rollouts)
    stats = RolloutStats.of(rollouts)
    delivered, undelivered = token_delivery(stats, rollout)
    assert stats.generated_tokens == 4 + 5  # whole: 2 + 2; broken: 2 + 2 + 1
    assert delivered == round(4 / 9, 4) and undelivered == {BROKEN_CHAIN: round(5 / 9, 4)}
    assert delivered + sum(undelivered.values()) == pytest.approx(1.0, abs=1e-3)
    # One chain, nothing else: all delivered.
    alone: Any = SimpleNamespace(last_samples=samples[:1], last_results=rollouts[:1])
    assert token_delivery(RolloutStats.of(rollouts[:1]), alone) == (1.0, {})
