# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl swe verify`: every instance through the real EVAL path (`evaluate_patch`: fresh
sandbox, repository at /testbed, patch applied, eval script, swebench's grading).

Per instance: the gold patch must resolve it; the empty patch must not; and a no-op patch (one
new file outside the code, so the tests do run on the unfixed base) must leave it unresolved
with every FAIL_TO_PASS test failing and every PASS_TO_PASS test passing, i.e. the recorded
test lists are exactly what the eval sees."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.tasks.swe.config import SweConfig
from nemo_gym_prorl.tasks.swe.evaluate import evaluate_patch

NOOP_PATCH = """diff --git a/.prorl-noop b/.prorl-noop
new file mode 100644
--- /dev/null
+++ b/.prorl-noop
@@ -0,0 +1 @@
+no-op
"""


class InstanceCheck(BaseModel):
    instance_id: str
    gold_resolved: bool
    empty_unresolved: bool
    base_exact: bool = Field(description="On the base: every FAIL_TO_PASS fails, every PASS_TO_PASS passes.")
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.gold_resolved and self.empty_unresolved and self.base_exact


class VerifyReport(BaseModel):
    instances: int
    gold_resolved: int
    empty_unresolved: int
    base_exact: int
    ok: int
    seconds: float
    failed: list[InstanceCheck]


async def check_instance(config: SweConfig, row: dict[str, Any]) -> InstanceCheck:
    gold = await evaluate_patch(config, row, row["patch"])
    empty = await evaluate_patch(config, row, "")
    base = await evaluate_patch(config, row, NOOP_PATCH)
    status = base.report.get("tests_status") or {}
    f2p, p2p = status.get("FAIL_TO_PASS") or {}, status.get("PASS_TO_PASS") or {}
    exact = (
        not base.resolved
        and len(f2p.get("failure", [])) == len(row["FAIL_TO_PASS"])
        and len(p2p.get("success", [])) == len(row["PASS_TO_PASS"])
    )
    detail = "" if gold.resolved and exact else (
        f"gold: {gold.reason}; base: {base.reason}, FAIL_TO_PASS passing {f2p.get('success', [])[:3]}, "
        f"PASS_TO_PASS failing {p2p.get('failure', [])[:3]}"
    )  # fmt: skip
    return InstanceCheck(instance_id=row["instance_id"], gold_resolved=bool(gold.resolved),
                         empty_unresolved=not empty.resolved, base_exact=exact, detail=detail)  # fmt: skip


async def verify_instances(
    config: SweConfig,
    rows: list[dict[str, Any]],
    workers: int | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> VerifyReport:
    loop = asyncio.get_running_loop()
    started = loop.time()
    semaphore = asyncio.Semaphore(workers or os.cpu_count() or 1)
    done = 0

    async def one(row: dict[str, Any]) -> InstanceCheck:
        nonlocal done
        async with semaphore:
            check = await check_instance(config, row)
        done += 1
        if not check.ok or done % 25 == 0:
            say(f"  {done}/{len(rows)} {check.instance_id}: {'ok' if check.ok else check.detail}")
        return check

    checks = await asyncio.gather(*(one(r) for r in rows))
    return VerifyReport(
        instances=len(checks),
        gold_resolved=sum(c.gold_resolved for c in checks),
        empty_unresolved=sum(c.empty_unresolved for c in checks),
        base_exact=sum(c.base_exact for c in checks),
        ok=sum(c.ok for c in checks),
        seconds=round(loop.time() - started, 2),
        failed=[c for c in checks if not c.ok],
    )
