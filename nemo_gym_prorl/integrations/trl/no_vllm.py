# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A trainer process generates through the rollout service, never with a vLLM of its own.

The model venv holds vLLM (it serves the policy), and TRL imports it at `import trl` whenever it
is installed: about 5 s of CPU at every trainer start, and a page of TRL's vLLM-version warnings.
`hide_vllm()`, called before TRL is imported, makes vLLM absent for this process only.
"""

from __future__ import annotations

import sys


def hide_vllm() -> None:
    """From here on, this process finds no vLLM: `importlib.util.find_spec("vllm")` is None and
    `import vllm` raises ImportError (a None entry in `sys.modules`). A vLLM already imported stays."""
    sys.modules.setdefault("vllm", None)  # type: ignore[arg-type]
