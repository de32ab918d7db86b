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
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nemo_gym_prorl.integrations.trl.client import ServiceClient, ServiceError
from nemo_gym_prorl.integrations.trl.fields import (
    EMPTY_SLOT,
    TrlSample,
    group_samples,
    placeholder,
    to_fields,
)
from nemo_gym_prorl.integrations.trl.no_teach import skip_reason, stand_ins, teaching_groups
from nemo_gym_prorl.rollouts.results import ServiceResult


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


class SubmissionJournal:
    """Jobs submitted for groups whose step is not published yet, kept in a JSON file (written
    aside and renamed, so a crash never leaves it half-written)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return list(json.loads(self.path.read_text())["entries"])

    def _write(self, entries: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_name(self.path.name + ".partial")
        staging.write_text(json.dumps({"entries": entries}))
        os.replace(staging, self.path)

    def add(self, heads: list[Any], size: int, ids: list[str]) -> None:
        self._write([*self._read(), {"heads": heads, "size": size, "ids": list(ids)}])

    def take(self, heads: list[Any], size: int) -> list[str] | None:
        """The ids submitted earlier for exactly these groups, if any."""
        for entry in self._read():
            if entry["heads"] == heads and entry["size"] == size:
                return list(entry["ids"])
        return None

    def remove(self, ids: Sequence[str]) -> None:
        gone = set(ids)
        self._write([e for e in self._read() if not gone.intersection(e["ids"])])


class ServiceRollout:
    """The `rollout_func`. `sampling_params` go with every job (the service's defaults otherwise);
    `task` names the service's task handler when the instances do not (`data_source`).

    `ahead`: the training prompts in the order the trainer takes them (a dataset that is not
    shuffled). Each call then submits the next step's groups as soon as this step's results are
    in, so they run while the trainer trains on this step's: collecting ahead. They start on the
    policy before this step's update, one version stale, which the service bounds with its
    `max_staleness`. If the trainer asks for other prompts than expected, the prepared jobs are
    cancelled and the asked-for ones submitted (`ahead_misses`).

    `guides`: program-written demonstrations by task id (`guide_sample`). A group whose task has
    one runs `num_generations - 1` rollouts and gets the demonstration as its last member:
    off-policy guidance, which keeps a rewarded sample in the group of a task the policy no
    longer solves (`last_guided` counts them per call).

    `journal`: a file listing the jobs submitted for steps not yet published (`settle`). A
    trainer that dies mid-step, waiting for them, training on them or publishing, loses nothing:
    the service keeps running and retaining those rollouts, and a trainer restarted with the
    same journal from the policy that sampled them takes them up when it asks for the same
    groups instead of submitting them again (`carried_over`).

    `slots`: samples per rollout (`fields.rollout_samples`): TRL's group of `num_generations`
    samples is `num_generations / slots` rollouts, each a run of `slots` samples (a guide's run
    is the demonstration and placeholders).

    `skip_uninformative`: a training step none of whose groups can teach (`no_teach`) hands TRL
    one-token stand-ins and sets `last_skip` to why, for a trainer that then trains and publishes
    nothing (`no_teach.SkipsStepsThatTeachNothing`); the real samples stay in `last_samples`.
    """

    def __init__(
        self,
        client: ServiceClient,
        *,
        task: str | None = None,
        slots: int = 1,
        sampling_params: Mapping[str, Any] | None = None,
        timeout_s: float = 3600.0,
        ahead: Sequence[Any] | None = None,
        journal: str | Path | None = None,
        guides: Mapping[str, TrlSample] | None = None,
        skip_uninformative: bool = False,
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, not {slots}")
        self.client = client
        self.task = task
        self.slots = slots
        self.sampling_params = dict(sampling_params or {})
        self.timeout_s = timeout_s
        self.run_id = uuid.uuid4().hex[:12]
        self.calls = 0
        self.ahead = list(ahead) if ahead is not None else None
        self.ahead_hits = 0
        self.ahead_misses = 0
        self._cursor = 0  # where in `ahead` the next step's prompts start
        self.journal = SubmissionJournal(Path(journal)) if journal is not None else None
        self.carried_over = 0
        self.guides = dict(guides or {})
        self.last_guided = 0
        self._prepared: tuple[list[Any], int, list[str]] | None = None  # (group prompts, size, ids)
        self._unsettled: list[str] = []  # the last results' jobs, until their step is published
        self.skip_uninformative = skip_uninformative
        self.last_samples: list[TrlSample] = []
        self.last_teaching_groups: int | None = None  # None: no samples built (`collect` alone)
        self.last_skip: str | None = None
        self.last_results: list[dict[str, Any]] = []
        self.last_seconds = 0.0

    def jobs(self, groups: Sequence[Sequence[Any]], *, step: int) -> list[dict[str, Any]]:
        jobs = []
        for index, group in enumerate(groups):
            instance = instance_of(group[0])
            group_id = f"trl-{self.run_id}-{self.calls}-{index}"
            for sample in range(self.rollouts_in(group)):
                job: dict[str, Any] = {
                    # The trainer's own id: a submit retried after a lost answer is the same job.
                    "id": f"{group_id}-{sample}",
                    "instance": instance,
                    "group_id": group_id,
                    "sampling_params": self.sampling_params,
                    "metadata": {"trainer_step": step},
                }
                if self.task is not None:
                    job["task"] = self.task
                jobs.append(job)
        self.calls += 1
        return jobs

    def collect(self, groups: Sequence[Sequence[Any]], *, step: int) -> list[dict[str, Any]]:
        """Every group's results in order (a result the service does not give back is a
        `missing` placeholder, masked downstream); the next step's groups are submitted first
        when collecting ahead."""
        started = time.monotonic()
        size = len(groups[0]) if groups else 0
        heads = [group[0] for group in groups]
        ids = self._take_prepared(heads, size)
        if ids is None and self.journal is not None:
            ids = self.journal.take(heads, size)
            self.carried_over += len(ids or [])
        if ids is None:
            ids = self.client.submit(self.jobs(groups, step=step))
            self._journal_add(heads, size, ids)
        results, missing = self.client.wait_all(ids, timeout_s=self.timeout_s)
        self._cancel_unfinished(missing)
        if self.ahead:
            upcoming = self._next_heads(heads)
            prepared = self.client.submit(self.jobs([[head] * size for head in upcoming], step=step + 1))
            self._journal_add(upcoming, size, prepared)
            self._prepared = (upcoming, size, prepared)
        self._unsettled = ids  # in the journal until the step trained on them is published (`settle`)
        by_id = {result["id"]: result for result in results}
        ordered = [
            by_id.get(job_id) or {"id": job_id, "state": "missing", "error": missing.get(job_id, "no result")}
            for job_id in ids
        ]
        self.last_results = ordered
        self.last_seconds = time.monotonic() - started
        return ordered

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        training = bool(getattr(trainer.model, "training", True))
        size = trainer.num_generations if training else trainer.num_generations_eval
        groups = split_groups(prompts, size)
        results = self.collect(groups, step=trainer.state.global_step)
        eos = _eos_id(trainer)
        samples: list[TrlSample] = []
        start = 0
        self.last_guided = 0
        for group in groups:
            guide = self.guide(group[0])
            rollouts = self.rollouts_in(group)
            fallback = guide.prompt_ids if guide is not None else [eos if eos is not None else 0]
            members = group_samples(
                results[start : start + rollouts],
                fallback_prompt_ids=fallback,
                placeholder_token_id=eos,
                slots=self.slots,
            )
            samples += members
            start += rollouts
            if guide is not None:
                samples.append(guide.model_copy(deep=True))
                samples += [
                    placeholder(
                        ServiceResult(id=guide.rollout_id, state="done"),
                        EMPTY_SLOT,
                        guide.prompt_ids,
                        eos,
                    )
                    for _ in range(self.slots - 1)
                ]
                self.last_guided += 1
        self.last_samples = samples
        self.last_teaching_groups = teaching_groups(samples, size)
        self.last_skip = skip_reason(samples, size) if training and self.skip_uninformative else None
        if self.last_skip is not None:
            return to_fields(stand_ins(samples, eos if eos is not None else 0))
        return to_fields(samples)

    def rollouts_in(self, group: Sequence[Any]) -> int:
        """The service rollouts a TRL group of prompts runs: a slot run per rollout, one fewer
        with a guide."""
        if len(group) % self.slots:
            raise ValueError(
                f"a group of {len(group)} samples does not split into runs of {self.slots} slots"
            )
        return len(group) // self.slots - (self.guide(group[0]) is not None)

    def guide(self, prompt: Any) -> TrlSample | None:
        """The demonstration that guides this prompt's group, if it has one."""
        if not self.guides:
            return None
        return self.guides.get(str(instance_of(prompt).get("task_id")))

    def settle(self) -> None:
        """The step that trained on the last results is published: their jobs leave the journal.
        Until then a trainer that dies (waiting, training or publishing) is restarted from the
        policy that sampled them, and takes them up rather than running them again."""
        if self.journal is not None and self._unsettled:
            self.journal.remove(self._unsettled)
        self._unsettled = []

    def close(self) -> None:
        """Cancel the jobs prepared for a step that will not come (training ended)."""
        if self._prepared is not None:
            self._cancel_unfinished(dict.fromkeys(self._prepared[2], "not finished: not needed"))
            if self.journal is not None:
                self.journal.remove(self._prepared[2])
            self._prepared = None

    def _journal_add(self, heads: list[Any], size: int, ids: list[str]) -> None:
        if self.journal is not None:
            self.journal.add(heads, size, ids)

    def _take_prepared(self, heads: list[Any], size: int) -> list[str] | None:
        if self._prepared is None:
            return None
        expected, prepared_size, ids = self._prepared
        self._prepared = None
        if expected == heads and prepared_size == size:
            self.ahead_hits += 1
            return ids
        self.ahead_misses += 1
        self._cancel_unfinished(dict.fromkeys(ids, "not finished: other prompts were asked for"))
        if self.journal is not None:
            self.journal.remove(ids)
        return None

    def _next_heads(self, heads: list[Any]) -> list[Any]:
        """The prompts after `heads` in the training order (cyclic, as epochs repeat it)."""
        assert self.ahead
        order, n = self.ahead, len(heads)
        window = [order[(self._cursor + k) % len(order)] for k in range(n)]
        if window != heads:  # not where the last step ended: find these prompts in the order
            starts = [
                i for i in range(len(order)) if [order[(i + k) % len(order)] for k in range(n)] == heads
            ]
            self._cursor = starts[0] if starts else self._cursor
        self._cursor = (self._cursor + n) % len(order)
        return [order[(self._cursor + k) % len(order)] for k in range(n)]

    def _cancel_unfinished(self, missing: Mapping[str, str]) -> None:
        """A rollout still running at the deadline is masked here, so stop it using the service."""
        for job_id, why in missing.items():
            if why.startswith("not finished"):
                try:
                    self.client.cancel(job_id)
                except ServiceError:
                    pass  # it may have finished or been evicted meanwhile; either way it is not used
