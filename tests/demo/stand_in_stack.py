# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl demo --quick` over a stand-in stack, run as a script by the interrupt tests.

The real stack (`gym env start`: Ray, the agent and five servers, beside vLLM) takes minutes to
start. Here `prorl serve` with the scripted handlers of tests/support stands in for it, started
and recorded the way the launcher starts and records `gym env start` (a session of its own, a
state.json that `prorl gym down` reads). Everything else is the demo's own code: the CLI entry,
the collection over `/v1/batches`, the signal handling, and `prorl gym down`'s code path.

The stand-in's tasks: math answers at once (its groups are judged and streamed to the demo);
STEM holds a real bubblewrap sandbox with a long-lived process per sample and never finishes;
code and SWE never finish either.

    python stand_in_stack.py WORKDIR

WORKDIR receives state/ (state.json, logs), sandboxes.jsonl (one line per STEM sandbox: its
process ids), events.jsonl (each batch event, once the demo has taken it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import nemo_gym_prorl.demo.run as demo
from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.cli.main import main
from nemo_gym_prorl.integrations.gym import launcher, processes
from nemo_gym_prorl.service.client import AsyncRolloutClient

WORK = Path()  # set from the command line
TESTS_DIR = Path(__file__).resolve().parents[1]
NEVER = 3600  # seconds: longer than any test waits


def serve_overrides(port: int) -> list[str]:
    long = [f"run_s={NEVER}"]
    tasks = {
        "prorl_math": ("build_scripted", ["run_s=0"]),
        "prorl_stem": (
            "build_sandbox_scripted",
            [*long, "keepalive=true", f"record_file={WORK / 'sandboxes.jsonl'}"],
        ),
        "prorl_code": ("build_scripted", long),
        "prorl_swe": ("build_scripted", long),
    }
    overrides = ["tasks=none", "service.require_backend=false", "llm.health_path=null"]
    for task, (factory, options) in tasks.items():
        overrides.append(f"+tasks.{task}.handler=support.scripted_stages:{factory}")
        overrides += [f"+tasks.{task}.options.{option}" for option in options]
    return [*overrides, f"server.port={port}", "server.log_level=warning"]


def stand_in_up(domains: Any, *, state_dir: Path, echo: Any = print, **_: Any) -> launcher.StackState:
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    log = state_dir / "logs" / "gym.log"
    port = launcher.free_port()
    cmd = [sys.executable, "-m", "nemo_gym_prorl.cli.serve", *serve_overrides(port)]
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}  # the scripted handlers are test support
    echo(f"[gym] starting the stand-in stack: {' '.join(cmd)} (log {log})")
    proc = processes.spawn(cmd, cwd=project_root(), env=env, log=log)
    group = processes.record("gym", proc, log)
    url = f"http://127.0.0.1:{port}"
    try:
        processes.wait_http(f"{url}/healthz", proc, 120, "the stand-in stack", log)
    except BaseException:
        processes.stop_group(group, echo=echo)
        raise
    processes.refresh_descendants(group)
    state = launcher.StackState(
        started_at=time.time(), workdir=str(state_dir), head_url=url, config_paths=[],
        model_url=url, model_name="scripted", agent_url=url, groups=[group],
    )  # fmt: skip
    launcher.save_state(state_dir, state)
    return state


class RecordingClient(AsyncRolloutClient):
    """Writes each batch event down once the demo has taken it (when it asks for the next one)."""

    async def stream_batch(self, batch_id: str, **kw: Any):  # type: ignore[override]
        async for event in super().stream_batch(batch_id, **kw):
            yield event
            line = {"type": event.type, "group_id": event.group.group_id if event.group else None,
                    "data_source": event.group.row.get("data_source") if event.group else None}  # fmt: skip
            with (WORK / "events.jsonl").open("a") as fh:
                fh.write(json.dumps(line) + "\n")


async def no_swe_build() -> None:
    """Building the SWE instances needs PyPI on a fresh machine; the stand-in has no SWE task."""


if __name__ == "__main__":
    WORK = Path(sys.argv[1]).resolve()
    demo.STATE_DIR = WORK / "state"
    demo.build_swe_instances = no_swe_build
    demo.AsyncRolloutClient = RecordingClient  # type: ignore[misc]
    launcher.up = stand_in_up  # type: ignore[assignment]
    sys.exit(main(["demo", "--quick"]))
