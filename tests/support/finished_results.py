# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A finished result of the scripted task, as the result store and the journal keep them (test support)."""

from __future__ import annotations

import time
from typing import Any

from nemo_gym_prorl.pipeline.job import JobResult, JobState


def finished_result(job_id: str, **fields: Any) -> JobResult:
    now = time.time()
    return JobResult(
        **{
            "id": job_id,
            "task": "s",
            "state": JobState.DONE,
            "submitted_at": now,
            "finished_at": now,
            **fields,
        }
    )
