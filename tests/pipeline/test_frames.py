# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Frames between the service and its worker processes: whole objects both ways, the end of the
stream as None, and a burst of frames that does not hold the event loop."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from nemo_gym_prorl.pipeline.frames import _LENGTH, MAX_FRAME_BYTES, read_frame


def _framed(*frames: object) -> bytes:
    out = b""
    for frame in frames:
        payload = pickle.dumps(frame)
        out += _LENGTH.pack(len(payload)) + payload
    return out


async def test_a_burst_of_buffered_frames_lets_other_tasks_run_between_them() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(_framed(("done", 1, "a"), ("done", 2, "b"), ("done", 3, "c")))
    reader.feed_eof()
    order: list[str] = []

    async def reads() -> None:
        while (frame := await read_frame(reader)) is not None:
            order.append(f"frame {frame[1]}")

    async def other() -> None:
        for i in range(3):
            order.append(f"other {i}")
            await asyncio.sleep(0)

    await asyncio.gather(reads(), other())
    assert order.index("other 1") < order.index("frame 3"), order


async def test_the_end_of_the_stream_even_inside_a_frame_is_none() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(_framed({"x": 1})[:-2])
    reader.feed_eof()
    assert await read_frame(reader) is None


async def test_a_frame_longer_than_any_trajectory_is_refused() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(_LENGTH.pack(MAX_FRAME_BYTES + 1))
    with pytest.raises(ValueError, match="a frame of"):
        await read_frame(reader)
