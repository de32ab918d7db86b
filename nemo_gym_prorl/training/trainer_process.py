# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Run one trainer program (`integrations/trl/sft.py`, `grpo.py`, `merge.py`) in the model venv, where
torch, transformers, TRL and PEFT live, and read its progress events as it runs.

The trainer is its own process group: stopping it (on an error, a signal, or when `prorl train`
itself is cancelled) is one signal to that group, and nothing else is ever signalled. Its log
(everything that is not an event) goes to a file, whose tail is shown when it fails."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

import nemo_gym_prorl
from nemo_gym_prorl.integrations.trl.jobs import Event, parse_event
from nemo_gym_prorl.llm.embedded import EmbeddedLayout

Program = Literal["sft", "grpo", "merge"]
PROGRAMS: dict[Program, str] = {
    "sft": "nemo_gym_prorl.integrations.trl.sft",
    "grpo": "nemo_gym_prorl.integrations.trl.grpo",
    "merge": "nemo_gym_prorl.integrations.trl.merge",
}


class TrainerFailed(RuntimeError):
    """The trainer exited with an error (the message carries its log's tail)."""


def trainer_env() -> dict[str, str]:
    package_root = Path(nemo_gym_prorl.__file__).resolve().parent.parent
    return {
        **os.environ,
        "PYTHONPATH": str(package_root),
        "HF_HUB_OFFLINE": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "TQDM_DISABLE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONUNBUFFERED": "1",
    }


def _write_job(workdir: Path, program: Program, job: BaseModel) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"{program}_job.json"
    path.write_text(job.model_dump_json(indent=2))
    return path


def _tail(path: Path, lines: int = 25) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


async def run_trainer(
    program: Program,
    job: BaseModel,
    *,
    workdir: Path,
    on_event: Callable[[Event], None],
    layout: EmbeddedLayout | None = None,
) -> list[Event]:
    """Run `program` on `job` to its end; every event goes to `on_event` as it comes, and all of
    them are returned. Raises `TrainerFailed` when the trainer fails."""
    layout = layout or EmbeddedLayout.default()
    if not layout.python.exists():
        raise TrainerFailed(f"the model venv is not built under {layout.home}: run `prorl model setup`")
    job_path = _write_job(workdir, program, job)
    log_path = workdir / f"{program}.log"
    events: list[Event] = []
    proc = _spawn([str(layout.python), "-m", PROGRAMS[program], str(job_path)])
    # Its own thread, not the event loop's default executor: the service's work may hold every
    # executor thread, and stopping the trainer must never wait behind it.
    pump = threading.Thread(target=_pump, args=(proc, log_path, events, on_event), daemon=True)
    pump.start()
    try:
        while proc.poll() is None:  # noqa: ASYNC110 - a Popen has no awaitable exit
            await asyncio.sleep(0.2)
        pump.join()  # the trainer exited: its last lines (the `done` event) are read to the end
        code = proc.returncode
    finally:
        _stop(proc)  # cancelled or failed: its group is stopped before anything else closes
        pump.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    if code != 0:
        raise TrainerFailed(
            f"the {program} trainer exited with {code}; {log_path} ends with:\n{_tail(log_path)}"
        )
    if not events or events[-1].event != "done":
        raise TrainerFailed(f"the {program} trainer ended without finishing; see {log_path}")
    return events


def _spawn(command: list[str]) -> subprocess.Popen[str]:
    # Its own session: one signal to its group stops it and whatever it started.
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=trainer_env(),
        start_new_session=True,
        text=True,
        errors="replace",
    )


def _pump(
    proc: subprocess.Popen[str], log_path: Path, events: list[Event], on_event: Callable[[Event], None]
) -> None:
    """Events to `on_event`, every other line to the log, until the trainer closes its stdout."""
    assert proc.stdout is not None
    with log_path.open("w") as log:
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            event = parse_event(line)
            if event is None:
                log.write(line + "\n")
                log.flush()
                continue
            events.append(event)
            on_event(event)


def _stop(proc: subprocess.Popen[str]) -> None:
    """Its whole process group, if it is still running (cancelled, or a reader error)."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
