# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a rollout-handler factory is given (`factory(deps, **options) -> RolloutHandler`).

It sits below every factory (`agent.factory`, the test-support scripted handlers) and every
builder that calls one (`service.stack`), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.sandbox import SandboxSpec


@dataclass(frozen=True)
class HandlerDeps:
    """The shared parts a handler may use: the sandbox defaults and the one LLM access (its pool
    is shared by all handlers). `backends` (the service's backend registry) and `config` (the
    whole configuration, a `ServeConfig` under `prorl serve`) are for factories that need more;
    they are typed loosely so that this module depends on nothing above the pipeline."""

    sandbox: SandboxSpec
    llm: LLMAccess
    backends: Any = None
    config: Any = None
