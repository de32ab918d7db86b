# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""examples/slurm/prorl_ray.sub when its Ray head fails to start: it is started again (a loaded
node can miss the 30 s `ray start` gives its raylet), and the job gives up only after
`HEAD_ATTEMPTS` starts, saying so. A head whose GCS answers but whose raylet never registers
has not started.

The recipe runs as written; `srun`, `scontrol`, `curl` and the venv's `ray`, `python` and
`prorl` are small stand-ins that record what they were asked, the head's failing the first
`FAIL_HEAD_STARTS` times. The recipe on a real Slurm with a real Ray is
`test_slurm_recipe.py`'s."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "examples" / "slurm" / "prorl_ray.sub"

STAND_INS = {
    # srun: its options dropped, the command run in its place, its output where --output says.
    "bin/srun": """#!/bin/bash
out=/dev/stdout; append=0
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in --output=*) out=${1#--output=} ;; --open-mode=append) append=1 ;; -w) shift ;; esac
  shift
done
if (( append )); then exec "$@" >>"$out" 2>&1; else exec "$@" >"$out" 2>&1; fi
""",
    "bin/scontrol": "#!/bin/bash\necho node1\n",
    # curl: the service answers once `prorl serve` is running (it has recorded its arguments).
    "bin/curl": "#!/bin/bash\n[[ -e $STATE/serve_args ]]\n",
    # ray start as Ray does it: the GCS answers `ray status` at once, then the raylet registers
    # ("Ray runtime started.") or, the first FAIL_HEAD_STARTS times, misses its 30 s and the
    # start fails; a started head serves until signalled.
    "venv/bin/ray": """#!/bin/bash
case $1 in
  start)
    n=$(( $(cat "$STATE/head_starts" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$STATE/head_starts"
    touch "$STATE/gcs_up"
    if (( n <= FAIL_HEAD_STARTS )); then
      sleep 3; echo "Exception: The current node timed out during startup."; rm -f "$STATE/gcs_up"; exit 1
    fi
    echo $$ >> "$STATE/pids"; echo "Ray runtime started."
    trap 'rm -f "$STATE/gcs_up"; exit 0' TERM
    while true; do sleep 0.1; done ;;
  status) [[ -e $STATE/gcs_up ]] ;;
esac
""",
    "venv/bin/python": """#!/bin/bash
case $2 in *secrets*) echo token ;; *ray.nodes*) echo 1 ;; esac
""",
    "venv/bin/prorl": """#!/bin/bash
echo $$ >> "$STATE/pids"; echo "$@" > "$STATE/serve_args.part"; mv "$STATE/serve_args.part" "$STATE/serve_args"
trap 'exit 0' TERM
while true; do sleep 0.1; done
""",
}


def run_recipe(tmp_path: Path, *, fail_head_starts: int, **settings: str) -> subprocess.CompletedProcess[str]:
    for name, text in STAND_INS.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    env = {
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "STATE": str(state),
        "FAIL_HEAD_STARTS": str(fail_head_starts),
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NODELIST": "node1",
        "PRORL_DIR": str(REPO),
        "VENV": str(tmp_path / "venv"),
        "SANDBOX": "bubblewrap",
        "COMMAND": f"echo trained > {state / 'command_ran'}",
        **settings,
    }
    return subprocess.run(["bash", str(RECIPE)], env=env, capture_output=True, text=True, timeout=60)


def left_running(state: Path) -> list[int]:
    pids = (state / "pids").read_text().split() if (state / "pids").exists() else []
    return [int(p) for p in pids if psutil.pid_exists(int(p))]


def test_a_head_that_fails_once_is_started_again_and_the_job_goes_on(tmp_path: Path) -> None:
    done = run_recipe(tmp_path, fail_head_starts=1)

    assert done.returncode == 0, done.stdout + done.stderr
    state = tmp_path / "state"
    assert (state / "head_starts").read_text().strip() == "2"
    assert "the Ray head failed to start (attempt 1 of 2); starting it again" in done.stderr
    assert "executor.kind=ray" in (state / "serve_args").read_text()
    assert (state / "command_ran").read_text() == "trained\n"
    log = (tmp_path / "7-logs" / "ray-head.log").read_text()
    assert "timed out during startup" in log, "the failed start's log is kept, not overwritten"
    assert left_running(state) == []


def test_a_head_that_fails_every_start_ends_the_job_with_the_reason(tmp_path: Path) -> None:
    done = run_recipe(tmp_path, fail_head_starts=2)

    assert done.returncode == 1
    state = tmp_path / "state"
    assert (state / "head_starts").read_text().strip() == "2"
    assert "[prorl] the Ray head failed 2 time(s): see" in done.stderr
    assert not (state / "serve_args").exists(), "no service is started without a head"
    assert left_running(state) == []


def test_head_attempts_sets_how_many_starts_the_job_makes(tmp_path: Path) -> None:
    done = run_recipe(tmp_path, fail_head_starts=1, HEAD_ATTEMPTS="1")

    assert done.returncode == 1
    assert (tmp_path / "state" / "head_starts").read_text().strip() == "1"
    assert "[prorl] the Ray head failed 1 time(s)" in done.stderr
