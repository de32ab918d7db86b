# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness rollout through the one rollout handler (INIT, RUN by the harness, EVAL by the
domain's own evaluator), and its trajectory in the trainer's fields, token-exact."""

from __future__ import annotations

from typing import Any

from harness_helpers import ScriptedLLM, harness_job, prompt_row, run_rollout

from nemo_gym_prorl.agent.deps import HandlerDeps
from nemo_gym_prorl.agent.factory import domain_handler
from nemo_gym_prorl.integrations.trl.fields import to_sample
from nemo_gym_prorl.pipeline.job import Job
from nemo_gym_prorl.sandbox import SandboxSpec

SUBMIT = "THOUGHT: done.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && echo '\\boxed{42}'\n```"
FIRST = "THOUGHT: compute.\n\n```mswea_bash_command\npython3 -c 'print(6 * 7)'\n```"


def job() -> Job:
    return harness_job(prompt_row("What is 6 times 7?", expected_answer="42"), "math-harness-1")


async def test_a_harness_rollout_is_graded_and_becomes_one_token_exact_sample(
    scripted_llm: ScriptedLLM,
) -> None:
    llm = await scripted_llm(FIRST, SUBMIT)
    handler = domain_handler(
        HandlerDeps(sandbox=SandboxSpec(), llm=llm),
        domain="math",
        agent={"max_turns": 4},
        harness={"name": "mini_swe_agent"},
    )
    rollout = job()
    trajectory, evaluation = await run_rollout(handler, rollout)

    assert trajectory.stop_reason == "submitted" and trajectory.final_answer == "\\boxed{42}\n"
    assert evaluation.reward == 1.0  # the math domain's own grader, unchanged
    assert trajectory.steps[0]["arguments"]["command"] == "python3 -c 'print(6 * 7)'"
    assert "42" in trajectory.steps[0]["observation"]  # ran in the sandbox's Python
    assert trajectory.harness is not None and trajectory.harness["merged_share"] == 1.0

    replies = [m for m in trajectory.messages if m["role"] == "assistant"]
    assert [bool(m.get("generation_token_ids")) for m in replies] == [True, True]
    result: dict[str, Any] = {
        "id": rollout.id,
        "state": "done",
        "reward": evaluation.reward,
        "trajectory": trajectory.model_dump(),
    }
    sample = to_sample(result, placeholder_prompt_ids=[0])
    assert not sample.mask_sample and sample.reward == 1.0
    last = replies[-1]
    # One sequence: the first prompt, then the model's ids (mask 1) and the harness's (mask 0).
    assert [*sample.prompt_ids, *sample.completion_ids] == [
        *last["prompt_token_ids"],
        *last["generation_token_ids"],
    ]
    assert sample.model_tokens == sum(len(m["generation_token_ids"]) for m in replies)
