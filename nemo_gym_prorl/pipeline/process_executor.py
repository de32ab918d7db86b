# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Stages in worker processes of this machine: one event loop per worker, not one for all.

One service process runs every rollout's model calls, tool calls and sandbox opens on a single
event loop; at a thousand concurrent rollouts that loop is busy all the time and everything on
it waits its turn. `executor.kind=processes` starts `executor.processes.workers` worker
processes (`process_worker`), each a `RolloutNode` that builds its own handlers and LLM pool
(with its share of every backend's in-flight cap) exactly as a Ray node's actor does, and
places jobs on them as the Ray executor places jobs on nodes (`node_executor`): the service's
loop keeps the API, the schedule and the results; the workers' loops run the rollouts.

A worker that dies (or stops answering for `node_timeout_s`) is lost: its jobs run again on
the others (`max_attempts`), and a new worker takes its place at the next health check. Each
worker's latency histograms come back every quarter second and are added to the service's
(`/metrics`); its event loop's lag is `prorl_worker_event_loop_lag_seconds`, and INIT paces
new rollouts by the latest loop of all (`pipeline.init_pace_lag_s`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl import latency
from nemo_gym_prorl.pipeline.frames import read_frame, write_frame
from nemo_gym_prorl.pipeline.node_executor import NodeExecutor
from nemo_gym_prorl.pipeline.ray_node import NodeBuilder, NodeShare, StageEvent
from nemo_gym_prorl.sandbox.threads import SANDBOX_THREADS, SANDBOX_THREADS_VARIABLE

logger = logging.getLogger(__name__)

MIN_SANDBOX_THREADS = 8
EXIT_WAIT_S = 10.0  # a worker told to go closes its sandboxes first; past this it is killed


class ProcessExecutorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workers: int = Field(
        2, ge=1, le=256, description="Worker processes, each an event loop running rollouts."
    )
    slots_per_worker: int = Field(
        1024, ge=1, le=100_000, description="Jobs with live state (a sandbox) one worker may hold at once."
    )
    max_attempts: int = Field(
        3, ge=1, le=100, description="Starts per job when its worker dies mid-stage (1: never re-run)."
    )
    health_interval_s: float = Field(2.0, gt=0, description="How often workers are checked (and replaced).")
    node_timeout_s: float = Field(
        60.0, gt=0, description="A worker silent this long is lost: killed, its jobs re-run elsewhere."
    )
    start_timeout_s: float = Field(
        120.0, gt=0, description="How long a worker may take to build its runtime."
    )


class WorkerLost(ConnectionError):
    """The worker process ended, or its connection did: whatever it ran there is gone."""


class WorkerProcess:
    """The service's end of one worker: its process and the calls in flight over its socket."""

    def __init__(self, node_id: str, build: NodeBuilder, share: NodeShare, sandbox_threads: int) -> None:
        self.node_id = node_id
        ours, theirs = socket.socketpair()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "nemo_gym_prorl.pipeline.process_worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                # A session of its own is a program of its own to the kernel's autogroup
                # scheduler (where the service runs in the root cpu cgroup, as here): the workers'
                # loops then weigh as much as the service's beside the sandboxes' cpu group,
                # instead of sharing one program's CPU share with the service and whatever else
                # its session runs. It ends with its socket, not with the terminal's signals.
                start_new_session=True,
                env={**os.environ, SANDBOX_THREADS_VARIABLE: str(sandbox_threads)},
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        self._ids = itertools.count(1)
        self._calls: dict[int, asyncio.Queue[tuple[str, Any]]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self.gone: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._sending: set[asyncio.Future[None]] = set()
        self._connected = asyncio.ensure_future(self._connect(build, share))

    async def _connect(self, build: NodeBuilder, share: NodeShare) -> None:
        reader, self._writer = await asyncio.open_unix_connection(sock=self._sock)
        await write_frame(self._writer, ("start", build, share, self.node_id))
        self._reading = asyncio.create_task(self._read(reader), name=f"{self.node_id}-read")

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while (frame := await read_frame(reader)) is not None:
                kind, call_id, value = frame
                if kind == "metrics":
                    self._absorb(value)
                elif (queue := self._calls.get(call_id)) is not None:
                    queue.put_nowait((kind, value))
        except Exception as exc:
            logger.warning("worker %s sent what it cannot have: %s", self.node_id, exc)
        finally:
            self._end(f"its connection ended (exit status {self.process.poll()})")

    def _absorb(self, deltas: dict[str, Any]) -> None:
        latency.note_worker_loop_lag(self.node_id, float(deltas.pop("recent_loop_lag", 0.0)))
        for name, delta in deltas.items():
            latency.absorb(name, delta["counts"], delta["total"], delta["max"])

    def _end(self, why: str) -> None:
        if not self.gone.done():
            self.gone.set_result(why)
        latency.forget_worker_loop_lag(self.node_id)
        for queue in self._calls.values():
            queue.put_nowait(("lost", why))

    async def _start_call(
        self, method: str, args: tuple[Any, ...], streaming: bool
    ) -> tuple[int, asyncio.Queue]:
        await self._connected
        if self.gone.done():
            raise WorkerLost(f"worker {self.node_id} is gone: {self.gone.result()}")
        call_id = next(self._ids)
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._calls[call_id] = queue
        try:
            assert self._writer is not None
            await write_frame(self._writer, ("call", call_id, method, args, streaming))
        except (ConnectionError, RuntimeError) as exc:
            del self._calls[call_id]
            self._end(f"sending failed: {exc}")
            raise WorkerLost(f"worker {self.node_id} is gone: {exc}") from exc
        return call_id, queue

    def _settle(self, kind: str, value: Any) -> Any:
        if kind == "error":
            raise value
        if kind == "lost":
            raise WorkerLost(f"worker {self.node_id} is gone: {value}")
        return value

    async def ask(self, method: str, *args: Any) -> Any:
        call_id, queue = await self._start_call(method, args, streaming=False)
        try:
            return self._settle(*await queue.get())
        finally:
            self._calls.pop(call_id, None)

    async def stream(self, method: str, *args: Any) -> AsyncIterator[StageEvent]:
        call_id, queue = await self._start_call(method, args, streaming=True)
        finished = False
        try:
            while True:
                kind, value = await queue.get()
                if kind == "event":
                    yield value
                    continue
                finished = True
                self._settle(kind, value)
                return
        finally:
            self._calls.pop(call_id, None)
            if not finished and not self.gone.done():
                self._cancel(call_id)

    def _cancel(self, call_id: int) -> None:
        """Tell the worker to stop a call no one waits on (sent without waiting for room)."""
        writer = self._writer
        if writer is None or writer.is_closing():
            return
        sending = asyncio.ensure_future(self._send_quietly(("cancel", call_id, None)))
        self._sending.add(sending)
        sending.add_done_callback(self._sending.discard)

    async def _send_quietly(self, frame: tuple[Any, ...]) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            assert self._writer is not None
            await write_frame(self._writer, frame)

    def stop(self) -> None:
        """Close the connection: the worker releases what it holds and exits (`wait_exited`)."""
        self._connected.cancel()
        if self._writer is not None:
            self._writer.close()
        else:
            self._sock.close()
        self._end("stopped by the service")

    async def wait_exited(self, timeout_s: float) -> None:
        """Until the process is gone: waited for `timeout_s`, then killed and reaped."""
        try:
            await asyncio.wait_for(asyncio.to_thread(self.process.wait), timeout_s)
        except TimeoutError:
            logger.warning("worker %s did not exit in %.0fs; killed", self.node_id, timeout_s)
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)
            await asyncio.to_thread(self.process.wait)


class ProcessExecutor(NodeExecutor):
    """A `StageExecutor` over `workers` worker processes of this machine."""

    kind = "worker process"

    def __init__(self, config: ProcessExecutorConfig, build: NodeBuilder) -> None:
        super().__init__(
            build,
            slots_per_node=config.slots_per_worker,
            max_attempts=config.max_attempts,
            health_interval_s=config.health_interval_s,
            node_timeout_s=config.node_timeout_s,
            start_timeout_s=config.start_timeout_s,
            no_node_timeout_s=config.start_timeout_s,
        )
        self.config = config
        self._lost_errors = (WorkerLost,)
        self._generation = [0] * config.workers  # a replaced worker's place gets a new id
        self._workers: dict[str, WorkerProcess] = {}
        self._exits: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        await self._start_nodes()

    def _id(self, place: int) -> str:
        return f"worker-{place}.{self._generation[place]}"

    async def _find(self) -> list[dict[str, Any]]:
        """One node per place; a place whose worker is gone gets the next generation's id."""
        found = []
        for place in range(self.config.workers):
            worker = self._workers.get(self._id(place))
            if worker is not None and worker.gone.done():
                self._generation[place] += 1
            found.append({"NodeID": self._id(place), "NodeManagerAddress": f"pid {os.getpid()}"})
        return found

    def _place(self, node: dict[str, Any], share: NodeShare) -> WorkerProcess:
        # The workers share the machine's sandbox threads, not each take as many: every runnable
        # one weighs as much as all the sandboxes' cpu group together (`sandbox.limits`), and
        # N times the threads opening and closing sandboxes starve the shells inside them.
        threads = max(MIN_SANDBOX_THREADS, SANDBOX_THREADS // self.config.workers)
        worker = WorkerProcess(node["NodeID"], self._build, share, threads)
        self._workers[worker.node_id] = worker
        worker.gone.add_done_callback(lambda _: self._changed.set())
        return worker

    async def _ask(self, actor: WorkerProcess, method: str, *args: Any) -> Any:
        return await actor.ask(method, *args)

    def _stream(self, actor: WorkerProcess, method: str, *args: Any) -> AsyncIterator[StageEvent]:
        return actor.stream(method, *args)

    def _kill(self, actor: WorkerProcess) -> None:
        place = int(actor.node_id.removeprefix("worker-").split(".")[0])
        if self._id(place) == actor.node_id:  # its place gets a new worker at the next check
            self._generation[place] += 1
        actor.stop()
        self._workers.pop(actor.node_id, None)
        exit_wait = asyncio.ensure_future(actor.wait_exited(EXIT_WAIT_S))
        self._exits.add(exit_wait)
        exit_wait.add_done_callback(self._exits.discard)

    async def _after_close(self) -> None:
        for worker in list(self._workers.values()):  # placed but never ready
            self._kill(worker)
        await asyncio.gather(*self._exits, return_exceptions=True)

    def worker_pids(self) -> list[int]:
        return [w.process.pid for w in self._workers.values()]
