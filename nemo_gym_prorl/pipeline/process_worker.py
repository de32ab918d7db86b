# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""One worker process of the process executor: a `RolloutNode` on an event loop of its own.

The service starts it as `python -m nemo_gym_prorl.pipeline.process_worker FD`, FD one end of a
socket pair. Over it come frames (`frames`): first `("start", build, share, node_id)`, then
`("call", id, method, args, streaming)` and `("cancel", id)`; back go `("event", id, event)`
for each event of a streaming stage, `("done", id, value)`, `("error", id, exception)`, and
every `METRICS_INTERVAL_S` an unsolicited `("metrics", 0, deltas)`: what this process's latency
histograms saw since the last one (its own event loop's lag among them), which the service
adds to its `/metrics`.

The worker lives as long as the connection: when the service closes it (or dies), the worker
closes its node (every sandbox it holds is released) and exits. Ctrl-C at a terminal reaches
the whole process group; the worker leaves that to the service, which closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import socket
import sys
from typing import Any

from nemo_gym_prorl import latency
from nemo_gym_prorl.loop_monitor import GcPauses, LoopMonitor, freeze_startup_heap
from nemo_gym_prorl.pipeline.frames import read_frame, write_frame
from nemo_gym_prorl.pipeline.ray_node import RolloutNode

logger = logging.getLogger(__name__)

METRICS_INTERVAL_S = 0.25  # the service paces INIT by its workers' lag: it must hear it soon
CLOSE_TIMEOUT_S = 60.0  # releasing every sandbox at the end; past it the worker exits anyway


def portable(exc: BaseException) -> BaseException:
    """The exception itself when it survives pickling both ways, else a RuntimeError naming it:
    the service must be able to read whatever a handler raised."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class HistogramDeltas:
    """What each of this process's latency histograms saw since the last call."""

    def __init__(self) -> None:
        self._sent = {h.name: ([0] * len(h.counts), 0.0) for h in latency.ALL}

    def take(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for histogram in latency.ALL:
            with histogram._lock:
                counts, total, peak = list(histogram.counts), histogram.total, histogram.max
            sent_counts, sent_total = self._sent[histogram.name]
            delta = [now - before for now, before in zip(counts, sent_counts, strict=True)]
            if any(delta):
                out[histogram.name] = {"counts": delta, "total": total - sent_total, "max": peak}
            self._sent[histogram.name] = (counts, total)
        out["recent_loop_lag"] = latency.recent_loop_lag()
        return out


class Worker:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._node: RolloutNode | None = None
        self._calls: dict[int, asyncio.Task[None]] = {}
        self._send_lock = asyncio.Lock()

    async def _send(self, frame: tuple[Any, ...]) -> None:
        async with self._send_lock:
            await write_frame(self._writer, frame)

    async def serve(self) -> None:
        start = await read_frame(self._reader)
        if start is None or start[0] != "start":
            raise RuntimeError(f"a process worker's first frame must be start, not {start!r}")
        _, build, share, node_id = start
        self._node = RolloutNode(build, share, node_id)
        monitor, gc_pauses = LoopMonitor(), GcPauses()
        monitor.start()
        gc_pauses.start()
        metrics = asyncio.create_task(self._send_metrics(), name="worker-metrics")
        try:
            while (frame := await read_frame(self._reader)) is not None:
                kind, call_id = frame[0], frame[1]
                if kind == "call":
                    _, _, method, args, streaming = frame
                    task = asyncio.create_task(self._run(call_id, method, args, streaming))
                    self._calls[call_id] = task
                    task.add_done_callback(lambda _, i=call_id: self._calls.pop(i, None))
                    if method == "ready":
                        task.add_done_callback(lambda _: freeze_startup_heap())
                elif kind == "cancel" and call_id in self._calls:
                    self._calls[call_id].cancel()
        finally:
            metrics.cancel()
            for task in list(self._calls.values()):
                task.cancel()
            await asyncio.gather(*self._calls.values(), return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._node.close(), CLOSE_TIMEOUT_S)
            await monitor.stop()
            gc_pauses.stop()

    async def _run(self, call_id: int, method: str, args: tuple[Any, ...], streaming: bool) -> None:
        assert self._node is not None
        try:
            if streaming:
                async for event in getattr(self._node, method)(*args):
                    await self._send(("event", call_id, event))
                value = None
            else:
                value = await getattr(self._node, method)(*args)
        except asyncio.CancelledError:
            return  # the service stopped waiting: nothing to tell it
        except Exception as exc:
            await self._answer(("error", call_id, portable(exc)))
            return
        await self._answer(("done", call_id, value))

    async def _answer(self, frame: tuple[Any, ...]) -> None:
        with contextlib.suppress(ConnectionError):  # the service is gone: the read loop ends too
            await self._send(frame)

    async def _send_metrics(self) -> None:
        deltas = HistogramDeltas()
        while True:
            await asyncio.sleep(METRICS_INTERVAL_S)
            with contextlib.suppress(ConnectionError):
                await self._send(("metrics", 0, deltas.take()))


async def _main(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    try:
        await Worker(reader, writer).serve()
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=os.environ.get("PRORL_WORKER_LOG_LEVEL", "WARNING"))
    # uvloop where it is installed (uvicorn's choice too): measured at 1,024 shell rollouts, its
    # workers' loops ran late past 50 ms about half as often as the standard loop's.
    try:
        import uvloop
    except ImportError:
        asyncio.run(_main(int(sys.argv[1])))
    else:
        uvloop.run(_main(int(sys.argv[1])))


if __name__ == "__main__":
    main()
