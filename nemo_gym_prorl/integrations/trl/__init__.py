# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""TRL on the rollout service: the trainer-side pieces of GRPO with TRL's `GRPOTrainer`.

These modules run INSIDE the embedded model venv (Python 3.11, torch CPU, transformers, TRL,
PEFT; `prorl model setup` installs it from requirements/vllm-cpu.lock.txt), in a trainer process
separate from the service. So they import nothing from the rest of `nemo_gym_prorl` (whose
dependencies live in the project's Python 3.13 venv) but the bottom-layer modules written for
both venvs (`intervals`, `retry`, `rollouts`), use no syntax newer than 3.11, and reach the
service over HTTP only.

- `fields`: a finished rollout (the service's JSON result) -> TRL's `rollout_func` fields.
- `reward`: the service's reward as a TRL reward function; failed rollouts are masked.
- `client`: the few native `/v1` calls the trainer makes (submit, wait, publish a policy).
- `rollout`: a `rollout_func` that runs each prompt's group through the service.
- `callback`: saves the adapter after optimizer steps and publishes it as a policy version.
"""
