# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Length-prefixed pickled frames over an asyncio stream: how the service and its worker
processes (`process_executor`, `process_worker`) talk over a socket pair of their own.

Both ends are this package, started by the same service from the same interpreter, over a
socket no other process holds: pickle is safe here, and carries jobs, trajectories and
exceptions as the objects they are.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any

_LENGTH = struct.Struct("!I")
MAX_FRAME_BYTES = 1 << 30  # a frame past this is a broken peer, not a trajectory


async def write_frame(writer: asyncio.StreamWriter, frame: Any) -> None:
    payload = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
    writer.writelines((_LENGTH.pack(len(payload)), payload))
    await writer.drain()


async def read_frame(reader: asyncio.StreamReader) -> Any | None:
    """The next frame, or None when the peer closed the stream (between frames or inside one)."""
    try:
        (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
        if length > MAX_FRAME_BYTES:
            raise ValueError(f"a frame of {length} bytes (at most {MAX_FRAME_BYTES})")
        frame = pickle.loads(await reader.readexactly(length))
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    # A read of buffered bytes does not suspend: a burst of frames (a thousand results, or calls)
    # would be read and handled in one turn of the loop, and every other rollout wait for it.
    await asyncio.sleep(0)
    return frame
