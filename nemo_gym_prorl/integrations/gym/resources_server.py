# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The NeMo Gym resources-server face shared by the four domains (each `app.py` is a subclass).

Routes (on top of Gym's `/seed_session`, `/verify`, `/close_session`, `/aggregate_metrics`):
one POST route per tool the domain offers (`/bash`, `/ipython`, `/editor`, `/submit`), taking
the tool's JSON arguments and returning a `ToolObservation` (`text`, `is_error`, `metadata`);
`/exec` runs one command of an agent harness to completion in the session's sandbox;
`/check_instance` answers whether `/seed_session` would take a row (200, or the same 400
`invalid_instance` naming the field), opening nothing: the agent's rollout API asks it at submit.

A session (keyed by Gym's session cookie, or by `resources_session_id` when a 0.7 environment
server seeds it) owns one sandbox and its `ToolBox`. `/seed_session` takes the dataset row (its
task fields), opens the sandbox and sets up the workspace (SWE: the repository at /testbed).
`/verify` collects the RUN artifacts from the session (SWE: the git diff), closes the session's
sandbox, and evaluates in fresh sandboxes. Verify never answers 5xx for anything the policy did:
reward 0 and a `reason`; an infrastructure failure sets `mask_sample` (top level and
`instance_config.mask_sample`, where NeMo RL reads it) and `failure_kind="verifier_error"`.

Lending (`sandbox_access_provider_ref` set): a session's bubblewrap sandbox is the persistent
kind, and `/seed_session` answers Gym's `sandbox_access`, with which an agent in another process
joins it through the `bubblewrap` provider (`AsyncSandbox.connect`). Its commands run beside the
session's own tools, in the same namespaces and files. Only `/close_session` (or `/verify`) ends
the sandbox; the borrower disconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from fastapi import Body, FastAPI, HTTPException, Request
from nemo_gym.base_resources_server import (
    BaseMultiRewardVerifyResponse,
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    ResourcesSeedSessionRequest,
    ResourcesSeedSessionResponse,
    SimpleResourcesServer,
)
from nemo_gym.sandbox.access import DirectSandboxConnection, SandboxAccess
from nemo_gym.server_utils import SESSION_ID_KEY
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from nemo_gym_prorl.agent.harness.base import SandboxExecutor
from nemo_gym_prorl.integrations.gym.sandbox_provider import describe_sandbox
from nemo_gym_prorl.pipeline.handler import INVALID_INSTANCE, InvalidInstanceError
from nemo_gym_prorl.sandbox import Sandbox, SandboxSpec
from nemo_gym_prorl.sandbox.persistent import PERSISTENT_BACKEND, NamespaceBubblewrapSandbox
from nemo_gym_prorl.service.errors import RedactErrorBodies
from nemo_gym_prorl.tasks.base import EvalOutcome, TaskDomain, final_text_from_response
from nemo_gym_prorl.tasks.workspace import Workspace, open_workspace
from nemo_gym_prorl.tools.dispatch import ToolBox, ToolBoxConfig

logger = logging.getLogger(__name__)

_GYM_FIELDS = frozenset({"responses_create_params", "response", "capture_rollout_id", "_ng_rollout_id"})
_PROMPT = frozenset({"responses_create_params"})


class ProRLServerConfig(BaseResourcesServerConfig):
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec, description="RUN sandboxes (math, STEM, code).")
    max_sessions: int = Field(256, gt=0, description="Open sessions (sandboxes) at once.")
    tools: ToolBoxConfig = Field(
        default_factory=ToolBoxConfig,
        description="Tool limits (timeouts, output size). Which tools a session gets is the domain's choice.",
    )
    sandbox_access_provider_ref: str | None = Field(
        None,
        description="Lend each session's sandbox to the agent: the name of a top-level config block "
        "holding `{bubblewrap: {...}}` (Gym's `DirectSandboxConnection.provider_config_ref`, resolved "
        "by the borrower). Set: a bubblewrap session sandbox is the persistent kind and /seed_session "
        "answers `sandbox_access` (same host and user only). Null: nothing is lent.",
    )


class ExecRequest(BaseModel):
    """`/exec`: one command of a harness (see `agent.harness`)."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1)
    cwd: str | None = Field(None, description="None: the sandbox's workspace")
    timeout_s: float = Field(60.0, gt=0)


class ProRLSeedSessionRequest(BaseSeedSessionRequest):
    """The dataset row (its task fields) as the agent's `/run` posts it."""

    model_config = ConfigDict(extra="allow")


class ProRLSeedSessionResponse(BaseSeedSessionResponse):
    """`/seed_session` of a flat row when the session lends its sandbox."""

    sandbox_access: SandboxAccess


class CheckInstanceResponse(BaseModel):
    """`/check_instance`: `/seed_session` would take the row (nothing was opened to find out)."""

    ok: Literal[True] = True


class ProRLVerifyRequest(BaseVerifyRequest):
    """Gym's verify body; the row's task fields (expected_answer, verifier_metadata, SWE fields...)
    ride along at top level."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ProRLVerifyResponse(BaseMultiRewardVerifyResponse):
    model_config = ConfigDict(extra="allow")

    reason: str = "ok"
    detail: str | None = None
    extracted_answer: str | None = None
    resolved: bool | None = None
    accuracy: float = 0.0
    report: dict[str, Any] = Field(default_factory=dict)
    instance_config: dict[str, Any] | None = None
    verify_time_s: float = 0.0


def row_of(body: Any, *, keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The row's task fields, without Gym's own (`keep`: those of Gym's fields to keep)."""
    data = body.model_dump() if hasattr(body, "model_dump") else dict(body)
    extra = getattr(body, "model_extra", None) or {}
    data.update(extra)
    return {k: v for k, v in data.items() if k not in _GYM_FIELDS - keep}


class _LendingDomain:
    """The domain, with its bubblewrap RUN sandbox made persistent so that another process can
    join it; everything else is the domain's own. (`open_workspace` asks the domain for the
    spec, which each domain builds its own way: SWE ignores the server's `sandbox`.)"""

    def __init__(self, domain: TaskDomain) -> None:
        self._domain = domain

    def sandbox_spec(self, row: Mapping[str, Any], base: SandboxSpec | None = None) -> SandboxSpec:
        spec = self._domain.sandbox_spec(row, base)
        if spec.backend != "bubblewrap":
            return spec  # refused after opening, naming the backend
        return spec.model_copy(update={"backend": PERSISTENT_BACKEND})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._domain, name)


@dataclass
class _Session:
    workspace: Workspace
    row: dict[str, Any]

    @property
    def sandbox(self) -> Sandbox:
        return self.workspace.sandbox

    @property
    def toolbox(self) -> ToolBox:
        return self.workspace.tools

    async def close(self) -> None:
        await self.workspace.close()


class ProRLTaskServer(SimpleResourcesServer):
    """Subclasses set `task_tools` and implement `make_task()`."""

    ray_enabled = False
    config: ProRLServerConfig
    task_tools: ClassVar[tuple[str, ...]] = ()

    _task: TaskDomain | None = PrivateAttr(default=None)
    _sessions: dict[str, _Session] = PrivateAttr(default_factory=dict)
    _seeding: dict[str, asyncio.Lock] = PrivateAttr(default_factory=dict)
    _closed_ids: set[str] = PrivateAttr(default_factory=set)

    # -- the domain -----------------------------------------------------------------------------
    def make_task(self) -> TaskDomain:
        raise NotImplementedError

    @property
    def task(self) -> TaskDomain:
        if self._task is None:
            self._task = self.make_task()
        return self._task

    # -- web app --------------------------------------------------------------------------------
    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.add_middleware(RedactErrorBodies)  # Gym answers a crash with its repr: paths included
        for tool in self.task_tools:
            app.post(f"/{tool}")(self._tool_route(tool))
        app.post("/exec")(self._exec_route())
        app.post("/check_instance")(self.check_instance)
        inner = app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(a: FastAPI) -> AsyncIterator[Any]:
            # Shutdown closes every session's sandbox, shell and kernel, and the task's pools
            # (bubblewrap would kill them with the process anyway; this also removes their files).
            async with inner(a) as state:
                try:
                    yield state
                finally:
                    await self.close_all()

        app.router.lifespan_context = lifespan
        return app

    def _tool_route(self, tool: str):
        async def route(
            request: Request,
            body: dict[str, Any] = Body(default_factory=dict),  # noqa: B008 (FastAPI's idiom)
        ) -> dict[str, Any]:
            return await self.call_tool(request.session.get(SESSION_ID_KEY, "default"), tool, body)

        route.__name__ = f"tool_{tool}"
        return route

    def _exec_route(self):
        async def exec_command(request: Request, body: ExecRequest) -> dict[str, Any]:
            """A harness's command, run to completion in the session's sandbox (a fresh
            `bash -c`, empty stdin): what `prorl serve` runs in process for a harness."""
            session = self._sessions.get(request.session.get(SESSION_ID_KEY, ""))
            if session is None:
                raise HTTPException(404, "no session: /seed_session first")
            timeout = min(body.timeout_s, self.config.tools.bash_max_timeout_s)
            result = await SandboxExecutor(session.sandbox).exec(
                body.command, cwd=body.cwd, timeout_s=timeout
            )
            return result.model_dump()

        return exec_command

    # -- sessions -------------------------------------------------------------------------------
    async def open_session(self, sid: str, row: Mapping[str, Any]) -> _Session:
        if sid in self._sessions:
            return self._sessions[sid]
        lock = self._seeding.setdefault(sid, asyncio.Lock())
        async with lock:
            if sid in self._sessions:
                return self._sessions[sid]
            if len(self._sessions) >= self.config.max_sessions:
                raise RuntimeError(f"too many open sessions ({self.config.max_sessions})")
            tools = [t for t in self.task.tool_names(row) if t in self.task_tools] or list(self.task_tools)
            domain = _LendingDomain(self.task) if self.lends_sandboxes else self.task
            workspace = await open_workspace(domain, row, self.config.sandbox, self.config.tools, tools)  # type: ignore[arg-type]
            if self.lends_sandboxes and not isinstance(workspace.sandbox, NamespaceBubblewrapSandbox):
                await workspace.close()
                raise RuntimeError(
                    "sandbox_access_provider_ref is set, but this session's sandbox backend is "
                    f"{workspace.sandbox.spec.backend!r}: only bubblewrap sandboxes can be lent"
                )
            session = _Session(workspace, dict(row))
            self._sessions[sid] = session
            return session

    @property
    def lends_sandboxes(self) -> bool:
        return self.config.sandbox_access_provider_ref is not None

    def sandbox_access(self, session: _Session) -> SandboxAccess | None:
        """Gym's access to the session's sandbox, when this server lends it: the provider block
        to connect through, the descriptor, and the workspace as the working directory."""
        ref = self.config.sandbox_access_provider_ref
        if ref is None:
            return None
        sandbox = session.sandbox
        assert isinstance(sandbox, NamespaceBubblewrapSandbox)  # checked when the session opened
        workdir = sandbox.spec.workspace_mount
        connection = DirectSandboxConnection(
            provider_config_ref=ref, descriptor=describe_sandbox(sandbox, workdir)
        )
        return SandboxAccess(connection=connection, workdir=workdir)

    async def close_session_id(self, sid: str) -> None:
        session = self._sessions.pop(sid, None)
        self._seeding.pop(sid, None)
        if session is not None:
            await session.close()

    async def close_all(self) -> None:
        for sid in list(self._sessions):
            await self.close_session_id(sid)
        if self._task is not None:
            await self._task.aclose()

    def check_row(self, checked: Mapping[str, Any]) -> None:
        """The domain's check of a row, one for `/seed_session` and `/check_instance`: what no
        stage could run is refused (400 `invalid_instance` naming the field) before a sandbox
        opens. `checked` is the row with its prompt (the check sees the declared tools too)."""
        try:
            self.task.check_row(checked)
        except InvalidInstanceError as exc:
            raise HTTPException(
                400, {"error": INVALID_INSTANCE, "field": exc.field, "reason": exc.reason}
            ) from None

    async def check_instance(self, body: ProRLSeedSessionRequest) -> CheckInstanceResponse:
        """Would `/seed_session` take this row? The same check, with no session, sandbox or
        workspace opened: what the agent's rollout API asks at submit, before anything runs."""
        self.check_row(row_of(body, keep=_PROMPT))
        return CheckInstanceResponse()

    async def seed_session(
        self, request: Request, body: ResourcesSeedSessionRequest | ProRLSeedSessionRequest
    ) -> ResourcesSeedSessionResponse | ProRLSeedSessionResponse | BaseSeedSessionResponse:
        if isinstance(body, ResourcesSeedSessionRequest):
            row = checked = dict(body.task_data)
        else:  # the session keeps the task fields; the check sees the prompt's declared tools too
            checked = row_of(body, keep=_PROMPT)
            row = {k: v for k, v in checked.items() if k not in _PROMPT}
        # Checked again here, whoever checked at submit: a 0.7 environment server seeds directly.
        self.check_row(checked)
        if isinstance(body, ResourcesSeedSessionRequest):
            sid = body.resources_session_id
            if sid in self._closed_ids:
                raise ValueError(f"resources session {sid} is already closed")
            request.session[SESSION_ID_KEY] = sid
            session = await self.open_session(sid, row)
            return ResourcesSeedSessionResponse(
                resources_session_id=sid, sandbox_access=self.sandbox_access(session)
            )
        session = await self.open_session(request.session[SESSION_ID_KEY], row)
        access = self.sandbox_access(session)
        if access is not None:
            return ProRLSeedSessionResponse(sandbox_access=access)
        return BaseSeedSessionResponse()

    async def close_resources_session(
        self, request: Request, body: ResourcesCloseSessionRequest | None = None
    ) -> ResourcesCloseSessionResponse | dict[str, Any]:
        if body is not None:
            self._closed_ids.add(body.resources_session_id)
            await self.close_session_id(body.resources_session_id)
            return ResourcesCloseSessionResponse(resources_session_id=body.resources_session_id)
        await self.close_session_id(request.session.get(SESSION_ID_KEY, ""))
        return {"closed": True}

    async def call_tool(self, sid: str, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        session = self._sessions.get(sid)
        if session is None:
            try:  # a tool call without /seed_session: tasks without per-row setup still work
                session = await self.open_session(sid, {})
            except Exception as exc:
                return {"text": f"No session: {exc}", "is_error": True, "metadata": {}}
        obs = await session.toolbox.call(tool, dict(args))
        return obs.model_dump()

    # -- verify ---------------------------------------------------------------------------------
    async def verify(self, request: Request, body: ProRLVerifyRequest) -> ProRLVerifyResponse:
        sid = request.session.get(SESSION_ID_KEY, "")
        artifacts: dict[str, Any] = {}
        session = self._sessions.get(sid)
        if session is not None:
            try:
                artifacts = await self.task.collect_artifacts(
                    session.sandbox, {**session.row, **row_of(body)}
                )
                if session.toolbox.submitted is not None:
                    artifacts["submitted"] = session.toolbox.submitted
            except Exception as exc:
                logger.warning("collecting artifacts failed: %s", exc)
                artifacts = {"collect_error": str(exc)}
            finally:
                await self.close_session_id(sid)  # RUN is over; EVAL uses fresh sandboxes
        return await self.verify_body(body, artifacts)

    async def verify_body(
        self, body: ProRLVerifyRequest, artifacts: Mapping[str, Any] | None = None
    ) -> ProRLVerifyResponse:
        started = time.perf_counter()
        row = row_of(body)
        text = final_text_from_response(body.response)
        if artifacts and artifacts.get("submitted") and not text:
            text = str(artifacts["submitted"])
        try:
            if artifacts and artifacts.get("collect_error"):
                outcome = EvalOutcome.infra_failure(
                    f"could not collect RUN artifacts: {artifacts['collect_error']}"
                )
            else:
                outcome = await self.task.evaluate(row, text, artifacts)
        except Exception as exc:  # an evaluator bug must not become a 500
            logger.exception("evaluation failed")
            outcome = EvalOutcome.infra_failure(f"evaluator error: {type(exc).__name__}: {exc}")
        return self.to_response(body, outcome, time.perf_counter() - started)

    @staticmethod
    def to_response(body: Any, outcome: EvalOutcome, elapsed: float) -> ProRLVerifyResponse:
        data = body.model_dump()
        instance_config = data.get("instance_config") if isinstance(data.get("instance_config"), dict) else {}
        components = outcome.components or {"reward": outcome.reward}
        extracted = outcome.report.get("extracted_answer")
        return ProRLVerifyResponse(
            **{k: v for k, v in data.items() if k in ("responses_create_params", "response")},
            reward=outcome.reward,
            reward_components=components,
            mask_sample=outcome.mask_sample,
            failure_kind="verifier_error" if outcome.mask_sample else None,
            failure_reason=outcome.detail if outcome.mask_sample else None,
            reason=outcome.reason,
            detail=outcome.detail,
            extracted_answer=str(extracted) if extracted is not None else None,
            resolved=outcome.resolved,
            accuracy=float(outcome.reward >= 1.0),
            report=outcome.report,
            instance_config={**instance_config, "mask_sample": outcome.mask_sample},
            verify_time_s=elapsed,
        )


def verifier_fixture(
    server_cls: type[ProRLTaskServer],
    config_cls: type[ProRLServerConfig],
    app_file: str,
    **fields: Any,
) -> Any:
    """NeMo Gym 0.7's verifier fixture for the server whose `app.py` is `app_file`: its
    `tests/verifier_cases.jsonl` run against a server built with a loopback `config_cls` named
    after the server's directory, plus `fields` (no Gym stack: a server client over an empty
    global config, which `/verify` never uses)."""
    from pathlib import Path

    from nemo_gym.verifier_fixture import VerifierFixture

    name = Path(app_file).parent.name
    config = config_cls(host="127.0.0.1", port=0, entrypoint="app.py", name=name, **fields)

    return VerifierFixture(
        server_factory=lambda: server_cls(config=config, server_client=standalone_server_client()),
        request_model=ProRLVerifyRequest,
        cases_path=Path(app_file).parent / "tests" / "verifier_cases.jsonl",
        invoke=lambda server, request: server.verify_body(request),
    )


def standalone_server_client() -> Any:
    """A real Gym `ServerClient` that knows no other server: for a resources server run outside a
    Gym stack (its verifier cases), where nothing calls another server."""
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.server_utils import ServerClient
    from omegaconf import OmegaConf

    return ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=0),
        global_config_dict=OmegaConf.create({}),
    )
