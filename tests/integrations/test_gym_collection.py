# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Gym 0.7's own rollout collection (`RolloutCollectionHelper.run_from_config`) over the
environment server and the real agent app (scripted model, in-memory resources server): a row no
stage could run is recorded once as a terminal failure and the good rows around it are
collected, under Gym's default routing (where an HTTP error would end the run) and with
`route_failures_to_sidecar` (where it would be retried on every resume); a resume dispatches
nothing again. And the keys the plugin restates from Gym are Gym's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nemo_gym.rollout_collection as gym_collection
import orjson
import pytest
from nemo_gym.path_utils import failures_path_for
from nemo_gym.rollout_collection import RolloutCollectionConfig
from support.environment_stack import EnvironmentStack
from support.gym_collection import CollectorClient, InProcessCollection
from support.gym_fakes import ANSWER, CALL, TOOL, FakeResources, ScriptedDialect

from nemo_gym_prorl.integrations.gym.collection_keys import is_collector_key

ENVIRONMENT_SERVER = "prorl_agent_environment_server"


def dataset_row(question: int, **fields: object) -> dict[str, Any]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": f"What is {question}+1?"}],
                                    "tools": [TOOL], "max_output_tokens": 64},
        "data_source": "prorl_math", "expected_answer": "2", "task_source": "prorl_agent", **fields,
    }  # fmt: skip


class Collection:
    """The stack, Gym's collection over it, and the files it writes."""

    def __init__(self, tmp_path: Path) -> None:
        self.resources = FakeResources(reward=1.0)
        self.stack = EnvironmentStack(
            ScriptedDialect([CALL, ANSWER]), lambda: self.resources, {"prorl_math": "prorl_math"}
        )
        self.client = CollectorClient(self.stack.global_config, {ENVIRONMENT_SERVER: self.stack.http})
        self.input = tmp_path / "rows.jsonl"
        self.output = tmp_path / "rollouts.jsonl"

    def write_dataset(self, rows: list[dict[str, Any]]) -> None:
        self.input.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))

    async def collect(self, *, sidecar: bool, resume: bool = False) -> None:
        config = RolloutCollectionConfig(
            input_jsonl_fpath=str(self.input),
            output_jsonl_fpath=str(self.output),
            route_failures_to_sidecar=sidecar,
            resume_from_cache=resume,
            disable_aggregation=True,
        )
        await InProcessCollection(self.client).run_from_config(config)

    def rollouts(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.output.read_bytes().splitlines() if line.strip()]

    def failures(self) -> list[dict[str, Any]]:
        path = failures_path_for(self.output)
        return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.fixture
async def collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Collection]:
    made = Collection(tmp_path)
    # Collection reads the composition from Gym's global config; here it is the stack's.
    monkeypatch.setattr(gym_collection, "get_global_config_dict", lambda *_, **__: made.stack.global_config)
    yield made
    await made.stack.close()


@pytest.mark.parametrize("sidecar", [False, True], ids=["default routing", "route_failures_to_sidecar"])
async def test_one_row_no_stage_could_run_is_recorded_once_and_every_good_row_is_collected(
    collection: Collection, sidecar: bool
) -> None:
    bad = dataset_row(1, responses_create_params={"max_output_tokens": 64})  # a prompt without input
    collection.write_dataset([dataset_row(1), dataset_row(2), bad, dataset_row(3)])

    await collection.collect(sidecar=sidecar)

    assert sorted(r["_ng_task_index"] for r in collection.rollouts()) == [0, 1, 3]
    assert all(r["reward"] == 1.0 for r in collection.rollouts())
    (failure,) = collection.failures()
    assert failure["_ng_task_index"] == 2
    assert (failure["_ng_failure_class"], failure["_ng_failure_terminal"], failure["_ng_failure_stage"]) == (
        "environment_server_failed",
        True,
        "seed",
    )
    assert "instance.responses_create_params.input" in failure["_ng_failure_message"]
    assert failure["failure_kind"] == "prorl:invalid_instance"

    dispatched = len(collection.client.runs())
    await collection.collect(sidecar=sidecar, resume=True)
    assert len(collection.client.runs()) == dispatched == 4  # nothing settled is dispatched again
    assert len(collection.failures()) == 1 and len(collection.rollouts()) == 3


def test_the_keys_restated_from_gym_are_the_keys_gym_reserves() -> None:
    keys = ["ng_trajectory", "ng_model_call_capture", "ng_perf", "_ng_task_index", "_ng_failure_class"]
    keys += ["reward", "response", "ng_agent_observations", "ng_something_new", "prorl"]
    for key in keys:
        assert is_collector_key(key) == gym_collection._is_collector_key(key), key
