# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A Gym resources server nobody here wrote runs its sandboxed tool on `bubblewrap`.

`resources_servers/litmus_agent` from the installed nemo-gym wheel, unchanged, with its own
Apptainer config file (`litmus_agent_apptainer.yaml`) where only the `sandbox_provider:` block
is swapped for `bubblewrap` (its image name mapped to the host system by a provider option).
Driven over HTTP in-process (its FastAPI app, httpx's ASGI transport) the way an agent calls
it: code cells to its stateful Python tool, then `/verify` of the answer the tool computed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import httpx
import pytest
import resources_servers.litmus_agent.app as litmus_app
from nemo_gym.server_utils import ServerClient
from omegaconf import OmegaConf
from resources_servers.litmus_agent.app import LitmusAgentConfig, LitmusAgentResourcesServer

pytestmark = pytest.mark.bwrap

LITMUS_DIR = Path(litmus_app.__file__).resolve().parent  # the wheel's copy, in site-packages
TOOL = "stateful_python_code_exec"


def litmus_config(root_dir: Path) -> dict[str, Any]:
    """litmus_agent's own Apptainer server block, with only its sandbox provider replaced."""
    loaded = OmegaConf.load(LITMUS_DIR / "configs" / "litmus_agent_apptainer.yaml")
    block: dict[str, Any] = OmegaConf.to_container(loaded, resolve=True)["litmus_agent"]["resources_servers"][
        "litmus_agent"
    ]
    image = block["sandbox_spec"]["image"]  # docker://python:3.12-slim unless overridden by env
    block["sandbox_provider"] = {"bubblewrap": {"images": {image: "host"}, "root_dir": str(root_dir)}}
    return block


def example_row() -> dict[str, Any]:
    """Ethanol's heavy-atom count, from the server's own example data."""
    rows = [json.loads(line) for line in (LITMUS_DIR / "data" / "example.jsonl").read_text().splitlines()]
    return next(r for r in rows if r["property"] == "HeavyAtomCount" and r["smiles"] == "CCO")


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed process waits for its parent to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def assistant_response(text: str) -> dict[str, Any]:
    return {
        "id": "resp_bwrap", "created_at": 0.0, "model": "agent", "object": "response",
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
    }  # fmt: skip


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[LitmusAgentResourcesServer, httpx.AsyncClient]]:
    block = litmus_config(tmp_path / "boxes")
    config = LitmusAgentConfig(host="127.0.0.1", port=0, name="litmus_agent", **block)
    litmus = LitmusAgentResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))
    app = litmus.setup_webserver()
    async with app.router.lifespan_context(app):  # its shutdown hook stops leftover sandboxes
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://litmus") as client:
            yield litmus, client


def test_only_the_provider_block_differs_from_its_own_config(tmp_path: Path) -> None:
    ours = litmus_config(tmp_path)
    theirs = OmegaConf.to_container(
        OmegaConf.load(LITMUS_DIR / "configs" / "litmus_agent_apptainer.yaml"), resolve=True
    )["litmus_agent"]["resources_servers"]["litmus_agent"]
    assert {k: v for k, v in ours.items() if k != "sandbox_provider"} == {
        k: v for k, v in theirs.items() if k != "sandbox_provider"
    }
    assert list(theirs["sandbox_provider"]) == ["apptainer"] and list(ours["sandbox_provider"]) == [
        "bubblewrap"
    ]


async def test_an_agent_computes_the_answer_in_bubblewrap_and_verify_scores_it(
    server: tuple[LitmusAgentResourcesServer, httpx.AsyncClient], tmp_path: Path
) -> None:
    litmus, client = server
    row = example_row()
    outside = tmp_path / "host-only.txt"
    outside.write_text("not for the sandbox")

    async def cell(code: str) -> str:
        reply = await client.post(f"/{TOOL}", json={"code": code})
        reply.raise_for_status()
        return reply.text

    # One session (the cookie): state carries across cells, each cell a fresh sandboxed process.
    assert await cell(f"smiles = {row['smiles']!r}") == ""
    answer = await cell("heavy = sum(1 for c in smiles if c.isalpha() and c.upper() != 'H')\nprint(heavy)")
    where = await cell(
        "import os, sys\n"
        f"print(os.uname().nodename, os.getcwd(), sys.prefix, os.path.exists({str(outside)!r}))"
    )
    assert answer.strip() == row["expected_answer"] == "3"
    assert where.split() == ["sandbox", "/sandbox", "/opt/prorl-runtime", "False"]
    boom = await cell("raise ValueError('bad cell')")
    assert "ValueError: bad cell" in boom and (await cell("print(heavy * 2)")).strip() == "6"
    (box,) = [s.sandbox for s in litmus._sessions.values()]
    members = box._handle.raw.sandbox.cgroup_members()

    verify = await client.post("/verify", json={
        **row, "response": assistant_response(f"Counting atoms with the tool: (({answer.strip()}))"),
    })  # fmt: skip
    verify.raise_for_status()
    scored = verify.json()
    assert (scored["reward"], scored["correct"], scored["predicted_value"]) == (1.0, True, 3.0)
    # verify ends the rollout: its sandbox is stopped, and every process of it is gone.
    assert litmus._sessions == {}
    assert members and not any(_running(pid) for pid in members)


async def test_a_wrong_answer_scores_zero(
    server: tuple[LitmusAgentResourcesServer, httpx.AsyncClient],
) -> None:
    _, client = server
    row = example_row()
    wrong = (await client.post(f"/{TOOL}", json={"code": "print(len('CCO') + 1)"})).text.strip()
    verify = await client.post("/verify", json={**row, "response": assistant_response(f"(({wrong}))")})
    assert verify.json()["reward"] == 0.0
