# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl demo` (`make demo`): the whole system on the embedded defaults, in a few minutes.

`run.py` is the orchestration (`run_demo`): the stack up, a DAPO batch through the agent's
rollout API, the reports, the stack down, in order on a signal (`shutdown.py`). `rows.py` says
what it runs; `report.py`, `summary.py`, `html_report.py` and `verdict.py` what it found.
"""

from nemo_gym_prorl.demo.run import run_demo

__all__ = ["run_demo"]
