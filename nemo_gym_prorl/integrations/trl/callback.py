# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Publish the policy as it trains: after every k optimizer steps, save it to a versioned
directory and hand it to `publish(path, version)`.

The version is the trainer's global step plus `version_offset` (a run that starts from an
adapter published as version N counts on from it; monotone: the service rejects a version that does
not increase). The adapter is always saved (`policy-v<version>`: what `save_pretrained` writes
for a PEFT model, the layout vLLM's `load_lora_adapter` reads, and what a restarted trainer
starts from). With `form="weights"` the policy is published as full weights: the adapter merged
into the model it trains (`weights-v<version>`, `merge.write_merged`), which the backends reload
in place; the previous step's checkpoint is then removed (its adapter stays), so a run keeps one.

The default `publish` POSTs the version and the path to the service's `/v1/policy` (the contract
in `client.py`): the service loads the policy on every backend before new turns use it, so the
next rollouts come from it. A publish that fails raises `PublishError` and stops training: the
adapter is already saved, so nothing is lost, and rollouts must not silently keep coming from a
policy the trainer left behind. Directories appear under their final names only when complete
(written aside, then renamed), so a backend never reads a half-written policy. Paths are
absolute: the service and its backends resolve them, not this process.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from nemo_gym_prorl.integrations.trl.client import ServiceClient, ServiceError
from nemo_gym_prorl.integrations.trl.jobs import PublishForm, adapter_dir, weights_dir
from nemo_gym_prorl.integrations.trl.merge import write_merged

Publish = Callable[[Path, int], Any]


class PublishError(RuntimeError):
    """The service did not take the new policy; the adapter directory is kept."""


def save_adapter(model: Any, root: Path, version: int) -> Path:
    """Write `model.save_pretrained` output to `root/policy-v<version>`, atomically."""
    final = adapter_dir(root, version).resolve()
    staging = final.with_name(f".{final.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(staging))
    if final.exists():  # a resumed run re-saving a step it already published
        shutil.rmtree(final)
    os.replace(staging, final)
    return final


@dataclass(frozen=True)
class PublishedPolicy:
    version: int
    adapter_path: Path
    weights_path: Path | None = None

    def fields(self) -> dict[str, Any]:
        """As a `step` or `done` event carries it."""
        return {
            "version": self.version,
            "adapter_path": str(self.adapter_path),
            "weights_path": str(self.weights_path) if self.weights_path else None,
        }


class HttpPolicyPublisher:
    """The default `publish`: `POST <service>/v1/policy {"version", "adapter_path" | "weights_path"}`."""

    def __init__(self, client: ServiceClient, form: PublishForm = "adapter") -> None:
        self.client = client
        self.form = form

    def __call__(self, path: Path, version: int) -> Any:
        if self.form == "weights":
            return self.client.publish_policy(version, weights_path=str(path))
        return self.client.publish_policy(version, str(path))


class PublishPolicyCallback(TrainerCallback):
    """Saves and publishes the policy every `every_steps` optimizer steps (main process only).

    Give `publish` (any callable taking the directory and the version) or `client` (the default
    HTTP publisher on that service). `form="weights"` needs `model_dir`, the model the adapter
    trains over. `skip`: asked at each step's end; True when the step updated nothing (`no_teach`),
    which then saves and publishes nothing: its version is never served (versions stay the
    trainer's step plus the offset, so a later step's is still higher than every earlier one's).
    """

    def __init__(
        self,
        output_dir: str | os.PathLike[str],
        *,
        client: ServiceClient | None = None,
        publish: Publish | None = None,
        every_steps: int = 1,
        version_offset: int = 0,
        form: PublishForm = "adapter",
        model_dir: str | os.PathLike[str] | None = None,
        skip: Callable[[], bool] | None = None,
    ) -> None:
        if every_steps < 1:
            raise ValueError(f"every_steps must be >= 1, got {every_steps}")
        if form == "weights" and model_dir is None:
            raise ValueError("publishing full weights needs model_dir, the model the adapter trains over")
        if publish is None:
            if client is None:
                raise ValueError("give `publish` or a service `client` to publish policies to")
            publish = HttpPolicyPublisher(client, form)
        self.root = Path(output_dir)
        self.publish = publish
        self.every_steps = every_steps
        self.version_offset = version_offset
        self.form = form
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.skip = skip
        self.published: list[PublishedPolicy] = []
        self.last_seconds = 0.0

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        # Called once per optimizer step (after gradient accumulation), after the update.
        self.last_seconds = 0.0
        if state.global_step % self.every_steps or not state.is_world_process_zero:
            return
        if self.skip is not None and self.skip():
            return
        if model is None:
            raise PublishError("the trainer passed no model to the callback; nothing to publish")
        started = time.monotonic()
        version = self.version_offset + int(state.global_step)
        adapter = save_adapter(model, self.root, version)
        weights = None
        if self.form == "weights":
            assert self.model_dir is not None  # checked in __init__
            weights = write_merged(model, self.model_dir, weights_dir(self.root, version).resolve())
        policy = PublishedPolicy(version, adapter, weights)
        try:
            self.publish(policy.weights_path or policy.adapter_path, version)
        except ServiceError as exc:
            raise PublishError(f"policy v{version} ({policy.fields()}) was not published: {exc}") from exc
        previous = self.published[-1].weights_path if self.published else None
        if previous is not None and previous != policy.weights_path:
            shutil.rmtree(previous, ignore_errors=True)  # served nowhere now; its adapter is kept
        self.published.append(policy)
        self.last_seconds = time.monotonic() - started
