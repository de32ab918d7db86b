# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The OpenAI Agents SDK (`openai-agents` on PyPI, unchanged) as a rollout's agent.

A harness of another shape than mini-swe-agent's: the model calls a `bash` function through
structured tool calls (`tools` in the request, `tool_calls` in the reply, `tool` messages with the
call's id back). The recording endpoint presents the tools as `llm.tool_prompt` says (`system`,
the default: described in the system message after the SDK's instructions, as the built-in agent
does, so a model whose chat template ignores tools, such as SmolLM2, sees them; `template`: to
the chat template), parses the reply with the model's tool-call format, and under
`llm.constrained` holds the first calls to well-formed tool calls. The SDK's `Runner` drives the
loop: it ends when the model replies without a tool call (that reply is the final answer) or at
`max_turns` model calls.

The SDK's tracing is turned off for the process: it would send traces to OpenAI.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.agent.harness.base import HarnessRun, HarnessTask

DEFAULT_INSTRUCTIONS = (
    "You are an agent with a bash tool that runs each command in a fresh shell in the task's "
    "working directory. Use it to work out the task. When you are done, reply with your final "
    "answer and no tool call."
)


class OpenAIAgentsOptions(BaseModel):
    """The OpenAI Agents SDK as a task's agent (`tasks.<name>.options.harness`)."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["openai_agents"] = "openai_agents"
    instructions: str = Field(DEFAULT_INSTRUCTIONS, min_length=1, description="the agent's instructions")
    command_timeout_s: float = Field(60.0, gt=0, description="per command")


class OpenAIAgents:
    """The harness (see `agent.harness.base.Harness`)."""

    name = "openai_agents"

    def __init__(self, options: OpenAIAgentsOptions | None = None) -> None:
        self.options = options or OpenAIAgentsOptions()

    def run(self, task: HarnessTask) -> HarnessRun:
        from agents import (
            Agent,
            MaxTurnsExceeded,
            OpenAIChatCompletionsModel,
            Runner,
            function_tool,
            set_tracing_disabled,
        )
        from openai import AsyncOpenAI

        set_tracing_disabled(True)

        @function_tool
        def bash(command: str) -> str:
            """Run a bash command in the task's working directory and return its output and exit code.

            Args:
                command: The command to run.
            """
            result = task.commands.run(command)
            status = "timed out" if result.timed_out else f"exit code {result.exit_code}"
            return f"{result.stdout}{result.stderr}\n[{status}]"

        # No retries: the backend pool retries what can be retried, and a retry would sample twice.
        client = AsyncOpenAI(base_url=task.base_url, api_key=task.api_key, max_retries=0)
        agent = Agent(
            name="prorl",
            instructions=self.options.instructions,
            tools=[bash],
            model=OpenAIChatCompletionsModel(model=task.model, openai_client=client),
        )
        final: Any = None
        try:
            result = Runner.run_sync(agent, task.prompt, max_turns=task.max_calls)
            final, status = result.final_output, "completed"
        except MaxTurnsExceeded:
            status = "MaxTurnsExceeded"
        except Exception as exc:  # the SDK raises what ended the run (a refused call): the run ended
            status = type(exc).__name__
        return HarnessRun(
            name=self.name,
            stop_reason="answered"
            if status == "completed"
            else "max_turns"
            if status == "MaxTurnsExceeded"
            else "model_error",
            exit_status=status,
            submission=str(final) if final is not None else None,
            messages=[],  # the SDK keeps Responses-style items: the conversation is the endpoint's
        )
