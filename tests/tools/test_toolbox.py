# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The tool specs the model sees and the dispatcher that turns its calls into observations:
whatever the model sends, the answer is an observation, never an exception."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nemo_gym_prorl.sandbox import Sandbox
from nemo_gym_prorl.tools.dispatch import ToolBox, ToolBoxConfig
from nemo_gym_prorl.tools.specs import ALL_TOOLS, tool_specs


@pytest.fixture
async def toolbox(sandbox: Sandbox) -> AsyncIterator[ToolBox]:
    box = ToolBox(sandbox, ToolBoxConfig(bash_timeout_s=20, bash_no_output_timeout_s=None))
    yield box
    await box.close()


# -- specs ---------------------------------------------------------------------------------------
def test_every_tool_has_an_openai_function_spec() -> None:
    specs = tool_specs()
    assert [s["function"]["name"] for s in specs] == list(ALL_TOOLS)
    for spec in specs:
        assert spec["type"] == "function"
        params = spec["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert spec["function"]["description"]
        json.dumps(spec)  # plain JSON


def test_specs_name_the_arguments_the_tools_take() -> None:
    by_name = {s["function"]["name"]: s["function"]["parameters"] for s in tool_specs()}
    assert by_name["bash"]["required"] == ["command"]
    assert by_name["bash"]["properties"]["timeout"]["type"] == "number"
    assert by_name["ipython"]["required"] == ["code"]
    assert by_name["submit"]["required"] == ["answer"]
    editor = by_name["editor"]
    assert editor["required"] == ["command", "path"]
    assert editor["properties"]["command"]["enum"] == ["view", "create", "str_replace", "insert", "undo_edit"]
    assert editor["properties"]["insert_line"]["type"] == "integer"


def test_specs_carry_no_pydantic_noise() -> None:
    text = json.dumps(tool_specs())
    assert '"title"' not in text and '"anyOf"' not in text and '"null"' not in text


def test_a_toolbox_offers_only_its_configured_tools(sandbox: Sandbox) -> None:
    box = ToolBox(sandbox, ToolBoxConfig(tools=["bash", "submit"]))
    assert [s["function"]["name"] for s in box.specs()] == ["bash", "submit"]


# -- calls that work ---------------------------------------------------------------------------------
@pytest.mark.bwrap
async def test_bash_call_returns_output_and_metadata(toolbox: ToolBox) -> None:
    obs = await toolbox.call("bash", '{"command": "echo hi"}')
    assert obs.text == "hi" and not obs.is_error
    assert obs.metadata["exit_code"] == 0 and obs.metadata["cwd"] == "/workspace"


@pytest.mark.bwrap
async def test_bash_reports_non_zero_exit_codes_and_directory_changes(toolbox: ToolBox) -> None:
    obs = await toolbox.call("bash", {"command": "mkdir -p x && cd x && false"})
    assert "[exit code: 1]" in obs.text and "[working directory: /workspace/x]" in obs.text
    assert not obs.is_error  # a failing command is an answer, not a broken call


@pytest.mark.bwrap
async def test_bash_timeout_argument_is_honoured_and_explained(toolbox: ToolBox) -> None:
    obs = await toolbox.call("bash", {"command": "sleep 30", "timeout": 0.5})
    assert obs.metadata["timed_out"] is True
    assert "timed out after 0.5s" in obs.text


@pytest.mark.bwrap
async def test_an_explicit_timeout_also_stretches_the_no_output_limit(sandbox: Sandbox) -> None:
    box = ToolBox(sandbox, ToolBoxConfig(bash_timeout_s=20, bash_no_output_timeout_s=0.3))
    try:
        quiet = await box.call("bash", {"command": "sleep 1; echo done"})
        assert quiet.metadata["timed_out"] is True  # the default no-output limit applies
        asked = await box.call("bash", {"command": "sleep 1; echo done", "timeout": 5})
        assert asked.text == "done" and asked.metadata["timed_out"] is False
    finally:
        await box.close()


@pytest.mark.bwrap
async def test_a_bare_cat_asking_for_ten_minutes_is_stopped_within_seconds_with_words_the_model_can_act_on(
    sandbox: Sandbox,
) -> None:
    # The defaults every domain runs with: the model may ask for the largest timeout it is
    # allowed, and the command waits on the terminal with no output.
    config = ToolBoxConfig()
    box = ToolBox(sandbox, config)
    try:
        start = asyncio.get_running_loop().time()
        obs = await box.call("bash", {"command": "cat", "timeout": config.bash_max_timeout_s})
        assert asyncio.get_running_loop().time() - start < 15
        assert obs.metadata["timed_out"] is True
        assert "waiting for input from the terminal" in obs.text  # and what to do instead
        assert (await box.call("bash", {"command": "echo still here"})).text == "still here"
    finally:
        await box.close()


@pytest.mark.bwrap
async def test_ipython_call_returns_printed_output_and_the_value(toolbox: ToolBox) -> None:
    obs = await toolbox.call("ipython", {"code": "print('hello')\n6*7"})
    assert obs.text.splitlines() == ["hello", f"Out[{obs.metadata['execution_count']}]: 42"]
    assert obs.metadata["images"] == []


async def test_editor_call_edits_a_file(toolbox: ToolBox) -> None:
    obs = await toolbox.call("editor", {"command": "create", "path": "a.txt", "file_text": "x = 1\n"})
    assert not obs.is_error, obs.text
    obs = await toolbox.call(
        "editor", {"command": "str_replace", "path": "a.txt", "old_str": "1", "new_str": "2"}
    )
    assert (toolbox.sandbox.workspace / "a.txt").read_text() == "x = 2\n"


async def test_submit_records_the_answer_once(toolbox: ToolBox) -> None:
    obs = await toolbox.call("submit", {"answer": "42"})
    assert obs.metadata == {"finished": True, "answer": "42"}
    assert toolbox.finished and toolbox.submitted == "42"
    again = await toolbox.call("submit", {"answer": "43"})
    assert again.is_error and toolbox.submitted == "42"


# -- bad input from the model: always an observation ------------------------------------------------
async def test_unknown_tool_is_an_error_naming_the_available_tools(toolbox: ToolBox) -> None:
    obs = await toolbox.call("rm_rf", {"path": "/"})
    assert obs.is_error
    assert "Unknown tool `rm_rf`" in obs.text and "bash, ipython, editor, submit" in obs.text


@pytest.mark.parametrize("raw", ['{"command": "ls"', "{'command': 'ls'}", "command=ls"])
async def test_malformed_json_is_an_error_with_an_example(toolbox: ToolBox, raw: str) -> None:
    obs = await toolbox.call("bash", raw)
    assert obs.is_error
    assert "not valid JSON" in obs.text and '{"command": "ls"}' in obs.text


@pytest.mark.parametrize("raw", ['["ls"]', '"ls"', "42"])
async def test_arguments_that_are_not_an_object_are_an_error(toolbox: ToolBox, raw: str) -> None:
    obs = await toolbox.call("bash", raw)
    assert obs.is_error and "must be a JSON object" in obs.text


@pytest.mark.parametrize(
    ("tool", "args", "complaint"),
    [
        ("bash", {"command": 123}, "command: Input should be a valid string"),
        ("bash", {"command": "ls", "timeout": "soon"}, "timeout"),
        ("bash", {"command": "ls", "timeout": -1}, "timeout: Input should be greater than 0"),
        ("bash", {}, "command: Field required"),
        ("bash", {"command": "ls", "sudo": True}, "sudo: Extra inputs are not permitted"),
        ("ipython", {"code": ["print(1)"]}, "code: Input should be a valid string"),
        ("editor", {"command": "delete", "path": "a"}, "command: Input should be"),
        ("editor", {"command": "insert", "path": "a", "new_str": "x", "insert_line": "two"}, "insert_line"),
        ("editor", {"command": "create", "path": "a"}, "`create` needs `file_text`"),
        ("submit", {"answer": None}, "answer: Input should be a valid string"),
    ],
)
async def test_wrong_argument_types_are_an_error_naming_the_field(
    toolbox: ToolBox, tool: str, args: dict[str, Any], complaint: str
) -> None:
    obs = await toolbox.call(tool, json.dumps(args))
    assert obs.is_error
    assert f"Invalid arguments for tool `{tool}`" in obs.text
    assert complaint in obs.text


async def test_editor_errors_come_back_as_observations(toolbox: ToolBox) -> None:
    obs = await toolbox.call("editor", {"command": "view", "path": "../../etc/passwd"})
    assert obs.is_error and "outside the workspace" in obs.text
    obs = await toolbox.call("editor", {"command": "view", "path": "missing.txt"})
    assert obs.is_error and "does not exist" in obs.text


@pytest.mark.bwrap
async def test_a_concurrent_bash_call_is_an_error_observation(toolbox: ToolBox) -> None:
    first = asyncio.create_task(toolbox.call("bash", {"command": "sleep 0.3; echo done"}))
    await asyncio.sleep(0.1)
    second = await toolbox.call("bash", {"command": "echo now"})
    assert second.is_error and "already running" in second.text
    assert (await first).text == "done"


async def test_an_unexpected_tool_failure_is_an_observation(
    toolbox: ToolBox, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(toolbox.editor, "run", broken)
    obs = await toolbox.call("editor", {"command": "view", "path": "."})
    assert obs.is_error and "No space left on device" in obs.text


# -- lifecycle -----------------------------------------------------------------------------------------
@pytest.mark.bwrap
async def test_tools_start_lazily_and_close_stops_them(sandbox: Sandbox) -> None:
    box = ToolBox(sandbox)
    assert box._shell is None and box._kernel is None
    await box.call("bash", {"command": "true"})
    assert box._shell is not None and box._kernel is None
    shell = box._shell
    await box.close()
    await box.close()
    assert not shell.alive
    obs = await box.call("bash", {"command": "true"})
    assert obs.is_error and "closed" in obs.text


@pytest.mark.bwrap
async def test_exit_in_bash_and_os_exit_in_ipython_leave_the_toolbox_working(toolbox: ToolBox) -> None:
    obs = await toolbox.call("bash", {"command": "exit"})
    assert obs.metadata["restarted"] is True and "shell exited" in obs.text
    assert (await toolbox.call("bash", {"command": "echo ok"})).text == "ok"
    obs = await toolbox.call("ipython", {"code": "import os; os._exit(1)"})
    assert obs.metadata["restarted"] is True and "died" in obs.text
    assert "Out[" in (await toolbox.call("ipython", {"code": "1+1"})).text
