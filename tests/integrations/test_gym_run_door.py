# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The Gym agent's `/run` is a door like `prorl serve`'s: a row no stage could run, in any domain,
is answered 400 `invalid_instance` naming its field (the same rows and fields as there), by the
real resources server of its domain (the check `/seed_session` runs), before any sandbox opens
and without a model call."""

from __future__ import annotations

import pytest
from support.domain_servers import GYM_NAMES, DomainServers
from support.gym_fakes import ScriptedDialect, scripted_runtime
from support.unrunnable_rows import UNRUNNABLE

from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings
from nemo_gym_prorl.pipeline import PipelineConfig


@pytest.mark.parametrize("case", list(UNRUNNABLE))
async def test_a_row_no_stage_could_run_is_refused_by_run_naming_its_field(
    domains: DomainServers, case: str
) -> None:
    instance, field = UNRUNNABLE[case]
    dialect = ScriptedDialect([])  # a model call would fail the test: there is no reply to give
    settings = ProRLAgentSettings(pipeline=PipelineConfig(init_workers=1, run_workers=1, eval_workers=1))
    runtime = scripted_runtime(settings, dialect, lambda: domains, GYM_NAMES)
    try:
        outcome = await runtime.run(instance)
    finally:
        await runtime.close()
    assert outcome.status == 400, outcome.body
    assert outcome.body["error"] == "invalid_instance"
    assert f"instance.{field}:" in str(outcome.body["detail"]), outcome.body
    assert domains.open_sessions() == 0
    assert not domains.sandboxes_made()
