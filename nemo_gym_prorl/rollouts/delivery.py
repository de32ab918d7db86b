# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What reaches a trainer of a harness rollout, as NeMo Gym's builder decided it.

A harness rollout's calls are written as Gym token-capture records while the harness runs
(`agent.harness.token_capture.HarnessCapture`); when it ends, Gym's consumer and builder build
it, with the call whose reply the scorer saw as its terminal. The rollout's result carries the
outcome (`trajectory.harness["capture"]`), read here without Gym (the trainers' model venv has
none):

- `mask_reason` None: Gym delivered one chain, root to terminal; `fields` are its training fields
  (Gym's projection: first prompt, then environment tokens with mask 0 and the policy's with 1).
- `mask_reason` set: Gym masked the rollout (its scored reply sits on a chain that starts at a call
  with no proven parent: the harness broke the token chain; or a record was lost). A trainer
  trains nothing of it, as NeMo RL's `/run` and Gym's own collection do not.

`generated_tokens` is everything the policy generated in the rollout; `delivered_tokens` what the
delivered chain holds; `undelivered` the rest, by reason, so the two always add up.

Pure Python and pydantic: the project venv and the trainers' model venv both import it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# The reason for generated tokens of a delivered rollout that are off its delivered chain: replies
# the harness dropped from its history (answered with a format error) or made after the reply the
# scorer saw; Gym's builder leaves them out rather than mask the rollout.
OFF_CHAIN = "off the scored chain"


class DeliveredFields(BaseModel):
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_mask: list[int]


class TokenDelivery(BaseModel):
    """A harness rollout as Gym's builder delivered it (see the module docstring)."""

    model_config = ConfigDict(extra="ignore")

    rollout_id: str = Field(description="the records' Gym rollout id (attempt-scoped)")
    terminal_call_id: str | None = Field(description="the call whose reply the scorer saw")
    mask_reason: str | None = None
    delivered_calls: list[str] = Field(default_factory=list, description="the delivered chain, root first")
    chains: list[list[str]] = Field(
        default_factory=list, description="every chain Gym's builder found, by model call id, root first"
    )
    fields: DeliveredFields | None = None
    generated_tokens: int = 0
    delivered_tokens: int = 0
    undelivered: dict[str, int] = Field(default_factory=dict, description="tokens not delivered, by reason")
    metrics: dict[str, Any] = Field(default_factory=dict, description="Gym's consumer metrics of the build")
    entries: list[dict[str, Any]] = Field(
        default_factory=list,
        description="the Gym TokenEntry records as written (lineage included): any Gym consumer rebuilds "
        "the rollout from them",
    )

    @property
    def delivered_share(self) -> float | None:
        return self.delivered_tokens / self.generated_tokens if self.generated_tokens else None


def harness_delivery(harness: dict[str, Any] | None) -> TokenDelivery | None:
    """The delivery a harness rollout's record carries (None: not a harness rollout, or one
    recorded before the records went through Gym's builder)."""
    capture = (harness or {}).get("capture")
    return TokenDelivery.model_validate(capture) if capture else None
