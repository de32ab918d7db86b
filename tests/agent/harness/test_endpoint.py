# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The recording endpoint, driven by the OpenAI client a harness uses (in a thread, as a harness
runs): each rollout's own base URL and token, streaming and not, and nothing else reachable."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from support.fake_llm import FakeLLM

from nemo_gym_prorl.agent.harness.endpoint import RecordingEndpoint
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.balancer import BalancerConfig
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.recording import RecordingSession
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.llm.slot_wait import SlotWaitClock, listen

TASK = {"role": "user", "content": "Fix the bug."}


@pytest.fixture
async def llm() -> AsyncIterator[LLMAccess]:
    backend = await FakeLLM(responder=lambda prompt: "```bash\nls\n```").start()
    async with LLMBackendPool(PoolConfig(backends=[backend.url], request_timeout_s=5)) as pool:
        yield LLMAccess(pool=pool, dialect=VLLMCompletionsDialect(), model="fake")
    await backend.kill()


def session(llm: LLMAccess) -> RecordingSession:
    return RecordingSession(llm, sampling=SamplingParams(max_tokens=64))


def three_calls(base_url: str, token: str, *, stream: bool) -> list[str]:
    """What a bash harness does: call, append the reply and an observation, call again."""
    client = openai.OpenAI(base_url=base_url, api_key=token, max_retries=0)
    messages: list[Any] = [TASK]
    texts = []
    for observation in ("a.py", "b.py", ""):
        if stream:
            chunks = list(client.chat.completions.create(model="fake", messages=messages, stream=True))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert chunks[-1].choices[0].finish_reason == "stop"
        else:
            reply = client.chat.completions.create(model="fake", messages=messages)
            text = reply.choices[0].message.content or ""
        texts.append(text)
        messages = [
            *messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": observation},
        ]
    return texts


@pytest.mark.parametrize("stream", [False, True])
async def test_an_openai_client_drives_a_rollout_through_its_own_url(llm: LLMAccess, stream: bool) -> None:
    async with RecordingEndpoint() as endpoint:
        with endpoint.opened(session(llm)) as door:
            texts = await asyncio.to_thread(three_calls, door.base_url, door.token, stream=stream)
    assert texts == ["```bash\nls\n```"] * 3
    record = door.session.record()
    assert len(record.segments) == 1 and record.merged_share == 1.0
    assert len(record.turns) == 3


async def test_only_the_rollouts_token_opens_its_url_and_the_url_dies_with_the_rollout(
    llm: LLMAccess,
) -> None:
    async with RecordingEndpoint() as endpoint:
        with endpoint.opened(session(llm)) as first, endpoint.opened(session(llm)) as second:
            async with httpx.AsyncClient() as http:
                body = {"model": "fake", "messages": [TASK]}
                url = f"{first.base_url}/chat/completions"
                assert (await http.post(url, json=body)).status_code == 401
                wrong = {"Authorization": f"Bearer {second.token}"}  # another rollout's token
                assert (await http.post(url, json=body, headers=wrong)).status_code == 401
                own = {"Authorization": f"Bearer {first.token}"}
                assert (await http.post(url, json=body, headers=own)).status_code == 200
                models = await http.get(f"{first.base_url}/models", headers=own)
                assert models.json()["data"][0]["id"] == "fake"
                assert (await http.get(f"{endpoint.url}/docs")).status_code == 404
        async with httpx.AsyncClient() as http:
            ended = await http.post(url, json=body, headers=own)
    assert ended.status_code == 404 and "ended" in ended.json()["error"]["message"]
    assert first.session.calls == 1 and second.session.calls == 0


async def test_a_request_no_trajectory_can_record_is_a_400_the_harness_can_read(llm: LLMAccess) -> None:
    async with RecordingEndpoint() as endpoint:
        with endpoint.opened(session(llm)) as door:
            client = openai.AsyncOpenAI(base_url=door.base_url, api_key=door.token, max_retries=0)
            with pytest.raises(openai.BadRequestError, match="stop sequences are not supported"):
                await client.chat.completions.create(model="fake", messages=[TASK], stop=["\n"])  # type: ignore[list-item]
            with pytest.raises(openai.BadRequestError, match="not a chat-completions request"):
                await client.chat.completions.create(model="fake", messages=[])
            async with httpx.AsyncClient() as http:
                garbage = await http.post(
                    f"{door.base_url}/chat/completions",
                    content=b"{not json",
                    headers={"Authorization": f"Bearer {door.token}"},
                )
            assert garbage.status_code == 400
            await client.close()
    assert door.session.calls == 0


async def test_a_call_waiting_for_a_model_slot_stops_the_clock_of_the_rollout_that_opened_the_door() -> None:
    # The harness's calls arrive as the endpoint's own requests, in tasks of their own; the wait
    # is still told to whoever budgets the rollout (its stage runner), as the agent loop's is.
    backend = await FakeLLM(responder=lambda prompt: "done").start()
    config = PoolConfig(backends=[backend.url], request_timeout_s=5, balancer=BalancerConfig(max_in_flight=1))
    async with LLMBackendPool(config) as pool:
        llm = LLMAccess(pool=pool, dialect=VLLMCompletionsDialect(), model="fake")
        held = await pool.balancer.acquire()  # the only slot, taken by someone else
        clock = SlotWaitClock()
        async with RecordingEndpoint() as endpoint:
            with listen(clock), endpoint.opened(session(llm)) as door:
                client = openai.AsyncOpenAI(base_url=door.base_url, api_key=door.token, max_retries=0)
                call = asyncio.create_task(client.chat.completions.create(model="fake", messages=[TASK]))
                for _ in range(200):
                    if clock.waiting:
                        break
                    await asyncio.sleep(0.01)
                assert clock.waiting and not call.done()
                pool.balancer.release(held)
                reply = await call
    await backend.kill()
    assert reply.choices[0].message.content == "done"
    assert not clock.waiting and clock.waited_s() > 0
