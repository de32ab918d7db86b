# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl serve` configuration: Hydra composition, pydantic validation, clear errors."""

from __future__ import annotations

import pytest
from support.scripted_stages import SCRIPTED_TASKS

from nemo_gym_prorl.service.config import ConfigError, load_config
from nemo_gym_prorl.service.stack import stack_from_config
from nemo_gym_prorl.service.task_handlers import build_handlers


def test_defaults_and_overrides_compose() -> None:
    config = load_config(
        ["sandbox=local_unsafe", "pipeline.run_workers=16", *SCRIPTED_TASKS, "server.port=9000"]
    )
    assert config.sandbox.backend == "local_unsafe" and config.pipeline.run_workers == 16
    assert config.pipeline.run_queue_size == 16 and config.server.host == "127.0.0.1"
    assert set(config.tasks) == {"scripted", "scripted_sandbox"} and config.server.port == 9000
    default = load_config([])
    assert default.sandbox.backend == "bubblewrap" and set(default.tasks) == {
        "math",
        "stem",
        "code",
        "swe",
        "swe_mini_swe_agent",
        "command_output",
    }
    assert default.pipeline.init_workers == 64 and default.pipeline.active_time_s == 300


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["pipeline.run_workers=0"], "pipeline.run_workers: Input should be greater than or equal to 1"),
        (["sandbox=apptainer"], "sandbox=apptainer needs sandbox.image"),
        (["sandbox=docker"], "Could not find 'sandbox/docker'"),
        (["nonsense=1"], "Could not override 'nonsense'"),
        (["+pipeline.typo=1"], "pipeline.typo: Extra inputs are not permitted"),
        (["server.port=70000"], "server.port"),
        (["tasks=none", "+tasks.x.handler=not a target"], "tasks.x.handler: String should match pattern"),
        (["auth.token=short"], "auth.token"),
        (
            ["sandbox.backend=docker"],
            "sandbox.backend: Value error, unknown sandbox backend 'docker'; choose one",
        ),
        (["llm.dialect=sglang"], "llm.dialect: Value error, unknown dialect 'sglang'; choose one of"),
        (["llm.tool_call_format=json5"], "llm.tool_call_format: Value error, unknown tool-call format"),
    ],
)
def test_invalid_configs_say_what_is_wrong(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    assert message in str(info.value)


def test_dialect_tool_call_format_and_sandbox_backend_of_ones_own_are_named_by_import_target() -> None:
    config = load_config(
        [
            "llm.dialect=support.extensions:SiteDialect",
            "llm.tool_call_format=support.extensions:parse_call_lines",
            "sandbox.backend=support.extensions:ScratchSandbox",
        ]
    )
    assert config.llm.dialect == "support.extensions:SiteDialect"
    assert config.llm.tool_call_format == "support.extensions:parse_call_lines"
    assert config.sandbox.backend == "support.extensions:ScratchSandbox"


def test_missing_task_modules_are_reported_together() -> None:
    config = load_config(
        ["tasks=none", "+tasks.a.handler=no_such_module:build", "+tasks.b.handler=json:nope"]
    )
    with pytest.raises(ConfigError) as info:
        build_handlers(config, llm=None, backends=None)  # type: ignore[arg-type]
    text = str(info.value)
    assert "tasks.a.handler: task handler: cannot import module 'no_such_module'" in text
    assert "tasks.b.handler: task handler: 'json:nope' is not a callable" in text


async def test_service_is_built_from_config() -> None:
    config = load_config([*SCRIPTED_TASKS, "llm.backends=[gpu01:8000]", "pipeline.init_workers=2"])
    stack = stack_from_config(config)
    await stack.start()
    try:
        service = stack.service
        assert service.pipeline.handlers.names() == ["scripted", "scripted_sandbox"]
        assert [b.url for b in await service.backends.list()] == ["http://gpu01:8000"]
        assert service.pipeline.config.init_workers == 2
    finally:
        await stack.close()


async def test_the_default_tasks_build_real_agent_handlers_that_answer_to_their_data_sources() -> None:
    config = load_config(["llm.health_path=null"])
    service = stack_from_config(config).service
    try:
        handlers = service.pipeline.handlers
        assert handlers.canonical("gsm8k") == "math" and handlers.canonical("humaneval") == "code"
        assert handlers.canonical("swe-bench") == "swe" and handlers.canonical("gpqa") == "stem"
        assert type(handlers.get("math")).__name__ == "AgentRolloutHandler"
    finally:
        await service.close()
