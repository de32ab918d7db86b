# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`<state>/state.json`: what `prorl gym up` started, on disk before anything waits on it.

A start writes the record when it launches each process group, and again whenever the groups
have started more (Ray's daemons and workers, the servers), all along its readiness waits: a
signal, a readiness timeout or a SIGKILL of the launcher itself leaves `prorl gym down` the
record of every process to stop (pid and start time, so a pid the system has given to another
process since is never signalled). `ready` turns true once the stack answers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, Field

from nemo_gym_prorl.integrations.gym.processes import (
    Echo,
    GroupRecord,
    refresh_descendants,
    signals_held,
    stop_group,
)

__all__ = ["StackState", "StartRecord", "load_state", "save_state", "state_path"]


class StackState(BaseModel):
    started_at: float
    workdir: str
    head_url: str
    capture_dir: str | None = None  # Gym's model_call_capture_dir for this stack
    config_paths: list[str]
    model_url: str
    model_name: str
    agent_url: str | None = None
    groups: list[GroupRecord] = Field(default_factory=list)
    # False while `up` is still starting the stack. A record without the field predates it and
    # was only ever written once the stack was ready.
    ready: bool = True

    def running(self) -> list[tuple[int, int]]:
        """Every recorded process still running (same pid and start time)."""
        return [proc for group in self.groups for proc in group.running()]


def state_path(state_dir: Path) -> Path:
    return state_dir / "state.json"


def load_state(state_dir: Path) -> StackState | None:
    path = state_path(state_dir)
    if not path.is_file():
        return None
    return StackState.model_validate_json(path.read_text())


def save_state(state_dir: Path, state: StackState) -> None:
    # Whole or not at all: the launcher may be killed while it writes, and `down` must still
    # read the previous record.
    path = state_path(state_dir)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(state.model_dump_json(indent=2))
    os.replace(partial, path)


class StartRecord:
    """The record of a start in progress: `launching()` around each launch, `add` the group it
    started, `track` between probes while waiting, `stop` if the start does not finish."""

    def __init__(self, state_dir: Path, state: StackState) -> None:
        self.state_dir, self.state = state_dir, state
        self.state.ready = False
        save_state(state_dir, state)

    @property
    def groups(self) -> list[GroupRecord]:
        return self.state.groups

    @contextmanager
    def launching(self) -> Iterator[None]:
        """A launch and its `add`: SIGINT/SIGTERM wait until the group is on disk, so no signal
        lands between a process's start and its record."""
        with signals_held():
            yield

    def add(self, group: GroupRecord) -> None:
        self.groups.append(group)
        save_state(self.state_dir, self.state)

    def track(self) -> None:
        """Record what the groups have started since the last look (written only when new)."""
        if [group for group in self.groups if refresh_descendants(group)]:
            save_state(self.state_dir, self.state)

    def discard(self, group: GroupRecord, echo: Echo) -> None:
        """Stop a group that failed to start, and drop it from the record."""
        stop_group(group, echo=echo)
        self.groups.remove(group)
        save_state(self.state_dir, self.state)

    def finish(self) -> StackState:
        self.track()
        self.state.ready = True
        save_state(self.state_dir, self.state)
        return self.state

    def stop(self, echo: Echo) -> list[tuple[int, int]]:
        """Stop every group the start launched, the last first; the record is removed once none of
        its processes runs (else kept for `down`). Returns what still runs."""
        for group in reversed(self.groups):
            stop_group(group, echo=echo)
        survivors = self.state.running()
        if survivors:
            save_state(self.state_dir, self.state)
        else:
            state_path(self.state_dir).unlink(missing_ok=True)
        return survivors
