# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The balancer's data: its knobs, one endpoint's bookkeeping, snapshots and the lease.

Kept apart from `balancer.py` (the policy) so readers of a status page or a config find the
shapes without wading through the scheduling code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pydantic import BaseModel, Field


class BalancerConfig(BaseModel):
    """Knobs of the balancing policy. Defaults suit LLM backends on one cluster."""

    max_in_flight: int = Field(32, ge=1, description="default per-endpoint concurrency cap")
    acquire_timeout_s: float = Field(600.0, gt=0, description="longest wait for a free slot")
    eject_after_failures: int = Field(
        3, ge=1, description="consecutive failures that eject without waiting for a probe"
    )
    eject_after_probe_timeouts: int = Field(
        3,
        ge=1,
        description="health probes in a row left unanswered in time before a healthy endpoint is "
        "ejected (a busy server can answer late; a refused connection ejects at once)",
    )
    readmit_after_successes: int = Field(1, ge=1, description="good probes before re-admission")
    health_interval_s: float = Field(5.0, gt=0, description="period of the background probe")


@dataclass(slots=True)
class EndpointState:
    """Mutable bookkeeping for one endpoint (internal; snapshots leave as `EndpointInfo`)."""

    address: str
    max_in_flight: int
    in_flight: int = 0
    bound: int = 0  # trajectories currently sticky to this endpoint
    assigned_total: int = 0  # trajectories ever bound here
    served: int = 0  # leases completed
    healthy: bool = True
    draining: bool = False
    removed: bool = False
    consecutive_failures: int = 0
    consecutive_ok_probes: int = 0
    consecutive_probe_timeouts: int = 0
    last_error: str | None = None
    version: int = 0  # renewed on every change of the heap key; stale heap entries are skipped

    def heap_key(self) -> tuple[int, int, int]:
        return (self.in_flight, self.bound, self.assigned_total)

    def accepts_new_keys(self) -> bool:
        return self.healthy and not self.draining and not self.removed

    def has_slot(self) -> bool:
        return self.in_flight < self.max_in_flight

    def info(self) -> EndpointInfo:
        """The read-only snapshot: every field `EndpointInfo` declares, read off this state."""
        return EndpointInfo.model_validate(self, from_attributes=True)


class EndpointInfo(BaseModel):
    """A read-only snapshot of one endpoint, for status pages and tests."""

    address: str
    max_in_flight: int
    in_flight: int
    bound: int
    assigned_total: int
    served: int
    healthy: bool
    draining: bool
    last_error: str | None


class BalancerStats(BaseModel):
    endpoints: list[EndpointInfo]
    sticky_hits: int
    sticky_moves: int
    picks: int
    waiting: int = Field(0, description="callers waiting for a slot now")
    waited: int = Field(0, description="acquisitions that had to wait for a slot")
    wakeups: int = Field(0, description="waiting callers resumed: one per slot handed out, never all")
    wait_s: float = Field(0.0, description="seconds spent waiting for slots, all callers together")

    @property
    def sticky_hit_rate(self) -> float:
        total = self.sticky_hits + self.sticky_moves
        return 1.0 if total == 0 else self.sticky_hits / total


@dataclass(slots=True)
class Lease:
    """One unit of work on one endpoint. Release it exactly once (the context manager does)."""

    address: str
    key: str | None
    moved_from: str | None = None  # set when a sticky key had to leave its endpoint
    move_reason: str | None = None
    acquired_at: float = field(default_factory=time.monotonic)
    released: bool = False
