# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_code: write a program with bash, editor and Python tools; hidden tests (HumanEval
function style, or stdin/stdout pairs with partial credit) run in test-only sandboxes, each test
its own isolated process with time, memory and output limits. Logic: `nemo_gym_prorl.tasks.code`."""

from pydantic import Field

from nemo_gym_prorl.integrations.gym.resources_server import (
    ProRLServerConfig,
    ProRLTaskServer,
    verifier_fixture,
)
from nemo_gym_prorl.tasks.code import CodeConfig, CodeTask


class ProRLCodeConfig(ProRLServerConfig):
    code: CodeConfig = Field(default_factory=CodeConfig)


class ProRLCodeServer(ProRLTaskServer):
    config: ProRLCodeConfig
    task_tools = ("bash", "editor", "ipython")

    def make_task(self) -> CodeTask:
        return CodeTask(self.config.code)


VERIFIER_FIXTURE = verifier_fixture(
    ProRLCodeServer, ProRLCodeConfig, __file__, domain="coding", code=CodeConfig(isolation="sandbox")
)


if __name__ == "__main__":
    ProRLCodeServer.run_webserver()
