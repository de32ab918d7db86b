# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_stem: multiple-choice and numeric (with units) science questions, optional Python tool.
Logic: `nemo_gym_prorl.tasks.stem`."""

from nemo_gym_prorl.integrations.gym.resources_server import (
    ProRLServerConfig,
    ProRLTaskServer,
    verifier_fixture,
)
from nemo_gym_prorl.tasks.stem import StemTask


class ProRLStemConfig(ProRLServerConfig):
    pass


class ProRLStemServer(ProRLTaskServer):
    config: ProRLStemConfig
    task_tools = ("ipython", "submit")

    def make_task(self) -> StemTask:
        return StemTask()


VERIFIER_FIXTURE = verifier_fixture(ProRLStemServer, ProRLStemConfig, __file__, domain="knowledge")


if __name__ == "__main__":
    ProRLStemServer.run_webserver()
