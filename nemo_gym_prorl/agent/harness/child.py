# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What runs in a harness's own process (`python -m nemo_gym_prorl.agent.harness.child`; the
service starts it with `agent.harness.process`): read the request on standard input, rebuild
the harness, run it against its door (model calls) and `RemoteCommands` (commands), and answer
its `HarnessRun` as JSON on standard output. Whatever the harness prints goes to standard error;
standard input is empty once the request is read."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import signal
import sys
from typing import Any

from nemo_gym_prorl.agent.harness.base import Harness, HarnessRun, HarnessTask, RemoteCommands
from nemo_gym_prorl.agent.harness.door_relay import SOCKET_VARIABLE, route_request

# Set by the service when it confines a harness's process: a fork server's children then give
# themselves private homes (`zygote`).
CONFINED_VARIABLE = "PRORL_HARNESS_CONFINED"


def _resolve(name: str) -> Any:
    module, _, qualname = name.partition(":")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def build_harness(spec: dict[str, Any]) -> Harness:
    """The harness `process.harness_spec` names."""
    cls = _resolve(spec["class"])
    if "options_class" not in spec:
        return cls()
    return cls(_resolve(spec["options_class"]).model_validate(spec["options"]))


def _die_with_parent() -> None:
    """Be killed when the service dies (bubblewrap does it for a confined process too)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


def run_request(harness: Harness, request: dict[str, Any]) -> HarnessRun:
    """One rollout: the harness against its door and its commands' route (confined, through the
    relay to the door's socket: the only way out of its network namespace)."""
    socket_path = os.environ.get(SOCKET_VARIABLE)
    if socket_path:
        route_request(request, socket_path)
    commands = RemoteCommands(**request["commands"])
    try:
        return harness.run(HarnessTask(commands=commands, **request["task"]))
    finally:
        commands.close()


def main() -> int:
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the harness prints goes to standard error
    _die_with_parent()
    request = json.loads(sys.stdin.buffer.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    run = run_request(build_harness(request["harness"]), request)
    answer.write(run.model_dump_json())
    answer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
