# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The scripted rollout handlers some benchmarks drive the real pipeline with. They are test
support (`tests/support/`), not product code: this puts that package on the import path, for
this process and for the `prorl serve` a benchmark starts (`subprocess_env`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from support.scripted_groups import GroupScriptedHandler  # noqa: E402
from support.scripted_stages import SCRIPTED_TASKS, SandboxScriptedHandler, ScriptedHandler  # noqa: E402


def subprocess_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with tests/ on PYTHONPATH, so `SCRIPTED_TASKS` resolves in a child process."""
    paths = [str(TESTS_DIR), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


__all__ = [
    "SCRIPTED_TASKS",
    "GroupScriptedHandler",
    "SandboxScriptedHandler",
    "ScriptedHandler",
    "subprocess_env",
]
