# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Fuzz every operation of the OpenAPI schema (schemathesis): no request may cause a 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.schemas import APIOperation
from service_helpers import live_server, make_service

from nemo_gym_prorl.service import create_app

# The schema comes from the app itself (no server needed at collection time).
schema = schemathesis.openapi.from_dict(create_app(make_service()[0], manage_lifecycle=False).openapi())
# /stop is designed to make later calls answer 503 ("not running"); it is tested on its own.
schema = schema.exclude(path="/stop")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    svc, _ = make_service(max_queued=200, active_time_s=2.0, max_retained_results=100)
    with live_server(svc) as url:
        yield url


# One test per operation, each with its own id (schemathesis's own `parametrize` gives every
# operation the same node id, which pytest-xdist's scheduler takes for one test).
OPERATIONS = [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("operation", OPERATIONS, ids=[operation.label for operation in OPERATIONS])
def test_no_request_causes_a_server_error(operation: APIOperation, base_url: str) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    def no_server_error(case: schemathesis.Case) -> None:
        case.call_and_validate(base_url=base_url, checks=[not_a_server_error], timeout=30)

    no_server_error()


def test_every_operation_but_stop_is_fuzzed() -> None:
    labels = {operation.label for operation in OPERATIONS}
    assert len(labels) == len(OPERATIONS) >= 20
    assert {"POST /v1/rollouts", "POST /process"} <= labels and not any("/stop" in label for label in labels)
