# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Publish the policy as it trains: after every k optimizer steps, save the adapter to a
versioned directory and hand it to `publish(adapter_dir, version)`.

The version is the trainer's global step plus `version_offset` (a run that starts from an
adapter published as version N counts on from it; monotone: the service rejects a version that does
not increase). The default `publish` POSTs `{"version": int, "adapter_path": str}` to the
service's `/v1/policy` (the contract in `client.py`): the service loads the adapter on every
backend before new turns use it, so the next rollouts come from the new policy. A publish that
fails raises `PublishError` and stops training: the adapter is already saved, so nothing is
lost, and rollouts must not silently keep coming from a policy the trainer left behind.

The directory holds what `save_pretrained` writes: for a PEFT model the adapter alone
(`adapter_config.json`, `adapter_model.safetensors`), the layout vLLM's `load_lora_adapter`
reads. It appears under its final name only when complete (written aside, then renamed), so a
backend never reads a half-written adapter. Paths are absolute: the service and its backends
resolve them, not this process.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from nemo_gym_prorl.integrations.trl.client import ServiceClient, ServiceError

Publish = Callable[[Path, int], Any]


class PublishError(RuntimeError):
    """The service did not take the new policy; the adapter directory is kept."""


def adapter_dir(root: Path, version: int) -> Path:
    return root / f"policy-v{version:06d}"


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


class HttpPolicyPublisher:
    """The default `publish`: `POST <service>/v1/policy {"version", "adapter_path"}`."""

    def __init__(self, client: ServiceClient) -> None:
        self.client = client

    def __call__(self, path: Path, version: int) -> Any:
        return self.client.publish_policy(version, str(path))


class PublishAdapterCallback(TrainerCallback):
    """Saves and publishes the policy every `every_steps` optimizer steps (main process only).

    Give `publish` (any callable taking the directory and the version) or `client` (the default
    HTTP publisher on that service).
    """

    def __init__(
        self,
        output_dir: str | os.PathLike[str],
        *,
        client: ServiceClient | None = None,
        publish: Publish | None = None,
        every_steps: int = 1,
        version_offset: int = 0,
    ) -> None:
        if every_steps < 1:
            raise ValueError(f"every_steps must be >= 1, got {every_steps}")
        if publish is None:
            if client is None:
                raise ValueError("give `publish` or a service `client` to publish adapters to")
            publish = HttpPolicyPublisher(client)
        self.root = Path(output_dir)
        self.publish = publish
        self.every_steps = every_steps
        self.version_offset = version_offset
        self.published: list[tuple[int, Path]] = []
        self.last_seconds = 0.0

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        # Called once per optimizer step (after gradient accumulation), after the update.
        if state.global_step % self.every_steps or not state.is_world_process_zero:
            return
        if model is None:
            raise PublishError("the trainer passed no model to the callback; nothing to publish")
        started = time.monotonic()
        version = self.version_offset + int(state.global_step)
        path = save_adapter(model, self.root, version)
        try:
            self.publish(path, version)
        except ServiceError as exc:
            raise PublishError(f"policy v{version} ({path}) was not published: {exc}") from exc
        self.published.append((version, path))
        self.last_seconds = time.monotonic() - started
