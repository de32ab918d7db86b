# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl show FILE`: a trajectories JSONL (the demo's outputs, NeMo RL-ready rollouts, Gym `/run`
results) in the terminal: per rollout the prompt, each turn's output, tool calls and observations,
token counts, reward and stop reason."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path
from typing import TextIO

from nemo_gym_prorl.cli.failure import failed
from nemo_gym_prorl.demo.trajectory_view import Step, TrajectoryFileError, TrajectoryView, read_views

_COLOURS = {"title": "1;36", "turn": "1", "assistant": "0", "tool_call": "33", "invalid_tool_call": "31",
            "observation": "2", "system": "2", "user": "34", "facts": "32"}  # fmt: skip
_LABELS = {"assistant": "model", "tool_call": "call", "invalid_tool_call": "BAD CALL", "observation": "tool",
           "system": "system", "user": "user"}  # fmt: skip


class _Printer:
    def __init__(self, out: TextIO, colour: bool, width: int) -> None:
        self.out, self.colour, self.width = out, colour, width

    def line(self, text: str, style: str = "assistant") -> None:
        if self.colour and _COLOURS.get(style, "0") != "0":
            text = f"\033[{_COLOURS[style]}m{text}\033[0m"
        print(text, file=self.out)

    def step(self, step: Step, limit: int | None) -> None:
        label = _LABELS[step.kind] + (f" {step.name}" if step.name else "")
        text = (
            step.text
            if limit is None or len(step.text) <= limit
            else step.text[:limit] + f" … (+{len(step.text) - limit} chars)"
        )
        body = textwrap.indent(text.rstrip() or "(empty)", "      ")
        self.line(f"   {label}:", step.kind)
        self.line(body, step.kind)


def render(view: TrajectoryView, printer: _Printer, limit: int | None) -> None:
    f = view.facts
    printer.line("=" * min(printer.width, 100), "title")
    printer.line(view.title, "title")
    facts = ", ".join(f"{k}={v}" for k, v in f.items() if v not in (None, "", {}) and k != "task")
    printer.line(f"  {facts}", "facts")
    for step in view.prompt:
        printer.step(step, limit)
    for turn in view.turns:
        printer.line(
            f" turn {turn.number}: {turn.prompt_tokens} prompt tokens, {turn.generated_tokens} generated, "
            f"{turn.tool_calls} tool call(s)",
            "turn",
        )
        for step in turn.steps:
            printer.step(step, limit)


def show(path: Path, *, index: int | None = None, full: bool = False, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    colour = out.isatty() and "NO_COLOR" not in os.environ
    printer = _Printer(out, colour, 100)
    shown = 0
    try:
        for view in read_views(path):
            if index is not None and view.index != index:
                continue
            render(view, printer, None if full else 600)
            shown += 1
    except TrajectoryFileError as exc:
        return failed("show", exc)
    if shown == 0:
        print(f"prorl show: {path}: no rollout" + (f" on line {index}" if index else ""), file=sys.stderr)
        return 1
    return 0


def add_show_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("show", help="render a trajectories JSONL in the terminal")
    parser.add_argument(
        "file", type=Path, help="a JSONL of rollout records (e.g. outputs/demo/trajectories.jsonl)"
    )
    parser.add_argument("--line", type=int, default=None, help="only the rollout on this line (1-based)")
    parser.add_argument("--full", action="store_true", help="do not shorten long texts")
    parser.set_defaults(func=lambda args: show(args.file, index=args.line, full=args.full))
