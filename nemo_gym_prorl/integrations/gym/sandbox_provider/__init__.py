# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The project's bubblewrap sandbox as a NeMo Gym sandbox provider named `bubblewrap`.

provider   `BubblewrapProvider`: Gym's SandboxProvider, its PTY and connect capabilities
spec_map   Gym's SandboxSpec in the project's terms; what is refused, and why
namespace  where the persistent sandbox used to live (now `nemo_gym_prorl.sandbox.persistent`:
           one long-lived init per sandbox whose namespaces every process joins)
pty        Gym's interactive terminal session over a process of the sandbox
"""

from nemo_gym_prorl.integrations.gym.sandbox_provider.provider import (
    BubblewrapDescriptor,
    BubblewrapProvider,
    describe_sandbox,
)
from nemo_gym_prorl.integrations.gym.sandbox_provider.spec_map import BubblewrapProviderConfig

__all__ = ["BubblewrapDescriptor", "BubblewrapProvider", "BubblewrapProviderConfig", "describe_sandbox"]
