# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The trainer's client across a bad link: what cannot act twice is sent again after a lost
answer (a submit of jobs with ids, a wait, a cancel); a policy publish is not."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import pytest

from nemo_gym_prorl.integrations.trl import client as trl_client
from nemo_gym_prorl.integrations.trl.client import ServiceClient, ServiceError


class LossyService:
    """Answers like the service; the first `lose` requests to a path are lost after arriving."""

    def __init__(self, lose: dict[str, int]) -> None:
        self.lose = dict(lose)
        self.received: list[tuple[str, object]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.received.append((request.url.path, body))
        if self.lose.get(request.url.path, 0) > 0:
            self.lose[request.url.path] -= 1
            raise httpx.ReadError("connection reset by peer", request=request)
        if request.url.path == "/v1/rollouts":
            return httpx.Response(202, json={"ids": [job["id"] for job in body["jobs"]]})
        return httpx.Response(200, json={})


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trl_client, "RETRY", replace(trl_client.RETRY, delays_s=(0.0, 0.0, 0.0)))


def test_a_submit_of_jobs_with_ids_is_sent_again_with_the_same_ids() -> None:
    service = LossyService({"/v1/rollouts": 2})
    client = ServiceClient("http://svc", transport=httpx.MockTransport(service))
    jobs = [{"id": f"g-{i}", "task": "math", "instance": {"i": i}} for i in range(3)]
    assert client.submit(jobs) == ["g-0", "g-1", "g-2"]
    sent = [body for path, body in service.received if path == "/v1/rollouts"]
    assert len(sent) == 3 and all(body == sent[0] for body in sent)


def test_jobs_without_ids_and_a_policy_publish_are_sent_once() -> None:
    service = LossyService({"/v1/rollouts": 1, "/v1/policy": 1})
    client = ServiceClient("http://svc", transport=httpx.MockTransport(service))
    with pytest.raises(ServiceError, match="unreachable"):
        client.submit([{"task": "math", "instance": {}}])
    with pytest.raises(ServiceError, match="unreachable"):
        client.publish_policy(2, "/adapters/v2")
    assert [path for path, _ in service.received] == ["/v1/rollouts", "/v1/policy"]


def test_a_link_that_stays_down_ends_in_a_clear_error_after_the_backoff() -> None:
    service = LossyService({"/v1/rollouts/wait": 99})
    client = ServiceClient("http://svc", transport=httpx.MockTransport(service))
    with pytest.raises(ServiceError, match=r"unreachable.*POST http://svc/v1/rollouts/wait"):
        client.wait_all(["a"], timeout_s=5)
    assert len(service.received) == trl_client.RETRY.tries
