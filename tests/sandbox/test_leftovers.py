# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a killed sandbox owner leaves is removed by the next process that opens a sandbox on the
same root, and only that: a live owner's sandboxes, and a dead one's that ran on another machine
or in another pid namespace, stay."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nemo_gym_prorl.sandbox import SandboxSpec, leftovers, open_sandbox
from nemo_gym_prorl.sandbox.leftovers import OWNER_FILE, dead_owners_names, here, remove_dead_owners_leftovers

pytestmark = pytest.mark.bwrap

DEAD = 2**22 + 7  # above pid_max's default: no process has it


def test_a_name_is_a_dead_owners_only_when_its_pid_is_gone() -> None:
    names = [
        f"{DEAD}-bubblewrap-0123456789ab",
        "1-bubblewrap-ba9876543210",
        "not-ours",
        "bubblewrap-0123456789ab",
    ]
    assert dead_owners_names(names) == [f"{DEAD}-bubblewrap-0123456789ab"]
    # A previous owner's pid now alive is another process's: its sandboxes stay.
    assert dead_owners_names(names, [1]) == [f"{DEAD}-bubblewrap-0123456789ab"]
    # This process's own pid is dead only when a journal says its dead service had it
    # (a restarted container gives the new service the old one's pid).
    own = f"{os.getpid()}-bubblewrap-00000000beef"
    assert dead_owners_names([own]) == []
    assert dead_owners_names([own], [os.getpid()]) == [own]


def _dead_dir(root: Path, sandbox_id: str, owner: str | None) -> Path:
    path = root / f"{DEAD}-{sandbox_id}"
    (path / "workspace").mkdir(parents=True)
    (path / "workspace" / "repo.txt").write_text("a repository copy")
    if owner is not None:
        (path / OWNER_FILE).write_text(owner)
    return path


def test_only_a_dead_owners_directories_that_ran_here_are_removed(tmp_path: Path) -> None:
    ours = _dead_dir(tmp_path, "0123456789ab", here())
    elsewhere = _dead_dir(tmp_path, "ba9876543210", "another-boot 4026531836")  # a shared root
    unmarked = _dead_dir(tmp_path, "00000000cafe", None)
    live = tmp_path / f"1-{'f' * 12}"
    live.mkdir()
    (live / OWNER_FILE).write_text(here())
    done = remove_dead_owners_leftovers(tmp_path)
    assert done.removed_dirs == [ours.name]
    assert not ours.exists() and elsewhere.is_dir() and unmarked.is_dir() and live.is_dir()
    # A journal's dead service: its directories go wherever its pids were.
    assert sorted(remove_dead_owners_leftovers(tmp_path, [DEAD]).removed_dirs) == sorted(
        [elsewhere.name, unmarked.name]
    )


async def test_a_killed_owners_sandbox_is_removed_by_the_next_open_on_its_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner_code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from nemo_gym_prorl.sandbox import SandboxSpec, open_sandbox
        sb = open_sandbox(SandboxSpec(root_dir=Path({str(tmp_path)!r})))
        (sb.workspace / "work.txt").write_text("left behind")
        print(sb.workspace.parent, sb._cgroup.paths[0] if sb._cgroup else "", flush=True)
        time.sleep(1000)
    """)
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        left_dir, _, left_cgroup = owner.stdout.readline().strip().partition(" ")
        assert Path(left_dir).is_dir() and Path(left_dir).name.startswith(f"{owner.pid}-")
    finally:
        owner.kill()
        owner.wait()
    assert Path(left_dir).is_dir(), "kill -9 leaves the directory"
    monkeypatch.setattr(leftovers, "_last_reap", {})  # as in a process that has not looked yet
    async with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sb:
        assert [p.name for p in tmp_path.iterdir()] == [sb.workspace.parent.name]
    assert not left_cgroup or not Path(left_cgroup).exists()  # this open or another worker's


def test_a_process_looks_again_only_after_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked: list[Path] = []
    monkeypatch.setattr(leftovers, "_last_reap", {})
    monkeypatch.setattr(leftovers, "_listing", lambda path: looked.append(path) or [])
    clock = iter([100.0, 100.5, 101.2])
    monkeypatch.setattr(leftovers.time, "monotonic", lambda: next(clock))
    for _ in range(3):
        leftovers.reap_now_and_then(tmp_path)
    assert [path for path in looked if path == tmp_path] == [tmp_path, tmp_path]  # at 100.0 and 101.2


def test_a_process_that_exits_with_a_sandbox_still_open_leaves_nothing_of_it(tmp_path: Path) -> None:
    # As a worker process whose loop ended while a sandbox thread was still opening one for a
    # cancelled rollout: nobody is left to close it, and it has no process for a finaliser to see.
    owner_code = textwrap.dedent(f"""
        from pathlib import Path
        from nemo_gym_prorl.sandbox import SandboxSpec, open_sandbox
        kept = open_sandbox(SandboxSpec(root_dir=Path({str(tmp_path)!r})))
        (kept.workspace / "work.txt").write_text("never closed")
        print(kept.workspace.parent, *(kept._cgroup.paths if kept._cgroup else []), flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", owner_code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    left_dir, *left_cgroups = done.stdout.split()
    assert Path(left_dir).parent == tmp_path and left_cgroups, done.stdout
    assert not Path(left_dir).exists(), "its directory went with it"
    assert not [c for c in left_cgroups if Path(c).exists()], "and its cgroups"
    assert "still there as it exited: removed" in done.stderr
