# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The demonstrator's programs: a task's inputs -> the code a competent agent runs, the tool
call that runs it in the model's markup, and the answer written from the tool's output.

Pure text: no backend, sandbox or evaluator (`demonstrations.py` runs them through those).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from nemo_gym_prorl.agent.harness.mini_swe_agent import SUBMIT_MARKER
from nemo_gym_prorl.llm.records import ToolCall
from nemo_gym_prorl.training.heldout import DemonstratedFamily


class DemonstrationError(RuntimeError):
    """Demonstrations cannot be written at all: no backend, a dialect or tool-call format the
    demonstrator cannot write, or not one task rewarded."""


# -- the programs: a task's inputs -> the code a competent agent runs -------------------------


def _numbers(metadata: Mapping[str, Any]) -> str:
    return ", ".join(str(int(n)) for n in metadata["numbers"])


def _equation(metadata: Mapping[str, Any]) -> str:
    left, right = str(metadata["equation"]).split("=")
    variable = str(metadata["variable"])
    return (
        "from sympy import Eq, solve, symbols\n"
        f"{variable} = symbols({variable!r})\n"
        f"print(solve(Eq({left.strip()}, {right.strip()}), {variable})[0])"
    )


# Each reads only the task's inputs from reasoning-gym's metadata, never its answer.
PROGRAMS: dict[DemonstratedFamily, Callable[[Mapping[str, Any]], str]] = {
    "basic_arithmetic": lambda m: f"print({str(m['expression']).strip()})",
    "gcd": lambda m: f"import math\nprint(math.gcd({_numbers(m)}))",
    "lcm": lambda m: f"import math\nprint(math.lcm({_numbers(m)}))",
    "fraction_simplification": lambda m: (
        f"from fractions import Fraction\nprint(Fraction({int(m['numerator'])}, {int(m['denominator'])}))"
    ),
    "simple_equations": _equation,
}


def program_code(row: Mapping[str, Any]) -> str:
    """The Python a competent agent runs for this row (a row of `heldout.SeedSplit`)."""
    recipe = row.get("reasoning_gym")
    if not isinstance(recipe, Mapping) or recipe.get("family") not in PROGRAMS:
        raise ValueError(
            f"row {row.get('task_id')!r} names no family a program can demonstrate "
            f"(known: {', '.join(PROGRAMS)})"
        )
    return PROGRAMS[recipe["family"]](recipe.get("metadata") or {})


def tool_call_text(call: ToolCall, tool_format: str) -> str:
    """An assistant turn that makes `call`, in the markup the model writes (the format the
    service parses its generations with). SmolLM2's template teaches none, so it is hermes,
    the convention the system prompt describes (`agent.prompts.TOOL_INSTRUCTIONS`)."""
    if tool_format != "hermes":
        raise DemonstrationError(
            f"demonstrations are written in the hermes tool-call format; the backend's format is "
            f"{tool_format!r} (set llm.tool_call_format: hermes, or add that format's writer here)"
        )
    payload = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    return f"<tool_call>\n{payload}\n</tool_call>"


def value_of(observation: str) -> str | None:
    """The one value a program's `print` put in the tool's observation, or None when the tool
    failed or printed anything else (an error, a traceback, several lines)."""
    text = observation.strip()
    if not text or "\n" in text or "Error" in text or text == "(no output)":
        return None
    return text


def answer_text(value: str) -> str:
    return f"The answer is \\boxed{{{value}}}."


# -- the same programs in a bash harness's own format (mini-swe-agent: one ```bash block) -------


def bash_block(command: str) -> str:
    return f"```bash\n{command}\n```"


def harness_compute_text(row: Mapping[str, Any]) -> str:
    """The first reply: the row's program run by `python3 -c`, on one line."""
    code = "; ".join(line for line in program_code(row).splitlines() if line.strip())
    return bash_block(f"python3 -c {shlex.quote(code)}")


def observed_output(observation: str) -> str:
    """What a command printed, out of the harness's observation message (mini-swe-agent's
    `<output>...</output>`, or the bare text)."""
    match = re.search(r"<output>\n?(.*?)</output>", observation, re.DOTALL)
    return match.group(1) if match else observation


def harness_submit_text(value: str) -> str:
    """The reply that submits `value` as the harness submits: the marker, then the answer."""
    return bash_block(f"echo {SUBMIT_MARKER}; echo {shlex.quote(f'\\boxed{{{value}}}')}")
