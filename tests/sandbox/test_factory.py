# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Sandbox backends are a registry: the built-ins by name, a user's own by import target in
`SandboxSpec.backend`, anything else refused at validation, naming the known backends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from nemo_gym_prorl.registry import RegistryError
from nemo_gym_prorl.sandbox import BACKENDS, SandboxSpec, open_sandbox


def test_the_built_in_backends_are_registered_by_name() -> None:
    assert BACKENDS.names() == ["apptainer", "bubblewrap", "local_unsafe"]


def test_an_unknown_backend_fails_validation_naming_the_known_ones() -> None:
    with pytest.raises(
        ValidationError, match=r"unknown sandbox backend 'docker'; choose one of \['apptainer', "
    ):
        SandboxSpec(backend="docker")


def test_the_spec_module_alone_knows_the_built_in_backends() -> None:
    # The table is filled by sandbox.factory; importing only the spec must not find it empty.
    code = (
        "from nemo_gym_prorl.sandbox.spec import SandboxSpec; print(SandboxSpec(backend='apptainer').backend)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "apptainer"


async def test_a_backend_of_ones_own_is_named_by_import_target(tmp_path: Path) -> None:
    spec = SandboxSpec(backend="support.extensions:ScratchSandbox", root_dir=tmp_path)
    with open_sandbox(spec) as sandbox:
        assert sandbox.backend == "scratch"
        assert (await sandbox.exec("echo hi")).stdout == "hi\n"


def test_a_factory_that_builds_no_sandbox_is_refused() -> None:
    with pytest.raises(RegistryError, match="built a str, not a Sandbox"):
        open_sandbox(SandboxSpec(), backend="support.extensions:wrong_product")
