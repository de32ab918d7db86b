# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The trainer and the service across a bad link: a submit whose answer is lost is sent again
and is the same jobs, a result stream cut mid-way reconnects for what it has not delivered, a
long poll whose answer is lost is asked again, a client restarted after a cut takes its jobs up
by their ids, and a call that could act twice is not sent again. Nothing is lost and nothing
comes twice, with the asyncio client and the blocking one alike."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from service_helpers import make_service

from nemo_gym_prorl.service import AsyncRolloutClient, RolloutClient, client_requests, create_app


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
    monkeypatch.setattr(client_requests, "RETRY", replace(client_requests.RETRY, delays_s=(0.0, 0.0, 0.0)))


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


async def test_a_long_poll_whose_answer_is_lost_is_asked_again_and_delivers_each_once() -> None:
    svc, _ = make_service()
    await svc.start()
    link = FlakyLink(create_app(svc, manage_lifecycle=False), lose={"/v1/rollouts/wait": 2})
    try:
        async with AsyncRolloutClient("http://svc", transport=link) as client:
            pending = await client.submit(
                [{"task": "s", "instance": {"script": {"run_s": 0.05 * i}}} for i in range(5)]
            )
            ids, delivered = list(pending), []
            while pending:  # a trainer's long-poll loop: whatever is done, then wait again
                answer = await client.wait(pending, timeout_s=10, mode="any")
                delivered += [r.id for r in answer.results]
                pending = answer.pending
        assert sorted(delivered) == sorted(ids)  # none lost, none twice
        assert link.sent.count("/v1/rollouts/wait") >= 3  # two answers lost, asked again
        assert svc.pipeline.submitted_total == 5
    finally:
        await svc.close()


async def test_a_client_restarted_after_a_cut_takes_its_jobs_up_by_their_ids() -> None:
    """The first client's submit reached the service, but the link died before the answer did
    and the client with it (every retry lost too); a new client, given the same job ids (a
    trainer's journal, or `{group}-{sample}` ids), sends them again and collects each once."""
    svc, _ = make_service()
    await svc.start()
    app = create_app(svc, manage_lifecycle=False)
    jobs = [{"id": f"step3-{i}", "task": "s", "instance": {"script": {"reward": i / 4}}} for i in range(4)]
    tries = client_requests.RETRY.tries
    try:
        dead = FlakyLink(app, lose={"/v1/rollouts": tries})
        async with AsyncRolloutClient("http://svc", transport=dead) as first:
            with pytest.raises(httpx.ReadError):
                await first.submit(jobs)
        assert dead.sent.count("/v1/rollouts") == tries
        restarted = FlakyLink(app, cut_after=1)
        async with AsyncRolloutClient("http://svc", transport=restarted) as second:
            ids = await second.submit(jobs)
            results = [r async for r in second.stream(ids, timeout_s=30)]
        assert ids == [job["id"] for job in jobs]
        assert sorted(r.id for r in results) == sorted(ids)
        assert sorted(r.reward for r in results) == [0.0, 0.25, 0.5, 0.75]
        assert svc.pipeline.submitted_total == 4  # every try of either client was the same four jobs
    finally:
        await svc.close()


def test_the_blocking_client_resends_a_submit_with_the_same_ids_and_never_a_publish() -> None:
    bodies: list[dict[str, object]] = []
    answers = iter([None, None, {"ids": ["a", "b"]}])

    def link(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/rollouts":
            bodies.append(json.loads(request.content))
            if (answer := next(answers)) is None:
                raise httpx.ReadError("connection reset by peer", request=request)
            return httpx.Response(200, json=answer)
        raise httpx.ReadError("connection reset by peer", request=request)

    with RolloutClient("http://svc", transport=httpx.MockTransport(link)) as client:
        assert client.submit([{"task": "s", "instance": {}}, {"task": "s", "instance": {}}]) == ["a", "b"]
        with pytest.raises(httpx.ReadError):
            client.publish_policy(1, "/nowhere/adapter")
    assert len(bodies) == 3 and bodies[0] == bodies[1] == bodies[2]  # the same ids each time
    assert all(job["id"] for job in bodies[0]["jobs"])  # type: ignore[index]
