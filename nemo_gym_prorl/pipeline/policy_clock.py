# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The trainer's current policy version, which a finished rollout's staleness is measured against.

Two ways a trainer moves the policy forward, one clock for both:
- it publishes each new policy to the service (a LoRA adapter the backends load): the current
  version is the one last published (`published`, read from the LLM pool);
- it owns the weights itself (NeMo RL refits its own vLLM workers) and stamps its step on each
  submission (`JobSpec.policy_version`): the current version is the highest step seen.
"""

from __future__ import annotations

from collections.abc import Callable


def _never_published() -> int | None:
    return None


class PolicyClock:
    def __init__(self, published: Callable[[], int | None] = _never_published) -> None:
        self.published = published
        self._reported: int | None = None

    def observe(self, step: int | None) -> None:
        """A submission carried the trainer's step: the clock never goes back."""
        if step is not None and (self._reported is None or step > self._reported):
            self._reported = step

    def current(self) -> int | None:
        """The newest version either way; None while the trainer has said nothing."""
        known = [v for v in (self.published(), self._reported) if v is not None]
        return max(known) if known else None
