# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Scripted, in-process stand-ins for vLLM and NeMo RL's policy server (tests only).

`FakeLLM` is a real HTTP server (uvicorn on a loopback socket, in the test's event loop) with a
character-level tokenizer and SmolLM2's ChatML template, so token arithmetic in tests is
exact and readable. Faults are injected per request: 500s, garbage bodies, hangs, NaN
log-probs; `kill()` closes the listening socket like a crashed process.

Runtime LoRA like vLLM's (`--enable-lora`): `/v1/load_lora_adapter` loads a directory holding
`adapter_config.json` under a name, `/v1/models` lists it, and a request naming it is answered
by "the adapter" (its text starts with `[name] `, its log-probs are -0.125); `lora_load_error`
makes every load fail with a 500, as an engine that cannot fit the adapter does.

In-place weight reload like vLLM's development mode (`VLLM_SERVER_DEV_MODE=1`):
`/collective_rpc` with `reload_weights` swaps the base weights for a directory holding
`config.json`, after which the base model's texts start with `[weights:<directory name>] `;
`/reset_prefix_cache` answers 200; `reload_api=False` is a server without development mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

IM_START, IM_END = 1, 2
SPECIAL = {"<|im_start|>": IM_START, "<|im_end|>": IM_END}
SPECIAL_TEXT = {v: k for k, v in SPECIAL.items()}
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
CHAR_BASE = 1000
# The opening of a harness's conversation (a bash agent given a task), where the recording tests start.
HARNESS_SYSTEM = {"role": "system", "content": "You are a bash agent."}
HARNESS_TASK = {"role": "user", "content": "Fix the bug."}


def tokenize_text(text: str) -> list[int]:
    ids: list[int] = []
    i = 0
    while i < len(text):
        for literal, tid in SPECIAL.items():
            if text.startswith(literal, i):
                ids.append(tid)
                i += len(literal)
                break
        else:
            ids.append(CHAR_BASE + ord(text[i]))
            i += 1
    return ids


def detokenize(ids: list[int], *, skip_special: bool = False) -> str:
    out = []
    for tid in ids:
        if tid in SPECIAL_TEXT:
            if not skip_special:
                out.append(SPECIAL_TEXT[tid])
        else:
            out.append(chr(tid - CHAR_BASE))
    return "".join(out)


def render_chat(messages: list[dict[str, Any]], *, add_generation_prompt: bool, tools: Any = None) -> str:
    """SmolLM2-135M-Instruct's chat template (tools appended to the system block)."""
    text = ""
    for i, message in enumerate(messages):
        if i == 0 and message["role"] != "system":
            system = DEFAULT_SYSTEM + (f"\nTools: {json.dumps(tools)}" if tools else "")
            text += f"<|im_start|>system\n{system}<|im_end|>\n"
        content = message["content"]
        if message["role"] == "system" and tools:
            content += f"\nTools: {json.dumps(tools)}"
        text += f"<|im_start|>{message['role']}\n{content}<|im_end|>\n"
    if add_generation_prompt:
        text += "<|im_start|>assistant\n"
    return text


Responder = Callable[[list[int]], str]


def echo_turn_responder(prompt: list[int]) -> str:
    """Answers with a short text that names how many prompt tokens it saw."""
    return f"ok {len(prompt)}"


@dataclass
class FakeLLM:
    """One fake backend. Set `faults` (consumed one per generation request) to misbehave:
    "500", "garbage", "hang", "nan", "400"; `always` applies one fault to every request."""

    responder: Responder = echo_turn_responder
    max_model_len: int = 4096
    nemo_rl_shape: bool = False  # answer chat in NeMo RL's message-token shape
    splice: bool = False  # NeMo RL's prefix splicing of assistant token ids
    faults: list[str] = field(default_factory=list)
    always: str | None = None
    health_ok: bool = True
    hang_s: float = 30.0
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    port: int = 0
    served_model: str = "fake"
    loras: dict[str, str] = field(default_factory=dict)  # loaded adapter name -> path
    lora_load_error: str | None = None
    strict_model: bool = False  # 404 for a model that is neither the base nor a loaded adapter
    lora_api: bool = True  # False: started without runtime LoRA (the routes do not exist)
    lora_load_delay_s: float = 0.0  # a slow adapter load
    weights: str | None = None  # the base weights reloaded last (None: the launch weights)
    reload_api: bool = True  # False: started without development mode (no /collective_rpc)

    def __post_init__(self) -> None:
        self.app = self._build_app()
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> FakeLLM:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        self._sock = sock
        config = uvicorn.Config(self.app, log_level="critical", lifespan="off", timeout_graceful_shutdown=0)
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:  # noqa: ASYNC110 (uvicorn exposes a flag, not an event)
            await asyncio.sleep(0.005)
        return self

    async def kill(self) -> None:
        """Stop answering at once, like a crashed process: new connections are refused."""
        if self._server is None:
            return
        self._server.should_exit = True
        self._server.force_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, 5)
        if self._sock is not None:
            self._sock.close()
        self._server = self._task = self._sock = None

    def generation_requests(self) -> list[dict[str, Any]]:
        return [b for p, b in self.requests if p in ("/v1/completions", "/v1/chat/completions")]

    def paths(self) -> list[str]:
        """The paths requested so far, in order (generation and LoRA routes)."""
        return [p for p, _ in self.requests]

    # --- behaviour ----------------------------------------------------------------------------

    def _next_fault(self) -> str | None:
        if self.always:
            return self.always
        return self.faults.pop(0) if self.faults else None

    async def _fault_response(self, fault: str | None) -> Response | None:
        if fault == "500":
            return JSONResponse({"error": {"message": "engine dead", "code": 500}}, status_code=500)
        if fault == "garbage":
            return PlainTextResponse("<html>502 Bad Gateway</html>", status_code=200)
        if fault == "400":
            return JSONResponse({"error": {"message": "bad request", "code": 400}}, status_code=400)
        if fault == "hang":
            await asyncio.sleep(self.hang_s)
        return None

    def _unknown_model(self, model: Any) -> JSONResponse | None:
        if not self.strict_model or model in (None, self.served_model) or model in self.loras:
            return None
        message = f"The model `{model}` does not exist."
        return JSONResponse({"error": {"message": message, "code": 404}}, status_code=404)

    def _generate(
        self, prompt: list[int], max_tokens: int | None, model: Any = None
    ) -> tuple[list[int], str]:
        text = self.responder(prompt)
        if model in self.loras:
            text = f"[{model}] {text}"
        elif self.weights is not None:
            text = f"[weights:{os.path.basename(self.weights)}] {text}"
        ids = [*tokenize_text(text), IM_END]
        room = self.max_model_len - len(prompt)
        limit = min(max_tokens or room, room)
        if len(ids) > limit:
            return ids[:limit], "length"
        return ids, "stop"

    def _context_error(self, n: int) -> JSONResponse:
        return JSONResponse(
            {
                "error": {
                    "message": f"This model's maximum context length is {self.max_model_len} tokens. However, "
                    f"your prompt contains {n} input tokens, which exceeds this limit.",
                    "code": 400,
                }
            },
            status_code=400,
        )

    def _splice_prompt(self, messages: list[dict[str, Any]], tools: Any) -> list[int]:
        """NeMo RL: the last assistant message's prompt+generation ids replace everything up
        to it; only what follows is rendered by the template."""
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
        if last is None or "generation_token_ids" not in messages[last]:
            return tokenize_text(render_chat(messages, add_generation_prompt=True, tools=tools))
        prefix = [*messages[last]["prompt_token_ids"], *messages[last]["generation_token_ids"]]
        if prefix[-1:] != [IM_END]:
            prefix.append(IM_END)
        tail_text = render_chat(
            [{"role": "system", "content": ""}, *messages[last + 1 :]], add_generation_prompt=True
        )
        tail = tail_text[len("<|im_start|>system\n<|im_end|>\n") :]
        return [*prefix, *tokenize_text("\n" + tail)]

    def _build_app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/health")
        async def health() -> Response:
            return Response(status_code=200 if self.health_ok else 503)

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            base = {"id": self.served_model, "max_model_len": self.max_model_len, "parent": None}
            adapters = [{"id": n, "root": p, "parent": self.served_model} for n, p in self.loras.items()]
            return {"data": [base, *adapters]}

        @app.post("/v1/load_lora_adapter")
        async def load_lora(request: Request) -> Response:
            body = await request.json()
            self.requests.append(("/v1/load_lora_adapter", body))
            if not self.lora_api:
                return JSONResponse({"detail": "Not Found"}, status_code=404)
            await asyncio.sleep(self.lora_load_delay_s)
            name, path = body.get("lora_name"), body.get("lora_path")
            if name in self.loras and not body.get("load_inplace"):
                message = f"The lora adapter '{name}' has already been loaded."
                return JSONResponse({"error": {"message": message, "code": 400}}, status_code=400)
            if self.lora_load_error:
                return JSONResponse(
                    {"error": {"message": self.lora_load_error, "code": 500}}, status_code=500
                )
            if not path or not os.path.isfile(os.path.join(path, "adapter_config.json")):
                message = f"Loading lora {name} failed: No adapter found for {path}"
                return JSONResponse({"error": {"message": message, "code": 404}}, status_code=404)
            self.loras[name] = path
            return PlainTextResponse(f"Success: LoRA adapter '{name}' added successfully.")

        @app.post("/v1/unload_lora_adapter")
        async def unload_lora(request: Request) -> Response:
            body = await request.json()
            self.requests.append(("/v1/unload_lora_adapter", body))
            if self.loras.pop(body.get("lora_name"), None) is None:
                message = f"The lora adapter '{body.get('lora_name')}' cannot be found."
                return JSONResponse({"error": {"message": message, "code": 404}}, status_code=404)
            return PlainTextResponse("Success")

        @app.post("/collective_rpc")
        async def collective_rpc(request: Request) -> Response:
            body = await request.json()
            self.requests.append(("/collective_rpc", body))
            if not self.reload_api:
                return JSONResponse({"detail": "Not Found"}, status_code=404)
            path = body.get("kwargs", {}).get("weights_path")
            if body.get("method") != "reload_weights" or not path:
                return JSONResponse({"error": {"message": "unsupported call", "code": 400}}, status_code=400)
            if not os.path.isfile(os.path.join(path, "config.json")):
                message = f"Cannot find any model weights with `{path}`"
                return JSONResponse({"error": {"message": message, "code": 500}}, status_code=500)
            self.weights = path
            return JSONResponse({"results": [None]})

        @app.post("/reset_prefix_cache")
        async def reset_prefix_cache() -> Response:
            self.requests.append(("/reset_prefix_cache", {}))
            if not self.reload_api:
                return JSONResponse({"detail": "Not Found"}, status_code=404)
            return Response(status_code=200)

        @app.post("/tokenize")
        async def tokenize(request: Request) -> Response:
            body = await request.json()
            self.requests.append(("/tokenize", body))
            if "messages" in body:
                text = render_chat(
                    body["messages"],
                    add_generation_prompt=body.get("add_generation_prompt", True),
                    tools=body.get("tools"),
                )
            else:
                text = body["prompt"]
            ids = tokenize_text(text)
            return JSONResponse({"count": len(ids), "max_model_len": self.max_model_len, "tokens": ids})

        @app.post("/detokenize")
        async def detok(request: Request) -> dict[str, Any]:
            body = await request.json()
            return {"prompt": detokenize(body["tokens"])}

        @app.post("/v1/completions")
        async def completions(request: Request) -> Response:
            body = await request.json()
            self.requests.append(("/v1/completions", body))
            fault = self._next_fault()
            bad = await self._fault_response(fault)
            if bad is not None:
                return bad
            unknown = self._unknown_model(body.get("model"))
            if unknown is not None:
                return unknown
            prompt = body["prompt"]
            if len(prompt) >= self.max_model_len:
                return self._context_error(len(prompt))
            ids, finish = self._generate(prompt, body.get("max_tokens"), body.get("model"))
            log_probs: list[Any] = [-0.125 if body.get("model") in self.loras else -0.5] * len(ids)
            if fault == "nan":
                log_probs[0] = "NaN"
            choice = {
                "index": 0,
                "text": detokenize(ids, skip_special=True),
                "logprobs": {"token_logprobs": log_probs},
                "finish_reason": finish,
                "token_ids": ids,
                "prompt_token_ids": prompt,
            }
            # NaN is not JSON, but Python servers emit it; the client must reject it.
            return Response(
                json.dumps({"choices": [choice]}).replace('"NaN"', "NaN"), media_type="application/json"
            )

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            body = await request.json()
            self.requests.append(("/v1/chat/completions", body))
            bad = await self._fault_response(self._next_fault())
            if bad is not None:
                return bad
            unknown = self._unknown_model(body.get("model"))
            if unknown is not None:
                return unknown
            messages, tools = body["messages"], body.get("tools")
            if self.splice:
                prompt = self._splice_prompt(messages, tools)
            else:
                prompt = tokenize_text(render_chat(messages, add_generation_prompt=True, tools=tools))
            if len(prompt) >= self.max_model_len:
                return self._context_error(len(prompt))
            ids, finish = self._generate(prompt, body.get("max_tokens"), body.get("model"))
            text = detokenize(ids, skip_special=True)
            if self.nemo_rl_shape:
                message = {
                    "role": "assistant",
                    "content": text,
                    "prompt_token_ids": prompt,
                    "generation_token_ids": ids,
                    "generation_log_probs": [-0.25] * len(ids),
                }
                return JSONResponse({"choices": [{"index": 0, "message": message, "finish_reason": finish}]})
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": {"content": [{"token": detokenize([t]), "logprob": -0.25} for t in ids]},
                "finish_reason": finish,
                "token_ids": ids,
            }
            return JSONResponse({"choices": [choice], "prompt_token_ids": prompt})

        return app
