# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Math converters read each dataset's published schema (the records in
environments/<name>/data/upstream_sample.jsonl) into `prorl_math` rows with gradeable answers."""

from __future__ import annotations

from typing import Any

import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.datasets.catalog import RecordError, environment
from nemo_gym_prorl.datasets.rows import read_jsonl


def sample(name: str) -> list[dict[str, Any]]:
    return read_jsonl(project_root() / "environments" / name / "data" / "upstream_sample.jsonl")


def convert(name: str, record: dict[str, Any]) -> dict[str, Any]:
    return environment(name).rows(record, [], "prorl_agent")


def test_gsm8k_answer_is_the_number_after_the_marks_without_separators() -> None:
    rows = [convert("gsm8k", r) for r in sample("gsm8k")[:4]]
    assert [r["expected_answer"] for r in rows] == ["72", "10", "2250000", "8"]
    assert rows[0]["responses_create_params"]["input"][1]["content"].startswith("Natalia sold clips")
    assert "####" not in rows[0]["responses_create_params"]["input"][1]["content"]


def test_gsm8k_record_without_final_answer_is_refused() -> None:
    with pytest.raises(RecordError, match="without '#### '"):
        convert("gsm8k", sample("gsm8k")[4])
