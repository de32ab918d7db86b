# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""How far the trainer's own log-probs are from the ones the rollouts recorded.

TRL computes this only for its own vLLM (`use_vllm=True` with importance-sampling correction).
Here the rollouts come from the service, so `MeasuredGRPOTrainer` reads the log-probs of the
forward pass the loss already makes (no extra pass) and compares them, on the model's tokens
only, with `sampling_per_token_logps` (the service's log-probs, which TRL carries from the
`rollout_func`'s `logprobs`). With rollouts from the policy the trainer holds, the difference is
numerics (the server's kernels and dtype against the trainer's fp32); beyond that it is policy lag.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from pydantic import BaseModel
from trl import GRPOTrainer


class Mismatch(BaseModel):
    """Over one optimizer step's model tokens: mean |trainer - rollout| log-prob and the range of
    the per-token importance ratio exp(trainer - rollout)."""

    tokens: int = 0
    mean_abs_diff: float = math.nan
    max_abs_diff: float = math.nan
    ratio_min: float = math.nan
    ratio_max: float = math.nan


class _Accumulator:
    def __init__(self) -> None:
        self.total = 0.0
        self.tokens = 0
        self.max_abs = 0.0
        self.low = math.inf
        self.high = -math.inf

    def add(self, diff: torch.Tensor) -> None:
        if diff.numel() == 0:
            return
        self.total += float(diff.abs().sum())
        self.tokens += int(diff.numel())
        self.max_abs = max(self.max_abs, float(diff.abs().max()))
        self.low = min(self.low, float(diff.min().exp()))
        self.high = max(self.high, float(diff.max().exp()))

    def result(self) -> Mismatch:
        if not self.tokens:
            return Mismatch()
        return Mismatch(
            tokens=self.tokens,
            # Unrounded: with fp32 on both sides the difference is around 1e-6.
            mean_abs_diff=self.total / self.tokens,
            max_abs_diff=self.max_abs,
            ratio_min=self.low,
            ratio_max=self.high,
        )


class MeasuredGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` that also measures the trainer-vs-rollout log-prob mismatch of each step
    (`take_mismatch()` returns it and starts the next step's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mismatch = _Accumulator()
        self._loss_logps: torch.Tensor | None = None

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
        out = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if kwargs.get("compute_entropy"):  # the loss's own forward pass (see `_compute_loss`)
            self._loss_logps = out[0].detach()
        return out

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        self._loss_logps = None
        loss = super()._compute_loss(model, inputs)
        sampled = inputs.get("sampling_per_token_logps")
        if self._loss_logps is not None and sampled is not None:
            mask = inputs["completion_mask"]
            if "tool_mask" in inputs:
                mask = mask * inputs["tool_mask"]
            diff = (self._loss_logps - sampled)[mask.bool() & ~torch.isnan(sampled)]
            self._mismatch.add(diff.float())
        return loss

    def take_mismatch(self) -> Mismatch:
        result = self._mismatch.result()
        self._mismatch = _Accumulator()
        return result
