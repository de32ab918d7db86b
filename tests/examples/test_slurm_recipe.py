# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""examples/slurm/prorl_ray.sub under a real one-node Slurm (Debian's `slurm-wlm` and `munge`):
the test starts munged, slurmctld and slurmd of its own from a generated slurm.conf, submits the
recipe with `sbatch` with a COMMAND that sends rollouts through `/process` (the trainer-style
client, against the embedded vLLM), waits for the job to be COMPLETED, checks the rollouts came
back and that nothing the job started is left running, then stops its Slurm by pid.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from nemo_gym_prorl.integrations.gym.launcher import free_port
from nemo_gym_prorl.llm.embedded import VLLMServer, write_key_file
from nemo_gym_prorl.sandbox.leftovers import sandbox_dirs
from ray_local import START_NICE

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.bwrap,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
]  # the first vLLM start is counted

REPO = Path(__file__).resolve().parents[2]
SBIN = "/usr/sbin:/sbin"
SAMPLES = 2


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=SBIN)


def _why_not() -> str | None:
    missing = [
        t for t in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo") if _tool(t) is None
    ]
    if missing:
        return (
            f"no {', '.join(missing)}: install Debian's slurm-wlm and munge "
            "(scripts/bootstrap.sh does as root: 'apt-get install slurm-wlm munge')"
        )
    if os.geteuid() != 0:
        return "a one-node Slurm of the test's own needs root (slurmd starts jobs as their user)"
    return None


pytestmark.append(pytest.mark.skipif(_why_not() is not None, reason=_why_not() or ""))


@dataclass
class Slurm:
    root: Path
    env: dict[str, str]
    daemons: list[subprocess.Popen[bytes]]
    started: float  # when its first daemon started (epoch seconds)

    def run(self, *cmd: str, timeout: float = 30) -> str:
        done = subprocess.run(
            [_tool(cmd[0]) or cmd[0], *cmd[1:]], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"{' '.join(cmd)}: {done.stdout}{done.stderr}"
        return done.stdout

    def job_state(self, job_id: str) -> str:
        shown = self.run("scontrol", "show", "job", job_id)
        match = re.search(r"JobState=(\S+)", shown)
        assert match, shown
        return match.group(1)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(self.root.glob("*.log"))
        )


def _slurm_conf(root: Path, node: str, cpus: int) -> str:
    return f"""\
ClusterName=prorltest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={root}/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
PlugStackConfig={root}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
LaunchParameters=use_interactive_step
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
KillWait=10
InactiveLimit=0
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=prorltest Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _raise_priority() -> None:
    """The job's processes inherit slurmd's priority: raised, as `benchmarks/ray_local.py` does,
    so that on a machine shared with busy neighbours Ray's agents start within the raylet's
    fixed 15 s window."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, START_NICE)


def _stop(daemons: list[subprocess.Popen[bytes]]) -> None:
    for daemon in reversed(daemons):
        if daemon.poll() is None:
            daemon.terminate()
    for daemon in reversed(daemons):
        try:
            daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


@pytest.fixture
def slurm() -> Iterator[Slurm]:
    """munged + slurmctld + slurmd of this test only, in the foreground (so each is its Popen's
    pid), configured in a private directory; stopped by pid at the end."""
    root = Path(tempfile.mkdtemp(prefix="prorl-slurm-", dir="/tmp"))  # short: socket paths
    for sub in ("state", "spool", "raytmp", "logs"):
        (root / sub).mkdir()
    (root / "plugstack.conf").write_text("")
    key = root / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    node = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text(_slurm_conf(root, node, os.cpu_count() or 1))
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": f"{os.environ['PATH']}:{SBIN}"}
    logs = (root / "daemons.log").open("w")
    daemons: list[subprocess.Popen[bytes]] = []
    env_slurm = Slurm(root=root, env=env, daemons=daemons, started=time.time() - 1)
    try:
        daemons.append(
            subprocess.Popen(
                [
                    _tool("munged") or "munged",
                    "-F",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={root}/munge.sock",
                    f"--pid-file={root}/munged.pid",
                    f"--log-file={root}/munged.log",
                    f"--seed-file={root}/munged.seed",
                ],
                stdout=logs,
                stderr=subprocess.STDOUT,
            )
        )
        deadline = time.monotonic() + 20
        while not (root / "munge.sock").exists():
            assert daemons[0].poll() is None and time.monotonic() < deadline, env_slurm.logs()
            time.sleep(0.1)
        for daemon in ("slurmctld", "slurmd"):
            cmd = [_tool(daemon) or daemon, "-D", "-f", str(conf)] + (
                ["-c", "-i"] if daemon == "slurmctld" else []
            )
            daemons.append(
                subprocess.Popen(
                    cmd, env=env, stdout=logs, stderr=subprocess.STDOUT, preexec_fn=_raise_priority
                )
            )
        deadline = time.monotonic() + 60
        while True:
            assert all(d.poll() is None for d in daemons), env_slurm.logs()
            state = subprocess.run(
                [_tool("sinfo") or "sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True
            ).stdout.strip()
            if state == "idle":
                break
            assert time.monotonic() < deadline, f"the Slurm node is not idle: {state!r}\n{env_slurm.logs()}"
            time.sleep(0.5)
        yield env_slurm
    finally:
        # A job still running (a failed or timed-out test) is cancelled, and whatever of it is
        # left is ended by pid, before the daemons stop.
        with contextlib.suppress(Exception):
            subprocess.run([_tool("scancel") or "scancel", "--partition=prorltest"], env=env, timeout=10)
        leftovers = _leftovers(env_slurm)
        for proc in psutil.wait_procs(leftovers, timeout=20)[1]:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        _stop(daemons)
        logs.close()
        shutil.rmtree(root, ignore_errors=True)


def _leftovers(slurm: Slurm) -> list[psutil.Process]:
    """What the test's Slurm ran that still runs: step daemons, the job's Ray nodes and workers
    (whose titles hide their arguments), `prorl serve`; found by the Slurm config they inherited
    (the daemons themselves aside)."""
    daemons = {d.pid for d in slurm.daemons}
    conf = slurm.env["SLURM_CONF"]
    since = slurm.started
    found = []
    for proc in psutil.process_iter(["name", "create_time"]):
        try:
            # slurmstepd starts with an environment of its own: ours are those started since.
            step = proc.info["name"] == "slurmstepd" and proc.info["create_time"] >= since
            if proc.pid not in daemons and (step or proc.environ().get("SLURM_CONF") == conf):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _describe(procs: list[psutil.Process]) -> list[str]:
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            out.append(f"{proc.pid} {' '.join(proc.cmdline())[:160]}")
    return out


def test_the_slurm_recipe_serves_rollouts_on_a_one_node_slurm_and_leaves_nothing_running(
    slurm: Slurm, real_vllm: VLLMServer
) -> None:
    root = slurm.root
    llm = real_vllm.base_url.removeprefix("http://").removesuffix("/v1")
    rollouts = root / "rollouts.txt"
    assert real_vllm.api_key is not None
    key_file = root / "model.key"  # `prorl serve` on the head reads the model server's key from it
    write_key_file(key_file, real_vllm.api_key)
    command = (
        f"{sys.executable} {REPO}/examples/prorl_process_client.py --url $PRORL_URL --llm {llm} "
        f"--samples {SAMPLES} --max-tokens 24 > {rollouts}"
    )
    env = {
        **slurm.env,
        "PRORL_DIR": str(REPO),
        "VENV": str(Path(sys.executable).parent.parent),
        "SANDBOX": "",  # from the machine: bubblewrap here, where there is no Apptainer
        "RAY_PORT": str(free_port()),
        "RAY_CLIENT_PORT": str(free_port()),  # Ray's 10001 may be another test's head
        "SERVE_PORT": str(free_port()),
        "SLOTS_PER_NODE": "4",
        "CPUS_PER_NODE": "1",
        # This machine is busy with the rest of the suite: a raylet may miss its 30 s more than once.
        "HEAD_ATTEMPTS": "3",
        "LOG_DIR": str(root / "logs"),
        # The job's Ray keeps its files (and its cluster-address file) to itself.
        "RAY_TMPDIR": str(root / "raytmp"),
        "EXTRA_OVERRIDES": f"+sandbox.root_dir={root} tasks.math.options.agent.max_turns=2 llm.api_key_file={key_file}",
        "COMMAND": command,
    }
    env.pop("RAY_ADDRESS", None)
    submitted = subprocess.run(
        [_tool("sbatch") or "sbatch", "--parsable", "--nodes=1", "--exclusive=user", "--time=00:10:00",
         f"--output={root}/job.out", str(REPO / "examples" / "slurm" / "prorl_ray.sub")],
        env=env, cwd=root, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]

    deadline = time.monotonic() + 300
    state = slurm.job_state(job_id)
    while state in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
        assert time.monotonic() < deadline, f"job {job_id} still {state}\n{_job_logs(root)}"
        time.sleep(1)
        state = slurm.job_state(job_id)
    assert state == "COMPLETED", f"job {job_id} ended {state}\n{_job_logs(root)}\n{slurm.logs()}"

    printed = (root / "job.out").read_text()
    assert "sandbox bubblewrap" in printed or shutil.which("apptainer"), printed
    samples = re.findall(r"sample: reward=(\S+) finish=\S+ end_properly=\S+ turns=(\d+) generated_tokens=(\d+)",
                         rollouts.read_text())  # fmt: skip
    assert len(samples) == SAMPLES, rollouts.read_text() + _job_logs(root)
    assert all(int(turns) >= 1 and int(tokens) > 0 for _, turns, tokens in samples), samples
    assert _eventually_none(lambda: _describe(_leftovers(slurm))) == [], "the job left processes running"
    assert not sandbox_dirs(root), "the service closed every sandbox"


def _eventually_none(probe: Callable[[], list[str]], within_s: float = 30.0) -> list[str]:
    deadline = time.monotonic() + within_s
    while True:
        found = probe()
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def _job_logs(root: Path) -> str:
    parts = [root / "job.out", *sorted((root / "logs").glob("*.log"))]
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in parts if p.exists())
