# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_math: math problems with a sandboxed IPython tool; `\\boxed{}` answers checked by math-verify
under a time limit enforced outside the checker. Logic: `nemo_gym_prorl.tasks.math`."""

from pydantic import Field

from nemo_gym_prorl.integrations.gym.resources_server import (
    ProRLServerConfig,
    ProRLTaskServer,
    verifier_fixture,
)
from nemo_gym_prorl.tasks.math import MathConfig, MathTask


class ProRLMathConfig(ProRLServerConfig):
    math: MathConfig = Field(default_factory=MathConfig)


class ProRLMathServer(ProRLTaskServer):
    config: ProRLMathConfig
    task_tools = ("ipython", "submit")

    def make_task(self) -> MathTask:
        return MathTask(self.config.math)


VERIFIER_FIXTURE = verifier_fixture(ProRLMathServer, ProRLMathConfig, __file__, domain="math")


if __name__ == "__main__":
    ProRLMathServer.run_webserver()
