# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""SWE: a repository at /testbed, a problem statement, bash and editor tools; the result is the
git diff at the end of RUN, graded in a fresh sandbox (see `evaluate.py`)."""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.pipeline.handler import InvalidInstanceError
from nemo_gym_prorl.sandbox import Sandbox, SandboxError, SandboxSpec
from nemo_gym_prorl.sandbox.threads import in_sandbox_thread
from nemo_gym_prorl.tasks.base import BASH, EDITOR, EvalOutcome, TaskDomain
from nemo_gym_prorl.tasks.swe.build import ensure_built, load_instances, recipe_ids
from nemo_gym_prorl.tasks.swe.config import REPO_MOUNT, SweConfig
from nemo_gym_prorl.tasks.swe.evaluate import evaluate_patch, extract_patch
from nemo_gym_prorl.tasks.swe.materialize import ensure_repo
from nemo_gym_prorl.tasks.swe.store import load_generated

log = logging.getLogger(__name__)

SWE_SYSTEM = (
    "You are a software engineer fixing an issue in the repository at /testbed. Use the `bash` tool "
    "to explore and run code and the `editor` tool to view and change files. Make the smallest "
    "change that resolves the issue in the library code; do not modify the existing tests. Your "
    "changes to /testbed are collected as a patch when you finish."
)


# What a SWE-bench row carries for EVAL to run without the built cache.
FULL_ROW_FIELDS = ("eval_script", "FAIL_TO_PASS", "PASS_TO_PASS", "base_commit")


def _is_full_row(row: Mapping[str, Any]) -> bool:
    return all(k in row for k in FULL_ROW_FIELDS)


class SweTask(TaskDomain):
    name = "swe"
    data_sources = ("prorl_swe", "swe", "swe-bench", "swe-gym", "r2e-gym", "swe-smith")
    default_tools = (BASH, EDITOR)
    # EVAL applies the RUN's patch in a fresh sandbox; the RUN sandbox is not needed.

    def __init__(self, config: SweConfig | None = None) -> None:
        self.config = config or SweConfig()
        self._instances: dict[str, dict[str, Any]] | None = None

    def sandbox_spec(self, row: Mapping[str, Any], base: SandboxSpec | None = None) -> SandboxSpec:
        return self.config.sandbox_spec(row, agent=True)

    async def setup_workspace(self, sandbox: Sandbox, row: Mapping[str, Any]) -> dict[str, Any]:
        """Put the instance's repository at /testbed (copied from the offline build or a rootfs;
        already there in an Apptainer image) and check it is at `base_commit`."""
        await self.build_if_needed(row)
        row = self.resolve_instance(row)
        source = self.config.repo_source(row)
        if source is not None:
            await asyncio.to_thread(ensure_repo, self.config, row)  # a generated instance's, on first use
            if not (source / ".git").is_dir():
                log.warning("the repository of %s is missing at %s", row.get("instance_id"), source)
                raise SandboxError(
                    f"the repository of {row.get('instance_id')} is not built on this server: run `prorl swe build`"
                )
            await in_sandbox_thread(sandbox.copy_into_workspace, source)
        base = str(row.get("base_commit") or "")
        # SWE-bench's images commit their environment set-up on top of base_commit ("SWE-bench"),
        # so the repository is at base_commit or a descendant of it.
        check = f" && git merge-base --is-ancestor {shlex.quote(base)} HEAD" if base else ""
        res = await sandbox.exec(
            ["/bin/sh", "-c", f"cd {REPO_MOUNT} && git rev-parse HEAD{check}"], timeout=60
        )
        head = res.stdout.strip()
        if not res.ok:
            raise SandboxError(
                f"/testbed is not at base_commit {base[:12]} or a descendant (HEAD {head[:12]!r}: {res.stderr[-300:]})"
            )
        return {"cwd": REPO_MOUNT, "base_commit": head}

    async def collect_artifacts(self, sandbox: Sandbox, row: Mapping[str, Any]) -> dict[str, Any]:
        row = self.resolve_instance(row)
        patch, error = await extract_patch(
            sandbox, str(row.get("base_commit") or "HEAD"), exclude=row.get("patch_exclude") or ()
        )
        return {"git_patch": patch, "patch_error": error}

    def check_row(self, row: Mapping[str, Any]) -> None:
        """A full SWE-bench row, the id of an instance this machine has built or generated (read
        from the cache), or of one it can build (a committed recipe: built at INIT, not here)."""
        super().check_row(row)
        if _is_full_row(row):
            return
        iid = row.get("instance_id")
        if not isinstance(iid, str) or not iid.strip():
            raise InvalidInstanceError(
                "instance_id",
                "names no SWE instance: give the id of a built instance (`prorl swe list`) or a full "
                f"SWE-bench row ({', '.join(FULL_ROW_FIELDS)})",
            )
        if iid in recipe_ids():
            return
        try:
            self.resolve_instance(row)
        except LookupError as exc:
            raise InvalidInstanceError("instance_id", str(exc)) from None

    async def build_if_needed(self, row: Mapping[str, Any]) -> None:
        """A recipe's instance not built yet is built now (once per cache, whoever asks first)."""
        iid = row.get("instance_id")
        if _is_full_row(row) or iid not in recipe_ids():
            return
        try:
            self.resolve_instance(row)
        except LookupError:
            await ensure_built(self.config, only=[str(iid)])
            self._instances = None

    def resolve_instance(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A compact row (instance_id + what the agent sees) is completed from the built cache
        (`prorl swe build`); a full SWE-bench row is used as it is."""
        if _is_full_row(row):
            return dict(row)
        iid = row.get("instance_id")
        if self._instances is None or iid not in self._instances:
            built = [*load_instances(self.config), *load_generated(self.config)]
            self._instances = {i["instance_id"]: i for i in built}
        if iid not in self._instances:
            # Answered to whoever sent the row: where the server keeps its instances is the log's.
            log.info("instance %r is in neither %s nor the generated store", iid, self.config.instances_path)
            raise LookupError(
                f"instance {iid!r} is neither a full SWE-bench row nor an instance this server has built "
                "or generated (run `prorl swe build`, or `prorl swe build --generate`)"
            )
        return {**self._instances[iid], **{k: v for k, v in row.items() if v is not None}}

    async def evaluate(
        self, row: Mapping[str, Any], final_text: str | None, artifacts: Mapping[str, Any] | None = None
    ) -> EvalOutcome:
        patch = (artifacts or {}).get("git_patch")
        if patch is None:
            patch = row.get("model_patch")  # a prediction given directly (SWE-bench style)
        if artifacts and artifacts.get("patch_error"):
            return EvalOutcome.infra_failure(f"could not extract the patch: {artifacts['patch_error']}")
        try:
            instance = self.resolve_instance(row)
        except LookupError as exc:
            if "instance_id" not in row:
                return EvalOutcome.zero("bad_row", "row has no instance_id")
            return EvalOutcome.infra_failure(str(exc))
        return await evaluate_patch(self.config, instance, patch if isinstance(patch, str) else None)
