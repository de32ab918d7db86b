# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The Apptainer backend: exact command lines (pinned here, since no binary exists on these
machines) and, where `apptainer`/`singularity` is installed, a real instance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nemo_gym_prorl.sandbox import Sandbox, SandboxError, SandboxSpec, open_sandbox
from nemo_gym_prorl.sandbox import apptainer as apptainer_mod
from nemo_gym_prorl.sandbox.identity import sandbox_identity
from nemo_gym_prorl.sandbox.runtime import RUNTIME_MOUNT, installed_runtime

_REAL_RUN = subprocess.run


class RecordedRun:
    """Stands in for Apptainer's (and Singularity's) commands; the host's own tools (`rm` of a
    sandbox's directory) still run."""

    def __init__(self, returncode: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.calls: list[list[str]] = []
        self.result = subprocess.CompletedProcess([], returncode, stdout, stderr)

    def __call__(self, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if not any(name in arg for arg in cmd for name in ("apptainer", "singularity")):
            return _REAL_RUN(cmd, **kwargs)
        self.calls.append(list(cmd))
        return self.result


@pytest.fixture
def fake_apptainer(monkeypatch: pytest.MonkeyPatch) -> RecordedRun:
    monkeypatch.setattr(apptainer_mod.shutil, "which", lambda name: f"/opt/bin/{name}")
    recorder = RecordedRun()
    monkeypatch.setattr(apptainer_mod.subprocess, "run", recorder)
    return recorder


def as_sandbox_user(cmd: list[str]) -> list[str]:
    """The Apptainer command line inside its privilege drop: a root service starts Apptainer
    through setpriv as the sandboxes' unprivileged identity, never as root (after the pids
    cgroup's prefix, for a command)."""
    identity = sandbox_identity()
    if identity is None:
        return cmd
    drop = identity.setpriv()
    at = cmd.index(drop[0])
    assert cmd[at : at + len(drop)] == drop and f"--reuid={identity.uid}" in drop and identity.uid != 0
    return cmd[at + len(drop) :]


@pytest.fixture
def image(tmp_path: Path) -> Path:
    sif = tmp_path / "swe.sif"
    sif.write_bytes(b"SIF")
    return sif


def test_instance_start_uses_rootless_isolation_flags(
    fake_apptainer: RecordedRun, image: Path, tmp_path: Path
) -> None:
    sb = open_sandbox(
        SandboxSpec(backend="apptainer", image=str(image), root_dir=tmp_path, python_runtime="none")
    )
    start = as_sandbox_user(fake_apptainer.calls[0])
    assert start[:3] == ["/opt/bin/apptainer", "instance", "start"]
    for flag in ["--containall", "--no-home", "--writable-tmpfs"]:
        assert flag in start
    assert start[start.index("--net") : start.index("--net") + 3] == ["--net", "--network", "none"]
    assert f"{sb.workspace}:/workspace:rw" in start
    assert f"{sb.tmp_dir}:/tmp:rw" in start
    assert "--fakeroot" not in start
    assert start[-2:] == [str(image), sb.instance]
    sb.close()


def test_processes_run_inside_the_instance_with_a_clean_env(
    fake_apptainer: RecordedRun, image: Path, tmp_path: Path
) -> None:
    sb = open_sandbox(SandboxSpec(backend="apptainer", image=str(image), root_dir=tmp_path, env={"A": "1"}))
    cmd = as_sandbox_user(sb.command(["python", "-V"], cwd="/workspace/repo").argv)
    exec_at = cmd.index("exec")
    assert cmd[exec_at - 1] == "/opt/bin/apptainer"
    assert cmd[exec_at + 1 : exec_at + 5] == ["--no-privs", "--cleanenv", "--pwd", "/workspace/repo"]
    assert "A=1" in cmd
    assert f"instance://{sb.instance}" in cmd
    assert cmd[-2:] == ["python", "-V"]
    sb.close()
    assert as_sandbox_user(fake_apptainer.calls[-1]) == [
        "/opt/bin/apptainer",
        "instance",
        "stop",
        sb.instance,
    ]


def test_network_fakeroot_and_read_only_binds(
    fake_apptainer: RecordedRun, image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As an unprivileged service would run it: a root service refuses fakeroot (below).
    monkeypatch.setattr(Sandbox, "_host_identity", lambda self: None)
    monkeypatch.setattr(apptainer_mod.os, "geteuid", lambda: 1000)
    spec = SandboxSpec(
        backend="apptainer",
        image=str(image),
        root_dir=tmp_path,
        network=True,
        fakeroot=True,
        ro_binds=[tmp_path],
    )
    with open_sandbox(spec):
        start = fake_apptainer.calls[0]
    assert "--net" not in start
    assert "--fakeroot" in start
    assert f"{tmp_path}:{tmp_path}:ro" in start
    runtime = installed_runtime()
    assert f"{runtime.host_dir}:{RUNTIME_MOUNT}:ro" in start, "the sandbox runtime, not the project venv"
    assert not any(str(Path(sys.prefix).resolve()) in arg for arg in start)


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is a root service's")
def test_a_root_service_refuses_fakeroot(fake_apptainer: RecordedRun, image: Path, tmp_path: Path) -> None:
    spec = SandboxSpec(backend="apptainer", image=str(image), root_dir=tmp_path, fakeroot=True)
    with pytest.raises(SandboxError, match="fakeroot is refused"):
        open_sandbox(spec)
    assert not list(tmp_path.glob("apptainer-*")), "nothing left behind"


def test_hidden_dirs_are_covered_by_an_empty_read_only_directory(
    fake_apptainer: RecordedRun, image: Path, tmp_path: Path
) -> None:
    spec = SandboxSpec(backend="apptainer", image=str(image), root_dir=tmp_path, python_runtime="none",
                       hidden_dirs=["/r2e_tests", "/testbed/r2e_tests"])  # fmt: skip
    sb = open_sandbox(spec)
    start = as_sandbox_user(fake_apptainer.calls[0])
    empty = sb.empty_dir()
    assert f"{empty}:/r2e_tests:ro" in start and f"{empty}:/testbed/r2e_tests:ro" in start
    assert empty.is_dir() and not any(empty.iterdir())
    sb.close()
    assert not empty.exists()


def test_singularity_is_used_when_apptainer_is_absent(
    monkeypatch: pytest.MonkeyPatch, image: Path, tmp_path: Path
) -> None:
    monkeypatch.setattr(
        apptainer_mod.shutil, "which", lambda n: "/usr/bin/singularity" if n == "singularity" else None
    )
    recorder = RecordedRun()
    monkeypatch.setattr(apptainer_mod.subprocess, "run", recorder)
    with open_sandbox(SandboxSpec(backend="apptainer", image=str(image), root_dir=tmp_path)):
        pass
    assert as_sandbox_user(recorder.calls[0])[0] == "/usr/bin/singularity"


def test_instance_names_carry_their_owner(fake_apptainer: RecordedRun, image: Path, tmp_path: Path) -> None:
    import os

    with open_sandbox(SandboxSpec(backend="apptainer", image=str(image), root_dir=tmp_path)) as sb:
        assert apptainer_mod.owner_of(sb.instance) == os.getpid()
    assert apptainer_mod.owner_of("someone-elses-instance") is None


def test_failed_start_is_a_clear_error_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, image: Path, tmp_path: Path
) -> None:
    monkeypatch.setattr(apptainer_mod.shutil, "which", lambda name: f"/opt/bin/{name}")
    monkeypatch.setattr(
        apptainer_mod.subprocess, "run", RecordedRun(returncode=255, stderr="FATAL: no such image")
    )
    with pytest.raises(SandboxError, match="no such image"):
        open_sandbox(SandboxSpec(backend="apptainer", image=str(image), root_dir=tmp_path))
    assert list(tmp_path.glob("apptainer-*")) == []


def test_missing_binary_or_image_are_clear_errors(
    monkeypatch: pytest.MonkeyPatch, image: Path, tmp_path: Path
) -> None:
    monkeypatch.setattr(apptainer_mod.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="apptainer"):
        open_sandbox(SandboxSpec(backend="apptainer", image=str(image), root_dir=tmp_path))
    monkeypatch.setattr(apptainer_mod.shutil, "which", lambda name: f"/opt/bin/{name}")
    with pytest.raises(SandboxError, match="needs `image`"):
        open_sandbox(SandboxSpec(backend="apptainer", root_dir=tmp_path))
    with pytest.raises(SandboxError, match="not found"):
        open_sandbox(SandboxSpec(backend="apptainer", image=str(tmp_path / "missing.sif"), root_dir=tmp_path))


def test_reaping_stops_only_our_instances_whose_owner_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    listing = {
        "instances": [
            {"instance": f"prorl-{dead.pid}-abc"},  # ours, owner gone: stop
            {"instance": f"prorl-{__import__('os').getpid()}-def"},  # ours, owner alive: keep
            {"instance": "jupyter-of-another-user"},  # not ours: never touch
        ]
    }
    recorder = RecordedRun(stdout=json.dumps(listing))
    monkeypatch.setattr(apptainer_mod.subprocess, "run", recorder)
    stopped = apptainer_mod.reap_orphan_instances("/opt/bin/apptainer")
    assert stopped == [f"prorl-{dead.pid}-abc"]
    assert recorder.calls[1:] == [["/opt/bin/apptainer", "instance", "stop", f"prorl-{dead.pid}-abc"]]


@pytest.mark.apptainer
async def test_real_instance_runs_isolated_commands(tmp_path: Path) -> None:
    image = Path(__import__("os").environ.get("PRORL_TEST_SIF", "docker://busybox"))
    if not str(image).startswith("docker://") and not image.exists():
        pytest.skip("set PRORL_TEST_SIF to a local .sif to run the real Apptainer test")
    with open_sandbox(
        SandboxSpec(backend="apptainer", image=str(image), root_dir=tmp_path, python_runtime="none")
    ) as sb:
        result = await sb.exec("echo hi > /workspace/f && cat /workspace/f")
        assert result.stdout == "hi\n"
        assert (sb.workspace / "f").read_text() == "hi\n"
