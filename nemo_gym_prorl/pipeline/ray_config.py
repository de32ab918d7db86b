# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Settings of the Ray executor: which cluster, which nodes, how many jobs each, and how long a
silent node is waited for."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RayExecutorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str | None = Field(
        None,
        description="Ray cluster to join (`auto`, `host:port`, `ray://host:10001`). None: RAY_ADDRESS, "
        "then NeMo Gym's ray_head_node_address; with neither, a local Ray is started.",
    )
    namespace: str = Field("prorl", min_length=1, description="Ray namespace of the rollout actors.")
    slots_per_node: int = Field(
        64, ge=1, le=100_000, description="Jobs with live state (a sandbox) one node may hold at once."
    )
    node_labels: dict[str, str] = Field(
        default_factory=dict, description="Use only nodes carrying all these Ray labels."
    )
    resource: str | None = Field(
        None, description="Use only nodes offering this custom resource (e.g. `rollout`); else any with CPUs."
    )
    max_attempts: int = Field(
        3, ge=1, le=100, description="Starts per job when its node is lost mid-stage (1: never re-run)."
    )
    health_interval_s: float = Field(
        2.0, gt=0, description="How often nodes are checked (and new ones found)."
    )
    node_timeout_s: float = Field(
        30.0, gt=0, description="A node silent this long is lost: its jobs are re-run elsewhere."
    )
    start_timeout_s: float = Field(
        300.0, gt=0, description="How long to wait for the first node's actor to be ready."
    )
    no_node_timeout_s: float = Field(
        300.0,
        gt=0,
        description="With no live node for this long, a job waiting to be placed fails as infrastructure "
        "(masked) instead of waiting for nodes that may never come back.",
    )
