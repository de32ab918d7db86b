# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A DAPO session's prompts in flight, rebuilt from the journaled jobs of its scheduler.

Each job carries where it belongs (`metadata.dapo`: group, prompt key, sample, attempt, batch);
a sample is bound to its latest job: a re-queued or retried sample's earlier jobs ended (cancelled
or failed) and are not its sample any more. The results of these jobs, finished or run again
under the same ids, come back through the pipeline as they would have.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from nemo_gym_prorl.pipeline.dapo_prompts import PromptGroup, Sample
from nemo_gym_prorl.pipeline.job import Job
from nemo_gym_prorl.pipeline.prompt_source import PromptRow, PromptSource


def prompts_in_flight(jobs: Iterable[Job], group_size: int) -> list[PromptGroup]:
    """The prompt groups of `jobs` (in the order they were accepted), in the order they started."""
    groups: dict[str, PromptGroup] = {}
    for job in jobs:
        dapo: dict[str, Any] = job.metadata.get("dapo") or {}
        group_id = job.group_id
        if group_id is None or "sample" not in dapo:
            continue
        prompt = groups.get(group_id)
        if prompt is None:
            seq = int(group_id.rsplit("-", 1)[1])
            row = PromptRow(key=str(dapo.get("prompt_key", seq)), row=job.instance)
            samples = [Sample(index=k) for k in range(group_size)]
            prompt = PromptGroup(
                seq=seq,
                group_id=group_id,
                prompt=row,
                started_batch=int(dapo.get("batch", 0)),
                started_at=time.monotonic(),
                samples=samples,
            )
            groups[group_id] = prompt
        index = int(dapo["sample"])
        if 0 <= index < group_size:
            sample = prompt.samples[index]
            sample.job_id, sample.attempt, sample.priority = job.id, int(dapo.get("attempt", 0)), job.priority
    return sorted(groups.values(), key=lambda p: p.seq)


def skip_prompts(source: PromptSource, count: int) -> None:
    """Move a fresh source past the prompts its dead predecessor had started (the same rows, in
    the same order: a shuffled epoch is seeded). Reads the source: not on the event loop."""
    for _ in range(count):
        if source.next_prompt() is None:
            return
