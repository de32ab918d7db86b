# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl model setup` runs its independent steps (the import check, the conversion) side by side:
each is reported as it ends, and the first failure stops the rest and says which step and why."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.llm.embedded.setup import SetupError, _import_check, _run_side_by_side, _Step


def step(tmp_path: Path, what: str, script: str) -> _Step:
    return _Step(["bash", "-c", script], tmp_path / f"{what}.log", what)


def test_steps_run_at_once_and_each_is_reported_when_it_ends(tmp_path: Path) -> None:
    flag = tmp_path / "second-started"
    said: list[str] = []
    # The first step ends well only once the second has started: one after the other, it would fail.
    waits = step(
        tmp_path, "waits", f"for _ in $(seq 300); do [ -f {flag} ] && exit 0; sleep 0.1; done; exit 9"
    )
    _run_side_by_side([waits, step(tmp_path, "starts", f"touch {flag}")], said.append)
    assert sorted(line.split(":")[0].strip() for line in said if ": ok" in line) == ["starts", "waits"]
    assert (tmp_path / "waits.log").read_text().startswith("\n$ bash -c")


def test_the_first_failure_stops_the_other_steps_and_names_itself(tmp_path: Path) -> None:
    pid_file = tmp_path / "slow.pid"
    slow = step(tmp_path, "slow", f"echo $$ > {pid_file}; exec sleep 120")
    broken = step(tmp_path, "broken", f"while [ ! -s {pid_file} ]; do sleep 0.05; done; echo boom; exit 3")
    with pytest.raises(SetupError, match=r"broken failed \(exit 3\)[\s\S]*boom"):
        _run_side_by_side([slow, broken], lambda _: None)
    pid = int(pid_file.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_no_steps_is_nothing_to_do(tmp_path: Path) -> None:
    said: list[str] = []
    _run_side_by_side([], said.append)
    assert said == []


def test_the_import_check_writes_bytecode_of_what_the_server_imports_whatever_the_machine_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the venv is installed without --compile-bytecode: this import is what compiles it
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    check = _import_check(EmbeddedLayout(home=tmp_path))
    assert check.env is not None and "PYTHONDONTWRITEBYTECODE" not in check.env
    imported = check.cmd[-1].removeprefix("import ").split(", ")
    assert {"vllm.entrypoints.openai.api_server", "vllm.v1.engine.core", "trl"} <= set(imported)
