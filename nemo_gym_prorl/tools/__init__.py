# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The agent's tools inside a sandbox: a persistent PTY bash, an IPython kernel, a file editor,
their OpenAI function specs, and `ToolBox`, the one dispatcher from a model's tool call to an
observation."""

from nemo_gym_prorl.tools.dispatch import ToolBox, ToolBoxConfig, ToolObservation
from nemo_gym_prorl.tools.editor import Editor, EditorCommand, EditorError
from nemo_gym_prorl.tools.ipython_kernel import (
    ExecutionError,
    ExecutionResult,
    IPythonKernel,
    KernelBusyError,
    KernelError,
)
from nemo_gym_prorl.tools.pty_shell import PtyShell, ShellBusyError, ShellError, ShellResult
from nemo_gym_prorl.tools.specs import ALL_TOOLS, ToolName, tool_spec, tool_specs

__all__ = [
    "ALL_TOOLS",
    "Editor",
    "EditorCommand",
    "EditorError",
    "ExecutionError",
    "ExecutionResult",
    "IPythonKernel",
    "KernelBusyError",
    "KernelError",
    "PtyShell",
    "ShellBusyError",
    "ShellError",
    "ShellResult",
    "ToolBox",
    "ToolBoxConfig",
    "ToolName",
    "ToolObservation",
    "tool_spec",
    "tool_specs",
]
