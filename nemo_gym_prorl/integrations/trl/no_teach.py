# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A GRPO step with no group that can teach trains nothing and publishes nothing.

GRPO learns from a group only where its trained samples' rewards differ: the advantage is each
reward less the group's mean, so a group whose samples all scored the same (every rollout solved
the task, or none did) has advantage 0 on every token. A step made only of such groups has no
policy-gradient signal. Run anyway, it is not even a no-op: with `beta` > 0 the loss's one
gradient is the KL term, pulling the policy back toward the reference (with a LoRA, the model
without it), and Adam's moments keep moving the weights along the previous steps' direction; the
step also costs its forward and backward passes and a published version for backends to load.

So such a step is skipped, the way NeMo RL's DAPO dynamic sampling (`grpo.use_dynamic_sampling`)
refuses to train on groups whose reward std is 0, but without redrawing prompts: the rollout
function hands TRL one-token placeholders (nothing long to run a reference pass over), the loss is
a constant that reaches no weight (no gradient at all, so the optimizer's step leaves every weight
and moment as it was), and no version is published. The step still counts in TRL's step count
and its prompts are spent; its report says it was skipped and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nemo_gym_prorl.integrations.trl.fields import TrlSample

NOTHING_TO_TEACH = "no group can teach"


def teaching_groups(samples: Sequence[TrlSample], group_size: int) -> int:
    """Of TRL's groups (`group_size` samples in a row), those whose trained samples' rewards
    differ: the ones with a nonzero advantage somewhere. Masked samples and placeholders do not
    count (TRL leaves them out of the group's mean); a demonstration guiding a group does."""
    count = 0
    for start in range(0, len(samples), group_size):
        rewards = {
            s.reward
            for s in samples[start : start + group_size]
            if not s.mask_sample and s.reward is not None
        }
        count += len(rewards) > 1
    return count


def skip_reason(samples: Sequence[TrlSample], group_size: int) -> str | None:
    """Why a step's samples teach nothing (None: some group can teach)."""
    groups = len(samples) // group_size if group_size else 0
    if teaching_groups(samples, group_size):
        return None
    return f"{NOTHING_TO_TEACH}: 0 of {groups} groups have rewards that differ"


def stand_ins(samples: Sequence[TrlSample], token_id: int) -> list[TrlSample]:
    """What TRL gets for a step that teaches nothing: a one-token placeholder per sample, with
    no reward and no trained token, so it computes nothing over the real sequences."""
    return [
        TrlSample(
            prompt_ids=[token_id],
            completion_ids=[token_id],
            logprobs=[0.0],
            env_mask=[0],
            reward=None,
            mask_sample=True,
            mask_reason=NOTHING_TO_TEACH,
            rollout_id=sample.rollout_id,
            stop_reason=sample.stop_reason,
        )
        for sample in samples
    ]


class SkipsStepsThatTeachNothing:
    """A mixin for TRL's `GRPOTrainer` whose `rollout_func` has `last_skip` (`ServiceRollout`
    with `skip_uninformative`): while it is set, the loss is a constant that reaches no weight.

    No backward pass then reaches a parameter, so every gradient stays None (the Trainer zeroes
    them to None after each step), gradient clipping sees none, and torch's optimizers step only
    parameters that have one: the weights and Adam's moments are left exactly as they were."""

    rollout_func: Any
    accelerator: Any

    def compute_loss(
        self,
        model: Any,
        inputs: Any,
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        if getattr(self.rollout_func, "last_skip", None) is not None:
            import torch

            return torch.zeros((), device=self.accelerator.device, requires_grad=True)
        return super().compute_loss(  # type: ignore[misc]
            model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
        )
