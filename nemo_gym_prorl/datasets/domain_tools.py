# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The tools each domain's rows offer, as the Responses-API function tools Gym rows carry."""

from __future__ import annotations

from typing import Any

from nemo_gym_prorl.tools.specs import ToolName

DOMAIN_TOOLS: dict[str, tuple[ToolName, ...]] = {
    "math": ("ipython", "submit"),
    "stem": ("ipython", "submit"),
    "code": ("bash", "editor", "ipython"),
    "swe": ("bash", "editor"),
}


def responses_tools(domain: str) -> list[dict[str, Any]]:
    """The domain's tools as Responses-API function tools (what Gym rows carry)."""
    from nemo_gym_prorl.tools import tool_specs

    out = []
    for spec in tool_specs(list(DOMAIN_TOOLS[domain])):
        fn = spec.get("function", spec)
        out.append({"type": "function", "name": fn["name"], "description": fn.get("description", ""),
                    "parameters": fn.get("parameters", {}), "strict": False})  # fmt: skip
    return out
