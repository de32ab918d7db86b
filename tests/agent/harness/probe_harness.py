# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness of the tests only, run like any other in a process of its own (its process finds
this module by name, from this directory): it reports what that process holds and sees.

It imports nothing of the tests: its process has this directory on its path, nothing more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from pydantic import BaseModel

from nemo_gym_prorl.agent.harness.base import HarnessRun, HarnessTask


class ProbeOptions(BaseModel):
    command: str | None = None  # run through the rollout's commands (its sandbox); stdout reported
    probe: str | None = None  # a probe script (tests/security/probe.py), run in the harness's process
    probe_request: dict[str, Any] = {}  # its standard input: {"needles": [...], "roots": [...]}
    canary: str | None = None  # written to a file in the harness's home first (the probe must find it)
    sleep_s: float = 0.0  # then wait (whatever the rollout's door says)
    grandchildren: bool = False  # start a `sleep` in its process group
    escaped: bool = False  # and one in a session of its own


class ProbeHarness:
    name = "probe"

    def __init__(self, options: ProbeOptions | None = None) -> None:
        self.options = options or ProbeOptions()

    def run(self, task: HarnessTask) -> HarnessRun:
        options = self.options
        report: dict[str, Any] = {"pid": os.getpid(), "env": dict(os.environ), "started": time.time()}
        if options.canary is not None:
            with open(os.path.join(os.environ["HOME"], "canary.txt"), "w") as f:
                f.write(options.canary)
        if options.grandchildren:
            report["grandchildren"] = [subprocess.Popen(["sleep", "1000"]).pid]
            if options.escaped:
                report["grandchildren"].append(
                    subprocess.Popen(["sleep", "1000"], start_new_session=True).pid
                )
        if options.command is not None:
            report["command"] = task.commands.run(options.command).stdout
        if options.probe is not None:
            request = dict(options.probe_request)
            if options.canary is not None:  # where it is, among the places looked at
                request["roots"] = [*request.get("roots", []), os.environ["HOME"]]
            found = subprocess.run(
                [sys.executable, "-c", options.probe],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                check=True,
            )
            report["probe"] = json.loads(found.stdout)
        time.sleep(options.sleep_s)
        report["ended"] = time.time()
        return HarnessRun(
            name=self.name,
            stop_reason="answered",
            exit_status="done",
            submission=json.dumps(report),
            messages=[],
        )
