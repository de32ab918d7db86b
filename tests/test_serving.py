# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""An embedded HTTP server stops when its block ends, even with a request still waiting: the
request gets a grace period, then is cancelled, rather than holding the shutdown (a client
streaming results would otherwise keep `prorl train` from stopping until every queued rollout
had run)."""

from __future__ import annotations

import asyncio
import time

import httpx
from fastapi import FastAPI

from nemo_gym_prorl.serving import serving


async def test_a_request_still_waiting_does_not_hold_the_servers_shutdown() -> None:
    app = FastAPI()
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    @app.get("/wait")
    async def wait() -> dict[str, str]:
        entered.set()
        try:
            await asyncio.sleep(3600)  # a wait for results that will not come
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {"never": "answered"}

    async with httpx.AsyncClient(timeout=60) as client:
        async with serving(app, host="127.0.0.1", port=0, handle_signals=False, graceful_s=0.5) as served:
            waiting = asyncio.ensure_future(client.get(f"{served.url}/wait"))
            await asyncio.wait_for(entered.wait(), 10)
            started = time.monotonic()
        stopped_in = time.monotonic() - started
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
    assert cancelled.is_set()  # the handler was cancelled, not left running
    assert stopped_in < 30  # not the hour the request would have waited
