# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What every task domain provides, and the shapes they share.

A domain (math, STEM, code, SWE) is used in three places, always the same way:
  INIT  `domain.sandbox_spec(row)` -> open the sandbox -> `await domain.setup_workspace(sandbox, row)`;
        the tools it offers are `domain.tool_names(row)` (names in the ToolBox vocabulary).
  RUN   the agent loop; at its end `await domain.collect_artifacts(sandbox, row)` pulls out what
        the evaluator needs from the RUN sandbox (SWE: the git diff), so that sandbox can close.
  EVAL  `await domain.evaluate(row, final_text, artifacts)` -> `EvalOutcome`; evaluators that run
        code open their own fresh sandboxes, never the RUN one.
`row` is the dataset row (Gym JSONL row: task fields at top level). Evaluators never raise for
bad model output: they return reward 0 with a `reason`. Infrastructure failures (a sandbox that
could not start, a runner that died) return `mask_sample=True` instead of a wrong zero.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, Field, model_validator

from nemo_gym_prorl.pipeline.handler import InvalidInstanceError
from nemo_gym_prorl.pipeline.job import Evaluation
from nemo_gym_prorl.sandbox import Sandbox, SandboxSpec
from nemo_gym_prorl.tools import ALL_TOOLS

# Tool names in the ToolBox vocabulary (nemo_gym_prorl.tools).
BASH = "bash"
IPYTHON = "ipython"
EDITOR = "editor"
SUBMIT = "submit"  # the finish tool: its argument is the final answer


class EvalOutcome(BaseModel):
    """A reward with named parts (they sum to it), why, and a free-form report."""

    reward: float = 0.0
    components: dict[str, float] = Field(default_factory=dict)
    reason: str = Field(
        "ok", description="Short, low-cardinality label: correct, wrong_answer, no_answer, ..."
    )
    detail: str | None = Field(None, description="Human-readable detail for logs.")
    mask_sample: bool = Field(False, description="The infrastructure failed: do not train on this sample.")
    resolved: bool | None = None
    report: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> EvalOutcome:
        if not math.isfinite(self.reward):
            raise ValueError(f"reward must be finite, got {self.reward}")
        if self.components and abs(sum(self.components.values()) - self.reward) > 1e-9:
            raise ValueError(f"components {self.components} do not sum to reward {self.reward}")
        return self

    @classmethod
    def from_components(cls, components: Mapping[str, float], **kwargs: Any) -> EvalOutcome:
        comps = {k: float(v) for k, v in components.items()}
        return cls(reward=float(sum(comps.values())), components=comps, **kwargs)

    @classmethod
    def zero(cls, reason: str, detail: str | None = None, **kwargs: Any) -> EvalOutcome:
        return cls(reward=0.0, reason=reason, detail=detail, **kwargs)

    @classmethod
    def infra_failure(cls, detail: str, **kwargs: Any) -> EvalOutcome:
        return cls(reward=0.0, reason="infrastructure_error", detail=detail, mask_sample=True, **kwargs)

    def to_evaluation(self) -> Evaluation:
        """The pipeline's `Evaluation` of this outcome."""
        report = {
            "reason": self.reason,
            "detail": self.detail,
            "mask_sample": self.mask_sample,
            **self.report,
        }
        return Evaluation(
            reward=self.reward, reward_components=dict(self.components), resolved=self.resolved, report=report
        )


class TaskDomain(ABC):
    """Base of the four domains. Subclasses are cheap to construct; heavy resources (runner
    pools, checker processes) start lazily and are released by `aclose()`."""

    name: ClassVar[str]
    data_sources: ClassVar[tuple[str, ...]] = ()
    default_tools: ClassVar[tuple[str, ...]] = ()

    def tool_names(self, row: Mapping[str, Any]) -> list[str]:
        """The tools this row's model is offered: `tools_offered`, else the names of the function
        tools its prompt declares (the model must be able to call every tool it is told about,
        `submit` included), else the domain's defaults."""
        tools = row.get("tools_offered")
        if isinstance(tools, list) and all(isinstance(t, str) for t in tools):
            return list(tools)
        params = row.get("responses_create_params")
        declared = params.get("tools") if isinstance(params, Mapping) else None
        if isinstance(declared, list):
            # Only tools the ToolBox implements: a prompt may also declare tools of other agents.
            names = [t.get("name") for t in declared if isinstance(t, Mapping) and t.get("name") in ALL_TOOLS]
            if names:
                return names
        return list(self.default_tools)

    def check_row(self, row: Mapping[str, Any]) -> None:
        """Refuse at submit, naming the field (`InvalidInstanceError`), a row no stage of this
        domain could run: a tool it declares that no domain has, or (in each domain) what EVAL
        will need. Cheap: called on every door before any work."""
        params = row.get("responses_create_params")
        declared = params.get("tools") if isinstance(params, Mapping) else None
        for i, tool in enumerate(declared if isinstance(declared, list) else []):
            name = tool.get("name") if isinstance(tool, Mapping) else None
            if name not in ALL_TOOLS:
                raise InvalidInstanceError(
                    f"responses_create_params.tools[{i}].name",
                    f"no domain has a tool {name!r}; the tools are {sorted(ALL_TOOLS)}",
                )

    def sandbox_spec(self, row: Mapping[str, Any], base: SandboxSpec | None = None) -> SandboxSpec:
        """The RUN sandbox for this row (default: `base` or bubblewrap over the host)."""
        return base or SandboxSpec()

    async def setup_workspace(self, sandbox: Sandbox, row: Mapping[str, Any]) -> dict[str, Any]:
        """Prepare the RUN sandbox (files, repository). Returns facts for the agent (e.g. cwd)."""
        return {"cwd": sandbox.spec.workspace_mount}

    async def collect_artifacts(self, sandbox: Sandbox, row: Mapping[str, Any]) -> dict[str, Any]:
        """At the end of RUN: what EVAL needs from the RUN sandbox."""
        return {}

    @abstractmethod
    async def evaluate(
        self, row: Mapping[str, Any], final_text: str | None, artifacts: Mapping[str, Any] | None = None
    ) -> EvalOutcome: ...

    async def aclose(self) -> None:
        """Release pooled resources."""


# -- extracting the model's final answer ----------------------------------------------------


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping):
                if part.get("type") in (None, "text", "output_text", "input_text"):
                    parts.append(str(part.get("text") or ""))
            else:
                text = getattr(part, "text", None)
                if isinstance(text, str):
                    parts.append(text)
        return "".join(parts)
    return str(content)


def final_text_from_messages(messages: Iterable[Mapping[str, Any]]) -> str | None:
    """The last non-empty assistant message text of a chat transcript (pipeline trajectories)."""
    last = None
    for msg in messages:
        if isinstance(msg, Mapping) and msg.get("role") == "assistant":
            text = _content_text(msg.get("content"))
            if text.strip():
                last = text
    return last


def final_text_from_response(response: Any) -> str | None:
    """The last non-empty assistant message text of a Responses-API response (Gym's
    `NeMoGymResponse` or its dict form)."""
    output = getattr(response, "output", None)
    if output is None and isinstance(response, Mapping):
        output = response.get("output")
    last = None
    for item in output or []:
        get = item.get if isinstance(item, Mapping) else lambda k, _i=item: getattr(_i, k, None)
        if get("type") == "message" and get("role") in ("assistant", None):
            text = _content_text(get("content"))
            if text.strip():
                last = text
    return last


def strip_thinking(text: str) -> str:
    """Drop a leading reasoning block (`<think>...</think>`) so answers in it do not count."""
    end = text.rfind("</think>")
    return text[end + len("</think>") :] if end >= 0 else text
