# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""One row per domain that no stage could run, and the field each refusal names: sent through
every door (`prorl serve`'s `/process`, `/v1/rollouts`, batch rows; the Gym agent's `/run`)."""

from __future__ import annotations

PROMPT = {"input": [{"role": "user", "content": "What is 2 + 2?"}]}


def row(data_source: str, **fields: object) -> dict[str, object]:
    return {"data_source": data_source, "responses_create_params": PROMPT, **fields}


UNRUNNABLE = {
    "math: no answer to grade": (row("prorl_math"), "expected_answer"),
    "math: an unknown way to compare": (row("prorl_math", expected_answer="4", answer_match="close"), "answer_match"),
    "stem: no answer to grade": (row("prorl_stem", expected_answer=" "), "expected_answer"),
    "code: no tests": (row("prorl_code"), "verifier_metadata"),
    "code: tests of no input": (
        row("prorl_code", verifier_metadata={"unit_tests": {"inputs": [], "outputs": []}}),
        "verifier_metadata.unit_tests",
    ),
    "swe: no instance": (row("prorl_swe"), "instance_id"),
    "swe: an instance it neither has nor can build": (row("prorl_swe", instance_id="nobody__nothing-1"), "instance_id"),
    "a tool no domain has": (
        row("prorl_math", expected_answer="4", responses_create_params={**PROMPT, "tools": [{"type": "function", "name": "rm_rf"}]}),
        "responses_create_params.tools[0].name",
    ),
}  # fmt: skip
