# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The trainer and the service across a bad link: a submit whose answer is lost is sent again
and is the same jobs, a result stream cut mid-way reconnects for what it has not delivered, and
a call that could act twice is not sent again. Nothing is lost and nothing comes twice."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from service_helpers import make_service

from nemo_gym_prorl.service import AsyncRolloutClient, client_requests, create_app


class FlakyLink(httpx.AsyncBaseTransport):
    """The service app behind a link that loses the answers of the first `lose` requests to a
    path (the server did the work; the client never hears) and cuts a result stream after
    `cut_after` lines."""

    def __init__(self, app: Any, *, lose: dict[str, int] | None = None, cut_after: int | None = None) -> None:
        self.inner = httpx.ASGITransport(app=app)
        self.lose = dict(lose or {})
        self.cut_after = cut_after
        self.sent: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.sent.append(path)
        response = await self.inner.handle_async_request(request)
        if self.lose.get(path, 0) > 0:
            self.lose[path] -= 1
            await response.aread()
            raise httpx.ReadError("connection reset by peer", request=request)
        if path.endswith("/stream") and self.cut_after is not None:
            lines, self.cut_after = self.cut_after, None
            return httpx.Response(
                response.status_code, headers=response.headers, stream=_Cut(response, lines)
            )
        return response


class _Cut(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response, lines: int) -> None:
        self.response, self.lines = response, lines

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.response.aiter_raw():
            for line in chunk.splitlines(keepends=True):
                if seen == self.lines:
                    raise httpx.RemoteProtocolError("peer closed connection mid-stream")
                seen += 1
                yield line


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_requests, "RETRY_DELAYS_S", (0.0, 0.0, 0.0))


async def test_a_submit_whose_answer_is_lost_is_sent_again_and_runs_each_job_once() -> None:
    svc, handler = make_service()
    await svc.start()
    link = FlakyLink(create_app(svc, manage_lifecycle=False), lose={"/v1/rollouts": 2})
    try:
        async with AsyncRolloutClient("http://svc", transport=link) as client:
            jobs = [{"task": "s", "instance": {"script": {"reward": r}}} for r in (0.0, 0.5, 1.0)]
            ids = await client.submit(jobs)
            results = [r async for r in client.stream(ids, timeout_s=30)]
        assert link.sent.count("/v1/rollouts") == 3  # two answers lost, the third heard
        assert sorted(r.reward for r in results) == [0.0, 0.5, 1.0]
        assert svc.pipeline.submitted_total == 3  # the same three jobs, never six or nine
    finally:
        await svc.close()
    assert not handler.live


async def test_a_result_stream_cut_mid_way_resumes_by_job_id_and_delivers_each_once() -> None:
    svc, _ = make_service()
    await svc.start()
    link = FlakyLink(create_app(svc, manage_lifecycle=False), cut_after=1)
    try:
        async with AsyncRolloutClient("http://svc", transport=link) as client:
            ids = await client.submit(
                [{"task": "s", "instance": {"script": {"run_s": 0.05 * i}}} for i in range(5)]
            )
            delivered = [r.id async for r in client.stream(ids, timeout_s=30)]
        assert sorted(delivered) == sorted(ids)  # none lost, none twice
        assert link.sent.count("/v1/rollouts/stream") == 2
    finally:
        await svc.close()


async def test_a_policy_publish_whose_answer_is_lost_is_not_sent_again() -> None:
    svc, _ = make_service()
    await svc.start()
    link = FlakyLink(create_app(svc, manage_lifecycle=False), lose={"/v1/policy": 1})
    try:
        async with AsyncRolloutClient("http://svc", transport=link) as client:
            with pytest.raises(httpx.ReadError):
                await client.publish_policy(1, "/nowhere/adapter")
        assert link.sent.count("/v1/policy") == 1
    finally:
        await svc.close()
