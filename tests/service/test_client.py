# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The Python clients: sync against a real socket, async in-process."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from service_helpers import TOKEN, live_server, make_service

from nemo_gym_prorl.service import AsyncRolloutClient, RolloutAPIError, RolloutClient, create_app


def test_sync_client_over_a_socket() -> None:
    svc, handler = make_service()
    with live_server(svc, token=TOKEN) as url, RolloutClient(url, token=TOKEN, timeout=10) as client:
        ids = client.submit([{"task": "s", "instance": {"script": {"reward": 0.5}}}, {"task": "s"}])
        results = client.run([{"task": "s", "instance": {"script": {"run_s": 0.2}}}, {"task": "s"}])
        assert [r.state.value for r in results] == ["done", "done"]
        assert client.get(ids[0], wait_s=5).reward == 0.5
        assert not client.wait(ids, timeout_s=5).pending
        assert {r.id for r in client.stream(ids)} == set(ids)
        slow = client.submit([{"task": "s", "instance": {"script": {"run_s": 30}}}])[0]
        assert client.cancel(slow).state.value in ("cancelled",)
        assert [b.url for b in client.add_backend("h:1")] == ["http://h:1"]
        client.drain_backend("h:1")
        assert client.backends() == []
        assert client.status().tasks == ["s"]
        processed = client.process({"data_source": "s", "script": {"reward": 1.0}}, {"temperature": 0.6})
        assert processed.success and processed.score == 1.0
        with pytest.raises(RolloutAPIError) as err:
            client.submit([{"task": "nope"}])
        assert err.value.status == 400 and err.value.code == "unknown_task"
        with RolloutClient(url) as anonymous, pytest.raises(RolloutAPIError) as denied:
            anonymous.status()
        assert denied.value.status == 401
    assert not handler.live  # the server's shutdown closed everything


async def test_async_client_in_process() -> None:
    svc, handler = make_service()
    await svc.start()
    transport = httpx.ASGITransport(app=create_app(svc, manage_lifecycle=False))
    async with AsyncRolloutClient("http://test", transport=transport) as client:
        results = await client.run([{"task": "s", "instance": {"script": {"reward": r}}} for r in (0.0, 1.0)])
        assert [r.reward for r in results] == [0.0, 1.0]
        (slow,) = await client.submit([{"task": "s", "instance": {"script": {"run_s": 30}}}])
        await asyncio.sleep(0.05)
        assert (await client.cancel(slow)).state.value == "cancelled"
        assert (await client.get(slow)).state.value == "cancelled"
        assert [r.id async for r in client.stream([slow])] == [slow]
        await client.add_backend("h:2")
        assert [b.url for b in await client.backends()] == ["http://h:2"]
        await client.remove_backend("h:2")
        assert (await client.wait([slow])).results[0].id == slow
        assert (await client.process({"data_source": "s"})).success
        assert (await client.status()).pipeline.live_jobs == 0
    await svc.close()
    assert not handler.live
