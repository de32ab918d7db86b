# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Where SWE instances, repositories and images live; how a sandbox for one is made.

Two ways to get an instance's repository at `/testbed` (the SWE-bench convention):
  - offline instances built by `prorl swe build` (bubblewrap, the default): a git repository
    under `${PRORL_HOME:-~/.cache/prorl}/swe/repos/<instance_id>`, copied into a fresh workspace
    that is mounted at `/testbed`; programs come from the host system and the sandbox runtime (`prorl sandbox setup`).
  - images (clusters): `image_template` names one image per instance, e.g. SWE-bench / SWE-Gym
    `.sif` files converted from their Docker images:
    `{sif_dir}/swebench_sweb.eval.x86_64.{instance_id_docker}.sif` (the naming NeMo Gym's
    swe_agents `container_formatter` uses; `instance_id_docker` is the id lower-cased with `__`
    replaced by `_1776_`, as in the Docker image names). With `backend=apptainer` the repository
    is the image's own `/testbed` (writable through Apptainer's tmpfs overlay); with
    `backend=bubblewrap` the template may name a rootfs directory, whose `testbed/` is copied
    into the workspace.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.sandbox import BackendName, SandboxLimits, SandboxSpec

REPO_MOUNT = "/testbed"


def prorl_home() -> Path:
    return Path(os.environ.get("PRORL_HOME") or Path.home() / ".cache" / "prorl").expanduser()


def default_swe_dir() -> Path:
    return prorl_home() / "swe"


class SweConfig(BaseModel):
    backend: BackendName = "bubblewrap"
    cache_dir: Path = Field(
        default_factory=default_swe_dir, description="Sdists, built repos, instances.jsonl."
    )
    image_template: str | None = Field(
        None,
        description="Per-instance image: a .sif (apptainer) or rootfs dir (bubblewrap); fields "
        "{instance_id}, {instance_id_docker}, {sif_dir}, {repo}, {version}.",
    )
    sif_dir: Path | None = Field(
        default_factory=lambda: Path(p) if (p := os.environ.get("PRORL_SIF_DIR")) else None,
        description="Directory of cached .sif images (default $PRORL_SIF_DIR).",
    )
    fakeroot: bool = False
    eval_timeout_s: float = Field(1800.0, gt=0)
    apply_timeout_s: float = Field(120.0, gt=0)
    memory_mb: int = Field(8192, gt=0)
    max_processes: int = Field(512, gt=0)
    max_log_bytes: int = Field(4 * 1024 * 1024, gt=0)

    @property
    def repos_dir(self) -> Path:
        return self.cache_dir / "repos"

    @property
    def sdists_dir(self) -> Path:
        return self.cache_dir / "sdists"

    @property
    def instances_path(self) -> Path:
        return self.cache_dir / "instances.jsonl"

    @property
    def generated_dir(self) -> Path:
        """Generated instances (`prorl swe build --generate`), their baselines and repositories."""
        return self.cache_dir / "generated"

    def resolve_image(self, row: Mapping[str, Any]) -> str | None:
        """The image for this instance, or None to use the offline repository on the host system."""
        if self.image_template:
            iid = str(row.get("instance_id", ""))
            return self.image_template.format(
                instance_id=iid,
                instance_id_docker=iid.replace("__", "_1776_").lower(),
                sif_dir=str(self.sif_dir or ""),
                repo=str(row.get("repo", "")),
                version=str(row.get("version", "")),
            )
        image = row.get("image")
        if isinstance(image, str) and "://" in image:
            # a dataset's own image (`docker://...`): its SIF in sif_dir, else the reference itself
            # for Apptainer (whose backend then names the missing image); bubblewrap cannot use one
            local = self.local_sif(image)
            if local is not None:
                return str(local)
            return image if self.backend == "apptainer" else None
        if isinstance(image, str) and image and Path(image).exists():
            return image
        return None

    def local_sif(self, reference: str) -> Path | None:
        """The SIF of an image reference in `sif_dir`, under NeMo Gym's name
        (`swebench/sweb.eval.x86_64.x:latest` -> `swebench_sweb.eval.x86_64.x.sif`; another tag
        is kept: `namanjain12/sympy_final:<sha>` -> `namanjain12_sympy_final_<sha>.sif`, since
        such images differ only by tag) or the one `apptainer pull` gives it
        (`sweb.eval.x86_64.x_latest.sif`)."""
        if self.sif_dir is None:
            return None
        name = reference.split("://", 1)[1]
        repository, tag = name.rsplit(":", 1) if ":" in name.rsplit("/", 1)[-1] else (name, "latest")
        flat = repository.replace("/", "_")
        for candidate in (
            f"{flat}.sif" if tag == "latest" else f"{flat}_{tag}.sif",
            f"{repository.rsplit('/', 1)[-1]}_{tag}.sif",
        ):
            if (self.sif_dir / candidate).is_file():
                return self.sif_dir / candidate
        return None

    def offline_repo(self, row: Mapping[str, Any]) -> Path:
        recipe = row.get("recipe")
        if isinstance(recipe, Mapping) and recipe.get("generator"):
            # built on first use from the project's sdist and the recorded mutation
            return self.generated_dir / "repos" / str(row.get("instance_id", ""))
        return self.repos_dir / str(row.get("instance_id", ""))

    def sandbox_spec(self, row: Mapping[str, Any], *, agent: bool = False) -> SandboxSpec:
        """The instance's sandbox. The agent's (`agent=True`) shows the row's `hidden_dirs` empty:
        an image that ships its hidden tests (R2E-Gym's /r2e_tests) keeps them for EVAL only."""
        image = self.resolve_image(row)
        hidden = [str(d) for d in row.get("hidden_dirs") or []] if agent else []
        limits = SandboxLimits(wall_time_s=None, memory_mb=self.memory_mb, max_processes=self.max_processes)
        # HOME outside the repository, so tools' dotfiles never end up in the patch.
        env = {"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "GIT_CONFIG_COUNT": "1",
               "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}  # fmt: skip
        if self.backend == "apptainer":
            # The image's own /testbed stays visible; our workspace is scratch space elsewhere.
            return SandboxSpec(backend="apptainer", image=image, workspace_mount="/prorl_workspace", env=env,
                               limits=limits, python_runtime="none", fakeroot=self.fakeroot,
                               hidden_dirs=hidden)  # fmt: skip
        return SandboxSpec(backend=self.backend, image=image, workspace_mount=REPO_MOUNT, env=env, limits=limits,
                           python_runtime="sandbox" if image is None else "none", hidden_dirs=hidden)  # fmt: skip

    def repo_source(self, row: Mapping[str, Any]) -> Path | None:
        """Host directory to copy into the workspace (None: the repository is in the image)."""
        if self.backend == "apptainer":
            return None
        image = self.resolve_image(row)
        if image is not None:
            return Path(image) / REPO_MOUNT.lstrip("/")
        return self.offline_repo(row)
