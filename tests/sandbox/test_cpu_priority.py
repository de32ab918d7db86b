# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A sandbox runs below the service's CPU priority and cannot raise itself back: a rollout
that computes hard never starves the event loop that drives every other rollout."""

from __future__ import annotations

import shutil

import pytest

from nemo_gym_prorl.sandbox import SandboxLimits, SandboxSpec, open_sandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (`bwrap`) is not installed")

NICENESS = "cut -d' ' -f19 /proc/self/stat"  # field 19 of stat: the process's nice value


async def test_every_process_of_a_sandbox_runs_at_its_lower_priority() -> None:
    with open_sandbox() as sb:
        assert (await sb.exec(NICENESS)).stdout.strip() == "10"
        assert (await sb.exec(f'sh -c "{NICENESS}"')).stdout.strip() == "10", "children inherit it"


async def test_a_sandbox_cannot_raise_its_priority_again() -> None:
    with open_sandbox() as sb:
        raised = await sb.exec(f"nice -n -10 {NICENESS}")
        assert "Permission denied" in raised.stderr and raised.stdout.strip() == "10"
        python = await sb.exec(["python3", "-c", "import os; os.setpriority(os.PRIO_PROCESS, 0, 0)"])
        assert python.exit_code != 0 and "PermissionError" in python.stderr


async def test_the_priority_is_a_setting() -> None:
    with open_sandbox(SandboxSpec(limits=SandboxLimits(nice=19))) as sb:
        assert (await sb.exec(NICENESS)).stdout.strip() == "19"
    with open_sandbox(SandboxSpec(limits=SandboxLimits(nice=None))) as sb:
        assert (await sb.exec(NICENESS)).stdout.strip() == "0"
