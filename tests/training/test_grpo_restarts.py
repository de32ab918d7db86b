# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A real GRPO trainer killed three times in one run, and restarted each time by `prorl train`'s
own `run_grpo`: while it waits for step 2's rollouts, while it trains on step 3's, and while it
publishes step 4's policy (after the service took the publish, before the trainer heard back).

The trainer is the program `prorl train` runs (`python -m nemo_gym_prorl.integrations.trl.grpo`
in the model venv, its own process group, SIGKILLed) on a tiny Llama; the service is the scripted
one, over real HTTP on loopback. Through the three kills every step's rollouts run once, every
version is published once and in order, and the run ends with each of its steps published."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from support.scripted_rollout_service import ScriptedRolloutService, model_turn

from nemo_gym_prorl.integrations.trl.jobs import GrpoJob
from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.llm.policy import PolicySource, PolicyVersion
from nemo_gym_prorl.training import loop
from nemo_gym_prorl.training.config import TrainConfig
from nemo_gym_prorl.training.report import TrainReport
from nemo_gym_prorl.training.trainer_process import trainer_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
STEPS, GROUP = 4, 4
TRAINER = "nemo_gym_prorl.integrations.trl.grpo"


def script(job: dict[str, Any], index: int) -> dict[str, Any]:
    seed = int(job["instance"]["seed"])
    return {
        "reward": float(index % 2),
        "trajectory": {"messages": [model_turn([5 + seed, 6], [10 + index % 4, 2])]},
    }


@dataclass
class KillingService:
    """The scripted service behind a real HTTP server; it SIGKILLs the trainer at the planned
    points. Step k's prompt is seed k - 1, and its policy is version k + 1."""

    service: ScriptedRolloutService = field(default_factory=lambda: ScriptedRolloutService(script))
    kills: list[str] = field(default_factory=list)
    killed_pids: set[int] = field(default_factory=set)
    published_before_training_kill: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, method: str, path: str, body: bytes, client_port: int) -> httpx.Response:
        with self.lock:
            request = httpx.Request(method, f"http://service{path}", content=body)
            payload = json.loads(body or b"{}")
            if path == "/v1/policy" and payload.get("version") == 4 and "training (planned)" in self.kills:
                if self.training_kill_due():
                    # A loaded machine delayed the timer past step 3's training: the kill lands
                    # now, still before the step's publish reaches the service.
                    self.kill("training")
                    return httpx.Response(503, json={"error": "the trainer was killed"})
                if not self.sent_by_live_trainer(client_port):
                    # The timer's kill landed while this publish was on its way, from the trainer
                    # it killed: dropped, so the kill stays one before the publish, as planned.
                    return httpx.Response(503, json={"error": "the trainer was killed"})
            if path == "/v1/policy" and payload.get("version") == 5 and "publishing" not in self.kills:
                self.service.handle(request)  # the service takes it ...
                self.kill("publishing")  # ... and the trainer dies before hearing back
                return httpx.Response(200, json={"version": 5})
            response = self.service.handle(request)
            if path == "/v1/rollouts" and self.seeds(payload["jobs"]) == {1} and "waiting" not in self.kills:
                self.service.unfinished.update(response.json()["ids"])  # step 2's rollouts keep running
            if path == "/v1/rollouts/wait":
                if set(payload["ids"]) & self.service.unfinished:
                    self.kill("waiting")  # killed while it waits; the rollouts then finish
                    self.service.unfinished.clear()
                elif self.seeds_of(payload["ids"]) == {2} and "training" not in self.kills:
                    # Step 3's results go back; the trainer is killed while it trains on them.
                    self.published_before_training_kill = [p["version"] for p in self.service.policies]
                    threading.Timer(0.05, self.kill_training).start()
                    self.kills.append("training (planned)")
            return response

    def seeds(self, jobs: list[dict[str, Any]]) -> set[int]:
        return {int(j["instance"]["seed"]) for j in jobs}

    def seeds_of(self, ids: list[str]) -> set[int]:
        return self.seeds([self.service.jobs[int(i.split("-")[1])] for i in ids])

    def training_kill_due(self) -> bool:
        return "training (planned)" in self.kills and "training" not in self.kills

    def kill_training(self) -> None:
        with self.lock:
            if self.training_kill_due():
                self.kill("training")

    def trainers(self) -> list[psutil.Process]:
        """The running trainers. One SIGKILLed a moment ago can still be tearing down, its sockets
        open (and its last request still to be read): it is no longer one of them."""
        return [
            p
            for p in psutil.Process().children(recursive=True)
            if p.pid not in self.killed_pids and TRAINER in " ".join(p.cmdline())
        ]

    def sent_by_live_trainer(self, client_port: int) -> bool:
        """Whether the connection on `client_port` is a trainer's that is still running."""
        with contextlib.suppress(psutil.NoSuchProcess):
            for trainer in self.trainers():
                if any(c.laddr and c.laddr.port == client_port for c in trainer.net_connections("tcp")):
                    return True
        return False

    def kill(self, point: str) -> None:
        trainers = self.trainers()
        assert len(trainers) == 1, f"one trainer expected at the {point} kill, found {trainers}"
        os.killpg(trainers[0].pid, signal.SIGKILL)  # its own group: the trainer and nothing else
        self.killed_pids.add(trainers[0].pid)
        self.kills.append(point)

    async def served(self) -> PolicyVersion | None:
        if not self.service.policies:
            return None
        last = self.service.policies[-1]
        return PolicyVersion(
            version=last["version"],
            served_name=f"policy-v{last['version']}",
            source=PolicySource(**{k: last[k] for k in ("adapter_path", "weights_path") if k in last}),
            published_at_unix_s=0.0,
        )


@pytest.fixture
def http_service() -> Iterator[tuple[KillingService, str]]:
    killing = KillingService()

    class Handler(BaseHTTPRequestHandler):
        def do(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            response = killing.handle(self.command, self.path, body, self.client_address[1])
            self.send_response(response.status_code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(response.content)))
            self.end_headers()
            self.wfile.write(response.content)

        do_GET = do_POST = do_DELETE = do

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield killing, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_trainer_killed_waiting_training_and_publishing_runs_each_rollout_once_and_publishes_each_version_once(
    http_service: tuple[KillingService, str], tmp_path: Path
) -> None:
    layout = EmbeddedLayout.default()
    if not layout.python.exists():
        pytest.skip(f"the model venv is not built under {layout.home}: run `prorl model setup`")
    killing, url = http_service
    subprocess.run(
        [str(layout.python), "-c", "import sys; from tests.support.tiny_llama import save_tiny_llama; "
         "save_tiny_llama(sys.argv[1])", str(tmp_path / "model")],
        env={**trainer_env(), "PYTHONPATH": str(REPO)}, cwd=REPO, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    job = GrpoJob(
        model_dir=str(tmp_path / "model"),
        service_url=url,
        prompts=str(tmp_path / "prompts.jsonl"),
        output_dir=str(tmp_path / "policies"),
        task="math",
        optimizer={"learning_rate": 1e-2, "batch_size": 4},
        lora={"r": 4, "alpha": 8},
        steps=STEPS,
        prompts_per_step=1,
        num_generations=GROUP,
        sampling_params={"temperature": 1.0, "max_tokens": 8},
        version_offset=1,
        journal=str(tmp_path / "journal.json"),
    )
    report = TrainReport.start(TrainConfig())
    rows = [{"seed": seed} for seed in range(STEPS)]
    before = {p.pid for p in psutil.Process().children(recursive=True)}

    done = asyncio.run(
        loop.run_grpo(job, rows, tmp_path, report, lambda _: None, restarts=3, served=killing.served)
    )

    assert [k for k in killing.kills if "planned" not in k] == ["waiting", "training", "publishing"]
    assert 4 not in killing.published_before_training_kill  # it died training step 3, before its publish
    seeds = [int(j["instance"]["seed"]) for j in killing.service.jobs]
    assert {s: seeds.count(s) for s in set(seeds)} == {
        s: GROUP for s in range(STEPS)
    }  # each rollout ran once
    assert [p["version"] for p in killing.service.policies] == [2, 3, 4, 5]  # each version published once
    assert [(p["version"], p.get("event_lost", False)) for p in done["published"]] == [
        (2, False),
        (3, False),
        (4, False),
        (5, True),  # published as the trainer died: taken from the service, not asked for again
    ]
    # published as full weights (the default): the restart went on from the adapter saved beside them
    assert all("weights_path" in p for p in killing.service.policies)
    assert done["published"][-1]["adapter_path"] == str(tmp_path / "policies" / "policy-v000005")
    assert [s["step"] for s in report.grpo_steps] == [1, 2, 3]
    assert {p.pid for p in psutil.Process().children(recursive=True)} - before == set()
