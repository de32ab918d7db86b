# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""mini-swe-agent, the PyPI package unchanged, as a rollout's agent: its prompts and parsing,
the policy behind the recording endpoint (a scripted backend here), its commands in a real
sandbox, and one token sequence over the whole conversation."""

from __future__ import annotations

import os
import re

import pytest
from harness_helpers import ScriptedLLM, harness_job, prompt_row

from nemo_gym_prorl.agent.harness import make_harness
from nemo_gym_prorl.agent.harness.base import SandboxExecutor
from nemo_gym_prorl.agent.harness.gym_capture import BROKEN_CHAIN
from nemo_gym_prorl.agent.harness.mini_swe_agent import MiniSweAgent, MiniSweAgentOptions
from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.pipeline.job import Job
from nemo_gym_prorl.rollouts.delivery import OFF_CHAIN, TokenDelivery
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.sandbox.factory import open_sandbox
from nemo_gym_prorl.training.heldout import SeedSplit
from nemo_gym_prorl.training.programs import harness_compute_text, harness_submit_text
from nemo_gym_prorl.training.swe_programs import replies as swe_replies

TOKEN_FIELDS = {"prompt_token_ids", "generation_token_ids", "generation_log_probs", "decoding"}

STATEMENT = "The greeting is missing: write it to greeting.txt."


# A one-hunk gold patch, as the generator writes them.
ORDINAL_PATCH = """--- a/inflection/__init__.py
+++ b/inflection/__init__.py
@@ -223,3 +223,3 @@ def ordinal(number: int) -> str:
     number = abs(int(number))
-    if number % 100 in (11, 12):
+    if number % 100 in (11, 12, 13):
         return "th"
"""


def math_task() -> dict:
    return SeedSplit(families=("gcd",)).train_rows(1)[0]


def block(command: str) -> str:
    return f"THOUGHT: one step.\n\n```mswea_bash_command\n{command}\n```"


def job() -> Job:
    return harness_job(prompt_row(STATEMENT), task="swe")


async def test_mini_swe_agent_runs_its_own_loop_with_commands_in_the_sandbox(
    scripted_llm: ScriptedLLM,
) -> None:
    llm = await scripted_llm(
        block("echo hello > greeting.txt && cat"),  # a bare `cat` reads end-of-file, at once
        block("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat greeting.txt"),
    )
    service_environment = dict(os.environ)
    runner = make_harness({"name": "mini_swe_agent"})
    with open_sandbox(SandboxSpec(workspace_mount="/testbed")) as sandbox:
        agent = await runner.run(job(), SandboxExecutor(sandbox), llm, AgentLimits(max_turns=5))
        written = sandbox.read_file("/testbed/greeting.txt")
    await runner.aclose()
    # The package's settings went into its own process's environment, not the service's.
    assert dict(os.environ) == service_environment
    assert written == b"hello\n"
    assert agent.stop_reason == "submitted" and agent.final_answer == "hello\n"
    assert [s.arguments for s in agent.steps] == [
        {"command": "echo hello > greeting.txt && cat"},
        {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat greeting.txt"},
    ]
    assert [s.turn for s in agent.steps] == [0, 1]
    # The package's own prompts reached the policy, around the task's statement.
    assert agent.messages[0]["role"] == "system" and "mswea_bash_command" in agent.messages[0]["content"]
    assert STATEMENT in agent.messages[1]["content"]
    # Two calls, one token sequence: the second prompt extends the first call's exact ids.
    first, second = agent.tokens.turns
    assert second.prompt_token_ids[: len(first.full_token_ids)] == first.full_token_ids
    harness = dict(agent.harness or {})
    capture = TokenDelivery.model_validate(harness.pop("capture"))
    assert harness == {
        "name": "mini_swe_agent",
        "exit_status": "Submitted",
        "calls": 2,
        "segments": 1,
        "merged_share": 1.0,
        "delivered_share": 1.0,
        "delivered_segment": 0,
        "token_segments": [[t.model_dump(include=TOKEN_FIELDS) for t in agent.tokens.turns]],
        "undelivered": {},
    }
    assert agent.reply_positions == [2, 4]  # system, task, reply, observation, reply
    # Written as Gym token-capture records as the harness ran, and delivered by Gym's builder:
    # one chain, root to the scored reply, exactly the sequence the messages carry.
    assert capture.mask_reason is None
    assert capture.chains == [capture.delivered_calls] == [["harness-1-s0-t0", "harness-1-s0-t1"]]
    assert [e["parent_resolution"] for e in capture.entries] == ["root", "resolved"]
    assert capture.fields is not None
    assert capture.fields.prompt_ids + capture.fields.completion_ids == second.full_token_ids


async def test_a_reply_the_harness_drops_breaks_the_token_chain_and_the_rollout_is_masked_saying_why(
    scripted_llm: ScriptedLLM,
) -> None:
    # mini-swe-agent answers a reply without exactly one bash block with a format error and
    # leaves the reply out of its history: the next call rewrites history.
    llm = await scripted_llm("I am not sure.", block("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"))
    runner = make_harness({"name": "mini_swe_agent"})
    with open_sandbox(SandboxSpec(workspace_mount="/testbed")) as sandbox:
        agent = await runner.run(job(), SandboxExecutor(sandbox), llm, AgentLimits(max_turns=5))
    await runner.aclose()
    assert agent.stop_reason == "submitted"
    harness = agent.harness
    assert harness is not None and (harness["calls"], harness["segments"]) == (2, 2)
    assert harness["merged_share"] == 0.0  # the one call after the first did not extend it
    assert harness["delivered_segment"] == 1
    dropped = harness["token_segments"][0][0]
    assert dropped["generation_token_ids"] and len(dropped["generation_log_probs"]) == len(
        dropped["generation_token_ids"]
    )
    # The scored sequence is the final history's: its one reply sits after the format error.
    assert [m["role"] for m in agent.messages] == ["system", "user", "user", "assistant"]
    assert agent.reply_positions == [3] and len(agent.tokens.turns) == 1
    # That reply's call did not extend the first: Gym's builder will not give it the whole
    # rollout's reward, and neither does a trainer. Every generated token is accounted for.
    capture = TokenDelivery.model_validate(harness["capture"])
    assert capture.terminal_call_id == "harness-1-s1-t0"
    assert capture.mask_reason is not None and capture.mask_reason.startswith(BROKEN_CHAIN)
    assert capture.fields is None and harness["delivered_share"] == 0.0
    assert harness["undelivered"] == {BROKEN_CHAIN: agent.generated_tokens}


async def test_the_rollouts_call_budget_ends_the_harness(scripted_llm: ScriptedLLM) -> None:
    llm = await scripted_llm(block("ls"))  # a policy that never submits
    runner = make_harness({"name": "mini_swe_agent"})
    with open_sandbox(SandboxSpec(workspace_mount="/testbed")) as sandbox:
        agent = await runner.run(job(), SandboxExecutor(sandbox), llm, AgentLimits(max_turns=3))
    await runner.aclose()
    assert agent.stop_reason == "max_turns"
    assert agent.harness is not None and agent.harness["calls"] == 3
    assert agent.harness["exit_status"] == "LimitsExceeded"  # the package's own limit, lowered to the budget


def test_an_unknown_harness_or_option_is_refused_when_the_config_loads() -> None:
    with pytest.raises(ValueError, match="unknown harness 'claude'"):
        make_harness({"name": "claude"})
    with pytest.raises(ValueError, match="step_limit"):
        make_harness({"name": "mini_swe_agent", "step_limit": 3})


async def test_a_policy_that_never_writes_the_format_still_gets_its_first_reply_as_its_sample(
    scripted_llm: ScriptedLLM,
) -> None:
    # Every reply answered with a format error and dropped from the harness's history: without
    # a sample, RL could never tell a policy the format is wrong.
    llm = await scripted_llm("I am not sure.", "Maybe this.", "Still no block.", "Nor here.")
    runner = make_harness({"name": "mini_swe_agent"})
    with open_sandbox(SandboxSpec(workspace_mount="/testbed")) as sandbox:
        agent = await runner.run(job(), SandboxExecutor(sandbox), llm, AgentLimits(max_turns=4))
    await runner.aclose()
    harness = agent.harness
    assert harness is not None and harness["exit_status"] == "RepeatedFormatError"
    assert harness["segments"] == harness["calls"] >= 2
    # The task as the harness opened it and the first reply: every sample of a group starts from
    # the same prompt, as GRPO needs; the other segments are kept beside it.
    assert [m["role"] for m in agent.messages] == ["system", "user", "assistant"]
    assert agent.messages[-1]["content"] == "I am not sure."
    assert agent.reply_positions == [2] and len(agent.tokens.turns) == 1
    assert len(harness["token_segments"]) == harness["segments"]  # every segment, complete, for slots
    # Gym's builder delivers that root call alone; the later calls, each the same failure from a
    # history the harness rewrote, are left out and counted, not masked.
    capture = TokenDelivery.model_validate(harness["capture"])
    assert capture.mask_reason is None and capture.delivered_calls == ["harness-1-s0-t0"]
    assert 0 < harness["delivered_share"] < 1
    assert harness["undelivered"] == {OFF_CHAIN: agent.generated_tokens - capture.delivered_tokens}


@pytest.mark.parametrize(
    ("config", "replies"),
    [
        ("mini_swe_agent_math.yaml", [harness_compute_text(math_task()), harness_submit_text("7")]),
        ("mini_swe_agent_swe.yaml", swe_replies(ORDINAL_PATCH)),
    ],
)
def test_each_shipped_config_loads_and_reads_its_demonstrations_replies_as_one_command_each(
    config: str, replies: list[str]
) -> None:
    shipped = MiniSweAgent(MiniSweAgentOptions(config=config)).config  # read as the harness reads it
    agent, model = shipped["agent"], shipped["model"]
    assert {"system_template", "instance_template"} <= set(agent) and agent["cost_limit"] == 0
    assert agent["step_limit"] >= len(replies)  # the demonstration fits the harness's own limit
    for reply in replies:  # the package's parser takes exactly one action from each
        assert len(re.findall(model["action_regex"], reply, re.DOTALL)) == 1, reply
