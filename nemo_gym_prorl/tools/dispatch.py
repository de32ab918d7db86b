# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""From a model's tool call (name, JSON arguments) to a tool in a sandbox, and back to text.

`ToolBox.call` is the one place a rollout touches tools. Whatever the model sends (an unknown
tool, broken JSON, wrong types) or whatever a tool does (time out, die, be busy), the answer is
a `ToolObservation` the model can read; only cancellation propagates, so a rollout loop never
dies of a tool call.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nemo_gym_prorl.sandbox.base import Sandbox
from nemo_gym_prorl.tools.editor import Editor, EditorCommand, EditorError
from nemo_gym_prorl.tools.ipython_kernel import ExecutionResult, IPythonKernel, KernelError
from nemo_gym_prorl.tools.pty_shell import PtyShell, ShellError, ShellResult
from nemo_gym_prorl.tools.specs import (
    ALL_TOOLS,
    ARGUMENT_MODELS,
    BashArgs,
    IPythonArgs,
    SubmitArgs,
    ToolName,
    tool_specs,
)

logger = logging.getLogger(__name__)


class ToolBoxConfig(BaseModel):
    """Which tools a task offers and how long they may run."""

    model_config = ConfigDict(extra="forbid")

    tools: list[ToolName] = Field(default_factory=lambda: list(ALL_TOOLS))
    bash_timeout_s: float = Field(120.0, gt=0, description="Default hard limit per bash command.")
    bash_max_timeout_s: float = Field(600.0, gt=0, description="Largest `timeout` the model may ask for.")
    bash_no_output_timeout_s: float | None = Field(
        60.0, gt=0, description="Stop a bash command silent for this long (None: never)."
    )
    bash_input_wait_s: float | None = Field(
        3.0,
        gt=0,
        description="Stop a bash command silent this long while it reads the terminal (None: never): "
        "a bare `cat`, `uniq` or `python` waits for keys nobody presses",
    )
    ipython_timeout_s: float = Field(120.0, gt=0, description="Hard limit per IPython cell.")
    max_output_bytes: int = Field(32 * 1024, gt=0, description="Output kept per call (head and tail).")


class ToolObservation(BaseModel):
    text: str
    is_error: bool = False  # the call itself failed (bad arguments, unknown tool, tool broken)
    metadata: dict[str, Any] = Field(default_factory=dict)


def _error(text: str, **metadata: Any) -> ToolObservation:
    return ToolObservation(text=text, is_error=True, metadata=metadata)


def _format_validation(name: str, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        got = f" (got {err['input']!r:.80})" if err["type"] not in ("missing", "value_error") else ""
        problems.append(f"- {where}: {err['msg']}{got}")
    return f"Invalid arguments for tool `{name}`:\n" + "\n".join(problems)


def unknown_tool(name: str, available: Iterable[str]) -> ToolObservation:
    """The model called a tool this rollout does not offer."""
    return _error(f"Unknown tool `{name}`. Available tools: {', '.join(available)}.")


def decode_arguments(
    tool: str, arguments: str | Mapping[str, Any] | None
) -> dict[str, Any] | ToolObservation:
    """The one decoder of a tool call's arguments (OpenAI's JSON string, or an already-decoded
    object) into a JSON object, whoever runs the tool; or the observation that tells the model
    what is wrong."""
    example = f" e.g. {_EXAMPLES[tool]}" if tool in _EXAMPLES else ""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if not isinstance(arguments, str):
        return dict(arguments)
    try:
        raw = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return _error(
            f"The arguments for tool `{tool}` are not valid JSON ({exc.msg} at line {exc.lineno} "
            f"column {exc.colno}). Send one JSON object,{example or ' e.g. {}'}."
        )
    if not isinstance(raw, dict):
        return _error(
            f"The arguments for tool `{tool}` must be a JSON object, not {type(raw).__name__};{example}."
        )
    return raw


def parse_arguments(tool: ToolName, arguments: str | Mapping[str, Any] | None) -> BaseModel | ToolObservation:
    """The model's arguments validated against the tool's schema, or the observation that tells
    the model what is wrong."""
    raw = decode_arguments(tool, arguments)
    if isinstance(raw, ToolObservation):
        return raw
    try:
        return ARGUMENT_MODELS[tool].model_validate(raw)
    except ValidationError as exc:
        return invalid_arguments(tool, exc)


def invalid_arguments(tool: str, exc: ValidationError) -> ToolObservation:
    """What the model reads when its arguments do not fit the tool's schema."""
    return _error(_format_validation(tool, exc))


_EXAMPLES: dict[str, str] = {
    "bash": '{"command": "ls"}',
    "ipython": '{"code": "print(1 + 1)"}',
    "editor": '{"command": "view", "path": "."}',
    "submit": '{"answer": "42"}',
}


class ToolBox:
    """The tools of one sandbox. The shell and the kernel start on first use."""

    def __init__(
        self, sandbox: Sandbox, config: ToolBoxConfig | None = None, *, own_sandbox: bool = False
    ) -> None:
        self.sandbox = sandbox
        self.config = config or ToolBoxConfig()
        self.own_sandbox = own_sandbox
        self.editor = Editor(sandbox)
        self._shell: PtyShell | None = None
        self._kernel: IPythonKernel | None = None
        # One lock per tool: two first calls must not start two shells, and a kernel that takes
        # a second to start must not hold up the shell.
        self._shell_lock = asyncio.Lock()
        self._kernel_lock = asyncio.Lock()
        self._closed = False
        self.submitted: str | None = None  # the answer given to `submit`, once it is called

    def specs(self) -> list[dict[str, Any]]:
        return tool_specs(self.config.tools)

    @property
    def finished(self) -> bool:
        return self.submitted is not None

    # -- the one entry point ---------------------------------------------------------------------
    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolObservation:
        if self._closed:
            return _error("The tools of this session are closed.")
        if name not in self.config.tools:
            return unknown_tool(name, self.config.tools)
        tool: ToolName = name
        parsed = parse_arguments(tool, arguments)
        if isinstance(parsed, ToolObservation):
            return parsed
        try:
            # Dispatched on the arguments' model (`ARGUMENT_MODELS[tool]`), so each tool gets its own.
            match parsed:
                case BashArgs():
                    return await self._bash(parsed)
                case IPythonArgs():
                    return await self._ipython(parsed)
                case EditorCommand():
                    return self._editor(parsed)
                case SubmitArgs():
                    return self._submit(parsed)
            raise TypeError(f"no tool takes {type(parsed).__name__}")
        except (ShellError, KernelError, EditorError) as exc:
            return _error(f"{tool}: {exc}")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a broken environment: report it, keep the loop alive
            logger.exception("tool %s failed", tool)
            return _error(f"{tool} failed unexpectedly: {type(exc).__name__}: {exc}")

    # -- tools ----------------------------------------------------------------------------------------
    async def shell(self) -> PtyShell:
        async with self._shell_lock:
            if self._shell is None:  # kept only once it has started
                self._shell = await _started(
                    PtyShell(
                        self.sandbox,
                        timeout=self.config.bash_timeout_s,
                        no_output_timeout=self.config.bash_no_output_timeout_s,
                        input_wait_s=self.config.bash_input_wait_s,
                        max_output_bytes=self.config.max_output_bytes,
                    )
                )
            return self._shell

    async def kernel(self) -> IPythonKernel:
        cfg = self.config
        async with self._kernel_lock:
            if self._kernel is None:
                kernel = IPythonKernel(
                    self.sandbox, timeout=cfg.ipython_timeout_s, max_output_bytes=cfg.max_output_bytes
                )
                self._kernel = await _started(kernel)
            return self._kernel

    async def _bash(self, args: BashArgs) -> ToolObservation:
        shell = await self.shell()
        timeout = quiet = None
        if args.timeout:
            # The model said how long this takes: a silent build must not be cut short by the
            # default no-output limit, so that limit stretches to the requested time.
            timeout = min(args.timeout, self.config.bash_max_timeout_s)
            if self.config.bash_no_output_timeout_s is not None:
                quiet = max(timeout, self.config.bash_no_output_timeout_s)
        before = shell.cwd
        result = await shell.run(args.command, timeout=timeout, no_output_timeout=quiet)
        return ToolObservation(
            text=_bash_text(result, cwd_changed=result.cwd != before), metadata=_meta(result)
        )

    async def _ipython(self, args: IPythonArgs) -> ToolObservation:
        kernel = await self.kernel()
        result = await kernel.execute(args.code)
        meta = _meta(result, exclude={"images", "stdout", "stderr", "result", "error"})
        meta["images"] = result.images
        return ToolObservation(text=_ipython_text(result), metadata=meta)

    def _editor(self, args: EditorCommand) -> ToolObservation:
        return ToolObservation(text=self.editor.run(args), metadata={"command": args.command})

    def _submit(self, args: SubmitArgs) -> ToolObservation:
        if self.submitted is not None:
            return _error("An answer was already submitted; the task is over.")
        self.submitted = args.answer
        return ToolObservation(text="Answer submitted.", metadata={"finished": True, "answer": args.answer})

    async def close(self) -> None:
        """Stop the shell and the kernel (and the sandbox if this toolbox owns it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        # Every step off the event loop's back: a terminal's close sleeps, a sandbox's removes
        # its tree and cgroups; the service's other rollouts must not stall meanwhile.
        if self._shell is not None:
            await self._shell.aclose()
        if self._kernel is not None:
            await self._kernel.close()
        if self.own_sandbox:
            await self.sandbox.aclose()

    async def __aenter__(self) -> ToolBox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _meta(result: ShellResult | ExecutionResult, exclude: set[str] | None = None) -> dict[str, Any]:
    return result.model_dump(exclude=(exclude or set()) | {"output"})


def _bash_text(result: ShellResult, *, cwd_changed: bool) -> str:
    parts = [result.output.rstrip("\n")] if result.output.strip() else []
    if not result.timed_out and result.exit_code != 0:
        parts.append(f"[exit code: {result.exit_code}]")
    if cwd_changed:
        parts.append(f"[working directory: {result.cwd}]")
    if result.hint:
        parts.append(f"[note: {result.hint}]")
    return "\n".join(parts) or "(no output)"


def _ipython_text(result: ExecutionResult) -> str:
    parts: list[str] = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append(result.stderr.rstrip("\n"))
    if result.result is not None:
        count = result.execution_count if result.execution_count is not None else ""
        parts.append(f"Out[{count}]: {result.result}")
    if result.error is not None:
        parts.append(result.error.traceback or f"{result.error.ename}: {result.error.evalue}")
    if result.images:
        parts.append(f"[{len(result.images)} image(s) produced (PNG)]")
    if result.hint:
        parts.append(f"[note: {result.hint}]")
    return "\n".join(parts) or "(no output)"


async def _started[T: PtyShell | IPythonKernel](tool: T) -> T:
    await tool.start()
    return tool
