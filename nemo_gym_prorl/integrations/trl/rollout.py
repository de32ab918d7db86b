# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`rollout_func` for TRL's `GRPOTrainer`: each prompt's group runs through the rollout service.

    rollout = ServiceRollout(ServiceClient("http://127.0.0.1:8000", token=...))
    trainer = GRPOTrainer(model=..., reward_funcs=[service_reward], args=GRPOConfig(use_vllm=False, ...),
                          train_dataset=Dataset.from_dict({"prompt": prompt_column(rows)}),
                          rollout_func=rollout, peft_config=LoraConfig(...))

The dataset's `prompt` column holds the service's task instances (dataset rows), as JSON strings
(`prompt_column`) or mappings: the service renders the chat prompt, runs the agent in its
sandboxes and scores the result, so the trainer never templates or tokenizes a prompt.

TRL hands `rollout_func` this process's prompts with each prompt repeated `num_generations`
times in a row (its sampler repeats them; "no duplication" in its docs means it adds none).
Each run of equal prompts is submitted as one group (`group_id`), all groups in one request, and
the results come back in the same order as TRL's fields (`fields.py`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from nemo_gym_prorl.integrations.trl.client import ServiceClient, ServiceError
from nemo_gym_prorl.integrations.trl.fields import TrlSample, group_samples, to_fields


def prompt_column(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Task instances as a dataset's `prompt` column (JSON keeps heterogeneous rows Arrow-safe)."""
    return [json.dumps(dict(row), sort_keys=True) for row in rows]


def instance_of(prompt: Any) -> dict[str, Any]:
    """The task instance a dataset prompt stands for."""
    if isinstance(prompt, Mapping):
        return dict(prompt)
    if isinstance(prompt, str):
        try:
            value = json.loads(prompt)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"a prompt must be a task instance as a JSON object; got {prompt[:80]!r}"
            ) from exc
        if isinstance(value, dict):
            return value
    raise ValueError(
        f"a prompt must be a task instance (a mapping, or a JSON object string from prompt_column); got "
        f"{type(prompt).__name__}"
    )


def split_groups(prompts: Sequence[Any], size: int) -> list[list[Any]]:
    """Consecutive runs of `size` equal prompts, as TRL's sampler lays them out."""
    if size < 1 or len(prompts) % size:
        raise ValueError(f"{len(prompts)} prompts do not split into groups of num_generations={size}")
    groups = [list(prompts[i : i + size]) for i in range(0, len(prompts), size)]
    for index, group in enumerate(groups):
        if any(prompt != group[0] for prompt in group[1:]):
            raise ValueError(
                f"group {index}: TRL's prompts are not {size} repeats of one prompt; "
                "rollout_func expects GRPOTrainer's repeat sampler"
            )
    return groups


def _eos_id(trainer: Any) -> int | None:
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    eos = getattr(tokenizer, "eos_token_id", None)
    return eos if isinstance(eos, int) else None


class ServiceRollout:
    """The `rollout_func`. `sampling_params` go with every job (the service's defaults otherwise);
    `task` names the service's task handler when the instances do not (`data_source`)."""

    def __init__(
        self,
        client: ServiceClient,
        *,
        task: str | None = None,
        sampling_params: Mapping[str, Any] | None = None,
        timeout_s: float = 3600.0,
    ) -> None:
        self.client = client
        self.task = task
        self.sampling_params = dict(sampling_params or {})
        self.timeout_s = timeout_s
        self.run_id = uuid.uuid4().hex[:12]
        self.calls = 0
        self.last_samples: list[TrlSample] = []

    def jobs(self, groups: Sequence[Sequence[Any]], *, step: int) -> list[dict[str, Any]]:
        jobs = []
        for index, group in enumerate(groups):
            instance = instance_of(group[0])
            group_id = f"trl-{self.run_id}-{self.calls}-{index}"
            for _ in group:
                job: dict[str, Any] = {
                    "instance": instance,
                    "group_id": group_id,
                    "sampling_params": self.sampling_params,
                    "metadata": {"trainer_step": step},
                }
                if self.task is not None:
                    job["task"] = self.task
                jobs.append(job)
        return jobs

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        training = bool(getattr(trainer.model, "training", True))
        size = trainer.num_generations if training else trainer.num_generations_eval
        groups = split_groups(prompts, size)
        ids = self.client.submit(self.jobs(groups, step=trainer.state.global_step))
        self.calls += 1
        results, missing = self.client.wait_all(ids, timeout_s=self.timeout_s)
        self._cancel_unfinished(missing)
        by_id = {result["id"]: result for result in results}
        eos = _eos_id(trainer)
        fallback = [eos if eos is not None else 0]
        samples: list[TrlSample] = []
        for start in range(0, len(ids), size):
            members = [
                by_id.get(job_id)
                or {"id": job_id, "state": "missing", "error": missing.get(job_id, "no result")}
                for job_id in ids[start : start + size]
            ]
            samples += group_samples(members, fallback_prompt_ids=fallback, placeholder_token_id=eos)
        self.last_samples = samples
        return to_fields(samples)

    def _cancel_unfinished(self, missing: Mapping[str, str]) -> None:
        """A rollout still running at the deadline is masked here, so stop it using the service."""
        for job_id, why in missing.items():
            if why.startswith("not finished"):
                try:
                    self.client.cancel(job_id)
                except ServiceError:
                    pass  # it may have finished or been evicted meanwhile; either way it is not used
