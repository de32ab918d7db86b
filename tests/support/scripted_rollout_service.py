# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A scripted rollout service for the TRL integration's tests, as an `httpx.MockTransport`.

It answers the native calls the trainer makes (`POST /v1/rollouts`, `POST /v1/rollouts/wait`,
`DELETE /v1/rollouts/{id}`, `POST /v1/policy`) with `JobResult`-shaped JSON whose trajectories
come from `script(job, index)`. It runs in the model venv (Python 3.11, httpx only), where the
trainer runs; the real service's result models are exercised by test_trl_fields.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

# job (the submitted JobSpec JSON), its index in submission order -> the JobResult JSON fields to
# set (state, reward, trajectory, mask_sample, ...).
Script = Callable[[dict[str, Any], int], dict[str, Any]]


def model_turn(prompt: list[int], generated: list[int], logprob: float = -1.0) -> dict[str, Any]:
    """An assistant message with the service's token fields."""
    return {
        "role": "assistant",
        "content": "",
        "prompt_token_ids": prompt,
        "generation_token_ids": generated,
        "generation_log_probs": [logprob] * len(generated),
    }


@dataclass
class ScriptedRolloutService:
    script: Script
    token: str | None = None
    policy_status: int = 200
    jobs: list[dict[str, Any]] = field(default_factory=list)
    policies: list[dict[str, Any]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    unfinished: set[str] = field(default_factory=set)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.token is not None and request.headers.get("authorization") != f"Bearer {self.token}":
            return httpx.Response(401, json={"error": "unauthorized", "reason": "missing bearer token"})
        path = request.url.path
        if request.method == "DELETE" and path.startswith("/v1/rollouts/"):
            self.cancelled.append(path.rsplit("/", 1)[1])
            return httpx.Response(200, json={})
        body = json.loads(request.content or b"{}")
        if path == "/v1/rollouts":
            ids = []
            for job in body["jobs"]:
                ids.append(f"job-{len(self.jobs)}")
                self.jobs.append(job)
            return httpx.Response(202, json={"ids": ids})
        if path == "/v1/rollouts/wait":
            done = [i for i in body["ids"] if i not in self.unfinished]
            pending = [i for i in body["ids"] if i in self.unfinished]
            return httpx.Response(
                200, json={"results": [self.result(i) for i in done], "pending": pending, "missing": {}}
            )
        if path == "/v1/policy":
            self.policies.append(body)
            if self.policy_status >= 400:
                return httpx.Response(
                    self.policy_status, json={"error": "load_failed", "reason": "backend refused the adapter"}
                )
            return httpx.Response(200, json={"version": body["version"]})
        return httpx.Response(404, json={"error": "not_found", "reason": path})

    def result(self, job_id: str) -> dict[str, Any]:
        index = int(job_id.split("-")[1])
        job = self.jobs[index]
        return {
            "id": job_id,
            "task": job.get("task") or "scripted",
            "state": "done",
            "group_id": job.get("group_id"),
            "submitted_at": 0.0,
            "reward_components": {},
            **self.script(job, index),
        }
