# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""SWE tasks: SWE-bench-format instances, offline ones built from PyPI sdists, graded with swebench."""

from nemo_gym_prorl.tasks.swe.build import build_all, ensure_built, load_instances, load_recipes
from nemo_gym_prorl.tasks.swe.config import REPO_MOUNT, SweConfig, prorl_home
from nemo_gym_prorl.tasks.swe.evaluate import evaluate_patch, extract_patch, open_instance_sandbox
from nemo_gym_prorl.tasks.swe.task import SWE_SYSTEM, SweTask

__all__ = [
    "REPO_MOUNT",
    "SWE_SYSTEM",
    "SweConfig",
    "SweTask",
    "build_all",
    "ensure_built",
    "evaluate_patch",
    "extract_patch",
    "load_instances",
    "load_recipes",
    "open_instance_sandbox",
    "prorl_home",
]
