# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_swe: SWE-bench-format instances. /seed_session puts the repository at /testbed (offline
instances built from PyPI sdists by `prorl swe build`, or per-instance Apptainer images on
clusters); tools bash and editor; /verify takes the session's git diff, applies it in a fresh
sandbox and grades FAIL_TO_PASS / PASS_TO_PASS with the swebench package. Logic:
`nemo_gym_prorl.tasks.swe`."""

from pydantic import Field

from nemo_gym_prorl.integrations.gym.resources_server import (
    ProRLServerConfig,
    ProRLTaskServer,
    verifier_fixture,
)
from nemo_gym_prorl.tasks.swe import SweConfig, SweTask
from nemo_gym_prorl.tools import ToolBoxConfig


class ProRLSweConfig(ProRLServerConfig):
    swe: SweConfig = Field(default_factory=SweConfig)
    tools: ToolBoxConfig = Field(default_factory=lambda: ToolBoxConfig(bash_timeout_s=300.0))


class ProRLSweServer(ProRLTaskServer):
    config: ProRLSweConfig
    task_tools = ("bash", "editor")

    def make_task(self) -> SweTask:
        return SweTask(self.config.swe)


VERIFIER_FIXTURE = verifier_fixture(ProRLSweServer, ProRLSweConfig, __file__, domain="coding")


if __name__ == "__main__":
    ProRLSweServer.run_webserver()
