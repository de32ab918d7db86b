# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""How off-policy a trajectory is, and what to do with one that is too far off.

Staleness = the trainer's current policy version minus the oldest version any of the
trajectory's turns used (the base model, before any publish, counts as version 0). Past
`max_staleness` a trajectory is re-run, dropped, or kept with a flag, as configured; the caller
counts each verdict in its metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

BASE_VERSION = 0  # the policy before any publish (a turn's `policy_version` is then None)

StaleAction = Literal["rerun", "drop", "flag"]
Verdict = Literal["keep", "rerun", "drop", "flag"]


def staleness(trainer_version: int | None, policy_versions: Sequence[int | None]) -> int | None:
    """`trainer_version` minus the oldest of `policy_versions`; None when either is unknown
    (no trainer version given, or no turn was sampled)."""
    if trainer_version is None or not policy_versions:
        return None
    oldest = min(BASE_VERSION if v is None else v for v in policy_versions)
    return max(0, trainer_version - oldest)


class StalenessVerdict(BaseModel):
    """The staleness of one trajectory and what to do with it (`keep`: within bounds)."""

    staleness: int | None
    action: Verdict


class StalenessPolicy(BaseModel):
    """The bound on off-policy data: `max_staleness` versions (None: unbounded) and the action
    taken on a trajectory past it."""

    model_config = ConfigDict(extra="forbid")

    max_staleness: int | None = Field(None, ge=0, description="None: any staleness is accepted")
    action: StaleAction = Field(
        "flag", description="past the bound: rerun it on the current policy, drop it, or keep it flagged"
    )
    max_reruns: int = Field(
        2, ge=0, description="`rerun`: how often one job is run again; then it is dropped (masked)"
    )

    def judge(self, trainer_version: int | None, policy_versions: Sequence[int | None]) -> StalenessVerdict:
        lag = staleness(trainer_version, policy_versions)
        if self.max_staleness is None or lag is None or lag <= self.max_staleness:
            return StalenessVerdict(staleness=lag, action="keep")
        return StalenessVerdict(staleness=lag, action=self.action)
