# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Flat rows at the environment server: what NeMo Gym 0.7's collection posts to `/run` for a
dataset row in its default `agent` routing, and the two answers it reads back.

- `FlatRow`: the row, Gym's routing and identity keys typed beside the task's own fields.
- `FlatResult`: a scored rollout, the agent's `/run` body (Gym's verify response).
- `FlatFailure`: a row that produced no result, in the fields collection records in its failures
  sidecar, as Gym's `single_agent_turn_legacy` answers them. With `terminal` set, collection
  records the row once and never dispatches it again, also on resume: a row no stage could run
  is one of these, not an HTTP error (which would end a collection in Gym's default routing, or
  be retried on every resume with `route_failures_to_sidecar`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Self

from nemo_gym.episode_types import EpisodeFailure
from nemo_gym.failure_kinds import FailureStage
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from nemo_gym_prorl.integrations.gym.collection_keys import (
    ENVIRONMENT_SERVER_FAILURE_CLASS,
    FAILURE_MESSAGE_KEY,
    FAILURE_STAGE_KEY,
    NG_FAILURE_CLASS_KEY,
    NG_TERMINAL_KEY,
)


class RowAgentRef(BaseModel):
    """The agent a row names (`agent_ref`); collection may add the server type beside the name."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)


class FlatRow(BaseModel):
    """A dataset row as Gym's collection posts it: the task's fields (kept whole, sent on to the
    agent unchanged) and the keys collection adds to route and number it."""

    model_config = ConfigDict(extra="allow")

    agent_ref: RowAgentRef | None = Field(None, description="The agent the row is routed to.")
    task_source: str | None = Field(
        None, min_length=1, description="The config instance that declared the row's dataset."
    )
    task_index: StrictInt | None = Field(None, ge=0, alias="_ng_task_index")
    rollout_index: StrictInt | None = Field(None, ge=0, alias="_ng_rollout_index")
    attempt: StrictInt = Field(0, ge=0, alias="_ng_attempt_index", description="The resume attempt.")
    responses_create_params: dict[str, Any] | None = Field(
        None,
        description="The prompt. Optional here: a row without one is refused by the agent's one check, "
        "which names the field, as a terminal failure.",
    )

    def row(self) -> dict[str, Any]:
        """The row exactly as it was posted."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def taskset(self, agent: str, bound: Collection[str]) -> str:
        """The row's taskset (its task source, else the agent), once the row is known to be this
        agent's, as Gym's legacy adapter checks it: `agent_ref` names the agent, and `task_source`
        one of the instances `bound` to it. A row routed here by mistake raises ValueError."""
        if self.agent_ref is not None and self.agent_ref.name != agent:
            raise ValueError(f"Row agent_ref {self.agent_ref.name!r} is not this server's agent {agent!r}")
        source = self.task_source or agent
        if source not in bound:
            raise ValueError(
                f"Row task_source {source!r} names none of the instances behind this server: {sorted(bound)}"
            )
        return source


class FlatResult(BaseModel):
    """A flat row's scored rollout: the agent's `/run` body (the Gym verify response with token
    fields on every generated item) and the agent it ran on."""

    model_config = ConfigDict(extra="allow")

    reward: float
    agent_ref: RowAgentRef


class FlatFailure(BaseModel):
    """A flat row that produced no result, as Gym's collection records it (failures sidecar), with
    the failure's kind and reason beside Gym's fields."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    failure_class: str = Field(alias=NG_FAILURE_CLASS_KEY)
    terminal: bool = Field(
        alias=NG_TERMINAL_KEY,
        description="True: collection records the row once and never dispatches it again, also on "
        "resume. False: a resumed collection may dispatch it again.",
    )
    message: str = Field(alias=FAILURE_MESSAGE_KEY)
    stage: FailureStage | None = Field(alias=FAILURE_STAGE_KEY)
    failure_kind: str | None = None
    failure_reason: str
    agent_ref: RowAgentRef

    @classmethod
    def of(cls, failure: EpisodeFailure, agent: str) -> Self:
        # Every field set: the server answers only what was set, and Gym reads each of these.
        return cls(
            failure_class=ENVIRONMENT_SERVER_FAILURE_CLASS,
            terminal=failure.terminal,
            message=failure.failure_reason,
            stage=failure.stage,
            failure_kind=failure.failure_kind,
            failure_reason=failure.failure_reason,
            agent_ref=RowAgentRef(name=agent),
        )
