# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Finished rollouts as a trainer reads them, for the project venv and the trainers' model venv
alike (pure Python and pydantic):

- `results`: the service's result and trajectory, whether a rollout may be trained on
  (`mask_reason`), and its token sequence (`concatenate`);
- `stats`: `RolloutStats`, what a set of finished rollouts says about the policy that made them.
"""
