# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Dialects and tool-call formats are registries: the built-ins by name, a user's own by import
target in `LLMConfig`, and anything else refused at validation, naming what is known."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nemo_gym_prorl.llm.access import LLMAccess, LLMConfig
from nemo_gym_prorl.llm.dialects import DIALECTS, NemoRLChatDialect, VLLMCompletionsDialect, make_dialect
from nemo_gym_prorl.llm.toolcalls import PARSERS, parse_tool_calls, resolve_tool_call_format
from nemo_gym_prorl.registry import RegistryError


def test_the_built_in_dialects_are_registered_by_their_config_names() -> None:
    assert DIALECTS.names() == ["nemo_rl", "vllm"]
    assert type(make_dialect("vllm")) is VLLMCompletionsDialect
    assert type(make_dialect("nemo_rl", tool_call_format="mistral")) is NemoRLChatDialect


def test_a_dialect_and_a_tool_call_format_of_ones_own_are_named_by_import_target() -> None:
    settings = LLMConfig(
        dialect="support.extensions:SiteDialect", tool_call_format="support.extensions:parse_call_lines"
    )
    dialect = LLMAccess.from_config(settings).dialect
    assert type(dialect).__name__ == "SiteDialect" and dialect.extra_body == {"top_k": 20}
    parsed = parse_tool_calls('Let me look.\nCALL bash {"cmd": "ls"}', dialect.tool_call_format)
    assert parsed.content == "Let me look."
    assert [(c.name, c.arguments) for c in parsed.calls] == [("bash", {"cmd": "ls"})]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("dialect", "sglang", r"unknown dialect 'sglang'; choose one of \['nemo_rl', 'vllm'\]"),
        ("dialect", "no_such_module_xyz:Dialect", "cannot import module 'no_such_module_xyz'"),
        ("tool_call_format", "json5", r"unknown tool-call format 'json5'; choose one of \['hermes', "),
        ("tool_call_format", "support.extensions:nothing_here", "is not a callable"),
    ],
)
def test_an_unknown_name_fails_config_validation_naming_the_known_ones(
    field: str, value: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        LLMConfig.model_validate({field: value})


def test_auto_and_every_registered_format_are_valid_settings() -> None:
    for value in ["auto", *PARSERS.names()]:
        assert LLMConfig(tool_call_format=value).tool_call_format == value


def test_a_factory_that_builds_no_dialect_is_refused_when_built() -> None:
    with pytest.raises(RegistryError, match="built a str, not a Dialect"):
        make_dialect("support.extensions:wrong_product")


def test_a_format_passed_in_code_is_checked_before_any_rollout_runs() -> None:
    with pytest.raises(RegistryError, match="unknown tool-call format 'json5'"):
        make_dialect("vllm", tool_call_format="json5")
    with pytest.raises(RegistryError, match="unknown tool-call format"):
        resolve_tool_call_format("json5")
